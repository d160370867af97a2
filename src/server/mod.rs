//! The HTTP service (`permit serve`): the engine behind axum, with bearer-token auth, body and
//! time limits, load shedding, Prometheus metrics, a JSONL audit log and graceful shutdown.
//!
//! Routes: `POST /v1/decide`, `POST /v1/sessions/{id}/feedback` (a person's decision on a call:
//! resets the session's denial streak), `GET /healthz`, `GET /readyz`, `GET /metrics`.
//!
//! It decides nothing itself. On failure it fails closed and stays up:
//! - bad input is a 4xx with a JSON error naming the field (or the line and column), never a
//!   decision; a body that does not arrive within `server.body_read_timeout_ms` is a 408;
//! - a decision that runs out of time is a normal 200 whose classified calls are `ask` with
//!   stage `timeout`;
//! - admission has two limits, so a model outage never starves decisions the gate settles:
//!   `server.max_concurrency` decision slots for reading-done requests being parsed and gated
//!   (all busy: 503 with `Retry-After`, never queued), and `server.max_model_concurrency` model
//!   slots that a request moves to when some call needs a model (all busy: those calls are
//!   `ask`, reason code `model_busy`, at once; the gate's answers for the others stand);
//! - slow, idle and abandoned connections are bounded in number and time ([`listen`]);
//! - a panic in a handler is a 500 with a generic message; responses never carry internal
//!   error text, tokens or keys.

pub mod audit;
pub mod auth;
pub mod listen;
pub mod metrics;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};

use crate::engine::DecisionRecord;
use crate::engine::Engine;
use crate::request::{DecideRequest, DecideResponse, MAX_ID_BYTES, is_plain_id, parse_object};
use audit::AuditLog;
use auth::Tokens;
use metrics::Metrics;

/// How often the audit log is flushed and fsynced while the service runs.
const AUDIT_FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// How long `/readyz` reuses its model and audit checks. Each check opens a TCP connection to
/// every remote model and fsyncs the audit log: uncached, a flood of 2,245 requests/s filled
/// TIME_WAIT (issue 14). Two seconds is far below any orchestrator's probe period (Kubernetes
/// probes every 10 s by default), so the answer stays fresh where it is used.
const READY_CACHE: Duration = Duration::from_secs(2);
/// How long `/readyz` waits for the audit log's fsync: as long as a model's connection check.
const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest `x-request-id` kept; a longer (or non-printable) one is replaced. Ids from
/// tracing systems are at most 64 characters (W3C trace-parent: 55).
const MAX_REQUEST_ID_BYTES: usize = 128;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on `{address}`: {source}")]
    Bind { address: SocketAddr, source: std::io::Error },
    #[error(transparent)]
    Tokens(#[from] auth::TokenError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    #[error("the server stopped with an error: {0}")]
    Serve(std::io::Error),
}

struct AppState {
    engine: Arc<Engine>,
    tokens: Tokens,
    metrics: Arc<Metrics>,
    audit: Option<AuditLog>,
    deadline: Duration,
    body_limit: usize,
    body_read_timeout: Duration,
    /// Requests whose body is read, while they are parsed, gated and rendered.
    decision_slots: Arc<Semaphore>,
    /// Decide requests waiting on a model.
    model_slots: Arc<Semaphore>,
    max_concurrency: usize,
    max_model_concurrency: usize,
    /// The last `/readyz` model and audit checks, and when they ran.
    ready_cache: tokio::sync::Mutex<Option<(tokio::time::Instant, bool, Vec<serde_json::Value>)>>,
}

/// A bound, not yet running, service.
pub struct Server {
    listener: tokio::net::TcpListener,
    router: Router,
    state: Arc<AppState>,
    grace: Duration,
    limits: listen::Limits,
}

/// Request ids: 16 hex digits, unless the client sent a usable `x-request-id`.
#[derive(Clone, Copy, Default)]
struct MakeId;

impl MakeRequestId for MakeId {
    fn make_request_id<B>(&mut self, _request: &axum::http::Request<B>) -> Option<RequestId> {
        HeaderValue::from_str(&format!("{:016x}", fastrand::u64(..))).ok().map(RequestId::new)
    }
}

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({ "error": { "code": code, "message": message.into() } });
    (status, axum::Json(body)).into_response()
}

fn request_id(headers: &HeaderMap) -> String {
    headers.get("x-request-id").and_then(|value| value.to_str().ok()).unwrap_or("").to_owned()
}

impl Server {
    /// Binds the address in the engine's `[server]` config, loads the tokens and opens the audit
    /// log. Fails (and nothing listens) when any of them cannot be set up.
    pub async fn bind(engine: Engine) -> Result<Self, ServeError> {
        let settings = engine.config().server.clone();
        let tokens = Tokens::load(&settings)?;
        let audit = match &settings.audit_log {
            Some(path) => Some(
                AuditLog::open(path, settings.audit_rotate_bytes, AUDIT_FLUSH_INTERVAL, settings.audit_sync).await?,
            ),
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(settings.bind)
            .await
            .map_err(|source| ServeError::Bind { address: settings.bind, source })?;
        let metrics = Arc::new(Metrics::with_session_store(engine.session_store_metrics()));
        let state = Arc::new(AppState {
            engine: Arc::new(engine),
            tokens,
            metrics,
            audit,
            deadline: Duration::from_millis(settings.decision_timeout_ms),
            body_limit: settings.body_limit_bytes,
            body_read_timeout: Duration::from_millis(settings.body_read_timeout_ms),
            decision_slots: Arc::new(Semaphore::new(settings.max_concurrency)),
            model_slots: Arc::new(Semaphore::new(settings.max_model_concurrency)),
            max_concurrency: settings.max_concurrency,
            max_model_concurrency: settings.max_model_concurrency,
            ready_cache: tokio::sync::Mutex::new(None),
        });
        Ok(Server {
            listener,
            router: router(state.clone()),
            state,
            grace: Duration::from_secs(settings.shutdown_grace_secs),
            limits: listen::Limits {
                max_connections: settings.max_connections,
                header_read_timeout: Duration::from_millis(settings.header_read_timeout_ms),
            },
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, std::io::Error> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes; then stops accepting, lets in-flight requests finish
    /// within the grace period (connections without one close at once), and flushes the audit
    /// log.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let Server { listener, router, state, grace, limits } = self;
        let (stopping, stop) = tokio::sync::watch::channel(false);
        let mut connections = tokio::task::JoinSet::new();
        tokio::select! {
            () = shutdown => {}
            () = listen::accept(&listener, &router, &state.metrics, limits, &stop, &mut connections) => {}
        }
        tracing::info!("shutting down: no new connections; finishing in-flight decisions");
        // Closing the listener refuses new clients, including those still in the accept queue.
        drop(listener);
        let _ = stopping.send(true);
        let drained = tokio::time::timeout(grace, async { while connections.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!("grace period of {} s over; dropping the requests still in flight", grace.as_secs());
            connections.shutdown().await;
        }
        if let Some(audit) = &state.audit
            && let Err(error) = audit.close().await
        {
            tracing::error!("audit log: {error}");
        }
        Ok(())
    }
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}

fn router(state: Arc<AppState>) -> Router {
    let decisions = Router::new()
        .route("/v1/decide", post(decide))
        .route("/v1/sessions/{id}/feedback", post(feedback))
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    let metrics = Router::new()
        .route("/metrics", get(metrics_text))
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(decisions)
        .merge(metrics)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), count_responses))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_panic: Box<dyn std::any::Any + Send>| {
            tracing::error!("a handler panicked");
            error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "permit could not handle this request")
        }))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(middleware::from_fn(trace))
        .layer(SetRequestIdLayer::x_request_id(MakeId))
        .layer(middleware::from_fn(drop_unusable_request_id))
        .with_state(state)
}

/// Whether a client's `x-request-id` is kept: 1 to [`MAX_REQUEST_ID_BYTES`] visible ASCII
/// characters. The id is logged and written to the audit log, so anything else is replaced.
fn usable_request_id(value: &[u8]) -> bool {
    !value.is_empty() && value.len() <= MAX_REQUEST_ID_BYTES && value.iter().all(u8::is_ascii_graphic)
}

/// Removes an unusable `x-request-id` (too long, not printable, or sent twice) before any layer
/// reads it, so one is made instead: a 100 KB id was accepted and logged (issue 14).
async fn drop_unusable_request_id(mut request: Request, next: Next) -> Response {
    let mut ids = request.headers().get_all("x-request-id").iter();
    let usable = match (ids.next(), ids.next()) {
        (Some(id), None) => usable_request_id(id.as_bytes()),
        (None, _) => true,
        (Some(_), Some(_)) => false,
    };
    if !usable {
        request.headers_mut().remove("x-request-id");
    }
    next.run(request).await
}

/// A span per request, carrying its id, so every stage's span and log line names the request.
async fn trace(request: Request, next: Next) -> Response {
    let span = tracing::info_span!(
        "request",
        id = %request_id(request.headers()),
        method = %request.method(),
        path = %request.uri().path()
    );
    tracing::Instrument::instrument(next.run(request), span).await
}

async fn count_responses(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let route = match request.uri().path() {
        "/v1/decide" | "/healthz" | "/readyz" | "/metrics" => request.uri().path().to_owned(),
        path if path.starts_with("/v1/sessions/") => "/v1/sessions/{id}/feedback".to_owned(),
        _ => "other".to_owned(),
    };
    let in_flight = state.metrics.request_started();
    let response = next.run(request).await;
    drop(in_flight);
    state.metrics.response(&route, response.status().as_u16());
    response
}

fn unauthorized() -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, "unauthorized", "a valid bearer token is required");
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

fn authorized(state: &AppState, request: &Request) -> bool {
    state.tokens.accepts(request.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes))
}

async fn authenticate(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if !authorized(&state, &request) {
        return unauthorized();
    }
    next.run(request).await
}

/// A decision slot, taken once the request's body is read (a client that trickles its body
/// holds only its connection); `None` when every slot is busy, and the request is shed.
fn decision_slot(state: &AppState) -> Option<OwnedSemaphorePermit> {
    let slot = state.decision_slots.clone().try_acquire_owned().ok();
    if slot.is_none() {
        state.metrics.shed();
    }
    slot
}

/// The 503 of a request shed because every decision slot is busy.
fn overloaded() -> Response {
    let mut response =
        error(StatusCode::SERVICE_UNAVAILABLE, "overloaded", "every decision slot is busy; retry shortly");
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The body as UTF-8 JSON text, or the 4xx that says what is wrong with it.
async fn json_body(state: &AppState, headers: &HeaderMap, body: Body) -> Result<(axum::body::Bytes, String), Response> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the request as `content-type: application/json`",
        ));
    }
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is over the limit of {} bytes", state.body_limit),
        )
    };
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > state.body_limit as u64) {
        return Err(too_large());
    }
    let reading = tokio::time::timeout(state.body_read_timeout, axum::body::to_bytes(body, state.body_limit)).await;
    let Ok(reading) = reading else {
        let mut response = error(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!("the body did not arrive within {} ms", state.body_read_timeout.as_millis()),
        );
        // The rest of the body may still come; the connection cannot carry another request.
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        return Err(response);
    };
    let bytes = match reading {
        Ok(bytes) => bytes,
        Err(reading) => {
            let over_limit = std::error::Error::source(&reading)
                .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            return Err(if over_limit {
                too_large()
            } else {
                error(StatusCode::BAD_REQUEST, "unreadable_body", "the request body could not be read")
            });
        }
    };
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => return Err(error(StatusCode::BAD_REQUEST, "invalid_request", "the body is not UTF-8")),
    };
    Ok((bytes, text))
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Decides a request under the two admission limits: the gate runs under the request's
/// decision slot; when some call needs a model, the request trades that slot for a model slot
/// and waits on the models there, so a model outage holds model slots only and decisions the
/// gate settles keep their slots (issue 14: 29 of 40 gate-only decisions were shed while a
/// hanging model held the one shared pool). When every model slot is busy, the classified calls
/// are `ask` with `model_busy` at once, and the gate's answers for the other calls stand.
///
/// Returns the slot the request holds now, for the caller to keep until the response is ready
/// (recording the audit lines is part of the request's work).
async fn decide_admitted(
    state: &AppState,
    request: &DecideRequest,
    deadline: tokio::time::Instant,
    decision_slot: OwnedSemaphorePermit,
) -> (Vec<DecisionRecord>, OwnedSemaphorePermit) {
    let engine = &state.engine;
    let gated = engine.gate_request(request, deadline).await;
    if !gated.needs_model() {
        return (engine.finish(request, gated, deadline).await, decision_slot);
    }
    let Ok(model_slot) = state.model_slots.clone().try_acquire_owned() else {
        state.metrics.model_shed();
        return (engine.shed(request, gated), decision_slot);
    };
    drop(decision_slot);
    (engine.finish(request, gated, deadline).await, model_slot)
}

async fn decide(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let (bytes, text) = match json_body(&state, &headers, body).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let Some(slot) = decision_slot(&state) else { return overloaded() };
    let request = match DecideRequest::from_json(&text) {
        Ok(request) => request,
        Err(problem) => return error(StatusCode::BAD_REQUEST, "invalid_request", problem.to_string()),
    };
    let deadline = tokio::time::Instant::now() + state.deadline;
    let (mut records, _slot) = decide_admitted(&state, &request, deadline, slot).await;
    let request_id = request_id(&headers);
    let digest = format!("sha256:{:x}", Sha256::digest(&bytes));
    let time = now_rfc3339();
    // No decision without its record: `allow` becomes `ask` while the log cannot be written,
    // and when this request's lines could not be (`decision` mode waits to know).
    if let Some(audit) = &state.audit {
        if !audit.is_healthy() {
            records.iter_mut().for_each(|record| audit::withhold_allow(&mut record.decision));
        }
        let lines = records
            .iter()
            .map(|record| {
                json!({
                    "time": time,
                    "type": "decision",
                    "request_id": request_id,
                    "session_id": request.session_id,
                    "request_digest": digest,
                    "record": record,
                })
                .to_string()
            })
            .collect();
        if let Err(problem) = audit.record(lines).await {
            tracing::debug!("audit log: {problem}");
            records.iter_mut().for_each(|record| audit::withhold_allow(&mut record.decision));
        }
    }
    for record in &records {
        state.metrics.record(record);
        state.metrics.observe_gate(record.gate_latency_ms / 1_000.0);
    }
    let response = DecideResponse { decisions: records.into_iter().map(|record| record.decision).collect() };
    state.metrics.observe_request(started.elapsed().as_secs_f64());
    (StatusCode::OK, axum::Json(response)).into_response()
}

/// A person's decision on a call, reported by the agent host.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Feedback {
    call_id: String,
    decision: HumanDecision,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Clone, Copy, Debug, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum HumanDecision {
    Allow,
    Deny,
}

async fn feedback(
    State(state): State<Arc<AppState>>,
    Path(session_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !is_plain_id(&session_id) {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("the session id must be at most {MAX_ID_BYTES} letters, digits or `_-.:/@+=`"),
        );
    }
    let (_, text) = match json_body(&state, &headers, body).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let Some(_slot) = decision_slot(&state) else { return overloaded() };
    let feedback: Feedback = match parse_object(&text) {
        Ok(feedback) => feedback,
        Err(problem) => {
            return error(StatusCode::BAD_REQUEST, "invalid_request", format!("invalid feedback {problem}"));
        }
    };
    if !is_plain_id(&feedback.call_id) {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("`call_id` must be at most {MAX_ID_BYTES} letters, digits or `_-.:/@+=`"),
        );
    }
    if let Some(audit) = &state.audit {
        let line = json!({
            "time": now_rfc3339(),
            "type": "feedback",
            "request_id": request_id(&headers),
            "session_id": session_id,
            "call_id": feedback.call_id,
            "decision": feedback.decision,
            "note": feedback.note,
        });
        // Feedback loosens the session (below), so it counts only once it can be recorded.
        if !audit.is_healthy() || audit.write(line.to_string()).await.is_err() {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "audit_unavailable",
                "the audit log cannot be written, so the feedback was not recorded; retry later",
            );
        }
    }
    // Any decision by a person ends the classifier's denial streak: a person is in the loop.
    if let Err(problem) = state.engine.record_human_decision(&session_id).await {
        tracing::debug!("feedback: {problem}");
        let mut response = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "session_store_unavailable",
            "the session store cannot be reached, so the streak was not reset; retry shortly",
        );
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    }
    let body = json!({ "session_id": session_id, "call_id": feedback.call_id, "recorded": true });
    (StatusCode::OK, axum::Json(body)).into_response()
}

async fn healthz() -> Response {
    (StatusCode::OK, axum::Json(json!({ "status": "ok" }))).into_response()
}

/// The costly readiness checks: a connection to each remote model, an fsync of the audit log.
async fn costly_checks(state: &AppState) -> (bool, Vec<serde_json::Value>) {
    let mut checks = Vec::new();
    let mut ready = true;
    for (stage, model) in state.engine.models() {
        let result = model.ready().await;
        ready &= result.is_ok();
        checks.push(json!({
            "name": format!("{stage} model"),
            "model": model.name(),
            "ok": result.is_ok(),
            "detail": result.err(),
        }));
    }
    let store = state.engine.session_store();
    if store.kind() != "memory" {
        // Bounded by `session.timeout_ms` inside the store. Every replica shares this Redis,
        // so while it is down every replica answers 503 here (see docs/deploy.md).
        let result = store.ready().await;
        ready &= result.is_ok();
        checks.push(json!({
            "name": "session store",
            "store": store.kind(),
            "ok": result.is_ok(),
            // The kind only (`timeout`, `unreachable`, `refused`): `/readyz` needs no token,
            // and Redis's own messages stay in the service's log.
            "detail": result.err().map(|error| error.kind()),
        }));
    }
    if let Some(audit) = &state.audit {
        // Bounded like a model's connection check: a disk that hangs is not ready, and must
        // not hold every `/readyz` caller waiting on the cache.
        let ok = matches!(tokio::time::timeout(READY_CHECK_TIMEOUT, audit.sync()).await, Ok(Ok(())));
        ready &= ok;
        checks.push(json!({ "name": "audit log sync", "ok": ok }));
    }
    (ready, checks)
}

/// Ready when the models are reachable and the audit log can be written. The costly checks run
/// at most once per [`READY_CACHE`] (callers meanwhile wait for the one running, rather than
/// each starting their own); the audit log's health flag is read fresh on every call, so a log
/// that stops being writable turns `/readyz` to 503 at once.
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let (costly_ready, costly) = {
        let mut cache = state.ready_cache.lock().await;
        let now = tokio::time::Instant::now();
        match &*cache {
            Some((checked, ready, checks)) if now.duration_since(*checked) < READY_CACHE => (*ready, checks.clone()),
            _ => {
                let (ready, checks) = costly_checks(&state).await;
                *cache = Some((tokio::time::Instant::now(), ready, checks.clone()));
                (ready, checks)
            }
        }
    };
    let mut checks = vec![json!({ "name": "config", "ok": true })];
    checks.extend(costly);
    let mut ready = costly_ready;
    if let Some(audit) = &state.audit {
        let healthy = audit.is_healthy();
        ready &= healthy;
        checks.push(json!({ "name": "audit log", "ok": healthy }));
    }
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(json!({ "ready": ready, "checks": checks }))).into_response()
}

async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    let audit = state.audit.as_ref().map(|audit| metrics::AuditCounts {
        lines_written: audit.lines_written(),
        write_errors: audit.write_errors(),
        lines_dropped: audit.lines_dropped(),
        healthy: audit.is_healthy(),
    });
    let scrape = metrics::Scrape {
        sessions: state.engine.tracked_sessions().unwrap_or(0),
        parser_panics: crate::gate::shell::caught_parser_panics(),
        audit,
        decision_slots_busy: state.max_concurrency.saturating_sub(state.decision_slots.available_permits()),
        model_slots_busy: state.max_model_concurrency.saturating_sub(state.model_slots.available_permits()),
    };
    match state.metrics.render(&scrape) {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            text,
        )
            .into_response(),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the metrics could not be rendered"),
    }
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not_found", "no such route; see README.md, \"The service\"")
}

async fn method_not_allowed() -> Response {
    error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
}

#[cfg(test)]
mod admission_tests {
    use super::*;

    /// Decision slots cannot be held from outside (a request holds one for microseconds), so
    /// this test takes them itself and checks what a request then gets.
    #[tokio::test]
    async fn a_request_finding_every_decision_slot_busy_is_shed_with_retry_after() {
        let config = crate::config::Config::from_toml_str(
            "test.toml",
            "[server]\nbind = \"127.0.0.1:0\"\nmax_concurrency = 2\n",
        )
        .unwrap();
        let server = Server::bind(Engine::new(config).unwrap()).await.unwrap();
        let state = server.state.clone();
        let url = format!("http://{}/v1/decide", server.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        let body = r#"{"cwd": "/workspace", "pending": [{"id": "r", "name": "Read", "input": {"file_path": "/workspace/a"}}]}"#;
        let client = reqwest::Client::new();
        let send = || client.post(&url).header("content-type", "application/json").body(body).send();
        let held = state.decision_slots.clone().try_acquire_many_owned(2).unwrap();
        let shed = send().await.unwrap();
        assert_eq!(shed.status(), 503);
        assert_eq!(shed.headers()["retry-after"], "1");
        drop(held);
        assert_eq!(send().await.unwrap().status(), 200, "the slots are free again");
        let _ = stop.send(());
        task.await.unwrap().unwrap();
    }

    #[test]
    fn request_ids_are_short_and_printable() {
        assert!(usable_request_id(b"trace-42"));
        assert!(usable_request_id(&[b'a'; MAX_REQUEST_ID_BYTES]));
        for unusable in [&b""[..], &[b'a'; MAX_REQUEST_ID_BYTES + 1], b"has space", b"tab\there", "é".as_bytes()] {
            assert!(!usable_request_id(unusable), "{}", String::from_utf8_lossy(unusable));
        }
    }
}
