//! An instruction's progress, recorded as it happens, and carried into
//! the conversation after a crash.
//!
//! While an instruction runs, each step of its tool rounds (the reply
//! that calls tools, then each call's result) is appended to the
//! session's journal as a round record (objects-spec §10.2, "Round
//! records"): no sync, no checkpoint, no record of the session's history.
//! Its end record stores the whole conversation and its commit cuts the
//! round records. When the process dies first, the session's head is the
//! instruction's `start` record (or the answer before it) and the round
//! records follow it: a resume carries the instruction's user message,
//! its finished calls with their results, a result for each call that
//! had none, and a line saying the process ended, before the next
//! instruction.
//!
//! A round record's payload is JSON:
//! `{"hel_round": 1, "base": "<head id>", "seq": n, "messages": [...]}`:
//! the session's head when it was written, its number (0, 1, 2, … within
//! the instruction) and the messages the instruction added since the one
//! before (the first holds its user message and the first reply).

use hel_store::{json, message, Limits, ObjectId, SessionId, Store};
use serde_json::{json, Value};

use super::save::Session;
use crate::agent::Agent;
use crate::event::Warning;

/// The payload's version key.
const KEY: &str = "hel_round";

/// The result given, at a resume, to the call that was running when the
/// process ended.
pub(crate) const ENDED_RUNNING: &str = "[hel: no result: the hel process ended (killed or crashed) while this call ran; whether it finished, and what it changed, is not known]";
/// The result given, at a resume, to a call after it, never started.
pub(crate) const ENDED_NOT_RUN: &str =
    "[hel: not run: the hel process ended (killed or crashed) before this call started]";
/// The line after a cut-off instruction's carried part.
pub(crate) const ENDED_NOTE: &str = "[hel: the hel process ended (killed or crashed) before the instruction above finished; its finished tool calls and their results are above. The next instruction follows.]";

/// What of the instruction in progress was recorded.
#[derive(Default)]
pub(crate) struct RoundLog {
    /// The session's head the records follow, and where the
    /// instruction's user message is (None: nothing recorded yet).
    at: Option<(ObjectId, usize)>,
    /// How many of the instruction's messages are recorded.
    recorded: usize,
    seq: u64,
    /// Recording stopped: it failed (said once), or a compaction moved
    /// the instruction's messages.
    off: bool,
}

impl RoundLog {
    /// Record what the instruction in progress added since the last call.
    /// Returns a warning when the record could not be written (said once
    /// an instruction; recording stops).
    pub(crate) fn record(&mut self, session: &mut Session, agent: &Agent) -> Option<Warning> {
        if self.off {
            return None;
        }
        let head = session.state.head?;
        let Some((start, msgs)) = agent.conversation().open_messages() else {
            self.off = true;
            return None;
        };
        match self.at {
            None => self.at = Some((head, start)),
            // A compaction moved the instruction's messages (or a commit
            // moved the head, which none does mid-instruction): the
            // records so far no longer describe it.
            Some(at) if at != (head, start) || msgs.len() < self.recorded => {
                self.off = true;
                return None;
            }
            Some(_) => {}
        }
        let new = msgs.get(self.recorded..).unwrap_or_default();
        if new.is_empty() {
            return None;
        }
        let payload = json!({
            KEY: 1,
            "base": head.to_hex(),
            "seq": self.seq,
            "messages": new,
        });
        let bytes = serde_json::to_vec(&payload).unwrap_or_default();
        match hel_store::rounds::append(&session.store, &session.lease, &session.state, &bytes) {
            Ok(()) => {
                self.seq += 1;
                self.recorded = msgs.len();
                None
            }
            Err(e) => {
                self.off = true;
                Some(Warning::RoundsNotRecorded(e))
            }
        }
    }
}

/// The messages a resume of `session` at `head` carries of an
/// instruction cut off by the end of the process, to follow
/// `conversation` (the head's): its user message, its recorded replies
/// and results, a result for each call left without one (the first
/// [`ENDED_RUNNING`], the rest [`ENDED_NOT_RUN`]) and [`ENDED_NOTE`].
/// Empty when there is none. Round records are read as untrusted: each
/// within the JSON limits, numbered from 0 without a gap, naming `head`;
/// the messages valid as a load requires, pairing with their calls,
/// within `limits` together with `conversation`. The first record that
/// breaks a rule ends what is carried (whatever came before it holds).
pub(crate) fn carried(
    store: &Store,
    session: &SessionId,
    head: &ObjectId,
    conversation: &[Value],
    limits: &Limits,
) -> Result<Vec<Value>, hel_store::Error> {
    let payloads = hel_store::rounds::read(store, session, head)?;
    Ok(assemble(recorded(&payloads, head), conversation, limits))
}

/// The messages of round records `payloads` (in file order) that follow
/// `head`: while each parses within the JSON limits, is of this version,
/// names `head` and is numbered one more than the one before, from 0.
fn recorded(payloads: &[Vec<u8>], head: &ObjectId) -> Vec<Value> {
    let base = head.to_hex();
    let mut messages: Vec<Value> = Vec::new();
    for (seq, bytes) in payloads.iter().enumerate() {
        let Ok(v) = json::from_slice::<Value>(bytes, json::Limits::MESSAGE) else {
            break;
        };
        let fits = v.get(KEY).and_then(Value::as_u64) == Some(1)
            && v.get("base").and_then(Value::as_str) == Some(base.as_str())
            && v.get("seq").and_then(Value::as_u64) == Some(seq as u64);
        let Some(Value::Array(new)) = v.get("messages").filter(|_| fits) else {
            break;
        };
        messages.extend(new.iter().cloned());
    }
    messages
}

/// [`carried`]'s rules over the recorded messages, in order.
fn assemble(recorded: Vec<Value>, conversation: &[Value], limits: &Limits) -> Vec<Value> {
    let mut it = recorded.into_iter();
    let Some(user) = it.next() else {
        return Vec::new();
    };
    let is_user = user.get("role").and_then(Value::as_str) == Some("user")
        && user.get("content").is_some_and(Value::is_string);
    if !is_user {
        return Vec::new();
    }
    let mut out = vec![user];
    // The calls of the last reply still without a result, in order.
    let mut open: Vec<String> = Vec::new();
    for m in it {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let fits = match role {
            "assistant" if open.is_empty() => {
                let calls: Vec<String> = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|calls| {
                        calls
                            .iter()
                            .filter_map(|c| c.get("id").and_then(Value::as_str))
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let ok = !calls.is_empty() && message::validate_reply(&m).is_ok();
                if ok {
                    open = calls;
                }
                ok
            }
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str);
                let ok = !open.is_empty()
                    && id == Some(open[0].as_str())
                    && message::validate(&m).is_ok();
                if ok {
                    open.remove(0);
                }
                ok
            }
            _ => false,
        };
        if !fits {
            break;
        }
        out.push(m);
    }
    for (k, id) in open.iter().enumerate() {
        let content = if k == 0 { ENDED_RUNNING } else { ENDED_NOT_RUN };
        out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
    }
    out.push(json!({"role": "user", "content": ENDED_NOTE}));
    // What a load would refuse is not carried at all.
    let mut all = conversation.to_vec();
    for m in &out {
        if message::validate(m).is_err() || limits.admit(&all, m).is_err() {
            return Vec::new();
        }
        all.push(m.clone());
    }
    if message::check_pairing(&all).is_err() {
        return Vec::new();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": "bash", "arguments": "{}"}})
    }

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn open_calls_get_results_and_the_note_follows() {
        let recorded = vec![
            json!({"role": "user", "content": "do it"}),
            json!({"role": "assistant", "content": null, "tool_calls": [call("a")]}),
            json!({"role": "tool", "tool_call_id": "a", "content": "one"}),
            json!({"role": "assistant", "content": null, "tool_calls": [call("b"), call("c")]}),
        ];
        let sys = vec![json!({"role": "system", "content": "s"})];
        let out = assemble(recorded, &sys, &limits());
        assert_eq!(out.len(), 7, "{out:#?}");
        assert_eq!(out[4]["tool_call_id"], "b");
        assert_eq!(out[4]["content"], ENDED_RUNNING);
        assert_eq!(out[5]["tool_call_id"], "c");
        assert_eq!(out[5]["content"], ENDED_NOT_RUN);
        assert_eq!(out[6]["content"], ENDED_NOTE);
    }

    /// Forged or stale round records: what follows the first that breaks
    /// a rule is left out, and nothing of it is read past the limits.
    #[test]
    fn records_are_taken_in_order_naming_the_head() {
        let head: ObjectId = "ab".repeat(32).parse().unwrap();
        let other: ObjectId = "cd".repeat(32).parse().unwrap();
        let rec = |base: &ObjectId, seq: u64, text: &str| {
            serde_json::to_vec(&json!({
                KEY: 1, "base": base.to_hex(), "seq": seq,
                "messages": [{"role": "user", "content": text}],
            }))
            .unwrap()
        };
        let texts = |v: Vec<Value>| -> Vec<String> {
            v.iter()
                .map(|m| m["content"].as_str().unwrap().to_owned())
                .collect()
        };
        // In order: all.
        let ok = vec![rec(&head, 0, "a"), rec(&head, 1, "b")];
        assert_eq!(texts(recorded(&ok, &head)), ["a", "b"]);
        // Another head's (stale): nothing.
        assert!(recorded(&ok, &other).is_empty());
        // A gap, a wrong version, a repeated key, a depth bomb, not JSON:
        // what came before stays.
        let gap = vec![rec(&head, 0, "a"), rec(&head, 2, "c")];
        assert_eq!(texts(recorded(&gap, &head)), ["a"]);
        let mut version = rec(&head, 1, "b");
        version = String::from_utf8(version)
            .unwrap()
            .replace("\"hel_round\":1", "\"hel_round\":2")
            .into_bytes();
        assert_eq!(
            texts(recorded(&[rec(&head, 0, "a"), version], &head)),
            ["a"]
        );
        let twice = format!(
            "{{\"hel_round\":1,\"base\":\"{}\",\"seq\":1,\"seq\":1,\"messages\":[]}}",
            head.to_hex()
        );
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        for bad in [twice.into_bytes(), deep.into_bytes(), b"\xff\xfe".to_vec()] {
            assert_eq!(texts(recorded(&[rec(&head, 0, "a"), bad], &head)), ["a"]);
        }
    }

    #[test]
    fn a_result_for_no_open_call_ends_what_is_carried() {
        let recorded = vec![
            json!({"role": "user", "content": "do it"}),
            json!({"role": "assistant", "content": null, "tool_calls": [call("a")]}),
            json!({"role": "tool", "tool_call_id": "a", "content": "one"}),
            json!({"role": "tool", "tool_call_id": "zz", "content": "forged"}),
        ];
        let out = assemble(recorded, &[], &limits());
        assert_eq!(out.len(), 4, "{out:#?}");
        assert_eq!(out[3]["content"], ENDED_NOTE);
        // Not a user message first: nothing.
        let out = assemble(vec![json!({"role": "tool"})], &[], &limits());
        assert!(out.is_empty());
    }
}
