//! Garbage collection: mark everything reachable from every ref (every
//! session's head), sweep the rest: rewrite sealed packs into one sealed
//! pack when anything there is dead, and remove journals
//! no ref publishes once what refs reach of them is in that pack.
//!
//! Spill working copies (`sessions/<id>/spill/`) are a cache of spill
//! blobs for the instance that holds the session: gc removes them from
//! sessions whose lease is free.
//!
//! Safety against concurrent commits of other sessions: gc holds
//! the store lock (`.store.lock`) exclusively from before the mark until after the sweep,
//! and every writer of objects holds it shared from before it checks
//! whether an object exists until after its ref has moved. So a commit that
//! reuses an existing object either finished before the mark (its ref
//! reaches the object, which is marked) or starts after the sweep (it sees
//! the object gone and writes it again). Because of the same lock, every
//! file in `tmp/` during a gc belongs to a write that died: it is removed.
//!
//! The mark validates what it reads (snapshots, list node shapes, counts
//! and slice bounds: the same checks a load makes); gc refuses to sweep
//! when anything reachable cannot be read or validated, since it cannot
//! know then what a broken object would have kept alive. Nothing is ever
//! deleted through a link. Only sealed packs and journals no ref
//! publishes hold objects gc may remove (live journals stay whole):
//! when there are none, gc does not mark, and reads only each head's
//! snapshot (fsck is the full check).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::dir::Kind as EntryKind;
use crate::layout::SPILL;
use crate::list::{self, Shapes};
use crate::lock::{Exclusive, SessionLease};
use crate::object::Cap;
use crate::odb::{Found, Odb};
use crate::pack::Place;
use crate::snapshot::Spill;
use crate::trashed::{self, Entry};
use crate::tree::EntryKind as EntryKindT;
use crate::{heads, Error, ObjectId, Result, SessionId, Store};

/// What a gc did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GcReport {
    pub dry_run: bool,
    pub objects_kept: u64,
    pub objects_removed: u64,
    pub bytes_removed: u64,
    pub tmp_files_removed: u64,
    pub sessions_removed: Vec<SessionId>,
    /// Spill working copies of idle sessions removed (their blobs stay).
    pub spill_dirs_removed: u64,
    /// Sealed packs written.
    pub packs_written: u64,
    /// Journals of deleted sessions removed.
    pub journals_removed: u64,
    /// Names of sessions that no longer exist, forgotten.
    pub names_removed: u64,
}

/// What a mark found.
#[derive(Default)]
pub(crate) struct Marked {
    pub reachable: HashSet<ObjectId>,
    /// Every snapshot reached.
    pub snapshots: Vec<ObjectId>,
    /// The shapes of every list node reached.
    pub shapes: Shapes,
    /// Blobs that hold messages.
    pub message_blobs: HashSet<ObjectId>,
    /// Blobs that hold JSON of a known use (request config, cursors).
    pub json_blobs: Vec<(ObjectId, Cap)>,
    /// Spill blobs with the size a snapshot gives each (a blob twice when
    /// snapshots disagree on its size).
    pub spill: HashSet<(ObjectId, u64)>,
    /// Trees reached (each read and validated).
    pub trees: u64,
    /// The root trees records name (`workspace.tree` and `start`; one may
    /// be listed more than once): what fsck and transfers check against
    /// the flattening limits.
    pub workspace_roots: Vec<ObjectId>,
    /// Records that say their tree could not record some paths: (the
    /// snapshot, its `workspace.tree`, its `workspace.not_tracked`).
    pub not_tracked: Vec<(ObjectId, ObjectId, u64)>,
    /// Each blob a tree's file or symlink entry names, with the size the
    /// entry gives it, and one such entry: (tree, entry name). fsck
    /// compares the size with the blob's length (objects-spec §10.1).
    pub sized: HashMap<(ObjectId, u64), (ObjectId, Vec<u8>)>,
}

/// Where each object of the journals open and of the sealed packs is,
/// taken once when a mark starts: a lookup is then one probe, where
/// [`crate::odb::Index::locate`] asks every open journal in turn (a mark
/// of a store of 500 sessions spent half its time there). Records never
/// change once written and an open file stays readable after gc removes
/// it, so a place taken here stays right; what is not here (a record no
/// ref publishes, a journal opened since) is located as any
/// read locates it. Every object is still read and verified at its place.
#[derive(Default)]
struct Places {
    files: Vec<(Arc<File>, PathBuf)>,
    /// id → (index in `files`, offset, record length).
    at: HashMap<ObjectId, (usize, u64, u64)>,
}

impl Places {
    fn new(layout: &Odb) -> Result<Places> {
        let mut p = Places::default();
        for s in layout.index().all_sealed(layout)? {
            let k = p.files.len();
            p.files.push((Arc::clone(&s.file), s.path.clone()));
            for e in &s.idx.entries {
                p.at.entry(e.id).or_insert((k, e.offset, e.len));
            }
        }
        // Journals after packs, and first (as `locate` looks).
        for j in layout.index().open_journals() {
            let v = j.read().unwrap_or_else(|p| p.into_inner());
            let k = p.files.len();
            p.files.push((Arc::clone(&v.file), v.path.clone()));
            for (id, (offset, len)) in &v.objects {
                p.at.insert(*id, (k, *offset, *len));
            }
        }
        Ok(p)
    }

    fn find(&self, id: &ObjectId) -> Option<Found> {
        let (k, offset, len) = *self.at.get(id)?;
        let (file, path) = &self.files[k];
        Some(Found {
            file: Arc::clone(file),
            place: Place {
                path: path.clone(),
                offset,
            },
            len,
        })
    }
}

/// Every object reachable from `roots` (snapshot ids): snapshots through
/// their parents, their config, cursor and spill map blobs, the spill
/// blobs those name, their list chains,
/// what list items name (blobs, and the items of sliced nodes), and their
/// workspace trees with the blobs those name. Every
/// snapshot and node is validated as it is read, and counts and slice
/// bounds are checked at the end. Errors go to `on_error`; the walk goes
/// on past them (fsck) or the caller aborts on the first (gc). Iterative:
/// no recursion as deep as what a store holds.
pub(crate) fn mark(
    layout: &Odb,
    roots: &[ObjectId],
    on_error: &mut dyn FnMut(Error) -> Result<()>,
) -> Result<Marked> {
    let mut walk = Walk {
        layout,
        places: Places::new(layout)?,
        m: Marked::default(),
        nodes: Vec::new(),
        nodes_seen: HashSet::new(),
        maps_seen: HashSet::new(),
        trees: Vec::new(),
    };
    let mut snapshots: Vec<ObjectId> = roots.to_vec();
    while let Some(id) = snapshots.pop() {
        if !walk.m.reachable.insert(id) {
            continue;
        }
        walk.m.snapshots.push(id);
        let read = match walk.places.find(&id) {
            Some(found) => crate::read::snapshot_at(layout, &id, &found),
            None => crate::read::snapshot(layout, &id),
        };
        let cp = match read {
            Ok(cp) => cp,
            Err(e) => {
                on_error(e)?;
                continue;
            }
        };
        snapshots.extend(cp.parents.iter().copied());
        walk.snapshot(id, &cp, on_error)?;
    }
    walk.m.shapes.check(layout, on_error)?;
    Ok(walk.m)
}

/// A [`mark`] under way: what it found, and its work lists (stacks, never
/// recursion: a hostile store cannot make a walk deeper than memory).
struct Walk<'a> {
    layout: &'a Odb,
    places: Places,
    m: Marked,
    nodes: Vec<ObjectId>,
    nodes_seen: HashSet<ObjectId>,
    maps_seen: HashSet<ObjectId>,
    trees: Vec<ObjectId>,
}

impl Walk<'_> {
    /// What snapshot `id`, read as `cp`, names: its JSON blobs, its spill
    /// map and the blobs it names, its workspace trees, its list.
    fn snapshot(
        &mut self,
        id: ObjectId,
        cp: &crate::snapshot::Checkpoint,
        on_error: &mut dyn FnMut(Error) -> Result<()>,
    ) -> Result<()> {
        for (blob, cap) in [(cp.request_config, Cap::CONFIG), (cp.cursors, Cap::CURSORS)] {
            if self.m.reachable.insert(blob) {
                self.m.json_blobs.push((blob, cap));
            }
        }
        self.spill(cp, on_error)?;
        if let Some(ws) = &cp.workspace {
            if ws.not_tracked > 0 {
                self.m.not_tracked.push((id, ws.tree, ws.not_tracked));
            }
            self.m
                .workspace_roots
                .extend(std::iter::once(ws.tree).chain(ws.start));
            self.trees.extend(std::iter::once(ws.tree).chain(ws.start));
        }
        self.walk_trees(on_error)?;
        if let Some(root) = cp.messages.root {
            if self.nodes_seen.insert(root) {
                self.nodes.push(root);
            }
        }
        self.walk_nodes(on_error)
    }

    /// The spill map of `cp` and the blobs it names. A spill map blob is
    /// shared by every checkpoint until the next spill: read once. Its own
    /// set, not `reachable`: the same bytes may be reached as another blob
    /// first (a config), and its entries must still be marked.
    fn spill(
        &mut self,
        cp: &crate::snapshot::Checkpoint,
        on_error: &mut dyn FnMut(Error) -> Result<()>,
    ) -> Result<()> {
        let read;
        let entries = match &cp.spill {
            Spill::Inline(map) => Some(map),
            Spill::Blob(map) => {
                self.m.reachable.insert(*map);
                if !self.maps_seen.insert(*map) {
                    None
                } else {
                    let at = self.places.find(map);
                    match crate::read::spill_map_at(self.layout, cp, at.as_ref()) {
                        Ok(map) => {
                            read = map;
                            Some(&read)
                        }
                        Err(e) => {
                            on_error(e)?;
                            None
                        }
                    }
                }
            }
        };
        for s in entries.iter().flat_map(|map| map.values()) {
            self.m.reachable.insert(s.blob);
            self.m.spill.insert((s.blob, s.size));
        }
        Ok(())
    }

    /// Every tree on the work list and what it names.
    fn walk_trees(&mut self, on_error: &mut dyn FnMut(Error) -> Result<()>) -> Result<()> {
        while let Some(tid) = self.trees.pop() {
            if !self.m.reachable.insert(tid) {
                continue;
            }
            let read = match self.places.find(&tid) {
                Some(found) => crate::read::tree_at(self.layout, &tid, &found),
                None => crate::read::tree(self.layout, &tid),
            };
            let t = match read {
                Ok(t) => t,
                Err(e) => {
                    on_error(e)?;
                    continue;
                }
            };
            self.m.trees += 1;
            for e in t.entries {
                match e.kind {
                    EntryKindT::Dir => self.trees.push(e.id),
                    EntryKindT::File | EntryKindT::Symlink => {
                        self.m.reachable.insert(e.id);
                        self.m.sized.entry((e.id, e.size)).or_insert((tid, e.name));
                    }
                    EntryKindT::NotTracked | EntryKindT::Repository | EntryKindT::NotTrackedDir => {
                    }
                }
            }
        }
        Ok(())
    }

    /// Every list node on the work list, its blobs, and the nodes it names.
    fn walk_nodes(&mut self, on_error: &mut dyn FnMut(Error) -> Result<()>) -> Result<()> {
        while let Some(nid) = self.nodes.pop() {
            self.m.reachable.insert(nid);
            let read = match self.places.find(&nid) {
                Some(found) => list::read_shape_at(self.layout, &nid, &found),
                None => list::read_shape(self.layout, &nid),
            };
            let shape = match read {
                Ok(s) => s,
                Err(e) => {
                    on_error(e)?;
                    continue;
                }
            };
            for b in &shape.blobs {
                self.m.reachable.insert(*b);
                self.m.message_blobs.insert(*b);
            }
            let next = shape
                .prev
                .iter()
                .chain(shape.slices.iter().map(|(s, _, _)| s));
            for n in next {
                if self.nodes_seen.insert(*n) {
                    self.nodes.push(*n);
                }
            }
            self.m.shapes.nodes.insert(nid, shape);
        }
        Ok(())
    }
}

/// The sessions whose journals hold (in their committed parts) something
/// snapshot `at` reaches: what a fork of `at` depends on when `at`'s
/// session has no head to say so (it was deleted). A walk of everything
/// `at` reaches ([`mark`]: it fails, naming the object, where a load or
/// gc would).
pub(crate) fn journals_reached(
    layout: &Odb,
    at: &ObjectId,
    session: &SessionId,
) -> Result<BTreeSet<SessionId>> {
    let reached = mark(layout, &[*at], &mut |e| Err(e))?.reachable;
    let mut out = BTreeSet::new();
    for id in &reached {
        // Opens the journals the walk did not (those of blobs only).
        if let Some(crate::odb::Found { .. }) = layout.index().locate(layout, id)? {
            out.extend(layout.index().journal_of(id, session));
        }
    }
    Ok(out)
}

/// The heads of a store as gc and fsck read them: the roots (each with
/// its head's `deps`), and errors for everything where heads are kept that is not a readable head, and
/// for every journal this hel may not write (a fault, or records of a
/// newer hel, which may name objects this hel cannot see), with a ref or
/// without.
pub(crate) fn roots(
    layout: &Odb,
    on_error: &mut dyn FnMut(Error) -> Result<()>,
) -> Result<Vec<(SessionId, ObjectId, BTreeSet<SessionId>)>> {
    let listing = heads::list(layout)?;
    for (path, what) in listing.strays {
        on_error(Error::Unexpected {
            path,
            found: if what == "regular file" {
                "file not named by a session id"
            } else {
                what
            },
            expected: "session ref or journal",
        })?;
    }
    // A journal no ref publishes is no session, but gc copies from it and
    // removes it: it must read whole, and hold nothing of a newer hel.
    for session in heads::orphans(layout)? {
        if let Err(e) = heads::writable(layout, &session) {
            on_error(e)?;
        }
    }
    let mut out = Vec::new();
    for session in listing.sessions {
        match heads::read(layout, &session) {
            Ok(head) => {
                if let Err(e) = heads::writable(layout, &session) {
                    on_error(e)?;
                }
                if let Some(head) = head {
                    let deps = head.deps();
                    out.push((session, head.id, deps));
                }
            }
            Err(e) => on_error(e)?,
        }
    }
    // Sessions in the trash reach what they reach until they expire.
    out.extend(trash_roots(layout, true, on_error)?);
    Ok(out)
}

/// What deleting a session's journal did.
#[derive(Debug, Default)]
pub(crate) struct Released {
    pub bytes: u64,
    /// Objects that went with the journal.
    pub objects: u64,
    /// Objects other sessions still needed, copied into a sealed pack.
    pub copied: u64,
}

/// Remove `session`'s head and journal (the caller holds its lease and the
/// store lock exclusively); `own_deps` are its head's deps, whose records
/// of it go after the head. Sessions that depend on the journal (forks,
/// shared large objects) keep what they need: it is copied into a sealed
/// pack first. Without dependents this is an unlink: the journal's bytes
/// come back at once without a walk of the store.
pub(crate) fn release(
    layout: &Odb,
    lock: &Exclusive<'_, Odb>,
    session: &SessionId,
    own_deps: &BTreeSet<SessionId>,
) -> Result<Released> {
    let mut out = Released::default();
    let view = layout.index().journal(layout, session)?;
    if let Some(view) = &view {
        let mut dependents = Vec::new();
        for s in depending_on(layout, session)? {
            if let Some(h) = heads::read_any(layout, &s)? {
                dependents.push(h.id);
            }
        }
        let (objects, size): (Vec<ObjectId>, u64) = {
            let v = view.read().unwrap_or_else(|p| p.into_inner());
            (
                // Those no ref publishes too: a dependent may name them.
                v.objects
                    .keys()
                    .chain(v.unpublished.keys())
                    .copied()
                    .collect(),
                v.file.metadata().map(|m| m.len()).unwrap_or(0),
            )
        };
        out.bytes = size;
        out.objects = objects.len() as u64;
        if !dependents.is_empty() {
            let live = mark(layout, &dependents, &mut |e| Err(e))?.reachable;
            let keep: Vec<ObjectId> = objects.into_iter().filter(|id| live.contains(id)).collect();
            if !keep.is_empty() {
                out.copied = keep.len() as u64;
                out.objects -= out.copied;
                let (_, written) = crate::repack::write_sealed(layout, lock, &keep)?;
                out.bytes = out.bytes.saturating_sub(written);
            }
        }
    }
    heads::remove(layout, session)?;
    crate::dependents::forget(layout, session, own_deps);
    layout.index().forget_removed();
    Ok(out)
}

/// The sessions whose head's commit record says they depend on
/// `session`'s journal (its forks, and sessions that share its large
/// objects). Only the heads its records name are read (those recorded as
/// its dependents and those not recorded at all: `dependents.rs`). Many
/// reads share a few threads, since each is a handful of small file reads
/// and a delete waits on all of them. Any head that cannot be read is the
/// error: a delete cannot know then what that session needs.
fn depending_on(layout: &Odb, session: &SessionId) -> Result<Vec<SessionId>> {
    // Sessions in the trash too: their journals and what they name stay
    // until they expire.
    let mut others: Vec<SessionId> = heads::list(layout)?
        .sessions
        .into_iter()
        .chain(crate::trashed::list(layout)?.sessions)
        .filter(|s| s != session)
        .collect();
    others.sort();
    others.dedup();
    let others = crate::dependents::candidates(layout, session, &others)?;
    let depends = |s: &SessionId| -> Result<bool> {
        let head = match heads::read_light(layout, s)? {
            Some(h) => Some(h),
            None if crate::trashed::has_any(layout, s)? => heads::read_trashed(layout, s)?,
            None => None,
        };
        Ok(head.is_some_and(|h| h.deps().contains(session)))
    };
    let verdicts = crate::par::map(&others, depends)
        .into_iter()
        .collect::<Result<Vec<bool>>>()?;
    Ok(others
        .into_iter()
        .zip(verdicts)
        .filter_map(|(s, d)| d.then_some(s))
        .collect())
}

/// `Ok` when every record of sealed pack `p`, walked header by header from
/// its file header to its end, is an object record: gc may then rewrite
/// and remove it. A record of another type is a newer hel's
/// ([`Error::NewerPack`]); a header that does not frame, or a pack that
/// does not end where its last record does, is damage gc cannot see past.
fn known_records(p: &crate::odb::Sealed) -> Result<()> {
    use crate::pack::{self, RecordType, FILE_HEADER, RECORD_HEADER};
    use std::os::unix::fs::FileExt;
    let size = p.file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut at = FILE_HEADER;
    let mut hb = [0u8; RECORD_HEADER as usize];
    while at < size {
        let place = pack::Place {
            path: p.path.clone(),
            offset: at,
        };
        let framed = if size - at < RECORD_HEADER {
            Err("the pack ends inside a record header".to_owned())
        } else {
            p.file
                .read_exact_at(&mut hb, at)
                .map_err(|e| format!("cannot read it: {e}"))
                .and_then(|()| pack::parse_frame(&hb).map_err(|e| e.to_string()))
        };
        let frame = framed.map_err(|why| pack::damaged(&place, None, why))?;
        if frame.rtype != RecordType::Object as u8 {
            return Err(Error::NewerPack {
                path: p.path.clone(),
                offset: at,
                rtype: frame.rtype,
            });
        }
        if frame.record_len() > size - at {
            return Err(pack::damaged(
                &place,
                Some(&frame.id),
                "its length runs past the end of the pack",
            ));
        }
        at += frame.record_len();
    }
    Ok(())
}

impl Store {
    /// Delete `session`: its head and working directory. Refused while the
    /// session is in use. Objects other sessions still need (forks, shared
    /// large objects) are first copied into a sealed pack (durable), then
    /// the ref goes (synced: from here on there is no session), then the
    /// journal, whose bytes come back at once. With `collect`,
    /// gc then merges the sealed packs, when there are several.
    ///
    /// A session in the trash is removed the same way (its trash entry
    /// goes with its ref: `heads::remove`). This is the delete for good;
    /// `hel sessions delete` moves a session to the trash
    /// ([`Store::trash_session`]).
    pub fn delete(&self, session: &SessionId, collect: bool) -> Result<Option<GcReport>> {
        self.delete_as(session, collect, None)
            .map(|(_, report)| report)
    }

    /// [`Store::delete`], and whether it deleted; with `expiring` (when
    /// the entry that expires says it was deleted), only a session that
    /// is in the trash by that entry and not pinned, judged under the
    /// store lock (an undelete, a new delete or a pin may have come
    /// first: then nothing is done).
    pub(crate) fn delete_as(
        &self,
        session: &SessionId,
        collect: bool,
        expiring: Option<u64>,
    ) -> Result<(bool, Option<GcReport>)> {
        let no_such = || Error::NoSuchSession {
            session: session.to_string(),
        };
        let layout = self.layout()?.ok_or_else(no_such)?;
        let released = {
            let lock = Exclusive::take(layout)?;
            if let Some(deleted_ms) = expiring {
                let same = crate::trashed::read(layout, session)?
                    .is_some_and(|e| e.deleted_ms == deleted_ms);
                if !same
                    || crate::refs::read(layout, session)?.is_some()
                    || crate::trashed::pinned(layout, session)?
                {
                    return Ok((false, None));
                }
            }
            // A session whose journal has a fault can be deleted: what
            // other sessions need of it is copied first, or the delete
            // refuses.
            // Its head's deps name the records its delete removes after
            // it (a head that does not read leaves them to gc).
            let (headed, own_deps) = match heads::read_light(layout, session) {
                Err(Error::JournalFault { .. } | Error::BadRef { .. }) => (true, BTreeSet::new()),
                head => match head? {
                    Some(h) => (true, h.deps()),
                    None if crate::trashed::has_any(layout, session)? => {
                        match heads::read_trashed(layout, session) {
                            Ok(Some(h)) => (true, h.deps()),
                            Ok(None) | Err(Error::JournalFault { .. }) => (true, BTreeSet::new()),
                            Err(e) => return Err(e),
                        }
                    }
                    None => (false, BTreeSet::new()),
                },
            };
            let known = headed || layout.session_dir(session)?.is_some();
            if !known {
                return Err(no_such());
            }
            let lease = SessionLease::acquire(lock.layout, session, true)?;
            let released = release(layout, &lock, session, &own_deps)?;
            // The name goes first: a name left behind would name nothing.
            crate::names::remove(layout, session)?;
            if let Some(sessions) = layout.sessions()? {
                // The lease file goes with the directory; the lock is dropped after.
                sessions.remove_tree(session.as_str())?;
            }
            drop(lease);
            released
        };
        if !collect {
            return Ok((true, None));
        }
        let mut report = if self.needs_gc(layout)? {
            gc(self, false)?
        } else {
            GcReport::default()
        };
        report.bytes_removed += released.bytes;
        report.objects_removed += released.objects;
        report.journals_removed += 1;
        Ok((true, Some(report)))
    }

    /// Is there anything a gc would do beyond what deletes did: sealed
    /// packs to merge?
    fn needs_gc(&self, layout: &Odb) -> Result<bool> {
        Ok(sealed_count(layout)? > 1)
    }
}

/// How many sealed packs the store has.
fn sealed_count(layout: &Odb) -> Result<usize> {
    Ok(match layout.packs()? {
        Some(p) => crate::odb::sealed_stems(p)?.len(),
        None => 0,
    })
}

/// Collect garbage: copy every live object that is not in a live
/// session's journal (sealed packs) into one new sealed pack when
/// anything there is dead or packs pile up, remove what no head reaches,
/// files of dead writes in `tmp/`, and working directories of sessions
/// that have no head and no live instance. With `dry_run`, only report.
/// Refuses (naming what is wrong) when anything reachable cannot be read
/// or validated.
pub fn gc(store: &Store, dry_run: bool) -> Result<GcReport> {
    collect(store, dry_run, false, true).map(|r| r.unwrap_or_default())
}

/// gc that also rewrites every sealed pack into one, even when nothing
/// in them is dead (`hel gc --repack`).
pub fn repack(store: &Store) -> Result<GcReport> {
    collect(store, false, true, true).map(|r| r.unwrap_or_default())
}

/// Repack on its own when sealed packs pile up (more than 8), if no other
/// process holds the store lock right now; `None` when there was nothing
/// to do.
pub fn maybe_repack(store: &Store) -> Result<Option<GcReport>> {
    let Some(layout) = store.layout_for_gc()? else {
        return Ok(None);
    };
    if sealed_count(layout)? <= 8 {
        return Ok(None);
    }
    collect(store, false, true, false)
}

/// gc's phases: the store lock, the heads, the mark (when anything could
/// be removed), the rewrite of the sealed packs, then the tidying of
/// journals no ref publishes, records, `tmp/`, working directories and
/// names. `None`: not `wait`ing, and another process held the lock.
fn collect(store: &Store, dry_run: bool, force: bool, wait: bool) -> Result<Option<GcReport>> {
    let mut report = GcReport {
        dry_run,
        ..GcReport::default()
    };
    let Some(layout) = store.layout_for_gc()? else {
        return Ok(Some(report));
    };
    let lock = if wait {
        Exclusive::take(layout)?
    } else {
        match Exclusive::try_take(layout)? {
            Some(l) => l,
            None => return Ok(None),
        }
    };
    layout.index().forget_removed();
    if !dry_run {
        // Trash entries of sessions listed again (an undelete or a delete
        // that stopped half way) settle first.
        trash_roots(layout, false, &mut |_| Ok(()))?;
    }
    let with_deps = roots(layout, &mut |e| Err(e))?;
    refs_present(layout)?;
    let mut root_ids: Vec<ObjectId> = with_deps.iter().map(|(_, id, _)| *id).collect();
    root_ids.extend(crate::opundo::roots(layout)?);
    let (judged, live) = judge(layout, &root_ids, force)?;
    let plan = plan(layout, &lock, &live, judged)?;
    let rewrite = judged
        && (force || plan.dead_records > 0 || plan.sealed.len() > 1 || !plan.orphans.is_empty());
    if rewrite && !dry_run {
        rewrite_packs(layout, &lock, &plan, &mut report)?;
        crate::failpoint::kill("gc-after-packs");
    }
    report.objects_removed += plan.dead_records;
    report.objects_kept = if judged {
        live.len() as u64
    } else {
        // Unmarked: what the live sessions' journals hold, each once.
        let mut kept: HashSet<ObjectId> = HashSet::new();
        for j in layout.index().open_journals() {
            kept.extend(j.read().unwrap_or_else(|p| p.into_inner()).objects.keys());
        }
        kept.len() as u64
    };
    // The new pack is durable: the journals no ref publishes go.
    for (id, lease) in plan.orphans {
        if !dry_run {
            heads::remove(layout, &id)?;
        }
        report.journals_removed += 1;
        drop(lease);
    }
    layout.index().forget_removed();
    if !dry_run {
        // The dependents records (dependents.rs): those a head needs
        // written, those of sessions without a head removed.
        let with_deps: Vec<(SessionId, BTreeSet<SessionId>)> =
            with_deps.into_iter().map(|(s, _, d)| (s, d)).collect();
        let journals: BTreeSet<SessionId> = heads::journals(layout)?.into_iter().collect();
        crate::dependents::tidy(layout, &with_deps, &journals)?;
    }
    clear_leftovers(layout, dry_run, &mut report)?;
    clear_sessions(layout, &lock, dry_run, &mut report)?;
    prune_pins(layout, dry_run)?;
    // Names of sessions that are gone (never committed, or deleted by
    // a hel that knew no names). A names file that cannot be read is
    // left alone: fsck reports it, and gc has nothing to reclaim there.
    if let Ok(n) = crate::names::prune(layout, dry_run, |id| {
        Ok(!report.sessions_removed.contains(id) && store.knows(id)?)
    }) {
        report.names_removed = n;
    }
    // What it reclaimed, in the operation log (nothing to revert: a
    // failure to say it is no failure of the gc).
    if !dry_run {
        let r = &report;
        let (o, b, j) = (r.objects_removed, r.bytes_removed, r.journals_removed);
        let _ = crate::oplog::record_gc(store, &r.sessions_removed, o, b, j);
    }
    Ok(Some(report))
}

/// `Err` when `refs/sessions/` is gone while journals are there (removed,
/// or a backup restored without it): every journal would look
/// unpublished to gc, which would remove it. fsck reports the same.
pub(crate) fn refs_present(layout: &Odb) -> Result<()> {
    if layout.refs()?.is_none() && !heads::journals(layout)?.is_empty() {
        return Err(Error::RefsMissing {
            path: layout.ref_path(""),
        });
    }
    Ok(())
}

/// Whether gc has anything to judge, and what is live if so. Only sealed
/// packs and journals no ref publishes hold objects gc may remove:
/// objects in live sessions' journals stay where they are (each journal
/// went through `roots` whole). With none of those, no mark could change
/// what gc does, so there is none: reading every snapshot and node again
/// would only re-prove them, and fsck stays the check that does.
fn judge(layout: &Odb, root_ids: &[ObjectId], force: bool) -> Result<(bool, HashSet<ObjectId>)> {
    let judged = force || sealed_count(layout)? > 0 || !heads::orphans(layout)?.is_empty();
    if judged {
        // Any error while marking means we cannot know what is reachable:
        // abort rather than sweep what a broken snapshot might name.
        return Ok((true, mark(layout, root_ids, &mut |e| Err(e))?.reachable));
    }
    // What a listing reads of each session still has to read: a head
    // whose checkpoint is damaged makes gc refuse, as a mark would.
    for id in root_ids {
        crate::read::snapshot(layout, id)?;
    }
    Ok((false, HashSet::new()))
}

/// What gc would rewrite: the sealed packs, the live objects outside
/// live journals (in order, each once), how many records are dead, and
/// the journals no ref publishes (with their lease, when they have a
/// working directory).
struct Plan {
    sealed: Vec<Arc<crate::odb::Sealed>>,
    outside: Vec<ObjectId>,
    dead_records: u64,
    orphans: Vec<(SessionId, Option<SessionLease>)>,
}

/// [`Plan`] of a gc that marked `live` (when `judged`). Every live object
/// of a pack is rewritten into one sealed pack when anything there is
/// dead or scattered; also one that a live journal holds too: a session
/// may name the pack's copy without depending on that journal (it found
/// the pack first), and the journal goes when its session is deleted.
fn plan(
    layout: &Odb,
    lock: &Exclusive<'_, Odb>,
    live: &HashSet<ObjectId>,
    judged: bool,
) -> Result<Plan> {
    let sealed = layout.index().all_sealed(layout)?;
    // Every old pack may be removed: each must read whole, and hold only
    // records this hel knows.
    for p in &sealed {
        known_records(p)?;
    }
    let mut plan = Plan {
        sealed,
        outside: Vec::new(),
        dead_records: 0,
        orphans: Vec::new(),
    };
    let mut seen: HashSet<ObjectId> = HashSet::new();
    for p in &plan.sealed {
        for e in &p.idx.entries {
            if !live.contains(&e.id) {
                plan.dead_records += 1;
            } else if seen.insert(e.id) {
                plan.outside.push(e.id);
            }
        }
    }
    // Journals no ref publishes, whose lease is free: what refs reach of
    // them goes into the new pack first, then they go. (Each read whole
    // without a fault: `roots` refused otherwise. Unjudged, there were
    // none: none appears under the lock.)
    if !judged {
        return Ok(plan);
    }
    for id in heads::orphans(layout)? {
        // No working directory: no lease, and none can be taken while
        // gc holds the store lock.
        let lease = match SessionLease::try_take(lock.layout, &id) {
            Ok(lease) => Some(lease),
            Err(Error::NoSuchSession { .. }) => None,
            Err(_) => continue,
        };
        if let Some(view) = layout.index().journal(layout, &id)? {
            let v = view.read().unwrap_or_else(|p| p.into_inner());
            for oid in v.objects.keys().chain(v.unpublished.keys()) {
                if live.contains(oid) && seen.insert(*oid) {
                    plan.outside.push(*oid);
                }
            }
        }
        plan.orphans.push((id, lease));
    }
    Ok(plan)
}

/// Write the live objects of `plan` into one new sealed pack; once it is
/// durable (`write_sealed` returns after the sync of `packs/`), each old
/// pack goes, but the one it may be (the same objects in the same order
/// make the same pack, renamed over itself).
fn rewrite_packs(
    layout: &Odb,
    lock: &Exclusive<'_, Odb>,
    plan: &Plan,
    report: &mut GcReport,
) -> Result<()> {
    let written = if plan.outside.is_empty() {
        None
    } else {
        report.packs_written = 1;
        Some(crate::repack::write_sealed(layout, lock, &plan.outside)?.0)
    };
    crate::failpoint::kill("gc-after-new-pack");
    if let Some(packs) = layout.packs()? {
        for p in plan
            .sealed
            .iter()
            .filter(|p| written.as_ref() != Some(&p.name))
        {
            let (pack_name, idx_name) = crate::odb::sealed_names(&p.name);
            // Pack first: readers list packs, never an index alone.
            if packs.remove_file(&pack_name)? {
                report.bytes_removed += p.file.metadata().map(|m| m.len()).unwrap_or(0);
            }
            packs.remove_file(&idx_name)?;
        }
        packs.sync()?;
    }
    Ok(())
}

/// Remove what dead writes left: every file in `tmp/` (gc holds the lock
/// every writer takes, so none is at work), and an index a stopped
/// repack or gc left without its pack.
fn clear_leftovers(layout: &Odb, dry_run: bool, report: &mut GcReport) -> Result<()> {
    if let Some(tmp) = layout.tmp()? {
        for e in tmp.entries()? {
            let Some(name) = e.name_str() else { continue };
            if !dry_run {
                tmp.remove_tree(name)?;
            }
            report.tmp_files_removed += 1;
        }
    }
    if let Some(packs) = layout.packs()? {
        for name in crate::odb::lone_indexes(packs)? {
            if !dry_run {
                packs.remove_file(&name)?;
            }
            report.tmp_files_removed += 1;
        }
    }
    Ok(())
}

/// Working directories of idle sessions (whose lease gc can take): the
/// spill working copies of those with a head (a cache of their blobs),
/// the whole directory of those without one.
fn clear_sessions(
    layout: &Odb,
    lock: &Exclusive<'_, Odb>,
    dry_run: bool,
    report: &mut GcReport,
) -> Result<()> {
    let Some(sessions) = layout.sessions()? else {
        return Ok(());
    };
    for e in sessions.entries()? {
        if e.kind != EntryKind::Dir {
            continue;
        }
        let Some(Ok(id)) = e.name_str().map(str::parse::<SessionId>) else {
            continue;
        };
        // Only a session whose lease we can take is idle (or dead).
        let Ok(lease) = SessionLease::try_take(lock.layout, &id) else {
            continue;
        };
        if heads::read_light(layout, &id)?.is_some() {
            // Idle with checkpoints: its spill working copies are a
            // cache of its blobs (an instance that died left them).
            if let Some(dir) = layout.session_dir(&id)? {
                if dir.kind_of(SPILL)?.is_some() {
                    if !dry_run {
                        dir.remove_tree(SPILL)?;
                    }
                    report.spill_dirs_removed += 1;
                }
            }
            continue;
        }
        if !dry_run {
            sessions.remove_tree(id.as_str())?;
        }
        drop(lease);
        report.sessions_removed.push(id);
    }
    Ok(())
}

// The trash's part of gc (objects-spec §8): its entries are roots, and
// entries of sessions listed again are settled.

/// After `entry`'s session has its ref again: give back the name it
/// recorded (when the session has none and no other session holds it),
/// then remove the entry. Returns the session holding the name, when
/// that kept it from coming back. The caller holds the store lock
/// exclusively.
pub(crate) fn settle_trash(layout: &Odb, entry: &Entry) -> Result<Option<SessionId>> {
    let mut taken = None;
    if let Some(name) = entry
        .name
        .as_ref()
        .filter(|n| crate::names::check_name(n).is_ok())
    {
        crate::names::update(layout, |names| {
            if names.contains_key(&entry.session) {
                return Ok(false);
            }
            if let Some((holder, _)) = names.iter().find(|(_, n)| *n == name) {
                taken = Some(holder.clone());
                return Ok(false);
            }
            names.insert(entry.session.clone(), name.clone());
            Ok(true)
        })?;
    }
    crate::failpoint::kill("undelete-after-name");
    trashed::remove(layout, &entry.session)?;
    Ok(taken)
}

/// The trash's roots for gc (under the store lock held exclusively):
/// each entry's session, head and deps. An entry whose session has a ref
/// again is settled ([`settle`]) unless `dry_run`. A trash entry that
/// does not read, or whose journal does not give its head, goes to
/// `on_error` (gc refuses: it cannot know what that session needs).
pub(crate) fn trash_roots(
    layout: &Odb,
    dry_run: bool,
    on_error: &mut dyn FnMut(Error) -> Result<()>,
) -> Result<Vec<(SessionId, ObjectId, BTreeSet<SessionId>)>> {
    let listing = match trashed::list(layout) {
        Ok(l) => l,
        Err(e) => {
            on_error(e)?;
            return Ok(Vec::new());
        }
    };
    for (path, what) in listing.strays {
        on_error(Error::Unexpected {
            path,
            found: if what == "regular file" {
                "file not named by a session id"
            } else {
                what
            },
            expected: "trash entry",
        })?;
    }
    let mut out = Vec::new();
    for session in listing.sessions {
        let entry = match trashed::read(layout, &session) {
            Ok(Some(e)) => e,
            Ok(None) => continue,
            Err(e) => {
                on_error(e)?;
                continue;
            }
        };
        if crate::refs::read(layout, &session).ok().flatten().is_some() {
            if !dry_run {
                settle_trash(layout, &entry)?;
            }
            continue;
        }
        match heads::read_trashed(layout, &session) {
            Ok(Some(head)) => out.push((session, head.id, head.deps())),
            Ok(None) => on_error(Error::BadTrash {
                path: trashed::path(layout, &session),
                reason: format!(
                    "session {session} has no journal that publishes {}",
                    entry.head
                ),
            })?,
            Err(e) => on_error(e)?,
        }
    }
    Ok(out)
}

/// Pins of sessions that are neither listed nor in the trash: removed
/// (gc, under the store lock); how many.
pub(crate) fn prune_pins(layout: &Odb, dry_run: bool) -> Result<u64> {
    let mut n = 0;
    for session in trashed::list_pins(layout)?.sessions {
        if crate::refs::read(layout, &session).ok().flatten().is_some()
            || trashed::has_any(layout, &session)?
        {
            continue;
        }
        if !dry_run {
            trashed::unpin(layout, &session)?;
        }
        n += 1;
    }
    Ok(n)
}
