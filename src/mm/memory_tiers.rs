//! Memory tiers (mm/memory-tiers.c, Linux 6.1+; mechanisms.md §2 "Tiering (mode 2)"): nodes
//! grouped into tiers by abstract distance, the top tier, and each node's demotion targets;
//! plus the folio access time that tiering keeps in the `last_cpupid` bits (include/linux/mm.h).
//!
//! - Abstract distance: a node with CPUs is DRAM (`MEMTIER_ADISTANCE_DRAM`); a memory-only node
//!   gets `mt_perf_to_adistance()` of its performance relative to DRAM, from the machine's
//!   latency and bandwidth knobs (`machine.cpuless_latency_ns`, `machine.cpuless_bandwidth_gbps`
//!   against `machine.local_*`), as the CXL driver does from CDAT/HMAT. A tier is one
//!   `MEMTIER_CHUNK_SIZE` (1024) slice of abstract distance.
//! - Top tier: every tier up to and including the slowest tier that holds a node with CPUs
//!   (`top_tier_adistance`); `node_is_toptier()`.
//! - Demotion: `establish_demotion_targets()` gives each node of a non-last tier the nodes of
//!   the next lower tier at the best distance (`node_demotion[].preferred`), and all nodes of
//!   lower tiers as allowed fallbacks (`lower_tier_mask`); `next_demotion_node()` picks one
//!   preferred node at random.
//!
//! Departures: tiers are fixed at boot (no hotplug, no `memory_dev_type` drivers, no sysfs
//! `memory_tiering/`); distance between nodes is the model's load latency (SLIT would be
//! proportional); a memory-only node whose performance equals DRAM's joins the DRAM tier, as
//! with a real HMAT.
//!
//! State kept per node for promotion (`pglist_data`'s `nbp_*` fields, kernel/sched/fair.c) is
//! here too ([`PgdatTiering`]), and the tiering part of fair.c is in
//! kernel/numa_tiering.rs.

use crate::sim::{Node, Sim};
use crate::types::*;

/// `MEMTIER_CHUNK_BITS`: a tier spans 2^10 of abstract distance.
pub const MEMTIER_CHUNK_BITS: u32 = 10;
/// `MEMTIER_ADISTANCE_DRAM`: 4 chunks and a half (4608).
pub const MEMTIER_ADISTANCE_DRAM: u64 = (4 << MEMTIER_CHUNK_BITS) + (1 << (MEMTIER_CHUNK_BITS - 1));

/// Per-node promotion state (`pglist_data.nbp_*`, the PGPROMOTE_CANDIDATE node counter).
#[derive(Clone, Debug, Default)]
pub struct PgdatTiering {
    /// `nbp_rl_start` (ms) and `nbp_rl_nr_cand`: the rate limit's current one-second window.
    pub nbp_rl_start: u64,
    pub nbp_rl_nr_cand: u64,
    /// `nbp_threshold` (ms; 0 = the default hot threshold).
    pub nbp_threshold: u64,
    /// `nbp_th_start` (ms) and `nbp_th_nr_cand`: the threshold adjustment's window.
    pub nbp_th_start: u64,
    pub nbp_th_nr_cand: u64,
    /// `node_page_state(pgdat, PGPROMOTE_CANDIDATE)`.
    pub pgpromote_candidate: u64,
    /// Every threshold `numa_promotion_adjust_threshold()` set, with the time (ms): not a
    /// kernel field; the report and the tests read it.
    pub threshold_history: Vec<(u64, u64)>,
}

/// The machine's memory tiers, fixed at boot.
#[derive(Clone, Debug, Default)]
pub struct MemoryTiers {
    /// Abstract distance of each node.
    pub adistance: Vec<u64>,
    /// `node_is_toptier()` of each node.
    pub toptier: Vec<bool>,
    /// `node_demotion[node].preferred`.
    pub preferred: Vec<Vec<u32>>,
    /// `memtier->lower_tier_mask` of each node's tier (`node_get_allowed_targets()`).
    pub lower: Vec<Vec<u32>>,
    pub pgdat: Vec<PgdatTiering>,
}

/// `mt_perf_to_adistance()`: DRAM's abstract distance scaled by the latency ratio and the inverse
/// bandwidth ratio (read and write taken equal: the model has one figure of each).
pub fn mt_perf_to_adistance(lat_ns: f64, bw: f64, dram_lat_ns: f64, dram_bw: f64) -> u64 {
    (MEMTIER_ADISTANCE_DRAM as f64 * (lat_ns / dram_lat_ns) * (dram_bw / bw)).round() as u64
}

impl MemoryTiers {
    /// `memory_tier_init()` + `establish_demotion_targets()` for the boot-time nodes.
    /// `latency[from][to]` and `bandwidth[from][to]` are the machine's (Sim::node_latency,
    /// node_bandwidth).
    pub fn new(nodes: &[Node], latency: &[Vec<f64>], bandwidth: &[Vec<f64>]) -> MemoryTiers {
        let n = nodes.len();
        let dram = nodes.iter().position(|x| x.has_cpus).unwrap_or(0);
        let adistance: Vec<u64> = (0..n)
            .map(|i| {
                if nodes[i].has_cpus {
                    MEMTIER_ADISTANCE_DRAM
                } else {
                    // The performance seen from the nearest initiator (a node with CPUs).
                    mt_perf_to_adistance(latency[dram][i], bandwidth[dram][i], latency[dram][dram], bandwidth[dram][dram]).max(1)
                }
            })
            .collect();
        let tier = |i: usize| adistance[i] >> MEMTIER_CHUNK_BITS;
        // top_tier_adistance: the end of the slowest tier holding a node with CPUs.
        let top = (0..n).filter(|&i| nodes[i].has_cpus).map(tier).max().unwrap_or(u64::MAX);
        let toptier: Vec<bool> = (0..n).map(|i| tier(i) <= top).collect();
        let mut tiers: Vec<u64> = (0..n).map(tier).collect();
        tiers.sort_unstable();
        tiers.dedup();
        let mut preferred = vec![Vec::new(); n];
        let mut lower = vec![Vec::new(); n];
        for i in 0..n {
            let pos = tiers.iter().position(|&t| t == tier(i)).expect("own tier");
            let Some(&next) = tiers.get(pos + 1) else { continue };
            lower[i] = (0..n).filter(|&j| tier(j) > tier(i)).map(|j| j as u32).collect();
            // find_next_best_node() over the next tier: every node at the best distance.
            let cand: Vec<usize> = (0..n).filter(|&j| tier(j) == next).collect();
            let best = cand.iter().map(|&j| latency[i][j]).fold(f64::INFINITY, f64::min);
            preferred[i] = cand.into_iter().filter(|&j| latency[i][j] == best).map(|j| j as u32).collect();
        }
        MemoryTiers { adistance, toptier, preferred, lower, pgdat: vec![PgdatTiering::default(); n] }
    }
}

impl Sim {
    /// `node_is_toptier()`.
    #[inline]
    pub fn node_is_toptier(&self, nid: u32) -> bool {
        self.tiers.toptier.get(nid as usize).copied().unwrap_or(true)
    }

    /// `next_demotion_node()`: a random node of `node_demotion[node].preferred` (6.1+:
    /// node_random()), or None in the last tier.
    pub fn next_demotion_node(&mut self, nid: u32) -> Option<u32> {
        let p = &self.tiers.preferred[nid as usize];
        match p.len() {
            0 => None,
            1 => Some(p[0]),
            n => {
                let i = self.prng.below(n as u64) as usize;
                Some(self.tiers.preferred[nid as usize][i])
            }
        }
    }

    /// `folio_use_access_time()`: with NUMA_BALANCING_MEMORY_TIERING, a folio on a lower-tier
    /// node keeps its last scan time, not its last (cpu, pid), in the last_cpupid bits.
    #[inline]
    pub fn folio_use_access_time(&self, pfn: Pfn) -> bool {
        self.p.numa_tiering && !self.node_is_toptier(self.pfn_to_nid(pfn) as u32)
    }

    /// `folio_xchg_access_time()`: store `time_ms` (masked to the bits last_cpupid has) and
    /// return the previous time.
    pub fn folio_xchg_access_time(&mut self, pfn: Pfn, time_ms: u64) -> u64 {
        let old = self.last_cpupid.replace(pfn, (time_ms & PAGE_ACCESS_TIME_MASK) as u32);
        old as u64
    }

    /// `promo_wmark_pages()`: WMARK_PROMO = the high watermark plus one more low-to-high step
    /// (`__setup_per_zone_wmarks()`, 6.0+).
    pub fn promo_wmark_pages(&self, node: usize) -> u64 {
        let w = &self.nodes[node].wmark;
        w.high + (w.high - w.low)
    }

    /// The watermark kswapd balances a node to (`pgdat_balanced()`): WMARK_PROMO with memory
    /// tiering on, else WMARK_HIGH.
    pub fn kswapd_balance_mark(&self, node: usize) -> u64 {
        if self.p.numa_tiering { self.promo_wmark_pages(node) } else { self.nodes[node].wmark.high }
    }

    /// `wakeup_kswapd()` for one node: wake its kswapd unless the node is balanced or
    /// hopeless (`kswapd_failures` at MAX_RECLAIM_RETRIES: "leave it to direct reclaim").
    pub fn wakeup_kswapd(&mut self, cpu: CpuId, node: usize) {
        if self.nodes[node].nr_free >= self.kswapd_balance_mark(node) || self.nodes[node].kswapd_failures >= crate::mm::vmscan::MAX_RECLAIM_RETRIES {
            return;
        }
        let now = self.now(cpu);
        self.wake_kswapd_wait(node, now);
    }
}

/// `PAGE_ACCESS_TIME_MASK`: LAST_CPUPID_SHIFT bits (x86-64 with NR_CPUS = 8192: 8 pid bits + 13
/// cpu bits = 21), so access times wrap every 2^21 ms (35 minutes).
pub const PAGE_ACCESS_TIME_MASK: u64 = (1 << 21) - 1;

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(sets: &[&str]) -> Sim {
        let s: Vec<String> = sets.iter().map(|x| x.to_string()).collect();
        Sim::new(&crate::config::Config::defaults(&s).unwrap())
    }

    #[test]
    fn cpuless_cxl_node_is_a_lower_tier_with_a_demotion_target() {
        let s = sim(&["machine.cpus=4", "machine.nodes=2", "machine.mem_per_node_mib=16", "machine.cpuless_nodes=1", "machine.cpuless_mem_mib=16"]);
        assert_eq!(s.tiers.adistance[0], MEMTIER_ADISTANCE_DRAM);
        // 250 ns / 90 ns latency, 20 / 8 GB/s bandwidth: 4608 * 2.78 * 2.5 = 32000.
        assert_eq!(s.tiers.adistance[2], 32000);
        assert_eq!(s.tiers.toptier, vec![true, true, false]);
        assert_eq!(s.tiers.preferred, vec![vec![2], vec![2], vec![]]);
        assert!(s.tiers.lower[2].is_empty());
    }

    #[test]
    fn a_cpuless_node_as_fast_as_dram_joins_the_top_tier() {
        let s = sim(&[
            "machine.cpus=2",
            "machine.mem_per_node_mib=16",
            "machine.cpuless_nodes=1",
            "machine.cpuless_mem_mib=16",
            "machine.cpuless_latency_ns=90",
            "machine.cpuless_bandwidth_gbps=20",
        ]);
        assert_eq!(s.tiers.toptier, vec![true, true]);
        assert!(s.tiers.preferred.iter().all(|p| p.is_empty()));
    }
}
