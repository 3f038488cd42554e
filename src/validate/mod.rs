//! `mmsim validate`: the simulated baseline against the host's real kernel.
//!
//! For each case (op × pages × remote mode, see [`case`]) the host figure comes from
//! `hostbench.c` ([`host`]) and the simulated one from the same op sequence run in the model
//! ([`sim`]) on a machine with the host's CPU count and default costs. Agreement: within 10%, or
//! within 0.1 per op where the host figure is below 1. Nothing in the model is fitted per case:
//! the figures come from which paths flush, batch sizes and lazy-TLB skipping.
pub mod case;
pub mod host;
pub mod sim;

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;

use case::{Case, Op, Remote};

/// Page counts of the default matrix: around the single-page flush ceiling (33), one and two
/// PTE tables, and the 2 MiB boundary where MADV_PAGEOUT starts a second reclaim batch.
pub const DEFAULT_PAGES: [u32; 8] = [1, 16, 32, 33, 34, 512, 513, 1024];

/// Iterations for a page count: enough ops that one stray interrupt is < 0.01 per op, bounded
/// so the whole matrix stays within a few minutes.
pub fn default_iters(pages: u32) -> u32 {
    (20_000 / pages.max(1)).clamp(20, 500)
}

#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    pub op: String,
    pub pages: u32,
    pub iters: u32,
    pub remote: String,
    pub host_per_op: Option<f64>,
    pub sim_per_op: f64,
    pub agree: Option<bool>,
}

#[derive(Serialize)]
struct Out {
    host_kernel: Option<String>,
    cases: Vec<CaseResult>,
}

/// The agreement rule of the foundation issue.
pub fn agrees(host: f64, sim: f64) -> bool {
    if host < 1.0 { (host - sim).abs() <= 0.1 } else { (host - sim).abs() <= 0.1 * host }
}

pub fn matrix() -> Vec<Case> {
    let mut v = Vec::new();
    for op in Op::ALL {
        for pages in DEFAULT_PAGES {
            for remote in Remote::ALL {
                v.push(Case { op, pages, iters: default_iters(pages), remote });
            }
        }
    }
    v
}

const EXIT_USAGE: u8 = 2;
const EXIT_HOST: u8 = 5;
const EXIT_DISAGREE: u8 = 6;

#[allow(clippy::too_many_arguments)]
pub fn cli(op: Option<String>, pages: Option<u32>, iters: Option<u32>, remote: Option<String>, repeats: u32, sim_only: bool, json: Option<PathBuf>) -> ExitCode {
    let cases = match (op, pages) {
        (Some(op), pages) => {
            let op: Op = match op.parse() {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("mmsim validate: --op: {e}");
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let pages = pages.unwrap_or(16);
            if pages == 0 || pages > 1 << 20 {
                eprintln!("mmsim validate: --pages: {pages} is out of range 1..=1048576");
                return ExitCode::from(EXIT_USAGE);
            }
            let remotes: Vec<Remote> = match remote.as_deref().map(str::parse::<Remote>) {
                None => Remote::ALL.to_vec(),
                Some(Ok(r)) => vec![r],
                Some(Err(e)) => {
                    eprintln!("mmsim validate: --remote: {e}");
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let iters = iters.unwrap_or_else(|| default_iters(pages));
            if iters == 0 {
                eprintln!("mmsim validate: --iters must be at least 1");
                return ExitCode::from(EXIT_USAGE);
            }
            remotes.into_iter().map(|remote| Case { op, pages, iters, remote }).collect()
        }
        (None, Some(_)) => {
            eprintln!("mmsim validate: --pages needs --op");
            return ExitCode::from(EXIT_USAGE);
        }
        (None, None) => matrix(),
    };
    let (bench, info) = if sim_only {
        (None, None)
    } else {
        let info = match host::probe() {
            Ok(i) => i,
            Err(e) => {
                eprintln!("mmsim validate: this host cannot be measured: {e}");
                eprintln!("(use --sim-only to print the model's figures alone)");
                return ExitCode::from(EXIT_HOST);
            }
        };
        match host::HostBench::build() {
            Ok(b) => (Some(b), Some(info)),
            Err(e) => {
                eprintln!("mmsim validate: this host cannot be measured: {e}");
                return ExitCode::from(EXIT_HOST);
            }
        }
    };
    let cpus = info.as_ref().map(|i| i.cpus).unwrap_or(2);
    if let Some(i) = &info {
        println!("host: Linux {} with {} CPUs; simulated: preset linux-6.18 with {} CPUs\n", i.kernel, i.cpus, cpus);
    }
    println!("{:<14} {:>6} {:>6} {:>6} {:>12} {:>12} {:>6}", "op", "pages", "iters", "remote", "host/op", "sim/op", "agree");
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    let mut results = Vec::new();
    let mut all_agree = true;
    for c in &cases {
        let (sim, _) = match sim::run(c, cpus) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("mmsim validate: simulator bug: {e}");
                return ExitCode::from(1);
            }
        };
        let host = match &bench {
            Some(b) => match b.run(c, repeats) {
                Ok(r) => Some(r.shootdowns_per_op),
                Err(e) => {
                    eprintln!("mmsim validate: {}: {e}", c.op);
                    return ExitCode::from(EXIT_HOST);
                }
            },
            None => None,
        };
        let agree = host.map(|h| agrees(h, sim));
        if agree == Some(false) {
            all_agree = false;
        }
        bar.suspend(|| {
            println!(
                "{:<14} {:>6} {:>6} {:>6} {:>12} {:>12.3} {:>6}",
                c.op.name(),
                c.pages,
                c.iters,
                c.remote.name(),
                host.map(|h| format!("{h:.3}")).unwrap_or_else(|| "-".into()),
                sim,
                match agree {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "-",
                }
            )
        });
        bar.inc(1);
        results.push(CaseResult { op: c.op.name().into(), pages: c.pages, iters: c.iters, remote: c.remote.name().into(), host_per_op: host, sim_per_op: sim, agree });
    }
    bar.finish_and_clear();
    let n_agree = results.iter().filter(|r| r.agree == Some(true)).count();
    if !sim_only {
        println!("\n{n_agree}/{} cases agree (within 10%, or 0.1/op below 1)", results.len());
    }
    if let Some(path) = json {
        let out = Out { host_kernel: info.map(|i| i.kernel), cases: results };
        if let Err(e) = crate::output::write_json(&path, &out) {
            eprintln!("mmsim validate: {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    if all_agree { ExitCode::SUCCESS } else { ExitCode::from(EXIT_DISAGREE) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_rule() {
        assert!(agrees(0.05, 0.0));
        assert!(!agrees(0.5, 0.3));
        assert!(agrees(10.0, 10.9));
        assert!(!agrees(10.0, 11.5));
    }
}
