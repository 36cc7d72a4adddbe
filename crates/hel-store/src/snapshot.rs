//! Snapshot objects: one per checkpoint.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::layout::Layout;
use crate::object::{self, Kind};
use crate::{Error, ObjectId, Result};

/// The snapshot schema this build writes and the newest it reads.
pub const SCHEMA_VERSION: u64 = 1;

/// A snapshot object: one checkpoint. Everything a new process needs to
/// continue a session is here or named from here (messages, request config,
/// cursors, spill). [`crate::Store::load`] resolves it all.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub schema_version: u64,
    pub session_id: String,
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
pub struct MessagesRef {
    /// Newest list node, `null` for an empty list.
    pub root: Option<ObjectId>,
    pub count: u64,
}

/// A spill file kept by a checkpoint.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SpillEntry {
    pub blob: ObjectId,
    pub size: u64,
}

/// What listings show without reading the messages.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
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
}

/// Read and check snapshot `id`.
pub fn read(layout: &Layout, id: &ObjectId) -> Result<Checkpoint> {
    let payload = object::read_kind(layout, id, Kind::Snapshot)?;
    let path = layout.object_path(id);
    let corrupt = |reason: String| Error::Corrupt {
        id: *id,
        path: path.clone(),
        reason,
    };
    let value: Value = serde_json::from_slice(&payload)
        .map_err(|e| corrupt(format!("malformed snapshot: {e}")))?;
    let found = value
        .get("schema_version")
        .and_then(Value::as_u64)
        .ok_or_else(|| corrupt("snapshot without schema_version".into()))?;
    if found > SCHEMA_VERSION {
        return Err(Error::NewerSchema {
            id: *id,
            path: path.clone(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    serde_json::from_value(value).map_err(|e| corrupt(format!("malformed snapshot: {e}")))
}
