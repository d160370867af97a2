//! Fuzzes the decision-style answer parser (`permit::model::answer::parse_decision`): any first
//! token, its log-probability and top alternatives, as a server might send them (including NaN,
//! infinities and positive log-probabilities). It must not panic, and an answer it accepts has
//! the first token's option as its choice and a probability for every option, each finite and in
//! 0..=1, summing to 1: a P(allow) that is NaN or above 1 could not be compared with the
//! threshold honestly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use permit::classifier::questions::{screen_question, verdict_question};
use permit::model::answer::parse_decision;

fuzz_target!(|input: (bool, String, Option<f64>, Vec<(String, f64)>, u8)| {
    let (review, first_token, first_logprob, alternatives, floor) = input;
    let question = if review { verdict_question("c1") } else { screen_question("c1") };
    // `min_label_mass` is validated to 0..=1 at config load; 0.5 is the default.
    let min_label_mass = f64::from(floor) / 255.0;
    let Ok(choice) = parse_decision(&question, &first_token, first_logprob, &alternatives, min_label_mass) else {
        return;
    };
    assert!(question.options.iter().any(|option| option.id == choice.option));
    let probabilities = choice.probabilities.expect("the decision style reports probabilities");
    assert_eq!(probabilities.len(), question.options.len());
    for (option, p) in &probabilities {
        assert!(
            p.is_finite() && (0.0..=1.0 + 1e-9).contains(p),
            "P({option}) = {p} for {first_token:?} {first_logprob:?} {alternatives:?}"
        );
    }
    let total: f64 = probabilities.values().sum();
    assert!((total - 1.0).abs() < 1e-6, "probabilities sum to {total}");
});
