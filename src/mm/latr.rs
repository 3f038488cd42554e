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
//! Modelled: per-CPU entry queues (the paper's per-core LATR states), application at the next
//! tick boundary (ticks at multiples of 1/kernel.hz on every CPU) or at `switch_mm_irqs_off()`
//! / `enter_lazy_tlb()`, delayed frees, the posting cost. Departures: the applying CPU's work is
//! charged as interrupt time; page migration still uses the kernel's synchronous flush (the
//! paper's lazy migration is not modelled); the munmapped virtual range may be reused before
//! the entries are applied (the paper holds it back; in the model a thread that maps the same
//! range again flushes its own CPU first, and other CPUs apply at their next tick).
//!
//! | state          | meaning                                                  | who changes it           |
//! |----------------|----------------------------------------------------------|--------------------------|
//! | `queues[cpu]`  | entries not yet applied on that CPU                      | latr_flush / latr_apply  |
//! | `frees`        | pages held back, with the time every target has applied  | latr_defer_free / latr_advance |
//!
//! What must hold: a held-back page is released only after every entry of its flush has been
//! applied (its release time is the latest of the entries' apply times).

use crate::config::Config;
use crate::kernel::profile::KFn;
use crate::sim::Sim;
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

#[derive(Clone, Debug)]
struct Deferred {
    release_at: Ns,
    pages: Vec<Pfn>,
}

#[derive(Clone, Debug)]
pub struct Latr {
    pub mprotect: bool,
    post_ns: f64,
    tick_ns: Ns,
    queues: Vec<Vec<Entry>>,
    frees: Vec<Deferred>,
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
            post_ns: c.float("cost.latr_post_ns"),
            tick_ns: 1_000_000_000 / c.int("kernel.hz") as u64,
            queues: vec![Vec::new(); ncpus],
            frees: Vec::new(),
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
                self.steal_irq_time(cpu, when, cost.round() as Ns);
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

    /// At the end of a run: apply everything and release every held-back page.
    pub fn latr_drain(&mut self) {
        let Some(l) = self.latr.as_mut() else { return };
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
}
