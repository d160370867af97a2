//! The resilient HTTP caller shared by the remote backends: per-attempt timeouts, retries with
//! exponential backoff and jitter, `Retry-After`, a circuit breaker, and a total deadline.
//!
//! Decides only whether and when to try again. Retries connect errors, timeouts, 408, 429 and
//! 5xx (`Retry-After` honoured in seconds or as an HTTP date, whatever the body says: a
//! non-JSON 429 is still a 429), never other 4xx; never sleeps past the deadline. After
//! `breaker_failures` consecutive failed calls it fails fast for `breaker_cooldown_ms`, then
//! lets one probe through. Each attempt's timeout covers reading the body too, and a body is
//! read chunk by chunk up to `max_response_bytes` (1 MiB): past it the call fails with
//! `response_too_large`, unretried, without reading or parsing the rest. Every failure is
//! returned as a [`ModelError`], which the pipeline fails closed. Secrets (API keys) are
//! redacted from every error message, and bodies are cut short, so a provider echoing a key
//! cannot leak it into logs.
//!
//! Built on reqwest rather than async-openai's client: permit's retry rules need the HTTP status
//! and the `Retry-After` header of every failed attempt, which async-openai's error type does
//! not carry, and async-openai retries 429s on its own schedule, which would break the deadline.
//! Responses are read with each backend's own lenient types (see `openai.rs`): compatible
//! servers deviate from OpenAI's schema in ways strict generated types would refuse.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

use crate::config::HttpSettings;
use crate::model::{BuildError, ModelError};

/// Bodies quoted in errors are cut to this many characters.
const BODY_SNIPPET: usize = 200;

/// Bytes of an error response's body read for its snippet: the snippet's 200 characters, with
/// room for multi-byte text and for a key to redact that straddles the cut.
const ERROR_BODY_BYTES: u64 = 4 * 1024;

#[derive(Debug, Default)]
struct Breaker {
    consecutive_failures: u32,
    open_until: Option<Instant>,
    probing: bool,
}

pub struct HttpCaller {
    name: String,
    client: reqwest::Client,
    settings: HttpSettings,
    breaker: Mutex<Breaker>,
    secrets: Vec<String>,
}

enum Attempt {
    Done(Vec<u8>),
    Retry { error: ModelError, retry_after: Option<Duration> },
    Fail(ModelError),
}

/// A response body read up to a cap.
enum Body {
    Complete(Vec<u8>),
    /// The body went on past the cap; what was read up to it.
    Truncated(Vec<u8>),
}

/// Reads `response`'s body chunk by chunk, stopping once it would pass `limit` bytes. Memory
/// stays within the cap plus one chunk whatever the server sends, and every chunk is an await
/// point, so the caller's timeout can fire while a body trickles in.
async fn read_capped(response: &mut reqwest::Response, limit: u64) -> Result<Body, reqwest::Error> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len().saturating_add(chunk.len()) > limit {
            let room = limit - bytes.len();
            bytes.extend_from_slice(&chunk[..room]);
            return Ok(Body::Truncated(bytes));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Body::Complete(bytes))
}

impl HttpCaller {
    pub fn new(name: String, settings: HttpSettings, secrets: Vec<String>) -> Result<Self, BuildError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(settings.request_timeout_ms.min(10_000)))
            .build()
            .map_err(|error| BuildError::HttpClient { name: name.clone(), reason: error.to_string() })?;
        Ok(Self { name, client, settings, breaker: Mutex::new(Breaker::default()), secrets })
    }

    fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in self.secrets.iter().filter(|secret| secret.len() >= 4) {
            text = text.replace(secret.as_str(), "[redacted]");
        }
        text
    }

    /// Redacts before cutting, so a key straddling the cut cannot leave a prefix behind.
    fn snippet(&self, body: &str) -> String {
        let redacted = self.redact(body);
        let cut: String = redacted.chars().take(BODY_SNIPPET).collect();
        cut.trim().to_owned()
    }

    /// Lets a call through, or fails fast while the breaker is open. Returns whether the call is
    /// the half-open probe.
    fn admit(&self) -> Result<bool, ModelError> {
        let Ok(mut breaker) = self.breaker.lock() else {
            return Err(ModelError::Unavailable(self.name.clone(), "internal state is poisoned".to_owned()));
        };
        match breaker.open_until {
            Some(until) if Instant::now() < until => Err(ModelError::Unavailable(
                self.name.clone(),
                format!("circuit open after {} consecutive failures", breaker.consecutive_failures),
            )),
            Some(_) if breaker.probing => {
                Err(ModelError::Unavailable(self.name.clone(), "circuit half-open; a probe is in flight".to_owned()))
            }
            Some(_) => {
                breaker.probing = true;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn record(&self, success: bool, probe: bool) {
        if let Ok(mut breaker) = self.breaker.lock() {
            // While the breaker is open, only the probe's result counts: a call admitted
            // before it opened must not close it or let a second probe in.
            if breaker.open_until.is_some() && !probe {
                return;
            }
            breaker.probing = false;
            if success {
                *breaker = Breaker::default();
            } else {
                breaker.consecutive_failures += 1;
                if breaker.consecutive_failures >= self.settings.breaker_failures {
                    breaker.open_until =
                        Some(Instant::now() + Duration::from_millis(self.settings.breaker_cooldown_ms));
                }
            }
        }
    }

    /// POSTs `body` and returns the response body of a 2xx answer, at most
    /// `max_response_bytes` long.
    pub async fn post_json(
        &self,
        url: &str,
        headers: HeaderMap,
        body: &Value,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>, ModelError> {
        let probe = self.admit()?;
        // If the caller drops this future (a stage timeout), the guard still records the call
        // as failed, so a half-open probe never stays "in flight" forever.
        let mut guard = Unfinished { caller: self, probe, finished: false };
        let result = self.post_with_retries(url, headers, body, deadline).await;
        guard.finished = true;
        self.record(result.is_ok(), probe);
        result
    }

    async fn post_with_retries(
        &self,
        url: &str,
        headers: HeaderMap,
        body: &Value,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>, ModelError> {
        let per_attempt = Duration::from_millis(self.settings.request_timeout_ms);
        // tokio's clock, so a paused test clock drives the deadline like every other timer.
        let deadline = deadline
            .map(tokio::time::Instant::from_std)
            .unwrap_or_else(|| tokio::time::Instant::now() + per_attempt.saturating_mul(self.settings.max_attempts));
        let mut attempt = 0;
        loop {
            attempt += 1;
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            if remaining.is_zero() {
                return Err(ModelError::Timeout(duration_ms(per_attempt)));
            }
            let timeout = per_attempt.min(remaining);
            // One timer over the whole attempt, body included: a server that trickles an
            // endless body is cut off at the attempt's time like one that never answers.
            let outcome = match tokio::time::timeout(timeout, self.attempt(url, headers.clone(), body, timeout)).await {
                Ok(outcome) => outcome,
                Err(_) => Attempt::Retry { error: ModelError::Timeout(duration_ms(timeout)), retry_after: None },
            };
            match outcome {
                Attempt::Done(bytes) => return Ok(bytes),
                Attempt::Fail(error) => return Err(error),
                Attempt::Retry { error, retry_after } => {
                    if attempt >= self.settings.max_attempts {
                        return Err(error);
                    }
                    let wait = retry_after.unwrap_or_default().max(self.backoff(attempt));
                    if tokio::time::Instant::now() + wait >= deadline {
                        // Waiting would overrun the stage: fail now, closed.
                        return Err(error);
                    }
                    tracing::debug!(backend = %self.name, attempt, wait_ms = duration_ms(wait), "retrying model call");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// One HTTP attempt: sends the request and reads the answer's body within
    /// `max_response_bytes`.
    async fn attempt(&self, url: &str, headers: HeaderMap, body: &Value, timeout: Duration) -> Attempt {
        let mut response = match self.client.post(url).headers(headers).json(body).send().await {
            Ok(response) => response,
            Err(error) if error.is_connect() || error.is_timeout() || error.is_request() => {
                return Attempt::Retry { error: self.transport(&error, timeout), retry_after: None };
            }
            Err(error) => return Attempt::Fail(self.transport(&error, timeout)),
        };
        let status = response.status();
        let retry_after = retry_after(response.headers());
        if !status.is_success() {
            // Only a snippet of an error body is ever shown, so only a little of it is read.
            let text = match read_capped(&mut response, ERROR_BODY_BYTES).await {
                Ok(Body::Complete(bytes) | Body::Truncated(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(error) => return Attempt::Retry { error: self.transport(&error, timeout), retry_after },
            };
            let error = ModelError::Transport(format!("HTTP {}: {}", status.as_u16(), self.snippet(&text)));
            return if status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error() {
                Attempt::Retry { error, retry_after }
            } else {
                Attempt::Fail(error)
            };
        }
        let limit = self.settings.max_response_bytes;
        // A declared length over the cap is refused before a byte of the body is read.
        if response.content_length().is_some_and(|length| length > limit) {
            return Attempt::Fail(ModelError::ResponseTooLarge(limit));
        }
        match read_capped(&mut response, limit).await {
            Ok(Body::Complete(bytes)) => Attempt::Done(bytes),
            // Not retried: the same server would send the same oversized answer again.
            Ok(Body::Truncated(_)) => Attempt::Fail(ModelError::ResponseTooLarge(limit)),
            Err(error) => Attempt::Retry { error: self.transport(&error, timeout), retry_after },
        }
    }

    fn transport(&self, error: &reqwest::Error, timeout: Duration) -> ModelError {
        if error.is_timeout() {
            ModelError::Timeout(duration_ms(timeout))
        } else {
            // Without the URL: it may carry query parameters an operator considers private.
            ModelError::Transport(self.redact(&error.without_url_string()))
        }
    }

    /// Exponential backoff with full jitter: a random wait in [base/2, base], base doubling per
    /// attempt up to the maximum.
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .settings
            .initial_backoff_ms
            .saturating_mul(1u64 << attempt.saturating_sub(1).min(16))
            .min(self.settings.max_backoff_ms);
        Duration::from_millis(base / 2 + fastrand::u64(0..=base / 2))
    }
}

/// Records a failure for a call that never finished (its future was dropped).
struct Unfinished<'a> {
    caller: &'a HttpCaller,
    probe: bool,
    finished: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.caller.record(false, self.probe);
        }
    }
}

trait WithoutUrl {
    fn without_url_string(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    fn without_url_string(&self) -> String {
        let mut text = self.to_string();
        if let Some(url) = self.url() {
            text = text.replace(url.as_str(), "<endpoint>");
        }
        if self.is_connect() { format!("cannot connect: {text}") } else { text }
    }
}

fn duration_ms(duration: Duration) -> u64 {
    duration.as_millis().try_into().unwrap_or(u64::MAX)
}

/// `Retry-After` as seconds or as an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(SystemTime::now()).unwrap_or_default())
}

/// Why a remote backend's endpoint is not ready (the detail `GET /readyz` shows).
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    #[error("the endpoint URL is not valid")]
    InvalidUrl,
    #[error("the endpoint URL has no host")]
    NoHost,
    #[error("the endpoint URL has no port")]
    NoPort,
    #[error("{host}:{port} refused the connection: {kind}")]
    Refused { host: String, port: u16, kind: std::io::ErrorKind },
    #[error("{host}:{port} did not accept a connection within 2 s")]
    Timeout { host: String, port: u16 },
}

/// Whether `url`'s host accepts a TCP connection within two seconds (readiness of a remote
/// backend; no request is sent, so nothing is billed).
pub async fn reachable(url: &str) -> Result<(), ReachError> {
    let parsed = reqwest::Url::parse(url).map_err(|_| ReachError::InvalidUrl)?;
    let host = parsed.host_str().ok_or(ReachError::NoHost)?.to_owned();
    let port = parsed.port_or_known_default().ok_or(ReachError::NoPort)?;
    match tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect((host.as_str(), port))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(ReachError::Refused { host, port, kind: error.kind() }),
        Err(_) => Err(ReachError::Timeout { host, port }),
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn retry_after_in_seconds_and_as_a_date() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        headers.insert(RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
        let wait = retry_after(&headers).unwrap();
        assert!(wait <= Duration::from_secs(30) && wait >= Duration::from_secs(28), "{wait:?}");
        headers.insert(RETRY_AFTER, HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        let caller = HttpCaller::new(
            "t".into(),
            HttpSettings { initial_backoff_ms: 100, max_backoff_ms: 1_000, ..HttpSettings::default() },
            vec![],
        )
        .unwrap();
        for _ in 0..50 {
            let first = caller.backoff(1).as_millis();
            assert!((50..=100).contains(&first), "{first}");
            let capped = caller.backoff(10).as_millis();
            assert!((500..=1_000).contains(&capped), "{capped}");
        }
    }

    #[test]
    fn secrets_are_redacted() {
        let caller = HttpCaller::new("t".into(), HttpSettings::default(), vec!["sk-secret-123".into()]).unwrap();
        assert_eq!(
            caller.snippet("Incorrect API key provided: sk-secret-123."),
            "Incorrect API key provided: [redacted]."
        );
    }
}
