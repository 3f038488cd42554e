//! `mmsim reproduce NAME`: a seed's published experiment, BEFORE and AFTER, published figures
//! printed beside simulated ones. Published numbers appear only here, and only to be printed.

pub mod batched_flush;
pub mod flush_alternatives;
pub mod hvo;
pub mod luf;
pub mod numa_delayed_map;
pub mod summary;
pub mod vmacache;

use std::path::PathBuf;
use std::process::ExitCode;

/// Independent runs of a reproduction (BEFORE/AFTER, seeds, machines, cases) on rayon's pool,
/// results in job order: each run is its own deterministic `Sim`, so the output is the same
/// bytes as a sequential run (`tests/reproduce_parallel.rs`). Run inside a one-thread pool
/// (`rayon::ThreadPoolBuilder::new().num_threads(1)`) to get the sequential run.
///
/// Each of the pool's threads takes the next job not yet started, in job order, so a list
/// that puts its longest runs first is run longest first (greedy list scheduling: the last
/// job to finish is a short one). `par_iter` split the list into halves instead: batched-flush
/// gave one thread the six 4-node runs and the other the six single-socket runs, which then
/// waited for it (docs/performance.md, item 32).
pub fn run_jobs<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> R + Sync + Send) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let workers = rayon::current_num_threads().min(jobs.len());
    rayon::scope(|s| {
        for _ in 0..workers {
            s.spawn(|_| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(j) = jobs.get(i) else { break };
                let r = f(j);
                *slots[i].lock().expect("a job's slot") = Some(r);
            });
        }
    });
    slots.into_iter().map(|m| m.into_inner().expect("a job's slot").expect("every job ran")).collect()
}

/// One progress bar per run on stderr, drawn only when stderr is a terminal (issue 13, item
/// 6): each shows its run's share of `what` done, the wall time and an ETA. Keep the
/// `MultiProgress` alive while the runs go; call `finish_and_clear()` on a run's bar when it ends.
pub fn run_bars(labels: &[String], what: &str) -> (indicatif::MultiProgress, Vec<indicatif::ProgressBar>) {
    use std::io::IsTerminal;
    let target = if std::io::stderr().is_terminal() { indicatif::ProgressDrawTarget::stderr() } else { indicatif::ProgressDrawTarget::hidden() };
    let multi = indicatif::MultiProgress::with_draw_target(target);
    let template = format!("{{prefix:>16}} [{{bar:30}}] {{percent:>3}}% of {what}, {{elapsed}} (ETA {{eta}})");
    let style = indicatif::ProgressStyle::with_template(&template).expect("a valid template").progress_chars("=> ");
    let bars = labels
        .iter()
        .map(|l| {
            let b = multi.add(indicatif::ProgressBar::new(1));
            b.set_style(style.clone());
            b.set_prefix(l.clone());
            b
        })
        .collect();
    (multi, bars)
}

/// One metric's BEFORE and AFTER figures, published or simulated: the cells of a result row
/// (`batched_flush::Row`, `numa_delayed_map::Row`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Pair {
    pub before: f64,
    pub after: f64,
}

impl Pair {
    pub fn new((before, after): (f64, f64)) -> Pair {
        Pair { before, after }
    }
}

/// The end of an experiment's `cli`: print its table, the wall-time line `footer` on stderr,
/// then write `--json` atomically. Exit 2 if the experiment's configuration is invalid, 1 if the
/// JSON cannot be written.
pub fn finish<T: serde::Serialize>(res: Result<(T, String), crate::config::ConfigError>, json: Option<PathBuf>, footer: impl FnOnce() -> String) -> ExitCode {
    let (out, text) = match res {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mmsim reproduce: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{text}");
    eprintln!("{}", footer());
    if let Some(p) = json {
        if let Err(e) = crate::output::write_json(&p, &out) {
            eprintln!("mmsim reproduce: {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

/// The experiments, by name.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    ("batched-flush", "seed 002: batched TLB flush after unmap (Linux 4.3), vm-scalability lru-file-mmap-read"),
    ("vmacache", "seed 003: per-thread VMA cache (3.15) against mm->mmap_cache and the maple tree"),
    ("hvo", "seed 004: HugeTLB vmemmap optimisation (5.14) and its batched flushes"),
    ("numa-delayed-map", "seed 001: NUMA balancing maps the PTE only after the migration (5.13), pmbench on 2 sockets"),
    ("flush-alternatives", "issue 15: IPI vs AMD INVLPGB vs Intel RAR (RFC) vs LATR on the seeds' workloads"),
    ("luf", "seed 000: LUF, lazy unmap flush (v10, RFC v12; not merged), three llama.cpp on 70 GB models, DRAM + CXL"),
];

/// `sets` are `--set key=value` overrides applied to every run of the experiment (BEFORE and
/// AFTER alike), for sensitivity studies.
pub fn cli(name: &str, json: Option<PathBuf>, sets: &[String], seeds: Option<u64>) -> ExitCode {
    cli_scaled(name, json, sets, seeds, None)
}

/// [`cli`] with `--scale` (the experiments with a largest scale in `summary::ALL`).
pub fn cli_scaled(name: &str, json: Option<PathBuf>, sets: &[String], seeds: Option<u64>, scale: Option<u64>) -> ExitCode {
    if scale.is_some() && summary::max_scale(name) == 0 {
        eprintln!("mmsim reproduce: --scale is supported for batched-flush, hvo, numa-delayed-map and luf only");
        return ExitCode::from(2);
    }
    if name == "luf" {
        return luf::cli(json, sets, scale.unwrap_or(1), seeds);
    }
    if name == "numa-delayed-map" {
        if seeds.is_some() {
            eprintln!("mmsim reproduce: --seeds is not supported for numa-delayed-map (one seed per kernel)");
            return ExitCode::from(2);
        }
        return numa_delayed_map::cli(json, sets, scale.unwrap_or(1));
    }
    if (!sets.is_empty() || seeds.is_some()) && name != "batched-flush" {
        eprintln!("mmsim reproduce: --set, --seeds and --cost-profile are supported for batched-flush (and --set, --cost-profile for numa-delayed-map) only");
        return ExitCode::from(2);
    }
    match name {
        "batched-flush" => batched_flush::cli(json, sets, seeds.unwrap_or(batched_flush::SEEDS), scale.unwrap_or(batched_flush::DEFAULT_SCALE)),
        "vmacache" => vmacache::cli(json),
        "hvo" => hvo::cli(json, scale.unwrap_or(hvo::DEFAULT_SCALE)),
        "flush-alternatives" => flush_alternatives::cli(json),
        _ => {
            eprintln!("mmsim reproduce: unknown experiment '{name}'; available:");
            for (n, d) in EXPERIMENTS {
                eprintln!("  {n:<18} {d}");
            }
            eprintln!("  {:<18} the five seeds' experiments in turn, then one summary table", "all");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Results come back in job order whatever the pool's size and however long each job
    /// takes; on one thread the jobs run in list order (with more, which thread takes which
    /// job first is a race, so only the results are compared).
    #[test]
    fn run_jobs_starts_jobs_in_order_and_returns_results_in_order() {
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a pool");
            let started = AtomicUsize::new(0);
            let jobs: Vec<u64> = (0..9).map(|i| (9 - i) * 3).collect();
            let out = pool.install(|| {
                super::run_jobs(&jobs, |&ms| {
                    let order = started.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                    (ms, order)
                })
            });
            assert_eq!(out.iter().map(|r| r.0).collect::<Vec<_>>(), jobs);
            if threads == 1 {
                assert_eq!(out.iter().map(|r| r.1).collect::<Vec<_>>(), (0..9).collect::<Vec<_>>());
            }
        }
    }
}
