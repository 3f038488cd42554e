//! Event counters with the kernel's names (/proc/vmstat, include/linux/vm_event_item.h).
//!
//! The TLB counters exist in Linux only with CONFIG_DEBUG_TLBFLUSH; the simulator always keeps them.

macro_rules! vm_events {
    ($($name:ident => $kname:literal),* $(,)?) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        #[repr(usize)]
        pub enum VmEvent { $($name),* }
        impl VmEvent {
            pub const ALL: &'static [VmEvent] = &[$(VmEvent::$name),*];
            pub fn kernel_name(self) -> &'static str {
                match self { $(VmEvent::$name => $kname),* }
            }
        }
        pub const NR_VM_EVENTS: usize = [$($kname),*].len();
    };
}

vm_events! {
    PGFAULT => "pgfault",
    PGMAJFAULT => "pgmajfault",
    PGALLOC => "pgalloc_normal",
    PGFREE => "pgfree",
    // Counted in 4 KiB pages by the block layer's submit (src/block/mod.rs) and the swap write;
    // reported in kB (`VmEvent::kernel_value`), as /proc/vmstat prints them.
    PGPGIN => "pgpgin",
    PGPGOUT => "pgpgout",
    PGSCAN_DIRECT => "pgscan_direct",
    PGSTEAL_DIRECT => "pgsteal_direct",
    COW_FAULT => "cow_fault",
    NR_TLB_REMOTE_FLUSH => "nr_tlb_remote_flush",
    NR_TLB_REMOTE_FLUSH_RECEIVED => "nr_tlb_remote_flush_received",
    NR_TLB_LOCAL_FLUSH_ALL => "nr_tlb_local_flush_all",
    NR_TLB_LOCAL_FLUSH_ONE => "nr_tlb_local_flush_one",
    // VMA lookup (CONFIG_DEBUG_VM_VMACACHE).
    VMACACHE_FIND_CALLS => "vmacache_find_calls",
    VMACACHE_FIND_HITS => "vmacache_find_hits",
    // HugeTLB.
    HTLB_BUDDY_ALLOC_SUCCESS => "htlb_buddy_alloc_success",
    HTLB_BUDDY_ALLOC_FAIL => "htlb_buddy_alloc_fail",
    // Reclaim.
    PGSCAN_KSWAPD => "pgscan_kswapd",
    PGSTEAL_KSWAPD => "pgsteal_kswapd",
    PGACTIVATE => "pgactivate",
    PGDEACTIVATE => "pgdeactivate",
    PGREFILL => "pgrefill",
    PGROTATED => "pgrotated",
    KSWAPD_WAKEUPS => "kswapd_wakeup",
    PAGEOUTRUN => "pageoutrun",
    ALLOCSTALL => "allocstall_normal",
    OOM_KILL => "oom_kill",
    // Swap.
    PSWPIN => "pswpin",
    PSWPOUT => "pswpout",
    // Migration.
    PGMIGRATE_SUCCESS => "pgmigrate_success",
    PGMIGRATE_FAIL => "pgmigrate_fail",
    // NUMA balancing (CONFIG_NUMA_BALANCING).
    NUMA_PTE_UPDATES => "numa_pte_updates",
    NUMA_HUGE_PTE_UPDATES => "numa_huge_pte_updates",
    NUMA_HINT_FAULTS => "numa_hint_faults",
    NUMA_HINT_FAULTS_LOCAL => "numa_hint_faults_local",
    NUMA_PAGES_MIGRATED => "numa_pages_migrated",
    // Not a kernel counter (5.16+ has the mm_vmscan_throttled tracepoint instead): direct
    // reclaimers put to sleep by too_many_isolated().
    RECLAIM_THROTTLE_ISOLATED => "mmsim_reclaim_throttle_isolated",
    // Not a kernel counter either: kswapd stalls on folios cycling through the LRU under
    // writeback (congestion_wait() before 5.16, reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK) from
    // 5.16; mm/page_writeback.rs).
    RECLAIM_THROTTLE_WRITEBACK => "mmsim_reclaim_throttle_writeback",
    // Memory tiering (docs/tiering.md): node counters in Linux (vmstat's node_stat items),
    // summed over nodes as /proc/vmstat shows them. The report leaves them out on machines
    // without a memory-only node (`VmEvent::is_tiering`), so their output is unchanged.
    PGDEMOTE_KSWAPD => "pgdemote_kswapd",
    PGDEMOTE_DIRECT => "pgdemote_direct",
    PGPROMOTE_SUCCESS => "pgpromote_success",
    PGPROMOTE_CANDIDATE => "pgpromote_candidate",
    // Workingset refault detection (mm/workingset.rs): node counters, summed over nodes. File
    // refaults only (anon refaults from swap are not detected by the model).
    WORKINGSET_REFAULT_FILE => "workingset_refault_file",
    WORKINGSET_ACTIVATE_FILE => "workingset_activate_file",
    WORKINGSET_RESTORE_FILE => "workingset_restore_file",
    // Writeback (mm/page_writeback.rs): node counters, summed over nodes.
    NR_DIRTIED => "nr_dirtied",
    NR_WRITTEN => "nr_written",
    NR_VMSCAN_WRITE => "nr_vmscan_write",
    NR_VMSCAN_IMMEDIATE => "nr_vmscan_immediate_reclaim",
    // Not a kernel counter: drain_all_pages() calls after an allocation failed following a
    // direct reclaim that made progress (mm/page_alloc.rs), including those that found a
    // drain in progress and returned (4.11+).
    DRAIN_ALL_PAGES => "mmsim_drain_all_pages",
    // throttle_direct_reclaim() (3.6+): a direct reclaimer found its node's free pages at or
    // below half its min watermark and waited for kswapd (mm/vmscan.rs).
    PGSCAN_DIRECT_THROTTLE => "pgscan_direct_throttle",
    // Add further counters at the end, each with its kernel name.
}

impl VmEvent {
    /// The memory-tiering counters (shown only on machines with a memory-only node).
    pub fn is_tiering(self) -> bool {
        matches!(self, VmEvent::PGDEMOTE_KSWAPD | VmEvent::PGDEMOTE_DIRECT | VmEvent::PGPROMOTE_SUCCESS | VmEvent::PGPROMOTE_CANDIDATE)
    }

    /// A count as /proc/vmstat prints it: pgpgin and pgpgout in kB (the kernel counts sectors
    /// in `submit_bio()` and `vmstat_start()` halves them; the model counts 4 KiB pages), the
    /// others as they are.
    pub fn kernel_value(self, count: u64) -> u64 {
        match self {
            VmEvent::PGPGIN | VmEvent::PGPGOUT => count * 4,
            _ => count,
        }
    }
}

/// Global event counts (the sum of Linux's per-CPU vm_event_states).
#[derive(Clone, Debug)]
pub struct VmStat {
    pub ev: [u64; NR_VM_EVENTS],
}

impl Default for VmStat {
    fn default() -> Self {
        VmStat { ev: [0; NR_VM_EVENTS] }
    }
}

impl VmStat {
    #[inline]
    pub fn count(&mut self, e: VmEvent) {
        self.ev[e as usize] += 1;
    }
    #[inline]
    pub fn add(&mut self, e: VmEvent, n: u64) {
        self.ev[e as usize] += n;
    }
    pub fn get(&self, e: VmEvent) -> u64 {
        self.ev[e as usize]
    }
}
