//! Session refs and their logs.
//!
//! A ref file `refs/sessions/<uuid>` holds one snapshot id in hex and a
//! newline. It is only ever replaced whole: written to `tmp/`, fsynced,
//! renamed over the old one, and the directory fsynced. A reader therefore
//! sees the old or the new id, never a mix or an empty file.
//!
//! Once the rename has happened the checkpoint is published: whatever fails
//! after it (the directory fsync, the log append) is a [`Warning`], never an
//! error, and the caller's idea of the head follows the ref. After the move,
//! a line `<old> <new> <unix-ms> <why>` is appended to `logs/sessions/<uuid>`
//! (old is 64 zeros for the first checkpoint). The log is an audit trail for
//! people; nothing depends on it.

use std::io::Write;

use crate::error::IoContext;
use crate::layout::Layout;
use crate::lock::Shared;
use crate::{failpoint, time, Error, ObjectId, Result, SessionId};

/// The most bytes a ref file may hold (64 hex digits and a newline).
const REF_MAX: u64 = 65;

/// Something that went wrong after a ref moved: the move stands.
#[derive(Debug)]
pub enum Warning {
    /// The directory fsync failed: the new ref is visible but may not
    /// survive a power loss.
    NotDurable(Error),
    /// The ref log could not be appended: the checkpoint is saved; the
    /// log misses this move.
    LogNotWritten(Error),
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::NotDurable(e) => write!(
                f,
                "the checkpoint is published but may not survive a power loss ({e})"
            ),
            Warning::LogNotWritten(e) => write!(
                f,
                "the checkpoint was saved, but its ref log could not be written ({e})"
            ),
        }
    }
}

/// Parse the bytes of a ref file.
pub(crate) fn parse(bytes: &[u8]) -> std::result::Result<ObjectId, &'static str> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not text")?;
    let hex = text.strip_suffix('\n').ok_or("no trailing newline")?;
    hex.parse().map_err(|_| "not a 64-digit hex object id")
}

/// The snapshot `session` points at, or `None` if it has no ref.
pub(crate) fn read(layout: &Layout, session: &SessionId) -> Result<Option<ObjectId>> {
    let Some(dir) = layout.refs()? else {
        return Ok(None);
    };
    let bad = |reason: String| Error::BadRef {
        session: session.to_string(),
        path: layout.ref_path(session.as_str()),
        reason,
    };
    let bytes = match dir.read_file(session.as_str(), REF_MAX) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(Error::FileTooLarge { size, .. }) => {
            return Err(bad(format!("{size} bytes, a ref holds 65")))
        }
        Err(e) => return Err(e),
    };
    parse(&bytes).map(Some).map_err(|r| bad(r.to_owned()))
}

/// Move `session`'s ref from `expected` to `new`. Refuses with
/// [`Error::RefMoved`] when the ref no longer holds `expected`; an error
/// means the ref did not move. Once it has moved, what fails after is
/// returned as warnings.
pub(crate) fn update(
    lock: &Shared<'_>,
    session: &SessionId,
    expected: Option<ObjectId>,
    new: ObjectId,
    why: &str,
) -> Result<Vec<Warning>> {
    let layout = lock.layout;
    let found = read(layout, session)?;
    if found != expected {
        let show = |o: Option<ObjectId>| o.map_or("none".to_owned(), |i| i.to_hex());
        return Err(Error::RefMoved {
            session: session.to_string(),
            expected: show(expected),
            found: show(found),
        });
    }
    let dir = layout.refs_create()?;
    let tmp_dir = layout.tmp_create()?;
    let tmp = format!("ref-{}", uuid::Uuid::new_v4().simple());
    let written = (|| {
        let mut f = tmp_dir.create_new(&tmp, 0o600)?;
        f.write_all(format!("{new}\n").as_bytes())
            .at(tmp_dir.child_path(&tmp))?;
        f.sync_all().at(tmp_dir.child_path(&tmp))?;
        tmp_dir.rename_to(&tmp, dir, session.as_str())
    })();
    if written.is_err() {
        let _ = tmp_dir.remove_file(&tmp);
    }
    written?;
    // Published. Nothing below can take that back.
    let mut warnings = Vec::new();
    let synced = if failpoint::hit("ref-sync") {
        Err(failpoint::error("ref-sync")).at(dir.path())
    } else {
        dir.sync()
    };
    if let Err(e) = synced {
        warnings.push(Warning::NotDurable(e));
    }
    if let Err(e) = append_log(
        layout,
        session,
        expected.unwrap_or(ObjectId::ZERO),
        new,
        why,
    ) {
        warnings.push(Warning::LogNotWritten(e));
    }
    Ok(warnings)
}

fn append_log(
    layout: &Layout,
    session: &SessionId,
    old: ObjectId,
    new: ObjectId,
    why: &str,
) -> Result<()> {
    let dir = layout.logs_create()?;
    let path = dir.child_path(session.as_str());
    if failpoint::hit("ref-log") {
        return Err(failpoint::error("ref-log")).at(path);
    }
    let why: String = why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    let mut f = dir.open_rw(session.as_str(), true)?;
    f.write_all(format!("{old} {new} {} {why}\n", time::now_ms()).as_bytes())
        .at(&path)?;
    f.sync_data().at(&path)
}

/// The new id of the last line of `session`'s ref log, if it has one that
/// parses (the log is read only to note a move it misses).
pub(crate) fn last_logged(layout: &Layout, session: &SessionId) -> Result<Option<ObjectId>> {
    const LOG_TAIL: u64 = 4096;
    let Some(dir) = layout.logs()? else {
        return Ok(None);
    };
    let Some(file) = dir.open_file(session.as_str())? else {
        return Ok(None);
    };
    use std::io::{Read, Seek, SeekFrom};
    let path = dir.child_path(session.as_str());
    let len = file.metadata().at(&path)?.len();
    let mut file = file;
    file.seek(SeekFrom::Start(len.saturating_sub(LOG_TAIL)))
        .at(&path)?;
    let mut tail = Vec::new();
    file.take(LOG_TAIL).read_to_end(&mut tail).at(&path)?;
    let text = String::from_utf8_lossy(&tail);
    Ok(text
        .lines()
        .last()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|h| h.parse().ok()))
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

/// Remove `session`'s ref and log (the caller holds its lease and the
/// store lock).
pub(crate) fn remove(layout: &Layout, session: &SessionId) -> Result<()> {
    if let Some(dir) = layout.refs()? {
        dir.remove_tree(session.as_str())?;
        dir.sync()?;
    }
    if let Some(dir) = layout.logs()? {
        dir.remove_tree(session.as_str())?;
    }
    Ok(())
}
