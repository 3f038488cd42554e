//! Reverse mapping (mm/rmap.c, Linux 6.18): `rmap_walk` over anon_vma or i_mmap, and
//! `try_to_unmap_one` with the batched-flush decision (`should_defer_flush`,
//! `set_tlb_ubc_flush_pending`) and the per-task `tlbflush_unmap_batch`.

use crate::kernel::locking::{LockId, Mode};
use crate::kernel::profile::KFn;
use crate::mm::pgtable::Pte;
use crate::sim::{pg, Backing, CpuMask, Sim};
use crate::types::*;

/// `struct tlbflush_unmap_batch` (current->tlb_ubc).
#[derive(Clone, Debug)]
pub struct TlbUnmapBatch {
    pub cpumask: CpuMask,
    pub flush_required: bool,
    pub writable: bool,
}

impl TlbUnmapBatch {
    pub fn new(ncpus: usize) -> Self {
        TlbUnmapBatch { cpumask: CpuMask::new(ncpus), flush_required: false, writable: false }
    }
}

impl Sim {
    /// Every (mm, vpn) whose PTE maps `pfn`: anon via the anon_vma's mms at the linear index,
    /// file via i_mmap.
    pub fn rmap_walk(&self, pfn: Pfn) -> Vec<(MmId, u64)> {
        let f = self.frame(pfn);
        let mut out = Vec::new();
        if f.flags & pg::ANON != 0 {
            for &mm in &self.anon_vmas[f.mapping as usize].mms {
                if let Some(m) = self.mms[mm.0 as usize].as_ref() {
                    let p = m.pgtable.get(f.index);
                    if p.mapped() && p.pfn() == pfn {
                        out.push((mm, f.index));
                    }
                }
            }
        } else if f.flags & pg::FILE != 0 {
            for &(mm, vstart) in &self.files[f.mapping as usize].i_mmap {
                let Some(m) = self.mms[mm.0 as usize].as_ref() else { continue };
                let Some(v) = m.vmas.get(&vstart) else { continue };
                let Backing::File { pgoff, .. } = v.backing else { continue };
                if f.index < pgoff || f.index >= pgoff + (v.end - v.start) {
                    continue;
                }
                let vpn = v.start + (f.index - pgoff);
                let p = m.pgtable.get(vpn);
                if p.mapped() && p.pfn() == pfn {
                    out.push((mm, vpn));
                }
            }
        }
        out
    }

    /// `should_defer_flush()` (x86 `arch_tlbbatch_should_defer`): defer only if some other CPU
    /// may cache the mm.
    fn should_defer_flush(&self, cpu: CpuId, mm: MmId, batch_flush: bool) -> bool {
        batch_flush && self.mm(mm).cpumask.any_but(cpu)
    }

    /// The PTE-clearing half of `try_to_unmap_one()` / `try_to_migrate_one()`: with `batch`
    /// (TTU_BATCH_FLUSH) and another CPU possibly caching the mm, `ptep_get_and_clear()` and
    /// `set_tlb_ubc_flush_pending()`; otherwise `ptep_clear_flush()`. Returns the old PTE; a
    /// dirty one marks the file folio dirty.
    pub fn clear_pte_for_unmap(&mut self, cpu: CpuId, mm: MmId, vpn: u64, batch: Option<&mut TlbUnmapBatch>) -> Pte {
        let defer = self.should_defer_flush(cpu, mm, batch.is_some());
        let old = self.mm(mm).pgtable.get(vpn);
        self.mm_mut(mm).pgtable.set(vpn, Pte::NONE);
        // pte_accessible(): present, or PROT_NONE while mm->tlb_flush_pending (a change_protection
        // whose flush is in flight: never the case between this model's atomic steps).
        let accessible = old.present() && self.numa_assume_inaccessible != Some((mm, vpn));
        match batch {
            // set_tlb_ubc_flush_pending() returns at once for an inaccessible PTE (6.4+).
            Some(_) if defer && !accessible && self.p.tlb_ubc_skip_inaccessible => self.mark("inaccessible pte: no flush"),
            Some(b) if defer => {
                // set_tlb_ubc_flush_pending(): arch_tlbbatch_add_pending() ORs mm_cpumask into
                // the batch and bumps the mm's tlb_gen; with a global ASID it INVLPGBs the page
                // instead (arch/x86/mm/invlpgb.rs).
                if !self.invlpgb_tlbbatch_add_pending(cpu, mm, vpn) {
                let mut mask = self.mm(mm).cpumask.clone();
                if self.inject == crate::check::Inject::StaleMmCpumask {
                    crate::check::drop_one_cpu(&mut mask, cpu);
                }
                b.cpumask.or(&mask);
                self.inc_mm_tlb_gen(mm);
                }
                self.mark("batched flush deferred");
                b.flush_required = true;
                // After the PTE clear: racing page-table changers must flush first.
                self.mm_mut(mm).tlb_flush_batched_pending += 1;
                if old.dirty() {
                    b.writable = true;
                }
            }
            // ptep_clear_flush(): flushes only an accessible PTE.
            _ if accessible => self.flush_tlb_page(cpu, mm, vpn),
            _ => self.mark("inaccessible pte: no flush"),
        }
        let pfn = old.pfn();
        if old.dirty() && self.frame(pfn).flags & pg::ANON == 0 {
            self.frame_mut(pfn).flags |= pg::DIRTY;
        }
        old
    }

    /// `try_to_unmap()` → `try_to_unmap_one()` for every mapping of the folio.
    /// With `batch` (TTU_BATCH_FLUSH) the flush may be deferred into the batch. With `swap_slot`
    /// (an anon folio in the swap cache) each PTE becomes a swap entry for that slot.
    ///
    /// Locks: the file's i_mmap_rwsem (or the anon_vma's rwsem) for read across the walk, and
    /// each mapping's PTE lock across try_to_unmap_one(), including a ptep_clear_flush()'s wait
    /// for its IPIs: a fault on that PTE table waits behind it.
    pub fn try_to_unmap(&mut self, cpu: CpuId, pfn: Pfn, mut batch: Option<&mut TlbUnmapBatch>, swap_slot: Option<u32>) {
        self.kfn_enter(cpu, KFn::TryToUnmap);
        let rmap_lock = self.rmap_lock(cpu, pfn);
        for (mm, vpn) in self.rmap_walk(pfn) {
            let ptl = self.lock_acquire(cpu, LockId::Ptl(mm.0, vpn >> 9), Mode::Exclusive);
            self.clear_pte_for_unmap(cpu, mm, vpn, batch.as_deref_mut());
            if let Some(slot) = swap_slot {
                self.mm_mut(mm).pgtable.set(vpn, Pte::swap(slot));
                self.swap_dup(slot);
            }
            self.page_remove_rmap(mm, pfn);
            self.put_page(pfn);
            self.charge_sys(cpu, self.p.pte_update_ns);
            self.lock_release(ptl);
        }
        self.lock_release(rmap_lock);
        self.kfn_exit(cpu);
    }

    /// `folio_lock_anon_vma_read()` / `i_mmap_lock_read()`: the rmap walk's lock for a folio,
    /// held until the caller releases it.
    pub fn rmap_lock(&mut self, cpu: CpuId, pfn: Pfn) -> Option<crate::kernel::locking::Held> {
        let f = *self.frame(pfn);
        let id = if f.flags & pg::ANON != 0 {
            LockId::AnonVma(f.mapping)
        } else if f.flags & pg::FILE != 0 {
            LockId::IMmap(f.mapping)
        } else {
            return None;
        };
        self.lock_acquire(cpu, id, Mode::Shared)
    }

    /// `flush_tlb_batched_pending()` (mm/rmap.c, 4.13+): called under the PTE lock by every
    /// page-table walker that changes PTEs (zap, mprotect, madvise, mremap). If a reclaim deferred
    /// flushes for this mm that nobody acknowledged, flush the whole mm now. Note that
    /// try_to_unmap_flush() itself does not acknowledge them, so the next walker after a batched
    /// reclaim always pays one flush_tlb_mm().
    pub fn flush_tlb_batched_pending(&mut self, cpu: CpuId, mm: MmId) {
        if self.inject == crate::check::Inject::SkipBatchedPending {
            return;
        }
        let m = self.mm(mm);
        let (pending, flushed) = (m.tlb_flush_batched_pending, m.tlb_flush_batched_flushed);
        if pending != flushed {
            self.mark("batched pending flush");
            self.flush_tlb_mm(cpu, mm);
            self.mm_mut(mm).tlb_flush_batched_flushed = pending;
        }
    }

    /// `try_to_unmap_flush()`.
    pub fn try_to_unmap_flush(&mut self, cpu: CpuId, b: &mut TlbUnmapBatch) {
        if !b.flush_required {
            return;
        }
        let mask = b.cpumask.clone();
        self.kfn_enter(cpu, KFn::TryToUnmapFlush);
        self.arch_tlbbatch_flush(cpu, &mask);
        self.kfn_exit(cpu);
        b.cpumask.clear_all();
        b.flush_required = false;
        b.writable = false;
    }

    /// `try_to_unmap_flush_dirty()`.
    pub fn try_to_unmap_flush_dirty(&mut self, cpu: CpuId, b: &mut TlbUnmapBatch) {
        if b.writable {
            self.mark("dirty writeback flush");
            self.try_to_unmap_flush(cpu, b);
        }
    }
}
