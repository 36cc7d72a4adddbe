//! Codex rollout files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`):
//! one `{timestamp, type, payload}` record per line.
//!
//! Imported: `session_meta` (the source session's fields), `turn_context`
//! (the model), `response_item`s of type `message` (user and assistant;
//! Codex's environment-context and instructions messages and developer or
//! system messages are skipped: hel's system message takes their place),
//! `reasoning` (into the next answer's import record), `function_call`,
//! `custom_tool_call`, `local_shell_call` and their outputs, `compacted` (a summary message:
//! its `message`, or the text of its `replacement_history`),
//! and `event_msg` `token_count` (usage). Every other record type is
//! counted and skipped.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::source::{arguments_text, block_text, parse, why, Call, Found, Item, Meta, Parser};

#[derive(Default)]
pub struct Codex {
    /// Reasoning read since the last answer, for the next one's record.
    thinking: Vec<Value>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    payload: Value,
}

#[derive(Deserialize)]
struct SessionMeta {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    cli_version: Option<String>,
    #[serde(default)]
    originator: Option<String>,
    #[serde(default)]
    model_provider: Option<String>,
    #[serde(default)]
    git: Option<Value>,
}

#[derive(Deserialize)]
struct TurnContext {
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseItem {
    Message {
        role: String,
        #[serde(default)]
        content: Vec<Value>,
        #[serde(default)]
        id: Option<String>,
    },
    Reasoning {
        #[serde(default)]
        summary: Vec<Value>,
        #[serde(default)]
        content: Option<Vec<Value>>,
        #[serde(default)]
        encrypted_content: Option<String>,
    },
    FunctionCall {
        name: String,
        arguments: String,
        call_id: String,
    },
    CustomToolCall {
        name: String,
        input: String,
        call_id: String,
    },
    /// A shell command the model ran through Codex's built-in
    /// `local_shell` tool; its output is a `function_call_output`.
    LocalShellCall {
        #[serde(default)]
        call_id: Option<String>,
        #[serde(default)]
        id: Option<String>,
        #[serde(default)]
        action: Value,
    },
    FunctionCallOutput {
        call_id: String,
        output: Value,
    },
    CustomToolCallOutput {
        call_id: String,
        output: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct Compacted {
    message: String,
    #[serde(default)]
    replacement_history: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct EventMsg {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    info: Option<TokenInfo>,
}

#[derive(Deserialize)]
struct TokenInfo {
    #[serde(default)]
    last_token_usage: Option<TokenUsage>,
}

#[derive(Deserialize)]
struct TokenUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// Codex's own context messages, which hel's system message replaces.
fn is_context(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<environment_context>",
        "<user_instructions>",
        "# AGENTS.md instructions",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// A tool output as text: a string, or the text of its content items.
fn output_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => block_text(
            items,
            &["input_text", "output_text", "text"],
            &mut Vec::new(),
        ),
        Value::Object(o) => match o.get("content") {
            Some(Value::String(s)) => s.clone(),
            _ => serde_json::to_string(v).unwrap_or_default(),
        },
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Just the type of a record.
#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type")]
    kind: String,
}

impl Parser for Codex {
    fn is_compaction(&self, bytes: &[u8]) -> bool {
        parse::<Kind>(bytes).is_ok_and(|k| k.kind == "compacted")
    }

    fn line(
        &mut self,
        line: usize,
        bytes: &[u8],
        found: &mut Found,
        out: &mut Vec<Item>,
    ) -> Result<(), String> {
        let rec: Line = parse(bytes)?;
        let mut meta = Meta::at(line);
        meta.set("time", rec.timestamp.clone().map(Value::String));
        match rec.kind.as_str() {
            "session_meta" => {
                let m: SessionMeta = serde_json::from_value(rec.payload).map_err(why)?;
                let s = &mut found.session;
                for (k, v) in [
                    ("id", m.id),
                    ("started_at", m.timestamp),
                    ("cwd", m.cwd),
                    ("cli_version", m.cli_version),
                    ("originator", m.originator),
                    ("model_provider", m.model_provider),
                ] {
                    if let Some(v) = v {
                        s.insert(k.into(), Value::String(v));
                    }
                }
                if let Some(g) = m.git {
                    s.insert("git".into(), g);
                }
            }
            "turn_context" => {
                let t: TurnContext = serde_json::from_value(rec.payload).map_err(why)?;
                if t.model.is_some() {
                    found.model = t.model;
                }
            }
            "response_item" => {
                let item: ResponseItem =
                    serde_json::from_value(rec.payload.clone()).map_err(why)?;
                self.response_item(item, &rec.payload, meta, found, out);
            }
            "compacted" => {
                let c: Compacted = serde_json::from_value(rec.payload).map_err(why)?;
                // Newer Codex may leave `message` empty and put the
                // history that replaces the old one in
                // `replacement_history`: its messages' text is the summary.
                let mut summary = c.message;
                if let Some(h) = &c.replacement_history {
                    meta.set("replacement_history_items", Some(json!(h.len())));
                    if summary.trim().is_empty() {
                        let texts: Vec<String> = h
                            .iter()
                            .filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))
                            .filter_map(|i| i.get("content").and_then(Value::as_array))
                            .map(|c| {
                                block_text(
                                    c,
                                    &["input_text", "output_text", "text"],
                                    &mut Vec::new(),
                                )
                            })
                            .filter(|t| !t.trim().is_empty() && !is_context(t))
                            .collect();
                        summary = texts.join("\n\n");
                    }
                }
                if summary.trim().is_empty() {
                    return Err(
                        "a compaction with no summary text (the conversation goes on whole)".into(),
                    );
                }
                out.push(Item::Compaction {
                    summary,
                    keep_from: None,
                    meta,
                });
            }
            "event_msg" => {
                let e: EventMsg = serde_json::from_value(rec.payload).map_err(why)?;
                match (e.kind.as_str(), e.info.and_then(|i| i.last_token_usage)) {
                    ("token_count", Some(u)) => out.push(Item::Usage {
                        input: u.input_tokens,
                        output: u.output_tokens,
                    }),
                    (kind, _) => found.skip(format!("event_msg/{}", clip(kind))),
                }
            }
            other => found.skip(clip(other)),
        }
        Ok(())
    }
}

impl Codex {
    fn response_item(
        &mut self,
        item: ResponseItem,
        raw: &Value,
        mut meta: Meta,
        found: &mut Found,
        out: &mut Vec<Item>,
    ) {
        match item {
            ResponseItem::Message { role, content, id } => {
                meta.set("id", id.map(Value::String));
                let mut others = Vec::new();
                let text = block_text(
                    &content,
                    &["input_text", "output_text", "text"],
                    &mut others,
                );
                if !others.is_empty() {
                    meta.set("left_out", Some(json!(others)));
                }
                match role.as_str() {
                    "user" if is_context(&text) => {
                        found.skip("response_item/message (Codex context)")
                    }
                    "user" => out.push(Item::User { text, meta }),
                    "assistant" => {
                        if !self.thinking.is_empty() {
                            meta.set(
                                "thinking",
                                Some(Value::Array(std::mem::take(&mut self.thinking))),
                            );
                        }
                        out.push(Item::Assistant {
                            text: Some(text),
                            calls: Vec::new(),
                            merge: false,
                            across_results: false,
                            complete: true,
                            meta,
                        });
                    }
                    r => found.skip(format!("response_item/message ({})", clip(r))),
                }
            }
            ResponseItem::Reasoning {
                summary,
                content,
                encrypted_content,
            } => {
                let mut t = Map::new();
                t.insert("summary".into(), Value::Array(summary));
                if let Some(c) = content {
                    t.insert("content".into(), Value::Array(c));
                }
                if let Some(e) = encrypted_content {
                    t.insert("encrypted_content".into(), Value::String(e));
                }
                self.thinking.push(Value::Object(t));
            }
            ResponseItem::FunctionCall {
                name,
                arguments,
                call_id,
            } => out.push(call(call_id, name, arguments, meta, &mut self.thinking)),
            ResponseItem::CustomToolCall {
                name,
                input,
                call_id,
            } => {
                let arguments = json!({ "input": input }).to_string();
                out.push(call(call_id, name, arguments, meta, &mut self.thinking));
            }
            ResponseItem::LocalShellCall {
                call_id,
                id,
                action,
            } => match call_id.or(id) {
                Some(call_id) => {
                    let arguments = arguments_text(&action);
                    out.push(call(
                        call_id,
                        "local_shell".into(),
                        arguments,
                        meta,
                        &mut self.thinking,
                    ));
                }
                None => found.skip("response_item/local_shell_call (no call id)"),
            },
            ResponseItem::FunctionCallOutput { call_id, output }
            | ResponseItem::CustomToolCallOutput { call_id, output } => {
                out.push(Item::ToolResult {
                    call_id,
                    content: output_text(&output),
                    meta,
                })
            }
            ResponseItem::Other => {
                let kind = raw.get("type").and_then(Value::as_str).unwrap_or("?");
                found.skip(format!("response_item/{}", clip(kind)));
            }
        }
    }
}

/// A tool call, joined to the model's message before it.
fn call(
    id: String,
    name: String,
    arguments: String,
    mut meta: Meta,
    thinking: &mut Vec<Value>,
) -> Item {
    if !thinking.is_empty() {
        meta.set("thinking", Some(Value::Array(std::mem::take(thinking))));
    }
    Item::Assistant {
        text: None,
        calls: vec![Call {
            id,
            name,
            arguments: arguments_text(&Value::String(arguments)),
        }],
        merge: true,
        across_results: false,
        complete: true,
        meta,
    }
}

/// A record type from the file, short enough to show.
fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}
