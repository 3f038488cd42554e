//! The seeded stress swarm: each seed draws a small machine (2-8 CPUs, memory small enough to
//! force reclaim), kernel knobs and random op programs, runs it with the oracle on and returns
//! what the oracle found. Everything comes from the seed: `mmsim check --seed S` reproduces it.

use std::collections::BTreeMap;

use crate::config::{Config, Origin, ThreadSpec};
use crate::engine::prng::Prng;
use crate::sim::Sim;

use super::{Inject, Violation};

/// What one seed found.
#[derive(Debug)]
pub struct SeedResult {
    pub seed: u64,
    pub violations: Vec<Violation>,
    pub marks: BTreeMap<&'static str, u64>,
    pub allowed_stale_reads: u64,
    pub checked_hits: u64,
    pub sets: Vec<String>,
}

fn pick<'a>(r: &mut Prng, xs: &[&'a str]) -> &'a str {
    xs[r.below(xs.len() as u64) as usize]
}

/// The scenario of one seed: `--set` knobs and thread programs.
pub fn scenario(seed: u64, inject: Inject) -> (Vec<String>, Vec<ThreadSpec>) {
    let mut r = Prng::new(seed ^ 0x6d6d_7369_6d63_6b00);
    let nodes = 1 + r.below(2);
    let cpus = nodes * (1 + r.below(4)).max(if nodes == 1 { 2 } else { 1 });
    let mem_mib = (8 + r.below(9)) / nodes; // 8-16 MiB in all: a few thousand frames
    let preset = pick(&mut r, &["linux-6.18", "linux-6.18", "linux-6.12", "linux-6.1", "linux-5.13", "linux-4.14"]);
    let sets = vec![
        format!("run.seed={seed}"),
        "run.max_sim_ms=400".to_string(),
        format!("machine.cpus={cpus}"),
        format!("machine.nodes={nodes}"),
        format!("machine.mem_per_node_mib={mem_mib}"),
        format!("machine.swap_mib={}", pick(&mut r, &["0", "0", "4", "32"])),
        format!("kernel.preset=\"{preset}\""),
        format!("machine.tlb.pcid={}", r.below(4) != 0),
        format!("machine.tlb.stlb_entries={}", pick(&mut r, &["96", "384", "1536"])),
        "machine.tlb.stlb_ways=12".to_string(),
        format!("kernel.tlb_single_page_flush_ceiling={}", pick(&mut r, &["1", "33", "33", "512"])),
        format!("check.inject=\"{}\"", inject.name()),
    ];
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
            ops += &format!("loop {}\n", 2 + r.below(4));
            for _ in 0..(3 + r.below(6)) {
                let op = match r.below(15) {
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
                    _ => "touch hot read\nmadvise hot dontneed".to_string(),
                };
                ops += &op;
                ops += "\n";
            }
            ops += "end\n";
            threads.push(ThreadSpec { process: p as u32, cpu: None, ops, ops_origin: origin.clone() });
        }
    }
    // A background reader of the big file in process 0 keeps kswapd busy.
    threads.push(ThreadSpec { process: 0, cpu: None, ops: "sleep 10us\ntouch big read\n".to_string(), ops_origin: origin.clone() });
    (sets, threads)
}

/// Run one seed with the oracle on.
pub fn run_seed(seed: u64, inject: Inject) -> SeedResult {
    let (sets, threads) = scenario(seed, inject);
    let cfg = Config::with_threads(&sets, threads).unwrap_or_else(|e| panic!("simulator bug: check scenario of seed {seed} is invalid: {e}"));
    let mut sim = Sim::build(&cfg).unwrap_or_else(|e| panic!("simulator bug: check scenario of seed {seed} does not build: {e}"));
    sim.enable_oracle();
    sim.run(|_| {});
    let o = sim.oracle.take().expect("oracle on");
    SeedResult { seed, violations: o.violations, marks: o.marks, allowed_stale_reads: o.allowed_stale_reads, checked_hits: o.checked_hits, sets }
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
pub fn cli(seeds: u64, seed: Option<u64>, inject: Option<String>, json: Option<std::path::PathBuf>) -> std::process::ExitCode {
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
    let mut found = None;
    for &s in &list {
        let r = run_seed(s, inject);
        out.seeds_run += 1;
        for (k, v) in &r.marks {
            *marks.entry(k).or_insert(0) += v;
        }
        if !r.violations.is_empty() {
            for v in &r.violations {
                out.violations.push(JsonViolation { seed: s, class: v.class.name(), detail: v.detail.clone() });
            }
            found = Some(r);
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let inj = if inject == Inject::None { String::new() } else { format!(" --inject {}", inject.name()) };
    match &found {
        Some(r) => {
            let v = &r.violations[0];
            println!("VIOLATION {} at seed {} (after {} seeds)", v.class.name(), r.seed, out.seeds_run);
            println!("  {}", v.detail);
            println!("  history of the frame (oldest first):");
            for h in &v.history {
                println!("    {h}");
            }
            println!("  scenario: --set {}", r.sets.join(" --set "));
            println!("  reproduce: mmsim check --seed {}{inj}", r.seed);
        }
        None => {
            println!("{} seeds{inj}: no violation ({:.1} seeds/s)", out.seeds_run, out.seeds_run as f64 / secs.max(1e-9));
            println!("coverage marks (times reached over all seeds):");
            for (k, v) in &marks {
                println!("  {k:<28} {v}");
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
