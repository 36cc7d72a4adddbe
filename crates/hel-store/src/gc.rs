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

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;

use crate::error::IoContext;
use crate::layout::{check_session_id, Layout};
use crate::list;
use crate::lock::{SessionLease, StoreLock};
use crate::snapshot;
use crate::{refs, Error, ObjectId, Result, Store};

/// What a gc did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GcReport {
    pub dry_run: bool,
    pub objects_kept: u64,
    pub objects_removed: u64,
    pub bytes_removed: u64,
    pub tmp_files_removed: u64,
    pub sessions_removed: Vec<String>,
    /// Spill working copies of idle sessions removed (their blobs stay).
    pub spill_dirs_removed: u64,
}

/// Every object reachable from `roots` (snapshot ids): snapshots through
/// their parents, their config, cursor and spill blobs, their list chains,
/// and what list items name (blobs, and the items of sliced nodes). Errors
/// go to `on_error`; the walk goes on past them (fsck) or the caller aborts
/// on the first (gc).
pub(crate) fn mark(
    layout: &Layout,
    roots: &[ObjectId],
    on_error: &mut dyn FnMut(Error) -> Result<()>,
) -> Result<HashSet<ObjectId>> {
    let mut seen = HashSet::new();
    // Nodes whose items are marked, and nodes whose chain (prev) is marked:
    // a node reached only through a slice needs its items, not its history.
    let mut items_done: HashSet<ObjectId> = HashSet::new();
    let mut chain_done: HashSet<ObjectId> = HashSet::new();
    let mut stack: Vec<ObjectId> = roots.to_vec();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let cp = match snapshot::read(layout, &id) {
            Ok(cp) => cp,
            Err(e) => {
                on_error(e)?;
                continue;
            }
        };
        stack.extend(cp.parents.iter().copied());
        seen.insert(cp.request_config);
        seen.insert(cp.cursors);
        seen.extend(cp.spill.values().map(|s| s.blob));
        let mut node = cp.messages.root;
        while let Some(nid) = node {
            if !chain_done.insert(nid) {
                break; // the rest of this chain is marked
            }
            match mark_items(layout, &nid, &mut seen, &mut items_done, on_error)? {
                Some(prev) => node = prev,
                None => break,
            }
        }
    }
    Ok(seen)
}

/// A node's `prev`.
type Prev = Option<ObjectId>;

/// Mark node `id` and what its items name; returns its `prev` (None when
/// the node could not be read).
fn mark_items(
    layout: &Layout,
    id: &ObjectId,
    seen: &mut HashSet<ObjectId>,
    items_done: &mut HashSet<ObjectId>,
    on_error: &mut dyn FnMut(Error) -> Result<()>,
) -> Result<Option<Prev>> {
    seen.insert(*id);
    let refs = match list::read_refs(layout, id) {
        Ok(r) => r,
        Err(e) => {
            on_error(e)?;
            return Ok(None);
        }
    };
    if items_done.insert(*id) {
        seen.extend(refs.blobs.iter().copied());
        for target in &refs.sliced {
            if !items_done.contains(target) {
                mark_items(layout, target, seen, items_done, on_error)?;
            }
        }
    }
    Ok(Some(refs.prev))
}

/// Every object file in the store, with its id when its name is one.
pub(crate) fn object_files(layout: &Layout) -> Result<Vec<(PathBuf, Option<ObjectId>)>> {
    let dir = layout.objects_dir();
    let mut out = Vec::new();
    if !dir.is_dir() {
        return Ok(out);
    }
    for entry in walkdir::WalkDir::new(&dir).min_depth(2).max_depth(2) {
        let entry = entry.map_err(|e| Error::Io {
            path: e.path().map_or(dir.clone(), |p| p.to_owned()),
            source: e.into(),
        })?;
        if !entry.file_type().is_file() {
            continue;
        }
        let path = entry.into_path();
        let id = match (
            path.parent()
                .and_then(|p| p.file_name())
                .and_then(|n| n.to_str()),
            path.file_name().and_then(|n| n.to_str()),
        ) {
            (Some(a), Some(b)) => format!("{a}{b}").parse().ok(),
            _ => None,
        };
        out.push((path, id));
    }
    Ok(out)
}

/// Remove `paths` (or only measure them, for a dry run): objects removed
/// and their bytes. Unlinking is latency-bound, so a few threads share it.
fn sweep(paths: &[PathBuf], dry_run: bool) -> Result<(u64, u64)> {
    const THREADS: usize = 4;
    let chunk = paths.len().div_ceil(THREADS).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = paths
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || -> Result<(u64, u64)> {
                    let (mut n, mut bytes) = (0, 0);
                    for path in part {
                        let size = match fs::metadata(path) {
                            Ok(m) => m.len(),
                            Err(e) if e.kind() == ErrorKind::NotFound => continue,
                            Err(e) => return Err(e).at(path),
                        };
                        if !dry_run {
                            match fs::remove_file(path) {
                                Ok(()) => {}
                                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                                Err(e) => return Err(e).at(path),
                            }
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
    /// live instance. With `dry_run`, only report.
    pub fn gc(&self, dry_run: bool) -> Result<GcReport> {
        let mut report = GcReport {
            dry_run,
            ..GcReport::default()
        };
        if !self.exists() {
            return Ok(report);
        }
        let layout = self.layout();
        let _guard = StoreLock::exclusive(layout)?;
        let mut roots = Vec::new();
        for session in refs::list(layout)? {
            if let Some(head) = refs::read(layout, &session)? {
                roots.push(head);
            }
        }
        // Any error while marking means we cannot know what is reachable:
        // abort rather than sweep what a broken snapshot might name.
        let live = mark(layout, &roots, &mut |e| Err(e))?;
        let mut doomed = Vec::new();
        for (path, id) in object_files(layout)? {
            let Some(id) = id else { continue };
            if live.contains(&id) {
                report.objects_kept += 1;
            } else {
                doomed.push(path);
            }
        }
        let (removed, bytes) = sweep(&doomed, dry_run)?;
        report.objects_removed = removed;
        report.bytes_removed = bytes;
        let tmp = layout.tmp_dir();
        if let Ok(entries) = fs::read_dir(&tmp) {
            for e in entries.flatten() {
                if !dry_run {
                    let _ = fs::remove_file(e.path());
                }
                report.tmp_files_removed += 1;
            }
        }
        if let Ok(entries) = fs::read_dir(layout.sessions_dir()) {
            for e in entries.flatten() {
                let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                if check_session_id(&name).is_err() {
                    continue;
                }
                // Only a session whose lease we can take is idle (or dead).
                let Ok(lease) = SessionLease::acquire(layout, &name) else {
                    continue;
                };
                if refs::read(layout, &name)?.is_some() {
                    // Idle with checkpoints: its spill working copies are a
                    // cache of its blobs (an instance that died left them).
                    let spill = layout.spill_dir(&name);
                    if spill.exists() {
                        if !dry_run {
                            fs::remove_dir_all(&spill).at(&spill)?;
                        }
                        report.spill_dirs_removed += 1;
                    }
                    continue;
                }
                if !dry_run {
                    let dir = layout.session_dir(&name);
                    fs::remove_dir_all(&dir).at(&dir)?;
                }
                drop(lease);
                report.sessions_removed.push(name);
            }
        }
        Ok(report)
    }
}
