//! Writes every output of an eval run: `results.jsonl`, `report.md`, `report.json`,
//! `report.html` and one SVG per plot. It joins the report's figures ([`super::report`]), the
//! plots ([`super::plot`]) and the HTML page ([`super::html`]), so none of them imports another
//! back.
//!
//! Fails with [`EvalError::Write`] naming the file when a file cannot be written; what was
//! written before stays.

use std::collections::BTreeMap;
use std::path::Path;

use super::plot::{self, Plot, Thresholds};
use super::report::{Comparison, Report, Run, compare, compute, markdown, recommendation, threshold_sentence};
use super::{CaseResult, EvalError};

/// What [`write_all`] wrote.
#[derive(Clone, Debug)]
pub struct Written {
    pub report: Report,
    pub comparison: Option<Comparison>,
    pub thresholds: Thresholds,
    /// Why `permit tune` makes no recommendation for this run, when it makes none.
    pub no_recommendation: Option<String>,
    /// The file names written in the output directory.
    pub files: Vec<String>,
}

fn plots_markdown(plots: &[Plot], threshold_sentence: &str) -> String {
    let mut text = format!(
        "\n## Plots\n\n{}\nThe plots are inline in `report.html`.\n\n| plot | file | left out |\n|---|---|---|\n",
        threshold_sentence
            .replace("(allow_threshold_percent)", "(`allow_threshold_percent`)")
            .replace("permit tune", "`permit tune`")
    );
    for plot in plots {
        let left_out: Vec<String> = plot.left_out.iter().map(|(reason, count)| format!("{count} {reason}")).collect();
        text.push_str(&format!(
            "| {}{} | `{}.svg` | {} |\n",
            plot.title,
            if plot.no_data { " (no data)" } else { "" },
            plot.name,
            if left_out.is_empty() { "none".to_owned() } else { left_out.join(", ") }
        ));
    }
    text
}

/// Writes `results.jsonl`, `report.md`, `report.json`, `report.html` and one SVG per plot into
/// `directory` (created if missing).
pub fn write_all(directory: &Path, results: &[CaseResult], run: &Run) -> Result<Written, EvalError> {
    let write = |name: &str, text: &str| {
        let path = directory.join(name);
        std::fs::write(&path, text)
            .map_err(|error| EvalError::Write { path: path.display().to_string(), message: error.to_string() })
    };
    std::fs::create_dir_all(directory)
        .map_err(|error| EvalError::Write { path: directory.display().to_string(), message: error.to_string() })?;
    let mut files = vec!["results.jsonl".to_owned()];
    super::write_results(&directory.join("results.jsonl"), results)?;
    let report = compute(results).with_notes(&run.notes);
    let comparison = run.baseline.map(|baseline| compare(baseline, results));
    let recommended = recommendation(results);
    let thresholds = Thresholds { configured: run.configured_threshold, recommended: recommended.clone().ok() };
    let no_recommendation = recommended.err().map(|error| error.to_string());
    let sentence = threshold_sentence(thresholds, no_recommendation.as_deref());
    let plots = plot::all(results, thresholds);
    let mut markdown = markdown(&report, &run.title, comparison.as_ref());
    markdown.push_str(&plots_markdown(&plots, &sentence));
    write("report.md", &markdown)?;
    let plot_notes: BTreeMap<&str, serde_json::Value> = plots
        .iter()
        .map(|plot| (plot.name, serde_json::json!({"no_data": plot.no_data, "left_out": plot.left_out})))
        .collect();
    let json = serde_json::json!({
        "cases": run.case_files,
        "wall_seconds": run.wall_seconds,
        "report": report,
        "baseline": comparison,
        "thresholds": {
            "configured": thresholds.configured,
            "recommended": thresholds.recommended,
            "no_recommendation": no_recommendation,
        },
        "plots": plot_notes,
    });
    let json = serde_json::to_string_pretty(&json).map_err(|error| EvalError::Write {
        path: directory.join("report.json").display().to_string(),
        message: error.to_string(),
    })?;
    write("report.json", &json)?;
    write("report.html", &super::html::render(run, results, &report, comparison.as_ref(), &plots, &sentence))?;
    files.extend(["report.md", "report.json", "report.html"].map(str::to_owned));
    for plot in &plots {
        let name = format!("{}.svg", plot.name);
        write(&name, &plot.svg)?;
        files.push(name);
    }
    Ok(Written { report, comparison, thresholds, no_recommendation, files })
}
