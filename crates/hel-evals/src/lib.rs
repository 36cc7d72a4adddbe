//! `hel-evals`: runs experiments against the real `hel` binary and reports
//! on them from the stored records alone.
//!
//! ```text
//! hel-evals run <SPEC> [--provider mock|deepseek|openai] [--out DIR] [--hel PATH]
//! hel-evals report <DIR>
//! ```
//!
//! `--hel` names the hel binary to drive (default: the `hel` next to
//! `hel-evals`). With `--provider mock` the runner serves the model itself
//! ([`hel_mock`], in-process).
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

mod record;
pub mod report;
pub mod run;
mod spec;

pub use record::{ProcessEntry, RunRecord};
pub use report::report;
pub use run::{run, Provider, Runner};

/// Why an experiment could not run or be reported.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Json {
        path: std::path::PathBuf,
        source: serde_json::Error,
    },
    #[error("no run records under {}", .0.display())]
    NoRecords(std::path::PathBuf),
    #[error("cannot start the mock model server: {0}")]
    Mock(#[from] hel_mock::MockError),
}

impl EvalError {
    fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> EvalError + '_ {
        move |source| EvalError::Io {
            path: path.to_owned(),
            source,
        }
    }
}
