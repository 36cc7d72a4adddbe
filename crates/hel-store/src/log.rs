//! `log`: a session's checkpoints, newest first, walking snapshot parents
//! from its ref as `git log` walks commits.

use crate::snapshot;
use crate::{refs, Error, ObjectId, Result, Store};

/// One checkpoint in a log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    pub id: ObjectId,
    /// The session that wrote this checkpoint.
    pub session_id: String,
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
}

impl Store {
    /// The checkpoints of `session`, newest first, continuing into the
    /// history it was forked from.
    pub fn log(&self, session: &str) -> Result<Vec<LogEntry>> {
        let head = refs::read(self.layout(), session)?.ok_or_else(|| Error::NoSuchSession {
            session: session.to_owned(),
        })?;
        let mut out = Vec::new();
        let mut next = Some(head);
        let mut current = session.to_owned();
        while let Some(id) = next {
            let cp = snapshot::read(self.layout(), &id)?;
            let fork_point = cp.session_id != current;
            if fork_point {
                current = cp.session_id.clone();
            }
            next = cp.parents.first().copied();
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
            });
        }
        Ok(out)
    }
}
