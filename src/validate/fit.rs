//! Knobs fitted by the model's own run of their microbenchmarks.
//!
//! A host figure such as "a write-touch of a fresh anonymous page costs 1,386 ns" is the sum of
//! several pieces of kernel work, and the model charges some of them under other knobs (the
//! PTE update, the LRU batch's lock and cache miss, the pcp refill). Subtracting only the knobs
//! one can name (as calibrate did until 2026-11-27: fault = touch - clear - page_alloc) counts
//! the rest twice, and validate's per-page times came out ≈1.4x the host's. So the model runs
//! each microbenchmark too, and the knobs are the solution of "the model's time = the host's
//! time" over all of them at once.
//!
//! The model's time is affine in each cost knob on these single-threaded loops (every cost is
//! charged a fixed number of times per iteration; no lock is contended), so one run with the
//! unknown knobs at 0 and one run per knob at 1000 ns give the whole linear system. A knob whose
//! solution is negative (the model is already dearer than the host on its primary benchmark)
//! is set to 0 and the system solved again without it and its benchmark.

use crate::config::{Config, Origin, ThreadSpec};
use crate::kernel::profile::KFn;

/// calibrate.c's anonymous-fault loop: pages per iteration (FPAGES), the cold regime.
pub const FAULT_PAGES: u64 = 8192;
/// calibrate.c's warm loops (WPAGES): the fault loop at one address, mprotect of 512 pages.
pub const WARM_PAGES: u64 = 512;
/// calibrate.c's page-cache mapping loop (FM_PAGES).
const FILE_MAP_PAGES: u64 = 256;
/// Iterations the model runs of each loop (after 5 of warm-up, subtracted).
const ITERS: u64 = 8;
const WARMUP: u64 = 5;
/// The step used to measure each knob's coefficient.
const STEP: f64 = 1000.0;
/// Where the model maps the mprotect loop's pages: alone in their 2 MiB block, as calibrate.c's
/// guard pages keep the host's VMA from merging with a neighbour.
const AT: &str = "at=0x7e0000200000";

/// A second thread on CPU 1 while the loop runs on CPU 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sibling {
    None,
    /// A thread of the same process spinning: in the mm's cpumask, so flushes reach it.
    SameMm,
    /// Another process spinning: the same competition for the CPU, no flush IPI.
    OtherProcess,
}

/// Per measured iteration of a model loop: busy ns (all CPUs), ns under do_syscall_64, and
/// elapsed simulated ns.
#[derive(Clone, Copy, Debug)]
pub(super) struct PerIter {
    pub busy: f64,
    pub sys: f64,
    pub elapsed: f64,
}

/// The model's run of one program for `WARMUP` and `WARMUP + ITERS` iterations: the difference
/// of (busy ns, ns under do_syscall_64) per iteration.
fn per_iter(profile: &str, sets: &[String], body: &str, setup: &str) -> Result<(f64, f64), String> {
    per_iters(profile, sets, body, setup, ITERS, Sibling::None).map(|x| (x.busy, x.sys))
}

/// [`per_iter`] over `iters` measured iterations, with a `sibling` on CPU 1.
pub(super) fn per_iters(profile: &str, sets: &[String], body: &str, setup: &str, iters: u64, sibling: Sibling) -> Result<PerIter, String> {
    let measured = iters;
    let run = |iters: u64| -> Result<PerIter, String> {
        let ops = format!("{setup}loop {iters}\n{body}end\n");
        let origin = Origin { file: "<calibrate model loop>".into(), line: 1 };
        let mut threads = vec![ThreadSpec { process: 0, cpu: Some(0), ops, ops_origin: origin.clone() }];
        match sibling {
            Sibling::None => {}
            Sibling::SameMm => threads.push(ThreadSpec { process: 0, cpu: Some(1), ops: "spin forever\n".into(), ops_origin: origin }),
            Sibling::OtherProcess => threads.push(ThreadSpec { process: 1, cpu: Some(1), ops: "spin forever\n".into(), ops_origin: origin }),
        }
        let mut all = vec!["machine.cpus=2".to_string(), "run.max_sim_ms=1000000".into()];
        all.extend(sets.iter().cloned());
        let cfg = Config::with_profile(Some(("<calibrated profile>", profile)), &all, threads).map_err(|e| e.to_string())?;
        let mut sim = crate::sim::Sim::build(&cfg).map_err(|e| e.to_string())?;
        sim.run(|_| {});
        if let Some(e) = sim.workload_errors.first() {
            return Err(format!("the model's calibration loop failed: {e}"));
        }
        let busy: u64 = sim.cpus.iter().map(|c| c.stats.user_ns + c.stats.sys_ns + c.stats.irq_ns).sum();
        Ok(PerIter { busy: busy as f64, sys: sim.prof.children_ns(KFn::DoSyscall64) as f64, elapsed: sim.end_ns as f64 })
    };
    let (a, b) = (run(WARMUP)?, run(WARMUP + measured)?);
    let n = measured as f64;
    Ok(PerIter { busy: (b.busy - a.busy) / n, sys: (b.sys - a.sys) / n, elapsed: (b.elapsed - a.elapsed) / n })
}

/// The figure `key=` of calibrate.c's output `m`, or an error naming the key.
pub fn host_figure(m: &std::collections::BTreeMap<String, String>, key: &str) -> Result<f64, String> {
    m.get(key).ok_or_else(|| format!("calibrate printed no {key}="))?.parse::<f64>().map_err(|_| format!("bad {key}= in calibrate output"))
}

/// A host figure and how the model measures the same thing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bench {
    /// calibrate.c `fault_touch`: write-touch of a fresh anonymous page, per page.
    Touch,
    /// `munmap_per_page`: munmap of the populated, read-only region, per page.
    Munmap,
    /// `mprotect_per_page`: mprotect(PROT_READ) of the populated region, per page.
    MprotectPage,
    /// `mmap_munmap_pair`: mmap + munmap of one untouched page.
    MmapPair,
    /// `mprotect_call`: mprotect RO or RW of one populated page, per call.
    MprotectCall1,
    /// `mprotect_call_32`: the same of 32 pages (32 single-page flushes).
    MprotectCall32,
    /// `fault_touch_warm`: write-touch of fresh anonymous pages, 512 per mmap at one address
    /// over and over (the pages come back cache-hot from the pcp list), per page.
    TouchWarm,
    /// `map_unmap_per_page_warm`: that loop's mmap + munmap, per page.
    MapUnmapWarm,
    /// `mprotect_call_512`: mprotect RO or RW of 512 populated pages, per call.
    MprotectCall512,
    /// `madvise_call`: madvise(MADV_DONTNEED) of one untouched page, per call.
    MadviseCall,
    /// `file_map_warm`: mmap, read-touch and munmap of 256 cached pages of a file, per page.
    FileMapWarm,
    /// `ms_touch`: write-touch of a clean cached page of a shared file mapping, per page.
    MsyncTouch,
    /// `ms_sync_cpu`: msync(MS_SYNC) of those dirty pages, the caller's CPU time per page.
    MsyncCpu,
    /// `mprotect_spin` - `mprotect_other_spin`: mprotect RO, RW and a write of one page per
    /// iteration with a thread of the same mm spinning on CPU 1, less the same with another
    /// process spinning there (the flush IPIs' cost per iteration).
    IpiDelta,
}

impl Bench {
    pub fn host_key(self) -> &'static str {
        match self {
            Bench::Touch => "fault_touch",
            Bench::Munmap => "munmap_per_page",
            Bench::MprotectPage => "mprotect_per_page",
            Bench::MmapPair => "mmap_munmap_pair",
            Bench::MprotectCall1 => "mprotect_call",
            Bench::MprotectCall32 => "mprotect_call_32",
            Bench::TouchWarm => "fault_touch_warm",
            Bench::MapUnmapWarm => "map_unmap_per_page_warm",
            Bench::MprotectCall512 => "mprotect_call_512",
            Bench::MadviseCall => "madvise_call",
            Bench::FileMapWarm => "file_map_warm",
            Bench::MsyncTouch => "ms_touch",
            Bench::MsyncCpu => "ms_sync_cpu",
            Bench::IpiDelta => "mprotect_spin",
        }
    }

    /// The host's figure for this benchmark in calibrate.c's output `m`.
    pub fn host(self, m: &std::collections::BTreeMap<String, String>) -> Result<f64, String> {
        let f = |k: &str| host_figure(m, k);
        match self {
            Bench::IpiDelta => Ok(f("mprotect_spin")? - f("mprotect_other_spin")?),
            b => f(b.host_key()),
        }
    }

    /// What the knob fitted to this benchmark is said to be measured by, in the profile.
    pub fn what(self) -> &'static str {
        match self {
            Bench::Touch => "write-touch of fresh anon pages (8192 per mmap), per page",
            Bench::Munmap => "munmap of those 8192 populated read-only pages, per page (the zap, the rmap and LRU removal, the free)",
            Bench::MprotectPage => "mprotect(PROT_READ) of those 8192 pages, per page (change_pte_range; one full flush)",
            Bench::MmapPair => "mmap + munmap of one untouched page",
            Bench::MprotectCall1 => "mprotect RO then RW of one populated page between guard pages, per call",
            Bench::MprotectCall32 => "mprotect RO then RW of 32 populated pages between guard pages, per call (32 single-page flushes)",
            Bench::TouchWarm => "write-touch of fresh anon pages, 512 per mmap at one 2 MiB-aligned address, mapped and unmapped 200 times (cache-hot pages from the pcp list), per page",
            Bench::MapUnmapWarm => "that loop's mmap + munmap of the 512 populated pages, per page (the zap, the rmap and LRU removal, the free)",
            Bench::MprotectCall512 => "mprotect RO then RW of 512 populated pages between guard pages, per call (change_pte_range; one full flush for RO)",
            Bench::MadviseCall => "madvise(MADV_DONTNEED) of one untouched page between guard pages, per call (nothing to zap)",
            Bench::FileMapWarm => "mmap(PROT_READ, MAP_SHARED) of 256 cached pages of a file (4 KiB folios) at one 2 MiB-aligned address, read-touch (fault-around), munmap, 200 times, per page",
            Bench::MsyncTouch => "write-touch of 8192 clean cached pages of a shared file mapping, per page (a write-protect fault each)",
            Bench::MsyncCpu => "msync(MS_SYNC) of those 8192 dirty pages, the caller's CPU time per page (not the device's)",
            Bench::IpiDelta => "mprotect RO, RW and a write of one page between guard pages with a thread of the same mm spinning (SCHED_FIFO) on CPU 1, less the same with another process spinning there, per iteration (the flush IPIs; send:deliver:handle = 15:50:35 as the cited defaults)",
        }
    }
}

/// The model's figure for every benchmark in `benches` under `profile` and `sets`.
pub fn model(profile: &str, sets: &[String], benches: &[Bench]) -> Result<Vec<f64>, String> {
    // mmap, write-touch and munmap of `pages` fresh anonymous pages (an mprotect(RO) before the
    // munmap if asked), placed by the kernel or at `AT`.
    let fault_loop = |pages: u64, at: &str, with_mprotect: bool| {
        let body = format!("mmap a {pages} anon{at}\ntouch a write\n{}munmap a\n", if with_mprotect { "mprotect a r\n" } else { "" });
        per_iter(profile, sets, &body, "")
    };
    let need = |b: &[Bench]| benches.iter().any(|x| b.contains(x));
    let p1 = if need(&[Bench::Touch, Bench::Munmap, Bench::MprotectPage]) { Some(fault_loop(FAULT_PAGES, "", false)?) } else { None };
    let p2 = if need(&[Bench::MprotectPage]) { Some(fault_loop(FAULT_PAGES, "", true)?) } else { None };
    let pages = FAULT_PAGES as f64;
    let ms = if need(&[Bench::MsyncTouch, Bench::MsyncCpu]) {
        Some(per_iter(profile, sets, "touch a write\nmsync a\n", &format!("mmap a {FAULT_PAGES} file:ms shared\ntouch a write\nmsync a\n"))?)
    } else {
        None
    };
    let ipi = if need(&[Bench::IpiDelta]) {
        let setup = format!("mmap a 1 anon {AT}\ntouch a write\n");
        let body = "mprotect a r\nmprotect a rw\ntouch a write\n";
        let spin = per_iters(profile, sets, body, &setup, ITERS, Sibling::SameMm)?;
        let other = per_iters(profile, sets, body, &setup, ITERS, Sibling::OtherProcess)?;
        Some(spin.elapsed - other.elapsed)
    } else {
        None
    };
    let call = |n: u64| per_iter(profile, sets, "mprotect a r\nmprotect a rw\n", &format!("mmap a {n} anon {AT}\ntouch a write\n")).map(|(b, _)| b / 2.0);
    let warm = if need(&[Bench::TouchWarm, Bench::MapUnmapWarm]) { Some(fault_loop(WARM_PAGES, &format!(" {AT}"), false)?) } else { None };
    let wpages = WARM_PAGES as f64;
    benches
        .iter()
        .map(|b| match b {
            Bench::Touch => p1.map(|(busy, sys)| (busy - sys) / pages).ok_or_else(String::new),
            Bench::Munmap => p1.map(|(_, sys)| sys / pages).ok_or_else(String::new),
            Bench::MprotectPage => Ok((p2.unwrap().1 - p1.unwrap().1) / pages),
            Bench::MmapPair => per_iter(profile, sets, "mmap a 1 anon\nmunmap a\n", "").map(|(b, _)| b),
            Bench::MprotectCall1 => call(1),
            Bench::MprotectCall32 => call(32),
            Bench::MprotectCall512 => call(WARM_PAGES),
            Bench::TouchWarm => warm.map(|(busy, sys)| (busy - sys) / wpages).ok_or_else(String::new),
            Bench::MapUnmapWarm => warm.map(|(_, sys)| sys / wpages).ok_or_else(String::new),
            Bench::MadviseCall => per_iter(profile, sets, "madvise a dontneed\n", &format!("mmap a 1 anon {AT}\n")).map(|(b, _)| b),
            Bench::FileMapWarm => per_iter(profile, sets, &format!("mmap a {FILE_MAP_PAGES} file:fm shared prot=r {AT}\ntouch a read\nmunmap a\n"), "").map(|(b, _)| b / FILE_MAP_PAGES as f64),
            // The device's time is idle, not busy: busy less the syscall is the faults.
            Bench::MsyncTouch => ms.map(|(busy, sys)| (busy - sys) / pages).ok_or_else(String::new),
            Bench::MsyncCpu => ms.map(|(_, sys)| sys / pages).ok_or_else(String::new),
            Bench::IpiDelta => ipi.ok_or_else(String::new),
        })
        .collect()
}

/// One unknown: the knob (without `cost.`) and the benchmark it is fitted to first.
pub type Unknown = (&'static str, Bench);

/// The unknowns in the order calibrate writes them.
///
/// Fitted to the warm loops (working sets of at most 2 MiB, validate's regime) since 2026-11-27;
/// until then the PTE update, the free and the fault were fitted to one pass over 8,192 fresh
/// pages (32 MiB), on which this host spends 1.2-1.3x per fault (its caches: the model has none).
/// Those cold figures are now a check written as a note in the profile ([`COLD`]).
pub const UNKNOWNS: [Unknown; 7] = [
    ("pte_update_ns", Bench::MprotectCall512),
    ("page_alloc_ns", Bench::MapUnmapWarm),
    ("fault_ns", Bench::TouchWarm),
    ("vma_op_ns", Bench::MmapPair),
    ("mprotect_ns", Bench::MprotectCall1),
    ("invlpg_ns", Bench::MprotectCall32),
    ("madvise_ns", Bench::MadviseCall),
];

/// The cold regime's benchmarks (8,192 fresh pages per mmap), not fitted: the profile notes the
/// host's figure beside the model's.
pub const COLD: [Bench; 3] = [Bench::Touch, Bench::MprotectPage, Bench::Munmap];

/// The IPI cost, fitted when the host's spinning sibling was reached: one unknown, the sum of
/// `cost.ipi_send_ns`, `cost.ipi_deliver_ns` and `cost.ipi_handle_ns`, split as their cited
/// defaults (300 : 1000 : 700 ns, Amit et al. EuroSys'20): user space sees only their sum.
pub const UNKNOWN_IPI: Unknown = ("ipi_ns", Bench::IpiDelta);
pub const IPI_SPLIT: [(&str, f64); 3] = [("ipi_send_ns", 0.15), ("ipi_deliver_ns", 0.50), ("ipi_handle_ns", 0.35)];

/// The `--set`s that give unknown `key` the value `v` (the IPI sum is split over its knobs).
fn knob_sets(key: &str, v: f64) -> Vec<String> {
    if key == UNKNOWN_IPI.0 {
        IPI_SPLIT.iter().map(|(k, share)| format!("cost.{k}={}", v * share)).collect()
    } else {
        vec![format!("cost.{key}={v}")]
    }
}

/// The page-cache rmap knob, fitted when the host had a file system to map a file from.
pub const UNKNOWNS_FILE: [Unknown; 1] = [("file_rmap_ns", Bench::FileMapWarm)];

/// The writeback knobs, fitted when the host has a disk file system to write to.
pub const UNKNOWNS_WRITEBACK: [Unknown; 2] = [("page_mkwrite_ns", Bench::MsyncTouch), ("writepage_ns", Bench::MsyncCpu)];

/// A fitted knob: its value, the host's figure and the model's with the fitted profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Fitted {
    pub key: &'static str,
    pub bench: Bench,
    pub value: f64,
    pub host: f64,
    pub model: f64,
    /// The model was dearer than the host with this knob at 0.
    pub clamped: bool,
}

/// Solve `a x = b` (n x n, partial pivoting). None when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() < 1e-9 {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        for r in c + 1..n {
            let f = a[r][c] / a[c][c];
            for k in c..n {
                a[r][k] -= f * a[c][k];
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        x[r] = (b[r] - (r + 1..n).map(|k| a[r][k] * x[k]).sum::<f64>()) / a[r][r];
    }
    Some(x)
}

/// Fit `unknowns` to the host figures `host` (one per unknown, of its benchmark) on top of
/// `profile` (the directly measured knobs).
pub fn fit(profile: &str, unknowns: &[Unknown], host: &[f64]) -> Result<Vec<Fitted>, String> {
    let mut active: Vec<usize> = (0..unknowns.len()).collect();
    let mut fixed_zero: Vec<usize> = Vec::new();
    loop {
        let sets = |x: &[(usize, f64)]| -> Vec<String> {
            let mut s: Vec<String> = unknowns.iter().flat_map(|(k, _)| knob_sets(k, 0.0)).collect();
            s.extend(x.iter().flat_map(|(i, v)| knob_sets(unknowns[*i].0, *v)));
            s
        };
        let benches: Vec<Bench> = active.iter().map(|&i| unknowns[i].1).collect();
        let base = model(profile, &sets(&[]), &benches)?;
        let mut cols = Vec::new();
        for &k in &active {
            let m = model(profile, &sets(&[(k, STEP)]), &benches)?;
            cols.push(m.iter().zip(&base).map(|(a, b)| (a - b) / STEP).collect::<Vec<f64>>());
        }
        let a: Vec<Vec<f64>> = (0..active.len()).map(|r| cols.iter().map(|c| c[r]).collect()).collect();
        let b: Vec<f64> = active.iter().zip(&base).map(|(&i, m0)| host[i] - m0).collect();
        let x = solve(a, b).ok_or_else(|| format!("the model does not charge {:?} on their benchmarks (singular system)", active.iter().map(|&i| unknowns[i].0).collect::<Vec<_>>()))?;
        if let Some(worst) = active.iter().zip(&x).filter(|(_, v)| **v < 0.0).min_by(|a, b| a.1.total_cmp(b.1)).map(|(&i, _)| i) {
            active.retain(|&i| i != worst);
            fixed_zero.push(worst);
            continue;
        }
        // Nearly affine, not exactly (more simulated time crosses more timer ticks): two
        // Newton steps with the same coefficients take up what is left.
        let mut x = x;
        for _ in 0..2 {
            let at: Vec<(usize, f64)> = active.iter().copied().zip(x.iter().copied()).collect();
            let m = model(profile, &sets(&at), &benches)?;
            let r: Vec<f64> = active.iter().zip(&m).map(|(&i, mi)| host[i] - mi).collect();
            let a: Vec<Vec<f64>> = (0..active.len()).map(|r| cols.iter().map(|c| c[r]).collect()).collect();
            let dx = solve(a, r).expect("the same matrix solved above");
            x.iter_mut().zip(dx).for_each(|(v, d)| *v = (*v + d).max(0.0));
        }
        let mut value = vec![0.0; unknowns.len()];
        for (&i, v) in active.iter().zip(&x) {
            value[i] = (v * 100.0).round() / 100.0;
        }
        let all: Vec<(usize, f64)> = value.iter().copied().enumerate().collect();
        let check = model(profile, &sets(&all), &unknowns.iter().map(|u| u.1).collect::<Vec<_>>())?;
        return Ok(unknowns
            .iter()
            .enumerate()
            .map(|(i, &(key, bench))| Fitted { key, bench, value: value[i], host: host[i], model: check[i], clamped: fixed_zero.contains(&i) })
            .collect());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writeback_knobs_fit_their_msync_loop() {
        let base = model("[cost]\n", &["cost.page_mkwrite_ns=0".into(), "cost.writepage_ns=0".into()], &[Bench::MsyncTouch, Bench::MsyncCpu]).unwrap();
        let host = [base[0] + 700.0, base[1] + 400.0];
        let f = fit("[cost]\n", &UNKNOWNS_WRITEBACK, &host).unwrap();
        assert!((f[0].value - 700.0).abs() < 2.0 && (f[1].value - 400.0).abs() < 2.0, "{f:?}");
        assert!(f.iter().all(|x| (x.model - x.host).abs() < 1.0), "{f:?}");
    }

    #[test]
    fn solve_small_systems() {
        let x = solve(vec![vec![2.0, 1.0], vec![1.0, 3.0]], vec![5.0, 10.0]).unwrap();
        assert!((x[0] - 1.0).abs() < 1e-12 && (x[1] - 3.0).abs() < 1e-12, "{x:?}");
        assert!(solve(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_none());
    }

    #[test]
    fn the_fitted_model_matches_the_host_figures() {
        // Host figures the model can reach (each above what the model charges with the
        // unknowns at 0); after the fit, the model's run of every benchmark gives them.
        let host = [30000.0, 190.0, 1400.0, 4000.0, 980.0, 4200.0, 600.0];
        let f = fit("[cost]\n", &UNKNOWNS, &host).unwrap();
        for x in &f {
            assert!(!x.clamped && x.value > 0.0, "{x:?}");
            assert!((x.model - x.host).abs() < close(x), "{x:?}");
        }
        // A host cheaper than the model on one benchmark: that knob is 0, the others still fit.
        let mut cheap = host;
        cheap[5] = 1.0;
        let f = fit("[cost]\n", &UNKNOWNS, &cheap).unwrap();
        let inv = f.iter().find(|x| x.key == "invlpg_ns").unwrap();
        assert!(inv.clamped && inv.value == 0.0, "{inv:?}");
        for x in f.iter().filter(|x| x.key != "invlpg_ns") {
            assert!((x.model - x.host).abs() < close(x), "{x:?}");
        }
    }

    /// How close a fitted benchmark must come to the host's figure: 1 ns, plus what rounding the
    /// knob to 0.01 ns does to a benchmark that charges it hundreds of times (512 PTE updates
    /// per mprotect call: up to 2.6 ns).
    fn close(x: &Fitted) -> f64 {
        1.0 + 3e-4 * x.host
    }
}
