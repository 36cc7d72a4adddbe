//! The wire format of llama-cpp-python 0.3.36's server (its
//! `chatml-function-calling` handler), as hel met it (see the crate docs),
//! so that the tests of what hel does about it run in seconds.

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use crate::body::{self, MockBody};

/// The `server` a step names to answer as this one.
pub(crate) const NAME: &str = "llama-cpp-python";

/// What it answered, with HTTP 500, to a request holding an assistant
/// message whose `content` was null (FastAPI's validation of the request,
/// wrapped as an internal error): the body as it came (a call id and the
/// arguments shortened; `tools/compat/run` checks its first line).
const VALIDATION_ERROR: &str = r#"{"error":{"message":"7 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\", 'input': 'assistant', 'ctx': {'expected': \"'system'\"}}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestUserMessage', 'role'), 'msg': \"Input should be 'user'\", 'input': 'assistant', 'ctx': {'expected': \"'user'\"}}\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'role'), 'msg': \"Input should be 'tool'\", 'input': 'assistant', 'ctx': {'expected': \"'tool'\"}}\n  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'tool_call_id'), 'msg': 'Field required', 'input': {'content': None, 'role': 'assistant', 'tool_calls': [{'function': {'arguments': '{\"pattern\": \"*.js\"}', 'name': 'glob'}, 'id': 'call__0_glob_cmpl-1', 'type': 'function'}]}}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestFunctionMessage', 'role'), 'msg': \"Input should be 'function'\", 'input': 'assistant', 'ctx': {'expected': \"'function'\"}}\n  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestFunctionMessage', 'name'), 'msg': 'Field required', 'input': {'content': None, 'role': 'assistant', 'tool_calls': [{'function': {'arguments': '{\"pattern\": \"*.js\"}', 'name': 'glob'}, 'id': 'call__0_glob_cmpl-1', 'type': 'function'}]}}\n\n  File \"/venv/lib/python3.11/site-packages/llama_cpp/server/app.py\", line 376, in create_chat_completion\n    POST /v1/chat/completions","type":"internal_server_error","param":null,"code":null}}"#;

/// Its refusal of `request` (whose body was `body_len` bytes), if it
/// refuses it: an assistant message with a null or missing `content`, or,
/// given the `window`, more tokens (body length / 4) and output limit than
/// the window holds.
pub(crate) fn refusal(
    request: &Value,
    body_len: usize,
    window: Option<u64>,
) -> Option<Response<MockBody>> {
    let messages = request.get("messages")?.as_array()?;
    let invalid = messages.iter().any(|m| {
        m.get("role").and_then(Value::as_str) == Some("assistant")
            && !m.get("content").is_some_and(Value::is_string)
    });
    if invalid {
        return Some(body::json(
            StatusCode::INTERNAL_SERVER_ERROR,
            VALIDATION_ERROR.into(),
        ));
    }
    let window = window?;
    let prompt = body_len as u64 / 4;
    let output = request
        .get("max_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    (prompt + output > window).then(|| {
        let message = format!(
            "This model's maximum context length is {window} tokens. However, you requested {} tokens ({prompt} in the messages, {output} in the completion). Please reduce the length of the messages or completion.",
            prompt + output
        );
        let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}});
        body::json(StatusCode::BAD_REQUEST, body.to_string())
    })
}

/// The assistant `message` of a step as this server gives it for
/// `request`: without `tool_choice` (or with `"none"`) the tools are left
/// out of the prompt, so the model calls none; a message that calls tools
/// has `content: null` and the first call again as `function_call`.
pub(crate) fn message(message: &mut Value, request: &Value) {
    let choice = request.get("tool_choice");
    let tools_seen = choice.is_some_and(|c| c != "none");
    let Some(m) = message.as_object_mut() else {
        return;
    };
    if !tools_seen {
        m.remove("tool_calls");
        if !m.get("content").is_some_and(Value::is_string) {
            m.insert("content".into(), json!(""));
        }
        return;
    }
    let first = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("function"))
        .cloned();
    if let Some(function) = first {
        m.insert("content".into(), Value::Null);
        m.insert("function_call".into(), function);
    }
}

/// Whether it breaks off the stream of `message` with nothing sent: its
/// `chatml-function-calling` handler raises "Automatic streaming tool
/// choice is not supported" once the model chose to call a tool, after
/// the stream's headers went out.
pub(crate) fn breaks_stream(message: &Value, request: &Value) -> bool {
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    calls && request.get("tool_choice").is_some_and(Value::is_string)
}

/// The stream of `message` as (delta, finish reason) pairs: a text answer
/// is its role, then the content in pieces of `piece` characters, then an
/// empty delta with the finish reason; a tool call is a delta of nulls,
/// then its arguments in pieces, each chunk repeating the call's id, type
/// and whole name and the same again as `function_call`, then a delta of
/// nulls with the finish reason. No usage, whatever the request asks.
pub(crate) fn deltas(message: &Value, piece: usize, finish: &Value) -> Vec<(Value, Value)> {
    let nulls = json!({"role": null, "content": null, "function_call": null, "tool_calls": null});
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty());
    let mut out = Vec::new();
    let Some(calls) = calls else {
        out.push((json!({"role": "assistant"}), Value::Null));
        let text = message.get("content").and_then(Value::as_str).unwrap_or("");
        let chars: Vec<char> = text.chars().collect();
        for p in chars.chunks(piece.max(1)) {
            let p: String = p.iter().collect();
            out.push((json!({ "content": p }), Value::Null));
        }
        out.push((json!({}), finish.clone()));
        return out;
    };
    let mut first = nulls.clone();
    first["role"] = json!("assistant");
    out.push((first, Value::Null));
    // It streams one call (the grammar it generates with ends there).
    let call = &calls[0];
    let name = call.pointer("/function/name").cloned().unwrap_or_default();
    let args = call
        .pointer("/function/arguments")
        .and_then(Value::as_str)
        .unwrap_or("");
    let chars: Vec<char> = args.chars().collect();
    for p in chars.chunks(piece.max(1)) {
        let p: String = p.iter().collect();
        let mut d = nulls.clone();
        d["function_call"] = json!({"name": name, "arguments": p});
        d["tool_calls"] = json!([{
            "index": 0,
            "id": call["id"],
            "type": "function",
            "function": {"name": name, "arguments": p},
        }]);
        out.push((d, Value::Null));
    }
    out.push((nulls, finish.clone()));
    out
}
