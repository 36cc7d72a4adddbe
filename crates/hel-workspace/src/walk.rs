//! The walk of a project for a snapshot: what is there, with its `lstat`,
//! in parallel.
//!
//! What is included: everything under the project directory that
//! `.gitignore` files, `.git/info/exclude` and git's global excludes file
//! do not ignore (whether or not the project is a git repository), hidden
//! files included. Never `.git`, `.hel` or `.jj` (at any depth, any case);
//! a directory holding `.git` (a nested repository or submodule) is listed
//! as such and not entered; links are recorded, never followed; FIFOs,
//! sockets and devices are left out.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

use hel_store::tree::{bad_name, DEPTH_MAX};

use crate::flat::PATH_MAX;
use crate::stat::FileStat;

/// What the walk found at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    File,
    Symlink,
    Dir,
    /// A directory holding `.git`: left out whole.
    Repository,
}

/// A path the walk found, relative to the project, with its metadata.
#[derive(Clone, Debug)]
pub struct Entry {
    pub path: Vec<u8>,
    pub found: Found,
    pub stat: FileStat,
}

/// What the walk left out and the user may want to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skipped {
    /// A name a tree cannot hold (only `/`-free, non-empty names under
    /// 256 bytes are possible on Linux, so in practice none).
    BadName(Vec<u8>),
    /// Deeper than a tree may nest, or a path too long.
    TooDeep(Vec<u8>),
    /// Could not be read (permissions, vanished during the walk).
    Unreadable(Vec<u8>, String),
}

/// Why a walk failed as a whole.
#[derive(Debug, thiserror::Error)]
#[error("cannot walk the project {path}: {reason}")]
pub struct WalkError {
    pub path: String,
    pub reason: String,
}

/// The walk's result: entries sorted by path.
#[derive(Debug, Default)]
pub struct Walked {
    pub entries: Vec<Entry>,
    pub skipped: Vec<Skipped>,
    /// FIFOs, sockets and devices left out.
    pub special: u64,
}

/// A name no snapshot enters (case-insensitive: on a case-insensitive
/// filesystem `.GIT` is `.git`).
pub fn is_never(name: &[u8]) -> bool {
    [&b".git"[..], b".hel", b".jj"]
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
}

/// Walk `root` (the project directory).
pub fn walk(root: &Path) -> Result<Walked, WalkError> {
    let meta = std::fs::symlink_metadata(root).map_err(|e| WalkError {
        path: root.display().to_string(),
        reason: e.to_string(),
    })?;
    if !meta.is_dir() {
        return Err(WalkError {
            path: root.display().to_string(),
            reason: "not a directory".into(),
        });
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .parents(true)
        .ignore(false)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .threads(threads)
        .filter_entry(|e| !is_never(e.file_name().as_bytes()))
        .build_parallel();
    let out = Mutex::new(Walked::default());
    walker.visit(&mut Builder { root, out: &out });
    let mut walked = out.into_inner().unwrap_or_else(|p| p.into_inner());
    walked.entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(walked)
}

struct Builder<'s> {
    root: &'s Path,
    out: &'s Mutex<Walked>,
}

impl<'s> ignore::ParallelVisitorBuilder<'s> for Builder<'s> {
    fn build(&mut self) -> Box<dyn ignore::ParallelVisitor + 's> {
        Box::new(Local {
            root: self.root,
            out: self.out,
            mine: Walked::default(),
        })
    }
}

/// One walking thread's findings, handed over when it ends.
struct Local<'s> {
    root: &'s Path,
    out: &'s Mutex<Walked>,
    mine: Walked,
}

impl ignore::ParallelVisitor for Local<'_> {
    fn visit(&mut self, result: Result<ignore::DirEntry, ignore::Error>) -> ignore::WalkState {
        visit(self.root, result, &mut self.mine)
    }
}

impl Drop for Local<'_> {
    fn drop(&mut self) {
        flush(self.out, &mut self.mine);
    }
}

fn flush(out: &Mutex<Walked>, local: &mut Walked) {
    let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
    o.entries.append(&mut local.entries);
    o.skipped.append(&mut local.skipped);
    o.special += std::mem::take(&mut local.special);
}

fn visit(
    root: &Path,
    result: Result<ignore::DirEntry, ignore::Error>,
    out: &mut Walked,
) -> ignore::WalkState {
    use ignore::WalkState::{Continue, Skip};
    let entry = match result {
        Ok(e) => e,
        Err(e) => {
            // An unreadable directory or a broken ignore file: what it
            // names is left out and said.
            let path = error_path(&e).unwrap_or_default();
            out.skipped.push(Skipped::Unreadable(path, e.to_string()));
            return Continue;
        }
    };
    if entry.depth() == 0 {
        return Continue;
    }
    let Ok(rel) = entry.path().strip_prefix(root) else {
        return Skip;
    };
    let rel = rel.as_os_str().as_bytes().to_vec();
    let depth = entry.depth();
    if rel.len() > PATH_MAX || depth >= DEPTH_MAX {
        out.skipped.push(Skipped::TooDeep(rel));
        return Skip;
    }
    if bad_name(entry.file_name().as_bytes()).is_some() {
        out.skipped.push(Skipped::BadName(rel));
        return Skip;
    }
    let st = match rustix::fs::lstat(entry.path()) {
        Ok(st) => FileStat::of(&st),
        Err(e) => {
            if e != rustix::io::Errno::NOENT {
                out.skipped.push(Skipped::Unreadable(rel, e.to_string()));
            }
            return Skip;
        }
    };
    let found = if st.is_file() {
        Found::File
    } else if st.is_symlink() {
        Found::Symlink
    } else if st.is_dir() {
        // A nested repository (or submodule, whose `.git` is a file).
        match rustix::fs::lstat(entry.path().join(".git")) {
            Ok(_) => Found::Repository,
            Err(_) => Found::Dir,
        }
    } else {
        out.special += 1;
        return Skip;
    };
    out.entries.push(Entry {
        path: rel,
        found,
        stat: st,
    });
    if found == Found::Repository {
        Skip
    } else {
        Continue
    }
}

fn error_path(e: &ignore::Error) -> Option<Vec<u8>> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path.as_os_str().as_bytes().to_vec()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}
