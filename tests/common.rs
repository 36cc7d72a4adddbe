//! Helpers for the end-to-end tests: a scripted model server (`hel-mock`,
//! run in-process), a temporary project, and `hel` runs in it. The `hel`
//! run is the one Cargo built for these tests (`CARGO_BIN_EXE_hel`), never
//! a stale copy.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The hel binary under test.
pub fn hel_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hel"))
}

/// A running scripted model server, keeping the requests it receives.
pub struct Mock {
    server: hel_mock::Server,
    pub url: String,
}

/// The contents of the tool messages of the mock's request `request`.
pub fn tool_results(mock: &Mock, request: usize) -> Vec<String> {
    mock.messages(request)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

impl Mock {
    pub fn start(script: Value) -> Mock {
        let config = hel_mock::Config::from_json(&script).expect("a valid mock script");
        Self::serve(config)
    }

    /// A mock whose `GET /models` lists `models`.
    pub fn with_models(script: Value, models: &[&str]) -> Mock {
        let mut config = hel_mock::Config::from_json(&script).expect("a valid mock script");
        config.models = models.iter().map(|m| m.to_string()).collect();
        Self::serve(config)
    }

    pub fn recall() -> Mock {
        Self::serve(hel_mock::Config {
            recall: true,
            ..hel_mock::Config::default()
        })
    }

    fn serve(config: hel_mock::Config) -> Mock {
        let server = hel_mock::Server::start(0, config).expect("the mock server starts");
        Mock {
            url: server.url(),
            server,
        }
    }

    /// Every request body received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.server.requests()
    }

    /// When each request arrived, in order.
    pub fn request_times(&self) -> Vec<std::time::Instant> {
        self.server.request_times()
    }

    /// The messages of request `i`.
    pub fn messages(&self, i: usize) -> Vec<Value> {
        self.requests()[i]["messages"].as_array().unwrap().clone()
    }
}

/// No controlling terminal in the child, like CI.
fn detach(cmd: &mut Command) {
    // SAFETY: setsid(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
}

/// A temporary project directory, and a home directory beside it (a
/// project that is the home directory is not snapshotted).
pub struct Project {
    pub dir: tempfile::TempDir,
    pub home: tempfile::TempDir,
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
        let home = tempfile::tempdir().unwrap();
        Project { dir, home }
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
            .env("HOME", self.home.path());
        if let Some(m) = mock {
            cmd.args(["--base-url", &m.url, "--model", "mock-model"]);
        }
        cmd.stdin(Stdio::null());
        detach(&mut cmd);
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

    /// Start `hel` in the background, read its `session: <uuid>` line and
    /// wait until that session is listed (a new session is made at the
    /// model's first answer: `mock` must give one; its lease is held from
    /// then on).
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
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self
            .run(None, &["sessions", "--json"])
            .stdout
            .contains(&sid)
        {
            assert!(
                std::time::Instant::now() < deadline,
                "session {sid} never appeared"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
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
    let map = hel_store::spill::map(&store, &cp).unwrap();
    let entry = map.values().next().expect("a spill file");
    hel_store::testing::read_blob(&store, &entry.blob).unwrap()
}

/// The outcome of a run measured with `wait4(2)`.
pub struct Measured {
    pub run: Run,
    /// Peak resident set of the program, in KiB (`ru_maxrss`).
    pub max_rss_kib: u64,
}

/// How `run_measured` runs a program: in a fresh, small python3, which
/// forks it and reports its `ru_maxrss` from `wait4`. (Measured straight
/// from the test runner, the figure would include the runner's own peak:
/// Linux carries the old address space's peak across `exec`. The small
/// parent's own few MiB can only raise the figure, never hide hel's.)
const MEASURE: &str = r#"
import os, sys
out, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(out, "w") as f:
    f.write("%d\n" % usage.ru_maxrss)
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
"#;

/// The python3 interpreter itself (not a launcher such as a pyenv shim,
/// which would change the environment hel runs with).
fn python() -> &'static Path {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        let o = Command::new("python3")
            .args(["-I", "-S", "-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 runs (the peak-memory tests need it)");
        PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
    })
}

/// Run a prepared command to its end (stdin closed), collecting its output
/// and its peak resident memory, with the command's arguments,
/// environment and directory.
pub fn run_measured(cmd: &mut Command) -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("maxrss");
    let program = cmd.get_program().to_owned();
    let args: Vec<std::ffi::OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut wrapped = Command::new(python());
    wrapped
        .args(["-I", "-S", "-c", MEASURE])
        .arg(&out)
        .arg(program)
        .args(args);
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
    detach(&mut wrapped);
    let o = wrapped.stdin(Stdio::null()).output().unwrap();
    let max_rss_kib = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| {
            panic!(
                "the measurement wrote no figure ({e}): {}",
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

/// Who runs hel where a test needs it unprivileged (a directory of mode
/// 000 must really be unreadable to it): the tests' own user when that is
/// not root; under root (as in CI, where permission bits do not bind)
/// `nobody`, running a copy of the binary it can execute when the build
/// directory is closed to it. [`Unprivileged::note`] says when neither is
/// possible: hel then runs as root.
pub struct Unprivileged {
    /// The user and group hel runs as, when they are not the tests' own.
    pub ids: Option<(u32, u32)>,
    bin: PathBuf,
    _copy: Option<tempfile::TempDir>,
    /// Why hel runs privileged, when it does.
    pub note: Option<String>,
}

/// The user and group of `name` in /etc/passwd.
fn account(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

impl Unprivileged {
    pub fn get() -> Unprivileged {
        let mut me = Unprivileged {
            ids: None,
            bin: hel_bin(),
            _copy: None,
            note: None,
        };
        if !rustix::process::geteuid().is_root() {
            return me;
        }
        let Some(ids) = account("nobody") else {
            me.note = Some("the tests run as root and there is no user nobody".into());
            return me;
        };
        let runs = |bin: &Path| {
            Command::new(bin)
                .arg("--version")
                .uid(ids.0)
                .gid(ids.1)
                .env_clear()
                .stdin(Stdio::null())
                .output()
                .map_err(|e| e.to_string())
                .and_then(|o| {
                    if o.status.success() {
                        Ok(())
                    } else {
                        Err(String::from_utf8_lossy(&o.stderr).trim().to_owned())
                    }
                })
        };
        if runs(&me.bin).is_err() {
            let dir = tempfile::tempdir().unwrap();
            let copy = dir.path().join("hel");
            std::fs::copy(&me.bin, &copy).unwrap();
            let open =
                <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
            std::fs::set_permissions(dir.path(), open).unwrap();
            me.bin = copy;
            me._copy = Some(dir);
        }
        match runs(&me.bin) {
            Ok(()) => me.ids = Some(ids),
            Err(e) => {
                me.note = Some(format!(
                    "the tests run as root and nobody cannot run hel ({e})"
                ));
                me.bin = hel_bin();
            }
        }
        me
    }

    /// Whether permission bits bind hel (it does not run as root).
    pub fn binds(&self) -> bool {
        self.note.is_none()
    }

    /// [`Project::hel`], run as this user.
    pub fn hel(&self, p: &Project, mock: Option<&Mock>) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.current_dir(p.dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", p.home.path());
        if let Some(m) = mock {
            cmd.args(["--base-url", &m.url, "--model", "mock-model"]);
        }
        if let Some((uid, gid)) = self.ids {
            cmd.uid(uid).gid(gid);
        }
        cmd.stdin(Stdio::null());
        detach(&mut cmd);
        cmd
    }

    /// Give the project and its home directory (what the tests made in them
    /// as root) to this user, links themselves rather than their targets.
    pub fn hand_over(&self, p: &Project) {
        let Some((uid, gid)) = self.ids else { return };
        for root in [p.dir.path(), p.home.path()] {
            let mut stack = vec![root.to_owned()];
            while let Some(path) = stack.pop() {
                std::os::unix::fs::lchown(&path, Some(uid), Some(gid)).unwrap();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                if meta.is_dir() {
                    for e in std::fs::read_dir(&path).unwrap() {
                        let e = e.unwrap();
                        // The store is hel's own, made as this user.
                        if e.file_name() != ".hel" {
                            stack.push(e.path());
                        }
                    }
                }
            }
        }
    }
}

/// Limit `cmd` to `n` open descriptors, soft and hard (`ulimit -n n`).
pub fn limit_open_files(cmd: &mut Command, n: u64) {
    // SAFETY: setrlimit(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setrlimit(
                rustix::process::Resource::Nofile,
                rustix::process::Rlimit {
                    current: Some(n),
                    maximum: Some(n),
                },
            )?;
            Ok(())
        });
    }
}

/// Wait until the file system's clock, which stamps files from a coarse
/// clock that can lag the real one by a tick, has caught up with now: a
/// file written after this is dated after everything hel recorded before
/// it, as a person's edit after hel ended always is. A readiness signal
/// with a deadline, not a sleep.
pub fn file_clock_caught_up(dir: &std::path::Path) {
    let now = std::time::SystemTime::now();
    let probe = dir.join(".clock-probe");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        std::fs::write(&probe, b"").unwrap();
        let stamped = std::fs::metadata(&probe).unwrap().modified().unwrap();
        std::fs::remove_file(&probe).unwrap();
        if stamped >= now {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the file clock never caught up"
        );
        std::thread::yield_now();
    }
}
