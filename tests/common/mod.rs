//! Helpers shared by the integration-test binaries (each binary uses a subset: `mod common;`).
//! Load a scenario with `--set`s, build, run to the end; the run must not have killed a thread.
#![allow(dead_code)]

use std::path::PathBuf;

use mmsim::config::{self, Config};
use mmsim::report::Report;
use mmsim::run::Outcome;
use mmsim::sim::Sim;

/// `--set`s as the config loader takes them.
pub fn sets(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

/// A shipped scenario (path relative to the package) with `s` applied.
pub fn scenario(rel: &str, s: &[&str]) -> Config {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel);
    config::load(&path, &sets(s)).unwrap_or_else(|e| panic!("the shipped scenario {rel} loads: {e}"))
}

/// Build and run `cfg` (with the stale-TLB oracle if `oracle`); no thread may have been killed.
pub fn run_cfg(cfg: &Config, oracle: bool) -> (Sim, Outcome) {
    let mut sim = Sim::build(cfg).expect("builds");
    if oracle {
        sim.enable_oracle();
    }
    let out = sim.run(|_| {});
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    (sim, out)
}

/// [`run_cfg`] of a shipped scenario.
pub fn run_scenario(rel: &str, s: &[&str], oracle: bool) -> Sim {
    run_cfg(&scenario(rel, s), oracle).0
}

/// [`run_cfg`] without the oracle, which must run to completion; its report.
pub fn report_completed(cfg: &Config) -> Report {
    let (sim, out) = run_cfg(cfg, false);
    assert_eq!(out, Outcome::Completed);
    Report::from_sim(&sim, out)
}
