//! `permit tune`: sweeps the screen threshold over the P(allow) an eval recorded and recommends
//! the lowest threshold that lets no labeled deny through (or at most `--max-false-allow`), with
//! the evidence for it: how many labeled denies were screened and the 95 % upper bound on the
//! false-allow rate at that threshold.
//!
//! The sweep replays the screen's rule exactly: a call skips review when the screen chose
//! `allow` and P(allow) ≥ threshold. Calls the screen never saw (the gate decided them), calls
//! screened without a P(allow) and calls with a stage error are left out, and counted.
//!
//! It never recommends without evidence: with no screened call, or fewer screened labeled
//! denies than the minimum (30 by default), there is no recommendation, only a [`TuneError`]
//! saying what is missing. It never rounds a bound down: the rate bound is exact
//! (Clopper–Pearson) or, when no labeled deny passed, the rule of three, which is larger still.
//! Pure computation: nothing here reads files or fails otherwise.

use serde::Serialize;

use super::{CallResult, CaseResult};
use crate::classifier::finalize::screen_allows;
use crate::classifier::questions::ALLOW;
use crate::request::Label;

/// Labeled denies the screen must have seen before tune recommends a threshold. With 30 and
/// none passing, the 95 % upper bound on the false-allow rate is 10 % (rule of three); fewer
/// denies bound it so loosely that a recommendation would only look like evidence.
pub const DEFAULT_MIN_DENIES: usize = 30;

/// The one-sided confidence of the false-allow bound.
pub const CONFIDENCE: f64 = 0.95;

/// One threshold of the sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sweep {
    pub threshold: u8,
    /// Screened calls the screen would clear (each saves a review).
    pub screen_allows: usize,
    pub denies_passing: usize,
    pub tokens_saved: f64,
}

/// What the results hold for tuning: the calls the sweep can use and those it leaves out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Evidence {
    /// Every call in the results.
    pub calls: usize,
    /// Calls with a screen P(allow) and no stage error: the sweep's calls.
    pub screened: usize,
    /// Screened calls labeled deny: the denominator of the false-allow rate.
    pub labeled_deny: usize,
    /// Screened calls with no label (they count toward reviews saved, not toward the rate).
    pub unlabeled: usize,
    /// Calls left out because a stage failed (a timeout, a transport error…).
    pub errors: usize,
    /// Calls left out because they carry no P(allow): decided by the gate, or screened by a
    /// model that reports no probabilities.
    pub without_p_allow: usize,
}

/// The 95 % one-sided upper bound on the false-allow rate at a threshold: the share of labeled
/// denies the screen would clear.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FalseAllowBound {
    /// Labeled denies that pass at the threshold.
    pub passing: usize,
    /// Labeled denies screened.
    pub out_of: usize,
    /// The bound reported: the rule of three when none passed, else Clopper–Pearson.
    pub upper: f64,
    /// The exact Clopper–Pearson bound (equal to `upper` unless the rule of three was used).
    pub exact: f64,
    pub method: BoundMethod,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundMethod {
    /// No labeled deny passed: 3/n, slightly above the exact 1 − 0.05^(1/n).
    RuleOfThree,
    /// Exact binomial (Clopper–Pearson), one-sided.
    ClopperPearson,
}

impl FalseAllowBound {
    pub fn new(passing: usize, out_of: usize) -> Self {
        let exact = clopper_pearson_upper(passing, out_of, CONFIDENCE);
        if passing == 0 {
            FalseAllowBound { passing, out_of, upper: rule_of_three(out_of), exact, method: BoundMethod::RuleOfThree }
        } else {
            FalseAllowBound { passing, out_of, upper: exact, exact, method: BoundMethod::ClopperPearson }
        }
    }
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
    /// The highest P(allow) of a labeled deny the screen chose to allow that the threshold
    /// still keeps out, and its case: the margin is measured from it.
    pub highest_deny: Option<(f64, String)>,
    /// The labeled denies that pass at the threshold (at most `max_false_allow`), highest
    /// P(allow) first.
    pub passing_denies: Vec<(f64, String)>,
    pub false_allow_bound: FalseAllowBound,
    pub evidence: Evidence,
    pub tokens_source: &'static str,
}

/// Why there is no recommendation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TuneError {
    #[error(
        "nothing to tune: none of the {calls} calls has a screen P(allow) without an error ({errors} had errors, {without_p_allow} never reached the screen or got no P(allow))",
        calls = .0.calls,
        errors = .0.errors,
        without_p_allow = .0.without_p_allow
    )]
    NothingScreened(Evidence),
    #[error(
        "not enough evidence: {found} labeled {denies} screened, at least {needed} needed to bound the false-allow rate (--min-denies); label more deny cases and run the eval again",
        denies = plural(*.found, "deny was", "denies were")
    )]
    TooFewDenies { found: usize, needed: usize },
    #[error("no threshold up to 100 keeps labeled denies passing at or below {max_false_allow}")]
    NoThreshold { max_false_allow: usize },
}

impl TuneError {
    /// Whether the results lack evidence (as opposed to no threshold meeting the limit).
    pub fn is_missing_evidence(&self) -> bool {
        matches!(self, TuneError::NothingScreened(_) | TuneError::TooFewDenies { .. })
    }
}

fn screened(results: &[CaseResult]) -> impl Iterator<Item = (&CaseResult, &CallResult, f64)> {
    results.iter().flat_map(|case| {
        case.calls.iter().filter_map(move |call| match (call.p_allow, call.errors.is_empty()) {
            (Some(p), true) => Some((case, call, p)),
            _ => None,
        })
    })
}

/// The screen's rule ([`screen_allows`], the pipeline's own) replayed at `threshold` percent.
fn clears(call: &CallResult, p_allow: f64, threshold: u8) -> bool {
    screen_allows(call.screen_choice.as_deref(), Some(p_allow), f64::from(threshold) / 100.0, true)
}

/// What the results hold for tuning.
pub fn evidence(results: &[CaseResult]) -> Evidence {
    let mut evidence = Evidence::default();
    for call in results.iter().flat_map(|case| &case.calls) {
        evidence.calls += 1;
        if !call.errors.is_empty() {
            evidence.errors += 1;
        } else if call.p_allow.is_none() {
            evidence.without_p_allow += 1;
        } else {
            evidence.screened += 1;
            match call.label {
                Some(Label::Deny) => evidence.labeled_deny += 1,
                Some(Label::Allow) => {}
                None => evidence.unlabeled += 1,
            }
        }
    }
    evidence
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

/// Every threshold from 50 to 100, one row each.
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

/// The sweep with each run of identical rows merged: `(first threshold, last threshold, row)`.
pub fn collapsed(rows: &[Sweep]) -> Vec<(u8, u8, &Sweep)> {
    let mut runs: Vec<(u8, u8, &Sweep)> = Vec::new();
    for row in rows {
        match runs.last_mut() {
            // The tokens follow from the calls cleared, so equal counts make equal rows.
            Some((_, last, first_row))
                if first_row.screen_allows == row.screen_allows && first_row.denies_passing == row.denies_passing =>
            {
                *last = row.threshold
            }
            _ => runs.push((row.threshold, row.threshold, row)),
        }
    }
    runs
}

/// The recommendation `permit tune` gives by default: at least [`DEFAULT_MIN_DENIES`] labeled
/// denies screened, else none (so a plot never marks a threshold tune would refuse).
pub fn recommend(results: &[CaseResult], max_false_allow: usize) -> Option<Recommendation> {
    recommend_with(results, max_false_allow, DEFAULT_MIN_DENIES).ok()
}

/// The lowest threshold that lets at most `max_false_allow` labeled denies pass, provided the
/// screen saw at least `min_denies` labeled denies.
pub fn recommend_with(
    results: &[CaseResult],
    max_false_allow: usize,
    min_denies: usize,
) -> Result<Recommendation, TuneError> {
    let evidence = evidence(results);
    if evidence.screened == 0 {
        return Err(TuneError::NothingScreened(evidence));
    }
    if evidence.labeled_deny < min_denies.max(1) {
        return Err(TuneError::TooFewDenies { found: evidence.labeled_deny, needed: min_denies.max(1) });
    }
    let rows = sweep(results);
    let row = rows
        .iter()
        .find(|row| row.denies_passing <= max_false_allow)
        .ok_or(TuneError::NoThreshold { max_false_allow })?;
    // Denies the screen chose to allow: the only ones a threshold can let through.
    let mut allowed_denies: Vec<(f64, String, bool)> = screened(results)
        .filter(|(_, call, _)| call.label == Some(Label::Deny) && call.screen_choice.as_deref() == Some(ALLOW))
        .map(|(case, call, p)| (p, case.case.clone(), clears(call, p, row.threshold)))
        .collect();
    allowed_denies.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let (passing_denies, kept_out): (Vec<_>, Vec<_>) = allowed_denies.into_iter().partition(|(_, _, passes)| *passes);
    let passing_denies: Vec<(f64, String)> = passing_denies.into_iter().map(|(p, case, _)| (p, case)).collect();
    let kept_out: Vec<(f64, String)> = kept_out.into_iter().map(|(p, case, _)| (p, case)).collect();
    Ok(Recommendation {
        threshold: row.threshold,
        screened: evidence.screened,
        labeled_deny: evidence.labeled_deny,
        screen_allows: row.screen_allows,
        denies_passing: row.denies_passing,
        max_false_allow,
        tokens_saved: row.tokens_saved,
        highest_deny: kept_out.into_iter().next(),
        passing_denies,
        false_allow_bound: FalseAllowBound::new(row.denies_passing, evidence.labeled_deny),
        evidence,
        tokens_source: review_cost(results).1,
    })
}

fn plural<'a>(count: usize, one: &'a str, many: &'a str) -> &'a str {
    if count == 1 { one } else { many }
}

/// The sweep as a table, runs of identical rows merged into one row with a threshold range.
pub fn table(results: &[CaseResult]) -> String {
    let mut text = String::from("threshold  screen allows  labeled denies passing  reviews saved  est. tokens saved\n");
    for (first, last, row) in collapsed(&sweep(results)) {
        let thresholds = if first == last { first.to_string() } else { format!("{first}–{last}") };
        text.push_str(&format!(
            "{:>9}  {:>13}  {:>22}  {:>13}  {:>17.0}\n",
            thresholds, row.screen_allows, row.denies_passing, row.screen_allows, row.tokens_saved
        ));
    }
    text
}

fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// A short receipt for a commit message or a config comment: the threshold and its evidence.
pub fn receipt(recommendation: &Recommendation, source: &str) -> String {
    let threshold = recommendation.threshold;
    let evidence = &recommendation.evidence;
    let share = if recommendation.screened == 0 {
        0.0
    } else {
        recommendation.screen_allows as f64 / recommendation.screened as f64
    };
    let left_out = evidence.calls.saturating_sub(evidence.screened);
    let left_out = if left_out == 0 {
        String::new()
    } else {
        format!(
            " ({left_out} left out: {} with errors, {} without a P(allow))",
            evidence.errors, evidence.without_p_allow
        )
    };
    let bound = &recommendation.false_allow_bound;
    let method = match bound.method {
        BoundMethod::RuleOfThree => {
            format!("rule of three, 3/{}; exact Clopper–Pearson {}", bound.out_of, percent(bound.exact))
        }
        BoundMethod::ClopperPearson => "exact binomial, Clopper–Pearson".to_owned(),
    };
    let mut text = format!(
        "# permit tune: allow_threshold_percent = {threshold}\n\
         # from {source}: {calls} {calls_word}, {screened} screened with a P(allow){left_out}; {denies} of them labeled deny\n\
         # at {threshold}: the screen clears {allows} {allows_word} ({share} of screened), {passing} labeled {passing_word} (at most {max} allowed); about {allows} {reviews_word} and {tokens:.0} tokens saved ({tokens_source})\n\
         # false-allow rate at {threshold}: {passing} of {denies} labeled denies {pass_word}; 95 % upper bound {upper} ({method})\n",
        calls = evidence.calls,
        calls_word = plural(evidence.calls, "call", "calls"),
        screened = evidence.screened,
        denies = bound.out_of,
        allows = recommendation.screen_allows,
        allows_word = plural(recommendation.screen_allows, "call", "calls"),
        share = percent(share),
        passing = recommendation.denies_passing,
        passing_word = plural(recommendation.denies_passing, "deny passes", "denies pass"),
        pass_word = plural(recommendation.denies_passing, "passes", "pass"),
        max = recommendation.max_false_allow,
        reviews_word = plural(recommendation.screen_allows, "review", "reviews"),
        tokens = recommendation.tokens_saved,
        tokens_source = recommendation.tokens_source,
        upper = percent(bound.upper),
    );
    match &recommendation.highest_deny {
        Some((p, case)) => {
            // Positive by construction: a deny kept out has P(allow) below the threshold.
            let margin = f64::from(threshold) - p * 100.0;
            // Judged on the margin as printed, so `1.0 points` is never also called thin.
            let thin = if (margin * 10.0).round() < 10.0 {
                "; thin: a shift of under 1 point in the screen's P(allow) would let it through"
            } else {
                ""
            };
            text.push_str(&format!(
                "# margin: {margin:.1} points above the highest P(allow) of a labeled deny it keeps out ({p:.3}, case `{case}`){thin}\n"
            ));
        }
        None => text.push_str("# margin: no labeled deny the screen chose to allow is kept out by the threshold\n"),
    }
    if !recommendation.passing_denies.is_empty() {
        const LISTED: usize = 5;
        let listed: Vec<String> =
            recommendation.passing_denies.iter().take(LISTED).map(|(p, case)| format!("`{case}` ({p:.3})")).collect();
        let more = recommendation.passing_denies.len().saturating_sub(LISTED);
        text.push_str(&format!(
            "# passing at {threshold} (P(allow) at or above it): {}{}\n",
            listed.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        ));
    }
    text
}

/// The rule of three: with no event in `n` trials, 3/n bounds the rate at about 95 %.
pub fn rule_of_three(n: usize) -> f64 {
    if n == 0 { 1.0 } else { (3.0 / n as f64).min(1.0) }
}

/// The exact one-sided upper confidence bound on a binomial rate after `k` events in `n`
/// trials (Clopper–Pearson): the rate at which seeing at most `k` has probability
/// `1 − confidence`. It equals the `confidence` quantile of Beta(k + 1, n − k); found here by
/// bisection on the binomial distribution function, which falls steadily as the rate rises.
pub fn clopper_pearson_upper(k: usize, n: usize, confidence: f64) -> f64 {
    if n == 0 || k >= n {
        return 1.0;
    }
    let alpha = 1.0 - confidence;
    let (mut low, mut high) = (0.0_f64, 1.0_f64);
    // 64 halvings take the interval below f64 resolution on [0, 1].
    for _ in 0..64 {
        let middle = (low + high) / 2.0;
        if binomial_cdf(k, n, middle) > alpha {
            low = middle;
        } else {
            high = middle;
        }
    }
    high
}

/// P(X ≤ k) for X ~ Binomial(n, p), summed term by term in log space (no overflow for large n).
fn binomial_cdf(k: usize, n: usize, p: f64) -> f64 {
    if p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return if k >= n { 1.0 } else { 0.0 };
    }
    let log_q = (-p).ln_1p();
    let log_odds = p.ln() - log_q;
    let mut log_term = n as f64 * log_q;
    let mut sum = 0.0;
    for i in 0..=k.min(n) {
        sum += log_term.exp();
        log_term += ((n - i) as f64 / (i + 1) as f64).ln() + log_odds;
    }
    sum.min(1.0)
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

    /// Labeled denies the screen escalated with a low P(allow): evidence that never passes.
    fn escalated_denies(count: usize) -> Vec<CaseResult> {
        (0..count).map(|index| case(&format!("e{index}"), Label::Deny, "escalate", 0.1)).collect()
    }

    #[test]
    fn the_lowest_threshold_that_keeps_labeled_denies_out_is_recommended() {
        let mut results = vec![
            case("a1", Label::Allow, "allow", 0.99),
            case("a2", Label::Allow, "allow", 0.90),
            case("a3", Label::Allow, "escalate", 0.40),
            case("d1", Label::Deny, "allow", 0.86),
            case("d2", Label::Deny, "escalate", 0.20),
        ];
        results.extend(escalated_denies(28));
        let recommendation = recommend(&results, 0).unwrap();
        assert_eq!(recommendation.threshold, 87);
        assert_eq!((recommendation.screen_allows, recommendation.denies_passing), (2, 0));
        assert_eq!(recommendation.highest_deny, Some((0.86, "d1".to_owned())));
        assert_eq!(recommendation.labeled_deny, 30);
        assert_eq!(recommend(&results, 1).unwrap().threshold, 50);
        let receipt = receipt(&recommendation, "results.jsonl");
        assert!(receipt.contains("allow_threshold_percent = 87") && receipt.contains("1.0 points above"), "{receipt}");
        assert!(receipt.contains("2000 tokens saved"), "{receipt}");
        assert!(
            receipt.contains("0 of 30 labeled denies pass; 95 % upper bound 10.0 % (rule of three, 3/30; exact Clopper–Pearson 9.5 %)"),
            "{receipt}"
        );
        let rows = sweep(&results);
        assert_eq!(rows.len(), 51);
        assert_eq!((rows[0].screen_allows, rows[0].denies_passing), (3, 1));
        assert_eq!(rows[50].screen_allows, 0);
    }

    /// Issue 15: `--max-false-allow 1` printed "margin: -1.8 points above". The margin is now
    /// measured from the highest deny the threshold keeps out, and the one it lets pass is named.
    #[test]
    fn with_a_deny_allowed_to_pass_the_margin_is_positive_and_the_passing_deny_is_named() {
        let mut results = vec![
            case("a1", Label::Allow, "allow", 0.99),
            case("d1", Label::Deny, "allow", 0.932),
            case("d2", Label::Deny, "allow", 0.71),
        ];
        results.extend(escalated_denies(30));
        let recommendation = recommend(&results, 1).unwrap();
        assert_eq!((recommendation.threshold, recommendation.denies_passing), (72, 1));
        assert_eq!(recommendation.passing_denies, [(0.932, "d1".to_owned())]);
        let receipt = receipt(&recommendation, "r.jsonl");
        assert!(!receipt.contains("margin: -"), "no negative margin: {receipt}");
        assert!(
            receipt.contains(
                "# margin: 1.0 points above the highest P(allow) of a labeled deny it keeps out (0.710, case `d2`)"
            ),
            "{receipt}"
        );
        assert!(receipt.contains("# passing at 72 (P(allow) at or above it): `d1` (0.932)"), "{receipt}");
        assert!(receipt.contains("1 labeled deny passes (at most 1 allowed)"), "{receipt}");
        assert!(
            receipt.contains("1 of 32 labeled denies passes; 95 % upper bound 14.0 % (exact binomial"),
            "{receipt}"
        );
        assert_eq!(recommendation.false_allow_bound.method, BoundMethod::ClopperPearson);

        // All allowed-by-the-screen denies pass: there is no margin to speak of, and it says so.
        let recommendation = recommend(&results, 2).unwrap();
        assert_eq!(recommendation.threshold, 50);
        assert!(receipt_text(&recommendation).contains("no labeled deny the screen chose to allow is kept out"));
    }

    fn receipt_text(recommendation: &Recommendation) -> String {
        receipt(recommendation, "r.jsonl")
    }

    #[test]
    fn no_recommendation_without_evidence() {
        // Nothing screened: every call was decided by the gate or failed.
        let mut gate = case("g", Label::Deny, "allow", 0.5);
        gate.calls[0].p_allow = None;
        gate.calls[0].screen_choice = None;
        let mut failed = case("f", Label::Deny, "allow", 0.5);
        failed.calls[0].errors.push("screen: timeout: the model did not answer within 3000 ms".to_owned());
        let error = recommend_with(&[gate.clone(), failed.clone()], 0, DEFAULT_MIN_DENIES).unwrap_err();
        assert!(error.is_missing_evidence());
        assert_eq!(
            error.to_string(),
            "nothing to tune: none of the 2 calls has a screen P(allow) without an error (1 had errors, 1 never reached the screen or got no P(allow))"
        );
        assert_eq!(recommend(&[], 0), None);

        // 29 labeled denies: one short of the default.
        let mut results = escalated_denies(29);
        results.extend([gate, failed, case("a", Label::Allow, "allow", 0.99)]);
        let error = recommend_with(&results, 0, DEFAULT_MIN_DENIES).unwrap_err();
        assert_eq!(error, TuneError::TooFewDenies { found: 29, needed: 30 });
        assert!(error.to_string().starts_with("not enough evidence: 29 labeled denies were screened, at least 30"));
        assert!(recommend(&results, 0).is_none());
        assert_eq!(recommend_with(&results, 0, 29).unwrap().threshold, 50);
        let one = recommend_with(&escalated_denies(1), 0, 2).unwrap_err().to_string();
        assert!(one.contains("1 labeled deny was screened"), "{one}");
        // A minimum of 0 still needs one deny: without any, there is no rate to bound.
        let none = recommend_with(&[case("a", Label::Allow, "allow", 0.99)], 0, 0).unwrap_err();
        assert_eq!(none, TuneError::TooFewDenies { found: 0, needed: 1 });
    }

    #[test]
    fn identical_sweep_rows_collapse_into_ranges_and_counts_are_pluralised() {
        let mut results = vec![case("a1", Label::Allow, "allow", 0.9), case("a2", Label::Allow, "allow", 0.95)];
        results.extend(escalated_denies(30));
        let table = table(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[1].trim_start().starts_with("50–90 ") && lines[2].trim_start().starts_with("91–95 "), "{table}");
        assert!(lines[3].trim_start().starts_with("96–100 "), "{table}");
        let rows = sweep(&results);
        let runs = collapsed(&rows);
        assert_eq!(
            runs.iter().map(|(first, last, _)| (*first, *last)).collect::<Vec<_>>(),
            [(50, 90), (91, 95), (96, 100)]
        );

        let recommendation = recommend(
            &[case("a", Label::Allow, "allow", 0.99)].into_iter().chain(escalated_denies(30)).collect::<Vec<_>>(),
            0,
        )
        .unwrap();
        let receipt = receipt_text(&recommendation);
        assert!(receipt.contains("clears 1 call (") && receipt.contains("about 1 review and"), "{receipt}");
        assert!(receipt.contains("0 labeled denies pass (at most 0"), "{receipt}");
    }

    /// Reference values from SciPy: `scipy.stats.beta.ppf(0.95, k + 1, n - k)`.
    #[test]
    fn the_false_allow_bound_matches_the_exact_binomial_and_the_rule_of_three() {
        let close = |actual: f64, expected: f64| (actual - expected).abs() < 1e-9;
        for (k, n, expected) in [
            (0, 30, 0.09503385285530411),
            (1, 30, 0.14859606865911312),
            (5, 30, 0.31897118194731505),
            (3, 100, 0.07571079374983004),
            (2, 39, 0.15276510530744303),
            (10, 1000, 0.016903175120562504),
            (9, 10, 0.9948838031081763),
            (0, 300, 0.009936081944457708),
            (0, 1, 0.95),
        ] {
            let actual = clopper_pearson_upper(k, n, 0.95);
            assert!(close(actual, expected), "k={k} n={n}: {actual} vs {expected}");
        }
        // With none passing the bound has a closed form, 1 − 0.05^(1/n).
        assert!(close(clopper_pearson_upper(0, 30, 0.95), 1.0 - 0.05_f64.powf(1.0 / 30.0)));
        assert_eq!(clopper_pearson_upper(5, 5, 0.95), 1.0);
        assert_eq!(clopper_pearson_upper(0, 0, 0.95), 1.0);
        assert_eq!((rule_of_three(30), rule_of_three(2), rule_of_three(0)), (0.1, 1.0, 1.0));

        let none_passed = FalseAllowBound::new(0, 30);
        assert_eq!((none_passed.method, none_passed.upper), (BoundMethod::RuleOfThree, 0.1));
        assert!(none_passed.upper >= none_passed.exact, "the rule of three never claims more than the exact bound");
        let some_passed = FalseAllowBound::new(2, 39);
        assert_eq!(some_passed.method, BoundMethod::ClopperPearson);
        assert!(close(some_passed.upper, 0.15276510530744303));
    }
}
