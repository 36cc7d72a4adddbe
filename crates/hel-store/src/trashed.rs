//! The trash's and the pins' files (objects-spec §8.2, §8.4): the layer
//! that reads and writes them; what a delete, an undelete and gc do with
//! them is `trash.rs`.
//!
//! `trash/<uuid>` is a deleted session's trash entry: one small JSON
//! object (the session, the snapshot its ref named, when it was deleted,
//! its name and directory), written as a ref is (a new file under `tmp/`,
//! synced, renamed into place, `trash/` synced). While it is there, the
//! entry is the session's ref for everything but listings: its journal
//! stays, gc marks what its head reaches. `pins/<uuid>` is an empty file:
//! the session, listed or in the trash, never expires.
//!
//! Everything here is read as untrusted: no link followed (hel-fs), at
//! most [`ENTRY_MAX`] bytes, the bounded JSON parse, the file's name the
//! session it names.

use serde::{Deserialize, Serialize};

use crate::dir::{Dir, Kind};
use crate::layout::{Layout, DIR_MODE};
use crate::{Error, ObjectId, Result, SessionId};

/// `.hel/trash/`: the trash entries.
pub(crate) const TRASH: &str = "trash";
/// `.hel/pins/`: the pins.
pub(crate) const PINS: &str = "pins";
/// The most bytes a trash entry may hold (a name of 64 bytes and a
/// directory of 4 KiB fit many times over).
pub(crate) const ENTRY_MAX: u64 = 16 << 10;
/// The longest directory a trash entry may record (a snapshot's `cwd`
/// holds at most 4 KiB).
pub(crate) const DIRECTORY_MAX: usize = 4096;
/// The trash entry format this hel writes and reads.
pub(crate) const ENTRY_VERSION: u64 = 1;
/// The environment variable that sets the trash's clock, in milliseconds
/// since the Unix epoch: for tests only (expiry without waiting 30 days).
pub const NOW_VAR: &str = "HEL_TEST_NOW_MS";

/// A day in milliseconds.
pub const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// The clock of the trash: when an entry is dated, and what expires.
/// [`NOW_VAR`] when it is set to a number in a debug build (the tests'),
/// else the system clock: a release build never lets a variable expire
/// the trash.
pub fn now_ms() -> u64 {
    std::env::var(NOW_VAR)
        .ok()
        .filter(|_| cfg!(debug_assertions))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(crate::time::now_ms)
}

/// A trash entry as stored (objects-spec §8.2).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub version: u64,
    pub session: SessionId,
    /// What the session's ref named when it was deleted.
    pub head: ObjectId,
    /// When it was deleted (milliseconds since the Unix epoch).
    pub deleted_ms: u64,
    /// Its name then, if it had one.
    pub name: Option<String>,
    /// Its directory (the head checkpoint's `cwd`).
    pub directory: Option<String>,
}

/// `trash/`, if it exists (a link or anything but a directory there is
/// refused by hel-fs).
pub(crate) fn dir(layout: &Layout) -> Result<Option<Dir>> {
    Ok(layout.root().sub(TRASH)?)
}

/// `pins/`, if it exists.
pub(crate) fn pins_dir(layout: &Layout) -> Result<Option<Dir>> {
    Ok(layout.root().sub(PINS)?)
}

/// `trash/<session>`, for messages.
pub(crate) fn path(layout: &Layout, session: &SessionId) -> std::path::PathBuf {
    layout.root().path().join(TRASH).join(session.as_str())
}

fn bad(layout: &Layout, session: &SessionId, reason: impl Into<String>) -> Error {
    Error::BadTrash {
        path: path(layout, session),
        reason: reason.into(),
    }
}

/// Parse the bytes of `session`'s trash entry: it must be the JSON hel
/// writes, of this version, naming `session`.
pub(crate) fn parse(layout: &Layout, session: &SessionId, bytes: &[u8]) -> Result<Entry> {
    let e: Entry = crate::json::from_slice(bytes, crate::json::Limits::SMALL)
        .map_err(|e| bad(layout, session, format!("not a trash entry ({e})")))?;
    if e.version != ENTRY_VERSION {
        return Err(bad(
            layout,
            session,
            format!(
                "version {}, this hel reads version {ENTRY_VERSION}",
                e.version
            ),
        ));
    }
    if e.session != *session {
        return Err(bad(
            layout,
            session,
            format!(
                "it names session {}, not the one of its file name",
                e.session
            ),
        ));
    }
    if e.directory
        .as_ref()
        .is_some_and(|d| d.len() > DIRECTORY_MAX)
    {
        return Err(bad(layout, session, "its directory is over 4096 bytes"));
    }
    if e.name.as_ref().is_some_and(|n| n.len() > 64) {
        return Err(bad(layout, session, "its name is over 64 bytes"));
    }
    Ok(e)
}

/// `session`'s trash entry, if it has one: read bounded, never through a
/// link, parsed and checked ([`parse`]). Anything else in its place is
/// [`Error::BadTrash`].
pub(crate) fn read(layout: &Layout, session: &SessionId) -> Result<Option<Entry>> {
    let Some(dir) = dir(layout)? else {
        return Ok(None);
    };
    match dir.kind_of(session.as_str())? {
        None => return Ok(None),
        Some(Kind::File) => {}
        Some(k) => {
            return Err(bad(
                layout,
                session,
                format!("a {} where a regular file was expected", k.describe()),
            ))
        }
    }
    let bytes = match dir.read_file(session.as_str(), ENTRY_MAX) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(hel_fs::Error::TooLarge { size, .. }) => {
            return Err(bad(
                layout,
                session,
                format!("{size} bytes, over the {ENTRY_MAX} a trash entry may hold"),
            ))
        }
        Err(e) => return Err(bad(layout, session, e.to_string())),
    };
    parse(layout, session, &bytes).map(Some)
}

/// Is there anything at all in `session`'s place in `trash/` (a trash
/// entry, or something that should have been one)? What gc asks before
/// it would remove a journal no ref publishes.
pub(crate) fn has_any(layout: &Layout, session: &SessionId) -> Result<bool> {
    match dir(layout)? {
        Some(d) => Ok(d.kind_of(session.as_str())?.is_some()),
        None => Ok(false),
    }
}

/// What `trash/` holds: the sessions of entries named by a session id
/// (whatever their kind: [`read`] judges each), sorted, and the names
/// of anything else (with what it is).
pub(crate) struct Listing {
    pub sessions: Vec<SessionId>,
    pub strays: Vec<(std::path::PathBuf, &'static str)>,
}

fn listing(dir: Option<Dir>) -> Result<Listing> {
    let mut out = Listing {
        sessions: Vec::new(),
        strays: Vec::new(),
    };
    let Some(dir) = dir else {
        return Ok(out);
    };
    for e in dir.entries()? {
        match e.name_str().map(str::parse::<SessionId>) {
            Some(Ok(id)) => out.sessions.push(id),
            _ => {
                let name = e.name.to_string_lossy().into_owned();
                out.strays.push((dir.child_path(&name), e.kind.describe()));
            }
        }
    }
    out.sessions.sort();
    Ok(out)
}

/// The entries of `trash/`.
pub(crate) fn list(layout: &Layout) -> Result<Listing> {
    listing(dir(layout)?)
}

/// The entries of `pins/`.
pub(crate) fn list_pins(layout: &Layout) -> Result<Listing> {
    listing(pins_dir(layout)?)
}

/// Write `entry` as its session's trash entry, replacing any, by the
/// rename protocol ([`Dir::replace`]: written aside under `tmp/`, synced,
/// renamed, `trash/` synced). A new `trash/` is made durable in `.hel/`
/// first.
pub(crate) fn write(layout: &Layout, entry: &Entry) -> Result<()> {
    let dir = made(layout, TRASH)?;
    let bytes = serde_json::to_vec(entry).map_err(|e| Error::Internal(e.to_string()))?;
    let tmp = layout.tmp_create()?;
    let t = format!("trash-{}", uuid::Uuid::new_v4().simple());
    crate::failpoint::kill("trash-entry-write");
    Ok(dir.replace(entry.session.as_str(), &bytes, 0o600, tmp, &t)?)
}

/// `.hel/<name>/`, made (and made durable in `.hel/`) when absent.
pub(crate) fn made(layout: &Layout, name: &str) -> Result<Dir> {
    if let Some(d) = layout.root().sub(name)? {
        return Ok(d);
    }
    let d = layout.root().sub_create(name, DIR_MODE)?;
    layout.root().sync()?;
    Ok(d)
}

/// Remove `session`'s trash entry (whatever is in its place), durably.
pub(crate) fn remove(layout: &Layout, session: &SessionId) -> Result<()> {
    if let Some(dir) = dir(layout)? {
        if dir.kind_of(session.as_str())?.is_some() {
            dir.remove_tree(session.as_str())?;
            dir.sync()?;
        }
    }
    Ok(())
}

/// Is `session` pinned? Only an empty regular file is a pin; anything
/// else in its place is [`Error::BadTrash`] (a pin is never taken from a
/// link).
pub(crate) fn pinned(layout: &Layout, session: &SessionId) -> Result<bool> {
    let Some(dir) = pins_dir(layout)? else {
        return Ok(false);
    };
    match dir.kind_of(session.as_str())? {
        None => Ok(false),
        Some(Kind::File) => Ok(true),
        Some(k) => Err(Error::BadTrash {
            path: dir.child_path(session.as_str()),
            reason: format!(
                "a {} where a pin (an empty file) was expected",
                k.describe()
            ),
        }),
    }
}

/// Pin `session`: `pins/<session>` made (empty) and `pins/` synced.
pub(crate) fn pin(layout: &Layout, session: &SessionId) -> Result<()> {
    if pinned(layout, session)? {
        return Ok(());
    }
    let dir = made(layout, PINS)?;
    match dir.create_new(session.as_str(), 0o600) {
        Ok(f) => crate::dir::sync_file(&f, &dir.child_path(session.as_str()), false)?,
        Err(hel_fs::Error::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.into()),
    }
    Ok(dir.sync()?)
}

/// Unpin `session`, durably.
pub(crate) fn unpin(layout: &Layout, session: &SessionId) -> Result<()> {
    if let Some(dir) = pins_dir(layout)? {
        if dir.kind_of(session.as_str())?.is_some() {
            dir.remove_tree(session.as_str())?;
            dir.sync()?;
        }
    }
    Ok(())
}
