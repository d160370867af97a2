//! The `local` backend: a GGUF model run in-process on the CPU with candle (pure Rust, no C
//! toolchain, no network). It is the embedded default.
//!
//! - *Decision style*: each option's full answer (its id, then the end-of-turn token) is scored
//!   by teacher forcing from the shared prompt: one pass over the prompt, then each option's
//!   continuation from the same cached state. P(option) is the normalised sequence probability.
//!   No sampling: the same request always gets the same numbers.
//! - *Text style* (a local review model that reasons): greedy generation up to
//!   `max_new_tokens`, read by the same strict parser as remote text answers.
//!
//! Speed: the key/value state of the longest cached token prefix is reused (the policy prompt
//! is the same in every decision), bounded by `prefix_cache_mib`; small models' weights are
//! expanded to f32 at load; the thread count is configurable.
//!
//! Concurrency: the model is loaded once and decisions run **one at a time**. A forward pass
//! already keeps every configured core busy (the matrix products are split across the thread
//! pool), so two passes at once would only share the same cores, double the memory for
//! activations and make each decision slower; batching would help the token-by-token decode
//! of long generations, but a screen is dominated by its prompt pass, which is already a
//! matrix-matrix product. Waiters queue on a semaphore and give up at their stage deadline.
//!
//! On failure: a model that cannot be loaded stops startup with an error naming the file and
//! what is wrong. At decision time an over-long prompt is `OverBudget`, a passed deadline or an
//! abandoned call is `Timeout` (checked between prompt chunks, options and generated tokens),
//! and any tensor or tokenizer error is `Unavailable`; the pipeline fails all of them closed.

pub mod chat;
pub mod head;
pub mod prefix_cache;
pub mod tokenizer;
pub mod transformer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use candle_core::IndexOp;
use candle_core::quantized::gguf_file::{Content, Value};

use crate::config::ModelStyle;
pub use crate::config::WeightFormat;
use crate::model::{BoxFuture, Choice, DecisionModel, ModelAnswer, ModelError, ModelRequest, Question, Usage, answer};

use transformer::{KvCache, Logits, Transformer};

/// Prompt tokens fed per forward pass: small enough to check the deadline often, large enough
/// to keep the matrix products efficient.
const PREFILL_CHUNK: usize = 256;

/// Settles candle's thread pools before any thread starts; call it first thing in `main`.
///
/// candle runs element-wise operations on a pool of its own whose idle workers spin for
/// 25,000 rounds before sleeping, while the matrix products run on rayon. On a two-core machine
/// the spinning steals a core from the products: without spinning a decision is about 20 %
/// faster (measured with `scripts/bench-local.sh`). candle reads the spin limit from the
/// environment once, and setting the environment is only sound while the process has a single
/// thread, so this must run before the async runtime or anything else spawns one. A value the
/// user set is left alone.
///
/// # Safety
/// No other thread may exist (or read the environment) while it runs: it calls
/// [`std::env::set_var`].
pub unsafe fn tune_candle_threads() {
    const SPIN_LIMIT: &str = "CANDLE_BARRIER_POOL_SPIN_LIMIT";
    if std::env::var_os(SPIN_LIMIT).is_none() {
        // SAFETY: the caller guarantees that this is the only thread.
        unsafe { std::env::set_var(SPIN_LIMIT, "0") };
    }
}

/// Why a local model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "the model file `{0}` does not exist; run `scripts/fetch-model.sh` to fetch the demo model, or set `path` to a GGUF file"
    )]
    Missing(PathBuf),
    #[error("cannot read the model file `{path}`: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("`{path}` is not a GGUF model file: {message}")]
    NotGguf { path: PathBuf, message: String },
    #[error("the model's metadata is unusable: {0}")]
    Metadata(String),
    #[error("this model is not supported: {0}")]
    Unsupported(String),
    #[error("the model's tensor `{name}` cannot be loaded: {message}")]
    Tensor { name: String, message: String },
    #[error("cannot start the model's thread pool: {0}")]
    Threads(String),
    #[error(transparent)]
    Head(#[from] head::HeadError),
    #[error("`style = \"head\"` needs `head = \"FILE\"`, a head written by `permit train`")]
    HeadMissing,
}

impl LoadError {
    fn tensor(name: &str, error: candle_core::Error) -> Self {
        LoadError::Tensor { name: name.to_owned(), message: error.to_string() }
    }
}

/// Everything `local` reads from its config table.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalSettings {
    pub path: PathBuf,
    pub threads: Option<usize>,
    pub max_new_tokens: u32,
    pub style: ModelStyle,
    pub weights: WeightFormat,
    pub prefix_cache_mib: u32,
    /// The trained head (`style = "head"`).
    pub head: Option<PathBuf>,
}

/// What loading found, for `check-config` and the startup log.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LoadReport {
    pub path: PathBuf,
    pub architecture: String,
    pub layers: usize,
    pub context: usize,
    pub vocab: usize,
    pub f32_weights: bool,
    pub threads: usize,
    pub pre_tokenizer: String,
    pub chat_template: &'static str,
    pub chat_template_fallback: Option<String>,
    pub prefix_cache_tokens: usize,
    pub load_ms: u64,
}

struct Loaded {
    transformer: Transformer,
    tokenizer: tokenizer::GgufTokenizer,
    chat: chat::ChatTemplate,
    pool: rayon::ThreadPool,
    cache: Mutex<prefix_cache::PrefixCache>,
    settings: LocalSettings,
    /// The trained head, in head style.
    head: Option<head::HeadFile>,
}

pub struct LocalBackend {
    loaded: Arc<Loaded>,
    /// One decision at a time (see the module header).
    turn: Arc<tokio::sync::Semaphore>,
    name: String,
    report: LoadReport,
}

/// Cancels the blocking work when the caller stops waiting (stage timeout, dropped request).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// When the work must stop: a deadline and a cancel flag.
struct Stop<'a> {
    started: Instant,
    deadline: Option<Instant>,
    cancelled: &'a AtomicBool,
}

impl Stop<'_> {
    fn check(&self) -> Result<(), ModelError> {
        let late = self.deadline.is_some_and(|deadline| Instant::now() >= deadline);
        if late || self.cancelled.load(Ordering::Relaxed) {
            return Err(ModelError::Timeout(elapsed_ms(self.started)));
        }
        Ok(())
    }
}

fn elapsed_ms(since: Instant) -> u64 {
    since.elapsed().as_millis().try_into().unwrap_or(u64::MAX)
}

fn tensor_error(error: candle_core::Error) -> ModelError {
    ModelError::Unavailable("local".to_owned(), format!("the forward pass failed: {error}"))
}

/// A tokenizer or template error at decision time, with its own message.
fn unavailable(error: impl std::fmt::Display) -> ModelError {
    ModelError::Unavailable("local".to_owned(), error.to_string())
}

fn read_content(path: &Path) -> Result<(Content, std::fs::File), LoadError> {
    let mut file = std::fs::File::open(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            LoadError::Missing(path.to_owned())
        } else {
            LoadError::Read { path: path.to_owned(), source }
        }
    })?;
    // candle's reader trusts the header's counts and lengths; a corrupt file could ask it to
    // allocate without bound or panic, so the header is refused before candle reads it when
    // it is not GGUF, and a panic inside candle is caught and reported as a bad file.
    let mut magic = [0u8; 4];
    std::io::Read::read_exact(&mut file, &mut magic).map_err(|_| LoadError::NotGguf {
        path: path.to_owned(),
        message: "the file is shorter than a header".to_owned(),
    })?;
    if &magic != b"GGUF" {
        return Err(LoadError::NotGguf { path: path.to_owned(), message: "it does not start with `GGUF`".to_owned() });
    }
    std::io::Seek::rewind(&mut file).map_err(|source| LoadError::Read { path: path.to_owned(), source })?;
    let content = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Content::read(&mut file)))
        .map_err(|_| LoadError::NotGguf { path: path.to_owned(), message: "its header is corrupt".to_owned() })?
        .map_err(|error| LoadError::NotGguf { path: path.to_owned(), message: error.to_string() })?;
    Ok((content, file))
}

impl LocalBackend {
    pub fn load(settings: LocalSettings) -> Result<Self, LoadError> {
        let started = Instant::now();
        let (content, mut file) = read_content(&settings.path)?;
        let shape = transformer::Shape::from_metadata(&content)?;
        let tokenizer = tokenizer::GgufTokenizer::from_metadata(&content)?;
        let template = match content.metadata.get("tokenizer.chat_template") {
            Some(Value::String(template)) => Some(template.as_str()),
            _ => None,
        };
        let token_text = |id: Option<u32>| id.and_then(|id| tokenizer.token_text(id)).unwrap_or_default();
        let chat = chat::ChatTemplate::new(template, token_text(tokenizer.bos), token_text(Some(tokenizer.eos)))
            .map_err(|error| LoadError::Metadata(error.to_string()))?;
        let f32_weights = match settings.weights {
            WeightFormat::F32 => true,
            WeightFormat::Quantized => false,
            WeightFormat::Auto => transformer::f32_bytes(&content) <= transformer::AUTO_F32_LIMIT_BYTES,
        };
        let threads = settings.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|index| format!("permit-model-{index}"))
            .build()
            .map_err(|error| LoadError::Threads(error.to_string()))?;
        let transformer = pool.install(|| Transformer::load(&content, &mut file, shape, f32_weights))?;
        let shape = transformer.shape().clone();
        let budget_bytes = u64::from(settings.prefix_cache_mib) << 20;
        let prefix_cache_tokens = usize::try_from(budget_bytes / shape.kv_bytes_per_token().max(1) as u64).unwrap_or(0);
        let stem = settings.path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
        let report = LoadReport {
            path: settings.path.clone(),
            architecture: shape.architecture.clone(),
            layers: shape.layers,
            context: shape.context,
            vocab: shape.vocab,
            f32_weights,
            threads,
            pre_tokenizer: tokenizer.pre_tokenizer.clone(),
            chat_template: chat.source,
            chat_template_fallback: chat.fallback_reason.clone(),
            prefix_cache_tokens,
            load_ms: elapsed_ms(started),
        };
        if let Some(reason) = &report.chat_template_fallback {
            tracing::warn!(model = %settings.path.display(), "using ChatML: {reason}");
        }
        let head = match (settings.style, &settings.head) {
            (ModelStyle::Head, None) => return Err(LoadError::HeadMissing),
            (ModelStyle::Head, Some(head_path)) => {
                let digest = head::file_sha256(&settings.path)
                    .map_err(|source| LoadError::Read { path: settings.path.clone(), source })?;
                Some(head::HeadFile::load(head_path, &settings.path, &digest, shape.layers, shape.embedding)?)
            }
            _ => None,
        };
        tracing::info!(?report, "local model loaded");
        let loaded = Loaded {
            transformer,
            tokenizer,
            chat,
            pool,
            cache: Mutex::new(prefix_cache::PrefixCache::new(prefix_cache_tokens)),
            settings,
            head,
        };
        Ok(LocalBackend {
            loaded: Arc::new(loaded),
            turn: Arc::new(tokio::sync::Semaphore::new(1)),
            name: format!("local/{stem}"),
            report,
        })
    }

    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// Forgets every cached prefix (the next decision runs cold). For benchmarks and tests.
    pub fn clear_prefix_cache(&self) {
        if let Ok(mut cache) = self.loaded.cache.lock() {
            *cache = prefix_cache::PrefixCache::new(self.report.prefix_cache_tokens);
        }
    }

    /// The token ids the model reads for `question` of `request` in decision style, before any
    /// option: for checking the tokenizer and the chat template against other implementations.
    pub fn decision_prompt(&self, request: &ModelRequest, question: &Question) -> Result<Vec<u32>, ModelError> {
        self.loaded.prompt(request, &answer::option_contract(question))
    }

    /// The trained head's features for one call: the residual stream after `layer`, averaged
    /// over the call's tokens (blocking; no deadline). `permit train` extracts its training
    /// features through this, the same code the head style runs at decision time.
    pub fn head_features(&self, input: &head::ScreenInput, layer: usize) -> Result<Vec<f32>, ModelError> {
        let cancelled = AtomicBool::new(false);
        let stop = Stop { started: Instant::now(), deadline: None, cancelled: &cancelled };
        let loaded = &self.loaded;
        loaded.pool.install(|| loaded.head_features(input, layer, &stop).map(|(features, _, _)| features))
    }

    /// Whether the head reads all of this call (the whole call fits [`head::MAX_CALL_TOKENS`]
    /// and was not cut): a call it does not read whole is never cleared.
    pub fn head_reads_whole_call(&self, input: &head::ScreenInput) -> Result<bool, ModelError> {
        let tokenizer = &self.loaded.tokenizer;
        let call = tokenizer.encode(&tokenizer.neutralise(&input.call)).map_err(unavailable)?;
        Ok(!input.cut && call.len() <= head::MAX_CALL_TOKENS)
    }

    /// The model's shape (layers, hidden width…).
    pub fn shape(&self) -> &transformer::Shape {
        self.loaded.transformer.shape()
    }

    /// Greedy completion of one chat turn (blocking; no deadline): for trying a model by hand and
    /// for tests of the forward pass. Decisions go through [`DecisionModel::answer`].
    pub fn complete(&self, system: &str, user: &str, max_new_tokens: u32) -> Result<String, ModelError> {
        let loaded = &self.loaded;
        let text = loaded
            .chat
            .render(system, user)
            .map_err(|error| ModelError::Unavailable(self.name.clone(), error.to_string()))?;
        let prompt = loaded
            .tokenizer
            .encode(&text)
            .map_err(|error| ModelError::Unavailable(self.name.clone(), error.to_string()))?;
        let cancelled = AtomicBool::new(false);
        let stop = Stop { started: Instant::now(), deadline: None, cancelled: &cancelled };
        let mut usage = Usage::default();
        loaded.pool.install(|| loaded.generate(&prompt, max_new_tokens, &stop, &mut usage))
    }

    async fn call(&self, request: &ModelRequest) -> Result<ModelAnswer, ModelError> {
        let started = Instant::now();
        let waiting = self.turn.clone().acquire_owned();
        let turn = match request.deadline {
            Some(deadline) => tokio::time::timeout_at(deadline.into(), waiting)
                .await
                .map_err(|_| ModelError::Timeout(elapsed_ms(started)))?,
            None => waiting.await,
        }
        .map_err(|_| ModelError::Unavailable(self.name.clone(), "the model was shut down".to_owned()))?;
        let cancelled = Arc::new(AtomicBool::new(false));
        let _cancel = CancelOnDrop(cancelled.clone());
        let loaded = self.loaded.clone();
        let request = request.clone();
        let work = tokio::task::spawn_blocking(move || {
            // Held until the work ends, even when the caller has stopped waiting.
            let _turn = turn;
            let stop = Stop { started, deadline: request.deadline, cancelled: &cancelled };
            loaded.pool.install(|| loaded.answer(&request, &stop))
        });
        work.await
            .map_err(|error| ModelError::Unavailable(self.name.clone(), format!("the model task failed: {error}")))?
    }
}

impl DecisionModel for LocalBackend {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn reports_probabilities(&self) -> bool {
        matches!(self.loaded.settings.style, ModelStyle::Decision | ModelStyle::Head)
    }

    fn is_trained_head(&self) -> bool {
        self.loaded.settings.style == ModelStyle::Head
    }

    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>> {
        Box::pin(self.call(request))
    }

    fn describe(&self) -> Option<String> {
        let report = &self.report;
        let template = match &report.chat_template_fallback {
            Some(reason) => format!("ChatML ({reason})"),
            None => "the file's own".to_owned(),
        };
        let head = match (&self.loaded.head, &self.loaded.settings.head) {
            (Some(head), Some(path)) => format!(
                "; trained head `{}` (layer {}, out-of-fold AUROC {:.3}{})",
                path.display(),
                head.layer,
                head.training.auroc,
                head.threshold
                    .as_ref()
                    .map_or(String::new(), |receipt| format!(", its threshold {:.2}", receipt.threshold))
            ),
            _ => String::new(),
        };
        Some(format!(
            "{} loaded in {} ms: {}, {} layers, {} weights, {} threads, context {}, pre-tokenizer `{}`, chat template {template}, prefix cache {} tokens{head}",
            report.path.display(),
            report.load_ms,
            report.architecture,
            report.layers,
            if report.f32_weights { "f32" } else { "quantized" },
            report.threads,
            report.context,
            report.pre_tokenizer,
            report.prefix_cache_tokens
        ))
    }
}

impl Loaded {
    fn answer(&self, request: &ModelRequest, stop: &Stop) -> Result<ModelAnswer, ModelError> {
        let mut usage = Usage { prompt_tokens: Some(0), completion_tokens: Some(0), cached_tokens: Some(0) };
        match self.settings.style {
            ModelStyle::Decision => {
                let mut choices = Vec::with_capacity(request.questions.len());
                for question in &request.questions {
                    let prompt = self.prompt(request, &answer::option_contract(question))?;
                    choices.push(self.score(&prompt, question, stop, &mut usage)?);
                }
                Ok(ModelAnswer { choices, reasoning: None, usage })
            }
            ModelStyle::Head => {
                let head = self.head.as_ref().ok_or_else(|| {
                    ModelError::Unavailable("local".to_owned(), "head style without a loaded head".to_owned())
                })?;
                let input = request.screen_input.as_ref().ok_or_else(|| {
                    ModelError::Malformed(
                        "a trained head only screens, and this request has no screen input".to_owned(),
                    )
                })?;
                let mut choices = Vec::with_capacity(request.questions.len());
                for question in &request.questions {
                    let [allow, escalate] = question.options else {
                        return Err(ModelError::Malformed(format!(
                            "a trained head answers the screen's two options, not `{}`'s",
                            question.id
                        )));
                    };
                    let (features, tokens, whole) = self.head_features(input, head.layer, stop)?;
                    add(&mut usage.prompt_tokens, tokens);
                    if !whole {
                        // Judged on its start only, a harmful tail would go unseen: the review
                        // (or a person) decides.
                        return Err(ModelError::OverBudget);
                    }
                    let p_allow = head.p_allow(&features);
                    if !p_allow.is_finite() {
                        return Err(ModelError::Malformed("the head's P(allow) is not a number".to_owned()));
                    }
                    // A tie is not a reason to allow.
                    let chosen = if p_allow > 0.5 { allow.id } else { escalate.id };
                    choices.push(Choice {
                        question: question.id.clone(),
                        option: chosen.to_owned(),
                        probabilities: Some(
                            [(allow.id.to_owned(), p_allow), (escalate.id.to_owned(), 1.0 - p_allow)]
                                .into_iter()
                                .collect(),
                        ),
                    });
                }
                Ok(ModelAnswer { choices, reasoning: None, usage })
            }
            ModelStyle::Text => {
                let prompt = self.prompt(request, &answer::text_contract(&request.questions, request.reasoned))?;
                let text = self.generate(&prompt, self.settings.max_new_tokens, stop, &mut usage)?;
                let (choices, reasoning) = answer::parse_text(&text, &request.questions)?;
                Ok(ModelAnswer { choices, reasoning, usage })
            }
        }
    }

    /// The head's features and the number of tokens read: the context from
    /// `prompts/head-screen.md` (its last [`head::MAX_CONTEXT_TOKENS`] tokens), then the call
    /// (its first [`head::MAX_CALL_TOKENS`]), each tokenised on its own so the call's tokens
    /// are exactly known; the residual stream after `layer`, averaged over the call's tokens.
    fn head_features(
        &self,
        input: &head::ScreenInput,
        layer: usize,
        stop: &Stop,
    ) -> Result<(Vec<f32>, usize, bool), ModelError> {
        let tokenizer = &self.tokenizer;
        let messages: Vec<String> = input.user_messages.iter().map(|message| tokenizer.neutralise(message)).collect();
        let context = head::render_context(&messages).map_err(unavailable)?;
        let mut context = tokenizer.encode(&context).map_err(unavailable)?;
        if context.len() > head::MAX_CONTEXT_TOKENS {
            context.drain(..context.len() - head::MAX_CONTEXT_TOKENS);
        }
        let mut call = tokenizer.encode(&tokenizer.neutralise(&input.call)).map_err(unavailable)?;
        let whole = !input.cut && call.len() <= head::MAX_CALL_TOKENS;
        call.truncate(head::MAX_CALL_TOKENS);
        if call.is_empty() {
            return Err(ModelError::Malformed("the call has no tokens".to_owned()));
        }
        let mut tokens: Vec<u32> = tokenizer.bos.into_iter().collect();
        tokens.extend(&context);
        let call_start = tokens.len();
        tokens.extend(&call);
        if tokens.len() > self.transformer.shape().context {
            return Err(ModelError::OverBudget);
        }
        stop.check()?;
        let hidden = self.transformer.hidden_states(&tokens, layer).map_err(tensor_error)?;
        let pooled = hidden
            .narrow(0, call_start, call.len())
            .and_then(|rows| rows.mean(0))
            .and_then(|mean| mean.to_vec1::<f32>())
            .map_err(tensor_error)?;
        if pooled.iter().any(|value| !value.is_finite()) {
            return Err(ModelError::Malformed("the model produced non-finite hidden states".to_owned()));
        }
        Ok((pooled, tokens.len(), whole))
    }

    /// The prompt's token ids: the chat template around the policy (system) and one user message
    /// with the transcript, the question block and the contract.
    fn prompt(&self, request: &ModelRequest, contract: &str) -> Result<Vec<u32>, ModelError> {
        let tokenizer = &self.tokenizer;
        let user = format!(
            "{}\n\n{}{contract}",
            tokenizer.neutralise(&request.transcript),
            tokenizer.neutralise(&request.question_block)
        );
        let text = self.chat.render(&tokenizer.neutralise(&request.system), &user).map_err(unavailable)?;
        tokenizer.encode(&text).map_err(unavailable)
    }

    /// Runs `prompt` from the longest cached prefix; returns the state after it and the
    /// log-probabilities of the next token.
    fn prefill(
        &self,
        prompt: &[u32],
        stop: &Stop,
        usage: &mut Usage,
    ) -> Result<(KvCache, candle_core::Tensor), ModelError> {
        let Some(limit) = prompt.len().checked_sub(1) else {
            return Err(ModelError::Malformed("the prompt is empty".to_owned()));
        };
        let poisoned = || ModelError::Unavailable("local".to_owned(), "the prefix cache is poisoned".to_owned());
        let mut state = self.cache.lock().map_err(|_| poisoned())?.lookup(prompt, limit).map_err(tensor_error)?;
        let reused = state.len();
        let mut last = None;
        for chunk in prompt[reused..].chunks(PREFILL_CHUNK) {
            stop.check()?;
            last = Some(self.transformer.forward(chunk, &mut state, Logits::Last).map_err(tensor_error)?);
        }
        let last = last.ok_or_else(|| ModelError::Malformed("nothing was fed".to_owned()))?;
        self.cache.lock().map_err(|_| poisoned())?.store(prompt, state.clone());
        add(&mut usage.prompt_tokens, prompt.len());
        add(&mut usage.cached_tokens, reused);
        Ok((state, last.i(0).map_err(tensor_error)?))
    }

    fn score(&self, prompt: &[u32], question: &Question, stop: &Stop, usage: &mut Usage) -> Result<Choice, ModelError> {
        let end = self.tokenizer.end_of_turn();
        let continuations = question
            .options
            .iter()
            .map(|option| {
                let mut tokens = self.tokenizer.encode(option.id).map_err(unavailable)?;
                tokens.push(end);
                Ok(tokens)
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        let longest = continuations.iter().map(Vec::len).max().unwrap_or(0);
        if prompt.len() + longest > self.transformer.shape().context {
            return Err(ModelError::OverBudget);
        }
        let (state, first) = self.prefill(prompt, stop, usage)?;
        stop.check()?;
        // Teacher forcing: each option's tokens but the last are fed after the prompt, all
        // options in one pass; row `i` of a branch predicts its token `i + 1`.
        let branches: Vec<&[u32]> = continuations.iter().map(|tokens| &tokens[..tokens.len() - 1]).collect();
        let rows = self.transformer.forward_branches(&branches, &state).map_err(tensor_error)?;
        let mut log_probabilities = Vec::with_capacity(continuations.len());
        for (tokens, rows) in continuations.iter().zip(&rows) {
            let mut total = log_probability(&first, tokens[0])?;
            for (row, token) in tokens[1..].iter().enumerate() {
                total += log_probability(&rows.i(row).map_err(tensor_error)?, *token)?;
            }
            log_probabilities.push(total);
        }
        let probabilities = normalise(&log_probabilities)?;
        // Ties go to the later option: the first option is `allow`, and a tie is not a reason to allow.
        let chosen = probabilities
            .iter()
            .enumerate()
            .fold(0, |best, (index, probability)| if *probability >= probabilities[best] { index } else { best });
        Ok(Choice {
            question: question.id.clone(),
            option: question.options[chosen].id.to_owned(),
            probabilities: Some(
                question.options.iter().zip(probabilities).map(|(option, p)| (option.id.to_owned(), p)).collect(),
            ),
        })
    }

    fn generate(
        &self,
        prompt: &[u32],
        max_new_tokens: u32,
        stop: &Stop,
        usage: &mut Usage,
    ) -> Result<String, ModelError> {
        let context = self.transformer.shape().context;
        if prompt.len() >= context {
            return Err(ModelError::OverBudget);
        }
        let (mut state, mut next) = self.prefill(prompt, stop, usage)?;
        let stops = self.tokenizer.stops();
        let mut output = Vec::new();
        for _ in 0..max_new_tokens {
            let token = next.argmax(0).and_then(|token| token.to_scalar::<u32>()).map_err(tensor_error)?;
            if stops.contains(&token) || state.len() + 1 >= context {
                break;
            }
            output.push(token);
            stop.check()?;
            next = self
                .transformer
                .forward(&[token], &mut state, Logits::Last)
                .and_then(|rows| rows.i(0))
                .map_err(tensor_error)?;
        }
        add(&mut usage.completion_tokens, output.len());
        self.tokenizer.decode(&output).map_err(unavailable)
    }
}

fn add(counter: &mut Option<u64>, amount: usize) {
    *counter = Some(counter.unwrap_or(0) + amount as u64);
}

fn log_probability(row: &candle_core::Tensor, token: u32) -> Result<f64, ModelError> {
    let value = row.i(token as usize).and_then(|value| value.to_scalar::<f32>()).map_err(tensor_error)?;
    if value.is_nan() {
        return Err(ModelError::Malformed("the model produced NaN log-probabilities".to_owned()));
    }
    Ok(f64::from(value))
}

/// Softmax over the options' sequence log-probabilities.
fn normalise(log_probabilities: &[f64]) -> Result<Vec<f64>, ModelError> {
    let max = log_probabilities.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return Err(ModelError::Malformed("every option has zero probability".to_owned()));
    }
    let weights: Vec<f64> = log_probabilities.iter().map(|value| (value - max).exp()).collect();
    let sum: f64 = weights.iter().sum();
    Ok(weights.into_iter().map(|weight| weight / sum).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_is_a_distribution_and_refuses_all_impossible() {
        let probabilities = normalise(&[-1.0, -2.0, -1.0]).unwrap();
        assert!((probabilities.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(probabilities[0] > probabilities[1] && (probabilities[0] - probabilities[2]).abs() < 1e-12);
        assert!(normalise(&[f64::NEG_INFINITY, f64::NEG_INFINITY]).is_err());
        // Very unlikely sequences still normalise without underflow.
        let tiny = normalise(&[-900.0, -901.0]).unwrap();
        assert!((tiny[0] - 0.7310585786).abs() < 1e-9);
    }
}
