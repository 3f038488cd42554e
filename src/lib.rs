//! mmsim: a deterministic simulator of the Linux memory-management subsystem on many-core,
//! multi-tier machines. See ARCHITECTURE.md for the codemap.
pub mod api;
pub mod arch;
pub mod bench;
pub mod block;
pub mod check;
pub mod compare;
pub mod config;
pub mod engine;
pub mod fuzz;
pub mod hw;
pub mod interrupt;
pub mod kernel;
pub mod mm;
pub mod output;
pub mod progress;
pub mod report;
pub mod reproduce;
pub mod run;
pub mod sim;
pub mod trace;
pub mod types;
pub mod validate;
pub mod workload;
