//! kernel/: processes and scheduling.
pub mod fork;
pub mod sched;
pub mod numa_balancing;
