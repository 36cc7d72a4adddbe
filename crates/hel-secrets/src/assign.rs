//! Values assigned to secret-looking names: `API_KEY=…` (dotenv, shell,
//! `export`), `password: …` (YAML), `"token": "…"` (JSON), `secret = "…"`
//! (TOML, code). The name must be secret by [`is_secret_name`]; the value
//! must look random: long enough, high in entropy, and not a reference, a
//! placeholder or code.

use std::sync::OnceLock;

use regex::bytes::{Regex, RegexBuilder};

use crate::names::{is_secret_name, kind_of_name};
use crate::rules::{entropy, Allowlist};

use crate::{line_of, Finding, MIN_VALUE};

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        RegexBuilder::new(
            r#"(?m)(?:^|[^A-Za-z0-9_.-])(?:export[ \t]+)?["']?([A-Za-z_][A-Za-z0-9_.-]{0,63})["']?[ \t]*(?::=|=|:)[ \t]*(?:"([^"\r\n]{8,256})"|'([^'\r\n]{8,256})'|([^\s"'`,;()\[\]{}<>]{8,256}))"#,
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
        || contains(v, "‹secret:".as_bytes())
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
    for caps in pattern().captures_iter(chunk) {
        let (Some(whole), Some(name)) = (caps.get(0), caps.get(1)) else {
            continue;
        };
        // The `secret` of a handle hel wrote: `‹secret:kind:1›`.
        if chunk[..name.start()].ends_with("‹".as_bytes()) {
            continue;
        }
        let Ok(name) = std::str::from_utf8(name.as_bytes()) else {
            continue;
        };
        if !is_secret_name(name) {
            continue;
        }
        let Some(value) = caps.get(2).or(caps.get(3)).or(caps.get(4)) else {
            continue;
        };
        let v = value.as_bytes();
        if !looks_secret(v) {
            continue;
        }
        let line = line_of(chunk, whole.range());
        if excuses.iter().any(|a| a.excuses(v, whole.as_bytes(), line)) {
            continue;
        }
        found.push(Finding {
            kind: kind_of_name(name),
            range: offset + value.start()..offset + value.end(),
        });
    }
}
