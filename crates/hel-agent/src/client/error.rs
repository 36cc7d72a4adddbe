//! Why a model request failed, and the words for it.

/// Why a model request failed (after retries where they apply).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RequestError {
    #[error("the model request timed out after {0}s (raise --request-timeout)")]
    Timeout(u64),
    /// `body`: the first line of the server's message.
    #[error("the model server answered HTTP {status}: {body}")]
    Status {
        status: u16,
        body: String,
        kind: StatusKind,
        /// How long the server asked to wait before asking again
        /// (`Retry-After`), bounded.
        retry_after: Option<std::time::Duration>,
    },
    /// A failure to connect or to exchange the request. One that asking
    /// again would only repeat (the name does not resolve, nobody listens
    /// on the port) says so in `reason` and is not retried.
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
    /// A stream ended cleanly before anything of the answer: some servers
    /// cannot stream some answers (llama-cpp-python breaks off a stream
    /// whose model chose to call a tool). Asked again once, not streamed.
    #[error("the model server's stream ended before any of the answer")]
    EmptyStream,
    /// The server reported an error inside a stream.
    #[error("the model server reported an error mid-stream: {0}")]
    StreamFailed(String),
    /// The reply is a message a load of the session would refuse
    /// (objects-spec §4.2): it is not kept.
    #[error("the model's reply is refused: with it the session would hold {0}, over what hel loads back (see docs/configuration.md, \"Limits\")")]
    OverLimit(hel_store::OverLimit),
}

/// What an HTTP error status says about the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusKind {
    /// 429 or 5xx: the server's trouble, tried again.
    Transient,
    /// The server refused this request (a 4xx, or a 500 whose body is a
    /// validation error): sending it again changes nothing.
    Refused,
    /// A 4xx saying the request does not fit the model's context.
    ContextTooLong,
}

impl RequestError {
    /// The server said the request does not fit the model's context.
    pub fn context_too_long(&self) -> bool {
        matches!(
            self,
            RequestError::Status {
                kind: StatusKind::ContextTooLong,
                ..
            }
        )
    }
}

/// `n` bytes for messages: in MiB when it is a whole number of them.
fn size(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// The innermost cause of `e`, escaped for a terminal.
pub(super) fn root_cause(e: &reqwest::Error) -> String {
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        reason = s.to_string();
        source = s.source();
    }
    crate::terminal::escape_line(&reason).into_owned()
}

/// Malformed: `what` failed to parse as JSON; names the start of `bytes`.
pub(super) fn not_json(what: &str, e: &dyn std::fmt::Display, bytes: &[u8]) -> RequestError {
    let head: String = String::from_utf8_lossy(&bytes[..bytes.len().min(320)])
        .chars()
        .take(80)
        .collect();
    RequestError::Malformed(format!(
        "{what} ({e}): {}",
        crate::terminal::escape_line(&format!("{head:?}"))
    ))
}
