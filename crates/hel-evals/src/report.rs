//! `report`: a markdown table computed from stored run records alone.

use std::path::Path;

use serde_json::Value;

/// All run-level records under `dir` (`<experiment>/<condition>/<rep>/record.json`).
fn records(dir: &Path) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let read = |p: &Path| std::fs::read_dir(p).map_err(|e| format!("{}: {e}", p.display()));
    for exp in read(dir)? {
        let exp = exp.map_err(|e| e.to_string())?.path();
        if !exp.is_dir() {
            continue;
        }
        for cond in read(&exp)? {
            let cond = cond.map_err(|e| e.to_string())?.path();
            if !cond.is_dir() {
                continue;
            }
            for rep in read(&cond)? {
                let path = rep.map_err(|e| e.to_string())?.path().join("record.json");
                if let Ok(text) = std::fs::read_to_string(&path) {
                    let v: Value = serde_json::from_str(&text)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    out.push(v);
                }
            }
        }
    }
    if out.is_empty() {
        return Err(format!("no run records under {}", dir.display()));
    }
    out.sort_by_key(|r| {
        (
            r["experiment"].as_str().unwrap_or("").to_owned(),
            r["condition"].as_str().unwrap_or("").to_owned(),
            r["rep"].as_u64().unwrap_or(0),
        )
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

fn row(rs: &[&Value]) -> Row {
    let n = |r: &&Value, k: &str| r[k].as_u64().unwrap_or(0);
    Row {
        runs: rs.len() as u64,
        valid: rs.iter().filter(|r| r["valid"] != false).count() as u64,
        successes: rs
            .iter()
            .filter(|r| r["valid"] != false && r["success"] == true)
            .count() as u64,
        requests: rs.iter().map(|r| n(r, "requests")).sum(),
        tool_calls: rs.iter().map(|r| n(r, "tool_calls")).sum(),
        input_tokens: rs.iter().map(|r| n(r, "input_tokens")).sum(),
        wall_ms: rs.iter().map(|r| n(r, "wall_time_ms")).sum(),
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
pub fn report(dir: &Path) -> Result<String, String> {
    let all = records(dir)?;
    let mut conditions: Vec<String> = Vec::new();
    for r in &all {
        let c = r["condition"].as_str().unwrap_or("?").to_owned();
        if !conditions.contains(&c) {
            conditions.push(c);
        }
    }
    // The spec's order for the known experiment; otherwise alphabetical.
    let order = ["continuous", "restart", "resume"];
    conditions.sort_by_key(|c| order.iter().position(|o| o == c).unwrap_or(order.len()));
    let mut out = String::from("| condition | runs | successes | API requests | tool calls | mean input tokens / request | wall time |\n|---|---|---|---|---|---|---|\n");
    for c in &conditions {
        let rs: Vec<&Value> = all
            .iter()
            .filter(|r| r["condition"] == c.as_str())
            .collect();
        out.push_str(&line(c, &row(&rs)));
    }
    out.push_str(&line("all", &row(&all.iter().collect::<Vec<_>>())));
    let bad: Vec<&Value> = all
        .iter()
        .filter(|r| r["valid"] == false || r["success"] != true)
        .collect();
    if !bad.is_empty() {
        out.push_str("\nFailed and invalid runs:\n");
        for r in bad {
            let (kind, why) = if r["valid"] == false {
                ("invalid", &r["invalid_reason"])
            } else {
                ("failed", &r["failure_reason"])
            };
            out.push_str(&format!(
                "- {}/{}/{}: {kind}: {}\n",
                r["experiment"].as_str().unwrap_or("?"),
                r["condition"].as_str().unwrap_or("?"),
                r["rep"],
                why.as_str().unwrap_or("")
            ));
        }
    }
    Ok(out)
}
