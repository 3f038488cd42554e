//! Dirty page-cache writeback: the flusher (fs/fs-writeback.c, `wb_workfn()`), the dirty
//! counter and background threshold (mm/page-writeback.c), and the per-node "reclaim met
//! unqueued dirty folios" flag reclaim uses to let kswapd write (PGDAT_DIRTY; ZONE_DIRTY before
//! 4.8).
//!
//! What reclaim does with a dirty file folio (mm/vmscan.rs, `shrink_folio_list()`) depends on
//! the version, and rests on the flusher below writing them:
//! - direct reclaim never writes one: it sets PG_reclaim and keeps it on the inactive list
//!   (before 4.11) or activates it (4.11+, "mm: vmscan: move dirty pages out of the way until
//!   they're flushed", c55e8d035b28);
//! - kswapd writes it only when the node is flagged dirty, and from 4.11 only a folio it has
//!   already marked PG_reclaim once ("mm: vmscan: only write dirty pages that the scanner has
//!   seen twice", 4eda48235011);
//! - the flusher is woken by reclaim: before 4.11 from `do_try_to_free_pages()` once direct
//!   reclaim scanned more than 1.5 x SWAP_CLUSTER_MAX pages (asking for that many); from 4.11
//!   from `shrink_inactive_list()` when every folio it took was dirty and not under writeback
//!   ("mm: vmscan: kick flushers when we encounter dirty pages on the LRU", asking for all).
//!
//! The flusher is one kernel thread (the bdi's `wb_workfn` worker; the model has one file
//! device), created on the CPU of the first task that dirties a file page. Its work, in the
//! order the kernel runs it: pages asked for by reclaim, background writeback while the dirty
//! count is above `vm.dirty_background_ratio` of dirtyable memory (free plus file LRU pages,
//! `global_dirtyable_memory()`), and every `vm.dirty_writeback_centisecs` the folios dirtied
//! more than `vm.dirty_expire_centisecs` ago (`wb_check_old_data_flush()`). Each folio it
//! writes is cleaned first (`folio_clear_dirty_for_io()` → `folio_mkclean()`: every mapping
//! PTE that is writable or dirty is write-protected and cleaned with `ptep_clear_flush()`, one
//! shootdown each), then written; the worker sleeps for the batch's I/O. A written folio marked
//! PG_reclaim is rotated to the tail of the inactive list (`folio_rotate_reclaimable()`; from
//! 4.11 an active one is deactivated on the way), so reclaim finds it clean next.
//!
//! The flusher's writes are asynchronous, as the kernel's: a folio it writes is clean and under
//! writeback (PG_writeback, meminfo's `Writeback`) from the start of its I/O until the batch
//! completes on the device (`folio_end_writeback()`, [`Sim::wb_end_io`]), which is when a
//! PG_reclaim folio is rotated. Reclaim that meets a folio under writeback keeps it (before
//! 4.11) or activates it (4.11+), marked PG_reclaim (`nr_writeback`); kswapd meeting one already
//! marked on a node flagged PGDAT_WRITEBACK (ZONE_WRITEBACK before 4.8: reclaim found every
//! folio it took under writeback) counts it `nr_immediate` and stalls: 4.2 to 5.15
//! `congestion_wait(BLK_RW_ASYNC, HZ/10)`, 5.16+ `reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)`,
//! which writeback completions end early (`acct_reclaim_writeback()`: more than
//! SWAP_CLUSTER_MAX pages written on the node per throttled task). The flag and the stall are
//! per `shrink_inactive_list()` batch before 4.16 and per kswapd `shrink_node()` pass from 4.16
//! (e3c1ac586c99, "mm/vmscan: don't change pgdat state on base of a single LRU list state").
//!
//! Departures, stated: the flusher writes folios in the order they became dirty (the kernel
//! goes inode by inode, oldest dirtied inode first, each in index order); a batch's writes end
//! together when the device completes the last of them, and are seen by the first step (the
//! flusher's or a reclaimer's) at or after that time, not from the completion interrupt;
//! msync(MS_SYNC) writes synchronously (no window); `congestion_wait()`
//! sleeps its whole timeout (no request-queue congestion is modelled, as with blk-mq, which
//! never sets it); 4.16+'s LRUVEC_CONGESTED stall of direct reclaim is not modelled; migration
//! of a folio under writeback fails (MIGRATE_ASYNC's -EBUSY) also for move_pages(), which waits
//! in the kernel; writers are not throttled (`balance_dirty_pages()` above the dirty limit is
//! not modelled: only its background-writeback kick is).

use std::collections::VecDeque;

use crate::kernel::locking::{LockId, Mode};
use crate::mm::vmstat::VmEvent;
use crate::sim::{pg, Sim, TaskState};
use crate::types::*;
use crate::workload::{Body, Program};

/// Folios the flusher writes per step (a `writeback_sb_inodes()` chunk is up to
/// MAX_WRITEBACK_PAGES = 1024; smaller steps let other CPUs run between them).
pub const WB_BATCH: usize = 32;

/// The writeback state of the machine's one file device.
#[derive(Clone, Debug, Default)]
pub struct Writeback {
    /// File folios in the order they became dirty, with the time: the flusher's queue. An
    /// entry whose folio was cleaned or freed meanwhile is skipped when it comes up; one whose
    /// frame is dirty again (redirtied after kswapd wrote it, or reused by another file page)
    /// is written at its old place and time, so such a page may be written early (a departure).
    pub dirty: VecDeque<(Pfn, Ns)>,
    /// NR_FILE_DIRTY.
    pub nr_dirty: u64,
    /// Pages reclaim asked for (`wakeup_flusher_threads()`) not yet written.
    pub to_write: u64,
    /// The flusher thread, created when a file page is first dirtied.
    pub flusher: Option<Tid>,
    /// When the flusher's last batch of writes completes: it does not write again before.
    pub busy_until: Ns,
    /// PGDAT_DIRTY per node (ZONE_DIRTY before 4.8; one zone per node).
    pub node_dirty: Vec<bool>,
    /// The folios of the flusher's batch in flight: under writeback until `busy_until`.
    pub in_flight: Vec<Pfn>,
    /// kswapd's `pageout()` writes in flight: when each request completes, and its folios.
    pub pageout: Vec<(Ns, Vec<Pfn>)>,
    /// PGDAT_WRITEBACK per node (ZONE_WRITEBACK before 4.8).
    pub node_writeback: Vec<bool>,
    /// NR_THROTTLED_WRITTEN per node: folios whose writeback ended there.
    pub throttled_written: Vec<u64>,
    /// kswapd stalled on writeback, per node ([`Sim::reclaim_throttle_writeback`]).
    pub throttled: Vec<Option<Throttled>>,
    /// Timer wake-ups made void because writeback completions woke the task first: (task,
    /// time). The run loop drops a `Wake` event that matches one.
    pub cancelled_wakes: Vec<(u32, Ns)>,
}

/// A kswapd asleep in `reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK)` or `congestion_wait()`.
#[derive(Clone, Copy, Debug)]
pub struct Throttled {
    pub task: Tid,
    /// `pgdat->nr_reclaim_start`: NR_THROTTLED_WRITTEN when the stall began.
    pub start_written: u64,
    /// The timeout (HZ/10).
    pub until: Ns,
}

impl Writeback {
    pub fn new(nodes: usize) -> Self {
        Writeback { node_dirty: vec![false; nodes], node_writeback: vec![false; nodes], throttled_written: vec![0; nodes], throttled: vec![None; nodes], ..Default::default() }
    }
}

impl Sim {
    /// `folio_mark_dirty()`: a clean file folio becomes dirty and joins the flusher's queue;
    /// `balance_dirty_pages_ratelimited()` then kicks background writeback above its threshold.
    /// (Anon folios only get the flag: swap-out writes them from reclaim.)
    pub fn folio_mark_dirty(&mut self, cpu: CpuId, pfn: Pfn) {
        let f = self.frame_mut(pfn);
        if f.flags & pg::DIRTY != 0 {
            return;
        }
        f.flags |= pg::DIRTY;
        if f.flags & pg::FILE == 0 {
            return;
        }
        let now = self.now(cpu);
        self.wb.nr_dirty += 1;
        self.wb.dirty.push_back((pfn, now));
        self.vmstat.count(VmEvent::NR_DIRTIED);
        match self.wb.flusher {
            // The first dirty data of the device: `wb_wakeup_delayed()` arms the periodic
            // writeback (and the first time, the thread is created).
            None => self.start_flusher(cpu, now + self.p.dirty_writeback_ns),
            Some(t) if self.wb.nr_dirty == 1 => self.events.push(now + self.p.dirty_writeback_ns, crate::engine::EventKind::Wake, t.0),
            Some(_) if self.wb.nr_dirty > self.dirty_background_thresh() => self.wake_flusher(now),
            Some(_) => {}
        }
    }

    /// The dirty flag of a file folio goes (written, or dropped with the folio).
    pub fn folio_clear_dirty(&mut self, pfn: Pfn) {
        let f = self.frame_mut(pfn);
        if f.flags & pg::DIRTY == 0 {
            return;
        }
        f.flags &= !pg::DIRTY;
        if f.flags & pg::FILE != 0 {
            self.wb.nr_dirty -= 1;
        }
    }

    /// A migrated dirty file folio: its queue entry now names `dst` (the old one is skipped).
    pub fn writeback_migrated(&mut self, cpu: CpuId, dst: Pfn) {
        let f = self.frame(dst);
        if f.flags & (pg::FILE | pg::DIRTY) == pg::FILE | pg::DIRTY {
            let now = self.now(cpu);
            self.wb.dirty.push_back((dst, now));
        }
    }

    /// `global_dirtyable_memory()` x `vm.dirty_background_ratio` / 100: free pages plus the file
    /// LRU lists, over all nodes.
    pub fn dirty_background_thresh(&self) -> u64 {
        let dirtyable: u64 = self
            .nodes
            .iter()
            .map(|n| n.nr_free + n.lru.lists[crate::mm::vmscan::Lru::InactiveFile as usize].len + n.lru.lists[crate::mm::vmscan::Lru::ActiveFile as usize].len)
            .sum();
        dirtyable * self.p.dirty_background_ratio / 100
    }

    /// `wakeup_flusher_threads()` from reclaim, asking for `nr_pages` (4.11+: all dirty pages).
    pub fn wakeup_flusher_threads(&mut self, cpu: CpuId, nr_pages: u64) {
        if self.wb.flusher.is_none() {
            return;
        }
        self.wb.to_write = self.wb.to_write.max(nr_pages.min(self.wb.nr_dirty));
        let now = self.now(cpu);
        self.wake_flusher(now);
    }

    fn wake_flusher(&mut self, now: Ns) {
        if let Some(t) = self.wb.flusher {
            if self.task(t).state == TaskState::Blocked {
                self.wake_up(t, now);
            }
        }
    }

    /// The flusher kernel thread (no mm), asleep until `wake_at`.
    fn start_flusher(&mut self, cpu: CpuId, wake_at: Ns) {
        let prog = Program { body: Body::Flusher, file: "flusher".into(), released: false };
        let t = self.new_task(u32::MAX - 4096, None, cpu, None, prog);
        self.stop_counting(t);
        self.task_mut(t).state = TaskState::Blocked;
        self.events.push(wake_at, crate::engine::EventKind::Wake, t.0);
        self.wb.flusher = Some(t);
    }

    /// One step of the flusher (`wb_workfn()` → `wb_do_writeback()`): write up to [`WB_BATCH`]
    /// folios that reclaim's request, background writeback or expiry call for, then sleep for
    /// their I/O. With nothing to write it sleeps until the next periodic writeback while dirty
    /// folios remain, else until woken. Returns when to wake (None: until woken).
    pub fn flusher_step(&mut self, cpu: CpuId) -> Option<Ns> {
        let now = self.now(cpu);
        if now < self.wb.busy_until {
            // Woken while its writes are in flight (a new request or background kick): those
            // complete first.
            return Some(self.wb.busy_until);
        }
        self.wb_end_io(cpu);
        self.kfn_enter(cpu, crate::kernel::profile::KFn::WbWorkfn);
        let bg = self.dirty_background_thresh();
        let mut written = 0usize;
        while written < WB_BATCH {
            let Some(&(pfn, dirtied)) = self.wb.dirty.front() else { break };
            let f = self.frame(pfn);
            if f.flags & (pg::FILE | pg::DIRTY) != pg::FILE | pg::DIRTY {
                // Cleaned (by reclaim's pageout) or freed since it was queued.
                self.wb.dirty.pop_front();
                continue;
            }
            let expired = dirtied + self.p.dirty_expire_ns <= now;
            if self.wb.to_write == 0 && self.wb.nr_dirty <= bg && !expired {
                break;
            }
            self.wb.dirty.pop_front();
            self.writepage(cpu, pfn, true);
            self.wb.to_write = self.wb.to_write.saturating_sub(1);
            written += 1;
        }
        self.kfn_exit(cpu);
        if self.wb.dirty.is_empty() {
            self.wb.to_write = 0;
        }
        if written > 0 {
            let io = self.submit_write(cpu, crate::block::Dev::File, written as u64);
            self.io_wait(cpu, io);
            self.wb.busy_until = self.now(cpu) + crate::sim::round_ns(io);
            return None;
        }
        // Nothing due now: the periodic writeback comes back while dirty folios remain.
        (self.wb.nr_dirty > 0).then(|| now + self.p.dirty_writeback_ns)
    }

    /// msync(MS_SYNC) of `[start, start + pages)` in `mm`: for each shared file VMA in the range,
    /// `vfs_fsync_range()` writes the file's dirty pages there (`file_write_and_wait_range()`:
    /// each cleaned with `folio_mkclean()`, as the flusher does) and the caller sleeps until the
    /// writes complete. Private and anon mappings have nothing to sync (6.18 `msync()` calls
    /// `vfs_fsync_range()` for VM_SHARED file VMAs only).
    pub fn msync_range(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64) {
        let end = start + pages;
        let vmas: Vec<(u64, u64, FileId, u64)> = self
            .mm(mm)
            .vmas
            .range(..end)
            .filter_map(|(_, v)| match v.backing {
                crate::sim::Backing::File { file, pgoff } if v.shared() && v.end > start => Some((v.start.max(start), v.end.min(end), file, pgoff + v.start.max(start) - v.start)),
                _ => None,
            })
            .collect();
        let mut written = 0u64;
        for (s, e, file, pgoff) in vmas {
            for off in pgoff..pgoff + (e - s) {
                let Some(pfn) = self.files[file.0 as usize].page(off) else { continue };
                if self.frame(pfn).flags & pg::DIRTY != 0 {
                    self.writepage(cpu, pfn, false);
                    written += 1;
                }
            }
        }
        if written > 0 {
            let io = self.submit_write(cpu, crate::block::Dev::File, written);
            self.io_wait(cpu, io);
        }
    }

    /// `folio_clear_dirty_for_io()` + the filesystem's writepage for one folio: clean every
    /// mapping PTE (`folio_mkclean()`), clear the flag, count it written. With `async_io` (the
    /// flusher) the folio is under writeback until its batch completes ([`Sim::wb_end_io`]);
    /// otherwise (msync, which waits for the write) it ends here, and a PG_reclaim folio is
    /// rotated to the inactive tail at once.
    fn writepage(&mut self, cpu: CpuId, pfn: Pfn, async_io: bool) {
        if self.frame(pfn).mapcount > 0 {
            self.folio_mkclean(cpu, pfn);
        }
        if self.oracle.is_some() {
            // No CPU may still be able to write the folio through a cached dirty writable
            // entry once its I/O starts (a reclaim that unmapped it may not have flushed yet).
            self.oracle_writeback(cpu, pfn);
        }
        self.folio_clear_dirty(pfn);
        // The filesystem's writepages for this folio (cost.writepage_ns).
        self.charge_sys(cpu, self.p.writepage_ns);
        self.vmstat.count(VmEvent::NR_WRITTEN);
        if async_io {
            // folio_start_writeback()
            self.frame_mut(pfn).flags |= pg::WRITEBACK;
            self.wb.in_flight.push(pfn);
        } else {
            self.folio_end_writeback(cpu, pfn);
        }
    }

    /// The flusher's batch in flight completes if its time has come (by the clock of `cpu`):
    /// `folio_end_writeback()` for each folio, then `acct_reclaim_writeback()` wakes a kswapd
    /// stalled on a node where more than SWAP_CLUSTER_MAX folios finished since it stalled.
    pub fn wb_end_io(&mut self, cpu: CpuId) {
        let now = self.now(cpu);
        let flusher_done = !self.wb.in_flight.is_empty() && now >= self.wb.busy_until;
        if !flusher_done && !self.wb.pageout.iter().any(|&(done, _)| done <= now) {
            return;
        }
        let mut ended = if flusher_done { std::mem::take(&mut self.wb.in_flight) } else { Vec::new() };
        // kswapd's writes, in the order they were submitted.
        let mut i = 0;
        while i < self.wb.pageout.len() {
            if self.wb.pageout[i].0 <= now {
                ended.extend(self.wb.pageout.remove(i).1);
            } else {
                i += 1;
            }
        }
        for pfn in ended {
            if self.frame(pfn).flags & (pg::FILE | pg::WRITEBACK) != pg::FILE | pg::WRITEBACK {
                continue;
            }
            self.frame_mut(pfn).flags &= !pg::WRITEBACK;
            let node = self.pfn_to_nid(pfn);
            self.wb.throttled_written[node] += 1;
            self.folio_end_writeback(cpu, pfn);
        }
        for node in 0..self.wb.throttled.len() {
            let Some(th) = self.wb.throttled[node] else { continue };
            // 5.16+: writeback completions may end the stall early.
            if self.p.kver >= (5, 16) && self.wb.throttled_written[node] - th.start_written > crate::mm::vmscan::SWAP_CLUSTER_MAX as u64 {
                self.wb.throttled[node] = None;
                if self.task(th.task).state == TaskState::Blocked {
                    // Woken now; the timeout's wake-up is void.
                    self.wb.cancelled_wakes.push((th.task.0, th.until));
                    let now = self.now(cpu);
                    self.wake_up(th.task, now);
                }
            }
        }
    }

    /// The write kswapd's `pageout()` started for `pfns` (clean, under writeback, kept on the
    /// inactive list): one request on the file device, which kswapd does not wait for. The
    /// folios' writeback ends when it completes, seen by the next reclaim or flusher step at or
    /// after that time ([`Sim::wb_end_io`]).
    pub(crate) fn pageout_submit(&mut self, cpu: CpuId, pfns: Vec<Pfn>) {
        let io = self.submit_write(cpu, crate::block::Dev::File, pfns.len() as u64);
        let done = self.now(cpu) + crate::sim::round_ns(io);
        self.wb.pageout.push((done, pfns));
    }

    /// Is a timer wake-up of `task` at `at` void (the task was woken early, [`Sim::wb_end_io`])?
    /// Removes the entry it matches.
    pub fn wake_cancelled(&mut self, task: u32, at: Ns) -> bool {
        if self.wb.cancelled_wakes.is_empty() {
            return false;
        }
        match self.wb.cancelled_wakes.iter().position(|&(t, w)| t == task && w == at) {
            Some(i) => {
                self.wb.cancelled_wakes.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// `reclaim_throttle(pgdat, VMSCAN_THROTTLE_WRITEBACK)` (5.16+) or
    /// `congestion_wait(BLK_RW_ASYNC, HZ/10)` (before) for kswapd of `node`, the current task
    /// of `cpu`: it sleeps until HZ/10 from now, 5.16+ less if writeback completes meanwhile.
    /// Returns the timeout; the caller blocks the task until then.
    pub fn reclaim_throttle_writeback(&mut self, cpu: CpuId, node: usize) -> Ns {
        self.vmstat.count(VmEvent::RECLAIM_THROTTLE_WRITEBACK);
        let task = self.cpus[cpu.0 as usize].current.expect("kswapd runs");
        let until = self.now(cpu) + crate::mm::vmscan::HZ_10_NS;
        self.wb.throttled[node] = Some(Throttled { task, start_written: self.wb.throttled_written[node], until });
        until
    }

    /// `folio_end_writeback()` after the flag is cleared: a PG_reclaim folio goes to the tail
    /// of the inactive list.
    fn folio_end_writeback(&mut self, cpu: CpuId, pfn: Pfn) {
        if self.frame(pfn).flags & pg::RECLAIM != 0 {
            self.frame_mut(pfn).flags &= !pg::RECLAIM;
            self.folio_rotate_reclaimable(cpu, pfn);
        }
    }

    /// `folio_mkclean()` → `page_mkclean_one()`: every PTE mapping the folio that is writable
    /// or dirty is cleared and flushed (`ptep_clear_flush()`), then set again write-protected
    /// and clean, so the next write faults and dirties the folio again. Under the file's
    /// i_mmap_rwsem (read) and each PTE table's lock.
    fn folio_mkclean(&mut self, cpu: CpuId, pfn: Pfn) {
        use crate::mm::pgtable::Pte;
        let rmap_lock = self.rmap_lock(cpu, pfn);
        for (mm, vpn) in self.rmap_walk(pfn) {
            let pte = self.mm(mm).pgtable.get(vpn);
            self.lock_section(cpu, LockId::Ptl(mm.0, vpn >> 9), Mode::Exclusive, self.p.pte_update_ns);
            self.charge_sys(cpu, self.p.pte_update_ns);
            if !pte.present() || !(pte.write() || pte.dirty()) {
                continue;
            }
            self.mm_mut(mm).pgtable.set(vpn, Pte::NONE);
            self.flush_tlb_page(cpu, mm, vpn);
            self.mm_mut(mm).pgtable.set(vpn, pte.with(0, Pte::RW | Pte::DIRTY));
        }
        self.lock_release(rmap_lock);
    }

    /// `folio_rotate_reclaimable()` at the end of a PG_reclaim folio's writeback: to the tail
    /// of the inactive list, where reclaim looks next (pgrotated). Before 4.11 an active folio
    /// stays where it is; from 4.11 `lru_move_tail()` deactivates it.
    fn folio_rotate_reclaimable(&mut self, cpu: CpuId, pfn: Pfn) {
        let f = *self.frame(pfn);
        if f.flags & pg::LRU == 0 || f.flags & (pg::LOCKED | pg::DIRTY) != 0 {
            return;
        }
        if f.flags & pg::ACTIVE != 0 && self.p.kver < (4, 11) {
            return;
        }
        let node = self.pfn_to_nid(pfn);
        self.lru_lock_work(cpu, node, 1);
        self.lru_del(pfn);
        self.frame_mut(pfn).flags &= !pg::ACTIVE;
        self.lru_add_tail(pfn);
        self.vmstat.count(VmEvent::PGROTATED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::vmscan::ReclaimTail;

    /// A 4-CPU machine on `preset` with `n` dirty, unmapped page-cache folios of one file,
    /// isolated from the LRU as `shrink_inactive_list()` would hand them over.
    fn dirty_folios(preset: &str, n: u64) -> (Sim, Vec<Pfn>) {
        let text = format!("[machine]\ncpus = 4\nmem_per_node_mib = 64\n[kernel]\npreset = \"{preset}\"\n[[workload.thread]]\ncpu = 0\nops = \"sleep 1us\"\n");
        let cfg = crate::config::load_str("wb.toml", &text, &[]).unwrap();
        let mut sim = Sim::build(&cfg).unwrap();
        let file = sim.file_get_or_create("f", n);
        let cpu = CpuId(0);
        let pfns: Vec<Pfn> = (0..n).map(|i| sim.page_cache_alloc_add(cpu, file, i).unwrap()).collect();
        sim.lru_add_drain(cpu);
        for &p in &pfns {
            sim.folio_mark_dirty(cpu, p);
            assert!(sim.folio_isolate_lru(cpu, p));
        }
        (sim, pfns)
    }

    fn shrink(sim: &mut Sim, pfns: &[Pfn], kswapd: bool) -> u64 {
        let mut tail = ReclaimTail::new(sim.cpus.len());
        let r = sim.shrink_folio_list(CpuId(0), pfns.to_vec(), false, Some(kswapd), &mut tail);
        sim.finish_reclaim_tail(CpuId(0), &mut tail);
        r.nr_reclaimed
    }

    fn take_back(sim: &mut Sim, pfns: &[Pfn]) {
        for &p in pfns {
            assert!(sim.folio_isolate_lru(CpuId(0), p));
        }
    }

    /// Direct reclaim never writes a dirty file folio: it marks it PG_reclaim and keeps it on
    /// the inactive list (4.2) or activates it (4.11+), whatever the node's dirty flag says.
    #[test]
    fn direct_reclaim_leaves_dirty_file_folios_to_the_flusher() {
        for (preset, active) in [("linux-4.2", false), ("linux-6.18", true)] {
            let (mut sim, pfns) = dirty_folios(preset, 8);
            sim.wb.node_dirty[0] = true;
            assert_eq!(shrink(&mut sim, &pfns, false), 0, "{preset}");
            for &p in &pfns {
                let f = sim.frame(p).flags;
                assert_eq!(f & (pg::DIRTY | pg::RECLAIM | pg::LRU | pg::FILE), pg::DIRTY | pg::RECLAIM | pg::LRU | pg::FILE, "{preset}");
                assert_eq!(f & pg::ACTIVE != 0, active, "{preset}");
            }
            assert_eq!(sim.vmstat.get(VmEvent::NR_VMSCAN_WRITE), 0);
            assert_eq!(sim.vmstat.get(VmEvent::NR_VMSCAN_IMMEDIATE), 8);
            assert_eq!(sim.wb.nr_dirty, 8);
        }
    }

    /// kswapd writes only on a node flagged dirty; from 4.11 only folios it met dirty before.
    /// Its `pageout()` is asynchronous: a written folio is clean, under writeback and kept on
    /// the inactive list, not freed; the write's completion rotates it to the inactive tail,
    /// and the next pass frees it clean.
    #[test]
    fn kswapd_writes_on_a_dirty_node_and_from_4_11_only_folios_seen_twice() {
        // Not flagged: neither version writes.
        for preset in ["linux-4.2", "linux-6.18"] {
            let (mut sim, pfns) = dirty_folios(preset, 4);
            assert_eq!(shrink(&mut sim, &pfns, true), 0, "{preset}");
            assert_eq!(sim.vmstat.get(VmEvent::NR_VMSCAN_WRITE), 0, "{preset}");
        }
        for (preset, meetings_before_write) in [("linux-4.2", 0), ("linux-6.18", 1)] {
            let (mut sim, pfns) = dirty_folios(preset, 4);
            sim.wb.node_dirty[0] = true;
            // 6.18: the first meeting only marks them.
            for _ in 0..meetings_before_write {
                assert_eq!(shrink(&mut sim, &pfns, true), 0, "{preset}");
                assert_eq!(sim.vmstat.get(VmEvent::NR_VMSCAN_WRITE), 0, "{preset}");
                take_back(&mut sim, &pfns);
            }
            // Written, not reclaimed: clean, under writeback, on the inactive list.
            assert_eq!(shrink(&mut sim, &pfns, true), 0, "{preset}");
            assert_eq!(sim.vmstat.get(VmEvent::NR_VMSCAN_WRITE), 4, "{preset}");
            assert_eq!(sim.wb.nr_dirty, 0, "{preset}");
            for &p in &pfns {
                let f = sim.frame(p).flags;
                assert_eq!(f & (pg::DIRTY | pg::WRITEBACK | pg::RECLAIM | pg::LRU | pg::ACTIVE), pg::WRITEBACK | pg::RECLAIM | pg::LRU, "{preset}");
            }
            // Not complete yet: nothing changes.
            sim.wb_end_io(CpuId(0));
            assert!(pfns.iter().all(|&p| sim.frame(p).flags & pg::WRITEBACK != 0), "{preset}");
            // Complete: rotated to the tail (pgrotated), then freed clean at the next meeting.
            let done = sim.wb.pageout[0].0;
            sim.cpus[0].clock = done;
            sim.wb_end_io(CpuId(0));
            assert!(sim.wb.pageout.is_empty(), "{preset}");
            assert_eq!(sim.vmstat.get(VmEvent::PGROTATED), 4, "{preset}");
            for &p in &pfns {
                assert_eq!(sim.frame(p).flags & (pg::WRITEBACK | pg::RECLAIM | pg::LRU), pg::LRU, "{preset}");
            }
            take_back(&mut sim, &pfns);
            assert_eq!(shrink(&mut sim, &pfns, true), 4, "{preset}");
            assert_eq!(sim.vmstat.get(VmEvent::NR_VMSCAN_WRITE), 4, "{preset}");
        }
    }

    /// The flusher cleans what reclaim asked for; its writes are asynchronous: the folios are
    /// clean and under writeback until the batch completes, and reclaim meeting one then marks
    /// it PG_reclaim and keeps it (4.2) or activates it (4.11+). The completion rotates the
    /// PG_reclaim folios to the inactive tail (6.18 deactivates the activated ones), so
    /// reclaim frees them next.
    #[test]
    fn the_flusher_writes_under_writeback_then_rotates_what_reclaim_met() {
        for (preset, active) in [("linux-4.2", false), ("linux-6.18", true)] {
            let (mut sim, pfns) = dirty_folios(preset, 8);
            assert_eq!(shrink(&mut sim, &pfns, false), 0);
            sim.wakeup_flusher_threads(CpuId(0), u64::MAX);
            assert_eq!(sim.wb.to_write, 8);
            assert_eq!(sim.flusher_step(CpuId(1)), None, "{preset}: written, asleep for the I/O");
            assert_eq!((sim.wb.to_write, sim.wb.nr_dirty), (0, 0), "{preset}");
            assert_eq!(sim.vmstat.get(VmEvent::NR_WRITTEN), 8, "{preset}");
            assert!(sim.wb.busy_until > sim.now(CpuId(1)), "{preset}");
            for &p in &pfns {
                assert_eq!(sim.frame(p).flags & (pg::DIRTY | pg::WRITEBACK), pg::WRITEBACK, "{preset}");
            }
            // Met in flight: kept or activated, not reclaimed.
            take_back(&mut sim, &pfns);
            sim.vmstat = Default::default();
            assert_eq!(shrink(&mut sim, &pfns, false), 0, "{preset}: under writeback");
            for &p in &pfns {
                let f = sim.frame(p).flags;
                assert_eq!(f & (pg::RECLAIM | pg::LRU | pg::WRITEBACK), pg::RECLAIM | pg::LRU | pg::WRITEBACK, "{preset}");
                assert_eq!(f & pg::ACTIVE != 0, active, "{preset}");
            }
            assert_eq!(sim.vmstat.get(VmEvent::PGACTIVATE), if active { 8 } else { 0 }, "{preset}");
            // Not complete yet: nothing changes.
            sim.wb_end_io(CpuId(1));
            assert_eq!(sim.vmstat.get(VmEvent::PGROTATED), 0, "{preset}");
            // Complete: flag gone, rotated to the inactive tail.
            sim.cpus[1].clock = sim.wb.busy_until;
            sim.wb_end_io(CpuId(1));
            assert_eq!(sim.vmstat.get(VmEvent::PGROTATED), 8, "{preset}");
            let tail = sim.nodes[0].lru.lists[crate::mm::vmscan::Lru::InactiveFile as usize].tail;
            assert!(pfns.iter().any(|p| p.0 == tail), "{preset}: a rotated folio is at the inactive tail");
            for &p in &pfns {
                assert_eq!(sim.frame(p).flags & (pg::DIRTY | pg::RECLAIM | pg::ACTIVE | pg::WRITEBACK), 0, "{preset}");
            }
            take_back(&mut sim, &pfns);
            assert_eq!(shrink(&mut sim, &pfns, false), 8, "{preset}: clean now: reclaimed");
        }
    }

    /// kswapd meeting a folio under writeback that it marked before, on a node flagged
    /// PGDAT_WRITEBACK, counts it immediate (anyone else, or without the flag, marks it and
    /// counts it writeback); a stalled kswapd sleeps HZ/10, and from 5.16 writeback completions
    /// of more than SWAP_CLUSTER_MAX folios on its node wake it first, voiding the timer.
    #[test]
    fn kswapd_stalls_on_writeback_and_5_16_completions_end_the_stall() {
        for (preset, early) in [("linux-4.2", false), ("linux-5.13", false), ("linux-6.18", true)] {
            let (mut sim, pfns) = dirty_folios(preset, 33);
            for &p in &pfns {
                sim.folio_clear_dirty(p);
                sim.frame_mut(p).flags |= pg::WRITEBACK;
            }
            let cpu = CpuId(0);
            let stat = |sim: &mut Sim, kswapd: bool| {
                let mut tail = ReclaimTail::new(sim.cpus.len());
                let r = sim.shrink_folio_list(cpu, pfns.clone(), false, Some(kswapd), &mut tail);
                sim.finish_reclaim_tail(cpu, &mut tail);
                take_back(sim, &pfns);
                (r.nr_writeback, r.nr_immediate)
            };
            assert_eq!(stat(&mut sim, true), (33, 0), "{preset}: first meeting marks them");
            assert_eq!(stat(&mut sim, true), (33, 0), "{preset}: node not flagged");
            sim.wb.node_writeback[0] = true;
            assert_eq!(stat(&mut sim, false), (33, 0), "{preset}: direct reclaim is never immediate");
            assert_eq!(stat(&mut sim, true), (0, 33), "{preset}");
            // kswapd stalls.
            let k = sim.nodes[0].kswapd.unwrap();
            sim.cpus[2].current = Some(k);
            let until = sim.reclaim_throttle_writeback(CpuId(2), 0);
            assert_eq!(until, sim.now(CpuId(2)) + 100_000_000, "{preset}");
            assert_eq!(sim.task(k).state, TaskState::Blocked);
            // 32 completions are not enough, the 33rd is.
            sim.wb.in_flight = pfns[..32].to_vec();
            sim.wb_end_io(cpu);
            assert_eq!(sim.task(k).state, TaskState::Blocked, "{preset}");
            sim.wb.in_flight = pfns[32..].to_vec();
            sim.wb_end_io(cpu);
            assert_eq!(sim.task(k).state != TaskState::Blocked, early, "{preset}");
            assert_eq!(sim.wb.throttled[0].is_none(), early, "{preset}");
            assert_eq!(sim.wake_cancelled(k.0, until), early, "{preset}: the timer is void once");
            assert!(!sim.wake_cancelled(k.0, until), "{preset}");
        }
    }

    /// The periodic writeback writes a folio once it is older than dirty_expire_centisecs.
    #[test]
    fn periodic_writeback_writes_expired_folios() {
        let (mut sim, _) = dirty_folios("linux-6.18", 1);
        let bg = sim.dirty_background_thresh();
        assert!(bg > 0 && sim.wb.nr_dirty <= bg);
        // Below the threshold and not expired: nothing to write now; the periodic writeback
        // comes back in dirty_writeback_centisecs.
        let now = sim.now(CpuId(1));
        assert_eq!(sim.flusher_step(CpuId(1)), Some(now + sim.p.dirty_writeback_ns));
        assert_eq!(sim.vmstat.get(VmEvent::NR_WRITTEN), 0);
        // Expired: written.
        sim.cpus[1].clock = sim.cpus[0].clock + sim.p.dirty_expire_ns;
        assert_eq!(sim.flusher_step(CpuId(1)), None);
        assert_eq!(sim.vmstat.get(VmEvent::NR_WRITTEN), 1);
    }
}
