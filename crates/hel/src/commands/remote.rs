//! `hel remote add|list|remove`, `hel push`, `hel pull`,
//! `hel sessions --remote`, `hel sessions delete --remote` and
//! `hel gc --remote`: sessions across machines (hel-remote does the work).

use std::path::PathBuf;
use std::time::Duration;

use hel_remote::remote::{Listed, GRACE_MIN};
use hel_remote::{Pushed, Remote, RemoteConfig, RemoteError, Remotes};
use hel_store::transfer::{Adopted, OutPack};
use hel_store::{ObjectId, SessionId, Store};

use super::report::{print_json, project, say};
use super::scan::{self, Exits, Secrets};
use crate::cli::RemoteCommand;
use crate::exit::{Exit, Failure, Usage};
use crate::render::count;

/// Where the remotes are configured.
fn config_path() -> Result<PathBuf, Exit> {
    crate::config::config_home()
        .map(|d| d.join("hel").join("remotes.toml"))
        .ok_or_else(|| Usage::NoConfigHome.into())
}

fn runtime() -> Result<tokio::runtime::Runtime, Exit> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(e).into())
}

/// The remote `name`, or the only one configured.
fn open(name: Option<&str>) -> Result<Remote, Exit> {
    let remotes = Remotes::load(&config_path()?)?;
    let name = match name {
        Some(n) => n.to_owned(),
        None => match remotes.remote.keys().collect::<Vec<_>>()[..] {
            [one] => one.clone(),
            [] => return Err(Usage::NoRemoteConfigured.into()),
            _ => return Err(Usage::WhichRemote.into()),
        },
    };
    Ok(Remote::open(&name, remotes.get(&name)?, false)?)
}

pub fn manage(command: RemoteCommand) -> Result<u8, Exit> {
    let path = config_path()?;
    let mut remotes = Remotes::load(&path)?;
    match command {
        RemoteCommand::Add {
            name,
            url,
            endpoint,
            region,
        } => {
            hel_remote::config::check_name(&name)?;
            if remotes.remote.contains_key(&name) {
                return Err(RemoteError::Exists { name }.into());
            }
            let config = RemoteConfig {
                url,
                endpoint,
                region,
            };
            let remote = Remote::open(&name, &config, true)?;
            runtime()?.block_on(remote.probe())?;
            say!(
                "added remote {name}: {} (conditional writes: honoured)",
                config.url
            );
            remotes.remote.insert(name, config);
            remotes.save(&path)?;
        }
        RemoteCommand::List => {
            for (name, r) in &remotes.remote {
                let mut extra = String::new();
                if let Some(e) = &r.endpoint {
                    extra.push_str(&format!(" endpoint={e}"));
                }
                if let Some(g) = &r.region {
                    extra.push_str(&format!(" region={g}"));
                }
                say!("{name}\t{}{extra}", r.url);
            }
        }
        RemoteCommand::Remove { name } => {
            if remotes.remote.remove(&name).is_none() {
                return Err(RemoteError::NoRemote { name }.into());
            }
            remotes.save(&path)?;
            say!("removed remote {name} (nothing on it was deleted)");
        }
    }
    Ok(0)
}

fn short(id: &impl ToString) -> String {
    id.to_string().chars().take(12).collect()
}

pub fn push(name: Option<String>, specs: Vec<String>, allow_secrets: bool) -> Result<u8, Exit> {
    let project = project()?;
    let store = Store::open(&project)?;
    let remote = open(name.as_deref())?;
    let sessions: Vec<SessionId> = if specs.is_empty() {
        // Only the project's own: a session that arrived with a `.hel/`
        // not made here goes only when named (hel_store::identity).
        let mut out = Vec::new();
        let mut shipped = 0u64;
        for info in store.sessions()? {
            if info.head.is_none() {
                continue;
            }
            if info.shipped {
                shipped += 1;
            } else if remote.changed_since_push(&store, &info.id)? {
                out.push(info.id);
            }
        }
        if shipped > 0 {
            crate::render::line(&format!(
                "hel: {} not pushed: {} with this .hel/, which was not made here; name {} to push {}",
                count(shipped, "session", "sessions"),
                if shipped == 1 { "it arrived" } else { "they arrived" },
                if shipped == 1 { "it" } else { "them" },
                if shipped == 1 { "it" } else { "them" },
            ));
        }
        out
    } else {
        specs
            .iter()
            .map(|s| hel_agent::resolve_session(&store, &project, s))
            .collect::<Result<_, _>>()?
    };
    if sessions.is_empty() {
        say!(
            "nothing to push to {}: every session is as last pushed",
            remote.name()
        );
        return Ok(0);
    }
    let rt = runtime()?;
    let mut failed = false;
    let secrets = Secrets::from_env();
    let mut exits = Exits::new(&store, &secrets)?;
    let mut held = 0u64;
    for s in &sessions {
        // What this push would send (the objects the remote lacks) is
        // scanned before anything goes: its cost is that of what is sent.
        let mut found = Vec::new();
        let mut scan_failed = None;
        let mut check = |head: &ObjectId, out: &OutPack| {
            if allow_secrets {
                return true;
            }
            match exits.sent(s, head, &out.ids) {
                Ok(f) => found = f,
                Err(e) => scan_failed = Some(e),
            }
            found.is_empty() && scan_failed.is_none()
        };
        let pushed = rt.block_on(remote.push_checked(&store, s, &mut check));
        if let Some(e) = scan_failed {
            crate::render::failure_line(&format!("{s} not pushed: "), &e);
            failed = true;
            continue;
        }
        match pushed {
            Ok(Pushed::Held) => {
                scan::refuse(&found);
                held += 1;
                failed = true;
            }
            Ok(Pushed::UpToDate) => say!("{s}: up to date on {}", remote.name()),
            Ok(Pushed::Sent { objects, bytes }) => {
                say!(
                    "{s}: pushed to {} ({}, {})",
                    remote.name(),
                    count(objects, "object", "objects"),
                    count(bytes, "byte", "bytes")
                )
            }
            Err(e) => {
                crate::render::failure_line("", &e.into());
                failed = true;
            }
        }
    }
    if held > 0 {
        scan::refused_last(&count(held, "session", "sessions"), "pushed");
    }
    Ok(u8::from(failed))
}

pub fn pull(name: Option<String>, specs: Vec<String>) -> Result<u8, Exit> {
    let store = Store::open(&project()?)?;
    let remote = open(name.as_deref())?;
    let rt = runtime()?;
    let listed = rt.block_on(remote.sessions())?;
    let mut sessions = Vec::new();
    if specs.is_empty() {
        sessions.extend(listed.iter().map(|l| l.session.clone()));
    } else {
        for spec in &specs {
            hel_agent::check_session_arg(spec)?;
            let spec = spec.to_ascii_lowercase();
            let found: Vec<&Listed> = listed
                .iter()
                .filter(|l| l.session.as_str().starts_with(&spec))
                .collect();
            match found[..] {
                [one] => sessions.push(one.session.clone()),
                [] => {
                    return Err(RemoteError::NoRemoteSession {
                        remote: remote.name().to_owned(),
                        session: spec,
                    }
                    .into())
                }
                _ => {
                    return Err(Usage::AmbiguousRemoteSession {
                        spec,
                        remote: remote.name().to_owned(),
                    }
                    .into())
                }
            }
        }
    }
    let mut failed = false;
    for s in &sessions {
        let pulled = rt.block_on(remote.pull(&store, s));
        let came = pulled.as_ref().ok().and_then(|p| came_in(s, &p.adopted));
        match pulled {
            Ok(p) => match p.adopted {
                Adopted::UpToDate => say!("{s}: up to date"),
                Adopted::LocalAhead => say!("{s}: this project is ahead of {} (`hel push` sends it)", remote.name()),
                Adopted::New => say!(
                    "{s}: pulled from {} ({}, {})",
                    remote.name(),
                    count(p.packs, "pack", "packs"),
                    count(p.bytes, "byte", "bytes")
                ),
                Adopted::FastForward { from } => say!(
                    "{s}: fast-forward from {} ({}, {})",
                    short(&from),
                    count(p.packs, "pack", "packs"),
                    count(p.bytes, "byte", "bytes")
                ),
                Adopted::Forked { session, .. } => say!(
                    "{s}: diverged from {}: the remote's line is now session {session} (a fork; `hel sessions log {session}` shows where it left this one); {s} is untouched",
                    remote.name()
                ),
            },
            Err(e) => {
                crate::render::failure_line("", &e.into());
                failed = true;
            }
        }
        if let Some(c) = came {
            scan::brought_in(&store, &c);
        }
    }
    Ok(u8::from(failed))
}

/// The session that holds what a pull or an import of `session` brought
/// in, if it brought anything.
fn came_in(session: &SessionId, adopted: &Adopted) -> Option<SessionId> {
    match adopted {
        Adopted::New | Adopted::FastForward { .. } => Some(session.clone()),
        Adopted::Forked { session, .. } => Some(session.clone()),
        Adopted::UpToDate | Adopted::LocalAhead => None,
    }
}

/// A row of `hel sessions --remote NAME --json`.
#[derive(serde::Serialize)]
struct RemoteRow<'a> {
    broken: Option<String>,
    checkpoints: u64,
    head: Option<String>,
    id: &'a SessionId,
    instruction: &'a str,
    messages: u64,
    updated: String,
}

pub fn list_sessions(name: &str, json: bool) -> Result<u8, Exit> {
    let remote = open(Some(name))?;
    let listed = runtime()?.block_on(remote.sessions())?;
    let rows: Vec<RemoteRow> = listed
        .iter()
        .map(|l| match &l.r#ref {
            Ok(r) => RemoteRow {
                broken: None,
                checkpoints: r.summary.checkpoints,
                head: Some(r.head.to_hex()),
                id: &l.session,
                instruction: &r.summary.instruction,
                messages: r.summary.messages,
                updated: hel_store::time::rfc3339(r.updated_ms),
            },
            Err(e) => RemoteRow {
                broken: Some(e.to_string()),
                checkpoints: 0,
                head: None,
                id: &l.session,
                instruction: "",
                messages: 0,
                updated: String::new(),
            },
        })
        .collect();
    if json {
        print_json(&rows);
        return Ok(0);
    }
    if rows.is_empty() {
        say!("no sessions on {name}");
    }
    for r in &rows {
        match &r.broken {
            Some(e) => say!("{}  BROKEN: {e}", r.id),
            None => say!(
                "{}  {}  {}, {}  {}",
                r.id,
                r.updated,
                count(r.checkpoints, "checkpoint", "checkpoints"),
                count(r.messages, "message", "messages"),
                hel_store::first_line(r.instruction)
            ),
        }
    }
    Ok(0)
}

pub fn delete_session(store: &Store, name: &str, spec: &str) -> Result<u8, Exit> {
    let id: SessionId = spec.parse().map_err(|_| Usage::WholeIdToDelete {
        spec: spec.to_owned(),
    })?;
    let remote = open(Some(name))?;
    if runtime()?.block_on(remote.delete_session(Some(store), &id))? {
        say!("deleted session {id} on {name} (its data goes at the next `hel gc --remote {name}` runs)");
        Ok(0)
    } else {
        Err(RemoteError::NoRemoteSession {
            remote: name.to_owned(),
            session: id.to_string(),
        }
        .into())
    }
}

pub fn gc(name: &str, grace: &str, dry_run: bool) -> Result<u8, Exit> {
    let grace: Duration = humantime::parse_duration(grace).map_err(|source| Usage::Grace {
        grace: grace.to_owned(),
        source,
    })?;
    if grace < GRACE_MIN {
        return Err(Usage::GraceTooShort { min: GRACE_MIN }.into());
    }
    let remote = open(Some(name))?;
    let r = runtime()?.block_on(remote.gc(grace, dry_run))?;
    say!(
        "{name}: {}, {} ({} live); {} deleted ({}){}; {} recorded for the next run",
        count(r.refs, "ref", "refs"),
        count(r.packs, "pack", "packs"),
        r.live,
        r.deleted,
        count(r.bytes_deleted, "byte", "bytes"),
        if dry_run { " [dry run]" } else { "" },
        count(r.candidates, "unreferenced pack", "unreferenced packs")
    );
    Ok(0)
}

pub fn export_bundle(
    store: &Store,
    project: &std::path::Path,
    spec: &str,
    file: &std::path::Path,
    allow_secrets: bool,
) -> Result<u8, Exit> {
    let id = hel_agent::resolve_session(store, project, spec)?;
    if !allow_secrets {
        // A bundle holds the session's whole history.
        let secrets = Secrets::from_env();
        let found = Exits::new(store, &secrets)?.history(&id, &store.head(&id)?)?;
        if !found.is_empty() {
            scan::refuse(&found);
            scan::refused_last(&format!("session {id}"), "written");
            return Ok(1);
        }
    }
    let size = hel_remote::bundle::export(store, &id, file)?;
    say!(
        "wrote session {id} to {} ({})",
        file.display(),
        count(size, "byte", "bytes")
    );
    Ok(0)
}

pub fn import_bundle(store: &Store, file: &std::path::Path) -> Result<u8, Exit> {
    let (id, adopted) = hel_remote::bundle::import(store, file)?;
    let came = came_in(&id, &adopted);
    match adopted {
        Adopted::New => say!("{id}: imported"),
        Adopted::UpToDate => say!("{id}: already here"),
        Adopted::LocalAhead => say!("{id}: this project is ahead of the bundle"),
        Adopted::FastForward { from } => say!("{id}: fast-forward from {}", short(&from)),
        Adopted::Forked { session, .. } => {
            say!("{id}: diverged: the bundle's line is now session {session}; {id} is untouched")
        }
    }
    if let Some(c) = came {
        scan::brought_in(store, &c);
    }
    Ok(0)
}
