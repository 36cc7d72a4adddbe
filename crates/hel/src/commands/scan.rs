//! `hel sessions scan`, and the check every way out makes (`hel push`,
//! `hel sessions export` in every form): what a session's stored
//! conversation holds that the detector (hel-secrets) calls a secret.
//!
//! The walk is hel-store's ([`hel_store::search::Walk`]): every message
//! of every checkpoint of a session's history, each distinct stored
//! message once, every read bounded as a load bounds it. A handle
//! (`‹secret:…›`) is what redaction left, not a finding. A finding is
//! shown by its session, the checkpoint where its message first appeared,
//! the message's position, its role and the kind of secret: never the
//! value.

use std::path::Path;

use hel_agent::text::escape_line;
use hel_secrets::{handle_ranges, Detector};
use hel_store::search::{Hit, Matcher, Walk};
use hel_store::{ObjectId, SessionId, Store};
use serde::Serialize;

use super::report::{print_json, say};
use crate::exit::{self, Exit};
use crate::render::{self, count};

/// The detector as a walk's matcher: the kinds of the secrets in a
/// message's texts, each once, handles left out.
pub(super) struct Secrets(Detector);

impl Secrets {
    /// The rules, and the values of the user's secret environment
    /// variables.
    pub(super) fn from_env() -> Secrets {
        Secrets(Detector::from_env())
    }
}

impl Matcher for Secrets {
    fn check(&self, _role: &str, texts: &[&str]) -> Vec<String> {
        let mut kinds: Vec<String> = Vec::new();
        for t in texts {
            let handles = handle_ranges(t);
            for f in self.0.detect(t) {
                let in_handle = handles
                    .iter()
                    .any(|h| h.start < f.range.end && f.range.start < h.end);
                if !in_handle && !kinds.contains(&f.kind) {
                    kinds.push(f.kind);
                }
            }
        }
        kinds
    }
}

/// A secret in a stored message (fields in the order `--json` has them).
#[derive(Serialize, Debug)]
pub(super) struct Finding {
    pub checkpoint: String,
    pub index: usize,
    pub kind: String,
    pub role: String,
    pub session: SessionId,
}

impl Finding {
    /// One line: session and checkpoint (short), message, role, kind.
    fn line(&self) -> String {
        format!(
            "{}  {}  message {}  {}  {}",
            &self.session.as_str()[..8],
            &self.checkpoint[..12],
            self.index,
            escape_line(&self.role),
            escape_line(&self.kind)
        )
    }
}

/// The findings of `hits` (one per kind per message) in `session`.
fn findings(session: &SessionId, hits: Vec<Hit>) -> Vec<Finding> {
    hits.into_iter()
        .flat_map(|h| {
            let checkpoint = h.checkpoint.to_hex();
            h.found.into_iter().map(move |kind| Finding {
                checkpoint: checkpoint.clone(),
                index: h.index,
                kind,
                role: h.role.clone(),
                session: session.clone(),
            })
        })
        .collect()
}

/// What a way out checks: one walk shared by the sessions it sends.
pub(super) struct Exits<'a> {
    walk: Walk<'a>,
}

impl<'a> Exits<'a> {
    pub(super) fn new(store: &'a Store, secrets: &'a Secrets) -> Result<Exits<'a>, Exit> {
        Ok(Exits {
            walk: Walk::new(store, secrets)?,
        })
    }

    /// The secrets of the whole history of `head` (what a bundle or a
    /// first push of it holds).
    pub(super) fn history(
        &mut self,
        session: &SessionId,
        head: &ObjectId,
    ) -> Result<Vec<Finding>, Exit> {
        Ok(findings(session, self.walk.history(head)?))
    }

    /// The secrets of what the objects `sent` store of the history of
    /// `head` (what a push sends).
    pub(super) fn sent(
        &mut self,
        session: &SessionId,
        head: &ObjectId,
        sent: &[ObjectId],
    ) -> Result<Vec<Finding>, Exit> {
        Ok(findings(session, self.walk.history_sent(head, sent)?))
    }

    /// The secrets of the conversation at `checkpoint` (what an export of
    /// it writes).
    pub(super) fn conversation(
        &mut self,
        session: &SessionId,
        checkpoint: &ObjectId,
    ) -> Result<Vec<Finding>, Exit> {
        Ok(findings(session, self.walk.conversation(checkpoint)?))
    }
}

/// Say on stderr why nothing of `found` was sent: one line per finding.
pub(super) fn refuse(found: &[Finding]) {
    for f in found {
        render::line(&format!("hel: secret: {}", f.line()));
    }
}

/// The line that ends a refusal: `what` was not `done` (sent, written).
pub(super) fn refused_last(what: &str, done: &str) {
    render::line(&format!(
        "hel: {what} not {done}: it holds secrets (listed above); --allow-secrets sends it anyway"
    ));
}

/// A pull or an import brought `session` in: say whether it holds
/// secrets (it is kept either way).
pub(super) fn brought_in(store: &Store, session: &SessionId) {
    let head = match store.head(session) {
        Ok(h) => h,
        Err(_) => return,
    };
    let secrets = Secrets::from_env();
    let found = Walk::new(store, &secrets).and_then(|mut w| w.history(&head));
    match found {
        Ok(hits) if !hits.is_empty() => {
            let n: usize = hits.iter().map(|h| h.found.len()).sum();
            render::line(&format!(
                "hel: warning: session {session} holds {} (`hel sessions scan {}` lists them; push and export refuse it unless --allow-secrets)",
                count(n as u64, "secret", "secrets"),
                &session.as_str()[..8]
            ));
        }
        Ok(_) => {}
        Err(e) => render::line(&format!(
            "hel: warning: session {session} not scanned for secrets: {}",
            exit::store_words(&e)
        )),
    }
}

/// `hel sessions scan [SESSION]`.
pub fn scan(store: &Store, project: &Path, session: Option<&str>, json: bool) -> Result<u8, Exit> {
    let mut targets: Vec<(SessionId, ObjectId)> = Vec::new();
    let mut failed = false;
    match session {
        Some(spec) => {
            let id = hel_agent::resolve_session(store, project, spec)?;
            targets.push((id.clone(), store.head(&id)?));
        }
        None => {
            for info in store.sessions()? {
                if let Some(e) = info.broken {
                    render::line(&format!(
                        "hel: session {} not scanned: {}",
                        info.id,
                        exit::store_words(&e)
                    ));
                    failed = true;
                    continue;
                }
                if let Some(head) = info.head {
                    targets.push((info.id, head));
                }
            }
        }
    }
    let secrets = Secrets::from_env();
    let mut exits = Exits::new(store, &secrets)?;
    let mut found = Vec::new();
    let mut sessions_found = 0u64;
    for (id, head) in &targets {
        match exits.history(id, head) {
            Ok(f) => {
                sessions_found += u64::from(!f.is_empty());
                found.extend(f);
            }
            Err(e) => {
                render::failure_line(&format!("session {id} not scanned: "), &e);
                failed = true;
            }
        }
    }
    if json {
        print_json(&found);
    } else {
        for f in &found {
            say!("{}", f.line());
        }
        let (messages, _, _) = exits.walk.cost();
        say!(
            "{} in {} ({} of {} scanned)",
            count(found.len() as u64, "secret", "secrets"),
            count(sessions_found, "session", "sessions"),
            count(messages, "message", "messages"),
            count(targets.len() as u64, "session", "sessions"),
        );
    }
    Ok(u8::from(!found.is_empty() || failed))
}
