//! Whether this `.hel/` was made here (objects-spec §1.4): the file
//! `.hel/identity`, read and written (the public face, taking a
//! [`crate::Store`], is `identity.rs`).
//!
//! A path a session records says nothing of whose it is: a repository can
//! commit its `.hel/` with a session saved at the very path its clones land
//! in (a CI runner's checkout, `~/src/<repo>`). What a clone, a copy or an
//! unpacked archive cannot carry is what the file system gave the
//! directories when they were made here: their device and inode numbers,
//! and the store directory's birth time. When hel makes a store it writes
//! them, with a random id, to `.hel/identity`; a store whose file names
//! the directories it is found in was made here ([`Origin::Here`]). Any
//! other store (no file, one naming other directories, one that does not
//! parse) arrived from elsewhere ([`Origin::Elsewhere`]), and every session
//! in it is *shipped*: listed and readable, never chosen when no session
//! is named, never pushed unless named, never written into the project's
//! files by undo or restore (the CLI's rules).
//!
//! The first session hel makes in a store that is not its own, and the
//! first session a pull or an import brings into one, *takes it over*
//! ([`claim`]): the identity is written anew for the directories here,
//! naming every session the store held then as shipped. Those stay
//! shipped until the user adopts them ([`adopt`]); the sessions made after
//! are the project's own. A fork of a shipped session is shipped.
//!
//! The file is untrusted input like everything in `.hel/`: read bounded
//! and parsed bounded (`hel_object::json`); anything wrong with it makes
//! the store one from elsewhere, never an error. It is written whole by
//! [`hel_fs::Dir::replace`] (a new file under `tmp/`, synced, renamed over,
//! `.hel/` synced): a crash leaves the old file or the new one.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::dir::Dir;
use crate::layout::{Layout, IDENTITY};
use crate::lock::Exclusive;
use crate::odb::Odb;
use crate::{Error, Result, SessionId};

/// The largest identity file read: 100,000 shipped sessions at 39 bytes
/// each, and the rest.
pub(crate) const FILE_MAX: u64 = 4 << 20;

/// The most sessions a take-over names as shipped. A store holding more
/// is not taken over: everything in it stays shipped (adopt or remove it).
pub(crate) const SHIPPED_MAX: usize = 100_000;

/// The parse's bound: every shipped id, and the few other values.
const LIMITS: hel_object::json::Limits = hel_object::json::Limits {
    max_values: SHIPPED_MAX as u64 + 32,
    max_depth: 3,
};

/// The file's one version.
const VERSION: u64 = 1;

/// `.hel/identity`. The fields are in the order of their keys' bytes, so
/// that serde_json's compact output is canonical JSON (objects-spec §3).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// The store directory's birth time, `[seconds, nanoseconds]` (null:
    /// its file system keeps none).
    born: Option<(i64, u32)>,
    /// 32 hex digits, random, new with each write of the file: tells one
    /// writing from another (nothing trusts it).
    id: String,
    /// Device and inode of the project directory.
    project: (u64, u64),
    /// Sessions the store held when it was taken over, not yet adopted.
    shipped: Vec<SessionId>,
    /// Device and inode of the store directory.
    store: (u64, u64),
    version: u64,
}

/// Where a store was made: the directories as the file system sees them.
#[derive(Debug, PartialEq, Eq)]
struct Place {
    born: Option<(i64, u32)>,
    project: (u64, u64),
    store: (u64, u64),
}

impl Place {
    fn of(layout: &Layout, project: &Dir) -> Result<Place> {
        Ok(Place {
            born: layout.root().birth_time()?,
            project: project.identity()?,
            store: layout.root().identity()?,
        })
    }
}

/// Whose a store's sessions are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Made here (or taken over here): every session is the project's own
    /// but those named in `shipped`.
    Here { shipped: BTreeSet<SessionId> },
    /// Not made here: every session in it is shipped.
    Elsewhere(Why),
}

/// Why a store counts as made elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// It has no identity file: it arrived with the project, or a hel
    /// that wrote none made it.
    Missing,
    /// Its identity names other directories: it was copied, cloned, or
    /// moved from another project or file system.
    Elsewhere,
    /// Its identity file cannot be read as one (what is wrong, escaped).
    Unreadable(String),
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Missing => write!(f, "it has no identity file"),
            Why::Elsewhere => write!(f, "it was made in another directory"),
            Why::Unreadable(e) => write!(f, "its identity file is unreadable ({e})"),
        }
    }
}

impl Origin {
    /// Is `session` the project's own?
    pub fn owns(&self, session: &SessionId) -> bool {
        match self {
            Origin::Here { shipped } => !shipped.contains(session),
            Origin::Elsewhere(_) => false,
        }
    }

    pub(crate) fn is_here(&self) -> bool {
        matches!(self, Origin::Here { .. })
    }
}

/// Whose the sessions of the store open as `layout` in `project` are.
pub(crate) fn origin_of(layout: &Layout, project: &Dir) -> Result<Origin> {
    let file = match read(layout) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(Origin::Elsewhere(Why::Missing)),
        Err(why) => return Ok(Origin::Elsewhere(Why::Unreadable(why))),
    };
    let found = Place {
        born: file.born,
        project: file.project,
        store: file.store,
    };
    if found != Place::of(layout, project)? {
        return Ok(Origin::Elsewhere(Why::Elsewhere));
    }
    Ok(Origin::Here {
        shipped: file.shipped.into_iter().collect(),
    })
}

/// The identity file, bounded and checked; `Err` says what is wrong.
fn read(layout: &Layout) -> std::result::Result<Option<File>, String> {
    let escaped = |s: String| s.chars().take(200).flat_map(char::escape_debug).collect();
    let bytes = match layout.root().read_file(IDENTITY, FILE_MAX) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(e) => return Err(escaped(Error::from(e).to_string())),
    };
    let file: File =
        hel_object::json::from_slice(&bytes, LIMITS).map_err(|e| escaped(e.to_string()))?;
    let hex = |s: &str| s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if file.version != VERSION || !hex(&file.id) || file.shipped.len() > SHIPPED_MAX {
        return Err("not an identity of version 1".into());
    }
    Ok(Some(file))
}

/// Write the identity of the store open as `layout` in `project`, naming
/// `shipped` as shipped: whole, durably, replacing what was there.
fn write(layout: &Layout, project: &Dir, shipped: Vec<SessionId>) -> Result<()> {
    let place = Place::of(layout, project)?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let file = File {
        born: place.born,
        id: id.clone(),
        project: place.project,
        shipped,
        store: place.store,
        version: VERSION,
    };
    let mut bytes = serde_json::to_vec(&file)
        .map_err(|e| Error::Internal(format!("identity not encoded: {e}")))?;
    bytes.push(b'\n');
    let tmp = layout.tmp_create()?;
    crate::failpoint::kill("identity-write");
    layout
        .root()
        .replace(IDENTITY, &bytes, 0o644, tmp, &format!("identity-{id}"))?;
    crate::failpoint::kill("identity-written");
    Ok(())
}

/// Give a store being made its identity: called when it has no `format`
/// file yet. A store that already holds a session (none made here ever
/// does before its `format` file is written) is left without one.
pub(crate) fn made(layout: &Layout, project: &Dir) -> Result<()> {
    if layout.root().kind_of(IDENTITY)?.is_some() || !all_sessions(layout)?.is_empty() {
        return Ok(());
    }
    write(layout, project, Vec::new())
}

/// Before a session is made in the store (`also` the new session's id
/// when it is a fork of a shipped session): take over a store that was
/// not made here, naming every session it holds as shipped (and `also`).
/// Nothing to do in a store made here, unless `also` is given.
pub(crate) fn claim(layout: &Odb, project: &Dir, also: Option<&SessionId>) -> Result<()> {
    if also.is_none() && origin_of(layout, project)?.is_here() {
        return Ok(());
    }
    // Under the store lock: a second process taking over at the same time
    // waits, then finds the store taken (and its new session not shipped).
    let _lock = if layout.lock_held() {
        None
    } else {
        Some(Exclusive::take(layout)?)
    };
    let mut shipped = match origin_of(layout, project)? {
        Origin::Here { .. } if also.is_none() => return Ok(()),
        Origin::Here { shipped } => shipped,
        Origin::Elsewhere(_) => all_sessions(layout)?,
    };
    shipped.extend(also.cloned());
    if shipped.len() > SHIPPED_MAX {
        return Ok(());
    }
    write(layout, project, shipped.into_iter().collect())
}

/// Make sessions of the store open as `layout` in `project` its own:
/// those of `only`, or every one. A store not made here becomes this
/// directory's. Gives how many sessions were shipped and are now its own.
pub(crate) fn adopt(layout: &Odb, project: &Dir, only: Option<&[SessionId]>) -> Result<usize> {
    let _lock = Exclusive::take(layout)?;
    let all = all_sessions(layout)?;
    let shipped: BTreeSet<SessionId> = match origin_of(layout, project)? {
        Origin::Here { shipped } => shipped.intersection(&all).cloned().collect(),
        Origin::Elsewhere(_) => all,
    };
    let keep: BTreeSet<SessionId> = match only {
        Some(ids) => shipped
            .iter()
            .filter(|s| !ids.contains(s))
            .cloned()
            .collect(),
        None => BTreeSet::new(),
    };
    if keep.len() > SHIPPED_MAX {
        return Err(Error::Internal(format!(
            "{} sessions would stay shipped, more than an identity names ({SHIPPED_MAX}): adopt them all, or delete some",
            keep.len()
        )));
    }
    let adopted = shipped.len() - keep.len();
    write(layout, project, keep.into_iter().collect())?;
    Ok(adopted)
}

/// Name `session` shipped again (an undo of its adoption, oplog.rs): in
/// the identity of a store made here, beside those shipped already.
pub(crate) fn ship(layout: &Odb, project: &Dir, session: &SessionId) -> Result<()> {
    let _lock = Exclusive::take(layout)?;
    let mut shipped = match origin_of(layout, project)? {
        Origin::Here { shipped } => shipped,
        Origin::Elsewhere(_) => return Ok(()),
    };
    if shipped.insert(session.clone()) && shipped.len() <= SHIPPED_MAX {
        write(layout, project, shipped.into_iter().collect())?;
    }
    Ok(())
}

/// Every session the store holds anything of: a ref, a journal or a
/// working directory.
fn all_sessions(layout: &Layout) -> Result<BTreeSet<SessionId>> {
    let mut out = BTreeSet::new();
    if let Some(refs) = layout.refs()? {
        out.extend(names(refs)?);
    }
    if let Some(dir) = layout.journals()? {
        out.extend(names(dir)?);
    }
    if let Some(dir) = layout.sessions()? {
        out.extend(names(dir)?);
    }
    out.retain(|s| s.as_str() != crate::layout::STUB_SESSION);
    Ok(out)
}

/// The sessions `dir`'s entries are named after (`<uuid>` or
/// `<uuid>.<ext>`), whatever each entry is.
fn names(dir: &Dir) -> Result<Vec<SessionId>> {
    Ok(dir
        .entries()?
        .iter()
        .filter_map(|e| e.name_str())
        .filter_map(|n| n.split('.').next()?.parse().ok())
        .collect())
}
