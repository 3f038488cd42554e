//! The simulated hardware: TLBs, CPUs, nodes and interrupt delivery costs.
pub mod tlb;
pub mod mmu;

/// Ask the host CPU to bring `r`'s cache line in (a hint: no effect on results, only on speed).
/// Used to hide the host cache miss of the next access's PTE behind the current one's work.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 never faults and has no architectural effect; `r` is a valid reference.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(r as *const T as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
