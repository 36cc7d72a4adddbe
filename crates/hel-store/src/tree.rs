//! Tree objects: one directory of a workspace snapshot (objects-spec §13).
//!
//! A tree lists a directory's entries sorted by name, each with its kind,
//! permission bits, size and object id. A file's id is the blob of its
//! bytes, a symlink's the blob of its target (never followed), a
//! directory's another tree. Paths the snapshot saw but did not record (a
//! file over the size limit or the budget, a nested repository) are listed
//! with the zero id, so that a restore knows they exist and leaves them
//! alone. Unchanged subtrees keep their ids: a snapshot after a one-file
//! change writes that file's blob and the trees on its path.
//!
//! The payload is binary, because file names are bytes, not text:
//!
//! ```text
//! entry* where entry = kind u8 | mode u16 LE | size u64 LE | id [32]
//!                      | name length u16 LE | name
//! ```

use crate::ObjectId;

/// The longest file name an entry may have (Linux's `NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// The longest symlink target a tree records (Linux's `PATH_MAX` less the
/// terminating NUL).
pub const TARGET_MAX: u64 = 4095;

/// The deepest a workspace may nest trees. Walkers of untrusted trees stop
/// here with an error instead of following a hostile chain.
pub const DEPTH_MAX: usize = 256;

/// Fixed bytes of an entry before its name.
const ENTRY_FIXED: usize = 1 + 2 + 8 + 32 + 2;

/// Names no tree may hold, whatever their case: version control and store
/// directories are never recorded, so a restore never writes into them.
const NEVER: [&[u8]; 3] = [b".git", crate::layout::STORE_DIR.as_bytes(), b".jj"];

/// Is `name` one no tree may hold (`.git`, `.hel`, `.jj`, in any case: on
/// a case-insensitive filesystem `.GIT` is `.git`)?
pub fn is_never(name: &[u8]) -> bool {
    NEVER.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// What an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A regular file; its id is the blob of its bytes.
    File,
    /// A symbolic link; its id is the blob of its target.
    Symlink,
    /// A directory; its id is a tree.
    Dir,
    /// A regular file the snapshot saw but did not record (over the size
    /// limit or the snapshot's budget). Its id is zero.
    NotTracked,
    /// A directory holding a repository of its own (it contains `.git`),
    /// left out whole. Its id is zero.
    Repository,
    /// A directory the snapshot did not read (ignored by a rule, could not
    /// be opened or listed, past the snapshot's path budget): nothing is
    /// known of what it holds, so nothing under it may be taken as absent.
    /// Its id, mode and size are zero.
    NotTrackedDir,
}

impl EntryKind {
    fn code(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::Symlink => 2,
            EntryKind::Dir => 3,
            EntryKind::NotTracked => 4,
            EntryKind::Repository => 5,
            EntryKind::NotTrackedDir => 6,
        }
    }

    fn from_code(c: u8) -> Option<EntryKind> {
        Some(match c {
            1 => EntryKind::File,
            2 => EntryKind::Symlink,
            3 => EntryKind::Dir,
            4 => EntryKind::NotTracked,
            5 => EntryKind::Repository,
            6 => EntryKind::NotTrackedDir,
            _ => return None,
        })
    }

    /// Whether the entry names an object (the others are listed only).
    pub fn has_object(self) -> bool {
        matches!(self, EntryKind::File | EntryKind::Symlink | EntryKind::Dir)
    }
}

/// One entry of a tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The file name: bytes, neither empty nor `.`/`..`, without `/` or NUL.
    pub name: Vec<u8>,
    pub kind: EntryKind,
    /// Permission bits (`0o777` at most; setuid, setgid and sticky bits are
    /// never recorded). Zero for symlinks, not-tracked files and
    /// repositories.
    pub mode: u16,
    /// A file's length, a symlink target's length; zero for directories and
    /// repositories.
    pub size: u64,
    /// The blob or tree; [`ObjectId::ZERO`] for what has no object.
    pub id: ObjectId,
}

/// A directory of a workspace snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    /// Sorted by name (bytewise), names unique.
    pub entries: Vec<Entry>,
}

/// Why a tree payload is refused. `entry` counts entries from the
/// payload's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// The payload ends inside the entry's fixed fields.
    #[error("entry {entry} is cut short")]
    CutShort { entry: usize },
    /// The payload ends inside the entry's name.
    #[error("entry {entry}'s name is cut short")]
    NameCutShort { entry: usize },
    #[error("entry {entry} has unknown kind {kind}")]
    UnknownKind { entry: usize, kind: u8 },
    /// The name is not one a tree may hold ([`bad_name`] says why).
    #[error("entry {entry} has {why}")]
    BadName { entry: usize, why: &'static str },
    /// The entry's fields contradict its kind ([`check_entry`]).
    #[error("entry {entry}: {why}")]
    BadEntry {
        entry: usize,
        #[source]
        why: EntryError,
    },
    /// Its name is not above the name before it.
    #[error("entry {entry} is out of order or repeated")]
    OutOfOrder { entry: usize },
}

/// Why an entry's mode, size or id do not fit its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("mode bits above 0o777")]
    ModeAbove777,
    #[error("a symlink with mode bits")]
    SymlinkMode,
    #[error("a symlink target of no or over 4095 bytes")]
    SymlinkSize,
    #[error("a directory with a size")]
    DirSize,
    /// A not-tracked file or repository with an id or mode bits.
    #[error("an entry without an object that names one or has mode bits")]
    ObjectlessWithObject,
    #[error("a repository or not-tracked directory with a size")]
    RepositorySize,
    /// A file, symlink or directory whose id is zero.
    #[error("the zero id")]
    ZeroId,
}

/// Why a name cannot be a tree entry's, or `None` when it can.
pub fn bad_name(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        return Some("an empty name");
    }
    if name.len() > NAME_MAX {
        return Some("a name over 255 bytes");
    }
    if name == b"." || name == b".." {
        return Some("a name that is . or ..");
    }
    if name.iter().any(|&c| c == b'/' || c == 0) {
        return Some("a name holding / or NUL");
    }
    if is_never(name) {
        return Some("a .git, .hel or .jj entry");
    }
    None
}

impl Tree {
    /// The payload of this tree. Entries must be valid and sorted (as
    /// [`Tree::parse`] requires); the writer checks them before this.
    pub fn to_payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.entries
                .iter()
                .map(|e| ENTRY_FIXED + e.name.len())
                .sum(),
        );
        for e in &self.entries {
            out.push(e.kind.code());
            out.extend_from_slice(&e.mode.to_le_bytes());
            out.extend_from_slice(&e.size.to_le_bytes());
            out.extend_from_slice(e.id.as_bytes());
            out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            out.extend_from_slice(&e.name);
        }
        out
    }

    /// Sort entries by name: what a builder calls before writing.
    pub fn sort(&mut self) {
        self.entries.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Parse and validate a tree payload (objects-spec §13.1): every entry
    /// whole, a known kind, a valid name, names strictly increasing, mode
    /// and size and id as the kind requires.
    /// `Err` names the first entry at fault.
    pub fn parse(payload: &[u8]) -> Result<Tree, TreeError> {
        let mut entries = Vec::new();
        let mut at = 0usize;
        while at < payload.len() {
            let k = entries.len();
            let fixed = payload
                .get(at..at + ENTRY_FIXED)
                .ok_or(TreeError::CutShort { entry: k })?;
            let kind = EntryKind::from_code(fixed[0]).ok_or(TreeError::UnknownKind {
                entry: k,
                kind: fixed[0],
            })?;
            let mode = u16::from_le_bytes([fixed[1], fixed[2]]);
            let mut size = [0u8; 8];
            size.copy_from_slice(&fixed[3..11]);
            let size = u64::from_le_bytes(size);
            let mut id = [0u8; 32];
            id.copy_from_slice(&fixed[11..43]);
            let id = ObjectId::from_bytes(id);
            let name_len = u16::from_le_bytes([fixed[43], fixed[44]]) as usize;
            at += ENTRY_FIXED;
            let name = payload
                .get(at..at + name_len)
                .ok_or(TreeError::NameCutShort { entry: k })?;
            at += name_len;
            if let Some(why) = bad_name(name) {
                return Err(TreeError::BadName { entry: k, why });
            }
            let e = Entry {
                name: name.to_vec(),
                kind,
                mode,
                size,
                id,
            };
            check_entry(&e).map_err(|why| TreeError::BadEntry { entry: k, why })?;
            if let Some(prev) = entries.last() {
                let prev: &Entry = prev;
                if prev.name >= e.name {
                    return Err(TreeError::OutOfOrder { entry: k });
                }
            }
            entries.push(e);
        }
        Ok(Tree { entries })
    }
}

/// Check what an entry's kind requires of its other fields (its name is
/// [`bad_name`]'s to judge): `Err` says the first field that does not fit.
pub fn check_entry(e: &Entry) -> Result<(), EntryError> {
    if e.mode > 0o777 {
        return Err(EntryError::ModeAbove777);
    }
    match e.kind {
        EntryKind::File => {}
        EntryKind::Symlink => {
            if e.mode != 0 {
                return Err(EntryError::SymlinkMode);
            }
            if e.size == 0 || e.size > TARGET_MAX {
                return Err(EntryError::SymlinkSize);
            }
        }
        EntryKind::Dir => {
            if e.size != 0 {
                return Err(EntryError::DirSize);
            }
        }
        EntryKind::NotTracked | EntryKind::Repository | EntryKind::NotTrackedDir => {
            if e.id != ObjectId::ZERO || e.mode != 0 {
                return Err(EntryError::ObjectlessWithObject);
            }
            if e.kind != EntryKind::NotTracked && e.size != 0 {
                return Err(EntryError::RepositorySize);
            }
        }
    }
    if e.kind.has_object() && e.id == ObjectId::ZERO {
        return Err(EntryError::ZeroId);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, kind: EntryKind) -> Entry {
        Entry {
            name: name.as_bytes().to_vec(),
            kind,
            mode: if kind == EntryKind::File { 0o644 } else { 0 },
            size: if kind == EntryKind::Symlink { 3 } else { 0 },
            id: if kind.has_object() {
                ObjectId::from_bytes([7; 32])
            } else {
                ObjectId::ZERO
            },
        }
    }

    #[test]
    fn round_trip_and_refusals() {
        let t = Tree {
            entries: vec![
                entry("a", EntryKind::File),
                entry("b", EntryKind::Symlink),
                entry("c", EntryKind::Dir),
                entry("d", EntryKind::NotTracked),
                entry("e", EntryKind::Repository),
            ],
        };
        assert_eq!(Tree::parse(&t.to_payload()).unwrap(), t);
        assert_eq!(Tree::parse(&[]).unwrap(), Tree::default());
        let mut bad = t.clone();
        bad.entries.swap(0, 1);
        assert_eq!(
            Tree::parse(&bad.to_payload()),
            Err(TreeError::OutOfOrder { entry: 1 })
        );
        for name in [".git", ".HEL", ".jj", "..", "a/b", ""] {
            let t = Tree {
                entries: vec![entry(name, EntryKind::File)],
            };
            assert!(Tree::parse(&t.to_payload()).is_err(), "{name}");
        }
        let mut p = t.to_payload();
        p.pop();
        let e = Tree::parse(&p).unwrap_err();
        assert_eq!(e, TreeError::NameCutShort { entry: 4 });
        assert_eq!(e.to_string(), "entry 4's name is cut short");
        let mut p = t.to_payload();
        p[0] = 9;
        let e = Tree::parse(&p).unwrap_err();
        assert_eq!(e, TreeError::UnknownKind { entry: 0, kind: 9 });
        assert_eq!(e.to_string(), "entry 0 has unknown kind 9");
        let mut e = entry("x", EntryKind::NotTracked);
        e.id = ObjectId::from_bytes([1; 32]);
        assert_eq!(check_entry(&e), Err(EntryError::ObjectlessWithObject));
        let mut e = entry("x", EntryKind::File);
        e.mode = 0o4755;
        assert_eq!(check_entry(&e), Err(EntryError::ModeAbove777));
        let mut p = entry("x", EntryKind::Dir);
        p.size = 1;
        let t = Tree { entries: vec![p] };
        let e = Tree::parse(&t.to_payload()).unwrap_err();
        assert_eq!(e.to_string(), "entry 0: a directory with a size");
    }
}
