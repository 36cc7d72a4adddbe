//! Command output, kept up to a bound: the rest is counted and dropped, so
//! a command that prints without end costs at most [`STREAM_CAP`] bytes.

use std::rc::Rc;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes of each stream kept in memory.
pub const STREAM_CAP: usize = 8 << 20;

/// What hears each read of a command's output.
pub type Listener = dyn Fn(&[u8]);

/// Where what a command prints is also sent as it arrives, for a live
/// view: called with each read.
#[derive(Clone)]
pub struct Tap(pub Rc<Listener>);

/// What was kept of one stream.
#[derive(Default)]
pub struct Kept {
    bytes: Vec<u8>,
    dropped: usize,
    /// The stream ended.
    pub eof: bool,
    buf: Vec<u8>,
    /// Hears each read as it arrives.
    pub tap: Option<Tap>,
}

impl Kept {
    /// Kept, with each read also sent to `tap`.
    pub fn tapped(tap: Option<Tap>) -> Kept {
        Kept {
            tap,
            ..Kept::default()
        }
    }

    /// Take in what was read.
    pub fn push(&mut self, data: &[u8]) {
        if let Some(t) = &self.tap {
            (t.0)(data);
        }
        let room = STREAM_CAP.saturating_sub(self.bytes.len()).min(data.len());
        self.bytes.extend_from_slice(&data[..room]);
        self.dropped += data.len() - room;
    }

    /// Read once from `r` (cancel-safe: a read that did not complete took
    /// nothing); an error or the end of the stream sets `eof`.
    pub async fn fill<R: AsyncRead + Unpin>(&mut self, r: &mut R) {
        self.buf.resize(64 * 1024, 0);
        match r.read(&mut self.buf).await {
            Ok(0) | Err(_) => self.eof = true,
            Ok(n) => {
                let mut buf = std::mem::take(&mut self.buf);
                self.push(&buf[..n]);
                std::mem::swap(&mut self.buf, &mut buf);
            }
        }
    }

    /// Read `r` to its end, each read also sent to `tap`.
    pub async fn read_all<R: AsyncRead + Unpin>(r: Option<&mut R>, tap: Option<Tap>) -> Kept {
        let mut kept = Kept::tapped(tap);
        if let Some(r) = r {
            while !kept.eof {
                kept.fill(r).await;
            }
        }
        kept
    }

    /// The text kept, and a note of how much was not.
    pub fn text(&self) -> String {
        let mut s = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.dropped > 0 {
            s.push_str(&format!("\n[{} more bytes not kept]", self.dropped));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_up_to_the_cap_and_counts_the_rest() {
        let big = vec![b'x'; STREAM_CAP + 10];
        let mut src: &[u8] = &big;
        let kept = Kept::read_all(Some(&mut src), None).await;
        let text = kept.text();
        assert!(text.ends_with("\n[10 more bytes not kept]"));
        assert_eq!(text.len(), STREAM_CAP + "\n[10 more bytes not kept]".len());
    }
}
