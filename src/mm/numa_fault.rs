//! The NUMA hint fault, `do_numa_page()` (mm/memory.c, Linux 6.18; mechanisms.md §2), with seed
//! 001's delayed mapping (Huang Ying, 5.13, commit b99a342d4f11) behind `kernel.numa_delayed_map`.
//!
//! A fault on a PROT_NONE PTE of an accessible VMA is a hint fault. `numa_migrate_check()`
//! counts it and asks `mpol_misplaced()` for a target node. With a target:
//! - 5.13+ (delayed mapping): the folio is isolated and the PTE **left PROT_NONE**; the fault
//!   drops the PTE lock and migrates. The scanner flushed the PROT_NONE change, so no CPU can
//!   cache the translation and the migration's unmap needs no shootdown (`pte_accessible()` is
//!   false). If migration fails and the PTE is unchanged, it is made accessible (`out_map`).
//! - before 5.13: the PTE is made accessible first, then the folio is migrated; other threads
//!   may fill TLB entries from it meanwhile, so the unmap must shoot them down.
//!
//! The fault is two steps of the faulting task (step 1 here, step 2 [`Sim::numa_migrate_step`]
//! at its next step), so other CPUs run while the migration is in flight, as they do in Linux
//! after the PTE lock is dropped; the faulting access is retried after step 2
//! (`FaultError::Again`).

use crate::check::Inject;
use crate::kernel::numa_balancing::{NumaMigrate, TNF_FAULT_LOCAL, TNF_MIGRATED, TNF_MIGRATE_FAIL, TNF_NO_GROUP, TNF_SHARED};
use crate::mm::memory::FaultError;
use crate::mm::mprotect::can_change_pte_writable;
use crate::mm::pgtable::Pte;
use crate::mm::vmstat::VmEvent;
use crate::sim::{pg, Sim, Vma};
use crate::types::*;

impl Sim {
    /// `numa_rebuild_single_mapping()` (out_map): make the PROT_NONE PTE accessible again, young,
    /// writable if it may be (`pte_modify(old, vm_page_prot)` plus `can_change_pte_writable`).
    fn numa_rebuild_mapping(&mut self, mm: MmId, vpn: u64, old: Pte, writable: bool) {
        let pte = old.with(Pte::PRESENT | Pte::ACCESSED | if writable { Pte::RW } else { 0 }, Pte::PROTNONE);
        self.mm_mut(mm).pgtable.set(vpn, pte);
    }

    /// `do_numa_page()`, step 1. Returns `Err(Again)` when a migration was started: the task's
    /// next step runs it, and the access is retried after that.
    pub fn do_numa_page(&mut self, cpu: CpuId, mm: MmId, vma: &Vma, vpn: u64, pte: Pte) -> Result<(), FaultError> {
        let pfn = pte.pfn();
        let f = *self.frame(pfn);
        let writable = can_change_pte_writable(vma, pte, &f);
        let cur = self.cpus[cpu.0 as usize].current;
        let (Some(t), false) = (cur, f.flags & pg::ZERO != 0) else {
            self.numa_rebuild_mapping(mm, vpn, pte, writable);
            return Ok(());
        };
        // numa_migrate_check().
        let nid = self.pfn_to_nid(pfn) as u32;
        let mut flags = if writable { 0 } else { TNF_NO_GROUP };
        if f.mapcount > 1 && vma.shared() {
            flags |= TNF_SHARED;
        }
        self.vmstat.count(VmEvent::NUMA_HINT_FAULTS);
        self.mark("numa hint fault");
        if nid == self.cpu_node(cpu).0 {
            self.vmstat.count(VmEvent::NUMA_HINT_FAULTS_LOCAL);
            flags |= TNF_FAULT_LOCAL;
        }
        // For memory tiering the last_cpupid bits of a lower-tier folio hold its access time:
        // the fault reports the default (-1, here 0) instead.
        let last_cpupid = if self.folio_use_access_time(pfn) { 0 } else { self.last_cpupid.get(pfn) };
        let target = self.mpol_misplaced(cpu, t, pfn);
        let Some(target) = target else {
            self.numa_rebuild_mapping(mm, vpn, pte, writable);
            self.task_numa_fault(t, last_cpupid, nid, 1, flags);
            return Ok(());
        };
        // migrate_misplaced_folio_prepare(): isolate under the PTE lock (6.10+; the older
        // numamigrate_isolate_folio() did the same a little later).
        if !self.migrate_misplaced_folio_prepare(cpu, vma, pfn, NodeId(target)) {
            self.numa_rebuild_mapping(mm, vpn, pte, writable);
            self.task_numa_fault(t, last_cpupid, nid, 1, flags | TNF_MIGRATE_FAIL);
            return Ok(());
        }
        if !self.p.numa_delayed_map || self.inject == Inject::NumaMapBeforeMigrate {
            // Before 5.13: the PTE is live again before the migration starts.
            self.numa_rebuild_mapping(mm, vpn, pte, writable);
        }
        self.task_mut(t).numa.pending = Some(NumaMigrate { mm, vpn, pfn, target: NodeId(target), orig_pte: pte, last_cpupid, nid, flags, writable });
        Err(FaultError::Again)
    }

    /// `do_numa_page()`, step 2 (the faulting task's next step): `migrate_misplaced_folio()`;
    /// on failure with delayed mapping, map the PTE if it is still the one the fault saw.
    pub fn numa_migrate_step(&mut self, cpu: CpuId, t: Tid) -> bool {
        let Some(w) = self.task_mut(t).numa.pending.take() else { return false };
        self.kfn_enter(cpu, crate::kernel::profile::KFn::DoNumaPage);
        if self.inject == Inject::NumaMapBeforeMigrate {
            // The injected bug: the unmap trusts the PTE the hint fault saw (PROT_NONE, flushed
            // by the scanner), although the PTE was made accessible before the migration.
            self.numa_assume_inaccessible = Some((w.mm, w.vpn));
        }
        let migrated = self.migrate_misplaced_folio(cpu, w.pfn, w.target);
        self.numa_assume_inaccessible = None;
        self.latr_note_numa_migration(migrated);
        let (mut flags, mut nid) = (w.flags, w.nid);
        if migrated {
            flags |= TNF_MIGRATED;
            nid = w.target.0;
        } else {
            flags |= TNF_MIGRATE_FAIL;
            let live = self.mms[w.mm.0 as usize].is_some();
            if live && self.p.numa_delayed_map && self.mm(w.mm).pgtable.get(w.vpn) == w.orig_pte {
                self.numa_rebuild_mapping(w.mm, w.vpn, w.orig_pte, w.writable);
            }
        }
        if self.task(t).mm == Some(w.mm) {
            self.task_numa_fault(t, w.last_cpupid, nid, 1, flags);
        }
        self.kfn_exit(cpu);
        true
    }
}
