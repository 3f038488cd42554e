//! The one integration-test binary (see README "Tests"): smoke and determinism, scenario errors,
//! the x86 flush baseline's behaviour, and agreement with the host kernel.

use std::process::Command;

use mmsim::config::{Config, Origin, ThreadSpec};
use mmsim::report::Report;
use mmsim::sim::Sim;
use mmsim::validate::case::{Case, Op, Remote};

fn mmsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mmsim"))
}

/// A scratch directory in the system temp dir, removed when the returned guard drops.
fn tmpdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("mmsim-it-{name}-")).tempdir().unwrap()
}

/// Run op programs (one per thread: (cpu, ops)) on a 2..N-CPU machine; return the finished sim.
fn run_ops(cpus: usize, threads: &[(u32, &str)], sets: &[&str]) -> Sim {
    let origin = Origin { file: "<test>".into(), line: 1 };
    let threads = threads.iter().map(|&(cpu, ops)| ThreadSpec { process: 0, cpu: Some(cpu), ops: ops.into(), ops_origin: origin.clone() }).collect();
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    sets.push(format!("machine.cpus={cpus}"));
    let cfg = Config::with_threads(&sets, threads).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    sim.run(|_| {});
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    sim
}

fn shootdowns(sim: &Sim) -> u64 {
    sim.cpus.iter().map(|c| c.stats.irq_tlb_count).sum()
}

// ---------------------------------------------------------------- smoke and determinism

#[test]
fn every_shipped_scenario_runs_and_is_byte_identical_twice() {
    let d = tmpdir("det");
    for entry in std::fs::read_dir("scenarios").unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue; // scenarios/profiles/: cost profiles, tested in tests/validate.rs
        }
        let mut outs = Vec::new();
        for i in 0..2 {
            let json = d.path().join(format!("r{i}.json"));
            let o = mmsim().arg("run").arg(&path).arg("--json").arg(&json).output().unwrap();
            assert!(o.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&o.stderr));
            outs.push((o.stdout, std::fs::read(&json).unwrap()));
        }
        assert_eq!(outs[0], outs[1], "{} is not deterministic", path.display());
        let v: serde_json::Value = serde_json::from_slice(&outs[0].1).unwrap();
        for key in ["seed", "counters", "per_cpu", "time"] {
            assert!(v.get(key).is_some(), "{}: JSON lacks {key}", path.display());
        }
        assert!(v["per_cpu"]["tlb_shootdowns"].is_array());
        assert!(v["time"]["elapsed_ns"].as_u64().unwrap() > 0);
    }
}

/// scenarios/host/ holds host-sized experiments the every-scenario tests skip (too large): each
/// must still load and start (a millisecond of simulated time).
#[test]
fn host_sized_scenarios_load_and_start() {
    let mut n = 0;
    for entry in std::fs::read_dir("scenarios/host").unwrap() {
        let path = entry.unwrap().path();
        // The run stops at its time limit: exit status 4 (liveness), with results.
        let o = mmsim().arg("run").arg(&path).args(["--set", "run.max_sim_ms=1", "--only", "summary"]).output().unwrap();
        assert_eq!(o.status.code(), Some(4), "{}: {}", path.display(), String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("TimeLimit") && out.contains("page faults"), "{}: {out}", path.display());
        n += 1;
    }
    assert!(n >= 1);
}

#[test]
fn a_different_seed_changes_a_random_workload() {
    let a = mmsim().args(["run", "scenarios/pmbench-uniform.toml", "--only", "perf", "--set", "workload.accesses_per_thread=20000"]).output().unwrap();
    let b = mmsim().args(["run", "scenarios/pmbench-uniform.toml", "--only", "perf", "--set", "workload.accesses_per_thread=20000", "--set", "run.seed=8"]).output().unwrap();
    assert!(a.status.success() && b.status.success());
    assert_ne!(a.stdout, b.stdout);
}

// ---------------------------------------------------------------- scenario errors

fn run_bad(text: &str, sets: &[&str]) -> (i32, String) {
    let d = tmpdir("bad");
    let p = d.path().join("bad.toml");
    std::fs::write(&p, text).unwrap();
    let o = mmsim().arg("run").arg(&p).args(sets.iter().flat_map(|s| ["--set", s])).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).replace(&p.display().to_string(), "bad.toml");
    (o.status.code().unwrap_or(-1), err)
}

#[test]
fn misspelt_key_is_one_line_naming_file_line_key_exit_2() {
    let (code, err) = run_bad("[machine]\ncpus = 2\nmem_per_nod_mib = 64\n", &[]);
    assert_eq!(code, 2);
    assert_eq!(err, "mmsim: bad.toml:3: machine.mem_per_nod_mib: unknown key (did you mean 'machine.mem_per_node_mib'?)\n");
}

#[test]
fn negative_memory_and_zero_cpus_are_errors_not_panics() {
    let (code, err) = run_bad("[machine]\nmem_per_node_mib = -64\n", &[]);
    assert_eq!(code, 2);
    assert!(err.starts_with("mmsim: bad.toml:2: machine.mem_per_node_mib: -64 is out of range"), "{err}");
    assert_eq!(err.lines().count(), 1);
    let (code, err) = run_bad("[[workload.thread]]\nops = \"spin 1us\"\n", &["machine.cpus=0"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("mmsim: --set:1: machine.cpus: 0 is out of range"), "{err}");
}

#[test]
fn op_program_errors_name_the_scenario_line() {
    let (code, err) = run_bad("[[workload.thread]]\nops = \"\"\"\nmmap a 4\ntuch a write\n\"\"\"\n", &[]);
    assert_eq!(code, 2);
    assert!(err.starts_with("mmsim: bad.toml:4: workload.thread.ops: unknown op 'tuch'"), "{err}");
}

#[test]
fn touch_words_out_of_range_is_an_error_naming_the_line() {
    let (code, err) = run_bad("[[workload.thread]]\nops = \"\"\"\nmmap a 4\ntouch a read words=513\n\"\"\"\n", &[]);
    assert_eq!(code, 2);
    assert!(err.starts_with("mmsim: bad.toml:4: workload.thread.ops: '513': words= takes 1 to 512"), "{err}");
    let (code, err) = run_bad("[[workload.thread]]\nops = \"\"\"\nmmap a 4\ntouch a read step=8\n\"\"\"\n", &[]);
    assert_eq!(code, 2);
    assert!(err.starts_with("mmsim: bad.toml:4: workload.thread.ops: unknown touch option 'step=8'"), "{err}");
}

/// `touch NAME read words=N`: the page's other N-1 words are L1 dTLB hits charged as user time
/// (`cost.access_ns` each) and counted as dTLB loads; the kernel's work is the same.
#[test]
fn touch_words_charges_the_other_words_as_tlb_hits() {
    let run = |words: u32| run_ops(2, &[(0, &format!("mmap a 64\ntouch a read words={words}\n"))], &["cost.access_ns=3"]);
    let (one, many) = (run(1), run(512));
    let user = |s: &Sim| s.cpus[0].stats.user_ns;
    assert_eq!(user(&many) - user(&one), 64 * 511 * 3);
    assert_eq!(many.cpus[0].stats.dtlb_loads - one.cpus[0].stats.dtlb_loads, 64 * 511);
    assert_eq!(many.cpus[0].stats.sys_ns, one.cpus[0].stats.sys_ns);
}

/// cost.fault_after_syscall_ns: a page fault whose CPU entered the kernel last for a system call
/// pays it; a fault right after another fault does not (docs/host-findings.md §8.9).
#[test]
fn only_a_fault_right_after_a_syscall_pays_fault_after_syscall_ns() {
    let ops = "mmap a 64\nloop 10\ntouch a write\nmadvise a dontneed\nend\n";
    let run = |extra: u32| run_ops(2, &[(0, ops)], &[&format!("cost.fault_after_syscall_ns={extra}")]);
    let (base, with) = (run(0), run(700));
    let faults = |s: &Sim| s.vmstat.ev[mmsim::mm::vmstat::VmEvent::PGFAULT as usize];
    assert_eq!(faults(&base), 640);
    assert_eq!(faults(&with), 640);
    // Ten loops: each one's first fault follows a syscall (the mmap, then each madvise); the
    // other 63 follow a fault.
    assert_eq!(with.cpus[0].stats.sys_ns - base.cpus[0].stats.sys_ns, 10 * 700);
}

/// cost.block_read_submit_ns: each read request charges its submitting CPU that much system
/// time before the task sleeps, and the task's wake-up moves by as much (docs/host-findings.md
/// §8.9).
#[test]
fn each_read_request_charges_block_read_submit_ns_before_its_sleep() {
    let ops = "mmap f 256 file:data shared prot=r\ntouch f read\n";
    let run = |submit: u32| run_ops(2, &[(0, ops)], &[&format!("cost.block_read_submit_ns={submit}")]);
    let (base, with) = (run(0), run(20_000));
    let reads = |s: &Sim| s.blkdev.iter().map(|d| d.reads).sum::<u64>();
    assert!(reads(&base) > 1, "the file is read in several requests");
    assert_eq!(reads(&with), reads(&base));
    let submit = |s: &Sim| s.prof.children_ns(mmsim::kernel::profile::KFn::SubmitBio);
    assert_eq!((submit(&base), submit(&with)), (0, 20_000 * reads(&base)));
    // The first read is synchronous: its submission delays the reader. An asynchronous
    // readahead's submission does too, but its completion may land while the reader still
    // reads earlier pages; so the end moves by at least one submission and at most all.
    let moved = with.end_ns - base.end_ns;
    assert!(moved >= 20_000 && moved <= 20_000 * reads(&base), "{moved}");
}

/// cost.flush_multi_ns: every flush that goes through native_flush_tlb_multi() pays it, IPIs
/// or none; a flush whose mask holds only the initiator does not (docs/host-findings.md §8.9).
#[test]
fn a_flush_past_a_lazy_cpu_pays_flush_multi_ns_without_an_ipi() {
    use mmsim::mm::vmstat::VmEvent;
    let ops = "mmap a 1\ntouch a write\nloop 10\nmprotect a r\nmprotect a rw\ntouch a write\nend\n";
    let run = |sibling: bool, multi: u32| {
        let mut threads = vec![(0, ops)];
        if sibling {
            threads.push((1, "sleep forever\n"));
        }
        run_ops(2, &threads, &[&format!("cost.flush_multi_ns={multi}")])
    };
    let remote = |s: &Sim| s.vmstat.ev[VmEvent::NR_TLB_REMOTE_FLUSH as usize];
    let (base, with) = (run(true, 0), run(true, 500));
    assert_eq!(remote(&base), 20, "two flushes per iteration (both mprotects change _PAGE_RW) past the sleeping thread's CPU");
    assert_eq!(shootdowns(&with), 0, "CPU 1 is lazy: no IPI");
    assert_eq!(with.cpus[0].stats.sys_ns - base.cpus[0].stats.sys_ns, 500 * remote(&base));
    let (alone, alone_with) = (run(false, 0), run(false, 500));
    assert_eq!(remote(&alone), 0);
    assert_eq!(alone_with.cpus[0].stats.sys_ns, alone.cpus[0].stats.sys_ns);
}

// ---------------------------------------------------------------- the x86 flush baseline

/// flush_tlb_mm_range(): up to tlb_single_page_flush_ceiling (33) pages are INVLPG'd one by one,
/// above it the whole ASID is flushed.
#[test]
fn single_page_flush_ceiling_decides_range_versus_full() {
    // One more full local flush comes from exit_mmap() when the process exits.
    for (pages, one, all) in [(33u64, 33u64, 1u64), (34, 0, 2)] {
        let ops = format!("mmap a {pages}\ntouch a write\nmunmap a\n");
        let sim = run_ops(2, &[(0, &ops)], &[]);
        let v = |e| sim.vmstat.get(e);
        use mmsim::mm::vmstat::VmEvent::*;
        assert_eq!((v(NR_TLB_LOCAL_FLUSH_ONE), v(NR_TLB_LOCAL_FLUSH_ALL)), (one, all), "{pages} pages");
    }
}

/// native_flush_tlb_multi(): a CPU running the mm gets the IPI; a lazy (idle) one is skipped and
/// catches up at switch_mm.
#[test]
fn lazy_cpus_are_skipped_and_catch_up_when_they_return() {
    let main = "mmap a 8\ntouch a write\nloop 10\nmprotect a r\nmprotect a rw\nend\n";
    let spin = run_ops(2, &[(0, main), (1, "spin forever")], &[]);
    assert_eq!(shootdowns(&spin), 20);
    let sleep = run_ops(2, &[(0, main), (1, "sleep forever")], &[]);
    assert_eq!(shootdowns(&sleep), 0);
    // The sleeper wakes after the flushes and must not see stale entries: it touched the pages
    // before sleeping (TLB filled), then after waking its TLB must match the page table.
    let sim = run_ops(2, &[(0, "sleep 50us\nmprotect a r\n"), (1, "mmap a 8\ntouch a write\nsleep 100us\ntouch a read\nspin forever\n")], &[]);
    assert_eq!(shootdowns(&sim), 0, "the flush happened while CPU 1 was lazy");
    assert_no_stale_entries(&sim);
}

/// No CPU that is up to date with an mm (its ASID's tlb_gen equals mm.tlb_gen) holds an entry
/// that disagrees with the page table: the invariant flush_tlb_func's early returns rely on.
fn assert_no_stale_entries(sim: &Sim) {
    for cpu in &sim.cpus {
        let st = &cpu.tlbstate;
        let Some(mm) = st.loaded_mm else { continue };
        if st.is_lazy {
            continue;
        }
        let Some(m) = sim.mms[mm.0 as usize].as_ref() else { continue };
        let asid = st.loaded_mm_asid;
        assert_eq!(st.ctxs[asid as usize].tlb_gen, m.tlb_gen, "cpu {} runs mm behind its generation", cpu.id);
        for e in cpu.tlb.entries() {
            if mmsim::hw::tlb::tag_asid(e.tag) != asid {
                continue;
            }
            let vpn = e.tag & ((1 << 39) - 1);
            let pte = m.pgtable.get(vpn);
            assert!(pte.present() && pte.pfn() == e.pfn, "cpu {}: stale entry for {:#x}", cpu.id, vpn << 12);
            if e.flags & mmsim::hw::tlb::F_WRITE != 0 {
                assert!(pte.write(), "cpu {}: writable entry for read-only pte {:#x}", cpu.id, vpn << 12);
            }
        }
    }
}

/// munmap frees page tables wholly inside the hole (free_pgtables floor/ceiling); then even lazy
/// CPUs are IPI'd (freed_tables), once: they switch to init_mm and the next flush trims them.
#[test]
fn freeing_page_tables_reaches_lazy_cpus() {
    // The region sits between two PROT_NONE neighbours, 2 MiB-aligned.
    let ops = |pages: u32| format!("mmap lo 512 prot=none at=0x7e0000000000\nmmap hi 512 prot=none at={:#x}\nmmap a {pages} at=0x7e0000200000\ntouch a write\nmunmap a\nsleep 1us\n", 0x7e0000200000u64 + (pages as u64) * 4096);
    let small = run_ops(2, &[(0, &ops(16)), (1, "sleep forever")], &[]);
    assert_eq!(shootdowns(&small), 0, "a PTE table shared with a neighbour stays");
    let big = run_ops(2, &[(0, &ops(512)), (1, "sleep forever")], &[]);
    assert_eq!(shootdowns(&big), 1, "the 2 MiB block's PTE table is freed: the lazy CPU is IPI'd");
    // Twice: the first request moves the lazy CPU to init_mm, the second trims it from the mask.
    let twice = format!("{}{}", ops(512), ops(512).lines().skip(2).collect::<Vec<_>>().join("\n"));
    let sim = run_ops(2, &[(0, &twice), (1, "sleep forever")], &[]);
    assert_eq!(shootdowns(&sim), 2);
    assert!(!sim.mms[0].as_ref().unwrap().cpumask.test(mmsim::types::CpuId(1)), "CPU 1 left the mask");
}

/// Validation cases whose figure follows from the kernel paths (see docs/host-findings.md).
#[test]
fn validation_cases_follow_the_kernel_paths() {
    let per_op = |op, pages, remote| mmsim::validate::sim::run(&Case { op, pages, iters: 20, remote }, 2).unwrap().0;
    assert_eq!(per_op(Op::Mprotect, 16, Remote::Spin), 2.0, "one flush per mprotect call");
    assert_eq!(per_op(Op::MadvDontneed, 1024, Remote::Spin), 1.0, "one mmu_gather flush");
    // Per PTE table t: flush_tlb_batched_pending() + one batch flush per 31 folios freed.
    assert_eq!(per_op(Op::MadvPageout, 16, Remote::Spin), 2.0);
    assert_eq!(per_op(Op::MadvPageout, 32, Remote::Spin), 3.0);
    assert_eq!(per_op(Op::MadvPageout, 512, Remote::Spin), 18.0);
    assert_eq!(per_op(Op::MadvPageout, 513, Remote::Spin), 20.0);
    assert_eq!(per_op(Op::ForkCow, 16, Remote::Spin), 17.0, "dup_mmap flush + one ptep_clear_flush per COW");
    // folio_mkclean(): one ptep_clear_flush per dirty page (the host: 1.000/page, docs/reclaim.md).
    assert_eq!(per_op(Op::Msync, 513, Remote::Spin), 513.0, "one flush per page written back");
    for op in Op::ALL {
        assert_eq!(per_op(op, 16, Remote::None), 0.0, "{op}: single-threaded mm, no IPI");
        assert_eq!(per_op(op, 16, Remote::Sleep), 0.0, "{op}: lazy CPU skipped");
    }
}

/// Scheduling: three unpinned CPU-bound threads on two CPUs. When one CPU runs out of work it
/// pulls the thread waiting on the other (idle balance), so the run takes about 1.5x one
/// thread's time rather than 2x.
#[test]
fn an_idle_cpu_pulls_waiting_work() {
    let origin = Origin { file: "<test>".into(), line: 1 };
    // About 6 ms of work each: longer than the 4 ms time slice, so the two threads sharing a
    // CPU alternate and one of them is waiting when the other CPU runs dry.
    let work = "mmap a 64\nloop 100000\ntouch a write\nend\n";
    let run = |n: usize| {
        let threads = (0..n).map(|i| ThreadSpec { process: i as u32, cpu: None, ops: work.into(), ops_origin: origin.clone() }).collect();
        let cfg = Config::with_threads(&["machine.cpus=2".into()], threads).unwrap();
        let mut sim = Sim::build(&cfg).unwrap();
        sim.run(|_| {});
        sim.end_ns as f64
    };
    let (one, three) = (run(1), run(3));
    assert!(three < 1.75 * one && three > 1.3 * one, "3 threads on 2 CPUs took {:.2}x one thread", three / one);
}

#[test]
fn time_accounting_adds_up() {
    let sim = run_ops(2, &[(0, "mmap a 64\nloop 50\ntouch a write\nmadvise a dontneed\nend\n"), (1, "spin forever")], &[]);
    let r = Report::from_sim(&sim, mmsim::run::Outcome::Completed);
    assert!(r.time.sys_ns > 0 && r.time.user_ns > 0);
    // CPU 1 spun for the whole run apart from its interrupts.
    let c1 = &sim.cpus[1].stats;
    assert!(c1.user_ns + c1.irq_ns >= sim.end_ns - 2_000, "{} + {} vs {}", c1.user_ns, c1.irq_ns, sim.end_ns);
    assert_eq!(c1.irq_tlb_count, 50);
}

// ---------------------------------------------------------------- memory pressure

fn readers(cpus: u32, file_pages: u64) -> Vec<String> {
    (0..cpus).map(|c| format!("mmap f {file_pages} file:r{c} sparse shared prot=r\ntouch f read\n")).collect()
}

fn run_procs(cpus: usize, progs: &[String], sets: &[&str]) -> Sim {
    let origin = Origin { file: "<test>".into(), line: 1 };
    let threads = progs.iter().enumerate().map(|(i, ops)| ThreadSpec { process: i as u32, cpu: Some(i as u32), ops: ops.clone(), ops_origin: origin.clone() }).collect();
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    sets.push(format!("machine.cpus={cpus}"));
    let cfg = Config::with_threads(&sets, threads).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    sim.run(|_| {});
    sim
}

/// Readers of mapped files totalling 10x RAM: kswapd and direct reclaim evict other readers'
/// pages; the batched unmap flush (seed 002) sends fewer IPIs than ptep_clear_flush per page.
#[test]
fn reclaim_of_mapped_file_pages_and_the_batched_flush() {
    let progs = readers(4, 10 * 32 * 256 / 4);
    let mut irqs = Vec::new();
    for b in ["off", "on"] {
        let sim = run_procs(4, &progs, &["machine.mem_per_node_mib=32", &format!("kernel.batched_unmap_flush={b}")]);
        assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
        use mmsim::mm::vmstat::VmEvent::*;
        let steal = sim.vmstat.get(PGSTEAL_KSWAPD) + sim.vmstat.get(PGSTEAL_DIRECT);
        assert!(steal > 7 * 32 * 256, "reclaimed {steal}");
        assert_eq!(sim.vmstat.get(OOM_KILL), 0);
        irqs.push(shootdowns(&sim));
    }
    assert!(irqs[1] * 2 < irqs[0], "batched {} vs per-page {}", irqs[1], irqs[0]);
}

/// The seed-002 reproduction at its quick scale (1/16, one seed per kernel): the parts of issue
/// 11's done criteria that the model meets: IRQs down >= 70% on the 4-node machine, and both
/// kernels' system time and elapsed time lower with the batched flush on both machines. The
/// per-page system time and the elapsed-gain bands are known misses, below.
#[test]
fn batched_flush_reproduction_meets_issue_11_irq_criteria() {
    use mmsim::reproduce::batched_flush::{run_all, MACHINES, QUICK_SCALE};
    // The quick look's 1/16 (the default, full scale, takes ≈16 min for one seed).
    let r = run_all(&MACHINES, 1, &[], QUICK_SCALE);
    let gain = |m: usize, f: fn(&mmsim::reproduce::batched_flush::RunResult) -> f64| {
        let (b, a) = (f(&r[m][0][0]), f(&r[m][1][0]));
        (b - a) / b
    };
    assert!(gain(0, |x| x.tlb_irqs_per_s) >= 0.70, "4-node IRQ reduction {}", gain(0, |x| x.tlb_irqs_per_s));
    for m in 0..2 {
        assert!(gain(m, |x| x.system_s) > 0.0 && gain(m, |x| x.elapsed_s) > 0.0, "machine {m}");
        // time_range and time_stddv are over the readers of one run, as mmtests takes them (not
        // over seeds: with one seed that would be 0).
        for x in [&r[m][0][0], &r[m][1][0]] {
            assert!(x.reader_range_s > 0.0 && x.reader_stddev_s > 0.0 && x.reader_stddev_s <= x.reader_range_s, "machine {m}: {x:?}");
            assert!(x.reader_range_s < x.elapsed_s, "machine {m}: range {} of elapsed {}", x.reader_range_s, x.elapsed_s);
            // "System" is mmtests' (the readers' time under /usr/bin/time): kswapd, which
            // reclaims on every node here, is busy but not in it.
            let kthreads = x.busy_s - x.user_s - x.system_s;
            assert!(x.system_s > 0.0 && kthreads > 0.005 * x.system_s, "machine {m}: system {} of busy-but-user {}", x.system_s, x.busy_s - x.user_s);
        }
    }
}

/// KNOWN MISSES (issue 11, docs/reclaim.md): published, 24.4% elapsed gain on the 4-node
/// machine (band 14-34%), 19.5% on one socket (band 10-29%), the single socket's below the
/// 4-node's, and 34.6 us of system time per reclaimed page before the patch on the 4-node
/// machine (within 2x). The model gives, at 1/16 with one seed (session 37, 2026-11-29),
/// 25.8% and 33.2% (the single socket's above its band and 7.4 points above the 4-node's) and
/// 12.4 us per page: the seed's 4-socket machine spent ~2.8x more system time per page, ~13x
/// its single socket's, and the model ~1.8x. At full scale with 3 seeds (session 37): 27.08%
/// and 22.11%, both in their bands, the single socket's below the 4-node's in every seed, but
/// 14.9 us per page (17.3 needed; 14.2 since session 40, which counts System as mmtests does,
/// without kswapd; 12.8 since session 41, per page read as the seed's figure is, not per page
/// reclaimed). Session 41 gave the single socket the 8 GB of the seed's v5 posting (it had 16):
/// at full scale its gain is 25.8%, still below the 4-node's 27.1% in every seed, and its
/// system time per page read 5.95 us against the seed's 5.33. Kept, ignored, until the missing
/// mechanism is found:
/// `cargo test --release -- --ignored elapsed_gains`.
#[test]
#[ignore = "known miss of the model, issue 11: at 1/16 the single-socket elapsed gain (above its band and the 4-node gain) and the 4-node time per page"]
fn batched_flush_elapsed_gains_are_in_their_bands() {
    use mmsim::reproduce::batched_flush::{run_all, MACHINES, QUICK_SCALE};
    // The quick look's 1/16 (the default, full scale, takes ≈16 min for one seed).
    let r = run_all(&MACHINES, 1, &[], QUICK_SCALE);
    let gain = |m: usize| (r[m][0][0].elapsed_s - r[m][1][0].elapsed_s) / r[m][0][0].elapsed_s;
    assert!((0.14..=0.34).contains(&gain(0)), "4-node elapsed gain {} outside 14-34%", gain(0));
    assert!((0.10..=0.29).contains(&gain(1)), "single-socket elapsed gain {} outside 10-29%", gain(1));
    assert!(gain(1) < gain(0), "single-socket gain {} should be below the 4-node gain {}", gain(1), gain(0));
    let before = &r[0][0][0];
    // The seed's 34.6 us is its System over the pages read (10 x MemTotal); the same here.
    let us_per_page = before.system_s / (10.0 * MACHINES[0].mem_gib as f64 * 262144.0) * 1e6;
    assert!((34.6 / 2.0..=34.6 * 2.0).contains(&us_per_page), "4-node system us per page read before: {us_per_page}");
}

/// Readers that reach the min watermark together reclaim together: a fault's direct reclaim
/// runs one shrink_inactive_list() batch per step and the access is replayed after it, so
/// between one CPU's mm_vmscan_direct_reclaim_begin and _end (the trace is in the order the
/// model ran things) other CPUs' events appear. When direct reclaim was one atomic step,
/// each begin..end was contiguous, and the first reclaimer to meet a list of young folios
/// rotated it alone.
#[test]
fn direct_reclaimers_interleave_their_batches() {
    let d = tmpdir("direct-steps");
    let mut sc = String::from("[run]\nseed = 1\n[machine]\ncpus = 4\nnodes = 1\nmem_per_node_mib = 64\n[kernel]\npreset = \"linux-4.2\"\n");
    for cpu in 0..4 {
        sc += &format!("[[workload.thread]]\nprocess = {cpu}\ncpu = {cpu}\nops = \"\"\"\nmmap f 12288 file:r{cpu} sparse shared prot=r\ntouch f read\n\"\"\"\n");
    }
    let path = d.path().join("d.toml");
    std::fs::write(&path, sc).unwrap();
    let tr = d.path().join("d.trace");
    let o = mmsim().args(["run", path.to_str().unwrap(), "--trace", tr.to_str().unwrap(), "--events", "vmscan:*,exceptions:*", "--only", "summary"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&tr).unwrap();
    let cpu_of = |l: &str| l.split('[').nth(1).and_then(|r| r.split(']').next()).and_then(|c| c.trim().parse::<u32>().ok());
    let lines: Vec<(u32, &str)> = text.lines().filter_map(|l| Some((cpu_of(l)?, l))).collect();
    let (mut calls, mut interleaved) = (0, 0);
    let mut open: std::collections::HashMap<u32, bool> = Default::default();
    for &(cpu, l) in &lines {
        if l.contains("mm_vmscan_direct_reclaim_begin") {
            assert!(open.insert(cpu, false).is_none(), "nested direct reclaim on CPU {cpu}");
        } else if l.contains("mm_vmscan_direct_reclaim_end") {
            calls += 1;
            interleaved += open.remove(&cpu).expect("an end after a begin") as u32;
        }
        for (&c, seen) in open.iter_mut() {
            *seen |= c != cpu;
        }
    }
    assert!(calls > 10, "direct reclaim ran {calls} times");
    assert!(interleaved * 4 > calls, "{interleaved} of {calls} direct reclaims saw another CPU's events in between");
}

/// kswapd's scan control as balance_pgdat() does it (4.2 to 6.18), seen in its
/// mm_vmscan_lru_shrink_inactive events: each list's target is `size >> priority` with no
/// SWAP_CLUSTER_MAX floor (the first batch at DEF_PRIORITY takes a few pages of a ~12,000-page
/// list); a pass that scans fewer than `nr_to_reclaim` = the high watermark raises the priority
/// by one; and a run goes on past the high watermark until a pass has reclaimed that much
/// (vm.watermark_scale_factor=1000 puts the high watermark at ~3,500 pages of 16,384, ~1,600
/// above low, where the old model stopped).
#[test]
fn kswapd_passes_follow_balance_pgdat() {
    let d = tmpdir("kswapd");
    let mut ops = String::new();
    for i in 0..6 {
        ops += &format!("mmap r{i} 4096 file:f{i} sparse shared prot=r\ntouch r{i} read\nsleep 20ms\n");
    }
    let sc = d.path().join("k.toml");
    std::fs::write(&sc, format!("[machine]\ncpus = 2\nnodes = 1\nmem_per_node_mib = 64\n[vm]\nwatermark_scale_factor = 1000\n[kernel]\npreset = \"linux-6.18\"\n[[workload.thread]]\ncpu = 0\nops = \"\"\"\n{ops}\"\"\"\n")).unwrap();
    let tr = d.path().join("k.trace");
    let o = mmsim().args(["run", sc.to_str().unwrap(), "--trace", tr.to_str().unwrap(), "--events", "vmscan:mm_vmscan_lru_shrink_inactive", "--only", "summary"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let field = |l: &str, k: &str| l.split_whitespace().find_map(|w| w.strip_prefix(k)).unwrap().parse::<u64>().unwrap();
    let ev: Vec<(u64, u64)> = std::fs::read_to_string(&tr).unwrap().lines().filter(|l| l.contains("kswapd") && l.contains("shrink_inactive")).map(|l| (field(l, "priority="), field(l, "nr_scanned="))).collect();
    assert!(!ev.is_empty());
    // The first run: up to the next event back at DEF_PRIORITY after a lower one.
    let end = ev.iter().skip(1).position(|&(p, _)| p == 12).map_or(ev.len(), |i| i + 1);
    let run = &ev[..end];
    assert_eq!(run[0].0, 12);
    assert!(run[0].1 < 32, "no SWAP_CLUSTER_MAX floor at DEF_PRIORITY: {:?}", &run[..4.min(run.len())]);
    assert!(run.windows(2).all(|w| w[1].0 == w[0].0 || w[1].0 + 1 == w[0].0), "the priority drops one step at a time: {run:?}");
    assert!(run.last().unwrap().0 <= 8, "passes that scan less than the high watermark raise the priority: {run:?}");
    let scanned: u64 = run.iter().map(|e| e.1).sum();
    assert!(scanned >= 3400, "a run reclaims a high watermark's worth, not just up to it: {scanned}");
}

/// migrate_pages_batch() (6.3+): 512 pages moved to the other node with one flush IPI to the
/// CPU running the mm, against one per page with ptep_clear_flush; the data stays mapped.
#[test]
fn migration_batches_its_flush() {
    let main = "mmap a 512\ntouch a write\nmigrate a 1\ntouch a read\n";
    let mut irqs = Vec::new();
    for b in ["on", "off"] {
        let sim = run_ops(2, &[(0, main), (1, "spin forever")], &["machine.nodes=2", &format!("kernel.migrate_batch_flush={b}")]);
        assert_eq!(sim.vmstat.get(mmsim::mm::vmstat::VmEvent::PGMIGRATE_SUCCESS), 512);
        // Every page of the region is now on node 1.
        let m = sim.mms.iter().flatten().next().unwrap();
        let (start, _) = m.regions["a"];
        for v in start..start + 512 {
            assert_eq!(sim.pfn_node(m.pgtable.get(v).pfn()), mmsim::types::NodeId(1));
        }
        irqs.push(shootdowns(&sim));
    }
    assert_eq!(irqs, vec![1, 512]);
}

/// With a swap device, anonymous memory beyond RAM is swapped out by reclaim and read back on
/// the next touch (do_swap_page); no OOM, and the swap slots are all free again at the end.
#[test]
fn anon_memory_beyond_ram_swaps() {
    let sim = run_procs(2, &["mmap a 12000\ntouch a write\ntouch a read\nmunmap a\n".to_string()], &["machine.mem_per_node_mib=32", "machine.swap_mib=64"]);
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    use mmsim::mm::vmstat::VmEvent::*;
    assert_eq!(sim.vmstat.get(OOM_KILL), 0);
    assert!(sim.vmstat.get(PSWPOUT) > 3000, "pswpout {}", sim.vmstat.get(PSWPOUT));
    assert!(sim.vmstat.get(PSWPIN) > 3000, "pswpin {}", sim.vmstat.get(PSWPIN));
    assert_eq!(sim.swap.nr_free(), sim.swap.total(), "munmap freed every slot");
}

/// Anonymous memory beyond RAM with no swap ends in an OOM event, never in a crash.
#[test]
fn oom_is_an_event() {
    let sim = run_procs(2, &["mmap a 20000\ntouch a write\n".to_string()], &["machine.mem_per_node_mib=32"]);
    assert_eq!(sim.vmstat.get(mmsim::mm::vmstat::VmEvent::OOM_KILL), 1);
    assert!(sim.workload_errors[0].contains("OOM"), "{:?}", sim.workload_errors);
}

// ---------------------------------------------------------------- reproduce all

#[test]
fn reproduce_all_summarises_each_experiment_against_its_issues_bands() {
    let d = tmpdir("all");
    let j = d.path().join("all.json");
    let o = mmsim().args(["reproduce", "all", "--only", "vmacache,hvo", "--scale", "100", "--json", j.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    // all's order, whatever --only's: hvo before vmacache, each printed as its own command does.
    let (h, v) = (text.find("==== mmsim reproduce hvo").expect("hvo ran"), text.find("==== mmsim reproduce vmacache").expect("vmacache ran"));
    assert!(h < v && text.contains("HugeTLB: 28 KiB vmemmap can be freed") && text.contains("ebizzy"), "{text}");
    assert!(text.contains("== Summary: 13 of 13 headline figures within their bands =="), "{text}");
    let all: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(all["experiment"], "all");
    let exps = all["experiments"].as_array().unwrap();
    assert_eq!(exps.iter().map(|e| e["experiment"].as_str().unwrap()).collect::<Vec<_>>(), ["hvo", "vmacache"]);
    let rows = all["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 13);
    // A summary row is the experiment's own figure: mainline frees 7 vmemmap pages per 2 MiB page,
    // and ebizzy's per-thread hit rate is the vmacache table's.
    let row = |m: &str| rows.iter().find(|r| r["metric"] == m).unwrap_or_else(|| panic!("{m}"));
    assert_eq!(row("mainline vmemmap_pages_freed_per_2m")["simulated"], 7.0);
    assert_eq!(row("mainline vmemmap_pages_freed_per_2m")["band"], serde_json::json!({"kind": "exact", "v": 7.0}));
    let ebizzy = exps[1]["rows"].as_array().unwrap().iter().find(|r| r["workload"] == "ebizzy" && r["metric"] == "hit_rate_pct").unwrap();
    assert_eq!(row("ebizzy hit rate %, per-thread")["simulated"], ebizzy["simulated"]["after"]);
    assert!(rows.iter().all(|r| r["agrees"] == true && r["source"].as_str().unwrap().starts_with("issue") || r["source"] == "seed 004"));
    // Options that belong to one experiment are refused with `all`, and --only names experiments.
    for bad in [&["reproduce", "all", "--set", "cost.ipi_send_ns=1"][..], &["reproduce", "all", "--only", "flush-alternatives"], &["reproduce", "hvo", "--only", "hvo"]] {
        let o = mmsim().args(bad).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}

// ---------------------------------------------------------------- agreement with the host

/// `mmsim validate` over the whole matrix against this machine's kernel. Skipped (with a
/// message) where the host cannot measure: not Linux, one CPU, or no TLB line.
#[test]
fn validate_agrees_with_the_host_kernel() {
    if let Err(e) = mmsim::validate::host::probe() {
        eprintln!("skipped: this host cannot be measured: {e}");
        return;
    }
    let d = tmpdir("validate");
    let json = d.path().join("v.json");
    let o = mmsim().arg("validate").arg("--json").arg(&json).output().unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    eprintln!("{table}");
    assert!(o.status.success(), "validate disagrees (exit {:?}):\n{table}\n{}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), mmsim::validate::matrix().len());
    // A case whose host repeats all lost CPU 1 (or disagreed with each other) after
    // re-measuring is "host too noisy": skipped here, with a message. Every other case must
    // agree, so a model that disagrees with a quiet host still fails.
    for c in cases.iter().filter(|c| c["host_noisy"] == true) {
        eprintln!("skipped (host too noisy): {} {} pages remote {}", c["op"], c["pages"], c["remote"]);
    }
    assert!(cases.iter().filter(|c| c["host_noisy"] != true).all(|c| c["agree"] == true));
    assert!(cases.iter().all(|c| c["host_ns_per_op"].as_f64().is_some_and(|x| x > 0.0) && c["sim_ns_per_op"].as_f64().is_some_and(|x| x > 0.0)));
}
