//! `mmsim validate --race reclaim-writeback`: a race the model's oracle reports, checked on this
//! host's kernel. The model's side is `scenarios/reclaim-msync-race.toml` under the oracle, with
//! seed 002's batched unmap flush on and off; the host's is `reclaim_race.c` (embedded with
//! `include_str!`, compiled with `$CC` as `hostbench.c` is), on ext4 over a loop device on
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

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct HostRun {
    /// `sync_file_range` or `msync`.
    pub writeback: String,
    pub rounds: u32,
    /// Rounds where page 0 of the mapping was in a large folio (the test wants none).
    pub large: u32,
    /// Rounds where M saw page 0's PTE cleared before MADV_PAGEOUT returned.
    pub seen: u32,
    /// Rounds where M's store after the writeback came before MADV_PAGEOUT returned.
    pub window: u32,
    /// Rounds where the file did not hold the last stored value: lost writes.
    pub lost: u32,
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

/// Parse reclaim_race's last line, `result rounds=R large=K seen=S window=W lost=L`.
pub fn parse_result(writeback: &str, stdout: &str) -> Result<HostRun, String> {
    let line = stdout.lines().rev().find(|l| l.starts_with("result ")).ok_or_else(|| format!("no `result` line in:\n{stdout}"))?;
    let mut run = HostRun { writeback: writeback.to_string(), ..HostRun::default() };
    for word in line.split_whitespace().skip(1) {
        let (k, v) = word.split_once('=').ok_or_else(|| format!("`{word}` in `{line}`: not key=value"))?;
        let v: u32 = v.parse().map_err(|_| format!("`{word}` in `{line}`: not a count"))?;
        match k {
            "rounds" => run.rounds = v,
            "large" => run.large = v,
            "seen" => run.seen = v,
            "window" => run.window = v,
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

/// The host's runs, one per writeback call, in `dir` or on a scratch filesystem.
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
    for wb in WRITEBACKS {
        eprintln!("mmsim validate --race: {rounds} rounds with {wb} on {fs_name} ...");
        let out = Command::new(bench.binary()).arg(&file).arg(rounds.to_string()).arg(wb).output().map_err(|e| format!("starting {}: {e}", bench.binary().display()))?;
        if !out.status.success() {
            let _ = fs::remove_file(&file);
            return Err(format!("reclaim_race {wb} exited with {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim_end()));
        }
        runs.push(parse_result(wb, &String::from_utf8_lossy(&out.stdout))?);
    }
    let _ = fs::remove_file(&file);
    Ok((info.kernel, fs_name, runs))
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
            println!("  {:<16} {:>7} {:>14} {:>16} {:>12}", "writeback by", "rounds", "PTE seen gone", "store in window", "lost writes");
            for h in &r.host {
                println!("  {:<16} {:>7} {:>14} {:>16} {:>12}", h.writeback, h.rounds, h.seen, h.window, h.lost);
                if h.large > 0 {
                    println!("  (page 0 was in a large folio in {} rounds: MADV_PAGEOUT may skip it)", h.large);
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
        let out = "lost round=4 stored=1009 file=1008\nresult rounds=300 large=0 seen=300 window=294 lost=69\n";
        assert_eq!(parse_result("sync_file_range", out).unwrap(), HostRun { writeback: "sync_file_range".into(), rounds: 300, large: 0, seen: 300, window: 294, lost: 69 });
        assert!(parse_result("msync", "lost round=1 stored=3 file=2\n").is_err());
        assert!(parse_result("msync", "result rounds=3 lost=x\n").is_err());
        assert!(parse_result("msync", "result rounds=3 gone=1\n").is_err());
    }

    #[test]
    fn the_model_loses_the_write_only_with_the_batched_flush() {
        let m = model_runs().unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].violation.as_deref(), Some(crate::check::oracle::Class::LostWrite.name()));
        assert_eq!(m[1].violation, None, "{:?}", m[1]);
    }
}
