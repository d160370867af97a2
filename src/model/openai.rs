//! The `openai` backend: any OpenAI-compatible chat completions endpoint (OpenAI, Azure OpenAI,
//! vLLM, llama.cpp's server, Ollama, the LiteLLM proxy).
//!
//! Decision style asks for one token with `logprobs`/`top_logprobs` and reads P(option) from
//! them (screens); text style asks for the closing JSON line, after reasoning for reviews.
//! Responses are read with lenient types because real servers deviate from OpenAI's schema:
//! `object` missing, `finish_reason` values such as `eos`, `top_logprobs` absent (Ollama) or
//! `null` (LiteLLM), `content` null. What cannot be read is an error (fail closed), never a
//! guess. The API key comes from the environment variable the config names and never appears in
//! an error.

use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{HttpSettings, ModelStyle, TokenLimitField};
use crate::model::answer;
use crate::model::http::HttpCaller;
use crate::model::{BoxFuture, DecisionModel, ModelAnswer, ModelError, ModelRequest, Usage};

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
}

#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    content: Option<String>,
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
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl OpenAiBackend {
    pub fn new(settings: OpenAiSettings) -> Result<Self, String> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &settings.api_key {
            let (name, value) = if settings.api_key_header.eq_ignore_ascii_case("authorization") {
                (AUTHORIZATION, format!("Bearer {key}"))
            } else {
                let name = HeaderName::from_bytes(settings.api_key_header.as_bytes()).map_err(|_| {
                    format!("`api_key_header` `{}` is not a valid header name", settings.api_key_header)
                })?;
                (name, key.clone())
            };
            let mut value =
                HeaderValue::from_str(&value).map_err(|_| "the API key is not a valid header value".to_owned())?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        for (name, value) in &settings.headers {
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("header name `{name}` is not valid"))?;
            let value =
                HeaderValue::from_str(value).map_err(|_| format!("the value of header `{name}` is not valid"))?;
            headers.insert(name, value);
        }
        let base = format!("{}/chat/completions", settings.base_url.trim_end_matches('/'));
        // Percent-encoded by the URL library (a value may hold `&`, `#` or spaces).
        let url = reqwest::Url::parse_with_params(&base, &settings.query)
            .map_err(|error| format!("`base_url` `{}` is not a valid URL: {error}", settings.base_url))?
            .to_string();
        let name = format!("openai/{}", settings.model);
        let caller = HttpCaller::new(name, settings.http, settings.api_key.clone().into_iter().collect())?;
        Ok(Self { settings, url, headers, caller })
    }

    fn body(&self, request: &ModelRequest) -> Result<Value, ModelError> {
        let settings = &self.settings;
        let (contract, max_tokens) = match settings.style {
            ModelStyle::Decision => {
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
                { "role": "user", "content": request.transcript },
                { "role": "user", "content": format!("{}{contract}", request.question_block) },
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
        let usage = response.usage.map_or_else(Usage::default, |usage| Usage {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.prompt_tokens_details.and_then(|details| details.cached_tokens),
        });
        let Some(choice) = response.choices.into_iter().next() else {
            return Err(ModelError::Malformed("the response has no choices".to_owned()));
        };
        match self.settings.style {
            ModelStyle::Decision => {
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
        Box::pin(crate::model::http::reachable(&self.url))
    }
}
