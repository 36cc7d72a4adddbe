//! Context budget: the threshold Policy, trimming of old tool results and
//! summary compaction (see README, "Context budget").

use serde_json::{json, Value};

use crate::client::RequestError;
use crate::conversation::Conversation;
use crate::event::{Event, Observer, Warning};
use crate::meter::{estimate_chars, Meter};

/// Tool results longer than this (characters) are trimmed when over budget.
pub(crate) const TRIM_OVER: usize = 8_192;
const TRIM_HEAD: usize = 4_096;
const TRIM_TAIL: usize = 1_024;

/// When to compact and what to keep.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Policy {
    /// Compact when the estimated request exceeds this many tokens.
    pub at: u64,
    /// Tokens of the most recent conversation kept verbatim.
    pub keep_recent: u64,
    /// The model's context window.
    pub window: u64,
}

/// The room for an answer that the budget plans for: the output limit O,
/// but at most a quarter of the window W (O' = min(O, W/4)). A request
/// whose conversation leaves less than O' of the window is an overflow; a
/// request with less room than O asks for what fits ([`output_limit`]).
pub fn planned_output(window: u64, output: u64) -> u64 {
    output.min(window / 4)
}

/// The output limit of one request whose prompt is estimated at
/// `estimate` tokens: `output`, lowered to what the window has left after
/// the estimate and an eighth of it to spare (the estimate is chars/4 for
/// what the server has not counted; a server refuses a request whose
/// prompt and limit exceed its window), at least 1.
pub(crate) fn output_limit(window: u64, estimate: u64, output: u64) -> u64 {
    let needed = estimate.saturating_add(estimate / 8);
    output.min(window.saturating_sub(needed)).max(1)
}

impl Policy {
    /// Defaults from window W and output limit O, with O' = min(O, W/4)
    /// ([`planned_output`]): at = min(0.8·W, W − O' − min(65,536, 0.25·W)),
    /// keep_recent = 0.16·(W − O'). Where W ≥ 4·O, O' is O; a smaller
    /// window would otherwise leave no room at all (at ≤ 0: every request
    /// compacted, then refused).
    pub(crate) fn defaults(window: u64, output: u64) -> Policy {
        let w = window as f64;
        let room = window.saturating_sub(planned_output(window, output));
        let reserve = (65_536f64).min(0.25 * w) as u64;
        let at = ((0.8 * w) as u64).min(room.saturating_sub(reserve));
        Policy {
            at,
            keep_recent: (0.16 * room as f64) as u64,
            window,
        }
    }
}

/// Why the loop must stop before sending.
#[derive(Debug)]
pub enum Stop {
    Interrupted,
    /// The conversation does not fit the window with `room` tokens for
    /// the answer, even after compaction.
    Overflow {
        estimate: u64,
        room: u64,
        window: u64,
    },
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// The first index of the recent tail: the newest messages whose estimate
/// fits `keep_recent` tokens, never starting with a tool message (so a call
/// and its results stay together), never the system message (index 0).
pub(crate) fn tail_start(messages: &[Value], keep_recent: u64) -> usize {
    let mut t = messages.len();
    let mut used = 0u64;
    while t > 1 {
        let cost = estimate_chars(&messages[t - 1..t]);
        if used + cost > keep_recent {
            break;
        }
        used += cost;
        t -= 1;
    }
    while t < messages.len() && role(&messages[t]) == "tool" {
        t += 1;
    }
    t.max(1)
}

/// Trim tool results before `end` longer than [`TRIM_OVER`] characters to
/// their head and tail. Returns the indices of the trimmed messages.
pub(crate) fn trim_tool_results(conversation: &mut Conversation, end: usize) -> Vec<usize> {
    let mut trimmed = Vec::new();
    for i in 0..end.min(conversation.len()) {
        let m = &conversation.messages()[i];
        if role(m) != "tool" {
            continue;
        }
        let Some(text) = m.get("content").and_then(Value::as_str) else {
            continue;
        };
        let n = text.chars().count();
        if n <= TRIM_OVER {
            continue;
        }
        let head: String = text.chars().take(TRIM_HEAD).collect();
        let tail: String = text.chars().skip(n - TRIM_TAIL).collect();
        let spill = text
            .lines()
            .find_map(|l| l.strip_prefix("spill: "))
            .map(|p| format!(" The whole output is still in spill: {p}"))
            .unwrap_or_default();
        let cut = n - TRIM_HEAD - TRIM_TAIL;
        let text = format!("{head}\n[… {cut} characters trimmed from this old tool result to save context.{spill}]\n{tail}");
        conversation.edit(i, |m| m["content"] = json!(text));
        trimmed.push(i);
    }
    trimmed
}

const SUMMARY_PROMPT: &str = "You compact a coding agent's conversation. Write a structured summary of the \
conversation below so that the work can continue from the summary alone. Use these headings: Goal; \
Decisions; Files touched; Open work; Identifiers and values the user gave (copy them verbatim). Be concise.";

/// Why a summary could not be had.
#[derive(Debug)]
pub(crate) enum SummaryError {
    /// The user interrupted the request: the instruction ends.
    Interrupted,
    /// The request failed: compaction is skipped.
    Failed(RequestError),
}

/// Whoever writes summaries: in a run, the model itself (a separate
/// request with purpose `compaction`).
pub(crate) trait Summarizer {
    /// The model's answer to `request` (a system prompt and the transcript
    /// to summarize). `meter` is the conversation's Meter at this moment,
    /// for the record.
    fn summarize(
        &mut self,
        request: &[Value],
        meter: &Meter,
    ) -> impl std::future::Future<Output = Result<String, SummaryError>>;

    /// A summary of the first `messages` messages is about to be asked
    /// for (the run's `pre_compact` hooks run).
    fn compacting(&mut self, _messages: usize) -> impl std::future::Future<Output = ()> {
        async {}
    }
}

/// Before a request sending the conversation and the tool definitions
/// `tools`: trim, then compact, if the estimate is over the threshold (a
/// conversation under it is never touched); then refuse a conversation
/// that still leaves less than [`planned_output`] of the window.
pub(crate) async fn before_request(
    conversation: &mut Conversation,
    meter: &mut Meter,
    policy: &Policy,
    tools: &[Value],
    max_output_tokens: u64,
    summarizer: &mut impl Summarizer,
    observer: &dyn Observer,
) -> Result<(), Stop> {
    if meter.estimate(conversation.messages(), tools) > policy.at {
        let tail = tail_start(conversation.messages(), policy.keep_recent);
        if !trim_tool_results(conversation, tail).is_empty() {
            observer.event(Event::Trimmed { under: policy.at });
            meter.reset();
        }
    }
    if meter.estimate(conversation.messages(), tools) > policy.at {
        let t = tail_start(conversation.messages(), policy.keep_recent);
        if t > 1 {
            summarize(conversation, meter, t, summarizer, observer).await?;
        }
    }
    let estimate = meter.estimate(conversation.messages(), tools);
    let room = planned_output(policy.window, max_output_tokens);
    if estimate.saturating_add(room) > policy.window {
        return Err(Stop::Overflow {
            estimate,
            room,
            window: policy.window,
        });
    }
    Ok(())
}

/// Compact now, whatever the estimate (the user asked for it): summarize
/// everything before the newest `keep_recent` tokens. Returns whether the
/// conversation changed (nothing old enough, a failed request or a summary
/// that is not smaller leave it as it was).
pub(crate) async fn now(
    conversation: &mut Conversation,
    meter: &mut Meter,
    keep_recent: u64,
    summarizer: &mut impl Summarizer,
    observer: &dyn Observer,
) -> Result<bool, Stop> {
    let t = tail_start(conversation.messages(), keep_recent);
    if t <= 1 {
        return Ok(false);
    }
    summarize(conversation, meter, t, summarizer, observer).await
}

/// Replace `messages[1..t]` by a summary, unless the summary is not
/// smaller. Returns whether it did (a span of one message is replaced by
/// one message: the length does not say).
async fn summarize(
    conversation: &mut Conversation,
    meter: &mut Meter,
    t: usize,
    summarizer: &mut impl Summarizer,
    observer: &dyn Observer,
) -> Result<bool, Stop> {
    let transcript: Vec<String> = conversation.messages()[1..t]
        .iter()
        .map(|m| serde_json::to_string(m).unwrap_or_default())
        .collect();
    let request = vec![
        json!({"role": "system", "content": SUMMARY_PROMPT}),
        json!({"role": "user", "content": format!("Conversation to summarize (one JSON message per line):\n{}", transcript.join("\n"))}),
    ];
    let span_chars: usize = transcript.iter().map(|s| s.chars().count()).sum();
    observer.event(Event::Compacting { messages: t - 1 });
    summarizer.compacting(t - 1).await;
    let summary = match summarizer.summarize(&request, meter).await {
        Ok(s) => s.trim().to_owned(),
        Err(SummaryError::Interrupted) => return Err(Stop::Interrupted),
        Err(SummaryError::Failed(e)) => {
            observer.warn(Warning::CompactionFailed(e));
            return Ok(false);
        }
    };
    let message = summary_message(&summary);
    let new_chars = serde_json::to_string(&message).map_or(0, |s| s.chars().count());
    if summary.is_empty() || new_chars >= span_chars {
        observer.event(Event::CompactionSkipped);
        return Ok(false);
    }
    conversation.summarize(1, t, message);
    meter.reset();
    Ok(true)
}

/// The message a compaction puts in place of what it summarized (a
/// summary imported from another agent's compaction is made the same).
pub fn summary_message(summary: &str) -> Value {
    json!({"role": "user", "content": format!("<compacted-summary>\n{summary}\n</compacted-summary>")})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_defaults() {
        assert_eq!(
            Policy::defaults(1_000_000, 8_192),
            Policy {
                at: 800_000,
                keep_recent: 158_689,
                window: 1_000_000
            }
        );
        let p = Policy::defaults(128_000, 8_192);
        assert_eq!(p.at, 128_000 - 8_192 - 32_000);
        assert_eq!(p.keep_recent, (0.16 * 119_808f64) as u64);
        // A window of 4·O or less plans for a quarter of it: never at 0.
        let p = Policy::defaults(8_192, 8_192);
        assert_eq!(planned_output(8_192, 8_192), 2_048);
        assert_eq!(p.at, 8_192 - 2_048 - 2_048);
        assert_eq!(p.keep_recent, (0.16 * 6_144f64) as u64);
        assert_eq!(Policy::defaults(32_768, 8_192).at, 32_768 - 8_192 - 8_192);
        for w in [1, 100, 4_000, 8_192, 16_384, 40_000] {
            for o in [1, 100, 8_192, 100_000] {
                let p = Policy::defaults(w, o);
                assert!(p.at > 0 || w < 4, "{w} {o}: {p:?}");
                assert!(p.at + planned_output(w, o) <= w, "{w} {o}: {p:?}");
            }
        }
    }

    #[test]
    fn the_output_limit_is_lowered_to_what_fits() {
        assert_eq!(output_limit(128_000, 1_000, 8_192), 8_192);
        assert_eq!(output_limit(8_192, 188, 8_192), 8_192 - 188 - 23);
        assert_eq!(output_limit(8_192, 9_000, 8_192), 1);
    }

    fn m(role: &str, n: usize) -> Value {
        json!({"role": role, "content": "x".repeat(n)})
    }

    #[test]
    fn tail_never_starts_with_a_tool_message() {
        let msgs = vec![
            m("system", 10),
            m("user", 400),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "a"}, {"id": "b"}]}),
            json!({"role": "tool", "tool_call_id": "a", "content": "x".repeat(400)}),
            json!({"role": "tool", "tool_call_id": "b", "content": "x".repeat(400)}),
            m("assistant", 400),
        ];
        // Room for the last two messages: the tail would start at the tool
        // result "b"; it moves forward to the assistant answer.
        let last_two = estimate_chars(&msgs[4..]);
        assert_eq!(tail_start(&msgs, last_two), 5);
        // Room for everything after the system message.
        assert_eq!(tail_start(&msgs, 1_000_000), 1);
        // No room: empty tail.
        assert_eq!(tail_start(&msgs, 0), 6);
        for keep in (0..2000).step_by(7) {
            let t = tail_start(&msgs, keep);
            assert!(
                t == msgs.len() || role(&msgs[t]) != "tool",
                "keep {keep}: tail at {t}"
            );
        }
    }

    #[test]
    fn trims_only_long_tool_results_before_the_tail() {
        let mut conv = Conversation::from(vec![
            m("system", 10),
            json!({"role": "tool", "tool_call_id": "a", "content": format!("spill: .hel/x\n{}", "y".repeat(20_000))}),
            json!({"role": "tool", "tool_call_id": "b", "content": "short"}),
            json!({"role": "tool", "tool_call_id": "c", "content": "z".repeat(20_000)}),
        ]);
        assert_eq!(trim_tool_results(&mut conv, 3), vec![1]);
        let msgs = conv.messages();
        let t = msgs[1]["content"].as_str().unwrap();
        assert!(
            t.starts_with("spill: .hel/x")
                && t.contains("characters trimmed")
                && t.contains("still in spill: .hel/x")
        );
        assert!(t.chars().count() < 5_400);
        assert_eq!(msgs[2]["content"], "short");
        assert_eq!(msgs[3]["content"].as_str().unwrap().len(), 20_000);
    }
}
