//! Memory tiering (issue 10 items 1-3, 5, 7; docs/tiering.md): tiers, demotion in reclaim,
//! NUMA balancing mode 2's promotion with its hot threshold, rate limit and adaptive threshold.
//! Runs scenarios/tiering.toml: a DRAM node with the CPUs, a CPU-less CXL node, a cold set
//! filling DRAM and a hot set that lands on CXL.

mod common;

use mmsim::mm::vmstat::VmEvent;
use mmsim::sim::Sim;

fn run_with(sets: &[&str], oracle: bool) -> Sim {
    common::run_scenario("scenarios/tiering.toml", sets, oracle)
}

fn run(sets: &[&str]) -> Sim {
    run_with(sets, false)
}

#[test]
fn the_cpuless_node_is_a_lower_tier_and_the_dram_node_demotes_to_it() {
    let sim = run(&["run.max_sim_ms=1"]);
    assert_eq!(sim.tiers.toptier, vec![true, false]);
    assert_eq!(sim.tiers.preferred, vec![vec![1], vec![]]);
    assert!(sim.can_demote(0));
    assert!(!sim.can_demote(1), "the last tier has no demotion target");
}

#[test]
fn tiering_demotes_cold_and_promotes_hot_folios() {
    let sim = run(&[]);
    let v = |e| sim.vmstat.get(e);
    assert!(v(VmEvent::PGDEMOTE_KSWAPD) > 0, "kswapd demoted");
    assert!(v(VmEvent::PGPROMOTE_SUCCESS) > 0, "hint faults promoted");
    assert!(v(VmEvent::PGPROMOTE_CANDIDATE) >= v(VmEvent::PGPROMOTE_SUCCESS));
    assert!(v(VmEvent::NUMA_HINT_FAULTS) >= v(VmEvent::PGPROMOTE_CANDIDATE));
    // Every promotion and demotion is a successful migration, and nothing else migrates here.
    assert_eq!(v(VmEvent::PGMIGRATE_SUCCESS), v(VmEvent::PGPROMOTE_SUCCESS) + v(VmEvent::PGDEMOTE_KSWAPD) + v(VmEvent::PGDEMOTE_DIRECT));
    assert_eq!(v(VmEvent::NUMA_PAGES_MIGRATED), v(VmEvent::PGPROMOTE_SUCCESS));
    // Mode 2 only arms lower-tier folios: every hint fault is on the CXL node.
    assert_eq!(v(VmEvent::NUMA_HINT_FAULTS_LOCAL), 0);
}

#[test]
fn without_demotion_or_mode_2_nothing_moves_that_way() {
    let sim = run(&["vm.demotion_enabled=false"]);
    assert_eq!(sim.vmstat.get(VmEvent::PGDEMOTE_KSWAPD) + sim.vmstat.get(VmEvent::PGDEMOTE_DIRECT), 0);
    let sim = run(&["kernel.numa_balancing=0"]);
    for e in [VmEvent::PGPROMOTE_SUCCESS, VmEvent::PGPROMOTE_CANDIDATE, VmEvent::NUMA_HINT_FAULTS] {
        assert_eq!(sim.vmstat.get(e), 0, "{e:?}");
    }
}

#[test]
fn halving_the_promote_rate_limit_lowers_pgpromote_success() {
    let full = run(&[]).vmstat.get(VmEvent::PGPROMOTE_SUCCESS);
    let half = run(&["kernel.numa_balancing_promote_rate_limit_MBps=1"]).vmstat.get(VmEvent::PGPROMOTE_SUCCESS);
    assert!(half < full, "1 MB/s: {half}, 2 MB/s: {full}");
    assert!(half * 10 < full * 7, "the limit binds: about half ({half} vs {full})");
}

#[test]
fn the_rate_limit_caps_promotions_per_second() {
    for mbps in [1u64, 2] {
        let sim = run(&[&format!("kernel.numa_balancing_promote_rate_limit_MBps={mbps}")]);
        let per_s = mbps << 8; // pages per second
        // One budget per one-second window, the first starting at time 0.
        let windows = sim.end_ns / 1_000_000_000 + 1;
        let promoted = sim.vmstat.get(VmEvent::PGPROMOTE_SUCCESS);
        assert!(promoted <= per_s * windows, "{mbps} MB/s: {promoted} promotions in {windows} windows");
        assert!(promoted >= per_s * (windows - 1) / 2, "{mbps} MB/s: the limit, not something else, bounds it: {promoted}");
    }
}

#[test]
fn the_hot_threshold_adapts_to_the_candidate_rate() {
    // Candidates far above the 2 MB/s limit: the threshold steps down by 1000 * 2 / 16 ms every
    // scan_period_max, not below one step.
    let sim = run(&[]);
    let h = &sim.tiers.pgdat[0].threshold_history;
    assert!(h.len() >= 3, "adjusted every scan_period_max (500 ms): {h:?}");
    assert_eq!(h[0].1, 875);
    assert!(h.windows(2).all(|w| w[1].1 == (w[0].1 - 125).max(125) && w[1].0 > w[0].0 + 500), "{h:?}");
    // Candidates far below the kernel's default limit (65536 MB/s): it steps up to twice the
    // default and stays there.
    let sim = run(&["kernel.numa_balancing_promote_rate_limit_MBps=65536"]);
    let h = &sim.tiers.pgdat[0].threshold_history;
    assert_eq!(h.first().map(|x| x.1), Some(1125), "{h:?}");
    assert!(h.windows(2).all(|w| w[1].1 == (w[0].1 + 125).min(2000)), "{h:?}");
    assert!(h.len() < 8 || h.last().unwrap().1 == 2000);
    // The CXL node is never a promotion target.
    assert!(sim.tiers.pgdat[1].threshold_history.is_empty());
    assert_eq!(sim.tiers.pgdat[1].pgpromote_candidate, 0);
}

#[test]
fn a_longer_hot_threshold_default_is_what_the_threshold_adapts_from() {
    let sim = run(&["kernel.numa_balancing_hot_threshold_ms=400"]);
    let h = &sim.tiers.pgdat[0].threshold_history;
    assert_eq!(h.first().map(|x| x.1), Some(350), "one step is 400 * 2 / 16 = 50 ms: {h:?}");
}

#[test]
fn tiering_passes_the_stale_tlb_oracle() {
    let mut sim = run_with(&["run.max_sim_ms=1500"], true);
    let o = sim.oracle.take().expect("oracle on");
    assert!(o.violations.is_empty(), "{:?}", o.violations.first().map(|v| &v.detail));
    for m in ["demotion", "promotion", "promotion woke kswapd", "tiering threshold adjusted"] {
        assert!(o.marks.get(m).copied().unwrap_or(0) > 0, "reached {m}: {:?}", o.marks);
    }
}

#[test]
fn mode_2_needs_linux_5_18_and_demotion_5_15() {
    let load = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        mmsim::config::load(std::path::Path::new("scenarios/tiering.toml"), &sets).map(|_| ()).map_err(|e| e.to_string())
    };
    let e = load(&["kernel.preset=\"linux-5.13\"", "vm.demotion_enabled=false"]).unwrap_err();
    assert!(e.contains("kernel.numa_balancing") && e.contains("5.18"), "{e}");
    let e = load(&["kernel.preset=\"linux-4.14\"", "kernel.numa_balancing=0"]).unwrap_err();
    assert!(e.contains("vm.demotion_enabled") && e.contains("5.15"), "{e}");
    assert!(load(&["kernel.preset=\"linux-6.1\""]).is_ok());
    assert!(load(&["kernel.numa_balancing=4"]).is_err());
}

#[test]
fn the_tiering_report_appears_only_with_a_memory_only_node() {
    let sim = run(&["run.max_sim_ms=50"]);
    let r = mmsim::report::Report::from_sim(&sim, mmsim::run::Outcome::Completed);
    assert!(r.counters.contains_key("pgpromote_success"));
    let t = r.tiering.as_ref().expect("a tiering section");
    assert_eq!(t.nodes[1].memory_tier, 31);
    assert!(r.human().contains("==> memory tiers <=="));
    let cfg = mmsim::config::load(std::path::Path::new("scenarios/numa-hint-faults.toml"), &["run.max_sim_ms=1".to_string()]).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    sim.run(|_| {});
    let r = mmsim::report::Report::from_sim(&sim, mmsim::run::Outcome::Completed);
    assert!(r.tiering.is_none() && !r.counters.contains_key("pgdemote_kswapd"));
}

/// A file set read through a 16 MiB DRAM node and a 4 MiB CXL node: kswapd demotes clean file
/// folios to CXL until it is full, then evicts the ones it cannot demote, as without tiering.
fn file_stream(demotion: bool) -> Sim {
    use mmsim::config::{Config, Origin, ThreadSpec};
    let sets: Vec<String> = [
        "machine.cpus=2",
        "machine.mem_per_node_mib=16",
        "machine.cpuless_nodes=1",
        "machine.cpuless_mem_mib=4",
        &format!("vm.demotion_enabled={demotion}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ops = "mmap f 10240 file:big sparse shared\nloop 2\n  touch f read\nend\n".to_string();
    let threads = vec![ThreadSpec { process: 0, cpu: Some(1), ops, ops_origin: Origin { file: "<test>".into(), line: 1 } }];
    let cfg = Config::with_threads(&sets, threads).expect("valid");
    let mut sim = Sim::build(&cfg).expect("builds");
    sim.enable_oracle();
    sim.run(|_| {});
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    sim
}

#[test]
fn folios_that_cannot_be_demoted_are_reclaimed_as_before() {
    let mut sim = file_stream(true);
    let v = |s: &Sim, e| s.vmstat.get(e);
    let demoted = v(&sim, VmEvent::PGDEMOTE_KSWAPD) + v(&sim, VmEvent::PGDEMOTE_DIRECT);
    let stolen = v(&sim, VmEvent::PGSTEAL_KSWAPD) + v(&sim, VmEvent::PGSTEAL_DIRECT);
    assert!(demoted > 0, "the DRAM node demoted to CXL");
    assert!(stolen > demoted + 1024, "most of the stream was evicted, not demoted: {stolen} reclaimed, {demoted} demoted");
    assert_eq!(sim.oom_events, 0);
    let o = sim.oracle.take().expect("oracle on");
    assert!(o.violations.is_empty(), "{:?}", o.violations.first().map(|v| &v.detail));
    assert!(o.marks.get("demotion failed: reclaimed instead").copied().unwrap_or(0) > 0, "{:?}", o.marks);
    // Without demotion the same stream is only evicted.
    let sim = file_stream(false);
    assert_eq!(v(&sim, VmEvent::PGDEMOTE_KSWAPD) + v(&sim, VmEvent::PGDEMOTE_DIRECT), 0);
    assert!(v(&sim, VmEvent::PGSTEAL_KSWAPD) + v(&sim, VmEvent::PGSTEAL_DIRECT) > 0);
}

/// Item 7: the check swarm draws tiering scenarios (a CPU-less node, mode 2 or 3) on about a
/// quarter of the seeds whose preset has it (6.1+), from a PRNG of their own.
#[test]
fn the_check_swarm_draws_tiering_scenarios() {
    let mut tiering = 0;
    let mut mode3 = 0;
    for seed in 1..=1000 {
        let (sets, threads) = mmsim::check::swarm::scenario(seed, mmsim::check::Inject::None, &[]);
        if sets.iter().any(|s| s == "machine.cpuless_nodes=1") {
            tiering += 1;
            mode3 += sets.iter().any(|s| s == "kernel.numa_balancing=3") as u32;
            assert!(threads.iter().any(|t| t.ops.contains("mmap thot")), "seed {seed}: a hot set");
            let preset = sets.iter().find_map(|s| s.strip_prefix("kernel.preset=")).unwrap();
            assert!(["\"linux-6.1\"", "\"linux-6.12\"", "\"linux-6.18\""].contains(&preset), "seed {seed}: {preset}");
        }
    }
    assert!((100..=250).contains(&tiering), "{tiering} tiering seeds of 1000");
    assert!(mode3 > 0 && mode3 < tiering, "{mode3} of them with mode 3");
    eprintln!("{tiering} tiering seeds of 1000, {mode3} with mode 3");
}
