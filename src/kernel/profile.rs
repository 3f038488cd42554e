//! Time accounting by kernel function: what `perf record -e cpu-clock -a` + `perf report
//! --children` would show for the simulated kernel.
//!
//! Modelled functions bracket their work with `kfn_enter`/`kfn_exit`; every nanosecond of
//! system time charged while a function is on the CPU's stack counts as that function's
//! "children" time, and as "self" time of the innermost one. Interrupt time (IPI handlers) is
//! charged to `sysvec_call_function` → `flush_tlb_func`. User time is one line, `[.] user`.
//! Percentages are of busy time (user + system + irq over all CPUs), as a cycles profile does
//! not sample halted CPUs.
//!
//! Departure: names are the 6.18 kernel's (shrink_folio_list rather than 4.2's
//! shrink_page_list); the stack is the modelled call path, not a sampled one.

use crate::sim::Sim;
use crate::types::*;

/// Kernel functions the model charges time to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KFn {
    Other = 0,
    DoSyscall64,
    HandleMmFault,
    FilemapFault,
    PageCacheRa,
    DoAnonymousPage,
    DoWpPage,
    ClearPage,
    CopyPage,
    RmqueueBulk,
    FreePcppagesBulk,
    FolioBatchMoveLru,
    Kswapd,
    WbWorkfn,
    TryToFreePages,
    ShrinkActiveList,
    ShrinkInactiveList,
    ShrinkFolioList,
    FolioReferenced,
    TryToUnmap,
    RemoveMapping,
    TryToUnmapFlush,
    FlushTlbMmRange,
    SmpCallFunctionManyCond,
    SysvecCallFunction,
    FlushTlbFunc,
    NativeQueuedSpinLockSlowpath,
    RwsemSlowpath,
    ZapPteRange,
    MigratePages,
    TaskNumaWork,
    TryToMigrate,
    DoNumaPage,
    LufTakeoff,
}

pub const NKFN: usize = KFn::LufTakeoff as usize + 1;

impl KFn {
    pub const ALL: [KFn; NKFN] = [
        KFn::Other,
        KFn::DoSyscall64,
        KFn::HandleMmFault,
        KFn::FilemapFault,
        KFn::PageCacheRa,
        KFn::DoAnonymousPage,
        KFn::DoWpPage,
        KFn::ClearPage,
        KFn::CopyPage,
        KFn::RmqueueBulk,
        KFn::FreePcppagesBulk,
        KFn::FolioBatchMoveLru,
        KFn::Kswapd,
        KFn::WbWorkfn,
        KFn::TryToFreePages,
        KFn::ShrinkActiveList,
        KFn::ShrinkInactiveList,
        KFn::ShrinkFolioList,
        KFn::FolioReferenced,
        KFn::TryToUnmap,
        KFn::RemoveMapping,
        KFn::TryToUnmapFlush,
        KFn::FlushTlbMmRange,
        KFn::SmpCallFunctionManyCond,
        KFn::SysvecCallFunction,
        KFn::FlushTlbFunc,
        KFn::NativeQueuedSpinLockSlowpath,
        KFn::RwsemSlowpath,
        KFn::ZapPteRange,
        KFn::MigratePages,
        KFn::TaskNumaWork,
        KFn::TryToMigrate,
        KFn::DoNumaPage,
        KFn::LufTakeoff,
    ];

    pub fn symbol(self) -> &'static str {
        match self {
            KFn::Other => "[other kernel]",
            KFn::DoSyscall64 => "do_syscall_64",
            KFn::HandleMmFault => "handle_mm_fault",
            KFn::FilemapFault => "filemap_fault",
            KFn::PageCacheRa => "page_cache_ra_unbounded",
            KFn::DoAnonymousPage => "do_anonymous_page",
            KFn::DoWpPage => "do_wp_page",
            KFn::ClearPage => "clear_page_erms",
            KFn::CopyPage => "copy_page",
            KFn::RmqueueBulk => "rmqueue_bulk",
            KFn::FreePcppagesBulk => "free_pcppages_bulk",
            KFn::FolioBatchMoveLru => "folio_batch_move_lru",
            KFn::Kswapd => "kswapd",
            KFn::WbWorkfn => "wb_workfn",
            KFn::TryToFreePages => "try_to_free_pages",
            KFn::ShrinkActiveList => "shrink_active_list",
            KFn::ShrinkInactiveList => "shrink_inactive_list",
            KFn::ShrinkFolioList => "shrink_folio_list",
            KFn::FolioReferenced => "folio_referenced",
            KFn::TryToUnmap => "try_to_unmap",
            KFn::RemoveMapping => "__remove_mapping",
            KFn::TryToUnmapFlush => "try_to_unmap_flush",
            KFn::FlushTlbMmRange => "flush_tlb_mm_range",
            KFn::SmpCallFunctionManyCond => "smp_call_function_many_cond",
            KFn::SysvecCallFunction => "sysvec_call_function",
            KFn::FlushTlbFunc => "flush_tlb_func",
            KFn::NativeQueuedSpinLockSlowpath => "native_queued_spin_lock_slowpath",
            KFn::RwsemSlowpath => "rwsem_down_write_slowpath",
            KFn::ZapPteRange => "zap_pte_range",
            KFn::MigratePages => "migrate_pages",
            KFn::TaskNumaWork => "task_numa_work",
            // Before 5.14 migration unmapped through try_to_unmap(TTU_MIGRATION).
            KFn::TryToMigrate => "try_to_migrate",
            KFn::DoNumaPage => "do_numa_page",
            KFn::LufTakeoff => "luf_takeoff_end",
        }
    }
}

/// Per-function times (ns) and the per-CPU stacks of functions being run.
#[derive(Clone, Debug)]
pub struct Profile {
    stacks: Vec<Vec<KFn>>,
    pub self_ns: [Ns; NKFN],
    pub children_ns: [Ns; NKFN],
    /// While set, charges are not recorded (a handler run only to learn its cost).
    pub muted: bool,
}

impl Profile {
    pub fn new(ncpus: usize) -> Profile {
        Profile { stacks: vec![Vec::with_capacity(8); ncpus], self_ns: [0; NKFN], children_ns: [0; NKFN], muted: false }
    }

    /// Attribute `ns` of system time on `cpu`.
    #[inline]
    pub fn charge(&mut self, cpu: CpuId, ns: Ns) {
        if self.muted {
            return;
        }
        let st = &self.stacks[cpu.0 as usize];
        match st.last() {
            None => {
                self.self_ns[0] += ns;
                self.children_ns[0] += ns;
            }
            Some(&top) => {
                self.self_ns[top as usize] += ns;
                for (i, &f) in st.iter().enumerate() {
                    if !st[..i].contains(&f) {
                        self.children_ns[f as usize] += ns;
                    }
                }
            }
        }
    }

    /// Interrupt time: an IPI handler.
    pub fn charge_irq(&mut self, ns: Ns) {
        self.self_ns[KFn::FlushTlbFunc as usize] += ns;
        self.children_ns[KFn::FlushTlbFunc as usize] += ns;
        self.children_ns[KFn::SysvecCallFunction as usize] += ns;
    }

    /// Forget any stack left by an aborted path (called at the start of a step).
    pub fn reset_stack(&mut self, cpu: CpuId) {
        self.stacks[cpu.0 as usize].clear();
    }
}

impl Sim {
    #[inline]
    pub fn kfn_enter(&mut self, cpu: CpuId, f: KFn) {
        self.prof.stacks[cpu.0 as usize].push(f);
    }
    #[inline]
    pub fn kfn_exit(&mut self, cpu: CpuId) {
        self.prof.stacks[cpu.0 as usize].pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_include_callees_once() {
        let mut p = Profile::new(1);
        let c = CpuId(0);
        p.stacks[0].push(KFn::ShrinkFolioList);
        p.charge(c, 10);
        p.stacks[0].push(KFn::TryToUnmap);
        p.stacks[0].push(KFn::NativeQueuedSpinLockSlowpath);
        p.charge(c, 5);
        assert_eq!(p.self_ns[KFn::ShrinkFolioList as usize], 10);
        assert_eq!(p.children_ns[KFn::ShrinkFolioList as usize], 15);
        assert_eq!(p.children_ns[KFn::TryToUnmap as usize], 5);
        assert_eq!(p.self_ns[KFn::NativeQueuedSpinLockSlowpath as usize], 5);
        assert_eq!(p.self_ns[KFn::TryToUnmap as usize], 0);
    }
}
