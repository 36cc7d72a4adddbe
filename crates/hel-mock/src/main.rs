//! The `hel-mock` command: the scripted model server of the `hel_mock`
//! library, on the command line (for the demo and manual runs).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hel_mock::{Config, Server};

/// The script format, as `--help` shows it.
const SCRIPT_HELP: &str = r#"Script (--script FILE): a JSON array of steps; each POST .../chat/completions
gets the next one (an answer streamed when the request asks for a stream).
A step is an object:
  {"content": "text"}                a final answer
  {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}],
   "content": "..."}                 tool calls (ids call_<n>; "arguments" an
                                     object, or a raw string sent as it is)
  {"message": {...}}                 this exact assistant message
  {"status": 503, "body": "...", "retry_after": "2"}
                                     an HTTP error (with Retry-After)
  {"raw": "..."}                     this body with status 200
  {"recall": true}                   answer as --recall does
On any step:
  "match": "text"                    held back for the first request whose
                                     body contains the text
  "delay_ms": N                      wait N ms before answering
  "repeat": true                     never used up: answers every request
                                     that reaches it
  "finish_reason": "length"          a cut answer
  "piece": N                         stream N characters per piece
  "no_stream": true                  one JSON body even if a stream was asked
  "usage": "final" | "none"          where the usage goes, or none
When the script runs out: HTTP 500 "script exhausted" (or --recall).
GET .../models lists the --models. Steps for testing clients (endless,
huge_content, zeros, declared_length, cut_after, stall_after, interleave,
keepalive, frame_bytes, server; {{spill}} and {{cursor}} in arguments) are
described in the crate docs (crates/hel-mock/src/lib.rs).

Example script:
  [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
    {"content": "The README says hello."}
  ]

Example:
  hel-mock --script script.json &     # prints: listening on 127.0.0.1:PORT
  hel --base-url http://127.0.0.1:PORT/v1 --model mock-model"#;

/// A scripted OpenAI-compatible model server on 127.0.0.1, for trying hel
/// and testing it with no key and no network.
#[derive(Parser)]
#[command(name = "hel-mock", after_help = SCRIPT_HELP)]
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
    /// The models GET .../models lists, comma-separated (empty: that
    /// answers 404).
    #[arg(long, value_name = "LIST", default_value = "mock-model")]
    models: String,
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
        models: args
            .models
            .split(',')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .collect(),
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
