//! Continuing from a checkpoint.

use hel_store::ObjectId;

use crate::agent::Agent;
use crate::config::RequestConfig;
use crate::conversation::Conversation;
use crate::event::{Event, Observer, Warning};
use crate::meter::Meter;
use crate::session::{self, Session};
use crate::tools::cursor::CursorTable;

use super::error::StartError;

/// Continue from checkpoint `head`: load it (validated), check it belongs
/// here, rebuild the system message, apply the current config, and restore
/// the Meter (when the rule allows), the cursors and the spill map. With
/// `relocate`, a checkpoint saved in another project directory is
/// continued here, after a `relocated` record that says so. With
/// `mcp_pending` (MCP servers to start at the first instruction, whose
/// tools are part of the toolset), what depends on the toolset (the
/// Meter, the settings compared) is returned to be [`settle`]d then.
pub(super) fn restore(
    session: &mut Session,
    agent: &mut Agent,
    head: ObjectId,
    observer: &dyn Observer,
    relocate: bool,
    mcp_pending: bool,
) -> Result<Option<Saved>, StartError> {
    let hel_store::Loaded {
        checkpoint: cp,
        messages,
        leaves,
        state,
        record,
    } = session.store.load(&head)?;
    let moved_from = (relocate && cp.cwd != session.cwd).then(|| cp.cwd.clone());
    // A relocation continues from wherever the checkpoint was saved.
    let here = if moved_from.is_some() {
        &cp.cwd
    } else {
        &session.cwd
    };
    session::verify(&cp, session.id(), here)?;
    let fresh_system = agent.conversation().messages()[0].clone();
    let mut conversation = Conversation::restored(messages, &leaves);
    let system_changed = conversation.set_system(fresh_system);
    *agent.conversation_mut() = conversation;
    session.state = state;
    carry_cut_off(session, agent, &head, observer);
    if let Some(from) = moved_from {
        let done = session
            .store
            .begin(&session.lease, &mut session.state)?
            .relocate(&session.cwd)?;
        observer.event(Event::Relocated {
            from,
            to: session.cwd.clone(),
            checkpoint: done.id,
        });
    }

    let session::Resumed {
        config,
        meter,
        cursors,
    } = session::resumed(record);
    let saved = Saved {
        config,
        meter,
        // A figure of 0 for a request of messages (a server that sent no
        // usage, saved before hel estimated) would be believed: dropped.
        keep: !system_changed && meter.plausible(),
    };
    let tools = agent.tools_mut();
    tools.cursors = cursors.unwrap_or_else(|| {
        observer.warn(Warning::CursorsUnreadable);
        CursorTable::default()
    });
    tools.spill.set_committed(session.state.spill());
    tools.spill.materialize();
    if mcp_pending {
        return Ok(Some(saved));
    }
    settle(agent, saved, observer);
    Ok(None)
}

/// A session whose last instruction was cut off (the process ended before
/// it finished) has its round records after `head`: what they hold joins
/// the conversation, with a result for each call left without one and a
/// line saying the process ended (saved by the next commit, which cuts
/// the records). Records that cannot be read carry nothing.
fn carry_cut_off(session: &Session, agent: &mut Agent, head: &ObjectId, observer: &dyn Observer) {
    let limits = session.store.limits();
    let carried = session::carried(
        &session.store,
        session.id(),
        head,
        agent.conversation().messages(),
        &limits,
    )
    .unwrap_or_default();
    if carried.is_empty() {
        return;
    }
    let calls = carried
        .iter()
        .filter(|m| m.get("role").and_then(|r| r.as_str()) == Some("tool"))
        .filter(|m| {
            let c = m.get("content").and_then(|c| c.as_str());
            c != Some(session::ENDED_RUNNING) && c != Some(session::ENDED_NOT_RUN)
        })
        .count();
    for m in carried {
        agent.conversation_mut().push(m);
    }
    observer.warn(Warning::CutOff { calls });
}

/// What of a checkpoint is compared with the toolset in force.
pub(super) struct Saved {
    config: Option<RequestConfig>,
    meter: Meter,
    /// The Meter may be kept if the input signature is unchanged.
    keep: bool,
}

/// Compare the saved settings with the current ones (the toolset complete:
/// MCP tools included): say what changed and which MCP servers the session
/// used are gone, and keep the saved Meter only under an unchanged input
/// signature.
pub(super) fn settle(agent: &mut Agent, saved: Saved, observer: &dyn Observer) {
    let same_signature = saved
        .config
        .as_ref()
        .is_some_and(|s| s.signature() == agent.config().signature());
    if let Some(config) = &saved.config {
        let diffs = differences(config, agent.config());
        if !diffs.is_empty() {
            observer.event(Event::SettingsChanged(diffs));
        }
        for gone in config
            .mcp_servers
            .iter()
            .filter(|s| !agent.config().mcp_servers.contains(s))
        {
            observer.warn(crate::mcp::McpWarning::Gone(gone.clone()).into());
        }
    }
    let keep = saved.keep && same_signature;
    agent.set_meter(if keep { saved.meter } else { Meter::default() });
    if let Some(rec) = agent.recorder() {
        rec.set_meter_restored(keep);
    }
}

/// How the current settings differ from the saved ones, in words.
fn differences(saved: &RequestConfig, now: &RequestConfig) -> Vec<String> {
    let mut diffs = Vec::new();
    if saved.model != now.model || saved.provider != now.provider {
        diffs.push(format!(
            "model {}/{} → {}/{}",
            saved.provider, saved.model, now.provider, now.model
        ));
    }
    if saved.tools != now.tools {
        diffs.push("toolset changed".to_owned());
    }
    if saved.params != now.params {
        diffs.push("params changed".to_owned());
    }
    if saved.max_output_tokens != now.max_output_tokens {
        diffs.push(format!(
            "output limit {} → {}",
            saved.max_output_tokens, now.max_output_tokens
        ));
    }
    diffs
}
