//! The simulator side of validation: the same op sequence as `hostbench.c`, as an op program.
//!
//! Layout (as hostbench's reserve_place()): the region of N pages is mapped with
//! MAP_FIXED_NOREPLACE at `REGION_ADDR`, 2 MiB-aligned, with no other VMA in its 2 MiB blocks,
//! so munmap frees all its PTE tables (free_pgtables floor/ceiling) on both sides.
//! The figure is measured by difference: a run with W warm-up iterations is subtracted from a run
//! with W + iters, so setup and warm-up are excluded exactly as the host excludes them.

use super::case::{Case, Op, Remote};
use crate::config::{Config, Origin, ThreadSpec};
use crate::sim::Sim;

pub const REGION_ADDR: u64 = 0x7e00_0020_0000;
/// As hostbench's WARMUP_ITERS.
pub const WARMUP_ITERS: u32 = 5;

/// The main thread's op program for `iters` iterations.
pub fn program(case: &Case, iters: u32) -> String {
    let n = case.pages as u64;
    let mut s = String::new();
    let at = format!("at={REGION_ADDR:#x}");
    let (setup, body): (String, String) = match case.op {
        Op::MmapAnon => (String::new(), format!("mmap a {n} anon {at}\ntouch a write\nmunmap a\n")),
        Op::MmapFile => (String::new(), format!("mmap a {n} file:f shared {at}\ntouch a read\nmunmap a\n")),
        Op::Mprotect => (format!("mmap a {n} anon {at}\ntouch a write\n"), "mprotect a r\nmprotect a rw\ntouch a write\n".into()),
        Op::MadvDontneed => (format!("mmap a {n} anon {at}\n"), "touch a write\nmadvise a dontneed\n".into()),
        Op::MadvPageout => (format!("mmap a {n} file:f shared {at}\n"), "touch a read\nmadvise a pageout\n".into()),
        Op::ForkCow => (format!("mmap a {n} anon {at}\ntouch a write\n"), "fork\ntouch a write\nreap\n".into()),
        Op::Msync => (format!("mmap a {n} file:f shared {at}\n"), "touch a write\nmsync a\n".into()),
    };
    s.push_str(&setup);
    s.push_str(&format!("loop {}\n{body}end\n", iters));
    s
}

/// What validation takes over from the host besides its CPU count: configuration and state the
/// measured paths depend on, not costs. Without a host (`--sim-only`, tests) the model's
/// defaults stand: vm.read_ahead_kb = 128 and no resident page cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostState {
    /// The data file's device's read_ahead_kb (vm.read_ahead_kb), with its sysfs path.
    pub read_ahead_kb: Option<(u64, String)>,
    /// /proc/meminfo's Active(file), in pages: resident page cache, which decides whether a
    /// refault is activated (mm/workingset.rs; madv-pageout refaults every iteration).
    pub active_file_pages: u64,
}

fn config(case: &Case, iters: u32, cpus: usize, profile: Option<(&str, &str)>, host: &HostState) -> Config {
    let origin = Origin { file: format!("<validate {} {} {}>", case.op, case.pages, case.remote), line: 1 };
    let mut threads = vec![ThreadSpec { process: 0, cpu: Some(0), ops: program(case, iters), ops_origin: origin.clone() }];
    match case.remote {
        Remote::None => {}
        Remote::Spin => threads.push(ThreadSpec { process: 0, cpu: Some(1), ops: "spin forever\n".into(), ops_origin: origin }),
        Remote::Sleep => threads.push(ThreadSpec { process: 0, cpu: Some(1), ops: "sleep forever\n".into(), ops_origin: origin }),
    }
    // The profile was checked by the caller; only its [cost] keys can be in it.
    let mut sets = vec![format!("machine.cpus={cpus}"), "run.max_sim_ms=1000000".into()];
    if let Some((kb, _)) = &host.read_ahead_kb {
        // Clamped to the knob's range (1 GiB): a window past every validation file's size
        // reads the same, and an out-of-range value must not make the config invalid.
        sets.push(format!("vm.read_ahead_kb={}", kb.min(&(1 << 20))));
    }
    Config::with_profile(profile, &sets, threads).expect("validation config is valid")
}

/// Shootdown interrupts (summed over CPUs) after running `iters` iterations.
fn shootdowns(case: &Case, iters: u32, cpus: usize, profile: Option<(&str, &str)>, host: &HostState) -> Result<(u64, u64), String> {
    let cfg = config(case, iters, cpus, profile, host);
    let mut sim = Sim::build(&cfg).map_err(|e| e.to_string())?;
    sim.seed_active_page_cache(host.active_file_pages);
    sim.run(|_| {});
    if let Some(e) = sim.workload_errors.first() {
        return Err(format!("simulated case failed: {e}"));
    }
    Ok((sim.cpus.iter().map(|c| c.stats.irq_tlb_count).sum(), sim.end_ns))
}

/// The simulated figures for a case: (shootdowns per op, ns per op).
pub fn run(case: &Case, cpus: usize) -> Result<(f64, f64), String> {
    run_with_profile(case, cpus, None, &HostState::default())
}

/// As [`run`], with a cost profile `(file name, TOML text)` applied (see `Config::with_profile`).
pub fn run_with_profile(case: &Case, cpus: usize, profile: Option<(&str, &str)>, host: &HostState) -> Result<(f64, f64), String> {
    let (a, ta) = shootdowns(case, WARMUP_ITERS, cpus, profile, host)?;
    let (b, tb) = shootdowns(case, WARMUP_ITERS + case.iters, cpus, profile, host)?;
    Ok(((b - a) as f64 / case.iters as f64, (tb - ta) as f64 / case.iters as f64))
}
