//! The workspace safety property of issue 19, "Never lose the user's
//! work": random sequences of user edits and agent edits (write_file,
//! search_replace and bash: create, delete, rename, chmod, mkdir, rmdir,
//! symlinks, `.gitignore` edits, unreadable directories) across
//! instructions, then undos (with and without `--force`, with user edits
//! in between), each checked against a plain model of what the agent
//! changed.
//!
//! The model comes from what the test sees, never from hel. The project
//! is fingerprinted (kind, bytes, mode, link target, inode) at every
//! instruction's start (S) and end (E), and before (N) and after (P) every
//! undo. What the agent changed in instruction j is what differs between
//! S_j and E_j (only the agent runs then); what the user changed is what
//! differs across the test's own edits between hel runs. An undo puts back
//! instruction k: the newest one that changed files and is not yet undone
//! (an undo that leaves a path alone because it changed since the session
//! recorded it leaves its step current, so the next undo applies the same
//! step again; an instruction that changed no files is skipped). Every path then falls in one class:
//! - keep, P = N exactly (same inode too): the agent did not change it in
//!   k or later; or the other session changed it while an instruction
//!   from k on ran; or hel could not know it when k started (it, or a
//!   directory above it, was ignored or unreadable to hel: its content or
//!   its absence was not proven); or the user changed it since k started
//!   (without `--force`);
//! - may restore, P = N or P = S_k: the user changed it since k started
//!   and the undo is forced; or hel could not know it at some later
//!   snapshot;
//! - restore, P = S_k: every other path the agent changed, unless a kept
//!   path stands in the way (a kept path under it, a kept non-directory
//!   above it): then it is P = N and listed as left alone.
//!
//! The report must agree with the disk: exit 1 exactly when something is
//! left alone for a reason other than that no snapshot read it, every path written is as S_k has it, every path removed is
//! absent in S_k, every path left alone is as it was, every path that
//! changed is reported, and text output names the instruction k.
//!
//! Permission bits bind only an unprivileged hel: under root (as in CI)
//! hel runs as `nobody` ([`Unprivileged`]); when that is not possible the
//! test says so and mode 000 hides nothing.
//!
//! A second session works in the same project: between the agent's
//! instructions (what it changes counts as the user's edits do), and
//! during one (the instruction's first command waits until the other
//! session's instruction has ended): what it changed then is its own
//! work, a fourth class below it, kept whatever the undo (P = N, same
//! inode), and named as left alone without failing the undo. Some of the
//! agent's commands leave their edit to a background process that acts
//! once the instruction's last call is made, while hel ends the
//! instruction: it is the agent's like any other.
//!
//! Besides the random cases, two run a random case among many
//! directories: 1,000 siblings and a chain of 100 with `ulimit -n 256`,
//! and 2,000 siblings (with `ulimit -n 1024`, the usual default). Every
//! case runs at most eight hel processes of the agent's session. Random cases of even seeds run
//! hel as it runs by default, watching the project between the snapshots
//! of one run (inotify), those of odd seeds with `HEL_WORKSPACE_NOTIFY=0`;
//! the two crowded cases run both ways. Cases with the other session run
//! more hel processes (one per instruction of it).
//!
//! Knobs: `HEL_UNDO_SAFETY_SEED` (first seed, 19), `HEL_UNDO_SAFETY_CASES`
//! (how many random cases, 40), `HEL_UNDO_SAFETY_SHRINK_SECS` (time spent
//! minimizing a failing case, 60), `HEL_UNDO_SAFETY_ALL` (go on after a
//! failure and report the smallest case of each kind of failure). A
//! failure prints the seed, the smallest failing case found as the
//! commands and edits it runs, and what went wrong.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

/// Names the random paths are made of: `c.log`, `tmp` and `ign` are what
/// the `.gitignore` patterns may ignore.
const NAMES: [&str; 5] = ["a", "b", "c.log", "tmp", "ign"];
/// The only lines a `.gitignore` ever holds here (only at the top), with
/// git's meaning: a name ending in `.log`, a directory named `tmp`,
/// anything named `ign`, at any depth.
const PATTERNS: [&str; 3] = ["*.log", "tmp/", "ign"];
const MODES: [u32; 5] = [0o644, 0o755, 0o600, 0o000, 0o700];

/// Whether `mode` is given to directories too. A directory is readable
/// to hel or not, never listable without entry (`r` without `x`), so that
/// what hel can know of it is plain.
fn for_dirs(mode: u32) -> bool {
    mode & 0o500 == 0o500 || mode == 0
}

/// Link targets: one name, relative to the link's directory, so a link
/// never leads out of the project.
const TARGETS: [&str; 4] = ["a", "b", "tmp", "nowhere"];
/// The longest one hel run may take before the test gives up on it.
const DEADLINE: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------
// The project as the test sees it.

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    File {
        mode: u32,
        bytes: Vec<u8>,
    },
    Link(Vec<u8>),
    Dir {
        mode: u32,
    },
    /// What the test itself cannot read (only when it does not run as
    /// root): its mode only.
    Sealed {
        dir: bool,
        mode: u32,
    },
}

#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    ino: u64,
}

type Fs = BTreeMap<String, Node>;

fn show(n: Option<&Node>) -> String {
    match n.map(|n| &n.kind) {
        None => "absent".into(),
        Some(Kind::File { mode, bytes }) => {
            format!("file {mode:03o} {:?}", String::from_utf8_lossy(bytes))
        }
        Some(Kind::Link(t)) => format!("link -> {}", String::from_utf8_lossy(t)),
        Some(Kind::Dir { mode }) => format!("dir {mode:03o}"),
        Some(Kind::Sealed { dir, mode }) => {
            format!(
                "{} {mode:03o} (unreadable)",
                if *dir { "dir" } else { "file" }
            )
        }
    }
}

/// The same content, mode or target (or both absent).
fn same(a: Option<&Node>, b: Option<&Node>) -> bool {
    a.map(|n| &n.kind) == b.map(|n| &n.kind)
}

/// The same and the very same entry: never rewritten.
fn untouched(a: Option<&Node>, b: Option<&Node>) -> bool {
    same(a, b) && a.map(|n| n.ino) == b.map(|n| n.ino)
}

/// Every path of the project outside `.hel`, never following a link.
fn fingerprint(root: &Path) -> Fs {
    let mut out = Fs::new();
    let mut stack = vec![(root.to_owned(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue; // sealed: recorded as such by its parent
        };
        for e in entries {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            if rel.is_empty() && name == ".hel" {
                continue;
            }
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let meta = fs::symlink_metadata(e.path()).unwrap();
            let mode = meta.mode() & 0o777;
            let kind = if meta.file_type().is_symlink() {
                Kind::Link(
                    fs::read_link(e.path())
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                )
            } else if meta.is_dir() {
                if fs::read_dir(e.path()).is_ok() {
                    stack.push((e.path(), path.clone()));
                    Kind::Dir { mode }
                } else {
                    Kind::Sealed { dir: true, mode }
                }
            } else {
                match fs::read(e.path()) {
                    Ok(bytes) => Kind::File { mode, bytes },
                    Err(_) => Kind::Sealed { dir: false, mode },
                }
            };
            out.insert(
                path,
                Node {
                    kind,
                    ino: meta.ino(),
                },
            );
        }
    }
    out
}

/// The paths whose content, mode or target differ between `a` and `b`.
fn diff(a: &Fs, b: &Fs) -> BTreeSet<String> {
    a.keys()
        .chain(b.keys())
        .filter(|p| !same(a.get(*p), b.get(*p)))
        .cloned()
        .collect()
}

fn is_dir(k: &Kind) -> bool {
    matches!(k, Kind::Dir { .. } | Kind::Sealed { dir: true, .. })
}

/// Whether an unprivileged hel (owning every file) cannot read it.
fn unreadable(k: &Kind) -> bool {
    match k {
        Kind::Dir { mode } => mode & 0o500 != 0o500,
        Kind::File { mode, .. } => mode & 0o400 == 0,
        Kind::Sealed { .. } => true,
        Kind::Link(_) => false,
    }
}

/// Whether hel, looking at `fs`, cannot know what is at `path`: it or a
/// directory above it is ignored or unreadable. A path whose deepest
/// existing ancestor is a fully read directory (or a file or link, under
/// which nothing can be) is known, present or absent.
fn unknown_at(fs: &Fs, path: &str, binds: bool) -> bool {
    let patterns: Vec<&str> = match fs.get(".gitignore").map(|n| &n.kind) {
        Some(Kind::File { bytes, .. }) => String::from_utf8_lossy(bytes)
            .lines()
            .filter_map(|l| PATTERNS.iter().find(|p| **p == l).copied())
            .collect(),
        _ => Vec::new(),
    };
    let ignored = |name: &str, dir: bool| {
        patterns.iter().any(|p| match *p {
            "*.log" => name.ends_with(".log"),
            "tmp/" => dir && name == "tmp",
            _ => name == *p,
        })
    };
    let mut prefix = String::new();
    for name in path.split('/') {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(name);
        let Some(n) = fs.get(&prefix) else {
            return false;
        };
        let dir = is_dir(&n.kind);
        if ignored(name, dir) || (binds && unreadable(&n.kind)) {
            return true;
        }
        if !dir {
            return false;
        }
    }
    false
}

// ---------------------------------------------------------------------
// Edits, by the user (in the test's process) or the agent (tool calls).

#[derive(Clone, Debug)]
enum Edit {
    /// write_file, or with `bash` a shell redirection.
    Write {
        path: String,
        text: String,
        bash: bool,
    },
    /// search_replace of the one `v` in the file by `w`.
    Replace {
        path: String,
    },
    Remove {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Chmod {
        path: String,
        mode: u32,
    },
    Mkdir {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Symlink {
        target: String,
        path: String,
    },
    /// `.gitignore` rewritten with these lines; removed when none.
    Ignore {
        patterns: Vec<&'static str>,
    },
    /// By the agent only: a command that leaves this edit to a process in
    /// the background, made once the instruction's marker exists (after
    /// its last call, while hel ends the instruction).
    Background(Box<Edit>),
}

fn parent_of(path: &str) -> Option<&str> {
    path.rsplit_once('/').map(|(d, _)| d)
}

/// `mkdir -p` of the parent, for a shell command.
fn mkparent(path: &str) -> String {
    parent_of(path).map_or(String::new(), |d| format!("mkdir -p '{d}' && "))
}

impl Edit {
    /// The agent's tool call making this edit in instruction `j`.
    fn tool_call(&self, j: usize) -> Value {
        let bash = |c: String| call("bash", json!({ "command": c }));
        match self {
            Edit::Background(e) => bash(format!(
                "(for i in $(seq 1500); do [ -e step{j}.txt ] && break; sleep 0.02; done; {}) >/dev/null 2>&1 &",
                e.command()
            )),
            Edit::Write {
                path,
                text,
                bash: false,
            } => call("write_file", json!({"path": path, "content": text})),
            Edit::Replace { path } => call(
                "search_replace",
                json!({"path": path, "search": "v", "replace": "w"}),
            ),
            _ => bash(self.command()),
        }
    }

    /// The shell command of this edit.
    fn command(&self) -> String {
        match self {
            Edit::Write { path, text, .. } => format!(
                "{}printf '{}' > '{path}'",
                mkparent(path),
                text.replace('\n', "\\n")
            ),
            Edit::Replace { path } => format!("sed -i s/v/w/ '{path}'"),
            Edit::Remove { path } => format!("rm -rf '{path}'"),
            Edit::Rename { from, to } => format!("{}mv '{from}' '{to}'", mkparent(to)),
            Edit::Chmod { path, mode } if for_dirs(*mode) => format!("chmod {mode:03o} '{path}'"),
            Edit::Chmod { path, mode } => format!("test -d '{path}' || chmod {mode:03o} '{path}'"),
            Edit::Mkdir { path } => format!("mkdir -p '{path}'"),
            Edit::Rmdir { path } => format!("rmdir '{path}'"),
            Edit::Symlink { target, path } => {
                format!("{}ln -s '{target}' '{path}'", mkparent(path))
            }
            Edit::Ignore { patterns } if patterns.is_empty() => "rm -f .gitignore".into(),
            Edit::Ignore { patterns } => {
                format!("printf '{}\\n' > .gitignore", patterns.join("\\n"))
            }
            Edit::Background(e) => format!("({}) &", e.command()),
        }
    }

    /// Make the edit as the user would (as root when the tests run as
    /// root): whatever fails is not made, as for a person.
    fn apply(&self, root: &Path) {
        let at = |p: &str| root.join(p);
        let mkparent = |p: &str| {
            if let Some(d) = parent_of(p) {
                let _ = fs::create_dir_all(at(d));
            }
        };
        match self {
            Edit::Write { path, text, .. } => {
                mkparent(path);
                let _ = fs::write(at(path), text);
            }
            Edit::Replace { path } => {
                if fs::symlink_metadata(at(path)).is_ok_and(|m| m.is_file()) {
                    if let Ok(t) = fs::read_to_string(at(path)) {
                        if t.matches('v').count() == 1 {
                            let _ = fs::write(at(path), t.replacen('v', "w", 1));
                        }
                    }
                }
            }
            Edit::Remove { path } => match fs::symlink_metadata(at(path)) {
                Ok(m) if m.is_dir() => {
                    let _ = fs::remove_dir_all(at(path));
                }
                Ok(_) => {
                    let _ = fs::remove_file(at(path));
                }
                Err(_) => {}
            },
            Edit::Rename { from, to } => {
                mkparent(to);
                let _ = fs::rename(at(from), at(to));
            }
            Edit::Chmod { path, mode } => {
                let meta = fs::symlink_metadata(at(path));
                if meta.is_ok_and(|m| m.is_file() || (m.is_dir() && for_dirs(*mode))) {
                    let _ = fs::set_permissions(at(path), fs::Permissions::from_mode(*mode));
                }
            }
            Edit::Mkdir { path } => {
                let _ = fs::create_dir_all(at(path));
            }
            Edit::Rmdir { path } => {
                let _ = fs::remove_dir(at(path));
            }
            Edit::Symlink { target, path } => {
                mkparent(path);
                let _ = std::os::unix::fs::symlink(target, at(path));
            }
            Edit::Ignore { patterns } if patterns.is_empty() => {
                let _ = fs::remove_file(at(".gitignore"));
            }
            Edit::Ignore { patterns } => {
                let _ = fs::write(at(".gitignore"), format!("{}\n", patterns.join("\n")));
            }
            Edit::Background(e) => e.apply(root),
        }
    }
}

impl fmt::Display for Edit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Edit::Write {
                path,
                text,
                bash: false,
            } => write!(f, "write_file {path} {text:?}"),
            Edit::Replace { path } => write!(f, "search_replace {path} v -> w"),
            Edit::Background(e) => write!(
                f,
                "in the background, once the instruction's marker exists: {}",
                e.command()
            ),
            _ => write!(f, "{}", self.command()),
        }
    }
}

// ---------------------------------------------------------------------
// Cases.

#[derive(Clone, Debug)]
enum Step {
    /// The user's edits, between hel runs.
    User(Vec<Edit>),
    /// One instruction: the agent's tool calls (then it writes its marker
    /// `step<j>.txt`, so that every instruction with calls changes files).
    Agent(Vec<Edit>),
    /// An instruction of another session in the same project (its tool
    /// calls), between the agent's.
    Other(Vec<Edit>),
    /// Another session's instruction (its tool calls) made while the next
    /// instruction of the agent runs: that instruction's first command
    /// waits until it has ended (before it, when it makes no calls).
    Amid(Vec<Edit>),
    Undo {
        force: bool,
        json: bool,
    },
}

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    /// The user's files before the first instruction.
    setup: Vec<Edit>,
    /// Sibling directories `s0000`… (each holding a file `f`), and a chain
    /// of directories `z/z/…/z` (holding `f`), made before everything.
    wide: usize,
    deep: usize,
    /// `ulimit -n` for every hel run.
    nofile: Option<u64>,
    /// Whether hel watches the project between the snapshots of a run
    /// (inotify; `HEL_WORKSPACE_NOTIFY=0` when not).
    notify: bool,
    steps: Vec<Step>,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "case of seed {}:", self.seed)?;
        if self.wide > 0 {
            writeln!(f, "  {} sibling directories sNNNN/f", self.wide)?;
        }
        if self.deep > 0 {
            writeln!(f, "  a chain of {} directories z/z/…/z/f", self.deep)?;
        }
        if let Some(n) = self.nofile {
            writeln!(f, "  every hel run with ulimit -n {n}")?;
        }
        if !self.notify {
            writeln!(f, "  every hel run with HEL_WORKSPACE_NOTIFY=0")?;
        }
        for e in &self.setup {
            writeln!(f, "  setup (user): {e}")?;
        }
        let mut j = 0;
        let mut sid = false;
        for s in &self.steps {
            match s {
                Step::User(edits) => {
                    for e in edits {
                        writeln!(f, "  user: {e}")?;
                    }
                }
                Step::Other(edits) | Step::Amid(edits) => {
                    let when = if matches!(s, Step::Amid(_)) {
                        "while the next instruction's first command waits, "
                    } else {
                        ""
                    };
                    writeln!(f, "  {when}another session's instruction calls:")?;
                    for e in edits {
                        writeln!(f, "      {e}")?;
                    }
                }
                Step::Agent(edits) => {
                    j += 1;
                    let how = if sid { "hel resume SID -p" } else { "hel -p" };
                    sid = true;
                    writeln!(f, "  {how} \"instruction {j}\", the agent calls:")?;
                    for e in edits {
                        writeln!(f, "      {e}")?;
                    }
                    if !edits.is_empty() {
                        writeln!(f, "      write_file step{j}.txt")?;
                    }
                }
                Step::Undo { force, json } => writeln!(
                    f,
                    "  hel undo SID{}{}",
                    if *force { " --force" } else { "" },
                    if *json { " --json" } else { "" }
                )?,
            }
        }
        Ok(())
    }
}

/// A small seeded generator (splitmix64): a case is a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn range(&mut self, lo: u64, hi: u64) -> usize {
        (lo + self.below(hi - lo + 1)) as usize
    }

    fn path(&mut self) -> String {
        let depth = match self.below(100) {
            0..=44 => 1,
            45..=84 => 2,
            _ => 3,
        };
        (0..depth)
            .map(|_| self.pick(&NAMES))
            .collect::<Vec<_>>()
            .join("/")
    }

    fn text(&mut self) -> String {
        format!("{}{}\n", self.pick(&["v", "w"]), self.below(10))
    }

    /// One edit; `creating` favours new files and directories (a setup).
    fn edit(&mut self, creating: bool) -> Edit {
        let roll = if creating {
            self.pick(&[0, 0, 0, 0, 0, 5, 5, 7, 8, 4])
        } else {
            match self.below(100) {
                0..=24 => 0,
                25..=32 => 1,
                33..=44 => 2,
                45..=54 => 3,
                55..=66 => 4,
                67..=76 => 5,
                77..=81 => 6,
                82..=89 => 7,
                _ => 8,
            }
        };
        match roll {
            0 => Edit::Write {
                path: self.path(),
                text: self.text(),
                bash: self.chance(30),
            },
            1 => Edit::Replace { path: self.path() },
            2 => Edit::Remove { path: self.path() },
            3 => Edit::Rename {
                from: self.path(),
                to: self.path(),
            },
            4 => Edit::Chmod {
                path: self.path(),
                mode: self.pick(&MODES),
            },
            5 => Edit::Mkdir { path: self.path() },
            6 => Edit::Rmdir { path: self.path() },
            7 => Edit::Symlink {
                target: self.pick(&TARGETS).to_owned(),
                path: self.path(),
            },
            _ => Edit::Ignore {
                patterns: PATTERNS
                    .iter()
                    .copied()
                    .filter(|_| self.chance(50))
                    .collect(),
            },
        }
    }

    fn edits(&mut self, lo: u64, hi: u64) -> Vec<Edit> {
        (0..self.range(lo, hi)).map(|_| self.edit(false)).collect()
    }
}

/// The random case of `seed`: a setup, one to four instructions, then one
/// to four undos, user edits between any two; hel watches the project
/// between snapshots when `notify`.
fn case(seed: u64, notify: bool) -> Case {
    let mut r = Rng(seed);
    let mut setup: Vec<Edit> = (0..r.range(3, 8)).map(|_| r.edit(true)).collect();
    // Often a private directory of the user's (mode 000, holding a file),
    // and now and then an agent opening a directory up: what hel could not
    // read it must never remove.
    if r.chance(40) {
        let dir = r.pick(&NAMES).to_owned();
        setup.push(Edit::Write {
            path: format!("{dir}/notes"),
            text: "the user's\n".into(),
            bash: false,
        });
        setup.push(Edit::Chmod { path: dir, mode: 0 });
    }
    let mut steps = Vec::new();
    for _ in 0..r.range(1, 4) {
        if r.chance(50) {
            steps.push(Step::User(r.edits(1, 3)));
        }
        let mut calls = if r.chance(10) {
            Vec::new()
        } else {
            r.edits(1, 5)
        };
        if !calls.is_empty() && r.chance(25) {
            let at = r.range(0, calls.len() as u64);
            let open = Edit::Chmod {
                path: r.pick(&NAMES).to_owned(),
                mode: r.pick(&[0o755, 0o700]),
            };
            calls.insert(at, open);
        }
        // Now and then a command leaves its edit to a process in the
        // background, and another session works in the project: between
        // the agent's instructions, or during one.
        for c in calls.iter_mut() {
            if r.chance(15) {
                *c = Edit::Background(Box::new(c.clone()));
            }
        }
        if r.chance(25) {
            steps.push(Step::Other(r.edits(1, 3)));
        }
        if r.chance(30) {
            steps.push(Step::Amid(r.edits(1, 3)));
        }
        steps.push(Step::Agent(calls));
    }
    for _ in 0..r.range(1, 4) {
        if r.chance(50) {
            steps.push(Step::User(r.edits(1, 3)));
        }
        steps.push(Step::Undo {
            force: r.chance(30),
            json: r.chance(50),
        });
    }
    Case {
        seed,
        setup,
        wide: 0,
        deep: 0,
        nofile: None,
        notify,
        steps,
    }
}

// ---------------------------------------------------------------------
// Running a case.

/// What went wrong, and a short name of it, so that minimizing keeps to
/// the same failure.
#[derive(Debug)]
struct Failure {
    kind: String,
    detail: String,
}

fn fail<T>(kind: impl Into<String>, detail: String) -> Result<T, Failure> {
    Err(Failure {
        kind: kind.into(),
        detail,
    })
}

/// What hel said when it failed, without what names a case's paths and
/// objects: `restore: ign/a is in no directory` is the kind `restore: … is
/// in no directory`.
fn gist(stderr: &str) -> String {
    let last = stderr.lines().last().unwrap_or("");
    let last = last.strip_prefix("hel: ").unwrap_or(last);
    last.split(' ')
        .map(|w| {
            let bare = w.trim_matches(|c: char| "()\"',:;.".contains(c));
            let named = bare.contains('/')
                || bare.chars().any(|c| c.is_ascii_digit())
                || NAMES.contains(&bare);
            if named {
                "…"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One hel run, given up (its process group killed) after [`DEADLINE`].
fn run(mut cmd: Command) -> Run {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => {
            let out = out.unwrap();
            Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        }
        Err(_) => {
            // hel is the leader of its own process group (it runs setsid).
            let group = rustix::process::Pid::from_raw(pid as i32).unwrap();
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            panic!("hel ran for over {DEADLINE:?}: {:?}", cmd.get_args());
        }
    }
}

/// What `hel undo` reported.
#[derive(Debug, Default)]
struct Report {
    written: BTreeSet<String>,
    removed: BTreeSet<String>,
    left_alone: BTreeMap<String, String>,
    /// Some path was left alone because it changed since the session
    /// recorded it: the undo's step stays current.
    refused: bool,
    /// Some path was left alone for a reason other than that no snapshot
    /// read it: the exit code is 1.
    failed: bool,
    /// The instruction its text output names.
    instruction: Option<String>,
}

/// Whether a reason printed for a path left alone says no snapshot read
/// it or another session changed it (never written or removed: not a
/// failure), and whether it says the path changed since the session
/// recorded it (what `--force` writes).
fn reason_class(why: &str) -> (bool, bool) {
    (
        why.starts_with("not read by the snapshot") || why.starts_with("changed by session "),
        why.starts_with("changed since the session recorded it"),
    )
}

fn report(out: &Run, json: bool) -> Option<Report> {
    let mut r = Report::default();
    if json {
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        let list = |k: &str| -> Option<BTreeSet<String>> {
            v[k].as_array()?
                .iter()
                .map(|p| p.as_str().map(str::to_owned))
                .collect()
        };
        r.written = list("written")?;
        r.removed = list("removed")?;
        for c in v["conflicts"].as_array()? {
            let kind = c["kind"].as_str()?;
            r.refused |= kind == "changed";
            r.failed |= kind != "not_read" && kind != "other_session";
            r.left_alone.insert(
                c["path"].as_str()?.to_owned(),
                c["reason"].as_str()?.to_owned(),
            );
        }
        return Some(r);
    }
    let mut summary = None;
    // The plan's lines come first; a planned write that could not be made
    // is listed again as left alone after them.
    for line in out.stdout.lines() {
        if let Some(p) = line.strip_prefix("  restore   ") {
            r.written.insert(p.to_owned());
        } else if let Some(p) = line.strip_prefix("  remove    ") {
            r.removed.insert(p.to_owned());
        } else if let Some(rest) = line.strip_prefix("  left alone  ") {
            let (p, why) = rest.split_once(": ")?;
            let (not_read, changed) = reason_class(why);
            r.refused |= changed;
            r.failed |= !not_read;
            r.written.remove(p);
            r.removed.remove(p);
            r.left_alone.insert(p.to_owned(), why.to_owned());
        } else if let Some((_, name)) = line.split_once(": the files as they were before \"") {
            // After the name may come "(skipped N instructions that
            // changed no file)".
            let name = name.split("\" (skipped ").next().unwrap_or(name);
            r.instruction = Some(name.trim_end_matches('"').to_owned());
        } else if line.contains(" restored, ") {
            summary = Some(line.to_owned());
        }
    }
    let files = match r.written.len() {
        1 => "1 file".to_owned(),
        n => format!("{n} files"),
    };
    let counts = format!(
        "{files} restored, {} removed, {} left alone",
        r.removed.len(),
        r.left_alone.len()
    );
    summary.filter(|s| s.starts_with(&counts))?;
    Some(r)
}

/// The class of a path for an undo (see the module's doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Keep(&'static str),
    May(&'static str),
    Restore,
}

/// A case being run: the project and everything seen of it.
struct Trial<'a> {
    case: &'a Case,
    who: &'a Unprivileged,
    p: Project,
    sid: Option<String>,
    /// Every fingerprint taken, in order; `now` is the index of the last.
    seen: Vec<Fs>,
    /// Per instruction: the index of its start and end fingerprints, and
    /// whether it changed files (it made tool calls).
    instructions: Vec<(usize, usize, bool)>,
    /// Per user step: the index of the fingerprint before it, and what it
    /// changed.
    user: Vec<(usize, BTreeSet<String>)>,
    /// The instruction the next undo puts back; set at the first undo.
    step: Option<Option<usize>>,
    undos: usize,
    /// The other session, once it ran an instruction.
    other_sid: Option<String>,
    /// Its edits to make during the agent's next instruction.
    amid: Option<Vec<Edit>>,
    /// Per agent instruction: what the other session changed while it ran.
    during: BTreeMap<usize, BTreeSet<String>>,
    /// Where the agent's waiting command and the test signal each other
    /// (outside the project; commands may write it).
    sig: tempfile::TempDir,
}

impl Drop for Trial<'_> {
    /// Open every directory up again, so the temporary project can go
    /// when the tests do not run as root.
    fn drop(&mut self) {
        let mut stack = vec![self.p.dir.path().to_owned()];
        while let Some(dir) = stack.pop() {
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
            for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
}

impl Trial<'_> {
    fn now(&self) -> usize {
        self.seen.len() - 1
    }

    fn observe(&mut self) -> usize {
        self.seen.push(fingerprint(&self.p.path()));
        self.now()
    }

    fn hel(&self, mock: Option<&Mock>, args: &[&str]) -> Run {
        run(self.command(mock, args))
    }

    fn command(&self, mock: Option<&Mock>, args: &[&str]) -> Command {
        let mut cmd = self.who.hel(&self.p, mock);
        if let Some(n) = self.case.nofile {
            limit_open_files(&mut cmd, n);
        }
        if !self.case.notify {
            cmd.env("HEL_WORKSPACE_NOTIFY", "0");
        }
        cmd.args(args);
        cmd
    }

    fn setup(&mut self) {
        let root = self.p.path();
        for i in 0..self.case.wide {
            let d = root.join(format!("s{i:04}"));
            fs::create_dir(&d).unwrap();
            fs::write(d.join("f"), format!("sibling {i}\n")).unwrap();
        }
        if self.case.deep > 0 {
            let chain = vec!["z"; self.case.deep].join("/");
            fs::create_dir_all(root.join(&chain)).unwrap();
            fs::write(root.join(chain).join("f"), "deep\n").unwrap();
        }
        for e in &self.case.setup {
            e.apply(&root);
        }
        self.who.hand_over(&self.p);
        self.observe();
    }

    fn user(&mut self, edits: &[Edit]) {
        let before = self.now();
        for e in edits {
            e.apply(&self.p.path());
        }
        self.who.hand_over(&self.p);
        let after = self.observe();
        let changed = diff(&self.seen[before], &self.seen[after]);
        self.user.push((before, changed));
    }

    /// An instruction of the other session making `calls`; what it
    /// changed.
    fn other(&mut self, calls: &[Edit]) -> Result<BTreeSet<String>, Failure> {
        let mut script: Vec<Value> = calls
            .iter()
            .map(|e| json!({ "tool_calls": [e.tool_call(0)] }))
            .collect();
        script.push(json!({ "content": "done" }));
        let mock = Mock::start(Value::Array(script));
        let before = self.observe();
        let out = match &self.other_sid {
            None => self.hel(Some(&mock), &["--access", "auto", "-p", "the other's"]),
            Some(sid) => self.hel(
                Some(&mock),
                &["--access", "auto", "resume", sid, "-p", "the other's"],
            ),
        };
        if out.code != 0 || !out.stderr.starts_with("session: ") {
            return fail(
                format!(
                    "the other session's instruction failed: {}",
                    gist(&out.stderr)
                ),
                format!("exit {}\nstderr:\n{}", out.code, out.stderr),
            );
        }
        self.other_sid.get_or_insert_with(|| out.session());
        let after = self.observe();
        Ok(diff(&self.seen[before], &self.seen[after]))
    }

    /// The other session's instruction between the agent's: what it
    /// changed counts as the user's edits do.
    fn other_between(&mut self, calls: &[Edit]) -> Result<(), Failure> {
        let before = self.now();
        let changed = self.other(calls)?;
        self.user.push((before, changed));
        Ok(())
    }

    fn agent(&mut self, calls: &[Edit]) -> Result<(), Failure> {
        let j = self.instructions.len() + 1;
        let mut amid = self.amid.take();
        // An instruction without calls of its own has no command to wait
        // in: the other session's instruction comes before it. (One whose
        // only call waits for the other session records what changed
        // meanwhile: an undo step that leaves it all alone.)
        if calls.is_empty() {
            if let Some(edits) = amid.take() {
                self.other_between(&edits)?;
            }
        }
        let (waits, go) = (
            self.sig.path().join(format!("waits{j}")),
            self.sig.path().join(format!("go{j}")),
        );
        let mut script: Vec<Value> = Vec::new();
        if amid.is_some() {
            script.push(
                json!({ "tool_calls": [call("bash", json!({ "command": format!(
                "touch '{}'; for i in $(seq 3000); do [ -e '{}' ] && break; sleep 0.02; done",
                waits.display(),
                go.display()
            )}))] }),
            );
        }
        script.extend(
            calls
                .iter()
                .map(|e| json!({ "tool_calls": [e.tool_call(j)] })),
        );
        let marker = format!("step{j}.txt");
        if !calls.is_empty() {
            script.push(json!({ "tool_calls": [call("write_file", json!({
                "path": marker, "content": format!("instruction {j}\n")
            }))] }));
        }
        script.push(json!({ "content": "done" }));
        let mock = Mock::start(Value::Array(script));
        let prompt = format!("instruction {j}");
        let start = self.now();
        let sig = self.sig.path().to_str().unwrap().to_owned();
        let mut args = vec!["--access", "auto", "--allow-write", sig.as_str()];
        if let Some(sid) = &self.sid {
            args.extend(["resume", sid.as_str()]);
        }
        args.extend(["-p", prompt.as_str()]);
        let out = match amid {
            None => self.hel(Some(&mock), &args),
            Some(edits) => {
                let cmd = self.command(Some(&mock), &args);
                let agent = std::thread::spawn(move || run(cmd));
                let deadline = Instant::now() + DEADLINE;
                while !waits.exists() && !agent.is_finished() {
                    assert!(Instant::now() < deadline, "the agent's command never ran");
                    std::thread::sleep(Duration::from_millis(10));
                }
                let other = if agent.is_finished() {
                    Ok(BTreeSet::new())
                } else {
                    self.other(&edits)
                };
                fs::write(&go, "").unwrap();
                let out = agent.join().unwrap();
                self.during.insert(j - 1, other?);
                out
            }
        };
        if out.code != 0 || !out.stderr.starts_with("session: ") {
            let last = out.stderr.lines().last().unwrap_or("");
            return fail(
                format!("an instruction failed: {}", gist(&out.stderr)),
                format!(
                    "instruction {j}: exit {}\n  it said: {last}\nstdout:\n{}\nstderr:\n{}",
                    out.code, out.stdout, out.stderr
                ),
            );
        }
        self.sid.get_or_insert_with(|| out.session());
        // A checkpoint without a snapshot cannot be undone: hel says so
        // in a warning.
        if let Some(line) = out.stderr.lines().find(|l| l.contains("cannot snapshot")) {
            return fail(
                format!("an instruction's snapshot failed: {}", gist(line)),
                format!(
                    "instruction {j}:\n  it said: {line}\nstderr:\n{}",
                    out.stderr
                ),
            );
        }
        let end = self.observe();
        if !calls.is_empty() && !self.seen[end].contains_key(&marker) {
            return fail(
                "an instruction did not run all its calls",
                format!("instruction {j} did not write {marker}:\n{}", out.stderr),
            );
        }
        self.instructions.push((start, end, !calls.is_empty()));
        Ok(())
    }

    /// The newest instruction before `before` (all when None) that
    /// changed files.
    fn previous(&self, before: Option<usize>) -> Option<usize> {
        let end = before.unwrap_or(self.instructions.len());
        (0..end).rev().find(|&j| self.instructions[j].2)
    }

    fn undo(&mut self, force: bool, json: bool) -> Result<(), Failure> {
        self.undos += 1;
        let u = self.undos;
        let target = match self.step {
            Some(t) => t,
            None => self.previous(None),
        };
        self.step = Some(target);
        let sid = self.sid.clone().expect("a case starts with an instruction");
        let mut args = vec!["undo", sid.as_str()];
        if force {
            args.push("--force");
        }
        if json {
            args.push("--json");
        }
        let n = self.now();
        let out = self.hel(None, &args);
        let p = self.observe();
        let what = format!(
            "undo #{u} (hel undo SID{}{}), expected to put back {}",
            if force { " --force" } else { "" },
            if json { " --json" } else { "" },
            target.map_or("nothing".into(), |k| format!("instruction {}", k + 1))
        );
        let hel_said = format!(
            "hel undo exited {}\nstdout:\n{}stderr:\n{}",
            out.code, out.stdout, out.stderr
        );
        let (now, after) = (&self.seen[n], &self.seen[p]);
        let Some(k) = target else {
            let changed = diff(now, after);
            if out.code != 1 || !out.stderr.contains("nothing to undo") || !changed.is_empty() {
                return fail(
                    "an undo with nothing left to undo did something else",
                    format!("{what}; changed on disk: {changed:?}\n{hel_said}"),
                );
            }
            return Ok(());
        };
        let Some(rep) = report(&out, json) else {
            let last = out.stderr.lines().last().unwrap_or("");
            return fail(
                format!("hel undo failed: {}", gist(&out.stderr)),
                format!("{what}\n  it said: {last}\n{hel_said}"),
            );
        };
        let refused = self
            .check(k, force, n, p, &rep, out.code)
            .map_err(|v| Failure {
                kind: v[0].0.to_owned(),
                detail: format!(
                    "{what}\n{}\n{hel_said}",
                    v.iter()
                        .map(|(_, s)| format!("  {s}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            })?;
        if !refused {
            self.step = Some(self.previous(Some(k)));
        }
        Ok(())
    }

    /// The undo of instruction `k` that turned fingerprint `n` into `p`
    /// and reported `rep`, against the model: whether it left something
    /// alone, or every violation found.
    fn check(
        &self,
        k: usize,
        force: bool,
        n: usize,
        p: usize,
        rep: &Report,
        code: i32,
    ) -> Result<bool, Vec<(&'static str, String)>> {
        let binds = self.who.binds();
        let (s_at, _, _) = self.instructions[k];
        let (start, now, after) = (&self.seen[s_at], &self.seen[n], &self.seen[p]);
        let agent: BTreeSet<String> = self.instructions[k..]
            .iter()
            .flat_map(|&(s, e, _)| diff(&self.seen[s], &self.seen[e]))
            .collect();
        let user: BTreeSet<String> = self
            .user
            .iter()
            .filter(|(before, _)| *before >= s_at)
            .flat_map(|(_, c)| c.iter().cloned())
            .collect();
        // What the other session changed while an instruction from k on
        // ran: its own work, never touched, forced or not.
        let other: BTreeSet<String> = self
            .during
            .range(k..)
            .flat_map(|(_, c)| c.iter().cloned())
            .collect();
        // What hel saw since k started: its start, ends, before-restores
        // and restores (the fingerprint after this undo excluded).
        let later = &self.seen[s_at..p];
        let class = |path: &str| {
            if !agent.contains(path) {
                Class::Keep("not changed by the agent since instruction k started")
            } else if other.contains(path) {
                Class::Keep("changed by another session while an instruction from k on ran")
            } else if unknown_at(start, path, binds) {
                Class::Keep("unknown to hel when instruction k started (ignored or unreadable, or under such a directory)")
            } else if user.contains(path) && !force {
                Class::Keep("changed by the user since instruction k started")
            } else if user.contains(path) {
                Class::May("changed by the user since instruction k started, and --force")
            } else if later.iter().any(|fs| unknown_at(fs, path, binds)) {
                Class::May("unknown to hel at a snapshot after instruction k started")
            } else {
                Class::Restore
            }
        };
        let under = |a: &str, b: &str| {
            b.len() > a.len() && b.starts_with(a) && b.as_bytes()[a.len()] == b'/'
        };
        // A kept path under it, or a kept non-directory above it, keeps an
        // agent path from being put back.
        let blocked = |path: &str| {
            let gone = !start.get(path).is_some_and(|n| is_dir(&n.kind));
            let below = gone
                && now
                    .keys()
                    .any(|d| under(path, d) && class(d) != Class::Restore);
            let above = start.contains_key(path)
                && std::iter::successors(parent_of(path), |q| parent_of(q)).any(|q| {
                    class(q) != Class::Restore && !now.get(q).is_some_and(|n| is_dir(&n.kind))
                });
            below || above
        };
        let mut paths: BTreeSet<&str> = BTreeSet::new();
        paths.extend(start.keys().map(String::as_str));
        paths.extend(now.keys().map(String::as_str));
        paths.extend(after.keys().map(String::as_str));
        paths.extend(agent.iter().map(String::as_str));
        paths.extend(rep.written.iter().map(String::as_str));
        paths.extend(rep.removed.iter().map(String::as_str));
        paths.extend(rep.left_alone.keys().map(String::as_str));
        let mut bad = Vec::new();
        let state = |path: &str| {
            format!(
                "at instruction {} start: {}; before the undo: {}; after: {}",
                k + 1,
                show(start.get(path)),
                show(now.get(path)),
                show(after.get(path))
            )
        };
        for path in paths {
            let (s, n, a) = (start.get(path), now.get(path), after.get(path));
            match class(path) {
                Class::Keep(why) => {
                    if !untouched(n, a) {
                        let how = if same(n, a) { " (rewritten)" } else { "" };
                        bad.push((
                            "an undo changed a path it must keep",
                            format!("{path}{how}: {why}; {}", state(path)),
                        ));
                    }
                }
                Class::May(why) => {
                    if !same(a, n) && !same(a, s) {
                        bad.push((
                            "an undo wrote what was neither there nor at the start",
                            format!("{path}: {why}; {}", state(path)),
                        ));
                    }
                }
                Class::Restore if same(a, s) => {}
                Class::Restore if blocked(path) => {
                    if !(rep.left_alone.contains_key(path) && untouched(n, a)) {
                        bad.push((
                            "an undo neither restored an agent path nor left it alone and said so",
                            format!("{path}: {}", state(path)),
                        ));
                    }
                }
                Class::Restore => bad.push((
                    "an undo did not restore a path only the agent changed",
                    format!(
                        "{path}: {}{}",
                        state(path),
                        rep.left_alone
                            .get(path)
                            .map_or(String::new(), |why| format!(" (left alone: {why})"))
                    ),
                )),
            }
            let reported = rep.written.contains(path) || rep.removed.contains(path);
            if reported && matches!(class(path), Class::Keep(_)) {
                bad.push((
                    "an undo reported writing a path it must keep",
                    format!("{path}: {}", state(path)),
                ));
            }
            if rep.written.contains(path) && (a.is_none() || !same(a, s)) {
                bad.push((
                    "an undo reported restoring what it did not restore",
                    format!("{path}: {}", state(path)),
                ));
            }
            if rep.removed.contains(path) && (a.is_some() || s.is_some()) {
                bad.push((
                    "an undo reported removing what it did not remove",
                    format!("{path}: {}", state(path)),
                ));
            }
            if rep.left_alone.contains_key(path) && !untouched(n, a) {
                bad.push((
                    "an undo changed a path it reported leaving alone",
                    format!("{path}: {}", state(path)),
                ));
            }
            if !untouched(n, a) && !reported {
                bad.push((
                    "an undo changed a path it did not report",
                    format!("{path}: {}", state(path)),
                ));
            }
        }
        if code != i32::from(rep.failed) {
            bad.push((
                "an undo's exit code disagrees with its report",
                format!(
                    "exit {code} with {} paths left alone ({})",
                    rep.left_alone.len(),
                    if rep.failed {
                        "some refused or not written"
                    } else {
                        "only what no snapshot read"
                    }
                ),
            ));
        }
        if let Some(name) = &rep.instruction {
            if *name != format!("instruction {}", k + 1) {
                bad.insert(
                    0,
                    (
                        "an undo put back another instruction",
                        format!("it names {name:?}"),
                    ),
                );
            }
        }
        // Another instruction's marker gone: the undo put back another
        // instruction (what text output names is checked above).
        for j in (0..self.instructions.len()).filter(|&j| j != k) {
            let marker = format!("step{}.txt", j + 1);
            if now.contains_key(&marker) && !after.contains_key(&marker) {
                bad.insert(
                    0,
                    (
                        "an undo put back another instruction",
                        format!("it removed {marker}"),
                    ),
                );
            }
        }
        // One line per path: the first thing wrong with it.
        let mut seen = BTreeSet::new();
        bad.retain(|(_, line)| seen.insert(line.split(':').next().unwrap_or("").to_owned()));
        if bad.is_empty() {
            Ok(rep.refused)
        } else {
            Err(bad)
        }
    }
}

/// Run `case`, stopping at the first failure.
fn attempt(case: &Case, who: &Unprivileged) -> Result<(), Failure> {
    let mut t = Trial {
        case,
        who,
        p: Project::new(),
        sid: None,
        seen: Vec::new(),
        instructions: Vec::new(),
        user: Vec::new(),
        step: None,
        undos: 0,
        other_sid: None,
        amid: None,
        during: BTreeMap::new(),
        sig: tempfile::tempdir().unwrap(),
    };
    // The agent's commands write their signals here, as whoever runs hel.
    fs::set_permissions(t.sig.path(), fs::Permissions::from_mode(0o777)).unwrap();
    t.who.hand_over(&t.p);
    t.setup();
    for s in &case.steps {
        match s {
            Step::User(edits) => t.user(edits),
            Step::Other(edits) => t.other_between(edits)?,
            Step::Amid(edits) => t.amid = Some(edits.clone()),
            Step::Agent(calls) => t.agent(calls)?,
            Step::Undo { force, json } => t.undo(*force, *json)?,
        }
    }
    Ok(())
}

/// Smaller cases than `case`: a step, an edit, a flag or a part of the
/// setup less, keeping an instruction and an undo.
fn smaller(case: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    let agents = case
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Agent(_)))
        .count();
    let undos = case
        .steps
        .iter()
        .filter(|s| matches!(s, Step::Undo { .. }))
        .count();
    for i in 0..case.steps.len() {
        let last = match case.steps[i] {
            Step::Agent(_) => agents == 1,
            Step::Undo { .. } => undos == 1,
            Step::User(_) | Step::Other(_) | Step::Amid(_) => false,
        };
        if !last {
            let mut c = case.clone();
            c.steps.remove(i);
            out.push(c);
        }
    }
    for i in 0..case.steps.len() {
        let edits = match &case.steps[i] {
            Step::User(e) | Step::Agent(e) | Step::Other(e) | Step::Amid(e) => e.len(),
            Step::Undo { force, json } => {
                for (f, j) in [(false, *json), (*force, false)] {
                    if (f, j) != (*force, *json) {
                        let mut c = case.clone();
                        c.steps[i] = Step::Undo { force: f, json: j };
                        out.push(c);
                    }
                }
                0
            }
        };
        for e in 0..edits {
            let mut c = case.clone();
            if let Step::User(v) | Step::Agent(v) | Step::Other(v) | Step::Amid(v) = &mut c.steps[i]
            {
                v.remove(e);
            }
            out.push(c);
        }
    }
    for e in 0..case.setup.len() {
        let mut c = case.clone();
        c.setup.remove(e);
        out.push(c);
    }
    for (wide, deep) in [(case.wide / 2, case.deep), (case.wide, case.deep / 2)] {
        if (wide, deep) != (case.wide, case.deep) {
            let mut c = case.clone();
            c.wide = wide;
            c.deep = deep;
            out.push(c);
        }
    }
    out
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Smallest case failing like `case` does (with `failure`) found within
/// the time budget, and how many smaller cases were tried.
fn minimize(case: &Case, failure: Failure, who: &Unprivileged) -> (Case, Failure, usize) {
    let budget = Duration::from_secs(env_u64("HEL_UNDO_SAFETY_SHRINK_SECS", 60));
    let until = Instant::now() + budget;
    let (mut best, mut failure, mut tries) = (case.clone(), failure, 0);
    'shrink: while Instant::now() < until {
        for c in smaller(&best) {
            if Instant::now() >= until {
                break 'shrink;
            }
            tries += 1;
            if let Err(f) = attempt(&c, who) {
                if f.kind == failure.kind {
                    (best, failure) = (c, f);
                    continue 'shrink;
                }
            }
        }
        break;
    }
    (best, failure, tries)
}

/// Run every case; at the first failure, look for a smaller case failing
/// the same way and fail with it. With `HEL_UNDO_SAFETY_ALL` set, go on
/// through every case and fail with the smallest case of each kind of
/// failure (and a line per failing case on stderr).
fn check_all(cases: impl IntoIterator<Item = Case>) {
    let who = Unprivileged::get();
    if let Some(note) = &who.note {
        eprintln!(
            "note: {note}: hel runs as root, so a mode-000 directory is readable to it and the unreadable cases check less"
        );
    }
    let all = std::env::var_os("HEL_UNDO_SAFETY_ALL").is_some();
    let started = Instant::now();
    let mut ran = 0;
    let mut failed = 0;
    let mut found: Vec<(String, String)> = Vec::new();
    for case in cases {
        ran += 1;
        let Err(first) = attempt(&case, &who) else {
            continue;
        };
        failed += 1;
        if all {
            let line = first.detail.lines().nth(1).unwrap_or("");
            eprintln!("seed {}: {}: {line}", case.seed, first.kind);
        }
        if found.iter().any(|(k, _)| *k == first.kind) {
            continue;
        }
        let kind = first.kind.clone();
        let (best, failure, tries) = minimize(&case, first, &who);
        found.push((
            kind,
            format!(
                "{}\n\nthe smallest failing case found ({tries} smaller cases tried; the seed runs again with HEL_UNDO_SAFETY_SEED={} HEL_UNDO_SAFETY_CASES=1):\n{best}\n{}",
                failure.kind, case.seed, failure.detail
            ),
        ));
        if !all {
            break;
        }
    }
    let how = if who.ids.is_some() {
        " (hel ran as nobody)"
    } else {
        ""
    };
    let took = started.elapsed().as_secs_f64();
    if !found.is_empty() {
        let text: Vec<&str> = found.iter().map(|(_, t)| t.as_str()).collect();
        panic!(
            "{failed} of {ran} cases run failed{how}, in {took:.1}s, in {} ways:\n\n{}",
            found.len(),
            text.join("\n\n----\n\n")
        );
    }
    eprintln!("{ran} cases passed in {took:.1}s{how}");
}

#[test]
fn random_edits_and_undos_never_lose_the_users_work() {
    let first = env_u64("HEL_UNDO_SAFETY_SEED", 19);
    let n = env_u64("HEL_UNDO_SAFETY_CASES", 40);
    // Half the cases with notifications between snapshots (hel's
    // default), half without: each seed's case is the same either way.
    check_all((first..first + n).map(|seed| case(seed, seed % 2 == 0)));
}

/// Seeds past the default range that once failed: a path left alone for
/// two reasons (another session's change or a change since, and an entry
/// not read at the same path) was listed twice, and the summary counted
/// it twice.
#[test]
fn seeds_that_once_listed_a_path_left_alone_twice() {
    check_all([546, 550].into_iter().map(|seed| case(seed, seed % 2 == 0)));
}

/// A random case with edits of the agent and the user among siblings
/// (`wide` directories, a chain `deep` long), each hel run with `nofile`
/// descriptors, watching the project between snapshots when `notify`.
fn crowded(seed: u64, wide: usize, deep: usize, nofile: u64, notify: bool) -> Case {
    let mut c = case(seed, notify);
    let s = |i: usize| format!("s{i:04}");
    let chain = vec!["z"; deep].join("/");
    let mut calls = vec![
        Edit::Remove { path: s(3) },
        Edit::Write {
            path: format!("{}/f", s(wide / 2)),
            text: "v changed by the agent\n".into(),
            bash: false,
        },
        Edit::Chmod {
            path: s(wide / 3),
            mode: 0,
        },
        Edit::Write {
            path: format!("{}/f", s(wide)),
            text: "v new\n".into(),
            bash: true,
        },
        Edit::Rename {
            from: s(10),
            to: format!("{}x", s(10)),
        },
    ];
    if deep > 0 {
        calls.push(Edit::Write {
            path: format!("{chain}/f"),
            text: "v deep, changed\n".into(),
            bash: false,
        });
    }
    let user = Step::User(vec![Edit::Write {
        path: format!("{}/f", s(wide - 1)),
        text: "the user's\n".into(),
        bash: false,
    }]);
    c.steps.splice(0..0, [Step::Agent(calls), user]);
    c.wide = wide;
    c.deep = deep;
    c.nofile = Some(nofile);
    c
}

/// `ulimit -n 256`: four times as many sibling directories as
/// descriptors, and a chain of 100.
#[test]
fn undo_keeps_the_users_work_with_256_descriptors() {
    check_all([false, true].map(|notify| crowded(256, 1000, 100, 256, notify)));
}

/// 2,000 sibling directories (with `ulimit -n 1024`, the usual default,
/// so the case is the same on every machine).
#[test]
fn undo_keeps_the_users_work_among_2000_sibling_directories() {
    check_all([false, true].map(|notify| crowded(2000, 2000, 0, 1024, notify)));
}
