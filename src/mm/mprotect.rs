//! mprotect (mm/mprotect.c, Linux 6.18): `mprotect_fixup` → `change_protection` →
//! `change_pte_range` with mmu_gather, flushing only PTEs for which `pte_needs_flush()` says so.
//! `change_prot_numa()` (mm/mempolicy.rs) uses the same walk in MM_CP_PROT_NUMA mode.
//!
//! Kept: VMA split at the range ends, PROT_NONE as x86 `_PAGE_PROTNONE`, the write-upgrade of
//! exclusive anon pages and of dirty shared pages (`can_change_pte_writable`), the flush of the
//! changed range at tlb_finish_mmu, NUMA hinting's per-PTE skips. Left out: uffd-wp, soft-dirty.

use crate::mm::mmap::Prot;
use crate::mm::mmu_gather::MmuGather;
use crate::mm::pgtable::{pte_needs_flush, Pte};
use crate::mm::vmstat::VmEvent;
use crate::sim::{pg, vm, Frame, Sim, Vma};
use crate::kernel::locking::Mode;
use crate::types::*;

/// What `change_pte_range()` does to each PTE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeMode {
    /// mprotect(2) to these permissions.
    Prot(Prot),
    /// MM_CP_PROT_NUMA: make present PTEs PROT_NONE for NUMA hinting; `target_node` is set for a
    /// single-threaded private mapping (pages already there are left alone).
    ProtNuma { target_node: Option<u32> },
}

/// `can_change_pte_writable()`: an exclusive anon page of a private mapping, or an already-dirty
/// page of a shared one, may be mapped writable without a write fault.
pub fn can_change_pte_writable(vma: &Vma, pte: Pte, f: &Frame) -> bool {
    vma.flags & vm::WRITE != 0 && f.flags & pg::ZERO == 0 && if vma.shared() { pte.dirty() } else { f.flags & pg::ANON_EXCLUSIVE != 0 }
}

impl Sim {
    ///
    /// Under mmap_lock for write.
    pub fn do_mprotect(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64, prot: Prot) {
        self.mm_syscall(cpu, mm, Mode::Exclusive, |s| s.do_mprotect_locked(cpu, mm, start, pages, prot))
    }

    fn do_mprotect_locked(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64, prot: Prot) {
        self.charge_sys(cpu, self.p.mprotect_ns);
        self.find_vma(cpu, mm, start); // do_mprotect_pkey() (mm/vmacache.rs)
        let end = start + pages;
        self.split_vma_at(mm, start);
        self.split_vma_at(mm, end);
        let starts: Vec<u64> = self.mm(mm).vmas.range(start..end).map(|(&s, _)| s).collect();
        let mut tlb = MmuGather::new(mm, false);
        // kernel.latr_mprotect: the misuse LATR rules out (mm/latr.rs).
        tlb.lazy = self.latr.as_ref().is_some_and(|l| l.mprotect);
        for s in starts {
            let v = self.mm_mut(mm).vmas.get_mut(&s).unwrap();
            v.flags = (v.flags & !(vm::READ | vm::WRITE)) | prot.vm_flags();
            let v = v.clone();
            self.change_pte_range(cpu, &mut tlb, &v, v.start, v.end, ChangeMode::Prot(prot));
        }
        self.tlb_finish_mmu(cpu, tlb);
    }

    /// `change_protection()` → `change_pte_range()` over `[start, end)` of `vma`, gathering the
    /// PTEs that need a flush into `tlb`. Returns the number of PTEs changed.
    pub fn change_pte_range(&mut self, cpu: CpuId, tlb: &mut MmuGather, vma: &Vma, start: u64, end: u64, mode: ChangeMode) -> u64 {
        let mm = tlb.mm;
        let mut c = start;
        while c < end {
            // change_pte_range(), per PTE table, starts with flush_tlb_batched_pending().
            if self.mm(mm).pgtable.pte_table(c).is_some() {
                self.flush_tlb_batched_pending(cpu, mm);
            }
            c = (c | 511) + 1;
        }
        let mut ptes = Vec::new();
        self.mm(mm).pgtable.for_each_mapped(start, end, |vpn, p| ptes.push((vpn, p)));
        let mut changed = 0u64;
        for (vpn, old) in ptes {
            if !old.mapped() {
                continue; // swap entries keep no permissions
            }
            let pfn = old.pfn();
            let f = *self.frame(pfn);
            let new = match mode {
                ChangeMode::Prot(prot) => {
                    let new = match prot {
                        Prot::None => old.with(Pte::PROTNONE, Pte::PRESENT | Pte::RW),
                        Prot::Read => old.with(Pte::PRESENT, Pte::PROTNONE | Pte::RW),
                        Prot::ReadWrite => old.with(Pte::PRESENT, Pte::PROTNONE),
                    };
                    if prot == Prot::ReadWrite && can_change_pte_writable(vma, old, &f) { new.with(Pte::RW, 0) } else { new }
                }
                ChangeMode::ProtNuma { target_node } => {
                    // Already PROT_NONE; the zero page; a shared COW page; a dirty file folio
                    // (MIGRATE_ASYNC cannot move it); a page already on a single-threaded
                    // task's node: left alone.
                    let skip = old.protnone()
                        || f.flags & pg::ZERO != 0
                        || (vma.is_cow() && f.mapcount > 1)
                        || (f.flags & pg::FILE != 0 && f.flags & pg::DIRTY != 0)
                        || target_node == Some(self.pfn_to_nid(pfn) as u32);
                    if skip {
                        continue;
                    }
                    if self.p.numa_tiering {
                        // Memory tiering: top-tier folios are not scanned unless NORMAL mode is
                        // on too; a lower-tier folio gets the scan time in its last_cpupid bits
                        // (folio_xchg_access_time(), 5.18+).
                        if !self.p.numa_normal && self.node_is_toptier(self.pfn_to_nid(pfn) as u32) {
                            continue;
                        }
                        if self.folio_use_access_time(pfn) {
                            let now_ms = self.now(cpu) / 1_000_000;
                            self.folio_xchg_access_time(pfn, now_ms);
                        }
                    }
                    // pte_modify(oldpte, PAGE_NONE): present and write cleared, A/D/pfn kept.
                    old.with(Pte::PROTNONE, Pte::PRESENT | Pte::RW)
                }
            };
            if new == old {
                continue;
            }
            self.mm_mut(mm).pgtable.set(vpn, new);
            changed += 1;
            if pte_needs_flush(old, new) {
                tlb.remove_tlb_entry(vpn); // tlb_flush_pte_range()
            }
        }
        self.charge_sys(cpu, self.p.pte_update_ns * changed as f64);
        if let ChangeMode::ProtNuma { .. } = mode {
            self.vmstat.add(VmEvent::NUMA_PTE_UPDATES, changed);
        }
        changed
    }
}
