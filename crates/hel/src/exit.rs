//! How hel ends: the one place that turns failures into a message and an
//! exit code (0 done; 1 incomplete, refused or failed; 2 bad usage or
//! configuration; 130 interrupted).

use std::fmt;

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

impl From<crate::config::ConfigError> for Exit {
    fn from(e: crate::config::ConfigError) -> Exit {
        Exit::usage(e.0)
    }
}

impl From<hel_store::Error> for Exit {
    fn from(e: hel_store::Error) -> Exit {
        use hel_store::Error as E;
        match &e {
            E::BadSessionId(_) => Exit::usage(e.to_string()),
            E::InUse { session } => Exit::refused(format!(
                "session {session} is in use by another hel instance: wait for it to exit, or fork it with `hel resume {session} --at <CHECKPOINT>`"
            )),
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
