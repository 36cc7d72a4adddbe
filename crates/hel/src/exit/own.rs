//! The failures hel itself finds, each a variant naming what was wrong and
//! what to do: bad usage ([`Usage`], exit 2), a refusal ([`Refusal`],
//! exit 1), or what hel could not get from the system it runs on
//! ([`Failure`], exit 1).

use std::path::PathBuf;
use std::time::Duration;

use hel_agent::text::escape_line;
use hel_store::{ObjectId, SessionId};

/// Flags, arguments or a config file hel cannot use.
#[derive(Debug, thiserror::Error)]
pub enum Usage {
    #[error("--at needs a session, not --last")]
    AtWithLast,
    #[error("--at needs a SESSION: `hel resume SESSION --at CHECKPOINT`")]
    AtNeedsSession,
    #[error("resume needs a session: give its name or id (`hel sessions` lists them), or --last for the newest")]
    ResumeNeedsSession,
    #[error("--include-partial needs --output-format stream-json")]
    PartialNeedsStreamJson,
    #[error("--output-format json and stream-json are for -p or instructions piped on stdin, not the interactive prompt")]
    JsonNotInteractive,
    #[error("--remote goes with `hel sessions` (list) and `hel sessions delete`")]
    RemoteNotHere,
    /// A line typed at the prompt that names no store report.
    #[error("not a report")]
    NotAReport,
    /// A report's arguments typed at the prompt that do not parse.
    #[error(transparent)]
    ReportArgs(clap::Error),
    #[error("cannot read {}: {source}", path.display())]
    ConfigUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not UTF-8 text", path.display())]
    ConfigNotUtf8 { path: PathBuf },
    /// The config file is not TOML.
    #[error("{}: {}", path.display(), source.message().trim())]
    ConfigSyntax {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    /// A key that looks like a credential: never read from a file.
    #[error("{}: `{key}`: API keys are never read from the config file; export DEEPSEEK_API_KEY, OPENAI_API_KEY or HEL_API_KEY instead", path.display())]
    ConfigKey { path: PathBuf, key: String },
    /// A key hel does not know, or a value of the wrong type.
    #[error("{}: {} (keys: provider, model, base_url, access, context_window, max_output_tokens, compaction, compact_at, keep_recent, stream, allow_git_write, network, resume_replay, trash_days, store_budget, mcp_servers, hooks)", path.display(), source.message().trim())]
    ConfigKeys {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("{}: {source}", path.display())]
    McpServers {
        path: PathBuf,
        #[source]
        source: hel_agent::mcp::McpConfigError,
    },
    /// A `[[hooks]]` table hel cannot run.
    #[error("{}: {why}", path.display())]
    Hook { path: PathBuf, why: String },
    #[error("compact_at and keep_recent go together (flags or config file)")]
    CompactAtAlone,
    #[error("the pattern is longer than {max} bytes")]
    PatternTooLong { max: usize },
    #[error("not a regular expression hel can use: {}", escape_line(&.0.to_string()).replace("^J", " "))]
    Pattern(#[source] regex::Error),
    #[error("{} is not inside the project {}", path.display(), root.display())]
    NotInProject { path: PathBuf, root: PathBuf },
    #[error("{} leads outside the project", path.display())]
    OutsideProject { path: PathBuf },
    #[error("neither XDG_CONFIG_HOME nor HOME is set: hel has nowhere to keep remotes")]
    NoConfigHome,
    #[error("no remote is configured: `hel remote add NAME URL` adds one")]
    NoRemoteConfigured,
    #[error(
        "more than one remote is configured: say which with --remote NAME (`hel remote list`)"
    )]
    WhichRemote,
    #[error("{spec} names more than one session on {remote}: give more digits")]
    AmbiguousRemoteSession { spec: String, remote: String },
    #[error("{spec:?}: give the whole session id to delete it on a remote")]
    WholeIdToDelete { spec: String },
    #[error("--grace {grace:?}: {source} (e.g. 24h, 90m)")]
    Grace {
        grace: String,
        #[source]
        source: humantime::DurationError,
    },
    #[error("--grace must be at least {}: a push may take up to half of that between its data and its ref", humantime::format_duration(*min))]
    GraceTooShort { min: Duration },
}

/// What hel will not do, and why.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("{}", in_use(session, holder.as_deref()))]
    InUse {
        session: String,
        /// Who holds it, as the lease file says (untrusted).
        holder: Option<String>,
    },
    #[error("no session {session} in this project; a session exists once an answer completes (`hel sessions` lists them)")]
    NoSuchSession { session: String },
    #[error("session {session} has no checkpoint yet: the instance working on it has not completed an answer")]
    NoCheckpoint { session: String },
    #[error("no session of this project to resume (none with an answer, or all in use): `hel` starts one")]
    NothingToResume,
    #[error("no session picked; nothing resumed")]
    NonePicked,
    #[error("this session has no answer to go back to yet")]
    NoAnswerYet,
    #[error("this session's family is too large to draw: its sessions' histories hold more than {max} records")]
    TreeTooLarge { max: usize },
    #[error("session {session} not deleted (the answer was no)")]
    DeleteDeclined { session: SessionId },
    #[error("session {session} not deleted: could not ask on the terminal ({why}); --yes deletes without asking")]
    DeleteUnasked { session: SessionId, why: String },
    /// `verb` is "undo" or "restore".
    #[error(
        "{verb} not made: the answer was no; nothing was written (--yes removes without asking)"
    )]
    ChangeDeclined { verb: &'static str },
    #[error("{verb} not made: could not ask on the terminal ({why}); nothing was written (--yes removes without asking)")]
    ChangeUnasked { verb: &'static str, why: String },
    #[error(
        "session {session} has no snapshot of the project's files (saved with --no-workspace)"
    )]
    NoSnapshots { session: SessionId },
    #[error("checkpoint {checkpoint} has no snapshot of the project's files")]
    NoSnapshot { checkpoint: ObjectId },
    #[error("checkpoint {checkpoint} has no earlier snapshot to compare with (use --against or --worktree)")]
    NoEarlierSnapshot { checkpoint: ObjectId },
    /// `verb` is "undo", "restore" or "--restore-files".
    #[error("{verb} not made: session {session} arrived with this .hel/, which was not made here (cloned, copied or moved with the project), and hel never writes a shipped session's snapshots into the project's files; `hel diff` and `hel sessions show` read it, and `hel sessions adopt {session}` makes it this project's own if you made it")]
    Shipped {
        verb: &'static str,
        session: SessionId,
    },
}

impl Refusal {
    /// A store error hel says in its own words: a session that is busy,
    /// unknown or without a checkpoint, with what to do.
    pub fn of_store(e: &hel_store::Error) -> Option<Refusal> {
        use hel_store::Error as E;
        match e {
            E::InUse { session, holder } => Some(Refusal::InUse {
                session: session.clone(),
                holder: holder.clone(),
            }),
            E::NoSuchSession { session } => Some(Refusal::NoSuchSession {
                session: session.clone(),
            }),
            E::NoCheckpoint { session } => Some(Refusal::NoCheckpoint {
                session: session.clone(),
            }),
            _ => None,
        }
    }
}

/// What hel could not get from the system it runs on.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// `hel mcp list` could not start its runtime or instance.
    #[error(transparent)]
    Mcp(hel_agent::mcp::ProbeError),
    #[error("cannot use the terminal: {0}")]
    Editor(#[source] rustyline::error::ReadlineError),
    #[error("cannot use the terminal: {0}")]
    Picker(#[source] dialoguer::Error),
    #[error("cannot write the messages as JSON: {0}")]
    MessagesJson(#[source] serde_json::Error),
    #[error("cannot write the messages as JSON: {0}")]
    MessagesText(#[source] std::string::FromUtf8Error),
    #[error("cannot write the export: {0}")]
    Export(#[source] std::io::Error),
    /// A file of the project, named as a diff names it.
    #[error("cannot read {path}: {source}")]
    ReadFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The refusal of a session another instance holds: which one (its pid,
/// from the lease file: untrusted, so only digits are taken) and what to
/// do.
fn in_use(session: &str, holder: Option<&str>) -> String {
    let pid = holder
        .and_then(|h| h.strip_prefix("pid "))
        .and_then(|rest| rest.split(' ').next())
        .filter(|p| !p.is_empty() && p.len() <= 10 && p.bytes().all(|b| b.is_ascii_digit()));
    match (pid, holder) {
        (Some(pid), Some(h)) => format!(
            "session {session} is in use by the hel instance with pid {pid} ({h}): leave hel there (Ctrl-D or /exit), or stop it with `kill {pid}`, then run this again"
        ),
        _ => format!(
            "session {session} is in use by another hel instance: leave hel there (Ctrl-D or /exit), then run this again"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_session_names_its_holder_and_what_to_do() {
        assert_eq!(
            in_use("s", Some("pid 42 since 2026-12-01T00:00:00.000Z")),
            "session s is in use by the hel instance with pid 42 (pid 42 since 2026-12-01T00:00:00.000Z): leave hel there (Ctrl-D or /exit), or stop it with `kill 42`, then run this again"
        );
        // A lease file that says anything else: no pid is made up.
        for odd in [None, Some("pid ; rm -rf /"), Some("someone")] {
            assert_eq!(
                in_use("s", odd),
                "session s is in use by another hel instance: leave hel there (Ctrl-D or /exit), then run this again"
            );
        }
    }
}
