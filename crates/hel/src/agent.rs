//! The agent loop: send the conversation, run the tool calls, repeat until
//! the model answers without tool calls.

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::client::{ModelClient, RequestError};
use crate::compact::{self, Policy};
use crate::config::RequestConfig;
use crate::conversation::Conversation;
use crate::meter::Meter;
use crate::record::{Exchange, Recorder};
use crate::tools::{self, ToolCtx, Toolset};

/// How an instruction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Completed,
    MaxTurns,
    MaxOutputTokens,
    Timeout,
    Error,
    Interrupted,
    ContextOverflow,
}

impl Termination {
    /// The name record.json uses.
    pub fn name(self) -> &'static str {
        match self {
            Termination::Completed => "completed",
            Termination::MaxTurns => "max_turns",
            Termination::MaxOutputTokens => "max_output_tokens",
            Termination::Timeout => "timeout",
            Termination::Error => "error",
            Termination::Interrupted => "interrupted",
            Termination::ContextOverflow => "context_overflow",
        }
    }
}

/// The end of one instruction.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub termination: Termination,
    /// The final answer (completed instructions only).
    pub answer: Option<String>,
    /// Why it did not complete.
    pub error: Option<String>,
}

/// One conversation with the model and the tools.
pub struct Agent {
    pub config: RequestConfig,
    client: ModelClient,
    pub toolset: Toolset,
    pub tools: ToolCtx,
    /// What the model will be sent next (after compaction, not the whole
    /// history), with its store bookkeeping.
    pub conversation: Conversation,
    pub meter: Meter,
    pub recorder: Option<Recorder>,
    pub policy: Option<Policy>,
    max_turns: u32,
    interrupts: watch::Receiver<u64>,
    /// Tokens reported over the last instruction: (input, output).
    pub last_usage: (u64, u64),
}

impl Agent {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: RequestConfig,
        client: ModelClient,
        toolset: Toolset,
        tools: ToolCtx,
        recorder: Option<Recorder>,
        policy: Option<Policy>,
        max_turns: u32,
        interrupts: watch::Receiver<u64>,
    ) -> Agent {
        Agent {
            config,
            client,
            toolset,
            tools,
            conversation: Conversation::new(),
            meter: Meter::default(),
            recorder,
            policy,
            max_turns,
            interrupts,
            last_usage: (0, 0),
        }
    }

    /// Wait for the next Ctrl-C after `seen` of them.
    async fn interrupted(mut rx: watch::Receiver<u64>, seen: u64) {
        loop {
            if *rx.borrow_and_update() > seen {
                return;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Send one request, recording it. `purpose` is `turn` or `compaction`.
    pub async fn request(
        &mut self,
        purpose: &str,
        messages: &[Value],
        tools: bool,
        seen: u64,
    ) -> Result<crate::client::Reply, Option<RequestError>> {
        let body = self.config.body(messages, tools);
        let estimate = self.meter.estimate(messages);
        let observed = self.meter.is_observed();
        let rx = self.interrupts.clone();
        let result = tokio::select! {
            r = self.client.send(&body) => r,
            _ = Self::interrupted(rx, seen) => return Err(None),
        };
        let (response, usage, model) = match &result {
            Ok(r) => (
                r.body.clone(),
                (r.prompt_tokens, r.completion_tokens),
                r.model.clone(),
            ),
            Err(e) => (json!({"error": e.to_string()}), (0, 0), None),
        };
        self.last_usage.0 += usage.0;
        self.last_usage.1 += usage.1;
        if let Some(rec) = self.recorder.as_mut() {
            rec.request(Exchange {
                purpose,
                request: &body,
                response: &response,
                input_tokens: usage.0,
                output_tokens: usage.1,
                estimate,
                observed,
                actual_model: model.as_deref(),
            });
        }
        result.map_err(Some)
    }

    /// Run one user instruction to its end.
    pub async fn run_instruction(&mut self, text: &str) -> Outcome {
        let seen = *self.interrupts.borrow();
        self.last_usage = (0, 0);
        // Where the instruction's user message is (None once compaction summarized it).
        let mut start = Some(self.conversation.len());
        self.conversation
            .push(json!({"role": "user", "content": text}));
        // End of the valid prefix: the user message, then each finished tool round.
        let mut valid = self.conversation.len();
        let mut turns = 0;
        loop {
            if turns >= self.max_turns {
                let why = format!("stopped after {} model calls (--max-turns)", self.max_turns);
                return self.incomplete(start, valid, Termination::MaxTurns, why);
            }
            if let Some(policy) = self.policy {
                let (moved, step) = compact::before_request(self, &policy, seen).await;
                if let Some((old_end, new_end)) = moved {
                    // messages[1..old_end] became messages[1..new_end].
                    start = start
                        .filter(|&s| s >= old_end)
                        .map(|s| s - old_end + new_end);
                    valid = if valid >= old_end {
                        valid - old_end + new_end
                    } else {
                        new_end
                    };
                }
                match step {
                    Ok(_) => {}
                    Err(compact::Stop::Interrupted) => {
                        return self.incomplete(
                            start,
                            valid,
                            Termination::Interrupted,
                            "interrupted".into(),
                        );
                    }
                    Err(compact::Stop::Overflow(why)) => {
                        return self.incomplete(start, valid, Termination::ContextOverflow, why);
                    }
                }
            }
            turns += 1;
            let sent = self.conversation.len();
            let has_tools = !self.toolset.names.is_empty();
            let conversation = std::mem::take(&mut self.conversation);
            let result = self
                .request("turn", conversation.messages(), has_tools, seen)
                .await;
            self.conversation = conversation;
            let reply = match result {
                Ok(r) => r,
                Err(None) => {
                    return self.incomplete(
                        start,
                        valid,
                        Termination::Interrupted,
                        "interrupted".into(),
                    )
                }
                Err(Some(e)) => {
                    let t = if matches!(e, RequestError::Timeout(_)) {
                        Termination::Timeout
                    } else {
                        Termination::Error
                    };
                    return self.incomplete(start, valid, t, e.to_string());
                }
            };
            self.meter.observe(sent, reply.prompt_tokens);
            if reply.finish_reason.as_deref() == Some("length") {
                let why = format!(
                    "the answer was cut at the output limit ({} tokens; raise --max-output-tokens)",
                    self.config.max_output_tokens
                );
                return self.incomplete(start, valid, Termination::MaxOutputTokens, why);
            }
            let calls: Vec<Value> = reply
                .message
                .get("tool_calls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            self.conversation.push(reply.message.clone());
            if calls.is_empty() {
                let answer = match reply.message.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                };
                return Outcome {
                    termination: Termination::Completed,
                    answer: Some(answer),
                    error: None,
                };
            }
            for call in &calls {
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let name = call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let args = call
                    .pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                // Names, arguments and results come from outside: escaped for the terminal.
                crate::note!(
                    "hel: {} {}",
                    crate::terminal::escape_line(&name),
                    crate::terminal::escape_line(&one_line(&args, 120))
                );
                let rx = self.interrupts.clone();
                let result = tokio::select! {
                    r = tools::execute(&mut self.tools, &self.toolset, &name, &args) => r,
                    _ = Self::interrupted(rx, seen) => {
                        return self.incomplete(start, valid, Termination::Interrupted, "interrupted".into());
                    }
                };
                if let Some(rec) = self.recorder.as_mut() {
                    rec.tool_call(&name, &args, result.ok, result.decision);
                }
                crate::note!(
                    "hel:   {}",
                    crate::terminal::escape_line(&one_line(&result.content, 120))
                );
                self.conversation
                    .push(json!({"role": "tool", "tool_call_id": id, "content": result.content}));
            }
            valid = self.conversation.len();
        }
    }

    /// End an instruction incomplete, keeping the valid prefix: every
    /// finished tool round with its user message, or nothing of the
    /// instruction when no round finished.
    fn incomplete(
        &mut self,
        start: Option<usize>,
        valid: usize,
        termination: Termination,
        why: String,
    ) -> Outcome {
        let keep = match start {
            Some(s) if valid <= s + 1 => s,
            _ => valid,
        };
        self.conversation.truncate(keep);
        Outcome {
            termination,
            answer: None,
            error: Some(why),
        }
    }
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}
