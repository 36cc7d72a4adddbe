//! What a run tells whoever drives it. The library prints nothing: it
//! hands [`Event`]s to an [`Observer`], and the `hel` binary renders them
//! (notes on stderr; on a terminal, the answer's text as it arrives).
//!
//! A turn's model response goes through [`Event::Waiting`], then
//! [`Event::ResponseStarted`] once something of it arrived, any number of
//! [`Event::TextDelta`]s and [`Event::ReasoningDelta`]s, and ends with [`Event::ResponseEnded`] or
//! [`Event::ResponseIncomplete`]. Compaction's requests send none of them.

use std::path::PathBuf;
use std::time::Duration;

use hel_store::{ObjectId, SessionId};

use crate::client::RequestError;
use crate::spill::Unspilled;
use crate::system::ContextFileWarning;

/// A file a call changed ([`Event::FilesChanged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// `A` (added), `M` (modified) or `D` (deleted).
    pub kind: char,
    /// Relative to the project's root (lossy UTF-8): raw, escape it
    /// before showing it.
    pub path: String,
    /// Its text before and after the call (empty for the side where it
    /// is absent), for a diff: only for the first few changed files that
    /// are small text on both sides whose content is known (read from the
    /// store, or the file now when it still holds what the scan saw).
    /// Raw text from the project: escape it before showing it.
    pub texts: Option<(String, String)>,
}

/// Something that happened during a run, in the order it happened.
#[derive(Debug)]
pub enum Event {
    /// The session this run works on; None when none could be made (the
    /// conversation is then not saved). Always the first event of a run.
    Session(Option<SessionId>),
    /// Where the run works, said once at its start, after
    /// [`Event::Session`].
    Project {
        /// The project's root when it is not where hel started (found
        /// above it, or given with `--project`).
        root: Option<PathBuf>,
        found: crate::project::Found,
        /// The instructions files read into the system message, in order.
        instructions: Vec<String>,
    },
    /// A resumed session continues with settings that differ from the
    /// saved ones (each difference in words, such as `toolset changed`).
    SettingsChanged(Vec<String>),
    /// A tool call is about to run: its id, name and raw arguments, as
    /// the model sent them.
    ToolStarted {
        id: String,
        name: String,
        arguments: String,
    },
    /// A tool call ended; `content` is what the model reads. `decision`:
    /// how its confirmation went; `spill`: the spill path its whole output
    /// was saved under, when it was too large for the conversation.
    ToolFinished {
        id: String,
        name: String,
        content: String,
        ok: bool,
        decision: crate::tools::access::Decision,
        spill: Option<String>,
    },
    /// The files a call changed, as the project's scans before and after
    /// it show them, in path order. Sent before the call's
    /// [`Event::ToolFinished`], only when it changed some.
    FilesChanged(Vec<FileChange>),
    /// A piece of what a running bash command printed (stdout and stderr
    /// as they arrive, at most `LIVE_CHUNK` bytes (tools/output.rs): the end
    /// of what one read got), for a live view. Raw bytes from the command:
    /// strip them before showing them. The tool's result is not made of
    /// these; it is [`Event::ToolFinished`]'s `content`, as always.
    ToolOutput(Vec<u8>),
    /// A turn's request was sent to the model; nothing of the response
    /// has arrived yet.
    Waiting,
    /// The first delta of a turn's response arrived (not streamed: the
    /// whole response).
    ResponseStarted,
    /// A piece of a turn's `content`, as it streams in. Raw model text:
    /// escape it before showing it on a terminal. Whether it is the answer
    /// or working notes is known at [`Event::ResponseEnded`].
    TextDelta(String),
    /// A piece of a turn's reasoning (`reasoning_content`), as it streams
    /// in: the model's thinking before its text or tool calls, not part of
    /// the answer. Raw model text: escape it before showing it.
    ReasoningDelta(String),
    /// A turn's response completed. `calls_tools`: it goes on to call
    /// tools, so its text was the model's working notes; otherwise its
    /// text is the answer (saved before the run returns it).
    ResponseEnded { calls_tools: bool },
    /// A turn's response as it joins the conversation, right after
    /// [`Event::ResponseEnded`]: its text (`content`, empty when none),
    /// how many tools it calls, and the tokens of its request (the
    /// writer's chars/4 estimate when `estimated`).
    Response {
        text: String,
        tool_calls: usize,
        input_tokens: u64,
        output_tokens: u64,
        estimated: bool,
    },
    /// A turn's response that had started did not complete (cut off,
    /// stalled, too large, interrupted, or cut at the output limit): what
    /// arrived of it is not part of the conversation and is not saved.
    ResponseIncomplete,
    /// A model request failed and is tried again after `wait`.
    Retry {
        error: RequestError,
        wait: Duration,
        retry: crate::client::Retry,
    },
    /// Old tool results were trimmed to keep the request under `under`
    /// tokens.
    Trimmed { under: u64 },
    /// The first `messages` messages after the system message are being
    /// summarized.
    Compacting { messages: usize },
    /// The summary was not smaller than what it would have replaced; the
    /// conversation stays as it was.
    CompactionSkipped,
    /// The output limit (`configured`, `--max-output-tokens`) does not fit
    /// the context window (`window`, `--context-window`) with the
    /// conversation: requests ask for what fits (`limit` for this one).
    /// Said once a run.
    OutputLowered {
        configured: u64,
        window: u64,
        limit: u64,
    },
    /// A completed answer was saved as checkpoint `id`.
    CheckpointSaved { id: ObjectId },
    /// A resumed session saved in project directory `from` continues in
    /// `to`; record `checkpoint` says so (`hel resume --relocate`).
    Relocated {
        from: String,
        to: String,
        checkpoint: ObjectId,
    },
    /// A hook of the user's config ran (or could not), in the order the
    /// hooks of an event run.
    Hook(crate::hooks::HookReport),
    /// Something went wrong that does not stop the run.
    Warning(Warning),
}

/// Something that went wrong without stopping the run. `Display` says what
/// happened and what hel does about it, in one line.
#[derive(Debug, thiserror::Error)]
pub enum Warning {
    /// No session could be made for a new run.
    #[error("cannot create a session in {} ({error}); this conversation will not be saved", store.display())]
    NoSession {
        store: PathBuf,
        error: hel_store::Error,
    },
    /// What the store reported after publishing a checkpoint or a fork.
    #[error("{0}")]
    Store(hel_store::Warning),
    /// The tool rounds of the instruction in progress could not be
    /// recorded as they finish: a crash before its end loses them.
    #[error("cannot record this instruction's tool calls as they finish ({0}); its end is saved as always, but a crash before then would lose them")]
    RoundsNotRecorded(hel_store::Error),
    /// A resumed session's last instruction was cut off (the process
    /// ended before it finished): what it did is carried into the
    /// conversation, before the next instruction.
    #[error("the session's last instruction was cut off (the hel process ended before it finished); the model is told what it did: its user message, {} with {}", crate::terminal::count(*calls as u64, "finished tool call", "finished tool calls"), if *calls == 1 { "its result" } else { "their results" })]
    CutOff { calls: usize },
    /// A completed answer could not be saved.
    #[error("could not save a checkpoint ({0}); the conversation goes on in memory and the next answer saves it all")]
    CheckpointFailed(hel_store::Error),
    /// `--no-sandbox` with the bash tool offered.
    #[error("--no-sandbox: bash commands run unconfined, with your permissions")]
    Unconfined,
    /// The project's instructions file cannot be used, or not whole.
    #[error(transparent)]
    ContextFile(#[from] ContextFileWarning),
    /// The cursors a checkpoint saved cannot be read.
    #[error("the saved read_file cursors could not be read; reads start over")]
    CursorsUnreadable,
    /// A large tool result could not be spilled; it was cut instead.
    #[error(transparent)]
    Unspilled(#[from] Unspilled),
    /// The session's spill working copies stayed behind at exit.
    #[error("cannot remove spill working copies: {0}")]
    SpillNotRemoved(hel_store::Error),
    /// The repack that runs on its own when packs or loose objects pile up
    /// failed; nothing is lost, `hel gc --repack` tries again.
    #[error(
        "the automatic repack failed ({0}); the store is as it was: `hel gc --repack` tries again"
    )]
    RepackFailed(hel_store::Error),
    /// The compaction request failed; the conversation stays as it was.
    #[error("compaction failed ({0}); keeping the conversation as is")]
    CompactionFailed(RequestError),
    /// The project's files could not be snapshotted for this checkpoint
    /// (undo cannot go back past it).
    #[error("cannot snapshot the project's files ({0}); this checkpoint cannot be undone")]
    WorkspaceFailed(crate::workspace::error::WorkspaceError),
    /// Workspace snapshots are off for this run.
    #[error("workspace snapshots are off: {0}")]
    WorkspaceOff(crate::workspace::error::WorkspaceError),
    /// A snapshot could not record some paths (unreadable, too large,
    /// past a budget, changed while it looked): undo and restore leave
    /// them alone. `first` names the first few, each with why; said again
    /// only when a snapshot meets one the run was not told of.
    #[error("{} could not be snapshotted, so undo does not track {}: {}{}", crate::terminal::count(*count as u64, "path", "paths"), if *count == 1 { "it" } else { "them" }, first.join("; "), match count.saturating_sub(first.len()) { 0 => String::new(), more => format!("; and {more} more") })]
    WorkspacePartial { count: usize, first: Vec<String> },
    /// A command created a git directory, or what git reads in one, while
    /// it ran: what it wrote there in that command was not read-only.
    #[error("a command created {} during the run: git runs the hooks and config in it outside the sandbox, and that command could write them, so check them before you use git there (later commands cannot)", .0.join(", "))]
    GitCreated(Vec<String>),
    /// The instruction's commands left processes running: its end waits
    /// for them (at most the command time limit) before it records the
    /// files, so that what they change is the instruction's to undo.
    #[error("waiting up to {secs} s for {} the commands left running; what {} change counts as this instruction's", crate::terminal::count(u64::from(*count), "process", "processes"), if *count == 1 { "it" } else { "they" })]
    ProcessesLeft { count: u32, secs: u64 },
    /// Processes the commands left were still running at the time limit
    /// (or at an interruption) and were killed.
    #[error("killed {} the commands left running", crate::terminal::count(u64::from(*.0), "process", "processes"))]
    ProcessesKilled(u32),
    /// The sandbox could not say whether processes remain: the files are
    /// recorded now, and what such a process changes later is not known
    /// to be the instruction's.
    #[error("cannot tell whether processes the commands left still run ({0}): the sandbox was stopped, and they with it")]
    ProcessesUnknown(String),
    /// What an instruction's own calls changed could not be told apart
    /// from what changed between them: its record holds every change
    /// while it ran.
    #[error("cannot tell this instruction's own changes from others' ({0}); its record holds every change made while it ran")]
    Attribution(crate::workspace::error::WorkspaceError),
    /// About the MCP servers: one that did not start, a tool left out, a
    /// server a resumed session used that is gone.
    #[error(transparent)]
    Mcp(#[from] crate::mcp::McpWarning),
    /// record.json could not be written.
    #[error("cannot write {}", .0.display())]
    RecordUnwritable(PathBuf),
}

/// Receives a run's events.
pub trait Observer {
    fn event(&self, event: Event);

    /// All of one read of what a running command prints (the
    /// [`Event::ToolOutput`] that follows carries at most its end).
    fn printed(&self, _data: &[u8]) {}

    fn warn(&self, warning: Warning) {
        self.event(Event::Warning(warning));
    }
}

/// An observer that drops every event (tests).
#[cfg(test)]
pub(crate) struct Ignore;

#[cfg(test)]
impl Observer for Ignore {
    fn event(&self, _: Event) {}
}
