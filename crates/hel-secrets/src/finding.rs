//! What the detector gives: findings, joined in order.

use std::ops::Range;

/// A secret found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What it is: a gitleaks rule's id (`aws-access-token`,
    /// `github-pat`), or the name it was assigned to or came from,
    /// lower-cased with `-` (`aws-secret-access-key`): `[a-z0-9-]`, at most
    /// 40 characters.
    pub kind: String,
    /// Its bytes in the text (on character boundaries).
    pub range: Range<usize>,
}

/// Values shorter than this are never redacted: an environment variable
/// `TOKEN=1` would otherwise take every `1` out of every text.
pub const MIN_VALUE: usize = 8;

/// The line of `chunk` around `range`.
pub(crate) fn line_of(chunk: &[u8], range: Range<usize>) -> &[u8] {
    let from = chunk[..range.start]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let to = chunk[range.end..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(chunk.len(), |i| range.end + i);
    &chunk[from..to]
}

/// `found` in order, overlapping findings joined, each range widened to
/// character boundaries of `text`.
pub(crate) fn join(text: &str, mut found: Vec<Finding>) -> Vec<Finding> {
    found.sort_by(|a, b| {
        a.range
            .start
            .cmp(&b.range.start)
            .then(b.range.end.cmp(&a.range.end))
    });
    let mut out: Vec<Finding> = Vec::with_capacity(found.len());
    for mut f in found {
        while !text.is_char_boundary(f.range.start) {
            f.range.start -= 1;
        }
        while !text.is_char_boundary(f.range.end) {
            f.range.end += 1;
        }
        match out.last_mut() {
            Some(last) if f.range.start < last.range.end => {
                last.range.end = last.range.end.max(f.range.end);
                if generic(&last.kind) && !generic(&f.kind) {
                    last.kind = f.kind;
                }
            }
            _ => out.push(f),
        }
    }
    out
}

/// Whether `kind` says less than another kind of the same value: gitleaks'
/// catch-all, or none.
fn generic(kind: &str) -> bool {
    kind.is_empty() || kind == "generic-api-key"
}
