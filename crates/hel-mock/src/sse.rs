//! Streamed answers: a completion sent as server-sent events, the way
//! OpenAI-compatible servers stream (`chat.completion.chunk` deltas, the
//! finish reason, the usage when `stream_options.include_usage` asks for
//! it, then `data: [DONE]`), with the chunk boundaries and faults a
//! script asks for.

use bytes::Bytes;
use hyper::Response;
use serde_json::{json, Map, Value};

use crate::body::{self, MockBody, StreamEnd, BLOCK};
use crate::script::Step;

/// Characters per piece of a streamed string, unless the step says.
const PIECE: usize = 16;

/// Whether `request` asks for a stream.
pub(crate) fn wanted(request: &Value) -> bool {
    request.get("stream") == Some(&Value::Bool(true))
}

fn usage_wanted(request: &Value) -> bool {
    request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true))
}

/// The completion `reply` (a whole chat-completions response) as an event
/// stream shaped by `step`.
pub(crate) fn stream(reply: &Value, step: &Step, request: &Value) -> Response<MockBody> {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": reply["id"],
            "object": "chat.completion.chunk",
            "model": reply["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let piece = step.piece.filter(|&n| n > 0).unwrap_or(PIECE);
    let message = reply
        .pointer("/choices/0/message")
        .cloned()
        .unwrap_or_default();
    let finish = reply["choices"][0]["finish_reason"].clone();
    if step.llama() && !step.stream_calls && crate::llama::breaks_stream(&message, request) {
        return body::event_stream(Vec::new(), StreamEnd::End);
    }
    let mut datas: Vec<Value> = if step.llama() {
        crate::llama::deltas(&message, piece, &finish)
            .into_iter()
            .map(|(d, f)| chunk(d, f))
            .collect()
    } else {
        let mut datas: Vec<Value> = deltas(&message, piece, step.interleave)
            .into_iter()
            .map(|d| chunk(d, Value::Null))
            .collect();
        datas.push(chunk(json!({}), finish));
        datas
    };
    let usage = match step.usage.as_deref() {
        _ if step.llama() => "none",
        Some(u @ ("none" | "final")) => u,
        _ => "chunk",
    };
    if usage == "final" {
        if let Some(last) = datas.last_mut() {
            last["usage"] = reply["usage"].clone();
        }
    }
    if usage == "chunk" && usage_wanted(request) {
        datas.push(json!({
            "id": reply["id"],
            "object": "chat.completion.chunk",
            "model": reply["model"],
            "choices": [],
            "usage": reply["usage"],
        }));
    }
    let mut events: Vec<String> = datas.iter().map(|d| d.to_string()).collect();
    events.push("[DONE]".into());
    let (events, end) = match (step.cut_after, step.stall_after) {
        (Some(k), _) => (&events[..k.min(events.len())], StreamEnd::End),
        (None, Some(k)) => (&events[..k.min(events.len())], StreamEnd::Stall),
        (None, None) => (&events[..], StreamEnd::End),
    };
    let mut text = String::new();
    for e in events {
        if step.keepalive {
            text.push_str(": keep-alive\n\n");
        }
        text.push_str("data: ");
        text.push_str(e);
        text.push_str("\n\n");
    }
    let frames = match step.frame_bytes.filter(|&n| n > 0) {
        Some(n) => text
            .as_bytes()
            .chunks(n)
            .map(Bytes::copy_from_slice)
            .collect(),
        None => text
            .split_inclusive("\n\n")
            .map(|e| Bytes::copy_from_slice(e.as_bytes()))
            .collect(),
    };
    body::event_stream(frames, end)
}

/// The deltas of `message`: its role and every field that is not a string
/// first, then each string field in pieces of `piece` characters, then the
/// tool calls (each call's id, type and name, then its arguments in
/// pieces; with `interleave`, the calls' pieces alternate).
fn deltas(message: &Value, piece: usize, interleave: bool) -> Vec<Value> {
    let Some(fields) = message.as_object() else {
        return vec![message.clone()];
    };
    let mut first = Map::new();
    let mut out = Vec::new();
    for (k, v) in fields {
        match v {
            _ if k == "tool_calls" => {}
            Value::String(s) if k != "role" => {
                let pieces = pieces(s, piece);
                if pieces.is_empty() {
                    out.push(json!({ k: "" }));
                }
                out.extend(pieces.into_iter().map(|p| json!({ k: p })));
            }
            v => {
                first.insert(k.clone(), v.clone());
            }
        }
    }
    out.insert(0, Value::Object(first));
    match fields.get("tool_calls") {
        None => {}
        Some(Value::Array(calls)) if calls.iter().all(Value::is_object) => {
            out.extend(call_deltas(calls, piece, interleave))
        }
        // Not streamable as calls: sent as it is, for the client to refuse.
        Some(other) => out.push(json!({ "tool_calls": other })),
    }
    out
}

fn call_deltas(calls: &[Value], piece: usize, interleave: bool) -> Vec<Value> {
    let per_call: Vec<Vec<Value>> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let args = c.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("");
            let mut head = json!({
                "index": i,
                "id": c["id"],
                "type": c["type"],
                "function": {"name": c.pointer("/function/name").cloned().unwrap_or_default(), "arguments": ""},
            });
            if c.get("id").is_none() {
                head.as_object_mut().map(|h| h.remove("id"));
            }
            let mut ds = vec![json!({ "tool_calls": [head] })];
            ds.extend(pieces(args, piece).into_iter().map(|p| {
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            }));
            ds
        })
        .collect();
    if !interleave {
        return per_call.into_iter().flatten().collect();
    }
    let longest = per_call.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|r| per_call.iter().filter_map(move |ds| ds.get(r).cloned()))
        .collect()
}

/// `s` in pieces of at most `n` characters.
fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

/// The stream of a valid answer whose content is `n` bytes of `x`, in
/// deltas of 64 KiB.
pub(crate) fn huge(n: u64, request: &Value) -> Response<MockBody> {
    let head = Bytes::from(format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    ));
    let event = |len: usize| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": "x".repeat(len)}}]})
        )
    };
    let rem = (n % BLOCK as u64) as usize;
    let mut tail = if rem > 0 { event(rem) } else { String::new() };
    tail.push_str(&format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    if usage_wanted(request) {
        tail.push_str(&format!(
            "data: {}\n\n",
            json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
        ));
    }
    tail.push_str("data: [DONE]\n\n");
    body::repeated_events(
        head,
        Bytes::from(event(BLOCK)),
        n / BLOCK as u64,
        Bytes::from(tail),
    )
}

/// The stream of a valid answer whose message carries `n` zeros: all in
/// one event's field `extra`, or `per_event` at most an event, each
/// event's under a field of its own (`extra0`, `extra1`, …).
pub(crate) fn zeros(n: u64, per_event: Option<u64>, request: &Value) -> Response<MockBody> {
    let head = Bytes::from(format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]})
    ));
    let mut tail = format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    );
    if usage_wanted(request) {
        tail.push_str(&format!(
            "data: {}\n\n",
            json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
        ));
    }
    tail.push_str("data: [DONE]\n\n");
    let per_event = per_event.filter(|&k| k > 0).unwrap_or(n).max(1);
    let mut frames = vec![head];
    let (mut left, mut i) = (n, 0);
    while left > 0 {
        let k = left.min(per_event);
        let mut event = format!(r#"data: {{"choices":[{{"index":0,"delta":{{"extra{i}":["#);
        for j in 0..k {
            event.push_str(if j + 1 < k { "0," } else { "0" });
            if event.len() >= BLOCK {
                frames.push(Bytes::from(std::mem::take(&mut event)));
            }
        }
        event.push_str("]}}]}\n\n");
        frames.push(Bytes::from(event));
        left -= k;
        i += 1;
    }
    frames.push(Bytes::from(tail));
    body::event_stream(frames, StreamEnd::End)
}

/// A stream of content deltas that never ends.
pub(crate) fn endless() -> Response<MockBody> {
    let head = Bytes::from(format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    ));
    let block = format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": "a".repeat(BLOCK)}}]})
    );
    body::endless_events(head, Bytes::from(block))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_interleave_by_index() {
        let calls = [
            json!({"id": "a", "type": "function", "function": {"name": "x", "arguments": "abcd"}}),
            json!({"id": "b", "type": "function", "function": {"name": "y", "arguments": "ef"}}),
        ];
        let ds = call_deltas(&calls, 2, true);
        let order: Vec<u64> = ds
            .iter()
            .map(|d| d["tool_calls"][0]["index"].as_u64().unwrap())
            .collect();
        assert_eq!(order, [0, 1, 0, 1, 0]);
        assert_eq!(ds[4]["tool_calls"][0]["function"]["arguments"], "cd");
    }
}
