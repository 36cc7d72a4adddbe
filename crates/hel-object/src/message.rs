//! What a stored message must be: the one place that says so. Loading a
//! checkpoint (resume, show), gc's and fsck's walks all use it
//! (objects-spec §4.1, "What a reader accepts").
//!
//! A message is a JSON object with a `role` of `system`, `user`,
//! `assistant` or `tool`; the fields hel and the chat API rely on have
//! their types; fields it does not know (a provider's `reasoning_content`,
//! say) are kept as they are. A conversation additionally pairs every tool
//! call with exactly one result, right after the assistant message that
//! made it, and only an assistant message has `tool_calls`.
//!
//! What hel takes from a model is checked more strictly ([`validate_reply`]):
//! the calls of one reply have distinct ids. A stored message may repeat
//! one (hels before that check stored replies as servers sent them); its
//! results answer the calls with that id in order.

use std::collections::HashMap;

use serde_json::Value;

/// Why a stored message is not one hel loads. Each variant names the
/// field at fault and, where it has the wrong type, the type it has; what
/// a hostile store put there is never echoed whole (an unknown role is
/// clipped to 40 characters). Kept small: it travels inside
/// hel-store's `Error::BadMessage`.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error("a message is a JSON object, not {found}")]
    NotAnObject { found: JsonType },
    /// A message blob whose bytes are not JSON at all ([`validate`] never
    /// returns this: it is given parsed JSON).
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("no role")]
    NoRole,
    #[error("unknown role {0:?}")]
    UnknownRole(String),
    #[error("role is {found}, not a string")]
    RoleNotString { found: JsonType },
    #[error("no content")]
    NoContent,
    #[error("content is {found}, not a string or an array of parts")]
    ContentType { found: JsonType },
    #[error("tool_calls is {found}, not an array")]
    ToolCallsNotArray { found: JsonType },
    #[error("a tool message needs a string tool_call_id")]
    NoToolCallId,
    #[error("name is not a string")]
    NameNotString,
    /// `tool_calls` on a message that is not the assistant's (only an
    /// assistant calls tools; the key is refused whatever its value).
    #[error("a {role} message has tool_calls")]
    ToolCallsNotAssistant { role: &'static str },
    /// Two calls of one reply with the same id (a result could not say
    /// which it answers; [`validate_reply`] only). Indexes count within
    /// `tool_calls`.
    #[error("tool calls {first} and {again} have the same id")]
    RepeatedToolCallId { first: usize, again: usize },
    /// Tool call `index` of an assistant message.
    #[error("tool call {index}: {reason}")]
    ToolCall {
        index: usize,
        #[source]
        reason: ToolCallError,
    },
}

/// Why one entry of an assistant message's `tool_calls` is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolCallError {
    #[error("{found}, not an object")]
    NotAnObject { found: JsonType },
    #[error("no string id")]
    NoId,
    #[error("no function object")]
    NoFunction,
    #[error("function has no string name")]
    NoName,
    #[error("function has no string arguments")]
    NoArguments,
}

/// Why a conversation's tool calls and results do not pair up. Indexes
/// count messages from the start of the conversation; call ids are the
/// stored strings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    /// Message `index` is a tool result for a call no assistant message
    /// before it left open.
    #[error("message {index} answers tool call {call:?}, which no assistant message made")]
    Unasked { index: usize, call: String },
    /// Message `index` comes (and is not a tool result) while `call` is
    /// still open.
    #[error("tool call {call:?} has no result before message {index}")]
    NoResultBefore { call: String, index: usize },
    /// The conversation ends while `call` is open.
    #[error("tool call {call:?} has no result")]
    NoResult { call: String },
}

/// Check one message: `Ok` when hel may load it, otherwise the first
/// thing found wrong with it.
pub fn validate(m: &Value) -> Result<(), MessageError> {
    let Value::Object(map) = m else {
        return Err(MessageError::NotAnObject {
            found: type_name(m),
        });
    };
    let role = match map.get("role") {
        Some(Value::String(r)) => r.as_str(),
        Some(other) => {
            return Err(MessageError::RoleNotString {
                found: type_name(other),
            })
        }
        None => return Err(MessageError::NoRole),
    };
    let content = map.get("content");
    match role {
        "system" | "user" | "tool" if map.contains_key("tool_calls") => {
            return Err(MessageError::ToolCallsNotAssistant {
                role: match role {
                    "system" => "system",
                    "user" => "user",
                    _ => "tool",
                },
            })
        }
        "system" | "user" => content_is(content, false)?,
        "assistant" => {
            content_is(content, true)?;
            match map.get("tool_calls") {
                None | Some(Value::Null) => {}
                Some(Value::Array(calls)) => {
                    for (index, c) in calls.iter().enumerate() {
                        tool_call(c).map_err(|reason| MessageError::ToolCall { index, reason })?;
                    }
                }
                Some(other) => {
                    return Err(MessageError::ToolCallsNotArray {
                        found: type_name(other),
                    })
                }
            }
        }
        "tool" => {
            content_is(content, false)?;
            if !matches!(map.get("tool_call_id"), Some(Value::String(_))) {
                return Err(MessageError::NoToolCallId);
            }
        }
        other => return Err(MessageError::UnknownRole(other.chars().take(40).collect())),
    }
    if let Some(name) = map.get("name") {
        if !name.is_string() {
            return Err(MessageError::NameNotString);
        }
    }
    Ok(())
}

/// Check a model's reply before it joins the conversation: a message
/// [`validate`] takes whose tool calls have distinct ids (a result could
/// not say which of two calls with one id it answers).
pub fn validate_reply(m: &Value) -> Result<(), MessageError> {
    validate(m)?;
    let Some(Value::Array(calls)) = m.get("tool_calls") else {
        return Ok(());
    };
    let mut ids: HashMap<&str, usize> = HashMap::with_capacity(calls.len());
    for (index, c) in calls.iter().enumerate() {
        let id = c.get("id").and_then(Value::as_str).unwrap_or_default();
        if let Some(first) = ids.insert(id, index) {
            return Err(MessageError::RepeatedToolCallId {
                first,
                again: index,
            });
        }
    }
    Ok(())
}

/// `content` is a string, an array of content parts (objects), or (where
/// `nullable`: an assistant message that only calls tools) null or absent.
fn content_is(content: Option<&Value>, nullable: bool) -> Result<(), MessageError> {
    match content {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) if parts.iter().all(Value::is_object) => Ok(()),
        None | Some(Value::Null) if nullable => Ok(()),
        None => Err(MessageError::NoContent),
        Some(other) => Err(MessageError::ContentType {
            found: type_name(other),
        }),
    }
}

/// Check one entry of `tool_calls`: an object with a string `id` and a
/// `function` object holding a string `name` and string `arguments`.
fn tool_call(c: &Value) -> Result<(), ToolCallError> {
    let Value::Object(map) = c else {
        return Err(ToolCallError::NotAnObject {
            found: type_name(c),
        });
    };
    if !matches!(map.get("id"), Some(Value::String(_))) {
        return Err(ToolCallError::NoId);
    }
    let Some(Value::Object(f)) = map.get("function") else {
        return Err(ToolCallError::NoFunction);
    };
    if !matches!(f.get("name"), Some(Value::String(_))) {
        return Err(ToolCallError::NoName);
    }
    if !matches!(f.get("arguments"), Some(Value::String(_))) {
        return Err(ToolCallError::NoArguments);
    }
    Ok(())
}

/// The type of a JSON value, as refusals name it ("a number").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonType {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

impl std::fmt::Display for JsonType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JsonType::Null => "null",
            JsonType::Boolean => "a boolean",
            JsonType::Number => "a number",
            JsonType::String => "a string",
            JsonType::Array => "an array",
            JsonType::Object => "an object",
        })
    }
}

fn type_name(v: &Value) -> JsonType {
    match v {
        Value::Null => JsonType::Null,
        Value::Bool(_) => JsonType::Boolean,
        Value::Number(_) => JsonType::Number,
        Value::String(_) => JsonType::String,
        Value::Array(_) => JsonType::Array,
        Value::Object(_) => JsonType::Object,
    }
}

/// Every assistant tool call has its tool message, and every tool message
/// answers a call of the assistant message before it. Messages are assumed
/// valid ([`validate`]); `Err` names the first call or message that breaks
/// the pairing.
pub fn check_pairing(messages: &[Value]) -> Result<(), PairingError> {
    let mut pairing = Pairing::default();
    for m in messages {
        pairing.push(turn_of(m))?;
    }
    pairing.finish()
}

/// [`check_pairing`] of `messages` whose first `start` are a prefix of a
/// conversation that paired (the checkpoint a commit continues): reading
/// starts at the last message before `start` that is not a tool result,
/// where no call can be open, so a commit's check costs what it adds and
/// not the session's length. Errors name the same indexes.
pub fn check_pairing_after(messages: &[Value], start: usize) -> Result<(), PairingError> {
    let mut from = start.min(messages.len());
    while from > 0 && matches!(turn_of(&messages[from - 1]), TurnRef::Result(_)) {
        from -= 1;
    }
    let from = from.saturating_sub(1);
    let mut pairing = Pairing {
        open: Vec::new(),
        index: from,
    };
    for m in &messages[from..] {
        pairing.push(turn_of(m))?;
    }
    pairing.finish()
}

/// What the pairing of tool calls reads of a message, borrowed from it.
#[derive(Clone, Copy, Debug)]
pub enum TurnRef<'a> {
    /// A `tool` message: the call it answers (`""` when it names none).
    Result(&'a str),
    /// An `assistant` message with a `tool_calls` array: its calls' ids.
    Calls(&'a [Value]),
    /// [`Turn::Calls`]'s ids, kept.
    KeptCalls(&'a [Box<str>]),
    /// Any other message.
    Other,
}

fn turn_of(m: &Value) -> TurnRef<'_> {
    match m.get("role").and_then(Value::as_str) {
        Some("tool") => {
            TurnRef::Result(m.get("tool_call_id").and_then(Value::as_str).unwrap_or(""))
        }
        Some("assistant") => match m.get("tool_calls").and_then(Value::as_array) {
            Some(calls) => TurnRef::Calls(calls),
            None => TurnRef::Other,
        },
        _ => TurnRef::Other,
    }
}

/// What the pairing of tool calls needs of a message, kept without the
/// message: so that a check of a long conversation ([`Pairing`]) need not
/// hold the conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Turn {
    /// A `tool` message and the call it answers.
    Result(Box<str>),
    /// An `assistant` message with a `tool_calls` array: its calls' ids
    /// (`""` for one without a string id).
    Calls(Box<[Box<str>]>),
    /// Any other message.
    Other,
}

impl Turn {
    /// What pairing reads of `m`.
    pub fn of(m: &Value) -> Turn {
        match turn_of(m) {
            TurnRef::Result(id) => Turn::Result(id.into()),
            TurnRef::Calls(calls) => Turn::Calls(calls.iter().map(|c| call_id(c).into()).collect()),
            TurnRef::KeptCalls(ids) => Turn::Calls(ids.into()),
            TurnRef::Other => Turn::Other,
        }
    }

    /// This turn as [`Pairing::push`] takes it.
    pub fn as_ref(&self) -> TurnRef<'_> {
        match self {
            Turn::Result(id) => TurnRef::Result(id),
            Turn::Calls(ids) => TurnRef::KeptCalls(ids),
            Turn::Other => TurnRef::Other,
        }
    }
}

fn call_id(c: &Value) -> &str {
    c.get("id").and_then(Value::as_str).unwrap_or("")
}

/// The pairing of tool calls checked one message at a time, in order
/// ([`check_pairing`] is this over a slice).
#[derive(Debug, Default)]
pub struct Pairing<'a> {
    /// The calls of the last assistant message not yet answered.
    open: Vec<&'a str>,
    /// The index of the next message.
    index: usize,
}

impl<'a> Pairing<'a> {
    /// The next message: `Err` when it breaks the pairing.
    pub fn push(&mut self, turn: TurnRef<'a>) -> Result<(), PairingError> {
        let i = self.index;
        self.index += 1;
        if let TurnRef::Result(id) = turn {
            return match self.open.iter().position(|o| *o == id) {
                Some(p) => {
                    self.open.remove(p);
                    Ok(())
                }
                None => Err(PairingError::Unasked {
                    index: i,
                    call: id.to_owned(),
                }),
            };
        }
        if let Some(o) = self.open.first() {
            return Err(PairingError::NoResultBefore {
                call: (*o).to_owned(),
                index: i,
            });
        }
        match turn {
            TurnRef::Calls(calls) => self.open = calls.iter().map(call_id).collect(),
            TurnRef::KeptCalls(ids) => self.open = ids.iter().map(|b| &**b).collect(),
            TurnRef::Result(_) | TurnRef::Other => {}
        }
        Ok(())
    }

    /// The conversation ends here: `Err` when a call is still open.
    pub fn finish(&self) -> Result<(), PairingError> {
        match self.open.first() {
            Some(o) => Err(PairingError::NoResult {
                call: (*o).to_owned(),
            }),
            None => Ok(()),
        }
    }
}

/// Roughly how many bytes `m` takes in memory once parsed (serde_json's
/// `Value`: a map is a B-tree node of ~640 bytes, strings are heap
/// allocations of at least 16), plus its slot in a list. Conversation
/// budgets are counted in it.
pub fn weight(m: &Value) -> u64 {
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

    /// Checking after a prefix that paired finds what checking all finds,
    /// at every start.
    #[test]
    fn pairing_after_a_paired_prefix_is_pairing_of_all() {
        use serde_json::json;
        let call = |id: &str| json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]});
        let two = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "b1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]});
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "r"});
        let user = json!({"role": "user", "content": "u"});
        let answer = json!({"role": "assistant", "content": "a"});
        let good = vec![
            user.clone(),
            call("a1"),
            result("a1"),
            two.clone(),
            result("b1"),
            result("b2"),
            answer.clone(),
            user.clone(),
            call("c1"),
            result("c1"),
            answer.clone(),
        ];
        // Each ending broken in its own way, after every paired prefix.
        let endings = [
            vec![],
            vec![user.clone(), call("d1")],
            vec![user.clone(), call("d1"), user.clone()],
            vec![result("zz")],
            vec![two.clone(), result("b1"), answer.clone()],
        ];
        for ending in &endings {
            for keep in 0..=good.len() {
                let mut all = good[..keep].to_vec();
                all.extend(ending.iter().cloned());
                let whole = check_pairing(&all).err().map(|e| e.to_string());
                let after = check_pairing_after(&all, keep).err().map(|e| e.to_string());
                assert_eq!(after, whole, "keep {keep}, ending {ending:?}");
            }
        }
    }
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
            if let Err(e) = validate(&ok) {
                panic!("{ok}: {e}");
            }
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

    fn call(id: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": "bash", "arguments": "{}"}})
    }

    #[test]
    fn only_an_assistant_calls_tools() {
        for role in ["system", "user", "tool"] {
            for calls in [json!([call("a")]), json!([]), Value::Null] {
                let m =
                    json!({"role": role, "content": "x", "tool_call_id": "a", "tool_calls": calls});
                let e = validate(&m).unwrap_err();
                assert_eq!(
                    e.to_string(),
                    format!("a {role} message has tool_calls"),
                    "{m}"
                );
            }
        }
    }

    #[test]
    fn a_tool_call_id_is_unique_within_a_reply() {
        let twice = json!({"role": "assistant", "content": null, "tool_calls": [call("a"), call("b"), call("a")]});
        let e = validate_reply(&twice).unwrap_err();
        assert_eq!(e.to_string(), "tool calls 0 and 2 have the same id");
        // Stored before replies were checked for it: still loaded, each
        // result answering the calls with its id in order.
        validate(&twice).unwrap();
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": ""});
        check_pairing(&[twice.clone(), result("a"), result("b"), result("a")]).unwrap();
        assert_eq!(
            check_pairing(&[twice, result("a"), result("b")]),
            Err(PairingError::NoResult { call: "a".into() })
        );
        // The reply check is the reader's and more.
        assert!(
            validate_reply(&json!({"role": "user", "content": "x", "tool_calls": []})).is_err()
        );
        // An id may come back in a later message: each result answers the
        // message just before it.
        let once =
            json!({"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]});
        validate_reply(&once).unwrap();
        let user = json!({"role": "user", "content": "x"});
        let conv = [
            user.clone(),
            once.clone(),
            result("a"),
            result("b"),
            user,
            once,
            result("b"),
            result("a"),
        ];
        for m in &conv {
            validate_reply(m).unwrap();
        }
        check_pairing(&conv).unwrap();
    }

    #[test]
    fn refusals_read_as_before() {
        for (bad, says) in [
            (json!(42), "a message is a JSON object, not a number"),
            (json!({"role": 1}), "role is a number, not a string"),
            (json!({"content": "x"}), "no role"),
            (json!({"role": "banana"}), "unknown role \"banana\""),
            (json!({"role": "user"}), "no content"),
            (
                json!({"role": "user", "content": 5}),
                "content is a number, not a string or an array of parts",
            ),
            (
                json!({"role": "assistant", "tool_calls": {}}),
                "tool_calls is an object, not an array",
            ),
            (
                json!({"role": "assistant", "tool_calls": [{"id": "a"}]}),
                "tool call 0: no function object",
            ),
            (
                json!({"role": "tool", "content": "x"}),
                "a tool message needs a string tool_call_id",
            ),
            (
                json!({"role": "user", "content": "x", "name": 1}),
                "name is not a string",
            ),
        ] {
            let e = validate(&bad).unwrap_err();
            assert_eq!(e.to_string(), says, "{bad}");
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
        assert_eq!(
            check_pairing(&[call.clone(), ra.clone()]),
            Err(PairingError::NoResult { call: "b".into() })
        );
        assert_eq!(
            check_pairing(&[call.clone(), ra.clone(), user.clone(), rb.clone()]),
            Err(PairingError::NoResultBefore {
                call: "b".into(),
                index: 2
            })
        );
        let e = check_pairing(&[user, ra]).unwrap_err();
        assert_eq!(
            e,
            PairingError::Unasked {
                index: 1,
                call: "a".into()
            }
        );
        assert!(e.to_string().contains("no assistant"), "{e}");
    }

    /// Every sequence of up to four messages from an alphabet of pairing
    /// cases: kept turns check as the messages themselves do.
    #[test]
    fn kept_turns_pair_as_their_messages() {
        let alphabet = [
            json!({"role": "user", "content": "x"}),
            json!({"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]}),
            json!({"role": "assistant", "tool_calls": [{"id": "a"}]}),
            json!({"role": "assistant", "tool_calls": []}),
            json!({"role": "assistant", "tool_calls": [{"id": 7}]}),
            json!({"role": "assistant", "tool_calls": "a"}),
            json!({"role": "assistant", "content": "y"}),
            json!({"role": "tool", "tool_call_id": "a", "content": ""}),
            json!({"role": "tool", "tool_call_id": "b", "content": ""}),
            json!({"role": "tool", "content": ""}),
        ];
        let n = alphabet.len();
        let mut errors = 0;
        for len in 0..=4u32 {
            for code in 0..n.pow(len) {
                let mut c = code;
                let messages: Vec<Value> = (0..len)
                    .map(|_| {
                        let m = alphabet[c % n].clone();
                        c /= n;
                        m
                    })
                    .collect();
                let turns: Vec<Turn> = messages.iter().map(Turn::of).collect();
                let mut pairing = Pairing::default();
                let kept = turns
                    .iter()
                    .try_for_each(|t| pairing.push(t.as_ref()))
                    .and_then(|()| pairing.finish());
                let whole = check_pairing(&messages);
                assert_eq!(kept, whole, "{messages:?}");
                errors += usize::from(whole.is_err());
            }
        }
        // The alphabet makes every kind of answer.
        assert!(errors > 1000, "{errors}");
    }

    #[test]
    fn weights_grow_with_content() {
        let small = json!({"role": "user", "content": "x"});
        let big = json!({"role": "user", "content": "x".repeat(10_000)});
        assert!(weight(&big) >= 10_000 && weight(&small) < 1_000);
    }
}
