//! Workingset refault detection (mm/workingset.c, the classic two-list LRU; no MGLRU).
//!
//! When reclaim evicts a page-cache folio, `__remove_mapping()` leaves a *shadow entry* in its
//! page-cache slot (`workingset_eviction()`): the node's `nonresident_age` at eviction time and
//! whether the folio was PG_workingset. When the slot is faulted in again (`filemap_add_folio()`
//! → `workingset_refault()`), the *refault distance* (how much the node's LRU aged meanwhile) is
//! compared with the workingset size: a folio that would have stayed resident with that much
//! more memory is activated at once (WORKINGSET_ACTIVATE) and, if it was in the workingset when
//! evicted, gets PG_workingset back (WORKINGSET_RESTORE).
//!
//! Per kernel version, as in the presets:
//! - 3.15+: shadow entries, refault distance against NR_ACTIVE_FILE, activation on refault
//!   (4.2's `workingset_refault()` returned the decision to `add_to_page_cache_lru()`; 4.2 kept
//!   the age per zone, the model has one zone per node);
//! - 4.20+: PG_workingset ("mm: workingset: tell cache transitions from workingset
//!   thrashing"): set when `shrink_active_list()` deactivates a folio, stored in the shadow,
//!   restored on refault;
//! - 5.9+: the cache workingset challenges anon ("mm: workingset: let cache workingset challenge
//!   anon"): with free swap, the workingset size of a file refault adds the anon lists; and
//!   `move_folios_to_lru()` ages `nonresident_age` for every folio it puts back active
//!   ("age nonresident information alongside anonymous pages");
//! - 6.6+: MADV_COLD/MADV_PAGEOUT mark an active folio PG_workingset before deactivating or
//!   reclaiming it ("mm: madvise: fix uneven accounting of psi");
//! - 6.10+: `filemap_map_pages()` does not count a PG_workingset folio against `mmap_miss`
//!   ("mm/filemap: don't decrease mmap_miss when folio has workingset flag"), so read-around
//!   stops on a file whose pages keep being evicted and refaulted (src/mm/readahead.rs).
//!
//! Departures: anon folios leave no shadow in the swap cache (5.9+ tracks them too), so only
//! file refaults are detected; `folio_mark_accessed()` (read(2) of cached pages) is not modelled,
//! so its `workingset_activation()` ageing is missing; shadow entries are never reclaimed (the
//! shadow-node shrinker) and live until the slot is refaulted; no memcg.

use crate::mm::vmscan::Lru;
use crate::mm::vmstat::VmEvent;
use crate::sim::{pg, Sim};
use crate::types::*;

/// One slot of a file's page cache (the xarray entry): a folio, a shadow entry left by its
/// eviction, or nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Slot {
    #[default]
    Empty,
    Page(Pfn),
    Shadow(Shadow),
}

impl Slot {
    pub fn page(self) -> Option<Pfn> {
        match self {
            Slot::Page(p) => Some(p),
            _ => None,
        }
    }
}

/// A shadow entry, packed as `pack_shadow()` packs it into an xarray value: the eviction
/// timestamp (`nonresident_age >> bucket_order`, masked to the bits left), the node, and the
/// PG_workingset bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shadow(u32);

/// Bits of a shadow: 1 for PG_workingset (WORKINGSET_SHIFT), 6 for the node (machine.nodes
/// allows 64), the rest for the timestamp (EVICTION_BITS).
const WORKINGSET_SHIFT: u32 = 1;
const NODES_SHIFT: u32 = 6;
pub const EVICTION_BITS: u32 = 32 - WORKINGSET_SHIFT - NODES_SHIFT;
const EVICTION_MASK: u64 = (1 << EVICTION_BITS) - 1;

impl Shadow {
    fn pack(node: usize, eviction: u64, workingset: bool) -> Shadow {
        let e = eviction & EVICTION_MASK;
        Shadow(((e as u32) << (NODES_SHIFT + WORKINGSET_SHIFT)) | ((node as u32) << WORKINGSET_SHIFT) | workingset as u32)
    }
    fn unpack(self) -> (usize, u64, bool) {
        let v = self.0;
        let workingset = v & 1 != 0;
        let node = ((v >> WORKINGSET_SHIFT) & ((1 << NODES_SHIFT) - 1)) as usize;
        (node, (v >> (NODES_SHIFT + WORKINGSET_SHIFT)) as u64, workingset)
    }
}

/// `workingset_init()`'s bucket_order: timestamps are kept in buckets of 2^order pages when the
/// machine has more pages than the timestamp bits can count.
pub fn bucket_order(total_pages: u64) -> u32 {
    let max_order = 64 - total_pages.saturating_sub(1).leading_zeros();
    max_order.saturating_sub(EVICTION_BITS)
}

impl crate::sim::File {
    /// The folio cached at `pgoff`, if any.
    #[inline]
    pub fn page(&self, pgoff: u64) -> Option<Pfn> {
        self.pages.get(pgoff as usize).and_then(|s| s.page())
    }

    /// The shadow entry left at `pgoff`, if any.
    pub fn shadow(&self, pgoff: u64) -> Option<Shadow> {
        match self.pages.get(pgoff as usize) {
            Some(Slot::Shadow(s)) => Some(*s),
            _ => None,
        }
    }

    /// Store `slot` at `pgoff`, growing the slots as needed.
    pub fn set_slot(&mut self, pgoff: u64, slot: Slot) {
        let i = pgoff as usize;
        if self.pages.len() <= i {
            self.pages.resize(i + 1, Slot::Empty);
        }
        self.pages[i] = slot;
    }
}

impl Sim {
    /// `workingset_age_nonresident()`: the node's LRU aged by `n` pages.
    #[inline]
    pub(crate) fn workingset_age_nonresident(&mut self, node: usize, n: u64) {
        self.nodes[node].lru.nonresident_age += n;
    }

    /// `workingset_eviction()`: the shadow entry for a file folio being evicted from `node`
    /// (ages the node's LRU by one page).
    pub(crate) fn workingset_eviction(&mut self, pfn: Pfn) -> Shadow {
        let f = self.frames[pfn.0 as usize];
        let node = self.pfn_to_nid(pfn);
        let eviction = self.nodes[node].lru.nonresident_age >> self.workingset_bucket_order;
        self.workingset_age_nonresident(node, 1);
        Shadow::pack(node, eviction, self.p.kver >= (4, 20) && f.flags & pg::WORKINGSET != 0)
    }

    /// `workingset_refault()` for a file folio `pfn` just added where `shadow` was (before it
    /// reaches the LRU): activate it if its refault distance is within the workingset size,
    /// and give PG_workingset back if it had it.
    pub(crate) fn workingset_refault(&mut self, pfn: Pfn, shadow: Shadow) {
        self.vmstat.count(VmEvent::WORKINGSET_REFAULT_FILE);
        let (node, eviction, workingset) = shadow.unpack();
        if node >= self.nodes.len() {
            return;
        }
        // workingset_test_recent(): the distance in the eviction node's ageing, masked as the
        // kernel masks it (EVICTION_MASK, also when bucket_order > 0).
        let refault = self.nodes[node].lru.nonresident_age;
        let distance = refault.wrapping_sub(eviction << self.workingset_bucket_order) & EVICTION_MASK;
        let lists = &self.nodes[node].lru.lists;
        let mut size = lists[Lru::ActiveFile as usize].len;
        if self.p.kver >= (5, 9) && self.swap.nr_free() > 0 {
            size += lists[Lru::ActiveAnon as usize].len + lists[Lru::InactiveAnon as usize].len;
        }
        if distance > size {
            return;
        }
        self.frames[pfn.0 as usize].flags |= pg::ACTIVE;
        let here = self.pfn_to_nid(pfn);
        self.workingset_age_nonresident(here, 1);
        self.vmstat.count(VmEvent::WORKINGSET_ACTIVATE_FILE);
        if workingset {
            self.frames[pfn.0 as usize].flags |= pg::WORKINGSET;
            self.vmstat.count(VmEvent::WORKINGSET_RESTORE_FILE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadows_round_trip() {
        for &(node, ev, ws) in &[(0usize, 0u64, false), (63, EVICTION_MASK, true), (5, 12345, true), (1, EVICTION_MASK + 7, false)] {
            let (n, e, w) = Shadow::pack(node, ev, ws).unpack();
            assert_eq!((n, e, w), (node, ev & EVICTION_MASK, ws));
        }
    }

    #[test]
    fn bucket_order_keeps_the_machine_countable() {
        assert_eq!(bucket_order(1 << 20), 0);
        assert_eq!(bucket_order(1 << EVICTION_BITS), 0);
        assert_eq!(bucket_order((1 << EVICTION_BITS) + 1), 1);
        // 1 TiB of 4 KiB pages.
        assert_eq!(bucket_order(1 << 28), 28 - EVICTION_BITS);
    }
}
