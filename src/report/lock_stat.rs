//! `/proc/lock_stat` (CONFIG_LOCK_STAT, Documentation/locking/lockstat.rst) and a
//! `perf report --children` style profile, from the lock model and the time accounting by
//! kernel function (src/kernel/locking.rs, src/kernel/profile.rs).

use serde::Serialize;
use std::fmt::Write;

use crate::kernel::locking::{LockTimes, LOCK_CLASSES};
use crate::kernel::profile::{KFn, ProfileWindow};
use crate::sim::Sim;

/// One class of /proc/lock_stat; times in ns (printed in µs, as the kernel prints them).
#[derive(Clone, Debug, Serialize)]
pub struct LockStatRow {
    pub class: String,
    /// The class's totals (exclusive and shared acquisitions together).
    #[serde(flatten)]
    pub stat: LockTimes,
    /// Exclusive acquisitions (spinlocks, rwsem writers): the `-W` line of a class that has
    /// both, the class's only line otherwise.
    pub write: LockTimes,
    /// Shared acquisitions (rwsem readers): the `-R` line.
    pub read: LockTimes,
    /// Not the kernel's: see [`crate::kernel::locking::LockStat::mmsim_overlapping_holds`].
    pub mmsim_overlapping_holds: u64,
    /// Contentions by where the waiter took the lock (lock_stat's contention points), most
    /// first; every site, where /proc/lock_stat prints four.
    pub contention_points: Vec<LockPoint>,
    /// Contentions by where the hold waited for was taken (lock_stat's contending points).
    pub contending_points: Vec<LockPoint>,
}

/// A call site of a lock class and its contention count. The site is the innermost modelled
/// kernel function (the profile's symbols), not an instruction address.
#[derive(Clone, Debug, Serialize)]
pub struct LockPoint {
    pub symbol: String,
    pub contentions: u64,
}

/// The sites with a count, most first (ties by symbol).
fn points(counts: &[u64]) -> Vec<LockPoint> {
    let mut v: Vec<LockPoint> = KFn::ALL.iter().filter(|&&f| counts[f as usize] > 0).map(|&f| LockPoint { symbol: f.symbol().to_string(), contentions: counts[f as usize] }).collect();
    v.sort_by(|a, b| b.contentions.cmp(&a.contentions).then_with(|| a.symbol.cmp(&b.symbol)));
    v
}

/// One symbol of the profile: children (inclusive) and self time, ns.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileRow {
    pub symbol: String,
    pub children_ns: u64,
    pub self_ns: u64,
}

/// The classes with any acquisition, as /proc/lock_stat orders them (`lock_stat_cmp()`: most
/// contentions first; ties keep the model's class order).
pub fn lock_stat_rows(sim: &Sim) -> Vec<LockStatRow> {
    let v = crate::config::presets::version(&sim.cfg.str("kernel.preset"));
    let mut rows: Vec<LockStatRow> = LOCK_CLASSES
        .iter()
        .map(|&c| {
            let st = &sim.locks.stats[c as usize];
            LockStatRow {
                class: c.name(v).to_string(),
                stat: st.total(),
                write: st.write,
                read: st.read,
                mmsim_overlapping_holds: st.mmsim_overlapping_holds,
                contention_points: points(&st.contention_points),
                contending_points: points(&st.contending_points),
            }
        })
        .filter(|r| r.stat.acquisitions > 0 || r.stat.contentions > 0)
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.stat.contentions));
    rows
}

/// Busy time by kernel function, plus `[.] user`, sorted by children time (then symbol).
pub fn profile_rows(sim: &Sim) -> Vec<ProfileRow> {
    let user: u64 = sim.cpus.iter().map(|c| c.stats.user_ns).sum();
    rows_of(|f| sim.prof.children_ns(f), |f| sim.prof.self_ns[f as usize], user)
}

/// The profile of a window of the run (`run.profile_delay_ms`, `run.profile_duration_ms`):
/// what changed between its two snapshots. None when the run ended before the window began.
pub fn profile_rows_window(w: &ProfileWindow) -> Option<Vec<ProfileRow>> {
    let d = w.delta()?;
    Some(rows_of(|f| d.children[f as usize], |f| d.self_ns[f as usize], d.user_ns))
}

/// Rows with time, most children time first (ties by name), user time as one line.
fn rows_of(children: impl Fn(KFn) -> u64, self_ns: impl Fn(KFn) -> u64, user: u64) -> Vec<ProfileRow> {
    let mut rows: Vec<ProfileRow> = KFn::ALL.iter().map(|&f| ProfileRow { symbol: f.symbol().to_string(), children_ns: children(f), self_ns: self_ns(f) }).filter(|r| r.children_ns > 0).collect();
    rows.push(ProfileRow { symbol: "user".into(), children_ns: user, self_ns: user });
    rows.sort_by(|a, b| b.children_ns.cmp(&a.children_ns).then(a.symbol.cmp(&b.symbol)));
    rows
}

/// A time as `snprint_time()` prints it: µs with two decimals, rounded at the ns.
fn us(ns: u64) -> String {
    let n = ns + 5;
    format!("{}.{:02}", n / 1000, (n % 1000) / 10)
}

/// The width of the header's rules and the dotted line after a class's points:
/// 40 + 1 + 12 * (14 + 1), as `seq_header()` draws it.
const RULE: usize = 40 + 1 + 12 * (14 + 1);

/// /proc/lock_stat points printed per block (LOCKSTAT_POINTS).
const LOCKSTAT_POINTS: usize = 4;

/// /proc/lock_stat text in the layout of kernel/locking/lockdep_proc.c (`seq_header()`,
/// `seq_stats()`): one line per class (an rwsem taken both ways has a `-W` and a `-R` line, one
/// only read-locked a `-R` line), then, for a class that was contended, up to four contention
/// points and four contending points, each block under a rule as wide as the name (and its
/// suffix). Departures: a site is a modelled function's name, with no address (printed as
/// `[<0000000000000000>]`) or offset; the four printed are the most frequent, where the
/// kernel keeps the first four it met.
pub fn format_lock_stat(rows: &[LockStatRow]) -> String {
    let mut s = String::from("lock_stat version 0.4\n");
    let rule = "-".repeat(RULE);
    let _ = writeln!(s, "{rule}");
    let _ = writeln!(
        s,
        "{:>40} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
        "class name", "con-bounces", "contentions", "waittime-min", "waittime-max", "waittime-total", "waittime-avg", "acq-bounces", "acquisitions", "holdtime-min", "holdtime-max", "holdtime-total", "holdtime-avg"
    );
    let _ = writeln!(s, "{rule}\n");
    for r in rows {
        // seq_stats(): the write line ("%40s:", or "%38s-W:" when there are readers too), then
        // the read line ("%38s-R:"); readers widen the rule over the points by the suffix.
        let both = r.write.acquisitions > 0 && r.read.acquisitions > 0;
        for (line, suffix) in [(&r.write, if both { "-W" } else { "" }), (&r.read, "-R")] {
            if line.acquisitions == 0 {
                continue;
            }
            let name = format!("{:>w$}{suffix}", r.class, w = 40 - suffix.len());
            let _ = writeln!(s, "{name}:{}", lock_times(line));
        }
        let t = &r.stat;
        if t.contentions == 0 {
            continue;
        }
        let namelen = (r.class.len() + if r.read.acquisitions > 0 { 2 } else { 0 }).min(40);
        let mut last = 0;
        for block in [&r.contention_points, &r.contending_points] {
            last = block.len().min(LOCKSTAT_POINTS);
            for (i, p) in block.iter().take(LOCKSTAT_POINTS).enumerate() {
                if i == 0 {
                    let _ = writeln!(s, "{}{}", " ".repeat(40 - namelen), "-".repeat(namelen));
                }
                let _ = writeln!(s, "{:>40} {:>14} {:>29} {}", r.class, p.contentions, "[<0000000000000000>]", p.symbol);
            }
        }
        if last > 0 {
            let _ = writeln!(s, "\n{}\n", ".".repeat(RULE));
        }
    }
    s
}

/// The twelve columns after a class name: `seq_lock_time()` of the waits and of the holds, each
/// after its bounces.
fn lock_times(t: &LockTimes) -> String {
    let wavg = t.waittime_total.checked_div(t.contentions).unwrap_or(0);
    let havg = t.holdtime_total.checked_div(t.acquisitions).unwrap_or(0);
    format!(
        "{:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
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
    )
}

/// `perf report --children --sort symbol` text over the simulated busy time.
/// `window`: the profile covers only this part of the run (ns), as `perf record -D delay` for a
/// duration; `Some(None)`: a window was asked for and the run ended before it began.
pub fn format_profile(rows: &[ProfileRow], scenario: &str, window: Option<Option<(u64, u64)>>) -> String {
    let total: u64 = rows.iter().filter(|r| r.symbol == "user").map(|r| r.children_ns).sum::<u64>()
        + rows.iter().filter(|r| r.symbol != "user").map(|r| r.self_ns).sum::<u64>();
    let pct = |v: u64| if total == 0 { 0.0 } else { 100.0 * v as f64 / total as f64 };
    let mut s = format!("# Simulated profile of 'mmsim run {scenario}': busy time by kernel function\n");
    match window {
        Some(Some((a, b))) => {
            let _ = writeln!(s, "# Window: {:.6} s to {:.6} s of the run (run.profile_delay_ms, run.profile_duration_ms)", a as f64 / 1e9, b as f64 / 1e9);
        }
        Some(None) => {
            let _ = writeln!(s, "# Window: the run ended before run.profile_delay_ms; no samples");
        }
        None => {}
    }
    let _ = writeln!(s, "# Total busy time: {:.6} s (user + system + irq, all CPUs)\n#", total as f64 / 1e9);
    let _ = writeln!(s, "# Children      Self  Command  Shared Object      Symbol");
    let _ = writeln!(s, "# ........  ........  .......  .................  ..............................");
    for r in rows {
        let (obj, kind) = if r.symbol == "user" { ("[user]", "[.]") } else { ("[kernel.kallsyms]", "[k]") };
        let _ = writeln!(s, "  {:>7.2}%  {:>7.2}%  mmsim    {:<17}  {} {}", pct(r.children_ns), pct(r.self_ns), obj, kind, r.symbol);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(class: &str, contentions: u64, points: &[(&str, u64)]) -> LockStatRow {
        let write = LockTimes { contentions, con_bounces: contentions, acquisitions: 10, acq_bounces: 3, waittime_total: 12_345, waittime_max: 9_995, holdtime_total: 1_000, ..LockTimes::default() };
        rw_row(class, write, LockTimes::default(), points)
    }

    fn rw_row(class: &str, write: LockTimes, read: LockTimes, points: &[(&str, u64)]) -> LockStatRow {
        let p: Vec<LockPoint> = points.iter().map(|&(s, c)| LockPoint { symbol: s.into(), contentions: c }).collect();
        LockStatRow { class: class.into(), stat: write.merged(&read), write, read, mmsim_overlapping_holds: 0, contention_points: p.clone(), contending_points: p }
    }

    /// The layout of lockdep_proc.c: rules 221 wide, the class name right-aligned in 40 with the
    /// colon after it, times rounded at the ns as snprint_time() does, a rule as wide as the
    /// name over each block of points, four points at most, a dotted line after a contended
    /// class and nothing after an uncontended one.
    #[test]
    fn lock_stat_has_the_kernels_layout() {
        let pts = [("a", 5), ("b", 4), ("c", 3), ("d", 2), ("e", 1)];
        let text = format_lock_stat(&[row("&zone->lock", 15, &pts), row("&mapping->i_pages", 0, &[])]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "lock_stat version 0.4");
        assert_eq!(lines[1], "-".repeat(221));
        assert_eq!(lines[2].len(), 220);
        assert!(lines[2].ends_with("holdtime-avg") && lines[2].starts_with(&format!("{:>40} ", "class name")));
        assert_eq!(lines[3], "-".repeat(221));
        assert_eq!(lines[4], "");
        let class = lines[5];
        assert_eq!(&class[..41], &format!("{:>40}:", "&zone->lock"));
        assert_eq!(class.len(), 220);
        // waittime-max 9,995 ns prints as 10.00 µs (rounded), the total 12,345 as 12.35.
        assert!(class.contains("          10.00 ") && class.contains("          12.35 "), "{class}");
        assert_eq!(lines[6], format!("{}{}", " ".repeat(29), "-".repeat(11)));
        assert_eq!(lines[7], format!("{:>40} {:>14} {:>29} a", "&zone->lock", 5, "[<0000000000000000>]"));
        assert!(lines[10].ends_with(" d"));
        assert_eq!(lines[11], lines[6], "four points, then the contending block");
        assert_eq!(lines[16], "");
        assert_eq!(lines[17], ".".repeat(221));
        assert_eq!(lines[18], "");
        assert!(lines[19].starts_with(&format!("{:>40}:", "&mapping->i_pages")));
        assert_eq!(lines.len(), 20, "an uncontended class is one line");
    }

    /// An rwsem: `%38s-W:` then `%38s-R:` when it was taken both ways, `-R` alone when only
    /// read-locked; the rule over its points is two dashes wider (the suffix).
    #[test]
    fn rwsems_have_write_and_read_lines() {
        let w = LockTimes { acquisitions: 4, contentions: 1, waittime_total: 2_000, ..LockTimes::default() };
        let r = LockTimes { acquisitions: 7, contentions: 2, waittime_total: 3_000, ..LockTimes::default() };
        let text = format_lock_stat(&[rw_row("&mm->mmap_lock", w, r, &[("a", 3)]), rw_row("&anon_vma->rwsem", LockTimes::default(), r, &[])]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[5].starts_with(&format!("{:>38}-W:", "&mm->mmap_lock")), "{}", lines[5]);
        assert_eq!(lines[5].len(), 220);
        assert!(lines[5][41..].starts_with(&format!("{:>14} {:>14} ", 0, 1)), "write contentions: {}", lines[5]);
        assert!(lines[6].starts_with(&format!("{:>38}-R:", "&mm->mmap_lock")), "{}", lines[6]);
        assert!(lines[6][41..].starts_with(&format!("{:>14} {:>14} ", 0, 2)), "read contentions: {}", lines[6]);
        assert_eq!(lines[7], format!("{}{}", " ".repeat(40 - 16), "-".repeat(16)));
        assert_eq!(lines[8], format!("{:>40} {:>14} {:>29} a", "&mm->mmap_lock", 3, "[<0000000000000000>]"));
        let ro = lines.iter().find(|l| l.contains("&anon_vma->rwsem")).expect("the read-only class");
        assert!(ro.starts_with(&format!("{:>38}-R:", "&anon_vma->rwsem")), "{ro}");
        assert!(!text.contains("&anon_vma->rwsem-W"));
    }
}
