//! The SVG charts of an eval run: the screen's P(allow) by label, the threshold sweep, the ROC
//! curve of P(allow), decisions and automation by category, and the per-case latency histogram.
//!
//! Every chart uses 1-2-5 tick steps with its range fitted to the data (and to the thresholds it
//! marks), marks the configured and the recommended screen threshold where a threshold means
//! something, and says in a caption how many calls it leaves out and why (gate-decided, errors,
//! unlabeled). A chart with nothing to draw says "no data" and why, never an empty frame that
//! looks like a result. It only draws: it never decides or recommends anything itself.
//!
//! Hand-written SVG: plotting crates bring a font stack to measure labels, which is far more
//! than a few bar and line charts of at most a few thousand points need. Pure string building;
//! it cannot fail.

use std::collections::BTreeMap;

use super::tune::{Sweep, sweep};
use super::{CallResult, CaseResult};
use crate::decision::Decision;
use crate::request::{Label, Stage};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 380.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 24.0;
/// Room above the plot for the title and a legend row.
const TOP: f64 = 56.0;
/// Room under the x axis for its tick labels, its title and two caption lines.
const BOTTOM: f64 = 84.0;
const ALLOW_COLOUR: &str = "#2b8a3e";
const DENY_COLOUR: &str = "#c92a2a";
const ASK_COLOUR: &str = "#f08c00";
const ERROR_COLOUR: &str = "#495057";
const CONFIGURED_COLOUR: &str = "#1c7ed6";
const RECOMMENDED_COLOUR: &str = "#9c36b5";
const GRID_COLOUR: &str = "#e9ecef";
const BINS: usize = 20;

/// The screen thresholds a chart marks, in per cent (`allow_threshold_percent`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Thresholds {
    /// From the config the eval ran with; `None` when it had no screen.
    pub configured: Option<u8>,
    /// `permit tune`'s recommendation for this run; `None` when it makes none.
    pub recommended: Option<u8>,
}

/// One chart: the file it is written to, and its SVG.
#[derive(Clone, Debug, PartialEq)]
pub struct Plot {
    /// File name beside the report, and the element id in `report.html` (without `.svg`).
    pub name: &'static str,
    pub title: &'static str,
    pub svg: String,
    /// Calls the chart does not show, by reason (`gate-decided`, `errors`, `unlabeled`, …).
    pub left_out: BTreeMap<&'static str, usize>,
    /// Whether the chart had nothing to draw.
    pub no_data: bool,
}

/// An axis range snapped outwards to multiples of a 1-2-5 step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axis {
    pub min: f64,
    pub max: f64,
    pub step: f64,
}

/// The 1-2-5 step (1, 2, 5, 10, 20, 50, …, also below 1) that cuts `range` into about `target`
/// intervals.
pub fn nice_step(range: f64, target: usize) -> f64 {
    let raw = if range.is_finite() && range > 0.0 { range / target.max(1) as f64 } else { 1.0 };
    let magnitude = 10f64.powf(raw.log10().floor());
    let normalised = raw / magnitude;
    let factor = if normalised <= 1.0 {
        1.0
    } else if normalised <= 2.0 {
        2.0
    } else if normalised <= 5.0 {
        5.0
    } else {
        10.0
    };
    factor * magnitude
}

impl Axis {
    /// An axis covering `low..=high` with about `target` intervals of a 1-2-5 step. An empty
    /// range (one value) widens to one step around it.
    pub fn fit(low: f64, high: f64, target: usize) -> Axis {
        let (low, high) = if low <= high { (low, high) } else { (high, low) };
        let step = nice_step(high - low, target);
        let mut min = (low / step).floor() * step;
        let mut max = (high / step).ceil() * step;
        if max - min < step / 2.0 {
            min -= step;
            max += step;
        }
        Axis { min: clean(min), max: clean(max), step }
    }

    /// An axis for counts: starts at 0 and never steps by less than one.
    pub fn counts(high: usize) -> Axis {
        let axis = Axis::fit(0.0, high.max(1) as f64, 5);
        if axis.step < 1.0 { Axis { min: 0.0, max: axis.max.ceil().max(1.0), step: 1.0 } } else { axis }
    }

    /// Narrows the axis to `floor..=ceiling` (for quantities with hard limits, such as a
    /// percentage), keeping it on its step.
    fn clamp(self, floor: f64, ceiling: f64) -> Axis {
        Axis { min: self.min.max(floor), max: self.max.min(ceiling), step: self.step }
    }

    pub fn ticks(&self) -> Vec<f64> {
        let first = (self.min / self.step).ceil() as i64;
        let last = (self.max / self.step + 1e-9).floor() as i64;
        (first..=last).map(|index| clean(index as f64 * self.step)).collect()
    }

    /// A tick label with just the decimals the step needs (10, 20 / 0.5, 1.0 / 0.25 …).
    pub fn label(&self, value: f64) -> String {
        let decimals = if self.step >= 1.0 { 0 } else { (-self.step.log10().floor()) as usize };
        format!("{value:.decimals$}")
    }

    fn span(&self) -> f64 {
        (self.max - self.min).max(f64::MIN_POSITIVE)
    }
}

/// Rounds away binary noise such as 0.30000000000000004 so labels and comparisons stay clean.
fn clean(value: f64) -> f64 {
    (value * 1e9).round() / 1e9
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The plotting area of one chart and the mapping from data to pixels.
struct Frame {
    height: f64,
    x: Axis,
    y: Axis,
}

impl Frame {
    fn new(x: Axis, y: Axis) -> Frame {
        Frame { height: HEIGHT, x, y }
    }

    fn x(&self, value: f64) -> f64 {
        LEFT + (WIDTH - LEFT - RIGHT) * (value - self.x.min) / self.x.span()
    }

    fn y(&self, value: f64) -> f64 {
        let bottom = self.height - BOTTOM;
        bottom - (bottom - TOP) * (value - self.y.min) / self.y.span()
    }

    fn bottom(&self) -> f64 {
        self.height - BOTTOM
    }

    /// The SVG header, title, grid, axes, ticks and axis titles.
    fn open(&self, name: &str, title: &str, x_label: &str, y_label: &str) -> String {
        let mut svg = open_svg(name, title, self.height);
        for tick in self.y.ticks() {
            let y = self.y(tick);
            svg.push_str(&format!(
                "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{GRID_COLOUR}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                self.y.label(tick)
            ));
        }
        for tick in self.x.ticks() {
            let x = self.x(tick);
            svg.push_str(&format!(
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"black\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
                self.bottom(),
                self.bottom() + 4.0,
                self.bottom() + 17.0,
                self.x.label(tick)
            ));
        }
        svg.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom:.1}\" stroke=\"black\"/><line x1=\"{LEFT}\" y1=\"{bottom:.1}\" x2=\"{:.1}\" y2=\"{bottom:.1}\" stroke=\"black\"/>\n",
            WIDTH - RIGHT,
            bottom = self.bottom()
        ));
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n<text x=\"16\" y=\"{mid:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {mid:.1})\">{}</text>\n",
            (LEFT + WIDTH - RIGHT) / 2.0,
            self.bottom() + 34.0,
            escape(x_label),
            escape(y_label),
            mid = (TOP + self.bottom()) / 2.0
        ));
        svg
    }

    /// A dashed vertical line at a threshold, labeled above the plot.
    fn marker(&self, value: f64, label: &str, colour: &str, row: usize) -> String {
        let x = self.x(value);
        let anchor = if x > WIDTH - RIGHT - 120.0 { "end" } else { "start" };
        let offset = if anchor == "end" { -4.0 } else { 4.0 };
        format!(
            "<g class=\"threshold\"><line x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\" text-anchor=\"{anchor}\" stroke=\"white\" stroke-width=\"4\" paint-order=\"stroke\">{}</text></g>\n",
            self.bottom(),
            x + offset,
            TOP + 12.0 + 14.0 * row as f64,
            escape(label)
        )
    }

    fn thresholds(&self, thresholds: Thresholds, to_axis: impl Fn(u8) -> f64) -> String {
        let mut svg = String::new();
        let mut row = 0;
        for (value, name, colour) in [
            (thresholds.configured, "configured", CONFIGURED_COLOUR),
            (thresholds.recommended, "recommended", RECOMMENDED_COLOUR),
        ] {
            if let Some(value) = value {
                svg.push_str(&self.marker(to_axis(value), &format!("{name} {value}"), colour, row));
                row += 1;
            }
        }
        svg
    }

    fn caption(&self, lines: &[String]) -> String {
        caption_at(self.height, lines)
    }
}

fn open_svg(name: &str, title: &str, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" data-plot=\"{name}\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n<title>{}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        escape(title),
        WIDTH / 2.0,
        escape(title)
    )
}

fn caption_at(height: f64, lines: &[String]) -> String {
    lines
        .iter()
        .enumerate()
        .map(|(index, line)| {
            format!(
                "<text class=\"caption\" x=\"{LEFT}\" y=\"{:.1}\" fill=\"#495057\" font-size=\"11\">{}</text>\n",
                height - 24.0 + 14.0 * index as f64,
                escape(line)
            )
        })
        .collect()
}

/// One row of legend entries between the title and the plot, so it never covers data or the
/// threshold labels.
fn legend(entries: &[(&str, String)]) -> String {
    let mut svg = String::new();
    let mut x = LEFT;
    for (colour, label) in entries {
        svg.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            TOP - 22.0,
            x + 16.0,
            TOP - 12.0,
            escape(label)
        ));
        // Wide enough for the label at 12 px sans-serif (about 7 px a character).
        x += 32.0 + 7.0 * label.chars().count() as f64;
    }
    svg
}

/// The explicit empty state: a frame that says there is nothing to plot, and why.
fn no_data(name: &'static str, title: &'static str, why: &str, left_out: BTreeMap<&'static str, usize>) -> Plot {
    let mut svg = open_svg(name, title, HEIGHT);
    svg.push_str(&format!(
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#f8f9fa\" stroke=\"#ced4da\" stroke-dasharray=\"4 4\"/>\n<text class=\"no-data\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"16\" fill=\"#495057\">no data</text>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#495057\">{}</text>\n",
        WIDTH - LEFT - RIGHT,
        HEIGHT - TOP - BOTTOM,
        (LEFT + WIDTH - RIGHT) / 2.0,
        (TOP + HEIGHT - BOTTOM) / 2.0 - 6.0,
        (LEFT + WIDTH - RIGHT) / 2.0,
        (TOP + HEIGHT - BOTTOM) / 2.0 + 14.0,
        escape(why)
    ));
    svg.push_str(&caption_at(HEIGHT, &[left_out_line(&left_out, 0)]));
    svg.push_str("</svg>\n");
    Plot { name, title, svg, left_out, no_data: true }
}

fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// "plotted 12 calls; left out: 3 gate-decided, 2 with errors, 0 unlabeled".
fn left_out_line(left_out: &BTreeMap<&'static str, usize>, plotted: usize) -> String {
    let parts: Vec<String> = left_out.iter().map(|(reason, count)| format!("{count} {reason}")).collect();
    format!("plotted {}; left out: {}", plural(plotted, "call", "calls"), parts.join(", "))
}

/// Why a call is not a labeled screen score, checked in this order so each call counts once.
fn exclusion(call: &CallResult) -> Option<&'static str> {
    if !call.errors.is_empty() {
        Some("with errors")
    } else if call.p_allow.is_none() && call.stage == Stage::Gate {
        Some("gate-decided")
    } else if call.p_allow.is_none() {
        Some("not screened or without P(allow)")
    } else if call.label.is_none() {
        Some("unlabeled")
    } else {
        None
    }
}

/// Labeled screen scores `(P(allow), label)` and the calls left out, by reason. The three
/// reasons the issue names are always present, at 0 when none applied.
fn labeled_scores(results: &[CaseResult]) -> (Vec<(f64, Label)>, BTreeMap<&'static str, usize>) {
    let mut left_out: BTreeMap<&'static str, usize> =
        [("gate-decided", 0), ("with errors", 0), ("unlabeled", 0)].into_iter().collect();
    let mut scores = Vec::new();
    for call in results.iter().flat_map(|case| &case.calls) {
        match (exclusion(call), call.p_allow, call.label) {
            (Some(reason), _, _) => *left_out.entry(reason).or_default() += 1,
            (None, Some(p), Some(label)) => scores.push((p, label)),
            (None, _, _) => {}
        }
    }
    (scores, left_out)
}

fn threshold_lines(thresholds: Thresholds) -> String {
    let show = |value: Option<u8>| value.map(|value| value.to_string()).unwrap_or_else(|| "none".to_owned());
    format!("thresholds: configured {}, recommended {}", show(thresholds.configured), show(thresholds.recommended))
}

/// P(allow) of labeled screened calls in 20 bins over the fitted range, labeled allow and
/// labeled deny side by side, with the thresholds marked.
pub fn p_allow_by_label(results: &[CaseResult], thresholds: Thresholds) -> Plot {
    const NAME: &str = "p_allow";
    const TITLE: &str = "Screen P(allow) by label";
    let (scores, left_out) = labeled_scores(results);
    if scores.is_empty() {
        return no_data(NAME, TITLE, "no labeled call has a screen P(allow)", left_out);
    }
    let percents = scores.iter().map(|(p, _)| p * 100.0);
    let marks = [thresholds.configured, thresholds.recommended].into_iter().flatten().map(f64::from);
    let all: Vec<f64> = percents.chain(marks).collect();
    let low = all.iter().copied().fold(f64::INFINITY, f64::min);
    let high = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let x = Axis::fit(low, high, 10).clamp(0.0, 100.0);
    // About 20 bins of a 1-2-5 width, so bin edges fall on the ticks.
    let width = nice_step(x.span(), BINS);
    let bins = ((x.span() / width).round() as usize).max(1);
    let mut counts = vec![vec![0usize; bins]; 2];
    for (p, label) in &scores {
        let bin = (((p * 100.0 - x.min) / width).floor().max(0.0) as usize).min(bins - 1);
        counts[usize::from(*label == Label::Deny)][bin] += 1;
    }
    let y = Axis::counts(counts.iter().flatten().copied().max().unwrap_or(0));
    let frame = Frame::new(x, y);
    let mut svg = frame.open(NAME, TITLE, "P(allow), per cent", "calls");
    let slot = frame.x(x.min + width) - frame.x(x.min);
    for (series, colour) in [(0, ALLOW_COLOUR), (1, DENY_COLOUR)] {
        for (bin, count) in counts[series].iter().enumerate() {
            if *count == 0 {
                continue;
            }
            let top = frame.y(*count as f64);
            let left = frame.x(x.min + width * bin as f64) + 1.0 + (slot - 2.0) / 2.0 * series as f64;
            svg.push_str(&format!(
                "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{count}</title></rect>\n",
                ((slot - 2.0) / 2.0).max(0.5),
                frame.bottom() - top
            ));
        }
    }
    svg.push_str(&frame.thresholds(thresholds, f64::from));
    let allow: usize = counts[0].iter().sum();
    let deny: usize = counts[1].iter().sum();
    svg.push_str(&legend(&[
        (ALLOW_COLOUR, format!("labeled allow ({allow})")),
        (DENY_COLOUR, format!("labeled deny ({deny})")),
    ]));
    svg.push_str(&frame.caption(&[left_out_line(&left_out, scores.len()), threshold_lines(thresholds)]));
    svg.push_str("</svg>\n");
    Plot { name: NAME, title: TITLE, svg, left_out, no_data: false }
}

/// Calls the screen would clear and labeled denies that would pass, by threshold, over the
/// thresholds where something changes.
pub fn threshold_sweep(results: &[CaseResult], thresholds: Thresholds) -> Plot {
    const NAME: &str = "sweep";
    const TITLE: &str = "Threshold sweep";
    // The sweep counts every screened call without an error, labeled or not.
    let mut left_out: BTreeMap<&'static str, usize> =
        [("gate-decided", 0), ("with errors", 0), ("unlabeled", 0)].into_iter().collect();
    let mut swept = 0;
    let mut unlabeled_swept = 0;
    let mut lowest_allow: Option<f64> = None;
    for call in results.iter().flat_map(|case| &case.calls) {
        match exclusion(call) {
            Some(reason) if reason != "unlabeled" => *left_out.entry(reason).or_default() += 1,
            reason => {
                swept += 1;
                unlabeled_swept += usize::from(reason.is_some());
                if call.screen_choice.as_deref() == Some("allow")
                    && let Some(p) = call.p_allow
                {
                    lowest_allow = Some(lowest_allow.map_or(p, |low: f64| low.min(p)));
                }
            }
        }
    }
    if swept == 0 {
        return no_data(NAME, TITLE, "no call has a screen P(allow)", left_out);
    }
    let rows: Vec<Sweep> = sweep(results);
    // From the lowest P(allow) the screen chose allow with (below it nothing changes) or the
    // lowest threshold marked, whichever is lower; the screen's rule starts at 50.
    let low =
        [lowest_allow.map(|p| p * 100.0), thresholds.configured.map(f64::from), thresholds.recommended.map(f64::from)]
            .into_iter()
            .flatten()
            .fold(100.0, f64::min);
    let x = Axis::fit(low.clamp(50.0, 99.0), 100.0, 10).clamp(50.0, 100.0);
    let shown: Vec<&Sweep> = rows.iter().filter(|row| f64::from(row.threshold) >= x.min).collect();
    let y = Axis::counts(shown.iter().map(|row| row.screen_allows).max().unwrap_or(0));
    let frame = Frame::new(x, y);
    let mut svg = frame.open(NAME, TITLE, "allow_threshold_percent", "calls");
    for (colour, value) in [
        (ALLOW_COLOUR, (|row: &Sweep| row.screen_allows) as fn(&Sweep) -> usize),
        (DENY_COLOUR, |row: &Sweep| row.denies_passing),
    ] {
        let points: Vec<String> = shown
            .iter()
            .map(|row| format!("{:.1},{:.1}", frame.x(f64::from(row.threshold)), frame.y(value(row) as f64)))
            .collect();
        svg.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n",
            points.join(" ")
        ));
    }
    svg.push_str(&frame.thresholds(thresholds, f64::from));
    svg.push_str(&legend(&[
        (ALLOW_COLOUR, "calls the screen clears".to_owned()),
        (DENY_COLOUR, "labeled denies that pass".to_owned()),
    ]));
    // Unlabeled calls are not left out here: they are calls the screen would clear too.
    let line = left_out_line(&left_out, swept).replacen(
        "; left out",
        &format!(", {unlabeled_swept} of them unlabeled (counted in \"clears\" only); left out"),
        1,
    );
    svg.push_str(&frame.caption(&[line, threshold_lines(thresholds)]));
    svg.push_str("</svg>\n");
    Plot { name: NAME, title: TITLE, svg, left_out, no_data: false }
}

/// One point of the ROC curve: the share of labeled allows and of labeled denies with
/// P(allow) at or above a threshold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RocPoint {
    pub threshold: f64,
    pub false_positive_rate: f64,
    pub true_positive_rate: f64,
}

/// The ROC curve of P(allow) as a score for "labeled allow", from (0, 0) to (1, 1), and its
/// area. `None` unless both labels have at least one score.
pub fn roc_curve(scores: &[(f64, Label)]) -> Option<(Vec<RocPoint>, f64)> {
    let positives = scores.iter().filter(|(_, label)| *label == Label::Allow).count();
    let negatives = scores.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut sorted: Vec<(f64, Label)> = scores.to_vec();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut points = vec![RocPoint { threshold: f64::INFINITY, false_positive_rate: 0.0, true_positive_rate: 0.0 }];
    let (mut true_positives, mut false_positives) = (0usize, 0usize);
    let mut index = 0;
    while index < sorted.len() {
        // Ties move together: one threshold admits all of them at once.
        let threshold = sorted[index].0;
        while index < sorted.len() && sorted[index].0 == threshold {
            match sorted[index].1 {
                Label::Allow => true_positives += 1,
                Label::Deny => false_positives += 1,
            }
            index += 1;
        }
        points.push(RocPoint {
            threshold,
            false_positive_rate: false_positives as f64 / negatives as f64,
            true_positive_rate: true_positives as f64 / positives as f64,
        });
    }
    let area = points
        .windows(2)
        .map(|pair| {
            (pair[1].false_positive_rate - pair[0].false_positive_rate)
                * (pair[1].true_positive_rate + pair[0].true_positive_rate)
                / 2.0
        })
        .sum();
    Some((points, area))
}

/// The rates at one threshold (per cent): the point the screen operates at.
fn rates_at(scores: &[(f64, Label)], threshold: u8) -> (f64, f64) {
    let cut = f64::from(threshold) / 100.0;
    let share = |wanted: Label| {
        let total = scores.iter().filter(|(_, label)| *label == wanted).count().max(1);
        scores.iter().filter(|(p, label)| *label == wanted && *p >= cut).count() as f64 / total as f64
    };
    (share(Label::Deny), share(Label::Allow))
}

/// The ROC curve of the screen's P(allow) over labeled screened calls, with the operating
/// points of the configured and the recommended threshold.
pub fn roc(results: &[CaseResult], thresholds: Thresholds) -> Plot {
    const NAME: &str = "roc";
    const TITLE: &str = "ROC of the screen's P(allow)";
    let (scores, left_out) = labeled_scores(results);
    let allows = scores.iter().filter(|(_, label)| *label == Label::Allow).count();
    let denies = scores.len() - allows;
    let Some((points, area)) = roc_curve(&scores) else {
        return no_data(
            NAME,
            TITLE,
            &format!("needs screened calls of both labels: {allows} labeled allow, {denies} labeled deny"),
            left_out,
        );
    };
    let axis = Axis::fit(0.0, 1.0, 5);
    let frame = Frame::new(axis, axis);
    let mut svg = frame.open(
        NAME,
        TITLE,
        "labeled denies at or above the threshold (false positive rate)",
        "labeled allows at or above (true positive rate)",
    );
    svg.push_str(&format!(
        "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#adb5bd\" stroke-dasharray=\"3 3\"/>\n",
        frame.x(0.0),
        frame.y(0.0),
        frame.x(1.0),
        frame.y(1.0)
    ));
    let path: Vec<String> = points
        .iter()
        .map(|point| format!("{:.1},{:.1}", frame.x(point.false_positive_rate), frame.y(point.true_positive_rate)))
        .collect();
    svg.push_str(&format!(
        "<polyline class=\"roc\" fill=\"none\" stroke=\"{ALLOW_COLOUR}\" stroke-width=\"2\" points=\"{}\"/>\n",
        path.join(" ")
    ));
    let mut row = 0;
    for (value, name, colour) in [
        (thresholds.configured, "configured", CONFIGURED_COLOUR),
        (thresholds.recommended, "recommended", RECOMMENDED_COLOUR),
    ] {
        let Some(value) = value else { continue };
        let (false_rate, true_rate) = rates_at(&scores, value);
        let (x, y) = (frame.x(false_rate), frame.y(true_rate));
        svg.push_str(&format!(
            "<g class=\"threshold\"><circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\" stroke=\"white\" stroke-width=\"4\" paint-order=\"stroke\">{name} {value}: {:.0} % of allows, {:.0} % of denies</text></g>\n",
            frame.x(0.35),
            frame.y(0.3) + 16.0 * row as f64,
            true_rate * 100.0,
            false_rate * 100.0
        ));
        row += 1;
    }
    svg.push_str(&legend(&[(ALLOW_COLOUR, format!("area under the curve {area:.3}"))]));
    svg.push_str(&frame.caption(&[
        format!("{}; {allows} labeled allow, {denies} labeled deny", left_out_line(&left_out, scores.len())),
        "score: P(allow) alone (the screen also needs its own choice to be allow)".to_owned(),
    ]));
    svg.push_str("</svg>\n");
    Plot { name: NAME, title: TITLE, svg, left_out, no_data: false }
}

/// Final decisions per category (allow / ask / deny, and calls with errors apart), stacked, with
/// false allows called out beside the bar.
pub fn categories(results: &[CaseResult]) -> Plot {
    const NAME: &str = "categories";
    const TITLE: &str = "Decisions by category";
    let mut rows: BTreeMap<String, [usize; 5]> = BTreeMap::new();
    for case in results {
        let category = case.category.clone().unwrap_or_else(|| "(none)".to_owned());
        let row = rows.entry(category).or_default();
        for call in &case.calls {
            let column = if !call.errors.is_empty() {
                3
            } else {
                match call.decision {
                    Decision::Allow => 0,
                    Decision::Ask => 1,
                    Decision::Deny => 2,
                }
            };
            row[column] += 1;
            if call.label == Some(Label::Deny) && call.decision == Decision::Allow {
                row[4] += 1;
            }
        }
    }
    let left_out: BTreeMap<&'static str, usize> =
        [("gate-decided", 0), ("with errors", 0), ("unlabeled", 0)].into_iter().collect();
    if rows.values().all(|row| row[..4].iter().sum::<usize>() == 0) {
        return no_data(NAME, TITLE, "the run has no calls", left_out);
    }
    let bar = 22.0;
    let height = TOP + 8.0 + (bar + 10.0) * rows.len() as f64 + BOTTOM;
    let label_width = 170.0;
    let x = Axis::counts(rows.values().map(|row| row[..4].iter().sum()).max().unwrap_or(0));
    let plot_left = LEFT + label_width - 40.0;
    // Room on the right for "100 % automated, 12 err · 2 false allows".
    let plot_right = WIDTH - RIGHT - 240.0;
    let scale = |value: f64| plot_left + (plot_right - plot_left) * (value - x.min) / x.span();
    let mut svg = open_svg(NAME, TITLE, height);
    let bottom = height - BOTTOM;
    for tick in x.ticks() {
        let at = scale(tick);
        svg.push_str(&format!(
            "<line x1=\"{at:.1}\" y1=\"{:.1}\" x2=\"{at:.1}\" y2=\"{bottom:.1}\" stroke=\"{GRID_COLOUR}\"/><text x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            TOP,
            bottom + 17.0,
            x.label(tick)
        ));
    }
    svg.push_str(&format!(
        "<line x1=\"{plot_left:.1}\" y1=\"{bottom:.1}\" x2=\"{plot_right:.1}\" y2=\"{bottom:.1}\" stroke=\"black\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">calls</text>\n",
        (plot_left + plot_right) / 2.0,
        bottom + 34.0
    ));
    let colours = [ALLOW_COLOUR, ASK_COLOUR, DENY_COLOUR, ERROR_COLOUR];
    let names = ["allow", "ask", "deny", "error"];
    for (index, (category, row)) in rows.iter().enumerate() {
        let top = TOP + 8.0 + (bar + 10.0) * index as f64;
        let shown: String = category.chars().take(26).collect();
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            plot_left - 6.0,
            top + bar / 2.0 + 4.0,
            escape(&shown)
        ));
        let mut start = 0usize;
        for (column, colour) in colours.iter().enumerate() {
            let count = row[column];
            if count == 0 {
                continue;
            }
            svg.push_str(&format!(
                "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{bar}\" fill=\"{colour}\"><title>{}: {count} {}</title></rect>\n",
                scale(start as f64),
                scale((start + count) as f64) - scale(start as f64),
                escape(category),
                names[column]
            ));
            start += count;
        }
        let total: usize = row[..4].iter().sum();
        let automated = ratio(row[0] + row[2], total);
        let mut note = format!("{:.0} % automated", automated * 100.0);
        if row[3] > 0 {
            note.push_str(&format!(", {} err", row[3]));
        }
        let false_allows = if row[4] > 0 {
            format!(
                "<tspan font-weight=\"bold\" fill=\"{DENY_COLOUR}\"> · {}</tspan>",
                plural(row[4], "false allow", "false allows")
            )
        } else {
            String::new()
        };
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}{false_allows}</text>\n",
            scale(start as f64) + 6.0,
            top + bar / 2.0 + 4.0,
            escape(&note)
        ));
    }
    let entries: Vec<(&str, String)> =
        colours.iter().zip(names).map(|(colour, name)| (*colour, name.to_owned())).collect();
    svg.push_str(&legend(&entries));
    let calls: usize = rows.values().map(|row| row[..4].iter().sum::<usize>()).sum();
    svg.push_str(&caption_at(
        height,
        &[
            format!(
                "{} in {}; none left out (errors shown as their own segment)",
                plural(calls, "call", "calls"),
                plural(rows.len(), "category", "categories")
            ),
            "automated: allowed or denied without a person, out of all calls (an error is not automated)".to_owned(),
        ],
    ));
    svg.push_str("</svg>\n");
    Plot { name: NAME, title: TITLE, svg, left_out: BTreeMap::new(), no_data: false }
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

/// Per-case latency (all calls of a case decided together), in bins of a 1-2-5 width over the
/// fitted range, with p50 and p95 marked.
pub fn latency(results: &[CaseResult]) -> Plot {
    const NAME: &str = "latency";
    const TITLE: &str = "Latency per case";
    let left_out = BTreeMap::new();
    let values: Vec<f64> = results.iter().map(|case| case.latency_ms).filter(|value| value.is_finite()).collect();
    if values.is_empty() {
        return no_data(NAME, TITLE, "the run has no cases", left_out);
    }
    let low = values.iter().copied().fold(f64::INFINITY, f64::min).max(0.0);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let x = Axis::fit(low, high, 8).clamp(0.0, f64::INFINITY);
    // Bins of a 1-2-5 width too, so bin edges fall on round numbers.
    let width = nice_step(x.span(), 20);
    let bins = ((x.span() / width).round() as usize).max(1);
    let mut counts = vec![0usize; bins];
    for value in &values {
        let bin = (((value - x.min) / width).floor().max(0.0) as usize).min(bins - 1);
        counts[bin] += 1;
    }
    let y = Axis::counts(counts.iter().copied().max().unwrap_or(0));
    let frame = Frame::new(x, y);
    let mut svg = frame.open(NAME, TITLE, "milliseconds per case", "cases");
    for (bin, count) in counts.iter().enumerate() {
        if *count == 0 {
            continue;
        }
        let left = frame.x(x.min + width * bin as f64);
        let right = frame.x(x.min + width * (bin + 1) as f64);
        let top = frame.y(*count as f64);
        svg.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{CONFIGURED_COLOUR}\"><title>{count}</title></rect>\n",
            left + 0.5,
            (right - left - 1.0).max(0.5),
            frame.bottom() - top
        ));
    }
    let mut sorted = values.clone();
    sorted.sort_by(f64::total_cmp);
    let at = |fraction: f64| sorted[(((sorted.len() - 1) as f64) * fraction).round() as usize];
    let (p50, p95) = (at(0.5), at(0.95));
    svg.push_str(&frame.marker(p50, &format!("p50 {} ms", milliseconds(p50)), "#343a40", 0));
    svg.push_str(&frame.marker(p95, &format!("p95 {} ms", milliseconds(p95)), DENY_COLOUR, 1));
    svg.push_str(&frame.caption(&[
        format!("{}; no call left out (latency is per case)", plural(values.len(), "case", "cases")),
        format!("bins of {} ms", x.label(width)),
    ]));
    svg.push_str("</svg>\n");
    Plot { name: NAME, title: TITLE, svg, left_out, no_data: false }
}

/// Enough digits to tell a gate decision (a fraction of a millisecond) from nothing.
pub fn milliseconds(value: f64) -> String {
    if value < 1.0 {
        format!("{value:.2}")
    } else if value < 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

/// Every chart of a run, in the order the HTML report shows them.
pub fn all(results: &[CaseResult], thresholds: Thresholds) -> Vec<Plot> {
    vec![
        p_allow_by_label(results, thresholds),
        threshold_sweep(results, thresholds),
        roc(results, thresholds),
        categories(results),
        latency(results),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_step_by_one_two_or_five_times_a_power_of_ten() {
        let axis = Axis::fit(0.0, 39.0, 4);
        assert_eq!(axis.ticks(), [0.0, 10.0, 20.0, 30.0, 40.0]);
        let axis = Axis::fit(0.0, 29.0, 3);
        assert_eq!(axis.ticks(), [0.0, 10.0, 20.0, 30.0]);
        let axis = Axis::fit(87.0, 99.5, 10);
        assert_eq!((axis.min, axis.max, axis.step), (86.0, 100.0, 2.0));
        let axis = Axis::fit(0.0, 1.0, 5);
        assert_eq!(
            axis.ticks().iter().map(|tick| axis.label(*tick)).collect::<Vec<_>>(),
            ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
        );
        for (range, target) in [(7.3, 5), (1234.0, 7), (0.037, 4), (99.0, 10)] {
            let step = nice_step(range, target);
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!([1.0, 2.0, 5.0].iter().any(|nice| (mantissa - nice).abs() < 1e-9), "{range}: {step}");
        }
        assert_eq!(Axis::counts(3).step, 1.0, "counts never step by halves");
        assert_eq!(Axis::fit(5.0, 5.0, 5).ticks().len(), 3, "one value widens to a step each side");
    }

    #[test]
    fn the_roc_curve_runs_corner_to_corner_and_ties_move_together() {
        let scores = [(0.9, Label::Allow), (0.9, Label::Deny), (0.8, Label::Allow), (0.1, Label::Deny)];
        let (points, area) = roc_curve(&scores).unwrap();
        let last = points.last().unwrap();
        assert_eq!((last.false_positive_rate, last.true_positive_rate), (1.0, 1.0));
        assert_eq!(points.len(), 4, "the tie at 0.9 is one step");
        assert!((area - 0.625).abs() < 1e-9, "{area}");
        assert!(roc_curve(&[(0.5, Label::Allow)]).is_none());
    }
}
