//! hel-object: the bottom layer of hel's session store, without I/O (no
//! file is opened here: `tests/no_io.rs` checks the sources). What it
//! holds is pure functions of bytes and values:
//!
//! - `id`: object ids (BLAKE3 of canonical bytes) and session ids;
//! - `canonical`: the canonical JSON every stored JSON value is written in;
//! - `json`: the one bounded parse of JSON from outside the process
//!   (values, depth, repeated keys);
//! - `time`: milliseconds and their RFC 3339 spelling;
//! - `format`: the store format's version and constants;
//! - `message`: what a stored message must be to be loaded, and the
//!   pairing of tool calls with their results;
//! - `object`: the codec of objects (kinds and caps, encode, compress,
//!   decode and verify against the id; [`object::ObjectError`]);
//! - `list`: message-list nodes, their parsers and the [`list::Limits`]
//!   a load counts against;
//! - `snapshot`: [`snapshot::Checkpoint`] (one per checkpoint) and its
//!   parts, parsed and validated;
//! - `session`: the session record, typed: what a checkpoint keeps of the
//!   agent beside its messages (request config, Meter, cursors), the only
//!   code that writes and reads that JSON;
//! - `tree`: workspace trees, parsed and validated, and the bounded
//!   count of what a root tree flattens to ([`tree::Extents`]).
//!
//! In layers (checked by the workspace's `tests/t_structure.rs`): `id`,
//! `canonical`, `json`, `time` and `format` import nothing of the crate; `message`
//! and `object` only those; `list`, `session`, `snapshot` and `tree` any of
//! them.
//!
//! hel-store builds the object database and the store on it, and
//! re-exports what its callers need of this crate.

pub mod canonical;
pub mod format;
pub mod id;
pub mod json;
pub mod list;
pub mod message;
pub mod object;
pub mod session;
pub mod snapshot;
pub mod time;
pub mod tree;

pub use id::{BadSessionId, ObjectId, ParseIdError, SessionId};
