//! mprotect (mm/mprotect.c, Linux 6.18): `mprotect_fixup` → `change_protection` →
//! `change_pte_range` with mmu_gather, flushing only PTEs for which `pte_needs_flush()` says so.
//!
//! Kept: VMA split at the range ends, PROT_NONE as x86 `_PAGE_PROTNONE`, the write-upgrade of
//! exclusive anon pages and of dirty shared pages (`can_change_pte_writable`), the flush of the
//! changed range at tlb_finish_mmu. Left out: uffd-wp, soft-dirty, NUMA-scan mode (separate work).

use crate::mm::mmap::Prot;
use crate::mm::mmu_gather::MmuGather;
use crate::mm::pgtable::{pte_needs_flush, Pte};
use crate::sim::{pg, vm, Sim};
use crate::types::*;

impl Sim {
    pub fn do_mprotect(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64, prot: Prot) {
        self.charge_sys(cpu, self.p.vma_op_ns);
        self.find_vma(cpu, mm, start); // do_mprotect_pkey() (mm/vmacache.rs)
        let end = start + pages;
        self.split_vma_at(mm, start);
        self.split_vma_at(mm, end);
        let starts: Vec<u64> = self.mm(mm).vmas.range(start..end).map(|(&s, _)| s).collect();
        let mut tlb = MmuGather::new(mm, false);
        let mut changed = 0u64;
        for s in starts {
            let v = self.mm_mut(mm).vmas.get_mut(&s).unwrap();
            v.flags = (v.flags & !(vm::READ | vm::WRITE)) | prot.vm_flags();
            let v = v.clone();
            let mut ptes = Vec::new();
            let mut c = v.start;
            while c < v.end {
                // change_pte_range(), per PTE table, starts with flush_tlb_batched_pending().
                if self.mm(mm).pgtable.pte_table(c).is_some() {
                    self.flush_tlb_batched_pending(cpu, mm);
                }
                c = (c | 511) + 1;
            }
            self.mm(mm).pgtable.for_each_mapped(v.start, v.end, |vpn, p| ptes.push((vpn, p)));
            for (vpn, old) in ptes {
                if !old.mapped() {
                    continue; // swap entries keep no permissions
                }
                let pfn = old.pfn();
                let f = *self.frame(pfn);
                let mut new = match prot {
                    Prot::None => old.with(Pte::PROTNONE, Pte::PRESENT | Pte::RW),
                    Prot::Read => old.with(Pte::PRESENT, Pte::PROTNONE | Pte::RW),
                    Prot::ReadWrite => old.with(Pte::PRESENT, Pte::PROTNONE),
                };
                if prot == Prot::ReadWrite && f.flags & pg::ZERO == 0 {
                    // can_change_pte_writable(): exclusive anon pages in a private mapping, and
                    // already-dirty pages of a shared mapping, become writable at once.
                    let ok = if v.shared() { old.dirty() } else { f.flags & pg::ANON_EXCLUSIVE != 0 };
                    if ok {
                        new = new.with(Pte::RW, 0);
                    }
                }
                if new == old {
                    continue;
                }
                self.mm_mut(mm).pgtable.set(vpn, new);
                changed += 1;
                if pte_needs_flush(old, new) {
                    tlb.remove_tlb_entry(vpn); // tlb_flush_pte_range()
                }
            }
        }
        self.charge_sys(cpu, self.p.pte_update_ns * changed as f64);
        self.tlb_finish_mmu(cpu, tlb);
    }
}
