//! Who depends on whom (format 4, objects-spec §5.3): the records that
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

/// Make durable that `session` depends on each of `deps`, and, with
/// `first` (its first head is about to be published), that its
/// dependencies are all recorded. Nothing is written for a record that
/// exists.
pub(crate) fn record(
    layout: &Odb,
    session: &SessionId,
    deps: &BTreeSet<SessionId>,
    first: bool,
) -> Result<()> {
    let mut made_dirs = layout.dependents()?.is_none() || layout.recorded()?.is_none();
    if deps.iter().any(|d| d != session) {
        let top = layout.dependents_create()?;
        let mut new_dir = false;
        for dep in deps.iter().filter(|d| *d != session) {
            let dir = match top.sub(dep.as_str())? {
                Some(d) => d,
                None => {
                    new_dir = true;
                    top.sub_create(dep.as_str(), DIR_MODE)?
                }
            };
            if touch(&dir, session)? {
                dir.sync()?;
            }
        }
        if new_dir {
            top.sync()?;
        }
    }
    if first {
        let dir = layout.recorded_create()?;
        if touch(dir, session)? {
            dir.sync()?;
        }
    } else {
        made_dirs = false;
    }
    if made_dirs {
        // `refs/dependents` or `refs/recorded` made just now: durable in
        // `refs/` too.
        if let Some(parent) = layout.refs_parent()? {
            parent.sync()?;
        }
    }
    Ok(())
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
    let listed: BTreeSet<SessionId> = match layout.dependents()? {
        Some(top) => match top.sub(dep.as_str())? {
            Some(dir) => names(&dir)?,
            None => BTreeSet::new(),
        },
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
/// of `deps`, that others depend on it, that it is recorded). Not synced:
/// one left behind is only a head read by a later delete, and gc's.
pub(crate) fn forget(layout: &Odb, session: &SessionId, deps: &BTreeSet<SessionId>) -> Result<()> {
    if let Some(top) = layout.dependents()? {
        for dep in deps {
            if let Some(dir) = top.sub(dep.as_str())? {
                dir.remove_tree(session.as_str())?;
            }
        }
        top.remove_tree(session.as_str())?;
    }
    if let Some(dir) = layout.recorded()? {
        dir.remove_tree(session.as_str())?;
    }
    Ok(())
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
/// need and lack (as [`missing`] says), then remove those naming a session without a head
/// (left by a delete or a first commit a crash stopped). Returns how many
/// it removed.
pub(crate) fn tidy(
    layout: &Odb,
    heads: &[(SessionId, BTreeSet<SessionId>)],
    journals: &BTreeSet<SessionId>,
) -> Result<u64> {
    for m in missing(layout, heads, journals)? {
        let one: BTreeSet<SessionId> = [m.dep].into_iter().collect();
        record(layout, &m.session, &one, false)?;
    }
    let live: BTreeSet<&SessionId> = heads.iter().map(|(s, _)| s).collect();
    let mut removed = 0u64;
    if let Some(top) = layout.dependents()? {
        for e in top.entries()? {
            let name = e.name.to_string_lossy().into_owned();
            let dep = name.parse::<SessionId>().ok();
            if e.kind != Kind::Dir || !dep.as_ref().is_some_and(|d| live.contains(d)) {
                removed += top.remove_tree(&name)?;
                continue;
            }
            let Some(dir) = top.sub(&name)? else { continue };
            for f in dir.entries()? {
                let n = f.name.to_string_lossy().into_owned();
                let ok =
                    f.kind == Kind::File && n.parse::<SessionId>().is_ok_and(|s| live.contains(&s));
                if !ok {
                    removed += dir.remove_tree(&n)?;
                }
            }
        }
    }
    if let Some(dir) = layout.recorded()? {
        for e in dir.entries()? {
            let n = e.name.to_string_lossy().into_owned();
            let ok =
                e.kind == Kind::File && n.parse::<SessionId>().is_ok_and(|s| live.contains(&s));
            if !ok {
                removed += dir.remove_tree(&n)?;
            }
        }
    }
    Ok(removed)
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
