//! bash: run a command in the directory hel was started in (inside the
//! project), confined by the sandbox (see [`hel_sandbox`]), or
//! unconfined with `--no-sandbox`.

mod shell;
mod unconfined;

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::args::BashArgs;
use super::context::{ToolCtx, ToolResult};
use super::gitdirs;
use super::output;
use crate::event::Warning;
use hel_sandbox::{GitMount, Layout, RunBody, RunError, Sandbox, SandboxError};
use shell::{command_env, format_result, mentions_network_failure, NETWORK_OFF};

fn refusal(what: &SandboxError) -> ToolResult {
    ToolResult::failed(format!(
        "refused: the sandbox cannot run here: {what}. The user can run hel with --no-sandbox to allow unconfined commands."
    ))
}

/// The tool. Dropping the call kills the command (see [`Sandbox::run`]).
pub(crate) async fn run(ctx: &mut ToolCtx, args: BashArgs) -> ToolResult {
    let command = args.command;
    if command.contains('\0') {
        return ToolResult::failed("error: the command contains a NUL byte".into());
    }
    if ctx.sandbox {
        sandboxed(ctx, command).await
    } else {
        unconfined::run(ctx, &command).await
    }
}

/// The sandbox's view of the project now: `.hel/`, the spill directory,
/// and the git directories and nested projects' `.hel/` among what
/// commands may write.
fn observe(ctx: &ToolCtx, spill: Option<&Path>) -> Result<Layout, SandboxError> {
    let found = gitdirs::find(&git_roots(ctx), &ctx.project.join(hel_store::STORE_DIR));
    let git = found.mounts(ctx.allow_git_write);
    Layout::observe(&ctx.project, spill, git, found.hidden())
}

/// Where commands may write and git directories are looked for (the
/// instance's tmp goes away with it).
fn git_roots(ctx: &ToolCtx) -> Vec<PathBuf> {
    let mut roots = vec![ctx.project.clone()];
    roots.extend(ctx.allow_write.iter().cloned());
    roots
}

async fn sandboxed(ctx: &mut ToolCtx, command: String) -> ToolResult {
    let spill = ctx.spill.own_dir();
    if let Some(dir) = &spill {
        // Shown (read-only) for the sandbox's whole life, so made now.
        let _ = std::fs::create_dir_all(dir);
    }
    let mut layout = match observe(ctx, spill.as_deref()) {
        Ok(l) => l,
        Err(e) => return refusal(&e),
    };
    let mut note = String::new();
    if let Some(sb) = ctx.commands.0.as_mut() {
        let changed = if let Some(why) = sb.lost() {
            note = format!("note: the sandbox had stopped ({why}); this command runs in a new one, and processes earlier commands left running are gone\n");
            true
        } else if sb.layout != layout {
            note = "note: the sandbox was rebuilt (.hel/ or a git directory changed); processes earlier commands left running are gone\n".into();
            true
        } else {
            false
        };
        if changed {
            ctx.commands.shutdown();
            // Seen again now that nothing of the old sandbox runs.
            layout = match observe(ctx, spill.as_deref()) {
                Ok(l) => l,
                Err(e) => return refusal(&e),
            };
        }
    }
    if ctx.commands.0.is_none() {
        let mut writable = vec![ctx.project.clone(), ctx.tmp.clone()];
        writable.extend(ctx.allow_write.iter().cloned());
        match Sandbox::start(layout, writable, ctx.network).await {
            Ok(sb) => ctx.commands.0 = Some(sb),
            Err(e) => return refusal(&e),
        }
    }
    let Some(sb) = ctx.commands.0.as_mut() else {
        return refusal(&SandboxError::Helper("it did not start".into()));
    };
    let body = RunBody {
        cwd: ctx.cwd.clone(),
        command,
        env: command_env(&ctx.tmp, &ctx.withheld),
    };
    let tap = output::tap(ctx.observer.clone(), ctx.secrets.detector());
    let ran = sb
        .run(&body, Duration::from_secs(ctx.bash_timeout), Some(tap))
        .await;
    let before = sb.layout.git.clone();
    note.push_str(&created_git(ctx, &before));
    match ran {
        Ok(o) => {
            let mut text = format_result(o.status, ctx.bash_timeout, &o.stdout, &o.stderr);
            // Also after an exit 0: `a; b` exits with b's status.
            if !ctx.network && mentions_network_failure(&o.stdout, &o.stderr) {
                text.push('\n');
                text.push_str(NETWORK_OFF);
            }
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

/// After a command: the git directories, or what git reads in one, that
/// appeared while it ran. What a command writes there in the same command
/// was not read-only (the mounts are made when a sandbox starts): the user
/// is warned, and the model told (the next command's sandbox is rebuilt
/// with them read-only).
fn created_git(ctx: &ToolCtx, before: &[GitMount]) -> String {
    let now = gitdirs::protected(&git_roots(ctx), &ctx.project, ctx.allow_git_write);
    let new: Vec<String> = now
        .iter()
        .filter(|m| !before.iter().any(|b| b.path == m.path && b.id == m.id))
        .map(|m| {
            let shown = m.path.strip_prefix(&ctx.project).unwrap_or(&m.path);
            shown.display().to_string()
        })
        .collect();
    if new.is_empty() {
        return String::new();
    }
    let note = format!(
        "note: this command created {}: read-only from the next command on\n",
        new.join(", ")
    );
    ctx.observer.warn(Warning::GitCreated(new));
    note
}
