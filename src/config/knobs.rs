//! Every scenario knob, declared once: key, type and range, kernel default, unit, description and source.
//!
//! This one table feeds the scenario parser, `--set`, `mmsim knobs` (the `--help` reference) and
//! docs/knobs.md. Units go last in names (`ipi_deliver_ns`). Cost parameters carry the source of
//! their value; every cost is the same for BEFORE and AFTER runs of an experiment, because nothing
//! but a scenario file or `--set` can change it.

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Int { min: i64, max: i64 },
    Float { min: f64, max: f64 },
    Bool,
    Enum(&'static [&'static str]),
    /// Free text (a path).
    Str,
}

#[derive(Clone, Copy, Debug)]
pub struct Knob {
    pub key: &'static str,
    pub kind: Kind,
    /// The default, written as it would be in TOML.
    pub default: &'static str,
    pub unit: &'static str,
    pub doc: &'static str,
    /// Where the default comes from (kernel source, datasheet, paper, or our own measurement).
    pub source: &'static str,
}

pub const fn int(min: i64, max: i64) -> Kind {
    Kind::Int { min, max }
}
pub const fn float(min: f64, max: f64) -> Kind {
    Kind::Float { min, max }
}

pub const PRESETS: &[&str] = &["linux-4.2", "linux-4.3", "linux-4.14", "linux-5.12", "linux-5.13", "linux-6.1", "linux-6.2", "linux-6.3", "linux-6.4", "linux-6.9", "linux-6.9+luf-v10", "linux-6.12", "linux-6.14", "linux-6.14+luf-v12", "linux-6.18"];
pub const PATTERNS: &[&str] = &["uniform", "normal", "sequential"];
pub const WORKLOADS: &[&str] = &["ops", "synthetic", "boot", "kbuild", "database", "ebizzy", "trace", "llm"];

macro_rules! knob {
    ($key:literal, $kind:expr, $default:literal, $unit:literal, $doc:literal, $source:literal) => {
        $crate::config::knobs::Knob { key: $key, kind: $kind, default: $default, unit: $unit, doc: $doc, source: $source }
    };
}
#[allow(unused_imports)]
pub(crate) use knob;

pub static KNOBS: &[Knob] = &[
    // ---- run ----
    knob!("run.seed", int(0, i64::MAX), "1", "", "Seed of the simulator's PRNG; printed with every result.", "-"),
    knob!("run.max_sim_ms", int(1, 1 << 40), "60000", "ms", "Stop the run when simulated time passes this (a liveness bound).", "-"),
    knob!("run.profile_delay_ms", float(0.0, 1e12), "0", "ms", "Start the profile (--only profile, the JSON's profile) this far into the run, as perf record -D does: lkp-tests' perf-profile monitor records from half the job's runtime. 0: from the start.", "lkp-tests monitors/no-stdout/perf-profile"),
    knob!("run.profile_duration_ms", float(0.0, 1e12), "0", "ms", "Length of the profile's window from run.profile_delay_ms (lkp-tests' perf-profile: 10 s). 0: to the end of the run.", "lkp-tests monitors/no-stdout/perf-profile"),
    // ---- machine ----
    knob!("machine.cpus", int(1, 4096), "2", "", "Online CPUs.", "-"),
    knob!("machine.sockets", int(1, 64), "1", "", "Sockets; CPUs and nodes are split evenly. A cross-socket IPI pays cost.ipi_cross_socket_ns more.", "-"),
    knob!("machine.nodes", int(1, 64), "1", "", "NUMA nodes with CPUs (CPUs are split evenly over them).", "-"),
    knob!("machine.mem_per_node_mib", int(1, 1 << 30), "1024", "MiB", "Memory on each node with CPUs.", "-"),
    knob!("machine.cpuless_nodes", int(0, 64), "0", "", "Memory-only nodes (CXL, PMEM) without CPUs.", "-"),
    knob!("machine.cpuless_mem_mib", int(0, 1 << 30), "0", "MiB", "Memory on each memory-only node.", "-"),
    knob!("machine.swap_mib", int(0, 1 << 30), "0", "MiB", "Size of the swap device; 0 = no swap (anon pages are never reclaimed). Writes and reads cost cost.block_write_4k_ns / block_read_4k_ns.", "-"),
    knob!("machine.local_latency_ns", float(1.0, 1e6), "90", "ns", "Load latency to memory on the CPU's own node.", "Intel MLC idle latency on Skylake-SP/Ice Lake servers: 80-100 ns"),
    knob!("machine.remote_latency_ns", float(1.0, 1e6), "140", "ns", "Load latency to another node with CPUs.", "Intel MLC on 2-socket Xeon: 130-150 ns"),
    knob!("machine.cpuless_latency_ns", float(1.0, 1e6), "250", "ns", "Load latency to a memory-only (CXL) node.", "CXL type-3 expanders: 170-250 ns (Sun et al., MICRO'23)"),
    knob!("machine.local_bandwidth_gbps", float(0.1, 1e4), "20", "GB/s", "Per-node memory bandwidth available to page copies and clears.", "single-thread memcpy on DDR4/DDR5 servers: 10-25 GB/s"),
    knob!("machine.remote_bandwidth_gbps", float(0.1, 1e4), "12", "GB/s", "Bandwidth of a page copy across nodes.", "UPI/Infinity Fabric single-stream copy"),
    knob!("machine.cpuless_bandwidth_gbps", float(0.1, 1e4), "8", "GB/s", "Bandwidth to a memory-only (CXL) node.", "CXL x8 type-3 expander, single stream (Sun et al., MICRO'23)"),
    knob!("machine.tlb.l1d_4k_entries", int(1, 1 << 16), "64", "", "L1 dTLB entries for 4 KiB pages.", "Intel Skylake..Ice Lake: 64, 4-way; AMD Zen 2/3: 64 fully assoc."),
    knob!("machine.tlb.l1d_4k_ways", int(1, 1 << 16), "4", "", "L1 dTLB associativity (4 KiB).", "Intel SDM / optimisation manual"),
    knob!("machine.tlb.l1d_2m_entries", int(1, 1 << 16), "32", "", "L1 dTLB entries for 2 MiB pages.", "Intel Skylake: 32, 4-way"),
    knob!("machine.tlb.l1d_2m_ways", int(1, 1 << 16), "4", "", "L1 dTLB associativity (2 MiB).", "Intel Skylake"),
    knob!("machine.tlb.l1i_4k_entries", int(1, 1 << 16), "128", "", "L1 iTLB entries for 4 KiB pages.", "Intel Skylake: 128, 8-way"),
    knob!("machine.tlb.l1i_4k_ways", int(1, 1 << 16), "8", "", "L1 iTLB associativity (4 KiB).", "Intel Skylake"),
    knob!("machine.tlb.l1i_2m_entries", int(1, 1 << 16), "8", "", "L1 iTLB entries for 2 MiB pages.", "Intel Skylake: 8, fully assoc."),
    knob!("machine.tlb.l1i_2m_ways", int(1, 1 << 16), "8", "", "L1 iTLB associativity (2 MiB).", "Intel Skylake"),
    knob!("machine.tlb.stlb_entries", int(1, 1 << 20), "1536", "", "Shared second-level TLB entries (4 KiB and 2 MiB).", "Intel Skylake: 1536, 12-way"),
    knob!("machine.tlb.stlb_ways", int(1, 1 << 16), "12", "", "STLB associativity.", "Intel Skylake"),
    knob!("machine.tlb.pcid", Kind::Bool, "true", "", "PCID/ASID tagging: with it a CR3 switch keeps other address spaces' entries.", "X86_FEATURE_PCID, used by Linux since 4.14"),
    // ---- kernel ----
    knob!("kernel.preset", Kind::Enum(PRESETS), "\"linux-6.18\"", "", "Kernel version whose behaviour and defaults are modelled; per-mechanism switches below override it.", "-"),
    knob!("kernel.tlb_single_page_flush_ceiling", int(0, 1 << 20), "33", "pages", "Above this many pages flush_tlb_mm_range() does a full flush instead of INVLPG per page.", "arch/x86/mm/tlb.c (debugfs x86/tlb_single_page_flush_ceiling)"),
    knob!("kernel.lazy_tlb", Kind::Bool, "true", "", "Idle and kernel threads borrow the previous mm (lazy TLB) and are skipped by shootdowns.", "arch/x86/mm/tlb.c enter_lazy_tlb(), should_flush_tlb()"),
    knob!("kernel.mm_cpumask_trim_ms", int(0, 1 << 30), "-1", "ms", "Lazy mm_cpumask: CPUs stay in the mask after switching away and are trimmed by at most one flush IPI per this interval; 0 clears the bit at switch_mm (before 6.12); -1 takes the preset's value.", "arch/x86/mm/tlb.c should_trim_cpumask() (6.12+: HZ)"),
    knob!("kernel.batched_unmap_flush", Kind::Enum(&["auto", "on", "off"]), "\"auto\"", "", "Seed 002 (CONFIG_ARCH_WANT_BATCHED_UNMAP_TLB_FLUSH): reclaim unmaps with TTU_BATCH_FLUSH and sends one full-flush IPI per CPU per batch instead of ptep_clear_flush per page; auto = the preset's (4.3+).", "mm/rmap.c try_to_unmap_flush(), commit 72b252aed506"),
    knob!("kernel.migrate_batch_flush", Kind::Enum(&["auto", "on", "off"]), "\"auto\"", "", "migrate_pages_batch(): unmap up to 512 pages with TTU_BATCH_FLUSH and flush once before copying, instead of ptep_clear_flush per PTE; auto = the preset's (6.3+).", "mm/migrate.c, commit 7e12beb8ca2a"),
    knob!("kernel.pt_reclaim", Kind::Enum(&["auto", "on", "off"]), "\"auto\"", "", "CONFIG_PT_RECLAIM: MADV_DONTNEED frees PTE tables it emptied whole (freed_tables, so lazy CPUs are IPI'd); auto = the preset's (6.14+).", "mm/pt_reclaim.c, zap_details.reclaim_pt"),
    knob!("kernel.lock_model", Kind::Bool, "true", "", "Model lock contention (LRU lock, zone->lock, i_pages, i_mmap_rwsem, anon_vma, PTE locks, mmap_lock) and interrupts-off sections that delay IPIs (docs/locking.md). Off: CPUs are coupled only by IPIs.", "kernel/locking/qspinlock.c, kernel/locking/rwsem.c"),
    knob!("kernel.lock_grant", Kind::Enum(&["fifo", "wait-held", "gap-fit"]), "\"fifo\"", "", "Not a kernel knob: how the lock model grants a request whose CPU lags behind holds already booked by CPUs that ran ahead in their steps. fifo: after the holds requested before it (a later-requested hold may overlap it: two holders); wait-held: also not while such a hold is in progress (fewer overlaps); gap-fit: in the first gap its whole section fits (exclusive, but shorter gaps stay idle, overstating waits). The three bracket an exclusive FIFO lock (docs/reclaim.md, session 34).", "a modelling choice: docs/locking.md, Calendar"),
    knob!("kernel.pcp_batch_cap_kib", int(0, 1 << 20), "-1", "KiB", "Cap of zone_batchsize(): a zone's pcp batch is a thousandth of the zone, at most this much, a quarter of it rounded down to 2^n - 1 (512 KiB: batch 31 on large zones; 1024: 63; 2048: 127); before 5.14 pcp->high is 6 x batch. -1 takes the preset's: 512 before 4.19, 1024 since.", "mm/page_alloc.c zone_batchsize(); d8a759b57035 'mm, page_alloc: double zone's batchsize' (4.19)"),
    knob!("vm.min_free_kbytes", int(-1, 1 << 40), "-1", "KiB", "Reserve below which only atomic/reclaim allocations succeed (WMARK_MIN); -1 = the kernel's default, int_sqrt(lowmem_kbytes * 16) clamped to [128, 262144].", "mm/page_alloc.c calculate_min_free_kbytes()"),
    knob!("vm.read_ahead_kb", int(0, 1 << 20), "128", "KiB", "Readahead window of the file's device (/sys/block/DEV/queue/read_ahead_kb): a page-cache miss in a mapping reads this much around the fault, and a fault at the window's PG_readahead marker reads the next window (ramping up to this size); 0 = off (every miss is one 4 KiB read).", "mm/readahead.c, mm/filemap.c do_sync_mmap_readahead(); VM_READAHEAD_PAGES = 128 KiB"),
    knob!("vm.dirty_background_ratio", int(0, 100), "10", "%", "Dirty page-cache pages, as a share of dirtyable memory (free pages plus file LRU pages), above which the flusher writes in the background until below (mm/page_writeback.rs). Writers are not throttled at vm.dirty_ratio (not modelled).", "Documentation/admin-guide/sysctl/vm.rst; mm/page-writeback.c domain_dirty_limits(), global_dirtyable_memory()"),
    knob!("vm.dirty_expire_centisecs", int(1, 1 << 31), "3000", "1/100 s", "Age at which a dirty page-cache page is written by the flusher's periodic writeback.", "Documentation/admin-guide/sysctl/vm.rst; fs/fs-writeback.c wb_check_old_data_flush()"),
    knob!("vm.dirty_writeback_centisecs", int(1, 1 << 31), "500", "1/100 s", "Interval of the flusher's periodic writeback while dirty pages remain (0, which turns it off in Linux, is not accepted).", "Documentation/admin-guide/sysctl/vm.rst; fs/fs-writeback.c wb_wakeup_delayed()"),
    knob!("vm.watermark_scale_factor", int(1, 3000), "10", "1/10000", "Distance between the min, low and high watermarks as a fraction of the zone (kswapd wakes below low and sleeps above high).", "Documentation/admin-guide/sysctl/vm.rst"),
    knob!("kernel.hz", int(10, 10000), "250", "Hz", "Scheduler tick rate (CONFIG_HZ); the time slice is one tick for tasks sharing a CPU.", "CONFIG_HZ_250 (Debian/Ubuntu default)"),
    knob!("kernel.sched_base_slice_ns", int(1000, 1 << 40), "750000", "ns", "EEVDF base slice: a task woken onto a busy CPU runs once the current task has had this long.", "kernel/sched/fair.c sysctl_sched_base_slice (0.75 ms)"),
    knob!("kernel.mmu_gather_batch_pages", int(1, 1 << 24), "9678", "pages", "Pages an mmu_gather collects before it must flush and free mid-unmap (MAX_GATHER_BATCH_COUNT * MAX_GATHER_BATCH).", "mm/mmu_gather.c: MMU_GATHER_BUNDLE 7 + 19 batches x 509 = 9678 pages (MAX_GATHER_BATCH_COUNT = 10000/510)"),
    // ---- cost model ----
    knob!("cost.access_ns", float(0.0, 1e6), "1", "ns", "A user load/store whose translation hits the L1 TLB (cache misses are not modelled; this is the TLB-hit baseline).", "L1D hit 4-5 cycles at ~3-4 GHz"),
    knob!("cost.stlb_hit_ns", float(0.0, 1e6), "3", "ns", "Extra latency when the L1 TLB misses and the STLB hits.", "Intel optimisation manual: STLB hit ~7-9 cycles"),
    knob!("cost.walk_base_ns", float(0.0, 1e6), "10", "ns", "Page walk with the upper levels in the paging-structure caches, excluding the leaf PTE load.", "Bhattacharjee & Martonosi; PWC hits ~3 x 5 cycles"),
    knob!("cost.walk_pte_miss_fraction", float(0.0, 1.0), "0.25", "", "Fraction of the leaf-PTE load that goes to memory (the rest hits the cache); the walk pays this times the latency of the node holding the PTE page.", "Barr et al. ISCA'10: most leaf PTE loads hit L2/LLC"),
    knob!("cost.syscall_ns", float(0.0, 1e9), "100", "ns", "Syscall entry+exit.", "lmbench null syscall ~50-100 ns with mitigations"),
    knob!("cost.fault_ns", float(0.0, 1e9), "500", "ns", "Page-fault entry, handle_mm_fault bookkeeping and exit, excluding page clear/copy/IO.", "perf of minor faults: 0.5-1 us per fault; `mmsim calibrate` fits it to a write-touch of 512 fresh anonymous pages mapped and unmapped at one address over and over (the warm regime; src/validate/fit.rs)"),
    knob!("cost.fault_after_syscall_ns", float(0.0, 1e9), "0", "ns", "Extra time of a page fault whose CPU's previous kernel entry was a system call rather than a fault (the fault path runs cold after the syscall path: on this host +320-530 ns whatever the syscall, getppid included, while a syscall after a fault costs nothing extra; docs/host-findings.md §8.9). 0 = not modelled, for machines where it was not measured.", "`mmsim calibrate`: a write-touch of 512 recycled anonymous pages with a getppid() before each, less the same loop without it and less getppid()"),
    knob!("cost.flush_multi_ns", float(0.0, 1e9), "0", "ns", "CPU time of a flush's trip through native_flush_tlb_multi() and smp_call_function_many_cond() on the initiator, whether or not it sends an IPI (the cpumask work, should_flush_tlb() reading the other CPUs' TLB state): paid whenever another CPU is in the mask, a lazy one included. On this host ~90-190 ns a flush (docs/host-findings.md §8.9); the model charges it once per call, not per CPU checked. 0 = not modelled, for machines where it was not measured.", "`mmsim calibrate`: mprotect RO/RW and a write of one page in a fresh process with a thread of the mm asleep on CPU 1 (lazy), less the same alone, over the flushes per iteration"),
    knob!("cost.pte_update_ns", float(0.0, 1e9), "10", "ns", "Changing one PTE in a kernel loop (zap, mprotect, fork copy), with its rmap/refcount bookkeeping.", "zap_pte_range/change_pte_range throughput ~100M PTEs/s; `mmsim calibrate` fits it to mprotect RO/RW of 512 populated pages, per call (src/validate/fit.rs)"),
    knob!("cost.page_alloc_ns", float(0.0, 1e9), "150", "ns", "Allocating or freeing one order-0 page through the pcp lists.", "page_alloc microbenchmarks: 100-200 ns per page; `mmsim calibrate` fits it to mmap + munmap of 512 written anonymous pages, per page, beyond the PTE clear (src/validate/fit.rs)"),
    knob!("cost.clear_page_bytes_per_ns", float(0.01, 1e4), "20", "B/ns", "clear_page speed (4096 B / this = ns per page clear).", "rep stosb ~20 GB/s"),
    knob!("cost.copy_page_bytes_per_ns", float(0.01, 1e4), "10", "B/ns", "copy_page speed within a node (COW, migration).", "rep movsb ~10 GB/s"),
    knob!("cost.vma_op_ns", float(0.0, 1e9), "500", "ns", "mmap/munmap/mprotect VMA-tree work (find, split, merge, insert) per syscall.", "lmbench mmap latency minus page work"),
    knob!("cost.mprotect_ns", float(0.0, 1e9), "500", "ns", "mprotect()'s VMA work (find_vma, split/merge checks, vma_set_page_prot) per call, excluding per-PTE work. Before this knob mprotect paid cost.vma_op_ns; mmap/munmap also search a gap and allocate/free a VMA, which mprotect of a whole VMA does not.", "default = cost.vma_op_ns's (no published figure apart); `mmsim calibrate` fits it: mprotect RO/RW of one page, per call, against the model's run of the same loop (src/validate/fit.rs)"),
    knob!("cost.madvise_ns", float(0.0, 1e9), "0", "ns", "madvise()'s fixed work per call beyond the syscall entry, excluding per-PTE and per-folio work: madvise_lock() (the per-VMA or mmap lock), the VMA walk, and for MADV_DONTNEED the mmu_gather's set-up and finish with nothing gathered. Charged to every advice the model implements (measured with MADV_DONTNEED).", "default 0 (not charged, as before this knob: no published figure); `mmsim calibrate` fits it: madvise(MADV_DONTNEED) of one untouched page between guard pages, per call, against the model's run of the same loop (src/validate/fit.rs); this host (Linux 6.18, 2026-11-27): see scenarios/profiles/host-kvm-2cpu.toml"),
    knob!("cost.file_rmap_ns", float(0.0, 1e9), "0", "ns", "Per page-cache page a process maps (a fault's folio, or one fault-around maps: filemap_map_pages()'s xarray walk, folio_try_get(), folio_add_file_rmap_ptes()) or a zap unmaps (folio_remove_rmap_ptes(), the reference dropped), beyond the PTE write (cost.pte_update_ns). Not charged to reclaim's and migration's unmap (cost.shrink_folio_ns's residual holds that work there).", "default 0 (not charged, as before this knob: no published figure); `mmsim calibrate` fits it: mmap, read-touch and munmap of 256 cached 4 KiB-folio pages of a file, per page, against the model's run of the same loop (src/validate/fit.rs)"),
    knob!("cost.fork_ns", float(0.0, 1e10), "30000", "ns", "fork()/clone of a process, excluding per-PTE copy work.", "lmbench fork ~30-100 us (mostly exec-less)"),
    knob!("cost.exit_ns", float(0.0, 1e10), "10000", "ns", "exit() of a process, excluding the unmap of its memory.", "lmbench"),
    knob!("cost.context_switch_ns", float(0.0, 1e9), "1000", "ns", "A context switch, excluding any TLB flush it triggers.", "lmbench lat_ctx 2p/0K: ~1-2 us"),
    knob!("cost.invlpg_ns", float(0.0, 1e9), "100", "ns", "One INVLPG (single-page invalidation).", "arch/x86/mm/tlb.c comment: 'Each single flush is about 100 ns'; `mmsim calibrate` fits it: mprotect RO/RW of 32 pages (32 single-page flushes) against the model's run of the same loop"),
    knob!("cost.flush_full_ns", float(0.0, 1e9), "200", "ns", "A full local TLB flush (CR3 write or INVPCID); refills are charged separately as misses.", "CR3 write ~ 100-300 cycles"),
    knob!("cost.ipi_send_ns", float(0.0, 1e9), "300", "ns", "Sending one IPI (x2APIC ICR write; includes smp_call_function bookkeeping per target).", "Amit et al., 'Don't shoot down TLB shootdowns!' EuroSys'20"),
    knob!("cost.ipi_deliver_ns", float(0.0, 1e9), "1000", "ns", "Latency from send to the target's interrupt entry.", "Amit et al. EuroSys'20: shootdown round trip 2-5 us"),
    knob!("cost.ipi_handle_ns", float(0.0, 1e9), "700", "ns", "Interrupt entry/exit and flush_tlb_func() bookkeeping on the target, excluding the flush itself.", "Amit et al. EuroSys'20"),
    knob!("cost.ipi_cross_socket_ns", float(0.0, 1e9), "400", "ns", "Extra time of an IPI whose target is on another socket: the interrupt message and the acknowledgement (the csd cache line the sender polls) each cross the interconnect once.", "remote-socket cache-to-cache transfer ~150-250 ns per hop on Xeon (Intel MLC c2c)"),
    knob!("cost.lock_handoff_ns", float(0.0, 1e9), "40", "ns", "A lock (and the cache lines it protects) handed from one CPU to another on the same socket: a modified-line intervention (lock_stat's acq-bounce).", "Intel MLC L2-to-L2 modified intervention latency, same socket: 40-42 ns (J. McCalpin, Intel forum, Xeon E5-2660 v4)"),
    knob!("cost.lock_handoff_cross_socket_ns", float(0.0, 1e9), "100", "ns", "Extra hand-off time when the previous holder is on another socket.", "core-to-core CAS latency across sockets: 100-200 ns more than within a socket (chipsandcheese, 'Core to Core Latency Data on Large Systems', 2023)"),
    knob!("cost.block_read_4k_ns", float(0.0, 1e10), "20000", "ns", "Reading one 4 KiB page from an idle backing device (latency plus the page's transfer); the reader sleeps until the read completes (block/mod.rs).", "NVMe SSD 4 KiB random read ~ 10-100 us"),
    knob!("cost.block_read_bytes_per_ns", float(0.001, 1e6), "3.2", "B/ns", "Read bandwidth of the backing device, shared by all reads in request order (block/mod.rs): each page of a readahead window after the first adds 4096 B / this to the I/O's cost.block_read_4k_ns, and a read waits for the transfers requested before it.", "Intel SSD DC P4510 datasheet: 3,200 MB/s sequential read (PCIe 3.0 x4 NVMe)"),
    knob!("cost.block_read_submit_ns", float(0.0, 1e10), "0", "ns", "CPU time of submitting one read request to the device, charged to the submitting CPU before it sleeps (blk-mq dispatch and the device's doorbell). On this host's Firecracker VM the virtio doorbell write (iowrite16) exits to the hypervisor and a one-page read costs its task ~19-31 us of CPU besides its sleep (docs/host-findings.md §8.9). 0 = not modelled, for machines where it was not measured.", "`mmsim calibrate`: CPU time of a pread() of one evicted page, less that of reading it again from the page cache, less the model's page allocation and page-cache insertion"),
    knob!("cost.filemap_add_folio_ns", float(0.0, 1e9), "475", "ns", "Per-folio work of bringing a folio into the page cache that the model does not otherwise charge: filemap_add_folio()'s memcg charge and statistics, the filesystem's read_folio()/readahead setup, the fault-around mapping of the folio (the fault, allocation, clear, xarray store under i_pages and LRU batch are charged separately). Charged outside any lock, the same in every kernel.", "this host (Linux 6.18, a PVM guest on AMD EPYC): `mmsim calibrate` 2026-11-27 gave 410, 458 and 516 ns in three runs, 475 against the shipped host profile's other knobs (a read-touch of a sparse file's 512 pages by mmap read-around and fault-around on an ext4 with 4 KiB folios, after MADV_PAGEOUT and truncation of the shadow entries: the host's time per page minus the model's with every other calibrated knob). The seed machines' figure is not known; the work it stands for exists in every preset. Until 2026-11-27 the default was 0: the loop ran on a file system with large folios and the model without read-around, so the model was not cheaper (docs/host-findings.md §8.5)"),
    knob!("cost.shrink_folio_ns", float(0.0, 1e9), "378", "ns", "Per-folio work of reclaiming a clean page-cache folio that the model does not otherwise charge: shrink_folio_list()'s folio lock and checks, __remove_mapping()'s statistics, the memcg uncharge (the rmap walk, PTE clear, flush, xarray store under i_pages and the free are charged separately). Charged outside any lock, the same in every kernel.", "this host (Linux 6.18, a PVM guest on AMD EPYC): `mmsim calibrate` 2026-11-27 gave 364, 373 and 413 ns in three runs, 378 against the shipped host profile's other knobs (MADV_PAGEOUT of 512 mapped pages of a sparse file on an ext4 with 4 KiB folios: the host's time per page minus the model's with every other calibrated knob). The seed machines' figure is not known; the work it stands for (memcg uncharge, statistics, folio lock) exists in every preset. 2026-11-23 to 11-27 the default was 500, from the same loop on a file system with large folios (497 and 529 ns)"),
    knob!("cost.page_mkwrite_ns", float(0.0, 1e9), "0", "ns", "Per write fault on a shared file folio that the model does not otherwise charge: the filesystem's ->page_mkwrite (ext4: a journal handle, delalloc block reservation, file_update_time) and folio_mark_dirty()'s accounting (the fault entry, PTE update and any read are charged separately). The same in every kernel.", "default 0 (not charged, as before this knob); `mmsim calibrate` fits it: a write-touch of 8192 cached, clean pages of a shared file mapping on a disk file system, the host's time per page against the model's run of the same loop (src/validate/fit.rs)"),
    knob!("cost.writepage_ns", float(0.0, 1e9), "0", "ns", "CPU time per folio written back that the model does not otherwise charge: folio_clear_dirty_for_io(), the filesystem's writepages (block mapping, bio building and submission), folio_start/end_writeback()'s accounting (folio_mkclean()'s rmap walk and PTE work and the device's time are charged separately). Charged to the CPU that writes (msync's caller, the flusher, kswapd's pageout). The same in every kernel.", "default 0 (not charged, as before this knob); `mmsim calibrate` fits it: msync(MS_SYNC) of 8192 dirty pages of a shared file mapping on a disk file system, the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) per page against the model's system time in the same loop (src/validate/fit.rs)"),
    knob!("cost.block_write_4k_ns", float(0.0, 1e10), "20000", "ns", "Writing one 4 KiB page back to the backing device and waiting for it (latency plus the page's transfer): a single-page write (swap-out, kswapd's pageout()) costs this; a batch of n pages (the flusher's, msync's) this plus n - 1 pages at cost.block_write_bytes_per_ns (block/mod.rs).", "NVMe SSD 4 KiB write"),
    knob!("cost.block_write_bytes_per_ns", float(0.001, 1e6), "2.0", "B/ns", "Write bandwidth of the backing device: each page of a write batch after the first adds 4096 B / this to its cost.block_write_4k_ns, and the device is busy for the batch's transfer (block/mod.rs).", "Intel SSD DC P4510 2 TB datasheet: 2,000 MB/s sequential write (the 3,200 MB/s read of cost.block_read_bytes_per_ns is the same drive's)"),
    // ---- workload ----
    knob!("workload.kind", Kind::Enum(WORKLOADS), "\"ops\"", "", "'ops': per-thread op programs from [[workload.thread]]; 'synthetic': the access generator below; 'boot', 'kbuild', 'database', 'ebizzy': the VMA-lookup workloads; 'trace': replay of a recorded trace; 'llm': LLM inference over mmapped weights (workload.llm.*).", "-"),
    knob!("workload.start_jitter_us", float(0.0, 1e9), "0", "us", "Each thread of the workload (ops, synthetic, llm) starts at a random time in [0, this) drawn from run.seed (0: all start at once). The generated workloads draw nothing else at start, so this is what makes their seeds differ.", "-"),
    knob!("workload.processes", int(1, 1 << 16), "1", "", "Synthetic: processes.", "-"),
    knob!("workload.threads", int(1, 1 << 16), "1", "", "Synthetic: threads per process.", "-"),
    knob!("workload.working_set_mib", float(0.004, 16777216.0), "64", "MiB", "Synthetic: anonymous region each process maps and touches (fractions allowed: 0.125 = 32 pages).", "pmbench -s"),
    knob!("workload.pattern", Kind::Enum(PATTERNS), "\"uniform\"", "", "Synthetic: which page each access picks.", "pmbench -p"),
    knob!("workload.sigma_pages", float(0.0, 1e12), "1024", "pages", "Synthetic, normal pattern: standard deviation around the middle of the set.", "pmbench -e"),
    knob!("workload.read_pct", int(0, 100), "80", "%", "Synthetic: share of accesses that are loads.", "pmbench -r"),
    knob!("workload.text_pages", int(0, 1 << 24), "16", "pages", "Synthetic: instruction footprint; instruction fetches walk it for the iTLB.", "-"),
    knob!("workload.fetches_per_access", float(0.0, 1e3), "0.25", "", "Synthetic: instruction-page fetches (iTLB lookups) per data access.", "-"),
    knob!("workload.thin", int(1, 1 << 20), "1", "", "Synthetic: thinning; each simulated access stands for this many accesses from the same distribution (its user time is charged this many times), so long runs finish in minutes.", "-"),
    knob!("workload.accesses_per_thread", int(1, 1 << 50), "1000000", "", "Synthetic: length of each thread's stream.", "-"),
];

/// Every knob table: the core one here and one per mechanism area, each in its own file so that
/// work on one mechanism never edits another's declarations.
pub static TABLES: &[&[Knob]] = &[KNOBS, super::knobs_vma::VMA_KNOBS, super::knobs_hugetlb::HUGETLB_KNOBS, super::knobs_check::CHECK_KNOBS, super::knobs_numa::NUMA_KNOBS, super::knobs_llm::LLM_KNOBS, super::knobs_flush::FLUSH_KNOBS];

/// All knobs, in declaration order.
pub fn all() -> impl Iterator<Item = &'static Knob> {
    TABLES.iter().flat_map(|t| t.iter())
}

pub fn find(key: &str) -> Option<&'static Knob> {
    all().find(|k| k.key == key)
}

/// Keys of the per-thread tables of an `ops` workload (`[[workload.thread]]`).
pub const THREAD_KEYS: &[(&str, &str)] = &[
    ("process", "Process this thread belongs to (0-based; threads of one process share its mm)."),
    ("cpu", "Pin the thread to this CPU (sched_setaffinity); unpinned threads may migrate."),
    ("ops", "The thread's op program (see docs/ops.md)."),
];

/// The knob reference printed by `mmsim knobs` (plain or Markdown).
pub fn reference(markdown: bool) -> String {
    let mut s = String::new();
    if markdown {
        s.push_str("# Scenario knobs\n\nGenerated by `mmsim knobs --markdown` from src/config/knobs.rs.\n\n| key | default | unit | description | source |\n|---|---|---|---|---|\n");
        for k in all() {
            s.push_str(&format!("| `{}` | `{}` | {} | {} | {} |\n", k.key, k.default, k.unit, k.doc, k.source));
        }
        s.push_str("\nPer-thread keys of `[[workload.thread]]`:\n\n");
        for (k, d) in THREAD_KEYS {
            s.push_str(&format!("- `{k}`: {d}\n"));
        }
    } else {
        for k in all() {
            let unit = if k.unit.is_empty() { String::new() } else { format!(" [{}]", k.unit) };
            s.push_str(&format!("{} = {}{}\n    {}\n", k.key, k.default, unit, k.doc));
            if k.source != "-" {
                s.push_str(&format!("    source: {}\n", k.source));
            }
        }
    }
    s
}
