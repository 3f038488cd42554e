//! The deterministic discrete-event engine.
//!
//! Each CPU has its own clock. Events live in one priority queue ordered by the rule below, and
//! the CPU whose next step is earliest runs; it keeps running steps until its clock passes the
//! next event's time, so no other CPU can act in between (a step is atomic: one user access, one
//! syscall, one fault).
//!
//! **Ordering rule for events at the same instant** (NeXosim-style written guarantee):
//! 1. earlier time first;
//! 2. then by class: timer wake-ups (`Wake`), then ends of spin loops (`SpinEnd`), then CPU steps
//!    (`CpuRun`) — so a task woken at time t is runnable before any CPU step at t;
//! 3. then by id (task id for Wake/SpinEnd, CPU id for CpuRun), lower first;
//! 4. then by insertion order.
//!
//! Nothing below the engine reads the wall clock, and nothing iterates a default-hashed map:
//! the same scenario and seed give byte-identical output.
//!
//! Departure from real time: an IPI is handled on the target at its arrival time, but the target
//! may already have simulated a few steps past that time (at most one step, since the sender is
//! the earliest CPU); those steps are ordered before the flush. The interrupt's cost is added to
//! the target's clock.

pub mod chunked;
pub mod prng;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::types::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum EventKind {
    Wake = 0,
    SpinEnd = 1,
    CpuRun = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Event {
    pub time: Ns,
    pub kind: EventKind,
    pub id: u32,
    pub seq: u64,
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Event>>,
    seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: Ns, kind: EventKind, id: u32) {
        self.seq += 1;
        self.heap.push(Reverse(Event { time, kind, id, seq: self.seq }));
    }
    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop().map(|Reverse(e)| e)
    }
    pub fn peek_time(&self) -> Option<Ns> {
        self.heap.peek().map(|Reverse(e)| e.time)
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_instant_order_is_class_then_id_then_insertion() {
        let mut q = EventQueue::default();
        q.push(10, EventKind::CpuRun, 0);
        q.push(10, EventKind::Wake, 5);
        q.push(5, EventKind::CpuRun, 3);
        q.push(10, EventKind::Wake, 2);
        q.push(10, EventKind::CpuRun, 0);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|e| (e.time, e.kind, e.id, e.seq)).collect();
        assert_eq!(
            order,
            vec![(5, EventKind::CpuRun, 3, 3), (10, EventKind::Wake, 2, 4), (10, EventKind::Wake, 5, 2), (10, EventKind::CpuRun, 0, 1), (10, EventKind::CpuRun, 0, 5)]
        );
    }
}
