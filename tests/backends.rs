//! The `openai` and `anthropic` backends against real HTTP servers on loopback that answer in
//! each provider's wire format, quirks included (response shapes from the providers' docs and
//! issue threads): Anthropic's 400 for a `temperature` current models no longer take, thinking
//! blocks before the text, `stop_reason` `max_tokens` and `refusal`; OpenAI's `finish_reason`
//! `length` from a reasoning model that spent its budget thinking; a vLLM chat template that
//! refuses two user messages in a row. Every fault ends in its documented behaviour, and never
//! in an allow.

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
    /// Render the chat like vLLM with a Mistral or Gemma template: after an optional system
    /// message, roles must alternate user/assistant starting with user, else a 400.
    alternating_roles: bool,
}

/// vLLM's answer when the chat template raises on non-alternating roles.
const VLLM_ROLES_ERROR: &str = r#"{"object":"error","message":"Conversation roles must alternate user/assistant/user/assistant/...","type":"BadRequestError","param":null,"code":400}"#;

fn roles_alternate(body: &Value) -> bool {
    let Some(messages) = body["messages"].as_array() else { return false };
    let roles: Vec<&str> = messages.iter().filter_map(|message| message["role"].as_str()).collect();
    let turns = roles.strip_prefix(&["system"]).unwrap_or(&roles);
    turns.iter().enumerate().all(|(index, role)| *role == if index % 2 == 0 { "user" } else { "assistant" })
}

async fn handle(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let parsed = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.seen.lock().unwrap().push((headers, parsed.clone(), Instant::now()));
    if fake.alternating_roles && !roles_alternate(&parsed) {
        return (StatusCode::BAD_REQUEST, VLLM_ROLES_ERROR).into_response();
    }
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
    serve_fake(Fake { queue: Mutex::new(script.into()), ..Fake::default() }).await
}

async fn serve_fake(fake: Fake) -> (String, Arc<Fake>) {
    let fake = Arc::new(fake);
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
        reasoning_effort: None,
        token_limit_field: TokenLimitField::MaxTokens,
        max_tokens: Some(512),
        response_format: false,
        http: fast_http(),
    };
    tweak(&mut config);
    // SAFETY of the test: every test sets the same value, so concurrent tests agree.
    unsafe { std::env::set_var("PERMIT_TEST_OPENAI_KEY", "sk-test-secret-key") };
    model::build(&config).unwrap()
}

fn anthropic(base: &str) -> Arc<dyn DecisionModel> {
    anthropic_with(base, "")
}

/// An `anthropic` review model as a config file writes it, `extra` lines added to its section.
fn anthropic_with(base: &str, extra: &str) -> Arc<dyn DecisionModel> {
    unsafe { std::env::set_var("PERMIT_TEST_ANTHROPIC_KEY", "sk-ant-test-secret") };
    let config = permit::config::Config::from_toml_str(
        "anthropic.toml",
        &format!(
            "[review.model]\nbackend = \"anthropic\"\nbase_url = \"{base}\"\nmodel = \"claude-test\"\napi_key_env = \"PERMIT_TEST_ANTHROPIC_KEY\"\n{extra}\n[review.model.http]\nrequest_timeout_ms = 2000\ninitial_backoff_ms = 10\nmax_backoff_ms = 50\n"
        ),
    )
    .unwrap();
    model::build(&config.review.unwrap().model).unwrap()
}

fn screen_request() -> ModelRequest {
    ModelRequest {
        system: "POLICY".into(),
        transcript: "<transcript>…</transcript>".into(),
        question_block: "Question `screen` …".into(),
        questions: vec![screen_question("c1")],
        reasoned: false,
        screen_input: None,
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
    assert_eq!(messages.len(), 2, "a system message and one user message");
    assert_eq!((messages[0]["role"].as_str(), messages[0]["content"].as_str()), (Some("system"), Some("POLICY")));
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(messages[1]["content"][0], json!({ "type": "text", "text": "<transcript>…</transcript>" }));
    assert_eq!(messages[1]["content"][1]["type"], "text");
    assert!(messages[1]["content"][1]["text"].as_str().unwrap().ends_with("A = `allow`\nB = `escalate`\n"));
    assert_eq!(messages[1]["content"].as_array().unwrap().len(), 2);
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
    assert_eq!(body["max_tokens"], 1024);
    for absent in ["temperature", "top_p", "top_k", "thinking", "output_config"] {
        assert!(body.get(absent).is_none(), "`{absent}` is sent only when configured: {body}");
    }
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
    assert_eq!(b.decision.reason_code.map(permit::decision::ReasonCode::as_str), Some("deny_destructive"));
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

/// A Messages response in Anthropic's current shape.
fn anthropic_message(content: Value, stop_reason: &str, output_tokens: u64) -> Value {
    json!({
        "id": "msg_03", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
        "usage": { "input_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                   "output_tokens": output_tokens, "service_tier": "standard" }
    })
}

fn anthropic_text(text: &str) -> Value {
    anthropic_message(json!([{ "type": "text", "text": text }]), "end_turn", 20)
}

/// Anthropic's error body for a model that no longer takes `temperature`.
const TEMPERATURE_400: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"`temperature` is deprecated for this model."},"request_id":"req_011CVXEc1pdn4pBywEv3mkNd"}"#;

/// A server that answers like current Claude models: any request carrying `temperature` gets
/// their 400; by default permit sends none and is answered. A configured `temperature` is sent
/// as is, and the 400 is a client error: not retried, quoted in the error, failed closed.
#[tokio::test]
async fn anthropic_sends_no_temperature_by_default_and_a_temperature_400_fails_closed() {
    let (base, fake) = serve(vec![ok(anthropic_text("Routine.\n{\"verdict\": \"allow\"}"))]).await;
    fake.by_content.lock().unwrap().push(("\"temperature\":".to_owned(), raw(400, TEMPERATURE_400)));
    let answer = anthropic(&base).answer(&review_request()).await.unwrap();
    assert_eq!(answer.choices[0].option, "allow");
    assert!(fake.seen.lock().unwrap()[0].1.get("temperature").is_none());

    let error = anthropic_with(&base, "temperature = 0.0").answer(&review_request()).await.unwrap_err();
    assert_eq!(error.kind(), "transport", "{error}");
    let text = error.to_string();
    assert!(text.contains("HTTP 400") && text.contains("`temperature` is deprecated for this model."), "{text}");
    {
        let seen = fake.seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "the 400 was not retried");
        assert_eq!(seen[1].1["temperature"], 0.0);
    }

    // The other sampling parameters go out only when set, as written.
    fake.queue.lock().unwrap().push_back(ok(anthropic_text("{\"verdict\": \"allow\"}")));
    anthropic_with(&base, "top_p = 0.9\ntop_k = 40").answer(&review_request()).await.unwrap();
    let body = fake.seen.lock().unwrap()[2].1.clone();
    assert_eq!((body["top_p"].as_f64(), body["top_k"].as_u64()), (Some(0.9), Some(40)));
    assert!(body.get("temperature").is_none());
}

/// Extended thinking (a fixed budget) and adaptive thinking with an effort: the request carries
/// them as configured, and the answer's `thinking` blocks, which come before the `text` block,
/// are kept as reasoning while `redacted_thinking` (encrypted) is skipped.
#[tokio::test]
async fn anthropic_thinking_blocks_come_before_the_text() {
    let response = anthropic_message(
        json!([
            { "type": "thinking", "thinking": "The user asked to clean build/; this deletes src/.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" },
            { "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP" },
            { "type": "text", "text": "It deletes sources.\n{\"verdict\": \"deny_destructive\"}" }
        ]),
        "end_turn",
        900,
    );
    let (base, fake) = serve(vec![ok(response.clone()), ok(response)]).await;
    let backend = anthropic_with(
        &base,
        "max_tokens = 4096\nthinking = { type = \"enabled\", budget_tokens = 2048 }\neffort = \"low\"",
    );
    let answer = backend.answer(&review_request()).await.unwrap();
    assert_eq!(answer.choices[0].option, "deny_destructive");
    let reasoning = answer.reasoning.unwrap();
    assert!(
        reasoning.starts_with("The user asked to clean build/; this deletes src/.\nIt deletes sources."),
        "{reasoning}"
    );
    assert!(!reasoning.contains("EmwKAhgB"), "redacted thinking is never logged: {reasoning}");
    let body = fake.seen.lock().unwrap()[0].1.clone();
    assert_eq!(body["thinking"], json!({ "type": "enabled", "budget_tokens": 2048 }));
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["output_config"], json!({ "effort": "low" }));
    assert!(body.get("temperature").is_none());

    // Adaptive thinking: no budget, and a larger default `max_tokens` than without thinking.
    let adaptive = anthropic_with(&base, "thinking = { type = \"adaptive\", display = \"summarized\" }");
    assert_eq!(adaptive.answer(&review_request()).await.unwrap().choices[0].option, "deny_destructive");
    let body = fake.seen.lock().unwrap()[1].1.clone();
    assert_eq!(body["thinking"], json!({ "type": "adaptive", "display": "summarized" }));
    assert_eq!(body["max_tokens"], 4096);
    assert!(body.get("output_config").is_none());
}

/// A stop at the token limit is `truncated` and a refusal `refused`, each its own kind, even
/// when the cut-off text happens to end in a well-formed answer line (a verdict the model was
/// still reasoning about is not its answer).
#[tokio::test]
async fn anthropic_stop_reasons_max_tokens_and_refusal_are_their_own_errors() {
    let cut = anthropic_message(
        json!([{ "type": "text", "text": "If the answer were\n{\"verdict\": \"allow\"}" }]),
        "max_tokens",
        1024,
    );
    let thinking_cut = anthropic_message(
        json!([{ "type": "thinking", "thinking": "Let me weigh each path the command", "signature": "sig" }]),
        "max_tokens",
        4096,
    );
    let window =
        anthropic_message(json!([{ "type": "text", "text": "The trans" }]), "model_context_window_exceeded", 10);
    let refused = anthropic_message(json!([]), "refusal", 0);
    let (base, fake) = serve(vec![ok(cut), ok(thinking_cut), ok(window), ok(refused)]).await;

    let error = anthropic(&base).answer(&review_request()).await.unwrap_err();
    assert_eq!(error.kind(), "truncated", "{error}");
    assert_eq!(
        error.to_string(),
        "the model's answer was cut off: `stop_reason` `max_tokens` at the limit of 1024 tokens (1024 output tokens); raise `max_tokens`"
    );
    let error =
        anthropic_with(&base, "thinking = { type = \"adaptive\" }").answer(&review_request()).await.unwrap_err();
    assert_eq!(error.kind(), "truncated");
    assert!(
        error.to_string().contains(
            "at the limit of 4096 tokens (4096 output tokens); raise `max_tokens` (thinking counts towards it)"
        ),
        "{error}"
    );
    let error = anthropic(&base).answer(&review_request()).await.unwrap_err();
    assert_eq!(error.kind(), "truncated");
    assert!(error.to_string().contains("model_context_window_exceeded"), "{error}");
    let error = anthropic(&base).answer(&review_request()).await.unwrap_err();
    assert_eq!(error.kind(), "refused", "{error}");
    assert_eq!(error.to_string(), "the model refused to answer: `stop_reason` `refusal`");
    assert_eq!(fake.seen.lock().unwrap().len(), 4, "neither is retried");
}

/// A reasoning model's chat completion that spent its whole budget reasoning, as OpenAI sends
/// it: empty `content`, `finish_reason` `length`, the reasoning tokens in the usage details.
fn openai_cut_off(content: Option<&str>, completion: u64, reasoning: u64) -> Value {
    json!({
        "id": "chatcmpl-5", "object": "chat.completion", "created": 1, "model": "judge",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": content, "refusal": null, "annotations": [] },
                      "finish_reason": "length" }],
        "usage": { "prompt_tokens": 900, "completion_tokens": completion, "total_tokens": 900 + completion,
                   "prompt_tokens_details": { "cached_tokens": 0, "audio_tokens": 0 },
                   "completion_tokens_details": { "reasoning_tokens": reasoning, "audio_tokens": 0,
                                                  "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0 } },
        "service_tier": "default", "system_fingerprint": null
    })
}

/// `reasoning_effort` is sent to reasoning models with a larger default budget, and a text
/// answer stopped by `length` is `truncated`, not `malformed`, and never read for a verdict.
/// `content_filter` and a `refusal` message are `refused`. A decision-style `length` finish is
/// the one token asked for and still answers.
#[tokio::test]
async fn openai_length_finish_is_truncated_and_refusals_are_refused() {
    let filtered = json!({
        "id": "chatcmpl-6", "object": "chat.completion", "created": 1, "model": "judge",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": null }, "finish_reason": "content_filter" }]
    });
    let refusal = json!({
        "id": "chatcmpl-7", "object": "chat.completion", "created": 1, "model": "judge",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": null, "refusal": "I'm sorry, I can't help with that." },
                      "logprobs": null, "finish_reason": "stop" }]
    });
    let (base, fake) = serve(vec![
        ok(openai_cut_off(Some(""), 4096, 4096)),
        ok(openai_cut_off(Some("Checking.\n{\"verdict\": \"allow\"}"), 512, 0)),
        ok(filtered),
        ok(refusal),
        ok(openai_logprobs("A", &[("A", 0.99), ("B", 0.01)])),
    ])
    .await;
    let reasoning = openai_with(&base, ModelStyle::Text, |config| {
        if let ModelConfig::Openai { reasoning_model, reasoning_effort, max_tokens, .. } = config {
            *reasoning_model = true;
            *reasoning_effort = Some(permit::config::ReasoningEffort::Low);
            *max_tokens = None;
        }
    });
    let error = reasoning.answer(&review_request()).await.unwrap_err();
    assert_eq!(error.kind(), "truncated", "{error}");
    assert_eq!(
        error.to_string(),
        "the model's answer was cut off: `finish_reason` `length` at the limit of 4096 tokens (4096 completion tokens, 4096 of them reasoning); raise `max_tokens` (reasoning counts towards it) or lower `reasoning_effort`"
    );
    let body = fake.seen.lock().unwrap()[0].1.clone();
    assert_eq!(body["reasoning_effort"], "low");
    assert_eq!(body["max_completion_tokens"], 4096, "a reasoning model's default budget");
    assert!(body.get("max_tokens").is_none() && body.get("temperature").is_none(), "{body}");

    let text = openai(&base, ModelStyle::Text);
    let error = text.answer(&review_request()).await.unwrap_err();
    assert_eq!(error.kind(), "truncated", "a cut-off text is not parsed: {error}");
    assert!(fake.seen.lock().unwrap()[1].1.get("reasoning_effort").is_none());
    let error = text.answer(&review_request()).await.unwrap_err();
    assert_eq!((error.kind(), error.to_string().contains("content_filter")), ("refused", true), "{error}");
    let error = text.answer(&review_request()).await.unwrap_err();
    assert_eq!(error.kind(), "refused");
    assert!(error.to_string().ends_with("the model's refusal: `I'm sorry, I can't help with that.`"), "{error}");
    let answer = openai(&base, ModelStyle::Decision).answer(&screen_request()).await.unwrap();
    assert_eq!(answer.choices[0].option, "allow", "decision style asks for one token: `length` is its normal finish");
}

/// vLLM serving a model whose chat template (Mistral's, Gemma's) requires alternating roles
/// answers two user messages in a row with a 400. permit's one user message of two text parts
/// passes, in both styles.
#[tokio::test]
async fn a_template_that_requires_alternating_roles_accepts_the_request() {
    let (base, fake) = serve_fake(Fake {
        queue: Mutex::new(
            vec![ok(openai_logprobs("A", &[("A", 0.97), ("B", 0.03)])), ok(openai_text("{\"verdict\": \"allow\"}"))]
                .into(),
        ),
        alternating_roles: true,
        ..Fake::default()
    })
    .await;
    // The shape permit used to send is refused, as vLLM refuses it.
    let old_shape = json!({
        "model": "judge",
        "messages": [
            { "role": "system", "content": "POLICY" },
            { "role": "user", "content": "<transcript>…</transcript>" },
            { "role": "user", "content": "Question `screen` …" },
        ],
    });
    let response =
        reqwest::Client::new().post(format!("{base}/v1/chat/completions")).json(&old_shape).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(response.text().await.unwrap(), VLLM_ROLES_ERROR);

    let answer = openai(&base, ModelStyle::Decision).answer(&screen_request()).await.unwrap();
    assert_eq!(answer.choices[0].option, "allow");
    let answer = openai(&base, ModelStyle::Text).answer(&review_request()).await.unwrap();
    assert_eq!(answer.choices[0].option, "allow");
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for (_, body, _) in &seen[1..] {
        let roles: Vec<&str> =
            body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user"]);
    }
}

/// Prompt caching needs the same prefix on every call of a session: the screens of two
/// different pending calls of one request send a byte-identical system message and first user
/// content part (the transcript), and differ only in the second part (the question). The same
/// holds for Anthropic, where the first part carries the cache breakpoint.
#[tokio::test]
async fn the_cached_prefix_is_identical_across_the_calls_of_a_session() {
    let (openai_base, openai_fake) = serve(vec![]).await;
    openai_fake.by_content.lock().unwrap().extend([
        ("pending call `a`".to_owned(), ok(openai_logprobs("B", &[("B", 0.9), ("A", 0.1)]))),
        ("pending call `b`".to_owned(), ok(openai_logprobs("B", &[("B", 0.8), ("A", 0.2)]))),
    ]);
    let (anthropic_base, anthropic_fake) = serve(vec![]).await;
    anthropic_fake.by_content.lock().unwrap().extend([
        ("pending call `a`".to_owned(), ok(anthropic_text("{\"screen\": \"escalate\"}"))),
        ("pending call `b`".to_owned(), ok(anthropic_text("{\"screen\": \"escalate\"}"))),
    ]);
    unsafe { std::env::set_var("PERMIT_TEST_ANTHROPIC_KEY", "sk-ant-test-secret") };
    let request = permit::request::DecideRequest::from_json(
        r#"{"session_id": "cache", "cwd": "/workspace", "transcript": [{"type": "user", "text": "tidy up the build outputs"}],
            "pending": [{"id": "a", "name": "Bash", "input": {"command": "rm -rf build"}},
                        {"id": "b", "name": "Bash", "input": {"command": "rm -rf dist"}}]}"#,
    )
    .unwrap();
    for (model, fake) in [
        (format!("backend = \"openai\"\nbase_url = \"{openai_base}/v1\"\nmodel = \"judge\""), &openai_fake),
        (
            format!(
                "backend = \"anthropic\"\nbase_url = \"{anthropic_base}\"\nmodel = \"claude-test\"\napi_key_env = \"PERMIT_TEST_ANTHROPIC_KEY\""
            ),
            &anthropic_fake,
        ),
    ] {
        let config = permit::config::Config::from_toml_str(
            "cache.toml",
            &format!("[screen]\nallow_threshold_percent = 95\n[screen.model]\n{model}\n"),
        )
        .unwrap();
        let records = permit::engine::Engine::new(config).unwrap().records(&request).await;
        assert!(records.iter().all(|record| record.decision.decision.as_str() == "ask"));
        let seen = fake.seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "one screen per pending call");
        // Anthropic: `system` beside the messages; OpenAI: the system message first.
        let parts = |body: &Value| {
            if let Some(system) = body.get("system") {
                let content = &body["messages"][0]["content"];
                (system.to_string(), content[0].to_string(), content[1].to_string())
            } else {
                let messages = &body["messages"];
                (messages[0].to_string(), messages[1]["content"][0].to_string(), messages[1]["content"][1].to_string())
            }
        };
        let (system_a, transcript_a, question_a) = parts(&seen[0].1);
        let (system_b, transcript_b, question_b) = parts(&seen[1].1);
        assert_eq!(system_a, system_b);
        assert_eq!(transcript_a, transcript_b, "the first content part is byte-identical");
        assert!(transcript_a.contains("tidy up the build outputs"), "{transcript_a}");
        assert_ne!(question_a, question_b, "only the question differs");
    }
}

/// The new error kinds fail closed through the whole pipeline: a review cut off at its token
/// limit or refused is `ask` with `review_error` and the kind in the record and the reason, and
/// a text-style screen cut off with no review is `ask` with `screen_error`.
#[tokio::test]
async fn truncated_and_refused_answers_fail_closed_in_the_pipeline() {
    let (screen_base, screen_fake) = serve(vec![]).await;
    screen_fake
        .by_content
        .lock()
        .unwrap()
        .push(("pending call".to_owned(), ok(openai_logprobs("B", &[("B", 0.9), ("A", 0.1)]))));
    let cut = anthropic_message(json!([{ "type": "text", "text": "{\"verdict\": \"allow\"}" }]), "max_tokens", 1024);
    let refused = anthropic_message(json!([]), "refusal", 0);
    let (review_base, _) = serve(vec![ok(cut), ok(refused)]).await;
    unsafe { std::env::set_var("PERMIT_TEST_ANTHROPIC_KEY", "sk-ant-test-secret") };
    let config = permit::config::Config::from_toml_str(
        "closed.toml",
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
        r#"{"session_id": "closed", "cwd": "/workspace", "transcript": [{"type": "user", "text": "clean up"}],
            "pending": [{"id": "a", "name": "Bash", "input": {"command": "rm -rf build"}}]}"#,
    )
    .unwrap();
    for kind in ["truncated", "refused"] {
        let record = engine.records(&request).await.remove(0);
        assert_eq!(record.decision.decision.as_str(), "ask", "{kind}");
        assert_eq!(
            record.decision.reason_code.map(permit::decision::ReasonCode::as_str),
            Some("review_error"),
            "{kind}"
        );
        assert_eq!(record.review.as_ref().unwrap().error_kind.as_deref(), Some(kind));
        assert!(
            record.decision.reason.as_deref().unwrap().contains(&format!("({kind})")),
            "{:?}",
            record.decision.reason
        );
    }

    let (text_base, _) = serve(vec![ok(openai_cut_off(Some("{\"screen\": \"allow\"}"), 1024, 0))]).await;
    let config = permit::config::Config::from_toml_str(
        "screen.toml",
        &format!(
            "[screen]\nallow_threshold_percent = 95\n[screen.model]\nbackend = \"openai\"\nbase_url = \"{text_base}/v1\"\nmodel = \"judge\"\nstyle = \"text\"\n"
        ),
    )
    .unwrap();
    let record = permit::engine::Engine::new(config).unwrap().records(&request).await.remove(0);
    assert_eq!(record.decision.decision.as_str(), "ask");
    assert_eq!(record.decision.reason_code.map(permit::decision::ReasonCode::as_str), Some("screen_error"));
    assert_eq!(record.screen.as_ref().unwrap().error_kind.as_deref(), Some("truncated"));
}

/// Settings the API would refuse on every call are refused when the config loads, naming the
/// field and saying what would work.
#[test]
fn provider_settings_the_api_would_refuse_are_config_errors() {
    let anthropic = |extra: &str| {
        permit::config::Config::from_toml_str(
            "bad.toml",
            &format!("[review.model]\nbackend = \"anthropic\"\nmodel = \"claude-test\"\n{extra}\n"),
        )
        .map(|_| ())
        .map_err(|error| error.to_string())
    };
    let openai = |extra: &str| {
        permit::config::Config::from_toml_str(
            "bad.toml",
            &format!("[review.model]\nbackend = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\nstyle = \"text\"\n{extra}\n"),
        )
        .map(|_| ())
        .map_err(|error| error.to_string())
    };
    let cases: Vec<(Result<(), String>, &str)> = vec![
        (
            anthropic("max_tokens = 2048\nthinking = { type = \"enabled\", budget_tokens = 2048 }"),
            "`review.model.thinking.budget_tokens` (2048) must be less than `review.model.max_tokens` (2048): the answer needs tokens after the thinking, e.g. max_tokens = 4096 with budget_tokens = 2048",
        ),
        (
            anthropic("thinking = { type = \"enabled\", budget_tokens = 8000 }"),
            "`review.model.thinking.budget_tokens` (8000) must be less than `review.model.max_tokens` (4096)",
        ),
        (
            anthropic("thinking = { type = \"enabled\", budget_tokens = 512 }"),
            "`review.model.thinking.budget_tokens` must be at least 1024, got 512",
        ),
        (
            anthropic("temperature = 0.0\nthinking = { type = \"adaptive\" }"),
            "`review.model`: `thinking` cannot be combined with `temperature` or `top_k`",
        ),
        (
            anthropic("top_p = 0.5\nthinking = { type = \"adaptive\" }"),
            "`review.model.top_p` must be within 0.95..=1 with `thinking`, got 0.5",
        ),
        (anthropic("temperature = 0.0\ntop_p = 0.9"), "`review.model`: set `temperature` or `top_p`, not both"),
        (anthropic("temperature = 1.5"), "`review.model.temperature` must be within 0..=1, got 1.5"),
        (anthropic("top_k = 0"), "`review.model.top_k` must be at least 1"),
        (
            anthropic("thinking = { type = \"sometimes\" }"),
            "unknown variant `sometimes`, expected one of `enabled`, `adaptive`, `disabled`",
        ),
        (anthropic("thinking = { type = \"adaptive\", budget_tokens = 2048 }"), "unknown field `budget_tokens`"),
        (anthropic("effort = \"extreme\""), "unknown variant `extreme`"),
        (
            openai("reasoning_effort = \"low\""),
            "`review.model.reasoning_effort` `low` is sent only to reasoning models: add `reasoning_model = true`",
        ),
        (openai("reasoning_model = true\nreasoning_effort = \"huge\""), "unknown variant `huge`"),
    ];
    for (result, expected) in cases {
        let error = result.expect_err(expected);
        assert!(error.contains(expected), "expected `{expected}` in: {error}");
    }
    for good in [
        "thinking = { type = \"enabled\", budget_tokens = 2048 }",
        "max_tokens = 16000\nthinking = { type = \"enabled\", budget_tokens = 10000, display = \"omitted\" }",
        "thinking = { type = \"adaptive\" }\neffort = \"medium\"\ntop_p = 0.95",
        "thinking = { type = \"disabled\" }\ntemperature = 0.0",
        "effort = \"max\"",
    ] {
        assert_eq!(anthropic(good), Ok(()), "{good}");
    }
    assert_eq!(openai("reasoning_model = true\nreasoning_effort = \"none\""), Ok(()));
}
