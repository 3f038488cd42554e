//! Scheduling (kernel/sched/core.c, heavily simplified): per-CPU FIFO runqueues with a time
//! slice of one tick, wake-up placement, idle balancing (an idle CPU pulls an unpinned waiting
//! task), and `context_switch()` → `switch_mm_irqs_off()` / `enter_lazy_tlb()`.
//!
//! Departures: no CFS/EEVDF virtual time or load tracking; wake-up placement prefers the
//! previous CPU if idle, then the lowest-numbered idle CPU allowed, else the previous CPU;
//! no periodic load balancing between busy CPUs, so a kernel thread woken on a CPU whose task
//! never sleeps (kswapd beside a reader in `reproduce batched-flush`) shares that CPU with it
//! for as long as no CPU goes idle, where Linux would spread the load over all busy CPUs.

use crate::engine::EventKind;
use crate::sim::{Sim, TaskState};
use crate::types::*;

/// A spin or sleep that never ends by itself (daemon threads: ended with the run).
pub const FOREVER: Ns = Ns::MAX / 4;

impl Sim {
    fn cpu_allowed(&self, t: Tid, c: CpuId) -> bool {
        self.task(t).affinity.is_none_or(|a| a == c)
    }

    /// `select_task_rq()`.
    pub(crate) fn select_task_rq(&self, t: Tid) -> CpuId {
        if let Some(a) = self.task(t).affinity {
            return a;
        }
        let prev = self.task(t).cpu;
        let idle = |c: &crate::sim::Cpu| c.current.is_none() && c.runqueue.is_empty();
        if idle(&self.cpus[prev.0 as usize]) {
            return prev;
        }
        self.cpus.iter().find(|c| idle(c)).map(|c| c.id).unwrap_or(prev)
    }

    /// `wake_up_process()` at time `at`.
    pub fn wake_up(&mut self, t: Tid, at: Ns) {
        if matches!(self.task(t).state, TaskState::Dead | TaskState::Runnable) {
            return;
        }
        let cpu = self.select_task_rq(t);
        let task = self.task_mut(t);
        task.state = TaskState::Runnable;
        task.cpu = cpu;
        self.enqueue(cpu, t, at);
    }

    /// Put a runnable task on a CPU's queue, starting the CPU if it is idle. On a busy CPU the
    /// wakeup shortens the running task's slice to the base slice (EEVDF wakeup preemption:
    /// the woken task has positive lag and runs within sysctl_sched_base_slice).
    pub fn enqueue(&mut self, cpu: CpuId, t: Tid, at: Ns) {
        let ci = cpu.0 as usize;
        self.cpus[ci].runqueue.push_back(t);
        match self.cpus[ci].current {
            None => {
                self.cpus[ci].clock = self.cpus[ci].clock.max(at);
                self.schedule(cpu);
            }
            Some(cur) if cur != t => {
                let (base, slice) = (self.p.base_slice_ns, self.p.slice_ns);
                let task = self.task_mut(cur);
                let started = task.slice_end.saturating_sub(slice);
                task.slice_end = task.slice_end.min(started + base).max(at);
            }
            _ => {}
        }
    }

    /// Mark a CPU as having steps to run and queue its next step.
    pub fn kick(&mut self, cpu: CpuId) {
        let c = &mut self.cpus[cpu.0 as usize];
        if !c.scheduled {
            c.scheduled = true;
            // The CPU the event loop is running re-queues itself when it stops.
            if self.running_cpu != Some(cpu) {
                let t = c.clock;
                self.events.push(t, EventKind::CpuRun, cpu.0);
            }
        }
    }

    /// `__schedule()`: pick the next task for `cpu` (current has blocked, exited or been
    /// preempted and requeued) or go idle.
    pub fn schedule(&mut self, cpu: CpuId) {
        let ci = cpu.0 as usize;
        let next = self.cpus[ci].runqueue.pop_front().or_else(|| self.idle_balance(cpu));
        let prev = self.cpus[ci].current;
        match next {
            Some(t) => {
                if prev != Some(t) {
                    self.context_switch(cpu, Some(t));
                }
                self.cpus[ci].current = Some(t);
                let slice = self.p.slice_ns;
                let now = self.now(cpu);
                let task = self.task_mut(t);
                task.cpu = cpu;
                task.slice_end = now + slice;
                match task.state {
                    TaskState::Spinning(until) => {
                        self.cpus[ci].scheduled = false;
                        self.events.push(until, EventKind::SpinEnd, t.0);
                    }
                    _ => self.kick(cpu),
                }
            }
            None => {
                if prev.is_some() {
                    self.context_switch(cpu, None);
                }
                self.cpus[ci].current = None;
                self.cpus[ci].scheduled = false;
            }
        }
    }

    /// Idle balancing: pull a waiting task that may run here from the busiest other CPU.
    fn idle_balance(&mut self, cpu: CpuId) -> Option<Tid> {
        let mut best: Option<(usize, usize)> = None;
        for (i, c) in self.cpus.iter().enumerate() {
            if i == cpu.0 as usize {
                continue;
            }
            if let Some(pos) = c.runqueue.iter().position(|&t| self.cpu_allowed(t, cpu)) {
                if best.is_none_or(|(bi, _)| self.cpus[bi].runqueue.len() < c.runqueue.len()) {
                    best = Some((i, pos));
                }
            }
        }
        let (i, pos) = best?;
        let t = self.cpus[i].runqueue.remove(pos)?;
        // The migrated task starts no earlier than it was waiting on the other CPU.
        let at = self.cpus[i].clock;
        let c = &mut self.cpus[cpu.0 as usize];
        c.clock = c.clock.max(at);
        Some(t)
    }

    /// `context_switch()`: switch address space (or go lazy for idle) and charge the switch.
    fn context_switch(&mut self, cpu: CpuId, next: Option<Tid>) {
        self.cpus[cpu.0 as usize].stats.context_switches += 1;
        let mm = next.and_then(|t| self.task(t).mm);
        match mm {
            Some(mm) => self.switch_mm_irqs_off(cpu, Some(mm)),
            None => self.enter_lazy_tlb(cpu),
        }
        if next.is_some() {
            self.charge_sys(cpu, self.p.context_switch_ns);
        }
    }

    /// Time-slice expiry: requeue the current task behind any waiting one.
    pub fn maybe_preempt(&mut self, cpu: CpuId) -> bool {
        let ci = cpu.0 as usize;
        let Some(t) = self.cpus[ci].current else { return false };
        let now = self.now(cpu);
        if now < self.task(t).slice_end {
            return false;
        }
        if self.cpus[ci].runqueue.is_empty() {
            // Nobody waiting: a new slice (the tick finds nothing to switch to).
            self.task_mut(t).slice_end = now + self.p.slice_ns;
            return false;
        }
        self.cpus[ci].runqueue.push_back(t);
        self.schedule(cpu);
        true
    }

    /// The current task on `cpu` blocks (sleep, wait): it leaves the CPU.
    pub fn block_current(&mut self, cpu: CpuId, wake_at: Option<Ns>) {
        let t = self.cpus[cpu.0 as usize].current.expect("a running task");
        self.task_mut(t).state = TaskState::Blocked;
        if let Some(w) = wake_at {
            self.events.push(w, EventKind::Wake, t.0);
        }
        self.cpus[cpu.0 as usize].current = Some(t);
        self.schedule_away(cpu);
    }

    /// The current task keeps its CPU but needs no steps until `until` (a user spin loop).
    pub fn spin_current(&mut self, cpu: CpuId, until: Ns) {
        let t = self.cpus[cpu.0 as usize].current.expect("a running task");
        self.task_mut(t).state = TaskState::Spinning(until);
        self.cpus[cpu.0 as usize].scheduled = false;
        if until < FOREVER {
            self.events.push(until, EventKind::SpinEnd, t.0);
        }
    }

    /// A spin ended (or its event fired after an interrupt extended it).
    pub fn spin_end(&mut self, t: Tid, at: Ns) {
        let TaskState::Spinning(until) = self.task(t).state else { return };
        if until > at {
            if until < FOREVER {
                self.events.push(until, EventKind::SpinEnd, t.0);
            }
            return;
        }
        let cpu = self.task(t).cpu;
        let ci = cpu.0 as usize;
        if self.cpus[ci].current != Some(t) {
            return;
        }
        // The spin was user time.
        let start = self.cpus[ci].clock;
        if at > start {
            self.charge_user_ns(cpu, at - start);
        }
        self.task_mut(t).state = TaskState::Runnable;
        self.kick(cpu);
    }

    /// Leave the CPU: switch to the next runnable task or idle.
    fn schedule_away(&mut self, cpu: CpuId) {
        self.schedule(cpu);
    }
}
