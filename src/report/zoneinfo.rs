//! `/proc/zoneinfo` (`mmsim run --only zoneinfo`): each node's one zone (ZONE_NORMAL in the
//! model) with its free pages, watermarks and sizes, and each CPU's pcp list in the preset's
//! format: `count`, `high`, `batch`, and since 6.7 `high_min` and `high_max` (mm/vmstat.c
//! `zoneinfo_show_print()`). Compare with the host's own file: on this machine's 6.18 the
//! ZONE_NORMAL pagesets read `high: 10081`, `batch: 63`, `high_min: 10081`, `high_max: 337141`.

use serde::Serialize;
use std::fmt::Write;

use crate::mm::page_alloc::PCP_AUTOTUNE_SINCE;
use crate::mm::vmscan::MAX_RECLAIM_RETRIES;
use crate::sim::Sim;

/// One CPU's pcp list for a zone at the end of the run.
#[derive(Clone, Debug, Serialize)]
pub struct PageSet {
    pub cpu: usize,
    pub count: usize,
    pub high: usize,
    pub batch: usize,
    pub high_min: usize,
    pub high_max: usize,
}

/// One node's zone at the end of the run.
#[derive(Clone, Debug, Serialize)]
pub struct ZoneInfo {
    pub node: usize,
    pub pages_free: u64,
    pub min: u64,
    pub low: u64,
    pub high: u64,
    /// WMARK_PROMO (6.0+).
    pub promo: u64,
    pub managed: u64,
    pub start_pfn: u64,
    /// ZONE_RECLAIM_ACTIVE and ZONE_BELOW_HIGH at the end (not in the kernel's file).
    pub reclaim_active: bool,
    pub below_high: bool,
    pub node_unreclaimable: bool,
    pub pagesets: Vec<PageSet>,
}

impl ZoneInfo {
    pub fn from_sim(sim: &Sim) -> Vec<ZoneInfo> {
        (0..sim.nodes.len())
            .map(|node| {
                let n = &sim.nodes[node];
                let pagesets = (0..sim.pcp.len())
                    .map(|cpu| {
                        let p = &sim.pcp[cpu][node];
                        PageSet { cpu, count: p.list.len(), high: p.high, batch: p.batch, high_min: p.high_min, high_max: p.high_max }
                    })
                    .collect();
                ZoneInfo {
                    node,
                    pages_free: n.nr_free,
                    min: n.wmark.min,
                    low: n.wmark.low,
                    high: n.wmark.high,
                    promo: sim.promo_wmark_pages(node),
                    managed: n.nr_pages as u64,
                    start_pfn: n.start_pfn as u64,
                    reclaim_active: n.zone_flags.reclaim_active,
                    below_high: n.zone_flags.below_high,
                    node_unreclaimable: n.kswapd_failures >= MAX_RECLAIM_RETRIES,
                    pagesets,
                }
            })
            .collect()
    }
}

/// The zones in /proc/zoneinfo's layout, with the pageset fields of kernel version `kver`.
pub fn format(zones: &[ZoneInfo], kver: (u32, u32)) -> String {
    let mut s = String::new();
    for z in zones {
        let _ = writeln!(s, "Node {}, zone   Normal", z.node);
        let _ = writeln!(s, "  pages free     {}", z.pages_free);
        let _ = writeln!(s, "        min      {}", z.min);
        let _ = writeln!(s, "        low      {}", z.low);
        let _ = writeln!(s, "        high     {}", z.high);
        if kver >= (6, 0) {
            let _ = writeln!(s, "        promo    {}", z.promo);
        }
        let _ = writeln!(s, "        spanned  {}", z.managed);
        let _ = writeln!(s, "        present  {}", z.managed);
        let _ = writeln!(s, "        managed  {}", z.managed);
        let _ = writeln!(s, "  pagesets");
        for p in &z.pagesets {
            let _ = writeln!(s, "    cpu: {}", p.cpu);
            let _ = writeln!(s, "              count:    {}", p.count);
            let _ = writeln!(s, "              high:     {}", p.high);
            let _ = writeln!(s, "              batch:    {}", p.batch);
            if kver >= PCP_AUTOTUNE_SINCE {
                let _ = writeln!(s, "              high_min: {}", p.high_min);
                let _ = writeln!(s, "              high_max: {}", p.high_max);
            }
        }
        let _ = writeln!(s, "  node_unreclaimable:  {}", z.node_unreclaimable as u32);
        let _ = writeln!(s, "  start_pfn:           {}", z.start_pfn);
    }
    s
}
