//! The one place that knows where things live under `.hel/`.
//!
//! ```text
//! .hel/.gitignore            "*"
//! .hel/.sessions.lock        store lock (see lock.rs)
//! .hel/objects/ab/cdef…      loose objects, fan-out by the first two hex digits
//! .hel/refs/sessions/<uuid>  a session's newest snapshot id
//! .hel/logs/sessions/<uuid>  the session's ref log
//! .hel/sessions/<uuid>/      .active lease and materialized spill/
//! .hel/tmp/                  files of writes in progress
//! ```
//!
//! Every directory is reached through descriptors ([`Dir`]), never by path:
//! see `dir.rs`. A [`Layout`] is an open `.hel/` and the subdirectories it
//! has opened so far.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use crate::dir::Dir;
use crate::{ObjectId, Result, SessionId};

/// Name of the store directory inside a project.
pub const STORE_DIR: &str = ".hel";

pub(crate) const GITIGNORE: &str = ".gitignore";
pub(crate) const STORE_LOCK: &str = ".sessions.lock";
pub(crate) const OBJECTS: &str = "objects";
pub(crate) const REFS: &str = "refs";
pub(crate) const LOGS: &str = "logs";
pub(crate) const SESSIONS: &str = "sessions";
pub(crate) const TMP: &str = "tmp";
pub(crate) const LEASE: &str = ".active";
pub(crate) const SPILL: &str = "spill";

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
    /// Objects this process wrote or verified: a writer may dedup against
    /// them without reading them again.
    verified: Mutex<HashSet<ObjectId>>,
}

/// A subdirectory of the store: its name(s) under `.hel/` and its cache.
#[derive(Clone, Copy)]
enum Sub {
    Objects,
    Refs,
    Logs,
    Sessions,
    Tmp,
}

impl Layout {
    /// The store of the project open as `project`, if it has one. `.hel`
    /// being a link or not a directory is refused.
    pub fn open(project: &Dir) -> Result<Option<Layout>> {
        Ok(project.sub(STORE_DIR)?.map(Layout::new))
    }

    /// Create the store of `project` (mode 0700, `.gitignore` of `*`, and
    /// its subdirectories) where absent, and open it.
    pub fn create(project: &Dir) -> Result<Layout> {
        let layout = Layout::new(project.sub_create(STORE_DIR, DIR_MODE)?);
        layout.init()?;
        Ok(layout)
    }

    fn new(root: Dir) -> Layout {
        Layout {
            root,
            objects: OnceLock::new(),
            refs: OnceLock::new(),
            logs: OnceLock::new(),
            sessions: OnceLock::new(),
            tmp: OnceLock::new(),
            verified: Mutex::new(HashSet::new()),
        }
    }

    pub fn is_verified(&self, id: &ObjectId) -> bool {
        self.verified
            .lock()
            .map(|set| set.contains(id))
            .unwrap_or(false)
    }

    pub fn set_verified(&self, id: ObjectId) {
        if let Ok(mut set) = self.verified.lock() {
            set.insert(id);
        }
    }

    /// Make the subdirectories and `.gitignore` if absent.
    pub fn init(&self) -> Result<()> {
        for sub in [Sub::Objects, Sub::Refs, Sub::Logs, Sub::Sessions, Sub::Tmp] {
            self.dir_create(sub)?;
        }
        if self.root.kind_of(GITIGNORE)?.is_none() {
            use std::io::Write;
            match self.root.create_new(GITIGNORE, 0o644) {
                Ok(mut f) => f.write_all(b"*\n").map_err(|source| crate::Error::Io {
                    path: self.root.child_path(GITIGNORE),
                    source,
                })?,
                // Another process made it first.
                Err(crate::Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub fn root(&self) -> &Dir {
        &self.root
    }

    fn cell(&self, sub: Sub) -> &OnceLock<Dir> {
        match sub {
            Sub::Objects => &self.objects,
            Sub::Refs => &self.refs,
            Sub::Logs => &self.logs,
            Sub::Sessions => &self.sessions,
            Sub::Tmp => &self.tmp,
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
            Sub::Refs => match self.root.sub(REFS)? {
                Some(d) => d.sub(SESSIONS)?,
                None => None,
            },
            Sub::Logs => match self.root.sub(LOGS)? {
                Some(d) => d.sub(SESSIONS)?,
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
            Sub::Refs => self
                .root
                .sub_create(REFS, DIR_MODE)?
                .sub_create(SESSIONS, DIR_MODE)?,
            Sub::Logs => self
                .root
                .sub_create(LOGS, DIR_MODE)?
                .sub_create(SESSIONS, DIR_MODE)?,
        };
        Ok(self.cell(sub).get_or_init(|| made))
    }

    pub fn objects(&self) -> Result<Option<&Dir>> {
        self.dir(Sub::Objects)
    }
    pub fn objects_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Objects)
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
    pub fn logs_create(&self) -> Result<&Dir> {
        self.dir_create(Sub::Logs)
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

    /// The working directory of `session`, if it exists.
    pub fn session_dir(&self, session: &SessionId) -> Result<Option<Dir>> {
        match self.sessions()? {
            Some(d) => d.sub(session.as_str()),
            None => Ok(None),
        }
    }

    /// Where object `id` lives, for messages.
    pub fn object_path(&self, id: &ObjectId) -> PathBuf {
        let (dir, name) = object_name(id);
        self.root.path().join(OBJECTS).join(dir).join(name)
    }

    /// Where `session`'s ref lives, for messages.
    pub fn ref_path(&self, session: &str) -> PathBuf {
        self.root.path().join(REFS).join(SESSIONS).join(session)
    }
}

/// The fan-out directory and file name of object `id`.
pub(crate) fn object_name(id: &ObjectId) -> (String, String) {
    let hex = id.to_hex();
    (hex[..2].to_owned(), hex[2..].to_owned())
}
