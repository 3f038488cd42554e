//! The memory-tiering section of a run's report (only on machines with a memory-only node):
//! each node's tier as /sys/devices/virtual/memory_tiering/memory_tierN and
//! /sys/kernel/mm/numa/demotion_enabled show it, the promotion state of each top-tier node
//! (`nbp_threshold`, the candidates) and the hot threshold's history, which no /proc file shows
//! (Linux keeps it in `pglist_data` only).

use std::fmt::Write;

use serde::Serialize;

use crate::mm::memory_tiers::MEMTIER_CHUNK_BITS;
use crate::sim::Sim;

#[derive(Clone, Debug, Serialize)]
pub struct TierNode {
    pub node: u32,
    pub has_cpus: bool,
    pub adistance: u64,
    /// memory_tierN: adistance >> MEMTIER_CHUNK_BITS.
    pub memory_tier: u64,
    pub toptier: bool,
    /// node_demotion[node].preferred.
    pub demotion_targets: Vec<u32>,
    pub free_pages: u64,
    /// WMARK_MIN, LOW, HIGH, PROMO in pages.
    pub watermarks: [u64; 4],
    /// PGPROMOTE_CANDIDATE of this node (promotion target).
    pub pgpromote_candidate: u64,
    /// The hot threshold in force (nbp_threshold, or the default when 0), ms.
    pub hot_threshold_ms: u64,
    /// (time ms, new threshold ms) each time numa_promotion_adjust_threshold() ran.
    pub threshold_history: Vec<(u64, u64)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TieringReport {
    pub numa_balancing: i64,
    pub demotion_enabled: bool,
    pub nodes: Vec<TierNode>,
}

impl TieringReport {
    pub fn from_sim(sim: &Sim) -> Option<TieringReport> {
        if sim.nodes.iter().all(|n| n.has_cpus) {
            return None;
        }
        let nodes = sim
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let pg = &sim.tiers.pgdat[i];
                TierNode {
                    node: i as u32,
                    has_cpus: n.has_cpus,
                    adistance: sim.tiers.adistance[i],
                    memory_tier: sim.tiers.adistance[i] >> MEMTIER_CHUNK_BITS,
                    toptier: sim.tiers.toptier[i],
                    demotion_targets: sim.tiers.preferred[i].clone(),
                    free_pages: n.nr_free,
                    watermarks: [n.wmark.min, n.wmark.low, n.wmark.high, sim.promo_wmark_pages(i)],
                    pgpromote_candidate: pg.pgpromote_candidate,
                    hot_threshold_ms: if pg.nbp_threshold != 0 { pg.nbp_threshold } else { sim.p.hot_threshold_ms },
                    threshold_history: pg.threshold_history.clone(),
                }
            })
            .collect();
        Some(TieringReport { numa_balancing: sim.cfg.int("kernel.numa_balancing"), demotion_enabled: sim.p.demotion_enabled, nodes })
    }

    /// Plain text: one line per node, then the threshold history of nodes that have one.
    pub fn format(&self) -> String {
        let mut s = format!("numa_balancing {}  demotion_enabled {}\n", self.numa_balancing, self.demotion_enabled);
        for n in &self.nodes {
            let targets = if n.demotion_targets.is_empty() { "-".to_string() } else { n.demotion_targets.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",") };
            let _ = writeln!(
                s,
                "node {}: memory_tier{} adistance {} {}{} demotion_target {} free {} wmark min/low/high/promo {}/{}/{}/{} pgpromote_candidate {} hot_threshold_ms {}",
                n.node,
                n.memory_tier,
                n.adistance,
                if n.toptier { "toptier" } else { "lower" },
                if n.has_cpus { "" } else { " cpuless" },
                targets,
                n.free_pages,
                n.watermarks[0],
                n.watermarks[1],
                n.watermarks[2],
                n.watermarks[3],
                n.pgpromote_candidate,
                n.hot_threshold_ms
            );
            if !n.threshold_history.is_empty() {
                let h: Vec<String> = n.threshold_history.iter().map(|(t, th)| format!("{t}ms:{th}")).collect();
                let _ = writeln!(s, "  hot threshold adjusted (time:threshold ms): {}", h.join(" "));
            }
        }
        s
    }
}
