//! A stdio server's process: started as the user declared it, with only
//! its stdio open, without the secrets of hel's environment (but those its
//! table lists), its stderr copied to a log up to a bound; stopped with
//! everything it started.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::tools::secret::Withheld;

/// Bytes of a server's stderr kept in its log; the rest is dropped.
const LOG_CAP: u64 = 4 << 20;
/// How long a server has to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A running server process. Dropping it stops it (see [`Process::stop`]).
pub(crate) struct Process {
    child: Child,
    /// Its process group (the server leads a session of its own).
    group: Option<rustix::process::Pid>,
}

/// What [`spawn`] needs.
pub(crate) struct Launch<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    /// Variables of hel's environment it gets even when they are secret.
    pub env_vars: &'a [String],
    /// What is kept from it.
    pub withheld: &'a Withheld,
    pub cwd: Option<&'a Path>,
    /// Where its stderr goes.
    pub log: PathBuf,
}

/// The environment a server gets: hel's less what is withheld (but the
/// variables its `env_vars` lists), plus its `env` (what the user's config
/// names there is the user's choice).
fn server_env(launch: &Launch<'_>) -> Vec<(OsString, OsString)> {
    let mut env = launch.withheld.inherited(launch.env_vars);
    env.extend(launch.env.iter().map(|(k, v)| (k.into(), v.into())));
    env
}

/// Start the server: its stdin and stdout are the protocol's, its stderr
/// goes to `launch.log`.
pub(crate) fn spawn(launch: &Launch<'_>) -> std::io::Result<(Process, ChildStdout, ChildStdin)> {
    let log = open_log(&launch.log)?;
    let mut cmd = tokio::process::Command::new(launch.command);
    cmd.args(launch.args)
        .env_clear()
        .envs(server_env(launch))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = launch.cwd {
        cmd.current_dir(dir);
    }
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(crate::child::isolate);
    }
    let mut child = cmd.spawn()?;
    let group = child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32));
    let (Some(stdout), Some(stdin), Some(stderr)) =
        (child.stdout.take(), child.stdin.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("no stdio pipes"));
    };
    tokio::spawn(copy_log(stderr, log));
    Ok((Process { child, group }, stdout, stdin))
}

/// The log, new for each start, private, never through a link.
fn open_log(path: &Path) -> std::io::Result<tokio::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    Ok(tokio::fs::File::from_std(f))
}

/// Copy stderr into the log up to [`LOG_CAP`], then drain the rest (a
/// server blocked on a full pipe would stop answering).
async fn copy_log(mut stderr: tokio::process::ChildStderr, mut log: tokio::fs::File) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut written = 0u64;
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let room = LOG_CAP.saturating_sub(written).min(n as u64) as usize;
        if room > 0 && log.write_all(&buf[..room]).await.is_err() {
            written = LOG_CAP;
        }
        written += room as u64;
    }
    let _ = log.flush().await;
}

impl Process {
    /// Stop the server and everything in its process group: SIGTERM, up to
    /// [`STOP_GRACE`] to exit, then SIGKILL. `graceful: false` kills at
    /// once. Returns when the server is reaped.
    pub(crate) fn stop(&mut self, graceful: bool) {
        use rustix::process::{kill_process_group, Signal};
        let Some(group) = self.group.take() else {
            return;
        };
        if graceful {
            let _ = kill_process_group(group, Signal::TERM);
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline {
                match self.child.try_wait() {
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                    _ => break,
                }
            }
        }
        // Also what the server left behind, if it exited first.
        let _ = kill_process_group(group, Signal::KILL);
        let _ = self.child.start_kill();
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                _ => break,
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(false);
    }
}
