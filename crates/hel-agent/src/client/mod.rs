//! The model client: `POST {base}/chat/completions`, with retries for 429,
//! 5xx and connection errors (never once a response has begun).
//!
//! Streamed (the default): the request asks for `stream: true` with
//! `stream_options.include_usage`, and the server-sent events are
//! assembled into the response a non-streamed request would have had
//! ([`stream`], [`assemble`]), which is then validated as one. A server
//! that answers a streamed request with a plain JSON body is read as one.
//! Not streamed (`--no-stream`): one JSON body.
//!
//! The completed/incomplete rule is the same either way. Response bodies
//! are read up to a limit ([`DEFAULT_MAX_RESPONSE_BYTES`],
//! `HEL_MAX_RESPONSE_BYTES`): a declared Content-Length over it is refused
//! before reading, and bytes are counted as they arrive (a stream's
//! keep-alive comments included). `--request-timeout` bounds a whole
//! non-streamed request; for a stream it bounds the wait for the response
//! headers and then every gap between two deltas (keep-alive comments are
//! not progress). A stream is complete only when its finish reason
//! arrived and the stream then ended cleanly.

mod assemble;
mod stream;

use std::time::Duration;

use serde_json::{json, Value};

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
    /// A stream went `{0}` seconds without a new delta.
    #[error("the model server sent nothing new for {0}s (raise --request-timeout)")]
    Stalled(u64),
    /// A stream ended, or its connection broke, before it was complete.
    #[error("the model server's stream broke off before the answer was complete ({0})")]
    Cut(String),
    /// The server reported an error inside a stream.
    #[error("the model server reported an error mid-stream: {0}")]
    StreamFailed(String),
    /// The reply is a message a load of the session would refuse
    /// (objects-spec §4.1): it is not kept.
    #[error("the model's reply is refused: with it the session would hold {0}, over what hel loads back (see README, \"Limits\")")]
    OverLimit(hel_store::OverLimit),
}

/// What arrives of a response before it is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta<'a> {
    /// The first delta of the response (for a whole body: the body).
    First,
    /// A piece of the answer's `content`, as the model sent it.
    Text(&'a str),
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
    stream: bool,
}

impl ModelClient {
    /// A client for `endpoint` whose requests take at most `timeout_secs`
    /// (for a stream: per gap between deltas), streamed when `stream`.
    pub fn new(
        endpoint: &Endpoint,
        timeout_secs: u64,
        stream: bool,
    ) -> Result<ModelClient, RequestError> {
        // No client-wide timeout: a stream may rightly last longer than
        // --request-timeout; each request sets its own bounds.
        let http = reqwest::Client::builder()
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
            stream,
        })
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.max(1))
    }

    /// Make `body` (a chat-completions request) the one this client sends:
    /// when streaming, it asks for a stream and for the usage at its end
    /// (so the Meter still sees real `prompt_tokens`).
    pub fn prepare(&self, body: &mut Value) {
        if let (true, Some(fields)) = (self.stream, body.as_object_mut()) {
            fields.insert("stream".into(), json!(true));
            fields.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }

    /// Send `body` (as made by [`ModelClient::prepare`]); retry 429, 5xx
    /// and connection failures up to 3 times with backoff (0.5 s, 1 s,
    /// 2 s), telling `on_retry` before each wait. `on_delta` hears what
    /// arrives of the response before it is complete.
    pub async fn send(
        &self,
        body: &Value,
        on_retry: &mut dyn FnMut(&RequestError, Duration),
        on_delta: &mut dyn FnMut(Delta<'_>),
    ) -> Result<Reply, RequestError> {
        let mut attempt = 0;
        loop {
            match self.send_once(body, on_delta).await {
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

    async fn send_once(
        &self,
        body: &Value,
        on_delta: &mut dyn FnMut(Delta<'_>),
    ) -> Result<Reply, RequestError> {
        let deadline = tokio::time::Instant::now() + self.timeout();
        let mut req = self.http.post(&self.url).json(body);
        if !self.stream {
            req = req.timeout(self.timeout());
        }
        if let Some(key) = &self.key {
            req = req.bearer_auth(key);
        }
        let resp = tokio::time::timeout_at(deadline, req.send())
            .await
            .map_err(|_| RequestError::Timeout(self.timeout_secs))?
            .map_err(|e| self.transport(e))?;
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
        if self.stream && stream::is_event_stream(&resp) {
            let gap = stream::Gap {
                every: self.timeout(),
                secs: self.timeout_secs,
            };
            let body = stream::read(resp, self.max_body, gap, on_delta).await?;
            return parse_reply_value(body);
        }
        let bytes = tokio::time::timeout_at(deadline, self.read_body(resp, self.max_body, true))
            .await
            .map_err(|_| RequestError::Timeout(self.timeout_secs))??;
        let reply = parse_reply_bytes(&bytes)?;
        on_delta(Delta::First);
        Ok(reply)
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
            RequestError::Connect {
                url: self.url.clone(),
                reason: root_cause(&e),
            }
        }
    }
}

/// The innermost cause of `e`, escaped for a terminal.
fn root_cause(e: &reqwest::Error) -> String {
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        reason = s.to_string();
        source = s.source();
    }
    crate::terminal::escape_line(&reason).into_owned()
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
    let body: Value = serde_json::from_slice(bytes).map_err(|e| not_json("not JSON", &e, bytes))?;
    parse_reply_value(body)
}

/// Malformed: `what` failed to parse as JSON; names the start of `bytes`.
fn not_json(what: &str, e: &serde_json::Error, bytes: &[u8]) -> RequestError {
    let head: String = String::from_utf8_lossy(&bytes[..bytes.len().min(320)])
        .chars()
        .take(80)
        .collect();
    RequestError::Malformed(format!(
        "{what} ({e}): {}",
        crate::terminal::escape_line(&format!("{head:?}"))
    ))
}

/// Validate a chat-completions response body, whether it came whole or
/// was assembled from a stream.
fn parse_reply_value(body: Value) -> Result<Reply, RequestError> {
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| RequestError::Malformed("no choices[0]".into()))?;
    let mut message = choice
        .get("message")
        .filter(|m| m.is_object())
        .cloned()
        .ok_or_else(|| RequestError::Malformed("choices[0] has no message object".into()))?;
    if let Some(calls) = message.get("tool_calls") {
        if !(calls.is_null() || calls.is_array()) {
            return Err(RequestError::Malformed("tool_calls is not an array".into()));
        }
    }
    // The message joins the conversation, which the store refuses to save
    // when a message is not one it can load back: refuse it here, as the
    // server's fault, rather than carry on unable to save. A missing role
    // is the assistant's (as a stream's first delta may leave it).
    if let Some(m) = message.as_object_mut() {
        if m.get("role").is_none_or(Value::is_null) {
            m.insert("role".into(), Value::from("assistant"));
        }
    }
    if message.get("role").and_then(Value::as_str) != Some("assistant") {
        return Err(RequestError::Malformed(
            "choices[0].message is not the assistant's".into(),
        ));
    }
    hel_store::message::validate(&message).map_err(|e| {
        RequestError::Malformed(format!(
            "choices[0].message is not a valid message: {}",
            crate::terminal::escape_line(&e.to_string())
        ))
    })?;
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
        // A message the store could not save back is the server's fault.
        for bad in [
            r#"{"role":"assistant","content":5}"#,
            r#"{"role":"banana","content":"x"}"#,
            r#"{"role":"tool","tool_call_id":"a","content":"x"}"#,
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"bash","arguments":5}}]}"#,
        ] {
            let body = format!(r#"{{"choices":[{{"message":{bad},"finish_reason":"stop"}}]}}"#);
            assert!(
                matches!(parse_reply(&body), Err(RequestError::Malformed(_))),
                "{bad}"
            );
        }
        let r = parse_reply(r#"{"choices":[{"message":{"content":"no role"}}]}"#).unwrap();
        assert_eq!(r.message["role"], "assistant");
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
