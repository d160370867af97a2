//! The TOML config: mode, workspace, tool registry, operator rules, reversibility layer, and the
//! sections later stages read (screen, review, session, server).
//!
//! Loading decides only whether the config is usable. On any problem it returns a
//! [`ConfigError`] that says what to fix, and nothing starts: a service never runs on a config it
//! half understood. Every table rejects unknown keys, because a misspelt key in a security
//! policy must not silently fall back to a default. With no config file at all, the built-in
//! defaults apply (`auto` mode, the Claude Code and Codex presets, no rules).
//!
//! One check is left to the gate: the rules' `match` and `not_match` examples run where the
//! engine compiles the gate, once, before anything starts (`permit check-config` included), so
//! loading never compiles a gate of its own.
//!
//! Each default is written once, in its table's `Default` impl (serde fills missing keys from
//! it), or in `serde_defaults` for the tables that cannot have one.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::request::{Reversibility, ToolAnnotations};

/// Environment variable naming a config file when `--config` is not given.
pub const CONFIG_ENV: &str = "PERMIT_CONFIG";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    // Not `source`: the message already carries the I/O error's text, and `{:#}` would print
    // a source a second time.
    #[error("cannot read config `{path}`: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("config `{path}` is not valid TOML for permit: {message}")]
    Parse { path: String, message: String },
    #[error("config `{path}`: {message}")]
    Invalid { path: String, message: String },
    /// A loaded config changed afterwards (a command-line override) fails a check; the message
    /// names the field, as the override is not in the file.
    #[error("{message}")]
    Overridden { message: String },
}

/// How tiers map to actions (BRIEF.md's table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Mode {
    /// A person approves everything but read-only calls.
    Human,
    /// Read-only and in-workspace writes run; high-tier calls go to the classifier.
    #[default]
    Auto,
    /// Only read-only calls can run unattended, and only when the classifier does not object.
    Reviewer,
    /// Everything but critical runs. For test rigs only.
    ApproveAllDangerous,
}

impl Mode {
    /// The name the config spells it with (serde's, from the same rule; a test reads every
    /// variant back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub mode: Mode,
    pub workspace: WorkspaceConfig,
    pub tools: ToolsConfig,
    pub rules: Vec<RuleConfig>,
    pub reversibility: ReversibilityConfig,
    pub screen: Option<ScreenConfig>,
    pub review: Option<ReviewConfig>,
    pub classifier: ClassifierConfig,
    pub session: SessionConfig,
    pub transcript: TranscriptConfig,
    pub prompts: PromptsConfig,
    pub server: ServerConfig,
}

/// The demo model's file name, as `scripts/fetch-model.sh` installs it.
pub const DEMO_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The embedded default's screen threshold. Deliberately high: the demo model is wiring for
/// offline runs, not a judge, so it may only wave through calls it is all but certain about.
pub const EMBEDDED_SCREEN_THRESHOLD_PERCENT: u8 = 99;

/// The embedded default's screen timeout.
pub const EMBEDDED_SCREEN_TIMEOUT_MS: u64 = 15_000;

/// Which implementations of the standard tools the agent's machine may run, and so which
/// readings of a command line must all be safe before the gate vouches for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Userland {
    /// GNU or BSD (macOS, or macOS with GNU tools from a package manager ahead in `PATH`):
    /// both readings.
    #[default]
    Any,
    /// GNU coreutils, grep, sed and friends only (Linux distributions other than
    /// busybox-based ones, such as Alpine).
    Gnu,
}

/// How error messages name the config: its path, or the built-in defaults.
pub(crate) fn config_origin(path: Option<&std::path::Path>) -> String {
    path.map(|path| path.display().to_string()).unwrap_or_else(|| "built-in defaults".to_owned())
}

/// Where the demo model lives: `$PERMIT_MODEL_DIR`, else `$XDG_DATA_HOME/permit/models`, else
/// `~/.local/share/permit/models` (the same order `scripts/fetch-model.sh` uses), else `models`.
pub fn default_model_dir() -> PathBuf {
    let non_empty = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    if let Some(directory) = non_empty("PERMIT_MODEL_DIR") {
        directory
    } else if let Some(data) = non_empty("XDG_DATA_HOME") {
        data.join("permit").join("models")
    } else if let Some(home) = non_empty("HOME") {
        home.join(".local").join("share").join("permit").join("models")
    } else {
        PathBuf::from("models")
    }
}

impl Config {
    /// The config with no config file: the gate, plus the demo model run locally as the screen
    /// with a high threshold. There is no review model, so every escalation becomes `ask`.
    pub fn embedded_default() -> Self {
        Config {
            screen: Some(ScreenConfig {
                model: ModelConfig::Local {
                    path: default_model_dir().join(DEMO_MODEL_FILE),
                    threads: None,
                    max_new_tokens: DEFAULT_MAX_TOKENS,
                    style: ModelStyle::Decision,
                    weights: WeightFormat::Auto,
                    prefix_cache_mib: DEFAULT_PREFIX_CACHE_MIB,
                    head: None,
                },
                allow_threshold_percent: EMBEDDED_SCREEN_THRESHOLD_PERCENT,
                // Screens run one at a time on the CPU (a cold prompt takes a few seconds on two
                // cores), so the later calls of a batch wait their turn inside this budget.
                timeout_ms: EMBEDDED_SCREEN_TIMEOUT_MS,
            }),
            ..Config::default()
        }
    }
}

/// Files that replace the built-in prompts (`prompts/*.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromptsConfig {
    pub policy: Option<PathBuf>,
    pub screen: Option<PathBuf>,
    pub review: Option<PathBuf>,
    pub batch: Option<PathBuf>,
}

/// How much of the session the models are shown (`[transcript]`); the classifier renders the
/// transcript within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TranscriptConfig {
    /// Estimated tokens the rendered transcript may take; past it the oldest tool calls go.
    pub max_tokens: usize,
    /// String arguments of completed calls are cut to this many characters.
    pub argument_chars: usize,
}

impl Default for TranscriptConfig {
    fn default() -> Self {
        Self { max_tokens: 8_000, argument_chars: 500 }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Treat the request's `cwd` as the workspace. Off means only `roots` count.
    pub use_request_cwd: bool,
    /// Further absolute directories the agent may work in.
    pub roots: Vec<String>,
    /// The user's home, for `~` in paths. Defaults to `$HOME` when permit starts.
    pub home: Option<String>,
    /// Which implementations of sed, grep, ls and the other standard tools the agent's machine
    /// runs. `any` (the default) vouches only for command lines that GNU's tools and macOS's
    /// BSD ones both read safely: BSD `sed -i` takes the next word as a backup suffix, so
    /// `sed -i p 'w FILE' notes.txt` writes FILE there. `gnu` for Linux machines with GNU
    /// tools, which then allows `sed -i 's/a/b/' src/lib.rs`.
    pub userland: Userland,
    /// Where permit runs beside the agent (the hook without `--server`, or with
    /// `--same-config-as-server`), check the facts about the machine that a refusal names
    /// (no git hooks, no `-` names, regular files, plain trees) and judge the call again with
    /// those that hold. On by default; off judges the text alone.
    pub check_facts: bool,
    /// The service (`permit serve`, `permit decide`, the library's engine) runs on the agent's
    /// machine and sees its files (a `permit serve` on the developer's machine that the hook
    /// asks with `--server`): check the facts there too. Off by default: a service elsewhere
    /// would check another machine's files, and evals must not depend on the machine.
    pub facts_in_service: bool,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        Self {
            use_request_cwd: true,
            roots: Vec::new(),
            home: None,
            userland: Default::default(),
            check_facts: true,
            facts_in_service: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    ClaudeCode,
    Codex,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    pub presets: Vec<Preset>,
    /// Use annotations sent inside a request for tools not configured here. Off by default:
    /// they come from the party being judged.
    pub trust_request_annotations: bool,
    /// What the gate does with a tool it does not know (tier `high`): `ask` a person, or let the
    /// classifier judge it (`classify`, for evals of general tool-use data).
    pub unknown: UnknownToolAction,
    /// Tools whose answers pair with their questions in the transcript the models see.
    pub questionnaire: Vec<String>,
    /// Operator-defined tools; a definition replaces a preset tool of the same name.
    pub define: Vec<ToolDefinition>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            presets: vec![Preset::ClaudeCode, Preset::Codex],
            trust_request_annotations: false,
            unknown: UnknownToolAction::default(),
            questionnaire: vec!["AskUserQuestion".to_owned()],
            define: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownToolAction {
    /// Nothing is known about the tool, so a person decides.
    #[default]
    Ask,
    /// The classifier judges it like any other high-tier call.
    Classify,
}

/// An operator-defined tool with MCP-style annotations; a missing hint takes MCP's cautious
/// default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    pub name: String,
    #[serde(flatten)]
    pub annotations: ToolAnnotations,
    #[serde(default)]
    pub arguments: ArgumentSpec,
}

/// Which input fields the gate analyses, and how.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ArgumentSpec {
    /// A field holding a shell command, as a string or an argv array.
    pub shell: Option<String>,
    /// A field that overrides the working directory for the shell command.
    pub workdir: Option<String>,
    /// Fields holding paths the call reads.
    pub read_paths: Vec<String>,
    /// Fields holding paths the call writes.
    pub write_paths: Vec<String>,
    /// A field holding a glob pattern whose fixed prefix is read (Claude Code's Glob).
    pub glob: Option<String>,
    /// A field holding an `apply_patch` patch whose file headers name the paths written.
    pub patch: Option<String>,
    /// Fields holding ripgrep include globs (Claude Code's Grep `glob`): a file one matches is
    /// searched even when hidden or ignored (`.env`, a gitignored `secrets.ts`).
    pub search_globs: Vec<String>,
    /// Fields holding a ripgrep type name (Claude Code's Grep `type`): a type whitelists its
    /// globs past the hidden-file check, so only source-language types are vouched for.
    pub search_types: Vec<String>,
    /// Fields holding the search pattern (Claude Code's Grep `pattern`): a pattern starting
    /// with `-` is not vouched for, since a host that passes it to ripgrep as a bare argument
    /// runs `--pre=./x.sh` as an option.
    pub search_patterns: Vec<String>,
}

impl ArgumentSpec {
    pub fn is_empty(&self) -> bool {
        self == &ArgumentSpec::default()
    }
}

/// What an operator rule does when it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleDecision {
    Allow,
    Classify,
    Ask,
    Deny,
    HardDeny,
}

/// One string or a list of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one.clone()],
            OneOrMany::Many(many) => many.clone(),
        }
    }
}

/// An example call for a rule: a string is the command (shell tools) or the path (file tools);
/// a table is the call's whole input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RuleExample {
    Text(String),
    Input(Map<String, Value>),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    pub id: String,
    /// Tool names or globs (`mcp__github__*`). Examples are checked against the first entry.
    pub tool: OneOrMany,
    /// Shell command prefixes, compared word by word with each part of the command.
    #[serde(default)]
    pub command_prefix: Option<OneOrMany>,
    /// Path globs: relative ones are matched against the path inside the workspace, absolute
    /// ones and `~/…` against the full path.
    #[serde(default)]
    pub path_glob: Option<OneOrMany>,
    pub decision: RuleDecision,
    pub reason: String,
    #[serde(rename = "match", default)]
    pub match_examples: Vec<RuleExample>,
    #[serde(default)]
    pub not_match: Vec<RuleExample>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReversibilityConfig {
    pub enabled: bool,
    /// Costly calls allowed per session before further ones go to a person.
    pub costly_budget_per_session: u32,
}

impl Default for ReversibilityConfig {
    fn default() -> Self {
        Self { enabled: true, costly_budget_per_session: 10 }
    }
}

/// A model endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelConfig {
    /// Any OpenAI-compatible chat completions endpoint (OpenAI, Azure, vLLM, llama.cpp, Ollama,
    /// LiteLLM). `base_url` includes the version path, e.g. `https://api.openai.com/v1`.
    Openai {
        base_url: String,
        model: String,
        /// Environment variable holding the API key; none sends no key (local servers).
        #[serde(default)]
        api_key_env: Option<String>,
        /// Header carrying the key: `authorization` sends `Bearer KEY`; any other name (Azure's
        /// `api-key`) sends the key as is.
        #[serde(default = "serde_defaults::api_key_header")]
        api_key_header: String,
        /// Extra headers sent with every request.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// Query parameters added to every request (Azure's `api-version`).
        #[serde(default)]
        query: BTreeMap<String, String>,
        #[serde(default)]
        style: ModelStyle,
        /// The least probability mass the option labels must hold in decision style.
        #[serde(default = "serde_defaults::min_label_mass")]
        min_label_mass: f64,
        /// How many alternatives to ask for per token in decision style (providers cap it at 20).
        #[serde(default = "serde_defaults::top_logprobs")]
        top_logprobs: u8,
        /// A reasoning model (gpt-5, o-series and the like): no `temperature`, no `logprobs`,
        /// and the token limit sent as `max_completion_tokens`. Text style only.
        #[serde(default)]
        reasoning_model: bool,
        /// `reasoning_effort` sent to a reasoning model (`none`, `minimal`, `low`, `medium`,
        /// `high`, `xhigh`; which ones a model takes varies). Unset sends none: the model's own
        /// default applies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_effort: Option<ReasoningEffort>,
        /// Which token-limit field to send: `max_tokens` (understood by every compatible
        /// server, and the one Ollama honours), `max_completion_tokens`, or `both`.
        #[serde(default)]
        token_limit_field: TokenLimitField,
        /// Output tokens allowed in text style, reasoning included. Unset: 1024, or 4096 for a
        /// reasoning model, whose reasoning shares the limit with the answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u32>,
        /// Ask for a JSON-schema `response_format` in text style (where the server supports it).
        #[serde(default)]
        response_format: bool,
        #[serde(default)]
        http: HttpSettings,
    },
    /// Anthropic's Messages API (text style, prompt caching).
    Anthropic {
        #[serde(default = "serde_defaults::anthropic_url")]
        base_url: String,
        model: String,
        #[serde(default = "serde_defaults::anthropic_key_env")]
        api_key_env: String,
        /// Output tokens allowed, thinking included. Unset: 1024, or 4096 with `thinking`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u32>,
        /// Sampling parameters, each sent only when set. Newer models reject `temperature`
        /// outright and others reject `temperature` with `top_p`, so none is sent by default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        top_p: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        top_k: Option<u32>,
        /// Extended or adaptive thinking, e.g. `thinking = { type = "adaptive" }` or
        /// `thinking = { type = "enabled", budget_tokens = 2048 }`. Unset sends none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<AnthropicThinking>,
        /// `output_config.effort` (`low`, `medium`, `high`, `xhigh`, `max`). Unset sends none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<AnthropicEffort>,
        #[serde(default)]
        headers: BTreeMap<String, String>,
        #[serde(default)]
        http: HttpSettings,
    },
    /// A GGUF model run in-process on the CPU (llama and qwen2 architectures, byte-level BPE
    /// tokenizers). `decision` style scores every option exactly; `text` style generates greedily.
    Local {
        /// The `.gguf` file. Relative paths are relative to the working directory.
        path: PathBuf,
        /// Threads for the forward pass; defaults to the machine's cores.
        #[serde(default)]
        threads: Option<usize>,
        /// Tokens generated at most in text style.
        #[serde(default = "serde_defaults::max_new_tokens")]
        max_new_tokens: u32,
        #[serde(default)]
        style: ModelStyle,
        /// `auto` (f32 up to 2 GiB of expanded weights, else as stored), `f32` or `quantized`.
        #[serde(default)]
        weights: WeightFormat,
        /// Memory for the key/value state of recent prompts, reused by prompts that share a prefix.
        #[serde(default = "serde_defaults::prefix_cache_mib")]
        prefix_cache_mib: u32,
        /// `style = "head"` only: a head file written by `permit train`, e.g.
        /// `head = "examples/head-smollm2-135m.json"`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        head: Option<PathBuf>,
    },
}

/// An OpenAI reasoning model's `reasoning_effort`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ReasoningEffort {
    /// `none`: no reasoning (models from gpt-5.1 on).
    #[serde(rename = "none")]
    #[strum(serialize = "none")]
    NoReasoning,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl ReasoningEffort {
    /// The name the config spells it with (serde's, from the same rule; a test reads every
    /// variant back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Anthropic's `thinking` setting, sent as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AnthropicThinking {
    /// A fixed thinking budget (`budget_tokens` at least 1024 and below `max_tokens`). Newer
    /// models (Claude 4.7 on) reject it; use `adaptive` there.
    Enabled {
        budget_tokens: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display: Option<ThinkingDisplay>,
    },
    /// The model decides how much to think; `effort` steers it.
    Adaptive {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        display: Option<ThinkingDisplay>,
    },
    /// Thinking explicitly off.
    Disabled,
}

/// Whether thinking text comes back (`summarized`) or only its signature (`omitted`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingDisplay {
    Summarized,
    Omitted,
}

/// Anthropic's `output_config.effort`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnthropicEffort {
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

/// How a local model's weights are held in memory (`weights`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WeightFormat {
    /// f32 when the expanded weights take at most
    /// [`AUTO_F32_LIMIT_BYTES`](crate::model::local::transformer::AUTO_F32_LIMIT_BYTES), else
    /// quantized.
    #[default]
    Auto,
    /// Expanded to f32 at load: about eight times faster on CPU than candle's quantized kernels,
    /// at four bytes per parameter.
    F32,
    /// Kept as stored in the file (Q4, Q8, …): small, slower.
    Quantized,
}

/// Anthropic's smallest thinking budget.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// `max_tokens` when none is configured and the model reasons (an OpenAI reasoning model,
/// Anthropic with `thinking`): reasoning shares the limit with the answer, and 1024 tokens
/// cut a reasoned review off before its answer line.
const REASONING_MAX_TOKENS: u32 = 4096;

/// `max_tokens` of a remote model when none is configured and it does not reason, and a local
/// model's `max_new_tokens`.
const DEFAULT_MAX_TOKENS: u32 = 1024;

/// A local model's `prefix_cache_mib` when none is configured.
const DEFAULT_PREFIX_CACHE_MIB: u32 = 128;

impl ModelConfig {
    /// The output-token limit a remote backend sends: the configured one, else the default for
    /// the kind of model.
    pub fn effective_max_tokens(&self) -> u32 {
        match self {
            ModelConfig::Openai { max_tokens, reasoning_model, .. } => {
                max_tokens.unwrap_or(if *reasoning_model { REASONING_MAX_TOKENS } else { DEFAULT_MAX_TOKENS })
            }
            ModelConfig::Anthropic { max_tokens, thinking, .. } => {
                let thinks =
                    matches!(thinking, Some(AnthropicThinking::Enabled { .. } | AnthropicThinking::Adaptive { .. }));
                max_tokens.unwrap_or(if thinks { REASONING_MAX_TOKENS } else { DEFAULT_MAX_TOKENS })
            }
            ModelConfig::Local { max_new_tokens, .. } => *max_new_tokens,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenLimitField {
    #[default]
    MaxTokens,
    MaxCompletionTokens,
    Both,
}

/// Timeouts, retries and the circuit breaker of a remote backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSettings {
    /// One HTTP attempt may take at most this long (the stage timeout bounds all attempts).
    pub request_timeout_ms: u64,
    /// Attempts per model call, retries included (connect errors, 408, 429, 5xx).
    pub max_attempts: u32,
    pub initial_backoff_ms: u64,
    pub max_backoff_ms: u64,
    /// After this many consecutive failed calls the backend fails fast for `breaker_cooldown_ms`.
    pub breaker_failures: u32,
    pub breaker_cooldown_ms: u64,
    /// A response body longer than this is refused (`response_too_large`) as soon as it is
    /// known to be: an answer is a few kilobytes, so anything near the cap is a broken or
    /// hostile server, and reading it whole would cost memory and parse time.
    pub max_response_bytes: u64,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            request_timeout_ms: 30_000,
            max_attempts: 3,
            initial_backoff_ms: 200,
            max_backoff_ms: 5_000,
            breaker_failures: 5,
            breaker_cooldown_ms: 30_000,
            // A chat completion or Messages answer is a few kilobytes even with reasoning (a
            // 1,024-token completion is about 4 KiB); 1 MiB leaves room for verbose servers and
            // long reasoning.
            max_response_bytes: 1024 * 1024,
        }
    }
}

/// Bounds on the model work of the classifier stages, per request and per process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassifierConfig {
    /// How many of one request's classified calls the models judge. Each costs at most one
    /// screen call and the escalated ones share one review call, so a request makes at most
    /// this many plus one model calls. Classified calls past it are `ask` (`model_call_limit`).
    pub max_calls_per_request: usize,
    /// Model calls in flight at once in this process, screens and reviews together. A call
    /// that gets no slot before its stage's `timeout_ms` fails closed (`model_busy`).
    pub max_concurrent_model_calls: usize,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        Self {
            // Agents emit a handful of parallel tool calls per turn (Claude Code rarely more
            // than ten); a request with more is unusual enough for a person to look at.
            max_calls_per_request: 16,
            // Enough for the screens of a few concurrent requests; beyond it, calls queue
            // inside their stage's time rather than pile onto a provider that is slow or
            // rate-limiting.
            max_concurrent_model_calls: 16,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelStyle {
    /// One output token with log-probabilities over single-token labels.
    #[default]
    Decision,
    /// A JSON answer on the last line, optionally after reasoning.
    Text,
    /// `backend = "local"` screens only: a logistic head trained by `permit train` reads the
    /// model's hidden states (`head = "FILE"`). See the README's "A trained head".
    Head,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScreenConfig {
    pub model: ModelConfig,
    /// The screen skips review only when it chose allow with P(allow) at least this / 100.
    #[serde(default = "serde_defaults::screen_allow_threshold_percent")]
    pub allow_threshold_percent: u8,
    #[serde(default = "serde_defaults::screen_timeout_ms")]
    pub timeout_ms: u64,
}

impl ScreenConfig {
    /// `allow_threshold_percent` when none is configured.
    pub const DEFAULT_ALLOW_THRESHOLD_PERCENT: u8 = 95;
    /// `timeout_ms` when none is configured.
    pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    #[default]
    Ask,
    Deny,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDeny {
    #[default]
    Deny,
    Ask,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewConfig {
    pub model: ModelConfig,
    #[serde(default)]
    pub on_error: OnError,
    #[serde(default)]
    pub on_deny: OnDeny,
    #[serde(default = "serde_defaults::review_timeout_ms")]
    pub timeout_ms: u64,
}

impl ReviewConfig {
    /// `timeout_ms` when none is configured.
    pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    pub max_consecutive_denials: u32,
    pub max_total_denials: u32,
    /// Sessions idle longer than this are forgotten.
    pub ttl_secs: u64,
    /// At most this many sessions are tracked; the least recently seen is forgotten first
    /// (memory store; Redis bounds its keys with `ttl_secs` alone).
    pub max_sessions: usize,
    /// Where session state lives: this process's memory, or Redis shared by every replica.
    pub store: SessionStoreKind,
    /// `redis://[user:password@]host:port[/db]` or `unix:///path/to/socket`; needed by `store = "redis"`.
    pub redis_url: Option<String>,
    /// Prepended to every Redis key, so several deployments can share one Redis.
    pub key_prefix: String,
    /// The longest one Redis call may take, waiting for a connection included; then the call
    /// that needed it is `ask` (`session_store_unavailable`).
    pub timeout_ms: u64,
    /// The longest one attempt to (re)connect to Redis may take.
    pub connect_timeout_ms: u64,
}

/// Where session state lives (`session.store`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SessionStoreKind {
    /// This process's memory: one replica.
    #[default]
    Memory,
    /// Redis, shared by every replica that names the same `redis_url` and `key_prefix`.
    Redis,
}

impl SessionStoreKind {
    /// The name the config spells it with (serde's, from the same rule; a test reads every
    /// variant back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_consecutive_denials: 3,
            max_total_denials: 20,
            ttl_secs: 24 * 3600,
            max_sessions: 10_000,
            store: SessionStoreKind::default(),
            redis_url: None,
            key_prefix: "permit:".to_owned(),
            // A Redis call on loopback or in one datacenter takes well under a millisecond;
            // 250 ms leaves room for a busy server while keeping a Redis outage far inside
            // every stage's deadline.
            timeout_ms: 250,
            connect_timeout_ms: 1_000,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The address to listen on, checked when the config is parsed.
    #[serde(deserialize_with = "deserialize_bind")]
    pub bind: SocketAddr,
    /// Environment variable holding bearer tokens, comma-separated.
    pub tokens_env: Option<String>,
    /// File holding bearer tokens, one a line.
    pub tokens_file: Option<PathBuf>,
    pub body_limit_bytes: usize,
    pub decision_timeout_ms: u64,
    /// Decide and feedback requests being parsed, gated or rendered at once (their bodies
    /// already read); more get 503. Requests waiting on a model do not count here.
    pub max_concurrency: usize,
    /// Decide requests waiting on a model at once. When all are taken, a request's classified
    /// calls are `ask` (`model_busy`) at once, while its gate-settled calls keep their answers.
    pub max_model_concurrency: usize,
    /// Open client connections; further ones wait in the kernel's accept queue.
    pub max_connections: usize,
    /// Time a client has to send a request's headers, counted from the connection opening or
    /// from the end of the previous response (so it is also the keep-alive idle timeout).
    pub header_read_timeout_ms: u64,
    /// Time a client has to send a request's body once its headers are in; then 408.
    pub body_read_timeout_ms: u64,
    pub audit_log: Option<PathBuf>,
    pub audit_rotate_bytes: u64,
    /// When a decision's audit line must be on disk: see [`AuditSync`].
    pub audit_sync: AuditSync,
    pub shutdown_grace_secs: u64,
}

/// When a decision's audit line must be on disk (`server.audit_sync`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditSync {
    /// The line is handed to the writer before the response and written at once; the file is
    /// fsynced every second. A crash can lose the lines of decisions already answered.
    #[default]
    Interval,
    /// The response waits until the line is written and fsynced (lines waiting together share
    /// one write and one fsync); if that fails, an `allow` is answered `ask`.
    Decision,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8787)),
            tokens_env: None,
            tokens_file: None,
            body_limit_bytes: 2 * 1024 * 1024,
            decision_timeout_ms: 60_000,
            max_concurrency: 64,
            // As many as decision slots, so a healthy model serves the same load as before the
            // split; a hanging one holds these and never the decision slots.
            max_model_concurrency: 64,
            // Each connection may buffer a body of up to `body_limit_bytes` (2 MiB) while it is
            // read, so 256 bounds that memory near 512 MiB; agent hosts keep a few connections
            // each.
            max_connections: 256,
            // Headers are a few hundred bytes; 10 s is generous for any real client and lets a
            // client that never finishes its headers hold a connection for at most that long.
            header_read_timeout_ms: 10_000,
            // A 2 MiB body takes 16 s at 1 Mbit/s; 30 s leaves room on slow links.
            body_read_timeout_ms: 30_000,
            audit_log: None,
            audit_rotate_bytes: 100 * 1024 * 1024,
            audit_sync: AuditSync::default(),
            shutdown_grace_secs: 30,
        }
    }
}

/// A `server.bind` (or `--bind`) that is not a socket address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`server.bind` `{0}` is not an address such as `127.0.0.1:8787`")]
pub struct BindAddressError(pub String);

/// Parses a listen address, as `server.bind` and `permit serve --bind` take it.
pub fn parse_bind_address(text: &str) -> Result<SocketAddr, BindAddressError> {
    text.parse().map_err(|_| BindAddressError(text.to_owned()))
}

/// `server.bind` through [`parse_bind_address`], so a bad address is refused with a message
/// naming the field rather than serde's bare "invalid socket address syntax".
fn deserialize_bind<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_bind_address(&text).map_err(serde::de::Error::custom)
}

/// Defaults of fields that have no container-level `#[serde(default)]` to come from: the fields
/// of [`ModelConfig`]'s variants and of [`ScreenConfig`] and [`ReviewConfig`], whose required
/// `model` rules out a `Default` impl. Serde's `default = "…"` takes only a function.
mod serde_defaults {
    use super::{DEFAULT_MAX_TOKENS, DEFAULT_PREFIX_CACHE_MIB, ReviewConfig, ScreenConfig};

    pub(super) fn api_key_header() -> String {
        "authorization".to_owned()
    }
    pub(super) fn min_label_mass() -> f64 {
        0.5
    }
    pub(super) fn top_logprobs() -> u8 {
        20
    }
    pub(super) fn anthropic_url() -> String {
        "https://api.anthropic.com".to_owned()
    }
    pub(super) fn anthropic_key_env() -> String {
        "ANTHROPIC_API_KEY".to_owned()
    }
    pub(super) fn max_new_tokens() -> u32 {
        DEFAULT_MAX_TOKENS
    }
    pub(super) fn prefix_cache_mib() -> u32 {
        DEFAULT_PREFIX_CACHE_MIB
    }
    pub(super) fn screen_allow_threshold_percent() -> u8 {
        ScreenConfig::DEFAULT_ALLOW_THRESHOLD_PERCENT
    }
    pub(super) fn screen_timeout_ms() -> u64 {
        ScreenConfig::DEFAULT_TIMEOUT_MS
    }
    pub(super) fn review_timeout_ms() -> u64 {
        ReviewConfig::DEFAULT_TIMEOUT_MS
    }
}

impl Config {
    /// Parses and validates a config. `origin` names the source in error messages.
    pub fn from_toml_str(origin: &str, text: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|error| ConfigError::Parse {
            path: origin.to_owned(),
            message: error.to_string().trim_end().to_owned(),
        })?;
        config.validate().map_err(|message| ConfigError::Invalid { path: origin.to_owned(), message })?;
        // The rules' examples are checked where the gate is compiled (`Gate::new`, once per
        // engine), not here: compiling it twice would run every example twice at start.
        Ok(config)
    }

    /// Checks a config changed after loading (a command-line override) as a loaded one is.
    pub fn revalidated(config: Config) -> Result<Self, ConfigError> {
        config.validate().map_err(|message| ConfigError::Overridden { message })?;
        Ok(config)
    }

    /// Loads the config at `path`, or the embedded default ([`Config::embedded_default`]) when
    /// `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::embedded_default());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|cause| ConfigError::Read { path: path.display().to_string(), cause })?;
        Self::from_toml_str(&path.display().to_string(), &text)
    }

    /// The field-level checks that serde cannot express.
    fn validate(&self) -> Result<(), String> {
        if let Some(home) = &self.workspace.home
            && !home.starts_with('/')
        {
            return Err(format!("`workspace.home` must be an absolute path, got `{home}`"));
        }
        for (index, root) in self.workspace.roots.iter().enumerate() {
            if !root.starts_with('/') {
                return Err(format!("`workspace.roots[{index}]` must be an absolute path, got `{root}`"));
            }
        }
        let mut tool_names = HashSet::new();
        for (index, tool) in self.tools.define.iter().enumerate() {
            if tool.name.trim().is_empty() {
                return Err(format!("`tools.define[{index}].name` must not be empty"));
            }
            if !tool_names.insert(tool.name.as_str()) {
                return Err(format!("`tools.define[{index}]`: tool `{}` is defined twice", tool.name));
            }
            let arguments = &tool.arguments;
            if arguments.workdir.is_some() && arguments.shell.is_none() {
                return Err(format!(
                    "`tools.define[{index}]` (`{}`): `arguments.workdir` needs `arguments.shell`",
                    tool.name
                ));
            }
        }
        let mut rule_ids = HashSet::new();
        for (index, rule) in self.rules.iter().enumerate() {
            let valid_id = !rule.id.is_empty()
                && rule.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
            if !valid_id {
                return Err(format!(
                    "`rules[{index}].id` `{}` must be non-empty letters, digits, `-`, `_` or `.`",
                    rule.id
                ));
            }
            if !rule_ids.insert(rule.id.as_str()) {
                return Err(format!("`rules[{index}].id` `{}` is used twice", rule.id));
            }
            if rule.reason.trim().is_empty() {
                return Err(format!("rule `{}`: `reason` must say why the rule exists", rule.id));
            }
            if rule.match_examples.is_empty() {
                return Err(format!(
                    "rule `{}`: add at least one `match` example, e.g. match = [\"…\"]; examples are checked when the config loads",
                    rule.id
                ));
            }
            if rule.command_prefix.is_some() && rule.path_glob.is_some() {
                return Err(format!(
                    "rule `{}`: give `command_prefix` or `path_glob`, not both; split it into two rules",
                    rule.id
                ));
            }
            if rule.tool.to_vec().is_empty() {
                return Err(format!("rule `{}`: `tool` must name at least one tool", rule.id));
            }
        }
        if let Some(screen) = &self.screen {
            if !(50..=100).contains(&screen.allow_threshold_percent) {
                return Err(format!(
                    "`screen.allow_threshold_percent` must be within 50..=100, got {}",
                    screen.allow_threshold_percent
                ));
            }
            if screen.timeout_ms == 0 {
                return Err("`screen.timeout_ms` must be greater than 0".to_owned());
            }
            validate_model("screen.model", &screen.model)?;
        }
        if let Some(review) = &self.review {
            if review.timeout_ms == 0 {
                return Err("`review.timeout_ms` must be greater than 0".to_owned());
            }
            validate_model("review.model", &review.model)?;
            if let ModelConfig::Local { style: ModelStyle::Head, .. } = review.model {
                return Err(
                    "`review.model`: a trained head only screens (it can let a call skip the review, never decide it); use `style = \"text\"`"
                        .to_owned(),
                );
            }
            if let ModelConfig::Openai { style: ModelStyle::Decision, .. } = review.model {
                return Err(
                    "`review.model`: the review reasons and answers several options, so it needs `style = \"text\"`"
                        .to_owned(),
                );
            }
        }
        let classifier = &self.classifier;
        if !(1..=1024).contains(&classifier.max_calls_per_request)
            || !(1..=1024).contains(&classifier.max_concurrent_model_calls)
        {
            return Err(
                "`classifier.max_calls_per_request` and `classifier.max_concurrent_model_calls` must be within 1..=1024"
                    .to_owned(),
            );
        }
        if self.transcript.max_tokens < 256 || self.transcript.argument_chars == 0 {
            return Err(
                "`transcript.max_tokens` must be at least 256 and `transcript.argument_chars` at least 1".to_owned()
            );
        }
        let session = &self.session;
        if session.max_consecutive_denials == 0 || session.max_total_denials == 0 {
            return Err(
                "`session.max_consecutive_denials` and `session.max_total_denials` must be at least 1".to_owned()
            );
        }
        if session.max_sessions == 0 || session.ttl_secs == 0 {
            return Err("`session.max_sessions` and `session.ttl_secs` must be at least 1".to_owned());
        }
        self.validate_session_store()?;
        self.validate_server()
    }

    fn validate_session_store(&self) -> Result<(), String> {
        let session = &self.session;
        if session.timeout_ms == 0 || session.connect_timeout_ms == 0 {
            return Err("`session.timeout_ms` and `session.connect_timeout_ms` must be greater than 0".to_owned());
        }
        // A session call must end well inside the request's deadline, or a slow Redis would
        // turn every classified call into `decision_timeout` instead of its own reason code.
        if session.timeout_ms >= self.server.decision_timeout_ms {
            return Err(format!(
                "`session.timeout_ms` ({}) must be less than `server.decision_timeout_ms` ({})",
                session.timeout_ms, self.server.decision_timeout_ms
            ));
        }
        if session.key_prefix.is_empty()
            || session.key_prefix.len() > 64
            || !session.key_prefix.chars().all(|character| character.is_ascii_graphic())
        {
            return Err(format!(
                "`session.key_prefix` `{}` must be 1 to 64 visible ASCII characters",
                session.key_prefix
            ));
        }
        match (session.store, &session.redis_url) {
            (SessionStoreKind::Memory, Some(_)) => Err(
                "`session.redis_url` is set but `session.store` is `memory`; set `store = \"redis\"` or remove the URL"
                    .to_owned(),
            ),
            (SessionStoreKind::Memory, None) => Ok(()),
            (SessionStoreKind::Redis, None) => {
                Err("`session.store` is `redis` but no `session.redis_url` is set".to_owned())
            }
            (SessionStoreKind::Redis, Some(url)) => {
                if url.starts_with("redis://") || url.starts_with("unix://") {
                    Ok(())
                } else if url.starts_with("rediss://") {
                    Err("`session.redis_url`: TLS (`rediss://`) is not built in; reach Redis over a private network or a local TLS proxy".to_owned())
                } else {
                    // The URL may carry a password: never echo it.
                    Err("`session.redis_url` must start with `redis://` or `unix://`".to_owned())
                }
            }
        }
    }

    fn validate_server(&self) -> Result<(), String> {
        let server = &self.server;
        if !server.bind.ip().is_loopback() && server.tokens_env.is_none() && server.tokens_file.is_none() {
            return Err(format!(
                "`server.bind` `{}` is reachable from other machines but no tokens are configured; set `server.tokens_env` or `server.tokens_file`, or bind to 127.0.0.1",
                server.bind
            ));
        }
        if server.body_limit_bytes == 0 || server.max_concurrency == 0 || server.decision_timeout_ms == 0 {
            return Err("`server.body_limit_bytes`, `server.max_concurrency` and `server.decision_timeout_ms` must be greater than 0".to_owned());
        }
        if server.max_model_concurrency == 0
            || server.max_connections == 0
            || server.header_read_timeout_ms == 0
            || server.body_read_timeout_ms == 0
        {
            return Err("`server.max_model_concurrency`, `server.max_connections`, `server.header_read_timeout_ms` and `server.body_read_timeout_ms` must be greater than 0".to_owned());
        }
        if server.audit_sync == AuditSync::Decision && server.audit_log.is_none() {
            return Err("`server.audit_sync` is `decision` but no `server.audit_log` is set; set the log's path or remove `audit_sync`".to_owned());
        }
        Ok(())
    }

    /// The home directory used for `~`.
    pub fn home(&self) -> String {
        self.workspace
            .home
            .clone()
            .or_else(|| std::env::var("HOME").ok().filter(|home| home.starts_with('/')))
            .unwrap_or_else(|| "/root".to_owned())
    }

    /// A few lines describing the loaded config, for `permit check-config`.
    pub fn summary(&self, tool_count: usize) -> String {
        let mut lines = vec![
            format!("mode: {}", self.mode.as_str()),
            format!(
                "workspace: {}{}",
                if self.workspace.use_request_cwd { "the request's cwd" } else { "configured roots only" },
                if self.workspace.roots.is_empty() {
                    String::new()
                } else {
                    format!(" plus {}", self.workspace.roots.join(", "))
                }
            ),
            format!(
                "userland: {}",
                match self.workspace.userland {
                    Userland::Any => "any (GNU and macOS's BSD tools must both read a command safely)",
                    Userland::Gnu => "gnu (Linux with GNU tools)",
                }
            ),
            format!(
                "tools: {tool_count} known (presets: {}; {} operator-defined); unknown tools: {}; request annotations {}",
                self.tools
                    .presets
                    .iter()
                    .map(|preset| match preset {
                        Preset::ClaudeCode => "claude-code",
                        Preset::Codex => "codex",
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                self.tools.define.len(),
                match self.tools.unknown {
                    UnknownToolAction::Ask => "ask",
                    UnknownToolAction::Classify => "classify",
                },
                if self.tools.trust_request_annotations { "trusted" } else { "ignored" }
            ),
            format!(
                "rules: {} ({} examples checked)",
                self.rules.len(),
                self.rules.iter().map(|rule| rule.match_examples.len() + rule.not_match.len()).sum::<usize>()
            ),
        ];
        for rule in &self.rules {
            lines.push(format!("  - {} → {:?}: {}", rule.id, rule.decision, rule.reason));
        }
        lines.push(format!(
            "reversibility: {}",
            if self.reversibility.enabled {
                format!("on, {} costly calls per session", self.reversibility.costly_budget_per_session)
            } else {
                "off".to_owned()
            }
        ));
        lines.push(match &self.screen {
            Some(screen) => format!(
                "screen: {} (allow at P(allow) ≥ {}%)",
                describe_model(&screen.model),
                screen.allow_threshold_percent
            ),
            None => "screen: none".to_owned(),
        });
        lines.push(match &self.review {
            Some(review) => format!("review: {}", describe_model(&review.model)),
            None => "review: none (calls that need the classifier go to a person)".to_owned(),
        });
        lines.push(match self.session.store {
            SessionStoreKind::Memory => {
                format!("session store: memory (this process only; at most {} sessions)", self.session.max_sessions)
            }
            SessionStoreKind::Redis => format!(
                "session store: redis (shared by replicas; keys `{}*`, {} ms per call)",
                self.session.key_prefix, self.session.timeout_ms
            ),
        });
        lines.push(format!("server: {}", self.server.bind));
        lines.join("\n")
    }
}

fn describe_model(model: &ModelConfig) -> String {
    match model {
        ModelConfig::Openai { base_url, model, style, .. } => {
            format!("openai `{model}` at {base_url} ({style:?} style)")
        }
        ModelConfig::Anthropic { model, .. } => format!("anthropic `{model}`"),
        ModelConfig::Local { path, .. } => format!("local `{}`", path.display()),
    }
}

fn validate_model(field: &str, model_config: &ModelConfig) -> Result<(), String> {
    match model_config {
        ModelConfig::Openai {
            base_url,
            model,
            min_label_mass,
            top_logprobs,
            reasoning_model,
            reasoning_effort,
            style,
            max_tokens,
            http,
            ..
        } => {
            validate_url(field, base_url)?;
            if model.trim().is_empty() {
                return Err(format!("`{field}.model` must name a model"));
            }
            if !(0.0..=1.0).contains(min_label_mass) || min_label_mass.is_nan() {
                return Err(format!("`{field}.min_label_mass` must be within 0..=1, got {min_label_mass}"));
            }
            if !(2..=20).contains(top_logprobs) {
                return Err(format!("`{field}.top_logprobs` must be within 2..=20, got {top_logprobs}"));
            }
            if *style == ModelStyle::Head {
                return Err(format!(
                    "`{field}.style` `head` reads a local model's hidden states: it needs `backend = \"local\"`"
                ));
            }
            if *reasoning_model && *style == ModelStyle::Decision {
                return Err(format!(
                    "`{field}`: a reasoning model reports no log-probabilities, so it needs `style = \"text\"`"
                ));
            }
            if *max_tokens == Some(0) {
                return Err(format!("`{field}.max_tokens` must be greater than 0"));
            }
            if let Some(effort) = reasoning_effort
                && !*reasoning_model
            {
                return Err(format!(
                    "`{field}.reasoning_effort` `{}` is sent only to reasoning models: add `reasoning_model = true` (with `style = \"text\"`) or remove it",
                    effort.as_str()
                ));
            }
            validate_http(field, http)
        }
        ModelConfig::Anthropic { base_url, model, max_tokens, http, .. } => {
            validate_url(field, base_url)?;
            if model.trim().is_empty() {
                return Err(format!("`{field}.model` must name a model"));
            }
            if *max_tokens == Some(0) {
                return Err(format!("`{field}.max_tokens` must be greater than 0"));
            }
            validate_anthropic_sampling(field, model_config)?;
            validate_http(field, http)
        }
        ModelConfig::Local { threads, max_new_tokens, prefix_cache_mib, style, head, .. } => {
            match (style, head) {
                (ModelStyle::Head, None) => {
                    return Err(format!(
                        "`{field}`: `style = \"head\"` needs `head = \"FILE\"`, a head written by `permit train`"
                    ));
                }
                (ModelStyle::Decision | ModelStyle::Text, Some(_)) => {
                    return Err(format!(
                        "`{field}.head` is read only with `style = \"head\"`: add it or remove `head`"
                    ));
                }
                _ => {}
            }
            if threads.is_some_and(|threads| !(1..=256).contains(&threads)) {
                return Err(format!("`{field}.threads` must be within 1..=256"));
            }
            if !(1..=8192).contains(max_new_tokens) {
                return Err(format!("`{field}.max_new_tokens` must be within 1..=8192, got {max_new_tokens}"));
            }
            if *prefix_cache_mib > 65_536 {
                return Err(format!("`{field}.prefix_cache_mib` must be at most 65536, got {prefix_cache_mib}"));
            }
            Ok(())
        }
    }
}

/// Anthropic's sampling and thinking settings, against the Messages API's documented limits:
/// a request the API would refuse with a 400 on every call is refused at load instead.
fn validate_anthropic_sampling(field: &str, model_config: &ModelConfig) -> Result<(), String> {
    let ModelConfig::Anthropic { temperature, top_p, top_k, thinking, .. } = model_config else {
        return Ok(());
    };
    if let Some(temperature) = temperature
        && !(0.0..=1.0).contains(temperature)
    {
        return Err(format!("`{field}.temperature` must be within 0..=1, got {temperature}"));
    }
    if let Some(top_p) = top_p
        && !(*top_p > 0.0 && *top_p <= 1.0)
    {
        return Err(format!("`{field}.top_p` must be greater than 0 and at most 1, got {top_p}"));
    }
    if *top_k == Some(0) {
        return Err(format!("`{field}.top_k` must be at least 1"));
    }
    if temperature.is_some() && top_p.is_some() {
        return Err(format!(
            "`{field}`: set `temperature` or `top_p`, not both; current Claude models reject a request with both"
        ));
    }
    let max_tokens = model_config.effective_max_tokens();
    match thinking {
        None | Some(AnthropicThinking::Disabled) => Ok(()),
        Some(thinking) => {
            if temperature.is_some() || top_k.is_some() {
                return Err(format!(
                    "`{field}`: `thinking` cannot be combined with `temperature` or `top_k`; remove them (`top_p` within 0.95..=1 is allowed)"
                ));
            }
            if let Some(top_p) = top_p
                && *top_p < 0.95
            {
                return Err(format!("`{field}.top_p` must be within 0.95..=1 with `thinking`, got {top_p}"));
            }
            if let AnthropicThinking::Enabled { budget_tokens, .. } = thinking {
                if *budget_tokens < MIN_THINKING_BUDGET {
                    return Err(format!(
                        "`{field}.thinking.budget_tokens` must be at least {MIN_THINKING_BUDGET}, got {budget_tokens}"
                    ));
                }
                if *budget_tokens >= max_tokens {
                    return Err(format!(
                        "`{field}.thinking.budget_tokens` ({budget_tokens}) must be less than `{field}.max_tokens` ({max_tokens}): the answer needs tokens after the thinking, e.g. max_tokens = {} with budget_tokens = {budget_tokens}",
                        budget_tokens.saturating_add(2048)
                    ));
                }
            }
            Ok(())
        }
    }
}

fn validate_http(field: &str, http: &HttpSettings) -> Result<(), String> {
    if http.request_timeout_ms == 0 || http.max_attempts == 0 || http.breaker_failures == 0 {
        return Err(format!(
            "`{field}.http`: `request_timeout_ms`, `max_attempts` and `breaker_failures` must be at least 1"
        ));
    }
    // Upper bounds keep the arithmetic on instants far from overflow.
    if http.request_timeout_ms > 600_000
        || http.max_attempts > 10
        || http.max_backoff_ms > 600_000
        || http.breaker_cooldown_ms > 3_600_000
    {
        return Err(format!(
            "`{field}.http`: `request_timeout_ms` and `max_backoff_ms` may be at most 600000, `max_attempts` at most 10, `breaker_cooldown_ms` at most 3600000"
        ));
    }
    if http.initial_backoff_ms > http.max_backoff_ms {
        return Err(format!("`{field}.http.initial_backoff_ms` must not exceed `max_backoff_ms`"));
    }
    // Below 1 KiB no real answer fits; above 64 MiB the cap no longer bounds memory usefully.
    if !(1024..=64 * 1024 * 1024).contains(&http.max_response_bytes) {
        return Err(format!(
            "`{field}.http.max_response_bytes` must be within 1024..=67108864, got {}",
            http.max_response_bytes
        ));
    }
    Ok(())
}

fn validate_url(field: &str, url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!("`{field}.base_url` `{url}` must start with http:// or https://"))
    }
}

/// Reversibility of a configured tool, if the operator declared one.
pub fn reversibility_of(annotations: &ToolAnnotations) -> Option<Reversibility> {
    annotations.reversibility
}

#[cfg(test)]
mod enum_name_tests {
    use strum::IntoEnumIterator;

    use super::*;

    /// Every variant's `as_str` is the name serde reads and writes (`approve-all-dangerous`,
    /// `none`, `redis`), so the config, its summary and the docs cannot drift apart.
    fn names_round_trip<T>(as_str: fn(T) -> &'static str)
    where
        T: IntoEnumIterator + Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug + Copy,
    {
        for value in T::iter() {
            let name = as_str(value);
            assert_eq!(serde_json::to_string(&value).unwrap(), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<T>(&format!("\"{name}\"")).unwrap(), value);
        }
    }

    #[test]
    fn config_enum_names_match_serde() {
        names_round_trip(Mode::as_str);
        names_round_trip(ReasoningEffort::as_str);
        names_round_trip(SessionStoreKind::as_str);
    }
}
