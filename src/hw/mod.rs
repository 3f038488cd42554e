//! The simulated hardware: TLBs, CPUs, nodes and interrupt delivery costs.
pub mod tlb;
pub mod mmu;
