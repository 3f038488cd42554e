//! Locks, interrupts-off sections, lock_stat and the profile (docs/locking.md).

use mmsim::report::Report;
use mmsim::run::Outcome;
use mmsim::sim::Sim;

fn run_path(path: &str, sets: &[&str]) -> (Sim, Outcome) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let cfg = mmsim::config::load(std::path::Path::new(path), &sets).expect("the scenario loads");
    let mut sim = Sim::build(&cfg).expect("builds");
    let out = sim.run(|_| {});
    (sim, out)
}

fn contentions(r: &Report, class: &str) -> u64 {
    r.lock_stat.iter().find(|l| l.class == class).map_or(0, |l| l.stat.contentions)
}

fn children(r: &Report, symbol: &str) -> u64 {
    r.profile.iter().find(|p| p.symbol == symbol).map_or(0, |p| p.children_ns)
}

/// `--only lock_stat` and `--only profile` work on every shipped scenario.
#[test]
fn lock_stat_and_profile_on_every_shipped_scenario() {
    let mut names: Vec<_> = std::fs::read_dir("scenarios").unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "toml")).collect();
    names.sort();
    assert!(names.len() >= 5);
    for p in names {
        let (sim, out) = run_path(p.to_str().unwrap(), &[]);
        let r = Report::from_sim(&sim, out);
        let ls = r.proc_lock_stat();
        assert!(ls.starts_with("lock_stat version 0.4\n"), "{}: {ls}", p.display());
        let prof = r.profile_report();
        assert!(prof.contains("# Children      Self"), "{}", p.display());
        // The profile accounts for all busy time: children of the roots add up to it.
        let busy: u64 = sim.cpus.iter().map(|c| c.stats.user_ns + c.stats.sys_ns + c.stats.irq_ns).sum();
        let selfs: u64 = r.profile.iter().map(|p| p.self_ns).sum();
        assert_eq!(selfs, busy, "{}: self times must add up to busy time", p.display());
    }
}

#[test]
fn the_cli_prints_lock_stat_and_profile() {
    for (only, head) in [("lock_stat", "lock_stat version 0.4"), ("profile", "# Simulated profile")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mmsim")).args(["run", "scenarios/munmap-storm.toml", "--only", only]).output().unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).starts_with(head));
    }
}

/// Eight readers on two sockets contend for the LRU and zone locks; one reader on one CPU never
/// waits (its kswapd runs on the same CPU, one step at a time).
#[test]
fn reclaim_contends_on_many_cpus_and_not_on_one() {
    let (sim, out) = run_path("scenarios/lru-file-mmap-read.toml", &[]);
    assert_eq!(out, Outcome::Completed);
    let r = Report::from_sim(&sim, out);
    assert!(contentions(&r, "&zone->lru_lock") > 0, "{:?}", r.lock_stat);
    assert!(children(&r, "native_queued_spin_lock_slowpath") > 0);
    // Every contention has a contention point (the waiter's function) and a contending point
    // (the function of the hold it waited for); reclaim's isolation and the fault's LRU
    // insertion both contend on the LRU lock, and /proc/lock_stat prints them under it.
    for l in &r.lock_stat {
        let sum = |v: &[mmsim::report::lock_stat::LockPoint]| v.iter().map(|p| p.contentions).sum::<u64>();
        assert_eq!(sum(&l.contention_points), l.stat.contentions, "{}", l.class);
        assert_eq!(sum(&l.contending_points), l.stat.contentions, "{}", l.class);
    }
    let lru = r.lock_stat.iter().find(|l| l.class == "&zone->lru_lock").unwrap();
    let sites: Vec<&str> = lru.contention_points.iter().map(|p| p.symbol.as_str()).collect();
    assert!(sites.contains(&"shrink_inactive_list") && sites.contains(&"folio_batch_move_lru"), "{sites:?}");
    let text = r.proc_lock_stat();
    assert!(text.contains("&zone->lru_lock         ") && text.contains("[<0000000000000000>] shrink_inactive_list"), "{text}");
    let one = "[run]\nseed = 1\n[machine]\ncpus = 1\nmem_per_node_mib = 64\n[kernel]\npreset = \"linux-4.2\"\n[[workload.thread]]\ncpu = 0\nops = \"\"\"\nmmap f 40960 file:r sparse shared prot=r\ntouch f read\n\"\"\"\n";
    let cfg = mmsim::config::load_str("one.toml", one, &[]).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    let out = sim.run(|_| {});
    let r = Report::from_sim(&sim, out);
    assert!(r.counters["pgsteal_kswapd"] + r.counters["pgsteal_direct"] > 0, "the single reader is reclaimed");
    assert!(r.lock_stat.iter().all(|l| l.stat.contentions == 0), "{:?}", r.lock_stat);
    assert_eq!(children(&r, "native_queued_spin_lock_slowpath"), 0);
}

/// The lock model changes times, not what the kernel does: switched off, the same run gives
/// the same page and reclaim counts, and it is slower with it on (waits add time). Without
/// readahead: with it, whether reclaim takes a read-ahead page before its reader reaches it
/// depends on timing, as in Linux, so the fault count may differ.
#[test]
fn the_lock_model_adds_waits_not_behaviour() {
    let (on, _) = run_path("scenarios/lru-file-mmap-read.toml", &["vm.read_ahead_kb=0"]);
    let (off, _) = run_path("scenarios/lru-file-mmap-read.toml", &["kernel.lock_model=false", "vm.read_ahead_kb=0"]);
    use mmsim::mm::vmstat::VmEvent;
    assert_eq!(on.vmstat.get(VmEvent::PGFAULT), off.vmstat.get(VmEvent::PGFAULT));
    let sys = |s: &Sim| s.cpus.iter().map(|c| c.stats.sys_ns).sum::<u64>();
    assert!(sys(&on) > sys(&off), "on {} off {}", sys(&on), sys(&off));
    assert!(off.locks.stats.iter().all(|s| s.total().acquisitions == 0));
}

#[test]
fn runs_with_locks_are_byte_identical() {
    let a = Report::from_sim(&run_path("scenarios/lru-file-mmap-read.toml", &[]).0, Outcome::Completed);
    let b = Report::from_sim(&run_path("scenarios/lru-file-mmap-read.toml", &[]).0, Outcome::Completed);
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

/// One reader pinned to CPU 0 of a two-CPU machine streams a file three times memory: kswapd,
/// woken by its allocations, runs on the idle CPU 1 and does most of the reclaim (on this
/// development host's Linux 6.18, the same experiment: 3.43 M pages by kswapd, 80 by direct
/// reclaim, docs/host-findings.md §8.5). Until 2026-11-27 the event loop let a CPU running
/// alone go on past an event it had just queued, so kswapd never ran and the reader did all
/// the reclaim itself.
#[test]
fn kswapd_reclaims_on_the_idle_cpu_beside_a_lone_reader() {
    let one = "[machine]\ncpus = 2\nmem_per_node_mib = 256\n[kernel]\npreset = \"linux-6.18\"\n[[workload.thread]]\ncpu = 0\nops = \"\"\"\nmmap f 196608 file:r sparse shared prot=r\ntouch f read\n\"\"\"\n";
    let cfg = mmsim::config::load_str("one.toml", one, &[]).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    let out = sim.run(|_| {});
    assert_eq!(out, Outcome::Completed);
    let r = Report::from_sim(&sim, out);
    let (k, d) = (r.counters["pgsteal_kswapd"], r.counters["pgsteal_direct"]);
    assert!(k > 4 * d && k > 100_000, "kswapd {k}, direct {d}");
    assert!(sim.cpus[1].stats.sys_ns > 0, "kswapd's time is on CPU 1");
}
