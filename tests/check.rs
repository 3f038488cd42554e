//! `mmsim check`: the stale-TLB oracle, its fault-injection sites and coverage marks.

use mmsim::check::swarm::run_seed;
use mmsim::check::{Class, Inject};

/// The shipped policies over these seeds give no violation (CI runs 60; `mmsim check --seeds
/// 1000` runs the larger count).
const CLEAN_SEEDS: std::ops::RangeInclusive<u64> = 1..=60;

fn first_violation(inject: Inject, budget: u64) -> Option<(u64, Class)> {
    (1..=budget).find_map(|s| run_seed(s, inject).violations.first().map(|v| (s, v.class)))
}

#[test]
fn shipped_policies_give_no_violation_and_reach_the_batched_paths() {
    let mut marks = std::collections::BTreeMap::new();
    for s in CLEAN_SEEDS {
        let r = run_seed(s, Inject::None);
        assert!(r.violations.is_empty(), "seed {s}: {:?}", r.violations);
        for (k, v) in r.marks {
            *marks.entry(k).or_insert(0u64) += v;
        }
    }
    for m in ["batched flush deferred", "dirty writeback flush", "lazy catch-up flush", "batched pending flush", "pageout", "lazy cpu skipped by a flush", "migration batch", "swap out", "swap in"] {
        assert!(marks.get(m).copied().unwrap_or(0) > 0, "coverage mark {m:?} never reached: {marks:?}");
    }
}

#[test]
fn skip_flush_before_free_is_a_use_after_reuse() {
    let (_, c) = first_violation(Inject::SkipFlushBeforeFree, 10).expect("found within 10 seeds");
    assert_eq!(c, Class::UseAfterReuse);
}

#[test]
fn skip_dirty_flush_before_writeback_is_a_lost_write() {
    let (_, c) = first_violation(Inject::SkipDirtyFlushBeforeWriteback, 10).expect("found within 10 seeds");
    assert_eq!(c, Class::LostWrite);
}

#[test]
fn stale_mm_cpumask_is_found() {
    let (_, c) = first_violation(Inject::StaleMmCpumask, 11).expect("found within 11 seeds");
    assert!(matches!(c, Class::UseAfterReuse | Class::LostWrite | Class::StaleData), "{c:?}");
}

#[test]
fn lazy_cpu_without_catch_up_is_found() {
    // A CPU that comes back from lazy mode without the catch-up flush keeps stale entries: a
    // write through one is a lost write, a read a use-after-reuse or stale data.
    let (_, c) = first_violation(Inject::LazyNoCatchup, 100).expect("found within 100 seeds");
    assert!(matches!(c, Class::UseAfterReuse | Class::StaleData | Class::LostWrite), "{c:?}");
}

#[test]
fn check_cli_exits_3_with_a_reproducer_and_writes_json() {
    let dir = std::env::temp_dir().join(format!("mmsim-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("c.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mmsim"))
        .args(["check", "--seeds", "5", "--inject", "skip-flush-before-free", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let seed = v["violations"][0]["seed"].as_u64().expect("the violation names its seed");
    assert_eq!(v["seeds_run"], seed, "the run stops at the first violation");
    assert!(text.contains(&format!("reproduce: mmsim check --seed {seed} --inject skip-flush-before-free")), "{text}");
    assert_eq!(v["violations"][0]["class"], "use-after-reuse");
    // The printed command reproduces it.
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_mmsim")).args(["check", "--seed", &seed.to_string(), "--inject", "skip-flush-before-free"]).output().unwrap();
    assert_eq!(again.status.code(), Some(3));
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_mmsim")).args(["check", "--seed", "13"]).output().unwrap();
    assert_eq!(ok.status.code(), Some(0));
}
