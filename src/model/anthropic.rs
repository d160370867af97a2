//! The `anthropic` backend: Anthropic's Messages API, text style, no probabilities.
//!
//! The system prompt and the transcript are marked `cache_control: ephemeral`, so screen and
//! review of a request (and every decision of a session) reuse the cached prefix. Reads the
//! answer from the text blocks strictly; anything it cannot read is an error (fail closed). The
//! API key comes from the environment variable the config names and never appears in an error.

use std::collections::BTreeMap;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::json;

use crate::config::HttpSettings;
use crate::model::answer;
use crate::model::http::HttpCaller;
use crate::model::{BoxFuture, DecisionModel, ModelAnswer, ModelError, ModelRequest, Usage};

/// The Messages API version permit speaks.
const ANTHROPIC_VERSION: &str = "2023-06-01";

pub struct AnthropicBackend {
    model: String,
    max_tokens: u32,
    url: String,
    headers: HeaderMap,
    caller: HttpCaller,
}

#[derive(Deserialize)]
struct MessagesResponse {
    #[serde(default)]
    content: Vec<ContentBlock>,
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
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: String,
        max_tokens: u32,
        extra_headers: &BTreeMap<String, String>,
        http: HttpSettings,
    ) -> Result<Self, String> {
        let mut headers = HeaderMap::new();
        let mut key =
            HeaderValue::from_str(&api_key).map_err(|_| "the API key is not a valid header value".to_owned())?;
        key.set_sensitive(true);
        headers.insert(HeaderName::from_static("x-api-key"), key);
        headers.insert(HeaderName::from_static("anthropic-version"), HeaderValue::from_static(ANTHROPIC_VERSION));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in extra_headers {
            let name =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("header name `{name}` is not valid"))?;
            let value =
                HeaderValue::from_str(value).map_err(|_| format!("the value of header `{name}` is not valid"))?;
            headers.insert(name, value);
        }
        let caller = HttpCaller::new(format!("anthropic/{model}"), http, vec![api_key])?;
        Ok(Self {
            model: model.to_owned(),
            max_tokens,
            url: format!("{}/v1/messages", base_url.trim_end_matches('/')),
            headers,
            caller,
        })
    }

    async fn call(&self, request: &ModelRequest) -> Result<ModelAnswer, ModelError> {
        let contract = answer::text_contract(&request.questions, request.reasoned);
        let body = json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": 0,
            "system": [{ "type": "text", "text": request.system, "cache_control": { "type": "ephemeral" } }],
            "messages": [{
                "role": "user",
                "content": [
                    { "type": "text", "text": request.transcript, "cache_control": { "type": "ephemeral" } },
                    { "type": "text", "text": format!("{}{contract}", request.question_block) },
                ],
            }],
        });
        let bytes = self.caller.post_json(&self.url, self.headers.clone(), &body, request.deadline).await?;
        let response: MessagesResponse = serde_json::from_slice(&bytes)
            .map_err(|error| ModelError::Malformed(format!("the response is not a Messages response: {error}")))?;
        let answer_text: String = response
            .content
            .iter()
            .filter(|block| block.kind == "text")
            .filter_map(|block| block.text.clone())
            .collect::<Vec<_>>()
            .join("\n");
        let thinking: Vec<String> = response
            .content
            .iter()
            .filter(|block| block.kind == "thinking")
            .filter_map(|block| block.thinking.clone())
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
}

impl DecisionModel for AnthropicBackend {
    fn name(&self) -> String {
        format!("anthropic/{}", self.model)
    }

    fn answer<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelAnswer, ModelError>> {
        Box::pin(self.call(request))
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(crate::model::http::reachable(&self.url))
    }
}
