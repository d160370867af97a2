//! The `openai` backend: any OpenAI-compatible chat completions endpoint (OpenAI, Azure OpenAI,
//! vLLM, llama.cpp's server, Ollama, the LiteLLM proxy).
//!
//! Decision style asks for one token with `logprobs`/`top_logprobs` and reads P(option) from
//! them (screens); text style asks for the closing JSON line, after reasoning for reviews.
//!
//! The prompt is a system message and ONE user message of two text parts, the transcript first
//! and the question second: chat templates that require alternating roles (Mistral's, Gemma's
//! on vLLM) reject two user messages in a row, and the transcript staying the first part keeps
//! the prefix that providers cache byte-identical across every decision of a session.
//!
//! Responses are read with lenient types because real servers deviate from OpenAI's schema:
//! `object` missing, `finish_reason` values such as `eos`, `top_logprobs` absent (Ollama) or
//! `null` (LiteLLM), `content` null. A text-style `finish_reason` of `length` is `truncated`
//! (a cut-off answer is never parsed for a verdict), and `content_filter` or a `refusal`
//! message is `refused`. What cannot be read is an error (fail closed), never a guess. The API
//! key comes from the environment variable the config names and never appears in an error.

use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{HttpSettings, ModelStyle, ReasoningEffort, TokenLimitField};
use crate::model::answer;
use crate::model::http::HttpCaller;
use crate::model::{BoxFuture, BuildError, DecisionModel, ModelAnswer, ModelError, ModelRequest, Usage};

pub struct OpenAiSettings {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub api_key_header: String,
    pub headers: BTreeMap<String, String>,
    pub query: BTreeMap<String, String>,
    pub style: ModelStyle,
    pub min_label_mass: f64,
    pub top_logprobs: u8,
    pub reasoning_model: bool,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub token_limit_field: TokenLimitField,
    pub max_tokens: u32,
    pub response_format: bool,
    pub http: HttpSettings,
}

pub struct OpenAiBackend {
    settings: OpenAiSettings,
    url: String,
    headers: HeaderMap,
    caller: HttpCaller,
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<ChatChoice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct ChatChoice {
    #[serde(default)]
    message: Option<ChatMessage>,
    #[serde(default)]
    logprobs: Option<ChoiceLogprobs>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    content: Option<String>,
    /// OpenAI's refusal text, set instead of `content` when the model declines.
    #[serde(default)]
    refusal: Option<String>,
    /// vLLM and llama.cpp put a reasoning model's thinking here.
    #[serde(default)]
    reasoning_content: Option<String>,
}

#[derive(Deserialize)]
struct ChoiceLogprobs {
    #[serde(default)]
    content: Option<Vec<TokenLogprob>>,
}

#[derive(Deserialize)]
struct TokenLogprob {
    token: String,
    logprob: f64,
    #[serde(default)]
    top_logprobs: Option<Vec<TopLogprob>>,
}

#[derive(Deserialize)]
struct TopLogprob {
    token: String,
    logprob: f64,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Deserialize)]
struct CompletionTokensDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl OpenAiBackend {
    pub fn new(settings: OpenAiSettings) -> Result<Self, BuildError> {
        if settings.style == ModelStyle::Head {
            return Err(BuildError::HeadNeedsLocal);
        }
        let mut headers = HeaderMap::new();
        if let Some(key) = &settings.api_key {
            let (name, value) = if settings.api_key_header.eq_ignore_ascii_case("authorization") {
                (AUTHORIZATION, format!("Bearer {key}"))
            } else {
                let name = HeaderName::from_bytes(settings.api_key_header.as_bytes())
                    .map_err(|_| BuildError::InvalidApiKeyHeader(settings.api_key_header.clone()))?;
                (name, key.clone())
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| BuildError::InvalidApiKey)?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        for (name, value) in &settings.headers {
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| BuildError::InvalidHeaderName(name.clone()))?;
            let value = HeaderValue::from_str(value).map_err(|_| BuildError::InvalidHeaderValue(name.to_string()))?;
            headers.insert(name, value);
        }
        let base = format!("{}/chat/completions", settings.base_url.trim_end_matches('/'));
        // Percent-encoded by the URL library (a value may hold `&`, `#` or spaces).
        let url = reqwest::Url::parse_with_params(&base, &settings.query)
            .map_err(|error| BuildError::InvalidUrl { url: settings.base_url.clone(), reason: error.to_string() })?
            .to_string();
        let name = format!("openai/{}", settings.model);
        let caller = HttpCaller::new(name, settings.http, settings.api_key.clone().into_iter().collect())?;
        Ok(Self { settings, url, headers, caller })
    }

    fn body(&self, request: &ModelRequest) -> Result<Value, ModelError> {
        let settings = &self.settings;
        let (contract, max_tokens) = match settings.style {
            // `Head` is refused by `new`.
            ModelStyle::Decision | ModelStyle::Head => {
                let [question] = request.questions.as_slice() else {
                    return Err(ModelError::Unavailable(
                        format!("openai/{}", settings.model),
                        "decision style answers one question per request; use text style for batched reviews"
                            .to_owned(),
                    ));
                };
                (answer::decision_contract(question), 1)
            }
            ModelStyle::Text => (answer::text_contract(&request.questions, request.reasoned), settings.max_tokens),
        };
        let mut body = json!({
            "model": settings.model,
            "messages": [
                { "role": "system", "content": request.system },
                { "role": "user", "content": [
                    { "type": "text", "text": request.transcript },
                    { "type": "text", "text": format!("{}{contract}", request.question_block) },
                ] },
            ],
        });
        let limit_field =
            if settings.reasoning_model { TokenLimitField::MaxCompletionTokens } else { settings.token_limit_field };
        if matches!(limit_field, TokenLimitField::MaxTokens | TokenLimitField::Both) {
            body["max_tokens"] = json!(max_tokens);
        }
        if matches!(limit_field, TokenLimitField::MaxCompletionTokens | TokenLimitField::Both) {
            body["max_completion_tokens"] = json!(max_tokens);
        }
        if !settings.reasoning_model {
            body["temperature"] = json!(0);
        }
        if let (true, Some(effort)) = (settings.reasoning_model, settings.reasoning_effort) {
            body["reasoning_effort"] = json!(effort.as_str());
        }
        if settings.style == ModelStyle::Decision {
            body["logprobs"] = json!(true);
            body["top_logprobs"] = json!(settings.top_logprobs);
        }
        if settings.style == ModelStyle::Text && settings.response_format {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": { "name": "permit_answer", "strict": true, "schema": answer::json_schema(&request.questions) },
            });
        }
        Ok(body)
    }

    async fn call(&self, request: &ModelRequest) -> Result<ModelAnswer, ModelError> {
        let body = self.body(request)?;
        let bytes = self.caller.post_json(&self.url, self.headers.clone(), &body, request.deadline).await?;
        let response: ChatResponse = serde_json::from_slice(&bytes)
            .map_err(|error| ModelError::Malformed(format!("the response is not a chat completion: {error}")))?;
        let reasoning_tokens = response
            .usage
            .as_ref()
            .and_then(|usage| usage.completion_tokens_details.as_ref())
            .and_then(|details| details.reasoning_tokens);
        let usage = response.usage.map_or_else(Usage::default, |usage| Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.prompt_tokens_details.and_then(|details| details.cached_tokens),
        });
        let Some(choice) = response.choices.into_iter().next() else {
            return Err(ModelError::Malformed("the response has no choices".to_owned()));
        };
        self.check_finish(&choice, usage.completion_tokens, reasoning_tokens)?;
        match self.settings.style {
            // `Head` is refused by `new`.
            ModelStyle::Decision | ModelStyle::Head => {
                let first = choice
                    .logprobs
                    .and_then(|logprobs| logprobs.content)
                    .and_then(|tokens| tokens.into_iter().next())
                    .ok_or_else(|| ModelError::Malformed("the response carries no log-probabilities".to_owned()))?;
                let alternatives: Vec<(String, f64)> =
                    first.top_logprobs.unwrap_or_default().into_iter().map(|top| (top.token, top.logprob)).collect();
                let question =
                    request.questions.first().ok_or_else(|| ModelError::Malformed("no question".to_owned()))?;
                let choice = answer::parse_decision(
                    question,
                    &first.token,
                    Some(first.logprob),
                    &alternatives,
                    self.settings.min_label_mass,
                )?;
                Ok(ModelAnswer { choices: vec![choice], reasoning: None, usage })
            }
            ModelStyle::Text => {
                let message =
                    choice.message.ok_or_else(|| ModelError::Malformed("the response has no message".to_owned()))?;
                let content = message.content.unwrap_or_default();
                let (choices, reasoning) = answer::parse_text(&content, &request.questions)?;
                let reasoning = match (message.reasoning_content, reasoning) {
                    (Some(thinking), Some(reasoning)) => Some(format!("{thinking}\n{reasoning}")),
                    (thinking, reasoning) => thinking.or(reasoning),
                };
                Ok(ModelAnswer { choices, reasoning, usage })
            }
        }
    }

    /// Turns a finish that is not a complete answer into its error. Decision style asks for one
    /// token, so its `length` finish is the expected one; in text style `length` means the
    /// answer line may never have been written. `stop`, `eos`, absent and unknown values go on
    /// to the strict parsers.
    fn check_finish(
        &self,
        choice: &ChatChoice,
        completion_tokens: Option<u64>,
        reasoning_tokens: Option<u64>,
    ) -> Result<(), ModelError> {
        if let Some(refusal) = choice.message.as_ref().and_then(|message| message.refusal.as_deref())
            && !refusal.trim().is_empty()
        {
            // Model text, so quoted and cut short like an error body.
            let snippet: String = refusal.chars().take(200).collect();
            return Err(ModelError::Refused(format!("the model's refusal: `{}`", snippet.trim())));
        }
        match choice.finish_reason.as_deref() {
            Some("content_filter") => Err(ModelError::Refused(
                "`finish_reason` `content_filter`: the provider's filter withheld the answer".to_owned(),
            )),
            Some("length") if self.settings.style == ModelStyle::Text => {
                let used = match (completion_tokens, reasoning_tokens) {
                    (Some(all), Some(reasoning)) => {
                        format!(" ({all} completion tokens, {reasoning} of them reasoning)")
                    }
                    (Some(all), None) => format!(" ({all} completion tokens)"),
                    _ => String::new(),
                };
                let advice = if self.settings.reasoning_model {
                    "raise `max_tokens` (reasoning counts towards it) or lower `reasoning_effort`"
                } else {
                    "raise `max_tokens`"
                };
                Err(ModelError::Truncated(format!(
                    "`finish_reason` `length` at the limit of {} tokens{used}; {advice}",
                    self.settings.max_tokens
                )))
            }
            _ => Ok(()),
        }
    }
}

impl DecisionModel for OpenAiBackend {
    fn name(&self) -> String {
        format!("openai/{}", self.settings.model)
    }

    fn reports_probabilities(&self) -> bool {
        self.settings.style == ModelStyle::Decision
    }

    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>> {
        Box::pin(self.call(request))
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { crate::model::http::reachable(&self.url).await.map_err(|error| error.to_string()) })
    }
}
