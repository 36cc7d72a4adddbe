//! The run-level record (documented in the crate docs) and what the runner
//! reads of hel's own records.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `DIR/<experiment>/<condition>/<rep>/record.json`. Fields in
/// alphabetical order: the order the file has always had.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunRecord {
    pub condition: String,
    pub experiment: String,
    pub failure_reason: Option<String>,
    pub final_answer: Option<String>,
    pub identifier: String,
    pub input_tokens: u64,
    pub invalid_reason: Option<String>,
    pub output_tokens: u64,
    pub processes: Vec<ProcessEntry>,
    pub provider: String,
    pub rep: u64,
    pub requests: u64,
    pub success: bool,
    pub tool_calls: u64,
    pub valid: bool,
    pub wall_time_ms: u64,
}

/// One hel process of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessEntry {
    pub args: Vec<String>,
    pub exit_code: Option<i32>,
    /// `processes/<k>/record.json`, relative to the run.
    pub record: String,
    pub session: String,
}

/// What the runner sums of a hel process's record.json.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct HelRecord {
    pub model_calls: u64,
    pub compaction_requests: u64,
    pub usage: Usage,
    pub tool_calls: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl RunRecord {
    /// Add what one hel process's record counts.
    pub(crate) fn absorb(&mut self, r: &HelRecord) {
        self.requests += r.model_calls + r.compaction_requests;
        self.input_tokens += r.usage.input_tokens;
        self.output_tokens += r.usage.output_tokens;
        self.tool_calls += r.tool_calls.len() as u64;
    }

    /// The run as one line for progress output.
    pub fn summary(&self) -> String {
        let outcome = if !self.valid {
            format!("invalid ({})", self.invalid_reason.as_deref().unwrap_or(""))
        } else if self.success {
            "success".into()
        } else {
            format!("failure ({})", self.failure_reason.as_deref().unwrap_or(""))
        };
        format!(
            "{}/{}/{}: {outcome}",
            self.experiment, self.condition, self.rep
        )
    }
}
