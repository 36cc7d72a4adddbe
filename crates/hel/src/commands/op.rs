//! `hel op log` and `hel op undo`: the store's operation log
//! (`hel_store::oplog`, objects-spec §8.3).

use hel_store::oplog::{self, Change, Entry, Kind};
use hel_store::Store;
use serde_json::{json, Value};

use super::report::{print_json, project, say};
use crate::cli::OpCommand;
use crate::exit::Exit;

pub fn op(command: OpCommand) -> Result<u8, Exit> {
    let store = Store::open(&project()?)?;
    match command {
        OpCommand::Log { json } => log(&store, json),
        OpCommand::Undo { op, json } => undo(&store, op.as_deref(), json),
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn head(o: &Option<hel_store::ObjectId>) -> String {
    o.map_or_else(|| "none".to_owned(), |i| short(&i.to_hex()).to_owned())
}

/// One change in words: `session 4da5c0de (name): head a -> b, ...`.
fn describe(c: &Change) -> String {
    let mut parts = Vec::new();
    if let Some(m) = &c.head {
        parts.push(match (&m.before, &m.after) {
            (None, Some(a)) => format!("added at {}", head(&Some(*a))),
            (Some(b), None) => format!("removed from {}", head(&Some(*b))),
            (None, None) => "reclaimed".to_owned(),
            (b, a) => format!("head {} -> {}", head(b), head(a)),
        });
    }
    if let Some(m) = &c.name {
        let n = |o: &Option<String>| o.clone().unwrap_or_else(|| "(none)".into());
        parts.push(format!("name {} -> {}", n(&m.before), n(&m.after)));
    }
    if let Some(m) = &c.own {
        let w = |o: Option<bool>| if o == Some(true) { "own" } else { "shipped" };
        parts.push(format!("{} -> {}", w(m.before), w(m.after)));
    }
    format!("session {}: {}", &c.session.as_str()[..8], parts.join(", "))
}

fn change_json(c: &Change) -> Value {
    let hex = |o: &Option<hel_store::ObjectId>| o.map(|i| i.to_hex());
    json!({
        "session": c.session.as_str(),
        "head": c.head.as_ref().map(|m| json!({"before": hex(&m.before), "after": hex(&m.after)})),
        "name": c.name.as_ref().map(|m| json!({"before": m.before, "after": m.after})),
        "own": c.own.as_ref().map(|m| json!({"before": m.before, "after": m.after})),
    })
}

fn log(store: &Store, as_json: bool) -> Result<u8, Exit> {
    let log = oplog::log(store)?;
    let now = hel_store::time::now_ms();
    let undone_by = |e: &Entry| {
        log.entries
            .iter()
            .find(|u| u.undoes.as_deref() == Some(e.op.as_str()))
            .map(|u| u.op.clone())
    };
    if as_json {
        let out: Vec<Value> = log
            .entries
            .iter()
            .map(|e| {
                let expires = e.expires_ms(oplog::EXPIRY_MS);
                json!({
                    "op": e.op,
                    "kind": e.kind.as_str(),
                    "time": hel_store::time::rfc3339(e.time_ms),
                    "time_ms": e.time_ms,
                    "note": e.note,
                    "undoes": e.undoes,
                    "undone_by": undone_by(e),
                    "expires": hel_store::time::rfc3339(expires),
                    "revertible": e.kind != Kind::Gc && undone_by(e).is_none()
                        && (e.kind == Kind::Purge || expires > now),
                    "changes": e.changes.iter().map(change_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        print_json(&out);
    } else if log.entries.is_empty() && log.damaged.is_empty() {
        say!("the operation log is empty");
    } else {
        for e in &log.entries {
            let mut tags = Vec::new();
            if let Some(u) = &e.undoes {
                tags.push(format!("undoes {}", short(u)));
            }
            if let Some(u) = undone_by(e) {
                tags.push(format!("undone by {}", short(&u)));
            }
            if e.kind != Kind::Gc && e.kind != Kind::Purge && e.expires_ms(oplog::EXPIRY_MS) <= now
            {
                tags.push("expired".into());
            }
            let tags = if tags.is_empty() {
                String::new()
            } else {
                format!(" ({})", tags.join(", "))
            };
            say!(
                "{}  {}  {}{tags}",
                short(&e.op),
                super::sessions::when(e.time_ms, now),
                e.kind.as_str()
            );
            if !e.note.is_empty() {
                say!("    {}", e.note);
            }
            for c in &e.changes {
                say!("    {}", describe(c));
            }
        }
    }
    if log.unread > 0 {
        crate::render::line(&format!(
            "hel: {} older entries of the operation log not shown",
            log.unread
        ));
    }
    for d in &log.damaged {
        crate::render::line(&format!("hel: fault: {d}"));
    }
    Ok(if log.damaged.is_empty() { 0 } else { 1 })
}

fn undo(store: &Store, op: Option<&str>, as_json: bool) -> Result<u8, Exit> {
    let done = hel_store::opundo::undo(store, op)?;
    if as_json {
        print_json(&json!({
            "undid": done.undid.op,
            "kind": done.undid.kind.as_str(),
            "op": done.entry.op,
            "changes": done.entry.changes.iter().map(change_json).collect::<Vec<_>>(),
        }));
        return Ok(0);
    }
    say!(
        "undid {} {}; the undo is operation {} (`hel op undo {}` redoes it)",
        done.undid.kind.as_str(),
        short(&done.undid.op),
        short(&done.entry.op),
        short(&done.entry.op)
    );
    for c in &done.entry.changes {
        say!("    {}", describe(c));
    }
    Ok(0)
}
