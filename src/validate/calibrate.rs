//! `mmsim calibrate [--out host.toml]`: derive this host's cost knobs from microbenchmarks
//! (`calibrate.c`, compiled and run like `hostbench.c`) and write them as a cost profile, a TOML
//! fragment with a `[cost]` table that `--cost-profile F` applies (see `config::profile`).
//!
//! Each knob is derived from one measurement by a written rule (the comment written beside it in
//! the profile says which); every CPU measurement is the minimum over 9 repeats, because noise
//! from other tasks, interrupts and steal time only adds time; device times (block I/O) are the
//! median, because a device's latency has a spread of its own that a run meets. The whole set
//! runs `--rounds` times, one after another, and each figure is the lowest over the rounds
//! ([`combine_rounds`]): this VM has slow spells of seconds (docs/host-findings.md §8.8). Most CPU knobs
//! are fitted by the model's own run of the same loops (`super::fit`). Knobs the host cannot
//! give (no disk, IPIs lost to a busy host) are left out of the profile with a comment saying
//! why, so the defaults (with their cited sources) stay in force.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use super::host::{self, HostBench};

const CALIBRATE_C: &str = include_str!("calibrate.c");

/// One derived knob: `cost.KEY = value`, with how it was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Derived {
    pub key: &'static str,
    pub value: f64,
    pub how: String,
}

/// Parse calibrate.c's `name=value` lines.
pub fn parse(out: &str) -> BTreeMap<String, String> {
    out.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect()
}

/// Keys of calibrate.c's output that count things rather than time them: taken from the round
/// whose measurement they belong to, never combined on their own.
const COUNTS: [&str; 5] = ["tlb_ipis", "ipi_iters", "pc_faults_per_page", "pc_read_ahead_kb", "bb_pages"];

/// The measurements of several runs ("rounds") of calibrate.c, taken one after another, as one:
/// each time the lowest over the rounds (a CPU time is the lowest of a round's repeats, a device
/// time the median of a round's passes: the rounds keep the fastest spell of the host, as
/// `mmsim validate` keeps its fastest repeat), the IPI counts from the round whose
/// `mprotect_spin` is kept, and anything else (other counts, `block=skipped:...`) from the
/// first round. The keys are the first round's; one missing from another round is combined over
/// the rounds that have it.
pub fn combine_rounds(rounds: &[BTreeMap<String, String>]) -> BTreeMap<String, String> {
    let Some(first) = rounds.first() else { return BTreeMap::new() };
    let num = |m: &BTreeMap<String, String>, k: &str| m.get(k).and_then(|v| v.parse::<f64>().ok());
    let mut out = first.clone();
    for (k, v) in out.iter_mut() {
        if COUNTS.contains(&k.as_str()) {
            continue;
        }
        let xs: Vec<f64> = rounds.iter().filter_map(|m| num(m, k)).collect();
        if xs.len() < 2 {
            continue;
        }
        let x = xs.iter().copied().fold(f64::INFINITY, f64::min);
        *v = format!("{x:.2}");
    }
    // The IPIs per iteration belong to the mprotect_spin measurement they were counted in.
    if let Some((_, best)) = rounds.iter().filter_map(|m| Some((num(m, "mprotect_spin")?, m))).min_by(|a, b| a.0.total_cmp(&b.0)) {
        for k in ["tlb_ipis", "ipi_iters"] {
            if let Some(v) = best.get(k) {
                out.insert(k.to_string(), v.clone());
            }
        }
    }
    out
}

/// The knobs that the measurements `m` give, and notes on those they do not.
pub fn derive(m: &BTreeMap<String, String>) -> Result<(Vec<Derived>, Vec<String>), String> {
    let f = |k: &str| super::fit::host_figure(m, k);
    let (mut d, mut notes) = (Vec::new(), Vec::new());
    let mut put = |key: &'static str, value: f64, how: String| d.push(Derived { key, value: (value * 100.0).round() / 100.0, how });
    let syscall = f("syscall")?;
    put("syscall_ns", syscall, format!("getppid() loop, 200000 calls: {syscall:.1} ns per call"));
    match (f("fault_touch_after_syscall"), f("fault_touch_warm")) {
        (Ok(after), Ok(warm)) => put(
            "fault_after_syscall_ns",
            (after - warm - syscall).max(0.0),
            format!("write-touch of 512 recycled anonymous pages with a getppid() before each: {after:.0} ns per page, less the same without getppid() ({warm:.0}) and less getppid() ({syscall:.0})"),
        ),
        _ => notes.push("cost.fault_after_syscall_ns not measured (calibrate printed no fault_touch_after_syscall=); 0 stays".into()),
    }
    let clear = f("clear_4k")?;
    put("clear_page_bytes_per_ns", 4096.0 / clear, format!("memset of 4 KiB pages over a 128 MiB buffer: {clear:.0} ns per page"));
    let copy = f("copy_4k")?;
    put("copy_page_bytes_per_ns", 4096.0 / copy, format!("memcpy of 4 KiB pages between 128 MiB buffers: {copy:.0} ns per page"));
    // Flushes per iteration of that loop: the TLB interrupts per iteration the same loop gave
    // with a spinning sibling (both mprotects flush: pte_flags_need_flush() flushes on any
    // _PAGE_RW change).
    match (f("mprotect_lazy_sibling"), f("mprotect_alone"), f("tlb_ipis").and_then(|n| Ok(n / f("ipi_iters")?))) {
        (Ok(lazy), Ok(alone), Ok(flushes)) if flushes >= 0.9 => put(
            "flush_multi_ns",
            ((lazy - alone) / flushes.round()).max(0.0),
            format!("mprotect RO, RW and a write of one page in a fresh process with a thread of the mm asleep on CPU 1 (lazy: each flush goes through native_flush_tlb_multi() and sends no IPI): {lazy:.0} ns per iteration, less the same alone ({alone:.0}), over {:.0} flushes per iteration", flushes.round()),
        ),
        (Ok(_), Ok(_), _) => notes.push("cost.flush_multi_ns not derived: the spinning sibling was not reached, so the flushes per iteration are not known; 0 stays".into()),
        _ => notes.push("cost.flush_multi_ns not measured (calibrate printed no mprotect_lazy_sibling=); 0 stays".into()),
    }
    let fork = f("fork")?;
    put("fork_ns", fork, format!("parent's time in fork() of a small process: {fork:.0} ns"));
    let exit_wait = f("exit_wait")?;
    put("exit_ns", exit_wait, format!("fork's return to waitpid's (child exit_group, reap): {exit_wait:.0} ns (an upper bound: includes the wake-up)"));
    let handoff = f("handoff")?;
    put("lock_handoff_ns", handoff, format!("a lock's cache line passed between CPU 0 and CPU 1 (ping-pong): {handoff:.0} ns per hand-off"));
    notes.push("cost.lock_handoff_cross_socket_ns not measured (this host shows no second socket); the cited default stays".into());
    match (m.get("block_read_4k"), m.get("block"), f("block_read_4k")) {
        (Some(_), _, Ok(rd)) => {
            put("block_read_4k_ns", rd, format!("O_DIRECT 4 KiB reads at random offsets of a 64 MiB file: {rd:.0} ns"));
            let wr = f("block_write_4k")?;
            put("block_write_4k_ns", wr, format!("O_DIRECT 4 KiB writes, each followed by fdatasync: {wr:.0} ns"));
            // The model charges an I/O of n pages its 4 KiB cost + (n - 1) * 4096 / bandwidth:
            // a 1 MiB I/O is 255 pages after the first (None when it was not slower).
            let bandwidth = |one_mib: f64, one_page: f64| (one_mib > one_page).then(|| (255.0 * 4096.0) / (one_mib - one_page));
            let rd1m = f("block_read_1m")?;
            if let Some(bw) = bandwidth(rd1m, rd) {
                put("block_read_bytes_per_ns", bw, format!("O_DIRECT 1 MiB reads in file order: {rd1m:.0} ns each; (1 MiB - 4 KiB) / ({rd1m:.0} - {rd:.0}) ns"));
            } else {
                notes.push(format!("block bandwidth not derived (a 1 MiB read, {rd1m:.0} ns, was not slower than a 4 KiB one); the cited default stays"));
            }
            match f("block_write_1m") {
                Ok(wr1m) => match bandwidth(wr1m, wr) {
                    Some(bw) => put("block_write_bytes_per_ns", bw, format!("O_DIRECT 1 MiB writes in file order, each followed by fdatasync: {wr1m:.0} ns each; (1 MiB - 4 KiB) / ({wr1m:.0} - {wr:.0}) ns")),
                    None => notes.push(format!("block write bandwidth not derived (a 1 MiB write, {wr1m:.0} ns, was not slower than a 4 KiB one); the cited default stays")),
                },
                Err(_) => notes.push("block write bandwidth not measured; the cited default stays".into()),
            }
        }
        (_, Some(why), _) => notes.push(format!("block I/O not measured ({why}); the cited defaults stay")),
        _ => notes.push("block I/O not measured; the cited defaults stay".into()),
    }
    Ok((d, notes))
}

/// The knobs fitted by the model's run of their microbenchmarks (`super::fit`): the PTE update,
/// the page allocation and free, the fault, the VMA operation, the mprotect call, INVLPG and
/// (when the spinning sibling was reached) the IPI sum, on top of the directly measured knobs
/// `d`; a note when the IPI costs could not be fitted.
pub fn derive_fitted(m: &BTreeMap<String, String>, d: &[Derived]) -> Result<(Vec<Derived>, Vec<String>), String> {
    use super::fit::{UNKNOWNS, UNKNOWN_IPI};
    let f = |k: &str| super::fit::host_figure(m, k);
    let (other, spin) = (f("mprotect_other_spin")?, f("mprotect_spin")?);
    let per_iter = f("tlb_ipis")? / f("ipi_iters")?;
    let delta = spin - other;
    let mut unknowns = UNKNOWNS.to_vec();
    let mut notes = Vec::new();
    if per_iter >= 0.9 && delta > 0.0 {
        unknowns.push(UNKNOWN_IPI);
    } else {
        notes.push(format!("IPI costs not derived: {per_iter:.2} TLB interrupts per flushing iteration (want >= 0.9) and {delta:.0} ns difference: the spinning vCPU was not reached (host too busy); the cited defaults stay"));
    }
    let fitted = fit_knobs(m, d, &unknowns)?;
    let mut out = Vec::new();
    for x in fitted {
        if x.key == UNKNOWN_IPI.0 {
            let how = format!("{} ({per_iter:.2} TLB interrupts per iteration on the host)", x.how);
            out.extend(super::fit::IPI_SPLIT.iter().map(|(k, share)| Derived { key: k, value: (x.value * share * 100.0).round() / 100.0, how: how.clone() }));
        } else {
            out.push(x);
        }
    }
    notes.extend(cold_regime(m, &[d, &out].concat())?);
    Ok((out, notes))
}

/// The cold regime (calibrate.c's one pass over 8,192 fresh pages per mmap), not fitted: the
/// host's figure beside the model's under the profile `d`, one note each. The model has no
/// caches, so it charges the warm loops' costs here too.
fn cold_regime(m: &BTreeMap<String, String>, d: &[Derived]) -> Result<Vec<String>, String> {
    use super::fit::COLD;
    let model = super::fit::model(&profile_text("-", "-", d, &[]), &[], &COLD)?;
    COLD.iter()
        .zip(model)
        .map(|(b, sim)| {
            let host = b.host(m)?;
            Ok(format!("not fitted (the cold regime: 32 MiB of fresh pages; the model has no caches): {}: host {host:.1} ns, the model {sim:.1} with this profile (host/model {:.2})", b.what(), host / sim))
        })
        .collect()
}

/// The device's four knobs as the page cache meets it (calibrate.c `bench_block_buffered`),
/// replacing [`derive()`]'s O_DIRECT figures, which stay in the comments: the time a task sleeps
/// for a read of one evicted page (readahead off), for the readahead of a whole evicted file, and
/// for the write-back (fdatasync) of one dirty page and of the whole file, each the call's wall
/// time less its CPU time. The model sleeps `block_read_4k_ns + (n - 1) * 4096 /
/// block_read_bytes_per_ns` for a read of n pages, and likewise for a write (src/block/mod.rs).
/// On this project's VM the two paths differ: O_DIRECT's 4 KiB read took 78-84 µs where a
/// page-cache read of one page slept 51-68, and its 1 MiB reads moved 2.5-2.8 bytes per ns where
/// readahead into the page cache moved 1.4-2.0 (docs/host-findings.md §8.8, session 38).
/// Nothing (and no note) when calibrate.c did not run it: `derive` has said why.
pub fn derive_block_buffered(m: &BTreeMap<String, String>, d: &[Derived]) -> Result<(Vec<Derived>, Vec<String>), String> {
    if !m.contains_key("bread_4k_wait") {
        return Ok((Vec::new(), Vec::new()));
    }
    let f = |k: &str| super::fit::host_figure(m, k);
    let n = f("bb_pages")?;
    let (mut out, mut notes) = (Vec::new(), Vec::new());
    let round = |x: f64| (x * 100.0).round() / 100.0;
    let paths: [(&str, &str, &str, &'static str, &'static str, &str, &str); 2] = [
        ("read", "bread_4k_wait", "bread_all_wait", "block_read_4k_ns", "block_read_bytes_per_ns", "block_read_4k", "pread() of one evicted page (readahead off)"),
        ("write", "bwrite_4k_wait", "bwrite_all_wait", "block_write_4k_ns", "block_write_bytes_per_ns", "block_write_4k", "fdatasync() of one page pwrite() dirtied"),
    ];
    for (what, one, all, k4, kbw, direct, how) in paths {
        let (one, all) = (f(one)?, f(all)?);
        let was = m.get(direct).and_then(|v| v.parse::<f64>().ok()).map(|x| format!("; O_DIRECT: {x:.0} ns")).unwrap_or_default();
        out.push(Derived { key: k4, value: round(one), how: format!("page cache: {how}: the task slept {one:.0} ns (wall less CPU){was}") });
        if all > one {
            let bw = (n - 1.0) * 4096.0 / (all - one);
            let whole = if what == "read" { format!("readahead of a {n:.0}-page evicted file (one pread() of it all)") } else { format!("fdatasync() of a {n:.0}-page file one pwrite() dirtied") };
            out.push(Derived { key: kbw, value: round(bw), how: format!("page cache: {whole}: slept {all:.0} ns; ({n:.0} - 1) x 4 KiB / ({all:.0} - {one:.0}) ns") });
        } else {
            notes.push(format!("page-cache {what} bandwidth not derived (the whole file, {all:.0} ns, was not slower than one page, {one:.0} ns); cost.{kbw} keeps the O_DIRECT figure or the default"));
        }
    }
    // The read's CPU time besides its sleep: the miss's CPU less a page-cache hit's, less what
    // the model already charges a miss for (the page's allocation and insertion).
    match (f("bread_4k_cpu"), f("bread_cached_cpu")) {
        (Ok(miss), Ok(hit)) => {
            let known = |k: &str| d.iter().find(|x| x.key == k).map_or(0.0, |x| x.value);
            let model = known("page_alloc_ns") + known("filemap_add_folio_ns");
            out.push(Derived {
                key: "block_read_submit_ns",
                value: round((miss - hit - model).max(0.0)),
                how: format!("page cache: CPU time of a pread() of one evicted page {miss:.0} ns, less reading it again cached ({hit:.0}), less page_alloc_ns + filemap_add_folio_ns ({model:.0})"),
            });
        }
        _ => notes.push("cost.block_read_submit_ns not measured (calibrate printed no bread_4k_cpu=); 0 stays".into()),
    }
    Ok((out, notes))
}

/// Add a derivation step's knobs to `d`. A step may measure a knob again by a better path (the
/// device through the page cache): its figure replaces the earlier one, so that the profile has
/// each key once.
fn apply_step(d: &mut Vec<Derived>, x: Vec<Derived>) {
    d.retain(|o| !x.iter().any(|n| n.key == o.key));
    d.extend(x);
}

/// `cost.page_mkwrite_ns` and `cost.writepage_ns`, fitted to calibrate.c's msync loop on top of
/// every knob derived before (`d`), with a note instead when the host did not run it (no disk).
pub fn derive_writeback(m: &BTreeMap<String, String>, d: &[Derived]) -> Result<(Vec<Derived>, Vec<String>), String> {
    if !m.contains_key("ms_touch") {
        let why = m.get("ms").cloned().unwrap_or_else(|| "not run".into());
        return Ok((Vec::new(), vec![format!("writeback costs not measured ({why}); cost.page_mkwrite_ns and cost.writepage_ns keep their defaults")]));
    }
    Ok((fit_knobs(m, d, &super::fit::UNKNOWNS_WRITEBACK)?, Vec::new()))
}

/// `cost.file_rmap_ns`, fitted to calibrate.c's page-cache mapping loop on top of every knob
/// derived before (`d`), with a note instead when the host did not run it.
pub fn derive_file_rmap(m: &BTreeMap<String, String>, d: &[Derived]) -> Result<(Vec<Derived>, Vec<String>), String> {
    if !m.contains_key("file_map_warm") {
        let why = m.get("fm").cloned().unwrap_or_else(|| "not run".into());
        return Ok((Vec::new(), vec![format!("page-cache mapping not measured ({why}); cost.file_rmap_ns keeps its default")]));
    }
    Ok((fit_knobs(m, d, &super::fit::UNKNOWNS_FILE)?, Vec::new()))
}

fn fit_knobs(m: &BTreeMap<String, String>, d: &[Derived], unknowns: &[super::fit::Unknown]) -> Result<Vec<Derived>, String> {
    use super::fit::fit;
    let host = unknowns.iter().map(|(_, b)| b.host(m)).collect::<Result<Vec<f64>, String>>()?;
    let fitted = fit(&profile_text("-", "-", d, &[]), unknowns, &host)?;
    Ok(fitted
        .into_iter()
        .map(|x| {
            let mut how = format!("fitted to the model's run of the same loop: {}: host {:.1} ns, the model {:.1} with this profile", x.bench.what(), x.host, x.model);
            if x.clamped {
                how.push_str(" (the model is dearer with this knob at 0: 0)");
            }
            Derived { key: x.key, value: x.value, how }
        })
        .collect())
}

/// The profile text: a header, each knob with its comment, the notes.
/// Pages of calibrate.c's page-cache loop (PC_PAGES), and the iterations the model runs of it.
const PC_PAGES: u64 = 512;
const PC_ITERS: u64 = 40;

/// The model's time per page of calibrate.c's page-cache loop (read-touch of a sparse file's
/// pages by mmap read-around of `ra_kb` and fault-around, then MADV_PAGEOUT) with the cost
/// profile `profile`: (touch, pageout) in ns, by difference of a 5- and a
/// (5 + PC_ITERS)-iteration run, as validate does.
pub fn model_page_cache_loop(profile: &str, ra_kb: u64) -> Result<(f64, f64), String> {
    let setup = format!("mmap a {PC_PAGES} file:pc sparse shared prot=r\n");
    let x = super::fit::per_iters(profile, &[format!("vm.read_ahead_kb={ra_kb}")], "touch a read\nmadvise a pageout\n", &setup, PC_ITERS, super::fit::Sibling::None)?;
    Ok(((x.busy - x.sys) / PC_PAGES as f64, x.sys / PC_PAGES as f64))
}

/// read_ahead_kb of the page-cache loop's file system as calibrate.c read it, or the kernel's
/// default (VM_READAHEAD_PAGES, 128 KiB) when it could not.
fn pc_read_ahead_kb(m: &BTreeMap<String, String>) -> u64 {
    m.get("pc_read_ahead_kb").and_then(|v| v.parse().ok()).unwrap_or(128)
}

/// The profile `d` with both page-cache knobs set to 0: the model that their residual is measured against.
fn without_page_cache_knobs(d: &[Derived]) -> Vec<Derived> {
    let zero = |key| Derived { key, value: 0.0, how: String::new() };
    d.iter().cloned().chain([zero("filemap_add_folio_ns"), zero("shrink_folio_ns")]).collect()
}

/// `cost.filemap_add_folio_ns` and `cost.shrink_folio_ns`: the host's time per page of the
/// page-cache loop minus the model's under the profile `d` derived so far with both knobs 0
/// (not their defaults). Both are always written: the residual, or 0 where the model is not
/// cheaper than the host, so that the profile replaces the defaults either way.
pub fn derive_page_cache(m: &BTreeMap<String, String>, d: &[Derived]) -> Result<(Vec<Derived>, Vec<String>), String> {
    let (Some(t), Some(o)) = (m.get("pc_touch"), m.get("pc_pageout")) else {
        let why = m.get("pc").cloned().unwrap_or_else(|| "not run".into());
        return Ok((Vec::new(), vec![format!("page-cache costs not measured ({why}); cost.filemap_add_folio_ns and cost.shrink_folio_ns keep their defaults")]));
    };
    let (t, o): (f64, f64) = (t.parse().map_err(|_| "bad pc_touch= in calibrate output")?, o.parse().map_err(|_| "bad pc_pageout= in calibrate output")?);
    let ra = pc_read_ahead_kb(m);
    let (mt, mo) = model_page_cache_loop(&profile_text("-", "-", &without_page_cache_knobs(d), &[]), ra)?;
    let faults = m.get("pc_faults_per_page").map(|f| format!(", {f} faults per page")).unwrap_or_default();
    let mut out = Vec::new();
    for (key, host, model, what) in [("filemap_add_folio_ns", t, mt, format!("read-touch (mmap read-around of read_ahead_kb={ra}, fault-around{faults})")), ("shrink_folio_ns", o, mo, "MADV_PAGEOUT".to_string())] {
        let how = format!("sparse file of {PC_PAGES} pages, shadow entries truncated between iterations, {what}: host {host:.0} ns per page, the model {model:.0} with the knobs above and this one 0");
        let value = if host > model { ((host - model) * 100.0).round() / 100.0 } else { 0.0 };
        let how = if host > model { how } else { format!("{how} (the model is not cheaper: 0)") };
        out.push(Derived { key, value, how });
    }
    Ok((out, Vec::new()))
}

pub fn profile_text(kernel: &str, date: &str, d: &[Derived], notes: &[String]) -> String {
    let mut s = format!("# Cost profile written by `mmsim calibrate` on {date}, Linux {kernel} (uname -r).\n# Each value is the minimum over 9 repeats of a microbenchmark (block I/O: the median of 9 passes; src/validate/calibrate.c), then the lowest over the rounds.\n# Apply with --cost-profile FILE (run, validate).\n");
    for n in notes {
        s.push_str(&format!("# note: {n}\n"));
    }
    s.push_str("\n[cost]\n");
    for k in d {
        s.push_str(&format!("# {}\n{} = {}\n", k.how, k.key, fmt_float(k.value)));
    }
    s
}

fn fmt_float(x: f64) -> String {
    let s = format!("{x}");
    if s.contains('.') || s.contains('e') { s } else { format!("{s}.0") }
}

pub fn cli(out: Option<PathBuf>, filedir: Option<PathBuf>, rounds: u32) -> ExitCode {
    let info = match host::probe() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("mmsim calibrate: this host cannot be measured: {e}");
            return ExitCode::from(5);
        }
    };
    let bench = match HostBench::build_named("calibrate", CALIBRATE_C) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mmsim calibrate: {e}");
            return ExitCode::from(5);
        }
    };
    let base = filedir.clone().unwrap_or_else(|| PathBuf::from("/var/tmp"));
    // A scratch ext4 with 4 KiB page-cache folios for calibrate.c's page-cache loop: Linux 6.x
    // gives an ext4 file large folios unless the file system journals data
    // (`ext4_should_enable_large_folio()`), and the model, like the seeds' kernels, has 4 KiB
    // page-cache folios.
    let small = host::ScratchExt4::make(&base, "calibrate", "loop,data=journal");
    // The rounds run one after another, each a whole run of calibrate.c: this VM has slow spells
    // of seconds to tens of seconds (docs/host-findings.md §8.8), and a minimum over repeats
    // taken within one second cannot get past one.
    let bar = indicatif::ProgressBar::new(rounds as u64);
    let mut outs = Vec::new();
    for _ in 0..rounds.max(1) {
        let mut cmd = Command::new(bench.binary());
        cmd.arg(&base);
        if let Ok(fs) = &small {
            cmd.arg(&fs.mnt);
        }
        let o = match cmd.output() {
            Ok(o) if o.status.success() => o,
            Ok(o) => {
                eprintln!("mmsim calibrate: the microbenchmarks failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr).trim_end());
                return ExitCode::from(5);
            }
            Err(e) => {
                eprintln!("mmsim calibrate: cannot run the microbenchmarks: {e}");
                return ExitCode::from(5);
            }
        };
        outs.push(parse(&String::from_utf8_lossy(&o.stdout)));
        bar.inc(1);
    }
    bar.finish_and_clear();
    let small_note = match &small {
        Ok(_) => "the page-cache loop ran on a loop-mounted ext4 with data=journal (4 KiB page-cache folios, as the model's); the other file tests on the file directory".to_string(),
        Err(e) => format!("the page-cache loop ran in {} ({e}); Linux 6.x gives ext4 and xfs files large folios, which the model does not have, so its per-page figures may be too low", base.display()),
    };
    drop(small);
    let m = combine_rounds(&outs);
    let (mut d, mut notes) = match derive(&m) {
        Ok((d, mut n)) => {
            if m.contains_key("pc_touch") {
                n.push(small_note);
            }
            (d, n)
        }
        Err(e) => {
            eprintln!("mmsim calibrate: {e}");
            return ExitCode::from(1);
        }
    };
    // The knobs fitted by the model's run of calibrate's loops, each on top of all before it.
    type Step = fn(&BTreeMap<String, String>, &[Derived]) -> Result<(Vec<Derived>, Vec<String>), String>;
    let steps: [Step; 5] = [derive_fitted, derive_file_rmap, derive_page_cache, derive_block_buffered, derive_writeback];
    for step in steps {
        match step(&m, &d) {
            Ok((x, n)) => {
                apply_step(&mut d, x);
                notes.extend(n);
            }
            Err(e) => {
                eprintln!("mmsim calibrate: {e}");
                return ExitCode::from(1);
            }
        }
    }
    // The date is part of the output file only (a record of when the host was measured), never
    // of a simulation.
    let date = Command::new("date").args(["-u", "+%Y-%m-%d"]).output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let text = profile_text(&info.kernel, &date, &d, &notes);
    match out {
        Some(p) => {
            if let Err(e) = crate::output::write_atomic(&p, text.as_bytes()) {
                eprintln!("mmsim calibrate: {}: {e}", p.display());
                return ExitCode::from(1);
            }
            print!("{text}");
            println!("\nwritten to {}", p.display());
        }
        None => print!("{text}"),
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "syscall=400\nclear_4k=640\ncopy_4k=1100\nfault_touch=4500\nmprotect_per_page=130\nmunmap_per_page=270\nmmap_munmap_pair=9800\nmprotect_call=1530\nmprotect_call_32=7000\nmprotect_call_512=60000\nfault_touch_warm=4000\nmap_unmap_per_page_warm=300\nfault_touch_after_syscall=4650\nmprotect_alone=1800\nmprotect_lazy_sibling=2180\nmadvise_call=1200\nmprotect_other_spin=5000\nmprotect_spin=9000\ntlb_ipis=18000\nipi_iters=18000\nhandoff=570\nfork=51000\nexit_wait=56000\nblock=skipped:/var/tmp-is-not-on-a-disk\n";

    #[test]
    fn page_cache_costs_are_the_host_minus_the_model() {
        let (d, _) = derive(&parse(OUT)).unwrap();
        // The model's loop with both knobs 0 (not their defaults), as derive_page_cache runs it.
        let (mt, mo) = model_page_cache_loop(&profile_text("-", "-", &without_page_cache_knobs(&d), &[]), 128).unwrap();
        let (_, mo_default) = model_page_cache_loop(&profile_text("-", "-", &d, &[]), 128).unwrap();
        assert!(mo_default > mo + 300.0, "the default cost.shrink_folio_ns is charged: {mo_default} against {mo}");
        assert!(mt > 0.0 && mo > 0.0, "{mt} {mo}");
        let out = format!("{OUT}pc_touch={:.1}\npc_pageout={:.1}\n", mt + 1000.0, mo + 250.0);
        let (pd, notes) = derive_page_cache(&parse(&out), &d).unwrap();
        let get = |k: &str| pd.iter().find(|x| x.key == k).map(|x| x.value);
        assert!((get("filemap_add_folio_ns").unwrap() - 1000.0).abs() < 0.2, "{pd:?}");
        assert!((get("shrink_folio_ns").unwrap() - 250.0).abs() < 0.2, "{pd:?}");
        assert!(notes.is_empty());
        // With those knobs the model's loop costs what the host's did.
        let mut all = d.clone();
        all.extend(pd);
        let (mt2, mo2) = model_page_cache_loop(&profile_text("-", "-", &all, &[]), 128).unwrap();
        assert!((mt2 - (mt + 1000.0)).abs() < 1.0 && (mo2 - (mo + 250.0)).abs() < 1.0, "{mt2} {mo2}");
        // A host cheaper than the model gives 0 (written, so that it replaces the default), and says so.
        let out = format!("{OUT}pc_touch=1.0\npc_pageout=1.0\n");
        let (pd, notes) = derive_page_cache(&parse(&out), &d).unwrap();
        assert!(notes.is_empty() && pd.len() == 2 && pd.iter().all(|x| x.value == 0.0 && x.how.contains("not cheaper")), "{pd:?}");
        let (pd, notes) = derive_page_cache(&parse(OUT), &d).unwrap();
        assert!(pd.is_empty() && notes[0].contains("not measured"), "{notes:?}");
    }

    #[test]
    fn block_bandwidth_is_derived_from_the_1m_read() {
        let out = OUT.replace("block=skipped:/var/tmp-is-not-on-a-disk\n", "block_read_4k=30000\nblock_write_4k=120000\nblock_read_1m=30000\n");
        let (_, notes) = derive(&parse(&out)).unwrap();
        assert!(notes.iter().any(|n| n.contains("block bandwidth not derived")), "a 1 MiB read no slower than 4 KiB gives no bandwidth");
        let out = OUT.replace("block=skipped:/var/tmp-is-not-on-a-disk\n", "block_read_4k=30000\nblock_write_4k=120000\nblock_read_1m=285000\nblock_write_1m=630000\n");
        let (d, _) = derive(&parse(&out)).unwrap();
        let bw = d.iter().find(|x| x.key == "block_read_bytes_per_ns").unwrap().value;
        // 255 pages after the first in 255 us: 4.096 B/ns, written with the profile's rounding.
        assert_eq!(bw, 4.1);
        // Writes: 255 pages in 510 us: 2.048 B/ns.
        let bw = d.iter().find(|x| x.key == "block_write_bytes_per_ns").unwrap().value;
        assert_eq!(bw, 2.05);
        let out = OUT.replace("block=skipped:/var/tmp-is-not-on-a-disk\n", "block_read_4k=30000\nblock_write_4k=120000\nblock_read_1m=285000\nblock_write_1m=100000\n");
        let (d, notes) = derive(&parse(&out)).unwrap();
        assert!(d.iter().all(|x| x.key != "block_write_bytes_per_ns") && notes.iter().any(|n| n.contains("block write bandwidth not derived")), "{notes:?}");
    }

    #[test]
    fn the_page_cache_device_figures_replace_the_o_direct_ones() {
        let direct = "block_read_4k=80000\nblock_write_4k=170000\nblock_read_1m=500000\nblock_write_1m=350000\n";
        let m = parse(&OUT.replace("block=skipped:/var/tmp-is-not-on-a-disk\n", direct));
        let (mut d, _) = derive(&m).unwrap();
        assert_eq!(d.iter().find(|x| x.key == "block_read_4k_ns").unwrap().value, 80000.0);
        // Without the page-cache figures nothing changes.
        assert_eq!(derive_block_buffered(&m, &d).unwrap(), (Vec::new(), Vec::new()));
        // One evicted page slept 60 us, the 1024-page file 60 us + 1023 pages at 2.048 B/ns;
        // writes: 120 us, and 1023 pages in 1023 x 1 us.
        let buffered = format!("{direct}bread_4k_wait=60000\nbread_all_wait={}\nbwrite_4k_wait=120000\nbwrite_all_wait=1143000\nbb_pages=1024\nbread_4k_cpu=27000\nbread_cached_cpu=1500\n", 60000 + 1023 * 2000);
        let m = parse(&OUT.replace("block=skipped:/var/tmp-is-not-on-a-disk\n", &buffered));
        let (x, notes) = derive_block_buffered(&m, &d).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        apply_step(&mut d, x);
        let get = |k: &str| {
            let v: Vec<f64> = d.iter().filter(|x| x.key == k).map(|x| x.value).collect();
            assert_eq!(v.len(), 1, "{k} once in the profile");
            v[0]
        };
        assert_eq!((get("block_read_4k_ns"), get("block_read_bytes_per_ns")), (60000.0, 2.05));
        assert_eq!((get("block_write_4k_ns"), get("block_write_bytes_per_ns")), (120000.0, 4.1));
        assert!(d.iter().any(|x| x.key == "block_read_4k_ns" && x.how.contains("O_DIRECT: 80000 ns")), "the O_DIRECT figure stays in the comment");
        let text = profile_text("6.18", "2026-11-29", &d, &[]);
        let c = crate::config::load_str_profiled("s.toml", "", Some(("host.toml", &text)), &[]).unwrap();
        assert_eq!(c.float("cost.block_write_4k_ns"), 120000.0);
        // The read's CPU: the miss's less the hit's, less the model's allocation and insertion
        // (none derived here), then with them.
        assert_eq!(get("block_read_submit_ns"), 25500.0);
        let known = [("page_alloc_ns", 150.0), ("filemap_add_folio_ns", 350.0)].map(|(key, value)| Derived { key, value, how: String::new() });
        let (x, _) = derive_block_buffered(&m, &known).unwrap();
        assert_eq!(x.iter().find(|k| k.key == "block_read_submit_ns").unwrap().value, 25000.0);
        // A whole file no slower than one page gives no bandwidth, and says so.
        let m = parse(&OUT.replace("block=skipped:/var/tmp-is-not-on-a-disk\n", "bread_4k_wait=60000\nbread_all_wait=50000\nbwrite_4k_wait=120000\nbwrite_all_wait=1143000\nbb_pages=1024\n"));
        let (x, notes) = derive_block_buffered(&m, &[]).unwrap();
        assert!(x.iter().all(|k| k.key != "block_read_bytes_per_ns") && notes.iter().any(|n| n.contains("read bandwidth not derived")), "{notes:?}");
    }

    #[test]
    fn derived_profile_parses_and_changes_the_costs() {
        let (d, notes) = derive(&parse(OUT)).unwrap();
        let get = |k: &str| d.iter().find(|x| x.key == k).unwrap().value;
        assert_eq!(get("clear_page_bytes_per_ns"), 6.4);
        assert!(d.iter().all(|x| !["fault_ns", "pte_update_ns", "page_alloc_ns", "vma_op_ns", "mprotect_ns", "invlpg_ns", "ipi_send_ns"].contains(&x.key)), "fitted by the model, not derived directly");
        assert!(notes.iter().any(|n| n.contains("block I/O not measured")));
        let text = profile_text("6.18", "2026-11-23", &d, &notes);
        let c = crate::config::load_str_profiled("s.toml", "", Some(("host.toml", &text)), &[]).unwrap();
        assert_eq!(c.float("cost.syscall_ns"), 400.0);
        assert_eq!(c.float("cost.fault_after_syscall_ns"), 250.0, "4650 - 4000 - 400");
        assert_eq!(c.float("cost.flush_multi_ns"), 380.0, "2180 - 1800");
        assert_eq!(c.float("cost.block_read_4k_ns"), 20000.0, "not measured: the default stays");
        // Every derived knob has its comment on the line above it.
        for k in &d {
            assert!(text.contains(&format!("# {}\n{} = ", k.how, k.key)));
        }
    }

    #[test]
    fn fitted_knobs_reproduce_their_benchmarks_in_the_profile() {
        let m = parse(OUT);
        let (mut d, notes) = derive(&m).unwrap();
        let (fd, fnotes) = derive_fitted(&m, &d).unwrap();
        assert_eq!(fnotes.len(), 3, "{fnotes:?}");
        assert!(fnotes.iter().all(|n| n.starts_with("not fitted (the cold regime")), "{fnotes:?}");
        assert!(fnotes[0].contains("host 4500.0 ns"), "{}", fnotes[0]);
        let keys: Vec<&str> = fd.iter().map(|x| x.key).collect();
        assert_eq!(keys, ["pte_update_ns", "page_alloc_ns", "fault_ns", "vma_op_ns", "mprotect_ns", "invlpg_ns", "madvise_ns", "ipi_send_ns", "ipi_deliver_ns", "ipi_handle_ns"]);
        // The IPI sum is split as the cited defaults, and the model's spin-less-other difference
        // is the host's (9000 - 5000 ns).
        let get = |k: &str| fd.iter().find(|x| x.key == k).unwrap();
        let (send, deliver, handle) = (get("ipi_send_ns").value, get("ipi_deliver_ns").value, get("ipi_handle_ns").value);
        assert!(send > 0.0 && (deliver / send - 1000.0 / 300.0).abs() < 0.01 && (handle / send - 700.0 / 300.0).abs() < 0.01, "{send} {deliver} {handle}");
        assert!(get("ipi_send_ns").how.contains("host 4000.0 ns"), "{}", get("ipi_send_ns").how);
        d.extend(fd.clone());
        let text = profile_text("6.18", "2026-11-27", &d, &notes);
        let c = crate::config::load_str_profiled("s.toml", "", Some(("host.toml", &text)), &[]).unwrap();
        // The host's figure and the model's, written beside each knob, agree.
        let model = |x: &Derived| -> f64 { x.how.split("the model ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap() };
        for x in &fd {
            assert!((model(x) - x.how.split("host ").nth(1).unwrap().split(' ').next().unwrap().parse::<f64>().unwrap()).abs() < 2.0, "{x:?}");
        }
        for (x, (_, bench)) in fd.iter().zip(super::super::fit::UNKNOWNS) {
            let host: f64 = m[bench.host_key()].parse().unwrap();
            assert!(x.value > 0.0 && x.how.contains(&format!("host {host:.1} ns")), "{x:?}");
            assert!((model(x) - host).abs() < 2.0, "{x:?}");
            assert_eq!(c.float(&format!("cost.{}", x.key)), x.value);
        }
        let missing = OUT.replace("mprotect_call_32=7000\n", "");
        assert!(derive_fitted(&parse(&missing), &d).unwrap_err().contains("mprotect_call_32"));
        // Every derived knob has its comment on the line above it.
        for k in &fd {
            assert!(text.contains(&format!("# {}\n{} = ", k.how, k.key)));
        }
    }

    #[test]
    fn file_rmap_is_fitted_to_the_file_mapping_loop() {
        let (d, _) = derive(&parse(OUT)).unwrap();
        let (fd, _) = derive_fitted(&parse(OUT), &d).unwrap();
        let all = [d, fd].concat();
        let (none, notes) = derive_file_rmap(&parse(&format!("{OUT}fm=skipped:/var/tmp-is-not-on-a-disk\n")), &all).unwrap();
        assert!(none.is_empty() && notes[0].contains("not measured (skipped:/var/tmp-is-not-on-a-disk)"), "{notes:?}");
        // The model's loop with the knob at 0, and a host 100 ns a page dearer: the knob takes it.
        let zero = profile_text("-", "-", &[all.clone(), vec![Derived { key: "file_rmap_ns", value: 0.0, how: String::new() }]].concat(), &[]);
        let base = super::super::fit::model(&zero, &[], &[super::super::fit::Bench::FileMapWarm]).unwrap()[0];
        let (x, notes) = derive_file_rmap(&parse(&format!("{OUT}file_map_warm={:.2}\n", base + 100.0)), &all).unwrap();
        assert!(notes.is_empty() && x.len() == 1 && x[0].key == "file_rmap_ns", "{x:?}");
        // Charged once when a page is mapped and once when it is zapped: about half the difference.
        assert!((x[0].value - 50.0).abs() < 5.0, "{x:?}");
        assert!(x[0].how.contains("the model") && x[0].how.contains(&format!("host {:.1} ns", base + 100.0)), "{}", x[0].how);
    }

    #[test]
    fn ipis_lost_to_a_busy_host_leave_the_defaults() {
        let lossy = OUT.replace("tlb_ipis=18000", "tlb_ipis=3000");
        let (d, _) = derive(&parse(&lossy)).unwrap();
        let (fd, notes) = derive_fitted(&parse(&lossy), &d).unwrap();
        assert!(fd.iter().all(|x| !x.key.starts_with("ipi_")) && fd.len() == 7);
        assert!(notes.iter().any(|n| n.starts_with("IPI costs not derived")));
        assert!(derive(&parse("syscall=1\n")).is_err());
    }

    #[test]
    fn rounds_combine_to_the_lowest_times_and_one_rounds_counts() {
        let r = |t: &str| parse(t);
        let rounds = [
            r("syscall=200\nmprotect_spin=9000\ntlb_ipis=18000\nipi_iters=9000\nblock_read_4k=50000\npc_read_ahead_kb=8192\nblock=skipped:x\n"),
            r("syscall=150\nmprotect_spin=12000\ntlb_ipis=16000\nipi_iters=9000\nblock_read_4k=40000\npc_read_ahead_kb=128\n"),
            r("syscall=180\nmprotect_spin=8000\ntlb_ipis=17500\nipi_iters=9000\nblock_read_4k=70000\npc_read_ahead_kb=128\n"),
        ];
        let m = combine_rounds(&rounds);
        let f = |k: &str| super::super::fit::host_figure(&m, k).unwrap();
        assert_eq!(f("syscall"), 150.0);
        assert_eq!(f("mprotect_spin"), 8000.0);
        // The counts of the round whose mprotect_spin was kept (the third), not the lowest ones.
        assert_eq!((f("tlb_ipis"), f("ipi_iters")), (17500.0, 9000.0));
        assert_eq!(f("block_read_4k"), 40000.0);
        assert_eq!(f("pc_read_ahead_kb"), 8192.0);
        assert_eq!(m.get("block").map(String::as_str), Some("skipped:x"));
        // One round is that round.
        assert_eq!(combine_rounds(&rounds[..1]), rounds[0]);
        assert!(combine_rounds(&[]).is_empty());
    }
}
