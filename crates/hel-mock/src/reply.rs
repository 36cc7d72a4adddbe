//! Answers: the completion a step describes, computed from the request
//! where the step says so.

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use crate::body::{self, MockBody};
use crate::script::Step;
use crate::sse;

/// The response for `step` to `request` (whose body was `body_len` bytes),
/// the `n`-th request.
pub(crate) fn answer(step: &Step, request: &Value, body_len: usize, n: u64) -> Response<MockBody> {
    if let Some(status) = step.status {
        let body = step
            .body
            .clone()
            .unwrap_or_else(|| "{\"error\":{\"message\":\"scripted error\"}}".into());
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut r = body::json(status, body);
        if let Some(v) = step.retry_after.as_deref() {
            if let Ok(v) = hyper::header::HeaderValue::from_str(v) {
                r.headers_mut().insert(hyper::header::RETRY_AFTER, v);
            }
        }
        return r;
    }
    if let Some(raw) = &step.raw {
        return body::json(StatusCode::OK, raw.clone());
    }
    if step.llama() {
        if let Some(refused) = crate::llama::refusal(request, body_len, step.context_window) {
            return refused;
        }
    }
    let stream = sse::wanted(request) && !step.no_stream;
    if step.endless {
        return if stream {
            sse::endless()
        } else {
            body::endless()
        };
    }
    if let Some(n) = step.huge_content {
        return if stream {
            sse::huge(n, request)
        } else {
            body::huge(n, step.chunked)
        };
    }
    if let Some(n) = step.zeros {
        return if stream {
            sse::zeros(n, step.zeros_per_event, request)
        } else {
            body::zeros(n)
        };
    }
    if let Some(n) = step.declared_length {
        return body::declared(n);
    }
    let mut message = message(step, request, n);
    if step.llama() {
        crate::llama::message(&mut message, request);
    }
    let content_len = serde_json::to_string(&message).map_or(0, |s| s.len());
    let finish = step.finish_reason.clone().unwrap_or_else(|| {
        json!(if message.get("tool_calls").is_some() {
            "tool_calls"
        } else {
            "stop"
        })
    });
    let mut reply = json!({
        "id": format!("mock-{n}"),
        "object": "chat.completion",
        "model": request.get("model").cloned().unwrap_or(json!("mock")),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": body_len / 4,
            "completion_tokens": content_len / 4 + 1,
            "total_tokens": body_len / 4 + content_len / 4 + 1,
        },
    });
    if stream {
        return sse::stream(&reply, step, request);
    }
    if step.no_usage() {
        reply.as_object_mut().map(|r| r.remove("usage"));
    }
    body::json(StatusCode::OK, reply.to_string())
}

/// The assistant message of a step.
fn message(step: &Step, request: &Value, n: u64) -> Value {
    if let Some(m) = &step.message {
        return m.clone();
    }
    if step.recall {
        return json!({"role": "assistant", "content": recall(request)});
    }
    let mut msg =
        json!({"role": "assistant", "content": step.content.clone().unwrap_or(Value::Null)});
    if let Some(calls) = &step.tool_calls {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let args = match &c.arguments {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => "{}".to_owned(),
                };
                json!({
                    "id": c.id.clone().unwrap_or_else(|| json!(format!("call_{n}_{i}"))),
                    "type": "function",
                    "function": {
                        "name": c.name.clone().unwrap_or(json!("")),
                        "arguments": fill_placeholders(&args, request),
                    },
                })
            })
            .collect();
        msg["tool_calls"] = Value::Array(calls);
    }
    msg
}

/// Replace `{{spill}}` and `{{cursor}}` in tool-call arguments with the
/// newest spill path and read_file cursor found in the request's messages,
/// and `{{result}}` (within a string) with the newest tool result, as a
/// model would copy them from its context.
fn fill_placeholders(args: &str, request: &Value) -> String {
    if !args.contains("{{") {
        return args.to_owned();
    }
    let mut spill = String::new();
    let mut cursor = String::new();
    for text in contents(request) {
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("spill: ") {
                spill = p.trim().to_owned();
            }
            if let Some(rest) =
                line.strip_prefix("[Read truncated. Continue with read_file({\"cursor\":\"")
            {
                cursor = rest.split('"').next().unwrap_or("").to_owned();
            }
        }
    }
    let mut args = args
        .replace("{{spill}}", &spill)
        .replace("{{cursor}}", &cursor);
    if args.contains("{{result}}") {
        let result = request
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "tool"))
            .and_then(|m| m.get("content").and_then(Value::as_str))
            .unwrap_or("");
        // Inside a JSON string: escaped as one, without its quotes.
        let quoted = Value::from(result).to_string();
        args = args.replace("{{result}}", &quoted[1..quoted.len() - 1]);
    }
    args
}

/// The text contents of a request's messages, in order.
fn contents(request: &Value) -> impl Iterator<Item = &str> {
    request
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| m.get("content").and_then(Value::as_str).unwrap_or(""))
}

/// The newest `ID-<hex>` token in the messages before the last one.
fn recall(request: &Value) -> String {
    let texts: Vec<&str> = contents(request).collect();
    let earlier = &texts[..texts.len().saturating_sub(1)];
    earlier
        .iter()
        .rev()
        .find_map(|t| find_id(t))
        .unwrap_or_else(|| "UNKNOWN".into())
}

/// The last `ID-` followed by at least 8 hex digits in `text`.
fn find_id(text: &str) -> Option<String> {
    let mut found = None;
    let mut rest = text;
    while let Some(pos) = rest.find("ID-") {
        let tail = &rest[pos + 3..];
        let hex: String = tail.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        if hex.len() >= 8 {
            found = Some(format!("ID-{hex}"));
        }
        rest = tail;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_names_the_newest_identifier_before_the_question() {
        let req = json!({"messages": [
            {"role": "user", "content": "remember ID-0123abcd and ID-89abcdef01"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "what was ID-ffffffffff?"},
        ]});
        assert_eq!(recall(&req), "ID-89abcdef01");
        assert_eq!(recall(&json!({"messages": []})), "UNKNOWN");
        assert_eq!(find_id("ID-123 ID-"), None);
    }
}
