//! read_file: a page of at most 10,000 bytes of a UTF-8 text file, ending
//! at a line boundary, with a cursor to continue.

use std::io::{Read, Seek, SeekFrom};

use serde_json::Value;

use super::cursor::{Cursor, Identity};
use super::paths::Opened;
use super::{arg_str, arg_u64, ToolCtx, ToolResult};

/// Bytes of file content per call.
pub const PAGE_BYTES: usize = 10_000;

/// One page of a read.
#[derive(Debug, PartialEq)]
pub struct Page {
    pub text: String,
    /// Where the next page starts and the lines left, when the range goes on.
    pub next: Option<(u64, Option<u64>)>,
}

/// Read a page starting at byte `offset`, after skipping `skip` lines,
/// covering at most `lines` lines. Streams: whatever the length of a line,
/// at most [`PAGE_BYTES`] + 1 bytes of the page and a 64 KiB buffer for
/// skipping are held.
pub fn read_page<R: Read + Seek>(
    mut src: R,
    offset: u64,
    skip: u64,
    lines: Option<u64>,
) -> Result<Page, String> {
    let pos = if skip > 0 {
        skip_lines(&mut src, offset, skip)?
    } else {
        offset
    };
    src.seek(SeekFrom::Start(pos)).map_err(|e| e.to_string())?;
    // One byte more than a page tells whether the next line fits.
    let mut win = Vec::with_capacity(PAGE_BYTES + 1);
    (&mut src)
        .take(PAGE_BYTES as u64 + 1)
        .read_to_end(&mut win)
        .map_err(|e| e.to_string())?;
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
                        return Err(
                            "binary or non-UTF-8 file: read_file reads UTF-8 text only".into()
                        );
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
        return Err("binary file (it contains NUL bytes): read_file reads text only".into());
    }
    let text = String::from_utf8(win)
        .map_err(|_| "binary or non-UTF-8 file: read_file reads UTF-8 text only".to_owned())?;
    Ok(Page { text, next })
}

/// The offset after `skip` lines from `offset`, counting newlines in
/// chunks (a line is never held whole). A last line without a newline
/// counts as a line.
fn skip_lines<R: Read + Seek>(src: &mut R, offset: u64, skip: u64) -> Result<u64, String> {
    src.seek(SeekFrom::Start(offset))
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut base = offset;
    let mut seen = 0u64;
    let mut partial = false;
    loop {
        let n = match src.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        };
        if n == 0 {
            if partial {
                seen += 1;
                if seen == skip {
                    return Ok(base);
                }
            }
            return Err(format!(
                "start_line {} is beyond the end of the file ({seen} lines)",
                skip + 1
            ));
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
pub fn run(ctx: &mut ToolCtx, args: &Value) -> ToolResult {
    match read(ctx, args) {
        Ok(text) => ToolResult::ok(text),
        Err(e) => ToolResult::failed(format!("error: {e}")),
    }
}

fn read(ctx: &mut ToolCtx, args: &Value) -> Result<String, String> {
    let cursor = arg_str(args, "cursor")?;
    let path = arg_str(args, "path")?;
    let start = arg_u64(args, "start_line")?;
    let max = arg_u64(args, "max_lines")?;
    if let Some(id) = cursor {
        if path.is_some() || start.is_some() || max.is_some() {
            return Err("give either a cursor alone, or a path with an optional range".into());
        }
        let c = ctx
            .cursors
            .get(id)
            .cloned()
            .ok_or_else(|| format!("unknown cursor {id}: read the file again"))?;
        let (src, identity) = open(ctx, &c.path)?;
        if identity != c.identity {
            return Err(format!(
                "{} changed since this cursor was handed out: read it again from the start",
                c.path
            ));
        }
        let page = read_page(src, c.offset, 0, c.lines_left)?;
        return Ok(finish(ctx, &c.path, page, identity));
    }
    let path = path.ok_or("read_file needs a path (or a cursor)")?;
    if start == Some(0) {
        return Err("start_line counts from 1".into());
    }
    let (src, identity) = open(ctx, path)?;
    let page = read_page(src, 0, start.unwrap_or(1) - 1, max)?;
    Ok(finish(ctx, path, page, identity))
}

/// A readable source for `path`, and its identity: spill of this session,
/// or a regular file beneath the project (see [`super::paths`]).
fn open(ctx: &ToolCtx, path: &str) -> Result<(Box<dyn ReadSeek>, Identity), String> {
    // Instance spill is named by its absolute path, outside the project.
    if let Some((bytes, blob)) = ctx.spill.read(path) {
        return Ok((
            Box::new(std::io::Cursor::new(bytes)),
            Identity::Spill {
                blob: blob.to_hex(),
            },
        ));
    }
    match ctx.project_dir.open_file(path)? {
        Opened::File { file, .. } => {
            let meta = file.metadata().map_err(|e| format!("{path}: {e}"))?;
            Ok((Box::new(file), Identity::of(&meta)))
        }
        Opened::Store(rel) => {
            let (bytes, blob) = ctx.spill.read(&rel).ok_or_else(|| {
                format!("{path} is inside .hel/ and not a spill file of this session: refused")
            })?;
            Ok((
                Box::new(std::io::Cursor::new(bytes)),
                Identity::Spill {
                    blob: blob.to_hex(),
                },
            ))
        }
    }
}

trait ReadSeek: Read + Seek {}
impl<T: Read + Seek> ReadSeek for T {}

fn finish(ctx: &mut ToolCtx, path: &str, page: Page, identity: Identity) -> String {
    let mut text = page.text;
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
        read_page(Mem::new(text.as_bytes().to_vec()), offset, skip, lines).unwrap()
    }

    #[test]
    fn ranges() {
        let t = "a\nb\nc\nd\n";
        assert_eq!(
            page(t, 0, 0, None),
            Page {
                text: t.into(),
                next: None
            }
        );
        assert_eq!(
            page(t, 0, 1, Some(2)),
            Page {
                text: "b\nc\n".into(),
                next: None
            }
        );
        assert_eq!(page("a\nb", 0, 1, None).text, "b");
        assert!(read_page(Mem::new(b"a\n".to_vec()), 0, 5, None)
            .unwrap_err()
            .contains("beyond"));
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
        let p = read_page(src, 0, 0, None).unwrap();
        assert_eq!((p.text.len(), p.next), (PAGE_BYTES, Some((10_000, None))));
        assert!(read.get() <= PAGE_BYTES as u64 + 1, "{}", read.get());
        // Skipping the long line streams through it.
        assert_eq!(page(&text, 0, 1, Some(1)).text, "second\n");
        assert_eq!(page(&text, 0, 2, None).text, "third");
        assert_eq!(page(&text, 0, 3, None).text, "");
        assert!(read_page(Mem::new(text.into_bytes()), 0, 4, None)
            .unwrap_err()
            .contains("start_line 5 is beyond the end of the file (3 lines)"));
    }

    #[test]
    fn binary_is_refused() {
        assert!(read_page(Mem::new(b"ab\0cd".to_vec()), 0, 0, None)
            .unwrap_err()
            .contains("binary"));
        assert!(read_page(Mem::new(vec![0xff, 0xfe, b'\n']), 0, 0, None)
            .unwrap_err()
            .contains("UTF-8"));
    }
}
