//! glob and grep, over the project's files: sorted by path, skipping
//! `.git`, `.hel` and what `.gitignore` / `.ignore` files ignore (matched
//! by ripgrep's `ignore` rules).
//!
//! The walk goes by descriptors from the project's own: each directory is
//! opened with `O_NOFOLLOW` relative to its parent, so a directory swapped
//! for a symbolic link mid-walk is skipped, never followed outside the
//! project or into `.hel/`. Symbolic links are not followed (as before);
//! FIFOs, sockets and devices are skipped unopened; ignore files are read
//! only inside the project, regular files only, at most
//! [`IGNORE_FILE_BYTES`] each.
//!
//! grep streams each file: lines up to [`WINDOW`] bytes are matched whole;
//! a longer line is searched in windows of [`WINDOW`] bytes that overlap by
//! [`OVERLAP`] bytes, so a match up to [`OVERLAP`] bytes long is found
//! wherever it lies, while a longer match crossing a window's edge can be
//! missed (and `$`, `\b` next to that edge are judged as if the line ended
//! there when the match is longer than the overlap).

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use regex::bytes::Regex;
use rustix::fs::{self as rfs, AtFlags, FileType};

use super::args::{GlobArgs, GrepArgs};
use super::cancel::{self, Cancel, Cancelled};
use super::context::{ToolCtx, ToolResult};
use super::paths::{self, open_regular_at, PathError, ProjectDir};
use super::store_name::is_store_name;

pub(crate) const MAX_MATCHES: usize = 100;
pub(crate) const MAX_BYTES: usize = 10_000;
/// Bytes of one line held at once; longer lines are searched in windows.
pub(crate) const WINDOW: usize = 1 << 20;
/// Bytes by which the windows of a long line overlap.
pub(crate) const OVERLAP: usize = 4096;
/// Characters of a line shown from its start.
const SHOWN_CHARS: usize = 500;
/// Bytes of an ignore file read; the rest is not applied.
pub(crate) const IGNORE_FILE_BYTES: u64 = 1 << 20;
/// Directory levels walked below the search root.
const MAX_DEPTH: usize = 256;

/// Why a search could not run (the model reads this).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SearchError {
    #[error("bad glob pattern {pattern:?}: {source}")]
    Glob {
        pattern: String,
        source: globset::Error,
    },
    #[error("bad regex: {0}")]
    Regex(#[from] regex::Error),
    #[error("{0} does not exist")]
    Missing(String),
    #[error("{path} is {kind}: refused")]
    NotSearchable { path: String, kind: &'static str },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0} changed while it was being searched: try again")]
    Changed(String),
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

/// The ignore files of one directory.
struct Rules {
    ignore: Option<Gitignore>,
    gitignore: Option<Gitignore>,
}

/// A directory being listed.
struct Level {
    fd: OwnedFd,
    rel: PathBuf,
    entries: Vec<(OsString, FileType)>,
    next: usize,
}

/// Walks the files under a root beneath the project, in path order.
struct Walker<'a> {
    dir: &'a ProjectDir,
    rules: Vec<Rules>,
    /// `.git/info/exclude` of the project.
    exclude: Option<Gitignore>,
}

/// A gitignore matcher from the file `name` in `dir` (`abs` is the
/// directory's path), or None when there is none to read.
fn load_ignore(dir: BorrowedFd<'_>, name: &str, abs: &Path) -> Option<Gitignore> {
    let file = open_regular_at(dir, OsStr::new(name), None).ok()?;
    let bytes = hel_fs::read_head(file, IGNORE_FILE_BYTES).ok()?;
    let mut b = GitignoreBuilder::new(abs);
    let from = abs.join(name);
    for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = b.add_line(Some(from.clone()), line);
    }
    b.build().ok()
}

impl<'a> Walker<'a> {
    fn rules_for(&self, fd: BorrowedFd<'_>, rel: &Path) -> Rules {
        let abs = self.dir.path().join(rel);
        Rules {
            ignore: load_ignore(fd, ".ignore", &abs),
            gitignore: load_ignore(fd, ".gitignore", &abs),
        }
    }

    /// Whether `rel` is ignored: `.ignore` rules first, then `.gitignore`,
    /// each from the deepest directory up, then `.git/info/exclude`.
    fn ignored(&self, rel: &Path, is_dir: bool) -> bool {
        let abs = self.dir.path().join(rel);
        let layers = [
            self.rules
                .iter()
                .rev()
                .filter_map(|r| r.ignore.as_ref())
                .collect::<Vec<_>>(),
            self.rules
                .iter()
                .rev()
                .filter_map(|r| r.gitignore.as_ref())
                .collect(),
            self.exclude.iter().collect(),
        ];
        for layer in layers {
            for g in layer {
                match g.matched(&abs, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
        }
        false
    }

    /// A walker standing in the directory `root_rel` (shown as `shown`),
    /// with the ignore rules of every directory from the project down to
    /// it, and that directory held open.
    fn down_to(
        dir: &'a ProjectDir,
        root_rel: &Path,
        shown: &str,
    ) -> Result<(Walker<'a>, OwnedFd), SearchError> {
        let mut w = Walker {
            dir,
            rules: Vec::new(),
            exclude: None,
        };
        let top = dir.fd();
        let mut fd = hel_fs::at::open_dir(top, OsStr::new(".")).map_err(|e| SearchError::Io {
            path: shown.to_owned(),
            source: e.into(),
        })?;
        w.exclude = hel_fs::at::open_dir(top, OsStr::new(".git"))
            .and_then(|git| hel_fs::at::open_dir(git.as_fd(), OsStr::new("info")))
            .ok()
            .and_then(|info| load_ignore(info.as_fd(), "exclude", dir.path()));
        let mut rel = PathBuf::new();
        w.rules.push(w.rules_for(fd.as_fd(), &rel));
        for c in root_rel.iter() {
            fd = hel_fs::at::open_dir(fd.as_fd(), c)
                .map_err(|_| SearchError::Changed(shown.to_owned()))?;
            rel.push(c);
            w.rules.push(w.rules_for(fd.as_fd(), &rel));
        }
        Ok((w, fd))
    }

    /// Call `each(dir, name, rel)` for every regular file under `root`
    /// (a path as the model gave it; None: the project), in path order,
    /// until `cancel` is cancelled.
    fn walk(
        dir: &'a ProjectDir,
        root: Option<&str>,
        cancel: &Cancel,
        each: &mut dyn FnMut(BorrowedFd<'_>, &OsStr, &Path),
    ) -> Result<(), SearchError> {
        let shown = root.unwrap_or(".");
        let entry = dir.resolve_entry(shown, false)?;
        let Some(st) = entry.stat else {
            return Err(SearchError::Missing(shown.to_owned()));
        };
        if paths::is_regular(&st) {
            if let Some(name) = &entry.name {
                each(entry.parent.as_fd(), name, &entry.rel);
            }
            return Ok(());
        }
        if !paths::is_dir(&st) {
            return Err(SearchError::NotSearchable {
                path: shown.to_owned(),
                kind: paths::kind_name(&st),
            });
        }
        let (mut w, fd) = Walker::down_to(dir, &entry.rel, shown)?;
        let rel = entry.rel.clone();
        let mut stack = vec![Level::list(fd, rel)];
        while let Some(top) = stack.last_mut() {
            cancel.check()?;
            // One rules level per directory from the project down.
            let depth = w.rules.len();
            let Some((name, kind)) = top.entries.get(top.next).cloned() else {
                stack.pop();
                w.rules.pop();
                continue;
            };
            top.next += 1;
            let rel = top.rel.join(&name);
            match kind {
                FileType::Directory => {
                    if depth >= MAX_DEPTH || w.ignored(&rel, true) {
                        continue;
                    }
                    // O_NOFOLLOW: a directory swapped for a link is skipped.
                    let Ok(fd) = hel_fs::at::open_dir(top.fd.as_fd(), &name) else {
                        continue;
                    };
                    let rules = w.rules_for(fd.as_fd(), &rel);
                    w.rules.push(rules);
                    stack.push(Level::list(fd, rel));
                }
                FileType::RegularFile if !w.ignored(&rel, false) => {
                    each(top.fd.as_fd(), &name, &rel);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Level {
    /// The entries of `fd` sorted by name (so the walk runs in path order),
    /// without `.git` and `.hel`.
    fn list(fd: OwnedFd, rel: PathBuf) -> Level {
        let mut entries = Vec::new();
        if let Ok(dir) = rfs::Dir::read_from(&fd) {
            for e in dir.flatten() {
                let name = OsStr::from_bytes(e.file_name().to_bytes());
                if name == "." || name == ".." || name == ".git" || is_store_name(name) {
                    continue;
                }
                let mut kind = e.file_type();
                if kind == FileType::Unknown {
                    kind = rfs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| FileType::from_raw_mode(st.st_mode))
                        .unwrap_or(FileType::Unknown);
                }
                entries.push((name.to_owned(), kind));
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Level {
            fd,
            rel,
            entries,
            next: 0,
        }
    }
}

fn glob_matcher(pattern: &str) -> Result<GlobMatcher, SearchError> {
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|source| SearchError::Glob {
            pattern: pattern.to_owned(),
            source,
        })
}

/// Collects result lines under the caps.
struct Capped {
    lines: Vec<String>,
    bytes: usize,
    hidden: usize,
}

impl Capped {
    fn new() -> Self {
        Capped {
            lines: Vec::new(),
            bytes: 0,
            hidden: 0,
        }
    }
    fn push(&mut self, line: String) {
        if self.hidden > 0
            || self.lines.len() >= MAX_MATCHES
            || self.bytes + line.len() + 1 > MAX_BYTES
        {
            self.hidden += 1;
        } else {
            self.bytes += line.len() + 1;
            self.lines.push(line);
        }
    }
    fn finish(self, empty: &str) -> String {
        if self.lines.is_empty() && self.hidden == 0 {
            return empty.to_owned();
        }
        let mut s = self.lines.join("\n");
        if self.hidden > 0 {
            s.push_str(&format!("\n[{} more matches not shown]", self.hidden));
        }
        s
    }
}

/// glob: the files under a directory whose path matches a pattern.
pub(crate) async fn glob(ctx: &mut ToolCtx, args: GlobArgs) -> ToolResult {
    let dir = std::sync::Arc::clone(&ctx.project_dir);
    ToolResult::of(cancel::blocking(move |cancel| glob_in(&dir, &args, cancel)).await)
}

fn glob_in(dir: &ProjectDir, args: &GlobArgs, cancel: &Cancel) -> Result<String, SearchError> {
    let m = glob_matcher(&args.pattern)?;
    let root = args.path.as_deref();
    let root_rel = dir.resolve_entry(root.unwrap_or("."), false)?.rel;
    let mut out = Capped::new();
    Walker::walk(dir, root, cancel, &mut |_, _, rel| {
        let rel_root = rel.strip_prefix(&root_rel).unwrap_or(rel);
        let shown = dir.shown(rel);
        if m.is_match(rel_root) || m.is_match(&shown) {
            out.push(shown);
        }
    })?;
    Ok(out.finish("no files match"))
}

/// grep: the lines matching a regular expression in the files under a
/// directory.
pub(crate) async fn grep(ctx: &mut ToolCtx, args: GrepArgs) -> ToolResult {
    let dir = std::sync::Arc::clone(&ctx.project_dir);
    ToolResult::of(cancel::blocking(move |cancel| grep_in(&dir, &args, cancel)).await)
}

fn grep_in(dir: &ProjectDir, args: &GrepArgs, cancel: &Cancel) -> Result<String, SearchError> {
    let re = Regex::new(&args.pattern)?;
    let include = args.include.as_deref().map(glob_matcher).transpose()?;
    let mut out = Capped::new();
    let project = dir;
    Walker::walk(dir, args.path.as_deref(), cancel, &mut |dir, name, rel| {
        let shown = project.shown(rel);
        if let Some(inc) = &include {
            if !(inc.is_match(Path::new(name)) || inc.is_match(&shown)) {
                return;
            }
        }
        // Regular files only, opened without following links or blocking.
        let Ok(file) = open_regular_at(dir, name, None) else {
            return;
        };
        let _ = grep_reader(file, &re, cancel, &mut |line, text| {
            out.push(format!("{shown}:{line}:{text}"))
        });
    })?;
    // A search cut short by a cancel is no result.
    cancel.check()?;
    Ok(out.finish("no matches"))
}

/// A line longer than [`WINDOW`], being searched.
struct Long {
    /// Offset in the line of the buffer's first byte.
    base: u64,
    /// A match was reported: the rest of the line is only skipped.
    matched: bool,
}

/// Search `src` line by line, calling `emit(line number, shown text)` for
/// each matching line. Holds at most [`WINDOW`] bytes. A file whose first
/// 8 KiB contain a NUL byte is binary and skipped. Stops early (without an
/// error) once `cancel` is cancelled.
pub(crate) fn grep_reader<R: Read>(
    mut src: R,
    re: &Regex,
    cancel: &Cancel,
    emit: &mut dyn FnMut(u64, String),
) -> std::io::Result<()> {
    let mut buf = vec![0u8; WINDOW];
    let mut filled = 0;
    let mut at_eof = false;
    let mut first = true;
    let mut line_no = 1u64;
    let mut long: Option<Long> = None;
    loop {
        if cancel.is_cancelled() {
            return Ok(());
        }
        while !at_eof && filled < WINDOW {
            match src.read(&mut buf[filled..]) {
                Ok(0) => at_eof = true,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if first {
            first = false;
            if buf[..filled.min(8192)].contains(&0) {
                return Ok(());
            }
        }
        // Complete lines.
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[start..filled]) {
            let end = start + i;
            match long.take() {
                Some(l) => {
                    if !l.matched {
                        search_window(re, &buf[..end], l.base, true, line_no, emit);
                    }
                }
                None => match_line(re, &buf[start..end], line_no, emit),
            }
            line_no += 1;
            start = end + 1;
        }
        if at_eof {
            if start < filled {
                match long.take() {
                    Some(l) => {
                        if !l.matched {
                            search_window(re, &buf[..filled], l.base, true, line_no, emit);
                        }
                    }
                    None => match_line(re, &buf[start..filled], line_no, emit),
                }
            }
            return Ok(());
        }
        if start > 0 {
            // Keep the unfinished line and read on.
            buf.copy_within(start..filled, 0);
            filled -= start;
            continue;
        }
        // A full window and no line end: a long line goes on.
        let l = long.get_or_insert(Long {
            base: 0,
            matched: false,
        });
        if l.matched {
            filled = 0;
            continue;
        }
        l.matched = search_window(re, &buf[..filled], l.base, false, line_no, emit);
        // The next window starts one byte of lookbehind and OVERLAP bytes
        // before this one's end.
        let keep = if l.matched { 0 } else { OVERLAP + 1 };
        buf.copy_within(filled - keep..filled, 0);
        l.base += (filled - keep) as u64;
        filled = keep;
    }
}

/// Report a line of at most [`WINDOW`] bytes if it matches.
fn match_line(re: &Regex, line: &[u8], line_no: u64, emit: &mut dyn FnMut(u64, String)) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(m) = re.find(line) else { return };
    let text = if m.start() < SHOWN_CHARS {
        // Byte offset below SHOWN_CHARS: the match starts among the first characters shown.
        let head = &line[..line.len().min(SHOWN_CHARS * 4)];
        String::from_utf8_lossy(head)
            .chars()
            .take(SHOWN_CHARS)
            .collect()
    } else {
        excerpt(line, m.start(), m.end())
    };
    emit(line_no, text);
}

/// Search one window of a long line (`hay`, whose first byte is byte
/// `base` of the line; after the first window, `hay[0]` is lookbehind
/// only). `last`: the line ends with this window. Returns whether a match
/// was reported.
fn search_window(
    re: &Regex,
    hay: &[u8],
    base: u64,
    last: bool,
    line_no: u64,
    emit: &mut dyn FnMut(u64, String),
) -> bool {
    let hay = if last {
        hay.strip_suffix(b"\r").unwrap_or(hay)
    } else {
        hay
    };
    // Searching from 1 lets `^` and `\b` see the byte before.
    let from = usize::from(base > 0);
    let Some(m) = re.find_at(hay, from) else {
        return false;
    };
    // A short match touching the window's end is judged again by the next
    // window, which sees what follows.
    if !last && m.end() == hay.len() && m.len() <= OVERLAP {
        return false;
    }
    emit(
        line_no,
        format!(
            "{} [a line longer than {} MiB, searched in overlapping windows; the match is at byte {} of the line]",
            excerpt(hay, m.start(), m.end()),
            WINDOW >> 20,
            base + m.start() as u64
        ),
    );
    true
}

/// Up to 100 bytes before a match, the match (at most 300 bytes of it) and
/// up to 100 bytes after, cut at character boundaries, with `…` where the
/// line goes on.
fn excerpt(line: &[u8], start: usize, end: usize) -> String {
    let is_cont = |i: usize| i < line.len() && (line[i] & 0xC0) == 0x80;
    let mut s = start.saturating_sub(100);
    while s < start && is_cont(s) {
        s += 1;
    }
    let mut e = end.min(start + 300).saturating_add(100).min(line.len());
    while e > s && is_cont(e) {
        e -= 1;
    }
    let mut out = String::new();
    if s > 0 {
        out.push('…');
    }
    out.push_str(&String::from_utf8_lossy(&line[s..e]));
    if e < line.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grep_bytes(text: &[u8], pattern: &str) -> Vec<(u64, String)> {
        let re = Regex::new(pattern).unwrap();
        let mut out = Vec::new();
        grep_reader(text, &re, &Cancel::default(), &mut |n, s| out.push((n, s))).unwrap();
        out
    }

    #[test]
    fn walk_follows_ignore_rules_and_no_links() {
        let (_d, mut c) = crate::tools::testing::ctx();
        let glob = |c: &mut ToolCtx, args| crate::tools::testing::call(c, "glob", args);
        let w = |rel: &str, text: &str| {
            let p = c.project.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w(".gitignore", "*.log\nbuild/\n");
        w("keep.log.txt", "x");
        w("a.log", "x");
        w("sub/.gitignore", "!important.log\n");
        w("sub/important.log", "x");
        w("sub/other.log", "x");
        w("sub/deep/f.rs", "x");
        w(".ignore", "sub/deep/\n");
        w("build/out.rs", "x");
        w(".git/info/exclude", "excluded.rs\n");
        w("excluded.rs", "x");
        w("sub/deep2/g.rs", "x");
        std::os::unix::fs::symlink(c.project.join("sub"), c.project.join("linked")).unwrap();
        let all = glob(&mut c, json!({"pattern": "**/*"})).content;
        assert_eq!(
            all,
            ".gitignore\n.ignore\nkeep.log.txt\nsub/.gitignore\nsub/deep2/g.rs\nsub/important.log"
        );
        // From a subdirectory the rules above it still apply.
        assert_eq!(
            glob(&mut c, json!({"pattern": "*", "path": "sub"})).content,
            "sub/.gitignore\nsub/deep2/g.rs\nsub/important.log"
        );
        // A root given through a link inside the project is walked as its target.
        assert_eq!(
            glob(&mut c, json!({"pattern": "**/*.rs", "path": "linked"})).content,
            "sub/deep2/g.rs"
        );
    }

    #[test]
    fn lines_and_line_numbers() {
        let r = grep_bytes(b"a\r\nfoo\nbar\nfoo bar", "^foo");
        assert_eq!(r, [(2, "foo".into()), (4, "foo bar".into())]);
        assert!(grep_bytes(b"x\0foo", "foo").is_empty(), "binary");
        assert_eq!(grep_bytes(b"a$\n", "a\\$$"), [(1, "a$".into())]);
        // A match far into a line is shown around it.
        let line = format!("{}NEEDLE{}\n", "x".repeat(2000), "y".repeat(2000));
        let r = grep_bytes(line.as_bytes(), "NEEDLE");
        assert!(
            r[0].1.starts_with('…') && r[0].1.contains("xNEEDLEy"),
            "{}",
            r[0].1
        );
        assert!(r[0].1.len() < 600);
    }

    #[test]
    fn long_lines_are_searched_in_overlapping_windows() {
        // Needles across the first window's end, far into the line, and in
        // the line's last window; then a short line after.
        let mut line = vec![b'a'; 5 * WINDOW + 123];
        let at = WINDOW - 3;
        line[at..at + 6].copy_from_slice(b"NEEDLE");
        let mut text = line.clone();
        text.extend_from_slice(b"\nshort NEEDLE\n");
        let r = grep_bytes(&text, "NEEDLE");
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].0, 1);
        assert!(r[0].1.contains("aNEEDLEa"), "{}", r[0].1);
        assert!(
            r[0].1.contains(&format!("the match is at byte {at} ")),
            "{}",
            r[0].1
        );
        assert!(r[0].1.len() < 700);
        assert_eq!(r[1], (2, "short NEEDLE".into()));
        // `^` does not match at a later window's start, `$` not at a window's end.
        let plain = vec![b'b'; 3 * WINDOW];
        assert!(grep_bytes(&plain, "^bbbbc").is_empty());
        assert!(grep_bytes(&plain, "c|^b{5}$").is_empty());
        assert_eq!(grep_bytes(&plain, "b$").len(), 1);
        assert_eq!(grep_bytes(&plain, "^b").len(), 1);
        // A match in the last window only, at the end of the file.
        let mut tail = vec![b'c'; 3 * WINDOW];
        tail.extend_from_slice(b"END");
        let r = grep_bytes(&tail, "END$");
        assert!(
            r.len() == 1 && r[0].1.contains(&format!("byte {}", 3 * WINDOW)),
            "{r:?}"
        );
    }
}
