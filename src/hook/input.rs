//! Reads a hook's JSON input (Claude Code's and Codex's `PreToolUse` / `PermissionRequest`
//! shapes) into the call permit judges.
//!
//! Decides nothing. It reads the fields permit uses and ignores the rest (`turn_id`, `model`,
//! `agent_id`, `permission_suggestions`, …). One host quirk is normalised here: Codex sends
//! `apply_patch`'s patch in `tool_input.command`, while the tool's own schema names it `input`;
//! the patch is judged under `input` whichever field carried it (both, joined, when both are
//! present and differ, so every file header in either is judged).
//!
//! On failure: input that is not a JSON object, or whose `hook_event_name` is not a string, is an
//! [`InputError`]: the hook cannot tell which call or event it is answering. A field of the wrong
//! type is never guessed at: it is recorded in [`HookInput::problems`], the call is still shown
//! to the gate (so a hard deny stays a deny), and nothing else about it is allowed.

use std::path::PathBuf;

use serde_json::{Map, Value};

/// The hook events permit answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Before every matched call; the answer can allow, ask or deny.
    PreToolUse,
    /// When the host is about to show its own approval prompt; the answer can allow or deny, or
    /// give no verdict so the prompt shows.
    PermissionRequest,
}

/// The host session's permission mode (`permission_mode`), in Claude Code's vocabulary, which
/// Codex's hook input reuses.
#[derive(Clone, Debug, PartialEq, Eq, strum::EnumIter)]
pub enum PermissionMode {
    /// `default` (shown as "Manual", also spelt `manual`): the host prompts for anything not
    /// pre-approved.
    Default,
    /// `acceptEdits`: the host already accepts file edits in the working directory.
    AcceptEdits,
    /// `plan`: the host blocks edits until the person approves a plan.
    Plan,
    /// `auto`: the host's own classifier answers prompts instead of a person.
    Auto,
    /// `dontAsk`: the host denies anything that would prompt.
    DontAsk,
    /// `bypassPermissions`: the host prompts for nothing.
    BypassPermissions,
    /// A mode permit does not know; treated as one that shows no prompt.
    Other(String),
}

impl PermissionMode {
    pub fn parse(text: &str) -> Self {
        match text {
            "default" | "manual" => Self::Default,
            "acceptEdits" => Self::AcceptEdits,
            "plan" => Self::Plan,
            "auto" => Self::Auto,
            "dontAsk" => Self::DontAsk,
            "bypassPermissions" => Self::BypassPermissions,
            other => Self::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Plan => "plan",
            Self::Auto => "auto",
            Self::DontAsk => "dontAsk",
            Self::BypassPermissions => "bypassPermissions",
            Self::Other(other) => other,
        }
    }

    /// Whether a hook's `ask` reaches a person in this mode. `bypassPermissions` runs the call,
    /// `dontAsk` denies it, and `auto` lets the host's classifier answer (a hook's `ask` has no
    /// effect there: anthropics/claude-code#89561). An unknown mode is assumed not to prompt.
    pub fn shows_prompts(&self) -> bool {
        matches!(self, Self::Default | Self::AcceptEdits | Self::Plan)
    }
}

/// What the hook input says about the pending call.
#[derive(Clone, Debug, PartialEq)]
pub struct HookInput {
    pub event: Event,
    pub session_id: Option<String>,
    pub transcript_path: Option<PathBuf>,
    pub cwd: Option<String>,
    pub permission_mode: PermissionMode,
    /// `None` when the input names no tool: there is no call to judge.
    pub tool_name: Option<String>,
    pub tool_input: Map<String, Value>,
    /// Claude Code's and Codex's `PreToolUse` carry it; `PermissionRequest` does not.
    pub tool_use_id: Option<String>,
    /// Fields that were present but unreadable, by name and what was wrong.
    pub problems: Vec<String>,
}

/// A parsed hook input.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    /// A `PreToolUse` or `PermissionRequest` call to judge.
    Call(HookInput),
    /// Installed on an event permit does not judge (`Stop`, `PostToolUse`, …): no opinion.
    OtherEvent,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("the hook input is not JSON: {0}")]
    NotJson(String),
    #[error("the hook input is not a JSON object")]
    NotObject,
    #[error("the hook input's `hook_event_name` is not a string")]
    EventName,
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    let cut: String = text.chars().take(60).collect();
    if cut.len() < text.len() { format!("{cut}…") } else { cut }
}

/// An optional string field; anything else present is a problem.
fn optional_string(object: &Map<String, Value>, field: &str, problems: &mut Vec<String>) -> Option<String> {
    match object.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => {
            problems.push(format!("`{field}` is not a string: {}", short(other)));
            None
        }
    }
}

/// Reads a hook input.
pub fn parse(stdin: &str) -> Result<Parsed, InputError> {
    let value: Value = serde_json::from_str(stdin).map_err(|error| InputError::NotJson(error.to_string()))?;
    let Value::Object(object) = value else {
        return Err(InputError::NotObject);
    };
    let event = match object.get("hook_event_name") {
        // Hosts always name the event; a bare call is read as `PreToolUse`.
        None | Some(Value::Null) => Event::PreToolUse,
        Some(Value::String(name)) if name == "PreToolUse" => Event::PreToolUse,
        Some(Value::String(name)) if name == "PermissionRequest" => Event::PermissionRequest,
        Some(Value::String(_)) => return Ok(Parsed::OtherEvent),
        Some(_) => return Err(InputError::EventName),
    };
    let mut problems = Vec::new();
    let session_id = optional_string(&object, "session_id", &mut problems);
    let transcript_path =
        optional_string(&object, "transcript_path", &mut problems).filter(|path| !path.is_empty()).map(PathBuf::from);
    let cwd = optional_string(&object, "cwd", &mut problems);
    let permission_mode = optional_string(&object, "permission_mode", &mut problems)
        .map(|mode| PermissionMode::parse(&mode))
        .unwrap_or(PermissionMode::Default);
    let tool_name = optional_string(&object, "tool_name", &mut problems).filter(|name| !name.is_empty());
    let tool_use_id = optional_string(&object, "tool_use_id", &mut problems);
    let mut tool_input = match object.get("tool_input") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(other) => {
            problems.push(format!("`tool_input` is not an object: {}", short(other)));
            Map::new()
        }
    };
    if tool_name.as_deref() == Some("apply_patch") {
        normalise_apply_patch(&mut tool_input);
    }
    Ok(Parsed::Call(HookInput {
        event,
        session_id,
        transcript_path,
        cwd,
        permission_mode,
        tool_name,
        tool_input,
        tool_use_id,
        problems,
    }))
}

/// Codex's hooks carry `apply_patch`'s patch as `{"command": PATCH}` (its `PreToolUse` and
/// `PermissionRequest` payloads for the tool); the tool itself, and permit's preset, name it
/// `input`. The patch moves to `input`; when both are present and differ, both are kept, joined,
/// so the gate judges every file header either one names.
fn normalise_apply_patch(tool_input: &mut Map<String, Value>) {
    let Some(Value::String(command)) = tool_input.get("command").cloned() else {
        return;
    };
    let patch = match tool_input.get("input") {
        Some(Value::String(input)) if input == &command => command,
        Some(Value::String(input)) => format!("{input}\n{command}"),
        // A non-string `input` cannot hide the patch in `command`: that patch is judged.
        Some(_) | None => command,
    };
    tool_input.remove("command");
    tool_input.insert("input".to_owned(), Value::String(patch));
}

#[cfg(test)]
mod tests {
    /// Every mode's name reads back as the same mode (the host's spelling, `Other` kept as is).
    #[test]
    fn every_permission_mode_round_trips() {
        use strum::IntoEnumIterator;
        for mode in super::PermissionMode::iter() {
            let mode = match mode {
                super::PermissionMode::Other(_) => super::PermissionMode::Other("someNewMode".to_owned()),
                known => known,
            };
            assert_eq!(super::PermissionMode::parse(mode.as_str()), mode);
        }
    }

    use serde_json::json;

    use super::*;

    fn call(value: Value) -> HookInput {
        match parse(&value.to_string()).unwrap() {
            Parsed::Call(input) => input,
            Parsed::OtherEvent => panic!("not a call"),
        }
    }

    #[test]
    fn codex_apply_patch_is_judged_under_input() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch";
        let input = call(
            json!({"hook_event_name": "PreToolUse", "tool_name": "apply_patch", "tool_input": {"command": patch}}),
        );
        assert_eq!(Value::Object(input.tool_input), json!({"input": patch}));
        let both = call(json!({"tool_name": "apply_patch", "tool_input": {"command": "B", "input": "A"}}));
        assert_eq!(Value::Object(both.tool_input), json!({"input": "A\nB"}));
        let bash = call(json!({"tool_name": "Bash", "tool_input": {"command": "ls"}}));
        assert_eq!(Value::Object(bash.tool_input), json!({"command": "ls"}));
    }

    #[test]
    fn wrong_types_are_problems_not_guesses() {
        let input =
            call(json!({"tool_name": "Bash", "session_id": {"a": 1}, "transcript_path": 7, "tool_input": "ls"}));
        assert_eq!(input.problems.len(), 3, "{:?}", input.problems);
        assert!(input.session_id.is_none() && input.transcript_path.is_none() && input.tool_input.is_empty());
        assert_eq!(parse("[1]"), Err(InputError::NotObject));
        assert_eq!(parse(r#"{"hook_event_name": 3}"#), Err(InputError::EventName));
        assert!(matches!(parse("not json"), Err(InputError::NotJson(_))));
        assert_eq!(parse(r#"{"hook_event_name": "Stop"}"#), Ok(Parsed::OtherEvent));
    }

    #[test]
    fn modes_that_show_no_prompt() {
        for (mode, prompts) in [
            ("default", true),
            ("manual", true),
            ("acceptEdits", true),
            ("plan", true),
            ("auto", false),
            ("dontAsk", false),
            ("bypassPermissions", false),
            ("somethingNew", false),
        ] {
            assert_eq!(PermissionMode::parse(mode).shows_prompts(), prompts, "{mode}");
        }
    }
}
