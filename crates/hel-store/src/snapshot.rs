//! Snapshot objects: one per checkpoint.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::layout::Layout;
use crate::object::{self, Cap, Kind};
use crate::{Error, ObjectId, Result, SessionId};

/// The snapshot schema this build writes and the newest it reads.
pub const SCHEMA_VERSION: u64 = 1;

/// A snapshot object: one checkpoint. Everything a new process needs to
/// continue a session is here or named from here (messages, request config,
/// cursors, spill). [`crate::Store::load`] resolves it all.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub schema_version: u64,
    pub session_id: SessionId,
    /// The previous checkpoint; empty for a session's first, the forked
    /// checkpoint for a fork's first.
    pub parents: Vec<ObjectId>,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// The same instant, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// The project directory the session belongs to.
    pub cwd: String,
    /// Blob holding the request config (provider, model, params, output
    /// limit, toolset, compaction settings; opaque to the store). A blob, so
    /// that the same config is stored once for all checkpoints.
    pub request_config: ObjectId,
    /// The Meter (opaque to the store), or null.
    pub meter: Value,
    /// Blob holding the read_file cursors (opaque to the store).
    pub cursors: ObjectId,
    pub messages: MessagesRef,
    /// Spill path as the conversation names it → its blob.
    pub spill: BTreeMap<String, SpillEntry>,
    pub summary: Summary,
}

/// The root of a checkpoint's message list.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MessagesRef {
    /// Newest list node, `null` for an empty list.
    pub root: Option<ObjectId>,
    pub count: u64,
}

/// A spill file kept by a checkpoint.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SpillEntry {
    pub blob: ObjectId,
    pub size: u64,
}

/// What listings show without reading the messages.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub messages: u64,
    /// Checkpoints in this one's first-parent history, itself included.
    pub checkpoints: u64,
    /// First line of the last user instruction.
    pub instruction: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Checkpoint {
    pub(crate) fn to_payload(&self) -> Vec<u8> {
        crate::canonical::to_vec(&serde_json::to_value(self).unwrap_or_default())
    }

    /// Parse and validate the payload of a snapshot (objects-spec §4,
    /// "Validation"): every key with its type and nothing else, a schema
    /// this build reads, at most one parent, a spill map of blobs, and a
    /// summary that agrees with the message count.
    pub(crate) fn parse(payload: &[u8]) -> std::result::Result<Checkpoint, Invalid> {
        let value: Value =
            serde_json::from_slice(payload).map_err(|e| Invalid::Malformed(e.to_string()))?;
        let found = value
            .get("schema_version")
            .and_then(Value::as_u64)
            .ok_or_else(|| Invalid::Malformed("no schema_version".into()))?;
        if found > SCHEMA_VERSION {
            return Err(Invalid::Newer(found));
        }
        if found == 0 {
            return Err(Invalid::Malformed("schema_version 0".into()));
        }
        let cp: Checkpoint =
            serde_json::from_value(value).map_err(|e| Invalid::Malformed(e.to_string()))?;
        if cp.parents.len() > 1 {
            return Err(Invalid::Malformed(format!(
                "{} parents, a checkpoint has at most one",
                cp.parents.len()
            )));
        }
        if cp.cwd.is_empty() {
            return Err(Invalid::Malformed("empty cwd".into()));
        }
        if cp.summary.messages != cp.messages.count {
            return Err(Invalid::Malformed(format!(
                "summary says {} messages, the list {}",
                cp.summary.messages, cp.messages.count
            )));
        }
        if (cp.messages.count == 0) != cp.messages.root.is_none() {
            return Err(Invalid::Malformed(
                "an empty list has no root, and only an empty one".into(),
            ));
        }
        if cp.summary.checkpoints == 0 {
            return Err(Invalid::Malformed("summary counts 0 checkpoints".into()));
        }
        if cp.spill.keys().any(|k| k.is_empty()) {
            return Err(Invalid::Malformed("a spill entry has an empty name".into()));
        }
        Ok(cp)
    }
}

/// Why a snapshot payload is not valid.
pub(crate) enum Invalid {
    Malformed(String),
    Newer(u64),
}

/// Read and validate snapshot `id`.
pub(crate) fn read(layout: &Layout, id: &ObjectId) -> Result<Checkpoint> {
    let payload = object::read_kind(layout, id, Kind::Snapshot, Cap::SNAPSHOT)?;
    Checkpoint::parse(&payload).map_err(|e| match e {
        Invalid::Malformed(reason) => Error::Corrupt {
            id: *id,
            path: layout.object_path(id),
            reason: format!("malformed snapshot: {reason}"),
        },
        Invalid::Newer(found) => Error::NewerSchema {
            id: *id,
            path: layout.object_path(id),
            found,
            supported: SCHEMA_VERSION,
        },
    })
}
