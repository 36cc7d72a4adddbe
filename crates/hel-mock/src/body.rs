//! Response bodies, including the faults a client must survive: a body
//! that never ends, one far larger than any answer, one that declares more
//! than it sends, a stream that stops short or only keeps itself alive.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Response, StatusCode};

/// The start of a JSON answer whose content then streams.
const HEAD: &[u8] = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#;
/// The end of that answer.
const TAIL: &[u8] =
    br#""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
/// Bytes per frame of a streamed body.
pub(crate) const BLOCK: usize = 64 * 1024;
/// How often a stalled stream sends a keep-alive comment.
const KEEPALIVE_EVERY: Duration = Duration::from_millis(100);

/// A body: some bytes, then what follows them.
pub(crate) struct MockBody {
    queue: VecDeque<Bytes>,
    rest: Rest,
    /// The exact length, when known (hyper then sends it as Content-Length).
    exact: Option<u64>,
}

enum Rest {
    End,
    /// This block, forever.
    Forever(Bytes),
    /// Nothing more, and no end: held until the client hangs up.
    Hold,
    /// An SSE keep-alive comment every [`KEEPALIVE_EVERY`], and nothing else.
    KeepAlive(Pin<Box<tokio::time::Sleep>>),
    /// `block` `times` times, then `tail`.
    Repeat {
        block: Bytes,
        times: u64,
        tail: Bytes,
    },
    /// `left` bytes of `block` repeated, then `tail`.
    Blocks {
        block: Bytes,
        left: u64,
        tail: Bytes,
    },
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let data = |b: Bytes| Poll::Ready(Some(Ok(Frame::data(b))));
        if let Some(b) = this.queue.pop_front() {
            return data(b);
        }
        match &mut this.rest {
            Rest::End => Poll::Ready(None),
            Rest::Forever(b) => data(b.clone()),
            // Never woken: the connection ends with the client or the server.
            Rest::Hold => Poll::Pending,
            Rest::Blocks { block, left, tail } if *left > 0 => {
                let k = (*left).min(block.len() as u64) as usize;
                *left -= k as u64;
                data(block.slice(..k))
            }
            Rest::Blocks { tail, .. } => {
                let tail = std::mem::take(tail);
                this.rest = Rest::End;
                data(tail)
            }
            Rest::KeepAlive(sleep) => match sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let next = tokio::time::Instant::now() + KEEPALIVE_EVERY;
                    sleep.as_mut().reset(next);
                    data(Bytes::from_static(b": keep-alive\n\n"))
                }
                Poll::Pending => Poll::Pending,
            },
            Rest::Repeat { block, times, .. } if *times > 0 => {
                *times -= 1;
                data(block.clone())
            }
            Rest::Repeat { tail, .. } => {
                let tail = std::mem::take(tail);
                this.rest = Rest::End;
                data(tail)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.queue.is_empty() && matches!(self.rest, Rest::End)
    }

    fn size_hint(&self) -> SizeHint {
        self.exact
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

fn response(status: StatusCode, body: MockBody) -> Response<MockBody> {
    typed(status, body, "application/json")
}

fn typed(status: StatusCode, body: MockBody, content_type: &'static str) -> Response<MockBody> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// A whole body.
pub(crate) fn json(status: StatusCode, text: String) -> Response<MockBody> {
    let len = text.len() as u64;
    response(
        status,
        MockBody {
            queue: VecDeque::from([Bytes::from(text)]),
            rest: Rest::End,
            exact: Some(len),
        },
    )
}

/// The start of a JSON answer, then `a` forever, chunked.
pub(crate) fn endless() -> Response<MockBody> {
    response(
        StatusCode::OK,
        MockBody {
            queue: VecDeque::from([Bytes::from_static(HEAD)]),
            rest: Rest::Forever(Bytes::from(vec![b'a'; BLOCK])),
            exact: None,
        },
    )
}

/// A valid answer whose content is `n` bytes of `x`, streamed with its
/// Content-Length, or chunked without one.
pub(crate) fn huge(n: u64, chunked: bool) -> Response<MockBody> {
    let len = (HEAD.len() + TAIL.len()) as u64 + n;
    response(
        StatusCode::OK,
        MockBody {
            queue: VecDeque::from([Bytes::from_static(HEAD)]),
            rest: Rest::Blocks {
                block: Bytes::from(vec![b'x'; BLOCK]),
                left: n,
                tail: Bytes::from_static(TAIL),
            },
            exact: (!chunked).then_some(len),
        },
    )
}

/// A valid answer (with its Content-Length) whose message carries a
/// field `extra` holding an array of `n` zeros (`n` ≥ 1).
pub(crate) fn zeros(n: u64) -> Response<MockBody> {
    let head: &[u8] =
        br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi","extra":["#;
    let tail = format!("0]}}{}", std::str::from_utf8(&TAIL[2..]).unwrap_or(""));
    let left = 2 * n.saturating_sub(1);
    let len = (head.len() + tail.len()) as u64 + left;
    response(
        StatusCode::OK,
        MockBody {
            queue: VecDeque::from([Bytes::from_static(head)]),
            rest: Rest::Blocks {
                block: Bytes::from("0,".repeat(BLOCK / 2)),
                left,
                tail: Bytes::from(tail),
            },
            exact: Some(len),
        },
    )
}

/// Headers declaring a Content-Length of `n` bytes, then a few bytes of
/// body, and nothing more.
pub(crate) fn declared(n: u64) -> Response<MockBody> {
    let mut r = response(
        StatusCode::OK,
        MockBody {
            queue: VecDeque::from([Bytes::from_static(b"{\"choices\"")]),
            rest: Rest::Hold,
            exact: None,
        },
    );
    r.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(n));
    r
}

/// How a scripted event stream ends.
pub(crate) enum StreamEnd {
    /// The body ends (whether the events were all there or not). A body
    /// that fails instead would make hyper drop the connection with what
    /// it had not yet written, headers included: the client would see a
    /// connection error before any response, not a stream cut short.
    End,
    /// Keep-alive comments forever, no more events.
    Stall,
}

/// An event stream: `frames` (each one body frame), then `end`.
pub(crate) fn event_stream(frames: Vec<Bytes>, end: StreamEnd) -> Response<MockBody> {
    let rest = match end {
        StreamEnd::End => Rest::End,
        StreamEnd::Stall => Rest::KeepAlive(Box::pin(tokio::time::sleep(KEEPALIVE_EVERY))),
    };
    sse(frames, rest)
}

/// An event stream: `head`, then `block` `times` times, then `tail`.
pub(crate) fn repeated_events(
    head: Bytes,
    block: Bytes,
    times: u64,
    tail: Bytes,
) -> Response<MockBody> {
    sse(vec![head], Rest::Repeat { block, times, tail })
}

/// An event stream: `head`, then `block` forever.
pub(crate) fn endless_events(head: Bytes, block: Bytes) -> Response<MockBody> {
    sse(vec![head], Rest::Forever(block))
}

fn sse(frames: Vec<Bytes>, rest: Rest) -> Response<MockBody> {
    typed(
        StatusCode::OK,
        MockBody {
            queue: VecDeque::from(frames),
            rest,
            exact: None,
        },
        "text/event-stream",
    )
}
