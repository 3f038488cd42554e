//! `struct mmu_gather` (mm/mmu_gather.c, include/asm-generic/tlb.h, arch/x86/include/asm/tlb.h):
//! batch the TLB flush of an unmap/zap and free the pages only after it.
//!
//! Kept: the range tracking (`tlb_remove_tlb_entry`, `pte_free_tlb`), `freed_tables`,
//! `fullmm`, the page batch limit that forces a mid-unmap flush (`__tlb_remove_page` returning
//! true), and x86 `tlb_flush()` → `flush_tlb_mm_range()`. Page-table pages are freed after the
//! flush (`tlb_remove_table`). Left out: RCU table freeing delays and delayed rmap.

use crate::arch::x86::mm::tlb::FLUSH_ALL;
use crate::sim::{pg, Sim};
use crate::types::*;

#[derive(Debug)]
pub struct MmuGather {
    pub mm: MmId,
    pub fullmm: bool,
    /// Range to flush (vpns); start > end means empty.
    pub start: u64,
    pub end: u64,
    pub freed_tables: bool,
    pub cleared_ptes: bool,
    /// Pages whose last reference is dropped after the flush.
    pub pages: Vec<Pfn>,
    /// Page-table pages freed after the flush.
    pub tables: Vec<Pfn>,
    /// LATR (mm/latr.rs): flush lazily and hold the frees back (munmap under
    /// kernel.flush_policy = "latr"). Not a kernel field.
    pub lazy: bool,
}

impl MmuGather {
    /// `tlb_gather_mmu()` / `tlb_gather_mmu_fullmm()`.
    pub fn new(mm: MmId, fullmm: bool) -> Self {
        MmuGather { mm, fullmm, start: u64::MAX, end: 0, freed_tables: false, cleared_ptes: false, pages: Vec::new(), tables: Vec::new(), lazy: false }
    }

    fn adjust_range(&mut self, start: u64, end: u64) {
        self.start = self.start.min(start);
        self.end = self.end.max(end);
    }

    /// `tlb_remove_tlb_entry()`.
    pub fn remove_tlb_entry(&mut self, vpn: u64) {
        self.cleared_ptes = true;
        self.adjust_range(vpn, vpn + 1);
    }

    /// `pte_free_tlb()`: a PTE table (covering `vpn`) is freed.
    pub fn free_table(&mut self, vpn: u64, pfn: Pfn) {
        self.freed_tables = true;
        self.adjust_range(vpn, vpn + 1);
        self.tables.push(pfn);
    }
}

impl Sim {
    /// `__tlb_remove_page()`: queue a page reference to drop after the flush. Returns true when the
    /// batch is full and the caller must flush now (zap_pte_range's force_flush).
    pub fn tlb_remove_page(&mut self, tlb: &mut MmuGather, pfn: Pfn) -> bool {
        tlb.pages.push(pfn);
        tlb.pages.len() as u64 >= self.p.mmu_gather_batch_pages
    }

    /// `tlb_flush_mmu_tlbonly()` → x86 `tlb_flush()`.
    pub fn tlb_flush_mmu_tlbonly(&mut self, cpu: CpuId, tlb: &mut MmuGather) {
        if !(tlb.freed_tables || tlb.cleared_ptes) {
            return;
        }
        let (start, end) = if tlb.fullmm { (0, FLUSH_ALL) } else { (tlb.start, tlb.end) };
        let stride = if tlb.cleared_ptes { PAGE_SHIFT } else { PMD_SHIFT };
        if tlb.lazy {
            self.latr_flush_tlb_mm_range(cpu, tlb.mm, start, end, stride, tlb.freed_tables);
        } else {
            self.flush_tlb_mm_range(cpu, tlb.mm, start, end, stride, tlb.freed_tables);
        }
        tlb.start = u64::MAX;
        tlb.end = 0;
        tlb.cleared_ptes = false;
        tlb.freed_tables = false;
    }

    /// `tlb_flush_mmu()`: flush, then free what was gathered.
    pub fn tlb_flush_mmu(&mut self, cpu: CpuId, tlb: &mut MmuGather) {
        self.tlb_flush_mmu_tlbonly(cpu, tlb);
        // `cost.page_alloc_ns` is the free side of a page (LRU removal, uncharge, the pcp
        // list): charged for the gathered pages this drops the last reference to, and the
        // page tables. A page-cache page, or an anon page still mapped elsewhere (COW after
        // fork), only loses a reference in free_pages_and_swap_cache() (before 2026-11-27 every
        // gathered page paid it: munmap of a file mapping cost a free per page).
        let n = tlb.pages.iter().filter(|&&p| self.frame(p).refcount == 1 && self.frame(p).flags & pg::ZERO == 0).count() + tlb.tables.len();
        if tlb.lazy {
            let mut held = std::mem::take(&mut tlb.pages);
            held.append(&mut tlb.tables);
            self.latr_defer_free(cpu, held);
        }
        for pfn in std::mem::take(&mut tlb.pages) {
            self.put_page(pfn);
        }
        for pfn in std::mem::take(&mut tlb.tables) {
            self.put_page(pfn);
        }
        self.charge_sys(cpu, self.p.page_alloc_ns * n as f64);
    }

    /// `tlb_finish_mmu()`.
    pub fn tlb_finish_mmu(&mut self, cpu: CpuId, mut tlb: MmuGather) {
        self.tlb_flush_mmu(cpu, &mut tlb);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The free side (`cost.page_alloc_ns`) is paid for the gathered pages whose last
    /// reference goes, not for pages that stay in use (page cache, COW-shared anon pages).
    #[test]
    fn only_pages_freed_by_the_gather_pay_the_free() {
        let cfg = crate::config::Config::defaults(&["machine.cpus=2".into(), "machine.mem_per_node_mib=16".into(), "cost.page_alloc_ns=1000".into()]).unwrap();
        let mut s = Sim::new(&cfg);
        let cpu = CpuId(0);
        s.running_cpu = Some(cpu);
        let pages: Vec<Pfn> = (0..4).map(|_| s.alloc_page(NodeId(0)).unwrap()).collect();
        // Two still referenced elsewhere (the page cache's reference), two freed by the gather.
        s.get_page(pages[0]);
        s.get_page(pages[1]);
        let mut tlb = MmuGather::new(MmId(0), false);
        for &p in &pages {
            s.tlb_remove_page(&mut tlb, p);
        }
        let before = s.cpus[0].stats.sys_ns;
        s.tlb_flush_mmu(cpu, &mut tlb);
        assert_eq!(s.cpus[0].stats.sys_ns - before, 2_000);
        assert_eq!((s.frame(pages[0]).refcount, s.frame(pages[1]).refcount), (1, 1));
    }
}
