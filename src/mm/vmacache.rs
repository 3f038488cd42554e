//! VMA lookup: `find_vma()` over the VMA tree with the pre-3.15 `mm->mmap_cache`, the 3.15-6.0
//! per-thread vmacache (mm/vmacache.c, include/linux/vmacache.h), or no cache over the 6.1+
//! maple tree, with the cost of every node visited.
//!
//! The VMA set itself is `Mm::vmas` (a BTreeMap keyed by start vpn); this module decides what a
//! lookup *costs* and what the caches return. The modelled structures:
//!
//! - **rbtree** (`mm->mm_rb`, augmented with `rb_subtree_gap`, 2.6-6.0): the walk of
//!   `find_vma()` over a balanced binary search tree of the VMAs in address order, stopping at
//!   the first node with `vm_start <= addr < vm_end` or running to a leaf when `addr` is in a
//!   gap. The number of nodes visited is computed exactly for a perfectly balanced tree of the
//!   mm's VMA count (`rbtree_walk_nodes`); a red-black tree is at most twice as deep.
//! - **maple** (6.1+, `mt_find`): a B-tree of 256-byte nodes holding the VMAs *and* the gaps
//!   between them (2n+1 ranges), 16 slots per leaf and 10 per internal node: every lookup visits
//!   one node per level (`maple_walk_nodes`).
//!
//! The caches (`kernel.vma_cache`):
//!
//! | cache        | state                                  | filled                      | invalidated                               |
//! |--------------|----------------------------------------|-----------------------------|-------------------------------------------|
//! | `mm`         | `MmVmaLookup::mmap_cache` (one VMA)    | every successful tree walk  | cleared when a VMA is unlinked (munmap)   |
//! | `per-thread` | `TaskVmaCache::vmas[4]`, `seqnum`      | slot `VMACACHE_HASH(addr)` after a walk, only if `current->mm == mm` | `mm->vmacache_seqnum++` on unlink; the task notices at its next lookup (lazy) |
//! | `none`       | -                                      | -                           | -                                         |
//!
//! Invariants (checked, not assumed): a cache hit returns a VMA that is still linked in the
//! mm (`TaskVmaCache::stale_hits` counts violations; it must stay 0); a task whose seqnum differs
//! from its mm's has all four slots cleared before it probes; a forked child or a new thread
//! starts with an empty cache (`Task::vmacache` is created empty by `new_task`).
//!
//! Departures: the cache holds a VMA's identity (start vpn + a per-mm link id), not a pointer;
//! a lookup through a dead identity is what a use-after-free would be in the kernel and is
//! counted, then answered by the tree walk so the run can go on. Invalidation happens where the
//! kernel does it (`__vma_unlink`/`__vma_unlink_common` on merge, `detach_vmas_to_be_unmapped`
//! on munmap); a split alone does not invalidate, because the cached pointer stays a live VMA
//! whose range is re-read on every probe (Linux 3.15-6.0 behave the same). VMACACHE_HASH uses
//! PAGE_SHIFT as in 3.15 (4.20+ hashed by PMD_SHIFT; not modelled).

use std::collections::BTreeMap;

use crate::config::Config;
use crate::mm::vmstat::VmEvent;
use crate::sim::Sim;
use crate::types::*;

/// `VMACACHE_SIZE` (VMACACHE_BITS = 2).
pub const VMACACHE_SIZE: usize = 4;

/// `VMACACHE_HASH(addr) = (addr >> PAGE_SHIFT) & VMACACHE_MASK`: the slot of a looked-up
/// address (its page number), not of the VMA.
#[inline]
pub fn vmacache_hash(vpn: u64) -> usize {
    (vpn & (VMACACHE_SIZE as u64 - 1)) as usize
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// 6.1+: no cache; the maple tree is walked every time.
    None,
    /// Before 3.15: `mm->mmap_cache`, one VMA per mm shared by all its threads.
    Mm,
    /// 3.15-6.0: four VMAs per task, invalidated by the mm's seqnum.
    PerThread,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeKind {
    Rbtree,
    Maple,
}

/// Behaviour and costs of VMA lookup, derived once from the config (every cost is the same for
/// every cache mode and tree).
#[derive(Clone, Copy, Debug)]
pub struct VmaParams {
    pub cache: CacheMode,
    pub tree: TreeKind,
    pub call_cycles: f64,
    pub probe_cycles: f64,
    pub rbtree_node_cycles: f64,
    pub maple_node_cycles: f64,
    pub ns_per_cycle: f64,
}

impl VmaParams {
    pub fn from_config(c: &Config) -> VmaParams {
        let preset = c.str("kernel.preset");
        let v = crate::config::presets::version(&preset);
        let cache = match c.str("kernel.vma_cache").as_str() {
            "none" => CacheMode::None,
            "mm" => CacheMode::Mm,
            "per-thread" => CacheMode::PerThread,
            _ => default_cache(v),
        };
        let tree = match c.str("kernel.vma_tree").as_str() {
            "rbtree" => TreeKind::Rbtree,
            "maple" => TreeKind::Maple,
            _ => default_tree(v),
        };
        VmaParams {
            cache,
            tree,
            call_cycles: c.float("cost.find_vma_call_cycles"),
            probe_cycles: c.float("cost.vmacache_probe_cycles"),
            rbtree_node_cycles: c.float("cost.rbtree_node_cycles"),
            maple_node_cycles: c.float("cost.maple_node_cycles"),
            ns_per_cycle: 1.0 / c.float("cost.find_vma_ghz"),
        }
    }
}

/// `kernel.vma_cache = "auto"`: the cache of a kernel version. mmap_cache until 3.14; the
/// per-thread vmacache from 3.15 (commit 615d6e8756c8 "mm: per-thread vma caching") until 6.0;
/// none from 6.1 ("mm: remove vmacache", maple tree series).
pub fn default_cache(version: (u32, u32)) -> CacheMode {
    if version < (3, 15) {
        CacheMode::Mm
    } else if version < (6, 1) {
        CacheMode::PerThread
    } else {
        CacheMode::None
    }
}

/// `kernel.vma_tree = "auto"`: the augmented rbtree until 6.0, the maple tree from 6.1.
pub fn default_tree(version: (u32, u32)) -> TreeKind {
    if version < (6, 1) { TreeKind::Rbtree } else { TreeKind::Maple }
}

/// Nodes `find_vma()` visits in a perfectly balanced binary search tree of `n` VMAs when the
/// answer is the VMA of rank `rank` (0-based, address order; `rank == n` means none) and
/// `inside` says whether the address lies inside it (the walk stops there) or in the gap below
/// it (the walk runs to a leaf, remembering the last node with `vm_end > addr`).
pub fn rbtree_walk_nodes(n: usize, rank: usize, inside: bool) -> u32 {
    let (mut lo, mut hi, mut visits) = (0usize, n, 0u32);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        visits += 1;
        if mid == rank && inside {
            break;
        }
        if mid >= rank {
            hi = mid; // vm_end > addr: go left
        } else {
            lo = mid + 1; // vm_end <= addr: go right
        }
    }
    visits
}

/// Nodes an `mt_find()` visits in a maple tree of `n` VMAs: the tree holds the VMAs and the gaps
/// between them (2n+1 ranges), 16 per leaf (maple_range_64) and 10 children per internal node
/// (maple_arange_64, which also tracks gaps). One node per level.
pub fn maple_walk_nodes(n: usize) -> u32 {
    let entries = 2 * n as u64 + 1;
    let (mut cap, mut levels) = (16u64, 1u32);
    while cap < entries {
        cap *= 10;
        levels += 1;
    }
    levels
}

/// What a cache slot holds: a VMA's identity (its start and its link id) plus the range the
/// vm_area_struct had when cached (what a freed struct would still contain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmaRef {
    pub start: u64,
    pub end: u64,
    pub id: u64,
}

/// Per-mm lookup state: `mm->mmap_cache` (before 3.15), `mm->vmacache_seqnum` (3.15-6.0), and
/// the bookkeeping that gives every linked VMA an identity and the tree its shape.
///
/// | field        | meaning                                         | changed by                              |
/// |--------------|-------------------------------------------------|-----------------------------------------|
/// | mmap_cache   | the last VMA `find_vma` found (one per mm)      | find_vma; cleared by vmacache_invalidate |
/// | seqnum       | `vmacache_seqnum`, u64 (never wraps)            | vmacache_invalidate                     |
/// | ids          | start vpn → id of the VMA linked there          | vma_linked / vma_split / vma_unlinked   |
#[derive(Clone, Debug, Default)]
pub struct MmVmaLookup {
    pub mmap_cache: Option<VmaRef>,
    pub seqnum: u64,
    pub invalidations: u64,
    ids: BTreeMap<u64, u64>,
    next_id: u64,
    tree_gen: u64,
    shadow: Vec<u64>,
    shadow_gen: u64,
    params: Option<VmaParams>,
    /// Test-only fault injection: skip every invalidation (the invalidation test shows that a
    /// stale VMA is then returned, so the check that it never is has teeth).
    #[doc(hidden)]
    pub skip_invalidation: bool,
}

impl MmVmaLookup {
    fn id_of(&mut self, start: u64) -> u64 {
        let next = &mut self.next_id;
        *self.ids.entry(start).or_insert_with(|| {
            *next += 1;
            *next
        })
    }
    fn new_id(&mut self, start: u64) {
        self.next_id += 1;
        self.ids.insert(start, self.next_id);
        self.tree_gen += 1;
    }
}

/// Per-task cache (`task_struct.vmacache`, 3.15-6.0) and the task's find_vma statistics.
///
/// | field   | meaning                                   | what must hold                                 |
/// |---------|-------------------------------------------|------------------------------------------------|
/// | seqnum  | the mm seqnum the slots belong to         | slots are used only if it equals the mm's      |
/// | vmas    | four cached VMAs, slot = hash of the addr | each is a VMA of `current->mm`                 |
#[derive(Clone, Debug, Default)]
pub struct TaskVmaCache {
    pub seqnum: u64,
    pub vmas: [Option<VmaRef>; VMACACHE_SIZE],
    /// find_vma calls made by this task (on any mm), and how many a cache answered.
    pub calls: u64,
    pub hits: u64,
    /// Cycles this task spent in find_vma (cache probes and tree walks).
    pub cycles: f64,
    /// Cache hits on a VMA that is no longer linked (must stay 0: see the module doc).
    pub stale_hits: u64,
}

/// Totals over all tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FindVmaStats {
    pub calls: u64,
    pub hits: u64,
    pub cycles: f64,
    pub stale_hits: u64,
}

impl FindVmaStats {
    pub fn hit_rate_pct(&self) -> f64 {
        if self.calls == 0 { 0.0 } else { 100.0 * self.hits as f64 / self.calls as f64 }
    }
}

enum Probe {
    Hit,
    Miss,
    /// The slot's VMA has been unlinked, yet its old range contains the address.
    Stale,
}

fn probe(l: &MmVmaLookup, vmas: &BTreeMap<u64, crate::sim::Vma>, r: &VmaRef, vpn: u64) -> Probe {
    if l.ids.get(&r.start) == Some(&r.id) {
        // A live VMA: its current range is read through the pointer.
        match vmas.get(&r.start) {
            Some(v) if v.start <= vpn && vpn < v.end => Probe::Hit,
            _ => Probe::Miss,
        }
    } else if r.start <= vpn && vpn < r.end {
        Probe::Stale
    } else {
        Probe::Miss
    }
}

impl Sim {
    /// The lookup parameters (parsed from the config at an mm's first lookup).
    pub fn vma_params(&mut self, mm: MmId) -> VmaParams {
        if let Some(p) = self.mm(mm).vma_lookup.params {
            return p;
        }
        let p = VmaParams::from_config(&self.cfg);
        self.mm_mut(mm).vma_lookup.params = Some(p);
        p
    }

    /// `find_vma(mm, addr)` (mm/mmap.c; 3.14, 3.15-6.0 with mm/vmacache.c, 6.1+ `mt_find`) as
    /// called by the task running on `cpu`: the start of the first VMA with `vm_end > vpn`.
    /// Counts vmacache_find_calls/hits, charges the cycles to the CPU and to `current`.
    pub fn find_vma(&mut self, cpu: CpuId, mm: MmId, vpn: u64) -> Option<u64> {
        let p = self.vma_params(mm);
        let current = self.cpus[cpu.0 as usize].current;
        // vmacache_valid_mm(): current->mm == mm and not a kernel thread.
        let own = current.filter(|&t| self.tasks[t.0 as usize].mm == Some(mm));
        self.vmstat.count(VmEvent::VMACACHE_FIND_CALLS);
        let mut cycles = p.call_cycles;
        let mut found: Option<u64> = None;
        let mut stale = 0u64;
        let m = self.mms[mm.0 as usize].as_mut().expect("simulator bug: dead mm");
        match p.cache {
            CacheMode::None => {}
            CacheMode::Mm => {
                cycles += p.probe_cycles;
                if let Some(r) = m.vma_lookup.mmap_cache {
                    match probe(&m.vma_lookup, &m.vmas, &r, vpn) {
                        Probe::Hit => found = Some(r.start),
                        Probe::Stale => stale += 1,
                        Probe::Miss => {}
                    }
                }
            }
            CacheMode::PerThread => {
                if let Some(t) = own {
                    let tc = &mut self.tasks[t.0 as usize].vmacache;
                    if tc.seqnum != m.vma_lookup.seqnum {
                        // vmacache_valid(): first lookup since an invalidation.
                        tc.seqnum = m.vma_lookup.seqnum;
                        tc.vmas = [None; VMACACHE_SIZE];
                    } else {
                        let mut idx = vmacache_hash(vpn);
                        for _ in 0..VMACACHE_SIZE {
                            cycles += p.probe_cycles;
                            if let Some(r) = tc.vmas[idx] {
                                match probe(&m.vma_lookup, &m.vmas, &r, vpn) {
                                    Probe::Hit => {
                                        found = Some(r.start);
                                        break;
                                    }
                                    Probe::Stale => stale += 1,
                                    Probe::Miss => {}
                                }
                            }
                            idx = (idx + 1) % VMACACHE_SIZE;
                        }
                    }
                }
            }
        }
        let hit = found.is_some();
        if !hit {
            // The tree walk (the BTreeMap gives the answer; the tree's shape gives the cost).
            let (start, inside) = match crate::mm::mmap::find_vma_in(m, vpn) {
                Some(v) => (Some(v.start), v.start <= vpn),
                None => (None, false),
            };
            let n = m.vmas.len();
            let nodes = match p.tree {
                TreeKind::Maple => maple_walk_nodes(n),
                TreeKind::Rbtree => {
                    let l = &mut m.vma_lookup;
                    if l.shadow_gen != l.tree_gen || l.shadow.len() != n {
                        l.shadow.clear();
                        l.shadow.extend(m.vmas.keys().copied());
                        l.shadow_gen = l.tree_gen;
                    }
                    let rank = start.map(|s| l.shadow.partition_point(|&x| x < s)).unwrap_or(n);
                    rbtree_walk_nodes(n, rank, inside)
                }
            };
            cycles += nodes as f64 * if p.tree == TreeKind::Maple { p.maple_node_cycles } else { p.rbtree_node_cycles };
            found = start;
            if let Some(s) = start {
                let r = VmaRef { start: s, end: m.vmas[&s].end, id: m.vma_lookup.id_of(s) };
                match p.cache {
                    CacheMode::Mm => m.vma_lookup.mmap_cache = Some(r),
                    // vmacache_update(): only into current's own cache.
                    CacheMode::PerThread => {
                        if let Some(t) = own {
                            self.tasks[t.0 as usize].vmacache.vmas[vmacache_hash(vpn)] = Some(r);
                        }
                    }
                    CacheMode::None => {}
                }
            }
        } else {
            self.vmstat.count(VmEvent::VMACACHE_FIND_HITS);
        }
        if let Some(t) = current {
            let tc = &mut self.tasks[t.0 as usize].vmacache;
            tc.calls += 1;
            tc.hits += hit as u64;
            tc.cycles += cycles;
            tc.stale_hits += stale;
        }
        self.charge_sys(cpu, cycles * p.ns_per_cycle);
        found
    }

    /// `find_vma_intersection(mm, start, end)`: the VMA overlapping `[start, end)`, if any.
    pub fn find_vma_intersection(&mut self, cpu: CpuId, mm: MmId, start: u64, end: u64) -> Option<u64> {
        self.find_vma(cpu, mm, start).filter(|s| self.mm(mm).vmas[s].start < end)
    }

    /// `vmacache_invalidate(mm)`: `mm->vmacache_seqnum++` (3.15-6.0) and, for the pre-3.15
    /// cache, `mm->mmap_cache = NULL` (detach_vmas_to_be_unmapped). Call where a VMA is unlinked.
    pub fn vmacache_invalidate(&mut self, mm: MmId) {
        let l = &mut self.mm_mut(mm).vma_lookup;
        if l.skip_invalidation {
            return;
        }
        l.seqnum += 1;
        l.invalidations += 1;
        l.mmap_cache = None;
    }

    /// `vma_link()`: a new VMA object now starts at `start`.
    pub fn vma_linked(&mut self, mm: MmId, start: u64) {
        self.mm_mut(mm).vma_lookup.new_id(start);
    }

    /// `__split_vma()`: the VMA was split at `at`; the upper part is a new object.
    pub fn vma_split(&mut self, mm: MmId, at: u64) {
        self.mm_mut(mm).vma_lookup.new_id(at);
    }

    /// `__vma_unlink` / `detach_vmas_to_be_unmapped` for the VMA that started at `start`: its
    /// identity dies. The caller invalidates the caches once per detach (vmacache_invalidate).
    pub fn vma_unlinked(&mut self, mm: MmId, start: u64) {
        let l = &mut self.mm_mut(mm).vma_lookup;
        l.ids.remove(&start);
        l.tree_gen += 1;
    }

    /// find_vma statistics summed over every task.
    pub fn find_vma_stats(&self) -> FindVmaStats {
        let mut s = FindVmaStats::default();
        for t in &self.tasks {
            s.calls += t.vmacache.calls;
            s.hits += t.vmacache.hits;
            s.cycles += t.vmacache.cycles;
            s.stale_hits += t.vmacache.stale_hits;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_the_page_number_mod_4() {
        assert_eq!(vmacache_hash(0x1000 >> PAGE_SHIFT), 1);
        assert_eq!(vmacache_hash(0x7fff_ffff_f000 >> PAGE_SHIFT), 3);
        assert_eq!(vmacache_hash(8), 0);
    }

    #[test]
    fn balanced_walk_depth() {
        // One VMA: the root.
        assert_eq!(rbtree_walk_nodes(1, 0, true), 1);
        // The root of 7 is rank 3: found at once; a leaf is 3 deep.
        assert_eq!(rbtree_walk_nodes(7, 3, true), 1);
        assert_eq!(rbtree_walk_nodes(7, 0, true), 3);
        // An address in a gap walks to a leaf.
        assert_eq!(rbtree_walk_nodes(7, 3, false), 3);
        // No VMA above the address: rightmost path.
        assert_eq!(rbtree_walk_nodes(7, 7, false), 3);
        // ~log2(n) for a thousand VMAs.
        assert!((9..=10).contains(&rbtree_walk_nodes(1000, 0, true)));
    }

    #[test]
    fn maple_levels() {
        assert_eq!(maple_walk_nodes(5), 1); // 11 ranges fit a leaf
        assert_eq!(maple_walk_nodes(30), 2);
        assert_eq!(maple_walk_nodes(3000), 4); // "a few thousand VMAs: 3-4 levels"
    }

    #[test]
    fn auto_follows_the_version() {
        assert_eq!(default_cache((3, 14)), CacheMode::Mm);
        assert_eq!(default_cache((4, 14)), CacheMode::PerThread);
        assert_eq!(default_cache((6, 0)), CacheMode::PerThread);
        assert_eq!(default_cache((6, 1)), CacheMode::None);
        assert_eq!(default_tree((6, 0)), TreeKind::Rbtree);
        assert_eq!(default_tree((6, 18)), TreeKind::Maple);
    }
}
