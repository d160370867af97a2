//! What the models are shown of a long session, at the service's body limit (2 MiB): (a) a
//! request whose transcript holds 20,000+ small tool calls, rendered and trimmed to the default
//! budget (8,000 tokens, so almost every call is dropped); (b) one of questionnaire calls, each
//! paired with its answer, and (b') one of questionnaire calls nobody answered, among results of
//! other calls; (c) a 2 MiB Claude Code session file read and cut at a pending call
//! that has no `tool_use_id` (`PermissionRequest`), which searches the calls without a result.
//! Target: each ≤ 50 ms on one core (issue 14: the trimming was quadratic, about 10 s for
//! 20,000 calls). Run with `cargo bench --bench transcript`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use permit::classifier::transcript::render;
use permit::config::TranscriptConfig;
use permit::hook::transcript::{PendingCallRef, parse, up_to_pending};
use permit::request::DecideRequest;
use serde_json::json;

/// The service's default `server.body_limit_bytes`.
const TWO_MIB: usize = 2 * 1024 * 1024;

/// A decide request of at most 2 MiB, filled with events from `event` up to the limit.
fn request_of(event: impl Fn(usize) -> Vec<serde_json::Value>) -> (String, usize) {
    let pending = json!([{"id": "p", "name": "Bash", "input": {"command": "rm -rf build"}}]);
    let head = json!({"type": "user", "text": "clean up the build and run the tests"});
    let mut events = vec![head.to_string()];
    let mut size = 200;
    let mut index = 0;
    loop {
        let next: Vec<String> = event(index).iter().map(|value| value.to_string()).collect();
        let added: usize = next.iter().map(|text| text.len() + 1).sum();
        if size + added > TWO_MIB {
            break;
        }
        size += added;
        events.extend(next);
        index += 1;
    }
    let json = format!(r#"{{"cwd": "/workspace", "transcript": [{}], "pending": {pending}}}"#, events.join(","));
    assert!(json.len() <= TWO_MIB, "{}", json.len());
    (json, index)
}

fn bench_render(c: &mut Criterion) {
    let mut group = c.benchmark_group("transcript");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));

    let (json, calls) = request_of(|index| {
        vec![json!({"type": "tool_call", "id": format!("c{index}"), "name": "Bash",
                    "input": {"command": format!("ls -la src/module_{index}/")}})]
    });
    assert!(calls >= 20_000, "{calls} calls");
    let request = DecideRequest::from_json(&json).unwrap();
    let budget = TranscriptConfig::default();
    let rendered = render(&request, &[], budget).unwrap();
    assert!(rendered.omitted_tool_calls > 19_000);
    eprintln!("(a) {calls} tool calls, {} bytes of request JSON", json.len());
    group.throughput(Throughput::Bytes(json.len() as u64));
    group.bench_function("render_2mib_tool_calls", |b| b.iter(|| render(black_box(&request), &[], budget)));

    let questionnaire = vec!["AskUserQuestion".to_owned()];
    let (json, calls) = request_of(|index| {
        vec![
            json!({"type": "tool_call", "id": format!("q{index}"), "name": "AskUserQuestion",
                   "input": {"questions": [{"question": format!("Delete build-{index}/?"), "options": [{"label": "Yes"}, {"label": "No"}]}]}}),
            json!({"type": "tool_result", "id": format!("q{index}"), "content": "User answered: Yes"}),
        ]
    });
    let request = DecideRequest::from_json(&json).unwrap();
    // Questionnaire answers are never dropped: a big budget, so rendering succeeds.
    let large = TranscriptConfig { max_tokens: TWO_MIB, argument_chars: 500 };
    render(&request, &questionnaire, large).unwrap();
    eprintln!("(b) {calls} questionnaire calls with answers, {} bytes of request JSON", json.len());
    group.throughput(Throughput::Bytes(json.len() as u64));
    group.bench_function("render_2mib_questionnaires", |b| {
        b.iter(|| render(black_box(&request), &questionnaire, large))
    });

    // Questionnaire calls nobody answered, between results of other calls: each call's answer
    // is searched for among all the results after it.
    let (json, calls) = request_of(|index| {
        vec![
            json!({"type": "tool_call", "id": format!("q{index}"), "name": "AskUserQuestion",
                   "input": {"questions": [{"question": format!("Delete build-{index}/?")}]}}),
            json!({"type": "tool_result", "id": format!("r{index}"), "content": "done"}),
        ]
    });
    let request = DecideRequest::from_json(&json).unwrap();
    render(&request, &questionnaire, large).unwrap();
    eprintln!("(b') {calls} unanswered questionnaire calls, {} bytes of request JSON", json.len());
    group.throughput(Throughput::Bytes(json.len() as u64));
    group.bench_function("render_2mib_unanswered_questionnaires", |b| {
        b.iter(|| render(black_box(&request), &questionnaire, large))
    });

    let mut session = String::new();
    let mut calls = 0;
    while session.len() < TWO_MIB {
        let id = format!("toolu_{calls:08}");
        let line = json!({"type": "assistant", "sessionId": "s", "cwd": "/workspace", "isSidechain": false,
            "message": {"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash",
                "input": {"command": format!("ls src/module_{calls}")}}]}});
        session.push_str(&line.to_string());
        session.push('\n');
        calls += 1;
    }
    let wanted = json!({"command": "rm -rf build"});
    let wanted = wanted.as_object().unwrap();
    let transcript = parse(&session);
    assert_eq!(transcript.events.len(), calls);
    eprintln!("(c) a Claude Code session of {calls} tool calls, {} bytes", session.len());
    group.throughput(Throughput::Bytes(session.len() as u64));
    group.bench_function("claude_code_read_and_cut_2mib", |b| {
        b.iter(|| {
            let transcript = parse(black_box(&session));
            up_to_pending(&transcript.events, PendingCallRef { id: None, name: "Bash", input: wanted }).len()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_render);
criterion_main!(benches);
