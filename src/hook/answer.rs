//! Turns permit's verdict into the answer each host enforces, for each hook event and mode.
//!
//! Decides nothing new: it only chooses, for a verdict permit already reached, the answer shape
//! under which the host does what permit decided. Where the host cannot do it, it answers
//! stricter, never looser:
//!
//! | verdict | Claude Code `PreToolUse` | Claude Code `PermissionRequest` | Codex `PreToolUse` | Codex `PermissionRequest` |
//! |---|---|---|---|---|
//! | allow | `allow` | `behavior: allow` | no output (`{}`): Codex's own policy applies | `behavior: allow` |
//! | ask | `ask` (a mode without prompts: `deny`) | no verdict, the dialog shows (a mode without prompts: `deny`) | `deny`, asking the agent to ask the user | `deny`, likewise |
//! | deny | `deny` | `behavior: deny` | `deny` | `behavior: deny` |
//! | no opinion | `{}` | `{}` | `{}` | `{}` |
//!
//! Codex answers `ask` and a bare `allow` to `PreToolUse` with "unsupported", marks the hook as
//! failed and lets the call go on under its own approval policy (openai/codex#28437, #21753), so
//! only a deny with a non-empty reason is enforced there. Its `PermissionRequest` runs before
//! Codex's guardian or user approval, so "no verdict" may reach a model rather than a person:
//! permit denies instead. No opinion is given only for the host's own person-facing tools
//! (`AskUserQuestion`, `ExitPlanMode`), whose prompt *is* the person answering.
//!
//! On failure: input that cannot be read at all (no event is known) is answered with exit code 2
//! and the reason on stderr, which both hosts enforce as a block for `PreToolUse` and a deny for
//! `PermissionRequest`.

use serde_json::{Value, json};

use super::input::{Event, PermissionMode};
use crate::decision::{Decision, ReasonCode};
use crate::request::CallDecision;

/// The agent host the hook answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    ClaudeCode,
    Codex,
}

impl Host {
    pub fn name(self) -> &'static str {
        match self {
            Host::ClaudeCode => "Claude Code",
            Host::Codex => "Codex",
        }
    }
}

/// What permit wants done with the call, after the host's mode is taken into account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Ask,
    Deny,
    /// The host's own flow decides (only for tools whose prompt is the person answering).
    NoOpinion,
}

/// What the hook process prints and how it exits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: u8,
}

impl Answer {
    fn json(value: Value) -> Self {
        Answer { stdout: value.to_string(), stderr: String::new(), exit_code: 0 }
    }

    /// No opinion: the host's own permission flow applies.
    pub fn no_opinion() -> Self {
        Answer::json(json!({}))
    }
}

/// The sentence shown for a decision. Reasons from the gate and the pipeline already name permit
/// ("blocked by permit…", "permit needs a person…"); only a reason that does not is prefixed.
pub fn reason_text(decision: &CallDecision) -> String {
    match (&decision.reason, decision.decision) {
        (Some(reason), _) if names_permit(reason) => reason.clone(),
        (Some(reason), _) => format!("permit: {reason}"),
        (None, Decision::Allow) => format!(
            "allowed by permit's {} ({})",
            decision.stage.as_str(),
            decision.reason_code.map_or("no reason code", ReasonCode::as_str)
        ),
        (None, _) => "permit: a person should decide".to_owned(),
    }
}

fn names_permit(reason: &str) -> bool {
    reason.split(|c: char| !c.is_ascii_alphanumeric()).any(|word| word.eq_ignore_ascii_case("permit"))
}

/// Why an `ask` became a block: no prompt can reach a person.
fn blocked_ask(host: Host, mode: &PermissionMode, reason: &str) -> String {
    let why = match host {
        Host::Codex => "Codex cannot show an approval prompt for a hook's answer".to_owned(),
        Host::ClaudeCode => format!("This session's permission mode (`{}`) shows no approval prompt", mode.as_str()),
    };
    format!(
        "{reason}. {why}, so permit blocks the call: ask the user to approve it; if they do, they can run it themselves or allow it in permit's config"
    )
}

fn pre_tool_use(decision: &str, reason: &str) -> Answer {
    Answer::json(json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }))
}

fn permission_request_allow() -> Answer {
    Answer::json(json!({
        "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": { "behavior": "allow" } }
    }))
}

fn permission_request_deny(message: &str) -> Answer {
    Answer::json(json!({
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": { "behavior": "deny", "message": message },
        }
    }))
}

/// The host's answer for `verdict`, with `reason` shown to the agent (and the person).
pub fn render(host: Host, event: Event, mode: &PermissionMode, verdict: Verdict, reason: &str) -> Answer {
    // An `ask` that can reach a person stays an `ask`; one that cannot becomes a deny.
    let ask_reaches_a_person = host == Host::ClaudeCode && mode.shows_prompts();
    match (verdict, event) {
        // The host's own person-facing flow decides.
        (Verdict::NoOpinion, _) => Answer::no_opinion(),
        // Denies are enforced by both hosts in both events.
        (Verdict::Deny, Event::PreToolUse) => pre_tool_use("deny", reason),
        (Verdict::Deny, Event::PermissionRequest) => permission_request_deny(reason),
        // Codex rejects a bare `allow`; giving no opinion leaves the call to Codex's own approval
        // policy, and if Codex asks, its `PermissionRequest` reaches permit and is allowed there.
        (Verdict::Allow, Event::PreToolUse) if host == Host::Codex => Answer::no_opinion(),
        (Verdict::Allow, Event::PreToolUse) => pre_tool_use("allow", reason),
        (Verdict::Allow, Event::PermissionRequest) => permission_request_allow(),
        (Verdict::Ask, Event::PreToolUse) if ask_reaches_a_person => pre_tool_use("ask", reason),
        // No verdict: Claude Code shows its permission dialog to the person.
        (Verdict::Ask, Event::PermissionRequest) if ask_reaches_a_person => Answer::no_opinion(),
        (Verdict::Ask, Event::PreToolUse) => pre_tool_use("deny", &blocked_ask(host, mode, reason)),
        (Verdict::Ask, Event::PermissionRequest) => permission_request_deny(&blocked_ask(host, mode, reason)),
    }
}

/// The answer to input the hook could not read at all: exit code 2 with the reason on stderr,
/// a block for `PreToolUse` and a deny for `PermissionRequest` in both hosts, whichever event
/// it was.
pub fn unreadable(what: &str) -> Answer {
    Answer {
        stdout: String::new(),
        stderr: format!("permit could not read the hook input ({what}), so the call is blocked"),
        exit_code: 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Tier;
    use crate::request::Stage;

    fn decision(decision: Decision, reason: Option<&str>) -> CallDecision {
        CallDecision {
            id: "c".to_owned(),
            decision,
            stage: Stage::Gate,
            tier: Tier::High,
            reason: reason.map(str::to_owned),
            reason_code: Some(ReasonCode::KnownSafeCommand),
            p_allow: None,
            rules: Vec::new(),
        }
    }

    #[test]
    fn reasons_name_permit_once() {
        let blocked = decision(Decision::Deny, Some("blocked by permit, and no approval can unblock it: x"));
        assert_eq!(reason_text(&blocked), "blocked by permit, and no approval can unblock it: x");
        let asked = decision(Decision::Ask, Some("permit needs a person to approve this call: y"));
        assert_eq!(reason_text(&asked), "permit needs a person to approve this call: y");
        let review = decision(Decision::Deny, Some("The call was not requested by the user."));
        assert_eq!(reason_text(&review), "permit: The call was not requested by the user.");
        assert_eq!(reason_text(&decision(Decision::Allow, None)), "allowed by permit's gate (known_safe_command)");
        assert!(!names_permit("permitted"));
    }

    #[test]
    fn every_cell_of_the_answer_table() {
        let default = PermissionMode::Default;
        let bypass = PermissionMode::BypassPermissions;
        let decision_of = |answer: &Answer| -> (Option<String>, Option<String>) {
            let value: Value = serde_json::from_str(&answer.stdout).unwrap();
            let output = &value["hookSpecificOutput"];
            (
                output["permissionDecision"].as_str().map(str::to_owned),
                output["decision"]["behavior"].as_str().map(str::to_owned),
            )
        };
        let cases = [
            (Host::ClaudeCode, Event::PreToolUse, &default, Verdict::Allow, (Some("allow"), None)),
            (Host::ClaudeCode, Event::PreToolUse, &default, Verdict::Ask, (Some("ask"), None)),
            (Host::ClaudeCode, Event::PreToolUse, &bypass, Verdict::Ask, (Some("deny"), None)),
            (Host::ClaudeCode, Event::PreToolUse, &default, Verdict::Deny, (Some("deny"), None)),
            (Host::ClaudeCode, Event::PermissionRequest, &default, Verdict::Allow, (None, Some("allow"))),
            (Host::ClaudeCode, Event::PermissionRequest, &default, Verdict::Ask, (None, None)),
            (Host::ClaudeCode, Event::PermissionRequest, &bypass, Verdict::Ask, (None, Some("deny"))),
            (Host::ClaudeCode, Event::PermissionRequest, &default, Verdict::Deny, (None, Some("deny"))),
            (Host::Codex, Event::PreToolUse, &default, Verdict::Allow, (None, None)),
            (Host::Codex, Event::PreToolUse, &default, Verdict::Ask, (Some("deny"), None)),
            (Host::Codex, Event::PreToolUse, &default, Verdict::Deny, (Some("deny"), None)),
            (Host::Codex, Event::PermissionRequest, &default, Verdict::Allow, (None, Some("allow"))),
            (Host::Codex, Event::PermissionRequest, &default, Verdict::Ask, (None, Some("deny"))),
            (Host::Codex, Event::PermissionRequest, &default, Verdict::Deny, (None, Some("deny"))),
            (Host::Codex, Event::PreToolUse, &default, Verdict::NoOpinion, (None, None)),
        ];
        for (host, event, mode, verdict, (expected_pre, expected_request)) in cases {
            let answer = render(host, event, mode, verdict, "permit needs a person to approve this call: z");
            assert_eq!(answer.exit_code, 0);
            let got = decision_of(&answer);
            assert_eq!(
                (got.0.as_deref(), got.1.as_deref()),
                (expected_pre, expected_request),
                "{host:?} {event:?} {mode:?} {verdict:?}"
            );
        }
        let blocked = render(Host::Codex, Event::PreToolUse, &default, Verdict::Ask, "permit needs a person: z");
        assert!(blocked.stdout.contains("ask the user to approve it"), "{}", blocked.stdout);
        assert_eq!(unreadable("x").exit_code, 2);
    }
}
