//! End-to-end tests: one test binary (links once), one module per area.

mod t_compaction;
mod t_core;
mod t_evals;
mod t_sandbox;
mod t_sessions;
mod t_tools;
