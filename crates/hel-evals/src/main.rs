//! `hel-evals`: runs experiments against the real `hel` binary and reports
//! on them from the stored records alone.
//!
//! ```text
//! hel-evals run <SPEC> [--provider mock|deepseek|openai] [--out DIR]
//! hel-evals report <DIR>
//! ```
//!
//! A spec (JSON, see `tools/evals/`) names a task, a fixture directory
//! (relative to the spec), repetitions, limits, extra hel flags and the
//! conditions to compare. Each condition × repetition runs in a fresh
//! temporary copy of the fixture, as separate `hel --record` processes.
//!
//! ## Run-level record: `DIR/<experiment>/<condition>/<rep>/record.json`
//! - `experiment`, `condition`, `rep` (from 1), `provider`, `identifier`
//!   (the value the task planted).
//! - `valid` (bool) and `invalid_reason` (string or null): a run is invalid
//!   when the harness could not do its part (hel missing or not startable,
//!   the model server unreachable, a process left no record). Invalid runs
//!   count neither as successes nor as failures.
//! - `success` (bool): the final answer of the second instruction contains
//!   the exact identifier; `failure_reason` (string or null) otherwise.
//! - `final_answer` (string or null): that answer, as hel printed it.
//! - `requests`: API requests of all processes (turns + compaction), from
//!   their records; `input_tokens`, `output_tokens`: sums of what the API
//!   reported; `tool_calls`: sum; `wall_time_ms`: measured by the runner
//!   from the start of the first process to the end of the last.
//! - `processes`: one entry per hel process {`args`, `exit_code`,
//!   `session`, `record`: "processes/<k>/record.json"}; each process's own
//!   record.json and raw/requests.jsonl are under `processes/<k>/`.

mod report;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage:\n  hel-evals run <SPEC> [--provider mock|deepseek|openai] [--out DIR]\n  hel-evals report <DIR>";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => {
            parse_run(&args[1..]).and_then(|(spec, provider, out)| run::run(&spec, &provider, &out))
        }
        Some("report") => match args.get(1) {
            Some(dir) if args.len() == 2 => {
                report::report(&PathBuf::from(dir)).map(|table| print!("{table}"))
            }
            _ => Err(USAGE.to_owned()),
        },
        Some("-h") | Some("--help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hel-evals: {e}");
            ExitCode::from(2)
        }
    }
}

fn parse_run(args: &[String]) -> Result<(PathBuf, String, PathBuf), String> {
    let mut spec = None;
    let mut provider = "mock".to_owned();
    let mut out = PathBuf::from("target/evals");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--provider" => provider = it.next().ok_or("--provider needs a value")?.clone(),
            "--out" => out = PathBuf::from(it.next().ok_or("--out needs a value")?),
            s if s.starts_with('-') => return Err(format!("unknown flag {s}\n{USAGE}")),
            s if spec.is_none() => spec = Some(PathBuf::from(s)),
            s => return Err(format!("unexpected argument {s}\n{USAGE}")),
        }
    }
    if !["mock", "deepseek", "openai"].contains(&provider.as_str()) {
        return Err(format!(
            "unknown provider {provider:?}: choose mock, deepseek or openai"
        ));
    }
    Ok((spec.ok_or(USAGE)?, provider, out))
}
