//! The trained-head screen (`style = "head"`): P(allow) from a logistic head over the local
//! model's hidden states, instead of asking the model in words.
//!
//! The model reads a fixed compact prompt (`prompts/head-screen.md`: the last three user
//! messages) followed by the pending call, and the forward pass stops after the layer the head
//! was trained on. The residual stream at that layer, averaged over the call's tokens, is
//! standardised and fed to the head: `P(allow) = sigmoid(w · (x - mean) / scale + b)`. The same
//! code computes the features in `permit train` and at decision time, so a head sees at run time
//! exactly what it was fitted on. Deterministic: no sampling, no randomness.
//!
//! What it never does: decide alone. It answers the screen's question, so it can only let a call
//! skip the review, and only for calls whose gate findings carry no signal of harm
//! ([`crate::classifier::eligibility`]).
//!
//! It reads all of the call or clears nothing: a call longer than the head reads
//! ([`MAX_CALL_TOKENS`]) is an error, never judged on its start (a red team padded harmful
//! commands behind eight harmless runs, and the head, reading only the start, cleared them).
//!
//! On failure: a head file that is missing, malformed, or made for another model file, layer
//! count, pooling or prompt template stops startup with the reason; at decision time a request
//! without screen input, a prompt too long for the model or a tensor error is an error, which
//! the pipeline fails closed (the call goes to the review or a person).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::request::{KnownEvent, PendingCall, TranscriptEvent};

/// The head file format this build reads and writes.
pub const HEAD_FORMAT: u32 = 1;
/// The prompt before the pending call.
pub const HEAD_TEMPLATE: &str = include_str!("../../../prompts/head-screen.md");
/// How many of the latest user messages the prompt shows.
pub const USER_MESSAGES: usize = 3;
/// Characters kept of each user message (its start, where a request is stated).
pub const USER_MESSAGE_CHARS: usize = 600;
/// Tokens kept of the text before the call (its end: the latest words).
pub const MAX_CONTEXT_TOKENS: usize = 256;
/// Tokens kept of the call (its start: the tool's name and first arguments).
pub const MAX_CALL_TOKENS: usize = 160;
/// Characters of the call's rendering tokenised at most (a 100 KB `Write` is cut before the
/// tokenizer sees it; the token cut above then applies).
const CALL_CHARS: usize = 1_200;

/// What the head reads about one pending call: the user's latest words and the call itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScreenInput {
    pub user_messages: Vec<String>,
    /// `Name {json input}`, compact.
    pub call: String,
    /// The call was longer than [`CALL_CHARS`] and was cut: the head would not read all of it,
    /// so it must not clear it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

impl ScreenInput {
    /// The last [`USER_MESSAGES`] user messages of the transcript (each cut to
    /// [`USER_MESSAGE_CHARS`]) and the pending call.
    pub fn of(transcript: &[TranscriptEvent], call: &PendingCall) -> Self {
        let mut user_messages: Vec<String> = transcript
            .iter()
            .rev()
            .filter_map(|event| match event {
                TranscriptEvent::Known(KnownEvent::User { text }) => Some(cut_chars(text.trim(), USER_MESSAGE_CHARS)),
                _ => None,
            })
            .take(USER_MESSAGES)
            .collect();
        user_messages.reverse();
        let input = serde_json::to_string(&call.input).unwrap_or_default();
        let whole = format!("{} {input}", call.name);
        let cut = whole.chars().count() > CALL_CHARS;
        ScreenInput { user_messages, call: cut_chars(&whole, CALL_CHARS), cut }
    }
}

fn cut_chars(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

/// How the hidden states of the call's tokens become one feature vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// The mean over the call's tokens.
    MeanOverCall,
}

/// One cross-validation figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CvPoint {
    pub l2: f64,
    pub auroc: f64,
}

/// How the head was fitted and how well it did on data it had not seen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    /// The command that fitted this head, as run.
    pub command: String,
    /// Each case file: path, SHA-256 and number of labeled calls read.
    pub data: Vec<TrainingFile>,
    /// SHA-256 over the files' digests, in order.
    pub data_digest: String,
    pub calls: usize,
    pub allows: usize,
    pub denies: usize,
    /// Grouped folds (a task or scenario never spans two).
    pub folds: usize,
    pub groups: usize,
    /// Out-of-fold AUROC for each regularisation tried; the chosen one is `l2`.
    pub grid: Vec<CvPoint>,
    pub l2: f64,
    /// Out-of-fold AUROC at the chosen `l2`, per source (`agentdojo/banking`, `coding`…).
    /// `null` for a source with one label only.
    pub auroc_by_source: std::collections::BTreeMap<String, Option<f64>>,
    pub auroc: f64,
    /// Leave one source out: fitted on the others, judged at the threshold on this one.
    pub held_out: Vec<HeldOut>,
}

/// One source held out of training, judged at the shipped threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldOut {
    pub source: String,
    /// `null` for a source with one label only.
    pub auroc: Option<f64>,
    /// Labeled denies among the calls a head may clear, and how many the head allowed.
    pub eligible_denies: usize,
    pub false_allows: usize,
    /// The 95 % upper bound on the false-allow rate (Clopper-Pearson).
    pub false_allow_upper_95: f64,
    pub eligible_allows: usize,
    pub cleared_allows: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingFile {
    pub path: String,
    pub sha256: String,
    pub calls: usize,
}

/// The screen threshold that ships with the head, and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThresholdReceipt {
    /// P(allow) at or above which the screen clears a call (the config's `threshold` is this
    /// times 100).
    pub threshold: f64,
    /// How it was chosen (the command, and the data: out-of-fold answers).
    pub chosen_by: String,
    /// Labeled denies among the eligible out-of-fold calls at or above the threshold.
    pub false_allows: usize,
    pub eligible_denies: usize,
    /// The 95 % upper bound on the false-allow rate (Clopper-Pearson).
    pub false_allow_upper_95: f64,
    /// Share of eligible labeled allows the head clears at the threshold.
    pub cleared_allow_share: f64,
}

/// A head file (`head = "FILE"`): small JSON, written by `permit train`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadFile {
    pub format: u32,
    /// SHA-256 of the GGUF file whose hidden states the head reads.
    pub model_sha256: String,
    /// The decoder layers run (the residual stream after layer `layer`, 1-based).
    pub layer: usize,
    pub pooling: Pooling,
    /// SHA-256 of `prompts/head-screen.md` as trained.
    pub template_sha256: String,
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub weights: Vec<f64>,
    pub bias: f64,
    pub training: Training,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<ThresholdReceipt>,
}

/// Why a head cannot be used with this model.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    #[error("cannot read the head file `{path}`: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the head file `{path}` is not a valid head: {message}")]
    Malformed { path: PathBuf, message: String },
    #[error("the head file `{path}` is format {found}; this build reads format {HEAD_FORMAT}")]
    Format { path: PathBuf, found: u32 },
    #[error(
        "the head file `{path}` was trained on the model with SHA-256 `{trained}`, but `{model}` has `{loaded}`: retrain it with `permit train`"
    )]
    ModelMismatch { path: PathBuf, trained: String, model: PathBuf, loaded: String },
    #[error(
        "the head file `{path}` was trained with another `prompts/head-screen.md` (SHA-256 `{trained}`, this build has `{current}`): retrain it with `permit train`"
    )]
    TemplateMismatch { path: PathBuf, trained: String, current: String },
    #[error("the head file `{path}` reads layer {layer}, but the model has {layers} layers")]
    Layer { path: PathBuf, layer: usize, layers: usize },
    #[error(
        "the head file `{path}` has {found} weights, scales or means, but the model's hidden states have {expected}"
    )]
    Width { path: PathBuf, found: usize, expected: usize },
}

/// SHA-256 of the prompt template, in hex.
pub fn template_sha256() -> String {
    hex(&Sha256::digest(HEAD_TEMPLATE.as_bytes()))
}

/// SHA-256 of a file, in hex (streamed: model files are hundreds of megabytes).
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The text before the call, rendered from [`HEAD_TEMPLATE`].
pub fn render_context(user_messages: &[String]) -> Result<String, minijinja::Error> {
    let mut environment = minijinja::Environment::new();
    environment.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    environment.set_trim_blocks(true);
    environment.add_template("head-screen", HEAD_TEMPLATE)?;
    let template = environment.get_template("head-screen")?;
    template.render(minijinja::context! { user_messages => user_messages })
}

impl HeadFile {
    /// Reads a head and checks it against the loaded model: its file's digest, layer count and
    /// hidden width, and the prompt template of this build.
    pub fn load(
        path: &Path,
        model_path: &Path,
        model_sha256: &str,
        layers: usize,
        width: usize,
    ) -> Result<Self, HeadError> {
        let text = std::fs::read_to_string(path).map_err(|source| HeadError::Read { path: path.to_owned(), source })?;
        let head: HeadFile = serde_json::from_str(&text)
            .map_err(|error| HeadError::Malformed { path: path.to_owned(), message: error.to_string() })?;
        if head.format != HEAD_FORMAT {
            return Err(HeadError::Format { path: path.to_owned(), found: head.format });
        }
        if head.model_sha256 != model_sha256 {
            return Err(HeadError::ModelMismatch {
                path: path.to_owned(),
                trained: head.model_sha256,
                model: model_path.to_owned(),
                loaded: model_sha256.to_owned(),
            });
        }
        let current = template_sha256();
        if head.template_sha256 != current {
            return Err(HeadError::TemplateMismatch { path: path.to_owned(), trained: head.template_sha256, current });
        }
        if head.layer == 0 || head.layer > layers {
            return Err(HeadError::Layer { path: path.to_owned(), layer: head.layer, layers });
        }
        for found in [head.weights.len(), head.mean.len(), head.scale.len()] {
            if found != width {
                return Err(HeadError::Width { path: path.to_owned(), found, expected: width });
            }
        }
        let finite = head.weights.iter().chain(&head.mean).all(|value| value.is_finite())
            && head.scale.iter().all(|value| value.is_finite() && *value > 0.0)
            && head.bias.is_finite();
        if !finite {
            return Err(HeadError::Malformed {
                path: path.to_owned(),
                message: "weights, means and biases must be finite and scales positive".to_owned(),
            });
        }
        Ok(head)
    }

    /// P(allow) for one feature vector.
    pub fn p_allow(&self, features: &[f32]) -> f64 {
        p_allow(features, &self.mean, &self.scale, &self.weights, self.bias)
    }
}

/// P(allow) of a standardised logistic head: `sigmoid(b + Σ w·(x - mean)/scale)`. The one
/// formula for shipped heads and for `permit train`'s folds.
pub fn p_allow(features: &[f32], mean: &[f64], scale: &[f64], weights: &[f64], bias: f64) -> f64 {
    let logit = bias
        + features
            .iter()
            .zip(mean.iter().zip(scale))
            .zip(weights)
            .map(|((value, (mean, scale)), weight)| weight * (f64::from(*value) - mean) / scale)
            .sum::<f64>();
    sigmoid(logit)
}

pub fn sigmoid(logit: f64) -> f64 {
    if logit >= 0.0 { 1.0 / (1.0 + (-logit).exp()) } else { logit.exp() / (1.0 + logit.exp()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_renders_the_users_words_before_the_call() {
        let text = render_context(&["fix the failing test".to_owned(), "and run it".to_owned()]).unwrap();
        insta::assert_snapshot!("head_screen_prompt", text);
    }

    #[test]
    fn screen_input_keeps_the_last_three_user_messages_in_order() {
        let user = |text: &str| TranscriptEvent::Known(KnownEvent::User { text: text.to_owned() });
        let transcript = vec![
            user("one"),
            user("two"),
            TranscriptEvent::Known(KnownEvent::Assistant { text: "ok".into() }),
            user("three"),
            user("four"),
        ];
        let call = PendingCall {
            id: "c1".into(),
            name: "Bash".into(),
            input: serde_json::json!({ "command": "cargo test" }).as_object().unwrap().clone(),
            annotations: None,
        };
        let input = ScreenInput::of(&transcript, &call);
        assert_eq!(input.user_messages, ["two", "three", "four"]);
        assert_eq!(input.call, r#"Bash {"command":"cargo test"}"#);
        let long = "é".repeat(USER_MESSAGE_CHARS + 10);
        let input = ScreenInput::of(&[user(&long)], &call);
        assert_eq!(input.user_messages[0].chars().count(), USER_MESSAGE_CHARS);
    }

    #[test]
    fn sigmoid_is_stable_at_the_extremes() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert!(sigmoid(800.0) <= 1.0 && sigmoid(-800.0) >= 0.0);
        assert!((sigmoid(2.0) + sigmoid(-2.0) - 1.0).abs() < 1e-12);
    }
}
