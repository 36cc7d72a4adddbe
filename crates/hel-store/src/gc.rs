//! Garbage collection: mark everything reachable from every ref (every
//! session's head), sweep the rest: rewrite sealed packs and loose files
//! into one sealed pack when anything there is dead, and remove journals
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
//! deleted through a link. Only sealed packs, loose files and journals no
//! ref publishes hold objects gc may remove (live journals stay whole):
//! when there are none, gc does not mark, and reads only each head's
//! snapshot (fsck is the full check).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::dir::{Dir, Kind as EntryKind};
use crate::layout::SPILL;
use crate::list::{self, Shapes};
use crate::lock::{Exclusive, SessionLease};
use crate::object::Cap;
use crate::odb::{Found, Odb};
use crate::pack::Place;
use crate::snapshot::Spill;
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
}

/// Where each object of the journals open and of the sealed packs is,
/// taken once when a mark starts: a lookup is then one probe, where
/// [`crate::odb::Index::locate`] asks every open journal in turn (a mark
/// of a store of 500 sessions spent half its time there). Records never
/// change once written and an open file stays readable after gc removes
/// it, so a place taken here stays right; what is not here (a loose file,
/// a record no ref publishes, a journal opened since) is located as any
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
        Some(Found::Record {
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
    let mut m = Marked::default();
    let places = Places::new(layout)?;
    let mut snapshots: Vec<ObjectId> = roots.to_vec();
    let mut nodes: Vec<ObjectId> = Vec::new();
    let mut nodes_seen: HashSet<ObjectId> = HashSet::new();
    let mut maps_seen: HashSet<ObjectId> = HashSet::new();
    // Trees are walked with a stack, never recursion: a hostile store
    // cannot make a walk deeper than memory.
    let mut trees: Vec<ObjectId> = Vec::new();
    while let Some(id) = snapshots.pop() {
        if !m.reachable.insert(id) {
            continue;
        }
        m.snapshots.push(id);
        let read = match places.find(&id) {
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
        for (blob, cap) in [(cp.request_config, Cap::CONFIG), (cp.cursors, Cap::CURSORS)] {
            if m.reachable.insert(blob) {
                m.json_blobs.push((blob, cap));
            }
        }
        // A spill map blob is shared by every checkpoint until the next
        // spill: read once. Its own set, not `reachable`: the same bytes
        // may be reached as another blob first (a config), and its entries
        // must still be marked.
        let read;
        let entries = match &cp.spill {
            Spill::Inline(map) => Some(map),
            Spill::Blob(map) => {
                m.reachable.insert(*map);
                if !maps_seen.insert(*map) {
                    None
                } else {
                    match crate::read::spill_map_at(layout, &cp, places.find(map).as_ref()) {
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
            m.reachable.insert(s.blob);
            m.spill.insert((s.blob, s.size));
        }
        if let Some(ws) = &cp.workspace {
            if ws.not_tracked > 0 {
                m.not_tracked.push((id, ws.tree, ws.not_tracked));
            }
            m.workspace_roots
                .extend(std::iter::once(ws.tree).chain(ws.start));
            trees.extend(std::iter::once(ws.tree).chain(ws.start));
        }
        while let Some(tid) = trees.pop() {
            if !m.reachable.insert(tid) {
                continue;
            }
            let read = match places.find(&tid) {
                Some(found) => crate::read::tree_at(layout, &tid, &found),
                None => crate::read::tree(layout, &tid),
            };
            let t = match read {
                Ok(t) => t,
                Err(e) => {
                    on_error(e)?;
                    continue;
                }
            };
            m.trees += 1;
            for e in t.entries {
                match e.kind {
                    EntryKindT::Dir => trees.push(e.id),
                    EntryKindT::File | EntryKindT::Symlink => {
                        m.reachable.insert(e.id);
                    }
                    EntryKindT::NotTracked | EntryKindT::Repository | EntryKindT::NotTrackedDir => {
                    }
                }
            }
        }
        if let Some(root) = cp.messages.root {
            if nodes_seen.insert(root) {
                nodes.push(root);
            }
        }
        while let Some(nid) = nodes.pop() {
            m.reachable.insert(nid);
            let read = match places.find(&nid) {
                Some(found) => list::read_shape_at(layout, &nid, &found),
                None => list::read_shape(layout, &nid),
            };
            let shape = match read {
                Ok(s) => s,
                Err(e) => {
                    on_error(e)?;
                    continue;
                }
            };
            for b in &shape.blobs {
                m.reachable.insert(*b);
                m.message_blobs.insert(*b);
            }
            let next = shape
                .prev
                .iter()
                .chain(shape.slices.iter().map(|(s, _, _)| s));
            for n in next {
                if nodes_seen.insert(*n) {
                    nodes.push(*n);
                }
            }
            m.shapes.nodes.insert(nid, shape);
        }
    }
    m.shapes.check(layout, on_error)?;
    Ok(m)
}

/// The loose objects of a store, and what else is under `objects/`.
#[derive(Default)]
pub(crate) struct ObjectFiles {
    /// (id, fan-out directory name, file name).
    pub objects: Vec<(ObjectId, String, String)>,
    /// Entries that are not objects: (path, what it is).
    pub strays: Vec<(PathBuf, &'static str)>,
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
        if let Some(crate::odb::Found::Record { .. }) = layout.index().locate(layout, id)? {
            out.extend(layout.index().journal_of(id, session));
        }
    }
    Ok(out)
}

/// List `objects/` without following anything.
pub(crate) fn object_files(layout: &Odb) -> Result<ObjectFiles> {
    let mut out = ObjectFiles::default();
    let Some(objects) = layout.objects()? else {
        return Ok(out);
    };
    for fan in objects.entries()? {
        let fan_name = fan.name.to_string_lossy().into_owned();
        let fan_ok = fan_name.len() == 2
            && fan_name
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
        if fan.kind != EntryKind::Dir || !fan_ok {
            let what = if fan.kind == EntryKind::Dir {
                "directory not named like a fan-out directory"
            } else {
                stray_kind(fan.kind)
            };
            out.strays.push((objects.child_path(&fan_name), what));
            continue;
        }
        let Some(dir) = objects.sub(&fan_name)? else {
            continue;
        };
        for e in dir.entries()? {
            let name = e.name.to_string_lossy().into_owned();
            let id = format!("{fan_name}{name}").parse::<ObjectId>().ok();
            match (id, e.kind) {
                (Some(id), EntryKind::File) => out.objects.push((id, fan_name.clone(), name)),
                (Some(_), kind) => out.strays.push((dir.child_path(&name), stray_kind(kind))),
                (None, _) => out
                    .strays
                    .push((dir.child_path(&name), "file not named like an object")),
            }
        }
    }
    Ok(out)
}

fn stray_kind(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file not named like an object",
        other => other.describe(),
    }
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
/// of it go after the head (format 4). Sessions that depend on the journal (forks,
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
            if let Some(h) = heads::read(layout, &s)? {
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
    if layout.records_dependents() {
        crate::dependents::forget(layout, session, own_deps);
    }
    layout.index().forget_removed();
    Ok(out)
}

/// The sessions whose head's commit record says they depend on
/// `session`'s journal (its forks, and sessions that share its large
/// objects). In a format-4 store only the heads its records name are read
/// (those recorded as its dependents and those not recorded at all:
/// `dependents.rs`); in an older one, every other session's head. Many
/// reads share a few threads, since each is a handful of small file reads
/// and a delete waits on all of them. Any head that cannot be read is the
/// error: a delete cannot know then what that session needs.
fn depending_on(layout: &Odb, session: &SessionId) -> Result<Vec<SessionId>> {
    let mut others: Vec<SessionId> = heads::list(layout)?
        .sessions
        .into_iter()
        .filter(|s| s != session)
        .collect();
    if layout.records_dependents() {
        others = crate::dependents::candidates(layout, session, &others)?;
    }
    let depends = |s: &SessionId| -> Result<bool> {
        Ok(heads::read_light(layout, s)?.is_some_and(|h| h.deps().contains(session)))
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

/// Remove `doomed` objects (or only measure them, for a dry run): objects
/// removed and their bytes. Unlinking is latency-bound, so a few threads
/// share it (`par::parts`).
fn sweep(objects: &Dir, doomed: &[(String, String)], dry_run: bool) -> Result<(u64, u64)> {
    const THREADS: usize = 4;
    let mut total = (0, 0);
    for part in crate::par::parts(doomed, THREADS, |part| sweep_part(objects, part, dry_run)) {
        let (n, b) = part?;
        total.0 += n;
        total.1 += b;
    }
    Ok(total)
}

/// [`sweep`] of one part of the doomed objects.
fn sweep_part(objects: &Dir, part: &[(String, String)], dry_run: bool) -> Result<(u64, u64)> {
    let (mut n, mut bytes) = (0, 0);
    let mut fan: Option<(String, Dir)> = None;
    for (dir_name, name) in part {
        if fan.as_ref().is_none_or(|(d, _)| d != dir_name) {
            match objects.sub(dir_name)? {
                Some(d) => fan = Some((dir_name.clone(), d)),
                None => continue,
            }
        }
        let Some((_, dir)) = &fan else { continue };
        let Some(file) = dir.open_file(name)? else {
            continue;
        };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        drop(file);
        if !dry_run && !dir.remove_file(name)? {
            continue;
        }
        n += 1;
        bytes += size;
    }
    Ok((n, bytes))
}

impl Store {
    /// Delete `session`: its head and working directory. Refused while the
    /// session is in use. Objects other sessions still need (forks, shared
    /// large objects) are first copied into a sealed pack (durable), then
    /// the ref goes (synced: from here on there is no session), then the
    /// journal, whose bytes come back at once. With `collect`,
    /// gc then reclaims what else no session reaches (loose objects and
    /// packs of older stores).
    pub fn delete(&self, session: &SessionId, collect: bool) -> Result<Option<GcReport>> {
        let no_such = || Error::NoSuchSession {
            session: session.to_string(),
        };
        let layout = self.layout()?.ok_or_else(no_such)?;
        let released = {
            let lock = Exclusive::take(layout)?;
            // A session whose journal has a fault can be deleted: what
            // other sessions need of it is copied first, or the delete
            // refuses.
            // Its head's deps name the records its delete removes after
            // it (a head that does not read leaves them to gc).
            let (headed, own_deps) = match heads::read_light(layout, session) {
                Err(Error::JournalFault { .. } | Error::BadRef { .. }) => (true, BTreeSet::new()),
                head => match head? {
                    Some(h) => (true, h.deps()),
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
            return Ok(None);
        }
        let mut report = if self.needs_gc(layout)? {
            gc(self, false)?
        } else {
            GcReport::default()
        };
        report.bytes_removed += released.bytes;
        report.objects_removed += released.objects;
        report.journals_removed += 1;
        Ok(Some(report))
    }

    /// Is there anything a gc would do beyond what deletes did: loose
    /// objects (of a format-1 store) or sealed packs to merge?
    fn needs_gc(&self, layout: &Odb) -> Result<bool> {
        let stub = crate::layout::stub_object();
        let loose = object_files(layout)?
            .objects
            .iter()
            .any(|(id, _, _)| *id != stub);
        let packs = match layout.packs()? {
            Some(p) => crate::odb::sealed_stems(p)?.len(),
            None => 0,
        };
        Ok(loose || packs > 1)
    }
}

/// Collect garbage: copy every live object that is not in a live
/// session's journal (loose files, sealed packs) into one new sealed
/// pack when anything there is dead or packs pile up, remove what no
/// head reaches, files of dead writes in `tmp/`, and working
/// directories of sessions that have no head and no live instance.
/// With `dry_run`, only report. Refuses (naming what is wrong) when
/// anything reachable cannot be read or validated.
pub fn gc(store: &Store, dry_run: bool) -> Result<GcReport> {
    collect(store, dry_run, false, true).map(|r| r.unwrap_or_default())
}

/// gc that also rewrites every sealed pack into one, even when nothing
/// in them is dead (`hel gc --repack`).
pub fn repack(store: &Store) -> Result<GcReport> {
    collect(store, false, true, true).map(|r| r.unwrap_or_default())
}

/// Repack on its own when loose objects or sealed packs pile up (more
/// than 256 loose objects or 8 packs), if no other process holds the
/// store lock right now; `None` when there was nothing to do.
pub fn maybe_repack(store: &Store) -> Result<Option<GcReport>> {
    let Some(layout) = store.layout_for_gc()? else {
        return Ok(None);
    };
    let stub = crate::layout::stub_object();
    let loose = object_files(layout)?
        .objects
        .iter()
        .filter(|(id, _, _)| *id != stub)
        .count();
    let packs = match layout.packs()? {
        Some(p) => crate::odb::sealed_stems(p)?.len(),
        None => 0,
    };
    if loose <= 256 && packs <= 8 {
        return Ok(None);
    }
    collect(store, false, true, false)
}

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
    let fail = &mut |e| Err(e);
    let with_deps = roots(layout, fail)?;
    let heads: Vec<(SessionId, ObjectId)> = with_deps
        .iter()
        .map(|(s, id, _)| (s.clone(), *id))
        .collect();
    // Without the stub, refs/sessions/ is not what hel left (removed,
    // or restored in part): every journal would look unpublished and
    // go. fsck reports the same fault and says gc refuses.
    if layout.heads_are_refs() {
        if let Some(e) = crate::refs::stub_missing(layout)? {
            return Err(e);
        }
    }
    let root_ids: Vec<ObjectId> = heads.iter().map(|(_, h)| *h).collect();
    let stub = crate::layout::stub_object();
    // Only sealed packs, loose files and journals no ref publishes hold
    // objects gc may remove: objects in live sessions' journals stay
    // where they are (each journal went through `roots` whole). With none
    // of those, no mark could change what gc does, so there is none:
    // reading every snapshot and node again would only re-prove them, and
    // fsck stays the check that does.
    let judged = force
        || match layout.packs()? {
            Some(p) => !crate::odb::sealed_stems(p)?.is_empty(),
            None => false,
        }
        || object_files(layout)?
            .objects
            .iter()
            .any(|(id, _, _)| *id != stub)
        || !heads::orphans(layout)?.is_empty();
    let live = if judged {
        // Any error while marking means we cannot know what is reachable:
        // abort rather than sweep what a broken snapshot might name.
        mark(layout, &root_ids, fail)?.reachable
    } else {
        // What a listing reads of each session still has to read: a head
        // whose checkpoint is damaged makes gc refuse, as a mark would.
        for id in &root_ids {
            crate::read::snapshot(layout, id)?;
        }
        HashSet::new()
    };
    // Every live object of a pack or a loose file is rewritten into one
    // sealed pack when anything there is dead, loose, or scattered. Also
    // one that a live journal holds too: a session may name the pack's
    // copy without depending on that journal (it found the pack first),
    // and the journal goes when its session is deleted.
    let sealed = layout.index().all_sealed(layout)?;
    // Every old pack may be removed below: each must read whole, and
    // hold only records this hel knows.
    for p in &sealed {
        known_records(p)?;
    }
    let listing = object_files(layout)?;
    let loose: Vec<&(ObjectId, String, String)> = listing
        .objects
        .iter()
        .filter(|(id, _, _)| *id != stub)
        .collect();
    let mut outside: Vec<ObjectId> = Vec::new();
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut dead_records = 0u64;
    let mut dead_bytes = 0u64;
    for p in &sealed {
        for e in &p.idx.entries {
            if live.contains(&e.id) {
                if seen.insert(e.id) {
                    outside.push(e.id);
                }
            } else {
                dead_records += 1;
                dead_bytes += e.len;
            }
        }
    }
    for (id, _, _) in &loose {
        if live.contains(id) && seen.insert(*id) {
            outside.push(*id);
        }
    }
    // Journals no ref publishes, whose lease is free (format 3): what
    // refs reach of them goes into the new pack first, then they go.
    // (Each read whole without a fault: `roots` refused otherwise.)
    let mut orphans: Vec<(SessionId, Option<SessionLease>)> = Vec::new();
    // (Unjudged, there were none: none appears under the lock.)
    let orphan_ids = if judged {
        heads::orphans(layout)?
    } else {
        Vec::new()
    };
    for id in orphan_ids {
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
                    outside.push(*oid);
                }
            }
        }
        orphans.push((id, lease));
    }
    let rewrite = judged
        && (force
            || dead_records > 0
            || !loose.is_empty()
            || sealed.len() > 1
            || !orphans.is_empty());
    if rewrite && !dry_run {
        let written = if outside.is_empty() {
            None
        } else {
            report.packs_written = 1;
            Some(crate::repack::write_sealed(layout, &lock, &outside)?.0)
        };
        // The new pack holds every live object of every old pack: once
        // it is durable (write_sealed returns after the sync of
        // packs/), each old pack goes, but the one it may be (the same
        // objects in the same order make the same pack, renamed over
        // itself).
        if let Some(packs) = layout.packs()? {
            for p in sealed.iter().filter(|p| written.as_ref() != Some(&p.name)) {
                let (pack_name, idx_name) = crate::odb::sealed_names(&p.name);
                // Pack first: readers list packs, never an index alone.
                if packs.remove_file(&pack_name)? {
                    report.bytes_removed += p.file.metadata().map(|m| m.len()).unwrap_or(0);
                }
                packs.remove_file(&idx_name)?;
            }
            packs.sync()?;
        }
    }
    report.objects_removed += dead_records;
    let _ = dead_bytes;
    let doomed: Vec<(String, String)> = loose
        .iter()
        .map(|(_, dir, name)| (dir.clone(), name.clone()))
        .collect();
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
    if let Some(objects) = layout.objects()? {
        if rewrite {
            let (removed, bytes) = sweep(objects, &doomed, dry_run)?;
            let dead_loose = loose.iter().filter(|(id, _, _)| !live.contains(id)).count();
            report.objects_removed += dead_loose as u64;
            let _ = removed;
            report.bytes_removed += bytes;
        }
    }
    // The new pack is durable: the journals no ref publishes go.
    for (id, lease) in orphans {
        if !dry_run {
            heads::remove(layout, &id)?;
        }
        report.journals_removed += 1;
        drop(lease);
    }
    layout.index().forget_removed();
    if !dry_run && layout.records_dependents() {
        // The dependents records (dependents.rs): those a head needs
        // written, those of sessions without a head removed.
        let with_deps: Vec<(SessionId, BTreeSet<SessionId>)> =
            with_deps.into_iter().map(|(s, _, d)| (s, d)).collect();
        let journals: BTreeSet<SessionId> = heads::journals(layout)?.into_iter().collect();
        crate::dependents::tidy(layout, &with_deps, &journals)?;
    }
    if let Some(tmp) = layout.tmp()? {
        for e in tmp.entries()? {
            let Some(name) = e.name_str() else { continue };
            if !dry_run {
                tmp.remove_tree(name)?;
            }
            report.tmp_files_removed += 1;
        }
    }
    // An index a stopped repack or gc left without its pack (this gc
    // holds the lock every pack writer takes, so none is being written).
    if let Some(packs) = layout.packs()? {
        for name in crate::odb::lone_indexes(packs)? {
            if !dry_run {
                packs.remove_file(&name)?;
            }
            report.tmp_files_removed += 1;
        }
    }
    if let Some(sessions) = layout.sessions()? {
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
    }
    // Names of sessions that are gone (never committed, or deleted by
    // a hel that knew no names). A names file that cannot be read is
    // left alone: fsck reports it, and gc has nothing to reclaim there.
    if let Ok(n) = crate::names::prune(layout, dry_run, |id| {
        Ok(!report.sessions_removed.contains(id) && store.knows(id)?)
    }) {
        report.names_removed = n;
    }
    Ok(Some(report))
}
