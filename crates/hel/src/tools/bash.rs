//! bash: run a command in the project directory, confined by the sandbox.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::sandbox::{self, Spec};
use super::{arg_str, ToolCtx, ToolResult};

/// Bytes of each stream kept in memory; the rest is counted and dropped.
const STREAM_CAP: usize = 8 << 20;

/// Environment variables that never reach a command: API keys.
fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_API_KEY") || n == "HEL_API_KEY"
}

pub async fn run(ctx: &mut ToolCtx, args: &Value) -> ToolResult {
    let command = match arg_str(args, "command") {
        Ok(Some(c)) => c.to_owned(),
        Ok(None) => return ToolResult::failed("error: bash needs a command".into()),
        Err(e) => return ToolResult::failed(format!("error: {e}")),
    };
    let mut cmd = if ctx.sandbox {
        let exe = match std::env::current_exe() {
            Ok(e) => e,
            Err(e) => {
                return ToolResult::failed(format!(
                    "error: cannot find hel itself to start the sandbox: {e}"
                ))
            }
        };
        let mut writable = vec![ctx.project.clone(), ctx.tmp.clone()];
        writable.extend(ctx.allow_write.iter().cloned());
        let spec = Spec {
            project: ctx.project.clone(),
            writable,
            spill_dir: ctx.spill.own_dir().filter(|d| d.is_dir()),
        };
        let mut c = tokio::process::Command::new(exe);
        c.arg("__sandbox").arg("--").arg(&command);
        c.env(
            sandbox::SPEC_VAR,
            serde_json::to_string(&spec).unwrap_or_default(),
        );
        c
    } else {
        let mut c = tokio::process::Command::new("bash");
        c.arg("-c").arg(&command);
        c
    };
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(is_secret) {
            cmd.env_remove(&k);
        }
    }
    for var in ["TMPDIR", "TMP", "TEMP"] {
        cmd.env(var, &ctx.tmp);
    }
    cmd.current_dir(&ctx.project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let inherit = ctx.inherit_fds.clone();
    // SAFETY: only async-signal-safe calls (setpgid, fcntl) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Own process group, so a timeout kills the command and its children.
            libc::setpgid(0, 0);
            // Keep the instance and session locks held while the command lives.
            for &fd in &inherit {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
                }
            }
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return ToolResult::failed(format!("error: cannot start bash: {e}")),
    };
    let pid = child.id().map(|p| p as i32);
    let kill_group = move || {
        if let Some(pid) = pid {
            // SAFETY: kill(2) of the process group we created.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    };
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let timeout = Duration::from_secs(ctx.bash_timeout);
    let work = async {
        let (o, e, status) = tokio::join!(drain(out.as_mut()), drain(err.as_mut()), async {
            let status = child.wait().await;
            // Stragglers left in the background would hold the pipes open.
            kill_group();
            status
        });
        (o, e, status)
    };
    let (stdout, stderr, status) = match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => {
            kill_group();
            return ToolResult::failed(format!(
                "exit=timeout after {}s\nstdout:\n\nstderr:\n",
                ctx.bash_timeout
            ));
        }
    };
    let status = match status {
        Ok(s) => s,
        Err(e) => return ToolResult::failed(format!("error: waiting for bash: {e}")),
    };
    if ctx.sandbox && status.code() == Some(125) {
        if let Some(line) = stderr.lines().find(|l| l.starts_with(sandbox::UNAVAILABLE)) {
            let what = line.trim_start_matches(sandbox::UNAVAILABLE).trim();
            return ToolResult::failed(format!(
                "refused: the sandbox cannot run here: {what}. The user can run hel with --no-sandbox to allow unconfined commands."
            ));
        }
    }
    let exit = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit={c}"),
        (None, Some(s)) => format!("exit=signal {s}"),
        _ => "exit=unknown".into(),
    };
    ToolResult::ok(format!("{exit}\nstdout:\n{stdout}\nstderr:\n{stderr}"))
}

async fn drain<R: AsyncRead + Unpin>(r: Option<&mut R>) -> String {
    let Some(r) = r else { return String::new() };
    let mut kept = Vec::new();
    let mut dropped = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = STREAM_CAP.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
                dropped += n - room;
            }
        }
    }
    let mut s = String::from_utf8_lossy(&kept).into_owned();
    if dropped > 0 {
        s.push_str(&format!("\n[{dropped} more bytes not kept]"));
    }
    s
}
