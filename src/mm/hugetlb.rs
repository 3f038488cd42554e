//! HugeTLB pools (mm/hugetlb.c): 2 MiB and 1 GiB hstates with per-node pools, runtime pool
//! resizing (`set_max_huge_pages()`), surplus pages, hugetlb faults, and freeing through the
//! vmemmap restore (mm/hugetlb_vmemmap.rs) and the free_hpage_work workqueue.
//!
//! Follows Linux 6.18 (`set_max_huge_pages()`, `alloc_pool_huge_folio()`,
//! `prep_and_add_allocated_folios()`, `remove_pool_hugetlb_folio()`,
//! `update_and_free_pages_bulk()`, `update_and_free_hugetlb_folio()`, `add_hugetlb_folio()`)
//! and, with batching off, the 5.14–6.6 per-folio paths (`prep_new_huge_page()` optimising
//! each page as it is allocated, `free_hpage_workfn()` restoring each page asynchronously).
//!
//! Departures, each stated where it is made:
//! - Huge pages come from the buddy allocator (order 9, __GFP_THISNODE) or alloc_contig_pages()
//!   (1 GiB) with no watermark check, reclaim or compaction ([`Sim::alloc_hugetlb_frames`]).
//!   An allocation costs one `cost.page_alloc_ns` per node tried plus `cost.struct_page_init_ns`
//!   per struct page of prep_compound_page(); alloc_contig_range()'s isolation and migration
//!   are not modelled.
//! - hugetlb faults ([`Sim::hugetlb_fault`]) keep their mapping in this module and install a
//!   2 MiB TLB entry: the page-table code has no PMD/PUD leaves yet and the hardware TLB no
//!   1 GiB entries, so a 1 GiB mapping is represented by a 2 MiB entry for the faulting address.
//!   Reservations (HugePages_Rsvd) are not modelled: mmap does not reserve, a fault that finds
//!   no page is SIGBUS.
//! - hugetlb cgroups, mempolicies, demotion, dissolve (memory offline, hwpoison) are left out.
//!
//! Per hstate and node (`Hstate`, `NodePool`):
//!
//! | field               | meaning                                   | must hold                               |
//! |---------------------|-------------------------------------------|-----------------------------------------|
//! | nr_huge_pages       | pages in the pool (persistent + surplus)  | = Σ nodes[n].nr                         |
//! | free_huge_pages     | pages on the free lists                   | = Σ nodes[n].freelist.len()             |
//! | surplus_huge_pages  | pages beyond nr_hugepages (overcommit, or kept because vmemmap restore failed) | ≤ nr_huge_pages |
//! | max_huge_pages      | the last nr_hugepages asked for           |                                         |
//!
//! Every huge page's frames carry `Frame::mapping == HUGETLB_MAPPING` from allocation until
//! they return to page_alloc; `folios` holds every such page (free, in use, or being freed).

use std::collections::{BTreeMap, VecDeque};

use crate::mm::hugetlb_vmemmap::{Enomem, Flush, HvoVariant, Vmemmap, VMEMMAP_MAPPING};
use crate::mm::vmstat::VmEvent;
use crate::report::hugetlb::Log2Hist;
use crate::mm::page_alloc::MAX_PAGE_ORDER;
use crate::sim::{pg, Sim};
use crate::types::*;

/// `Frame::mapping` of a frame belonging to a HugeTLB page.
pub const HUGETLB_MAPPING: u32 = u32::MAX - 1;
/// hstate index of 2 MiB pages.
pub const HSTATE_2M: usize = 0;
/// hstate index of 1 GiB pages.
pub const HSTATE_1G: usize = 1;
/// Page order of each hstate.
pub const HPAGE_ORDERS: [u32; 2] = [9, 18];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolioState {
    /// On its node's free list.
    Free,
    /// Mapped by a hugetlb fault.
    InUse,
    /// Removed from the pool, waiting in free_hpage_work or being freed.
    Freeing,
}

/// The hugetlb part of a folio (folio_test_hugetlb_vmemmap_optimized() and friends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HFolio {
    pub hstate: u8,
    pub node: u16,
    pub optimized: bool,
    pub state: FolioState,
}

#[derive(Clone, Debug, Default)]
pub struct NodePool {
    pub nr: u64,
    pub surplus: u64,
    /// hugepage_freelists[nid] (LIFO).
    pub freelist: Vec<Pfn>,
}

/// struct hstate.
#[derive(Clone, Debug, Default)]
pub struct Hstate {
    pub order: u32,
    pub nr_huge_pages: u64,
    pub free_huge_pages: u64,
    pub surplus_huge_pages: u64,
    pub max_huge_pages: u64,
    pub nr_overcommit_huge_pages: u64,
    pub nodes: Vec<NodePool>,
    pub next_nid_to_alloc: usize,
    pub next_nid_to_free: usize,
}

impl Hstate {
    pub fn pages_per_huge_page(&self) -> u64 {
        1 << self.order
    }
    /// persistent_huge_pages().
    pub fn persistent(&self) -> u64 {
        self.nr_huge_pages - self.surplus_huge_pages
    }
    /// "2.00 MiB" / "1.00 GiB" as string_get_size(.., STRING_UNITS_2) prints it.
    pub fn size_str(&self) -> &'static str {
        if self.order == 18 { "1.00 GiB" } else { "2.00 MiB" }
    }
}

/// Counters of the hugetlb and HVO paths (no vmstat counter exists for most of them in Linux).
#[derive(Clone, Debug, Default)]
pub struct HugetlbStats {
    pub vmemmap_optimized_folios: u64,
    pub vmemmap_restored_folios: u64,
    /// vmemmap_remap_alloc() failed: the page went back to the pool as a surplus page.
    pub vmemmap_restore_enomem: u64,
    pub restore_failed_to_surplus: u64,
    pub vmemmap_pmd_splits: u64,
    pub vmemmap_pages_freed: u64,
    pub vmemmap_pages_allocated: u64,
    pub flush_tlb_kernel_range: u64,
    pub flush_tlb_all: u64,
    pub hugetlb_faults: u64,
    pub sigbus: u64,
}

/// All hstates, their per-node pools, the vmemmap and the free_hpage_work queue.
#[derive(Clone, Debug, Default)]
pub struct Hugetlb {
    /// `hugetlb_init()` has run (Sim::build calls it; code using Sim::new calls it itself).
    pub initialized: bool,
    pub variant: HvoVariant,
    pub batched: bool,
    pub hstates: Vec<Hstate>,
    /// Every huge page, by head pfn.
    pub folios: BTreeMap<u32, HFolio>,
    pub vmemmap: Vmemmap,
    /// hpage_freelist, drained by free_hpage_workfn() (a kworker on the CPU that queued it).
    pub free_hpage_work: VecDeque<Pfn>,
    /// hugetlb mappings: (mm, huge-page-aligned vpn) → head pfn.
    pub mappings: BTreeMap<(u32, u64), Pfn>,
    /// Latency of alloc_fresh_huge_page() (bpftrace kprobe/kretprobe), ns.
    pub alloc_latency: Log2Hist,
    /// Latency of freeing one huge page to the buddy (__free_hugepage() in v6,
    /// __update_and_free_hugetlb_folio() in mainline), ns.
    pub free_latency: Log2Hist,
    pub stats: HugetlbStats,
    /// The boot-log lines (report_hugepages()).
    pub boot_log: Vec<String>,
    /// The CPU running the current hugetlb operation (the writer of nr_hugepages, or the kworker).
    pub cpu: CpuId,
}

/// Frames of the machine by owner (checked against the model's own bookkeeping).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameCensus {
    pub total: u64,
    pub free: u64,
    pub hugetlb: u64,
    pub vmemmap: u64,
    pub other: u64,
}

impl Sim {
    /// `hugetlb_init()` + `hugetlb_vmemmap_init()` + boot-time pools: the vmemmap (PMD-mapped,
    /// or PTE-mapped for v6), `hugepagesz=1G hugepages=N` from memblock, then vm.nr_hugepages
    /// and vm.nr_overcommit_hugepages. Prints nothing; the boot lines are in `hugetlb.boot_log`.
    /// Boot work is not part of the measured run: CPU clocks and statistics are reset after it.
    pub fn hugetlb_init(&mut self) {
        if self.hugetlb.initialized {
            return;
        }
        let variant = HvoVariant::parse(&self.cfg.str("kernel.hugetlb_optimize_vmemmap"));
        let batched = self.cfg.switch("kernel.hugetlb_vmemmap_batch", (6, 7));
        let nnodes = self.nodes.len();
        self.hugetlb.variant = variant;
        self.hugetlb.batched = batched;
        self.hugetlb.cpu = CpuId(0);
        self.hugetlb.hstates = HPAGE_ORDERS.iter().map(|&order| Hstate { order, nodes: vec![NodePool::default(); nnodes], ..Default::default() }).collect();
        self.hugetlb.initialized = true;
        self.vmemmap_init(variant != HvoVariant::V6);
        // Gigantic pages from memblock (hugetlb_hstate_alloc_pages() → alloc_bootmem_huge_page()).
        let n1g = self.cfg.int("kernel.hugepages_1g") as u64;
        if n1g > 0 {
            self.set_max_huge_pages(CpuId(0), HSTATE_1G, n1g);
        }
        let n2m = self.cfg.int("vm.nr_hugepages") as u64;
        if n2m > 0 {
            self.set_max_huge_pages(CpuId(0), HSTATE_2M, n2m);
        }
        self.hugetlb.hstates[HSTATE_2M].nr_overcommit_huge_pages = self.cfg.int("vm.nr_overcommit_hugepages") as u64;
        // report_hugepages(): hstates in order of registration (1 GiB first on x86 with pdpe1gb).
        for h in [HSTATE_1G, HSTATE_2M] {
            let hs = &self.hugetlb.hstates[h];
            let kib = crate::mm::hugetlb_vmemmap::hugetlb_vmemmap_optimizable_pages(variant, hs.order) * 4;
            let line1 = format!("HugeTLB: registered {} page size, pre-allocated {} pages", hs.size_str(), hs.nr_huge_pages);
            let line2 = format!("HugeTLB: {} KiB vmemmap can be freed for a {} page", kib, hs.size_str());
            self.hugetlb.boot_log.push(line1);
            self.hugetlb.boot_log.push(line2);
        }
        for c in &mut self.cpus {
            c.clock = 0;
            c.stats = Default::default();
        }
        self.hugetlb.alloc_latency = Log2Hist::default();
        self.hugetlb.free_latency = Log2Hist::default();
        self.hugetlb.stats = HugetlbStats::default();
    }

    /// `alloc_buddy_hugetlb_folio()` / `alloc_gigantic_folio()` with __GFP_THISNODE: an
    /// order-9 block from the buddy allocator of node `nid` only, or a 1 GiB run from
    /// alloc_contig_pages(); its frames are marked [`HUGETLB_MAPPING`].
    ///
    /// Departure: no watermark check, reclaim or compaction (__GFP_RETRY_MAYFAIL is not modelled):
    /// the allocation succeeds exactly when a free block exists on the node.
    pub fn alloc_hugetlb_frames(&mut self, nid: usize, order: u32, mapping: u32) -> Option<Pfn> {
        let head = if order as usize <= MAX_PAGE_ORDER {
            let p = self.alloc_pages_node_nocheck(NodeId(nid as u32), order as usize)?;
            if self.pfn_to_nid(p) != nid {
                // It fell back to another node: __GFP_THISNODE forbids that.
                self.free_pages_order(p, order as usize);
                return None;
            }
            p
        } else {
            self.alloc_contig_pages(NodeId(nid as u32), 1 << order, 1 << order)?
        };
        for q in head.0..head.0 + (1u32 << order) {
            self.frames[q as usize].mapping = mapping;
        }
        Some(head)
    }

    /// Give a huge page's frames back to page_alloc (__free_pages() / free_contig_range()).
    fn free_contig_frames(&mut self, head: Pfn, order: u32) {
        for p in head.0..head.0 + (1u32 << order) {
            debug_assert_eq!(self.frames[p as usize].mapping, HUGETLB_MAPPING);
            self.frames[p as usize].mapping = 0;
        }
        if order as usize <= MAX_PAGE_ORDER {
            self.free_pages_order(head, order as usize);
        } else {
            self.free_contig_range(head, 1 << order);
        }
    }

    /// Nodes in the order for_each_node_mask_to_alloc() visits them (round-robin from
    /// next_nid_to_alloc), nodes with memory only.
    fn hstate_next_node_to_alloc(&mut self, h: usize) -> usize {
        let n = self.nodes.len();
        let hs = &mut self.hugetlb.hstates[h];
        let nid = hs.next_nid_to_alloc % n;
        hs.next_nid_to_alloc = (nid + 1) % n;
        nid
    }

    /// `alloc_pool_huge_folio()` for `count` pages: each page from the next node in the
    /// round-robin (for_each_node_mask_to_alloc(), every node tried before giving up), then
    /// `alloc_fresh_hugetlb_folio()`'s prep, timed per page as the bpftrace probe on
    /// alloc_fresh_huge_page() sees it. With `optimize_each` (5.14–6.6) prep also runs the
    /// vmemmap optimisation. Stops at the first page no node can give, as set_max_huge_pages()
    /// does.
    fn alloc_fresh_hugetlb_folios(&mut self, h: usize, count: u64, optimize_each: bool) -> Vec<Pfn> {
        let order = self.hugetlb.hstates[h].order;
        let nn = self.nodes.len();
        let spi = self.p.struct_page_init_ns;
        let mut ready = Vec::new();
        for _ in 0..count {
            let cpu = self.hugetlb.cpu;
            let t0 = self.now(cpu);
            let mut got = None;
            for _ in 0..nn {
                let nid = self.hstate_next_node_to_alloc(h);
                // __alloc_pages() of one block (one buddy operation) or alloc_contig_pages().
                self.charge_sys(cpu, self.p.page_alloc_ns);
                if let Some(p) = self.alloc_hugetlb_frames(nid, order, HUGETLB_MAPPING) {
                    got = Some(p);
                    break;
                }
            }
            let Some(head) = got else {
                self.vmstat.count(VmEvent::HTLB_BUDDY_ALLOC_FAIL);
                break;
            };
            self.vmstat.count(VmEvent::HTLB_BUDDY_ALLOC_SUCCESS);
            // prep_compound_page() / init_new_hugetlb_folio() over every struct page.
            self.charge_sys(cpu, spi * (1u64 << order) as f64);
            let node = self.pfn_to_nid(head) as u16;
            self.hugetlb.folios.insert(head.0, HFolio { hstate: h as u8, node, optimized: false, state: FolioState::Freeing });
            if optimize_each {
                self.hugetlb_vmemmap_optimize(head);
            }
            let dt = self.now(cpu) - t0;
            self.hugetlb.alloc_latency.record(dt);
            ready.push(head);
        }
        ready
    }

    /// `hugetlb_vmemmap_optimize_folio()` (one page, flushing as it goes). A failure leaves the
    /// page unoptimised, as Linux does.
    fn hugetlb_vmemmap_optimize(&mut self, head: Pfn) {
        if self.hugetlb.variant == HvoVariant::Off {
            return;
        }
        let f = self.hugetlb.folios[&head.0];
        let mut to_free = Vec::new();
        if self.hugetlb_vmemmap_optimize_folio(head, f, Flush::Now, &mut to_free).is_ok() {
            self.hugetlb.folios.get_mut(&head.0).unwrap().optimized = true;
        }
        debug_assert!(to_free.is_empty());
    }

    /// `hugetlb_vmemmap_optimize_folios()` (6.7+): split every PMD with no flush, one
    /// flush_tlb_all(); remap every folio with no flush, one flush_tlb_all(); free the collected
    /// vmemmap pages in bulk. On ENOMEM mid-way the collected pages are flushed and freed and the
    /// folio is retried, as the kernel does.
    fn hugetlb_vmemmap_optimize_folios(&mut self, list: &[Pfn]) {
        if self.hugetlb.variant == HvoVariant::Off || list.is_empty() {
            return;
        }
        let mut nr_to_optimize = 0;
        if self.hugetlb.variant == HvoVariant::Mainline {
            for &head in list {
                let f = self.hugetlb.folios[&head.0];
                if self.hugetlb_vmemmap_split_folio(head, f, Flush::Deferred).is_err() {
                    break;
                }
                nr_to_optimize += 1;
            }
        } else {
            nr_to_optimize = list.len();
        }
        if nr_to_optimize == 0 {
            return;
        }
        self.hugetlb_flush_tlb_all();
        let mut to_free = Vec::new();
        for &head in list {
            let f = self.hugetlb.folios[&head.0];
            let mut r = self.hugetlb_vmemmap_optimize_folio(head, f, Flush::Deferred, &mut to_free);
            if r == Err(Enomem) && !to_free.is_empty() {
                self.hugetlb_flush_tlb_all();
                for p in std::mem::take(&mut to_free) {
                    self.vmemmap_free_page(p);
                }
                r = self.hugetlb_vmemmap_optimize_folio(head, f, Flush::Deferred, &mut to_free);
            }
            if r.is_ok() {
                self.hugetlb.folios.get_mut(&head.0).unwrap().optimized = true;
            }
        }
        self.hugetlb_flush_tlb_all();
        for p in to_free {
            self.vmemmap_free_page(p);
        }
    }

    /// `enqueue_hugetlb_folio()` after `account_new_hugetlb_folio()`: a new page joins the pool.
    fn hugetlb_add_new_folio(&mut self, h: usize, head: Pfn) {
        let f = self.hugetlb.folios.get_mut(&head.0).unwrap();
        f.state = FolioState::Free;
        let nid = f.node as usize;
        let hs = &mut self.hugetlb.hstates[h];
        hs.nr_huge_pages += 1;
        hs.free_huge_pages += 1;
        hs.nodes[nid].nr += 1;
        hs.nodes[nid].freelist.push(head);
    }

    /// `add_hugetlb_folio(h, folio, adjust_surplus)`: a page that was removed from the pool
    /// returns to it (used when its vmemmap cannot be restored).
    fn add_hugetlb_folio(&mut self, h: usize, head: Pfn, adjust_surplus: bool) {
        self.hugetlb_add_new_folio(h, head);
        if adjust_surplus {
            let nid = self.hugetlb.folios[&head.0].node as usize;
            let hs = &mut self.hugetlb.hstates[h];
            hs.surplus_huge_pages += 1;
            hs.nodes[nid].surplus += 1;
        }
    }

    /// `remove_pool_hugetlb_folio()`: take a free page off a node (round-robin from
    /// next_nid_to_free, skipping nodes without free pages) and out of the pool counts.
    fn remove_pool_hugetlb_folio(&mut self, h: usize, acct_surplus: bool) -> Option<Pfn> {
        let nn = self.nodes.len();
        for _ in 0..nn {
            let hs = &mut self.hugetlb.hstates[h];
            let nid = hs.next_nid_to_free % nn;
            hs.next_nid_to_free = (nid + 1) % nn;
            if acct_surplus && hs.nodes[nid].surplus == 0 {
                continue;
            }
            if let Some(head) = hs.nodes[nid].freelist.pop() {
                hs.nr_huge_pages -= 1;
                hs.free_huge_pages -= 1;
                hs.nodes[nid].nr -= 1;
                if acct_surplus {
                    hs.surplus_huge_pages -= 1;
                    hs.nodes[nid].surplus -= 1;
                }
                self.hugetlb.folios.get_mut(&head.0).unwrap().state = FolioState::Freeing;
                return Some(head);
            }
        }
        None
    }

    /// `__update_and_free_hugetlb_folio()` (v6: `__free_hugepage()`): restore the vmemmap if
    /// needed — on failure the page goes back to the pool as a surplus page — then destroy the
    /// compound page and free it to page_alloc.
    fn __update_and_free_hugetlb_folio(&mut self, head: Pfn) {
        let cpu = self.hugetlb.cpu;
        let t0 = self.now(cpu);
        let f = self.hugetlb.folios[&head.0];
        let h = f.hstate as usize;
        if f.optimized {
            if self.hugetlb_vmemmap_restore_folio(head, f, Flush::Now).is_err() {
                self.hugetlb.stats.restore_failed_to_surplus += 1;
                self.add_hugetlb_folio(h, head, true);
                let dt = self.now(cpu) - t0;
                self.hugetlb.free_latency.record(dt);
                return;
            }
            self.hugetlb.folios.get_mut(&head.0).unwrap().optimized = false;
        }
        let order = HPAGE_ORDERS[h];
        self.charge_sys(cpu, self.p.struct_page_init_ns * (1u64 << order) as f64 + self.p.page_alloc_ns);
        self.hugetlb.folios.remove(&head.0);
        self.free_contig_frames(head, order);
        let dt = self.now(cpu) - t0;
        self.hugetlb.free_latency.record(dt);
    }

    /// `update_and_free_hugetlb_folio(h, folio, atomic=false)`: the v6 series handed every
    /// optimised page to free_hpage_work ("the freeing hugetlb is asynchronous (through
    /// kworker)"); mainline defers only from atomic context (not modelled) and frees here.
    fn update_and_free_hugetlb_folio(&mut self, head: Pfn) {
        let f = self.hugetlb.folios[&head.0];
        if f.optimized && self.hugetlb.variant == HvoVariant::V6 {
            self.hugetlb.free_hpage_work.push_back(head);
            return;
        }
        self.__update_and_free_hugetlb_folio(head);
    }

    /// `update_and_free_pages_bulk()` (6.7+): restore the vmemmap of every optimised page with
    /// no flush in between (hugetlb_vmemmap_restore_folios()), one flush_tlb_all(), then free.
    /// When a restore fails, bulk_vmemmap_restore_error(): if a page is already restored (or was
    /// never optimised), flush and free it to make memory and retry; else the page goes back to
    /// the pool as a surplus page.
    fn update_and_free_pages_bulk(&mut self, list: Vec<Pfn>) {
        let mut pending: VecDeque<Pfn> = list.into();
        let mut non_hvo: Vec<Pfn> = Vec::new();
        let mut restored = 0;
        while let Some(head) = pending.pop_front() {
            let f = self.hugetlb.folios[&head.0];
            if !f.optimized {
                non_hvo.push(head);
                continue;
            }
            if self.hugetlb_vmemmap_restore_folio(head, f, Flush::Deferred).is_ok() {
                self.hugetlb.folios.get_mut(&head.0).unwrap().optimized = false;
                restored += 1;
                non_hvo.push(head);
                continue;
            }
            if restored > 0 {
                self.hugetlb_flush_tlb_all();
                restored = 0;
            }
            if let Some(v) = non_hvo.pop() {
                self.__update_and_free_hugetlb_folio(v);
                pending.push_front(head);
            } else {
                self.hugetlb.stats.restore_failed_to_surplus += 1;
                self.add_hugetlb_folio(f.hstate as usize, head, true);
            }
        }
        if restored > 0 {
            self.hugetlb_flush_tlb_all();
        }
        for head in non_hvo {
            self.__update_and_free_hugetlb_folio(head);
        }
    }

    /// `free_hpage_workfn()`: the kworker drains hpage_freelist on the CPU that queued the work
    /// (system_wq is per-CPU), after the writer returned. Returns when it is done.
    pub fn flush_free_hpage_work(&mut self) {
        while let Some(head) = self.hugetlb.free_hpage_work.pop_front() {
            self.__update_and_free_hugetlb_folio(head);
        }
    }

    /// `adjust_pool_surplus()`: move one page between persistent and surplus (delta = +1 makes a
    /// persistent page surplus, -1 the reverse). Returns false when no node can.
    fn adjust_pool_surplus(&mut self, h: usize, delta: i64) -> bool {
        let hs = &mut self.hugetlb.hstates[h];
        let nn = hs.nodes.len();
        for i in 0..nn {
            let nid = (hs.next_nid_to_alloc + i) % nn;
            let n = &mut hs.nodes[nid];
            if delta < 0 && n.surplus > 0 {
                n.surplus -= 1;
                hs.surplus_huge_pages -= 1;
                return true;
            }
            if delta > 0 && n.surplus < n.nr {
                n.surplus += 1;
                hs.surplus_huge_pages += 1;
                return true;
            }
        }
        false
    }

    /// `echo count > /proc/sys/vm/nr_hugepages` (hstate `h`), from `cpu`: `set_max_huge_pages()`.
    /// Returns the new persistent pool size. The caller's clock advances by the time the write
    /// takes; with asynchronous freeing, the kworker's work is left queued for
    /// [`Sim::flush_free_hpage_work`].
    pub fn set_max_huge_pages(&mut self, cpu: CpuId, h: usize, count: u64) -> u64 {
        assert!(self.hugetlb.initialized, "simulator bug: hugetlb_init() has not run");
        self.hugetlb.cpu = cpu;
        // Increase the pool: first take surplus pages back as persistent ones.
        while self.hugetlb.hstates[h].surplus_huge_pages > 0 && count > self.hugetlb.hstates[h].persistent() {
            if !self.adjust_pool_surplus(h, -1) {
                break;
            }
        }
        let persistent = self.hugetlb.hstates[h].persistent();
        if count > persistent {
            let need = count - persistent;
            if self.hugetlb.batched {
                // alloc_pool_huge_folio() per page onto a list, then prep_and_add_allocated_folios().
                let list = self.alloc_fresh_hugetlb_folios(h, need, false);
                self.hugetlb_vmemmap_optimize_folios(&list);
                for head in list {
                    self.hugetlb_add_new_folio(h, head);
                }
            } else {
                let list = self.alloc_fresh_hugetlb_folios(h, need, true);
                for head in list {
                    self.hugetlb_add_new_folio(h, head);
                }
            }
        }
        // Decrease: free pages not in use down to max(count, in use), then make the rest surplus.
        let hs = &self.hugetlb.hstates[h];
        let in_use = hs.nr_huge_pages - hs.free_huge_pages;
        let min_count = count.max(in_use);
        let mut list = Vec::new();
        while min_count < self.hugetlb.hstates[h].persistent() {
            match self.remove_pool_hugetlb_folio(h, false) {
                Some(head) => list.push(head),
                None => break,
            }
        }
        if self.hugetlb.batched {
            self.update_and_free_pages_bulk(list);
        } else {
            for head in list {
                self.update_and_free_hugetlb_folio(head);
            }
        }
        while count < self.hugetlb.hstates[h].persistent() {
            if !self.adjust_pool_surplus(h, 1) {
                break;
            }
        }
        let hs = &mut self.hugetlb.hstates[h];
        hs.max_huge_pages = hs.persistent();
        hs.max_huge_pages
    }

    /// A hugetlb fault at `vpn` of `mm` on `cpu` (hugetlb_fault() → hugetlb_no_page()): take a
    /// free page from the faulting CPU's node first (dequeue_hugetlb_folio_nodemask()), else a
    /// new surplus page if nr_overcommit_hugepages allows (alloc_surplus_hugetlb_folio()), clear
    /// it, map it. Returns the head pfn, or None for SIGBUS. See the module doc for what is
    /// simplified (no PMD/PUD leaves: the mapping lives here; 2 MiB TLB entry).
    pub fn hugetlb_fault(&mut self, cpu: CpuId, mm: MmId, vpn: u64, h: usize) -> Option<Pfn> {
        self.hugetlb.cpu = cpu;
        let order = HPAGE_ORDERS[h];
        let hvpn = vpn >> order << order;
        self.hugetlb.stats.hugetlb_faults += 1;
        self.vmstat.count(VmEvent::PGFAULT);
        let ns = self.fault_entry_ns(cpu);
        self.charge_sys(cpu, ns);
        if let Some(&p) = self.hugetlb.mappings.get(&(mm.0, hvpn)) {
            self.hugetlb_tlb_fill(cpu, mm, vpn, p);
            return Some(p);
        }
        let home = self.cpu_node(cpu).0 as usize;
        let nn = self.nodes.len();
        let mut got = None;
        for i in 0..nn {
            let nid = (home + i) % nn;
            let hs = &mut self.hugetlb.hstates[h];
            if let Some(p) = hs.nodes[nid].freelist.pop() {
                hs.free_huge_pages -= 1;
                got = Some(p);
                break;
            }
        }
        if got.is_none() {
            let hs = &self.hugetlb.hstates[h];
            if hs.surplus_huge_pages < hs.nr_overcommit_huge_pages {
                let list = self.alloc_fresh_hugetlb_folios(h, 1, true);
                if let Some(&p) = list.first() {
                    self.hugetlb_add_new_folio(h, p);
                    let nid = self.hugetlb.folios[&p.0].node as usize;
                    let hs = &mut self.hugetlb.hstates[h];
                    hs.surplus_huge_pages += 1;
                    hs.nodes[nid].surplus += 1;
                    hs.nodes[nid].freelist.retain(|&x| x != p);
                    hs.free_huge_pages -= 1;
                    got = Some(p);
                }
            }
        }
        let Some(p) = got else {
            self.hugetlb.stats.sigbus += 1;
            return None;
        };
        self.hugetlb.folios.get_mut(&p.0).unwrap().state = FolioState::InUse;
        self.charge_sys(cpu, self.p.clear_page_ns * (1u64 << order) as f64 + self.p.pte_update_ns);
        self.hugetlb.mappings.insert((mm.0, hvpn), p);
        self.hugetlb_tlb_fill(cpu, mm, vpn, p);
        Some(p)
    }

    fn hugetlb_tlb_fill(&mut self, cpu: CpuId, mm: MmId, vpn: u64, head: Pfn) {
        let ci = cpu.0 as usize;
        if self.cpus[ci].tlbstate.loaded_mm != Some(mm) {
            return;
        }
        let asid = self.cpus[ci].tlbstate.loaded_mm_asid;
        let off = (vpn & 511) as u32;
        self.cpus[ci].tlb.fill(asid, vpn, true, Pfn(head.0 + off), 0b11, false);
    }

    /// Unmap a hugetlb mapping (the huge-page part of zap: huge_ptep_get_and_clear(), a flush of
    /// the one huge entry, then free_huge_folio(): back to the free list, or to page_alloc if the
    /// node has surplus pages).
    pub fn hugetlb_unmap(&mut self, cpu: CpuId, mm: MmId, vpn: u64, h: usize) {
        self.hugetlb.cpu = cpu;
        let order = HPAGE_ORDERS[h];
        let hvpn = vpn >> order << order;
        let Some(p) = self.hugetlb.mappings.remove(&(mm.0, hvpn)) else { return };
        // The whole huge page: a 1 GiB mapping caches 2 MiB entries for any of its 2 MiB parts.
        self.flush_tlb_mm_range(cpu, mm, hvpn, hvpn + (1 << order), PMD_SHIFT, false);
        let nid = self.hugetlb.folios[&p.0].node as usize;
        let hs = &mut self.hugetlb.hstates[h];
        if hs.nodes[nid].surplus > 0 {
            hs.nodes[nid].surplus -= 1;
            hs.surplus_huge_pages -= 1;
            hs.nodes[nid].nr -= 1;
            hs.nr_huge_pages -= 1;
            self.hugetlb.folios.get_mut(&p.0).unwrap().state = FolioState::Freeing;
            self.update_and_free_hugetlb_folio(p);
        } else {
            hs.nodes[nid].freelist.push(p);
            hs.free_huge_pages += 1;
            self.hugetlb.folios.get_mut(&p.0).unwrap().state = FolioState::Free;
        }
    }

    /// Frames by owner, counted from the frames themselves.
    pub fn hugetlb_frame_census(&self) -> FrameCensus {
        let mut c = FrameCensus { total: self.frames.len() as u64, ..Default::default() };
        // Pristine blocks (mm/page_alloc.rs FreeArea) are free and not written.
        let mut written = Vec::with_capacity(self.nodes.len());
        for (ni, n) in self.nodes.iter().enumerate() {
            let pristine = self.pristine_pages(ni);
            c.free += pristine as u64;
            written.push((n.start_pfn + pristine) as usize..(n.start_pfn + n.nr_pages) as usize);
        }
        for f in written.into_iter().flat_map(|r| self.frames[r].iter()) {
            if f.flags & pg::FREE != 0 {
                c.free += 1;
            } else if f.mapping == HUGETLB_MAPPING {
                c.hugetlb += 1;
            } else if f.mapping == VMEMMAP_MAPPING {
                c.vmemmap += 1;
            } else {
                c.other += 1;
            }
        }
        c
    }

    /// The checker (kept apart from the model): the frame census agrees with the pools, the
    /// vmemmap and page_alloc, and free + hugetlb + vmemmap + other = total. Returns the census.
    pub fn hugetlb_check(&self) -> Result<FrameCensus, String> {
        let c = self.hugetlb_frame_census();
        if c.free + c.hugetlb + c.vmemmap + c.other != c.total {
            return Err(format!("census does not add up: {c:?}"));
        }
        if c.free != self.nr_free_pages() + self.nr_pcp_pages() {
            return Err(format!("{} FREE frames but {} on the free lists and {} on pcp lists", c.free, self.nr_free_pages(), self.nr_pcp_pages()));
        }
        let folio_frames: u64 = self.hugetlb.folios.values().map(|f| 1u64 << HPAGE_ORDERS[f.hstate as usize]).sum();
        if folio_frames != c.hugetlb {
            return Err(format!("{} frames marked hugetlb but the folios hold {folio_frames}", c.hugetlb));
        }
        for (h, hs) in self.hugetlb.hstates.iter().enumerate() {
            let nr: u64 = hs.nodes.iter().map(|n| n.nr).sum();
            let free: u64 = hs.nodes.iter().map(|n| n.freelist.len() as u64).sum();
            let surplus: u64 = hs.nodes.iter().map(|n| n.surplus).sum();
            let in_pool = self.hugetlb.folios.values().filter(|f| f.hstate as usize == h && f.state != FolioState::Freeing).count() as u64;
            if nr != hs.nr_huge_pages || free != hs.free_huge_pages || surplus != hs.surplus_huge_pages || in_pool != nr || hs.surplus_huge_pages > hs.nr_huge_pages {
                return Err(format!("hstate {h}: nr {} (nodes {nr}, folios {in_pool}) free {} (lists {free}) surplus {} (nodes {surplus})", hs.nr_huge_pages, hs.free_huge_pages, hs.surplus_huge_pages));
            }
        }
        if self.hugetlb.initialized {
            if c.vmemmap != self.hugetlb.vmemmap.held {
                return Err(format!("{} frames marked vmemmap but the vmemmap holds {}", c.vmemmap, self.hugetlb.vmemmap.held));
            }
            let in_use = self.vmemmap_frames_in_use();
            if in_use != c.vmemmap {
                return Err(format!("the vmemmap maps {in_use} distinct frames but {} are marked", c.vmemmap));
            }
        }
        Ok(c)
    }

    /// Pages the pool holds in kB (the Hugetlb: line of /proc/meminfo).
    pub fn hugetlb_total_kb(&self) -> u64 {
        self.hugetlb.hstates.iter().map(|h| h.nr_huge_pages * (h.pages_per_huge_page() * 4)).sum()
    }
}
