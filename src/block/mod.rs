//! The block layer as the page cache and swap see it (block/blk-mq.c, one NVMe device per role).
//!
//! A read of `n` pages submitted at time `t` completes once the device has transferred its bytes
//! after every byte queued before it, plus the device's access latency: requests' latencies
//! overlap (an NVMe device keeps many commands in flight), their transfers share the device's
//! bandwidth in submission order. The reader sleeps until then, as `folio_wait_locked()` →
//! `io_schedule()` does: its CPU runs other tasks or goes idle (lazy TLB), and the time is not
//! system time.
//!
//! Costs: `cost.block_read_4k_ns` is one 4 KiB read on an idle device (latency plus the first
//! page's transfer) and `cost.block_read_bytes_per_ns` the device's bandwidth, so an uncontended
//! read of `n` pages costs `block_read_4k_ns + (n - 1) * 4096 / bandwidth`, as before this model.
//!
//! Departures: one device for every file and one for swap; no request merging between tasks, no
//! I/O scheduler, no queue-depth limit; writes (swap-out, writeback) are charged to the writer
//! and do not occupy the device. A transfer booked "in the past" (below) takes the first gap
//! the transfers already booked by CPUs further ahead leave it, rather than delaying them as a
//! real queue would: the device never moves more than its bandwidth, but such a transfer may
//! wait a little longer than it would have.

use std::collections::VecDeque;

use crate::sim::Sim;
use crate::types::*;

/// The backing devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dev {
    /// Where regular files live (page-cache reads, readahead).
    File = 0,
    /// The swap device (swap-in).
    Swap = 1,
}

/// A device's queue: the transfers booked, in request order, each with its interval on the
/// device and the latest end of any transfer requested at or before it. CPUs run steps in nearly
/// (not exactly) clock order, so a read can be submitted "in the past" of transfers a CPU
/// further ahead already booked: it queues behind those requested before it (FIFO by request
/// time, as the lock calendars of kernel/locking.rs do), and those requested after it keep
/// their intervals; it takes the first gap among them that fits it. Booked intervals never
/// overlap, so the device moves at most its bandwidth. (Until 2026-11-23 such a transfer was
/// simply allowed to overlap the later ones: with the llm workload's spinning barrier the
/// device then moved 40% more than its bandwidth.)
#[derive(Clone, Debug, Default)]
pub struct BlockDev {
    /// (request time, start and end of its transfer, latest end of any transfer requested up
    /// to it).
    q: VecDeque<(f64, f64, f64, f64)>,
    /// The latest end among transfers dropped from `q`.
    pruned: f64,
    /// Reads submitted, pages read, and the time reads waited behind earlier transfers.
    pub reads: u64,
    /// Writes booked (the flusher's batches).
    pub writes: u64,
    pub pages: u64,
    pub queued_ns: f64,
}

/// Transfers requested this long before the event loop's floor are dropped (their ends kept in
/// `pruned`).
const KEEP_NS: f64 = 1e6;

impl BlockDev {
    /// Book a transfer of `len` ns requested at `t`; returns when it starts.
    fn book(&mut self, t: f64, len: f64, floor: f64) -> f64 {
        while self.q.front().is_some_and(|f| f.0 + KEEP_NS < floor) {
            self.pruned = self.q.pop_front().expect("front").3;
        }
        let k = self.q.partition_point(|b| b.0 <= t);
        let before = k.checked_sub(1).map_or(self.pruned, |i| self.q[i].3);
        let mut start = t.max(before);
        // Transfers requested after t but booked already (by CPUs further ahead) keep the
        // device in their intervals: take the first gap at or after `start` that fits.
        if k < self.q.len() {
            let mut later: Vec<(f64, f64)> = self.q.range(k..).filter(|b| b.2 > start).map(|b| (b.1, b.2)).collect();
            later.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (s, e) in later {
                if s >= start + len {
                    break;
                }
                start = start.max(e);
            }
        }
        let end = start + len;
        self.q.insert(k, (t, start, end, before.max(end)));
        let mut m = before.max(end);
        for b in self.q.range_mut(k + 1..) {
            m = m.max(b.2);
            if b.3 == m {
                break;
            }
            b.3 = m;
        }
        start
    }
}

impl Sim {
    /// `submit_bio()` of a read of `pages` pages on `dev` from `cpu` now: the time until it
    /// completes. The submission's CPU time (`cost.block_read_submit_ns`) is charged to `cpu`
    /// first, as the task's system time; the device's time starts after it.
    pub(crate) fn submit_read(&mut self, cpu: CpuId, dev: Dev, pages: u64) -> f64 {
        if self.p.block_read_submit_ns > 0.0 {
            self.kfn_enter(cpu, crate::kernel::profile::KFn::SubmitBio);
            self.charge_sys(cpu, self.p.block_read_submit_ns);
            self.kfn_exit(cpu);
        }
        let page_xfer = 4096.0 / self.p.block_read_bytes_per_ns;
        let queued = self.book_io(cpu, dev, pages as f64 * page_xfer);
        let d = &mut self.blkdev[dev as usize];
        d.reads += 1;
        d.pages += pages;
        // submit_bio() counts what it reads (in pages here; /proc/vmstat prints kB).
        self.vmstat.add(crate::mm::vmstat::VmEvent::PGPGIN, pages);
        // The transfer ends at start + pages * page_xfer; the latency beyond the first page's
        // transfer overlaps with other requests' transfers.
        queued + pages as f64 * page_xfer + (self.p.block_read_ns - page_xfer).max(0.0)
    }

    /// Book `len` ns of `dev` for a request from `cpu` now, after the transfers requested before
    /// it: the time it waits before its own transfer starts (also added to `queued_ns`).
    fn book_io(&mut self, cpu: CpuId, dev: Dev, len: f64) -> f64 {
        let now = self.cpus[cpu.0 as usize].clock as f64;
        let floor = self.locks.floor as f64;
        let d = &mut self.blkdev[dev as usize];
        let queued = d.book(now, len, floor) - now;
        d.queued_ns += queued;
        queued
    }

    /// Book a write of `pages` 4 KiB pages on `dev` (the flusher's batch, msync's range) as one
    /// request, as reads are: the device is busy for the pages' transfer at
    /// `cost.block_write_bytes_per_ns`, after the transfers requested before it, and the write
    /// completes `cost.block_write_4k_ns` (one page's write and wait) after its first page
    /// started. Returns the time from now to its completion.
    pub(crate) fn submit_write(&mut self, cpu: CpuId, dev: Dev, pages: u64) -> f64 {
        let page_xfer = 4096.0 / self.p.block_write_bytes_per_ns;
        let queued = self.book_io(cpu, dev, pages as f64 * page_xfer);
        self.blkdev[dev as usize].writes += 1;
        self.vmstat.add(crate::mm::vmstat::VmEvent::PGPGOUT, pages);
        queued + pages as f64 * page_xfer + (self.p.block_write_ns - page_xfer).max(0.0)
    }

    /// Whether a workload's batch of accesses on CPU `ci` stops here: its clock passed `stop`
    /// (the next event elsewhere, or the slice end), or an access started a read to sleep on.
    #[inline]
    pub(crate) fn step_ends(&self, ci: usize, stop: Ns) -> bool {
        let c = &self.cpus[ci];
        c.clock > stop || c.io_wait_until != 0
    }

    /// Sleep the task running on `cpu` until `ns` from now (`io_schedule()`): the workload's
    /// step ends after the current operation and the task blocks until then.
    pub(crate) fn io_wait(&mut self, cpu: CpuId, ns: f64) {
        let c = &mut self.cpus[cpu.0 as usize];
        let until = c.clock + crate::sim::round_ns(ns);
        c.io_wait_until = c.io_wait_until.max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch of writes is one request: one page's write-and-wait plus the other pages'
    /// transfer at the write bandwidth, and the device is busy only for the transfer.
    #[test]
    fn a_write_batch_costs_one_latency_plus_its_transfer() {
        let sets: Vec<String> = ["cost.block_write_4k_ns=20000", "cost.block_write_bytes_per_ns=2.048"].iter().map(|s| s.to_string()).collect();
        let mut sim = Sim::new(&crate::config::Config::defaults(&sets).unwrap());
        let cpu = CpuId(0);
        assert_eq!(sim.submit_write(cpu, Dev::File, 1), 20000.0);
        sim.cpus[0].clock = 1_000_000;
        // 32 pages at 2000 ns each: 20000 + 31 x 2000.
        assert_eq!(sim.submit_write(cpu, Dev::File, 32), 82000.0);
        // Requested at the same time, a second batch waits for the first one's transfer only.
        assert_eq!(sim.submit_write(cpu, Dev::File, 32), 64000.0 + 82000.0);
    }

    #[test]
    fn transfers_queue_in_request_order_not_booking_order() {
        let mut d = BlockDev::default();
        // A CPU ahead in time books first; one behind it is not delayed by it.
        assert_eq!(d.book(1000.0, 10.0, 0.0), 1000.0);
        assert_eq!(d.book(100.0, 10.0, 0.0), 100.0);
        // One behind it whose transfer would overlap it takes the gap after it.
        assert_eq!(d.book(995.0, 10.0, 0.0), 1010.0);
        // One that fits before it keeps its time.
        assert_eq!(d.book(980.0, 10.0, 0.0), 980.0);
        // A request at 105 queues behind the one requested at 100 (ends at 110)...
        assert_eq!(d.book(105.0, 10.0, 0.0), 110.0);
        // ...and one at 1005 behind the 1000 one and everything requested before it (the 995
        // one ends at 1020).
        assert_eq!(d.book(1005.0, 10.0, 0.0), 1020.0);
        // Back to back at the same time: FIFO.
        assert_eq!(d.book(2000.0, 5.0, 0.0), 2000.0);
        assert_eq!(d.book(2000.0, 5.0, 0.0), 2005.0);
    }

    #[test]
    fn matches_a_brute_force_fifo_by_request_time() {
        // In request order, every request starts after the latest end of those made at or
        // before it.
        let mut d = BlockDev::default();
        let mut end = 0.0f64;
        let mut x = 12345u64;
        let mut t = 0.0;
        for _ in 0..500 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            t += ((x >> 33) % 30) as f64;
            let len = ((x >> 20) % 50 + 1) as f64;
            let got = d.book(t, len, 0.0);
            assert_eq!(got, t.max(end));
            end = got + len;
        }
    }

    #[test]
    fn out_of_order_bookings_never_overlap_and_queue_behind_earlier_requests() {
        // Requests in random order: no two transfers share the device (it never moves more
        // than its bandwidth), each starts after every transfer requested before it ends, and
        // it starts at its request time or at the end of some other transfer (no idle wait).
        let mut d = BlockDev::default();
        let mut booked: Vec<(f64, f64, f64)> = Vec::new();
        let mut x = 12345u64;
        for _ in 0..500 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let t = ((x >> 33) % 10_000) as f64;
            let len = ((x >> 20) % 50 + 1) as f64;
            let s = d.book(t, len, 0.0);
            let e = s + len;
            for &(bt, bs, be) in &booked {
                assert!(e <= bs || s >= be, "[{s}, {e}) overlaps [{bs}, {be})");
                if bt <= t {
                    assert!(s >= be, "requested at {t}, started at {s}, before the transfer requested at {bt} ended at {be}");
                }
            }
            assert!(s == t || booked.iter().any(|b| b.2 == s), "started at {s} for no reason");
            booked.push((t, s, e));
        }
    }
}
