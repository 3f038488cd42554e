//! Reclaim (mm/vmscan.c, Linux 6.18): LRU lists, `shrink_node` → `shrink_lruvec` →
//! `shrink_active_list` / `shrink_inactive_list` → `shrink_folio_list`, kswapd
//! (`balance_pgdat` to the high watermark) and direct reclaim (`try_to_free_pages`), plus
//! `reclaim_pages()` for MADV_PAGEOUT.
//!
//! `shrink_folio_list()` follows the kernel: `folio_check_references()` via `folio_referenced()`
//! (x86 clears the accessed bit without a flush), unmap with TTU_BATCH_FLUSH when the batched
//! unmap flush (seed 002, Linux 4.3+) is on, `try_to_unmap_flush_dirty()` before `pageout()`,
//! and `try_to_unmap_flush()` before each batch of PAGEVEC_SIZE freed folios (recent kernels,
//! which free folios in batches) and at the end (all versions since 4.3).
//! With the batched flush off, try_to_unmap() clears and flushes each PTE (`ptep_clear_flush`).
//!
//! Dirty file folios are written by kswapd (under the version's conditions) or left to the
//! flusher (mm/page_writeback.rs).
//!
//! Departures: anonymous folios go to swap only with `machine.swap_mib` set (mm/swapfile.rs;
//! swap-out is written synchronously, charged as system time), no MGLRU, no memcg, refault
//! detection for file folios only (mm/workingset.rs), one zone per node; scan balance is fixed:
//! each list is scanned in proportion to its size (size >> priority, with no floor, as
//! get_scan_count() does for the root memcg), without swappiness's anon/file cost balance or
//! cache_trim_mode; the inactive lists refilled from the active ones when `inactive_is_low()`
//! (per version), not also on observed refaults (5.9+ `may_deactivate`).

use crate::check::Inject;
use crate::kernel::locking::{LockId, Mode};
use crate::kernel::profile::KFn;
use crate::mm::rmap::TlbUnmapBatch;
use crate::mm::vmstat::VmEvent;
use crate::mm::page_alloc::{int_sqrt, NIL};
use crate::sim::{pg, vm, Sim, TaskState};
use crate::types::*;

/// PAGEVEC_SIZE: shrink_folio_list() frees folios in batches of this many, flushing the pending
/// unmap batch before each (the folio_batch `free_folios`).
pub const PAGEVEC_SIZE: usize = 31;
/// SWAP_CLUSTER_MAX: folios isolated per shrink_inactive_list() call.
pub const SWAP_CLUSTER_MAX: usize = 32;

/// HZ/10, the timeout of `congestion_wait()` and of `reclaim_throttle()`'s writeback stall.
pub const HZ_10_NS: Ns = 1_000_000_000 / 10;
/// DEF_PRIORITY: reclaim starts by scanning 1/4096 of a list, doubling per priority step.
pub const DEF_PRIORITY: u32 = 12;
/// MAX_RECLAIM_RETRIES (mm/internal.h): kswapd runs that reclaim nothing before a node is
/// left to direct reclaim.
pub const MAX_RECLAIM_RETRIES: u32 = 16;

/// kswapd's pass over a node at one priority (`balance_pgdat()` → `kswapd_shrink_node()`),
/// kept between kswapd's steps.
#[derive(Clone, Debug)]
pub struct KswapdPass {
    /// Index into the node's scan lists (file, then anon when it can be reclaimed).
    pub list: usize,
    /// What is left of the current list's target; None before the list is entered.
    pub to_scan: Option<usize>,
    pub scanned: u64,
    pub reclaimed: u64,
    /// `sc->nr_to_reclaim`: max(high watermark, SWAP_CLUSTER_MAX).
    pub target: u64,
    /// `sc->nr.file_taken` and `sc->nr.unqueued_dirty` over the pass (mm/page_writeback.rs).
    pub file_taken: u64,
    pub unqueued_dirty: u64,
    /// `sc->nr.taken`, `sc->nr.writeback` and `sc->nr.immediate` over the pass.
    pub taken: u64,
    pub writeback: u64,
    pub immediate: u64,
}

/// A direct reclaim (`do_try_to_free_pages()`) in progress: the priority, the node of the
/// zonelist being shrunk and that `shrink_node()`'s place. The synchronous caller runs it to
/// the end at once; a fault whose access can be replayed runs it one `shrink_inactive_list()`
/// batch per step ([`Sim::direct_reclaim_step`]), so that reclaimers that reach the min
/// watermark together interleave their batches, as Linux's do, instead of the first one
/// rotating a whole list of young folios alone in one step.
#[derive(Clone, Debug)]
pub struct DirectReclaim {
    /// The allocating node: the zonelist starts there.
    nid: NodeId,
    priority: u32,
    /// Offset of the node being shrunk in the zonelist.
    i: usize,
    /// The current `shrink_node()`, None before it starts.
    node: Option<DirectNode>,
    /// Reclaimed over the whole call (`sc->nr_reclaimed`).
    pub reclaimed: u64,
    /// PGSCAN_DIRECT when the call started (4.2's flusher wakeup).
    scanned_before: u64,
    /// `throttle_direct_reclaim()`, which the stepped call runs before its first batch.
    throttle: Throttle,
}

/// Where a stepped direct reclaim is in `throttle_direct_reclaim()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Throttle {
    /// Not checked yet: the call's first step checks.
    Check,
    /// Asleep on the node's `pfmemalloc_wait`; woken, it checks again (wait_event_killable()).
    Waiting,
    /// Passed: reclaim goes on.
    Done,
}

/// One `shrink_node()` of a direct reclaim: the list pair being scanned, what is left of its
/// target, and what this `shrink_node()` reclaimed (its loop stops at `nr_to_reclaim`).
#[derive(Clone, Copy, Debug)]
struct DirectNode {
    list: usize,
    to_scan: Option<usize>,
    reclaimed: u64,
}

/// What kswapd does after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KswapdNext {
    Run,
    /// Asleep until woken (`kswapd_try_to_sleep()`).
    Sleep,
    /// Stalled on writeback until then, or until completions wake it (mm/page_writeback.rs).
    Throttled(Ns),
}

/// What a `shrink_folio_list()` call found: the fields of the kernel's `struct reclaim_stat`
/// (and its return value) that the model uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReclaimStat {
    /// Folios reclaimed (demoted ones included), the function's return value.
    pub nr_reclaimed: u64,
    /// `stat->nr_unqueued_dirty`: dirty file folios not under writeback.
    pub nr_unqueued_dirty: u64,
    /// `stat->nr_writeback`: folios under writeback, now marked PG_reclaim.
    pub nr_writeback: u64,
    /// `stat->nr_immediate`: folios under writeback kswapd met marked PG_reclaim already, on a
    /// node flagged PGDAT_WRITEBACK.
    pub nr_immediate: u64,
}

impl ReclaimStat {
    /// The counts of two parts of one `shrink_folio_list()` call, together.
    fn plus(self, o: ReclaimStat) -> ReclaimStat {
        ReclaimStat { nr_reclaimed: self.nr_reclaimed + o.nr_reclaimed, nr_unqueued_dirty: self.nr_unqueued_dirty + o.nr_unqueued_dirty, nr_writeback: self.nr_writeback + o.nr_writeback, nr_immediate: self.nr_immediate + o.nr_immediate }
    }
}

/// The end of a `shrink_folio_list()` call: the task's unmap batch (`current->tlb_ubc`) with
/// the flushes deferred by its unmaps, and the folios to free once that batch is flushed.
///
/// Steps are atomic, so a reclaim that unmapped, flushed and freed in one step would leave no
/// window in which another CPU could change the page tables of an mm whose PTEs it cleared —
/// the race `flush_tlb_batched_pending()` exists for (mechanisms.md §1 (d)). In Linux the unmaps
/// of one SWAP_CLUSTER_MAX batch take microseconds while other CPUs run. kswapd and
/// MADV_PAGEOUT (`reclaim_pages()`) therefore end their step after the unmaps and run the flush
/// and the frees at the start of the task's next step (`Task::reclaim_tail`); other CPUs whose
/// clocks are earlier run in between. So does a fault's direct reclaim run in steps
/// (`DirectReclaim`); the synchronous one (`do_try_to_free_pages()`) ends it in the same step.
/// A stepped batch may also stop between two folios ([`PausedBatch`]).
#[derive(Clone, Debug)]
pub struct ReclaimTail {
    pub batch: TlbUnmapBatch,
    pub free_folios: Vec<Pfn>,
    /// LUF (mm/luf.rs): folios whose flush was deferred, freed with the batch, tagged.
    pub luf_folios: Vec<Pfn>,
    /// Folios not reclaimed (`ret_folios`) whose PTEs the call cleared, each with a reference
    /// and whether it goes back active: they stay isolated until the end's flush, as the
    /// kernel's caller puts them back only after shrink_folio_list() returned. Put back earlier,
    /// another CPU could isolate, migrate and free one while a CPU still caches a PTE this batch
    /// cleared (swarm seed 689). See `keep_or_putback()`.
    pub keep: Vec<(Pfn, bool)>,
    /// The `move_folios_to_lru()` of each `shrink_inactive_list()` batch whose
    /// `shrink_folio_list()` this tail ends: the batch's folios stay counted in NR_ISOLATED and
    /// the putback takes the LRU lock only after the flush and the frees, as the kernel's
    /// `shrink_inactive_list()` does once `shrink_folio_list()` has returned. Left to the next
    /// step, the putback is booked on the lock at a step's start, when no CPU's clock is behind
    /// it (docs/locking.md, "Calendar").
    pub putback: Vec<Putback>,
    /// The kernel functions the reclaim ran under (outermost first; `frames.1` of them), so
    /// that its end, left to the task's next step, is charged to the same stack in the profile
    /// (kswapd, or a fault's try_to_free_pages()), as it is in the kernel.
    pub frames: ([KFn; 4], usize),
    /// A `shrink_inactive_list()` batch whose `shrink_folio_list()` stopped between two folios
    /// because its CPU had run past the other CPUs ([`PausedBatch`]): the task's next step goes
    /// on with it, and this tail is not ended before it is.
    pub paused: Option<Box<PausedBatch>>,
    /// A tail left to a task's next step (kswapd's, a fault's direct reclaim in steps,
    /// MADV_PAGEOUT's: `Sim::take_reclaim_tail`): the reclaims' batches may pause and the end
    /// may stop after its flush (`Sim::tail_flush_first`); the synchronous callers' tails
    /// never do either.
    pub stepped: bool,
}

/// The rest of a `shrink_inactive_list()` batch whose `shrink_folio_list()` paused, with a
/// reference on each folio of it (`Sim::hold_paused`).
///
/// A step of the model is atomic, and a batch of SWAP_CLUSTER_MAX folios takes tens of µs
/// (before 4.3, a shootdown per mapped folio): run in one step, its CPU books its lock
/// requests ahead of every other CPU's, and its shootdown IPIs reach CPUs that have not run up
/// to their arrival, so an interrupts-off section the target will be in then cannot delay them
/// (docs/locking.md). So a stepped reclaim stops before a folio once its CPU's clock has
/// passed the next other CPU's, and goes on with the next folio in the task's next step. This
/// is not a kernel behaviour (the kernel's CPUs run at once); it is how the model keeps its
/// CPUs in time order. The unmap batch, the folios to free and those kept stay in the tail
/// meanwhile, as they do across the kernel's loop.
#[derive(Clone, Debug)]
pub struct PausedBatch {
    node: usize,
    lru: Lru,
    /// Folios the batch isolated, and the part of its `shrink_folio_list()` run so far.
    taken: usize,
    stat: ReclaimStat,
    /// The batch's folios; those from `next` on are not looked at yet.
    folios: Vec<Pfn>,
    next: usize,
}

impl PausedBatch {
    /// The folios the batch has not looked at yet (isolated, on no list).
    pub fn rest(&self) -> &[Pfn] {
        &self.folios[self.next..]
    }
}

/// What a stepped `shrink_inactive_list()` batch did in this step.
enum Batch {
    /// Over: folios isolated, and what `shrink_folio_list()` found.
    Done(usize, ReclaimStat),
    /// Paused between two folios ([`PausedBatch`]).
    Paused,
}

/// One `shrink_inactive_list()` batch's `move_folios_to_lru()` under the node's LRU lock, and
/// the NR_ISOLATED decrement after it ([`ReclaimTail::putback`]).
#[derive(Clone, Copy, Debug)]
pub struct Putback {
    pub node: u32,
    /// Index into `Lruvec::nr_isolated`: 0 anon, 1 file.
    pub file: u8,
    /// Folios the batch isolated.
    pub taken: u32,
    /// Of them, the folios put back (not reclaimed): the lock section's length.
    pub back: u32,
}

impl ReclaimTail {
    pub fn new(ncpus: usize) -> Self {
        ReclaimTail { batch: TlbUnmapBatch::new(ncpus), free_folios: Vec::with_capacity(PAGEVEC_SIZE), luf_folios: Vec::new(), keep: Vec::new(), putback: Vec::new(), frames: ([KFn::Other; 4], 0), paused: None, stepped: false }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lru {
    InactiveAnon = 0,
    ActiveAnon = 1,
    InactiveFile = 2,
    ActiveFile = 3,
}

/// One LRU list: head = most recently added, tail = oldest.
#[derive(Clone, Copy, Debug)]
pub struct LruList {
    pub head: u32,
    pub tail: u32,
    pub len: u64,
}

impl Default for LruList {
    fn default() -> Self {
        LruList { head: NIL, tail: NIL, len: 0 }
    }
}

/// `struct lruvec` of a node.
#[derive(Clone, Debug, Default)]
pub struct Lruvec {
    pub lists: [LruList; 4],
    /// NR_ISOLATED_ANON, NR_ISOLATED_FILE: folios taken off the lists by reclaim and not yet
    /// put back or freed (too_many_isolated()).
    pub nr_isolated: [u64; 2],
    /// `nonresident_age`: pages evicted or activated on this node (mm/workingset.rs).
    pub nonresident_age: u64,
}

impl Lru {
    /// The active list paired with an inactive one.
    fn active(self) -> Lru {
        if self == Lru::InactiveFile { Lru::ActiveFile } else { Lru::ActiveAnon }
    }
}

/// Index into `Lruvec::nr_isolated`: 0 anon, 1 file.
fn is_file(lru: Lru) -> usize {
    matches!(lru, Lru::InactiveFile | Lru::ActiveFile) as usize
}

fn lru_of(flags: u16) -> Lru {
    match (flags & pg::ANON != 0, flags & pg::ACTIVE != 0) {
        (true, false) => Lru::InactiveAnon,
        (true, true) => Lru::ActiveAnon,
        (false, false) => Lru::InactiveFile,
        (false, true) => Lru::ActiveFile,
    }
}

/// What folio_check_references() decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FolioRef {
    Activate,
    Keep,
    /// Reclaim only if clean; a dirty one is kept for writeback.
    ReclaimClean,
    Reclaim,
}

impl Sim {
    // ------------------------------------------------------------------ LRU lists

    /// `lruvec_add_folio()` at the head of its list.
    pub fn lru_add(&mut self, pfn: Pfn) {
        self.lru_insert(pfn, false);
    }

    /// `lruvec_add_folio_tail()`: at the tail of its list, where reclaim isolates next.
    pub fn lru_add_tail(&mut self, pfn: Pfn) {
        self.lru_insert(pfn, true);
    }

    fn lru_insert(&mut self, pfn: Pfn, at_tail: bool) {
        let f = self.frames[pfn.0 as usize];
        debug_assert!(f.flags & pg::LRU == 0, "simulator bug: {pfn} already on an LRU");
        let (node, lru) = (self.pfn_to_nid(pfn), lru_of(f.flags) as usize);
        let l = self.nodes[node].lru.lists[lru];
        // The neighbour on the side it joins: the old head (or tail); it becomes the new end.
        let (next, prev) = if at_tail { (NIL, l.tail) } else { (l.head, NIL) };
        {
            let fr = &mut self.frames[pfn.0 as usize];
            fr.flags |= pg::LRU;
            fr.lru_next = next;
            fr.lru_prev = prev;
        }
        if at_tail && prev != NIL {
            self.frames[prev as usize].lru_next = pfn.0;
        } else if !at_tail && next != NIL {
            self.frames[next as usize].lru_prev = pfn.0;
        }
        let l = &mut self.nodes[node].lru.lists[lru];
        if at_tail {
            l.tail = pfn.0;
            if l.head == NIL {
                l.head = pfn.0;
            }
        } else {
            l.head = pfn.0;
            if l.tail == NIL {
                l.tail = pfn.0;
            }
        }
        l.len += 1;
    }

    /// `lruvec_del_folio()`.
    pub fn lru_del(&mut self, pfn: Pfn) {
        let f = self.frames[pfn.0 as usize];
        debug_assert!(f.flags & pg::LRU != 0);
        let (node, lru) = (self.pfn_to_nid(pfn), lru_of(f.flags) as usize);
        if f.lru_prev != NIL {
            self.frames[f.lru_prev as usize].lru_next = f.lru_next;
        } else {
            self.nodes[node].lru.lists[lru].head = f.lru_next;
        }
        if f.lru_next != NIL {
            self.frames[f.lru_next as usize].lru_prev = f.lru_prev;
        } else {
            self.nodes[node].lru.lists[lru].tail = f.lru_prev;
        }
        self.nodes[node].lru.lists[lru].len -= 1;
        let fr = &mut self.frames[pfn.0 as usize];
        fr.flags &= !pg::LRU;
        fr.lru_next = NIL;
        fr.lru_prev = NIL;
    }

    /// `folio_add_lru()`: new folios reach the LRU through a per-CPU batch (cpu_fbatches.lru_add)
    /// that is drained into the lists when it fills, so each CPU's folios land on the LRU in runs.
    /// Reclaim later isolates those runs together, which is why a batched flush covers few CPUs.
    pub fn folio_add_lru(&mut self, cpu: CpuId, pfn: Pfn) {
        // The batch holds a reference (folio_get() in folio_add_lru()), so a folio cannot be
        // freed, and its frame reused, while it waits in the batch.
        self.get_page(pfn);
        let ci = cpu.0 as usize;
        self.lru_add_batch[ci].push(pfn);
        if self.lru_add_batch[ci].len() >= self.p.lru_add_batch {
            self.lru_add_drain(cpu);
        }
    }

    /// `lru_add_drain()` for one CPU: move the batch onto the LRU lists and drop its references
    /// (a folio whose other references are gone is freed here, as folios_put() does).
    ///
    /// `folio_batch_move_lru()` takes the LRU lock of each folio's node (relocking when the node
    /// changes) with interrupts off; each folio moved costs one dependent cache miss (the
    /// neighbour's struct page) under the lock.
    pub fn lru_add_drain(&mut self, cpu: CpuId) {
        let batch = std::mem::take(&mut self.lru_add_batch[cpu.0 as usize]);
        if batch.is_empty() {
            return;
        }
        self.kfn_enter(cpu, KFn::FolioBatchMoveLru);
        let mut i = 0;
        while i < batch.len() {
            let node = self.pfn_to_nid(batch[i]);
            let run = batch[i..].iter().take_while(|&&p| self.pfn_to_nid(p) == node).count();
            let work = self.miss_ns(cpu, NodeId(node as u32)) * run as f64;
            self.lock_section(cpu, LockId::Lru(node as u32), Mode::Exclusive, work);
            self.charge_sys(cpu, work);
            i += run;
        }
        self.kfn_exit(cpu);
        for pfn in batch {
            if self.frames[pfn.0 as usize].flags & pg::LRU == 0 {
                self.lru_add(pfn);
            }
            self.put_page(pfn);
        }
    }

    /// `folio_isolate_lru()`: take one folio off its LRU (MADV_PAGEOUT's reclaim_pages(),
    /// migration: move_pages, a NUMA hint fault, promotion). False if it is not on one. The
    /// kernel takes the folio's LRU lock with interrupts off for it (`folio_lruvec_lock_irq()`;
    /// 4.x `spin_lock_irq(zone_lru_lock)`): one folio's unlink, a dependent cache miss, under
    /// the lock, as `lru_lock_work` charges a batch.
    pub fn folio_isolate_lru(&mut self, cpu: CpuId, pfn: Pfn) -> bool {
        if self.frames[pfn.0 as usize].flags & pg::LRU == 0 {
            return false;
        }
        let node = self.pfn_to_nid(pfn);
        self.lru_lock_work(cpu, node, 1);
        self.lru_del(pfn);
        true
    }

    /// `move_folios_to_lru()` for one folio, with the active flag as decided. From 5.9 a folio
    /// put back active ages the node's non-resident information (mm/workingset.rs). (The kernel's
    /// MADV_PAGEOUT path puts back with folio_putback_lru(), which does not age; the model's
    /// reclaim_pages() shares this function.)
    /// A folio that is dirty or under writeback and not reclaimed now goes back to the inactive
    /// list (`keep_locked`, before 4.11) or is activated (`activate_locked`, 4.11+, c55e8d035b28:
    /// "move dirty pages out of the way until they're flushed").
    fn keep_for_io(&mut self, keep: &mut Vec<(Pfn, bool)>, pfn: Pfn, unmapped: bool) {
        let activate = self.p.kver >= (4, 11);
        self.keep_or_putback(keep, pfn, unmapped, activate);
        if activate {
            self.vmstat.count(VmEvent::PGACTIVATE);
        }
    }

    /// A folio shrink_folio_list() does not reclaim (`ret_folios`). In Linux all of them stay
    /// isolated until the call returns. The model keeps isolated, with a reference (the
    /// kernel's isolation reference), those whose PTEs this call cleared (`unmapped`): their
    /// flush may still be pending, and nobody may isolate, migrate and free them before it
    /// ([`Sim::finish_reclaim_tail`] puts them back after it). The others go back at once.
    /// Departure: the model's end of the call can come a step later (`ReclaimTail`), so holding
    /// every kept folio would widen a window Linux keeps to microseconds (a folio under
    /// writeback could not be rotated meanwhile).
    fn keep_or_putback(&mut self, keep: &mut Vec<(Pfn, bool)>, pfn: Pfn, unmapped: bool, active: bool) {
        if unmapped {
            self.get_page(pfn);
            keep.push((pfn, active));
        } else {
            self.putback(pfn, active);
        }
    }

    fn putback(&mut self, pfn: Pfn, active: bool) {
        let f = &mut self.frames[pfn.0 as usize];
        if f.refcount == 0 || f.flags & pg::FREE != 0 {
            return;
        }
        if active {
            f.flags |= pg::ACTIVE;
        } else {
            f.flags &= !pg::ACTIVE;
        }
        let node = self.pfn_to_nid(pfn);
        self.lru_add(pfn);
        if active && self.p.kver >= (5, 9) {
            self.workingset_age_nonresident(node, 1);
        }
    }

    // ------------------------------------------------------------------ references

    /// `folio_referenced()`: count the PTEs mapping the folio that are young, clearing the
    /// accessed bit (`ptep_clear_flush_young`, which on x86 does not flush: a stale TLB entry
    /// only means the next access will not set the bit again). Returns (count, VM_EXEC among
    /// the VMAs whose PTE was young): `folio_referenced_one()` ORs a VMA's flags into
    /// `pra->vm_flags` only when it found the PTE referenced (4.2 `page_referenced_one()` too).
    ///
    /// The rmap walk holds the file's i_mmap_rwsem or the anon_vma's rwsem for read, and each
    /// mapping's PTE lock while it tests the PTE.
    fn folio_referenced(&mut self, cpu: CpuId, pfn: Pfn) -> (u32, bool) {
        self.kfn_enter(cpu, KFn::FolioReferenced);
        let rmap_lock = self.rmap_lock(cpu, pfn);
        let mut referenced = 0;
        let mut exec = false;
        self.for_each_rmap(pfn, |s, mm, vpn| {
            s.lock_section(cpu, LockId::Ptl(mm.0, vpn >> 9), Mode::Exclusive, s.p.pte_update_ns);
            let pte = s.mm(mm).pgtable.get(vpn);
            if pte.young() {
                referenced += 1;
                s.mm_mut(mm).pgtable.set(vpn, pte.with(0, crate::mm::pgtable::Pte::ACCESSED));
                if let Some(v) = crate::mm::mmap::find_vma_in(s.mm(mm), vpn) {
                    exec |= v.flags & vm::EXEC != 0;
                }
            }
        });
        self.charge_sys(cpu, self.p.pte_update_ns * (1 + referenced) as f64);
        self.lock_release(rmap_lock);
        self.kfn_exit(cpu);
        (referenced, exec)
    }

    /// `folio_check_references()` (4.2's `page_check_references()`), per version:
    /// - before 5.9 a swap-backed (anon) folio with any young PTE is activated at once
    ///   (`if (PageSwapBacked(page)) return PAGEREF_ACTIVATE;`, removed with "mm/vmscan: protect
    ///   the workingset on anonymous LRU", b518154e59aa, 5.9, which gives anon folios the file
    ///   rule below);
    /// - a folio mapped once and young goes round again with PG_referenced set; twice (the flag
    ///   from the last pass, or two young PTEs) it is activated;
    /// - "activate file-backed executable folios after first usage": VM_EXEC activates file
    ///   folios only (4.2: anon never got there; 5.9+: `!folio_test_swapbacked()`);
    /// - a file folio with no young PTE but PG_referenced set is reclaimed only if clean
    ///   (FOLIOREF_RECLAIM_CLEAN).
    fn folio_check_references(&mut self, cpu: CpuId, pfn: Pfn) -> FolioRef {
        let (referenced_ptes, exec) = self.folio_referenced(cpu, pfn);
        let pre_5_9 = self.p.kver < (5, 9);
        let f = &mut self.frames[pfn.0 as usize];
        let anon = f.flags & pg::ANON != 0;
        let referenced_folio = f.flags & pg::REFERENCED != 0;
        f.flags &= !pg::REFERENCED;
        if referenced_ptes > 0 {
            if anon && pre_5_9 {
                return FolioRef::Activate;
            }
            f.flags |= pg::REFERENCED;
            if referenced_folio || referenced_ptes > 1 || (exec && !anon) {
                return FolioRef::Activate;
            }
            return FolioRef::Keep;
        }
        if referenced_folio && !anon {
            return FolioRef::ReclaimClean;
        }
        FolioRef::Reclaim
    }

    // ------------------------------------------------------------------ shrinking

    /// `reclaim_pages()` on folios picked by MADV_PAGEOUT: isolate, shrink ignoring references,
    /// put back what was not reclaimed.
    ///
    /// The end of its shrink_folio_list() is left to the calling task's next step (see
    /// [`ReclaimTail`]); a previous call's end, still pending, runs first.
    pub fn reclaim_pages(&mut self, cpu: CpuId, folios: Vec<Pfn>) {
        let isolated: Vec<Pfn> = folios.into_iter().filter(|&p| self.folio_isolate_lru(cpu, p)).collect();
        let mut tail = self.take_reclaim_tail(cpu);
        self.shrink_folio_list(cpu, isolated, true, None, &mut tail);
        self.defer_reclaim_tail(cpu, tail);
    }

    /// The current task's pending reclaim end, or a fresh one.
    fn take_reclaim_tail(&mut self, cpu: CpuId) -> Box<ReclaimTail> {
        let cur = self.cpus[cpu.0 as usize].current;
        let mut tail = cur.and_then(|t| self.task_mut(t).reclaim_tail.take()).unwrap_or_else(|| Box::new(ReclaimTail::new(self.cpus.len())));
        tail.stepped = true;
        tail
    }

    /// Leave the end of a shrink_folio_list() to the current task's next step, which runs it
    /// before anything else ([`Sim::finish_task_reclaim_tail`]); without a task, run it now.
    fn defer_reclaim_tail(&mut self, cpu: CpuId, mut tail: Box<ReclaimTail>) {
        if !tail.batch.flush_required && tail.free_folios.is_empty() && tail.luf_folios.is_empty() && tail.keep.is_empty() && tail.putback.is_empty() && tail.paused.is_none() {
            return;
        }
        match self.cpus[cpu.0 as usize].current {
            Some(t) => {
                tail.frames = self.prof.frames(cpu);
                self.task_mut(t).reclaim_tail = Some(tail);
            }
            None => self.finish_reclaim_tail(cpu, &mut tail),
        }
    }

    /// At the start of a task's step: the end of the reclaim its previous step left pending.
    /// Returns whether there was one (the step is then spent on it). A batch that paused is
    /// not over: the reclaim's own step goes on with it (kswapd, or the fault's direct reclaim).
    pub fn finish_task_reclaim_tail(&mut self, cpu: CpuId, t: Tid) -> bool {
        match self.task_mut(t).reclaim_tail.take() {
            Some(tail) if tail.paused.is_some() => {
                self.task_mut(t).reclaim_tail = Some(tail);
                false
            }
            Some(mut tail) => {
                let (frames, n) = tail.frames;
                for &f in &frames[..n] {
                    self.kfn_enter(cpu, f);
                }
                let rest = self.tail_flush_first(cpu, &mut tail);
                if !rest {
                    self.finish_reclaim_tail(cpu, &mut tail);
                }
                for _ in 0..n {
                    self.kfn_exit(cpu);
                }
                if rest {
                    self.task_mut(t).reclaim_tail = Some(tail);
                }
                true
            }
            None => false,
        }
    }

    /// A stepped tail's `try_to_unmap_flush()` first: its wait for the IPIs can take the CPU
    /// past the other CPUs, and the frees and putbacks after it take zone->lock and the LRU
    /// lock, so they go to the task's next step if it did (as a paused batch does,
    /// [`PausedBatch`]). Returns true when the rest is left for that step. Not with LUF's
    /// deferred folios, whose tag needs the mask from before the flush.
    fn tail_flush_first(&mut self, cpu: CpuId, tail: &mut ReclaimTail) -> bool {
        let more = !tail.free_folios.is_empty() || !tail.keep.is_empty() || !tail.putback.is_empty();
        if !tail.stepped || !more || !tail.batch.flush_required || !tail.luf_folios.is_empty() || tail.batch.luf_pending() || self.inject == Inject::SkipFlushBeforeFree {
            return false;
        }
        self.try_to_unmap_flush(cpu, &mut tail.batch);
        let ahead = self.ahead_of_others(cpu);
        if ahead {
            self.mark("reclaim tail split after its flush");
        }
        ahead
    }

    /// `shrink_folio_list()`: reclaim what can be from an isolated list; the rest is put back.
    /// Returns what it reclaimed and met ([`ReclaimStat`]). The end of the function (the last
    /// `try_to_unmap_flush()` and `free_unref_folios()`) is left in `tail` for
    /// [`Sim::finish_reclaim_tail`]: atomic callers run it at once, kswapd at its next step (see
    /// [`ReclaimTail`]).
    pub fn shrink_folio_list(&mut self, cpu: CpuId, folios: Vec<Pfn>, ignore_references: bool, kswapd: Option<bool>, tail: &mut ReclaimTail) -> ReclaimStat {
        self.shrink_folio_list_from(cpu, folios, ignore_references, kswapd, tail, false).0
    }

    /// [`Sim::shrink_folio_list`] that may pause between two folios (`pause`, a stepped
    /// reclaim's batch: [`PausedBatch`]); returns the list and where it stopped if it did.
    fn shrink_folio_list_from(&mut self, cpu: CpuId, folios: Vec<Pfn>, ignore_references: bool, kswapd: Option<bool>, tail: &mut ReclaimTail, pause: bool) -> (ReclaimStat, Option<(Vec<Pfn>, usize)>) {
        self.kfn_enter(cpu, KFn::ShrinkFolioList);
        // The previous call's end comes first (a no-op when it already ran), and writeback the
        // device has completed by now ends (mm/page_writeback.rs).
        self.finish_reclaim_tail(cpu, tail);
        self.wb_end_io(cpu);
        // can_demote() (mm/vmscan_demote.rs): kswapd and direct reclaim, never MADV_PAGEOUT.
        let nid = folios.first().map(|&p| self.pfn_node(p).0);
        let do_demote_pass = kswapd.is_some() && nid.is_some_and(|n| self.can_demote(n));
        let r = self.shrink_folio_list_pass(cpu, folios, 0, ignore_references, kswapd, tail, do_demote_pass, true, pause && !do_demote_pass);
        self.kfn_exit(cpu);
        r
    }

    /// One pass of `shrink_folio_list()` over `folios`. With `do_demote_pass` the folios it would
    /// evict are demoted instead; those that cannot be are passed over again without it (the
    /// kernel's `goto retry`), not counted as scanned twice.
    /// It starts at `folios[from]`. With `pause`, it stops before a folio once the CPU has run
    /// past the other CPUs ([`PausedBatch`]) and returns the list and the folio it stopped at.
    #[allow(clippy::too_many_arguments)]
    fn shrink_folio_list_pass(&mut self, cpu: CpuId, folios: Vec<Pfn>, from: usize, ignore_references: bool, kswapd: Option<bool>, tail: &mut ReclaimTail, do_demote_pass: bool, count_scan: bool, pause: bool) -> (ReclaimStat, Option<(Vec<Pfn>, usize)>) {
        let nid = folios.first().map(|&p| self.pfn_node(p).0);
        let mut demote_folios = Vec::new();
        let mut stat = ReclaimStat::default();
        let ReclaimTail { batch, free_folios, luf_folios, keep, .. } = &mut *tail;
        let batched = self.p.batched_unmap_flush;
        // Folios kswapd's pageout() started writing: one request on the device at the end.
        let mut pageout = Vec::new();
        let (mut i, mut rest) = (from, None);
        while i < folios.len() {
            // Not before the first folio (each step gets on), nor once kswapd has writes to
            // submit (one request per call).
            if pause && i > from && pageout.is_empty() && self.ahead_of_others(cpu) {
                rest = Some(i);
                break;
            }
            let pfn = folios[i];
            i += 1;
            self.lru_runahead();
            let f = *self.frame(pfn);
            // pgscan/pgsteal are counted by shrink_inactive_list() around its shrink_folio_list();
            // MADV_PAGEOUT's reclaim_pages() (kswapd == None) counts neither (checked on 6.18).
            match kswapd {
                _ if !count_scan => {}
                Some(true) => self.vmstat.count(VmEvent::PGSCAN_KSWAPD),
                Some(false) => self.vmstat.count(VmEvent::PGSCAN_DIRECT),
                None => {}
            }
            if f.flags & pg::LOCKED != 0 {
                // folio_trylock() failed (a readahead page whose read is being set up): keep.
                self.keep_or_putback(keep, pfn, false, false);
                continue;
            }
            let anon = f.flags & pg::ANON != 0;
            // folio_check_dirty_writeback(): a dirty file folio is unqueued dirty (the model has
            // no writeback window: a folio is clean from the start of its write).
            if count_scan && !anon && f.flags & pg::DIRTY != 0 && f.flags & pg::WRITEBACK == 0 {
                stat.nr_unqueued_dirty += 1;
            }
            if f.flags & pg::WRITEBACK != 0 {
                // Cases 1 and 2 of shrink_folio_list() (global reclaim is
                // writeback_throttling_sane(), so never case 3's wait): kswapd meeting a folio it
                // marked before on a node flagged PGDAT_WRITEBACK counts it immediate; anyone
                // else marks it PG_reclaim. Kept (before 4.11) or activated (4.11+).
                let node = self.pfn_to_nid(pfn);
                if kswapd == Some(true) && f.flags & pg::RECLAIM != 0 && self.wb.node_writeback[node] {
                    stat.nr_immediate += count_scan as u64;
                } else {
                    self.frame_mut(pfn).flags |= pg::RECLAIM;
                    stat.nr_writeback += count_scan as u64;
                }
                self.keep_for_io(keep, pfn, false);
                continue;
            }
            if anon && self.swap.nr_free() == 0 && !do_demote_pass {
                // No swap (or it is full): folio_alloc_swap() fails and the folio is activated.
                self.keep_or_putback(keep, pfn, false, true);
                self.vmstat.count(VmEvent::PGACTIVATE);
                continue;
            }
            let mut reclaim_clean = false;
            if !ignore_references {
                match self.folio_check_references(cpu, pfn) {
                    FolioRef::Activate => {
                        self.keep_or_putback(keep, pfn, false, true);
                        self.vmstat.count(VmEvent::PGACTIVATE);
                        continue;
                    }
                    FolioRef::Keep => {
                        self.keep_or_putback(keep, pfn, false, false);
                        continue;
                    }
                    FolioRef::ReclaimClean => reclaim_clean = true,
                    FolioRef::Reclaim => {}
                }
            }
            if do_demote_pass {
                // Before reclaiming the folio, try to relocate its contents to another node.
                demote_folios.push(pfn);
                continue;
            }
            // add_to_swap(): an anon folio gets a slot; the isolation reference keeps it alive
            // until it is freed with its batch, after the flush (anon folios have no page-cache
            // reference to do that).
            let slot = if anon {
                let Some(slot) = self.swap_alloc() else {
                    self.keep_or_putback(keep, pfn, false, true);
                    continue;
                };
                self.get_page(pfn);
                Some(slot)
            } else {
                None
            };
            let mut luf = false;
            let unmapped = f.mapcount > 0;
            if unmapped {
                let b = if batched { Some(&mut *batch) } else { None };
                luf = self.try_to_unmap(cpu, pfn, b, slot);
            }
            if self.frame(pfn).mapcount != 0 {
                self.keep_or_putback(keep, pfn, unmapped, true);
                if let Some(slot) = slot {
                    // Still mapped somewhere: give back the isolation reference, and the slot if
                    // no PTE took it.
                    self.put_page(pfn);
                    if self.swap.map[slot as usize] == 0 {
                        self.swap.free.push(slot);
                    }
                }
                continue;
            }
            if let Some(slot) = slot {
                // pageout() → swap_writepage(): the data goes to the slot before the folio is
                // freed.
                self.before_pageout(cpu, pfn, batch);
                if self.swap.map[slot as usize] == 0 {
                    // Nobody maps it any more (all PTEs went away meanwhile): no need for the slot.
                    self.swap.free.push(slot);
                } else {
                    self.swap_writepage(cpu);
                }
                self.frame_mut(pfn).flags &= !pg::DIRTY;
            } else {
                if self.frame(pfn).flags & pg::DIRTY != 0 {
                    // Only kswapd writes file folios, and only on a node flagged dirty (4.11+:
                    // only one it has met dirty before, PG_reclaim); anyone else sets
                    // PG_reclaim for the flusher's writeback to rotate it to the inactive tail,
                    // and keeps the folio (before 4.11) or activates it (4.11+).
                    // mm/page_writeback.rs has the versions.
                    let node = self.pfn_to_nid(pfn);
                    let seen = self.frame(pfn).flags & pg::RECLAIM != 0;
                    let may_write = kswapd == Some(true) && self.wb.node_dirty[node] && (seen || self.p.kver < (4, 11));
                    if !may_write {
                        self.vmstat.count(VmEvent::NR_VMSCAN_IMMEDIATE);
                        self.frame_mut(pfn).flags |= pg::RECLAIM;
                        self.keep_for_io(keep, pfn, unmapped);
                        continue;
                    }
                    if reclaim_clean {
                        self.keep_or_putback(keep, pfn, unmapped, false);
                        continue;
                    }
                    // pageout(): `folio_set_reclaim()`, then the filesystem's writepage starts
                    // an asynchronous write: the folio is clean and under writeback, and goes
                    // back to the inactive list (`goto keep`, not reclaimed now). When its
                    // write completes, `folio_end_writeback()` rotates it to the inactive tail,
                    // where a later pass finds it clean ([`Sim::wb_end_io`]).
                    self.before_pageout(cpu, pfn, batch);
                    self.folio_clear_dirty(pfn);
                    // The filesystem's writepage for this folio (cost.writepage_ns).
                    self.charge_sys(cpu, self.p.writepage_ns);
                    self.frame_mut(pfn).flags |= pg::RECLAIM | pg::WRITEBACK;
                    self.vmstat.count(VmEvent::NR_VMSCAN_WRITE);
                    pageout.push(pfn);
                    self.keep_or_putback(keep, pfn, unmapped, false);
                    continue;
                }
                // __remove_mapping(): out of the page cache; the frame is freed with its batch.
                self.remove_from_page_cache(cpu, pfn);
            }
            match kswapd {
                Some(true) => self.vmstat.count(VmEvent::PGSTEAL_KSWAPD),
                Some(false) => self.vmstat.count(VmEvent::PGSTEAL_DIRECT),
                None => {}
            }
            stat.nr_reclaimed += 1;
            if luf { luf_folios.push(pfn) } else { free_folios.push(pfn) }
            if self.p.reclaim_free_batching && free_folios.len() + luf_folios.len() == PAGEVEC_SIZE {
                // folio_batch_add() == 0: try_to_unmap_flush(), then free_unref_folios().
                self.flush_and_free_folios(cpu, batch, free_folios, luf_folios);
            }
        }
        if !pageout.is_empty() {
            self.pageout_submit(cpu, pageout);
        }
        if let (false, Some(nid)) = (demote_folios.is_empty(), nid) {
            // Migrate the folios selected for demotion; they count as reclaimed (pgsteal too).
            let (demoted, failed) = self.demote_folio_list(cpu, demote_folios, nid, kswapd == Some(true));
            stat.nr_reclaimed += demoted;
            self.vmstat.add(if kswapd == Some(true) { VmEvent::PGSTEAL_KSWAPD } else { VmEvent::PGSTEAL_DIRECT }, demoted);
            if !failed.is_empty() {
                // Folios which weren't demoted are reclaimed as usual (not proactive reclaim).
                // The retry counts nothing as scanned or unqueued dirty again.
                stat.nr_reclaimed += self.shrink_folio_list_pass(cpu, failed, 0, ignore_references, kswapd, tail, false, false, false).0.nr_reclaimed;
            }
        }
        (stat, rest.map(|i| (folios, i)))
    }

    /// The end of `shrink_folio_list()`: `try_to_unmap_flush()` before the last folios are
    /// freed (all versions since 4.3).
    pub fn finish_reclaim_tail(&mut self, cpu: CpuId, tail: &mut ReclaimTail) {
        if let Some(p) = tail.paused.take() {
            // A paused batch that will not go on (its task exits; the model's tasks do not
            // exit inside a reclaim, so this is a guard): the folios not looked at go back,
            // as shrink_folio_list() keeps what it does not reclaim.
            for &pfn in p.rest() {
                self.putback(pfn, false);
                self.put_page(pfn);
            }
            let back = (p.taken as u64 - p.stat.nr_reclaimed) as u32;
            tail.putback.push(Putback { node: p.node as u32, file: is_file(p.lru) as u8, taken: p.taken as u32, back });
        }
        let ReclaimTail { batch, free_folios, luf_folios, keep, .. } = tail;
        self.flush_and_free_folios(cpu, batch, free_folios, luf_folios);
        // The caller's putback of what was not reclaimed (move_folios_to_lru(), or
        // reclaim_pages()'s folio_putback_lru()), after the flush.
        for (pfn, active) in keep.drain(..) {
            if self.frame(pfn).refcount > 1 && self.frame(pfn).flags & pg::LRU == 0 {
                self.putback(pfn, active);
            }
            self.put_page(pfn);
        }
        self.finish_putbacks(cpu, tail);
    }

    /// The LRU lock sections of the `move_folios_to_lru()` calls left in `tail`, and the
    /// NR_ISOLATED decrements after them (`shrink_inactive_list()`).
    fn finish_putbacks(&mut self, cpu: CpuId, tail: &mut ReclaimTail) {
        for Putback { node, file, taken, back } in tail.putback.drain(..) {
            self.kfn_enter(cpu, KFn::ShrinkInactiveList);
            self.lru_lock_work(cpu, node as usize, back as usize);
            self.nodes[node as usize].lru.nr_isolated[file as usize] -= taken as u64;
            self.kfn_exit(cpu);
        }
    }

    /// `try_to_unmap_flush()`, then `free_unref_folios()`; with LUF (v10 "mm, vmscan: apply luf
    /// mechanism to unmapping during folio reclaim") the deferred folios are freed after it
    /// tagged with the generation `fold_unmap_luf()` gives the CPUs the flush did not cover.
    fn flush_and_free_folios(&mut self, cpu: CpuId, batch: &mut TlbUnmapBatch, free_folios: &mut Vec<Pfn>, luf_folios: &mut Vec<Pfn>) {
        let flushed = batch.luf_flushed_mask();
        if self.inject != Inject::SkipFlushBeforeFree {
            self.try_to_unmap_flush(cpu, batch);
        }
        if !free_folios.is_empty() {
            self.free_folio_batch(cpu, free_folios, 0);
        }
        if flushed.is_some() || !luf_folios.is_empty() {
            let tag = flushed.map_or(0, |f| self.luf_fold_batch(cpu, batch, &f));
            self.free_folio_batch(cpu, luf_folios, tag);
        }
    }

    /// Before `pageout()` writes a folio: stale writable TLB entries must be gone before the I/O
    /// starts (`try_to_unmap_flush_dirty()`), else a write after the I/O began would be lost.
    fn before_pageout(&mut self, cpu: CpuId, pfn: Pfn, batch: &mut TlbUnmapBatch) {
        if self.inject != Inject::SkipDirtyFlushBeforeWriteback {
            self.try_to_unmap_flush_dirty(cpu, batch);
        }
        if self.oracle.is_some() {
            self.oracle_writeback(cpu, pfn);
        }
    }

    fn free_folio_batch(&mut self, cpu: CpuId, folios: &mut Vec<Pfn>, luf_tag: u16) {
        let n = folios.len();
        for pfn in folios.drain(..) {
            self.luf_put_folio(cpu, pfn, luf_tag);
        }
        self.charge_sys(cpu, self.p.page_alloc_ns * n as f64);
    }

    /// Isolate up to `n` folios from the tail of a list (`isolate_lru_folios()`), under the
    /// node's LRU lock with interrupts off (spin_lock_irq): one dependent cache miss per folio
    /// (walking the list from the tail). Counted in NR_ISOLATED until put back or freed.
    fn isolate_lru_folios(&mut self, cpu: CpuId, node: usize, lru: Lru, n: usize) -> Vec<Pfn> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let tail = self.nodes[node].lru.lists[lru as usize].tail;
            if tail == NIL {
                break;
            }
            self.lru_del(Pfn(tail));
            out.push(Pfn(tail));
        }
        self.lru_lock_work(cpu, node, out.len());
        self.nodes[node].lru.nr_isolated[is_file(lru)] += out.len() as u64;
        self.runahead_start(false, self.nodes[node].lru.lists[lru as usize].tail);
        out
    }

    /// Host speed only, no effect on the model. Walking an LRU list from its tail is a chain of
    /// dependent host cache misses (each frame gives the next one's pfn), which was 6-10% of
    /// a reclaim-bound run's host time in `lru_del` (docs/performance.md, item 35). So while
    /// reclaim works on the folios it isolated, each folio it takes up moves a cursor one frame
    /// further along the list it isolated from ([`Sim::runahead_step`]): the next
    /// isolation finds its frames in the host's caches.
    #[inline]
    pub(crate) fn lru_runahead(&mut self) {
        self.runahead_step(false);
    }

    /// `move_folios_to_lru()` / the LRU lock around a batch of `n` folios of `node`.
    pub(crate) fn lru_lock_work(&mut self, cpu: CpuId, node: usize, n: usize) {
        if n == 0 {
            return;
        }
        let work = self.miss_ns(cpu, NodeId(node as u32)) * n as f64;
        self.lock_section(cpu, LockId::Lru(node as u32), Mode::Exclusive, work);
        self.charge_sys(cpu, work);
    }

    /// `too_many_isolated()` for a direct reclaimer: more folios isolated from this node's
    /// lists than an eighth of the inactive list (GFP_KERNEL allows IO and FS: `inactive >>= 3`).
    fn too_many_isolated(&self, node: usize, lru: Lru) -> bool {
        let l = &self.nodes[node].lru;
        let inactive = l.lists[lru as usize].len >> 3;
        l.nr_isolated[is_file(lru)] > inactive
    }

    /// `shrink_active_list()`: move folios from the active to the inactive list, keeping
    /// referenced executable file folios active.
    fn shrink_active_list(&mut self, cpu: CpuId, node: usize, lru: Lru, n: usize) {
        self.kfn_enter(cpu, KFn::ShrinkActiveList);
        let folios = self.isolate_lru_folios(cpu, node, lru, n);
        let taken = folios.len();
        self.vmstat.add(VmEvent::PGREFILL, folios.len() as u64);
        for pfn in folios {
            self.lru_runahead();
            // "Identify referenced, file-backed active pages and give them one more trip
            // around the active list ... Anon pages are not likely to be evicted by use-once
            // streaming IO, plus JVM can create lots of anon VM_EXEC pages, so we ignore them
            // here" (4.2 and 6.18 alike).
            let (referenced, exec) = self.folio_referenced(cpu, pfn);
            let keep = referenced > 0 && exec && self.frames[pfn.0 as usize].flags & pg::ANON == 0;
            if !keep && self.p.kver >= (4, 20) {
                // "we are de-activating": the folio was in the workingset (mm/workingset.rs).
                self.frames[pfn.0 as usize].flags |= pg::WORKINGSET;
            }
            self.putback(pfn, keep);
            if !keep {
                self.vmstat.count(VmEvent::PGDEACTIVATE);
            }
        }
        // move_folios_to_lru() for both lists, under the lock again.
        self.lru_lock_work(cpu, node, taken);
        self.nodes[node].lru.nr_isolated[is_file(lru)] -= taken as u64;
        self.kfn_exit(cpu);
    }

    /// What reclaim of `taken` folios that met `writeback` under writeback and `immediate`
    /// marked ones says of the node: all under writeback flags it PGDAT_WRITEBACK
    /// (ZONE_WRITEBACK before 4.8; "If reclaim is isolating dirty pages under writeback ... the
    /// only option is to throttle from reclaim context"), and immediate ones stall kswapd
    /// ([`Sim::reclaim_throttle_writeback`]; `kswapd_step()` blocks it). Per
    /// `shrink_inactive_list()` batch before 4.16, per kswapd `shrink_node()` pass from 4.16.
    fn writeback_pressure(&mut self, cpu: CpuId, node: usize, taken: u64, writeback: u64, immediate: u64) {
        if writeback > 0 && writeback == taken {
            self.wb.node_writeback[node] = true;
        }
        if immediate > 0 {
            self.reclaim_throttle_writeback(cpu, node);
        }
    }

    /// `inactive_is_low()` (4.2: `inactive_list_is_low()`) for the list pair of `inactive_lru`:
    /// - from 4.10 ("mm: vmscan: reduce size of inactive file list", 59dc76b0d4df) both pairs
    ///   keep `inactive * int_sqrt(10 * GB of the pair) >= active`, the ratio 1 below 1 GB;
    /// - before 4.10 the file pair keeps half: `active > inactive` is low
    ///   (`inactive_file_is_low()`), and the anon pair uses `zone->inactive_ratio`, the same
    ///   square root but of the zone's managed memory (`calculate_zone_inactive_ratio()`; the
    ///   node's pages here, one zone per node).
    fn inactive_is_low(&self, node: usize, inactive_lru: Lru) -> bool {
        let sqrt_ratio = |pages: u64| {
            let gb = (pages * PAGE_SIZE) >> 30;
            if gb > 0 { int_sqrt(10 * gb) } else { 1 }
        };
        let lists = &self.nodes[node].lru.lists;
        let active_lru = inactive_lru.active();
        let (inactive, active) = (lists[inactive_lru as usize].len, lists[active_lru as usize].len);
        let ratio = match (self.p.kver >= (4, 10), inactive_lru == Lru::InactiveFile) {
            (true, _) => sqrt_ratio(inactive + active),
            (false, true) => 1,
            (false, false) => sqrt_ratio(self.nodes[node].nr_pages as u64),
        };
        inactive * ratio < active
    }

    /// The start of `shrink_node()`: refill the inactive file list if it is low
    /// ([`Sim::inactive_is_low`], its target `active >> priority` with no floor), then
    /// `lru_add_drain()` of this CPU (shrink_inactive_list() starts with it).
    fn shrink_node_begin(&mut self, cpu: CpuId, node: usize, priority: u32) {
        let n = (self.nodes[node].lru.lists[Lru::ActiveFile as usize].len >> priority) as usize;
        if n > 0 && self.inactive_is_low(node, Lru::InactiveFile) {
            self.shrink_active_list(cpu, node, Lru::ActiveFile, n);
        }
        self.lru_add_drain(cpu);
    }

    /// Start scanning one list pair at `priority`: refill the inactive anon list from the
    /// active one when it is low ([`Sim::inactive_is_low`]), and return the inactive list's scan
    /// target.
    fn enter_list(&mut self, cpu: CpuId, node: usize, inactive_lru: Lru, active_lru: Lru, priority: u32) -> usize {
        if inactive_lru == Lru::InactiveAnon {
            let n = (self.nodes[node].lru.lists[active_lru as usize].len >> priority) as usize;
            if n > 0 && self.inactive_is_low(node, inactive_lru) {
                self.shrink_active_list(cpu, node, active_lru, n);
            }
        }
        (self.nodes[node].lru.lists[inactive_lru as usize].len >> priority) as usize
    }

    /// One `shrink_inactive_list()` call: isolate up to SWAP_CLUSTER_MAX folios (at most
    /// `to_scan`) from the tail of `inactive_lru`, reclaim what can be, put the rest back.
    ///
    /// Dirty file folios (mm/page_writeback.rs): when every folio taken was dirty and not under
    /// writeback, 4.11+ wakes the flusher for all dirty pages, and before 4.11 the node is
    /// flagged dirty (ZONE_DIRTY) so kswapd may write; from 4.11 kswapd flags it itself at the
    /// end of a pass (6.18's `shrink_node()`).
    /// Returns the folios isolated and what `shrink_folio_list()` found, `Batch::Paused` when a
    /// stepped batch stopped between two folios (the next call with the same `tail` goes on
    /// with it: [`PausedBatch`]), or None when the list had nothing to isolate.
    fn shrink_inactive_batch(&mut self, cpu: CpuId, node: usize, inactive_lru: Lru, to_scan: usize, priority: u32, kswapd: bool, tail: &mut ReclaimTail) -> Option<Batch> {
        self.kfn_enter(cpu, KFn::ShrinkInactiveList);
        let mut paused = tail.paused.take();
        let (taken, stat, rest) = match paused.as_deref_mut() {
            // The rest of a batch that paused (the caller's list and node).
            Some(p) => {
                debug_assert!(p.node == node && p.lru == inactive_lru, "a paused batch resumes on its own list");
                self.kfn_enter(cpu, KFn::ShrinkFolioList);
                let mut folios = std::mem::take(&mut p.folios);
                folios.drain(..p.next);
                // The pause's references go (one that was the last frees its folio: another
                // CPU unmapped it meanwhile and nobody else holds it).
                folios.retain(|&pfn| {
                    let last = self.frame(pfn).refcount == 1;
                    if last {
                        self.mark("reclaim batch paused: a folio unmapped meanwhile freed");
                    }
                    self.put_page(pfn);
                    !last
                });
                let (more, rest) = self.shrink_folio_list_pass(cpu, folios, 0, false, Some(kswapd), tail, false, true, true);
                self.kfn_exit(cpu);
                (p.taken, p.stat.plus(more), rest)
            }
            None => {
                let folios = self.isolate_lru_folios(cpu, node, inactive_lru, to_scan.min(SWAP_CLUSTER_MAX));
                if folios.is_empty() {
                    self.kfn_exit(cpu);
                    return None;
                }
                let taken = folios.len();
                let stepped = tail.stepped;
                let (stat, rest) = self.shrink_folio_list_from(cpu, folios, false, Some(kswapd), tail, stepped);
                (taken, stat, rest)
            }
        };
        if let Some((folios, next)) = rest {
            let record = PausedBatch { node, lru: inactive_lru, taken, stat, folios, next };
            // A batch that pauses again keeps its record.
            let p = match paused {
                Some(mut p) => {
                    *p = record;
                    p
                }
                None => Box::new(record),
            };
            self.hold_paused(&p);
            tail.paused = Some(p);
            self.kfn_exit(cpu);
            return Some(Batch::Paused);
        }
        let (r, unqueued_dirty) = (stat.nr_reclaimed, stat.nr_unqueued_dirty);
        if self.p.kver < (4, 16) {
            // Before 4.16 per batch, by any reclaimer (only kswapd counts immediate folios).
            self.writeback_pressure(cpu, node, taken as u64, stat.nr_writeback, stat.nr_immediate);
        }
        if unqueued_dirty == taken as u64 {
            if self.p.kver >= (4, 11) {
                self.wakeup_flusher_threads(cpu, u64::MAX);
            } else {
                self.wb.node_dirty[node] = true;
            }
        }
        if r > 0 {
            // shrink_node(): `if (reclaimable) pgdat->kswapd_failures = 0;`
            self.nodes[node].kswapd_failures = 0;
        }
        self.trace(cpu, || crate::report::trace_log::TraceEvent::LruShrinkInactive { nid: node as u32, nr_scanned: taken as u64, nr_reclaimed: r, priority, file: inactive_lru == Lru::InactiveFile });
        // move_folios_to_lru(): the folios not reclaimed go back under the lock, after
        // shrink_folio_list()'s flush and frees (the end of `tail`).
        tail.putback.push(Putback { node: node as u32, file: is_file(inactive_lru) as u8, taken: taken as u32, back: (taken - r as usize) as u32 });
        self.kfn_exit(cpu);
        Some(Batch::Done(taken, stat))
    }

    /// A batch pauses with a reference on each folio it has not looked at, the kernel's
    /// isolation reference (the model's isolation takes none, as its batches used to run in one
    /// step): meanwhile another CPU may unmap one, and it must not be freed under the batch.
    fn hold_paused(&mut self, p: &PausedBatch) {
        self.mark("reclaim batch paused");
        for &pfn in p.rest() {
            self.get_page(pfn);
        }
    }

    /// The lists `shrink_lruvec()` scans at position `i` of [`Sim::scan_lists`], or those of
    /// the batch that paused in `tail`, which goes on whatever the lists are now.
    fn lists_to_scan(&self, node: usize, i: usize, tail: &ReclaimTail) -> Option<(Lru, Lru)> {
        match tail.paused.as_deref() {
            Some(p) => Some((p.lru, p.lru.active())),
            None => self.scan_lists(node).get(i).copied(),
        }
    }

    /// `get_scan_count()`'s lists for a node: file always; anon with free swap or a demotion
    /// target (`can_reclaim_anon_pages()`, mm/vmscan_demote.rs).
    fn scan_lists(&self, node: usize) -> &'static [(Lru, Lru)] {
        const FILE: &[(Lru, Lru)] = &[(Lru::InactiveFile, Lru::ActiveFile)];
        const BOTH: &[(Lru, Lru)] = &[(Lru::InactiveFile, Lru::ActiveFile), (Lru::InactiveAnon, Lru::ActiveAnon)];
        if self.swap.nr_free() > 0 || self.can_demote(node as u32) { BOTH } else { FILE }
    }

    /// `wakeup_kswapd()` for the nodes an allocation on `nid` may use.
    pub fn wake_all_kswapds(&mut self, cpu: CpuId, nid: NodeId) {
        let _ = nid;
        let now = self.now(cpu);
        if self.reclaim_start.is_none() {
            let irqs = self.cpus.iter().map(|c| c.stats.irq_tlb_count).sum();
            self.reclaim_start = Some((now, irqs));
        }
        for node in 0..self.nodes.len() {
            // Balanced enough, or hopeless (kswapd failed MAX_RECLAIM_RETRIES times in a row).
            if self.nodes[node].nr_free > self.nodes[node].wmark.low || self.nodes[node].kswapd_failures >= MAX_RECLAIM_RETRIES {
                continue;
            }
            self.wake_kswapd_wait(node, now);
        }
    }

    /// `wake_up_interruptible(&pgdat->kswapd_wait)`: the node's kswapd wakes if it sleeps
    /// there. One stalled on writeback sleeps on another wait queue (mm/page_writeback.rs) and
    /// stays asleep.
    pub(crate) fn wake_kswapd_wait(&mut self, node: usize, now: Ns) {
        let Some(t) = self.nodes[node].kswapd else { return };
        if self.task(t).state == TaskState::Blocked && self.wb.throttled[node].is_none() {
            self.wake_up(t, now);
        }
    }

    /// `try_to_free_pages()` → `do_try_to_free_pages()`: direct reclaim by the allocating task,
    /// on its CPU, raising the scan priority from DEF_PRIORITY (12) towards 0 until
    /// SWAP_CLUSTER_MAX pages are reclaimed.
    pub fn try_to_free_pages(&mut self, cpu: CpuId, nid: NodeId) -> u64 {
        self.kfn_enter(cpu, KFn::TryToFreePages);
        let r = self.do_try_to_free_pages(cpu, nid);
        self.kfn_exit(cpu);
        r
    }

    /// `do_try_to_free_pages()`: at each priority from DEF_PRIORITY down, `shrink_zones()`
    /// shrinks **every node of the zonelist** (the allocating node first, then the others in
    /// node order), each `shrink_lruvec()` counting its own reclaim against
    /// `sc->nr_to_reclaim` (SWAP_CLUSTER_MAX); only after the whole zonelist does it stop if
    /// enough was reclaimed. So direct reclaim on a NUMA machine evicts pages of every node,
    /// most of them mapped by tasks on other sockets.
    fn do_try_to_free_pages(&mut self, cpu: CpuId, nid: NodeId) -> u64 {
        let mut dr = self.direct_reclaim_begin(cpu, nid);
        let mut tail = ReclaimTail::new(self.cpus.len());
        // Departure: the flushes and frees of every batch wait for the end of the call; each
        // batch's putback does not (the free pages are counted when the call returns, the
        // isolated ones must not stay counted across its batches).
        loop {
            let done = self.direct_reclaim_batch(cpu, &mut dr, &mut tail);
            self.finish_putbacks(cpu, &mut tail);
            if done {
                break;
            }
        }
        self.finish_reclaim_tail(cpu, &mut tail);
        self.trace(cpu, || crate::report::trace_log::TraceEvent::DirectReclaimEnd { nr_reclaimed: dr.reclaimed });
        dr.reclaimed
    }

    /// The start of `do_try_to_free_pages()` (ALLOCSTALL is counted here, and the
    /// mm_vmscan_direct_reclaim_begin event written).
    pub fn direct_reclaim_begin(&mut self, cpu: CpuId, nid: NodeId) -> DirectReclaim {
        self.vmstat.count(VmEvent::ALLOCSTALL);
        self.trace(cpu, || crate::report::trace_log::TraceEvent::DirectReclaimBegin);
        DirectReclaim { nid, priority: DEF_PRIORITY, i: 0, node: None, reclaimed: 0, scanned_before: self.vmstat.get(VmEvent::PGSCAN_DIRECT), throttle: Throttle::Check }
    }

    /// `pfmemalloc_watermark_ok()` (3.6 to 4.x; `allow_direct_reclaim()` from 4.11): may a
    /// direct reclaimer of `node` go on? Yes while the node's free pages (NR_FREE_PAGES, the
    /// buddy's: pages on pcp lists do not count) exceed half its min watermark, or when the
    /// node has no reclaimable page (4.2 skips such zones) or kswapd gave it up as hopeless
    /// (4.11+, c73322d098e4; applied to every version here, since the model's kswapd gives up
    /// a node in every version). When not, the node's kswapd is woken ("kswapd must be awake if
    /// processes are being throttled").
    pub(crate) fn allow_direct_reclaim(&mut self, node: usize, now: Ns) -> bool {
        let n = &self.nodes[node];
        if n.kswapd_failures >= MAX_RECLAIM_RETRIES {
            return true;
        }
        let l = &n.lru.lists;
        let file = l[Lru::InactiveFile as usize].len + l[Lru::ActiveFile as usize].len;
        let anon = if self.swap.nr_free() > 0 { l[Lru::InactiveAnon as usize].len + l[Lru::ActiveAnon as usize].len } else { 0 };
        if n.wmark.min == 0 || file + anon == 0 {
            return true;
        }
        let ok = n.nr_free > n.wmark.min / 2;
        if !ok {
            self.wake_kswapd_wait(node, now);
        }
        ok
    }

    /// At the start of a task's step: `throttle_direct_reclaim()` of the direct reclaim its
    /// fault left pending, before the call's first batch (`try_to_free_pages()` runs it
    /// before `do_try_to_free_pages()`). If the allocating node's free pages are at or below
    /// half its min watermark, the task sleeps on the node's `pfmemalloc_wait` until kswapd
    /// wakes it (each pass of balance_pgdat() that leaves the node above that line, and when
    /// kswapd goes to sleep), counted as pgscan_direct_throttle; woken, it checks again. Then
    /// it reclaims as it would have. Returns true if the task went to sleep (the step is spent).
    /// Kernel threads are not throttled; nor is the synchronous path (`do_try_to_free_pages()`
    /// in one step, for allocations that cannot wait for a later step: a departure).
    pub fn throttle_direct_reclaim_step(&mut self, cpu: CpuId, t: Tid) -> bool {
        let Some(dr) = self.task(t).direct_reclaim.as_deref() else { return false };
        let (node, state) = (dr.nid.0 as usize, dr.throttle);
        if state == Throttle::Done {
            return false;
        }
        let now = self.cpus[cpu.0 as usize].clock;
        let wait = self.task(t).mm.is_some() && self.nodes[node].kswapd.is_some() && !self.allow_direct_reclaim(node, now);
        let dr = self.task_mut(t).direct_reclaim.as_deref_mut().expect("checked above");
        if !wait {
            dr.throttle = Throttle::Done;
            return false;
        }
        dr.throttle = Throttle::Waiting;
        if state == Throttle::Check {
            self.vmstat.count(VmEvent::PGSCAN_DIRECT_THROTTLE);
        }
        self.nodes[node].pfmemalloc_wait.push(t);
        self.block_current(cpu, None);
        true
    }

    /// `wake_up_all(&pgdat->pfmemalloc_wait)` by `node`'s kswapd at `now`: after a pass of
    /// balance_pgdat() if the node allows direct reclaim again, or unconditionally when
    /// kswapd goes to sleep (`prepare_kswapd_sleep()`; a woken task that still finds the node
    /// short sleeps again).
    fn wake_pfmemalloc_waiters(&mut self, node: usize, now: Ns, force: bool) {
        if self.nodes[node].pfmemalloc_wait.is_empty() || !(force || self.allow_direct_reclaim(node, now)) {
            return;
        }
        for t in std::mem::take(&mut self.nodes[node].pfmemalloc_wait) {
            self.wake_up(t, now);
        }
    }

    /// Run `dr` up to its next `shrink_inactive_list()` batch (false: more to do) or to its end
    /// (true): at each priority every node of the zonelist (local first) is shrunk, then the
    /// call stops if SWAP_CLUSTER_MAX folios were reclaimed.
    fn direct_reclaim_batch(&mut self, cpu: CpuId, dr: &mut DirectReclaim, tail: &mut ReclaimTail) -> bool {
        let n = self.nodes.len();
        loop {
            let node = (dr.nid.0 as usize + dr.i) % n;
            let mut dn = match dr.node {
                Some(dn) => dn,
                None => {
                    self.shrink_node_begin(cpu, node, dr.priority);
                    DirectNode { list: 0, to_scan: None, reclaimed: 0 }
                }
            };
            let ran = self.direct_node_batch(cpu, node, dr.priority, &mut dn, tail);
            dr.reclaimed += dn.reclaimed - dr.node.map_or(0, |d| d.reclaimed);
            if ran {
                dr.node = Some(dn);
                return false;
            }
            // This shrink_node() is over: the next node, or the end of this priority.
            dr.node = None;
            dr.i += 1;
            if dr.i < n {
                continue;
            }
            dr.i = 0;
            if dr.reclaimed >= SWAP_CLUSTER_MAX as u64 || dr.priority == 0 {
                return true;
            }
            // Before 4.11: "Try to write back as many pages as we just scanned" once more than
            // 1.5 x nr_to_reclaim were scanned (removed by "mm: vmscan: remove old flusher
            // wakeup from direct reclaim path", 4.11).
            let total_scanned = self.vmstat.get(VmEvent::PGSCAN_DIRECT) - dr.scanned_before;
            if self.p.kver < (4, 11) && total_scanned > (SWAP_CLUSTER_MAX + SWAP_CLUSTER_MAX / 2) as u64 {
                self.wakeup_flusher_threads(cpu, total_scanned);
            }
            dr.priority -= 1;
        }
    }

    /// One batch of direct reclaim's `shrink_node()` → `shrink_lruvec()` on `node`: true if a
    /// `shrink_inactive_list()` batch ran, false when this node's shrink is over.
    fn direct_node_batch(&mut self, cpu: CpuId, node: usize, priority: u32, dn: &mut DirectNode, tail: &mut ReclaimTail) -> bool {
        // shrink_lruvec(): direct reclaim at DEF_PRIORITY scans its whole proportional target
        // (`scan_adjusted`, later `proportional_reclaim`; Mel Gorman, 1a501907bbea, 3.16: "it is
        // best to do a batch of work at once"); otherwise it stops once nr_to_reclaim is reached.
        let proportional = priority == DEF_PRIORITY && self.p.kver >= (3, 16);
        loop {
            // get_scan_count(): file always; anon only with free swap or a demotion target
            // (vm.swappiness's balance is not modelled: both are scanned at the same priority).
            let Some((inactive_lru, active_lru)) = self.lists_to_scan(node, dn.list, tail) else { return false };
            // get_scan_count() scans each list in proportion to its size, size >> priority,
            // with no floor: a list shorter than 1 << priority pages is not scanned at this
            // priority. (4.2 forces SWAP_CLUSTER_MAX only for kswapd on a zone it found
            // unreclaimable, and for memcg reclaim; 6.18 only for an offline memcg.)
            let to_scan = match dn.to_scan {
                Some(n) => n,
                None => self.enter_list(cpu, node, inactive_lru, active_lru, priority),
            };
            dn.to_scan = Some(to_scan);
            if to_scan > 0 && (dn.reclaimed < SWAP_CLUSTER_MAX as u64 || proportional) {
                // shrink_inactive_list() (or the rest of one that paused: past its throttle)
                let mut give_up = false;
                if tail.paused.is_none() && self.too_many_isolated(node, inactive_lru) {
                    // Throttled: 4.2 congestion_wait(BLK_RW_ASYNC, HZ/10) in a loop; 5.16+
                    // reclaim_throttle(VMSCAN_THROTTLE_ISOLATED) once, then give up the list
                    // ("stalled"). The task sleeps: its CPU idles. Departure: 4.2's loop
                    // re-checks nothing during its sleep; the reclaimer goes on after one.
                    self.vmstat.count(VmEvent::RECLAIM_THROTTLE_ISOLATED);
                    self.cpus[cpu.0 as usize].clock += self.p.isolated_throttle_ns;
                    give_up = self.p.isolated_throttle_ns < HZ_10_NS;
                }
                if !give_up {
                    match self.shrink_inactive_batch(cpu, node, inactive_lru, to_scan, priority, false, tail) {
                        Some(Batch::Done(taken, stat)) => {
                            dn.to_scan = Some(to_scan.saturating_sub(taken));
                            dn.reclaimed += stat.nr_reclaimed;
                            return true;
                        }
                        Some(Batch::Paused) => return true,
                        None => {}
                    }
                }
            }
            dn.list += 1;
            dn.to_scan = None;
        }
    }

    /// Run `f`, work the current task replays if it ends for lack of memory (a `touch` op's
    /// access, or the rest of a readahead window read after a stepped reclaim): an allocation
    /// in it that needs direct reclaim leaves the reclaim to the task's next steps
    /// ([`Sim::alloc_pages`]), and a readahead window it stopped waits for them too
    /// (`Task::ra_rest`).
    pub(crate) fn replayable<R>(&mut self, cpu: CpuId, f: impl FnOnce(&mut Sim) -> R) -> R {
        self.defer_direct_reclaim = true;
        let r = f(self);
        self.defer_direct_reclaim = false;
        self.direct_reclaim_deferred = false;
        if let (Some(cut), Some(t)) = (self.ra_cut.take(), self.cpus[cpu.0 as usize].current) {
            self.task_mut(t).ra_rest = Some(cut);
        }
        r
    }

    /// At the start of a task's step: one batch of the direct reclaim its fault left pending
    /// (a fault whose access is replayed: [`Sim::alloc_pages`]). Returns whether there was
    /// one (the step is then spent on it). The batch's flush and frees run at the start of the
    /// next step, as kswapd's do ([`ReclaimTail`]); when the reclaim is over, the access is
    /// replayed and its allocation tried again, as `__alloc_pages_slowpath()` does after
    /// `__alloc_pages_direct_reclaim()`.
    pub fn direct_reclaim_step(&mut self, cpu: CpuId, t: Tid) -> bool {
        let Some(mut dr) = self.task_mut(t).direct_reclaim.take() else { return false };
        // The task is in a fault: the profile charges the reclaim under it, as the
        // synchronous path does (less filemap_fault and readahead's frames).
        self.kfn_enter(cpu, KFn::HandleMmFault);
        self.kfn_enter(cpu, KFn::TryToFreePages);
        let mut tail = self.take_reclaim_tail(cpu);
        if self.direct_reclaim_batch(cpu, &mut dr, &mut tail) {
            self.finish_reclaim_tail(cpu, &mut tail);
            self.trace(cpu, || crate::report::trace_log::TraceEvent::DirectReclaimEnd { nr_reclaimed: dr.reclaimed });
            // A call that reclaimed nothing: the next allocation reclaims synchronously (and
            // may end in the OOM killer, after its retries).
            self.task_mut(t).direct_reclaim_failed = dr.reclaimed == 0;
            self.kfn_exit(cpu);
            // __alloc_pages_direct_reclaim() tries the allocation now and, if it fails (the
            // reclaimed pages sit on pcp lists, not counted free), drains every CPU's lists
            // before the retry; the model's allocation is the replayed access that follows.
            if dr.reclaimed > 0 && !self.min_watermark_ok(dr.nid) {
                self.drain_all_pages(cpu);
            }
            // The readahead window the allocation stopped goes on, as the kernel's loop does
            // after its reclaim.
            if let Some(cut) = self.task_mut(t).ra_rest.take() {
                // Its allocations may need reclaim again: that one runs in steps too, and
                // what is left of the window after it.
                self.replayable(cpu, |s| s.page_cache_ra_rest(cpu, cut));
            }
        } else {
            self.task_mut(t).direct_reclaim = Some(dr);
            self.defer_reclaim_tail(cpu, tail);
            self.kfn_exit(cpu);
        }
        self.kfn_exit(cpu);
        true
    }

    /// One step of kswapd for `node` (`balance_pgdat()`); true when kswapd may sleep.
    ///
    /// As balance_pgdat() does (4.2 to 6.18): at the top of each pass, stop if the node is
    /// balanced (`pgdat_balanced()`: the high watermark, WMARK_PROMO with memory tiering);
    /// else `kswapd_shrink_node()` shrinks the node at the current priority with
    /// `nr_to_reclaim` = max(high watermark, SWAP_CLUSTER_MAX) pages: each list's target is
    /// `size >> priority`, and the pass ends when the targets are scanned or `nr_to_reclaim`
    /// pages are reclaimed (kswapd is not `proportional_reclaim`). After the pass the priority
    /// drops if it scanned fewer than `nr_to_reclaim` pages or reclaimed none; below 1,
    /// balance_pgdat() returns, counting a failure if the whole run reclaimed nothing, and
    /// starts again at DEF_PRIORITY: kswapd sleeps only when the node is balanced, or hopeless
    /// after MAX_RECLAIM_RETRIES failed runs (then it is not woken until a reclaim from the
    /// node succeeds; `kswapd_failures` is reset by any). So kswapd
    /// reclaims past the high watermark by up to a pass, and raises its priority until a pass
    /// scans a high watermark's worth.
    ///
    /// A step is one `shrink_inactive_list()` batch (SWAP_CLUSTER_MAX folios): the pass is
    /// kept in [`KswapdPass`] between steps, so other CPUs run between kswapd's batches as
    /// they would. The end of the step's last shrink_folio_list() (its flush and the freeing
    /// after it) runs at the start of kswapd's next step: see [`ReclaimTail`].
    pub fn kswapd_step(&mut self, cpu: CpuId, node: usize) -> KswapdNext {
        // A stall that ended (its timeout, or writeback completions) is over.
        self.wb.throttled[node] = None;
        self.kfn_enter(cpu, KFn::Kswapd);
        // set_reclaim_active() (5.14+): the node's pcp lists stay short while kswapd is in
        // balance_pgdat() (mm/page_alloc.rs `Pcp::free_commit`); cleared when it sleeps.
        self.nodes[node].zone_flags.reclaim_active = true;
        let sleep = self.balance_pgdat(cpu, node);
        self.kfn_exit(cpu);
        // Direct reclaimers throttled on the node: woken after a pass that leaves it above half
        // its min watermark, and when kswapd sleeps.
        if self.wb.throttled[node].is_none() && (sleep || self.nodes[node].kswapd_pass.is_none()) {
            let now = self.cpus[cpu.0 as usize].clock;
            self.wake_pfmemalloc_waiters(node, now, sleep);
        }
        match self.wb.throttled[node] {
            Some(th) => {
                // The stall comes after shrink_folio_list() returned: its flush and frees are
                // done before kswapd sleeps, not left to its next step.
                if let Some(t) = self.cpus[cpu.0 as usize].current {
                    self.finish_task_reclaim_tail(cpu, t);
                }
                KswapdNext::Throttled(th.until)
            }
            None if sleep => {
                self.nodes[node].zone_flags.reclaim_active = false;
                KswapdNext::Sleep
            }
            None => KswapdNext::Run,
        }
    }

    fn balance_pgdat(&mut self, cpu: CpuId, node: usize) -> bool {
        let mut tail = self.take_reclaim_tail(cpu);
        let pass = self.nodes[node].kswapd_pass.take();
        let n = &self.nodes[node];
        if pass.is_none() && n.kswapd_priority == DEF_PRIORITY && n.kswapd_run_reclaimed == 0 {
            // A balance_pgdat() run starts (one that finds the node balanced counts too).
            self.vmstat.count(VmEvent::PAGEOUTRUN);
        }
        let pass = match pass {
            Some(p) => Some(p),
            // The top of balance_pgdat()'s loop.
            None if self.nodes[node].nr_free >= self.kswapd_balance_mark(node) => None,
            None => {
                let prio = self.nodes[node].kswapd_priority;
                self.shrink_node_begin(cpu, node, prio);
                let target = self.nodes[node].wmark.high.max(SWAP_CLUSTER_MAX as u64);
                Some(KswapdPass { list: 0, to_scan: None, scanned: 0, reclaimed: 0, target, file_taken: 0, unqueued_dirty: 0, taken: 0, writeback: 0, immediate: 0 })
            }
        };
        let sleep = match pass {
            None => {
                // Balanced: clear_pgdat_congested() (4.2: the zone's ZONE_DIRTY is cleared).
                self.wb.node_dirty[node] = false;
                self.wb.node_writeback[node] = false;
                let n = &mut self.nodes[node];
                n.kswapd_priority = DEF_PRIORITY;
                n.kswapd_run_reclaimed = 0;
                true
            }
            Some(mut pass) => {
                let prio = self.nodes[node].kswapd_priority;
                if self.kswapd_pass_batch(cpu, node, prio, &mut pass, &mut tail) {
                    self.nodes[node].kswapd_pass = Some(pass);
                    false
                } else {
                    // 6.18 shrink_node(), kswapd: "Allow kswapd to start writing pages during
                    // reclaim" when every file folio the pass took was unqueued dirty.
                    if self.p.kver >= (4, 11) && pass.unqueued_dirty > 0 && pass.unqueued_dirty == pass.file_taken {
                        self.wb.node_dirty[node] = true;
                    }
                    if self.p.kver >= (4, 16) {
                        self.writeback_pressure(cpu, node, pass.taken, pass.writeback, pass.immediate);
                    }
                    let n = &mut self.nodes[node];
                    n.kswapd_run_reclaimed += pass.reclaimed;
                    if pass.scanned >= pass.target && pass.reclaimed > 0 {
                        // The pass did its work at this priority: the next one checks the balance.
                        false
                    } else if prio > 1 {
                        n.kswapd_priority = prio - 1;
                        false
                    } else {
                        // Priority exhausted: balance_pgdat() returns; a run that reclaimed
                        // nothing counts a failure. kswapd_try_to_sleep() sleeps only on a
                        // balanced or hopeless node; otherwise balance_pgdat() starts again at
                        // DEF_PRIORITY.
                        if n.kswapd_run_reclaimed == 0 {
                            n.kswapd_failures += 1;
                        }
                        n.kswapd_priority = DEF_PRIORITY;
                        n.kswapd_run_reclaimed = 0;
                        if n.kswapd_failures >= MAX_RECLAIM_RETRIES {
                            self.finish_reclaim_tail(cpu, &mut tail);
                            true
                        } else {
                            false
                        }
                    }
                }
            }
        };
        self.defer_reclaim_tail(cpu, tail);
        sleep
    }

    /// One batch of kswapd's pass: true while the pass goes on.
    fn kswapd_pass_batch(&mut self, cpu: CpuId, node: usize, prio: u32, pass: &mut KswapdPass, tail: &mut ReclaimTail) -> bool {
        loop {
            let Some((inactive_lru, active_lru)) = self.lists_to_scan(node, pass.list, tail) else { return false };
            let to_scan = match pass.to_scan {
                Some(n) => n,
                None => self.enter_list(cpu, node, inactive_lru, active_lru, prio),
            };
            if to_scan > 0 {
                let batch = self.shrink_inactive_batch(cpu, node, inactive_lru, to_scan, prio, true, tail);
                if let Some(Batch::Paused) = batch {
                    pass.to_scan = Some(to_scan);
                    return true;
                }
                if let Some(Batch::Done(taken, stat)) = batch {
                    pass.scanned += taken as u64;
                    pass.reclaimed += stat.nr_reclaimed;
                    if inactive_lru == Lru::InactiveFile {
                        pass.file_taken += taken as u64;
                        pass.unqueued_dirty += stat.nr_unqueued_dirty;
                    }
                    pass.taken += taken as u64;
                    pass.writeback += stat.nr_writeback;
                    pass.immediate += stat.nr_immediate;
                    pass.to_scan = Some(to_scan.saturating_sub(taken));
                    // Before 4.16 a batch with immediate folios stalls kswapd (kswapd_step()
                    // blocks it); a pass that goes on resumes after the stall.
                    return pass.reclaimed < pass.target;
                }
            }
            pass.list += 1;
            pass.to_scan = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(preset: &str, ops: &str) -> Sim {
        let text = format!("[machine]\ncpus = 2\nmem_per_node_mib = 64\n[kernel]\npreset = \"{preset}\"\n[[workload.thread]]\ncpu = 0\nops = \"\"\"\n{ops}\n\"\"\"\n");
        let cfg = crate::config::load_str("vmscan.toml", &text, &[]).unwrap();
        Sim::build(&cfg).unwrap()
    }

    /// Node 0 filled with page cache to just above its min watermark (the LRU batch drained),
    /// the workload's task current on CPU 0; `locked`: every page locked, as under readahead
    /// I/O (reclaim keeps them).
    fn near_min(preset: &str, locked: bool) -> (Sim, CpuId, Tid) {
        let mut s = sim(preset, "sleep 1us");
        let cpu = CpuId(0);
        let t = Tid((s.tasks.len() - 1) as u32);
        s.cpus[0].current = Some(t);
        let filler = s.file_get_or_create("filler", 1 << 20);
        let mut off = 0;
        while s.nodes[0].nr_free > s.nodes[0].wmark.min + 8 {
            let pfn = s.page_cache_alloc_add(cpu, filler, off).expect("above min");
            if locked {
                s.frames[pfn.0 as usize].flags |= pg::LOCKED;
            }
            off += 1;
        }
        s.lru_add_drain(cpu);
        // No other CPU has anything queued: a stepped batch runs to its end in one step
        // (`PausedBatch`; `step_horizon` is Ns::MAX outside the event loop).
        while s.events.pop().is_some() {}
        (s, cpu, t)
    }

    /// Before 4.10 the inactive file list is kept at half the file pages; from 4.10 (and for
    /// anon, in every version, but from the node's size before 4.10) at 1 / int_sqrt(10 x GB).
    #[test]
    fn inactive_is_low_per_version() {
        let set = |s: &mut Sim, lru: Lru, len: u64| s.nodes[0].lru.lists[lru as usize].len = len;
        // 3.8 GB of file pages, 30% inactive: int_sqrt(10 * 3) = 5.
        for (preset, low) in [("linux-4.2", true), ("linux-4.3", true), ("linux-4.14", false), ("linux-6.18", false)] {
            let mut s = sim(preset, "sleep 1us");
            set(&mut s, Lru::InactiveFile, 300_000);
            set(&mut s, Lru::ActiveFile, 700_000);
            assert_eq!(s.inactive_is_low(0, Lru::InactiveFile), low, "{preset}");
            // 10% inactive is low everywhere (10% * 5 < 90%).
            set(&mut s, Lru::InactiveFile, 100_000);
            set(&mut s, Lru::ActiveFile, 900_000);
            assert!(s.inactive_is_low(0, Lru::InactiveFile), "{preset}");
            // Anon, 30% inactive: 4.2's ratio comes from the 64 MiB node (1), 6.18's from the
            // 3.8 GB of the lists (5).
            set(&mut s, Lru::InactiveAnon, 300_000);
            set(&mut s, Lru::ActiveAnon, 700_000);
            assert_eq!(s.inactive_is_low(0, Lru::InactiveAnon), low, "{preset}");
        }
        assert_eq!(int_sqrt(30), 5);
        assert_eq!(int_sqrt(u32::MAX as u64 + 1), 1 << 16);
    }

    /// The rest of a readahead window, read when a fault's stepped direct reclaim ends, may
    /// need reclaim again: that reclaim is left to the task's next steps too (a new
    /// `DirectReclaim`, the window's rest kept for after it), not run in one step. Session 17's
    /// version ran it synchronously, and those 240-340 ms steps kept the lock calendars large
    /// (docs/performance.md, "Session 18").
    #[test]
    fn the_readahead_rest_defers_its_own_reclaim() {
        // Page cache down to just above the min watermark, all of it reclaimable.
        let (mut s, cpu, t) = near_min("linux-4.2", false);
        let rest = s.file_get_or_create("rest", 1024);
        let dr = s.direct_reclaim_begin(cpu, NodeId(0));
        s.task_mut(t).direct_reclaim = Some(Box::new(dr));
        s.task_mut(t).ra_rest = Some(crate::mm::readahead::RaCut { file: rest, start: 0, end: 512, mark: None });
        let mut steps = 0;
        while s.task(t).ra_rest.is_some_and(|c| c.start == 0) && steps < 100_000 {
            assert!(s.direct_reclaim_step(cpu, t));
            steps += 1;
        }
        // The reclaim ended, the window was read until memory ran short again, and then...
        let cut = s.task(t).ra_rest.expect("the rest of the window waits for the next reclaim");
        assert!(cut.start > 0 && cut.end == 512, "{cut:?}");
        assert!(s.files[rest.0 as usize].page(cut.start - 1).is_some() && s.files[rest.0 as usize].page(cut.start).is_none());
        // ...the next reclaim was begun, not run: it is the task's next steps.
        assert!(s.task(t).direct_reclaim.is_some(), "the window's reclaim is deferred too");
        assert_eq!(s.vmstat.get(VmEvent::ALLOCSTALL), 2);
    }

    /// A stepped reclaim batch puts back what it did not reclaim only after its flush and
    /// frees, at the start of the task's next step, as `shrink_inactive_list()` calls
    /// `move_folios_to_lru()` after `shrink_folio_list()` returned: until then the batch's folios
    /// count in NR_ISOLATED, and the putback's LRU lock section is booked at that step's clock,
    /// charged in the profile under the functions the reclaim ran under.
    #[test]
    fn a_stepped_batch_puts_back_after_its_flush() {
        // Every page locked: shrink_folio_list() keeps them all.
        let (mut s, cpu, t) = near_min("linux-4.2", true);
        let lru = |s: &Sim| s.locks.stats[crate::kernel::locking::LockClass::LruLock as usize].write.acquisitions;
        let before = lru(&s);
        let dr = s.direct_reclaim_begin(cpu, NodeId(0));
        s.task_mut(t).direct_reclaim = Some(Box::new(dr));
        assert!(s.direct_reclaim_step(cpu, t));
        // The isolation only; the batch is still isolated and its putback pending.
        assert_eq!(lru(&s), before + 1);
        let tail = s.task(t).reclaim_tail.as_ref().expect("the batch's end waits for the next step");
        assert_eq!(tail.putback.len(), 1);
        let Putback { taken, back, .. } = tail.putback[0];
        assert!(taken > 0 && back == taken, "{:?}", tail.putback);
        assert_eq!(s.nodes[0].lru.nr_isolated[1], taken as u64);
        let at = s.cpus[0].clock;
        let charged = s.prof.children_ns(KFn::TryToFreePages);
        assert!(s.finish_task_reclaim_tail(cpu, t));
        assert!(s.prof.children_ns(KFn::TryToFreePages) > charged, "the reclaim's end is charged under try_to_free_pages, in the next step too");
        assert_eq!(lru(&s), before + 2);
        assert_eq!(s.nodes[0].lru.nr_isolated[1], 0);
        // The putback's section is the calendar's last hold, requested at the step's clock.
        let (req, _, end) = s.locks.last_hold(crate::kernel::locking::LockId::Lru(0)).expect("a hold");
        assert!(req == at && end > at, "putback hold requested at {req}, ends at {end}; the step began at {at}");
    }

    /// A stepped batch whose CPU runs past the next other CPU's time pauses between two
    /// folios: the task's next steps go on with it (the tail is not ended meanwhile, and the
    /// batch's folios stay isolated), one folio a step while the CPU stays ahead, and the batch
    /// ends as the same batch run in one step ends: the same folios reclaimed, one putback.
    #[test]
    fn a_batch_pauses_while_its_cpu_is_ahead() {
        let run = |pause: bool| {
            let (mut s, cpu, t) = near_min("linux-4.2", false);
            if pause {
                // Another CPU acts at time 0: after any work this one is ahead of it.
                s.step_horizon = 0;
            }
            let dr = s.direct_reclaim_begin(cpu, NodeId(0));
            s.task_mut(t).direct_reclaim = Some(Box::new(dr));
            assert!(s.direct_reclaim_step(cpu, t));
            let mut steps = 1;
            while s.task(t).reclaim_tail.as_ref().is_some_and(|r| r.paused.is_some()) {
                let taken = s.task(t).reclaim_tail.as_ref().unwrap().paused.as_ref().unwrap().taken;
                assert!(!s.task(t).reclaim_tail.as_ref().unwrap().paused.as_ref().unwrap().rest().is_empty());
                assert_eq!(s.nodes[0].lru.nr_isolated[1], taken as u64, "still isolated");
                assert!(!s.finish_task_reclaim_tail(cpu, t), "a paused batch's tail is not ended");
                assert!(s.direct_reclaim_step(cpu, t));
                steps += 1;
            }
            let tail = s.task(t).reclaim_tail.as_ref().expect("the batch's end");
            assert_eq!(tail.putback.len(), 1, "one batch");
            let Putback { taken, back, .. } = tail.putback[0];
            (steps, taken, back, s.vmstat.get(VmEvent::PGSTEAL_DIRECT), s.vmstat.get(VmEvent::PGSCAN_DIRECT))
        };
        let (steps, taken, back, steal, scan) = run(true);
        assert_eq!(steps, taken as usize, "one folio a step");
        assert_eq!((1, taken, back, steal, scan), run(false));
        assert!(steal > 0 && scan == taken as u64);
    }

    /// A stepped tail whose `try_to_unmap_flush()` takes its CPU past the other CPUs' next
    /// event frees and puts back in the task's next step (`Sim::tail_flush_first`); otherwise
    /// the whole tail ends in one step, as a synchronous caller's always does.
    #[test]
    fn a_tails_frees_wait_for_the_next_step_after_a_flush_that_ran_ahead() {
        for (ahead, stepped) in [(false, true), (true, true), (true, false)] {
            let (mut s, cpu, t) = near_min("linux-4.3", false);
            // A folio reclaim took off the LRU, with only its isolation reference left, and a
            // batched flush owed to CPU 1.
            let pfn = s.alloc_page(NodeId(0)).expect("a free page");
            let mut tail = Box::new(ReclaimTail::new(s.cpus.len()));
            tail.stepped = stepped;
            tail.batch.flush_required = true;
            tail.batch.cpumask.set(CpuId(1));
            tail.free_folios.push(pfn);
            s.task_mut(t).reclaim_tail = Some(tail);
            if ahead {
                // Another CPU acts at time 0: after the flush's wait this one is ahead of it.
                s.step_horizon = 0;
            }
            let irqs = s.cpus[1].stats.irq_tlb_count;
            assert!(s.finish_task_reclaim_tail(cpu, t));
            assert_eq!(s.cpus[1].stats.irq_tlb_count, irqs + 1, "flushed once");
            let split = ahead && stepped;
            match s.task(t).reclaim_tail.as_deref() {
                Some(rest) => {
                    assert!(split, "left for the next step only when ahead and stepped");
                    assert!(!rest.batch.flush_required, "the flush is done");
                    assert_eq!(rest.free_folios, vec![pfn], "not freed yet");
                    assert_eq!(s.frame(pfn).refcount, 1);
                    assert!(s.finish_task_reclaim_tail(cpu, t), "the next step ends it");
                    assert!(s.task(t).reclaim_tail.is_none());
                    assert_eq!(s.cpus[1].stats.irq_tlb_count, irqs + 1, "not flushed again");
                }
                None => assert!(!split, "ended in one step"),
            }
            assert_eq!(s.frame(pfn).refcount, 0, "freed");
        }
    }

    /// `throttle_direct_reclaim()`: a user task whose node is at or below half its min
    /// watermark sleeps on pfmemalloc_wait before its first reclaim batch (counted once) and is
    /// woken by kswapd; woken while the node is still short, it sleeps again.
    #[test]
    fn direct_reclaim_is_throttled_until_kswapd_wakes_it() {
        for preset in ["linux-4.2", "linux-6.18"] {
            let (mut s, cpu, t) = near_min(preset, false);
            assert!(s.task(t).mm.is_some(), "the workload's task");
            // Below half the min watermark (allocations that may dip into the reserves).
            let mut taken = Vec::new();
            while s.nodes[0].nr_free > s.nodes[0].wmark.min / 2 {
                taken.push(s.alloc_pages_node_nocheck(NodeId(0), 0).expect("free pages"));
            }
            let kswapd = s.nodes[0].kswapd.expect("kswapd");
            let dr = s.direct_reclaim_begin(cpu, NodeId(0));
            s.task_mut(t).direct_reclaim = Some(Box::new(dr));
            assert!(s.throttle_direct_reclaim_step(cpu, t), "{preset}: throttled");
            assert_eq!(s.vmstat.get(VmEvent::PGSCAN_DIRECT_THROTTLE), 1);
            assert_eq!(s.task(t).state, TaskState::Blocked);
            assert_eq!(s.nodes[0].pfmemalloc_wait, vec![t]);
            // (kswapd is awake already: the filling woke it below the low watermark.)
            assert_eq!(s.task(kswapd).state, TaskState::Runnable);
            // Woken while the node is still short (kswapd going to sleep wakes everyone): the
            // task checks again and sleeps again, not counted twice.
            s.nodes[0].pfmemalloc_wait.clear();
            s.task_mut(t).state = TaskState::Runnable;
            s.cpus[0].current = Some(t);
            assert!(s.throttle_direct_reclaim_step(cpu, t));
            assert_eq!(s.vmstat.get(VmEvent::PGSCAN_DIRECT_THROTTLE), 1);
            assert_eq!(s.nodes[0].pfmemalloc_wait, vec![t]);
            // Memory comes back; kswapd's pass (here it finds the node balanced and sleeps)
            // wakes the task, which then reclaims.
            for p in taken {
                s.free_page(p);
            }
            s.drain_pcp(0);
            assert!(s.nodes[0].nr_free > s.nodes[0].wmark.min / 2);
            let kcpu = CpuId(1);
            s.cpus[1].current = Some(kswapd);
            while !matches!(s.kswapd_step(kcpu, 0), KswapdNext::Sleep) {}
            assert!(s.nodes[0].pfmemalloc_wait.is_empty());
            assert_eq!(s.task(t).state, TaskState::Runnable, "{preset}: kswapd woke it");
            s.cpus[0].current = Some(t);
            assert!(!s.throttle_direct_reclaim_step(cpu, t), "{preset}: the node is above half its min now");
            assert!(s.direct_reclaim_step(cpu, t), "the reclaim goes on");
            assert_eq!(s.vmstat.get(VmEvent::PGSCAN_DIRECT_THROTTLE), 1);
        }
    }

    /// A zero-fill fault's folio starts on the active anon list before 5.9 and on the inactive
    /// one from 5.9.
    #[test]
    fn new_anon_folios_start_active_before_5_9() {
        for (preset, active) in [("linux-4.2", true), ("linux-4.14", true), ("linux-5.12", false), ("linux-6.18", false)] {
            let mut s = sim(preset, "mmap a 64\ntouch a write\nsleep forever");
            s.run(|_| {});
            assert!(s.workload_errors.is_empty());
            s.lru_add_drain(CpuId(0));
            let l = &s.nodes[0].lru.lists;
            let (ia, aa) = (l[Lru::InactiveAnon as usize].len, l[Lru::ActiveAnon as usize].len);
            // 64 pages of the mapping (plus the process's stack).
            if active {
                assert!(aa >= 64 && ia == 0, "{preset}: {ia} inactive, {aa} active");
            } else {
                assert!(ia >= 64 && aa == 0, "{preset}: {ia} inactive, {aa} active");
            }
        }
    }
}
