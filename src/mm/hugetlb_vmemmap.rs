//! HugeTLB Vmemmap Optimisation (mm/hugetlb_vmemmap.c, Documentation/mm/vmemmap_dedup.rst):
//! the struct pages of a pooled huge page are deduplicated by remapping the vmemmap.
//!
//! The vmemmap is modelled page by page: every 4 KiB frame has a 64-byte struct page, so one
//! vmemmap page describes 64 frames and one vmemmap PMD (2 MiB, 512 vmemmap pages) 32768 frames.
//! At boot the vmemmap is PMD-mapped (a physically contiguous, 2 MiB-aligned block per PMD, as
//! vmemmap_populate_hugepages() does on x86 with PSE); the v6 series disabled that and mapped it
//! with PTEs from boot ("x86/mm/64: Disable PMD page mapping of vmemmap").
//!
//! | field (`Vmemmap`) | meaning                                           | who changes it                          |
//! |-------------------|---------------------------------------------------|-----------------------------------------|
//! | `map[v]`          | frame backing vmemmap page v (= pfn / 64)         | vmemmap_init, optimize, restore         |
//! | `ro[v]`           | the PTE is PAGE_KERNEL_RO (an aliased tail page)  | optimize (set), restore (clear)         |
//! | `pte_table[p]`    | PTE-table frame of vmemmap PMD p; NO_PFN = PMD-mapped | vmemmap_init, vmemmap_split_pmd     |
//! | `held`            | distinct frames the vmemmap holds (struct-page frames + PTE tables) | every alloc/free here |
//!
//! What must hold: `held` equals the number of frames whose `mapping` is [`VMEMMAP_MAPPING`]
//! (checked by `Sim::hugetlb_check`); a PMD-mapped range is never remapped page by page (it is
//! split first); every change of a live kernel mapping is followed, before the old frames are
//! freed, by `flush_tlb_kernel_range()` on every CPU (or one `flush_tlb_all()` for a batch).
//!
//! Modelled: `vmemmap_remap_free()` (new head page on the same node when one is free, split of a
//! PMD-mapped range with a PTE-page allocation and a flush, read-only remap of the tails, flush,
//! free), `vmemmap_remap_alloc()` (allocate on the folio's node, copy, remap writable, flush; all
//! or nothing), and the batched `hugetlb_vmemmap_optimize_folios()` /
//! `hugetlb_vmemmap_restore_folios()` of 6.7. Left out: the synchronize_rcu() of
//! VMEMMAP_SYNCHRONIZE_RCU (6.10), memmap_on_memory, the static key, fake-head handling in
//! page_fixed_fake_head(), and the vmemmap pages' own struct pages.

use crate::mm::hugetlb::{HFolio, HPAGE_ORDERS};
use crate::sim::{Sim, NO_PFN};
use crate::types::*;

/// sizeof(struct page) on x86-64.
pub const STRUCT_PAGE_SIZE: u64 = 64;
/// Struct pages in one vmemmap page.
pub const STRUCT_PAGES_PER_VMEMMAP_PAGE: u64 = PAGE_SIZE / STRUCT_PAGE_SIZE;
/// Vmemmap pages mapped by one PMD (a PTE table's worth).
pub const VMEMMAP_PAGES_PER_PMD: u64 = PTRS_PER_TABLE as u64;
/// `Frame::mapping` of a frame held by the vmemmap (struct-page frame or vmemmap PTE table).
pub const VMEMMAP_MAPPING: u32 = u32::MAX - 2;

/// Which HVO is modelled (knob `kernel.hugetlb_optimize_vmemmap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HvoVariant {
    /// /proc/sys/vm/hugetlb_optimize_vmemmap = 0 on a mainline kernel.
    #[default]
    Off,
    /// Muchun Song's v6/v7 series (5.10-based): RESERVE_VMEMMAP_NR = 2, PTE-mapped vmemmap.
    V6,
    /// Mainline since 5.18: HUGETLB_VMEMMAP_RESERVE_SIZE = one page, PMD split on demand.
    Mainline,
}

impl HvoVariant {
    pub fn parse(s: &str) -> HvoVariant {
        match s {
            "v6" => HvoVariant::V6,
            "mainline" => HvoVariant::Mainline,
            _ => HvoVariant::Off,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            HvoVariant::Off => "off",
            HvoVariant::V6 => "v6",
            HvoVariant::Mainline => "mainline",
        }
    }
    /// The geometry whose sizes the kernel reports: an 'off' kernel is a mainline kernel with the
    /// sysctl at 0, and hugetlb_vmemmap_optimizable_size() does not depend on the sysctl.
    fn geometry(self) -> HvoVariant {
        if self == HvoVariant::Off { HvoVariant::Mainline } else { self }
    }
}

/// Vmemmap pages describing a huge page of `order` (hugetlb_vmemmap_size() / PAGE_SIZE).
pub fn hugetlb_vmemmap_pages(order: u32) -> u64 {
    (1u64 << order) / STRUCT_PAGES_PER_VMEMMAP_PAGE
}

/// Vmemmap pages that stay mapped per optimised huge page.
///
/// Mainline keeps one (HUGETLB_VMEMMAP_RESERVE_SIZE). v6 keeps RESERVE_VMEMMAP_NR = 2, and the
/// series counted the PTE tables its PTE-mapped vmemmap needs for the huge page's range (8 for
/// the 16 MiB of vmemmap of a 1 GiB page, less than one for a 2 MiB page) against the savings:
/// "4096 pages for struct page structs, we reserve 2 pages for vmemmap and 8 pages for page
/// tables. So we can save 4088 pages". We follow that published count, i.e. the larger of the
/// two (2 for 2 MiB, 8 for 1 GiB); subtracting both would give 4086 (see docs/hvo.md).
pub fn hugetlb_vmemmap_kept_pages(variant: HvoVariant, order: u32) -> u64 {
    let v = hugetlb_vmemmap_pages(order);
    match variant.geometry() {
        HvoVariant::V6 => 2u64.max(v / VMEMMAP_PAGES_PER_PMD).min(v),
        _ => 1u64.min(v),
    }
}

/// hugetlb_vmemmap_optimizable_size() in pages: vmemmap pages freed per optimised huge page.
pub fn hugetlb_vmemmap_optimizable_pages(variant: HvoVariant, order: u32) -> u64 {
    hugetlb_vmemmap_pages(order) - hugetlb_vmemmap_kept_pages(variant, order)
}

/// The vmemmap's kernel page-table state (see the module table).
#[derive(Clone, Debug, Default)]
pub struct Vmemmap {
    pub map: Vec<u32>,
    pub ro: Vec<bool>,
    pub pte_table: Vec<u32>,
    pub held: u64,
}

/// Why a vmemmap operation failed: the kernel's -ENOMEM, an event, never a Rust error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enomem;

/// VMEMMAP_SPLIT_NO_TLB_FLUSH / VMEMMAP_REMAP_NO_TLB_FLUSH: the caller flushes once for a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    Now,
    Deferred,
}

impl Sim {
    /// Mark a frame we just took from page_alloc as held by the vmemmap.
    fn vmemmap_take(&mut self, pfn: Pfn) {
        self.frames[pfn.0 as usize].mapping = VMEMMAP_MAPPING;
        self.hugetlb.vmemmap.held += 1;
    }

    /// Return a vmemmap frame to page_alloc (free_vmemmap_page()).
    pub(crate) fn vmemmap_free_page(&mut self, pfn: Pfn) {
        debug_assert_eq!(self.frames[pfn.0 as usize].mapping, VMEMMAP_MAPPING, "simulator bug: {pfn} is not a vmemmap frame");
        self.frames[pfn.0 as usize].mapping = 0;
        self.hugetlb.vmemmap.held -= 1;
        self.free_page(pfn);
        self.charge_sys_running(self.p.page_alloc_ns);
    }

    /// `alloc_pages_node(nid, GFP_KERNEL | __GFP_THISNODE, 0)`: only the folio's node.
    fn vmemmap_alloc_page_thisnode(&mut self, nid: usize) -> Option<Pfn> {
        let pfn = self.alloc_page(NodeId(nid as u32))?;
        if self.pfn_to_nid(pfn) != nid {
            self.free_page(pfn);
            return None;
        }
        self.vmemmap_take(pfn);
        self.charge_sys_running(self.p.page_alloc_ns);
        Some(pfn)
    }

    /// The boot vmemmap (vmemmap_populate()): PMD-mapped 2 MiB blocks per 32768 frames, or
    /// (v6) one frame per vmemmap page plus a PTE table per PMD. Taken before any huge page.
    pub(crate) fn vmemmap_init(&mut self, pmd_mapped: bool) {
        let nr_vmemmap = (self.frames.len() as u64).div_ceil(STRUCT_PAGES_PER_VMEMMAP_PAGE) as usize;
        let nr_pmd = (nr_vmemmap as u64).div_ceil(VMEMMAP_PAGES_PER_PMD) as usize;
        let mut vm = Vmemmap { map: vec![NO_PFN; nr_vmemmap], ro: vec![false; nr_vmemmap], pte_table: vec![NO_PFN; nr_pmd], held: 0 };
        std::mem::swap(&mut self.hugetlb.vmemmap, &mut vm);
        for p in 0..nr_pmd {
            let first_pfn = p as u64 * VMEMMAP_PAGES_PER_PMD * STRUCT_PAGES_PER_VMEMMAP_PAGE;
            let nid = self.pfn_to_nid(Pfn(first_pfn as u32));
            let lo = p * VMEMMAP_PAGES_PER_PMD as usize;
            let hi = (lo + VMEMMAP_PAGES_PER_PMD as usize).min(nr_vmemmap);
            // A partial last PMD is mapped with base pages (sections are 128 MiB on x86-64, so
            // Linux never has one; small simulated machines may).
            let whole = hi - lo == VMEMMAP_PAGES_PER_PMD as usize;
            let block = if pmd_mapped && whole { self.alloc_hugetlb_frames(nid, 9, VMEMMAP_MAPPING) } else { None };
            if let Some(b) = block {
                self.hugetlb.vmemmap.held += 512;
                self.frames[b.0 as usize].refcount = 1;
                for v in lo..hi {
                    self.hugetlb.vmemmap.map[v] = b.0 + (v - lo) as u32;
                }
            } else {
                // PTE-mapped (v6, or no contiguous 2 MiB block: vmemmap_populate_basepages()).
                let t = self.alloc_page(NodeId(nid as u32)).expect("boot memory for the vmemmap");
                self.vmemmap_take(t);
                self.hugetlb.vmemmap.pte_table[p] = t.0;
                for v in lo..hi {
                    let f = self.alloc_page(NodeId(nid as u32)).expect("boot memory for the vmemmap");
                    self.vmemmap_take(f);
                    self.hugetlb.vmemmap.map[v] = f.0;
                }
            }
        }
    }

    /// `split_vmemmap_huge_pmd()`: allocate a PTE page, fill 512 PTEs with the block's frames,
    /// install it; flush the 2 MiB (above the ceiling: flush_tlb_all) unless batched.
    pub(crate) fn vmemmap_split_pmd(&mut self, pmd: usize, nid: usize, flush: Flush) -> Result<bool, Enomem> {
        if self.hugetlb.vmemmap.pte_table[pmd] != NO_PFN {
            return Ok(false);
        }
        let Some(t) = self.alloc_page(NodeId(nid as u32)) else { return Err(Enomem) };
        self.vmemmap_take(t);
        self.charge_sys_running(self.p.page_alloc_ns + self.p.pte_update_ns * VMEMMAP_PAGES_PER_PMD as f64);
        self.hugetlb.vmemmap.pte_table[pmd] = t.0;
        self.hugetlb.stats.vmemmap_pmd_splits += 1;
        if flush == Flush::Now {
            self.hugetlb_flush_kernel_range(VMEMMAP_PAGES_PER_PMD);
        }
        Ok(true)
    }

    /// Split every PMD covering a folio's vmemmap (hugetlb_vmemmap_split_folio()).
    pub(crate) fn hugetlb_vmemmap_split_folio(&mut self, head: Pfn, f: HFolio, flush: Flush) -> Result<(), Enomem> {
        let order = HPAGE_ORDERS[f.hstate as usize];
        let start = head.0 as u64 / STRUCT_PAGES_PER_VMEMMAP_PAGE;
        let end = start + hugetlb_vmemmap_pages(order);
        let (p0, p1) = (start / VMEMMAP_PAGES_PER_PMD, (end - 1) / VMEMMAP_PAGES_PER_PMD);
        for p in p0..=p1 {
            self.vmemmap_split_pmd(p as usize, f.node as usize, flush)?;
        }
        Ok(())
    }

    /// `vmemmap_remap_free()` for one folio (via __hugetlb_vmemmap_optimize_folio()): remap the
    /// tail vmemmap pages read-only onto the kept page, flush (unless deferred), and collect the
    /// old frames in `to_free` (freed here unless the caller batches them).
    pub(crate) fn hugetlb_vmemmap_optimize_folio(&mut self, head: Pfn, f: HFolio, flush: Flush, to_free: &mut Vec<Pfn>) -> Result<(), Enomem> {
        let variant = self.hugetlb.variant;
        debug_assert!(variant != HvoVariant::Off);
        let order = HPAGE_ORDERS[f.hstate as usize];
        let nid = f.node as usize;
        let v = hugetlb_vmemmap_pages(order);
        let kept = hugetlb_vmemmap_kept_pages(variant, order);
        let start = (head.0 as u64 / STRUCT_PAGES_PER_VMEMMAP_PAGE) as usize;
        if variant == HvoVariant::Mainline {
            self.hugetlb_vmemmap_split_folio(head, f, flush)?;
        }
        let first_new = to_free.len();
        if variant == HvoVariant::Mainline {
            // Try a fresh head page on the node (no retry) so the old, contiguous vmemmap can
            // be freed whole; else reuse the existing one.
            if let Some(n) = self.vmemmap_alloc_page_thisnode(nid) {
                self.charge_sys_running(self.p.copy_page_ns);
                let old = std::mem::replace(&mut self.hugetlb.vmemmap.map[start], n.0);
                to_free.push(Pfn(old));
                self.hugetlb.stats.vmemmap_pages_allocated += 1;
            }
        }
        let reuse = self.hugetlb.vmemmap.map[start + kept as usize - 1];
        for i in start + kept as usize..start + v as usize {
            let old = std::mem::replace(&mut self.hugetlb.vmemmap.map[i], reuse);
            self.hugetlb.vmemmap.ro[i] = true;
            to_free.push(Pfn(old));
        }
        self.charge_sys_running(self.p.pte_update_ns * v as f64);
        let freed = (to_free.len() - first_new) as u64;
        self.hugetlb.stats.vmemmap_pages_freed += freed;
        if flush == Flush::Now {
            let range = if variant == HvoVariant::Mainline { v } else { v - kept };
            self.hugetlb_flush_kernel_range(range);
            for p in to_free.drain(first_new..).collect::<Vec<_>>() {
                self.vmemmap_free_page(p);
            }
        }
        self.hugetlb.stats.vmemmap_optimized_folios += 1;
        Ok(())
    }

    /// `vmemmap_remap_alloc()` for one folio (__hugetlb_vmemmap_restore_folio()): allocate the
    /// freed pages again on the folio's node, all or nothing; copy the kept page into each;
    /// remap writable; flush unless deferred.
    pub(crate) fn hugetlb_vmemmap_restore_folio(&mut self, head: Pfn, f: HFolio, flush: Flush) -> Result<(), Enomem> {
        let variant = self.hugetlb.variant;
        let order = HPAGE_ORDERS[f.hstate as usize];
        let v = hugetlb_vmemmap_pages(order);
        let kept = hugetlb_vmemmap_kept_pages(variant, order);
        let start = (head.0 as u64 / STRUCT_PAGES_PER_VMEMMAP_PAGE) as usize;
        let need = (v - kept) as usize;
        let mut pages = Vec::with_capacity(need);
        for _ in 0..need {
            match self.vmemmap_alloc_page_thisnode(f.node as usize) {
                Some(p) => pages.push(p),
                None => {
                    for p in pages {
                        self.vmemmap_free_page(p);
                    }
                    self.hugetlb.stats.vmemmap_restore_enomem += 1;
                    return Err(Enomem);
                }
            }
        }
        self.charge_sys_running(self.p.copy_page_ns * need as f64 + self.p.pte_update_ns * v as f64);
        for (k, p) in pages.into_iter().enumerate() {
            let i = start + kept as usize + k;
            self.hugetlb.vmemmap.map[i] = p.0;
            self.hugetlb.vmemmap.ro[i] = false;
        }
        self.hugetlb.stats.vmemmap_pages_allocated += need as u64;
        if flush == Flush::Now {
            let range = if variant == HvoVariant::Mainline { v } else { v - kept };
            self.hugetlb_flush_kernel_range(range);
        }
        self.hugetlb.stats.vmemmap_restored_folios += 1;
        Ok(())
    }

    /// flush_tlb_kernel_range() from the CPU running the hugetlb work (pages > ceiling:
    /// flush_tlb_all()), counted for the report.
    pub(crate) fn hugetlb_flush_kernel_range(&mut self, pages: u64) {
        let cpu = self.hugetlb.cpu;
        if pages > self.p.tlb_single_page_flush_ceiling {
            self.hugetlb.stats.flush_tlb_all += 1;
        } else {
            self.hugetlb.stats.flush_tlb_kernel_range += 1;
        }
        self.flush_tlb_kernel_range(cpu, pages);
    }

    /// flush_tlb_all().
    pub(crate) fn hugetlb_flush_tlb_all(&mut self) {
        self.hugetlb_flush_kernel_range(u64::MAX);
    }

    /// Charge kernel time to the CPU doing the hugetlb work.
    pub(crate) fn charge_sys_running(&mut self, ns: f64) {
        let cpu = self.hugetlb.cpu;
        self.charge_sys(cpu, ns);
    }

    /// Distinct frames the vmemmap maps or uses as PTE tables (for the checker).
    pub fn vmemmap_frames_in_use(&self) -> u64 {
        let vm = &self.hugetlb.vmemmap;
        let mut seen = std::collections::BTreeSet::new();
        for &m in &vm.map {
            if m != NO_PFN {
                seen.insert(m);
            }
        }
        // A PMD-mapped block is held whole even where the tail of memory does not need it.
        for (p, &t) in vm.pte_table.iter().enumerate() {
            if t != NO_PFN {
                seen.insert(t);
            } else {
                let lo = p * VMEMMAP_PAGES_PER_PMD as usize;
                if lo < vm.map.len() && vm.map[lo] != NO_PFN {
                    let b = vm.map[lo];
                    for k in 0..VMEMMAP_PAGES_PER_PMD as u32 {
                        seen.insert(b + k);
                    }
                }
            }
        }
        seen.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn page_counts_of_both_series() {
        assert_eq!(hugetlb_vmemmap_pages(9), 8);
        assert_eq!(hugetlb_vmemmap_pages(18), 4096);
        assert_eq!(hugetlb_vmemmap_optimizable_pages(HvoVariant::V6, 9), 6);
        assert_eq!(hugetlb_vmemmap_optimizable_pages(HvoVariant::V6, 18), 4088);
        assert_eq!(hugetlb_vmemmap_optimizable_pages(HvoVariant::Mainline, 9), 7);
        assert_eq!(hugetlb_vmemmap_optimizable_pages(HvoVariant::Mainline, 18), 4095);
        assert_eq!(hugetlb_vmemmap_optimizable_pages(HvoVariant::Off, 9), 7, "the boot line does not depend on the sysctl");
    }
}
