//! Private key blocks cut short: a `-----BEGIN … PRIVATE KEY-----` line
//! and the key's body after it, with no end line (the first lines of a key
//! file, `head id_rsa`, or an output the output limit cut). gitleaks' rule
//! finds a block whole, from its first line to its last; this finds the
//! first line and the body that follows it, to where the body stops (the
//! end line, or the end of the text), so that the part of a key a text
//! holds is a finding too.

use std::sync::OnceLock;

use regex::bytes::Regex;

use crate::finding::Finding;

/// The least body that makes a block: gitleaks' rule asks as much.
const MIN_BODY: usize = 64;

fn header() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
            .expect("the header pattern compiles")
    })
}

/// A byte of a key's body as a text holds it: base64, line ends, and the
/// `\n` of a key written in a JSON string.
fn body_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\\' | b'\r' | b'\n')
}

/// The blocks of `chunk` (at `offset` in the text), whole or cut short.
pub(crate) fn matches(chunk: &[u8], offset: usize, found: &mut Vec<Finding>) {
    for m in header().find_iter(chunk) {
        let body = chunk[m.end()..]
            .iter()
            .position(|&b| !body_byte(b))
            .unwrap_or(chunk.len() - m.end());
        if body < MIN_BODY {
            continue;
        }
        found.push(Finding {
            kind: "private-key".to_owned(),
            range: offset + m.start()..offset + m.end() + body,
        });
    }
}
