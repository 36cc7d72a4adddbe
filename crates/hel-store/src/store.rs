//! [`Store`]: an open store and a session's life in it (open, new session,
//! resume, load, list), tying objects, lists, snapshots, refs and locks
//! together; each of those modules is the only one that knows its part of
//! the format. Commits are `commit.rs`, forks `fork.rs`, delete `gc.rs`;
//! names, spill, what hel-workspace reads and the maintenance are
//! functions of their own modules taking a `&Store` (see the crate doc).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::dir::Dir;
use crate::format::STORE_DIR;
use crate::journal::{self};
use crate::layout::SPILL;
use crate::list::{Leaf, Limits, Reader};
use crate::lock::{self, Exclusive, SessionLease, Shared};
use crate::object::{Cap, Kind};
use crate::odb::Odb;
use crate::snapshot::{Checkpoint, Record, SpillEntry, Workspace};
use crate::summaries::SessionInfo;
use crate::{heads, refs, time, Error, ObjectId, Result, SessionId};
use crate::{ReadRecord, SessionRecord};

/// The session store of one project (its `.hel/` directory), held open:
/// the project and its store are reached through descriptors taken when
/// the store is opened, so a project moved or replaced under hel's feet
/// cannot redirect a write.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    project: Dir,
    layout: OnceLock<Odb>,
    limits: Limits,
    moved_warned: AtomicBool,
}

/// Something that went wrong without undoing what was asked: the caller
/// tells the user.
#[derive(Debug)]
pub enum Warning {
    /// After the ref moved: `refs/sessions/` could not be synced, so the
    /// move may not survive a crash (the checkpoint's objects and commit
    /// record are durable).
    RefNotSynced(Error),
    /// The project's path no longer leads to the directory hel opened; hel
    /// goes on with the store it opened (said once per process).
    ProjectMoved(PathBuf),
    /// After a fork was published: the name of the session it was made
    /// from could not be copied to it.
    NameNotCopied(Error),
    /// A new session was made in a store not made here (objects-spec
    /// §1.4): the store is this directory's from now on, and the sessions
    /// it held stay shipped.
    TookOver {
        why: crate::place::Why,
        shipped: usize,
    },
    /// The operation was done, but its entry in the operation log could
    /// not be written (oplog.rs): `hel op undo` cannot revert it.
    NotLogged(Error),
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::RefNotSynced(e) => write!(
                f,
                "the checkpoint was saved, but the directory of session refs could not be synced ({e}); a crash now may lose this checkpoint's move"
            ),
            Warning::ProjectMoved(p) => write!(
                f,
                "{} no longer leads to the project hel started in; checkpoints keep going to the store it opened",
                p.display()
            ),
            Warning::NameNotCopied(e) => write!(
                f,
                "the fork was made, but it could not be given a copy of the session's name ({e})"
            ),
            Warning::NotLogged(e) => write!(
                f,
                "done, but not written to the operation log ({e}): `hel op undo` cannot revert it"
            ),
            Warning::TookOver { why, shipped } => write!(
                f,
                "this .hel/ was not made in this directory ({why}): its {shipped} earlier session(s) stay listed as shipped, never continued, pushed or undone unless named; `hel sessions adopt --all` makes them yours"
            ),
        }
    }
}

/// What a writer knows of its session's last checkpoint, so that the next
/// commit writes only what is new. Obtained from [`Store::load`] or
/// [`SessionState::default`] for a new session, and updated by
/// [`Store::commit`].
#[derive(Clone, Debug, Default)]
pub struct SessionState {
    /// The checkpoint the session's ref names (the next commit's parent).
    pub head: Option<ObjectId>,
    pub(crate) checkpoints: u64,
    /// Where each message of the last committed list lives.
    pub(crate) locs: Vec<Leaf>,
    /// The committed list's nodes: (node id, list length after it).
    pub(crate) nodes: Vec<(ObjectId, usize)>,
    /// Items each of those nodes adds, to check a claimed leaf cheaply.
    pub(crate) node_len: HashMap<ObjectId, usize>,
    pub(crate) spill: BTreeMap<String, SpillEntry>,
    /// The blob holding `spill` when the head names its map by one
    /// (schema 3): a commit that adds no spill names it again.
    pub(crate) spill_blob: Option<ObjectId>,
    /// The sessions whose journals hold objects this session's history
    /// names (carried into every commit record).
    pub(crate) deps: BTreeSet<SessionId>,
    /// The head's commit record's sequence number (0: none yet here).
    pub(crate) seq: u64,
    /// The weight ([`crate::message::weight`]) of each message of the last
    /// committed list, when known (after a commit in this process; empty
    /// otherwise): what the admission check counts without weighing them
    /// again.
    pub(crate) weights: Vec<u64>,
}

impl SessionState {
    /// Spill files the last checkpoint keeps.
    pub fn spill(&self) -> &BTreeMap<String, SpillEntry> {
        &self.spill
    }

    fn set_chain(&mut self, nodes: Vec<(ObjectId, usize)>) {
        self.node_len.clear();
        self.locs.clear();
        let mut start = 0;
        for (node, end) in &nodes {
            self.node_len.insert(*node, end - start);
            self.locs.extend((0..end - start).map(|k| Leaf {
                node: *node,
                index: k as u32,
            }));
            start = *end;
        }
        self.nodes = nodes;
    }

    /// Is `leaf` a message of the last checkpoint?
    pub(crate) fn holds(&self, leaf: &Leaf) -> bool {
        self.node_len
            .get(&leaf.node)
            .is_some_and(|len| (leaf.index as usize) < *len)
    }
}

/// A checkpoint read back whole by [`Store::load`], validated.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub checkpoint: Checkpoint,
    /// What it keeps of the agent beside its messages, typed.
    pub record: ReadRecord,
    pub messages: Vec<Value>,
    /// Where each message is stored, for the next commit.
    pub leaves: Vec<Leaf>,
    pub state: SessionState,
}

/// What [`Store::read_whole`] read of a checkpoint.
struct Whole<T> {
    checkpoint: Checkpoint,
    spill: BTreeMap<String, SpillEntry>,
    record: ReadRecord,
    resolved: crate::list::Resolved<T>,
    published: Option<heads::Head>,
}

/// One checkpoint to commit: the conversation as it stands and the
/// session record beside it. Made by [`CommitInput::new`] and its
/// setters, the one way every writer builds it.
#[derive(Debug, Clone)]
pub struct CommitInput<'a> {
    /// The whole conversation as it stands.
    pub(crate) messages: &'a [Value],
    /// Per message, where the last checkpoint stores it when it is that
    /// message unchanged (the caller's promise; the store checks that each
    /// leaf is one of the last checkpoint's). Those are named where they
    /// are, not written again.
    pub(crate) leaves: &'a [Option<Leaf>],
    pub(crate) cwd: String,
    pub(crate) record: SessionRecord,
    /// New spill files to keep: the path the conversation names → the file
    /// name in the session's spill directory.
    pub(crate) new_spill: Vec<(String, String)>,
    /// First line of the last instruction.
    pub(crate) instruction: String,
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    /// Why the head moves (recorded in the commit record).
    pub(crate) why: Option<String>,
    /// What this record is: an answer, or a workspace record (whose
    /// messages are the last checkpoint's).
    pub(crate) kind: Record,
    /// The project's files at this record, when snapshotted: trees written
    /// through the same [`crate::Txn`].
    pub(crate) workspace: Option<Workspace>,
}

impl<'a> CommitInput<'a> {
    /// A `kind` record of `messages` (each with its leaf when it is where
    /// the last checkpoint stores it) and `record`, saved in the project
    /// directory `cwd`; no instruction, usage, spill or workspace until set.
    pub fn new(
        kind: Record,
        messages: &'a [Value],
        leaves: &'a [Option<Leaf>],
        cwd: &str,
        record: SessionRecord,
    ) -> CommitInput<'a> {
        CommitInput {
            messages,
            leaves,
            cwd: cwd.to_owned(),
            record,
            new_spill: Vec::new(),
            instruction: String::new(),
            input_tokens: 0,
            output_tokens: 0,
            why: None,
            kind,
            workspace: None,
        }
    }

    /// The last instruction (its first line is kept).
    pub fn instruction(mut self, text: &str) -> Self {
        self.instruction = text.to_owned();
        self
    }

    /// Tokens the instruction's requests reported.
    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }

    /// Why the head moves (default: the record's name and the
    /// instruction's first line).
    pub fn why(mut self, why: impl Into<String>) -> Self {
        self.why = Some(why.into());
        self
    }

    /// New spill files: the path the conversation names → the file's name
    /// in the session's spill directory.
    pub fn spill(mut self, new_spill: Vec<(String, String)>) -> Self {
        self.new_spill = new_spill;
        self
    }

    /// The project's files at this record.
    pub fn workspace(mut self, workspace: Option<Workspace>) -> Self {
        self.workspace = workspace;
        self
    }

    /// What the commit record says of why the head moved.
    pub(crate) fn reason(&self) -> String {
        self.why
            .clone()
            .unwrap_or_else(|| format!("{}: {}", self.kind.name(), first_line(&self.instruction)))
    }
}

/// The result of a commit: the checkpoint is published.
#[derive(Debug)]
pub struct Committed {
    pub id: ObjectId,
    pub objects_written: u64,
    pub bytes_written: u64,
    /// Messages from this index on are stored anew: `new_leaves` holds
    /// their leaves (the ones before keep theirs).
    pub leaves_from: usize,
    pub new_leaves: Vec<Leaf>,
    /// What went wrong after the checkpoint was published.
    pub warnings: Vec<Warning>,
}

impl Store {
    /// The store of the project at `project_dir` (its `.hel/`), with the
    /// default [`Limits`]. Nothing is created until something is written.
    /// `.hel` being a link or anything but a directory is refused.
    pub fn open(project_dir: &Path) -> Result<Store> {
        Store::open_with(project_dir, Limits::default())
    }

    /// As [`Store::open`], loading conversations within `limits`.
    pub fn open_with(project_dir: &Path, limits: Limits) -> Result<Store> {
        let project = Dir::open_path(project_dir)?;
        let layout = crate::upgrade::open(&project)?;
        Ok(Store::with(project, layout, limits))
    }

    /// The store of `project` open as `layout` (`None`: it has none yet).
    pub(crate) fn with(project: Dir, layout: Option<Odb>, limits: Limits) -> Store {
        let cell = OnceLock::new();
        if let Some(l) = layout {
            let _ = cell.set(l);
        }
        Store {
            inner: Arc::new(Inner {
                project,
                layout: cell,
                limits,
                moved_warned: AtomicBool::new(false),
            }),
        }
    }

    /// The store's format as its `format` file says (0: no store, or one
    /// being made).
    pub fn format(&self) -> u64 {
        self.inner.layout.get().map_or(0, |l| l.format())
    }

    /// The project directory, as it was opened.
    pub fn project_path(&self) -> &Path {
        self.inner.project.path()
    }

    /// The project directory, held open.
    pub(crate) fn project_dir(&self) -> &Dir {
        &self.inner.project
    }

    /// The store directory's path (for messages).
    pub(crate) fn root_path(&self) -> PathBuf {
        self.project_path().join(STORE_DIR)
    }

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// The open store, if the project has one.
    pub(crate) fn layout(&self) -> Result<Option<&Odb>> {
        if let Some(l) = self.inner.layout.get() {
            return Ok(Some(l));
        }
        // Made by another process since we opened the project?
        match crate::upgrade::open(&self.inner.project)? {
            Some(l) => Ok(Some(self.inner.layout.get_or_init(|| l))),
            None => Ok(None),
        }
    }

    /// The open store, created if absent.
    pub(crate) fn layout_create(&self) -> Result<&Odb> {
        if let Some(l) = self.layout()? {
            crate::upgrade::init(l, &self.inner.project)?;
            return Ok(l);
        }
        let made = crate::upgrade::create(&self.inner.project)?;
        Ok(self.inner.layout.get_or_init(|| made))
    }

    /// Does the store directory exist?
    pub fn exists(&self) -> bool {
        matches!(self.layout(), Ok(Some(_)))
    }

    /// Start a new session: a fresh id and its lease. It has no checkpoint
    /// (and is not listed as existing) until its first commit.
    pub fn new_session(&self) -> Result<SessionLease> {
        self.new_session_named(&SessionId::new_random())
    }

    /// Start a new session with an id chosen earlier (a run says its
    /// session's id when it starts, and makes the session only when the
    /// model first answers).
    pub fn new_session_named(&self, id: &SessionId) -> Result<SessionLease> {
        let layout = self.layout_create()?;
        // A store not made here is taken over first (place.rs).
        crate::place::claim(layout, &self.inner.project, None)?;
        let lock = Shared::take(layout)?;
        SessionLease::acquire(lock.layout, id, true)
    }

    /// Take the lease of an existing session to continue it, returning its
    /// newest checkpoint. Refused if the session is in use, unknown, or has
    /// no checkpoint.
    pub fn resume(&self, session: &SessionId) -> Result<(SessionLease, ObjectId)> {
        let no_such = || Error::NoSuchSession {
            session: session.to_string(),
        };
        let layout = self.layout()?.ok_or_else(no_such)?;
        let lock = Exclusive::take(layout)?;
        match heads::read(layout, session)? {
            Some(head) => {
                heads::owned(layout, session, &head)?;
                heads::writable(layout, session)?;
                Ok((SessionLease::acquire(lock.layout, session, true)?, head.id))
            }
            None if lock::is_busy(layout, session)? => Err(Error::InUse {
                session: session.to_string(),
                holder: lock::holder_of(layout, session),
            }),
            None if crate::trashed::has_any(layout, session)? => Err(Error::Trashed {
                session: session.to_string(),
            }),
            None => Err(no_such()),
        }
    }

    /// The checkpoint `session`'s ref names. A session that has none yet
    /// but is being worked on is [`Error::NoCheckpoint`]; one that has
    /// neither is [`Error::NoSuchSession`].
    pub fn head(&self, session: &SessionId) -> Result<ObjectId> {
        let no_such = || Error::NoSuchSession {
            session: session.to_string(),
        };
        let layout = self.layout()?.ok_or_else(no_such)?;
        match heads::read(layout, session)? {
            Some(h) => {
                heads::owned(layout, session, &h)?;
                Ok(h.id)
            }
            None if lock::is_busy(layout, session)? => Err(Error::NoCheckpoint {
                session: session.to_string(),
            }),
            None if crate::trashed::has_any(layout, session)? => Err(Error::Trashed {
                session: session.to_string(),
            }),
            None => Err(no_such()),
        }
    }

    pub(crate) fn layout_or_missing(&self, id: &ObjectId) -> Result<&Odb> {
        self.layout()?.ok_or_else(|| Error::Missing {
            id: *id,
            path: self.root_path(),
        })
    }

    /// Read checkpoint `id` (verified and validated).
    pub fn checkpoint(&self, id: &ObjectId) -> Result<Checkpoint> {
        crate::read::snapshot(self.layout_or_missing(id)?, id)
    }

    /// Read checkpoint `id` whole, verifying every object and validating
    /// everything it names (objects-spec §4.1): its messages (each one, and
    /// the pairing of tool calls with results), request config and
    /// cursors, within the store's [`Limits`]; and the state a writer needs
    /// to commit after it.
    pub fn load(&self, id: &ObjectId) -> Result<Loaded> {
        self.load_covering(id).map(|(loaded, _)| loaded)
    }

    /// [`Store::load`], and the list nodes and message blobs it validated
    /// whole (fsck checks them no further).
    pub(crate) fn load_covering(&self, id: &ObjectId) -> Result<(Loaded, crate::list::Covered)> {
        let whole = self.read_whole::<crate::list::Messages>(id)?;
        let Whole {
            checkpoint: cp,
            spill,
            record,
            resolved,
            published,
        } = whole;
        // Named again without a lookup only from a head, whose objects are
        // where its session may name them (with the head's deps).
        let spill_blob = published.as_ref().and(cp.spill.blob());
        let mut state = SessionState {
            head: Some(*id),
            checkpoints: cp.summary.checkpoints,
            spill,
            spill_blob,
            deps: published
                .as_ref()
                .map(heads::Head::deps)
                .unwrap_or_default(),
            seq: published.as_ref().map_or(0, heads::Head::seq),
            ..SessionState::default()
        };
        state.set_chain(resolved.chain);
        let loaded = Loaded {
            checkpoint: cp,
            record,
            messages: resolved.messages,
            leaves: state.locs.clone(),
            state,
        };
        Ok((loaded, resolved.covered))
    }

    /// Check checkpoint `id` as [`Store::load`] does, `Ok` exactly when
    /// `load` is, without keeping its conversation (fsck): each list node's
    /// messages are dropped once validated, the pairing of tool calls
    /// checked on what it needs of them. Gives the session the checkpoint
    /// says it is of, and what the read validated whole.
    pub(crate) fn check_covering(
        &self,
        id: &ObjectId,
    ) -> Result<(SessionId, crate::list::Covered)> {
        let whole = self.read_whole::<crate::list::Turns>(id)?;
        Ok((whole.checkpoint.session_id, whole.resolved.covered))
    }

    /// Everything [`Store::load`] reads and validates of checkpoint `id`,
    /// keeping of each message what `K` keeps.
    fn read_whole<K: crate::list::Keep>(&self, id: &ObjectId) -> Result<Whole<K::Of>> {
        let layout = self.layout_or_missing(id)?;
        let cp = crate::read::snapshot(layout, id)?;
        let json_blob = |blob: &ObjectId, cap: Cap| -> Result<Value> {
            let bytes = crate::read::of_kind(layout, blob, Kind::Blob, cap)?;
            crate::json::parse(&bytes, crate::json::Limits::STORED).map_err(|e| Error::Corrupt {
                id: *blob,
                path: layout.object_path(blob),
                reason: format!("{} is not JSON: {e}", cap.what),
            })
        };
        let record = ReadRecord::decode(
            json_blob(&cp.request_config, Cap::CONFIG)?,
            json_blob(&cp.cursors, Cap::CURSORS)?,
            &cp.meter,
        );
        let spill = crate::read::spill_map(layout, &cp)?;
        let resolved = Reader::new(layout, self.inner.limits, *id)
            .read_list::<K>(cp.messages.root, cp.messages.count)?;
        if resolved.messages.len() as u64 != cp.messages.count {
            return Err(Error::Corrupt {
                id: *id,
                path: layout.object_path(id),
                reason: format!(
                    "snapshot says {} messages, its list holds {}",
                    cp.messages.count,
                    resolved.messages.len()
                ),
            });
        }
        K::check_pairing(&resolved.messages).map_err(|reason| Error::BrokenConversation {
            checkpoint: *id,
            reason,
        })?;
        // The commit record that published this checkpoint, when it is its
        // session's head: what the next commit continues from.
        // A journal with a fault has no head to continue (and takes no
        // commit): what it holds intact still reads.
        let published = match heads::read(layout, &cp.session_id) {
            Err(Error::JournalFault { .. }) => None,
            head => head?.filter(|h| h.id == *id),
        };
        Ok(Whole {
            checkpoint: cp,
            spill,
            record,
            resolved,
            published,
        })
    }

    /// The state a writer of the lease's session needs to commit workspace
    /// records after its head ([`crate::Txn::commit_record`]) without loading its
    /// conversation. A message commit after it stores every message anew.
    pub fn record_state(&self, lease: &SessionLease) -> Result<SessionState> {
        let layout = self.layout_create()?;
        let Some(head) = heads::read(layout, lease.session())? else {
            return Ok(SessionState::default());
        };
        let cp = crate::read::snapshot(layout, &head.id)?;
        Ok(SessionState {
            head: Some(head.id),
            checkpoints: cp.summary.checkpoints,
            spill: crate::read::spill_map(layout, &cp)?,
            spill_blob: cp.spill.blob(),
            deps: head.deps(),
            seq: head.seq(),
            ..SessionState::default()
        })
    }

    /// The spill directory of the lease's session, created if absent.
    pub(crate) fn spill_dir(&self, lease: &SessionLease) -> Result<Dir> {
        let layout = self.layout_create()?;
        let sessions = layout.sessions_create()?;
        let dir = sessions
            .sub(lease.session().as_str())?
            .ok_or_else(|| Error::NoSuchSession {
                session: lease.session().to_string(),
            })?;
        Ok(dir.sub_create(SPILL, crate::layout::DIR_MODE)?)
    }

    /// Warn once when the project's path leads elsewhere than the
    /// directory hel opened (moved or replaced).
    pub(crate) fn check_project(&self, warnings: &mut Vec<Warning>) {
        let path = self.project_path();
        let here = std::fs::metadata(path).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        let moved = match (here, self.inner.project.identity()) {
            (Some(a), Ok(b)) => a != b,
            _ => true,
        };
        if moved && !self.inner.moved_warned.swap(true, Ordering::Relaxed) {
            warnings.push(Warning::ProjectMoved(path.to_owned()));
        }
    }

    /// The lease's journal writer, opened (and made known to the object
    /// database) at the session's first commit in this process.
    pub(crate) fn journal_writer<'j>(
        &self,
        layout: &Odb,
        lease: &SessionLease,
        slot: &'j mut Option<journal::Writer>,
    ) -> Result<&'j mut journal::Writer> {
        if slot.is_none() {
            // The journal's head is the commit record the ref names.
            let rule = journal::Rule::Ref(refs::read(layout, lease.session())?);
            let w = journal::Writer::open(
                layout.journals_create()?,
                layout.tmp_create()?,
                lease.session(),
                rule,
            )?;
            // A ref one commit behind its journal (objects-spec §5.4): the
            // commit past it is the session's head, so the ref is moved to
            // it before this commit moves it on from there.
            let behind = {
                let v = w.view.read().unwrap_or_else(|p| p.into_inner());
                v.behind.zip(v.head.as_ref().map(|c| c.head))
            };
            if let Some((from, head)) = behind {
                // A failed sync of the directory is what a commit's own
                // move would warn of: the journal holds the commit durably,
                // and a ref that reverts is read the same way again.
                let _ = refs::publish(layout, lease.session(), Some(from), head)?;
                let mut v = w.view.write().unwrap_or_else(|p| p.into_inner());
                v.rule = journal::Rule::Ref(Some(head));
                v.behind = None;
            }
            layout.index().adopt(std::sync::Arc::clone(&w.view));
            *slot = Some(w);
        }
        slot.as_mut()
            .ok_or_else(|| Error::Internal("journal writer not kept".into()))
    }

    /// All sessions of this store, most recently updated first: those with
    /// a checkpoint, and those being worked on that have none yet. A
    /// session whose checkpoint cannot be read is listed as broken. A time
    /// the store gives that is after the listing's own (a record dated in
    /// the future) says nothing of when it was made: that session is
    /// marked `future` and orders after every other, so it is never the
    /// newest. A session's row is what its ref's commit record and
    /// checkpoint say, read from the summary index while the ref and the
    /// journal are unchanged (`summaries.rs`): the same rows either way.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>> {
        let Some(layout) = self.layout()? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        // A hint: what it holds is used only while the ref and journal it
        // was read from are unchanged.
        let mut index = crate::summaries::Index::load(layout);
        let ids = self.session_ids(layout)?;
        // The system calls of a listing (four for the lease, two stats per
        // session) share a few threads; what follows reads files only for
        // sessions without a fresh entry.
        let probes = crate::par::map(&ids, |id| {
            Ok((lock::is_busy(layout, id)?, index.probe(layout, id)))
        })
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
        for (id, (busy, probe)) in ids.into_iter().zip(probes) {
            if let Some(info) = index.lookup(layout, &id, probe, busy) {
                out.push(info);
                continue;
            }
            if let Some(mut info) = listed(layout, id, busy) {
                index.learn(layout, &mut info);
                out.push(info);
            }
        }
        index.save(layout);
        let origin = crate::place::origin_of(layout, &self.inner.project)?;
        for s in &mut out {
            s.shipped = !origin.owns(&s.id);
        }
        // Taken after every head was read, so that a commit made while
        // this lists is not in the future.
        let now = time::now_ms();
        for s in &mut out {
            s.future = s.updated_ms > now;
        }
        out.sort_by(|a, b| {
            let newest = |s: &SessionInfo| if s.future { 0 } else { s.updated_ms };
            newest(b).cmp(&newest(a)).then(a.id.cmp(&b.id))
        });
        Ok(out)
    }

    /// Does `.hel/` hold anything under `session`'s name (a ref, a working
    /// directory, or something else in their place)?
    pub fn knows(&self, session: &SessionId) -> Result<bool> {
        let Some(layout) = self.layout()? else {
            return Ok(false);
        };
        if let Some(refs) = layout.refs()? {
            if refs.kind_of(session.as_str())?.is_some() {
                return Ok(true);
            }
        }
        if let Some(journals) = layout.journals()? {
            if journals
                .kind_of(&crate::journal::journal_name(session))?
                .is_some()
            {
                return Ok(true);
            }
        }
        if let Some(sessions) = layout.sessions()? {
            if sessions.kind_of(session.as_str())?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The ids of all sessions: those with a ref and those with only a
    /// working directory (started, no checkpoint yet), sorted.
    pub(crate) fn session_ids(&self, layout: &Odb) -> Result<Vec<SessionId>> {
        let mut ids = heads::sessions(layout)?;
        if let Some(dir) = layout.sessions()? {
            for e in dir.entries()? {
                if e.kind != crate::dir::Kind::Dir {
                    continue;
                }
                if let Some(Ok(id)) = e.name_str().map(str::parse::<SessionId>) {
                    ids.push(id);
                }
            }
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    pub(crate) fn layout_for_gc(&self) -> Result<Option<&Odb>> {
        self.layout()
    }
}

/// `session`'s listing row as its head, commit record and checkpoint say
/// (no index), or `None` when it is no session: no checkpoint, and nobody
/// working on it.
pub(crate) fn listed(layout: &Odb, id: SessionId, busy: bool) -> Option<SessionInfo> {
    let head = match heads::read_light(layout, &id) {
        Ok(h) => h,
        Err(e) => return Some(SessionInfo::broken(id, busy, None, e)),
    };
    let Some(head) = head else {
        // No checkpoint yet: a session only while it is worked on.
        return busy.then(|| SessionInfo {
            id,
            busy,
            head: None,
            updated_ms: time::now_ms(),
            checkpoints: 0,
            messages: 0,
            instruction: String::new(),
            first: String::new(),
            one_off: false,
            cwd: None,
            future: false,
            shipped: false,
            broken: None,
        });
    };
    let read = heads::checkpoint(layout, &id, &head);
    // A ref naming another session's checkpoint (copied from it) is no
    // row of either: resume and fsck refuse it, so the listing says so.
    if let Ok(cp) = &read {
        if let Err(e) = heads::owner_is(layout, &id, &head, cp) {
            return Some(SessionInfo::broken(id, busy, Some(head.id), e));
        }
    }
    // The commit record says what a listing shows; the checkpoint, where
    // it was saved.
    let c = head.commit;
    Some(SessionInfo {
        id,
        busy,
        head: Some(head.id),
        updated_ms: c.time_ms,
        checkpoints: c.summary.checkpoints,
        messages: c.summary.messages,
        instruction: c.summary.instruction,
        first: String::new(),
        one_off: false,
        cwd: read.ok().map(|cp| cp.cwd),
        future: false,
        shipped: false,
        broken: None,
    })
}

/// At most `max` characters of `text`.
pub(crate) fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// The first line of `text`, trimmed.
pub fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_owned()
}

/// Check that spill blob `id` is a blob of `size` bytes, as
/// [`spill_of_size`] does, without a copy of it when fsck's memo holds it.
pub(crate) fn check_spill_size(layout: &Odb, id: &ObjectId, size: u64) -> Result<()> {
    match layout.memo_len(id, Cap::SPILL) {
        Some((Kind::Blob, len)) if len == size => Ok(()),
        // Anything else is read as usual, which says what is wrong.
        _ => spill_of_size(layout, id, size).map(drop),
    }
}

/// Spill blob `id`, verified, when it holds `size` bytes; a snapshot that
/// says otherwise makes it corrupt.
pub(crate) fn spill_of_size(layout: &Odb, id: &ObjectId, size: u64) -> Result<Vec<u8>> {
    let bytes = crate::read::of_kind(layout, id, Kind::Blob, Cap::SPILL)?;
    if bytes.len() as u64 != size {
        return Err(Error::Corrupt {
            id: *id,
            path: layout.object_path(id),
            reason: format!(
                "spill blob of {} bytes where a snapshot says {size}",
                bytes.len()
            ),
        });
    }
    Ok(bytes)
}
