//! Prometheus metrics of the service, rendered in the text exposition format at `GET /metrics`.
//!
//! It records what happened and never decides anything; an encoding error yields an empty
//! scrape body with a 500 (the caller maps it), never a panic. Counts kept elsewhere (the audit
//! log's written lines and errors, parser panics the gate caught) are read at scrape time.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::{DecisionRecord, StageRecord};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    stage: String,
    decision: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelErrorLabels {
    backend: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    backend: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResponseLabels {
    route: String,
    status: String,
}

fn latency_histogram() -> Histogram {
    // 0.1 ms … about 52 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    stage_latency: Family<StageLabels, Histogram, fn() -> Histogram>,
    request_latency: Histogram,
    model_errors: Family<ModelErrorLabels, Counter>,
    tokens: Family<TokenLabels, Counter<f64, AtomicU64>>,
    screened: Counter,
    screen_escalated: Counter,
    screen_escalation_ratio: Gauge<f64, AtomicU64>,
    sessions: Gauge,
    responses: Family<ResponseLabels, Counter>,
    shed: Counter,
    model_shed: Counter,
    connections_open: Gauge,
    requests_in_flight: Gauge,
    connections_timed_out: Counter,
    connections_evicted: Counter,
    parser_panics: Counter,
    audit_lines: Counter,
    audit_write_errors: Counter,
    audit_lines_dropped: Counter,
    audit_healthy: Gauge,
    decision_slots_busy: Gauge,
    model_slots_busy: Gauge,
}

/// A request counted in `http_requests_in_flight` until dropped (a cancelled request too).
pub struct RequestInFlight(Gauge);

impl Drop for RequestInFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Counts kept elsewhere, read at scrape time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scrape {
    /// Sessions whose denial counts are kept in this process (0 with the Redis store).
    pub sessions: usize,
    /// Panics the gate caught inside the shell parser since start.
    pub parser_panics: u64,
    /// The audit log's counts, when it is on.
    pub audit: Option<AuditCounts>,
    pub decision_slots_busy: usize,
    pub model_slots_busy: usize,
}

/// The audit log's own counts, read at scrape time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditCounts {
    pub lines_written: u64,
    pub write_errors: u64,
    pub lines_dropped: u64,
    pub healthy: bool,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// The service's metrics with the session store's (`session_store_latency_seconds`,
    /// `session_store_errors_total`) registered beside them.
    pub fn with_session_store(store: &crate::session_store::StoreMetrics) -> Self {
        let mut metrics = Self::new();
        store.register(&mut metrics.registry);
        metrics
    }

    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("permit");
        let metrics = Metrics {
            decisions: Family::default(),
            stage_latency: Family::new_with_constructor(latency_histogram),
            request_latency: latency_histogram(),
            model_errors: Family::default(),
            tokens: Family::default(),
            screened: Counter::default(),
            screen_escalated: Counter::default(),
            screen_escalation_ratio: Gauge::default(),
            sessions: Gauge::default(),
            responses: Family::default(),
            shed: Counter::default(),
            model_shed: Counter::default(),
            connections_open: Gauge::default(),
            requests_in_flight: Gauge::default(),
            connections_timed_out: Counter::default(),
            connections_evicted: Counter::default(),
            parser_panics: Counter::default(),
            audit_lines: Counter::default(),
            audit_write_errors: Counter::default(),
            audit_lines_dropped: Counter::default(),
            audit_healthy: Gauge::default(),
            decision_slots_busy: Gauge::default(),
            model_slots_busy: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "decisions",
            "Decisions by the stage that made them and their outcome",
            metrics.decisions.clone(),
        );
        registry.register(
            "stage_latency_seconds",
            "Time spent in each stage (gate, screen, review) per decided call",
            metrics.stage_latency.clone(),
        );
        registry.register(
            "decide_latency_seconds",
            "End-to-end time of a decide request, body parsing to response",
            metrics.request_latency.clone(),
        );
        registry.register(
            "model_errors",
            "Model calls that gave no usable answer, by backend and kind",
            metrics.model_errors.clone(),
        );
        registry.register("model_tokens", "Tokens reported by model backends, by kind", metrics.tokens.clone());
        registry.register("screen_calls", "Calls the screen model judged", metrics.screened.clone());
        registry.register(
            "screen_escalations",
            "Screened calls the screen did not clear",
            metrics.screen_escalated.clone(),
        );
        registry.register(
            "screen_escalation_ratio",
            "Share of screened calls the screen did not clear, since start",
            metrics.screen_escalation_ratio.clone(),
        );
        registry.register(
            "sessions_tracked",
            "Sessions whose state this process keeps in memory (0 with the Redis store)",
            metrics.sessions.clone(),
        );
        registry.register("http_responses", "HTTP responses by route and status", metrics.responses.clone());
        registry.register(
            "shed_requests",
            "Requests refused with 503 because every decision slot was busy",
            metrics.shed.clone(),
        );
        registry.register(
            "model_shed_requests",
            "Decide requests whose classified calls were answered ask (model_busy) at once because every model slot was busy",
            metrics.model_shed.clone(),
        );
        registry.register("connections_open", "Client connections open now", metrics.connections_open.clone());
        registry.register(
            "http_requests_in_flight",
            "HTTP requests whose headers are in and whose response is not yet ready",
            metrics.requests_in_flight.clone(),
        );
        registry.register(
            "connections_timed_out",
            "Connections closed because no complete request headers arrived in time (idle keep-alive included)",
            metrics.connections_timed_out.clone(),
        );
        registry.register(
            "connections_evicted",
            "Connections not serving a request closed to make room for a new one at server.max_connections",
            metrics.connections_evicted.clone(),
        );
        registry.register(
            "parser_panics",
            "Panics inside the shell parser, caught and answered as parse errors",
            metrics.parser_panics.clone(),
        );
        registry.register("audit_lines", "Lines written to the audit log file", metrics.audit_lines.clone());
        registry.register(
            "audit_write_errors",
            "Failed audit log file operations (writes, cuts, fsyncs, opens, rotations)",
            metrics.audit_write_errors.clone(),
        );
        registry.register(
            "audit_lines_dropped",
            "Audit lines handed over that never reached the file",
            metrics.audit_lines_dropped.clone(),
        );
        registry.register(
            "decision_slots_busy",
            "Requests being parsed and gated now (out of server.max_concurrency)",
            metrics.decision_slots_busy.clone(),
        );
        registry.register(
            "model_slots_busy",
            "Decide requests waiting on a model now (out of server.max_model_concurrency)",
            metrics.model_slots_busy.clone(),
        );
        registry.register(
            "audit_healthy",
            "1 while the audit log can be written, else 0",
            metrics.audit_healthy.clone(),
        );
        Metrics { registry, ..metrics }
    }

    /// Counts what one call's decision went through.
    pub fn record(&self, record: &DecisionRecord) {
        let decision = &record.decision;
        self.decisions
            .get_or_create(&DecisionLabels {
                stage: decision.stage.as_str().to_owned(),
                decision: decision.decision.as_str().to_owned(),
            })
            .inc();
        for (stage, stage_record) in [("screen", &record.screen), ("review", &record.review)] {
            let Some(stage_record) = stage_record else { continue };
            self.stage_latency
                .get_or_create(&StageLabels { stage: stage.to_owned() })
                .observe(stage_record.latency_ms / 1_000.0);
            self.model(stage_record);
        }
        if record.screen.is_some() {
            self.screened.inc();
            let cleared = crate::classifier::finalize::cleared_by_screen(decision.decision, decision.stage);
            if !cleared {
                self.screen_escalated.inc();
            }
            let screened = self.screened.get() as f64;
            self.screen_escalation_ratio.set(self.screen_escalated.get() as f64 / screened.max(1.0));
        }
    }

    fn model(&self, stage: &StageRecord) {
        let backend = stage.model.split('/').next().unwrap_or("").to_owned();
        if let Some(kind) = &stage.error_kind {
            self.model_errors.get_or_create(&ModelErrorLabels { backend: backend.clone(), kind: kind.clone() }).inc();
        }
        let usage = stage.member_usage();
        for (kind, count) in
            [("prompt", usage.prompt_tokens), ("completion", usage.completion_tokens), ("cached", usage.cached_tokens)]
        {
            if let Some(count) = count {
                self.tokens
                    .get_or_create(&TokenLabels { backend: backend.clone(), kind: kind.to_owned() })
                    .inc_by(count as f64);
            }
        }
    }

    pub fn observe_gate(&self, seconds: f64) {
        self.stage_latency.get_or_create(&StageLabels { stage: "gate".to_owned() }).observe(seconds);
    }

    pub fn observe_request(&self, seconds: f64) {
        self.request_latency.observe(seconds);
    }

    pub fn response(&self, route: &str, status: u16) {
        self.responses.get_or_create(&ResponseLabels { route: route.to_owned(), status: status.to_string() }).inc();
    }

    pub fn shed(&self) {
        self.shed.inc();
    }

    pub fn model_shed(&self) {
        self.model_shed.inc();
    }

    /// Counts a request in flight until the returned guard is dropped.
    pub fn request_started(&self) -> RequestInFlight {
        self.requests_in_flight.inc();
        RequestInFlight(self.requests_in_flight.clone())
    }

    pub fn connection_opened(&self) {
        self.connections_open.inc();
    }

    pub fn connection_closed(&self) {
        self.connections_open.dec();
    }

    pub fn connection_timed_out(&self) {
        self.connections_timed_out.inc();
    }

    pub fn connection_evicted(&self) {
        self.connections_evicted.inc();
    }

    /// The exposition text, with the counts kept elsewhere as they are now.
    pub fn render(&self, scrape: &Scrape) -> Result<String, std::fmt::Error> {
        let gauge = |value: usize| i64::try_from(value).unwrap_or(i64::MAX);
        self.sessions.set(gauge(scrape.sessions));
        self.decision_slots_busy.set(gauge(scrape.decision_slots_busy));
        self.model_slots_busy.set(gauge(scrape.model_slots_busy));
        // Stored, not added: the totals are monotonic at their source.
        self.parser_panics.inner().store(scrape.parser_panics, Ordering::Relaxed);
        if let Some(audit) = scrape.audit {
            self.audit_lines.inner().store(audit.lines_written, Ordering::Relaxed);
            self.audit_write_errors.inner().store(audit.write_errors, Ordering::Relaxed);
            self.audit_lines_dropped.inner().store(audit.lines_dropped, Ordering::Relaxed);
            self.audit_healthy.set(i64::from(audit.healthy));
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}
