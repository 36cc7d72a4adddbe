//! hel: a coding agent for the terminal. The binary (`main.rs`) only parses
//! flags and reports; everything else is here.

pub mod agent;
pub mod cli;
pub mod client;
pub mod commands;
pub mod compact;
pub mod config;
pub mod exit;
pub mod instance;
pub mod meter;
pub mod record;
pub mod run;
pub mod session;
pub mod spill;
pub mod system;
pub mod tools;
