//! Prometheus metrics of the service, rendered in the text exposition format at `GET /metrics`.
//!
//! It records what happened and never decides anything; an encoding error yields an empty
//! scrape body with a 500 (the caller maps it), never a panic.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use crate::classifier::pipeline::{DecisionRecord, StageRecord};
use crate::decision::Decision;
use crate::request::Stage;

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
    audit_lines: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
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
            audit_lines: Counter::default(),
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
        registry.register("sessions_tracked", "Sessions whose denial counts are kept", metrics.sessions.clone());
        registry.register("http_responses", "HTTP responses by route and status", metrics.responses.clone());
        registry.register(
            "shed_requests",
            "Requests refused with 503 because every slot was busy",
            metrics.shed.clone(),
        );
        registry.register("audit_lines", "Lines handed to the audit log", metrics.audit_lines.clone());
        Metrics { registry, ..metrics }
    }

    /// Counts what one call's decision went through.
    pub fn record(&self, record: &DecisionRecord) {
        let decision = &record.decision;
        self.decisions
            .get_or_create(&DecisionLabels {
                stage: stage_name(decision.stage).to_owned(),
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
            let cleared = decision.stage == Stage::Screen && decision.decision == Decision::Allow;
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
        // A batched review reports the batch's tokens on every member: each gets its share.
        let share = 1.0 / stage.batch_size.max(1) as f64;
        for (kind, count) in [
            ("prompt", stage.usage.prompt_tokens),
            ("completion", stage.usage.completion_tokens),
            ("cached", stage.usage.cached_tokens),
        ] {
            if let Some(count) = count {
                self.tokens
                    .get_or_create(&TokenLabels { backend: backend.clone(), kind: kind.to_owned() })
                    .inc_by(count as f64 * share);
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

    pub fn audit_line(&self) {
        self.audit_lines.inc();
    }

    /// The exposition text; `sessions` is read at scrape time.
    pub fn render(&self, sessions: usize) -> Result<String, std::fmt::Error> {
        self.sessions.set(i64::try_from(sessions).unwrap_or(i64::MAX));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

pub fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Gate => "gate",
        Stage::Screen => "screen",
        Stage::Review => "review",
        Stage::Session => "session",
        Stage::Timeout => "timeout",
        Stage::Error => "error",
    }
}
