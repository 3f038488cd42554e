//! `mmsim fuzz`: a seeded input fuzzer (issue 16). Every case is run in-process under
//! `catch_unwind`; a panic anywhere (parser, model, reports) is a finding, printed with the case's
//! seed and input so that `mmsim fuzz --seed S --cases 1 --first N` reproduces it.
//!
//! Four kinds of case, drawn in turn from the case seed:
//! - a **mutated shipped scenario** (scenarios/*.toml, traces/*.toml): numbers flipped to 0, -1
//!   and huge values, lines dropped or duplicated, values changed to another type;
//! - a **mutated shipped trace** (traces/*.trace) replayed by its scenario;
//! - a **random op program** (op language words in random order and arity);
//! - a **generated valid scenario**: random knobs within their declared ranges (log-uniform for
//!   integers, so small values are common), tiny machines with swap, random op programs.
//!
//! Simulated work per case is capped with `run.max_sim_ms` (appended as a `--set`, so the
//! mutated file's own value is overridden) and machines whose up-front estimate
//! (config/estimate.rs) exceeds 256 MiB are counted as refused, not built: the fuzzer checks that
//! nothing panics, not that a big machine is fast. Aborts (allocation failure) kill the process,
//! which the CI step reports by its exit status. Wall-clock time is read only for `--seconds`,
//! never in simulation code.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::knobs::{self, Kind};
use crate::config::{self, Config, Origin, ThreadSpec};
use crate::engine::prng::Prng;
use crate::sim::Sim;

/// Host bytes above which a fuzz case's machine is not built (counted as refused).
const HOST_CAP: u64 = 256 << 20;
/// Simulated-time cap per case.
const MAX_SIM_MS: u64 = 20;

/// What one case did.
#[derive(Debug, PartialEq, Eq)]
pub enum CaseResult {
    /// The input was rejected with a user error (exit 2 in `mmsim run`).
    Rejected,
    /// Valid but too big for the fuzzer's host cap.
    Refused,
    /// Built and ran to completion or to the time limit.
    Ran,
    /// A panic: a simulator bug.
    Panic(String),
}

/// The shipped inputs the mutations start from.
pub struct Corpus {
    pub scenarios: Vec<(String, String)>,
    pub traces: Vec<(String, String)>,
    pub trace_scenarios: Vec<(String, String)>,
}

impl Corpus {
    /// scenarios/*.toml, traces/*.toml and traces/*.trace under `root`, in name order.
    pub fn load(root: &Path) -> std::io::Result<Corpus> {
        let read = |dir: &str, ext: &str| -> std::io::Result<Vec<(String, String)>> {
            let mut v = Vec::new();
            for e in std::fs::read_dir(root.join(dir))? {
                let p = e?.path();
                if p.extension().and_then(|x| x.to_str()) == Some(ext) {
                    v.push((p.display().to_string(), std::fs::read_to_string(&p)?));
                }
            }
            v.sort();
            Ok(v)
        };
        Ok(Corpus { scenarios: read("scenarios", "toml")?, traces: read("traces", "trace")?, trace_scenarios: read("traces", "toml")? })
    }
}

const HUGE: &[&str] = &["0", "-1", "1", "2", "4294967296", "9223372036854775807", "18446744073709551616", "1e30", "-0.5", "nan", "\"x\"", "true", "[]", "{}"];

/// Mutate text line by line: 1-4 edits of numbers, lines and value types.
pub fn mutate(text: &str, r: &mut Prng) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    for _ in 0..1 + r.below(4) {
        let i = r.below(lines.len() as u64) as usize;
        match r.below(6) {
            0 => {
                lines.remove(i);
                if lines.is_empty() {
                    lines.push(String::new());
                }
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            2 | 3 => {
                // Replace one number (a run of digits, possibly hex) with an edge value.
                let l = &lines[i];
                let starts: Vec<usize> = l.char_indices().filter(|&(j, c)| c.is_ascii_digit() && (j == 0 || !l.as_bytes()[j - 1].is_ascii_alphanumeric())).map(|(j, _)| j).collect();
                if !starts.is_empty() {
                    let s = starts[r.below(starts.len() as u64) as usize];
                    let e = l[s..].find(|c: char| !c.is_ascii_alphanumeric() && c != '.').map(|n| s + n).unwrap_or(l.len());
                    let v = HUGE[r.below(HUGE.len() as u64) as usize];
                    lines[i] = format!("{}{}{}", &l[..s], v, &l[e..]);
                }
            }
            4 => {
                // Change a value's type: everything after '=' becomes an edge value.
                if let Some(eq) = lines[i].find('=') {
                    let v = HUGE[r.below(HUGE.len() as u64) as usize];
                    lines[i] = format!("{}= {v}", &lines[i][..eq]);
                }
            }
            _ => {
                // Truncate a line.
                let n = lines[i].len();
                if n > 0 {
                    let cut = r.below(n as u64) as usize;
                    if lines[i].is_char_boundary(cut) {
                        lines[i].truncate(cut);
                    }
                }
            }
        }
    }
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

const OP_WORDS: &[&str] = &["mmap a 1", "mmap b 64", "mmap f 8 file:data shared", "mmap c 4 prot=r", "touch a write", "touch b read", "touch f write", "touch c", "munmap a", "munmap b", "mprotect a read", "mprotect b rw", "mprotect a none", "madvise a dontneed", "madvise b pageout", "madvise f pageout", "migrate a 0", "fork", "reap", "sleep 1us", "spin 2us", "loop 3", "end", "mmap", "touch", "loop", "mmap a 0", "mmap a 99999999999", "sleep forever", "spin forever"];

/// A random op program: well-formed lines mostly, with loops closed, and a few wrong ones.
pub fn random_ops(r: &mut Prng) -> String {
    let mut s = String::new();
    let mut depth = 0;
    for _ in 0..1 + r.below(12) {
        let w = OP_WORDS[r.below(OP_WORDS.len() as u64) as usize];
        if w == "end" && depth == 0 {
            continue;
        }
        if w == "loop 3" {
            depth += 1;
        }
        if w == "end" {
            depth -= 1;
        }
        s.push_str(w);
        s.push('\n');
    }
    for _ in 0..depth {
        s.push_str("end\n");
    }
    s
}

/// A value for `k` within its declared range; integers log-uniform, so small values are common.
fn random_value(k: &knobs::Knob, r: &mut Prng) -> Option<String> {
    Some(match k.kind {
        Kind::Int { min, max } => {
            let span = (max as i128 - min as i128) as u128;
            let bits = 128 - span.leading_zeros() as u64;
            let b = r.below(bits.min(64) + 1);
            let v = if b == 0 { 0 } else { (r.next_u64() >> (64 - b)) as u128 % (span + 1) };
            (min as i128 + v as i128).to_string()
        }
        Kind::Float { min, max } => {
            let u = r.below(1 << 20) as f64 / (1 << 20) as f64;
            let v = if r.below(2) == 0 { min + (max - min) * u } else { min + (max - min).min(1e4) * u * u };
            format!("{v}")
        }
        Kind::Bool => (r.below(2) == 0).to_string(),
        Kind::Enum(vals) => vals[r.below(vals.len() as u64) as usize].to_string(),
        Kind::Str => return None,
    })
}

/// A generated valid scenario: a tiny machine with swap, 1-3 random knobs, random op programs.
pub fn generated(r: &mut Prng) -> (Vec<String>, Vec<ThreadSpec>) {
    let cpus = 1 + r.below(4);
    let mut sets = vec![format!("machine.cpus={cpus}"), format!("machine.mem_per_node_mib={}", 1 + r.below(8)), format!("machine.swap_mib={}", [0, 1, 4][r.below(3) as usize]), format!("kernel.preset={}", knobs::PRESETS[r.below(knobs::PRESETS.len() as u64) as usize]), format!("run.seed={}", r.below(1000))];
    let all: Vec<_> = knobs::all().filter(|k| !k.key.starts_with("workload.") && !k.key.starts_with("machine.tlb.")).collect();
    for _ in 0..r.below(4) {
        let k = all[r.below(all.len() as u64) as usize];
        if let Some(v) = random_value(k, r) {
            sets.push(format!("{}={v}", k.key));
        }
    }
    let origin = Origin { file: "<fuzz>".into(), line: 1 };
    let threads = (0..1 + r.below(3)).map(|_| ThreadSpec { process: r.below(2) as u32, cpu: if r.below(2) == 0 { Some(r.below(cpus) as u32) } else { None }, ops: random_ops(r), ops_origin: origin.clone() }).collect();
    (sets, threads)
}

/// Build and run a loaded config under the fuzzer's caps.
fn run_config(cfg: Result<Config, config::ConfigError>) -> CaseResult {
    let Ok(cfg) = cfg else { return CaseResult::Rejected };
    if config::estimate::check(&cfg).is_err() || config::estimate::host_bytes(&cfg).0 > HOST_CAP {
        return CaseResult::Refused;
    }
    let Ok(mut sim) = Sim::build(&cfg) else { return CaseResult::Rejected };
    sim.run(|_| {});
    let r = crate::report::Report::from_sim(&sim, crate::run::Outcome::Completed);
    let _ = (r.human(), r.summary());
    CaseResult::Ran
}

fn caps() -> Vec<String> {
    vec![format!("run.max_sim_ms={MAX_SIM_MS}")]
}

/// Run case `i` of the run seeded `seed`; `tmp` holds mutated traces.
pub fn run_case(corpus: &Corpus, seed: u64, i: u64, tmp: &Path) -> (CaseResult, String) {
    let mut r = Prng::new(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let kind = i % 4;
    let mut desc = String::new();
    let res = catch_unwind(AssertUnwindSafe(|| match kind {
        0 => {
            let (name, text) = &corpus.scenarios[r.below(corpus.scenarios.len() as u64) as usize];
            let m = mutate(text, &mut r);
            desc = format!("mutated {name}:\n{m}");
            // Mutated trace scenarios resolve their trace relative to the scenario's directory.
            run_config(config::load_str(name, &m, &caps()))
        }
        1 => {
            let (tname, ttext) = &corpus.traces[r.below(corpus.traces.len() as u64) as usize];
            let (sname, stext) = corpus.trace_scenarios.iter().find(|(n, t)| t.contains(Path::new(tname).file_name().unwrap().to_str().unwrap()) && n.ends_with(".toml")).unwrap_or(&corpus.trace_scenarios[0]);
            let mt = if r.below(4) == 0 { ttext.clone() } else { mutate(ttext, &mut r) };
            let ms = if r.below(2) == 0 { stext.clone() } else { mutate(stext, &mut r) };
            let tp = tmp.join(Path::new(tname).file_name().unwrap());
            let sp = tmp.join(Path::new(sname).file_name().unwrap());
            if std::fs::write(&tp, &mt).and(std::fs::write(&sp, &ms)).is_err() {
                return CaseResult::Rejected;
            }
            let mut sets = caps();
            sets.extend([format!("machine.mem_per_node_mib={}", 1 + r.below(16)), format!("machine.swap_mib={}", [0, 1, 8][r.below(3) as usize])]);
            desc = format!("mutated {sname} with mutated {tname} (written to {}), --set {}", tmp.display(), sets.join(" --set "));
            run_config(config::load(&sp, &sets))
        }
        2 => {
            let ops = random_ops(&mut r);
            desc = format!("op program:\n{ops}");
            let origin = Origin { file: "<fuzz>".into(), line: 1 };
            let t = vec![ThreadSpec { process: 0, cpu: None, ops, ops_origin: origin }];
            run_config(Config::with_threads(&caps(), t))
        }
        _ => {
            let (mut sets, threads) = generated(&mut r);
            desc = format!("generated: --set {} threads {:?}", sets.join(" --set "), threads.iter().map(|t| &t.ops).collect::<Vec<_>>());
            sets.extend(caps());
            run_config(Config::with_threads(&sets, threads))
        }
    }));
    let res = res.unwrap_or_else(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        CaseResult::Panic(msg)
    });
    (res, desc)
}

#[derive(Debug, Default)]
pub struct Stats {
    pub cases: u64,
    pub rejected: u64,
    pub refused: u64,
    pub ran: u64,
    pub panics: u64,
}

/// Run cases `first..first+cases` (stopping after `seconds` of wall time if given), printing each
/// panic with its reproducing command.
pub fn fuzz(root: &Path, seed: u64, first: u64, cases: u64, seconds: Option<u64>) -> std::io::Result<Stats> {
    let corpus = Corpus::load(root)?;
    let tmp: PathBuf = std::env::temp_dir().join(format!("mmsim-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let t0 = std::time::Instant::now();
    let mut st = Stats::default();
    // Cases run in parallel (rayon, one per core) in chunks; results are tallied and panics
    // printed in case order, so the output does not depend on the number of cores. A mutated
    // trace case writes its files into a directory of its own, kept if the case panics.
    const CHUNK: u64 = 256;
    let end = first.saturating_add(cases);
    let mut next = first;
    while next < end {
        if seconds.is_some_and(|s| t0.elapsed().as_secs() >= s) {
            break;
        }
        let hi = next.saturating_add(CHUNK).min(end);
        use rayon::prelude::*;
        let results: Vec<(u64, CaseResult, String, PathBuf)> = (next..hi)
            .into_par_iter()
            .map(|i| {
                let dir = tmp.join(i.to_string());
                if i % 4 == 1 {
                    let _ = std::fs::create_dir_all(&dir);
                }
                let (res, desc) = run_case(&corpus, seed, i, &dir);
                (i, res, desc, dir)
            })
            .collect();
        for (i, res, desc, dir) in results {
            st.cases += 1;
            match res {
                CaseResult::Rejected => st.rejected += 1,
                CaseResult::Refused => st.refused += 1,
                CaseResult::Ran => st.ran += 1,
                CaseResult::Panic(msg) => {
                    st.panics += 1;
                    eprintln!("mmsim fuzz: PANIC in case {i}: {msg}\n  reproduce: mmsim fuzz --seed {seed} --first {i} --cases 1\n  input: {desc}");
                    continue;
                }
            }
            if i % 4 == 1 {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        next = hi;
    }
    std::panic::set_hook(prev);
    // Keep the written inputs of a run that found a panic: the report points at them.
    if st.panics == 0 {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(st)
}

pub fn cli(seed: u64, first: u64, cases: u64, seconds: Option<u64>, root: PathBuf) -> ExitCode {
    match fuzz(&root, seed, first, cases, seconds) {
        Ok(st) => {
            println!("mmsim fuzz: seed {seed}, cases {}..{}: {} run, {} rejected (user errors), {} refused (over the fuzzer's 256 MiB cap), {} panics", first, first + st.cases, st.ran, st.rejected, st.refused, st.panics);
            if st.panics > 0 { ExitCode::from(3) } else { ExitCode::SUCCESS }
        }
        Err(e) => {
            eprintln!("mmsim fuzz: {}: {e} (run from the repository root or give --root)", root.display());
            ExitCode::from(1)
        }
    }
}
