//! The last lines of a running command's output, for the live view under
//! the spinner: bounded ([`KEEP`] bytes), stripped of everything that
//! could move the cursor or talk to the terminal (escape sequences, other
//! control characters, bidi overrides), each line cut to the width.

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

/// `text` without escape sequences (CSI, OSC, DCS and the like, whole)
/// and without any other control character or bidi override; a tab is a
/// space.
pub fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\t' => out.push(' '),
            // ESC [ … final, or CSI (U+009B) … final.
            '\u{1b}' if chars.peek() == Some(&'[') => {
                chars.next();
                skip_csi(&mut chars);
            }
            '\u{9b}' => skip_csi(&mut chars),
            // OSC, DCS, SOS, PM, APC: up to BEL or ST (ESC \ or U+009C).
            '\u{1b}' if matches!(chars.peek(), Some(']' | 'P' | 'X' | '^' | '_')) => {
                chars.next();
                skip_string(&mut chars);
            }
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            // Any other escape: ESC and the character after it.
            '\u{1b}' => {
                chars.next();
            }
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => {}
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c => out.push(c),
        }
    }
    out
}

/// Skip a CSI's parameters and its final byte (`@`–`~`).
fn skip_csi(chars: &mut impl Iterator<Item = char>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            break;
        }
    }
}

/// Skip a control string up to its end (BEL, ST or ESC \).
fn skip_string(chars: &mut std::iter::Peekable<impl Iterator<Item = char>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                break;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_controls_are_stripped() {
        assert_eq!(strip("\x1b[2J\x1b[1;1Hred\x1b[31m!\x1b[0m"), "red!");
        assert_eq!(strip("a\x1b]0;title\x07b\x1b]52;c;aGk=\x1b\\c"), "abc");
        assert_eq!(strip("a\u{9b}2Jb\u{9d}0;t\u{9c}c"), "abc");
        assert_eq!(strip("x\x1bPq#0\x1b\\y\x1b7z"), "xyz");
        assert_eq!(strip("t\tu\x08v\x00w\x7f\u{202e}é한"), "t uvwé한");
    }

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
