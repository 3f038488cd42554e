//! NUMA hinting on the mm side (mm/mempolicy.c, Linux 6.18): `mpol_misplaced()` for the default
//! policy with MPOL_F_MORON (NUMA balancing moves memory towards the CPU that touches it).
//! `change_prot_numa()` is `change_pte_range()` in ChangeMode::ProtNuma (mm/mprotect.rs),
//! called by the scanner (kernel/numa_balancing.rs).

use crate::sim::Sim;
use crate::types::*;

impl Sim {
    /// `mpol_misplaced()`: the node the folio should move to, if any — the faulting CPU's node,
    /// when should_numa_migrate_memory() agrees and the folio is elsewhere.
    pub fn mpol_misplaced(&mut self, cpu: CpuId, t: Tid, pfn: Pfn) -> Option<u32> {
        let polnid = self.cpu_node(cpu).0;
        let curnid = self.pfn_node(pfn).0;
        if !self.should_numa_migrate_memory(cpu, t, pfn, polnid) {
            return None;
        }
        (curnid != polnid).then_some(polnid)
    }
}
