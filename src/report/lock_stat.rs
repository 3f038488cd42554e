//! `/proc/lock_stat` (CONFIG_LOCK_STAT, Documentation/locking/lockstat.rst) and a
//! `perf report --children` style profile, from the lock model and the time accounting by
//! kernel function (src/kernel/locking.rs, src/kernel/profile.rs).

use serde::Serialize;
use std::fmt::Write;

use crate::kernel::locking::LOCK_CLASSES;
use crate::kernel::profile::KFn;
use crate::sim::Sim;

/// One class of /proc/lock_stat; times in ns (printed in µs, as the kernel prints them).
#[derive(Clone, Debug, Serialize)]
pub struct LockStatRow {
    pub class: String,
    #[serde(flatten)]
    pub stat: crate::kernel::locking::LockStat,
}

/// One symbol of the profile: children (inclusive) and self time, ns.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileRow {
    pub symbol: String,
    pub children_ns: u64,
    pub self_ns: u64,
}

pub fn lock_stat_rows(sim: &Sim) -> Vec<LockStatRow> {
    let v = crate::config::presets::version(&sim.cfg.str("kernel.preset"));
    LOCK_CLASSES
        .iter()
        .map(|&c| LockStatRow { class: c.name(v).to_string(), stat: sim.locks.stats[c as usize] })
        .filter(|r| r.stat.acquisitions > 0 || r.stat.contentions > 0)
        .collect()
}

/// Busy time by kernel function, plus `[.] user`, sorted by children time (then symbol).
pub fn profile_rows(sim: &Sim) -> Vec<ProfileRow> {
    let user: u64 = sim.cpus.iter().map(|c| c.stats.user_ns).sum();
    let mut rows: Vec<ProfileRow> = KFn::ALL
        .iter()
        .map(|&f| ProfileRow { symbol: f.symbol().to_string(), children_ns: sim.prof.children_ns(f), self_ns: sim.prof.self_ns[f as usize] })
        .filter(|r| r.children_ns > 0)
        .collect();
    rows.push(ProfileRow { symbol: "user".into(), children_ns: user, self_ns: user });
    rows.sort_by(|a, b| b.children_ns.cmp(&a.children_ns).then(a.symbol.cmp(&b.symbol)));
    rows
}

fn us(ns: u64) -> String {
    format!("{}.{:02}", ns / 1000, (ns % 1000) / 10)
}

/// /proc/lock_stat text (version 0.4 layout: one line per class, times in µs).
pub fn format_lock_stat(rows: &[LockStatRow]) -> String {
    let mut s = String::from("lock_stat version 0.4\n");
    let rule = "-".repeat(206);
    let _ = writeln!(s, "{rule}");
    let _ = writeln!(
        s,
        "{:>40} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
        "class name", "con-bounces", "contentions", "waittime-min", "waittime-max", "waittime-total", "waittime-avg", "acq-bounces", "acquisitions", "holdtime-min", "holdtime-max", "holdtime-total", "holdtime-avg"
    );
    let _ = writeln!(s, "{rule}\n");
    for r in rows {
        let t = &r.stat;
        let wavg = if t.contentions > 0 { t.waittime_total / t.contentions } else { 0 };
        let havg = if t.acquisitions > 0 { t.holdtime_total / t.acquisitions } else { 0 };
        let _ = writeln!(
            s,
            "{:>40} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
            format!("{}:", r.class),
            t.con_bounces,
            t.contentions,
            us(t.waittime_min),
            us(t.waittime_max),
            us(t.waittime_total),
            us(wavg),
            t.acq_bounces,
            t.acquisitions,
            us(t.holdtime_min),
            us(t.holdtime_max),
            us(t.holdtime_total),
            us(havg)
        );
        let _ = writeln!(s, "{:>40}", "-".repeat(r.class.len() + 1));
        s.push('\n');
    }
    s
}

/// `perf report --children --sort symbol` text over the simulated busy time.
pub fn format_profile(rows: &[ProfileRow], scenario: &str) -> String {
    let total: u64 = rows.iter().filter(|r| r.symbol == "user").map(|r| r.children_ns).sum::<u64>()
        + rows.iter().filter(|r| r.symbol != "user").map(|r| r.self_ns).sum::<u64>();
    let pct = |v: u64| if total == 0 { 0.0 } else { 100.0 * v as f64 / total as f64 };
    let mut s = format!("# Simulated profile of 'mmsim run {scenario}': busy time by kernel function\n");
    let _ = writeln!(s, "# Total busy time: {:.6} s (user + system + irq, all CPUs)\n#", total as f64 / 1e9);
    let _ = writeln!(s, "# Children      Self  Command  Shared Object      Symbol");
    let _ = writeln!(s, "# ........  ........  .......  .................  ..............................");
    for r in rows {
        let (obj, kind) = if r.symbol == "user" { ("[user]", "[.]") } else { ("[kernel.kallsyms]", "[k]") };
        let _ = writeln!(s, "  {:>7.2}%  {:>7.2}%  mmsim    {:<17}  {} {}", pct(r.children_ns), pct(r.self_ns), obj, kind, r.symbol);
    }
    s
}
