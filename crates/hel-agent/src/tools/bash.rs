//! bash: run a command in the project directory, confined by the sandbox
//! (see [`super::sandbox`]), or unconfined with `--no-sandbox`.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::args::BashArgs;
use super::sandbox::host::{Layout, RunError, Sandbox, SandboxError};
use super::sandbox::proto::{RunBody, Status};
use super::{ToolCtx, ToolResult};

/// Bytes of each stream kept in memory; the rest is counted and dropped.
const STREAM_CAP: usize = 8 << 20;

/// Environment variables that never reach a command: API keys.
fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    n.ends_with("_API_KEY") || n == "HEL_API_KEY"
}

/// hel's environment without keys, with the instance's tmp dir as `$TMPDIR`.
fn command_env(tmp: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !k.to_str().is_some_and(is_secret))
        .filter(|(k, _)| !matches!(k.to_str(), Some("TMPDIR" | "TMP" | "TEMP")))
        .collect();
    for var in ["TMPDIR", "TMP", "TEMP"] {
        env.push((var.into(), tmp.as_os_str().to_owned()));
    }
    env
}

/// The instance's sandbox, started at the first bash call.
#[derive(Default)]
pub struct Commands {
    sandbox: Option<Sandbox>,
}

impl Commands {
    /// End the sandbox and every process in it (at the instance's end).
    pub fn shutdown(&mut self) {
        if let Some(mut s) = self.sandbox.take() {
            s.shutdown();
        }
    }
}

fn refusal(what: &SandboxError) -> ToolResult {
    ToolResult::failed(format!(
        "refused: the sandbox cannot run here: {what}. The user can run hel with --no-sandbox to allow unconfined commands."
    ))
}

fn format_result(status: Option<Status>, timeout: u64, stdout: &str, stderr: &str) -> String {
    let exit = match status {
        Some(Status::Code(c)) => format!("exit={c}"),
        Some(Status::Signal(s)) => format!("exit=signal {s}"),
        None => format!("exit=timeout after {timeout}s"),
    };
    format!("{exit}\nstdout:\n{stdout}\nstderr:\n{stderr}")
}

/// The tool. Dropping the call kills the command (see [`Sandbox::run`]).
pub async fn run(ctx: &mut ToolCtx, args: BashArgs) -> ToolResult {
    let command = args.command;
    if command.contains('\0') {
        return ToolResult::failed("error: the command contains a NUL byte".into());
    }
    if ctx.sandbox {
        sandboxed(ctx, command).await
    } else {
        unconfined(ctx, &command).await
    }
}

async fn sandboxed(ctx: &mut ToolCtx, command: String) -> ToolResult {
    let spill = ctx.spill.own_dir();
    if let Some(dir) = &spill {
        // Shown (read-only) for the sandbox's whole life, so made now.
        let _ = std::fs::create_dir_all(dir);
    }
    let layout = match Layout::observe(&ctx.project, spill.as_deref()) {
        Ok(l) => l,
        Err(e) => return refusal(&e),
    };
    let mut note = String::new();
    if let Some(sb) = ctx.commands.sandbox.as_mut() {
        if let Some(why) = sb.lost() {
            note = format!("note: the sandbox had stopped ({why}); this command runs in a new one, and processes earlier commands left running are gone\n");
            ctx.commands.shutdown();
        } else if sb.layout != layout {
            note = "note: the sandbox was rebuilt (.hel/ changed); processes earlier commands left running are gone\n".into();
            ctx.commands.shutdown();
        }
    }
    if ctx.commands.sandbox.is_none() {
        let mut writable = vec![ctx.project.clone(), ctx.tmp.clone()];
        writable.extend(ctx.allow_write.iter().cloned());
        match Sandbox::start(layout, writable).await {
            Ok(sb) => ctx.commands.sandbox = Some(sb),
            Err(e) => return refusal(&e),
        }
    }
    let Some(sb) = ctx.commands.sandbox.as_mut() else {
        return refusal(&SandboxError::Helper("it did not start".into()));
    };
    let body = RunBody {
        cwd: ctx.project.clone(),
        command,
        env: command_env(&ctx.tmp),
    };
    match sb.run(&body, Duration::from_secs(ctx.bash_timeout)).await {
        Ok(o) => {
            let text = format_result(o.status, ctx.bash_timeout, &o.stdout, &o.stderr);
            match o.status {
                Some(_) => ToolResult::ok(format!("{note}{text}")),
                None => ToolResult::failed(format!("{note}{text}")),
            }
        }
        Err(RunError::Failed(why)) => {
            ToolResult::failed(format!("{note}error: the command could not start: {why}"))
        }
        Err(RunError::Lost(why)) => {
            ctx.commands.shutdown();
            ToolResult::failed(format!(
                "{note}error: the sandbox stopped during the command ({why}); the next command starts a new one"
            ))
        }
    }
}

/// `--no-sandbox`: bash directly, as hel's child, in its own process group;
/// whatever it leaves behind is killed when it exits.
async fn unconfined(ctx: &mut ToolCtx, command: &str) -> ToolResult {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .env_clear()
        .envs(command_env(&ctx.tmp))
        .current_dir(&ctx.project)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Own process group, so a timeout kills the command and its children.
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return ToolResult::failed(format!("error: cannot start bash: {e}")),
    };
    let pid = child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32));
    let kill_group = move || {
        if let Some(pid) = pid {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
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
            return ToolResult::failed(format_result(None, ctx.bash_timeout, "", ""));
        }
    };
    let status = match status {
        Ok(s) => s,
        Err(e) => return ToolResult::failed(format!("error: waiting for bash: {e}")),
    };
    let status = match (status.code(), status.signal()) {
        (Some(c), _) => Some(Status::Code(c)),
        (None, Some(s)) => Some(Status::Signal(s)),
        _ => {
            return ToolResult::ok(format!(
                "exit=unknown\nstdout:\n{stdout}\nstderr:\n{stderr}"
            ))
        }
    };
    ToolResult::ok(format_result(status, ctx.bash_timeout, &stdout, &stderr))
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
