//! Helpers for this crate's integration tests and for tests that build
//! hostile stores: where things live, object encoding, writes that bypass
//! the store's rules (no lock, no lease). Only with the `testing` feature,
//! which only dev-dependencies turn on: hel itself is built without it.

use std::path::{Path, PathBuf};

use crate::{ObjectId, SessionId, Store};

/// Every entry under `dir`, sorted, with a regular file's bytes (a
/// directory's or a link's as empty; no link followed): compared before
/// and after, it tells that nothing was written.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                todo.push(e.path());
            }
            let bytes = if t.is_file() {
                std::fs::read(e.path()).unwrap()
            } else {
                Vec::new()
            };
            out.push((e.path(), bytes));
        }
    }
    out.sort();
    out
}

/// Run `f` with the commits it makes on this thread not admitted
/// (`admit.rs`): how a test builds a checkpoint a load refuses, as a
/// damaged or hostile store would hold it.
pub fn unadmitted<T>(f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            crate::admit::UNADMITTED.with(|u| u.set(false));
        }
    }
    crate::admit::UNADMITTED.with(|u| u.set(true));
    let _reset = Reset;
    f()
}

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

/// Make `store_root` a store of this format where it has no `format`
/// file yet (a store that was made has one before it holds anything a
/// test plants: objects-spec §1.2).
fn formatted(store_root: &Path) {
    let format = store_root.join(crate::layout::FORMAT);
    if !format.exists() {
        let _ = std::fs::create_dir_all(store_root);
        let _ = std::fs::write(
            format,
            format!("hel-store-format {}\n", crate::format::FORMAT_VERSION),
        );
    }
}

/// Store `canonical` (not checked) under its id, as a store (hostile
/// or not) could hold it: a record of one sealed pack that holds every
/// object planted in this store (`pack-planted-<hex>`); returns the id.
pub fn plant(store_root: &Path, canonical: &[u8]) -> ObjectId {
    formatted(store_root);
    crate::repack::plant(store_root, canonical)
}

/// [`plant`] of every object of `canonicals` at once (one rewrite of
/// the planted pack); returns their ids, in order.
pub fn plant_all(store_root: &Path, canonicals: &[Vec<u8>]) -> Vec<ObjectId> {
    let records: Vec<(ObjectId, Vec<u8>)> = canonicals
        .iter()
        .map(|c| {
            let stored = zstd::bulk::compress(c, 3).unwrap_or_default();
            (ObjectId::of_canonical(c), stored)
        })
        .collect();
    let ids = records.iter().map(|(id, _)| *id).collect();
    formatted(store_root);
    crate::repack::plant_records(store_root, records);
    ids
}

/// Store a record of `stored` (compressed bytes, not checked) under
/// `id`, in the pack [`plant`] keeps its objects in: bytes that are not
/// what the name promises, as a hostile store could hold them.
pub fn plant_stored(store_root: &Path, id: &ObjectId, stored: &[u8]) {
    formatted(store_root);
    crate::repack::plant_stored(store_root, id, stored)
}

/// The stored bytes [`plant`] keeps for `id`, if it planted it.
pub fn planted_bytes(store_root: &Path, id: &ObjectId) -> Option<Vec<u8>> {
    crate::repack::planted(store_root)
        .into_iter()
        .find(|(i, _)| i == id)
        .map(|(_, stored)| stored)
}

/// The pack [`plant`] keeps its objects in, if there is one.
pub fn planted_pack(store_root: &Path) -> Option<PathBuf> {
    let stem = crate::repack::planted_stem(store_root)?;
    Some(
        store_root
            .join(crate::layout::PACKS)
            .join(crate::odb::sealed_names(&stem).0),
    )
}

/// Publish `head` as the head of session `session` of the store at
/// `store_root`, whatever it is: the session's journal made with one
/// commit record naming it (its summary the snapshot's when that
/// parses, else empty), then its ref. As a store (hostile or not)
/// could hold it; no lock, no lease.
pub fn publish(store_root: &Path, session: &SessionId, head: &ObjectId) {
    formatted(store_root);
    let project = store_root.parent().unwrap_or(store_root);
    let summary = Store::open(project)
        .ok()
        .and_then(|s| {
            let layout = s.layout_for_gc().ok()??;
            let (_, payload) = crate::read::object(layout, head, crate::Cap::ANY).ok()?;
            let v: serde_json::Value = serde_json::from_slice(&payload).ok()?;
            serde_json::from_value::<crate::Summary>(v.get("summary")?.clone()).ok()
        })
        .unwrap_or_default();
    let journals = store_root
        .join(crate::layout::PACKS)
        .join(crate::layout::JOURNALS);
    let tmp = store_root.join(crate::layout::TMP);
    let _ = std::fs::create_dir_all(&journals);
    let _ = std::fs::create_dir_all(&tmp);
    let (Ok(journals), Ok(tmp)) = (
        crate::dir::Dir::open_path(&journals),
        crate::dir::Dir::open_path(&tmp),
    ) else {
        return;
    };
    let _ = std::fs::remove_file(ref_path(store_root, session));
    let _ = std::fs::remove_file(journals.path().join(crate::journal::journal_name(session)));
    let _ = std::fs::remove_file(journals.path().join(crate::journal::jidx_name(session)));
    let payload = crate::journal::CommitPayload {
        deps: std::collections::BTreeSet::new(),
        parent: None,
        seq: 1,
        session: session.clone(),
        summary,
        time_ms: 1_796_000_000_000,
        why: "planted".into(),
    };
    if let Ok(mut w) =
        crate::journal::Writer::open(&journals, &tmp, session, crate::journal::Rule::Ref(None))
    {
        let _ = w.commit(&[], *head, payload, || Ok(None));
    }
    let refs = ref_path(store_root, session);
    if let Some(dir) = refs.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(refs, format!("{head}\n"));
}

pub fn ref_path(store_root: &Path, session: &SessionId) -> PathBuf {
    store_root
        .join(crate::layout::REFS)
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
        Ok(Some(crate::odb::Found { place, .. })) => place.display_path().display().to_string(),
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
pub fn new_session_with_id(store: &Store, id: &SessionId) -> crate::Result<crate::SessionLease> {
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

/// The bytes of a journal record of blob `payload` (compressed as hel
/// writes objects), its check computed: what a round record is
/// (objects-spec §10.2), or a forged one.
pub fn blob_record(payload: &[u8]) -> Vec<u8> {
    let (id, canonical) = crate::object::encode(crate::object::Kind::Blob, payload);
    let stored = crate::object::compress_canonical(crate::object::Kind::Blob, &id, &canonical)
        .expect("a blob compresses");
    crate::pack::encode_record_raw(1, &id, &stored)
}
