//! VMA lookup (issue 4, seed 003): the vmacache rules (hash, seqnum, fork, foreign mm), the
//! invalidation guarantee, the Done-when contrasts of `mmsim reproduce vmacache`, trace replay
//! and its errors.

use std::process::Command;

use mmsim::config::{Config, Origin, ThreadSpec};
use mmsim::engine::prng::Prng;
use mmsim::mm::mmap::{find_vma_in, Prot};
use mmsim::mm::vmacache::vmacache_hash;
use mmsim::reproduce::vmacache as repro;
use mmsim::sim::{Backing, Sim};
use mmsim::types::*;

fn mmsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
}

/// A built (not run) sim with `n` threads of one process, thread i current on CPU i.
fn threads_sim(n: usize, cache: &str) -> (Sim, MmId, Vec<Tid>) {
    let origin = Origin { file: "<test>".into(), line: 1 };
    let threads = (0..n).map(|i| ThreadSpec { process: 0, cpu: Some(i as u32), ops: "spin 1ms".into(), ops_origin: origin.clone() }).collect();
    let sets = vec![format!("machine.cpus={n}"), format!("kernel.vma_cache={cache}"), "kernel.vma_tree=rbtree".into()];
    let cfg = Config::with_threads(&sets, threads).unwrap();
    let sim = Sim::build(&cfg).unwrap();
    let tids: Vec<Tid> = (0..n).map(|i| sim.cpus[i].current.expect("thread current on its CPU")).collect();
    let mm = sim.task(tids[0]).mm.unwrap();
    (sim, mm, tids)
}

fn map(sim: &mut Sim, cpu: u32, mm: MmId, pages: u64) -> u64 {
    sim.do_mmap(CpuId(cpu), mm, pages, Prot::ReadWrite, false, Backing::Anon, None).unwrap()
}

#[test]
fn a_miss_fills_the_slot_of_the_address_hash_and_later_lookups_hit() {
    let (mut sim, mm, t) = threads_sim(1, "per-thread");
    let a = map(&mut sim, 0, mm, 16);
    assert_eq!(sim.find_vma(CpuId(0), mm, a + 5), Some(a));
    let c = &sim.task(t[0]).vmacache;
    assert_eq!(c.vmas[vmacache_hash(a + 5)].map(|r| r.start), Some(a), "slot = (addr >> PAGE_SHIFT) & 3");
    assert_eq!(c.vmas.iter().filter(|s| s.is_some()).count(), 1);
    let hits = c.hits;
    // Another page of the same VMA hashes elsewhere but every slot is probed.
    assert_eq!(sim.find_vma(CpuId(0), mm, a + 6), Some(a));
    assert_eq!(sim.task(t[0]).vmacache.hits, hits + 1);
}

#[test]
fn an_unlink_bumps_the_seqnum_and_every_thread_clears_its_slots_at_its_next_lookup() {
    let (mut sim, mm, t) = threads_sim(2, "per-thread");
    let a = map(&mut sim, 0, mm, 16);
    let b = map(&mut sim, 0, mm, 16);
    sim.find_vma(CpuId(1), mm, a);
    let seq = sim.mm(mm).vma_lookup.seqnum;
    sim.do_munmap(CpuId(0), mm, b, 16);
    assert_eq!(sim.mm(mm).vma_lookup.seqnum, seq + 1);
    // Lazy: thread 1's slots are untouched until it looks something up.
    assert!(sim.task(t[1]).vmacache.vmas.iter().any(|s| s.is_some()));
    let hits = sim.task(t[1]).vmacache.hits;
    assert_eq!(sim.find_vma(CpuId(1), mm, a), Some(a));
    assert_eq!(sim.task(t[1]).vmacache.hits, hits, "the first lookup after an invalidation misses");
    assert_eq!(sim.task(t[1]).vmacache.seqnum, seq + 1);
    // A split alone does not invalidate (Linux 3.15-6.0: only unlinks do).
    let s = sim.mm(mm).vma_lookup.seqnum;
    sim.do_mprotect(CpuId(0), mm, a, 4, Prot::Read);
    assert_eq!(sim.mm(mm).vma_lookup.seqnum, s);
}

#[test]
fn the_mm_cache_is_one_slot_shared_by_threads_and_cleared_by_munmap() {
    let (mut sim, mm, _) = threads_sim(2, "mm");
    let a = map(&mut sim, 0, mm, 16);
    let b = map(&mut sim, 0, mm, 16);
    let hits = |s: &Sim| s.vmstat.get(mmsim::mm::vmstat::VmEvent::VMACACHE_FIND_HITS);
    sim.find_vma(CpuId(0), mm, a);
    let h = hits(&sim);
    sim.find_vma(CpuId(1), mm, a + 1); // another thread hits the shared slot
    assert_eq!(hits(&sim), h + 1);
    sim.find_vma(CpuId(1), mm, b); // replaces it
    sim.find_vma(CpuId(0), mm, a + 2);
    assert_eq!(hits(&sim), h + 1, "one slot: alternating VMAs always miss");
    sim.do_munmap(CpuId(0), mm, b, 16);
    assert_eq!(sim.mm(mm).vma_lookup.mmap_cache, None);
}

#[test]
fn a_lookup_on_a_foreign_mm_neither_uses_nor_fills_the_cache() {
    let (mut sim, mm, t) = threads_sim(1, "per-thread");
    let other = sim.mm_alloc(CpuId(0));
    let x = sim.do_mmap(CpuId(0), other, 8, Prot::ReadWrite, false, Backing::Anon, None).unwrap();
    let before = sim.task(t[0]).vmacache.vmas;
    assert_eq!(sim.find_vma(CpuId(0), other, x), Some(x));
    assert_eq!(sim.find_vma(CpuId(0), other, x), Some(x));
    assert_eq!(sim.task(t[0]).vmacache.vmas, before, "get_user_pages on another mm: current->mm != mm");
    assert_eq!(sim.task(t[0]).vmacache.hits, 0);
    let _ = mm;
}

#[test]
fn a_forked_child_starts_with_an_empty_cache() {
    let origin = Origin { file: "<test>".into(), line: 1 };
    let ops = "mmap a 4\ntouch a write\nfork\nreap\n";
    let threads = vec![ThreadSpec { process: 0, cpu: Some(0), ops: ops.into(), ops_origin: origin }];
    let cfg = Config::with_threads(&["machine.cpus=2".into(), "kernel.vma_cache=per-thread".into()], threads).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    let parent = sim.cpus[0].current.unwrap();
    sim.run(|_| {});
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    let child = *sim.task(parent).children.last().expect("forked");
    assert!(sim.task(parent).vmacache.vmas.iter().any(|s| s.is_some()), "the parent's faults filled its cache");
    assert!(sim.task(child).vmacache.vmas.iter().all(|s| s.is_none()), "copy_process(): vmacache_flush(child)");
    assert_eq!(sim.task(child).vmacache.calls, 0);
}

/// Four threads map, look up and unmap at random; every lookup must give what the tree gives and
/// no cache may ever return a VMA another thread has unmapped. With invalidation switched off
/// (fault injection) the same sequence does return unmapped VMAs, so the check has teeth.
fn storm(skip_invalidation: bool) -> u64 {
    let (mut sim, mm, t) = threads_sim(4, "per-thread");
    sim.mm_mut(mm).vma_lookup.skip_invalidation = skip_invalidation;
    let mut prng = Prng::new(7);
    let mut live: Vec<(u64, u64)> = Vec::new();
    let mut dead: Vec<(u64, u64)> = Vec::new();
    for _ in 0..4000 {
        let cpu = prng.below(4) as u32;
        match prng.below(4) {
            0 if live.len() < 40 => {
                let pages = 1 + prng.below(8);
                let s = map(&mut sim, cpu, mm, pages);
                live.push((s, pages));
            }
            1 if !live.is_empty() => {
                let (s, n) = live.swap_remove(prng.below(live.len() as u64) as usize);
                sim.do_munmap(CpuId(cpu), mm, s, n);
                dead.push((s, n));
            }
            _ => {
                // Look up a live or a recently unmapped address.
                let pool = if prng.below(2) == 0 && !dead.is_empty() { &dead } else { &live };
                if pool.is_empty() {
                    continue;
                }
                let (s, n) = pool[prng.below(pool.len() as u64) as usize];
                let vpn = s + prng.below(n);
                let got = sim.find_vma(CpuId(cpu), mm, vpn);
                let want = find_vma_in(sim.mm(mm), vpn).map(|v| v.start);
                assert_eq!(got, want, "find_vma must agree with the tree at {vpn:#x}");
            }
        }
    }
    t.iter().map(|&x| sim.task(x).vmacache.stale_hits).sum()
}

#[test]
fn a_thread_never_gets_a_vma_another_thread_unmapped() {
    assert_eq!(storm(false), 0);
    assert!(storm(true) > 0, "without invalidation, stale VMAs are returned (and detected)");
}

// ---------------------------------------------------------------- Done when (seed 003)

#[test]
fn ebizzy_mm_cache_below_5_and_per_thread_above_95() {
    let (before, _, s1) = repro::measure("ebizzy", "mm", "rbtree", &[]).unwrap();
    let (after, _, s2) = repro::measure("ebizzy", "per-thread", "rbtree", &[]).unwrap();
    assert!(before < 5.0, "mm cache hit rate {before:.2}%");
    assert!(after > 95.0, "per-thread hit rate {after:.2}%");
    assert_eq!(s1 + s2, 0);
}

#[test]
fn boot_kbuild_database_per_thread_beats_the_mm_cache_by_10_points() {
    for w in ["boot", "kbuild", "database"] {
        let (before, gb, _) = repro::measure(w, "mm", "rbtree", &[]).unwrap();
        let (after, ga, _) = repro::measure(w, "per-thread", "rbtree", &[]).unwrap();
        assert!(after >= before + 10.0, "{w}: {before:.2}% -> {after:.2}%");
        assert!(ga < gb, "{w}: fewer cycles in find_vma with the per-thread cache ({gb} -> {ga})");
    }
}

#[test]
fn reproduce_has_published_simulated_maple_and_real_trace_rows() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let traces: Vec<String> = repro::TRACES.iter().map(|t| format!("{dir}/{t}")).collect();
    for t in &traces {
        let text = std::fs::read_to_string(t).unwrap();
        assert!(text.starts_with("# mmsim-trace 1\n# command: "), "{t} names the command that made it");
        assert!(text.contains("trace record on Linux"), "{t} was recorded by mmsim trace record");
    }
    let table = repro::table(&[], &traces).unwrap();
    let v = serde_json::to_value(&table).unwrap();
    assert_eq!(v["experiment"], "vmacache");
    let rows = v["rows"].as_array().unwrap();
    for w in ["boot", "kbuild", "database", "ebizzy", "trace:gcc-hello", "trace:python3-pass"] {
        for m in ["hit_rate_pct", "gcycles", "gcycles_maple"] {
            let r = rows.iter().find(|r| r["workload"] == w && r["metric"] == m).unwrap_or_else(|| panic!("row {w} {m}"));
            assert!(r["simulated"]["before"].is_number() && r["simulated"]["after"].is_number());
            assert!(r["published"].get("before").is_some() && r["published"].get("after").is_some());
        }
    }
    let ebizzy = rows.iter().find(|r| r["workload"] == "ebizzy" && r["metric"] == "hit_rate_pct").unwrap();
    assert_eq!(ebizzy["published"]["after"], 99.97);
}

// ---------------------------------------------------------------- runs, traces, errors

#[test]
fn vma_workloads_are_byte_identical_twice() {
    let d = tempfile::Builder::new().prefix("mmsim-vma-").tempdir().unwrap();
    let s = d.path().join("eb.toml");
    std::fs::write(&s, "[machine]\ncpus = 8\n[workload]\nkind = \"ebizzy\"\nebizzy.threads = 16\nebizzy.iterations = 3\n").unwrap();
    let run = || mmsim().arg("run").arg(&s).output().unwrap();
    let (a, b) = (run(), run());
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let scen = format!("{}/traces/gcc-hello.toml", env!("CARGO_MANIFEST_DIR"));
    let (a, b) = (mmsim().args(["run", &scen]).output().unwrap(), mmsim().args(["run", &scen]).output().unwrap());
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
    let out = String::from_utf8_lossy(&a.stdout);
    assert!(out.contains("vmacache_find_calls"), "{out}");
}

#[test]
fn a_malformed_trace_is_one_line_naming_file_line_and_key_exit_2() {
    let d = tempfile::Builder::new().prefix("mmsim-vma-bad-").tempdir().unwrap();
    std::fs::write(d.path().join("bad.trace"), "# mmsim-trace 1\n0 7 exec /bin/x\n10 7 fault 0x1000 0x6\n20 7 mmap 0 0x1000\n").unwrap();
    std::fs::write(d.path().join("s.toml"), "[workload]\nkind = \"trace\"\ntrace.file = \"bad.trace\"\n").unwrap();
    let o = mmsim().arg("run").arg(d.path().join("s.toml")).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.trace:4: workload.trace.file: mmap"), "{err}");
    assert!(!err.contains("panicked"));
    // A missing trace file and a misspelt key are errors too.
    std::fs::write(d.path().join("s2.toml"), "[workload]\nkind = \"trace\"\ntrace.file = \"nope.trace\"\n").unwrap();
    let o = mmsim().arg("run").arg(d.path().join("s2.toml")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("s2.toml:3: workload.trace.file: "));
    std::fs::write(d.path().join("s3.toml"), "[kernel]\nvma_cahce = \"mm\"\n").unwrap();
    let o = mmsim().arg("run").arg(d.path().join("s3.toml")).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("s3.toml:2: kernel.vma_cahce: unknown key (did you mean 'kernel.vma_cache'?)"));
}
