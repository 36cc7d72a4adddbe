//! `--no-sandbox`: commands as hel's own children.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use super::shell::{command_env, format_result};
use crate::tools::context::{ToolCtx, ToolResult};
use crate::tools::output::tap;
use hel_sandbox::{Kept, Status};

/// `--no-sandbox`: bash directly, as hel's child, in a session of its own
/// (no controlling terminal) with only stdin, stdout and stderr open;
/// whatever it leaves behind is killed when it exits.
pub(super) async fn run(ctx: &mut ToolCtx, command: &str) -> ToolResult {
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .env_clear()
        .envs(command_env(&ctx.tmp, &ctx.withheld))
        .current_dir(&ctx.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // Own session: no controlling terminal (`/dev/tty` is not the
            // user's), and its own process group, so a timeout kills the
            // command and its children.
            rustix::process::setsid()?;
            // Nothing but stdin, stdout and stderr crosses the exec, also
            // not what hel itself inherited without close-on-exec.
            libc::close_range(3, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as libc::c_int);
            Ok(())
        });
    }
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
        let (o, e, status) = tokio::join!(
            Kept::read_all(
                out.as_mut(),
                Some(tap(ctx.observer.clone(), ctx.secrets.detector()))
            ),
            Kept::read_all(
                err.as_mut(),
                Some(tap(ctx.observer.clone(), ctx.secrets.detector()))
            ),
            async {
                let status = child.wait().await;
                // Stragglers left in the background would hold the pipes open.
                kill_group();
                status
            }
        );
        (o.text(), e.text(), status)
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
