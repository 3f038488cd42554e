//! LUF, lazy unmap flush (seed 000, src/mm/luf.rs, docs/luf.md): the mechanism on the small
//! LLM scenario, its neutrality where nothing is read-only, the reviewers' safety cases as the
//! oracle judges them per version (docs/check.md, "LUF"), and the two injection sites.

use std::path::PathBuf;

use mmsim::check::swarm::{check_config, run_seed_sets};
use mmsim::check::{Class, Inject};
use mmsim::config;
use mmsim::report::Report;
use mmsim::run::Outcome;
use mmsim::sim::Sim;

fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn run_cfg(cfg: &config::Config) -> Report {
    let mut sim = Sim::build(cfg).unwrap();
    let out = sim.run(|_| {});
    assert_eq!(out, Outcome::Completed);
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    Report::from_sim(&sim, out)
}

fn run(rel: &str, sets: &[&str]) -> Report {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    run_cfg(&config::load(&path(rel), &sets).unwrap())
}

fn irqs(r: &Report) -> u64 {
    r.per_cpu.tlb_shootdowns.iter().sum()
}

/// On the LLM scenario (more weights than memory: reclaim keeps unmapping clean read-only file
/// pages mapped on every CPU of the process) both versions defer folios, flush some at
/// allocation, and send fewer shootdowns and tlb_flush events than LUF off; off has no LUF
/// counters at all.
#[test]
fn llm_scenario_defers_read_only_unmaps() {
    let off = run("scenarios/llm-inference.toml", &["kernel.luf=off"]);
    assert!(!off.counters.contains_key("luf_deferred_folios"));
    for v in ["v10", "v12"] {
        let on = run("scenarios/llm-inference.toml", &[&format!("kernel.luf={v}")]);
        let c = |k: &str| on.counters[k];
        assert!(c("luf_deferred_folios") > 10_000, "{v}: {} deferred", c("luf_deferred_folios"));
        assert!(c("luf_takeoff_flushes") > 0 && c("luf_takeoff_flushes") < c("luf_folds"), "{v}: {} flushes at allocation for {} folds", c("luf_takeoff_flushes"), c("luf_folds"));
        assert!(c("luf_takeoff_pages") <= c("luf_deferred_folios"));
        assert!(c("luf_takeoff_flush_ns") > 0, "{v}: allocations pay for the flushes they run");
        assert!(irqs(&on) * 10 < irqs(&off) * 7, "{v}: shootdown IRQs {} vs {} with LUF off", irqs(&on), irqs(&off));
        assert!(c("tlb:tlb_flush") * 10 < off.counters["tlb:tlb_flush"] * 7, "{v}: tlb_flush {} vs {}", c("tlb:tlb_flush"), off.counters["tlb:tlb_flush"]);
        assert!(c("iTLB-load-misses") < off.counters["iTLB-load-misses"], "{v}");
        assert!(c("dTLB-store-misses") < off.counters["dTLB-store-misses"], "{v}");
    }
}

/// Neutral where it should be (issue 12): only writable private mappings under the same memory
/// pressure (anon pages written, swapped out, written again) give LUF nothing to defer, so v10
/// changes neither the shootdowns nor the runtime.
#[test]
fn writable_private_memory_is_neutral() {
    let text = r#"
[machine]
cpus = 4
mem_per_node_mib = 32
swap_mib = 128

[[workload.thread]]
ops = """
mmap a 4608
loop 3
touch a write
end
"""

[[workload.thread]]
ops = """
mmap b 4608
loop 3
touch b write
end
"""
"#;
    let cfg = |v: &str| config::load_str("<neutral>", text, &[format!("kernel.luf={v}")]).unwrap();
    let (off, on) = (run_cfg(&cfg("off")), run_cfg(&cfg("v10")));
    assert!(on.counters["pswpout"] > 10_000, "memory pressure: {} pages swapped out", on.counters["pswpout"]);
    assert_eq!(on.counters["luf_deferred_folios"], 0);
    let within = |a: u64, b: u64| (a as f64 - b as f64).abs() <= 0.01 * b as f64;
    assert!(within(irqs(&on), irqs(&off)), "IRQs {} vs {}", irqs(&on), irqs(&off));
    assert!(within(on.time.elapsed_ns, off.time.elapsed_ns), "elapsed {} vs {}", on.time.elapsed_ns, off.time.elapsed_ns);
}

/// What the oracle finds in each reviewers' case, per version: None = no violation. The table
/// is docs/check.md's "LUF" section; the scenarios say what each case does.
#[test]
fn safety_cases_per_version() {
    let cases: &[(&str, [Option<Class>; 3])] = &[
        // Dave Hansen (b): v10 has no trigger on write(2); v12's mapping_write_begin flushes.
        ("scenarios/luf-file-write.toml", [None, Some(Class::StaleData), None]),
        // Dave Hansen (a) and (c): the munmap's zap runs flush_tlb_batched_pending(), whose
        // flush_tlb_mm() reaches the CPUs LUF left stale (v10 too).
        ("scenarios/luf-map-fixed.toml", [None, None, None]),
        ("scenarios/luf-munmap.toml", [None, None, None]),
        // Matthew Wilcox: the kernel's allocation runs the deferred flush (prep_new_page).
        ("scenarios/luf-slab-reuse.toml", [None, None, None]),
    ];
    for (rel, want) in cases {
        for (i, v) in ["off", "v10", "v12"].iter().enumerate() {
            let cfg = config::load(&path(rel), &[format!("kernel.luf={v}")]).unwrap();
            let (o, errors) = check_config(&cfg, true).unwrap();
            assert!(errors.is_empty(), "{rel} {v}: {errors:?}");
            let got = mmsim::check::headline(&o.violations).map(|v| v.class);
            assert_eq!(got, want[i], "{rel} kernel.luf={v}: {:?}", o.violations.first().map(|v| &v.detail));
        }
    }
    // The slab case is safe because of the flush at allocation: without it, the application
    // reads the kernel's page.
    for v in ["v10", "v12"] {
        let cfg = config::load(&path("scenarios/luf-slab-reuse.toml"), &[format!("kernel.luf={v}"), "check.inject=\"luf-skip-alloc-flush\"".into()]).unwrap();
        let (o, _) = check_config(&cfg, true).unwrap();
        assert_eq!(mmsim::check::headline(&o.violations).map(|v| v.class), Some(Class::UseAfterReuse), "{v}");
    }
}

/// The injection sites are found in the swarm (these are the first seeds that find them, see
/// docs/check.md; all within issue 12's 1,000), with the right class, and the same seeds are
/// clean without the injection.
#[test]
fn injection_sites_are_found() {
    for (inject, v, seed, class) in [
        (Inject::LufDeferWritable, "v10", 2, Class::LostWrite),
        (Inject::LufDeferWritable, "v12", 2, Class::LostWrite),
        // 91 (v10) and 1115 (v12) before the swarm drew LUF's read-only readers (swarm.rs,
        // `luf_readers`): v12 defers only folios of VMAs without VM_WRITE, and the swarm had none.
        // 17 and 19 until cost.filemap_add_folio_ns was charged (2026-11-27) moved the timings;
        // 12 and 61 until the pcp lists were sized per version (2026-11-27, session 21); 1 and
        // 17 until reclaim kept the folios it does not reclaim isolated until its flush; v12's
        // 1 until zone->lock's holds counted the struct pages the buddy touches (session 22);
        // 17 and 46 until long steps ended when their CPU ran ahead (session 36).
        (Inject::LufSkipAllocFlush, "v10", 1, Class::UseAfterReuse),
        (Inject::LufSkipAllocFlush, "v12", 1, Class::UseAfterReuse),
    ] {
        let sets = vec![format!("kernel.luf={v}")];
        let r = run_seed_sets(seed, inject, true, &sets);
        assert_eq!(mmsim::check::headline(&r.violations).map(|v| v.class), Some(class), "{} {v} seed {seed}", inject.name());
        let clean = run_seed_sets(seed, Inject::None, true, &sets);
        assert!(clean.violations.is_empty(), "{v} seed {seed} without injection: {:?}", clean.violations.first().map(|v| &v.detail));
    }
}

/// LUF in the swarm: no violation over the first seeds with either version, and the allowed
/// stale reads of LUF-freed frames are counted (what the deferral exposes). Seeds 207 and 248
/// were the only ones of the first 300 to read through a deferred entry before the swarm drew
/// LUF's read-only readers; they are kept in the list.
#[test]
fn swarm_is_clean_with_luf() {
    for v in ["v10", "v12"] {
        let sets = vec![format!("kernel.luf={v}")];
        use rayon::prelude::*;
        let seeds: Vec<u64> = (1..=120u64).chain([207, 248]).collect();
        let results: Vec<_> = seeds.into_par_iter().map(|seed| run_seed_sets(seed, Inject::None, true, &sets)).collect();
        let mut luf_reads = 0;
        for r in results {
            assert!(r.violations.is_empty(), "{v} seed {}: {:?}", r.seed, r.violations.first().map(|v| &v.detail));
            luf_reads += r.luf_stale_reads;
        }
        assert!(luf_reads > 0, "{v}: the swarm reaches LUF's window");
    }
}

/// With `kernel.luf` among the user's `--set`s (any value, so off runs the same programs) the
/// swarm adds LUF's three readers of a read-only file mapping after the seed's own threads, and
/// changes nothing else; without it the seed is what it was.
#[test]
fn the_swarm_adds_luf_readers_only_when_luf_is_set() {
    use mmsim::check::swarm::scenario;
    for seed in 1..=200 {
        let (sets, base) = scenario(seed, Inject::None, &[]);
        assert!(!base.iter().any(|t| t.ops.contains("file:lw")), "seed {seed}: LUF readers without kernel.luf");
        for v in ["off", "v12"] {
            let (sets_luf, threads) = scenario(seed, Inject::None, &[format!("kernel.luf={v}")]);
            assert_eq!(sets, sets_luf, "seed {seed}: the swarm's own knobs do not depend on kernel.luf");
            assert_eq!(threads.len(), base.len() + 3, "seed {seed}");
            for (a, b) in base.iter().zip(&threads) {
                assert_eq!((a.process, &a.ops), (b.process, &b.ops), "seed {seed}: the seed's own threads are unchanged");
            }
            let added: Vec<&str> = threads[base.len()..].iter().map(|t| t.ops.as_str()).collect();
            assert!(added[0].contains("prot=r") && added[0].contains("touch lw read"), "seed {seed}: {}", added[0]);
            assert!(added[2].contains("madvise lw pageout"), "seed {seed}: {}", added[2]);
        }
    }
}
