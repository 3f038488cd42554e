//! `mmsim reproduce luf` (seed 000, issue 12 item 3) at 1/1024 scale with 3 generated tokens:
//! the JSON's shape, determinism (the parallel run equals the sequential one, byte for byte
//! once the host's wall-clock fields are left out), LUF's allocation-side flushes, and issue
//! 12's neutrality check.

use mmsim::reproduce::luf;

const SCALE: u64 = 1024;

fn sets() -> Vec<String> {
    vec!["workload.llm.gen_tokens=3".to_string()]
}

/// The JSON of a run without the host-side fields (wall time and what is derived from it).
fn without_host(mut v: serde_json::Value) -> serde_json::Value {
    for r in v["runs"].as_array_mut().expect("runs") {
        let r = r.as_object_mut().expect("a run");
        r.remove("wall_s");
        r.remove("accesses_per_wall_s");
    }
    v
}

#[test]
fn luf_reproduction_shape_and_determinism() {
    let (out, text) = luf::experiment(SCALE, &sets()).expect("runs");
    let v = serde_json::to_value(&out).unwrap();
    assert_eq!(v["experiment"], "luf");
    assert_eq!(v["scale"], SCALE);
    let rows = v["rows"].as_array().expect("rows");
    let metrics: Vec<&str> = rows.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(metrics, ["tlb_flush_events", "tlb_shootdown_irqs", "itlb_load_misses", "dtlb_store_misses", "dtlb_load_misses", "runtime_s", "luf_alloc_flush_s", "pages_demoted", "pages_promoted"]);
    for r in rows {
        for k in ["before", "after", "after_v12"] {
            let x = r["simulated"][k].as_f64().unwrap_or_else(|| panic!("{}: simulated.{k} is a number", r["metric"]));
            assert!(x.is_finite() && x >= 0.0, "{}: simulated.{k} = {x}", r["metric"]);
        }
        let m = r["metric"].as_str().unwrap();
        let published = &r["published"];
        if m.starts_with("luf_") || m.starts_with("pages_") {
            assert!(published.is_null(), "{m}: the seed gives no figure");
        } else {
            assert!(published["before"].as_f64().unwrap() > published["after"].as_f64().unwrap(), "{m}: the seed's figures fall");
            // v12's published figures exist for the two rows the v12 cover letter gives.
            assert_eq!(published["after_v12"].is_number(), m == "tlb_shootdown_irqs" || m == "runtime_s", "{m}");
        }
    }
    // The seed's IRQ line, summed from its 64 numbers, and its 30 runtimes' mean.
    assert_eq!(rows[1]["published"]["before"].as_f64().unwrap(), 12_512_508_160.0);
    assert_eq!(rows[1]["published"]["after"].as_f64().unwrap(), 569_270_346.0);
    assert!((rows[5]["published"]["before"].as_f64().unwrap() - 1052.527).abs() < 0.01);
    // The workload ran: reclaim kept unmapping the models (the runs are not trivially empty).
    let before = |m: &str| rows.iter().find(|r| r["metric"] == m).unwrap()["simulated"]["before"].as_f64().unwrap();
    assert!(before("tlb_shootdown_irqs") > 0.0 && before("pages_demoted") > 0.0 && before("runtime_s") > 0.0);
    // Allocation-side flush time only where LUF runs. The direction of the flush rows is not
    // asserted: at this scale, with reads sleeping on a shared block device (block/mod.rs),
    // v10's allocation flushes each cover about two folds and go to every CPU of the global
    // batch, so tlb_flush events and IRQs rise (docs/luf.md, Reproduction); on
    // scenarios/llm-inference.toml they fall by more than 90% (tests/luf.rs).
    let sim = |m: &str, k: &str| rows.iter().find(|r| r["metric"] == m).unwrap()["simulated"][k].as_f64().unwrap();
    assert_eq!(sim("luf_alloc_flush_s", "before"), 0.0);
    assert!(sim("luf_alloc_flush_s", "after") > 0.0 && sim("luf_alloc_flush_s", "after_v12") > 0.0);
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    assert!(v.get("seeds").is_none() && rows.iter().all(|r| r.get("per_seed").is_none()), "one run per kernel: no per-seed figures");
    assert!(text.contains("tlb_shootdown_irqs"), "{text}");
    // `reproduce all`'s summary rows: issue 12's bands on the v10 figures just computed.
    let checks = luf::checks(&out);
    let names: Vec<&str> = checks.iter().map(|c| c.metric.as_str()).collect();
    assert_eq!(names, ["tlb_shootdown_irqs reduction % (v10)", "tlb_flush_events reduction % (v10)", "itlb_load_misses reduction % (v10)", "dTLB store minus load miss reduction (points)", "runtime reduction % (v10)"]);
    let red = |b: f64, a: f64| 100.0 * (b - a) / b;
    assert!((checks[0].simulated - red(sim("tlb_shootdown_irqs", "before"), sim("tlb_shootdown_irqs", "after"))).abs() < 1e-9);
    assert!((checks[0].published.unwrap() - red(12_512_508_160.0, 569_270_346.0)).abs() < 1e-9);
    // The seed's own figures sit in its bands: -57% store against -24% load, -5% runtime.
    assert!(checks[3].band.contains(checks[3].published.unwrap()) && checks[4].band.contains(checks[4].published.unwrap()));
    for c in &checks {
        assert_eq!(c.agrees, c.band.contains(c.simulated), "{}", c.metric);
    }

    // Determinism: the same experiment on a one-thread pool (the sequential run).
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let (seq, _) = pool.install(|| luf::experiment(SCALE, &sets()).expect("runs"));
    let seq = serde_json::to_value(&seq).unwrap();
    assert_eq!(serde_json::to_string(&without_host(seq)).unwrap(), serde_json::to_string(&without_host(v)).unwrap());
}

/// Issue 12's neutrality check: a workload with only writable private mappings (anonymous,
/// read/write, no text region) on the reproduction's machine at 1/1024, under memory pressure
/// (3 x 60 MiB on 42 + 98 MiB: demotion to the CXL node and swap-out), changes shootdowns and
/// runtime by under 1% with v10 on. Swap is on here (the seed's is off): without it anonymous
/// memory cannot be reclaimed at all. A text region would not be neutral: its pages are
/// read-only, and LUF defers their flushes when reclaim swaps them (docs/luf.md, Reproduction).
#[test]
fn luf_v10_is_neutral_on_writable_private_mappings() {
    use mmsim::report::Report;
    use mmsim::sim::Sim;
    let run = |kernel: luf::Kernel, seed: u32| {
        let seed = format!("run.seed={seed}");
        let sets: Vec<String> = [
            seed.as_str(),
            "machine.swap_mib=256",
            "workload.kind=synthetic",
            "workload.processes=3",
            "workload.threads=15",
            "workload.working_set_mib=60",
            "workload.accesses_per_thread=100000",
            "workload.read_pct=50",
            "workload.pattern=uniform",
            "workload.text_pages=0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cfg = luf::config(SCALE, kernel, &sets).unwrap();
        let mut sim = Sim::build(&cfg).unwrap();
        let out = sim.run(|_| {});
        Report::from_sim(&sim, out)
    };
    // The run is chaotic: between seeds the runtime of `off` spans 78-170 ms, and one deferred
    // folio can tip a trajectory between more direct reclaim and more kswapd work (seed 2: one
    // folio deferred, 11% fewer pages swapped, runtime -7.7%, IRQs -0.8%). Measured over seeds
    // 1..=16 on 2026-11-26: nine seeds change by under 0.0005%, six by 0.03-0.47%, seed 2 by
    // 7.7%; mean absolute change 0.52%. Four seeds, as this test had, let one outlier decide, so
    // the change is averaged over sixteen (run in parallel).
    use rayon::prelude::*;
    let change = |a: f64, b: f64| (b - a).abs() / a.max(1.0);
    const SEEDS: u32 = 16;
    let per_seed: Vec<(f64, f64, u64)> = (1..=SEEDS)
        .into_par_iter()
        .map(|seed| {
            let (off, v10) = (run(luf::Kernel::Off, seed), run(luf::Kernel::V10, seed));
            let c = |r: &Report, k: &str| r.counters.get(k).copied().unwrap_or(0);
            let irqs = |r: &Report| r.per_cpu.tlb_shootdowns.iter().sum::<u64>() as f64;
            // Under pressure: demotion and swap-out both ran.
            assert!(c(&off, "pgdemote_direct") + c(&off, "pgdemote_kswapd") > 1000 && c(&off, "pswpout") > 1000, "seed {seed}: demoted {} swapped {}", c(&off, "pgdemote_direct"), c(&off, "pswpout"));
            // Nearly nothing is deferred: a writable private PTE is read-only only after a
            // NUMA-hinted (PROT_NONE) anon folio is migrated (remove_migration_pte() maps it
            // without the write bit, as Linux does since 6.3) and before its next write, and
            // such a folio is reclaimed clean only if it came back from swap on a read.
            let deferred = c(&v10, "luf_deferred_folios");
            assert!(deferred < c(&v10, "pswpout") / 100, "seed {seed}: {deferred} folios deferred");
            eprintln!("neutrality, seed {seed}: IRQs {} -> {}, runtime {} -> {} ns, {deferred} folios deferred", irqs(&off), irqs(&v10), off.time.elapsed_ns, v10.time.elapsed_ns);
            (change(irqs(&off), irqs(&v10)), change(off.time.elapsed_ns as f64, v10.time.elapsed_ns as f64), deferred)
        })
        .collect();
    let mean = |f: fn(&(f64, f64, u64)) -> f64| per_seed.iter().map(f).sum::<f64>() / SEEDS as f64;
    let (d_irq, d_rt) = (mean(|p| p.0), mean(|p| p.1));
    let deferred_all: u64 = per_seed.iter().map(|p| p.2).sum();
    assert!(d_irq < 0.01, "shootdown IRQs change by {:.2}% on average ({deferred_all} folios deferred)", d_irq * 100.0);
    assert!(d_rt < 0.01, "runtime changes by {:.2}% on average ({deferred_all} folios deferred)", d_rt * 100.0);
}

/// `--seeds N`: seeds 1..=N per kernel with a start jitter; each row's simulated figure is the
/// mean of its per-seed figures, the seeds give different runs, and the whole is deterministic.
#[test]
fn luf_reproduction_over_seeds_reports_means_and_each_seed() {
    let sets = vec!["workload.llm.gen_tokens=1".to_string()];
    let (out, text) = luf::experiment_seeds(SCALE, &sets, Some(2)).expect("runs");
    let v = serde_json::to_value(&out).unwrap();
    assert_eq!(v["seeds"], 2);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6);
    assert_eq!(runs.iter().map(|r| r["seed"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 1, 2, 1, 2]);
    let mut differ = false;
    for r in v["rows"].as_array().unwrap() {
        for k in ["before", "after", "after_v12"] {
            let each: Vec<f64> = r["per_seed"][k].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
            assert_eq!(each.len(), 2);
            let mean = (each[0] + each[1]) / 2.0;
            assert!((r["simulated"][k].as_f64().unwrap() - mean).abs() <= 1e-9 * mean.abs().max(1.0), "{}: {k}", r["metric"]);
            differ |= each[0] != each[1];
        }
    }
    assert!(differ, "two seeds with start jitter give two different runs");
    assert!(text.contains("Change against 6.9 per seed"), "{text}");
    let (again, _) = luf::experiment_seeds(SCALE, &sets, Some(2)).expect("runs");
    assert_eq!(serde_json::to_string(&serde_json::to_value(&again).unwrap()["rows"]).unwrap(), serde_json::to_string(&v["rows"]).unwrap());
}
