//! The page cache (mm/filemap.c): `filemap_fault()` finds or reads a file page.
//!
//! Readahead (read-around on a miss, async windows at PG_readahead markers) is in
//! src/mm/readahead.rs. Departure from Linux: files are sized when created by a workload
//! (`mmap ... file NAME`), with contents that never change unless written through a mapping.

use crate::kernel::locking::{LockId, Mode};
use crate::kernel::profile::KFn;
use crate::mm::memory::FaultError;
use crate::mm::vmstat::VmEvent;
use crate::mm::workingset::Slot;
use crate::sim::{pg, File, Sim};
use crate::types::*;

/// `Frame::mapping` of a page the kernel took for itself (`kalloc`): owned by the kernel, like
/// the hugetlb and vmemmap markers.
pub const SLAB_MAPPING: u32 = u32::MAX - 3;

impl Sim {
    /// Find a file by name, creating it (or growing it) to at least `pages` pages.
    pub fn file_get_or_create(&mut self, name: &str, pages: u64) -> FileId {
        self.file_get_or_create_sparse(name, pages, false)
    }

    /// As [`Sim::file_get_or_create`]; a new `sparse` file is all holes (reads need no I/O),
    /// like vm-scalability's `truncate -s` files.
    pub fn file_get_or_create_sparse(&mut self, name: &str, pages: u64, sparse: bool) -> FileId {
        let id = match self.files.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.files.push(File { name: name.to_string(), pages: Vec::new(), i_mmap: Vec::new(), sparse, size: 0, ra: Default::default() });
                self.files.len() - 1
            }
        };
        // The page cache's slots grow as pages are faulted in (filemap_fault), not with the
        // mapping: a sparse 256 TiB file costs nothing until it is read. i_size bounds
        // readahead.
        let f = &mut self.files[id];
        f.size = f.size.max(pages);
        FileId(id as u32)
    }

    /// `filemap_fault()`: the page-cache frame for `pgoff`, read from the device on a miss
    /// (a major fault). The page cache holds one reference.
    pub fn filemap_fault(&mut self, cpu: CpuId, file: FileId, pgoff: u64) -> Result<Pfn, FaultError> {
        self.kfn_enter(cpu, KFn::FilemapFault);
        let r = self.filemap_fault_body(cpu, file, pgoff);
        self.kfn_exit(cpu);
        r
    }

    fn filemap_fault_body(&mut self, cpu: CpuId, file: FileId, pgoff: u64) -> Result<Pfn, FaultError> {
        let limit = self.page_cache_limit();
        if pgoff >= limit {
            return Err(FaultError::Segv(Box::new(format!("file offset {pgoff} pages is beyond what mmsim's page cache indexes on this machine ({limit} pages)"))));
        }
        if let Some(pfn) = self.files[file.0 as usize].page(pgoff) {
            // Found: maybe start the next readahead window, then wait for the page's I/O.
            self.do_async_mmap_readahead(cpu, file, pgoff, pfn);
            self.wait_on_inflight(cpu, file, pgoff);
            return Ok(pfn);
        }
        let sparse = self.files[file.0 as usize].sparse;
        if !sparse {
            self.vmstat.count(VmEvent::PGMAJFAULT);
        }
        if let Some((start, size, async_size)) = self.do_sync_mmap_readahead(file, pgoff) {
            // Read-around: the window holds pgoff, which is not cached.
            if let Some(pfn) = self.page_cache_ra(cpu, file, start, size, async_size, Some(pgoff)) {
                return Ok(pfn);
            }
        }
        let pfn = self.page_cache_alloc_add(cpu, file, pgoff).ok_or(FaultError::Oom)?;
        if sparse {
            // A hole reads as zeroes: no I/O, just a cleared page.
            let clear = self.page_op_ns(cpu, pfn, false);
            self.charge_sys(cpu, self.p.page_alloc_ns);
            self.kfn_enter(cpu, KFn::ClearPage);
            self.charge_sys(cpu, clear);
            self.kfn_exit(cpu);
        } else {
            self.charge_sys(cpu, self.p.page_alloc_ns);
            let io = self.submit_read(cpu, crate::block::Dev::File, 1);
            self.io_wait(cpu, io);
        }
        Ok(pfn)
    }

    /// The page cache is a flat vector of slots: offsets it could not index within the host's
    /// means (64 slots per simulated frame, at least 2^20) are refused as a fault error.
    pub(crate) fn page_cache_limit(&self) -> u64 {
        (self.frames.len() as u64 * 64).max(1 << 20)
    }

    /// `filemap_alloc_folio()` + `filemap_add_folio()`: a new page-cache frame for `pgoff`, in
    /// the xarray and on this CPU's lru_add batch (the caller charges the allocation and the
    /// read). None when memory is exhausted.
    pub(crate) fn page_cache_alloc_add(&mut self, cpu: CpuId, file: FileId, pgoff: u64) -> Option<Pfn> {
        let node = self.cpu_node(cpu);
        let pfn = self.alloc_pages(cpu, node)?;
        if let Some(shadow) = self.page_cache_link(pfn, file, pgoff) {
            // filemap_add_folio(): a refault of an evicted folio (mm/workingset.rs), decided
            // before folio_add_lru() so that an activated folio goes to the active list.
            self.workingset_refault(pfn, shadow);
        }
        // filemap_add_folio(): the xarray store under i_pages (xa_lock_irq).
        let work = self.miss_ns(cpu, node);
        self.lock_section(cpu, LockId::IPages(file.0), Mode::Exclusive, work);
        self.charge_sys(cpu, work);
        // The rest of filemap_add_folio()'s per-folio work (memcg charge, statistics), outside
        // the lock (cost.filemap_add_folio_ns).
        self.charge_sys(cpu, self.p.filemap_add_folio_ns);
        // filemap_add_folio() → folio_add_lru(): via this CPU's lru_add batch.
        self.folio_add_lru(cpu, pfn);
        Some(pfn)
    }

    /// A new frame becomes `file`'s page at `pgoff` (the frame's mapping and index, the xarray
    /// slot); returns the shadow entry the slot held, if any.
    fn page_cache_link(&mut self, pfn: Pfn, file: FileId, pgoff: u64) -> Option<crate::mm::workingset::Shadow> {
        let f = self.frame_mut(pfn);
        f.flags |= pg::FILE;
        f.mapping = file.0;
        f.set_index(pgoff);
        let shadow = self.files[file.0 as usize].shadow(pgoff);
        self.files[file.0 as usize].set_slot(pgoff, Slot::Page(pfn));
        shadow
    }

    /// `__remove_mapping()`: drop a clean, unmapped page from the page cache, leaving a shadow
    /// entry in its slot (`workingset_eviction()`: every caller is reclaim). The page cache's
    /// reference passes to the caller, who frees the frame.
    ///
    /// Under the mapping's i_pages lock with interrupts off (xa_lock_irq; 4.2's tree_lock with
    /// spin_lock_irqsave): one xarray slot store, one dependent cache miss.
    pub fn remove_from_page_cache(&mut self, cpu: CpuId, pfn: Pfn) {
        let f = *self.frame(pfn);
        debug_assert!(f.flags & pg::FILE != 0 && f.mapcount == 0);
        self.kfn_enter(cpu, KFn::RemoveMapping);
        let work = self.miss_ns(cpu, self.pfn_node(pfn));
        self.lock_section(cpu, LockId::IPages(f.mapping), Mode::Exclusive, work);
        self.charge_sys(cpu, work);
        // The rest of reclaiming the folio (folio lock and checks, statistics, memcg uncharge),
        // outside the lock (cost.shrink_folio_ns).
        self.charge_sys(cpu, self.p.shrink_folio_ns);
        self.kfn_exit(cpu);
        let shadow = self.workingset_eviction(pfn);
        self.files[f.mapping as usize].set_slot(f.index(), Slot::Shadow(shadow));
        self.frame_mut(pfn).flags &= !pg::FILE;
    }

    /// `generic_perform_write()` of whole pages `[0, pages)` of `file` (write(2)): each page is
    /// found or added to the page cache (no read: the page is overwritten whole), copied into
    /// and marked dirty. LUF v12's `mapping_write_begin()` first flushes what the file's batch
    /// still owes, under the global luf_batch lock (read); mm/luf.rs.
    pub fn generic_perform_write(&mut self, cpu: CpuId, file: FileId, pages: u64) -> Result<(), FaultError> {
        for pgoff in 0..pages {
            if self.p.luf == crate::mm::luf::Luf::V12 {
                self.lock_section(cpu, LockId::Luf, Mode::Shared, self.p.pte_update_ns);
                self.luf_abandon(cpu, crate::mm::luf::Abandon::FileWrite, None, Some(file.0));
            }
            let cached = self.files[file.0 as usize].page(pgoff);
            let pfn = match cached {
                Some(p) => p,
                None => {
                    if pgoff >= self.page_cache_limit() {
                        return Err(FaultError::Segv(Box::new(format!("file offset {pgoff} pages is beyond the page cache's index"))));
                    }
                    let p = self.page_cache_alloc_add(cpu, file, pgoff).ok_or(FaultError::Oom)?;
                    self.charge_sys(cpu, self.p.page_alloc_ns);
                    p
                }
            };
            let copy = self.page_op_ns(cpu, pfn, true);
            self.kfn_enter(cpu, KFn::CopyPage);
            self.charge_sys(cpu, copy);
            self.kfn_exit(cpu);
            self.folio_mark_dirty(cpu, pfn);
            if self.oracle.is_some() {
                self.oracle_file_write(cpu, file, pgoff, pfn);
            }
        }
        Ok(())
    }

    /// Page cache that was resident and active before the workload started: `pages` pages of a
    /// file nobody maps, put straight on node 0's active file list (at most a quarter of the
    /// node). `mmsim validate` places the host's Active(file) here, since refault activation
    /// (mm/workingset.rs) compares a refault distance with that list's length. Returns the
    /// number of pages placed.
    pub fn seed_active_page_cache(&mut self, pages: u64) -> u64 {
        let n = pages.min(self.nodes[0].nr_pages as u64 / 4);
        if n == 0 {
            return 0;
        }
        let file = self.file_get_or_create("<resident page cache>", n);
        for pgoff in 0..n {
            let Some(pfn) = self.alloc_pages_node_nocheck(NodeId(0), 0) else { return pgoff };
            self.page_cache_link(pfn, file, pgoff);
            self.frame_mut(pfn).flags |= pg::ACTIVE;
            self.lru_add(pfn);
        }
        n
    }

    /// Pages the kernel allocates for itself (a slab cache growing: Matthew Wilcox's LUF case,
    /// docs/luf.md), held to the end of the run.
    pub fn kalloc_pages(&mut self, cpu: CpuId, pages: u64) -> Result<(), FaultError> {
        let node = self.cpu_node(cpu);
        for _ in 0..pages {
            let pfn = self.alloc_pages(cpu, node).ok_or(FaultError::Oom)?;
            self.charge_sys(cpu, self.p.page_alloc_ns);
            self.frame_mut(pfn).mapping = SLAB_MAPPING;
            self.slab_pages.push(pfn);
        }
        Ok(())
    }
}
