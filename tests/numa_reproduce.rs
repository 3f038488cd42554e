//! Seed 001 reproduced (`mmsim reproduce numa-delayed-map`, docs/numa.md "Seed 001
//! reproduced"): memory, times and scan sizes divided by the scale, counts multiplied back.
//!
//! Two levels (CI time, docs/numa.md "Tests"):
//! - by default, 1/512 scale (~2 min of CPU per kernel, the two on two threads): the direction
//!   of every row of issue 10's table, with the 1/64 bounds for IRQs, migrations and the
//!   try_to_unmap share; for throughput only the direction (> +1%; the run gives +2.0% at 1/512,
//!   +3.7% at 1/64: 5.13's few IRQs are overstated by the scale, docs/numa.md "Scale").
//!   The mechanism's rows fail when AFTER's mechanism is off: `kernel.numa_delayed_map=off` for
//!   AFTER gives BEFORE's figures exactly (gain 0, IRQs 4.85e7 both, try_to_unmap 1.22% both).
//! - `#[ignore]`d, 1/64 scale (~10 min on two cores: `cargo test --release --test
//!   numa_reproduce -- --ignored`): issue 10's bands themselves (throughput +2..12%).

use mmsim::reproduce::numa_delayed_map::{run_one, run_pair, RunResult};
use std::sync::OnceLock;

/// CI's scale: the smallest at which every knob the experiment divides by the scale is still at
/// least 1 (scan delay and period 1 ms, 1 MB scan size; 1/1024 would make them 0).
const SCALE: u64 = 512;
/// The full check's scale (ignored tests).
const FULL_SCALE: u64 = 64;

fn pair() -> &'static [RunResult; 2] {
    static P: OnceLock<[RunResult; 2]> = OnceLock::new();
    P.get_or_init(|| run_pair(SCALE, &[]).expect("the experiment's configuration is valid"))
}

fn full_pair() -> &'static [RunResult; 2] {
    static P: OnceLock<[RunResult; 2]> = OnceLock::new();
    P.get_or_init(|| run_pair(FULL_SCALE, &[]).expect("the experiment's configuration is valid"))
}

fn gain_pct([b, a]: &[RunResult; 2]) -> f64 {
    100.0 * (a.accesses_per_s / b.accesses_per_s - 1.0)
}

fn shootdowns_removed([b, a]: &[RunResult; 2]) {
    assert!(b.tlb_shootdown_irqs > 1e7, "5.12 shoots down for every migration: {}", b.tlb_shootdown_irqs);
    assert!(a.tlb_shootdown_irqs < 0.1 * b.tlb_shootdown_irqs, "down >= 90%: {} -> {}", b.tlb_shootdown_irqs, a.tlb_shootdown_irqs);
    // Each 5.12 migration IPIs the other CPUs running the process (8 threads over node 1's CPUs).
    let per_page = b.tlb_shootdown_irqs / b.pages_migrated;
    assert!((3.0..8.0).contains(&per_page), "IRQs per migrated page {per_page}");
}

fn migration_fills_the_freed_memory(p: &[RunResult; 2]) {
    for r in p {
        assert!((4.6e6..1.84e7).contains(&r.pages_migrated), "within 2x of 9.2e6: {}", r.pages_migrated);
    }
    let [b, a] = p;
    assert!((a.pages_migrated - b.pages_migrated).abs() < 0.05 * b.pages_migrated, "{} vs {}", b.pages_migrated, a.pages_migrated);
}

fn try_to_unmap_share_falls([b, a]: &[RunResult; 2]) {
    assert!(a.try_to_unmap_pct <= 1.0, "5.13: {}%", a.try_to_unmap_pct);
    assert!(b.try_to_unmap_pct > 20.0 * a.try_to_unmap_pct, "{}% -> {}%", b.try_to_unmap_pct, a.try_to_unmap_pct);
}

// ---- CI: 1/512 scale ----

#[test]
fn delayed_mapping_removes_the_migration_shootdowns() {
    shootdowns_removed(pair());
}

#[test]
fn the_freed_memory_is_filled_by_migration_in_both_kernels() {
    migration_fills_the_freed_memory(pair());
}

/// The direction only at 1/512 (+2.0% here; +3.7% at 1/64, where the band is checked).
#[test]
fn throughput_rises() {
    let gain = gain_pct(pair());
    assert!(gain > 1.0, "pmbench throughput change {gain:.2}%");
}

#[test]
fn try_to_unmap_share_falls_below_one_percent() {
    try_to_unmap_share_falls(pair());
}

/// Two runs of the same configuration agree to the count: 1/512 scale cut at 45 ms (the eater
/// dies at 19.5 ms; 6.2e6 pages migrated by then, scaled back), both on their own thread.
#[test]
fn a_run_is_deterministic() {
    let sets = ["run.max_sim_ms=45".to_string()];
    let [again, a] = run_pair_same(&sets);
    assert!(a.pages_migrated > 0.0);
    assert_eq!(again.simulated_accesses, a.simulated_accesses);
    assert_eq!(again.tlb_shootdown_irqs, a.tlb_shootdown_irqs);
    assert_eq!(again.pages_migrated, a.pages_migrated);
    assert_eq!(again.busy_ns, a.busy_ns);
}

/// BEFORE twice, on two threads.
fn run_pair_same(sets: &[String]) -> [RunResult; 2] {
    let (x, y) = std::thread::scope(|sc| {
        let hx = sc.spawn(|| run_one(SCALE, false, sets).expect("valid"));
        let hy = sc.spawn(|| run_one(SCALE, false, sets).expect("valid"));
        (hx.join().expect("first run"), hy.join().expect("second run"))
    });
    [x, y]
}

#[test]
fn bad_overrides_are_errors_not_panics() {
    let e = run_one(SCALE, false, &["workload.read_pct=101".into()]).err().expect("out of range");
    assert!(e.to_string().contains("workload.read_pct"), "{e}");
}

// ---- the full check: 1/64 scale, issue 10's bands (slow) ----

#[test]
#[ignore = "slow (~10 min on 2 cores): 1/64 scale; run with --ignored"]
fn full_scale_64_delayed_mapping_removes_the_migration_shootdowns() {
    shootdowns_removed(full_pair());
}

#[test]
#[ignore = "slow (~10 min on 2 cores): 1/64 scale; run with --ignored"]
fn full_scale_64_the_freed_memory_is_filled_by_migration_in_both_kernels() {
    migration_fills_the_freed_memory(full_pair());
}

#[test]
#[ignore = "slow (~10 min on 2 cores): 1/64 scale; run with --ignored"]
fn full_scale_64_throughput_rises_within_the_band() {
    let gain = gain_pct(full_pair());
    assert!((2.0..12.0).contains(&gain), "pmbench throughput change {gain:.2}%");
}

#[test]
#[ignore = "slow (~10 min on 2 cores): 1/64 scale; run with --ignored"]
fn full_scale_64_try_to_unmap_share_falls_below_one_percent() {
    try_to_unmap_share_falls(full_pair());
}

#[test]
#[ignore = "known miss (docs/numa.md): with the shared cost model's IPI costs and a 60 s run, 5.12's try_to_unmap share is ~1.5%, not the band's >= 3% (published 6.02%)"]
fn try_to_unmap_share_before_is_at_least_three_percent() {
    let [b, _] = full_pair();
    assert!(b.try_to_unmap_pct >= 3.0, "5.12: {}%", b.try_to_unmap_pct);
}
