//! Values assigned to secret-looking names: `API_KEY=…` (dotenv, shell,
//! `export`), `password: …` (YAML), `"token": "…"` (JSON), `secret = "…"`
//! (TOML, code). The name must be secret by [`is_secret_name`]; the value
//! must look random: long enough, high in entropy, and not a reference, a
//! placeholder or code.

use std::sync::OnceLock;

use regex::bytes::{Regex, RegexBuilder};

use crate::names::{is_secret_name, kind_of_name};
use crate::rules::{entropy, Allowlist};

use crate::finding::{line_of, Finding, MIN_VALUE};

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        RegexBuilder::new(
            // Unbounded repetitions, the lengths checked after: bounded
            // ones make an automaton hundreds of states larger, which
            // the lazy DFA's cache cannot hold.
            r#"(?m)(?:^|[^A-Za-z0-9_.-])(?:export[ \t]+)?["']?([A-Za-z_][A-Za-z0-9_.-]*)["']?[ \t]*(?::=|=|:)[ \t]*(?:"([^"\r\n]+)"|'([^'\r\n]+)'|([^\s"'`,;()\[\]{}<>]+))"#,
        )
        .unicode(false)
        .build()
        .expect("the assignment pattern compiles")
    })
}

/// Whether `value` looks like a secret rather than a word, a reference, a
/// placeholder or code.
pub(crate) fn looks_secret(value: &[u8]) -> bool {
    let v = value;
    if v.len() < MIN_VALUE || v.len() > 256 {
        return false;
    }
    // References and templates: $VAR, ${VAR}, %VAR%, {{ x }}, <your-key>,
    // and handles hel has already put there.
    if matches!(v[0], b'$' | b'%' | b'<' | b'&' | b'*' | b'!' | b'#' | b'@')
        || v.starts_with(b"{{")
        || contains(v, "‹secret".as_bytes())
    {
        return false;
    }
    // Code: paths of identifiers, calls, types.
    if contains(v, b"::") || contains(v, b"->") || contains(v, b"=>") || contains(v, b"..") {
        return false;
    }
    if v.iter().any(|&b| b == b' ' || b == b'\t') {
        return false;
    }
    // Placeholders: AWS's `…EXAMPLE`, `XXXX…`, `your-…-here`.
    let lower = v.to_ascii_lowercase();
    if [
        "example",
        "xxxx",
        "your",
        "placeholder",
        "changeme",
        "redacted",
    ]
    .iter()
    .any(|p| contains(&lower, p.as_bytes()))
    {
        return false;
    }
    let digits = v.iter().any(u8::is_ascii_digit);
    let lower = v.iter().any(u8::is_ascii_lowercase);
    let upper = v.iter().any(u8::is_ascii_uppercase);
    let other = v.iter().any(|b| !b.is_ascii_alphanumeric());
    // A dotted or dashed identifier path (`self.api_key`, `os.environ`,
    // `my-secret-name`): letters and separators only.
    let path = v
        .iter()
        .all(|&b| b.is_ascii_alphabetic() || matches!(b, b'.' | b'_' | b'-' | b'/'));
    if path {
        return false;
    }
    let classes = [digits, lower, upper, other].iter().filter(|c| **c).count();
    let letters = lower || upper;
    let e = entropy(v);
    (digits && letters && classes >= 2 && e > 3.0) || (classes >= 3 && e > 3.5)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The parts of one match of [`pattern`] (`m`, at `at` in the chunk):
/// the name's range and the value's, read by hand (the pattern only finds
/// where they are: captures cost several times the search).
fn parts(m: &[u8], at: usize) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let name_char = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    let mut i = 0;
    // The boundary before the name (none at a line's start).
    if m.first()
        .is_some_and(|&b| !(b.is_ascii_alphabetic() || b == b'_'))
    {
        i += 1;
    }
    if m[i..].starts_with(b"export") && m.get(i + 6).is_some_and(|&b| b == b' ' || b == b'\t') {
        i += 6;
        while m.get(i).is_some_and(|&b| b == b' ' || b == b'\t') {
            i += 1;
        }
    }
    if m.get(i).is_some_and(|&b| b == b'"' || b == b'\'') {
        i += 1;
    }
    let name = i;
    while m.get(i).copied().is_some_and(name_char) {
        i += 1;
    }
    let name = name..i;
    if m.get(i).is_some_and(|&b| b == b'"' || b == b'\'') {
        i += 1;
    }
    while m.get(i).is_some_and(|&b| b == b' ' || b == b'\t') {
        i += 1;
    }
    match m.get(i..i + 2) {
        Some(b":=") => i += 2,
        _ if matches!(m.get(i), Some(b'=' | b':')) => i += 1,
        _ => return None,
    }
    while m.get(i).is_some_and(|&b| b == b' ' || b == b'\t') {
        i += 1;
    }
    let value = match m.get(i) {
        Some(&q @ (b'"' | b'\'')) if m.last() == Some(&q) && m.len() > i + 1 => i + 1..m.len() - 1,
        Some(_) => i..m.len(),
        None => return None,
    };
    if name.is_empty() || value.is_empty() {
        return None;
    }
    Some((
        at + name.start..at + name.end,
        at + value.start..at + value.end,
    ))
}

/// The assignments of secrets in `chunk` (at `offset` in the text).
///
/// `excuses` are the allowlists that apply: the global one and those of
/// gitleaks' `generic-api-key` rule, made for the same assignments (they
/// excuse `key_length = …`, `credentials_id = …`, `public_key = …`).
pub(crate) fn matches(
    chunk: &[u8],
    offset: usize,
    excuses: &[&Allowlist],
    found: &mut Vec<Finding>,
) {
    for m in pattern().find_iter(chunk) {
        let Some((name, value)) = parts(m.as_bytes(), m.start()) else {
            continue;
        };
        // The `secret` of a handle hel wrote: `‹secret:kind:1›`.
        if chunk[..name.start].ends_with("‹".as_bytes()) {
            continue;
        }
        let Ok(name_text) = std::str::from_utf8(&chunk[name.clone()]) else {
            continue;
        };
        if name_text.len() > 64 || !is_secret_name(name_text) {
            continue;
        }
        let whole = &chunk[m.range()];
        let v = &chunk[value.clone()];
        if !looks_secret(v) {
            continue;
        }
        let line = line_of(chunk, m.range());
        if excuses.iter().any(|a| a.excuses(v, whole, line)) {
            continue;
        }
        found.push(Finding {
            kind: kind_of_name(name_text),
            range: offset + value.start..offset + value.end,
        });
    }
}
