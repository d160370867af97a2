//! The HTTP service (`permit serve`): the engine behind axum, with bearer-token auth, body and
//! time limits, load shedding, Prometheus metrics, a JSONL audit log and graceful shutdown.
//!
//! Routes: `POST /v1/decide`, `POST /v1/sessions/{id}/feedback` (a person's decision on a call:
//! resets the session's denial streak), `GET /healthz`, `GET /readyz`, `GET /metrics`.
//!
//! It decides nothing itself. On failure it fails closed and stays up:
//! - bad input is a 4xx with a JSON error naming the field, never a decision;
//! - a decision that runs out of time is a normal 200 whose classified calls are `ask` with
//!   stage `timeout`;
//! - when every decision slot is busy, a 503 with `Retry-After` (overload never queues without
//!   bound);
//! - a panic in a handler is a 500 with a generic message; responses never carry internal
//!   error text, tokens or keys.

pub mod audit;
pub mod auth;
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
use tokio::sync::Semaphore;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};

use crate::engine::Engine;
use crate::request::{DecideRequest, DecideResponse};
use audit::AuditLog;
use auth::Tokens;
use metrics::Metrics;

/// How often the audit log is flushed and fsynced while the service runs.
const AUDIT_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on `{address}`: {source}")]
    Bind { address: String, source: std::io::Error },
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
    metrics: Metrics,
    audit: Option<AuditLog>,
    deadline: Duration,
    body_limit: usize,
    slots: Arc<Semaphore>,
}

/// A bound, not yet running, service.
pub struct Server {
    listener: tokio::net::TcpListener,
    router: Router,
    state: Arc<AppState>,
    grace: Duration,
}

/// Request ids: 16 hex digits, unless the client sent an `x-request-id`.
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
            Some(path) => Some(AuditLog::open(path, settings.audit_rotate_bytes, AUDIT_FLUSH_INTERVAL).await?),
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(&settings.bind)
            .await
            .map_err(|source| ServeError::Bind { address: settings.bind.clone(), source })?;
        let state = Arc::new(AppState {
            engine: Arc::new(engine),
            tokens,
            metrics: Metrics::new(),
            audit,
            deadline: Duration::from_millis(settings.decision_timeout_ms),
            body_limit: settings.body_limit_bytes,
            slots: Arc::new(Semaphore::new(settings.max_concurrency)),
        });
        Ok(Server {
            listener,
            router: router(state.clone()),
            state,
            grace: Duration::from_secs(settings.shutdown_grace_secs),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, std::io::Error> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes; then stops accepting, lets in-flight requests finish
    /// within the grace period, and flushes the audit log.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let (stopping, mut stopped) = tokio::sync::watch::channel(false);
        let graceful = async move {
            shutdown.await;
            tracing::info!("shutting down: no new connections; finishing in-flight decisions");
            let _ = stopping.send(true);
        };
        let serve = axum::serve(self.listener, self.router).with_graceful_shutdown(graceful);
        let mut serve = tokio::spawn(std::future::IntoFuture::into_future(serve));
        let grace = self.grace;
        let result = tokio::select! {
            result = &mut serve => result,
            () = async {
                let _ = stopped.wait_for(|stopping| *stopping).await;
                tokio::time::sleep(grace).await;
            } => {
                tracing::warn!("grace period of {} s over; dropping the requests still in flight", grace.as_secs());
                serve.abort();
                Ok(Ok(()))
            }
        };
        if let Some(audit) = &self.state.audit
            && let Err(error) = audit.close().await
        {
            tracing::error!("audit log: {error}");
        }
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(ServeError::Serve(error)),
            Err(error) => Err(ServeError::Serve(std::io::Error::other(error.to_string()))),
        }
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
        .route_layer(middleware::from_fn_with_state(state.clone(), admit));
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
        .with_state(state)
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
    let response = next.run(request).await;
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

/// Auth, then a decision slot: when every slot is busy the request is shed at once.
async fn admit(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if !authorized(&state, &request) {
        return unauthorized();
    }
    let Ok(_slot) = state.slots.clone().try_acquire_owned() else {
        state.metrics.shed();
        let mut response =
            error(StatusCode::SERVICE_UNAVAILABLE, "overloaded", "every decision slot is busy; retry shortly");
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    next.run(request).await
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
    let bytes = match axum::body::to_bytes(body, state.body_limit).await {
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

async fn decide(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let (bytes, text) = match json_body(&state, &headers, body).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let request = match DecideRequest::from_json(&text) {
        Ok(request) => request,
        Err(problem) => return error(StatusCode::BAD_REQUEST, "invalid_request", problem.to_string()),
    };
    let deadline = tokio::time::Instant::now() + state.deadline;
    let records = state.engine.pipeline().decide_within(&request, Some(deadline)).await;
    let request_id = request_id(&headers);
    let digest = format!("sha256:{:x}", Sha256::digest(&bytes));
    let time = now_rfc3339();
    for record in &records {
        state.metrics.record(record);
        state.metrics.observe_gate(record.gate_latency_ms / 1_000.0);
        if let Some(audit) = &state.audit {
            let line = json!({
                "time": time,
                "type": "decision",
                "request_id": request_id,
                "session_id": request.session_id,
                "request_digest": digest,
                "record": record,
            });
            state.metrics.audit_line();
            if let Err(problem) = audit.write(line.to_string()).await {
                tracing::error!("audit log: {problem}");
            }
        }
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

fn valid_id(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 256
        && value.chars().all(|c| c.is_ascii_alphanumeric() || "_-.:/@+=".contains(c))
}

async fn feedback(
    State(state): State<Arc<AppState>>,
    Path(session_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !valid_id(&session_id) {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the session id must be at most 256 letters, digits or `_-.:/@+=`",
        );
    }
    let (_, text) = match json_body(&state, &headers, body).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let mut deserializer = serde_json::Deserializer::from_str(&text);
    let feedback: Feedback = match serde_path_to_error::deserialize(&mut deserializer) {
        Ok(feedback) => feedback,
        Err(problem) => {
            let path = problem.path().to_string();
            let message = match path.as_str() {
                "." | "" => format!("invalid feedback: {}", problem.inner()),
                path => format!("invalid feedback at `{path}`: {}", problem.inner()),
            };
            return error(StatusCode::BAD_REQUEST, "invalid_request", message);
        }
    };
    if !valid_id(&feedback.call_id) {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "`call_id` must be at most 256 letters, digits or `_-.:/@+=`",
        );
    }
    // Any decision by a person ends the classifier's denial streak: a person is in the loop.
    state.engine.pipeline().sessions().record_human_decision(Some(&session_id));
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
        state.metrics.audit_line();
        if let Err(problem) = audit.write(line.to_string()).await {
            tracing::error!("audit log: {problem}");
        }
    }
    let body = json!({ "session_id": session_id, "call_id": feedback.call_id, "recorded": true });
    (StatusCode::OK, axum::Json(body)).into_response()
}

async fn healthz() -> Response {
    (StatusCode::OK, axum::Json(json!({ "status": "ok" }))).into_response()
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let mut checks = vec![json!({ "name": "config", "ok": true })];
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
    if let Some(audit) = &state.audit {
        let ok = audit.sync().await.is_ok();
        ready &= ok;
        checks.push(json!({ "name": "audit log", "ok": ok }));
    }
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(json!({ "ready": ready, "checks": checks }))).into_response()
}

async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    match state.metrics.render(state.engine.pipeline().sessions().tracked_sessions()) {
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
