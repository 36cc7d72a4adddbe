//! The stat cache: per project, what each file's metadata was when its
//! content was last hashed, so that a snapshot does not read unchanged
//! files again (objects-spec §13.4).
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
//! and ctime it matches, which a cloned or copied file never does. A cache
//! that is missing, damaged or too large is simply empty. It is written
//! aside and renamed into place without a sync: a torn cache fails its
//! check and costs one full hashing pass, nothing else.

use rustc_hash::FxHashMap as HashMap;
use std::os::fd::{AsFd, BorrowedFd};

use hel_store::tree::bad_name;
use hel_store::ObjectId;
use std::path::Path;

use crate::flat::PATH_MAX;
use crate::stat::FileStat;

/// The cache's file name in `.hel/workspace/`.
pub const CACHE_FILE: &str = "cache";

/// How much older than the walk that wrote the cache an entry's mtime must
/// be to be trusted.
pub const RACY_NS: i64 = 1_000_000_000;

/// The largest cache read (about a million files).
const MAX_BYTES: u64 = 128 << 20;

const MAGIC: &[u8; 8] = b"HELWSC1\n";
const HEADER: usize = 8 + 8 + 4;
const FIXED: usize = 2 + 2 + 2 + 8 + 8 + 8 + 8 + 8 + 32;

/// What the cache knows of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    pub stat: FileStat,
    pub id: ObjectId,
}

/// A project's stat cache, in memory.
#[derive(Debug, Default)]
pub struct Cache {
    entries: HashMap<Vec<u8>, Known>,
    /// When the walk that wrote it began (ns since the epoch).
    walk_start_ns: i64,
    /// The cache file's own stat when loaded or saved, to notice another
    /// process saving a newer one.
    file: Option<FileStat>,
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
            Some((walk_start_ns, entries)) => Cache {
                entries,
                walk_start_ns,
                file: Some(stat),
            },
            None => Cache::default(),
        }
    }

    /// Whether the cache file in `dir` is still the one this was loaded
    /// from or saved as.
    pub fn is_current(&self, dir: BorrowedFd<'_>) -> bool {
        FileStat::at(dir, CACHE_FILE.as_bytes()).ok() == self.file
    }

    /// The content id of the file at `path` whose `lstat` is `stat`, when
    /// the cache may be trusted for it.
    pub fn lookup(&self, path: &[u8], stat: &FileStat) -> Option<ObjectId> {
        let k = self.entries.get(path)?;
        let settled = self.walk_start_ns.saturating_sub(RACY_NS);
        (k.stat == *stat && stat.mtime_ns < settled).then_some(k.id)
    }

    /// Replace the cache with `entries` from a walk that began at
    /// `walk_start_ns`, and write it to `dir` (aside, then renamed). A
    /// failure to write is returned; the in-memory cache is replaced
    /// either way.
    pub fn save(
        &mut self,
        dir: BorrowedFd<'_>,
        entries: Vec<(Vec<u8>, Known)>,
        walk_start_ns: i64,
    ) -> std::io::Result<()> {
        self.entries = entries.into_iter().collect();
        self.walk_start_ns = walk_start_ns;
        self.file = None;
        let bytes = encode(&self.entries, walk_start_ns);
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

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The cache file's bytes: entries sorted by path, each path stored as
/// the length it shares with the previous one and the rest.
fn encode(entries: &HashMap<Vec<u8>, Known>, walk_start_ns: i64) -> Vec<u8> {
    let mut sorted: Vec<(&Vec<u8>, &Known)> = entries.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::with_capacity(HEADER + sorted.len() * (FIXED + 16) + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&walk_start_ns.to_le_bytes());
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    let mut prev: &[u8] = &[];
    for (path, k) in sorted {
        let shared = prev
            .iter()
            .zip(path.iter())
            .take_while(|(a, b)| a == b)
            .count();
        let suffix = &path[shared..];
        out.extend_from_slice(&(shared as u16).to_le_bytes());
        out.extend_from_slice(&(suffix.len() as u16).to_le_bytes());
        out.extend_from_slice(&(k.stat.mode as u16).to_le_bytes());
        out.extend_from_slice(&k.stat.size.to_le_bytes());
        out.extend_from_slice(&k.stat.mtime_ns.to_le_bytes());
        out.extend_from_slice(&k.stat.ctime_ns.to_le_bytes());
        out.extend_from_slice(&k.stat.ino.to_le_bytes());
        out.extend_from_slice(&k.stat.dev.to_le_bytes());
        out.extend_from_slice(k.id.as_bytes());
        out.extend_from_slice(suffix);
        prev = path;
    }
    let check = blake3::hash(&out);
    out.extend_from_slice(check.as_bytes());
    out
}

/// Parse a cache file: `None` for anything not exactly as [`encode`]
/// writes it.
fn parse(bytes: &[u8]) -> Option<(i64, HashMap<Vec<u8>, Known>)> {
    let body_len = bytes.len().checked_sub(32)?;
    let (body, check) = bytes.split_at(body_len);
    if blake3::hash(body).as_bytes() != check || body.len() < HEADER || &body[..8] != MAGIC {
        return None;
    }
    let walk_start_ns = i64::from_le_bytes(body[8..16].try_into().ok()?);
    let count = u32::from_le_bytes(body[16..20].try_into().ok()?) as usize;
    // Each entry takes at least FIXED bytes: a count the body cannot hold
    // is refused before anything is allocated for it.
    if count > (body.len() - HEADER) / FIXED {
        return None;
    }
    let mut entries = HashMap::with_capacity_and_hasher(count, Default::default());
    let mut prev: Vec<u8> = Vec::new();
    let mut at = HEADER;
    let u64_at = |b: &[u8], k: usize| -> Option<u64> {
        Some(u64::from_le_bytes(b.get(k..k + 8)?.try_into().ok()?))
    };
    for _ in 0..count {
        let f = body.get(at..at + FIXED)?;
        let shared = u16::from_le_bytes([f[0], f[1]]) as usize;
        let suffix_len = u16::from_le_bytes([f[2], f[3]]) as usize;
        let mode = u16::from_le_bytes([f[4], f[5]]) as u32;
        let size = u64_at(f, 6)?;
        let mtime_ns = u64_at(f, 14)? as i64;
        let ctime_ns = u64_at(f, 22)? as i64;
        let ino = u64_at(f, 30)?;
        let dev = u64_at(f, 38)?;
        let id = ObjectId::from_bytes(f[46..78].try_into().ok()?);
        at += FIXED;
        let suffix = body.get(at..at + suffix_len)?;
        at += suffix_len;
        if shared > prev.len() || suffix.is_empty() {
            return None;
        }
        let mut path = prev[..shared].to_vec();
        path.extend_from_slice(suffix);
        if path <= prev || path.len() > PATH_MAX || !valid_path(&path) {
            return None;
        }
        entries.insert(
            path.clone(),
            Known {
                stat: FileStat {
                    dev,
                    ino,
                    mode,
                    size,
                    mtime_ns,
                    ctime_ns,
                },
                id,
            },
        );
        prev = path;
    }
    (at == body.len()).then_some((walk_start_ns, entries))
}

fn valid_path(path: &[u8]) -> bool {
    path.split(|&c| c == b'/').all(|c| bad_name(c).is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specified_cache_file_is_read_and_written_byte_for_byte() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../objects-spec/workspace-vectors.json"))
                .unwrap();
        let c = &doc["cache"];
        let bytes: Vec<u8> = (0..c["hex"].as_str().unwrap().len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&c["hex"].as_str().unwrap()[i..i + 2], 16).unwrap())
            .collect();
        let (walk_start, entries) = parse(&bytes).unwrap();
        assert_eq!(walk_start, c["walk_start_ns"].as_i64().unwrap());
        for e in c["entries"].as_array().unwrap() {
            let k = &entries[e["path"].as_str().unwrap().as_bytes()];
            assert_eq!(k.id.to_hex(), e["id"].as_str().unwrap());
            assert_eq!(k.stat.mode as u64, e["mode"].as_u64().unwrap());
            assert_eq!(k.stat.mtime_ns, e["mtime_ns"].as_i64().unwrap());
            assert_eq!(k.stat.ino, e["ino"].as_u64().unwrap());
        }
        assert_eq!(encode(&entries, walk_start), bytes);
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

    #[test]
    fn round_trip_racy_rule_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let fd = hel_fs::at::open_dir_path(dir.path()).unwrap();
        let start = 100 * RACY_NS;
        let mut entries = HashMap::default();
        entries.insert(b"a/b.txt".to_vec(), known(1, start - 2 * RACY_NS));
        entries.insert(b"a/c.txt".to_vec(), known(2, start - RACY_NS / 2));
        let mut c = Cache::default();
        c.save(fd.as_fd(), entries.clone().into_iter().collect(), start)
            .unwrap();
        let c = Cache::load(fd.as_fd());
        assert_eq!(c.len(), 2);
        assert!(c.is_current(fd.as_fd()));
        let old = known(1, start - 2 * RACY_NS);
        assert_eq!(c.lookup(b"a/b.txt", &old.stat), Some(old.id));
        // Racy: modified less than RACY_NS before the walk.
        let racy = known(2, start - RACY_NS / 2);
        assert_eq!(c.lookup(b"a/c.txt", &racy.stat), None);
        // Any field different: not trusted.
        let mut moved = old.stat;
        moved.ino += 1;
        assert_eq!(c.lookup(b"a/b.txt", &moved), None);
        // A damaged or hostile file is an empty cache.
        let path = dir.path().join(CACHE_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[30] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(Cache::load(fd.as_fd()).is_empty());
        let mut hostile = encode(&entries, start);
        hostile.truncate(HEADER);
        hostile[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        let check = blake3::hash(&hostile);
        hostile.extend_from_slice(check.as_bytes());
        assert!(parse(&hostile).is_none());
        let mut bad = HashMap::default();
        bad.insert(b"x/.git/config".to_vec(), known(3, 0));
        assert!(parse(&encode(&bad, start)).is_none());
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        assert!(Cache::load(fd.as_fd()).is_empty());
    }
}
