//! Page faults, zapping and page-table copying (mm/memory.c, Linux 6.18).
//!
//! Follows: `handle_mm_fault` → `handle_pte_fault` → `do_anonymous_page` / `do_fault`
//! (`do_read_fault` with fault-around, `do_cow_fault`, `do_shared_fault`) / `do_wp_page`
//! (`wp_page_reuse`, `wp_page_copy` with `ptep_clear_flush`); `unmap_vmas` → `zap_pte_range`
//! with mmu_gather; `free_pgtables`; `copy_page_range` for fork.
//! Left out: THP, swap entries, migration entries, userfaultfd, uprobes, KSM.

use crate::mm::mmu_gather::MmuGather;
use crate::mm::pgtable::Pte;
use crate::kernel::locking::{LockId, Mode};
use crate::kernel::profile::KFn;
use crate::mm::vmstat::VmEvent;
use crate::sim::{pg, vm, Backing, Sim, Vma};
use crate::types::*;

/// Why a fault could not be resolved; both end the faulting task (SIGSEGV / OOM kill).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultError {
    Segv(Box<String>),
    Oom,
    /// The fault started work that the task's next step finishes (a NUMA hint fault's
    /// migration, mm/numa_fault.rs); the access is retried after it.
    Again,
}

/// `fault_around_bytes` default (64 KiB): do_read_fault maps up to 16 cached neighbours.
pub const FAULT_AROUND_PAGES: u64 = 16;

impl Sim {
    /// `pte_alloc()` and friends: page-table pages come from the faulting CPU's node (GFP_KERNEL:
    /// they may reclaim).
    pub fn pte_alloc(&mut self, cpu: CpuId, mm: MmId, vpn: u64) -> Result<(), FaultError> {
        let missing = {
            let pt = &self.mm(mm).pgtable;
            match pt.pgd.slots[crate::mm::pgtable::idx(vpn, 3)].as_deref() {
                None => 3,
                Some(pud) => match pud.slots[crate::mm::pgtable::idx(vpn, 2)].as_deref() {
                    None => 2,
                    Some(pmd) => pmd.slots[crate::mm::pgtable::idx(vpn, 1)].is_none() as usize,
                },
            }
        };
        if missing == 0 {
            return Ok(());
        }
        let node = self.cpu_node(cpu);
        let mut pfns = Vec::with_capacity(missing);
        for _ in 0..missing {
            match self.alloc_pages(cpu, node) {
                Some(p) => {
                    self.frames[p.0 as usize].flags |= pg::PGTABLE;
                    pfns.push(p)
                }
                None => {
                    for p in pfns {
                        self.frames[p.0 as usize].flags &= !pg::PGTABLE;
                        self.put_page(p);
                    }
                    return Err(FaultError::Oom);
                }
            }
        }
        // pte_alloc_one() and friends allocate with __GFP_ZERO: each table page is cleared.
        let clear: f64 = pfns.iter().map(|&p| self.page_op_ns(cpu, p, false)).sum();
        let mut it = pfns.into_iter();
        let used = self.mm_mut(mm).pgtable.alloc_path(vpn, || it.next().expect("counted"));
        self.mm_mut(mm).nr_ptes += used as u64;
        self.pgtables_changed(used as i64);
        self.charge_sys(cpu, self.p.page_alloc_ns * used as f64 + clear);
        Ok(())
    }

    /// do_user_addr_fault()'s `find_vma()` (mm/vmacache.rs: caches, tree walk, cost).
    fn vma_at(&mut self, cpu: CpuId, mm: MmId, vpn: u64) -> Option<Vma> {
        let s = self.find_vma(cpu, mm, vpn)?;
        self.mm(mm).vmas.get(&s).filter(|v| v.start <= vpn).cloned()
    }

    /// `anon_vma_prepare()`.
    fn anon_vma_prepare(&mut self, mm: MmId, vma_start: u64) -> u32 {
        if let Some(a) = self.mm(mm).vmas[&vma_start].anon_vma {
            return a;
        }
        let id = self.anon_vmas.len() as u32;
        self.anon_vmas.push(crate::sim::AnonVma { mms: vec![mm] });
        self.mm_mut(mm).vmas.get_mut(&vma_start).unwrap().anon_vma = Some(id);
        id
    }

    /// Allocate a frame for user data on the CPU's node, or OOM.
    fn alloc_user_page(&mut self, cpu: CpuId) -> Result<Pfn, FaultError> {
        let node = self.cpu_node(cpu);
        let p = self.alloc_pages(cpu, node).ok_or(FaultError::Oom)?;
        self.charge_sys(cpu, self.p.page_alloc_ns);
        Ok(p)
    }

    /// Time to clear (or copy into) the 4 KiB frame `pfn` from `cpu`: limited by the core's
    /// clear_page/copy_page speed and by the bandwidth from the CPU to the frame's node.
    pub fn page_op_ns(&self, cpu: CpuId, pfn: Pfn, copy: bool) -> f64 {
        let core = if copy { self.p.copy_page_ns } else { self.p.clear_page_ns };
        let bw = self.node_bandwidth[self.cpu_node(cpu).0 as usize][self.pfn_node(pfn).0 as usize];
        core.max(PAGE_SIZE as f64 / bw)
    }

    /// `folio_add_new_anon_rmap()` + set_pte_at, then the LRU. A new anon folio (`fresh`: a
    /// zero-fill or COW fault, not a swap-in) starts on the **active** list before 5.9
    /// (`lru_cache_add_active_or_unevictable()`) and on the inactive list from 5.9
    /// (`lru_cache_add_inactive_or_unevictable()`, "mm/vmscan: protect the workingset on
    /// anonymous LRU", b518154e59aa). A swapped-in folio starts inactive in both (4.2
    /// `__read_swap_cache_async()` → `lru_cache_add_anon()`).
    #[allow(clippy::too_many_arguments)]
    fn map_new_anon(&mut self, cpu: CpuId, mm: MmId, vma_start: u64, vpn: u64, pfn: Pfn, writable: bool, dirty: bool, fresh: bool) {
        let av = self.anon_vma_prepare(mm, vma_start);
        let active = fresh && self.p.kver < (5, 9);
        let f = self.frame_mut(pfn);
        f.flags |= pg::ANON | pg::ANON_EXCLUSIVE;
        if active {
            f.flags |= pg::ACTIVE;
        }
        f.mapping = av;
        f.set_index(vpn);
        f.mapcount = 1;
        let mut flags = Pte::PRESENT | Pte::USER | Pte::ACCESSED;
        if writable {
            flags |= Pte::RW;
        }
        if dirty {
            flags |= Pte::DIRTY;
        }
        let m = self.mm_mut(mm);
        m.pgtable.set(vpn, Pte::new(pfn, flags));
        m.rss_anon += 1;
        // folio_add_lru_vma(): through the lru_add batch.
        self.folio_add_lru(cpu, pfn);
    }

    /// `handle_mm_fault()` for a user access at `vpn`.
    ///
    /// Locks: mmap_lock for read across the whole fault before 6.4 (from 6.4 the per-VMA lock,
    /// not modelled: it contends only with a writer of the same VMA), and the PTE table's lock
    /// while the new PTE is installed.
    pub fn handle_mm_fault(&mut self, cpu: CpuId, mm: MmId, vpn: u64, write: bool, instr: bool) -> Result<(), FaultError> {
        self.kfn_enter(cpu, KFn::HandleMmFault);
        let mmap_lock = if self.p.fault_mmap_lock { self.mmap_lock(cpu, mm, Mode::Shared) } else { None };
        let mut r = self.handle_mm_fault_locked(cpu, mm, vpn, write, instr);
        if std::mem::take(&mut self.direct_reclaim_deferred) && matches!(r, Err(FaultError::Oom)) {
            // An allocation left its direct reclaim to the task's next steps: the access is
            // replayed after it, and this attempt is not counted (the replay counts the fault).
            self.vmstat.ev[VmEvent::PGFAULT as usize] -= 1;
            r = Err(FaultError::Again);
        }
        if let (Ok(()), Some(t)) = (&r, self.cpus[cpu.0 as usize].current) {
            self.task_mut(t).direct_reclaim_failed = false;
        }
        if r.is_ok() {
            self.lock_section(cpu, LockId::Ptl(mm.0, vpn >> 9), Mode::Exclusive, self.p.pte_update_ns);
        }
        self.lock_release(mmap_lock);
        self.kfn_exit(cpu);
        r
    }

    fn handle_mm_fault_locked(&mut self, cpu: CpuId, mm: MmId, vpn: u64, write: bool, instr: bool) -> Result<(), FaultError> {
        self.vmstat.count(VmEvent::PGFAULT);
        self.trace(cpu, || crate::report::trace_log::TraceEvent::PageFaultUser { address: vpn << PAGE_SHIFT, error_code: 4 | (write as u64) << 1 | (instr as u64) << 4 });
        let ns = self.fault_entry_ns(cpu);
        self.charge_sys(cpu, ns);
        let Some(vma) = self.vma_at(cpu, mm, vpn) else {
            return Err(FaultError::Segv(Box::new(format!("no VMA at {}", Vpn(vpn).addr()))));
        };
        // access_error(): the VMA must allow the access.
        let need = if write { vm::WRITE } else if instr { vm::EXEC } else { vm::READ };
        if vma.flags & need == 0 && !(instr && vma.flags & vm::READ != 0) {
            return Err(FaultError::Segv(Box::new(format!("{} access to {} not allowed by the VMA", if write { "write" } else { "read" }, Vpn(vpn).addr()))));
        }
        if self.p.luf == crate::mm::luf::Luf::V12 && (write || vma.flags & vm::WRITE != 0) {
            // LUF v12: a fault on a writable VMA flushes what the mm's batch still owes.
            self.luf_abandon(cpu, crate::mm::luf::Abandon::WritableFault, Some(mm), None);
            if let Backing::File { file, .. } = vma.backing {
                // A writable file VMA may change the file: its mapping's batch too.
                self.luf_abandon(cpu, crate::mm::luf::Abandon::WritableFault, None, Some(file.0));
            }
        }
        self.pte_alloc(cpu, mm, vpn)?;
        let pte = self.mm(mm).pgtable.get(vpn);
        if pte.none() {
            return match vma.backing {
                Backing::Anon => self.do_anonymous_page(cpu, mm, &vma, vpn, write),
                Backing::File { .. } => self.do_fault(cpu, mm, &vma, vpn, write),
            };
        }
        if pte.is_swap() {
            return self.do_swap_page(cpu, mm, &vma, vpn, pte, write);
        }
        if pte.protnone() {
            // A PROT_NONE PTE in an accessible VMA is a NUMA hint fault (mm/numa_fault.rs).
            return self.do_numa_page(cpu, mm, &vma, vpn, pte);
        }
        if write && !pte.write() {
            return self.do_wp_page(cpu, mm, &vma, vpn, pte);
        }
        // Spurious fault (e.g. a stale read-only TLB entry after another CPU upgraded the PTE):
        // the walk that follows will fill the current PTE.
        Ok(())
    }

    /// `do_swap_page()`: read the page back from its slot into a new anon page and map it;
    /// writable if the fault writes or no other PTE shares the slot (exclusive).
    fn do_swap_page(&mut self, cpu: CpuId, mm: MmId, vma: &Vma, vpn: u64, pte: Pte, write: bool) -> Result<(), FaultError> {
        let slot = pte.swap_slot();
        let pfn = self.alloc_user_page(cpu)?;
        self.vmstat.count(VmEvent::PGMAJFAULT);
        self.vmstat.count(VmEvent::PSWPIN);
        self.mark("swap in");
        let io = self.submit_read(cpu, crate::block::Dev::Swap, 1);
        self.io_wait(cpu, io);
        let exclusive = self.swap.map[slot as usize] == 1;
        // The PTE may only be replaced if it still holds this swap entry (pte_same()).
        if self.mm(mm).pgtable.get(vpn) != pte {
            self.put_page(pfn);
            return Ok(());
        }
        self.mm_mut(mm).pgtable.set(vpn, Pte::NONE);
        self.swap_free(slot);
        let writable = vma.flags & vm::WRITE != 0 && (write || exclusive);
        self.map_new_anon(cpu, mm, vma.start, vpn, pfn, writable, write, false);
        if !exclusive {
            self.frame_mut(pfn).flags &= !pg::ANON_EXCLUSIVE;
        }
        Ok(())
    }

    /// `do_anonymous_page()`: a read maps the shared zero page; a write gets a zeroed page.
    fn do_anonymous_page(&mut self, cpu: CpuId, mm: MmId, vma: &Vma, vpn: u64, write: bool) -> Result<(), FaultError> {
        if !write {
            let z = self.zero_pfn;
            self.mm_mut(mm).pgtable.set(vpn, Pte::new(z, Pte::PRESENT | Pte::USER | Pte::ACCESSED));
            return Ok(());
        }
        let pfn = self.alloc_user_page(cpu)?;
        self.charge_sys(cpu, self.page_op_ns(cpu, pfn, false));
        self.map_new_anon(cpu, mm, vma.start, vpn, pfn, vma.flags & vm::WRITE != 0, true, true);
        Ok(())
    }

    /// `do_fault()`: file-backed.
    fn do_fault(&mut self, cpu: CpuId, mm: MmId, vma: &Vma, vpn: u64, write: bool) -> Result<(), FaultError> {
        let Backing::File { file, .. } = vma.backing else { unreachable!() };
        let pgoff = vma.pgoff(vpn);
        if !write {
            // do_read_fault(): fault-around maps cached neighbours first (read-only).
            self.do_fault_around(cpu, mm, vma, vpn);
            if !self.mm(mm).pgtable.get(vpn).none() {
                return Ok(());
            }
            let pfn = self.filemap_fault(cpu, file, pgoff)?;
            self.map_file_page(mm, vpn, pfn, false);
            self.charge_sys(cpu, self.p.file_rmap_ns);
            return Ok(());
        }
        if !vma.shared() {
            // do_cow_fault(): copy the file page into a new anon page.
            let src = self.filemap_fault(cpu, file, pgoff)?;
            let _ = src;
            let pfn = self.alloc_user_page(cpu)?;
            self.charge_sys(cpu, self.page_op_ns(cpu, pfn, true));
            self.vmstat.count(VmEvent::COW_FAULT);
            self.map_new_anon(cpu, mm, vma.start, vpn, pfn, true, true, true);
            return Ok(());
        }
        // do_shared_fault(): page_mkwrite (cost.page_mkwrite_ns), then map writable and dirty.
        let pfn = self.filemap_fault(cpu, file, pgoff)?;
        self.charge_sys(cpu, self.p.page_mkwrite_ns);
        self.folio_mark_dirty(cpu, pfn);
        self.map_file_page(mm, vpn, pfn, true);
        self.charge_sys(cpu, self.p.file_rmap_ns);
        Ok(())
    }

    /// `do_fault_around()`: map up to FAULT_AROUND_PAGES already-cached pages of the aligned
    /// window around `vpn`, within the VMA and the same PTE table.
    fn do_fault_around(&mut self, cpu: CpuId, mm: MmId, vma: &Vma, vpn: u64) {
        let Backing::File { file, .. } = vma.backing else { return };
        let lo = (vpn & !(FAULT_AROUND_PAGES - 1)).max(vma.start).max(vpn & !511);
        let hi = ((vpn & !(FAULT_AROUND_PAGES - 1)) + FAULT_AROUND_PAGES).min(vma.end).min((vpn | 511) + 1);
        let mut mapped = 0;
        let mut mmap_hits = 0u32;
        for v in lo..hi {
            if !self.mm(mm).pgtable.get(v).none() {
                continue;
            }
            let pgoff = vma.pgoff(v);
            if let Some(pfn) = self.files[file.0 as usize].page(pgoff) {
                // filemap_map_pages() leaves pages under I/O and PG_readahead markers to a
                // fault (next_uptodate_folio()).
                if self.ra_skip_fault_around(cpu, file, pgoff, pfn) {
                    continue;
                }
                // 6.10+: a PG_workingset folio (evicted and refaulted) does not count against
                // mmap_miss, so read-around stops on a file that keeps thrashing.
                if self.p.kver < (6, 10) || self.frame(pfn).flags & pg::WORKINGSET == 0 {
                    mmap_hits += 1;
                }
                self.map_file_page(mm, v, pfn, false);
                mapped += 1;
            }
        }
        // filemap_map_pages(): pages found cached count against mmap_miss.
        let ra = &mut self.files[file.0 as usize].ra;
        ra.mmap_miss = ra.mmap_miss.saturating_sub(mmap_hits);
        self.charge_sys(cpu, (self.p.pte_update_ns + self.p.file_rmap_ns) * mapped as f64);
    }

    /// `set_pte_range()` for a page-cache folio (folio_add_file_rmap_pte).
    pub(crate) fn map_file_page(&mut self, mm: MmId, vpn: u64, pfn: Pfn, write: bool) {
        let f = self.frame_mut(pfn);
        f.mapcount += 1;
        f.refcount += 1;
        let mut flags = Pte::PRESENT | Pte::USER | Pte::ACCESSED;
        if write {
            flags |= Pte::RW | Pte::DIRTY;
        }
        let m = self.mm_mut(mm);
        m.pgtable.set(vpn, Pte::new(pfn, flags));
        m.rss_file += 1;
    }

    /// `do_wp_page()`: write to a present read-only PTE.
    fn do_wp_page(&mut self, cpu: CpuId, mm: MmId, vma: &Vma, vpn: u64, pte: Pte) -> Result<(), FaultError> {
        if vma.flags & vm::WRITE == 0 {
            return Err(FaultError::Segv(Box::new(format!("write to read-only mapping at {}", Vpn(vpn).addr()))));
        }
        if self.p.luf == crate::mm::luf::Luf::V10 {
            // LUF v10: a write-protect fault gives up every deferred flush (mm/luf.rs).
            self.luf_abandon(cpu, crate::mm::luf::Abandon::WpFault, None, None);
        }
        let pfn = pte.pfn();
        if vma.shared() {
            // wp_page_shared(): page_mkwrite (cost.page_mkwrite_ns), mark dirty, wp_page_reuse
            // (no flush on x86: a permission upgrade needs none).
            self.charge_sys(cpu, self.p.page_mkwrite_ns);
            self.folio_mark_dirty(cpu, pfn);
            self.mm_mut(mm).pgtable.set(vpn, pte.with(Pte::RW | Pte::DIRTY | Pte::ACCESSED, 0));
            return Ok(());
        }
        let f = *self.frame(pfn);
        let is_zero = f.flags & pg::ZERO != 0;
        if !is_zero && f.flags & pg::ANON != 0 && (f.flags & pg::ANON_EXCLUSIVE != 0 || (f.mapcount == 1 && f.refcount == 1)) {
            // wp_can_reuse_anon_folio() → wp_page_reuse().
            self.frame_mut(pfn).flags |= pg::ANON_EXCLUSIVE;
            self.mm_mut(mm).pgtable.set(vpn, pte.with(Pte::RW | Pte::DIRTY | Pte::ACCESSED, 0));
            return Ok(());
        }
        // wp_page_copy(): new page, copy (or clear for the zero page), ptep_clear_flush, map.
        // The fault holds a reference on the old folio while it allocates (which may reclaim,
        // and so unmap or swap out that very folio), then re-checks the PTE (pte_same()).
        self.get_page(pfn);
        let new = match self.alloc_user_page(cpu) {
            Ok(p) => p,
            Err(e) => {
                self.put_page(pfn);
                return Err(e);
            }
        };
        if self.mm(mm).pgtable.get(vpn) != pte {
            // Changed under us: undo and let the access fault again.
            self.put_page(new);
            self.put_page(pfn);
            return Ok(());
        }
        self.charge_sys(cpu, self.page_op_ns(cpu, new, !is_zero));
        self.vmstat.count(VmEvent::COW_FAULT);
        // ptep_clear_flush(): the old translation must be gone from every TLB before the new PTE.
        self.mm_mut(mm).pgtable.set(vpn, Pte::NONE);
        self.flush_tlb_page(cpu, mm, vpn);
        if !is_zero {
            self.page_remove_rmap(mm, pfn);
            self.put_page(pfn);
        }
        self.put_page(pfn);
        self.map_new_anon(cpu, mm, vma.start, vpn, new, true, true, true);
        Ok(())
    }

    /// `folio_remove_rmap_pte()` with the RSS update.
    pub(crate) fn page_remove_rmap(&mut self, mm: MmId, pfn: Pfn) {
        let f = self.frame_mut(pfn);
        f.mapcount -= 1;
        let anon = f.flags & pg::ANON != 0;
        debug_assert!(f.mapcount >= 0, "simulator bug: negative mapcount on {pfn}");
        let m = self.mm_mut(mm);
        if anon {
            m.rss_anon -= 1;
        } else {
            m.rss_file -= 1;
        }
    }

    /// `zap_pmd_range()` → `zap_pte_range()` over `[start, end)` of one VMA, one PTE table at a
    /// time, gathering into `tlb`. With `reclaim_pt` (MADV_DONTNEED under CONFIG_PT_RECLAIM) a
    /// PTE table whose whole 2 MiB range was zapped is freed too (`try_to_free_pte()`).
    pub fn zap_pte_range(&mut self, cpu: CpuId, tlb: &mut MmuGather, start: u64, end: u64, reclaim_pt: bool) {
        self.kfn_enter(cpu, KFn::ZapPteRange);
        self.zap_pte_range_body(cpu, tlb, start, end, reclaim_pt);
        self.kfn_exit(cpu);
    }

    fn zap_pte_range_body(&mut self, cpu: CpuId, tlb: &mut MmuGather, start: u64, end: u64, reclaim_pt: bool) {
        let mm = tlb.mm;
        let mut s = start;
        while s < end {
            let e = ((s | 511) + 1).min(end);
            if self.mm(mm).pgtable.pte_table(s).is_some() {
                // Under the PTE lock: a reclaim's deferred flush for this mm must happen first.
                self.flush_tlb_batched_pending(cpu, mm);
                self.zap_one_table(cpu, tlb, s, e);
                if reclaim_pt && e - s == 512 {
                    if let Some(pfn) = self.mm_mut(mm).pgtable.free_pte_table(s) {
                        self.mm_mut(mm).nr_ptes -= 1;
                        self.pgtables_changed(-1);
                        tlb.free_table(s, pfn);
                    }
                }
            }
            s = e;
        }
    }

    fn zap_one_table(&mut self, cpu: CpuId, tlb: &mut MmuGather, start: u64, end: u64) {
        let mm = tlb.mm;
        let mut victims = Vec::new();
        self.mm(mm).pgtable.for_each_mapped(start, end, |v, p| victims.push((v, p)));
        let n = victims.len();
        let mut file_pages = 0u64;
        for (vpn, pte) in victims {
            self.mm_mut(mm).pgtable.set(vpn, Pte::NONE);
            if self.oracle.is_some() && (pte.is_swap() || self.frame(pte.pfn()).flags & pg::ANON != 0) {
                // Private data is gone: the mapping no longer holds what a stale entry shows.
                self.oracle_discard(mm, vpn);
            }
            if pte.is_swap() {
                // zap_nonpresent_ptes(): free_swap_and_cache().
                self.swap_free(pte.swap_slot());
                continue;
            }
            tlb.remove_tlb_entry(vpn);
            let pfn = pte.pfn();
            if self.frame(pfn).flags & pg::ZERO != 0 {
                continue;
            }
            if self.frame(pfn).flags & pg::ANON == 0 {
                if pte.dirty() {
                    self.folio_mark_dirty(cpu, pfn);
                }
                file_pages += 1;
            }
            self.page_remove_rmap(mm, pfn);
            if self.tlb_remove_page(tlb, pfn) {
                // force_flush: the batch is full; flush and free before going on.
                self.tlb_flush_mmu(cpu, tlb);
            }
        }
        // Under the PTE table's lock (pte_offset_map_lock).
        self.lock_section(cpu, LockId::Ptl(mm.0, start >> 9), Mode::Exclusive, self.p.pte_update_ns * n as f64);
        self.charge_sys(cpu, self.p.pte_update_ns * n as f64 + self.p.file_rmap_ns * file_pages as f64);
    }

    /// `unmap_vmas()`: zap every VMA's part of `[start, end)`.
    pub fn unmap_vmas(&mut self, cpu: CpuId, tlb: &mut MmuGather, start: u64, end: u64, reclaim_pt: bool) {
        let ranges: Vec<(u64, u64)> = self
            .mm(tlb.mm)
            .vmas
            .range(..end)
            .filter(|(_, v)| v.end > start)
            .map(|(_, v)| (v.start.max(start), v.end.min(end)))
            .collect();
        for (s, e) in ranges {
            self.zap_pte_range(cpu, tlb, s, e, reclaim_pt);
            if self.p.luf == crate::mm::luf::Luf::V12 {
                // LUF v12: tlb_end_vma() flushes what the mm's batch still owes.
                let mm = tlb.mm;
                self.luf_abandon(cpu, crate::mm::luf::Abandon::TlbEndVma, Some(mm), None);
            }
        }
    }

    /// `free_pgtables()` for a hole `[start, end)` (vpns) between `floor` and `ceiling` (byte
    /// addresses of the neighbouring VMAs, 0 = none).
    pub fn free_pgtables(&mut self, tlb: &mut MmuGather, start: u64, end: u64, floor: u64, ceiling: u64) {
        let mm = tlb.mm;
        let freed = self.mm_mut(mm).pgtable.free_pgd_range(start << PAGE_SHIFT, end << PAGE_SHIFT, floor, ceiling);
        self.mm_mut(mm).nr_ptes -= freed.len() as u64;
        self.pgtables_changed(-(freed.len() as i64));
        for pfn in freed {
            tlb.free_table(start, pfn);
        }
    }

    /// `copy_page_range()` for fork: share every mapped PTE with the child; COW mappings are
    /// write-protected in both (copy_present_pte → ptep_set_wrprotect). Shared file mappings
    /// without anon pages are not copied (vma_needs_copy()); the child faults them in.
    pub fn copy_page_range(&mut self, cpu: CpuId, src: MmId, dst: MmId, vma: &Vma) -> Result<(), FaultError> {
        if vma.shared() {
            return Ok(());
        }
        let mut vpns = Vec::new();
        self.mm(src).pgtable.for_each_mapped(vma.start, vma.end, |v, _| vpns.push(v));
        let n = vpns.len();
        for vpn in vpns {
            self.pte_alloc(cpu, dst, vpn)?;
            // Read the source PTE only now, as copy_pte_range() does under the PTE lock: the
            // table allocation above may have reclaimed (and so unmapped) the page it maps.
            let pte = self.mm(src).pgtable.get(vpn);
            if pte.none() {
                continue;
            }
            if pte.is_swap() {
                // copy_nonpresent_pte(): swap_duplicate().
                self.swap_dup(pte.swap_slot());
                self.mm_mut(dst).pgtable.set(vpn, pte);
                continue;
            }
            let mut child = pte;
            if vma.is_cow() && pte.write() {
                let wp = pte.with(0, Pte::RW);
                self.mm_mut(src).pgtable.set(vpn, wp);
                child = wp;
            }
            // The child's PTE is old (not young), as in copy_present_pte().
            child = child.with(0, Pte::ACCESSED);
            let pfn = pte.pfn();
            if self.frame(pfn).flags & pg::ZERO == 0 {
                let f = self.frame_mut(pfn);
                f.mapcount += 1;
                f.refcount += 1;
                f.flags &= !pg::ANON_EXCLUSIVE;
                let anon = f.flags & pg::ANON != 0;
                let m = self.mm_mut(dst);
                if anon { m.rss_anon += 1 } else { m.rss_file += 1 }
            }
            self.mm_mut(dst).pgtable.set(vpn, child);
        }
        self.charge_sys(cpu, self.p.pte_update_ns * n as f64);
        Ok(())
    }
}
