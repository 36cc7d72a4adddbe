//! `report`: a markdown table computed from stored run records alone.

use std::path::Path;

use crate::record::RunRecord;
use crate::EvalError;

/// All run-level records under `dir` (`<experiment>/<condition>/<rep>/record.json`).
fn records(dir: &Path) -> Result<Vec<RunRecord>, EvalError> {
    let mut out = Vec::new();
    let subdirs = |p: &Path| -> Result<Vec<std::path::PathBuf>, EvalError> {
        let mut dirs = Vec::new();
        for e in std::fs::read_dir(p).map_err(EvalError::io(p))? {
            let path = e.map_err(EvalError::io(p))?.path();
            if path.is_dir() {
                dirs.push(path);
            }
        }
        Ok(dirs)
    };
    for exp in subdirs(dir)? {
        for cond in subdirs(&exp)? {
            for rep in subdirs(&cond)? {
                let path = rep.join("record.json");
                if let Ok(text) = std::fs::read_to_string(&path) {
                    let r = serde_json::from_str(&text)
                        .map_err(|source| EvalError::Json { path, source })?;
                    out.push(r);
                }
            }
        }
    }
    if out.is_empty() {
        return Err(EvalError::NoRecords(dir.to_owned()));
    }
    out.sort_by(|a: &RunRecord, b: &RunRecord| {
        (&a.experiment, &a.condition, a.rep).cmp(&(&b.experiment, &b.condition, b.rep))
    });
    Ok(out)
}

struct Row {
    runs: u64,
    valid: u64,
    successes: u64,
    requests: u64,
    tool_calls: u64,
    input_tokens: u64,
    wall_ms: u64,
}

fn row(rs: &[&RunRecord]) -> Row {
    Row {
        runs: rs.len() as u64,
        valid: rs.iter().filter(|r| r.valid).count() as u64,
        successes: rs.iter().filter(|r| r.valid && r.success).count() as u64,
        requests: rs.iter().map(|r| r.requests).sum(),
        tool_calls: rs.iter().map(|r| r.tool_calls).sum(),
        input_tokens: rs.iter().map(|r| r.input_tokens).sum(),
        wall_ms: rs.iter().map(|r| r.wall_time_ms).sum(),
    }
}

fn line(name: &str, r: &Row) -> String {
    let mean = if r.requests == 0 {
        0.0
    } else {
        r.input_tokens as f64 / r.requests as f64
    };
    format!(
        "| {name} | {} | {}/{} | {} | {} | {:.0} | {:.1} s |\n",
        r.runs,
        r.successes,
        r.valid,
        r.requests,
        r.tool_calls,
        mean,
        r.wall_ms as f64 / 1000.0
    )
}

/// The report for the records under `dir`.
pub fn report(dir: &Path) -> Result<String, EvalError> {
    let all = records(dir)?;
    let mut conditions: Vec<&str> = Vec::new();
    for r in &all {
        if !conditions.contains(&r.condition.as_str()) {
            conditions.push(&r.condition);
        }
    }
    // The spec's order for the known experiment; otherwise alphabetical.
    let order = ["continuous", "restart", "resume"];
    conditions.sort_by_key(|c| order.iter().position(|o| o == c).unwrap_or(order.len()));
    let mut out = String::from("| condition | runs | successes | API requests | tool calls | mean input tokens / request | wall time |\n|---|---|---|---|---|---|---|\n");
    for c in &conditions {
        let rs: Vec<&RunRecord> = all.iter().filter(|r| r.condition == *c).collect();
        out.push_str(&line(c, &row(&rs)));
    }
    out.push_str(&line("all", &row(&all.iter().collect::<Vec<_>>())));
    let bad: Vec<&RunRecord> = all.iter().filter(|r| !r.valid || !r.success).collect();
    if !bad.is_empty() {
        out.push_str("\nFailed and invalid runs:\n");
        for r in bad {
            let (kind, why) = if !r.valid {
                ("invalid", &r.invalid_reason)
            } else {
                ("failed", &r.failure_reason)
            };
            out.push_str(&format!(
                "- {}/{}/{}: {kind}: {}\n",
                r.experiment,
                r.condition,
                r.rep,
                why.as_deref().unwrap_or("")
            ));
        }
    }
    Ok(out)
}
