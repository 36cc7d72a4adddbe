//! What the store commands share: the project they look at, and how
//! they print.

use std::path::PathBuf;

use crate::exit::Exit;

/// Print a line of a report for people. What it shows came from the store
/// (instructions, messages, paths), so control characters are escaped.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", hel_agent::terminal::escape_text(&format!($($arg)*)))
    };
}
pub(crate) use say;

/// A report as JSON.
pub(super) fn print_json<T: serde::Serialize>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// The project: the current directory.
pub(super) fn project() -> Result<PathBuf, Exit> {
    std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| Exit::refused(format!("cannot use the current directory: {e}")))
}
