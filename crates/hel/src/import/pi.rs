//! Pi session files (`~/.pi/agent/sessions/--<dir>--/<time>_<uuid>.jsonl`):
//! a `session` header, then one entry per line.
//!
//! Imported: the `session` header (the source session's fields and
//! model), `message` entries of role `user`, `assistant` (text and
//! `toolCall` blocks; `thinking` blocks with their signatures, usage,
//! provider and model go into the import record; a response whose
//! `stopReason` is not `stop` or `toolUse` did not complete) and
//! `toolResult`, `compaction` entries (the summary message, keeping the
//! entries from `firstKeptEntryId`, or in version 1 files
//! `firstKeptEntryIndex`, on), `model_change` (the model) and
//! `session_info` (its name, for the session's name). Other message roles
//! (`bashExecution`, `custom`, …) and entry types (`thinking_level_change`,
//! `label`, `custom`, `custom_message`, `branch_summary`, …) are counted
//! and skipped. Entries are read in file order.

use serde::Deserialize;
use serde_json::{json, Value};

use super::source::{
    arguments_text, parse, text_of, why, Call, Content, Found, Item, Link, Meta, Parser,
};

pub struct Pi;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    timestamp: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
    // session
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    version: Option<u64>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model_id: Option<String>,
    // compaction
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    first_kept_entry_id: Option<String>,
    #[serde(default)]
    first_kept_entry_index: Option<u64>,
    #[serde(default)]
    tokens_before: Option<u64>,
    // session_info
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
enum PiMessage {
    User {
        content: Content,
    },
    #[serde(rename_all = "camelCase")]
    Assistant {
        #[serde(default)]
        content: Vec<Value>,
        #[serde(default)]
        stop_reason: Option<String>,
        #[serde(default)]
        usage: Option<Usage>,
        #[serde(default)]
        provider: Option<String>,
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        error_message: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    ToolResult {
        tool_call_id: String,
        #[serde(default)]
        content: Content,
        #[serde(default)]
        is_error: bool,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    cache_read: u64,
    #[serde(default)]
    cache_write: u64,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Block {
    Text {
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        thinking_signature: Option<String>,
    },
    ToolCall {
        id: String,
        name: String,
        #[serde(default)]
        arguments: Value,
    },
    #[serde(other)]
    Other,
}

/// An entry's links, read without the rest of it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Links {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parent_id: Option<String>,
}

impl Parser for Pi {
    /// Version 2 and later entries link to a parent; version 1 entries
    /// (no id) are one line.
    fn link(&self, bytes: &[u8]) -> Result<Option<Link>, String> {
        let l: Links = parse(bytes)?;
        if l.kind == "session" {
            return Ok(None);
        }
        let Some(id) = l.id else { return Ok(None) };
        Link {
            id,
            parent: l.parent_id,
            leaf: true,
            ..Link::default()
        }
        .checked()
        .map(Some)
    }

    fn is_compaction(&self, bytes: &[u8]) -> bool {
        parse::<Links>(bytes).is_ok_and(|l| l.kind == "compaction")
    }

    fn line(
        &mut self,
        line: usize,
        bytes: &[u8],
        found: &mut Found,
        out: &mut Vec<Item>,
    ) -> Result<(), String> {
        let e: Entry = parse(bytes)?;
        let mut meta = Meta::at(line);
        // Version 1 entries have no id: their index in the file names them
        // (the header is entry 0), as `firstKeptEntryIndex` counts.
        let id = e.id.clone().unwrap_or_else(|| format!("#{}", line - 1));
        meta.set("id", Some(Value::String(id)));
        meta.set("time", e.timestamp.clone());
        match e.kind.as_str() {
            "session" => {
                let s = &mut found.session;
                for (k, v) in [
                    ("id", e.id.map(Value::String)),
                    ("started_at", e.timestamp),
                    ("cwd", e.cwd.map(Value::String)),
                    ("version", e.version.map(|v| json!(v))),
                    ("provider", e.provider.map(Value::String)),
                ] {
                    if let Some(v) = v {
                        s.insert(k.into(), v);
                    }
                }
                if e.model_id.is_some() {
                    found.model = e.model_id;
                }
            }
            "model_change" => {
                if e.model_id.is_some() {
                    found.model = e.model_id;
                }
            }
            "session_info" => {
                if e.name.is_some() {
                    found.title = e.name;
                }
            }
            "compaction" => {
                let Some(summary) = e.summary else {
                    return Err("a compaction without a summary".into());
                };
                meta.set("tokens_before", e.tokens_before.map(|t| json!(t)));
                let keep_from = e
                    .first_kept_entry_id
                    .or_else(|| e.first_kept_entry_index.map(|i| format!("#{i}")));
                out.push(Item::Compaction {
                    summary,
                    keep_from,
                    meta,
                });
            }
            "message" => {
                let Some(m) = e.message else {
                    return Err("a message entry without a message".into());
                };
                let role = m
                    .get("role")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned();
                let msg: PiMessage = serde_json::from_value(m).map_err(why)?;
                message(msg, &role, meta, found, out)?;
            }
            other => found.skip(other.chars().take(40).collect::<String>()),
        }
        Ok(())
    }
}

fn message(
    msg: PiMessage,
    role: &str,
    mut meta: Meta,
    found: &mut Found,
    out: &mut Vec<Item>,
) -> Result<(), String> {
    match msg {
        PiMessage::User { content } => {
            let mut others = Vec::new();
            let text = text_of(&content, &mut others);
            if !others.is_empty() {
                meta.set("left_out", Some(json!(others)));
            }
            out.push(Item::User { text, meta });
        }
        PiMessage::Assistant {
            content,
            stop_reason,
            usage,
            provider,
            model,
            error_message,
        } => {
            if model.is_some() {
                found.model.clone_from(&model);
            }
            meta.set("provider", provider.map(Value::String));
            meta.set("model", model.map(Value::String));
            meta.set("stop_reason", stop_reason.clone().map(Value::String));
            meta.set("error", error_message.map(Value::String));
            if let Some(u) = &usage {
                meta.set("usage", serde_json::to_value(u).ok());
                meta.usage = Some((
                    u.input
                        .saturating_add(u.cache_read)
                        .saturating_add(u.cache_write),
                    u.output,
                ));
            }
            let mut texts = Vec::new();
            let mut calls = Vec::new();
            let mut thinking = Vec::new();
            for b in content {
                match serde_json::from_value::<Block>(b).map_err(why)? {
                    Block::Text { text } => texts.push(text),
                    Block::Thinking {
                        thinking: t,
                        thinking_signature,
                    } => thinking.push(json!({"text": t, "signature": thinking_signature})),
                    Block::ToolCall {
                        id,
                        name,
                        arguments,
                    } => calls.push(Call {
                        id,
                        name,
                        arguments: arguments_text(&arguments),
                    }),
                    Block::Other => found.skip("assistant block"),
                }
            }
            if !thinking.is_empty() {
                meta.set("thinking", Some(Value::Array(thinking)));
            }
            let complete = matches!(stop_reason.as_deref(), Some("stop" | "toolUse") | None);
            out.push(Item::Assistant {
                text: (!texts.is_empty()).then(|| texts.join("\n")),
                calls,
                merge: false,
                across_results: false,
                complete,
                meta,
            });
        }
        PiMessage::ToolResult {
            tool_call_id,
            content,
            is_error,
        } => {
            if is_error {
                meta.set("is_error", Some(Value::Bool(true)));
            }
            let mut others = Vec::new();
            let content = text_of(&content, &mut others);
            if !others.is_empty() {
                meta.set("left_out", Some(json!(others)));
            }
            out.push(Item::ToolResult {
                call_id: tool_call_id,
                content,
                meta,
            });
        }
        PiMessage::Other => found.skip(format!(
            "message/{}",
            role.chars().take(40).collect::<String>()
        )),
    }
    Ok(())
}
