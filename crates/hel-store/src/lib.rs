//! hel-store: the content-addressed, versioned session store of hel.
//!
//! A store lives in `.hel/` of a project. Immutable objects (message and
//! spill blobs, message-list nodes, snapshots) are named by the BLAKE3 hash
//! of their canonical bytes and stored zstd-compressed; each session has one
//! mutable ref naming its newest snapshot, moved by atomic rename. The exact
//! on-disk format is written down in `objects-spec/` at the repository root.
//!
//! The crate knows nothing of HTTP, async runtimes or the CLI. The main entry
//! point is [`Store`]; a session is written through a [`SessionLease`] (one
//! writer per session) and its [`Checkpoint`]s are read back whole.

pub mod canonical;
mod carry;
mod error;
pub mod fsck;
pub mod gc;
pub mod id;
pub mod layout;
pub mod list;
pub mod lock;
pub mod log;
pub mod object;
pub mod refs;
pub mod snapshot;
mod store;
pub mod time;

pub use carry::{Carried, Carry};
pub use error::{Error, Result};
pub use id::ObjectId;
pub use lock::SessionLease;
pub use snapshot::{Checkpoint, SpillEntry, Summary, SCHEMA_VERSION};
pub use store::{first_line, CommitInput, Committed, Loaded, SessionInfo, SessionState, Store};
