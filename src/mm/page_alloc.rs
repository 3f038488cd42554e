//! The page allocator (mm/page_alloc.c, Linux 6.18): per-node buddy free areas of orders
//! 0..=MAX_PAGE_ORDER (10), per-CPU page lists (pcp) for order 0, zone watermarks, and
//! `alloc_contig_pages()` for runs larger than the buddy's biggest order (1 GiB huge pages).
//!
//! One zone (ZONE_NORMAL) per node. Free blocks are kept in doubly linked lists threaded through
//! the frames' `lru_next`/`lru_prev` (a free frame is never on an LRU list, as in Linux where
//! both use `page->lru`). The head frame of a free block has `pg::BUDDY` and its order
//! ([`Frame::buddy_order`], kept in `mapping` as the kernel keeps it in `page->private`). A free
//! frame carries its LUF tag ([`Frame::luf`], mm/luf.rs) in its index slot: set when it is freed
//! ([`Sim::free_page_luf`]), kept on pcp lists and across buddy merges and splits, consumed
//! by `luf_takeoff()` when it is allocated.
//!
//! The allocation policy (watermark checks, waking kswapd, direct reclaim, OOM) lives in
//! [`Sim::alloc_pages`]; callers that may not reclaim (boot, page tables of kernel mappings) use
//! [`Sim::alloc_page`]. Invariant: page_alloc never touches page tables or TLBs.

use crate::kernel::locking::{LockId, Mode};
use crate::kernel::profile::KFn;
use crate::mm::vmstat::VmEvent;
use crate::sim::{pg, round_ns, Frame, Sim};
use crate::types::*;

pub const MAX_PAGE_ORDER: usize = 10;
pub const NIL: u32 = u32::MAX;

/// `struct free_area[MAX_PAGE_ORDER + 1]` of one zone.
///
/// **Pristine blocks (lazy frames, docs/performance.md item 33).** The MAX_PAGE_ORDER blocks
/// that boot put on the list and nobody has allocated yet are not written into the frame table:
/// the lowest `pristine` blocks of the node, `[start_pfn, start_pfn + pristine << MAX_PAGE_ORDER)`,
/// form the tail of the order-MAX_PAGE_ORDER list implicitly, in descending address order
/// (boot adds them in ascending order at the head, and every later add is at the head and
/// every take from it, so the untaken ones always stay a tail in that order). Their frames
/// are all zero bytes, never read, and the host commits no memory for them. `head` and the
/// links cover the explicit part only; the explicit part's last block has `lru_next == NIL`
/// and stands for "followed by the top pristine block" while `pristine > 0`. `nr_free`
/// counts pristine blocks as the eager list did. A block is written (materialised) when it
/// is taken ([`Sim::rmqueue_smallest`]); [`Sim::materialize_free_lists`] writes all of them,
/// giving the list exactly as it would be had every frame been written at boot.
#[derive(Clone, Debug)]
pub struct FreeArea {
    pub head: [u32; MAX_PAGE_ORDER + 1],
    pub nr_free: [u64; MAX_PAGE_ORDER + 1],
    /// MAX_PAGE_ORDER blocks at the bottom of the node not yet written (see above).
    pub pristine: u32,
}

impl FreeArea {
    /// Whether the order-`o` list holds a block (explicit or pristine).
    #[inline]
    pub fn nonempty(&self, o: usize) -> bool {
        self.head[o] != NIL || (o == MAX_PAGE_ORDER && self.pristine > 0)
    }
}

impl Default for FreeArea {
    fn default() -> Self {
        FreeArea { head: [NIL; MAX_PAGE_ORDER + 1], nr_free: [0; MAX_PAGE_ORDER + 1], pristine: 0 }
    }
}

/// Zone watermarks in pages (`_watermark[WMARK_MIN/LOW/HIGH]`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
}

/// `struct per_cpu_pages` for one (CPU, zone), sized and drained as the preset's kernel does
/// (see [`PcpSetup`] and [`Pcp::free_commit`]).
#[derive(Clone, Debug, Default)]
pub struct Pcp {
    pub list: Vec<Pfn>,
    /// `pcp->high`: fixed before 6.7; since, tuned between `high_min` and `high_max` (0 until
    /// the first free or refill clamps it, as `per_cpu_pages_init()` leaves it).
    pub high: usize,
    pub high_min: usize,
    pub high_max: usize,
    pub batch: usize,
    /// 5.14-6.6 `pcp->free_factor`: doubles the pages a drain frees for each drain with no
    /// allocation between; halved by every allocation.
    pub free_factor: u32,
    /// 6.7+ `pcp->free_count`: pages freed since the allocations last halved it (capped at
    /// `batch << CONFIG_PCP_BATCH_SCALE_MAX`).
    pub free_count: usize,
    /// 6.7+ `pcp->alloc_factor`: a refill takes `batch << alloc_factor`; halved by every free.
    pub alloc_factor: u32,
}

/// "mm, page_alloc: double zone's batchsize" (d8a759b57035, 4.19): the batch's cap went from
/// 512 KiB to 1 MiB of pages.
pub const PCP_BATCH_1M_SINCE: (u32, u32) = (4, 19);
/// "mm/page_alloc: Calculate pcp->high based on zone sizes and active CPUs", "scale the number
/// of pages that are batch freed", "limit the number of pages on PCP lists when reclaim is
/// active" (Mel Gorman, 5.14): high from the low watermark, free_factor, ZONE_RECLAIM_ACTIVE.
pub const PCP_HIGH_FROM_WMARK_SINCE: (u32, u32) = (5, 14);
/// "mm: PCP high auto-tuning" (Huang Ying, 6.7): pcp->high tuned between high_min and high_max,
/// alloc_factor, free_count, ZONE_BELOW_HIGH, decay_pcp_high().
pub const PCP_AUTOTUNE_SINCE: (u32, u32) = (6, 7);
/// `CONFIG_PCP_BATCH_SCALE_MAX` (default 5; 6.7+).
pub const PCP_BATCH_SCALE_MAX: u32 = 5;
/// `MIN_PERCPU_PAGELIST_HIGH_FRACTION`: high_max is an eighth of the zone over its CPUs (6.7+).
const MIN_PERCPU_PAGELIST_HIGH_FRACTION: u64 = 8;
/// `sysctl_stat_interval` (HZ): vmstat_update(), which runs decay_pcp_high(), every second.
pub const PCP_DECAY_INTERVAL_NS: Ns = 1_000_000_000;

/// The cap of `zone_batchsize()` in pages, per version: 512 KiB before 4.19, 1 MiB since
/// (`kernel.pcp_batch_cap_kib` = -1).
pub fn pcp_batch_cap_pages(kver: (u32, u32)) -> u64 {
    if kver >= PCP_BATCH_1M_SINCE { 256 } else { 128 }
}

/// `zone_batchsize()` for a zone of `managed` pages with the version's cap
/// ([`pcp_batch_cap_pages`]): 31 (4.2) or 63 (4.19+) on zones above 688 MiB.
pub fn zone_batchsize(managed: u64, kver: (u32, u32)) -> u64 {
    zone_batchsize_capped(managed, pcp_batch_cap_pages(kver))
}

/// `zone_batchsize()`: about a quarter of a thousandth of the zone, at most `cap` pages,
/// divided by 4 and rounded to 2^n - 1 (the cache-colouring rule). 0 on a zone under 8,192
/// pages, as the kernel returns (its callers make the batch 1).
pub fn zone_batchsize_capped(managed: u64, cap: u64) -> u64 {
    let b = ((managed / 1024).min(cap) / 4).max(1);
    let sum = b + b / 2;
    (1u64 << (63 - sum.leading_zeros())) - 1
}

/// One zone's pcp sizing, the same on each of its CPUs (`zone_set_pageset_high_and_batch()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcpSetup {
    pub batch: usize,
    pub high_min: usize,
    pub high_max: usize,
}

impl PcpSetup {
    /// For a zone of `managed` pages whose low watermark is `low_wmark`, split over `nr_cpus`
    /// CPUs (`nr_split_cpus`: the node's CPUs, or every CPU for a CPU-less node):
    /// - before 5.14, high = 6 x batch (`pageset_set_batch()`: 186 on 4.2's large zones);
    /// - 5.14 to 6.6, high = the low watermark over the node's CPUs, at least 4 x batch
    ///   (`zone_highsize()`), so that full pcp lists do not start kswapd early;
    /// - 6.7+, that is high_min, and high_max is an eighth of the zone over the same CPUs.
    ///   (On this host, 6.18, 2 CPUs: ZONE_NORMAL's low watermark 20,163 and 5,394,266
    ///   managed pages give high_min 10,081 and high_max 337,141 in /proc/zoneinfo.)
    ///
    /// `vm.percpu_pagelist_high_fraction` (0) is not modelled.
    /// `batch_cap`: [`zone_batchsize_capped`]'s cap in pages (the version's: [`pcp_batch_cap_pages`]).
    pub fn new(managed: u64, low_wmark: u64, nr_cpus: u64, kver: (u32, u32), batch_cap: u64) -> PcpSetup {
        let raw = zone_batchsize_capped(managed, batch_cap);
        let batch = raw.max(1);
        let nr_cpus = nr_cpus.max(1);
        let highsize = |total: u64| (total / nr_cpus).max(batch << 2) as usize;
        let (high_min, high_max) = if kver < PCP_HIGH_FROM_WMARK_SINCE {
            let h = 6 * raw as usize;
            (h, h)
        } else if kver < PCP_AUTOTUNE_SINCE {
            let h = highsize(low_wmark);
            (h, h)
        } else {
            (highsize(low_wmark), highsize(managed / MIN_PERCPU_PAGELIST_HIGH_FRACTION))
        };
        PcpSetup { batch: batch as usize, high_min, high_max }
    }
}

/// Zone flags the pcp sizing reads (`zone->flags`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ZoneFlags {
    /// ZONE_RECLAIM_ACTIVE (5.14+): kswapd is in balance_pgdat() for the node.
    pub reclaim_active: bool,
    /// ZONE_BELOW_HIGH (6.7+): an allocation found the zone at or below its high watermark;
    /// cleared by a pcp drain that leaves it above.
    pub below_high: bool,
}

impl Pcp {
    pub fn new(s: PcpSetup, kver: (u32, u32)) -> Pcp {
        // Before 6.7 pcp->high is set with the batch; since, it starts at 0 and is clamped to
        // [high_min, high_max] on first use.
        let high = if kver < PCP_AUTOTUNE_SINCE { s.high_min } else { 0 };
        Pcp { list: Vec::new(), high, high_min: s.high_min, high_max: s.high_max, batch: s.batch, free_factor: 0, free_count: 0, alloc_factor: 0 }
    }

    /// `free_unref_page_commit()` after an order-0 page was added to the list: how many of the
    /// oldest pages go back to the buddy now (0: none), with the version's bookkeeping
    /// (`nr_pcp_high()`, `nr_pcp_free()`).
    pub fn free_commit(&mut self, kver: (u32, u32), zf: ZoneFlags) -> usize {
        let count = self.list.len() as i64;
        let batch = self.batch as i64;
        if kver < PCP_HIGH_FROM_WMARK_SINCE {
            // 4.2 free_hot_cold_page(): `if (pcp->count >= pcp->high)` free `batch`.
            return if count >= self.high as i64 { batch.min(count) as usize } else { 0 };
        }
        if kver < PCP_AUTOTUNE_SINCE {
            let high = self.high as i64;
            let high = if high == 0 || !zf.reclaim_active { high } else { (batch << 2).min(high) };
            if count < high {
                return 0;
            }
            // nr_pcp_free(), 5.14.
            if high < batch {
                return 1;
            }
            let (min_nr, max_nr) = (batch, high - batch);
            let b = batch << self.free_factor;
            if b < max_nr {
                self.free_factor += 1;
            }
            return b.max(min_nr).min(max_nr).max(0) as usize;
        }
        self.alloc_factor >>= 1;
        if self.free_count < (self.batch << PCP_BATCH_SCALE_MAX) {
            self.free_count += 1;
        }
        let high = self.nr_pcp_high_autotune(zf);
        if count < high {
            return 0;
        }
        // nr_pcp_free(), 6.7+.
        if high < batch {
            return 1;
        }
        (self.free_count as i64).max(batch).min(high - batch).max(0) as usize
    }

    /// `pcp->high = clamp(pcp->high, high_min, high_max)`, as nr_pcp_high() and nr_pcp_alloc()
    /// both begin (6.7+). Returns it. Like the kernel's clamp() (min(max(v, lo), hi)), it gives
    /// high_max if a tiny zone has high_min above it, where `usize::clamp` would panic.
    fn clamp_high(&mut self) -> i64 {
        self.high = self.high.max(self.high_min).min(self.high_max);
        self.high as i64
    }

    /// `nr_pcp_high()` of 6.7+ for an order-0 free: the limit the list is checked against, and
    /// pcp->high lowered (reclaim active, zone below its high watermark) or raised (a free that
    /// fills the list while memory is plentiful).
    fn nr_pcp_high_autotune(&mut self, zf: ZoneFlags) -> i64 {
        let (lo, hi) = (self.high_min as i64, self.high_max as i64);
        let batch = self.batch as i64;
        let count = self.list.len() as i64;
        let mut high = self.clamp_high();
        if high == 0 {
            return 0;
        }
        let free_count = (self.free_count as i64).max(batch);
        if zf.reclaim_active {
            self.high = (high - free_count).max(lo) as usize;
            return (batch << 2).min(self.high as i64);
        }
        if lo == hi {
            return high;
        }
        if zf.below_high {
            self.high = (high - free_count).max(lo) as usize;
            high = count.max(lo);
        } else if count >= high {
            let need = self.free_count as i64 + batch;
            if (self.high as i64) < need {
                self.high = need.max(lo).min(hi) as usize;
            }
        }
        high
    }

    /// `rmqueue_pcplist()`'s bookkeeping for an order-0 allocation through this list (5.14-6.6:
    /// free_factor halved; 6.7+: free_count halved), and, if the list is empty, how many pages
    /// `rmqueue_bulk()` takes (`batch`; 6.7+ `nr_pcp_alloc()`, which also raises pcp->high while
    /// the zone is above its high watermark and grows alloc_factor).
    pub fn alloc_refill(&mut self, kver: (u32, u32), zf: ZoneFlags) -> usize {
        if kver < PCP_HIGH_FROM_WMARK_SINCE {
            return if self.list.is_empty() { self.batch } else { 0 };
        }
        if kver < PCP_AUTOTUNE_SINCE {
            self.free_factor >>= 1;
            return if self.list.is_empty() { self.batch } else { 0 };
        }
        self.free_count >>= 1;
        if !self.list.is_empty() {
            return 0;
        }
        let (lo, hi) = (self.high_min as i64, self.high_max as i64);
        let base = self.batch as i64;
        let mut high = self.clamp_high();
        if high < base {
            return 1;
        }
        let mut batch = base << self.alloc_factor;
        if lo != hi && !zf.below_high {
            high = (high + batch).min(hi);
            self.high = high as usize;
        }
        let max_nr_alloc = (high - self.list.len() as i64 - base).max(base);
        if batch <= max_nr_alloc && self.alloc_factor < PCP_BATCH_SCALE_MAX {
            self.alloc_factor += 1;
        }
        batch = batch.min(max_nr_alloc);
        batch.max(1) as usize
    }

    /// `decay_pcp_high()` (6.7+, from vmstat_update() once a second): pcp->high falls by an
    /// eighth towards high_min (at once to what the list holds beyond `batch << 5`), and what
    /// the list holds above it is returned to be freed. Returns (pages to free, more to do).
    pub fn decay(&mut self) -> (usize, bool) {
        let mut todo = false;
        if self.high > self.high_min {
            let drop_to = self.list.len() as i64 - ((self.batch as i64) << PCP_BATCH_SCALE_MAX);
            self.high = (drop_to.max((self.high - (self.high >> 3)) as i64).max(self.high_min as i64)) as usize;
            todo = self.high > self.high_min;
        }
        let to_drain = self.list.len().saturating_sub(self.high);
        (to_drain, todo || to_drain > 0)
    }
}

/// `int_sqrt()` (lib/math/int_sqrt.c): the integer square root, rounded down.
pub fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

/// `calculate_min_free_kbytes()`: int_sqrt(lowmem_kbytes * 16), clamped to [128, 262144].
pub fn default_min_free_kbytes(total_pages: u64) -> u64 {
    let kb = total_pages * 4;
    int_sqrt(kb * 16).clamp(128, 262144)
}

/// `__setup_per_zone_wmarks()`: min is the zone's share of min_free_kbytes; low and high add
/// max(min/4, managed * watermark_scale_factor / 10000) once and twice.
pub fn watermarks(zone_pages: u64, total_pages: u64, min_free_kbytes: u64, scale_factor: u64) -> Watermarks {
    let min = (min_free_kbytes / 4) * zone_pages / total_pages.max(1);
    let step = (min / 4).max(zone_pages * scale_factor / 10000);
    Watermarks { min, low: min + step, high: min + 2 * step }
}

impl Sim {
    /// `memblock_free_all()` + `setup_per_zone_wmarks()` + pcp setup: every frame goes to the
    /// buddy, watermarks from vm.min_free_kbytes and vm.watermark_scale_factor.
    pub fn init_page_alloc(&mut self, cfg: &crate::config::Config) {
        let total: u64 = self.nodes.iter().map(|n| n.nr_pages as u64).sum();
        let min_free_kbytes = match cfg.int("vm.min_free_kbytes") {
            -1 => default_min_free_kbytes(total),
            v => v as u64,
        };
        let scale = cfg.int("vm.watermark_scale_factor") as u64;
        for node in 0..self.nodes.len() {
            let (start, nr) = (self.nodes[node].start_pfn, self.nodes[node].nr_pages);
            // Largest aligned blocks first, as memblock_free_all() does. The whole
            // MAX_PAGE_ORDER blocks stay pristine (not written: see FreeArea); the smaller
            // blocks at the node's end are written and listed.
            let full = nr >> MAX_PAGE_ORDER;
            let fa = &mut self.nodes[node].free_area;
            fa.pristine = full;
            fa.nr_free[MAX_PAGE_ORDER] += full as u64;
            self.nodes[node].nr_free += (full as u64) << MAX_PAGE_ORDER;
            let mut p = start + (full << MAX_PAGE_ORDER);
            for q in p..start + nr {
                self.frames[q as usize] = Frame::free(0);
            }
            while p < start + nr {
                let mut order = MAX_PAGE_ORDER;
                while order > 0 && ((p - start) % (1 << order) != 0 || p + (1 << order) > start + nr) {
                    order -= 1;
                }
                self.list_add(node, order, p);
                p += 1 << order;
            }
            self.nodes[node].wmark = watermarks(nr as u64, total, min_free_kbytes, scale);
        }
        // zone_pcp_update() after the watermarks (setup_per_zone_wmarks()): the high limits
        // of 5.14+ follow the low watermark, split over the node's CPUs.
        let (kver, cap) = (self.p.kver, self.p.pcp_batch_cap_pages);
        let setups: Vec<PcpSetup> = (0..self.nodes.len())
            .map(|node| {
                let local = (0..self.cpus.len()).filter(|&c| self.cpu_node(CpuId(c as u32)).0 as usize == node).count() as u64;
                let nr_cpus = if local == 0 { self.cpus.len() as u64 } else { local };
                PcpSetup::new(self.nodes[node].nr_pages as u64, self.nodes[node].wmark.low, nr_cpus, kver, cap)
            })
            .collect();
        self.pcp = (0..self.cpus.len()).map(|_| setups.iter().map(|&s| Pcp::new(s, kver)).collect()).collect();
        self.pcp_decay_at = vec![PCP_DECAY_INTERVAL_NS; self.cpus.len()];
    }

    // ------------------------------------------------------------------ buddy lists

    fn list_add(&mut self, node: usize, order: usize, pfn: u32) {
        let head = self.nodes[node].free_area.head[order];
        {
            let f = &mut self.frames[pfn as usize];
            f.lru_next = head;
            f.lru_prev = NIL;
            f.set_buddy_order(order);
            f.flags |= pg::BUDDY | pg::FREE;
        }
        if head != NIL {
            self.frames[head as usize].lru_prev = pfn;
        }
        let fa = &mut self.nodes[node].free_area;
        fa.head[order] = pfn;
        fa.nr_free[order] += 1;
        // NR_FREE_PAGES counts the buddy's pages only (__add_to_free_list → account_freepages();
        // 4.2: __free_one_page() and rmqueue_bulk()): a page on a pcp list is not free to the
        // watermarks.
        self.nodes[node].nr_free += 1 << order;
    }

    fn list_del(&mut self, node: usize, order: usize, pfn: u32) {
        let (n, p) = (self.frames[pfn as usize].lru_next, self.frames[pfn as usize].lru_prev);
        if p != NIL {
            self.frames[p as usize].lru_next = n;
        } else {
            self.nodes[node].free_area.head[order] = n;
        }
        if n != NIL {
            self.frames[n as usize].lru_prev = p;
        }
        // del_page_from_free_list(): __ClearPageBuddy() and set_page_private(page, 0).
        let f = &mut self.frames[pfn as usize];
        f.flags &= !pg::BUDDY;
        f.set_buddy_order(0);
        f.lru_next = NIL;
        f.lru_prev = NIL;
        self.nodes[node].free_area.nr_free[order] -= 1;
        self.nodes[node].nr_free -= 1 << order;
    }

    /// `__free_one_page()`: put a block back, merging with free buddies. Every frame of the
    /// block is already free ([`Frame::free`]: from a pcp list, split off a buddy block, or
    /// reset by the caller).
    pub(crate) fn free_one_page(&mut self, pfn: u32, order: usize) -> u32 {
        let node = self.pfn_to_nid(Pfn(pfn));
        // Struct pages this touches (a cache miss each when another CPU, or nobody lately,
        // touched them): the page, every buddy probed, the list neighbours of each merged
        // buddy, the list's first entry it links before.
        let mut touched = 1;
        let (start, end) = (self.nodes[node].start_pfn, self.nodes[node].start_pfn + self.nodes[node].nr_pages);
        let (mut pfn, mut order) = (pfn, order);
        for i in 0..(1u32 << order) {
            let f = &mut self.frames[(pfn + i) as usize];
            // A LUF tag (mm/luf.rs) stays with its frame while free, across merges.
            *f = Frame::free(f.luf());
        }
        while order < MAX_PAGE_ORDER {
            let rel = pfn - start;
            let buddy = start + (rel ^ (1 << order));
            if buddy < start || buddy + (1 << order) > end {
                break;
            }
            touched += 1;
            let b = &self.frames[buddy as usize];
            if b.flags & pg::BUDDY == 0 || b.buddy_order() != order {
                break;
            }
            touched += (b.lru_next != NIL) as u32 + (b.lru_prev != NIL) as u32;
            self.list_del(node, order, buddy);
            pfn = pfn.min(buddy);
            order += 1;
        }
        touched += self.nodes[node].free_area.nonempty(order) as u32;
        self.list_add(node, order, pfn);
        touched
    }

    /// Take the top pristine block of `node` off the order-MAX_PAGE_ORDER list and write its
    /// frames as `list_del()` leaves a block: every frame `Frame::free(0)` (no LUF tag: a
    /// pristine frame was never allocated). Returns its first pfn.
    fn take_pristine(&mut self, node: usize) -> u32 {
        let n = &mut self.nodes[node];
        debug_assert!(n.free_area.head[MAX_PAGE_ORDER] == NIL && n.free_area.pristine > 0);
        n.free_area.pristine -= 1;
        n.free_area.nr_free[MAX_PAGE_ORDER] -= 1;
        n.nr_free -= 1 << MAX_PAGE_ORDER;
        let b = n.start_pfn + (n.free_area.pristine << MAX_PAGE_ORDER);
        self.frames[b as usize..(b + (1 << MAX_PAGE_ORDER)) as usize].fill(Frame::free(0));
        b
    }

    /// Write every pristine block of every node into the frame table and link it where the
    /// eager list had it (after the explicit blocks, in descending address order). Nothing
    /// the model computes changes: this is the representation boot used to build (a test
    /// compares runs with and without it). `alloc_contig_pages()` and the structural checkers
    /// call it before they read free frames.
    pub fn materialize_free_lists(&mut self) {
        for node in 0..self.nodes.len() {
            let n = self.nodes[node].free_area.pristine;
            if n == 0 {
                continue;
            }
            let start = self.nodes[node].start_pfn;
            let mut tail = self.max_order_explicit_tail(node);
            self.frames[start as usize..(start + (n << MAX_PAGE_ORDER)) as usize].fill(Frame::free(0));
            for k in (0..n).rev() {
                let b = start + (k << MAX_PAGE_ORDER);
                let f = &mut self.frames[b as usize];
                f.flags |= pg::BUDDY;
                f.set_buddy_order(MAX_PAGE_ORDER);
                f.lru_prev = tail;
                f.lru_next = if k > 0 { b - (1 << MAX_PAGE_ORDER) } else { NIL };
                if tail == NIL {
                    self.nodes[node].free_area.head[MAX_PAGE_ORDER] = b;
                } else {
                    self.frames[tail as usize].lru_next = b;
                }
                tail = b;
            }
            self.nodes[node].free_area.pristine = 0;
        }
    }

    /// The last written block of `node`'s order-MAX_PAGE_ORDER list (NIL if none).
    fn max_order_explicit_tail(&self, node: usize) -> u32 {
        let (mut p, mut tail) = (self.nodes[node].free_area.head[MAX_PAGE_ORDER], NIL);
        while p != NIL {
            tail = p;
            p = self.frames[p as usize].lru_next;
        }
        tail
    }

    /// Pages of `node` in pristine blocks, `[start_pfn, start_pfn + this)`: free, in the buddy,
    /// and not written in the frame table.
    #[inline]
    pub fn pristine_pages(&self, node: usize) -> u32 {
        self.nodes[node].free_area.pristine << MAX_PAGE_ORDER
    }

    /// Frames written so far (the frame table's pages the host has been asked to back):
    /// every frame but the pristine ones.
    pub fn frames_written(&self) -> u64 {
        self.frames.len() as u64 - (0..self.nodes.len()).map(|n| self.pristine_pages(n) as u64).sum::<u64>()
    }

    /// `__rmqueue_smallest()` + `expand()`: an order-`order` block from node `node`'s buddy.
    fn rmqueue_smallest(&mut self, node: usize, order: usize) -> Option<u32> {
        self.rmqueue_smallest_touched(node, order).map(|(p, _)| p)
    }

    /// [`Sim::rmqueue_smallest`] with the struct pages it touched: the block's first page, the
    /// list entry after it, and each upper half `expand()` links (with the entry it links
    /// before).
    fn rmqueue_smallest_touched(&mut self, node: usize, order: usize) -> Option<(u32, u32)> {
        for o in order..=MAX_PAGE_ORDER {
            let head = self.nodes[node].free_area.head[o];
            let head = if head != NIL {
                self.list_del(node, o, head);
                head
            } else if o == MAX_PAGE_ORDER && self.nodes[node].free_area.pristine > 0 {
                self.take_pristine(node)
            } else {
                continue;
            };
            // The entry after it, if any (explicit or pristine): what the list still holds.
            let mut touched = 1 + self.nodes[node].free_area.nonempty(o) as u32;
            // expand(): give back the upper halves.
            let mut size = 1u32 << o;
            let mut cur = o;
            while cur > order {
                cur -= 1;
                size >>= 1;
                touched += 1 + self.nodes[node].free_area.nonempty(cur) as u32;
                self.list_add(node, cur, head + size);
            }
            return Some((head, touched));
        }
        None
    }

    /// Free pages of a node as NR_FREE_PAGES: the buddy's only, not the pages on its CPUs' pcp
    /// lists (which is why the watermarks can fail with free pages on pcp lists, and why an
    /// allocation that fails after direct reclaim drains them: [`Sim::drain_all_pages`]).
    pub fn node_free_pages(&self, node: usize) -> u64 {
        self.nodes[node].nr_free
    }

    /// Pages on every CPU's pcp lists (free, but not counted in NR_FREE_PAGES).
    pub fn nr_pcp_pages(&self) -> u64 {
        self.pcp.iter().flatten().map(|p| p.list.len() as u64).sum()
    }

    pub fn nr_free_pages(&self) -> u64 {
        self.nodes.iter().map(|n| n.nr_free).sum()
    }

    fn prep_new_page(&mut self, pfn: u32, order: usize) {
        if self.p.luf.on() {
            // LUF: a page leaving pcp/buddy is flushed first if it still owes a deferred flush.
            for i in 0..(1u32 << order) {
                self.luf_takeoff(Pfn(pfn + i));
            }
        }
        for i in 0..(1u32 << order) {
            let f = &mut self.frames[(pfn + i) as usize];
            debug_assert!(f.flags & pg::FREE != 0, "simulator bug: allocating a busy frame {}", pfn + i);
            // Its LUF tag, if any, was consumed above (with kernel.luf off no frame has one).
            *f = Frame::allocated((i == 0) as u32);
            self.last_cpupid.reset(Pfn(pfn + i));
        }
        if self.oracle.is_some() {
            self.oracle_alloc(Pfn(pfn), order);
        }
        self.vmstat.add(VmEvent::PGALLOC, 1 << order);
    }

    /// Take one order-0 page from a node without any watermark check or reclaim (boot-time and
    /// kernel-internal allocations). Falls back to the other nodes in id order.
    pub fn alloc_page(&mut self, nid: NodeId) -> Option<Pfn> {
        self.alloc_pages_node_nocheck(nid, 0)
    }

    /// An order-`order` block, no watermark check, falling back over nodes in id order.
    pub fn alloc_pages_node_nocheck(&mut self, nid: NodeId, order: usize) -> Option<Pfn> {
        let n = self.nodes.len();
        for i in 0..n {
            let node = (nid.0 as usize + i) % n;
            if let Some(p) = self.rmqueue_smallest(node, order) {
                self.prep_new_page(p, order);
                return Some(Pfn(p));
            }
        }
        None
    }

    /// `rmqueue()` for order 0 through the CPU's pcp list of that node (refilled from the
    /// buddy by `rmqueue_bulk()` when empty, as many pages as [`Pcp::alloc_refill`] says).
    fn rmqueue_pcp(&mut self, cpu: CpuId, node: usize) -> Option<u32> {
        let ci = cpu.0 as usize;
        self.pcp_decay_due(cpu);
        let refill = self.pcp[ci][node].alloc_refill(self.p.kver, self.nodes[node].zone_flags);
        if refill > 0 {
            let (mut got, mut touched) = (0, 0u32);
            for _ in 0..refill {
                match self.rmqueue_smallest_touched(node, 0) {
                    Some((p, t)) => {
                        self.pcp[ci][node].list.push(Pfn(p));
                        got += 1;
                        touched += t;
                    }
                    None => break,
                }
            }
            // rmqueue_bulk() under zone->lock (spin_lock_irqsave): one dependent cache miss
            // per struct page the buddy's list work touched.
            if got > 0 {
                self.kfn_enter(cpu, KFn::RmqueueBulk);
                let work = self.miss_ns(cpu, NodeId(node as u32)) * touched as f64;
                self.lock_section(cpu, LockId::Zone(node as u32), Mode::Exclusive, work);
                self.charge_sys(cpu, work);
                self.kfn_exit(cpu);
            }
            // The pages left the buddy: NR_FREE_PAGES fell by `got` (rmqueue_bulk()), and the
            // pcp list's pages do not count as free until they go back.
            self.runahead_start(true, self.nodes[node].free_area.head[0]);
        } else {
            // Host speed only (as `Sim::lru_runahead`): the next refill takes order-0 blocks
            // from the head of this list one by one, a chain of dependent host cache misses;
            // each allocation between refills warms one more frame of it.
            self.runahead_step(true);
        }
        let p = self.pcp[ci][node].list.pop().map(|p| p.0);
        // Host speed only: the frame the next allocation from this list gets.
        if let Some(&next) = self.pcp[ci][node].list.last() {
            self.prefetch_frame(next.0);
        }
        p
    }

    /// `zone_watermark_ok()` for an order-0 allocation against `mark`.
    pub fn watermark_ok(&self, node: usize, mark: u64) -> bool {
        self.nodes[node].nr_free > mark
    }

    /// `get_page_from_freelist()` for one page on `cpu`, trying the local node first and then
    /// the others (zonelist order), each only above watermark `which`.
    fn get_page_from_freelist(&mut self, cpu: CpuId, nid: NodeId, which: fn(&Watermarks) -> u64) -> Option<Pfn> {
        let n = self.nodes.len();
        for i in 0..n {
            let node = (nid.0 as usize + i) % n;
            self.note_below_high(node);
            let mark = which(&self.nodes[node].wmark);
            if !self.watermark_ok(node, mark) {
                continue;
            }
            if let Some(p) = self.rmqueue_pcp(cpu, node) {
                self.prep_new_page(p, 0);
                return Some(Pfn(p));
            }
        }
        None
    }

    /// One order-0 page from node `node` only (`__GFP_THISNODE`), through `cpu`'s pcp list, if
    /// the node is above watermark `mark`; no reclaim (demotion's GFP_NOWAIT allocations).
    pub fn alloc_pages_thisnode(&mut self, cpu: CpuId, node: usize, mark: u64) -> Option<Pfn> {
        self.note_below_high(node);
        if !self.watermark_ok(node, mark) {
            return None;
        }
        let p = self.rmqueue_pcp(cpu, node)?;
        self.prep_new_page(p, 0);
        Some(Pfn(p))
    }

    /// `__alloc_pages()` for one order-0 page in task context on `cpu`: the fast path above the
    /// low watermark; else wake kswapd, try above min, then direct reclaim (which runs on this
    /// CPU and costs this task's time), then OOM (None: the caller kills the task and the run
    /// counts it). Never panics on exhaustion.
    ///
    /// In a fault whose access the workload replays (`defer_direct_reclaim`), the direct
    /// reclaim is left to the task's next steps and None returned with
    /// `direct_reclaim_deferred` set (the fault's later allocations return None too);
    /// `handle_mm_fault()` then asks for the access to be replayed, unless the fault got its
    /// page, and a readahead window stopped by it is read when the reclaim is over
    /// (mm/readahead.rs `RaCut`). Departure: in Linux the allocation waits inside the fault;
    /// the model ends the step so that other CPUs' reclaim batches interleave with this one's.
    pub fn alloc_pages(&mut self, cpu: CpuId, nid: NodeId) -> Option<Pfn> {
        if let Some(p) = self.get_page_from_freelist(cpu, nid, |w| w.low) {
            return Some(p);
        }
        // __alloc_pages_slowpath(): wake_all_kswapds(), then retry against min.
        self.wake_all_kswapds(cpu, nid);
        if let Some(p) = self.get_page_from_freelist(cpu, nid, |w| w.min) {
            return Some(p);
        }
        if self.defer_direct_reclaim {
            // The fault's access will be replayed: the reclaim runs in the task's next steps,
            // a batch each, between other CPUs' steps (mm/vmscan.rs `DirectReclaim`).
            if self.direct_reclaim_deferred {
                return None;
            }
            if let Some(t) = self.cpus[cpu.0 as usize].current {
                if self.task(t).direct_reclaim.is_none() && !self.task(t).direct_reclaim_failed {
                    let dr = self.direct_reclaim_begin(cpu, nid);
                    self.task_mut(t).direct_reclaim = Some(Box::new(dr));
                    self.direct_reclaim_deferred = true;
                    return None;
                }
            }
        }
        for _ in 0..16 {
            let reclaimed = self.try_to_free_pages(cpu, nid);
            if let Some(p) = self.get_page_from_freelist(cpu, nid, |w| w.min) {
                return Some(p);
            }
            if reclaimed == 0 {
                break;
            }
            // __alloc_pages_direct_reclaim(): "If an allocation failed after direct reclaim, it
            // could be because pages are pinned on the per-cpu lists. Drain them and try again."
            self.drain_all_pages(cpu);
            if let Some(p) = self.get_page_from_freelist(cpu, nid, |w| w.min) {
                return Some(p);
            }
        }
        // Last resort below min (ALLOC_HARDER/OOM victim reserves), then OOM.
        if let Some(p) = self.alloc_page(nid) {
            return Some(p);
        }
        self.oom_events += 1;
        self.vmstat.count(VmEvent::OOM_KILL);
        None
    }

    /// `free_unref_page()`: an order-0 page goes to the pcp list of the CPU doing the freeing (if
    /// any), which spills its oldest pages to the buddy when it reaches its high limit (how
    /// many, and the limit, per version: [`Pcp::free_commit`]).
    pub fn free_page(&mut self, pfn: Pfn) {
        self.free_page_luf(pfn, 0);
    }

    /// [`Sim::free_page`] of a page that carries LUF tag `luf` while free (0 = none; LUF's
    /// `free_unref_page(page, order, ugen)`, mm/luf.rs).
    pub fn free_page_luf(&mut self, pfn: Pfn, luf: u16) {
        let f = &self.frames[pfn.0 as usize];
        assert!(f.flags & pg::FREE == 0, "simulator bug: double free of {pfn}");
        assert!(f.flags & pg::ZERO == 0, "simulator bug: freeing the zero page");
        debug_assert_eq!(f.mapcount, 0, "simulator bug: freeing mapped frame {pfn}");
        debug_assert!(f.flags & pg::LRU == 0, "simulator bug: freeing a frame still on an LRU list {pfn}");
        let node = self.pfn_to_nid(pfn);
        if self.oracle.is_some() {
            self.oracle_free(pfn, 0, luf != 0);
        }
        self.vmstat.count(VmEvent::PGFREE);
        // The old mapping and index go; the tag takes the index's place.
        self.frames[pfn.0 as usize] = Frame::free(luf);
        let Some(cpu) = self.running_cpu else {
            self.free_one_page(pfn.0, 0);
            return;
        };
        self.pcp_decay_due(cpu);
        let (kver, zf) = (self.p.kver, self.nodes[node].zone_flags);
        let pcp = &mut self.pcp[cpu.0 as usize][node];
        pcp.list.push(pfn);
        let n = pcp.free_commit(kver, zf).min(pcp.list.len());
        if n > 0 {
            // free_pcppages_bulk(): the oldest `n` pages go back to the buddy.
            self.free_pcppages_bulk(cpu, cpu, node, n);
            if kver >= PCP_AUTOTUNE_SINCE && zf.below_high && self.watermark_ok(node, self.nodes[node].wmark.high) {
                self.nodes[node].zone_flags.below_high = false;
            }
        }
    }

    /// 6.7+: the decay_pcp_high() runs of `cpu`'s vmstat_update() that are due by its clock,
    /// each over every zone, freeing what each list holds above its lowered pcp->high.
    /// Departure: vmstat_update() is a per-CPU work item every second (`vm.stat_interval`);
    /// the model runs the ones due when the CPU next frees or allocates through its pcp
    /// lists, on its clock and in whatever it is doing, and skips the intervals after the
    /// one that left nothing to do (as the work stops re-queueing itself).
    fn pcp_decay_due(&mut self, cpu: CpuId) {
        if self.p.kver < PCP_AUTOTUNE_SINCE {
            return;
        }
        let ci = cpu.0 as usize;
        let now = self.now(cpu);
        while self.pcp_decay_at[ci] <= now {
            self.pcp_decay_at[ci] += PCP_DECAY_INTERVAL_NS;
            let mut todo = false;
            for node in 0..self.nodes.len() {
                let (n, more) = self.pcp[ci][node].decay();
                if n > 0 {
                    self.free_pcppages_bulk(cpu, cpu, node, n);
                }
                todo |= more;
            }
            if !todo {
                let at = self.pcp_decay_at[ci];
                if at <= now {
                    self.pcp_decay_at[ci] = at + (now - at) / PCP_DECAY_INTERVAL_NS * PCP_DECAY_INTERVAL_NS + PCP_DECAY_INTERVAL_NS;
                }
                break;
            }
        }
    }

    /// `get_page_from_freelist()` (6.7+): a zone found at or below its high watermark is
    /// marked ZONE_BELOW_HIGH, so that frees shrink its pcp lists (cleared by a pcp drain that
    /// leaves the zone above it).
    fn note_below_high(&mut self, node: usize) {
        if self.p.kver >= PCP_AUTOTUNE_SINCE && !self.nodes[node].zone_flags.below_high && !self.watermark_ok(node, self.nodes[node].wmark.high) {
            self.nodes[node].zone_flags.below_high = true;
        }
    }

    /// `free_pcppages_bulk()` run by `cpu`: the oldest `count` pages of `owner`'s pcp list for
    /// `node` go back to the buddy, under zone->lock (spin_lock_irqsave): one dependent cache
    /// miss per page merged back into a buddy list.
    fn free_pcppages_bulk(&mut self, cpu: CpuId, owner: CpuId, node: usize, count: usize) {
        // Under zone->lock (spin_lock_irqsave), one cache miss per struct page the buddy's
        // list work touched (Aaron Lu, 2018: "the most time consuming part of operations under
        // zone->lock is cache misses on struct page").
        let touched = self.pcp_to_buddy(owner, node, count);
        self.kfn_enter(cpu, KFn::FreePcppagesBulk);
        let work = self.miss_ns(cpu, NodeId(node as u32)) * touched as f64;
        self.lock_section(cpu, LockId::Zone(node as u32), Mode::Exclusive, work);
        self.charge_sys(cpu, work);
        self.kfn_exit(cpu);
    }

    /// The oldest `count` pages of `owner`'s pcp list for `node` back into the buddy (the list
    /// work of free_pcppages_bulk(), without its cost).
    fn pcp_to_buddy(&mut self, owner: CpuId, node: usize, count: usize) -> u32 {
        let out: Vec<Pfn> = self.pcp[owner.0 as usize][node].list.drain(..count).collect();
        // Host speed only: the pages' frames are scattered, and each merge starts with a host
        // cache miss on the page and its order-0 buddy; start them a few pages ahead
        // (docs/performance.md, item 35).
        const AHEAD: usize = 4;
        for p in out.iter().take(AHEAD) {
            self.prefetch_frame_and_buddy(p.0);
        }
        let mut touched = 0;
        for (i, p) in out.iter().enumerate() {
            if let Some(next) = out.get(i + AHEAD) {
                self.prefetch_frame_and_buddy(next.0);
            }
            touched += self.free_one_page(p.0, 0);
        }
        touched
    }

    /// Host speed only: the first line of `pfn`'s frame and the line of its order-0 buddy's
    /// `lru_prev` (nodes are whole MiB, so every node starts at an even pfn and that buddy is
    /// `pfn ^ 1`). Two prefetches, not `Sim::prefetch_frame` twice: its four were measured
    /// 5% slower on `reproduce batched-flush --scale 16` (two runs).
    #[inline]
    fn prefetch_frame_and_buddy(&self, pfn: u32) {
        if let Some(f) = self.frames.get(pfn as usize) {
            crate::hw::prefetch(f);
        }
        if let Some(b) = self.frames.get((pfn ^ 1) as usize) {
            crate::hw::prefetch(&b.lru_prev);
        }
    }

    /// `drain_pages(cpu)` run by `by`: every node's list of `owner` emptied, each a
    /// free_pcppages_bulk() on `by`'s clock.
    fn drain_pages(&mut self, by: CpuId, owner: CpuId) {
        for node in 0..self.nodes.len() {
            let n = self.pcp[owner.0 as usize][node].list.len();
            if n > 0 {
                self.free_pcppages_bulk(by, owner, node, n);
            }
        }
    }

    /// Some node of the zonelist of an allocation on `nid` is above its min watermark
    /// (`get_page_from_freelist()` with ALLOC_WMARK_MIN would find a page).
    pub fn min_watermark_ok(&self, nid: NodeId) -> bool {
        let _ = nid;
        (0..self.nodes.len()).any(|node| self.watermark_ok(node, self.nodes[node].wmark.min))
    }

    /// `drain_all_pages(NULL)`, called by `__alloc_pages_direct_reclaim()` when the allocation
    /// after a reclaim that made progress fails: every CPU's pcp pages go back to the buddy,
    /// where NR_FREE_PAGES counts them (the reclaimers freed their pages to their own pcp
    /// lists). How, per version:
    /// - before 4.11, `on_each_cpu_mask(&cpus_with_pcps, drain_local_pages, NULL, 1)`: a
    ///   function-call IPI to every other CPU with pcp pages, whose handler empties them under
    ///   each zone's zone->lock with interrupts off; the caller drains its own lists and spins
    ///   until the last handler is done. Every failing reclaimer drains, so on many CPUs the
    ///   handlers queue on the zone locks ("mm, page_alloc: drain per-cpu pages from workqueue
    ///   context", 4.11, replaced the IPIs);
    /// - 4.11 to 5.19, the same lists drained by a work item queued on each of those CPUs
    ///   (`drain_local_pages_wq`, kworker), the caller asleep in flush_work() until the last is
    ///   done; and only one drain at a time: one that finds `pcpu_drain_mutex` held returns at
    ///   once (mutex_trylock);
    /// - 6.0+, the caller empties every CPU's lists itself ("mm/page_alloc: remotely drain
    ///   per-cpu lists"), under the same mutex.
    ///
    /// Departures: the kworker's time on a target is charged as stolen interrupt time after a
    /// reschedule IPI (two context switches and the drain); the mutex remembers the last
    /// drain's interval of simulated time only.
    pub fn drain_all_pages(&mut self, cpu: CpuId) {
        self.vmstat.count(VmEvent::DRAIN_ALL_PAGES);
        let with: Vec<CpuId> = (0..self.cpus.len()).filter(|&c| self.pcp[c].iter().any(|p| !p.list.is_empty())).map(|c| CpuId(c as u32)).collect();
        let t0 = self.now(cpu);
        if self.p.kver >= (4, 11) {
            // mutex_trylock(&pcpu_drain_mutex) fails while another drain holds it. (A CPU whose
            // clock lags may run after a drain that, in simulated time, starts later: it is not
            // refused by it.)
            let (from, until) = self.pcpu_drain;
            if from <= t0 && t0 < until {
                return;
            }
        }
        self.kfn_enter(cpu, KFn::DrainAllPages);
        if self.p.kver >= (6, 0) {
            for &c in &with {
                self.drain_pages(cpu, c);
            }
        } else {
            let wq = self.p.kver >= (4, 11);
            let mut done = t0;
            let mut sent = 0u32;
            for &c in &with {
                if c == cpu {
                    continue;
                }
                sent += 1;
                let taken = self.ipi_taken_at(cpu, c, t0, sent);
                // The handler (or the kworker after two context switches) empties c's lists.
                let start = if wq { taken + round_ns(2.0 * self.p.context_switch_ns) } else { taken + round_ns(self.p.ipi_handle_ns) };
                let mut end = start;
                for node in 0..self.nodes.len() {
                    let n = self.pcp[c.0 as usize][node].list.len();
                    if n == 0 {
                        continue;
                    }
                    self.pcp_to_buddy(c, node, n);
                    let work = self.miss_ns(c, NodeId(node as u32)) * n as f64;
                    end = self.lock_section_at(c, LockId::Zone(node as u32), end, work, KFn::FreePcppagesBulk);
                }
                self.steal_irq_time_in(c, taken, end - taken, KFn::FreePcppagesBulk);
                if !wq {
                    // The CAL line of /proc/interrupts (a kworker's wake-up is a RES one, not counted).
                    self.cpus[c.0 as usize].stats.irq_call_count += 1;
                }
                done = done.max(end);
            }
            self.kfn_enter(cpu, KFn::SmpCallFunctionManyCond);
            if sent > 0 {
                self.charge_sys(cpu, self.p.ipi_send_ns * sent as f64);
            }
            self.kfn_exit(cpu);
            // The caller's own lists (drain_local_pages() in place, or its own work item).
            self.drain_pages(cpu, cpu);
            let now = self.now(cpu);
            if done > now {
                if wq {
                    // flush_work(): asleep, the CPU idles.
                    self.cpus[cpu.0 as usize].clock = done;
                } else {
                    // smp_call_function_many(..., wait=1): spinning.
                    self.kfn_enter(cpu, KFn::SmpCallFunctionManyCond);
                    self.charge_sys_ns(cpu, done - now);
                    self.kfn_exit(cpu);
                }
            }
        }
        self.kfn_exit(cpu);
        if self.p.kver >= (4, 11) {
            self.pcpu_drain = (t0, self.now(cpu));
        }
    }

    /// Free a whole block of `1 << order` pages straight to the buddy (huge pages, contiguous runs).
    pub fn free_pages_order(&mut self, pfn: Pfn, order: usize) {
        if self.oracle.is_some() {
            self.oracle_free(pfn, order, false);
        }
        self.vmstat.add(VmEvent::PGFREE, 1 << order);
        for f in &mut self.frames[pfn.0 as usize..(pfn.0 + (1 << order)) as usize] {
            *f = Frame::free(0);
        }
        self.free_one_page(pfn.0, order);
    }

    /// `alloc_contig_pages()`: `nr` contiguous free pages on `nid`, aligned to `align` pages, for
    /// runs larger than MAX_PAGE_ORDER (1 GiB huge pages). Departure: Linux migrates movable
    /// pages out of the way (alloc_contig_range); here only already-free ranges qualify.
    pub fn alloc_contig_pages(&mut self, nid: NodeId, nr: u32, align: u32) -> Option<Pfn> {
        let node = nid.0 as usize;
        self.drain_pcp(node);
        // The scan below reads free frames: write the pristine blocks first.
        self.materialize_free_lists();
        let (start, end) = (self.nodes[node].start_pfn, self.nodes[node].start_pfn + self.nodes[node].nr_pages);
        let mut base = start.div_ceil(align) * align;
        while base + nr <= end {
            match (base..base + nr).find(|&p| self.frames[p as usize].flags & pg::FREE == 0) {
                Some(busy) => base = (busy + 1).div_ceil(align) * align,
                None => {
                    // Pull every buddy block inside the run off its list, then carve the run.
                    let mut p = base;
                    while p < base + nr {
                        // The head of the free block containing p: the buddy-aligned frame at
                        // some order that carries pg::BUDDY with that order (p itself may sit
                        // on a pcp list: drained above, so every free frame is in the buddy).
                        let head = (0..=MAX_PAGE_ORDER)
                            .map(|o| (o, start + ((p - start) & !((1u32 << o) - 1))))
                            .find(|&(o, h)| {
                                let f = &self.frames[h as usize];
                                f.flags & pg::BUDDY != 0 && f.buddy_order() == o
                            })
                            .map(|(_, h)| h)
                            .unwrap_or_else(|| panic!("simulator bug: free frame {p} not in a buddy block"));
                        let order = self.frames[head as usize].buddy_order();
                        self.list_del(node, order, head);
                        // Give back the parts of the block outside the run.
                        for q in head..head + (1 << order) {
                            if q < base || q >= base + nr {
                                self.free_one_page(q, 0);
                            } else {
                                self.frames[q as usize].flags &= !pg::BUDDY;
                            }
                        }
                        p = head + (1 << order);
                    }
                    if self.p.luf.on() {
                        for q in base..base + nr {
                            self.luf_takeoff(Pfn(q));
                        }
                    }
                    for q in base..base + nr {
                        self.frames[q as usize] = Frame::allocated((q == base) as u32);
                        self.last_cpupid.reset(Pfn(q));
                    }
                    self.vmstat.add(VmEvent::PGALLOC, nr as u64);
                    return Some(Pfn(base));
                }
            }
        }
        None
    }

    /// `free_contig_range()`.
    pub fn free_contig_range(&mut self, pfn: Pfn, nr: u32) {
        for p in pfn.0..pfn.0 + nr {
            let f = &mut self.frames[p as usize];
            f.refcount = 0;
            self.free_pages_order(Pfn(p), 0);
        }
    }

    /// `drain_pages()`: return a node's pcp pages on every CPU to the buddy.
    pub fn drain_pcp(&mut self, node: usize) {
        for ci in 0..self.pcp.len() {
            let n = self.pcp[ci][node].list.len();
            self.pcp_to_buddy(CpuId(ci as u32), node, n);
        }
    }

    /// `folio_put()`: drop a reference, freeing the frame at zero.
    pub fn put_page(&mut self, pfn: Pfn) {
        self.put_page_luf(pfn, 0);
    }

    /// [`Sim::put_page`] handing the frame LUF tag `luf` if this drops the last reference
    /// (`folio_put_ugen()`, mm/luf.rs); a frame that stays in use takes no tag.
    pub fn put_page_luf(&mut self, pfn: Pfn, luf: u16) {
        let f = &mut self.frames[pfn.0 as usize];
        if f.flags & pg::ZERO != 0 {
            return;
        }
        assert!(f.refcount > 0, "simulator bug: refcount underflow on {pfn}");
        f.refcount -= 1;
        if f.refcount == 0 {
            if f.flags & pg::LRU != 0 {
                self.lru_del(pfn);
            }
            self.free_page_luf(pfn, luf);
        }
    }

    pub fn get_page(&mut self, pfn: Pfn) {
        let f = &mut self.frames[pfn.0 as usize];
        if f.flags & pg::ZERO == 0 {
            f.refcount += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_watermarks_follow_the_kernel_formula() {
        // 16 GiB node: min_free_kbytes = sqrt(16 GiB in KiB * 16) = 16384 KiB.
        let pages = 4 << 20;
        assert_eq!(default_min_free_kbytes(pages), 16384);
        let w = watermarks(pages, pages, 16384, 10);
        assert_eq!(w.min, 4096);
        assert_eq!(w.low, 4096 + 4194); // max(1024, 0.1% of 4M pages)
        assert_eq!(w.high, 4096 + 2 * 4194);
    }

    fn sim(mib: u64) -> Sim {
        let cfg = crate::config::Config::defaults(&["machine.cpus=2".into(), format!("machine.mem_per_node_mib={mib}")]).unwrap();
        Sim::new(&cfg)
    }

    /// Buddy invariant: free counts match the lists, and freeing everything merges back into
    /// maximal blocks.
    #[test]
    fn buddy_splits_and_merges_back() {
        let mut s = sim(16);
        let total = s.nr_free_pages();
        let count = |s: &Sim| (0..=MAX_PAGE_ORDER).map(|o| s.nodes[0].free_area.nr_free[o] << o).sum::<u64>();
        assert_eq!(count(&s), total);
        let mut got = Vec::new();
        for i in 0..200usize {
            let order = i % 4;
            let p = s.alloc_pages_node_nocheck(NodeId(0), order).unwrap();
            got.push((p, order));
        }
        let used: u64 = got.iter().map(|&(_, o)| 1u64 << o).sum();
        assert_eq!(s.nr_free_pages(), total - used);
        assert_eq!(count(&s), total - used);
        for (p, o) in got.into_iter().rev() {
            s.frames[p.0 as usize].refcount = 0;
            s.free_pages_order(p, o);
        }
        assert_eq!(s.nr_free_pages(), total);
        assert_eq!(count(&s), total);
        // 16 MiB = 4096 pages = four order-10 blocks; the zero page took one page, so after
        // freeing everything else the lists hold that split block and three whole ones.
        assert_eq!(s.nodes[0].free_area.nr_free[MAX_PAGE_ORDER], 3);
    }

    #[test]
    fn contiguous_runs_beyond_the_max_order() {
        let mut s = sim(64);
        let before = s.nr_free_pages();
        let p = s.alloc_contig_pages(NodeId(0), 4096, 4096).expect("16 MiB aligned run");
        assert_eq!(p.0 % 4096, 0);
        assert_eq!(s.nr_free_pages(), before - 4096);
        s.free_contig_range(p, 4096);
        assert_eq!(s.nr_free_pages(), before);
    }

    /// zone_batchsize(): 512 KiB of pages before 4.19, 1 MiB since; the thresholds of the
    /// kernel's formula (31 from 90,112 managed pages, 63 from 176,128; 0 under 8,192).
    #[test]
    fn zone_batchsize_per_version() {
        for v in [(4, 2), (4, 18)] {
            assert_eq!(zone_batchsize(4 << 20, v), 31);
            assert_eq!(zone_batchsize(90_112, v), 31);
            assert_eq!(zone_batchsize(90_111, v), 15);
        }
        for v in [(4, 19), (5, 13), (6, 18)] {
            assert_eq!(zone_batchsize(4 << 20, v), 63);
            assert_eq!(zone_batchsize(176_128, v), 63);
            assert_eq!(zone_batchsize(176_127, v), 31);
        }
        assert_eq!(zone_batchsize(24_576, (6, 18)), 7, "6 + 3 rounds down to 8, less one");
        assert_eq!(zone_batchsize(8_191, (6, 18)), 0);
    }

    /// pcp->batch and the high limits per version. The 6.18 rows are this host's
    /// /proc/zoneinfo (2 CPUs on node 0): ZONE_NORMAL (managed 5,394,266, low watermark
    /// 20,163) shows batch 63, high_min 10,081, high_max 337,141; ZONE_DMA32 (772,918 and
    /// 2,888) 63, 1,444, 48,307; ZONE_DMA (3,840 and 13) 1, 6, 240. The pre-4.19 formula gives
    /// large zones "hi: 186, btch: 31", as a zoneinfo dump of an older kernel quoted in
    /// openzfs/spl issue #116 shows; 5.13's changelog of the 5.14 series
    /// quotes "high: 378, batch: 63".
    #[test]
    fn pcp_setup_per_version() {
        let s = |managed, low, cpus, v| {
            let p = PcpSetup::new(managed, low, cpus, v, pcp_batch_cap_pages(v));
            (p.batch, p.high_min, p.high_max)
        };
        assert_eq!(s(5_394_266, 20_163, 2, (6, 18)), (63, 10_081, 337_141));
        assert_eq!(s(772_918, 2_888, 2, (6, 18)), (63, 1_444, 48_307));
        assert_eq!(s(3_840, 13, 2, (6, 18)), (1, 6, 240));
        assert_eq!(s(4 << 20, 20_000, 12, (4, 2)), (31, 186, 186));
        assert_eq!(s(4 << 20, 20_000, 12, (5, 13)), (63, 378, 378));
        assert_eq!(s(4 << 20, 20_000, 12, (5, 14)), (63, 1_666, 1_666));
        assert_eq!(s(4 << 20, 2_000, 12, (5, 14)), (63, 252, 252), "at least 4 x batch");
        assert_eq!(s(4 << 20, 20_000, 12, (6, 9)), (63, 1_666, 43_690));
    }

    /// `kernel.pcp_batch_cap_kib` replaces the version's cap (d8a759b57035's experiment: 4.18
    /// with batch 31, 63 and 127); -1 keeps it.
    #[test]
    fn the_batch_cap_knob_sets_the_batch() {
        assert_eq!(zone_batchsize_capped(4 << 20, 512), 127);
        let batch = |sets: &[&str]| {
            let mut all = vec!["machine.mem_per_node_mib=2048".to_string(), "kernel.preset=linux-4.14".to_string(), "workload.kind=synthetic".to_string()];
            all.extend(sets.iter().map(|s| s.to_string()));
            let cfg = crate::config::Config::defaults(&all).unwrap();
            let sim = crate::sim::Sim::build(&cfg).unwrap();
            (sim.pcp[0][0].batch, sim.pcp[0][0].high_max)
        };
        assert_eq!(batch(&[]), (31, 186));
        assert_eq!(batch(&["kernel.pcp_batch_cap_kib=-1"]), (31, 186));
        assert_eq!(batch(&["kernel.pcp_batch_cap_kib=1024"]), (63, 378));
        assert_eq!(batch(&["kernel.pcp_batch_cap_kib=2048"]), (127, 762));
    }

    fn pcp_with(v: (u32, u32), count: usize) -> Pcp {
        let mut p = Pcp::new(PcpSetup::new(4 << 20, 20_000, 12, v, pcp_batch_cap_pages(v)), v);
        p.list = (0..count as u32).map(Pfn).collect();
        p
    }

    /// Frees: 4.2 spills `batch` when the list reaches 6 x batch; 5.14 spills more each time
    /// frees come with no allocation between (free_factor), and caps the list at 4 x batch
    /// while kswapd runs; 6.7+ raises pcp->high when a free fills the list while memory is
    /// plentiful, and lowers it when the zone is below its high watermark.
    #[test]
    fn pcp_frees_per_version() {
        let quiet = ZoneFlags::default();
        let reclaim = ZoneFlags { reclaim_active: true, below_high: false };
        let low = ZoneFlags { reclaim_active: false, below_high: true };
        let mut p = pcp_with((4, 2), 185);
        assert_eq!(p.free_commit((4, 2), quiet), 0);
        p.list.push(Pfn(185));
        assert_eq!(p.free_commit((4, 2), quiet), 31);

        let v = (5, 14);
        let mut p = pcp_with(v, 1_666);
        let frees: Vec<usize> = (0..4).map(|_| p.free_commit(v, quiet)).collect();
        assert_eq!(frees, vec![63, 126, 252, 504], "each drain without an allocation between doubles");
        p.alloc_refill(v, quiet);
        p.alloc_refill(v, quiet);
        assert_eq!(p.free_commit(v, quiet), 126, "two allocations halve it twice");
        let mut p = pcp_with(v, 300);
        assert_eq!(p.free_commit(v, quiet), 0);
        assert_eq!(p.free_commit(v, reclaim), 63, "252 while kswapd runs");

        let v = (6, 9);
        let mut p = pcp_with(v, 0);
        assert_eq!(p.alloc_refill(v, quiet), 63, "the first refill is a batch");
        assert_eq!(p.high, 1_666 + 63, "and raises high while memory is plentiful");
        p.list = (0..2_000).map(Pfn).collect();
        let n = p.free_commit(v, quiet);
        assert_eq!(n, 63, "over high: free_count (1) clamped to at least a batch");
        assert_eq!(p.high, 1_666 + 63, "need_high = free_count + batch is below high");
        let mut p = pcp_with(v, 3_000);
        p.high = 3_000;
        p.free_count = 500;
        assert_eq!(p.free_commit(v, low), 501, "below the high watermark: free_count (500, and this free) goes");
        assert_eq!(p.high, 3_000 - 501);
        let mut p = pcp_with(v, 3_000);
        p.high = 3_000;
        assert_eq!(p.free_commit(v, reclaim), 63);
        assert_eq!(p.high, 3_000 - 63, "reclaim lowers high by max(free_count, batch)");
        // decay_pcp_high(): an eighth a second, down to high_min, freeing what is above.
        let mut p = pcp_with(v, 2_400);
        p.high = 2_400;
        assert_eq!(p.decay(), (300, true), "high 2,100: the 300 above it go");
        assert_eq!(p.high, 2_100);
        p.list.truncate(2_100);
        let mut steps = 1;
        loop {
            let (n, todo) = p.decay();
            p.list.truncate(p.list.len() - n);
            if !todo {
                break;
            }
            steps += 1;
        }
        assert_eq!((p.high, p.list.len()), (1_666, 1_666));
        assert_eq!(steps, 3, "2,400 -> 2,100 -> 1,838 -> 1,666; a fourth run finds nothing to do");
    }

    fn sim_on(preset: &str, cpus: u32) -> Sim {
        let cfg = crate::config::Config::defaults(&[format!("machine.cpus={cpus}"), "machine.mem_per_node_mib=64".into(), format!("kernel.preset=\"{preset}\"")]).unwrap();
        Sim::new(&cfg)
    }

    /// Pages on a pcp list are free but not in NR_FREE_PAGES (Linux: rmqueue_bulk() takes them
    /// off the count, a free to the pcp list does not add them back; only the buddy counts).
    #[test]
    fn nr_free_pages_counts_the_buddy_not_the_pcp_lists() {
        let mut s = sim_on("linux-6.18", 2);
        let total = s.nr_free_pages();
        s.running_cpu = Some(CpuId(1));
        let p = s.alloc_pages(CpuId(1), NodeId(0)).unwrap();
        let batch = s.pcp[1][0].batch as u64;
        assert_eq!(s.nr_free_pages(), total - batch, "the refill took a batch off the buddy");
        assert_eq!(s.nr_pcp_pages(), batch - 1);
        s.frames[p.0 as usize].refcount = 0;
        s.free_page(p);
        assert_eq!(s.nr_free_pages(), total - batch, "a page freed to a pcp list is not counted free");
        assert_eq!(s.nr_pcp_pages(), batch);
        s.drain_pcp(0);
        assert_eq!((s.nr_free_pages(), s.nr_pcp_pages()), (total, 0));
    }

    /// Fill CPU `c`'s pcp list with `n` pages (allocated on it, then freed there).
    fn fill_pcp(s: &mut Sim, c: u32, n: usize) {
        s.running_cpu = Some(CpuId(c));
        let got: Vec<Pfn> = (0..n).map(|_| s.alloc_pages(CpuId(c), NodeId(0)).unwrap()).collect();
        for p in got {
            s.frames[p.0 as usize].refcount = 0;
            s.free_page(p);
        }
        s.running_cpu = None;
    }

    /// drain_all_pages() per version: 4.2 interrupts every other CPU with pcp pages and spins
    /// until the last handler is done; 5.13 queues work and sleeps, and a second drain while
    /// one runs returns at once (pcpu_drain_mutex); 6.18 empties every list itself.
    #[test]
    fn drain_all_pages_per_version() {
        let calls = |s: &Sim| s.cpus.iter().map(|c| c.stats.irq_call_count).sum::<u64>();
        for preset in ["linux-4.2", "linux-5.13", "linux-6.18"] {
            let mut s = sim_on(preset, 4);
            for c in 1..4 {
                fill_pcp(&mut s, c, 40);
            }
            let total = s.nr_free_pages() + s.nr_pcp_pages();
            let (t0, sys0) = (s.cpus[0].clock, s.cpus[0].stats.sys_ns);
            s.drain_all_pages(CpuId(0));
            assert_eq!((s.nr_pcp_pages(), s.nr_free_pages()), (0, total), "{preset}: every list went back to the buddy");
            let waited = s.cpus[0].clock - t0;
            let spun = s.cpus[0].stats.sys_ns - sys0;
            match preset {
                "linux-4.2" => {
                    assert_eq!(calls(&s), 3, "one function-call IPI per other CPU");
                    assert!(spun >= waited && waited > s.p.ipi_deliver_ns as u64, "the caller spins until the handlers end: {spun} {waited}");
                }
                "linux-5.13" => {
                    assert_eq!(calls(&s), 0, "work items, not function-call IPIs");
                    assert!(spun < waited, "the caller sleeps in flush_work(): {spun} {waited}");
                    // A drain that finds another one in progress returns.
                    fill_pcp(&mut s, 2, 10);
                    s.pcpu_drain = (s.cpus[0].clock, s.cpus[0].clock + 1_000_000);
                    s.drain_all_pages(CpuId(0));
                    assert!(s.nr_pcp_pages() > 0, "mutex_trylock failed: nothing drained");
                }
                _ => {
                    assert_eq!(calls(&s), 0, "no IPI: the caller drains the remote lists");
                    assert_eq!(spun, waited);
                }
            }
        }
    }
}
