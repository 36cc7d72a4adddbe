//! Forks: a new session whose first checkpoint names a checkpoint of
//! another as its parent, sharing its messages and spill, and its name
//! copied with a free suffix.

use crate::journal::CommitPayload;
use crate::lock::{SessionLease, Shared};
use crate::object::Kind;
use crate::snapshot::{Checkpoint, Record, Workspace, SCHEMA_VERSION};
use crate::store::{Store, Warning};
use crate::write::Writer;
use crate::{heads, time, Error, ObjectId, Result, SessionId};

impl Store {
    /// Fork checkpoint `at` into a new session: one new snapshot that names
    /// `at` as its parent and reuses its message list and spill map. Returns
    /// the new session's lease and its first checkpoint. Refused, before
    /// anything is written, when `at` does not load. The base is read
    /// under the store lock the fork publishes under, so gc cannot sweep it
    /// in between; the new session depends on the journal that holds the
    /// base (and on what that one depends on).
    pub fn fork(&self, at: &ObjectId) -> Result<(SessionLease, ObjectId, Vec<Warning>)> {
        self.fork_with_cwd(at, None)
    }

    /// [`Store::fork`] made in the project directory `cwd`: the fork's
    /// first record says `cwd` (the directory it is continued in), not the
    /// directory `at` was saved in, so a checkpoint from before a
    /// relocation can be forked where the session now is.
    pub fn fork_here(
        &self,
        at: &ObjectId,
        cwd: &str,
    ) -> Result<(SessionLease, ObjectId, Vec<Warning>)> {
        self.fork_with_cwd(at, Some(cwd))
    }

    fn fork_with_cwd(
        &self,
        at: &ObjectId,
        cwd: Option<&str>,
    ) -> Result<(SessionLease, ObjectId, Vec<Warning>)> {
        let layout = self.layout_or_missing(at)?;
        // A store not made here is taken over first; a fork of a shipped
        // session is shipped (place.rs).
        let id = SessionId::new_random();
        let base = crate::read::snapshot(layout, at)?.session_id;
        let origin = crate::place::origin_of(layout, self.project_dir())?;
        let also = (!origin.owns(&base)).then_some(&id);
        crate::place::claim(layout, self.project_dir(), also)?;
        let lock = Shared::take(layout)?;
        layout.index().forget_removed();
        // What the fork's first record names is the base's: it is admitted
        // as a load would take it (messages, pairing, limits, record)
        // before anything is written, so a fork never publishes what a
        // load refuses (a base copied in from elsewhere, damaged).
        self.check_covering(at)?;
        let base = crate::read::snapshot(layout, at)?;
        let mut deps = match heads::read(layout, &base.session_id)? {
            Some(origin) => origin.deps(),
            // The base's session is gone (deleted; `at` is in a sealed pack
            // because a fork of it reaches it), and what it depended on
            // went with its head: the base may still name objects in those
            // journals, which the delete did not copy.
            None => crate::gc::journals_reached(layout, at, &base.session_id)?,
        };
        if layout.index().journal(layout, &base.session_id)?.is_some() {
            deps.insert(base.session_id.clone());
        }
        let lease = SessionLease::acquire(layout, &id, true)?;
        deps.remove(lease.session());
        let now = time::now_ms();
        let cp = Checkpoint {
            session_id: lease.session().clone(),
            parents: vec![*at],
            created_at: time::rfc3339(now),
            created_at_ms: now,
            summary: base.summary.clone(),
            schema_version: SCHEMA_VERSION,
            record: Some(Record::Fork),
            workspace: base.workspace.clone().map(|w| Workspace {
                restored: None,
                ..w
            }),
            cwd: cwd.map_or_else(|| base.cwd.clone(), str::to_owned),
            ..base
        };
        let id = {
            let mut journal = lease.journal.lock().unwrap_or_else(|p| p.into_inner());
            let journal = self.journal_writer(layout, &lease, &mut journal)?;
            let mut writer = Writer::new(&lock, lease.session(), &deps);
            cp.check().map_err(|e| Error::Refused {
                at: None,
                reason: format!("the fork's first record: {e}"),
            })?;
            let id = writer.put(Kind::Snapshot, &cp.to_payload())?;
            let payload = CommitPayload {
                deps: writer.deps.clone(),
                parent: None,
                seq: 1,
                session: lease.session().clone(),
                summary: cp.summary.clone(),
                time_ms: now,
                why: format!("fork from {at}"),
            };
            let (_, told) = writer.commit(journal, id, payload, || {
                crate::refs::publish(layout, lease.session(), None, id)
            })?;
            (id, told)
        };
        let (id, told) = id;
        // The fork is published: a name that cannot be copied is a warning.
        let mut warnings: Vec<Warning> = told.into_iter().map(Warning::RefNotSynced).collect();
        if let Err(e) = crate::names::copy_for_fork(layout, &base.session_id, lease.session()) {
            warnings.push(Warning::NameNotCopied(e));
        }
        drop(lock);
        let change = crate::oplog::Change::of(lease.session()).head(None, Some(id));
        let note = format!("forked from session {} at {}", base.session_id, at);
        if let Err(e) = crate::oplog::record(self, crate::oplog::Kind::Fork, vec![change], &note) {
            warnings.push(Warning::NotLogged(e));
        }
        Ok((lease, id, warnings))
    }
}
