//! What the parsers of the formats ([`super::codex`], [`super::claude`],
//! [`super::pi`]) hand the import: the items of a conversation, what a
//! file holds beside them, and the helpers they share.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Where a message came from, and what of it the chat form cannot hold.
#[derive(Debug, Default, Clone)]
pub struct Meta {
    /// The line it was read from (1-based).
    pub line: usize,
    /// The source's own fields: its id, time, thinking, usage, model …
    pub fields: Map<String, Value>,
    /// Tokens of the response, when the source counted them.
    pub usage: Option<(u64, u64)>,
}

impl Meta {
    pub(super) fn at(line: usize) -> Meta {
        Meta {
            line,
            ..Meta::default()
        }
    }

    pub(super) fn set(&mut self, key: &str, value: Option<Value>) {
        if let Some(v) = value.filter(|v| !v.is_null()) {
            self.fields.insert(key.to_owned(), v);
        }
    }
}

/// A tool call as the chat form holds it.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// JSON text, as the chat API carries it.
    pub arguments: String,
}

/// One thing a conversation holds, in the order the source has it.
#[derive(Debug)]
pub enum Item {
    User {
        text: String,
        meta: Meta,
    },
    /// Text and tool calls of the model. `merge`: it continues the last
    /// message when that is the model's (a source that writes one response
    /// as several records). `complete`: the source says the response ended
    /// (not aborted, not failed, not cut at an output limit).
    Assistant {
        text: Option<String>,
        calls: Vec<Call>,
        merge: bool,
        /// With `merge`: it is a part of the same response as the last
        /// model message even when tool results came after that message
        /// (Claude Code runs a call while the response goes on).
        across_results: bool,
        complete: bool,
        meta: Meta,
    },
    ToolResult {
        call_id: String,
        content: String,
        meta: Meta,
    },
    /// Tokens the source counted for the last response.
    Usage {
        input: u64,
        output: u64,
    },
    /// The source compacted its history into `summary`, keeping the
    /// messages from the one with source id `keep_from` on (None: none).
    Compaction {
        summary: String,
        keep_from: Option<String>,
        meta: Meta,
    },
}

/// What a parser keeps of a file beside its items.
#[derive(Debug, Default)]
pub struct Found {
    /// The source session's fields (id, cwd, title, times, version).
    pub session: Map<String, Value>,
    /// A title for the session's name.
    pub title: Option<String>,
    /// The model the source last named.
    pub model: Option<String>,
    /// Record types read and not imported, with how many of each.
    pub skipped: BTreeMap<String, u64>,
}

impl Found {
    pub(super) fn skip(&mut self, what: impl Into<String>) {
        *self.skipped.entry(what.into()).or_default() += 1;
    }
}

/// A format's reader: one line at a time.
pub(super) trait Parser {
    /// Read line `line` (1-based); an `Err` is the line's one-line fault.
    fn line(
        &mut self,
        line: usize,
        bytes: &[u8],
        found: &mut Found,
        out: &mut Vec<Item>,
    ) -> Result<(), String>;

    /// The file ended: what was held back.
    fn finish(&mut self, _found: &mut Found, _out: &mut Vec<Item>) {}

    /// The record's place in the file's tree of records, for a format
    /// whose records link to a parent (a branch is a chain of them): None
    /// for a record that is not linked (or a format without links); `Err`
    /// is the line's one-line fault.
    fn link(&self, _bytes: &[u8]) -> Result<Option<Link>, String> {
        Ok(None)
    }

    /// Whether the line is the source's compaction record.
    fn is_compaction(&self, bytes: &[u8]) -> bool;
}

/// The longest record id kept (a longer one is the line's fault): what
/// the first reading of a file keeps per record is bounded.
pub const MAX_ID: usize = 256;

/// A record's place in its file's tree of branches: only its ids and
/// links, never its content.
#[derive(Debug, Default)]
pub struct Link {
    pub id: String,
    pub parent: Option<String>,
    /// It can end a conversation (the newest such record is the branch
    /// the source resumes): a message record.
    pub leaf: bool,
    /// When `parent` is not in the file, the record goes on from the
    /// newest message record before it (a compaction boundary whose
    /// logical parent the source pruned from the file).
    pub after_previous: bool,
    /// A record of a sub-agent (Claude Code's sidechains): never part of
    /// the main conversation.
    pub side: bool,
    /// The response the record is a part of (Claude Code writes one API
    /// message as several records, each a child of the one before, and a
    /// parallel tool call's record may branch off an earlier part).
    pub group: Option<String>,
    /// The record holds only tool results (a branch off the conversation
    /// that answers calls made on it).
    pub results_only: bool,
}

impl Link {
    /// A link with `id`, refused past [`MAX_ID`].
    pub fn checked(self) -> Result<Link, String> {
        let long = |s: &Option<String>| s.as_ref().is_some_and(|s| s.len() > MAX_ID);
        if self.id.len() > MAX_ID || long(&self.parent) || long(&self.group) {
            return Err(format!("a record id longer than {MAX_ID} bytes"));
        }
        Ok(self)
    }
}

/// A line parsed into `T` within the bounds of a message
/// ([`hel_store::json::Limits::MESSAGE`]): a count of values and a depth,
/// a repeated key refused; `Err` is the line's one-line fault.
pub(super) fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    hel_store::json::from_slice(bytes, hel_store::json::Limits::MESSAGE).map_err(|e| {
        e.to_string()
            .lines()
            .next()
            .unwrap_or("not JSON")
            .chars()
            .take(200)
            .collect()
    })
}

/// A message's content as Claude Code and pi write it: a string, or a
/// list of typed blocks.
#[derive(serde::Deserialize)]
#[serde(untagged)]
pub(super) enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

impl Default for Content {
    fn default() -> Content {
        Content::Blocks(Vec::new())
    }
}

/// The text of `content`: its text blocks joined (others named in
/// `others`).
pub(super) fn text_of(content: &Content, others: &mut Vec<String>) -> String {
    match content {
        Content::Text(s) => s.clone(),
        Content::Blocks(b) => block_text(b, &["text"], others),
    }
}

/// Text of content blocks: the `text` of each block of a type in `kinds`,
/// joined by newlines; other blocks are named in `others`.
pub(super) fn block_text(blocks: &[Value], kinds: &[&str], others: &mut Vec<String>) -> String {
    let mut parts = Vec::new();
    for b in blocks {
        let kind = b.get("type").and_then(Value::as_str).unwrap_or("?");
        match b.get("text").and_then(Value::as_str) {
            Some(t) if kinds.contains(&kind) => parts.push(t.to_owned()),
            _ => others.push(kind.chars().take(40).collect()),
        }
    }
    parts.join("\n")
}

/// A JSON value as the text of a tool call's arguments.
pub(super) fn arguments_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The first line of a serde error, as a malformed line's reason.
pub(super) fn why(e: serde_json::Error) -> String {
    let s = e.to_string();
    s.lines()
        .next()
        .unwrap_or("not JSON")
        .chars()
        .take(200)
        .collect()
}
