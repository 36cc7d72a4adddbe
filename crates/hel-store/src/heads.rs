//! Where a session's head is: the one place that knows.
//!
//! In a format-2 store a session's head is the last commit record of its
//! journal (objects-spec §12.3). A session written by a format-1 hel has a
//! ref file instead (`refs/sessions/<uuid>`, section 5) until its first
//! commit here, which starts its journal; from then on the journal is the
//! truth and the ref file goes. The stub ref (section 12.6) is nobody's.

use std::collections::BTreeSet;

use crate::journal::{self, CommitPayload};
use crate::layout::{Layout, STUB_SESSION};
use crate::odb::Found;
use crate::pack::Place;
use crate::snapshot::{self, Checkpoint};
use crate::{refs, ObjectId, Result, SessionId};

/// A session's head.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub id: ObjectId,
    /// What the head's commit record says (absent for a ref file's head).
    pub commit: Option<CommitPayload>,
    /// Where the head's snapshot is, when finding the head saw its record.
    pub snapshot: Option<Found>,
}

impl Head {
    pub fn deps(&self) -> BTreeSet<SessionId> {
        self.commit
            .as_ref()
            .map(|c| c.deps.clone())
            .unwrap_or_default()
    }

    pub fn seq(&self) -> u64 {
        self.commit.as_ref().map_or(0, |c| c.seq)
    }
}

/// `session`'s head, its journal opened whole (and those of the sessions
/// it depends on) so that what it names reads without a search. A journal
/// with a fault has no head this hel can tell: that is the error, naming
/// the journal and the offset (never an older head, never no session).
pub(crate) fn read(layout: &Layout, session: &SessionId) -> Result<Option<Head>> {
    if let Some(view) = layout.odb().journal(layout, session)? {
        let (head, snapshot) = {
            let v = view.read().unwrap_or_else(|p| p.into_inner());
            told(&v)?;
            (v.head.clone(), at(&v))
        };
        if let Some(c) = head {
            for dep in &c.payload.deps {
                layout.odb().journal(layout, dep)?;
            }
            return Ok(Some(Head {
                id: c.head,
                commit: Some(c.payload),
                snapshot,
            }));
        }
    }
    read_ref(layout, session)
}

/// `session`'s head, reading only the tail of its journal (listings).
pub(crate) fn read_light(layout: &Layout, session: &SessionId) -> Result<Option<Head>> {
    if let Some(dir) = layout.journals()? {
        if let Some(view) = journal::open(dir, session, journal::Mode::Head)? {
            told(&view)?;
            let snapshot = at(&view);
            if let Some(c) = view.head {
                return Ok(Some(Head {
                    id: c.head,
                    commit: Some(c.payload),
                    snapshot,
                }));
            }
        }
    }
    read_ref(layout, session)
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
pub(crate) fn writable(layout: &Layout, session: &SessionId) -> Result<()> {
    match layout.odb().journal(layout, session)? {
        Some(view) => view.read().unwrap_or_else(|p| p.into_inner()).writable(),
        None => Ok(()),
    }
}

fn read_ref(layout: &Layout, session: &SessionId) -> Result<Option<Head>> {
    if session.as_str() == STUB_SESSION {
        return Ok(None);
    }
    Ok(refs::read(layout, session)?.map(|id| Head {
        id,
        commit: None,
        snapshot: None,
    }))
}

/// Where `view` holds its head's snapshot, if the records read to find
/// the head showed it.
fn at(view: &journal::View) -> Option<Found> {
    view.head_record.map(|(offset, len)| Found::Record {
        file: std::sync::Arc::clone(&view.file),
        place: Place {
            path: view.path.clone(),
            offset,
        },
        len,
    })
}

/// The checkpoint `head` (of `session`) names: read where finding the head
/// saw it, else (a ref file's head, or a snapshot the head's records did
/// not show) wherever the store holds it, the session's journal opened.
pub(crate) fn checkpoint(layout: &Layout, session: &SessionId, head: &Head) -> Result<Checkpoint> {
    if let Some(found) = &head.snapshot {
        return snapshot::read_at(layout, &head.id, found);
    }
    if head.commit.is_some() {
        read(layout, session)?;
    }
    snapshot::read(layout, &head.id)
}

/// The sessions that have a head, and what else sits where heads are.
pub(crate) struct Listing {
    pub sessions: Vec<SessionId>,
    /// (path, what it is) of entries that are not heads.
    pub strays: Vec<(std::path::PathBuf, &'static str)>,
}

/// Every session with a journal or a ref file, sorted.
pub(crate) fn list(layout: &Layout) -> Result<Listing> {
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
            let journal = name
                .strip_suffix(&format!(".{}", journal::JOURNAL_EXT))
                .map(str::parse::<SessionId>);
            let jidx = name
                .strip_suffix(&format!(".{}", journal::JIDX_EXT))
                .map(str::parse::<SessionId>);
            match (journal, jidx, e.kind) {
                (Some(Ok(s)), _, crate::dir::Kind::File) => sessions.push(s),
                // A sidecar is a hint, never followed: fsck judges its kind.
                (_, Some(Ok(_)), _) => {}
                (_, _, kind) => strays.push((
                    dir.child_path(&name),
                    if kind == crate::dir::Kind::File {
                        "file not named like a journal"
                    } else {
                        kind.describe()
                    },
                )),
            }
        }
    }
    sessions.sort();
    sessions.dedup();
    Ok(Listing { sessions, strays })
}

/// Remove `session`'s head (its journal and sidecar, its ref file and
/// log). The caller holds its lease and the store lock exclusively, and
/// has made sure no other session needs the journal's objects.
pub(crate) fn remove(layout: &Layout, session: &SessionId) -> Result<()> {
    if let Some(dir) = layout.journals()? {
        dir.remove_tree(&journal::journal_name(session))?;
        dir.remove_tree(&journal::jidx_name(session))?;
        dir.sync()?;
    }
    refs::remove(layout, session)
}
