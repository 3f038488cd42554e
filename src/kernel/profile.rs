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
    DrainAllPages,
    SubmitBio,
}

pub const NKFN: usize = KFn::SubmitBio as usize + 1;

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
        KFn::DrainAllPages,
        KFn::SubmitBio,
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
            KFn::DrainAllPages => "drain_all_pages",
            KFn::SubmitBio => "submit_bio",
        }
    }
}

/// The profile and the busy time at one moment of a run. Two of them make the profile of the
/// window between them, as lkp-tests' perf-profile monitor takes one: `perf record -a -g -D
/// delay` for `duration` seconds of the run, not the whole run (monitors/no-stdout/perf-profile;
/// its defaults are a 10 s duration starting at half the job's `runtime`).
#[derive(Clone, Debug)]
pub struct ProfileSnapshot {
    pub t_ns: Ns,
    /// User time of all CPUs.
    pub user_ns: Ns,
    /// User + system + irq time of all CPUs (a cycles profile samples nothing else).
    pub busy_ns: Ns,
    /// Per function ([`KFn`] order): children time (open frames included) and self time.
    pub children: [Ns; NKFN],
    pub self_ns: [Ns; NKFN],
}

/// A window of simulated time over which a run keeps a profile ([`Sim::profile_window`]): the
/// snapshot taken when the first event at or after `start_ns` runs, and the one at or after
/// `end_ns` (or at the end of the run, if it ends inside the window).
#[derive(Clone, Debug)]
pub struct ProfileWindow {
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub first: Option<ProfileSnapshot>,
    pub last: Option<ProfileSnapshot>,
}

impl ProfileWindow {
    pub fn new(start_ns: Ns, end_ns: Ns) -> ProfileWindow {
        ProfileWindow { start_ns, end_ns: end_ns.max(start_ns), first: None, last: None }
    }

    /// What the window holds: the last snapshot less the first (its `t_ns` is the window's
    /// length), or None if the run ended before the window began.
    pub fn delta(&self) -> Option<ProfileSnapshot> {
        let (a, b) = (self.first.as_ref()?, self.last.as_ref()?);
        let less = |x: &[Ns; NKFN], y: &[Ns; NKFN]| std::array::from_fn(|i| x[i].saturating_sub(y[i]));
        Some(ProfileSnapshot {
            t_ns: b.t_ns - a.t_ns,
            user_ns: b.user_ns.saturating_sub(a.user_ns),
            busy_ns: b.busy_ns.saturating_sub(a.busy_ns),
            children: less(&b.children, &a.children),
            self_ns: less(&b.self_ns, &a.self_ns),
        })
    }

    /// The window's busy time and the children time of `fns` in it, or None if the run ended
    /// before the window began.
    pub fn children_in(&self, fns: &[KFn]) -> Option<(Ns, Ns)> {
        let d = self.delta()?;
        Some((d.busy_ns, fns.iter().map(|&f| d.children[f as usize]).sum()))
    }
}

/// Per-function times (ns) and the per-CPU stacks of functions being run.
///
/// A charge adds to the innermost function's self time and to the CPU's running total; a
/// function's children time is credited when it leaves the stack, as the total charged since it
/// entered, and only by its outermost frame (a function on the stack twice counts a nanosecond
/// once). Charges are O(1) that way; they walked the stack (item 26, docs/performance.md).
/// [`Profile::children_ns`] adds what the frames still on the stacks are owed.
#[derive(Clone, Debug)]
pub struct Profile {
    stacks: Vec<Vec<StackFrame>>,
    /// Per CPU: every ns charged there while not muted with a function on its stack.
    charged: Vec<Ns>,
    pub self_ns: [Ns; NKFN],
    /// Children time of the frames that have left their stacks.
    children_done: [Ns; NKFN],
    /// While set, charges are not recorded (a handler run only to learn its cost).
    pub muted: bool,
}

/// A function on a CPU's stack: whether no frame below it is the same function, and the
/// CPU's `charged` when it entered.
#[derive(Clone, Copy, Debug)]
struct StackFrame {
    f: KFn,
    outermost: bool,
    entered: Ns,
}

impl Profile {
    pub fn new(ncpus: usize) -> Profile {
        Profile { stacks: vec![Vec::with_capacity(8); ncpus], charged: vec![0; ncpus], self_ns: [0; NKFN], children_done: [0; NKFN], muted: false }
    }

    /// Attribute `ns` of system time on `cpu`.
    #[inline]
    pub fn charge(&mut self, cpu: CpuId, ns: Ns) {
        if self.muted {
            return;
        }
        let c = cpu.0 as usize;
        match self.stacks[c].last() {
            None => {
                self.self_ns[0] += ns;
                self.children_done[0] += ns;
            }
            Some(top) => {
                self.self_ns[top.f as usize] += ns;
                self.charged[c] += ns;
            }
        }
    }

    /// Interrupt time: an IPI handler.
    pub fn charge_irq(&mut self, ns: Ns) {
        self.charge_irq_in(ns, KFn::FlushTlbFunc);
    }

    /// Interrupt time spent in `f` under `sysvec_call_function` (a function-call IPI's handler).
    pub fn charge_irq_in(&mut self, ns: Ns, f: KFn) {
        self.self_ns[f as usize] += ns;
        self.children_done[f as usize] += ns;
        self.children_done[KFn::SysvecCallFunction as usize] += ns;
    }

    /// Time charged while `f` was on a CPU's stack, its callees' included (`perf report
    /// --children`), the frames still on the stacks included.
    pub fn children_ns(&self, f: KFn) -> Ns {
        let open: Ns = self.stacks.iter().zip(&self.charged).flat_map(|(st, &now)| st.iter().filter(move |fr| fr.f == f && fr.outermost).map(move |fr| now - fr.entered)).sum();
        self.children_done[f as usize] + open
    }

    fn push(&mut self, cpu: CpuId, f: KFn) {
        let c = cpu.0 as usize;
        let st = &mut self.stacks[c];
        let outermost = !st.iter().any(|fr| fr.f == f);
        st.push(StackFrame { f, outermost, entered: self.charged[c] });
    }

    fn pop(&mut self, cpu: CpuId) {
        let c = cpu.0 as usize;
        if let Some(fr) = self.stacks[c].pop() {
            if fr.outermost {
                self.children_done[fr.f as usize] += self.charged[c] - fr.entered;
            }
        }
    }

    /// The innermost modelled function on `cpu`'s stack (`Other` when none): where the CPU
    /// is, for lock_stat's contention points.
    #[inline]
    pub fn top(&self, cpu: CpuId) -> KFn {
        self.stacks[cpu.0 as usize].last().map_or(KFn::Other, |fr| fr.f)
    }

    /// The functions on `cpu`'s stack, outermost first, at most `N` of them (the outermost).
    pub fn frames<const N: usize>(&self, cpu: CpuId) -> ([KFn; N], usize) {
        let mut out = [KFn::Other; N];
        let st = &self.stacks[cpu.0 as usize];
        let n = st.len().min(N);
        for (o, fr) in out.iter_mut().zip(st) {
            *o = fr.f;
        }
        (out, n)
    }

    /// Forget any stack left by an aborted path (called at the start of a step); what its
    /// frames were charged stays theirs.
    pub fn reset_stack(&mut self, cpu: CpuId) {
        while !self.stacks[cpu.0 as usize].is_empty() {
            self.pop(cpu);
        }
    }
}

impl Sim {
    #[inline]
    pub fn kfn_enter(&mut self, cpu: CpuId, f: KFn) {
        self.prof.push(cpu, f);
    }
    #[inline]
    pub fn kfn_exit(&mut self, cpu: CpuId) {
        self.prof.pop(cpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_include_callees_once() {
        let mut p = Profile::new(1);
        let c = CpuId(0);
        p.push(c, KFn::ShrinkFolioList);
        p.charge(c, 10);
        p.push(c, KFn::TryToUnmap);
        p.push(c, KFn::NativeQueuedSpinLockSlowpath);
        p.charge(c, 5);
        assert_eq!(p.self_ns[KFn::ShrinkFolioList as usize], 10);
        assert_eq!(p.children_ns(KFn::ShrinkFolioList), 15);
        assert_eq!(p.children_ns(KFn::TryToUnmap), 5);
        assert_eq!(p.self_ns[KFn::NativeQueuedSpinLockSlowpath as usize], 5);
        assert_eq!(p.self_ns[KFn::TryToUnmap as usize], 0);
    }

    /// The stack walk the profile did before item 26: every charge adds to each function on
    /// the stack once.
    #[derive(Default)]
    struct Naive {
        stack: Vec<KFn>,
        self_ns: Vec<Ns>,
        children_ns: Vec<Ns>,
    }

    impl Naive {
        fn charge(&mut self, ns: Ns) {
            self.self_ns.resize(NKFN, 0);
            self.children_ns.resize(NKFN, 0);
            let top = self.stack.last().copied().unwrap_or(KFn::Other);
            self.self_ns[top as usize] += ns;
            if self.stack.is_empty() {
                self.children_ns[0] += ns;
            }
            for (i, &f) in self.stack.iter().enumerate() {
                if !self.stack[..i].contains(&f) {
                    self.children_ns[f as usize] += ns;
                }
            }
        }
    }

    proptest::proptest! {
        /// Random enters, exits, charges (muted or not), IPI charges and aborted paths on two
        /// CPUs: the deferred crediting gives the stack walk's times at every point.
        #[test]
        fn deferred_children_equal_the_stack_walk(ops in proptest::collection::vec((0u8..6, 0usize..2, 0usize..6, 1u64..1000), 0..200)) {
            let mut p = Profile::new(2);
            let mut n = [Naive::default(), Naive::default()];
            let mut irq = 0;
            let fs = [KFn::ShrinkFolioList, KFn::TryToUnmap, KFn::FolioReferenced, KFn::NativeQueuedSpinLockSlowpath, KFn::HandleMmFault, KFn::Other];
            for (op, cpu, fi, ns) in ops {
                let c = CpuId(cpu as u32);
                match op {
                    0 | 1 => { p.push(c, fs[fi]); n[cpu].stack.push(fs[fi]); }
                    2 => { p.pop(c); n[cpu].stack.pop(); }
                    3 => { p.charge(c, ns); n[cpu].charge(ns); }
                    4 => { p.muted = true; p.charge(c, ns); p.muted = false; p.charge_irq(ns); irq += ns; }
                    _ => { p.reset_stack(c); n[cpu].stack.clear(); }
                }
                for f in KFn::ALL {
                    let i = f as usize;
                    let extra = if f == KFn::FlushTlbFunc || f == KFn::SysvecCallFunction { irq } else { 0 };
                    let want = n.iter().map(|x| x.children_ns.get(i).copied().unwrap_or(0)).sum::<Ns>() + extra;
                    proptest::prop_assert_eq!(p.children_ns(f), want, "{:?}", f);
                    let want_self = n.iter().map(|x| x.self_ns.get(i).copied().unwrap_or(0)).sum::<Ns>() + if f == KFn::FlushTlbFunc { irq } else { 0 };
                    proptest::prop_assert_eq!(p.self_ns[i], want_self, "{:?}", f);
                }
            }
        }
    }
}

impl Sim {
    /// The profile and busy time now (see [`ProfileSnapshot`]).
    pub fn profile_snapshot(&self, t_ns: Ns) -> ProfileSnapshot {
        let user_ns = self.cpus.iter().map(|c| c.stats.user_ns).sum();
        let busy_ns = self.cpus.iter().map(|c| c.stats.user_ns + c.stats.sys_ns + c.stats.irq_ns).sum();
        let mut children = [0; NKFN];
        for f in KFn::ALL {
            children[f as usize] = self.prof.children_ns(f);
        }
        ProfileSnapshot { t_ns, user_ns, busy_ns, children, self_ns: self.prof.self_ns }
    }

    /// Called with each event's time: take the window's snapshots when their times come.
    #[inline]
    pub(crate) fn profile_window_tick(&mut self, now: Ns) {
        if let Some(w) = &self.profile_window {
            if (w.first.is_none() && now >= w.start_ns) || (w.last.is_none() && now >= w.end_ns) {
                self.profile_window_take(now);
            }
        }
    }

    #[cold]
    fn profile_window_take(&mut self, now: Ns) {
        let snap = self.profile_snapshot(now);
        let Some(w) = self.profile_window.as_mut() else { return };
        if w.first.is_none() {
            w.first = Some(snap.clone());
        }
        if w.last.is_none() && now >= w.end_ns {
            w.last = Some(snap);
        }
    }

    /// The end of the run: a window the run ended inside closes here.
    pub(crate) fn profile_window_close(&mut self, end: Ns) {
        if self.profile_window.as_ref().is_some_and(|w| w.first.is_some() && w.last.is_none()) {
            let snap = self.profile_snapshot(end);
            if let Some(w) = self.profile_window.as_mut() {
                w.last = Some(snap);
            }
        }
    }
}
