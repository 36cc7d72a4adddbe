//! The Meter: what the last request really cost, to estimate the next.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// After each response: how many messages that request sent and its real
/// `prompt_tokens`. The estimate for the next request is those tokens plus
/// chars/4 of the messages appended since; with no observation, chars/4 of
/// all messages. Any rewrite of history resets it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Meter {
    pub observed: Option<Observation>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub messages_sent: usize,
    pub prompt_tokens: u64,
}

/// chars/4 of the serialized JSON of `messages`, tool calls included.
pub fn estimate_chars(messages: &[Value]) -> u64 {
    messages
        .iter()
        .map(|m| serde_json::to_string(m).map_or(0, |s| s.chars().count() as u64))
        .sum::<u64>()
        / 4
}

impl Meter {
    pub fn observe(&mut self, messages_sent: usize, prompt_tokens: u64) {
        self.observed = Some(Observation {
            messages_sent,
            prompt_tokens,
        });
    }

    pub fn reset(&mut self) {
        self.observed = None;
    }

    /// Estimated prompt tokens of a request sending `messages`.
    pub fn estimate(&self, messages: &[Value]) -> u64 {
        match self.observed {
            Some(o) if o.messages_sent <= messages.len() => {
                // Observed from the server, or restored from a checkpoint:
                // an absurd figure saturates (and compacts), never overflows.
                o.prompt_tokens
                    .saturating_add(estimate_chars(&messages[o.messages_sent..]))
            }
            _ => estimate_chars(messages),
        }
    }

    pub fn is_observed(&self) -> bool {
        self.observed.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn estimate_adds_new_messages_to_the_observation() {
        let msgs = vec![json!({"role": "user", "content": "x".repeat(100)}); 3];
        let mut m = Meter::default();
        let all = estimate_chars(&msgs);
        assert_eq!(m.estimate(&msgs), all);
        m.observe(2, 1000);
        assert_eq!(m.estimate(&msgs), 1000 + estimate_chars(&msgs[2..]));
        // History shorter than the observation (rewritten): fall back.
        assert_eq!(m.estimate(&msgs[..1]), estimate_chars(&msgs[..1]));
        m.reset();
        assert_eq!(m.estimate(&msgs), all);
    }
}
