//! Which session a change is: an instruction's own changes are what its
//! tools and commands changed, never what another session changed while
//! it ran (objects-spec §10.6).
//!
//! Another session's records name the paths it changed (its
//! instructions' start and end trees, its restores): an undo or restore
//! leaves alone, and names, every path another session recorded as its
//! own change while one of the instructions it puts back ran, also one
//! that session recorded only after this instruction ended
//! ([`others_during`]). Both sessions' records may name a path both
//! changed at the same time: neither undoes it.

use std::collections::BTreeMap;

use hel_store::{Record, Store};

use crate::history::{parent, record_change, span_start, tree_diff, HistoryError, WALK_MAX};

/// Paths other sessions changed while one of a session's instructions
/// ran, each with the session that changed it (see [`others_during`]).
#[derive(Debug, Default)]
pub struct Others {
    pub paths: BTreeMap<Vec<u8>, hel_store::SessionId>,
}

/// Why another session's work cannot be told apart.
#[derive(Debug, thiserror::Error)]
#[error("session {session} is running an instruction that overlaps this session's: what it changes is not recorded yet; undo or restore after it ends")]
pub struct OtherRunning {
    pub session: hel_store::SessionId,
}

/// What other sessions of the store recorded as their own changes while
/// one of `spans` ran (objects-spec §10.6): for each session but `own`,
/// every instruction (its start record's time to its end record's) and
/// every restore (its before-restore record's time to its own) that
/// overlaps a span names the paths it changed (its start to its end tree;
/// its before-restore tree to its restored tree). Those are another
/// session's work: an undo or restore of `own` never writes them.
///
/// A session whose newest record is an instruction's start and that is
/// being worked on now (its lease is held) is still changing files that
/// no record names yet: when that instruction began before a span ended
/// (it overlaps the span),
/// [`OtherRunning`] (refused; one that is not being worked on crashed,
/// and what it changed is counted as nobody's). Sessions that cannot be
/// read are passed over (the store's listing reports them).
pub fn others_during(
    store: &Store,
    own: &hel_store::SessionId,
    spans: &[(u64, u64)],
) -> Result<Result<Others, OtherRunning>, HistoryError> {
    let mut out = Others::default();
    let Some(earliest) = spans.iter().map(|s| s.0).min() else {
        return Ok(Ok(out));
    };
    let latest = spans.iter().map(|s| s.1).max().unwrap_or(u64::MAX);
    let overlaps = |a: u64, b: u64| spans.iter().any(|&(s, e)| a <= e && s <= b);
    for info in store.sessions()? {
        if info.id == *own || info.broken.is_some() {
            continue;
        }
        let Some(head) = info.head else { continue };
        // Nothing it recorded before every span began can overlap one,
        // but an instruction it runs now may have begun before.
        if info.updated_ms < earliest && !info.busy {
            continue;
        }
        let mut at = Some(head);
        let mut newest = true;
        for _ in 0..WALK_MAX {
            let Some(id) = at else { break };
            let cp = store.checkpoint(&id)?;
            if cp.session_id != info.id {
                break; // a fork's first record leads into its origin
            }
            let record = Record::of(&cp);
            if newest && record == Record::Start && info.busy && cp.created_at_ms <= latest {
                return Ok(Err(OtherRunning { session: info.id }));
            }
            newest = false;
            let change = match record {
                Record::Answer | Record::Interrupted | Record::Restored => {
                    record_change(store, &cp)?
                }
                _ => None,
            };
            if let Some((a, b)) = change {
                let began = span_start(store, &cp)?;
                if overlaps(began, cp.created_at_ms) {
                    tree_diff(store, &a, &b, |path, _, _| {
                        out.paths.entry(path).or_insert_with(|| info.id.clone());
                    })?;
                }
            }
            if cp.created_at_ms < earliest {
                break;
            }
            at = parent(&cp);
        }
    }
    Ok(Ok(out))
}
