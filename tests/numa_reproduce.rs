//! Seed 001 reproduced (`mmsim reproduce numa-delayed-map`, docs/numa.md "Seed 001
//! reproduced") at 1/64 scale: memory, times and scan sizes divided by 64, counts multiplied
//! back. Checks the direction and the shape of issue 10's bands; the full-scale figures are in
//! the docs (minutes to run).

use mmsim::reproduce::numa_delayed_map::{run_one, run_pair, RunResult};
use std::sync::OnceLock;

const SCALE: u64 = 64;

fn pair() -> &'static [RunResult; 2] {
    static P: OnceLock<[RunResult; 2]> = OnceLock::new();
    P.get_or_init(|| run_pair(SCALE, &[]).expect("the experiment's configuration is valid"))
}

#[test]
fn delayed_mapping_removes_the_migration_shootdowns() {
    let [b, a] = pair();
    assert!(b.tlb_shootdown_irqs > 1e7, "5.12 shoots down for every migration: {}", b.tlb_shootdown_irqs);
    assert!(a.tlb_shootdown_irqs < 0.1 * b.tlb_shootdown_irqs, "down >= 90%: {} -> {}", b.tlb_shootdown_irqs, a.tlb_shootdown_irqs);
    // Each 5.12 migration IPIs the other CPUs running the process (8 threads over node 1's CPUs).
    let per_page = b.tlb_shootdown_irqs / b.pages_migrated;
    assert!((3.0..8.0).contains(&per_page), "IRQs per migrated page {per_page}");
}

#[test]
fn the_freed_memory_is_filled_by_migration_in_both_kernels() {
    for r in pair() {
        assert!((4.6e6..1.84e7).contains(&r.pages_migrated), "within 2x of 9.2e6: {}", r.pages_migrated);
    }
    let [b, a] = pair();
    assert!((a.pages_migrated - b.pages_migrated).abs() < 0.05 * b.pages_migrated, "{} vs {}", b.pages_migrated, a.pages_migrated);
}

#[test]
fn throughput_rises_within_the_band() {
    let [b, a] = pair();
    let gain = 100.0 * (a.accesses_per_s / b.accesses_per_s - 1.0);
    assert!((2.0..12.0).contains(&gain), "pmbench throughput change {gain:.2}%");
}

#[test]
fn try_to_unmap_share_falls_below_one_percent() {
    let [b, a] = pair();
    assert!(a.try_to_unmap_pct <= 1.0, "5.13: {}%", a.try_to_unmap_pct);
    assert!(b.try_to_unmap_pct > 20.0 * a.try_to_unmap_pct, "{}% -> {}%", b.try_to_unmap_pct, a.try_to_unmap_pct);
}

#[test]
#[ignore = "known miss (docs/numa.md): with the shared cost model's IPI costs and a 60 s run, 5.12's try_to_unmap share is ~1.5%, not the band's >= 3% (published 6.02%)"]
fn try_to_unmap_share_before_is_at_least_three_percent() {
    let [b, _] = pair();
    assert!(b.try_to_unmap_pct >= 3.0, "5.12: {}%", b.try_to_unmap_pct);
}

/// Two runs of the same configuration agree to the count (at 1/256 scale: CI time).
#[test]
fn a_run_is_deterministic() {
    let again = run_one(4 * SCALE, true, &[]).expect("valid");
    let a = run_one(4 * SCALE, true, &[]).expect("valid");
    assert!(a.pages_migrated > 0.0);
    assert_eq!(again.simulated_accesses, a.simulated_accesses);
    assert_eq!(again.tlb_shootdown_irqs, a.tlb_shootdown_irqs);
    assert_eq!(again.pages_migrated, a.pages_migrated);
    assert_eq!(again.busy_ns, a.busy_ns);
}

#[test]
fn bad_overrides_are_errors_not_panics() {
    let e = run_one(SCALE, false, &["workload.read_pct=101".into()]).err().expect("out of range");
    assert!(e.to_string().contains("workload.read_pct"), "{e}");
}
