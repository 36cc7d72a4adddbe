//! What changed between two snapshots: the paths, and for text files a
//! git-style unified diff and line counts.

use std::time::Duration;

use hel_store::tree::EntryKind;
use hel_store::ObjectId;
use serde::Serialize;
use similar::{ChangeTag, TextDiff};

use crate::flat::{Flat, Item};

/// How much of a file is looked at to call it binary (as git does).
const SNIFF: usize = 8000;

/// How long a line diff may search for the smallest diff before it settles
/// for a correct but larger one: a diff of two large, very different files
/// costs bounded time.
const DIFF_TIMEOUT: Duration = Duration::from_secs(2);

/// What happened to a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Only in the new snapshot.
    Added,
    /// Its content changed (and maybe its mode too); for not-tracked files,
    /// its size.
    Modified,
    /// Only in the old snapshot.
    Deleted,
    /// It is something else now: a file became a symlink, a directory, a
    /// repository, or the other way round.
    TypeChanged,
    /// Same content, other permission bits.
    ModeChanged,
}

impl Status {
    /// The lowercase name, as in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Modified => "modified",
            Status::Deleted => "deleted",
            Status::TypeChanged => "type_changed",
            Status::ModeChanged => "mode_changed",
        }
    }
}

/// One changed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: Vec<u8>,
    pub status: Status,
    /// What it was (`None` when added).
    pub old: Option<Item>,
    /// What it is (`None` when deleted).
    pub new: Option<Item>,
}

/// Every path that differs between `old` and `new`, in path order.
///
/// Files, symlinks, not-tracked files and directories, and repositories
/// are compared.
/// Directories appear only when a path switches between a directory and
/// something else ([`Status::TypeChanged`]); otherwise they are ignored,
/// their content being their own paths (and a directory's permission bits
/// are not reported). A file or symlink whose content is equal but whose
/// mode differs is [`Status::ModeChanged`]; one whose content differs is
/// [`Status::Modified`], whatever its mode.
///
/// A not-tracked file's content is unknown (only its size was recorded):
/// against another not-tracked file or a file, it is [`Status::Modified`]
/// when the sizes differ and not reported when they are equal (it may
/// still have changed; an ignored or special file is recorded with size
/// 0). A repository against a repository, and a not-tracked directory
/// against a not-tracked directory, are never reported (hel does not look
/// inside).
pub fn changes(old: &Flat, new: &Flat) -> Vec<Change> {
    let mut out = Vec::new();
    for (path, o) in &old.items {
        let n = new.items.get(path);
        if let Some(status) = status(Some(o), n) {
            out.push(Change {
                path: path.clone(),
                status,
                old: Some(*o),
                new: n.copied(),
            });
        }
    }
    for (path, n) in &new.items {
        if old.items.contains_key(path) {
            continue;
        }
        if let Some(status) = status(None, Some(n)) {
            out.push(Change {
                path: path.clone(),
                status,
                old: None,
                new: Some(*n),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// What happened between `o` and `n`, or `None` for nothing to report.
fn status(o: Option<&Item>, n: Option<&Item>) -> Option<Status> {
    use EntryKind::*;
    let (o, n) = match (o, n) {
        (None, None) => return None,
        (Some(o), None) => return (o.kind != Dir).then_some(Status::Deleted),
        (None, Some(n)) => return (n.kind != Dir).then_some(Status::Added),
        (Some(o), Some(n)) => (o, n),
    };
    match (o.kind, n.kind) {
        (Dir, Dir) | (Repository, Repository) | (NotTrackedDir, NotTrackedDir) => None,
        (NotTracked, NotTracked | File) | (File, NotTracked) => {
            (o.size != n.size).then_some(Status::Modified)
        }
        (File, File) | (Symlink, Symlink) => {
            if o.id != n.id {
                Some(Status::Modified)
            } else if o.mode != n.mode {
                Some(Status::ModeChanged)
            } else {
                None
            }
        }
        _ => Some(Status::TypeChanged),
    }
}

/// Is this content binary: a NUL byte in its first 8000 bytes, or not
/// UTF-8?
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// Both sides as text, or `None` when either is binary (an absent side is
/// empty text).
fn texts<'a>(old: Option<&'a [u8]>, new: Option<&'a [u8]>) -> Option<(&'a str, &'a str)> {
    let text = |b: Option<&'a [u8]>| match b {
        None => Some(""),
        Some(b) if is_binary(b) => None,
        Some(b) => std::str::from_utf8(b).ok(),
    };
    Some((text(old)?, text(new)?))
}

fn line_diff<'a>(old: &'a str, new: &'a str) -> TextDiff<'a, 'a, 'a, str> {
    TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new)
}

/// A git-style unified diff of `path` from `old` to `new` (`None` = the
/// side is absent: `/dev/null`), with `context` lines around each change:
/// `--- a/path` (or `--- /dev/null`), `+++ b/path` (or `+++ /dev/null`),
/// then `@@ -l,n +l,n @@` hunks, a line without a final newline followed
/// by `\ No newline at end of file`. Empty when the texts are equal (or
/// both empty). `None` when either side is binary ([`is_binary`]): the
/// caller prints "Binary files differ". The path is shown as lossy UTF-8.
pub fn unified(
    path: &[u8],
    old: Option<&[u8]>,
    new: Option<&[u8]>,
    context: usize,
) -> Option<String> {
    let (o, n) = texts(old, new)?;
    let name = String::from_utf8_lossy(path);
    let a = match old {
        Some(_) => format!("a/{name}"),
        None => "/dev/null".to_owned(),
    };
    let b = match new {
        Some(_) => format!("b/{name}"),
        None => "/dev/null".to_owned(),
    };
    let diff = line_diff(o, n);
    Some(
        diff.unified_diff()
            .context_radius(context)
            .header(&a, &b)
            .to_string(),
    )
}

/// Lines added and removed (for a `--stat` view).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LineStat {
    pub added: u64,
    pub removed: u64,
}

/// Lines added and removed from `old` to `new` (`None` = absent), or
/// `None` when either side is binary.
pub fn line_stat(old: Option<&[u8]>, new: Option<&[u8]>) -> Option<LineStat> {
    let (o, n) = texts(old, new)?;
    let mut stat = LineStat::default();
    for change in line_diff(o, n).iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => stat.added += 1,
            ChangeTag::Delete => stat.removed += 1,
            ChangeTag::Equal => {}
        }
    }
    Some(stat)
}

/// A change as JSON output shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChangeJson {
    /// The path as lossy UTF-8.
    pub path: String,
    /// `added`, `modified`, `deleted`, `type_changed` or `mode_changed`.
    pub status: Status,
    /// Permission bits in octal (`"644"`), null for an absent side.
    pub old_mode: Option<String>,
    pub new_mode: Option<String>,
    /// Object ids in hex, null for an absent side or one without an object
    /// (not-tracked files, repositories).
    pub old_id: Option<String>,
    pub new_id: Option<String>,
    /// Lines added and removed, null when not counted (binary, or not a
    /// file on both sides).
    pub added: Option<u64>,
    pub removed: Option<u64>,
    /// Whether either side's content is binary.
    pub binary: bool,
}

/// `change` as JSON output shows it, with its line counts when the caller
/// computed them ([`line_stat`]) and whether its content is binary.
pub fn to_json(change: &Change, lines: Option<LineStat>, binary: bool) -> ChangeJson {
    let mode = |i: &Option<Item>| i.map(|i| format!("{:03o}", i.mode));
    let id = |i: &Option<Item>| i.filter(|i| i.id != ObjectId::ZERO).map(|i| i.id.to_hex());
    ChangeJson {
        path: String::from_utf8_lossy(&change.path).into_owned(),
        status: change.status,
        old_mode: mode(&change.old),
        new_mode: mode(&change.new),
        old_id: id(&change.old),
        new_id: id(&change.new),
        added: lines.map(|l| l.added),
        removed: lines.map(|l| l.removed),
        binary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(kind: EntryKind, mode: u16, size: u64, id: u8) -> Item {
        Item {
            kind,
            mode,
            size,
            id: if id == 0 {
                ObjectId::ZERO
            } else {
                ObjectId::from_bytes([id; 32])
            },
        }
    }

    fn file(mode: u16, id: u8) -> Item {
        item(EntryKind::File, mode, 10, id)
    }

    fn flat(items: &[(&str, Item)]) -> Flat {
        Flat {
            items: items
                .iter()
                .map(|(p, i)| (p.as_bytes().to_vec(), *i))
                .collect(),
        }
    }

    fn statuses(c: &[Change]) -> Vec<(&str, Status)> {
        c.iter()
            .map(|c| (std::str::from_utf8(&c.path).unwrap(), c.status))
            .collect()
    }

    #[test]
    fn every_status() {
        let dir = item(EntryKind::Dir, 0o755, 0, 9);
        let link = item(EntryKind::Symlink, 0, 3, 5);
        let old = flat(&[
            ("deleted", file(0o644, 1)),
            ("dir", dir),
            ("dir/same", file(0o644, 2)),
            ("file-to-dir", file(0o644, 3)),
            ("file-to-link", file(0o644, 3)),
            ("link", link),
            ("mode", file(0o644, 4)),
            ("mode-and-content", file(0o644, 4)),
            ("modified", file(0o644, 1)),
            ("old-dir", dir),
            ("same", file(0o644, 1)),
            ("was-dir", dir),
        ]);
        let new = flat(&[
            ("added", file(0o644, 1)),
            // A directory's mode or tree id changing is not reported.
            ("dir", item(EntryKind::Dir, 0o700, 0, 8)),
            ("dir/same", file(0o644, 2)),
            ("file-to-dir", dir),
            ("file-to-link", link),
            ("link", item(EntryKind::Symlink, 0, 4, 6)),
            ("mode", file(0o755, 4)),
            ("mode-and-content", file(0o755, 7)),
            ("modified", file(0o644, 2)),
            ("new-dir", dir),
            ("same", file(0o644, 1)),
            ("was-dir", file(0o644, 1)),
        ]);
        let c = changes(&old, &new);
        assert_eq!(
            statuses(&c),
            [
                ("added", Status::Added),
                ("deleted", Status::Deleted),
                ("file-to-dir", Status::TypeChanged),
                ("file-to-link", Status::TypeChanged),
                ("link", Status::Modified),
                ("mode", Status::ModeChanged),
                ("mode-and-content", Status::Modified),
                ("modified", Status::Modified),
                ("was-dir", Status::TypeChanged),
            ]
        );
        assert_eq!(c[0].old, None);
        assert_eq!(c[0].new, Some(file(0o644, 1)));
        assert_eq!(c[1].new, None);
        assert_eq!(c[2].new, Some(dir));
        assert!(changes(&old, &old).is_empty());
        // Backwards, additions and deletions swap.
        let back = changes(&new, &old);
        assert_eq!(back[0].status, Status::Deleted);
        assert_eq!(back[1].status, Status::Added);
    }

    #[test]
    fn not_tracked_files_compare_by_size_and_repositories_not_at_all() {
        let nt = |size| item(EntryKind::NotTracked, 0, size, 0);
        let repo = item(EntryKind::Repository, 0, 0, 0);
        let old = flat(&[
            ("grew", nt(100)),
            ("same-size", nt(100)),
            ("tracked-now", nt(10)),
            ("untracked-now", file(0o644, 1)),
            ("vendor", repo),
            ("was-repo", repo),
        ]);
        let new = flat(&[
            ("grew", nt(200)),
            ("same-size", nt(100)),
            ("tracked-now", item(EntryKind::File, 0o644, 12, 1)),
            ("untracked-now", nt(10)),
            ("vendor", repo),
            ("was-repo", item(EntryKind::Dir, 0o755, 0, 2)),
        ]);
        assert_eq!(
            statuses(&changes(&old, &new)),
            [
                ("grew", Status::Modified),
                ("tracked-now", Status::Modified),
                ("was-repo", Status::TypeChanged),
            ]
        );
    }

    #[test]
    fn binary_detection() {
        assert!(!is_binary(b""));
        assert!(!is_binary("héllo\n".as_bytes()));
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(b"\xff\xfe"));
        // A NUL past the first 8000 bytes of valid UTF-8 is text.
        let mut late = vec![b'a'; SNIFF];
        late.push(0);
        assert!(!is_binary(&late));
        late.insert(SNIFF - 1, 0);
        assert!(is_binary(&late));
        assert_eq!(unified(b"f", Some(b"a\0"), Some(b"b"), 3), None);
        assert_eq!(unified(b"f", None, Some(b"\x80"), 3), None);
        assert_eq!(line_stat(Some(b"x\n"), Some(b"\0")), None);
    }

    #[test]
    fn unified_diff_is_git_style() {
        let old = b"one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n";
        let new = b"one\ntwo\nTHREE\nfour\nfive\nsix\nseven\neight\nnine";
        let d = unified(b"src/a.txt", Some(old), Some(new), 1).unwrap();
        assert_eq!(
            d,
            "--- a/src/a.txt\n\
             +++ b/src/a.txt\n\
             @@ -2,3 +2,3 @@\n \
             two\n\
             -three\n\
             +THREE\n \
             four\n\
             @@ -8 +8,2 @@\n \
             eight\n\
             +nine\n\
             \\ No newline at end of file\n"
        );
        assert_eq!(
            line_stat(Some(old), Some(new)),
            Some(LineStat {
                added: 2,
                removed: 1
            })
        );
    }

    #[test]
    fn unified_diff_of_added_and_deleted_files() {
        assert_eq!(
            unified(b"new.rs", None, Some(b"fn main() {}\nfoo\n"), 3).unwrap(),
            "--- /dev/null\n+++ b/new.rs\n@@ -0,0 +1,2 @@\n+fn main() {}\n+foo\n"
        );
        assert_eq!(
            unified(b"old.rs", Some(b"bye\n"), None, 3).unwrap(),
            "--- a/old.rs\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
        );
        assert_eq!(unified(b"same", Some(b"x\n"), Some(b"x\n"), 3).unwrap(), "");
        assert_eq!(
            line_stat(None, Some(b"a\nb\nc")),
            Some(LineStat {
                added: 3,
                removed: 0
            })
        );
    }

    #[test]
    fn json_shape() {
        let c = Change {
            path: b"bin/\xffrun".to_vec(),
            status: Status::ModeChanged,
            old: Some(file(0o644, 1)),
            new: Some(file(0o755, 1)),
        };
        let j = to_json(
            &c,
            Some(LineStat {
                added: 0,
                removed: 0,
            }),
            false,
        );
        let hex = ObjectId::from_bytes([1; 32]).to_hex();
        assert_eq!(
            serde_json::to_value(&j).unwrap(),
            serde_json::json!({
                "path": "bin/\u{fffd}run",
                "status": "mode_changed",
                "old_mode": "644",
                "new_mode": "755",
                "old_id": hex,
                "new_id": hex,
                "added": 0,
                "removed": 0,
                "binary": false,
            })
        );
        let added = Change {
            path: b"big".to_vec(),
            status: Status::Added,
            old: None,
            new: Some(item(EntryKind::NotTracked, 0, 5, 0)),
        };
        let j = serde_json::to_value(to_json(&added, None, true)).unwrap();
        assert_eq!(j["status"], "added");
        assert_eq!(j["old_mode"], serde_json::Value::Null);
        assert_eq!(j["new_mode"], "000");
        assert_eq!(j["new_id"], serde_json::Value::Null);
        assert_eq!(j["added"], serde_json::Value::Null);
        assert_eq!(j["binary"], true);
        for s in [
            Status::Added,
            Status::Modified,
            Status::Deleted,
            Status::TypeChanged,
            Status::ModeChanged,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
