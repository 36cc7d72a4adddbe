//! Who depends on whom (objects-spec §6.2): the records that
//! let a delete find the sessions that need the deleted one's journal
//! without reading every head.
//!
//! A session depends on another's journal when its head may name objects
//! stored there (a fork names its base's messages; a commit may share a
//! large object): its head's commit record lists those sessions (`deps`).
//! That answers "whom does S need", but a delete asks the reverse, and
//! from commit records alone that means reading every head of the store.
//! The store keeps the reverse under `refs/`:
//!
//! - `refs/dependents/<dep>/<session>`, an empty file, durable (its
//!   directory synced) before any ref publishes a head of `<session>`
//!   whose deps name `<dep>`;
//! - `refs/recorded/<session>`, an empty file, durable before the first
//!   head of `<session>`: every dependency of it is recorded so.
//!
//! A delete of D reads the heads of the sessions listed under
//! `refs/dependents/D/` and of every session that has a ref but is not
//! recorded (none, unless its record was lost), and copies what they
//! need. A record is only ever a reason to read a head: one whose
//! session is gone, or whose head does not name the dependency, costs
//! that read and nothing else, so records are written before what they
//! describe and removed after it (a crash leaves one too many, never one
//! too few). gc removes the records of sessions that have no head and
//! writes any that a recorded session's head says are missing; fsck
//! reports those missing.
//!
//! All of it is written and read under the store lock: records with the
//! commit that needs them (shared), the reverse read by a delete
//! (exclusive), so a delete never runs between a record and its head.

use std::collections::BTreeSet;

use crate::dir::Kind;
use crate::layout::DIR_MODE;
use crate::odb::Odb;
use crate::{Result, SessionId};

/// Make durable that `session` depends on each of `deps` whose journal
/// exists (one without a journal was deleted: nothing of it can be deleted
/// again, and a session of its id that comes back is recorded by the
/// first commit after), and, with `first` (its first head is about to be
/// published), that its dependencies are all recorded. Nothing is written
/// for a record that exists; a look per dependency otherwise. True when
/// anything was written.
pub(crate) fn record(
    layout: &Odb,
    session: &SessionId,
    deps: &BTreeSet<SessionId>,
    first: bool,
) -> Result<bool> {
    record_as(layout, session, deps, first, false)
}

/// [`record`]; `mend` (gc) makes `refs/dependents/` when it
/// is absent and replaces what is not a directory under it. A commit
/// (`mend` false) leaves both alone and writes no record there: while
/// they are so every delete reads every head, and only a gc, which first
/// takes back every session's `refs/recorded/` entry, may make them again
/// ([`tidy`]).
fn record_as(
    layout: &Odb,
    session: &SessionId,
    deps: &BTreeSet<SessionId>,
    first: bool,
    mend: bool,
) -> Result<bool> {
    let mut wrote = false;
    let mut made_dirs = false;
    // A record this commit could not write (see above).
    let mut skipped = false;
    let mut alive = Vec::new();
    if let Some(j) = layout.journals()? {
        for dep in deps.iter().filter(|d| *d != session) {
            if j.kind_of(&crate::journal::journal_name(dep))?.is_some() {
                alive.push(dep);
            }
        }
    }
    let top = if alive.is_empty() {
        None
    } else {
        match layout.dependents_now() {
            Ok(Some(top)) => Some(top),
            Ok(None) if mend => {
                made_dirs = true;
                Some(make_top(layout)?)
            }
            Err(e) if mend => return Err(e),
            _ => {
                skipped = true;
                None
            }
        }
    };
    if let Some(top) = &top {
        for dep in alive {
            let made: Result<_> = match top.sub(dep.as_str()) {
                Ok(Some(d)) => Ok((d, false)),
                Ok(None) => top
                    .sub_create(dep.as_str(), DIR_MODE)
                    .map(|d| (d, true))
                    .map_err(crate::Error::from),
                Err(_) if mend => {
                    top.remove_tree(dep.as_str())?;
                    top.sub_create(dep.as_str(), DIR_MODE)
                        .map(|d| (d, true))
                        .map_err(crate::Error::from)
                }
                Err(e) => Err(e.into()),
            };
            // A commit that cannot write a record (the directory replaced or
            // removed under it) leaves the session unrecorded instead.
            let written = made.and_then(|(dir, new_dir)| {
                let w = touch(&dir, session)?;
                if w {
                    dir.sync()?;
                }
                if new_dir {
                    top.sync()?;
                }
                Ok(w)
            });
            match written {
                Ok(w) => wrote |= w,
                Err(e) if mend => return Err(e),
                Err(_) => skipped = true,
            }
        }
    }
    if skipped {
        // Not all of its records are there: the session is not recorded
        // (taken back, durably, if it was), so every delete reads its head.
        if let Some(dir) = layout.recorded()? {
            if dir.kind_of(session.as_str())?.is_some() {
                dir.remove_tree(session.as_str())?;
                dir.sync()?;
            }
        }
    } else if first {
        let dir = match layout.recorded()? {
            Some(d) => d,
            None => {
                made_dirs = true;
                layout.recorded_create()?
            }
        };
        if touch(dir, session)? {
            wrote = true;
            dir.sync()?;
        }
    }
    if made_dirs {
        // `refs/dependents` or `refs/recorded` made just now: durable in
        // `refs/` too.
        if let Some(parent) = layout.refs_parent()? {
            parent.sync()?;
        }
    }
    Ok(wrote)
}

/// Make `refs/dependents/` (by name: it is never kept open).
fn make_top(layout: &Odb) -> Result<crate::dir::Dir> {
    layout
        .refs_parent_create()?
        .sub_create(crate::layout::DEPENDENTS, DIR_MODE)
        .map_err(crate::Error::from)
}

/// Create the empty file `session` in `dir` unless it is there: true when
/// it was created (the directory then needs a sync).
fn touch(dir: &crate::dir::Dir, session: &SessionId) -> Result<bool> {
    match dir.kind_of(session.as_str())? {
        Some(Kind::File) => Ok(false),
        Some(_) => {
            // Not a record: replaced by one.
            dir.remove_tree(session.as_str())?;
            dir.create_new(session.as_str(), 0o600)?;
            Ok(true)
        }
        None => {
            dir.create_new(session.as_str(), 0o600)?;
            Ok(true)
        }
    }
}

/// The sessions among `sessions` (those with a head) whose head may name
/// objects of `dep`'s journal: the ones recorded as its dependents, and
/// every one not recorded at all. A superset: the caller reads each head.
pub(crate) fn candidates(
    layout: &Odb,
    dep: &SessionId,
    sessions: &[SessionId],
) -> Result<Vec<SessionId>> {
    let every = || Ok(sessions.iter().filter(|s| *s != dep).cloned().collect());
    // The records gone (the store makes the directory first), or anything
    // but a directory where they belong: every head is read (gc mends
    // them).
    let Ok(Some(top)) = layout.dependents_now() else {
        return every();
    };
    let listed: BTreeSet<SessionId> = match top.sub(dep.as_str()) {
        Ok(Some(dir)) => match names(&dir) {
            Ok(n) => n,
            Err(_) => return every(),
        },
        Ok(None) => BTreeSet::new(),
        Err(_) => return every(),
    };
    let recorded: BTreeSet<SessionId> = match layout.recorded() {
        Ok(Some(dir)) => names(dir).unwrap_or_default(),
        _ => BTreeSet::new(),
    };
    Ok(sessions
        .iter()
        .filter(|s| *s != dep && (listed.contains(*s) || !recorded.contains(*s)))
        .cloned()
        .collect())
}

/// The regular files in `dir` named by session ids.
fn names(dir: &crate::dir::Dir) -> Result<BTreeSet<SessionId>> {
    Ok(dir
        .entries()?
        .into_iter()
        .filter(|e| e.kind == Kind::File)
        .filter_map(|e| e.name_str().and_then(|n| n.parse().ok()))
        .collect())
}

/// After `session`'s head is gone: its records (that it depends on each
/// of `deps`, that others depend on it, that it is recorded), as far as
/// they go. Not synced, and a failure is not the delete's (the session is
/// gone already): one left behind is only a head read by a later delete,
/// and gc removes it.
pub(crate) fn forget(layout: &Odb, session: &SessionId, deps: &BTreeSet<SessionId>) {
    if let Ok(Some(top)) = layout.dependents_now() {
        for dep in deps {
            if let Ok(Some(dir)) = top.sub(dep.as_str()) {
                let _ = dir.remove_tree(session.as_str());
            }
        }
        let _ = top.remove_tree(session.as_str());
    }
    if let Ok(Some(dir)) = layout.recorded() {
        let _ = dir.remove_tree(session.as_str());
    }
}

/// A record a recorded session's head needs and the store lacks:
/// `refs/dependents/<dep>/<session>`.
pub(crate) struct Missing {
    pub session: SessionId,
    pub dep: SessionId,
}

/// The records `heads` (each session with a head, and its head's deps)
/// need and lack: for every recorded session, each dependency whose
/// journal is still there without its record. A dependency without a
/// journal (deleted) needs none: nothing of it can be deleted again.
/// `journals` are the sessions that have one.
pub(crate) fn missing(
    layout: &Odb,
    heads: &[(SessionId, BTreeSet<SessionId>)],
    journals: &BTreeSet<SessionId>,
) -> Result<Vec<Missing>> {
    let recorded = match layout.recorded()? {
        Some(dir) => names(dir)?,
        None => BTreeSet::new(),
    };
    let top = layout.dependents_now().ok().flatten();
    let mut out = Vec::new();
    for (session, deps) in heads {
        if !recorded.contains(session) {
            continue;
        }
        for dep in deps {
            if dep == session || !journals.contains(dep) {
                continue;
            }
            let there = match top {
                Some(ref top) => match top.sub(dep.as_str()) {
                    Ok(Some(dir)) => {
                        matches!(dir.kind_of(session.as_str()), Ok(Some(Kind::File)))
                    }
                    _ => false,
                },
                None => false,
            };
            if !there {
                out.push(Missing {
                    session: session.clone(),
                    dep: dep.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// Where record `m` belongs, for messages.
pub(crate) fn path_of(layout: &Odb, m: &Missing) -> std::path::PathBuf {
    layout
        .refs_path()
        .join(crate::layout::DEPENDENTS)
        .join(m.dep.as_str())
        .join(m.session.as_str())
}

/// gc's part (under the exclusive store lock): write the records `heads`
/// need and lack (as [`missing`] says), record the sessions that are not
/// (their records first, then that they are recorded), then remove what names a session
/// without a head (left by a delete or a first commit a crash stopped)
/// and what is not a record.
pub(crate) fn tidy(
    layout: &Odb,
    heads: &[(SessionId, BTreeSet<SessionId>)],
    journals: &BTreeSet<SessionId>,
) -> Result<()> {
    if !matches!(layout.dependents_now(), Ok(Some(_))) {
        // The records are gone, or something else stands there: no
        // session's `refs/recorded/` entry can be trusted once the
        // directory is made again. Taken back first (synced), so that a
        // crash below leaves sessions unrecorded (their heads read by
        // every delete), never recorded without their records.
        if let Some(parent) = layout.refs_parent()? {
            if parent.kind_of(crate::layout::DEPENDENTS)?.is_some() {
                parent.remove_tree(crate::layout::DEPENDENTS)?;
            }
        }
        if let Some(dir) = layout.recorded()? {
            for e in dir.entries()? {
                if let Some(n) = e.name_str() {
                    dir.remove_tree(n)?;
                }
            }
            dir.sync()?;
        }
        make_top(layout)?;
        if let Some(parent) = layout.refs_parent()? {
            parent.sync()?;
        }
    }
    for m in missing(layout, heads, journals)? {
        let one: BTreeSet<SessionId> = [m.dep].into_iter().collect();
        record_as(layout, &m.session, &one, false, true)?;
    }
    let recorded = match layout.recorded()? {
        Some(dir) => names(dir)?,
        None => BTreeSet::new(),
    };
    for (session, deps) in heads {
        if !recorded.contains(session) {
            record_as(layout, session, deps, true, true)?;
        }
    }
    // Removed: what names a session without a head, and what is not a
    // record. One that cannot be removed (a name that is not UTF-8, a tree
    // too deep) is left: fsck names it, and a record too many costs a
    // head read, never a session.
    let live: BTreeSet<&SessionId> = heads.iter().map(|(s, _)| s).collect();
    each_entry(layout, &mut |dir, e, record| {
        let keep = record.as_ref().is_some_and(|s| live.contains(s));
        if !keep {
            if let Some(n) = e.name_str() {
                let _ = dir.remove_tree(n);
            }
        }
        keep
    })
}

/// Entries under `refs/dependents/` and `refs/recorded/` that are not
/// records (section 5.1): what fsck reports as strays (gc removes them).
pub(crate) fn strays(layout: &Odb) -> Result<Vec<(std::path::PathBuf, &'static str)>> {
    let mut out = Vec::new();
    each_entry(layout, &mut |dir, e, record| {
        if record.is_none() {
            out.push((dir.child_path(&e.name.to_string_lossy()), e.kind.describe()));
        }
        record.is_some()
    })?;
    Ok(out)
}

/// Visit every entry of `refs/dependents/` (directories named by session
/// ids), of each such directory (regular files named by session ids) and
/// of `refs/recorded/` (the same), with the session it names when it is
/// of its kind and named so (`None`: not a record). A directory of
/// `refs/dependents/` is entered when `visit` returns true for it.
fn each_entry(
    layout: &Odb,
    visit: &mut dyn FnMut(&crate::dir::Dir, &crate::dir::Entry, Option<SessionId>) -> bool,
) -> Result<()> {
    let named = |e: &crate::dir::Entry, kind: Kind| {
        (e.kind == kind)
            .then(|| e.name_str().and_then(|n| n.parse::<SessionId>().ok()))
            .flatten()
    };
    if let Some(top) = layout.dependents_now()? {
        for e in top.entries()? {
            if !visit(&top, &e, named(&e, Kind::Dir)) {
                continue;
            }
            let Some(Ok(Some(dir))) = e.name_str().map(|n| top.sub(n)) else {
                continue;
            };
            for f in dir.entries()? {
                visit(&dir, &f, named(&f, Kind::File));
            }
        }
    }
    if let Some(dir) = layout.recorded()? {
        for e in dir.entries()? {
            visit(dir, &e, named(&e, Kind::File));
        }
    }
    Ok(())
}
