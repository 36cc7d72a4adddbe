//! The session a process holds and saving checkpoints to it.

use std::sync::Arc;

use hel_store::{
    CommitInput, Committed, Record, SessionId, SessionLease, SessionState, Store, Workspace,
};

use super::record;
use crate::agent::Agent;
use crate::event::Warning;
use crate::workspace::Snapshots;

/// A session this process holds.
pub(crate) struct Session {
    pub store: Store,
    /// Shared with the session's spill, which writes through it.
    pub lease: Arc<SessionLease>,
    pub state: SessionState,
    /// The project directory, as checkpoints record it.
    pub cwd: String,
}

/// A checkpoint that was published (None: a start record that was not
/// written because the snapshot failed), and what went wrong around it.
pub(crate) struct Saved {
    pub committed: Option<Committed>,
    pub warnings: Vec<Warning>,
}

impl Session {
    pub(crate) fn id(&self) -> &SessionId {
        self.lease.session()
    }

    /// Commit the agent's state as `record`, with a snapshot of the
    /// project's files when `snapshots` is given. A snapshot that fails is
    /// a warning: an answer is then saved without one, a workspace record
    /// not at all (`committed` is None).
    pub(crate) fn record(
        &mut self,
        agent: &mut Agent,
        instruction: &str,
        record: Record,
        snapshots: Option<&mut Snapshots>,
    ) -> Result<Saved, hel_store::Error> {
        let mut warnings = Vec::new();
        // A start record's instruction has asked nothing yet (the agent's
        // usage is still the previous instruction's).
        let usage = match record {
            Record::Start => Default::default(),
            _ => agent.usage(),
        };
        let head = self.state.head;
        let mut txn = self.store.begin(&self.lease, &mut self.state)?;
        let mut snapshot = None;
        let mut snaps = snapshots;
        if let Some(snaps) = snaps.as_deref_mut() {
            match snaps.take(&self.store, &mut txn, head) {
                Ok(mut s) => {
                    // An instruction's end records what its own calls
                    // changed (objects-spec §10.6).
                    if matches!(record, Record::Answer | Record::Interrupted) {
                        if let Err(e) = snaps.own_end(&mut txn, &mut s) {
                            warnings.push(Warning::Attribution(e));
                        }
                    }
                    snapshot = Some(s);
                }
                Err(e) => warnings.push(Warning::WorkspaceFailed(e)),
            }
        }
        let workspace = match (&snapshot, &snaps) {
            (Some(s), Some(snaps)) => Some(Workspace {
                tree: s.tree,
                start: match record {
                    Record::Answer | Record::Interrupted => snaps.start,
                    _ => None,
                },
                not_tracked: s.not_tracked.len() as u64,
                restored: None,
            }),
            _ => None,
        };
        if workspace.is_none() && !matches!(record, Record::Answer | Record::Interrupted) {
            return Ok(Saved {
                committed: None,
                warnings,
            });
        }
        // Mid-instruction (a start record), what is saved is the
        // conversation before it: a session continued from that record
        // never holds a user message without its answer.
        let settled = agent.conversation().settled_len();
        let input = CommitInput::new(
            record,
            &agent.conversation().messages()[..settled],
            &agent.conversation().leaves()[..settled],
            &self.cwd,
            record::of_agent(agent, settled),
        )
        .instruction(instruction)
        .usage(usage.input_tokens, usage.output_tokens)
        .spill(agent.tools().spill.pending())
        .workspace(workspace);
        let mut committed = txn.commit(input)?;
        if let (Some(s), Some(snaps)) = (snapshot, snaps) {
            if record == Record::Start {
                snaps.start = Some(s.tree);
            }
            warnings.extend(snaps.tell(&s));
            snaps.committed(s);
            if record == Record::Start {
                snaps.follow_calls();
            }
        }
        agent.conversation_mut().committed(&committed);
        let spill = &mut agent.tools_mut().spill;
        spill.clear_pending();
        spill.set_committed(self.state.spill());
        warnings.extend(committed.warnings.drain(..).map(Warning::Store));
        Ok(Saved {
            committed: Some(committed),
            warnings,
        })
    }
}
