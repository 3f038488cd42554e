//! x86-64.
pub mod mm;
