//! Sessions: which one a run works on (new, resumed, forked), finding one
//! from a command-line argument, and saving checkpoints to it.

mod open;
mod record;
mod resolve;
mod rounds;
mod save;

pub use open::Start;
pub(crate) use open::{open, took_over};
pub(crate) use record::{resumed, Resumed};
pub(crate) use resolve::verify;
pub use resolve::{
    check_session_arg, default_session, recorded_cwd, resolve, resolve_checkpoint, SessionError,
};
pub(crate) use rounds::{carried, RoundLog};
pub(crate) use rounds::{ENDED_NOT_RUN, ENDED_RUNNING};
pub(crate) use save::Session;
