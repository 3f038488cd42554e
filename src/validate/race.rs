//! `mmsim validate --race reclaim-writeback`: a race the model's oracle reports, checked on this
//! host's kernel. The model's side is `scenarios/reclaim-msync-race.toml` under the oracle, with
//! seed 002's batched unmap flush on and off; the host's is `reclaim_race.c` (embedded with
//! `include_str!`, compiled with `$CC` as `hostbench.c` is; its `memcg` mode has the same window
//! under a memory cgroup's limit), on ext4 over a loop device on
//! tmpfs that this command sets up and removes (fast I/O: the window is the rest of one
//! `shrink_folio_list()` call, ~0.3 ms here), or on a file in `--dir`. docs/host-findings.md §9
//! has what was measured and why each piece of the host program is there.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use serde::Serialize;

use super::host::{HostBench, HostError, ScratchExt4};

const RACE_C: &str = include_str!("reclaim_race.c");
const SCENARIO: &str = include_str!("../../scenarios/reclaim-msync-race.toml");
const SCENARIO_NAME: &str = "scenarios/reclaim-msync-race.toml";
const EXIT_USAGE: u8 = 2;
const EXIT_HOST: u8 = 5;

/// The races `--race` knows.
pub const RACES: [&str; 1] = ["reclaim-writeback"];

/// The host program's writeback calls, in the order they are run.
const WRITEBACKS: [&str; 2] = ["sync_file_range", "msync"];

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ModelRun {
    /// The `--set`s of this run (none: the scenario's linux-6.18).
    pub sets: Vec<String>,
    /// The oracle's headline violation class, if any.
    pub violation: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct HostRun {
    /// Who reclaims: `MADV_PAGEOUT` or `memcg reclaim` (a fault past a memory cgroup's limit;
    /// reclaim_race.c's two modes).
    pub reclaim: String,
    /// `sync_file_range`, `msync`, or `none` (the memcg run that times the window instead).
    pub writeback: String,
    pub rounds: u32,
    /// Pages of the 2 MiB mapping in large folios at set-up (the test wants none; `pageout`
    /// mode only).
    pub large: u32,
    /// Rounds where M saw page 0's PTE cleared by the reclaim.
    pub seen: u32,
    /// Rounds where M's store (after the writeback, if any) did not fault: it went through CPU
    /// 0's stale TLB entry.
    pub stale: u32,
    /// Rounds where the file did not hold the last stored value: lost writes.
    pub lost: u32,
    /// `none` only: how long M's stores went on without a fault after the PTE was seen cleared
    /// (µs; the rest of the reclaim batch), median and largest.
    pub window_us: Option<(f64, f64)>,
}

#[derive(Debug, Serialize)]
pub struct RaceReport {
    pub race: String,
    pub model: Vec<ModelRun>,
    /// The kernel release, or why the host could not be measured.
    pub host_kernel: Option<String>,
    pub host_filesystem: Option<String>,
    pub host: Vec<HostRun>,
    pub host_error: Option<String>,
}

/// Parse a race program's output: its last line, `result rounds=R large=K seen=S stale=T
/// lost=L`, and the memcg program's `window round=N us=X stale_stores=M` lines.
pub fn parse_result(reclaim: &str, writeback: &str, stdout: &str) -> Result<HostRun, String> {
    let line = stdout.lines().rev().find(|l| l.starts_with("result ")).ok_or_else(|| format!("no `result` line in:\n{stdout}"))?;
    let mut run = HostRun { reclaim: reclaim.to_string(), writeback: writeback.to_string(), ..HostRun::default() };
    let mut us: Vec<f64> = stdout
        .lines()
        .filter(|l| l.starts_with("window "))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("us=")).and_then(|v| v.parse().ok()))
        .collect();
    if !us.is_empty() {
        us.sort_by(f64::total_cmp);
        run.window_us = Some((us[us.len() / 2], us[us.len() - 1]));
    }
    for word in line.split_whitespace().skip(1) {
        let (k, v) = word.split_once('=').ok_or_else(|| format!("`{word}` in `{line}`: not key=value"))?;
        let v: u32 = v.parse().map_err(|_| format!("`{word}` in `{line}`: not a count"))?;
        match k {
            "rounds" => run.rounds = v,
            "large" => run.large = v,
            "seen" => run.seen = v,
            "stale" => run.stale = v,
            "lost" => run.lost = v,
            _ => return Err(format!("unknown key `{k}` in `{line}`")),
        }
    }
    Ok(run)
}

/// The model's verdicts: the scenario as shipped, then without the batched flush.
pub fn model_runs() -> Result<Vec<ModelRun>, String> {
    let mut out = Vec::new();
    for sets in [vec![], vec!["kernel.batched_unmap_flush=off".to_string()]] {
        let cfg = crate::config::load_str(SCENARIO_NAME, SCENARIO, &sets).map_err(|e| e.to_string())?;
        let (o, errors) = crate::check::swarm::check_config(&cfg, true)?;
        if let Some(e) = errors.first() {
            return Err(format!("{SCENARIO_NAME}: {e}"));
        }
        out.push(ModelRun { sets, violation: crate::check::headline(&o.violations).map(|v| v.class.name().to_string()) });
    }
    Ok(out)
}

fn is_root() -> bool {
    // SAFETY: geteuid() has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The host's runs, in `dir` or on a scratch filesystem: MADV_PAGEOUT against each writeback
/// call, then, if a memory cgroup can be made, memcg reclaim timing the window and against
/// sync_file_range.
fn host_runs(rounds: u32, dir: Option<&Path>) -> Result<(String, String, Vec<HostRun>), String> {
    let info = super::host::probe().map_err(|e| e.to_string())?;
    if !is_root() {
        return Err("the race test needs root (SCHED_FIFO, /proc/self/pagemap, a loop device)".into());
    }
    let bench = HostBench::build_named("reclaim_race", RACE_C).map_err(|e: HostError| e.to_string())?;
    let scratch = match dir {
        Some(_) => None,
        None => Some(ScratchExt4::make(Path::new("/dev/shm"), "race", "loop").map_err(|e| format!("{e} (needs a tmpfs at /dev/shm, mkfs.ext4 and a loop device; or give --dir)"))?),
    };
    let (dir, fs_name) = match (dir, &scratch) {
        (Some(d), _) => (d.to_path_buf(), format!("{} (--dir)", d.display())),
        (None, Some(s)) => (s.mnt.clone(), "ext4 on a loop device over tmpfs".to_string()),
        (None, None) => unreachable!("a scratch filesystem when no --dir"),
    };
    let file = dir.join("mmsim-reclaim-race.dat");
    let mut runs = Vec::new();
    let run = |bin: &Path, args: &[String], what: &str| -> Result<String, String> {
        eprintln!("mmsim validate --race: {rounds} rounds, {what}, on {fs_name} ...");
        let out = Command::new(bin).args(args).output().map_err(|e| format!("starting {}: {e}", bin.display()))?;
        if !out.status.success() {
            return Err(format!("{what} exited with {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim_end()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let result = (|| -> Result<(), String> {
        for wb in WRITEBACKS {
            let out = run(bench.binary(), &[file.display().to_string(), rounds.to_string(), "pageout".into(), wb.to_string()], &format!("MADV_PAGEOUT against {wb}"))?;
            runs.push(parse_result("MADV_PAGEOUT", wb, &out)?);
        }
        // The same window under memory pressure: a memory cgroup with a 16 MiB limit.
        match memcg_dir() {
            Some((cg, limit)) => {
                for wb in ["none", "sync_file_range"] {
                    let args = [file.display().to_string(), rounds.to_string(), "memcg".into(), cg.display().to_string(), limit.to_string(), wb.to_string()];
                    let out = run(bench.binary(), &args, &format!("memcg reclaim against {wb}"));
                    // The cgroup is empty once the program has exited.
                    let _ = fs::remove_dir(&cg);
                    runs.push(parse_result("memcg reclaim", wb, &out?)?);
                }
            }
            None => eprintln!("mmsim validate --race: no memory cgroup to make (cgroup v1 memory controller or v2 with memory in subtree_control): the memcg rows are skipped"),
        }
        Ok(())
    })();
    let _ = fs::remove_file(&file);
    result?;
    Ok((info.kernel, fs_name, runs))
}

/// A new memory cgroup's directory beside this process's, and its limit file: cgroup v1's
/// memory controller (`memory.limit_in_bytes`) or v2 (`memory.max`, if the parent delegates
/// the memory controller).
fn memcg_dir() -> Option<(PathBuf, &'static str)> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let name = format!("mmsim-race-{}", std::process::id());
    for line in own.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
        let path = path.trim_start_matches('/');
        if ctrl.split(',').any(|c| c == "memory") {
            let dir = Path::new("/sys/fs/cgroup/memory").join(path);
            if dir.join("memory.limit_in_bytes").exists() {
                return Some((dir.join(name), "memory.limit_in_bytes"));
            }
        }
        if ctrl.is_empty() {
            let dir = Path::new("/sys/fs/cgroup").join(path);
            let delegated = fs::read_to_string(dir.join("cgroup.subtree_control")).map(|s| s.split_whitespace().any(|c| c == "memory")).unwrap_or(false);
            if delegated {
                return Some((dir.join(name), "memory.max"));
            }
        }
    }
    None
}

fn print(r: &RaceReport) {
    println!("{}: reclaim's batched unmap flush (seed 002) against writeback of a folio it kept dirty", r.race);
    println!("model ({SCENARIO_NAME}, the oracle):");
    for m in &r.model {
        let what = if m.sets.is_empty() { "linux-6.18".to_string() } else { format!("linux-6.18 --set {}", m.sets.join(" --set ")) };
        println!("  {what:<50} {}", m.violation.as_deref().unwrap_or("no violation"));
    }
    match (&r.host_kernel, &r.host_error) {
        (Some(k), None) => {
            println!("host (Linux {k}, {}):", r.host_filesystem.as_deref().unwrap_or("?"));
            println!("  {:<14} {:<16} {:>7} {:>14} {:>22} {:>12}", "reclaim by", "writeback by", "rounds", "PTE seen gone", "store through stale TLB", "lost writes");
            for h in &r.host {
                println!("  {:<14} {:<16} {:>7} {:>14} {:>22} {:>12}", h.reclaim, h.writeback, h.rounds, h.seen, h.stale, h.lost);
                if let Some((med, max)) = h.window_us {
                    println!("  {:<14} (stores went on through the stale entry for {med:.1} µs after the PTE was seen cleared, median; {max:.1} µs at most)", "");
                }
                if h.large > 0 {
                    println!("  ({} pages of the mapping were in large folios: MADV_PAGEOUT may skip them)", h.large);
                }
            }
        }
        (_, Some(e)) => println!("host: not measured: {e}"),
        (None, None) => println!("host: not measured"),
    }
}

pub fn cli(race: &str, rounds: u32, dir: Option<PathBuf>, sim_only: bool, json: Option<PathBuf>) -> ExitCode {
    if !RACES.contains(&race) {
        eprintln!("mmsim validate: --race: unknown race `{race}` (known: {})", RACES.join(", "));
        return ExitCode::from(EXIT_USAGE);
    }
    if rounds == 0 {
        eprintln!("mmsim validate: --rounds must be at least 1");
        return ExitCode::from(EXIT_USAGE);
    }
    let model = match model_runs() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("mmsim validate --race: the model's side failed: {e}");
            return ExitCode::from(1);
        }
    };
    let mut report = RaceReport { race: race.to_string(), model, host_kernel: None, host_filesystem: None, host: Vec::new(), host_error: None };
    if sim_only {
        report.host_error = Some("--sim-only".into());
    } else {
        match host_runs(rounds, dir.as_deref()) {
            Ok((k, f, runs)) => {
                report.host_kernel = Some(k);
                report.host_filesystem = Some(f);
                report.host = runs;
            }
            Err(e) => report.host_error = Some(e),
        }
    }
    print(&report);
    if let Some(path) = json {
        if let Err(e) = crate::output::write_json(&path, &report) {
            eprintln!("mmsim validate: {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    match &report.host_error {
        Some(e) if !sim_only => {
            eprintln!("mmsim validate --race: the host could not be measured: {e}");
            ExitCode::from(EXIT_HOST)
        }
        _ => ExitCode::SUCCESS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_line_parses_and_bad_lines_are_refused() {
        let out = "lost round=4 stored=1009 file=1008\nresult rounds=300 large=0 seen=300 stale=294 lost=69\n";
        let want = HostRun { reclaim: "MADV_PAGEOUT".into(), writeback: "sync_file_range".into(), rounds: 300, large: 0, seen: 300, stale: 294, lost: 69, window_us: None };
        assert_eq!(parse_result("MADV_PAGEOUT", "sync_file_range", out).unwrap(), want);
        let out = "window round=0 us=52.5 stale_stores=40\nwindow round=1 us=27.1 stale_stores=9\nwindow round=2 us=101.1 stale_stores=88\nresult rounds=3 large=0 seen=3 stale=3 lost=0\n";
        assert_eq!(parse_result("memcg reclaim", "none", out).unwrap().window_us, Some((52.5, 101.1)));
        assert!(parse_result("x", "msync", "lost round=1 stored=3 file=2\n").is_err());
        assert!(parse_result("x", "msync", "result rounds=3 lost=x\n").is_err());
        assert!(parse_result("x", "msync", "result rounds=3 gone=1\n").is_err());
    }

    #[test]
    fn the_model_loses_the_write_only_with_the_batched_flush() {
        let m = model_runs().unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].violation.as_deref(), Some(crate::check::oracle::Class::LostWrite.name()));
        assert_eq!(m[1].violation, None, "{:?}", m[1]);
    }
}
