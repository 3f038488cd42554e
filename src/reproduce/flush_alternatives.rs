//! `mmsim reproduce flush-alternatives` (issue 15): the same workloads under Linux 6.18's IPI
//! shootdowns, the seeds' own mechanisms switched off, AMD INVLPGB (arch/x86/mm/invlpgb.rs),
//! the Intel RAR RFC (rar.rs) and LATR lazy shootdown (mm/latr.rs); shootdown IRQs, remote flush
//! requests, flush-related CPU time (kernel/profile.rs) and elapsed time; one table, one SVG
//! plot. Published figures are printed beside, never used: docs/flush-alternatives.md.
//!
//! Workloads: scenarios/munmap-storm.toml; scenarios/lru-file-mmap-read.toml (seed 002's
//! workload) run as linux-6.18 (INVLPGB needs 6.15+); scenarios/numa-hint-faults.toml (the
//! shipped NUMA run: the seed-001 reproduction is being built elsewhere); the LUF workload does
//! not exist yet and is a row saying so.

use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rayon::prelude::*;
use serde::Serialize;

use crate::kernel::profile::KFn;
use crate::sim::Sim;

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workload: String,
    pub mechanism: String,
    /// None: the workload does not exist yet (`note` says so).
    pub shootdown_irqs: Option<u64>,
    pub remote_flush_requests: Option<u64>,
    /// flush_tlb_mm_range + try_to_unmap_flush + IPI handlers (sysvec_call_function) + INVLPGB
    /// issued from arch_tlbbatch_add_pending + LATR entries applied at a context switch, ms.
    pub flush_cpu_ms: Option<f64>,
    pub elapsed_ms: Option<f64>,
    /// INVLPGB / TLBSYNC / RAR / LATR counters (the run's summary line).
    pub counters: String,
    pub note: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Published {
    pub mechanism: String,
    pub source: String,
    pub figure: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Output {
    pub experiment: String,
    pub rows: Vec<Row>,
    pub published: Vec<Published>,
}

const AMD: [&str; 2] = ["machine.cpu_vendor=\"amd\"", "machine.invlpgb=true"];

/// (name, scenario, sets for every run, the seed's own mechanism switched off).
const WORKLOADS: &[(&str, &str, &[&str], Option<(&str, &[&str])>)] = &[
    ("munmap-storm", "scenarios/munmap-storm.toml", &[], None),
    ("lru-file-mmap-read (seed 002)", "scenarios/lru-file-mmap-read.toml", &["kernel.preset=\"linux-6.18\""], Some(("ipi, batched unmap flush off (seed 002 off)", &["kernel.batched_unmap_flush=\"off\""]))),
    ("numa-hint-faults (seed 001's mechanism)", "scenarios/numa-hint-faults.toml", &[], Some(("ipi, delayed NUMA mapping off (seed 001 off)", &["kernel.numa_delayed_map=\"off\""]))),
];

fn mechanisms() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("ipi (linux-6.18)", vec![]),
        ("invlpgb", AMD.to_vec()),
        ("invlpgb, every mm global", vec![AMD[0], AMD[1], "kernel.global_asid_eager=true"]),
        ("rar (RFC)", vec!["machine.rar=true"]),
        ("rar (RFC), every mm global", vec!["machine.rar=true", "kernel.global_asid_eager=true"]),
        ("latr", vec!["kernel.flush_policy=\"latr\""]),
    ]
}

fn run_one(workload: &str, path: &str, sets: Vec<String>, mechanism: &str) -> Result<Row, String> {
    let cfg = crate::config::load(Path::new(path), &sets).map_err(|e| e.to_string())?;
    let mut sim = Sim::build(&cfg).map_err(|e| e.to_string())?;
    let outcome = sim.run(|_| {});
    let report = crate::report::Report::from_sim(&sim, outcome);
    let p = &sim.prof;
    let mut flush_ns = (p.children_ns(KFn::FlushTlbMmRange) + p.children_ns(KFn::TryToUnmapFlush) + p.children_ns(KFn::SysvecCallFunction)) as f64;
    flush_ns += sim.bcast.stats.batch_add_ns;
    if let Some(l) = &sim.latr {
        flush_ns += l.stats.apply_switch_ns;
    }
    let counters = report.flush_alt.as_ref().map(|f| f.summary.clone()).unwrap_or_default();
    Ok(Row {
        workload: workload.into(),
        mechanism: mechanism.into(),
        shootdown_irqs: Some(report.per_cpu.tlb_shootdowns.iter().sum()),
        remote_flush_requests: Some(report.counters["nr_tlb_remote_flush"]),
        flush_cpu_ms: Some(flush_ns / 1e6),
        elapsed_ms: Some(report.time.elapsed_ns as f64 / 1e6),
        counters,
        note: String::new(),
    })
}

/// Run every workload under every mechanism (in parallel; results in a fixed order).
pub fn experiment() -> Result<Output, String> {
    let mut jobs: Vec<(String, String, Vec<String>, String)> = Vec::new();
    for &(name, path, base, seed_off) in WORKLOADS {
        let base: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        let mut push = |mech: &str, extra: &[&str]| {
            let mut s = base.clone();
            s.extend(extra.iter().map(|x| x.to_string()));
            jobs.push((name.to_string(), path.to_string(), s, mech.to_string()));
        };
        let mechs = mechanisms();
        push(mechs[0].0, &mechs[0].1);
        if let Some((label, sets)) = seed_off {
            push(label, sets);
        }
        for (m, s) in &mechs[1..] {
            push(m, s);
        }
    }
    let rows: Result<Vec<Row>, String> = jobs.par_iter().map(|(w, p, s, m)| run_one(w, p, s.clone(), m)).collect();
    let mut rows = rows?;
    rows.push(Row {
        workload: "LUF (migrate/reclaim unmap flush deferral)".into(),
        mechanism: "-".into(),
        shootdown_irqs: None,
        remote_flush_requests: None,
        flush_cpu_ms: None,
        elapsed_ms: None,
        counters: String::new(),
        note: "not yet available: the LUF workload is not in mmsim yet".into(),
    });
    Ok(Output { experiment: "flush-alternatives".into(), rows, published: published() })
}

/// Published figures, printed beside the simulated ones (never used by the model).
pub fn published() -> Vec<Published> {
    vec![
        Published {
            mechanism: "invlpgb".into(),
            source: "Rik van Riel, \"AMD broadcast TLB invalidation\" cover letter (v5..v14, lore 20250226030129.530345-1-riel@surriel.com), will-it-scale tlb_flush2_threads, AMD Milan, 36 cores".into(),
            figure: "TLB invalidation 40% -> ~4% of CPU time; loops/s 527k -> 527k (INVLPGB alone: contention moves to the LRU lock), 731k -> 1157k with the lru_add_drain removal".into(),
        },
        Published { mechanism: "rar (RFC)".into(), source: "x86/mm: Intel RAR TLB invalidation RFC (2025)".into(), figure: "none comparable (no workload figure in the posting we cite)".into() },
        Published {
            mechanism: "latr".into(),
            source: "Kumar et al., LATR: Lazy Translation Coherence, ASPLOS'18".into(),
            figure: "munmap cost -70.8%; Apache throughput +59.9% (2-socket, 16-core and 8-socket 120-core Xeons)".into(),
        },
    ]
}

fn cell(v: Option<f64>, prec: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}"))
}

/// The table as text.
pub fn table(out: &Output) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<40} {:<44} {:>9} {:>8} {:>10} {:>10}", "workload", "mechanism", "TLB IRQs", "flushes", "flush ms", "elapsed ms");
    for r in &out.rows {
        let _ = writeln!(
            s,
            "{:<40} {:<44} {:>9} {:>8} {:>10} {:>10}{}",
            r.workload,
            r.mechanism,
            r.shootdown_irqs.map_or("-".into(), |v| v.to_string()),
            r.remote_flush_requests.map_or("-".into(), |v| v.to_string()),
            cell(r.flush_cpu_ms, 3),
            cell(r.elapsed_ms, 3),
            if r.note.is_empty() { String::new() } else { format!("  {}", r.note) }
        );
        if !r.counters.is_empty() {
            let _ = writeln!(s, "{:<40}   {}", "", r.counters);
        }
    }
    let _ = writeln!(s, "\npublished (not comparable one to one: other machines and workloads):");
    for p in &out.published {
        let _ = writeln!(s, "  {}: {} ({})", p.mechanism, p.figure, p.source);
    }
    s
}

/// One plot: flush CPU time of each mechanism as % of its workload's IPI baseline.
pub fn plot_svg(out: &Output) -> Result<String, String> {
    use plotters::prelude::*;
    let mut bars: Vec<(String, f64, usize)> = Vec::new();
    let mut base = 0.0;
    let mut w = 0usize;
    let mut last = String::new();
    for r in &out.rows {
        let Some(v) = r.flush_cpu_ms else { continue };
        if r.workload != last {
            last = r.workload.clone();
            base = v;
            w += 1;
        }
        let pct = if base > 0.0 { 100.0 * v / base } else { 0.0 };
        bars.push((format!("{} | {}", r.workload.split(' ').next().unwrap_or(""), r.mechanism), pct, w));
    }
    let mut buf = String::new();
    {
        let h = 40 + 22 * bars.len() as u32;
        let root = SVGBackend::with_string(&mut buf, (900, h)).into_drawing_area();
        let e = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let ymax = bars.iter().map(|b| b.1).fold(100.0f64, f64::max) * 1.1;
        let n = bars.len() as u32;
        let mut chart = ChartBuilder::on(&root)
            .caption("flush-related CPU time, % of the workload's IPI baseline (mmsim, simulated)", ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(380)
            .build_cartesian_2d(0f64..ymax, (0u32..n).into_segmented())
            .map_err(|x| e(&x))?;
        let fmt = |v: &SegmentValue<u32>| match v {
            SegmentValue::CenterOf(i) => bars.get(*i as usize).map(|b| b.0.clone()).unwrap_or_default(),
            _ => String::new(),
        };
        chart.configure_mesh().disable_y_mesh().y_label_formatter(&fmt).y_labels(n as usize).x_desc("% of IPI baseline").draw().map_err(|x| e(&x))?;
        let colours = [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let i = i as u32;
                let mut r = Rectangle::new([(0.0, SegmentValue::Exact(i)), (b.1, SegmentValue::Exact(i + 1))], colours[b.2 % colours.len()].filled());
                r.set_margin(3, 3, 0, 0);
                r
            }))
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))?;
    }
    Ok(buf)
}

pub fn cli(json: Option<PathBuf>) -> ExitCode {
    let out = match experiment() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mmsim reproduce flush-alternatives: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", table(&out));
    if let Some(path) = json {
        if let Err(e) = crate::output::write_json(&path, &out) {
            eprintln!("mmsim: {}: {e}", path.display());
            return ExitCode::from(1);
        }
        let svg_path = path.with_extension("svg");
        match plot_svg(&out) {
            Ok(svg) => {
                if let Err(e) = crate::output::write_atomic(&svg_path, svg.as_bytes()) {
                    eprintln!("mmsim: {}: {e}", svg_path.display());
                    return ExitCode::from(1);
                }
                println!("plot: {}", svg_path.display());
            }
            Err(e) => {
                eprintln!("mmsim: plot: {e}");
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}
