//! Session refs and their logs.
//!
//! A ref file `refs/sessions/<uuid>` holds one snapshot id in hex and a
//! newline. It is only ever replaced whole: written to `tmp/`, fsynced,
//! renamed over the old one, and the directory fsynced. A reader therefore
//! sees the old or the new id, never a mix or an empty file. After the move,
//! a line `<old> <new> <unix-ms> <why>` is appended to
//! `logs/sessions/<uuid>` (old is 64 zeros for the first checkpoint). The
//! log is a record for people; nothing depends on it for correctness.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};

use crate::error::IoContext;
use crate::layout::{check_session_id, Layout};
use crate::object::sync_dir;
use crate::{time, Error, ObjectId, Result};

/// The snapshot `session` points at, or `None` if it has no ref.
pub fn read(layout: &Layout, session: &str) -> Result<Option<ObjectId>> {
    check_session_id(session)?;
    let path = layout.ref_path(session);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).at(&path),
    };
    let bad = |reason: &str| Error::BadRef {
        session: session.to_owned(),
        path: path.clone(),
        reason: reason.to_owned(),
    };
    let hex = text
        .strip_suffix('\n')
        .ok_or_else(|| bad("no trailing newline"))?;
    hex.parse()
        .map(Some)
        .map_err(|_| bad("not a 64-digit hex object id"))
}

/// Move `session`'s ref from `expected` to `new`. Refuses with
/// [`Error::RefMoved`] when the ref no longer holds `expected`.
pub fn update(
    layout: &Layout,
    session: &str,
    expected: Option<ObjectId>,
    new: ObjectId,
    why: &str,
) -> Result<()> {
    let found = read(layout, session)?;
    if found != expected {
        let show = |o: Option<ObjectId>| o.map_or("none".to_owned(), |i| i.to_hex());
        return Err(Error::RefMoved {
            session: session.to_owned(),
            expected: show(expected),
            found: show(found),
        });
    }
    let dir = layout.refs_dir();
    let path = layout.ref_path(session);
    let tmp = layout
        .tmp_dir()
        .join(format!("ref-{}", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut f = File::create(&tmp).at(&tmp)?;
        f.write_all(format!("{new}\n").as_bytes()).at(&tmp)?;
        f.sync_all().at(&tmp)?;
        fs::rename(&tmp, &path).at(&path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    sync_dir(&dir)?;
    append_log(
        layout,
        session,
        expected.unwrap_or(ObjectId::ZERO),
        new,
        why,
    )
}

fn append_log(
    layout: &Layout,
    session: &str,
    old: ObjectId,
    new: ObjectId,
    why: &str,
) -> Result<()> {
    let path = layout.log_path(session);
    let why: String = why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .at(&path)?;
    f.write_all(format!("{old} {new} {} {why}\n", time::now_ms()).as_bytes())
        .at(&path)?;
    f.sync_data().at(&path)
}

/// The ids of all sessions that have a ref, sorted.
pub fn list(layout: &Layout) -> Result<Vec<String>> {
    let dir = layout.refs_dir();
    let mut out = Vec::new();
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).at(&dir),
    };
    for entry in entries {
        let entry = entry.at(&dir)?;
        if let Some(name) = entry.file_name().to_str() {
            if check_session_id(name).is_ok() {
                out.push(name.to_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Remove `session`'s ref and log (the caller holds its lease).
pub fn remove(layout: &Layout, session: &str) -> Result<()> {
    check_session_id(session)?;
    for path in [layout.ref_path(session), layout.log_path(session)] {
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e).at(&path),
        }
    }
    sync_dir(&layout.refs_dir())
}
