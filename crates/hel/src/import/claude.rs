//! Claude Code session files (`~/.claude/projects/<dir>/<uuid>.jsonl`):
//! one record per line, conversation records linked by `parentUuid`.
//!
//! The conversation is found by the import's survey from [`Parser::link`]:
//! the chain up from the newest message record, through the progress,
//! hook and system records it holds and across compaction boundaries
//! (`logicalParentUuid`, or the message before the boundary when the
//! source pruned that one), with the parts of a response and the tool
//! results that Claude Code writes as branches off it. Sidechain
//! (sub-agent) records are never part of it.
//!
//! Imported: `user` records (text; `tool_result` blocks become tool
//! messages; a compaction's summary, `isCompactSummary`, becomes the
//! summary message), `assistant` records (text and `tool_use` blocks;
//! records of one API message, written one block each, are joined, across
//! the progress records and tool results between them; `thinking` and
//! `redacted_thinking` blocks, usage, ids and times go into the import
//! record), `system` records of subtype `compact_boundary` (with the
//! summary that follows), and `summary` records (the title, or a
//! compaction's summary right after a boundary) and `custom-title`
//! records (the name the user gave, preferred). Meta records, other
//! `system` subtypes, progress records and every other record type are
//! counted and skipped.

use serde::Deserialize;
use serde_json::{json, Value};

use super::source::{
    arguments_text, parse, text_of, why, Call, Content, Found, Item, Link, Meta, Parser,
};

#[derive(Default)]
pub struct Claude {
    /// The API message id of the last assistant record, to join the
    /// records of one message.
    last_message: Option<String>,
    /// A compaction boundary was read; its summary comes next.
    boundary: Option<Meta>,
    /// The user named the session (`custom-title`).
    named: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    git_branch: Option<String>,
    #[serde(default)]
    is_sidechain: bool,
    #[serde(default)]
    is_meta: bool,
    #[serde(default)]
    is_compact_summary: bool,
    #[serde(default)]
    is_api_error_message: bool,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    custom_title: Option<String>,
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Content,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize, serde::Serialize)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<Content>,
        #[serde(default)]
        is_error: bool,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    #[serde(other)]
    Other,
}

/// A record's links, read without the rest of it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Links {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    parent_uuid: Option<String>,
    #[serde(default)]
    logical_parent_uuid: Option<String>,
    #[serde(default)]
    is_sidechain: bool,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    message: Option<LinkMessage>,
}

/// Of a record's message, what its links need: the API message id and the
/// kinds of its blocks (their content is skipped, not kept).
#[derive(Deserialize)]
struct LinkMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    content: Option<LinkContent>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum LinkContent {
    Blocks(Vec<BlockKind>),
    Other(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct BlockKind {
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

impl Parser for Claude {
    fn link(&self, bytes: &[u8]) -> Result<Option<Link>, String> {
        let l: Links = parse(bytes)?;
        let Some(id) = l.uuid else { return Ok(None) };
        let message = matches!(l.kind.as_str(), "user" | "assistant");
        let boundary = l.kind == "system" && l.subtype.as_deref() == Some("compact_boundary");
        let (group, results_only) = match (&l.kind[..], l.message) {
            ("assistant", Some(m)) => (m.id, false),
            (
                "user",
                Some(LinkMessage {
                    content: Some(LinkContent::Blocks(b)),
                    ..
                }),
            ) => (
                None,
                !b.is_empty() && b.iter().all(|b| b.kind.as_deref() == Some("tool_result")),
            ),
            _ => (None, false),
        };
        // A compaction boundary starts a new chain that goes on from its
        // logical parent (or, when the source pruned that one from the
        // file, from the conversation before it).
        Link {
            id,
            parent: l.parent_uuid.or(l.logical_parent_uuid),
            leaf: message && !l.is_sidechain,
            after_previous: boundary,
            side: l.is_sidechain,
            group,
            results_only,
        }
        .checked()
        .map(Some)
    }

    fn is_compaction(&self, bytes: &[u8]) -> bool {
        parse::<Links>(bytes)
            .is_ok_and(|l| l.kind == "system" && l.subtype.as_deref() == Some("compact_boundary"))
    }

    fn line(
        &mut self,
        line: usize,
        bytes: &[u8],
        found: &mut Found,
        out: &mut Vec<Item>,
    ) -> Result<(), String> {
        let rec: Record = parse(bytes)?;
        let mut meta = Meta::at(line);
        meta.set("id", rec.uuid.clone().map(Value::String));
        meta.set("time", rec.timestamp.clone().map(Value::String));
        for (k, v) in [
            ("id", &rec.session_id),
            ("cwd", &rec.cwd),
            ("version", &rec.version),
            ("git_branch", &rec.git_branch),
        ] {
            if let Some(v) = v {
                found
                    .session
                    .entry(k)
                    .or_insert_with(|| Value::String(v.clone()));
            }
        }
        if rec.is_sidechain {
            found.skip(format!("{} (sidechain)", clip(&rec.kind)));
            return Ok(());
        }
        let kind = rec.kind.clone();
        // The records of one API message are joined across the progress
        // and hook records and the tool results between them (Claude Code
        // runs a call while the message goes on); a user's text or a
        // compaction ends the message.
        match kind.as_str() {
            "user" if rec.is_meta => found.skip("user (meta)"),
            "user" => self.user(rec, meta, found, out)?,
            "assistant" => self.assistant(rec, meta, found, out)?,
            "system" if rec.subtype.as_deref() == Some("compact_boundary") => {
                self.boundary = Some(meta);
            }
            "system" => found.skip(format!(
                "system/{}",
                clip(rec.subtype.as_deref().unwrap_or("?"))
            )),
            "summary" => match (self.boundary.take(), rec.message, rec.summary) {
                (Some(_), Some(m), _) => out.push(Item::Compaction {
                    summary: text_of(&m.content, &mut Vec::new()),
                    keep_from: None,
                    meta,
                }),
                (_, _, Some(title)) if !self.named => found.title = Some(title),
                (_, _, Some(_)) => {}
                _ => found.skip("summary"),
            },
            // A name the user gave (`/rename`) wins over a summary title.
            "custom-title" => match rec.custom_title {
                Some(t) => {
                    found.title = Some(t);
                    self.named = true;
                }
                None => found.skip("custom-title"),
            },
            other => found.skip(clip(other)),
        }
        Ok(())
    }
}

impl Claude {
    fn user(
        &mut self,
        rec: Record,
        meta: Meta,
        found: &mut Found,
        out: &mut Vec<Item>,
    ) -> Result<(), String> {
        let Some(message) = rec.message else {
            return Err("a user record without a message".into());
        };
        if rec.is_compact_summary {
            self.boundary = None;
            self.last_message = None;
            out.push(Item::Compaction {
                summary: text_of(&message.content, &mut Vec::new()),
                keep_from: None,
                meta,
            });
            return Ok(());
        }
        if self.boundary.take().is_some() {
            found.skip("system/compact_boundary (no summary)");
        }
        let blocks = match message.content {
            Content::Text(text) => {
                self.last_message = None;
                out.push(Item::User { text, meta });
                return Ok(());
            }
            Content::Blocks(b) => b,
        };
        let mut texts = Vec::new();
        let mut others = Vec::new();
        for b in blocks {
            let kind: String = b
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .chars()
                .take(40)
                .collect();
            match serde_json::from_value::<Block>(b) {
                Ok(Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                }) => {
                    let mut m = meta.clone();
                    if is_error {
                        m.set("is_error", Some(Value::Bool(true)));
                    }
                    let mut left = Vec::new();
                    let content = content.map_or(String::new(), |c| text_of(&c, &mut left));
                    if !left.is_empty() {
                        m.set("left_out", Some(json!(left)));
                    }
                    out.push(Item::ToolResult {
                        call_id: tool_use_id,
                        content,
                        meta: m,
                    });
                }
                Ok(Block::Text { text }) => texts.push(text),
                Ok(_) => others.push(kind),
                Err(e) => return Err(why(e)),
            }
        }
        if !texts.is_empty() {
            self.last_message = None;
            let mut m = meta;
            if !others.is_empty() {
                m.set("left_out", Some(json!(others)));
            }
            out.push(Item::User {
                text: texts.join("\n"),
                meta: m,
            });
        }
        Ok(())
    }

    fn assistant(
        &mut self,
        rec: Record,
        mut meta: Meta,
        found: &mut Found,
        out: &mut Vec<Item>,
    ) -> Result<(), String> {
        let Some(message) = rec.message else {
            return Err("an assistant record without a message".into());
        };
        if message.model.is_some() {
            found.model.clone_from(&message.model);
        }
        let merge = message.id.is_some() && message.id == self.last_message;
        self.last_message.clone_from(&message.id);
        meta.set("message_id", message.id.map(Value::String));
        meta.set("request_id", rec.request_id.map(Value::String));
        meta.set("model", message.model.map(Value::String));
        meta.set(
            "stop_reason",
            message.stop_reason.clone().map(Value::String),
        );
        if let Some(u) = &message.usage {
            meta.set("usage", serde_json::to_value(u).ok());
            // The records of one message repeat its usage: counted once.
            if !merge {
                meta.usage = Some((
                    u.input_tokens
                        .saturating_add(u.cache_creation_input_tokens)
                        .saturating_add(u.cache_read_input_tokens),
                    u.output_tokens,
                ));
            }
        }
        let blocks = match message.content {
            Content::Text(t) => vec![json!({"type": "text", "text": t})],
            Content::Blocks(b) => b,
        };
        let mut texts = Vec::new();
        let mut calls = Vec::new();
        let mut thinking = Vec::new();
        for b in blocks {
            match serde_json::from_value::<Block>(b).map_err(why)? {
                Block::Text { text } => texts.push(text),
                Block::ToolUse { id, name, input } => calls.push(Call {
                    id,
                    name,
                    arguments: arguments_text(&input),
                }),
                Block::Thinking {
                    thinking: t,
                    signature,
                } => thinking.push(json!({"text": t, "signature": signature})),
                Block::RedactedThinking { data } => thinking.push(json!({"redacted": data})),
                Block::ToolResult { .. } | Block::Other => found.skip("assistant block"),
            }
        }
        if !thinking.is_empty() {
            meta.set("thinking", Some(Value::Array(thinking)));
        }
        let complete =
            !rec.is_api_error_message && message.stop_reason.as_deref() != Some("max_tokens");
        out.push(Item::Assistant {
            text: (!texts.is_empty()).then(|| texts.join("\n")),
            calls,
            merge,
            across_results: merge,
            complete,
            meta,
        });
        Ok(())
    }
}

fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}
