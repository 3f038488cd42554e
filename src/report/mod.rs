//! Results: a [`Report`] gathered once from a finished [`Sim`], printed in the kernel's own
//! formats (/proc/interrupts, /proc/vmstat, perf stat, /proc/meminfo), as a human summary, and as
//! JSON for scripts.

pub mod html;
pub mod hugetlb;
pub mod lock_stat;
pub mod tiering;
pub mod timeline;
pub mod trace_log;
pub mod viz;
pub mod zoneinfo;

use crate::arch::x86::mm::tlb::FlushReason;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

use crate::mm::vmstat::VmEvent;
use crate::run::Outcome;
use crate::sim::{pg, Sim};

#[derive(Clone, Debug, Serialize)]
pub struct Time {
    pub elapsed_ns: u64,
    pub user_ns: u64,
    pub sys_ns: u64,
    pub irq_ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PerCpu {
    pub tlb_shootdowns: Vec<u64>,
    pub user_ns: Vec<u64>,
    pub sys_ns: Vec<u64>,
    pub context_switches: Vec<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub outcome: String,
    /// Kernel counter name → value: /proc/vmstat names plus perf event names.
    pub counters: BTreeMap<String, u64>,
    pub per_cpu: PerCpu,
    pub time: Time,
    /// /proc/meminfo fields in kB.
    pub meminfo: BTreeMap<String, u64>,
    /// /proc/zoneinfo: watermarks and pcp lists per node (src/report/zoneinfo.rs).
    pub zoneinfo: Vec<zoneinfo::ZoneInfo>,
    /// The preset's kernel version (the pageset fields /proc/zoneinfo prints depend on it).
    #[serde(skip)]
    pub kver: (u32, u32),
    pub errors: Vec<String>,
    /// /proc/lock_stat by class (kernel.lock_model).
    pub lock_stat: Vec<lock_stat::LockStatRow>,
    /// Busy time by kernel function (perf report --children), over the profile's window if
    /// `run.profile_delay_ms` / `run.profile_duration_ms` set one.
    pub profile: Vec<lock_stat::ProfileRow>,
    /// The profile's window: [start, end] ns of the run it covers; absent without a window,
    /// null when the run ended before it began.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_window_ns: Option<Option<(u64, u64)>>,
    /// `--timeline`: counters per interval (src/report/timeline.rs); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<timeline::TimelineReport>,
    /// Memory tiers and promotion state (src/report/tiering.rs); only with a memory-only node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiering: Option<tiering::TieringReport>,
    /// INVLPGB / RAR / LATR counters (arch/x86/mm/invlpgb.rs); absent when none is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flush_alt: Option<crate::arch::x86::mm::invlpgb::FlushAltReport>,
}

impl Report {
    pub fn from_sim(sim: &Sim, outcome: Outcome) -> Report {
        let mut counters = BTreeMap::new();
        // The tiering counters only on machines with a memory-only node (src/mm/vmstat.rs).
        let tiered = sim.nodes.iter().any(|n| !n.has_cpus);
        for &e in VmEvent::ALL.iter().filter(|e| tiered || !e.is_tiering()) {
            counters.insert(e.kernel_name().to_string(), e.kernel_value(sim.vmstat.get(e)));
        }
        let sum = |f: fn(&crate::sim::CpuStats) -> u64| sim.cpus.iter().map(|c| f(&c.stats)).sum::<u64>();
        counters.insert("dTLB-loads".into(), sum(|s| s.dtlb_loads));
        counters.insert("dTLB-load-misses".into(), sum(|s| s.dtlb_load_misses));
        counters.insert("dTLB-stores".into(), sum(|s| s.dtlb_stores));
        counters.insert("dTLB-store-misses".into(), sum(|s| s.dtlb_store_misses));
        counters.insert("iTLB-load-misses".into(), sum(|s| s.itlb_misses));
        counters.insert("tlb:tlb_flush".into(), sum(|s| s.tlb_flush_events));
        // By reason, as `perf script -e tlb:tlb_flush` prints them (include/linux/mm_types.h).
        for r in [FlushReason::OnTaskSwitch, FlushReason::RemoteShootdown, FlushReason::LocalShootdown, FlushReason::LocalMmShootdown, FlushReason::RemoteSendIpi, FlushReason::RemoteWrongCpu] {
            let n: u64 = sim.cpus.iter().map(|c| c.stats.tlb_flush_by_reason[r as usize]).sum();
            counters.insert(format!("tlb:tlb_flush reason={}", trace_log::reason_str(r).0), n);
        }
        counters.insert("context-switches".into(), sum(|s| s.context_switches));
        if sim.p.luf.on() {
            // LUF's own counters (mm/luf.rs; the series adds none to vmstat): printed after
            // /proc/vmstat's lines.
            let l = &sim.luf.stats;
            counters.insert("luf_deferred_folios".into(), l.deferred_folios);
            counters.insert("luf_folds".into(), l.folds);
            counters.insert("luf_takeoff_pages".into(), l.takeoff_pages);
            counters.insert("luf_takeoff_clean".into(), l.takeoff_clean);
            counters.insert("luf_takeoff_flushes".into(), l.takeoff_flushes);
            counters.insert("luf_takeoff_flush_ns".into(), l.takeoff_flush_ns.round() as u64);
            for a in crate::mm::luf::Abandon::ALL {
                counters.insert(a.name().into(), l.abandon[a as usize]);
            }
            counters.insert("luf_abandon_flush_ns".into(), l.abandon_ns.round() as u64);
        }
        let per_cpu = PerCpu {
            tlb_shootdowns: sim.cpus.iter().map(|c| c.stats.irq_tlb_count).collect(),
            user_ns: sim.cpus.iter().map(|c| c.stats.user_ns).collect(),
            sys_ns: sim.cpus.iter().map(|c| c.stats.sys_ns + c.stats.irq_ns).collect(),
            context_switches: sim.cpus.iter().map(|c| c.stats.context_switches).collect(),
        };
        let time = Time { elapsed_ns: sim.end_ns, user_ns: sum(|s| s.user_ns), sys_ns: sum(|s| s.sys_ns) + sum(|s| s.irq_ns), irq_ns: sum(|s| s.irq_ns) };
        let kb = |pages: u64| pages * 4;
        let total: u64 = sim.nodes.iter().map(|n| n.nr_pages as u64).sum();
        let (mut anon, mut file, mut mapped, mut pgtable, mut dirty, mut writeback) = (0, 0, 0, 0, 0, 0);
        // As fs/proc/meminfo.c reads the node counters: AnonPages is NR_ANON_MAPPED (mapped anon
        // pages only: an unmapped anon page still held by a per-CPU lru_add batch or an
        // in-flight reclaim is not in it), Mapped is NR_FILE_MAPPED, Cached is the page cache
        // (no swap cache here), Dirty is NR_FILE_DIRTY (file pages only), Writeback NR_WRITEBACK
        // (file pages under the flusher's I/O, mm/page_writeback.rs), PageTables counts
        // page-table pages. Read when the run ends, as `cat /proc/meminfo` after the workload:
        // a workload whose tasks all exited leaves AnonPages, Mapped and PageTables at 0.
        for f in &sim.frames {
            if f.flags & pg::FREE != 0 {
                continue;
            }
            if f.flags & pg::ANON != 0 && f.mapcount > 0 {
                anon += 1;
            }
            if f.flags & pg::FILE != 0 {
                file += 1;
                if f.mapcount > 0 {
                    mapped += 1;
                }
                if f.flags & pg::DIRTY != 0 {
                    dirty += 1;
                }
                if f.flags & pg::WRITEBACK != 0 {
                    writeback += 1;
                }
            }
            if f.flags & pg::PGTABLE != 0 {
                pgtable += 1;
            }
        }
        let meminfo = [
            ("MemTotal", kb(total)),
            ("MemFree", kb(sim.nr_free_pages())),
            ("Cached", kb(file)),
            ("Dirty", kb(dirty)),
            ("Writeback", kb(writeback)),
            ("AnonPages", kb(anon)),
            ("Mapped", kb(mapped)),
            ("PageTables", kb(pgtable)),
            ("SwapTotal", kb(sim.swap.total())),
            ("SwapFree", kb(sim.swap.nr_free())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .chain(hugetlb::meminfo_values(sim))
        .collect();
        Report {
            scenario: sim.cfg.name.clone(),
            seed: sim.cfg.int("run.seed") as u64,
            outcome: format!("{outcome:?}"),
            counters,
            per_cpu,
            time,
            meminfo,
            errors: sim.workload_errors.clone(),
            lock_stat: lock_stat::lock_stat_rows(sim),
            profile: match &sim.profile_window {
                Some(w) => lock_stat::profile_rows_window(w).unwrap_or_default(),
                None => lock_stat::profile_rows(sim),
            },
            profile_window_ns: sim.profile_window.as_ref().map(|w| w.first.as_ref().zip(w.last.as_ref()).map(|(a, b)| (a.t_ns, b.t_ns))),
            timeline: timeline::TimelineReport::from_sim(sim),
            tiering: tiering::TieringReport::from_sim(sim),
            zoneinfo: zoneinfo::ZoneInfo::from_sim(sim),
            kver: sim.p.kver,
            flush_alt: sim.flush_alt_report(),
        }
    }

    /// The header and `TLB:` lines of /proc/interrupts (arch/x86/kernel/irq.c, prec = 3).
    pub fn proc_interrupts(&self) -> String {
        let mut s = format!("{:11}", "");
        for i in 0..self.per_cpu.tlb_shootdowns.len() {
            let _ = write!(s, "CPU{i:<8}");
        }
        s.push('\n');
        s.push_str("TLB: ");
        for v in &self.per_cpu.tlb_shootdowns {
            let _ = write!(s, "{v:10} ");
        }
        s.push_str("  TLB shootdowns\n");
        s
    }

    /// /proc/vmstat lines for the modelled events.
    pub fn proc_vmstat(&self) -> String {
        let kernel: String = VmEvent::ALL.iter().filter_map(|e| self.counters.get(e.kernel_name()).map(|v| format!("{} {}\n", e.kernel_name(), v))).collect();
        kernel + &self.counters.iter().filter(|(k, _)| k.starts_with("luf_")).map(|(k, v)| format!("{k} {v}\n")).collect::<String>()
    }

    /// /proc/meminfo lines.
    pub fn proc_meminfo(&self) -> String {
        ["MemTotal", "MemFree", "Cached", "Dirty", "AnonPages", "Mapped", "PageTables", "SwapTotal", "SwapFree"]
            .iter()
            .map(|k| format!("{:<16}{:>8} kB\n", format!("{k}:"), self.meminfo[*k]))
            .collect::<String>()
            + &hugetlb::meminfo_lines(&self.meminfo)
    }

    /// `perf stat -e dTLB-loads,dTLB-load-misses,...` style output.
    pub fn perf_stat(&self) -> String {
        let c = |k: &str| self.counters[k];
        let pct = |a: u64, b: u64| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
        let mut s = format!("\n Performance counter stats for 'mmsim run {}' (simulated, seed {}):\n\n", self.scenario, self.seed);
        let line = |s: &mut String, v: u64, name: &str, note: String| {
            let _ = writeln!(s, "{:>18}      {:<26}{}", group(v), name, note);
        };
        line(&mut s, c("dTLB-loads"), "dTLB-loads", String::new());
        line(&mut s, c("dTLB-load-misses"), "dTLB-load-misses", format!("#  {:5.2}% of all dTLB cache accesses", pct(c("dTLB-load-misses"), c("dTLB-loads"))));
        line(&mut s, c("dTLB-stores"), "dTLB-stores", String::new());
        line(&mut s, c("dTLB-store-misses"), "dTLB-store-misses", String::new());
        line(&mut s, c("iTLB-load-misses"), "iTLB-load-misses", String::new());
        line(&mut s, c("tlb:tlb_flush"), "tlb:tlb_flush", String::new());
        line(&mut s, c("context-switches"), "context-switches", String::new());
        line(&mut s, c("pgfault"), "page-faults", String::new());
        let secs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
        let _ = writeln!(s, "\n{:>20} seconds time elapsed\n", secs(self.time.elapsed_ns));
        let _ = writeln!(s, "{:>20} seconds user", secs(self.time.user_ns));
        let _ = writeln!(s, "{:>20} seconds sys\n", secs(self.time.sys_ns));
        s
    }

    /// /proc/zoneinfo (each node's zone, its watermarks and pcp lists).
    pub fn proc_zoneinfo(&self) -> String {
        zoneinfo::format(&self.zoneinfo, self.kver)
    }

    /// /proc/lock_stat.
    pub fn proc_lock_stat(&self) -> String {
        lock_stat::format_lock_stat(&self.lock_stat)
    }

    /// perf report --children over the simulated busy time.
    pub fn profile_report(&self) -> String {
        lock_stat::format_profile(&self.profile, &self.scenario, self.profile_window_ns)
    }

    /// `--only summary`: the scenario, seed, outcome, workload errors and the one-line totals
    /// (the head of `human()`, before the /proc files).
    pub fn summary(&self) -> String {
        let h = self.human();
        let head = h.split("==> /proc/interrupts <==").next().unwrap_or("");
        format!("{}\n", head.trim_end())
    }

    /// Everything a person reads after `mmsim run`.
    pub fn human(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "mmsim: scenario {} seed {} — {}", self.scenario, self.seed, self.outcome);
        for e in &self.errors {
            let _ = writeln!(s, "workload error: {e}");
        }
        let shoot: u64 = self.per_cpu.tlb_shootdowns.iter().sum();
        let _ = writeln!(
            s,
            "simulated {:.3} ms: {} TLB shootdown IRQs, {} remote flush requests, {} page faults\n",
            self.time.elapsed_ns as f64 / 1e6,
            shoot,
            self.counters["nr_tlb_remote_flush"],
            self.counters["pgfault"]
        );
        if let Some(f) = &self.flush_alt {
            let _ = writeln!(s, "{}\n", f.summary);
        }
        s.push_str("==> /proc/interrupts <==\n");
        s.push_str(&self.proc_interrupts());
        s.push_str("\n==> /proc/vmstat <==\n");
        s.push_str(&self.proc_vmstat());
        s.push_str("\n==> /proc/meminfo <==\n");
        s.push_str(&self.proc_meminfo());
        s.push_str(&self.perf_stat());
        if let Some(t) = &self.tiering {
            s.push_str("\n==> memory tiers <==\n");
            s.push_str(&t.format());
        }
        s
    }
}

/// 1234567 → "1,234,567" (perf's thousands grouping).
pub fn group(v: u64) -> String {
    let d = v.to_string();
    let mut out = String::new();
    for (i, ch) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn grouping() {
        assert_eq!(super::group(0), "0");
        assert_eq!(super::group(999), "999");
        assert_eq!(super::group(1234567), "1,234,567");
    }
}
