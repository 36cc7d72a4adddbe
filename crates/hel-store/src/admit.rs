//! The admission check: what a writer of a checkpoint asks of it before
//! anything is written, so that nothing is stored that [`Store::load`]
//! would refuse. It is load's own checks, made on what is about to be
//! written: every message valid ([`message::validate`]), tool calls paired
//! with their results ([`message::check_pairing`]), the conversation
//! within the store's [`Limits`], the request config and cursors within
//! the sizes a load reads ([`Cap::CONFIG`], [`Cap::CURSORS`]), and the
//! snapshot as a reader parses it (`Checkpoint::check`, in `commit.rs`).
//!
//! Who asks: a commit ([`crate::Txn::commit`]: a model's reply, a
//! workspace record, an import) asks [`commit`]; an import asks
//! [`conversation`] before it takes a session, so that a file that cannot
//! become a loadable session leaves nothing behind. A fork and a pull or
//! bundle import write no message of their own: they ask load itself of
//! what they publish (`fork.rs`, `transfer.rs`).
//!
//! [`Store::load`]: crate::Store::load

use hel_object::session::EncodedRecord;
use serde_json::Value;

use crate::list::Limits;
use crate::object::Cap;
use crate::store::SessionState;
use crate::{message, Error, Leaf, Result};

/// Would a load accept `messages` as a checkpoint's conversation in a store
/// of `limits`? Every message is validated; `Err` is [`Error::Refused`]
/// naming the first message that breaks it.
pub fn conversation(limits: Limits, messages: &[Value]) -> Result<()> {
    for (i, m) in messages.iter().enumerate() {
        message::validate(m).map_err(|why| invalid(i, why))?;
    }
    let weights: Vec<u64> = messages.iter().map(message::weight).collect();
    within(limits, &weights)?;
    paired(messages, 0)
}

/// [`conversation`] of a commit after the checkpoint `state` describes:
/// the messages `leaves` names where that checkpoint stores them (which
/// its load validated) are not validated again, nor weighed again while
/// `state` knows their weights. Also checks what a load reads of the
/// record. Returns the weights of `messages`, for the state to keep.
pub(crate) fn commit(
    limits: Limits,
    state: &SessionState,
    messages: &[Value],
    leaves: &[Option<Leaf>],
    keep: usize,
    record: &EncodedRecord,
) -> Result<Vec<u64>> {
    #[cfg(feature = "testing")]
    if UNADMITTED.with(std::cell::Cell::get) {
        return Ok(Vec::new());
    }
    if leaves.len() != messages.len() {
        return Err(Error::Internal(format!(
            "{} leaves for {} messages",
            leaves.len(),
            messages.len()
        )));
    }
    // The caller's promise, checked past the prefix still where the last
    // checkpoint has it: every carried message names a message of it.
    for (i, leaf) in leaves.iter().enumerate().skip(keep) {
        match leaf {
            Some(leaf) if !state.holds(leaf) => {
                return Err(Error::Internal(format!(
                    "message {i} claims to be item {} of node {}, which the last checkpoint does not hold",
                    leaf.index, leaf.node
                )));
            }
            Some(_) => {}
            None => message::validate(&messages[i]).map_err(|why| invalid(i, why))?,
        }
    }
    // The weights of the kept prefix are the state's when it has them.
    let known = if state.weights.len() == state.locs.len() {
        keep.min(state.weights.len())
    } else {
        0
    };
    let mut weights = Vec::with_capacity(messages.len());
    weights.extend_from_slice(&state.weights[..known]);
    weights.extend(messages[known..].iter().map(message::weight));
    within(limits, &weights)?;
    paired(messages, keep)?;
    for (blob, len, cap) in [
        ("request config", record.config.len(), Cap::CONFIG),
        ("cursor table", record.cursors.len(), Cap::CURSORS),
    ] {
        if len as u64 > cap.max {
            return Err(refused(
                None,
                format!(
                    "its {blob} takes {len} bytes, over the {} a load reads",
                    cap.max
                ),
            ));
        }
    }
    Ok(weights)
}

#[cfg(feature = "testing")]
thread_local! {
    /// Commits on this thread skip the admission check (a test that
    /// builds what a load refuses: [`crate::testing::unadmitted`]).
    pub(crate) static UNADMITTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The conversation of `weights` within `limits`, counted as a load counts.
fn within(limits: Limits, weights: &[u64]) -> Result<()> {
    let bytes = weights.iter().fold(0u64, |sum, w| sum.saturating_add(*w));
    match limits.over(weights.len() as u64, bytes) {
        Some((what, limit)) => Err(refused(
            None,
            format!("the conversation holds more than {limit} {what}"),
        )),
        None => Ok(()),
    }
}

/// The pairing of `messages`, the first `keep` of which are a prefix of a
/// checkpoint that paired.
fn paired(messages: &[Value], keep: usize) -> Result<()> {
    message::check_pairing_after(messages, keep).map_err(|e| {
        let at = match &e {
            message::PairingError::NoResultBefore { index, .. }
            | message::PairingError::Unasked { index, .. } => Some(*index),
            message::PairingError::NoResult { .. } => None,
        };
        refused(at, e.to_string())
    })
}

fn invalid(i: usize, why: message::MessageError) -> Error {
    refused(
        Some(i),
        format!("message {i} is not a valid message: {why}"),
    )
}

fn refused(at: Option<usize>, reason: String) -> Error {
    Error::Refused { at, reason }
}
