//! Page migration (mm/migrate.c, Linux 6.18): `migrate_pages()` → `migrate_pages_batch()`.
//!
//! A batch of up to NR_MAX_BATCHED_MIGRATION (512) base pages is unmapped first
//! (`migrate_folio_unmap()` → `try_to_migrate(src, TTU_BATCH_FLUSH)`: the PTEs are cleared and,
//! when another CPU may cache the mm, their flush is deferred into the task's unmap batch), then
//! one `try_to_unmap_flush()` runs, then every folio is copied and its mappings restored to the
//! new frame (`migrate_folio_move()` → `remove_migration_ptes()`). Before 6.3 (commit
//! 7e12beb8ca2a) each folio was unmapped with `ptep_clear_flush()`, one flush per PTE:
//! `kernel.migrate_batch_flush = auto` follows the preset.
//!
//! Departures: a batch is one atomic step, so no task can observe the migration entries that
//! Linux leaves in the PTEs while the copy runs (nobody waits on them); migration of large
//! folios, isolation failures other than "not on the LRU" and the MIGRATE_ASYNC retry loop are
//! left out.

use crate::mm::pgtable::Pte;
use crate::mm::rmap::TlbUnmapBatch;
use crate::mm::vmstat::VmEvent;
use crate::mm::mmap::find_vma_in;
use crate::sim::{pg, Sim};
use crate::kernel::locking::{LockId, Mode};
use crate::types::*;

/// A folio in flight in `migrate_pages_batch()`: source, destination, the PTEs cleared from the
/// source, and whether LUF deferred the source's flush.
/// A folio being moved: source, destination, its unmapped PTEs (a range of the batch's PTE
/// list, so that unmapping allocates nothing per folio) and whether LUF deferred its flush.
type Moving = (Pfn, Pfn, std::ops::Range<usize>, bool);

/// NR_MAX_BATCHED_MIGRATION = HPAGE_PMD_NR.
pub const NR_MAX_BATCHED_MIGRATION: usize = 512;

impl Sim {
    /// `migrate_pages()` of the folios mapped in `[start, start+pages)` of `mm` to node `target`
    /// (what `move_pages(2)`/`migratepages` do). Returns (migrated, failed).
    pub fn migrate_range(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64, target: NodeId) -> (u64, u64) {
        let mut folios = Vec::new();
        self.mm(mm).pgtable.for_each_mapped(start, start + pages, |_, p| {
            if p.present() {
                folios.push(p.pfn());
            }
        });
        folios.retain(|&pfn| self.frame(pfn).flags & (pg::ZERO | pg::PGTABLE) == 0 && self.pfn_to_nid(pfn) as u32 != target.0);
        folios.dedup();
        self.lru_add_drain(cpu);
        let n = folios.len();
        folios.retain(|&p| self.folio_isolate_lru(cpu, p));
        let (mut ok, mut failed) = (0, (n - folios.len()) as u64);
        self.vmstat.add(VmEvent::PGMIGRATE_FAIL, failed);
        for chunk in folios.chunks(NR_MAX_BATCHED_MIGRATION) {
            let (o, f) = self.migrate_pages_batch(cpu, chunk, target);
            ok += o;
            failed += f;
        }
        self.trace(cpu, || crate::report::trace_log::TraceEvent::MmMigratePages { succeeded: ok, failed, numa: false });
        (ok, failed)
    }

    /// `migrate_misplaced_folio_prepare()`: may this folio, mapped in `vma`, move to `target`
    /// for NUMA balancing? Isolates it from the LRU if so. Refused: a shared executable file
    /// folio (a library), a dirty file folio (MIGRATE_ASYNC cannot write it back), a target node
    /// without room above its high watermark (`migrate_balanced_pgdat()`), a folio not on the
    /// LRU (e.g. still in a per-CPU lru_add batch, or already isolated by another fault).
    pub fn migrate_misplaced_folio_prepare(&mut self, cpu: CpuId, vma: &crate::sim::Vma, pfn: Pfn, target: NodeId) -> bool {
        let f = *self.frame(pfn);
        let file = f.flags & pg::FILE != 0;
        if file && f.mapcount > 1 && vma.flags & crate::sim::vm::EXEC != 0 {
            return false;
        }
        if file && f.flags & pg::DIRTY != 0 {
            return false;
        }
        let n = &self.nodes[target.0 as usize];
        if n.nr_free <= n.wmark.high + 1 {
            if self.p.numa_tiering {
                // Memory tiering: wake the target's kswapd, which demotes cold folios to make
                // room for promotion (balancing to WMARK_PROMO).
                if let Some(cpu) = self.running_cpu {
                    self.wakeup_kswapd(cpu, target.0 as usize);
                    self.mark("promotion woke kswapd");
                }
            }
            return false;
        }
        if !self.folio_isolate_lru(cpu, pfn) {
            return false;
        }
        // The isolation holds a reference (folio_isolate_lru() does folio_get()): the folio
        // stays alive while the migration is in flight, even if it is unmapped meanwhile.
        self.get_page(pfn);
        true
    }

    /// `migrate_misplaced_folio()`: `migrate_pages(MIGRATE_ASYNC, MR_NUMA_MISPLACED)` of one
    /// isolated folio; counts `numa_pages_migrated`. True if it moved.
    pub fn migrate_misplaced_folio(&mut self, cpu: CpuId, pfn: Pfn, target: NodeId) -> bool {
        if self.frame(pfn).refcount == 1 {
            // migrate_folio_unmap(): only the isolation's reference is left, the folio was freed
            // from under us (unmapped meanwhile): done, nothing to move.
            self.put_page(pfn);
            return false;
        }
        let src_nid = self.pfn_node(pfn).0;
        let (ok, _) = self.migrate_pages_batch(cpu, &[pfn], target);
        self.trace(cpu, || crate::report::trace_log::TraceEvent::MmMigratePages { succeeded: ok, failed: 1 - ok, numa: true });
        if ok == 1 {
            // The source frame, with the isolation's reference, is gone.
            self.vmstat.count(VmEvent::NUMA_PAGES_MIGRATED);
            if self.p.numa_tiering && !self.node_is_toptier(src_nid) && self.node_is_toptier(target.0) {
                self.vmstat.count(VmEvent::PGPROMOTE_SUCCESS);
                self.mark("promotion");
            }
        } else {
            // Put back on the LRU by migrate_pages_batch(); drop the isolation's reference.
            self.put_page(pfn);
        }
        ok == 1
    }

    /// `migrate_pages_batch()` for up to NR_MAX_BATCHED_MIGRATION folios, all isolated from the
    /// LRU by the caller. Returns (migrated, failed); a failed folio goes back to the LRU.
    fn migrate_pages_batch(&mut self, cpu: CpuId, folios: &[Pfn], target: NodeId) -> (u64, u64) {
        self.migrate_pages_batch_to(cpu, folios, target, None)
    }

    /// `migrate_pages_batch()` with the caller's allocation: `demote` set is MR_DEMOTION
    /// (`alloc_demote_folio()`, mm/vmscan_demote.rs), whose failed folios are handed back in
    /// it instead of going back to the LRU, so that reclaim can evict them.
    pub(crate) fn migrate_pages_batch_to(&mut self, cpu: CpuId, folios: &[Pfn], target: NodeId, demote: Option<&mut Vec<Pfn>>) -> (u64, u64) {
        self.kfn_enter(cpu, crate::kernel::profile::KFn::MigratePages);
        let r = self.migrate_pages_batch_inner(cpu, folios, target, demote);
        self.kfn_exit(cpu);
        r
    }

    fn migrate_pages_batch_inner(&mut self, cpu: CpuId, folios: &[Pfn], target: NodeId, mut demote: Option<&mut Vec<Pfn>>) -> (u64, u64) {
        let batched = self.p.migrate_batch_flush;
        let mut batch = TlbUnmapBatch::new(self.cpus.len());
        // Phase 1, migrate_folio_unmap(): allocate the destination, unmap.
        let mut moving: Vec<Moving> = Vec::new();
        let mut unmapped: Vec<(MmId, u64, Pte)> = Vec::new();
        let mut failed = 0;
        for &src in folios {
            if self.frame(src).flags & pg::WRITEBACK != 0 || (self.latr.is_some() && self.latr_holds(src)) {
                // Under writeback: migrate_folio_unmap() gives up with -EBUSY (MIGRATE_ASYNC; the
                // kernel's MIGRATE_SYNC of move_pages() would wait, mm/page_writeback.rs). A lazy
                // munmap's reference (mm/latr.rs) is one more than folio_migrate_mapping()
                // expects: -EAGAIN. Either way the folio goes back (a demotion hands it back to
                // reclaim).
                match demote.as_deref_mut() {
                    Some(failed_out) => failed_out.push(src),
                    None => self.lru_add(src),
                }
                failed += 1;
                continue;
            }
            if let Some(failed_out) = demote.as_deref_mut() {
                match self.alloc_demote_folio(cpu, target.0) {
                    Some(dst) => {
                        let b = if batched { Some(&mut batch) } else { None };
                        let from = unmapped.len();
                        let luf = self.try_to_migrate(cpu, src, b, &mut unmapped);
                        moving.push((src, dst, from..unmapped.len(), luf));
                    }
                    None => {
                        failed_out.push(src);
                        failed += 1;
                    }
                }
                continue;
            }
            let dst = match self.alloc_pages_node_nocheck(target, 0) {
                Some(d) if self.pfn_node(d) == target => d,
                other => {
                    // __GFP_THISNODE: a page that fell back to another node is no destination;
                    // give it back rather than leak it (found by the structural checkers).
                    if let Some(d) = other {
                        self.put_page(d);
                    }
                    self.lru_add(src);
                    failed += 1;
                    continue;
                }
            };
            let b = if batched { Some(&mut batch) } else { None };
            let from = unmapped.len();
            let luf = self.try_to_migrate(cpu, src, b, &mut unmapped);
            moving.push((src, dst, from..unmapped.len(), luf));
        }
        if !moving.is_empty() {
            self.mark("migration batch");
        }
        // One flush for the whole batch before any page is copied; with LUF ("mm, migrate:
        // apply luf mechanism to unmapping during migration") the read-only sources' flush is
        // deferred to their next allocation instead (mm/luf.rs).
        let flushed = batch.luf_flushed_mask();
        // kernel.latr_migrate_unmap, a misuse switch (mm/latr.rs): the flush posted lazily.
        let mms: Vec<MmId> = if self.latr.as_ref().is_some_and(|l| l.migrate_unmap) { moving.iter().flat_map(|m| unmapped[m.2.clone()].iter().map(|p| p.0)).collect() } else { Vec::new() };
        if !self.latr_migrate_unmap_flush(cpu, &mut batch, &mms) {
            self.try_to_unmap_flush(cpu, &mut batch);
        }
        let luf_tag = flushed.map_or(0, |f| self.luf_fold_batch(cpu, &mut batch, &f));
        // Phase 2, migrate_folio_move(): copy, remap to the new frame, free the old one.
        let ok = moving.len() as u64;
        for (src, dst, ptes, luf) in moving {
            let cost = self.page_op_ns(cpu, dst, true);
            self.charge_sys(cpu, cost);
            let s = *self.frame(src);
            {
                let d = self.frame_mut(dst);
                d.flags |= s.flags & (pg::ANON | pg::FILE | pg::DIRTY | pg::ANON_EXCLUSIVE | pg::ACTIVE | pg::REFERENCED);
                d.mapping = s.mapping;
                d.set_index(s.index());
            }
            if s.flags & pg::FILE != 0 {
                // folio_migrate_mapping(): the page cache now points at the new frame.
                self.files[s.mapping as usize].set_slot(s.index(), crate::mm::workingset::Slot::Page(dst));
                self.frame_mut(src).flags &= !pg::FILE;
                self.writeback_migrated(cpu, dst);
            }
            let n = ptes.len() as u32;
            let ptes = &unmapped[ptes];
            // folio_migrate_flags(); with memory tiering, a move between tiers resets it (the
            // bits hold an access time on the lower tier, a cpupid on the top one).
            let cross_tier = self.p.numa_tiering && self.node_is_toptier(self.pfn_to_nid(src) as u32) != self.node_is_toptier(self.pfn_to_nid(dst) as u32);
            let last = if cross_tier { 0 } else { self.last_cpupid.get(src) };
            self.last_cpupid.replace(dst, last);
            // remove_migration_ptes() → rmap_walk(dst): the anon_vma's rwsem (or i_mmap_rwsem)
            // for read across the walk, each PTE under its table's lock (page_vma_mapped_walk()).
            let rmap_lock = if n > 0 { self.rmap_lock(cpu, dst) } else { None };
            for &(mm, vpn, old) in ptes {
                // remove_migration_pte(): the old PTE's permissions and dirty bit, new frame. A
                // NUMA-hinted PROT_NONE PTE comes back as mk_pte(vm_page_prot): accessible.
                let ptl = self.lock_acquire(cpu, LockId::Ptl(mm.0, vpn >> 9), Mode::Exclusive);
                let accessible_vma = find_vma_in(self.mm(mm), vpn).is_some_and(|v| v.start <= vpn && v.is_accessible());
                let flags = if old.protnone() && accessible_vma { old.with(Pte::PRESENT, Pte::PROTNONE).flags() } else { old.flags() };
                self.mm_mut(mm).pgtable.set(vpn, Pte::new(dst, flags));
                self.charge_sys(cpu, self.p.pte_update_ns);
                self.lock_release(ptl);
            }
            self.lock_release(rmap_lock);
            {
                // References move to the new frame: one per mapping, plus the page cache's.
                let d = self.frame_mut(dst);
                d.mapcount = n as i32;
                d.refcount = n + (s.flags & pg::FILE != 0) as u32;
            }
            self.lru_add(dst);
            // The source is now only referenced by the migration: drop it.
            self.frame_mut(src).refcount = 1;
            if !self.latr_hold_migrated_source(cpu, src) {
                self.luf_put_folio(cpu, src, if luf { luf_tag } else { 0 });
            }
            self.vmstat.count(VmEvent::PGMIGRATE_SUCCESS);
        }
        self.vmstat.add(VmEvent::PGMIGRATE_FAIL, failed);
        (ok, failed)
    }

    /// `try_to_migrate()` → `try_to_migrate_one()`: clear every PTE mapping the folio (deferring
    /// the flush into `batch` when allowed) and append them to `out`, so that the move phase can
    /// map the new frame where the old one was. Returns whether LUF deferred the folio's flush
    /// (all its PTEs were read-only).
    fn try_to_migrate(&mut self, cpu: CpuId, pfn: Pfn, mut batch: Option<&mut TlbUnmapBatch>, out: &mut Vec<(MmId, u64, Pte)>) -> bool {
        self.kfn_enter(cpu, crate::kernel::profile::KFn::TryToMigrate);
        if let Some(b) = batch.as_deref_mut() {
            self.luf_start_folio(pfn, b);
        }
        // try_to_migrate_one() under the rmap and PTE locks, as try_to_unmap() takes them:
        // before 6.3 a ptep_clear_flush() waits for its IPIs under the PTE lock.
        self.rmap_walk_locked(cpu, pfn, |sim, mm, vpn| {
            let old = sim.clear_pte_for_unmap(cpu, mm, vpn, batch.as_deref_mut());
            // The migration holds the folio; only the mapping count drops here.
            sim.frame_mut(pfn).mapcount -= 1;
            out.push((mm, vpn, old));
        });
        self.kfn_exit(cpu);
        batch.is_some_and(|b| b.end_folio())
    }
}
