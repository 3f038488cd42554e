//! arch/x86/mm.
pub mod tlb;
pub mod invlpgb;
pub mod rar;
