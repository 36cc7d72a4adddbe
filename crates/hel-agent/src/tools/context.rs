//! What a tool call works with, and what it produces.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use super::access::{Access, Confirm, Decision};
use super::cursor::CursorTable;
use super::paths::ProjectDir;
use crate::event::Observer;
use crate::spill::SpillStore;
use hel_sandbox::Commands;

/// What one tool call produced.
#[derive(Debug, Clone)]
pub(crate) struct ToolResult {
    pub content: String,
    /// False only when the tool could not do its job (refused, timed out,
    /// failed to start, bad arguments). A command exiting non-zero is ok.
    pub ok: bool,
    pub decision: Decision,
}

impl ToolResult {
    pub(crate) fn ok(content: String) -> Self {
        ToolResult {
            content,
            ok: true,
            decision: Decision::Auto,
        }
    }
    pub(crate) fn failed(content: String) -> Self {
        ToolResult {
            content,
            ok: false,
            decision: Decision::Auto,
        }
    }
    /// The result of a tool's work: its text, or its error as `error: …`.
    pub(crate) fn of<E: std::fmt::Display>(r: Result<String, E>) -> Self {
        match r {
            Ok(s) => ToolResult::ok(s),
            Err(e) => ToolResult::failed(format!("error: {e}")),
        }
    }
}

/// Everything the tools work with.
pub(crate) struct ToolCtx {
    /// The project's root, canonical: the sandbox's boundary.
    pub project: PathBuf,
    /// The directory hel was started in, canonical, inside the project:
    /// where commands start.
    pub cwd: PathBuf,
    /// The project directory held open: the file tools resolve beneath it
    /// (from blocking threads, hence shared).
    pub project_dir: Arc<ProjectDir>,
    pub access: Access,
    pub bash_timeout: u64,
    pub sandbox: bool,
    /// Sandboxed commands may use the network (else they have a loopback
    /// of their own and nothing else).
    pub network: bool,
    /// The variables of hel's environment kept from commands and MCP
    /// servers beyond the name rules (see [`super::secret`]).
    pub withheld: Arc<super::secret::Withheld>,
    /// The run's secrets: what tool results and instructions hold is
    /// replaced by handles, which tool calls may use (see
    /// [`super::secret`]).
    pub secrets: hel_secrets::Redactor,
    pub allow_write: Vec<PathBuf>,
    /// `--allow-git-write`: git directories are open to commits (see
    /// [`super::gitdirs`]).
    pub allow_git_write: bool,
    /// The instance's tmp dir.
    pub tmp: PathBuf,
    /// The sandbox bash commands run in (started at the first call).
    pub commands: Commands,
    pub cursors: CursorTable,
    pub spill: SpillStore,
    pub confirm: Arc<dyn Confirm>,
    /// Hears spill warnings.
    pub observer: Rc<dyn Observer>,
    /// The MCP servers' tools (none until they start).
    pub mcp: crate::mcp::Tools,
}
