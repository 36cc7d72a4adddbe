//! Who may do what: the access modes, how each call came to run, and the
//! confirmation a write or command may need.

use serde::Serialize;

/// Which calls run without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only the reading tools are offered.
    ReadOnly,
    /// Writes and commands are confirmed through [`Confirm`].
    Confirm,
    /// Everything runs.
    Auto,
}

/// How a call came to run (or not), as record.json names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Auto,
    Confirmed,
    Denied,
    ReadOnly,
}

/// The answer to a confirmation request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Yes,
    No,
    /// Nobody can be asked; the text says why.
    Unavailable(String),
}

/// Asks the user to allow a write or a command. It may block (it runs on
/// a blocking thread).
pub trait Confirm: Send + Sync {
    /// `request` is what would happen, such as ``run `make` `` or
    /// `write_file src/a.rs`; it comes from the model.
    fn ask(&self, request: &str) -> Answer;
}
