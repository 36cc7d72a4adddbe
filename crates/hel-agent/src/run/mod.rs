//! A run: the agent at work on one session of a project, from its start
//! (configuration, the instance, the session, restoring a checkpoint)
//! through its instructions (each completed answer saved as a checkpoint)
//! to its end (the sandbox, the instance and spill working copies gone).

mod error;
mod restore;
mod setup;

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use hel_store::{Record, SessionId, SessionState, Store};

use crate::agent::{Agent, Parts};
use crate::compact::Policy;
use crate::event::{Event, Observer, Warning};
use crate::hooks::HookEvent;
use crate::instance::Instance;
use crate::interrupt::Interrupts;
use crate::outcome::{Outcome, Termination};
use crate::project::Project;
use crate::record::Recorder;
use crate::session::{self, Session, Start};
use crate::spill::SpillStore;
use crate::system;
use crate::tools::cursor::CursorTable;
use crate::tools::paths::ProjectDir;
use crate::tools::{Confirm, ToolCtx, ToolName};
use crate::workspace::Snapshots;

pub use error::{RestoreFilesError, StartError};
pub use setup::{Compaction, Options};

/// What a run talks to besides the model: who hears its events, who
/// confirms writes and commands, and where interrupts come from.
pub struct Host {
    pub observer: Rc<dyn Observer>,
    pub confirm: Arc<dyn Confirm>,
    pub interrupts: Interrupts,
}

/// A run in progress. Dropping it ends it (see [`Run::finish`]).
pub struct Run {
    agent: Agent,
    /// Where the run works.
    project: Project,
    session: Option<Session>,
    /// A new session not made yet: it is made when the model first
    /// answers, so a run that never reaches a model leaves nothing.
    pending: Option<Pending>,
    /// Snapshots of the project's files (None: off, or no session).
    snapshots: Option<Snapshots>,
    /// The last instruction, when it ended with nothing of it kept: the
    /// next one carries it, or `/retry` sends it again.
    unanswered: Option<Unanswered>,
    instance: Instance,
    observer: Rc<dyn Observer>,
    /// The model's context window, in tokens.
    window: u64,
    /// Tokens kept verbatim by a compaction the user asks for.
    keep_recent: u64,
    /// The MCP servers to start at the first instruction.
    mcp: Vec<crate::mcp::ServerSpec>,
    /// What a resumed checkpoint's settings are compared with once the MCP
    /// tools are known.
    saved: Option<restore::Saved>,
    access: crate::tools::Access,
    /// Ctrl-C while the MCP servers start.
    interrupts: Interrupts,
    finished: bool,
    /// The last instruction completed and its answer was not saved: its
    /// checkpoint failed, or no session could be made for it.
    unsaved: bool,
}

/// A new session that is made at the model's first answer.
struct Pending {
    store: Store,
    id: SessionId,
    /// The project directory, as checkpoints record it.
    cwd: String,
    /// Workspace snapshots' limits (None: `--no-workspace`).
    workspace: Option<hel_workspace::Options>,
}

/// An instruction that ended before anything of it was kept.
struct Unanswered {
    /// As the user gave it (what `/retry` names and records).
    instruction: String,
    /// As the model was to be told it (carrying one before it, if any).
    said: String,
    termination: Termination,
}

impl Unanswered {
    /// The line that follows it in the next instruction's user message.
    fn note(&self) -> String {
        let how = match self.termination {
            Termination::Interrupted => "was interrupted".to_owned(),
            t => format!("did not complete ({})", t.name()),
        };
        format!("[hel: the instruction above {how} before it was answered; the next instruction follows]")
    }
}

/// Where a run stands between instructions (the interactive prompt shows
/// it).
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// The session (None: the run is not saved). A new session has its
    /// id from the start, and is saved from the model's first answer on.
    pub session: Option<hel_store::SessionId>,
    /// The session's newest record (None: nothing saved yet).
    pub head: Option<hel_store::ObjectId>,
    /// Estimated tokens of the next request's conversation.
    pub context_tokens: u64,
    /// The estimate rests on no count of the server's (hel's chars/4).
    pub context_estimated: bool,
    /// The model's context window.
    pub window: u64,
    /// Tokens the API reported over the last instruction.
    pub usage: crate::agent::Usage,
    pub model: String,
}

impl Run {
    /// Start a run on the session `start` names, in the project found
    /// from the current directory (or `--project`).
    /// The first event is always [`Event::Session`]. A new session that
    /// cannot be made is a warning (the run goes on unsaved); any other
    /// problem is an error, before any instruction.
    pub fn start(options: Options, start: Start, host: Host) -> Result<Run, StartError> {
        let mut setup = setup::Setup::new(&options)?;
        let window = setup.window;
        let keep_recent = setup.policy.map_or_else(
            || Policy::defaults(window, options.provider.max_output_tokens).keep_recent,
            |p| p.keep_recent,
        );
        let project = setup.project.clone();
        let allow_write = hel_sandbox::check_allow_write(
            &options.allow_write,
            &project.root,
            &crate::instance::runtime_root(),
        )?;
        let instance = Instance::start()?;
        let store = Store::open(&project.root)?;
        let observer = host.observer;
        let (mut session, head, pending) = match start {
            Start::New => {
                let pending = Pending {
                    store: store.clone(),
                    id: SessionId::new_random(),
                    cwd: session::recorded_cwd(&project.root),
                    workspace: options.workspace,
                };
                (None, None, Some(pending))
            }
            _ => {
                let (session, head) = take_session(&store, &project.root, &start, &*observer)?;
                (session, head, None)
            }
        };
        let id = match (&session, &pending) {
            (Some(s), _) => Some(s.id().clone()),
            (None, Some(p)) => Some(p.id.clone()),
            (None, None) => None,
        };
        setup.hooks.session(id.as_ref(), &start);
        observer.event(Event::Session(id));
        let recorder = match &options.record {
            Some(dir) => Some(recorder(dir, &setup.config.model, session.as_ref())?),
            None => None,
        };
        let spill = match &session {
            Some(s) => SpillStore::for_session(&store, Arc::clone(&s.lease)),
            None => SpillStore::for_instance(&instance.spill()),
        };
        let project_dir = ProjectDir::open(&project.root)
            .map_err(StartError::ProjectDir)?
            .working_in(project.cwd_in_root())
            .allowing_git_writes(options.allow_git_write);
        let system = system::build(&project_dir, &options.instructions, setup.toolset.names());
        observer.event(Event::Project {
            root: (project.root != project.cwd).then(|| project.root.clone()),
            found: project.found,
            instructions: system.files,
        });
        if !options.sandbox && setup.toolset.contains(ToolName::Bash) {
            observer.warn(Warning::Unconfined);
        }
        for w in system.warnings {
            observer.warn(w.into());
        }
        let mut tools = ToolCtx {
            project: project.root.clone(),
            cwd: project.cwd.clone(),
            project_dir: Arc::new(project_dir),
            access: options.access,
            bash_timeout: options.bash_timeout,
            sandbox: options.sandbox,
            network: options.network,
            // Every server of the config, enabled or not.
            withheld: Arc::new(crate::mcp::withheld(&options.mcp)),
            secrets: crate::tools::secret::redactor(&crate::mcp::withheld(&options.mcp)),
            allow_write,
            allow_git_write: options.allow_git_write,
            tmp: instance.tmp(),
            commands: Default::default(),
            cursors: CursorTable::default(),
            spill,
            confirm: host.confirm,
            observer: Rc::clone(&observer),
            mcp: Default::default(),
        };
        // The project's instructions files are text from outside too.
        let system_message =
            crate::tools::secret::redact_content(&mut tools.secrets, system.message);
        let parts = Parts {
            config: setup.config,
            client: setup.client,
            toolset: setup.toolset,
            tools,
            recorder,
            policy: setup.policy,
            max_turns: options.max_turns,
            interrupts: host.interrupts.clone(),
            observer: Rc::clone(&observer),
            limits: store.limits(),
            window,
            hooks: setup.hooks,
        };
        let mut agent = Agent::new(parts, system_message);
        let mcp: Vec<crate::mcp::ServerSpec> =
            options.mcp.iter().filter(|s| s.enabled).cloned().collect();
        let mut saved = None;
        if let (Some(s), Some(head)) = (session.as_mut(), head) {
            saved = restore::restore(
                s,
                &mut agent,
                head,
                &*observer,
                options.relocate,
                !mcp.is_empty(),
            )?;
        }
        let mut snapshots = match (&options.workspace, &session) {
            (Some(opts), Some(s)) => match Snapshots::open(&s.store, *opts) {
                Ok(snaps) => Some(snaps.with_secrets(agent.tools().secrets.detector())),
                Err(e) => {
                    observer.warn(Warning::WorkspaceOff(e));
                    None
                }
            },
            _ => None,
        };
        if let (Some(snaps), Some(s)) = (snapshots.as_mut(), &session) {
            if let Some(head) = s.state.head {
                snaps
                    .resume_from(&s.store, &head)
                    .map_err(StartError::Workspace)?;
            }
        }
        Ok(Run {
            agent,
            project,
            session,
            pending,
            snapshots,
            unanswered: None,
            instance,
            observer,
            window,
            keep_recent,
            mcp,
            saved,
            access: options.access,
            interrupts: host.interrupts,
            finished: false,
            unsaved: false,
        })
    }

    /// Start the MCP servers, once, before the run's first request: all at
    /// once, each within its startup timeout; one that fails is said and
    /// left out. Then a resumed checkpoint's settings are compared with
    /// the complete toolset. False: interrupted (Ctrl-C) before the servers
    /// were up; those that had started are stopped, and the next
    /// instruction tries again.
    async fn start_mcp(&mut self) -> bool {
        if !self.mcp.is_empty() {
            let seen = self.interrupts.count();
            let logs = crate::mcp::log_dir();
            let started = tokio::select! {
                s = crate::mcp::start_all(&self.mcp, &logs, &self.agent.tools().withheld) => s,
                // Dropping the starts stops their processes.
                _ = self.interrupts.after(seen) => return false,
            };
            self.mcp.clear();
            for w in started.warnings {
                self.observer.warn(w.into());
            }
            self.agent
                .add_mcp(crate::mcp::Tools::new(started.servers), self.access);
        }
        if let Some(saved) = self.saved.take() {
            restore::settle(&mut self.agent, saved, &*self.observer);
        }
        true
    }

    /// Run one instruction. A completed answer is saved as a checkpoint
    /// before this returns (an answer shown is an answer on disk); a failed
    /// save is a warning, and the next answer saves everything. With
    /// workspace snapshots on, the project's files are recorded when the
    /// model first replies, before any tool runs (so even an instruction
    /// that never ends can be undone), and when it ends, completed or not.
    /// An instruction before it that ended with nothing kept comes first
    /// in the user message, with a line saying how it ended.
    pub async fn instruction(&mut self, text: &str) -> Outcome {
        // What the user says (and the files it attaches) holds secrets by
        // handle only, from here on.
        let text = &*self.agent.tools_mut().secrets.redact(text).into_owned();
        let said = match self.unanswered.take() {
            Some(u) => format!("{}\n\n{}\n\n{text}", u.said, u.note()),
            None => text.to_owned(),
        };
        self.send(text, said).await
    }

    /// Whether the last instruction's answer went unsaved: it completed,
    /// and its checkpoint could not be committed (or no session could be
    /// made). A warning said why; `-p` then exits 1.
    pub fn answer_unsaved(&self) -> bool {
        self.unsaved
    }

    /// The last instruction, if it ended with nothing of it kept (what
    /// [`Run::retry`] sends again).
    pub fn unanswered(&self) -> Option<&str> {
        self.unanswered.as_ref().map(|u| u.instruction.as_str())
    }

    /// Send the last instruction again, as it was to be said, if it ended
    /// with nothing of it kept (None: there is none).
    pub async fn retry(&mut self) -> Option<Outcome> {
        let u = self.unanswered.take()?;
        Some(self.send(&u.instruction, u.said).await)
    }

    /// Run `said` as the instruction `text`.
    async fn send(&mut self, text: &str, said: String) -> Outcome {
        // A Ctrl-C while the MCP servers start ends the instruction.
        let outcome = if self.start_mcp().await {
            let head = self.session.as_ref().and_then(|s| s.state.head);
            let head = head.map(|h| h.to_hex());
            self.agent.session_start(head).await;
            let told = self.restore_note(&said);
            let (session, pending, snapshots) =
                (&mut self.session, &mut self.pending, &mut self.snapshots);
            let observer = Rc::clone(&self.observer);
            let mut hooks = Hooks {
                session,
                pending,
                snapshots,
                observer: &*observer,
                text,
                rounds: session::RoundLog::default(),
            };
            self.agent.run_instruction(&told, &mut hooks).await
        } else {
            Outcome::Incomplete(crate::outcome::Incomplete::Interrupted)
        };
        // What the commands left running acts before the end snapshot, or
        // not at all (objects-spec §10.6: an instruction's changes include
        // its commands' background children).
        let interrupted = matches!(
            outcome,
            Outcome::Incomplete(crate::outcome::Incomplete::Interrupted)
        );
        self.agent.settle_commands(interrupted).await;
        if let Some(rec) = self.agent.recorder() {
            let (answer, error) = match &outcome {
                Outcome::Completed(a) => (Some(a.as_str()), None),
                Outcome::Incomplete(why) => (None, Some(why.to_string())),
            };
            if let Some(w) = rec.instruction(outcome.termination(), answer, error) {
                self.observer.warn(w);
            }
        }
        if matches!(outcome, Outcome::Incomplete(_)) && self.agent.instruction_dropped() {
            self.unanswered = Some(Unanswered {
                instruction: text.to_owned(),
                said,
                termination: outcome.termination(),
            });
        }
        let record = match &outcome {
            Outcome::Completed(_) => Some(Record::Answer),
            // What an unfinished instruction left is recorded when its
            // start was.
            Outcome::Incomplete(_)
                if self.snapshots.as_ref().is_some_and(|s| s.start.is_some()) =>
            {
                Some(Record::Interrupted)
            }
            Outcome::Incomplete(_) => None,
        };
        // A completed answer with no session to save it in (making one
        // failed, and said so) is not saved either.
        self.unsaved = record == Some(Record::Answer) && self.session.is_none();
        let mut committed = None;
        if let (Some(record), Some(s)) = (record, self.session.as_mut()) {
            match s.record(&mut self.agent, text, record, self.snapshots.as_mut()) {
                Ok(saved) => {
                    if let (Some(c), Record::Answer) = (&saved.committed, record) {
                        self.observer.event(Event::CheckpointSaved { id: c.id });
                        committed = Some(c.id);
                    }
                    for w in saved.warnings {
                        self.observer.warn(w);
                    }
                }
                Err(e) => {
                    self.unsaved = record == Record::Answer;
                    self.observer.warn(Warning::CheckpointFailed(e));
                }
            }
        }
        if let Some(id) = committed {
            let fields = || serde_json::json!({"checkpoint": id.to_hex()});
            self.agent.hook(HookEvent::Checkpoint, fields).await;
        }
        if let Some(snaps) = self.snapshots.as_mut() {
            snaps.start = None;
        }
        // The end record's commit cut the instruction's round records;
        // without one (no snapshots, a failed save) they go now: what
        // they hold is in the conversation, which the next commit saves.
        if let Some(s) = &self.session {
            hel_store::rounds::discard(&s.lease);
        }
        outcome
    }

    /// Where the run works: the project's root and where hel started.
    pub fn project(&self) -> &Project {
        &self.project
    }

    /// The conversation as the next request sends it (the system prompt
    /// first): a resumed session's earlier messages, for a replay.
    pub fn messages(&self) -> &[serde_json::Value] {
        self.agent.conversation().messages()
    }

    /// Where the run stands: its session, context use and last usage.
    pub fn status(&self) -> Status {
        let conversation = self.agent.conversation().messages();
        Status {
            session: match (&self.session, &self.pending) {
                (Some(s), _) => Some(s.id().clone()),
                (None, p) => p.as_ref().map(|p| p.id.clone()),
            },
            head: self.session.as_ref().and_then(|s| s.state.head),
            context_tokens: self
                .agent
                .meter()
                .estimate(conversation, &self.agent.config().tools),
            context_estimated: self.agent.meter().is_estimated(),
            window: self.window,
            usage: self.agent.usage(),
            model: self.agent.config().model.clone(),
        }
    }

    /// Send the next requests to `model`; the next checkpoint records it.
    pub fn set_model(&mut self, model: &str) {
        self.agent.set_model(model);
    }

    /// Change the access mode from the next tool call on (the user's own
    /// act at the prompt), and whether sandboxed commands may use the
    /// network. The tools offered stay as the run started them: to go
    /// from read-only to writing, start another run.
    pub fn set_access(&mut self, access: crate::tools::Access, network: bool) {
        self.access = access;
        let tools = self.agent.tools_mut();
        tools.access = access;
        tools.network = network;
    }

    /// Compact the conversation now (the user asked): the summary is saved
    /// with the next answer. Returns whether the conversation changed.
    pub async fn compact_now(&mut self) -> Result<bool, crate::outcome::Incomplete> {
        self.agent.compact_now(self.keep_recent).await
    }

    /// What the model is told: the instruction, after a note when files
    /// were restored since the last answer.
    fn restore_note(&self, text: &str) -> String {
        let note = self.session.as_ref().and_then(|s| {
            let head = s.state.head?;
            let restores = hel_workspace::history::restores_since_answer(&s.store, &head).ok()?;
            crate::workspace::restored_note(&restores)
        });
        match note {
            Some(note) => format!("{note}\n\n{text}"),
            None => text.to_owned(),
        }
    }

    /// Make the project's files as they were at the checkpoint this run's
    /// session was forked from (`hel resume SESSION --at CHECKPOINT
    /// --restore-files`), recorded in this session: only files the forked
    /// session changed since, and only where they are still what it last
    /// recorded (unless `force`).
    pub fn restore_forked_files(
        &mut self,
        force: bool,
    ) -> Result<hel_workspace::undo::Outcome, RestoreFilesError> {
        use hel_workspace::undo::GoBack;
        let (Some(s), Some(snaps)) = (self.session.as_mut(), self.snapshots.as_mut()) else {
            return Err(RestoreFilesError::Off);
        };
        let head = s.state.head.ok_or(RestoreFilesError::NotAFork)?;
        let fork = s.store.checkpoint(&head)?;
        let (Some(at), Some(ws), Some(hel_store::Record::Fork)) = (
            fork.parents.first().copied(),
            fork.workspace.as_ref(),
            fork.record,
        ) else {
            return Err(RestoreFilesError::NotAFork);
        };
        let origin = s.store.checkpoint(&at)?.session_id;
        if !hel_store::identity::origin(&s.store)?.owns(&origin) {
            return Err(RestoreFilesError::Shipped(origin));
        }
        // The files as the origin last recorded them are what the project
        // should hold: an origin in the trash recorded them at the head its
        // entry keeps; of one deleted for good only the fork point's
        // record is known, so files changed after it are left alone.
        let origin_head = match s.store.head(&origin) {
            Ok(h) => h,
            Err(hel_store::Error::Trashed { .. }) => s
                .store
                .trash_entries()?
                .into_iter()
                .find(|t| t.session == origin)
                .map_or(at, |t| t.head),
            Err(hel_store::Error::NoSuchSession { .. }) => at,
            Err(e) => return Err(e.into()),
        };
        let expected = hel_workspace::history::last_recorded(&s.store, &origin_head)
            .map_err(hel_workspace::undo::UndoError::from)?;
        let go = GoBack {
            target: ws.tree,
            expected,
            from: at,
            start: false,
            history: origin_head,
            undo: false,
            paths: Vec::new(),
            force,
        };
        let out = hel_workspace::undo::go_back(
            &s.store,
            &s.lease,
            &mut s.state,
            snaps.workspace_mut(),
            &go,
        );
        snaps.forget();
        Ok(out?)
    }

    /// End the run: write the record, end every process a command started,
    /// then remove the instance's tmp and the session's spill working
    /// copies (a cache of the committed blobs). Runs once; dropping the run
    /// calls it.
    pub fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let head = self.session.as_ref().and_then(|s| s.state.head);
        let head = head.map(|h| h.to_hex());
        self.agent.session_end(head);
        if let Some(w) = self.agent.recorder().and_then(|rec| rec.flush()) {
            self.observer.warn(w);
        }
        // Every process a command started ends before tmp and spill go,
        // and every MCP server.
        self.agent.tools_mut().mcp.shutdown();
        self.agent.tools_mut().commands.shutdown();
        if let Some(s) = &self.session {
            if let Err(e) = hel_store::spill::clear(&s.store, &s.lease) {
                self.observer.warn(Warning::SpillNotRemoved(e));
            }
            // Only when loose objects or sealed packs piled up, and only if
            // no other process holds the store lock right now.
            if let Err(e) = hel_store::gc::maybe_repack(&s.store) {
                self.observer.warn(Warning::RepackFailed(e));
            }
        }
        self.instance.finish();
    }
}

/// What the run does during an instruction: record its start at the
/// model's first reply, and follow its calls that may change files.
struct Hooks<'a> {
    session: &'a mut Option<Session>,
    pending: &'a mut Option<Pending>,
    snapshots: &'a mut Option<Snapshots>,
    observer: &'a dyn Observer,
    text: &'a str,
    /// What of the instruction is recorded as it goes.
    rounds: session::RoundLog,
}

impl crate::agent::Hooks for Hooks<'_> {
    fn first_reply(&mut self, agent: &mut Agent) {
        started(
            agent,
            self.session,
            self.pending,
            self.snapshots,
            self.observer,
            self.text,
        );
    }

    fn progress(&mut self, agent: &mut Agent) {
        if let Some(s) = self.session.as_mut() {
            if let Some(w) = self.rounds.record(s, agent) {
                self.observer.warn(w);
            }
        }
    }

    fn before_call(&mut self, _agent: &mut Agent) {
        if let Some(s) = self.snapshots.as_mut() {
            s.before_call();
        }
    }

    fn after_call(&mut self, _agent: &mut Agent, left: bool) {
        if let Some(s) = self.snapshots.as_mut() {
            let store = self.session.as_ref().map(|s| &s.store);
            let changed = s.after_call(left, store);
            if !changed.is_empty() {
                self.observer.event(Event::FilesChanged(changed));
            }
        }
    }
}

/// The model first replied to instruction `text`: make the new session
/// if it is not made yet (one that cannot be made is a warning: the run
/// goes on unsaved), then record the project's files as the instruction
/// starts, before any tool runs.
fn started(
    agent: &mut Agent,
    session: &mut Option<Session>,
    pending: &mut Option<Pending>,
    snapshots: &mut Option<Snapshots>,
    observer: &dyn Observer,
    text: &str,
) {
    if let Some(p) = pending.take() {
        let before = hel_store::identity::origin(&p.store);
        match p.store.new_session_named(&p.id) {
            Ok(lease) => {
                if let Some(w) = session::took_over(&p.store, before) {
                    observer.warn(Warning::Store(w));
                }
                let lease = Arc::new(lease);
                let tools = agent.tools_mut();
                let limit = tools.spill.limit;
                tools.spill = SpillStore::for_session(&p.store, Arc::clone(&lease));
                tools.spill.limit = limit;
                if let Some(rec) = agent.recorder() {
                    rec.set_session(&p.id);
                }
                if let Some(opts) = p.workspace {
                    match Snapshots::open(&p.store, opts) {
                        Ok(snaps) => *snapshots = Some(snaps),
                        Err(e) => observer.warn(Warning::WorkspaceOff(e)),
                    }
                }
                *session = Some(Session {
                    store: p.store,
                    lease,
                    state: SessionState::default(),
                    cwd: p.cwd,
                });
            }
            Err(error) => observer.warn(Warning::NoSession {
                store: p.store.project_path().join(hel_store::STORE_DIR),
                error,
            }),
        }
    }
    let (Some(s), Some(snaps)) = (session.as_mut(), snapshots.as_mut()) else {
        return;
    };
    match s.record(agent, text, Record::Start, Some(snaps)) {
        Ok(saved) => {
            for w in saved.warnings {
                observer.warn(w);
            }
        }
        Err(e) => observer.warn(Warning::CheckpointFailed(e)),
    }
}

/// Take the session `start` names (an existing one), and the checkpoint
/// to continue from.
fn take_session(
    store: &Store,
    project: &std::path::Path,
    start: &Start,
    observer: &dyn Observer,
) -> Result<(Option<Session>, Option<hel_store::ObjectId>), StartError> {
    let o = session::open(store, project, start)?;
    for w in o.warnings {
        observer.warn(Warning::Store(w));
    }
    Ok((Some(o.session), o.head))
}

/// Record mode's recorder, writing to `dir`.
fn recorder(dir: &Path, model: &str, session: Option<&Session>) -> Result<Recorder, StartError> {
    let mut rec = Recorder::create(dir, model).map_err(|source| StartError::Record {
        dir: dir.to_owned(),
        source,
    })?;
    if let Some(s) = session {
        rec.set_session(s.id());
    }
    Ok(rec)
}

impl Drop for Run {
    fn drop(&mut self) {
        self.finish();
    }
}
