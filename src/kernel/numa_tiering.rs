//! NUMA balancing's memory-tiering mode (NUMA_BALANCING_MEMORY_TIERING, kernel.numa_balancing
//! & 2), the kernel/sched/fair.c side (Linux 6.0+, as in 6.18; mechanisms.md §2 "Decision
//! path"): the promotion decision for a hint fault on a lower-tier folio,
//! `should_numa_migrate_memory()`'s tiering branch, with `pgdat_free_space_enough()`,
//! `numa_hint_fault_latency()`, `numa_promotion_rate_limit()` and
//! `numa_promotion_adjust_threshold()`.
//!
//! Versions: mode 2 came in 5.18 (commit c574bbe91703, which promoted every hinted lower-tier
//! folio); hot page selection by hint-fault latency (33024536bafd), the promotion rate limit
//! (c959924b0dc5) and the automatic threshold (c6833e10008f) in 6.0. No preset lies between
//! 5.18 and 6.0, so mode 2 is modelled as of 6.0 (config refuses it before 5.18).
//!
//! The tiers and the per-node state (`nbp_*`) are in mm/memory_tiers.rs; the scanner's access
//! time stamp in mm/mprotect.rs (`change_pte_range()`), the fault in mm/numa_fault.rs, the
//! promotion's migration in mm/migrate.rs (`migrate_misplaced_folio()`).
//!
//! Departures: PGPROMOTE_CANDIDATE_NRL (6.14+, candidates promoted without the rate limit
//! because the node had room) is not kept; the cmpxchg on the window starts is a plain store
//! (steps are atomic).

use crate::mm::vmstat::VmEvent;
use crate::sim::Sim;
use crate::types::*;

/// `NUMA_MIGRATION_ADJUST_STEPS`.
pub const NUMA_MIGRATION_ADJUST_STEPS: u64 = 16;

impl Sim {
    /// `jiffies_to_msecs(jiffies)` on `cpu`.
    fn now_ms(&self, cpu: CpuId) -> u64 {
        self.now(cpu) / 1_000_000
    }

    /// `pgdat_free_space_enough()`: the node has more than max(1 GiB, node/16) free above
    /// WMARK_PROMO, so any candidate may be promoted.
    pub fn pgdat_free_space_enough(&self, nid: u32) -> bool {
        let n = &self.nodes[nid as usize];
        let enough = (1u64 << (30 - PAGE_SHIFT)).max(n.nr_pages as u64 >> 4);
        n.nr_free > self.promo_wmark_pages(nid as usize) + enough
    }

    /// `numa_hint_fault_latency()`: now minus the scan time stamped in the folio, and stamp now.
    pub fn numa_hint_fault_latency(&mut self, cpu: CpuId, pfn: Pfn) -> u64 {
        let now = self.now_ms(cpu);
        let last = self.folio_xchg_access_time(pfn, now);
        now.wrapping_sub(last) & crate::mm::memory_tiers::PAGE_ACCESS_TIME_MASK
    }

    /// `numa_promotion_rate_limit()`: count the candidate, and refuse it when this second's
    /// candidates on the node already reach `rate_limit` pages.
    pub fn numa_promotion_rate_limit(&mut self, cpu: CpuId, nid: u32, rate_limit: u64, nr: u64) -> bool {
        let now = self.now_ms(cpu);
        self.vmstat.add(VmEvent::PGPROMOTE_CANDIDATE, nr);
        let pg = &mut self.tiers.pgdat[nid as usize];
        pg.pgpromote_candidate += nr;
        let nr_cand = pg.pgpromote_candidate;
        if now.wrapping_sub(pg.nbp_rl_start) > 1000 {
            pg.nbp_rl_start = now;
            pg.nbp_rl_nr_cand = nr_cand;
        }
        nr_cand - pg.nbp_rl_nr_cand >= rate_limit
    }

    /// `numa_promotion_adjust_threshold()`: every scan_period_max, compare the candidates of the
    /// period with what the rate limit lets through in one; more than 110% lowers the threshold
    /// by one step (ref_th / 8, not below one step), less than 90% raises it (up to 2 ref_th).
    pub fn numa_promotion_adjust_threshold(&mut self, cpu: CpuId, nid: u32, rate_limit: u64, ref_th: u64) {
        let now = self.now_ms(cpu);
        let th_period = self.p.numa_scan_period_max_ms;
        let pg = &mut self.tiers.pgdat[nid as usize];
        if now.wrapping_sub(pg.nbp_th_start) <= th_period {
            return;
        }
        pg.nbp_th_start = now;
        let ref_cand = rate_limit.saturating_mul(th_period) / 1000;
        let nr_cand = pg.pgpromote_candidate;
        let diff_cand = nr_cand - pg.nbp_th_nr_cand;
        let unit_th = ref_th * 2 / NUMA_MIGRATION_ADJUST_STEPS;
        let mut th = if pg.nbp_threshold != 0 { pg.nbp_threshold } else { ref_th };
        if diff_cand > ref_cand.saturating_mul(11) / 10 {
            th = th.saturating_sub(unit_th).max(unit_th);
        } else if diff_cand < ref_cand.saturating_mul(9) / 10 {
            th = (th + unit_th).min(ref_th * 2);
        }
        pg.nbp_th_nr_cand = nr_cand;
        pg.nbp_threshold = th;
        pg.threshold_history.push((now, th));
        self.mark("tiering threshold adjusted");
    }

    /// `should_numa_migrate_memory()`'s tiering branch, for a hint fault on a lower-tier folio
    /// (`folio_use_access_time()`) towards top-tier node `dst_nid`: promote at once if the node
    /// has plenty of room (and forget the adapted threshold); else only a folio whose fault came
    /// within the hot threshold of its scan, within the node's rate limit.
    pub fn should_numa_promote(&mut self, cpu: CpuId, pfn: Pfn, dst_nid: u32) -> bool {
        if self.pgdat_free_space_enough(dst_nid) {
            // Workload changed: reset the hot threshold.
            self.tiers.pgdat[dst_nid as usize].nbp_threshold = 0;
            return true;
        }
        let def_th = self.p.hot_threshold_ms;
        let rate_limit = self.p.promote_rate_limit_pages;
        self.numa_promotion_adjust_threshold(cpu, dst_nid, rate_limit, def_th);
        let th = match self.tiers.pgdat[dst_nid as usize].nbp_threshold {
            0 => def_th,
            t => t,
        };
        let latency = self.numa_hint_fault_latency(cpu, pfn);
        if latency >= th {
            return false;
        }
        !self.numa_promotion_rate_limit(cpu, dst_nid, rate_limit, 1)
    }
}
