//! What a stored message must be: the one place that says so. Loading a
//! checkpoint (resume, show), gc's and fsck's walks all use it
//! (objects-spec §4, "Validation").
//!
//! A message is a JSON object with a `role` of `system`, `user`,
//! `assistant` or `tool`; the fields hel and the chat API rely on have
//! their types; fields it does not know (a provider's `reasoning_content`,
//! say) are kept as they are. A conversation additionally pairs every tool
//! call with exactly one result, right after the assistant message that
//! made it.

use serde_json::Value;

/// Check one message; the error says what is wrong with it.
pub fn validate(m: &Value) -> Result<(), String> {
    let Value::Object(map) = m else {
        return Err(format!("a message is a JSON object, not {}", type_name(m)));
    };
    let role = match map.get("role") {
        Some(Value::String(r)) => r.as_str(),
        Some(other) => return Err(format!("role is {}, not a string", type_name(other))),
        None => return Err("no role".into()),
    };
    let content = map.get("content");
    match role {
        "system" | "user" => content_is(content, false)?,
        "assistant" => {
            content_is(content, true)?;
            match map.get("tool_calls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(calls)) => {
                    for (i, c) in calls.iter().enumerate() {
                        tool_call(c).map_err(|e| format!("tool call {i}: {e}"))?;
                    }
                }
                Some(other) => {
                    return Err(format!("tool_calls is {}, not an array", type_name(other)))
                }
            }
        }
        "tool" => {
            content_is(content, false)?;
            if !matches!(map.get("tool_call_id"), Some(Value::String(_))) {
                return Err("a tool message needs a string tool_call_id".into());
            }
        }
        other => {
            return Err(format!(
                "unknown role {:?}",
                other.chars().take(40).collect::<String>()
            ))
        }
    }
    if let Some(name) = map.get("name") {
        if !name.is_string() {
            return Err("name is not a string".into());
        }
    }
    Ok(())
}

/// `content` is a string, an array of content parts (objects), or (where
/// `nullable`: an assistant message that only calls tools) null or absent.
fn content_is(content: Option<&Value>, nullable: bool) -> Result<(), String> {
    match content {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) if parts.iter().all(Value::is_object) => Ok(()),
        None | Some(Value::Null) if nullable => Ok(()),
        None => Err("no content".into()),
        Some(other) => Err(format!(
            "content is {}, not a string or an array of parts",
            type_name(other)
        )),
    }
}

fn tool_call(c: &Value) -> Result<(), String> {
    let Value::Object(map) = c else {
        return Err(format!("{}, not an object", type_name(c)));
    };
    if !matches!(map.get("id"), Some(Value::String(_))) {
        return Err("no string id".into());
    }
    let Some(Value::Object(f)) = map.get("function") else {
        return Err("no function object".into());
    };
    if !matches!(f.get("name"), Some(Value::String(_))) {
        return Err("function has no string name".into());
    }
    if !matches!(f.get("arguments"), Some(Value::String(_))) {
        return Err("function has no string arguments".into());
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Every assistant tool call has its tool message, and every tool message
/// answers a call of the assistant message before it. Messages are assumed
/// valid ([`validate`]).
pub fn check_pairing(messages: &[Value]) -> Result<(), String> {
    let mut open: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m.get("role").and_then(Value::as_str) {
            Some("tool") => {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                match open.iter().position(|o| *o == id) {
                    Some(p) => {
                        open.remove(p);
                    }
                    None => {
                        return Err(format!(
                            "message {i} answers tool call {id:?}, which no assistant message made"
                        ))
                    }
                }
            }
            role => {
                if let Some(o) = open.first() {
                    return Err(format!("tool call {o:?} has no result before message {i}"));
                }
                if role == Some("assistant") {
                    if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
                        open = calls
                            .iter()
                            .map(|c| c.get("id").and_then(Value::as_str).unwrap_or(""))
                            .collect();
                    }
                }
            }
        }
    }
    match open.first() {
        Some(o) => Err(format!("tool call {o:?} has no result")),
        None => Ok(()),
    }
}

/// Roughly how many bytes `m` takes in memory once parsed (serde_json's
/// `Value`: a map is a B-tree node of ~640 bytes, strings are heap
/// allocations of at least 16), plus its slot in a list. Conversation
/// budgets are counted in it.
pub(crate) fn weight(m: &Value) -> u64 {
    const SLOT: u64 = 40;
    const MAP_NODE: u64 = 640;
    let heap = |len: usize| (len as u64).max(16);
    let mut total = SLOT;
    let mut stack = vec![m];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => total += heap(s.len()),
            Value::Array(items) => {
                total += 32 * items.len() as u64;
                stack.extend(items.iter());
            }
            Value::Object(map) => {
                // One node per 11 entries.
                total += MAP_NODE * (map.len() as u64).div_ceil(11).max(1);
                for (k, v) in map {
                    total += heap(k.len());
                    stack.push(v);
                }
            }
            _ => {}
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages() {
        for ok in [
            json!({"role": "system", "content": "s"}),
            json!({"role": "user", "content": [{"type": "text", "text": "x"}]}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}),
            json!({"role": "assistant", "content": "hi", "reasoning_content": "r"}),
            json!({"role": "tool", "tool_call_id": "a", "content": "out"}),
        ] {
            assert_eq!(validate(&ok), Ok(()), "{ok}");
        }
        for bad in [
            json!(42),
            json!(null),
            json!({"role": "banana", "content": "x"}),
            json!({"content": "x"}),
            json!({"role": "user"}),
            json!({"role": "user", "content": 5}),
            json!({"role": "tool", "content": "x"}),
            json!({"role": "assistant", "tool_calls": {}}),
            json!({"role": "assistant", "tool_calls": [{"id": "a"}]}),
            json!({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "x", "arguments": {}}}]}),
        ] {
            assert!(validate(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pairing() {
        let call = json!({"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]});
        let ra = json!({"role": "tool", "tool_call_id": "a", "content": ""});
        let rb = json!({"role": "tool", "tool_call_id": "b", "content": ""});
        let user = json!({"role": "user", "content": "x"});
        assert!(check_pairing(&[
            user.clone(),
            call.clone(),
            ra.clone(),
            rb.clone(),
            user.clone()
        ])
        .is_ok());
        assert!(check_pairing(&[call.clone(), ra.clone()])
            .unwrap_err()
            .contains("\"b\""));
        assert!(check_pairing(&[call.clone(), ra.clone(), user.clone(), rb.clone()]).is_err());
        assert!(check_pairing(&[user, ra])
            .unwrap_err()
            .contains("no assistant"));
    }

    #[test]
    fn weights_grow_with_content() {
        let small = json!({"role": "user", "content": "x"});
        let big = json!({"role": "user", "content": "x".repeat(10_000)});
        assert!(weight(&big) >= 10_000 && weight(&small) < 1_000);
    }
}
