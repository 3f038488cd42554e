//! Broadcast TLB invalidation with AMD INVLPGB + TLBSYNC and global ASIDs: the part of
//! arch/x86/mm/tlb.c (and asm/tlb.h, asm/tlbflush.h) that Linux 6.15 merged and 6.18 has
//! (Rik van Riel's series, lore 20250226030129.530345-1-riel@surriel.com).
//!
//! Modelled: `mm_global_asid()`, `consider_global_asid()` (every 32 jiffies per pid, when
//! `mm_active_cpus_exceeds(mm, 3)`), `use_global_asid()` / `allocate_global_asid()` /
//! `reset_global_asid_space()` with `global_asid_available`, `mm_needs_global_asid()` and
//! `finish_asid_transition()` (stragglers get a flush IPI), `broadcast_tlb_flush()` with the
//! `invlpgb_count_max` clamp and the caller's single-page ceiling, the `_nosync` INVLPGBs with
//! the per-CPU `need_tlbsync`, `tlbsync()` in `switch_mm_irqs_off()` / `enter_lazy_tlb()`, and
//! `arch_tlbbatch_add_pending()` / `arch_tlbbatch_flush()` with INVLPGB.
//! Departures: the remote invalidations of an INVLPGB are applied at the issuing CPU's TLBSYNC
//! (the latest moment the hardware may finish them), not when each remote core gets to them;
//! remote cores lose no time to them; `mm_free_global_asid()` is not called (an mm keeps its
//! global ASID until the run ends, so freed ASIDs are never reused); no PTI (one PCID per ASID).
//!
//! | state                 | meaning                                        | who changes it                     |
//! |-----------------------|------------------------------------------------|------------------------------------|
//! | `global_asid[mm]`     | the mm's ASID on every CPU (0 = none)          | use_global_asid                    |
//! | `asid_transition[mm]` | some CPU may still run the mm in a dynamic ASID | use_global_asid / finish_asid_transition |
//! | `need_tlbsync[cpu]`   | this CPU issued INVLPGBs not yet waited for    | the `_nosync` flushes / tlbsync    |
//! | `pending[cpu]`        | those INVLPGBs (applied to every TLB at TLBSYNC) | the same                          |
//!
//! What must hold: a global ASID's entries on every CPU are never older than the last
//! completed broadcast flush of its mm (so `choose_new_asid()` loads it without a flush).

use crate::config::Config;
use crate::sim::Sim;
use crate::types::*;

use super::tlb::{FlushInfo, FLUSH_ALL, TLB_NR_DYN_ASIDS};

/// MAX_ASID_AVAILABLE: (1 << CR3_AVAIL_PCID_BITS) - 2 with 12 PCID bits, one taken by PTI.
pub const MAX_ASID_AVAILABLE: u16 = (1 << 11) - 2;

/// One broadcast invalidation waiting for its TLBSYNC.
#[derive(Clone, Copy, Debug)]
pub enum Inval {
    /// `invlpgb_flush_single_pcid_nosync()`: every entry of one PCID.
    Pcid(u16),
    /// `invlpgb_flush_user_nr_nosync()`: `nr` pages from `addr` (vpn) with a 4K or 2M stride.
    Range { asid: u16, addr: u64, nr: u64, stride_shift: u32 },
    /// `invlpgb_flush_all_nonglobals()`.
    AllNonGlobals,
}

/// Counters of the broadcast mechanisms (reported beside /proc/interrupts).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BroadcastStats {
    pub invlpgb: u64,
    pub tlbsync: u64,
    pub broadcast_flushes: u64,
    pub global_asids_assigned: u64,
    pub asid_transition_ipis: u64,
    /// RAR (rar.rs): flushes sent as RAR actions, and actions (one per target CPU).
    pub rar_flushes: u64,
    pub rar_actions: u64,
    /// CPU time of INVLPGB issue and TLBSYNC (or RAR send + completion wait) waits, ns.
    pub invlpgb_ns: f64,
    pub tlbsync_ns: f64,
    /// INVLPGB time issued from arch_tlbbatch_add_pending() (inside try_to_unmap, so outside the
    /// flush functions of the profile), ns.
    pub batch_add_ns: f64,
}

#[derive(Clone, Debug)]
pub struct Broadcast {
    /// X86_FEATURE_INVLPGB in use: machine.invlpgb, a 6.15+ preset, PCID on.
    pub invlpgb: bool,
    /// X86_FEATURE_RAR in use (rar.rs): machine.rar, a 6.15+ preset, PCID on.
    pub rar: bool,
    pub count_max: u64,
    /// kernel.global_asid_eager (a stress setting, not the kernel's rule).
    pub eager: bool,
    pub invlpgb_ns: f64,
    pub tlbsync_ns: f64,
    pub rar_send_ns: f64,
    pub rar_complete_ns: f64,
    global_asid: Vec<u16>,
    asid_transition: Vec<bool>,
    used: Vec<bool>,
    freed: Vec<bool>,
    last_global_asid: u16,
    pub global_asid_available: i32,
    need_tlbsync: Vec<bool>,
    pending: Vec<Vec<Inval>>,
    pub stats: BroadcastStats,
}

impl Broadcast {
    pub fn new(c: &Config, ncpus: usize) -> Broadcast {
        let preset = c.str("kernel.preset");
        let v = crate::config::presets::version(&preset);
        let pcid = c.bool("machine.tlb.pcid") && crate::config::presets::uses_pcid(&preset);
        let max = MAX_ASID_AVAILABLE as usize;
        Broadcast {
            invlpgb: c.bool("machine.invlpgb") && v >= (6, 15) && pcid,
            rar: c.bool("machine.rar") && v >= (6, 15) && pcid,
            count_max: c.int("machine.invlpgb_count_max") as u64,
            eager: c.bool("kernel.global_asid_eager"),
            invlpgb_ns: c.float("cost.invlpgb_ns"),
            tlbsync_ns: c.float("cost.tlbsync_ns"),
            rar_send_ns: c.float("cost.rar_send_ns"),
            rar_complete_ns: c.float("cost.rar_complete_ns"),
            global_asid: Vec::new(),
            asid_transition: Vec::new(),
            used: vec![false; max],
            freed: vec![false; max],
            last_global_asid: MAX_ASID_AVAILABLE,
            global_asid_available: MAX_ASID_AVAILABLE as i32 - TLB_NR_DYN_ASIDS as i32 - 1,
            need_tlbsync: vec![false; ncpus],
            pending: vec![Vec::new(); ncpus],
            stats: BroadcastStats::default(),
        }
    }

    /// Global ASIDs are used at all (X86_FEATURE_INVLPGB, or RAR in the RFC).
    pub fn global_asids(&self) -> bool {
        self.invlpgb || self.rar
    }

    fn slot(&mut self, mm: MmId) -> usize {
        let i = mm.0 as usize;
        if self.global_asid.len() <= i {
            self.global_asid.resize(i + 1, 0);
            self.asid_transition.resize(i + 1, false);
        }
        i
    }

    pub fn is_global_asid(asid: u16) -> bool {
        asid as usize >= TLB_NR_DYN_ASIDS
    }
}

impl Sim {
    /// `mm_global_asid()`: the mm's global ASID, 0 if it has none.
    #[inline]
    pub fn mm_global_asid(&self, mm: MmId) -> u16 {
        if !self.bcast.global_asids() {
            return 0;
        }
        self.bcast.global_asid.get(mm.0 as usize).copied().unwrap_or(0)
    }

    fn mm_in_asid_transition(&self, mm: MmId) -> bool {
        self.bcast.asid_transition.get(mm.0 as usize).copied().unwrap_or(false)
    }

    /// `mm_needs_global_asid()`: the mm has a global ASID but this CPU runs it in `asid`.
    pub fn mm_needs_global_asid(&self, mm: MmId, asid: u16) -> bool {
        let g = self.mm_global_asid(mm);
        g != 0 && asid != g
    }

    /// `mm_active_cpus_exceeds()`: more than `threshold` CPUs run the mm (loaded, not lazy).
    fn mm_active_cpus_exceeds(&self, mm: MmId, threshold: usize) -> bool {
        let m = self.mm(mm);
        if m.cpumask.iter().count() <= threshold {
            return false;
        }
        let n = m.cpumask.iter().filter(|c| {
            let st = &self.cpus[c.0 as usize].tlbstate;
            st.loaded_mm == Some(mm) && !st.is_lazy
        });
        n.count() > threshold
    }

    /// `consider_global_asid()`: after an IPI flush, now and then (when the current task's pid
    /// matches jiffies modulo 32), give an mm running on 4+ CPUs a global ASID.
    pub fn consider_global_asid(&mut self, cpu: CpuId, mm: MmId) {
        if !self.bcast.global_asids() {
            return;
        }
        if self.bcast.eager {
            self.use_global_asid(cpu, mm);
            return;
        }
        let pid = self.cpus[cpu.0 as usize].current.map_or(0, |t| t.0 as u64);
        let jiffies = self.now(cpu) / self.p.slice_ns.max(1);
        if pid & 0x1f != jiffies & 0x1f {
            return;
        }
        if self.mm_active_cpus_exceeds(mm, 3) {
            self.use_global_asid(cpu, mm);
        }
    }

    /// `use_global_asid()` → `allocate_global_asid()` → `mm_assign_global_asid()`.
    fn use_global_asid(&mut self, cpu: CpuId, mm: MmId) {
        if self.mm_global_asid(mm) != 0 || self.bcast.global_asid_available <= 0 {
            return;
        }
        if self.bcast.last_global_asid >= MAX_ASID_AVAILABLE - 1 {
            self.reset_global_asid_space(cpu);
        }
        let b = &mut self.bcast;
        let start = b.last_global_asid as usize;
        let Some(asid) = (start..MAX_ASID_AVAILABLE as usize).find(|&a| !b.used[a]) else { return };
        b.used[asid] = true;
        b.last_global_asid = asid as u16;
        b.global_asid_available -= 1;
        let i = b.slot(mm);
        b.asid_transition[i] = true;
        b.global_asid[i] = asid as u16;
        b.stats.global_asids_assigned += 1;
        self.mark("global asid assigned");
    }

    /// `reset_global_asid_space()`: at wrap-around, one flush of every non-global entry makes
    /// the freed global ASIDs safe to reuse.
    fn reset_global_asid_space(&mut self, cpu: CpuId) {
        if self.bcast.invlpgb {
            self.invlpgb_issue(cpu, Inval::AllNonGlobals);
            self.tlbsync_now(cpu);
        } else {
            for c in &mut self.cpus {
                c.tlb.flush_all();
            }
        }
        let b = &mut self.bcast;
        for a in 0..b.used.len() {
            if b.freed[a] {
                b.used[a] = false;
                b.freed[a] = false;
            }
        }
        b.last_global_asid = TLB_NR_DYN_ASIDS as u16;
    }

    /// `finish_asid_transition()`: if a CPU still runs the mm in a dynamic ASID, send the flush
    /// by IPI as well (which moves it to the global ASID); else the transition is over.
    pub fn finish_asid_transition(&mut self, cpu: CpuId, info: &FlushInfo) {
        let Some(mm) = info.mm else { return };
        if !self.mm_in_asid_transition(mm) {
            return;
        }
        let g = self.mm_global_asid(mm);
        let straggler = self.mm(mm).cpumask.iter().any(|c| {
            let st = &self.cpus[c.0 as usize].tlbstate;
            st.loaded_mm == Some(mm) && st.loaded_mm_asid != g
        });
        if straggler {
            self.bcast.stats.asid_transition_ipis += 1;
            self.mark("asid transition ipi");
            let mask = self.mm(mm).cpumask.clone();
            self.flush_tlb_multi(cpu, &mask, info);
            return;
        }
        let i = self.bcast.slot(mm);
        self.bcast.asid_transition[i] = false;
    }

    /// Issue one INVLPGB (`__invlpgb()`), and set `need_tlbsync`. Under RAR (rar.rs) the same
    /// queue collects a batched unmap's pages for one RAR payload sent at the batch's flush.
    fn invlpgb_issue(&mut self, cpu: CpuId, inv: Inval) {
        let ci = cpu.0 as usize;
        self.bcast.pending[ci].push(inv);
        self.bcast.need_tlbsync[ci] = true;
        if self.bcast.invlpgb {
            self.bcast.stats.invlpgb += 1;
            self.bcast.stats.invlpgb_ns += self.bcast.invlpgb_ns;
            self.charge_sys(cpu, self.bcast.invlpgb_ns);
        }
    }

    /// `__tlbsync()`: wait for this CPU's INVLPGBs; every CPU's TLB has dropped their targets.
    /// Under RAR: send the collected pages as one RAR action to every other CPU and wait.
    pub fn tlbsync_now(&mut self, cpu: CpuId) {
        let ci = cpu.0 as usize;
        self.bcast.need_tlbsync[ci] = false;
        if !self.bcast.invlpgb {
            let others = self.cpus.len() as u64 - 1;
            self.bcast.stats.rar_flushes += 1;
            self.bcast.stats.rar_actions += others;
            let wait = self.bcast.rar_send_ns * others as f64 + self.bcast.rar_complete_ns;
            self.bcast.stats.tlbsync_ns += wait;
            self.charge_sys(cpu, wait);
        } else {
            self.bcast.stats.tlbsync += 1;
            self.bcast.stats.tlbsync_ns += self.bcast.tlbsync_ns;
            self.charge_sys(cpu, self.bcast.tlbsync_ns);
        }
        let pending = std::mem::take(&mut self.bcast.pending[ci]);
        for inv in &pending {
            for c in &mut self.cpus {
                match *inv {
                    Inval::Pcid(asid) => {
                        c.tlb.flush_asid(asid);
                    }
                    Inval::Range { asid, addr, nr, stride_shift } => {
                        let step = 1u64 << (stride_shift - PAGE_SHIFT);
                        for k in 0..nr {
                            c.tlb.flush_one(asid, addr + k * step);
                        }
                    }
                    Inval::AllNonGlobals => {
                        c.tlb.flush_all();
                    }
                }
            }
        }
        self.bcast.pending[ci] = pending;
        self.bcast.pending[ci].clear();
    }

    /// `tlbsync()`: only if this CPU has INVLPGBs outstanding (switch_mm_irqs_off(),
    /// enter_lazy_tlb(), arch_tlbbatch_flush()).
    #[inline]
    pub fn tlbsync(&mut self, cpu: CpuId) {
        if self.bcast.global_asids() && self.bcast.need_tlbsync[cpu.0 as usize] {
            self.tlbsync_now(cpu);
        }
    }

    /// `broadcast_tlb_flush()`: for an mm with a global ASID, flush every CPU without IPIs.
    /// The range was already widened to TLB_FLUSH_ALL above tlb_single_page_flush_ceiling by
    /// flush_tlb_mm_range(); each INVLPGB covers at most invlpgb_count_max pages (one, for
    /// strides above 2 MiB).
    pub fn broadcast_tlb_flush(&mut self, cpu: CpuId, info: &FlushInfo) {
        let mm = info.mm.expect("broadcast flushes are per mm");
        let asid = self.mm_global_asid(mm);
        self.bcast.stats.broadcast_flushes += 1;
        self.mark("invlpgb broadcast flush");
        if self.bcast.rar {
            // The 2025 RFC's rar_tlb_flush() takes this place on Intel (rar.rs).
            self.rar_tlb_flush(cpu, info, asid);
            self.finish_asid_transition(cpu, info);
            return;
        }
        if info.end == FLUSH_ALL {
            self.invlpgb_issue(cpu, Inval::Pcid(asid));
        } else {
            let mut addr = info.start;
            loop {
                let mut nr = 1;
                if info.stride_shift <= PMD_SHIFT {
                    let step = 1u64 << (info.stride_shift - PAGE_SHIFT);
                    nr = ((info.end - addr) / step).clamp(1, self.bcast.count_max);
                }
                self.invlpgb_issue(cpu, Inval::Range { asid, addr, nr, stride_shift: info.stride_shift });
                addr += nr << (info.stride_shift - PAGE_SHIFT);
                if addr >= info.end {
                    break;
                }
            }
        }
        self.finish_asid_transition(cpu, info);
        // Wait for the INVLPGBs kicked off above to finish.
        self.tlbsync_now(cpu);
    }

    /// `arch_tlbbatch_add_pending()` for an mm with a global ASID: INVLPGB the page now (no
    /// sync). Returns true if that was all (the caller then neither ORs mm_cpumask into the batch
    /// nor bumps tlb_gen); false if the mm needs the IPI path too (no global ASID, or still in
    /// transition, when both are sent).
    /// Under RAR the page joins the payload sent at the batch's flush (the RFC's pageout path);
    /// an IPI flush would skip lazy CPUs, which a global ASID never catches up.
    pub fn invlpgb_tlbbatch_add_pending(&mut self, cpu: CpuId, mm: MmId, vpn: u64) -> bool {
        if !self.bcast.global_asids() {
            return false;
        }
        let asid = self.mm_global_asid(mm);
        if asid == 0 {
            return false;
        }
        self.invlpgb_issue(cpu, Inval::Range { asid, addr: vpn, nr: 1, stride_shift: PAGE_SHIFT });
        if self.bcast.invlpgb {
            self.bcast.stats.batch_add_ns += self.bcast.invlpgb_ns;
        }
        self.mark("invlpgb batched page");
        !self.mm_in_asid_transition(mm)
    }

    /// The flush-alternative counters for reports; None when no alternative is on (so reports
    /// of every other run are unchanged).
    pub fn flush_alt_report(&self) -> Option<FlushAltReport> {
        let s = &self.bcast.stats;
        let mut parts = Vec::new();
        let mut mech = Vec::new();
        if self.bcast.invlpgb {
            mech.push("invlpgb");
            parts.push(format!("INVLPGB {} (in {} broadcast flushes), TLBSYNC {}, global ASIDs {}, ASID-transition IPI flushes {}", s.invlpgb, s.broadcast_flushes, s.tlbsync, s.global_asids_assigned, s.asid_transition_ipis));
        }
        if self.bcast.rar {
            mech.push("rar");
            parts.push(format!("RAR flushes {} ({} actions), global ASIDs {}, ASID-transition IPI flushes {}", s.rar_flushes, s.rar_actions, s.global_asids_assigned, s.asid_transition_ipis));
        }
        let latr = self.latr.as_ref().map(|l| l.stats.clone());
        if let Some(l) = &latr {
            mech.push("latr");
            parts.push(format!("LATR lazy flushes {} ({} entries posted, {} applied at a tick, {} at a context switch), {} pages freed late", l.lazy_flushes, l.posted, l.applied_tick, l.applied_switch, l.deferred_pages));
            if l.numa_scans_posted > 0 {
                parts.push(format!("LATR lazy NUMA scans {} ({} applied at a tick, {} PTEs hinted), {} migrations of lazily hinted folios", l.numa_scans_posted, l.numa_scans_applied, l.numa_ptes_hinted, l.numa_migrations));
            }
        }
        if mech.is_empty() {
            return None;
        }
        Some(FlushAltReport { mechanism: mech.join("+"), summary: parts.join("; "), broadcast: s.clone(), latr })
    }
}

/// `flush_alt` in the run report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FlushAltReport {
    pub mechanism: String,
    pub summary: String,
    pub broadcast: BroadcastStats,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latr: Option<crate::mm::latr::LatrStats>,
}

impl Sim {
    /// For the structural checker: `asid` on this CPU is `mm`'s global ASID.
    pub fn is_mm_global_asid(&self, mm: MmId, asid: u16) -> bool {
        asid != 0 && self.mm_global_asid(mm) == asid
    }
}
