//! What a stdio server sends, bounded before the MCP SDK reads it: each
//! line (one JSON-RPC message) is counted as it arrives, byte by byte,
//! against [`MAX_MESSAGE`](super::MAX_MESSAGE) bytes and the values and
//! depth of [`json::Limits::MESSAGE`]; a line within them is checked
//! whole by [`json::check`] (which also refuses a repeated key) and
//! passed on. A line past a limit is not kept: the rest of it is only
//! scanned, for its top-level `id`, and in its place the SDK reads an
//! error response to that request, naming the limit, so the call or
//! the listing that asked fails at once with a reason (a tool's result
//! becomes an error the model reads), never an allocation of gigabytes or
//! a wait for a timeout. A refused line with no `id` (a notification) or
//! with a `method` (a request of the server's) is dropped.
//!
//! The work per read is one buffer's scan, so the timers of the calls and
//! the start fire while a long line is still arriving.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hel_store::json;
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

/// Bytes read from the server at a time.
const READ: usize = 64 << 10;
/// The longest top-level `id` kept from a refused line.
const MAX_ID: usize = 256;
/// The longest top-level key looked at (`id`, `method`).
const MAX_KEY: usize = 64;

/// The server's stdout, as the SDK reads it: see the module docs.
pub(crate) struct Bounded<R> {
    inner: R,
    max_bytes: usize,
    limits: json::Limits,
    /// The line so far (emptied once it is refused).
    line: Vec<u8>,
    scan: Scan,
    /// Lines ready for the reader, and how much of them it has.
    out: Vec<u8>,
    at: usize,
    buf: Box<[u8]>,
    eof: bool,
}

impl<R: AsyncRead + Unpin> Bounded<R> {
    pub(crate) fn new(inner: R, max_bytes: usize, limits: json::Limits) -> Bounded<R> {
        Bounded {
            inner,
            max_bytes,
            limits,
            line: Vec::new(),
            scan: Scan::default(),
            out: Vec::new(),
            at: 0,
            buf: vec![0; READ].into_boxed_slice(),
            eof: false,
        }
    }

    /// Take `bytes` from the server.
    fn take(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let end = memchr::memchr(b'\n', bytes);
            let part = &bytes[..end.unwrap_or(bytes.len())];
            self.scan.feed(part, self.limits);
            if self.scan.refused.is_none() {
                if self.line.len() + part.len() > self.max_bytes {
                    self.scan.refused =
                        Some(format!("a message longer than {}", size(self.max_bytes)));
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if self.scan.refused.is_some() && self.line.capacity() > 0 {
                self.line = Vec::new();
            }
            match end {
                Some(i) => {
                    self.end_line();
                    bytes = &bytes[i + 1..];
                }
                None => break,
            }
        }
    }

    /// Pass `line` on (moved, not copied, when nothing else waits: a
    /// message may be 128 MiB).
    fn pass(&mut self, mut line: Vec<u8>) {
        line.push(b'\n');
        if self.out.is_empty() {
            self.out = line;
            self.at = 0;
        } else {
            self.out.extend_from_slice(&line);
        }
    }

    /// The line ended: pass it on, or what stands for it.
    fn end_line(&mut self) {
        let scan = std::mem::take(&mut self.scan);
        let line = std::mem::take(&mut self.line);
        let why = match scan.refused.clone() {
            Some(why) => why,
            None if line.iter().all(u8::is_ascii_whitespace) => return,
            None => match json::check(&line, self.limits) {
                // A line that is not JSON at all is the SDK's to pass over.
                Err(e) if e.is_limit() => e.to_string(),
                _ => {
                    self.pass(line);
                    return;
                }
            },
        };
        if scan.method {
            return;
        }
        let Some(id) = scan.id_value() else {
            return;
        };
        let error = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32600,
                "message": format!("hel refused the server's answer: {why}"),
            },
        });
        self.pass(error.to_string().into_bytes());
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Bounded<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dst: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.at < this.out.len() {
                let n = dst.remaining().min(this.out.len() - this.at);
                dst.put_slice(&this.out[this.at..this.at + n]);
                this.at += n;
                if this.at == this.out.len() {
                    // A large message's buffer is not kept for the next.
                    if this.out.capacity() > READ {
                        this.out = Vec::new();
                    } else {
                        this.out.clear();
                    }
                    this.at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut rb = ReadBuf::new(&mut this.buf);
            match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        // A last line without its end is no message.
                        this.eof = true;
                        continue;
                    }
                    let buf = std::mem::take(&mut this.buf);
                    this.take(&buf[..n]);
                    this.buf = buf;
                }
            }
        }
    }
}

/// `n` bytes, in MiB when it is a whole number of them.
fn size(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// Which top-level key was read last.
#[derive(Default, Clone, Copy, PartialEq)]
enum Key {
    #[default]
    Other,
    Id,
    Method,
}

/// The count of one line so far: a JSON lexer that builds nothing. It
/// counts values as [`json::check`] does (keys too) and tracks the depth;
/// of the top-level object it keeps the raw `id` and whether it has a
/// `method`. Malformed input is not its concern ([`json::check`] and the
/// SDK refuse it); it only must not count less than is there.
#[derive(Default)]
struct Scan {
    values: u64,
    depth: u32,
    in_string: bool,
    escape: bool,
    in_scalar: bool,
    /// Depth 1 is an object whose next string is a key.
    expect_key: bool,
    top_is_object: bool,
    /// The top-level key being read (None: not reading one, or too long).
    key: Option<Vec<u8>>,
    reading_key: bool,
    last_key: Key,
    /// The raw bytes of the top-level `id` value, while and once read.
    id: Option<Vec<u8>>,
    capturing: bool,
    method: bool,
    refused: Option<String>,
}

impl Scan {
    fn feed(&mut self, bytes: &[u8], limits: json::Limits) {
        for &b in bytes {
            self.byte(b, limits);
        }
    }

    fn count(&mut self, limits: json::Limits) {
        self.values += 1;
        if self.values > limits.max_values && self.refused.is_none() {
            self.refused = Some(format!("more than {} JSON values", limits.max_values));
        }
    }

    fn byte(&mut self, b: u8, limits: json::Limits) {
        if self.capturing {
            let ends = !self.in_string && self.depth == 1 && matches!(b, b',' | b'}');
            if ends {
                self.capturing = false;
            } else if let Some(id) = self.id.as_mut() {
                id.push(b);
                if id.len() > MAX_ID {
                    self.id = None;
                    self.capturing = false;
                }
            }
        }
        if self.in_string {
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    self.end_key();
                    return;
                }
            }
            if self.reading_key {
                if let Some(k) = self.key.as_mut() {
                    k.push(b);
                    if k.len() > MAX_KEY {
                        self.key = None;
                    }
                }
            }
            return;
        }
        let scalar = !matches!(
            b,
            b'{' | b'}' | b'[' | b']' | b':' | b',' | b'"' | b' ' | b'\t' | b'\r' | b'\n'
        );
        if scalar {
            if !self.in_scalar {
                self.in_scalar = true;
                self.value_starts(b);
                self.count(limits);
            }
            return;
        }
        self.in_scalar = false;
        match b {
            b'{' | b'[' => {
                self.value_starts(b);
                self.count(limits);
                self.depth += 1;
                if self.depth == 1 {
                    self.top_is_object = b == b'{';
                    self.expect_key = self.top_is_object;
                }
                if self.depth > limits.max_depth && self.refused.is_none() {
                    self.refused = Some(format!("JSON nested deeper than {}", limits.max_depth));
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 && self.top_is_object => self.expect_key = true,
            b':' if self.depth == 1 => self.expect_key = false,
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.reading_key = true;
                    self.key = Some(Vec::new());
                } else {
                    self.value_starts(b);
                }
                self.count(limits);
            }
            _ => {}
        }
    }

    /// A value starts with byte `b`: at the top level after `"id":`, its
    /// bytes are kept.
    fn value_starts(&mut self, b: u8) {
        if self.depth == 1 && self.top_is_object && self.last_key == Key::Id {
            self.id = Some(vec![b]);
            self.capturing = true;
            self.last_key = Key::Other;
        }
    }

    fn end_key(&mut self) {
        let key = self.key.take().and_then(|raw| {
            let mut quoted = Vec::with_capacity(raw.len() + 1);
            quoted.push(b'"');
            quoted.extend_from_slice(&raw);
            quoted.push(b'"');
            serde_json::from_slice::<String>(&quoted).ok()
        });
        self.last_key = match key.as_deref() {
            Some("id") => Key::Id,
            Some("method") => {
                self.method = true;
                Key::Method
            }
            _ => Key::Other,
        };
    }

    /// The top-level `id`, when it was read whole and is one a request
    /// of hel's could have (a number or a string).
    fn id_value(&self) -> Option<Value> {
        if self.capturing {
            return None;
        }
        let raw = self.id.as_deref()?;
        let v = json::parse(raw.trim_ascii(), json::Limits::SMALL).ok()?;
        (v.is_number() || v.is_string()).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const TINY: json::Limits = json::Limits {
        max_values: 20,
        max_depth: 4,
    };

    /// What the SDK reads of `input` sent in pieces of `piece` bytes.
    fn through(input: &[u8], piece: usize, max_bytes: usize) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let reader = Pieces {
            data: input.to_vec(),
            at: 0,
            piece,
        };
        let mut b = Bounded::new(reader, max_bytes, TINY);
        let mut out = String::new();
        rt.block_on(b.read_to_string(&mut out)).unwrap();
        out
    }

    /// `data`, `piece` bytes a read.
    struct Pieces {
        data: Vec<u8>,
        at: usize,
        piece: usize,
    }

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            dst: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let n = self
                .piece
                .min(dst.remaining())
                .min(self.data.len() - self.at);
            let at = self.at;
            dst.put_slice(&self.data[at..at + n]);
            self.at += n;
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn lines_within_the_limits_pass_whole() {
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":[1,2]}}\n\nnot json\n";
        for piece in [1, 3, 1000] {
            assert_eq!(
                through(input, piece, 1 << 20),
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":[1,2]}}\nnot json\n"
            );
        }
    }

    #[test]
    fn a_line_past_a_limit_becomes_an_error_for_its_id() {
        let many = format!(
            "{{\"result\":{{\"x\":[{}]}},\"jsonrpc\":\"2.0\",\"id\":\"a\\\"7\"}}\n",
            vec!["[]"; 50].join(",")
        );
        let deep = format!("{{\"id\":3,\"result\":{}}}\n", "[".repeat(10));
        let long = format!("{{\"id\":4,\"result\":\"{}\"}}\n", "x".repeat(500));
        let repeated = "{\"id\":5,\"result\":{},\"result\":{}}\n";
        let notification = format!("{{\"method\":\"x\",\"params\":[{}]}}\n", "0,".repeat(40));
        let request = format!(
            "{{\"id\":6,\"method\":\"x\",\"params\":[{}0]}}\n",
            "0,".repeat(40)
        );
        let escaped_key = format!("{{\"\\u0069d\":8,\"r\":[{}0]}}\n", "0,".repeat(40));
        for piece in [1, 7, 4096] {
            let out = through(
                [
                    many.as_str(),
                    &deep,
                    &long,
                    repeated,
                    &notification,
                    &request,
                    &escaped_key,
                ]
                .concat()
                .as_bytes(),
                piece,
                300,
            );
            let lines: Vec<Value> = out
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let said: Vec<(Value, String)> = lines
                .iter()
                .map(|l| {
                    (
                        l["id"].clone(),
                        l["error"]["message"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            assert_eq!(said.len(), 5, "{out}");
            assert_eq!(said[0].0, "a\"7");
            assert!(
                said[0].1.contains("more than 20 JSON values"),
                "{}",
                said[0].1
            );
            assert_eq!(said[1].0, 3);
            assert!(said[1].1.contains("nested deeper than 4"), "{}", said[1].1);
            assert_eq!(said[2].0, 4);
            assert!(said[2].1.contains("longer than 300 bytes"), "{}", said[2].1);
            assert_eq!(said[3].0, 5);
            assert!(said[3].1.contains("a key repeated"), "{}", said[3].1);
            assert_eq!(said[4].0, 8);
        }
    }
}
