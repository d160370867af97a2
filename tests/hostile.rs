//! Issue 14's hostile inputs against `permit serve` over real HTTP on loopback: a model outage
//! must not starve gate-only decisions, slow and idle clients are cut off, connections are
//! capped, shutdown does not wait for a client that never finishes its headers, ids are
//! bounded, the parser is strict, `/readyz` is cached, caught parser panics are silent and
//! counted, and the bearer scheme is case-insensitive.
//!
//! No test times anything: each checks states (a status, a counter, a closed socket), and the
//! only waits are generous guards against a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use permit::config::Config;
use permit::engine::Engine;
use permit::server::Server;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

const TOKEN: &str = "test-token-0123456789abcdef";
/// A bound on any wait for something that must happen; never reached on a working service.
const GUARD: Duration = Duration::from_secs(60);

struct Running {
    address: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), permit::server::ServeError>>,
    directory: PathBuf,
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Stops the service and waits for it (within [`GUARD`]); returns the audit lines.
    async fn shutdown(mut self) -> Vec<Value> {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(GUARD, self.task).await.expect("the service stops").unwrap().unwrap();
        let text = std::fs::read_to_string(self.directory.join("audit.jsonl")).unwrap_or_default();
        let lines = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        std::fs::remove_dir_all(&self.directory).unwrap();
        lines
    }

    async fn metric(&self, name: &str) -> f64 {
        let text = client().get(self.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no `{name}` in\n{text}"))
    }
}

fn scratch(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("permit-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// Starts the service in-process with `extra` TOML and a `[server]` table of `server` keys.
async fn start(name: &str, extra: &str, server: &str) -> Running {
    let directory = scratch(name);
    std::fs::write(directory.join("tokens"), format!("{TOKEN}\n")).unwrap();
    let text = format!(
        "{extra}\n[server]\nbind = \"127.0.0.1:0\"\ntokens_file = \"{}\"\naudit_log = \"{}\"\n{server}\n",
        directory.join("tokens").display(),
        directory.join("audit.jsonl").display()
    );
    let config = Config::from_toml_str("test.toml", &text).unwrap();
    let server = Server::bind(Engine::new(config).unwrap()).await.unwrap();
    let address = server.local_addr().unwrap().to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    Running { address, stop: Some(stop), task, directory }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(GUARD).build().unwrap()
}

async fn decide(running: &Running, body: &Value) -> reqwest::Response {
    client()
        .post(running.url("/v1/decide"))
        .header("content-type", "application/json")
        .bearer_auth(TOKEN)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

fn read_call(id: &str) -> Value {
    json!({"id": id, "name": "Read", "input": {"file_path": "/workspace/src/lib.rs"}})
}

/// `cargo test` is not on the gate's known-safe table: it goes to the classifier.
fn classified_call(id: &str) -> Value {
    json!({"id": id, "name": "Bash", "input": {"command": "cargo test"}})
}

fn request(calls: &[Value]) -> Value {
    json!({"session_id": "s1", "cwd": "/workspace", "transcript": [{"type": "user", "text": "run the tests"}], "pending": calls})
}

/// A model endpoint that accepts connections and never answers; counts the connections.
async fn stalled_model() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
    });
    (format!("http://{address}/v1"), accepted)
}

fn screen_config(base_url: &str) -> String {
    format!(
        "[screen]\ntimeout_ms = 60000\n[screen.model]\nbackend = \"openai\"\nbase_url = \"{base_url}\"\nmodel = \"judge\"\n[screen.model.http]\nrequest_timeout_ms = 60000\nmax_attempts = 1\n"
    )
}

/// Polls `condition` until it holds (within [`GUARD`]).
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < GUARD, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads from a raw connection until the server closes it; returns what it sent.
async fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    tokio::time::timeout(GUARD, async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => received.extend_from_slice(&buffer[..read]),
            }
        }
    })
    .await
    .expect("the server closes the connection");
    String::from_utf8_lossy(&received).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_only_decisions_are_answered_while_every_model_slot_hangs() {
    let (model, accepted) = stalled_model().await;
    let running = start(
        "outage",
        &screen_config(&model),
        "max_concurrency = 2\nmax_model_concurrency = 2\ndecision_timeout_ms = 60000\nshutdown_grace_secs = 1",
    )
    .await;
    // Two classified requests take both model slots and hang on the model.
    let hanging: Vec<_> = ["h1", "h2"]
        .into_iter()
        .map(|id| {
            let body = request(&[classified_call(id)]);
            let url = running.url("/v1/decide");
            tokio::spawn(async move {
                client()
                    .post(url)
                    .header("content-type", "application/json")
                    .bearer_auth(TOKEN)
                    .body(body.to_string())
                    .send()
                    .await
            })
        })
        .collect();
    eventually("both model slots wait on the model", || accepted.load(Ordering::SeqCst) == 2).await;

    // Before issue 14 these shared the slots the hanging requests held, and were shed with 503.
    for index in 0..20 {
        let response = decide(&running, &request(&[read_call(&format!("r{index}"))])).await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["decisions"][0]["decision"], "allow");
    }
    // A request that needs a model gets no slot: its classified call is `ask` at once, and its
    // gate-settled call keeps the gate's answer.
    let response = decide(&running, &request(&[read_call("r"), classified_call("c")])).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["decisions"][0]["decision"], "allow");
    assert_eq!(body["decisions"][0]["stage"], "gate");
    assert_eq!(body["decisions"][1]["decision"], "ask");
    assert_eq!(body["decisions"][1]["reason_code"], "model_busy");
    assert_eq!(body["decisions"][1]["stage"], "screen");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "the refused request never reached the model");
    assert_eq!(running.metric("permit_model_shed_requests_total").await, 1.0);
    assert_eq!(running.metric("permit_shed_requests_total").await, 0.0);
    for task in hanging {
        task.abort();
    }
    let lines = running.shutdown().await;
    let busy = lines.iter().find(|line| line["record"]["decision"]["id"] == "c").unwrap();
    assert_eq!(busy["record"]["decision"]["reason_code"], "model_busy");
}

#[tokio::test]
async fn a_client_trickling_its_body_holds_no_decision_slot_and_gets_408() {
    let running = start("trickle", "", "max_concurrency = 1\nbody_read_timeout_ms = 300").await;
    // Headers promise 100 bytes of body; 10 arrive, then nothing.
    let mut slow = TcpStream::connect(&running.address).await.unwrap();
    let head = format!(
        "POST /v1/decide HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer {TOKEN}\r\ncontent-length: 100\r\n\r\n{{\"pending\""
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    // With the only decision slot taken before the body was read, this was a 503.
    let response = decide(&running, &request(&[read_call("r1")])).await;
    assert_eq!(response.status(), 200);
    let answer = read_until_closed(&mut slow).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    running.shutdown().await;
}

#[tokio::test]
async fn headers_that_never_finish_and_idle_connections_are_closed() {
    let running = start("headers", "", "header_read_timeout_ms = 200").await;
    let mut half = TcpStream::connect(&running.address).await.unwrap();
    half.write_all(b"POST /v1/decide HTTP/1.1\r\nhost: x\r\nx-pad: aaaa").await.unwrap();
    let answer = read_until_closed(&mut half).await;
    assert!(!answer.contains("200 OK"), "{answer}");
    // A keep-alive connection that answered a request and then sends nothing is closed too.
    let mut idle = TcpStream::connect(&running.address).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let answer = read_until_closed(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(running.metric("permit_connections_timed_out_total").await, 2.0);
    running.shutdown().await;
}

#[tokio::test]
async fn oversized_headers_are_refused() {
    let running = start("big-headers", "", "").await;
    let mut stream = TcpStream::connect(&running.address).await.unwrap();
    let pad = "a".repeat(permit::server::listen::MAX_HEADER_BYTES + 1);
    stream.write_all(format!("GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: {pad}\r\n\r\n").as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    running.shutdown().await;
}

#[tokio::test]
async fn at_the_cap_a_new_connection_replaces_the_oldest_idle_one_never_a_busy_one() {
    let running =
        start("cap", "", "max_connections = 2\nheader_read_timeout_ms = 600000\nbody_read_timeout_ms = 600000").await;
    // A connection with a request in flight: its headers are in, half its body is not.
    let body = request(&[read_call("r1")]).to_string();
    let (first_half, second_half) = body.split_at(10);
    let mut busy = TcpStream::connect(&running.address).await.unwrap();
    let head = format!(
        "POST /v1/decide HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer {TOKEN}\r\ncontent-length: {}\r\n\r\n{first_half}",
        body.len()
    );
    busy.write_all(head.as_bytes()).await.unwrap();
    // The metrics request counts itself: 2 means the busy request is being served.
    let started = Instant::now();
    while running.metric("permit_http_requests_in_flight").await != 2.0 {
        assert!(started.elapsed() < GUARD, "the busy request never started");
    }
    // A client that never finishes its headers takes the second place.
    let mut half = TcpStream::connect(&running.address).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    // A whole request then takes the half-sent one's place, and is answered.
    let response = tokio::time::timeout(GUARD, client().get(running.url("/healthz")).send()).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let evicted = read_until_closed(&mut half).await;
    assert_eq!(evicted, "", "closed without an answer");
    // The busy request was never cut off.
    busy.write_all(second_half.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 12];
    tokio::time::timeout(GUARD, busy.read_exact(&mut answer)).await.unwrap().unwrap();
    assert_eq!(String::from_utf8_lossy(&answer), "HTTP/1.1 200");
    assert!(running.metric("permit_connections_evicted_total").await >= 1.0);
    running.shutdown().await;
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_client_that_never_finishes_its_headers() {
    // Neither the header timeout nor the grace period would end these connections.
    let running = start("shutdown", "", "header_read_timeout_ms = 3600000\nshutdown_grace_secs = 3600").await;
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut stream = TcpStream::connect(&running.address).await.unwrap();
        stream.write_all(b"POST /v1/decide HTTP/1.1\r\nhost: x\r\n").await.unwrap();
        held.push(stream);
    }
    // Served once, so every connection is known to have been accepted.
    assert_eq!(client().get(running.url("/healthz")).send().await.unwrap().status(), 200);
    running.shutdown().await;
}

#[tokio::test]
async fn session_ids_and_request_ids_are_bounded() {
    let running = start("ids", "", "").await;
    let with_session = |id: String| json!({"session_id": id, "cwd": "/workspace", "pending": [read_call("r1")]});
    assert_eq!(decide(&running, &with_session("s".repeat(256))).await.status(), 200);
    let response = decide(&running, &with_session("s".repeat(257))).await;
    assert_eq!(response.status(), 400);
    let text = response.text().await.unwrap();
    assert!(text.contains("`session_id` must be at most 256 bytes"), "{text}");

    let with_id = |id: &str| {
        client()
            .post(running.url("/v1/decide"))
            .header("content-type", "application/json")
            .header("x-request-id", id)
            .bearer_auth(TOKEN)
            .body(request(&[read_call("r1")]).to_string())
            .send()
    };
    let kept = "t".repeat(128);
    assert_eq!(with_id(&kept).await.unwrap().headers()["x-request-id"], kept.as_str());
    for unusable in ["t".repeat(129), "t".repeat(20_000), "has space".to_owned(), "tab\tinside".to_owned()] {
        let response = with_id(&unusable).await.unwrap();
        assert_eq!(response.status(), 200);
        let id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
        assert!(id.len() == 16 && id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    }
    let lines = running.shutdown().await;
    assert_eq!(lines.len(), 6);
    assert!(lines.iter().all(|line| line["request_id"].as_str().unwrap().len() <= 128));
}

#[tokio::test]
async fn the_request_parser_is_strict_and_names_line_and_column() {
    let running = start("strict", "", "").await;
    let read = request(&[read_call("r1")]).to_string();
    let smuggled = format!(
        "{read}{}",
        json!({"cwd": "/workspace", "pending": [{"id": "x", "name": "Bash", "input": {"command": "rm -rf ~"}}]})
    );
    let array = json!([null, "/workspace", [], [read_call("r1")]]).to_string();
    for (body, needle) in [
        (smuggled.as_str(), "unexpected data after the JSON object"),
        (array.as_str(), "expected a JSON object, found an array"),
        ("{", "at line 1, column 1: EOF while parsing an object"),
    ] {
        let response = client()
            .post(running.url("/v1/decide"))
            .header("content-type", "application/json")
            .bearer_auth(TOKEN)
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let text = response.text().await.unwrap();
        assert!(text.contains(needle) && !text.contains("`?`"), "{text}");
    }
    let feedback = client()
        .post(running.url("/v1/sessions/s1/feedback"))
        .header("content-type", "application/json")
        .bearer_auth(TOKEN)
        .body(r#"{"call_id": "c1", "decision": "deny"}{"call_id": "c1", "decision": "allow"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(feedback.status(), 400);
    assert!(feedback.text().await.unwrap().contains("after the JSON object"));
    assert!(running.shutdown().await.is_empty(), "nothing was decided or recorded");
}

#[tokio::test]
async fn readyz_checks_are_cached() {
    let (model, accepted) = stalled_model().await;
    let running = start("readyz", &screen_config(&model), "").await;
    let started = Instant::now();
    let calls = 30;
    for _ in 0..calls {
        let response = client().get(running.url("/readyz")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["ready"], true);
    }
    // One check per 2 s cache period at most, however long the calls took.
    let periods = started.elapsed().as_secs() as usize / 2 + 1;
    let opened = accepted.load(Ordering::SeqCst);
    assert!(opened >= 1 && opened <= periods.min(calls), "{opened} connections for {calls} calls");
    running.shutdown().await;
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let running = start("scheme", "", "").await;
    for (authorization, status) in [
        (format!("BEARER {TOKEN}"), 200),
        (format!("bearer {TOKEN}"), 200),
        (format!("Bearer  {TOKEN}"), 200),
        (format!("Bearer {}", TOKEN.to_uppercase()), 401),
        (format!("Basic {TOKEN}"), 401),
    ] {
        let response = client()
            .post(running.url("/v1/decide"))
            .header("content-type", "application/json")
            .header("authorization", &authorization)
            .body(request(&[read_call("r1")]).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{authorization}");
    }
    running.shutdown().await;
}

/// The issue's example `<<$(( )` answered over HTTP: `ask` with a parse error, nothing printed
/// by the service, and the metric present.
#[tokio::test]
async fn the_parser_panic_example_fails_closed() {
    let running = start("panic", "", "").await;
    let body = json!({"cwd": "/workspace", "pending": [{"id": "p", "name": "Bash", "input": {"command": "<<$(( )"}}]});
    let response = decide(&running, &body).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["decisions"][0]["decision"], "ask");
    assert_eq!(body["decisions"][0]["reason_code"], "shell_parse_error");
    assert!(running.metric("permit_parser_panics_total").await >= 0.0);
    running.shutdown().await;
}

const PANIC_CHILD: &str = "PERMIT_TEST_PANIC_CHILD";

/// Runs in a child process of its own (the panic hook is process-wide): a panic inside the
/// parser scope is silent and counted; one outside it still reaches the hook and prints.
#[test]
fn caught_parser_panics_are_silent_and_counted_while_others_still_print() {
    if std::env::var_os(PANIC_CHILD).is_some() {
        let before = permit::gate::shell::caught_parser_panics();
        let caught = permit::gate::shell::catch_parser_panic(|| -> u32 { panic!("inside the parser scope") });
        assert!(caught.is_none());
        assert_eq!(permit::gate::shell::catch_parser_panic(|| 7), Some(7));
        assert_eq!(permit::gate::shell::caught_parser_panics(), before + 1);
        let outside = std::panic::catch_unwind(|| panic!("outside the parser scope"));
        assert!(outside.is_err());
        println!("child done");
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "caught_parser_panics_are_silent_and_counted_while_others_still_print", "--nocapture"])
        .env(PANIC_CHILD, "1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && stdout.contains("child done"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("inside the parser scope"), "a caught parser panic printed:\n{stderr}");
    assert!(stderr.contains("outside the parser scope"), "a panic elsewhere must still print:\n{stderr}");
}
