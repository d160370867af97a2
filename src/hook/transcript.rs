//! Reads a Claude Code session transcript (the JSONL file at a hook's `transcript_path`) into
//! permit's transcript events.
//!
//! What each line becomes:
//! - `user` lines: a text content (string or `text` blocks) is the user's words; `tool_result`
//!   blocks riding on them are tool results (string or block content, `is_error`);
//!   `isMeta` lines (caveats and command wrappers Claude Code writes itself) are skipped;
//! - `assistant` lines: `text` blocks are assistant prose, `tool_use` blocks are tool calls
//!   (`thinking` blocks are skipped);
//! - sidechain lines (`isSidechain: true`, a subagent's own conversation) are skipped: their
//!   "user" turns are the main agent's prompts to the subagent, not the user's words;
//! - `system`, `summary` and line types it does not know are skipped, as are lines that are not
//!   JSON (counted, so a caller can say how many).
//!
//! On failure: a file that cannot be read is an error (the hook answers `ask`); a malformed line
//! is skipped and counted, never guessed at.

use std::path::Path;

use serde_json::{Map, Value};

use crate::request::{KnownEvent, TranscriptEvent};

/// A transcript read from disk.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionTranscript {
    pub events: Vec<TranscriptEvent>,
    /// `cwd` of the last line that names one.
    pub cwd: Option<String>,
    /// `sessionId` of the last line that names one.
    pub session_id: Option<String>,
    pub malformed_lines: usize,
    pub skipped_lines: usize,
}

fn text_of_blocks(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|block| block["type"] == "text")
                .filter_map(|block| block["text"].as_str())
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

fn known(event: KnownEvent) -> TranscriptEvent {
    TranscriptEvent::Known(event)
}

/// Reads the transcript at `path`.
pub fn read(path: &Path) -> Result<SessionTranscript, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read the transcript `{}`: {}", path.display(), error.kind()))?;
    Ok(parse(&text))
}

pub fn parse(text: &str) -> SessionTranscript {
    let mut transcript = SessionTranscript::default();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            transcript.malformed_lines += 1;
            continue;
        };
        if let Some(cwd) = value["cwd"].as_str() {
            transcript.cwd = Some(cwd.to_owned());
        }
        if let Some(session) = value["sessionId"].as_str() {
            transcript.session_id = Some(session.to_owned());
        }
        if value["isSidechain"] == true || value["isMeta"] == true {
            transcript.skipped_lines += 1;
            continue;
        }
        let content = &value["message"]["content"];
        match value["type"].as_str() {
            Some("user") => match content {
                Value::String(text) => transcript.events.push(known(KnownEvent::User { text: text.clone() })),
                Value::Array(blocks) => {
                    for block in blocks {
                        match block["type"].as_str() {
                            Some("text") => {
                                if let Some(text) = block["text"].as_str() {
                                    transcript.events.push(known(KnownEvent::User { text: text.to_owned() }));
                                }
                            }
                            Some("tool_result") => {
                                let Some(id) = block["tool_use_id"].as_str() else { continue };
                                let content =
                                    text_of_blocks(&block["content"]).map(Value::String).unwrap_or(Value::Null);
                                transcript.events.push(known(KnownEvent::ToolResult {
                                    id: id.to_owned(),
                                    content,
                                    is_error: block["is_error"] == true,
                                }));
                            }
                            _ => {}
                        }
                    }
                }
                _ => transcript.skipped_lines += 1,
            },
            Some("assistant") => {
                for block in content.as_array().map(Vec::as_slice).unwrap_or_default() {
                    match block["type"].as_str() {
                        Some("text") => {
                            if let Some(text) = block["text"].as_str() {
                                transcript.events.push(known(KnownEvent::Assistant { text: text.to_owned() }));
                            }
                        }
                        Some("tool_use") => {
                            let (Some(id), Some(name)) = (block["id"].as_str(), block["name"].as_str()) else {
                                continue;
                            };
                            let input: Map<String, Value> = block["input"].as_object().cloned().unwrap_or_default();
                            transcript.events.push(known(KnownEvent::ToolCall {
                                id: id.to_owned(),
                                name: name.to_owned(),
                                input,
                            }));
                        }
                        _ => {}
                    }
                }
            }
            _ => transcript.skipped_lines += 1,
        }
    }
    transcript
}

/// Drops the call `id` (and anything after it) from the events: the pending call is judged,
/// not shown as already made.
pub fn up_to_call(events: &[TranscriptEvent], id: &str) -> Vec<TranscriptEvent> {
    let position = events
        .iter()
        .position(|event| matches!(event, TranscriptEvent::Known(KnownEvent::ToolCall { id: call, .. }) if call == id));
    match position {
        Some(position) => events[..position].to_vec(),
        None => events.to_vec(),
    }
}
