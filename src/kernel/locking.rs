//! kernel/locking/: a deterministic model of the kernel locks the mm paths take (qspinlock,
//! rwsem), with interrupts-off sections and /proc/lock_stat accounting.
//!
//! Each lock instance keeps a small **calendar of busy intervals** in simulated time. CPUs run
//! steps in (nearly) clock order, but a step may run a CPU ahead of the others by up to one
//! step, so a request can arrive "in the past" of intervals already booked by a CPU that ran
//! first. An acquire with a known hold is granted at the first gap at or after the requester's
//! clock that fits it; an acquire whose hold is only known at release (a section that waits for
//! IPIs, a fault under mmap_lock) is granted at the first free instant and booked at release.
//! Ties break by the order in which steps run (earliest clock, then CPU id), so runs stay
//! byte-identical.
//!
//! What a lock costs (all from `Params`, each knob cited in `mmsim knobs`):
//! - the hold: the work inside, charged by the caller's cost model (e.g. one dependent cache
//!   miss per folio moved on an LRU list);
//! - a hand-off: when the previous holder was another CPU, the lock word's cache line (and the
//!   data it protects) moves: `cost.lock_handoff_ns`, plus `cost.lock_handoff_cross_socket_ns`
//!   from another socket (lock_stat's acq-bounces);
//! - the wait: a spinlock waiter spins (system time, `native_queued_spin_lock_slowpath`); an
//!   rwsem waiter sleeps (its CPU idles, `rwsem_down_*_slowpath`).
//!
//! Interrupts off: `spin_lock_irq`/`irqsave` disable interrupts before spinning, so from the
//! request to the release the CPU takes no IPI. Each CPU keeps its recent irq-off intervals;
//! an IPI arriving inside one is handled when it ends (arch/x86/mm/tlb.rs), and the sender
//! waits that long.
//!
//! Departures: no optimistic spinning of rwsem writers on a running owner (waits are sleeps),
//! no lock stealing or MCS queue order beyond "first fit in time", no reader/writer fairness
//! beyond the calendar's order; an open section (hold unknown) is booked at release, so a
//! request booked meanwhile at a later time may overlap it (counted in `overlaps()`).

use std::collections::{HashMap, VecDeque};

use crate::engine::chunked::{Chunked, Cursor, Keyed};
use crate::kernel::profile::{KFn, NKFN};
use crate::sim::Sim;
use crate::types::*;

/// Lock classes, named as /proc/lock_stat names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockClass {
    /// `&lruvec->lru_lock` (per zone in 4.2 as `&zone->lru_lock`, per node from 4.8 as
    /// `&pgdat->lru_lock`, per lruvec from 5.11; the model has one zone and no memcg per node,
    /// so all three are one instance per node). spin_lock_irq.
    LruLock = 0,
    /// `&zone->lock`: the buddy lists (rmqueue_bulk, free_pcppages_bulk). spin_lock_irqsave.
    ZoneLock = 1,
    /// `&mapping->i_pages` (4.2: `&mapping->tree_lock`): the page cache. xa_lock_irq.
    IPages = 2,
    /// `&mapping->i_mmap_rwsem`: the file rmap tree.
    IMmapRwsem = 3,
    /// `&anon_vma->rwsem`.
    AnonVmaRwsem = 4,
    /// `ptlock_ptr(page)`: the split PTE-table lock.
    Ptl = 5,
    /// `&mm->mmap_lock` (`mmap_sem` before 5.8).
    MmapLock = 6,
    /// LUF v12 (mm/luf.rs, not in any Linux): the global `luf_batch` rwlock, read on the file
    /// write path (`mapping_write_begin()` → the mapping's pending flush), written by folds.
    LufLock = 7,
}

pub const LOCK_CLASSES: [LockClass; 8] =
    [LockClass::LruLock, LockClass::ZoneLock, LockClass::IPages, LockClass::IMmapRwsem, LockClass::AnonVmaRwsem, LockClass::Ptl, LockClass::MmapLock, LockClass::LufLock];

impl LockClass {
    pub fn name(self, preset_version: (u32, u32)) -> &'static str {
        match self {
            LockClass::LruLock if preset_version < (4, 8) => "&zone->lru_lock",
            LockClass::LruLock if preset_version < (5, 11) => "&pgdat->lru_lock",
            LockClass::LruLock => "&lruvec->lru_lock",
            LockClass::ZoneLock => "&zone->lock",
            LockClass::IPages if preset_version < (4, 17) => "&mapping->tree_lock",
            LockClass::IPages => "&mapping->i_pages",
            LockClass::IMmapRwsem => "&mapping->i_mmap_rwsem",
            LockClass::AnonVmaRwsem => "&anon_vma->rwsem",
            LockClass::Ptl => "ptlock_ptr(ptdesc)",
            LockClass::MmapLock if preset_version < (5, 8) => "&mm->mmap_sem",
            LockClass::MmapLock => "&mm->mmap_lock",
            LockClass::LufLock => "&luf_batch->lock",
        }
    }
    /// Spinlocks spin while waiting; rwsems sleep.
    pub fn is_spin(self) -> bool {
        matches!(self, LockClass::LruLock | LockClass::ZoneLock | LockClass::IPages | LockClass::Ptl | LockClass::LufLock)
    }
    /// Taken with interrupts disabled (spin_lock_irq / irqsave / xa_lock_irq).
    pub fn irqs_off(self) -> bool {
        matches!(self, LockClass::LruLock | LockClass::ZoneLock | LockClass::IPages)
    }
    /// Only ever read-locked in the model: the rmap walks take i_mmap_rwsem and the anon_vma
    /// rwsem for read (`rmap_lock()`), and no modelled path takes them for write (the kernel's
    /// writers, vma_link()/unlink_file_vma() and anon_vma_fork()/unlink_anon_vmas(), are not
    /// lock sections here). A reader waits only for writers, so a read request on these is
    /// granted at once with no hand-off, and its hold need not be booked: nothing would read
    /// it (docs/performance.md, item 29). A path that write-locks one must take its class out
    /// of this list.
    pub fn readers_only(self) -> bool {
        matches!(self, LockClass::IMmapRwsem | LockClass::AnonVmaRwsem)
    }
}

/// One lock instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockId {
    Lru(u32),
    Zone(u32),
    IPages(u32),
    IMmap(u32),
    AnonVma(u32),
    /// (mm, PTE table index = vpn >> 9)
    Ptl(u32, u64),
    MmapLock(u32),
    /// LUF v12's global batch lock (one instance).
    Luf,
}

impl LockId {
    pub fn class(self) -> LockClass {
        match self {
            LockId::Lru(_) => LockClass::LruLock,
            LockId::Zone(_) => LockClass::ZoneLock,
            LockId::IPages(_) => LockClass::IPages,
            LockId::IMmap(_) => LockClass::IMmapRwsem,
            LockId::AnonVma(_) => LockClass::AnonVmaRwsem,
            LockId::Ptl(..) => LockClass::Ptl,
            LockId::MmapLock(_) => LockClass::MmapLock,
            LockId::Luf => LockClass::LufLock,
        }
    }
    /// A read request on a readers-only class ([`LockClass::readers_only`]): granted at once
    /// with no hand-off, and not booked. A write request on such a class is a model bug.
    #[inline]
    fn unbooked_read(self, shared: bool) -> bool {
        debug_assert!(shared || !self.class().readers_only(), "{self:?} write-locked: see LockClass::readers_only");
        shared && self.class().readers_only()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Exclusive,
    Shared,
}

/// One hold of a lock: requested at `req`, granted at `start`, released at `end`. 48 bytes
/// (from 64: docs/performance.md, item 12): the CPU numbers are u16 (`machine.cpus` is at
/// most 4096; `u16::MAX` stands for `u32::MAX`, "no owner").
#[derive(Clone, Copy, Debug)]
struct Busy {
    req: Ns,
    start: Ns,
    end: Ns,
    /// The latest `end` of any hold at or before this one in request order (prefix maximum),
    /// for all holds and for exclusive ones only, with the owner of that hold.
    pm_all_end: Ns,
    pm_excl_end: Ns,
    cpu: u16,
    pm_all_cpu: u16,
    pm_excl_cpu: u16,
    shared: bool,
    /// The kernel function that took the hold (`KFn as u8`, the innermost modelled function on
    /// the CPU's stack): lock_stat's acquire site, reported as a contending point when another
    /// CPU queues behind this hold. It fits the struct's padding byte.
    site: u8,
}

const _: () = assert!(std::mem::size_of::<Busy>() == 48);

/// A CPU number (or `u32::MAX`, none) in a hold's 16 bits.
#[inline]
fn cpu16(c: u32) -> u16 {
    debug_assert!(c < u16::MAX as u32 || c == u32::MAX, "CPU {c} in a lock hold");
    c as u16
}

#[inline]
fn cpu32(c: u16) -> u32 {
    if c == u16::MAX {
        u32::MAX
    } else {
        c as u32
    }
}

impl Busy {
    #[allow(clippy::too_many_arguments)]
    fn new(req: Ns, start: Ns, end: Ns, cpu: u32, shared: bool, site: u8, pm_all: (Ns, u32), pm_excl: (Ns, u32)) -> Busy {
        Busy { req, start, end, pm_all_end: pm_all.0, pm_excl_end: pm_excl.0, cpu: cpu16(cpu), pm_all_cpu: cpu16(pm_all.1), pm_excl_cpu: cpu16(pm_excl.1), shared, site }
    }
    #[inline]
    fn cpu(&self) -> u32 {
        cpu32(self.cpu)
    }
    /// The prefix maxima (all holds, exclusive holds), each as (end, owner).
    #[inline]
    fn pm(&self) -> ((Ns, u32), (Ns, u32)) {
        ((self.pm_all_end, cpu32(self.pm_all_cpu)), (self.pm_excl_end, cpu32(self.pm_excl_cpu)))
    }
}

impl Keyed for Busy {
    /// Holds are kept sorted by request time.
    #[inline]
    fn key(&self) -> u64 {
        self.req
    }
}

/// A lock's holds in **request order** (the MCS queue order of qspinlock; rwsems hand the lock
/// over in the order waiters queued): a request at `t` is granted when every conflicting hold
/// requested before `t` has ended. Prefix maxima make that one binary search.
#[derive(Clone, Debug)]
pub struct Calendar {
    /// In blocks (`engine::chunked`): a request booked far before the back moves one block,
    /// not half the calendar (docs/performance.md).
    q: Chunked<Busy>,
    /// The prefix maxima of the holds pruned from the front (what a request older than every
    /// kept hold queues behind).
    pruned: ((Ns, u32), (Ns, u32)),
    /// A PTE-table lock's calendar is on `Cals::ptl_live` (see `Locks::sweep`).
    live: bool,
    /// A hold taken by [`Sim::lock_acquire`] and not yet booked: booked with its final end at
    /// release if nothing touched the calendar meanwhile (the usual case: an rmap walk under
    /// i_mmap_rwsem), else booked open, as it would have been at the acquire, by the next
    /// operation on the calendar ([`Calendar::settle`]). docs/performance.md, item 25.
    open: Option<Open>,
}

/// A hold granted by [`Sim::lock_acquire`] and not booked yet, with its queue position.
#[derive(Clone, Copy, Debug)]
struct Open {
    req: Ns,
    start: Ns,
    cpu: u32,
    shared: bool,
    site: u8,
    at: Cursor,
}

/// Holds requested this long before the event loop's floor (the time of the step being run,
/// below which no CPU normally makes a request) are dropped, their ends kept in the prefix
/// maxima (`Calendar::pruned`), so a request from a CPU whose clock lags still queues behind
/// them.
///
/// Nothing else is pruned: a hold requested after the floor may still be ahead of a request
/// to come (a CPU that ran one long step, e.g. a direct reclaim that scanned a whole LRU list,
/// booked holds far past the other CPUs' clocks). Until 2026-11-27 a calendar longer than 4096
/// holds also dropped its oldest holds whatever their time, and a request from a lagging CPU
/// then queued behind the dropped future holds' ends: every CPU of a node waited up to 0.5 s
/// for an LRU lock whose holds last 3 µs (docs/reclaim.md, session 17).
const KEEP_NS: Ns = 5_000;

/// How many later-requested holds [`Calendar::grant_past`] looks at per pass.
const GRANT_SCAN: usize = 4096;

/// How far back [`Calendar::owner_site`] looks for the hold a contended request waits for.
const OWNER_SCAN: usize = 256;

impl Default for Calendar {
    fn default() -> Self {
        Calendar { q: Chunked::default(), pruned: ((0, u32::MAX), (0, u32::MAX)), live: false, open: None }
    }
}

impl Calendar {
    /// Book the open hold, if any, at the position it was granted (its end still unknown,
    /// = its start, closed at release): the state `lock_acquire` would have left. Every
    /// operation on the calendar but the release of that very hold calls this first.
    fn settle(&mut self) {
        if let Some(o) = self.open.take() {
            self.insert_at(o.at, o.req, o.start, o.start, o.cpu, o.shared, o.site);
        }
    }

    fn prune(&mut self, floor: Ns) {
        // The front's request time is kept beside the length, so a calendar with nothing to
        // prune reads none of its holds (docs/performance.md, item 11).
        while let Some(req) = self.q.front_key() {
            if req + KEEP_NS >= floor {
                break;
            }
            // The whole front block goes when its last hold would (request times are sorted):
            // at once, reading only its last hold (item 13).
            let (_, last) = self.q.front_block().expect("a front block");
            let f = if last + KEEP_NS < floor { self.q.pop_front_block() } else { self.q.pop_front() };
            self.pruned = f.expect("a front hold").pm();
        }
    }

    /// Position of the first hold requested after `t`.
    fn pos(&self, t: Ns) -> Cursor {
        // The holds are sorted by `req`. The last block first (most requests land there), else
        // a bisection over the blocks' last request times (one contiguous array), then within
        // one block of at most 64 (the scan of the last 16 holds that came first before cost
        // 16 host cache misses for the many requests that land further back,
        // docs/performance.md).
        self.q.partition_point_key(|req| req <= t)
    }

    /// When a request at `t` is granted: after every conflicting hold requested at or before
    /// `t` (a shared request conflicts with exclusive holds only). Returns (start, owner of the
    /// hold it follows, i.e. who had the lock last).
    #[cfg(test)]
    fn find(&self, t: Ns, shared: bool) -> (Ns, Option<u32>) {
        let k = self.pos(t);
        self.find_at(k, t, shared)
    }

    /// [`Calendar::find`] with the request's queue position `k = self.pos(t)` known.
    fn find_at(&self, k: Cursor, t: Ns, shared: bool) -> (Ns, Option<u32>) {
        let (all, excl) = self.q.before(k).map_or(self.pruned, |b| b.pm());
        let (end, cpu) = if shared { excl } else { all };
        // The last holder before us: the conflicting hold that ended last (an exclusive
        // request after readers pays the hand-off from the last reader too).
        let owner = if end == 0 && cpu == u32::MAX { None } else { Some(cpu) };
        (t.max(end), owner)
    }

    /// The acquire site of the hold a request at queue position `k`, granted at `s > t`, waits
    /// for: the conflicting hold before `k` that ends at `s` on CPU `owner` (the prefix maximum
    /// `find_at` read). Searched backwards from `k`; it is nearly always the hold just before.
    /// A hold already pruned, or one more than [`OWNER_SCAN`] holds back, gives
    /// `KFn::Other` (0): lock_stat's "contending point" is then unknown, never wrong.
    fn owner_site(&self, k: Cursor, s: Ns, owner: Option<u32>, shared: bool) -> u8 {
        let Some(owner) = owner else { return 0 };
        let is_owner = |b: &Busy| b.end == s && b.cpu() == owner && !(shared && b.shared);
        // The hold just before is the one nearly always: look at it without the iterator.
        match self.q.before(k) {
            Some(b) if is_owner(b) => b.site,
            _ => self.owner_site_scan(k, is_owner),
        }
    }

    #[cold]
    #[inline(never)]
    fn owner_site_scan(&self, k: Cursor, is_owner: impl Fn(&Busy) -> bool) -> u8 {
        self.q.iter_rev_before(k).take(OWNER_SCAN).find(|(_, b)| is_owner(b)).map_or(0, |(_, b)| b.site)
    }

    /// Book a hold (in request order) and fix the prefix maxima after it.
    #[cfg(test)]
    fn insert(&mut self, req: Ns, start: Ns, end: Ns, cpu: u32, shared: bool) -> Cursor {
        let k = self.pos(req);
        self.insert_at(k, req, start, end, cpu, shared, 0)
    }

    /// Returns the position of the new hold (positions taken before are invalid after).
    #[allow(clippy::too_many_arguments)]
    fn insert_at(&mut self, k: Cursor, req: Ns, start: Ns, end: Ns, cpu: u32, shared: bool, site: u8) -> Cursor {
        if k == self.q.end() {
            let (all, excl) = self.q.back().map_or(self.pruned, |b| b.pm());
            let all = if end >= all.0 { (end, cpu) } else { all };
            let excl = if !shared && end >= excl.0 { (end, cpu) } else { excl };
            return self.q.insert(k, Busy::new(req, start, end, cpu, shared, site, all, excl));
        }
        let k = self.q.insert(k, Busy::new(req, start, end, cpu, shared, site, (0, u32::MAX), (0, u32::MAX)));
        self.fix(k);
        k
    }

    /// Recompute prefix maxima from position `k` on.
    fn fix(&mut self, k: Cursor) {
        let (all, excl) = self.q.before(k).map_or(self.pruned, |b| b.pm());
        // In the holds' own 16-bit CPU numbers (`cpu16` and `cpu32` are inverse), so that the
        // loop converts nothing.
        let (mut all_end, mut all_cpu, mut excl_end, mut excl_cpu) = (all.0, cpu16(all.1), excl.0, cpu16(excl.1));
        for b in self.q.iter_mut_from(k) {
            if b.end >= all_end {
                (all_end, all_cpu) = (b.end, b.cpu);
            }
            if !b.shared && b.end >= excl_end {
                (excl_end, excl_cpu) = (b.end, b.cpu);
            }
            if (b.pm_all_end, b.pm_all_cpu, b.pm_excl_end, b.pm_excl_cpu) == (all_end, all_cpu, excl_end, excl_cpu) {
                // Nothing after this changes either.
                break;
            }
            (b.pm_all_end, b.pm_all_cpu, b.pm_excl_end, b.pm_excl_cpu) = (all_end, all_cpu, excl_end, excl_cpu);
        }
    }

    /// An open hold ends: set its end (found by request time and CPU). Returns the position
    /// of the first hold requested after `req` (for [`Calendar::overlaps_from`]).
    fn close(&mut self, req: Ns, cpu: u32, end: Ns) -> Cursor {
        let hi = self.pos(req);
        let found = self.q.iter_rev_before(hi).find(|(_, b)| b.req == req && b.cpu() == cpu).map(|(c, _)| c);
        if let Some(c) = found {
            if let Some(b) = self.q.at_mut(c) {
                b.end = end;
            }
            // `fix` moves no hold, so `hi` stays valid.
            self.fix(c);
        }
        hi
    }

    /// When a request at `t` (queue position `k = self.pos(t)`) is granted under `rule`: the
    /// FIFO grant of [`Calendar::find_at`], moved by [`Calendar::grant_past`] for the other
    /// rules (`gap_len`: the section's longest length, for gap-fit; None grants gap-fit as
    /// wait-held). Returns (start, the owner of the hold it follows, that hold's site, 0 when
    /// it waited for none).
    #[inline]
    fn grant(&self, k: Cursor, t: Ns, shared: bool, rule: Grant, gap_len: Option<Ns>) -> (Ns, Option<u32>, u8) {
        let (s, prev) = self.find_at(k, t, shared);
        // Only a contended request looks for the hold it waits for.
        let site = if s > t { self.owner_site(k, s, prev, shared) } else { 0 };
        if rule == Grant::Fifo {
            return (s, prev, site);
        }
        self.grant_past(k, s, prev, site, if rule == Grant::GapFit { gap_len } else { None }, shared)
    }

    /// [`Grant::WaitHeld`] and [`Grant::GapFit`]: move a grant `cur` (after `prev`'s hold, of
    /// site `site`) past the conflicting holds requested after it (from position `k` on) that
    /// it would meet: with `len` None, those in progress at `cur`; with `Some(len)`, those that
    /// would overlap `[cur, cur + len)`. Holds are sorted by request time and none starts
    /// before it is requested, so the scan stops at the first requested at or after the end
    /// of the window; it looks at most [`GRANT_SCAN`] holds per pass.
    #[cold]
    #[inline(never)]
    fn grant_past(&self, k: Cursor, mut cur: Ns, mut prev: Option<u32>, mut site: u8, len: Option<Ns>, shared: bool) -> (Ns, Option<u32>, u8) {
        loop {
            let end = cur + len.unwrap_or(0);
            let mut moved = false;
            for b in self.q.iter_from(k).take(GRANT_SCAN) {
                if b.req > end || (len.is_some() && b.req == end) {
                    break;
                }
                let meets = match len {
                    None => b.start <= cur && b.end > cur,
                    Some(_) => b.start < end && b.end > cur,
                };
                if meets && !(shared && b.shared) {
                    (cur, prev, site) = (b.end, Some(b.cpu()), b.site);
                    moved = true;
                    break;
                }
            }
            if !moved {
                return (cur, prev, site);
            }
        }
    }

    /// Holds requested after `req` (from `hi = self.pos(req)` on) that were granted before
    /// `end` and conflict with a hold `[start, end)`: they ran first in host order and are not
    /// delayed retroactively.
    fn overlaps_from(&self, hi: Cursor, start: Ns, end: Ns, shared: bool) -> bool {
        if hi == self.q.end() {
            // Booked last in request order (most holds): nothing to look at.
            return false;
        }
        // A hold requested at or after `end` starts at or after it: stop there.
        self.q.any_below_key(hi, end, |b| !(shared && b.shared) && b.start < end && b.end > start)
    }
}

/// One line of /proc/lock_stat: a class's exclusive or shared acquisitions, lockdep's
/// `write_waittime`/`write_holdtime` or `read_waittime`/`read_holdtime` (`struct lock_time`)
/// with their bounces (times in ns).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct LockTimes {
    pub con_bounces: u64,
    pub contentions: u64,
    pub waittime_min: Ns,
    pub waittime_max: Ns,
    pub waittime_total: Ns,
    pub acq_bounces: u64,
    pub acquisitions: u64,
    pub holdtime_min: Ns,
    pub holdtime_max: Ns,
    pub holdtime_total: Ns,
}

impl LockTimes {
    fn wait(&mut self, w: Ns, bounce: bool) {
        if self.contentions == 0 || w < self.waittime_min {
            self.waittime_min = w;
        }
        self.contentions += 1;
        self.con_bounces += bounce as u64;
        self.waittime_max = self.waittime_max.max(w);
        self.waittime_total += w;
    }
    fn hold(&mut self, h: Ns, bounce: bool) {
        if self.acquisitions == 0 || h < self.holdtime_min {
            self.holdtime_min = h;
        }
        self.acquisitions += 1;
        self.acq_bounces += bounce as u64;
        self.holdtime_max = self.holdtime_max.max(h);
        self.holdtime_total += h;
    }
    /// Both lines as one (the class's totals).
    pub fn merged(&self, o: &LockTimes) -> LockTimes {
        let min = |a: Ns, na: u64, b: Ns, nb: u64| match (na, nb) {
            (0, _) => b,
            (_, 0) => a,
            _ => a.min(b),
        };
        LockTimes {
            con_bounces: self.con_bounces + o.con_bounces,
            contentions: self.contentions + o.contentions,
            waittime_min: min(self.waittime_min, self.contentions, o.waittime_min, o.contentions),
            waittime_max: self.waittime_max.max(o.waittime_max),
            waittime_total: self.waittime_total + o.waittime_total,
            acq_bounces: self.acq_bounces + o.acq_bounces,
            acquisitions: self.acquisitions + o.acquisitions,
            holdtime_min: min(self.holdtime_min, self.acquisitions, o.holdtime_min, o.acquisitions),
            holdtime_max: self.holdtime_max.max(o.holdtime_max),
            holdtime_total: self.holdtime_total + o.holdtime_total,
        }
    }
}

/// /proc/lock_stat counters of one class: exclusive and shared acquisitions apart, as lockdep
/// keeps them (its `-W` and `-R` lines).
#[derive(Clone, Copy, Debug)]
pub struct LockStat {
    /// Exclusive acquisitions: spinlocks, rwsem writers.
    pub write: LockTimes,
    /// Shared acquisitions: rwsem readers.
    pub read: LockTimes,
    /// Contentions by the waiter's site (`KFn as usize`): lock_stat's contention points.
    pub contention_points: [u64; NKFN],
    /// Contentions by the site of the hold waited for: lock_stat's contending points.
    pub contending_points: [u64; NKFN],
    /// Not in the kernel's file: bookings of this class that overlap a hold requested later
    /// but booked earlier by a CPU that ran ahead (two holders at once; docs/locking.md,
    /// "Calendar"). A measure of the model's departure from an exclusive FIFO lock; JSON only.
    pub mmsim_overlapping_holds: u64,
}

impl Default for LockStat {
    fn default() -> Self {
        LockStat { write: LockTimes::default(), read: LockTimes::default(), contention_points: [0; NKFN], contending_points: [0; NKFN], mmsim_overlapping_holds: 0 }
    }
}

impl LockStat {
    /// The class's totals over both lines.
    pub fn total(&self) -> LockTimes {
        self.write.merged(&self.read)
    }
    fn line(&mut self, shared: bool) -> &mut LockTimes {
        if shared { &mut self.read } else { &mut self.write }
    }
    /// A contended acquisition from `site` that waited `w` for a hold taken at `owner_site`.
    fn wait(&mut self, shared: bool, w: Ns, bounce: bool, site: u8, owner_site: u8) {
        self.contention_points[site as usize] += 1;
        self.contending_points[owner_site as usize] += 1;
        self.line(shared).wait(w, bounce);
    }
    fn hold(&mut self, shared: bool, h: Ns, bounce: bool) {
        self.line(shared).hold(h, bounce);
    }
}

/// An open (hold not yet known) acquisition, closed by [`Sim::lock_release`].
#[derive(Clone, Copy, Debug)]
pub struct Held {
    id: LockId,
    cpu: CpuId,
    start: Ns,
    shared: bool,
    bounce: bool,
    requested: Ns,
}

/// How a request is granted when CPUs that ran ahead in their atomic steps have already booked
/// holds requested after it (`kernel.lock_grant`; docs/reclaim.md, session 34). The kernel's
/// qspinlock and rwsem wait lists are FIFO; the model cannot move a hold once booked, so each
/// choice gets one thing wrong, and together they bracket an exclusive FIFO lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Grant {
    /// After every conflicting hold requested before it, as FIFO orders them; a hold requested
    /// later but booked earlier may overlap it (two holders; counted in `Locks::overlaps()`).
    #[default]
    Fifo,
    /// Also not while a later-requested hold is in progress at that instant (the lock is never
    /// entered while held); a booked hold that starts inside it still overlaps. Work-conserving.
    WaitHeld,
    /// At the first gap after its FIFO grant that the whole section fits, past every conflicting
    /// hold: exclusive, but a shorter gap stays idle, so it overstates waits. A hold whose
    /// length is unknown at its grant ([`Sim::lock_acquire`]) is granted as `WaitHeld`.
    GapFit,
}

impl Grant {
    pub fn parse(s: &str) -> Grant {
        match s {
            "wait-held" => Grant::WaitHeld,
            "gap-fit" => Grant::GapFit,
            _ => Grant::Fifo,
        }
    }
}

/// All lock state of the machine.
#[derive(Debug, Default)]
pub struct Locks {
    pub enabled: bool,
    /// Socket of each CPU, and the hand-off costs (ns): same socket, extra across sockets.
    sockets: Vec<u32>,
    handoff_ns: Ns,
    handoff_cross_ns: Ns,
    /// The event loop's floor: no lock request comes before it (see `prune`).
    pub floor: Ns,
    /// The floor at which the event loop calls [`Locks::sweep`] next.
    pub next_sweep: Ns,
    /// The calendars, apart from the rest so that one lookup serves a whole booking.
    cals: Cals,
    /// Per CPU: recent interrupts-off intervals (start, end), oldest first.
    irq_off: Vec<VecDeque<(Ns, Ns)>>,
    pub stats: [LockStat; 8],
    /// `kernel.lock_grant`.
    pub grant: Grant,
}

/// Every lock instance's calendar.
#[derive(Debug, Default)]
struct Cals {
    lru: Vec<Calendar>,
    zone: Vec<Calendar>,
    i_pages: Vec<Calendar>,
    i_mmap: Vec<Calendar>,
    anon_vma: Vec<Calendar>,
    mmap: Vec<Calendar>,
    luf: Calendar,
    /// Instances keyed by (mm, table): looked up, never iterated (so the hasher's order
    /// does not matter).
    ptl: HashMap<(u32, u64), Calendar, std::hash::BuildHasherDefault<KeyHasher>>,
    /// The PTE-table calendars looked up since they were last found empty by `Locks::sweep`
    /// (a key may appear twice after its table was freed and allocated again: harmless).
    ptl_live: Vec<(u32, u64)>,
    /// Storage of calendars emptied by `Locks::sweep`, handed to the next PTE-table calendar
    /// that comes back to life, so that the churn of PTE-table locks (a hint fault's table is
    /// often swept and booked again a millisecond later) allocates nothing (item 22).
    pool: Vec<Chunked<Busy>>,
}

/// At most this many emptied calendars' storage is kept for reuse (a few hundred bytes each).
const POOL_MAX: usize = 4096;

impl Cals {
    /// Lock `id`'s calendar, with any open hold booked ([`Calendar::settle`]).
    fn get(&mut self, id: LockId) -> &mut Calendar {
        let c = self.get_unsettled(id);
        c.settle();
        c
    }

    /// Lock `id`'s calendar as it is (for the release of its open hold).
    fn get_unsettled(&mut self, id: LockId) -> &mut Calendar {
        fn at(v: &mut Vec<Calendar>, i: u32) -> &mut Calendar {
            let i = i as usize;
            if v.len() <= i {
                v.resize_with(i + 1, Calendar::default);
            }
            &mut v[i]
        }
        match id {
            LockId::Lru(n) => at(&mut self.lru, n),
            LockId::Zone(n) => at(&mut self.zone, n),
            LockId::IPages(f) => at(&mut self.i_pages, f),
            LockId::IMmap(f) => at(&mut self.i_mmap, f),
            LockId::AnonVma(a) => at(&mut self.anon_vma, a),
            LockId::MmapLock(m) => at(&mut self.mmap, m),
            LockId::Ptl(m, t) => {
                let c = self.ptl.entry((m, t)).or_default();
                if !c.live {
                    // Not live: its holds are gone (new, or emptied by a sweep).
                    if let Some(q) = self.pool.pop() {
                        c.q = q;
                    }
                    c.live = true;
                    self.ptl_live.push((m, t));
                }
                c
            }
            LockId::Luf => &mut self.luf,
        }
    }
}

/// Hand-off time to `cpu` from the previous owner `prev`, given each CPU's socket and the
/// same-socket and extra cross-socket costs.
fn handoff_ns(sockets: &[u32], same: Ns, cross: Ns, cpu: CpuId, prev: Option<u32>) -> Ns {
    match prev {
        Some(p) if p != cpu.0 => {
            if sockets[p as usize] != sockets[cpu.0 as usize] {
                same + cross
            } else {
                same
            }
        }
        _ => 0,
    }
}

const IRQ_OFF_KEEP: usize = 16;

/// A multiplicative hasher for the PTE-lock map's (mm, table) keys (lookups only, never
/// iterated, so the order it gives does not matter).
#[derive(Default)]
pub struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Locks {
    pub fn new(sockets: Vec<u32>, enabled: bool, handoff_ns: f64, handoff_cross_ns: f64) -> Locks {
        // Holds keep CPU numbers in 16 bits (`machine.cpus` is at most 4096).
        assert!(sockets.len() < u16::MAX as usize, "{} CPUs: lock holds keep CPU numbers in 16 bits", sockets.len());
        Locks {
            enabled,
            irq_off: vec![VecDeque::new(); sockets.len()],
            sockets,
            handoff_ns: handoff_ns.round() as Ns,
            handoff_cross_ns: handoff_cross_ns.round() as Ns,
            ..Default::default()
        }
    }

    /// Forget every hold and statistic (the machine's build is not part of the run).
    pub fn reset(&mut self) {
        let fresh = Locks::new(std::mem::take(&mut self.sockets), self.enabled, 0.0, 0.0);
        *self = Locks { handoff_ns: self.handoff_ns, handoff_cross_ns: self.handoff_cross_ns, grant: self.grant, ..fresh };
    }

    fn cal(&mut self, id: LockId) -> &mut Calendar {
        self.cals.get(id)
    }

    /// Record that `cpu` had interrupts off over `[start, end)`.
    fn irq_off(&mut self, cpu: CpuId, start: Ns, end: Ns) {
        let q = &mut self.irq_off[cpu.0 as usize];
        if let Some(last) = q.back_mut() {
            if start <= last.1 && end >= last.0 {
                *last = (last.0.min(start), last.1.max(end));
                return;
            }
        }
        if q.len() == IRQ_OFF_KEEP {
            q.pop_front();
        }
        q.push_back((start, end));
    }

    /// When an interrupt arriving at `cpu` at `t` can be taken: the end of the irq-off section
    /// containing `t`, if any (sections may chain).
    pub fn irq_on_at(&self, cpu: CpuId, t: Ns) -> Ns {
        // Without a branch on the times (whether `at` falls in a section is data): a select.
        self.irq_off[cpu.0 as usize].iter().fold(t, |at, &(s, e)| if (s <= at) & (at < e) { e } else { at })
    }

    /// Bookings that overlap another CPU's hold, over every class (each class's
    /// `mmsim_overlapping_holds`).
    pub fn overlaps(&self) -> u64 {
        self.stats.iter().map(|s| s.mmsim_overlapping_holds).sum()
    }

    /// The last hold of `id`'s calendar in request order: (requested, start, end). For tests.
    #[cfg(test)]
    pub(crate) fn last_hold(&mut self, id: LockId) -> Option<(Ns, Ns, Ns)> {
        self.cals.get(id).q.back().map(|b| (b.req, b.start, b.end))
    }

    /// Drop a PTE table's lock (the table was freed).
    pub fn forget_ptl(&mut self, mm: MmId, table: u64) {
        self.cals.ptl.remove(&(mm.0, table));
    }

    /// Called by the event loop as its floor advances: prune every PTE-table calendar used
    /// since the last sweep, and give back the blocks of those left empty. A calendar is
    /// otherwise pruned only when its lock is taken again, and a PTE table that reclaim or a
    /// fault visited once and no one visits again kept its last holds and a block of room for
    /// the rest of the run: host memory that grew with simulated time (~6 GB for the
    /// single-socket batched-flush machine at full scale). The result is the same as pruning
    /// at the next booking, which prunes to a later floor anyway (pruning is monotone and
    /// keeps its prefix maxima), so outputs do not change; only memory does.
    pub fn sweep(&mut self) {
        let floor = self.floor;
        self.next_sweep = floor + SWEEP_NS;
        let Cals { ptl, ptl_live, pool, .. } = &mut self.cals;
        ptl_live.retain(|k| {
            let Some(c) = ptl.get_mut(k) else { return false };
            c.settle();
            c.prune(floor);
            if c.q.is_empty() {
                let mut q = std::mem::take(&mut c.q);
                if pool.len() < POOL_MAX {
                    q.clear();
                    pool.push(q);
                }
                c.live = false;
                false
            } else {
                true
            }
        });
    }
}

/// How far the event loop's floor advances between two `Locks::sweep`s (simulated time).
const SWEEP_NS: Ns = 1_000_000;

impl Locks {
    /// Hand-off time to `cpu` from the previous owner `prev`.
    fn handoff(&self, cpu: CpuId, prev: Option<u32>) -> Ns {
        handoff_ns(&self.sockets, self.handoff_ns, self.handoff_cross_ns, cpu, prev)
    }

    /// Book a section of `work` ns requested at `t` from kernel function `site`: returns
    /// (granted start, hand-off, the acquire site of the hold waited for, 0 if none).
    #[allow(clippy::too_many_arguments)]
    fn book(&mut self, id: LockId, cpu: CpuId, t: Ns, shared: bool, work: Ns, site: u8) -> (Ns, Ns, u8) {
        let floor = self.floor;
        // One lookup of the calendar (a hash probe for a PTE-table lock) for the whole booking.
        let cal = self.cals.get(id);
        cal.prune(floor);
        let k = cal.pos(t);
        // The gap-fit window allows the largest hand-off, so the section fits whoever it follows.
        let (s, prev, owner_site) = cal.grant(k, t, shared, self.grant, Some(work + self.handoff_ns + self.handoff_cross_ns));
        let h = handoff_ns(&self.sockets, self.handoff_ns, self.handoff_cross_ns, cpu, prev);
        let k = cal.insert_at(k, t, s, s + h + work, cpu.0, shared, site);
        let overlap = cal.overlaps_from(cal.q.next(k), s, s + h + work, shared);
        self.stats[id.class() as usize].mmsim_overlapping_holds += overlap as u64;
        (s, h, owner_site)
    }
}

impl Sim {
    /// Take lock `id` on `cpu` for a section whose work costs `work_ns`, then release it. The
    /// wait (spin or sleep) and the hand-off are charged here; the work is charged by the
    /// caller (before or after this call, as the code reads) — this only books the interval.
    /// Returns the wait in ns.
    #[inline(always)]
    pub fn lock_section(&mut self, cpu: CpuId, id: LockId, mode: Mode, work_ns: f64) -> Ns {
        if !self.locks.enabled {
            return 0;
        }
        let work = crate::sim::round_ns(work_ns);
        let t = self.now(cpu);
        let site = self.prof.top(cpu);
        let (s, handoff) = self.book_section(cpu, id, t, mode == Mode::Shared, work, site);
        self.lock_wait(cpu, id.class(), s - t, handoff);
        s - t
    }

    /// Book a section of `work` ns requested at `t` on lock `id`'s calendar, with its lock_stat
    /// figures and (irq-disabling locks) its interrupts-off interval. Returns (grant, hand-off).
    #[inline(always)]
    fn book_section(&mut self, cpu: CpuId, id: LockId, t: Ns, shared: bool, work: Ns, site: KFn) -> (Ns, Ns) {
        let site = site as u8;
        let (s, handoff, owner_site) = if id.unbooked_read(shared) { (t, 0, 0) } else { self.locks.book(id, cpu, t, shared, work, site) };
        let bounce = handoff > 0;
        let class = id.class();
        let st = &mut self.locks.stats[class as usize];
        if s > t {
            st.wait(shared, s - t, bounce, site, owner_site);
        }
        st.hold(shared, handoff + work, bounce);
        if class.irqs_off() {
            self.locks.irq_off(cpu, t, s + handoff + work);
        }
        (s, handoff)
    }

    /// [`Sim::lock_section`] of a spinlock for a section `cpu` runs from time `t` in interrupt or
    /// kworker context, off its task's clock, in kernel function `site`: nothing is charged
    /// here (the caller steals the section's time from the CPU). Returns when the section ends
    /// (wait, hand-off and work).
    pub fn lock_section_at(&mut self, cpu: CpuId, id: LockId, t: Ns, work_ns: f64, site: KFn) -> Ns {
        let work = crate::sim::round_ns(work_ns);
        if !self.locks.enabled {
            return t + work;
        }
        let (s, handoff) = self.book_section(cpu, id, t, false, work, site);
        s + handoff + work
    }

    /// Charge a wait and a hand-off on `cpu`: a spinlock waiter spins (system time in
    /// native_queued_spin_lock_slowpath), an rwsem waiter sleeps (the CPU idles).
    fn lock_wait(&mut self, cpu: CpuId, class: LockClass, wait: Ns, handoff: Ns) {
        if class.is_spin() {
            if wait + handoff > 0 {
                self.kfn_enter(cpu, KFn::NativeQueuedSpinLockSlowpath);
                self.charge_sys_ns(cpu, wait + handoff);
                self.kfn_exit(cpu);
            }
        } else {
            if wait > 0 {
                // schedule() out and back: the CPU idles in between.
                self.cpus[cpu.0 as usize].clock += wait;
            }
            if handoff > 0 {
                self.kfn_enter(cpu, KFn::RwsemSlowpath);
                self.charge_sys_ns(cpu, handoff);
                self.kfn_exit(cpu);
            }
        }
    }

    /// Take lock `id` for a section whose length is known only at its end (it waits for IPIs,
    /// or it is a whole fault under mmap_lock): granted at the first free instant at or after
    /// the CPU's clock. Close it with [`Sim::lock_release`].
    pub fn lock_acquire(&mut self, cpu: CpuId, id: LockId, mode: Mode) -> Option<Held> {
        if !self.locks.enabled {
            return None;
        }
        let t = self.now(cpu);
        let shared = mode == Mode::Shared;
        let class = id.class();
        if id.unbooked_read(shared) {
            // No writer to wait for and no hand-off (LockClass::readers_only): nothing booked.
            return Some(Held { id, cpu, start: t, shared, bounce: false, requested: t });
        }
        let site = self.prof.top(cpu) as u8;
        let (floor, grant) = (self.locks.floor, self.locks.grant);
        let cal = self.locks.cal(id);
        cal.prune(floor);
        let k = cal.pos(t);
        // The section's length is unknown here: gap-fit grants it as wait-held does.
        let (s, prev, owner_site) = cal.grant(k, t, shared, grant, None);
        // Booked with its end unknown (= start) and closed at release, so that requests made
        // meanwhile queue behind it; that booking waits until another operation on the
        // calendar needs it (most holds are released first and booked once, whole).
        cal.open = Some(Open { req: t, start: s, cpu: cpu.0, shared, site, at: k });
        let handoff = self.locks.handoff(cpu, prev);
        if s > t {
            self.locks.stats[class as usize].wait(shared, s - t, handoff > 0, site, owner_site);
        }
        self.lock_wait(cpu, class, s - t, handoff);
        Some(Held { id, cpu, start: s, shared, bounce: handoff > 0, requested: t })
    }

    /// `mmap_read_lock()` / `mmap_write_lock()` on `mm`. An mm with a single user is only ever
    /// locked by its own task, one step at a time, so nothing can contend and nothing is booked.
    pub fn mmap_lock(&mut self, cpu: CpuId, mm: MmId, mode: Mode) -> Option<Held> {
        if self.mm(mm).users <= 1 {
            return None;
        }
        self.lock_acquire(cpu, LockId::MmapLock(mm.0), mode)
    }

    /// An mm syscall's body (do_syscall_64 in the profile) under `mm`'s mmap_lock.
    pub fn mm_syscall<R>(&mut self, cpu: CpuId, mm: MmId, mode: Mode, body: impl FnOnce(&mut Sim) -> R) -> R {
        self.kfn_enter(cpu, crate::kernel::profile::KFn::DoSyscall64);
        let lock = self.mmap_lock(cpu, mm, mode);
        let r = body(self);
        self.lock_release(lock);
        self.kfn_exit(cpu);
        r
    }

    /// Release an open section: book `[start, now)` in the lock's calendar.
    pub fn lock_release(&mut self, h: Option<Held>) {
        let Some(h) = h else { return };
        let end = self.now(h.cpu).max(h.start);
        let class = h.id.class();
        if h.id.unbooked_read(h.shared) {
            // Not booked (LockClass::readers_only); a read hold overlaps no other.
            self.locks.stats[class as usize].hold(h.shared, end - h.start, h.bounce);
            return;
        }
        let cal = self.locks.cals.get_unsettled(h.id);
        let hi = match cal.open {
            Some(o) if o.req == h.requested && o.cpu == h.cpu.0 => {
                // Nothing touched the calendar since the acquire: book the whole hold where it
                // was granted, as booking it open and closing it would leave it.
                cal.open = None;
                let k = cal.insert_at(o.at, o.req, o.start, end, o.cpu, o.shared, o.site);
                cal.q.next(k)
            }
            _ => {
                cal.settle();
                cal.close(h.requested, h.cpu.0, end)
            }
        };
        let overlap = cal.overlaps_from(hi, h.start, end, h.shared);
        self.locks.stats[class as usize].mmsim_overlapping_holds += overlap as u64;
        self.locks.stats[class as usize].hold(h.shared, end - h.start, h.bounce);
        if class.irqs_off() {
            self.locks.irq_off(h.cpu, h.requested, end);
        }
    }

    /// Record an interrupts-off section on `cpu` from `start` to its clock (local_irq_disable()
    /// around work that takes no modelled lock).
    pub fn irqs_off_since(&mut self, cpu: CpuId, start: Ns) {
        if self.locks.enabled {
            let end = self.now(cpu);
            self.locks.irq_off(cpu, start, end);
        }
    }

    /// One dependent cache miss from `cpu` to memory on `node`: the cost model of list and tree
    /// work under a lock (struct page is one 64-byte line; list_del()/list_add() load the
    /// neighbour's line before writing it).
    pub fn miss_ns(&self, cpu: CpuId, node: NodeId) -> f64 {
        self.node_latency[self.cpu_node(cpu).0 as usize][node.0 as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(c: &mut Calendar, t: Ns, len: Ns, cpu: u32, shared: bool) -> Ns {
        let (s, _) = c.find(t, shared);
        c.insert(t, s, s + len, cpu, shared);
        s
    }

    /// One CPU runs a long step and books thousands of holds far ahead of the others; a request
    /// from a CPU whose clock is still at the floor is granted at once, however long the
    /// calendar grows (a length cap used to drop the oldest holds, future ones included, and
    /// the lagging request then waited for their ends).
    #[test]
    fn a_long_calendar_of_future_holds_does_not_delay_a_lagging_request() {
        let mut c = Calendar::default();
        let floor = 1_000;
        for i in 0..20_000u64 {
            let t = 10_000_000 + i * 3_000;
            c.prune(floor);
            book(&mut c, t, 2_000, 1, false);
        }
        c.prune(floor);
        assert_eq!(c.q.len(), 20_000, "nothing requested after the floor is pruned");
        assert_eq!(book(&mut c, floor, 500, 2, false), floor, "no hold was requested before it");
        // Once the floor passes them, they go.
        c.prune(10_000_000 + 20_000 * 3_000 + KEEP_NS + 1);
        assert_eq!(c.q.len(), 0);
    }

    /// A contended request's contending point is the site of the hold it queued behind.
    #[test]
    fn owner_site_is_the_site_of_the_hold_waited_for() {
        let mut c = Calendar::default();
        c.insert_at(c.pos(0), 0, 0, 100, 1, false, KFn::RmqueueBulk as u8);
        c.insert_at(c.pos(10), 10, 100, 250, 2, false, KFn::FreePcppagesBulk as u8);
        let k = c.pos(20);
        let (s, owner) = c.find_at(k, 20, false);
        assert_eq!((s, owner), (250, Some(2)));
        assert_eq!(c.owner_site(k, s, owner, false), KFn::FreePcppagesBulk as u8);
        // Between the two holds' requests: behind the first one only.
        let k = c.pos(5);
        let (s, owner) = c.find_at(k, 5, false);
        assert_eq!(c.owner_site(k, s, owner, false), KFn::RmqueueBulk as u8);
        // A hold no longer kept: unknown (Other), not a wrong site.
        assert_eq!(c.owner_site(k, 999, owner, false), KFn::Other as u8);
    }

    #[test]
    fn fifo_by_request_time() {
        let mut c = Calendar::default();
        assert_eq!(book(&mut c, 100, 50, 0, false), 100); // [100,150)
        assert_eq!(book(&mut c, 120, 100, 1, false), 150, "queued behind the holder"); // [150,250)
        // A request that ran later in host order but was made earlier in simulated time
        // (its CPU's clock lagged) queues behind holds requested before it only.
        assert_eq!(book(&mut c, 110, 10, 2, false), 150);
        // Ties: a request at the same instant as an earlier-booked one goes after it.
        assert_eq!(book(&mut c, 120, 10, 3, false), 250);
        // A request after everything is granted at once.
        assert_eq!(book(&mut c, 1000, 10, 4, false), 1000);
    }

    #[test]
    fn readers_share_writers_exclude() {
        let mut c = Calendar::default();
        assert_eq!(book(&mut c, 0, 100, 0, true), 0);
        assert_eq!(book(&mut c, 10, 100, 1, true), 10, "a second reader shares");
        assert_eq!(book(&mut c, 20, 10, 2, false), 110, "a writer waits for both readers");
        assert_eq!(book(&mut c, 25, 10, 3, true), 120, "a reader queued after the writer waits for it");
    }

    /// `kernel.lock_grant`: a lagging request (t = 10) meets a hold requested later (at 20,
    /// booked first by a CPU that ran ahead, held [20, 120)). FIFO grants it at once and the two
    /// overlap; wait-held grants it at once too (the hold is not in progress at 10), but a
    /// request that FIFO would grant inside the hold waits for its end; gap-fit places the
    /// section in the first gap it fits, before the hold if it fits there, else after it.
    #[test]
    fn lock_grant_modes_place_a_lagging_request() {
        let id = LockId::Lru(0);
        // A calendar holding [20, 120), requested at 20 by CPU 0; then CPU 1 asks at `t`.
        let grant_at = |grant, t, work| {
            let mut l = Locks::new(vec![0, 0], true, 0.0, 0.0);
            l.book(id, CpuId(0), 20, false, 100, 0);
            l.grant = grant;
            l.book(id, CpuId(1), t, false, work, 0).0
        };
        assert_eq!(grant_at(Grant::Fifo, 10, 50), 10);
        assert_eq!(grant_at(Grant::WaitHeld, 10, 50), 10);
        assert_eq!(grant_at(Grant::Fifo, 30, 50), 120, "requested after the hold: FIFO waits for it");
        assert_eq!(grant_at(Grant::GapFit, 10, 5), 10, "5 ns fit before the hold");
        assert_eq!(grant_at(Grant::GapFit, 10, 50), 120, "50 ns do not");
        // Requested at 10 with the hold [20, 120) booked: wait-held starts at once, and a second
        // lagging request at 25 (after the first, 10..60, but inside the hold) waits for it.
        let mut l = Locks::new(vec![0, 0], true, 0.0, 0.0);
        l.book(id, CpuId(0), 20, false, 100, 0);
        l.grant = Grant::WaitHeld;
        assert_eq!(l.book(id, CpuId(1), 10, false, 50, 0).0, 10);
        assert_eq!(l.book(id, CpuId(1), 15, false, 5, 0).0, 120, "[20, 120) is in progress at 60, where FIFO grants it");
        let mut f = Locks::new(vec![0, 0], true, 0.0, 0.0);
        f.book(id, CpuId(0), 20, false, 100, 0);
        f.book(id, CpuId(1), 10, false, 50, 0);
        assert_eq!(f.book(id, CpuId(1), 15, false, 5, 0).0, 60, "FIFO: after the hold requested at 10 only");
    }

    /// Random lagging requests: with gap-fit no two exclusive holds overlap; with wait-held no
    /// hold starts inside one booked before it; with FIFO they do.
    #[test]
    fn gap_fit_is_exclusive_and_wait_held_never_enters_a_held_lock() {
        let id = LockId::Zone(0);
        let (mut fifo_overlaps, mut fifo_inside) = (0, 0);
        for grant in [Grant::Fifo, Grant::WaitHeld, Grant::GapFit] {
            let mut rng = crate::engine::prng::Prng::new(11);
            for _ in 0..50 {
                let mut l = Locks::new(vec![0, 0, 1, 1], true, 40.0, 100.0);
                l.grant = grant;
                let mut holds: Vec<(Ns, Ns)> = Vec::new();
                let mut clock = 1_000u64;
                for _ in 0..200 {
                    clock += rng.below(60);
                    let t = clock.saturating_sub(rng.below(300));
                    let work = rng.below(80);
                    let cpu = CpuId(rng.below(4) as u32);
                    let (s, h, _) = l.book(id, cpu, t, false, work, 0);
                    let (s, e) = (s, s + h + work);
                    let inside = holds.iter().any(|&(a, b)| a < s && s < b);
                    let overlaps = holds.iter().any(|&(a, b)| a < e && s < b && e > s);
                    match grant {
                        Grant::Fifo => {
                            fifo_overlaps += overlaps as u32;
                            fifo_inside += inside as u32;
                        }
                        Grant::WaitHeld => assert!(!inside, "wait-held entered a held lock at {s}"),
                        Grant::GapFit => assert!(!overlaps, "gap-fit overlapped at [{s}, {e})"),
                    }
                    holds.push((s, e));
                }
            }
        }
        assert!(fifo_overlaps > 0 && fifo_inside > 0, "the sequences must make FIFO overlap and enter held locks, or they test nothing");
    }

    /// The calendar grants what the plain definition says, over random request sequences that
    /// arrive out of time order: the latest end of any conflicting hold requested at or before
    /// the request, or the request time.
    #[test]
    fn calendar_matches_brute_force_fifo() {
        let mut rng = crate::engine::prng::Prng::new(7);
        for round in 0..200 {
            let mut c = Calendar::default();
            let mut all: Vec<(Ns, Ns, bool)> = Vec::new(); // (req, end, shared)
            let mut clock = 0u64;
            for _ in 0..300 {
                clock += rng.below(50);
                let t = clock.saturating_sub(rng.below(200));
                let len = rng.below(40);
                let shared = round % 2 == 1 && rng.below(3) == 0;
                let want = all.iter().filter(|&&(r, _, sh)| r <= t && !(shared && sh)).map(|&(_, e, _)| e).max().unwrap_or(0).max(t);
                let got = book(&mut c, t, len, rng.below(4) as u32, shared);
                assert_eq!(got, want, "round {round}: request t={t} len={len} shared={shared}");
                all.push((t, got + len, shared));
            }
        }
    }

    #[test]
    fn an_open_hold_delays_requests_made_while_it_is_open() {
        let mut c = Calendar::default();
        let (s, _) = c.find(100, false);
        c.insert(100, s, s, 0, false);
        c.close(100, 0, 400);
        assert_eq!(book(&mut c, 200, 10, 1, false), 400);
    }

    /// `Locks::sweep` changes no grant and no hand-off, and leaves no block behind in the PTE
    /// tables no one visits again: the same random bookings over many PTE-table locks, with
    /// the floor rising, on two machines, one of which sweeps before every booking.
    #[test]
    fn sweeping_changes_no_grant_and_frees_idle_calendars() {
        let mut rng = crate::engine::prng::Prng::new(11);
        let (mut a, mut b) = (Locks::new(vec![0, 0, 1, 1], true, 40.0, 100.0), Locks::new(vec![0, 0, 1, 1], true, 40.0, 100.0));
        let mut clock = 0u64;
        for i in 0..20_000u64 {
            clock += rng.below(300);
            let t = clock.saturating_sub(rng.below(2_000));
            // Tables in a window that moves on: each is used for a while, then never again.
            let table = i / 50 + rng.below(8);
            let (cpu, len, shared) = (CpuId(rng.below(4) as u32), rng.below(500), false);
            for l in [&mut a, &mut b] {
                l.floor = l.floor.max(clock.saturating_sub(3_000));
            }
            b.sweep();
            let id = LockId::Ptl(0, table);
            assert_eq!(a.book(id, cpu, t, shared, len, 0), b.book(id, cpu, t, shared, len, 0), "booking {i}");
        }
        for l in [&mut a, &mut b] {
            l.floor = clock + 1_000_000;
        }
        b.sweep();
        assert!(b.cals.ptl_live.is_empty());
        assert!(b.cals.ptl.values().all(|c| c.q.is_empty() && !c.live));
        assert!(a.cals.ptl.values().filter(|c| !c.q.is_empty()).count() > 100, "without sweeps, idle calendars keep holds");
    }

    #[test]
    fn irq_off_sections_delay_an_interrupt_to_their_end() {
        let mut l = Locks::new(vec![0, 0], true, 40.0, 100.0);
        l.irq_off(CpuId(1), 100, 200);
        l.irq_off(CpuId(1), 200, 260); // chained
        assert_eq!(l.irq_on_at(CpuId(1), 150), 260);
        assert_eq!(l.irq_on_at(CpuId(1), 300), 300);
        assert_eq!(l.irq_on_at(CpuId(0), 150), 150);
    }

    /// The holds of a calendar, in order, and what was pruned from it.
    fn holds(c: &Calendar) -> String {
        let q: Vec<String> = c.q.iter_from(c.q.cursor_at(0)).map(|b| format!("{b:?}")).collect();
        format!("{:?} {q:?}", c.pruned)
    }

    /// Random acquires, releases and whole sections on two instances of a lock (`id`), from
    /// CPUs with lagging and leading clocks, several holds open at a time, against the booking
    /// `lock_acquire` did before item 25 (booked open at once, closed by `lock_release`) on
    /// full calendars: every grant, hand-off and the overlap count must be the same; with
    /// `compare_holds`, the calendars too. `shared` maps a drawn flag to the request's mode.
    fn against_eager_booking(ops: Vec<(u32, u8, u32, bool, u64)>, id: fn(u32) -> LockId, shared: fn(bool) -> bool, compare_holds: bool) -> Result<(), proptest::test_runner::TestCaseError> {
        let text = "[machine]\ncpus = 4\nsockets = 2\nnodes = 2\nmem_per_node_mib = 64\n[[workload.thread]]\ncpu = 0\nops = \"sleep 1us\"\n";
        let cfg = crate::config::load_str("locks.toml", text, &[]).unwrap();
        let mut sim = Sim::build(&cfg).unwrap();
        proptest::prop_assert!(sim.locks.enabled);
        let mut eager = Locks::new(sim.locks.sockets.clone(), true, sim.locks.handoff_ns as f64, sim.locks.handoff_cross_ns as f64);
        let mut held: Vec<Option<(Held, Ns)>> = vec![None; 4];
        for (cpu, op, lock, sh, dt) in ops {
            let c = CpuId(cpu);
            sim.cpus[cpu as usize].clock += dt;
            let floor = sim.cpus.iter().map(|x| x.clock).min().unwrap().saturating_sub(300);
            sim.locks.floor = floor;
            eager.floor = floor;
            let id = id(lock);
            let shared = shared(sh);
            let mode = if shared { Mode::Shared } else { Mode::Exclusive };
            let t = sim.now(c);
            match (op, held[cpu as usize].take()) {
                (0, None) => {
                    let h = sim.lock_acquire(c, id, mode).unwrap();
                    // The booking before item 25.
                    let cal = eager.cals.get(id);
                    cal.prune(floor);
                    let k = cal.pos(t);
                    let (s, prev) = cal.find_at(k, t, shared);
                    cal.insert_at(k, t, s, s, cpu, shared, 0);
                    proptest::prop_assert_eq!(h.start, s);
                    proptest::prop_assert_eq!(h.bounce, eager.handoff(c, prev) > 0);
                    held[cpu as usize] = Some((h, s));
                }
                (0 | 1, Some((h, s))) => {
                    let end = sim.now(c).max(s);
                    let cal = eager.cals.get(h.id);
                    let hi = cal.close(h.requested, cpu, end);
                    eager.stats[h.id.class() as usize].mmsim_overlapping_holds += cal.overlaps_from(hi, s, end, h.shared) as u64;
                    sim.lock_release(Some(h));
                }
                (_, open) => {
                    held[cpu as usize] = open;
                    let wait = sim.lock_section(c, id, mode, dt as f64);
                    let (s, _, _) = eager.book(id, c, t, shared, dt, 0);
                    proptest::prop_assert_eq!(t + wait, s);
                }
            }
            proptest::prop_assert_eq!(sim.locks.overlaps(), eager.overlaps());
        }
        if compare_holds {
            for lock in 0..2 {
                let (a, b) = (holds(sim.locks.cals.get(id(lock))), holds(eager.cals.get(id(lock))));
                proptest::prop_assert_eq!(a, b);
            }
        }
        Ok(())
    }

    proptest::proptest! {
        /// Open holds booked lazily (item 25) on an rwsem taken both ways (mmap_lock).
        #[test]
        fn open_holds_booked_at_release_match_booking_at_acquire(ops in proptest::collection::vec((0u32..4, 0u8..3, 0u32..2, proptest::bool::ANY, 0u64..400), 1..120)) {
            against_eager_booking(ops, LockId::MmapLock, |sh| sh, true)?;
        }

        /// Read locks of a readers-only class (i_mmap_rwsem, item 29) are not booked: every
        /// grant and hand-off is what the full calendar gives, and nothing is kept.
        #[test]
        fn unbooked_read_locks_get_what_a_full_calendar_grants(ops in proptest::collection::vec((0u32..4, 0u8..3, 0u32..2, proptest::bool::ANY, 0u64..400), 1..120)) {
            against_eager_booking(ops, LockId::IMmap, |_| true, false)?;
        }
    }

    #[test]
    fn readers_only_classes_keep_no_calendar() {
        let text = "[machine]\ncpus = 2\nmem_per_node_mib = 64\n[[workload.thread]]\ncpu = 0\nops = \"sleep 1us\"\n";
        let mut sim = Sim::build(&crate::config::load_str("locks.toml", text, &[]).unwrap()).unwrap();
        for (c, dt) in [(0, 100), (1, 50), (0, 70)] {
            sim.cpus[c].clock += dt;
            let h = sim.lock_acquire(CpuId(c as u32), LockId::IMmap(3), Mode::Shared);
            sim.cpus[c].clock += 30;
            sim.lock_release(h);
        }
        assert_eq!(sim.locks.stats[LockClass::IMmapRwsem as usize].read.acquisitions, 3);
        assert_eq!(sim.locks.stats[LockClass::IMmapRwsem as usize].read.holdtime_total, 90);
        assert_eq!(sim.locks.stats[LockClass::IMmapRwsem as usize].write.acquisitions, 0, "read-locked: the -R line only");
        assert!(sim.locks.cals.i_mmap.is_empty(), "read holds of i_mmap_rwsem are not booked");
    }
}
