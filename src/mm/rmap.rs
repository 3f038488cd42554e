//! Reverse mapping (mm/rmap.c, Linux 6.18): `rmap_walk` over anon_vma or i_mmap, and
//! `try_to_unmap_one` with the batched-flush decision (`should_defer_flush`,
//! `set_tlb_ubc_flush_pending`) and the per-task `tlbflush_unmap_batch`.

use crate::kernel::locking::{LockId, Mode};
use crate::kernel::profile::KFn;
use crate::mm::pgtable::Pte;
use crate::sim::{pg, Backing, CpuMask, Sim};
use crate::types::*;

/// `struct tlbflush_unmap_batch` (current->tlb_ubc), with LUF's (mm/luf.rs) companions: the
/// folio being unmapped's read-only part (`tlb_ubc_ro`) and what is deferred (`tlb_ubc_luf`).
#[derive(Clone, Debug)]
pub struct TlbUnmapBatch {
    pub cpumask: CpuMask,
    pub flush_required: bool,
    pub writable: bool,
    /// LUF: whether the folio being unmapped may still be deferred (`current->can_luf`).
    pub can_luf: bool,
    /// LUF: the read-only PTEs of the folio being unmapped (`tlb_ubc_ro`).
    pub ro: CpuMask,
    pub ro_required: bool,
    /// LUF: the deferred part (`tlb_ubc_luf`), and the mms and files it came from.
    pub luf: CpuMask,
    pub luf_mms: Vec<MmId>,
    pub luf_files: Vec<u32>,
}

impl TlbUnmapBatch {
    pub fn new(ncpus: usize) -> Self {
        TlbUnmapBatch {
            cpumask: CpuMask::new(ncpus),
            flush_required: false,
            writable: false,
            can_luf: false,
            ro: CpuMask::new(ncpus),
            ro_required: false,
            luf: CpuMask::new(ncpus),
            luf_mms: Vec::new(),
            luf_files: Vec::new(),
        }
    }

    /// After the rmap walk of one folio: its read-only part joins `tlb_ubc_luf` if every PTE
    /// was read-only (the folio is deferred: true), else `tlb_ubc`.
    pub fn end_folio(&mut self) -> bool {
        if !self.ro_required {
            return false;
        }
        self.ro_required = false;
        let target = if self.can_luf { &mut self.luf } else { &mut self.cpumask };
        target.or(&self.ro);
        self.ro.clear_all();
        if !self.can_luf {
            self.flush_required = true;
        }
        self.can_luf
    }

    /// Whether anything is deferred to LUF (not yet folded).
    pub fn luf_pending(&self) -> bool {
        !self.luf.is_empty()
    }

    /// Before `try_to_unmap_flush()`: the CPUs it is about to flush, which LUF's fold drops
    /// (None when nothing is deferred, so nothing is copied with LUF off).
    pub fn luf_flushed_mask(&self) -> Option<CpuMask> {
        match (self.luf_pending(), self.flush_required) {
            (false, _) => None,
            (true, true) => Some(self.cpumask.clone()),
            (true, false) => Some(self.cpumask.empty_like()),
        }
    }
}

impl Sim {
    /// Every (mm, vpn) whose PTE maps `pfn`: anon via the anon_vma's mms at the linear index,
    /// file via i_mmap.
    pub fn rmap_walk(&self, pfn: Pfn) -> Vec<(MmId, u64)> {
        let mut out = Vec::new();
        self.rmap_walk_into(pfn, &mut out);
        out
    }

    /// [`Sim::rmap_walk`] then `f` on each PTE found, which may change anything: the PTEs are
    /// listed first into a buffer kept for the next walk (docs/performance.md, item 30).
    pub(crate) fn for_each_rmap(&mut self, pfn: Pfn, mut f: impl FnMut(&mut Sim, MmId, u64)) {
        let mut maps = std::mem::take(&mut self.rmap_scratch);
        self.rmap_walk_into(pfn, &mut maps);
        for &(mm, vpn) in &maps {
            f(self, mm, vpn);
        }
        maps.clear();
        self.rmap_scratch = maps;
    }

    /// [`Sim::rmap_walk`] appending to `out`.
    fn rmap_walk_into(&self, pfn: Pfn, out: &mut Vec<(MmId, u64)>) {
        let f = self.frame(pfn);
        if f.flags & pg::ANON != 0 {
            for &mm in &self.anon_vmas[f.mapping as usize].mms {
                if let Some(m) = self.mms[mm.0 as usize].as_ref() {
                    let p = m.pgtable.get(f.index());
                    if p.mapped() && p.pfn() == pfn {
                        out.push((mm, f.index()));
                    }
                }
            }
        } else if f.flags & pg::FILE != 0 {
            for &(mm, vstart) in &self.files[f.mapping as usize].i_mmap {
                let Some(m) = self.mms[mm.0 as usize].as_ref() else { continue };
                let Some(v) = m.vmas.get(&vstart) else { continue };
                let Backing::File { pgoff, .. } = v.backing else { continue };
                if f.index() < pgoff || f.index() >= pgoff + (v.end - v.start) {
                    continue;
                }
                let vpn = v.start + (f.index() - pgoff);
                let p = m.pgtable.get(vpn);
                if p.mapped() && p.pfn() == pfn {
                    out.push((mm, vpn));
                }
            }
        }
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
                if b.can_luf && self.luf_pte_ok(mm, vpn, old) {
                    // LUF: a read-only PTE goes to tlb_ubc_ro (mm/luf.rs).
                    b.ro.or(&mask);
                    b.ro_required = true;
                    if !b.luf_mms.contains(&mm) {
                        b.luf_mms.push(mm);
                    }
                } else {
                    b.can_luf = false;
                    b.cpumask.or(&mask);
                    b.flush_required = true;
                }
                self.inc_mm_tlb_gen(mm);
                } else {
                    b.flush_required = true;
                }
                self.mark("batched flush deferred");
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
            self.folio_mark_dirty(cpu, pfn);
        }
        old
    }

    /// LUF's test in `set_tlb_ubc_flush_pending()`: a writable (or dirty) PTE, or a shared VMA
    /// without a file, clears `can_luf`. `luf-defer-writable` lets a writable one through.
    fn luf_pte_ok(&self, mm: MmId, vpn: u64, old: Pte) -> bool {
        if (old.write() || old.dirty()) && self.inject != crate::check::Inject::LufDeferWritable {
            return false;
        }
        !crate::mm::mmap::find_vma_in(self.mm(mm), vpn).is_some_and(|v| v.shared() && matches!(v.backing, Backing::Anon))
    }

    /// `can_luf_init()`: LUF is on and the folio is a small anon or page-cache folio.
    pub fn can_luf_init(&self, pfn: Pfn) -> bool {
        self.p.luf.on() && self.frame(pfn).flags & (pg::ANON | pg::FILE) != 0 && self.frame(pfn).flags & pg::PGTABLE == 0
    }

    /// The start of a folio's rmap walk under TTU_BATCH_FLUSH: `can_luf_init()`; a page-cache
    /// folio's file joins the batch's files (v12's per-`address_space` batch).
    pub fn luf_start_folio(&mut self, pfn: Pfn, b: &mut TlbUnmapBatch) {
        b.can_luf = self.can_luf_init(pfn);
        let f = self.frame(pfn);
        if b.can_luf && f.flags & pg::FILE != 0 && !b.luf_files.contains(&f.mapping) {
            b.luf_files.push(f.mapping);
        }
    }

    /// `try_to_unmap()` → `try_to_unmap_one()` for every mapping of the folio.
    /// With `batch` (TTU_BATCH_FLUSH) the flush may be deferred into the batch. With `swap_slot`
    /// (an anon folio in the swap cache) each PTE becomes a swap entry for that slot.
    ///
    /// Locks: the file's i_mmap_rwsem (or the anon_vma's rwsem) for read across the walk, and
    /// each mapping's PTE lock across try_to_unmap_one(), including a ptep_clear_flush()'s wait
    /// for its IPIs: a fault on that PTE table waits behind it.
    ///
    /// Returns whether LUF deferred the folio's flush (all its PTEs were read-only).
    pub fn try_to_unmap(&mut self, cpu: CpuId, pfn: Pfn, mut batch: Option<&mut TlbUnmapBatch>, swap_slot: Option<u32>) -> bool {
        self.kfn_enter(cpu, KFn::TryToUnmap);
        if let Some(b) = batch.as_deref_mut() {
            self.luf_start_folio(pfn, b);
        }
        self.rmap_walk_locked(cpu, pfn, |sim, mm, vpn| {
            sim.clear_pte_for_unmap(cpu, mm, vpn, batch.as_deref_mut());
            if let Some(slot) = swap_slot {
                sim.mm_mut(mm).pgtable.set(vpn, Pte::swap(slot));
                sim.swap_dup(slot);
            }
            sim.page_remove_rmap(mm, pfn);
            sim.put_page(pfn);
        });
        self.kfn_exit(cpu);
        batch.is_some_and(|b| b.end_folio())
    }

    /// `rmap_walk()` as `try_to_unmap()` and `try_to_migrate()` run it: the folio's rmap lock
    /// for read across the walk, and each mapping under its PTE table's lock while `one`
    /// changes its PTE (`page_vma_mapped_walk()`), charged `cost.pte_update_ns`. A flush that
    /// `one` waits for (ptep_clear_flush()) is waited for under the PTE lock.
    pub(crate) fn rmap_walk_locked(&mut self, cpu: CpuId, pfn: Pfn, mut one: impl FnMut(&mut Sim, MmId, u64)) {
        let rmap_lock = self.rmap_lock(cpu, pfn);
        self.for_each_rmap(pfn, |s, mm, vpn| {
            let ptl = s.lock_acquire(cpu, LockId::Ptl(mm.0, vpn >> 9), Mode::Exclusive);
            one(s, mm, vpn);
            s.charge_sys(cpu, s.p.pte_update_ns);
            s.lock_release(ptl);
        });
        self.lock_release(rmap_lock);
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
            if self.p.luf == crate::mm::luf::Luf::V12 {
                // arch_mm_mark_ugen(), then LUF's own batch for the mm (v12 abandon trigger).
                let mask = self.mm(mm).cpumask.clone();
                self.luf_mark_done(&mask);
                self.luf_abandon(cpu, crate::mm::luf::Abandon::BatchedPending, Some(mm), None);
            }
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
        self.luf_mark_done(&mask);
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
