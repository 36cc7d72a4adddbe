//! `log`: a session's checkpoints, newest first, walking snapshot parents
//! from its ref as `git log` walks commits.

use std::collections::HashSet;

use crate::{Error, ObjectId, Result, SessionId, Store};

/// One checkpoint in a log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    pub id: ObjectId,
    /// The session that wrote this checkpoint.
    pub session_id: SessionId,
    pub time_ms: u64,
    /// RFC 3339, UTC.
    pub time: String,
    pub messages: u64,
    pub instruction: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// True for the first entry that belongs to the history a fork was made
    /// from (the forked checkpoint): a listing marks the fork point above it.
    pub fork_point: bool,
    /// What the record is (an answer, an instruction's start, a restore…).
    pub record: crate::Record,
    /// Its workspace snapshot, if it has one.
    pub workspace: Option<crate::Workspace>,
    /// The record before it in the session's history.
    pub parent: Option<ObjectId>,
    /// The project directory the record belongs to.
    pub cwd: String,
}

/// The checkpoints of `session`, newest first, continuing into the
/// history it was forked from. Every snapshot is validated on the way.
pub fn log(store: &Store, session: &SessionId) -> Result<Vec<LogEntry>> {
    let head = store.head(session)?;
    let layout = store.layout_for_gc()?.ok_or_else(|| Error::NoSuchSession {
        session: session.to_string(),
    })?;
    let mut out = Vec::new();
    let mut next = Some(head);
    let mut current = session.clone();
    let mut seen = HashSet::new();
    while let Some(id) = next {
        if !seen.insert(id) {
            break; // impossible with hashes; never loop all the same
        }
        let cp = crate::read::snapshot(layout, &id)?;
        let fork_point = cp.session_id != current;
        if fork_point {
            current = cp.session_id.clone();
        }
        next = cp.parents.first().copied();
        let record = crate::Record::of(&cp);
        out.push(LogEntry {
            id,
            session_id: cp.session_id,
            time_ms: cp.created_at_ms,
            time: cp.created_at,
            messages: cp.summary.messages,
            instruction: cp.summary.instruction,
            input_tokens: cp.summary.input_tokens,
            output_tokens: cp.summary.output_tokens,
            fork_point,
            record,
            parent: cp.parents.first().copied(),
            cwd: cp.cwd,
            workspace: cp.workspace,
        });
    }
    Ok(out)
}
