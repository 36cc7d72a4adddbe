//! Whether this `.hel/` was made here (objects-spec §1.4).
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
use crate::{Error, Result, SessionId, Store};

/// The largest identity file read: 100,000 shipped sessions at 39 bytes
/// each, and the rest.
const FILE_MAX: u64 = 4 << 20;

/// The most sessions a take-over names as shipped. A store holding more
/// is not taken over: everything in it stays shipped (adopt or remove it).
const SHIPPED_MAX: usize = 100_000;

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
    /// 32 hex digits, random: names this store (nothing trusts it alone).
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

    fn is_here(&self) -> bool {
        matches!(self, Origin::Here { .. })
    }
}

/// Whose `store`'s sessions are (a project without a store: its own).
pub fn origin(store: &Store) -> Result<Origin> {
    match store.layout()? {
        Some(layout) => origin_of(layout, store.project_dir()),
        None => Ok(Origin::Here {
            shipped: BTreeSet::new(),
        }),
    }
}

/// [`origin`] of the store open as `layout` in `project`.
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

/// Make sessions of `store` its own: those of `only`, or every one. A
/// store not made here becomes this directory's. Gives how many sessions
/// were shipped and are now its own.
pub fn adopt(store: &Store, only: Option<&[SessionId]>) -> Result<usize> {
    let Some(layout) = store.layout()? else {
        return Ok(0);
    };
    let project = store.project_dir();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A store made in a new project directory, and that directory.
    fn made() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        drop(store.new_session().unwrap());
        (dir, store)
    }

    fn here(store: &Store) -> Origin {
        origin(&Store::open(store.project_path()).unwrap()).unwrap()
    }

    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let dest = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_tree(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), &dest).unwrap();
            }
        }
    }

    /// A session's ref file, planted (what `all_sessions` counts).
    fn plant_session(root: &Path) -> SessionId {
        let id = SessionId::new_random();
        std::fs::write(root.join("refs/sessions").join(id.as_str()), b"").unwrap();
        id
    }

    #[test]
    fn a_store_made_here_is_here_and_a_copy_or_a_move_is_not() {
        let (dir, store) = made();
        let root = dir.path().join(".hel");
        let text = std::fs::read_to_string(root.join(IDENTITY)).unwrap();
        assert!(text.starts_with("{\"born\":") && text.ends_with("\"version\":1}\n"));
        assert_eq!(
            here(&store),
            Origin::Here {
                shipped: BTreeSet::new()
            }
        );
        // The same bytes in another project: made elsewhere.
        let other = tempfile::tempdir().unwrap();
        copy_tree(&root, &other.path().join(".hel"));
        let copy = Store::open(other.path()).unwrap();
        assert_eq!(origin(&copy).unwrap(), Origin::Elsewhere(Why::Elsewhere));
        // The store directory moved into another project: the same.
        let moved = tempfile::tempdir().unwrap();
        std::fs::rename(&root, moved.path().join(".hel")).unwrap();
        let there = Store::open(moved.path()).unwrap();
        assert_eq!(origin(&there).unwrap(), Origin::Elsewhere(Why::Elsewhere));
        // The whole project moved (renamed): still its own.
        let renamed = dir.path().with_extension("renamed");
        std::fs::rename(moved.path().join(".hel"), &root).unwrap();
        std::fs::rename(dir.path(), &renamed).unwrap();
        let own = Store::open(&renamed).unwrap();
        assert!(origin(&own).unwrap().is_here());
        std::fs::rename(&renamed, dir.path()).unwrap();
    }

    #[test]
    fn a_hostile_identity_file_makes_a_store_from_elsewhere_never_an_error() {
        let (dir, store) = made();
        let root = dir.path().join(".hel");
        let good = std::fs::read(root.join(IDENTITY)).unwrap();
        let text = String::from_utf8(good.clone()).unwrap();
        let set = |bytes: &[u8]| {
            let _ = std::fs::remove_file(root.join(IDENTITY));
            std::fs::write(root.join(IDENTITY), bytes).unwrap();
        };
        let unreadable =
            |store: &Store| matches!(here(store), Origin::Elsewhere(Why::Unreadable(_)));
        // A repeated key (another reader could take the other value).
        set(text.replacen("{", "{\"version\":1,", 1).as_bytes());
        assert!(unreadable(&store));
        // Unknown fields, another version, a bad id.
        set(text.replacen("{", "{\"x\":1,", 1).as_bytes());
        assert!(unreadable(&store));
        set(text.replace("\"version\":1", "\"version\":2").as_bytes());
        assert!(unreadable(&store));
        // Past the parse's bound: more shipped ids than any take-over names.
        let ids = format!("\"{}\",", SessionId::new_random()).repeat(SHIPPED_MAX + 1);
        set(text
            .replace(
                "\"shipped\":[]",
                &format!("\"shipped\":[{}]", ids.trim_end_matches(',')),
            )
            .as_bytes());
        assert!(unreadable(&store));
        // Past the read's bound, refused before it is read.
        set(&vec![b' '; FILE_MAX as usize + 1]);
        assert!(unreadable(&store));
        // Garbage, and nesting past the depth.
        set(&b"[".repeat(10_000));
        assert!(unreadable(&store));
        // A link to the good file, and a FIFO (never blocks).
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("id"), &good).unwrap();
        std::fs::remove_file(root.join(IDENTITY)).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("id"), root.join(IDENTITY)).unwrap();
        assert!(unreadable(&store));
        std::fs::remove_file(root.join(IDENTITY)).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join(IDENTITY),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(unreadable(&store));
        // A forged birth time (or none, where the file system keeps one).
        let mut forged: serde_json::Value = serde_json::from_str(&text).unwrap();
        let kept = forged["born"].clone();
        forged["born"] = serde_json::json!([1, 2]);
        set(&serde_json::to_vec(&forged).unwrap());
        assert_eq!(here(&store), Origin::Elsewhere(Why::Elsewhere));
        if !kept.is_null() {
            forged["born"] = serde_json::Value::Null;
            set(&serde_json::to_vec(&forged).unwrap());
            assert_eq!(here(&store), Origin::Elsewhere(Why::Elsewhere));
        }
        // Gone: from elsewhere.
        std::fs::remove_file(root.join(IDENTITY)).unwrap();
        assert_eq!(here(&store), Origin::Elsewhere(Why::Missing));
        // The good file again: made here.
        set(&good);
        assert!(here(&store).is_here());
    }

    #[test]
    fn a_new_session_takes_over_a_store_from_elsewhere_and_adopt_makes_its_sessions_own() {
        let (dir, _) = made();
        let other = tempfile::tempdir().unwrap();
        let root = other.path().join(".hel");
        copy_tree(&dir.path().join(".hel"), &root);
        let (a, b) = (plant_session(&root), plant_session(&root));
        let store = Store::open(other.path()).unwrap();
        assert!(!origin(&store).unwrap().owns(&a));
        // A new session: the store is taken over, what it held shipped.
        let lease = store.new_session().unwrap();
        let now = origin(&store).unwrap();
        assert!(now.owns(lease.session()) && !now.owns(&a) && !now.owns(&b));
        // (and the working directory of the session made where it came from)
        assert!(matches!(&now, Origin::Here { shipped } if shipped.len() == 3));
        drop(lease);
        // Adopting one leaves the other shipped; adopting all, none.
        assert_eq!(adopt(&store, Some(std::slice::from_ref(&a))).unwrap(), 1);
        let now = origin(&store).unwrap();
        assert!(now.owns(&a) && !now.owns(&b));
        assert_eq!(adopt(&store, None).unwrap(), 2);
        assert!(origin(&store).unwrap().owns(&b));
        assert_eq!(adopt(&store, None).unwrap(), 0);
        // Nothing was left under tmp/.
        assert_eq!(std::fs::read_dir(root.join("tmp")).unwrap().count(), 0);
    }

    #[test]
    fn a_store_without_a_format_file_that_holds_sessions_gets_no_identity() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(".hel");
        std::fs::create_dir_all(root.join("refs/sessions")).unwrap();
        let shipped = plant_session(&root);
        let store = Store::open(dir.path()).unwrap();
        let lease = store.new_session().unwrap();
        let now = origin(&store).unwrap();
        assert!(now.owns(lease.session()) && !now.owns(&shipped), "{now:?}");
    }
}
