//! The `mmsim` command line.
//!
//! Exit codes (one per failure class, as TigerBeetle's VOPR does):
//! 0 success; 1 I/O or internal error; 2 usage or scenario error (names file:line:key);
//! 3 invariant violation found; 4 liveness: the run hit run.max_sim_ms; 5 the host cannot be
//! measured (validate); 6 validate ran but some case disagrees with the host.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use mmsim::config;
use mmsim::report::Report;
use mmsim::run::Outcome;
use mmsim::sim::Sim;

pub const EXIT_IO: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_LIVENESS: u8 = 4;
pub const EXIT_HOST: u8 = 5;
pub const EXIT_DISAGREE: u8 = 6;

#[derive(Parser)]
#[command(name = "mmsim", version, about = "A fast, deterministic simulator of Linux memory management and TLB flushing.",
    after_help = "Examples:\n  mmsim run scenarios/munmap-storm.toml\n  mmsim run scenarios/munmap-storm.toml --set machine.cpus=8 --set kernel.preset=linux-6.1 --json out.json\n  mmsim validate --op mprotect --pages 16 --iters 500 --remote spin\n  mmsim bench --json bench.json\n  mmsim knobs\n\nExit codes: 0 ok, 1 I/O, 2 usage/scenario error, 3 violation found (check), 4 time limit, 5 host cannot measure, 4 time limit, 5 host cannot measure, 6 validate disagreement.")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario and print /proc/interrupts, /proc/vmstat, /proc/meminfo and perf-stat output.
    #[command(after_help = "Examples:\n  mmsim run scenarios/munmap-storm.toml\n  mmsim run scenarios/pmbench-uniform.toml --set workload.threads=4 --json r.json\n  mmsim run s.toml --only interrupts")]
    Run {
        /// Scenario file (TOML; see README "Writing a scenario" and `mmsim knobs`).
        scenario: PathBuf,
        /// Override any knob: --set machine.cpus=8 (repeatable; applied in order, after the file).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Also write the results as JSON to this file (written atomically).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Print only one section: interrupts, vmstat, meminfo, perf or summary.
        #[arg(long, value_name = "SECTION")]
        only: Option<String>,
        #[command(flatten)]
        viz: mmsim::report::viz::VizArgs,
    },
    /// Measure TLB shootdowns of microbenchmarks on this host's kernel and compare with the model.
    #[command(after_help = "Without --op, runs the whole matrix (6 ops x 3 remote modes x 6 page counts).\nExamples:\n  mmsim validate\n  mmsim validate --op madv-pageout --pages 512 --iters 200 --remote spin --json v.json\n  mmsim validate --sim-only   # print the model's figures without measuring the host")]
    Validate {
        /// One op: mmap-anon, mmap-file, mprotect, madv-dontneed, madv-pageout, fork-cow.
        #[arg(long)]
        op: Option<String>,
        /// Pages per op (with --op).
        #[arg(long)]
        pages: Option<u32>,
        /// Iterations measured (default: scaled to the page count).
        #[arg(long)]
        iters: Option<u32>,
        /// Second thread: none, spin or sleep (with --op; default: all three).
        #[arg(long)]
        remote: Option<String>,
        /// Host repetitions per case; the one with the fewest interrupts counts (noise only adds).
        #[arg(long, default_value_t = 3)]
        repeats: u32,
        /// Only run the simulator side.
        #[arg(long)]
        sim_only: bool,
        /// Write {"cases": [...]} as JSON (atomically).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Measure simulator speed against a speed-of-light loop.
    Bench {
        /// Accesses per stream.
        #[arg(long, default_value_t = 20_000_000)]
        accesses: u64,
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Reproduce a seed's published experiment (BEFORE vs AFTER, published beside simulated).
    #[command(after_help = "Experiments: batched-flush, vmacache, hvo.\nExamples:\n  mmsim reproduce batched-flush --json bf.json\n  mmsim reproduce batched-flush --set cost.ipi_deliver_ns=2000")]
    Reproduce {
        /// batched-flush, vmacache or hvo.
        name: String,
        /// Override a knob in every run, BEFORE and AFTER alike (sensitivity studies).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Seeds per kernel (batched-flush; default 3).
        #[arg(long)]
        seeds: Option<u64>,
        /// Write {"experiment", "rows": [...]} as JSON (atomically).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Write a self-contained HTML report: published vs simulated bars per metric.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
    },
    /// Compare runs or reproductions, mmtests-compare style: each metric, each run, the change
    /// in %, the better direction marked, and the spread over seeds (docs/report.md).
    #[command(after_help = "Each argument is one JSON (`mmsim run --json` or `mmsim reproduce --json`), or several\njoined by commas: the seeds of one configuration, shown as mean and spread.\nExamples:\n  mmsim compare base.json patched.json\n  mmsim compare a1.json,a2.json,a3.json b1.json,b2.json,b3.json\n  mmsim compare bf-old.json bf-new.json")]
    Compare {
        /// Two or more results; the first is the baseline.
        #[arg(required = true, num_args = 2.., value_name = "JSON[,JSON...]")]
        runs: Vec<String>,
        /// Show every metric, including those equal in all runs.
        #[arg(long)]
        all: bool,
    },
    /// Record a real program's page faults and mm syscalls (Linux, root, tracefs).
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Stress-test TLB-flush safety: random seeded machines and programs run with the stale-TLB
    /// oracle on (docs/check.md). Exit 3 on a violation, with the reproducing command.
    #[command(after_help = "Injection sites: skip-flush-before-free, skip-dirty-flush-before-writeback, stale-mm-cpumask, lazy-no-catchup, skip-batched-pending, numa-map-before-migrate.\nExamples:\n  mmsim check --seeds 200\n  mmsim check --seeds 10000 --json check.json\n  mmsim check --seeds 1000 --inject skip-flush-before-free\n  mmsim check --seeds 1000 --inject numa-map-before-migrate --no-structural\n  mmsim check --seed 17 --inject stale-mm-cpumask")]
    Check {
        /// Seeds to run (1..=N), stopping at the first violation.
        #[arg(long, default_value_t = 100)]
        seeds: u64,
        /// Run only this seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Switch on one fault-injection site.
        #[arg(long, value_name = "NAME")]
        inject: Option<String>,
        /// Write {"seeds_run", "violations": [{"seed","class","detail"}]} as JSON (atomically).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Leave out the structural checkers (rmap, refcounts, buddy, mm_cpumask, TLB
        /// generations): only the stale-TLB oracle classifies.
        #[arg(long)]
        no_structural: bool,
    },
    /// List every scenario knob with its default, unit, description and source.
    Knobs {
        /// Print as a Markdown table (docs/knobs.md is generated this way).
        #[arg(long)]
        markdown: bool,
    },
}

#[derive(Subcommand)]
enum TraceCmd {
    /// Run CMD ARGS and record its trace: `mmsim trace record --out gcc.trace -- gcc -c x.c`.
    Record {
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// The command to run, after `--`.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run { scenario, set, json, only, viz } => cmd_run(scenario, set, json, only, viz),
        Cmd::Validate { op, pages, iters, remote, repeats, sim_only, json } => mmsim::validate::cli(op, pages, iters, remote, repeats, sim_only, json),
        Cmd::Bench { accesses, json } => mmsim::bench::cli(accesses, json),
        Cmd::Reproduce { name, json, set, seeds, report } => cmd_reproduce(&name, json, &set, seeds, report),
        Cmd::Compare { runs, all } => mmsim::compare::cli(&runs, all),
        Cmd::Trace(TraceCmd::Record { out, cmd }) => mmsim::trace::record_cli(out, cmd),
        Cmd::Check { seeds, seed, inject, json, no_structural } => mmsim::check::swarm::cli(seeds, seed, inject, json, !no_structural),
        Cmd::Knobs { markdown } => {
            print!("{}", mmsim::config::knobs::reference(markdown));
            ExitCode::SUCCESS
        }
    }
}

/// `mmsim reproduce`, with `--report` drawn from the experiment's JSON (a temporary one when
/// --json is not given).
fn cmd_reproduce(name: &str, json: Option<PathBuf>, set: &[String], seeds: Option<u64>, report: Option<PathBuf>) -> ExitCode {
    let Some(out) = report else { return mmsim::reproduce::cli(name, json, set, seeds) };
    let tmp = std::env::temp_dir().join(format!("mmsim-reproduce-{}.json", std::process::id()));
    let path = json.clone().unwrap_or(tmp.clone());
    let code = mmsim::reproduce::cli(name, Some(path.clone()), set, seeds);
    if code != ExitCode::SUCCESS {
        return code;
    }
    let r = mmsim::report::viz::reproduce_report_file(&path, &out);
    if json.is_none() {
        let _ = std::fs::remove_file(&tmp);
    }
    match r {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mmsim: {e}");
            ExitCode::from(EXIT_IO)
        }
    }
}

fn cmd_run(scenario: PathBuf, set: Vec<String>, json: Option<PathBuf>, only: Option<String>, viz: mmsim::report::viz::VizArgs) -> ExitCode {
    let cfg = match config::load(&scenario, &set) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(o) = &only {
        if !["interrupts", "vmstat", "meminfo", "perf", "summary"].contains(&o.as_str()) {
            eprintln!("mmsim: --only {o}: expected interrupts, vmstat, meminfo, perf or summary");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let prepared = match viz.prepare(cfg.int("machine.cpus") as usize) {
        Ok(p) => p,
        Err((code, e)) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(code);
        }
    };
    let mut sim = match Sim::build_with(&cfg, |s| prepared.attach(s)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let limit = sim.p.max_sim_ns;
    let bar = indicatif::ProgressBar::new(limit / 1_000_000);
    bar.set_style(indicatif::ProgressStyle::with_template("{spinner} simulated {msg} ms").unwrap());
    let outcome = sim.run(|ns| {
        bar.set_message(format!("{:.1}", ns as f64 / 1e6));
        bar.tick();
    });
    bar.finish_and_clear();
    let report = Report::from_sim(&sim, outcome);
    let text = match only.as_deref() {
        Some("interrupts") => report.proc_interrupts(),
        Some("vmstat") => report.proc_vmstat(),
        Some("meminfo") => report.proc_meminfo(),
        Some("perf") => report.perf_stat(),
        _ => report.human(),
    };
    print!("{text}");
    if let Some(path) = json {
        if let Err(e) = mmsim::output::write_json(&path, &report) {
            eprintln!("mmsim: {}: {e}", path.display());
            return ExitCode::from(EXIT_IO);
        }
    }
    if let Err((code, e)) = viz.finish(&mut sim, &report, &cfg, &set) {
        eprintln!("mmsim: {e}");
        return ExitCode::from(code);
    }
    if outcome == Outcome::TimeLimit {
        eprintln!("mmsim: the workload did not finish within run.max_sim_ms = {} ms (liveness); results cover the time simulated", limit / 1_000_000);
        return ExitCode::from(EXIT_LIVENESS);
    }
    ExitCode::SUCCESS
}
