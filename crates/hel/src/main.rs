use std::process::ExitCode;

use clap::Parser;
use hel::cli::{Cli, Command};
use hel::exit::Exit;
use hel::run::{self, Start};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("__sandbox-init") {
        hel::tools::sandbox::init::helper_main(&argv[2..]);
    }
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Some(Command::Sessions { .. } | Command::Gc { .. } | Command::Fsck)
    ) {
        // Reports on stdout end quietly when their reader goes away
        // (`hel sessions | head`), as Unix tools do.
        // SAFETY: setting a signal disposition before any thread exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let result = match cli.command {
        Some(Command::Sessions { command, json }) => hel::commands::sessions(command, json),
        Some(Command::Gc { dry_run }) => hel::commands::gc(dry_run),
        Some(Command::Fsck) => hel::commands::fsck(),
        Some(Command::Resume { session, last, at }) => {
            let start = match (session, last, at) {
                (_, true, Some(_)) => Err(Exit::usage("--at needs a session, not --last")),
                (_, true, None) => Ok(Start::Last),
                (Some(s), false, Some(at)) => Ok(Start::Fork { session: s, at }),
                (Some(s), false, None) => Ok(Start::Resume(s)),
                (None, false, _) => Err(Exit::usage("resume needs a SESSION or --last")),
            };
            start.and_then(|s| agent(cli.run, s))
        }
        None => {
            let start = match cli.run.resume.clone() {
                Some(s) => Start::Resume(s),
                None => Start::New,
            };
            agent(cli.run, start)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // Errors name paths and objects a repository may have chosen.
            hel::note!("hel: {}", hel::terminal::escape_line(&e.to_string()));
            ExitCode::from(e.code)
        }
    }
}

fn agent(args: hel::cli::RunArgs, start: Start) -> Result<u8, Exit> {
    if let Start::Resume(s) | Start::Fork { session: s, .. } = &start {
        hel::session::check_session_arg(s)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Exit::refused(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(run::run(args, start))
}
