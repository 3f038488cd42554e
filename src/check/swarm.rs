//! The seeded stress swarm: each seed draws a small machine (2-8 CPUs, memory small enough to
//! force reclaim), kernel knobs and random op programs, runs it with the oracle on and returns
//! what the oracle found. Everything comes from the seed: `mmsim check --seed S` reproduces it.

use std::collections::BTreeMap;

use crate::config::{Config, Origin, ThreadSpec};
use crate::engine::prng::Prng;
use crate::sim::Sim;

use rayon::prelude::*;

use super::{Inject, Violation};

/// Seeds handed to the thread pool at a time.
const CHUNK: usize = 64;

/// The coverage mark of a NUMA migration on LATR's path (mm/latr.rs).
const LATR_MIGRATION_MARK: &str = "latr migration of a lazily hinted folio";

/// What one seed found.
#[derive(Debug)]
pub struct SeedResult {
    pub seed: u64,
    pub violations: Vec<Violation>,
    pub marks: BTreeMap<&'static str, u64>,
    pub allowed_stale_reads: u64,
    pub checked_hits: u64,
    pub sets: Vec<String>,
    /// Why threads of the scenario died (printed for a single `--seed`).
    pub workload_errors: Vec<String>,
    /// LUF (mm/luf.rs): allowed stale reads of freed, unchanged frames, and their windows.
    pub luf_stale_reads: u64,
    pub luf_window_hist: [u64; 32],
}

fn pick<'a>(r: &mut Prng, xs: &[&'a str]) -> &'a str {
    xs[r.below(xs.len() as u64) as usize]
}

/// The scenario of one seed: `--set` knobs and thread programs. `extra` are the user's `--set`s,
/// applied after the seed's own; the swarm reads them only to add LUF's readers (below).
pub fn scenario(seed: u64, inject: Inject, extra: &[String]) -> (Vec<String>, Vec<ThreadSpec>) {
    let mut r = Prng::new(seed ^ 0x6d6d_7369_6d63_6b00);
    let nodes = 1 + r.below(2);
    let cpus = nodes * (1 + r.below(4)).max(if nodes == 1 { 2 } else { 1 });
    let mem_mib = (8 + r.below(9)) / nodes; // 8-16 MiB in all: a few thousand frames
    let swap_mib: u64 = pick(&mut r, &["0", "0", "4", "32"]).parse().expect("a number");
    let preset = pick(&mut r, &["linux-6.18", "linux-6.18", "linux-6.12", "linux-6.1", "linux-5.13", "linux-4.14"]);
    let sets = vec![
        format!("run.seed={seed}"),
        "run.max_sim_ms=400".to_string(),
        format!("machine.cpus={cpus}"),
        format!("machine.nodes={nodes}"),
        format!("machine.mem_per_node_mib={mem_mib}"),
        format!("machine.swap_mib={swap_mib}"),
        format!("kernel.preset=\"{preset}\""),
        format!("machine.tlb.pcid={}", r.below(4) != 0),
        format!("machine.tlb.stlb_entries={}", pick(&mut r, &["96", "384", "1536"])),
        "machine.tlb.stlb_ways=12".to_string(),
        format!("kernel.tlb_single_page_flush_ceiling={}", pick(&mut r, &["1", "33", "33", "512"])),
        format!("check.inject=\"{}\"", inject.name()),
    ];
    let mut sets = sets;
    if nodes > 1 && r.below(4) != 0 {
        // NUMA balancing with the scanner sped up to the swarm's time scale.
        sets.push("kernel.numa_balancing=1".to_string());
        sets.push(format!("kernel.numa_balancing_scan_delay_ms={}", 1 + r.below(10)));
        sets.push(format!("kernel.numa_balancing_scan_period_min_ms={}", 1 + r.below(20)));
        sets.push(format!("kernel.numa_balancing_scan_size_mb={}", 1 + r.below(4)));
    }
    let mem_pages = mem_mib * nodes * 256;
    let big = mem_pages + mem_pages / 2 + r.below(mem_pages); // 1.5-2.5x RAM: forces reclaim
    let hot = 16 + r.below(112);
    let nproc = 1 + r.below(2);
    let origin = Origin { file: format!("<check seed {seed}>"), line: 1 };
    let mut threads = Vec::new();
    for p in 0..nproc {
        let nthreads = 2 + r.below(3);
        for t in 0..nthreads {
            let mut ops = String::new();
            if t == 0 {
                ops += &format!("mmap big {big} file:big{p} sparse shared\nmmap hot {hot} file:hot sparse shared\nmmap anon {}\n", 8 + r.below(56));
            } else {
                ops += "sleep 20us\n";
            }
            let own = format!("own{t}");
            let own_pages = 4 + r.below(60);
            ops += &format!("mmap {own} {own_pages}\n");
            // A private place for a shared file mapping that is replaced by another file at the
            // same address (munmap + MAP_FIXED mmap): a stale entry then shows the wrong file.
            let at = format!("at={:#x}", 0x6000_0000_0000u64 + (p * 16 + t) * 0x100_0000);
            let ownf_pages = 4 + r.below(60);
            let ownf = |which: &str| format!("mmap ownf{t} {ownf_pages} file:f{p}t{t}{which} sparse shared {at}");
            ops += &ownf("a");
            ops += "\n";
            // A private region written once and then mostly read: after a swap-out and a read
            // swap-in its pages are clean, so reclaim leaves their flush deferred (no dirty page
            // forces it) while MADV_DONTNEED may discard them.
            ops += &format!("mmap ro{t} {}\ntouch ro{t} write\n", 4 + r.below(28));
            ops += &format!("loop {}\n", 2 + r.below(4));
            for _ in 0..(3 + r.below(6)) {
                let op = match r.below(22) {
                    0 | 1 => "touch hot read".to_string(),
                    2 | 3 => "touch hot write".to_string(),
                    4 => "madvise hot pageout".to_string(),
                    5 if t == 0 || r.below(3) == 0 => "touch big read".to_string(),
                    6 => "touch anon write\ntouch anon read".to_string(),
                    7 => "madvise anon dontneed".to_string(),
                    8 => "mprotect anon r\ntouch anon read\nmprotect anon rw".to_string(),
                    9 => format!("touch {own} write\nmunmap {own}\nmmap {own} {own_pages}\ntouch {own} write"),
                    10 => format!("sleep {}us", 5 + r.below(200)),
                    11 => "fork\ntouch anon write\nreap".to_string(),
                    12 => format!("madvise {own} dontneed\ntouch {own} read"),
                    13 if nodes > 1 => format!("migrate hot {}\nmigrate anon {}", r.below(nodes), r.below(nodes)),
                    15 => "madvise anon pageout".to_string(),
                    16 => "touch anon read".to_string(),
                    17 => format!("touch ownf{t} read\nmunmap ownf{t}\n{}\ntouch ownf{t} read\nmunmap ownf{t}\n{}\ntouch ownf{t} read", ownf("b"), ownf("a")),
                    18 => format!("touch ownf{t} read"),
                    19 => format!("touch ro{t} read"),
                    20 => format!("madvise ro{t} dontneed\ntouch ro{t} read"),
                    21 => format!("touch ro{t} write"),
                    _ => "touch hot read\nmadvise hot dontneed".to_string(),
                };
                ops += &op;
                ops += "\n";
            }
            ops += "end\n";
            threads.push(ThreadSpec { process: p as u32, cpu: None, ops, ops_origin: origin.clone() });
        }
    }
    // With swap, half the seeds add the race flush_tlb_batched_pending() closes (mechanisms.md
    // §1 (d)): a reader makes a private region clean and cached (swap-out, then swap-in by
    // reads) and later discards and re-reads it, while a pager in the same process pages it
    // out with deferred flushes; timings are drawn so the two overlap now and then.
    if swap_mib > 0 && r.below(2) == 0 {
        let n = 16 + r.below(80);
        let reader = format!(
            "mmap rr {n}\nmmap pad 32\nloop {}\ntouch rr write\nmadvise rr pageout\ntouch rr read\ntouch pad write\nspin {}us\nmadvise rr dontneed\ntouch rr read\nend\n",
            2 + r.below(4),
            r.below(2000)
        );
        let pager = format!("sleep {}us\nloop {}\nmadvise rr pageout\nspin {}us\nend\n", 200 + r.below(3000), 2 + r.below(6), r.below(1500));
        threads.push(ThreadSpec { process: 0, cpu: None, ops: reader, ops_origin: origin.clone() });
        threads.push(ThreadSpec { process: 0, cpu: None, ops: pager, ops_origin: origin.clone() });
    }
    // A background reader of the big file in process 0 keeps kswapd busy.
    threads.push(ThreadSpec { process: 0, cpu: None, ops: "sleep 10us\ntouch big read\n".to_string(), ops_origin: origin.clone() });
    tiering(seed, preset, nodes, &mut sets, &mut threads, &origin);
    luf_readers(seed, nproc, extra, &mut threads, &origin);
    (sets, threads)
}

/// LUF's own workload, when the user sets `kernel.luf` (to any value, `off` included, so an
/// off run checks the same programs): a read-only shared file mapping (PROT_READ, so no VM_WRITE
/// — the model weights of docs/llm.md), read by two threads of one process while a third pages
/// it out and then allocates. Only such folios are deferred by v12, which abandons a batch at
/// any fault on a VM_WRITE VMA, and the seed's other file mappings are all writable. Drawn from
/// a PRNG of its own and added after every other thread, so the rest of the seed is unchanged.
fn luf_readers(seed: u64, nproc: u64, extra: &[String], threads: &mut Vec<ThreadSpec>, origin: &Origin) {
    if !extra.iter().any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == "kernel.luf")) {
        return;
    }
    let mut r = Prng::new(seed ^ 0x6c75_665f_7264_7200);
    let p = r.below(nproc) as u32;
    let n = 16 + r.below(240);
    let iters = 4 + r.below(12);
    let reader = |first: String, pause: String| format!("{first}loop {iters}\ntouch lw read\n{pause}\nend\n");
    let mapper = reader(format!("mmap lw {n} file:lw sparse shared prot=r\n"), format!("sleep {}us", 20 + r.below(400)));
    let other = reader(format!("sleep {}us\n", 10 + r.below(100)), format!("spin {}us", r.below(300)));
    let pager = format!(
        "sleep {}us\nloop {iters}\nmadvise lw pageout\nmmap la {}\ntouch la write\nmunmap la\nsleep {}us\nend\n",
        50 + r.below(500),
        8 + r.below(n),
        20 + r.below(400)
    );
    for ops in [mapper, other, pager] {
        threads.push(ThreadSpec { process: p, cpu: None, ops, ops_origin: origin.clone() });
    }
}

/// Memory tiering (docs/tiering.md) on a quarter of the seeds whose preset has it (6.1+): a
/// CPU-less node, NUMA balancing mode 2 (3 where mode 1 was drawn), demotion mostly on, and
/// timings shrunk to the swarm's scale; process 0 gets a cold set that fills DRAM and a hot set
/// two threads read while one of them unmaps, mprotects, forks and migrates it, so promotion
/// and demotion race with those. Drawn from a PRNG of its own, so the other seeds' scenarios
/// are what they were before tiering came.
fn tiering(seed: u64, preset: &str, nodes: u64, sets: &mut Vec<String>, threads: &mut Vec<ThreadSpec>, origin: &Origin) {
    let mut r = Prng::new(seed ^ 0x7469_6572_696e_6700);
    if r.below(4) != 0 || crate::config::presets::version(preset) < (6, 1) {
        return;
    }
    let mode = if sets.iter().any(|s| s == "kernel.numa_balancing=1") { 3 } else { 2 };
    if mode == 2 {
        sets.push(format!("kernel.numa_balancing_scan_delay_ms={}", 1 + r.below(10)));
        sets.push(format!("kernel.numa_balancing_scan_period_min_ms={}", 1 + r.below(20)));
        sets.push(format!("kernel.numa_balancing_scan_size_mb={}", 1 + r.below(4)));
    }
    sets.push(format!("kernel.numa_balancing={mode}"));
    sets.push("machine.cpuless_nodes=1".to_string());
    sets.push(format!("machine.cpuless_mem_mib={}", 4 + r.below(9)));
    sets.push(format!("vm.demotion_enabled={}", r.below(4) != 0));
    sets.push(format!("kernel.numa_balancing_scan_period_max_ms={}", 20 + r.below(180)));
    sets.push(format!("kernel.numa_balancing_promote_rate_limit_MBps={}", pick(&mut r, &["1", "4", "65536"])));
    sets.push(format!("kernel.numa_balancing_hot_threshold_ms={}", pick(&mut r, &["1", "10", "1000"])));
    sets.push(format!("vm.watermark_scale_factor={}", pick(&mut r, &["10", "200"])));
    let cold = 256 + r.below(1024);
    let hot = 32 + r.below(480);
    let cxl = nodes; // the CPU-less node's id
    let mut ops = format!("mmap tcold {cold}\ntouch tcold write\nmmap thot {hot}\ntouch thot write\nloop {}\n", 4 + r.below(8));
    for _ in 0..(3 + r.below(5)) {
        ops += match r.below(9) {
            0..=2 => "touch thot read\n".to_string(),
            3 => "touch thot write\n".to_string(),
            4 => format!("sleep {}us\n", 100 + r.below(3000)),
            5 => "mprotect thot r\ntouch thot read\nmprotect thot rw\n".to_string(),
            6 => "fork\ntouch thot write\nreap\n".to_string(),
            7 => format!("munmap thot\nmmap thot {hot}\ntouch thot write\n"),
            _ => format!("migrate thot {}\ntouch tcold read\n", if r.below(2) == 0 { cxl } else { 0 }),
        }
        .as_str();
    }
    ops += "end\n";
    threads.push(ThreadSpec { process: 0, cpu: None, ops, ops_origin: origin.clone() });
    let reader = format!("sleep {}us\nloop {}\ntouch thot read\nsleep {}us\nend\n", 100 + r.below(2000), 4 + r.below(12), 50 + r.below(1000));
    threads.push(ThreadSpec { process: 0, cpu: None, ops: reader, ops_origin: origin.clone() });
}

/// Run one seed with the oracle and the structural checkers on.
pub fn run_seed(seed: u64, inject: Inject) -> SeedResult {
    run_seed_with(seed, inject, true)
}

/// Run one seed with the oracle on, and the structural checkers if `structural`.
pub fn run_seed_with(seed: u64, inject: Inject, structural: bool) -> SeedResult {
    run_seed_sets(seed, inject, structural, &[])
}

/// [`run_seed_with`] with `extra` `--set KEY=VALUE`s applied after the seed's own (`mmsim check
/// --set`: e.g. the flush alternatives, docs/flush-alternatives.md).
pub fn run_seed_sets(seed: u64, inject: Inject, structural: bool, extra: &[String]) -> SeedResult {
    let (mut sets, threads) = scenario(seed, inject, extra);
    sets.extend(extra.iter().cloned());
    let cfg = Config::with_threads(&sets, threads).unwrap_or_else(|e| panic!("simulator bug: check scenario of seed {seed} is invalid: {e}"));
    let mut sim = Sim::build(&cfg).unwrap_or_else(|e| panic!("simulator bug: check scenario of seed {seed} does not build: {e}"));
    sim.enable_oracle();
    sim.oracle.as_mut().expect("oracle on").structural = structural;
    sim.run(|_| {});
    let mut o = sim.oracle.take().expect("oracle on");
    if !sim.workload_errors.is_empty() {
        // Threads the scenario's own races killed (SIGSEGV after another thread's mprotect, OOM):
        // counted so a swarm that kills its threads early shows.
        *o.marks.entry("thread killed (SIGSEGV/OOM)").or_insert(0) += sim.workload_errors.len() as u64;
    }
    SeedResult {
        seed,
        violations: o.violations,
        marks: o.marks,
        allowed_stale_reads: o.allowed_stale_reads,
        checked_hits: o.checked_hits,
        sets,
        workload_errors: std::mem::take(&mut sim.workload_errors),
        luf_stale_reads: o.luf_stale_reads,
        luf_window_hist: o.luf_window_hist,
    }
}

/// The LUF stale-read windows as a log2 histogram in µs (one line per non-empty bucket).
fn print_luf_windows(reads: u64, hist: &[u64; 32]) {
    if reads == 0 {
        return;
    }
    println!("allowed LUF stale reads (a freed, unchanged frame read through a deferred entry): {reads}");
    println!("  time since the free, µs : reads");
    for (i, &n) in hist.iter().enumerate().filter(|(_, n)| **n > 0) {
        let lo = if i == 0 { 0 } else { 1u64 << i };
        println!("  [{lo:>8}, {:>8}) : {n}", 1u64 << (i + 1));
    }
}

/// Run one scenario with the oracle (and, if `structural`, the structural checkers) on:
/// what the oracle found and why threads died.
pub fn check_config(cfg: &Config, structural: bool) -> Result<(Box<super::Oracle>, Vec<String>), String> {
    let mut sim = Sim::build(cfg).map_err(|e| e.to_string())?;
    sim.enable_oracle();
    sim.oracle.as_mut().expect("oracle on").structural = structural;
    sim.run(|_| {});
    let o = sim.oracle.take().expect("oracle on");
    Ok((o, std::mem::take(&mut sim.workload_errors)))
}

/// `mmsim check --scenario FILE`: one scenario with the oracle (and the structural checkers)
/// on; the verdict, the first violation's history, or the allowed stale reads (docs/check.md).
pub fn cli_scenario(path: &std::path::Path, inject: Option<String>, json: Option<std::path::PathBuf>, structural: bool, mut extra: Vec<String>) -> std::process::ExitCode {
    use std::process::ExitCode;
    if let Some(i) = inject.filter(|i| i != "none") {
        extra.push(format!("check.inject=\"{i}\""));
    }
    let cfg = match crate::config::load(path, &extra) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(2);
        }
    };
    let (o, errors) = match check_config(&cfg, structural) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mmsim: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    for e in &errors {
        println!("  workload: {e}");
    }
    let mut out = JsonOut { seeds_run: 1, violations: Vec::new() };
    for v in &o.violations {
        out.violations.push(JsonViolation { seed: cfg.int("run.seed") as u64, class: v.class.name(), detail: v.detail.clone() });
    }
    match super::headline(&o.violations) {
        Some(v) => {
            println!("VIOLATION {} in {}", v.class.name(), path.display());
            println!("  {}", v.detail);
            println!("  history of the frame (oldest first):");
            for h in &v.history {
                println!("    {h}");
            }
        }
        None => {
            println!("{}: no violation ({} accesses through TLB entries checked, {} allowed stale reads)", path.display(), o.checked_hits, o.allowed_stale_reads);
            print_luf_windows(o.luf_stale_reads, &o.luf_window_hist);
            println!("coverage marks:");
            for (k, v) in &o.marks {
                println!("  {k:<28} {v}");
            }
        }
    }
    if let Some(p) = json {
        if let Err(e) = crate::output::write_json(&p, &out) {
            eprintln!("mmsim: {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    if o.violations.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_VIOLATION) }
}

#[derive(serde::Serialize)]
struct JsonViolation {
    seed: u64,
    class: &'static str,
    detail: String,
}

#[derive(serde::Serialize)]
struct JsonOut {
    seeds_run: u64,
    violations: Vec<JsonViolation>,
}

/// Exit code of `mmsim check` when a violation is found (main.rs: 3 = invariant violation).
pub const EXIT_VIOLATION: u8 = 3;

/// `mmsim check`: run seeds `first..first+seeds` (or the one `--seed`), stop at the first seed
/// with a violation, print it with its reproducer. Returns the process exit code.
pub fn cli(seeds: u64, seed: Option<u64>, inject: Option<String>, json: Option<std::path::PathBuf>, structural: bool) -> std::process::ExitCode {
    cli_sets(seeds, seed, inject, json, structural, Vec::new())
}

/// `mmsim check` with `--set`s added to every seed's scenario.
pub fn cli_sets(seeds: u64, seed: Option<u64>, inject: Option<String>, json: Option<std::path::PathBuf>, structural: bool, extra: Vec<String>) -> std::process::ExitCode {
    use std::process::ExitCode;
    let inject = match inject.as_deref() {
        None | Some("none") => Inject::None,
        Some(s) => match Inject::ALL.iter().find(|i| i.name() == s) {
            Some(&i) => i,
            None => {
                let names: Vec<_> = Inject::ALL.iter().map(|i| i.name()).collect();
                eprintln!("mmsim: --inject {s}: expected one of {}", names.join(", "));
                return ExitCode::from(2);
            }
        },
    };
    let list: Vec<u64> = match seed {
        Some(s) => vec![s],
        None => (1..=seeds).collect(),
    };
    let t0 = std::time::Instant::now();
    let mut out = JsonOut { seeds_run: 0, violations: Vec::new() };
    let mut marks: BTreeMap<&'static str, u64> = BTreeMap::new();
    // LATR (mm/latr.rs): seeds in which a lazily hinted folio was migrated.
    let mut latr_migration_seeds = 0u64;
    let (mut luf_reads, mut luf_hist) = (0u64, [0u64; 32]);
    let mut found = None;
    let bar = indicatif::ProgressBar::new(list.len() as u64);
    bar.set_style(indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} seeds {per_sec} eta {eta}").expect("valid template"));
    if list.len() == 1 {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // Seeds run in parallel (rayon), a chunk at a time; results are taken in seed order and the
    // run stops at the first seed with a violation, so the output does not depend on threads.
    'chunks: for chunk in list.chunks(CHUNK) {
        let results: Vec<SeedResult> = chunk.par_iter().map(|&s| run_seed_sets(s, inject, structural, &extra)).collect();
        for r in results {
            out.seeds_run += 1;
            bar.inc(1);
            for (k, v) in &r.marks {
                *marks.entry(k).or_insert(0) += v;
            }
            latr_migration_seeds += r.marks.contains_key(LATR_MIGRATION_MARK) as u64;
            luf_reads += r.luf_stale_reads;
            for (a, b) in luf_hist.iter_mut().zip(r.luf_window_hist) {
                *a += b;
            }
            if !r.violations.is_empty() || list.len() == 1 {
                // The oracle's findings first (as the headline), then the structural ones.
                let mut vs: Vec<&Violation> = r.violations.iter().collect();
                vs.sort_by_key(|v| v.class == super::Class::Structural);
                for v in vs {
                    out.violations.push(JsonViolation { seed: r.seed, class: v.class.name(), detail: v.detail.clone() });
                }
                let stop = !r.violations.is_empty();
                found = Some(r);
                if stop {
                    break 'chunks;
                }
            }
        }
    }
    bar.finish_and_clear();
    if let Some(r) = found.as_ref().filter(|_| list.len() == 1) {
        for e in &r.workload_errors {
            println!("  workload: {e}");
        }
    }
    let found = found.filter(|r| !r.violations.is_empty());
    let secs = t0.elapsed().as_secs_f64();
    let inj = if inject == Inject::None { String::new() } else { format!(" --inject {}", inject.name()) };
    match &found {
        Some(r) => {
            let v = super::headline(&r.violations).expect("a violation");
            println!("VIOLATION {} at seed {} (after {} seeds)", v.class.name(), r.seed, out.seeds_run);
            println!("  {}", v.detail);
            println!("  history of the frame (oldest first):");
            for h in &v.history {
                println!("    {h}");
            }
            println!("  scenario: --set {}", r.sets.join(" --set "));
            let sets: String = extra.iter().map(|s| format!(" --set '{s}'")).collect();
            println!("  reproduce: mmsim check --seed {}{inj}{}{sets}", r.seed, if structural { "" } else { " --no-structural" });
        }
        None => {
            println!("{} seeds{inj}: no violation ({:.1} seeds/s)", out.seeds_run, out.seeds_run as f64 / secs.max(1e-9));
            print_luf_windows(luf_reads, &luf_hist);
            println!("coverage marks (times reached over all seeds):");
            for (k, v) in &marks {
                println!("  {k:<28} {v}");
            }
            if latr_migration_seeds > 0 {
                println!("LATR migration (lazily hinted folios migrated) in {latr_migration_seeds} of {} seeds", out.seeds_run);
            }
        }
    }
    if let Some(path) = json {
        if let Err(e) = crate::output::write_json(&path, &out) {
            eprintln!("mmsim: {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    if found.is_some() { ExitCode::from(EXIT_VIOLATION) } else { ExitCode::SUCCESS }
}
