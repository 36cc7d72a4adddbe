//! Who depends on whom (format 4, objects-spec §5.1): the records that
//! let a delete find the sessions that need the deleted one's journal
//! without reading every head.
//!
//! A session depends on another's journal when its head may name objects
//! stored there (a fork names its base's messages; a commit may share a
//! large object): its head's commit record lists those sessions (`deps`).
//! That answers "whom does S need", but a delete asks the reverse, and
//! from commit records alone that means reading every head of the store.
//! Format 4 keeps the reverse under `refs/`:
//!
//! - `refs/dependents/<dep>/<session>`, an empty file, durable (its
//!   directory synced) before any ref publishes a head of `<session>`
//!   whose deps name `<dep>`;
//! - `refs/recorded/<session>`, an empty file, durable before the first
//!   head of `<session>`: every dependency of it is recorded so.
//!
//! A delete of D reads the heads of the sessions listed under
//! `refs/dependents/D/` and of every session that has a ref but is not
//! recorded (none, unless a format-3 hel published one while the store
//! was being upgraded: see upgrade.rs), and copies what they need, as
//! before. A record is only ever a reason to read a head: one whose
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
    let mut wrote = false;
    let mut made_dirs = false;
    let journals = layout.journals()?;
    for dep in deps.iter().filter(|d| *d != session) {
        let alive = match journals {
            Some(j) => j.kind_of(&crate::journal::journal_name(dep))?.is_some(),
            None => false,
        };
        if !alive {
            continue;
        }
        let top = match layout.dependents()? {
            Some(top) => top,
            None => {
                made_dirs = true;
                layout.dependents_create()?
            }
        };
        let (dir, new_dir) = match top.sub(dep.as_str())? {
            Some(d) => (d, false),
            None => (top.sub_create(dep.as_str(), DIR_MODE)?, true),
        };
        if touch(&dir, session)? {
            wrote = true;
            dir.sync()?;
        }
        if new_dir {
            top.sync()?;
        }
    }
    if first {
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
    let Some(top) = layout.dependents()? else {
        // The records are gone (the store makes the directory first):
        // every head is read.
        return Ok(sessions.iter().filter(|s| *s != dep).cloned().collect());
    };
    let listed: BTreeSet<SessionId> = match top.sub(dep.as_str())? {
        Some(dir) => names(&dir)?,
        None => BTreeSet::new(),
    };
    let recorded: BTreeSet<SessionId> = match layout.recorded()? {
        Some(dir) => names(dir)?,
        None => BTreeSet::new(),
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
    if let Ok(Some(top)) = layout.dependents() {
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
    let top = layout.dependents()?;
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
                Some(top) => match top.sub(dep.as_str())? {
                    Some(dir) => dir.kind_of(session.as_str())? == Some(Kind::File),
                    None => false,
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
/// (a format-3 hel published them during the upgrade: their records
/// first, then that they are recorded), then remove what names a session
/// without a head (left by a delete or a first commit a crash stopped)
/// and what is not a record. A removal that fails is left to the next gc
/// (a record too many costs a head read, never a session); the entries
/// this gc could not remove are returned, for fsck's kind of report.
pub(crate) fn tidy(
    layout: &Odb,
    heads: &[(SessionId, BTreeSet<SessionId>)],
    journals: &BTreeSet<SessionId>,
) -> Result<Vec<std::path::PathBuf>> {
    for m in missing(layout, heads, journals)? {
        let one: BTreeSet<SessionId> = [m.dep].into_iter().collect();
        record(layout, &m.session, &one, false)?;
    }
    let recorded = match layout.recorded()? {
        Some(dir) => names(dir)?,
        None => BTreeSet::new(),
    };
    for (session, deps) in heads {
        if !recorded.contains(session) {
            record(layout, session, deps, true)?;
        }
    }
    let live: BTreeSet<&SessionId> = heads.iter().map(|(s, _)| s).collect();
    let is_live = |name: Option<&str>| {
        name.and_then(|n| n.parse::<SessionId>().ok())
            .is_some_and(|s| live.contains(&s))
    };
    let mut left = Vec::new();
    let mut remove = |dir: &crate::dir::Dir, e: &crate::dir::Entry| match e.name_str() {
        Some(n) if dir.remove_tree(n).is_ok() => {}
        _ => left.push(dir.child_path(&e.name.to_string_lossy())),
    };
    if let Some(top) = layout.dependents()? {
        for e in top.entries()? {
            if e.kind != Kind::Dir || !is_live(e.name_str()) {
                remove(top, &e);
                continue;
            }
            let Some(Ok(Some(dir))) = e.name_str().map(|n| top.sub(n)) else {
                continue;
            };
            for f in dir.entries()? {
                if f.kind != Kind::File || !is_live(f.name_str()) {
                    remove(&dir, &f);
                }
            }
        }
    }
    if let Some(dir) = layout.recorded()? {
        for e in dir.entries()? {
            if e.kind != Kind::File || !is_live(e.name_str()) {
                remove(dir, &e);
            }
        }
    }
    Ok(left)
}

/// Entries under `refs/dependents/` and `refs/recorded/` that are not
/// records (section 5.1): what fsck reports as strays (gc removes them).
pub(crate) fn strays(layout: &Odb) -> Result<Vec<(std::path::PathBuf, &'static str)>> {
    let named =
        |e: &crate::dir::Entry| e.name_str().is_some_and(|n| n.parse::<SessionId>().is_ok());
    let mut out = Vec::new();
    if let Some(top) = layout.dependents()? {
        for e in top.entries()? {
            if e.kind != Kind::Dir || !named(&e) {
                out.push((top.child_path(&e.name.to_string_lossy()), e.kind.describe()));
                continue;
            }
            let Some(Ok(Some(dir))) = e.name_str().map(|n| top.sub(n)) else {
                continue;
            };
            for f in dir.entries()? {
                if f.kind != Kind::File || !named(&f) {
                    out.push((dir.child_path(&f.name.to_string_lossy()), f.kind.describe()));
                }
            }
        }
    }
    if let Some(dir) = layout.recorded()? {
        for e in dir.entries()? {
            if e.kind != Kind::File || !named(&e) {
                out.push((dir.child_path(&e.name.to_string_lossy()), e.kind.describe()));
            }
        }
    }
    Ok(out)
}

/// Record every session's dependencies from its head (the upgrade to
/// format 4, under the exclusive store lock): `heads` as in [`tidy`].
/// Everything durable when this returns.
pub(crate) fn record_all(layout: &Odb, heads: &[(SessionId, BTreeSet<SessionId>)]) -> Result<()> {
    layout.dependents_create()?;
    layout.recorded_create()?;
    if let Some(parent) = layout.refs_parent()? {
        parent.sync()?;
    }
    for (session, deps) in heads {
        record(layout, session, deps, true)?;
    }
    Ok(())
}
