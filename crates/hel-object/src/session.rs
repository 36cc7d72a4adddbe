//! The session record: what a checkpoint keeps of a session beside its
//! messages, typed. A checkpoint names two blobs of it (the request
//! config and the read_file cursors) and holds the Meter inline; the
//! rest (cwd, usage, instruction, record, workspace, spill) are typed
//! fields of [`crate::snapshot::Checkpoint`] already.
//!
//! This module is the only code that writes that JSON
//! ([`SessionRecord::encode`]) and the only code that reads it back
//! ([`ReadRecord::decode`]); nobody else builds or parses it by key.
//!
//! Why here, in the bottom layer: every writer of a checkpoint reaches
//! it. hel-store commits a record ([`SessionRecord`] is part of its
//! `CommitInput`) and checks its encoded size as a load will before
//! anything is written; its pull, bundle and fork paths check what they
//! receive with the same load; hel-agent hands over its state as one
//! value (its `session` module converts the live Meter and cursor table);
//! the binary's import builds one, and show and export read one back.
//! The live behaviour (the Meter's estimates, the cursor table's
//! capacity, the request body) stays in hel-agent.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Everything that shapes a model request except the messages: provider,
/// endpoint, model, parameters, output limit, toolset, compaction policy
/// (the key is never part of it). Stored in every checkpoint, in a blob.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RequestConfig {
    /// `deepseek`, `openai` or `compatible` (for an imported session, the
    /// agent it came from).
    pub provider: String,
    pub base_url: String,
    pub model: String,
    /// Extra body parameters (none yet; part of the Meter's input signature).
    pub params: Value,
    pub max_output_tokens: u64,
    /// The body field carrying the output limit.
    pub output_limit_field: String,
    /// The toolset's definitions as sent.
    pub tools: Vec<Value>,
    /// The compaction policy in force.
    pub compaction: Value,
    /// The MCP servers whose tools are offered: their names only (never
    /// a URL, a command or an environment value; checkpoints travel to
    /// remotes). Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<String>,
    /// For a checkpoint made by `hel sessions import`: what the chat form
    /// of the source could not hold (objects-spec §13.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportRecord>,
}

impl RequestConfig {
    /// A config naming `provider` and `model` only: no endpoint, no
    /// output limit, no tools, nothing hel would send.
    pub fn bare(provider: &str, model: &str) -> RequestConfig {
        RequestConfig {
            provider: provider.to_owned(),
            base_url: String::new(),
            model: model.to_owned(),
            params: json!({}),
            max_output_tokens: 0,
            output_limit_field: String::new(),
            tools: Vec::new(),
            compaction: Value::Null,
            mcp_servers: Vec::new(),
            import: None,
        }
    }

    /// The config of a session imported from `from` (another agent, whose
    /// model is `model`), with what the import kept of its source.
    pub fn imported(from: &str, model: &str, record: ImportRecord) -> RequestConfig {
        RequestConfig {
            import: Some(record),
            ..RequestConfig::bare(from, model)
        }
    }

    /// The Meter's input signature: provider, model, params and tools, but
    /// not the output limit (which does not change what the prompt costs).
    pub fn signature(&self) -> Value {
        json!({
            "provider": self.provider,
            "model": self.model,
            "params": self.params,
            "tools": self.tools,
        })
    }

    /// The names of the tools offered.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter_map(|d| d.pointer("/function/name").and_then(Value::as_str))
            .collect()
    }
}

/// What an import kept of its source that the chat form has no place for
/// (objects-spec §13.1): the source's own fields, verbatim.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ImportRecord {
    /// The layout of this record ([`IMPORT_RECORD_VERSION`]).
    pub version: u64,
    /// The agent the session came from.
    pub from: String,
    /// The file it was read from.
    pub file: String,
    /// The source's fields of the whole session.
    pub session: Map<String, Value>,
    /// The source's fields of each message new in this checkpoint.
    pub messages: Vec<ImportedMessage>,
    /// Why `messages` was left empty, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

impl ImportRecord {
    /// The bytes it takes in a checkpoint's request config.
    pub fn stored_len(&self) -> usize {
        crate::canonical::to_vec(&serde_json::to_value(self).unwrap_or_default()).len()
    }
}

/// The layout of [`ImportRecord`] written.
pub const IMPORT_RECORD_VERSION: u64 = 1;

/// One message's fields in its source.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ImportedMessage {
    /// Its index in the conversation.
    pub index: usize,
    /// The source line it was read from (1-based).
    pub line: usize,
    pub source: Map<String, Value>,
}

/// What the Meter last observed: how many messages a request sent and its
/// `prompt_tokens`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub messages_sent: usize,
    pub prompt_tokens: u64,
    /// `prompt_tokens` is hel's estimate, not the server's count. Absent in
    /// checkpoints written before it existed: those figures are the
    /// server's (or a 0 the Meter refuses to trust).
    #[serde(default)]
    pub estimated: bool,
}

/// Where a read continues (a read_file cursor).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Cursor {
    pub id: String,
    /// The path as the model gave it (relative to the project for project files).
    pub path: String,
    pub offset: u64,
    /// Lines left in the requested range (None: to the end of the file).
    pub lines_left: Option<u64>,
    pub identity: Identity,
}

/// What a file was when a cursor into it was handed out.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Identity {
    /// A project file.
    File {
        dev: u64,
        ino: u64,
        len: u64,
        mtime_ns: i64,
        ctime_ns: i64,
    },
    /// A spill file, identified by its blob id: stable across processes
    /// and copies, since spill never changes once written.
    Spill { blob: String },
}

/// What a checkpoint keeps of the agent beside its messages, as a writer
/// hands it over.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub config: RequestConfig,
    /// The Meter's observation (None: it has none).
    pub meter: Option<Observation>,
    /// The read_file cursors, oldest first.
    pub cursors: Vec<Cursor>,
}

impl SessionRecord {
    /// A record of `config` with no Meter observation and no cursors (a
    /// session imported, or made by a test).
    pub fn of(config: RequestConfig) -> SessionRecord {
        SessionRecord {
            config,
            meter: None,
            cursors: Vec::new(),
        }
    }
}

/// The Meter as a checkpoint holds it.
#[derive(Serialize, Deserialize)]
struct MeterJson {
    observed: Option<Observation>,
}

/// A [`SessionRecord`] in the form a checkpoint stores: the canonical JSON
/// of the two blobs, and the Meter's value for the snapshot.
#[derive(Debug, Clone)]
pub struct EncodedRecord {
    pub config: Vec<u8>,
    pub cursors: Vec<u8>,
    pub meter: Value,
}

impl SessionRecord {
    /// The record as a checkpoint stores it. (Serializing these types
    /// cannot fail: no map has keys other than strings.)
    pub fn encode(&self) -> EncodedRecord {
        let config = serde_json::to_value(&self.config).unwrap_or_default();
        let cursors = serde_json::to_value(&self.cursors).unwrap_or_default();
        let meter = MeterJson {
            observed: self.meter,
        };
        EncodedRecord {
            config: crate::canonical::to_vec(&config),
            cursors: crate::canonical::to_vec(&cursors),
            meter: serde_json::to_value(meter).unwrap_or_default(),
        }
    }
}

/// A checkpoint's record as read back. A load checks only that the blobs
/// are JSON (their meaning is the agent's); what this hel cannot read
/// (written by another version or tool) is `None` here, and its reader
/// starts afresh there.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ReadRecord {
    #[serde(rename = "request_config")]
    pub config: Option<RequestConfig>,
    /// Shown as stored: `{"observed": …}`.
    #[serde(serialize_with = "meter_as_stored")]
    pub meter: Option<Observation>,
    pub cursors: Option<Vec<Cursor>>,
}

fn meter_as_stored<S: serde::Serializer>(
    meter: &Option<Observation>,
    s: S,
) -> Result<S::Ok, S::Error> {
    MeterJson { observed: *meter }.serialize(s)
}

impl ReadRecord {
    /// The record stored as `config` and `cursors` (the blobs' JSON) and
    /// `meter` (the snapshot's value).
    pub fn decode(config: Value, cursors: Value, meter: &Value) -> ReadRecord {
        ReadRecord {
            config: serde_json::from_value(config).ok(),
            meter: MeterJson::deserialize(meter).ok().and_then(|m| m.observed),
            cursors: serde_json::from_value(cursors).ok(),
        }
    }

    /// The model it was saved with, as `model (provider)`-style parts:
    /// `?` for what is not known.
    pub fn model(&self) -> (&str, &str) {
        match &self.config {
            Some(c) => (&c.provider, &c.model),
            None => ("?", "?"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RequestConfig {
        RequestConfig {
            provider: "openai".into(),
            base_url: "http://x".into(),
            model: "m".into(),
            params: json!({}),
            max_output_tokens: 10,
            output_limit_field: "max_tokens".into(),
            tools: vec![json!({"type": "function", "function": {"name": "read_file"}})],
            compaction: Value::Null,
            mcp_servers: Vec::new(),
            import: None,
        }
    }

    #[test]
    fn a_record_reads_back_as_itself() {
        let record = SessionRecord {
            config: config(),
            meter: Some(Observation {
                messages_sent: 3,
                prompt_tokens: 99,
                estimated: true,
            }),
            cursors: vec![Cursor {
                id: "c".into(),
                path: "a.txt".into(),
                offset: 4,
                lines_left: None,
                identity: Identity::Spill { blob: "b".into() },
            }],
        };
        let e = record.encode();
        let back = ReadRecord::decode(
            serde_json::from_slice(&e.config).unwrap(),
            serde_json::from_slice(&e.cursors).unwrap(),
            &e.meter,
        );
        assert_eq!(back.config.as_ref(), Some(&record.config));
        assert_eq!(back.meter, record.meter);
        assert_eq!(back.cursors.as_ref(), Some(&record.cursors));
        assert_eq!(back.config.unwrap().tool_names(), ["read_file"]);
    }

    /// The bytes are those hel wrote before the record was typed: the
    /// Meter `{"observed": null}`, the cursors a list, the config without
    /// `mcp_servers` or `import` while it has none.
    #[test]
    fn encoded_forms_are_the_stored_ones() {
        let e = SessionRecord {
            config: config(),
            meter: None,
            cursors: Vec::new(),
        }
        .encode();
        assert_eq!(e.meter, json!({"observed": null}));
        assert_eq!(e.cursors, b"[]");
        let text = String::from_utf8(e.config).unwrap();
        assert!(!text.contains("mcp_servers") && !text.contains("import"));
    }

    /// What this hel cannot read is None, never an error: a load accepts
    /// any JSON there.
    #[test]
    fn unreadable_parts_are_none() {
        let back = ReadRecord::decode(json!({"model": "m"}), json!({"x": 1}), &Value::Null);
        assert_eq!(back.config, None);
        assert_eq!(back.meter, None);
        assert_eq!(back.cursors, None);
        assert_eq!(back.model(), ("?", "?"));
    }
}
