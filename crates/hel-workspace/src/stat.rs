//! What a snapshot remembers of a file's metadata, to tell later whether
//! the file may have changed without reading it.

use rustix::fs::Stat;

/// A path's metadata as `lstat` gave it (never following a link).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileStat {
    pub dev: u64,
    pub ino: u64,
    /// `st_mode`: file type and permission bits.
    pub mode: u32,
    pub size: u64,
    /// Nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl FileStat {
    pub fn of(st: &Stat) -> FileStat {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        FileStat {
            dev: st.st_dev,
            ino: st.st_ino,
            mode: st.st_mode,
            size: st.st_size as u64,
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec as i64),
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec as i64),
        }
    }

    /// `lstat` of `name` in the directory `dir`, not following a link.
    pub fn at(dir: impl rustix::fd::AsFd, name: &[u8]) -> std::io::Result<FileStat> {
        let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(FileStat::of(&st))
    }

    pub fn is_file(&self) -> bool {
        self.mode & 0o170000 == 0o100000
    }
    pub fn is_dir(&self) -> bool {
        self.mode & 0o170000 == 0o040000
    }
    pub fn is_symlink(&self) -> bool {
        self.mode & 0o170000 == 0o120000
    }

    /// The permission bits a tree records (setuid, setgid and sticky bits
    /// are never recorded nor restored).
    pub fn perm(&self) -> u16 {
        (self.mode & 0o777) as u16
    }
}
