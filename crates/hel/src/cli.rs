//! Command-line flags (clap). Run flags are global: they are accepted before
//! or after a subcommand such as `resume <SESSION>`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "hel",
    version,
    about = "A coding agent for the terminal, with a content-addressed session store",
    long_about = "hel works on the project in the current directory: it sends your instructions to a \
chat model, runs the tools the model asks for (read, search, edit, bash in a sandbox) and loops until \
the model answers. Every completed answer is a checkpoint in .hel/, so `hel resume <SESSION>` \
continues the conversation in a new process.\n\nWith -p, runs the given instructions in order; \
without, reads one instruction per line from stdin (until EOF or /exit)."
)]
pub struct Cli {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// An instruction to run (repeatable; run in order in one conversation).
    #[arg(short = 'p', long = "instruction", value_name = "TEXT", global = true)]
    pub instructions: Vec<String>,
    /// Continue SESSION (same as `hel resume SESSION`).
    #[arg(long, value_name = "SESSION", global = true)]
    pub resume: Option<String>,
    /// Model name (deepseek: default deepseek-v4-flash; alias deepseek-flash).
    #[arg(long, global = true, env = "HEL_MODEL")]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible server (…/chat/completions is appended).
    #[arg(long, value_name = "URL", global = true, env = "HEL_BASE_URL")]
    pub base_url: Option<String>,
    /// Provider preset: deepseek (default) or openai.
    #[arg(long, value_enum, global = true)]
    pub provider: Option<ProviderName>,
    /// Output limit per model request, in tokens.
    #[arg(long, value_name = "N", default_value_t = 8192, global = true)]
    pub max_output_tokens: u64,
    /// Seconds each model request may take.
    #[arg(long, value_name = "SECS", default_value_t = 120, global = true)]
    pub request_timeout: u64,
    /// Model calls allowed per instruction.
    #[arg(long, value_name = "N", default_value_t = 50, global = true)]
    pub max_turns: u32,
    /// Write record.json and raw/requests.jsonl of this run to DIR.
    #[arg(long, value_name = "DIR", global = true)]
    pub record: Option<PathBuf>,
    /// Tool access: read-only, confirm (ask on the terminal before writes and commands), auto.
    #[arg(long, value_enum, default_value_t = Access::Confirm, global = true)]
    pub access: Access,
    /// Toolset: comma-separated tool names, or `none`.
    #[arg(long, value_name = "LIST", global = true)]
    pub tools: Option<String>,
    /// Seconds a bash command may run before its process group is killed.
    #[arg(long, value_name = "SECS", default_value_t = 120, global = true)]
    pub bash_timeout: u64,
    /// A directory bash commands may also write to (repeatable).
    #[arg(long, value_name = "DIR", global = true)]
    pub allow_write: Vec<PathBuf>,
    /// Run bash commands without the sandbox (warns once).
    #[arg(long, global = true)]
    pub no_sandbox: bool,
    /// Project instructions file read into the system message.
    #[arg(long, value_name = "NAME", default_value = "HEL.md", global = true)]
    pub context_file: String,
    /// Do not read a project instructions file.
    #[arg(long, global = true)]
    pub no_context_file: bool,
    /// Compact when the estimated request exceeds N tokens (with --keep-recent).
    #[arg(long, value_name = "N", global = true, requires = "keep_recent")]
    pub compact_at: Option<u64>,
    /// Tokens of recent conversation kept verbatim by compaction (with --compact-at).
    #[arg(long, value_name = "M", global = true, requires = "compact_at")]
    pub keep_recent: Option<u64>,
    /// Never compact.
    #[arg(long, global = true, conflicts_with_all = ["compact_at", "keep_recent"])]
    pub no_compaction: bool,
    /// The model's context window in tokens (default 1,000,000 for deepseek, 128,000 otherwise).
    #[arg(long, value_name = "W", global = true)]
    pub context_window: Option<u64>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProviderName {
    Deepseek,
    Openai,
}

impl From<ProviderName> for hel_agent::config::Provider {
    fn from(p: ProviderName) -> Self {
        match p {
            ProviderName::Deepseek => Self::Deepseek,
            ProviderName::Openai => Self::Openai,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    Confirm,
    Auto,
}

impl From<Access> for hel_agent::tools::Access {
    fn from(a: Access) -> Self {
        match a {
            Access::ReadOnly => Self::ReadOnly,
            Access::Confirm => Self::Confirm,
            Access::Auto => Self::Auto,
        }
    }
}

impl RunArgs {
    /// The run's options, as the agent library takes them.
    pub fn options(&self) -> hel_agent::run::Options {
        use hel_agent::run::Compaction;
        hel_agent::run::Options {
            provider: hel_agent::config::ProviderChoice {
                provider: self.provider.map(Into::into),
                base_url: self.base_url.clone(),
                model: self.model.clone(),
                max_output_tokens: self.max_output_tokens,
            },
            request_timeout: self.request_timeout,
            max_turns: self.max_turns,
            record: self.record.clone(),
            access: self.access.into(),
            tools: self.tools.clone(),
            bash_timeout: self.bash_timeout,
            allow_write: self.allow_write.clone(),
            sandbox: !self.no_sandbox,
            context_file: (!self.no_context_file).then(|| self.context_file.clone()),
            compaction: match (self.no_compaction, self.compact_at, self.keep_recent) {
                (true, _, _) => Compaction::Off,
                (false, Some(at), Some(keep_recent)) => Compaction::At { at, keep_recent },
                _ => Compaction::Default,
            },
            context_window: self.context_window,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Continue a session in this process (or fork it with --at).
    Resume {
        /// Session id or a unique prefix of at least 4 hex digits.
        #[arg(required_unless_present = "last", conflicts_with = "last")]
        session: Option<String>,
        /// The most recently updated session that is not in use.
        #[arg(long)]
        last: bool,
        /// Fork: start a new session from this checkpoint of SESSION.
        #[arg(long, value_name = "CHECKPOINT")]
        at: Option<String>,
    },
    /// List, inspect and delete sessions (default: list).
    Sessions {
        #[command(subcommand)]
        command: Option<SessionsCommand>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reclaim storage that no session reaches.
    Gc {
        /// Only report what would be reclaimed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Check the session store.
    Fsck,
}

#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// One row per session, most recently updated first.
    List {
        #[arg(long)]
        json: bool,
    },
    /// A session's checkpoints, newest first.
    Log {
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// The conversation and request config of a checkpoint.
    Show {
        session: String,
        #[arg(long, value_name = "CHECKPOINT")]
        at: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Delete a session and reclaim its storage.
    Delete { session: String },
}
