//! End-to-end tests: one test binary (links once), one module per area.
//! Declared in crates/hel/Cargo.toml, so they run the hel binary that
//! very build produced.

mod common;

mod t_bounds;
mod t_compaction;
mod t_compat_wire;
mod t_config;
mod t_confirm;
mod t_core;
mod t_credentials;
mod t_defaults;
mod t_durability;
mod t_evals;
mod t_format;
mod t_hooks;
mod t_hostile_store;
mod t_html;
mod t_import;
mod t_mcp;
mod t_names;
mod t_oplog;
mod t_output;
mod t_parse_bounds;
mod t_project;
mod t_prompt;
mod t_purge;
mod t_races;
mod t_remote;
mod t_replay;
mod t_resume;
mod t_rounds;
mod t_sandbox;
mod t_secrets;
mod t_secrets_corpus;
mod t_secrets_exits;
mod t_sessions;
mod t_small;
mod t_snapshot_secrets;
mod t_stream;
mod t_structure;
mod t_tools;
mod t_transcripts;
mod t_trash;
mod t_tree;
mod t_undo_attribution;
mod t_undo_safety;
mod t_view;
mod t_workspace;
