//! Sessions: which one a run works on (new, resumed, forked), finding one
//! from a command-line argument, and saving checkpoints to it.

mod open;
mod resolve;

use std::sync::Arc;

use hel_store::{CommitInput, Committed, SessionId, SessionLease, SessionState, Store};
use serde_json::Value;

use crate::agent::Agent;
use crate::event::Warning;

pub use open::{open, Opened, Start};
pub use resolve::{check_session_arg, resolve, resolve_checkpoint, verify, SessionError};

/// A session this process holds.
pub struct Session {
    pub store: Store,
    /// Shared with the session's spill, which writes through it.
    pub lease: Arc<SessionLease>,
    pub state: SessionState,
    /// The project directory, as checkpoints record it.
    pub cwd: String,
}

/// A checkpoint that was published, and what went wrong around it.
pub struct Saved {
    pub committed: Committed,
    pub warnings: Vec<Warning>,
}

impl Session {
    pub fn id(&self) -> &SessionId {
        self.lease.session()
    }

    /// Commit the agent's state as a checkpoint. On failure the previous
    /// checkpoint stays as it was and the next call commits everything.
    /// Once it is published, what went wrong after is returned as warnings.
    pub fn checkpoint(
        &mut self,
        agent: &mut Agent,
        instruction: &str,
    ) -> Result<Saved, hel_store::Error> {
        let mut warnings = Vec::new();
        let cursors = serde_json::to_value(&agent.tools().cursors).unwrap_or_else(|e| {
            warnings.push(Warning::CursorsUnsaved(e));
            Value::Array(Vec::new())
        });
        let usage = agent.usage();
        let mut committed = self.store.commit(
            &self.lease,
            &mut self.state,
            CommitInput {
                messages: agent.conversation().messages(),
                leaves: agent.conversation().leaves(),
                cwd: self.cwd.clone(),
                request_config: serde_json::to_value(agent.config()).unwrap_or_default(),
                meter: serde_json::to_value(agent.meter()).unwrap_or_default(),
                cursors,
                new_spill: agent.tools().spill.pending(),
                instruction: instruction.to_owned(),
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                why: format!("checkpoint: {}", hel_store::first_line(instruction)),
                record: hel_store::Record::Answer,
                workspace: None,
            },
        )?;
        agent.conversation_mut().committed(&committed);
        let spill = &mut agent.tools_mut().spill;
        spill.clear_pending();
        spill.set_committed(self.state.spill());
        warnings.extend(committed.warnings.drain(..).map(Warning::Store));
        Ok(Saved {
            committed,
            warnings,
        })
    }
}
