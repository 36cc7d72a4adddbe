//! hel-store: the content-addressed, versioned session store of hel.
//!
//! A store lives in `.hel/` of a project (format 6, objects-spec/README.md
//! at the repository root). Immutable objects (message and spill blobs,
//! message-list nodes, snapshots, workspace trees and files) are named by
//! the BLAKE3 hash of their canonical bytes and stored zstd-compressed, as
//! records of each session's append-only journal (`packs/journals/`) or of
//! sealed packs (`packs/`; older stores also hold loose files under
//! `objects/`). Each session has one mutable ref, `refs/sessions/<uuid>`,
//! naming its newest snapshot: its head. A commit makes its objects and a
//! commit record durable in the session's journal (one `fdatasync`), then
//! moves the ref by atomic rename; the journal's commit records are the
//! ref's log. Writers of objects are each session's lease holder (its own
//! journal), a pull bringing a session in (one sealed pack, under the
//! store lock held shared) and, under the store lock held exclusively, gc
//! and delete (sealed packs). A store of format 1 to 5 is upgraded
//! to format 6 when it is opened (`upgrade.rs`), reading it by its own rules
//! (`heads.rs`).
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
//!    ([`Checkpoint`], [`Summary`]) and trees;
//!    re-exported here where callers need them.
//! 1. `error`: the crate's one [`Error`], naming only hel-object's types
//!    (each of hel-object's errors becomes the variant of its name);
//!    `par` (many small reads on a few threads).
//! 2. Files: `dir` (hel-fs's descriptor-relative handles), `pack` (record
//!    and index formats, bounded record reads), `journal` (a session's
//!    journal and its sidecar), `layout` (where things live under `.hel/`),
//!    `refs`, `lock` (the store lock and session leases).
//! 3. The object database: `odb` (the [`Layout`](layout::Layout) with the
//!    index of where each object is), `read` (objects, snapshots and trees
//!    read and verified), `write` (a commit's new objects), `repack`,
//!    `list` (message lists read, bounded), `dependents` (who depends on
//!    whom, format 4).
//! 4. The store: `heads` (what older formats call a head), `upgrade` (run
//!    at open), `summaries` (the listing hint), `store` ([`Store`]: open,
//!    sessions, load), `commit` ([`Txn`]), `names`, `spill`,
//!    `workspace` (what hel-workspace reads), `log`.
//! 5. Reachability and maintenance, functions taking a [`Store`]: `gc`
//!    (its mark, and [`Store::delete`]), `fork` (above gc: a fork of a
//!    deleted session's checkpoint walks what it reaches to learn what it
//!    depends on), `fsck`, `scan` and `search`, `transfer`.
//!
//! [`Store`]'s own methods are the session's life: [`Store::open`],
//! [`Store::open_with`], [`Store::exists`], [`Store::format`],
//! [`Store::project_path`], [`Store::limits`]; [`Store::new_session`],
//! [`Store::new_session_named`], [`Store::resume`], [`Store::head`],
//! [`Store::checkpoint`], [`Store::load`], [`Store::record_state`];
//! [`Store::begin`] and [`Store::commit`]; [`Store::fork`],
//! [`Store::fork_here`]; [`Store::sessions`], [`Store::knows`],
//! [`Store::delete`] (`tests/store_api.rs` keeps them at most 20).
//! Everything else is a function of the module it belongs to:
//! [`names::rename`], [`spill::write`], [`workspace::read_tree`],
//! [`log::log`], [`gc::gc`], [`fsck::fsck`], [`search::search`],
//! [`transfer::pack_between`], and so on.
//!
//! Two cargo features exist for tests only, and hel's own build has
//! neither: `failpoints` (hel-fs's failpoints, `HEL_FAILPOINTS`) and
//! `testing` (the modules `parse` and `testing`,
//! for tests that reach the store's internals or build hostile stores).

mod commit;
mod dependents;
mod dir;
mod error;
mod failpoint;
mod fork;
pub mod fsck;
pub mod gc;
mod heads;
mod journal;
mod layout;
mod list;
mod lock;
pub mod log;
pub mod names;
mod odb;
mod pack;
mod par;
mod read;
mod refs;
mod repack;
pub mod scan;
pub mod search;
pub mod spill;
mod store;
mod summaries;
pub mod transfer;
mod upgrade;
pub mod workspace;
mod write;

pub use hel_object::{canonical, message, time, tree};
pub(crate) use hel_object::{format, id, object, snapshot};

pub use commit::{encode_blob, Encoded, Txn};
pub use error::{Error, Result};
pub use error::{NameError, RefError, UpgradeError};
pub use hel_object::format::{FORMAT_VERSION, STORE_DIR};
pub use hel_object::object::{Cap, DICTIONARY, DICTIONARY_ID};
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

/// The id `tree` has as an object.
pub fn tree_id(tree: &tree::Tree) -> ObjectId {
    tree_payload_id(&tree.to_payload())
}

/// The id of the tree whose payload is `payload` (entries written with
/// [`tree::push_entry`]).
pub fn tree_payload_id(payload: &[u8]) -> ObjectId {
    object::id_of(object::Kind::Tree, payload)
}

/// The id a blob holding `bytes` has (spill files are named by it).
pub fn blob_id(bytes: &[u8]) -> ObjectId {
    object::id_of(object::Kind::Blob, bytes)
}

/// Parsers of untrusted bytes, exposed for property tests: each must
/// return an error, never panic, on any input. Only with the `testing`
/// feature.
#[cfg(feature = "testing")]
pub mod parse {
    /// Parse a ref file's bytes.
    pub fn ref_file(bytes: &[u8]) -> Result<crate::ObjectId, crate::RefError> {
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
/// hostile stores: where things live, object encoding, writes that bypass
/// the store's rules (no lock, no lease). Only with the `testing` feature,
/// which only dev-dependencies turn on: hel itself is built without it.
#[cfg(feature = "testing")]
pub mod testing {
    use std::path::{Path, PathBuf};

    use crate::{ObjectId, SessionId, Store};

    /// Whether this build has failpoints (`HEL_FAILPOINTS` does nothing
    /// without them): `tools/test`'s workspace build has them, a lone
    /// `cargo test -p hel-store` does not unless asked (`--features
    /// failpoints`).
    pub fn failpoints() -> bool {
        cfg!(feature = "failpoints")
    }

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
        match layout.index().locate(layout, id) {
            Ok(Some(crate::odb::Found::Record { place, .. })) => {
                place.display_path().display().to_string()
            }
            Ok(Some(crate::odb::Found::Loose)) => "loose".into(),
            Ok(None) => "nowhere".into(),
            Err(e) => e.to_string(),
        }
    }

    /// The bytes of a pack record of type byte `rtype` (objects-spec
    /// §12.2), its check computed: a record of a type this hel does not
    /// know, or a forged one.
    pub fn record(rtype: u8, id: &ObjectId, stored: &[u8]) -> Vec<u8> {
        crate::pack::encode_record_raw(rtype, id, stored)
    }

    /// The bytes of blob `id` (a spill file), verified. Tests only:
    /// hel reads spill through [`crate::spill::read`].
    pub fn read_blob(store: &Store, id: &ObjectId) -> crate::Result<Vec<u8>> {
        crate::read::of_kind(
            store.layout_or_missing(id)?,
            id,
            crate::object::Kind::Blob,
            crate::Cap::SPILL,
        )
    }

    /// Every fsync and fdatasync the store has made on this thread.
    pub fn syncs() -> u64 {
        hel_fs::syncs()
    }

    /// A new session with a chosen id (tests that need ids sharing a prefix).
    pub fn new_session_with_id(
        store: &Store,
        id: &SessionId,
    ) -> crate::Result<crate::SessionLease> {
        store.new_session_named(id)
    }

    /// Date every commit record of `session`'s journal `time_ms`, as a
    /// store that arrived with a repository may (records whose checks
    /// hold, saying any time at all). The sidecar goes: readers then read
    /// the journal itself.
    pub fn redate_journal(store_root: &Path, session: &SessionId, time_ms: u64) {
        use crate::pack::{self, RecordType, FILE_HEADER, RECORD_HEADER};
        let dir = store_root
            .join(crate::layout::PACKS)
            .join(crate::layout::JOURNALS);
        let path = dir.join(crate::journal::journal_name(session));
        let bytes = std::fs::read(&path).unwrap_or_default();
        let Some(head) = bytes.get(..FILE_HEADER as usize) else {
            return;
        };
        let mut out = head.to_vec();
        let mut at = FILE_HEADER as usize;
        while let Ok(h) = pack::parse_header(&bytes[at..]) {
            let end = at + h.record_len() as usize;
            let Some(stored) = bytes.get(at + RECORD_HEADER as usize..end) else {
                break;
            };
            if h.rtype == RecordType::Commit {
                let json = crate::journal::commit_json(stored).unwrap_or_default();
                let mut c: serde_json::Value = serde_json::from_slice(&json).unwrap_or_default();
                c["time_ms"] = time_ms.into();
                let json = crate::canonical::to_vec(&c);
                out.extend_from_slice(&pack::encode_record(RecordType::Commit, &h.id, &json));
            } else {
                out.extend_from_slice(&bytes[at..end]);
            }
            at = end;
        }
        let _ = std::fs::write(&path, out);
        let _ = std::fs::remove_file(dir.join(crate::journal::jidx_name(session)));
    }

    /// The item forms of list node `id`: 'm' inline, 'b' blob, 's' slice.
    pub fn node_items(store: &Store, id: &ObjectId) -> Vec<char> {
        let Ok(Some(layout)) = store.layout_for_gc() else {
            return Vec::new();
        };
        let Ok(payload) = crate::read::of_kind(
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

#[cfg(test)]
mod pack_vectors {
    //! objects-spec/pack-vectors.json, made from the spec by an independent
    //! implementation: this crate must write the same bytes and read them.

    use crate::dir::Dir;
    use crate::pack::{self, FileKind, Idx, IdxEntry, Place, RecordType, FILE_HEADER};
    use crate::{journal, object, ObjectId, SessionId};
    use serde_json::Value;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn doc() -> Value {
        serde_json::from_str(include_str!("../../../objects-spec/pack-vectors.json")).unwrap()
    }

    #[test]
    fn sealed_pack_and_index_are_written_and_read_as_specified() {
        let doc = doc();
        let pack_bytes = hex(doc["pack_hex"].as_str().unwrap());
        let idx_bytes = hex(doc["idx_hex"].as_str().unwrap());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.pack");
        std::fs::write(&path, &pack_bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        // Read: every object through the index, decoded to its payload.
        let idx = Idx::parse(&idx_bytes).unwrap();
        assert_eq!(&idx.pack_hash, blake3::hash(&pack_bytes).as_bytes());
        let mut ours = pack::file_header(FileKind::Sealed).to_vec();
        let mut entries = Vec::new();
        for o in doc["objects"].as_array().unwrap() {
            let id: ObjectId = o["id"].as_str().unwrap().parse().unwrap();
            let kind = o["kind"].as_str().unwrap();
            let payload = hex(o["payload_hex"].as_str().unwrap());
            let e = idx.find(&id).unwrap();
            let place = Place {
                path: path.clone(),
                offset: e.offset,
            };
            let (h, stored) = pack::read_record(&file, &place, 1 << 20, Some(&id)).unwrap();
            assert_eq!(h.record_len(), e.len);
            let (k, p) = object::decode(&id, &path, &stored, object::Cap::ANY).unwrap();
            assert_eq!((k.name(), &p), (kind, &payload));
            if kind == "snapshot" {
                // A snapshot a reader takes, its two times agreeing.
                crate::snapshot::Checkpoint::parse(&p).unwrap();
            }
            // Write: the same records give the same bytes.
            let rec = pack::encode_record(RecordType::Object, &id, &stored);
            entries.push(IdxEntry {
                id,
                offset: ours.len() as u64,
                len: rec.len() as u64,
            });
            ours.extend_from_slice(&rec);
        }
        assert_eq!(ours, pack_bytes);
        let idx_ours = pack::encode_idx(&mut entries, blake3::hash(&ours).as_bytes());
        assert_eq!(idx_ours, idx_bytes);
        assert!(pack_bytes.len() as u64 > FILE_HEADER);
    }

    #[test]
    fn journal_and_sidecar_are_read_as_specified() {
        let doc = doc();
        let session: SessionId = doc["session"].as_str().unwrap().parse().unwrap();
        let head: ObjectId = doc["head"].as_str().unwrap().parse().unwrap();
        let commit: Value = serde_json::from_str(doc["commit_json"].as_str().unwrap()).unwrap();
        for with_sidecar in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(
                dir.path().join(journal::journal_name(&session)),
                hex(doc["journal_hex"].as_str().unwrap()),
            )
            .unwrap();
            if with_sidecar {
                std::fs::write(
                    dir.path().join(journal::jidx_name(&session)),
                    hex(doc["jidx_hex"].as_str().unwrap()),
                )
                .unwrap();
            }
            let d = Dir::open_path(dir.path()).unwrap();
            let view = journal::open(
                &d,
                &session,
                journal::Mode::Full,
                journal::Rule::Ref(Some(head)),
            )
            .unwrap()
            .unwrap();
            let c = view.head.unwrap();
            assert_eq!(c.head, head);
            assert_eq!(serde_json::to_value(&c.payload).unwrap(), commit);
            assert_eq!(view.objects.len(), 4);
            assert_eq!(view.sidecar_complete, with_sidecar);
            // Our own commit record of that payload is the same record.
            let payload = crate::canonical::to_vec(&commit);
            let ours = pack::encode_record(RecordType::Commit, &head, &payload);
            let journal_bytes = hex(doc["journal_hex"].as_str().unwrap());
            assert!(journal_bytes.ends_with(&ours));
        }
    }
}
