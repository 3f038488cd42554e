//! The simulated world: machine (CPUs, nodes, frames), kernel objects (mm, VMA, task, file) and
//! counters. Kernel behaviour lives in `mm/`, `arch/x86/mm/` and `kernel/` as `impl Sim` blocks,
//! one file per kernel file; the event loop is in `engine/`.
//!
//! Core structs (see the tables in each module for their fields' invariants):
//! - [`Frame`]: struct page / folio. `refcount` counts page-table mappings plus page-cache and
//!   gather references; `mapcount` counts PTEs mapping it. A free frame has refcount 0 and
//!   `PG_FREE`.
//! - [`Mm`]: mm_struct; [`Vma`]: vm_area_struct; [`Task`]: task_struct; [`Cpu`]: a CPU with its
//!   hardware TLB and `cpu_tlbstate`.

use std::collections::{BTreeMap, VecDeque};

use crate::arch::x86::mm::tlb::TlbState;
use crate::config::Config;
use crate::engine::{prng::Prng, EventQueue};
use crate::hw::tlb::{CpuTlb, TlbGeometry};
use crate::mm::pgtable::PageTable;
use crate::mm::vmstat::VmStat;
use crate::types::*;
use crate::workload::Program;

pub mod pg {
    //! Frame flags (a subset of include/linux/page-flags.h).
    pub const FREE: u16 = 1 << 0;
    pub const ANON: u16 = 1 << 1;
    pub const FILE: u16 = 1 << 2; // in a page cache
    pub const DIRTY: u16 = 1 << 3;
    pub const PGTABLE: u16 = 1 << 4;
    pub const ZERO: u16 = 1 << 5; // the shared zero page
    pub const ANON_EXCLUSIVE: u16 = 1 << 6; // PageAnonExclusive
    pub const LOCKED: u16 = 1 << 7;
    pub const BUDDY: u16 = 1 << 8; // head of a free buddy block (PageBuddy)
    pub const LRU: u16 = 1 << 9; // on an LRU list
    pub const ACTIVE: u16 = 1 << 10; // on the active list
    pub const REFERENCED: u16 = 1 << 11; // PG_referenced
    pub const WRITEBACK: u16 = 1 << 12;
    pub const READAHEAD: u16 = 1 << 13; // PG_readahead: a fault here starts the next window
    pub const WORKINGSET: u16 = 1 << 14; // PG_workingset (4.20+; mm/workingset.rs)
    pub const RECLAIM: u16 = 1 << 15; // PG_reclaim: reclaim met it dirty (mm/page_writeback.rs)
}

/// struct page / folio (order 0).
///
/// | field      | meaning                                   | who changes it                         |
/// |------------|-------------------------------------------|----------------------------------------|
/// | flags      | `pg::*`                                   | page_alloc, fault paths, rmap, vmscan  |
/// | refcount   | references (mappings, page cache, gather) | get/put in every path                  |
/// | mapcount   | PTEs mapping the frame                    | rmap add/remove                        |
/// | mapping    | anon_vma id (ANON) or file id (FILE); a free buddy head's order | fault paths; page_alloc |
/// | index      | pgoff (file) or vpn (anon, linear_page_index); a free frame's LUF tag | fault paths; page_alloc, LUF |
/// | lru_next/prev | buddy free list or LRU list links      | page_alloc, vmscan                     |
///
/// `folio_last_cpupid()` is kept apart, in [`CpupidTable`] (`Sim::last_cpupid`): only NUMA
/// balancing and tiering use it, and the kernel keeps it in spare page->flags bits.
///
/// Layout: 28 bytes, 4-aligned (`flags u16`, `index_hi u16`, `refcount u32`, `mapcount i32`,
/// `mapping u32`, `index_lo u32`, `lru_next u32`, `lru_prev u32`). As in the
/// kernel's struct page, some slots mean different things by the frame's state, read and
/// written only through the accessors below:
/// - `index` is 48 bits (`index_hi:index_lo`, [`Frame::index`]): a vpn is below 2^35 (47-bit
///   user addresses; the page tables resolve 36 bits of vpn) and a pgoff below a file's size.
/// - The node is not stored: [`Sim::pfn_to_nid`] computes it from the pfn (`pfn_to_nid()`).
/// - A free frame (`pg::FREE`) has no mapping or index: a free buddy head keeps its order in
///   `mapping` ([`Frame::buddy_order`]; the kernel's `page->private`), cleared when the block
///   leaves its list, and every free frame its LUF tag in `index_lo` ([`Frame::luf`]). Freeing
///   rewrites the whole frame with the tag in place of the index ([`Frame::free`]) and
///   allocating rewrites it after `luf_takeoff()` consumed the tag ([`Frame::allocated`]), so
///   an old index is never read as a tag, nor a tag as an index.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub flags: u16,
    /// Bits 32..48 of `index`.
    index_hi: u16,
    pub refcount: u32,
    pub mapcount: i32,
    /// An allocated frame's anon_vma or file id (or a kernel owner's `*_MAPPING`); a free buddy
    /// head's order.
    pub mapping: u32,
    /// Bits 0..32 of `index` (allocated frame); the LUF tag (free frame).
    index_lo: u32,
    /// page->lru: links of the buddy free list or of an LRU list (never both).
    pub lru_next: u32,
    pub lru_prev: u32,
}

const _: () = assert!(std::mem::size_of::<Frame>() == 28);

/// `folio_last_cpupid()` of every frame (kernel/sched/numa_balancing.rs encoding, or the
/// tiering access time; 0 = unset), apart from the frame table (docs/performance.md, item 28):
/// the kernel keeps it in page->flags bits that the model's 16-bit flags do not have. The
/// table is allocated zeroed at the first non-zero store, so a run without NUMA balancing pays
/// nothing for it, and the host backs only the pages of it that are written.
#[derive(Clone, Debug, Default)]
pub struct CpupidTable {
    v: Vec<u32>,
    frames: usize,
}

impl CpupidTable {
    pub fn new(frames: usize) -> CpupidTable {
        CpupidTable { v: Vec::new(), frames }
    }

    #[inline]
    pub fn get(&self, pfn: Pfn) -> u32 {
        self.v.get(pfn.0 as usize).copied().unwrap_or(0)
    }

    /// Store `x`, returning the value it replaces (`folio_xchg_last_cpupid()`).
    #[inline]
    pub fn replace(&mut self, pfn: Pfn, x: u32) -> u32 {
        if self.v.is_empty() {
            if x == 0 {
                return 0;
            }
            self.v = vec![0; self.frames];
        }
        std::mem::replace(&mut self.v[pfn.0 as usize], x)
    }

    /// `page_cpupid_reset_last()`. The kernel resets it when the page is freed
    /// (`free_pages_prepare()`), the model when it is allocated (where `Frame::allocated` reset
    /// it before item 28); nothing reads a free frame's value, so the two are the same.
    #[inline]
    pub fn reset(&mut self, pfn: Pfn) {
        if let Some(x) = self.v.get_mut(pfn.0 as usize) {
            *x = 0;
        }
    }

    /// Start the host's cache miss on `pfn`'s entry, if the table exists.
    #[inline]
    pub fn prefetch(&self, pfn: Pfn) {
        if let Some(x) = self.v.get(pfn.0 as usize) {
            crate::hw::prefetch(x);
        }
    }

    /// Host bytes allocated (0 until the first non-zero store).
    pub fn bytes(&self) -> usize {
        self.v.capacity() * std::mem::size_of::<u32>()
    }
}

/// A frame table of `n` all-zero frames, allocated zeroed: the allocator maps a block this
/// large from the kernel's zero pages, and the host backs a page of the table only when the
/// model first writes it. `init_page_alloc()` writes the frames of the blocks it lists and
/// leaves the pristine MAX_PAGE_ORDER blocks zero (mm/page_alloc.rs `FreeArea`), so frames of
/// memory the run never allocates cost no host memory.
fn zeroed_frames(n: usize) -> Vec<Frame> {
    if n == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<Frame>(n).expect("frame table size fits in memory");
    // SAFETY: `Frame` is plain integers, so all-zero bytes are a valid `Frame`; the block comes
    // from the global allocator with the layout of `[Frame; n]`, and all `n` elements are
    // initialised (zero), as `Vec::from_raw_parts` requires.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut Frame;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(p, n, n)
    }
}

impl Frame {
    /// Bits of `index`.
    pub const INDEX_BITS: u32 = 48;

    /// A free frame off every list, owned by nobody (`free_pages_prepare()`), carrying LUF tag
    /// `luf` (0 = none).
    #[inline]
    pub const fn free(luf: u16) -> Frame {
        let nil = crate::mm::page_alloc::NIL;
        Frame { flags: pg::FREE, index_hi: 0, refcount: 0, mapcount: 0, mapping: 0, index_lo: luf as u32, lru_next: nil, lru_prev: nil }
    }

    /// A frame just taken from the allocator (`prep_new_page()`): no flags, owner or index.
    #[inline]
    pub const fn allocated(refcount: u32) -> Frame {
        let nil = crate::mm::page_alloc::NIL;
        Frame { flags: 0, index_hi: 0, refcount, mapcount: 0, mapping: 0, index_lo: 0, lru_next: nil, lru_prev: nil }
    }

    /// `page->index` / `folio->index`: the pgoff of a page-cache page, the vpn of an anon page
    /// (`linear_page_index()`). Meaningless on a free frame.
    #[inline]
    pub fn index(&self) -> u64 {
        (self.index_hi as u64) << 32 | self.index_lo as u64
    }

    /// Set `page->index` (an allocated frame's; the value must fit in [`Frame::INDEX_BITS`]).
    #[inline]
    pub fn set_index(&mut self, index: u64) {
        debug_assert!(index >> Self::INDEX_BITS == 0, "simulator bug: index {index:#x} does not fit in {} bits", Self::INDEX_BITS);
        debug_assert!(self.flags & pg::FREE == 0, "simulator bug: setting the index of a free frame");
        self.index_hi = (index >> 32) as u16;
        self.index_lo = index as u32;
    }

    /// `buddy_order()`: the order of the free block this frame heads; valid with `pg::BUDDY`
    /// (kept in `mapping`, as the kernel keeps it in `page->private`).
    #[inline]
    pub fn buddy_order(&self) -> usize {
        self.mapping as usize
    }

    /// `set_buddy_order()`: record the order of the free block this frame heads.
    #[inline]
    pub fn set_buddy_order(&mut self, order: usize) {
        self.mapping = order as u32;
    }

    /// LUF (mm/luf.rs): the v10 unmap generation or v12 `luf_key` a free frame carries while
    /// its flush is deferred (0 = none). The series keeps it in the free page's private
    /// field; here `mapping` plays `page->private` for the buddy order, so the tag sits in the
    /// index slot, which a free frame does not use. Only a free frame has one.
    #[inline]
    pub fn luf(&self) -> u16 {
        debug_assert!(self.flags & pg::FREE != 0 && self.index_hi == 0 && self.index_lo >> 16 == 0, "simulator bug: LUF tag of a busy frame (flags {:#x})", self.flags);
        self.index_lo as u16
    }

    /// Take the LUF tag of a free frame that is being allocated (`luf_takeoff()`), leaving 0.
    #[inline]
    pub fn take_luf(&mut self) -> u16 {
        let tag = self.luf();
        self.index_lo = 0;
        tag
    }
}

/// `pfn_to_nid()` for the simulated machine: nodes are contiguous pfn ranges in id order
/// ([`Sim::new`]: the nodes with CPUs, then the memory-only ones), and a frame does not store
/// its node. As SPARSEMEM's `section_to_node_table`, a table indexed by `pfn >> shift` names
/// the node of each section's first frame; a section is no larger than the smallest node, so
/// at most one node boundary falls inside it, and one compare with that node's end settles
/// the pfns past it. Two L1-resident loads and a compare, no division.
#[derive(Clone, Debug, Default)]
pub struct NodeMap {
    shift: u32,
    /// The node of each section's first pfn.
    first: Box<[u16]>,
    /// The end (exclusive) pfn of each node.
    end: Box<[u32]>,
}

impl NodeMap {
    /// From the nodes' `(start_pfn, nr_pages)` in id order: contiguous from pfn 0, none empty.
    pub fn new(nodes: impl IntoIterator<Item = (u32, u32)>) -> NodeMap {
        let mut end = Vec::new();
        let mut min = u32::MAX;
        for (start, nr) in nodes {
            assert!(nr > 0 && start == end.last().copied().unwrap_or(0), "nodes are contiguous pfn ranges from 0, each with memory");
            end.push(start + nr);
            min = min.min(nr);
        }
        assert!(end.len() <= u16::MAX as usize);
        let end = end.into_boxed_slice();
        let total = end.last().copied().unwrap_or(0);
        // Sections of the largest power of two not above the smallest node.
        let shift = 31 - min.leading_zeros();
        let first = (0..total.div_ceil(1 << shift)).map(|s| end.partition_point(|&e| e <= s << shift) as u16).collect();
        NodeMap { shift, first, end }
    }

    /// The node of `pfn` (a pfn of the machine).
    #[inline]
    pub fn nid(&self, pfn: u32) -> usize {
        let n = self.first[(pfn >> self.shift) as usize] as usize;
        n + (pfn >= self.end[n]) as usize
    }
}

#[derive(Clone, Debug)]
pub struct Node {
    pub id: NodeId,
    pub start_pfn: u32,
    pub nr_pages: u32,
    pub has_cpus: bool,
    /// The buddy allocator's free lists (mm/page_alloc.rs).
    pub free_area: crate::mm::page_alloc::FreeArea,
    /// NR_FREE_PAGES: the buddy's pages only (pages on pcp lists are not counted).
    pub nr_free: u64,
    pub wmark: crate::mm::page_alloc::Watermarks,
    /// LRU lists (mm/vmscan.rs).
    pub lru: crate::mm::vmscan::Lruvec,
    /// The node's kswapd task, once started.
    pub kswapd: Option<Tid>,
    /// kswapd's scan priority in balance_pgdat() (DEF_PRIORITY = 12 down to 1).
    pub kswapd_priority: u32,
    /// kswapd's pass over the node's lists at that priority, when one is under way.
    pub kswapd_pass: Option<crate::mm::vmscan::KswapdPass>,
    /// Pages kswapd reclaimed since balance_pgdat() last started at DEF_PRIORITY.
    pub kswapd_run_reclaimed: u64,
    /// `pgdat->kswapd_failures`: balance_pgdat() runs in a row that reclaimed nothing; at
    /// MAX_RECLAIM_RETRIES the node is hopeless and kswapd is left asleep.
    pub kswapd_failures: u32,
    /// `pgdat->pfmemalloc_wait`: direct reclaimers throttled by `throttle_direct_reclaim()`
    /// until kswapd finds the node's free pages above half its min watermark (mm/vmscan.rs).
    pub pfmemalloc_wait: Vec<Tid>,
    /// ZONE_RECLAIM_ACTIVE and ZONE_BELOW_HIGH of the node's zone (mm/page_alloc.rs).
    pub zone_flags: crate::mm::page_alloc::ZoneFlags,
}

pub mod vm {
    //! VMA flags (include/linux/mm.h).
    pub const READ: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    pub const EXEC: u32 = 1 << 2;
    pub const SHARED: u32 = 1 << 3;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    Anon,
    File { file: FileId, pgoff: u64 },
}

/// vm_area_struct. `start`/`end` are vpns: the VMA covers `[start, end)`.
#[derive(Clone, Debug)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub flags: u32,
    pub backing: Backing,
    /// anon_vma for private mappings (anon pages created in this VMA point at it).
    pub anon_vma: Option<u32>,
}

impl Vma {
    pub fn shared(&self) -> bool {
        self.flags & vm::SHARED != 0
    }
    /// `vma_is_accessible()`: readable, writable or executable (not PROT_NONE).
    pub fn is_accessible(&self) -> bool {
        self.flags & (vm::READ | vm::WRITE | vm::EXEC) != 0
    }
    /// `is_cow_mapping()`: private and may be written.
    pub fn is_cow(&self) -> bool {
        self.flags & vm::SHARED == 0 && self.flags & vm::WRITE != 0
    }
    /// pgoff of vpn in the backing file.
    pub fn pgoff(&self, vpn: u64) -> u64 {
        match self.backing {
            Backing::File { pgoff, .. } => pgoff + (vpn - self.start),
            Backing::Anon => vpn,
        }
    }
}

/// mm_struct with the x86 `mm_context_t` parts that the flush code uses.
#[derive(Debug)]
pub struct Mm {
    pub id: MmId,
    /// VMA tree keyed by start vpn (the augmented rbtree / maple tree of later work).
    pub vmas: BTreeMap<u64, Vma>,
    pub pgtable: PageTable,
    /// mm_cpumask(): CPUs that may hold TLB entries for this mm.
    pub cpumask: CpuMask,
    /// context.ctx_id: unique forever, so an ASID slot can tell mms apart.
    pub ctx_id: u64,
    /// context.tlb_gen: bumped by every flush request.
    pub tlb_gen: u64,
    /// context.next_trim_cpumask (ns): see should_trim_cpumask().
    pub next_trim_cpumask: Ns,
    /// mm->tlb_flush_batched: deferred (batched) unmaps recorded by set_tlb_ubc_flush_pending()
    /// and those acknowledged by flush_tlb_batched_pending(). Pending != flushed means a reclaim
    /// may still have stale TLB entries out for this mm.
    pub tlb_flush_batched_pending: u32,
    pub tlb_flush_batched_flushed: u32,
    /// Tasks using this mm (mm_users).
    pub users: u32,
    /// NUMA balancing scanner state: `numa_next_scan`, `numa_scan_offset` (a vpn),
    /// `numa_scan_seq` (full passes).
    pub numa_next_scan: Ns,
    pub numa_scan_offset: u64,
    pub numa_scan_seq: u32,
    /// mmap_base for top-down allocation (vpn).
    pub mmap_base: u64,
    /// Named regions of the op language: name → (start vpn, pages).
    pub regions: BTreeMap<String, (u64, u64)>,
    pub rss_anon: u64,
    pub rss_file: u64,
    pub nr_ptes: u64,
    /// VMA-lookup state: mmap_cache, vmacache_seqnum (mm/vmacache.rs).
    pub vma_lookup: crate::mm::vmacache::MmVmaLookup,
}

/// A small fixed bitmap of CPUs (cpumask_t). Up to [`CpuMask::INLINE`] words (256 CPUs) live
/// inline, so that the masks copied on every unmap (`mm_cpumask` into a flush batch) and every
/// flush allocate nothing on the host (docs/performance.md, item 30); larger machines' masks are
/// boxed.
#[derive(Clone)]
pub struct CpuMask(Words);

#[derive(Clone)]
enum Words {
    Inline(u8, [u64; CpuMask::INLINE]),
    Boxed(Box<[u64]>),
}

impl Default for CpuMask {
    fn default() -> Self {
        CpuMask(Words::Inline(0, [0; CpuMask::INLINE]))
    }
}

impl PartialEq for CpuMask {
    fn eq(&self, o: &Self) -> bool {
        self.words() == o.words()
    }
}
impl Eq for CpuMask {}

impl std::fmt::Debug for CpuMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CpuMask").field(&self.words()).finish()
    }
}

impl CpuMask {
    /// Words kept inline.
    pub const INLINE: usize = 4;

    pub fn new(ncpus: usize) -> Self {
        let n = ncpus.div_ceil(64);
        if n <= Self::INLINE {
            CpuMask(Words::Inline(n as u8, [0; Self::INLINE]))
        } else {
            CpuMask(Words::Boxed(vec![0; n].into_boxed_slice()))
        }
    }
    /// An empty mask of the same size.
    pub fn empty_like(&self) -> Self {
        CpuMask::new(self.words().len() * 64)
    }
    #[inline]
    pub fn words(&self) -> &[u64] {
        match &self.0 {
            Words::Inline(n, w) => &w[..*n as usize],
            Words::Boxed(b) => b,
        }
    }
    #[inline]
    fn words_mut(&mut self) -> &mut [u64] {
        match &mut self.0 {
            Words::Inline(n, w) => &mut w[..*n as usize],
            Words::Boxed(b) => b,
        }
    }
    #[inline]
    pub fn set(&mut self, c: CpuId) {
        self.words_mut()[c.0 as usize / 64] |= 1 << (c.0 % 64);
    }
    #[inline]
    pub fn clear(&mut self, c: CpuId) {
        self.words_mut()[c.0 as usize / 64] &= !(1 << (c.0 % 64));
    }
    #[inline]
    pub fn test(&self, c: CpuId) -> bool {
        self.words()[c.0 as usize / 64] & (1 << (c.0 % 64)) != 0
    }
    pub fn or(&mut self, o: &CpuMask) {
        for (a, b) in self.words_mut().iter_mut().zip(o.words()) {
            *a |= *b;
        }
    }
    pub fn clear_all(&mut self) {
        self.words_mut().iter_mut().for_each(|w| *w = 0);
    }
    pub fn is_empty(&self) -> bool {
        self.words().iter().all(|&w| w == 0)
    }
    /// cpumask_any_but(): is there a CPU other than `c` in the mask?
    pub fn any_but(&self, c: CpuId) -> bool {
        self.iter().any(|x| x != c)
    }
    /// The CPUs in the mask, in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        self.words().iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros();
                    w &= w - 1;
                    CpuId(i as u32 * 64 + b)
                })
            })
        })
    }
}

/// A file (inode) with its page cache (address_space): pgoff → frame or shadow entry.
#[derive(Clone, Debug)]
pub struct File {
    pub name: String,
    /// The xarray: a folio, a shadow entry left by reclaim (mm/workingset.rs) or nothing per
    /// pgoff. Read it with `File::page()`.
    pub pages: Vec<crate::mm::workingset::Slot>,
    /// i_mmap: (mm, vma start) of every VMA mapping this file.
    pub i_mmap: Vec<(MmId, u64)>,
    /// All holes: reads need no I/O.
    pub sparse: bool,
    /// i_size in pages: the largest size a workload created or mapped it with.
    pub size: u64,
    /// Readahead state (struct file_ra_state) and the I/O in flight (src/mm/readahead.rs).
    pub ra: crate::mm::readahead::FileRa,
}

#[derive(Clone, Debug, Default)]
pub struct AnonVma {
    /// mms whose VMAs may map pages of this anon_vma (the anon_vma_chain, flattened).
    pub mms: Vec<MmId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// On a runqueue or running.
    Runnable,
    /// Blocked until an event (sleep timer, child exit, release).
    Blocked,
    /// Busy in user mode until the given time, needing no steps (a spin loop).
    Spinning(Ns),
    Dead,
}

#[derive(Debug)]
pub struct Task {
    pub tid: Tid,
    /// Thread-group id: index of the process in the workload.
    pub tgid: u32,
    pub mm: Option<MmId>,
    pub cpu: CpuId,
    pub affinity: Option<CpuId>,
    pub state: TaskState,
    pub prog: Option<Box<Program>>,
    /// Whether the run waits for this task (daemon `spin`/`sleep` forever tasks do not count).
    pub counts_for_completion: bool,
    pub parent: Option<Tid>,
    pub children: Vec<Tid>,
    /// Waiting in `reap` for the children to exit.
    pub waiting_for_children: bool,
    pub slice_end: Ns,
    /// Per-thread VMA cache (task_struct.vmacache, 3.15-6.0).
    pub vmacache: crate::mm::vmacache::TaskVmaCache,
    /// The end of a reclaim (flush, then free) this task's last step left for its next one
    /// (mm/vmscan.rs `ReclaimTail`).
    pub reclaim_tail: Option<Box<crate::mm::vmscan::ReclaimTail>>,
    /// A direct reclaim its fault left for its next steps, one batch each (mm/vmscan.rs
    /// `DirectReclaim`); the access is replayed after it.
    pub direct_reclaim: Option<Box<crate::mm::vmscan::DirectReclaim>>,
    /// The task's last stepped direct reclaim reclaimed nothing: its next allocation reclaims
    /// synchronously (with the slow path's retries and, in the end, the OOM killer).
    pub direct_reclaim_failed: bool,
    /// The rest of the readahead window that fault's allocation stopped (read after it).
    pub ra_rest: Option<crate::mm::readahead::RaCut>,
    /// NUMA balancing per-task state (kernel/sched/numa_balancing.rs).
    pub numa: crate::kernel::numa_balancing::TaskNuma,
    /// Simulated time of `do_exit()`, once the task has exited (a reader's finish time in
    /// `reproduce batched-flush`).
    pub exit_ns: Option<Ns>,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct CpuStats {
    pub user_ns: Ns,
    pub sys_ns: Ns,
    pub irq_ns: Ns,
    /// irq_tlb_count: the TLB line of /proc/interrupts.
    pub irq_tlb_count: u64,
    pub dtlb_load_misses: u64,
    pub dtlb_store_misses: u64,
    pub itlb_misses: u64,
    pub dtlb_loads: u64,
    pub dtlb_stores: u64,
    /// tlb:tlb_flush tracepoint hits on this CPU, and per `enum tlb_flush_reason`.
    pub tlb_flush_events: u64,
    pub tlb_flush_by_reason: [u64; 6],
    /// Function-call IPIs received that are not TLB shootdowns (the CAL line), e.g. kernel-range
    /// flushes, which Linux does not count on the TLB line.
    pub irq_call_count: u64,
    pub context_switches: u64,
    pub page_walks: u64,
}

#[derive(Debug)]
pub struct Cpu {
    pub id: CpuId,
    pub node: NodeId,
    pub socket: u32,
    /// Time up to which this CPU's work has been simulated.
    pub clock: Ns,
    pub current: Option<Tid>,
    pub runqueue: VecDeque<Tid>,
    pub tlb: CpuTlb,
    pub tlbstate: TlbState,
    pub stats: CpuStats,
    /// Queued in the event heap (running a task that needs steps).
    pub scheduled: bool,
    /// The running task waits for a read until this time (block/mod.rs `io_wait`); 0 = none.
    pub io_wait_until: Ns,
    /// This CPU's last kernel entry was a system call, not a page fault: its next page fault
    /// pays `cost.fault_after_syscall_ns` ([`Sim::enter_syscall`], [`Sim::fault_entry_ns`]).
    pub after_syscall: bool,
}

/// Typed cost and kernel parameters, derived once from the [`Config`].
#[derive(Clone, Debug)]
pub struct Params {
    pub access_ns: f64,
    pub stlb_hit_ns: f64,
    pub walk_base_ns: f64,
    pub walk_pte_miss_fraction: f64,
    pub syscall_ns: f64,
    pub fault_ns: f64,
    /// Extra time of a page fault whose CPU entered the kernel last for a system call.
    pub fault_after_syscall_ns: f64,
    /// A flush's trip through native_flush_tlb_multi() (cost.flush_multi_ns).
    pub flush_multi_ns: f64,
    pub pte_update_ns: f64,
    pub page_alloc_ns: f64,
    /// Per-folio page-cache insertion and reclaim work not charged elsewhere (cost.filemap_add_folio_ns, cost.shrink_folio_ns).
    pub filemap_add_folio_ns: f64,
    pub shrink_folio_ns: f64,
    /// Per-folio filesystem work of a write fault on a shared file folio and of writing one back (cost.page_mkwrite_ns, cost.writepage_ns).
    pub page_mkwrite_ns: f64,
    pub writepage_ns: f64,
    pub clear_page_ns: f64,
    pub copy_page_ns: f64,
    pub vma_op_ns: f64,
    /// mprotect()'s VMA work per call (cost.mprotect_ns).
    pub mprotect_ns: f64,
    /// madvise()'s fixed work per call (cost.madvise_ns).
    pub madvise_ns: f64,
    /// Mapping or zapping one page-cache page beyond its PTE (cost.file_rmap_ns).
    pub file_rmap_ns: f64,
    pub fork_ns: f64,
    pub exit_ns: f64,
    pub context_switch_ns: f64,
    pub invlpg_ns: f64,
    pub flush_full_ns: f64,
    pub ipi_send_ns: f64,
    pub ipi_deliver_ns: f64,
    pub ipi_handle_ns: f64,
    pub ipi_cross_socket_ns: f64,
    pub block_read_ns: f64,
    pub block_write_ns: f64,
    /// vm.dirty_background_ratio (%), vm.dirty_expire_centisecs and
    /// vm.dirty_writeback_centisecs in ns (mm/page_writeback.rs).
    pub dirty_background_ratio: u64,
    pub dirty_expire_ns: Ns,
    pub dirty_writeback_ns: Ns,
    pub block_read_bytes_per_ns: f64,
    /// CPU time of submitting one read request (cost.block_read_submit_ns).
    pub block_read_submit_ns: f64,
    pub block_write_bytes_per_ns: f64,
    /// vm read_ahead_kb / 4: the readahead window's maximum in pages (0 = off).
    pub read_ahead_pages: u64,
    /// The preset's kernel version (major, minor), for behaviour that changed between versions.
    pub kver: (u32, u32),
    /// `access_ns` and `access_ns + stlb_hit_ns` rounded to whole ns for the TLB-hit fast path.
    pub hit_l1_ns: Ns,
    pub hit_stlb_ns: Ns,
    pub local_latency_ns: f64,
    pub remote_latency_ns: f64,
    pub cpuless_latency_ns: f64,
    pub tlb_single_page_flush_ceiling: u64,
    pub lazy_tlb: bool,
    /// should_flush_tlb() skips lazy CPUs (4.19+; before, they were IPI'd and left the mm).
    pub lazy_ipi_skip: bool,
    /// cost.struct_page_init_ns (HugeTLB: initialising or tearing down a huge page's struct pages).
    pub struct_page_init_ns: f64,
    /// 0: clear the mm_cpumask bit at switch_mm (before 6.14); else trim interval.
    pub mm_cpumask_trim_ns: Ns,
    pub slice_ns: Ns,
    /// sysctl_sched_base_slice: how soon a woken task preempts the running one.
    pub base_slice_ns: Ns,
    pub pcid: bool,
    pub mmu_gather_batch_pages: u64,
    /// CONFIG_PT_RECLAIM: MADV_DONTNEED frees wholly zapped PTE tables.
    pub pt_reclaim: bool,
    /// Folios per lru_add batch: PAGEVEC_SIZE 14 in 4.x, 15 later, FOLIO_BATCH 31 in 6.18.
    pub lru_add_batch: usize,
    /// shrink_folio_list() frees folios in batches of PAGEVEC_SIZE, flushing before each (6.10+);
    /// before that it freed the whole list at the end, after one flush.
    pub reclaim_free_batching: bool,
    /// migrate_pages_batch() unmaps with TTU_BATCH_FLUSH (6.3+).
    pub migrate_batch_flush: bool,
    /// Seed 002: reclaim unmaps with TTU_BATCH_FLUSH (one flush per CPU per batch).
    pub batched_unmap_flush: bool,
    /// kernel.numa_balancing != 0: the NUMA scanner runs (task_numa_work()).
    pub numa_balancing: bool,
    pub numa_scan_delay_ns: Ns,
    pub numa_scan_period_min_ms: u64,
    pub numa_scan_period_max_ms: u64,
    pub numa_scan_size_mb: u64,
    /// Seed 001: do_numa_page() migrates before mapping (5.13+).
    pub numa_delayed_map: bool,
    /// kernel.numa_balancing & 1 (NUMA_BALANCING_NORMAL) and & 2 (NUMA_BALANCING_MEMORY_TIERING,
    /// 5.18+; modelled as of 6.0, with hot page selection, the rate limit, the adaptive
    /// threshold and WMARK_PROMO: no preset lies between 5.18 and 6.0). docs/tiering.md.
    pub numa_normal: bool,
    pub numa_tiering: bool,
    /// `kernel.luf` (mm/luf.rs): lazy unmap flush, seed 000.
    pub luf: crate::mm::luf::Luf,
    /// /sys/kernel/mm/numa/demotion_enabled (5.15+).
    pub demotion_enabled: bool,
    /// kernel.numa_balancing_promote_rate_limit_MBps in pages per second.
    pub promote_rate_limit_pages: u64,
    pub hot_threshold_ms: u64,
    /// set_tlb_ubc_flush_pending() skips inaccessible PTEs (6.4+).
    pub tlb_ubc_skip_inaccessible: bool,
    pub max_sim_ns: Ns,
    /// kernel/locking: cache-line hand-off of a lock (and the data under it) between CPUs.
    pub lock_handoff_ns: f64,
    pub lock_handoff_cross_socket_ns: f64,
    /// Reclaim throttling (too_many_isolated): 4.2's congestion_wait(HZ/10) or, from 5.16,
    /// reclaim_throttle(VMSCAN_THROTTLE_ISOLATED)'s HZ/50 timeout.
    pub isolated_throttle_ns: Ns,
    /// Faults take mmap_lock for read (before 6.4's per-VMA locks).
    pub fault_mmap_lock: bool,
    /// `zone_batchsize()`'s cap in pages (`kernel.pcp_batch_cap_kib`, or the version's).
    pub pcp_batch_cap_pages: u64,
}

impl Params {
    pub fn from_config(c: &Config) -> Params {
        let preset = c.str("kernel.preset");
        let trim_ms = match c.int("kernel.mm_cpumask_trim_ms") {
            -1 => crate::config::presets::mm_cpumask_trim_ms(&preset),
            v => v as u64,
        };
        let pcid = c.bool("machine.tlb.pcid") && crate::config::presets::uses_pcid(&preset);
        let kver = crate::config::presets::version(&preset);
        Params {
            access_ns: c.float("cost.access_ns"),
            stlb_hit_ns: c.float("cost.stlb_hit_ns"),
            walk_base_ns: c.float("cost.walk_base_ns"),
            walk_pte_miss_fraction: c.float("cost.walk_pte_miss_fraction"),
            syscall_ns: c.float("cost.syscall_ns"),
            fault_ns: c.float("cost.fault_ns"),
            fault_after_syscall_ns: c.float("cost.fault_after_syscall_ns"),
            flush_multi_ns: c.float("cost.flush_multi_ns"),
            pte_update_ns: c.float("cost.pte_update_ns"),
            page_alloc_ns: c.float("cost.page_alloc_ns"),
            filemap_add_folio_ns: c.float("cost.filemap_add_folio_ns"),
            shrink_folio_ns: c.float("cost.shrink_folio_ns"),
            page_mkwrite_ns: c.float("cost.page_mkwrite_ns"),
            writepage_ns: c.float("cost.writepage_ns"),
            clear_page_ns: PAGE_SIZE as f64 / c.float("cost.clear_page_bytes_per_ns"),
            copy_page_ns: PAGE_SIZE as f64 / c.float("cost.copy_page_bytes_per_ns"),
            vma_op_ns: c.float("cost.vma_op_ns"),
            mprotect_ns: c.float("cost.mprotect_ns"),
            madvise_ns: c.float("cost.madvise_ns"),
            file_rmap_ns: c.float("cost.file_rmap_ns"),
            fork_ns: c.float("cost.fork_ns"),
            exit_ns: c.float("cost.exit_ns"),
            context_switch_ns: c.float("cost.context_switch_ns"),
            invlpg_ns: c.float("cost.invlpg_ns"),
            flush_full_ns: c.float("cost.flush_full_ns"),
            ipi_send_ns: c.float("cost.ipi_send_ns"),
            ipi_deliver_ns: c.float("cost.ipi_deliver_ns"),
            ipi_handle_ns: c.float("cost.ipi_handle_ns"),
            ipi_cross_socket_ns: c.float("cost.ipi_cross_socket_ns"),
            block_read_ns: c.float("cost.block_read_4k_ns"),
            block_write_ns: c.float("cost.block_write_4k_ns"),
            dirty_background_ratio: c.int("vm.dirty_background_ratio") as u64,
            dirty_expire_ns: c.int("vm.dirty_expire_centisecs") as Ns * 10_000_000,
            dirty_writeback_ns: c.int("vm.dirty_writeback_centisecs") as Ns * 10_000_000,
            block_read_bytes_per_ns: c.float("cost.block_read_bytes_per_ns"),
            block_read_submit_ns: c.float("cost.block_read_submit_ns"),
            block_write_bytes_per_ns: c.float("cost.block_write_bytes_per_ns"),
            read_ahead_pages: c.int("vm.read_ahead_kb") as u64 / 4,
            kver,
            hit_l1_ns: c.float("cost.access_ns").round() as Ns,
            hit_stlb_ns: (c.float("cost.access_ns") + c.float("cost.stlb_hit_ns")).round() as Ns,
            local_latency_ns: c.float("machine.local_latency_ns"),
            remote_latency_ns: c.float("machine.remote_latency_ns"),
            cpuless_latency_ns: c.float("machine.cpuless_latency_ns"),
            tlb_single_page_flush_ceiling: c.int("kernel.tlb_single_page_flush_ceiling") as u64,
            lazy_tlb: c.bool("kernel.lazy_tlb"),
            lazy_ipi_skip: kver >= (4, 19),
            struct_page_init_ns: c.float("cost.struct_page_init_ns"),
            mm_cpumask_trim_ns: trim_ms * 1_000_000,
            slice_ns: 1_000_000_000 / c.int("kernel.hz") as u64,
            base_slice_ns: c.int("kernel.sched_base_slice_ns") as u64,
            pcid,
            mmu_gather_batch_pages: c.int("kernel.mmu_gather_batch_pages") as u64,
            lru_add_batch: crate::config::presets::pagevec_size(&preset),
            reclaim_free_batching: kver >= (6, 10),
            batched_unmap_flush: c.switch("kernel.batched_unmap_flush", (4, 3)),
            migrate_batch_flush: c.switch("kernel.migrate_batch_flush", (6, 3)),
            pt_reclaim: c.switch("kernel.pt_reclaim", (6, 14)),
            // The scanner runs in every mode (NORMAL, MEMORY_TIERING or both).
            numa_balancing: c.int("kernel.numa_balancing") != 0,
            numa_normal: c.int("kernel.numa_balancing") & 1 != 0,
            numa_tiering: c.int("kernel.numa_balancing") & 2 != 0,
            luf: crate::mm::luf::Luf::from_config(c),
            demotion_enabled: c.bool("vm.demotion_enabled"),
            promote_rate_limit_pages: (c.int("kernel.numa_balancing_promote_rate_limit_MBps") as u64) << (20 - PAGE_SHIFT),
            hot_threshold_ms: c.int("kernel.numa_balancing_hot_threshold_ms") as u64,
            numa_scan_delay_ns: c.int("kernel.numa_balancing_scan_delay_ms") as u64 * 1_000_000,
            numa_scan_period_min_ms: c.int("kernel.numa_balancing_scan_period_min_ms") as u64,
            numa_scan_period_max_ms: c.int("kernel.numa_balancing_scan_period_max_ms") as u64,
            numa_scan_size_mb: c.int("kernel.numa_balancing_scan_size_mb") as u64,
            numa_delayed_map: c.switch("kernel.numa_delayed_map", (5, 13)),
            tlb_ubc_skip_inaccessible: c.switch("kernel.tlb_ubc_skip_inaccessible", (6, 4)),
            max_sim_ns: c.int("run.max_sim_ms") as u64 * 1_000_000,
            lock_handoff_ns: c.float("cost.lock_handoff_ns"),
            lock_handoff_cross_socket_ns: c.float("cost.lock_handoff_cross_socket_ns"),
            isolated_throttle_ns: if kver >= (5, 16) { 1_000_000_000 / 50 } else { crate::mm::vmscan::HZ_10_NS },
            fault_mmap_lock: kver < (6, 4),
            pcp_batch_cap_pages: match c.int("kernel.pcp_batch_cap_kib") {
                -1 => crate::mm::page_alloc::pcp_batch_cap_pages(kver),
                kib => kib as u64 / 4,
            },
        }
    }
}

/// The whole simulated system.
pub struct Sim {
    pub p: Params,
    pub cfg: Config,
    pub cpus: Vec<Cpu>,
    pub nodes: Vec<Node>,
    pub frames: Vec<Frame>,
    /// `folio_last_cpupid()` per frame ([`CpupidTable`]).
    pub last_cpupid: CpupidTable,
    /// The node of each frame, from its pfn ([`Sim::pfn_to_nid`]).
    pub node_map: NodeMap,
    pub mms: Vec<Option<Mm>>,
    /// Page-table pages of every live mm (the sum of their `nr_ptes`, PGDs included) and its
    /// high-water mark over the run: the host memory the page tables took at their largest
    /// (4 KiB of `Pte`s per table), which `mmsim bench` counts per frame.
    pub pgtable_pages: u64,
    pub pgtable_pages_peak: u64,
    pub tasks: Vec<Task>,
    pub files: Vec<File>,
    /// `bucket_order` of shadow entries' timestamps (mm/workingset.rs).
    pub workingset_bucket_order: u32,
    pub anon_vmas: Vec<AnonVma>,
    pub vmstat: VmStat,
    pub events: EventQueue,
    pub prng: Prng,
    pub next_ctx_id: u64,
    pub zero_pfn: Pfn,
    /// Latency (ns) from a CPU's node to each node: `node_latency[cpu_node][mem_node]`.
    pub node_latency: Vec<Vec<f64>>,
    /// A successful page walk's user time (ns), `walk_ns[cpu_node][pte_node]`: `cost.walk_base_ns`
    /// + `cost.walk_pte_miss_fraction` x the latency to the PTE page's node + `cost.access_ns`,
    /// rounded once here (the same expression `Sim::tlb_miss` evaluated per walk); the last
    /// entry of each row is a walk that finds no PTE table (local latency).
    pub walk_ns: Vec<Vec<Ns>>,
    /// Bandwidth (bytes/ns = GB/s) from a CPU's node to each node, for page clears and copies.
    pub node_bandwidth: Vec<Vec<f64>>,
    /// Runtime errors of the workload (a segfault in an op program), reported after the run.
    pub workload_errors: Vec<String>,
    pub oom_events: u64,
    /// Simulated time at which the run ended.
    pub end_ns: Ns,
    /// Per-CPU lru_add batches (mm/swap.c cpu_fbatches.lru_add).
    pub lru_add_batch: Vec<Vec<Pfn>>,
    /// A walk's PTEs, reused by [`Sim::for_each_rmap`] so that a walk allocates nothing.
    pub rmap_scratch: Vec<(MmId, u64)>,
    /// Host speed only: the frame up to which the host's caches have been warmed along the LRU
    /// list that reclaim isolated from last ([`Sim::lru_runahead`]); never read by the model.
    pub lru_ahead: u32,
    /// Host speed only: the same along the order-0 free list the last pcp refill took from.
    pub buddy_ahead: u32,
    /// `workload.kind = "llm"`: each process's ggml barrier (src/workload/llm.rs).
    pub llm_barriers: Vec<crate::workload::llm::Barrier>,
    /// Per-CPU page lists: `pcp[cpu][node]`.
    pub pcp: Vec<Vec<crate::mm::page_alloc::Pcp>>,
    /// 6.7+: when each CPU's next decay_pcp_high() is due (vmstat_update(), once a second).
    pub pcp_decay_at: Vec<Ns>,
    /// `pcpu_drain_mutex` (4.11+): held by a drain_all_pages() over this interval of simulated
    /// time; a drain that starts inside it returns at once (mm/page_alloc.rs).
    pub pcpu_drain: (Ns, Ns),
    /// The CPU whose steps the event loop is running now.
    pub running_cpu: Option<CpuId>,
    /// The time of the next event the loop has queued when the running CPU's step began (the
    /// earliest another CPU can act): a step whose clock passes it runs ahead of the other
    /// CPUs ([`Sim::ahead_of_others`]).
    pub step_horizon: Ns,
    /// Set while a fault whose access the workload replays is handled: an allocation that
    /// needs direct reclaim then leaves it to the task's next steps ([`Sim::alloc_pages`]).
    pub defer_direct_reclaim: bool,
    /// An allocation of the fault being handled left its direct reclaim to the task's next
    /// steps: the fault's out-of-memory result means "retry the access after it".
    pub direct_reclaim_deferred: bool,
    /// The readahead window the deferring allocation stopped, or that stopped to let the other
    /// CPUs catch up (`Sim::replayable` gives it to the task).
    pub ra_cut: Option<crate::mm::readahead::RaCut>,
    /// Tasks the run still waits for (counts_for_completion and not dead).
    pub live_tasks: u32,
    /// When reclaim first ran (kswapd woken or direct reclaim) and the TLB shootdowns counted by
    /// then: the start of the steady phase of a memory-pressure run.
    pub reclaim_start: Option<(Ns, u64)>,
    /// The swap device (mm/swapfile.rs), empty when machine.swap_mib = 0.
    pub swap: crate::mm::swapfile::Swap,
    /// Dirty page-cache writeback and the flusher (mm/page_writeback.rs).
    pub wb: crate::mm::page_writeback::Writeback,
    /// HugeTLB pools and vmemmap state (mm/hugetlb.rs, mm/hugetlb_vmemmap.rs).
    pub hugetlb: crate::mm::hugetlb::Hugetlb,
    /// The stale-TLB oracle of `mmsim check` (src/check/): None unless a check run turns it on.
    pub oracle: Option<Box<crate::check::Oracle>>,
    /// The fault-injection site switched on (`check.inject`), normally `Inject::None`.
    pub inject: crate::check::Inject,
    /// `numa-map-before-migrate` only: the (mm, vpn) whose unmap treats the PTE as inaccessible.
    pub numa_assume_inaccessible: Option<(MmId, u64)>,
    /// kernel/locking.rs: lock calendars, irq-off sections, lock_stat.
    pub locks: crate::kernel::locking::Locks,
    /// kernel/profile.rs: time by kernel function.
    pub prof: crate::kernel::profile::Profile,
    /// `--trace`: the tracepoint sink (src/report/trace_log.rs); None = tracing off.
    pub tracer: Option<Box<crate::report::trace_log::Tracer>>,
    /// `--timeline`: the counter sampler (src/report/timeline.rs); None = off.
    pub timeline: Option<Box<crate::report::timeline::Timeline>>,
    /// A window of the run whose profile is kept apart (lkp-tests' perf-profile: a few seconds
    /// in the middle of the run): `kernel/profile.rs` [`crate::kernel::profile::ProfileWindow`].
    pub profile_window: Option<Box<crate::kernel::profile::ProfileWindow>>,
    /// Memory tiers, demotion targets and per-node promotion state (mm/memory_tiers.rs).
    pub tiers: crate::mm::memory_tiers::MemoryTiers,
    /// arch/x86/mm/invlpgb.rs, rar.rs: global ASIDs, INVLPGB/TLBSYNC and RAR state (all off
    /// unless machine.invlpgb or machine.rar).
    pub bcast: Box<crate::arch::x86::mm::invlpgb::Broadcast>,
    /// mm/latr.rs: LATR lazy shootdown state; None unless kernel.flush_policy = "latr".
    pub latr: Option<Box<crate::mm::latr::Latr>>,
    /// mm/luf.rs: lazy unmap flush state (seed 000); unused unless kernel.luf is v10 or v12.
    pub luf: crate::mm::luf::LufState,
    /// Pages the kernel took for itself (`kalloc`, mm/filemap.rs `kalloc_pages`).
    pub slab_pages: Vec<Pfn>,
    /// block/mod.rs: the file device's and the swap device's queues.
    pub blkdev: [crate::block::BlockDev; 2],
}

pub const NO_PFN: u32 = u32::MAX;

impl Sim {
    /// Page-table pages allocated (`delta` > 0) or freed, for [`Sim::pgtable_pages`] and its
    /// peak; every change of an mm's `nr_ptes` goes through here too.
    pub fn pgtables_changed(&mut self, delta: i64) {
        self.pgtable_pages = self.pgtable_pages.checked_add_signed(delta).expect("simulator bug: more page tables freed than allocated");
        self.pgtable_pages_peak = self.pgtable_pages_peak.max(self.pgtable_pages);
    }

    pub fn new(cfg: &Config) -> Sim {
        let p = Params::from_config(cfg);
        let ncpus = cfg.int("machine.cpus") as usize;
        let nnodes = cfg.int("machine.nodes") as usize;
        let sockets = cfg.int("machine.sockets") as usize;
        let cpuless = cfg.int("machine.cpuless_nodes") as usize;
        let mem_pages = (cfg.int("machine.mem_per_node_mib") as u64 * 256) as u32;
        let cpuless_pages = (cfg.int("machine.cpuless_mem_mib") as u64 * 256) as u32;
        let mut nodes = Vec::new();
        let mut start = 0u32;
        for n in 0..nnodes + cpuless {
            let has_cpus = n < nnodes;
            let nr = if has_cpus { mem_pages } else { cpuless_pages };
            nodes.push(Node {
                id: NodeId(n as u32),
                start_pfn: start,
                nr_pages: nr,
                has_cpus,
                free_area: Default::default(),
                nr_free: 0,
                wmark: Default::default(),
                lru: Default::default(),
                kswapd: None,
                kswapd_priority: crate::mm::vmscan::DEF_PRIORITY,
                kswapd_pass: None,
                kswapd_run_reclaimed: 0,
                kswapd_failures: 0,
                pfmemalloc_wait: Vec::new(),
                zone_flags: Default::default(),
            });
            start += nr;
        }
        let frames = zeroed_frames(start as usize);
        let node_map = NodeMap::new(nodes.iter().map(|n| (n.start_pfn, n.nr_pages)));
        let node_latency: Vec<Vec<f64>> = (0..nodes.len())
            .map(|from| {
                (0..nodes.len())
                    .map(|to| {
                        if to >= nnodes {
                            p.cpuless_latency_ns
                        } else if from == to {
                            p.local_latency_ns
                        } else {
                            p.remote_latency_ns
                        }
                    })
                    .collect()
            })
            .collect();
        let walk_ns = walk_ns_table(&p, &node_latency);
        let (lbw, rbw, cbw) = (cfg.float("machine.local_bandwidth_gbps"), cfg.float("machine.remote_bandwidth_gbps"), cfg.float("machine.cpuless_bandwidth_gbps"));
        let node_bandwidth = (0..nodes.len())
            .map(|from| (0..nodes.len()).map(|to| if to >= nnodes { cbw } else if from == to { lbw } else { rbw }).collect())
            .collect();
        let geom = TlbGeometry {
            l1d_4k: (cfg.int("machine.tlb.l1d_4k_entries") as usize, cfg.int("machine.tlb.l1d_4k_ways") as usize),
            l1d_2m: (cfg.int("machine.tlb.l1d_2m_entries") as usize, cfg.int("machine.tlb.l1d_2m_ways") as usize),
            l1i_4k: (cfg.int("machine.tlb.l1i_4k_entries") as usize, cfg.int("machine.tlb.l1i_4k_ways") as usize),
            l1i_2m: (cfg.int("machine.tlb.l1i_2m_entries") as usize, cfg.int("machine.tlb.l1i_2m_ways") as usize),
            stlb: (cfg.int("machine.tlb.stlb_entries") as usize, cfg.int("machine.tlb.stlb_ways") as usize),
        };
        let cpus_per_node = ncpus / nnodes;
        let cpus_per_socket = ncpus / sockets;
        let cpus = (0..ncpus)
            .map(|i| Cpu {
                id: CpuId(i as u32),
                node: NodeId((i / cpus_per_node) as u32),
                socket: (i / cpus_per_socket) as u32,
                clock: 0,
                current: None,
                runqueue: VecDeque::new(),
                tlb: CpuTlb::new(&geom),
                tlbstate: TlbState::new(),
                stats: CpuStats::default(),
                scheduled: false,
                io_wait_until: 0,
                after_syscall: false,
            })
            .collect();
        let workingset_bucket_order = crate::mm::workingset::bucket_order(frames.len() as u64);
        let n_nodes = nodes.len();
        let mut sim = Sim {
            p,
            cfg: cfg.clone(),
            cpus,
            nodes,
            last_cpupid: CpupidTable::new(frames.len()),
            frames,
            node_map,
            mms: Vec::new(),
            pgtable_pages: 0,
            pgtable_pages_peak: 0,
            tasks: Vec::new(),
            files: Vec::new(),
            workingset_bucket_order,
            anon_vmas: Vec::new(),
            vmstat: VmStat::default(),
            events: EventQueue::default(),
            prng: Prng::new(cfg.int("run.seed") as u64),
            next_ctx_id: 1,
            zero_pfn: Pfn(0),
            walk_ns,
            node_latency,
            node_bandwidth,
            workload_errors: Vec::new(),
            oom_events: 0,
            end_ns: 0,
            running_cpu: None,
            step_horizon: Ns::MAX,
            defer_direct_reclaim: false,
            direct_reclaim_deferred: false,
            ra_cut: None,
            pcp: Vec::new(),
            pcp_decay_at: Vec::new(),
            pcpu_drain: (0, 0),
            lru_add_batch: vec![Vec::new(); ncpus],
            rmap_scratch: Vec::new(),
            lru_ahead: crate::mm::page_alloc::NIL,
            buddy_ahead: crate::mm::page_alloc::NIL,
            llm_barriers: Vec::new(),
            live_tasks: 0,
            hugetlb: Default::default(),
            swap: crate::mm::swapfile::Swap::new(cfg.int("machine.swap_mib") as u64 * 256),
            wb: crate::mm::page_writeback::Writeback::new(n_nodes),
            reclaim_start: None,
            oracle: None,
            inject: crate::check::Inject::from_name(&cfg.str("check.inject")),
            numa_assume_inaccessible: None,
            locks: crate::kernel::locking::Locks::new(Vec::new(), false, 0.0, 0.0),
            prof: crate::kernel::profile::Profile::new(ncpus),
            tracer: None,
            timeline: None,
            profile_window: None,
            tiers: Default::default(),
            bcast: Box::new(crate::arch::x86::mm::invlpgb::Broadcast::new(cfg, ncpus)),
            latr: crate::mm::latr::Latr::from_config(cfg, ncpus),
            luf: crate::mm::luf::LufState::new(crate::mm::luf::Luf::from_config(cfg), ncpus),
            slab_pages: Vec::new(),
            blkdev: Default::default(),
        };
        sim.tiers = crate::mm::memory_tiers::MemoryTiers::new(&sim.nodes, &sim.node_latency, &sim.node_bandwidth);
        sim.locks = crate::kernel::locking::Locks::new(
            sim.cpus.iter().map(|c| c.socket).collect(),
            cfg.bool("kernel.lock_model"),
            sim.p.lock_handoff_ns,
            sim.p.lock_handoff_cross_socket_ns,
        );
        sim.locks.grant = crate::kernel::locking::Grant::parse(&cfg.str("kernel.lock_grant"));
        let (delay, duration) = (cfg.float("run.profile_delay_ms"), cfg.float("run.profile_duration_ms"));
        if delay > 0.0 || duration > 0.0 {
            let start = (delay * 1e6) as Ns;
            let end = if duration > 0.0 { start.saturating_add((duration * 1e6) as Ns) } else { Ns::MAX };
            sim.profile_window = Some(Box::new(crate::kernel::profile::ProfileWindow::new(start, end)));
        }
        sim.init_page_alloc(cfg);
        // The shared zero page (ZERO_PAGE(0)), never freed.
        let z = sim.alloc_page(NodeId(0)).expect("node 0 has memory");
        sim.frames[z.0 as usize].flags |= pg::ZERO;
        sim.zero_pfn = z;
        sim
    }

    /// Has `cpu`'s clock passed the earliest time another CPU can act (the next queued event)?
    /// A step that goes on from there books its lock requests ahead of the other CPUs'. Never
    /// without the lock model (`kernel.lock_model = false`), where CPUs meet only by IPIs and
    /// the long loops that ask this stay one step.
    pub(crate) fn ahead_of_others(&self, cpu: CpuId) -> bool {
        let next = self.step_horizon.min(self.events.peek_time().unwrap_or(Ns::MAX));
        self.locks.enabled && self.cpus[cpu.0 as usize].clock > next
    }

    #[inline]
    pub fn mm(&self, id: MmId) -> &Mm {
        self.mms[id.0 as usize].as_ref().expect("simulator bug: dead mm")
    }
    #[inline]
    pub fn mm_mut(&mut self, id: MmId) -> &mut Mm {
        self.mms[id.0 as usize].as_mut().expect("simulator bug: dead mm")
    }
    #[inline]
    pub fn frame(&self, pfn: Pfn) -> &Frame {
        &self.frames[pfn.0 as usize]
    }
    #[inline]
    pub fn frame_mut(&mut self, pfn: Pfn) -> &mut Frame {
        &mut self.frames[pfn.0 as usize]
    }
    pub fn task(&self, t: Tid) -> &Task {
        &self.tasks[t.0 as usize]
    }
    pub fn task_mut(&mut self, t: Tid) -> &mut Task {
        &mut self.tasks[t.0 as usize]
    }

    /// Charge kernel time to a CPU (and the task running there).
    #[inline]
    pub fn charge_sys(&mut self, cpu: CpuId, ns: f64) {
        self.charge_sys_ns(cpu, round_ns(ns));
    }

    /// A system call's entry and exit (`cost.syscall_ns`) plus `extra` ns of its own work: the
    /// CPU's next page fault runs after the syscall path ([`Sim::fault_entry_ns`]).
    #[inline]
    pub fn enter_syscall(&mut self, cpu: CpuId, extra: f64) {
        self.cpus[cpu.0 as usize].after_syscall = true;
        self.charge_sys(cpu, self.p.syscall_ns + extra);
    }

    /// A page fault's entry, bookkeeping and exit (`cost.fault_ns`), plus
    /// `cost.fault_after_syscall_ns` when the CPU's last kernel entry was a system call. On this
    /// host a fault right after any syscall costs ~400 ns more than one right after another
    /// fault, and a syscall costs the same after either (docs/host-findings.md §8.9); the model
    /// has no caches or branch predictors, so it keeps only that one bit of history per CPU.
    #[inline]
    pub fn fault_entry_ns(&mut self, cpu: CpuId) -> f64 {
        let c = &mut self.cpus[cpu.0 as usize];
        let after = std::mem::replace(&mut c.after_syscall, false);
        if after { self.p.fault_ns + self.p.fault_after_syscall_ns } else { self.p.fault_ns }
    }

    /// [`Sim::charge_sys`] of whole nanoseconds (a wait measured on the clocks), without the
    /// round trip through f64.
    #[inline]
    pub fn charge_sys_ns(&mut self, cpu: CpuId, ns: Ns) {
        let c = &mut self.cpus[cpu.0 as usize];
        c.clock += ns;
        c.stats.sys_ns += ns;
        self.prof.charge(cpu, ns);
    }

    #[inline]
    pub fn charge_user(&mut self, cpu: CpuId, ns: f64) {
        self.charge_user_ns(cpu, round_ns(ns));
    }

    /// The hot path's charge: whole nanoseconds, per-CPU accounting only.
    #[inline]
    pub fn charge_user_ns(&mut self, cpu: CpuId, ns: Ns) {
        let c = &mut self.cpus[cpu.0 as usize];
        c.clock += ns;
        c.stats.user_ns += ns;
    }

    /// Start the host's cache miss on frame `pfn` (if it exists): a hint, no effect on
    /// results. A 28-byte frame may straddle two host cache lines.
    #[inline]
    pub(crate) fn prefetch_frame(&self, pfn: u32) {
        if let Some(f) = self.frames.get(pfn as usize) {
            crate::hw::prefetch(f);
            crate::hw::prefetch(&f.lru_prev);
        }
    }

    /// Host speed only: set a run-ahead cursor ([`Sim::lru_ahead`] or [`Sim::buddy_ahead`]) to
    /// `pfn` and start the host's miss on its frame.
    #[inline]
    pub(crate) fn runahead_start(&mut self, buddy: bool, pfn: u32) {
        *(if buddy { &mut self.buddy_ahead } else { &mut self.lru_ahead }) = pfn;
        self.prefetch_frame(pfn);
    }

    /// Host speed only: move a run-ahead cursor one frame along its list (towards the head for
    /// an LRU list, which is walked from its tail; towards the tail for a free list, walked
    /// from its head) and start the host's miss on that frame. The frame it reads was
    /// prefetched by the previous move. One cursor per kind, not per node or list: per-node
    /// cursors were measured and were no faster (docs/performance.md, item 36). A cursor may
    /// wander off its list when the frame it holds is taken meanwhile: it is only ever a
    /// prefetch address, never read by the model.
    #[inline]
    pub(crate) fn runahead_step(&mut self, buddy: bool) {
        let at = if buddy { self.buddy_ahead } else { self.lru_ahead };
        let Some(f) = self.frames.get(at as usize) else { return };
        let next = if buddy { f.lru_next } else { f.lru_prev };
        self.runahead_start(buddy, next);
    }

    pub fn now(&self, cpu: CpuId) -> Ns {
        self.cpus[cpu.0 as usize].clock
    }

    /// The node whose memory is local to a CPU.
    pub fn cpu_node(&self, cpu: CpuId) -> NodeId {
        self.cpus[cpu.0 as usize].node
    }

    /// `pfn_to_nid()`: the node whose memory holds frame `pfn`.
    #[inline]
    pub fn pfn_to_nid(&self, pfn: Pfn) -> usize {
        self.node_map.nid(pfn.0)
    }

    /// [`Sim::pfn_to_nid`] as a `NodeId`.
    #[inline]
    pub fn pfn_node(&self, pfn: Pfn) -> NodeId {
        NodeId(self.pfn_to_nid(pfn) as u32)
    }
}

/// [`Sim::walk_ns`] from the cost parameters and the node latencies.
fn walk_ns_table(p: &Params, node_latency: &[Vec<f64>]) -> Vec<Vec<Ns>> {
    let walk = |lat: f64| round_ns(p.walk_base_ns + p.walk_pte_miss_fraction * lat + p.access_ns);
    node_latency.iter().map(|row| row.iter().map(|&lat| walk(lat)).chain([walk(p.local_latency_ns)]).collect()).collect()
}

/// `x.round() as Ns`, bit for bit, without the libm call that `f64::round` is on x86-64's
/// baseline (no SSE4.1 `roundsd`): the hot charge paths call it per access and per fault.
/// `as` truncates toward zero and saturates (NaN and negatives to 0, +inf to `Ns::MAX`); below
/// 2^52 the fraction `x - t` is exact, at or above it every f64 is a whole number.
/// Branch-free: the fraction is data (a cost times a count, a latency), and a branch on it
/// mispredicted often enough to make `charge_sys` 4% of a full-scale reclaim run's host time.
#[inline(always)]
pub fn round_ns(x: f64) -> Ns {
    let t = x as Ns;
    // `t as i64 as f64` is exact below 2^52 (the only case `up` can be true) and one
    // instruction, where `t as f64` from a u64 takes several.
    let up = (t < (1 << 52)) & (x - t as i64 as f64 >= 0.5);
    t + up as Ns
}

#[cfg(test)]
mod node_map_tests {
    use super::NodeMap;
    use proptest::prelude::*;

    /// The node of every pfn, by a walk over the ranges.
    fn check(sizes: &[u32]) {
        let mut ranges = Vec::new();
        let mut start = 0;
        for &nr in sizes {
            ranges.push((start, nr));
            start += nr;
        }
        let m = NodeMap::new(ranges.iter().copied());
        for (nid, &(start, nr)) in ranges.iter().enumerate() {
            for pfn in start..start + nr {
                assert_eq!(m.nid(pfn), nid, "pfn {pfn} of {sizes:?}");
            }
        }
    }

    #[test]
    fn node_map_edge_cases() {
        check(&[1]);
        check(&[4096]);
        check(&[256, 256, 256, 256]);
        check(&[1000, 3]);
        check(&[3, 1000, 3]);
        check(&[1 << 18, 256, 1 << 18, 1 << 10]);
        check(&[768000, 768000, 256]);
    }

    proptest! {
        #[test]
        fn node_map_finds_every_pfn(sizes in proptest::collection::vec(1u32..5000, 1..12)) {
            check(&sizes);
        }
    }
}

#[cfg(test)]
mod round_tests {
    use proptest::prelude::*;

    #[test]
    fn round_ns_matches_round_on_edge_cases() {
        for x in [0.0, -0.0, 0.5, 1.5, 2.5, 0.49999999999999994, -0.5, -0.7, -3.2, 4503599627370495.5, 4503599627370496.0, 9007199254740993.0, 1e19, 1.9e19, 1e300, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MIN_POSITIVE, 1e-300] {
            assert_eq!(super::round_ns(x), x.round() as u64, "{x:e}");
        }
    }

    proptest! {
        #[test]
        fn round_ns_matches_round(x in any::<f64>(), y in 0.0f64..1e7) {
            prop_assert_eq!(super::round_ns(x), x.round() as u64);
            prop_assert_eq!(super::round_ns(y), y.round() as u64);
        }
    }
}

#[cfg(test)]
mod cpumask_tests {
    use super::CpuMask;
    use crate::types::CpuId;
    use proptest::prelude::*;

    proptest! {
        /// Inline (up to 256 CPUs) and boxed masks behave as a set of CPUs: membership, the
        /// ascending iteration the flush paths rely on, union, cpumask_any_but and equality.
        #[test]
        fn cpumask_is_a_set_of_cpus(n in 1usize..600, a in proptest::collection::vec(0usize..600, 0..40), b in proptest::collection::vec(0usize..600, 0..40)) {
            let (mut m, mut o) = (CpuMask::new(n), CpuMask::new(n));
            let mut want = std::collections::BTreeSet::new();
            for &c in a.iter().filter(|&&c| c < n) {
                m.set(CpuId(c as u32));
                want.insert(c as u32);
            }
            for &c in b.iter().filter(|&&c| c < n) {
                o.set(CpuId(c as u32));
            }
            prop_assert_eq!(m.iter().map(|c| c.0).collect::<Vec<_>>(), want.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(m.is_empty(), want.is_empty());
            prop_assert_eq!(m.any_but(CpuId(0)), want.iter().any(|&c| c != 0));
            prop_assert!((0..n as u32).all(|c| m.test(CpuId(c)) == want.contains(&c)));
            let mut u = m.clone();
            u.or(&o);
            prop_assert!((0..n as u32).all(|c| u.test(CpuId(c)) == (m.test(CpuId(c)) || o.test(CpuId(c)))));
            prop_assert_eq!(m.empty_like(), CpuMask::new(n));
            if let Some(&c) = want.iter().next() {
                let mut d = m.clone();
                d.clear(CpuId(c));
                prop_assert!(d != m && !d.test(CpuId(c)));
            }
            u.clear_all();
            prop_assert!(u.is_empty());
        }
    }
}
