//! The `mmsim` command line.
//!
//! Exit codes (one per failure class, as TigerBeetle's VOPR does):
//! 0 success; 1 I/O or internal error; 2 usage or scenario error (names file:line:key);
//! 3 invariant violation found; 4 liveness: the run hit run.max_sim_ms; 5 the host cannot be
//! measured (validate); 6 validate ran but some case disagrees with the host; 7 the workload
//! failed in the model (a task's SIGSEGV, OOM kill or failed exec: `workload error:` lines);
//! 130 stopped by SIGINT/SIGTERM (`run`, `trace record`; src/interrupt.rs).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use mmsim::config;
use mmsim::report::Report;
use mmsim::sim::Sim;
use mmsim::run::Outcome;

pub const EXIT_IO: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_LIVENESS: u8 = 4;
pub const EXIT_HOST: u8 = 5;
pub const EXIT_DISAGREE: u8 = 6;
pub const EXIT_WORKLOAD: u8 = 7;

#[derive(Parser)]
#[command(name = "mmsim", version, about = "A fast, deterministic simulator of Linux memory management and TLB flushing.",
    after_help = "Examples:\n  mmsim run scenarios/munmap-storm.toml\n  mmsim run scenarios/munmap-storm.toml --set machine.cpus=8 --set kernel.preset=linux-6.1 --json out.json\n  mmsim validate --op mprotect --pages 16 --iters 500 --remote spin\n  mmsim bench --json bench.json\n  mmsim knobs\n\nExit codes: 0 ok, 1 I/O, 2 usage/scenario error, 3 violation found (check), 4 time limit, 5 host cannot measure, 6 validate disagreement, 7 the workload failed (run), 130 stopped by Ctrl-C/SIGTERM (run, trace record).")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario and print /proc/interrupts, /proc/vmstat, /proc/meminfo and perf-stat output.
    #[command(after_help = "Examples:\n  mmsim run scenarios/munmap-storm.toml\n  mmsim run scenarios/pmbench-uniform.toml --set workload.threads=4 --json r.json\n  mmsim run s.toml --only interrupts\n  mmsim run scenarios/munmap-storm.toml --only lock_stat\n  mmsim run scenarios/munmap-storm.toml --only profile\n  mmsim run scenarios/lru-file-mmap-read.toml --only profile --set run.profile_delay_ms=20 --set run.profile_duration_ms=10   # as perf record -D 20 for 10 ms\n  mmsim run scenarios/lru-file-mmap-read.toml --only zoneinfo   # watermarks and pcp lists")]
    Run {
        /// Scenario file (TOML; see README "Writing a scenario" and `mmsim knobs`).
        scenario: PathBuf,
        /// Override any knob: --set machine.cpus=8 (repeatable; applied in order, after the file).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Also write the results as JSON to this file (written atomically).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Print only one section: interrupts, vmstat, meminfo, zoneinfo, perf, lock_stat, profile, tiering or summary.
        #[arg(long, value_name = "SECTION")]
        only: Option<String>,
        /// Apply a cost profile (TOML with a [cost] table, e.g. from `mmsim calibrate`) after the scenario, before --set.
        #[arg(long, value_name = "FILE")]
        cost_profile: Option<PathBuf>,
        #[command(flatten)]
        viz: mmsim::report::viz::VizArgs,
    },
    /// Measure TLB shootdowns of microbenchmarks on this host's kernel and compare with the model.
    #[command(after_help = "Without --op, runs the whole matrix (7 ops x 3 remote modes x 8 page counts: 1, 16, 32, 33, 34, 512, 513, 1024).\nPrints host and simulated shootdowns and ns per op; a case whose host repeats all lost CPU 1 (or disagree with each other) after re-measuring is marked \"noisy\", not a disagreement.\nExamples:\n  mmsim validate\n  mmsim validate --op madv-pageout --pages 512 --iters 200 --remote spin --json v.json\n  mmsim validate --sim-only   # print the model's figures without measuring the host\n  mmsim validate --cost-profile scenarios/profiles/host-kvm-2cpu.toml\n  sudo mmsim validate --race reclaim-writeback   # a lost write the oracle reports, on this kernel")]
    Validate {
        /// One op: mmap-anon, mmap-file, mprotect, madv-dontneed, madv-pageout, fork-cow, msync.
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
        /// Host repetitions per case, taken in rounds over all the cases; the one with the fewest interrupts counts, and the lowest time (noise only adds).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
        repeats: u32,
        /// Only run the simulator side.
        #[arg(long)]
        sim_only: bool,
        /// Write {"cases": [...]} as JSON (atomically).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Apply a cost profile (TOML with a [cost] table, e.g. from `mmsim calibrate`) to the simulated side.
        #[arg(long, value_name = "FILE")]
        cost_profile: Option<PathBuf>,
        /// Instead of the shootdown matrix: check a race the model's oracle reports on this host's kernel (reclaim-writeback; root).
        #[arg(long, value_name = "RACE", conflicts_with_all = ["op", "pages", "iters", "remote", "cost_profile"])]
        race: Option<String>,
        /// Rounds of the host's race test, per writeback call (with --race).
        #[arg(long, default_value_t = 300, requires = "race")]
        rounds: u32,
        /// Directory for the race test's file (with --race; default: a scratch ext4 on a loop device over /dev/shm).
        #[arg(long, value_name = "DIR", requires = "race")]
        dir: Option<PathBuf>,
    },
    /// Derive this host's cost knobs from microbenchmarks and write them as a cost profile.
    #[command(after_help = "Measures syscall, page clear/copy, anon fault, a fault right after a syscall, per-PTE, VMA, fork/exit, IPI (flush of one page with a spinning sibling), a flush past a lazy CPU (a sleeping sibling), per-folio page-cache add and reclaim (as root on a loop-mounted ext4 with 4 KiB folios, made and removed in FILEDIR), msync write-back and block I/O costs (only if FILEDIR is on a disk: the device as the page cache meets it, a read of evicted pages (its sleep and its CPU time) and the write-back of dirty ones, with O_DIRECT's figures in the comments), each the minimum (block I/O: the median) of 9 repeats, then the minimum over --rounds runs, and writes a [cost] table with a comment per knob saying how it was measured.\nExamples:\n  mmsim calibrate --out host.toml\n  mmsim validate --cost-profile host.toml")]
    Calibrate {
        /// Write the profile here (atomically); without it, print it.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Directory on a disk file system for the block-I/O and msync tests, and for the page-cache loop's scratch file system (default /var/tmp).
        #[arg(long, value_name = "DIR")]
        filedir: Option<PathBuf>,
        /// Runs of the whole set of microbenchmarks, one after another; each time is the lowest over them, so that one slow spell of the host does not set a knob.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
    },
    /// Measure simulator speed against a speed-of-light loop.
    #[command(after_help = "Examples:\n  mmsim bench\n  mmsim bench --accesses 2000000 --json bench.json")]
    Bench {
        /// Accesses per stream (4 to 2^50: the miss-heavy stream runs a quarter of them).
        #[arg(long, default_value_t = 20_000_000, value_parser = clap::value_parser!(u64).range(4..=(1u64 << 50)))]
        accesses: u64,
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Instead: wall time and host memory as the machine grows (CPUs 2 to 512, memory 1 GiB
        /// to 1 TiB), a fixed workload; sizes this host cannot hold are skipped and said so.
        #[arg(long)]
        scaling: bool,
    },
    /// Reproduce a seed's published experiment (BEFORE vs AFTER, published beside simulated).
    #[command(after_help = "Experiments: batched-flush, vmacache, hvo, numa-delayed-map, flush-alternatives, luf;\n`all` runs the five seeds' experiments (not flush-alternatives) and ends with one summary\ntable: each headline figure, published beside simulated, and the band its issue sets.\nExamples:\n  mmsim reproduce batched-flush --json bf.json\n  mmsim reproduce all --scale 64 --json all.json\n  mmsim reproduce all --only hvo,vmacache\n  mmsim reproduce batched-flush --set cost.ipi_deliver_ns=2000\n  mmsim reproduce batched-flush --cost-profile scenarios/profiles/host-kvm-2cpu.toml\n  mmsim reproduce luf --scale 80 --json luf.json")]
    Reproduce {
        /// batched-flush, vmacache, hvo, numa-delayed-map, flush-alternatives, luf, or all.
        name: String,
        /// With `all`: run only these experiments (comma-separated), in `all`'s order.
        #[arg(long, value_name = "A,B")]
        only: Option<String>,
        /// Override a knob in every run, BEFORE and AFTER alike (sensitivity studies).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Seeds per kernel (batched-flush: default 3; luf: runs seeds 1..=N with a start jitter and reports means, default one run without).
        #[arg(long)]
        seeds: Option<u64>,
        /// Apply a cost profile (a `[cost]` table, as `mmsim calibrate` writes) to every run,
        /// BEFORE and AFTER alike, before any --set (batched-flush, numa-delayed-map).
        #[arg(long, value_name = "FILE")]
        cost_profile: Option<PathBuf>,
        /// Divide every memory size by K, multiply counts back (batched-flush: default 1, at most 64; hvo: its 500,000-page case, default 1 (1 TB, ≈8 GiB of host memory), at most 100; numa-delayed-map: default 1, at most 512; luf: default 1, at most 1024; all: each experiment at K or its largest).
        #[arg(long, value_name = "K")]
        scale: Option<u64>,
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
    #[command(subcommand, after_help = "Examples:\n  sudo mmsim trace record --out gcc.trace -- gcc -c traces/hello.c -o /tmp/hello.o\n  mmsim run traces/gcc-hello.toml   # replay a recorded trace")]
    Trace(TraceCmd),
    /// Stress-test TLB-flush safety: random seeded machines and programs run with the stale-TLB
    /// oracle on (docs/check.md). Exit 3 on a violation, with the reproducing command.
    #[command(after_help = "Injection sites: skip-flush-before-free, skip-dirty-flush-before-writeback, stale-mm-cpumask, lazy-no-catchup, skip-batched-pending, numa-map-before-migrate, luf-defer-writable, luf-skip-alloc-flush.\nExamples:\n  mmsim check --seeds 200\n  mmsim check --seeds 10000 --json check.json\n  mmsim check --seeds 1000 --inject skip-flush-before-free\n  mmsim check --seeds 1000 --inject numa-map-before-migrate --no-structural\n  mmsim check --seed 17 --inject stale-mm-cpumask\n  mmsim check --seeds 1000 --set machine.cpu_vendor=amd --set machine.invlpgb=true\n  mmsim check --seeds 1000 --set kernel.luf=v12\n  mmsim check --scenario scenarios/luf-file-write.toml --set kernel.luf=v10")]
    Check {
        /// Seeds to run (1..=N), stopping at the first violation.
        #[arg(long, default_value_t = 100)]
        seeds: u64,
        /// Run only this seed (0 to 2^63-1, the range of run.seed; not with --seeds).
        #[arg(long, conflicts_with = "seeds", value_parser = clap::value_parser!(u64).range(0..=(i64::MAX as u64)))]
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
        /// KEY=VALUE applied to every seed's scenario after its own knobs (e.g.
        /// machine.invlpgb=true; docs/flush-alternatives.md). Repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Check one scenario file instead of the seeded swarm (e.g. the LUF safety cases,
        /// scenarios/luf-*.toml; docs/luf.md).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["seeds", "seed"])]
        scenario: Option<PathBuf>,
    },
    /// Developer command: fuzz the scenario loader, op language, trace parser and generated
    /// scenarios in-process; exit 3 if any case panics (docs/check.md, "Fuzzing").
    #[command(after_help = "Examples:\n  mmsim fuzz --cases 10000\n  mmsim fuzz --seed 7 --seconds 60\n  mmsim fuzz --seed 7 --first 1234 --cases 1   # reproduce one case")]
    Fuzz {
        /// Cases to run.
        #[arg(long, default_value_t = 1000)]
        cases: u64,
        /// The run's seed (each case's input is drawn from it and the case number).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// First case number (to reproduce one case).
        #[arg(long, default_value_t = 0)]
        first: u64,
        /// Stop after this many seconds of wall time.
        #[arg(long)]
        seconds: Option<u64>,
        /// Repository root holding scenarios/ and traces/ (the corpus).
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// List every scenario knob with its default, unit, description and source.
    #[command(after_help = "Examples:\n  mmsim knobs\n  mmsim knobs --markdown > docs/knobs.md")]
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
    // `mmsim ... | head`: end quietly on a closed pipe, as coreutils do, instead of panicking
    // in println! (Rust ignores SIGPIPE by default).
    // SAFETY: setting a signal disposition to the default before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run { scenario, set, json, only, cost_profile, viz } => cmd_run(scenario, set, json, only, cost_profile, viz),
        Cmd::Validate { race: Some(race), rounds, dir, sim_only, json, .. } => mmsim::validate::race::cli(&race, rounds, dir, sim_only, json),
        Cmd::Validate { op, pages, iters, remote, repeats, sim_only, json, cost_profile, .. } => mmsim::validate::cli_with_profile(op, pages, iters, remote, repeats, sim_only, json, cost_profile),
        Cmd::Calibrate { out, filedir, rounds } => mmsim::validate::calibrate::cli(out, filedir, rounds),
        Cmd::Bench { json, scaling: true, .. } => mmsim::bench::scaling_cli(json),
        Cmd::Bench { accesses, json, .. } => mmsim::bench::cli(accesses, json),
        Cmd::Reproduce { name, json, set, seeds, cost_profile, scale, report, only } => {
            if name == "all" {
                if !set.is_empty() || seeds.is_some() || cost_profile.is_some() || report.is_some() {
                    eprintln!("mmsim reproduce all: --set, --seeds, --cost-profile and --report are per experiment; run `mmsim reproduce NAME` with them");
                    return ExitCode::from(EXIT_USAGE);
                }
                return mmsim::reproduce::summary::cli(json, scale, only.as_deref());
            }
            if only.is_some() {
                eprintln!("mmsim reproduce: --only goes with `all`");
                return ExitCode::from(EXIT_USAGE);
            }
            // A cost profile is a list of cost overrides applied before --set.
            let set = match cost_profile {
                None => set,
                Some(p) => {
                    let file = p.display().to_string();
                    let sets = std::fs::read_to_string(&p)
                        .map_err(|e| (EXIT_IO, format!("{file}: {e}")))
                        .and_then(|t| config::profile::as_sets(&file, &t).map_err(|e| (EXIT_USAGE, e.to_string())));
                    match sets {
                        Ok(mut s) => {
                            s.extend(set);
                            s
                        }
                        Err((code, e)) => {
                            eprintln!("mmsim: {e}");
                            return ExitCode::from(code);
                        }
                    }
                }
            };
            cmd_reproduce(&name, json, &set, seeds, scale, report)
        }
        Cmd::Compare { runs, all } => mmsim::compare::cli(&runs, all),
        Cmd::Trace(TraceCmd::Record { out, cmd }) => {
            mmsim::interrupt::install();
            mmsim::trace::record_cli(out, cmd)
        }
        Cmd::Check { scenario: Some(path), inject, json, no_structural, set, .. } => mmsim::check::swarm::cli_scenario(&path, inject, json, !no_structural, set),
        Cmd::Check { seeds, seed, inject, json, no_structural, set, scenario: None } => mmsim::check::swarm::cli_sets(seeds, seed, inject, json, !no_structural, set),
        Cmd::Fuzz { cases, seed, first, seconds, root } => mmsim::fuzz::cli(seed, first, cases, seconds, root),
        Cmd::Knobs { markdown } => {
            print!("{}", mmsim::config::knobs::reference(markdown));
            ExitCode::SUCCESS
        }
    }
}

/// `mmsim reproduce`, with `--report` drawn from the experiment's JSON (a temporary one when
/// --json is not given).
fn cmd_reproduce(name: &str, json: Option<PathBuf>, set: &[String], seeds: Option<u64>, scale: Option<u64>, report: Option<PathBuf>) -> ExitCode {
    let Some(out) = report else { return mmsim::reproduce::cli_scaled(name, json, set, seeds, scale) };
    let tmp = std::env::temp_dir().join(format!("mmsim-reproduce-{}.json", std::process::id()));
    let path = json.clone().unwrap_or(tmp.clone());
    let code = mmsim::reproduce::cli_scaled(name, Some(path.clone()), set, seeds, scale);
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

fn cmd_run(scenario: PathBuf, set: Vec<String>, json: Option<PathBuf>, only: Option<String>, cost_profile: Option<PathBuf>, viz: mmsim::report::viz::VizArgs) -> ExitCode {
    let cfg = match config::load_profiled(&scenario, cost_profile.as_deref(), &set) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mmsim: {e}");
            // An unreadable scenario file is an I/O error (exit 1), as the README says.
            let code = if matches!(e, config::ConfigError::Io { .. }) { EXIT_IO } else { EXIT_USAGE };
            return ExitCode::from(code);
        }
    };
    if let Some(o) = &only {
        if !["interrupts", "vmstat", "meminfo", "zoneinfo", "perf", "lock_stat", "profile", "summary", "tiering"].contains(&o.as_str()) {
            eprintln!("mmsim: --only {o}: expected interrupts, vmstat, meminfo, zoneinfo, perf, lock_stat, profile, tiering or summary");
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
    // The same build, run and Report as the library's API (src/api.rs, which the Python
    // binding calls), with the tracer and timeline of --trace/--timeline/--report attached.
    let mut sim = match Sim::build_with(&cfg, |s| prepared.attach(s)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Ctrl-C or SIGTERM stops the run at the next event; the report covers what was simulated.
    mmsim::interrupt::install();
    let limit = cfg.int("run.max_sim_ms") as u64;
    // Progress on stderr only when it is a terminal and the run takes over a second.
    let mut progress = mmsim::progress::RunProgress::new(&sim);
    let outcome = sim.run_observed(|s| progress.update(s));
    progress.finish();
    let report = Report::from_sim(&sim, outcome);
    let text = match only.as_deref() {
        Some("interrupts") => report.proc_interrupts(),
        Some("vmstat") => report.proc_vmstat(),
        Some("meminfo") => report.proc_meminfo(),
        Some("zoneinfo") => report.proc_zoneinfo(),
        Some("perf") => report.perf_stat(),
        Some("lock_stat") => report.proc_lock_stat(),
        Some("profile") => report.profile_report(),
        Some("summary") => report.summary(),
        Some("tiering") => report.tiering.as_ref().map(|t| t.format()).unwrap_or_else(|| "no memory-only node: one memory tier\n".into()),
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
    if outcome == Outcome::Interrupted {
        eprintln!("mmsim: interrupted after {:.3} simulated ms; the results above cover the time simulated", sim.end_ns as f64 / 1e6);
        return ExitCode::from(mmsim::interrupt::EXIT_INTERRUPTED);
    }
    if !report.errors.is_empty() {
        eprintln!("mmsim: the workload failed ({} workload error(s), listed above); the results cover what ran", report.errors.len());
        return ExitCode::from(EXIT_WORKLOAD);
    }
    if outcome == Outcome::TimeLimit {
        eprintln!("mmsim: the workload did not finish within run.max_sim_ms = {} ms (liveness); results cover the time simulated; raise the limit with --set run.max_sim_ms=N", limit);
        return ExitCode::from(EXIT_LIVENESS);
    }
    ExitCode::SUCCESS
}
