//! `mmsim reproduce luf`: seed 000 (Byungchul Park, "LUF (Lazy Unmap Flush) reducing tlb numbers
//! over 90%", v10, lore:20240510065206.76078-1-byungchul@sk.com; never merged), three llama.cpp
//! processes on 70 GB models on a DRAM + CXL machine (issue 12, item 3).
//!
//! The seed's setup (mechanisms.md §3 and §6, ../shared/seeds/000_*.txt): Xeon Gold 6430, one
//! socket, 64 CPUs (32 cores with hyperthreads); node 0 with every CPU and 42 GB of DRAM, node 1
//! CPU-less with a 98 GB CXL expander; swap off, `kernel.numa_balancing=2` (tiering), demotion
//! enabled; three `llama.cpp/main -m <70G model> -p "who are you?" -s 1 -t 15 -n 20` at once
//! (15 threads each, a 5-token prompt (BOS + 4) in one pass and 19 evaluated tokens = 24 timed tokens); caches dropped between runs.
//! The workload is `workload.kind = "llm"` (src/workload/llm.rs, docs/llm.md).
//!
//! Columns: BEFORE is the linux-6.9 preset with `kernel.luf=off`, AFTER the same preset with
//! `kernel.luf=v10` (v10 was posted on akpm's mm-unstable of April 2024, which became 6.10;
//! nothing else differs); AFTER v12 is the linux-6.14 preset with `kernel.luf=v12` (RFC v12 was
//! reposted on v6.14-rc4), so that column also carries whatever else 6.9 → 6.14 changes in the
//! model (printed with the results).
//!
//! Scale. `--scale K` divides the memory of both nodes and the three models by K and keeps the
//! CPUs, the threads and the tokens; the NUMA-balancing scan delay, periods, scan size and hot
//! threshold are divided by K too (simulated time shrinks about K-fold with the models), as in
//! `reproduce numa-delayed-map`. The models are thinned **by layers**: [`layers`]`(K)` =
//! 80 / K layers (rounded, at least 1), each as wide as a full-scale layer (exactly for K
//! dividing 80). Counts (flushes, IRQs, TLB misses, pages demoted/promoted) and times (runtime,
//! allocation-side flush time) are multiplied back by K: an estimate of the full-scale figure.
//! Thinning by layers keeps every per-matrix event (the text footprint fetched at each matrix,
//! ggml's barrier, the output vector's first store, the KV reads) in its full-scale proportion
//! to the weight pages, so those counts scale by K as well. Thinning the matrices instead (80
//! layers of 1/K width, the default before session 8) kept the per-matrix events at their full
//! count and multiplied them by K anyway: at 1/1024 it overstated iTLB misses 280x
//! (docs/luf.md). Beyond K = 80 a single layer is thinned in width too, and the output says so.
//! Published figures appear beside simulated ones and nowhere else.
//!
//! Model departures, stated: llama.cpp's load phase (reading the GGUF header, building the
//! graph) is not simulated, so "total time" here is from the process's start to its last token
//! (every process starts at 0); the runs are one seed each, where the seed ran the set 10 times.

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use crate::config::{Config, ConfigError};
use crate::mm::vmstat::VmEvent;
use crate::sim::Sim;
use crate::workload::Body;

/// The seed's machine and workload.
pub const CPUS: u64 = 64;
/// "DRAM 42GB", "CXL expander 98GB": taken as GiB (numactl -H prints MiB; the cover letter
/// rounds). The 42 GB node is the 64 GB of DRAM less what the firmware and the kernel hold is
/// our reading, not the seed's.
pub const DRAM_MIB: u64 = 42 * 1024;
pub const CXL_MIB: u64 = 98 * 1024;
pub const PROCESSES: u64 = 3;
pub const THREADS: u64 = 15;
/// "70G_model": taken as 70 GiB (Llama 2 70B at 8 bits per weight is ~70 GB).
pub const MODEL_MIB: u64 = 70 * 1024;
/// Llama 2 70B's layers (Touvron et al. 2023; docs/llm.md).
pub const LAYERS: u64 = 80;
/// With `--seeds N`, each thread starts at a time drawn from its run's seed within this many µs
/// (`workload.start_jitter_us`): the workload draws no random numbers, so without it every seed
/// is the same run. Our choice (the seed launches its three processes with `&` and ran its set
/// 10 times; it gives no start times): a perturbation far below a pass's length, enough to
/// sample the run's spread.
pub const SEED_JITTER_US: u64 = 1000;
/// The prompt as llama.cpp evaluates it: "who are you?" is 4 tokens of Llama 2's SentencePiece
/// vocabulary ("▁who", "▁are", "▁you", "?") after the BOS token that `main` adds, so 5 tokens in
/// one pass.
pub const PROMPT_TOKENS: u64 = 5;
/// Generated tokens that are evaluated: `-n 20` samples 20 tokens, but `main`'s loop decodes a
/// sampled token only at its next iteration and ends after the 20th sample, so 19 single-token
/// passes follow the prompt's. That is the seed's "24 tokens" (llama_print_timings' total is
/// n_p_eval + n_eval = 5 + 19). docs/llm.md, "The token count" (until 2026-11-28: 4 + 20, one
/// pass too many).
pub const GEN_TOKENS: u64 = 19;

/// The three kernels of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Off,
    V10,
    V12,
}

impl Kernel {
    pub const ALL: [Kernel; 3] = [Kernel::Off, Kernel::V10, Kernel::V12];
    pub fn preset(self) -> &'static str {
        match self {
            Kernel::Off | Kernel::V10 => "linux-6.9",
            Kernel::V12 => "linux-6.14",
        }
    }
    pub fn luf(self) -> &'static str {
        match self {
            Kernel::Off => "off",
            Kernel::V10 => "v10",
            Kernel::V12 => "v12",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Kernel::Off => "6.9",
            Kernel::V10 => "6.9+v10",
            Kernel::V12 => "6.14+v12",
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct RunResult {
    /// tlb:tlb_flush tracepoint hits, x scale.
    pub tlb_flush_events: f64,
    /// The TLB line of /proc/interrupts summed over the CPUs, x scale.
    pub tlb_shootdown_irqs: f64,
    pub itlb_load_misses: f64,
    pub dtlb_store_misses: f64,
    pub dtlb_load_misses: f64,
    /// Mean over the processes of (last token - start), x scale (s).
    pub runtime_s: f64,
    /// Each process's runtime (s, x scale).
    pub runtime_per_process_s: Vec<f64>,
    /// Time allocating tasks spent in LUF's deferred flushes (`luf_takeoff_end()` /
    /// `check_luf_flush()`; mm/luf.rs `takeoff_flush_ns`), s, x scale.
    pub luf_alloc_flush_s: f64,
    /// Time in flushes run by LUF's abandon triggers, s, x scale.
    pub luf_abandon_flush_s: f64,
    /// Folios freed with a deferred flush, x scale.
    pub luf_deferred_folios: f64,
    /// Flushes run at allocation, x scale.
    pub luf_takeoff_flushes: f64,
    /// Flushes run by abandon triggers (all triggers), x scale.
    pub luf_abandon_flushes: f64,
    /// pgdemote_kswapd + pgdemote_direct, x scale.
    pub pages_demoted: f64,
    /// pgpromote_success, x scale.
    pub pages_promoted: f64,
    pub pgsteal: f64,
    /// Pages read from the file device (the models and the text; pgpgin without swap-ins, in
    /// pages where /proc/vmstat prints kB), x scale.
    pub pages_read: f64,
    /// The file device's bandwidth over the run (pages read x 4 KiB / simulated time, GB/s),
    /// and the bandwidth it is set to: above it, out-of-order bookings overlapped (block/mod.rs)
    /// and the run is shorter than the device allows.
    pub device_gbps: f64,
    pub device_gbps_set: f64,
    /// Simulated time of the run (not scaled back).
    pub sim_s: f64,
    /// Host wall time of the run.
    pub wall_s: f64,
    /// Accesses the LLM threads made (text fetches, loads, stores), not scaled back.
    pub simulated_accesses: u64,
    /// `simulated_accesses` per second of host wall time.
    pub accesses_per_wall_s: f64,
    /// user + sys + irq over all CPUs (ns, not scaled back).
    pub busy_ns: u64,
    pub profile: Vec<crate::report::lock_stat::ProfileRow>,
}

/// Layers of the models at 1/`scale`: 80 / `scale` rounded, at least 1 (see the module's
/// "Scale"). Each layer is then `LAYERS / (scale x layers)` of a full-scale layer's width.
pub fn layers(scale: u64) -> u64 {
    ((LAYERS + scale / 2) / scale.max(1)).max(1)
}

/// Width of each simulated layer against a full-scale layer (1 when `scale` divides 80).
pub fn layer_width(scale: u64) -> f64 {
    LAYERS as f64 / (scale as f64 * layers(scale) as f64)
}

/// The experiment's settings: the seed's machine and workload at 1/`scale`, the kernel.
pub fn base_sets(scale: u64, kernel: Kernel) -> Vec<String> {
    // At least 1: a hot threshold of 0 ms would refuse every promotion candidate.
    let div = |v: u64| (v / scale).max(1);
    vec![
        format!("machine.cpus={CPUS}"),
        "machine.sockets=1".into(),
        "machine.nodes=1".into(),
        format!("machine.mem_per_node_mib={}", div(DRAM_MIB)),
        "machine.cpuless_nodes=1".into(),
        format!("machine.cpuless_mem_mib={}", div(CXL_MIB)),
        "machine.swap_mib=0".into(),
        format!("kernel.preset={}", kernel.preset()),
        format!("kernel.luf={}", kernel.luf()),
        "kernel.numa_balancing=2".into(),
        "vm.demotion_enabled=true".into(),
        format!("kernel.numa_balancing_scan_size_mb={}", div(256)),
        format!("kernel.numa_balancing_scan_delay_ms={}", div(1000)),
        format!("kernel.numa_balancing_scan_period_min_ms={}", div(1000)),
        format!("kernel.numa_balancing_scan_period_max_ms={}", div(60000)),
        format!("kernel.numa_balancing_hot_threshold_ms={}", div(1000)),
        // A liveness bound far beyond the run (the seed's runs took ~1000 s at full scale).
        "run.max_sim_ms=100000000".into(),
        "run.seed=1".into(),
        "workload.kind=llm".into(),
        format!("workload.llm.processes={PROCESSES}"),
        format!("workload.llm.threads={THREADS}"),
        format!("workload.llm.model_mib={}", div(MODEL_MIB)),
        format!("workload.llm.layers={}", layers(scale)),
        format!("workload.llm.prompt_tokens={PROMPT_TOKENS}"),
        format!("workload.llm.gen_tokens={GEN_TOKENS}"),
    ]
}

pub fn config(scale: u64, kernel: Kernel, sets: &[String]) -> Result<Config, ConfigError> {
    let mut all = base_sets(scale, kernel);
    all.extend(sets.iter().cloned());
    Config::with_threads(&all, Vec::new())
}

/// Weight pages done and planned over every LLM thread (for the progress bar).
fn llm_progress(sim: &Sim) -> (u64, u64) {
    let mut done = 0;
    let mut all = 0;
    for t in &sim.tasks {
        if let Some(Body::Llm(st)) = t.prog.as_deref().map(|p| &p.body) {
            let (d, a) = st.progress();
            done += d;
            all += a;
        }
    }
    (done, all)
}

/// One run. `bar`, if given, shows the share of weight pages done.
pub fn run_one(scale: u64, kernel: Kernel, sets: &[String], bar: Option<&indicatif::ProgressBar>) -> Result<RunResult, ConfigError> {
    let wall = std::time::Instant::now();
    let cfg = config(scale, kernel, sets)?;
    let mut sim = Sim::build(&cfg)?;
    if let Some(b) = bar {
        b.set_length(llm_progress(&sim).1.max(1));
    }
    sim.run_observed(|s| {
        if let Some(b) = bar {
            b.set_position(llm_progress(s).0);
        }
    });
    let k = scale as f64;
    let sum = |f: fn(&crate::sim::CpuStats) -> u64| sim.cpus.iter().map(|c| f(&c.stats)).sum::<u64>() as f64 * k;
    // Per process: the latest last-token time of its threads.
    let mut last: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    let mut accesses = 0u64;
    for t in &sim.tasks {
        if let Some(Body::Llm(st)) = t.prog.as_deref().map(|p| &p.body) {
            accesses += st.accesses;
            let e = last.entry(t.tgid).or_insert(0);
            *e = (*e).max(st.last_token_ns.unwrap_or(sim.end_ns));
        }
    }
    let runtime_per_process_s: Vec<f64> = last.values().map(|&ns| ns as f64 / 1e9 * k).collect();
    let runtime_s = runtime_per_process_s.iter().sum::<f64>() / runtime_per_process_s.len().max(1) as f64;
    let l = &sim.luf.stats;
    let user: u64 = sim.cpus.iter().map(|c| c.stats.user_ns).sum();
    let sys: u64 = sim.cpus.iter().map(|c| c.stats.sys_ns).sum();
    let irq: u64 = sim.cpus.iter().map(|c| c.stats.irq_ns).sum();
    let ev = |e: VmEvent| sim.vmstat.get(e) as f64 * k;
    let wall_s = wall.elapsed().as_secs_f64();
    Ok(RunResult {
        tlb_flush_events: sum(|s| s.tlb_flush_events),
        tlb_shootdown_irqs: sum(|s| s.irq_tlb_count),
        itlb_load_misses: sum(|s| s.itlb_misses),
        dtlb_store_misses: sum(|s| s.dtlb_store_misses),
        dtlb_load_misses: sum(|s| s.dtlb_load_misses),
        runtime_s,
        runtime_per_process_s,
        luf_alloc_flush_s: l.takeoff_flush_ns / 1e9 * k,
        luf_abandon_flush_s: l.abandon_ns / 1e9 * k,
        luf_deferred_folios: l.deferred_folios as f64 * k,
        luf_takeoff_flushes: l.takeoff_flushes as f64 * k,
        luf_abandon_flushes: l.abandon.iter().sum::<u64>() as f64 * k,
        pages_demoted: ev(VmEvent::PGDEMOTE_KSWAPD) + ev(VmEvent::PGDEMOTE_DIRECT),
        pages_promoted: ev(VmEvent::PGPROMOTE_SUCCESS),
        pgsteal: ev(VmEvent::PGSTEAL_KSWAPD) + ev(VmEvent::PGSTEAL_DIRECT),
        pages_read: sim.blkdev[crate::block::Dev::File as usize].pages as f64 * k,
        device_gbps: sim.blkdev[crate::block::Dev::File as usize].pages as f64 * 4096.0 / (sim.end_ns.max(1) as f64),
        device_gbps_set: sim.p.block_read_bytes_per_ns,
        sim_s: sim.end_ns as f64 / 1e9,
        wall_s,
        simulated_accesses: accesses,
        accesses_per_wall_s: accesses as f64 / wall_s.max(1e-9),
        busy_ns: user + sys + irq,
        profile: crate::report::lock_stat::profile_rows(&sim),
    })
}

#[derive(Clone, Debug, Serialize)]
pub struct Published {
    pub before: f64,
    pub after: f64,
    /// v12's figure where the seed or the spec gives one (shootdown IRQs, runtime).
    pub after_v12: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Simulated {
    pub before: f64,
    pub after: f64,
    pub after_v12: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub metric: String,
    /// None where the seed gives no figure (LUF's own counters).
    pub published: Option<Published>,
    /// With `--seeds N`: the means over the seeds.
    pub simulated: Simulated,
    /// With `--seeds N`: each seed's figure (seed 1 first); `simulated` is their mean.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_seed: Option<PerSeed>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PerSeed {
    pub before: Vec<f64>,
    pub after: Vec<f64>,
    pub after_v12: Vec<f64>,
}

#[derive(Serialize)]
pub struct Out {
    pub experiment: &'static str,
    pub rows: Vec<Row>,
    /// Memory and models divided by this, counts and times multiplied back.
    pub scale: u64,
    /// `--seeds N` (runs with start jitter, seeds 1..=N); absent for the single run per kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seeds: Option<u64>,
    pub runs: Vec<RunSummary>,
    pub notes: Vec<String>,
}

/// Host-side facts of one run, for the record (not compared with anything).
#[derive(Serialize)]
pub struct RunSummary {
    pub kernel: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub preset: &'static str,
    pub luf: &'static str,
    pub sim_s: f64,
    pub wall_s: f64,
    pub simulated_accesses: u64,
    pub accesses_per_wall_s: f64,
    pub runtime_per_process_s: Vec<f64>,
}

/// The seed's /proc/interrupts TLB line (64 CPUs), summed: BEFORE 12,512,508,160 and AFTER
/// 569,270,346 (computed from the 64 numbers of each table in ../shared/seeds/000_*.txt;
/// /proc/interrupts counts since boot, and the seed does not say how many of its 10 runs the
/// line spans).
pub const PUBLISHED_IRQS: (f64, f64) = (12_512_508_160.0, 569_270_346.0);
/// Mean of the seed's 30 "total time" lines per kernel (10 runs x 3 processes), in s:
/// BEFORE 1052.527 s, AFTER 996.377 s (-5.33%).
pub const PUBLISHED_RUNTIME_S: (f64, f64) = (1052.526_659_7, 996.376_837_7);
/// v12 (RFC, lore:20250220052027.58847-1-byungchul@sk.com, mechanisms.md §3): shootdown IRQs
/// -97%, runtime -4.5%, given only as changes: applied to the v10 posting's BEFORE.
pub const PUBLISHED_V12_CHANGE: (f64, f64) = (-0.97, -0.045);

/// The seed's figures, printed beside the simulated ones and used for nothing else:
/// (metric, before, after, after_v12).
fn published() -> Vec<(&'static str, Option<Published>)> {
    let p = |b: f64, a: f64, v12: Option<f64>| Some(Published { before: b, after: a, after_v12: v12 });
    vec![
        ("tlb_flush_events", p(1_357_543_886.0, 69_175_002.0, None)),
        ("tlb_shootdown_irqs", p(PUBLISHED_IRQS.0, PUBLISHED_IRQS.1, Some(PUBLISHED_IRQS.0 * (1.0 + PUBLISHED_V12_CHANGE.0)))),
        ("itlb_load_misses", p(327_092_903.0, 64_055_579.0, None)),
        ("dtlb_store_misses", p(2_017_751_856.0, 861_144_167.0, None)),
        ("dtlb_load_misses", p(3_163_679_332.0, 2_394_694_609.0, None)),
        ("runtime_s", p(PUBLISHED_RUNTIME_S.0, PUBLISHED_RUNTIME_S.1, Some(PUBLISHED_RUNTIME_S.0 * (1.0 + PUBLISHED_V12_CHANGE.1)))),
        ("luf_alloc_flush_s", None),
        ("pages_demoted", None),
        ("pages_promoted", None),
    ]
}

/// The largest `--scale` (one layer of 1/1024 the width, see [`layers`]).
pub const MAX_SCALE: u64 = 1024;

/// The headline figures against issue 12's bands ("Done when"), for v10 (the AFTER the seed
/// measured): shootdown IRQs and tlb_flush events down at least 85%, iTLB misses down at least
/// 50%, dTLB store misses down more than dTLB load misses, runtime down 1-10%.
pub fn checks(out: &Out) -> Vec<super::summary::Check> {
    use super::summary::{reduction_pct, Band, Check};
    const ISSUE: &str = "issue 12";
    let row = |metric: &str| out.rows.iter().find(|r| r.metric == metric).expect("a row of experiment()");
    let pubd = |metric: &str| row(metric).published.as_ref().map(|p| reduction_pct(p.before, p.after));
    let sim = |metric: &str| reduction_pct(row(metric).simulated.before, row(metric).simulated.after);
    let mut c: Vec<Check> = [("tlb_shootdown_irqs", 85.0), ("tlb_flush_events", 85.0), ("itlb_load_misses", 50.0)]
        .into_iter()
        .map(|(m, lo)| Check::new("luf", format!("{m} reduction % (v10)"), pubd(m), sim(m), Band::AtLeast { lo }, ISSUE))
        .collect();
    let dtlb = |f: &dyn Fn(&str) -> Option<f64>| Some(f("dtlb_store_misses")? - f("dtlb_load_misses")?);
    c.push(Check::new("luf", "dTLB store minus load miss reduction (points)", dtlb(&pubd), dtlb(&|m| Some(sim(m))).expect("simulated"), Band::Above { lo: 0.0 }, ISSUE));
    c.push(Check::new("luf", "runtime reduction % (v10)", pubd("runtime_s"), sim("runtime_s"), Band::Range { lo: 1.0, hi: 10.0 }, ISSUE));
    c
}

fn value(r: &RunResult, metric: &str) -> f64 {
    match metric {
        "tlb_flush_events" => r.tlb_flush_events,
        "tlb_shootdown_irqs" => r.tlb_shootdown_irqs,
        "itlb_load_misses" => r.itlb_load_misses,
        "dtlb_store_misses" => r.dtlb_store_misses,
        "dtlb_load_misses" => r.dtlb_load_misses,
        "runtime_s" => r.runtime_s,
        "luf_alloc_flush_s" => r.luf_alloc_flush_s,
        "pages_demoted" => r.pages_demoted,
        "pages_promoted" => r.pages_promoted,
        _ => unreachable!("a metric of published()"),
    }
}

/// The settings of one run: the user's `sets`, and with a seed the start jitter before them and
/// the seed after them.
fn seed_sets(sets: &[String], seed: Option<u64>) -> Vec<String> {
    match seed {
        None => sets.to_vec(),
        Some(s) => std::iter::once(format!("workload.start_jitter_us={SEED_JITTER_US}")).chain(sets.iter().cloned()).chain(std::iter::once(format!("run.seed={s}"))).collect(),
    }
}

/// Every kernel's runs, kernel by kernel: one run without jitter (`seeds` None), or seeds
/// 1..=N with [`SEED_JITTER_US`]. All on rayon's pool, one progress bar per run (on a terminal).
pub fn run_all_seeds(scale: u64, sets: &[String], seeds: Option<u64>) -> Result<Vec<Vec<RunResult>>, ConfigError> {
    let seed_list: Vec<Option<u64>> = match seeds {
        None => vec![None],
        Some(n) => (1..=n).map(Some).collect(),
    };
    let jobs: Vec<(Kernel, Option<u64>)> = Kernel::ALL.iter().flat_map(|&k| seed_list.iter().map(move |&s| (k, s))).collect();
    let labels: Vec<String> = jobs
        .iter()
        .map(|(k, s)| match s {
            Some(s) => format!("{} seed {s}", k.label()),
            None => k.label().to_string(),
        })
        .collect();
    let (_multi, bars) = super::run_bars(&labels, "weight pages");
    // The last kernel's runs (6.14 + v12) take the longest: started first, so that the run
    // left to finish last is a shorter one (`run_jobs` starts jobs in list order). The list is
    // run backwards, so its results are reversed back into job order.
    let idx: Vec<usize> = (0..jobs.len()).rev().collect();
    let mut res = super::run_jobs(&idx, |&i| {
        let (k, s) = jobs[i];
        let r = run_one(scale, k, &seed_sets(sets, s), Some(&bars[i]));
        bars[i].finish_and_clear();
        r
    });
    res.reverse();
    let mut flat = res.into_iter().collect::<Result<Vec<_>, _>>()?.into_iter();
    Ok(Kernel::ALL.iter().map(|_| flat.by_ref().take(seed_list.len()).collect()).collect())
}

/// The whole experiment: JSON rows and the printed table (shared by the CLI and tests).
pub fn experiment(scale: u64, sets: &[String]) -> Result<(Out, String), ConfigError> {
    experiment_seeds(scale, sets, None)
}

/// [`experiment`] with `--seeds N`: each kernel run for seeds 1..=N with start jitter, the rows
/// the means over the seeds, each seed's figure beside them.
pub fn experiment_seeds(scale: u64, sets: &[String], seeds: Option<u64>) -> Result<(Out, String), ConfigError> {
    use std::fmt::Write as _;
    Config::defaults(sets)?;
    let cfg = config(scale, Kernel::Off, &seed_sets(sets, seeds.map(|_| 1)))?;
    let all = run_all_seeds(scale, sets, seeds)?;
    // The details below the table are seed 1's.
    let (b, a, v) = (&all[0][0], &all[1][0], &all[2][0]);
    let per = |k: usize, metric: &str| all[k].iter().map(|r| value(r, metric)).collect::<Vec<f64>>();
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    let mut text = String::new();
    writeln!(text, "Seed 000: LUF, lazy unmap flush (linux-6.9 vs linux-6.9 + LUF v10 vs linux-6.14 + LUF RFC v12)").unwrap();
    writeln!(
        text,
        "Machine: 1 socket, {} CPUs; node 0 {} MiB DRAM with the CPUs, node 1 CPU-less {} MiB (CXL, {} ns); swap {} MiB, numa_balancing={}, demotion_enabled={}.",
        cfg.int("machine.cpus"),
        cfg.int("machine.mem_per_node_mib"),
        cfg.int("machine.cpuless_mem_mib"),
        cfg.float("machine.cpuless_latency_ns"),
        cfg.int("machine.swap_mib"),
        cfg.int("kernel.numa_balancing"),
        cfg.bool("vm.demotion_enabled")
    )
    .unwrap();
    let llm = |k: &str| cfg.int(&format!("workload.llm.{k}"));
    writeln!(
        text,
        "llama.cpp: {} processes x {} threads, {} MiB models ({} layers), {} prompt tokens in one pass + {} generated tokens evaluated one pass each.",
        llm("processes"),
        llm("threads"),
        llm("model_mib"),
        llm("layers"),
        llm("prompt_tokens"),
        llm("gen_tokens")
    )
    .unwrap();
    if scale > 1 {
        writeln!(text, "Scale 1/{scale}: memory, models and NUMA-balancing times / {scale}; counts and times x {scale} (an estimate of full scale).").unwrap();
        writeln!(text, "Models thinned by layers: {} of {LAYERS}, each {:.3} of a full-scale layer's width.", layers(scale), layer_width(scale)).unwrap();
    }
    if !sets.is_empty() {
        writeln!(text, "Overrides (every kernel): {}", sets.join(" ")).unwrap();
    }
    if let Some(n) = seeds {
        writeln!(text, "Seeds 1..={n} per kernel, each thread starting within {SEED_JITTER_US} us (drawn from the seed): simulated figures are means over the seeds.").unwrap();
    }
    writeln!(text).unwrap();
    writeln!(text, "{:<20} {:>33}   {:>44}", "", "published", "simulated").unwrap();
    writeln!(text, "{:<20} {:>10} {:>10} {:>11}   {:>10} {:>10} {:>10} {:>6} {:>6}", "", "before", "v10", "v12", "6.9", "6.9+v10", "6.14+v12", "v10", "v12").unwrap();
    let mut rows = Vec::new();
    let pct = |x: f64, base: f64| if base != 0.0 { format!("{:>+5.0}%", 100.0 * (x - base) / base) } else { format!("{:>6}", "-") };
    let mut seed_lines = Vec::new();
    for (metric, p) in published() {
        let (pb, pa, pv) = (per(0, metric), per(1, metric), per(2, metric));
        let s = Simulated { before: mean(&pb), after: mean(&pa), after_v12: mean(&pv) };
        if seeds.is_some() {
            let changes = |x: &[f64]| x.iter().zip(&pb).map(|(x, b)| pct(*x, *b).trim().to_string()).collect::<Vec<_>>().join(" ");
            seed_lines.push(format!("{metric:<20} v10 {:<28} v12 {}", changes(&pa), changes(&pv)));
        }
        let pub_cell = match &p {
            Some(p) => format!("{:>10.3e} {:>10.3e} {:>11}", p.before, p.after, p.after_v12.map_or("-".to_string(), |x| format!("{x:.3e}"))),
            None => format!("{:>10} {:>10} {:>11}", "-", "-", "-"),
        };
        writeln!(text, "{metric:<20} {pub_cell}   {:>10.3e} {:>10.3e} {:>10.3e} {} {}", s.before, s.after, s.after_v12, pct(s.after, s.before), pct(s.after_v12, s.before)).unwrap();
        let per_seed = seeds.map(|_| PerSeed { before: pb, after: pa, after_v12: pv });
        rows.push(Row { metric: metric.to_string(), published: p, simulated: s, per_seed });
    }
    writeln!(text).unwrap();
    if !seed_lines.is_empty() {
        writeln!(text, "Change against 6.9 per seed (seed 1 first):").unwrap();
        for l in &seed_lines {
            writeln!(text, "  {l}").unwrap();
        }
        writeln!(text, "Below: seed 1's runs.").unwrap();
    }
    let cell = |f: fn(&RunResult) -> String| format!("{:>14} {:>14} {:>14}", f(b), f(a), f(v));
    writeln!(text, "{:<28} {}", "runtime per process (s)", cell(|r| r.runtime_per_process_s.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join("/"))).unwrap();
    writeln!(text, "{:<28} {}", "luf deferred folios", cell(|r| format!("{:.3e}", r.luf_deferred_folios))).unwrap();
    writeln!(text, "{:<28} {}", "luf flushes at allocation", cell(|r| format!("{:.3e}", r.luf_takeoff_flushes))).unwrap();
    writeln!(text, "{:<28} {}", "luf abandon flushes", cell(|r| format!("{:.3e}", r.luf_abandon_flushes))).unwrap();
    writeln!(text, "{:<28} {}", "luf abandon flush time (s)", cell(|r| format!("{:.3e}", r.luf_abandon_flush_s))).unwrap();
    writeln!(text, "{:<28} {}", "pgsteal (x scale)", cell(|r| format!("{:.3e}", r.pgsteal))).unwrap();
    writeln!(text, "{:<28} {}", "pages read (x scale)", cell(|r| format!("{:.3e}", r.pages_read))).unwrap();
    writeln!(text, "{:<28} {}", "file device GB/s (run/set)", cell(|r| format!("{:.2}/{:.2}", r.device_gbps, r.device_gbps_set))).unwrap();
    writeln!(text, "{:<28} {}", "simulated s (this scale)", cell(|r| format!("{:.3}", r.sim_s))).unwrap();
    writeln!(text, "{:<28} {}", "simulated accesses", cell(|r| format!("{:.3e}", r.simulated_accesses as f64))).unwrap();
    writeln!(text, "{:<28} {}", "host wall s", cell(|r| format!("{:.1}", r.wall_s))).unwrap();
    writeln!(text, "{:<28} {}", "accesses per host s", cell(|r| format!("{:.3e}", r.accesses_per_wall_s))).unwrap();
    writeln!(text, "Simulated profile (perf report --children, top 8; 6.9 | 6.9+v10 | 6.14+v12):").unwrap();
    for k in 0..8 {
        let c = |r: &RunResult| r.profile.get(k).map(|x| format!("{:>6.2}% {}", 100.0 * x.children_ns as f64 / r.busy_ns.max(1) as f64, x.symbol)).unwrap_or_default();
        writeln!(text, "  {:<40} | {:<40} | {}", c(b), c(a), c(v)).unwrap();
    }
    let notes = vec![
        "before = linux-6.9 + kernel.luf=off; after = linux-6.9 + kernel.luf=v10 (nothing else differs); after_v12 = linux-6.14 + kernel.luf=v12 (the preset differs too)".into(),
        "tlb_shootdown_irqs published: the sum of the seed's /proc/interrupts TLB line over its 64 CPUs (cumulative since boot; the seed does not say over how many of its 10 runs); the other published counts are perf stat per test set (one run of the three processes)".into(),
        "runtime_s published: mean of the seed's 30 llama.cpp 'total time' lines per kernel; simulated: mean over the 3 processes of start to last token".into(),
        "after_v12 published: the v12 cover letter's changes (-97% IRQs, -4.5% runtime) applied to the v10 posting's before".into(),
        format!("scale {scale}: memory, models and NUMA-balancing times divided by it, counts and times multiplied back; CPUs, threads and tokens kept; models thinned by layers ({} of {LAYERS}, each {:.3} of a full-scale layer's width)", layers(scale), layer_width(scale)),
        "parameters and their sources: docs/luf.md, Reproduction".into(),
    ];
    let runs_out = Kernel::ALL
        .iter()
        .zip(&all)
        .flat_map(|(k, rs)| {
            rs.iter().enumerate().map(move |(i, r)| RunSummary {
                kernel: k.label(),
                seed: seeds.map(|_| i as u64 + 1),
                preset: k.preset(),
                luf: k.luf(),
                sim_s: r.sim_s,
                wall_s: r.wall_s,
                simulated_accesses: r.simulated_accesses,
                accesses_per_wall_s: r.accesses_per_wall_s,
                runtime_per_process_s: r.runtime_per_process_s.clone(),
            })
        })
        .collect();
    Ok((Out { experiment: "luf", rows, scale, seeds, runs: runs_out, notes }, text))
}

pub fn cli(json: Option<PathBuf>, sets: &[String], scale: u64, seeds: Option<u64>) -> ExitCode {
    if !(1..=MAX_SCALE).contains(&scale) {
        eprintln!("mmsim reproduce: --scale for luf takes 1 (the seed's 42 GB DRAM + 98 GB CXL) to {MAX_SCALE}");
        return ExitCode::from(2);
    }
    if seeds.is_some_and(|n| !(1..=100).contains(&n)) {
        eprintln!("mmsim reproduce: --seeds must be 1..=100");
        return ExitCode::from(2);
    }
    let t = std::time::Instant::now();
    let (out, text) = match experiment_seeds(scale, sets, seeds) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mmsim reproduce: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{text}");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("({} runs in {:.1} s wall time; host load average now: {})", out.runs.len(), t.elapsed().as_secs_f64(), load.trim());
    if let Some(p) = json {
        if let Err(e) = crate::output::write_json(&p, &out) {
            eprintln!("mmsim reproduce: {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_thins_the_models_by_whole_layers() {
        // Full scale and every K dividing 80: whole layers of full width.
        for k in [1, 2, 4, 5, 8, 10, 16, 20, 40, 80] {
            assert_eq!(layers(k) * k, LAYERS, "K = {k}");
            assert_eq!(layer_width(k), 1.0, "K = {k}");
        }
        // Otherwise the nearest whole number of layers, at least one, and the width makes up
        // the rest: layers x width x K = 80 (the model's size is 1/K of the seed's).
        for (k, l) in [(3, 27), (48, 2), (64, 1), (120, 1), (1024, 1)] {
            assert_eq!(layers(k), l, "K = {k}");
            assert!((layers(k) as f64 * layer_width(k) * k as f64 - LAYERS as f64).abs() < 1e-9);
        }
        let sets = base_sets(64, Kernel::Off);
        assert!(sets.contains(&"workload.llm.layers=1".to_string()), "{sets:?}");
        assert!(sets.contains(&format!("workload.llm.model_mib={}", MODEL_MIB / 64)), "{sets:?}");
    }
}
