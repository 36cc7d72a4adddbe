//! hel-agent: the agent library of hel, a coding agent for the terminal.
//!
//! A [`Run`] takes a session of the [`Project`] hel is started in (new,
//! resumed or forked, through [`hel_store`]), runs instructions with the
//! agent loop (the model client, the tools and their sandbox,
//! compaction) and saves every completed answer as a checkpoint.
//!
//! The library parses no flags, prints nothing and knows no exit codes:
//! it reports what happens as [`Event`]s to an [`Observer`], asks for
//! confirmations through [`Confirm`], and fails with typed errors. The
//! `hel` binary does the rest. Its modules are private: what the binary
//! uses is re-exported here, plus the small [`mcp`] and [`text`] faces.

#![warn(unreachable_pub)]

mod agent;
mod child;
mod client;
mod compact;
mod config;
mod conversation;
mod event;
mod hooks;
mod instance;
mod interrupt;
pub mod mcp;
mod meter;
mod outcome;
mod project;
mod record;
mod run;
mod session;
mod spill;
mod system;
mod terminal;
mod tools;
mod workspace;

// The run.
pub use agent::Usage;
pub use client::Retry;
pub use outcome::{Incomplete, Outcome, Termination};
pub use run::{Compaction, Host, Options, RestoreFilesError, Run, StartError, Status};
pub use workspace::WorkspaceError;
// What it reports.
pub use event::{Event, FileChange, Observer, Warning};
pub use hooks::{Hook, HookEvent, HookOutcome, HookReport};
pub use project::{Found, Project, ProjectError};
// Confirmation.
pub use tools::access::simple_program;
pub use tools::secret::is_secret_name;
pub use tools::{Access, Answer, Confirm, Decision, Edit, Request, ToolName};
// Interrupts (Ctrl-C).
pub use interrupt::{channel as interrupts, Interrupter, Interrupts};
// Sessions.
pub use session::{
    check_session_arg, default_session, recorded_cwd, resolve as resolve_session,
    resolve_checkpoint, SessionError, Start,
};
// Configuration.
pub use compact::planned_output;
pub use config::{resolve as resolve_provider, Endpoint, Provider, ProviderChoice};
pub use system::{Instructions, AGENTS_MD};
// What an import builds a conversation with.
pub use compact::summary_message;
pub use conversation::{content_text, Conversation};

/// Text for a terminal: escaping what came from outside, and counts.
pub mod text {
    pub use crate::terminal::{count, escape_line, escape_text};
}
