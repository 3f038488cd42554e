//! mm/readahead.c and filemap.c's mmap readahead: read-around on a page-cache miss
//! (`do_sync_mmap_readahead()`), asynchronous readahead when a fault meets a PG_readahead marker
//! (`do_async_mmap_readahead()` → `page_cache_async_ra()`), the window ramp-up of
//! `get_next_ra_size()` and the `mmap_miss` back-off that stops read-around for random access.
//! Follows Linux 6.18 (the same logic since 2.6.2x, so one model for every preset).
//!
//! Departures: the state is per file (struct file's `f_ra` in Linux, one per open; every
//! workload here opens a file once per process or shares it); no VM_SEQ_READ / VM_RAND_READ
//! (madvise hints are not in the op language); no large folios (order 0); one I/O per window,
//! queued on the file device (block/mod.rs: latency `cost.block_read_4k_ns`, bandwidth
//! `cost.block_read_bytes_per_ns` shared by every reader); a fault that needs the data sleeps
//! until the read completes; a window of a sparse file's holes whose CPU runs ahead of the
//! other CPUs is finished after the faulting page's fault, in the task's next steps (`RaCut`).

use crate::kernel::profile::KFn;
use crate::sim::{pg, round_ns, Sim};
use crate::types::*;

/// MMAP_LOTSAMISS: more misses than this and read-around stops (random access).
const MMAP_LOTSAMISS: u32 = 100;

/// `struct file_ra_state` plus the I/O in flight.
#[derive(Clone, Copy, Debug, Default)]
pub struct FileRa {
    /// Window: first page, size, and the async tail (its first page carries PG_readahead).
    pub start: u64,
    pub size: u64,
    pub async_size: u64,
    pub mmap_miss: u32,
    /// The last two windows read: pages [lo, hi) are not uptodate before `ready`
    /// (folio_wait_locked). Two, because a fault at a marker submits the next window before it
    /// waits for its own page, which the previous window is still reading.
    pub inflight: [(u64, u64, Ns); 2],
}

/// `get_next_ra_size()`: ramp a window up towards `max`.
fn get_next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// The part of a readahead window not read in the fault's step: `start..end` of `file`, with
/// the PG_readahead page if it is in it. Either an allocation left its direct reclaim to the
/// task's next steps (the rest is read after it), or the CPU ran past the next other CPU's
/// time in a window of holes (the rest is read in the task's next steps,
/// [`Sim::readahead_rest_step`]; docs/locking.md, "Steps that run ahead").
#[derive(Clone, Copy, Debug)]
pub struct RaCut {
    pub file: FileId,
    pub start: u64,
    pub end: u64,
    pub mark: Option<u64>,
}

impl Sim {
    /// `do_sync_mmap_readahead()` on a miss at `pgoff`: the read-around window (half before the
    /// fault, a quarter marked for async readahead), unless readahead is off or the file has
    /// missed too often. Returns the window to read, or None for a single-page read.
    pub(crate) fn do_sync_mmap_readahead(&mut self, file: FileId, pgoff: u64) -> Option<(u64, u64, u64)> {
        let ra_pages = self.p.read_ahead_pages;
        if ra_pages == 0 {
            return None;
        }
        let ra = &mut self.files[file.0 as usize].ra;
        if ra.mmap_miss < MMAP_LOTSAMISS * 10 {
            ra.mmap_miss += 1;
        }
        if ra.mmap_miss > MMAP_LOTSAMISS {
            return None;
        }
        // mmap read-around
        ra.start = pgoff.saturating_sub(ra_pages / 2);
        ra.size = ra_pages;
        ra.async_size = ra_pages / 4;
        Some((ra.start, ra.size, ra.async_size))
    }

    /// `do_async_mmap_readahead()`: a fault found `pfn` (at `pgoff`) in the page cache. If it
    /// carries PG_readahead, start the next window (`page_cache_async_ra()`).
    pub(crate) fn do_async_mmap_readahead(&mut self, cpu: CpuId, file: FileId, pgoff: u64, pfn: Pfn) {
        let ra_pages = self.p.read_ahead_pages;
        if ra_pages == 0 {
            return;
        }
        let ra = &mut self.files[file.0 as usize].ra;
        ra.mmap_miss = ra.mmap_miss.saturating_sub(1);
        if self.frames[pfn.0 as usize].flags & pg::READAHEAD == 0 {
            return;
        }
        self.frames[pfn.0 as usize].flags &= !pg::READAHEAD;
        let ra = self.files[file.0 as usize].ra;
        let expected = ra.start + ra.size - ra.async_size;
        if pgoff == expected {
            let ra = &mut self.files[file.0 as usize].ra;
            ra.start += ra.size;
            ra.size = get_next_ra_size(ra.size, ra_pages);
            ra.async_size = ra.size;
        } else {
            // A marker without valid state (interleaved streams): size the window from the
            // cached run after the marker (page_cache_next_miss), as the kernel does.
            let f = &self.files[file.0 as usize];
            let mut start = pgoff + 1;
            while start - pgoff <= ra_pages && f.page(start).is_some() {
                start += 1;
            }
            if start - pgoff > ra_pages {
                return;
            }
            let ra = &mut self.files[file.0 as usize].ra;
            ra.start = start;
            ra.size = get_next_ra_size(start - pgoff + ra_pages, ra_pages);
            ra.async_size = ra.size;
        }
        let ra = self.files[file.0 as usize].ra;
        let (start, size) = (ra.start, ra.size);
        // filemap_fault() holds a reference on the folio it found while it starts the window, so
        // the window's allocations cannot reclaim it (folio_ref_freeze fails); here: locked.
        self.frames[pfn.0 as usize].flags |= pg::LOCKED;
        let _ = self.page_cache_ra(cpu, file, start, size, size, None);
        self.frames[pfn.0 as usize].flags &= !pg::LOCKED;
    }

    /// `page_cache_ra_unbounded()` + `read_pages()`: allocate the window's missing pages into the
    /// page cache (and the LRU), mark the first page of the async tail PG_readahead, and read
    /// them in one I/O (zero-fill for holes of a sparse file). `want` is the faulting page of a
    /// synchronous read: its frame is returned if it was read, and the caller waits for the I/O.
    /// Stops at the first allocation failure, as the kernel's readahead does; the fault then
    /// allocates its page alone (filemap_fault's retry with FGP_CREAT).
    pub(crate) fn page_cache_ra(&mut self, cpu: CpuId, file: FileId, start: u64, size: u64, async_size: u64, want: Option<u64>) -> Option<Pfn> {
        self.page_cache_ra_marked(cpu, file, start, size, (async_size > 0).then_some(start + size - async_size), want)
    }

    /// What is left of a readahead window whose allocation left its direct reclaim to the
    /// task's next steps ([`RaCut`]): read when the reclaim is over.
    pub fn page_cache_ra_rest(&mut self, cpu: CpuId, cut: RaCut) {
        if cut.end > cut.start {
            let _ = self.page_cache_ra_marked(cpu, cut.file, cut.start, cut.end - cut.start, cut.mark, None);
        }
    }

    /// At the start of a task's step: the rest of a readahead window that a fault's step left
    /// when its CPU ran ahead of the others ([`RaCut`]), read before the task goes on. True if
    /// there was one (the step is spent on it). A rest that waits for a direct reclaim is read
    /// by that reclaim's last step ([`Sim::direct_reclaim_step`]).
    pub fn readahead_rest_step(&mut self, cpu: CpuId, t: Tid) -> bool {
        if self.task(t).direct_reclaim.is_some() {
            return false;
        }
        let Some(cut) = self.task_mut(t).ra_rest.take() else { return false };
        // Still inside the fault that started the window.
        self.kfn_enter(cpu, KFn::HandleMmFault);
        self.kfn_enter(cpu, KFn::FilemapFault);
        self.replayable(cpu, |s| s.page_cache_ra_rest(cpu, cut));
        self.kfn_exit(cpu);
        self.kfn_exit(cpu);
        true
    }

    /// [`Sim::page_cache_ra`] with the PG_readahead page given (None: no async tail).
    fn page_cache_ra_marked(&mut self, cpu: CpuId, file: FileId, start: u64, size: u64, mark: Option<u64>, want: Option<u64>) -> Option<Pfn> {
        self.kfn_enter(cpu, KFn::PageCacheRa);
        let (mut read, mut got) = (Vec::new(), None);
        // do_page_cache_ra(): nothing past i_size (the faulting page is always inside it).
        let limit = self.page_cache_limit().min(self.files[file.0 as usize].size.max(want.map_or(0, |w| w + 1)));
        let sparse = self.files[file.0 as usize].sparse;
        for pgoff in start..(start + size).min(limit) {
            if self.files[file.0 as usize].page(pgoff).is_some() {
                continue;
            }
            if !read.is_empty() && sparse && want.is_none_or(|w| pgoff > w) && self.defer_direct_reclaim && self.ahead_of_others(cpu) {
                // This CPU has run past the time the next other CPU acts: the rest of the
                // window waits for the task's next step, so that its locks (i_pages, the pcp
                // refill's zone->lock, the lru_add drain's LRU lock) are requested in time
                // order with the other CPUs' (docs/locking.md, "Steps that run ahead"). Not a kernel
                // behaviour: the kernel's loop runs on while the other CPUs run. Only a window
                // of holes (no I/O: one request per window is kept) and past the faulting
                // page (the fault completes) is split.
                self.ra_cut = Some(RaCut { file, start: pgoff, end: (start + size).min(limit), mark });
                self.mark("readahead window split");
                break;
            }
            let Some(pfn) = self.page_cache_alloc_add(cpu, file, pgoff) else {
                if self.direct_reclaim_deferred {
                    // The allocation left its direct reclaim to the task's next steps: the
                    // rest of the window is read after it, as the kernel's loop goes on after
                    // its reclaim (mm/vmscan.rs `Sim::direct_reclaim_step`).
                    self.ra_cut = Some(RaCut { file, start: pgoff, end: (start + size).min(limit), mark });
                }
                break;
            };
            // Locked until its read completes: reclaim entered by a later allocation of this
            // window skips it (folio_trylock fails in shrink_folio_list).
            self.frames[pfn.0 as usize].flags |= pg::LOCKED;
            if Some(pgoff) == mark {
                self.frames[pfn.0 as usize].flags |= pg::READAHEAD;
            }
            if want == Some(pgoff) {
                got = Some(pfn);
            }
            read.push(pfn);
        }
        for &p in &read {
            self.frames[p.0 as usize].flags &= !pg::LOCKED;
        }
        if !read.is_empty() {
            self.charge_sys(cpu, self.p.page_alloc_ns * read.len() as f64);
            let before = self.cpus[cpu.0 as usize].clock;
            let io = self.read_pages_ns(cpu, file, &read);
            // A device read's time counts from after its submission (cost.block_read_submit_ns,
            // charged in submit_read()); a sparse file's holes complete when the clearing began.
            let now = if self.files[file.0 as usize].sparse { before } else { self.cpus[cpu.0 as usize].clock };
            if want.is_some() {
                // The faulting task sleeps until the whole I/O completes (folio_wait_locked on
                // its page).
                self.io_wait(cpu, io);
            } else {
                let w = &mut self.files[file.0 as usize].ra.inflight;
                w[0] = w[1];
                w[1] = (start, start + size, now + round_ns(io));
            }
        }
        self.kfn_exit(cpu);
        got
    }

    /// The cost of reading `n` new page-cache pages of `file` in one request: the device's 4 KiB
    /// latency, plus the transfer of the other pages; holes of a sparse file are cleared instead.
    fn read_pages_ns(&mut self, cpu: CpuId, file: FileId, pfns: &[Pfn]) -> f64 {
        if self.files[file.0 as usize].sparse {
            let clear: f64 = pfns.iter().map(|&p| self.page_op_ns(cpu, p, false)).sum();
            self.kfn_enter(cpu, KFn::ClearPage);
            self.charge_sys(cpu, clear);
            self.kfn_exit(cpu);
            return 0.0;
        }
        self.submit_read(cpu, crate::block::Dev::File, pfns.len() as u64)
    }

    /// A fault found `pgoff` cached: wait if its readahead I/O has not completed.
    pub(crate) fn wait_on_inflight(&mut self, cpu: CpuId, file: FileId, pgoff: u64) {
        let now = self.cpus[cpu.0 as usize].clock;
        let ready = self.files[file.0 as usize].ra.inflight.iter().filter(|w| pgoff >= w.0 && pgoff < w.1).map(|w| w.2).max().unwrap_or(0);
        if now < ready {
            self.io_wait(cpu, (ready - now) as f64);
        }
    }

    /// Is `pgoff` a page that `filemap_map_pages()` (fault-around) must leave to a fault: under
    /// readahead I/O, or carrying the PG_readahead marker?
    pub(crate) fn ra_skip_fault_around(&self, cpu: CpuId, file: FileId, pgoff: u64, pfn: Pfn) -> bool {
        if self.frames[pfn.0 as usize].flags & pg::READAHEAD != 0 {
            return true;
        }
        let now = self.cpus[cpu.0 as usize].clock;
        self.files[file.0 as usize].ra.inflight.iter().any(|w| pgoff >= w.0 && pgoff < w.1 && now < w.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim() -> (Sim, CpuId, Tid) {
        let text = "[machine]\ncpus = 2\nmem_per_node_mib = 64\n[[workload.thread]]\ncpu = 0\nops = \"sleep 1us\"\n";
        let cfg = crate::config::load_str("ra.toml", text, &[]).unwrap();
        let mut s = Sim::build(&cfg).unwrap();
        let t = Tid((s.tasks.len() - 1) as u32);
        s.cpus[0].current = Some(t);
        (s, CpuId(0), t)
    }

    /// A window of holes whose CPU has run past the next other CPU's time stops after the
    /// faulting page, which the fault gets; the rest is read at the start of the task's next
    /// steps, one page a step while the CPU stays ahead, with the PG_readahead marker where the
    /// whole window would have put it. With no other CPU to wait for, the window is read at once.
    #[test]
    fn a_window_waits_for_the_other_cpus() {
        let (mut s, cpu, t) = sim();
        let holes = s.file_get_or_create_sparse("holes", 1024, true);
        let cached = |s: &Sim, n: u64| (0..n).filter(|&p| s.files[holes.0 as usize].page(p).is_some()).count();
        // Another CPU acts at time 0: after any work this one is ahead of it.
        s.step_horizon = 0;
        // Read-around at 0: the window is [0, 32) with its async tail from 24.
        let got = s.replayable(cpu, |s| s.filemap_fault(cpu, holes, 0));
        assert_eq!(got.ok(), s.files[holes.0 as usize].page(0));
        assert_eq!(cached(&s, 64), 1, "the fault's own page only");
        let cut = s.task(t).ra_rest.expect("the rest waits for the task's next step");
        assert_eq!((cut.start, cut.end, cut.mark), (1, 32, Some(24)));
        let mut steps = 0;
        while s.readahead_rest_step(cpu, t) {
            steps += 1;
        }
        assert_eq!(steps, 31, "one page a step");
        assert_eq!(cached(&s, 64), 32);
        for p in 0..32 {
            let flags = s.frames[s.files[holes.0 as usize].page(p).unwrap().0 as usize].flags;
            assert_eq!(flags & pg::READAHEAD != 0, p == 24, "page {p}");
        }
        // Alone: the fault at the marker reads the next window, [32, 64), in its own step.
        s.step_horizon = Ns::MAX;
        while s.events.pop().is_some() {}
        s.replayable(cpu, |s| s.filemap_fault(cpu, holes, 24)).unwrap();
        assert!(s.task(t).ra_rest.is_none());
        assert_eq!(cached(&s, 128), 64);
    }
}
