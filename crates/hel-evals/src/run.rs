//! Running an experiment: every condition × repetition in a fresh project.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

use crate::record::{HelRecord, ProcessEntry, RunRecord};
use crate::spec::{Condition, Spec};
use crate::EvalError;

/// Who answers hel's model requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `hel_mock` with `recall`, served by the runner itself.
    Mock,
    Deepseek,
    Openai,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Provider::Mock => "mock",
            Provider::Deepseek => "deepseek",
            Provider::Openai => "openai",
        }
    }
}

/// How to run hel.
#[derive(Debug, Clone)]
pub struct Runner {
    /// The hel binary.
    pub hel: PathBuf,
}

impl Runner {
    /// The `hel` next to the running executable (`target/debug/hel` for
    /// `target/debug/hel-evals`), else `hel` from PATH.
    pub fn beside_this_program() -> Runner {
        let hel = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("hel")))
            .filter(|p| p.exists())
            .unwrap_or_else(|| PathBuf::from("hel"));
        Runner { hel }
    }
}

/// Run every condition × repetition of the spec at `spec_path`, writing
/// the records under `out`; `on_run` hears of each run as it ends.
pub fn run(
    runner: &Runner,
    spec_path: &Path,
    provider: Provider,
    out: &Path,
    on_run: &mut dyn FnMut(&RunRecord),
) -> Result<(), EvalError> {
    let spec = Spec::read(spec_path)?;
    let fixture = spec_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(&spec.fixture);
    let mock = match provider {
        Provider::Mock => Some(hel_mock::Server::start(
            0,
            hel_mock::Config {
                recall: true,
                ..hel_mock::Config::default()
            },
        )?),
        _ => None,
    };
    let mut provider_args: Vec<String> = match &mock {
        Some(m) => vec![
            "--base-url".into(),
            m.url(),
            "--model".into(),
            "mock-recall".into(),
        ],
        None => vec!["--provider".into(), provider.name().into()],
    };
    provider_args.extend([
        "--max-output-tokens".into(),
        spec.limits.max_output_tokens.to_string(),
    ]);
    provider_args.extend(spec.hel_args.iter().cloned());
    let experiment = Experiment {
        runner,
        spec: &spec,
        fixture,
        provider_args,
    };
    for rep in 1..=spec.repetitions {
        // One identifier per repetition, the same for its conditions.
        let identifier = format!(
            "{}{}",
            spec.task.identifier_prefix,
            random_hex(spec.task.identifier_hex_digits)
        );
        for &condition in &spec.conditions {
            let dir = out
                .join(&spec.name)
                .join(condition.name())
                .join(rep.to_string());
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(EvalError::io(&dir))?;
            let mut record = experiment.run_one(&dir, condition, &identifier);
            record.experiment = spec.name.clone();
            record.condition = condition.name().into();
            record.rep = rep;
            record.provider = provider.name().into();
            let path = dir.join("record.json");
            let text = serde_json::to_string_pretty(&record).unwrap_or_default();
            std::fs::write(&path, text).map_err(EvalError::io(&path))?;
            on_run(&record);
        }
    }
    Ok(())
}

/// One experiment being run.
struct Experiment<'a> {
    runner: &'a Runner,
    spec: &'a Spec,
    fixture: PathBuf,
    /// Flags before each process's own.
    provider_args: Vec<String>,
}

impl Experiment<'_> {
    /// One run of `condition`, in a fresh copy of the fixture.
    fn run_one(&self, dir: &Path, condition: Condition, identifier: &str) -> RunRecord {
        let mut rec = RunRecord {
            identifier: identifier.to_owned(),
            valid: true,
            ..RunRecord::default()
        };
        let project = match tempfile::Builder::new().prefix("hel-evals-").tempdir() {
            Ok(p) => p,
            Err(e) => return invalid(rec, &format!("cannot create a project: {e}")),
        };
        let Ok(root) = project.path().canonicalize() else {
            return invalid(rec, "cannot resolve the project directory");
        };
        if let Err(e) = copy_dir(&self.fixture, &root) {
            return invalid(
                rec,
                &format!("cannot copy the fixture {}: {e}", self.fixture.display()),
            );
        }
        let first = self.spec.task.first.replace("{identifier}", identifier);
        let started = Instant::now();
        let deadline = started + Duration::from_secs(self.spec.limits.run_seconds);
        let mut session = String::new();
        let mut last_stdout = String::new();
        for (k, args) in steps(condition, &first, &self.spec.task.second)
            .into_iter()
            .enumerate()
        {
            let args: Vec<String> = args
                .iter()
                .map(|a| a.replace("{session}", &session))
                .collect();
            let pdir = dir.join("processes").join((k + 1).to_string());
            match self.process(&mut rec, &root, &pdir, k, args, deadline) {
                Step::Go(stdout, this_session) => {
                    if k == 0 {
                        session = this_session;
                    }
                    last_stdout = stdout;
                }
                Step::Stop => break,
                Step::Invalid(why) => return invalid(rec, &why),
            }
        }
        rec.wall_time_ms = started.elapsed().as_millis() as u64;
        if rec.failure_reason.is_none() {
            let answer = last_stdout.lines().last().unwrap_or("").to_owned();
            rec.success = answer.contains(identifier);
            if !rec.success {
                rec.failure_reason =
                    Some("the second answer does not contain the identifier".into());
            }
            rec.final_answer = Some(answer);
        }
        rec
    }

    /// Run the `k`-th hel process of a run with `args` after the provider
    /// flags, recording it in `rec` (its own record under `pdir`).
    fn process(
        &self,
        rec: &mut RunRecord,
        project: &Path,
        pdir: &Path,
        k: usize,
        args: Vec<String>,
        deadline: Instant,
    ) -> Step {
        let mut cmd = Command::new(&self.runner.hel);
        cmd.current_dir(project)
            .args(&self.provider_args)
            .arg("--record")
            .arg(pdir)
            .args(&args);
        let p = match run_process(&mut cmd, deadline) {
            Ok(p) => p,
            Err(e) => return Step::Invalid(format!("cannot start hel: {e}")),
        };
        let _ = std::fs::write(pdir.join("stderr.txt"), &p.stderr);
        let session = p
            .stderr
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("session: "))
            .unwrap_or("")
            .to_owned();
        rec.processes.push(ProcessEntry {
            args,
            exit_code: p.exit_code,
            record: format!("processes/{}/record.json", k + 1),
            session: session.clone(),
        });
        let last_err = p.stderr.lines().last().unwrap_or("");
        match std::fs::read_to_string(pdir.join("record.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<HelRecord>(&t).ok())
        {
            Some(r) => rec.absorb(&r),
            None if p.exit_code == Some(2) => {
                return Step::Invalid(format!("hel refused its configuration: {last_err}"))
            }
            None => return Step::Invalid("a hel process left no record.json".into()),
        }
        if p.stderr.contains("cannot reach the model server") {
            return Step::Invalid("the model server was unreachable".into());
        }
        if p.timed_out {
            rec.failure_reason = Some(format!(
                "the run exceeded {}s",
                self.spec.limits.run_seconds
            ));
            return Step::Stop;
        }
        if p.exit_code != Some(0) {
            // A failure ends the run: no further API requests.
            rec.failure_reason = Some(format!(
                "process {} exited {:?}: {last_err}",
                k + 1,
                p.exit_code
            ));
            return Step::Stop;
        }
        Step::Go(p.stdout, session)
    }
}

/// What a run does after one of its processes.
enum Step {
    /// Go on; the process's stdout and session.
    Go(String, String),
    /// The run failed: no further process.
    Stop,
    /// The run is invalid, for this reason.
    Invalid(String),
}

/// The processes of a condition: their arguments after the provider flags
/// (`{session}` stands for the first process's session).
fn steps(condition: Condition, first: &str, second: &str) -> Vec<Vec<String>> {
    let p = |text: &str| vec!["-p".to_owned(), text.to_owned()];
    match condition {
        Condition::Continuous => vec![[p(first), p(second)].concat()],
        Condition::Restart => vec![p(first), p(second)],
        Condition::Resume => vec![
            p(first),
            [vec!["resume".to_owned(), "{session}".to_owned()], p(second)].concat(),
        ],
    }
}

fn invalid(mut rec: RunRecord, why: &str) -> RunRecord {
    rec.valid = false;
    rec.invalid_reason = Some(why.to_owned());
    rec
}

/// Copy the fixture tree `from` into `to`.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry?;
        let rel = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let dst = to.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dst)?;
        } else {
            std::fs::copy(entry.path(), dst)?;
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
fn run_process(cmd: &mut Command, deadline: Instant) -> std::io::Result<Process> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Drained while it runs, so a full pipe never blocks it.
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut bytes);
            }
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let left = deadline.saturating_duration_since(Instant::now());
    let (status, timed_out) = match child.wait_timeout(left)? {
        Some(s) => (s, false),
        None => {
            let _ = child.kill();
            (child.wait()?, true)
        }
    };
    Ok(Process {
        exit_code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        timed_out,
    })
}
