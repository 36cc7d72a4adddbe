//! Machine-readable output of a run with `-p` or piped instructions
//! (`--output-format json|stream-json`): stdout carries JSON only, one
//! object per line, and stderr keeps the human progress lines. The schema
//! is in the README ("Output for scripts"); [`VERSION`] names it.
//!
//! `stream-json` writes an event for what the run reports as it happens
//! (the agent's [`Event`]s), the `session` event first, and a `result`
//! event when an instruction ends; `json` writes only the `result` objects.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::time::Duration;

use hel_agent::{Decision, Event, Incomplete, Observer, Outcome, Run};
use serde_json::{json, Value};

use crate::render::Stderr;

/// The version of the event schema; a change that removes or changes a
/// field raises it (new fields and new event types do not).
pub const VERSION: u64 = 1;

/// At most this many characters of a tool result go into its event (the
/// whole result is what the model read: `hel sessions show` has it).
const EXCERPT_CHARS: usize = 2000;

/// Renders a run's events on stderr as [`Stderr`] does, and writes JSON
/// lines on stdout.
pub struct JsonOut {
    /// Every event (`stream-json`), or only results (`json`).
    stream: bool,
    /// `--include-partial`: text deltas too.
    partial: bool,
    out: RefCell<Box<dyn Write>>,
    /// Events before the `session` event, held back so that it comes
    /// first (None once it was written).
    held: RefCell<Option<Vec<Value>>>,
    session: RefCell<Option<String>>,
    /// The checkpoint the current instruction saved.
    checkpoint: RefCell<Option<String>>,
    instructions: Cell<u64>,
}

/// How an instruction ended, for its `result` event.
pub struct Finished<'a> {
    pub outcome: &'a Outcome,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub estimated: bool,
    pub duration: Duration,
    /// The exit status this instruction gives the run.
    pub exit: u8,
}

impl JsonOut {
    /// On the process's stdout; `stream`: every event, not only results.
    pub fn new(stream: bool, partial: bool) -> JsonOut {
        JsonOut {
            stream,
            partial,
            out: RefCell::new(Box::new(std::io::stdout())),
            held: RefCell::new(Some(Vec::new())),
            session: RefCell::new(None),
            checkpoint: RefCell::new(None),
            instructions: Cell::new(0),
        }
    }

    /// The run has started: write the `session` event, then what was held
    /// back. `access` is the access mode's name.
    pub fn started(&self, run: &Run, access: &str) {
        let status = run.status();
        let project = run.project();
        let session = json!({
            "type": "session",
            "version": VERSION,
            "session_id": status.session.as_ref().map(|s| s.to_string()),
            // A resumed or forked session has its records already; a new
            // one is written from its first instruction on.
            "saved": status.head.is_some(),
            "model": status.model,
            "access": access,
            "project": project.root.display().to_string(),
            "cwd": project.cwd.display().to_string(),
        });
        if self.stream {
            self.write(&session);
        }
        for v in self.held.borrow_mut().take().unwrap_or_default() {
            self.write(&v);
        }
    }

    /// Write the `result` of the instruction that just ended.
    pub fn result(&self, f: &Finished<'_>) {
        let n = self.instructions.get() + 1;
        self.instructions.set(n);
        let (answer, error) = match f.outcome {
            Outcome::Completed(a) => (Some(a.as_str()), None),
            Outcome::Incomplete(why) => (None, Some(why.to_string())),
        };
        let result = json!({
            "type": "result",
            "version": VERSION,
            "session_id": *self.session.borrow(),
            "instruction": n,
            "answer": answer,
            "termination": f.outcome.termination().name(),
            "error": error,
            "checkpoint": self.checkpoint.borrow_mut().take(),
            "usage": {
                "input_tokens": f.input_tokens,
                "output_tokens": f.output_tokens,
                "estimated": f.estimated,
            },
            "duration_ms": u64::try_from(f.duration.as_millis()).unwrap_or(u64::MAX),
            "exit": f.exit,
        });
        self.emit(result);
    }

    /// Write `v` now, or hold it until the `session` event is out.
    fn emit(&self, v: Value) {
        if let Some(held) = self.held.borrow_mut().as_mut() {
            held.push(v);
            return;
        }
        self.write(&v);
    }

    /// One line: the object with its `type` first (then the other keys
    /// in order), for whoever reads the stream by eye.
    fn write(&self, v: &Value) {
        let line = match v {
            Value::Object(map) => {
                let mut rest = map.clone();
                let kind = rest.remove("type").unwrap_or(Value::Null);
                let rest = Value::Object(rest).to_string();
                match rest.strip_prefix('{').filter(|r| *r != "}") {
                    Some(r) => format!("{{\"type\":{kind},{r}"),
                    None => format!("{{\"type\":{kind}}}"),
                }
            }
            other => other.to_string(),
        };
        let mut out = self.out.borrow_mut();
        // A closed stdout is no reason for a run to stop (as for answers).
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    /// The stream event of `event`, if it has one.
    fn event_json(&self, event: &Event) -> Option<Value> {
        Some(match event {
            Event::SettingsChanged(diffs) => json!({"type": "settings_changed", "changes": diffs}),
            Event::ToolStarted {
                id,
                name,
                arguments,
            } => json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments}),
            Event::TextDelta(text) if self.partial => json!({"type": "text_delta", "text": text}),
            Event::Response {
                text,
                tool_calls,
                input_tokens,
                output_tokens,
                estimated,
            } => json!({
                "type": "response",
                "text": text,
                "tool_calls": tool_calls,
                "usage": {
                    "input_tokens": input_tokens,
                    "output_tokens": output_tokens,
                    "estimated": estimated,
                },
            }),
            Event::ResponseIncomplete => json!({"type": "response_incomplete"}),
            Event::Retry { error, wait, .. } => json!({
                "type": "retry",
                "error": error.to_string(),
                "wait_ms": u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            }),
            Event::Trimmed { under } => json!({"type": "trimmed", "under_tokens": under}),
            Event::Compacting { messages } => json!({"type": "compaction", "messages": messages}),
            Event::CompactionSkipped => json!({"type": "compaction_skipped"}),
            Event::OutputLowered {
                configured,
                window,
                limit,
            } => json!({
                "type": "warning",
                "message": format!("the output limit of {configured} tokens does not fit the context window of {window} tokens with the conversation; each request asks for what fits ({limit} tokens now)"),
            }),
            Event::CheckpointSaved { id } => json!({"type": "checkpoint", "id": id.to_hex()}),
            Event::Relocated {
                from,
                to,
                checkpoint,
            } => {
                json!({"type": "relocated", "from": from, "to": to, "checkpoint": checkpoint.to_hex()})
            }
            Event::Warning(w) => json!({"type": "warning", "message": w.to_string()}),
            Event::Hook(r) => {
                let (exit, signal) = match &r.outcome {
                    hel_agent::HookOutcome::Ok => (Some(0), None),
                    hel_agent::HookOutcome::Blocked => (Some(2), None),
                    hel_agent::HookOutcome::Failed(code) => (Some(*code), None),
                    hel_agent::HookOutcome::Signalled(sig) => (None, Some(*sig)),
                    _ => (None, None),
                };
                json!({
                    "type": "hook",
                    "event": r.event.name(),
                    "command": r.program,
                    "outcome": r.outcome_name(),
                    "exit": exit,
                    "signal": signal,
                    "stderr": r.stderr.chars().take(EXCERPT_CHARS).collect::<String>(),
                    "duration_ms": u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX),
                })
            }
            _ => return None,
        })
    }

    /// A tool call's `confirm` event (when it was asked) and its
    /// `tool_result`.
    fn tool_finished(&self, event: &Event) -> Vec<Value> {
        let Event::ToolFinished {
            id,
            name,
            content,
            ok,
            decision,
            spill,
        } = event
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if matches!(decision, Decision::Confirmed | Decision::Denied) {
            out.push(json!({
                "type": "confirm",
                "id": id,
                "name": name,
                "allowed": *decision == Decision::Confirmed,
            }));
        }
        let chars = content.chars().count();
        let excerpt: String = content.chars().take(EXCERPT_CHARS).collect();
        out.push(json!({
            "type": "tool_result",
            "id": id,
            "name": name,
            "ok": ok,
            "content": excerpt,
            "chars": chars,
            "cut": chars > EXCERPT_CHARS,
            "spill": spill,
        }));
        out
    }
}

impl Observer for JsonOut {
    fn event(&self, event: Event) {
        match &event {
            Event::Session(id) => *self.session.borrow_mut() = id.as_ref().map(|s| s.to_string()),
            Event::CheckpointSaved { id } => *self.checkpoint.borrow_mut() = Some(id.to_hex()),
            _ => {}
        }
        if self.stream {
            let values = match &event {
                Event::ToolFinished { .. } => self.tool_finished(&event),
                e => self.event_json(e).into_iter().collect(),
            };
            for v in values {
                self.emit(v);
            }
        }
        Stderr.event(event);
    }
}

/// The exit status an instruction's outcome gives a run of `-p`
/// instructions (the README's exit codes).
pub fn exit_status(outcome: &Outcome) -> u8 {
    match outcome {
        Outcome::Completed(_) => 0,
        Outcome::Incomplete(Incomplete::Interrupted) => 130,
        Outcome::Incomplete(_) => 1,
    }
}
