//! Bounds on model work (issue 14, items 3, 5 and 11), against real HTTP servers on loopback
//! that answer in OpenAI's chat-completions wire format but misbehave: a body over the cap sent
//! quickly (declared or chunked), an endless body trickled slowly, a server that never answers,
//! and a request with 250 classified calls. Every case must end closed (`ask`) with a reason
//! code that says what happened, and never in `allow`.
//!
//! Timeouts run on a paused clock (`start_paused`): the clock moves only when every task waits,
//! straight to the next timer, so the outcome is the same however fast or busy the machine is.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use permit::classifier::questions::screen_question;
use permit::config::{Config, HttpSettings, ModelConfig, ModelStyle, TokenLimitField};
use permit::engine::DecisionRecord;
use permit::engine::Engine;
use permit::model::{self, DecisionModel, ModelRequest};
use permit::request::DecideRequest;
use serde_json::json;

/// How the fake server answers every request.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// A valid decision-style answer (`escalate`) after this delay.
    Answer(Duration),
    /// A 200 declaring (`Content-Length`) and sending a body of this many bytes at once.
    Declared(usize),
    /// A 200 whose chunked body never ends, sent as fast as the client reads.
    EndlessFast,
    /// A 200 whose chunked body never ends, 16 bytes every 100 ms.
    EndlessSlow,
    /// Never answers.
    Hang,
}

#[derive(Default)]
struct Counters {
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    body_bytes_sent: AtomicUsize,
}

struct Fake {
    behaviour: Misbehaviour,
    counters: Counters,
}

/// Counts a request in flight until dropped (when the response is sent or the client leaves).
struct InFlight(Arc<Fake>);

impl InFlight {
    fn new(fake: &Arc<Fake>) -> Self {
        let counters = &fake.counters;
        counters.requests.fetch_add(1, Ordering::SeqCst);
        let now = counters.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        counters.most_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(fake.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.counters.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// OpenAI's chat completion with logprobs, choosing `B` (`escalate`).
fn escalate_answer() -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "judge",
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": "B" },
            "logprobs": { "content": [{ "token": "B", "logprob": -0.1, "bytes": [66],
                                        "top_logprobs": [{ "token": "B", "logprob": -0.1 }, { "token": "A", "logprob": -2.4 }] }] },
            "finish_reason": "length"
        }],
        "usage": { "prompt_tokens": 1200, "completion_tokens": 1, "total_tokens": 1201 }
    })
    .to_string()
}

/// The start of a chat completion whose content goes on and on: what a runaway or hostile server
/// sends.
const ENDLESS_PREFIX: &str =
    r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":""#;

async fn handle(State(fake): State<Arc<Fake>>, _body: Bytes) -> Response {
    let in_flight = InFlight::new(&fake);
    match fake.behaviour {
        Misbehaviour::Answer(delay) => {
            tokio::time::sleep(delay).await;
            drop(in_flight);
            ([(header::CONTENT_TYPE, "application/json")], escalate_answer()).into_response()
        }
        Misbehaviour::Declared(size) => {
            let mut body = ENDLESS_PREFIX.as_bytes().to_vec();
            body.resize(size, b'x');
            fake.counters.body_bytes_sent.fetch_add(size, Ordering::SeqCst);
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Misbehaviour::EndlessFast | Misbehaviour::EndlessSlow => {
            let slow = matches!(fake.behaviour, Misbehaviour::EndlessSlow);
            let chunk: Bytes =
                if slow { Bytes::from_static(b"xxxxxxxxxxxxxxxx") } else { Bytes::from(vec![b'x'; 64 * 1024]) };
            let chunks = futures_util::stream::unfold((true, in_flight), move |(first, in_flight)| {
                let chunk = chunk.clone();
                async move {
                    if slow {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    let next = if first { Bytes::from_static(ENDLESS_PREFIX.as_bytes()) } else { chunk };
                    in_flight.0.counters.body_bytes_sent.fetch_add(next.len(), Ordering::SeqCst);
                    Some((Ok::<_, Infallible>(next), (false, in_flight)))
                }
            });
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::from_stream(chunks)).into_response()
        }
        Misbehaviour::Hang => {
            std::future::pending::<()>().await;
            unreachable!()
        }
    }
}

/// Starts a fake OpenAI-compatible server; returns its base URL (with `/v1`).
async fn serve(behaviour: Misbehaviour) -> (String, Arc<Fake>) {
    let fake = Arc::new(Fake { behaviour, counters: Counters::default() });
    let app = Router::new().route("/v1/chat/completions", post(handle)).with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/v1"), fake)
}

fn backend(base_url: &str) -> Arc<dyn DecisionModel> {
    model::build(&ModelConfig::Openai {
        base_url: base_url.to_owned(),
        model: "judge".into(),
        api_key_env: None,
        api_key_header: "authorization".into(),
        headers: Default::default(),
        query: Default::default(),
        style: ModelStyle::Decision,
        min_label_mass: 0.5,
        top_logprobs: 20,
        reasoning_model: false,
        reasoning_effort: None,
        token_limit_field: TokenLimitField::MaxTokens,
        max_tokens: Some(512),
        response_format: false,
        http: HttpSettings { initial_backoff_ms: 10, max_backoff_ms: 50, ..HttpSettings::default() },
    })
    .unwrap()
}

fn screen_request(deadline: Duration) -> ModelRequest {
    ModelRequest {
        system: "POLICY".into(),
        transcript: "<transcript>…</transcript>".into(),
        question_block: "Question `screen` …".into(),
        questions: vec![screen_question("c1")],
        reasoned: false,
        deadline: Some((tokio::time::Instant::now() + deadline).into_std()),
        screen_input: None,
    }
}

/// An engine whose screen (and, with `review`, review) is the fake server, with no other model.
fn engine(base_url: &str, review: bool, extra: &str) -> Engine {
    let review = if review {
        format!(
            "[review]\ntimeout_ms = 30000\n[review.model]\nbackend = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"judge\"\nstyle = \"text\"\n"
        )
    } else {
        String::new()
    };
    let config = Config::from_toml_str(
        "limits.toml",
        &format!(
            "{extra}\n[screen]\ntimeout_ms = 5000\n[screen.model]\nbackend = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"judge\"\n{review}\n\
             [[tools.define]]\nname = \"send_email\"\nread_only = false\ndestructive = false\nopen_world = true\nreversibility = \"irreversible\"\n"
        ),
    )
    .unwrap();
    Engine::new(config).unwrap()
}

/// A request whose calls are `(id, tool, command)`; `send_email` takes no command.
fn request(calls: &[(String, &str, &str)]) -> DecideRequest {
    let pending: Vec<_> = calls
        .iter()
        .map(|(id, tool, command)| json!({ "id": id, "name": tool, "input": { "command": command } }))
        .collect();
    DecideRequest::from_json(
        &json!({
            "session_id": "limits",
            "cwd": "/workspace",
            "transcript": [{ "type": "user", "text": "clean the build outputs" }],
            "pending": pending,
        })
        .to_string(),
    )
    .unwrap()
}

fn one(tool: &str, command: &str) -> DecideRequest {
    request(&[("c1".to_owned(), tool, command)])
}

fn code(record: &DecisionRecord) -> &str {
    record.decision.reason_code.map(permit::decision::ReasonCode::as_str).unwrap()
}

#[tokio::test]
async fn a_body_declared_over_the_cap_is_refused_unread_and_not_retried() {
    let (base, fake) = serve(Misbehaviour::Declared(2 * 1024 * 1024)).await;
    let error = backend(&base).answer(&screen_request(Duration::from_secs(60))).await.unwrap_err();
    assert_eq!(error.kind(), "response_too_large", "{error}");
    assert_eq!(error.to_string(), "the model's response is larger than the limit of 1048576 bytes");
    assert_eq!(fake.counters.requests.load(Ordering::SeqCst), 1, "the same server would answer the same again");
}

#[tokio::test]
async fn an_endless_body_is_cut_at_the_cap() {
    let (base, fake) = serve(Misbehaviour::EndlessFast).await;
    let error = backend(&base).answer(&screen_request(Duration::from_secs(60))).await.unwrap_err();
    assert_eq!(error.kind(), "response_too_large", "{error}");
    assert_eq!(fake.counters.requests.load(Ordering::SeqCst), 1);
    // Reading stopped near the cap: the server got no further than the cap plus what the
    // socket buffers hold (a few MiB on loopback), never the unbounded stream.
    let sent = fake.counters.body_bytes_sent.load(Ordering::SeqCst);
    assert!(sent < 64 * 1024 * 1024, "{sent} bytes were pulled from the server");
}

#[tokio::test]
async fn a_cap_can_be_set_per_model() {
    let (base, _) = serve(Misbehaviour::Declared(8 * 1024)).await;
    let small = model::build(&ModelConfig::Openai {
        base_url: base.clone(),
        model: "judge".into(),
        api_key_env: None,
        api_key_header: "authorization".into(),
        headers: Default::default(),
        query: Default::default(),
        style: ModelStyle::Decision,
        min_label_mass: 0.5,
        top_logprobs: 20,
        reasoning_model: false,
        reasoning_effort: None,
        token_limit_field: TokenLimitField::MaxTokens,
        max_tokens: Some(512),
        response_format: false,
        http: HttpSettings { max_response_bytes: 4 * 1024, ..HttpSettings::default() },
    })
    .unwrap();
    let error = small.answer(&screen_request(Duration::from_secs(60))).await.unwrap_err();
    assert_eq!(error.to_string(), "the model's response is larger than the limit of 4096 bytes");
    // The default cap (1 MiB) takes the same body and finds it malformed JSON instead.
    let error = backend(&base).answer(&screen_request(Duration::from_secs(60))).await.unwrap_err();
    assert_eq!(error.kind(), "malformed", "{error}");
    let config = "[screen.model]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n";
    for (value, accepted) in [("1023", false), ("1024", true), ("67108864", true), ("67108865", false)] {
        let text = format!("{config}[screen.model.http]\nmax_response_bytes = {value}\n");
        assert_eq!(Config::from_toml_str("t", &text).is_ok(), accepted, "{value}");
    }
}

/// Before the fix, a body trickled after the headers was read whole: the stage ran past its
/// timeout. Now the timeout covers the body.
#[tokio::test(start_paused = true)]
async fn a_trickled_endless_body_ends_at_the_deadline() {
    let (base, fake) = serve(Misbehaviour::EndlessSlow).await;
    let started = tokio::time::Instant::now();
    let error = backend(&base).answer(&screen_request(Duration::from_secs(5))).await.unwrap_err();
    assert_eq!(error.kind(), "timeout", "{error}");
    // The clock jumps straight to each timer, so the call ended at its deadline (give or take
    // the timer wheel's millisecond).
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_secs(5) && elapsed < Duration::from_millis(5_100), "{elapsed:?}");
    assert!(
        fake.counters.body_bytes_sent.load(Ordering::SeqCst) > 0,
        "the client was reading the body when time ran out"
    );
}

/// Through the engine: the stage's `timeout_ms` ends a trickled body, and the call is `ask`
/// with the code that says the screen timed out (it used to read `no_review_model`).
#[tokio::test(start_paused = true)]
async fn a_trickled_body_makes_the_screen_time_out_and_the_call_ask() {
    let (base, fake) = serve(Misbehaviour::EndlessSlow).await;
    let engine = engine(&base, false, "");
    let record = engine.records(&one("Bash", "rm -rf build")).await.remove(0);
    assert_eq!(record.decision.decision.as_str(), "ask");
    assert_eq!(code(&record), "screen_timeout");
    let screen = record.screen.as_ref().unwrap();
    assert_eq!(screen.error_kind.as_deref(), Some("timeout"));
    assert!((5_000.0..5_100.0).contains(&screen.latency_ms), "the stage ended at its timeout: {}", screen.latency_ms);
    assert!(fake.counters.body_bytes_sent.load(Ordering::SeqCst) > 0);
}

#[tokio::test]
async fn an_oversized_answer_fails_the_call_closed_at_either_stage() {
    let (base, _) = serve(Misbehaviour::EndlessFast).await;
    let record = engine(&base, false, "").records(&one("Bash", "rm -rf build")).await.remove(0);
    assert_eq!((record.decision.decision.as_str(), code(&record)), ("ask", "screen_error"));
    assert_eq!(record.screen.as_ref().unwrap().error_kind.as_deref(), Some("response_too_large"));
    assert!(record.decision.reason.as_deref().unwrap().contains("(response_too_large)"));

    let record = engine(&base, true, "").records(&one("Bash", "rm -rf build")).await.remove(0);
    assert_eq!((record.decision.decision.as_str(), code(&record)), ("ask", "review_error"));
    assert_eq!(record.review.as_ref().unwrap().error_kind.as_deref(), Some("response_too_large"));
}

/// Issue 14 saw one request with 250 classified calls open 250 concurrent model requests. Now a
/// request has the models judge at most `max_calls_per_request` of them (the rest are `ask`
/// without a model call), and the process never has more than `max_concurrent_model_calls` in
/// flight.
#[tokio::test]
async fn a_request_with_250_classified_calls_makes_a_bounded_number_of_model_calls() {
    let (base, fake) = serve(Misbehaviour::Answer(Duration::from_millis(20))).await;
    let engine = engine(&base, false, "[classifier]\nmax_concurrent_model_calls = 4\n");
    let mut calls: Vec<(String, &str, &str)> =
        (0..250).map(|index| (format!("c{index}"), "Bash", "rm -rf build")).collect();
    calls.push(("read".to_owned(), "Bash", "ls"));
    let records = engine.records(&request(&calls)).await;

    assert_eq!(fake.counters.requests.load(Ordering::SeqCst), 16, "the default max_calls_per_request");
    let most = fake.counters.most_in_flight.load(Ordering::SeqCst);
    assert!((1..=4).contains(&most), "{most} model requests were in flight at once");
    let codes: Vec<&str> = records.iter().map(code).collect();
    assert_eq!(codes[..16], ["no_review_model"; 16]);
    assert_eq!(codes[16..250], ["model_call_limit"; 234]);
    assert!(records[..250].iter().all(|record| record.decision.decision.as_str() == "ask"));
    assert_eq!(records[250].decision.decision.as_str(), "allow", "the gate-only call is unaffected");
}

/// Every model slot held by a call to a server that never answers: a call waiting for a slot
/// fails closed with `model_busy` at its stage's timeout, and a gate-only request is answered at
/// once, without waiting on anything.
#[tokio::test(start_paused = true)]
async fn exhausted_model_slots_fail_closed_and_gate_only_calls_do_not_wait() {
    let (base, fake) = serve(Misbehaviour::Hang).await;
    let engine = Arc::new(engine(&base, true, "[classifier]\nmax_concurrent_model_calls = 2\n"));
    // Irreversible calls skip the screen: their reviews hold both slots for up to 30 s.
    let holders: Vec<_> = (0..2)
        .map(|index| {
            let engine = engine.clone();
            tokio::spawn(async move {
                let mut held = one("send_email", "");
                held.session_id = Some(format!("holder-{index}"));
                engine.records(&held).await
            })
        })
        .collect();
    // Spin rather than sleep, so the paused clock stays where it is while the holders connect.
    while fake.counters.in_flight.load(Ordering::SeqCst) < 2 {
        tokio::task::yield_now().await;
    }
    assert_eq!(engine.model_slots_available(), 0);

    let before = tokio::time::Instant::now();
    let gate_only = engine.records(&one("Bash", "git status && ls")).await.remove(0);
    assert_eq!(gate_only.decision.decision.as_str(), "allow");
    assert_eq!(tokio::time::Instant::now(), before, "the gate-only request waited on no timer");

    let record = engine.records(&one("Bash", "rm -rf build")).await.remove(0);
    assert_eq!((record.decision.decision.as_str(), code(&record)), ("ask", "model_busy"));
    assert_eq!(record.screen.as_ref().unwrap().error_kind.as_deref(), Some("busy"));
    assert!(record.review.is_none(), "a busy screen does not queue again for the review");
    let waited = tokio::time::Instant::now() - before;
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_millis(5_100),
        "it waited its screen's timeout_ms: {waited:?}"
    );
    assert_eq!(fake.counters.requests.load(Ordering::SeqCst), 2, "the waiting call never reached the server");

    for holder in holders {
        let record = holder.await.unwrap().remove(0);
        assert_eq!((record.decision.decision.as_str(), code(&record)), ("ask", "review_error"));
        assert_eq!(record.review.as_ref().unwrap().error_kind.as_deref(), Some("timeout"));
    }
    assert_eq!(engine.model_slots_available(), 2, "every slot came back");
}
