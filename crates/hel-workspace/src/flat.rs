//! A snapshot as a flat map from path to entry, read from its trees or
//! built by a walk, and turned back into trees.

use std::collections::{BTreeMap, HashMap};

use hel_store::tree::{Entry, EntryKind, Tree, DEPTH_MAX, FLAT_BYTES_MAX, FLAT_PATHS_MAX};
use hel_store::{ObjectId, Store};

pub use hel_store::tree::PATH_MAX;

/// One path of a snapshot: a tree entry without its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Item {
    pub kind: EntryKind,
    pub mode: u16,
    pub size: u64,
    /// The blob or tree ([`ObjectId::ZERO`] for what has none, and for a
    /// directory of a walk until [`Flat::trees`] computed it).
    pub id: ObjectId,
}

impl Item {
    /// The item a tree's entry describes (its name aside).
    pub fn of(e: &Entry) -> Item {
        Item {
            kind: e.kind,
            mode: e.mode,
            size: e.size,
            id: e.id,
        }
    }

    /// Same content, kind and mode: nothing to write to go from one to the
    /// other. (Directories compare by kind and mode only: their content is
    /// their own paths.)
    pub fn same(&self, other: &Item) -> bool {
        if self.kind == EntryKind::Dir && other.kind == EntryKind::Dir {
            return self.mode == other.mode;
        }
        self.kind == other.kind && self.mode == other.mode && self.id == other.id
    }
}

/// Why a snapshot could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum FlatError {
    #[error(transparent)]
    Store(#[from] hel_store::Error),
    #[error("tree {tree} nests deeper than {DEPTH_MAX} directories (at {path}); the store may be damaged or hostile: run `hel fsck`")]
    TooDeep { tree: ObjectId, path: String },
    #[error("tree {tree} holds a path longer than {PATH_MAX} bytes ({path}…); the store may be damaged or hostile: run `hel fsck`")]
    PathTooLong { tree: ObjectId, path: String },
}

/// Why a snapshot's paths do not make trees: the map is not one a walk
/// or a restore plan builds (a bug in hel, not a fault of the disk).
#[derive(Debug, thiserror::Error)]
pub enum TreesError {
    /// `path`'s parent is not a directory item.
    #[error("{path} is in no directory of the snapshot")]
    NoDirectory { path: String },
    /// A directory [`Flat::trees_since`] found unchanged has no directory
    /// item in the previous snapshot.
    #[error("a directory unchanged since the last snapshot is not in it ({path})")]
    NotInPrevious { path: String },
}

/// Every path of a snapshot: files, symlinks, directories, not-tracked
/// files and nested repositories, by path (bytes, `/`-separated, relative
/// to the project; the root itself is not listed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flat {
    pub items: BTreeMap<Vec<u8>, Item>,
}

/// The directory part of a path (`b""` for the root) and its name.
pub fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&c| c == b'/') {
        Some(k) => (&path[..k], &path[k + 1..]),
        None => (&[], path),
    }
}

/// `dir/name` (or `name` at the root).
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    if !dir.is_empty() {
        p.extend_from_slice(dir);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

impl Flat {
    /// Read the snapshot whose root tree is `root`: every tree read and
    /// validated by the store, walked with a stack (never recursion), no
    /// deeper than [`DEPTH_MAX`] and no path longer than [`PATH_MAX`].
    /// Refused before anything is built when the tree flattens to more
    /// than [`FLAT_PATHS_MAX`] paths or [`FLAT_BYTES_MAX`] bytes of paths
    /// (each subtree counted once: [`hel_store::workspace::tree_extent`]), naming the
    /// tree; the same limits hold while it is built.
    pub fn read(store: &Store, root: &ObjectId) -> Result<Flat, FlatError> {
        hel_store::workspace::tree_extent(store, root)?;
        let mut items = BTreeMap::new();
        let mut stack: Vec<(Vec<u8>, ObjectId, usize)> = vec![(Vec::new(), *root, 0)];
        let mut bytes = 0u64;
        let over = |what, limit| {
            FlatError::Store(hel_store::Error::TreeTooLarge {
                tree: *root,
                what,
                limit,
            })
        };
        while let Some((dir, id, depth)) = stack.pop() {
            let tree = hel_store::workspace::read_tree(store, &id)?;
            // The trees may have changed since they were counted (another
            // writer, a repack): counted again as they are built.
            if (items.len() + tree.entries.len()) as u64 > FLAT_PATHS_MAX {
                return Err(over("paths", FLAT_PATHS_MAX));
            }
            for e in tree.entries {
                let path = join(&dir, &e.name);
                bytes += path.len() as u64;
                if bytes > FLAT_BYTES_MAX {
                    return Err(over("bytes of paths", FLAT_BYTES_MAX));
                }
                if path.len() > PATH_MAX {
                    return Err(FlatError::PathTooLong {
                        tree: *root,
                        path: String::from_utf8_lossy(&path[..200]).into_owned(),
                    });
                }
                if e.kind == EntryKind::Dir {
                    if depth + 1 >= DEPTH_MAX {
                        return Err(FlatError::TooDeep {
                            tree: *root,
                            path: String::from_utf8_lossy(&path).into_owned(),
                        });
                    }
                    stack.push((path.clone(), e.id, depth + 1));
                }
                items.insert(path, Item::of(&e));
            }
        }
        Ok(Flat { items })
    }

    pub fn get(&self, path: &[u8]) -> Option<&Item> {
        self.items.get(path)
    }

    /// Paths the snapshot saw but did not record (not tracked).
    pub fn not_tracked(&self) -> impl Iterator<Item = &[u8]> {
        self.items
            .iter()
            .filter(|(_, i)| i.kind == EntryKind::NotTracked)
            .map(|(p, _)| p.as_slice())
    }

    /// The trees of this snapshot that differ from `prev`'s, deepest first
    /// and the root last (when it differs), each with its directory's path
    /// and id; every other directory item gets `prev`'s id for it. A
    /// directory differs when a path under it was added, removed or
    /// changed. Without `prev`, every tree ([`Flat::trees`]). Refused as
    /// [`Flat::trees`] refuses, and when a directory unchanged since `prev`
    /// is not one of `prev`'s.
    pub fn trees_since(
        &mut self,
        prev: Option<&Flat>,
    ) -> Result<Vec<(Vec<u8>, Tree, ObjectId)>, TreesError> {
        let Some(prev) = prev else {
            return self.trees();
        };
        // One merge of the two sorted maps finds what differs.
        let mut dirty: crate::Set<Vec<u8>> = Default::default();
        // A path that changed: its directory's tree, and every one above,
        // differ; and a directory that is new here (or was something else)
        // has a tree of its own to build, even an empty one.
        let items = &self.items;
        let mark = |dirty: &mut crate::Set<Vec<u8>>, path: &[u8]| {
            if items.get(path).is_some_and(|i| i.kind == EntryKind::Dir) {
                dirty.insert(path.to_vec());
            }
            let mut p = path;
            loop {
                let (dir, _) = split(p);
                if !dirty.insert(dir.to_vec()) || dir.is_empty() {
                    break;
                }
                p = dir;
            }
        };
        let (mut a, mut b) = (self.items.iter().peekable(), prev.items.iter().peekable());
        loop {
            match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some((pa, ia)), Some((pb, ib))) if pa == pb => {
                    // A directory's id is its content (its own paths);
                    // anything else differs in any field (a not-tracked
                    // file's size is in its tree too).
                    let differs = if ia.kind == EntryKind::Dir && ib.kind == EntryKind::Dir {
                        ia.mode != ib.mode
                    } else {
                        ia != ib
                    };
                    if differs {
                        mark(&mut dirty, pa);
                    }
                    a.next();
                    b.next();
                }
                (Some((pa, _)), Some((pb, _))) if pa < pb => {
                    mark(&mut dirty, pa);
                    a.next();
                }
                (Some((pa, _)), None) => {
                    mark(&mut dirty, pa);
                    a.next();
                }
                (_, Some((pb, _))) => {
                    mark(&mut dirty, pb);
                    b.next();
                }
            }
        }
        if dirty.is_empty() {
            // Nothing added or removed (either marks the root): the same
            // paths in the same order, so each directory's id is beside it.
            for ((path, item), (was, before)) in self.items.iter_mut().zip(&prev.items) {
                debug_assert_eq!(path, was);
                if item.kind == EntryKind::Dir {
                    item.id = before.id;
                }
            }
            return Ok(Vec::new());
        }
        for (path, item) in self.items.iter_mut() {
            if item.kind == EntryKind::Dir && !dirty.contains(path) {
                match prev.items.get(path) {
                    Some(p) if p.kind == EntryKind::Dir => item.id = p.id,
                    _ => {
                        return Err(TreesError::NotInPrevious {
                            path: String::from_utf8_lossy(path).into_owned(),
                        })
                    }
                }
            }
        }
        let mut dirs: Vec<Vec<u8>> = dirty.into_iter().collect();
        deepest_first(&mut dirs);
        let mut out = Vec::with_capacity(dirs.len());
        for dir in dirs {
            if !dir.is_empty()
                && !matches!(self.items.get(&dir), Some(i) if i.kind == EntryKind::Dir)
            {
                continue; // a directory that is gone
            }
            let mut tree = Tree::default();
            let prefix = if dir.is_empty() {
                Vec::new()
            } else {
                join(&dir, b"")
            };
            for (path, item) in self.items.range(prefix.clone()..) {
                let Some(name) = path.strip_prefix(prefix.as_slice()) else {
                    break;
                };
                if name.contains(&b'/') {
                    continue;
                }
                tree.entries.push(item.entry(name));
            }
            self.seal(dir, tree, &mut out);
        }
        Ok(out)
    }

    /// The trees of this snapshot, deepest first and the root last, each
    /// with its directory's path and id; directory items get their tree's
    /// id. Every directory a path goes through must be an item (a walk
    /// lists them all), else this is [`TreesError::NoDirectory`] naming
    /// the path.
    pub fn trees(&mut self) -> Result<Vec<(Vec<u8>, Tree, ObjectId)>, TreesError> {
        // Children by directory, in path order (which is name order within
        // one directory only when compared by name: sorted again below).
        let mut children: HashMap<Vec<u8>, Vec<Vec<u8>>> = HashMap::new();
        children.entry(Vec::new()).or_default();
        for (path, item) in &self.items {
            let (dir, _) = split(path);
            if !dir.is_empty()
                && !matches!(self.items.get(dir), Some(i) if i.kind == EntryKind::Dir)
            {
                return Err(TreesError::NoDirectory {
                    path: String::from_utf8_lossy(path).into_owned(),
                });
            }
            children.entry(dir.to_vec()).or_default().push(path.clone());
            if item.kind == EntryKind::Dir {
                children.entry(path.clone()).or_default();
            }
        }
        let mut dirs: Vec<Vec<u8>> = children.keys().cloned().collect();
        deepest_first(&mut dirs);
        let mut out = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let mut tree = Tree::default();
            for path in children.get(&dir).map(Vec::as_slice).unwrap_or(&[]) {
                let (_, name) = split(path);
                tree.entries.push(self.items[path].entry(name));
            }
            self.seal(dir, tree, &mut out);
        }
        Ok(out)
    }
}

impl Flat {
    /// Finish `dir`'s tree: sorted, its id given to `dir`'s item (the
    /// root has none), added to `out`.
    fn seal(&mut self, dir: Vec<u8>, mut tree: Tree, out: &mut Vec<(Vec<u8>, Tree, ObjectId)>) {
        tree.sort();
        let id = hel_store::tree_id(&tree);
        if let Some(item) = self.items.get_mut(&dir) {
            item.id = id;
        }
        out.push((dir, tree, id));
    }
}

impl Item {
    /// This item as the entry `name` of its directory's tree.
    fn entry(&self, name: &[u8]) -> Entry {
        Entry {
            name: name.to_vec(),
            kind: self.kind,
            mode: self.mode,
            size: self.size,
            id: self.id,
        }
    }
}

/// Sort directories deepest first: each after all of its subdirectories,
/// so that their trees' ids are known when it is built.
fn deepest_first(dirs: &mut [Vec<u8>]) {
    dirs.sort_by_key(|d| {
        std::cmp::Reverse(if d.is_empty() {
            0
        } else {
            1 + d.iter().filter(|&&c| c == b'/').count()
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: u8) -> Item {
        Item {
            kind: EntryKind::File,
            mode: 0o644,
            size: 1,
            id: ObjectId::from_bytes([n; 32]),
        }
    }

    fn dir() -> Item {
        Item {
            kind: EntryKind::Dir,
            mode: 0o755,
            size: 0,
            id: ObjectId::ZERO,
        }
    }

    fn root_of(f: &mut Flat, prev: Option<&Flat>) -> Option<ObjectId> {
        let trees = f.trees_since(prev).unwrap();
        trees
            .last()
            .filter(|(d, _, _)| d.is_empty())
            .map(|(_, _, id)| *id)
    }

    #[test]
    fn trees_since_recomputes_only_what_changed_and_agrees_with_a_full_pass() {
        let mut base = Flat::default();
        for d in ["a", "a/x", "b", "b/y", "b/y/z"] {
            base.items.insert(d.as_bytes().to_vec(), dir());
        }
        for (k, p) in ["a/1", "a/x/2", "b/3", "b/y/4", "b/y/z/5", "top"]
            .iter()
            .enumerate()
        {
            base.items.insert(p.as_bytes().to_vec(), file(k as u8 + 1));
        }
        let full_root = root_of(&mut base.clone(), None).unwrap();
        let mut prev = base.clone();
        prev.trees().unwrap();
        // Nothing changed: no tree recomputed, directory ids kept.
        let mut same = base.clone();
        assert!(same.trees_since(Some(&prev)).unwrap().is_empty());
        assert_eq!(same.items[&b"b/y"[..]].id, prev.items[&b"b/y"[..]].id);
        // Each kind of change gives the root a full pass would.
        type Change = Box<dyn Fn(&mut Flat)>;
        let changes: Vec<Change> = vec![
            Box::new(|f| {
                f.items.insert(b"b/y/z/5".to_vec(), file(99));
            }),
            Box::new(|f| {
                f.items.remove(&b"a/x/2"[..]);
            }),
            Box::new(|f| {
                f.items.insert(b"a/x/new".to_vec(), file(7));
            }),
            Box::new(|f| {
                f.items.get_mut(&b"b"[..]).unwrap().mode = 0o700;
            }),
            Box::new(|f| {
                f.items.remove(&b"b/y/z/5"[..]);
                f.items.remove(&b"b/y/z"[..]);
            }),
        ];
        for change in changes {
            let mut next = base.clone();
            change(&mut next);
            let mut fresh = next.clone();
            let want = root_of(&mut fresh, None).unwrap();
            let got = root_of(&mut next, Some(&prev)).unwrap();
            assert_eq!(got, want);
            assert_ne!(got, full_root);
            assert_eq!(next.items, fresh.items, "directory ids agree");
        }
    }

    #[test]
    fn paths_outside_any_directory_are_refused_by_name() {
        let mut f = Flat::default();
        f.items.insert(b"a/1".to_vec(), file(1));
        let e = f.trees().unwrap_err();
        assert!(matches!(&e, TreesError::NoDirectory { path } if path == "a/1"));
        assert_eq!(e.to_string(), "a/1 is in no directory of the snapshot");
    }

    #[test]
    fn new_empty_directories_get_their_trees_in_every_position() {
        let mut prev = Flat::default();
        prev.items.insert(b"b".to_vec(), file(2));
        prev.items.insert(b"c".to_vec(), file(3));
        prev.items.insert(b"d".to_vec(), dir());
        prev.items.insert(b"d/f".to_vec(), file(4));
        prev.trees().unwrap();
        type Change = Box<dyn Fn(&mut Flat)>;
        let changes: Vec<Change> = vec![
            // A file replaced by an empty directory.
            Box::new(|f| {
                f.items.insert(b"b".to_vec(), dir());
            }),
            // A new empty directory beside files, and one inside another.
            Box::new(|f| {
                f.items.insert(b"e".to_vec(), dir());
                f.items.insert(b"d/e".to_vec(), dir());
            }),
            // Empty directories nested in a new one.
            Box::new(|f| {
                for d in ["n", "n/m", "n/m/o", "n/p"] {
                    f.items.insert(d.as_bytes().to_vec(), dir());
                }
            }),
        ];
        for change in changes {
            let mut next = prev.clone();
            change(&mut next);
            let mut fresh = next.clone();
            let want = root_of(&mut fresh, None).unwrap();
            let got = root_of(&mut next, Some(&prev)).unwrap();
            assert_eq!(got, want);
            assert_eq!(next.items, fresh.items, "directory ids agree");
            // And the snapshot after it, with nothing changed.
            let mut again = next.clone();
            assert!(again.trees_since(Some(&next)).unwrap().is_empty());
        }
    }
}
