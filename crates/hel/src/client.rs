//! The model client: `POST {base}/chat/completions`, not streamed, with
//! retries for 429, 5xx and connection errors.

use std::time::Duration;

use serde_json::Value;

use crate::config::Endpoint;

/// Retries after the first attempt.
const RETRIES: u32 = 3;

/// Why a model request failed (after retries where they apply).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("the model request timed out after {0}s (raise --request-timeout)")]
    Timeout(u64),
    #[error("the model server answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("cannot reach the model server at {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("the model server sent a malformed response: {0}")]
    Malformed(String),
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
        })
    }

    /// Send `body`; retry 429, 5xx and connection failures up to 3 times
    /// with backoff (0.5 s, 1 s, 2 s), reporting each retry on stderr.
    pub async fn send(&self, body: &Value) -> Result<Reply, RequestError> {
        let mut attempt = 0;
        loop {
            match self.send_once(body).await {
                Err(e) if attempt < RETRIES && retryable(&e) => {
                    let wait = Duration::from_millis(500 << attempt);
                    crate::note!("hel: {e}; retrying in {:.1}s", wait.as_secs_f64());
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
        let text = resp.text().await.map_err(|e| self.transport(e))?;
        if !(200..300).contains(&status) {
            let mut body: String = text.chars().take(300).collect();
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
                    body = m.chars().take(300).collect();
                }
            }
            return Err(RequestError::Status { status, body });
        }
        parse_reply(&text)
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
                reason,
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
    let body: Value = serde_json::from_str(text).map_err(|e| {
        let head: String = text.chars().take(80).collect();
        RequestError::Malformed(format!("not JSON ({e}): {head:?}"))
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
    }
}
