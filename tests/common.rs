//! Helpers for the end-to-end tests: a scripted `hel-mock`, a temporary
//! project, and `hel` runs in it. The binaries come from the workspace's
//! target directory (`cargo build --workspace` builds them first; the
//! README's test command does).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The directory holding the built binaries (next to the test binary's deps/).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_owned();
    for b in ["hel", "hel-mock", "hel-evals", "measure"] {
        assert!(
            dir.join(b).exists(),
            "{} is missing: run `cargo build --workspace` before the tests",
            dir.join(b).display()
        );
    }
    dir
}

pub fn hel_bin() -> PathBuf {
    bin_dir().join("hel")
}

/// A running `hel-mock` with a script, logging the requests it receives.
pub struct Mock {
    child: Child,
    pub url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mock {
    pub fn start(script: Value) -> Mock {
        Self::start_with(Some(script), &[])
    }

    pub fn recall() -> Mock {
        Self::start_with(None, &["--recall"])
    }

    fn start_with(script: Option<Value>, extra: &[&str]) -> Mock {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.jsonl");
        let mut cmd = Command::new(bin_dir().join("hel-mock"));
        cmd.args(["--port", "0", "--log"]).arg(&log).args(extra);
        if let Some(script) = script {
            let path = dir.path().join("script.json");
            std::fs::write(&path, script.to_string()).unwrap();
            cmd.arg("--script").arg(&path);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // Readiness: the first line names the address.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("hel-mock said {line:?}"))
            .to_owned();
        Mock {
            child,
            url: format!("http://{addr}"),
            log,
            _dir: dir,
        }
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The messages of request `i`.
    pub fn messages(&self, i: usize) -> Vec<Value> {
        self.requests()[i]["messages"].as_array().unwrap().clone()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A temporary project directory.
pub struct Project {
    pub dir: tempfile::TempDir,
}

/// The outcome of one hel run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// The session id from the `session: <uuid>` line, which must be the first line on stderr.
    pub fn session(&self) -> String {
        let first = self.stderr.lines().next().unwrap_or("");
        first
            .strip_prefix("session: ")
            .unwrap_or_else(|| panic!("first stderr line is {first:?}; stderr:\n{}", self.stderr))
            .to_owned()
    }
}

impl Project {
    pub fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        Project { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).unwrap()
    }

    /// A `hel` command in this project with a clean environment (no keys,
    /// no terminal), talking to `mock` when given.
    pub fn hel(&self, mock: Option<&Mock>) -> Command {
        self.hel_in(self.dir.path(), mock)
    }

    pub fn hel_in(&self, dir: &Path, mock: Option<&Mock>) -> Command {
        let mut cmd = Command::new(hel_bin());
        cmd.current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.dir.path());
        if let Some(m) = mock {
            cmd.args(["--base-url", &m.url, "--model", "mock-model"]);
        }
        cmd.stdin(Stdio::null());
        // SAFETY: setsid(2) in the child: no controlling terminal, like CI.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        cmd
    }

    /// Run `hel` with `args` in directory `dir` (no model) and wait.
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        Run::from(self.hel_in(dir, None).args(args).output().unwrap())
    }

    /// Run `hel` with `args` against `mock` and wait.
    pub fn run(&self, mock: Option<&Mock>, args: &[&str]) -> Run {
        Run::from(self.hel(mock).args(args).output().unwrap())
    }

    /// Start `hel` in the background and wait for its `session: <uuid>`
    /// line (the session exists and its lease is held from then on).
    pub fn spawn_session(&self, mock: Option<&Mock>, args: &[&str]) -> (Child, String) {
        let mut child = self
            .hel(mock)
            .args(args)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let sid = line
            .trim()
            .strip_prefix("session: ")
            .unwrap_or_else(|| panic!("first stderr line {line:?}"))
            .to_owned();
        (child, sid)
    }

    /// Run `hel` reading `input` on stdin.
    pub fn run_stdin(&self, mock: Option<&Mock>, args: &[&str], input: &str) -> Run {
        use std::io::Write;
        let mut child = self
            .hel(mock)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        Run::from(child.wait_with_output().unwrap())
    }
}

impl Default for Project {
    fn default() -> Self {
        Self::new()
    }
}

/// A scripted tool call.
pub fn call(name: &str, args: Value) -> Value {
    serde_json::json!({"name": name, "arguments": args})
}

/// Roles of a message list, for order assertions.
pub fn roles(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Every tool_call_id is answered by exactly one tool message right after its call.
pub fn assert_calls_answered(messages: &[Value]) {
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap().to_owned();
            let pos = open
                .iter()
                .position(|o| *o == id)
                .unwrap_or_else(|| panic!("tool result {id} answers no open call"));
            open.remove(pos);
        } else {
            assert!(
                open.is_empty(),
                "calls {open:?} unanswered before a {} message",
                m["role"]
            );
            if let Some(calls) = m["tool_calls"].as_array() {
                open = calls
                    .iter()
                    .map(|c| c["id"].as_str().unwrap().to_owned())
                    .collect();
            }
        }
    }
    assert!(open.is_empty(), "calls {open:?} unanswered at the end");
}

/// The record.json of a run recorded to `dir`.
pub fn record(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("record.json")).unwrap()).unwrap()
}

impl Run {
    /// Run a prepared command and wait.
    pub fn from_cmd(cmd: &mut Command) -> Run {
        Run::from(cmd.output().unwrap())
    }
}

/// The bytes of the (only) spill file the session's newest checkpoint keeps.
pub fn spill_bytes(p: &Project, session: &str) -> Vec<u8> {
    let store = hel_store::Store::open(&p.path()).unwrap();
    let head = store.head(&session.parse().unwrap()).unwrap();
    let cp = store.checkpoint(&head).unwrap();
    let entry = cp.spill.values().next().expect("a spill file");
    store.read_blob(&entry.blob).unwrap()
}

/// The outcome of a run measured with `wait4(2)`.
pub struct Measured {
    pub run: Run,
    /// Peak resident set of the program, in KiB (`ru_maxrss`).
    pub max_rss_kib: u64,
}

/// Run a prepared command to its end (stdin closed), collecting its output
/// and its peak resident memory. The program runs under the `measure`
/// helper (see tests/bin/measure.rs for why), with the command's arguments,
/// environment and directory.
pub fn run_measured(cmd: &mut Command) -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("maxrss");
    let program = cmd.get_program().to_owned();
    let args: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut wrapped = Command::new(bin_dir().join("measure"));
    wrapped.arg(&out).arg(program).args(args);
    if let Some(d) = cmd.get_current_dir() {
        wrapped.current_dir(d);
    }
    // The command's environment as it would have run (env_clear included:
    // hel() clears it, so `get_envs` is all it has).
    wrapped.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    // SAFETY: setsid(2) in the child: no controlling terminal, like CI.
    unsafe {
        wrapped.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let o = wrapped.stdin(Stdio::null()).output().unwrap();
    let max_rss_kib = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| {
            panic!(
                "measure wrote no figure ({e}): {}",
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .trim()
        .parse()
        .unwrap();
    Measured {
        run: Run::from(o),
        max_rss_kib,
    }
}

/// A directory outside every project, with a few files in it, to point
/// hostile links at: [`Outside::fingerprint`] shows any file created,
/// changed or deleted in it.
pub struct Outside {
    pub dir: tempfile::TempDir,
}

impl Outside {
    pub fn new() -> Outside {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("precious.txt"), "do not touch\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/also.txt"), "nor this\n").unwrap();
        Outside { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    /// Every entry under the directory: relative path, kind, size, mode,
    /// modification time and content (files), sorted.
    pub fn fingerprint(&self) -> Vec<String> {
        use std::os::unix::fs::MetadataExt;
        let mut out = Vec::new();
        let mut stack = vec![self.path()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let p = e.path();
                let m = std::fs::symlink_metadata(&p).unwrap();
                let rel = p.strip_prefix(self.path()).unwrap().display().to_string();
                let content = if m.is_file() {
                    String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned()
                } else {
                    String::new()
                };
                out.push(format!(
                    "{rel} {:?} {} {:o} {} {content:?}",
                    m.file_type(),
                    m.len(),
                    m.mode(),
                    m.mtime_nsec() + m.mtime() * 1_000_000_000
                ));
                if m.is_dir() {
                    stack.push(p);
                }
            }
        }
        out.sort();
        out
    }
}

impl Default for Outside {
    fn default() -> Self {
        Self::new()
    }
}
