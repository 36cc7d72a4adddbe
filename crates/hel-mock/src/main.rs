//! The `hel-mock` command: the scripted model server of the `hel_mock`
//! library, on the command line (for the demo and manual runs).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hel_mock::{Config, Server};

/// A scripted OpenAI-compatible model server on 127.0.0.1; see the crate
/// docs for the script format.
#[derive(Parser)]
#[command(name = "hel-mock")]
struct Args {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The script: a JSON array of steps.
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Append every request body to FILE, one per line.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Once the script is used up, answer with the newest identifier sent.
    #[arg(long)]
    recall: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let steps = match &args.script {
        Some(path) => match Config::read_script(path) {
            Ok(s) => s,
            Err(e) => return fail(&e),
        },
        None => Vec::new(),
    };
    let config = Config {
        steps,
        log: args.log,
        recall: args.recall,
    };
    let server = match Server::start(args.port, config) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    // Readiness: whoever started us waits for this line.
    println!("listening on {}", server.addr());
    let _ = std::io::stdout().flush();
    server.wait();
    ExitCode::SUCCESS
}

fn fail(e: &hel_mock::MockError) -> ExitCode {
    eprintln!("hel-mock: {e}");
    ExitCode::from(2)
}
