//! Reading a streamed response: server-sent events (framed by
//! `eventsource-stream`), each a chunk for the [`Assembler`], under the
//! response size limit and the gap timeout.

use std::collections::VecDeque;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use super::assemble::Assembler;
use super::delta::Delta;
use super::error::{root_cause, RequestError};

/// The longest line of a stream (one event's data, most often): a delta
/// is a few bytes, a server that sends the whole answer as one event
/// sends at most this. Without it one line of 64 MiB would be held four
/// times over (the line, the SSE parser's buffer, its event, the chunk).
pub(super) const MAX_LINE: usize = 16 << 20;

/// How long a stream may go without a new delta.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gap {
    pub every: Duration,
    /// The same, in the seconds the user gave.
    pub secs: u64,
}

/// Whether `resp` is an event stream (a server may answer a streamed
/// request with one JSON body instead).
pub(super) fn is_event_stream(resp: &reqwest::Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

/// Read the stream of `resp` to its end and return the response it
/// assembles to, telling `on_delta` what arrives on the way. At most
/// `limit` bytes are read; a gap of `gap` with no new delta, a stream
/// that breaks off or ends without its finish reason, or an error the
/// server reports in it, is an error.
pub(super) async fn read(
    resp: reqwest::Response,
    limit: u64,
    gap: Gap,
    on_delta: &mut dyn FnMut(Delta<'_>),
) -> Result<Value, RequestError> {
    let source = Source {
        resp,
        read: 0,
        limit,
        lines: Lines::default(),
        ready: VecDeque::new(),
        done: false,
    };
    let events = futures_util::stream::unfold(source, Source::next).eventsource();
    let mut events = std::pin::pin!(events);
    let mut asm = Assembler::default();
    let mut deadline = Instant::now() + gap.every;
    loop {
        let Ok(item) = tokio::time::timeout_at(deadline, events.next()).await else {
            return Err(RequestError::Stalled(gap.secs));
        };
        match item {
            None => break,
            Some(Ok(event)) if event.data == "[DONE]" => break,
            Some(Ok(event)) => {
                if asm.chunk(&event.data, on_delta)? {
                    deadline = Instant::now() + gap.every;
                }
            }
            Some(Err(EventStreamError::Transport(SourceError::TooLarge))) => {
                return Err(RequestError::TooLarge(limit))
            }
            Some(Err(EventStreamError::Transport(SourceError::LongLine))) => {
                return Err(RequestError::Malformed(format!(
                    "a line of the event stream is longer than {} MiB: refused",
                    MAX_LINE >> 20
                )))
            }
            Some(Err(EventStreamError::Transport(SourceError::Transport(e)))) => {
                return Err(RequestError::Cut(root_cause(&e)))
            }
            Some(Err(e)) => {
                return Err(RequestError::Malformed(format!(
                    "the event stream cannot be read: {}",
                    crate::terminal::escape_line(&e.to_string())
                )))
            }
        }
    }
    asm.finish()
}

/// Why the bytes of a stream stopped.
#[derive(Debug)]
enum SourceError {
    TooLarge,
    /// A line longer than [`MAX_LINE`].
    LongLine,
    Transport(reqwest::Error),
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::TooLarge => f.write_str("too large"),
            SourceError::LongLine => f.write_str("a line too long"),
            SourceError::Transport(e) => e.fmt(f),
        }
    }
}

/// The body of a streamed response, counted, as whole lines.
struct Source {
    resp: reqwest::Response,
    read: u64,
    limit: u64,
    lines: Lines,
    ready: VecDeque<Vec<u8>>,
    done: bool,
}

impl Source {
    /// The next line, once it is whole; None at the end of the body (a
    /// last line without its end can end no event, so it is dropped).
    async fn next(mut self) -> Option<(Result<Vec<u8>, SourceError>, Source)> {
        loop {
            if let Some(line) = self.ready.pop_front() {
                return Some((Ok(line), self));
            }
            if self.done {
                return None;
            }
            match self.resp.chunk().await {
                Ok(Some(chunk)) => {
                    self.read += chunk.len() as u64;
                    if self.read > self.limit {
                        self.done = true;
                        return Some((Err(SourceError::TooLarge), self));
                    }
                    self.lines.push(&chunk, &mut self.ready);
                    if self.lines.partial.len() > MAX_LINE
                        || self.ready.iter().any(|l| l.len() > MAX_LINE)
                    {
                        self.done = true;
                        return Some((Err(SourceError::LongLine), self));
                    }
                }
                Ok(None) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some((Err(SourceError::Transport(e)), self));
                }
            }
        }
    }
}

/// Splits bytes into lines (each with its end: LF, CRLF or CR) as they
/// arrive. The SSE parser is fed one whole line at a time because it
/// rescans its buffer from the start whenever bytes arrive and copies what
/// follows each line it takes: fed a long line in many pieces, or many
/// lines at once, it would take time quadratic in their size. Lines the
/// parser would ignore are not fed to it at all, so a flood of them costs
/// a scan: comments (keep-alives) and a blank line after a blank line
/// (dispatching an empty event does nothing).
#[derive(Default)]
struct Lines {
    partial: Vec<u8>,
    /// Bytes of `partial` known to hold no line end.
    scanned: usize,
    /// The last line fed was blank.
    blank: bool,
}

impl Lines {
    fn push(&mut self, chunk: &[u8], out: &mut VecDeque<Vec<u8>>) {
        self.partial.extend_from_slice(chunk);
        let buf = &self.partial;
        let mut start = 0;
        let mut at = self.scanned;
        loop {
            if self.blank && start == at {
                // Blank lines after a blank line, skipped in one pass.
                at += buf[at..]
                    .iter()
                    .take_while(|&&b| b == b'\n' || b == b'\r')
                    .count();
                start = at;
            }
            let Some(off) = memchr::memchr2(b'\n', b'\r', &buf[at..]) else {
                break;
            };
            let pos = at + off;
            let end = match (buf[pos], buf.get(pos + 1)) {
                (b'\r', Some(b'\n')) => pos + 2,
                // A CR last: an LF may follow in the next chunk.
                (b'\r', None) => break,
                _ => pos + 1,
            };
            let line = &buf[start..end];
            let blank = matches!(line, b"\n" | b"\r" | b"\r\n");
            if !(line.starts_with(b":") || (blank && self.blank)) {
                out.push_back(line.to_vec());
                self.blank = blank;
            }
            start = end;
            at = end;
        }
        let rest = buf.len() - start;
        self.scanned = match buf.last() {
            Some(b'\r') if rest > 0 => rest - 1,
            _ => rest,
        };
        self.partial.drain(..start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&str]) -> Vec<String> {
        let mut lines = Lines::default();
        let mut out = VecDeque::new();
        for c in chunks {
            lines.push(c.as_bytes(), &mut out);
        }
        out.iter()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect()
    }

    /// A connection lost mid-stream (the server gone after one event, its
    /// chunked body unfinished) is a stream cut off, after what arrived.
    #[tokio::test]
    async fn a_connection_lost_mid_stream_is_cut() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            while !req.ends_with(b"\r\n\r\n") {
                let mut b = [0u8; 1];
                if sock.read(&mut b).await.unwrap() == 0 {
                    break;
                }
                req.push(b[0]);
            }
            let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let text = format!("{head}{:x}\r\n{event}\r\n", event.len());
            sock.write_all(text.as_bytes()).await.unwrap();
            // Dropped here: no last chunk.
        });
        let resp = reqwest::get(&url).await.unwrap();
        assert!(is_event_stream(&resp));
        let mut heard = Vec::new();
        let gap = Gap {
            every: Duration::from_secs(60),
            secs: 60,
        };
        let r = read(resp, 1 << 20, gap, &mut |d| heard.push(format!("{d:?}"))).await;
        server.await.unwrap();
        // The transport's error, not a clean end without a finish reason.
        assert!(
            matches!(&r, Err(RequestError::Cut(why)) if !why.contains("finish reason")),
            "{r:?}"
        );
        assert_eq!(heard, ["First", "Text(\"hi\")"]);
    }

    #[test]
    fn lines_are_whole_whatever_the_chunks() {
        assert_eq!(
            split(&["da", "ta: a\n\nda", "ta: b\r", "\n\r", "\r\nx"]),
            ["data: a\n", "\n", "data: b\r\n", "\r"]
        );
        // What the parser would ignore is not fed to it.
        assert_eq!(
            split(&[": keep-alive\n\n: more\n\n\n", "data: c\n\n"]),
            ["\n", "data: c\n", "\n"]
        );
        assert_eq!(split(&["a\rb\n"]), ["a\r", "b\n"]);
        assert_eq!(split(&["no end"]), Vec::<String>::new());
    }
}
