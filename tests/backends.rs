//! The `openai` and `anthropic` backends against real HTTP servers on loopback that answer in
//! each provider's wire format, quirks included (response shapes from the providers' docs and
//! issue threads). Every fault ends in its documented behaviour, and never in an allow.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use permit::classifier::questions::{batch_questions, screen_question, verdict_question};
use permit::config::{HttpSettings, ModelConfig, ModelStyle, TokenLimitField};
use permit::model::{self, DecisionModel, ModelError, ModelRequest};
use serde_json::{Value, json};

/// One scripted answer of the fake server.
#[derive(Clone)]
struct Canned {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn ok(body: Value) -> Canned {
    Canned {
        status: 200,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

fn raw(status: u16, body: &str) -> Canned {
    Canned { status, headers: vec![], body: body.to_owned(), delay: Duration::ZERO }
}

#[derive(Default)]
struct Fake {
    queue: Mutex<VecDeque<Canned>>,
    /// Answers chosen by request content, checked before the queue (for concurrent callers).
    by_content: Mutex<Vec<(String, Canned)>>,
    seen: Mutex<Vec<(HeaderMap, Value, Instant)>>,
}

async fn handle(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let parsed = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.seen.lock().unwrap().push((headers, parsed, Instant::now()));
    let text = String::from_utf8_lossy(&body).into_owned();
    let chosen = fake
        .by_content
        .lock()
        .unwrap()
        .iter()
        .find(|(needle, _)| text.contains(needle.as_str()))
        .map(|(_, canned)| canned.clone());
    let canned = chosen
        .unwrap_or_else(|| fake.queue.lock().unwrap().pop_front().unwrap_or_else(|| raw(500, "script exhausted")));
    tokio::time::sleep(canned.delay).await;
    let mut response = (StatusCode::from_u16(canned.status).unwrap(), canned.body).into_response();
    for (name, value) in canned.headers {
        response.headers_mut().insert(name, value.parse().unwrap());
    }
    response
}

/// Starts a fake server answering `script` in order; returns its base URL.
async fn serve(script: Vec<Canned>) -> (String, Arc<Fake>) {
    let fake = Arc::new(Fake { queue: Mutex::new(script.into()), ..Fake::default() });
    let app = Router::new()
        .route("/v1/chat/completions", post(handle))
        .route("/v1/messages", post(handle))
        .route("/openai/deployments/judge/chat/completions", post(handle))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), fake)
}

fn fast_http() -> HttpSettings {
    HttpSettings {
        request_timeout_ms: 2_000,
        max_attempts: 3,
        initial_backoff_ms: 10,
        max_backoff_ms: 50,
        breaker_failures: 5,
        breaker_cooldown_ms: 60_000,
        max_response_bytes: 1024 * 1024,
    }
}

fn openai(base: &str, style: ModelStyle) -> Arc<dyn DecisionModel> {
    openai_with(base, style, |_| {})
}

fn openai_with(base: &str, style: ModelStyle, tweak: impl FnOnce(&mut ModelConfig)) -> Arc<dyn DecisionModel> {
    let mut config = ModelConfig::Openai {
        base_url: format!("{base}/v1"),
        model: "judge".into(),
        api_key_env: Some("PERMIT_TEST_OPENAI_KEY".into()),
        api_key_header: "authorization".into(),
        headers: BTreeMap::from([("x-team".to_owned(), "agents".to_owned())]),
        query: BTreeMap::new(),
        style,
        min_label_mass: 0.5,
        top_logprobs: 20,
        reasoning_model: false,
        token_limit_field: TokenLimitField::MaxTokens,
        max_tokens: 512,
        response_format: false,
        http: fast_http(),
    };
    tweak(&mut config);
    // SAFETY of the test: every test sets the same value, so concurrent tests agree.
    unsafe { std::env::set_var("PERMIT_TEST_OPENAI_KEY", "sk-test-secret-key") };
    model::build(&config).unwrap()
}

fn anthropic(base: &str) -> Arc<dyn DecisionModel> {
    unsafe { std::env::set_var("PERMIT_TEST_ANTHROPIC_KEY", "sk-ant-test-secret") };
    model::build(&ModelConfig::Anthropic {
        base_url: base.to_owned(),
        model: "claude-test".into(),
        api_key_env: "PERMIT_TEST_ANTHROPIC_KEY".into(),
        max_tokens: 1024,
        headers: BTreeMap::new(),
        http: fast_http(),
    })
    .unwrap()
}

fn screen_request() -> ModelRequest {
    ModelRequest {
        system: "POLICY".into(),
        transcript: "<transcript>…</transcript>".into(),
        question_block: "Question `screen` …".into(),
        questions: vec![screen_question("c1")],
        reasoned: false,
        deadline: Some(Instant::now() + Duration::from_secs(5)),
    }
}

fn review_request() -> ModelRequest {
    ModelRequest {
        questions: vec![verdict_question("c1")],
        reasoned: true,
        question_block: "Question `verdict` …".into(),
        ..screen_request()
    }
}

/// OpenAI's chat completion with logprobs, as documented.
fn openai_logprobs(first: &str, top: &[(&str, f64)]) -> Value {
    let top: Vec<Value> =
        top.iter().map(|(token, p)| json!({ "token": token, "logprob": p.ln(), "bytes": token.as_bytes() })).collect();
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "judge",
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": first, "refusal": null },
            "logprobs": { "content": [{ "token": first, "logprob": -0.01, "bytes": first.as_bytes(), "top_logprobs": top }], "refusal": null },
            "finish_reason": "length"
        }],
        "usage": { "prompt_tokens": 1200, "completion_tokens": 1, "total_tokens": 1201,
                   "prompt_tokens_details": { "cached_tokens": 1024 } }
    })
}

fn openai_text(content: &str) -> Value {
    json!({
        "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "judge",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "logprobs": null, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940 }
    })
}

#[tokio::test]
async fn openai_decision_style_reads_probabilities_and_sends_the_right_request() {
    let (base, fake) =
        serve(vec![ok(openai_logprobs("A", &[("A", 0.90), (" A", 0.04), ("B", 0.05), ("\n", 0.01)]))]).await;
    let answer = openai(&base, ModelStyle::Decision).answer(&screen_request()).await.unwrap();
    let choice = &answer.choices[0];
    assert_eq!(choice.option, "allow");
    let probabilities = choice.probabilities.as_ref().unwrap();
    assert!((probabilities["allow"] - 0.94 / 0.99).abs() < 1e-6);
    assert_eq!(answer.usage.prompt_tokens, Some(1200));
    assert_eq!(answer.usage.cached_tokens, Some(1024));

    let (headers, body, _) = fake.seen.lock().unwrap()[0].clone();
    assert_eq!(headers["authorization"], "Bearer sk-test-secret-key");
    assert_eq!(headers["x-team"], "agents");
    assert_eq!(body["max_tokens"], 1);
    assert_eq!(body["logprobs"], true);
    assert_eq!(body["top_logprobs"], 20);
    assert_eq!(body["temperature"], 0);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!((messages[0]["role"].as_str(), messages[0]["content"].as_str()), (Some("system"), Some("POLICY")));
    assert_eq!(messages[1]["content"], "<transcript>…</transcript>");
    assert!(messages[2]["content"].as_str().unwrap().ends_with("A = `allow`\nB = `escalate`\n"));
}

#[tokio::test]
async fn server_quirks_are_read() {
    // vLLM: extra fields, `finish_reason` "length", prompt_logprobs null.
    let mut vllm = openai_logprobs("B", &[("B", 0.7), ("A", 0.3)]);
    vllm["prompt_logprobs"] = Value::Null;
    vllm["choices"][0]["stop_reason"] = Value::Null;
    // llama.cpp: `id` on every token entry and `finish_reason` "eos" style values, no `object`.
    let mut llama = openai_logprobs("A", &[("A", 0.8), ("B", 0.2)]);
    llama.as_object_mut().unwrap().remove("object");
    llama["choices"][0]["finish_reason"] = json!("eos");
    llama["choices"][0]["logprobs"]["content"][0]["id"] = json!(32);
    // Ollama ≥ 0.12.11: a logprob entry without the `top_logprobs` key.
    let ollama = json!({
        "id": "chatcmpl-3", "object": "chat.completion", "created": 1, "model": "judge", "system_fingerprint": "fp_ollama",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "A" },
                      "logprobs": { "content": [{ "token": "A", "logprob": (0.92f64).ln(), "bytes": [65] }] },
                      "finish_reason": "length" }],
        "usage": { "prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11 }
    });
    // LiteLLM: `top_logprobs: null`.
    let litellm = json!({
        "id": "chatcmpl-4", "created": 1, "model": "judge", "object": "chat.completion",
        "choices": [{ "finish_reason": "length", "index": 0, "message": { "content": "B", "role": "assistant", "tool_calls": null, "function_call": null },
                      "logprobs": { "content": [{ "token": "B", "bytes": [66], "logprob": (0.8f64).ln(), "top_logprobs": null }] } }],
        "usage": { "completion_tokens": 1, "prompt_tokens": 10, "total_tokens": 11, "completion_tokens_details": null, "prompt_tokens_details": null }
    });
    let expected = ["escalate", "allow", "allow", "escalate"];
    for (response, expected) in [vllm, llama, ollama, litellm].into_iter().zip(expected) {
        let (base, _) = serve(vec![ok(response.clone())]).await;
        let answer = openai(&base, ModelStyle::Decision).answer(&screen_request()).await;
        assert_eq!(answer.unwrap().choices[0].option, expected, "{response}");
    }
}

#[tokio::test]
async fn openai_text_style_reads_the_closing_json_line_and_reasoning() {
    let (base, fake) = serve(vec![
        ok(openai_text("The user asked to clean build/, not src/.\n{\"verdict\": \"deny_destructive\"}")),
        ok(openai_text("Looks fine.\n```json\n{\"verdict\": \"allow\"}\n```")),
    ])
    .await;
    let backend = openai_with(&base, ModelStyle::Text, |config| {
        if let ModelConfig::Openai { response_format, reasoning_model, .. } = config {
            *response_format = true;
            *reasoning_model = true;
        }
    });
    let answer = backend.answer(&review_request()).await.unwrap();
    assert_eq!(answer.choices[0].option, "deny_destructive");
    assert_eq!(answer.reasoning.as_deref(), Some("The user asked to clean build/, not src/."));
    assert_eq!(backend.answer(&review_request()).await.unwrap().choices[0].option, "allow");
    let (_, body, _) = fake.seen.lock().unwrap()[0].clone();
    assert_eq!(body["max_completion_tokens"], 512, "reasoning models get max_completion_tokens");
    assert!(body.get("temperature").is_none() && body.get("logprobs").is_none(), "{body}");
    assert_eq!(body["response_format"]["json_schema"]["schema"]["required"], json!(["verdict"]));
}

#[tokio::test]
async fn azure_style_deployment_urls_and_api_key_headers() {
    let (base, fake) = serve(vec![ok(openai_text("{\"verdict\": \"allow\"}"))]).await;
    let backend = openai_with(&base, ModelStyle::Text, |config| {
        if let ModelConfig::Openai { base_url, api_key_header, query, .. } = config {
            *base_url = format!("{base}/openai/deployments/judge");
            *api_key_header = "api-key".into();
            query.insert("api-version".into(), "2024-10-21".into());
        }
    });
    assert_eq!(backend.answer(&review_request()).await.unwrap().choices[0].option, "allow");
    let (headers, _, _) = fake.seen.lock().unwrap()[0].clone();
    assert_eq!(headers["api-key"], "sk-test-secret-key");
    assert!(headers.get("authorization").is_none());
}

#[tokio::test]
async fn anthropic_messages_with_prompt_caching() {
    let response = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{ "type": "text", "text": "Nothing the user said asks for a push.\n{\"verdict\": \"deny_not_requested\"}" }],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": { "input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1800, "output_tokens": 30 }
    });
    let (base, fake) = serve(vec![ok(response)]).await;
    let answer = anthropic(&base).answer(&review_request()).await.unwrap();
    assert_eq!(answer.choices[0].option, "deny_not_requested");
    assert_eq!(
        (answer.usage.prompt_tokens, answer.usage.cached_tokens, answer.usage.completion_tokens),
        (Some(1820), Some(1800), Some(30))
    );
    let (headers, body, _) = fake.seen.lock().unwrap()[0].clone();
    assert_eq!(headers["x-api-key"], "sk-ant-test-secret");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(body["messages"][0]["content"][0]["cache_control"]["type"], "ephemeral");
    assert!(body["messages"][0]["content"][1].get("cache_control").is_none());
    assert!(answer.choices[0].probabilities.is_none());
}

#[tokio::test]
async fn retries_honour_retry_after_in_both_forms_and_non_json_bodies() {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(1));
    let mut seconds = raw(429, "{\"error\": {\"message\": \"Rate limit reached\", \"type\": \"requests\"}}");
    seconds.headers.push(("retry-after", "1".into()));
    let mut dated = raw(429, "<html>Too Many Requests</html>");
    dated.headers.push(("retry-after", date));
    let (base, fake) = serve(vec![seconds, dated, ok(openai_logprobs("A", &[("A", 0.99), ("B", 0.01)]))]).await;
    let mut request = screen_request();
    request.deadline = Some(Instant::now() + Duration::from_secs(10));
    let started = Instant::now();
    let answer = openai(&base, ModelStyle::Decision).answer(&request).await.unwrap();
    assert_eq!(answer.choices[0].option, "allow");
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen[1].2.duration_since(seen[0].2) >= Duration::from_millis(950), "Retry-After: 1 was honoured");
    assert!(started.elapsed() >= Duration::from_millis(1_000));
}

#[tokio::test]
async fn server_errors_are_retried_and_client_errors_are_not() {
    let (base, fake) =
        serve(vec![raw(500, "oops"), raw(503, "overloaded"), ok(openai_logprobs("B", &[("B", 0.9), ("A", 0.1)]))])
            .await;
    assert_eq!(
        openai(&base, ModelStyle::Decision).answer(&screen_request()).await.unwrap().choices[0].option,
        "escalate"
    );
    assert_eq!(fake.seen.lock().unwrap().len(), 3);

    let (base, fake) =
        serve(vec![raw(400, "{\"error\": {\"message\": \"logprobs is not supported\"}}"), ok(openai_text("x"))]).await;
    let error = openai(&base, ModelStyle::Decision).answer(&screen_request()).await.unwrap_err();
    assert_eq!(error.kind(), "transport");
    assert!(error.to_string().contains("HTTP 400"));
    assert_eq!(fake.seen.lock().unwrap().len(), 1, "a 400 is never retried");

    let (base, fake) = serve(vec![raw(500, "a"), raw(502, "b"), raw(500, "c"), raw(500, "d")]).await;
    assert!(openai(&base, ModelStyle::Decision).answer(&screen_request()).await.is_err());
    assert_eq!(fake.seen.lock().unwrap().len(), 3, "max_attempts bounds the retries");
}

#[tokio::test]
async fn retries_never_overrun_the_deadline() {
    let mut slow_limit = raw(429, "slow down");
    slow_limit.headers.push(("retry-after", "30".into()));
    let (base, fake) = serve(vec![slow_limit, ok(openai_text("{}"))]).await;
    let mut request = screen_request();
    request.deadline = Some(Instant::now() + Duration::from_millis(500));
    let started = Instant::now();
    let error = openai(&base, ModelStyle::Decision).answer(&request).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "did not wait out a 30 s Retry-After");
    assert_eq!(error.kind(), "transport");
    assert_eq!(fake.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let mut slow = ok(openai_logprobs("A", &[("A", 0.99)]));
    slow.delay = Duration::from_secs(5);
    let (base, _) = serve(vec![slow.clone(), slow.clone(), slow]).await;
    let mut request = screen_request();
    request.deadline = Some(Instant::now() + Duration::from_millis(600));
    let error = openai(&base, ModelStyle::Decision).answer(&request).await.unwrap_err();
    assert_eq!(error.kind(), "timeout");
}

#[tokio::test]
async fn malformed_responses_are_errors() {
    let cases: Vec<(Canned, ModelStyle, &str)> = vec![
        (
            raw(200, "{\"id\": \"chatcmpl-1\", \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assis"),
            ModelStyle::Decision,
            "truncated JSON",
        ),
        (ok(json!({ "id": "x", "object": "chat.completion", "choices": [] })), ModelStyle::Decision, "empty choices"),
        (
            ok(openai_logprobs("A", &[("A", 0.3), ("I", 0.6), ("B", 0.1)])),
            ModelStyle::Decision,
            "label mass below the floor",
        ),
        (ok(openai_logprobs("Sure", &[("Sure", 0.9), ("A", 0.1)])), ModelStyle::Decision, "first token not a label"),
        (ok(openai_text("A")), ModelStyle::Decision, "no logprobs at all"),
        (ok(openai_text("I reasoned a lot but forgot the answer.")), ModelStyle::Text, "reasoning with no JSON line"),
        (ok(openai_text("{\"verdict\": \"allow\", \"verdict\": \"deny_unclear\"}")), ModelStyle::Text, "duplicate key"),
        (ok(openai_text("{\"verdict\": \"ok\"}")), ModelStyle::Text, "unknown option"),
        (
            ok(
                json!({ "choices": [{ "message": { "role": "assistant", "content": null }, "finish_reason": "content_filter" }] }),
            ),
            ModelStyle::Text,
            "null content",
        ),
    ];
    for (canned, style, name) in cases {
        let (base, _) = serve(vec![canned]).await;
        let request = if style == ModelStyle::Text { review_request() } else { screen_request() };
        let result = openai(&base, style).answer(&request).await;
        assert!(result.is_err(), "{name}: {result:?}");
    }
}

#[tokio::test]
async fn the_circuit_breaker_fails_fast_then_probes() {
    let settings = HttpSettings { max_attempts: 1, breaker_failures: 2, breaker_cooldown_ms: 300, ..fast_http() };
    let (base, fake) =
        serve(vec![raw(500, "a"), raw(500, "b"), ok(openai_logprobs("A", &[("A", 0.99), ("B", 0.01)]))]).await;
    let backend = openai_with(&base, ModelStyle::Decision, |config| {
        if let ModelConfig::Openai { http, .. } = config {
            *http = settings;
        }
    });
    assert!(backend.answer(&screen_request()).await.is_err());
    assert!(backend.answer(&screen_request()).await.is_err());
    let open = backend.answer(&screen_request()).await.unwrap_err();
    assert!(matches!(open, ModelError::Unavailable(..)), "{open:?}");
    assert_eq!(fake.seen.lock().unwrap().len(), 2, "the open breaker did not call the server");
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(
        backend.answer(&screen_request()).await.unwrap().choices[0].option,
        "allow",
        "the probe succeeds and closes it"
    );
}

#[tokio::test]
async fn api_keys_never_appear_in_errors() {
    let (base, _) =
        serve(vec![raw(401, "{\"error\": {\"message\": \"Incorrect API key provided: sk-test-secret-key.\"}}")]).await;
    let error = openai(&base, ModelStyle::Decision).answer(&screen_request()).await.unwrap_err().to_string();
    assert!(!error.contains("sk-test-secret-key"), "{error}");
    assert!(error.contains("[redacted]"));
    let (base, _) = serve(vec![raw(401, "{\"type\": \"error\", \"error\": {\"type\": \"authentication_error\", \"message\": \"invalid x-api-key sk-ant-test-secret\"}}")]).await;
    let error = anthropic(&base).answer(&review_request()).await.unwrap_err().to_string();
    assert!(!error.contains("sk-ant-test-secret"), "{error}");
}

#[tokio::test]
async fn decision_style_refuses_batches_and_a_refused_connection_is_an_error() {
    let (base, _) = serve(vec![]).await;
    let mut batch = review_request();
    batch.questions = batch_questions(&["a", "b"]);
    assert_eq!(openai(&base, ModelStyle::Decision).answer(&batch).await.unwrap_err().kind(), "unavailable");
    // Nothing listens on this port.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let error = openai(&format!("http://{closed}"), ModelStyle::Decision).answer(&screen_request()).await.unwrap_err();
    assert_eq!(error.kind(), "transport", "{error}");
}

/// The whole pipeline, built from a TOML config, with a decision-style screen and an Anthropic
/// review on loopback: a routine call is allowed by the screen, a risky one denied by the review
/// with its fixed reason, and the records carry P(allow), reasoning and tokens.
#[tokio::test]
async fn the_pipeline_runs_on_configured_remote_models() {
    let (screen_base, screen_fake) = serve(vec![]).await;
    // The two screens run concurrently: answer each by the call it names.
    screen_fake.by_content.lock().unwrap().extend([
        ("pending call `a`".to_owned(), ok(openai_logprobs("A", &[("A", 0.99), ("B", 0.01)]))),
        ("pending call `b`".to_owned(), ok(openai_logprobs("B", &[("B", 0.8), ("A", 0.2)]))),
    ]);
    let review = json!({
        "id": "msg_02", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{ "type": "text", "text": "The user asked about build/ only.\n{\"verdict\": \"deny_destructive\"}" }],
        "stop_reason": "end_turn", "usage": { "input_tokens": 50, "output_tokens": 12 }
    });
    let (review_base, review_fake) = serve(vec![ok(review)]).await;
    unsafe { std::env::set_var("PERMIT_TEST_ANTHROPIC_KEY", "sk-ant-test-secret") };
    let config = permit::config::Config::from_toml_str(
        "e2e.toml",
        &format!(
            r#"
[screen]
allow_threshold_percent = 95
[screen.model]
backend = "openai"
base_url = "{screen_base}/v1"
model = "judge"

[review]
on_error = "ask"
[review.model]
backend = "anthropic"
base_url = "{review_base}"
model = "claude-test"
api_key_env = "PERMIT_TEST_ANTHROPIC_KEY"
"#
        ),
    )
    .unwrap();
    let engine = permit::engine::Engine::new(config).unwrap();
    let request = permit::request::DecideRequest::from_json(
        r#"{"session_id": "e2e", "cwd": "/workspace", "transcript": [{"type": "user", "text": "delete the build directory"}],
            "pending": [{"id": "a", "name": "Bash", "input": {"command": "rm -rf build"}},
                        {"id": "b", "name": "Bash", "input": {"command": "rm -rf src"}}]}"#,
    )
    .unwrap();
    let records = engine.records(&request).await;
    let a = &records[0];
    assert_eq!((a.decision.decision.as_str(), format!("{:?}", a.decision.stage)), ("allow", "Screen".to_owned()));
    assert!((a.decision.p_allow.unwrap() - 0.99).abs() < 1e-6);
    let b = &records[1];
    assert_eq!(b.decision.decision.as_str(), "deny");
    assert_eq!(b.decision.reason_code.as_deref(), Some("deny_destructive"));
    assert!(b.decision.reason.as_deref().unwrap().starts_with("permit blocked this call because it would delete"));
    assert_eq!(b.review.as_ref().unwrap().reasoning.as_deref(), Some("The user asked about build/ only."));
    assert_eq!(b.review.as_ref().unwrap().usage.completion_tokens, Some(12));
    assert_eq!(b.screen.as_ref().unwrap().usage.prompt_tokens, Some(1200));
    assert_eq!(review_fake.seen.lock().unwrap().len(), 1);
}

/// A probe cancelled by the stage timeout must not leave the breaker half-open forever.
#[tokio::test]
async fn a_cancelled_probe_does_not_wedge_the_breaker() {
    let settings = HttpSettings { max_attempts: 1, breaker_failures: 1, breaker_cooldown_ms: 200, ..fast_http() };
    let mut slow = ok(openai_logprobs("A", &[("A", 0.99), ("B", 0.01)]));
    slow.delay = Duration::from_secs(5);
    let (base, _) = serve(vec![raw(500, "down"), slow, ok(openai_logprobs("A", &[("A", 0.99), ("B", 0.01)]))]).await;
    let backend = openai_with(&base, ModelStyle::Decision, |config| {
        if let ModelConfig::Openai { http, .. } = config {
            *http = settings;
        }
    });
    assert!(backend.answer(&screen_request()).await.is_err(), "the first failure opens the breaker");
    tokio::time::sleep(Duration::from_millis(250)).await;
    // The probe hangs and the stage timeout drops it.
    let dropped = tokio::time::timeout(Duration::from_millis(200), backend.answer(&screen_request())).await;
    assert!(dropped.is_err());
    tokio::time::sleep(Duration::from_millis(250)).await;
    let answer = backend.answer(&screen_request()).await;
    assert_eq!(answer.unwrap().choices[0].option, "allow", "a new probe was let through");
}

/// An error response is read only as far as its quoted snippet, however large its body: a 503
/// with 8 MiB of HTML is still a retried 503, and its text in the error stays short.
#[tokio::test]
async fn a_huge_error_body_is_read_only_for_its_snippet() {
    let huge = format!("<html>{}</html>", "overloaded ".repeat(800_000));
    let (base, fake) = serve(vec![raw(503, &huge), raw(400, &huge)]).await;
    let error = openai(&base, ModelStyle::Decision).answer(&screen_request()).await.unwrap_err();
    assert_eq!(fake.seen.lock().unwrap().len(), 2, "the 503 was retried, the 400 was not");
    let text = error.to_string();
    assert!(text.starts_with("transport error: HTTP 400: <html>overloaded"), "{text}");
    assert!(text.len() < 300, "{} characters", text.len());
}
