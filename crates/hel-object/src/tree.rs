//! Tree objects: one directory of a workspace snapshot (objects-spec §10).
//!
//! A tree lists a directory's entries sorted by name, each with its kind,
//! permission bits, size and object id. A file's id is the blob of its
//! bytes, a symlink's the blob of its target (never followed), a
//! directory's another tree. Paths the snapshot saw but did not record (a
//! file over the size limit or the budget, an unreadable or ignored one, a
//! special file, a nested repository, a directory it did not read) are
//! listed with the zero id, so that a restore knows they exist and leaves
//! them alone; a directory entry promises its tree lists every name the
//! directory held. Unchanged subtrees keep their ids: a snapshot after a one-file
//! change writes that file's blob and the trees on its path.
//!
//! The payload is binary, because file names are bytes, not text:
//!
//! ```text
//! entry* where entry = kind u8 | mode u16 LE | size u64 LE | id [32]
//!                      | name length u16 LE | name
//! ```
//!
//! What a root tree flattens to (its paths, all the way down) is bounded
//! ([`FLAT_PATHS_MAX`], [`FLAT_BYTES_MAX`], [`DEPTH_MAX`], [`PATH_MAX`]):
//! a tree named a thousand times at each of three levels is a few hundred
//! kilobytes that would flatten to a trillion paths. [`Extents`] counts
//! that before anything is flattened, each tree once; every reader of a
//! whole snapshot (the workspace's flat map, fsck, the checks of a bundle
//! or a pull, an export) goes through it, and a snapshot never records
//! more.

use std::collections::HashMap;

use crate::ObjectId;

/// A root tree that flattens to more than a reader takes
/// ([`Extents::check`]): refused before anything is flattened. hel-store
/// turns it into its `Error::TreeTooLarge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tree {tree} flattens to more than {limit} {what}, over what hel reads (see docs/configuration.md, \"Limits\"); the store may be damaged or hostile")]
pub struct TreeTooLarge {
    pub tree: ObjectId,
    pub what: &'static str,
    pub limit: u64,
}

/// The longest file name an entry may have (Linux's `NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// The longest symlink target a tree records (Linux's `PATH_MAX` less the
/// terminating NUL).
pub const TARGET_MAX: u64 = 4095;

/// The deepest a workspace may nest trees. Walkers of untrusted trees stop
/// here with an error instead of following a hostile chain.
pub const DEPTH_MAX: usize = 256;

/// The longest path a snapshot may hold (Linux's `PATH_MAX` less the NUL).
pub const PATH_MAX: usize = 4095;

/// The most paths (of every kind) one root tree may flatten to: what a
/// snapshot records at most, and what every reader accepts (objects-spec
/// §4.1). Far above a large monorepo's tracked files; a flat map of that
/// many paths takes a few hundred bytes each in memory.
pub const FLAT_PATHS_MAX: u64 = 1_000_000;

/// The most bytes those paths may take together (each path counted whole,
/// `src/main.rs` as 11).
pub const FLAT_BYTES_MAX: u64 = 128 << 20;

/// Fixed bytes of an entry before its name.
const ENTRY_FIXED: usize = 1 + 2 + 8 + 32 + 2;

/// Names no tree may hold, whatever their case: version control and store
/// directories are never recorded, so a restore never writes into them.
const NEVER: [&[u8]; 3] = [b".git", crate::format::STORE_DIR.as_bytes(), b".jj"];

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
    /// A directory; its id is a tree, which lists every name the directory
    /// held when the snapshot listed it (a directory not listed whole is a
    /// [`EntryKind::NotTrackedDir`]).
    Dir,
    /// A path the snapshot saw but did not record that is not a directory:
    /// a file over the size limit or the snapshot's budget, unreadable, or
    /// changed while it looked; an ignored file or symlink; a FIFO, socket
    /// or device. Its id and mode are zero; its size is the file's length
    /// when the snapshot tried to read it, else zero.
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
    /// The byte that stands for this kind in a tree entry (objects-spec
    /// §13.1), and in the workspace cache, which spells kinds the same.
    pub fn code(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::Symlink => 2,
            EntryKind::Dir => 3,
            EntryKind::NotTracked => 4,
            EntryKind::Repository => 5,
            EntryKind::NotTrackedDir => 6,
        }
    }

    /// The kind byte `c` stands for ([`EntryKind::code`]), if any.
    pub fn from_code(c: u8) -> Option<EntryKind> {
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
            push_entry(&mut out, e.kind, e.mode, e.size, &e.id, &e.name);
        }
        out
    }

    /// Sort entries by name: what a builder calls before writing.
    pub fn sort(&mut self) {
        self.entries.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Parse and validate a tree payload (objects-spec §10.1): every entry
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

/// What a tree holds all the way down, as paths relative to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extent {
    /// Paths of every kind, directories included.
    pub paths: u64,
    /// Bytes of all those paths together.
    pub bytes: u64,
    /// Levels of directories below it (0: it holds no directory).
    pub levels: u64,
    /// The longest of those paths, in bytes.
    pub longest: u64,
    /// Those of kind 4 or 6 (not tracked, not tracked directory): at least
    /// what a record naming it as its tree may count as `not_tracked`.
    pub not_tracked: u64,
}

impl Extent {
    /// Add subdirectory `child`, named in `self`'s tree with a name of
    /// `name` bytes (the name itself is counted already). Saturating: a
    /// hostile tree's counts stop at `u64::MAX`, over every limit.
    fn add_dir(&mut self, name: u64, child: &Extent) {
        self.paths = self.paths.saturating_add(child.paths);
        self.bytes = self
            .bytes
            .saturating_add(child.paths.saturating_mul(name + 1))
            .saturating_add(child.bytes);
        self.levels = self.levels.max(child.levels.saturating_add(1));
        self.not_tracked = self.not_tracked.saturating_add(child.not_tracked);
        if child.paths > 0 {
            self.longest = self.longest.max(name + 1 + child.longest);
        }
    }

    /// The first limit this extent is over: what, and the limit.
    fn over(&self) -> Option<(&'static str, u64)> {
        if self.paths > FLAT_PATHS_MAX {
            Some(("paths", FLAT_PATHS_MAX))
        } else if self.bytes > FLAT_BYTES_MAX {
            Some(("bytes of paths", FLAT_BYTES_MAX))
        } else if self.levels >= DEPTH_MAX as u64 {
            Some(("levels of directories", DEPTH_MAX as u64 - 1))
        } else if self.longest > PATH_MAX as u64 {
            Some(("bytes in one path", PATH_MAX as u64))
        } else {
            None
        }
    }
}

/// The extents of trees, each counted once and remembered by id, so that
/// a tree named at a thousand places costs one count, and checking many
/// roots that share subtrees (every record of a session) costs what their
/// distinct trees do.
#[derive(Debug, Default)]
pub struct Extents {
    known: HashMap<ObjectId, Extent>,
}

/// A tree being counted: its directories still to add.
struct Frame {
    id: ObjectId,
    /// Its name's length in its parent's tree.
    name: u64,
    entries: u64,
    dirs: Vec<(ObjectId, u64)>,
    next: usize,
    extent: Extent,
}

impl Extents {
    /// What root tree `root` flattens to, reading each tree not counted
    /// yet with `read`; refused with [`TreeTooLarge`] naming `root`
    /// when it is over [`FLAT_PATHS_MAX`] paths, [`FLAT_BYTES_MAX`] bytes
    /// of paths, `DEPTH_MAX - 1` levels of directories or a path of
    /// [`PATH_MAX`] bytes, and with `read`'s error when a tree cannot be
    /// read. Iterative (an explicit stack, never deeper than
    /// [`DEPTH_MAX`]); it stops at the first subtree over a limit, and the
    /// memory it takes is bounded by the limits: at most
    /// [`FLAT_PATHS_MAX`] distinct trees (each is at a path of its own),
    /// and the entries of the trees on the stack (each a path of its own).
    pub fn check<E: From<TreeTooLarge>>(
        &mut self,
        root: &ObjectId,
        read: &mut dyn FnMut(&ObjectId) -> Result<Tree, E>,
    ) -> Result<Extent, E> {
        let refuse = |(what, limit): (&'static str, u64)| {
            E::from(TreeTooLarge {
                tree: *root,
                what,
                limit,
            })
        };
        if let Some(e) = self.known.get(root) {
            return match e.over() {
                Some(over) => Err(refuse(over)),
                None => Ok(*e),
            };
        }
        let mut on_stack = 0u64;
        let mut open = |id: ObjectId, name: u64, on_stack: &mut u64| -> Result<Frame, E> {
            let tree = read(&id)?;
            let mut f = Frame {
                id,
                name,
                entries: tree.entries.len() as u64,
                dirs: Vec::new(),
                next: 0,
                extent: Extent::default(),
            };
            for e in &tree.entries {
                let len = e.name.len() as u64;
                f.extent.paths += 1;
                f.extent.bytes += len;
                f.extent.longest = f.extent.longest.max(len);
                match e.kind {
                    EntryKind::Dir => f.dirs.push((e.id, len)),
                    EntryKind::NotTracked | EntryKind::NotTrackedDir => f.extent.not_tracked += 1,
                    EntryKind::File | EntryKind::Symlink | EntryKind::Repository => {}
                }
            }
            // The entries of the trees on the stack are paths of their
            // own: together they are within the limit, or the root is not.
            *on_stack += f.entries;
            if *on_stack > FLAT_PATHS_MAX {
                return Err(refuse(("paths", FLAT_PATHS_MAX)));
            }
            Ok(f)
        };
        let mut stack = vec![open(*root, 0, &mut on_stack)?];
        let mut whole = Extent::default();
        while let Some(top) = stack.last_mut() {
            if let Some(&(child, name)) = top.dirs.get(top.next) {
                top.next += 1;
                if let Some(c) = self.known.get(&child) {
                    top.extent.add_dir(name, c);
                    if let Some(over) = top.extent.over() {
                        return Err(refuse(over));
                    }
                    continue;
                }
                if stack.len() >= DEPTH_MAX {
                    return Err(refuse(("levels of directories", DEPTH_MAX as u64 - 1)));
                }
                // Each distinct tree is at a path of its own.
                if self.known.len() as u64 >= FLAT_PATHS_MAX {
                    return Err(refuse(("paths", FLAT_PATHS_MAX)));
                }
                let f = open(child, name, &mut on_stack)?;
                stack.push(f);
                continue;
            }
            let Some(done) = stack.pop() else { break };
            on_stack -= done.entries;
            // A subtree over a limit puts every tree above it over it.
            if let Some(over) = done.extent.over() {
                return Err(refuse(over));
            }
            self.known.insert(done.id, done.extent);
            match stack.last_mut() {
                None => whole = done.extent,
                Some(parent) => {
                    parent.extent.add_dir(done.name, &done.extent);
                    if let Some(over) = parent.extent.over() {
                        return Err(refuse(over));
                    }
                }
            }
        }
        Ok(whole)
    }

    /// The extent of tree `id`, when [`Extents::check`] counted it.
    pub fn known(&self, id: &ObjectId) -> Option<&Extent> {
        self.known.get(id)
    }
}

/// Append one entry to a tree payload (objects-spec §10.1): what
/// [`Tree::to_payload`] writes for each entry, for a builder that writes
/// entries in name order without building a [`Tree`]. Returns where the
/// entry's id lies in `out`, for one that learns a directory's id later.
pub fn push_entry(
    out: &mut Vec<u8>,
    kind: EntryKind,
    mode: u16,
    size: u64,
    id: &ObjectId,
    name: &[u8],
) -> usize {
    out.push(kind.code());
    out.extend_from_slice(&mode.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    let at = out.len();
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name);
    at
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
                entry("f", EntryKind::NotTrackedDir),
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
        assert_eq!(e, TreeError::NameCutShort { entry: 5 });
        assert_eq!(e.to_string(), "entry 5's name is cut short");
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

    /// Trees by id, for [`Extents::check`] to read, counting reads.
    struct Trees {
        by_id: HashMap<ObjectId, Tree>,
        reads: u64,
    }

    impl Trees {
        fn new() -> Trees {
            Trees {
                by_id: HashMap::new(),
                reads: 0,
            }
        }

        fn add(&mut self, mut t: Tree) -> ObjectId {
            t.sort();
            let id = crate::object::id_of(crate::object::Kind::Tree, &t.to_payload());
            self.by_id.insert(id, t);
            id
        }

        fn check(&mut self, ex: &mut Extents, root: &ObjectId) -> Result<Extent, TreeTooLarge> {
            let (by_id, reads) = (&self.by_id, &mut self.reads);
            ex.check(root, &mut |id| {
                *reads += 1;
                Ok(by_id
                    .get(id)
                    .cloned()
                    .expect("every tree of a test is added"))
            })
        }

        /// Every path under `root`, flattened the plain way.
        fn flatten(&self, root: &ObjectId) -> Vec<Vec<u8>> {
            let mut out = Vec::new();
            let mut stack = vec![(Vec::new(), *root)];
            while let Some((dir, id)) = stack.pop() {
                for e in &self.by_id[&id].entries {
                    let mut p = dir.clone();
                    if !p.is_empty() {
                        p.push(b'/');
                    }
                    p.extend_from_slice(&e.name);
                    if e.kind == EntryKind::Dir {
                        stack.push((p.clone(), e.id));
                    }
                    out.push(p);
                }
            }
            out
        }
    }

    fn named(name: &[u8], kind: EntryKind, id: ObjectId) -> Entry {
        Entry {
            name: name.to_vec(),
            kind,
            mode: 0,
            size: 0,
            id,
        }
    }

    fn file(name: &[u8]) -> Entry {
        named(name, EntryKind::File, ObjectId::from_bytes([7; 32]))
    }

    fn dirs(t: &mut Trees, count: usize, name_len: usize, child: ObjectId) -> ObjectId {
        let entries = (0..count)
            .map(|k| {
                let mut name = format!("{k:06}").into_bytes();
                name.resize(name_len.max(6), b'n');
                named(&name, EntryKind::Dir, child)
            })
            .collect();
        t.add(Tree { entries })
    }

    #[test]
    fn extents_count_what_a_plain_flattening_gives() {
        let mut t = Trees::new();
        let leaf = t.add(Tree {
            entries: vec![
                file(b"a"),
                file(b"bb"),
                named(b"skipped", EntryKind::NotTracked, ObjectId::ZERO),
            ],
        });
        let empty = t.add(Tree::default());
        let mid = t.add(Tree {
            entries: vec![
                named(b"x", EntryKind::Dir, leaf),
                named(b"yyy", EntryKind::Dir, leaf),
                named(b"e", EntryKind::Dir, empty),
                file(b"z"),
                named(b"nt", EntryKind::NotTrackedDir, ObjectId::ZERO),
            ],
        });
        let root = t.add(Tree {
            entries: vec![
                named(b"m", EntryKind::Dir, mid),
                named(b"n", EntryKind::Dir, leaf),
                file(b"top"),
            ],
        });
        let paths = t.flatten(&root);
        let want = Extent {
            paths: paths.len() as u64,
            bytes: paths.iter().map(|p| p.len() as u64).sum(),
            levels: 2,
            longest: paths.iter().map(|p| p.len() as u64).max().unwrap(),
            // `nt` under `m`, and `skipped` in `leaf`, named three times.
            not_tracked: 4,
        };
        let mut ex = Extents::default();
        assert_eq!(t.check(&mut ex, &root).unwrap(), want);
        // Each tree was read once, and is not read again.
        assert_eq!(t.reads, 4);
        assert_eq!(t.check(&mut ex, &root).unwrap(), want);
        assert_eq!(t.reads, 4);
    }

    #[test]
    fn a_tree_named_a_thousand_times_a_level_is_refused_naming_the_root() {
        let mut t = Trees::new();
        let leaf = t.add(Tree {
            entries: (0..1000)
                .map(|k| file(format!("f{k}").as_bytes()))
                .collect(),
        });
        let mut root = leaf;
        for _ in 0..3 {
            root = dirs(&mut t, 1000, 6, root);
        }
        let e = t.check(&mut Extents::default(), &root).unwrap_err();
        assert!(
            matches!(e, TreeTooLarge { tree, what: "paths", limit } if tree == root && limit == FLAT_PATHS_MAX),
            "{e}"
        );
        assert!(e.to_string().contains(&root.to_hex()), "{e}");
        assert!(t.reads <= 4, "{} reads", t.reads);
        // Long names reach the byte limit before the path limit: 500 500
        // paths averaging some 500 bytes.
        let mut t = Trees::new();
        let leaf = t.add(Tree {
            entries: vec![file(&[b'f'; 200])],
        });
        let one = dirs(&mut t, 500, 200, leaf);
        let two = dirs(&mut t, 500, 200, one);
        let e = t.check(&mut Extents::default(), &two).unwrap_err();
        assert!(
            matches!(
                e,
                TreeTooLarge {
                    what: "bytes of paths",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn deep_chains_and_long_paths_are_refused() {
        let mut t = Trees::new();
        let mut at = t.add(Tree {
            entries: vec![file(b"f")],
        });
        let mut depth_ok = None;
        for level in 1..=300 {
            at = dirs(&mut t, 1, 1, at);
            if level == DEPTH_MAX - 1 {
                depth_ok = Some(at);
            }
        }
        let ok = t
            .check(&mut Extents::default(), &depth_ok.unwrap())
            .unwrap();
        assert_eq!(ok.levels, DEPTH_MAX as u64 - 1);
        let e = t.check(&mut Extents::default(), &at).unwrap_err();
        assert!(
            matches!(
                e,
                TreeTooLarge {
                    what: "levels of directories",
                    ..
                }
            ),
            "{e}"
        );
        // 17 names of 255 bytes: a path of 4351 bytes.
        let mut t = Trees::new();
        let mut at = t.add(Tree {
            entries: vec![file(&[b'f'; 255])],
        });
        for _ in 0..16 {
            at = dirs(&mut t, 1, 255, at);
        }
        let e = t.check(&mut Extents::default(), &at).unwrap_err();
        assert!(
            matches!(
                e,
                TreeTooLarge {
                    what: "bytes in one path",
                    limit: 4095,
                    ..
                }
            ),
            "{e}"
        );
    }
}
