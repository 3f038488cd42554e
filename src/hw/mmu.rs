//! The MMU: a user access looks the TLB up, walks the page table on a miss, sets the accessed and
//! dirty bits, and raises a page fault when the PTE does not allow the access.
//!
//! x86 rules kept: a write through a cached entry whose dirty bit is clear re-walks the page table
//! to set the PTE's dirty bit and faults if the PTE is no longer present and writable (the
//! guarantee seed 002's safety argument relies on); a write through a read-only entry faults; a
//! page fault invalidates the faulting address's entry on that CPU.
//! Walk cost: `cost.walk_base_ns` plus `cost.walk_pte_miss_fraction` of the latency from the
//! CPU's node to the node holding the PTE page.

use crate::hw::tlb::{L1dProbe, Level, F_DIRTY, F_WRITE};
use crate::mm::memory::FaultError;
use crate::mm::pgtable::{idx, Pte};
use crate::sim::Sim;
use crate::types::*;

impl Sim {
    /// One user load, store or instruction fetch at `vpn` by the task running on `cpu`.
    #[inline(always)]
    pub fn access(&mut self, cpu: CpuId, mm: MmId, vpn: u64, write: bool, instr: bool) -> Result<(), FaultError> {
        let ci = cpu.0 as usize;
        if !instr {
            let c = &mut self.cpus[ci];
            if write { c.stats.dtlb_stores += 1 } else { c.stats.dtlb_loads += 1 }
            let asid = c.tlbstate.loaded_mm_asid;
            // With the oracle on, every access takes the slow path, where it is checked.
            if self.oracle.is_none() {
                match c.tlb.probe_l1d(asid, vpn, write) {
                    L1dProbe::Hit => {
                        let ns = self.p.hit_l1_ns;
                        c.clock += ns;
                        c.stats.user_ns += ns;
                        return Ok(());
                    }
                    // The L1 4 KiB array holds nothing for vpn: do not probe it again.
                    L1dProbe::Miss => return self.access_slow_from(cpu, mm, vpn, write, instr, true),
                    L1dProbe::Slow => {}
                }
            }
        }
        self.access_slow(cpu, mm, vpn, write, instr)
    }

    /// [`Sim::access`] for workloads that cannot replay an access: a fault that started kernel
    /// work for the task's next step (`FaultError::Again`, a NUMA hint fault's migration) drops
    /// the access instead.
    pub fn access_or_drop(&mut self, cpu: CpuId, mm: MmId, vpn: u64, write: bool, instr: bool) -> Result<(), FaultError> {
        match self.access(cpu, mm, vpn, write, instr) {
            Err(FaultError::Again) => Ok(()),
            r => r,
        }
    }

    /// Everything but an L1 hit: STLB, dirty-bit re-walk, page walk, fault.
    #[inline(never)]
    fn access_slow(&mut self, cpu: CpuId, mm: MmId, vpn: u64, write: bool, instr: bool) -> Result<(), FaultError> {
        self.access_slow_from(cpu, mm, vpn, write, instr, false)
    }

    /// [`Sim::access_slow`]; `l1_4k_missed`: a data access whose L1 4 KiB probe already missed.
    #[inline(never)]
    pub(crate) fn access_slow_from(&mut self, cpu: CpuId, mm: MmId, vpn: u64, write: bool, instr: bool, l1_4k_missed: bool) -> Result<(), FaultError> {
        let ci = cpu.0 as usize;
        let asid = self.cpus[ci].tlbstate.loaded_mm_asid;
        let hit = if l1_4k_missed && !instr { self.cpus[ci].tlb.lookup_data_after_l1_4k_miss(asid, vpn) } else { self.cpus[ci].tlb.lookup(asid, vpn, instr) };
        if let Some((e, level, huge)) = hit {
            let cost = if level == Level::Stlb { self.p.hit_stlb_ns } else { self.p.hit_l1_ns };
            if !write || e.flags & (F_WRITE | F_DIRTY) == F_WRITE | F_DIRTY {
                if self.oracle.is_some() {
                    self.oracle_hit(cpu, mm, vpn, e, write);
                }
                self.charge_user_ns(cpu, cost);
                return Ok(());
            }
            let cost = cost as f64;
            if e.flags & F_WRITE != 0 {
                // Clean writable entry: the hardware re-walks to set the dirty bit.
                let pte = self.mm(mm).pgtable.get(vpn);
                if pte.present() && pte.write() {
                    self.mm_mut(mm).pgtable.set(vpn, pte.with(Pte::DIRTY | Pte::ACCESSED, 0));
                    self.cpus[ci].tlb.set_dirty(asid, vpn, huge);
                    if self.oracle.is_some() {
                        self.oracle_hit(cpu, mm, vpn, e, write);
                    }
                    self.charge_user(cpu, cost + self.walk_cost(cpu, mm, vpn));
                    return Ok(());
                }
            }
            // #PF: the faulting translation is dropped from this CPU's TLB.
            self.cpus[ci].tlb.flush_one(asid, vpn);
            self.charge_user(cpu, cost);
        }
        self.tlb_miss(cpu, mm, vpn, write, instr)
    }

    /// Prefetch the host cache line of `vpn`'s PTE in `mm`, if its table exists: a hint for a
    /// workload that knows its next access (`SynthState::peek_page`). Changes nothing simulated.
    #[inline]
    pub(crate) fn prefetch_pte(&self, mm: MmId, vpn: u64) {
        if let Some(t) = self.mms[mm.0 as usize].as_ref().and_then(|m| m.pgtable.pte_table(vpn)) {
            crate::hw::prefetch(&t.ptes[idx(vpn, 0)]);
            crate::hw::prefetch(&t.pfn);
        }
    }

    fn walk_cost(&self, cpu: CpuId, mm: MmId, vpn: u64) -> f64 {
        let lat = match self.mm(mm).pgtable.pte_table(vpn) {
            Some(t) => {
                self.node_latency[self.cpu_node(cpu).0 as usize][self.pfn_to_nid(t.pfn)]
            }
            None => self.p.local_latency_ns,
        };
        self.p.walk_base_ns + self.p.walk_pte_miss_fraction * lat
    }

    /// A walk's miss as perf counts it: iTLB-load-misses, dTLB-store-misses or dTLB-load-misses.
    #[inline(always)]
    pub(crate) fn count_tlb_miss(&mut self, cpu: CpuId, write: bool, instr: bool) {
        let st = &mut self.cpus[cpu.0 as usize].stats;
        if instr {
            st.itlb_misses += 1;
        } else if write {
            st.dtlb_store_misses += 1;
        } else {
            st.dtlb_load_misses += 1;
        }
    }

    /// The end of a successful walk: fill this CPU's TLB from the present `pte` (already marked
    /// accessed, and dirty for a write), its write and dirty bits as the entry's flags.
    #[inline(always)]
    pub(crate) fn tlb_fill_pte(&mut self, cpu: CpuId, mm: MmId, vpn: u64, pte: Pte, write: bool, instr: bool) {
        let ci = cpu.0 as usize;
        let mut flags = 0;
        if pte.write() {
            flags |= F_WRITE;
        }
        if pte.dirty() {
            flags |= F_DIRTY;
        }
        let asid = self.cpus[ci].tlbstate.loaded_mm_asid;
        self.cpus[ci].tlb.fill(asid, vpn, false, pte.pfn(), flags, instr);
        if self.oracle.is_some() {
            self.oracle_fill(cpu, mm, vpn, pte.pfn(), write);
        }
    }

    /// STLB miss: walk, fill, or fault and retry.
    #[cold]
    fn tlb_miss(&mut self, cpu: CpuId, mm: MmId, vpn: u64, write: bool, instr: bool) -> Result<(), FaultError> {
        let ci = cpu.0 as usize;
        self.count_tlb_miss(cpu, write, instr);
        // At most: a not-present fault, then a write-protect fault, then success.
        for _ in 0..4 {
            self.cpus[ci].stats.page_walks += 1;
            // One descent of the page table serves the walk's cost, the PTE read and the A/D
            // update (as `walk_cost`, `PageTable::get` and `PageTable::set` would, in turn).
            // The walk's user time: `Sim::walk_ns`, by the node of the PTE page (the last
            // column: no PTE table).
            let walks = &self.walk_ns[self.cpus[ci].node.0 as usize];
            let m = self.mms[mm.0 as usize].as_mut().expect("simulator bug: dead mm");
            let (walk, slot) = match m.pgtable.pte_table_mut(vpn) {
                Some(t) => (walks[self.node_map.nid(t.pfn.0)], Some(&mut t.ptes[idx(vpn, 0)])),
                None => (walks[walks.len() - 1], None),
            };
            let pte = slot.as_deref().copied().unwrap_or(Pte::NONE);
            if pte.present() && (!write || pte.write()) {
                let mut set = Pte::ACCESSED;
                if write {
                    set |= Pte::DIRTY;
                }
                let pte = pte.with(set, 0);
                // A present PTE stays non-none, so the table's `used` count is unchanged.
                *slot.expect("a present PTE has a table") = pte;
                self.charge_user_ns(cpu, walk);
                self.tlb_fill_pte(cpu, mm, vpn, pte, write, instr);
                return Ok(());
            }
            if pte.mapped() {
                // The fault will read the folio's frame (do_numa_page, do_wp_page) and a hint
                // fault its last_cpupid: start the host's cache misses on them now, under the
                // VMA lookup and the PTE lock.
                self.prefetch_frame(pte.pfn().0);
                self.last_cpupid.prefetch(pte.pfn());
            }
            self.charge_user_ns(cpu, walk);
            self.handle_mm_fault(cpu, mm, vpn, write, instr)?;
        }
        panic!("simulator bug: fault at {} did not resolve", Vpn(vpn).addr())
    }
}
