//! LATR-style lazy TLB shootdown (`kernel.flush_policy = "latr"`): Kumar et al., "LATR: Lazy
//! Translation Coherence", ASPLOS'18. Not in any Linux kernel; this is the paper's design
//! applied to the 6.18 model.
//!
//! A munmap flushes the local TLB at once and, instead of IPIs, posts one lazy invalidation
//! entry (mm, range, tlb_gen) per other CPU in mm_cpumask. Each CPU applies its entries at its
//! next scheduler tick or context switch, whichever comes first. The pages and page-table pages
//! the munmap frees are held back until every CPU has applied them (the paper's lazy
//! reclamation), so a stale entry can only reach a frame that is not yet reused.
//! The paper restricts lazy invalidation to free operations; `kernel.latr_mprotect` extends it
//! to mprotect to show, through `mmsim check`'s oracle, what that breaks (a write through a
//! stale writable entry after the protection was reduced: the oracle's lost-write class).
//!
//! **Migration** (the paper's lazy AutoNUMA migration; its code, sslab-gatech/latr
//! `CONFIG_LAZY_MIGRATION`: kernel/sched/fair.c `task_numa_work()`, arch/x86/mm/tlb.c
//! `native_flush_saved_states()`): what LATR makes lazy is the shootdown that makes a NUMA
//! migration possible, the scanner's PROT_NONE change. `task_numa_work()` posts each scan range
//! instead of calling `change_prot_numa()`, and nothing changes until the next tick; there the
//! first CPU to process the entry makes the PTEs PROT_NONE without a flush
//! (`change_prot_numa(vma, start, end, 2)`) and every CPU invalidates the range locally at that
//! tick. The hint fault and `migrate_misplaced_folio()` come after: the folio's PTE is
//! inaccessible and no CPU caches it any more, so `try_to_migrate()` needs no flush and the
//! copy can only happen after every CPU's invalidation. A CPU whose entry is not yet applied
//! reads and writes the old page while it is still the page (its PTE is not even changed yet):
//! no write can land in a source that was already copied. The paper does not make
//! `try_to_migrate()`'s own flush lazy (its `native_flush_tlb_others()` is lazy only for
//! munmap), so migrations of mapped, accessible folios (move_pages, demotion, the pre-5.13
//! hint-fault order) keep the kernel's synchronous flush here too: making that one lazy would
//! need the copy to wait for the entries behind migration entries that faulting threads wait
//! on, which the model's atomic `migrate_pages_batch()` does not have.
//!
//! Modelled: per-CPU entry queues (the paper's per-core LATR states), application at the next
//! tick boundary (ticks at multiples of 1/kernel.hz on every CPU) or at `switch_mm_irqs_off()`
//! / `enter_lazy_tlb()`, delayed frees, the posting cost, lazy NUMA hinting. Departures: the
//! applying CPU's work is charged as interrupt time; ticks fall at the same instant on every
//! CPU, so the PROT_NONE change and every CPU's invalidation of a scan range happen together
//! (on hardware the first CPU's tick changes the PTEs a little before the others invalidate);
//! the paper's 256-entry per-CPU arrays and their IPI fallback when full are not modelled (no
//! limit); the PTE change at the tick ignores mmap_lock (the lock model does not see it); the
//! munmapped virtual range may be reused before the entries are applied (the paper holds it
//! back; in the model a thread that maps the same range again flushes its own CPU first, and
//! other CPUs apply at their next tick).
//!
//! | state          | meaning                                                  | who changes it           |
//! |----------------|----------------------------------------------------------|--------------------------|
//! | `queues[cpu]`  | entries not yet applied on that CPU                      | latr_flush / latr_apply  |
//! | `frees`        | pages held back, with the time every target has applied  | latr_defer_free / latr_advance |
//! | `scans`        | NUMA scan ranges whose PROT_NONE change waits for a tick | latr_defer_numa_scan / latr_advance |
//!
//! What must hold: a held-back page is released only after every entry of its flush has been
//! applied (its release time is the latest of the entries' apply times); a lazily scanned PTE
//! becomes PROT_NONE only at the tick where every CPU that may cache it invalidates it, so a
//! hint fault (and the migration it starts) never runs while a CPU still caches the old
//! translation.

use crate::config::Config;
use crate::kernel::profile::KFn;
use crate::sim::{round_ns, vm, Backing, Sim};
use crate::types::*;

use crate::arch::x86::mm::tlb::{FlushInfo, FLUSH_ALL};

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LatrStats {
    pub lazy_flushes: u64,
    pub posted: u64,
    pub applied_tick: u64,
    pub applied_switch: u64,
    pub deferred_pages: u64,
    /// CPU time of entries applied at a context switch (outside the profile's flush functions), ns.
    pub apply_switch_ns: f64,
    /// Lazy NUMA hinting (the paper's lazy migration): scan ranges posted by `task_numa_work()`
    /// instead of `change_prot_numa()`, ranges applied at a tick, PTEs made PROT_NONE there.
    pub numa_scans_posted: u64,
    pub numa_scans_applied: u64,
    pub numa_ptes_hinted: u64,
    /// NUMA hint-fault migrations (`migrate_misplaced_folio()` succeeded) of lazily hinted folios.
    pub numa_migrations: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    mm: MmId,
    ctx_id: u64,
    start: u64,
    end: u64,
    stride_shift: u32,
    tlb_gen: u64,
    apply_at: Ns,
}

/// A NUMA scan range whose PROT_NONE change waits for the next tick (`native_flush_save_state()`
/// with `migration = 1` in the paper's code): nothing is changed until then.
#[derive(Clone, Copy, Debug)]
struct LazyScan {
    mm: MmId,
    start: u64,
    end: u64,
    target_node: Option<u32>,
    apply_at: Ns,
}

#[derive(Clone, Debug)]
struct Deferred {
    release_at: Ns,
    pages: Vec<Pfn>,
}

#[derive(Clone, Debug)]
pub struct Latr {
    pub mprotect: bool,
    /// kernel.latr_migrate_unmap: the misuse switch (lazy `try_to_migrate()` flush).
    pub migrate_unmap: bool,
    post_ns: f64,
    tick_ns: Ns,
    queues: Vec<Vec<Entry>>,
    frees: Vec<Deferred>,
    /// NUMA scan ranges posted, not yet applied (in posting order).
    scans: Vec<LazyScan>,
    /// Release time of the last lazy flush (for the frees of the same mmu_gather).
    last_release: Ns,
    pub stats: LatrStats,
}

impl Latr {
    /// None unless kernel.flush_policy = "latr".
    pub fn from_config(c: &Config, ncpus: usize) -> Option<Box<Latr>> {
        if c.str("kernel.flush_policy") != "latr" {
            return None;
        }
        Some(Box::new(Latr {
            mprotect: c.bool("kernel.latr_mprotect"),
            migrate_unmap: c.bool("kernel.latr_migrate_unmap"),
            post_ns: c.float("cost.latr_post_ns"),
            tick_ns: 1_000_000_000 / c.int("kernel.hz") as u64,
            queues: vec![Vec::new(); ncpus],
            frees: Vec::new(),
            scans: Vec::new(),
            last_release: 0,
            stats: LatrStats::default(),
        }))
    }
}

impl Sim {
    /// The lazy counterpart of `flush_tlb_mm_range()`: local flush now, one entry per other CPU
    /// in mm_cpumask, no IPI. Returns when every entry will have been applied.
    pub fn latr_flush_tlb_mm_range(&mut self, cpu: CpuId, mm: MmId, start: u64, end: u64, stride_shift: u32, freed_tables: bool) -> Ns {
        self.kfn_enter(cpu, KFn::FlushTlbMmRange);
        let new_gen = self.inc_mm_tlb_gen(mm);
        let pages = if end == FLUSH_ALL { u64::MAX } else { (end - start) << 12 >> stride_shift };
        let (start, end) = if end != FLUSH_ALL && pages <= self.p.tlb_single_page_flush_ceiling { (start, end) } else { (0, FLUSH_ALL) };
        let info = FlushInfo { mm: Some(mm), start, end, stride_shift, new_tlb_gen: Some(new_gen), initiating_cpu: cpu, freed_tables, trim_cpumask: false };
        if self.cpus[cpu.0 as usize].tlbstate.loaded_mm == Some(mm) {
            self.flush_tlb_func(cpu, &info);
        }
        let now = self.now(cpu);
        let ctx_id = self.mm(mm).ctx_id;
        let targets: Vec<CpuId> = self.mm(mm).cpumask.iter().filter(|&c| c != cpu).collect();
        let l = self.latr.as_mut().expect("latr on");
        l.stats.lazy_flushes += 1;
        let apply_at = (now / l.tick_ns + 1) * l.tick_ns;
        let mut release = now;
        for &c in &targets {
            l.queues[c.0 as usize].push(Entry { mm, ctx_id, start, end, stride_shift, tlb_gen: new_gen, apply_at });
            l.stats.posted += 1;
            release = release.max(apply_at);
        }
        l.last_release = release;
        let post = l.post_ns * targets.len() as f64;
        self.charge_sys(cpu, post);
        if !targets.is_empty() {
            self.mark("latr lazy flush posted");
        }
        self.kfn_exit(cpu);
        release
    }

    /// Hold the frees of a lazy munmap until every CPU has applied its entries (or free them now
    /// if no other CPU was sent one).
    pub fn latr_defer_free(&mut self, cpu: CpuId, pages: Vec<Pfn>) {
        let now = self.now(cpu);
        let l = self.latr.as_mut().expect("latr on");
        if l.last_release <= now || pages.is_empty() {
            for p in pages {
                self.put_page(p);
            }
            return;
        }
        l.stats.deferred_pages += pages.len() as u64;
        let release_at = l.last_release;
        l.frees.push(Deferred { release_at, pages });
        self.mark("latr free deferred");
    }

    /// Apply `cpu`'s entries due by `upto` (all of them with `upto = Ns::MAX`).
    fn latr_apply(&mut self, cpu: CpuId, upto: Ns, at_switch: bool) {
        let ci = cpu.0 as usize;
        let Some(l) = self.latr.as_mut() else { return };
        if l.queues[ci].is_empty() {
            return;
        }
        let q = std::mem::take(&mut l.queues[ci]);
        let (due, keep): (Vec<Entry>, Vec<Entry>) = q.into_iter().partition(|e| e.apply_at <= upto);
        l.queues[ci] = keep;
        if at_switch {
            l.stats.applied_switch += due.len() as u64;
        } else {
            l.stats.applied_tick += due.len() as u64;
        }
        let mut cost = 0.0;
        let mut when: Ns = 0;
        for e in &due {
            when = when.max(e.apply_at.min(upto));
            let st = &self.cpus[ci].tlbstate;
            let Some(a) = st.ctxs.iter().position(|c| c.ctx_id == e.ctx_id) else { continue };
            let a16 = a as u16;
            if e.end == FLUSH_ALL || !self.p.pcid {
                if self.p.pcid {
                    self.cpus[ci].tlb.flush_asid(a16);
                } else if st.loaded_mm == Some(e.mm) {
                    self.cpus[ci].tlb.flush_all();
                }
                cost += self.p.flush_full_ns;
                let ctx = &mut self.cpus[ci].tlbstate.ctxs[a];
                ctx.tlb_gen = ctx.tlb_gen.max(e.tlb_gen.min(self.mms[e.mm.0 as usize].as_ref().map_or(0, |m| m.tlb_gen)));
            } else {
                let step = 1u64 << (e.stride_shift - PAGE_SHIFT);
                let mut v = e.start;
                while v < e.end {
                    self.cpus[ci].tlb.flush_one(a16, v);
                    v += step;
                    cost += self.p.invlpg_ns;
                }
                let ctx = &mut self.cpus[ci].tlbstate.ctxs[a];
                if ctx.tlb_gen + 1 == e.tlb_gen {
                    ctx.tlb_gen = e.tlb_gen;
                }
            }
        }
        if !due.is_empty() {
            self.mark(if at_switch { "latr applied at context switch" } else { "latr applied at tick" });
            if at_switch {
                self.charge_sys(cpu, cost);
                if let Some(l) = self.latr.as_mut() {
                    l.stats.apply_switch_ns += cost;
                }
            } else {
                self.steal_irq_time(cpu, when, round_ns(cost));
            }
        }
    }

    /// At `switch_mm_irqs_off()` / `enter_lazy_tlb()`: apply every pending entry of this CPU.
    #[inline]
    pub fn latr_on_switch(&mut self, cpu: CpuId) {
        if self.latr.is_some() {
            self.latr_apply(cpu, Ns::MAX, true);
        }
    }

    /// Before a step of `cpu` (whose clock is the present): every CPU's ticks up to now have
    /// applied their entries; release the frees whose entries are all applied.
    pub fn latr_advance(&mut self, cpu: CpuId) {
        let now = self.now(cpu);
        self.latr_numa_scans_due(cpu, now);
        for c in 0..self.cpus.len() {
            self.latr_apply(CpuId(c as u32), now, false);
        }
        let l = self.latr.as_mut().expect("latr on");
        if l.frees.iter().all(|d| d.release_at > now) {
            return;
        }
        let frees = std::mem::take(&mut l.frees);
        let (due, keep): (Vec<Deferred>, Vec<Deferred>) = frees.into_iter().partition(|d| d.release_at <= now);
        l.frees = keep;
        for d in due {
            for p in d.pages {
                self.put_page(p);
            }
        }
    }

    /// At the end of a run: apply everything and release every held-back page. NUMA scan ranges
    /// still waiting for their tick are dropped (their PTEs were never changed).
    pub fn latr_drain(&mut self) {
        let Some(l) = self.latr.as_mut() else { return };
        l.scans.clear();
        let frees = std::mem::take(&mut l.frees);
        for c in 0..self.cpus.len() {
            self.latr_apply(CpuId(c as u32), Ns::MAX, false);
        }
        for d in frees {
            for p in d.pages {
                self.put_page(p);
            }
        }
    }

    /// For the oracle: a LATR entry not yet applied on `cpu` covers (mm, vpn).
    pub fn latr_covers(&self, cpu: CpuId, mm: MmId, vpn: u64) -> bool {
        self.latr.as_ref().is_some_and(|l| l.queues[cpu.0 as usize].iter().any(|e| e.mm == mm && (e.end == FLUSH_ALL || (vpn >= e.start && vpn < e.end))))
    }

    /// For the structural checker: `cpu` has entries pending for `mm`, so it may lag its tlb_gen.
    pub fn latr_pending_for(&self, cpu: CpuId, mm: MmId) -> bool {
        self.latr.as_ref().is_some_and(|l| l.queues[cpu.0 as usize].iter().any(|e| e.mm == mm))
    }

    /// A lazy munmap holds a reference on `pfn`.
    pub fn latr_holds(&self, pfn: Pfn) -> bool {
        self.latr.as_ref().is_some_and(|l| l.frees.iter().any(|d| d.pages.contains(&pfn)))
    }

    /// For the structural checker: pages held back by LATR (each holds one reference).
    pub fn latr_held_pages(&self) -> Vec<Pfn> {
        self.latr.as_ref().map_or(Vec::new(), |l| l.frees.iter().flat_map(|d| d.pages.iter().copied()).collect())
    }

    /// LATR's lazy migration (the paper's `CONFIG_LAZY_MIGRATION`): `task_numa_work()` posts the
    /// range instead of calling `change_prot_numa()`. Nothing changes now; at the next tick the
    /// first CPU to process it makes the PTEs PROT_NONE without a flush (`change_prot_numa(vma,
    /// start, end, 2)`) and every CPU invalidates the range locally at that tick. Returns 1, as
    /// `native_flush_save_state()` does (the scanner counts the range as updated).
    pub fn latr_defer_numa_scan(&mut self, cpu: CpuId, mm: MmId, start: u64, end: u64, target_node: Option<u32>) -> u64 {
        let now = self.now(cpu);
        let l = self.latr.as_mut().expect("latr on");
        let apply_at = (now / l.tick_ns + 1) * l.tick_ns;
        l.scans.push(LazyScan { mm, start, end, target_node, apply_at });
        l.stats.numa_scans_posted += 1;
        // One entry in this CPU's array, with cpu_online_mask as its target mask.
        let post = l.post_ns;
        self.charge_sys(cpu, post);
        self.mark("latr lazy numa scan posted");
        1
    }

    /// Apply the NUMA scan ranges whose tick has come, on `cpu` (the first CPU to step after the
    /// tick; its time is charged to `task_numa_work`): PTEs made PROT_NONE, then one entry per
    /// CPU that may cache the mm, due at that tick (applied by the caller's loop, as irq time).
    fn latr_numa_scans_due(&mut self, cpu: CpuId, now: Ns) {
        let l = self.latr.as_mut().expect("latr on");
        if l.scans.first().is_none_or(|s| s.apply_at > now) {
            return;
        }
        let n = l.scans.iter().take_while(|s| s.apply_at <= now).count();
        let due: Vec<LazyScan> = l.scans.drain(..n).collect();
        for s in due {
            self.latr_numa_scan_apply(cpu, s);
        }
    }

    fn latr_numa_scan_apply(&mut self, cpu: CpuId, s: LazyScan) {
        use crate::mm::mmu_gather::MmuGather;
        use crate::mm::mprotect::ChangeMode;
        if self.mms.get(s.mm.0 as usize).is_none_or(|m| m.is_none()) {
            return; // the mm exited before the tick
        }
        self.kfn_enter(cpu, KFn::TaskNumaWork);
        // The VMAs as they are at the tick; the scanner's skips again (an mprotect or munmap may
        // have come in between).
        let vmas: Vec<crate::sim::Vma> = self.mm(s.mm).vmas.values().filter(|v| v.end > s.start && v.start < s.end).cloned().collect();
        let mut tlb = MmuGather::new(s.mm, false);
        let mut changed = 0;
        for v in &vmas {
            let ro_file = matches!(v.backing, Backing::File { .. }) && v.flags & (vm::READ | vm::WRITE) == vm::READ;
            if !v.is_accessible() || ro_file {
                continue;
            }
            changed += self.change_pte_range(cpu, &mut tlb, v, s.start.max(v.start), s.end.min(v.end), ChangeMode::ProtNuma { target_node: s.target_node });
        }
        let l = self.latr.as_mut().expect("latr on");
        l.stats.numa_scans_applied += 1;
        l.stats.numa_ptes_hinted += changed;
        if tlb.cleared_ptes {
            // change_protection(..., prot_numa = 2) does not flush: every CPU invalidates the
            // range at this tick instead (native_flush_saved_states() → flush_tlb_func()).
            let new_gen = self.inc_mm_tlb_gen(s.mm);
            let pages = tlb.end - tlb.start;
            let (start, end) = if pages <= self.p.tlb_single_page_flush_ceiling { (tlb.start, tlb.end) } else { (0, FLUSH_ALL) };
            let ctx_id = self.mm(s.mm).ctx_id;
            let mut targets: Vec<CpuId> = self.mm(s.mm).cpumask.iter().collect();
            if self.cpus[cpu.0 as usize].tlbstate.loaded_mm == Some(s.mm) && !targets.contains(&cpu) {
                targets.push(cpu);
            }
            let l = self.latr.as_mut().expect("latr on");
            for c in targets {
                l.queues[c.0 as usize].push(Entry { mm: s.mm, ctx_id, start, end, stride_shift: PAGE_SHIFT, tlb_gen: new_gen, apply_at: s.apply_at });
                l.stats.posted += 1;
            }
            self.mark("latr lazy numa scan applied at tick");
        }
        self.kfn_exit(cpu);
    }

    /// A NUMA hint fault's migration ended (mm/numa_fault.rs); under LATR every hinted folio was
    /// hinted lazily, so a success is a migration on LATR's path.
    pub fn latr_note_numa_migration(&mut self, migrated: bool) {
        if let (Some(l), true) = (self.latr.as_mut(), migrated) {
            l.stats.numa_migrations += 1;
            self.mark("latr migration of a lazily hinted folio");
        }
    }

    /// `kernel.latr_migrate_unmap` (a misuse switch, not the paper's design): instead of
    /// `try_to_unmap_flush()`, `migrate_pages_batch()` flushes locally and posts one lazy entry
    /// per other CPU of every mm it unmapped from. Returns false (nothing done) unless the
    /// switch is on and the batch has a flush to do. The caller then copies and maps the new
    /// frame at once: a CPU whose entry is still pending can write the old frame after the copy.
    pub fn latr_migrate_unmap_flush(&mut self, cpu: CpuId, b: &mut crate::mm::rmap::TlbUnmapBatch, mms: &[MmId]) -> bool {
        if !self.latr.as_ref().is_some_and(|l| l.migrate_unmap) {
            return false;
        }
        if !b.flush_required {
            // Nothing cached anywhere: the sources need not wait.
            self.latr.as_mut().expect("latr on").last_release = 0;
            return false;
        }
        let mut done: Vec<MmId> = Vec::new();
        let mut release = 0;
        for &mm in mms {
            if !done.contains(&mm) {
                done.push(mm);
                release = release.max(self.latr_flush_tlb_mm_range(cpu, mm, 0, FLUSH_ALL, PAGE_SHIFT, false));
            }
        }
        // The sources are held until the last entry of every mm's flush is applied.
        self.latr.as_mut().expect("latr on").last_release = release;
        b.cpumask.clear_all();
        b.flush_required = false;
        b.writable = false;
        self.mark("latr lazy migration unmap (misuse)");
        true
    }

    /// With `kernel.latr_migrate_unmap`: hold the migrated source folio until every entry of the
    /// batch's lazy flush is applied (as LATR holds a munmap's pages). True if held.
    pub fn latr_hold_migrated_source(&mut self, cpu: CpuId, src: Pfn) -> bool {
        if !self.latr.as_ref().is_some_and(|l| l.migrate_unmap) {
            return false;
        }
        self.latr_defer_free(cpu, vec![src]);
        true
    }
}
