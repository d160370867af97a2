//! Agent integrations: `permit hook claude-code` (and `codex`), the `PreToolUse` /
//! `PermissionRequest` command hook, and `permit replay`, which turns real sessions into eval
//! cases.
//!
//! The hook reads the hook's JSON on stdin, reads the session transcript it points at (see
//! [`transcript`]), builds a decide request for the pending call and decides it, through a
//! running `permit serve` (`--server`) or in-process, then prints the agent's answer shape.
//!
//! It decides nothing itself and never lets a call through on failure: unreadable input, an
//! unreadable transcript, a server that is down or slow, a config that does not load: every
//! failure answers `ask` with the reason (for `PermissionRequest`: no verdict, so the agent's
//! own dialog shows), and the process exits 0 so the agent reads the answer rather than a crash.

pub mod replay;
pub mod transcript;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::decision::Decision;
use crate::engine::Engine;
use crate::request::{CallDecision, DecideRequest, DecideResponse};

/// Where the decision is made.
#[derive(Clone, Debug)]
pub struct HookSettings {
    pub config: Option<PathBuf>,
    /// A running `permit serve`, e.g. `http://127.0.0.1:8787`.
    pub server: Option<String>,
    /// Environment variable holding the server's bearer token.
    pub token_env: String,
    /// The whole hook's budget; stay well inside the agent's hook timeout (60 s by default).
    pub timeout: Duration,
    /// Print the request permit would decide instead of deciding it.
    pub dry_run: bool,
}

/// The fields of a hook input permit reads (Claude Code and Codex send more; they are ignored).
#[derive(Debug, Deserialize)]
struct HookInput {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    transcript_path: Option<PathBuf>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    hook_event_name: Option<String>,
    tool_name: String,
    #[serde(default)]
    tool_input: Value,
    #[serde(default)]
    tool_use_id: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    PreToolUse,
    PermissionRequest,
}

/// The verdict in the agent's words.
fn answer(event: Event, decision: Decision, reason: &str) -> String {
    let value = match event {
        Event::PreToolUse => json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": decision.as_str(),
                "permissionDecisionReason": reason,
            }
        }),
        Event::PermissionRequest => match decision {
            Decision::Allow => json!({
                "hookSpecificOutput": { "hookEventName": "PermissionRequest", "decision": { "behavior": "allow" } }
            }),
            Decision::Deny => json!({
                "hookSpecificOutput": {
                    "hookEventName": "PermissionRequest",
                    "decision": { "behavior": "deny", "message": reason },
                }
            }),
            // No verdict: the agent shows its own permission dialog to the person.
            Decision::Ask => json!({}),
        },
    };
    value.to_string()
}

fn failure(event: Event, what: &str) -> String {
    answer(event, Decision::Ask, &format!("permit could not decide ({what}), so a person decides"))
}

fn reason_of(decision: &CallDecision) -> String {
    match (&decision.reason, decision.decision) {
        (Some(reason), _) => format!("permit: {reason}"),
        (None, Decision::Allow) => format!(
            "permit: allowed by the {} ({})",
            crate::server::metrics::stage_name(decision.stage),
            decision.reason_code.as_deref().unwrap_or("no reason code")
        ),
        (None, _) => "permit: a person should decide".to_owned(),
    }
}

/// Runs the hook on `stdin`; returns what to print. Never fails.
pub fn run(stdin: &str, settings: &HookSettings) -> String {
    let started = Instant::now();
    let input: HookInput = match serde_json::from_str(stdin) {
        Ok(input) => input,
        Err(error) => return failure(Event::PreToolUse, &format!("the hook input is not valid: {error}")),
    };
    let event = match input.hook_event_name.as_deref() {
        Some("PermissionRequest") => Event::PermissionRequest,
        Some("PreToolUse") | None => Event::PreToolUse,
        // Installed on an event permit does not judge: no opinion.
        Some(_) => return "{}".to_owned(),
    };
    let request = match build_request(&input) {
        Ok(request) => request,
        Err(what) => return failure(event, &what),
    };
    if settings.dry_run {
        return serde_json::to_string_pretty(&request).unwrap_or_default();
    }
    let deadline = started + settings.timeout;
    match decide(&request, settings, deadline) {
        Ok(decision) => answer(event, decision.decision, &reason_of(&decision)),
        Err(what) => failure(event, &what),
    }
}

/// The decide request for the pending call, with the session up to it.
fn build_request(input: &HookInput) -> Result<DecideRequest, String> {
    let call_id = input.tool_use_id.clone().unwrap_or_else(|| "pending".to_owned());
    let session = match &input.transcript_path {
        Some(path) if !path.as_os_str().is_empty() => transcript::read(path)?,
        _ => transcript::SessionTranscript::default(),
    };
    let events = transcript::up_to_call(&session.events, &call_id);
    let tool_input = match &input.tool_input {
        Value::Object(map) => map.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(format!(
                "`tool_input` is not an object: {}",
                other.to_string().chars().take(60).collect::<String>()
            ));
        }
    };
    let request = json!({
        "session_id": input.session_id.clone().or(session.session_id),
        "cwd": input.cwd.clone().or(session.cwd),
        "transcript": events,
        "pending": [{ "id": call_id, "name": input.tool_name, "input": tool_input }],
    });
    // Through the same strict parser as every request, so ids and fields are checked.
    DecideRequest::from_json(&request.to_string()).map_err(|error| format!("the call cannot be judged: {error}"))
}

fn decide(request: &DecideRequest, settings: &HookSettings, deadline: Instant) -> Result<CallDecision, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    let remaining = deadline.saturating_duration_since(Instant::now());
    let response: DecideResponse = match &settings.server {
        Some(server) => runtime.block_on(ask_server(server, request, &settings.token_env, remaining))?,
        None => {
            let config = Config::load(settings.config.as_deref()).map_err(|error| format!("the config: {error}"))?;
            let engine = Engine::new(config).map_err(|error| format!("the engine: {error}"))?;
            let deadline = tokio::time::Instant::from_std(deadline);
            let records = runtime.block_on(engine.pipeline().decide_within(request, Some(deadline)));
            DecideResponse { decisions: records.into_iter().map(|record| record.decision).collect() }
        }
    };
    response.decisions.into_iter().next().ok_or_else(|| "the response holds no decision".to_owned())
}

async fn ask_server(
    server: &str,
    request: &DecideRequest,
    token_env: &str,
    timeout: Duration,
) -> Result<DecideResponse, String> {
    let client =
        reqwest::Client::builder().timeout(timeout).build().map_err(|error| format!("the HTTP client: {error}"))?;
    let url = format!("{}/v1/decide", server.trim_end_matches('/'));
    let mut builder = client
        .post(&url)
        .header("content-type", "application/json")
        .body(serde_json::to_string(request).map_err(|error| format!("the request cannot be sent: {error}"))?);
    if let Some(token) = std::env::var(token_env).ok().filter(|token| !token.is_empty()) {
        builder = builder.bearer_auth(token);
    }
    let response = builder.send().await.map_err(|error| {
        if error.is_timeout() {
            format!("the server at {server} did not answer in time")
        } else {
            format!("the server at {server} is unreachable")
        }
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("the server at {server} answered {status}"));
    }
    response.json().await.map_err(|_| format!("the server at {server} sent an unreadable answer"))
}
