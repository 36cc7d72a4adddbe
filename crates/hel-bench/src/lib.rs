//! hel-bench: hel-store against SQLite, an append-only JSONL log and a
//! whole-file snapshot store, driven through the same seeded workloads in
//! one process run; and workspace snapshots against git ([`workspace`]).
//! See README, "Benchmarks", and tools/bench/README.md.

pub mod carry;
pub mod chart;
pub mod measure;
pub mod packs;
pub mod run;
pub mod stores;
pub mod targets;
pub mod workload;
pub mod workspace;
