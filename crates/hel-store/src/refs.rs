//! Ref files of format-1 stores (objects-spec §5): `refs/sessions/<uuid>`
//! holds one snapshot id in hex and a newline, and `logs/sessions/<uuid>`
//! one line per move. A format-2 store keeps heads in journals (see
//! `heads.rs`) and only reads these, until a session's first commit here
//! retires its ref file.

use crate::error::IoContext;
use crate::layout::Layout;
use crate::{Error, ObjectId, Result, SessionId};

/// The most bytes a ref file may hold (64 hex digits and a newline).
const REF_MAX: u64 = 65;

/// Why a session's ref is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("not text")]
    NotText,
    #[error("no trailing newline")]
    NoNewline,
    #[error("not a 64-digit hex object id")]
    NotAnId,
    /// The file holds more than a ref can.
    #[error("{size} bytes, a ref holds {REF_MAX}")]
    TooLarge { size: u64 },
    /// It names a checkpoint that another session made (fsck). The id is
    /// boxed so that [`Error`] stays as small as it was.
    #[error("names checkpoint {checkpoint} of session {owner}")]
    OtherSession {
        checkpoint: Box<ObjectId>,
        owner: SessionId,
    },
}

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
    let Some(dir) = layout.refs()? else {
        return Ok(None);
    };
    let bad = |reason: RefError| Error::BadRef {
        session: session.to_string(),
        path: layout.ref_path(session.as_str()),
        reason,
    };
    let bytes = match dir.read_file(session.as_str(), REF_MAX) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(Error::FileTooLarge { size, .. }) => return Err(bad(RefError::TooLarge { size })),
        Err(e) => return Err(e),
    };
    parse(&bytes).map(Some).map_err(bad)
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
