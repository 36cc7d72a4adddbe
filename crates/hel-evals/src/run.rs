//! Running an experiment: every condition × repetition in a fresh project.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A started model server for `--provider mock`.
struct MockServer {
    child: Child,
    url: String,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The directory holding the workspace binaries (next to this one).
fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

fn start_mock() -> Result<MockServer, String> {
    let mut child = Command::new(sibling("hel-mock"))
        .args(["--port", "0", "--recall"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            format!("cannot start hel-mock: {e} (build it with `cargo build --workspace`)")
        })?;
    let mut line = String::new();
    let stdout = child.stdout.take().ok_or("hel-mock has no stdout")?;
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .ok_or_else(|| format!("hel-mock said {line:?}"))?;
    Ok(MockServer {
        url: format!("http://{addr}"),
        child,
    })
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &dst)?;
        } else {
            std::fs::copy(e.path(), dst)?;
        }
    }
    Ok(())
}

fn random_hex(digits: usize) -> String {
    let mut s = String::new();
    while s.len() < digits {
        s.push_str(&uuid::Uuid::new_v4().simple().to_string());
    }
    s.truncate(digits);
    s
}

struct Process {
    exit_code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// Run one hel process, killed at `deadline`.
fn run_process(cmd: &mut Command, deadline: Instant) -> Result<Process, String> {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start hel: {e}"))?;
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let left = deadline.saturating_duration_since(Instant::now());
    let (output, timed_out) = match rx.recv_timeout(left) {
        Ok(o) => (o, false),
        Err(_) => {
            // SAFETY: kill(2) of our own child, which has not been reaped
            // (its waiter thread is still blocked on it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            (rx.recv().map_err(|e| e.to_string())?, true)
        }
    };
    let output = output.map_err(|e| format!("waiting for hel: {e}"))?;
    Ok(Process {
        exit_code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        timed_out,
    })
}

/// Run every condition × repetition of the spec at `spec_path`.
pub fn run(spec_path: &Path, provider: &str, out: &Path) -> Result<(), String> {
    let text =
        std::fs::read_to_string(spec_path).map_err(|e| format!("{}: {e}", spec_path.display()))?;
    let spec: Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not JSON: {e}", spec_path.display()))?;
    let field = |k: &str| {
        spec.get(k)
            .ok_or_else(|| format!("{}: missing {k:?}", spec_path.display()))
    };
    let name = field("name")?
        .as_str()
        .ok_or("name must be a string")?
        .to_owned();
    let reps = field("repetitions")?
        .as_u64()
        .ok_or("repetitions must be an integer")?;
    let conditions: Vec<String> = field("conditions")?
        .as_array()
        .ok_or("conditions must be an array")?
        .iter()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect();
    for c in &conditions {
        if !["continuous", "restart", "resume"].contains(&c.as_str()) {
            return Err(format!(
                "unknown condition {c:?}: this runner knows continuous, restart and resume"
            ));
        }
    }
    let fixture = spec_path.parent().unwrap_or(Path::new(".")).join(
        field("fixture")?
            .as_str()
            .ok_or("fixture must be a string")?,
    );
    let task = field("task")?;
    let limits = field("limits")?;
    let run_seconds = limits
        .get("run_seconds")
        .and_then(Value::as_u64)
        .unwrap_or(120);
    let max_output = limits
        .get("max_output_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(8192);
    let hel_args: Vec<String> = spec
        .get("hel_args")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let prefix = task
        .get("identifier_prefix")
        .and_then(Value::as_str)
        .unwrap_or("ID-");
    let digits = task
        .get("identifier_hex_digits")
        .and_then(Value::as_u64)
        .unwrap_or(32) as usize;
    let first = task
        .get("first")
        .and_then(Value::as_str)
        .ok_or("task.first is missing")?;
    let second = task
        .get("second")
        .and_then(Value::as_str)
        .ok_or("task.second is missing")?;

    let mock = if provider == "mock" {
        Some(start_mock()?)
    } else {
        None
    };
    let mut provider_args: Vec<String> = match &mock {
        Some(m) => vec![
            "--base-url".into(),
            m.url.clone(),
            "--model".into(),
            "mock-recall".into(),
        ],
        None => vec!["--provider".into(), provider.into()],
    };
    provider_args.extend(["--max-output-tokens".into(), max_output.to_string()]);
    provider_args.extend(hel_args);

    for rep in 1..=reps {
        // One identifier per repetition, the same for its conditions.
        let identifier = format!("{prefix}{}", random_hex(digits));
        let first = first.replace("{identifier}", &identifier);
        for condition in &conditions {
            let dir = out.join(&name).join(condition).join(rep.to_string());
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let record = run_one(
                &fixture,
                &dir,
                condition,
                &provider_args,
                &first,
                second,
                &identifier,
                run_seconds,
            );
            let mut record = record;
            record["experiment"] = json!(name);
            record["condition"] = json!(condition);
            record["rep"] = json!(rep);
            record["provider"] = json!(provider);
            let path = dir.join("record.json");
            std::fs::write(
                &path,
                serde_json::to_string_pretty(&record).unwrap_or_default(),
            )
            .map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!(
                "{name}/{condition}/{rep}: {}",
                if record["valid"] == false {
                    format!(
                        "invalid ({})",
                        record["invalid_reason"].as_str().unwrap_or("")
                    )
                } else if record["success"] == true {
                    "success".into()
                } else {
                    format!(
                        "failure ({})",
                        record["failure_reason"].as_str().unwrap_or("")
                    )
                }
            );
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    fixture: &Path,
    dir: &Path,
    condition: &str,
    provider_args: &[String],
    first: &str,
    second: &str,
    identifier: &str,
    run_seconds: u64,
) -> Value {
    let mut rec = json!({
        "identifier": identifier, "valid": true, "invalid_reason": null, "success": false,
        "failure_reason": null, "final_answer": null, "requests": 0, "input_tokens": 0,
        "output_tokens": 0, "tool_calls": 0, "wall_time_ms": 0, "processes": [],
    });
    let project = match tempdir() {
        Ok(p) => p,
        Err(e) => return invalid(rec, &format!("cannot create a project: {e}")),
    };
    if let Err(e) = copy_dir(fixture, &project) {
        let _ = std::fs::remove_dir_all(&project);
        return invalid(
            rec,
            &format!("cannot copy the fixture {}: {e}", fixture.display()),
        );
    }
    // The processes of this condition: (arguments after the provider flags).
    let steps: Vec<Vec<String>> = match condition {
        "continuous" => vec![vec!["-p".into(), first.into(), "-p".into(), second.into()]],
        "restart" => vec![
            vec!["-p".into(), first.into()],
            vec!["-p".into(), second.into()],
        ],
        _ => vec![
            vec!["-p".into(), first.into()],
            vec![
                "resume".into(),
                "{session}".into(),
                "-p".into(),
                second.into(),
            ],
        ],
    };
    let started = Instant::now();
    let deadline = started + Duration::from_secs(run_seconds);
    let mut session = String::new();
    let mut last_stdout = String::new();
    for (k, step) in steps.iter().enumerate() {
        let pdir = dir.join("processes").join((k + 1).to_string());
        let args: Vec<String> = step
            .iter()
            .map(|a| a.replace("{session}", &session))
            .collect();
        let mut cmd = Command::new(sibling("hel"));
        cmd.current_dir(&project)
            .args(provider_args)
            .arg("--record")
            .arg(&pdir)
            .args(&args);
        let p = match run_process(&mut cmd, deadline) {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&project);
                return invalid(rec, &e);
            }
        };
        let _ = std::fs::write(pdir.join("stderr.txt"), &p.stderr);
        let this_session = p
            .stderr
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("session: "))
            .unwrap_or("")
            .to_owned();
        if let Some(a) = rec["processes"].as_array_mut() {
            a.push(json!({"args": args, "exit_code": p.exit_code, "session": this_session, "record": format!("processes/{}/record.json", k + 1)}));
        }
        if k == 0 {
            session = this_session;
        }
        match std::fs::read_to_string(pdir.join("record.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            Some(r) => {
                for (key, from) in [
                    ("requests", "model_calls"),
                    ("requests", "compaction_requests"),
                ] {
                    rec[key] =
                        json!(rec[key].as_u64().unwrap_or(0) + r[from].as_u64().unwrap_or(0));
                }
                for key in ["input_tokens", "output_tokens"] {
                    rec[key] = json!(
                        rec[key].as_u64().unwrap_or(0) + r["usage"][key].as_u64().unwrap_or(0)
                    );
                }
                rec["tool_calls"] = json!(
                    rec["tool_calls"].as_u64().unwrap_or(0)
                        + r["tool_calls"].as_array().map_or(0, |a| a.len() as u64)
                );
            }
            None if p.exit_code == Some(2) => {
                let _ = std::fs::remove_dir_all(&project);
                return invalid(
                    rec,
                    &format!(
                        "hel refused its configuration: {}",
                        p.stderr.lines().last().unwrap_or("")
                    ),
                );
            }
            None => {
                let _ = std::fs::remove_dir_all(&project);
                return invalid(rec, "a hel process left no record.json");
            }
        }
        if p.stderr.contains("cannot reach the model server") {
            let _ = std::fs::remove_dir_all(&project);
            return invalid(rec, "the model server was unreachable");
        }
        if p.timed_out {
            rec["failure_reason"] = json!(format!("the run exceeded {run_seconds}s"));
            break;
        }
        if p.exit_code != Some(0) {
            // A failure ends the run: no further API requests.
            rec["failure_reason"] = json!(format!(
                "process {} exited {:?}: {}",
                k + 1,
                p.exit_code,
                p.stderr.lines().last().unwrap_or("")
            ));
            break;
        }
        last_stdout = p.stdout;
    }
    rec["wall_time_ms"] = json!(started.elapsed().as_millis() as u64);
    if rec["failure_reason"].is_null() {
        let answer = last_stdout.lines().last().unwrap_or("").to_owned();
        rec["success"] = json!(answer.contains(identifier));
        if rec["success"] == false {
            rec["failure_reason"] = json!("the second answer does not contain the identifier");
        }
        rec["final_answer"] = json!(answer);
    }
    let _ = std::fs::remove_dir_all(&project);
    rec
}

fn invalid(mut rec: Value, why: &str) -> Value {
    rec["valid"] = json!(false);
    rec["invalid_reason"] = json!(why);
    rec
}

fn tempdir() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("hel-evals-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir)?;
    dir.canonicalize()
}
