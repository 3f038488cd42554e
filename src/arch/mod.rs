//! Architecture-specific kernel code (only x86 is modelled).
pub mod x86;
