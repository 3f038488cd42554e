//! Process creation and exit (kernel/fork.c `dup_mm`/`dup_mmap`, kernel/exit.c, mm/mmap.c
//! `exit_mmap`), Linux 6.18.
//!
//! `dup_mmap` copies every VMA, shares anon_vmas with the child, write-protects COW PTEs in both
//! (copy_page_range) and ends with `flush_tlb_mm(oldmm)`: one full flush of the parent, sent to
//! every other CPU running it. `exit_mmap` zaps everything with a fullmm mmu_gather, frees all
//! page tables (freed_tables, so even lazy CPUs get the IPI) and flushes the whole mm.

use crate::mm::memory::FaultError;
use crate::mm::mmu_gather::MmuGather;
use crate::sim::{Backing, Sim};
use crate::types::*;

impl Sim {
    /// `dup_mm()`: a copy of `src` for a child process.
    pub fn dup_mm(&mut self, cpu: CpuId, src: MmId) -> Result<MmId, FaultError> {
        self.charge_sys(cpu, self.p.fork_ns);
        let child = self.try_mm_alloc(cpu).ok_or(FaultError::Oom)?;
        let vmas: Vec<_> = self.mm(src).vmas.values().cloned().collect();
        let regions = self.mm(src).regions.clone();
        let base = self.mm(src).mmap_base;
        {
            let c = self.mm_mut(child);
            c.regions = regions;
            c.mmap_base = base;
        }
        for v in vmas {
            if let Some(av) = v.anon_vma {
                // Several VMAs of one mm share an anon_vma after a split (mprotect, munmap of a
                // middle part): list the child once, or rmap_walk() would visit its PTE twice and
                // try_to_unmap() drop the mapping's reference twice. (The kernel's anon_vma_chain
                // is per VMA, but its interval-tree walk finds each mapping once.)
                let mms = &mut self.anon_vmas[av as usize].mms;
                if !mms.contains(&child) {
                    mms.push(child);
                }
            }
            if let Backing::File { file, .. } = v.backing {
                self.files[file.0 as usize].i_mmap.push((child, v.start));
            }
            self.mm_mut(child).vmas.insert(v.start, v.clone());
            self.copy_page_range(cpu, src, child, &v)?;
        }
        self.flush_tlb_mm(cpu, src);
        Ok(child)
    }

    /// `exit_mmap()` + `mmdrop()`: tear an address space down.
    pub fn exit_mmap(&mut self, cpu: CpuId, mm: MmId) {
        self.charge_sys(cpu, self.p.exit_ns);
        let mut tlb = MmuGather::new(mm, true);
        self.unmap_vmas(cpu, &mut tlb, 0, u64::MAX >> PAGE_SHIFT, false);
        let files: Vec<_> = self.mm(mm).vmas.values().filter_map(|v| match v.backing {
            Backing::File { file, .. } => Some(file),
            _ => None,
        }).collect();
        for f in files {
            self.files[f.0 as usize].i_mmap.retain(|&(m, _)| m != mm);
        }
        self.mm_mut(mm).vmas.clear();
        self.free_pgtables(&mut tlb, 0, 1 << 36, 0, 0);
        self.tlb_finish_mmu(cpu, tlb);
        for av in &mut self.anon_vmas {
            av.mms.retain(|&m| m != mm);
        }
    }

    /// The last reference to an mm is gone (mmdrop → __mmdrop): free the PGD. CPUs still holding
    /// it as lazily loaded are switched to init_mm first (x86 keeps a reference for them; here the
    /// exit flush above already moved every lazy CPU off it).
    pub fn mmdrop(&mut self, mm: MmId) {
        for ci in 0..self.cpus.len() {
            if self.cpus[ci].tlbstate.loaded_mm == Some(mm) {
                self.cpus[ci].tlbstate.loaded_mm = None;
                self.cpus[ci].tlbstate.is_lazy = false;
            }
        }
        let pgd = self.mm(mm).pgtable.pgd.pfn;
        self.put_page(pgd);
        let left = self.mm(mm).nr_ptes;
        self.pgtables_changed(-(left as i64));
        self.mms[mm.0 as usize] = None;
    }
}
