//! `cargo run --release -p hel-bench -- [--quick] [--only WORKLOAD] [--json PATH] [--png PATH]`

use std::path::PathBuf;
use std::process::ExitCode;

use hel_bench::run::{self, Config};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--probe") {
        return ExitCode::from(run::probe_main(&args[1..]) as u8);
    }
    let mut quick = false;
    let mut json: Option<PathBuf> = None;
    let mut png: Option<PathBuf> = None;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--json" => json = it.next().map(PathBuf::from),
            "--png" => png = it.next().map(PathBuf::from),
            "--only" => only = it.next().cloned(),
            other => {
                eprintln!("hel-bench: unknown argument {other:?}\nusage: hel-bench [--quick] [--only grow|fork|compact|many] [--json PATH] [--png PATH]");
                return ExitCode::from(2);
            }
        }
    }
    let workdir = std::env::temp_dir().join(format!("hel-bench-{}", std::process::id()));
    let mut cfg = if quick {
        Config::quick(workdir.clone())
    } else {
        Config::full(workdir.clone())
    };
    cfg.only = only;
    let started = std::time::Instant::now();
    let rows = run::run_all(&cfg, |r| {
        eprintln!(
            "{:>8} n={:<6} {:<10} {}",
            r.workload,
            r.n,
            r.store,
            r.note.clone().unwrap_or_else(|| format!(
                "commit p50 {} µs, {} B/commit, resume {:.1} ms",
                r.commit_p50_us, r.bytes_per_commit, r.resume_ms
            ))
        )
    });
    let _ = std::fs::remove_dir_all(&workdir);
    println!("{}", run::table(&rows));
    println!(
        "hel-store targets (ratios within this run):\n{}",
        run::targets(&rows)
    );
    println!(
        "machine: {}; total {:.0} s",
        run::machine(),
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = json {
        let doc = serde_json::json!({
            "machine": run::machine(),
            "mode": if quick { "quick" } else { "full" },
            "results": rows.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
        });
        if let Err(e) = std::fs::write(
            &path,
            serde_json::to_string_pretty(&doc).unwrap_or_default(),
        ) {
            eprintln!("hel-bench: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if let Some(path) = png {
        if let Err(e) = hel_bench::chart::draw(&rows, &path) {
            eprintln!("hel-bench: chart: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
