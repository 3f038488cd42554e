//! kernel/: processes and scheduling, locking, and time accounting by kernel function.
pub mod fork;
pub mod sched;
pub mod numa_balancing;
pub mod numa_tiering;
pub mod locking;
pub mod profile;
