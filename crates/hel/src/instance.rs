//! The instance runtime: `<system tmp>/hel-runs/<uuid>/{tmp,spill,.active}`.
//! `.active` is locked for the life of the process and inherited by tool
//! children, so an instance counts as alive while a child it started runs.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Spill of dead instances older than this is removed at a later start.
const SPILL_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

pub struct Instance {
    pub id: String,
    pub dir: PathBuf,
    lock: File,
}

impl Instance {
    pub fn start() -> std::io::Result<Instance> {
        let runs = runs_dir();
        fs::create_dir_all(&runs)?;
        clean_dead(&runs);
        let id = uuid::Uuid::new_v4().to_string();
        let dir = runs.join(&id);
        fs::create_dir_all(dir.join("tmp"))?;
        fs::create_dir_all(dir.join("spill"))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".active"))?;
        lock.try_lock().map_err(|e| match e {
            TryLockError::Error(e) => e,
            TryLockError::WouldBlock => std::io::Error::other("instance lock taken"),
        })?;
        Ok(Instance { id, dir, lock })
    }

    pub fn tmp(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    pub fn spill(&self) -> PathBuf {
        self.dir.join("spill")
    }

    pub fn lock_fd(&self) -> RawFd {
        self.lock.as_raw_fd()
    }

    /// Remove tmp (at exit and at Ctrl-C).
    pub fn finish(&self) {
        let _ = fs::remove_dir_all(self.tmp());
        if dir_is_empty(&self.spill()) {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn runs_dir() -> PathBuf {
    std::env::temp_dir().join("hel-runs")
}

fn dir_is_empty(p: &Path) -> bool {
    fs::read_dir(p)
        .map(|mut d| d.next().is_none())
        .unwrap_or(true)
}

/// Clean instances whose lock is free: their tmp at once, their spill
/// files once older than 24 hours, their directory once empty.
fn clean_dead(runs: &Path) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    for e in entries.flatten() {
        let dir = e.path();
        let Ok(lock) = File::open(dir.join(".active")) else {
            continue;
        };
        if lock.try_lock().is_err() {
            continue; // alive (itself or a child it started)
        }
        let _ = fs::remove_dir_all(dir.join("tmp"));
        if let Ok(files) = fs::read_dir(dir.join("spill")) {
            for f in files.flatten() {
                let old = f
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok())
                    .is_some_and(|age| age > SPILL_MAX_AGE);
                if old {
                    let _ = fs::remove_file(f.path());
                }
            }
        }
        if dir_is_empty(&dir.join("spill")) {
            let _ = fs::remove_dir_all(&dir);
        }
    }
}
