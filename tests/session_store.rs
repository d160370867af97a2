//! Session state shared through Redis: two `permit serve` processes on loopback share one real
//! `redis-server` (started and stopped here, no persistence), with a loopback OpenAI-style
//! review model that denies every call. Checks that the policy holds across replicas (a streak
//! spread over both locks the session, feedback to one unlocks it on the other, concurrent
//! costly calls spend the budget exactly once) and that a Redis outage fails closed and narrowly
//! (gate-only calls unaffected, calls that need the session state `ask` with
//! `session_store_unavailable`, recovery once Redis is back).
//!
//! Needs `redis-server` (Debian package `redis-server`); without it the tests fail and say to
//! run `scripts/install-test-deps.sh`. Nothing here times anything: waits are generous bounds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use serde_json::{Value, json};

/// How long anything here may take before the test gives up: far beyond what a loaded 2-core
/// machine needs, and never asserted as a duration.
const PATIENCE: Duration = Duration::from_secs(60);

fn scratch(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("permit-session-store-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A real `redis-server` on a loopback port, without persistence, killed when dropped.
struct Redis {
    port: u16,
    directory: PathBuf,
    child: Option<Child>,
}

impl Redis {
    fn start(name: &str) -> Redis {
        let mut redis = Redis { port: free_port(), directory: scratch(&format!("redis-{name}")), child: None };
        redis.launch();
        redis
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn launch(&mut self) {
        let port = self.port.to_string();
        let child = Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--dir", self.directory.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => panic!(
                "`redis-server` is not installed; these tests need a real Redis: run scripts/install-test-deps.sh"
            ),
            Err(error) => panic!("cannot start `redis-server`: {error}"),
        };
        self.child = Some(child);
        let started = Instant::now();
        while !self.answers_ping() {
            assert!(started.elapsed() < PATIENCE, "redis-server on port {port} never answered PING");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut answer = [0u8; 7];
        stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
    }

    /// SIGKILL: Redis vanishes mid-run, as a crashed server would.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// Starts again on the same port, empty (no persistence).
    fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// An OpenAI-compatible review model on loopback that denies every call it is asked about
/// (text style: reasoning, then the JSON answer on its last line). Returns its base URL and
/// the number of requests it answered.
async fn denying_model() -> (String, Arc<Mutex<usize>>) {
    let answered = Arc::new(Mutex::new(0usize));
    let counter = answered.clone();
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "judge",
        "choices": [{ "index": 0,
            "message": { "role": "assistant", "content": "The user asked for none of this.\n{\"verdict\": \"deny_destructive\"}" },
            "logprobs": null, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912 }
    });
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let answer = answer.clone();
            let counter = counter.clone();
            async move {
                *counter.lock().unwrap() += 1;
                axum::Json(answer)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/v1"), answered)
}

/// One replica's config: the shared Redis, the denying review, a costly tool.
fn replica_config(directory: &Path, name: &str, redis_url: &str, model_url: &str, costly_budget: u32) -> PathBuf {
    let text = format!(
        r#"[reversibility]
costly_budget_per_session = {costly_budget}

[[tools.define]]
name = "create_vm"
read_only = false
destructive = false
open_world = false
reversibility = "costly"

[session]
store = "redis"
redis_url = "{redis_url}"
key_prefix = "permit-test:"
timeout_ms = 2000
connect_timeout_ms = 2000

[review]
timeout_ms = 30000
on_error = "ask"
[review.model]
backend = "openai"
base_url = "{model_url}"
model = "judge"
style = "text"
[review.model.http]
request_timeout_ms = 30000
max_attempts = 1
"#
    );
    let path = directory.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A `permit serve` process on a free loopback port. Its stderr is drained on a thread, so its
/// warnings (one per failed Redis call) can never fill the pipe and stall it.
struct Replica {
    child: Child,
    base: String,
    stderr: Arc<Mutex<String>>,
}

impl Replica {
    fn start(config: &Path) -> Replica {
        let mut child = Command::new(env!("CARGO_BIN_EXE_permit"))
            .args(["serve", "--config", config.to_str().unwrap(), "--bind", "127.0.0.1:0"])
            .env_remove("PERMIT_CONFIG")
            .env_remove("PERMIT_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let address = line
            .trim()
            .strip_prefix("permit: listening on http://")
            .unwrap_or_else(|| panic!("permit serve did not start: {line}"))
            .to_owned();
        let collected = Arc::new(Mutex::new(String::new()));
        let sink = collected.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).is_ok_and(|read| read > 0) {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Replica { child, base: format!("http://{address}"), stderr: collected }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGTERM; the replica must exit 0 (no panic) and say so.
    fn stop(mut self) -> String {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
        assert_eq!(self.child.wait().unwrap().code(), Some(0), "the replica exits cleanly");
        let started = Instant::now();
        loop {
            let text = self.stderr.lock().unwrap().clone();
            if text.contains("permit: stopped") || started.elapsed() > PATIENCE {
                assert!(!text.contains("panicked"), "{text}");
                return text;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(PATIENCE).build().unwrap()
}

fn call(session: &str, id: &str, name: &str, input: Value) -> String {
    json!({
        "session_id": session,
        "cwd": "/workspace",
        "transcript": [{"type": "user", "text": "tidy up the build output"}],
        "pending": [{"id": id, "name": name, "input": input}]
    })
    .to_string()
}

/// A call the gate sends to the classifier (the review model denies it).
fn classified(session: &str) -> String {
    call(session, "c", "Bash", json!({"command": "rm -rf build"}))
}

/// A call the gate settles alone.
fn gate_only(session: &str) -> String {
    call(session, "g", "Bash", json!({"command": "ls"}))
}

fn costly(session: &str, id: &str) -> String {
    call(session, id, "create_vm", json!({"name": id}))
}

/// The one decision of a single-call request.
async fn decide(client: &reqwest::Client, replica: &Replica, body: String) -> Value {
    let response = client
        .post(replica.url("/v1/decide"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut answer: Value = response.json().await.unwrap();
    answer["decisions"][0].take()
}

fn summary(decision: &Value) -> (String, String, String) {
    let text = |field: &str| decision[field].as_str().unwrap_or("-").to_owned();
    (text("decision"), text("stage"), text("reason_code"))
}

fn triple(decision: &str, stage: &str, code: &str) -> (String, String, String) {
    (decision.to_owned(), stage.to_owned(), code.to_owned())
}

async fn feedback(client: &reqwest::Client, replica: &Replica, session: &str) -> reqwest::StatusCode {
    client
        .post(replica.url(&format!("/v1/sessions/{session}/feedback")))
        .header("content-type", "application/json")
        .body(r#"{"call_id": "c", "decision": "allow", "note": "approved by a person"}"#)
        .send()
        .await
        .unwrap()
        .status()
}

async fn metrics(client: &reqwest::Client, replica: &Replica) -> String {
    client.get(replica.url("/metrics")).send().await.unwrap().text().await.unwrap()
}

/// Sums the samples of `name` in an OpenMetrics text.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(name) && !line.starts_with('#'))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_enforce_one_policy_through_redis() {
    let redis = Redis::start("policy");
    let (model_url, _) = denying_model().await;
    let directory = scratch("policy");
    let a = Replica::start(&replica_config(&directory, "a", &redis.url(), &model_url, 5));
    let b = Replica::start(&replica_config(&directory, "b", &redis.url(), &model_url, 5));
    let client = client();

    // Three denials spread over both replicas lock the session on both.
    for replica in [&a, &b, &a] {
        let decision = decide(&client, replica, classified("spread")).await;
        assert_eq!(summary(&decision), triple("deny", "review", "deny_destructive"));
    }
    for replica in [&b, &a] {
        let decision = decide(&client, replica, classified("spread")).await;
        assert_eq!(summary(&decision), triple("ask", "session", "session_denial_limit"));
    }
    // Another session is untouched, and gate-only calls of the locked one too.
    assert_eq!(summary(&decide(&client, &b, classified("other")).await).0, "deny");
    assert_eq!(summary(&decide(&client, &b, gate_only("spread")).await), triple("allow", "gate", "known_safe_command"));

    // Feedback to one replica unlocks the session on the other.
    assert_eq!(feedback(&client, &a, "spread").await, 200);
    let decision = decide(&client, &b, classified("spread")).await;
    assert_eq!(summary(&decision), triple("deny", "review", "deny_destructive"), "the review judges again");

    // A budget of 5 costly calls, spent by 24 concurrent requests over both replicas: exactly 5
    // are allowed, whatever the interleaving.
    let requests = (0..24).map(|index| {
        let client = client.clone();
        let url = if index % 2 == 0 { a.url("/v1/decide") } else { b.url("/v1/decide") };
        async move {
            let response = client
                .post(url)
                .header("content-type", "application/json")
                .body(costly("budget", &format!("vm{index}")))
                .send()
                .await
                .unwrap();
            let mut answer: Value = response.json().await.unwrap();
            summary(&answer["decisions"][0].take())
        }
    });
    let answers = futures_util::future::join_all(requests).await;
    let allowed = answers.iter().filter(|answer| answer.0 == "allow").count();
    let exhausted =
        answers.iter().filter(|answer| **answer == triple("ask", "gate", "costly_budget_exhausted")).count();
    assert_eq!((allowed, exhausted), (5, 19), "{answers:?}");
    // Spent for good: one more on either replica is refused.
    for replica in [&a, &b] {
        assert_eq!(summary(&decide(&client, replica, costly("budget", "late")).await).2, "costly_budget_exhausted");
    }

    // Keys expire: every key this test wrote carries the session TTL.
    let mut connection = std::net::TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    connection.write_all(b"TTL permit-test:costly:budget\r\n").unwrap();
    let mut reply = [0u8; 16];
    let read = connection.read(&mut reply).unwrap();
    let ttl: i64 = String::from_utf8_lossy(&reply[1..read]).trim().parse().unwrap();
    assert!((1..=86_400).contains(&ttl), "TTL {ttl}");

    // `/readyz` reports the store.
    let ready: Value = client.get(a.url("/readyz")).send().await.unwrap().json().await.unwrap();
    let check = ready["checks"].as_array().unwrap().iter().find(|check| check["name"] == "session store").unwrap();
    assert_eq!((check["store"].as_str(), check["ok"].as_bool()), (Some("redis"), Some(true)), "{ready}");

    a.stop();
    b.stop();
    let _ = std::fs::remove_dir_all(&directory);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_fails_closed_narrowly_and_recovers() {
    let mut redis = Redis::start("outage");
    let (model_url, model_calls) = denying_model().await;
    let directory = scratch("outage");
    let a = Replica::start(&replica_config(&directory, "a", &redis.url(), &model_url, 5));
    let b = Replica::start(&replica_config(&directory, "b", &redis.url(), &model_url, 5));
    let client = client();
    assert_eq!(summary(&decide(&client, &a, classified("s")).await).0, "deny", "working before the outage");

    redis.kill();
    let asked_before = *model_calls.lock().unwrap();
    for replica in [&a, &b] {
        // The gate's own answers stand.
        assert_eq!(
            summary(&decide(&client, replica, gate_only("s")).await),
            triple("allow", "gate", "known_safe_command")
        );
        // A call that needs the session's state goes to a person, with its own reason code.
        let decision = decide(&client, replica, classified("s")).await;
        assert_eq!(summary(&decision), triple("ask", "session", "session_store_unavailable"));
        assert!(decision["reason"].as_str().unwrap().starts_with("permit needs a person"), "{decision}");
        let decision = decide(&client, replica, costly("s", "vm")).await;
        assert_eq!(summary(&decision), triple("ask", "gate", "session_store_unavailable"));
        // Feedback cannot reset what cannot be written.
        assert_eq!(feedback(&client, replica, "s").await, 503);
        // Not ready, and the metrics count the errors.
        let ready = client.get(replica.url("/readyz")).send().await.unwrap();
        assert_eq!(ready.status(), 503);
        let ready: Value = ready.json().await.unwrap();
        let check = ready["checks"].as_array().unwrap().iter().find(|check| check["name"] == "session store").unwrap();
        assert_eq!(check["ok"], false, "{ready}");
        let text = metrics(&client, replica).await;
        assert!(metric_sum(&text, "permit_session_store_errors_total") >= 3.0, "{text}");
        assert!(text.contains("permit_session_store_latency_seconds_count"), "{text}");
    }
    assert_eq!(*model_calls.lock().unwrap(), asked_before, "no model is asked while the session is unread");

    // Redis comes back (empty): both replicas reconnect by themselves.
    redis.restart();
    for replica in [&a, &b] {
        let started = Instant::now();
        loop {
            let decision = decide(&client, replica, classified("s")).await;
            if summary(&decision) == triple("deny", "review", "deny_destructive") {
                break;
            }
            assert_eq!(summary(&decision).2, "session_store_unavailable", "{decision}");
            assert!(started.elapsed() < PATIENCE, "the replica never reconnected to Redis");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(feedback(&client, replica, "s").await, 200);
        // `/readyz` reuses its store check for up to 2 s, so it turns 200 a little later.
        while client.get(replica.url("/readyz")).send().await.unwrap().status() != 200 {
            assert!(started.elapsed() < PATIENCE, "`/readyz` never reported Redis back");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    for replica in [a, b] {
        let log = replica.stop();
        assert!(!log.contains("panicked"), "{log}");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

/// `[session]` store settings are checked when the config loads; a URL's password is never
/// echoed in the message.
#[test]
fn the_store_setting_is_checked_at_load() {
    let load = |session: &str| {
        permit::config::Config::from_toml_str("test.toml", &format!("[session]\n{session}\n")).map(|_| ())
    };
    assert!(load("").is_ok(), "memory by default");
    assert!(load("store = \"redis\"\nredis_url = \"redis://127.0.0.1:6379/0\"").is_ok());
    for (session, expected) in [
        ("store = \"redis\"", "no `session.redis_url` is set"),
        ("redis_url = \"redis://127.0.0.1:6379\"", "`session.store` is `memory`"),
        ("store = \"redis\"\nredis_url = \"rediss://h:1\"", "TLS (`rediss://`) is not built in"),
        ("store = \"redis\"\nredis_url = \"http://:hunter2@h:1\"", "must start with `redis://` or `unix://`"),
        ("store = \"redis\"\nredis_url = \"redis://h:1\"\ntimeout_ms = 0", "`session.timeout_ms`"),
        ("timeout_ms = 60000", "must be less than `server.decision_timeout_ms`"),
        ("key_prefix = \"\"", "`session.key_prefix`"),
        ("store = \"sql\"", "unknown variant `sql`"),
    ] {
        let error = load(session).unwrap_err().to_string();
        assert!(error.contains(expected), "{session}: {error}");
        assert!(!error.contains("hunter2"), "{error}");
    }
}
