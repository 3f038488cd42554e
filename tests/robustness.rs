//! Issue 16: no input crashes mmsim or harms the host. One regression test per input that used
//! to panic, abort or misbehave.

use std::path::{Path, PathBuf};
use std::process::Command;

use mmsim::config;
use mmsim::sim::Sim;

fn mmsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mmsim-rb-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Load a shipped scenario with `sets`, build and run it in-process.
fn run_file(path: &Path, sets: &[&str]) -> Sim {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let cfg = config::load(path, &sets).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    sim.run(|_| {});
    sim
}

/// The refcount underflow ("simulator bug: refcount underflow on 42"): dup_mm() listed the child
/// once per VMA in an anon_vma shared by several VMAs (after a split), so rmap_walk() found the
/// child's PTE twice and reclaim's try_to_unmap() dropped one mapping's reference twice. Tiny
/// memory with swap makes reclaim unmap anon pages of a forked trace.
#[test]
fn trace_replay_on_tiny_memory_with_swap_does_not_underflow_a_refcount() {
    for trace in ["traces/python3-pass.toml", "traces/gcc-hello.toml"] {
        for mem in ["1", "2"] {
            let m = format!("machine.mem_per_node_mib={mem}");
            let sim = run_file(&root().join(trace), &[&m, "machine.swap_mib=1", "machine.cpus=2", "kernel.preset=linux-4.14"]);
            assert!(sim.end_ns > 0, "{trace} ran");
        }
    }
}

/// run.max_sim_ms stops a run whose only thread never waits for an event.
#[test]
fn max_sim_ms_stops_a_single_thread_loop_with_exit_4() {
    let d = tmpdir("loop");
    let p = d.join("loop.toml");
    std::fs::write(&p, "[machine]\ncpus = 2\n[[workload.thread]]\nops = \"\"\"\nmmap a 1\nloop 4000000000\n  touch a write\n  madvise a dontneed\nend\n\"\"\"\n").unwrap();
    let out = mmsim().arg("run").arg(&p).args(["--set", "run.max_sim_ms=100"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("--set run.max_sim_ms="), "says how to raise it: {err}");
    std::fs::remove_dir_all(&d).unwrap();
}
