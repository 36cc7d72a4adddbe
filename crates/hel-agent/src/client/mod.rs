//! The model client: `POST {base}/chat/completions`, with retries for 429,
//! 5xx and connection errors (never once a response has begun). A 4xx,
//! or a 500 whose body is a validation error of the request, is the
//! request's fault and is not retried ([`StatusKind`]).
//!
//! What goes on the wire is what every compatible server understands
//! ([`ModelClient::prepare`]): `tool_choice: "auto"` with the tools (some
//! servers take a missing one as "none"), an assistant message that calls
//! tools has a string `content` and no deprecated `function_call`. The
//! conversation keeps the messages exactly as the server returned them.
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
mod delta;
mod error;
mod stream;

use std::time::Duration;

use hel_store::json;
use serde_json::{json, Value};

use crate::config::Endpoint;
pub(crate) use delta::Delta;
use error::{not_json, root_cause};
pub(crate) use error::{RequestError, StatusKind};

/// Retries after the first attempt of a timeout or a broken connection,
/// waiting 0.5 s, 1 s, 2 s.
const RETRIES: u32 = 3;
/// Retries after the first attempt when the server says it is busy (429,
/// 5xx): waiting 0.5 s, doubled each time up to [`MAX_WAIT`], about a
/// minute in all.
const BUSY_RETRIES: u32 = 7;
/// The longest wait before one retry, whatever `Retry-After` asks.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// The most all the waits of one request add up to.
const WAIT_BUDGET: Duration = Duration::from_secs(64);

/// Bytes of a response body read at most, unless `HEL_MAX_RESPONSE_BYTES` says otherwise.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 << 20;
/// Bytes of an error response kept (its message is cut to 300 characters anyway).
const ERROR_BODY_BYTES: u64 = 64 << 10;

/// The response size limit: `HEL_MAX_RESPONSE_BYTES` when it is a positive
/// number, else the default.
pub(crate) fn max_response_bytes() -> u64 {
    std::env::var("HEL_MAX_RESPONSE_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES)
}

/// A parsed chat-completions response.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// The whole response body.
    pub body: Value,
    /// `choices[0].message`, exactly as sent.
    pub message: Value,
    pub finish_reason: Option<String>,
    /// The usage the server reported (0 when it reported none).
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The response carried a plausible usage: `prompt_tokens` above 0.
    /// Some servers send none in a stream, whatever the request asks.
    pub usage_reported: bool,
    /// The model the server says answered.
    pub model: Option<String>,
}

pub(crate) struct ModelClient {
    http: reqwest::Client,
    url: String,
    key: Option<String>,
    /// Where the key comes from (a 401 or 403 names it).
    key_var: &'static str,
    timeout_secs: u64,
    max_body: u64,
    stream: bool,
}

impl ModelClient {
    /// A client for `endpoint` whose requests take at most `timeout_secs`
    /// (for a stream: per gap between deltas), streamed when `stream`.
    pub(crate) fn new(
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
            key_var: crate::config::key_var(&endpoint.config.provider),
            timeout_secs,
            max_body: max_response_bytes(),
            stream,
        })
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.max(1))
    }

    /// Make `body` (a chat-completions request, as
    /// [`RequestConfig::body`](crate::config::RequestConfig::body) built
    /// it) the one this client sends: when streaming, it asks for a stream
    /// and for the usage at its end (servers that ignore that are
    /// estimated: [`Reply::usage_reported`]); with tools, `tool_choice:
    /// "auto"`; and its messages in the form every compatible server
    /// accepts ([`wire_message`]).
    pub(crate) fn prepare(&self, body: &mut Value) {
        let Some(fields) = body.as_object_mut() else {
            return;
        };
        if self.stream {
            fields.insert("stream".into(), json!(true));
            fields.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let tools = fields
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty());
        if tools && !fields.contains_key("tool_choice") {
            fields.insert("tool_choice".into(), json!("auto"));
        }
        if let Some(Value::Array(messages)) = fields.get_mut("messages") {
            messages.iter_mut().for_each(wire_message);
        }
    }

    /// Send `body` (as made by [`ModelClient::prepare`]); retry timeouts
    /// and connection failures (not a name that does not resolve or a
    /// refused connection: [`retryable`]) up to 3 times with backoff (0.5
    /// s, 1 s, 2 s), and a 429 or 5xx up to 7 times, waiting what its
    /// `Retry-After` asks or else 0.5 s doubled each time (at most
    /// [`MAX_WAIT`] a wait, [`WAIT_BUDGET`] in all), telling `on_retry`
    /// before each wait (the retry's number and of how many). A stream that ends
    /// before any of the answer is asked again at once, not streamed (the
    /// record keeps the body first sent). `on_delta` hears what arrives of
    /// the response before it is complete.
    pub(crate) async fn send(
        &self,
        body: &Value,
        on_retry: &mut dyn FnMut(&RequestError, Duration, Retry),
        on_delta: &mut dyn FnMut(Delta<'_>),
    ) -> Result<Reply, RequestError> {
        let mut attempt = 0;
        let mut waited = Duration::ZERO;
        let mut body = std::borrow::Cow::Borrowed(body);
        loop {
            match self.send_once(&body, on_delta).await {
                Err(e @ RequestError::EmptyStream) if body.get("stream").is_some() => {
                    on_retry(&e, Duration::ZERO, Retry::Unstreamed);
                    let plain = body.to_mut();
                    if let Some(fields) = plain.as_object_mut() {
                        fields.remove("stream");
                        fields.remove("stream_options");
                    }
                }
                Err(e) if retryable(&e) => {
                    let (wait, of) = match &e {
                        RequestError::Status { retry_after, .. } => {
                            let backoff = Duration::from_millis(500 << attempt.min(10));
                            let wait = retry_after.unwrap_or(backoff).min(MAX_WAIT);
                            (wait, BUSY_RETRIES)
                        }
                        _ => (Duration::from_millis(500 << attempt.min(10)), RETRIES),
                    };
                    if attempt >= of || waited + wait > WAIT_BUDGET {
                        return Err(e);
                    }
                    attempt += 1;
                    waited += wait;
                    on_retry(&e, wait, Retry::Attempt { n: attempt, of });
                    tokio::time::sleep(wait).await;
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
        let stream = body.get("stream") == Some(&Value::Bool(true));
        let mut req = self.http.post(&self.url).json(body);
        if !stream {
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
            // Only the start of an error body is read.
            let wait = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| retry_after(v, std::time::SystemTime::now()));
            let bytes = self.read_body(resp, ERROR_BODY_BYTES, false).await?;
            let mut e = status_error(status, &bytes);
            if let RequestError::Status { retry_after, .. } = &mut e {
                *retry_after = wait;
            }
            if let (RequestError::Status { body, .. }, 401 | 403) = (&mut e, status) {
                body.push_str(&format!(" (check the API key in {})", self.key_var));
            }
            return Err(e);
        }
        if stream && stream::is_event_stream(&resp) {
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
            let reason = match not_there(&e) {
                Some(why) => format!("{why} ({})", root_cause(&e)),
                None => root_cause(&e),
            };
            RequestError::Connect {
                url: self.url.clone(),
                reason,
            }
        }
    }
}

/// Which retry [`ModelClient::send`] is about to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Retry `n` of at most `of`.
    Attempt { n: u32, of: u32 },
    /// The request again, not streamed, at once (not counted).
    Unstreamed,
}

/// How long a `Retry-After` header asks to wait: whole seconds, or an
/// HTTP date (IMF-fixdate) from now; bounded by [`MAX_WAIT`]. None for
/// anything else.
fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    let wait =
        if !value.is_empty() && value.len() <= 10 && value.bytes().all(|b| b.is_ascii_digit()) {
            Duration::from_secs(value.parse().ok()?)
        } else {
            let at = http_date(value)?;
            at.duration_since(now).unwrap_or(Duration::ZERO)
        };
    Some(wait.min(MAX_WAIT))
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form RFC 9110
/// says servers send.
fn http_date(s: &str) -> Option<std::time::SystemTime> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    if s.len() != 29 || !s.is_ascii() || !s.ends_with(" GMT") || s.as_bytes()[3] != b',' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = &s[r];
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let day = num(5..7)?;
    let month = MONTHS.iter().position(|m| *m == &s[8..11])? as i64 + 1;
    let year = num(12..16)?;
    let (h, m, sec) = (num(17..19)?, num(20..22)?, num(23..25)?);
    if &s[19..20] != ":"
        || &s[22..23] != ":"
        || !(1..=31).contains(&day)
        || h > 23
        || m > 59
        || sec > 60
    {
        return None;
    }
    // Days from 1970-01-01 to the date (the civil-from-days inverse).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = u64::try_from(days * 86_400 + h * 3600 + m * 60 + sec).ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
}

/// What [`ModelClient::transport`] says of a name that does not resolve
/// or a port nobody listens on: asking again would only repeat it.
const NOT_THERE: [&str; 2] = ["the host name does not resolve", "nobody listens there"];

/// Whether asking again may help: 429 and 5xx (but validation errors),
/// timeouts of the connection, a connection that broke; not a name that
/// does not resolve or a refused connection.
fn retryable(e: &RequestError) -> bool {
    match e {
        RequestError::Status { kind, .. } => *kind == StatusKind::Transient,
        RequestError::Connect { reason, .. } => !NOT_THERE.iter().any(|n| reason.starts_with(n)),
        RequestError::Timeout(_) => true,
        _ => false,
    }
}

/// Why a connection could not be made, when it is for good: the name does
/// not resolve, or nobody listens on the port (None: another failure).
fn not_there(e: &reqwest::Error) -> Option<&'static str> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return Some(NOT_THERE[1]);
            }
        }
        // hyper's connector names the step that failed.
        if s.to_string().starts_with("dns error") {
            return Some(NOT_THERE[0]);
        }
        source = s.source();
    }
    None
}

/// `message` on the wire: an assistant message that calls tools gets `""`
/// for a null or missing `content` (servers that validate messages refuse
/// a null) and loses the deprecated `function_call` (a server's echo of
/// the first call, which `tool_calls` already says).
fn wire_message(message: &mut Value) {
    let Some(m) = message.as_object_mut() else {
        return;
    };
    let calls = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    if m.get("role").and_then(Value::as_str) != Some("assistant") || !calls {
        return;
    }
    if m.get("content").is_none_or(Value::is_null) {
        m.insert("content".into(), json!(""));
    }
    m.remove("function_call");
}

/// Phrases of the errors servers give for a request longer than the
/// model's context (OpenAI's `context_length_exceeded`, llama.cpp's
/// `exceed_context_size_error`, vLLM's and others' wording), lowercase.
const CONTEXT_TOO_LONG: [&str; 7] = [
    "context_length_exceeded",
    "exceed_context_size",
    "maximum context length",
    "context length",
    "context window",
    "prompt is too long",
    "too many tokens",
];

/// The error for an HTTP `status` whose body starts with `bytes`: the
/// first line of the server's message (escaped: it reaches the terminal),
/// and whether trying again could help.
fn status_error(status: u16, bytes: &[u8]) -> RequestError {
    let json = json::parse(bytes, json::Limits::MESSAGE).ok();
    let text = json
        .as_ref()
        .and_then(error_message)
        .unwrap_or_else(|| String::from_utf8_lossy(bytes).into_owned());
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut first = lines.next().unwrap_or("").to_owned();
    // "7 validation errors:" says nothing without the line it introduces.
    if first.ends_with(':') {
        if let Some(next) = lines.next() {
            first = format!("{first} {next}");
        }
    }
    let body: String = first.chars().take(300).collect();
    let body = crate::terminal::escape_line(&body).into_owned();
    let lower = String::from_utf8_lossy(bytes).to_lowercase();
    let kind = match status {
        429 => StatusKind::Transient,
        400..=499 if CONTEXT_TOO_LONG.iter().any(|p| lower.contains(p)) => {
            StatusKind::ContextTooLong
        }
        400..=499 => StatusKind::Refused,
        500 if json.as_ref().is_some_and(validation_error) => StatusKind::Refused,
        _ => StatusKind::Transient,
    };
    RequestError::Status {
        status,
        body,
        kind,
        retry_after: None,
    }
}

/// The message of an error body: OpenAI's `error.message` (or an `error`
/// string), or the first entry of a validation `detail` list as
/// `where: what`.
fn error_message(v: &Value) -> Option<String> {
    if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
        return Some(m.to_owned());
    }
    if let Some(m) = v.get("error").and_then(Value::as_str) {
        return Some(m.to_owned());
    }
    match v.get("detail") {
        Some(Value::String(m)) => Some(m.clone()),
        Some(Value::Array(list)) => {
            let first = list.first()?;
            let at: Vec<String> = first
                .get("loc")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                .collect();
            let msg = first
                .get("msg")
                .and_then(Value::as_str)
                .unwrap_or("invalid");
            let more = match list.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            Some(format!("{}: {msg}{more}", at.join(".")))
        }
        _ => None,
    }
}

/// Whether an error body says the request itself is invalid: a validation
/// `detail` list (FastAPI), an `invalid_request_error`, or a pydantic
/// "N validation error(s)" message (llama-cpp-python answers that with a
/// 500).
fn validation_error(v: &Value) -> bool {
    if v.get("detail").is_some_and(Value::is_array) {
        return true;
    }
    let field = |k: &str| v.pointer(&format!("/error/{k}")).and_then(Value::as_str);
    if field("type") == Some("invalid_request_error")
        || field("code") == Some("invalid_request_error")
    {
        return true;
    }
    let message = field("message").unwrap_or("");
    let words: Vec<&str> = message.split_whitespace().take(3).collect();
    matches!(words.as_slice(), [n, "validation", e, ..]
        if n.parse::<u64>().is_ok() && e.trim_end_matches(':').starts_with("error"))
}

/// Parse a chat-completions response body.
#[cfg(test)]
fn parse_reply(text: &str) -> Result<Reply, RequestError> {
    parse_reply_bytes(text.as_bytes())
}

/// Parse a chat-completions response body given as bytes, under the
/// limits of one message ([`json::Limits::MESSAGE`]): a body of 64 MiB
/// can hold 33 million values, which as a `Value` would be gigabytes.
pub(crate) fn parse_reply_bytes(bytes: &[u8]) -> Result<Reply, RequestError> {
    let body = json::parse(bytes, json::Limits::MESSAGE).map_err(|e| {
        let what = if e.is_limit() { "refused" } else { "not JSON" };
        not_json(what, &e, bytes)
    })?;
    parse_reply_value(body)
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
    hel_store::message::validate_reply(&message).map_err(|e| {
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
    // A 0 for a request that sent messages is no count: some servers put
    // zeros where they have no usage.
    let usage_reported = usage("prompt_tokens") > 0;
    Ok(Reply {
        usage_reported,
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
    fn retry_after_is_seconds_or_a_date_and_bounded() {
        let now = at(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after("4", now), Some(Duration::from_secs(4)));
        assert_eq!(retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(retry_after("99999999999", now), None);
        assert_eq!(retry_after("86400", now), Some(MAX_WAIT));
        assert_eq!(retry_after("-1", now), None);
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:42 GMT", now),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:40:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_after("Mon, 01 Jan 2001 00:00:00 GMT", now),
            Some(MAX_WAIT)
        );
        assert_eq!(
            http_date("Thu, 29 Feb 2024 23:59:59 GMT"),
            Some(at(1_709_251_199))
        );
        assert_eq!(retry_after("Sun, 06 Xyz 1994 08:49:42 GMT", now), None);
        assert_eq!(retry_after("Sun, 06 Nov 1994 28:49:42 GMT", now), None);
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:42 UTC", now), None);
    }

    fn at(secs: u64) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + Duration::from_secs(secs)
    }

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
        // Two calls with one id: a result could not say which it answers.
        let twice = r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
            {"id":"a","type":"function","function":{"name":"bash","arguments":"{}"}},
            {"id":"a","type":"function","function":{"name":"glob","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
        match parse_reply(twice) {
            Err(RequestError::Malformed(why)) => {
                assert!(why.contains("tool calls 0 and 1 have the same id"), "{why}")
            }
            other => panic!("{:?}", other.map(|r| r.message)),
        }
        let r = parse_reply(r#"{"choices":[{"message":{"content":"no role"}}]}"#).unwrap();
        assert_eq!(r.message["role"], "assistant");
        let e = parse_reply("\u{1b}]0;x\u{7}\u{202e}")
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\u{1b}') && !e.contains('\u{202e}'), "{e}");
    }

    #[test]
    fn refused_connections_and_unknown_names_are_not_retried() {
        let connect = |reason: &str| RequestError::Connect {
            url: "http://x".into(),
            reason: reason.into(),
        };
        assert!(!retryable(&connect(
            "the host name does not resolve (failed to lookup address information)"
        )));
        assert!(!retryable(&connect(
            "nobody listens there (Connection refused (os error 111))"
        )));
        assert!(retryable(&connect("connection reset by peer")));
        assert!(retryable(&RequestError::Timeout(1)));
        assert!(!retryable(&RequestError::Stalled(1)));
    }

    #[test]
    fn statuses_say_whether_to_try_again() {
        let kind = |status, body: &str| match status_error(status, body.as_bytes()) {
            RequestError::Status { kind, body, .. } => (kind, body),
            e => panic!("{e}"),
        };
        use StatusKind::*;
        assert_eq!(kind(429, "slow down").0, Transient);
        assert_eq!(
            kind(503, "<html>busy</html>"),
            (Transient, "<html>busy</html>".into())
        );
        assert_eq!(
            kind(500, r#"{"error":{"message":"boom\nat line 2"}}"#),
            (Transient, "boom".into())
        );
        assert_eq!(
            kind(404, r#"{"error":{"message":"no such model"}}"#).0,
            Refused
        );
        // A 500 that is the server's validation of the request.
        let pydantic = r#"{"error":{"message":"2 validation errors:\n  {'loc': ('body', 'messages')}\n  {'x': 1}","type":"internal_server_error"}}"#;
        assert_eq!(
            kind(500, pydantic),
            (
                Refused,
                "2 validation errors: {'loc': ('body', 'messages')}".into()
            )
        );
        assert_eq!(
            kind(
                500,
                r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#
            )
            .0,
            Refused
        );
        assert_eq!(
            kind(
                500,
                r#"{"detail":[{"loc":["body","messages",2,"content"],"msg":"Input should be a valid string"}]}"#
            ),
            (
                Refused,
                "body.messages.2.content: Input should be a valid string".into()
            )
        );
        // Too long for the context, however each server words it.
        for body in [
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 10950 tokens","code":"context_length_exceeded"}}"#,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#,
            "prompt is too long: 210000 tokens > 200000 maximum",
        ] {
            assert_eq!(kind(400, body).0, ContextTooLong, "{body}");
        }
        // Server text is escaped for the terminal.
        assert!(!kind(400, "\u{1b}[2Jx").1.contains('\u{1b}'));
    }

    #[test]
    fn assistant_tool_calls_go_out_with_string_content_and_no_function_call() {
        let call = json!([{"id": "a", "type": "function", "function": {"name": "glob", "arguments": "{}"}}]);
        let mut m = json!({"role": "assistant", "content": null, "function_call": {"name": "glob:", "arguments": "}"}, "tool_calls": call});
        wire_message(&mut m);
        assert_eq!(
            m,
            json!({"role": "assistant", "content": "", "tool_calls": call})
        );
        let mut m = json!({"role": "assistant", "tool_calls": call});
        wire_message(&mut m);
        assert_eq!(m["content"], "");
        // Anything else goes as it is.
        for m in [
            json!({"role": "assistant", "content": "x", "tool_calls": call}),
            json!({"role": "assistant", "content": null}),
            json!({"role": "assistant", "content": null, "function_call": {"name": "f"}, "tool_calls": []}),
            json!({"role": "user", "content": null, "tool_calls": call}),
        ] {
            let mut sent = m.clone();
            wire_message(&mut sent);
            assert_eq!(sent, m);
        }
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
