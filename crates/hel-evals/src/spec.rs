//! Experiment specs (`tools/evals/*.json`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::EvalError;

/// An experiment.
#[derive(Debug, Deserialize)]
pub(crate) struct Spec {
    pub name: String,
    /// Relative to the spec.
    pub fixture: PathBuf,
    pub repetitions: u64,
    pub limits: Limits,
    /// Flags given to every hel process.
    #[serde(default)]
    pub hel_args: Vec<String>,
    pub task: Task,
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Limits {
    /// Wall time of one run (all its processes).
    #[serde(default = "Limits::run_seconds")]
    pub run_seconds: u64,
    #[serde(default = "Limits::max_output_tokens")]
    pub max_output_tokens: u64,
}

impl Limits {
    fn run_seconds() -> u64 {
        120
    }
    fn max_output_tokens() -> u64 {
        8192
    }
}

/// The recall task: plant an identifier, ask for it.
#[derive(Debug, Deserialize)]
pub(crate) struct Task {
    #[serde(default = "Task::prefix")]
    pub identifier_prefix: String,
    #[serde(default = "Task::digits")]
    pub identifier_hex_digits: usize,
    /// The first instruction; `{identifier}` stands for the identifier.
    pub first: String,
    pub second: String,
}

impl Task {
    fn prefix() -> String {
        "ID-".into()
    }
    fn digits() -> usize {
        32
    }
}

/// How the second instruction reaches hel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Condition {
    /// Both instructions in one process.
    Continuous,
    /// The second in a new process and a new session.
    Restart,
    /// The second in a new process that resumes the session.
    Resume,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Condition::Continuous => "continuous",
            Condition::Restart => "restart",
            Condition::Resume => "resume",
        }
    }
}

impl Spec {
    pub fn read(path: &Path) -> Result<Spec, EvalError> {
        let text = std::fs::read_to_string(path).map_err(EvalError::io(path))?;
        serde_json::from_str(&text).map_err(|source| EvalError::Json {
            path: path.to_owned(),
            source,
        })
    }
}
