//! Decides the hook's call: the gate in the hook process first, then a running `permit serve`
//! or, in-process, the classifier only when the gate sends the call to it.
//!
//! What it decides, in order:
//! 1. **The local gate**, from `--config` / `$PERMIT_CONFIG`, else the built-in tables (no model
//!    is loaded). Its `deny` is answered at once: it needs neither the transcript nor a server,
//!    so a hard deny stays a deny whatever else fails. A config that does not load falls back to
//!    the built-in tables for this step only.
//! 2. **With `--server`**, the server is the authority for everything else: its operator rules may
//!    be stricter than the hook's config, so a local `allow` does not skip it, unless the operator
//!    states that `--config` is the very file the server runs (`--same-config-as-server`); then a
//!    local `allow` or `ask` is final (a call on the costly budget still goes to the server,
//!    which keeps the budget). The final answer is the stricter of the server's and the local
//!    gate's (a local `ask` is a floor).
//! 3. **In-process**, a call the gate settles (`allow`, `ask`) needs no model and no transcript;
//!    the engine, and with it the model, is loaded only for a call the gate sends to the
//!    classifier.
//!
//! It never turns a failure into `allow`: a hook input field it could not read, a config that does
//! not load, an unreadable transcript, a server that is down, slow, refuses the token or answers
//! something unreadable, an engine that cannot load: the local gate's `deny` stands and
//! everything else is `ask` (stage `error`, reason code `hook_error`) with the reason named.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::HookSettings;
use super::answer::Host;
use super::input::HookInput;
use super::transcript::{self, PendingCallRef, SessionTranscript, TranscriptError};
use crate::classifier::budget::fresh_budget;
use crate::classifier::finalize::{Classifier, finalize};
use crate::config::{Config, ConfigError};
use crate::decision::{Decision, GateAction, ReasonCode, Tier};
use crate::engine::Engine;
use crate::fact_check::{FactChecker, recheck_with_facts};
use crate::gate::{CallContext, Gate, GateOutcome};
use crate::request::{
    CallDecision, DecideRequest, DecideResponse, KnownEvent, PendingCall, RequestError, Reversibility, Stage,
    TranscriptEvent,
};

/// Why the hook could not decide; every variant ends in `ask` (or the local gate's `deny`).
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("the hook input names no `tool_name`")]
    NoToolName,
    #[error("the hook input could not be read fully: {0}")]
    Input(String),
    #[error("the config: {0}")]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    #[error("the call cannot be judged: {0}")]
    Request(#[from] RequestError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the classifier cannot be loaded: {0}")]
    Engine(String),
    #[error("the HTTP client cannot be built: {0}")]
    Client(String),
    #[error("the server at {0} is unreachable")]
    Unreachable(String),
    #[error("the server at {0} did not answer in time")]
    ServerTimeout(String),
    #[error("the server at {server} answered {status}")]
    ServerStatus { server: String, status: String },
    #[error("the server at {0} sent an unreadable answer")]
    ServerAnswer(String),
}

/// The pending call as permit's request names it. `PermissionRequest` carries no `tool_use_id`.
pub fn pending_call(input: &HookInput) -> PendingCall {
    PendingCall {
        id: input.tool_use_id.clone().unwrap_or_else(|| "pending".to_owned()),
        name: input.tool_name.clone().unwrap_or_default(),
        input: input.tool_input.clone(),
        annotations: None,
    }
}

/// The `ask` a failure becomes.
fn failure(call: &PendingCall, tier: Tier, error: &HookError) -> CallDecision {
    CallDecision {
        id: call.id.clone(),
        decision: Decision::Ask,
        stage: Stage::Error,
        tier,
        reason: Some(format!("permit could not decide ({error}), so a person decides")),
        reason_code: Some(ReasonCode::HookError),
        p_allow: None,
        rules: Vec::new(),
    }
}

/// The stricter of two decisions; on a tie, `first` (the authority's) is kept.
fn stricter(first: CallDecision, second: CallDecision) -> CallDecision {
    if second.decision > first.decision { second } else { first }
}

/// The gate the hook runs itself, and the config it came from.
struct LocalGate {
    config: Config,
    gate: Gate,
}

fn local_gate(path: Option<&Path>) -> Result<LocalGate, ConfigError> {
    // `Config::load` reads the file only; models are built by `Engine::new`, never here.
    let config = Config::load(path)?;
    let gate = Gate::new(&config).map_err(|error| ConfigError::Invalid {
        path: path.map(|path| path.display().to_string()).unwrap_or_else(|| "built-in defaults".to_owned()),
        message: error.to_string(),
    })?;
    Ok(LocalGate { config, gate })
}

/// The built-in tables, for the deny check when the configured gate cannot be built.
fn built_in_gate() -> Option<LocalGate> {
    let config = Config::default();
    Gate::new(&config).ok().map(|gate| LocalGate { config, gate })
}

/// The gate's outcome as the pipeline records it (with a refusing budget's finding), and the
/// local decision from [`finalize`]. A hook process starts with a fresh budget, so only a
/// budget of zero turns a costly call into `ask`.
///
/// The hook runs beside the agent, so when the gate's refusal names facts about the machine
/// (no git hooks, regular files, a plain tree; see [`crate::gate::facts`]) it checks them
/// there and judges the call again with those that hold, unless the session may have work
/// still running that could change the files after the check ([`work_may_still_run`]). A fact
/// that cannot be checked does not hold; a hard deny is never judged again.
fn evaluate(
    local: &LocalGate,
    call: &PendingCall,
    input: &HookInput,
    host: Host,
    deadline: Instant,
) -> (GateOutcome, CallDecision) {
    let context = CallContext::at(input.cwd.as_deref());
    let mut outcome = local.gate.evaluate(call, context);
    if local.config.workspace.check_facts
        && outcome.action != GateAction::Deny
        && !outcome.needs.is_empty()
        && !work_may_still_run(input, host, &local.gate)
    {
        outcome = recheck_with_facts(&local.gate, call, context, &FactChecker::on_this_machine(deadline), outcome);
    }
    let budget =
        fresh_budget(local.config.reversibility.costly_budget_per_session, input.session_id.as_deref(), &outcome);
    let decision = finalize(call, &outcome, &budget, &Classifier::NotConfigured);
    (budget.as_recorded(&outcome), decision)
}

/// Codex runs `exec_command` in `cwd` joined with the call's `workdir`, with the `shell` and
/// sandbox settings the call asked for, but its hook payload carries only the command. The
/// rollout records the call with all its arguments, so for a shell call every argument found
/// there (by the call's id) that the payload lacks is added, and the gate judges them: the
/// directory (relative paths are judged where they run), and fields such as `shell` and
/// `sandbox_permissions`, which are an allowlist there. Red-team rounds 41 and 42: `local_shell`
/// records its directory as `working_directory`, and `exec_command`'s `shell` (a program the
/// agent chose) was dropped. A rollout that cannot be read, or has no such call yet, changes
/// nothing (documented limit).
fn codex_rollout_arguments(input: &HookInput, call: &mut PendingCall) {
    if !call.input.contains_key("command") {
        return;
    }
    let (Some(path), Some(id)) = (input.transcript_path.as_deref(), input.tool_use_id.as_deref()) else {
        return;
    };
    let Ok(session) = super::rollout::read(path) else { return };
    let recorded = session.events.iter().rev().find_map(|event| match event {
        TranscriptEvent::Known(KnownEvent::ToolCall { id: call_id, input, .. }) if call_id == id => Some(input),
        _ => None,
    });
    let Some(recorded) = recorded else { return };
    for (key, value) in recorded {
        // The command itself is the payload's; the rest is what the payload dropped.
        if value.is_null() || matches!(key.as_str(), "cmd" | "command") {
            continue;
        }
        let key = if key == "working_directory" { "workdir" } else { key.as_str() };
        call.input.entry(key.to_owned()).or_insert_with(|| value.clone());
    }
}

/// Decides the call. Never fails: a failure is an `ask` naming it, or the local gate's `deny`.
pub fn decide(input: &HookInput, settings: &HookSettings, deadline: Instant) -> CallDecision {
    let mut call = pending_call(input);
    if settings.host == Host::Codex {
        codex_rollout_arguments(input, &mut call);
    }
    if input.tool_name.is_none() {
        return failure(&call, Tier::High, &HookError::NoToolName);
    }
    // 1. The local gate. A config that does not load still gets the built-in tables' deny.
    let (local, config_error) = match local_gate(settings.config.as_deref()) {
        Ok(local) => (local, None),
        Err(error) => match built_in_gate() {
            Some(local) => (local, Some(HookError::Config(error))),
            None => return failure(&call, Tier::High, &HookError::Config(error)),
        },
    };
    let (outcome, local_decision) = evaluate(&local, &call, input, settings.host, deadline);
    if outcome.action == GateAction::Deny {
        return local_decision;
    }
    if let Some(error) = config_error {
        return failure(&call, outcome.tier, &error);
    }
    if !input.problems.is_empty() {
        return failure(&call, outcome.tier, &HookError::Input(input.problems.join("; ")));
    }
    match &settings.server {
        Some(server) => {
            // 2. The server decides, unless the local config is the server's and the gate settled it.
            let settled_locally = settings.same_config_as_server
                && settings.config.is_some()
                && matches!(outcome.action, GateAction::Allow | GateAction::Ask)
                && outcome.reversibility != Some(Reversibility::Costly);
            if settled_locally {
                return local_decision;
            }
            let floor = (outcome.action == GateAction::Ask).then_some(local_decision);
            let server_decision = build_request(input, &call, settings.host)
                .and_then(|request| ask_server(server, &request, &settings.token_env, deadline));
            match server_decision {
                Ok(decision) => match floor {
                    Some(floor) => stricter(decision, floor),
                    None => decision,
                },
                Err(error) => failure(&call, outcome.tier, &error),
            }
        }
        // 3. In-process: the gate settles what it can without a model.
        None if outcome.action != GateAction::Classify => local_decision,
        None if local.config.screen.is_none() && local.config.review.is_none() => local_decision,
        None => match classify(input, &call, settings.host, local.config, deadline) {
            Ok(decision) => decision,
            Err(error) => failure(&call, outcome.tier, &error),
        },
    }
}

/// Whether the session may have work still running beside this call, from the host's
/// transcript ([`crate::fact_check::work_may_still_run`]). A transcript that is missing or
/// unreadable may hide any, so it counts as yes.
fn work_may_still_run(input: &HookInput, host: Host, gate: &Gate) -> bool {
    let Some(path) = input.transcript_path.as_deref() else { return true };
    let Ok(session) = read_transcript(Some(path), host) else { return true };
    let cwd = input.cwd.as_deref().or(session.cwd.as_deref());
    crate::fact_check::work_may_still_run(&session.events, input.tool_use_id.as_deref(), |call| {
        gate.evaluate(call, CallContext::at(cwd)).action == GateAction::Allow
    })
}

/// The session transcript the host's hook input points at, in the host's format.
fn read_transcript(path: Option<&Path>, host: Host) -> Result<SessionTranscript, TranscriptError> {
    match (path, host) {
        (None, _) => Ok(SessionTranscript::default()),
        (Some(path), Host::ClaudeCode) => transcript::read(path),
        (Some(path), Host::Codex) => super::rollout::read(path),
    }
}

/// The decide request for the pending call, with the session up to it.
pub fn build_request(input: &HookInput, call: &PendingCall, host: Host) -> Result<DecideRequest, HookError> {
    let session = read_transcript(input.transcript_path.as_deref(), host)?;
    let events = transcript::up_to_pending(
        &session.events,
        PendingCallRef { id: input.tool_use_id.as_deref(), name: &call.name, input: &call.input },
    );
    let request = json!({
        "session_id": input.session_id.clone().or(session.session_id),
        "cwd": input.cwd.clone().or(session.cwd),
        "transcript": events,
        "pending": [{ "id": call.id, "name": call.name, "input": Value::Object(call.input.clone()) }],
    });
    // Through the same strict parser as every request, so ids and fields are checked.
    Ok(DecideRequest::from_json(&request.to_string())?)
}

fn runtime() -> Result<tokio::runtime::Runtime, HookError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(HookError::Runtime)
}

/// In-process classification: the engine (and its model) is built for this call only.
fn classify(
    input: &HookInput,
    call: &PendingCall,
    host: Host,
    config: Config,
    deadline: Instant,
) -> Result<CallDecision, HookError> {
    let request = build_request(input, call, host)?;
    let engine = Engine::new(config).map_err(|error| HookError::Engine(error.to_string()))?;
    let runtime = runtime()?;
    let deadline = tokio::time::Instant::from_std(deadline);
    let records = runtime.block_on(engine.records_within(&request, deadline));
    records
        .into_iter()
        .next()
        .map(|record| record.decision)
        .ok_or_else(|| HookError::Engine("the pipeline returned no decision".to_owned()))
}

/// Asks a running `permit serve` about the request's one call.
fn ask_server(
    server: &str,
    request: &DecideRequest,
    token_env: &str,
    deadline: Instant,
) -> Result<CallDecision, HookError> {
    let timeout = deadline.saturating_duration_since(Instant::now());
    let runtime = runtime()?;
    let response = runtime.block_on(post_decide(server, request, token_env, timeout))?;
    let expected = request.pending.first().map(|call| call.id.as_str());
    match response.decisions.as_slice() {
        [decision] if Some(decision.id.as_str()) == expected => Ok(decision.clone()),
        _ => Err(HookError::ServerAnswer(server.to_owned())),
    }
}

async fn post_decide(
    server: &str,
    request: &DecideRequest,
    token_env: &str,
    timeout: Duration,
) -> Result<DecideResponse, HookError> {
    let client =
        reqwest::Client::builder().timeout(timeout).build().map_err(|error| HookError::Client(error.to_string()))?;
    let url = format!("{}/v1/decide", server.trim_end_matches('/'));
    let body = serde_json::to_string(request).map_err(|error| HookError::Client(error.to_string()))?;
    let mut builder = client.post(&url).header("content-type", "application/json").body(body);
    if let Some(token) = std::env::var(token_env).ok().filter(|token| !token.is_empty()) {
        builder = builder.bearer_auth(token);
    }
    let response = builder.send().await.map_err(|error| {
        if error.is_timeout() {
            HookError::ServerTimeout(server.to_owned())
        } else {
            HookError::Unreachable(server.to_owned())
        }
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(HookError::ServerStatus { server: server.to_owned(), status: status.to_string() });
    }
    response.json().await.map_err(|error| {
        if error.is_timeout() {
            HookError::ServerTimeout(server.to_owned())
        } else {
            HookError::ServerAnswer(server.to_owned())
        }
    })
}
