//! The agent loop: send the conversation, run the tool calls, repeat until
//! the model answers without tool calls.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use hel_sandbox::Kept;

use hel_store::Limits;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::client::{Delta, ModelClient, Reply, RequestError};
use crate::compact::{self, Policy, Summarizer, SummaryError};
use crate::config::RequestConfig;
use crate::conversation::Conversation;
use crate::event::{Event, Observer};
use crate::hooks::{self, HookEvent};
use crate::interrupt::Interrupts;
use crate::meter::{estimate_body, estimate_chars, Meter};
use crate::outcome::{Incomplete, Outcome};
use crate::record::{Exchange, Purpose, Recorder};
use crate::tools::{self, ToolCtx, Toolset};

/// Tokens over one instruction: the API's figures, or hel's estimate for a
/// response that carried no usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Some of the figures are hel's estimate (chars/4).
    pub estimated: bool,
}

/// What sends requests to the model: the config, the client, the record,
/// and what they counted.
pub(crate) struct Model {
    pub(crate) config: RequestConfig,
    client: ModelClient,
    pub(crate) recorder: Option<Recorder>,
    pub(crate) usage: Usage,
    interrupts: Interrupts,
    observer: Rc<dyn Observer>,
    /// Whether anything of the last request's response arrived.
    started: bool,
    /// What a load of the session builds at most: a reply over it is
    /// refused on receipt.
    limits: Limits,
    /// The model's context window, in tokens.
    window: u64,
    /// A request's output limit was lowered to fit the window (said once).
    lowered: bool,
    /// The output limit the last request asked for.
    limit: u64,
}

impl Model {
    /// Send one request, recording it; `None` as the error: interrupted
    /// after the first `seen` interrupts. A turn's request tells the
    /// observer what arrives of its response as it arrives.
    async fn request(
        &mut self,
        purpose: Purpose,
        messages: &[Value],
        tools: bool,
        meter: &Meter,
        seen: u64,
    ) -> Result<Reply, Option<RequestError>> {
        let defs: &[Value] = if tools { &self.config.tools } else { &[] };
        let estimate = meter.estimate(messages, defs);
        let observed = meter.is_observed();
        let fit = match purpose {
            Purpose::Turn => estimate,
            // Not the conversation's request: the Meter knows nothing of it.
            Purpose::Compaction => Meter::default().estimate(messages, defs),
        };
        let max_output = self.output_limit(fit);
        let mut body = crate::config::request_body(&self.config, messages, tools, max_output);
        self.client.prepare(&mut body);
        let observer = Rc::clone(&self.observer);
        let live = purpose == Purpose::Turn;
        let mut on_retry = |e: &RequestError, wait, retry| {
            observer.event(Event::Retry {
                error: e.clone(),
                wait,
                retry,
            })
        };
        let started = Cell::new(false);
        let mut on_delta = |d: Delta<'_>| match d {
            Delta::First => {
                started.set(true);
                if live {
                    observer.event(Event::ResponseStarted);
                }
            }
            Delta::Text(t) if live => observer.event(Event::TextDelta(t.to_owned())),
            Delta::Reasoning(t) if live => observer.event(Event::ReasoningDelta(t.to_owned())),
            Delta::Text(_) | Delta::Reasoning(_) => {}
        };
        if live {
            self.observer.event(Event::Waiting);
        }
        let result = tokio::select! {
            r = self.client.send(&body, &mut on_retry, &mut on_delta) => Some(r),
            _ = self.interrupts.after(seen) => None,
        };
        self.started = started.get();
        let Some(mut result) = result else {
            return Err(None);
        };
        if let Ok(r) = result.as_mut() {
            if !r.usage_reported {
                // No usage (or a 0): the figures are hel's, of what went on
                // the wire and what came back.
                r.prompt_tokens = estimate_body(&body);
                r.completion_tokens = estimate_chars(std::slice::from_ref(&r.message));
                self.usage.estimated = true;
            }
        }
        let estimated = result.as_ref().is_ok_and(|r| !r.usage_reported);
        // A reply joins the conversation (a summary replaces part of it):
        // one that a load of the session would refuse is refused here, as
        // an over-limit response is, so no reply can make a session that
        // cannot be loaded again.
        let joins = if purpose == Purpose::Turn {
            messages
        } else {
            &[]
        };
        let result = result.and_then(|r| match self.limits.admit(joins, &r.message) {
            Ok(()) => Ok(r),
            Err(over) => Err(RequestError::OverLimit(over)),
        });
        let (response, input, output, model) = match &result {
            Ok(r) => (
                r.body.clone(),
                r.prompt_tokens,
                r.completion_tokens,
                r.model.clone(),
            ),
            Err(e) => (json!({"error": e.to_string()}), 0, 0, None),
        };
        // The server's figures may be absurd: they saturate, never overflow.
        self.usage.input_tokens = self.usage.input_tokens.saturating_add(input);
        self.usage.output_tokens = self.usage.output_tokens.saturating_add(output);
        if let Some(rec) = self.recorder.as_mut() {
            rec.request(Exchange {
                purpose,
                request: &body,
                response: &response,
                input_tokens: input,
                output_tokens: output,
                estimated,
                estimate,
                observed,
                actual_model: model.as_deref(),
            });
        }
        result.map_err(Some)
    }

    /// The output limit of a request whose prompt is estimated at
    /// `estimate` tokens: the configured one, or what the window has left
    /// when that is less (said once a run).
    fn output_limit(&mut self, estimate: u64) -> u64 {
        let configured = self.config.max_output_tokens;
        let limit = compact::output_limit(self.window, estimate, configured);
        if limit < configured && !std::mem::replace(&mut self.lowered, true) {
            self.observer.event(Event::OutputLowered {
                configured,
                window: self.window,
                limit,
            });
        }
        self.limit = limit;
        limit
    }
}

/// Compaction's summaries, asked of the model.
struct ModelSummarizer<'a> {
    model: &'a mut Model,
    seen: u64,
    hooks: &'a hooks::Runner,
    secrets: &'a mut hel_secrets::Redactor,
}

impl Summarizer for ModelSummarizer<'_> {
    async fn compacting(&mut self, messages: usize) {
        let fields = || json!({"messages": messages});
        let observer = Rc::clone(&self.model.observer);
        let tell = |r| observer.event(Event::Hook(r));
        self.hooks
            .fire(HookEvent::PreCompact, fields, self.secrets, &tell)
            .await;
    }

    async fn summarize(
        &mut self,
        request: &[Value],
        meter: &Meter,
    ) -> Result<String, SummaryError> {
        match self
            .model
            .request(Purpose::Compaction, request, false, meter, self.seen)
            .await
        {
            Ok(reply) => Ok(reply
                .message
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()),
            Err(None) => Err(SummaryError::Interrupted),
            Err(Some(e)) => Err(SummaryError::Failed(e)),
        }
    }
}

/// One tool call of an assistant message. Missing parts are empty: the
/// call then fails as a tool result the model reads.
#[derive(Deserialize, Default)]
struct ToolCall {
    #[serde(default)]
    id: String,
    #[serde(default)]
    function: Function,
}

#[derive(Deserialize, Default)]
struct Function {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

fn tool_calls(message: &Value) -> Vec<ToolCall> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| serde_json::from_value(c.clone()).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

/// Everything an [`Agent`] is made of.
pub(crate) struct Parts {
    pub config: RequestConfig,
    pub client: ModelClient,
    pub toolset: Toolset,
    pub tools: ToolCtx,
    pub recorder: Option<Recorder>,
    pub policy: Option<Policy>,
    pub max_turns: u32,
    pub interrupts: Interrupts,
    pub observer: Rc<dyn Observer>,
    /// The limits of the store the session is saved in (what a load of it
    /// builds at most).
    pub limits: Limits,
    /// The model's context window, in tokens.
    pub window: u64,
    /// The hooks of the user's config.
    pub hooks: hooks::Runner,
}

/// One conversation with the model and the tools.
pub(crate) struct Agent {
    model: Model,
    toolset: Toolset,
    tools: ToolCtx,
    /// What the model will be sent next (after compaction, not the whole
    /// history), with its store bookkeeping.
    conversation: Conversation,
    meter: Meter,
    policy: Option<Policy>,
    max_turns: u32,
    /// The last instruction ended with nothing of it kept.
    dropped: bool,
    /// What the running command has printed so far (bounded as a
    /// command's own output is), for the result of a call interrupted
    /// before it finished.
    printed: Rc<RefCell<Kept>>,
    hooks: hooks::Runner,
}

/// The tools' observer: every event passes through, and what a running
/// command prints ([`Observer::printed`]) is also kept.
struct Capture {
    inner: Rc<dyn Observer>,
    printed: Rc<RefCell<Kept>>,
}

impl Observer for Capture {
    fn event(&self, event: Event) {
        self.inner.event(event);
    }

    fn printed(&self, data: &[u8]) {
        self.printed.borrow_mut().push(data);
        self.inner.printed(data);
    }
}

/// The result of a call stopped by a Ctrl-C before it finished, with what
/// it had printed by then (`printed`: empty for a tool that prints
/// nothing as it runs).
pub(crate) fn interrupted_result(printed: &str) -> String {
    let head = "[hel: interrupted by the user (Ctrl-C) before this call finished: it was stopped, and what it changed until then stays changed]";
    if printed.is_empty() {
        format!("{head}\n[it printed nothing before it was stopped]")
    } else {
        format!("{head}\n[what it printed before it was stopped:]\n{printed}")
    }
}

/// The result of a call a `pre_tool` hook blocked: its stderr.
fn blocked_result(stderr: String) -> tools::ToolResult {
    let content = match stderr.trim_end() {
        "" => {
            "[hel: a pre_tool hook of the user's blocked this call; it gave no reason]".to_owned()
        }
        why => why.to_owned(),
    };
    tools::ToolResult::failed(content)
}

/// The result of a call of the reply that never ran: an earlier call of
/// it was interrupted.
pub(crate) const NOT_RUN: &str =
    "[hel: not run: the user interrupted (Ctrl-C) an earlier call of this reply, and the calls after it were not started]";

impl Agent {
    /// An agent whose conversation is the system message alone.
    pub(crate) fn new(mut parts: Parts, system: Value) -> Agent {
        let mut conversation = Conversation::new();
        conversation.set_system(system);
        let printed = Rc::new(RefCell::new(Kept::default()));
        parts.tools.observer = Rc::new(Capture {
            inner: Rc::clone(&parts.tools.observer),
            printed: Rc::clone(&printed),
        });
        Agent {
            model: Model {
                config: parts.config,
                client: parts.client,
                recorder: parts.recorder,
                usage: Usage::default(),
                interrupts: parts.interrupts,
                observer: parts.observer,
                started: false,
                limits: parts.limits,
                window: parts.window,
                lowered: false,
                limit: 0,
            },
            toolset: parts.toolset,
            tools: parts.tools,
            conversation,
            meter: Meter::default(),
            policy: parts.policy,
            max_turns: parts.max_turns,
            dropped: false,
            printed,
            hooks: parts.hooks,
        }
    }

    pub(crate) fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    pub(crate) fn config(&self) -> &RequestConfig {
        &self.model.config
    }

    pub(crate) fn meter(&self) -> Meter {
        self.meter
    }

    /// Tokens reported over the last instruction.
    pub(crate) fn usage(&self) -> Usage {
        self.model.usage
    }

    pub(crate) fn tools(&self) -> &ToolCtx {
        &self.tools
    }

    pub(crate) fn tools_mut(&mut self) -> &mut ToolCtx {
        &mut self.tools
    }

    /// The end of an instruction, before its files are recorded: wait
    /// until no process its commands left runs in the sandbox (at most the
    /// command time limit; not at all when `now`, as after a Ctrl-C),
    /// then kill what remains. So the end snapshot holds everything the
    /// instruction's commands and their background children changed. A
    /// Ctrl-C while it waits kills them at once. Unconfined commands need
    /// none of this: their process group is killed when bash exits.
    pub(crate) async fn settle_commands(&mut self, now: bool) {
        use crate::event::Warning;
        use std::time::Duration;
        let observer = Rc::clone(&self.model.observer);
        let secs = self.tools.bash_timeout;
        let Some(sb) = self.tools.commands.0.as_mut() else {
            return;
        };
        if sb.lost().is_some() {
            // Gone, and everything in it.
            self.tools.commands.shutdown();
            return;
        }
        let seen = self.model.interrupts.count();
        let limit = if now {
            Duration::ZERO
        } else {
            Duration::from_secs(secs)
        };
        let waiting = |count| observer.warn(Warning::ProcessesLeft { count, secs });
        let settled = tokio::select! {
            r = sb.settle(limit, waiting) => Some(r),
            _ = self.model.interrupts.after(seen) => None,
        };
        let settled = match settled {
            Some(r) => r,
            // Ctrl-C while waiting: kill them now.
            None => match self.tools.commands.0.as_mut() {
                Some(sb) => sb.settle(Duration::ZERO, |_| {}).await,
                None => return,
            },
        };
        match settled {
            Ok(s) if s.killed > 0 => observer.warn(Warning::ProcessesKilled(s.killed)),
            Ok(_) => {}
            Err(e) => {
                observer.warn(Warning::ProcessesUnknown(e.to_string()));
                self.tools.commands.shutdown();
            }
        }
    }

    /// Run the hooks of `event` (see [`hooks::Runner::fire`]).
    pub(crate) async fn hook(&mut self, event: HookEvent, fields: impl FnOnce() -> Value) {
        let observer = Rc::clone(&self.model.observer);
        let tell = |r| observer.event(Event::Hook(r));
        self.hooks
            .fire(event, fields, &mut self.tools.secrets, &tell)
            .await;
    }

    /// The `session_start` hooks, once, before the run's first
    /// instruction; `head`: the checkpoint the session continues from.
    pub(crate) async fn session_start(&mut self, head: Option<String>) {
        if !std::mem::replace(&mut self.hooks.started, true) {
            let fields = self.hooks.start_fields(head);
            self.hook(HookEvent::SessionStart, || fields).await;
        }
    }

    /// The `session_end` hooks at the run's end (on this thread), when
    /// the `session_start` ones ran; `head`: the session's newest
    /// checkpoint.
    pub(crate) fn session_end(&mut self, head: Option<String>) {
        if std::mem::replace(&mut self.hooks.started, false) {
            let observer = Rc::clone(&self.model.observer);
            let tell = |r| observer.event(Event::Hook(r));
            let fields = || json!({ "checkpoint": head });
            self.hooks.fire_now(
                HookEvent::SessionEnd,
                fields,
                &mut self.tools.secrets,
                &tell,
            );
        }
    }

    pub(crate) fn conversation_mut(&mut self) -> &mut Conversation {
        &mut self.conversation
    }

    pub(crate) fn set_meter(&mut self, meter: Meter) {
        self.meter = meter;
    }

    pub(crate) fn recorder(&mut self) -> Option<&mut Recorder> {
        self.model.recorder.as_mut()
    }

    /// Offer the tools of the MCP servers that started (at the run's first
    /// instruction): their definitions join the request config, so the
    /// Meter's input signature, and the checkpoint records the servers'
    /// names. Under `--access read-only` only the tools the config lists
    /// as read-only are offered.
    pub(crate) fn add_mcp(&mut self, tools: crate::mcp::Tools, access: tools::Access) {
        let offered: Vec<&crate::mcp::Tool> = tools
            .servers()
            .iter()
            .flat_map(|s| &s.tools)
            .filter(|t| access != tools::Access::ReadOnly || t.read_only)
            .collect();
        let config = &mut self.model.config;
        config
            .tools
            .extend(offered.iter().map(|t| t.definition.clone()));
        config.mcp_servers = crate::mcp::names(&tools);
        self.toolset
            .add_mcp(offered.iter().map(|t| t.exposed.clone()));
        self.tools.mcp = tools;
    }

    /// Send the next requests to `model` (`/model` in the prompt).
    pub(crate) fn set_model(&mut self, model: &str) {
        self.model.config.model = model.to_owned();
    }

    /// Compact the conversation now, keeping the newest `keep_recent`
    /// tokens verbatim (see [`compact::now`]). Returns whether it changed.
    pub(crate) async fn compact_now(&mut self, keep_recent: u64) -> Result<bool, Incomplete> {
        let seen = self.model.interrupts.count();
        self.summarize_old(keep_recent, seen).await
    }

    /// [`Agent::compact_now`] within an instruction that began after the
    /// first `seen` interrupts.
    async fn summarize_old(&mut self, keep_recent: u64, seen: u64) -> Result<bool, Incomplete> {
        let observer = Rc::clone(&self.model.observer);
        let mut summarizer = ModelSummarizer {
            model: &mut self.model,
            seen,
            hooks: &self.hooks,
            secrets: &mut self.tools.secrets,
        };
        compact::now(
            &mut self.conversation,
            &mut self.meter,
            keep_recent,
            &mut summarizer,
            &*observer,
        )
        .await
        .map_err(Incomplete::from)
    }

    /// Run one user instruction to its end. An incomplete one leaves the
    /// conversation at its last completed point. `first_reply` is called
    /// once, when the model's first reply to it has arrived and before any
    /// tool it asks for runs (the run saves the instruction's start then).
    pub(crate) async fn run_instruction(
        &mut self,
        text: &str,
        first_reply: &mut dyn Hooks,
    ) -> Outcome {
        let seen = self.model.interrupts.count();
        self.model.usage = Usage::default();
        self.dropped = false;
        self.conversation.begin_instruction(text);
        match self.turns(seen, first_reply).await {
            Ok(answer) => {
                self.conversation.finish_instruction();
                Outcome::Completed(answer)
            }
            Err(why) => {
                self.dropped = self.conversation.abandon_instruction();
                self.meter.truncated(self.conversation.len());
                Outcome::Incomplete(why)
            }
        }
    }

    /// Whether the last instruction ended incomplete with nothing of it
    /// kept in the conversation (not even its user message).
    pub(crate) fn instruction_dropped(&self) -> bool {
        self.dropped
    }

    /// Model calls until one answers without tool calls.
    async fn turns(&mut self, seen: u64, hooks: &mut dyn Hooks) -> Result<String, Incomplete> {
        let mut turns = 0;
        loop {
            if turns >= self.max_turns {
                return Err(Incomplete::MaxTurns(self.max_turns));
            }
            turns += 1;
            self.compact(seen).await?;
            let reply = match self.send_turn(seen).await {
                // The estimate was wrong: compact once and send again.
                Err(Incomplete::Request(e)) if e.context_too_long() => {
                    if !self.compact_to_retry(seen).await? {
                        return Err(Incomplete::Request(e));
                    }
                    self.send_turn(seen).await?
                }
                other => other?,
            };
            if turns == 1 {
                hooks.first_reply(self);
            }
            let calls = tool_calls(&reply.message);
            let answer = match reply.message.get("content") {
                Some(Value::String(s)) => s.clone(),
                _ => String::new(),
            };
            self.conversation.push(reply.message);
            if calls.is_empty() {
                return Ok(answer);
            }
            hooks.progress(self);
            self.run_calls(&calls, seen, hooks).await?;
            self.conversation.round_finished();
        }
    }

    /// Trim and compact when over the policy's threshold.
    async fn compact(&mut self, seen: u64) -> Result<(), Incomplete> {
        let Some(policy) = self.policy else {
            return Ok(());
        };
        let observer = Rc::clone(&self.model.observer);
        let max_output = self.model.config.max_output_tokens;
        let tools = if self.toolset.is_empty() {
            Vec::new()
        } else {
            self.model.config.tools.clone()
        };
        let mut summarizer = ModelSummarizer {
            model: &mut self.model,
            seen,
            hooks: &self.hooks,
            secrets: &mut self.tools.secrets,
        };
        compact::before_request(
            &mut self.conversation,
            &mut self.meter,
            &policy,
            &tools,
            max_output,
            &mut summarizer,
            &*observer,
        )
        .await
        .map_err(Incomplete::from)
    }

    /// Compact now because the server refused the conversation as too long
    /// for its context. Returns whether the conversation changed (no
    /// compaction policy, or nothing old enough to summarize: it did not).
    async fn compact_to_retry(&mut self, seen: u64) -> Result<bool, Incomplete> {
        match self.policy {
            Some(policy) => self.summarize_old(policy.keep_recent, seen).await,
            None => Ok(false),
        }
    }

    /// Send the conversation; a reply cut at the output limit is an end.
    async fn send_turn(&mut self, seen: u64) -> Result<Reply, Incomplete> {
        let sent = self.conversation.len();
        let tools = !self.toolset.is_empty();
        let result = self
            .model
            .request(
                Purpose::Turn,
                self.conversation.messages(),
                tools,
                &self.meter,
                seen,
            )
            .await
            .map_err(|e| e.map_or(Incomplete::Interrupted, Incomplete::Request))
            .and_then(|reply| {
                self.meter
                    .observe(sent, reply.prompt_tokens, !reply.usage_reported);
                if reply.finish_reason.as_deref() == Some("length") {
                    return Err(Incomplete::OutputLimit(self.model.limit));
                }
                Ok(reply)
            });
        let event = match &result {
            Ok(reply) => Event::ResponseEnded {
                calls_tools: !tool_calls(&reply.message).is_empty(),
            },
            Err(_) if self.model.started => Event::ResponseIncomplete,
            Err(_) => return result,
        };
        self.model.observer.event(event);
        if let Ok(reply) = &result {
            self.model.observer.event(Event::Response {
                text: match reply.message.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                },
                tool_calls: tool_calls(&reply.message).len(),
                input_tokens: reply.prompt_tokens,
                output_tokens: reply.completion_tokens,
                estimated: !reply.usage_reported,
            });
        }
        result
    }

    /// Run a reply's tool calls in order, appending each result.
    async fn run_calls(
        &mut self,
        calls: &[ToolCall],
        seen: u64,
        hooks: &mut dyn Hooks,
    ) -> Result<(), Incomplete> {
        for (k, call) in calls.iter().enumerate() {
            let (name, arguments) = (&call.function.name, &call.function.arguments);
            // Around each call that may change files: what it changed is
            // the instruction's (objects-spec §10.6).
            let writes = tools::ToolName::parse(name).is_none_or(|t| !t.only_reads());
            if writes {
                hooks.before_call(self);
            }
            self.model.observer.event(Event::ToolStarted {
                id: call.id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            });
            let spilled_before = self.tools.spill.pending().len();
            *self.printed.borrow_mut() = Kept::default();
            // The user's pre_tool hooks, which may block the call.
            let observer = Rc::clone(&self.model.observer);
            let tell = |r| observer.event(Event::Hook(r));
            let fields = || hooks::call_fields(&call.id, name, arguments);
            let blocked = tokio::select! {
                b = self.hooks.fire(HookEvent::PreTool, fields, &mut self.tools.secrets, &tell) => Some(b),
                _ = self.model.interrupts.after(seen) => None,
            };
            let was_blocked = matches!(blocked, Some(Some(_)));
            let result = match blocked {
                Some(Some(stderr)) => Some(blocked_result(stderr)),
                Some(None) => tokio::select! {
                    r = tools::execute(&mut self.tools, &self.toolset, name, arguments) => Some(r),
                    // Dropping the call cancels it: no write lands after this.
                    _ = self.model.interrupts.after(seen) => None,
                },
                None => None,
            };
            let Some(result) = result else {
                self.interrupted_calls(calls, k);
                return Err(Incomplete::Interrupted);
            };
            // Finished: what it printed is in its result.
            *self.printed.borrow_mut() = Kept::default();
            if writes {
                // A command that left processes running: what they change
                // from now on is the instruction's too.
                let left = match (name.as_str(), self.tools.commands.0.as_mut()) {
                    ("bash", Some(sb)) => sb.remaining().await.map_or(true, |n| n > 0),
                    _ => false,
                };
                hooks.after_call(self, left);
            }
            if let Some(rec) = self.model.recorder.as_mut() {
                rec.tool_call(name, arguments, result.ok, result.decision);
            }
            // A spill this call made is the newest pending one.
            let spill = self
                .tools
                .spill
                .pending()
                .get(spilled_before..)
                .and_then(|new| new.last())
                .map(|(key, _)| key.clone());
            self.model.observer.event(Event::ToolFinished {
                id: call.id.clone(),
                name: name.clone(),
                content: result.content.clone(),
                ok: result.ok,
                decision: result.decision,
                spill,
            });
            if !was_blocked {
                let (ok, content) = (result.ok, &result.content);
                let fields = || hooks::result_fields(&call.id, name, arguments, ok, content);
                self.hook(HookEvent::PostTool, fields).await;
            }
            self.push_result(&call.id, result.content);
            hooks.progress(self);
        }
        Ok(())
    }

    /// A tool result joins the conversation (every one goes through here).
    fn push_result(&mut self, id: &str, content: String) {
        self.conversation
            .push(json!({"role": "tool", "tool_call_id": id, "content": content}));
    }

    /// Call `k` of `calls` was interrupted (Ctrl-C): the round stays in
    /// the conversation, complete. The interrupted call's result says so,
    /// then what it printed until then (spilled as any result is when too
    /// large), and each call after it has a result saying it was not run.
    /// So every call of the reply has exactly one result, in order.
    fn interrupted_calls(&mut self, calls: &[ToolCall], k: usize) {
        let printed = std::mem::take(&mut *self.printed.borrow_mut()).text();
        for (j, call) in calls.iter().enumerate().skip(k) {
            let content = if j == k {
                let name = match call.function.name.as_str() {
                    "" => "tool",
                    n => n,
                };
                // As every result (tools::execute): secrets out, then spilled.
                let printed = self.tools.secrets.redact(&printed).into_owned();
                let (printed, warning) = self.tools.spill.maybe_spill(name, printed);
                if let Some(w) = warning {
                    self.model.observer.warn(w.into());
                }
                interrupted_result(&printed)
            } else {
                NOT_RUN.to_owned()
            };
            self.push_result(&call.id, content);
        }
        self.conversation.round_finished();
    }
}

/// What the run does at points of an instruction: when the model first
/// replies (before any tool runs), and around each call that may change
/// files (`left`: a command left processes running).
pub(crate) trait Hooks {
    fn first_reply(&mut self, agent: &mut Agent);
    /// The instruction's part of the conversation grew: a reply that
    /// calls tools arrived, or a call's result joined it.
    fn progress(&mut self, _agent: &mut Agent) {}
    fn before_call(&mut self, _agent: &mut Agent) {}
    fn after_call(&mut self, _agent: &mut Agent, _left: bool) {}
}
