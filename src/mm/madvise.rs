//! madvise (mm/madvise.c, Linux 6.18).
//!
//! - MADV_DONTNEED: `madvise_dontneed_single_vma` → `zap_page_range_single` (one mmu_gather,
//!   one flush at the end, page tables kept).
//! - MADV_PAGEOUT: `madvise_cold_or_pageout_pte_range` isolates the folios mapped by this process
//!   only (mapcount 1), one PMD's worth at a time, and hands each PMD's list to `reclaim_pages()`,
//!   which runs `shrink_folio_list()` with TTU_BATCH_FLUSH. So pageout flushes once per 2 MiB
//!   span walked, not once per call. Young bits are not cleared for pageout (only for
//!   MADV_COLD), so the walk itself changes no PTE. Each PTE table's walk starts, under the PTE
//!   lock, with `flush_tlb_batched_pending()`, which flushes the whole mm if the previous
//!   reclaim left deferred flushes unacknowledged (it always does: see mm/rmap.rs).

use crate::mm::mmu_gather::MmuGather;
use crate::sim::{pg, Sim};
use crate::kernel::locking::Mode;
use crate::types::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    DontNeed,
    PageOut,
}

impl Sim {
    ///
    /// Under mmap_lock for read (MADV_DONTNEED, MADV_PAGEOUT: madvise_need_mmap_write() is false).
    pub fn do_madvise(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64, advice: Advice) {
        self.mm_syscall(cpu, mm, Mode::Shared, |s| s.do_madvise_locked(cpu, mm, start, pages, advice))
    }

    fn do_madvise_locked(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64, advice: Advice) {
        let end = start + pages;
        self.charge_sys(cpu, self.p.madvise_ns);
        self.find_vma(cpu, mm, start); // madvise_walk_vmas(): find_vma_prev (mm/vmacache.rs)
        match advice {
            Advice::DontNeed => {
                // zap_details { .reclaim_pt = true } under CONFIG_PT_RECLAIM (6.14+).
                let mut tlb = MmuGather::new(mm, false);
                let reclaim_pt = self.p.pt_reclaim;
                self.unmap_vmas(cpu, &mut tlb, start, end, reclaim_pt);
                self.tlb_finish_mmu(cpu, tlb);
            }
            Advice::PageOut => {
                // madvise_pageout(): lru_add_drain() first, so this CPU's newest folios are on
                // the LRU and can be isolated.
                self.lru_add_drain(cpu);
                let tlb = MmuGather::new(mm, false);
                // walk_page_range(): one pmd_entry callback per PMD-sized span with a PTE table.
                let mut s = start;
                while s < end {
                    let e = ((s | 511) + 1).min(end);
                    if self.mm(mm).pgtable.pte_table(s).is_none() {
                        s = e;
                        continue;
                    }
                    self.flush_tlb_batched_pending(cpu, mm);
                    let mut list = Vec::new();
                    let mut seen = 0u64;
                    self.mm(mm).pgtable.for_each_mapped(s, e, |_, p| {
                        if p.present() {
                            list.push(p.pfn());
                        }
                        seen += 1;
                    });
                    // Only folios mapped by this process alone; never the zero page. reclaim_pages()
                    // isolates them from their LRU.
                    list.retain(|&pfn| {
                        let f = self.frame(pfn);
                        f.flags & pg::ZERO == 0 && f.mapcount == 1
                    });
                    if self.p.kver >= (6, 6) {
                        // 6.6+ ("mm: madvise: fix uneven accounting of psi"): an active folio
                        // leaves the active list as part of the workingset (mm/workingset.rs).
                        for &pfn in &list {
                            let f = self.frame_mut(pfn);
                            if f.flags & pg::ACTIVE != 0 {
                                f.flags |= pg::WORKINGSET;
                            }
                        }
                    }
                    self.charge_sys(cpu, self.p.pte_update_ns * seen as f64);
                    if !list.is_empty() {
                        self.reclaim_pages(cpu, list);
                    }
                    s = e;
                }
                self.tlb_finish_mmu(cpu, tlb);
            }
        }
    }
}
