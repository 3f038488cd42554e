//! `mmsim bench`: simulated page accesses per second on a TLB-hit-heavy and a miss-heavy stream,
//! each next to a speed-of-light loop (a bare hashed lookup over the same stream) timed in the
//! same run. Wall-clock time is read here only, never in simulation code.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde::Serialize;

use crate::config::Config;
use crate::sim::Sim;

#[derive(Clone, Debug, Serialize)]
pub struct Stream {
    pub accesses: u64,
    pub accesses_per_s: f64,
    pub speed_of_light_per_s: f64,
    pub ratio: f64,
    pub tlb_miss_rate: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    pub hit_heavy: Stream,
    pub miss_heavy: Stream,
    /// Host bytes per simulated 4 KiB frame (frame table, whose entries also carry the buddy
    /// and LRU links, plus the page tables at their peak), measured on the miss-heavy machine
    /// (1 GiB mapped of its 2 GiB).
    pub host_bytes_per_frame: f64,
    /// Of which the frame table's (`size_of::<Frame>()`).
    pub frame_table_bytes_per_frame: f64,
    /// Of which the page tables', at their peak (`Sim::pgtable_pages_peak` x 4 KiB).
    pub page_table_bytes_per_frame: f64,
}

/// The scenario of each stream: one thread, uniform accesses over `ws_mib`, 80% reads.
fn config(ws_mib: f64, accesses: u64, mem_mib: u64) -> Config {
    Config::defaults(&[
        "machine.cpus=1".into(),
        format!("machine.mem_per_node_mib={mem_mib}"),
        "workload.kind=synthetic".into(),
        format!("workload.working_set_mib={ws_mib}"),
        format!("workload.accesses_per_thread={accesses}"),
        "workload.pattern=uniform".into(),
        "workload.text_pages=0".into(),
        "run.max_sim_ms=100000000".into(),
    ])
    .expect("bench config is valid")
}

/// The speed-of-light loop: the same address stream (same generator) resolved by a bare
/// open-addressing hash lookup vpn → frame, with nothing else.
fn speed_of_light(ws_pages: u64, accesses: u64, seed: u64) -> f64 {
    let mut table = vec![u64::MAX; (ws_pages * 2).next_power_of_two() as usize];
    let mask = table.len() as u64 - 1;
    let base = 0x7f00_0000u64;
    for p in 0..ws_pages {
        let k = base + p;
        let mut i = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20 & mask;
        while table[i as usize] != u64::MAX {
            i = (i + 1) & mask;
        }
        table[i as usize] = k;
    }
    let mut prng = crate::engine::prng::Prng::new(seed);
    let t = Instant::now();
    let mut found = 0u64;
    for _ in 0..accesses {
        let k = base + prng.below(ws_pages);
        let _w = prng.below(100);
        let mut i = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20 & mask;
        while table[i as usize] != k {
            i = (i + 1) & mask;
        }
        found = found.wrapping_add(i);
    }
    std::hint::black_box(found);
    accesses as f64 / t.elapsed().as_secs_f64()
}

fn stream(ws_mib: f64, accesses: u64) -> (Stream, f64, f64) {
    let cfg = config(ws_mib, accesses, ((ws_mib * 2.0) as u64).max(64));
    let mut sim = Sim::build(&cfg).expect("bench builds");
    let t = Instant::now();
    sim.run(|_| {});
    let dt = t.elapsed().as_secs_f64();
    let st = &sim.cpus[0].stats;
    let misses = st.dtlb_load_misses + st.dtlb_store_misses;
    let total = st.dtlb_loads + st.dtlb_stores;
    let frames = sim.frames.len() as f64;
    // The page tables at their largest (every mm has exited by now, and freed its tables).
    let pt_bytes = (sim.pgtable_pages_peak * 4096) as f64;
    // With the frame table: `folio_last_cpupid()`'s table, if the run allocated it (NUMA
    // balancing only).
    let cpupid_bytes = sim.last_cpupid.bytes() as f64;
    let per_s = accesses as f64 / dt;
    let sol = speed_of_light(((ws_mib * 256.0).round() as u64).max(1), accesses, 1);
    (Stream { accesses, accesses_per_s: per_s, speed_of_light_per_s: sol, ratio: per_s / sol, tlb_miss_rate: misses as f64 / total.max(1) as f64 }, pt_bytes / frames, cpupid_bytes / frames)
}

pub fn run(accesses: u64) -> BenchResult {
    // Hit-heavy: 32 pages (128 KiB) fit the 64-entry, 4-way L1 dTLB.
    let (hit, _, _) = stream(0.125, accesses.max(1));
    // Miss-heavy: 1 GiB uniform, far beyond the 1536-entry STLB.
    let (miss, pt, cpupid) = stream(1024.0, accesses.max(1) / 4);
    let ft = std::mem::size_of::<crate::sim::Frame>() as f64 + cpupid;
    BenchResult { hit_heavy: hit, miss_heavy: miss, host_bytes_per_frame: ft + pt, frame_table_bytes_per_frame: ft, page_table_bytes_per_frame: pt }
}

pub fn cli(accesses: u64, json: Option<PathBuf>) -> ExitCode {
    let r = run(accesses);
    for (name, s) in [("hit-heavy", &r.hit_heavy), ("miss-heavy", &r.miss_heavy)] {
        println!(
            "{name:<10} {:>8.1} M accesses/s   speed of light {:>8.1} M/s   ratio {:.2}   TLB miss rate {:.1}%",
            s.accesses_per_s / 1e6,
            s.speed_of_light_per_s / 1e6,
            s.ratio,
            100.0 * s.tlb_miss_rate
        );
    }
    println!(
        "host memory: {:.1} bytes per simulated 4 KiB frame (frame table {:.1}, page tables at their peak {:.1}; miss-heavy machine, half its memory mapped)",
        r.host_bytes_per_frame, r.frame_table_bytes_per_frame, r.page_table_bytes_per_frame
    );
    if let Some(p) = json {
        if let Err(e) = crate::output::write_json(&p, &r) {
            eprintln!("mmsim bench: {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// One point of `mmsim bench --scaling`.
#[derive(Clone, Debug, Serialize)]
pub struct ScalingPoint {
    pub sweep: &'static str,
    pub cpus: u64,
    pub mem_gib: u64,
    /// The up-front estimate (src/config/estimate.rs), bytes.
    pub estimate_bytes: u64,
    /// Measured after the run, bytes: the frame table's written part (the host backs no
    /// other) and the page tables at their peak.
    pub frame_table_bytes: u64,
    pub page_table_bytes: u64,
    pub build_s: f64,
    pub run_s: f64,
    pub accesses: u64,
    /// Why the point was not run (the estimate refused it, or it would take more than half of
    /// this host's available memory while other work shares it).
    pub skipped: Option<String>,
}

/// The workload of every scaling point: one process, one thread per CPU, `SCALING_ACCESSES`
/// accesses in all, uniform over a 256 MiB working set (or a quarter of memory if smaller),
/// 80% reads. Fixed work, so the table shows what the machine's size costs by itself.
pub const SCALING_ACCESSES: u64 = 4_000_000;

fn scaling_config(cpus: u64, mem_gib: u64) -> Result<Config, crate::config::ConfigError> {
    let ws = (mem_gib * 1024 / 4).min(256);
    Config::defaults(&[
        format!("machine.cpus={cpus}"),
        format!("machine.mem_per_node_mib={}", mem_gib * 1024),
        "workload.kind=synthetic".into(),
        format!("workload.threads={cpus}"),
        format!("workload.working_set_mib={ws}"),
        format!("workload.accesses_per_thread={}", (SCALING_ACCESSES / cpus).max(1)),
        "workload.pattern=uniform".into(),
        "run.max_sim_ms=100000000".into(),
    ])
}

fn scaling_point(sweep: &'static str, cpus: u64, mem_gib: u64) -> ScalingPoint {
    let mut p = ScalingPoint { sweep, cpus, mem_gib, estimate_bytes: 0, frame_table_bytes: 0, page_table_bytes: 0, build_s: 0.0, run_s: 0.0, accesses: 0, skipped: None };
    let cfg = match scaling_config(cpus, mem_gib) {
        Ok(c) => c,
        Err(e) => {
            p.skipped = Some(e.to_string());
            return p;
        }
    };
    p.estimate_bytes = crate::config::estimate::host_bytes(&cfg).0;
    if let Some(avail) = crate::config::estimate::host_available_bytes() {
        if p.estimate_bytes > avail / 2 {
            p.skipped = Some(format!("estimate {:.1} GiB is over half of this host's {:.1} GiB available", p.estimate_bytes as f64 / (1u64 << 30) as f64, avail as f64 / (1u64 << 30) as f64));
            return p;
        }
    }
    let t = Instant::now();
    let mut sim = match Sim::build(&cfg) {
        Ok(s) => s,
        Err(e) => {
            p.skipped = Some(format!("refused: {e}"));
            return p;
        }
    };
    p.build_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    sim.run(|_| {});
    p.run_s = t.elapsed().as_secs_f64();
    p.accesses = sim.cpus.iter().map(|c| c.stats.dtlb_loads + c.stats.dtlb_stores).sum();
    // The part of the frame table the run wrote (the host backs no other: pristine blocks,
    // mm/page_alloc.rs `FreeArea`), and the cpupid table if NUMA balancing allocated it.
    p.frame_table_bytes = sim.frames_written() * std::mem::size_of::<crate::sim::Frame>() as u64 + sim.last_cpupid.bytes() as u64;
    p.page_table_bytes = sim.pgtable_pages_peak * 4096;
    p
}

/// `mmsim bench --scaling`: CPUs 2 → 512 at 4 GiB, memory 1 GiB → 1 TiB at 8 CPUs.
pub fn scaling() -> Vec<ScalingPoint> {
    let mut v: Vec<ScalingPoint> = [2u64, 8, 32, 128, 512].iter().map(|&c| scaling_point("cpus", c, 4)).collect();
    v.extend([1u64, 4, 16, 64, 256, 1024].iter().map(|&g| scaling_point("memory", 8, g)));
    v
}

pub fn scaling_cli(json: Option<PathBuf>) -> ExitCode {
    let pts = scaling();
    println!("{:<7} {:>5} {:>9} {:>12} {:>12} {:>9} {:>9} {:>12}", "sweep", "cpus", "mem GiB", "estimate MiB", "frames MiB", "build s", "run s", "M access/s");
    for p in &pts {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        match &p.skipped {
            Some(why) => println!("{:<7} {:>5} {:>9} {:>12.0} skipped: {why}", p.sweep, p.cpus, p.mem_gib, mib(p.estimate_bytes)),
            None => println!(
                "{:<7} {:>5} {:>9} {:>12.0} {:>12.0} {:>9.2} {:>9.2} {:>12.1}",
                p.sweep,
                p.cpus,
                p.mem_gib,
                mib(p.estimate_bytes),
                mib(p.frame_table_bytes + p.page_table_bytes),
                p.build_s,
                p.run_s,
                p.accesses as f64 / p.run_s.max(1e-9) / 1e6
            ),
        }
    }
    if let Some(p) = json {
        if let Err(e) = crate::output::write_json(&p, &pts) {
            eprintln!("mmsim bench: {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
