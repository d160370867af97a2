//! `permit serve` over real HTTP on loopback: every status, auth, deadlines against a stalled
//! model server, load shedding, graceful shutdown, and the audit log under load.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use futures_util::StreamExt;
use permit::config::Config;
use permit::engine::Engine;
use permit::server::Server;
use serde_json::{Value, json};
use tokio::sync::oneshot;

const TOKEN: &str = "test-token-0123456789abcdef";

struct Running {
    base: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), permit::server::ServeError>>,
    directory: PathBuf,
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn shutdown(mut self) -> Vec<Value> {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
        let text = std::fs::read_to_string(self.directory.join("audit.jsonl")).unwrap_or_default();
        let lines = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        std::fs::remove_dir_all(&self.directory).unwrap();
        lines
    }
}

fn scratch(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("permit-server-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// Starts the service in-process with `extra` TOML and a `[server]` table of `server` keys.
async fn start(name: &str, extra: &str, server: &str) -> Running {
    let directory = scratch(name);
    std::fs::write(directory.join("tokens"), format!("# test\n{TOKEN}\n")).unwrap();
    let text = format!(
        "{extra}\n[server]\nbind = \"127.0.0.1:0\"\ntokens_file = \"{}\"\naudit_log = \"{}\"\n{server}\n",
        directory.join("tokens").display(),
        directory.join("audit.jsonl").display()
    );
    let config = Config::from_toml_str("test.toml", &text).unwrap();
    let server = Server::bind(Engine::new(config).unwrap()).await.unwrap();
    let base = format!("http://{}", server.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    Running { base, stop: Some(stop), task, directory }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap()
}

fn request(command: &str) -> String {
    json!({
        "session_id": "s1",
        "cwd": "/workspace",
        "transcript": [{"type": "user", "text": "clean up the build"}],
        "pending": [{"id": "c1", "name": "Bash", "input": {"command": command}}]
    })
    .to_string()
}

async fn post_json(client: &reqwest::Client, url: &str, body: String, token: Option<&str>) -> reqwest::Response {
    let mut builder = client.post(url).header("content-type", "application/json").body(body);
    if let Some(token) = token {
        builder = builder.bearer_auth(token);
    }
    builder.send().await.unwrap()
}

/// An OpenAI-compatible server answering the screen's decision question with `A` (allow) at
/// P 0.99, after `delay`.
async fn fake_model(delay: Duration) -> String {
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "judge",
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": "A" },
            "logprobs": { "content": [{ "token": "A", "logprob": (0.99f64).ln(), "bytes": [65],
                "top_logprobs": [{ "token": "A", "logprob": (0.99f64).ln(), "bytes": [65] },
                                 { "token": "B", "logprob": (0.01f64).ln(), "bytes": [66] }] }] },
            "finish_reason": "length"
        }],
        "usage": { "prompt_tokens": 900, "completion_tokens": 1, "total_tokens": 901 }
    });
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let answer = answer.clone();
            async move {
                tokio::time::sleep(delay).await;
                axum::Json(answer)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}/v1")
}

/// A server that accepts connections and never answers.
async fn stalled_model() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://{address}/v1")
}

fn screen_config(base_url: &str) -> String {
    format!(
        "[screen]\nallow_threshold_percent = 95\ntimeout_ms = 20000\n[screen.model]\nbackend = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"judge\"\n[screen.model.http]\nrequest_timeout_ms = 20000\nmax_attempts = 1\n"
    )
}

#[tokio::test]
async fn every_status_is_a_json_answer_and_none_echoes_the_token() {
    let running = start("statuses", "", "body_limit_bytes = 4096").await;
    let client = client();
    let decide = running.url("/v1/decide");
    let mut bodies = Vec::new();

    let ok = post_json(&client, &decide, request("git status"), Some(TOKEN)).await;
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().contains_key("x-request-id"));
    let body: Value = ok.json().await.unwrap();
    assert_eq!(body["decisions"][0]["decision"], "allow");

    // The client's request id comes back.
    let echoed = client
        .post(&decide)
        .header("content-type", "application/json")
        .header("x-request-id", "trace-42")
        .bearer_auth(TOKEN)
        .body(request("ls"))
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "trace-42");

    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (client.post(&decide).header("content-type", "application/json").body(request("ls")), 401, "unauthorized"),
        (
            client
                .post(&decide)
                .header("content-type", "application/json")
                .bearer_auth("wrong-token-0123456789")
                .body(request("ls")),
            401,
            "unauthorized",
        ),
        (
            client
                .post(&decide)
                .header("content-type", "application/json")
                .bearer_auth(TOKEN)
                .body(r#"{"pending": [{"id": "a", "name": "Bash", "input": []}]}"#),
            400,
            "pending[0].input",
        ),
        (
            client.post(&decide).header("content-type", "application/json").bearer_auth(TOKEN).body("{"),
            400,
            "invalid_request",
        ),
        (
            client.post(&decide).header("content-type", "application/json").bearer_auth(TOKEN).body("x".repeat(5000)),
            413,
            "4096 bytes",
        ),
        (
            client.post(&decide).header("content-type", "text/plain").bearer_auth(TOKEN).body(request("ls")),
            415,
            "application/json",
        ),
        (client.post(&decide).bearer_auth(TOKEN).body(request("ls")), 415, "application/json"),
        (client.get(running.url("/nope")), 404, "not_found"),
        (client.get(&decide).bearer_auth(TOKEN), 405, "method_not_allowed"),
        (client.get(running.url("/metrics")), 401, "unauthorized"),
        (
            client
                .post(running.url("/v1/sessions/s1/feedback"))
                .header("content-type", "application/json")
                .bearer_auth(TOKEN)
                .body(r#"{"call_id": "c1", "decision": "maybe"}"#),
            400,
            "`decision`",
        ),
        (
            client
                .post(running.url("/v1/sessions/bad%20id/feedback"))
                .header("content-type", "application/json")
                .bearer_auth(TOKEN)
                .body(r#"{"call_id": "c1", "decision": "allow"}"#),
            400,
            "session id",
        ),
    ];
    for (builder, status, needle) in cases {
        let response = builder.send().await.unwrap();
        assert_eq!(response.status(), status, "{needle}");
        if status == 401 {
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
        }
        let text = response.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        assert!(text.contains(needle), "{status}: {text}");
        assert!(body["error"]["code"].is_string(), "{text}");
        bodies.push(text);
    }

    let health = client.get(running.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = client.get(running.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let metrics = client.get(running.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    assert!(text.contains("permit_decisions_total{stage=\"gate\",decision=\"allow\"} 2"), "{text}");
    assert!(text.contains("permit_http_responses_total{route=\"/v1/decide\",status=\"401\"} 2"), "{text}");
    assert!(text.contains("permit_stage_latency_seconds_count{stage=\"gate\"} 2"), "{text}");

    let feedback = post_json(
        &client,
        &running.url("/v1/sessions/s1/feedback"),
        r#"{"call_id": "c1", "decision": "deny", "note": "not now"}"#.to_owned(),
        Some(TOKEN),
    )
    .await;
    assert_eq!(feedback.status(), 200);

    for body in &bodies {
        assert!(!body.contains(TOKEN));
    }
    let lines = running.shutdown().await;
    let kinds: Vec<&str> = lines.iter().map(|line| line["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["decision", "decision", "feedback"]);
    assert_eq!(lines[1]["request_id"], "trace-42");
    assert!(lines[0]["request_digest"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(lines[0]["record"]["gate"]["action"], "allow");
    assert_eq!(lines[2]["decision"], "deny");
    assert!(!serde_json::to_string(&lines).unwrap().contains(TOKEN));
}

#[tokio::test]
async fn a_stalled_model_makes_the_deadline_answer_ask_not_hang() {
    let stalled = stalled_model().await;
    let running = start("stalled", &screen_config(&stalled), "decision_timeout_ms = 400").await;
    let client = client();
    let started = Instant::now();
    // `rm -rf build` goes to the classifier; `git status` is the gate's alone.
    let body = json!({
        "cwd": "/workspace",
        "pending": [
            {"id": "c1", "name": "Bash", "input": {"command": "rm -rf build"}},
            {"id": "c2", "name": "Bash", "input": {"command": "git status"}}
        ]
    });
    let response = post_json(&client, &running.url("/v1/decide"), body.to_string(), Some(TOKEN)).await;
    assert_eq!(response.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["decisions"][0]["decision"], "ask");
    assert_eq!(body["decisions"][0]["stage"], "timeout");
    assert_eq!(body["decisions"][0]["reason_code"], "decision_timeout");
    assert_eq!(body["decisions"][1]["decision"], "allow");
    // The stalled server accepts connections, so it counts as reachable.
    assert_eq!(client.get(running.url("/readyz")).send().await.unwrap().status(), 200);
    let lines = running.shutdown().await;
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["record"]["decision"]["stage"], "timeout");
}

#[tokio::test]
async fn an_unreachable_model_endpoint_is_not_ready() {
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}/v1", listener.local_addr().unwrap())
    };
    let running = start("unready", &screen_config(&closed), "").await;
    let response = client().get(running.url("/readyz")).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["ready"], false);
    assert_eq!(body["checks"][1]["name"], "screen model");
    assert_eq!(body["checks"][1]["ok"], false);
    running.shutdown().await;
}

#[tokio::test]
async fn a_hanging_model_holds_model_slots_never_decision_slots() {
    let stalled = stalled_model().await;
    let running = start(
        "shed",
        &screen_config(&stalled),
        // Long enough that the checks below run while the first request waits on the model,
        // however loaded the machine.
        "max_concurrency = 1\nmax_model_concurrency = 1\ndecision_timeout_ms = 4000",
    )
    .await;
    let client = client();
    let first = tokio::spawn(post_json_owned(client.clone(), running.url("/v1/decide"), request("rm -rf build")));
    // Wait until the first request holds the model slot (it is then past the gate).
    let started = Instant::now();
    loop {
        let metrics = client.get(running.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap();
        let text = metrics.text().await.unwrap();
        if text.lines().any(|line| line == "permit_model_slots_busy 1") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the model slot never filled: {text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let busy = post_json(&client, &running.url("/v1/decide"), request("rm -rf dist"), Some(TOKEN)).await;
    let body: Value = busy.json().await.unwrap();
    assert_eq!(body["decisions"][0]["decision"], "ask");
    assert_eq!(body["decisions"][0]["reason_code"], "model_busy");
    // The only decision slot is free: the gate still answers.
    let second = post_json(&client, &running.url("/v1/decide"), request("git status"), Some(TOKEN)).await;
    assert_eq!(second.status(), 200);
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["decisions"][0]["decision"], "allow");
    let first = first.await.unwrap();
    assert_eq!(first.status(), 200, "the admitted request still gets its decision");
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["decisions"][0]["reason_code"], "decision_timeout");
    // The model slot is free again once the first request is answered.
    let metrics = client.get(running.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    assert!(text.lines().any(|line| line == "permit_model_slots_busy 0"), "{text}");
    running.shutdown().await;
}

async fn post_json_owned(client: reqwest::Client, url: String, body: String) -> reqwest::Response {
    post_json(&client, &url, body, Some(TOKEN)).await
}

#[tokio::test]
async fn shutdown_finishes_in_flight_decisions_and_flushes_the_log() {
    let slow = fake_model(Duration::from_millis(800)).await;
    let running = start("drain", &screen_config(&slow), "shutdown_grace_secs = 10").await;
    let client = client();
    let url = running.url("/v1/decide");
    let in_flight = tokio::spawn(post_json_owned(client.clone(), url.clone(), request("rm -rf build")));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stop_started = Instant::now();
    let base = running.base.clone();
    let lines = tokio::spawn(running.shutdown());
    tokio::time::sleep(Duration::from_millis(100)).await;
    // New connections are refused while the in-flight decision finishes.
    let refused = reqwest::Client::new().get(format!("{base}/healthz")).send().await;
    assert!(refused.is_err(), "{refused:?}");
    let response = in_flight.await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["decisions"][0]["stage"], "screen");
    assert_eq!(body["decisions"][0]["decision"], "allow");
    let lines = lines.await.unwrap();
    assert!(stop_started.elapsed() >= Duration::from_millis(500), "waited for the decision");
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["record"]["screen"]["p_allow"], 0.99);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_concurrent_decisions_leave_ten_thousand_audit_lines() {
    let running = start("load", "", "max_concurrency = 256").await;
    let client = client();
    let url = running.url("/v1/decide");
    let statuses: Vec<u16> = futures_util::stream::iter(0..10_000)
        .map(|index| {
            let client = client.clone();
            let url = url.clone();
            async move {
                let body = json!({
                    "session_id": format!("s{}", index % 50),
                    "cwd": "/workspace",
                    "pending": [{"id": format!("c{index}"), "name": "Read", "input": {"file_path": "/workspace/src/lib.rs"}}]
                });
                post_json(&client, &url, body.to_string(), Some(TOKEN)).await.status().as_u16()
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    assert!(statuses.iter().all(|status| *status == 200));
    let lines = running.shutdown().await;
    assert_eq!(lines.len(), 10_000);
    let mut calls: Vec<&str> = lines.iter().map(|line| line["record"]["decision"]["id"].as_str().unwrap()).collect();
    calls.sort_unstable();
    calls.dedup();
    assert_eq!(calls.len(), 10_000, "every decision logged exactly once");
}
