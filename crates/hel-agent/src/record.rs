//! Record mode (`--record DIR`): `DIR/record.json` summarizes the run and
//! `DIR/raw/requests.jsonl` holds every API request and response body.
//!
//! record.json fields (all counts are integers; tokens are as the API
//! reported them, except `meter.estimate` and the figures of a response
//! that carried no usage, which are hel's chars/4 estimate and say so):
//! - `model` {`requested`: the model hel asked for, `actual`: the model the
//!   last response named (null before any response)}
//! - `session_id`: the session this process worked on.
//! - `final_outputs`: the final answer of each completed instruction, in order.
//! - `termination`: `completed` when every instruction completed, else the
//!   reason the first incomplete one ended: `max_turns`,
//!   `max_output_tokens`, `timeout`, `error`, `interrupted`, `context_overflow`.
//! - `instructions`: one entry per instruction {`termination`, `error`?}.
//! - `usage` {`input_tokens`, `output_tokens`, `estimated`}: sums of
//!   `prompt_tokens` and `completion_tokens` over all responses, compaction
//!   requests included; `estimated`: some of them are estimates.
//! - `model_calls`: requests with purpose `turn`; `compaction_requests`:
//!   those with purpose `compaction`.
//! - `requests`: one per model request {`purpose`, `input_tokens`,
//!   `output_tokens`, `estimated`: the response carried no usage, so the
//!   two figures are chars/4 of the request as sent and of the answer,
//!   `meter` {`observed`: whether the estimate rested on an observation
//!   (the server's count or, for a server that reports none, an estimate),
//!   `estimate`: the Meter's estimate before sending, in tokens (derived)}}.
//! - `meter_restored`: the Meter came back from a checkpoint at resume.
//! - `tool_calls`: one per call {`name`, `args` (parsed, or the raw string
//!   when not JSON), `ok`: false only when the tool could not do its job,
//!   `decision`: `auto`, `confirmed`, `denied` or `read-only`}.
//! - `wall_time_ms`: from start to the end of the run (measured).
//!
//! raw/requests.jsonl: one line per API request
//! `{"purpose": "turn"|"compaction", "request": <body>, "response": <body or {"error": …}>}`.
//! `request` is the body as sent (`stream` included); a streamed
//! `response` is the one its deltas assembled to, as a non-streamed
//! response body (`object`: `chat.completion`).
//! The authorization header is never written.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use crate::event::Warning;
use crate::outcome::Termination;
use crate::tools::Decision;

/// Why a model request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Purpose {
    /// A turn of an instruction.
    Turn,
    /// A summary for compaction.
    Compaction,
}

/// One model request as record mode sees it.
pub(crate) struct Exchange<'a> {
    pub purpose: Purpose,
    pub request: &'a Value,
    pub response: &'a Value,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The response carried no usage: the two figures are hel's estimate.
    pub estimated: bool,
    /// The Meter's estimate before sending.
    pub estimate: u64,
    /// Whether the estimate rested on an observation.
    pub observed: bool,
    pub actual_model: Option<&'a str>,
}

// The structs below are record.json as documented above. Their fields are
// in alphabetical order: the order record.json has always had.

/// record.json.
#[derive(Serialize)]
struct Record {
    compaction_requests: u64,
    final_outputs: Vec<String>,
    instructions: Vec<InstructionEntry>,
    meter_restored: bool,
    model: ModelNames,
    model_calls: u64,
    requests: Vec<RequestEntry>,
    session_id: Option<String>,
    termination: &'static str,
    tool_calls: Vec<ToolCallEntry>,
    usage: Tokens,
    wall_time_ms: u64,
}

#[derive(Serialize)]
struct ModelNames {
    actual: Option<String>,
    requested: String,
}

#[derive(Serialize)]
struct InstructionEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    termination: &'static str,
}

#[derive(Serialize)]
struct RequestEntry {
    estimated: bool,
    input_tokens: u64,
    meter: MeterEntry,
    output_tokens: u64,
    purpose: Purpose,
}

#[derive(Serialize)]
struct MeterEntry {
    estimate: u64,
    observed: bool,
}

#[derive(Serialize)]
struct ToolCallEntry {
    args: Value,
    decision: Decision,
    name: String,
    ok: bool,
}

#[derive(Serialize)]
struct Tokens {
    estimated: bool,
    input_tokens: u64,
    output_tokens: u64,
}

/// One line of raw/requests.jsonl.
#[derive(Serialize)]
struct RawLine<'a> {
    purpose: Purpose,
    request: &'a Value,
    response: &'a Value,
}

pub(crate) struct Recorder {
    dir: PathBuf,
    raw: File,
    started: Instant,
    record: Record,
}

impl Recorder {
    pub(crate) fn create(dir: &Path, requested_model: &str) -> std::io::Result<Recorder> {
        fs::create_dir_all(dir.join("raw"))?;
        let raw = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(dir.join("raw").join("requests.jsonl"))?;
        Ok(Recorder {
            dir: dir.to_owned(),
            raw,
            started: Instant::now(),
            record: Record {
                compaction_requests: 0,
                final_outputs: Vec::new(),
                instructions: Vec::new(),
                meter_restored: false,
                model: ModelNames {
                    actual: None,
                    requested: requested_model.to_owned(),
                },
                model_calls: 0,
                requests: Vec::new(),
                session_id: None,
                termination: Termination::Completed.name(),
                tool_calls: Vec::new(),
                usage: Tokens {
                    estimated: false,
                    input_tokens: 0,
                    output_tokens: 0,
                },
                wall_time_ms: 0,
            },
        })
    }

    pub(crate) fn set_session(&mut self, id: &hel_store::SessionId) {
        self.record.session_id = Some(id.to_string());
    }

    pub(crate) fn set_meter_restored(&mut self, restored: bool) {
        self.record.meter_restored = restored;
    }

    /// One model request and its outcome.
    pub(crate) fn request(&mut self, x: Exchange<'_>) {
        let line = RawLine {
            purpose: x.purpose,
            request: x.request,
            response: x.response,
        };
        if let Ok(text) = serde_json::to_string(&line) {
            let _ = writeln!(self.raw, "{text}");
        }
        let r = &mut self.record;
        match x.purpose {
            Purpose::Compaction => r.compaction_requests += 1,
            Purpose::Turn => r.model_calls += 1,
        }
        // The server's figures: absurd ones saturate, never overflow.
        r.usage.input_tokens = r.usage.input_tokens.saturating_add(x.input_tokens);
        r.usage.output_tokens = r.usage.output_tokens.saturating_add(x.output_tokens);
        r.usage.estimated |= x.estimated;
        if let Some(m) = x.actual_model {
            r.model.actual = Some(m.to_owned());
        }
        r.requests.push(RequestEntry {
            estimated: x.estimated,
            input_tokens: x.input_tokens,
            meter: MeterEntry {
                estimate: x.estimate,
                observed: x.observed,
            },
            output_tokens: x.output_tokens,
            purpose: x.purpose,
        });
    }

    pub(crate) fn tool_call(&mut self, name: &str, args: &str, ok: bool, decision: Decision) {
        let args = serde_json::from_str::<Value>(args).unwrap_or_else(|_| Value::from(args));
        self.record.tool_calls.push(ToolCallEntry {
            args,
            decision,
            name: name.to_owned(),
            ok,
        });
    }

    /// The end of one instruction. Returns a warning when record.json
    /// could not be written.
    pub(crate) fn instruction(
        &mut self,
        termination: Termination,
        final_output: Option<&str>,
        error: Option<String>,
    ) -> Option<Warning> {
        if let Some(out) = final_output {
            self.record.final_outputs.push(out.to_owned());
        }
        self.record.instructions.push(InstructionEntry {
            error,
            termination: termination.name(),
        });
        if termination != Termination::Completed
            && self.record.termination == Termination::Completed.name()
        {
            self.record.termination = termination.name();
        }
        self.flush()
    }

    /// Write record.json (again), whole: a reader never sees a torn file.
    /// Called after every instruction and at exit.
    pub(crate) fn flush(&mut self) -> Option<Warning> {
        self.record.wall_time_ms = self.started.elapsed().as_millis() as u64;
        let _ = self.raw.flush();
        let path = self.dir.join("record.json");
        let written = serde_json::to_vec_pretty(&self.record)
            .map_err(std::io::Error::from)
            .and_then(|text| {
                // The mode a plain create would give (0666 less the umask).
                let mut tmp = tempfile::Builder::new()
                    .prefix(".record.json")
                    .permissions(std::fs::Permissions::from_mode(0o666))
                    .tempfile_in(&self.dir)?;
                tmp.write_all(&text)?;
                tmp.persist(&path).map_err(|e| e.error)?;
                Ok(())
            });
        written.err().map(|_| Warning::RecordUnwritable(path))
    }
}
