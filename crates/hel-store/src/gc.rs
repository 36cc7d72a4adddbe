//! Garbage collection: mark everything reachable from every ref, sweep the
//! rest.
//!
//! Spill working copies (`sessions/<id>/spill/`) are a cache of spill
//! blobs for the instance that holds the session: gc removes them from
//! sessions whose lease is free.
//!
//! Safety against concurrent commits of other sessions: gc holds
//! `.sessions.lock` exclusively from before the mark until after the sweep,
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
//! deleted through a link.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::dir::{Dir, Kind as EntryKind};
use crate::layout::{Layout, SPILL};
use crate::list::{self, Shapes};
use crate::lock::{Exclusive, SessionLease};
use crate::object::Cap;
use crate::snapshot;
use crate::{refs, Error, ObjectId, Result, SessionId, Store};

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
}

/// Every object reachable from `roots` (snapshot ids): snapshots through
/// their parents, their config, cursor and spill blobs, their list chains,
/// and what list items name (blobs, and the items of sliced nodes). Every
/// snapshot and node is validated as it is read, and counts and slice
/// bounds are checked at the end. Errors go to `on_error`; the walk goes
/// on past them (fsck) or the caller aborts on the first (gc). Iterative:
/// no recursion as deep as what a store holds.
pub(crate) fn mark(
    layout: &Layout,
    roots: &[ObjectId],
    on_error: &mut dyn FnMut(Error) -> Result<()>,
) -> Result<Marked> {
    let mut m = Marked::default();
    let mut snapshots: Vec<ObjectId> = roots.to_vec();
    let mut nodes: Vec<ObjectId> = Vec::new();
    let mut nodes_seen: HashSet<ObjectId> = HashSet::new();
    while let Some(id) = snapshots.pop() {
        if !m.reachable.insert(id) {
            continue;
        }
        m.snapshots.push(id);
        let cp = match snapshot::read(layout, &id) {
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
        m.reachable.extend(cp.spill.values().map(|s| s.blob));
        if let Some(root) = cp.messages.root {
            if nodes_seen.insert(root) {
                nodes.push(root);
            }
        }
        while let Some(nid) = nodes.pop() {
            m.reachable.insert(nid);
            let shape = match list::read_shape(layout, &nid) {
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

/// List `objects/` without following anything.
pub(crate) fn object_files(layout: &Layout) -> Result<ObjectFiles> {
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

/// The refs of a store as gc and fsck read them: the roots, and errors for
/// everything in `refs/sessions/` that is not a readable ref.
pub(crate) fn roots(
    layout: &Layout,
    on_error: &mut dyn FnMut(Error) -> Result<()>,
) -> Result<Vec<(SessionId, ObjectId)>> {
    let listing = refs::list(layout)?;
    for (name, what) in listing.strays {
        on_error(Error::Unexpected {
            path: layout.ref_path(&name),
            found: if what == "regular file" {
                "file not named by a session id"
            } else {
                what
            },
            expected: "session ref",
        })?;
    }
    let mut out = Vec::new();
    for session in listing.sessions {
        match refs::read(layout, &session) {
            Ok(Some(head)) => out.push((session, head)),
            Ok(None) => {}
            Err(e) => on_error(e)?,
        }
    }
    Ok(out)
}

/// Remove `doomed` objects (or only measure them, for a dry run): objects
/// removed and their bytes. Unlinking is latency-bound, so a few threads
/// share it.
fn sweep(objects: &Dir, doomed: &[(String, String)], dry_run: bool) -> Result<(u64, u64)> {
    const THREADS: usize = 4;
    let chunk = doomed.len().div_ceil(THREADS).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = doomed
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || -> Result<(u64, u64)> {
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
                })
            })
            .collect();
        let mut total = (0, 0);
        for w in workers {
            let (n, b) = w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?;
            total.0 += n;
            total.1 += b;
        }
        Ok(total)
    })
}

impl Store {
    /// Collect garbage: remove unreachable objects, files of dead writes in
    /// `tmp/`, and working directories of sessions that have no ref and no
    /// live instance. With `dry_run`, only report. Refuses (naming what is
    /// wrong) when anything reachable cannot be read or validated.
    pub fn gc(&self, dry_run: bool) -> Result<GcReport> {
        let mut report = GcReport {
            dry_run,
            ..GcReport::default()
        };
        let Some(layout) = self.layout_for_gc()? else {
            return Ok(report);
        };
        let lock = Exclusive::take(layout)?;
        let fail = &mut |e| Err(e);
        let roots: Vec<ObjectId> = roots(layout, fail)?.into_iter().map(|(_, h)| h).collect();
        // Any error while marking means we cannot know what is reachable:
        // abort rather than sweep what a broken snapshot might name.
        let live = mark(layout, &roots, fail)?.reachable;
        let listing = object_files(layout)?;
        let mut doomed = Vec::new();
        for (id, dir, name) in listing.objects {
            if live.contains(&id) {
                report.objects_kept += 1;
            } else {
                doomed.push((dir, name));
            }
        }
        if let Some(objects) = layout.objects()? {
            let (removed, bytes) = sweep(objects, &doomed, dry_run)?;
            report.objects_removed = removed;
            report.bytes_removed = bytes;
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
                if refs::read(layout, &id)?.is_some() {
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
        Ok(report)
    }
}
