//! The library's entry points for other front ends (the Python binding in python/): run a
//! scenario, reproduce an experiment, list the knobs, each returning the same JSON text as the
//! command line's `--json` file. Nothing here prints; errors are the typed `ApiError`, whose
//! message is the command line's (`FILE:LINE: KEY: what is wrong` for a scenario mistake).

use std::path::Path;

use serde::Serialize;

use crate::config::{self, Config, ConfigError};
use crate::report::Report;
use crate::run::Outcome;
use crate::sim::Sim;

/// What went wrong, in the command line's words.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The user's scenario, `--set` or experiment name is wrong (the CLI's exit code 2).
    #[error("{0}")]
    Scenario(#[from] ConfigError),
    /// Anything else the user asked for that does not exist or cannot run (exit code 2 or 1).
    #[error("{0}")]
    Usage(String),
}

/// Where a scenario comes from: a file, or TOML text with a name for error messages (the name
/// plays the file's part in `FILE:LINE: KEY` and its stem is the scenario's name).
pub enum Scenario<'a> {
    Path(&'a Path),
    Text { name: &'a str, toml: &'a str },
}

/// Parse and check a scenario with `--set key=value` overrides applied in order.
pub fn load(scenario: &Scenario, sets: &[String]) -> Result<Config, ConfigError> {
    match scenario {
        Scenario::Path(p) => config::load(p, sets),
        Scenario::Text { name, toml } => config::load_str(name, toml, sets),
    }
}

/// Build the machine of `cfg` and run it to the end (or to `run.max_sim_ms`), calling
/// `progress` with the simulated time now and then. Shared by `mmsim run` and [`run`].
pub fn simulate(cfg: &Config, progress: impl FnMut(u64)) -> Result<(Report, Outcome), ConfigError> {
    let mut sim = Sim::build(cfg)?;
    let outcome = sim.run(progress);
    Ok((Report::from_sim(&sim, outcome), outcome))
}

/// `mmsim run SCENARIO --set ... --json FILE`: the report as the JSON text the file would hold
/// (pretty, with the trailing newline). A run that hits `run.max_sim_ms` is not an error here:
/// its `"outcome"` field says so, as the CLI's JSON does (the CLI also exits 4).
pub fn run_json(scenario: &Scenario, sets: &[String]) -> Result<String, ApiError> {
    let cfg = load(scenario, sets)?;
    let (report, _) = simulate(&cfg, |_| {})?;
    Ok(to_json(&report))
}

/// `mmsim reproduce NAME --set ... --seeds N --scale K --json FILE`: the JSON text of the file.
/// `sets` and `seeds` apply to batched-flush only; `scale` (None: each experiment's default, as
/// the CLI without `--scale`) to batched-flush, hvo, numa-delayed-map and luf, with the CLI's
/// ranges.
pub fn reproduce_json(name: &str, sets: &[String], seeds: Option<u64>, scale: Option<u64>) -> Result<String, ApiError> {
    if (!sets.is_empty() || seeds.is_some()) && name != "batched-flush" {
        return Err(ApiError::Usage("reproduce: sets and seeds are supported for batched-flush only".into()));
    }
    let max = crate::reproduce::summary::max_scale(name);
    if let Some(k) = scale
        && !(1..=max).contains(&k)
    {
        return Err(ApiError::Usage(if max == 0 { format!("reproduce: {name} has one size (no scale)") } else { format!("reproduce: scale for {name} takes 1 to {max}, not {k}") }));
    }
    match name {
        "batched-flush" => {
            let seeds = seeds.unwrap_or(crate::reproduce::batched_flush::SEEDS);
            if seeds == 0 {
                return Err(ApiError::Usage("reproduce: seeds must be at least 1".into()));
            }
            let (out, _) = crate::reproduce::batched_flush::experiment(sets, seeds, scale.unwrap_or(crate::reproduce::batched_flush::DEFAULT_SCALE))?;
            Ok(to_json(&out))
        }
        "vmacache" => {
            // As the CLI: the real traces are included when run from the repository root.
            let t = crate::reproduce::vmacache::table(&[], &crate::reproduce::vmacache::present_traces()).map_err(ApiError::Usage)?;
            Ok(to_json(&t))
        }
        "hvo" => Ok(to_json(&crate::reproduce::hvo::run(scale.unwrap_or(crate::reproduce::hvo::DEFAULT_SCALE)).0)),
        // Full scale without a scale, as the CLI without --scale (minutes).
        "numa-delayed-map" => Ok(to_json(&crate::reproduce::numa_delayed_map::experiment(scale.unwrap_or(1), sets)?.0)),
        "flush-alternatives" => Ok(to_json(&crate::reproduce::flush_alternatives::experiment().map_err(ApiError::Usage)?)),
        // Full scale without a scale, as the CLI without --scale (about 49 minutes here: docs/luf.md).
        "luf" => Ok(to_json(&crate::reproduce::luf::experiment(scale.unwrap_or(1), sets)?.0)),
        _ => {
            let names: Vec<&str> = crate::reproduce::EXPERIMENTS.iter().map(|(n, _)| *n).collect();
            Err(ApiError::Usage(format!("reproduce: unknown experiment '{name}'; available: {}", names.join(", "))))
        }
    }
}

/// One knob of `mmsim knobs`, for scripts.
#[derive(Serialize)]
pub struct KnobInfo {
    pub key: &'static str,
    /// int, float, bool, enum or str.
    pub kind: &'static str,
    pub default: &'static str,
    pub unit: &'static str,
    pub doc: &'static str,
    pub source: &'static str,
    /// The allowed values of an enum knob; empty otherwise.
    pub values: Vec<&'static str>,
    /// Inclusive bounds of a numeric knob.
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// The knob table of `mmsim knobs`, in its order.
pub fn knobs() -> Vec<KnobInfo> {
    use crate::config::knobs::Kind;
    config::knobs::all()
        .map(|k| {
            let (kind, values, min, max) = match k.kind {
                Kind::Int { min, max } => ("int", vec![], Some(min as f64), Some(max as f64)),
                Kind::Float { min, max } => ("float", vec![], Some(min), Some(max)),
                Kind::Bool => ("bool", vec![], None, None),
                Kind::Enum(v) => ("enum", v.to_vec(), None, None),
                Kind::Str => ("str", vec![], None, None),
            };
            KnobInfo { key: k.key, kind, default: k.default, unit: k.unit, doc: k.doc, source: k.source, values, min, max }
        })
        .collect()
}

/// [`knobs`] as JSON text.
pub fn knobs_json() -> String {
    to_json(&knobs())
}

/// The JSON text `crate::output::write_json` writes: pretty, deterministic, newline-terminated.
pub fn to_json<T: Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("report types serialize");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = "[machine]\ncpus = 2\n";

    #[test]
    fn text_and_file_scenarios_give_the_cli_json() {
        let p = Path::new("scenarios/munmap-storm.toml");
        let from_file = run_json(&Scenario::Path(p), &["machine.cpus=4".into()]).unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        let from_text = run_json(&Scenario::Text { name: "scenarios/munmap-storm.toml", toml: &text }, &["machine.cpus=4".into()]).unwrap();
        assert_eq!(from_file, from_text);
        let v: serde_json::Value = serde_json::from_str(&from_file).unwrap();
        assert_eq!(v["scenario"], "munmap-storm");
        assert_eq!(v["per_cpu"]["tlb_shootdowns"].as_array().unwrap().len(), 4);
        assert!(v["counters"]["nr_tlb_remote_flush"].as_u64().unwrap() > 0);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = run_json(&Scenario::Text { name: "x.toml", toml: "[machine]\ncpus = 0\n" }, &[]).unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with("x.toml:2: machine.cpus:"), "{m}");
        let e = run_json(&Scenario::Text { name: "x.toml", toml: TINY }, &["machine.cpuz=3".into()]).unwrap_err();
        assert!(e.to_string().starts_with("--set:1: machine.cpuz:"), "{e}");
        assert!(matches!(reproduce_json("nope", &[], None, None), Err(ApiError::Usage(_))));
        assert!(matches!(reproduce_json("vmacache", &[], None, Some(2)), Err(ApiError::Usage(_))));
        assert!(matches!(reproduce_json("hvo", &[], None, Some(101)), Err(ApiError::Usage(_))));
    }

    #[test]
    fn threads_as_inline_tables_equal_array_of_tables() {
        let a = "[machine]\ncpus = 2\n[[workload.thread]]\ncpu = 0\nops = \"loop 5\\n mmap b 8\\n touch b write\\n munmap b\\nend\"\n[[workload.thread]]\ncpu = 1\nops = \"spin 100us\"\n";
        let b = "[machine]\ncpus = 2\n[workload]\nthread = [\n  { cpu = 0, ops = \"loop 5\\n mmap b 8\\n touch b write\\n munmap b\\nend\" },\n  { cpu = 1, ops = \"spin 100us\" },\n]\n";
        let ra = run_json(&Scenario::Text { name: "t.toml", toml: a }, &[]).unwrap();
        let rb = run_json(&Scenario::Text { name: "t.toml", toml: b }, &[]).unwrap();
        assert_eq!(ra, rb);
        let e = run_json(&Scenario::Text { name: "t.toml", toml: "[workload]\nthread = [\n  { cpu = 0, opz = \"x\" },\n]\n" }, &[]).unwrap_err();
        assert!(e.to_string().starts_with("t.toml:3: workload.thread.opz:"), "{e}");
        let e = run_json(&Scenario::Text { name: "t.toml", toml: "[workload]\nthread = [1]\n" }, &[]).unwrap_err();
        assert!(e.to_string().starts_with("t.toml:2: workload.thread:"), "{e}");
    }

    #[test]
    fn knob_table_matches_the_reference() {
        let k = knobs();
        assert_eq!(k.len(), config::knobs::all().count());
        let cpus = k.iter().find(|k| k.key == "machine.cpus").unwrap();
        assert_eq!(cpus.kind, "int");
        let preset = k.iter().find(|k| k.key == "kernel.preset").unwrap();
        assert!(preset.values.contains(&"linux-6.18"));
    }
}
