//! Spill: tool results too large for the conversation are saved whole to a
//! file; the conversation gets the head, the tail and the file's path.
//!
//! With a session (always, unless the store cannot be written), spill lives
//! in `.hel/sessions/<id>/spill/` and the conversation names it relative to
//! the project; each checkpoint keeps it as a blob. The session may read
//! exactly the spill its spill map holds (inherited entries are served from
//! their blobs), so a fork reads what it inherited even after the original
//! is gone. Without a session, spill goes to the instance's spill dir,
//! named by absolute path.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use hel_store::object::{self, Kind};
use hel_store::{ObjectId, SpillEntry, Store};

/// Default spill limit in characters (Unicode scalar values), ~12,500 tokens.
pub const DEFAULT_LIMIT: usize = 50_000;
/// Characters of head and of tail kept in the conversation.
const EDGE: usize = 2_000;

enum Source {
    /// Written by this process, not yet committed.
    File(PathBuf),
    /// Kept by a checkpoint.
    Stored(SpillEntry),
}

/// The spill file read last: (name, bytes, blob id).
type LastRead = (String, Rc<[u8]>, ObjectId);

pub struct SpillStore {
    dir: PathBuf,
    /// How the conversation names files in `dir` (with a trailing `/`).
    prefix: String,
    entries: BTreeMap<String, Source>,
    pending: Vec<(String, PathBuf)>,
    store: Option<Store>,
    pub limit: usize,
    counter: u32,
    last: RefCell<Option<LastRead>>,
}

impl SpillStore {
    /// Spill for `session` of `store`.
    pub fn for_session(store: &Store, session: &str) -> SpillStore {
        let dir = store.layout().spill_dir(session);
        SpillStore::new(
            dir,
            format!(".hel/sessions/{session}/spill/"),
            Some(store.clone()),
        )
    }

    /// Spill in the instance's own space (no session).
    pub fn for_instance(dir: &Path) -> SpillStore {
        SpillStore::new(dir.to_owned(), format!("{}/", dir.display()), None)
    }

    fn new(dir: PathBuf, prefix: String, store: Option<Store>) -> SpillStore {
        SpillStore {
            dir,
            prefix,
            entries: BTreeMap::new(),
            pending: Vec::new(),
            store,
            limit: limit_from_env(),
            counter: 0,
            last: RefCell::new(None),
        }
    }

    /// The session's own spill directory (bash sees it read-only).
    pub fn own_dir(&self) -> Option<PathBuf> {
        // Only a session's spill lives under .hel/, where bash needs it shown.
        self.store.is_some().then(|| self.dir.clone())
    }

    /// Adopt a checkpoint's spill map (at resume, and after each commit).
    pub fn set_committed(&mut self, map: &BTreeMap<String, SpillEntry>) {
        for (k, v) in map {
            self.entries.insert(k.clone(), Source::Stored(v.clone()));
        }
    }

    /// Files spilled since the last commit: (name in the conversation, file).
    pub fn pending(&self) -> Vec<(String, PathBuf)> {
        self.pending.clone()
    }

    pub fn clear_pending(&mut self) {
        self.pending.clear();
    }

    /// If `content` is over the limit, save it and return what the
    /// conversation gets instead.
    pub fn maybe_spill(&mut self, tool: &str, content: String) -> String {
        let chars = content.chars().count();
        if chars <= self.limit {
            return content;
        }
        self.counter += 1;
        let name = format!(
            "{tool}-{}-{}.txt",
            self.counter,
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let path = self.dir.join(&name);
        let saved =
            std::fs::create_dir_all(&self.dir).and_then(|_| std::fs::write(&path, &content));
        if let Err(e) = saved {
            crate::note!(
                "hel: warning: cannot write spill file {}: {e}; the result is cut instead",
                path.display()
            );
            let head: String = content.chars().take(EDGE).collect();
            return format!(
                "{head}\n[{} more characters cut: the output could not be saved]",
                chars - EDGE
            );
        }
        let key = format!("{}{name}", self.prefix);
        self.entries.insert(key.clone(), Source::File(path.clone()));
        self.pending.push((key.clone(), path));
        let head: String = content.chars().take(EDGE).collect();
        let tail: String = {
            let v: Vec<char> = content.chars().rev().take(EDGE).collect();
            v.into_iter().rev().collect()
        };
        format!(
            "[Output too large for the conversation: {chars} characters ({} bytes). It is saved whole; page through it with read_file and its cursor.]\n\
             spill: {key}\n\
             --- first {EDGE} characters ---\n{head}\n--- last {EDGE} characters ---\n{tail}",
            content.len()
        )
    }

    /// The bytes of spill file `key`, if this session may read it, and its
    /// blob id (spill never changes, so the id identifies it for cursors,
    /// across processes and copies). The last file read is kept, so paging
    /// through a spill reads it once.
    pub fn read(&self, key: &str) -> Option<(Rc<[u8]>, ObjectId)> {
        if let Some((k, bytes, id)) = self.last.borrow().as_ref() {
            if k == key {
                return Some((Rc::clone(bytes), *id));
            }
        }
        let (bytes, id): (Rc<[u8]>, ObjectId) = match self.entries.get(key)? {
            Source::File(p) => {
                let bytes = std::fs::read(p).ok()?;
                let id = object::id_of(Kind::Blob, &bytes);
                (bytes.into(), id)
            }
            Source::Stored(entry) => {
                // The working copy of our own spill, when intact, saves a decode.
                let copy = key
                    .strip_prefix(&self.prefix)
                    .and_then(|name| std::fs::read(self.dir.join(name)).ok())
                    .filter(|b| {
                        b.len() as u64 == entry.size && object::id_of(Kind::Blob, b) == entry.blob
                    });
                let bytes = match copy {
                    Some(b) => b,
                    None => self.store.as_ref()?.read_blob(&entry.blob).ok()?,
                };
                (bytes.into(), entry.blob)
            }
        };
        *self.last.borrow_mut() = Some((key.to_owned(), Rc::clone(&bytes), id));
        Some((bytes, id))
    }

    /// Re-create this session's own spill working copies from their blobs
    /// when they are gone (at resume).
    pub fn materialize(&self) {
        let Some(store) = &self.store else { return };
        for (key, src) in &self.entries {
            let (Source::Stored(entry), Some(name)) = (src, key.strip_prefix(&self.prefix)) else {
                continue;
            };
            let path = self.dir.join(name);
            if path.exists() {
                continue;
            }
            if let Ok(bytes) = store.read_blob(&entry.blob) {
                let _ =
                    std::fs::create_dir_all(&self.dir).and_then(|_| std::fs::write(&path, bytes));
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
