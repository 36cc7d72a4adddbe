//! hel-store: the content-addressed, versioned session store of hel.
//!
//! A store lives in `.hel/` of a project. Immutable objects (message and
//! spill blobs, message-list nodes, snapshots) are named by the BLAKE3 hash
//! of their canonical bytes and stored zstd-compressed; each session has one
//! mutable ref naming its newest snapshot, moved by atomic rename. The exact
//! on-disk format is written down in `objects-spec/` at the repository root.
//!
//! Everything in `.hel/` is untrusted input (a repository can ship one):
//! the store opens nothing through a link, bounds every read, and validates
//! everything it loads in one place before handing it out.
//!
//! The crate knows nothing of HTTP, async runtimes or the CLI. The main entry
//! point is [`Store`]; a session is written through a [`SessionLease`] (one
//! writer per session) and its [`Checkpoint`]s are read back whole.

pub mod canonical;
mod dir;
mod error;
mod failpoint;
pub mod fsck;
pub mod gc;
mod heads;
mod id;
mod journal;
mod layout;
mod list;
mod lock;
pub mod log;
pub mod message;
mod object;
mod odb;
mod pack;
mod refs;
mod repack;
mod snapshot;
mod store;
pub mod time;

pub use error::{Error, Result};
pub use id::{ObjectId, ParseIdError, SessionId};
pub use layout::{FORMAT_VERSION, STORE_DIR};
pub use list::{Leaf, Limits, INLINE_MAX};
pub use lock::SessionLease;
pub use object::Cap;
pub use snapshot::{Checkpoint, MessagesRef, SpillEntry, Summary, SCHEMA_VERSION};
pub use store::{
    first_line, CommitInput, Committed, Loaded, SessionInfo, SessionState, Store, Warning,
};

/// The id a blob holding `bytes` has (spill files are named by it).
pub fn blob_id(bytes: &[u8]) -> ObjectId {
    object::id_of(object::Kind::Blob, bytes)
}

/// Parsers of untrusted bytes, exposed for property tests: each must
/// return an error, never panic, on any input.
#[doc(hidden)]
pub mod parse {
    /// Parse a ref file's bytes.
    pub fn ref_file(bytes: &[u8]) -> Result<crate::ObjectId, &'static str> {
        crate::refs::parse(bytes)
    }

    /// Parse a snapshot payload.
    pub fn snapshot(payload: &[u8]) -> bool {
        crate::snapshot::Checkpoint::parse(payload).is_ok()
    }

    /// Parse a list node payload fully (every item) and by shape; the two
    /// must agree on everything but inline messages' content.
    pub fn list_node(payload: &[u8]) -> (bool, bool) {
        let full = crate::list::RawNode::parse(payload).is_ok_and(|raw| {
            raw.items
                .iter()
                .all(|(a, b)| crate::list::parse_item(&payload[*a..*b]).is_ok())
        });
        (full, crate::list::Shape::parse(payload).is_ok())
    }

    /// Decode an object file's bytes that should hold `id`, under `cap`.
    pub fn object(id: &crate::ObjectId, data: &[u8], cap: crate::Cap) -> bool {
        crate::object::decode(id, std::path::Path::new("x"), data, cap).is_ok()
    }
}

/// Helpers for this crate's integration tests and for tests that build
/// hostile stores: where things live, and object encoding. Not part of the
/// API hel uses.
#[doc(hidden)]
pub mod testing {
    use std::path::{Path, PathBuf};

    use crate::{ObjectId, SessionId, Store};

    /// Canonical bytes and id of an object of kind `kind` ("blob", "list",
    /// "snapshot"; anything else is encoded as written, for unknown kinds).
    pub fn encode(kind: &str, payload: &[u8]) -> (ObjectId, Vec<u8>) {
        let mut bytes = format!("{kind} {}\0", payload.len()).into_bytes();
        bytes.extend_from_slice(payload);
        (ObjectId::of_canonical(&bytes), bytes)
    }

    /// Write `canonical` as a loose object under its id, as a store
    /// (hostile or not) would hold it; returns the id.
    pub fn plant(store_root: &Path, canonical: &[u8]) -> ObjectId {
        let id = ObjectId::of_canonical(canonical);
        let path = object_path(store_root, &id);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let data = zstd::bulk::compress(canonical, 3).unwrap_or_default();
        let _ = std::fs::write(&path, data);
        id
    }

    pub fn object_path(store_root: &Path, id: &ObjectId) -> PathBuf {
        let (dir, name) = crate::layout::object_name(id);
        store_root.join(crate::layout::OBJECTS).join(dir).join(name)
    }

    pub fn ref_path(store_root: &Path, session: &SessionId) -> PathBuf {
        store_root
            .join(crate::layout::REFS)
            .join(crate::layout::SESSIONS)
            .join(session.as_str())
    }

    pub fn log_path(store_root: &Path, session: &SessionId) -> PathBuf {
        store_root
            .join(crate::layout::LOGS)
            .join(crate::layout::SESSIONS)
            .join(session.as_str())
    }

    pub fn session_dir(store_root: &Path, session: &SessionId) -> PathBuf {
        store_root
            .join(crate::layout::SESSIONS)
            .join(session.as_str())
    }

    pub fn tmp_dir(store_root: &Path) -> PathBuf {
        store_root.join(crate::layout::TMP)
    }

    /// Where object `id` is, as a message would name it.
    pub fn where_is(store: &Store, id: &ObjectId) -> String {
        let Ok(Some(layout)) = store.layout_for_gc() else {
            return "no store".into();
        };
        match layout.odb().locate(layout, id) {
            Ok(Some(crate::odb::Found::Record { place, .. })) => {
                place.display_path().display().to_string()
            }
            Ok(Some(crate::odb::Found::Loose)) => "loose".into(),
            Ok(None) => "nowhere".into(),
            Err(e) => e.to_string(),
        }
    }

    /// Every fsync and fdatasync the store has made on this thread.
    pub fn syncs() -> u64 {
        crate::dir::SYNCS.with(std::cell::Cell::get)
    }

    /// A new session with a chosen id (tests that need ids sharing a prefix).
    pub fn new_session_with_id(
        store: &Store,
        id: &SessionId,
    ) -> crate::Result<crate::SessionLease> {
        store.new_session_named(id)
    }

    /// The item forms of list node `id`: 'm' inline, 'b' blob, 's' slice.
    pub fn node_items(store: &Store, id: &ObjectId) -> Vec<char> {
        let Ok(Some(layout)) = store.layout_for_gc() else {
            return Vec::new();
        };
        let Ok(payload) = crate::object::read_kind(
            layout,
            id,
            crate::object::Kind::List,
            crate::object::Cap::LIST,
        ) else {
            return Vec::new();
        };
        let Ok(raw) = crate::list::RawNode::parse(&payload) else {
            return Vec::new();
        };
        raw.items
            .iter()
            .map(|(a, b)| match crate::list::parse_item(&payload[*a..*b]) {
                Ok(crate::list::Item::Inline(_)) => 'm',
                Ok(crate::list::Item::Blob(_)) => 'b',
                Ok(crate::list::Item::Slice { .. }) => 's',
                Err(_) => '?',
            })
            .collect()
    }
}
