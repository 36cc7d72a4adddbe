//! Record mode (`--record DIR`): `DIR/record.json` summarizes the run and
//! `DIR/raw/requests.jsonl` holds every API request and response body.
//!
//! record.json fields (all counts are integers; tokens are as the API
//! reported them, never estimated, except `meter.estimate`):
//! - `model` {`requested`: the model hel asked for, `actual`: the model the
//!   last response named (null before any response)}
//! - `session_id`: the session this process worked on.
//! - `final_outputs`: the final answer of each completed instruction, in order.
//! - `termination`: `completed` when every instruction completed, else the
//!   reason the first incomplete one ended: `max_turns`,
//!   `max_output_tokens`, `timeout`, `error`, `interrupted`, `context_overflow`.
//! - `instructions`: one entry per instruction {`termination`, `error`?}.
//! - `usage` {`input_tokens`, `output_tokens`}: sums of `prompt_tokens` and
//!   `completion_tokens` over all responses, compaction requests included.
//! - `model_calls`: requests with purpose `turn`; `compaction_requests`:
//!   those with purpose `compaction`.
//! - `requests`: one per model request {`purpose`, `input_tokens`,
//!   `output_tokens`, `meter` {`observed`: whether the estimate rested on a
//!   real observation, `estimate`: the Meter's estimate before sending, in
//!   tokens (derived)}}.
//! - `meter_restored`: the Meter came back from a checkpoint at resume.
//! - `tool_calls`: one per call {`name`, `args` (parsed, or the raw string
//!   when not JSON), `ok`: false only when the tool could not do its job,
//!   `decision`: `auto`, `confirmed`, `denied` or `read-only`}.
//! - `wall_time_ms`: from start to the end of the run (measured).
//!
//! raw/requests.jsonl: one line per API request
//! `{"purpose": "turn"|"compaction", "request": <body>, "response": <body or {"error": …}>}`.
//! The authorization header is never written.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};

/// One model request as record mode sees it.
pub struct Exchange<'a> {
    /// `turn` or `compaction`.
    pub purpose: &'a str,
    pub request: &'a Value,
    pub response: &'a Value,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The Meter's estimate before sending.
    pub estimate: u64,
    /// Whether the estimate rested on an observation.
    pub observed: bool,
    pub actual_model: Option<&'a str>,
}

pub struct Recorder {
    dir: PathBuf,
    raw: File,
    started: Instant,
    record: Value,
}

impl Recorder {
    pub fn create(dir: &Path, requested_model: &str) -> std::io::Result<Recorder> {
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
            record: json!({
                "model": {"requested": requested_model, "actual": null},
                "session_id": null,
                "final_outputs": [],
                "termination": "completed",
                "instructions": [],
                "usage": {"input_tokens": 0, "output_tokens": 0},
                "model_calls": 0,
                "compaction_requests": 0,
                "requests": [],
                "meter_restored": false,
                "tool_calls": [],
                "wall_time_ms": 0,
            }),
        })
    }

    pub fn set(&mut self, key: &str, value: Value) {
        self.record[key] = value;
    }

    /// One model request and its outcome.
    pub fn request(&mut self, x: Exchange<'_>) {
        let line = json!({"purpose": x.purpose, "request": x.request, "response": x.response});
        let _ = writeln!(self.raw, "{line}");
        let r = &mut self.record;
        let counter = if x.purpose == "compaction" {
            "compaction_requests"
        } else {
            "model_calls"
        };
        r[counter] = json!(r[counter].as_u64().unwrap_or(0) + 1);
        r["usage"]["input_tokens"] =
            json!(r["usage"]["input_tokens"].as_u64().unwrap_or(0) + x.input_tokens);
        r["usage"]["output_tokens"] =
            json!(r["usage"]["output_tokens"].as_u64().unwrap_or(0) + x.output_tokens);
        if let Some(m) = x.actual_model {
            r["model"]["actual"] = json!(m);
        }
        push(
            r,
            "requests",
            json!({
                "purpose": x.purpose,
                "input_tokens": x.input_tokens,
                "output_tokens": x.output_tokens,
                "meter": {"observed": x.observed, "estimate": x.estimate},
            }),
        );
    }

    pub fn tool_call(&mut self, name: &str, args: &str, ok: bool, decision: &str) {
        let args = serde_json::from_str::<Value>(args).unwrap_or_else(|_| json!(args));
        push(
            &mut self.record,
            "tool_calls",
            json!({"name": name, "args": args, "ok": ok, "decision": decision}),
        );
    }

    /// The end of one instruction.
    pub fn instruction(
        &mut self,
        termination: &str,
        final_output: Option<&str>,
        error: Option<&str>,
    ) {
        if let Some(out) = final_output {
            push(&mut self.record, "final_outputs", json!(out));
        }
        let mut entry = json!({"termination": termination});
        if let Some(e) = error {
            entry["error"] = json!(e);
        }
        push(&mut self.record, "instructions", entry);
        if termination != "completed" && self.record["termination"] == "completed" {
            self.record["termination"] = json!(termination);
        }
        self.flush();
    }

    /// Write record.json (again); called after every instruction and at exit.
    pub fn flush(&mut self) {
        self.record["wall_time_ms"] = json!(self.started.elapsed().as_millis() as u64);
        let _ = self.raw.flush();
        let path = self.dir.join("record.json");
        let tmp = self.dir.join(".record.json.tmp");
        let text = serde_json::to_string_pretty(&self.record).unwrap_or_default();
        if fs::write(&tmp, text)
            .and_then(|_| fs::rename(&tmp, &path))
            .is_err()
        {
            crate::note!("hel: warning: cannot write {}", path.display());
        }
    }
}

fn push(record: &mut Value, key: &str, item: Value) {
    if let Some(a) = record[key].as_array_mut() {
        a.push(item);
    }
}
