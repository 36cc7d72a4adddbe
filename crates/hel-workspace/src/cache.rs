//! The stat cache: per project, what each file's metadata was when its
//! content was last hashed, so that a snapshot does not read unchanged
//! files again, and the paths of the last snapshot with their tree ids,
//! so that a new process does not read its trees back from the store
//! (objects-spec §10.4).
//!
//! A file whose `lstat` (device, inode, mode, size, mtime, ctime) is what
//! the cache holds, and whose mtime is older than the walk that wrote the
//! cache by more than [`RACY_NS`], has the content the cache names. A file
//! written after that walk began gets a newer mtime (the kernel's coarse
//! clock lags by a tick at most), so it cannot look unchanged; one whose
//! mtime is closer to the walk is "racy" and read again (git's racy-git
//! rule, jj's clean rule). Setting the mtime back changes the ctime, which
//! no one can set, so that is a change too.
//!
//! The cache lives in `.hel/workspace/cache` and, like everything under
//! `.hel/`, may come from a hostile repository: it is read bounded, checked
//! whole (a BLAKE3 trailer), and only ever trusted for a file whose inode
//! and ctime it matches, which a cloned or copied file never does. An
//! entry is looked up by the file's device and inode, not its path: the
//! stat it must match names the file whatever path it is reached by, and
//! content belongs to the file (a rename keeps it, a hard link shares it),
//! so this vouches for exactly what a lookup by path would, without a
//! copy of every path in memory. Its
//! paths stand for a snapshot's tree only once they hash to that tree's id
//! ([`Cache::take_last`]): they are the tree's content, not a claim about
//! it. A cache that is missing, damaged, of another version or too large
//! is simply empty. It is written aside and renamed into place without a
//! sync: a torn cache fails its check and costs one full hashing pass and
//! one read of the trees, nothing else.

use crate::Map as HashMap;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd};

use hel_store::tree::{bad_name, EntryKind, DEPTH_MAX, FLAT_BYTES_MAX, FLAT_PATHS_MAX};
use hel_store::ObjectId;
use std::path::Path;

use crate::flat::{Flat, Item, PATH_MAX};
use crate::stat::FileStat;

/// The cache's file name in `.hel/workspace/`.
pub const CACHE_FILE: &str = "cache";

/// How much older than the walk that wrote the cache an entry's mtime must
/// be to be trusted.
pub const RACY_NS: i64 = 1_000_000_000;

/// The largest cache read (about a million paths).
const MAX_BYTES: u64 = 128 << 20;

const MAGIC: &[u8; 8] = b"HELWSC2\n";
const HEADER: usize = 8 + 8 + 32 + 4;
/// An entry's fixed part (the stat of a file aside).
const FIXED: usize = 2 + 2 + 1 + 2 + 8 + 32;
/// A file's stat: st_mode, mtime, ctime, inode, device.
const STAT: usize = 4 + 8 + 8 + 8 + 8;

/// What the cache knows of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    pub stat: FileStat,
    pub id: ObjectId,
}

/// What an entry is looked up by: its file's device and inode.
#[derive(Clone, Copy, Debug)]
struct Inode(u64, u64);

impl std::hash::Hash for Inode {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.hash(h);
        self.1.hash(h);
    }
}

impl PartialEq for Inode {
    fn eq(&self, other: &Inode) -> bool {
        #[cfg(test)]
        tests::COMPARED.with(|c| c.set(c.get() + 1));
        self.0 == other.0 && self.1 == other.1
    }
}

impl Eq for Inode {}

/// A project's stat cache, in memory.
#[derive(Debug, Default)]
pub struct Cache {
    /// What is known of each file, by device and inode.
    entries: Entries,
    /// When the walk that wrote it began (ns since the epoch).
    walk_start_ns: i64,
    /// The cache file's own stat when loaded or saved, to notice another
    /// process saving a newer one.
    file: Option<FileStat>,
    /// The root tree of the snapshot the cache was written with.
    root: Option<ObjectId>,
    /// That snapshot's paths as the file holds them: not checked against
    /// the tree until [`Cache::take_last`].
    last: Option<Flat>,
    /// Every entry's id is known to be a file's of `root` (each entry is a
    /// file of that snapshot with that id): set once [`Cache::take_last`]
    /// has hashed the paths the entries came with into `root`, or by
    /// [`Cache::save`]; never for entries only read from the file.
    proven: bool,
}

impl Cache {
    /// Load the cache from the workspace directory `dir`. Never fails: a
    /// cache that cannot be used is empty.
    pub fn load(dir: BorrowedFd<'_>) -> Cache {
        let Ok(Some((fd, st))) = hel_fs::at::open_regular(dir, CACHE_FILE) else {
            return Cache::default();
        };
        let stat = FileStat::of(&st);
        if stat.size > MAX_BYTES {
            return Cache::default();
        }
        let file = std::fs::File::from(fd);
        let Ok(bytes) = hel_fs::read_to_bound(file, stat.size, MAX_BYTES, Path::new(CACHE_FILE))
        else {
            return Cache::default();
        };
        match parse(&bytes) {
            Some(p) => Cache {
                entries: p.entries,
                walk_start_ns: p.walk_start_ns,
                file: Some(stat),
                root: Some(p.root),
                last: Some(p.flat),
                proven: false,
            },
            None => Cache::default(),
        }
    }

    /// Whether the cache file in `dir` is still the one this was loaded
    /// from or saved as.
    pub fn is_current(&self, dir: BorrowedFd<'_>) -> bool {
        FileStat::at(dir, CACHE_FILE.as_bytes()).ok() == self.file
    }

    /// The content id of the file whose `lstat` is `stat` (at any path),
    /// when the cache may be trusted for it.
    pub fn lookup(&self, stat: &FileStat) -> Option<ObjectId> {
        let k = self.entries.get(stat)?;
        let settled = self.walk_start_ns.saturating_sub(RACY_NS);
        (k.stat == *stat && stat.mtime_ns < settled).then_some(k.id)
    }

    /// The root tree of the snapshot this cache was written with.
    pub fn root(&self) -> Option<ObjectId> {
        self.root
    }

    /// Whether every id this cache vouches for is known to be a file's in
    /// the snapshot whose root tree is `tree`: true once
    /// [`Cache::take_last`] gave that tree's paths, or after a
    /// [`Cache::save`] with that root; a snapshot building on `tree` then
    /// need not look a vouched file's path up to know its content is
    /// stored.
    pub fn ids_are_files_of(&self, tree: &ObjectId) -> bool {
        self.proven && self.root == Some(*tree)
    }

    /// The paths of the snapshot whose root tree is `tree`, when the cache
    /// holds them: only once they make trees whose root is `tree` (every
    /// tree hashed again, nothing read), so they are that tree's paths
    /// whatever wrote the file. Taken: asked again, `None`.
    pub fn take_last(&mut self, tree: &ObjectId) -> Option<Flat> {
        if self.root != Some(*tree) {
            return None;
        }
        let mut flat = self.last.take()?;
        if tree_ids(&mut flat)? != *tree {
            return None;
        }
        // Every entry was parsed from a file item of these paths, with its
        // id: they are files of `tree` now that the paths are.
        self.proven = true;
        Some(flat)
    }

    /// Replace the cache with `entries` from a walk that began at
    /// `walk_start_ns`, and the paths `flat` of the snapshot whose root
    /// tree is `root`, and write it to `dir` (aside, then renamed). Only
    /// an entry whose path is a file of `flat` with its id is kept, in the
    /// file and in memory. A failure to write is returned; the in-memory
    /// cache is replaced either way.
    pub fn save(
        &mut self,
        dir: BorrowedFd<'_>,
        entries: Vec<(Vec<u8>, Known)>,
        walk_start_ns: i64,
        root: ObjectId,
        flat: &Flat,
    ) -> std::io::Result<()> {
        let by_path: HashMap<&[u8], Known> =
            entries.iter().map(|(p, k)| (p.as_slice(), *k)).collect();
        self.entries = Entries::with_capacity(entries.len());
        let bytes = encode(
            &mut |p, item| {
                let k = by_path.get(p).copied().filter(|k| k.id == item.id)?;
                self.entries.insert(k);
                Some(k)
            },
            walk_start_ns,
            &root,
            flat,
        );
        self.walk_start_ns = walk_start_ns;
        self.file = None;
        self.root = Some(root);
        self.last = None;
        self.proven = true;
        let tmp = format!("{CACHE_FILE}.tmp-{}", std::process::id());
        // One left by a process that had this pid and died.
        let _ = rustix::fs::unlinkat(dir, tmp.as_str(), rustix::fs::AtFlags::empty());
        let fd = hel_fs::at::create_new(dir, tmp.as_str(), 0o600)?;
        let file = std::fs::File::from(fd);
        let written = std::io::Write::write_all(&mut &file, &bytes).and_then(|()| {
            rustix::fs::renameat(dir, tmp.as_str(), dir, CACHE_FILE).map_err(Into::into)
        });
        if written.is_err() {
            let _ = rustix::fs::unlinkat(dir, tmp.as_str(), rustix::fs::AtFlags::empty());
        }
        written?;
        self.file = rustix::fs::fstat(file.as_fd())
            .ok()
            .map(|s| FileStat::of(&s));
        Ok(())
    }

    /// The paths whose stat the cache knows.
    pub fn len(&self) -> usize {
        self.entries.paths
    }

    pub fn is_empty(&self) -> bool {
        self.entries.paths == 0
    }
}

/// The cache's entries by their file's device and inode: a small table of
/// indexes into one vector (a lookup touches two places, a load writes the
/// vector in order).
#[derive(Debug, Default)]
struct Entries {
    at: HashMap<Inode, u32>,
    known: Vec<Known>,
    /// The paths inserted.
    paths: usize,
}

/// The index of an inode two entries disagree on (hard links told with
/// another stat or content): it vouches for nothing.
const AMBIGUOUS: u32 = u32::MAX;

impl Entries {
    fn with_capacity(n: usize) -> Entries {
        Entries {
            at: HashMap::with_capacity_and_hasher(n, Default::default()),
            known: Vec::with_capacity(n),
            paths: 0,
        }
    }

    fn insert(&mut self, k: Known) {
        self.paths += 1;
        let next = self.known.len() as u32;
        let at = self.at.entry(Inode(k.stat.dev, k.stat.ino)).or_insert(next);
        if *at == next {
            self.known.push(k);
        } else if *at != AMBIGUOUS && self.known[*at as usize] != k {
            *at = AMBIGUOUS;
        }
    }

    fn get(&self, stat: &FileStat) -> Option<&Known> {
        let at = *self.at.get(&Inode(stat.dev, stat.ino))?;
        self.known.get(at as usize)
    }
}

/// The cache file's bytes: every path of `flat` in order, each stored as
/// the length it shares with the previous one and the rest, a file with
/// the stat `known` gives for its path and item (st_mode 0 when none).
fn encode(
    known: &mut dyn FnMut(&[u8], &Item) -> Option<Known>,
    walk_start_ns: i64,
    root: &ObjectId,
    flat: &Flat,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + flat.items.len() * (FIXED + STAT + 16) + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&walk_start_ns.to_le_bytes());
    out.extend_from_slice(root.as_bytes());
    out.extend_from_slice(&(flat.items.len() as u32).to_le_bytes());
    let mut prev: &[u8] = &[];
    for (path, item) in &flat.items {
        let shared = prev
            .iter()
            .zip(path.iter())
            .take_while(|(a, b)| a == b)
            .count();
        let suffix = &path[shared..];
        out.extend_from_slice(&(shared as u16).to_le_bytes());
        out.extend_from_slice(&(suffix.len() as u16).to_le_bytes());
        out.push(EntryKind::code(item.kind));
        out.extend_from_slice(&item.mode.to_le_bytes());
        out.extend_from_slice(&item.size.to_le_bytes());
        out.extend_from_slice(item.id.as_bytes());
        if item.kind == EntryKind::File {
            // Only a stat taken with this very content may vouch for it.
            let k = known(path, item).filter(|k| k.id == item.id);
            let st = k.map_or(
                FileStat {
                    dev: 0,
                    ino: 0,
                    mode: 0,
                    size: 0,
                    mtime_ns: 0,
                    ctime_ns: 0,
                },
                |k| k.stat,
            );
            out.extend_from_slice(&st.mode.to_le_bytes());
            out.extend_from_slice(&st.mtime_ns.to_le_bytes());
            out.extend_from_slice(&st.ctime_ns.to_le_bytes());
            out.extend_from_slice(&st.ino.to_le_bytes());
            out.extend_from_slice(&st.dev.to_le_bytes());
        }
        out.extend_from_slice(suffix);
        prev = path;
    }
    let check = blake3::hash(&out);
    out.extend_from_slice(check.as_bytes());
    out
}

/// A cache file read back.
struct Parsed {
    walk_start_ns: i64,
    root: ObjectId,
    entries: Entries,
    flat: Flat,
}

/// Parse a cache file: `None` for anything not exactly as [`encode`]
/// writes it, or past what a snapshot may hold.
fn parse(bytes: &[u8]) -> Option<Parsed> {
    let body_len = bytes.len().checked_sub(32)?;
    let (body, check) = bytes.split_at(body_len);
    if blake3::hash(body).as_bytes() != check || body.len() < HEADER || &body[..8] != MAGIC {
        return None;
    }
    let walk_start_ns = i64::from_le_bytes(body[8..16].try_into().ok()?);
    let root = ObjectId::from_bytes(body[16..48].try_into().ok()?);
    let count = u32::from_le_bytes(body[48..52].try_into().ok()?) as usize;
    // Each entry takes at least FIXED bytes: a count the body cannot hold
    // is refused before anything is allocated for it.
    if count > (body.len() - HEADER) / FIXED || count as u64 > FLAT_PATHS_MAX {
        return None;
    }
    let mut entries = Entries::with_capacity(count);
    let mut items: Vec<(Vec<u8>, Item)> = Vec::with_capacity(count);
    let mut at = HEADER;
    let mut path_bytes = 0u64;
    let u64_at = |b: &[u8], k: usize| -> Option<u64> {
        Some(u64::from_le_bytes(b.get(k..k + 8)?.try_into().ok()?))
    };
    for _ in 0..count {
        let prev = items.last().map_or(&[][..], |(p, _)| p.as_slice());
        let f = body.get(at..at + FIXED)?;
        let shared = u16::from_le_bytes([f[0], f[1]]) as usize;
        let suffix_len = u16::from_le_bytes([f[2], f[3]]) as usize;
        let kind = EntryKind::from_code(f[4])?;
        let mode = u16::from_le_bytes([f[5], f[6]]);
        let size = u64_at(f, 7)?;
        let id = ObjectId::from_bytes(f[15..47].try_into().ok()?);
        at += FIXED;
        let stat = if kind == EntryKind::File {
            let s = body.get(at..at + STAT)?;
            at += STAT;
            Some(FileStat {
                mode: u32::from_le_bytes(s[0..4].try_into().ok()?),
                size,
                mtime_ns: u64_at(s, 4)? as i64,
                ctime_ns: u64_at(s, 12)? as i64,
                ino: u64_at(s, 20)?,
                dev: u64_at(s, 28)?,
            })
        } else {
            None
        };
        let suffix = body.get(at..at + suffix_len)?;
        at += suffix_len;
        if shared > prev.len() || suffix.is_empty() {
            return None;
        }
        let mut path = Vec::with_capacity(shared + suffix_len);
        path.extend_from_slice(&prev[..shared]);
        path.extend_from_slice(suffix);
        path_bytes += path.len() as u64;
        // The components before the last `/` of the shared part are the
        // previous path's, found valid already.
        let checked = prev[..shared]
            .iter()
            .rposition(|&c| c == b'/')
            .map_or(0, |k| k + 1);
        if path.as_slice() <= prev
            || path.len() > PATH_MAX
            || path_bytes > FLAT_BYTES_MAX
            || !valid_path(&path, checked)
        {
            return None;
        }
        if let Some(stat) = stat.filter(|s| s.mode != 0) {
            // A stat that is not a regular file's with this item's bits
            // vouches for nothing.
            if !stat.is_file() || stat.perm() != mode {
                return None;
            }
            entries.insert(Known { stat, id });
        }
        items.push((
            path,
            Item {
                kind,
                mode,
                size,
                id,
            },
        ));
    }
    if at != body.len() {
        return None;
    }
    Some(Parsed {
        walk_start_ns,
        root,
        entries,
        // Sorted already: built in one pass.
        flat: Flat {
            items: items.into_iter().collect::<BTreeMap<_, _>>(),
        },
    })
}

/// Compute the tree of every directory of `flat` (each directory item
/// given its tree's id, whatever it held) and return the root's id: what
/// [`Flat::trees`] computes, without building the trees. A directory's
/// entries are its children in path order (names sort as the paths that
/// end in them), so each directory's payload is written as its children
/// pass, a subdirectory's id left to fill in; then the directories in
/// reverse path order (every subdirectory after its parent in path order,
/// so its id is known first) are hashed and their ids filled in.
/// `None` when a path is in no directory item.
fn tree_ids(flat: &mut Flat) -> Option<ObjectId> {
    use hel_store::tree::push_entry;
    // The directory items in path order (their ordinals), the root last.
    let dirs = flat
        .items
        .values()
        .filter(|i| i.kind == EntryKind::Dir)
        .count();
    let root = dirs;
    let mut ordinal: HashMap<&[u8], usize> =
        HashMap::with_capacity_and_hasher(dirs, Default::default());
    let mut payloads: Vec<Vec<u8>> = vec![Vec::new(); dirs + 1];
    // Each directory's parent and where its id goes in the parent's payload.
    let mut slot: Vec<(usize, usize)> = Vec::with_capacity(dirs);
    for (path, item) in &flat.items {
        let (dir, name) = crate::flat::split(path);
        let parent = match dir.is_empty() {
            true => root,
            false => *ordinal.get(dir)?,
        };
        let at = push_entry(
            &mut payloads[parent],
            item.kind,
            item.mode,
            item.size,
            &item.id,
            name,
        );
        if item.kind == EntryKind::Dir {
            ordinal.insert(path, slot.len());
            slot.push((parent, at));
        }
    }
    let mut ids = vec![ObjectId::ZERO; dirs];
    for k in (0..dirs).rev() {
        let id = hel_store::tree_payload_id(&payloads[k]);
        let (parent, at) = slot[k];
        payloads[parent][at..at + 32].copy_from_slice(id.as_bytes());
        ids[k] = id;
    }
    let root_id = hel_store::tree_payload_id(&payloads[root]);
    let dir_items = flat.items.values_mut().filter(|i| i.kind == EntryKind::Dir);
    for (item, id) in dir_items.zip(ids) {
        item.id = id;
    }
    Some(root_id)
}

/// No deeper than a tree may nest, and every component from `path[checked..]`
/// on a tree name (`checked` is 0 or just after a `/`: the components
/// before it were checked in a path that shares them).
fn valid_path(path: &[u8], checked: usize) -> bool {
    let depth = path.iter().filter(|&&c| c == b'/').count() + 1;
    depth < DEPTH_MAX
        && path[checked..]
            .split(|&c| c == b'/')
            .all(|c| bad_name(c).is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Inodes compared by this thread's maps.
        pub(super) static COMPARED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    /// A cache from a hostile repository whose entries' inodes all hash
    /// alike under a fixed hash (rustc-hash's, which these maps used)
    /// loads in linear time: its map is seeded per process. With the
    /// fixed hash each insert compared the inode with every one before:
    /// 12.5 million comparisons for these 5,000, 1.25 billion (1.4 s) for
    /// 50,000, and a million, what a cache may hold, 400 times that.
    #[test]
    fn a_crafted_cache_cannot_make_its_load_quadratic() {
        use std::hash::BuildHasher;
        const K: u64 = 0xf1357aea2e62a9c5;
        let n = 5_000u64;
        // rustc-hash 2 hashes (dev, ino) as ((dev * K) + ino) * K: one sum
        // for every dev.
        let inode = |d: u64| Inode(d, 77u64.wrapping_sub(d.wrapping_mul(K)));
        let fixed = rustc_hash::FxBuildHasher;
        let h = fixed.hash_one(inode(1));
        assert!((2..=n).all(|d| fixed.hash_one(inode(d)) == h));
        let mut f = Flat::default();
        let mut by_path = HashMap::default();
        for d in 1..=n {
            let Inode(dev, ino) = inode(d);
            let k = Known {
                stat: FileStat {
                    dev,
                    ino,
                    mode: 0o100644,
                    size: 1,
                    mtime_ns: 0,
                    ctime_ns: 0,
                },
                id: ObjectId::from_bytes([7; 32]),
            };
            let path = format!("f{d:05}").into_bytes();
            let item = Item {
                kind: EntryKind::File,
                mode: 0o644,
                size: 1,
                id: k.id,
            };
            f.items.insert(path.clone(), item);
            by_path.insert(path, k);
        }
        let bytes = encode(
            &mut |p, _| by_path.get(p).copied(),
            RACY_NS * 10,
            &ObjectId::ZERO,
            &f,
        );
        COMPARED.with(|c| c.set(0));
        let p = parse(&bytes).unwrap();
        let compared = COMPARED.with(|c| c.get());
        assert_eq!(p.entries.known.len(), n as usize);
        assert!(compared < 4 * n, "{compared} comparisons for {n} entries");
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_specified_cache_file_is_read_and_written_byte_for_byte() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../objects-spec/workspace-vectors.json"))
                .unwrap();
        let c = &doc["cache"];
        let bytes = hex(c["hex"].as_str().unwrap());
        let p = parse(&bytes).unwrap();
        assert_eq!(p.walk_start_ns, c["walk_start_ns"].as_i64().unwrap());
        assert_eq!(p.root.to_hex(), c["root"].as_str().unwrap());
        assert_eq!(p.flat.items.len() as u64, c["paths"].as_u64().unwrap());
        assert_eq!(p.entries.paths, c["entries"].as_array().unwrap().len());
        let mut by_path = HashMap::default();
        for e in c["entries"].as_array().unwrap() {
            let n = |f: &str| e[f].as_u64().unwrap();
            let k = Known {
                stat: FileStat {
                    dev: n("dev"),
                    ino: n("ino"),
                    mode: n("mode") as u32,
                    size: n("size"),
                    mtime_ns: n("mtime_ns") as i64,
                    ctime_ns: n("ctime_ns") as i64,
                },
                id: ObjectId::from_bytes(hex(e["id"].as_str().unwrap()).try_into().unwrap()),
            };
            // Found by its file's device and inode, every field as told.
            assert_eq!(p.entries.get(&k.stat), Some(&k));
            by_path.insert(e["path"].as_str().unwrap().as_bytes().to_vec(), k);
        }
        assert_eq!(p.entries.known.len(), by_path.len());
        let again = encode(
            &mut |p, _| by_path.get(p).copied(),
            p.walk_start_ns,
            &p.root,
            &p.flat,
        );
        assert_eq!(again, bytes);
        // Its paths are the root tree's: they stand for it.
        let root = p.root;
        let mut cache = Cache {
            root: Some(root),
            last: Some(p.flat.clone()),
            ..Cache::default()
        };
        let flat = cache.take_last(&root).unwrap();
        let src = doc["trees"][0]["id"].as_str().unwrap();
        assert_eq!(flat.items[&b"src"[..]].id.to_hex(), src);
        assert!(cache.take_last(&root).is_none(), "taken");
    }

    fn known(n: u8, mtime_ns: i64) -> Known {
        Known {
            stat: FileStat {
                dev: 1,
                ino: n as u64,
                mode: 0o100644,
                size: 10,
                mtime_ns,
                ctime_ns: mtime_ns,
            },
            id: ObjectId::from_bytes([n; 32]),
        }
    }

    /// The paths of a snapshot holding `entries` (and their directories),
    /// with the tree ids they make.
    fn flat_of(entries: &HashMap<Vec<u8>, Known>) -> (ObjectId, Flat) {
        let mut flat = Flat::default();
        for (path, k) in entries {
            let mut p = path.as_slice();
            while let Some(i) = p.iter().rposition(|&c| c == b'/') {
                p = &p[..i];
                let dir = Item {
                    kind: EntryKind::Dir,
                    mode: 0o755,
                    size: 0,
                    id: ObjectId::ZERO,
                };
                flat.items.insert(p.to_vec(), dir);
            }
            let item = Item {
                kind: EntryKind::File,
                mode: k.stat.perm(),
                size: k.stat.size,
                id: k.id,
            };
            flat.items.insert(path.clone(), item);
        }
        let trees = flat.trees().unwrap();
        (trees.last().unwrap().2, flat)
    }

    /// A cache of `entries` saved in `fd` as a walk that began at `start`
    /// saves it, with the last snapshot's paths those of `entries`.
    fn saved(fd: BorrowedFd<'_>, entries: &HashMap<Vec<u8>, Known>, start: i64) -> Cache {
        let (root, flat) = flat_of(entries);
        let mut c = Cache::default();
        c.save(
            fd,
            entries.clone().into_iter().collect(),
            start,
            root,
            &flat,
        )
        .unwrap();
        c
    }

    #[test]
    fn round_trip_racy_rule_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let fd = hel_fs::at::open_dir_path(dir.path()).unwrap();
        let start = 100 * RACY_NS;
        let mut entries = HashMap::default();
        entries.insert(b"a/b.txt".to_vec(), known(1, start - 2 * RACY_NS));
        entries.insert(b"a/c.txt".to_vec(), known(2, start - RACY_NS / 2));
        let (root, flat) = flat_of(&entries);
        saved(fd.as_fd(), &entries, start);
        let mut c = Cache::load(fd.as_fd());
        assert_eq!(c.len(), 2);
        assert!(c.is_current(fd.as_fd()));
        let old = known(1, start - 2 * RACY_NS);
        assert_eq!(c.lookup(&old.stat), Some(old.id));
        // Racy: modified less than RACY_NS before the walk.
        let racy = known(2, start - RACY_NS / 2);
        assert_eq!(c.lookup(&racy.stat), None);
        // Any field different: not trusted.
        let mut moved = old.stat;
        moved.ino += 1;
        assert_eq!(c.lookup(&moved), None);
        // The paths stand for their tree only.
        assert_eq!(c.root(), Some(root));
        assert!(c.take_last(&ObjectId::from_bytes([9; 32])).is_none());
        assert_eq!(c.take_last(&root), Some(flat.clone()));
        // A damaged or hostile file is an empty cache.
        let path = dir.path().join(CACHE_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[60] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(Cache::load(fd.as_fd()).is_empty());
        let mut hostile = encode(&mut |p, _| entries.get(p).copied(), start, &root, &flat);
        hostile.truncate(HEADER);
        hostile[48..52].copy_from_slice(&u32::MAX.to_le_bytes());
        let check = blake3::hash(&hostile);
        hostile.extend_from_slice(check.as_bytes());
        assert!(parse(&hostile).is_none());
        let mut bad = HashMap::default();
        bad.insert(b"x/.git/config".to_vec(), known(3, 0));
        let (_, bad_flat) = {
            let mut f = Flat::default();
            f.items.insert(
                b"x/.git/config".to_vec(),
                Item {
                    kind: EntryKind::File,
                    mode: 0o644,
                    size: 10,
                    id: ObjectId::from_bytes([3; 32]),
                },
            );
            (ObjectId::ZERO, f)
        };
        assert!(parse(&encode(
            &mut |p, _| bad.get(p).copied(),
            start,
            &root,
            &bad_flat
        ))
        .is_none());
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        assert!(Cache::load(fd.as_fd()).is_empty());
    }

    /// A cache's ids are files of a tree only once its paths were hashed
    /// into that tree, or it was saved with it as root; a saved entry whose
    /// id is not its path's file's is dropped, in memory as on disk.
    #[test]
    fn ids_are_files_of_a_tree_only_once_shown() {
        let dir = tempfile::tempdir().unwrap();
        let fd = hel_fs::at::open_dir_path(dir.path()).unwrap();
        let start = 100 * RACY_NS;
        let mut entries = HashMap::default();
        entries.insert(b"a/b.txt".to_vec(), known(1, 0));
        entries.insert(b"c.txt".to_vec(), known(2, 0));
        let (root, flat) = flat_of(&entries);
        let other = ObjectId::from_bytes([9; 32]);
        let c = saved(fd.as_fd(), &entries, start);
        assert!(c.ids_are_files_of(&root));
        assert!(!c.ids_are_files_of(&other));
        // Read back, the file's claim is not taken until its paths make
        // the tree.
        let mut c = Cache::load(fd.as_fd());
        assert!(!c.ids_are_files_of(&root));
        assert!(c.take_last(&other).is_none());
        assert!(!c.ids_are_files_of(&root));
        assert!(c.take_last(&root).is_some());
        assert!(c.ids_are_files_of(&root));
        // An entry told with content its path does not hold vouches for
        // nothing, here or read back.
        let mut told: Vec<(Vec<u8>, Known)> = entries.clone().into_iter().collect();
        let stray = known(3, 0);
        told.push((b"c.txt".to_vec(), stray));
        told.retain(|(p, k)| p != b"c.txt" || k.id == stray.id);
        let mut c = Cache::default();
        c.save(fd.as_fd(), told, start, root, &flat).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c.lookup(&stray.stat), None, "in memory");
        assert_eq!(c.lookup(&known(1, 0).stat), Some(known(1, 0).id));
        let c = Cache::load(fd.as_fd());
        assert_eq!(c.len(), 1);
        assert_eq!(c.lookup(&stray.stat), None, "read back");
    }

    /// A name a tree cannot hold is refused wherever the shared prefix
    /// cuts it: `.gi` then `.git/x` shares `d/.gi`.
    #[test]
    fn a_bad_name_across_the_shared_prefix_is_refused() {
        let item = |kind, id: u8| Item {
            kind,
            mode: if kind == EntryKind::Dir { 0o755 } else { 0o644 },
            size: if kind == EntryKind::Dir { 0 } else { 10 },
            id: ObjectId::from_bytes([id; 32]),
        };
        let mut f = Flat::default();
        f.items.insert(b"d".to_vec(), item(EntryKind::Dir, 5));
        f.items.insert(b"d/.gi".to_vec(), item(EntryKind::File, 1));
        let good = encode(&mut |_, _| None, 0, &ObjectId::ZERO, &f);
        assert!(parse(&good).is_some());
        f.items.insert(b"d/.git".to_vec(), item(EntryKind::Dir, 6));
        f.items
            .insert(b"d/.git/x".to_vec(), item(EntryKind::File, 2));
        assert!(parse(&encode(&mut |_, _| None, 0, &ObjectId::ZERO, &f)).is_none());
        f.items.remove(&b"d/.git"[..]);
        assert!(parse(&encode(&mut |_, _| None, 0, &ObjectId::ZERO, &f)).is_none());
    }

    /// Entries are found by their file's device and inode: two paths of
    /// one file (hard links) that agree vouch for it at either path (and
    /// a rename keeps what it vouches for); two that disagree vouch for
    /// nothing.
    #[test]
    fn an_inode_two_entries_disagree_on_vouches_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let fd = hel_fs::at::open_dir_path(dir.path()).unwrap();
        let start = 100 * RACY_NS;
        let one = known(1, 0);
        let mut entries = HashMap::default();
        entries.insert(b"a.txt".to_vec(), one);
        entries.insert(b"b/link.txt".to_vec(), one);
        entries.insert(b"c.txt".to_vec(), known(2, 0));
        saved(fd.as_fd(), &entries, start);
        let c = Cache::load(fd.as_fd());
        assert_eq!(c.len(), 3);
        assert_eq!(c.lookup(&one.stat), Some(one.id));
        // The same inode told with another content at the other path.
        let mut other = one;
        other.id = ObjectId::from_bytes([8; 32]);
        entries.insert(b"b/link.txt".to_vec(), other);
        let c = saved(fd.as_fd(), &entries, start);
        assert_eq!(c.lookup(&one.stat), None, "in memory");
        let c = Cache::load(fd.as_fd());
        assert_eq!(c.len(), 3);
        assert_eq!(c.lookup(&one.stat), None, "read back");
        assert_eq!(c.lookup(&known(2, 0).stat), Some(known(2, 0).id));
    }

    /// The trees a cache's paths make, computed in one pass, are the ones
    /// [`Flat::trees`] builds: with names that sort before and after `/`
    /// (`x-y`, `x.y`, `x0` beside `x/…`), empty directories, symlinks and
    /// not-tracked entries, at several depths.
    #[test]
    fn tree_ids_are_the_trees_a_snapshot_builds() {
        let item = |kind, n: u8| Item {
            kind,
            mode: if kind == EntryKind::Dir { 0o755 } else { 0o644 },
            size: if kind == EntryKind::Dir { 0 } else { n as u64 },
            id: match kind {
                EntryKind::Dir | EntryKind::NotTracked => ObjectId::ZERO,
                _ => ObjectId::from_bytes([n; 32]),
            },
        };
        let mut flat = Flat::default();
        let paths: &[(&str, EntryKind)] = &[
            ("x", EntryKind::Dir),
            ("x/a", EntryKind::File),
            ("x/b", EntryKind::Dir),
            ("x/b/c", EntryKind::File),
            ("x/b.c", EntryKind::File),
            ("x/b-c", EntryKind::Dir),
            ("x/b-c/d", EntryKind::Symlink),
            ("x/empty", EntryKind::Dir),
            ("x-y", EntryKind::File),
            ("x.y", EntryKind::Dir),
            ("x.y/z", EntryKind::NotTracked),
            ("x0", EntryKind::File),
            ("y", EntryKind::Dir),
            ("y/y", EntryKind::Dir),
            ("y/y/y", EntryKind::Dir),
            ("y/y/y/y", EntryKind::File),
        ];
        for (k, (p, kind)) in paths.iter().enumerate() {
            flat.items
                .insert(p.as_bytes().to_vec(), item(*kind, k as u8 + 1));
        }
        let mut built = flat.clone();
        let trees = built.trees().unwrap();
        let root = trees.last().unwrap().2;
        let mut ours = flat.clone();
        assert_eq!(tree_ids(&mut ours), Some(root));
        assert_eq!(ours, built, "every directory item given its tree's id");
        for (dir, _, id) in &trees {
            if !dir.is_empty() {
                assert_eq!(ours.items[dir].id, *id);
            }
        }
        // A path in no directory item makes no trees.
        let mut orphan = flat.clone();
        orphan
            .items
            .insert(b"x0/a".to_vec(), item(EntryKind::File, 9));
        assert_eq!(tree_ids(&mut orphan), None);
        let mut orphan = flat;
        orphan
            .items
            .insert(b"q/a".to_vec(), item(EntryKind::File, 9));
        assert_eq!(tree_ids(&mut orphan), None);
    }

    /// A file that claims a tree's id but holds other paths (a hostile or
    /// stale cache) is never taken for that tree: the next process reads
    /// the tree from the store instead.
    #[test]
    fn paths_that_do_not_make_the_tree_they_name_are_not_taken() {
        let mut entries = HashMap::default();
        entries.insert(b"a/b.txt".to_vec(), known(1, 0));
        entries.insert(b"c.txt".to_vec(), known(2, 0));
        let (root, flat) = flat_of(&entries);
        type Lie = Box<dyn Fn(&mut Flat)>;
        let lies: Vec<Lie> = vec![
            // Another file's content at a path.
            Box::new(|f| {
                f.items.get_mut(&b"c.txt"[..]).unwrap().id = ObjectId::from_bytes([7; 32]);
            }),
            // A path left out, one added.
            Box::new(|f| {
                f.items.remove(&b"c.txt"[..]);
            }),
            Box::new(|f| {
                let i = f.items[&b"c.txt"[..]];
                f.items.insert(b"d.txt".to_vec(), i);
            }),
            // A mode.
            Box::new(|f| {
                f.items.get_mut(&b"a/b.txt"[..]).unwrap().mode = 0o755;
            }),
        ];
        for lie in lies {
            let mut told = flat.clone();
            lie(&mut told);
            let bytes = encode(&mut |p, _| entries.get(p).copied(), 0, &root, &told);
            // A mode its stat contradicts is refused whole already.
            let Some(p) = parse(&bytes) else { continue };
            let mut c = Cache {
                root: Some(p.root),
                last: Some(p.flat),
                ..Cache::default()
            };
            assert!(c.take_last(&root).is_none(), "{told:?}");
        }
        // A directory's tree id is computed, never taken from the file.
        let mut told = flat.clone();
        told.items.get_mut(&b"a"[..]).unwrap().id = ObjectId::from_bytes([7; 32]);
        let p = parse(&encode(
            &mut |p, _| entries.get(p).copied(),
            0,
            &root,
            &told,
        ))
        .unwrap();
        let mut c = Cache {
            root: Some(p.root),
            last: Some(p.flat),
            ..Cache::default()
        };
        assert_eq!(c.take_last(&root), Some(flat));
    }
}
