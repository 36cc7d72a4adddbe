//! hel-store: the content-addressed, versioned session store of hel.
//!
//! A store lives in `.hel/` of a project (format 6, objects-spec/README.md
//! at the repository root). Immutable objects (message and spill blobs,
//! message-list nodes, snapshots, workspace trees and files) are named by
//! the BLAKE3 hash of their canonical bytes and stored zstd-compressed, as
//! records of each session's append-only journal (`packs/journals/`) or of
//! sealed packs (`packs/`). Each session has one mutable ref,
//! `refs/sessions/<uuid>`, naming its newest snapshot: its head. A commit
//! makes its objects and a commit record durable in the session's journal
//! (one `fdatasync`), then moves the ref by atomic rename; the journal's
//! commit records are the ref's log. Writers of objects are each session's
//! lease holder (its own journal), a pull bringing a session in (one
//! sealed pack, under the store lock held shared) and, under the store lock
//! held exclusively, gc and delete (sealed packs). A store of any other
//! format is refused when it is opened, before anything is written
//! (`upgrade.rs`, which also holds the way to a next format).
//!
//! Everything in `.hel/` is untrusted input (a repository can ship one):
//! the store reaches its files through hel-fs, the file layer (no-follow
//! opens, bounded reads), and validates everything it loads in one place
//! before handing it out. Damage is a fault naming its file (and offset),
//! never a shorter or older session.
//!
//! The crate knows nothing of HTTP, async runtimes or the CLI. The main entry
//! point is [`Store`]; a session is written through a [`SessionLease`] (one
//! writer per session) and its [`Checkpoint`]s are read back whole.
//!
//! The modules are layers: each imports only the layers below it (checked
//! by the workspace's `tests/t_structure.rs`, which reads the sources):
//!
//! 0. The hel-object crate, without I/O: ids, canonical JSON, time, the
//!    format's constants, messages, the object codec (kinds, caps, encode,
//!    decode), message-list nodes and their parsers, snapshots
//!    ([`Checkpoint`], [`Summary`]), the typed session record
//!    ([`SessionRecord`]: request config, Meter, cursors) and trees;
//!    re-exported here where callers need them.
//! 1. `error`: the crate's one [`Error`], naming only hel-object's types
//!    (each of hel-object's errors becomes the variant of its name);
//!    `par` (many small reads on a few threads).
//! 2. Files: `dir` (hel-fs's descriptor-relative handles), `pack` (record
//!    and index formats, bounded record reads), `journal` (a session's
//!    journal and its sidecar), `layout` (where things live under `.hel/`),
//!    `refs`, `lock` (the store lock and session leases), `trashed` (trash
//!    entries and pins, the files).
//! 3. The object database: `odb` (the [`Layout`](layout::Layout) with the
//!    index of where each object is), `read` (objects, snapshots and trees
//!    read and verified), `write` (a commit's new objects, and the ids
//!    objects have), `repack`,
//!    `list` (message lists read, bounded), `dependents` (who depends on
//!    whom), `place` (`.hel/identity`: where the store was made, and
//!    which of its sessions are shipped).
//! 4. The store: `heads` (a session's head: its ref and the ref's commit
//!    record), `upgrade` (the format judged at open, and the way to a
//!    next one), `identity` (whose a [`Store`]'s sessions are, from
//!    `place`), `summaries` (the listing hint), `store` ([`Store`]: open,
//!    sessions, load), `admit` (what every writer of a checkpoint checks
//!    before it writes: what a load would refuse), `commit` ([`Txn`]),
//!    `names`, `spill`,
//!    `workspace` (what hel-workspace reads), `log`, `oplog` (the
//!    operation log's entries, read and appended).
//! 5. Reachability and maintenance, functions taking a [`Store`]: `gc`
//!    (its mark, and [`Store::delete`]), `fork` (above gc: a fork of a
//!    deleted session's checkpoint walks what it reaches to learn what it
//!    depends on), `fsck`, `scan` and `search`, `transfer`, `trash`
//!    (delete to the trash, undelete, retention and pins), `opundo` (`hel
//!    op undo`, and the log's gc roots and fsck faults), `purge` (a
//!    session's history rewritten with its secrets replaced).
//!
//! [`Store`]'s own methods are the session's life: [`Store::open`],
//! [`Store::open_with`], [`Store::exists`], [`Store::format`],
//! [`Store::project_path`], [`Store::limits`]; [`Store::new_session`],
//! [`Store::new_session_named`], [`Store::resume`], [`Store::head`],
//! [`Store::checkpoint`], [`Store::load`], [`Store::record_state`];
//! [`Store::begin`] and [`Store::commit`]; [`Store::fork`],
//! [`Store::fork_here`]; [`Store::sessions`], [`Store::knows`],
//! [`Store::delete`]; the trash's [`Store::trash_session`],
//! [`Store::undelete_session`], [`Store::trash_entries`],
//! [`Store::delete_for_good`] (`tests/store_api.rs` keeps them at most 24).
//! Everything else is a function of the module it belongs to:
//! [`names::rename`], [`spill::write`], [`workspace::read_tree`],
//! [`log::log`], [`gc::gc`], [`fsck::fsck`], [`search::search`],
//! [`transfer::pack_between`], and so on.
//!
//! Two cargo features exist for tests only, and hel's own build has
//! neither: `failpoints` (hel-fs's failpoints, `HEL_FAILPOINTS`) and
//! `testing` (the modules `parse` and `testing`,
//! for tests that reach the store's internals or build hostile stores).
//! This file only declares the modules and re-exports what callers use.

pub mod admit;
mod commit;
mod dependents;
mod dir;
mod error;
mod failpoint;
mod fork;
pub mod fsck;
pub mod gc;
mod heads;
pub mod identity;
mod journal;
mod layout;
mod list;
mod lock;
pub mod log;
pub mod names;
mod odb;
pub mod oplog;
pub mod opundo;
mod pack;
#[cfg(test)]
mod pack_vectors;
mod par;
#[cfg(feature = "testing")]
pub mod parse;
mod place;
pub mod purge;
mod read;
mod refs;
mod repack;
pub mod rounds;
pub mod scan;
pub mod search;
pub mod spill;
mod store;
mod summaries;
#[cfg(feature = "testing")]
pub mod testing;
pub mod transfer;
pub mod trash;
mod trashed;
mod upgrade;
pub mod workspace;
mod write;

pub use hel_object::{canonical, json, message, time, tree};
pub(crate) use hel_object::{format, id, object, snapshot};

pub use commit::{encode_blob, Encoded, Txn};
pub use error::{Error, Result};
pub use error::{NameError, RefError, UpgradeError};
pub use hel_object::format::{FORMAT_VERSION, STORE_DIR};
pub use hel_object::object::{Cap, DICTIONARY, DICTIONARY_ID};
pub use hel_object::session::{
    Cursor, Identity, ImportRecord, ImportedMessage, Observation, ReadRecord, RequestConfig,
    SessionRecord, IMPORT_RECORD_VERSION,
};
pub use hel_object::snapshot::{
    restored_path, Checkpoint, MessagesRef, Record, Restored, Spill, SpillEntry, Summary,
    Workspace, RESTORED_PATHS_MAX, SCHEMA_VERSION,
};
pub use hel_object::{BadSessionId, ObjectId, ParseIdError, SessionId};
pub use list::{Leaf, Limits, OverLimit, INLINE_MAX};
pub use lock::SessionLease;
pub use names::{check_name, looks_like_name};
pub use store::{first_line, CommitInput, Committed, Loaded, SessionState, Store, Warning};
pub use summaries::SessionInfo;
pub use trash::TrashEntry;
pub use write::{blob_id, tree_id, tree_payload_id};
