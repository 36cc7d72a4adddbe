//! `hel op undo`: reverting one entry of the operation log (oplog.rs,
//! objects-spec §8.3), and what gc and fsck ask of the log: the
//! checkpoints unexpired entries keep ([`roots`]) and the entries that are
//! faults ([`faults`]). Above the trash, names and refs it moves.

use crate::journal::CommitPayload;
use crate::lock::{SessionLease, Shared};
use crate::odb::Odb;
use crate::oplog::{append, bad, read_log, undoing, Change, Entry, Kind, Log, Move, EXPIRY_MS};
use crate::write::Writer;
use crate::{heads, Error, ObjectId, Result, SessionId, Store};

/// The names an entry holds, checked as names (before one is written back).
fn check_names(entry: &Entry) -> std::result::Result<(), String> {
    for c in &entry.changes {
        if let Some(n) = &c.name {
            for name in n.before.iter().chain(n.after.iter()) {
                crate::check_name(name)
                    .map_err(|_| format!("{name:?} (session {}) is not a name", c.session))?;
            }
        }
    }
    Ok(())
}

/// The checkpoints unexpired entries of revertible kinds name (gc's extra
/// roots): those stored, each read as a snapshot of the session the entry
/// names. An entry that is not one, or that names a checkpoint of another
/// session, is the error: gc then refuses, as it does for a ref it
/// cannot read.
pub(crate) fn roots(layout: &Odb) -> Result<Vec<ObjectId>> {
    let log = read_log(layout)?;
    if let Some(e) = log.damaged.into_iter().next() {
        return Err(e);
    }
    let now = crate::trashed::now_ms();
    let mut out = Vec::new();
    for entry in log.entries {
        if !entry.kind.keeps() || entry.expires_ms(EXPIRY_MS) <= now {
            continue;
        }
        out.extend(heads_of(layout, &entry)?);
    }
    Ok(out)
}

/// The checkpoints `entry` names that are stored, each read as a
/// snapshot of the session the entry names it for; `Err` (naming the
/// entry's file) when one is not.
fn heads_of(layout: &Odb, entry: &Entry) -> Result<Vec<ObjectId>> {
    let mut out = Vec::new();
    for c in &entry.changes {
        let Some(m) = &c.head else { continue };
        for id in m.before.iter().chain(m.after.iter()) {
            if layout.index().locate(layout, id)?.is_none() {
                continue;
            }
            let cp = crate::read::snapshot(layout, id)
                .map_err(|e| bad(layout, &entry.file_name(), format!("it names {id}: {e}")))?;
            if cp.session_id != c.session {
                return Err(bad(
                    layout,
                    &entry.file_name(),
                    format!(
                        "it names checkpoint {id} of session {} as session {}'s",
                        cp.session_id, c.session
                    ),
                ));
            }
            out.push(*id);
        }
    }
    Ok(out)
}

/// fsck's check of the log (`mark`: gc's, from the ids given): each file that is not an entry, and each
/// entry naming a checkpoint of another session, is a fault. When there
/// is none, what the entries keep from gc is added to `reachable` (it is
/// no garbage: gc keeps it).
pub(crate) fn faults(
    layout: &Odb,
    reachable: &mut std::collections::HashSet<ObjectId>,
    mark: impl FnOnce(&[ObjectId]) -> Result<std::collections::HashSet<ObjectId>>,
) -> Result<Vec<Error>> {
    let log = read_log(layout)?;
    if !log.damaged.is_empty() {
        return Ok(log.damaged);
    }
    let mut out: Vec<Error> = log
        .entries
        .iter()
        .filter_map(|e| check_names(e).err().map(|r| bad(layout, &e.file_name(), r)))
        .collect();
    match roots(layout) {
        Ok(ids) => {
            let ids: Vec<ObjectId> = ids.into_iter().filter(|i| !reachable.contains(i)).collect();
            if !ids.is_empty() {
                // What does not read makes gc refuse, as for any root.
                match mark(&ids) {
                    Ok(m) => reachable.extend(m),
                    Err(e) => out.push(e),
                }
            }
        }
        Err(e) => out.push(e),
    }
    Ok(out)
}

/// What [`undo`] did: the entry it reverted and the entry it appended.
#[derive(Debug)]
pub struct Undone {
    pub undid: Entry,
    pub entry: Entry,
}

/// The entry `spec` names: a prefix of at least 4 hex digits of an op
/// id, or (`None`) the newest entry that is not a gc's.
fn find<'a>(log: &'a Log, spec: Option<&str>) -> Result<&'a Entry> {
    let refuse = |op: &str, reason: String| Error::CannotUndo {
        op: op.to_owned(),
        reason,
    };
    match spec {
        None => log
            .entries
            .iter()
            .rev()
            .find(|e| e.kind != Kind::Gc)
            .ok_or_else(|| {
                refuse(
                    "(last)",
                    "the operation log holds no operation to undo".into(),
                )
            }),
        Some(p) => {
            if p.len() < 4 || !p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return Err(refuse(
                    p,
                    "name an operation by 4 or more hex digits of its id (`hel op log` lists them)"
                        .into(),
                ));
            }
            let found: Vec<&Entry> = log.entries.iter().filter(|e| e.op.starts_with(p)).collect();
            match found.as_slice() {
                [one] => Ok(one),
                [] => Err(refuse(p, "no such operation in the log".into())),
                _ => Err(refuse(p, "more than one operation starts so".into())),
            }
        }
    }
}

/// The state one session is in now, as far as a change says anything.
struct Now {
    head: Option<ObjectId>,
    name: Option<String>,
    own: bool,
}

/// Revert one operation (`spec`: see [`find`]). Refused, before anything
/// changes, when the log has a damaged entry, when the operation expired,
/// was a gc, was undone already, or when a session it touched changed
/// since; then every change is reverted (what is reverted already is
/// left) and the undo's entry appended.
pub fn undo(store: &Store, spec: Option<&str>) -> Result<Undone> {
    let layout = store.layout_for_gc()?.ok_or_else(|| Error::CannotUndo {
        op: spec.unwrap_or("(last)").to_owned(),
        reason: "this project has no store".into(),
    })?;
    let log = read_log(layout)?;
    if let Some(e) = log.damaged.into_iter().next() {
        return Err(e);
    }
    let log = Log {
        entries: log.entries,
        ..Log::default()
    };
    let entry = find(&log, spec)?.clone();
    check_names(&entry).map_err(|r| bad(layout, &entry.file_name(), r))?;
    heads_of(layout, &entry)?;
    let refuse = |reason: String| Error::CannotUndo {
        op: entry.op.clone(),
        reason,
    };
    if entry.kind == Kind::Gc {
        return Err(refuse(
            "a gc cannot be undone: what it reclaimed is gone (and nothing it reclaimed was still needed)".into(),
        ));
    }
    // Undone, a purge would put the secrets it took out back in the
    // sessions' history.
    if entry.kind == Kind::Purge {
        return Err(refuse(
            "a purge cannot be undone: it would bring back the secrets it took out of the history"
                .into(),
        ));
    }
    if entry.expires_ms(EXPIRY_MS) <= crate::trashed::now_ms() {
        return Err(refuse(
            "it expired: what it needs may have been reclaimed by gc".into(),
        ));
    }
    if let Some(later) = log
        .entries
        .iter()
        .find(|e| e.undoes.as_deref() == Some(entry.op.as_str()))
    {
        return Err(refuse(format!(
            "it was undone already by operation {} (undo that one to redo it)",
            &later.op[..12]
        )));
    }
    let origin = crate::place::origin_of(layout, store.project_dir())?;
    let names = crate::names::read(layout)?;
    // Check every change first: nothing moves unless all can.
    let mut todo = Vec::new();
    for c in &entry.changes {
        let now = Now {
            head: heads::read(layout, &c.session)?.map(|h| h.id),
            name: names.get(&c.session).cloned(),
            own: origin.owns(&c.session),
        };
        todo.push((c.clone(), plan(store, layout, c, &now).map_err(refuse)?));
    }
    for (c, steps) in &todo {
        for step in steps {
            apply(store, layout, c, step, &entry)?;
        }
    }
    crate::failpoint::kill("oplog-undo-applied");
    // The undo's changes: the inverse ones, where a session went to the
    // trash naming the head it went there with (the one its redo brings
    // back).
    let mut inverse = Vec::new();
    for c in &entry.changes {
        let mut inv = c.clone().inverse();
        if let Some(m) = inv
            .head
            .as_mut()
            .filter(|m| m.after.is_none() && m.before.is_some())
        {
            if let Some(h) = heads::read_any(layout, &c.session)? {
                m.before = Some(h.id);
            }
        }
        inverse.push(inv);
    }
    let note = format!("undid {} {}", entry.kind.as_str(), &entry.op[..12]);
    let new = append(store, Kind::Undo, inverse, &note, Some(entry.op.clone()))?;
    Ok(Undone {
        undid: entry,
        entry: new,
    })
}

/// One step of reverting a change.
#[derive(Debug)]
enum Step {
    /// Move the session (at `from`) to the trash.
    Trash,
    /// Bring the session back from the trash.
    Untrash,
    /// Move its ref from `from` back to `to`.
    Head { from: ObjectId, to: ObjectId },
    /// Give it its name back (or none).
    Name(Option<String>),
    /// Make it shipped again (`false`) or its own (`true`).
    Own(bool),
}

/// The steps that revert `c`, given the session's state now (none for
/// what is reverted already); `Err` when it changed since otherwise.
fn plan(
    store: &Store,
    layout: &Odb,
    c: &Change,
    now: &Now,
) -> std::result::Result<Vec<Step>, String> {
    let s = &c.session;
    let mut steps = Vec::new();
    let show =
        |o: &Option<ObjectId>| o.map_or_else(|| "none".to_owned(), |i| i.to_hex()[..12].to_owned());
    if let Some(m) = &c.head {
        match (m.before, m.after) {
            (None, None) => {}
            // Added: it goes to the trash with whatever it holds now
            // (its later checkpoints included: the trash keeps them).
            (None, Some(_)) => {
                if now.head.is_some() {
                    steps.push(Step::Trash);
                }
            }
            (Some(b), None) => match now.head {
                None if !crate::trashed::has_any(layout, s).map_err(|e| e.to_string())? => {
                    return Err(format!(
                        "session {s} is no longer in the trash (deleted for good, or expired)"
                    ))
                }
                None => steps.push(Step::Untrash),
                Some(h) if h == b => {}
                Some(h) => {
                    return Err(format!(
                        "session {s} exists again with another head ({})",
                        show(&Some(h))
                    ))
                }
            },
            (Some(b), Some(a)) => {
                if now.head == Some(a) {
                    // The checkpoint to go back to must be stored and the
                    // session's own.
                    let layout_ok = layout
                        .index()
                        .locate(layout, &b)
                        .map_err(|e| e.to_string())?
                        .is_some();
                    if !layout_ok {
                        return Err(format!(
                            "checkpoint {} of session {s} is gone (reclaimed by gc)",
                            show(&Some(b))
                        ));
                    }
                    let cp = store.checkpoint(&b).map_err(|e| e.to_string())?;
                    if cp.session_id != *s {
                        return Err(format!(
                            "the log names checkpoint {} of session {} as session {s}'s",
                            show(&Some(b)),
                            cp.session_id
                        ));
                    }
                    steps.push(Step::Head { from: a, to: b });
                } else if now.head != Some(b) {
                    return Err(format!(
                        "session {s} moved since (its head is {}, the operation left {})",
                        show(&now.head),
                        show(&Some(a))
                    ));
                }
            }
        }
    }
    // A session going to or coming from the trash takes its name along.
    if let (Some(m), false) = (&c.name, c.trashes()) {
        if now.name == m.after && m.before != m.after {
            steps.push(Step::Name(m.before.clone()));
        } else if now.name != m.before {
            return Err(format!(
                "session {s} was renamed since (it is {:?}, the operation left {:?})",
                now.name, m.after
            ));
        }
    }
    if let Some(Move {
        before: Some(b),
        after: Some(a),
    }) = &c.own
    {
        if now.own == *a && a != b {
            steps.push(Step::Own(*b));
        }
    }
    Ok(steps)
}

fn apply(store: &Store, layout: &Odb, c: &Change, step: &Step, entry: &Entry) -> Result<()> {
    let s = &c.session;
    let why = format!("op undo {}", &entry.op[..12]);
    match step {
        Step::Trash => trash(store, s),
        Step::Untrash => untrash(store, s),
        Step::Head { from, to } => move_head(store, layout, s, *from, *to, &why),
        Step::Name(name) => crate::names::update(layout, |names| {
            if let Some(n) = name {
                if let Some((holder, _)) = names.iter().find(|(h, v)| *h != s && *v == n) {
                    if store.knows(holder)? {
                        return Err(Error::Name(Box::new(crate::NameError::Taken {
                            name: n.clone(),
                            holder: holder.clone(),
                        })));
                    }
                }
                names.retain(|h, v| h == s || v != n);
                names.insert(s.clone(), n.clone());
            } else {
                names.remove(s);
            }
            Ok(true)
        }),
        Step::Own(true) => {
            crate::place::adopt(layout, store.project_dir(), Some(std::slice::from_ref(s)))
                .map(|_| ())
        }
        Step::Own(false) => crate::place::ship(layout, store.project_dir(), s),
    }
}

/// Move `session` to the trash (an undo of what added it).
fn trash(store: &Store, session: &SessionId) -> Result<()> {
    undoing(|| store.trash_session(session)).map(|_| ())
}

/// Bring `session` back from the trash (an undo of a delete).
fn untrash(store: &Store, session: &SessionId) -> Result<()> {
    undoing(|| store.undelete_session(session)).map(|_| ())
}

/// Move `session`'s ref from `from` back to `to` (a checkpoint of its
/// own, stored): a commit record publishing `to` again, as a pull
/// publishes a head (objects-spec §5.2), under the session's lease and
/// the store lock held shared.
fn move_head(
    store: &Store,
    layout: &Odb,
    session: &SessionId,
    from: ObjectId,
    to: ObjectId,
    why: &str,
) -> Result<()> {
    let lock = Shared::take(layout)?;
    layout.index().forget_removed();
    let lease = SessionLease::acquire(layout, session, true)?;
    let head = heads::read(layout, session)?.ok_or_else(|| Error::NoSuchSession {
        session: session.to_string(),
    })?;
    if head.id != from {
        return Err(Error::RefMoved {
            session: session.to_string(),
            expected: from.to_hex(),
            found: head.id.to_hex(),
        });
    }
    store.check_covering(&to)?;
    let cp = crate::read::snapshot(layout, &to)?;
    let deps = head.deps();
    let mut slot = lease.journal.lock().unwrap_or_else(|p| p.into_inner());
    let journal = store.journal_writer(layout, &lease, &mut slot)?;
    let mut writer = Writer::new(&lock, session, &deps);
    let payload = CommitPayload {
        deps: writer.deps.clone(),
        parent: Some(from),
        seq: head.seq() + 1,
        session: session.clone(),
        summary: cp.summary.clone(),
        time_ms: crate::trashed::now_ms(),
        why: why.to_owned(),
    };
    crate::failpoint::kill("oplog-undo-head");
    let (_, told) = writer.commit(journal, to, payload, || {
        crate::commit::move_ref(layout, session, Some(from), to)
    })?;
    drop(told);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oplog::{log, record, DIR, ENTRY_MAX, FUTURE_SLACK_MS};
    use crate::snapshot::Record;
    use crate::{CommitInput, SessionLease, SessionState};
    use serde_json::{json, Value};

    fn commit(
        store: &Store,
        lease: &SessionLease,
        st: &mut SessionState,
        msgs: &[Value],
    ) -> ObjectId {
        let leaves = vec![None; msgs.len()];
        store
            .commit(
                lease,
                st,
                CommitInput::new(
                    Record::Answer,
                    msgs,
                    &leaves,
                    "/p",
                    crate::SessionRecord::of(crate::RequestConfig::bare("test", "")),
                )
                .instruction("i"),
            )
            .unwrap()
            .id
    }

    /// A session with two checkpoints: (store dir, store, session, first, second).
    fn two() -> (tempfile::TempDir, Store, SessionId, ObjectId, ObjectId) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let lease = store.new_session().unwrap();
        let mut st = SessionState::default();
        let mut msgs = vec![
            json!({"role": "user", "content": "one"}),
            json!({"role": "assistant", "content": "a"}),
        ];
        let c1 = commit(&store, &lease, &mut st, &msgs);
        msgs.push(json!({"role": "user", "content": "two"}));
        msgs.push(json!({"role": "assistant", "content": "b"}));
        let c2 = commit(&store, &lease, &mut st, &msgs);
        let id = lease.session().clone();
        drop(lease);
        (dir, store, id, c1, c2)
    }

    fn sound(store: &Store) {
        let r = crate::fsck::fsck(store).unwrap();
        assert!(
            r.is_sound(),
            "{:?}",
            r.faults.iter().map(|f| f.to_string()).collect::<Vec<_>>()
        );
    }

    fn kinds(store: &Store) -> Vec<Kind> {
        log(store).unwrap().entries.iter().map(|e| e.kind).collect()
    }

    #[test]
    fn a_rename_is_undone_and_its_undo_too() {
        let (_d, store, id, _, _) = two();
        crate::names::rename(&store, &id, "first").unwrap();
        crate::names::rename(&store, &id, "second").unwrap();
        assert_eq!(kinds(&store), [Kind::Rename, Kind::Rename]);
        let done = undo(&store, None).unwrap();
        assert_eq!(done.undid.kind, Kind::Rename);
        assert_eq!(
            crate::names::name_of(&store, &id).unwrap().as_deref(),
            Some("first")
        );
        // Undone once only; its undo redoes it.
        let again = undo(&store, Some(&done.undid.op[..8])).unwrap_err();
        assert!(again.to_string().contains("undone already"), "{again}");
        undo(&store, None).unwrap();
        assert_eq!(
            crate::names::name_of(&store, &id).unwrap().as_deref(),
            Some("second")
        );
        // A rename since makes the first undo refuse, changing nothing.
        crate::names::rename(&store, &id, "third").unwrap();
        let first = log(&store).unwrap().entries[0].op.clone();
        let e = undo(&store, Some(&first)).unwrap_err();
        assert!(e.to_string().contains("renamed since"), "{e}");
        assert_eq!(
            crate::names::name_of(&store, &id).unwrap().as_deref(),
            Some("third")
        );
        sound(&store);
    }

    #[test]
    fn a_head_move_is_undone_by_a_commit_record_and_redone() {
        let (_d, store, id, c1, c2) = two();
        record(
            &store,
            Kind::Pull,
            vec![Change::of(&id).head(Some(c1), Some(c2))],
            "",
        )
        .unwrap();
        undo(&store, None).unwrap();
        assert_eq!(store.head(&id).unwrap(), c1);
        sound(&store);
        // What the log keeps for a redo is no garbage.
        let r = crate::fsck::fsck(&store).unwrap();
        assert_eq!(r.unreachable, Some(0));
        // The checkpoint left behind stays: gc keeps it for the redo.
        crate::gc::gc(&store, false).unwrap();
        undo(&store, None).unwrap();
        assert_eq!(store.head(&id).unwrap(), c2);
        sound(&store);
        assert_eq!(kinds(&store), [Kind::Pull, Kind::Undo, Kind::Undo]);
    }

    #[test]
    fn a_fork_is_undone_to_the_trash_and_back_and_a_delete_is_undeleted() {
        let (_d, store, id, c1, _) = two();
        crate::names::rename(&store, &id, "work").unwrap();
        let (lease, head, _) = store.fork(&c1).unwrap();
        let fork = lease.session().clone();
        drop(lease);
        assert_eq!(kinds(&store), [Kind::Rename, Kind::Fork]);
        undo(&store, None).unwrap();
        assert!(store.head(&fork).is_err());
        assert!(store
            .trash_entries()
            .unwrap()
            .iter()
            .any(|e| e.session == fork));
        sound(&store);
        undo(&store, None).unwrap();
        assert_eq!(store.head(&fork).unwrap(), head);
        // A delete (to the trash) is one entry; its undo brings the
        // session back with its name.
        store.trash_session(&id).unwrap();
        assert_eq!(
            log(&store).unwrap().entries.last().unwrap().kind,
            Kind::Delete
        );
        crate::gc::gc(&store, false).unwrap();
        undo(&store, None).unwrap();
        assert!(store.head(&id).is_ok());
        assert_eq!(
            crate::names::name_of(&store, &id).unwrap().as_deref(),
            Some("work")
        );
        sound(&store);
        // An undelete is one too, undone to the trash.
        store.trash_session(&id).unwrap();
        store.undelete_session(&id).unwrap();
        assert_eq!(
            log(&store).unwrap().entries.last().unwrap().kind,
            Kind::Undelete
        );
        undo(&store, None).unwrap();
        assert!(store.head(&id).is_err());
        sound(&store);
    }

    #[test]
    fn hostile_entries_are_faults_naming_their_file_and_gc_refuses() {
        let (d, store, id, c1, c2) = two();
        record(
            &store,
            Kind::Pull,
            vec![Change::of(&id).head(Some(c1), Some(c2))],
            "",
        )
        .unwrap();
        let dir = d.path().join(".hel").join(DIR);
        let good = std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let other = SessionId::new_random();
        let entry = |changes: Vec<Change>, op: &str, time_ms: u64| Entry {
            changes,
            kind: Kind::Pull,
            note: String::new(),
            op: op.repeat(32),
            time_ms,
            undoes: None,
            version: 1,
        };
        let now = crate::trashed::now_ms();
        let far = now + 10 * FUTURE_SLACK_MS;
        // Another session's checkpoints as this one's: it reads, but gc,
        // fsck and an undo refuse it.
        let stolen = entry(
            vec![Change::of(&other).head(Some(c1), Some(c2))],
            "b",
            now - 1000,
        );
        std::fs::write(
            dir.join(stolen.file_name()),
            serde_json::to_vec(&stolen).unwrap(),
        )
        .unwrap();
        let f = crate::fsck::fsck(&store).unwrap();
        assert!(f
            .faults
            .iter()
            .any(|f| f.to_string().contains(&stolen.file_name())));
        assert!(crate::gc::gc(&store, false)
            .unwrap_err()
            .to_string()
            .contains("as session"));
        let e = undo(&store, Some("bbbb")).unwrap_err().to_string();
        assert!(
            e.contains("as session") && e.contains(&stolen.file_name()),
            "{e}"
        );
        std::fs::remove_file(dir.join(stolen.file_name())).unwrap();
        let future = entry(vec![], "a", far);
        let cases: Vec<(String, Vec<u8>, &str)> = vec![
            (
                future.file_name(),
                serde_json::to_vec(&future).unwrap(),
                "in the future",
            ),
            // Past the size cap.
            (
                format!("{:016}-{}", 2, "c".repeat(32)),
                vec![b' '; ENTRY_MAX as usize + 1],
                "over the",
            ),
            // Not JSON, deep.
            (
                format!("{:016}-{}", 3, "d".repeat(32)),
                b"[".repeat(100_000),
                "not an entry",
            ),
            // Named for another entry than it holds.
            (
                format!("{:016}-{}", 5, "f".repeat(32)),
                std::fs::read(&good).unwrap(),
                "its name",
            ),
        ];
        for (name, bytes, says) in cases {
            std::fs::write(dir.join(&name), &bytes).unwrap();
            let l = log(&store).unwrap();
            assert_eq!(l.damaged.len(), 1, "{name}");
            let e = l.damaged[0].to_string();
            assert!(e.contains(&name) && e.contains(says), "{e}");
            let f = crate::fsck::fsck(&store).unwrap();
            assert!(
                f.faults.iter().any(|f| f.to_string().contains(&name)),
                "{name}"
            );
            assert!(crate::gc::gc(&store, false).is_err());
            assert!(undo(&store, None).is_err());
            assert_eq!(store.head(&id).unwrap(), c2, "nothing moved");
            std::fs::remove_file(dir.join(&name)).unwrap();
        }
        // A link, even to a good entry.
        let link = dir.join(format!("{:016}-{}", 4, "e".repeat(32)));
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let l = log(&store).unwrap();
        assert_eq!(l.damaged.len(), 1);
        assert!(crate::gc::gc(&store, false).is_err());
        std::fs::remove_file(&link).unwrap();
        sound(&store);
        crate::gc::gc(&store, false).unwrap();
    }

    #[test]
    fn a_gc_that_reclaimed_something_is_an_entry_no_undo_reverts() {
        let (_d, store, _, _, _) = two();
        let lease = store.new_session().unwrap();
        drop(lease);
        let r = crate::gc::gc(&store, false).unwrap();
        assert_eq!(r.sessions_removed.len(), 1);
        let e = log(&store).unwrap().entries.pop().unwrap();
        assert_eq!(e.kind, Kind::Gc);
        assert!(e.note.contains("1 abandoned session"), "{}", e.note);
        let refused = undo(&store, Some(&e.op)).unwrap_err().to_string();
        assert!(refused.contains("a gc cannot be undone"), "{refused}");
        // Nothing reclaimed, nothing logged; the default undo passes a gc.
        crate::gc::gc(&store, false).unwrap();
        assert_eq!(log(&store).unwrap().entries.len(), 1);
        let refused = undo(&store, None).unwrap_err().to_string();
        assert!(refused.contains("no operation to undo"), "{refused}");
    }

    #[test]
    fn expired_entries_are_no_roots_and_are_not_undone() {
        let (_d, store, id, c1, c2) = two();
        record(
            &store,
            Kind::Pull,
            vec![Change::of(&id).head(Some(c1), Some(c2))],
            "",
        )
        .unwrap();
        let layout = store.layout_for_gc().unwrap().unwrap();
        assert_eq!(roots(layout).unwrap(), vec![c1, c2]);
        let e = log(&store).unwrap().entries[0].clone();
        assert_eq!(e.expires_ms(EXPIRY_MS), e.time_ms + EXPIRY_MS);
        // The same entry dated 31 days ago: expired, no root, no undo; and
        // one dated past twice the period goes at the next append.
        let dir = store.project_path().join(".hel").join(crate::oplog::DIR);
        std::fs::remove_file(dir.join(e.file_name())).unwrap();
        let day = 24 * 3600 * 1000;
        let old = Entry {
            time_ms: e.time_ms - 31 * day,
            ..e.clone()
        };
        let older = Entry {
            time_ms: e.time_ms - 61 * day,
            op: "c".repeat(32),
            ..e.clone()
        };
        for x in [&old, &older] {
            std::fs::write(dir.join(x.file_name()), serde_json::to_vec(x).unwrap()).unwrap();
        }
        assert_eq!(roots(layout).unwrap(), vec![]);
        let refused = undo(&store, Some(&old.op)).unwrap_err().to_string();
        assert!(refused.contains("expired"), "{refused}");
        crate::names::rename(&store, &id, "later").unwrap();
        let ops: Vec<String> = log(&store)
            .unwrap()
            .entries
            .into_iter()
            .map(|e| e.op)
            .collect();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0], old.op);
    }
}
