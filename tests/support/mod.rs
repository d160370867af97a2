//! Shared by the test crates that build `results.jsonl` lines by hand (`tests/eval.rs`,
//! `tests/report_browser.rs`): one call line in the shape `permit eval` writes.

use serde_json::{Value, json};

/// One `results.jsonl` call line. `screen` is the screen's choice and P(allow); `error`, a
/// stage error; `prompt_tokens`, what the screen's prompt cost.
pub fn call_line(
    id: &str,
    label: Option<&str>,
    decision: &str,
    stage: &str,
    screen: Option<(&str, f64)>,
    error: Option<&str>,
    prompt_tokens: u64,
) -> Value {
    let mut call = json!({
        "id": id,
        "decision": decision,
        "stage": stage,
        "tier": "high",
        "gate_action": if stage == "gate" { decision } else { "classify" },
        "reason_code": match (stage, decision) {
            ("gate", _) => "known_safe_command",
            ("screen", "allow") => "screen_allow",
            ("review", "allow") => "review_allow",
            ("review", _) => "review_deny",
            (_, _) => "screen_timeout",
        },
        "screen_latency_ms": null,
        "review_latency_ms": null,
        "screen_tokens": {"prompt_tokens": prompt_tokens, "completion_tokens": 1},
        "review_tokens": {},
    });
    if let Some(label) = label {
        call["label"] = label.into();
    }
    if let Some((choice, p_allow)) = screen {
        call["screen_model"] = "openai/small".into();
        call["screen_choice"] = choice.into();
        call["p_allow"] = p_allow.into();
    }
    if let Some(error) = error {
        call["screen_model"] = "openai/small".into();
        call["errors"] = json!([error]);
    }
    call
}
