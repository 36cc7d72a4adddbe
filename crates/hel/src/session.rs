//! Sessions: finding, verifying, restoring and checkpointing them.

use std::path::Path;
use std::sync::Arc;

use hel_store::log::LogEntry;
use hel_store::{Checkpoint, CommitInput, ObjectId, SessionId, SessionLease, SessionState, Store};
use serde_json::Value;

use crate::agent::Agent;
use crate::exit::Exit;

/// A session this process holds.
pub struct Session {
    pub store: Store,
    /// Shared with the session's spill, which writes through it.
    pub lease: Arc<SessionLease>,
    pub state: SessionState,
    /// The project directory, as checkpoints record it.
    pub cwd: String,
}

impl Session {
    pub fn id(&self) -> &SessionId {
        self.lease.session()
    }

    /// Commit the agent's state as a checkpoint. On failure the previous
    /// checkpoint stays as it was and the next call commits everything.
    /// Once it is published, what went wrong after is returned as warnings.
    pub fn checkpoint(
        &mut self,
        agent: &mut Agent,
        instruction: &str,
    ) -> Result<hel_store::Committed, hel_store::Error> {
        let pending = agent.tools.spill.pending();
        let committed = self.store.commit(
            &self.lease,
            &mut self.state,
            CommitInput {
                messages: agent.conversation.messages(),
                leaves: agent.conversation.leaves(),
                cwd: self.cwd.clone(),
                request_config: serde_json::to_value(&agent.config).unwrap_or_default(),
                meter: serde_json::to_value(agent.meter).unwrap_or_default(),
                cursors: serde_json::to_value(&agent.tools.cursors).unwrap_or_else(|e| {
                    crate::note!("hel: warning: cannot save the read_file cursors: {e}");
                    Value::Array(Vec::new())
                }),
                new_spill: pending,
                instruction: instruction.to_owned(),
                input_tokens: agent.last_usage.0,
                output_tokens: agent.last_usage.1,
                why: format!("checkpoint: {}", hel_store::first_line(instruction)),
            },
        )?;
        agent.conversation.committed(&committed);
        agent.tools.spill.clear_pending();
        agent.tools.spill.set_committed(self.state.spill());
        Ok(committed)
    }
}

/// Check the shape of a session argument: a UUID or a prefix of at least 4
/// hex digits (hyphens allowed). Anything else is a usage error.
pub fn check_session_arg(spec: &str) -> Result<(), Exit> {
    let hex = spec.chars().filter(|c| *c != '-').count();
    let ok =
        hex >= 4 && spec.len() <= 36 && spec.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Exit::usage(format!(
            "{spec:?} is not a session id: give a session UUID or a prefix of at least 4 hex digits (`hel sessions` lists them)"
        )))
    }
}

/// Resolve a session argument to one session id of `store`.
pub fn resolve(store: &Store, project: &Path, spec: &str) -> Result<SessionId, Exit> {
    check_session_arg(spec)?;
    let spec = spec.to_ascii_lowercase();
    // A whole id names its session whatever is there, so that what is
    // wrong with it (a link, a FIFO) is reported as such.
    if let Ok(id) = spec.parse::<SessionId>() {
        if store.knows(&id)? {
            return Ok(id);
        }
    }
    let mut matches = store.sessions_matching(&spec)?;
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => {
            // Run from inside a project that holds it? Say where.
            for dir in project.ancestors().skip(1) {
                let Ok(other) = Store::open(dir) else {
                    continue;
                };
                if other.exists()
                    && other
                        .sessions_matching(&spec)
                        .map(|m| !m.is_empty())
                        .unwrap_or(false)
                {
                    return Err(Exit::refused(format!(
                        "no session {spec} in {}; it belongs to the project at {}: run hel there",
                        project.display(),
                        dir.display()
                    )));
                }
            }
            Err(Exit::refused(format!(
                "no session matches {spec} in {} (`hel sessions` lists them)",
                project.display()
            )))
        }
        _ => Err(Exit::refused(format!(
            "{spec} is ambiguous: it matches {}; give more digits",
            matches
                .iter()
                .map(SessionId::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Resolve a checkpoint argument among the checkpoints of `log`.
pub fn resolve_checkpoint(log: &[LogEntry], spec: &str) -> Result<ObjectId, Exit> {
    if spec.len() < 4 || !spec.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Exit::usage(format!("{spec:?} is not a checkpoint id: give at least 4 hex digits as `hel sessions log` prints them")));
    }
    let spec = spec.to_ascii_lowercase();
    let found: Vec<&LogEntry> = log
        .iter()
        .filter(|e| e.id.to_hex().starts_with(&spec))
        .collect();
    match found.as_slice() {
        [one] => Ok(one.id),
        [] => Err(Exit::refused(format!(
            "no checkpoint {spec} in this session's log (`hel sessions log <SESSION>` lists them)"
        ))),
        many => Err(Exit::refused(format!(
            "checkpoint {spec} is ambiguous: it matches {}",
            many.iter()
                .map(|e| e.id.to_hex()[..12].to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Refuse a checkpoint that may not be continued here: another session's,
/// or saved in another directory. (What it holds was validated when it was
/// loaded: a broken conversation never gets this far.)
pub fn verify(cp: &Checkpoint, session: &SessionId, project: &str) -> Result<(), Exit> {
    if cp.session_id != *session {
        return Err(Exit::refused(format!("checkpoint belongs to session {}, not {session}: the store is inconsistent (run `hel fsck`)", cp.session_id)));
    }
    if cp.cwd != project {
        return Err(Exit::refused(format!(
            "session {session} belongs to the project at {}, but this is {project}: run hel from {} (a copied or moved project starts new sessions)",
            cp.cwd, cp.cwd
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_args() {
        assert!(check_session_arg("0c9e").is_ok());
        assert!(check_session_arg("0c9e6f1a-1b2c-4d3e-8f40-123456789abc").is_ok());
        for bad in ["../x", "/tmp/x", "abc", "zzzz", ""] {
            assert_eq!(check_session_arg(bad).unwrap_err().code, 2, "{bad}");
        }
    }
}
