//! The detector: environment values by Aho-Corasick over the whole text,
//! the rules and assignments chunk by chunk behind the keyword prefilter.

use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use crate::finding::{join, line_of, Finding, MIN_VALUE};
use crate::{assign, names, pem, rules, url};

/// The bytes scanned at a time: a rule runs on a chunk only when one of
/// its keywords is in it.
pub const CHUNK: usize = 64 << 10;
/// How much consecutive chunks overlap: a secret shorter than this is
/// whole in one of them (a 4096-bit RSA key block is about 3.3 KiB).
pub const OVERLAP: usize = 8 << 10;
/// Finds secrets in text. Build one per process (its environment values
/// are fixed when it is built); cheap to build and to share: the rules
/// are compiled once, at the first scan of any detector. Its `Debug`
/// shows the kinds of the values it holds, never them.
pub struct Detector {
    /// The secret environment values and their kinds.
    env: Option<(AhoCorasick, Vec<String>)>,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: &[String] = self.env.as_ref().map_or(&[], |(_, k)| k);
        f.debug_struct("Detector").field("env", &kinds).finish()
    }
}

/// Which rules run on a chunk: built with the rules, at first use.
#[derive(Debug)]
struct Prefilter {
    /// Every keyword of the rules and the assignments' name words.
    keywords: AhoCorasick,
    /// For each keyword, the rules it starts (index into the rules;
    /// `usize::MAX`: the assignments).
    starts: Vec<Vec<usize>>,
    /// Rules with no keyword: always run.
    always: Vec<usize>,
    /// For each keyword, whether it is a word of secret names (the lines
    /// holding one are read for assignments).
    assigns: Vec<bool>,
    /// What excuses an assignment (see [`assign::matches`]).
    excuses: Vec<&'static rules::Allowlist>,
}

const ASSIGN: usize = usize::MAX;

fn prefilter() -> &'static Prefilter {
    static PREFILTER: OnceLock<Prefilter> = OnceLock::new();
    PREFILTER.get_or_init(|| {
        let rules = rules::rules();
        let mut words: Vec<String> = Vec::new();
        let mut starts: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        let mut add = |word: &str, rule: usize| match words.iter().position(|w| w == word) {
            Some(i) => starts[i].push(rule),
            None => {
                words.push(word.to_owned());
                starts.push(vec![rule]);
            }
        };
        for (i, r) in rules.rules.iter().enumerate() {
            if r.keywords.is_empty() {
                always.push(i);
            }
            for k in &r.keywords {
                add(k, i);
            }
        }
        for w in names::NAME_WORDS {
            add(w, ASSIGN);
        }
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&words)
            .expect("the rules' keywords build an automaton");
        let excuses = rules
            .global
            .iter()
            .chain(
                rules
                    .rules
                    .iter()
                    .filter(|r| r.id == "generic-api-key")
                    .flat_map(|r| &r.allowlists),
            )
            .collect();
        let assigns = starts.iter().map(|s| s.contains(&ASSIGN)).collect();
        Prefilter {
            keywords,
            starts,
            always,
            assigns,
            excuses,
        }
    })
}

impl Detector {
    /// A detector of the rules, and of the values of `env` (name, value:
    /// the caller chooses which; the name is the kind of their handles).
    /// Values shorter than [`MIN_VALUE`] bytes are left out, and so are
    /// absolute paths (`GOOGLE_APPLICATION_CREDENTIALS=/home/…/key.json`
    /// names where a secret is, it is not one).
    pub fn new<I, N, V>(env: I) -> Detector
    where
        I: IntoIterator<Item = (N, V)>,
        N: AsRef<str>,
        V: AsRef<str>,
    {
        let mut values: Vec<(String, String)> = env
            .into_iter()
            .filter(|(_, v)| v.as_ref().len() >= MIN_VALUE && !v.as_ref().starts_with('/'))
            .map(|(n, v)| (v.as_ref().to_owned(), names::kind_of_name(n.as_ref())))
            .collect();
        values.sort();
        values.dedup_by(|a, b| a.0 == b.0);
        let env = (!values.is_empty())
            .then(|| {
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(values.iter().map(|(v, _)| v.as_bytes()))
                    .ok()
                    .map(|ac| (ac, values.into_iter().map(|(_, k)| k).collect()))
            })
            .flatten();
        Detector { env }
    }

    /// A detector of the rules and of this process's secret environment
    /// values (by [`is_secret_name`]).
    pub fn from_env() -> Detector {
        Detector::new(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, _)| names::is_secret_name(k)),
        )
    }

    /// `text` with each secret it holds shown as `‹secret›`: for what is
    /// only shown (a live command's output, a file's old lines in a
    /// diff), never stored, so no handle is given out.
    pub fn mask<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        let found = self.detect(text);
        if found.is_empty() {
            return std::borrow::Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for f in found {
            out.push_str(&text[at..f.range.start]);
            out.push_str("‹secret›");
            at = f.range.end;
        }
        out.push_str(&text[at..]);
        std::borrow::Cow::Owned(out)
    }

    /// The secrets in `text`, in order, none overlapping (findings that
    /// overlap are joined, with the first one's kind).
    pub fn detect(&self, text: &str) -> Vec<Finding> {
        let mut found = Vec::new();
        if let Some((ac, kinds)) = &self.env {
            for m in ac.find_iter(text) {
                found.push(Finding {
                    kind: kinds[m.pattern().as_usize()].clone(),
                    range: m.range(),
                });
            }
        }
        let bytes = text.as_bytes();
        let mut start = 0;
        let mut active = vec![false; rules::rules().rules.len()];
        loop {
            let end = chunk_end(bytes, start);
            self.detect_chunk(&bytes[start..end], start, &mut active, &mut found);
            if end >= bytes.len() {
                break;
            }
            start = chunk_next(bytes, start, end);
        }
        join(text, found)
    }

    fn detect_chunk(
        &self,
        chunk: &[u8],
        offset: usize,
        active: &mut [bool],
        found: &mut Vec<Finding>,
    ) {
        let p = prefilter();
        active.iter_mut().for_each(|a| *a = false);
        for &i in &p.always {
            active[i] = true;
        }
        // An assignment is on one line: only the lines holding a word of
        // a secret name are read for them.
        let mut lines: Vec<Range<usize>> = Vec::new();
        let mut seen = vec![false; p.starts.len()];
        for m in p.keywords.find_overlapping_iter(chunk) {
            let k = m.pattern().as_usize();
            if p.assigns[k] && lines.last().is_none_or(|l| m.start() >= l.end) {
                let from = chunk[..m.start()]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let to = chunk[m.start()..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(chunk.len(), |i| m.start() + i + 1);
                lines.push(from..to);
            }
            if std::mem::replace(&mut seen[k], true) {
                continue;
            }
            for &r in &p.starts[k] {
                if r != ASSIGN {
                    active[r] = true;
                }
            }
        }
        let rules = rules::rules();
        for (i, rule) in rules.rules.iter().enumerate() {
            if active[i] {
                rule_matches(rule, &rules.global, chunk, offset, found);
            }
        }
        for line in lines {
            let at = line.start;
            assign::matches(&chunk[line], offset + at, &p.excuses, found);
        }
        url::matches(chunk, offset, found);
        pem::matches(chunk, offset, found);
    }
}

/// The end of the chunk from `start`: [`CHUNK`] bytes on, moved back to
/// just after a newline within the last [`OVERLAP`] bytes if there is one,
/// else to a character boundary.
fn chunk_end(bytes: &[u8], start: usize) -> usize {
    let end = start + CHUNK;
    if end >= bytes.len() {
        return bytes.len();
    }
    match bytes[end - OVERLAP..end].iter().rposition(|&b| b == b'\n') {
        Some(i) => end - OVERLAP + i + 1,
        None => back_to_boundary(bytes, end),
    }
}

/// The start of the chunk after `[start, end)`: [`OVERLAP`] bytes before
/// `end`, moved on to just after a newline if there is one before `end`.
fn chunk_next(bytes: &[u8], start: usize, end: usize) -> usize {
    let from = end - OVERLAP;
    let next = match bytes[from..end].iter().position(|&b| b == b'\n') {
        Some(i) => from + i + 1,
        None => back_to_boundary(bytes, from),
    };
    next.max(start + 1)
}

fn back_to_boundary(bytes: &[u8], mut i: usize) -> usize {
    // A continuation byte is 0b10xx_xxxx.
    while i > 0 && i < bytes.len() && (bytes[i] & 0xC0) == 0x80 {
        i -= 1;
    }
    i
}

fn rule_matches(
    rule: &rules::Rule,
    global: &[rules::Allowlist],
    chunk: &[u8],
    offset: usize,
    found: &mut Vec<Finding>,
) {
    let Some(regex) = rule.regex.get().first() else {
        return;
    };
    for caps in regex.captures_iter(chunk) {
        let Some(whole) = caps.get(0) else { continue };
        let secret = if rule.secret_group > 0 {
            caps.get(rule.secret_group)
        } else {
            caps.iter()
                .skip(1)
                .flatten()
                .find(|g| !g.is_empty())
                .or(Some(whole))
        };
        let Some(secret) = secret else { continue };
        let s = secret.as_bytes();
        if s.len() < MIN_VALUE || (rule.entropy > 0.0 && rules::entropy(s) <= rule.entropy) {
            continue;
        }
        let line = line_of(chunk, whole.range());
        if global
            .iter()
            .chain(&rule.allowlists)
            .any(|a| a.excuses(s, whole.as_bytes(), line))
        {
            continue;
        }
        found.push(Finding {
            kind: rule.id.clone(),
            range: offset + secret.start()..offset + secret.end(),
        });
    }
}
