//! Tab completion at the prompt: slash commands (`/tree` among them),
//! session names after `/resume`, and paths after `@` (relative to where hel started). Every
//! listing is bounded: one directory, at most [`ENTRIES`] of its entries.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

use super::slash;

/// Directory entries one completion looks at, at most.
const ENTRIES: usize = 4096;
/// Candidates offered, at most.
const OFFERED: usize = 200;

/// Where completion looks: the project's root (its store has the names)
/// and where hel started. Set once the run has started.
#[derive(Default, Clone)]
pub struct Complete {
    pub place: Arc<Mutex<Option<(PathBuf, PathBuf)>>>,
}

impl Complete {
    fn place(&self) -> Option<(PathBuf, PathBuf)> {
        match self.place.lock() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// The word before `pos`: its start and text.
fn word(line: &str, pos: usize) -> (usize, &str) {
    let before = &line[..pos];
    let start = before.rfind(char::is_whitespace).map_or(0, |i| {
        i + before[i..].chars().next().map_or(1, char::len_utf8)
    });
    (start, &before[start..])
}

/// The candidates for `line` with the cursor at `pos`, and where the word
/// they replace starts.
pub fn candidates(
    line: &str,
    pos: usize,
    root: Option<&Path>,
    cwd: Option<&Path>,
) -> (usize, Vec<String>) {
    let (start, w) = word(line, pos);
    if start == 0 && w.starts_with('/') {
        let names = slash::NAMES
            .iter()
            .filter(|n| n.starts_with(w))
            .map(|n| n.to_string())
            .collect();
        return (0, names);
    }
    if let Some(prefix) = w.strip_prefix('@') {
        let Some(cwd) = cwd else {
            return (start, Vec::new());
        };
        let found = paths(cwd, prefix)
            .into_iter()
            .map(|p| format!("@{p}"))
            .collect();
        return (start, found);
    }
    if line[..start].trim_end() == "/resume" {
        if let Some(root) = root {
            return (start, session_names(root, w));
        }
    }
    (start, Vec::new())
}

/// Paths under `cwd` that complete `prefix` (`src/ma` → `src/main.rs`):
/// the entries of one directory, a `/` after directories; hidden entries
/// only for a prefix that starts them with a dot.
fn paths(cwd: &Path, prefix: &str) -> Vec<String> {
    let (dir, stem) = match prefix.rfind('/') {
        Some(i) => (&prefix[..=i], &prefix[i + 1..]),
        None => ("", prefix),
    };
    let Ok(entries) = std::fs::read_dir(cwd.join(if dir.is_empty() { "." } else { dir })) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .take(ENTRIES)
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            if !name.starts_with(stem) || (name.starts_with('.') && !stem.starts_with('.')) {
                return None;
            }
            // Not followed: a link is completed as a name.
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            Some(format!("{dir}{name}{}", if is_dir { "/" } else { "" }))
        })
        .collect();
    out.sort();
    out.truncate(OFFERED);
    out
}

/// The session names of the store at `root` that start with `prefix`.
fn session_names(root: &Path, prefix: &str) -> Vec<String> {
    let Ok(store) = hel_store::Store::open(root) else {
        return Vec::new();
    };
    hel_store::names::all(&store)
        .map(|names| {
            names
                .into_values()
                .filter(|n| n.starts_with(prefix))
                .take(OFFERED)
                .collect()
        })
        .unwrap_or_default()
}

impl Completer for Complete {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let place = self.place();
        let (root, cwd) = match &place {
            Some((r, c)) => (Some(r.as_path()), Some(c.as_path())),
            None => (None, None),
        };
        let (start, found) = candidates(line, pos, root, cwd);
        let pairs = found
            .into_iter()
            .map(|c| Pair {
                // Names from the disk may hold anything: shown escaped.
                display: hel_agent::text::escape_line(&c).into_owned(),
                replacement: c,
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Hinter for Complete {
    type Hint = String;
}

impl Highlighter for Complete {}

impl Validator for Complete {}

impl Helper for Complete {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_paths_and_names() {
        let (start, c) = candidates("/re", 3, None, None);
        assert_eq!(start, 0);
        assert_eq!(c, ["/rename", "/resume", "/retry", "/rewind"]);
        assert_eq!(candidates("/tr", 3, None, None).1, ["/tree"]);
        assert!(
            candidates(" /re", 4, None, None).1.is_empty(),
            "an instruction"
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
        std::fs::write(dir.path().join("src/.hidden"), "").unwrap();
        std::fs::write(dir.path().join("README.md"), "").unwrap();
        let cwd = Some(dir.path());
        let line = "look at @s";
        assert_eq!(
            candidates(line, line.len(), None, cwd),
            (8, vec!["@src/".to_owned()])
        );
        let line = "look at @src/";
        assert_eq!(candidates(line, line.len(), None, cwd).1, ["@src/main.rs"]);
        let line = "@src/.h";
        assert_eq!(candidates(line, line.len(), None, cwd).1, ["@src/.hidden"]);
        assert!(candidates("@nope/x", 7, None, cwd).1.is_empty());
    }
}
