//! `step_synth`'s fast loop (L1 hits inlined, CPU and ASID looked up once per step) must give
//! exactly what stepping every access through `Sim::access` gives (issue 13, item 2). With the
//! stale-TLB oracle on, every access goes one by one through the full path (`Sim::access`'s
//! slow path, where the oracle checks it) and the fast loop is off; the oracle never changes
//! the model, so both runs must end with the same clocks, counters and vmstat. With
//! `workload.thin` > 1 each access is charged as that many (the fast loop must leave those to
//! the general one).

use mmsim::config::Config;
use mmsim::sim::Sim;
use proptest::prelude::*;

fn run(sets: &[String], oracle: bool) -> String {
    let cfg = Config::defaults(sets).expect("valid");
    let mut sim = Sim::build(&cfg).expect("builds");
    if oracle {
        sim.enable_oracle();
    }
    sim.run(|_| {});
    let cpus: Vec<String> = sim.cpus.iter().map(|c| format!("{} {:?}", c.clock, c.stats)).collect();
    format!("end {}\n{}\n{:?}", sim.end_ns, cpus.join("\n"), sim.vmstat)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]
    #[test]
    fn fast_synthetic_loop_equals_one_by_one(
        seed in 1u64..1000,
        cpus in 1u64..4,
        threads in 1u64..4,
        processes in 1u64..3,
        ws_pages in 8u64..4096,
        read_pct in 0u64..=100,
        pattern in prop::sample::select(vec!["uniform", "normal", "sequential"]),
        accesses in 1u64..30_000,
        thin in prop::sample::select(vec![1u64, 1, 7]),
    ) {
        let sets: Vec<String> = vec![
            format!("run.seed={seed}"),
            format!("machine.cpus={cpus}"),
            "machine.mem_per_node_mib=256".into(),
            "workload.kind=synthetic".into(),
            format!("workload.processes={processes}"),
            format!("workload.threads={threads}"),
            format!("workload.working_set_mib={}", ws_pages as f64 / 256.0),
            format!("workload.read_pct={read_pct}"),
            format!("workload.pattern={pattern}"),
            format!("workload.accesses_per_thread={accesses}"),
            "workload.text_pages=0".into(),
            format!("workload.thin={thin}"),
        ];
        let fast = run(&sets, false);
        let slow = run(&sets, true);
        prop_assert!(fast.contains("dtlb_loads"));
        prop_assert_eq!(fast, slow);
    }
}
