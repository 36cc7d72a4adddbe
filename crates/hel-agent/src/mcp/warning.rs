//! What the MCP servers report that does not stop the run: a server that
//! did not start and why, a tool left out.

use std::path::PathBuf;

/// Tools taken from one server; the rest are left out with a warning.
pub(crate) const MAX_TOOLS: usize = 256;

/// Why a server is not offering tools.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StartError {
    #[error("cannot start `{command}`: {error}")]
    Spawn { command: String, error: String },
    #[error("did not start within {0}s")]
    Timeout(u64),
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("listing its tools failed: {0}")]
    ListTools(String),
    #[error("{0} is not set (named in the server's config)")]
    NoVariable(String),
    #[error("{0}")]
    Http(String),
}

/// Something about the MCP servers that does not stop the run.
#[derive(Debug, thiserror::Error)]
pub enum McpWarning {
    #[error("MCP server `{server}` left out: {error}{}", log.as_ref().map_or(String::new(), |l| format!(" (its stderr: {})", l.display())))]
    NotStarted {
        server: String,
        error: StartError,
        /// The log of a process that ran.
        log: Option<PathBuf>,
    },
    #[error("MCP server `{server}`: tools `{first}` and `{second}` both become `{name}`: `{second}` is left out")]
    Collision {
        server: String,
        first: String,
        second: String,
        name: String,
    },
    #[error("MCP server `{server}`: tool `{tool}` left out: {why}")]
    ToolRefused {
        server: String,
        tool: String,
        why: String,
    },
    #[error("MCP server `{0}` offers more than {MAX_TOOLS} tools: the rest are left out")]
    TooManyTools(String),
    #[error("this session used MCP server `{0}`, which is not running now: its tools are not offered, the other tools are")]
    Gone(String),
}
