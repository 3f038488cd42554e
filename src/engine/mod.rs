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
//! 4. events equal in all three are interchangeable (they carry nothing else).
//!
//! Nothing below the engine reads the wall clock, and nothing iterates a default-hashed map:
//! the same scenario and seed give byte-identical output.
//!
//! Departure from real time: an IPI is handled on the target at its arrival time, but the target
//! may already have simulated a few steps past that time (at most one step, since the sender was
//! the earliest CPU when its step began); those steps are ordered before the flush. The
//! interrupt's cost is added to the target's clock. The other way round, an IPI sent late in a
//! long step reaches a target that has not run up to its arrival, whose interrupts-off sections
//! then are not known yet: so the long kernel loops that send IPIs or take contended locks (a
//! reclaim batch's folios, a readahead window's pages, a reclaim's frees after its flush) end
//! their step once the CPU's clock passes the next event (`Sim::ahead_of_others`), and go on in
//! the task's next step.

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
}

/// The queue keeps each event as one `u128` whose order is the rule above: the time in the top
/// 64 bits, the class in the next 2 and the id in the low 32. One integer compare per step of a
/// sift instead of four fields, and 16 bytes an entry instead of 24 (docs/performance.md, item
/// 31). Rule 4 needs no bits: events equal in time, class and id carry nothing else, so which
/// of them comes out first cannot be observed.
fn pack(time: Ns, kind: EventKind, id: u32) -> u128 {
    (time as u128) << 64 | (kind as u128) << 62 | id as u128
}

fn unpack(k: u128) -> Event {
    let kind = match (k >> 62) & 3 {
        0 => EventKind::Wake,
        1 => EventKind::SpinEnd,
        _ => EventKind::CpuRun,
    };
    Event { time: (k >> 64) as Ns, kind, id: k as u32 }
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<u128>>,
}

impl EventQueue {
    pub fn push(&mut self, time: Ns, kind: EventKind, id: u32) {
        self.heap.push(Reverse(pack(time, kind, id)));
    }
    /// `push` then `pop` in one step: the event pushed is returned at once when it comes
    /// first, else it takes the place of the first event, which is returned (one sift down of
    /// the heap instead of a sift up and a sift down). The same event comes out, and the same
    /// events stay queued, as with `push` and `pop`.
    pub fn push_pop(&mut self, time: Ns, kind: EventKind, id: u32) -> Event {
        let e = pack(time, kind, id);
        match self.heap.peek_mut() {
            Some(mut top) if top.0 < e => unpack(std::mem::replace(&mut *top, Reverse(e)).0),
            _ => unpack(e),
        }
    }
    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop().map(|Reverse(k)| unpack(k))
    }
    pub fn peek_time(&self) -> Option<Ns> {
        self.heap.peek().map(|Reverse(k)| (k >> 64) as Ns)
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pop_is_push_then_pop() {
        let mut rng = crate::engine::prng::Prng::new(5);
        let (mut a, mut b) = (EventQueue::default(), EventQueue::default());
        let kinds = [EventKind::Wake, EventKind::SpinEnd, EventKind::CpuRun];
        for _ in 0..5_000 {
            let (t, k, id) = (rng.below(50), kinds[rng.below(3) as usize], rng.below(4) as u32);
            if rng.below(3) == 0 {
                a.push(t, k, id);
                b.push(t, k, id);
            } else {
                a.push(t, k, id);
                assert_eq!(a.pop(), Some(b.push_pop(t, k, id)));
            }
        }
        let drain = |q: &mut EventQueue| std::iter::from_fn(|| q.pop()).collect::<Vec<_>>();
        assert_eq!(drain(&mut a), drain(&mut b));
    }

    /// The packed queue pops what a heap of the three fields in lexicographic order pops, with
    /// times and ids over their whole ranges.
    #[test]
    fn packed_keys_order_as_the_fields_do() {
        let kinds = [EventKind::Wake, EventKind::SpinEnd, EventKind::CpuRun];
        let ev = |Reverse((time, kind, id)): Reverse<(Ns, EventKind, u32)>| Event { time, kind, id };
        let mut rng = crate::engine::prng::Prng::new(7);
        let mut q = EventQueue::default();
        let mut r: BinaryHeap<Reverse<(Ns, EventKind, u32)>> = BinaryHeap::new();
        for _ in 0..20_000 {
            let t = if rng.below(2) == 0 { rng.below(8) } else { Ns::MAX - rng.below(3) };
            let k = kinds[rng.below(3) as usize];
            let id = if rng.below(2) == 0 { rng.below(3) as u32 } else { u32::MAX - rng.below(2) as u32 };
            match rng.below(3) {
                0 => assert_eq!(q.pop(), r.pop().map(ev)),
                1 => {
                    q.push(t, k, id);
                    r.push(Reverse((t, k, id)));
                }
                _ => {
                    r.push(Reverse((t, k, id)));
                    assert_eq!(q.push_pop(t, k, id), r.pop().map(ev).unwrap());
                }
            }
            assert_eq!(q.peek_time(), r.peek().map(|Reverse(e)| e.0));
        }
    }

    #[test]
    fn same_instant_order_is_class_then_id() {
        let mut q = EventQueue::default();
        q.push(10, EventKind::CpuRun, 0);
        q.push(10, EventKind::Wake, 5);
        q.push(5, EventKind::CpuRun, 3);
        q.push(10, EventKind::Wake, 2);
        q.push(10, EventKind::CpuRun, 0);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|e| (e.time, e.kind, e.id)).collect();
        assert_eq!(
            order,
            vec![(5, EventKind::CpuRun, 3), (10, EventKind::Wake, 2), (10, EventKind::Wake, 5), (10, EventKind::CpuRun, 0), (10, EventKind::CpuRun, 0)]
        );
    }
}
