//! Passwords in URLs: `scheme://user:PASSWORD@host` (database URLs,
//! proxies, clone URLs). The password is the secret, whatever it looks
//! like, unless it is a placeholder or a reference.

use std::sync::OnceLock;

use regex::bytes::{Regex, RegexBuilder};

use crate::finding::{Finding, MIN_VALUE};

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // Unbounded repetitions, the lengths checked after (see assign.rs).
        RegexBuilder::new(
            r#"[A-Za-z][A-Za-z0-9+.-]*://([^\s/?#@:'"`<>\\]+):([^\s/?#@'"`<>\\]+)@[A-Za-z0-9\[]"#,
        )
        .unicode(false)
        .build()
        .expect("the URL pattern compiles")
    })
}

/// Whether `password` (of `user`) is one rather than a placeholder, a
/// reference or a template.
fn is_password(user: &[u8], password: &[u8]) -> bool {
    let p = password;
    if p.len() < MIN_VALUE || p.len() > 256 || p == user {
        return false;
    }
    if matches!(p[0], b'$' | b'%' | b'{' | b'*' | b'&')
        || p.windows(2).any(|w| w == b"{{" || w == b"${")
        || p.iter().all(|&b| b == p[0])
    {
        return false;
    }
    let lower = p.to_ascii_lowercase();
    ![
        "password",
        "passwd",
        "example",
        "xxxx",
        "your",
        "changeme",
        "redacted",
        "secret",
        "placeholder",
    ]
    .iter()
    .any(|w| lower.windows(w.len()).any(|x| x == w.as_bytes()))
}

/// The passwords of URLs in `chunk` (at `offset` in the text).
pub(crate) fn matches(chunk: &[u8], offset: usize, found: &mut Vec<Finding>) {
    if !chunk.windows(3).any(|w| w == b"://") {
        return;
    }
    for caps in pattern().captures_iter(chunk) {
        let (Some(user), Some(password)) = (caps.get(1), caps.get(2)) else {
            continue;
        };
        if user.len() > 128 || !is_password(user.as_bytes(), password.as_bytes()) {
            continue;
        }
        found.push(Finding {
            kind: "url-password".to_owned(),
            range: offset + password.start()..offset + password.end(),
        });
    }
}
