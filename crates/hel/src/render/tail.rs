//! The last lines of a running command's output, for the live view under
//! the spinner: bounded ([`KEEP`] bytes), stripped of everything that
//! could move the cursor or talk to the terminal (escape sequences, other
//! control characters, bidi overrides), each line cut to the width.

use super::tool::strip;

/// Bytes of a command's output held for its live view: the rest is
/// dropped as it arrives.
pub const KEEP: usize = 4096;

/// Lines shown under the spinner.
pub const LINES: usize = 4;

/// The end of a command's output, as it arrives.
#[derive(Default)]
pub struct Tail {
    bytes: Vec<u8>,
}

impl Tail {
    /// Take in `data`, keeping only the last [`KEEP`] bytes.
    pub fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(KEEP)..];
        let over = (self.bytes.len() + data.len()).saturating_sub(KEEP);
        self.bytes.drain(..over);
        self.bytes.extend_from_slice(data);
    }

    /// The last `n` lines with something to show, stripped and each cut
    /// to `width` columns (with `…` where cut). A line redrawn with CR
    /// (a progress bar) shows what it was last redrawn to.
    pub fn lines(&self, n: usize, width: usize) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.bytes);
        let mut shown: Vec<String> = text
            .split('\n')
            .rev()
            .map(|l| {
                let l = l.strip_suffix('\r').unwrap_or(l);
                let last = l.rsplit('\r').next().unwrap_or(l);
                crate::render::fit(&strip(last), width.max(2))
            })
            .filter(|l| !l.trim().is_empty())
            .take(n)
            .collect();
        shown.reverse();
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_the_last_ones_cut_to_the_width() {
        let mut t = Tail::default();
        t.push(b"one\ntwo\r\n\nthree\n10%\r50%\r\x1b[K90%\nfour score and seven years ago\n");
        assert_eq!(t.lines(3, 12), ["three", "90%", "four score …"]);
        assert_eq!(t.lines(9, 80)[0], "one");
        // Wide characters take two columns each.
        let mut t = Tail::default();
        t.push("한국어한국어\n".as_bytes());
        assert_eq!(t.lines(1, 7), ["한국어…"]);
        // A line not ended yet shows as it is so far.
        t.push(b"part");
        assert_eq!(t.lines(1, 80), ["part"]);
    }

    #[test]
    fn only_the_last_bytes_are_held() {
        let mut t = Tail::default();
        for i in 0..10_000 {
            t.push(format!("line {i}\n").as_bytes());
        }
        assert!(t.bytes.len() <= KEEP);
        assert_eq!(t.lines(2, 80), ["line 9998", "line 9999"]);
        t.push(&vec![b'x'; 3 * KEEP]);
        assert_eq!(t.bytes.len(), KEEP);
    }
}
