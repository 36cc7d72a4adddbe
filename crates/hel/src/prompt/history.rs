//! The prompt's history, one file per user: `$XDG_STATE_HOME/hel/history`
//! (by default `~/.local/state/hel/history`). It is private (0600, in a
//! 0700 directory), never reached through a symbolic link, and read
//! bounded: only its last [`MAX_READ`] bytes are read, and a file grown
//! past that is rewritten with its newest [`KEEP`] entries.
//!
//! Format: one entry per line, as a JSON string (so a multi-line
//! instruction is one line). Lines that are not one are skipped.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use rustix::fs::Mode;

/// Bytes of the file read at the start (its newest part).
const MAX_READ: u64 = 1 << 20;
/// Entries kept when the file is rewritten, and offered by the editor.
pub const KEEP: usize = 1000;
/// Entries longer than this are not saved (a huge paste).
const MAX_ENTRY: usize = 64 << 10;
const FILE: &str = "history";
const ASIDE: &str = "history.new";

/// Why the history cannot be used: the path and what went wrong.
#[derive(Debug)]
pub struct HistoryError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl std::fmt::Display for HistoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

/// The open history file, appended to as entries are made.
pub struct History {
    dir: hel_fs::Dir,
    file: File,
    path: PathBuf,
}

/// The history directory: `$XDG_STATE_HOME/hel`, or `$HOME/.local/state/hel`
/// (relative values are ignored, as the XDG specification says). None
/// when neither is set.
pub fn dir() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_STATE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".local/state"))
        })
        .map(|p| p.join("hel"))
}

impl History {
    /// Open (or create) the history in `dir` and return its newest
    /// entries, oldest first.
    pub fn open(dir: &Path) -> Result<(History, Vec<String>), HistoryError> {
        let path = dir.join(FILE);
        let err = |source: std::io::Error| HistoryError {
            path: path.clone(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| HistoryError {
                path: dir.to_owned(),
                source,
            })?;
        let dir_fd = hel_fs::at::open_dir_path(dir)
            .map(|fd| hel_fs::Dir::from_fd(fd, dir.to_owned()))
            .map_err(|e| HistoryError {
                path: dir.to_owned(),
                source: e.into(),
            })?;
        let file = open_file(&dir_fd, FILE).map_err(err)?;
        let (entries, size) = read_entries(&file).map_err(err)?;
        let mut history = History {
            dir: dir_fd,
            file,
            path: path.clone(),
        };
        if size > MAX_READ {
            history.rewrite(&entries).map_err(err)?;
        }
        Ok((history, entries))
    }

    /// Append `entry` (skipped when it is too long to keep).
    pub fn add(&mut self, entry: &str) -> Result<(), HistoryError> {
        if entry.len() > MAX_ENTRY {
            return Ok(());
        }
        let mut line = serde_json::to_string(entry).unwrap_or_default();
        line.push('\n');
        // One write: appends from two prompts at once do not interleave.
        self.file
            .write_all(line.as_bytes())
            .map_err(|source| HistoryError {
                path: self.path.clone(),
                source,
            })
    }

    /// Replace the file by `entries` alone: written aside, synced, renamed
    /// over it.
    fn rewrite(&mut self, entries: &[String]) -> std::io::Result<()> {
        // One left by a rewrite that was interrupted.
        let _ = self.dir.remove_file(ASIDE);
        let mut text = String::new();
        for e in entries {
            text.push_str(&serde_json::to_string(e).unwrap_or_default());
            text.push('\n');
        }
        self.dir
            .replace(FILE, text.as_bytes(), 0o600, &self.dir, ASIDE)?;
        self.file = open_file(&self.dir, FILE)?;
        Ok(())
    }
}

/// Open `name` in `dir` for reading and appending, created 0600, never
/// through a link; refused unless it is a regular file of ours, and made
/// private if it was not.
fn open_file(dir: &hel_fs::Dir, name: &str) -> std::io::Result<File> {
    let file = hel_fs::at::open_rw(dir.as_fd(), name, true)
        .map(File::from)
        .map_err(|e| match e {
            rustix::io::Errno::LOOP => {
                std::io::Error::other("is a symbolic link; hel does not follow it: remove it")
            }
            e => e.into(),
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("is not a regular file; remove it"));
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(std::io::Error::other("belongs to another user; remove it"));
    }
    if meta.mode() & 0o077 != 0 {
        rustix::fs::fchmod(&file, Mode::from_raw_mode(0o600))?;
    }
    Ok(file)
}

/// The newest entries of `file` (its last [`MAX_READ`] bytes), oldest
/// first, and the file's size.
fn read_entries(mut file: &File) -> std::io::Result<(Vec<String>, u64)> {
    let size = file.metadata()?.len();
    let from = size.saturating_sub(MAX_READ);
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(MAX_READ).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.split('\n');
    if from > 0 {
        lines.next(); // cut in the middle
    }
    let mut entries: Vec<String> = lines
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .filter(|e| !e.trim().is_empty())
        .collect();
    let cut = entries.len().saturating_sub(KEEP);
    entries.drain(..cut);
    Ok((entries, size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn entries_survive_reopening_and_bad_lines_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state/hel");
        let (mut h, first) = History::open(&dir).unwrap();
        assert!(first.is_empty());
        h.add("one").unwrap();
        h.add("two\nlines").unwrap();
        drop(h);
        let path = dir.join(FILE);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"not json\n\"\\u00\"\n").unwrap();
        let (_, again) = History::open(&dir).unwrap();
        assert_eq!(again, ["one", "two\nlines"]);
    }

    #[test]
    fn a_link_is_refused_and_a_big_file_is_rewritten() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("hel");
        std::fs::create_dir(&dir).unwrap();
        let target = tmp.path().join("elsewhere");
        std::fs::write(&target, "\"x\"\n").unwrap();
        std::os::unix::fs::symlink(&target, dir.join(FILE)).unwrap();
        let e = History::open(&dir).err().unwrap();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "\"x\"\n");
        std::fs::remove_file(dir.join(FILE)).unwrap();
        let line = format!("{}\n", serde_json::to_string(&"y".repeat(1000)).unwrap());
        std::fs::write(dir.join(FILE), line.repeat(2000)).unwrap();
        let (_, entries) = History::open(&dir).unwrap();
        assert_eq!(entries.len(), KEEP);
        assert!(std::fs::metadata(dir.join(FILE)).unwrap().len() <= MAX_READ);
    }
}
