//! hel-bench: hel-store against a whole-file snapshot store and an
//! append-only JSONL log, driven through the same seeded workloads in one
//! process run. See README, "Benchmarks".

pub mod carry;
pub mod chart;
pub mod run;
pub mod stores;
pub mod workload;
