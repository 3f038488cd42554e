//! Knobs of automatic NUMA balancing (mechanisms.md §2, seed 001): kernel/sched/numa_balancing.rs,
//! mm/mempolicy.rs and do_numa_page() in mm/memory.rs.

use super::knobs::{int, knob, Kind, Knob};

pub static NUMA_KNOBS: &[Knob] = &[
    knob!("kernel.numa_balancing", int(0, 1), "0", "", "/proc/sys/kernel/numa_balancing: 0 off, 1 NUMA_BALANCING_NORMAL (scan, hint faults, migrate towards the faulting CPU's node). 2 (memory tiering) is not modelled. Distribution kernels boot with 1 on NUMA machines; mmsim defaults to 0 so a scenario measures only what it asks for.", "kernel/sched/fair.c, Documentation/admin-guide/sysctl/kernel.rst"),
    knob!("kernel.numa_balancing_scan_delay_ms", int(0, 1 << 30), "1000", "ms", "Delay before the first scan of a new mm (debugfs sched/numa_balancing/scan_delay_ms).", "kernel/sched/fair.c sysctl_numa_balancing_scan_delay"),
    knob!("kernel.numa_balancing_scan_period_min_ms", int(0, 1 << 30), "1000", "ms", "Fastest scan period (debugfs sched/numa_balancing/scan_period_min_ms), divided by the task's number of scan windows (RSS / scan_size), floored at 1000 ms / (2560 MB / scan_size).", "kernel/sched/fair.c task_scan_min()"),
    knob!("kernel.numa_balancing_scan_period_max_ms", int(1, 1 << 30), "60000", "ms", "Slowest scan period (debugfs sched/numa_balancing/scan_period_max_ms).", "kernel/sched/fair.c task_scan_max()"),
    knob!("kernel.numa_balancing_scan_size_mb", int(1, 1 << 20), "256", "MiB", "Pages made PROT_NONE per scan (debugfs sched/numa_balancing/scan_size_mb); at most 8x this much virtual space is walked.", "kernel/sched/fair.c task_numa_work()"),
    knob!("kernel.numa_delayed_map", Kind::Enum(&["auto", "on", "off"]), "\"auto\"", "", "Seed 001: do_numa_page() migrates while the PTE is still PROT_NONE and maps only if migration fails, so the migration's unmap needs no shootdown; off = restore the PTE first, then migrate (before 5.13); auto = the preset's (5.13+).", "commit b99a342d4f11, lore 20210408132236.1175607-1-ying.huang@intel.com"),
    knob!("kernel.tlb_ubc_skip_inaccessible", Kind::Enum(&["auto", "on", "off"]), "\"auto\"", "", "set_tlb_ubc_flush_pending() returns early for a PTE that was not accessible (PROT_NONE with no flush pending), so batched unmaps of NUMA-hinted pages add no CPUs; auto = the preset's (6.4+). The unbatched ptep_clear_flush() has always skipped them.", "commit 4d4b6d66db63 (6.4)"),
];
