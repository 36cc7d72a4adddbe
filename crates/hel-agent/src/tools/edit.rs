//! write_file and search_replace.
//!
//! Both resolve their path beneath the project ([`super::paths`]): a
//! symbolic link inside the project is followed, so the file it points to
//! is written and the link stays; a link leading outside the project or
//! into `.hel/` is refused. Both replace the file whole through a temporary
//! file renamed into place, keeping its permission bits.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;

use super::args::{SearchReplaceArgs, WriteArgs};
use super::cancel::{self, Cancel, Cancelled};
use super::context::{ToolCtx, ToolResult};
use super::paths::{Opened, PathError, ProjectDir};

/// Bytes read at once while scanning a file.
const CHUNK: usize = 1 << 20;

/// Why an edit changed nothing (the model reads this).
#[derive(Debug, thiserror::Error)]
pub(crate) enum EditError {
    #[error("search must not be empty")]
    EmptySearch,
    #[error("no change: search text occurs {count} times in {path}; it must occur exactly once (add surrounding lines to make it unique)")]
    Count { count: u64, path: String },
    #[error("{0} changed while it was being edited: nothing changed, try again")]
    Changed(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

/// Why a scan of a file stopped.
enum Stopped {
    Io(std::io::Error),
    Cancelled(Cancelled),
}

impl From<std::io::Error> for Stopped {
    fn from(e: std::io::Error) -> Stopped {
        Stopped::Io(e)
    }
}

impl From<Cancelled> for Stopped {
    fn from(c: Cancelled) -> Stopped {
        Stopped::Cancelled(c)
    }
}

impl Stopped {
    fn at(self, path: &str) -> EditError {
        match self {
            Stopped::Io(source) => EditError::Io {
                path: path.to_owned(),
                source,
            },
            Stopped::Cancelled(c) => EditError::Cancelled(c),
        }
    }
}

/// Create or replace a file beneath the project, creating missing
/// directories. Writes through a symbolic link inside the project (the
/// link stays); refuses links leading outside or into `.hel/`, and
/// directories, FIFOs, devices and sockets. Nothing is written once the
/// call is cancelled.
pub(crate) async fn write_file(ctx: &mut ToolCtx, args: WriteArgs) -> ToolResult {
    let dir = std::sync::Arc::clone(&ctx.project_dir);
    ToolResult::of(cancel::blocking(move |cancel| write(&dir, &args, cancel)).await)
}

fn write(dir: &ProjectDir, args: &WriteArgs, cancel: &Cancel) -> Result<String, EditError> {
    let path = args.path.as_str();
    let entry = dir.resolve_entry(path, true)?;
    dir.replace(&entry, path, cancel, |mut f| {
        f.write_all(args.content.as_bytes())
            .map_err(|e| Stopped::Io(e).at(path))
    })?;
    let n = args.content.len();
    Ok(format!(
        "wrote {n} {} to {path}",
        if n == 1 { "byte" } else { "bytes" }
    ))
}

/// Replace the one occurrence of `search` in a regular file beneath the
/// project; nothing changes unless it occurs exactly once. Streams the
/// file (twice: count, then copy), so its size is not bounded by memory;
/// nothing changes once the call is cancelled.
pub(crate) async fn search_replace(ctx: &mut ToolCtx, args: SearchReplaceArgs) -> ToolResult {
    let dir = std::sync::Arc::clone(&ctx.project_dir);
    ToolResult::of(cancel::blocking(move |cancel| replace_once(&dir, &args, cancel)).await)
}

fn replace_once(
    dir: &ProjectDir,
    args: &SearchReplaceArgs,
    cancel: &Cancel,
) -> Result<String, EditError> {
    let (path, search, replace) = (args.path.as_str(), args.search.as_bytes(), &args.replace);
    if search.is_empty() {
        return Err(EditError::EmptySearch);
    }
    let (file, entry) = match dir.open_file(path)? {
        Opened::File { file, entry } => (file, entry),
        Opened::Store(_) => {
            return Err(PathError::InStore {
                path: path.to_owned(),
            }
            .into())
        }
    };
    let io = |source| EditError::Io {
        path: path.to_owned(),
        source,
    };
    let before = file.metadata().map_err(io)?;
    let (count, at) = occurrences(&file, search, cancel).map_err(|e| e.at(path))?;
    let at = match (count, at) {
        (1, Some(at)) => at,
        _ => {
            return Err(EditError::Count {
                count,
                path: path.to_owned(),
            })
        }
    };
    dir.replace(&entry, path, cancel, |mut out| {
        let changed = || EditError::Changed(path.to_owned());
        copy_range(&file, out, 0, at, cancel).map_err(|e| e.at(path))?;
        let mut found = vec![0u8; search.len()];
        file.read_exact_at(&mut found, at).map_err(|_| changed())?;
        if found != search {
            return Err(changed());
        }
        out.write_all(replace.as_bytes()).map_err(io)?;
        copy_range(&file, out, at + search.len() as u64, u64::MAX, cancel)
            .map_err(|e| e.at(path))?;
        let after = file.metadata().map_err(io)?;
        if after.len() != before.len() || after.modified().ok() != before.modified().ok() {
            return Err(changed());
        }
        Ok(())
    })?;
    Ok(format!("replaced 1 occurrence in {path}"))
}

/// How often `needle` occurs in `file` (not overlapping, left to right)
/// and where it first does. Streams: holds at most a chunk and the
/// needle's length.
fn occurrences(
    mut file: &File,
    needle: &[u8],
    cancel: &Cancel,
) -> Result<(u64, Option<u64>), Stopped> {
    let finder = memchr::memmem::Finder::new(needle);
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + needle.len());
    let mut base = 0u64; // file offset of buf[0]
    let mut count = 0u64;
    let mut first = None;
    let mut chunk = vec![0u8; CHUNK];
    loop {
        cancel.check()?;
        let n = match file.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut pos = 0;
        while let Some(i) = finder.find(&buf[pos..]) {
            count += 1;
            first.get_or_insert(base + (pos + i) as u64);
            pos += i + needle.len();
        }
        if n == 0 {
            return Ok((count, first));
        }
        // Keep what could still begin a match, and nothing already counted.
        let keep = pos.max(buf.len().saturating_sub(needle.len() - 1));
        buf.drain(..keep);
        base += keep as u64;
    }
}

/// Copy bytes `from..to` of `src` (to its end at most) to `out`.
fn copy_range(
    src: &File,
    mut out: &File,
    from: u64,
    to: u64,
    cancel: &Cancel,
) -> Result<(), Stopped> {
    let mut buf = vec![0u8; CHUNK];
    let mut at = from;
    while at < to {
        cancel.check()?;
        let want = (to - at).min(CHUNK as u64) as usize;
        let n = match src.read_at(&mut buf[..want], at) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        at += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(text: &[u8], needle: &str) -> (u64, Option<u64>) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, text).unwrap();
        match occurrences(
            &File::open(&p).unwrap(),
            needle.as_bytes(),
            &Cancel::default(),
        ) {
            Ok(r) => r,
            Err(_) => panic!("the scan failed"),
        }
    }

    #[test]
    fn occurrences_across_chunks_do_not_overlap() {
        assert_eq!(count(b"a b a", "a"), (2, Some(0)));
        assert_eq!(count(b"aaaa", "aa"), (2, Some(0)));
        assert_eq!(count(b"xyz", "q"), (0, None));
        // A match straddling the chunk boundary is found once.
        let mut big = vec![b'.'; CHUNK - 3];
        big.extend_from_slice(b"NEEDLE");
        big.extend(vec![b'.'; 100]);
        assert_eq!(count(&big, "NEEDLE"), (1, Some((CHUNK - 3) as u64)));
        let mut runs = vec![b'a'; CHUNK + 1];
        runs.push(b'\n');
        assert_eq!(count(&runs, "aa").0, CHUNK as u64 / 2);
    }
}
