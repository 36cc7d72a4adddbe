//! The store commands: `sessions` (list, log, show, delete, rename, search,
//! export), `gc`, `fsck`,
//! and the workspace commands `undo`, `restore`, `diff`. They need no key
//! and no provider, and print their report on stdout.

mod export;
mod pager;
mod report;
mod search;
mod sessions;
mod show;
mod store;
mod transcript;
mod workspace;

use hel_store::Store;

use crate::cli::SessionsCommand;
use crate::exit::Exit;

pub use store::{fsck, gc};
pub use workspace::{diff, restore, undo};

pub fn sessions(command: Option<SessionsCommand>, json_flag: bool) -> Result<u8, Exit> {
    let project = report::project()?;
    let store = Store::open(&project)?;
    match command.unwrap_or(SessionsCommand::List { json: json_flag }) {
        SessionsCommand::List { json } => sessions::list(&store, json || json_flag),
        SessionsCommand::Log { session, all, json } => {
            sessions::log(&store, &project, &session, all, json || json_flag)
        }
        SessionsCommand::Show { session, at, json } => {
            show::show(&store, &project, &session, at.as_deref(), json || json_flag)
        }
        SessionsCommand::Delete { session } => sessions::delete(&store, &project, &session),
        SessionsCommand::Rename { session, name } => {
            sessions::rename(&store, &project, &session, &name)
        }
        SessionsCommand::Search(args) => search::search(&store, &args, json_flag),
        SessionsCommand::Export(args) => export::export(&store, &project, &args),
    }
}
