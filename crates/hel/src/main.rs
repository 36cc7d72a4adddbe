//! `hel`: the command line of the hel agent. It parses flags, renders the
//! agent library's events, asks on the terminal and turns failures into
//! one line and an exit code ([`exit`]); `hel-agent` does the work.

mod chat;
mod cli;
mod commands;
mod config;
mod confirm;
#[cfg(test)]
mod doc_commands;
mod exit;
mod import;
mod output;
mod prompt;
mod render;
mod running;
mod tty;

use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches};
use hel_agent::{check_session_arg, Start};

use cli::{Cli, Command};
use exit::{Exit, Failure, Usage};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("__sandbox-init") {
        hel_sandbox::helper_main(&argv[2..]);
    }
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    set_up(&cli);
    match dispatch(cli, &matches) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            render::failure(&e);
            ExitCode::from(e.code())
        }
    }
}

/// Take the flags every command shares: the project, colours, and for the
/// store reports SIGPIPE's default.
fn set_up(cli: &Cli) {
    commands::set_project(cli.project.clone());
    render::set_color(cli.color);
    if matches!(
        cli.command,
        Some(
            Command::Sessions { .. }
                | Command::Gc { .. }
                | Command::Fsck
                | Command::Op { .. }
                | Command::Diff(_)
                | Command::Undo { .. }
                | Command::Restore { .. }
                | Command::Remote { .. }
        )
    ) {
        // Reports on stdout end quietly when their reader goes away
        // (`hel sessions | head`), as Unix tools do.
        // SAFETY: setting a signal disposition before any thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
}

/// Run the command `cli` names (`matches` tells which flags were given
/// where, for the config file's place among them).
fn dispatch(cli: Cli, matches: &ArgMatches) -> Result<u8, Exit> {
    let sub_matches = matches.subcommand().map(|(_, m)| m.clone());
    let project = cli.project.clone();
    match cli.command {
        Some(Command::Sessions {
            command,
            json,
            remote,
        }) => commands::sessions(command, json, remote),
        Some(Command::Gc {
            remote: Some(name),
            grace,
            dry_run,
            ..
        }) => commands::remote::gc(&name, &grace, dry_run),
        Some(Command::Gc {
            dry_run, repack, ..
        }) => commands::gc(dry_run, repack),
        Some(Command::Remote { command }) => commands::remote::manage(command),
        Some(Command::Push {
            remote,
            allow_secrets,
            sessions,
        }) => commands::remote::push(remote, sessions, allow_secrets),
        Some(Command::Pull { remote, sessions }) => commands::remote::pull(remote, sessions),
        Some(Command::Fsck) => commands::fsck(),
        Some(Command::Op { command }) => commands::op(command),
        Some(Command::Undo {
            session,
            force,
            yes,
            json,
        }) => commands::undo(session, force, yes, json, cli.run.workspace_options()),
        Some(Command::Mcp {
            command: cli::McpCommand::List { json },
        }) => config::settings(&cli.run, matches, None)
            .and_then(|s| commands::mcp::list(s.run.mcp, json)),
        Some(Command::Mcp {
            command:
                cli::McpCommand::Add {
                    name,
                    env,
                    force,
                    command,
                },
        }) => commands::mcp::add(&name, &env, &command, force),
        Some(Command::Mcp {
            command: cli::McpCommand::Remove { name },
        }) => commands::mcp::remove(&name),
        Some(Command::Config { run }) => {
            config::settings(&cli.run, matches, sub_matches.as_ref().map(|m| (&run, m))).map(|s| {
                config::print(&s);
                0
            })
        }
        Some(Command::Restore {
            session,
            at,
            before,
            force,
            yes,
            json,
            paths,
        }) => commands::restore(
            commands::RestoreArgs {
                session,
                at,
                before,
                paths,
                force,
                yes,
                json,
            },
            cli.run.workspace_options(),
        ),
        Some(Command::Diff(args)) => commands::diff(args),
        Some(Command::Resume {
            session,
            last,
            at,
            restore_files,
            force,
            relocate,
            run,
        }) => resume_start(session, last, at).and_then(|start| {
            let sub = sub_matches.as_ref().map(|m| (&run, m));
            let mut run = config::settings(&cli.run, matches, sub)?.run;
            run.relocate = relocate;
            run.project = project;
            agent(run, start, restore_files.then_some(force))
        }),
        None => {
            let start = match (cli.resume.clone(), cli.continue_last) {
                (Some(s), _) => Start::Resume(s),
                (None, true) => Start::Last,
                (None, false) => Start::New,
            };
            let prompt = cli.prompt.clone();
            config::settings(&cli.run, matches, None).and_then(|mut s| {
                s.run.project = project;
                if let Some(text) = prompt {
                    first_instruction(&mut s.run, text);
                }
                agent(s.run, start, None)
            })
        }
    }
}

/// `hel "INSTRUCTION"`: on a terminal (no -p, text output) the prompt
/// runs it first; otherwise it is the first of the -p instructions.
fn first_instruction(run: &mut cli::RunArgs, text: String) {
    use std::io::IsTerminal;
    if run.instructions.is_empty()
        && run.output_format == cli::OutputFormat::Text
        && std::io::stdin().is_terminal()
    {
        run.first = Some(text);
    } else {
        run.instructions.insert(0, text);
    }
}

/// Where `hel resume` starts: the session named (at a checkpoint, a fork),
/// the newest (`--last`), or the one picked on the terminal.
fn resume_start(session: Option<String>, last: bool, at: Option<String>) -> Result<Start, Exit> {
    match (session, last, at) {
        (_, true, Some(_)) => Err(Usage::AtWithLast.into()),
        (_, true, None) => Ok(Start::Last),
        (Some(s), false, Some(at)) => Ok(Start::Fork { session: s, at }),
        (Some(s), false, None) => Ok(Start::Resume(s)),
        (None, false, Some(_)) => Err(Usage::AtNeedsSession.into()),
        (None, false, None) => commands::session_to_resume().map(Start::Resume),
    }
}

/// Run the agent; `restore_files` (with its --force) restores the files
/// of a forked checkpoint first.
fn agent(args: cli::RunArgs, start: Start, restore_files: Option<bool>) -> Result<u8, Exit> {
    if let Start::Resume(s) | Start::Fork { session: s, .. } = &start {
        check_session_arg(s)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::Runtime)?;
    let code = runtime.block_on(chat::run(args, start, restore_files));
    // A file tool cancelled by Ctrl-C may still be between two checks of
    // its flag: it never writes after the cancel, so it is not waited for
    // long.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    code
}
