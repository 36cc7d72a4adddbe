//! Spill: tool results too large for the conversation are saved whole to a
//! file; the conversation gets the head, the tail and the file's path.
//!
//! With a session (always, unless the store cannot be written), spill lives
//! in `.hel/sessions/<id>/spill/` and the conversation names it relative to
//! the project; each checkpoint keeps it as a blob. The working copies are
//! written and read through the store (descriptor-relative, no links
//! followed: `.hel/` may have come with the repository). The session may
//! read exactly the spill its spill map holds (inherited entries are served
//! from their blobs), so a fork reads what it inherited even after the
//! original is gone. Without a session, spill goes to the instance's spill
//! dir, named by absolute path.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use hel_store::{ObjectId, SessionLease, SpillEntry, Store};

/// Why a spill file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A result too large for the conversation that could not be saved (it
/// was cut instead).
#[derive(Debug, thiserror::Error)]
#[error("cannot write spill file {name}: {error}; the result is cut instead")]
pub struct Unspilled {
    pub name: String,
    pub error: SpillError,
}

/// Default spill limit in characters (Unicode scalar values), ~12,500 tokens.
pub(crate) const DEFAULT_LIMIT: usize = 50_000;
/// Characters of head and of tail kept in the conversation.
const EDGE: usize = 2_000;
/// The largest spill file read back (tool output is capped well below).
const READ_MAX: u64 = hel_store::Cap::SPILL.max;

enum Source {
    /// Written by this process, not yet committed: its file name.
    File(String),
    /// Kept by a checkpoint.
    Stored(SpillEntry),
}

/// Where spill files are written.
enum Home {
    /// The session's spill directory in the store.
    Session {
        store: Store,
        lease: Arc<SessionLease>,
        /// The directory's path (for the sandbox, which shows it read-only).
        dir: PathBuf,
    },
    /// The instance's own spill directory (no session).
    Instance { dir: PathBuf },
}

/// The spill file read last: (name, bytes, blob id).
type LastRead = (String, Rc<[u8]>, ObjectId);

pub(crate) struct SpillStore {
    home: Home,
    /// How the conversation names spill files (with a trailing `/`).
    prefix: String,
    entries: BTreeMap<String, Source>,
    /// Spilled since the last commit: (name in the conversation, file name).
    pending: Vec<(String, String)>,
    pub limit: usize,
    counter: u32,
    last: RefCell<Option<LastRead>>,
}

impl SpillStore {
    /// Spill for the session of `lease` in `store`.
    pub(crate) fn for_session(store: &Store, lease: Arc<SessionLease>) -> SpillStore {
        let dir = hel_store::spill::dir_path(store, lease.session());
        // Named relative to the project: the path a model (and bash) uses.
        let prefix = match dir.strip_prefix(store.project_path()) {
            Ok(rel) => format!("{}/", rel.display()),
            Err(_) => format!("{}/", dir.display()),
        };
        SpillStore::new(
            Home::Session {
                store: store.clone(),
                dir,
                lease,
            },
            prefix,
        )
    }

    /// Spill in the instance's own space (no session).
    pub(crate) fn for_instance(dir: &Path) -> SpillStore {
        SpillStore::new(
            Home::Instance {
                dir: dir.to_owned(),
            },
            format!("{}/", dir.display()),
        )
    }

    fn new(home: Home, prefix: String) -> SpillStore {
        SpillStore {
            home,
            prefix,
            entries: BTreeMap::new(),
            pending: Vec::new(),
            limit: limit_from_env(),
            counter: 0,
            last: RefCell::new(None),
        }
    }

    /// The session's own spill directory (bash sees it read-only).
    pub(crate) fn own_dir(&self) -> Option<PathBuf> {
        match &self.home {
            Home::Session { dir, .. } => Some(dir.clone()),
            Home::Instance { .. } => None,
        }
    }

    /// Adopt a checkpoint's spill map (at resume, and after each commit).
    pub(crate) fn set_committed(&mut self, map: &BTreeMap<String, SpillEntry>) {
        for (k, v) in map {
            self.entries.insert(k.clone(), Source::Stored(v.clone()));
        }
    }

    /// Files spilled since the last commit: (name in the conversation, file).
    pub(crate) fn pending(&self) -> Vec<(String, String)> {
        self.pending.clone()
    }

    pub(crate) fn clear_pending(&mut self) {
        self.pending.clear();
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<(), SpillError> {
        match &self.home {
            Home::Session { store, lease, .. } => {
                Ok(hel_store::spill::write(store, lease, name, bytes)?)
            }
            Home::Instance { dir } => std::fs::create_dir_all(dir)
                .and_then(|_| std::fs::write(dir.join(name), bytes))
                .map_err(|source| SpillError::Io {
                    path: dir.join(name),
                    source,
                }),
        }
    }

    fn read_file(&self, name: &str) -> Option<Vec<u8>> {
        match &self.home {
            Home::Session { store, lease, .. } => hel_store::spill::read_copy(store, lease, name)
                .ok()
                .flatten(),
            Home::Instance { dir } => {
                let (fd, _) = hel_fs::at::open_regular(rustix::fs::CWD, dir.join(name).as_path())
                    .ok()
                    .flatten()?;
                hel_fs::read_head(std::fs::File::from(fd), READ_MAX).ok()
            }
        }
    }

    /// If `content` is over the limit, save it and return what the
    /// conversation gets instead; when it cannot be saved, the content is
    /// cut and the second value says why.
    pub(crate) fn maybe_spill(
        &mut self,
        tool: &str,
        content: String,
    ) -> (String, Option<Unspilled>) {
        let chars = content.chars().count();
        if chars <= self.limit {
            return (content, None);
        }
        self.counter += 1;
        let name = format!(
            "{tool}-{}-{}.txt",
            self.counter,
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        if let Err(error) = self.write(&name, content.as_bytes()) {
            let head: String = content.chars().take(EDGE).collect();
            let cut = format!(
                "{head}\n[{} more characters cut: the output could not be saved]",
                chars.saturating_sub(EDGE)
            );
            return (cut, Some(Unspilled { name, error }));
        }
        let key = format!("{}{name}", self.prefix);
        self.entries.insert(key.clone(), Source::File(name.clone()));
        self.pending.push((key.clone(), name));
        let head: String = content.chars().take(EDGE).collect();
        let tail: String = {
            let v: Vec<char> = content.chars().rev().take(EDGE).collect();
            v.into_iter().rev().collect()
        };
        let text = format!(
            "[Output too large for the conversation: {chars} characters ({} bytes). It is saved whole; page through it with read_file and its cursor.]\n\
             spill: {key}\n\
             --- first {EDGE} characters ---\n{head}\n--- last {EDGE} characters ---\n{tail}",
            content.len()
        );
        (text, None)
    }

    /// The bytes of spill file `key`, if this session may read it, and its
    /// blob id (spill never changes, so the id identifies it for cursors,
    /// across processes and copies). The last file read is kept, so paging
    /// through a spill reads it once.
    pub(crate) fn read(&self, key: &str) -> Option<(Rc<[u8]>, ObjectId)> {
        if let Some((k, bytes, id)) = self.last.borrow().as_ref() {
            if k == key {
                return Some((Rc::clone(bytes), *id));
            }
        }
        let (bytes, id): (Rc<[u8]>, ObjectId) = match self.entries.get(key)? {
            Source::File(name) => {
                let bytes = self.read_file(name)?;
                let id = hel_store::blob_id(&bytes);
                (bytes.into(), id)
            }
            Source::Stored(entry) => {
                // The working copy of our own spill, when intact, saves a decode.
                let copy = key
                    .strip_prefix(&self.prefix)
                    .and_then(|name| self.read_file(name))
                    .filter(|b| {
                        b.len() as u64 == entry.size && hel_store::blob_id(b) == entry.blob
                    });
                let bytes = match copy {
                    Some(b) => b,
                    None => match &self.home {
                        Home::Session { store, .. } => hel_store::spill::read(store, entry).ok()?,
                        Home::Instance { .. } => return None,
                    },
                };
                (bytes.into(), entry.blob)
            }
        };
        *self.last.borrow_mut() = Some((key.to_owned(), Rc::clone(&bytes), id));
        Some((bytes, id))
    }

    /// Re-create this session's own spill working copies from their blobs
    /// when they are gone (at resume).
    pub(crate) fn materialize(&self) {
        let Home::Session { store, lease, .. } = &self.home else {
            return;
        };
        for (key, src) in &self.entries {
            let (Source::Stored(entry), Some(name)) = (src, key.strip_prefix(&self.prefix)) else {
                continue;
            };
            if self.read_file(name).is_some() {
                continue;
            }
            if let Ok(bytes) = hel_store::spill::read(store, entry) {
                // A copy that exists (even a bad one) is left: reads check
                // copies against the blob id and fall back to the blob.
                let _ = hel_store::spill::write(store, lease, name, &bytes);
            }
        }
    }
}

fn limit_from_env() -> usize {
    std::env::var("HEL_SPILL_CHARS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_LIMIT)
}
