//! hel: a coding agent for the terminal. The binary (`main.rs`) only parses
//! flags and reports; everything else is here.

/// Print a line on stderr. A closed stderr (say, piped into a program that
/// exited) is no reason for an agent run to stop, so errors are ignored.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod agent;
pub mod cli;
pub mod client;
pub mod commands;
pub mod compact;
pub mod config;
pub mod conversation;
pub mod exit;
pub mod instance;
pub mod meter;
pub mod record;
pub mod run;
pub mod session;
pub mod spill;
pub mod system;
pub mod terminal;
pub mod tools;
