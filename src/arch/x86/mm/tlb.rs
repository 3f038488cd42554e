//! TLB flushing and address-space switching: arch/x86/mm/tlb.c as of Linux 6.18.
//!
//! Modelled: `flush_tlb_mm_range()` with the single-page ceiling, `native_flush_tlb_multi()`
//! with the `should_flush_tlb()` predicate (lazy CPUs skipped unless page tables were freed),
//! `should_trim_cpumask()` (6.14+ lazy mm_cpumask), `flush_tlb_func()` with the per-ASID
//! `tlb_gen` partial/full decision, `switch_mm_irqs_off()` with `choose_new_asid()` and the lazy
//! catch-up flush, `enter_lazy_tlb()`, and `arch_tlbbatch_flush()`.
//! INVLPGB broadcast flushes and global ASIDs (AMD, 6.15+) are in invlpgb.rs, the RAR RFC in
//! rar.rs; the hooks here branch to them. Left out: PTI's user/kernel PCID pairs,
//! LAM, and the paravirt (KVM) flush hook that skips preempted vCPUs.
//!
//! `cpu_tlbstate` per CPU:
//!
//! | field            | meaning                                             | who changes it                  |
//! |------------------|-----------------------------------------------------|---------------------------------|
//! | loaded_mm        | mm whose page tables CR3 points at (None = init_mm) | switch_mm_irqs_off              |
//! | loaded_mm_asid   | the PCID slot in use                                | switch_mm_irqs_off              |
//! | is_lazy          | a kernel thread/idle borrows loaded_mm              | enter_lazy_tlb / switch_mm      |
//! | ctxs[a].ctx_id   | which mm the slot's TLB entries belong to           | switch_mm (new ASID)            |
//! | ctxs[a].tlb_gen  | the mm generation this CPU's entries are current to | flush_tlb_func, switch_mm       |
//!
//! What must hold: if `ctxs[a].tlb_gen == mm.tlb_gen` then no TLB entry tagged `a` is staler than
//! the last flush request on that mm (this is the bet flush_tlb_func's early returns make).

use crate::mm::vmstat::VmEvent;
use crate::sim::{round_ns, Sim, TaskState};
use crate::kernel::profile::KFn;
use crate::types::*;

/// TLB_NR_DYN_ASIDS.
pub const TLB_NR_DYN_ASIDS: usize = 6;
/// TLB_FLUSH_ALL as an end vpn.
pub const FLUSH_ALL: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, Default)]
pub struct TlbContext {
    pub ctx_id: u64,
    pub tlb_gen: u64,
}

#[derive(Clone, Debug)]
pub struct TlbState {
    pub loaded_mm: Option<MmId>,
    pub loaded_mm_asid: u16,
    pub is_lazy: bool,
    pub next_asid: u16,
    pub ctxs: [TlbContext; TLB_NR_DYN_ASIDS],
}

impl TlbState {
    pub fn new() -> Self {
        TlbState { loaded_mm: None, loaded_mm_asid: 0, is_lazy: false, next_asid: 1, ctxs: [TlbContext::default(); TLB_NR_DYN_ASIDS] }
    }
}

impl Default for TlbState {
    fn default() -> Self {
        Self::new()
    }
}

/// `enum tlb_flush_reason` (include/linux/mm_types.h) for the tlb:tlb_flush tracepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushReason {
    OnTaskSwitch,
    RemoteShootdown,
    LocalShootdown,
    LocalMmShootdown,
    RemoteSendIpi,
    RemoteWrongCpu,
}

/// `struct flush_tlb_info`. Addresses are vpns; `end == FLUSH_ALL` is a full flush.
#[derive(Clone, Copy, Debug)]
pub struct FlushInfo {
    pub mm: Option<MmId>,
    pub start: u64,
    pub end: u64,
    pub stride_shift: u32,
    /// None = TLB_GENERATION_INVALID (batched flushes).
    pub new_tlb_gen: Option<u64>,
    pub initiating_cpu: CpuId,
    pub freed_tables: bool,
    pub trim_cpumask: bool,
}

impl Sim {
    fn trace_tlb_flush(&mut self, cpu: CpuId, reason: FlushReason, pages: i64) {
        let st = &mut self.cpus[cpu.0 as usize].stats;
        st.tlb_flush_events += 1;
        st.tlb_flush_by_reason[reason as usize] += 1;
        self.trace(cpu, || crate::report::trace_log::TraceEvent::TlbFlush { reason, pages });
    }

    /// When `to` takes the `nth` IPI (from 1) that `from` sends one after another from `t0`:
    /// the sends, the delivery (across sockets if need be), and — a target with interrupts off,
    /// spinning on or holding an irq-disabling lock — the end of that section
    /// (kernel/locking.rs).
    pub(crate) fn ipi_taken_at(&self, from: CpuId, to: CpuId, t0: Ns, nth: u32) -> Ns {
        let hop = self.ipi_cross_socket_ns(from, to);
        let arrive = t0 + round_ns(self.p.ipi_send_ns * nth as f64 + self.p.ipi_deliver_ns + hop);
        self.locks.irq_on_at(to, arrive)
    }

    /// Extra delivery time of an IPI (and its acknowledgement) between sockets.
    fn ipi_cross_socket_ns(&self, from: CpuId, to: CpuId) -> f64 {
        if self.cpus[from.0 as usize].socket != self.cpus[to.0 as usize].socket { self.p.ipi_cross_socket_ns } else { 0.0 }
    }

    /// `inc_mm_tlb_gen()`.
    pub fn inc_mm_tlb_gen(&mut self, mm: MmId) -> u64 {
        let m = self.mm_mut(mm);
        m.tlb_gen += 1;
        m.tlb_gen
    }

    /// `flush_tlb_mm_range()`: flush `[start, end)` (vpns) of `mm` on every CPU that may cache it.
    pub fn flush_tlb_mm_range(&mut self, cpu: CpuId, mm: MmId, start: u64, end: u64, stride_shift: u32, freed_tables: bool) {
        self.kfn_enter(cpu, KFn::FlushTlbMmRange);
        self.flush_tlb_mm_range_body(cpu, mm, start, end, stride_shift, freed_tables);
        self.kfn_exit(cpu);
    }

    fn flush_tlb_mm_range_body(&mut self, cpu: CpuId, mm: MmId, start: u64, end: u64, stride_shift: u32, freed_tables: bool) {
        let new_gen = self.inc_mm_tlb_gen(mm);
        let pages = if end == FLUSH_ALL { u64::MAX } else { (end - start) << 12 >> stride_shift };
        let (start, end) = if end != FLUSH_ALL && pages <= self.p.tlb_single_page_flush_ceiling { (start, end) } else { (0, FLUSH_ALL) };
        let mut info = FlushInfo { mm: Some(mm), start, end, stride_shift, new_tlb_gen: Some(new_gen), initiating_cpu: cpu, freed_tables, trim_cpumask: false };
        if self.mm_global_asid(mm) != 0 {
            // 6.15+ with INVLPGB (or the RAR RFC): no IPIs (invlpgb.rs).
            self.broadcast_tlb_flush(cpu, &info);
        } else if self.mm(mm).cpumask.any_but(cpu) {
            info.trim_cpumask = self.should_trim_cpumask(cpu, mm);
            let mut mask = self.mm(mm).cpumask.clone();
            if self.inject == crate::check::Inject::StaleMmCpumask {
                crate::check::drop_one_cpu(&mut mask, cpu);
            }
            self.flush_tlb_multi(cpu, &mask, &info);
            self.consider_global_asid(cpu, mm);
        } else if self.cpus[cpu.0 as usize].tlbstate.loaded_mm == Some(mm) {
            self.flush_tlb_func(cpu, &info);
        }
    }

    /// `flush_tlb_mm()`: a full flush of an mm. x86 defines it as
    /// `flush_tlb_mm_range(mm, 0, TLB_FLUSH_ALL, 0, true)`: with freed_tables set, so it reaches
    /// lazy CPUs too.
    pub fn flush_tlb_mm(&mut self, cpu: CpuId, mm: MmId) {
        self.flush_tlb_mm_range(cpu, mm, 0, FLUSH_ALL, PAGE_SHIFT, true);
    }

    /// `flush_tlb_page()`.
    pub fn flush_tlb_page(&mut self, cpu: CpuId, mm: MmId, vpn: u64) {
        self.flush_tlb_mm_range(cpu, mm, vpn, vpn + 1, PAGE_SHIFT, false);
    }

    /// `should_trim_cpumask()` (6.14+): at most once per interval a flush also goes to CPUs that
    /// are in mm_cpumask but run another mm, so they drop out of the mask.
    fn should_trim_cpumask(&mut self, cpu: CpuId, mm: MmId) -> bool {
        let trim = self.p.mm_cpumask_trim_ns;
        if trim == 0 {
            return false;
        }
        let now = self.now(cpu);
        let m = self.mm_mut(mm);
        if now > m.next_trim_cpumask {
            m.next_trim_cpumask = now + trim;
            return true;
        }
        false
    }

    /// `should_flush_tlb()`: the per-CPU predicate of `native_flush_tlb_multi()`.
    fn should_flush_tlb(&self, cpu: CpuId, info: &FlushInfo) -> bool {
        let st = &self.cpus[cpu.0 as usize].tlbstate;
        // Lazy TLB will get flushed at the next context switch.
        if st.is_lazy && self.p.lazy_ipi_skip {
            return false;
        }
        let Some(mm) = info.mm else { return true };
        if self.p.mm_cpumask_trim_ns == 0 {
            // Before 6.14 the bit was cleared at switch time: a CPU in the mask runs the mm.
            return true;
        }
        st.loaded_mm == Some(mm) || info.trim_cpumask
    }

    /// `native_flush_tlb_multi()` via `on_each_cpu_cond_mask()`: run flush_tlb_func locally if the
    /// initiating CPU is in the mask, and by IPI (waiting for completion) on every other CPU
    /// selected. With `freed_tables`, lazy CPUs are IPI'd too (`on_each_cpu_mask`), since they
    /// could otherwise walk freed page-table pages speculatively.
    pub fn flush_tlb_multi(&mut self, cpu: CpuId, mask: &crate::sim::CpuMask, info: &FlushInfo) {
        self.vmstat.count(VmEvent::NR_TLB_REMOTE_FLUSH);
        self.trace_tlb_flush(cpu, FlushReason::RemoteSendIpi, info.nr_pages());
        // The CPUs selected, as a mask (inline up to 256 CPUs: no host allocation per flush).
        let mut targets = mask.empty_like();
        let mut skipped = false;
        for c in mask.iter() {
            if info.freed_tables || self.should_flush_tlb(c, info) {
                targets.set(c);
            } else {
                skipped = true;
            }
        }
        if self.oracle.is_some() && skipped {
            self.mark("lazy cpu skipped by a flush");
        }
        if self.p.flush_multi_ns > 0.0 {
            // The initiator's walk of the mask (should_flush_tlb() per CPU, the cfd masks)
            // before the first IPI goes out, IPIs or none (cost.flush_multi_ns).
            self.kfn_enter(cpu, KFn::SmpCallFunctionManyCond);
            self.charge_sys(cpu, self.p.flush_multi_ns);
            self.kfn_exit(cpu);
        }
        let t0 = self.now(cpu);
        let mut done = t0;
        let mut sent = 0u32;
        for c in targets.iter() {
            if c == cpu {
                continue;
            }
            sent += 1;
            self.trace(cpu, || crate::report::trace_log::TraceEvent::IpiSendCpu { cpu: c.0 });
            let taken = self.ipi_taken_at(cpu, c, t0, sent);
            let cost = self.remote_flush_tlb_func(c, info, taken);
            done = done.max(taken + cost);
        }
        self.kfn_enter(cpu, KFn::SmpCallFunctionManyCond);
        if sent > 0 {
            self.charge_sys(cpu, self.p.ipi_send_ns * sent as f64);
        }
        if targets.test(cpu) {
            self.flush_tlb_func(cpu, info);
        }
        // smp_call_function_many(..., wait=1): the initiator spins until every target has run it.
        let now = self.now(cpu);
        if done > now {
            self.charge_sys_ns(cpu, done - now);
        }
        self.kfn_exit(cpu);
    }

    /// Deliver a flush IPI to `cpu` and run `flush_tlb_func` there. Returns the handler's cost in
    /// ns, which is stolen from whatever the target was doing.
    fn remote_flush_tlb_func(&mut self, cpu: CpuId, info: &FlushInfo, arrive: Ns) -> Ns {
        // Run the handler to learn its cost, then account that cost as stolen irq time.
        let ci = cpu.0 as usize;
        let (clock, sys) = (self.cpus[ci].clock, self.cpus[ci].stats.sys_ns);
        self.prof.muted = true;
        self.flush_tlb_func(cpu, info);
        self.prof.muted = false;
        // A user spin loop running there refills what the flush dropped (workload/llm.rs).
        self.llm_spinner_refill(cpu);
        let work = self.cpus[ci].clock - clock;
        self.cpus[ci].clock = clock;
        self.cpus[ci].stats.sys_ns = sys;
        let cost = work + round_ns(self.p.ipi_handle_ns);
        self.steal_irq_time(cpu, arrive, cost);
        cost
    }

    /// `flush_tlb_func()`: bring this CPU's TLB up to date for its loaded mm.
    pub fn flush_tlb_func(&mut self, cpu: CpuId, f: &FlushInfo) {
        let local = cpu == f.initiating_cpu;
        let ci = cpu.0 as usize;
        if !local {
            self.cpus[ci].stats.irq_tlb_count += 1;
            self.vmstat.count(VmEvent::NR_TLB_REMOTE_FLUSH_RECEIVED);
        }
        let loaded = self.cpus[ci].tlbstate.loaded_mm;
        if let Some(mm) = f.mm {
            if Some(mm) != loaded {
                // The CPU was left in the mm_cpumask of the target mm. Clear it.
                if let Some(m) = self.mms[mm.0 as usize].as_mut() {
                    m.cpumask.clear(cpu);
                }
                self.trace_tlb_flush(cpu, FlushReason::RemoteWrongCpu, 0);
                return;
            }
        }
        let Some(loaded) = loaded else { return };
        if self.cpus[ci].tlbstate.is_lazy {
            // Lazy mode: switch to init_mm rather than flush (paging-structure caches).
            self.switch_mm_irqs_off(cpu, None);
            return;
        }
        // Reload the ASID if transitioning into a global ASID; broadcast ASIDs are always kept
        // up to date by INVLPGB (invlpgb.rs).
        if self.mm_needs_global_asid(loaded, self.cpus[ci].tlbstate.loaded_mm_asid) {
            self.switch_mm_irqs_off(cpu, Some(loaded));
        }
        let asid = self.cpus[ci].tlbstate.loaded_mm_asid;
        if crate::arch::x86::mm::invlpgb::Broadcast::is_global_asid(asid) {
            if !self.bcast.invlpgb {
                // RAR RFC (rar.rs): nothing INVLPGBs the batched unmaps of a global-ASID mm, so
                // an IPI'd flush drops the whole global PCID here (a model choice).
                self.cpus[ci].tlb.flush_asid(asid);
                self.charge_sys(cpu, self.p.flush_full_ns);
            }
            return;
        }
        let asid = self.cpus[ci].tlbstate.loaded_mm_asid;
        let local_gen = self.cpus[ci].tlbstate.ctxs[asid as usize].tlb_gen;
        if let Some(g) = f.new_tlb_gen {
            if g <= local_gen {
                return;
            }
        }
        let mm_gen = self.mm(loaded).tlb_gen;
        let reason = if !local {
            FlushReason::RemoteShootdown
        } else if f.mm.is_none() {
            FlushReason::LocalShootdown
        } else {
            FlushReason::LocalMmShootdown
        };
        if local_gen == mm_gen {
            self.trace_tlb_flush(cpu, reason, 0);
            return;
        }
        let mut nr_invalidate = -1; // TLB_FLUSH_ALL
        if f.end != FLUSH_ALL && f.new_tlb_gen == Some(local_gen + 1) && f.new_tlb_gen == Some(mm_gen) {
            let step = 1u64 << (f.stride_shift - PAGE_SHIFT);
            let mut n = 0u64;
            let mut v = f.start;
            while v < f.end {
                self.cpus[ci].tlb.flush_one(asid, v);
                v += step;
                n += 1;
            }
            nr_invalidate = n as i64;
            if local {
                self.vmstat.add(VmEvent::NR_TLB_LOCAL_FLUSH_ONE, n);
            }
            self.charge_sys(cpu, self.p.invlpg_ns * n as f64);
        } else {
            self.local_flush_asid(cpu, asid);
            if local {
                self.vmstat.count(VmEvent::NR_TLB_LOCAL_FLUSH_ALL);
            }
            self.charge_sys(cpu, self.p.flush_full_ns);
        }
        self.cpus[ci].tlbstate.ctxs[asid as usize].tlb_gen = mm_gen;
        self.trace_tlb_flush(cpu, reason, nr_invalidate);
    }

    /// Flush the user entries of one ASID (CR3 reload / INVPCID single context); without PCID every
    /// user entry goes.
    fn local_flush_asid(&mut self, cpu: CpuId, asid: u16) {
        let c = &mut self.cpus[cpu.0 as usize];
        if self.p.pcid {
            c.tlb.flush_asid(asid);
        } else {
            c.tlb.flush_all();
        }
    }

    /// `choose_new_asid()`: reuse the slot already holding `mm`, else take the next one round-robin.
    /// A global ASID is loaded without a flush, except under the RAR RFC (rar.rs) on a CPU that
    /// was not in mm_cpumask (`new_cpu`): RAR actions go to mm_cpumask only, so such a CPU may
    /// have missed some.
    fn choose_new_asid(&mut self, cpu: CpuId, mm: MmId, next_tlb_gen: u64, new_cpu: bool) -> (u16, bool) {
        if !self.p.pcid {
            return (0, true);
        }
        let global = self.mm_global_asid(mm);
        if global != 0 {
            return (global, self.bcast.rar && new_cpu);
        }
        let ctx_id = self.mm(mm).ctx_id;
        let st = &mut self.cpus[cpu.0 as usize].tlbstate;
        for a in 0..TLB_NR_DYN_ASIDS {
            if st.ctxs[a].ctx_id == ctx_id {
                return (a as u16, st.ctxs[a].tlb_gen < next_tlb_gen);
            }
        }
        let mut a = st.next_asid;
        st.next_asid += 1;
        if a as usize >= TLB_NR_DYN_ASIDS {
            a = 0;
            st.next_asid = 1;
        }
        (a, true)
    }

    /// `switch_mm_irqs_off()`: load `next` (None = init_mm) on `cpu`.
    pub fn switch_mm_irqs_off(&mut self, cpu: CpuId, next: Option<MmId>) {
        // Finish any remote TLB flushes pending from this CPU (INVLPGB).
        self.tlbsync(cpu);
        // LATR (mm/latr.rs): apply this CPU's lazy invalidations.
        self.latr_on_switch(cpu);
        let ci = cpu.0 as usize;
        let prev = self.cpus[ci].tlbstate.loaded_mm;
        let was_lazy = self.cpus[ci].tlbstate.is_lazy;
        self.cpus[ci].tlbstate.is_lazy = false;
        let (new_asid, need_flush);
        if prev == next {
            let Some(mm) = next else { return };
            let asid = self.cpus[ci].tlbstate.loaded_mm_asid;
            if self.mm_needs_global_asid(mm, asid) {
                // The mm is transitioning to a global ASID (invlpgb.rs).
                self.mark("switch to global asid");
                // The RAR RFC passes new_cpu = true here: the first load of the global ASID
                // flushes it.
                (new_asid, need_flush) = (self.mm_global_asid(mm), self.bcast.rar);
            } else if crate::arch::x86::mm::invlpgb::Broadcast::is_global_asid(asid) {
                // Broadcast TLB invalidation keeps this ASID up to date all the time.
                return;
            } else {
            // Same mm: a flush is needed only if we were lazy and fell behind (tlb_gen catch-up).
            if !was_lazy {
                return;
            }
            if self.cpus[ci].tlbstate.ctxs[asid as usize].tlb_gen == self.mm(mm).tlb_gen {
                return;
            }
            if self.inject == crate::check::Inject::LazyNoCatchup {
                return;
            }
            self.mark("lazy catch-up flush");
            new_asid = asid;
            need_flush = true;
            }
        } else {
            if self.p.mm_cpumask_trim_ns == 0 {
                // Before 6.14: stop receiving flush IPIs for prev now.
                if let Some(p) = prev.and_then(|p| self.mms[p.0 as usize].as_mut()) {
                    p.cpumask.clear(cpu);
                }
            }
            let Some(mm) = next else {
                // init_mm: kernel mappings only (global entries, not modelled). Without PCID the
                // CR3 write drops every non-global entry, so prev's user entries go too; with
                // PCID they stay under prev's ASID.
                self.cpus[ci].tlbstate.loaded_mm = None;
                if !self.p.pcid && prev.is_some() {
                    self.cpus[ci].tlb.flush_all();
                    self.charge_sys(cpu, self.p.flush_full_ns);
                }
                // As for any other next mm, the switch ends with trace_tlb_flush(
                // TLB_FLUSH_ON_TASK_SWITCH, ...).
                self.trace_tlb_flush(cpu, FlushReason::OnTaskSwitch, -1);
                return;
            };
            let new_cpu = !self.mm(mm).cpumask.test(cpu);
            self.mm_mut(mm).cpumask.set(cpu);
            let mm_gen_now = self.mm(mm).tlb_gen;
            (new_asid, need_flush) = self.choose_new_asid(cpu, mm, mm_gen_now, new_cpu);
        }
        let mm = next.expect("next is an mm here");
        let (ctx_id, mm_gen_now) = (self.mm(mm).ctx_id, self.mm(mm).tlb_gen);
        let st = &mut self.cpus[ci].tlbstate;
        st.loaded_mm = Some(mm);
        st.loaded_mm_asid = new_asid;
        if need_flush {
            if !crate::arch::x86::mm::invlpgb::Broadcast::is_global_asid(new_asid) {
                st.ctxs[new_asid as usize] = TlbContext { ctx_id, tlb_gen: mm_gen_now };
            }
            self.local_flush_asid(cpu, new_asid);
            self.charge_sys(cpu, self.p.flush_full_ns);
        }
        self.trace_tlb_flush(cpu, FlushReason::OnTaskSwitch, -1);
    }

    /// `enter_lazy_tlb()`: a kernel thread or idle borrows the loaded mm.
    pub fn enter_lazy_tlb(&mut self, cpu: CpuId) {
        self.tlbsync(cpu);
        self.latr_on_switch(cpu);
        let st = &mut self.cpus[cpu.0 as usize].tlbstate;
        if st.loaded_mm.is_none() {
            return;
        }
        if self.p.lazy_tlb {
            st.is_lazy = true;
        } else {
            self.switch_mm_irqs_off(cpu, None);
        }
    }

    /// `arch_tlbbatch_flush()`: one full flush on every CPU of a reclaim/migration batch, with
    /// mm = NULL and no generation (used by try_to_unmap_flush()).
    pub fn arch_tlbbatch_flush(&mut self, cpu: CpuId, mask: &crate::sim::CpuMask) {
        let info = FlushInfo { mm: None, start: 0, end: FLUSH_ALL, stride_shift: PAGE_SHIFT, new_tlb_gen: None, initiating_cpu: cpu, freed_tables: false, trim_cpumask: false };
        if mask.any_but(cpu) {
            self.flush_tlb_multi(cpu, mask, &info);
        } else if mask.test(cpu) {
            self.flush_tlb_func(cpu, &info);
        }
        // Wait for the INVLPGBs kicked off by arch_tlbbatch_add_pending() (invlpgb.rs).
        self.tlbsync(cpu);
    }
}

impl Sim {
    /// `flush_tlb_kernel_range()` for `pages` kernel pages (vmemmap remaps, vfree): every online
    /// CPU flushes, by IPI (`on_each_cpu`, waiting), idle and lazy ones included. Above
    /// tlb_single_page_flush_ceiling pages it becomes `flush_tlb_all()`. These IPIs are counted
    /// on the CAL line of /proc/interrupts, not the TLB line (do_kernel_range_flush() and
    /// do_flush_tlb_all() do not touch irq_tlb_count). Kernel translations are global and not
    /// modelled as TLB entries; a full flush also drops every user entry, as __flush_tlb_all()
    /// does.
    pub fn flush_tlb_kernel_range(&mut self, cpu: CpuId, pages: u64) {
        let all = pages > self.p.tlb_single_page_flush_ceiling;
        if all {
            self.vmstat.count(VmEvent::NR_TLB_REMOTE_FLUSH);
        }
        let per_cpu = if all { self.p.flush_full_ns } else { self.p.invlpg_ns * pages as f64 };
        let t0 = self.now(cpu);
        let mut done = t0;
        let mut sent = 0u32;
        for ci in 0..self.cpus.len() {
            let c = CpuId(ci as u32);
            if c == cpu {
                continue;
            }
            sent += 1;
            let arrive = self.ipi_taken_at(cpu, c, t0, sent);
            let cost = round_ns(self.p.ipi_handle_ns + per_cpu);
            self.steal_irq_time(c, arrive, cost);
            self.cpus[ci].stats.irq_call_count += 1;
            if all {
                self.vmstat.count(VmEvent::NR_TLB_REMOTE_FLUSH_RECEIVED);
                self.cpus[ci].tlb.flush_all();
            }
            done = done.max(arrive + cost);
        }
        self.charge_sys(cpu, self.p.ipi_send_ns * sent as f64 + per_cpu);
        if all {
            self.cpus[cpu.0 as usize].tlb.flush_all();
        }
        let now = self.now(cpu);
        if done > now {
            self.charge_sys_ns(cpu, done - now);
        }
    }

    /// Interrupt time `cost` arriving at `cpu` at `arrive`: the CPU's clock moves (a spinning
    /// task's user time up to the interrupt is accounted, an idle CPU just catches up), and the
    /// cost is irq time stolen from whatever runs there.
    pub fn steal_irq_time(&mut self, cpu: CpuId, arrive: Ns, cost: Ns) {
        self.steal_irq_time_in(cpu, arrive, cost, crate::kernel::profile::KFn::FlushTlbFunc);
    }

    /// [`Sim::steal_irq_time`] of a handler whose time the profile charges to `f`.
    pub fn steal_irq_time_in(&mut self, cpu: CpuId, arrive: Ns, cost: Ns, f: crate::kernel::profile::KFn) {
        let ci = cpu.0 as usize;
        if !self.cpus[ci].scheduled && arrive > self.cpus[ci].clock {
            let spinning = self.cpus[ci].current.is_some_and(|t| matches!(self.tasks[t.0 as usize].state, TaskState::Spinning(_)));
            if spinning {
                let gap = arrive - self.cpus[ci].clock;
                self.charge_user_ns(cpu, gap);
            } else {
                self.cpus[ci].clock = arrive;
            }
        }
        self.prof.charge_irq_in(cost, f);
        let c = &mut self.cpus[ci];
        c.clock += cost;
        c.stats.irq_ns += cost;
        if let Some(t) = c.current {
            if let TaskState::Spinning(until) = self.tasks[t.0 as usize].state {
                self.tasks[t.0 as usize].state = TaskState::Spinning(until + cost);
            }
        }
    }
}
