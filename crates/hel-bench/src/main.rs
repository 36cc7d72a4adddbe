//! `cargo run --release -p hel-bench -- [--quick] [--only WORKLOAD] [--json PATH] [--png PATH] [--hel PATH]`
//! `cargo run --release -p hel-bench -- workspace [--files N] [--dirs N] [--dir PATH] [--json PATH]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hel_bench::run::{self, Config};

/// hel-store against SQLite, JSONL and whole-file snapshots, through the
/// same seeded workloads in one run.
#[derive(Debug, Parser)]
#[command(name = "hel-bench", args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    /// Smaller sizes (a few minutes).
    #[arg(long)]
    quick: bool,
    /// Run only this workload.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(run::WORKLOADS))]
    only: Option<String>,
    /// Write the results as JSON.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Draw the chart as PNG.
    #[arg(long, value_name = "PATH")]
    png: Option<PathBuf>,
    /// The `hel` binary whose `hel sessions` the list workload times
    /// (default: `hel` beside this executable; `cargo build --release -p hel`).
    #[arg(long, value_name = "PATH")]
    hel: Option<PathBuf>,
    /// Resume runs per measurement (the median is reported).
    #[arg(long, value_name = "N", default_value_t = 11)]
    runs: usize,
    /// Sessions of the list workload (default: 1,000 with --quick, else
    /// 10,000, the size of the listing target).
    #[arg(long, value_name = "N")]
    list_sessions: Option<usize>,
    /// Session lengths of the grow workload, in messages (default: 100,
    /// 1,000 and 10,000 with --quick, else up to 100,000).
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    grow: Option<Vec<usize>>,
    /// Keep each workload's hel-store project afterwards (their paths are
    /// printed), to profile `hel sessions`, resume, fsck or search on them.
    #[arg(long, alias = "keep-list")]
    keep: bool,
    /// Internal: the test suite's tiny sizes, with resumes in child
    /// processes as in a real run.
    #[arg(long, hide = true)]
    smoke: bool,
    /// Internal: resume (or list) in this child process and report.
    #[arg(long, hide = true, num_args = 1.., value_name = "ARGS")]
    probe: Option<Vec<String>>,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Workspace snapshots, undo and checkpoint commits against git on a
    /// generated project (issue 14's figures).
    Workspace(WorkspaceArgs),
}

#[derive(Debug, clap::Args)]
struct WorkspaceArgs {
    /// Files in the generated project.
    #[arg(long, default_value_t = 70_000)]
    files: usize,
    /// Directories in the generated project.
    #[arg(long, default_value_t = 7_000)]
    dirs: usize,
    /// Files changed and restored.
    #[arg(long, default_value_t = 1_000)]
    restore_files: usize,
    /// Runs per figure (the median is reported).
    #[arg(long, default_value_t = 7)]
    runs: usize,
    /// The generator's seed.
    #[arg(long, default_value_t = 14)]
    seed: u64,
    /// Where to generate the project (default: a directory under the
    /// system's temporary directory).
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// Keep the generated project (and its .hel and .git) afterwards.
    #[arg(long)]
    keep: bool,
    /// Write the results as JSON.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

fn workspace(a: WorkspaceArgs) -> ExitCode {
    use hel_bench::workspace;
    let dir = a.dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("hel-bench-ws-{}", std::process::id()))
    });
    let cfg = workspace::Config {
        files: a.files,
        dirs: a.dirs,
        restore_files: a.restore_files,
        runs: a.runs,
        seed: a.seed,
        keep: a.keep,
        ..workspace::Config::full(dir)
    };
    let r = match workspace::run(&cfg, |what| eprintln!("workspace: {what}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hel-bench workspace: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", workspace::table(&r));
    println!(
        "machine: {}; total {:.0} s",
        run::machine(),
        r.total_seconds
    );
    if let Some(path) = a.json {
        let report = serde_json::json!({"machine": run::machine(), "results": r});
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, text + "\n") {
            eprintln!("hel-bench: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Sub::Workspace(a)) = args.command {
        return workspace(a);
    }
    if let Some(probe) = &args.probe {
        return ExitCode::from(run::probe_main(probe) as u8);
    }
    let workdir = std::env::temp_dir().join(format!("hel-bench-{}", std::process::id()));
    let mut cfg = if args.smoke {
        Config {
            probe_child: true,
            ..Config::smoke(workdir.clone())
        }
    } else if args.quick {
        Config::quick(workdir.clone())
    } else {
        Config::full(workdir.clone())
    };
    cfg.only = args.only;
    cfg.probe_runs = args.runs.max(1);
    if let Some(n) = args.list_sessions {
        cfg.list_sessions = n;
    }
    if let Some(mut grow) = args.grow {
        grow.sort_unstable();
        grow.dedup();
        grow.retain(|n| *n > 0);
        if !grow.is_empty() {
            cfg.grow = grow;
        }
    }
    cfg.keep = args.keep;
    if let Some(hel) = args.hel {
        cfg.hel = hel;
    }
    if cfg.wants("list") && !cfg.hel.is_file() {
        eprintln!(
            "hel-bench: the list workload runs `hel sessions`, but there is no hel binary at {}.\n\
             Build it first with `cargo build --release -p hel`, or name one with --hel PATH.",
            cfg.hel.display()
        );
        return ExitCode::from(2);
    }
    let started = std::time::Instant::now();
    let two_threads_at_start = run::two_threads();
    let mode = if args.quick { "quick" } else { "full" };
    // Rows so far go to the JSON file as they come, so a run that stops
    // keeps what it measured.
    let mut so_far = Vec::new();
    let rows = run::run_all(&cfg, |r| {
        so_far.push(r.clone());
        if let Some(path) = &args.json {
            let partial = run::Report {
                machine: run::machine(),
                mode: &format!("{mode} (unfinished)"),
                total_seconds: started.elapsed().as_secs_f64(),
                results: &so_far,
                workspace: None,
            };
            let _ = std::fs::write(
                path,
                serde_json::to_string_pretty(&partial).unwrap_or_default() + "\n",
            );
        }
        eprintln!(
            "{:>8} n={:<6} {:<10} {}",
            r.workload,
            r.n,
            r.store,
            r.note.clone().unwrap_or_else(|| format!(
                "commit p50 {} µs, {} B/commit, resume {:.1} ms{}",
                r.commit_p50_us,
                r.bytes_per_commit,
                r.resume_ms,
                r.list_ms
                    .map(|l| format!(", list {l:.1} ms"))
                    .unwrap_or_default()
            ))
        )
    });
    let ws = match run::workspace(&cfg, |what| eprintln!("workspace: {what}")) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            eprintln!("hel-bench workspace: {e}");
            None
        }
    };
    if !cfg.keep {
        let _ = std::fs::remove_dir_all(&workdir);
    }
    let total = started.elapsed().as_secs_f64();
    let machine = run::Machine {
        two_threads: Some([two_threads_at_start, run::two_threads()]),
        ..run::machine()
    };
    println!("{}", run::table(&rows));
    println!("{}", run::ops_table(&rows));
    println!(
        "hel-store targets of issue 13 (ratios within this run):\n{}",
        run::targets(&rows)
    );
    if let Some(w) = &ws {
        println!("{}", hel_bench::workspace::table(w));
    }
    println!(
        "Targets of issues 24 and 21 (ratios within this run):\n\n{}",
        hel_bench::targets::table(&rows, ws.as_ref())
    );
    println!("machine: {machine}; total {total:.0} s");
    if let Some(path) = args.json {
        let report = run::Report {
            machine,
            mode,
            total_seconds: total,
            results: &rows,
            workspace: ws.as_ref(),
        };
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, text + "\n") {
            eprintln!("hel-bench: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if let Some(path) = args.png {
        if let Err(e) = hel_bench::chart::draw(&rows, &path) {
            eprintln!("hel-bench: chart: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
