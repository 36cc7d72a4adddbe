//! hel-agent: the agent library of hel, a coding agent for the terminal.
//!
//! A [`Run`](run::Run) takes a session of the [project](project) hel is
//! started in (new, resumed or forked, through [`hel_store`]), runs
//! instructions with the [`Agent`](agent::Agent) loop (the model
//! [client], the [tools] and their sandbox, [compaction](compact)) and
//! saves every completed answer as a checkpoint.
//!
//! The library parses no flags, prints nothing and knows no exit codes:
//! it reports what happens as [`Event`](event::Event)s to an
//! [`Observer`](event::Observer), asks for confirmations through
//! [`Confirm`](tools::Confirm), and fails with typed errors. The `hel`
//! binary does the rest.

pub mod agent;
pub mod client;
pub mod compact;
pub mod config;
pub mod conversation;
pub mod event;
pub mod instance;
pub mod interrupt;
pub mod mcp;
pub mod meter;
pub mod outcome;
pub mod project;
pub mod record;
pub mod run;
pub mod session;
pub mod spill;
pub mod system;
pub mod terminal;
pub mod tools;
pub mod workspace;

/// `n` and the noun for it: `1 file`, `2 files`, `0 files`. Every count
/// hel words (here and in the CLI) goes through it.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}
