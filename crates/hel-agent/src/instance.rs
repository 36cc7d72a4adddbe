//! The instance runtime: `<system tmp>/hel-runs-<uid>/<uuid>/{tmp,spill,.active}`.
//!
//! The root belongs to one user and is private (0700, owned by them, not a
//! symbolic link). `.active` is locked by hel alone for the life of its
//! instance: its descriptor is close-on-exec, as every one hel opens, and
//! a command starts with stdin, stdout and stderr only, so no command holds
//! it or keeps an instance alive; what commands start ends with the
//! instance (the sandbox's PID namespace, or with `--no-sandbox` the
//! command's process group). An instance directory is built and
//! locked under a `.new-<uuid>` name, which cleanup leaves alone while it is
//! young, and then renamed into place: every `<uuid>` directory a cleanup
//! sees is complete, and a cleanup removes only what it holds the lock of.

use std::fs::{self, DirBuilder, File};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rustix::io::Errno;

/// Spill of dead instances older than this is removed at a later start.
const SPILL_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// A `.new-<uuid>` directory this old is a start that crashed.
const STALE_START: Duration = Duration::from_secs(5 * 60);
/// The name of the staging directory of an instance being created.
const STAGING: &str = ".new-";
/// The lock file of an instance.
const ACTIVE: &str = ".active";
/// An instance's own temporary directory (`$TMPDIR` of its commands).
const TMP: &str = "tmp";
/// An instance's spill directory (runs without a session).
const SPILL: &str = "spill";
/// Entries of the runtime root one start examines for cleanup.
const CLEAN_PER_START: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is a symbolic link, not hel's own directory; remove it", .0.display())]
    Symlink(PathBuf),
    #[error("{} is not a directory; remove it", .0.display())]
    NotDir(PathBuf),
    #[error("{} belongs to uid {owner}, not to you (uid {me}); remove it or set TMPDIR", path.display())]
    Foreign { path: PathBuf, owner: u32, me: u32 },
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> InstanceError + '_ {
    move |source| InstanceError::Io {
        path: path.to_owned(),
        source,
    }
}

pub(crate) struct Instance {
    pub dir: PathBuf,
    lock: File,
}

/// This user's instance runtime root: `<system tmp>/hel-runs-<euid>`.
pub(crate) fn runtime_root() -> PathBuf {
    std::env::temp_dir().join(format!("hel-runs-{}", rustix::process::geteuid().as_raw()))
}

impl Instance {
    /// Create this process's instance under [`runtime_root`], after
    /// cleaning up dead instances.
    pub(crate) fn start() -> Result<Instance, InstanceError> {
        Self::start_in(&runtime_root())
    }

    /// Create an instance under `root` (made private to this user if new,
    /// refused if it is a symbolic link or someone else's).
    pub(crate) fn start_in(root: &Path) -> Result<Instance, InstanceError> {
        ensure_root(root)?;
        clean_dead(root);
        let mut tries = 0;
        loop {
            match create(root) {
                Ok(i) => return Ok(i),
                // A name collision or a cleanup that took a very slow start
                // for a crashed one: try again under a new name.
                Err(_) if tries < 2 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    pub(crate) fn tmp(&self) -> PathBuf {
        self.dir.join(TMP)
    }

    pub(crate) fn spill(&self) -> PathBuf {
        self.dir.join(SPILL)
    }

    /// Remove tmp, and the whole directory unless spill remains (spill of
    /// a session-less run stays for 24 hours). Called at exit and Ctrl-C,
    /// after the sandbox (and every command) is gone.
    pub(crate) fn finish(&self) {
        if remove_tree(&self.tmp()).is_err() || !dir_is_empty(&self.spill()) {
            return; // .active stays, so a later cleanup can take it
        }
        let _ = fs::remove_dir(self.spill());
        let _ = fs::remove_file(self.dir.join(ACTIVE));
        let _ = fs::remove_dir(&self.dir);
        let _ = &self.lock; // held until here, released when dropped
    }
}

/// Create (or check) the runtime root: a directory owned by us, mode 0700.
fn ensure_root(root: &Path) -> Result<(), InstanceError> {
    match DirBuilder::new().mode(0o700).create(root) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_at(root)(e)),
    }
    let meta = fs::symlink_metadata(root).map_err(io_at(root))?;
    if meta.file_type().is_symlink() {
        return Err(InstanceError::Symlink(root.to_owned()));
    }
    // Checked on an open descriptor that cannot follow a swapped-in link.
    let dir = hel_fs::at::open_dir_path(root)
        .map(File::from)
        .map_err(|e| match e {
            Errno::LOOP => InstanceError::Symlink(root.to_owned()),
            Errno::NOTDIR => InstanceError::NotDir(root.to_owned()),
            e => io_at(root)(e.into()),
        })?;
    let meta = dir.metadata().map_err(io_at(root))?;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(InstanceError::Foreign {
            path: root.to_owned(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o7777 != 0o700 {
        dir.set_permissions(fs::Permissions::from_mode(0o700))
            .map_err(io_at(root))?;
    }
    Ok(())
}

/// Build `.new-<uuid>` with its locked `.active`, then rename it to `<uuid>`.
fn create(root: &Path) -> Result<Instance, InstanceError> {
    let id = uuid::Uuid::new_v4().to_string();
    let staging = root.join(format!("{STAGING}{id}"));
    DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .map_err(io_at(&staging))?;
    let built = (|| {
        let active = staging.join(ACTIVE);
        let lock = hel_fs::at::create_new(rustix::fs::CWD, active.as_path(), 0o600)
            .map(File::from)
            .map_err(|e| io_at(&active)(e.into()))?;
        lock.try_lock().map_err(|e| {
            io_at(&active)(match e {
                fs::TryLockError::Error(e) => e,
                fs::TryLockError::WouldBlock => std::io::Error::other("instance lock taken"),
            })
        })?;
        for sub in [TMP, SPILL] {
            let p = staging.join(sub);
            DirBuilder::new()
                .mode(0o700)
                .create(&p)
                .map_err(io_at(&p))?;
        }
        let dir = root.join(&id);
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &staging,
            rustix::fs::CWD,
            &dir,
            rustix::fs::RenameFlags::NOREPLACE,
        )
        .map_err(|e| io_at(&dir)(e.into()))?;
        Ok(Instance { dir, lock })
    })();
    if built.is_err() {
        let _ = remove_tree(&staging);
    }
    built
}

fn is_uuid(name: &str) -> bool {
    uuid::Uuid::parse_str(name).is_ok_and(|u| u.to_string() == name)
}

fn dir_is_empty(p: &Path) -> bool {
    fs::read_dir(p)
        .map(|mut d| d.next().is_none())
        .unwrap_or(true)
}

fn age(meta: &fs::Metadata) -> Duration {
    meta.modified()
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default()
}

/// Remove a directory tree that commands may have written into: also the
/// directories they made unwritable. Never follows symbolic links.
fn remove_tree(p: &Path) -> std::io::Result<()> {
    match fs::remove_dir_all(p) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    let mut stack = vec![p.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(meta) = fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
        if let Ok(entries) = fs::read_dir(&dir) {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    match fs::remove_dir_all(p) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Take the lock of an instance directory, if it is free.
fn take_lock(dir: &Path) -> Result<Option<File>, std::io::Error> {
    let f = File::from(hel_fs::at::open_read_path(&dir.join(ACTIVE))?);
    Ok(f.try_lock().is_ok().then_some(f))
}

/// Clean instances whose lock is free: their tmp at once, their spill
/// files once older than 24 hours, their directory once empty; and starts
/// that crashed (`.new-*` older than a few minutes, lock free). Each start
/// looks at most at [`CLEAN_PER_START`] entries, from a random place, so
/// that many instances starting together do not each check every other.
fn clean_dead(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    let names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_uuid(n) || n.strip_prefix(STAGING).is_some_and(is_uuid))
        .collect();
    let from = (uuid::Uuid::new_v4().as_u128() % names.len().max(1) as u128) as usize;
    let picked = names
        .iter()
        .cycle()
        .skip(from)
        .take(names.len().min(CLEAN_PER_START));
    for name in picked {
        let name = name.as_str();
        let dir = root.join(name);
        let Ok(meta) = fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        if let Some(id) = name.strip_prefix(STAGING) {
            if is_uuid(id) && age(&meta) > STALE_START {
                let lock = take_lock(&dir);
                let crashed = match &lock {
                    Ok(held) => held.is_some(),
                    Err(e) => e.kind() == ErrorKind::NotFound,
                };
                if crashed {
                    let _ = remove_tree(&dir);
                }
                drop(lock); // held until the directory is gone
            }
            continue;
        }
        if !is_uuid(name) {
            continue;
        }
        let _held = match take_lock(&dir) {
            Ok(Some(lock)) => lock,
            Ok(None) => continue, // alive
            // No lock file: an instance ending (it removes the directory
            // next) or one whose removal was cut short.
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if age(&meta) > STALE_START {
                    let _ = remove_tree(&dir);
                }
                continue;
            }
            Err(_) => continue,
        };
        if remove_tree(&dir.join(TMP)).is_err() {
            continue;
        }
        if let Ok(files) = fs::read_dir(dir.join(SPILL)) {
            for f in files.flatten() {
                let old = f.metadata().is_ok_and(|m| age(&m) > SPILL_MAX_AGE);
                if old {
                    let _ = fs::remove_file(f.path());
                }
            }
        }
        if dir_is_empty(&dir.join(SPILL)) {
            let _ = fs::remove_dir(dir.join(SPILL));
            let _ = fs::remove_file(dir.join(ACTIVE));
            let _ = fs::remove_dir(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    fn names(root: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A thousand instances starting at once (threads stand in for
    /// processes: each `open` is its own lock), half of them ending while
    /// the others start and clean up: every start succeeds, every live
    /// instance keeps its directory, and nothing is left at the end.
    #[test]
    fn a_thousand_simultaneous_starts_all_succeed() {
        const N: usize = 1000;
        let tmp = tempfile::tempdir().unwrap();
        let root = Arc::new(tmp.path().join("hel-runs-test"));
        let go = Arc::new(Barrier::new(N));
        let started = Arc::new(Barrier::new(N));
        let threads: Vec<_> = (0..N)
            .map(|i| {
                let (root, go, started) = (root.clone(), go.clone(), started.clone());
                std::thread::Builder::new()
                    .stack_size(128 << 10)
                    .spawn(move || {
                        go.wait();
                        let r = Instance::start_in(&root);
                        let ok = match &r {
                            Ok(inst) => {
                                let intact = inst.tmp().is_dir() && inst.spill().is_dir();
                                if i % 2 == 0 {
                                    inst.finish();
                                }
                                intact
                            }
                            Err(_) => false,
                        };
                        started.wait();
                        let still = match &r {
                            Ok(inst) if i % 2 == 1 => {
                                let intact = inst.tmp().is_dir();
                                inst.finish();
                                intact
                            }
                            _ => true,
                        };
                        (r.map(|_| ()).map_err(|e| e.to_string()), ok && still)
                    })
                    .unwrap()
            })
            .collect();
        let mut failures = Vec::new();
        for t in threads {
            let (r, intact) = t.join().unwrap();
            if let Err(e) = r {
                failures.push(e);
            } else if !intact {
                failures.push("a live instance lost its directory".into());
            }
        }
        assert!(
            failures.is_empty(),
            "{} failed: {:?}",
            failures.len(),
            &failures[..failures.len().min(5)]
        );
        assert!(names(&root).is_empty(), "{:?}", names(&root));
    }

    #[test]
    fn cleanup_takes_only_free_locks_and_removes_crashed_starts() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("runs");
        let live = Instance::start_in(&root).unwrap();
        fs::write(live.tmp().join("x"), "x").unwrap();
        // A dead instance with a command's unwritable directory in tmp.
        let dead = Instance::start_in(&root).unwrap();
        fs::create_dir(dead.tmp().join("ro")).unwrap();
        fs::write(dead.tmp().join("ro/f"), "x").unwrap();
        fs::set_permissions(dead.tmp().join("ro"), fs::Permissions::from_mode(0o500)).unwrap();
        let dead_dir = dead.dir.clone();
        drop(dead);
        let old = SystemTime::now() - STALE_START - STALE_START;
        let stale = root.join(format!("{STAGING}{}", uuid::Uuid::new_v4()));
        fs::create_dir(&stale).unwrap();
        File::create(stale.join(ACTIVE)).unwrap();
        File::open(&stale).unwrap().set_modified(old).unwrap();
        let young = root.join(format!("{STAGING}{}", uuid::Uuid::new_v4()));
        fs::create_dir(&young).unwrap();
        let empty = root.join(uuid::Uuid::new_v4().to_string());
        fs::create_dir(&empty).unwrap();
        File::open(&empty).unwrap().set_modified(old).unwrap();
        let other = root.join("not-an-instance");
        fs::create_dir(&other).unwrap();
        let next = Instance::start_in(&root).unwrap();
        assert!(!dead_dir.exists(), "a dead instance is removed");
        assert!(!stale.exists(), "a crashed start is removed");
        assert!(!empty.exists(), "an empty instance directory is removed");
        assert!(young.exists(), "a young start is left alone");
        assert!(other.exists(), "names hel does not make are left alone");
        assert!(
            live.tmp().join("x").exists(),
            "a live instance is untouched"
        );
        live.finish();
        next.finish();
        assert!(!live.dir.exists() && !next.dir.exists());
    }

    #[test]
    fn the_root_is_private_and_must_be_ours() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("runs");
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
        Instance::start_in(&root).unwrap().finish();
        assert_eq!(fs::metadata(&root).unwrap().mode() & 0o7777, 0o700);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        let e = Instance::start_in(&link).err().unwrap();
        assert!(matches!(e, InstanceError::Symlink(_)), "{e}");
        if rustix::process::geteuid().is_root() {
            let theirs = tmp.path().join("theirs");
            fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let e = Instance::start_in(&theirs).err().unwrap();
            assert!(
                matches!(e, InstanceError::Foreign { owner: 65534, .. }),
                "{e}"
            );
        }
    }
}
