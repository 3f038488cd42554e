//! Building a simulation from a validated config, and the event loop that runs it.

use std::sync::Arc;

use crate::config::{Config, ConfigError};
use crate::engine::EventKind;
use crate::kernel::sched::FOREVER;
use crate::mm::memory::FaultError;
use crate::mm::mmap::Prot;
use crate::sim::{Backing, Sim, Task, TaskState};
use crate::types::*;
use crate::workload::ops::{self, Op};
use crate::workload::synth::{Pattern, SynthState};

/// With the oracle on, the structural checkers (src/check/structural.rs) run every this many
/// steps and at the end. Steps are atomic, so the state between two is one the kernel could be in.
pub const STRUCTURE_CHECK_STEPS: u64 = 4096;
use crate::workload::{Body, Program, StepResult};

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every task that the run waits for has exited.
    Completed,
    /// Simulated time passed run.max_sim_ms first (liveness bound).
    TimeLimit,
    /// SIGINT/SIGTERM (src/interrupt.rs) stopped the run; results cover the time simulated.
    Interrupted,
}

impl Sim {
    /// Build the machine and the workload's tasks. Errors are the user's (op program syntax).
    pub fn build(cfg: &Config) -> Result<Sim, ConfigError> {
        Self::build_with(cfg, |_| {})
    }

    /// `build`, with `attach` called on the new machine before any task exists (the tracer
    /// and the timeline of src/report/viz.rs, so they see the run from its first event).
    pub fn build_with(cfg: &Config, attach: impl FnOnce(&mut Sim)) -> Result<Sim, ConfigError> {
        // Refuse a machine this host cannot hold before anything is allocated (issue 16).
        crate::config::estimate::check(cfg)?;
        let mut sim = Sim::new(cfg);
        attach(&mut sim);
        sim.start_kswapds();
        sim.hugetlb_init();
        match cfg.str("workload.kind").as_str() {
            "ops" => sim.build_ops(cfg)?,
            "synthetic" => sim.build_synthetic(cfg),
            "llm" => sim.build_llm(cfg),
            other => sim.build_vma_workload(cfg, other)?,
        }
        Ok(sim)
    }

    /// `kswapd_run()` for every node: a kernel thread (no mm: it borrows the previous mm lazily,
    /// as kernel threads do) that sleeps until an allocation finds the node below its low
    /// watermark.
    fn start_kswapds(&mut self) {
        let ncpus = self.cpus.len();
        for node in 0..self.nodes.len() {
            let cpu = self.cpus.iter().find(|c| c.node.0 as usize == node).map(|c| c.id).unwrap_or(CpuId((node % ncpus) as u32));
            let prog = Program { body: Body::Kswapd(node as u32), file: format!("kswapd{node}"), released: false };
            let t = self.new_task(u32::MAX - node as u32, None, cpu, None, prog);
            self.stop_counting(t);
            self.task_mut(t).state = TaskState::Blocked;
            self.nodes[node].kswapd = Some(t);
        }
    }

    /// A new process address space with a minimal standard layout: program text (a file mapping
    /// at 0x400000) and a stack below 128 TiB, so unmaps have realistic neighbours.
    pub(crate) fn new_process_mm(&mut self, cpu: CpuId, tgid: u32, text_pages: u64) -> MmId {
        let mm = self.mm_alloc(cpu);
        let exe = self.file_get_or_create(&format!("exe-{tgid}"), text_pages.max(1));
        let text = self.do_mmap(cpu, mm, text_pages.max(1), Prot::Read, false, Backing::File { file: exe, pgoff: 0 }, Some(0x400)).expect("text");
        let v = self.mm_mut(mm).vmas.get_mut(&text).unwrap();
        v.flags |= crate::sim::vm::EXEC;
        self.mm_mut(mm).regions.insert(".text".into(), (text, text_pages.max(1)));
        let stack_top = 0x7fff_ffff_f000u64 >> PAGE_SHIFT;
        self.do_mmap(cpu, mm, 33, Prot::ReadWrite, false, Backing::Anon, Some(stack_top - 33)).expect("stack");
        // Building the process is not part of the measured run.
        for c in &mut self.cpus {
            c.clock = 0;
            c.stats = Default::default();
        }
        self.vmstat = Default::default();
        self.prof = crate::kernel::profile::Profile::new(self.cpus.len());
        self.locks.reset();
        mm
    }

    pub(crate) fn new_task(&mut self, tgid: u32, mm: Option<MmId>, cpu: CpuId, affinity: Option<CpuId>, prog: Program) -> Tid {
        let tid = Tid(self.tasks.len() as u32);
        self.live_tasks += 1;
        if let Some(m) = mm {
            self.mm_mut(m).users += 1;
        }
        self.tasks.push(Task {
            tid,
            tgid,
            mm,
            cpu,
            affinity,
            state: TaskState::Runnable,
            prog: Some(Box::new(prog)),
            counts_for_completion: true,
            parent: None,
            children: Vec::new(),
            waiting_for_children: false,
            slice_end: 0,
            vmacache: Default::default(),
            reclaim_tail: None,
            direct_reclaim: None,
            direct_reclaim_failed: false,
            ra_rest: None,
            numa: Default::default(),
            exit_ns: None,
        });
        tid
    }

    fn build_ops(&mut self, cfg: &Config) -> Result<(), ConfigError> {
        if cfg.threads.is_empty() {
            // With workload.kind left at its default, name the scenario rather than `<default>:0`.
            let origin = match cfg.raw("workload.kind") {
                Some(_) => cfg.origin("workload.kind"),
                None => crate::config::Origin { file: format!("{}.toml", cfg.name), line: 1 },
            };
            return Err(ConfigError::key(&origin, "workload.kind", "an 'ops' workload needs at least one [[workload.thread]] (the scenario has none)"));
        }
        let mut mms: std::collections::BTreeMap<u32, MmId> = Default::default();
        let mut tids = Vec::new();
        let ncpus = self.cpus.len() as u32;
        for (i, t) in cfg.threads.iter().enumerate() {
            let prog = ops::parse(&t.ops, &t.ops_origin)?;
            let cpu = CpuId(t.cpu.unwrap_or(i as u32 % ncpus));
            let mm = match mms.get(&t.process) {
                Some(&m) => m,
                None => {
                    let m = self.new_process_mm(cpu, t.process, 16);
                    mms.insert(t.process, m);
                    m
                }
            };
            let body = Body::Ops { prog: Arc::new(prog), pc: 0, loops: Vec::new(), cursor: 0 };
            let p = Program { body, file: t.ops_origin.file.clone(), released: false };
            tids.push((self.new_task(t.process, Some(mm), cpu, t.cpu.map(CpuId), p), cpu));
        }
        self.start_tasks(cfg, tids);
        Ok(())
    }

    /// Start the workload's threads: all at time 0, or each at a random time in
    /// [0, workload.start_jitter_us) drawn from the run's seed, which is what makes runs with
    /// different seeds of a deterministic workload differ.
    pub(crate) fn start_tasks(&mut self, cfg: &Config, tids: Vec<(Tid, CpuId)>) {
        let jitter = (cfg.float("workload.start_jitter_us") * 1000.0) as u64;
        for (t, cpu) in tids {
            if jitter > 0 {
                let at = self.prng.below(jitter);
                self.task_mut(t).state = TaskState::Blocked;
                self.task_mut(t).cpu = cpu;
                self.events.push(at, EventKind::Wake, t.0);
            } else {
                self.enqueue(cpu, t, 0);
            }
        }
    }

    fn build_synthetic(&mut self, cfg: &Config) {
        let procs = cfg.int("workload.processes") as u32;
        let threads = cfg.int("workload.threads") as u32;
        let ws_pages = ((cfg.float("workload.working_set_mib") * 256.0).round() as u64).max(1);
        let text_pages = cfg.int("workload.text_pages") as u64;
        let pattern = match cfg.str("workload.pattern").as_str() {
            "normal" => Pattern::Normal,
            "sequential" => Pattern::Sequential,
            _ => Pattern::Uniform,
        };
        let setup = |sim: &mut Sim, cpu: CpuId, _: u32, mm: MmId| {
            let ws = sim.do_mmap(cpu, mm, ws_pages, Prot::ReadWrite, false, Backing::Anon, None).expect("working set fits");
            (ws, sim.mm(mm).regions[".text"])
        };
        let thread = |sim: &mut Sim, &(ws, text): &(u64, (u64, u64)), _: u64, n: u32| {
            Body::Synth(SynthState {
                region: (ws, ws_pages),
                text: if text_pages > 0 { text } else { (0, 0) },
                prng: sim.prng.fork(n as u64),
                remaining: cfg.int("workload.accesses_per_thread") as u64,
                pattern,
                read_pct: cfg.int("workload.read_pct") as u64,
                sigma: cfg.float("workload.sigma_pages"),
                fetches_per_access: cfg.float("workload.fetches_per_access"),
                fetch_acc: 0.0,
                text_cursor: 0,
                seq_cursor: 0,
                init: (0, 0),
                thin: cfg.int("workload.thin") as u64,
            })
        };
        self.spawn_workload(cfg, procs, threads as u64, text_pages, setup, thread);
    }

    fn all_done(&self) -> bool {
        self.live_tasks == 0
    }

    /// The task becomes a daemon (`spin forever`, `sleep forever`) or exits: the run no longer
    /// waits for it.
    pub(crate) fn stop_counting(&mut self, t: Tid) {
        let task = self.task_mut(t);
        if task.counts_for_completion {
            task.counts_for_completion = false;
            self.live_tasks -= 1;
        }
    }

    /// Run the event loop until the workload completes or the time limit passes. `progress` is
    /// called now and then with the simulated time (for a progress bar).
    pub fn run(&mut self, mut progress: impl FnMut(Ns)) -> Outcome {
        self.run_observed(|s| progress(s.running_cpu.map_or(0, |c| s.cpus[c.0 as usize].clock)))
    }

    /// [`Sim::run`] whose callback sees the whole (read-only) machine every 2^20 steps, for a
    /// progress display that counts work done (src/progress.rs). It never changes the run.
    pub fn run_observed(&mut self, mut progress: impl FnMut(&Sim)) -> Outcome {
        let mut steps: u64 = 0;
        // The CPU that just ran, if it goes back to the queue: pushed and the next event
        // popped in one step (`EventQueue::push_pop`).
        let mut requeue: Option<(Ns, u32)> = None;
        loop {
            let ev = match requeue.take() {
                Some((t, id)) => self.events.push_pop(t, EventKind::CpuRun, id),
                None => match self.events.pop() {
                    Some(e) => e,
                    None => break,
                },
            };
            if self.all_done() {
                break;
            }
            if ev.time > self.p.max_sim_ns {
                self.latr_drain();
                if self.oracle.is_some() {
                    self.check_structure();
                }
                return self.finish(Outcome::TimeLimit, ev.time);
            }
            if crate::interrupt::requested() {
                return self.finish(Outcome::Interrupted, ev.time);
            }
            self.timeline_tick(ev.time);
            self.profile_window_tick(ev.time);
            match ev.kind {
                EventKind::Wake => {
                    if !self.wake_cancelled(ev.id, ev.time) {
                        self.wake_up(Tid(ev.id), ev.time)
                    }
                }
                EventKind::SpinEnd => self.spin_end(Tid(ev.id), ev.time),
                EventKind::CpuRun => {
                    let cpu = CpuId(ev.id);
                    let ci = ev.id as usize;
                    if !self.cpus[ci].scheduled {
                        continue;
                    }
                    self.cpus[ci].scheduled = false;
                    let mut horizon = self.events.peek_time().unwrap_or(Ns::MAX);
                    self.running_cpu = Some(cpu);
                    // No lock request from now on comes before this (kernel/locking.rs prunes).
                    self.locks.floor = self.locks.floor.max(ev.time.min(self.cpus[ci].clock));
                    if self.locks.floor >= self.locks.next_sweep {
                        self.locks.sweep();
                    }
                    loop {
                        self.step_horizon = horizon;
                        self.step_cpu(cpu, horizon);
                        steps += 1;
                        if self.oracle.is_some() && steps % STRUCTURE_CHECK_STEPS == 0 {
                            self.check_structure();
                        }
                        if steps % (1 << 20) == 0 {
                            progress(self);
                        }
                        // A step may have queued an earlier event (a wake-up of an idle
                        // CPU's task: kswapd woken by this CPU's allocation); it runs before
                        // this CPU goes past it. (Until 2026-11-27 the horizon was read once,
                        // before the loop: a CPU running alone never let a task it woke on an
                        // idle CPU run, and kswapd never reclaimed beside a single reader.)
                        horizon = horizon.min(self.events.peek_time().unwrap_or(Ns::MAX));
                        // step_cpu re-kicks the CPU if it has more to do.
                        // A CPU past run.max_sim_ms goes back to the queue, where the limit
                        // is checked: a lone thread that never waits would otherwise never pop.
                        // A stop request (src/interrupt.rs) is seen at the next queue pop.
                        if !self.cpus[ci].scheduled || self.cpus[ci].clock > horizon || self.cpus[ci].clock > self.p.max_sim_ns || self.all_done() || (steps % 4096 == 0 && crate::interrupt::requested()) {
                            break;
                        }
                        // Keep running here without a queue round trip.
                        self.cpus[ci].scheduled = false;
                    }
                    self.running_cpu = None;
                    self.step_horizon = Ns::MAX;
                    if self.cpus[ci].scheduled {
                        requeue = Some((self.cpus[ci].clock, ev.id));
                    }
                }
            }
        }
        let end = self.cpus.iter().map(|c| c.clock).max().unwrap_or(0);
        self.latr_drain();
        if self.oracle.is_some() {
            self.check_structure();
        }
        self.finish(Outcome::Completed, end)
    }

    /// Account the time of tasks still spinning when the run ends.
    fn finish(&mut self, outcome: Outcome, end: Ns) -> Outcome {
        let end = end.min(self.p.max_sim_ns.max(self.cpus.iter().map(|c| c.clock).max().unwrap_or(0)));
        for ci in 0..self.cpus.len() {
            if let Some(t) = self.cpus[ci].current {
                if let TaskState::Spinning(_) = self.tasks[t.0 as usize].state {
                    let start = self.cpus[ci].clock;
                    if end > start {
                        self.charge_user_ns(CpuId(ci as u32), end - start);
                    }
                }
            }
        }
        self.end_ns = end;
        self.profile_window_close(end);
        outcome
    }

    /// Run one step of the task current on `cpu`, then re-kick the CPU if it stays busy.
    fn step_cpu(&mut self, cpu: CpuId, horizon: Ns) {
        let ci = cpu.0 as usize;
        let Some(t) = self.cpus[ci].current else { return };
        self.prof.reset_stack(cpu);
        if self.latr.is_some() {
            // LATR (mm/latr.rs): ticks up to now applied lazy invalidations; release frees.
            self.latr_advance(cpu);
        }
        if self.maybe_preempt(cpu) {
            return;
        }
        // Kernel work the task owes before its program goes on: the end of a reclaim, a NUMA
        // hint fault's migration, a batch of a fault's direct reclaim, a NUMA scan
        // (task_numa_work on the way back to user space).
        if self.finish_task_reclaim_tail(cpu, t) || self.numa_migrate_step(cpu, t) {
            self.kick(cpu);
            return;
        }
        // A direct reclaim throttled on its node's pfmemalloc_wait sleeps (mm/vmscan.rs).
        if self.throttle_direct_reclaim_step(cpu, t) {
            return;
        }
        if self.direct_reclaim_step(cpu, t) {
            self.kick(cpu);
            return;
        }
        // The rest of a readahead window a fault's step left when its CPU ran ahead of the
        // others (mm/readahead.rs `RaCut`).
        if self.readahead_rest_step(cpu, t) {
            self.kick(cpu);
            return;
        }
        if self.numa_scan_due(cpu, t) {
            self.task_numa_work(cpu, t);
            self.kick(cpu);
            return;
        }
        let mut prog = self.tasks[t.0 as usize].prog.take().expect("a running task has a program");
        let r = match &mut prog.body {
            Body::Ops { .. } => self.step_ops(cpu, t, &mut prog),
            Body::Synth(_) => self.step_synth(cpu, t, &mut prog, horizon),
            Body::Vma(_) => self.step_vma(cpu, t, &mut prog),
            Body::Llm(_) => self.step_llm(cpu, t, &mut prog, horizon),
            Body::Kswapd(node) => match self.kswapd_step(cpu, *node as usize) {
                crate::mm::vmscan::KswapdNext::Run => StepResult::Continue,
                crate::mm::vmscan::KswapdNext::Sleep => StepResult::Block(None),
                crate::mm::vmscan::KswapdNext::Throttled(until) => StepResult::Block(Some(until)),
            },
            Body::Flusher => match self.flusher_step(cpu) {
                // Written: sleep for the I/O (below), then look again.
                None if self.cpus[ci].io_wait_until > self.cpus[ci].clock => StepResult::Continue,
                wake => StepResult::Block(wake),
            },
        };
        self.tasks[t.0 as usize].prog = Some(prog);
        // A read the step started (block/mod.rs): the task sleeps until it completes.
        let io = std::mem::take(&mut self.cpus[ci].io_wait_until);
        let r = match r {
            StepResult::Continue if io > self.cpus[ci].clock => StepResult::Block(Some(io)),
            r => r,
        };
        match r {
            StepResult::Continue => self.kick(cpu),
            StepResult::Block(wake) => self.block_current(cpu, wake),
            StepResult::Spin(until) => self.spin_current(cpu, until),
            StepResult::Exit => self.do_exit(cpu, t),
        }
    }

    pub(crate) fn fault_kill(&mut self, t: Tid, prog: &Program, line: usize, e: FaultError) -> StepResult {
        match e {
            FaultError::Segv(msg) => self.workload_errors.push(format!("{}:{}: task {}: SIGSEGV: {msg}", prog.file, line, t.0)),
            FaultError::Oom => {
                self.workload_errors.push(format!("{}:{}: task {}: killed by the OOM killer", prog.file, line, t.0));
            }
            // Workloads that cannot replay an access drop it; the next step runs the work.
            FaultError::Again => return StepResult::Continue,
        }
        StepResult::Exit
    }

    /// Synthetic accesses. A user access is atomic and touches no shared kernel state unless it
    /// faults, so the task runs a batch of them until its clock passes `horizon` (the next event
    /// of any other CPU), which is exactly what one-by-one stepping would do, minus the loop cost.
    fn step_synth(&mut self, cpu: CpuId, t: Tid, prog: &mut Program, horizon: Ns) -> StepResult {
        let mm = self.tasks[t.0 as usize].mm.expect("user task");
        let ci = cpu.0 as usize;
        let stop = horizon.min(self.task(t).slice_end.saturating_sub(1));
        if let Body::Synth(st) = &mut prog.body {
            // The common case, without the oracle and without instruction fetches: the same
            // accesses as below, with `Sim::access`'s L1 hit path inlined and the CPU, ASID and
            // hit cost looked up once (an L1 hit changes only this CPU's clock, counters and
            // LRU stamps; anything else goes through the same slow path as `access`).
            // Not with `workload.thin` > 1: the general loop charges each access as `thin`.
            if self.oracle.is_none() && (st.text.1 == 0 || st.fetches_per_access <= 0.0) && st.thin == 1 {
                use crate::hw::tlb::L1dProbe;
                let mut asid = self.cpus[ci].tlbstate.loaded_mm_asid;
                let hit_ns = self.p.hit_l1_ns;
                let mut left = 4096u32;
                loop {
                    // A run of L1 hits with the CPU borrowed once and its clock and counters in
                    // locals, written back before anything else can read them (the slow path,
                    // the end of the step). The same accesses, in the same order, as one at a
                    // time.
                    let c = &mut self.cpus[ci];
                    let (mut clock, mut user, mut loads, mut stores) = (c.clock, c.stats.user_ns, 0u64, 0u64);
                    let mut slow = None;
                    let mut exit = false;
                    let mut prng = st.prng.clone();
                    while left > 0 {
                        if st.remaining == 0 {
                            exit = true;
                            break;
                        }
                        st.remaining -= 1;
                        left -= 1;
                        let (page, write) = st.next_access_with(&mut prng);
                        let vpn = st.region.0 + page;
                        // Branch-free: writes are drawn at random, so a branch here mispredicts.
                        stores += write as u64;
                        loads += !write as u64;
                        match c.tlb.probe_l1d(asid, vpn, write) {
                            L1dProbe::Hit => {
                                clock += hit_ns;
                                user += hit_ns;
                                if clock > stop {
                                    left = 0;
                                }
                            }
                            p => {
                                slow = Some((vpn, write, p == L1dProbe::Miss));
                                break;
                            }
                        }
                    }
                    st.prng = prng;
                    c.clock = clock;
                    c.stats.user_ns = user;
                    c.stats.dtlb_loads += loads;
                    c.stats.dtlb_stores += stores;
                    if exit {
                        return StepResult::Exit;
                    }
                    let Some((vpn, write, l1_4k_missed)) = slow else { return StepResult::Continue };
                    // Draw the next access now and prefetch its PTE: the slow path (a walk at
                    // least) hides the host's cache miss on it.
                    if st.remaining > 0 {
                        self.prefetch_pte(mm, st.region.0 + st.peek_page(&st.prng));
                    }
                    if let Err(e) = self.access_slow_from(cpu, mm, vpn, write, false, l1_4k_missed) {
                        return self.fault_kill(t, prog, 0, e);
                    }
                    // Re-read the ASID after kernel work, as `access` does on every call.
                    asid = self.cpus[ci].tlbstate.loaded_mm_asid;
                    if left == 0 || self.step_ends(ci, stop) {
                        return StepResult::Continue;
                    }
                }
            }
        }
        for _ in 0..4096 {
            let Body::Synth(st) = &mut prog.body else { unreachable!() };
            if st.remaining == 0 {
                return StepResult::Exit;
            }
            st.remaining -= 1;
            let fetch = st.next_fetch().map(|p| st.text.0 + p);
            let weight = st.weight();
            let (page, write) = st.next_access();
            let vpn = st.region.0 + page;
            if st.remaining > 0 && weight > 1 {
                // A thinned stream (workload.thin) is mostly TLB misses: prefetch the next
                // access's PTE while this one runs (`SynthState::peek_page`).
                self.prefetch_pte(mm, st.region.0 + st.peek_page(&st.prng));
            }
            if let Some(f) = fetch {
                if let Err(e) = self.access(cpu, mm, f, false, true) {
                    return self.fault_kill(t, prog, 0, e);
                }
            }
            let (user0, walks0) = (self.cpus[ci].stats.user_ns, self.cpus[ci].stats.page_walks);
            let r = self.access(cpu, mm, vpn, write, false);
            if weight > 1 {
                // workload.thin: this access stands for `weight` accesses to pages of the same
                // distribution; the others are charged as this one without its faults (the
                // user time of one lookup and walk).
                let st = &self.cpus[ci].stats;
                let du = (st.user_ns - user0) / (st.page_walks - walks0).max(1);
                self.charge_user_ns(cpu, du * (weight - 1));
            }
            if let Err(e) = r {
                return self.fault_kill(t, prog, 0, e);
            }
            if self.step_ends(ci, stop) {
                break;
            }
        }
        StepResult::Continue
    }

    fn step_ops(&mut self, cpu: CpuId, t: Tid, prog: &mut Program) -> StepResult {
        let mm = self.tasks[t.0 as usize].mm.expect("user task");
        loop {
            let Body::Ops { prog: code, pc, loops, cursor } = &mut prog.body else { unreachable!() };
            // Borrow the op from a shared handle on the program: a step (one touched page, say)
            // clones no op and no region name.
            let code = Arc::clone(code);
            let Some(line) = code.get(*pc) else { return StepResult::Exit };
            let (op, lineno) = (&line.op, line.line);
            let region = |s: &Sim, name: &str| -> Result<(u64, u64), String> {
                s.mm(mm).regions.get(name).copied().ok_or_else(|| format!("region '{name}' is not mapped"))
            };
            let result: Result<StepResult, String> = match op {
                Op::Loop { count, .. } => {
                    loops.push((*pc, *count));
                    *pc += 1;
                    continue;
                }
                Op::End { start } => {
                    let top = loops.last_mut().expect("parser matched loop/end");
                    top.1 -= 1;
                    if top.1 > 0 {
                        *pc = start + 1;
                    } else {
                        loops.pop();
                        *pc += 1;
                    }
                    continue;
                }
                Op::Touch { region: r, write, words } => match region(self, &r) {
                    Ok((start, pages)) => {
                        let vpn = start + *cursor;
                        // The access is replayed if its fault leaves work for the next step
                        // (FaultError::Again), so its direct reclaim may run in steps.
                        match self.replayable(cpu, |s| s.access(cpu, mm, vpn, *write, false)) {
                            Ok(()) => {
                                if *words > 1 {
                                    // The page's other words: L1 dTLB hits, one step (a flush
                                    // arriving between them is not modelled).
                                    let n = u64::from(*words - 1);
                                    let c = &mut self.cpus[cpu.0 as usize];
                                    if *write { c.stats.dtlb_stores += n } else { c.stats.dtlb_loads += n }
                                    self.charge_user_ns(cpu, n * self.p.hit_l1_ns);
                                }
                                *cursor += 1;
                                if *cursor == pages {
                                    *cursor = 0;
                                    *pc += 1;
                                }
                                Ok(StepResult::Continue)
                            }
                            // Retried after the kernel work the fault started (next step).
                            Err(FaultError::Again) => Ok(StepResult::Continue),
                            Err(e) => return self.fault_kill(t, prog, lineno, e),
                        }
                    }
                    Err(e) => Err(e),
                },
                Op::Mmap { region: r, pages, file, shared, prot, at, sparse } => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    let backing = match &file {
                        Some(f) => Backing::File { file: self.file_get_or_create_sparse(f, *pages, *sparse), pgoff: 0 },
                        None => Backing::Anon,
                    };
                    if self.mm(mm).regions.contains_key(r.as_str()) {
                        Err(format!("region '{r}' is already mapped"))
                    } else {
                        match self.do_mmap(cpu, mm, *pages, *prot, *shared, backing, *at) {
                            Ok(start) => {
                                self.mm_mut(mm).regions.insert(r.clone(), (start, *pages));
                                Ok(StepResult::Continue)
                            }
                            Err(e) => Err(format!("mmap: {e}")),
                        }
                    }
                }
                Op::Munmap { region: r } => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    region(self, &r).map(|(s, n)| {
                        self.do_munmap(cpu, mm, s, n);
                        self.mm_mut(mm).regions.remove(r.as_str());
                        StepResult::Continue
                    })
                }
                Op::Mprotect { region: r, prot } => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    region(self, &r).map(|(s, n)| {
                        self.do_mprotect(cpu, mm, s, n, *prot);
                        StepResult::Continue
                    })
                }
                Op::Madvise { region: r, advice } => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    region(self, &r).map(|(s, n)| {
                        self.do_madvise(cpu, mm, s, n, *advice);
                        StepResult::Continue
                    })
                }
                Op::Msync { region: r } => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    region(self, &r).map(|(s, n)| {
                        // msync() drops the mmap_lock around vfs_fsync_range(): the write-back
                        // is under do_syscall_64 in the profile, not under the lock.
                        self.kfn_enter(cpu, crate::kernel::profile::KFn::DoSyscall64);
                        self.msync_range(cpu, mm, s, n);
                        self.kfn_exit(cpu);
                        StepResult::Continue
                    })
                }
                Op::Migrate { region: r, node } => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    if *node as usize >= self.nodes.len() {
                        Err(format!("migrate: node {node} does not exist"))
                    } else {
                        region(self, &r).map(|(s, n)| {
                            self.migrate_range(cpu, mm, s, n, NodeId(*node));
                            StepResult::Continue
                        })
                    }
                }
                Op::Fwrite { file, pages } => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    let f = self.file_get_or_create(file, *pages);
                    match self.generic_perform_write(cpu, f, *pages) {
                        Ok(()) => Ok(StepResult::Continue),
                        Err(e) => return self.fault_kill(t, prog, lineno, e),
                    }
                }
                Op::Kalloc { pages } => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    match self.kalloc_pages(cpu, *pages) {
                        Ok(()) => Ok(StepResult::Continue),
                        Err(e) => return self.fault_kill(t, prog, lineno, e),
                    }
                }
                Op::Fork => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    match self.do_fork(cpu, t) {
                        Ok(()) => Ok(StepResult::Continue),
                        Err(e) => return self.fault_kill(t, prog, lineno, e),
                    }
                }
                Op::Reap => {
                    *pc += 1;
                    self.enter_syscall(cpu, 0.0);
                    let children = self.tasks[t.0 as usize].children.clone();
                    let now = self.now(cpu);
                    let mut live = false;
                    for c in children {
                        if self.task(c).state != TaskState::Dead {
                            live = true;
                            if let Some(p) = self.task_mut(c).prog.as_mut() {
                                p.released = true;
                            }
                            self.wake_up(c, now);
                        }
                    }
                    if live {
                        self.task_mut(t).waiting_for_children = true;
                        Ok(StepResult::Block(None))
                    } else {
                        Ok(StepResult::Continue)
                    }
                }
                Op::WaitReap => {
                    if prog.released {
                        Ok(StepResult::Exit)
                    } else {
                        Ok(StepResult::Block(None))
                    }
                }
                Op::Sleep(d) => {
                    *pc += 1;
                    let now = self.now(cpu);
                    match d {
                        Some(d) => Ok(StepResult::Block(Some(now + d))),
                        None => {
                            self.stop_counting(t);
                            Ok(StepResult::Block(None))
                        }
                    }
                }
                Op::Spin(d) => {
                    *pc += 1;
                    let now = self.now(cpu);
                    match d {
                        Some(d) => Ok(StepResult::Spin(now + d)),
                        None => {
                            self.stop_counting(t);
                            Ok(StepResult::Spin(FOREVER))
                        }
                    }
                }
            };
            return match result {
                Ok(r) => r,
                Err(msg) => {
                    self.workload_errors.push(format!("{}:{}: task {}: {msg}", prog.file, lineno, t.0));
                    StepResult::Exit
                }
            };
        }
    }

    /// `kernel_clone()` for `fork`: the child gets a COW copy of the mm and waits for `reap`.
    pub(crate) fn do_fork(&mut self, cpu: CpuId, parent: Tid) -> Result<(), FaultError> {
        let pmm = self.task(parent).mm.expect("user task");
        let child_mm = self.dup_mm(cpu, pmm)?;
        let code = Arc::new(vec![ops::OpLine { op: Op::WaitReap, line: 0 }]);
        let file = self.task(parent).prog.as_ref().map(|p| p.file.clone()).unwrap_or_default();
        let prog = Program { body: Body::Ops { prog: code, pc: 0, loops: Vec::new(), cursor: 0 }, file, released: false };
        let tgid = self.tasks.len() as u32 + 1_000_000;
        let affinity = self.task(parent).affinity;
        let child = self.new_task(tgid, Some(child_mm), cpu, affinity, prog);
        self.task_mut(child).parent = Some(parent);
        self.task_mut(parent).children.push(child);
        // wake_up_new_task(): the child waits on the runqueue behind the parent.
        let now = self.now(cpu);
        let target = self.select_task_rq(child);
        self.task_mut(child).cpu = target;
        let tc = target.0 as usize;
        self.cpus[tc].runqueue.push_back(child);
        if self.cpus[tc].current.is_none() {
            self.cpus[tc].clock = self.cpus[tc].clock.max(now);
            self.schedule(target);
        }
        Ok(())
    }

    /// `do_exit()`: drop the mm (tearing it down with the last user), wake a waiting parent, and
    /// leave the CPU.
    fn do_exit(&mut self, cpu: CpuId, t: Tid) {
        // A reclaim the task left for its next step ends first (in Linux it ends inside the
        // call that started it): its flush, its frees, its putbacks.
        if let Some(mut tail) = self.task_mut(t).reclaim_tail.take() {
            self.finish_reclaim_tail(cpu, &mut tail);
        }
        if let Some(mm) = self.task(t).mm {
            let m = self.mm_mut(mm);
            m.users -= 1;
            if m.users == 0 {
                self.exit_mmap(cpu, mm);
                self.mmdrop(mm);
            }
        }
        self.task_mut(t).state = TaskState::Dead;
        self.task_mut(t).exit_ns = Some(self.now(cpu));
        self.stop_counting(t);
        if let Some(p) = self.task(t).parent {
            let all_dead = self.task(p).children.iter().all(|&c| self.task(c).state == TaskState::Dead);
            if all_dead && self.task(p).waiting_for_children {
                self.task_mut(p).waiting_for_children = false;
                let now = self.now(cpu);
                self.wake_up(p, now);
            }
        }
        self.schedule(cpu);
    }
}
