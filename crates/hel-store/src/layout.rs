//! The one place that knows where things live under `.hel/`.
//!
//! ```text
//! .hel/.gitignore            "*"
//! .hel/.store.lock/lock      store lock (see lock.rs)
//! .hel/refs/sessions/<uuid>  a session's head: its newest snapshot id
//! .hel/refs/dependents/<dep>/<uuid>  empty: <uuid>'s head may name objects
//!                            of <dep>'s journal (dependents.rs)
//! .hel/refs/recorded/<uuid>  empty: every dependency of <uuid> is recorded
//!                            in refs/dependents/
//! .hel/sessions/<uuid>/      .active lease and materialized spill/
//! .hel/tmp/                  files of writes in progress
//! .hel/names                 session names (see names.rs), and .names.lock
//! .hel/format                "hel-store-format 6\n", written last when a
//!                            store is made (absent: a store being made)
//! .hel/packs/pack-<hex>.pack sealed packs and their .idx
//! .hel/packs/journals/<uuid>.journal  a session's append-only pack (and .jidx)
//! .hel/remotes/<key>         what this store last knew of a remote (transfer.rs)
//! .hel/summaries             what listings show of each session, a hint (summaries.rs)
//! .hel/identity              where the store was made, and which of its
//!                            sessions arrived from elsewhere (place.rs)
//! .hel/trash/<uuid>          a deleted session's trash entry (trashed.rs)
//! .hel/pins/<uuid>           empty: the session never expires (trashed.rs)
//! ```
//!
//! A store a pre-release hel of this format wrote may also hold
//! `objects/`, `logs/`, `.sessions.lock/`, `.store.lock/README` and the
//! ref [`STUB_SESSION`]: no hel reads or writes them, and nothing checks
//! them.
//!
//! Every directory is reached through descriptors ([`Dir`]), never by path:
//! see `dir.rs`. A [`Layout`] is an open `.hel/` and the subdirectories it
//! has opened so far.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::dir::Dir;
use crate::format::STORE_DIR;
use crate::{Result, SessionId};

pub(crate) const GITIGNORE: &str = ".gitignore";
pub(crate) const STORE_LOCK: &str = ".store.lock";
/// The file inside the directory [`STORE_LOCK`] that is the store lock.
pub(crate) const STORE_LOCK_FILE: &str = "lock";
/// Under `refs/`: who depends on whom, and which sessions record theirs.
pub(crate) const DEPENDENTS: &str = "dependents";
pub(crate) const RECORDED: &str = "recorded";
/// Where pre-release stores kept loose objects: a store without a
/// `format` file that has it is one (format 1), refused.
const OBJECTS: &str = "objects";
pub(crate) const REFS: &str = "refs";
pub(crate) const SESSIONS: &str = "sessions";
pub(crate) const TMP: &str = "tmp";
pub(crate) const LEASE: &str = ".active";
pub(crate) const SPILL: &str = "spill";
pub(crate) const PACKS: &str = "packs";
pub(crate) const JOURNALS: &str = "journals";
pub(crate) const FORMAT: &str = "format";
/// Session names (objects-spec §11) and the lock their writers hold.
pub(crate) const NAMES: &str = "names";
pub(crate) const NAMES_LOCK: &str = ".names.lock";
/// Workspace snapshots' own files (hel-workspace: its stat cache and the
/// temporary files of a restore), outside the object store.
pub(crate) const WORKSPACE: &str = "workspace";
/// What this store last knew of each remote's sessions (transfer.rs).
pub(crate) const REMOTES: &str = "remotes";
/// The summary index: listings' hint (summaries.rs).
pub(crate) const SUMMARIES: &str = "summaries";
/// Where the store was made (place.rs).
pub(crate) const IDENTITY: &str = "identity";

/// A ref that stores written by pre-release hels of this format hold (it
/// named a snapshot meant for older hels, which no hel reads): no
/// session's, skipped by every listing, never written.
pub(crate) const STUB_SESSION: &str = "00000000-0000-4000-8000-000000000000";

/// Mode of every directory hel creates in the store (private).
pub(crate) const DIR_MODE: u32 = 0o700;

/// An open store directory.
#[derive(Debug)]
pub(crate) struct Layout {
    root: Dir,
    refs: OnceLock<Dir>,
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
    /// The store's format as its `format` file says (0 while it has none:
    /// a store being made).
    format: std::sync::atomic::AtomicU64,
    /// [`Layout::init`] has made everything it makes (once per process:
    /// nothing removes it from a store this hel writes while it runs, and
    /// the next process makes anything missing again).
    initialized: std::sync::atomic::AtomicBool,
}

/// A subdirectory of the store: its name(s) under `.hel/` and its cache.
#[derive(Clone, Copy)]
enum Sub {
    Refs,
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
    /// format read ([`Layout::read_format`]) but not judged (that is
    /// above this layer: `upgrade::open`). `.hel` being a link or not a
    /// directory is refused.
    pub fn open(project: &Dir) -> Result<Option<(Layout, StoreFormat)>> {
        let Some(root) = project.sub(STORE_DIR)? else {
            return Ok(None);
        };
        let layout = Layout::new(root);
        let found = layout.read_format()?;
        Ok(Some((layout, found)))
    }

    /// What the `format` file says, as it is now (bounded, untrusted).
    /// The number it names is kept as [`Layout::format`].
    pub fn read_format(&self) -> Result<StoreFormat> {
        let Some(bytes) = self.root.read_file(FORMAT, 64)? else {
            // A store being made holds empty directories only (its
            // `format` file is written last, before anything else), so a
            // store without one that holds a journal, a pack, a ref or a
            // dependents record lost it: damage, never a store to complete
            // (objects-spec §1.2). A store of the first pre-release format
            // had no `format` file, kept its objects under `objects/` and
            // had none of the files formats 3 and later added.
            if let Some(found) = self.written_file()? {
                return Ok(StoreFormat::Missing(found));
            }
            if self.root.kind_of(OBJECTS)?.is_some() {
                return Ok(StoreFormat::Number(1));
            }
            return Ok(StoreFormat::Absent);
        };
        let found = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| t.strip_suffix('\n'))
            .and_then(|t| t.strip_prefix("hel-store-format "))
            .filter(|n| !n.is_empty() && n.len() <= 19 && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok());
        match found {
            Some(n) => {
                self.format.store(n, std::sync::atomic::Ordering::SeqCst);
                Ok(StoreFormat::Number(n))
            }
            None => Ok(StoreFormat::Garbled(
                String::from_utf8_lossy(&bytes)
                    .chars()
                    .take(40)
                    .flat_map(char::escape_debug)
                    .collect(),
            )),
        }
    }

    /// The first file of a store in use this one holds, if any: an entry
    /// of `packs/journals/`, `packs/` (but `journals/`), `refs/sessions/`,
    /// `refs/recorded/` or `refs/dependents/`, none of which a store being
    /// made holds and none of which a store of format 1 had (but refs,
    /// which count only beside a journal or without `objects/`).
    fn written_file(&self) -> Result<Option<PathBuf>> {
        let first = |dir: Option<&Dir>, skip: &str| -> Result<Option<PathBuf>> {
            let Some(dir) = dir else {
                return Ok(None);
            };
            Ok(dir
                .entries()?
                .into_iter()
                .map(|e| e.name.to_string_lossy().into_owned())
                .filter(|n| n != skip)
                .min()
                .map(|n| dir.child_path(&n)))
        };
        let refs = self.root.sub(REFS)?;
        let sub = |name: &str| -> Result<Option<Dir>> {
            match &refs {
                Some(r) => Ok(r.sub(name)?),
                None => Ok(None),
            }
        };
        if let Some(found) = first(self.journals()?, "")? {
            return Ok(Some(found));
        }
        if let Some(found) = first(self.packs()?, JOURNALS)? {
            return Ok(Some(found));
        }
        for name in [RECORDED, DEPENDENTS] {
            if let Some(found) = first(sub(name)?.as_ref(), "")? {
                return Ok(Some(found));
            }
        }
        if self.root.kind_of(OBJECTS)?.is_none() {
            return first(sub(SESSIONS)?.as_ref(), "");
        }
        Ok(None)
    }

    /// Create the store directory of `project` (mode 0700) where absent,
    /// and open it; [`Layout::init`] makes what is inside.
    pub fn create(project: &Dir) -> Result<Layout> {
        Ok(Layout::new(project.sub_create(STORE_DIR, DIR_MODE)?))
    }

    fn new(root: Dir) -> Layout {
        Layout {
            root,
            refs: OnceLock::new(),
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
            format: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The store's format as its `format` file said when last read (0:
    /// it had none).
    pub fn format(&self) -> u64 {
        self.format.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The directory `.store.lock`, if it is one (kept open once found:
    /// nothing replaces it).
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

    /// The directory `.store.lock`, made when absent.
    pub fn store_lock_dir_create(&self) -> Result<&Dir> {
        if let Some(d) = self.store_lock_dir()? {
            return Ok(d);
        }
        let made = self.root.sub_create(STORE_LOCK, DIR_MODE)?;
        Ok(self.store_lock.get_or_init(|| made))
    }

    pub fn lock_taken(&self) {
        self.held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn lock_released(&self) {
        self.held.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Does this process hold the store lock (so a gc cannot be running)?
    pub fn lock_held(&self) -> bool {
        self.held.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    /// Make the subdirectories and `.gitignore` if absent; in between,
    /// `write_format` settles the `format` file (`upgrade::write_format`:
    /// one another process wrote meanwhile is judged first). Once it has
    /// succeeded, later calls in this process do nothing.
    pub fn init(&self, write_format: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.initialized.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        for sub in [
            Sub::Refs,
            Sub::Sessions,
            Sub::Tmp,
            Sub::Packs,
            Sub::Journals,
        ] {
            self.dir_create(sub)?;
        }
        // The records' directories only with a new store: one found
        // missing later is made again by gc alone, which first takes back what `refs/recorded/`
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

    /// Write `format` as `hel-store-format` `version` ([`FORMAT_VERSION`](crate::format::FORMAT_VERSION)
    /// but in an upgrade's test): a new file under `tmp/`, synced, renamed
    /// over `format`, `.hel/` synced. The rename is the moment the store
    /// changes format.
    pub fn publish_format(&self, version: u64) -> Result<()> {
        use std::io::Write;
        let tmp = self.dir_create(Sub::Tmp)?;
        let name = format!("format-{}", uuid::Uuid::new_v4().simple());
        let mut f = tmp.create_new(&name, 0o644)?;
        f.write_all(format!("hel-store-format {version}\n").as_bytes())
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
            .store(version, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    fn cell(&self, sub: Sub) -> &OnceLock<Dir> {
        match sub {
            Sub::Refs => &self.refs,
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
            Sub::Recorded => self
                .root
                .sub_create(REFS, DIR_MODE)?
                .sub_create(RECORDED, DIR_MODE)?,
        };
        Ok(self.cell(sub).get_or_init(|| made))
    }

    pub fn refs(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Refs)
    }
    pub fn refs_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Refs)
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

    /// Where an object that no journal or pack holds was looked for, for
    /// messages: the store's packs.
    pub fn packs_path(&self) -> PathBuf {
        self.root.path().join(PACKS)
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

/// What a store's `format` file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreFormat {
    /// No `format` file (and no `objects/`): a store being made.
    Absent,
    /// No `format` file in a store that holds this file, which only a
    /// store of format 3 or later (one that was made) holds: damage.
    Missing(PathBuf),
    /// `hel-store-format <n>` (a store without the file that has
    /// `objects/` is format 1).
    Number(u64),
    /// Anything else: its first characters, escaped.
    Garbled(String),
}

impl AsRef<Layout> for Layout {
    fn as_ref(&self) -> &Layout {
        self
    }
}
