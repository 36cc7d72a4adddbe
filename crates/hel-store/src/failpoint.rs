//! Failpoints are hel-fs's (see [`hel_fs::failpoint`]); hel-store's
//! `failpoints` feature turns them on.

pub(crate) use hel_fs::failpoint::{error, hit, kill};
