//! Session names: a small mutable file, `.hel/names`, mapping session ids
//! to names a person chose (objects-spec §11). Naming never touches a
//! checkpoint: the file is the only place a name lives.
//!
//! Format (exactly; anything else is refused as malformed):
//!
//! ```text
//! hel-names 1\n
//! <session uuid> <name>\n      one line per named session, sorted by id
//! ```
//!
//! A name is 1 to [`NAME_MAX`] ASCII letters, digits, `.`, `_` and `-`,
//! does not start with `.` or `-`, and holds at least one character that
//! is neither a hex digit nor `-`, so it can never be read as a session id
//! or prefix. No two sessions share a name.
//!
//! The file is read as hostile input (at most [`FILE_MAX`] bytes, never
//! through a link) and replaced whole the store's crash-safe way (written
//! aside in `tmp/`, synced, renamed over, directory synced), under the
//! names lock `.hel/.names.lock` so that two writers never lose each
//! other's change. The names lock is always taken after the store lock.

use std::collections::BTreeMap;
use std::fs::File;

use crate::error::IoContext;
use crate::layout::{Layout, NAMES, NAMES_LOCK};
use crate::lock::Shared;
use crate::{Error, Result, SessionId, Store};

/// Longest name, in bytes.
pub const NAME_MAX: usize = 64;

/// Largest names file read (well over 10,000 named sessions).
pub const FILE_MAX: u64 = 1 << 20;

const HEADER: &str = "hel-names 1";

pub use crate::error::NameError;

/// Check that `name` may name a session (see the module doc).
pub fn check_name(name: &str) -> std::result::Result<(), NameError> {
    let bad = |reason| {
        Err(NameError::Invalid {
            name: name.chars().take(NAME_MAX + 8).collect(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > NAME_MAX {
        return bad("it is longer than 64 characters");
    }
    if !name
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
    {
        return bad("it holds a character other than letters, digits, '.', '_' and '-'");
    }
    if name.starts_with(['.', '-']) {
        return bad("it starts with '.' or '-'");
    }
    if name.bytes().all(|c| c.is_ascii_hexdigit() || c == b'-') {
        return bad("it could be read as a session id prefix");
    }
    Ok(())
}

/// Does `spec` have the shape of a name (rather than of an id prefix)?
pub fn looks_like_name(spec: &str) -> bool {
    check_name(spec).is_ok()
}

/// The names of a store: session → name.
pub(crate) type Names = BTreeMap<SessionId, String>;

/// Parse the names file's bytes.
pub(crate) fn parse(bytes: &[u8], path: &std::path::Path) -> std::result::Result<Names, NameError> {
    let bad = |line, reason| NameError::Malformed {
        path: path.to_owned(),
        line,
        reason,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| bad(1, "not UTF-8"))?;
    let Some(body) = text.strip_suffix('\n') else {
        return Err(bad(1, "the file does not end with a newline"));
    };
    let mut lines = body.split('\n');
    if lines.next() != Some(HEADER) {
        return Err(bad(1, "the first line is not \"hel-names 1\""));
    }
    let mut names = Names::new();
    let mut taken = std::collections::HashSet::new();
    let mut last: Option<SessionId> = None;
    for (k, line) in lines.enumerate() {
        let n = k + 2;
        let (id, name) = line
            .split_once(' ')
            .ok_or_else(|| bad(n, "not \"<session id> <name>\""))?;
        let id: SessionId = id.parse().map_err(|_| bad(n, "not a session id"))?;
        check_name(name).map_err(|_| bad(n, "not a valid name"))?;
        if last.as_ref().is_some_and(|l| *l >= id) {
            return Err(bad(n, "sessions are not in increasing order"));
        }
        if !taken.insert(name) {
            return Err(bad(n, "a name is given twice"));
        }
        last = Some(id.clone());
        names.insert(id, name.to_owned());
    }
    Ok(names)
}

/// The names file's bytes for `names`.
pub(crate) fn render(names: &Names) -> Vec<u8> {
    let mut out = format!("{HEADER}\n");
    for (id, name) in names {
        out.push_str(id.as_str());
        out.push(' ');
        out.push_str(name);
        out.push('\n');
    }
    out.into_bytes()
}

/// Read the names of the store (none when the file is absent).
pub(crate) fn read(layout: &Layout) -> Result<Names> {
    match layout.root().read_file(NAMES, FILE_MAX)? {
        None => Ok(Names::new()),
        Some(bytes) => {
            parse(&bytes, &layout.root().child_path(NAMES)).map_err(|e| Error::Name(Box::new(e)))
        }
    }
}

/// The names lock, held while a writer reads, changes and replaces the
/// names file. Released when dropped.
#[must_use = "the names lock is released when dropped"]
pub(crate) struct NamesLock {
    _file: File,
}

impl NamesLock {
    /// Block until the names lock is held. The caller holds the store
    /// lock (shared or exclusive) already: that order is never reversed.
    pub fn take(layout: &Layout) -> Result<NamesLock> {
        let file = layout.root().open_rw(NAMES_LOCK, false)?;
        file.lock().at(layout.root().child_path(NAMES_LOCK))?;
        Ok(NamesLock { _file: file })
    }
}

/// Replace the names file by `names` (under the names lock).
pub(crate) fn write(layout: &Layout, _lock: &NamesLock, names: &Names) -> Result<()> {
    let tmp = layout.tmp_create()?;
    let t = format!("names-{}", uuid::Uuid::new_v4().simple());
    Ok(layout
        .root()
        .replace(NAMES, &render(names), 0o600, tmp, &t)?)
}

/// Change the names under the names lock: `change` gets the current names
/// and says whether it changed them (then they are written back).
pub(crate) fn update(
    layout: &Layout,
    change: impl FnOnce(&mut Names) -> Result<bool>,
) -> Result<()> {
    let lock = NamesLock::take(layout)?;
    let mut names = read(layout)?;
    if change(&mut names)? {
        write(layout, &lock, &names)?;
    }
    Ok(())
}

/// `name` with the first suffix `-2`, `-3`, … that no session holds,
/// shortened to fit [`NAME_MAX`]; none when shortening leaves no valid
/// name (only hex digits and `-` before the suffix): the fork then has
/// no name, rather than one the names file would refuse.
pub(crate) fn free_copy(names: &Names, name: &str) -> Option<String> {
    let taken: std::collections::HashSet<&str> = names.values().map(String::as_str).collect();
    for n in 2u64.. {
        let suffix = format!("-{n}");
        let keep = NAME_MAX.saturating_sub(suffix.len()).min(name.len());
        // Names are ASCII: any byte index is a char boundary.
        let candidate = format!("{}{suffix}", &name[..keep]);
        check_name(&candidate).ok()?;
        if !taken.contains(candidate.as_str()) {
            return Some(candidate);
        }
    }
    unreachable!("some suffix is free")
}

/// Give `to` (a new fork) a copy of `from`'s name, with a suffix.
pub(crate) fn copy_for_fork(layout: &Layout, from: &SessionId, to: &SessionId) -> Result<()> {
    update(layout, |names| {
        let Some(name) = names.get(from) else {
            return Ok(false);
        };
        let Some(copy) = free_copy(names, name) else {
            return Ok(false);
        };
        names.insert(to.clone(), copy);
        Ok(true)
    })
}

/// Forget `session`'s name (it is being deleted).
pub(crate) fn remove(layout: &Layout, session: &SessionId) -> Result<()> {
    if layout.root().kind_of(NAMES)?.is_none() {
        return Ok(());
    }
    update(layout, |names| Ok(names.remove(session).is_some()))
}

/// Forget the names of sessions `keep` says are gone; how many. Under
/// the store lock held exclusively (gc). With `dry_run`, only counts.
pub(crate) fn prune(
    layout: &Layout,
    dry_run: bool,
    keep: impl Fn(&SessionId) -> Result<bool>,
) -> Result<u64> {
    if layout.root().kind_of(NAMES)?.is_none() {
        return Ok(0);
    }
    let mut removed = 0;
    update(layout, |names| {
        let mut gone = Vec::new();
        for id in names.keys() {
            if !keep(id)? {
                gone.push(id.clone());
            }
        }
        removed = gone.len() as u64;
        if dry_run {
            return Ok(false);
        }
        for id in &gone {
            names.remove(id);
        }
        Ok(!gone.is_empty())
    })?;
    Ok(removed)
}

/// Name `session` `name` (replacing any name it had). Refused when
/// `name` is not a valid name ([`crate::check_name`]), when another session
/// holds it, or when the store does not know `session`. Checkpoints
/// are not touched: names live in `.hel/names` only.
pub fn rename(store: &Store, session: &SessionId, name: &str) -> Result<()> {
    check_name(name).map_err(|e| Error::Name(Box::new(e)))?;
    let layout = store.layout_for_gc()?.ok_or_else(|| Error::NoSuchSession {
        session: session.to_string(),
    })?;
    // Shared: a delete (exclusive) cannot remove the session meanwhile.
    let _store = Shared::take(layout)?;
    if !store.knows(session)? {
        return Err(Error::NoSuchSession {
            session: session.to_string(),
        });
    }
    // A session in the trash gets its name back from its entry.
    if crate::refs::read(layout, session)?.is_none() && crate::trashed::has_any(layout, session)? {
        return Err(Error::Trashed {
            session: session.to_string(),
        });
    }
    let mut before = None;
    let mut changed = false;
    update(layout, |names| {
        before = names.get(session).cloned();
        if let Some((holder, _)) = names.iter().find(|(_, n)| n.as_str() == name) {
            if holder == session {
                return Ok(false);
            }
            // A session that is gone (deleted by a hel that knew no
            // names, or a copied names file) holds nothing: its name
            // is free, not taken by a session no listing shows.
            if store.knows(holder)? {
                return Err(Error::Name(Box::new(NameError::Taken {
                    name: name.to_owned(),
                    holder: holder.clone(),
                })));
            }
            let gone = holder.clone();
            names.remove(&gone);
        }
        names.insert(session.clone(), name.to_owned());
        changed = true;
        Ok(true)
    })?;
    if changed {
        let change = crate::oplog::Change::of(session).name(before, Some(name.to_owned()));
        crate::oplog::record(store, crate::oplog::Kind::Rename, vec![change], "")?;
    }
    Ok(())
}

/// Every session's name (a session without one is absent).
pub fn all(store: &Store) -> Result<BTreeMap<SessionId, String>> {
    match store.layout_for_gc()? {
        Some(layout) => read(layout),
        None => Ok(BTreeMap::new()),
    }
}

/// The name of `session`, if it has one.
pub fn name_of(store: &Store, session: &SessionId) -> Result<Option<String>> {
    Ok(all(store)?.remove(session))
}

/// The session named `name`, if any.
pub fn session_named(store: &Store, name: &str) -> Result<Option<SessionId>> {
    Ok(all(store)?
        .into_iter()
        .find(|(_, n)| n == name)
        .map(|(id, _)| id))
}

/// The sessions whose id starts with `prefix` (lowercase hex and `-`).
pub fn sessions_matching(store: &Store, prefix: &str) -> Result<Vec<SessionId>> {
    let Some(layout) = store.layout()? else {
        return Ok(Vec::new());
    };
    let mut ids = store.session_ids(layout)?;
    ids.retain(|id| id.as_str().starts_with(prefix));
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use std::path::Path;

    #[test]
    fn names_are_checked() {
        for ok in ["fix-login", "v1.2", "n", "x_y", "Zeta", "deadbeefz"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        let long = "n".repeat(65);
        for bad in [
            "",
            "dead-beef",
            "0123",
            "abc",
            "-x",
            ".x",
            "a b",
            "a/b",
            "é",
            "a\x1b",
            long.as_str(),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn file_round_trips_and_refuses_anything_else() {
        let p = Path::new("names");
        let a: SessionId = "0c9e6f1a-1b2c-4d3e-8f40-123456789abc".parse().unwrap();
        let b: SessionId = "1c9e6f1a-1b2c-4d3e-8f40-123456789abc".parse().unwrap();
        let mut names = Names::new();
        names.insert(b.clone(), "second".into());
        names.insert(a.clone(), "first".into());
        let bytes = render(&names);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            format!("hel-names 1\n{a} first\n{b} second\n")
        );
        assert_eq!(parse(&bytes, p).unwrap(), names);
        assert!(parse(b"hel-names 1\n", p).unwrap().is_empty());
        for bad in [
            String::new(),
            "hel-names 2\n".into(),
            "hel-names 1".into(),
            format!("hel-names 1\n{b} x1\n{a} x2\n"),
            format!("hel-names 1\n{a} same\n{b} same\n"),
            format!("hel-names 1\n{a} 0123\n"),
            format!("hel-names 1\n{a}  two-spaces\n"),
            format!("hel-names 1\n{a} n\n\n"),
            "hel-names 1\nnot-an-id name\n".into(),
        ] {
            assert!(parse(bad.as_bytes(), p).is_err(), "{bad:?}");
        }
        assert!(parse(b"hel-names 1\n\xff\n", p).is_err());
    }

    #[test]
    fn names_follow_sessions_through_rename_gc_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let lease = store.new_session().unwrap();
        let id = lease.session().clone();
        rename(&store, &id, "draft").unwrap();
        assert_eq!(session_named(&store, "draft").unwrap(), Some(id.clone()));
        let other = store.new_session().unwrap();
        let taken = rename(&store, other.session(), "draft").unwrap_err();
        assert!(matches!(&taken, Error::Name(e) if matches!(**e, NameError::Taken { .. })));
        rename(&store, other.session(), "kept").unwrap();
        // Never checkpointed, then abandoned: gc removes the session and
        // forgets its name; the busy one keeps its own.
        drop(lease);
        let report = crate::gc::gc(&store, false).unwrap();
        assert_eq!(report.sessions_removed, vec![id.clone()]);
        assert_eq!(report.names_removed, 1);
        assert_eq!(session_named(&store, "draft").unwrap(), None);
        assert_eq!(
            name_of(&store, other.session()).unwrap().as_deref(),
            Some("kept")
        );
        let unknown: SessionId = "0c9e6f1a-1b2c-4d3e-8f40-123456789abc".parse().unwrap();
        assert!(matches!(
            rename(&store, &unknown, "x1"),
            Err(Error::NoSuchSession { .. })
        ));
        // A name held by a session that is gone is free to take.
        let layout = store.layout_for_gc().unwrap().unwrap();
        update(layout, |names| {
            names.insert(unknown.clone(), "stale".into());
            Ok(true)
        })
        .unwrap();
        rename(&store, other.session(), "stale").unwrap();
        assert_eq!(
            all(&store).unwrap(),
            Names::from([(other.session().clone(), "stale".to_owned())])
        );
    }

    #[test]
    fn fork_copies_get_a_free_suffix() {
        let a: SessionId = "0c9e6f1a-1b2c-4d3e-8f40-123456789abc".parse().unwrap();
        let b: SessionId = "1c9e6f1a-1b2c-4d3e-8f40-123456789abc".parse().unwrap();
        let mut names = Names::new();
        names.insert(a, "work".into());
        assert_eq!(free_copy(&names, "work").as_deref(), Some("work-2"));
        names.insert(b, "work-2".into());
        assert_eq!(free_copy(&names, "work").as_deref(), Some("work-3"));
        let long = "n".repeat(64);
        let copy = free_copy(&names, &long).unwrap();
        assert_eq!(copy.len(), 64);
        assert!(copy.ends_with("-2") && check_name(&copy).is_ok());
        // Shortened to its hex digits, a name would read as an id prefix
        // (and make the names file unreadable): the copy gets no name.
        let hexy = format!("{}z", "a".repeat(63));
        assert!(check_name(&hexy).is_ok());
        assert_eq!(free_copy(&names, &hexy), None);
    }
}
