//! The store commands: `sessions` (list, log, show, delete), `gc`, `fsck`.
//! They need no key and no provider, and print their report on stdout.

mod sessions;
mod show;
mod store;

use std::path::PathBuf;

use hel_store::Store;

use crate::cli::SessionsCommand;
use crate::exit::Exit;

pub use store::{fsck, gc};

/// Print a line of a report for people. What it shows came from the store
/// (instructions, messages, paths), so control characters are escaped.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", hel_agent::terminal::escape_text(&format!($($arg)*)))
    };
}
pub(crate) use say;

/// A report as JSON.
fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// The project: the current directory.
fn project() -> Result<PathBuf, Exit> {
    std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| Exit::refused(format!("cannot use the current directory: {e}")))
}

pub fn sessions(command: Option<SessionsCommand>, json_flag: bool) -> Result<u8, Exit> {
    let project = project()?;
    let store = Store::open(&project)?;
    match command.unwrap_or(SessionsCommand::List { json: json_flag }) {
        SessionsCommand::List { json } => sessions::list(&store, json || json_flag),
        SessionsCommand::Log { session, json } => {
            sessions::log(&store, &project, &session, json || json_flag)
        }
        SessionsCommand::Show { session, at, json } => {
            show::show(&store, &project, &session, at.as_deref(), json || json_flag)
        }
        SessionsCommand::Delete { session } => sessions::delete(&store, &project, &session),
    }
}
