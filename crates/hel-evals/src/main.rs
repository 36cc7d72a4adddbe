//! The `hel-evals` command (see the `hel_evals` crate docs).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use hel_evals::{Provider, Runner};

/// Evaluation runner for hel: experiments driving the real binary, run
/// records and reports.
#[derive(Parser)]
#[command(name = "hel-evals")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every condition × repetition of an experiment spec.
    Run {
        spec: PathBuf,
        #[arg(long, value_enum, default_value_t = ProviderArg::Mock)]
        provider: ProviderArg,
        #[arg(long, default_value = "target/evals")]
        out: PathBuf,
        /// The hel binary to drive (default: the one beside hel-evals).
        #[arg(long, value_name = "PATH")]
        hel: Option<PathBuf>,
    },
    /// A markdown table from the run records under DIR.
    Report { dir: PathBuf },
}

#[derive(Clone, Copy, ValueEnum)]
enum ProviderArg {
    Mock,
    Deepseek,
    Openai,
}

fn main() -> ExitCode {
    let result = match Args::parse().command {
        Command::Run {
            spec,
            provider,
            out,
            hel,
        } => {
            let runner = match hel {
                Some(hel) => Runner { hel },
                None => Runner::beside_this_program(),
            };
            let provider = match provider {
                ProviderArg::Mock => Provider::Mock,
                ProviderArg::Deepseek => Provider::Deepseek,
                ProviderArg::Openai => Provider::Openai,
            };
            hel_evals::run(&runner, &spec, provider, &out, &mut |r| {
                eprintln!("{}", r.summary())
            })
        }
        Command::Report { dir } => hel_evals::report(&dir).map(|table| print!("{table}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hel-evals: {e}");
            ExitCode::from(2)
        }
    }
}
