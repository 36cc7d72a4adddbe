//! Hooks: commands of the user's config file (`[[hooks]]`) run on a
//! session's events, each with the event as JSON on stdin and a time
//! limit. A `pre_tool` hook that exits with 2 blocks the call (its stderr
//! is the call's result); any other failure is a warning.
//!
//! Hooks come from the user's config only (the `hel` binary reads them
//! there and nowhere else): a hook is code that runs with the user's
//! permissions, unconfined, and a project's files must not be able to add
//! one. A hook gets hel's environment without its secrets (what commands
//! get, [`crate::tools::secret::Withheld`]), no descriptor of hel's but
//! its stdio, a session and process group of its own, and is killed with
//! that group when it exits or at its time limit: nothing it started
//! outlives it.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::session::Start;
use crate::tools::secret::Withheld;

/// Bytes of a hook's stderr kept (the rest is read and dropped).
const STDERR_CAP: usize = 16 * 1024;
/// Characters of a tool's result a `post_tool` payload carries.
const RESULT_EXCERPT: usize = 2000;
/// How long the pipes of a hook that was killed may take to close (a
/// process that left its group may hold them).
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// The session events hooks run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    SessionStart,
    PreTool,
    PostTool,
    Checkpoint,
    PreCompact,
    SessionEnd,
}

impl HookEvent {
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session_start",
            HookEvent::PreTool => "pre_tool",
            HookEvent::PostTool => "post_tool",
            HookEvent::Checkpoint => "checkpoint",
            HookEvent::PreCompact => "pre_compact",
            HookEvent::SessionEnd => "session_end",
        }
    }
}

fn default_timeout() -> u64 {
    10
}

/// One `[[hooks]]` table of the user's config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hook {
    pub event: HookEvent,
    /// The program and its arguments (no shell).
    pub command: Vec<String>,
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
}

impl Hook {
    /// Whether the table is usable: a program that is an absolute path or
    /// a name looked up on `PATH` (a relative path would resolve in the
    /// project, whose files hooks never come from), and a time limit of 1
    /// to 3,600 seconds.
    pub fn check(&self) -> Result<(), String> {
        let program = self.command.first().map(String::as_str).unwrap_or("");
        if program.is_empty() {
            return Err(
                "a hook's command is empty: give [\"/path/to/program\", \"arg\", ...]".into(),
            );
        }
        if program.contains('/') && !program.starts_with('/') {
            return Err(format!("hook command {program:?} is a relative path: give an absolute path (hooks never run a project's files)"));
        }
        if !(1..=3600).contains(&self.timeout_secs) {
            return Err(format!(
                "hook timeout_secs {} is not between 1 and 3600",
                self.timeout_secs
            ));
        }
        Ok(())
    }
}

/// How one hook went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// It exited with 0.
    Ok,
    /// A `pre_tool` hook exited with 2: the call did not run.
    Blocked,
    /// It exited with this status.
    Failed(i32),
    /// A signal ended it.
    Signalled(i32),
    /// It was still running at its time limit and was killed.
    TimedOut(u64),
    /// It could not be started.
    NotStarted(String),
}

/// One hook's run (the run's `Event::Hook`).
#[derive(Debug, Clone)]
pub struct HookReport {
    pub event: HookEvent,
    /// The program run.
    pub program: String,
    pub outcome: HookOutcome,
    /// What it wrote on stderr (at most 16 KiB, secrets redacted).
    pub stderr: String,
    pub duration: Duration,
}

impl HookReport {
    /// It went wrong: not ok, nor a block.
    pub fn failed(&self) -> bool {
        !matches!(self.outcome, HookOutcome::Ok | HookOutcome::Blocked)
    }

    /// The outcome's name (stream-json's `outcome`).
    pub fn outcome_name(&self) -> &'static str {
        match self.outcome {
            HookOutcome::Ok => "ok",
            HookOutcome::Blocked => "blocked",
            HookOutcome::Failed(_) => "failed",
            HookOutcome::Signalled(_) => "signalled",
            HookOutcome::TimedOut(_) => "timeout",
            HookOutcome::NotStarted(_) => "not_started",
        }
    }
}

impl std::fmt::Display for HookReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} hook {} ", self.event.name(), self.program)?;
        match &self.outcome {
            HookOutcome::Ok => f.write_str("ran")?,
            HookOutcome::Blocked => f.write_str("blocked the call")?,
            HookOutcome::Failed(code) => write!(f, "failed (exit status {code})")?,
            HookOutcome::Signalled(sig) => write!(f, "was killed by signal {sig}")?,
            HookOutcome::TimedOut(secs) => write!(
                f,
                "did not finish within {secs} s and was stopped with what it started"
            )?,
            HookOutcome::NotStarted(why) => write!(f, "could not start ({why})")?,
        }
        if self.failed() {
            f.write_str("; hel goes on")?;
        }
        match self.stderr.lines().find(|l| !l.trim().is_empty()) {
            Some(line) => write!(f, ": {}", line.trim()),
            None => Ok(()),
        }
    }
}

/// A run's hooks and what their payloads say of it.
#[derive(Default)]
pub(crate) struct Runner {
    hooks: Vec<Hook>,
    session: Option<String>,
    /// How the session started: `new`, `resumed` or `forked`.
    source: &'static str,
    /// The `session_start` hooks ran (so the `session_end` ones run).
    pub(crate) started: bool,
    /// The project's root: where hooks run, and the payloads' `project`.
    project: PathBuf,
    /// hel's environment as commands get it: without its secrets.
    env: Arc<Vec<(OsString, OsString)>>,
}

impl Runner {
    pub(crate) fn new(hooks: Vec<Hook>, project: &Path, withheld: &Withheld) -> Runner {
        let env = match hooks.is_empty() {
            true => Vec::new(),
            false => withheld.inherited(&[]),
        };
        Runner {
            hooks,
            project: project.to_owned(),
            env: Arc::new(env),
            ..Runner::default()
        }
    }

    /// The session the run works on, as `start` took it.
    pub(crate) fn session(&mut self, id: Option<&hel_store::SessionId>, start: &Start) {
        self.session = id.map(|s| s.to_string());
        self.source = match start {
            Start::New => "new",
            Start::Resume(_) | Start::Last => "resumed",
            Start::Fork { .. } => "forked",
        };
    }

    /// `session_start`'s fields (its `checkpoint`: `head`).
    pub(crate) fn start_fields(&self, head: Option<String>) -> Value {
        json!({"source": self.source, "checkpoint": head})
    }

    /// Whether any hook runs on `event` (to skip building its payload).
    pub(crate) fn any(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    fn payload(&self, event: HookEvent, fields: impl FnOnce() -> Value) -> Arc<Vec<u8>> {
        let mut p = json!({
            "event": event.name(),
            "session": self.session,
            "project": self.project.to_string_lossy(),
        });
        if let (Value::Object(p), Value::Object(fields)) = (&mut p, fields()) {
            p.extend(fields);
        }
        let mut bytes = p.to_string().into_bytes();
        bytes.push(b'\n');
        Arc::new(bytes)
    }

    /// Run the hooks of `event` in their order in the config, with its
    /// `fields` (made only when a hook runs), each one's report given to
    /// `tell`, off the async thread. Some: a `pre_tool`
    /// hook blocked the call, with its stderr (redacted); the hooks after
    /// it do not run.
    pub(crate) async fn fire(
        &self,
        event: HookEvent,
        fields: impl FnOnce() -> Value,
        secrets: &mut hel_secrets::Redactor,
        tell: &dyn Fn(HookReport),
    ) -> Option<String> {
        if !self.any(event) {
            return None;
        }
        let payload = self.payload(event, fields);
        for hook in self.hooks.iter().filter(|h| h.event == event) {
            let (h, p, env, cwd) = (
                hook.clone(),
                Arc::clone(&payload),
                Arc::clone(&self.env),
                self.project.clone(),
            );
            let ran = tokio::task::spawn_blocking(move || run(&h, &p, &env, &cwd))
                .await
                .unwrap_or_else(|e| Ran::not_started(e.to_string()));
            if let Some(block) = report(hook, ran, secrets, tell) {
                return Some(block);
            }
        }
        None
    }

    /// [`Runner::fire`] on this thread (at the run's end, which is not
    /// async).
    pub(crate) fn fire_now(
        &self,
        event: HookEvent,
        fields: impl FnOnce() -> Value,
        secrets: &mut hel_secrets::Redactor,
        tell: &dyn Fn(HookReport),
    ) {
        if !self.any(event) {
            return;
        }
        let payload = self.payload(event, fields);
        for hook in self.hooks.iter().filter(|h| h.event == event) {
            let ran = run(hook, &payload, &self.env, &self.project);
            report(hook, ran, secrets, tell);
        }
    }
}

/// The fields of a `pre_tool` or `post_tool` payload: the tool, the call's
/// id and its arguments (as JSON when they parse, else as sent).
pub(crate) fn call_fields(id: &str, name: &str, arguments: &str) -> Value {
    let args = hel_store::json::parse(arguments.as_bytes(), hel_store::json::Limits::MESSAGE)
        .unwrap_or_else(|_| Value::String(arguments.to_owned()));
    json!({"tool": name, "id": id, "arguments": args})
}

/// A `post_tool` payload's fields: the call's, whether it did its job,
/// the start of its result and the result's length.
pub(crate) fn result_fields(
    id: &str,
    name: &str,
    arguments: &str,
    ok: bool,
    result: &str,
) -> Value {
    let mut fields = call_fields(id, name, arguments);
    let chars = result.chars().count();
    fields["ok"] = json!(ok);
    fields["result"] = json!(result.chars().take(RESULT_EXCERPT).collect::<String>());
    fields["result_chars"] = json!(chars);
    fields["result_cut"] = json!(chars > RESULT_EXCERPT);
    fields
}

/// Report how `hook` went; Some: it blocked, with its stderr.
fn report(
    hook: &Hook,
    ran: Ran,
    secrets: &mut hel_secrets::Redactor,
    tell: &dyn Fn(HookReport),
) -> Option<String> {
    let outcome = match ran.status {
        Err(why) => HookOutcome::NotStarted(why),
        Ok(None) => HookOutcome::TimedOut(hook.timeout_secs),
        Ok(Some(s)) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
            (Some(0), _) => HookOutcome::Ok,
            (Some(2), _) if hook.event == HookEvent::PreTool => HookOutcome::Blocked,
            (Some(code), _) => HookOutcome::Failed(code),
            (None, sig) => HookOutcome::Signalled(sig.unwrap_or(0)),
        },
    };
    let mut stderr = secrets
        .redact(&String::from_utf8_lossy(&ran.stderr))
        .into_owned();
    if ran.cut {
        stderr.push_str("\n[… the rest of the hook's stderr was cut]");
    }
    let blocked = (outcome == HookOutcome::Blocked).then(|| stderr.clone());
    tell(HookReport {
        event: hook.event,
        program: hook.command.first().cloned().unwrap_or_default(),
        outcome,
        stderr,
        duration: ran.duration,
    });
    blocked
}

/// What one hook process did: its status (None: stopped at its time
/// limit; the error: it did not start) and the start of its stderr.
struct Ran {
    status: Result<Option<ExitStatus>, String>,
    stderr: Vec<u8>,
    /// More stderr than was kept.
    cut: bool,
    duration: Duration,
}

impl Ran {
    fn not_started(why: String) -> Ran {
        Ran {
            status: Err(why),
            stderr: Vec::new(),
            cut: false,
            duration: Duration::ZERO,
        }
    }
}

/// The program a hook's first word names: an absolute path as it is; a
/// bare name looked up in the absolute directories of `env`'s PATH only
/// (an empty, `.` or relative entry would find it in the project, which
/// the hook runs in and whose files hooks never come from).
fn resolve(program: &str, env: &[(OsString, OsString)]) -> Option<PathBuf> {
    if program.starts_with('/') {
        return Some(PathBuf::from(program));
    }
    let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v)?;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
}

/// Run `hook` with `payload` on its stdin, in `cwd` with `env`, to its
/// exit or its time limit; then kill its process group (what it left
/// running ends with it) and reap it.
fn run(hook: &Hook, payload: &Arc<Vec<u8>>, env: &[(OsString, OsString)], cwd: &Path) -> Ran {
    let start = Instant::now();
    let Some((program, args)) = hook.command.split_first() else {
        return Ran::not_started("the command is empty".into());
    };
    let Some(program) = resolve(program, env) else {
        return Ran::not_started(format!(
            "{program} is not in any absolute directory of PATH"
        ));
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(crate::child::isolate);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Ran::not_started(e.to_string()),
    };
    let pid = child.id() as i32;
    if let Some(mut stdin) = child.stdin.take() {
        let payload = Arc::clone(payload);
        // On a thread: a hook that does not read it ends the write
        // (EPIPE) when it exits.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&payload);
        });
    }
    let stdout = child.stdout.take().map(|s| drain(s, 0));
    let stderr = child.stderr.take().map(|s| drain(s, STDERR_CAP));
    // Wait for its exit without reaping it: its pid (its group's id)
    // stays its own until the group is killed.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        exited(pid);
        let _ = tx.send(());
    });
    let limit = Duration::from_secs(hook.timeout_secs);
    let timed_out = rx.recv_timeout(limit).is_err();
    if let Some(group) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let status = child.wait();
    let duration = start.elapsed();
    let (kept, cut) = stderr.map_or((Vec::new(), false), |s| s.take(PIPE_GRACE));
    drop(stdout);
    Ran {
        status: match status {
            _ if timed_out => Ok(None),
            Ok(s) => Ok(Some(s)),
            Err(e) => Err(e.to_string()),
        },
        stderr: kept,
        cut,
        duration,
    }
}

/// Block until process `pid` (a child) has exited, leaving it unreaped.
fn exited(pid: i32) {
    loop {
        // SAFETY: waitid writes only the siginfo it is given.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// A pipe read to its end on a thread of its own, keeping its first `cap`
/// bytes.
struct Drained {
    kept: Arc<Mutex<(Vec<u8>, bool)>>,
    done: mpsc::Receiver<()>,
}

fn drain(mut pipe: impl Read + Send + 'static, cap: usize) -> Drained {
    let kept = Arc::new(Mutex::new((Vec::new(), false)));
    let (tx, done) = mpsc::channel();
    let k = Arc::clone(&kept);
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if let Ok(mut k) = k.lock() {
                let room = cap.saturating_sub(k.0.len()).min(n);
                k.0.extend_from_slice(&buf[..room]);
                k.1 |= room < n;
            }
        }
        let _ = tx.send(());
    });
    Drained { kept, done }
}

impl Drained {
    /// What was kept once the pipe closed, or after `grace` (whatever
    /// still holds it open keeps its reader, which drops what follows).
    fn take(self, grace: Duration) -> (Vec<u8>, bool) {
        let _ = self.done.recv_timeout(grace);
        match self.kept.lock() {
            Ok(mut k) => std::mem::take(&mut *k),
            Err(_) => (Vec::new(), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_looked_up_in_absolute_path_directories_only() {
        let env = |path: &str| vec![(OsString::from("PATH"), OsString::from(path))];
        assert_eq!(resolve("sh", &env("bin:usr/bin:.:")), None);
        assert_eq!(
            resolve("sh", &env(".:/bin")),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(resolve("/x/y", &env("")), Some(PathBuf::from("/x/y")));
        assert_eq!(resolve("sh", &[]), None);
    }

    fn hook(event: HookEvent, script: &str, timeout_secs: u64) -> Hook {
        Hook {
            event,
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            timeout_secs,
        }
    }

    #[test]
    fn check_refuses_relative_paths_empty_commands_and_odd_timeouts() {
        let mut h = hook(HookEvent::PreTool, "true", 10);
        assert!(h.check().is_ok());
        h.command = vec!["./hooks/check".into()];
        assert!(h.check().unwrap_err().contains("relative path"));
        h.command = vec!["check-tool".into()];
        assert!(h.check().is_ok());
        h.command.clear();
        assert!(h.check().is_err());
        h.command = vec!["/bin/true".into()];
        h.timeout_secs = 0;
        assert!(h.check().is_err());
    }

    #[test]
    fn stdin_is_the_payload_and_stderr_is_bounded() {
        let h = hook(
            HookEvent::PostTool,
            "cat; head -c 40000 /dev/zero | tr '\\0' x >&2; exit 3",
            30,
        );
        let payload = Arc::new(b"{\"event\":\"post_tool\"}\n".to_vec());
        let ran = run(&h, &payload, &[], Path::new("/"));
        assert_eq!(ran.status.unwrap().unwrap().code(), Some(3));
        assert_eq!(ran.stderr.len(), STDERR_CAP);
        assert!(ran.cut);
    }

    #[test]
    fn a_hook_past_its_limit_is_stopped() {
        let h = hook(HookEvent::PreTool, "exec sleep 1000", 1);
        let ran = run(&h, &Arc::new(Vec::new()), &[], Path::new("/"));
        assert!(matches!(ran.status, Ok(None)));
    }

    #[test]
    fn a_missing_program_is_not_started() {
        let h = Hook {
            event: HookEvent::Checkpoint,
            command: vec!["/nonexistent/hook".into()],
            timeout_secs: 5,
        };
        let ran = run(&h, &Arc::new(Vec::new()), &[], Path::new("/"));
        assert!(ran.status.is_err());
    }
}
