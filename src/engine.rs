//! The decision engine behind every interface (CLI, and later HTTP and hooks): builds the
//! pipeline from a config and answers requests with one decision per pending call, in order.
//!
//! Decides nothing itself; construction fails (and nothing starts) when the config names a
//! model backend that cannot be built or a prompt that does not render.

use std::sync::Arc;
use std::time::Duration;

use crate::classifier::pipeline::{DecisionRecord, Pipeline, ReviewStage, ScreenStage};
use crate::config::Config;
use crate::model::{self, DecisionModel};
use crate::request::{DecideRequest, DecideResponse};

pub struct Engine {
    config: Config,
    pipeline: Pipeline,
    model_notes: Vec<String>,
    models: Vec<(&'static str, Arc<dyn DecisionModel>)>,
}

impl Engine {
    /// Builds the engine with the model backends the config names.
    pub fn new(config: Config) -> Result<Self, String> {
        let screen = config.screen.as_ref().map(|screen| model::build(&screen.model)).transpose()?;
        let review = config.review.as_ref().map(|review| model::build(&review.model)).transpose()?;
        let model_notes = [("screen", &screen), ("review", &review)]
            .into_iter()
            .filter_map(|(stage, model)| Some(format!("{stage} model: {}", model.as_ref()?.describe()?)))
            .collect();
        let mut engine = Self::with_models(config, screen, review)?;
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
    ) -> Result<Self, String> {
        let models = [("screen", &screen_model), ("review", &review_model)]
            .into_iter()
            .filter_map(|(stage, model)| Some((stage, model.as_ref()?.clone())))
            .collect();
        let screen = screen_model.map(|model| {
            let settings = config.screen.as_ref();
            ScreenStage {
                model,
                threshold: f64::from(settings.map_or(95, |screen| screen.allow_threshold_percent)) / 100.0,
                timeout: Duration::from_millis(settings.map_or(5_000, |screen| screen.timeout_ms)),
            }
        });
        let review = review_model.map(|model| {
            let settings = config.review.as_ref();
            ReviewStage {
                model,
                timeout: Duration::from_millis(settings.map_or(30_000, |review| review.timeout_ms)),
                on_error: settings.map(|review| review.on_error).unwrap_or_default(),
                on_deny: settings.map(|review| review.on_deny).unwrap_or_default(),
            }
        });
        let pipeline = Pipeline::new(&config, screen, review)?;
        Ok(Self { config, pipeline, model_notes: Vec::new(), models })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Decides every pending call of a request.
    pub async fn decide(&self, request: &DecideRequest) -> DecideResponse {
        DecideResponse { decisions: self.records(request).await.into_iter().map(|record| record.decision).collect() }
    }

    /// Like [`Engine::decide`], with the full decision record of each call.
    pub async fn records(&self, request: &DecideRequest) -> Vec<DecisionRecord> {
        self.pipeline.decide(request).await
    }
}
