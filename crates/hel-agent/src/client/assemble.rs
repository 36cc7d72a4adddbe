//! Assembling a streamed chat completion: the chunks' deltas of choice 0
//! become the message a non-streamed response would have held.
//!
//! Merging, as the OpenAI SDKs do: a string piece is appended to what came
//! before (`content`, `reasoning_content`, a call's `function.name` and
//! `function.arguments`), except `role`, `type` and a call's `id`, which
//! are set; `null` adds nothing; any other value is set. Tool calls are
//! assembled by their `index` (pieces of several calls may interleave) and
//! listed in index order. A call's `function.name` piece equal to the name
//! assembled so far is dropped: some servers (llama-cpp-python) repeat the
//! whole name in every chunk, with the next piece of the arguments.
//!
//! Bounded: each chunk is parsed under the limits of one message
//! ([`json::Limits::MESSAGE`]), and what the assembler holds is counted
//! as it grows (a value set replaces the one before; a string piece adds
//! none): past the same count of values the stream is refused, however
//! the server spread them over chunks.

use std::collections::BTreeMap;

use hel_store::json;
use serde_json::{json, Map, Value};

use super::delta::Delta;
use super::error::{not_json, RequestError};

/// Fields of the response itself, taken from the first chunk naming them.
const HEAD: [&str; 4] = ["id", "model", "created", "system_fingerprint"];

/// A response being assembled.
#[derive(Default)]
pub(super) struct Assembler {
    head: Map<String, Value>,
    message: Map<String, Value>,
    calls: BTreeMap<u64, Map<String, Value>>,
    finish: Option<Value>,
    usage: Option<Value>,
    started: bool,
    /// Values held in `head`, `message`, `calls`, `finish` and `usage`.
    held: i64,
}

/// Values `v` is, itself included (as [`json`] counts them, keys too).
fn values(v: &Value) -> i64 {
    match v {
        Value::Array(a) => 1 + a.iter().map(values).sum::<i64>(),
        Value::Object(m) => 1 + m.values().map(|v| 1 + values(v)).sum::<i64>(),
        _ => 1,
    }
}

/// The most values an assembled response may hold.
const MAX_HELD: i64 = json::Limits::MESSAGE.max_values as i64;

impl Assembler {
    /// Take one event's data. Returns whether it was progress: a delta, a
    /// finish reason or the usage (an empty delta is not).
    pub(crate) fn chunk(
        &mut self,
        data: &str,
        on_delta: &mut dyn FnMut(Delta<'_>),
    ) -> Result<bool, RequestError> {
        let chunk: Value = json::from_str(data, json::Limits::MESSAGE).map_err(|e| {
            let what = if e.is_limit() {
                "a stream event is refused"
            } else {
                "a stream event is not JSON"
            };
            not_json(what, &e, data.as_bytes())
        })?;
        let Value::Object(chunk) = chunk else {
            return Err(malformed("a stream event is not a JSON object"));
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let text = match error.get("message").and_then(Value::as_str) {
                Some(m) => m.to_owned(),
                None => error.to_string(),
            };
            let text: String = text.chars().take(300).collect();
            return Err(RequestError::StreamFailed(
                crate::terminal::escape_line(&text).into_owned(),
            ));
        }
        for k in HEAD {
            if let Some(v) = chunk.get(k) {
                if !self.head.contains_key(k) {
                    self.held += 1 + values(v);
                    self.head.insert(k.to_owned(), v.clone());
                }
            }
        }
        let mut progress = false;
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            let old = self.usage.replace(usage.clone());
            self.held = self.held + values(usage) - old.as_ref().map_or(0, values);
            progress = true;
        }
        let mut text = String::new();
        let mut reasoning = String::new();
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(c)) => c.as_slice(),
            Some(_) => return Err(malformed("choices is not an array")),
        };
        for choice in choices {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            match choice.get("delta") {
                None | Some(Value::Null) => {}
                Some(Value::Object(delta)) => {
                    for (k, v) in delta {
                        if k == "tool_calls" {
                            self.tool_calls(v)?;
                        } else {
                            self.held += merge(&mut self.message, k, v, k == "role");
                            self.held_check()?;
                        }
                        if k == "content" {
                            text.push_str(v.as_str().unwrap_or(""));
                        }
                        if k == "reasoning_content" || k == "reasoning" {
                            reasoning.push_str(v.as_str().unwrap_or(""));
                        }
                    }
                    progress |= !delta.is_empty();
                }
                Some(_) => return Err(malformed("a delta is not an object")),
            }
            if let Some(f) = choice.get("finish_reason").filter(|f| !f.is_null()) {
                let old = self.finish.replace(f.clone());
                self.held = self.held + values(f) - old.as_ref().map_or(0, values);
                progress = true;
            }
        }
        self.held_check()?;
        if progress && !std::mem::replace(&mut self.started, true) {
            on_delta(Delta::First);
        }
        if !reasoning.is_empty() {
            on_delta(Delta::Reasoning(&reasoning));
        }
        if !text.is_empty() {
            on_delta(Delta::Text(&text));
        }
        Ok(progress)
    }

    /// Refuse the stream once it holds more than [`MAX_HELD`] values.
    fn held_check(&self) -> Result<(), RequestError> {
        if self.held > MAX_HELD {
            return Err(malformed(&format!(
                "the streamed response holds more than {MAX_HELD} JSON values: refused"
            )));
        }
        Ok(())
    }

    fn tool_calls(&mut self, calls: &Value) -> Result<(), RequestError> {
        let calls = match calls {
            Value::Null => return Ok(()),
            Value::Array(c) => c,
            _ => return Err(malformed("tool_calls is not an array")),
        };
        for call in calls {
            let call = call
                .as_object()
                .ok_or_else(|| malformed("a streamed tool call is not an object"))?;
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .ok_or_else(|| malformed("a streamed tool call has no index"))?;
            if !self.calls.contains_key(&index) {
                self.held += 1;
            }
            let acc = self.calls.entry(index).or_default();
            let mut held = 0;
            for (k, v) in call {
                match (k.as_str(), v) {
                    ("index", _) => {}
                    ("function", Value::Object(f)) => {
                        let slot = acc.entry("function").or_insert_with(|| {
                            held += 2;
                            Value::Object(Map::new())
                        });
                        if !slot.is_object() {
                            held = held + 1 - values(slot);
                            *slot = Value::Object(Map::new());
                        }
                        if let Value::Object(acc_f) = slot {
                            for (fk, fv) in f {
                                let repeated = fk == "name"
                                    && fv.as_str().is_some_and(|n| !n.is_empty())
                                    && acc_f.get("name") == Some(fv);
                                if !repeated {
                                    held += merge(acc_f, fk, fv, false);
                                }
                            }
                        }
                    }
                    ("function", Value::Null) => {}
                    ("function", _) => {
                        return Err(malformed(
                            "a streamed tool call's function is not an object",
                        ))
                    }
                    (k, v) => held += merge(acc, k, v, k == "id" || k == "type"),
                }
            }
            self.held += held;
            self.held_check()?;
        }
        Ok(())
    }

    /// The assembled response body: complete only with its finish reason.
    /// A stream that ended cleanly with nothing in it is
    /// [`RequestError::EmptyStream`].
    pub(crate) fn finish(self) -> Result<Value, RequestError> {
        if !self.started {
            return Err(RequestError::EmptyStream);
        }
        let Some(finish) = self.finish else {
            return Err(RequestError::Cut(
                "it ended without a finish reason".to_owned(),
            ));
        };
        let mut message = self.message;
        message.entry("role").or_insert_with(|| json!("assistant"));
        if !self.calls.is_empty() {
            let calls = self.calls.into_values().map(Value::Object).collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        let mut body = self.head;
        body.insert("object".into(), json!("chat.completion"));
        body.insert(
            "choices".into(),
            json!([{"index": 0, "message": message, "finish_reason": finish}]),
        );
        if let Some(usage) = self.usage {
            body.insert("usage".into(), usage);
        }
        Ok(Value::Object(body))
    }
}

fn malformed(what: &str) -> RequestError {
    RequestError::Malformed(what.to_owned())
}

/// Merge the piece `v` of field `k` into `acc` (see the module docs);
/// `set`: the field is replaced, never appended to. Returns the change in
/// the values `acc` holds.
fn merge(acc: &mut Map<String, Value>, k: &str, v: &Value, set: bool) -> i64 {
    match (acc.get_mut(k), v) {
        (None, v) => {
            acc.insert(k.to_owned(), v.clone());
            1 + values(v)
        }
        (Some(_), Value::Null) => 0,
        (Some(Value::String(a)), Value::String(piece)) if !set => {
            a.push_str(piece);
            0
        }
        (Some(slot), v) => {
            let old = values(slot);
            *slot = v.clone();
            values(v) - old
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Assemble the chunks (as JSON), returning the body and what
    /// `on_delta` heard.
    fn assemble(chunks: &[Value]) -> (Result<Value, RequestError>, Vec<String>) {
        let mut heard = Vec::new();
        let mut asm = Assembler::default();
        let mut on_delta = |d: Delta<'_>| {
            heard.push(match d {
                Delta::First => "<first>".to_owned(),
                Delta::Text(t) => t.to_owned(),
                Delta::Reasoning(t) => format!("<reasoning>{t}"),
            })
        };
        for c in chunks {
            if let Err(e) = asm.chunk(&c.to_string(), &mut on_delta) {
                return (Err(e), heard);
            }
        }
        (asm.finish(), heard)
    }

    fn delta(d: Value) -> Value {
        json!({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": d, "finish_reason": null}]})
    }

    #[test]
    fn content_and_interleaved_calls_assemble_exactly() {
        let chunks = [
            delta(json!({"role": "assistant", "content": null})),
            delta(json!({"content": "Hel"})),
            delta(json!({"content": "lo", "reasoning_content": "r1"})),
            delta(json!({"reasoning_content": "r2", "role": "assistant"})),
            delta(
                json!({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "gr", "arguments": ""}}]}),
            ),
            delta(
                json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"pa"}}]}),
            ),
            delta(
                json!({"tool_calls": [{"index": 1, "function": {"name": "ep", "arguments": "{\"pattern\":"}}]}),
            ),
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\":\"a\"}"}}, {"index": 1, "function": {"arguments": "\"x\"}"}}]}),
            ),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
        ];
        let (body, heard) = assemble(&chunks);
        let body = body.unwrap();
        // Reasoning is heard apart from the text, before it in a chunk.
        assert_eq!(
            heard,
            ["<first>", "Hel", "<reasoning>r1", "lo", "<reasoning>r2"]
        );
        assert_eq!(
            body,
            json!({
                "id": "c1", "model": "m", "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": "Hello", "reasoning_content": "r1r2",
                    "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                        {"id": "b", "type": "function", "function": {"name": "grep", "arguments": "{\"pattern\":\"x\"}"}},
                    ]}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3},
            })
        );
        let reply = super::super::parse_reply_value(body).unwrap();
        assert_eq!(reply.prompt_tokens, 7);
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    }

    /// llama-cpp-python's stream of a tool call: every chunk repeats the
    /// name (and the deprecated `function_call`), with nulls for the rest.
    #[test]
    fn a_name_repeated_in_every_chunk_is_taken_once() {
        let piece = |args: &str| {
            delta(json!({"role": null, "content": null,
                "function_call": {"name": "glob", "arguments": args},
                "tool_calls": [{"index": 0, "id": "call__0_glob_x", "type": "function",
                    "function": {"name": "glob", "arguments": args}}]}))
        };
        let chunks = [
            delta(
                json!({"role": "assistant", "content": null, "function_call": null, "tool_calls": null}),
            ),
            piece("{\"pattern\""),
            piece(": \"*.js\"}"),
            json!({"choices": [{"index": 0, "delta": {"role": null, "content": null, "function_call": null, "tool_calls": null}, "finish_reason": "tool_calls"}]}),
        ];
        let (body, _) = assemble(&chunks);
        let body = body.unwrap();
        let call = &body["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "glob");
        assert_eq!(call["function"]["arguments"], "{\"pattern\": \"*.js\"}");
        assert_eq!(call["id"], "call__0_glob_x");
        // A name that does arrive in pieces still concatenates.
        let (body, _) = assemble(&[
            delta(json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "gr"}}]})),
            delta(json!({"tool_calls": [{"index": 0, "function": {"name": "ep"}}]})),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ]);
        assert_eq!(
            body.unwrap()["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
            "grep"
        );
    }

    #[test]
    fn incomplete_and_malformed_streams_are_errors() {
        let (r, _) = assemble(&[delta(json!({"content": "half"}))]);
        assert!(matches!(r, Err(RequestError::Cut(_))), "{r:?}");
        for bad in [
            json!([1]),
            json!({"choices": 5}),
            json!({"choices": [{"delta": "x"}]}),
            delta(json!({"tool_calls": 5})),
            delta(json!({"tool_calls": [{"function": {"arguments": "{}"}}]})),
            delta(json!({"tool_calls": [{"index": 0, "function": "f"}]})),
        ] {
            let (r, _) = assemble(std::slice::from_ref(&bad));
            assert!(matches!(r, Err(RequestError::Malformed(_))), "{bad}: {r:?}");
        }
        let (r, _) = assemble(&[json!({"error": {"message": "overloaded\u{1b}[2J"}})]);
        let e = r.unwrap_err();
        assert!(matches!(e, RequestError::StreamFailed(_)));
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
        // Empty deltas are no progress; nothing is heard.
        let mut asm = Assembler::default();
        let mut heard = 0;
        let progress = asm
            .chunk(&delta(json!({})).to_string(), &mut |_| heard += 1)
            .unwrap();
        assert!(!progress && heard == 0);
    }
}
