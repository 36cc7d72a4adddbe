//! The store commands: `sessions` (list, log, show, delete, rename, search,
//! export), `gc`, `fsck`,
//! and the workspace commands `undo`, `restore`, `diff`. They need no key
//! and no provider, and print their report on stdout.

mod export;
mod html;
pub mod mcp;
mod op;
mod pager;
mod pick;
mod purge;
pub mod remote;
mod report;
mod scan;
mod search;
mod sessions;
mod show;
mod store;
mod transcript;
mod tree;
mod workspace;

use hel_store::Store;

use crate::cli::SessionsCommand;
use crate::exit::{Exit, Usage};

pub use op::op;
pub use pager::show as page;
pub use pick::session_to_resume;
pub use report::set_project;
pub use store::{fsck, gc};
pub(crate) use tree::pick as pick_in_tree;
pub use workspace::{diff, restore, undo, RestoreArgs};

pub fn sessions(
    command: Option<SessionsCommand>,
    json_flag: bool,
    remote_name: Option<String>,
) -> Result<u8, Exit> {
    match (&command, remote_name) {
        (None | Some(SessionsCommand::List { .. }), Some(name)) => {
            let json = json_flag || matches!(command, Some(SessionsCommand::List { json: true }));
            return remote::list_sessions(&name, json);
        }
        (Some(SessionsCommand::Delete { session, .. }), Some(name)) => {
            let store = Store::open(&report::project()?)?;
            return remote::delete_session(&store, &name, session);
        }
        (_, None) => {}
        (_, Some(_)) => return Err(Usage::RemoteNotHere.into()),
    }
    let project = report::project()?;
    let store = Store::open(&project)?;
    match command.unwrap_or(SessionsCommand::List { json: json_flag }) {
        SessionsCommand::List { json } => sessions::list(&store, &project, json || json_flag),
        SessionsCommand::Log { session, all, json } => {
            let session = named_or_newest(&store, &project, session)?;
            sessions::log(&store, &project, &session, all, json || json_flag)
        }
        SessionsCommand::Tree { session, json } => {
            let session = named_or_newest(&store, &project, session)?;
            tree::tree(&store, &project, &session, json || json_flag)
        }
        SessionsCommand::Show { session, at, json } => {
            let session = named_or_newest(&store, &project, session)?;
            show::show(&store, &project, &session, at.as_deref(), json || json_flag)
        }
        SessionsCommand::Delete {
            session,
            remote: Some(name),
            ..
        } => remote::delete_session(&store, &name, &session),
        SessionsCommand::Delete {
            session, now, yes, ..
        } => sessions::delete(&store, &project, &session, now, yes),
        SessionsCommand::Undelete { session } => sessions::undelete(&store, &session),
        SessionsCommand::Trash { json } => sessions::trash(&store, json || json_flag),
        SessionsCommand::Pin { session } => sessions::pin(&store, &project, &session, true),
        SessionsCommand::Unpin { session } => sessions::pin(&store, &project, &session, false),
        SessionsCommand::Rename { session, name } => {
            sessions::rename(&store, &project, &session, &name)
        }
        SessionsCommand::Adopt { sessions, all } => {
            sessions::adopt(&store, &project, &sessions, all)
        }
        SessionsCommand::Search(args) => search::search(&store, &args, json_flag),
        SessionsCommand::Scan { session, json } => {
            scan::scan(&store, &project, session.as_deref(), json || json_flag)
        }
        SessionsCommand::Purge { session, json } => {
            purge::purge(&store, &project, &session, json || json_flag)
        }
        SessionsCommand::Export(args) => match &args.bundle {
            Some(bundle) => {
                remote::export_bundle(&store, &project, &args.session, bundle, args.allow_secrets)
            }
            None => export::export(&store, &project, &args),
        },
        SessionsCommand::Import {
            file,
            from: Some(from),
        } => crate::import::import(&store, &project, from, &file),
        SessionsCommand::Import { file, from: None } => remote::import_bundle(&store, &file),
    }
}

/// The session named, or the one `hel undo` would choose when none is:
/// the project's own newest idle session of this directory (never a
/// shipped one).
fn named_or_newest(
    store: &Store,
    project: &std::path::Path,
    session: Option<String>,
) -> Result<String, Exit> {
    match session {
        Some(s) => Ok(s),
        None => Ok(hel_agent::default_session(store, project)?.to_string()),
    }
}
