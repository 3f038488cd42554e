//! `mmsim compare A.json B.json [...]`: an mmtests-compare-style table of runs
//! (`mmsim run --json`) or reproductions (`mmsim reproduce --json`).
//!
//! Each argument is one result or several joined by commas (the seeds of one configuration).
//! Per metric and per argument: the mean, the seeds' spread (sample standard deviation as a %
//! of the mean) where there are several, and the change against the first argument in %, with
//! the better direction marked: `↓` lower is better (times, faults, flushes, misses, IRQs), `↑`
//! higher is better (hits, pages freed or saved), no mark where neither is (memory levels,
//! migrations). mmtests marks significance with a t-test; mmsim does not (say so in the
//! footer).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::process::ExitCode;

use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    Neither,
}

/// Which way is better for a metric, from its name.
pub fn better(name: &str) -> Better {
    let n = name.to_ascii_lowercase();
    const HIGHER: &[&str] = &["hit", "saved", "freed", "throughput", "speedup", "accesses/s"];
    const NEUTRAL: &[&str] = &["meminfo", "pgmigrate_success", "numa_pages_migrated", "pgsteal", "pgscan", "pgalloc", "pgfree", "hugetlb", "memfree", "seed"];
    const LOWER: &[&str] = &["time", "elapsed", "_ns", "_s", " s", "ms", "miss", "fault", "flush", "shootdown", "tlb", "irq", "stall", "cycles", "fail", "latency", "ipi", "oom", "switch", "lookup", "walk"];
    if HIGHER.iter().any(|p| n.contains(p)) {
        return Better::Higher;
    }
    if NEUTRAL.iter().any(|p| n.contains(p)) {
        return Better::Neither;
    }
    if LOWER.iter().any(|p| n.contains(p)) {
        return Better::Lower;
    }
    Better::Neither
}

/// The metrics of one result file, in a stable order.
pub fn metrics(v: &Value) -> Result<(String, BTreeMap<String, f64>), String> {
    let mut m = BTreeMap::new();
    if let Some(c) = v.get("counters").and_then(Value::as_object) {
        if let Some(t) = v.get("time").and_then(Value::as_object) {
            for (k, x) in t {
                if let Some(f) = x.as_f64() {
                    m.insert(format!("time:{k}"), f);
                }
            }
        }
        if let Some(s) = v.get("per_cpu").and_then(|p| p.get("tlb_shootdowns")).and_then(Value::as_array) {
            m.insert("TLB shootdowns (all CPUs)".into(), s.iter().filter_map(Value::as_f64).sum());
        }
        for (k, x) in c {
            if let Some(f) = x.as_f64() {
                m.insert(k.clone(), f);
            }
        }
        if let Some(mi) = v.get("meminfo").and_then(Value::as_object) {
            for (k, x) in mi {
                if let Some(f) = x.as_f64() {
                    m.insert(format!("meminfo:{k} kB"), f);
                }
            }
        }
        let name = format!("run {} seed {}", v.get("scenario").and_then(Value::as_str).unwrap_or("?"), v.get("seed").map(|s| s.to_string()).unwrap_or_default());
        return Ok((name, m));
    }
    if let Some(rows) = v.get("rows").and_then(Value::as_array) {
        for row in rows {
            let label = crate::report::html::row_label(row);
            match row.get("simulated") {
                Some(x) if x.as_f64().is_some() => {
                    m.insert(label, x.as_f64().unwrap());
                }
                Some(Value::Object(o)) if o.get("value").and_then(Value::as_f64).is_some() => {
                    m.insert(label, o["value"].as_f64().unwrap());
                }
                Some(Value::Object(o)) => {
                    for k in ["before", "after"] {
                        if let Some(f) = o.get(k).and_then(Value::as_f64) {
                            m.insert(format!("{label} [{k}]"), f);
                        }
                    }
                }
                _ => {}
            }
        }
        let name = format!("reproduce {}", v.get("experiment").and_then(Value::as_str).unwrap_or("?"));
        return Ok((name, m));
    }
    Err("neither a run JSON (\"counters\") nor a reproduction JSON (\"rows\")".into())
}

/// One column: the files of one configuration.
pub struct Column {
    pub label: String,
    pub runs: Vec<BTreeMap<String, f64>>,
    pub kind: &'static str,
}

fn load(arg: &str) -> Result<Column, String> {
    let mut runs = Vec::new();
    let mut kind = "";
    for f in arg.split(',').filter(|s| !s.is_empty()) {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{f}: {e}"))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{f}: not JSON: {e}"))?;
        let (_, m) = metrics(&v).map_err(|e| format!("{f}: {e}"))?;
        let k = if v.get("counters").is_some() { "run" } else { "reproduction" };
        if !kind.is_empty() && kind != k {
            return Err(format!("{f}: a {k} JSON among {kind} JSONs"));
        }
        kind = k;
        runs.push(m);
    }
    if runs.is_empty() {
        return Err(format!("'{arg}': no file"));
    }
    Ok(Column { label: arg.to_string(), runs, kind })
}

fn mean_sd(xs: &[f64]) -> (f64, Option<f64>) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, None);
    }
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, Some(var.sqrt()))
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else if x.abs() >= 100.0 { format!("{x:.1}") } else { format!("{x:.3}") }
}

/// The comparison table. Metrics equal in every run are left out unless `all`.
pub fn table(cols: &[Column], all: bool) -> String {
    let mut names: Vec<String> = Vec::new();
    for c in cols {
        for r in &c.runs {
            for k in r.keys() {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
    }
    let w = names.iter().map(|n| n.chars().count()).max().unwrap_or(6).clamp(6, 60);
    let mut s = String::new();
    let _ = writeln!(s, "mmsim compare: {} {}s; the first is the baseline", cols.len(), cols[0].kind);
    for (i, c) in cols.iter().enumerate() {
        let _ = writeln!(s, "  [{}] {} ({} file{})", i + 1, c.label, c.runs.len(), if c.runs.len() == 1 { "" } else { "s" });
    }
    s.push('\n');
    let _ = write!(s, "{:<w$}   ", "metric");
    for i in 0..cols.len() {
        let _ = write!(s, "{:>34}", format!("[{}]", i + 1));
    }
    s.push('\n');
    let mut hidden = 0;
    for name in &names {
        let stats: Vec<Option<(f64, Option<f64>)>> = cols
            .iter()
            .map(|c| {
                let xs: Vec<f64> = c.runs.iter().filter_map(|r| r.get(name).copied()).collect();
                if xs.is_empty() { None } else { Some(mean_sd(&xs)) }
            })
            .collect();
        let base = stats[0].map(|s| s.0);
        let same = stats.iter().all(|s| s.map(|x| x.0) == base && s.and_then(|x| x.1).unwrap_or(0.0) == 0.0);
        if same && !all {
            hidden += 1;
            continue;
        }
        let dir = better(name);
        let mark = match dir {
            Better::Lower => "↓",
            Better::Higher => "↑",
            Better::Neither => " ",
        };
        let shown: String = name.chars().take(w).collect();
        let _ = write!(s, "{shown:<w$} {mark} ");
        for (i, st) in stats.iter().enumerate() {
            let Some((mean, sd)) = *st else {
                let _ = write!(s, "{:>34}", "-");
                continue;
            };
            let spread = match sd {
                Some(sd) if mean != 0.0 => format!(" ±{:.1}%", 100.0 * sd / mean.abs()),
                Some(_) => " ±0".to_string(),
                None => String::new(),
            };
            let change = if i == 0 {
                "(  base )".to_string()
            } else {
                match base {
                    Some(b) if b != 0.0 => {
                        let pct = 100.0 * (mean - b) / b.abs();
                        let verdict = match dir {
                            _ if pct.abs() < 0.005 => ' ',
                            Better::Lower => if pct < 0.0 { '+' } else { '-' },
                            Better::Higher => if pct > 0.0 { '+' } else { '-' },
                            Better::Neither => ' ',
                        };
                        format!("({pct:+7.2}%{verdict})")
                    }
                    Some(_) if mean == 0.0 => "(   0.00% )".to_string(),
                    _ => "(   new  )".to_string(),
                }
            };
            let _ = write!(s, "{:>34}", format!("{}{} {}", fmt_num(mean), spread, change));
        }
        s.push('\n');
    }
    if hidden > 0 {
        let _ = writeln!(s, "\n{hidden} metrics equal in every run are not shown (--all shows them).");
    }
    let _ = writeln!(s, "↓ lower is better, ↑ higher is better; after a change, + marks a gain and - a loss. ±: spread (sample s.d.) over the files of one argument. No significance test.");
    s
}

pub fn cli(args: &[String], all: bool) -> ExitCode {
    let mut cols = Vec::new();
    for a in args {
        match load(a) {
            Ok(c) => cols.push(c),
            Err(e) => {
                eprintln!("mmsim compare: {e}");
                return ExitCode::from(if e.contains("No such file") || e.contains("os error") { 1 } else { 2 });
            }
        }
    }
    if cols.iter().any(|c| c.kind != cols[0].kind) {
        eprintln!("mmsim compare: cannot compare runs with reproductions");
        return ExitCode::from(2);
    }
    print!("{}", table(&cols, all));
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(label: &str, runs: &[&[(&str, f64)]]) -> Column {
        Column { label: label.into(), kind: "run", runs: runs.iter().map(|r| r.iter().map(|(k, v)| (k.to_string(), *v)).collect()).collect() }
    }

    #[test]
    fn directions() {
        assert_eq!(better("nr_tlb_remote_flush"), Better::Lower);
        assert_eq!(better("time:elapsed_ns"), Better::Lower);
        assert_eq!(better("boot / hit rate"), Better::Higher);
        assert_eq!(better("meminfo:MemFree kB"), Better::Neither);
    }

    #[test]
    fn change_spread_and_marks() {
        let a = col("a", &[&[("pgfault", 100.0), ("same", 1.0)], &[("pgfault", 110.0), ("same", 1.0)]]);
        let b = col("b", &[&[("pgfault", 84.0), ("same", 1.0)], &[("pgfault", 84.0), ("same", 1.0)]]);
        let t = table(&[a, b], false);
        // mean 105 ± 7.07 (6.7%), then 84: -20% is a gain for a lower-is-better metric.
        assert!(t.contains("105 ±6.7% (  base )"), "{t}");
        assert!(t.contains("84 ±0.0% ( -20.00%+)"), "{t}");
        assert!(!t.lines().any(|l| l.starts_with("same")), "{t}");
        assert!(t.contains("1 metrics equal"), "{t}");
    }
}
