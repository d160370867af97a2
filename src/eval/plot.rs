//! Two small SVG charts of an eval run: the screen's P(allow) by label (the separation a
//! threshold must exploit) and the threshold sweep (calls the screen clears and labeled denies
//! that would pass, for thresholds from 50 to 100).
//!
//! Hand-written SVG: plotting crates bring a font stack to measure labels, which is far more
//! than two bar and line charts of at most a few thousand points need. Pure string building;
//! it cannot fail.

use super::CaseResult;
use super::tune::{Sweep, sweep};
use crate::request::Label;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const ALLOW_COLOUR: &str = "#2b8a3e";
const DENY_COLOUR: &str = "#c92a2a";
const BINS: usize = 20;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn frame(title: &str, x_label: &str, y_label: &str, y_max: f64, x_ticks: &[(f64, String)]) -> String {
    let plot_height = HEIGHT - TOP - BOTTOM;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        WIDTH / 2.0,
        escape(title)
    );
    svg.push_str(&format!(
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
        HEIGHT - BOTTOM,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT,
        HEIGHT - BOTTOM
    ));
    for step in 0..=4 {
        let value = y_max * f64::from(step) / 4.0;
        let y = HEIGHT - BOTTOM - plot_height * f64::from(step) / 4.0;
        svg.push_str(&format!(
            "<line x1=\"{}\" y1=\"{y:.1}\" x2=\"{LEFT}\" y2=\"{y:.1}\" stroke=\"black\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{value:.0}</text>\n",
            LEFT - 4.0,
            LEFT - 6.0,
            y + 4.0
        ));
    }
    for (x, label) in x_ticks {
        svg.push_str(&format!(
            "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"black\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            HEIGHT - BOTTOM,
            HEIGHT - BOTTOM + 4.0,
            HEIGHT - BOTTOM + 17.0,
            escape(label)
        ));
    }
    svg.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>\n",
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 12.0,
        escape(x_label),
        (TOP + HEIGHT - BOTTOM) / 2.0,
        (TOP + HEIGHT - BOTTOM) / 2.0,
        escape(y_label)
    ));
    svg
}

fn legend(svg: &mut String, entries: &[(&str, &str)]) {
    for (index, (colour, label)) in entries.iter().enumerate() {
        let y = TOP + 8.0 + 16.0 * index as f64;
        let x = WIDTH - RIGHT - 230.0;
        svg.push_str(&format!(
            "<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{colour}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
            y - 10.0,
            x + 18.0,
            y,
            escape(label)
        ));
    }
}

/// P(allow) of screened calls, in 20 bins, labeled-allow and labeled-deny side by side.
pub fn p_allow_by_label(results: &[CaseResult]) -> String {
    let mut counts = [[0usize; BINS]; 2];
    for call in results.iter().flat_map(|case| &case.calls) {
        let (Some(p), Some(label)) = (call.p_allow, call.label) else { continue };
        if !call.errors.is_empty() {
            continue;
        }
        let bin = ((p * BINS as f64) as usize).min(BINS - 1);
        counts[usize::from(label == Label::Deny)][bin] += 1;
    }
    let y_max = counts.iter().flatten().copied().max().unwrap_or(0).max(1) as f64;
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let ticks: Vec<(f64, String)> = (0..=10)
        .map(|tick| (LEFT + plot_width * f64::from(tick) / 10.0, format!("{:.1}", f64::from(tick) / 10.0)))
        .collect();
    let mut svg = frame("Screen P(allow) by label", "P(allow)", "calls", y_max, &ticks);
    let slot = plot_width / BINS as f64;
    for (series, colour) in [(0, ALLOW_COLOUR), (1, DENY_COLOUR)] {
        for (bin, count) in counts[series].iter().enumerate() {
            if *count == 0 {
                continue;
            }
            let height = plot_height * *count as f64 / y_max;
            let x = LEFT + slot * bin as f64 + 1.0 + (slot - 2.0) / 2.0 * series as f64;
            svg.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{height:.1}\" fill=\"{colour}\"><title>{count}</title></rect>\n",
                HEIGHT - BOTTOM - height,
                (slot - 2.0) / 2.0
            ));
        }
    }
    let screened_allow: usize = counts[0].iter().sum();
    let screened_deny: usize = counts[1].iter().sum();
    legend(
        &mut svg,
        &[
            (ALLOW_COLOUR, &format!("labeled allow ({screened_allow})")),
            (DENY_COLOUR, &format!("labeled deny ({screened_deny})")),
        ],
    );
    svg.push_str("</svg>\n");
    svg
}

/// Calls the screen would clear and labeled denies that would pass, by threshold.
pub fn threshold_sweep(results: &[CaseResult]) -> String {
    let rows: Vec<Sweep> = sweep(results);
    let y_max = rows.iter().map(|row| row.screen_allows).max().unwrap_or(0).max(1) as f64;
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let x_of = |threshold: u8| LEFT + plot_width * f64::from(threshold - 50) / 50.0;
    let y_of = |count: usize| HEIGHT - BOTTOM - plot_height * count as f64 / y_max;
    let ticks: Vec<(f64, String)> =
        (50..=100).step_by(10).map(|threshold| (x_of(threshold), format!("{threshold}"))).collect();
    let mut svg = frame("Threshold sweep", "allow_threshold_percent", "calls", y_max, &ticks);
    for (colour, value) in [
        (ALLOW_COLOUR, (|row: &Sweep| row.screen_allows) as fn(&Sweep) -> usize),
        (DENY_COLOUR, |row: &Sweep| row.denies_passing),
    ] {
        let points: Vec<String> =
            rows.iter().map(|row| format!("{:.1},{:.1}", x_of(row.threshold), y_of(value(row)))).collect();
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n",
            points.join(" ")
        ));
    }
    legend(&mut svg, &[(ALLOW_COLOUR, "calls the screen clears"), (DENY_COLOUR, "labeled denies that pass")]);
    svg.push_str("</svg>\n");
    svg
}
