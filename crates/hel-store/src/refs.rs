//! Session refs (objects-spec §6.1): `refs/sessions/<uuid>` holds one
//! snapshot id in hex and a newline (65 bytes). The ref is the session's
//! head, and only [`publish`] moves it: the new content written to a file
//! under `tmp/`, synced, renamed over the ref, and `refs/sessions/`
//! synced.

use crate::dir::Stamp;
use crate::error::IoContext;
use crate::format::REF_MAX;
use crate::layout::Layout;
use crate::{Error, ObjectId, Result, SessionId};

pub use crate::error::RefError;

/// Parse the bytes of a ref file: the id, or why they are not a ref
/// ([`RefError::NotText`], [`RefError::NoNewline`] or
/// [`RefError::NotAnId`]).
pub(crate) fn parse(bytes: &[u8]) -> std::result::Result<ObjectId, RefError> {
    let text = std::str::from_utf8(bytes).map_err(|_| RefError::NotText)?;
    let hex = text.strip_suffix('\n').ok_or(RefError::NoNewline)?;
    hex.parse().map_err(|_| RefError::NotAnId)
}

/// The snapshot `session` points at, or `None` if it has no ref.
pub(crate) fn read(layout: &Layout, session: &SessionId) -> Result<Option<ObjectId>> {
    Ok(read_stamped(layout, session)?.map(|(id, _)| id))
}

/// As [`read`], with the [`Stamp`] of the ref file read (every move
/// replaces the file, so a new stamp: the summary index keys on it).
pub(crate) fn read_stamped(
    layout: &Layout,
    session: &SessionId,
) -> Result<Option<(ObjectId, Stamp)>> {
    let Some(dir) = layout.refs()? else {
        return Ok(None);
    };
    let bad = |reason: RefError| Error::BadRef {
        session: session.to_string(),
        path: layout.ref_path(session.as_str()),
        reason,
    };
    let (bytes, stamp) = match dir.read_file_stamped(session.as_str(), REF_MAX) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(hel_fs::Error::TooLarge { size, .. }) => return Err(bad(RefError::TooLarge { size })),
        Err(e) => return Err(e.into()),
    };
    parse(&bytes).map(|id| Some((id, stamp))).map_err(bad)
}

/// The [`Stamp`] of `session`'s ref file, without opening it; `None` when
/// there is none. Says nothing of what the file holds: only the summary
/// index compares it, under the rule of objects-spec §5.9.
pub(crate) fn stamp(layout: &Layout, session: &SessionId) -> Result<Option<Stamp>> {
    match layout.refs()? {
        Some(dir) => Ok(dir.stamp(session.as_str())?),
        None => Ok(None),
    }
}

/// Move `session`'s ref from `expected` (None: it has no ref yet) to
/// `new` by the rename protocol: the 65 bytes written to a new file under
/// `tmp/`, synced, renamed over `refs/sessions/<uuid>` (the rename
/// publishes), then `refs/sessions/` synced. The caller holds the
/// session's lease (so nothing else moves the ref) and has made durable
/// everything `new` reaches. `Err` means nothing was published; `Ok(Some(e))`
/// that the ref moved but the directory sync failed (`e`, a warning: the
/// move may not survive a crash, the checkpoint's objects do).
pub(crate) fn publish(
    layout: &Layout,
    session: &SessionId,
    expected: Option<ObjectId>,
    new: ObjectId,
) -> Result<Option<Error>> {
    let current = read(layout, session)?;
    if current != expected {
        let show = |o: Option<ObjectId>| o.map_or_else(|| "none".to_owned(), |i| i.to_hex());
        return Err(Error::RefMoved {
            session: session.to_string(),
            expected: show(expected),
            found: show(current),
        });
    }
    let existed = layout.refs()?.is_some();
    let dir = layout.refs_create()?;
    if !existed {
        // Made now (a store whose refs/sessions/ went): its name durable
        // before a ref in it is.
        if let Some(parent) = layout.root().sub(crate::layout::REFS)? {
            parent.sync()?;
        }
        layout.root().sync()?;
    }
    let tmp = layout.tmp_create()?;
    let name = format!("ref-{}", uuid::Uuid::new_v4().simple());
    // Gone on any error before the rename (dropped).
    let mut f = tmp.new_file(&name, 0o600)?;
    f.write_all(format!("{new}\n").as_bytes())?;
    if crate::failpoint::hit("ref-sync") {
        return Err(crate::failpoint::error("ref-sync")).at(f.path());
    }
    f.sync()?;
    if crate::failpoint::hit("ref-rename") {
        return Err(crate::failpoint::error("ref-rename")).at(f.path());
    }
    f.persist(dir, session.as_str())?;
    // Published. A failed sync of the directory is told, never undone.
    if crate::failpoint::hit("ref-dir-sync") {
        return Ok(Some(Error::Io {
            path: dir.path().to_owned(),
            source: crate::failpoint::error("ref-dir-sync"),
        }));
    }
    Ok(dir.sync().err().map(Error::from))
}

/// The names in `refs/sessions/`: session ids, and whatever else is there
/// (reported by fsck, ignored otherwise).
pub(crate) struct Listing {
    pub sessions: Vec<SessionId>,
    /// Entries that are not a regular file named by a session id.
    pub strays: Vec<(String, &'static str)>,
}

/// The sessions that have a ref, sorted, and the strays beside them.
pub(crate) fn list(layout: &Layout) -> Result<Listing> {
    let mut out = Listing {
        sessions: Vec::new(),
        strays: Vec::new(),
    };
    let Some(dir) = layout.refs()? else {
        return Ok(out);
    };
    for entry in dir.entries()? {
        let name = entry.name.to_string_lossy().into_owned();
        match (name.parse::<SessionId>(), entry.kind) {
            (Ok(id), crate::dir::Kind::File) => out.sessions.push(id),
            (Ok(_), kind) => out.strays.push((name, kind.describe())),
            (Err(_), kind) => out.strays.push((name, kind.describe())),
        }
    }
    out.sessions.sort();
    Ok(out)
}

/// Remove `session`'s ref, durably (the caller holds its lease and the
/// store lock).
pub(crate) fn remove(layout: &Layout, session: &SessionId) -> Result<()> {
    if let Some(dir) = layout.refs()? {
        dir.remove_tree(session.as_str())?;
        dir.sync()?;
    }
    Ok(())
}
