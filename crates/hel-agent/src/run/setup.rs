//! What a run is configured with, decided before any session exists.

use std::path::PathBuf;

use crate::client::ModelClient;
use crate::compact::Policy;
use crate::config::{self, ConfigError, ProviderChoice, RequestConfig};
use crate::project::Project;
use crate::system::Instructions;
use crate::tools::{Access, Toolset};

use super::error::StartError;

/// When to compact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compaction {
    /// Never.
    Off,
    /// The defaults for the context window (see [`Policy::defaults`]).
    Default,
    /// At `at` tokens, keeping `keep_recent` tokens verbatim.
    At { at: u64, keep_recent: u64 },
}

/// Everything the user chose for a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The model server, the model and the output limit.
    pub provider: ProviderChoice,
    /// Seconds each model request may take.
    pub request_timeout: u64,
    /// Model calls allowed per instruction.
    pub max_turns: u32,
    /// Where record mode writes, if on.
    pub record: Option<PathBuf>,
    pub access: Access,
    /// `--tools`: a comma-separated list, `none`, or None for all.
    pub tools: Option<String>,
    /// Seconds a bash command may run.
    pub bash_timeout: u64,
    /// Directories commands may also write to.
    pub allow_write: Vec<PathBuf>,
    /// Whether commands run in the sandbox.
    pub sandbox: bool,
    /// Whether sandboxed commands may use the network (the default is
    /// [`crate::Access::network_by_default`]).
    pub network: bool,
    /// `--allow-git-write`: commands and the file tools may write git
    /// directories, but for their config and hooks.
    pub allow_git_write: bool,
    /// The project instructions to read.
    pub instructions: Instructions,
    /// `--project DIR`: the project's root, instead of the one found by
    /// walking up from the current directory.
    pub project: Option<PathBuf>,
    pub compaction: Compaction,
    /// The model's context window (None: by provider).
    pub context_window: Option<u64>,
    /// Workspace snapshots and their limits (None: `--no-workspace`).
    pub workspace: Option<hel_workspace::Options>,
    /// Ask for streamed answers (`--no-stream` turns it off).
    pub stream: bool,
    /// A resumed session saved in another project directory continues in
    /// this one (`hel resume --relocate`): a `relocated` record says so.
    pub relocate: bool,
    /// The MCP servers of the user config (started at the first
    /// instruction).
    pub mcp: Vec<crate::mcp::ServerSpec>,
    /// The hooks of the user config (never a project's).
    pub hooks: Vec<crate::hooks::Hook>,
}

/// The decided configuration.
pub(super) struct Setup {
    pub config: RequestConfig,
    pub client: ModelClient,
    pub toolset: Toolset,
    pub policy: Option<Policy>,
    /// The model's context window, in tokens.
    pub window: u64,
    /// The project: its root and where hel started.
    pub project: Project,
    /// The hooks of the user config.
    pub hooks: crate::hooks::Runner,
}

impl Setup {
    pub(crate) fn new(options: &Options) -> Result<Setup, StartError> {
        let endpoint = config::resolve(&options.provider)?;
        let toolset = Toolset::select(options.tools.as_deref(), options.access)?;
        let window = options
            .context_window
            .unwrap_or(if endpoint.config.provider == "deepseek" {
                1_000_000
            } else {
                128_000
            });
        let policy = match options.compaction {
            Compaction::Off => None,
            Compaction::At { at, keep_recent } => {
                if keep_recent >= at {
                    return Err(ConfigError::KeepRecent {
                        keep_recent,
                        compact_at: at,
                    }
                    .into());
                }
                Some(Policy {
                    at,
                    keep_recent,
                    window,
                })
            }
            Compaction::Default => {
                Some(Policy::defaults(window, options.provider.max_output_tokens))
            }
        };
        let project = Project::find(options.project.as_deref())?;
        let client = ModelClient::new(&endpoint, options.request_timeout, options.stream)
            .map_err(StartError::Client)?;
        let mut config = endpoint.config;
        config.tools = toolset.definitions();
        config.compaction = serde_json::to_value(policy).unwrap_or_default();
        let withheld = crate::mcp::withheld(&options.mcp);
        let hooks = crate::hooks::Runner::new(options.hooks.clone(), &project.root, &withheld);
        Ok(Setup {
            hooks,
            config,
            client,
            toolset,
            policy,
            window,
            project,
        })
    }
}
