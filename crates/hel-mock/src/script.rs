//! The script: steps and the order they answer in.

use serde::Deserialize;
use serde_json::Value;

/// One step of a script (see the crate docs for what each field does).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Step {
    pub content: Option<Value>,
    pub tool_calls: Option<Vec<ScriptCall>>,
    pub message: Option<Value>,
    pub finish_reason: Option<Value>,
    pub status: Option<u16>,
    pub body: Option<String>,
    /// With `status`: the value of a `Retry-After` header.
    pub retry_after: Option<String>,
    pub raw: Option<String>,
    pub delay_ms: Option<u64>,
    #[serde(rename = "match")]
    pub matches: Option<String>,
    pub recall: bool,
    /// Never used up: it answers every request that reaches it.
    pub repeat: bool,
    pub endless: bool,
    pub huge_content: Option<u64>,
    pub chunked: bool,
    pub declared_length: Option<u64>,
    /// The answer's message carries a field `extra` holding an array of
    /// this many zeros (a reply small in bytes, huge once parsed).
    pub zeros: Option<u64>,
    /// Streamed, with `zeros`: at most this many zeros an event, each
    /// event's under a field of its own (`extra0`, `extra1`, …).
    pub zeros_per_event: Option<u64>,
    /// Streamed: characters per piece of each streamed string.
    pub piece: Option<usize>,
    /// Streamed: the tool calls' pieces alternate.
    pub interleave: bool,
    /// Streamed: a keep-alive comment before every event.
    pub keepalive: bool,
    /// Streamed: the body's frames are this many bytes (else one an event).
    pub frame_bytes: Option<usize>,
    /// Streamed: the body ends after this many events.
    pub cut_after: Option<usize>,
    /// Streamed: after this many events, keep-alive comments only.
    pub stall_after: Option<usize>,
    /// Answer a request for a stream with one JSON body anyway.
    pub no_stream: bool,
    /// Where the usage goes: `none` (nowhere, streamed or not), `final`
    /// (in the stream's chunk with the finish reason, asked for or not);
    /// else a chunk of its own when the request asks for it.
    pub usage: Option<String>,
    /// Answer as this server does (`llama-cpp-python`: see the crate docs).
    pub server: Option<String>,
    /// With `server`: stream tool calls even when `tool_choice` is
    /// `"auto"` (the server streams them only for a `tool_choice` that
    /// names the tool, and breaks off the stream otherwise).
    pub stream_calls: bool,
    /// With `server`: the model's context window, in the mock's tokens
    /// (the request body's length / 4); a request whose tokens and output
    /// limit exceed it gets that server's HTTP 400.
    pub context_window: Option<u64>,
}

impl Step {
    /// The step answers as llama-cpp-python does.
    pub(crate) fn llama(&self) -> bool {
        self.server.as_deref() == Some(crate::llama::NAME)
    }

    /// The step's answer carries no usage at all.
    pub(crate) fn no_usage(&self) -> bool {
        self.usage.as_deref() == Some("none")
    }
}

/// A scripted tool call.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ScriptCall {
    pub id: Option<Value>,
    pub name: Option<Value>,
    /// An object (encoded for the wire) or a raw string sent as it is.
    pub arguments: Option<Value>,
}

impl Step {
    /// A step answering as `--recall` does.
    pub fn recall() -> Step {
        Step {
            recall: true,
            ..Step::default()
        }
    }
}

/// The steps and which have been used.
pub(crate) struct Script {
    steps: Vec<Step>,
    used: Vec<bool>,
}

impl Script {
    pub fn new(steps: Vec<Step>) -> Script {
        Script {
            used: vec![false; steps.len()],
            steps,
        }
    }

    /// The step that answers a request with body `text`: the first unused
    /// step whose `match` the body contains, else the first unused step
    /// without one.
    pub fn next(&mut self, text: &str) -> Option<Step> {
        let free = |i: &usize| !self.used[*i];
        let matched = (0..self.steps.len()).filter(free).find(|&i| {
            self.steps[i]
                .matches
                .as_deref()
                .is_some_and(|m| text.contains(m))
        });
        let i = matched.or_else(|| {
            (0..self.steps.len())
                .filter(free)
                .find(|&i| self.steps[i].matches.is_none())
        })?;
        if !self.steps[i].repeat {
            self.used[i] = true;
        }
        Some(self.steps[i].clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matching_steps_wait_for_their_request() {
        let steps: Vec<Step> = serde_json::from_value(json!([
            {"content": "late", "match": "second"},
            {"content": "first"},
            {"content": "third"},
        ]))
        .unwrap();
        let mut s = Script::new(steps);
        let content = |s: Option<Step>| s.and_then(|s| s.content).unwrap();
        assert_eq!(content(s.next("one")), "first");
        assert_eq!(content(s.next("the second")), "late");
        assert_eq!(content(s.next("second again")), "third");
        assert!(s.next("x").is_none());
        let steps: Vec<Step> = serde_json::from_value(
            json!([{"content": "once"}, {"content": "ever", "repeat": true}]),
        )
        .unwrap();
        let mut s = Script::new(steps);
        assert_eq!(content(s.next("a")), "once");
        assert_eq!(content(s.next("b")), "ever");
        assert_eq!(content(s.next("c")), "ever");
    }
}
