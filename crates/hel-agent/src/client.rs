//! The model client: `POST {base}/chat/completions`, not streamed, with
//! retries for 429, 5xx and connection errors. Response bodies are read up
//! to a limit ([`DEFAULT_MAX_RESPONSE_BYTES`], `HEL_MAX_RESPONSE_BYTES`):
//! a declared Content-Length over it is refused before reading, and the
//! body is counted while it streams in.

use std::time::Duration;

use serde_json::Value;

use crate::config::Endpoint;

/// Retries after the first attempt.
const RETRIES: u32 = 3;

/// Bytes of a response body read at most, unless `HEL_MAX_RESPONSE_BYTES` says otherwise.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 << 20;
/// Bytes of an error response kept (its message is cut to 300 characters anyway).
const ERROR_BODY_BYTES: u64 = 64 << 10;

/// Why a model request failed (after retries where they apply).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RequestError {
    #[error("the model request timed out after {0}s (raise --request-timeout)")]
    Timeout(u64),
    #[error("the model server answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("cannot reach the model server at {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("the model server sent a malformed response: {0}")]
    Malformed(String),
    #[error("the model server's response is larger than the limit of {} (HEL_MAX_RESPONSE_BYTES): refused", size(*.0))]
    TooLarge(u64),
}

/// `n` bytes for messages: in MiB when it is a whole number of them.
fn size(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// The response size limit: `HEL_MAX_RESPONSE_BYTES` when it is a positive
/// number, else the default.
pub fn max_response_bytes() -> u64 {
    std::env::var("HEL_MAX_RESPONSE_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES)
}

/// A parsed chat-completions response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The whole response body.
    pub body: Value,
    /// `choices[0].message`, exactly as sent.
    pub message: Value,
    pub finish_reason: Option<String>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The model the server says answered.
    pub model: Option<String>,
}

pub struct ModelClient {
    http: reqwest::Client,
    url: String,
    key: Option<String>,
    timeout_secs: u64,
    max_body: u64,
}

impl ModelClient {
    pub fn new(endpoint: &Endpoint, timeout_secs: u64) -> Result<ModelClient, RequestError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(timeout_secs.max(1)))
            .build()
            .map_err(|e| RequestError::Connect {
                url: endpoint.config.base_url.clone(),
                reason: e.to_string(),
            })?;
        Ok(ModelClient {
            http,
            url: format!("{}/chat/completions", endpoint.config.base_url),
            key: endpoint.api_key.clone(),
            timeout_secs,
            max_body: max_response_bytes(),
        })
    }

    /// Send `body`; retry 429, 5xx and connection failures up to 3 times
    /// with backoff (0.5 s, 1 s, 2 s), telling `on_retry` before each wait.
    pub async fn send(
        &self,
        body: &Value,
        on_retry: &mut dyn FnMut(&RequestError, Duration),
    ) -> Result<Reply, RequestError> {
        let mut attempt = 0;
        loop {
            match self.send_once(body).await {
                Err(e) if attempt < RETRIES && retryable(&e) => {
                    let wait = Duration::from_millis(500 << attempt);
                    on_retry(&e, wait);
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn send_once(&self, body: &Value) -> Result<Reply, RequestError> {
        let mut req = self.http.post(&self.url).json(body);
        if let Some(key) = &self.key {
            req = req.bearer_auth(key);
        }
        let resp = req.send().await.map_err(|e| self.transport(e))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            // Only the start of an error body is shown; the rest is not read.
            let bytes = self.read_body(resp, ERROR_BODY_BYTES, false).await?;
            let text = String::from_utf8_lossy(&bytes);
            let mut body: String = text.chars().take(300).collect();
            if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
                if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
                    body = m.chars().take(300).collect();
                }
            }
            // Server text reaches the terminal in notes: escaped once here.
            let body = crate::terminal::escape_line(&body).into_owned();
            return Err(RequestError::Status { status, body });
        }
        let bytes = self.read_body(resp, self.max_body, true).await?;
        parse_reply_bytes(&bytes)
    }

    /// The body of `resp`, at most `limit` bytes: past it, an error when
    /// `strict`, else what came before. A declared Content-Length over the
    /// limit is refused before anything is read.
    async fn read_body(
        &self,
        mut resp: reqwest::Response,
        limit: u64,
        strict: bool,
    ) -> Result<Vec<u8>, RequestError> {
        let declared = resp.content_length();
        if strict && declared.is_some_and(|n| n > limit) {
            return Err(RequestError::TooLarge(limit));
        }
        let mut body = Vec::with_capacity(declared.unwrap_or(0).min(limit) as usize);
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.transport(e))? {
            if (body.len() + chunk.len()) as u64 > limit {
                if strict {
                    return Err(RequestError::TooLarge(limit));
                }
                let room = limit as usize - body.len();
                body.extend_from_slice(&chunk[..room]);
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn transport(&self, e: reqwest::Error) -> RequestError {
        if e.is_timeout() {
            RequestError::Timeout(self.timeout_secs)
        } else if e.is_decode() || e.is_body() {
            RequestError::Malformed(e.to_string())
        } else {
            let mut reason = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                reason = s.to_string();
                source = s.source();
            }
            RequestError::Connect {
                url: self.url.clone(),
                reason: crate::terminal::escape_line(&reason).into_owned(),
            }
        }
    }
}

fn retryable(e: &RequestError) -> bool {
    match e {
        RequestError::Status { status, .. } => *status == 429 || *status >= 500,
        RequestError::Connect { .. } => true,
        _ => false,
    }
}

/// Parse a chat-completions response body.
pub fn parse_reply(text: &str) -> Result<Reply, RequestError> {
    parse_reply_bytes(text.as_bytes())
}

/// Parse a chat-completions response body given as bytes.
pub fn parse_reply_bytes(bytes: &[u8]) -> Result<Reply, RequestError> {
    let body: Value = serde_json::from_slice(bytes).map_err(|e| {
        let head: String = String::from_utf8_lossy(&bytes[..bytes.len().min(320)])
            .chars()
            .take(80)
            .collect();
        RequestError::Malformed(format!(
            "not JSON ({e}): {}",
            crate::terminal::escape_line(&format!("{head:?}"))
        ))
    })?;
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| RequestError::Malformed("no choices[0]".into()))?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .cloned()
        .ok_or_else(|| RequestError::Malformed("choices[0] has no message object".into()))?;
    if let Some(calls) = message.get("tool_calls") {
        if !(calls.is_null() || calls.is_array()) {
            return Err(RequestError::Malformed("tool_calls is not an array".into()));
        }
    }
    let usage = |k: &str| {
        body.pointer(&format!("/usage/{k}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(Reply {
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
        prompt_tokens: usage("prompt_tokens"),
        completion_tokens: usage("completion_tokens"),
        model: body.get("model").and_then(Value::as_str).map(str::to_owned),
        message,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let r = parse_reply(r#"{"choices":[{"message":{"role":"assistant","content":"hi","reasoning_content":"r"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#).unwrap();
        assert_eq!(r.message["reasoning_content"], "r");
        assert_eq!((r.prompt_tokens, r.completion_tokens), (7, 2));
        assert!(matches!(
            parse_reply("nope"),
            Err(RequestError::Malformed(_))
        ));
        assert!(matches!(
            parse_reply(r#"{"choices":[]}"#),
            Err(RequestError::Malformed(_))
        ));
        assert!(matches!(
            parse_reply(r#"{"choices":[{"message":{"tool_calls":5}}]}"#),
            Err(RequestError::Malformed(_))
        ));
        let e = parse_reply("\u{1b}]0;x\u{7}\u{202e}")
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\u{1b}') && !e.contains('\u{202e}'), "{e}");
    }

    #[test]
    fn limit_message_names_the_limit() {
        assert_eq!(
            RequestError::TooLarge(64 << 20).to_string(),
            "the model server's response is larger than the limit of 64 MiB (HEL_MAX_RESPONSE_BYTES): refused"
        );
        assert!(RequestError::TooLarge(1000)
            .to_string()
            .contains("1000 bytes"));
    }
}
