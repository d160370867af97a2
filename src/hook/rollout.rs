//! Reads a Codex session file (the "rollout" JSONL at a Codex hook's `transcript_path`, under
//! `~/.codex/sessions/`) into permit's transcript events.
//!
//! Each line is `{"timestamp", "type", "payload"}`. What each becomes:
//! - `event_msg` with `payload.type` `user_message`: the words the person typed (`message`), a
//!   user message, unless Codex wrote it itself (`<environment_context>`, `<user_instructions>`,
//!   `# AGENTS.md instructions`, `<turn_aborted>`, `<subagent_notification>`, …);
//! - `response_item` lines: `function_call` (arguments, a JSON string, become the input),
//!   `custom_tool_call` (freeform input, e.g. `apply_patch`, becomes `{"input": …}`) and
//!   `local_shell_call` are tool calls; `function_call_output` and `custom_tool_call_output` are
//!   tool results; assistant `message`s are assistant prose. User- and developer-role `message`
//!   items are skipped: the typed words arrive once, as `user_message`, and the rest is context
//!   Codex injects (instructions, environment), not the person's request;
//! - `session_meta` and `turn_context` give the session id and working directory;
//! - `reasoning`, `compacted` (a model-written summary) and every other line are skipped, as are
//!   lines that are not JSON (counted).
//!
//! On failure: a file that cannot be read is an error (the hook then asks a person); a malformed
//! line is skipped and counted, never guessed at.

use std::path::Path;

use serde_json::{Map, Value};

use super::transcript::{SessionTranscript, TranscriptError, known, read_text, text_of_blocks};
use crate::request::KnownEvent;

/// Text Codex injects as a user message; never the person's request.
const INJECTED_PREFIXES: &[&str] = &[
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
    "<subagent_notification>",
    "<user_shell_command>",
    "<skill>",
];

/// Reads the rollout at `path`.
pub fn read(path: &Path) -> Result<SessionTranscript, TranscriptError> {
    Ok(parse(&read_text(path)?))
}

fn typed(message: &str) -> Option<String> {
    let trimmed = message.trim();
    if trimmed.is_empty() || INJECTED_PREFIXES.iter().any(|prefix| trimmed.starts_with(prefix)) {
        return None;
    }
    Some(message.to_owned())
}

/// A call's input: Codex writes function arguments as a JSON string.
fn arguments(raw: &Value) -> Map<String, Value> {
    match raw {
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            _ => Map::from_iter([("arguments".to_owned(), raw.clone())]),
        },
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    }
}

/// A call's output: a string, `{"content": …}`, or content items.
fn output_text(output: &Value) -> Value {
    match output {
        Value::String(text) => Value::String(text.clone()),
        Value::Object(object) => match object.get("content") {
            Some(content) => text_of_blocks(content).map(Value::String).unwrap_or(Value::Null),
            None => Value::Null,
        },
        other => text_of_blocks(other).map(Value::String).unwrap_or(Value::Null),
    }
}

pub fn parse(text: &str) -> SessionTranscript {
    let mut transcript = SessionTranscript::default();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            transcript.malformed_lines += 1;
            continue;
        };
        let payload = &value["payload"];
        match value["type"].as_str() {
            Some("session_meta") => {
                if let Some(id) = payload["id"].as_str() {
                    transcript.session_id = Some(id.to_owned());
                }
                if let Some(cwd) = payload["cwd"].as_str() {
                    transcript.cwd = Some(cwd.to_owned());
                }
            }
            Some("turn_context") => {
                if let Some(cwd) = payload["cwd"].as_str() {
                    transcript.cwd = Some(cwd.to_owned());
                }
            }
            Some("event_msg") if payload["type"] == "user_message" => {
                match payload["message"].as_str().and_then(typed) {
                    Some(text) => transcript.events.push(known(KnownEvent::User { text })),
                    None => transcript.skipped_lines += 1,
                }
            }
            Some("response_item") => read_item(payload, &mut transcript),
            _ => transcript.skipped_lines += 1,
        }
    }
    transcript
}

fn read_item(item: &Value, transcript: &mut SessionTranscript) {
    let call_id = item["call_id"].as_str().or_else(|| item["id"].as_str()).map(str::to_owned);
    let event = match (item["type"].as_str(), call_id) {
        (Some("message"), _) if item["role"] == "assistant" => {
            text_of_blocks(&item["content"]).map(|text| KnownEvent::Assistant { text })
        }
        (Some("function_call"), Some(id)) => item["name"].as_str().map(|name| KnownEvent::ToolCall {
            id,
            name: name.to_owned(),
            input: arguments(&item["arguments"]),
        }),
        (Some("custom_tool_call"), Some(id)) => item["name"].as_str().map(|name| KnownEvent::ToolCall {
            id,
            name: name.to_owned(),
            input: Map::from_iter([("input".to_owned(), item["input"].clone())]),
        }),
        (Some("local_shell_call"), Some(id)) => {
            let action = &item["action"];
            let mut input = Map::new();
            input.insert("command".to_owned(), action["command"].clone());
            if let Some(directory) = action["working_directory"].as_str() {
                input.insert("working_directory".to_owned(), Value::String(directory.to_owned()));
            }
            Some(KnownEvent::ToolCall { id, name: "local_shell".to_owned(), input })
        }
        (Some("function_call_output" | "custom_tool_call_output"), Some(id)) => {
            Some(KnownEvent::ToolResult { id, content: output_text(&item["output"]), is_error: false })
        }
        _ => None,
    };
    match event {
        Some(event) => transcript.events.push(known(event)),
        None => transcript.skipped_lines += 1,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::request::TranscriptEvent;

    #[test]
    fn typed_words_calls_and_results() {
        let lines = [
            json!({"type": "session_meta", "payload": {"id": "s1", "cwd": "/w"}}),
            json!({"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}]}}),
            json!({"type": "event_msg", "payload": {"type": "user_message", "message": "add a test"}}),
            json!({"type": "event_msg", "payload": {"type": "user_message", "message": "<environment_context>y</environment_context>"}}),
            json!({"type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}", "call_id": "c1"}}),
            json!({"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1", "output": {"content": "a\nb", "success": true}}}),
            json!({"type": "compacted", "payload": {"message": "summary by a model"}}),
        ];
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        let transcript = parse(&format!("{}\nnot json\n", text.join("\n")));
        assert_eq!((transcript.session_id.as_deref(), transcript.cwd.as_deref()), (Some("s1"), Some("/w")));
        assert_eq!(transcript.malformed_lines, 1);
        let users: Vec<&TranscriptEvent> = transcript
            .events
            .iter()
            .filter(|event| matches!(event, TranscriptEvent::Known(KnownEvent::User { .. })))
            .collect();
        assert_eq!(users, [&known(KnownEvent::User { text: "add a test".to_owned() })]);
        assert!(transcript.events.contains(&known(KnownEvent::ToolResult {
            id: "c1".to_owned(),
            content: Value::String("a\nb".to_owned()),
            is_error: false
        })));
    }
}
