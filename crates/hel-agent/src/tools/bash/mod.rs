//! bash: run a command in the project directory, confined by the sandbox
//! (see [`super::sandbox`]), or unconfined with `--no-sandbox`.

mod shell;
mod unconfined;

use std::time::Duration;

use super::args::BashArgs;
use super::context::{ToolCtx, ToolResult};
use super::sandbox::host::{Layout, RunError, Sandbox, SandboxError};
use super::sandbox::proto::RunBody;
use shell::{command_env, format_result};

fn refusal(what: &SandboxError) -> ToolResult {
    ToolResult::failed(format!(
        "refused: the sandbox cannot run here: {what}. The user can run hel with --no-sandbox to allow unconfined commands."
    ))
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
        unconfined::run(ctx, &command).await
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
    if let Some(sb) = ctx.commands.0.as_mut() {
        if let Some(why) = sb.lost() {
            note = format!("note: the sandbox had stopped ({why}); this command runs in a new one, and processes earlier commands left running are gone\n");
            ctx.commands.shutdown();
        } else if sb.layout != layout {
            note = "note: the sandbox was rebuilt (.hel/ changed); processes earlier commands left running are gone\n".into();
            ctx.commands.shutdown();
        }
    }
    if ctx.commands.0.is_none() {
        let mut writable = vec![ctx.project.clone(), ctx.tmp.clone()];
        writable.extend(ctx.allow_write.iter().cloned());
        match Sandbox::start(layout, writable).await {
            Ok(sb) => ctx.commands.0 = Some(sb),
            Err(e) => return refusal(&e),
        }
    }
    let Some(sb) = ctx.commands.0.as_mut() else {
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
