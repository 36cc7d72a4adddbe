//! gitleaks' rule set (rules/gitleaks.toml, see rules/PROVENANCE.md),
//! parsed once, at first use; each pattern is compiled the first time a
//! keyword of its rule occurs (compiling all 221 up front cost more than
//! a whole start-up, and most texts hold a few rules' keywords only).
//!
//! A rule: a pattern whose first non-empty group (or its `secretGroup`)
//! is the secret, keywords one of which must occur in the text (case
//! ignored) before the pattern runs, a least entropy of the secret, and
//! allowlists that excuse a match (by its secret, the whole match or its
//! line; or by stopwords in the secret). Patterns run on bytes with ASCII
//! classes, as Go's RE2 does; the `regex` crate runs them in time linear
//! in the text.

use std::sync::OnceLock;

use regex::bytes::{Regex, RegexBuilder};

/// The vendored configuration.
const GITLEAKS: &str = include_str!("../rules/gitleaks.toml");

/// What is tested of a match to excuse it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Secret,
    Match,
    Line,
}

#[derive(Debug)]
pub(crate) struct Allowlist {
    pub target: Target,
    pub regexes: Lazy,
    /// Lower case: a secret containing one is excused.
    pub stopwords: Vec<String>,
}

impl Allowlist {
    /// Whether it excuses the match `whole` with `secret` on `line`.
    pub(crate) fn excuses(&self, secret: &[u8], whole: &[u8], line: &[u8]) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => whole,
            Target::Line => line,
        };
        if self.regexes.get().iter().any(|r| r.is_match(target)) {
            return true;
        }
        if self.stopwords.is_empty() {
            return false;
        }
        let lower = secret.to_ascii_lowercase();
        self.stopwords.iter().any(|w| memfind(&lower, w.as_bytes()))
    }
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Patterns compiled at first use; one that does not compile in Rust's
/// `regex` is left out (and counted by [`Rules::skipped`]).
#[derive(Debug, Default)]
pub(crate) struct Lazy {
    patterns: Vec<String>,
    compiled: OnceLock<Vec<Regex>>,
}

impl Lazy {
    fn new(patterns: Vec<String>) -> Lazy {
        Lazy {
            patterns,
            compiled: OnceLock::new(),
        }
    }

    pub(crate) fn get(&self) -> &[Regex] {
        self.compiled.get_or_init(|| {
            self.patterns
                .iter()
                .filter_map(|p| compile(p).ok())
                .collect()
        })
    }

    /// Each pattern that does not compile, with why.
    #[cfg(test)]
    fn failures(&self) -> Vec<String> {
        self.patterns
            .iter()
            .filter_map(|p| compile(p).err())
            .map(|e| why(&e))
            .collect()
    }
}

#[derive(Debug)]
pub(crate) struct Rule {
    pub id: String,
    /// One pattern.
    pub regex: Lazy,
    /// Lower case; empty: the rule always runs.
    pub keywords: Vec<String>,
    pub entropy: f64,
    /// 0: the first non-empty group, else the whole match.
    pub secret_group: usize,
    pub allowlists: Vec<Allowlist>,
}

/// The parsed rule set.
#[derive(Debug)]
pub(crate) struct Rules {
    pub rules: Vec<Rule>,
    pub global: Vec<Allowlist>,
    /// Rules left out because they match paths only: (id, why).
    pub path_rules: Vec<(String, String)>,
}

#[cfg(test)]
impl Rules {
    /// Rules that match nothing: path rules, and rules whose pattern does
    /// not compile in Rust's `regex` (id, why). Compiles every pattern.
    pub(crate) fn skipped(&self) -> Vec<(String, String)> {
        let mut out = self.path_rules.clone();
        for r in &self.rules {
            out.extend(r.regex.failures().into_iter().map(|w| (r.id.clone(), w)));
        }
        out
    }
}

/// The rules, compiled at first use.
pub(crate) fn rules() -> &'static Rules {
    static RULES: OnceLock<Rules> = OnceLock::new();
    RULES.get_or_init(|| parse(GITLEAKS))
}

fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(&literal_braces(pattern))
        // As RE2: \w, \s, \d and \b are ASCII.
        .unicode(false)
        .size_limit(32 << 20)
        .dfa_size_limit(8 << 20)
        .build()
}

/// `pattern` with each `{` that does not begin a repetition (`{2}`,
/// `{0,50}`, `{3,}`) escaped: RE2 reads such a brace as itself, Rust's
/// `regex` refuses it.
fn literal_braces(pattern: &str) -> String {
    let b = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() + 8);
    let (mut i, mut class) = (0, false);
    let mut start = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                i += 2;
                continue;
            }
            b'[' if !class => class = true,
            b']' if class => class = false,
            b'{' if !class && !repetition(&b[i + 1..]) => {
                out.push_str(&pattern[start..i]);
                out.push_str("\\{");
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push_str(&pattern[start.min(pattern.len())..]);
    out
}

/// Whether `rest` (after a `{`) is a repetition's `m}`, `m,}` or `m,n}`.
fn repetition(rest: &[u8]) -> bool {
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let m = digits(rest);
    if m == 0 {
        return false;
    }
    match rest.get(m) {
        Some(b'}') => true,
        Some(b',') => {
            let n = digits(&rest[m + 1..]);
            rest.get(m + 1 + n) == Some(&b'}')
        }
        _ => false,
    }
}

fn strings(v: Option<&toml::Value>) -> Vec<String> {
    v.and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// An allowlist of the config; None when it cannot apply to text (paths
/// only, or paths that must match too).
fn allowlist(t: &toml::Table) -> Option<Allowlist> {
    let paths = !strings(t.get("paths")).is_empty();
    let and = t.get("condition").and_then(toml::Value::as_str) == Some("AND");
    if paths && and {
        return None;
    }
    let target = match t.get("regexTarget").and_then(toml::Value::as_str) {
        Some("match") => Target::Match,
        Some("line") => Target::Line,
        _ => Target::Secret,
    };
    // A pattern Rust's `regex` cannot compile excuses nothing.
    let regexes = strings(t.get("regexes"));
    let stopwords: Vec<String> = strings(t.get("stopwords"))
        .into_iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    (!regexes.is_empty() || !stopwords.is_empty()).then_some(Allowlist {
        target,
        regexes: Lazy::new(regexes),
        stopwords,
    })
}

pub(crate) fn parse(text: &str) -> Rules {
    let mut out = Rules {
        rules: Vec::new(),
        global: Vec::new(),
        path_rules: Vec::new(),
    };
    let Ok(config) = text.parse::<toml::Table>() else {
        return out;
    };
    if let Some(a) = config
        .get("allowlist")
        .and_then(toml::Value::as_table)
        .and_then(allowlist)
    {
        out.global.push(a);
    }
    let Some(rules) = config.get("rules").and_then(toml::Value::as_array) else {
        return out;
    };
    for r in rules.iter().filter_map(toml::Value::as_table) {
        let id = r
            .get("id")
            .and_then(toml::Value::as_str)
            .unwrap_or("secret")
            .to_owned();
        let Some(pattern) = r.get("regex").and_then(toml::Value::as_str) else {
            out.path_rules.push((id, "a path rule".into()));
            continue;
        };
        let regex = Lazy::new(vec![pattern.to_owned()]);
        let allowlists = r
            .get("allowlists")
            .and_then(toml::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(toml::Value::as_table)
                    .filter_map(allowlist)
                    .collect()
            })
            .unwrap_or_default();
        out.rules.push(Rule {
            id,
            regex,
            keywords: strings(r.get("keywords"))
                .into_iter()
                .map(|k| k.to_ascii_lowercase())
                .collect(),
            entropy: r
                .get("entropy")
                .and_then(|e| e.as_float().or_else(|| e.as_integer().map(|i| i as f64)))
                .unwrap_or(0.0),
            secret_group: r
                .get("secretGroup")
                .and_then(toml::Value::as_integer)
                .and_then(|g| usize::try_from(g).ok())
                .unwrap_or(0),
            allowlists,
        });
    }
    out
}

#[cfg(test)]
fn why(e: &regex::Error) -> String {
    e.to_string().lines().last().unwrap_or("").trim().to_owned()
}

/// Shannon entropy of `bytes`, in bits per byte.
pub(crate) fn entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[b as usize] += 1;
    }
    let n = bytes.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many of gitleaks' rules hel runs, and which it cannot: a change
    /// of the vendored file or of the `regex` crate shows here.
    #[test]
    fn every_rule_compiles_or_is_counted() {
        let r = rules();
        let skipped = r.skipped();
        let allowlists: Vec<String> = r
            .global
            .iter()
            .chain(r.rules.iter().flat_map(|r| &r.allowlists))
            .flat_map(|a| a.regexes.failures())
            .collect();
        for (id, why) in &skipped {
            eprintln!("skipped {id}: {why}");
        }
        assert_eq!(r.rules.len() + r.path_rules.len(), 222);
        // One rule matches file names only (pkcs12-file); every pattern
        // of the others compiles, and every allowlist pattern.
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(r.path_rules.len(), 1);
        assert!(allowlists.is_empty(), "{allowlists:?}");
        assert_eq!(r.global.len(), 1);
        assert!(r.rules.iter().any(|r| r.id == "generic-api-key"));
    }

    #[test]
    fn braces_that_are_not_repetitions_are_literal() {
        assert_eq!(literal_braces(r"^\{\{x}}$"), r"^\{\{x}}$");
        assert_eq!(literal_braces(r"^{{x}}$"), r"^\{\{x}}$");
        assert_eq!(literal_braces(r"a{2}b{0,5}c{3,}[{]"), r"a{2}b{0,5}c{3,}[{]");
        assert_eq!(literal_braces(r"\${x}"), r"\$\{x}");
    }

    #[test]
    fn entropy_is_bits_per_byte() {
        assert_eq!(entropy(b""), 0.0);
        assert_eq!(entropy(b"aaaa"), 0.0);
        assert!((entropy(b"abcd") - 2.0).abs() < 1e-9);
    }
}
