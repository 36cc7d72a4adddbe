//! The one place that knows where things live under `.hel/`.
//!
//! ```text
//! .hel/.gitignore            "*"
//! .hel/.store.lock/lock      store lock (see lock.rs); in a store of
//!                            format 3 the lock was this file itself, a
//!                            directory since format 4 so that a format-3
//!                            hel fails to open it (see upgrade.rs)
//! .hel/.sessions.lock/       a directory where formats 1 and 2 kept their
//!                            store lock: an older hel fails to open it
//!                            before it writes anything (see upgrade.rs)
//! .hel/objects/ab/cdef…      loose objects, fan-out by the first two hex digits
//! .hel/refs/sessions/<uuid>  a session's head: its newest snapshot id (format 3)
//! .hel/refs/dependents/<dep>/<uuid>  empty: <uuid>'s head may name objects
//!                            of <dep>'s journal (format 4, dependents.rs)
//! .hel/refs/recorded/<uuid>  empty: every dependency of <uuid> is recorded
//!                            in refs/dependents/ (format 4)
//! .hel/logs/sessions/<uuid>  the ref log of a format-1 session (kept, never written)
//! .hel/sessions/<uuid>/      .active lease and materialized spill/
//! .hel/tmp/                  files of writes in progress
//! .hel/names                 session names (see names.rs), and .names.lock
//! .hel/format                "hel-store-format 6\n" (absent: format 1, loose objects only)
//! .hel/packs/pack-<hex>.pack sealed packs and their .idx
//! .hel/packs/journals/<uuid>.journal  a session's append-only pack (and .jidx)
//! .hel/remotes/<key>         what this store last knew of a remote (transfer.rs)
//! .hel/summaries             what listings show of each session, a hint (summaries.rs)
//! ```
//!
//! Every directory is reached through descriptors ([`Dir`]), never by path:
//! see `dir.rs`. A [`Layout`] is an open `.hel/` and the subdirectories it
//! has opened so far.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::dir::Dir;
use crate::format::{FORMAT_VERSION, STORE_DIR};
use crate::{ObjectId, Result, SessionId};

pub(crate) const GITIGNORE: &str = ".gitignore";
pub(crate) const STORE_LOCK: &str = ".store.lock";
/// The file inside the directory [`STORE_LOCK`] that format 4 locks: the
/// same inode the file at `.store.lock` was in format 3 (upgrade.rs).
pub(crate) const STORE_LOCK_FILE: &str = "lock";
/// What `.store.lock/README` is called.
pub(crate) const STORE_LOCK_NOTE: &str = "README";
/// Under `refs/`: who depends on whom, and which sessions record theirs.
pub(crate) const DEPENDENTS: &str = "dependents";
pub(crate) const RECORDED: &str = "recorded";
/// Where formats 1 and 2 keep their store lock, a file every writer of
/// theirs opens (creating it) before writing anything. In format 3 it is a
/// directory holding [`OLDER_LOCK_NOTE`], so that open fails ("Is a
/// directory") and an older hel writes nothing (objects-spec §12.6).
pub(crate) const OLDER_LOCK: &str = ".sessions.lock";
pub(crate) const OLDER_LOCK_NOTE: &str = "README";
pub(crate) const OBJECTS: &str = "objects";
pub(crate) const REFS: &str = "refs";
pub(crate) const LOGS: &str = "logs";
pub(crate) const SESSIONS: &str = "sessions";
pub(crate) const TMP: &str = "tmp";
pub(crate) const LEASE: &str = ".active";
pub(crate) const SPILL: &str = "spill";
pub(crate) const PACKS: &str = "packs";
pub(crate) const JOURNALS: &str = "journals";
pub(crate) const FORMAT: &str = "format";
/// Session names (objects-spec §14) and the lock their writers hold.
pub(crate) const NAMES: &str = "names";
pub(crate) const NAMES_LOCK: &str = ".names.lock";
/// Workspace snapshots' own files (hel-workspace: its stat cache and the
/// temporary files of a restore), outside the object store.
pub(crate) const WORKSPACE: &str = "workspace";
/// What this store last knew of each remote's sessions (transfer.rs).
pub(crate) const REMOTES: &str = "remotes";
/// The summary index: listings' hint (summaries.rs).
pub(crate) const SUMMARIES: &str = "summaries";

/// A ref that format-1 readers see (section 12.6): it names a snapshot of a
/// schema no format-1 reader knows, so an older hel says "upgrade hel"
/// rather than "missing object", and its gc refuses to sweep.
pub(crate) const STUB_SESSION: &str = "00000000-0000-4000-8000-000000000000";

/// Mode of every directory hel creates in the store (private).
pub(crate) const DIR_MODE: u32 = 0o700;

/// An open store directory.
#[derive(Debug)]
pub(crate) struct Layout {
    root: Dir,
    objects: OnceLock<Dir>,
    refs: OnceLock<Dir>,
    logs: OnceLock<Dir>,
    sessions: OnceLock<Dir>,
    tmp: OnceLock<Dir>,
    workspace: OnceLock<Dir>,
    packs: OnceLock<Dir>,
    journals: OnceLock<Dir>,
    remotes: OnceLock<Dir>,
    recorded: OnceLock<Dir>,
    store_lock: OnceLock<Dir>,
    /// Store locks this process holds (shared or exclusive).
    held: std::sync::atomic::AtomicUsize,
    /// The store's format as its `format` file says (1 when absent).
    format: std::sync::atomic::AtomicU64,
    /// Opened by [`Layout::open_in_place`]: never written.
    in_place: bool,
    /// [`Layout::init`] has made everything it makes (once per process:
    /// nothing removes it from a store this hel writes while it runs, and
    /// the next process makes anything missing again).
    initialized: std::sync::atomic::AtomicBool,
}

/// A subdirectory of the store: its name(s) under `.hel/` and its cache.
#[derive(Clone, Copy)]
enum Sub {
    Objects,
    Refs,
    Logs,
    Sessions,
    Tmp,
    Packs,
    Journals,
    Workspace,
    Remotes,
    Recorded,
}

impl Layout {
    /// The store of the project open as `project`, if it has one, its
    /// format read ([`Layout::check_format`]) but not upgraded (the
    /// upgrade is above this layer: `upgrade::open`). `.hel` being a link
    /// or not a directory is refused.
    pub fn open(project: &Dir) -> Result<Option<Layout>> {
        let Some(root) = project.sub(STORE_DIR)? else {
            return Ok(None);
        };
        let layout = Layout::new(root);
        layout.check_format()?;
        Ok(Some(layout))
    }

    /// The store of `project` as it is, of whatever format up to this
    /// build's, not upgraded: for `hel fsck` of a store the upgrade refused
    /// (its rules are the old format's, see `heads.rs`). Nothing is ever
    /// written through it, and it takes no store lock (an older hel's
    /// would be `.sessions.lock`): a reader that misses an object does not
    /// wait for a gc to finish.
    pub fn open_in_place(project: &Dir) -> Result<Option<Layout>> {
        let Some(root) = project.sub(STORE_DIR)? else {
            return Ok(None);
        };
        let mut layout = Layout::new(root);
        layout.check_format()?;
        layout.in_place = true;
        Ok(Some(layout))
    }

    /// The store's format as its `format` file says (1 when it has none);
    /// a store of a newer format than this build reads is refused.
    pub fn check_format(&self) -> Result<u64> {
        let Some(bytes) = self.root.read_file(FORMAT, 64)? else {
            return Ok(1);
        };
        let found = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| t.trim_end().strip_prefix("hel-store-format "))
            .and_then(|n| n.parse::<u64>().ok());
        match found {
            Some(n) if n <= FORMAT_VERSION => {
                self.format.store(n, std::sync::atomic::Ordering::SeqCst);
                Ok(n)
            }
            Some(n) => Err(crate::Error::NewerStore {
                path: self.root.path().to_owned(),
                found: n,
                supported: FORMAT_VERSION,
            }),
            None => Err(crate::Error::Unexpected {
                path: self.root.child_path(FORMAT),
                found: "file of unknown content",
                expected: "store format file",
            }),
        }
    }

    /// Create the store directory of `project` (mode 0700) where absent,
    /// and open it; [`Layout::init`] makes what is inside.
    pub fn create(project: &Dir) -> Result<Layout> {
        Ok(Layout::new(project.sub_create(STORE_DIR, DIR_MODE)?))
    }

    fn new(root: Dir) -> Layout {
        Layout {
            root,
            objects: OnceLock::new(),
            refs: OnceLock::new(),
            logs: OnceLock::new(),
            sessions: OnceLock::new(),
            tmp: OnceLock::new(),
            workspace: OnceLock::new(),
            packs: OnceLock::new(),
            journals: OnceLock::new(),
            remotes: OnceLock::new(),
            recorded: OnceLock::new(),
            store_lock: OnceLock::new(),
            held: std::sync::atomic::AtomicUsize::new(0),
            initialized: std::sync::atomic::AtomicBool::new(false),
            format: std::sync::atomic::AtomicU64::new(1),
            in_place: false,
        }
    }

    /// The store's format: 3 (heads are ref files), or 2 or 1 (a store an
    /// older hel made: heads are read by its rules, see `heads.rs`).
    pub fn format(&self) -> u64 {
        self.format.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Are sessions' heads their ref files (format 3)?
    pub fn heads_are_refs(&self) -> bool {
        self.format() >= 3
    }

    /// Does the store record who depends on whom (format 4,
    /// `dependents.rs`)?
    pub fn records_dependents(&self) -> bool {
        self.format() >= 4
    }

    /// The directory `.store.lock` of format 4, if it is one (kept open
    /// once found: nothing replaces it).
    pub fn store_lock_dir(&self) -> Result<Option<&Dir>> {
        if let Some(d) = self.store_lock.get() {
            return Ok(Some(d));
        }
        if self.root.kind_of(STORE_LOCK)? != Some(crate::dir::Kind::Dir) {
            return Ok(None);
        }
        Ok(self
            .root
            .sub(STORE_LOCK)?
            .map(|d| self.store_lock.get_or_init(|| d)))
    }

    pub fn lock_taken(&self) {
        self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn lock_released(&self) {
        self.held.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Does this process hold the store lock (so a gc cannot be running)?
    /// Said of a store read in place too, so that no reader waits for it.
    pub fn lock_held(&self) -> bool {
        self.in_place || self.held.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// Make the subdirectories and `.gitignore` if absent; in between,
    /// `write_format` settles the `format` file (`upgrade::write_format`:
    /// a store of an older format is upgraded first). Once it has
    /// succeeded, later calls in this process do nothing.
    pub fn init(&self, write_format: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.initialized.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        if self.in_place {
            return Err(crate::Error::Internal(format!(
                "{} was opened to be checked in place, not written",
                self.root.path().display()
            )));
        }
        for sub in [
            Sub::Objects,
            Sub::Refs,
            Sub::Logs,
            Sub::Sessions,
            Sub::Tmp,
            Sub::Packs,
            Sub::Journals,
        ] {
            self.dir_create(sub)?;
        }
        // The records' directories only with a new store (the upgrade
        // makes them in an older one): one found missing later is made
        // again by gc alone, which first takes back what `refs/recorded/`
        // said (dependents.rs).
        if self.root.kind_of(FORMAT)?.is_none() {
            // Never kept open: `refs/dependents/` is looked up by name at
            // each use (dependents.rs says why).
            self.root
                .sub_create(REFS, DIR_MODE)?
                .sub_create(DEPENDENTS, DIR_MODE)?;
            self.dir_create(Sub::Recorded)?;
        }
        write_format()?;
        if self.root.kind_of(GITIGNORE)?.is_none() {
            use std::io::Write;
            match self.root.create_new(GITIGNORE, 0o644) {
                Ok(mut f) => f.write_all(b"*\n").map_err(|source| crate::Error::Io {
                    path: self.root.child_path(GITIGNORE),
                    source,
                })?,
                // Another process made it first.
                Err(hel_fs::Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.initialized
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    pub fn root(&self) -> &Dir {
        &self.root
    }

    /// Make sure the stub object and the stub ref naming it exist, durably
    /// (objects-spec §12.6). Nothing is written or synced when both are
    /// there.
    pub fn ensure_stub(&self) -> Result<()> {
        let (stub, canonical) = stub_canonical();
        let (fan, name) = object_name(&stub);
        let ref_there = match self.dir(Sub::Refs)? {
            Some(refs) => refs.kind_of(STUB_SESSION)?.is_some(),
            None => false,
        };
        let object_there = match self.dir(Sub::Objects)? {
            Some(objects) => match objects.sub(&fan)? {
                Some(d) => d.kind_of(&name)?.is_some(),
                None => false,
            },
            None => false,
        };
        if ref_there && object_there {
            return Ok(());
        }
        let objects = self.dir_create(Sub::Objects)?;
        let fan_dir = objects.sub_create(&fan, DIR_MODE)?;
        if fan_dir.kind_of(&name)?.is_none() {
            let data = zstd::bulk::compress(&canonical, 3).map_err(|source| crate::Error::Io {
                path: fan_dir.child_path(&name),
                source,
            })?;
            self.place_file(&fan_dir, &name, &data)?;
            objects.sync()?;
        }
        let refs = self.dir_create(Sub::Refs)?;
        if refs.kind_of(STUB_SESSION)?.is_none() {
            self.place_file(refs, STUB_SESSION, format!("{stub}\n").as_bytes())?;
        }
        // `refs/sessions` itself durable in `refs/`, and `objects/` and
        // `refs/` in `.hel/`, before a format file can say that the stub is
        // there: every later ref move syncs only `refs/sessions/`.
        if let Some(parent) = self.root.sub(REFS)? {
            parent.sync()?;
        }
        Ok(self.root.sync()?)
    }

    /// Write `format` as `hel-store-format` [`FORMAT_VERSION`]: a new file
    /// under `tmp/`, synced, renamed over `format`, `.hel/` synced. The
    /// rename is the moment the store changes format.
    pub fn publish_format(&self) -> Result<()> {
        use std::io::Write;
        let tmp = self.dir_create(Sub::Tmp)?;
        let name = format!("format-{}", uuid::Uuid::new_v4().simple());
        let mut f = tmp.create_new(&name, 0o644)?;
        f.write_all(format!("hel-store-format {FORMAT_VERSION}\n").as_bytes())
            .map_err(|source| crate::Error::Io {
                path: tmp.child_path(&name),
                source,
            })?;
        crate::dir::sync_file(&f, &tmp.child_path(&name), false)?;
        crate::failpoint::kill("upgrade-format-tmp");
        tmp.rename_to(&name, &self.root, FORMAT)?;
        crate::failpoint::kill("upgrade-format");
        self.root.sync()?;
        self.format
            .store(FORMAT_VERSION, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Write a small file durably under a new name in `dir` (through tmp/).
    fn place_file(&self, dir: &Dir, name: &str, bytes: &[u8]) -> Result<()> {
        use std::io::Write;
        let tmp = self.dir_create(Sub::Tmp)?;
        let t = format!("place-{}", uuid::Uuid::new_v4().simple());
        let mut f = tmp.create_new(&t, 0o600)?;
        let io = |source| crate::Error::Io {
            path: tmp.child_path(&t),
            source,
        };
        f.write_all(bytes).map_err(io)?;
        crate::dir::sync_file(&f, &tmp.child_path(&t), false)?;
        let linked = tmp.link_to(&t, dir, name);
        let _ = tmp.remove_file(&t);
        linked?;
        Ok(dir.sync()?)
    }

    fn cell(&self, sub: Sub) -> &OnceLock<Dir> {
        match sub {
            Sub::Objects => &self.objects,
            Sub::Refs => &self.refs,
            Sub::Logs => &self.logs,
            Sub::Sessions => &self.sessions,
            Sub::Tmp => &self.tmp,
            Sub::Packs => &self.packs,
            Sub::Journals => &self.journals,
            Sub::Workspace => &self.workspace,
            Sub::Remotes => &self.remotes,
            Sub::Recorded => &self.recorded,
        }
    }

    /// Open subdirectory `sub` if it exists (kept open once found).
    fn dir(&self, sub: Sub) -> Result<Option<&Dir>> {
        let cell = self.cell(sub);
        if let Some(d) = cell.get() {
            return Ok(Some(d));
        }
        let found = match sub {
            Sub::Objects => self.root.sub(OBJECTS)?,
            Sub::Sessions => self.root.sub(SESSIONS)?,
            Sub::Tmp => self.root.sub(TMP)?,
            Sub::Workspace => self.root.sub(WORKSPACE)?,
            Sub::Remotes => self.root.sub(REMOTES)?,
            Sub::Packs => self.root.sub(PACKS)?,
            Sub::Journals => match self.root.sub(PACKS)? {
                Some(d) => d.sub(JOURNALS)?,
                None => None,
            },
            Sub::Refs => match self.root.sub(REFS)? {
                Some(d) => d.sub(SESSIONS)?,
                None => None,
            },
            Sub::Logs => match self.root.sub(LOGS)? {
                Some(d) => d.sub(SESSIONS)?,
                None => None,
            },
            Sub::Recorded => match self.root.sub(REFS)? {
                Some(d) => d.sub(RECORDED)?,
                None => None,
            },
        };
        Ok(found.map(|d| cell.get_or_init(|| d)))
    }

    /// Open subdirectory `sub`, creating it when absent.
    fn dir_create(&self, sub: Sub) -> Result<&Dir> {
        if let Some(d) = self.dir(sub)? {
            return Ok(d);
        }
        let made = match sub {
            Sub::Objects => self.root.sub_create(OBJECTS, DIR_MODE)?,
            Sub::Sessions => self.root.sub_create(SESSIONS, DIR_MODE)?,
            Sub::Tmp => self.root.sub_create(TMP, DIR_MODE)?,
            Sub::Workspace => self.root.sub_create(WORKSPACE, DIR_MODE)?,
            Sub::Remotes => self.root.sub_create(REMOTES, DIR_MODE)?,
            Sub::Packs => self.root.sub_create(PACKS, DIR_MODE)?,
            Sub::Journals => self
                .root
                .sub_create(PACKS, DIR_MODE)?
                .sub_create(JOURNALS, DIR_MODE)?,
            Sub::Refs => self
                .root
                .sub_create(REFS, DIR_MODE)?
                .sub_create(SESSIONS, DIR_MODE)?,
            Sub::Logs => self
                .root
                .sub_create(LOGS, DIR_MODE)?
                .sub_create(SESSIONS, DIR_MODE)?,
            Sub::Recorded => self
                .root
                .sub_create(REFS, DIR_MODE)?
                .sub_create(RECORDED, DIR_MODE)?,
        };
        Ok(self.cell(sub).get_or_init(|| made))
    }

    pub fn objects(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Objects)
    }
    pub fn refs(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Refs)
    }
    pub fn refs_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Refs)
    }
    pub fn logs(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Logs)
    }
    pub fn sessions(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Sessions)
    }
    pub fn sessions_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Sessions)
    }
    pub fn tmp(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Tmp)
    }
    pub fn tmp_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Tmp)
    }
    pub fn workspace_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Workspace)
    }
    pub fn packs(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Packs)
    }
    pub fn packs_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Packs)
    }
    pub fn journals(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Journals)
    }
    pub fn journals_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Journals)
    }
    /// `refs/dependents/` as it is now (opened by name each time: it is
    /// never kept open, so one removed or replaced since is not taken
    /// for an empty one).
    pub fn dependents_now(&self) -> Result<Option<Dir>> {
        match self.root.sub(REFS)? {
            Some(refs) => Ok(refs.sub(DEPENDENTS)?),
            None => Ok(None),
        }
    }
    pub fn recorded(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Recorded)
    }
    pub fn recorded_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Recorded)
    }
    /// `refs/`, for syncing the directories made in it.
    pub fn refs_parent(&self) -> Result<Option<Dir>> {
        Ok(self.root.sub(REFS)?)
    }
    /// `refs/`, made when absent.
    pub fn refs_parent_create(&self) -> Result<Dir> {
        Ok(self.root.sub_create(REFS, DIR_MODE)?)
    }
    pub fn remotes(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Remotes)
    }
    pub fn remotes_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Remotes)
    }

    /// The working directory of `session`, if it exists.
    pub fn session_dir(&self, session: &SessionId) -> Result<Option<Dir>> {
        match self.sessions()? {
            Some(d) => Ok(d.sub(session.as_str())?),
            None => Ok(None),
        }
    }

    /// Where object `id` lives as a loose file.
    pub fn loose_path(&self, id: &ObjectId) -> PathBuf {
        let (dir, name) = object_name(id);
        self.root.path().join(OBJECTS).join(dir).join(name)
    }

    /// `refs/`, for messages.
    pub fn refs_path(&self) -> PathBuf {
        self.root.path().join(REFS)
    }

    /// Where `session`'s ref lives, for messages.
    pub fn ref_path(&self, session: &str) -> PathBuf {
        self.root.path().join(REFS).join(SESSIONS).join(session)
    }
}

/// The stub snapshot a format-1 reader finds at [`STUB_SESSION`]'s ref.
pub(crate) fn stub_object() -> ObjectId {
    stub_canonical().0
}

fn stub_canonical() -> (ObjectId, Vec<u8>) {
    crate::object::encode(
        crate::object::Kind::Snapshot,
        &crate::canonical::to_vec(&serde_json::json!({
            "schema_version": 1_000_000,
            "note": "this store has format 2 (packs); this hel is too old to read it: upgrade hel",
        })),
    )
}

/// The fan-out directory and file name of object `id`.
pub(crate) fn object_name(id: &ObjectId) -> (String, String) {
    let hex = id.to_hex();
    (hex[..2].to_owned(), hex[2..].to_owned())
}

impl AsRef<Layout> for Layout {
    fn as_ref(&self) -> &Layout {
        self
    }
}
