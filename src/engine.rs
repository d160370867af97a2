//! The decision engine behind every interface (CLI, HTTP, hooks, evals): builds the pipeline
//! from a config and answers requests with one decision per pending call, in order. It is the
//! only way in: hosts never reach the pipeline, the gate or the session store behind it.
//!
//! Decides nothing itself; construction fails (and nothing starts) when the config names a
//! model backend that cannot be built or a prompt that does not render.

use std::sync::Arc;
use std::time::Duration;

pub use crate::classifier::pipeline::GatedRequest;
use crate::classifier::pipeline::{Parts, Pipeline, ReviewStage, ScreenStage};
use crate::classifier::prompts::Prompts;
pub use crate::classifier::record::{DecisionRecord, StageRecord};
use crate::config::{Config, ReviewConfig, ScreenConfig};
use crate::gate::Gate;
use crate::model::{self, DecisionModel};
use crate::request::{DecideRequest, DecideResponse};
use crate::session_store::{SessionStore, StoreError, StoreMetrics};

/// Why an engine could not be built: nothing starts. Each message names the config field or
/// file at fault.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A model backend the config names cannot be built (a missing file, a bad URL…).
    #[error(transparent)]
    Model(#[from] model::BuildError),
    /// The operator's rules do not load (an example a rule fails, a bad pattern…).
    #[error(transparent)]
    Gate(#[from] crate::gate::GateError),
    /// A prompt template does not load or render.
    #[error(transparent)]
    Prompts(#[from] crate::classifier::prompts::PromptError),
    /// The session store cannot be set up.
    #[error(transparent)]
    SessionStore(#[from] crate::session_store::RedisStoreError),
}

pub struct Engine {
    config: Config,
    pipeline: Pipeline,
    model_notes: Vec<String>,
    models: Vec<(&'static str, Arc<dyn DecisionModel>)>,
}

impl Engine {
    /// Builds the engine with the model backends the config names.
    pub fn new(config: Config) -> Result<Self, EngineError> {
        // The gate first: a rule at fault is reported before a model takes seconds to load.
        let gate = Gate::new(&config)?;
        let build = |model_config| model::build(model_config).map_err(EngineError::Model);
        let screen = config.screen.as_ref().map(|screen| build(&screen.model)).transpose()?;
        let review = config.review.as_ref().map(|review| build(&review.model)).transpose()?;
        let model_notes = [("screen", &screen), ("review", &review)]
            .into_iter()
            .filter_map(|(stage, model)| Some(format!("{stage} model: {}", model.as_ref()?.describe()?)))
            .collect();
        let mut engine = Self::assemble(config, gate, screen, review)?;
        engine.model_notes = model_notes;
        Ok(engine)
    }

    /// The models in use, by stage (`screen`, `review`).
    pub fn models(&self) -> &[(&'static str, Arc<dyn DecisionModel>)] {
        &self.models
    }

    /// What loading the models found (local models report their file, weights and template).
    pub fn model_notes(&self) -> &[String] {
        &self.model_notes
    }

    /// Builds the engine with the given models in place of the configured backends (tests,
    /// and Rust hosts that bring their own [`DecisionModel`]). A model is used only when its
    /// stage is configured; a stage configured without a model uses defaults for its settings.
    pub fn with_models(
        config: Config,
        screen_model: Option<Arc<dyn DecisionModel>>,
        review_model: Option<Arc<dyn DecisionModel>>,
    ) -> Result<Self, EngineError> {
        let gate = Gate::new(&config)?;
        Self::assemble(config, gate, screen_model, review_model)
    }

    /// The engine around a compiled gate and the stages' models.
    fn assemble(
        config: Config,
        gate: Gate,
        screen_model: Option<Arc<dyn DecisionModel>>,
        review_model: Option<Arc<dyn DecisionModel>>,
    ) -> Result<Self, EngineError> {
        let store = crate::session_store::build(&config.session)?;
        let models = [("screen", &screen_model), ("review", &review_model)]
            .into_iter()
            .filter_map(|(stage, model)| Some((stage, model.as_ref()?.clone())))
            .collect();
        let screen = screen_model.map(|model| {
            let settings = config.screen.as_ref();
            ScreenStage {
                model,
                threshold: f64::from(
                    settings
                        .map_or(ScreenConfig::DEFAULT_ALLOW_THRESHOLD_PERCENT, |screen| screen.allow_threshold_percent),
                ) / 100.0,
                timeout: Duration::from_millis(
                    settings.map_or(ScreenConfig::DEFAULT_TIMEOUT_MS, |screen| screen.timeout_ms),
                ),
            }
        });
        let review = review_model.map(|model| {
            let settings = config.review.as_ref();
            ReviewStage {
                model,
                timeout: Duration::from_millis(
                    settings.map_or(ReviewConfig::DEFAULT_TIMEOUT_MS, |review| review.timeout_ms),
                ),
                on_error: settings.map(|review| review.on_error).unwrap_or_default(),
                on_deny: settings.map(|review| review.on_deny).unwrap_or_default(),
            }
        });
        let parts = Parts { gate, prompts: Prompts::load(&config.prompts)?, store: store.0, store_metrics: store.1 };
        let pipeline = Pipeline::new(&config, parts, screen, review);
        Ok(Self { config, pipeline, model_notes: Vec::new(), models })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Decides every pending call of a request.
    pub async fn decide(&self, request: &DecideRequest) -> DecideResponse {
        DecideResponse { decisions: self.records(request).await.into_iter().map(|record| record.decision).collect() }
    }

    /// Like [`Engine::decide`], with the full decision record of each call.
    pub async fn records(&self, request: &DecideRequest) -> Vec<DecisionRecord> {
        self.pipeline.decide(request).await
    }

    /// Like [`Engine::records`], bounded by `deadline`: the gate always answers; calls still
    /// with the classifier when time runs out are `ask` (`decision_timeout`).
    pub async fn records_within(&self, request: &DecideRequest, deadline: tokio::time::Instant) -> Vec<DecisionRecord> {
        self.pipeline.decide_within(request, Some(deadline)).await
    }

    /// The first half of a decision: the gate and the costly-call budget, for a host that admits
    /// model-bound requests separately from those the gate settles alone.
    pub async fn gate_request(&self, request: &DecideRequest, deadline: tokio::time::Instant) -> GatedRequest {
        self.pipeline.gate_request(request, Some(deadline)).await
    }

    /// The second half: the model stages for the calls the gate sent to them.
    pub async fn finish(
        &self,
        request: &DecideRequest,
        gated: GatedRequest,
        deadline: tokio::time::Instant,
    ) -> Vec<DecisionRecord> {
        self.pipeline.finish(request, gated, Some(deadline)).await
    }

    /// The second half without models, when the host has no model slot free: the calls that
    /// need the classifier are `ask` (`model_busy`).
    pub fn shed(&self, request: &DecideRequest, gated: GatedRequest) -> Vec<DecisionRecord> {
        self.pipeline.shed(request, gated)
    }

    /// A person decided a call in this session: the classifier's denial streak ends. An error
    /// when the session store cannot record it.
    pub async fn record_human_decision(&self, session: &str) -> Result<(), StoreError> {
        self.pipeline.sessions().record_human_decision(Some(session)).await
    }

    /// The session store: its kind (`memory`, `redis`) and readiness.
    pub fn session_store(&self) -> &Arc<dyn SessionStore> {
        self.pipeline.sessions().store()
    }

    /// Sessions the store tracks, when it can count them cheaply (memory).
    pub fn tracked_sessions(&self) -> Option<usize> {
        self.pipeline.sessions().tracked_sessions()
    }

    /// The session store's latency and error metrics, for the service to register.
    pub fn session_store_metrics(&self) -> &StoreMetrics {
        self.pipeline.session_store_metrics()
    }

    /// Tools the gate knows (built-in presets and `[[tools.define]]`).
    pub fn known_tools(&self) -> usize {
        self.pipeline.gate().registry().len()
    }

    /// Model slots free right now, out of `classifier.max_concurrent_model_calls`.
    pub fn model_slots_available(&self) -> usize {
        self.pipeline.model_slots_available()
    }
}

/// Builds the engine for a config loaded from `origin`; `build` is [`Engine::new`] or
/// [`Engine::with_models`]. The engine compiles the gate once, before any model, and compiling
/// it runs every rule's examples (loading a config does not): a rule at fault is reported as
/// the config error it is, naming the file.
pub(crate) fn build_engine(
    config: Config,
    origin: &str,
    build: impl FnOnce(Config) -> Result<Engine, EngineError>,
) -> anyhow::Result<Engine> {
    build(config).map_err(|error| match error {
        EngineError::Gate(error) => {
            crate::config::ConfigError::Invalid { path: origin.to_owned(), message: error.to_string() }.into()
        }
        other => other.into(),
    })
}
