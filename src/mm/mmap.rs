//! VMAs and the mmap family (mm/mmap.c, mm/vma.c, Linux 6.18): `find_vma`, `do_mmap` with
//! top-down `get_unmapped_area`, `do_vmi_munmap` → `vms_complete_munmap_vmas` →
//! `unmap_region` (unmap_vmas + free_pgtables between the neighbours + tlb_finish_mmu).
//!
//! Departures: VMAs are kept in a BTreeMap (the VMA-lookup work models the rbtree, vmacache and
//! maple tree costs); adjacent compatible VMAs are not merged; no guard gap or ASLR (the layout is
//! deterministic).

use crate::mm::mmu_gather::MmuGather;
use crate::sim::{vm, Backing, CpuMask, Mm, Sim, Vma};
use crate::kernel::locking::Mode;
use crate::types::*;

/// Top of the mmap area (vpn): 128 TiB minus the stack gap, as on x86-64 without ASLR.
pub const MMAP_BASE: u64 = 0x7fff_f7ff_f000 >> PAGE_SHIFT;

/// `find_vma()`: the first VMA with end > vpn.
pub fn find_vma_in(mm: &Mm, vpn: u64) -> Option<&Vma> {
    // The VMA starting at or below vpn, else the next one up.
    if let Some((_, v)) = mm.vmas.range(..=vpn).next_back() {
        if v.end > vpn {
            return Some(v);
        }
    }
    mm.vmas.range(vpn + 1..).next().map(|(_, v)| v)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prot {
    None,
    Read,
    ReadWrite,
}

impl Prot {
    pub fn vm_flags(self) -> u32 {
        match self {
            Prot::None => 0,
            Prot::Read => vm::READ,
            Prot::ReadWrite => vm::READ | vm::WRITE,
        }
    }
}

impl Sim {
    /// `mm_alloc()` at build time, when memory is still free.
    pub fn mm_alloc(&mut self, cpu: CpuId) -> MmId {
        self.try_mm_alloc(cpu).expect("simulator bug: no memory for a PGD while building")
    }

    /// `mm_alloc()`: a new address space with an empty page table. The PGD comes from the
    /// allocator's slow path (it may reclaim); None when even that fails (fork/exec: -ENOMEM).
    pub fn try_mm_alloc(&mut self, cpu: CpuId) -> Option<MmId> {
        let id = MmId(self.mms.len() as u32);
        let node = self.cpu_node(cpu);
        let pgd = self.alloc_pages(cpu, node)?;
        self.frames[pgd.0 as usize].flags |= crate::sim::pg::PGTABLE;
        let ctx_id = self.next_ctx_id;
        self.next_ctx_id += 1;
        self.mms.push(Some(Mm {
            id,
            vmas: Default::default(),
            pgtable: crate::mm::pgtable::PageTable::new(pgd),
            cpumask: CpuMask::new(self.cpus.len()),
            ctx_id,
            tlb_gen: 0,
            next_trim_cpumask: 0,
            tlb_flush_batched_pending: 0,
            tlb_flush_batched_flushed: 0,
            users: 0,
            // init_numa_balancing(): the first scan waits scan_delay.
            numa_next_scan: self.now(cpu) + self.p.numa_scan_delay_ns,
            numa_scan_offset: 0,
            numa_scan_seq: 0,
            mmap_base: MMAP_BASE,
            regions: Default::default(),
            rss_anon: 0,
            rss_file: 0,
            nr_ptes: 1,
            vma_lookup: Default::default(),
        }));
        self.pgtables_changed(1);
        Some(id)
    }

    /// Top-down `get_unmapped_area()`: the highest gap below mmap_base that fits.
    fn get_unmapped_area(&self, mm: MmId, pages: u64) -> Option<u64> {
        let m = self.mm(mm);
        let mut top = m.mmap_base;
        for (_, v) in m.vmas.range(..m.mmap_base).rev() {
            if v.end <= top && top - v.end >= pages {
                return Some(top - pages);
            }
            top = top.min(v.start);
        }
        top.checked_sub(pages).filter(|&s| s >= 0x10)
    }

    /// `do_mmap()`: returns the start vpn. `at` is MAP_FIXED_NOREPLACE (fails if occupied).
    ///
    /// Under mmap_lock for write (mmap_write_lock_killable in vm_mmap_pgoff).
    pub fn do_mmap(&mut self, cpu: CpuId, mm: MmId, pages: u64, prot: Prot, shared: bool, backing: Backing, at: Option<u64>) -> Result<u64, String> {
        self.mm_syscall(cpu, mm, Mode::Exclusive, |s| s.do_mmap_locked(cpu, mm, pages, prot, shared, backing, at))
    }

    fn do_mmap_locked(&mut self, cpu: CpuId, mm: MmId, pages: u64, prot: Prot, shared: bool, backing: Backing, at: Option<u64>) -> Result<u64, String> {
        self.charge_sys(cpu, self.p.vma_op_ns);
        let start = match at {
            Some(a) => {
                // MAP_FIXED_NOREPLACE: find_vma_intersection() (mm/vmacache.rs).
                if self.find_vma_intersection(cpu, mm, a, a + pages).is_some() {
                    return Err(format!("MAP_FIXED_NOREPLACE at {} overlaps an existing mapping (EEXIST)", Vpn(a).addr()));
                }
                a
            }
            None => self.get_unmapped_area(mm, pages).ok_or("no room in the address space (ENOMEM)")?,
        };
        let mut flags = prot.vm_flags();
        if shared {
            flags |= vm::SHARED;
        }
        if self.p.luf == crate::mm::luf::Luf::V10 && flags & vm::WRITE != 0 {
            // LUF v10: a writable mapping gives up every deferred flush (mm/luf.rs).
            self.luf_abandon(cpu, crate::mm::luf::Abandon::MmapWrite, None, None);
        }
        let vma = Vma { start, end: start + pages, flags, backing, anon_vma: None };
        if let Backing::File { file, .. } = backing {
            self.files[file.0 as usize].i_mmap.push((mm, start));
        }
        self.mm_mut(mm).vmas.insert(start, vma);
        self.vma_linked(mm, start);
        Ok(start)
    }

    /// Split the VMA containing `at` so that a VMA boundary falls at `at` (`__split_vma`).
    pub fn split_vma_at(&mut self, mm: MmId, at: u64) {
        let m = self.mm_mut(mm);
        let Some((&s, v)) = m.vmas.range(..at).next_back() else { return };
        if v.end <= at {
            return;
        }
        let mut hi = v.clone();
        hi.backing = match v.backing {
            Backing::File { file, pgoff } => Backing::File { file, pgoff: pgoff + (at - s) },
            b => b,
        };
        hi.start = at;
        m.vmas.get_mut(&s).unwrap().end = at;
        m.vmas.insert(at, hi.clone());
        self.vma_split(mm, at);
        if let Backing::File { file, .. } = hi.backing {
            self.files[file.0 as usize].i_mmap.push((mm, at));
        }
    }

    /// `do_munmap()` of `[start, start+pages)`.
    ///
    /// Under mmap_lock for write (the whole unmap, its TLB flush included).
    pub fn do_munmap(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64) {
        self.mm_syscall(cpu, mm, Mode::Exclusive, |s| s.do_munmap_locked(cpu, mm, start, pages))
    }

    fn do_munmap_locked(&mut self, cpu: CpuId, mm: MmId, start: u64, pages: u64) {
        self.charge_sys(cpu, self.p.vma_op_ns);
        let end = start + pages;
        // do_vmi_munmap() starts with find_vma (mm/vmacache.rs).
        self.find_vma(cpu, mm, start);
        self.split_vma_at(mm, start);
        self.split_vma_at(mm, end);
        let doomed: Vec<u64> = self.mm(mm).vmas.range(start..end).map(|(&s, _)| s).collect();
        if doomed.is_empty() {
            return;
        }
        // unmap_region(): zap, then free the page tables of the hole between the neighbours.
        let mut tlb = MmuGather::new(mm, false);
        tlb.lazy = self.latr.is_some();
        self.unmap_vmas(cpu, &mut tlb, start, end, false);
        for s in &doomed {
            let v = self.mm_mut(mm).vmas.remove(s).unwrap();
            self.vma_unlinked(mm, *s);
            if let Backing::File { file, .. } = v.backing {
                self.files[file.0 as usize].i_mmap.retain(|&(m, vs)| !(m == mm && vs == *s));
            }
        }
        // detach_vmas_to_be_unmapped(): kill the VMA caches.
        self.vmacache_invalidate(mm);
        let m = self.mm(mm);
        let floor = m.vmas.range(..start).next_back().map(|(_, v)| v.end << PAGE_SHIFT).unwrap_or(0);
        let ceiling = m.vmas.range(end..).next().map(|(_, v)| v.start << PAGE_SHIFT).unwrap_or(0);
        self.free_pgtables(&mut tlb, start, end, floor, ceiling);
        self.tlb_finish_mmu(cpu, tlb);
    }
}
