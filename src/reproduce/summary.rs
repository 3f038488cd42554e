//! `mmsim reproduce all`: every seed's experiment in turn, each printed as `mmsim reproduce NAME`
//! prints it, then one summary table of the headline figures: experiment, metric, published,
//! simulated, and the agreement band the project's issues set for it ("Done when"), with a
//! verdict. The bands are stated beside each experiment's published figures (its `checks()`);
//! they judge the output and feed nothing back into a run.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

/// Where a simulated figure must fall to agree with the seed, as an issue's "Done when" states it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Band {
    /// lo <= x <= hi.
    Range { lo: f64, hi: f64 },
    /// x >= lo.
    AtLeast { lo: f64 },
    /// x <= hi.
    AtMost { hi: f64 },
    /// x > lo (strictly: a direction, "slower", "more than").
    Above { lo: f64 },
    /// x < hi (strictly).
    Below { hi: f64 },
    /// x == v (a count the kernel's arithmetic fixes).
    Exact { v: f64 },
}

impl Band {
    /// Within `pct` percent of `v` either way, for a positive `v`.
    pub fn within_pct(v: f64, pct: f64) -> Band {
        Band::Range { lo: v * (1.0 - pct / 100.0), hi: v * (1.0 + pct / 100.0) }
    }

    /// Within a factor `f` of `v` (v / f to v x f), for a positive `v`.
    pub fn within_factor(v: f64, f: f64) -> Band {
        Band::Range { lo: v / f, hi: v * f }
    }

    pub fn contains(self, x: f64) -> bool {
        if !x.is_finite() {
            return false;
        }
        match self {
            Band::Range { lo, hi } => lo <= x && x <= hi,
            Band::AtLeast { lo } => x >= lo,
            Band::AtMost { hi } => x <= hi,
            Band::Above { lo } => x > lo,
            Band::Below { hi } => x < hi,
            Band::Exact { v } => x == v,
        }
    }

    pub fn describe(self) -> String {
        match self {
            Band::Range { lo, hi } => format!("{} to {}", num(lo), num(hi)),
            Band::AtLeast { lo } => format!(">= {}", num(lo)),
            Band::AtMost { hi } => format!("<= {}", num(hi)),
            Band::Above { lo } => format!("> {}", num(lo)),
            Band::Below { hi } => format!("< {}", num(hi)),
            Band::Exact { v } => format!("= {}", num(v)),
        }
    }
}

/// One headline figure of an experiment, judged against its band.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub experiment: &'static str,
    pub metric: String,
    /// The seed's figure on the same footing (None where the seed gives only the band's
    /// direction, e.g. "slower").
    pub published: Option<f64>,
    pub simulated: f64,
    pub band: Band,
    /// The issue whose "Done when" sets the band.
    pub source: &'static str,
    pub agrees: bool,
}

impl Check {
    pub fn new(experiment: &'static str, metric: impl Into<String>, published: Option<f64>, simulated: f64, band: Band, source: &'static str) -> Check {
        Check { experiment, metric: metric.into(), published, simulated, band, source, agrees: band.contains(simulated) }
    }
}

/// 100 x (before - after) / before: a reduction in percent (negative for an increase).
pub fn reduction_pct(before: f64, after: f64) -> f64 {
    if before != 0.0 { 100.0 * (before - after) / before } else { f64::NAN }
}

/// A number as the table prints it: 4 significant digits, exponent form past 1e6.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{x:.3e}")
    } else if x.fract() == 0.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

/// The summary table.
pub fn render(checks: &[Check]) -> String {
    let mut s = String::new();
    let agree = checks.iter().filter(|c| c.agrees).count();
    writeln!(s, "== Summary: {agree} of {} headline figures within their bands ==", checks.len()).unwrap();
    // The columns as wide as their longest cell, so that every row lines up.
    let w = checks.iter().map(|c| c.metric.chars().count()).max().unwrap_or(0).max(44);
    let wb = checks.iter().map(|c| c.band.describe().chars().count()).max().unwrap_or(0).max(20);
    writeln!(s, "{:<18} {:<w$} {:>11} {:>11}  {:<wb$} {:<8} source", "experiment", "metric", "published", "simulated", "band", "verdict").unwrap();
    for c in checks {
        let p = c.published.map(num).unwrap_or_else(|| "-".into());
        writeln!(s, "{:<18} {:<w$} {:>11} {:>11}  {:<wb$} {:<8} {}", c.experiment, c.metric, p, num(c.simulated), c.band.describe(), if c.agrees { "agrees" } else { "MISSES" }, c.source).unwrap();
    }
    s
}

/// The experiments `reproduce all` runs, quickest first, and the largest `--scale` each takes
/// (0: no `--scale`, the experiment runs at its one size).
pub const ALL: [(&str, u64); 5] = [("hvo", super::hvo::MAX_SCALE), ("vmacache", 0), ("batched-flush", super::batched_flush::MAX_SCALE), ("luf", super::luf::MAX_SCALE), ("numa-delayed-map", super::numa_delayed_map::MAX_SCALE)];

/// The largest `--scale` of experiment `name` (0: it has one size, or no such experiment).
pub fn max_scale(name: &str) -> u64 {
    ALL.iter().find(|(n, _)| *n == name).map(|&(_, m)| m).unwrap_or(0)
}

/// The scale `reproduce all --scale K` runs `name` at: K capped at the experiment's largest,
/// or the experiment's own default without `--scale`. None for an experiment with one size.
pub fn scale_for(name: &str, asked: Option<u64>) -> Option<u64> {
    let max = max_scale(name);
    if max == 0 {
        return None;
    }
    let default = match name {
        "batched-flush" => super::batched_flush::DEFAULT_SCALE,
        "hvo" => super::hvo::DEFAULT_SCALE,
        _ => 1,
    };
    Some(asked.unwrap_or(default).min(max))
}

#[derive(Serialize)]
struct AllOut {
    experiment: &'static str,
    /// The summary's rows.
    rows: Vec<Check>,
    /// Each experiment's own `--json` output, in the order run.
    experiments: Vec<serde_json::Value>,
}

/// One experiment: its printed text, its JSON, and its checks.
fn run_one(name: &str, scale: Option<u64>) -> Result<(String, serde_json::Value, Vec<Check>), String> {
    match name {
        "hvo" => {
            let (out, text) = super::hvo::run(scale.expect("scalable"));
            let checks = super::hvo::checks(&out);
            Ok((text, val(&out), checks))
        }
        "vmacache" => {
            let t = super::vmacache::table(&[], &super::vmacache::present_traces()).map_err(|e| e.to_string())?;
            let checks = super::vmacache::checks(&t);
            Ok((super::vmacache::render(&t), val(&t), checks))
        }
        "batched-flush" => {
            let k = scale.expect("scalable");
            let (out, text) = super::batched_flush::experiment(&[], super::batched_flush::SEEDS, k).map_err(|e| e.to_string())?;
            let checks = super::batched_flush::checks(&out);
            Ok((text, val(&out), checks))
        }
        "luf" => {
            let (out, text) = super::luf::experiment(scale.expect("scalable"), &[]).map_err(|e| e.to_string())?;
            let checks = super::luf::checks(&out);
            Ok((text, val(&out), checks))
        }
        "numa-delayed-map" => {
            let (out, text) = super::numa_delayed_map::experiment(scale.expect("scalable"), &[]).map_err(|e| e.to_string())?;
            let checks = super::numa_delayed_map::checks(&out);
            Ok((text, val(&out), checks))
        }
        _ => Err(format!("unknown experiment '{name}'")),
    }
}

fn val<T: Serialize>(out: &T) -> serde_json::Value {
    serde_json::to_value(out).expect("an experiment's output serialises")
}

/// `mmsim reproduce all [--scale K] [--only a,b] [--json F]`.
pub fn cli(json: Option<PathBuf>, scale: Option<u64>, only: Option<&str>) -> ExitCode {
    if scale == Some(0) {
        eprintln!("mmsim reproduce all: --scale must be at least 1");
        return ExitCode::from(2);
    }
    let names: Vec<&str> = match only {
        None => ALL.iter().map(|(n, _)| *n).collect(),
        Some(list) => {
            let want: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            if let Some(bad) = want.iter().find(|w| !ALL.iter().any(|(n, _)| n == *w)) {
                eprintln!("mmsim reproduce all: --only: unknown experiment '{bad}'; reproduce all runs: {}", ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "));
                return ExitCode::from(2);
            }
            ALL.iter().map(|(n, _)| *n).filter(|n| want.contains(n)).collect()
        }
    };
    if names.is_empty() {
        eprintln!("mmsim reproduce all: --only names no experiment");
        return ExitCode::from(2);
    }
    // The plan first: what runs at which size.
    let mut plan = String::new();
    for n in &names {
        match scale_for(n, scale) {
            None => write!(plan, "  {n:<17} its one size").unwrap(),
            Some(1) => write!(plan, "  {n:<17} the seed's full size").unwrap(),
            Some(k) => write!(plan, "  {n:<17} 1/{k} of the seed's size").unwrap(),
        }
        if let (Some(k), Some(asked)) = (scale_for(n, scale), scale)
            && k < asked
        {
            write!(plan, " (its largest --scale; {asked} asked)").unwrap();
        }
        plan.push('\n');
    }
    println!("mmsim reproduce all: {} experiment(s), in this order:\n{plan}", names.len());
    if names.iter().any(|n| scale_for(n, scale) == Some(1) && *n == "luf") {
        eprintln!("mmsim reproduce all: note: luf at full scale takes about 49 minutes on a 2-core machine, batched-flush about 10 minutes (docs/performance.md); --scale 64 gives a first look in minutes");
    }
    let t0 = std::time::Instant::now();
    let mut checks = Vec::new();
    let mut values = Vec::new();
    for n in &names {
        let t = std::time::Instant::now();
        println!("==== mmsim reproduce {n} ====");
        match run_one(n, scale_for(n, scale)) {
            Ok((text, v, c)) => {
                print!("{text}");
                println!();
                eprintln!("({n}: {:.1} s wall)", t.elapsed().as_secs_f64());
                checks.extend(c);
                values.push(v);
            }
            Err(e) => {
                eprintln!("mmsim reproduce all: {n}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    print!("{}", render(&checks));
    eprintln!("(all: {:.1} s wall)", t0.elapsed().as_secs_f64());
    if let Some(p) = json
        && let Err(e) = crate::output::write_json(&p, &AllOut { experiment: "all", rows: checks, experiments: values })
    {
        eprintln!("mmsim reproduce all: {}: {e}", p.display());
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_judge_their_edges() {
        assert!(Band::Range { lo: 14.0, hi: 34.0 }.contains(14.0));
        assert!(!Band::Range { lo: 14.0, hi: 34.0 }.contains(13.99));
        assert!(Band::AtLeast { lo: 70.0 }.contains(70.0));
        assert!(!Band::Above { lo: 0.0 }.contains(0.0));
        assert!(Band::Below { hi: 0.0 }.contains(-0.1));
        assert!(Band::Exact { v: 7.0 }.contains(7.0) && !Band::Exact { v: 7.0 }.contains(7.5));
        assert!(!Band::AtMost { hi: 1.0 }.contains(f64::NAN));
        assert_eq!(Band::within_pct(16.0, 10.0), Band::Range { lo: 14.4, hi: 17.6 });
        assert_eq!(num(4088.0), "4088");
        assert_eq!(num(4.7e7), "4.700e7");
        assert_eq!(num(15.966), "15.97");
        let b = Band::within_factor(34.6, 2.0);
        assert!(b.contains(17.3) && b.contains(69.2) && !b.contains(17.2));
    }

    /// A metric longer than the column's usual width widens it: every row's figures start
    /// where the header's do.
    #[test]
    fn the_summary_columns_line_up_whatever_the_metric() {
        let checks = [
            Check::new("batched-flush", "short", Some(1.25), 2.5, Band::AtLeast { lo: 1.0 }, "issue 11"),
            Check::new("batched-flush", "1-socket minus 4-node reduction, worst seed (points), and more", Some(-4.85), 1.66, Band::Below { hi: 0.0 }, "issue 11"),
        ];
        let text = render(&checks);
        let lines: Vec<&str> = text.lines().skip(1).collect();
        let end_of = |l: &str, word: &str| l.find(word).map(|i| i + word.len()).unwrap();
        let header = end_of(lines[0], "published");
        assert_eq!(end_of(lines[1], "1.25"), header, "{text}");
        assert_eq!(end_of(lines[2], "-4.85"), header, "{text}");
    }

    #[test]
    fn scale_is_capped_per_experiment() {
        assert_eq!(scale_for("hvo", Some(512)), Some(100));
        assert_eq!(scale_for("vmacache", Some(512)), None);
        assert_eq!(scale_for("batched-flush", None), Some(super::super::batched_flush::DEFAULT_SCALE));
        assert_eq!(scale_for("batched-flush", Some(512)), Some(64));
        assert_eq!(scale_for("numa-delayed-map", Some(512)), Some(512));
        assert_eq!(scale_for("luf", None), Some(1));
    }
}
