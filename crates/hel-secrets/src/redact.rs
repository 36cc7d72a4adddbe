//! A session's handles: each secret value the detector finds in a text on
//! its way into the conversation is replaced by a handle,
//! `‹secret:KIND:N›` (N counts the session's secrets from 1), the same
//! value always by the same handle; a handle in what the model asks a
//! tool to do is replaced by its value when the tool runs.
//!
//! The values are held in this process's memory only: a resumed session
//! holds none until its source is read again.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;

use crate::detect::Detector;
use crate::finding::{join, Finding};

/// How every handle begins.
pub const HANDLE_OPEN: &str = "‹secret:";

fn handle_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"‹secret:[a-z0-9-]{1,40}:[0-9]{1,9}›").expect("the handle pattern compiles")
    })
}

/// Where `text` holds handles: what the detector finds there is a handle
/// (already redacted), not a secret.
pub fn handle_ranges(text: &str) -> Vec<std::ops::Range<usize>> {
    if !text.contains(HANDLE_OPEN) {
        return Vec::new();
    }
    handle_pattern()
        .find_iter(text)
        .map(|m| m.range())
        .collect()
}

/// A handle hel does not hold the value of (invented by the model, or of
/// a session before a restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownHandle(pub String);

impl std::fmt::Display for UnknownHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "error: hel holds no secret for {}: read the file or run the command it came from again, and use the handle that gives",
            self.0
        )
    }
}

impl std::error::Error for UnknownHandle {}

/// A session's secrets and their handles. The default detects by the
/// rules alone (no environment values). Its `Debug` shows how many values
/// it holds, never them.
pub struct Redactor {
    detector: Arc<Detector>,
    handles: HashMap<String, String>,
    values: HashMap<String, String>,
    /// The values held, to find them again in any text (rebuilt when one
    /// is added).
    known: Option<(AhoCorasick, Vec<String>)>,
    count: u64,
}

impl Redactor {
    pub fn new(detector: Arc<Detector>) -> Redactor {
        Redactor {
            detector,
            handles: HashMap::new(),
            values: HashMap::new(),
            known: None,
            count: 0,
        }
    }

    /// Its detector (to mask what is shown live, before it is a result).
    pub fn detector(&self) -> Arc<Detector> {
        Arc::clone(&self.detector)
    }

    /// How many secrets it holds.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The handle of `value`, made if it has none (of `kind`).
    fn handle(&mut self, value: &str, kind: &str) -> &str {
        if !self.handles.contains_key(value) {
            self.count += 1;
            let handle = format!("{HANDLE_OPEN}{kind}:{}›", self.count);
            self.values.insert(handle.clone(), value.to_owned());
            self.handles.insert(value.to_owned(), handle);
            self.known = None;
        }
        &self.handles[value]
    }

    fn known(&mut self) -> Option<&(AhoCorasick, Vec<String>)> {
        if self.known.is_none() && !self.handles.is_empty() {
            let values: Vec<String> = self.handles.keys().cloned().collect();
            self.known = AhoCorasickBuilder::new()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&values)
                .ok()
                .map(|ac| (ac, values));
        }
        self.known.as_ref()
    }

    /// The secrets of `text`: what the detector finds and every value
    /// held, in order, none overlapping, none within a handle.
    pub fn findings(&mut self, text: &str) -> Vec<Finding> {
        let mut found = self.detector.detect(text);
        if let Some((ac, _)) = self.known() {
            found.extend(ac.find_iter(text).map(|m| Finding {
                kind: String::new(),
                range: m.range(),
            }));
        }
        let handles: Vec<_> = handle_pattern()
            .find_iter(text)
            .map(|m| m.range())
            .collect();
        if !handles.is_empty() {
            found.retain(|f| {
                !handles
                    .iter()
                    .any(|h| f.range.start < h.end && h.start < f.range.end)
            });
        }
        join(text, found)
    }

    /// `text` with every secret replaced by its handle.
    pub fn redact<'a>(&mut self, text: &'a str) -> Cow<'a, str> {
        let found = self.findings(text);
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for f in found {
            out.push_str(&text[at..f.range.start]);
            let value = &text[f.range.clone()];
            let kind = if f.kind.is_empty() { "secret" } else { &f.kind };
            let handle = self.handle(value, kind).to_owned();
            out.push_str(&handle);
            at = f.range.end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// `text[part]` with every secret that overlaps it replaced by its
    /// handle, the secrets found in the whole of `text`: a page of a
    /// longer text, given with what comes before and after it (up to
    /// [`OVERLAP`](crate::OVERLAP) bytes each side, the longest reach of
    /// a rule), so that a secret the page's edge cuts is found whole and
    /// its part in the page becomes the whole value's handle. `part` is
    /// on character boundaries of `text`.
    pub fn redact_part(&mut self, text: &str, part: std::ops::Range<usize>) -> String {
        let mut out = String::with_capacity(part.len());
        let mut at = part.start;
        for f in self.findings(text) {
            if f.range.end <= part.start || f.range.start >= part.end {
                continue;
            }
            out.push_str(&text[at..f.range.start.max(at)]);
            let kind = if f.kind.is_empty() { "secret" } else { &f.kind };
            let handle = self.handle(&text[f.range.clone()], kind).to_owned();
            out.push_str(&handle);
            at = f.range.end.min(part.end);
        }
        out.push_str(&text[at..part.end]);
        out
    }

    /// The handles `text` names, in order.
    pub fn handles_in(text: &str) -> Vec<&str> {
        handle_pattern()
            .find_iter(text)
            .map(|m| m.as_str())
            .collect()
    }

    /// `text` with every handle replaced by its value; the first handle
    /// whose value it does not hold is the error. Text that only looks
    /// like a handle (another shape) is left as it is.
    pub fn substitute<'a>(&self, text: &'a str) -> Result<Cow<'a, str>, UnknownHandle> {
        if !text.contains(HANDLE_OPEN) {
            return Ok(Cow::Borrowed(text));
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for m in handle_pattern().find_iter(text) {
            let value = self
                .values
                .get(m.as_str())
                .ok_or_else(|| UnknownHandle(m.as_str().to_owned()))?;
            out.push_str(&text[at..m.start()]);
            out.push_str(value);
            at = m.end();
        }
        out.push_str(&text[at..]);
        Ok(Cow::Owned(out))
    }
}

impl Default for Redactor {
    fn default() -> Redactor {
        Redactor::new(Arc::new(Detector::new(Vec::<(String, String)>::new())))
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("values", &self.values.len())
            .finish_non_exhaustive()
    }
}
