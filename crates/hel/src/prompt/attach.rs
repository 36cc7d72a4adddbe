//! `@path` in an instruction: the file's content goes with it, after the
//! instruction, bounded as read_file's first page is. Only regular files
//! inside the project are read; anything else is said and the word is
//! sent as typed.

use std::io::Read;
use std::path::Path;

use hel_agent::text::escape_line;

/// Bytes of one attached file, at most.
pub const MAX: u64 = 64 << 10;
/// Files one instruction attaches, at most.
const FILES: usize = 8;

/// `text` with the files its `@path` words name attached after it, and a
/// line for each to say on stderr (what was attached, or why not).
/// Paths are relative to `cwd`; a file outside `root` (after links) is
/// not read.
pub fn attach(text: &str, root: &Path, cwd: &Path) -> (String, Vec<String>) {
    let mut out = text.to_owned();
    let mut said = Vec::new();
    let words = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('@'))
        .map(|w| w.trim_end_matches([',', '.', ';', ':', '!', '?', ')']))
        .filter(|w| !w.is_empty());
    for (k, rel) in words.enumerate() {
        let shown = escape_line(rel).into_owned();
        if k == FILES {
            said.push(format!("hel: only the first {FILES} @files are attached"));
            break;
        }
        match read(root, &cwd.join(rel)) {
            Ok((content, size)) => {
                let cut = if size > MAX {
                    format!(", its first {MAX} bytes")
                } else {
                    String::new()
                };
                let size = crate::render::count(size, "byte", "bytes");
                out.push_str(&format!(
                    "\n\n--- @{rel} ({size}{cut}) ---\n{content}\n--- end of @{rel} ---"
                ));
                said.push(format!("hel: attached {shown} ({size}{cut})"));
            }
            Err(why) => said.push(format!(
                "hel: @{shown} is not attached: {why}; sent as typed"
            )),
        }
    }
    (out, said)
}

/// The content (at most [`MAX`] bytes, as text) and size of the regular
/// file at `path`, which must be inside `root`.
fn read(root: &Path, path: &Path) -> Result<(String, u64), String> {
    let real = path.canonicalize().map_err(|e| e.to_string())?;
    let root = root.canonicalize().map_err(|e| e.to_string())?;
    if !real.starts_with(&root) {
        return Err("it is outside the project".into());
    }
    let file = std::fs::File::open(&real).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    let mut bytes = Vec::new();
    file.take(MAX)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.contains(&0) {
        return Err("it is binary".into());
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_attached_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "alpha\n").unwrap();
        std::fs::write(root.join("big"), vec![b'x'; (MAX + 10) as usize]).unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let (text, said) = attach("see @a.txt, please", root, root);
        assert_eq!(
            text,
            "see @a.txt, please\n\n--- @a.txt (6 bytes) ---\nalpha\n\n--- end of @a.txt ---"
        );
        assert_eq!(said, ["hel: attached a.txt (6 bytes)"]);
        let (text, said) = attach("@big", root, root);
        assert_eq!(text.matches('x').count() as u64, MAX);
        assert!(said[0].contains("its first 65536 bytes"), "{said:?}");
        let (text, said) = attach("@link @nope @d", root, root);
        assert_eq!(text, "@link @nope @d");
        assert!(said[0].contains("outside the project"), "{said:?}");
        assert!(said[1].contains("No such file"), "{said:?}");
        assert!(said[2].contains("not a regular file"), "{said:?}");
        assert_eq!(attach("mail me@example.org", root, root).1.len(), 0);
    }
}
