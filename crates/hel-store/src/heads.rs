//! Where a session's head is: the one place that knows.
//!
//! A session's head is its ref file (`refs/sessions/<uuid>`,
//! objects-spec §6.1), and a session exists exactly when its ref does. Its
//! journal's commit records are the ref's log: the *ref's commit record*
//! (the last one publishing what the ref names) carries what listings show
//! and the `deps` a delete needs. A ref whose journal does not back it is
//! a fault naming both (see `journal::cut_at_ref`), never an older head;
//! so is a ref without a journal (a session's first commit makes its
//! journal before its ref).
//!
//! The ref [`STUB_SESSION`] that pre-release stores hold is nobody's.

use std::collections::BTreeSet;

use crate::journal::{self, CommitPayload};
use crate::layout::STUB_SESSION;
use crate::odb::Found;
use crate::odb::Odb;
use crate::pack::Place;
use crate::snapshot::Checkpoint;
use crate::{refs, Error, ObjectId, Result, SessionId};

/// A session's head.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub id: ObjectId,
    /// What the head's commit record says.
    pub commit: CommitPayload,
    /// Where the head's snapshot is, when finding the head saw its record.
    pub snapshot: Option<Found>,
}

impl Head {
    pub fn deps(&self) -> BTreeSet<SessionId> {
        self.commit.deps.clone()
    }

    pub fn seq(&self) -> u64 {
        self.commit.seq
    }
}

/// `session`'s head, its journal opened whole (and those of the sessions
/// it depends on) so that what it names reads without a search. A journal
/// with a fault, or one that does not back the ref, is the error, naming
/// the journal and the offset (never an older head, never no session); a
/// malformed ref is the error naming the ref.
pub(crate) fn read(layout: &Odb, session: &SessionId) -> Result<Option<Head>> {
    read_by_ref(layout, session, journal::Mode::Full)
}

/// The head of `session`, which is in the trash: its journal read whole
/// by the rule of its trash entry's head (`odb::published`). `None` when
/// it has no journal, or the journal publishes nothing.
pub(crate) fn read_trashed(layout: &Odb, session: &SessionId) -> Result<Option<Head>> {
    let Some(view) = layout.index().journal(layout, session)? else {
        return Ok(None);
    };
    let (commit, snapshot) = {
        let v = view.read().unwrap_or_else(|p| p.into_inner());
        told(&v)?;
        let journal::Rule::Ref(Some(_)) = v.rule else {
            return Ok(None);
        };
        (v.head.clone(), at(&v))
    };
    let Some(commit) = commit else {
        return Ok(None);
    };
    for dep in &commit.payload.deps {
        layout.index().journal(layout, dep)?;
    }
    Ok(Some(Head {
        id: commit.head,
        commit: commit.payload,
        snapshot,
    }))
}

/// `session`'s head, listed or in the trash.
pub(crate) fn read_any(layout: &Odb, session: &SessionId) -> Result<Option<Head>> {
    match read(layout, session)? {
        Some(h) => Ok(Some(h)),
        None if crate::trashed::has_any(layout, session)? => read_trashed(layout, session),
        None => Ok(None),
    }
}

/// `session`'s head, reading only the tail of its journal (listings).
pub(crate) fn read_light(layout: &Odb, session: &SessionId) -> Result<Option<Head>> {
    read_by_ref(layout, session, journal::Mode::Head)
}

/// The ref, then its journal (`Mode::Full` through the object database,
/// `Mode::Head` on its own for a listing) for the ref's commit record.
fn read_by_ref(layout: &Odb, session: &SessionId, mode: journal::Mode) -> Result<Option<Head>> {
    if session.as_str() == STUB_SESSION {
        return Ok(None);
    }
    let Some(first) = refs::read(layout, session)? else {
        return Ok(None);
    };
    let view = if mode == journal::Mode::Full {
        layout.index().journal(layout, session)?.map(|view| {
            let v = view.read().unwrap_or_else(|p| p.into_inner());
            told(&v).map(|()| (v.rule, v.head.clone(), at(&v)))
        })
    } else {
        let read_ref = || refs::read(layout, session);
        match layout.journals()? {
            Some(dir) => {
                journal::open_by_ref(dir, session, mode, Some(first), &read_ref)?.map(|v| {
                    told(&v).map(|()| {
                        let snapshot = at(&v);
                        (v.rule, v.head, snapshot)
                    })
                })
            }
            None => None,
        }
    };
    let Some(view) = view else {
        return no_journal(layout, session);
    };
    let (rule, commit, snapshot) = view?;
    // The ref as the journal was read by: as new as the one read above.
    let journal::Rule::Ref(Some(id)) = rule else {
        // Removed since (a delete): no session.
        return Ok(None);
    };
    // A journal with no commit record (made, never written): nothing
    // publishes what the ref names.
    let Some(commit) = commit else {
        return Err(no_commit(layout, session, id));
    };
    if mode == journal::Mode::Full {
        for dep in &commit.payload.deps {
            layout.index().journal(layout, dep)?;
        }
    }
    // The journal's head: what the ref names, or the one commit past it
    // that is read as published (`journal::View::behind`).
    Ok(Some(Head {
        id: commit.head,
        commit: commit.payload,
        snapshot,
    }))
}

/// A session whose ref was read and whose journal is not there: removed
/// since by a delete (the ref goes first: no session), else a fault
/// naming the ref.
fn no_journal(layout: &Odb, session: &SessionId) -> Result<Option<Head>> {
    match refs::read(layout, session)? {
        None => Ok(None),
        Some(id) => Err(no_commit(layout, session, id)),
    }
}

/// The fault of `session`'s ref naming `id` when no commit record of its
/// journal (absent, or empty) publishes it.
fn no_commit(layout: &Odb, session: &SessionId, id: ObjectId) -> Error {
    Error::BadRef {
        session: session.to_string(),
        path: layout.ref_path(session.as_str()),
        reason: crate::RefError::NoJournal {
            checkpoint: Box::new(id),
        },
    }
}

/// `Err` when `view` cannot tell its session's head: a fault, or no commit
/// record this hel knows beside records of a newer hel.
fn told(view: &journal::View) -> Result<()> {
    if let Some(e) = view.fault_error() {
        return Err(e);
    }
    match view.newer_error() {
        Some(e) if view.head.is_none() => Err(e),
        _ => Ok(()),
    }
}

/// `Ok` when this hel may append to `session`'s journal (or it has none
/// yet): no fault, nothing a newer hel wrote. Checked before a session is
/// resumed, so that an instance never works for an answer it cannot save.
pub(crate) fn writable(layout: &Odb, session: &SessionId) -> Result<()> {
    match layout.index().journal(layout, session)? {
        Some(view) => view.read().unwrap_or_else(|p| p.into_inner()).writable(),
        None => Ok(()),
    }
}

/// Where `view` holds its head's snapshot, if the records read to find
/// the head showed it.
fn at(view: &journal::View) -> Option<Found> {
    view.head_record.map(|(offset, len)| Found {
        file: std::sync::Arc::clone(&view.file),
        place: Place {
            path: view.path.clone(),
            offset,
        },
        len,
    })
}

/// The checkpoint `head` (of `session`) names: read where finding the head
/// saw it, else (a snapshot the head's records did not show) wherever the
/// store holds it, the session's journal opened.
pub(crate) fn checkpoint(layout: &Odb, session: &SessionId, head: &Head) -> Result<Checkpoint> {
    if let Some(found) = &head.snapshot {
        return crate::read::snapshot_at(layout, &head.id, found);
    }
    read(layout, session)?;
    crate::read::snapshot(layout, &head.id)
}

/// `Ok` when the checkpoint `head` names is `session`'s own, or does not
/// read (whoever reads it next reports why); else the fault naming the
/// ref (objects-spec §6.1): a ref copied from another session, whose
/// history is not this session's, is never handed out as its head.
pub(crate) fn owned(layout: &Odb, session: &SessionId, head: &Head) -> Result<()> {
    match checkpoint(layout, session, head) {
        Ok(cp) => owner_is(layout, session, head, &cp),
        Err(_) => Ok(()),
    }
}

/// `Ok` when `cp`, the checkpoint `head` names, is `session`'s own.
pub(crate) fn owner_is(
    layout: &Odb,
    session: &SessionId,
    head: &Head,
    cp: &Checkpoint,
) -> Result<()> {
    if cp.session_id == *session {
        return Ok(());
    }
    Err(Error::BadRef {
        session: session.to_string(),
        path: layout.ref_path(session.as_str()),
        reason: crate::RefError::OtherSession {
            checkpoint: Box::new(head.id),
            owner: cp.session_id.clone(),
        },
    })
}

/// The sessions that have a head, and what else sits where heads are.
pub(crate) struct Listing {
    pub sessions: Vec<SessionId>,
    /// (path, what it is) of entries that are not heads.
    pub strays: Vec<(std::path::PathBuf, &'static str)>,
}

/// Every session (those with a ref: a journal without one is no session,
/// see [`orphans`]), sorted, and what else sits where heads are.
pub(crate) fn list(layout: &Odb) -> Result<Listing> {
    let refs = refs::list(layout)?;
    let mut sessions: Vec<SessionId> = refs
        .sessions
        .into_iter()
        .filter(|s| s.as_str() != STUB_SESSION)
        .collect();
    let mut strays: Vec<(std::path::PathBuf, &'static str)> = refs
        .strays
        .into_iter()
        .map(|(name, what)| (layout.ref_path(&name), what))
        .collect();
    if let Some(dir) = layout.journals()? {
        for e in dir.entries()? {
            let name = e.name.to_string_lossy().into_owned();
            let named = |ext: &str| {
                name.strip_suffix(&format!(".{ext}"))
                    .is_some_and(|s| s.parse::<SessionId>().is_ok())
            };
            let file = e.kind == crate::dir::Kind::File;
            // A sidecar is a hint, never followed: fsck judges its kind. A
            // delete's marker is only ever looked up by name.
            if (named(journal::JOURNAL_EXT) && file)
                || named(journal::JIDX_EXT)
                || (named(journal::DELETED_EXT) && file)
            {
                continue;
            }
            strays.push((
                dir.child_path(&name),
                if file {
                    "file not named like a journal"
                } else {
                    e.kind.describe()
                },
            ));
        }
    }
    sessions.sort();
    sessions.dedup();
    Ok(Listing { sessions, strays })
}

/// The sessions that have a head, sorted: [`list`]'s, without reading
/// `packs/journals/`, so that a listing reads one directory of heads.
pub(crate) fn sessions(layout: &Odb) -> Result<Vec<SessionId>> {
    let mut out = refs::list(layout)?.sessions;
    out.retain(|s| s.as_str() != STUB_SESSION);
    Ok(out)
}

/// The sessions whose journal is a regular file (every journal fsck and
/// gc look at), sorted.
pub(crate) fn journals(layout: &Odb) -> Result<Vec<SessionId>> {
    let mut out = Vec::new();
    if let Some(dir) = layout.journals()? {
        for e in dir.entries()? {
            if e.kind != crate::dir::Kind::File {
                continue;
            }
            if let Some(Ok(s)) = e
                .name_str()
                .and_then(|n| n.strip_suffix(&format!(".{}", journal::JOURNAL_EXT)))
                .map(str::parse::<SessionId>)
            {
                out.push(s);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Journals that no ref publishes: the first commit of a session that
/// never published, or a delete interrupted after its ref went. No
/// session's; gc removes them once what refs reach is copied.
pub(crate) fn orphans(layout: &Odb) -> Result<Vec<SessionId>> {
    let Some(refs) = layout.refs()? else {
        return journals(layout);
    };
    let mut out = Vec::new();
    for s in journals(layout)? {
        // A session in the trash (or anything in its trash entry's place,
        // which gc refuses over) keeps its journal.
        // (A trash/ that cannot be read keeps them all: gc refuses over it.)
        if refs.kind_of(s.as_str())?.is_none()
            && !crate::trashed::has_any(layout, &s).unwrap_or(true)
        {
            out.push(s);
        }
    }
    Ok(out)
}

/// Remove `session`'s head: first its ref, made durable, so the
/// session is gone from then on; then its journal and sidecar (a crash in
/// between leaves a journal without a ref, which gc removes). The caller
/// holds its lease and the store lock exclusively, and has made sure no
/// other session needs the journal's objects.
///
/// Before the ref goes, a session with a journal gets a delete marker
/// (`<uuid>.deleted` beside it, synced): a journal without a ref and
/// without a marker that holds more than one commit is a lost ref, which
/// readers report as a fault and gc never removes.
pub(crate) fn remove(layout: &Odb, session: &SessionId) -> Result<()> {
    let journals = layout.journals()?;
    let marker = journal::deleted_name(session);
    if let Some(dir) = &journals {
        if dir.kind_of(&journal::journal_name(session))?.is_some() {
            // Only a regular file is a marker: anything else in its place
            // goes first.
            match dir.kind_of(&marker)? {
                Some(crate::dir::Kind::File) => {}
                other => {
                    if other.is_some() {
                        dir.remove_tree(&marker)?;
                    }
                    dir.create_new(&marker, 0o600)?;
                    dir.sync()?;
                }
            }
        }
    }
    refs::remove(layout, session)?;
    // A session deleted from the trash: its entry goes after the marker
    // (the journal is a delete's leftover from then on).
    crate::trashed::remove(layout, session)?;
    crate::failpoint::kill("remove-journal");
    if let Some(dir) = &journals {
        dir.remove_tree(&journal::journal_name(session))?;
        dir.remove_tree(&journal::jidx_name(session))?;
        dir.remove_tree(&marker)?;
        dir.sync()?;
    }
    Ok(())
}
