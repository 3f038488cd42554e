//! Demotion in reclaim (mm/vmscan.c, Linux 5.15+, as in 6.18; mechanisms.md §2 "Tiering"):
//! `can_demote()`, `demote_folio_list()` and `alloc_demote_folio()`. Kept apart from
//! mm/vmscan.rs so the reclaim core only gains the calls; `shrink_folio_list()` hands these its
//! candidates (mm/vmscan.rs).
//!
//! With `vm.demotion_enabled` a node that has a demotion target (mm/memory_tiers.rs) demotes
//! the folios kswapd or direct reclaim would evict: they are migrated (MR_DEMOTION, with
//! `migrate_pages_batch()`'s batched flush, mm/migrate.rs) to the next lower tier instead. A
//! folio that cannot be demoted (the target has no free page above its min watermark, an
//! unexpected reference) goes back to `shrink_folio_list()`, which reclaims it as it would
//! have. Anon folios are reclaim candidates even without swap then (`can_reclaim_anon_pages()`).
//! MADV_PAGEOUT (`reclaim_pages()`) never demotes (`sc->no_demotion`).
//!
//! Departures: no memcg (`mem_cgroup_node_filter_allowed()`), no large folios (no THP), the
//! "refcount as expected" test of `folio_migrate_mapping()` is made before the unmap.

use crate::mm::memory_tiers::MEMTIER_CHUNK_BITS;
use crate::mm::migrate::NR_MAX_BATCHED_MIGRATION;
use crate::mm::vmstat::VmEvent;
use crate::sim::{pg, Sim};
use crate::types::*;

impl Sim {
    /// `can_demote()`: demotion is on and the node has a demotion target.
    pub fn can_demote(&self, nid: u32) -> bool {
        self.p.demotion_enabled && !self.tiers.preferred[nid as usize].is_empty()
    }

    /// May `pfn` be migrated now? `folio_migrate_mapping()` fails with -EAGAIN on a reference
    /// other than its mappings' and the page cache's; MIGRATE_ASYNC skips writeback.
    pub(crate) fn demote_folio_movable(&self, pfn: Pfn) -> bool {
        let f = self.frame(pfn);
        f.flags & (pg::WRITEBACK | pg::ZERO) == 0 && f.refcount == f.mapcount.max(0) as u32 + (f.flags & pg::FILE != 0) as u32
    }

    /// `alloc_demote_folio()`: GFP_NOWAIT without reclaim — first on `target` only
    /// (`__GFP_THISNODE`), then on any node of its tier or below (the allowed mask); each try is
    /// the fast path above WMARK_LOW, then the slow path's wake of the nodes' kswapds and a try
    /// above WMARK_MIN.
    pub fn alloc_demote_folio(&mut self, cpu: CpuId, target: u32) -> Option<Pfn> {
        let tier = |s: &Sim, j: usize| s.tiers.adistance[j] >> MEMTIER_CHUNK_BITS;
        let t = tier(self, target as usize);
        let mut allowed = vec![target as usize];
        allowed.extend((0..self.nodes.len()).filter(|&j| j != target as usize && tier(self, j) >= t));
        for pass in [&allowed[..1], &allowed[..]] {
            for &j in pass {
                let low = self.nodes[j].wmark.low;
                if let Some(p) = self.alloc_pages_thisnode(cpu, j, low) {
                    return Some(p);
                }
            }
            for &j in pass {
                self.wakeup_kswapd(cpu, j);
            }
            for &j in pass {
                let min = self.nodes[j].wmark.min;
                if let Some(p) = self.alloc_pages_thisnode(cpu, j, min) {
                    return Some(p);
                }
            }
        }
        None
    }

    /// `demote_folio_list()`: migrate reclaim's candidates from node `nid` to its next demotion
    /// node. Returns the number demoted (counted in pgdemote_kswapd or pgdemote_direct) and the
    /// folios that were not, still isolated, for reclaim to evict.
    pub fn demote_folio_list(&mut self, cpu: CpuId, folios: Vec<Pfn>, nid: u32, kswapd: bool) -> (u64, Vec<Pfn>) {
        if folios.is_empty() {
            return (0, folios);
        }
        let Some(target) = self.next_demotion_node(nid) else { return (0, folios) };
        let (movable, mut failed): (Vec<Pfn>, Vec<Pfn>) = folios.into_iter().partition(|&p| self.demote_folio_movable(p));
        let mut ok = 0;
        for chunk in movable.chunks(NR_MAX_BATCHED_MIGRATION) {
            let (o, _) = self.migrate_pages_batch_to(cpu, chunk, NodeId(target), Some(&mut failed));
            ok += o;
        }
        self.vmstat.add(if kswapd { VmEvent::PGDEMOTE_KSWAPD } else { VmEvent::PGDEMOTE_DIRECT }, ok);
        let nfailed = failed.len() as u64;
        self.trace(cpu, || crate::report::trace_log::TraceEvent::MmMigratePages { succeeded: ok, failed: nfailed, numa: false });
        if ok > 0 {
            self.mark("demotion");
        }
        if !failed.is_empty() {
            self.mark("demotion failed: reclaimed instead");
        }
        (ok, failed)
    }
}
