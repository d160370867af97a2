//! The `DecisionModel` trait: a model answers fixed-choice questions about a rendered request.
//!
//! A request is shared instructions (system), state (the rendered transcript) and the
//! question block with its fixed-choice questions. The answer per question is the chosen option
//! and, when the model reports them, probabilities per option. Backends (OpenAI-compatible,
//! Anthropic, local GGUF) implement the trait; they never know about tiers or decisions.
//! [`validate_answer`] refuses anything that is not exactly one valid option per question with,
//! if present, a real probability distribution; the pipeline turns every error into a
//! fail-closed outcome, never an allow.

pub mod answer;
pub mod anthropic;
pub mod cache;
pub mod http;
pub mod local;
pub mod openai;
/// A scripted model for tests (the pipeline's, and Rust hosts' with the `testing` feature).
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One option of a fixed-choice question.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct QuestionOption {
    pub id: &'static str,
    /// Shown to the model; for deny options also the fixed reason shown to the agent.
    pub description: &'static str,
}

/// A fixed-choice question about one pending call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Question {
    pub id: String,
    /// The pending call the question is about.
    pub call_id: String,
    pub options: &'static [QuestionOption],
}

/// What a model is asked. `system` and `transcript` are identical for the screen and review of
/// the same request, so providers can cache them as one prefix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelRequest {
    pub system: String,
    pub transcript: String,
    pub question_block: String,
    pub questions: Vec<Question>,
    /// Set for the reasoned review: the model may reason before its answer.
    pub reasoned: bool,
    /// When the stage's time is up: retries never sleep past it.
    #[serde(skip)]
    pub deadline: Option<std::time::Instant>,
    /// For screen requests: the user's latest words and the call, which a trained head reads
    /// instead of the rendered prompt. Other backends ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen_input: Option<local::head::ScreenInput>,
}

/// A model's choice for one question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub question: String,
    pub option: String,
    /// P(option) per option id, when the backend reports probabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<BTreeMap<String, f64>>,
}

/// Token accounting, when the provider reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelAnswer {
    pub choices: Vec<Choice>,
    /// The model's reasoning, for the audit log only; never shown to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub usage: Usage,
}

/// Why a model gave no usable answer. Every variant fails closed in the pipeline.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum ModelError {
    #[error("the model did not answer within {0} ms")]
    Timeout(u64),
    #[error("transport error: {0}")]
    Transport(String),
    #[error("the model's answer is malformed: {0}")]
    Malformed(String),
    #[error("the model gave no answer for question `{0}`")]
    MissingAnswer(String),
    #[error("the model chose `{option}`, which is not an option of question `{question}`")]
    UnknownOption { question: String, option: String },
    #[error("the probabilities for question `{question}` are not a distribution over its options: {problem}")]
    InvalidProbabilities { question: String, problem: String },
    #[error("the transcript does not fit the model's budget")]
    OverBudget,
    #[error("the `{0}` backend is unavailable: {1}")]
    Unavailable(String, String),
    /// The body passed `max_response_bytes`; it was not read further.
    #[error("the model's response is larger than the limit of {0} bytes")]
    ResponseTooLarge(u64),
    /// Every model slot of the process (`classifier.max_concurrent_model_calls`) stayed busy
    /// until the stage's time ran out, so the model was never asked.
    #[error("no model slot became free within {0} ms")]
    Busy(u64),
    /// The provider stopped the answer at its token limit (`finish_reason` `length`,
    /// `stop_reason` `max_tokens`): whatever text came back is not the model's final answer.
    #[error("the model's answer was cut off: {0}")]
    Truncated(String),
    /// The provider or the model declined to answer (`stop_reason` `refusal`, `finish_reason`
    /// `content_filter`, a `refusal` message).
    #[error("the model refused to answer: {0}")]
    Refused(String),
}

impl ModelError {
    /// [`ModelError::kind`] of a timeout.
    pub const TIMEOUT_KIND: &'static str = "timeout";
    /// [`ModelError::kind`] of a call that got no model slot.
    pub const BUSY_KIND: &'static str = "busy";

    /// A short stable name for metrics and records.
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Timeout(_) => Self::TIMEOUT_KIND,
            ModelError::Transport(_) => "transport",
            ModelError::Malformed(_) => "malformed",
            ModelError::MissingAnswer(_) => "missing_answer",
            ModelError::UnknownOption { .. } => "unknown_option",
            ModelError::InvalidProbabilities { .. } => "invalid_probabilities",
            ModelError::OverBudget => "over_budget",
            ModelError::Unavailable(..) => "unavailable",
            ModelError::ResponseTooLarge(_) => "response_too_large",
            ModelError::Busy(_) => Self::BUSY_KIND,
            ModelError::Truncated(_) => "truncated",
            ModelError::Refused(_) => "refused",
        }
    }
}

/// A model that answers fixed-choice questions.
pub trait DecisionModel: Send + Sync {
    /// `backend/model`, for records and metrics.
    fn name(&self) -> String;
    /// Whether every answer carries probabilities. A screen from such a model that arrives
    /// without them is treated as no answer (it escalates) rather than decided on its choice.
    fn reports_probabilities(&self) -> bool {
        false
    }
    /// Whether this is a trained head (`style = "head"`): its screen may clear only calls whose
    /// gate findings carry no signal of harm ([`crate::classifier::eligibility`]).
    fn is_trained_head(&self) -> bool {
        false
    }
    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>>;
    /// What loading found, for `permit check-config` (the local backend reports its model).
    fn describe(&self) -> Option<String> {
        None
    }
    /// Whether the model can answer now, for `GET /readyz`: a loaded local model is ready; a
    /// remote one when its endpoint accepts a connection.
    fn ready(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

/// How far probabilities may be from summing to 1 (rounding in providers' logprobs).
const PROBABILITY_TOLERANCE: f64 = 1e-3;

/// Checks an answer against the questions: each question answered exactly once with one of its
/// options, no extra answers, and probabilities (if any) a distribution over exactly the options.
pub fn validate_answer(questions: &[Question], answer: &ModelAnswer) -> Result<(), ModelError> {
    for choice in &answer.choices {
        if !questions.iter().any(|question| question.id == choice.question) {
            return Err(ModelError::Malformed(format!("answer for `{}`, which was not asked", choice.question)));
        }
    }
    for question in questions {
        let mut answers = answer.choices.iter().filter(|choice| choice.question == question.id);
        let Some(choice) = answers.next() else {
            return Err(ModelError::MissingAnswer(question.id.clone()));
        };
        if answers.next().is_some() {
            return Err(ModelError::Malformed(format!("question `{}` answered twice", question.id)));
        }
        if !question.options.iter().any(|option| option.id == choice.option) {
            return Err(ModelError::UnknownOption { question: question.id.clone(), option: choice.option.clone() });
        }
        if let Some(probabilities) = &choice.probabilities {
            let problem = probability_problem(question, probabilities);
            if let Some(problem) = problem {
                return Err(ModelError::InvalidProbabilities { question: question.id.clone(), problem });
            }
        }
    }
    Ok(())
}

fn probability_problem(question: &Question, probabilities: &BTreeMap<String, f64>) -> Option<String> {
    if probabilities.len() != question.options.len() {
        return Some(format!("{} probabilities for {} options", probabilities.len(), question.options.len()));
    }
    for (option, probability) in probabilities {
        if !question.options.iter().any(|known| known.id == option) {
            return Some(format!("`{option}` is not an option"));
        }
        if !probability.is_finite() || !(0.0..=1.0).contains(probability) {
            return Some(format!("P(`{option}`) = {probability} is not within 0..=1"));
        }
    }
    let sum: f64 = probabilities.values().sum();
    if (sum - 1.0).abs() > PROBABILITY_TOLERANCE {
        return Some(format!("they sum to {sum}"));
    }
    None
}

/// Why a model backend could not be built: nothing starts. Each message names the setting.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("the environment variable `{0}` that should hold the API key is not set")]
    MissingApiKey(String),
    #[error("the API key is not a valid header value")]
    InvalidApiKey,
    #[error("`api_key_header` `{0}` is not a valid header name")]
    InvalidApiKeyHeader(String),
    #[error("header name `{0}` is not valid")]
    InvalidHeaderName(String),
    #[error("the value of header `{0}` is not valid")]
    InvalidHeaderValue(String),
    #[error("`base_url` `{url}` is not a valid URL: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot build the HTTP client for `{name}`: {reason}")]
    HttpClient { name: String, reason: String },
    #[error("`style = \"head\"` reads a local model's hidden states: it needs `backend = \"local\"`")]
    HeadNeedsLocal,
    #[error(transparent)]
    Local(#[from] local::LoadError),
}

fn api_key(variable: &str) -> Result<String, BuildError> {
    match std::env::var(variable) {
        Ok(key) if !key.trim().is_empty() => Ok(key.trim().to_owned()),
        _ => Err(BuildError::MissingApiKey(variable.to_owned())),
    }
}

/// A leading `~/` in a model or head path is the home directory (`$HOME`), as a shell reads it.
fn expand_home(path: &std::path::Path) -> std::path::PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => std::path::PathBuf::from(home).join(rest),
        _ => path.to_owned(),
    }
}

/// Builds the backend a config names. Fails (and nothing starts) when an API key variable is
/// unset, a header is invalid, or the backend is not available in this build.
pub fn build(config: &ModelConfig) -> Result<std::sync::Arc<dyn DecisionModel>, BuildError> {
    match config {
        ModelConfig::Openai {
            base_url,
            model,
            api_key_env,
            api_key_header,
            headers,
            query,
            style,
            min_label_mass,
            top_logprobs,
            reasoning_model,
            reasoning_effort,
            token_limit_field,
            max_tokens: _,
            response_format,
            http,
        } => {
            let api_key = api_key_env.as_deref().map(api_key).transpose()?;
            let backend = openai::OpenAiBackend::new(openai::OpenAiSettings {
                base_url: base_url.clone(),
                model: model.clone(),
                api_key,
                api_key_header: api_key_header.clone(),
                headers: headers.clone(),
                query: query.clone(),
                style: *style,
                min_label_mass: *min_label_mass,
                top_logprobs: *top_logprobs,
                reasoning_model: *reasoning_model,
                reasoning_effort: *reasoning_effort,
                token_limit_field: *token_limit_field,
                max_tokens: config.effective_max_tokens(),
                response_format: *response_format,
                http: *http,
            })?;
            Ok(std::sync::Arc::new(backend))
        }
        ModelConfig::Anthropic {
            base_url,
            model,
            api_key_env,
            max_tokens: _,
            temperature,
            top_p,
            top_k,
            thinking,
            effort,
            headers,
            http,
        } => {
            let backend = anthropic::AnthropicBackend::new(anthropic::AnthropicSettings {
                base_url: base_url.clone(),
                model: model.clone(),
                api_key: api_key(api_key_env)?,
                max_tokens: config.effective_max_tokens(),
                temperature: *temperature,
                top_p: *top_p,
                top_k: *top_k,
                thinking: *thinking,
                effort: *effort,
                headers: headers.clone(),
                http: *http,
            })?;
            Ok(std::sync::Arc::new(backend))
        }
        ModelConfig::Local { path, threads, max_new_tokens, style, weights, prefix_cache_mib, head } => {
            let backend = local::LocalBackend::load(local::LocalSettings {
                path: expand_home(path),
                threads: *threads,
                max_new_tokens: *max_new_tokens,
                style: *style,
                weights: *weights,
                prefix_cache_mib: *prefix_cache_mib,
                head: head.as_deref().map(expand_home),
            })?;
            Ok(std::sync::Arc::new(backend))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classifier::questions::{SCREEN_OPTIONS, VERDICT_OPTIONS};

    fn question(id: &str, options: &'static [QuestionOption]) -> Question {
        Question { id: id.to_owned(), call_id: "c".to_owned(), options }
    }

    fn choice(question: &str, option: &str, probabilities: Option<&[(&str, f64)]>) -> Choice {
        Choice {
            question: question.to_owned(),
            option: option.to_owned(),
            probabilities: probabilities
                .map(|pairs| pairs.iter().map(|(option, probability)| ((*option).to_owned(), *probability)).collect()),
        }
    }

    #[test]
    fn valid_answers_pass() {
        let questions = [question("screen", SCREEN_OPTIONS)];
        let answer = ModelAnswer {
            choices: vec![choice("screen", "allow", Some(&[("allow", 0.97), ("escalate", 0.03)]))],
            ..ModelAnswer::default()
        };
        assert_eq!(validate_answer(&questions, &answer), Ok(()));
    }

    #[test]
    fn every_malformation_is_refused() {
        let questions = [question("verdict", VERDICT_OPTIONS)];
        let cases: Vec<(Vec<Choice>, &str)> = vec![
            (vec![], "missing_answer"),
            (vec![choice("verdict", "maybe", None)], "unknown_option"),
            (vec![choice("verdict", "allow", None), choice("verdict", "allow", None)], "malformed"),
            (vec![choice("verdict", "allow", None), choice("other", "allow", None)], "malformed"),
            (vec![choice("verdict", "allow", Some(&[("allow", 1.0)]))], "invalid_probabilities"),
        ];
        for (choices, kind) in cases {
            let answer = ModelAnswer { choices, ..ModelAnswer::default() };
            assert_eq!(validate_answer(&questions, &answer).unwrap_err().kind(), kind);
        }
        let screen = [question("screen", SCREEN_OPTIONS)];
        for pairs in [
            &[("allow", 0.7), ("escalate", 0.7)][..],
            &[("allow", f64::NAN), ("escalate", 0.5)][..],
            &[("allow", 1.5), ("escalate", -0.5)][..],
            &[("allow", 0.5), ("deny", 0.5)][..],
        ] {
            let answer =
                ModelAnswer { choices: vec![choice("screen", "allow", Some(pairs))], ..ModelAnswer::default() };
            assert_eq!(validate_answer(&screen, &answer).unwrap_err().kind(), "invalid_probabilities", "{pairs:?}");
        }
    }
}
