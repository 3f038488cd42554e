//! Reclaim (mm/vmscan.c, Linux 6.18): `reclaim_pages()` → `shrink_folio_list()`.
//!
//! Modelled here: the path MADV_PAGEOUT uses — every folio is unmapped with TTU_BATCH_FLUSH,
//! a dirty file folio gets `try_to_unmap_flush_dirty()` and is written back (`pageout`), and one
//! `try_to_unmap_flush()` runs after the scan loop, before clean folios are freed
//! (`__remove_mapping`). Anon folios need swap, which is off: they stay (activated), as in Linux
//! without a swap device. LRU lists, kswapd and watermarks are the memory-pressure work.

use crate::mm::rmap::TlbUnmapBatch;
use crate::mm::vmstat::VmEvent;
use crate::sim::{pg, Sim};
use crate::types::*;

/// PAGEVEC_SIZE: shrink_folio_list() frees folios in batches of this many, flushing the pending
/// unmap batch before each (the folio_batch `free_folios`).
pub const PAGEVEC_SIZE: usize = 31;

impl Sim {
    /// `reclaim_pages()` on an isolated list.
    pub fn reclaim_pages(&mut self, cpu: CpuId, folios: Vec<Pfn>) {
        self.shrink_folio_list(cpu, folios);
    }

    /// `shrink_folio_list()` with `ignore_references` (the madvise path). Returns pages reclaimed.
    pub fn shrink_folio_list(&mut self, cpu: CpuId, folios: Vec<Pfn>) -> u64 {
        let mut batch = TlbUnmapBatch::new(self.cpus.len());
        let mut free_folios: Vec<Pfn> = Vec::with_capacity(PAGEVEC_SIZE);
        let mut reclaimed = 0u64;
        for pfn in folios {
            let f = *self.frame(pfn);
            if f.flags & pg::ANON != 0 {
                // No swap: anon folios cannot be reclaimed (add_to_swap fails) and are kept.
                continue;
            }
            self.vmstat.count(VmEvent::PGSCAN_DIRECT);
            if f.mapcount > 0 {
                self.try_to_unmap(cpu, pfn, Some(&mut batch));
            }
            if self.frame(pfn).flags & pg::DIRTY != 0 {
                // pageout(): stale writable TLB entries must be gone before the I/O starts.
                self.try_to_unmap_flush_dirty(cpu, &mut batch);
                self.frame_mut(pfn).flags &= !pg::DIRTY;
                self.vmstat.count(VmEvent::PGPGOUT);
                self.charge_sys(cpu, self.p.block_write_ns);
            }
            if self.frame(pfn).mapcount != 0 {
                continue;
            }
            // __remove_mapping(): out of the page cache; the frame is freed with its batch.
            self.remove_from_page_cache(pfn);
            self.vmstat.count(VmEvent::PGSTEAL_DIRECT);
            reclaimed += 1;
            free_folios.push(pfn);
            if free_folios.len() == PAGEVEC_SIZE {
                // folio_batch_add() == 0: try_to_unmap_flush(), then free_unref_folios().
                self.try_to_unmap_flush(cpu, &mut batch);
                self.free_folio_batch(cpu, &mut free_folios);
            }
        }
        // The end of the scan: flush before the last folios are freed.
        self.try_to_unmap_flush(cpu, &mut batch);
        self.free_folio_batch(cpu, &mut free_folios);
        reclaimed
    }

    fn free_folio_batch(&mut self, cpu: CpuId, folios: &mut Vec<Pfn>) {
        let n = folios.len();
        for pfn in folios.drain(..) {
            self.put_page(pfn);
        }
        self.charge_sys(cpu, self.p.page_alloc_ns * n as f64);
    }
}
