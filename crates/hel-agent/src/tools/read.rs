//! read_file: a page of at most 10,000 bytes of a UTF-8 text file, ending
//! at a line boundary, with a cursor to continue.
//!
//! A project file is read on a blocking thread (skipping to a start line
//! may stream through a huge file), which stops when the call is
//! cancelled; spill is read from memory.

use std::io::{Read, Seek, SeekFrom};
use std::rc::Rc;
use std::sync::Arc;

use super::args::ReadArgs;
use super::cancel::{self, Cancel, Cancelled};
use super::context::{ToolCtx, ToolResult};
use super::cursor::{identity_of, Cursor, Identity};
use super::paths::{Opened, PathError, ProjectDir};

/// Bytes of file content per call.
pub(crate) const PAGE_BYTES: usize = 10_000;

/// One page of a read.
#[derive(Debug, PartialEq)]
pub(crate) struct Page {
    pub text: String,
    /// Where it starts in the file.
    pub start: u64,
    /// Where the next page starts and the lines left, when the range goes on.
    pub next: Option<(u64, Option<u64>)>,
}

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PageError {
    #[error("binary or non-UTF-8 file: read_file reads UTF-8 text only")]
    NotUtf8,
    #[error("binary file (it contains NUL bytes): read_file reads text only")]
    Binary,
    #[error("start_line {line} is beyond the end of the file ({lines} lines)")]
    BeyondEnd { line: u64, lines: u64 },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

/// Why a read_file call failed (the model reads this).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("give either a cursor alone, or a path with an optional range")]
    CursorAndPath,
    #[error("unknown cursor {0}: read the file again")]
    UnknownCursor(String),
    #[error("{0} changed since this cursor was handed out: read it again from the start")]
    Stale(String),
    #[error("read_file needs a path (or a cursor)")]
    NoPath,
    #[error("start_line counts from 1")]
    StartLineZero,
    #[error("{0} is inside {store}/ and not a spill file of this session: refused", store = hel_store::STORE_DIR)]
    NotSpill(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Path(#[from] PathError),
    #[error(transparent)]
    Page(#[from] PageError),
}

/// Read a page starting at byte `offset`, after skipping `skip` lines,
/// covering at most `lines` lines. Streams: whatever the length of a line,
/// at most [`PAGE_BYTES`] + 1 bytes of the page and a 64 KiB buffer for
/// skipping are held. Skipping stops when `cancel` is cancelled.
pub(crate) fn read_page<R: Read + Seek>(
    mut src: R,
    offset: u64,
    skip: u64,
    lines: Option<u64>,
    cancel: &Cancel,
) -> Result<Page, PageError> {
    let pos = if skip > 0 {
        skip_lines(&mut src, offset, skip, cancel)?
    } else {
        offset
    };
    src.seek(SeekFrom::Start(pos))?;
    // One byte more than a page tells whether the next line fits.
    let mut win = Vec::with_capacity(PAGE_BYTES + 1);
    (&mut src)
        .take(PAGE_BYTES as u64 + 1)
        .read_to_end(&mut win)?;
    let at_eof = win.len() <= PAGE_BYTES;
    let mut end = 0;
    let mut left = lines;
    let mut next = None;
    while left != Some(0) && end < win.len() {
        match memchr::memchr(b'\n', &win[end..]) {
            Some(i) if end + i < PAGE_BYTES => end += i + 1,
            // The last line, without a newline, fits.
            None if at_eof => end = win.len(),
            _ => {
                if end == 0 {
                    // One line longer than a page: split it at a character boundary.
                    let mut cut = PAGE_BYTES;
                    while cut > 0 && (win[cut] & 0xC0) == 0x80 {
                        cut -= 1;
                    }
                    if cut == 0 {
                        return Err(PageError::NotUtf8);
                    }
                    end = cut;
                }
                next = Some((pos + end as u64, left));
                break;
            }
        }
        left = left.map(|l| l - 1);
    }
    win.truncate(end);
    if win.contains(&0) {
        return Err(PageError::Binary);
    }
    let text = String::from_utf8(win).map_err(|_| PageError::NotUtf8)?;
    Ok(Page {
        text,
        start: pos,
        next,
    })
}

/// What comes before and after `page` in `src`: up to
/// [`hel_secrets::OVERLAP`] bytes each side (the longest reach of a
/// secret-detection rule), for the page's secrets to be found whole when
/// its edge cuts one ([`finish`]). Bytes that are not UTF-8 are replaced.
fn around<R: Read + Seek>(mut src: R, page: &Page) -> std::io::Result<(String, String)> {
    let reach = hel_secrets::OVERLAP as u64;
    let from = page.start.saturating_sub(reach);
    src.seek(SeekFrom::Start(from))?;
    let mut before = Vec::new();
    (&mut src)
        .take(page.start - from)
        .read_to_end(&mut before)?;
    src.seek(SeekFrom::Start(page.start + page.text.len() as u64))?;
    let mut after = Vec::new();
    src.take(reach).read_to_end(&mut after)?;
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    Ok((text(before), text(after)))
}

/// The offset after `skip` lines from `offset`, counting newlines in
/// chunks (a line is never held whole). A last line without a newline
/// counts as a line.
fn skip_lines<R: Read + Seek>(
    src: &mut R,
    offset: u64,
    skip: u64,
    cancel: &Cancel,
) -> Result<u64, PageError> {
    src.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut base = offset;
    let mut seen = 0u64;
    let mut partial = false;
    loop {
        cancel.check()?;
        let n = match src.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            if partial {
                seen += 1;
                if seen == skip {
                    return Ok(base);
                }
            }
            return Err(PageError::BeyondEnd {
                line: skip + 1,
                lines: seen,
            });
        }
        for i in memchr::memchr_iter(b'\n', &buf[..n]) {
            seen += 1;
            if seen == skip {
                return Ok(base + i as u64 + 1);
            }
        }
        partial = buf[n - 1] != b'\n';
        base += n as u64;
    }
}

/// The tool.
pub(crate) async fn run(ctx: &mut ToolCtx, args: ReadArgs) -> ToolResult {
    ToolResult::of(read(ctx, args).await)
}

/// What to read: a path, where to start and how much.
struct Want {
    path: String,
    offset: u64,
    skip: u64,
    lines: Option<u64>,
    /// For a cursor: the file must still be what it was.
    identity: Option<Identity>,
}

async fn read(ctx: &mut ToolCtx, args: ReadArgs) -> Result<String, ReadError> {
    let want = match args.cursor {
        Some(id) => {
            if args.path.is_some() || args.start_line.is_some() || args.max_lines.is_some() {
                return Err(ReadError::CursorAndPath);
            }
            let c = ctx
                .cursors
                .get(&id)
                .cloned()
                .ok_or(ReadError::UnknownCursor(id))?;
            Want {
                path: c.path,
                offset: c.offset,
                skip: 0,
                lines: c.lines_left,
                identity: Some(c.identity),
            }
        }
        None => {
            let path = args.path.ok_or(ReadError::NoPath)?;
            if args.start_line == Some(0) {
                return Err(ReadError::StartLineZero);
            }
            Want {
                path,
                offset: 0,
                skip: args.start_line.unwrap_or(1) - 1,
                lines: args.max_lines,
                identity: None,
            }
        }
    };
    let (page, identity, around) = page_of(ctx, &want).await?;
    Ok(finish(ctx, &want.path, page, identity, around))
}

/// A page, the identity of what it is of, and what is around it.
type Paged = (Page, Identity, (String, String));

/// Read the page `want` asks for: spill of this session from memory, or a
/// regular file beneath the project (see [`super::paths`]).
async fn page_of(ctx: &ToolCtx, want: &Want) -> Result<Paged, ReadError> {
    // Instance spill is named by its absolute path, outside the project.
    if let Some((bytes, blob)) = ctx.spill.read(&want.path) {
        return spill_page(want, bytes, blob);
    }
    let dir = Arc::clone(&ctx.project_dir);
    let (path, offset, skip, lines) = (want.path.clone(), want.offset, want.skip, want.lines);
    let expect = want.identity.clone();
    let opened = cancel::blocking(move |cancel| {
        file_page(&dir, &path, offset, skip, lines, expect.as_ref(), cancel)
    })
    .await?;
    match opened {
        FilePage::Read(page, identity, around) => Ok((page, identity, around)),
        FilePage::Store(rel) => {
            let (bytes, blob) = ctx
                .spill
                .read(&rel)
                .ok_or_else(|| ReadError::NotSpill(want.path.clone()))?;
            spill_page(want, bytes, blob)
        }
    }
}

fn spill_page(want: &Want, bytes: Rc<[u8]>, blob: hel_store::ObjectId) -> Result<Paged, ReadError> {
    let identity = Identity::Spill {
        blob: blob.to_hex(),
    };
    check_identity(want.identity.as_ref(), &identity, &want.path)?;
    let mut src = std::io::Cursor::new(bytes);
    let page = read_page(
        &mut src,
        want.offset,
        want.skip,
        want.lines,
        &Cancel::default(),
    )?;
    let around = around(src, &page).map_err(PageError::from)?;
    Ok((page, identity, around))
}

fn check_identity(
    expect: Option<&Identity>,
    found: &Identity,
    path: &str,
) -> Result<(), ReadError> {
    match expect {
        Some(e) if e != found => Err(ReadError::Stale(path.to_owned())),
        _ => Ok(()),
    }
}

/// A page of a project file, or the `.hel/` path it named.
enum FilePage {
    Read(Page, Identity, (String, String)),
    Store(String),
}

fn file_page(
    dir: &ProjectDir,
    path: &str,
    offset: u64,
    skip: u64,
    lines: Option<u64>,
    expect: Option<&Identity>,
    cancel: &Cancel,
) -> Result<FilePage, ReadError> {
    match dir.open_file(path)? {
        Opened::File { mut file, .. } => {
            let meta = file.metadata().map_err(|source| ReadError::Io {
                path: path.to_owned(),
                source,
            })?;
            let identity = identity_of(&meta);
            check_identity(expect, &identity, path)?;
            let page = read_page(&mut file, offset, skip, lines, cancel)?;
            let around = around(file, &page).map_err(|source| ReadError::Io {
                path: path.to_owned(),
                source,
            })?;
            Ok(FilePage::Read(page, identity, around))
        }
        Opened::Store(rel) => Ok(FilePage::Store(rel)),
    }
}

/// The page as the model reads it: its secrets replaced by their handles,
/// found in the page with what is `around` it (a secret the page's edge
/// cuts is found whole), and a cursor when the file goes on.
fn finish(
    ctx: &mut ToolCtx,
    path: &str,
    page: Page,
    identity: Identity,
    (before, after): (String, String),
) -> String {
    let whole = format!("{before}{}{after}", page.text);
    let mut text = ctx
        .secrets
        .redact_part(&whole, before.len()..before.len() + page.text.len());
    if let Some((offset, lines_left)) = page.next {
        let id = uuid::Uuid::new_v4().to_string();
        ctx.cursors.insert(Cursor {
            id: id.clone(),
            path: path.to_owned(),
            offset,
            lines_left,
            identity,
        });
        if !text.ends_with('\n') && !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!(
            "[Read truncated. Continue with read_file({{\"cursor\":\"{id}\"}}).]"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor as Mem;

    fn page(text: &str, offset: u64, skip: u64, lines: Option<u64>) -> Page {
        read_page(
            Mem::new(text.as_bytes().to_vec()),
            offset,
            skip,
            lines,
            &Cancel::default(),
        )
        .unwrap()
    }

    #[test]
    fn ranges() {
        let t = "a\nb\nc\nd\n";
        assert_eq!(
            page(t, 0, 0, None),
            Page {
                text: t.into(),
                start: 0,
                next: None
            }
        );
        assert_eq!(
            page(t, 0, 1, Some(2)),
            Page {
                text: "b\nc\n".into(),
                start: 2,
                next: None
            }
        );
        assert_eq!(page("a\nb", 0, 1, None).text, "b");
        assert!(
            read_page(Mem::new(b"a\n".to_vec()), 0, 5, None, &Cancel::default())
                .unwrap_err()
                .to_string()
                .contains("beyond")
        );
    }

    #[test]
    fn pages_end_at_line_boundaries_and_continue() {
        let line = format!("{}\n", "x".repeat(999));
        let t = line.repeat(25); // 25,000 bytes
        let p1 = page(&t, 0, 0, None);
        assert_eq!(p1.text.len(), 10_000);
        let (off, left) = p1.next.unwrap();
        assert_eq!((off, left), (10_000, None));
        let p2 = page(&t, off, 0, left);
        let p3 = page(&t, p2.next.unwrap().0, 0, None);
        assert_eq!(p3.text.len(), 5_000);
        assert!(p3.next.is_none());
        // A range of 12 lines: 10 then 2.
        let r1 = page(&t, 0, 0, Some(12));
        assert_eq!(r1.next, Some((10_000, Some(2))));
        let r2 = page(&t, 10_000, 0, Some(2));
        assert_eq!((r2.text.len(), r2.next), (2_000, None));
    }

    #[test]
    fn long_multibyte_line_splits_on_a_char_boundary() {
        let t = "é".repeat(6_000); // 12,000 bytes, one line
        let p = page(&t, 0, 0, None);
        assert_eq!(p.text.len(), 10_000);
        assert!(p.text.chars().all(|c| c == 'é'));
        let t = format!("ab{}", "한".repeat(4_000)); // 2 + 12,000 bytes
        let p = page(&t, 0, 0, None);
        assert_eq!(p.text.len(), 9_998);
        let rest = page(&t, p.next.unwrap().0, 0, None);
        assert_eq!(p.text.len() + rest.text.len(), t.len());
    }

    /// A source that counts the bytes read from it.
    struct Counting<R> {
        inner: R,
        read: std::rc::Rc<std::cell::Cell<u64>>,
    }
    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read.set(self.read.get() + n as u64);
            Ok(n)
        }
    }
    impl<R: Seek> Seek for Counting<R> {
        fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    #[test]
    fn a_long_line_is_never_read_whole() {
        let mut text = "y".repeat(5 << 20);
        text.push_str("\nsecond\nthird");
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        let src = Counting {
            inner: Mem::new(text.as_bytes().to_vec()),
            read: read.clone(),
        };
        let p = read_page(src, 0, 0, None, &Cancel::default()).unwrap();
        assert_eq!((p.text.len(), p.next), (PAGE_BYTES, Some((10_000, None))));
        assert!(read.get() <= PAGE_BYTES as u64 + 1, "{}", read.get());
        // Skipping the long line streams through it.
        assert_eq!(page(&text, 0, 1, Some(1)).text, "second\n");
        assert_eq!(page(&text, 0, 2, None).text, "third");
        assert_eq!(page(&text, 0, 3, None).text, "");
        assert!(
            read_page(Mem::new(text.into_bytes()), 0, 4, None, &Cancel::default())
                .unwrap_err()
                .to_string()
                .contains("start_line 5 is beyond the end of the file (3 lines)")
        );
    }

    #[test]
    fn binary_is_refused() {
        assert!(
            read_page(Mem::new(b"ab\0cd".to_vec()), 0, 0, None, &Cancel::default())
                .unwrap_err()
                .to_string()
                .contains("binary")
        );
        assert!(read_page(
            Mem::new(vec![0xff, 0xfe, b'\n']),
            0,
            0,
            None,
            &Cancel::default()
        )
        .unwrap_err()
        .to_string()
        .contains("UTF-8"));
        // Skipping stops when cancelled.
        let cancelled = Cancel::default();
        cancelled.cancel();
        assert!(matches!(
            read_page(Mem::new(b"a\nb\n".to_vec()), 0, 1, None, &cancelled),
            Err(PageError::Cancelled(_))
        ));
    }
}
