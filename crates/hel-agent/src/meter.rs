//! The Meter: what the last request really cost, to estimate the next.

use serde_json::Value;

/// After each response: how many messages that request sent and its
/// `prompt_tokens`: the server's figure, or, when the response carried no
/// usage (some servers never send it in a stream), chars/4 of the whole
/// request, marked `estimated`. The estimate for the next request is those
/// tokens plus chars/4 of the messages appended since; with no
/// observation, chars/4 of all messages and of the tool definitions. Any
/// rewrite of history resets it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Meter {
    pub observed: Option<Observation>,
}

pub(crate) use hel_store::Observation;

/// chars/4 of the serialized JSON of `messages`, tool calls included.
pub(crate) fn estimate_chars(messages: &[Value]) -> u64 {
    messages
        .iter()
        .map(|m| serde_json::to_string(m).map_or(0, |s| s.chars().count() as u64))
        .sum::<u64>()
        / 4
}

/// The estimated tokens of a request or a response body as it goes on the
/// wire: chars/4 of all of it (messages, tool definitions, parameters).
pub(crate) fn estimate_body(body: &Value) -> u64 {
    serde_json::to_string(body).map_or(0, |s| s.chars().count() as u64) / 4
}

impl Meter {
    /// A response to a request that sent `messages_sent` messages cost
    /// `prompt_tokens` (`estimated`: by hel, the server said nothing).
    pub(crate) fn observe(&mut self, messages_sent: usize, prompt_tokens: u64, estimated: bool) {
        self.observed = Some(Observation {
            messages_sent,
            prompt_tokens,
            estimated,
        });
    }

    pub(crate) fn reset(&mut self) {
        self.observed = None;
    }

    /// The conversation was cut back to `len` messages (an instruction
    /// that did not complete): an observation of a request that sent more
    /// counted messages that are gone, so it is dropped.
    pub(crate) fn truncated(&mut self, len: usize) {
        if self.observed.is_some_and(|o| o.messages_sent > len) {
            self.reset();
        }
    }

    /// Estimated prompt tokens of a request sending `messages` and the tool
    /// definitions `tools`.
    pub(crate) fn estimate(&self, messages: &[Value], tools: &[Value]) -> u64 {
        match self.observed {
            Some(o) if o.messages_sent <= messages.len() => {
                // Observed from the server, or restored from a checkpoint:
                // an absurd figure saturates (and compacts), never overflows.
                o.prompt_tokens
                    .saturating_add(estimate_chars(&messages[o.messages_sent..]))
            }
            _ => estimate_chars(messages).saturating_add(estimate_chars(tools)),
        }
    }

    pub(crate) fn is_observed(&self) -> bool {
        self.observed.is_some()
    }

    /// Whether the estimate rests on hel's arithmetic alone: nothing
    /// observed, or an observation that was itself an estimate.
    pub(crate) fn is_estimated(&self) -> bool {
        self.observed.is_none_or(|o| o.estimated)
    }

    /// Whether a saved Meter can be trusted: it has an observation, and no
    /// request of at least one message cost 0 tokens (what a server that
    /// reports no usage left in checkpoints written before hel estimated).
    pub(crate) fn plausible(&self) -> bool {
        self.observed
            .is_some_and(|o| o.prompt_tokens > 0 || o.messages_sent == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn estimate_adds_new_messages_to_the_observation() {
        let msgs = vec![json!({"role": "user", "content": "x".repeat(100)}); 3];
        let tools = vec![json!({"type": "function", "function": {"name": "y".repeat(40)}})];
        let mut m = Meter::default();
        let all = estimate_chars(&msgs) + estimate_chars(&tools);
        assert!(estimate_chars(&tools) > 0);
        assert_eq!(m.estimate(&msgs, &tools), all);
        assert!(m.is_estimated());
        m.observe(2, 1000, false);
        assert!(!m.is_estimated());
        assert_eq!(m.estimate(&msgs, &tools), 1000 + estimate_chars(&msgs[2..]));
        // History shorter than the observation (rewritten): fall back.
        assert_eq!(m.estimate(&msgs[..1], &[]), estimate_chars(&msgs[..1]));
        m.reset();
        assert_eq!(m.estimate(&msgs, &tools), all);
    }

    #[test]
    fn truncation_drops_an_observation_of_messages_that_are_gone() {
        let mut m = Meter::default();
        m.observe(6, 5373, false);
        m.truncated(6);
        assert!(m.is_observed());
        m.truncated(5);
        assert!(!m.is_observed());
    }

    #[test]
    fn saved_meters_old_and_new_read_back() {
        let read = |meter: serde_json::Value| Meter {
            observed: hel_store::ReadRecord::decode(json!(null), json!(null), &meter).meter,
        };
        let old = read(json!({"observed": {"messages_sent": 3, "prompt_tokens": 0}}));
        assert!(!old.observed.unwrap().estimated);
        assert!(!old.plausible(), "a 0 for three messages");
        let good =
            read(json!({"observed": {"messages_sent": 3, "prompt_tokens": 90, "estimated": true}}));
        assert!(good.plausible() && good.is_estimated());
        let saved = hel_store::SessionRecord {
            meter: good.observed,
            ..hel_store::SessionRecord::of(hel_store::RequestConfig::bare("p", "m"))
        };
        assert_eq!(
            saved.encode().meter,
            json!({"observed": {"messages_sent": 3, "prompt_tokens": 90, "estimated": true}})
        );
        assert!(!Meter::default().plausible());
    }
}
