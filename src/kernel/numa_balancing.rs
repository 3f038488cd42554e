//! Automatic NUMA balancing, the scheduler side (kernel/sched/fair.c, Linux 6.18;
//! mechanisms.md §2): the per-mm scanner `task_numa_work()`, the per-task fault statistics
//! `task_numa_fault()` / `task_numa_placement()`, the adaptive scan period
//! (`update_task_scan_period()`, `task_scan_min/max()`) and the migrate-or-not filter
//! `should_numa_migrate_memory()` for NUMA_BALANCING_NORMAL.
//!
//! The mm side is in mm/mempolicy.rs (`change_prot_numa()`, `mpol_misplaced()`),
//! mm/numa_fault.rs (`do_numa_page()`, with seed 001's delayed mapping) and mm/migrate.rs
//! (`migrate_misplaced_folio()`).
//!
//! Departures: the scan runs as a step of a task of the mm when `numa_next_scan` has passed
//! (Linux: queued from the tick as task work, gated by the task's own runtime); numa groups,
//! task placement (moving tasks to their preferred node), the "VMA not accessed by this task"
//! skip of recent kernels and memory tiering (mode 2) are not modelled.

use crate::mm::mmu_gather::MmuGather;
use crate::mm::mprotect::ChangeMode;
use crate::sim::{vm, Backing, Sim};
use crate::types::*;

/// `NUMA_PERIOD_SLOTS` / `NUMA_PERIOD_THRESHOLD` of update_task_scan_period().
pub const NUMA_PERIOD_SLOTS: u64 = 10;
pub const NUMA_PERIOD_THRESHOLD: u64 = 7;
/// `MAX_SCAN_WINDOW` (MB/s): never scan faster than this.
pub const MAX_SCAN_WINDOW: u64 = 2560;

/// task_numa_fault() flags (include/linux/sched/numa_balancing.h).
pub const TNF_MIGRATED: u32 = 0x01;
pub const TNF_NO_GROUP: u32 = 0x02;
pub const TNF_SHARED: u32 = 0x04;
pub const TNF_FAULT_LOCAL: u32 = 0x08;
pub const TNF_MIGRATE_FAIL: u32 = 0x10;

/// `cpu_pid_to_cpupid()`: (cpu + 1) << 16 | pid bits, so 0 means unset (Linux uses all ones).
pub fn cpupid(cpu: CpuId, pid: Tid) -> u32 {
    (cpu.0 + 1) << 16 | (pid.0 & 0xffff)
}
pub fn cpupid_cpu(c: u32) -> Option<CpuId> {
    (c != 0).then(|| CpuId((c >> 16) - 1))
}
pub fn cpupid_match_pid(c: u32, pid: Tid) -> bool {
    c != 0 && c & 0xffff == pid.0 & 0xffff
}

/// A hint fault's migration, handed from the fault (step 1) to the task's next step (step 2):
/// in Linux the faulting thread drops the PTE lock and migrates; other CPUs run meanwhile.
#[derive(Clone, Copy, Debug)]
pub struct NumaMigrate {
    pub mm: MmId,
    pub vpn: u64,
    pub pfn: Pfn,
    pub target: NodeId,
    /// The PROT_NONE PTE the fault saw (vmf->orig_pte).
    pub orig_pte: crate::mm::pgtable::Pte,
    pub last_cpupid: u32,
    pub nid: u32,
    pub flags: u32,
    pub writable: bool,
}

/// Per-task NUMA state (task_struct.numa_*).
#[derive(Clone, Debug, Default)]
pub struct TaskNuma {
    /// numa_scan_period in ms; 0 until the first scan (task_scan_start()).
    pub scan_period_ms: u64,
    /// numa_faults_locality: [remote, local, failed migrations] since the last placement.
    pub faults_locality: [u64; 3],
    /// Faults since the last placement, per node, [shared, private].
    pub faults_buf: Vec<[u64; 2]>,
    /// Decayed fault totals per node (numa_faults, memory buffer).
    pub faults: Vec<u64>,
    pub preferred_nid: Option<u32>,
    /// numa_scan_seq: the mm's pass count at the last placement.
    pub scan_seq: u32,
    /// A hint fault's migration still to run (step 2 of do_numa_page()).
    pub pending: Option<NumaMigrate>,
}

impl Sim {
    /// `task_nr_scan_windows()`: the mm's RSS in scan_size units, at least 1.
    fn task_nr_scan_windows(&self, mm: MmId) -> u64 {
        let nr_scan_pages = self.p.numa_scan_size_mb << (20 - PAGE_SHIFT);
        let m = self.mm(mm);
        let rss = match m.rss_anon + m.rss_file {
            0 => nr_scan_pages,
            r => r,
        };
        rss.div_ceil(nr_scan_pages)
    }

    /// `task_scan_min()` in ms.
    pub fn task_scan_min(&self, mm: MmId) -> u64 {
        let size = self.p.numa_scan_size_mb;
        let windows = if size < MAX_SCAN_WINDOW { MAX_SCAN_WINDOW / size } else { 1 };
        let floor = 1000 / windows;
        (self.p.numa_scan_period_min_ms / self.task_nr_scan_windows(mm)).max(floor)
    }

    /// `task_scan_max()` in ms (without numa groups).
    pub fn task_scan_max(&self, mm: MmId) -> u64 {
        (self.p.numa_scan_period_max_ms / self.task_nr_scan_windows(mm)).max(self.task_scan_min(mm))
    }

    /// Whether task `t` (on `cpu`) owes a NUMA scan of its mm now: the step is then spent on
    /// [`Sim::task_numa_work`].
    #[inline]
    pub fn numa_scan_due(&self, cpu: CpuId, t: Tid) -> bool {
        self.p.numa_balancing && self.tasks[t.0 as usize].mm.is_some_and(|mm| self.now(cpu) >= self.mm(mm).numa_next_scan)
    }

    /// `task_numa_work()`: advance `numa_next_scan` by the task's period, then make up to
    /// scan_size worth of present PTEs PROT_NONE (walking at most 8x that of address space),
    /// starting at `numa_scan_offset`, skipping VMAs that cannot or need not be hinted.
    pub fn task_numa_work(&mut self, cpu: CpuId, t: Tid) {
        self.kfn_enter(cpu, crate::kernel::profile::KFn::TaskNumaWork);
        self.task_numa_work_inner(cpu, t);
        self.kfn_exit(cpu);
    }

    fn task_numa_work_inner(&mut self, cpu: CpuId, t: Tid) {
        let mm = self.tasks[t.0 as usize].mm.expect("a user task");
        if self.task(t).numa.scan_period_ms == 0 {
            let start = self.task_scan_min(mm); // task_scan_start()
            self.task_mut(t).numa.scan_period_ms = start;
        }
        let now = self.now(cpu);
        let period = self.task(t).numa.scan_period_ms;
        // task_tick_numa() queues the work from the scheduler tick: at most one scan per tick.
        self.mm_mut(mm).numa_next_scan = now + (period * 1_000_000).max(self.p.slice_ns);
        let mut pages = (self.p.numa_scan_size_mb << (20 - PAGE_SHIFT)) as i64;
        let mut virtpages = pages * 8;
        let mut start = self.mm(mm).numa_scan_offset;
        let vmas: Vec<crate::sim::Vma> = self.mm(mm).vmas.values().filter(|v| v.end > start).cloned().collect();
        let single_threaded = self.mm(mm).users == 1;
        let this_node = self.cpu_node(cpu).0;
        let mut done = false;
        'vmas: for v in &vmas {
            self.charge_sys(cpu, self.p.vma_op_ns);
            // Inaccessible VMAs, and read-only file mappings (shared libraries, expected to be
            // cache-replicated), are not hinted. (HugeTLB and VM_MIXEDMAP mappings are not in
            // the VMA tree of this model.)
            let ro_file = matches!(v.backing, Backing::File { .. }) && v.flags & (vm::READ | vm::WRITE) == vm::READ;
            if !v.is_accessible() || ro_file {
                continue;
            }
            let target_node = (single_threaded && !v.shared()).then_some(this_node);
            loop {
                let s = start.max(v.start);
                let e = ((s + pages as u64).next_multiple_of(512)).min(v.end);
                let n = if self.latr.is_some() {
                    // LATR's lazy migration (mm/latr.rs): PROT_NONE and its flush at the next tick.
                    self.latr_defer_numa_scan(cpu, mm, s, e, target_node)
                } else {
                    let mut tlb = MmuGather::new(mm, false);
                    let n = self.change_pte_range(cpu, &mut tlb, v, s, e, ChangeMode::ProtNuma { target_node });
                    self.tlb_finish_mmu(cpu, tlb);
                    n
                };
                if n > 0 {
                    pages -= (e - s) as i64;
                }
                virtpages -= (e - s) as i64;
                start = e;
                if pages <= 0 || virtpages <= 0 {
                    done = true;
                    break 'vmas;
                }
                if e == v.end {
                    break;
                }
            }
        }
        let m = self.mm_mut(mm);
        if done {
            m.numa_scan_offset = start;
        } else {
            // reset_ptenuma_scan(): the pass is complete.
            m.numa_scan_offset = 0;
            m.numa_scan_seq += 1;
        }
        self.mark("numa scan");
    }

    /// `task_numa_fault()`: account a hint fault of `pages` on memory node `mem_node`.
    pub fn task_numa_fault(&mut self, t: Tid, last_cpupid: u32, mem_node: u32, pages: u64, flags: u32) {
        // "NUMA faults statistics are unnecessary for the slow memory node for memory tiering
        // mode." (Linux also returns here in NORMAL mode for a lower-tier fault without a valid
        // last_cpupid; the model keeps mode 1 as it was, which only differs with CPU-less nodes.)
        if self.p.numa_tiering && !self.node_is_toptier(mem_node) {
            return;
        }
        let nodes = self.nodes.len();
        // First accesses are private; otherwise private if the same task faulted last.
        let private = last_cpupid == 0 || cpupid_match_pid(last_cpupid, t);
        self.task_numa_placement(t);
        let n = &mut self.tasks[t.0 as usize].numa;
        if n.faults_buf.len() != nodes {
            n.faults_buf = vec![[0; 2]; nodes];
            n.faults = vec![0; nodes];
        }
        if flags & TNF_MIGRATE_FAIL != 0 {
            n.faults_locality[2] += pages;
        }
        n.faults_buf[mem_node as usize][private as usize] += pages;
        n.faults_locality[(flags & TNF_FAULT_LOCAL != 0) as usize] += pages;
    }

    /// `task_numa_placement()`: once per scan pass, decay the fault statistics, pick the
    /// preferred node and adapt the scan period.
    fn task_numa_placement(&mut self, t: Tid) {
        let Some(mm) = self.task(t).mm else { return };
        let seq = self.mm(mm).numa_scan_seq;
        if self.task(t).numa.scan_seq == seq {
            return;
        }
        let n = &mut self.tasks[t.0 as usize].numa;
        n.scan_seq = seq;
        let mut types = [0u64; 2];
        let mut best: Option<(u64, u32)> = None;
        for (node, buf) in n.faults_buf.iter_mut().enumerate() {
            types[0] += buf[0];
            types[1] += buf[1];
            n.faults[node] = n.faults[node] / 2 + buf[0] + buf[1];
            if n.faults[node] > 0 && best.is_none_or(|(f, _)| n.faults[node] > f) {
                best = Some((n.faults[node], node as u32));
            }
            *buf = [0; 2];
        }
        if let Some((_, nid)) = best {
            n.preferred_nid = Some(nid);
        }
        self.update_task_scan_period(t, types[0], types[1]);
    }

    /// `update_task_scan_period()`: scan slower when faults are mostly local or private (or
    /// none, or migrations fail), faster otherwise; clamped to [task_scan_min, task_scan_max].
    fn update_task_scan_period(&mut self, t: Tid, shared: u64, private: u64) {
        let mm = self.task(t).mm.expect("a user task");
        let (smin, smax) = (self.task_scan_min(mm), self.task_scan_max(mm));
        let n = &mut self.tasks[t.0 as usize].numa;
        let [remote, local, failed] = n.faults_locality;
        let period = n.scan_period_ms.max(1);
        if local + shared == 0 || failed > 0 {
            n.scan_period_ms = (period * 2).min(smax);
        } else {
            let slot = period.div_ceil(NUMA_PERIOD_SLOTS) as i64;
            let lr = local * NUMA_PERIOD_SLOTS / (local + remote);
            let ps = private * NUMA_PERIOD_SLOTS / (private + shared).max(1);
            let diff = if ps >= NUMA_PERIOD_THRESHOLD {
                (ps - NUMA_PERIOD_THRESHOLD).max(1) as i64 * slot
            } else if lr >= NUMA_PERIOD_THRESHOLD {
                (lr - NUMA_PERIOD_THRESHOLD).max(1) as i64 * slot
            } else {
                -((NUMA_PERIOD_THRESHOLD - lr.max(ps)) as i64) * slot
            };
            n.scan_period_ms = ((period as i64 + diff).max(0) as u64).clamp(smin, smax);
        }
        n.faults_locality = [0; 3];
    }

    /// `should_numa_migrate_memory()` for NUMA_BALANCING_NORMAL: records this fault in the
    /// folio's last_cpupid and applies the two-stage filter.
    pub fn should_numa_migrate_memory(&mut self, cpu: CpuId, t: Tid, pfn: Pfn, dst_nid: u32) -> bool {
        // Memory tiering: a lower-tier folio moves by hotness, not by who faults it
        // (kernel/numa_tiering.rs).
        if self.folio_use_access_time(pfn) {
            return self.should_numa_promote(cpu, pfn, dst_nid);
        }
        let this = cpupid(cpu, t);
        let last = self.last_cpupid.replace(pfn, this);
        let n = &self.task(t).numa;
        // Allow first faults or private faults to migrate immediately early in the task's life.
        if (n.preferred_nid.is_none() || n.scan_seq <= 4) && (last == 0 || cpupid_match_pid(last, t)) {
            return true;
        }
        // Two consecutive faults from the same node before a shared page moves.
        if let Some(c) = cpupid_cpu(last) {
            if self.cpu_node(c).0 != dst_nid {
                return false;
            }
        }
        // Private faults always; shared ones too without numa groups (not modelled).
        true
    }
}
