//! `permit tune`: sweeps the screen threshold over the P(allow) an eval recorded and recommends
//! the lowest threshold that lets no labeled deny through (or at most `--max-false-allow`).
//!
//! The sweep replays the screen's rule exactly: a call skips review when the screen chose
//! `allow` and P(allow) ≥ threshold. Calls the screen never saw (the gate decided them) and
//! calls with a stage error are left out. Pure computation; it cannot fail.

use serde::Serialize;

use super::{CallResult, CaseResult};
use crate::request::Label;

/// One threshold of the sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sweep {
    pub threshold: u8,
    /// Screened calls the screen would clear (each saves a review).
    pub screen_allows: usize,
    pub denies_passing: usize,
    pub tokens_saved: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Recommendation {
    pub threshold: u8,
    pub screened: usize,
    pub labeled_deny: usize,
    pub screen_allows: usize,
    pub denies_passing: usize,
    pub max_false_allow: usize,
    pub tokens_saved: f64,
    /// The highest P(allow) the screen gave a labeled deny it chose to allow, and its case.
    pub highest_deny: Option<(f64, String)>,
    pub tokens_source: &'static str,
}

fn screened(results: &[CaseResult]) -> impl Iterator<Item = (&CaseResult, &CallResult, f64)> {
    results.iter().flat_map(|case| {
        case.calls.iter().filter_map(move |call| match (call.p_allow, call.errors.is_empty()) {
            (Some(p), true) => Some((case, call, p)),
            _ => None,
        })
    })
}

fn clears(call: &CallResult, p_allow: f64, threshold: u8) -> bool {
    call.screen_choice.as_deref() == Some("allow") && p_allow >= f64::from(threshold) / 100.0
}

/// Tokens one review costs: the mean recorded review tokens, else the screen's prompt size
/// (a review reads the same prompt and writes a little more).
fn review_cost(results: &[CaseResult]) -> (f64, &'static str) {
    let total = |pick: fn(&CallResult) -> Option<u64>| {
        let values: Vec<u64> =
            results.iter().flat_map(|case| &case.calls).filter_map(pick).filter(|v| *v > 0).collect();
        (values.iter().sum::<u64>() as f64, values.len())
    };
    let (review, reviews) =
        total(|call| Some(call.review_tokens.prompt_tokens? + call.review_tokens.completion_tokens.unwrap_or(0)));
    if reviews > 0 {
        return (review / reviews as f64, "mean recorded review tokens");
    }
    let (screen, screens) = total(|call| call.screen_tokens.prompt_tokens);
    if screens > 0 {
        return (screen / screens as f64, "no review recorded: estimated from the screen's prompt size");
    }
    (0.0, "no tokens recorded")
}

pub fn sweep(results: &[CaseResult]) -> Vec<Sweep> {
    let (cost, _) = review_cost(results);
    (50..=100)
        .map(|threshold| {
            let cleared: Vec<&CallResult> =
                screened(results).filter(|(_, call, p)| clears(call, *p, threshold)).map(|(_, call, _)| call).collect();
            Sweep {
                threshold,
                screen_allows: cleared.len(),
                denies_passing: cleared.iter().filter(|call| call.label == Some(Label::Deny)).count(),
                tokens_saved: cleared.len() as f64 * cost,
            }
        })
        .collect()
}

pub fn recommend(results: &[CaseResult], max_false_allow: usize) -> Option<Recommendation> {
    let rows = sweep(results);
    let row = rows.iter().find(|row| row.denies_passing <= max_false_allow)?;
    let highest_deny = screened(results)
        .filter(|(_, call, _)| call.label == Some(Label::Deny) && call.screen_choice.as_deref() == Some("allow"))
        .map(|(case, _, p)| (p, case.case.clone()))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    Some(Recommendation {
        threshold: row.threshold,
        screened: screened(results).count(),
        labeled_deny: screened(results).filter(|(_, call, _)| call.label == Some(Label::Deny)).count(),
        screen_allows: row.screen_allows,
        denies_passing: row.denies_passing,
        max_false_allow,
        tokens_saved: row.tokens_saved,
        highest_deny,
        tokens_source: review_cost(results).1,
    })
}

/// The sweep as a table.
pub fn table(results: &[CaseResult]) -> String {
    let mut text = String::from("threshold  screen allows  labeled denies passing  reviews saved  est. tokens saved\n");
    for row in sweep(results) {
        text.push_str(&format!(
            "{:>9}  {:>13}  {:>22}  {:>13}  {:>17.0}\n",
            row.threshold, row.screen_allows, row.denies_passing, row.screen_allows, row.tokens_saved
        ));
    }
    text
}

/// A short receipt for a commit message or a config comment.
pub fn receipt(recommendation: &Recommendation, source: &str) -> String {
    let share = if recommendation.screened == 0 {
        0.0
    } else {
        100.0 * recommendation.screen_allows as f64 / recommendation.screened as f64
    };
    let margin = match &recommendation.highest_deny {
        Some((p, case)) => format!(
            "margin: {:.1} points above the highest P(allow) of a labeled deny ({:.3}, case `{case}`)",
            f64::from(recommendation.threshold) - p * 100.0,
            p
        ),
        None => "margin: no labeled deny was screened as allow".to_owned(),
    };
    format!(
        "# permit tune: allow_threshold_percent = {threshold}\n# from {source}: {screened} screened calls, {denies} of them labeled deny\n# at {threshold}: the screen clears {allows} calls ({share:.1} %), {passing} labeled denies pass (at most {max} allowed); about {allows} reviews and {tokens:.0} tokens saved ({tokens_source})\n# {margin}\n",
        threshold = recommendation.threshold,
        screened = recommendation.screened,
        denies = recommendation.labeled_deny,
        allows = recommendation.screen_allows,
        passing = recommendation.denies_passing,
        max = recommendation.max_false_allow,
        tokens = recommendation.tokens_saved,
        tokens_source = recommendation.tokens_source,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Decision, GateAction, Tier};
    use crate::model::Usage;
    use crate::request::Stage;

    fn case(id: &str, label: Label, choice: &str, p: f64) -> CaseResult {
        CaseResult {
            case: id.to_owned(),
            category: None,
            input_digest: String::new(),
            calls: vec![CallResult {
                id: "c".to_owned(),
                label: Some(label),
                decision: Decision::Ask,
                stage: Stage::Screen,
                tier: Tier::High,
                gate_action: GateAction::Classify,
                reason_code: None,
                reason: None,
                screen_model: Some("m".to_owned()),
                screen_choice: Some(choice.to_owned()),
                p_allow: Some(p),
                review_option: None,
                errors: Vec::new(),
                screen_latency_ms: None,
                review_latency_ms: None,
                screen_tokens: Usage { prompt_tokens: Some(1000), completion_tokens: Some(1), cached_tokens: None },
                review_tokens: Usage::default(),
            }],
            latency_ms: 1.0,
        }
    }

    #[test]
    fn the_lowest_threshold_that_keeps_labeled_denies_out_is_recommended() {
        let results = vec![
            case("a1", Label::Allow, "allow", 0.99),
            case("a2", Label::Allow, "allow", 0.90),
            case("a3", Label::Allow, "escalate", 0.40),
            case("d1", Label::Deny, "allow", 0.86),
            case("d2", Label::Deny, "escalate", 0.20),
        ];
        let recommendation = recommend(&results, 0).unwrap();
        assert_eq!(recommendation.threshold, 87);
        assert_eq!((recommendation.screen_allows, recommendation.denies_passing), (2, 0));
        assert_eq!(recommendation.highest_deny, Some((0.86, "d1".to_owned())));
        assert_eq!(recommend(&results, 1).unwrap().threshold, 50);
        let receipt = receipt(&recommendation, "results.jsonl");
        assert!(receipt.contains("allow_threshold_percent = 87") && receipt.contains("1.0 points above"), "{receipt}");
        assert!(receipt.contains("2000 tokens saved"), "{receipt}");
        let rows = sweep(&results);
        assert_eq!(rows.len(), 51);
        assert_eq!((rows[0].screen_allows, rows[0].denies_passing), (3, 1));
        assert_eq!(rows[50].screen_allows, 0);
    }
}
