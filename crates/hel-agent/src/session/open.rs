//! Taking the session a run works on.

use std::path::Path;
use std::sync::Arc;

use hel_store::{ObjectId, SessionLease, SessionState, Store};

use super::resolve::{
    last_session, recorded_cwd, resolve, resolve_checkpoint, verify, SessionError,
};
use super::save::Session;

/// Which session to work on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    New,
    /// A session argument (an id or a unique prefix).
    Resume(String),
    /// The session hel continues when none is named
    /// ([`last_session`]): the newest of this project with an answer and
    /// not in use.
    Last,
    /// A new session from checkpoint `at` of `session`.
    Fork {
        session: String,
        at: String,
    },
}

/// A session taken, the checkpoint to continue from (for a resume or
/// fork) and what the store warned about.
pub(crate) struct Opened {
    pub session: Session,
    pub head: Option<ObjectId>,
    pub warnings: Vec<hel_store::Warning>,
}

/// Take the session `start` names in `store` for the project at `project`.
pub(crate) fn open(store: &Store, project: &Path, start: &Start) -> Result<Opened, SessionError> {
    let cwd = recorded_cwd(project);
    let make = |lease: SessionLease, head, warnings| Opened {
        session: Session {
            store: store.clone(),
            lease: Arc::new(lease),
            state: SessionState::default(),
            cwd: cwd.clone(),
        },
        head,
        warnings,
    };
    match start {
        Start::New => {
            let before = hel_store::identity::origin(store);
            let lease = store.new_session()?;
            Ok(make(
                lease,
                None,
                took_over(store, before).into_iter().collect(),
            ))
        }
        Start::Resume(spec) => {
            let id = resolve(store, project, spec)?;
            let (lease, head) = store.resume(&id)?;
            Ok(make(lease, Some(head), Vec::new()))
        }
        Start::Last => {
            let last = last_session(store, project)?;
            let (lease, head) = store.resume(&last)?;
            Ok(make(lease, Some(head), Vec::new()))
        }
        Start::Fork { session: spec, at } => {
            let id = resolve(store, project, spec)?;
            // A fork is refused where a resume of its session would be (the
            // session was saved in another directory), and then takes this
            // directory, whichever checkpoint of the session it starts
            // from: one from before a relocation included.
            let head = store.head(&id)?;
            verify(&store.checkpoint(&head)?, &id, &cwd)?;
            let log = hel_store::log::log(store, &id)?;
            let checkpoint = resolve_checkpoint(&log, at)?;
            let (lease, first, warnings) = store.fork_here(&checkpoint, &cwd)?;
            Ok(make(lease, Some(first), warnings))
        }
    }
}

/// What to say when a new session took over a store that was not made
/// here (`before`: the store's origin before the session was made): once,
/// when it happens, naming how many sessions stay shipped. A notice, so a
/// store that cannot say gives none.
pub(crate) fn took_over(
    store: &Store,
    before: hel_store::Result<hel_store::identity::Origin>,
) -> Option<hel_store::Warning> {
    use hel_store::identity::Origin;
    let Ok(Origin::Elsewhere(why)) = before else {
        return None;
    };
    match hel_store::identity::origin(store) {
        Ok(Origin::Here { shipped }) if !shipped.is_empty() => Some(hel_store::Warning::TookOver {
            why,
            shipped: shipped.len(),
        }),
        _ => None,
    }
}
