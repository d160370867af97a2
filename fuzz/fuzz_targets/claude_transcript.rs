//! Fuzzes the Claude Code transcript reader (`permit::hook::transcript`): any bytes as a session
//! file. Reading must not panic; cutting at the pending call (by id, and by name and input as a
//! `PermissionRequest` does) keeps a prefix of the events; each line is read on its own, and a
//! sidechain line gives no event; and what is read renders for the models (or fails closed as over budget) with its fences intact.
#![no_main]

use libfuzzer_sys::fuzz_target;
use permit::classifier::transcript::{TranscriptBudget, TranscriptError, render};
use permit::hook::transcript::{PendingCallRef, parse, up_to_pending};
use permit::request::{DecideRequest, KnownEvent, PendingCall, TranscriptEvent};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let transcript = parse(text);
    let lines = text.lines().filter(|line| !line.trim().is_empty()).count();
    assert!(transcript.malformed_lines + transcript.skipped_lines <= lines);
    // Each line is read on its own: the file's events are its lines' events, in order, and a
    // sidechain line (a subagent's conversation) gives none.
    let mut by_line = Vec::new();
    for line in text.lines() {
        let events = parse(line).events;
        let sidechain = serde_json::from_str::<serde_json::Value>(line).is_ok_and(|value| value["isSidechain"] == true);
        assert!(!sidechain || events.is_empty(), "a sidechain line was read: {line:?}");
        by_line.extend(events);
    }
    assert_eq!(by_line, transcript.events);
    for event in &transcript.events {
        if let TranscriptEvent::Known(KnownEvent::User { text }) = event {
            assert!(!text.trim().is_empty(), "an empty user message: {text:?}");
        }
    }
    let last_call = transcript.events.iter().rev().find_map(|event| match event {
        TranscriptEvent::Known(KnownEvent::ToolCall { id, name, input }) => {
            Some((id.clone(), name.clone(), input.clone()))
        }
        _ => None,
    });
    let (id, name, input) = last_call.unwrap_or_else(|| ("none".to_owned(), "Bash".to_owned(), serde_json::Map::new()));
    for by_id in [Some(id.as_str()), None] {
        let cut = up_to_pending(&transcript.events, PendingCallRef { id: by_id, name: &name, input: &input });
        assert!(transcript.events.starts_with(&cut));
    }
    let request = DecideRequest {
        transcript: up_to_pending(&transcript.events, PendingCallRef { id: Some(&id), name: &name, input: &input }),
        pending: vec![PendingCall { id, name, input, ..PendingCall::default() }],
        ..DecideRequest::default()
    };
    let questionnaire = ["AskUserQuestion".to_owned()];
    match render(&request, &questionnaire, TranscriptBudget { max_tokens: 2_000, argument_chars: 100 }) {
        Ok(rendered) => {
            assert!(rendered.text.starts_with("<transcript>\n") && rendered.text.ends_with("</pending_calls>\n"));
            assert_eq!(rendered.text.matches("<pending_calls>").count(), 1, "a fence was forged");
            assert_eq!(rendered.text.matches("</transcript>").count(), 1, "a fence was forged");
        }
        Err(TranscriptError::OverBudget { needed, budget }) => assert!(needed > budget),
    }
});
