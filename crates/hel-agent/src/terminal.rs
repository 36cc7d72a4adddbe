//! Text from outside hel (model output, tool output, file names, server
//! messages) made safe to print on a terminal: nothing in it can move the
//! cursor, clear the screen, set the window title, write to the clipboard
//! (OSC 52), overwrite a line (lone CR) or reorder what is shown (bidi
//! overrides), because every such character is replaced by a visible
//! escape.
//!
//! Escapes: C0 controls and DEL in caret notation (`ESC` → `^[`, `CR` →
//! `^M`, NUL → `^@`, DEL → `^?`); C1 controls (U+0080–U+009F) and the bidi
//! embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) as
//! `\u{…}`. Everything else, including other non-ASCII text, is kept.

use std::borrow::Cow;

/// Whether `c` needs an escape, given what may stay.
fn dangerous(c: char, multiline: bool) -> bool {
    match c {
        '\n' | '\t' => !multiline,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

fn escape(text: &str, multiline: bool) -> Cow<'_, str> {
    let crlf = |i: usize| multiline && text.as_bytes().get(i + 1) == Some(&b'\n');
    let clean = text
        .char_indices()
        .all(|(i, c)| !dangerous(c, multiline) || (c == '\r' && crlf(i)));
    if clean {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, c) in text.char_indices() {
        if !dangerous(c, multiline) || (c == '\r' && crlf(i)) {
            out.push(c);
        } else if (c as u32) < 0x20 {
            out.push('^');
            out.push(char::from(b'@' + c as u8));
        } else if c == '\u{7f}' {
            out.push_str("^?");
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

/// `text` for one line of a terminal (a note, a table cell): every control
/// character, `\n` and `\t` included, and every bidi override becomes a
/// visible escape. Returns `text` itself when nothing needed escaping.
pub fn escape_line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// `text` for printing as several lines (an answer): like
/// [`escape_line`], but `\n`, `\t` and `\r\n` stay; a lone `\r` is
/// escaped, since it would let later text overwrite the line.
pub fn escape_text(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// `n` and the noun for it: `1 file`, `2 files`, `0 files`. Every count
/// hel words (here and in the CLI) goes through it.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi() {
        assert!(matches!(escape_line("plain é 한"), Cow::Borrowed(_)));
        assert_eq!(
            escape_line("\x1b[2J\x1b]0;title\x07x"),
            "^[[2J^[]0;title^Gx"
        );
        assert_eq!(escape_line("a\nb\tc\rd\0\x7f"), "a^Jb^Ic^Md^@^?");
        assert_eq!(escape_line("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(
            escape_line("abc\u{202e}fed\u{2066}x\u{2069}"),
            "abc\\u{202e}fed\\u{2066}x\\u{2069}"
        );
        assert_eq!(
            escape_text("one\r\ntwo\n\tthree\rover\x1b[A"),
            "one\r\ntwo\n\tthree^Mover^[[A"
        );
        assert_eq!(escape_text("end\r"), "end^M");
        assert!(matches!(escape_text("a\nb\r\n"), Cow::Borrowed(_)));
        // Escaping twice changes nothing more: the escapes are printable.
        let once = escape_line("\x1b\u{202e}").into_owned();
        assert_eq!(escape_line(&once), once);
    }
}
