//! `permit replay`: turns real Claude Code sessions into unlabeled eval cases, so `permit eval`
//! shows how permit would have decided on a user's own history.
//!
//! From each transcript it takes the calls worth judging (Bash, PowerShell, Monitor, Edit, Write,
//! NotebookEdit, WebFetch, MCP tools, and MultiEdit from older sessions), spread evenly through
//! the session, at most
//! `per_session` of them; each case holds the session up to that call and the call as its
//! pending call. Cases carry no label: `permit eval` reports them as a distribution of
//! decisions, never as errors.
//!
//! On failure: an unreadable transcript is an error naming it; a call that cannot be expressed
//! as a valid request (an id permit refuses, say) is skipped and counted.

use std::path::Path;

use serde_json::json;

use super::transcript::{self, TranscriptError};
use crate::request::{KnownEvent, TranscriptEvent};

/// Tools whose calls are replayed (besides every `mcp__…` tool).
pub const REPLAYED_TOOLS: &[&str] =
    &["Bash", "PowerShell", "Monitor", "Edit", "MultiEdit", "Write", "NotebookEdit", "WebFetch"];

fn replayed(name: &str) -> bool {
    REPLAYED_TOOLS.contains(&name) || name.starts_with("mcp__")
}

/// `count` indices spread evenly over `0..total` (first and last included).
pub fn spread(total: usize, count: usize) -> Vec<usize> {
    if total == 0 || count == 0 {
        return Vec::new();
    }
    if count >= total {
        return (0..total).collect();
    }
    if count == 1 {
        return vec![total / 2];
    }
    let mut picked: Vec<usize> =
        (0..count).map(|index| ((index * (total - 1)) as f64 / (count - 1) as f64).round() as usize).collect();
    picked.dedup();
    picked
}

fn id_part(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || "_-.".contains(c) { c } else { '_' }).take(80).collect()
}

/// The cases of one transcript, as JSONL lines; and how many calls were skipped.
pub fn cases(path: &Path, per_session: usize) -> Result<(Vec<String>, usize), TranscriptError> {
    let session = transcript::read(path)?;
    let calls: Vec<usize> = session
        .events
        .iter()
        .enumerate()
        .filter(
            |(_, event)| matches!(event, TranscriptEvent::Known(KnownEvent::ToolCall { name, .. }) if replayed(name)),
        )
        .map(|(position, _)| position)
        .collect();
    let stem = path.file_stem().map(|stem| id_part(&stem.to_string_lossy())).unwrap_or_else(|| "session".to_owned());
    let mut lines = Vec::new();
    let mut skipped = 0;
    for index in spread(calls.len(), per_session) {
        let position = calls[index];
        let TranscriptEvent::Known(KnownEvent::ToolCall { id, name, input }) = &session.events[position] else {
            continue;
        };
        let case = json!({
            "id": format!("{stem}#{}", id_part(id)),
            "category": format!("replay/{name}"),
            "source": path.display().to_string(),
            "session_id": session.session_id,
            "cwd": session.cwd,
            "transcript": &session.events[..position],
            "pending": [{ "id": id, "name": name, "input": input }],
        });
        let line = case.to_string();
        // Only cases `permit eval` will accept are written.
        match crate::request::parse_cases("replay", &line) {
            Ok(_) => lines.push(line),
            Err(_) => skipped += 1,
        }
    }
    Ok((lines, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_evenly_from_first_to_last() {
        assert_eq!(spread(10, 3), [0, 5, 9]);
        assert_eq!(spread(3, 10), [0, 1, 2]);
        assert_eq!(spread(7, 1), [3]);
        assert!(spread(0, 5).is_empty());
        assert_eq!(spread(100, 5), [0, 25, 50, 74, 99]);
    }
}
