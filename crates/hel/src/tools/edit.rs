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

use serde_json::Value;

use super::paths::{Opened, Target};
use super::{arg_str, ToolCtx, ToolResult};

/// Bytes read at once while scanning a file.
const CHUNK: usize = 1 << 20;

/// Create or replace a file beneath the project, creating missing
/// directories. Writes through a symbolic link inside the project (the
/// link stays); refuses links leading outside or into `.hel/`, and
/// directories, FIFOs, devices and sockets.
pub fn write_file(ctx: &mut ToolCtx, args: &Value) -> ToolResult {
    let run = || -> Result<String, String> {
        let path = arg_str(args, "path")?.ok_or("write_file needs a path")?;
        let content = arg_str(args, "content")?.ok_or("write_file needs content")?;
        let entry = match ctx.project_dir.resolve(path, true)? {
            Target::Entry(e) => e,
            Target::Store(_) => return Err(format!("{path} is inside .hel/: refused")),
        };
        ctx.project_dir.replace(&entry, path, |f| {
            f.write_all(content.as_bytes())
                .map_err(|e| format!("{path}: {e}"))
        })?;
        Ok(format!("wrote {} bytes to {path}", content.len()))
    };
    match run() {
        Ok(s) => ToolResult::ok(s),
        Err(e) => ToolResult::failed(format!("error: {e}")),
    }
}

/// Replace the one occurrence of `search` in a regular file beneath the
/// project; nothing changes unless it occurs exactly once. Streams the
/// file (twice: count, then copy), so its size is not bounded by memory.
pub fn search_replace(ctx: &mut ToolCtx, args: &Value) -> ToolResult {
    let run = || -> Result<String, String> {
        let path = arg_str(args, "path")?.ok_or("search_replace needs a path")?;
        let search = arg_str(args, "search")?.ok_or("search_replace needs search")?;
        let replace = arg_str(args, "replace")?.ok_or("search_replace needs replace")?;
        if search.is_empty() {
            return Err("search must not be empty".into());
        }
        let (file, entry) = match ctx.project_dir.open_file(path)? {
            Opened::File { file, entry } => (file, entry),
            Opened::Store(_) => return Err(format!("{path} is inside .hel/: refused")),
        };
        let before = file.metadata().map_err(|e| format!("{path}: {e}"))?;
        let (count, at) =
            occurrences(&file, search.as_bytes()).map_err(|e| format!("{path}: {e}"))?;
        let at = match (count, at) {
            (1, Some(at)) => at,
            _ => {
                return Err(format!(
                    "no change: search text occurs {count} times in {path}; it must occur exactly once (add surrounding lines to make it unique)"
                ))
            }
        };
        ctx.project_dir.replace(&entry, path, |out| {
            let changed =
                || format!("{path} changed while it was being edited: nothing changed, try again");
            copy_range(&file, out, 0, at).map_err(|e| format!("{path}: {e}"))?;
            let mut found = vec![0u8; search.len()];
            file.read_exact_at(&mut found, at).map_err(|_| changed())?;
            if found != search.as_bytes() {
                return Err(changed());
            }
            out.write_all(replace.as_bytes())
                .map_err(|e| format!("{path}: {e}"))?;
            copy_range(&file, out, at + search.len() as u64, u64::MAX)
                .map_err(|e| format!("{path}: {e}"))?;
            let after = file.metadata().map_err(|e| format!("{path}: {e}"))?;
            if after.len() != before.len() || after.modified().ok() != before.modified().ok() {
                return Err(changed());
            }
            Ok(())
        })?;
        Ok(format!("replaced 1 occurrence in {path}"))
    };
    match run() {
        Ok(s) => ToolResult::ok(s),
        Err(e) => ToolResult::failed(format!("error: {e}")),
    }
}

/// How often `needle` occurs in `file` (not overlapping, left to right)
/// and where it first does. Streams: holds at most a chunk and the
/// needle's length.
fn occurrences(mut file: &File, needle: &[u8]) -> std::io::Result<(u64, Option<u64>)> {
    let finder = memchr::memmem::Finder::new(needle);
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + needle.len());
    let mut base = 0u64; // file offset of buf[0]
    let mut count = 0u64;
    let mut first = None;
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
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
fn copy_range(src: &File, out: &mut File, from: u64, to: u64) -> std::io::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    let mut at = from;
    while at < to {
        let want = (to - at).min(CHUNK as u64) as usize;
        let n = match src.read_at(&mut buf[..want], at) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
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
        occurrences(&File::open(&p).unwrap(), needle.as_bytes()).unwrap()
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
