//! Command-line flags (clap). Run flags belong to the commands that run the
//! model: `hel` itself and `hel resume`; given before `resume` they still
//! apply to it (`hel --access auto resume S -p …`). Settings not given as a
//! flag or in the environment come from the user's config file
//! ([`crate::config`]), then from the defaults.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "hel",
    version,
    about = "A coding agent for the terminal, with a content-addressed session store",
    long_about = "hel works on the project it is started in (the nearest directory at or above the \
current one that holds .hel/ or .git, or --project DIR): it sends your instructions to a chat \
model, runs the tools the model asks for (read, search, edit, bash in a sandbox) and loops until \
the model answers. Every completed answer is a checkpoint in .hel/, so `hel resume <SESSION>` \
continues the conversation in a new process.\n\nWith -p, runs the given instructions in order; \
without, on a terminal, opens an interactive prompt (/help there lists its commands); from a \
pipe, reads one instruction per line (until EOF or /exit). `hel \"INSTRUCTION\"` runs the \
instruction first: at the prompt on a terminal, as with -p off one. A first word that names a \
subcommand is that subcommand: send such a word with `hel -p WORD` or `hel -- WORD`."
)]
pub struct Cli {
    /// An instruction to start with: on a terminal the prompt runs it first; off one, as -p.
    #[arg(value_name = "INSTRUCTION")]
    pub prompt: Option<String>,
    /// Continue SESSION (same as `hel resume SESSION`).
    #[arg(long, value_name = "SESSION")]
    pub resume: Option<String>,
    /// Continue the newest session of this project that has an answer (same as `hel resume --last`).
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub continue_last: bool,
    /// The project's root (default: the nearest directory at or above this one holding .hel/ or .git).
    #[arg(long, value_name = "DIR", global = true)]
    pub project: Option<PathBuf>,
    /// Colour on a terminal: auto (unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// An instruction to run (repeatable; run in order in one conversation).
    #[arg(short = 'p', long = "instruction", value_name = "TEXT")]
    pub instructions: Vec<String>,
    /// Model name (deepseek: default deepseek-v4-flash; alias deepseek-flash).
    #[arg(long, env = "HEL_MODEL")]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible server (…/chat/completions is appended).
    #[arg(long, value_name = "URL", env = "HEL_BASE_URL")]
    pub base_url: Option<String>,
    /// Provider preset: deepseek (default) or openai.
    #[arg(long, value_enum)]
    pub provider: Option<ProviderName>,
    /// Output limit per model request, in tokens.
    #[arg(long, value_name = "N", default_value_t = 8192)]
    pub max_output_tokens: u64,
    /// Seconds each model request may take.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub request_timeout: u64,
    /// Model calls allowed per instruction.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub max_turns: u32,
    /// Write record.json and raw/requests.jsonl of this run to DIR.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Tool access: read-only, confirm (ask on the terminal before writes and commands), auto.
    #[arg(long, value_enum, default_value_t = Access::Confirm)]
    pub access: Access,
    /// Toolset: comma-separated tool names, or `none`.
    #[arg(long, value_name = "LIST")]
    pub tools: Option<String>,
    /// Seconds a bash command may run before its process group is killed.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub bash_timeout: u64,
    /// A directory bash commands may also write to (repeatable).
    #[arg(long, value_name = "DIR")]
    pub allow_write: Vec<PathBuf>,
    /// Run bash commands without the sandbox (warns once).
    #[arg(long)]
    pub no_sandbox: bool,
    /// Let sandboxed commands use the network (default: off under --access auto, on under confirm).
    #[arg(long, conflicts_with = "no_network")]
    pub network: bool,
    /// Keep sandboxed commands off the network: they get a loopback of their own.
    #[arg(long)]
    pub no_network: bool,
    /// Let commands and the file tools write .git (commit, branch); its config and hooks stay read-only.
    #[arg(long)]
    pub allow_git_write: bool,
    /// The one project instructions file read into the system message (default: HEL.md and AGENTS.md files).
    #[arg(long, value_name = "NAME")]
    pub context_file: Option<String>,
    /// Do not read a project instructions file.
    #[arg(long)]
    pub no_context_file: bool,
    /// Compact when the estimated request exceeds N tokens (with --keep-recent).
    #[arg(long, value_name = "N", requires = "keep_recent")]
    pub compact_at: Option<u64>,
    /// Tokens of recent conversation kept verbatim by compaction (with --compact-at).
    #[arg(long, value_name = "M", requires = "compact_at")]
    pub keep_recent: Option<u64>,
    /// Never compact.
    #[arg(long, conflicts_with_all = ["compact_at", "keep_recent"])]
    pub no_compaction: bool,
    /// The model's context window in tokens (default 1,000,000 for deepseek, 128,000 otherwise).
    #[arg(long, value_name = "W")]
    pub context_window: Option<u64>,
    /// Do not snapshot the project's files (undo and restore then have nothing to go back to).
    #[arg(long)]
    pub no_workspace: bool,
    /// New files larger than this are not snapshotted (listed as not tracked): bytes, or with K/M/G.
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    pub workspace_max_file: u64,
    /// New file content one snapshot may store; past it, new files are not tracked.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_size)]
    pub workspace_budget: u64,
    /// Ask for the whole answer at once instead of a stream (servers without streaming).
    #[arg(long)]
    pub no_stream: bool,
    /// What stdout carries with -p or piped instructions: text (the answers), json (one object per instruction) or stream-json (one event per line).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// With --output-format stream-json: also an event for each piece of text as it streams in.
    #[arg(long)]
    pub include_partial: bool,
    /// On resuming at the prompt, do not show the earlier conversation's last exchanges.
    #[arg(long)]
    pub quiet: bool,
    /// `hel "INSTRUCTION"` on a terminal: what the prompt runs first.
    #[arg(skip)]
    pub first: Option<String>,
    /// Set by `hel resume --relocate` (not a flag of every run).
    #[arg(skip)]
    pub relocate: bool,
    /// Set from `--project` (a flag of every command).
    #[arg(skip)]
    pub project: Option<PathBuf>,
    /// The config file's `[mcp_servers.NAME]` tables.
    #[arg(skip)]
    pub mcp: Vec<hel_agent::mcp::ServerSpec>,
    /// The config file's `[[hooks]]` tables.
    #[arg(skip)]
    pub hooks: Vec<hel_agent::Hook>,
}

/// A size in bytes: a number, optionally followed by K, M or G (powers of
/// 1024). At most 64M for one file (what a stored object may hold).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((k, _)) => (&t[..k], &t[k..]),
        None => (t, ""),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (try 1M, 500K or 1048576)"))?;
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use K, M or G)")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderName {
    Deepseek,
    Openai,
}

impl From<ProviderName> for hel_agent::Provider {
    fn from(p: ProviderName) -> Self {
        match p {
            ProviderName::Deepseek => Self::Deepseek,
            ProviderName::Openai => Self::Openai,
        }
    }
}

/// Another agent whose sessions `hel sessions import --from` reads.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFrom {
    Codex,
    Claude,
    Pi,
}

impl ImportFrom {
    pub fn name(self) -> &'static str {
        match self {
            ImportFrom::Codex => "codex",
            ImportFrom::Claude => "claude",
            ImportFrom::Pi => "pi",
        }
    }
}

/// What a run writes on stdout (see [`crate::output`]).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
    StreamJson,
}

/// What a run says of itself in the line after `session: <uuid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intro {
    /// The model requests go to.
    pub model: String,
    /// The access mode (`read-only`, `confirm`, `auto`).
    pub access: &'static str,
    /// The interactive prompt: its `/help` is named.
    pub help: bool,
}

/// `--color`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    ReadOnly,
    Confirm,
    Auto,
}

impl Access {
    /// The mode as the flag names it.
    pub fn name(self) -> &'static str {
        match self {
            Access::ReadOnly => "read-only",
            Access::Confirm => "confirm",
            Access::Auto => "auto",
        }
    }
}

impl From<Access> for hel_agent::Access {
    fn from(a: Access) -> Self {
        match a {
            Access::ReadOnly => Self::ReadOnly,
            Access::Confirm => Self::Confirm,
            Access::Auto => Self::Auto,
        }
    }
}

impl RunArgs {
    /// What the line after `session: <uuid>` says of a run with these
    /// flags (`help`: at the interactive prompt). The model is the one the
    /// provider's settings resolve to (None: they do not resolve, and the
    /// run will say why).
    pub fn intro(&self, help: bool) -> Option<Intro> {
        let endpoint = hel_agent::resolve_provider(&self.options().provider).ok()?;
        Some(Intro {
            model: endpoint.config.model,
            access: self.access.name(),
            help,
        })
    }

    /// The limits of workspace snapshots (undo and restore snapshot the
    /// project before writing).
    pub fn workspace_options(&self) -> hel_workspace::Options {
        hel_workspace::Options {
            max_file: self.workspace_max_file.min(hel_store::Cap::FILE.max),
            budget: self.workspace_budget,
            // Off only to test hel without them (HEL_WORKSPACE_NOTIFY=0).
            notify: std::env::var_os("HEL_WORKSPACE_NOTIFY").is_none_or(|v| v != "0"),
        }
    }

    /// Whether sandboxed commands may use the network: as the flags (or
    /// the config's `network`) say, else by the access mode.
    pub fn network_on(&self) -> bool {
        match (self.network, self.no_network) {
            (true, _) => true,
            (_, true) => false,
            _ => hel_agent::Access::from(self.access).network_by_default(),
        }
    }

    /// The run's options, as the agent library takes them.
    pub fn options(&self) -> hel_agent::Options {
        use hel_agent::{Compaction, Instructions};
        hel_agent::Options {
            provider: hel_agent::ProviderChoice {
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
            network: self.network_on(),
            allow_git_write: self.allow_git_write,
            instructions: match (self.no_context_file, &self.context_file) {
                (true, _) => Instructions::None,
                (false, Some(name)) => Instructions::File(name.clone()),
                (false, None) => Instructions::Default,
            },
            project: self.project.clone(),
            compaction: match (self.no_compaction, self.compact_at, self.keep_recent) {
                (true, _, _) => Compaction::Off,
                (false, Some(at), Some(keep_recent)) => Compaction::At { at, keep_recent },
                _ => Compaction::Default,
            },
            context_window: self.context_window,
            workspace: (!self.no_workspace).then_some(self.workspace_options()),
            stream: !self.no_stream,
            relocate: self.relocate,
            mcp: self.mcp.clone(),
            hooks: self.hooks.clone(),
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Continue a session in this process (or fork it with --at); with no SESSION, on a terminal, pick one.
    #[command(
        after_help = "Examples:\n  hel resume\n  hel resume --last\n  hel resume 4da5 -p \"and the tests?\"\n  hel resume 4da5 --at 3f2a91c0 --restore-files\n  hel resume 4da5 --relocate"
    )]
    Resume {
        /// Session name, id or a unique prefix of at least 4 hex digits (none: pick one on the terminal).
        #[arg(conflicts_with = "last")]
        session: Option<String>,
        /// The most recently updated session of this project that has an answer and is not in use.
        #[arg(long)]
        last: bool,
        /// Fork: start a new session from this checkpoint of SESSION.
        #[arg(long, value_name = "CHECKPOINT")]
        at: Option<String>,
        /// With --at: also make the project's files as they were at that checkpoint.
        #[arg(long, requires = "at")]
        restore_files: bool,
        /// With --restore-files: write even files changed since the session recorded them.
        #[arg(long, requires = "restore_files")]
        force: bool,
        /// Continue a session saved in another project directory here (the project moved, or the session was pulled from another machine): a new checkpoint records this directory; the history keeps the old one.
        #[arg(long, conflicts_with = "at")]
        relocate: bool,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Put the project's files back as they were when the session's last instruction started.
    #[command(
        long_about = "Put the project's files back as they were when the session's last \
instruction started (completed or not), and nothing else: only files that instruction changed, \
and only where they are still what it left. Instructions that changed no file are passed over. \
A second `hel undo` steps one instruction further back; after an undo that left files alone \
because they changed since, the next `hel undo` (or `hel undo --force`) tries the same \
instruction again. It lists what it will restore, remove and leave alone, and on a terminal \
asks before removing anything (--yes does not ask). Every undo is recorded first \
(`hel restore SESSION --at <before-restore checkpoint>` undoes it)."
    )]
    #[command(after_help = "Examples:\n  hel undo\n  hel undo 4da5 --force")]
    Undo {
        /// Session id or prefix (default: the most recently updated idle session).
        session: Option<String>,
        /// Write even files changed since the session recorded them.
        #[arg(long)]
        force: bool,
        /// Remove files without asking on the terminal.
        #[arg(long, short = 'y')]
        yes: bool,
        #[arg(long)]
        json: bool,
    },
    /// Make the project's files as they were at a checkpoint (all tracked paths, or the given ones).
    #[command(
        after_help = "Examples:\n  hel restore 4da5 --at 3f2a91c0\n  hel restore 4da5 --at 3f2a91c0 --before src/main.rs"
    )]
    Restore {
        session: String,
        /// The checkpoint (default: the session's latest).
        #[arg(long, value_name = "CHECKPOINT")]
        at: Option<String>,
        /// As they were when that checkpoint's instruction started.
        #[arg(long)]
        before: bool,
        /// Write even files changed since the session recorded them.
        #[arg(long)]
        force: bool,
        /// Remove files without asking on the terminal.
        #[arg(long, short = 'y')]
        yes: bool,
        #[arg(long)]
        json: bool,
        /// Only these paths (and what is under them), relative to the project.
        paths: Vec<PathBuf>,
    },
    /// Which files the session changed (from the start of its first instruction to its latest checkpoint), with a unified diff of text files.
    #[command(
        after_help = "Examples:\n  hel diff\n  hel diff 4da5 --last\n  hel diff 4da5 --at 3f2a91c0 --worktree --stat"
    )]
    Diff(DiffArgs),
    /// List, inspect and delete sessions (default: list).
    #[command(
        after_help = "Examples:\n  hel sessions\n  hel sessions log 4da5\n  hel sessions show 4da5 --at 3f2a91c0"
    )]
    Sessions {
        #[command(subcommand)]
        command: Option<SessionsCommand>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// List the sessions of this remote instead (from their refs; no conversation is downloaded).
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
    },
    /// Reclaim storage that no session reaches.
    #[command(after_help = "Examples:\n  hel gc --dry-run\n  hel gc --repack")]
    Gc {
        /// Only report what would be reclaimed.
        #[arg(long)]
        dry_run: bool,
        /// Also move every sealed pack into one pack.
        #[arg(long, conflicts_with = "dry_run")]
        repack: bool,
        /// Collect the packs no ref of this remote names instead (two-phase: see docs/remotes.md).
        #[arg(long, value_name = "NAME", conflicts_with = "repack")]
        remote: Option<String>,
        /// With --remote: how old unreferenced data must be before it goes (at least 1h).
        #[arg(
            long,
            value_name = "DURATION",
            requires = "remote",
            default_value = "24h"
        )]
        grace: String,
    },
    /// Manage remotes: where sessions are pushed to and pulled from (kept in $XDG_CONFIG_HOME/hel/remotes.toml).
    #[command(
        after_help = "Examples:\n  hel remote add team s3://my-bucket/hel --region eu-west-1\n  hel remote add minio s3://hel/sessions --endpoint http://127.0.0.1:9000\n  hel remote add shared file:///mnt/shared/hel\n  hel remote list"
    )]
    Remote {
        #[command(subcommand)]
        command: RemoteCommand,
    },
    /// Upload sessions to a remote (default: those changed since their last push).
    #[command(
        after_help = "Examples:\n  hel push\n  hel push --remote team 4da5\n\nWhat a push would send is scanned for secrets first (as `hel sessions scan`); a session holding one is not sent unless --allow-secrets is given."
    )]
    Push {
        /// The remote (default: the only one configured).
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
        /// Send sessions that hold secrets anyway.
        #[arg(long)]
        allow_secrets: bool,
        sessions: Vec<String>,
    },
    /// Bring sessions in from a remote (default: all of them).
    #[command(after_help = "Examples:\n  hel pull\n  hel pull --remote team 4da5")]
    Pull {
        /// The remote (default: the only one configured).
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
        sessions: Vec<String>,
    },
    /// Check the session store.
    #[command(after_help = "Example:\n  hel fsck")]
    Fsck,
    /// The operation log: list the session operations (delete, rename, fork, import, pull, ...) and undo one.
    #[command(after_help = "Examples:\n  hel op log\n  hel op undo")]
    Op {
        #[command(subcommand)]
        command: OpCommand,
    },
    /// The settings a run would use, and where each comes from (flag, environment, config file, default).
    #[command(
        after_help = "Example:\n  hel config\n\nThe config file is $XDG_CONFIG_HOME/hel/config.toml (default ~/.config/hel/config.toml); see docs/configuration.md."
    )]
    Config {
        #[command(flatten)]
        run: RunArgs,
    },
    /// The MCP servers of the config file, whose tools the model is offered.
    #[command(
        after_help = "Examples:\n  hel mcp add calc -- python3 /opt/mcp/calc.py\n  hel mcp list\n  hel mcp remove calc\n\nServers are `[mcp_servers.NAME]` tables of your config file; see docs/mcp.md."
    )]
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Start each server, list its tools under the names the model sees, and stop it.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Add a stdio server to your config file (never a project's): NAME -- COMMAND [ARGS...].
    #[command(
        after_help = "Example:\n  hel mcp add calc --env CALC_PRECISION=10 -- python3 /opt/mcp/calc.py"
    )]
    Add {
        /// The server's name: 1 to 32 of A-Z a-z 0-9 _ - (its tools are mcp__NAME__TOOL).
        name: String,
        /// A variable of its environment (repeatable); secrets go in `env_vars` instead (docs/mcp.md).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// Replace a server of that name.
        #[arg(long)]
        force: bool,
        /// The command that starts the server, and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Remove a server from your config file.
    Remove { name: String },
}

#[derive(Subcommand, Debug)]
pub enum OpCommand {
    /// List the operations, oldest first, with what each changed.
    Log {
        #[arg(long)]
        json: bool,
    },
    /// Revert one operation (default: the last one that is not a gc); the undo is itself an operation.
    Undo {
        /// 4 or more hex digits of the operation's id (`hel op log` lists them).
        op: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// One row per session, most recently updated first.
    #[command(after_help = "Example:\n  hel sessions list --json")]
    List {
        #[arg(long)]
        json: bool,
    },
    /// A session's checkpoints, newest first.
    #[command(after_help = "Examples:\n  hel sessions log\n  hel sessions log 4da5 --all")]
    Log {
        /// Session name, id or prefix (default: the most recently updated idle session, as `hel undo`).
        session: Option<String>,
        /// Also the start record of every instruction that ended.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// A session and every fork of its family as a tree of answers, newest first (--json: nodes and edges).
    #[command(
        after_help = "Examples:\n  hel sessions tree\n  hel sessions tree fix-login --json\n\nOne line per answer: its checkpoint, when, files changed, tokens, its instruction; @ marks the session named (or the newest), \u{25cf} each other session's newest answer, with its name or first instruction. See docs/sessions.md, \"The tree\"."
    )]
    Tree {
        /// Session name, id or prefix (default: the most recently updated idle session, as `hel undo`).
        session: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The conversation of a checkpoint, for a person to read (--json: everything stored).
    #[command(
        after_help = "Examples:\n  hel sessions show\n  hel sessions show fix-login\n  hel sessions show 4da5 --at 3f2a91c0 --json"
    )]
    Show {
        /// Session name, id or prefix (default: the most recently updated idle session, as `hel undo`).
        session: Option<String>,
        #[arg(long, value_name = "CHECKPOINT")]
        at: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Move a session to the trash (`hel sessions undelete` brings it back); --now deletes it for good.
    #[command(
        after_help = "Examples:\n  hel sessions delete 4da5\n  hel sessions delete --now 4da5\n  hel sessions delete --remote team 4da5\n\nA deleted session stays in the trash until it expires (30 days by default: trash_days in the config file); `hel sessions trash` lists the trash. --now asks on a terminal (--yes does not); off a terminal --now alone deletes for good."
    )]
    Delete {
        session: String,
        /// Remove the session's ref on this remote instead (its data goes at a later `hel gc --remote`).
        #[arg(long, value_name = "NAME")]
        remote: Option<String>,
        /// Delete for good at once, without the trash (a session in the trash too).
        #[arg(long, conflicts_with = "remote")]
        now: bool,
        /// With --now: delete without asking on the terminal.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Bring a session back from the trash, whole (checkpoints, name, files' snapshots).
    #[command(after_help = "Example:\n  hel sessions undelete 4da5")]
    Undelete {
        /// The session's id, an id prefix, or the name it had.
        session: String,
    },
    /// List the trash: deleted sessions and when each expires.
    #[command(after_help = "Examples:\n  hel sessions trash\n  hel sessions trash --json")]
    Trash {
        #[arg(long)]
        json: bool,
    },
    /// Keep a session (listed or in the trash) from ever expiring.
    #[command(after_help = "Example:\n  hel sessions pin 4da5")]
    Pin { session: String },
    /// Let a pinned session expire again.
    #[command(after_help = "Example:\n  hel sessions unpin 4da5")]
    Unpin { session: String },
    /// Name a session: every command that takes a session then takes its name.
    #[command(
        after_help = "Example:\n  hel sessions rename 4da5 fix-login\n\nA name is 1-64 letters, digits, '.', '_' or '-', with at least one character that is not a hex digit or '-'; names are unique in a project."
    )]
    Rename { session: String, name: String },
    /// Make sessions that arrived with a .hel/ not made here (cloned, copied, moved) this project's own.
    #[command(
        long_about = "Make sessions that arrived with a .hel/ not made here this project's own. \
A .hel/ that was cloned, copied, unpacked or moved from another project or file system is not \
the project's: its sessions are listed as shipped, and hel never chooses one when no session is \
named (`hel -c`, `hel undo`, the picker), never pushes one unless named, and never writes one's \
snapshots into the project's files (`hel undo`, `hel restore`). Adopt only sessions you made: \
an adopted session is treated as your own from then on.",
        after_help = "Examples:\n  hel sessions adopt --all\n  hel sessions adopt 4da5"
    )]
    Adopt {
        /// Sessions to adopt (name, id or prefix).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        sessions: Vec<String>,
        /// Every session of this store, and the store itself.
        #[arg(long)]
        all: bool,
    },
    /// Find the sessions whose conversation has a message matching a regular expression.
    #[command(
        after_help = "Examples:\n  hel sessions search 'flaky test'\n  hel sessions search '(?i)timeout' --role tool --json"
    )]
    Search(SearchArgs),
    /// Write a conversation as Markdown or an HTML page (to share) or as the JSON messages the model was sent, or a session as a bundle.
    #[command(
        after_help = "Examples:\n  hel sessions export fix-login --format md > fix-login.md\n  hel sessions export fix-login --format html -o fix-login.html\n  hel sessions export 4da5 --at 3f2a91c0 --format json\n  hel sessions export fix-login --bundle fix-login.helbundle\n\nWhat an export would write is scanned for secrets first (as `hel sessions scan`); nothing is written when it holds one, unless --allow-secrets is given."
    )]
    Export(ExportArgs),
    /// List the secrets the stored conversations hold (values from before redaction, imports, what newer rules recognise).
    #[command(
        long_about = "List the secrets the stored conversations hold: every message of every checkpoint \
of a session's history is scanned by the detector that redacts what comes in (sessions from before \
redaction, imports, values a newer rule set recognises). One line per secret: the session, the \
checkpoint where its message first appeared, the message's position, its role and the kind of \
secret, never the value; then a count. Exits 1 when anything is found. `hel push` and \
`hel sessions export` refuse a session that holds one unless --allow-secrets is given. \
`hel sessions purge` takes them out of a session's history.",
        after_help = "Examples:\n  hel sessions scan\n  hel sessions scan fix-login --json"
    )]
    Scan {
        /// Session name, id or prefix (default: every session of the project).
        session: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Rewrite a session's history with every secret `hel sessions scan` finds replaced by its handle.
    #[command(
        long_about = "Rewrite a session's history with every secret `hel sessions scan` finds replaced \
by its handle (‹secret:KIND:N›): every checkpoint becomes a new one holding the same messages, \
spill, workspace snapshots, name and request config, but for the values; a workspace file that \
holds a secret is kept as a file the snapshot did not record. Sessions forked from it (and forks \
of those) move onto the new history. The old records are gone from the session's journal at \
once; `hel gc` reclaims what sealed packs hold of them, and the next `hel push` replaces the \
session on a remote that has it. Refused while a session it moves is in use, and while a session \
in the trash holds the history it rewrites (delete that one for good, or undelete it, first). \
A purge is in `hel op log` but cannot be undone.",
        after_help = "Examples:\n  hel sessions purge fix-login\n  hel sessions purge 4da5 --json"
    )]
    Purge {
        /// Session name, id or prefix.
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// Bring in a session from a bundle, verifying everything first; with --from, sessions of another agent.
    #[command(
        after_help = "Examples:\n  hel sessions import session.helbundle\n  hel sessions import --from codex ~/.codex/sessions/2026/11/30\n  hel sessions import --from claude ~/.claude/projects/-home-me-proj\n  hel sessions import --from pi ~/.pi/agent/sessions/--home-me-proj--"
    )]
    Import {
        /// A bundle; with --from, a session file or a directory of them (*.jsonl).
        file: PathBuf,
        /// Import the conversations of this agent instead of a bundle.
        #[arg(long, value_enum, value_name = "AGENT")]
        from: Option<ImportFrom>,
    },
}

#[derive(Subcommand, Debug)]
pub enum RemoteCommand {
    /// Add a remote, after checking that it honours conditional writes.
    Add {
        name: String,
        /// s3://bucket/prefix or file:///path (no credentials: AWS environment variables, ~/.aws/credentials and profiles are used).
        url: String,
        /// An S3-compatible server (MinIO, R2, Ceph RGW, …).
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        #[arg(long, value_name = "REGION")]
        region: Option<String>,
    },
    /// List the remotes.
    List,
    /// Remove a remote from the configuration (nothing on it is deleted).
    Remove { name: String },
}

/// `hel sessions search`.
#[derive(Args, Debug)]
pub struct SearchArgs {
    /// A regular expression (Rust regex syntax), matched regardless of case.
    pub pattern: String,
    /// Match case as the pattern has it.
    #[arg(long)]
    pub case_sensitive: bool,
    /// Only messages of this role.
    #[arg(long, value_enum)]
    pub role: Option<SearchRole>,
    /// Print JSON: every matching message of every session.
    #[arg(long)]
    pub json: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchRole {
    User,
    Assistant,
    Tool,
}

impl SearchRole {
    pub fn name(self) -> &'static str {
        match self {
            SearchRole::User => "user",
            SearchRole::Assistant => "assistant",
            SearchRole::Tool => "tool",
        }
    }
}

/// `hel sessions export`: what to export and in which form.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Session name, id or a unique prefix of at least 4 hex digits.
    pub session: String,
    /// The checkpoint (default: the session's newest).
    #[arg(long, value_name = "CHECKPOINT")]
    pub at: Option<String>,
    /// md: Markdown, for people; json: the messages the model was sent, as stored;
    /// html: one self-contained page (no script, nothing loaded) with each answer's
    /// file changes and the session's forks.
    #[arg(long, value_enum, default_value_t = ExportFormat::Md)]
    pub format: ExportFormat,
    /// Write to FILE instead of standard output.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        conflicts_with = "bundle"
    )]
    pub output: Option<PathBuf>,
    /// Write the session's objects and ref to one self-contained bundle file instead
    /// (`hel sessions import FILE` on another machine).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["at", "format"])]
    pub bundle: Option<PathBuf>,
    /// Write it even though it holds secrets.
    #[arg(long)]
    pub allow_secrets: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Md,
    Json,
    Html,
}

/// `hel diff`'s arguments, as parsed (one struct for the command line,
/// the prompt's `/diff` and the command).
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Session name, id or prefix (default: the most recently updated idle session, as `hel undo`).
    pub session: Option<String>,
    /// Only what the session's last instruction changed.
    #[arg(long, conflicts_with_all = ["at", "against", "worktree"])]
    pub last: bool,
    /// The checkpoint (default: the session's latest); without --against or --worktree,
    /// what its instruction changed.
    #[arg(long, value_name = "CHECKPOINT")]
    pub at: Option<String>,
    /// Compare with this checkpoint instead.
    #[arg(long, value_name = "CHECKPOINT", conflicts_with = "worktree")]
    pub against: Option<String>,
    /// Compare with the files on disk now.
    #[arg(long)]
    pub worktree: bool,
    /// Only a line per file with lines added and removed.
    #[arg(long)]
    pub stat: bool,
    #[arg(long, conflicts_with = "stat")]
    pub json: bool,
}
