//! The agent's side of the session record (`hel_store::SessionRecord`,
//! defined in hel-object so that every writer of a checkpoint reaches
//! it): the one place the live agent is turned into the record a
//! checkpoint keeps, and a record read back into what a resumed agent
//! takes. Nothing else in hel-agent reads or writes the record's parts.

use hel_store::{ReadRecord, RequestConfig, SessionRecord};

use crate::agent::Agent;
use crate::meter::Meter;
use crate::tools::cursor::CursorTable;

/// What a checkpoint of `agent`'s conversation up to `settled` messages
/// keeps beside them: its request config, its Meter (less an observation
/// of messages past `settled`) and its cursors.
pub(super) fn of_agent(agent: &Agent, settled: usize) -> SessionRecord {
    let mut meter = agent.meter();
    meter.truncated(settled);
    SessionRecord {
        config: agent.config().clone(),
        meter: meter.observed,
        cursors: agent.tools().cursors.to_vec(),
    }
}

/// A checkpoint's record as a resumed agent takes it.
pub(crate) struct Resumed {
    /// The config it was saved with (None: not readable by this hel).
    pub config: Option<RequestConfig>,
    pub meter: Meter,
    /// None: the saved cursors could not be read (reads start over).
    pub cursors: Option<CursorTable>,
}

/// What a resumed agent takes of `record`.
pub(crate) fn resumed(record: ReadRecord) -> Resumed {
    Resumed {
        config: record.config,
        meter: Meter {
            observed: record.meter,
        },
        cursors: record.cursors.map(CursorTable::from_saved),
    }
}
