//! How an instruction ends.

use crate::client::RequestError;
use crate::compact::Stop;

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

/// Why an instruction did not complete.
#[derive(Debug, thiserror::Error)]
pub enum Incomplete {
    #[error("stopped after {0} model calls (--max-turns)")]
    MaxTurns(u32),
    #[error("the answer was cut at the output limit ({0} tokens; raise --max-output-tokens)")]
    OutputLimit(u64),
    #[error("{0}")]
    Request(RequestError),
    #[error("interrupted")]
    Interrupted,
    #[error("the conversation (about {estimate} tokens) does not fit the context window of {window} tokens with {room} tokens left for the answer, even after compaction; start a new session or raise --context-window")]
    Overflow {
        estimate: u64,
        room: u64,
        window: u64,
    },
}

impl Incomplete {
    pub fn termination(&self) -> Termination {
        match self {
            Incomplete::MaxTurns(_) => Termination::MaxTurns,
            Incomplete::OutputLimit(_) => Termination::MaxOutputTokens,
            Incomplete::Request(RequestError::Timeout(_) | RequestError::Stalled(_)) => {
                Termination::Timeout
            }
            Incomplete::Request(_) => Termination::Error,
            Incomplete::Interrupted => Termination::Interrupted,
            Incomplete::Overflow { .. } => Termination::ContextOverflow,
        }
    }
}

impl From<Stop> for Incomplete {
    fn from(s: Stop) -> Incomplete {
        match s {
            Stop::Interrupted => Incomplete::Interrupted,
            Stop::Overflow {
                estimate,
                room,
                window,
            } => Incomplete::Overflow {
                estimate,
                room,
                window,
            },
        }
    }
}

/// The end of one instruction.
#[derive(Debug)]
pub enum Outcome {
    /// The final answer.
    Completed(String),
    /// The conversation kept its completed part (see [`Conversation::abandon_instruction`](crate::conversation::Conversation::abandon_instruction)).
    Incomplete(Incomplete),
}

impl Outcome {
    pub fn termination(&self) -> Termination {
        match self {
            Outcome::Completed(_) => Termination::Completed,
            Outcome::Incomplete(i) => i.termination(),
        }
    }
}
