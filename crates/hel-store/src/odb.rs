//! The object database of an open store ([`Odb`]: its [`Layout`] and an
//! [`Index`]): where each object is (a session's journal or a sealed
//! pack) and the bounded read of its record (`read.rs` decodes and
//! verifies it). Journals and packs are opened lazily and kept open; a journal or
//! pack removed by gc stays readable through its open descriptor, and
//! [`Index::forget_removed`] drops it before anything could depend on it.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::dir::Dir;
use crate::error::IoContext;
use crate::journal::{self, View};
use crate::layout::Layout;
use crate::pack::{self, FileKind, Idx, IdxEntry, Place, RecordType};
use crate::{Error, ObjectId, Result, SessionId};

/// A sealed pack, open, with its index.
#[derive(Debug)]
pub(crate) struct Sealed {
    pub name: String,
    pub path: PathBuf,
    pub file: Arc<File>,
    pub idx: Idx,
}

/// A journal shared by the readers of this process and (for the session
/// this process holds) its writer.
pub(crate) type SharedView = Arc<RwLock<View>>;

/// Where an object was found: the record's file, where, and how long.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub file: Arc<File>,
    pub place: Place,
    pub len: u64,
}

#[derive(Default, Debug)]
struct State {
    journals: HashMap<SessionId, SharedView>,
    sealed: Option<Vec<Arc<Sealed>>>,
    /// The journal that held the object last found among them: looked at
    /// first, since a reader takes a session's objects mostly from its own
    /// journal (a search of a thousand sessions has a thousand open).
    last_hit: Option<SessionId>,
}

/// Where each object is: the journals and sealed packs open so far (see
/// the module doc).
#[derive(Default, Debug)]
pub(crate) struct Index {
    state: Mutex<State>,
}

/// An open store's object database: its layout (which it derefs to, so
/// that it is handed wherever a [`Layout`] is) and the [`Index`] of where
/// each object is, shared by everything that reads or writes through it.
/// The layers above this one are handed an `Odb`.
#[derive(Debug)]
pub(crate) struct Odb {
    layout: Layout,
    index: Index,
    /// Objects this process wrote or verified: a writer may dedup against
    /// them without reading them again.
    verified: Mutex<HashSet<ObjectId>>,
    /// While fsck runs: the objects its pass over every file decoded, and
    /// so verified against their ids, kept so that the walk and the loads
    /// after it parse them without reading, decompressing and hashing them
    /// again (snapshots kept parsed; of a blob over 1 MiB only its length,
    /// see [`Kept`]). `None` otherwise.
    memo: Mutex<Option<Memo>>,
    /// While a pull or bundle import checks what it received
    /// (`transfer.rs`): the received objects' stored bytes, not written
    /// yet, which reads take as if stored, so that the check a load makes
    /// runs before anything is written. Never consulted by a writer's
    /// dedup (`Index::locate`). `None` otherwise.
    incoming: Mutex<Option<Arc<Received>>>,
}

/// Received objects by id: their stored (compressed) bytes.
type Received = HashMap<ObjectId, Vec<u8>>;

/// Objects received and read as if stored ([`Odb::receive`]): dropping
/// it forgets them.
#[must_use]
pub(crate) struct Incoming<'a> {
    odb: &'a Odb,
}

impl Drop for Incoming<'_> {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.odb.incoming.lock() {
            *slot = None;
        }
    }
}

/// Decoded objects, bounded by [`MEMO_MAX`] payload bytes in all: past it,
/// objects are read again as usual.
#[derive(Debug, Default)]
struct Memo {
    objects: HashMap<ObjectId, Decoded>,
    bytes: u64,
    /// Objects whose next read is their last: [`Odb::memo_get`] hands
    /// their bytes over instead of a copy, and forgets them.
    last_read: HashSet<ObjectId>,
}

/// One verified object: its kind, its stored length and its payload's
/// (what the caps of a read bound), and what is kept of it.
#[derive(Debug)]
struct Decoded {
    kind: crate::object::Kind,
    stored: u64,
    len: u64,
    kept: Kept,
}

impl Decoded {
    /// Whether a read under `cap` takes this object (else it is read as
    /// usual, which tells why not).
    fn fits(&self, cap: crate::object::Cap) -> bool {
        self.stored <= crate::object::file_max(cap) && self.len <= cap.max
    }
}

/// The payload; for a snapshot that parsed only the parse (fsck reads
/// snapshots as parsed); for a blob over [`MEMO_BLOB_MAX`] only its length
/// (in a session store such a blob is spill, of which fsck checks the
/// length). Keeping the bytes as well would be memory that nothing reads:
/// a read of the bytes goes to the file as usual.
#[derive(Debug)]
enum Kept {
    Payload(Vec<u8>),
    Snapshot(Box<crate::snapshot::Checkpoint>),
    Len,
}

/// The largest blob whose bytes the memo keeps.
const MEMO_BLOB_MAX: u64 = 1 << 20;

/// What the memo may hold: room for the decoded objects of a large store
/// without holding a very large one in memory.
const MEMO_MAX: u64 = 512 << 20;

impl Odb {
    pub fn new(layout: Layout) -> Odb {
        Odb {
            layout,
            index: Index::default(),
            verified: Mutex::new(HashSet::new()),
            memo: Mutex::new(None),
            incoming: Mutex::new(None),
        }
    }

    /// Read `records` (objects received, verified against their ids) as
    /// if stored until the guard returned is dropped.
    pub fn receive(&self, records: &[(ObjectId, Vec<u8>)]) -> Incoming<'_> {
        let map = records.iter().cloned().collect();
        if let Ok(mut slot) = self.incoming.lock() {
            *slot = Some(Arc::new(map));
        }
        Incoming { odb: self }
    }

    /// Object `id` as received ([`Odb::receive`]), decoded under `cap`.
    pub fn incoming_get(
        &self,
        id: &ObjectId,
        cap: crate::object::Cap,
    ) -> Option<Result<(crate::object::Kind, Vec<u8>)>> {
        let map = self.incoming.lock().ok()?.as_ref().map(Arc::clone)?;
        let stored = map.get(id)?;
        let place = Path::new("(received)");
        let decoded = crate::object::decode(id, place, stored, cap).map_err(Error::from);
        if let Ok((kind, payload)) = &decoded {
            // Kept while the memo is on (a pull's check of every received
            // checkpoint reads the nodes they share once each).
            self.memo_put(id, *kind, stored.len() as u64, payload.clone(), None);
        }
        Some(decoded)
    }

    /// Start (`true`) or stop and drop (`false`) keeping decoded objects.
    pub fn set_memo(&self, on: bool) {
        if let Ok(mut m) = self.memo.lock() {
            *m = on.then(Memo::default);
        }
    }

    /// Keep object `id`, decoded from `stored` bytes and verified against
    /// its id by the caller, while the memo is on and has room. The
    /// payload is moved in, not copied: fsck's pass hands over what it
    /// decoded. `snapshot` is the payload parsed by
    /// [`crate::snapshot::Checkpoint::parse`], when it is a snapshot that
    /// parsed: then only the parse is kept, for [`Odb::memo_snapshot`]
    /// (see [`Kept`] for what else is kept of what).
    pub fn memo_put(
        &self,
        id: &ObjectId,
        kind: crate::object::Kind,
        stored: u64,
        mut payload: Vec<u8>,
        snapshot: Option<crate::snapshot::Checkpoint>,
    ) {
        let Ok(mut guard) = self.memo.lock() else {
            return;
        };
        let Some(m) = guard.as_mut() else { return };
        let len = payload.len() as u64;
        if m.bytes + len > MEMO_MAX || m.objects.contains_key(id) {
            return;
        }
        let kept = match snapshot {
            Some(cp) => {
                // Its payload's length stands for what the parse holds.
                m.bytes += len;
                Kept::Snapshot(Box::new(cp))
            }
            None if kind == crate::object::Kind::Blob && len > MEMO_BLOB_MAX => Kept::Len,
            None => {
                m.bytes += len;
                // A streamed decode may have grown its buffer past the
                // payload: kept for the whole run, the slack is not.
                if payload.capacity() - payload.len() > payload.len() / 8 {
                    payload.shrink_to_fit();
                }
                Kept::Payload(payload)
            }
        };
        m.objects.insert(
            *id,
            Decoded {
                kind,
                stored,
                len,
                kept,
            },
        );
    }

    /// Object `id` as kept by [`Odb::memo_put`], when its bytes are kept
    /// and fit `cap` (else it is read as usual, which tells why it does
    /// not): a copy, or the bytes themselves when this is its last read
    /// ([`Odb::memo_read_last`]).
    pub fn memo_get(
        &self,
        id: &ObjectId,
        cap: crate::object::Cap,
    ) -> Option<(crate::object::Kind, Vec<u8>)> {
        let mut guard = self.memo.lock().ok()?;
        let m = guard.as_mut()?;
        let d = m.objects.get(id)?;
        let Kept::Payload(payload) = &d.kept else {
            return None;
        };
        if !d.fits(cap) {
            return None;
        }
        if !m.last_read.remove(id) {
            return Some((d.kind, payload.clone()));
        }
        // Its last read: the bytes themselves.
        let d = m.objects.remove(id)?;
        m.bytes = m.bytes.saturating_sub(d.len);
        match d.kept {
            Kept::Payload(payload) => Some((d.kind, payload)),
            _ => None,
        }
    }

    /// Say which kept objects will be read once more at most: the next
    /// [`Odb::memo_get`] of each takes its bytes out of the memo (a read
    /// after that goes to the file as usual, and verifies again).
    pub fn memo_read_last(&self, ids: HashSet<ObjectId>) {
        if let Ok(mut guard) = self.memo.lock() {
            if let Some(m) = guard.as_mut() {
                m.last_read = ids;
            }
        }
    }

    /// The kind and payload length of object `id` as kept by
    /// [`Odb::memo_put`], when it fits `cap`: what a check of its size
    /// needs, without a copy of its bytes.
    pub fn memo_len(
        &self,
        id: &ObjectId,
        cap: crate::object::Cap,
    ) -> Option<(crate::object::Kind, u64)> {
        let guard = self.memo.lock().ok()?;
        let d = guard.as_ref()?.objects.get(id)?;
        d.fits(cap).then_some((d.kind, d.len))
    }

    /// Snapshot `id` as parsed when kept by [`Odb::memo_put`], when it is
    /// within what a read of a snapshot takes (else it is read as usual,
    /// which tells why it does not parse).
    pub fn memo_snapshot(&self, id: &ObjectId) -> Option<crate::snapshot::Checkpoint> {
        use crate::object::{Cap, Kind};
        let guard = self.memo.lock().ok()?;
        let d = guard.as_ref()?.objects.get(id)?;
        match &d.kept {
            Kept::Snapshot(cp) if d.kind == Kind::Snapshot && d.fits(Cap::SNAPSHOT) => {
                Some((**cp).clone())
            }
            _ => None,
        }
    }

    pub fn index(&self) -> &Index {
        &self.index
    }

    pub fn is_verified(&self, id: &ObjectId) -> bool {
        self.verified
            .lock()
            .map(|set| set.contains(id))
            .unwrap_or(false)
    }

    /// Where object `id` lives, for messages: its pack and offset when a
    /// journal or pack this process opened holds it, else `packs/`.
    pub fn object_path(&self, id: &ObjectId) -> PathBuf {
        if let Ok(Some(Found { place, .. })) = self.index.locate_open(self, id) {
            return place.display_path();
        }
        self.packs_path()
    }

    pub fn set_verified(&self, id: ObjectId) {
        if let Ok(mut set) = self.verified.lock() {
            set.insert(id);
        }
    }
}

impl std::ops::Deref for Odb {
    type Target = Layout;
    fn deref(&self) -> &Layout {
        &self.layout
    }
}

impl AsRef<Layout> for Odb {
    fn as_ref(&self) -> &Layout {
        &self.layout
    }
}

/// The name of a sealed pack's files: `pack-<hex>.pack` and `.idx`.
pub(crate) fn sealed_names(stem: &str) -> (String, String) {
    (format!("{stem}.pack"), format!("{stem}.idx"))
}

/// The most bytes a pack index may have (a million objects).
const IDX_MAX: u64 = 16 + 1024 + 48 * (1 << 20) + 64;

fn open_sealed(dir: &Dir, stem: &str) -> Result<Sealed> {
    let (pack_name, idx_name) = sealed_names(stem);
    let path = dir.child_path(&pack_name);
    let file = dir.open_file(&pack_name)?.ok_or_else(|| Error::Io {
        path: path.clone(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "pack vanished"),
    })?;
    let idx_path = dir.child_path(&idx_name);
    let idx_file = dir.open_file(&idx_name)?.ok_or_else(|| Error::Io {
        path: idx_path.clone(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "pack index missing"),
    })?;
    let bytes = pack::read_all(&idx_file, IDX_MAX, &idx_path)?;
    let idx = Idx::parse(&bytes).map_err(|e| Error::DamagedRecord {
        pack: idx_path.clone(),
        offset: 0,
        id: None,
        reason: e.to_string(),
    })?;
    let mut fh = [0u8; pack::FILE_HEADER as usize];
    use std::os::unix::fs::FileExt;
    file.read_exact_at(&mut fh, 0).at(&path)?;
    pack::check_file_header(&fh, FileKind::Sealed).map_err(|r| Error::DamagedRecord {
        pack: path.clone(),
        offset: 0,
        id: None,
        reason: r.to_string(),
    })?;
    Ok(Sealed {
        name: stem.to_owned(),
        path,
        file: Arc::new(file),
        idx,
    })
}

/// The stems of the sealed packs in `dir` (names `pack-<hex>.pack`).
pub(crate) fn sealed_stems(dir: &Dir) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in dir.entries()? {
        if e.kind != crate::dir::Kind::File {
            continue;
        }
        if let Some(stem) = e
            .name_str()
            .and_then(|n| n.strip_suffix(".pack"))
            .filter(|s| s.starts_with("pack-"))
        {
            out.push(stem.to_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// The indexes in `dir` without their pack (`pack-<hex>.idx` with no
/// `.pack`): what a repack killed between its two renames, or a gc killed
/// between its two removes, leaves. No reader sees them (readers list
/// packs); the next gc removes them.
pub(crate) fn lone_indexes(dir: &Dir) -> Result<Vec<String>> {
    let stems = sealed_stems(dir)?;
    let mut out = Vec::new();
    for e in dir.entries()? {
        if e.kind != crate::dir::Kind::File {
            continue;
        }
        if let Some(name) = e.name_str().filter(|n| {
            n.strip_suffix(".idx")
                .filter(|s| s.starts_with("pack-"))
                .is_some_and(|s| stems.binary_search_by(|t| t.as_str().cmp(s)).is_err())
        }) {
            out.push(name.to_owned());
        }
    }
    out.sort();
    Ok(out)
}

fn unlinked(file: &File) -> bool {
    file.metadata().map(|m| m.nlink() == 0).unwrap_or(true)
}

impl Index {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The journal of `session` (its full view, its head chosen by the
    /// store's rule: see [`rule`]), opened if need be; `None` when it has
    /// none.
    pub fn journal(&self, layout: &Layout, session: &SessionId) -> Result<Option<SharedView>> {
        if let Some(v) = self.lock().journals.get(session).cloned() {
            // Another process may have appended since, or moved the ref
            // over records this view read as unpublished: read it again
            // then. (A ref moves only after its journal grew, so a view
            // with nothing past its committed part needs no look at it.)
            let current = {
                let view = v.read().unwrap_or_else(|p| p.into_inner());
                match view.seen_size {
                    None => true,
                    Some(seen) => {
                        view.file.metadata().map(|m| m.len()).ok() == Some(seen)
                            && (view.committed == seen || rule(layout, session) == view.rule)
                    }
                }
            };
            if current {
                return Ok(Some(v));
            }
        }
        let Some(dir) = layout.journals()? else {
            return Ok(None);
        };
        let opened = journal::open_by_ref(
            dir,
            session,
            journal::Mode::Full,
            published(layout, session),
            &|| Ok(published(layout, session)),
        )?;
        let Some(view) = opened else {
            return Ok(None);
        };
        let shared = Arc::new(RwLock::new(view));
        let mut st = self.lock();
        match st.journals.get(session) {
            // This process's writer came first: its view is current.
            Some(v)
                if v.read()
                    .unwrap_or_else(|p| p.into_inner())
                    .seen_size
                    .is_none() =>
            {
                Ok(Some(Arc::clone(v)))
            }
            _ => {
                st.journals.insert(session.clone(), Arc::clone(&shared));
                Ok(Some(shared))
            }
        }
    }

    /// Make `view` the journal of its session (a writer's, shared).
    pub fn adopt(&self, view: SharedView) {
        let session = view
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .session
            .clone();
        self.lock().journals.insert(session, view);
    }

    /// Drop journals and packs that were removed (by gc or a delete in
    /// another process) so nothing new depends on them; the caller holds
    /// the shared store lock, so nothing is removed while it works.
    pub fn forget_removed(&self) {
        let mut st = self.lock();
        st.journals.retain(|_, v| {
            let v = v.read().unwrap_or_else(|p| p.into_inner());
            !unlinked(&v.file)
        });
        let gone = st
            .sealed
            .as_ref()
            .is_some_and(|packs| packs.iter().any(|p| unlinked(&p.file)));
        if gone {
            st.sealed = None;
        }
    }

    fn sealed(&self, layout: &Layout, reload: bool) -> Result<Vec<Arc<Sealed>>> {
        if !reload {
            if let Some(s) = &self.lock().sealed {
                return Ok(s.clone());
            }
        }
        let Some(dir) = layout.packs()? else {
            self.lock().sealed = Some(Vec::new());
            return Ok(Vec::new());
        };
        // A gc in another process may replace packs between the listing and
        // the opening: list again then, as git does.
        let mut attempt = 0;
        let packs = loop {
            let mut packs = Vec::new();
            let mut vanished = false;
            for stem in sealed_stems(dir)? {
                match open_sealed(dir, &stem) {
                    Ok(p) => packs.push(Arc::new(p)),
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound && attempt < 10 =>
                    {
                        vanished = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if !vanished {
                break packs;
            }
            attempt += 1;
        };
        self.lock().sealed = Some(packs.clone());
        Ok(packs)
    }

    /// Where `id` is among what is open (journals opened so far, sealed
    /// packs).
    fn find_open(&self, layout: &Layout, id: &ObjectId, reload: bool) -> Result<Option<Found>> {
        let in_view = |j: &SharedView| {
            let v = j.read().unwrap_or_else(|p| p.into_inner());
            v.objects.get(id).map(|(offset, len)| {
                let found = Found {
                    file: Arc::clone(&v.file),
                    place: Place {
                        path: v.path.clone(),
                        offset: *offset,
                    },
                    len: *len,
                };
                (found, v.session.clone())
            })
        };
        let hinted = {
            let st = self.lock();
            st.last_hit
                .as_ref()
                .and_then(|s| st.journals.get(s).cloned())
        };
        if let Some((found, _)) = hinted.as_ref().and_then(in_view) {
            return Ok(Some(found));
        }
        let journals: Vec<SharedView> = self.lock().journals.values().cloned().collect();
        for j in journals {
            if hinted.as_ref().is_some_and(|h| Arc::ptr_eq(h, &j)) {
                continue; // looked in above
            }
            if let Some((found, session)) = in_view(&j) {
                self.lock().last_hit = Some(session);
                return Ok(Some(found));
            }
        }
        for p in self.sealed(layout, reload)? {
            if let Some(IdxEntry { offset, len, .. }) = p.idx.find(id) {
                return Ok(Some(Found {
                    file: Arc::clone(&p.file),
                    place: Place {
                        path: p.path.clone(),
                        offset: *offset,
                    },
                    len: *len,
                }));
            }
        }
        Ok(None)
    }

    /// Where `id` is: among what is open, then (when it is not there) in
    /// packs made since and in every session's journal, and last among
    /// the records no ref publishes (what gc copies out of a journal
    /// without a ref before it removes it).
    pub fn locate(&self, layout: &Layout, id: &ObjectId) -> Result<Option<Found>> {
        if let Some(f) = self.find_open(layout, id, false)? {
            return Ok(Some(f));
        }
        if let Some(f) = self.search_all(layout, id)? {
            return Ok(Some(f));
        }
        if let Some(f) = self.find_unpublished(id) {
            return Ok(Some(f));
        }
        if layout.lock_held() {
            return Ok(None);
        }
        // A reader that takes no lock can list packs while a gc in another
        // process swaps them, and see neither the old nor the new: wait for
        // any gc to finish (the shared lock), and look once more.
        let _settled = crate::lock::Shared::take(layout)?;
        self.search_all(layout, id)
    }

    /// `id` among the records past the committed part of the journals
    /// open: readable, never shared (a writer's dedup never looks here).
    fn find_unpublished(&self, id: &ObjectId) -> Option<Found> {
        let journals: Vec<SharedView> = self.lock().journals.values().cloned().collect();
        for j in journals {
            let v = j.read().unwrap_or_else(|p| p.into_inner());
            if let Some((offset, len)) = v.unpublished.get(id) {
                return Some(Found {
                    file: Arc::clone(&v.file),
                    place: Place {
                        path: v.path.clone(),
                        offset: *offset,
                    },
                    len: *len,
                });
            }
        }
        None
    }

    fn search_all(&self, layout: &Layout, id: &ObjectId) -> Result<Option<Found>> {
        // Journals this process has not opened yet (sessions made since, or
        // never needed) or that grew since it read them: open or read them
        // again, then look again, packs too.
        if let Some(dir) = layout.journals()? {
            for e in dir.entries()? {
                let Some(Ok(session)) = e
                    .name_str()
                    .and_then(|n| n.strip_suffix(&format!(".{}", journal::JOURNAL_EXT)))
                    .map(str::parse::<SessionId>)
                else {
                    continue;
                };
                // Opened if new, read again if it grew since.
                match self.journal(layout, &session) {
                    Ok(_) => {}
                    // Deleted since the listing: nothing to find there.
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.find_open(layout, id, true)
    }

    /// Where `id` is without opening anything new (a writer's dedup check,
    /// which must only depend on what it already tracks).
    pub fn locate_open(&self, layout: &Layout, id: &ObjectId) -> Result<Option<Found>> {
        self.find_open(layout, id, false)
    }

    /// The session whose journal holds `id`, if a journal does (`own`
    /// first).
    pub fn journal_of(&self, id: &ObjectId, own: &SessionId) -> Option<SessionId> {
        let st = self.lock();
        if let Some(j) = st.journals.get(own) {
            if j.read()
                .unwrap_or_else(|p| p.into_inner())
                .objects
                .contains_key(id)
            {
                return Some(own.clone());
            }
        }
        for (s, j) in &st.journals {
            if j.read()
                .unwrap_or_else(|p| p.into_inner())
                .objects
                .contains_key(id)
            {
                return Some(s.clone());
            }
        }
        None
    }

    /// The journals open so far (gc's mark indexes them once, under the
    /// store lock, instead of asking each of them for every object).
    pub fn open_journals(&self) -> Vec<SharedView> {
        self.lock().journals.values().cloned().collect()
    }

    /// Every sealed pack (for gc and fsck), reloaded.
    pub fn all_sealed(&self, layout: &Layout) -> Result<Vec<Arc<Sealed>>> {
        self.sealed(layout, true)
    }
}

/// What `session`'s ref names, for choosing its journal's head: a ref that
/// cannot be read counts as none (nothing of the journal is published to
/// lookups; the reader of the session's head reports the ref itself).
///
/// A session in the trash has no ref: its trash entry's head stands for
/// it (objects-spec §8.2), so that its journal reads as it did (for the
/// forks that depend on it, and for gc's mark).
pub(crate) fn published(layout: &Layout, session: &SessionId) -> Option<ObjectId> {
    match crate::refs::read(layout, session) {
        Ok(Some(id)) => Some(id),
        Ok(None) => crate::trashed::read(layout, session)
            .ok()
            .flatten()
            .map(|e| e.head),
        Err(_) => None,
    }
}

/// The rule that chooses the head of `session`'s journal: its ref.
pub(crate) fn rule(layout: &Layout, session: &SessionId) -> journal::Rule {
    journal::Rule::Ref(published(layout, session))
}

/// Read the record of object `id` found by [`Index::locate`] (its place and
/// length from an index) in one positioned read, refusing more than `max`
/// stored bytes. Returns the record's bytes; its stored bytes start at
/// [`pack::RECORD_HEADER`]. The header must name `id` as an object record
/// of that length; the record's check is not computed, because the caller
/// decodes the object and verifies its id, which proves more.
pub(crate) fn read_found(
    file: &File,
    place: &Place,
    len: u64,
    id: &ObjectId,
    max: u64,
) -> Result<Vec<u8>> {
    if len < pack::RECORD_HEADER {
        return Err(pack::damaged(place, Some(id), "the index gives it no room"));
    }
    if len - pack::RECORD_HEADER > max {
        return Err(pack::damaged(
            place,
            Some(id),
            format!(
                "it would hold {} stored bytes, over the {max} it may have",
                len - pack::RECORD_HEADER
            ),
        ));
    }
    let mut buf: Vec<u8> = Vec::with_capacity(len as usize);
    while (buf.len() as u64) < len {
        let at = place.offset + buf.len() as u64;
        // Reads into the spare capacity only, so never past `len`.
        let got = rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at)
            .map_err(|e| pack::damaged(place, Some(id), format!("cannot read it: {e}")))?;
        if got == 0 {
            return Err(pack::damaged(place, Some(id), "the file ends inside it"));
        }
    }
    let h = pack::parse_header(&buf).map_err(|r| pack::damaged(place, Some(id), r.to_string()))?;
    if h.id != *id || h.rtype != RecordType::Object || h.record_len() != len {
        return Err(pack::damaged(
            place,
            Some(id),
            "the index and the record disagree",
        ));
    }
    Ok(buf)
}

/// The error to report when the object in `record` failed to decode: a
/// record that fails its own check is torn or damaged in its pack, which
/// says more than "content does not match its id".
pub(crate) fn explain_damage(e: Error, record: &[u8], place: &Place, id: &ObjectId) -> Error {
    if pack::check_matches(record) {
        e
    } else {
        pack::damaged(
            place,
            Some(id),
            "its check does not match (torn or damaged)",
        )
    }
}
