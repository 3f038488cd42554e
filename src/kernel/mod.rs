//! kernel/: processes and scheduling.
pub mod fork;
pub mod sched;
