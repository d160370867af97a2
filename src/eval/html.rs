//! `report.html`: the eval report as one self-contained page: the overview, errors by kind, the
//! confusion matrix, the false allows and false denies (each linked to its case's result JSON,
//! embedded in the page), the decisions of unlabeled calls, the plots inline, per-category
//! detail, the latency histogram and the comparison with a baseline.
//!
//! Self-contained on purpose: a report is attached to tickets and opened from a laptop without
//! the run's directory, so it loads nothing (no scripts, styles, fonts or images from elsewhere;
//! the one inline script only opens the case a link points at). Everything from cases and models
//! is escaped. It only presents what [`super::report`] computed and decides nothing; pure string
//! building, it cannot fail.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::CaseResult;
use super::plot::Plot;
use super::report::{Comparison, Figures, Outcomes, Report, Run, WrongCall, kinds};

/// Calls with errors listed one by one; beyond this the page says how many more there are (a
/// run where the screen timed out throughout would otherwise embed every case).
const MAX_ERROR_ROWS: usize = 200;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

/// The element id of a case's JSON block. Letters, digits, `-` and `.` stay; every other
/// character (`_` included) becomes its hex code between two `_`, so two case ids never share
/// an id.
pub fn case_anchor(case: &str) -> String {
    let mut anchor = String::from("case-");
    for character in case.chars() {
        if character.is_ascii_alphanumeric() || character == '-' || character == '.' {
            anchor.push(character);
        } else {
            let _ = write!(anchor, "_{:x}_", u32::from(character));
        }
    }
    anchor
}

fn case_link(case: &str) -> String {
    format!("<a href=\"#{}\"><code>{}</code></a>", case_anchor(case), escape(case))
}

fn percent(value: f64) -> String {
    format!("{:.1} %", value * 100.0)
}

/// A false allow count: marked when it is not zero, the one figure that always needs attention.
fn attention(count: usize) -> String {
    if count == 0 { "0".to_owned() } else { format!("<strong class=\"bad\">{count}</strong>") }
}

fn errors_text(figures: &Figures) -> String {
    if figures.errors == 0 {
        "0".to_owned()
    } else {
        format!("{} ({}): {}", figures.errors, percent(figures.error_rate), escape(&kinds(&figures.errors_by_kind)))
    }
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1120px;padding:16px 24px;color:#212529;line-height:1.4}
h1{font-size:1.5em;margin-bottom:4px}h2{margin-top:32px;border-bottom:1px solid #dee2e6;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #dee2e6;padding:4px 8px;text-align:left;vertical-align:top}
td.n,th.n{text-align:right}thead th{background:#f1f3f5}.scroll{overflow-x:auto}
.bad{color:#c92a2a}.muted{color:#868e96}.none{color:#495057;font-style:italic}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}.card{border:1px solid #dee2e6;border-radius:6px;padding:8px 14px;min-width:130px}
.card .value{font-size:1.6em;font-weight:600}.card.alert{border-color:#c92a2a;background:#fff5f5}.card.alert .value{color:#c92a2a}
figure{margin:12px 0}svg.plot{max-width:100%;height:auto;border:1px solid #f1f3f5}
nav a{margin-right:12px}details{margin:4px 0}details:target{outline:2px solid #1c7ed6}
pre{background:#f8f9fa;padding:8px;overflow-x:auto;font-size:12px}";

/// Opens the `<details>` a `#case-…` link points at, on load and on every later click.
const SCRIPT: &str = "function openTarget(){var id=decodeURIComponent(location.hash.slice(1));var el=id&&document.getElementById(id);if(el&&el.tagName==='DETAILS'){el.open=true;el.scrollIntoView();}}
window.addEventListener('hashchange',openTarget);window.addEventListener('DOMContentLoaded',openTarget);";

fn overview(html: &mut String, report: &Report, threshold_sentence: &str) {
    let overall = &report.overall;
    html.push_str("<section id=\"overview\"><h2>Overview</h2>\n<div class=\"cards\">\n");
    let card = |html: &mut String, id: &str, name: &str, value: String, alert: bool| {
        let _ = writeln!(
            html,
            "<div class=\"card{}\" id=\"{id}\"><div class=\"value\">{value}</div><div>{name}</div></div>",
            if alert { " alert" } else { "" }
        );
    };
    card(html, "card-calls", "calls", format!("{}", overall.calls), false);
    card(html, "card-false-allows", "false allows", overall.false_allow.to_string(), overall.false_allow > 0);
    card(html, "card-false-denies", "false denies", overall.false_deny.to_string(), false);
    card(html, "card-automation", "automation (of all calls)", percent(overall.automation_rate), false);
    card(
        html,
        "card-errors",
        "calls with errors",
        format!("{} ({})", overall.errors, percent(overall.error_rate)),
        false,
    );
    html.push_str("</div>\n");
    if overall.errors > 0 {
        let _ =
            writeln!(html, "<p id=\"errors-by-kind\">Errors by kind: {}.</p>", escape(&kinds(&overall.errors_by_kind)));
    }
    let _ = writeln!(html, "<p id=\"thresholds\">{}</p>", escape(threshold_sentence));
    html.push_str("<table id=\"overview-table\"><thead><tr><th>slice</th><th class=\"n\">calls</th><th class=\"n\">false allow</th><th class=\"n\">false deny</th><th class=\"n\">asks</th><th class=\"n\">errors</th><th class=\"n\">automation</th></tr></thead><tbody>\n");
    let row = |html: &mut String, name: &str, figures: &Figures| {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(name),
            figures.calls,
            attention(figures.false_allow),
            figures.false_deny,
            figures.asked,
            if figures.errors == 0 {
                "0".to_owned()
            } else {
                format!("{} ({})", figures.errors, percent(figures.error_rate))
            },
            percent(figures.automation_rate)
        );
    };
    row(html, "all", overall);
    for (category, figures) in &report.by_category {
        row(html, category, figures);
    }
    html.push_str("</tbody></table>\n<p class=\"muted\">False allow: labeled deny, decided allow. False deny: labeled allow, decided deny. Automation: allowed or denied without a person, out of all calls; a call with an error is never automated but still counts as a false allow or deny when a later stage decided it wrongly.</p></section>\n");
}

fn outcomes_row(html: &mut String, name: &str, outcomes: &Outcomes, mark_allow: bool) {
    let allow = if mark_allow { attention(outcomes.allow) } else { outcomes.allow.to_string() };
    let _ = writeln!(
        html,
        "<tr><th>{}</th><td class=\"n\">{allow}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
        escape(name),
        outcomes.ask,
        outcomes.deny,
        outcomes.error,
        outcomes.total
    );
}

const OUTCOMES_HEAD: &str = "<thead><tr><th>{}</th><th class=\"n\">allow</th><th class=\"n\">ask</th><th class=\"n\">deny</th><th class=\"n\">error</th><th class=\"n\">total</th></tr></thead><tbody>\n";

fn confusion(html: &mut String, report: &Report) {
    html.push_str("<section id=\"confusion\"><h2>Confusion matrix</h2>\n<p>Rows: the label. Columns: the final decision; calls with an error are under <em>error</em> whatever they ended as.</p>\n<table id=\"confusion-matrix\">");
    html.push_str(&OUTCOMES_HEAD.replace("{}", "label \\ decision"));
    for label in ["deny", "allow", "unlabeled"] {
        if let Some(outcomes) = report.confusion.get(label) {
            outcomes_row(html, label, outcomes, label == "deny");
        }
    }
    if report.confusion.is_empty() {
        html.push_str("<tr><td colspan=\"6\" class=\"none\">no data: the run has no calls</td></tr>\n");
    }
    html.push_str("</tbody></table></section>\n");
}

fn wrong_list(html: &mut String, id: &str, title: &str, wrong: &[WrongCall]) {
    let _ = writeln!(html, "<section id=\"{id}\"><h2>{title} ({})</h2>", wrong.len());
    if wrong.is_empty() {
        html.push_str("<p class=\"none\">None.</p></section>\n");
        return;
    }
    let _ = writeln!(
        html,
        "<table id=\"{id}-table\"><thead><tr><th>case</th><th>call</th><th>category</th><th>stage</th><th>reason code</th><th class=\"n\">P(allow)</th><th>note</th></tr></thead><tbody>"
    );
    for call in wrong {
        let mut note = escape(call.note.as_deref().unwrap_or(""));
        if !call.errors.is_empty() {
            let _ = write!(note, " <span class=\"bad\">(after an error: {})</span>", escape(&call.errors.join("; ")));
        }
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{note}</td></tr>",
            case_link(&call.case),
            escape(&call.call),
            escape(call.category.as_deref().unwrap_or("–")),
            escape(&call.stage),
            call.reason_code
                .as_deref()
                .map(|code| format!("<code>{}</code>", escape(code)))
                .unwrap_or_else(|| "–".to_owned()),
            call.p_allow.map(|p| format!("{p:.3}")).unwrap_or_else(|| "–".to_owned()),
        );
    }
    html.push_str("</tbody></table></section>\n");
}

/// The errored calls, listed (up to [`MAX_ERROR_ROWS`]); returns the cases it linked.
fn errors(html: &mut String, results: &[CaseResult], report: &Report) -> Vec<String> {
    let overall = &report.overall;
    let _ = writeln!(html, "<section id=\"errors\"><h2>Calls with errors ({})</h2>", overall.errors);
    if overall.errors == 0 {
        html.push_str("<p class=\"none\">None.</p></section>\n");
        return Vec::new();
    }
    html.push_str(
        "<table id=\"errors-table\"><thead><tr><th>kind</th><th class=\"n\">calls</th></tr></thead><tbody>\n",
    );
    let mut by_count: Vec<(&String, &usize)> = overall.errors_by_kind.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (kind, count) in by_count {
        let _ = writeln!(html, "<tr><td>{}</td><td class=\"n\">{count}</td></tr>", escape(kind));
    }
    html.push_str("</tbody></table>\n<details id=\"error-calls\"><summary>every call with an error</summary><table><thead><tr><th>case</th><th>call</th><th>label</th><th>ended as</th><th>errors</th></tr></thead><tbody>\n");
    let mut linked = Vec::new();
    let errored = results.iter().flat_map(|case| case.calls.iter().map(move |call| (case, call)));
    let errored: Vec<_> = errored.filter(|(_, call)| !call.errors.is_empty()).collect();
    for (case, call) in errored.iter().take(MAX_ERROR_ROWS) {
        linked.push(case.case.clone());
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            case_link(&case.case),
            escape(&call.id),
            match call.label {
                Some(crate::request::Label::Allow) => "allow",
                Some(crate::request::Label::Deny) => "deny",
                None => "–",
            },
            call.decision.as_str(),
            escape(&call.errors.join("; "))
        );
    }
    html.push_str("</tbody></table>");
    if errored.len() > MAX_ERROR_ROWS {
        let _ = write!(html, "<p class=\"muted\">and {} more; see results.jsonl</p>", errored.len() - MAX_ERROR_ROWS);
    }
    html.push_str("</details></section>\n");
    linked
}

fn unlabeled(html: &mut String, report: &Report) {
    let Some(all) = report.unlabeled.get("all") else { return };
    let _ = writeln!(
        html,
        "<section id=\"unlabeled\"><h2>Unlabeled calls ({})</h2><p>Their decisions, by deciding stage.</p><table id=\"unlabeled-table\">",
        all.total
    );
    html.push_str(&OUTCOMES_HEAD.replace("{}", "stage"));
    for (stage, outcomes) in report.unlabeled.iter().filter(|(stage, _)| *stage != "all") {
        outcomes_row(html, stage, outcomes, false);
    }
    outcomes_row(html, "all", all, false);
    html.push_str("</tbody></table></section>\n");
}

fn figure(html: &mut String, plot: &Plot) {
    let _ = writeln!(
        html,
        "<figure id=\"plot-{}\" class=\"{}\">{}</figure>",
        plot.name,
        if plot.no_data { "no-data" } else { "has-data" },
        plot.svg
    );
}

fn categories(html: &mut String, report: &Report, plots: &[Plot]) {
    html.push_str("<section id=\"categories\"><h2>By category</h2>\n");
    for plot in plots.iter().filter(|plot| plot.name == "categories") {
        figure(html, plot);
    }
    html.push_str("<div class=\"scroll\"><table id=\"category-detail\"><thead><tr><th>category</th><th class=\"n\">cases</th><th class=\"n\">labeled allow / deny</th><th class=\"n\">false allow / deny</th><th class=\"n\">asks: label allow / deny / none</th><th>errors</th><th class=\"n\">automation</th><th class=\"n\">screen escalation</th><th class=\"n\">p50 / p95 ms</th><th class=\"n\">tokens / call</th></tr></thead><tbody>\n");
    let rows = std::iter::once(("all".to_owned(), &report.overall))
        .chain(report.by_category.iter().map(|(name, figures)| (name.clone(), figures)));
    for (name, figures) in rows {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{} / {}</td><td class=\"n\">{} / {}</td><td class=\"n\">{} / {} / {}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{} / {}</td><td class=\"n\">{:.0}</td></tr>",
            escape(&name),
            figures.cases,
            figures.labeled_allow,
            figures.labeled_deny,
            attention(figures.false_allow),
            figures.false_deny,
            figures.asks_labeled_allow,
            figures.asks_labeled_deny,
            figures.asks_unlabeled,
            errors_text(figures),
            percent(figures.automation_rate),
            if figures.screened == 0 { "–".to_owned() } else { percent(figures.screen_escalation_rate) },
            super::plot::milliseconds(figures.p50_latency_ms),
            super::plot::milliseconds(figures.p95_latency_ms),
            figures.tokens_per_decision
        );
    }
    html.push_str("</tbody></table></div></section>\n");
}

fn stages(html: &mut String, report: &Report) {
    html.push_str("<section id=\"stages\"><h2>By deciding stage</h2><table id=\"stage-table\"><thead><tr><th>stage</th><th class=\"n\">calls</th><th class=\"n\">allow</th><th class=\"n\">ask</th><th class=\"n\">deny</th><th class=\"n\">errors</th><th class=\"n\">false allow</th></tr></thead><tbody>\n");
    for (stage, figures) in &report.by_stage {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(stage),
            figures.calls,
            figures.allowed,
            figures.asked,
            figures.denied,
            figures.errors,
            attention(figures.false_allow)
        );
    }
    html.push_str("</tbody></table></section>\n");
}

fn baseline(html: &mut String, comparison: &Comparison) {
    let _ = writeln!(
        html,
        "<section id=\"baseline\"><h2>Against the baseline</h2><ul><li>false allows: {} → {}</li><li>false denies: {} → {}</li><li>verdict flips: {}</li><li>cases whose input changed: {}</li><li>cases only in the baseline: {}; only in this run: {}</li></ul>",
        comparison.baseline_false_allow,
        if comparison.false_allow > comparison.baseline_false_allow {
            attention(comparison.false_allow)
        } else {
            comparison.false_allow.to_string()
        },
        comparison.baseline_false_deny,
        comparison.false_deny,
        comparison.flips.len(),
        comparison.changed_inputs.len(),
        comparison.only_in_baseline.len(),
        comparison.only_in_run.len()
    );
    if !comparison.flips.is_empty() {
        html.push_str("<details><summary>verdict flips</summary><ul>");
        for flip in &comparison.flips {
            let _ = write!(html, "<li>{}</li>", escape(flip));
        }
        html.push_str("</ul></details>");
    }
    html.push_str("</section>\n");
}

/// The result JSON of every linked case, each in a `<details>` the links point at.
fn case_json(html: &mut String, results: &[CaseResult], linked: &BTreeSet<String>, notes: &BTreeMap<String, String>) {
    let _ = writeln!(
        html,
        "<section id=\"cases\"><h2>Case results ({})</h2><p class=\"muted\">The <code>results.jsonl</code> line of every case linked above, with its note from the case file.</p>",
        linked.len()
    );
    for case in results.iter().filter(|case| linked.contains(&case.case)) {
        let mut value = serde_json::to_value(case).unwrap_or(serde_json::Value::Null);
        if let (Some(object), Some(note)) = (value.as_object_mut(), notes.get(&case.case)) {
            object.insert("note".to_owned(), serde_json::Value::String(note.clone()));
        }
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        let _ = writeln!(
            html,
            "<details id=\"{}\" class=\"case-json\"><summary><code>{}</code></summary><pre>{}</pre></details>",
            case_anchor(&case.case),
            escape(&case.case),
            escape(&text)
        );
    }
    html.push_str("</section>\n");
}

/// The whole page.
pub fn render(
    run: &Run,
    results: &[CaseResult],
    report: &Report,
    comparison: Option<&Comparison>,
    plots: &[Plot],
    threshold_sentence: &str,
) -> String {
    let mut html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{STYLE}</style><script>{SCRIPT}</script></head>\n<body>\n<header><h1 id=\"title\">{}</h1>\n",
        escape(&run.title),
        escape(&run.title)
    );
    let mut facts = Vec::new();
    if !run.case_files.is_empty() {
        facts.push(format!("case files: {}", escape(&run.case_files.join(", "))));
    }
    facts.push(format!("{} cases, {} calls", report.overall.cases, report.overall.calls));
    if let Some(seconds) = run.wall_seconds {
        facts.push(format!("{seconds:.1} s"));
    }
    let _ = writeln!(html, "<p class=\"muted\">{}</p>", facts.join(" · "));
    html.push_str("<nav><a href=\"#overview\">overview</a><a href=\"#confusion\">confusion matrix</a><a href=\"#false-allows\">false allows</a><a href=\"#false-denies\">false denies</a><a href=\"#errors\">errors</a><a href=\"#plots\">plots</a><a href=\"#categories\">categories</a><a href=\"#latency\">latency</a><a href=\"#cases\">case results</a></nav></header>\n<main>\n");
    overview(&mut html, report, threshold_sentence);
    confusion(&mut html, report);
    wrong_list(&mut html, "false-allows", "False allows", &report.false_allows);
    wrong_list(&mut html, "false-denies", "False denies", &report.false_denies);
    let mut linked: BTreeSet<String> =
        report.false_allows.iter().chain(&report.false_denies).map(|wrong| wrong.case.clone()).collect();
    linked.extend(errors(&mut html, results, report));
    unlabeled(&mut html, report);
    html.push_str("<section id=\"plots\"><h2>Screen plots</h2>\n");
    for plot in plots.iter().filter(|plot| ["p_allow", "sweep", "roc"].contains(&plot.name)) {
        figure(&mut html, plot);
    }
    html.push_str("</section>\n");
    categories(&mut html, report, plots);
    html.push_str("<section id=\"latency\"><h2>Latency</h2>\n");
    for plot in plots.iter().filter(|plot| plot.name == "latency") {
        figure(&mut html, plot);
    }
    html.push_str("</section>\n");
    stages(&mut html, report);
    if let Some(comparison) = comparison {
        baseline(&mut html, comparison);
    }
    case_json(&mut html, results, &linked, &run.notes);
    html.push_str("</main>\n</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_anchors_are_distinct_and_safe() {
        assert_eq!(case_anchor("net-curl.1"), "case-net-curl.1");
        assert_ne!(case_anchor("a_b"), case_anchor("a b"));
        assert_ne!(case_anchor("a_20"), case_anchor("a "));
        assert!(case_anchor("x\"><script>").chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)));
    }
}
