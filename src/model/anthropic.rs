//! The `anthropic` backend: Anthropic's Messages API, text style, no probabilities.
//!
//! The system prompt and the transcript are marked `cache_control: ephemeral`, so screen and
//! review of a request (and every decision of a session) reuse the cached prefix. Sampling
//! parameters (`temperature`, `top_p`, `top_k`), `thinking` and `output_config.effort` are sent
//! only when the config sets them: current models reject `temperature` outright, and older ones
//! reject it together with `top_p`, so sending a default would fail every call.
//!
//! Reads the answer from the `text` blocks strictly; `thinking` blocks go to the audit record
//! as reasoning and `redacted_thinking` blocks are skipped. A `stop_reason` of `max_tokens` or
//! `model_context_window_exceeded` is `truncated` and `refusal` is `refused`, checked before any
//! text is read: a cut-off answer is never parsed for a verdict. Anything it cannot read is an
//! error (fail closed). The API key comes from the environment variable the config names and
//! never appears in an error.

use std::collections::BTreeMap;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{AnthropicEffort, AnthropicThinking, HttpSettings};
use crate::model::answer;
use crate::model::http::HttpCaller;
use crate::model::{BoxFuture, BuildError, DecisionModel, ModelAnswer, ModelError, ModelRequest, Usage};

/// The Messages API version permit speaks (still the current one: Anthropic's SDKs send it, and
/// newer features such as thinking and effort are request fields, not versions).
const ANTHROPIC_VERSION: &str = "2023-06-01";

pub struct AnthropicSettings {
    pub base_url: String,
    pub model: String,
    pub api_key: String,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub thinking: Option<AnthropicThinking>,
    pub effort: Option<AnthropicEffort>,
    pub headers: BTreeMap<String, String>,
    pub http: HttpSettings,
}

pub struct AnthropicBackend {
    model: String,
    /// The request's fields other than the prompt, built once: `model`, `max_tokens` and
    /// whichever of the sampling, thinking and effort settings the config sets.
    fixed: serde_json::Map<String, Value>,
    max_tokens: u32,
    /// Whether thinking is on (`enabled` or `adaptive`): it shares `max_tokens` with the answer.
    thinks: bool,
    url: String,
    headers: HeaderMap,
    caller: HttpCaller,
}

#[derive(Deserialize)]
struct MessagesResponse {
    #[serde(default)]
    content: Vec<ContentBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
}

#[derive(Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
}

#[derive(Deserialize)]
struct MessagesUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

impl AnthropicBackend {
    pub fn new(settings: AnthropicSettings) -> Result<Self, BuildError> {
        let mut headers = HeaderMap::new();
        let mut key = HeaderValue::from_str(&settings.api_key).map_err(|_| BuildError::InvalidApiKey)?;
        key.set_sensitive(true);
        headers.insert(HeaderName::from_static("x-api-key"), key);
        headers.insert(HeaderName::from_static("anthropic-version"), HeaderValue::from_static(ANTHROPIC_VERSION));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &settings.headers {
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| BuildError::InvalidHeaderName(name.clone()))?;
            let value = HeaderValue::from_str(value).map_err(|_| BuildError::InvalidHeaderValue(name.to_string()))?;
            headers.insert(name, value);
        }
        let model = settings.model.clone();
        let caller = HttpCaller::new(format!("anthropic/{model}"), settings.http, vec![settings.api_key.clone()])?;
        Ok(Self {
            fixed: fixed_fields(&settings),
            max_tokens: settings.max_tokens,
            thinks: matches!(
                settings.thinking,
                Some(AnthropicThinking::Enabled { .. } | AnthropicThinking::Adaptive { .. })
            ),
            model,
            url: format!("{}/v1/messages", settings.base_url.trim_end_matches('/')),
            headers,
            caller,
        })
    }

    fn body(&self, request: &ModelRequest) -> Value {
        let contract = answer::text_contract(&request.questions, request.reasoned);
        let mut body = self.fixed.clone();
        body.insert(
            "system".to_owned(),
            json!([{ "type": "text", "text": request.system, "cache_control": { "type": "ephemeral" } }]),
        );
        body.insert(
            "messages".to_owned(),
            json!([{
                "role": "user",
                "content": [
                    { "type": "text", "text": request.transcript, "cache_control": { "type": "ephemeral" } },
                    { "type": "text", "text": format!("{}{contract}", request.question_block) },
                ],
            }]),
        );
        Value::Object(body)
    }

    async fn call(&self, request: &ModelRequest) -> Result<ModelAnswer, ModelError> {
        let body = self.body(request);
        let bytes = self.caller.post_json(&self.url, self.headers.clone(), &body, request.deadline).await?;
        let response: MessagesResponse = serde_json::from_slice(&bytes)
            .map_err(|error| ModelError::Malformed(format!("the response is not a Messages response: {error}")))?;
        let output_tokens = response.usage.as_ref().and_then(|usage| usage.output_tokens);
        self.check_stop_reason(response.stop_reason.as_deref(), output_tokens)?;
        let answer_text: String = response
            .content
            .iter()
            .filter(|block| block.kind == "text")
            .filter_map(|block| block.text.clone())
            .collect::<Vec<_>>()
            .join("\n");
        // With `display: omitted` a thinking block carries only its signature: nothing to log.
        let thinking: Vec<String> = response
            .content
            .iter()
            .filter(|block| block.kind == "thinking")
            .filter_map(|block| block.thinking.clone())
            .filter(|thinking| !thinking.trim().is_empty())
            .collect();
        let (choices, reasoning) = answer::parse_text(&answer_text, &request.questions)?;
        let reasoning = match (thinking.is_empty(), reasoning) {
            (true, reasoning) => reasoning,
            (false, Some(reasoning)) => Some(format!("{}\n{reasoning}", thinking.join("\n"))),
            (false, None) => Some(thinking.join("\n")),
        };
        let usage = response.usage.map_or_else(Usage::default, |usage| {
            let cached = usage.cache_read_input_tokens;
            let prompt = [usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens]
                .into_iter()
                .flatten()
                .reduce(|sum, tokens| sum + tokens);
            Usage { prompt_tokens: prompt, completion_tokens: usage.output_tokens, cached_tokens: cached }
        });
        Ok(ModelAnswer { choices, reasoning, usage })
    }

    /// Turns a stop that is not a finished answer into its error. `end_turn`, `stop_sequence`,
    /// an absent value and values this code does not know go on to the strict parser, which
    /// refuses anything that is not a complete answer.
    fn check_stop_reason(&self, stop_reason: Option<&str>, output_tokens: Option<u64>) -> Result<(), ModelError> {
        let used = output_tokens.map_or_else(String::new, |tokens| format!(" ({tokens} output tokens)"));
        match stop_reason {
            Some("max_tokens") => {
                let advice = if self.thinks {
                    "raise `max_tokens` (thinking counts towards it) or lower the thinking budget or `effort`"
                } else {
                    "raise `max_tokens`"
                };
                Err(ModelError::Truncated(format!(
                    "`stop_reason` `max_tokens` at the limit of {} tokens{used}; {advice}",
                    self.max_tokens
                )))
            }
            Some("model_context_window_exceeded") => Err(ModelError::Truncated(format!(
                "`stop_reason` `model_context_window_exceeded`{used}: the prompt and the answer filled the model's context window"
            ))),
            Some("refusal") => Err(ModelError::Refused("`stop_reason` `refusal`".to_owned())),
            _ => Ok(()),
        }
    }
}

/// The fields every request carries besides the prompt. Optional settings are absent unless
/// configured, so the provider's defaults apply.
fn fixed_fields(settings: &AnthropicSettings) -> serde_json::Map<String, Value> {
    let mut fields = serde_json::Map::new();
    fields.insert("model".to_owned(), json!(settings.model));
    fields.insert("max_tokens".to_owned(), json!(settings.max_tokens));
    if let Some(temperature) = settings.temperature {
        fields.insert("temperature".to_owned(), json!(temperature));
    }
    if let Some(top_p) = settings.top_p {
        fields.insert("top_p".to_owned(), json!(top_p));
    }
    if let Some(top_k) = settings.top_k {
        fields.insert("top_k".to_owned(), json!(top_k));
    }
    if let Some(thinking) = settings.thinking {
        fields.insert("thinking".to_owned(), json!(thinking));
    }
    if let Some(effort) = settings.effort {
        fields.insert("output_config".to_owned(), json!({ "effort": effort }));
    }
    fields
}

impl DecisionModel for AnthropicBackend {
    fn name(&self) -> String {
        format!("anthropic/{}", self.model)
    }

    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>> {
        Box::pin(self.call(request))
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { crate::model::http::reachable(&self.url).await.map_err(|error| error.to_string()) })
    }
}
