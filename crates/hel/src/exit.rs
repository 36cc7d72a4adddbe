//! How hel ends: the one place that turns failures into a message and an
//! exit code (0 done; 1 incomplete, refused or failed; 2 bad usage or
//! configuration; 130 interrupted).

use std::fmt;

use hel_agent::project::ProjectError;
use hel_agent::run::StartError;
use hel_agent::session::SessionError;

/// A failure to report on stderr as one line, with its exit code.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

impl Exit {
    pub fn usage(message: impl Into<String>) -> Exit {
        Exit {
            code: 2,
            message: message.into(),
        }
    }
    pub fn refused(message: impl Into<String>) -> Exit {
        Exit {
            code: 1,
            message: message.into(),
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<StartError> for Exit {
    fn from(e: StartError) -> Exit {
        match e {
            StartError::Config(_) | StartError::AllowWrite(_) => Exit::usage(e.to_string()),
            StartError::Store(e) => e.into(),
            StartError::Session(e) => e.into(),
            StartError::Project(e) => e.into(),
            e => Exit::refused(e.to_string()),
        }
    }
}

impl From<ProjectError> for Exit {
    fn from(e: ProjectError) -> Exit {
        match e {
            ProjectError::CurrentDir(_) => Exit::refused(e.to_string()),
            ProjectError::Given { .. } | ProjectError::NotADirectory(_) => {
                Exit::usage(e.to_string())
            }
        }
    }
}

impl From<SessionError> for Exit {
    fn from(e: SessionError) -> Exit {
        match e {
            SessionError::NotASessionId(_) | SessionError::NotACheckpointId(_) => {
                Exit::usage(e.to_string())
            }
            SessionError::Store(e) => e.into(),
            e => Exit::refused(e.to_string()),
        }
    }
}

impl From<hel_workspace::undo::UndoError> for Exit {
    fn from(e: hel_workspace::undo::UndoError) -> Exit {
        use hel_workspace::history::HistoryError;
        use hel_workspace::undo::UndoError as U;
        match e {
            U::Store(e) | U::History(HistoryError::Store(e)) => e.into(),
            e => Exit::refused(e.to_string()),
        }
    }
}

impl From<hel_store::Error> for Exit {
    fn from(e: hel_store::Error) -> Exit {
        Exit::store(&e)
    }
}

impl Exit {
    /// A store error as hel reports it.
    pub fn store(e: &hel_store::Error) -> Exit {
        use hel_store::Error as E;
        match e {
            E::BadSessionId(_) => Exit::usage(e.to_string()),
            E::Name(n) if matches!(**n, hel_store::NameError::Invalid { .. }) => {
                Exit::usage(e.to_string())
            }
            E::InUse { session, holder } => Exit::refused(in_use(session, holder.as_deref())),
            E::NoSuchSession { session } => Exit::refused(format!("no session {session} in this project; a session exists once an answer completes (`hel sessions` lists them)")),
            E::NoCheckpoint { session } => Exit::refused(format!(
                "session {session} has no checkpoint yet: the instance working on it has not completed an answer"
            )),
            E::Corrupt { .. }
            | E::Missing { .. }
            | E::UnknownKind { .. }
            | E::WrongKind { .. }
            | E::TooLarge { .. }
            | E::BadRef { .. }
            | E::BadMessage { .. }
            | E::BrokenConversation { .. } => {
                Exit::refused(format!("{e} (run `hel fsck` for a full check)"))
            }
            _ => Exit::refused(e.to_string()),
        }
    }
}

/// The refusal of a session another instance holds: which one (its pid,
/// from the lease file: untrusted, so only digits are taken) and what to
/// do.
fn in_use(session: &str, holder: Option<&str>) -> String {
    let pid = holder
        .and_then(|h| h.strip_prefix("pid "))
        .and_then(|rest| rest.split(' ').next())
        .filter(|p| !p.is_empty() && p.len() <= 10 && p.bytes().all(|b| b.is_ascii_digit()));
    match (pid, holder) {
        (Some(pid), Some(h)) => format!(
            "session {session} is in use by the hel instance with pid {pid} ({h}): leave hel there (Ctrl-D or /exit), or stop it with `kill {pid}`, then run this again"
        ),
        _ => format!(
            "session {session} is in use by another hel instance: leave hel there (Ctrl-D or /exit), then run this again"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_session_names_its_holder_and_what_to_do() {
        assert_eq!(
            in_use("s", Some("pid 42 since 2026-12-01T00:00:00.000Z")),
            "session s is in use by the hel instance with pid 42 (pid 42 since 2026-12-01T00:00:00.000Z): leave hel there (Ctrl-D or /exit), or stop it with `kill 42`, then run this again"
        );
        // A lease file that says anything else: no pid is made up.
        for odd in [None, Some("pid ; rm -rf /"), Some("someone")] {
            assert_eq!(
                in_use("s", odd),
                "session s is in use by another hel instance: leave hel there (Ctrl-D or /exit), then run this again"
            );
        }
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for bad in ["../x", "/tmp/x", "abc", "zz zz", ""] {
            let e = hel_agent::session::check_session_arg(bad).unwrap_err();
            assert_eq!(Exit::from(e).code, 2, "{bad}");
        }
        let e = hel_agent::session::resolve_checkpoint(&[], "xyz").unwrap_err();
        assert_eq!(Exit::from(e).code, 2);
        let e = hel_agent::session::resolve_checkpoint(&[], "abcd").unwrap_err();
        assert_eq!(Exit::from(e).code, 1);
    }
}
