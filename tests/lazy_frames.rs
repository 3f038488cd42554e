//! Lazy frames (issue 13, docs/performance.md item 33): the MAX_PAGE_ORDER blocks boot frees
//! are not written into the frame table until they are allocated (mm/page_alloc.rs
//! `FreeArea`). That is a change of representation only. Every shipped scenario, and a
//! boot-time 1 GiB HugeTLB reservation (alloc_contig_pages(), which writes them all mid-run),
//! must give the same clocks, counters and vmstat as a run whose free lists were all written
//! at boot (`Sim::materialize_free_lists()` right after `Sim::build`: the representation every
//! run had before); and memory nobody allocates must stay unwritten.

use mmsim::config::Config;
use mmsim::sim::Sim;

fn outcome(sim: &Sim) -> String {
    let cpus: Vec<String> = sim.cpus.iter().map(|c| format!("{} {:?}", c.clock, c.stats)).collect();
    format!("end {}\n{}\n{:?}", sim.end_ns, cpus.join("\n"), sim.vmstat)
}

fn run(cfg: &Config, eager: bool) -> (String, u64) {
    let mut sim = Sim::build(cfg).expect("builds");
    if eager {
        sim.materialize_free_lists();
        assert_eq!(sim.frames_written(), sim.frames.len() as u64);
    }
    sim.run(|_| {});
    (outcome(&sim), sim.frames_written())
}

#[test]
fn every_shipped_scenario_runs_the_same_with_lazy_and_eager_free_lists() {
    let mut dir: Vec<_> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    dir.sort();
    assert!(dir.len() >= 10, "the shipped scenarios: {dir:?}");
    let mut some_unwritten = false;
    for path in &dir {
        let cfg = mmsim::config::load(path, &[]).unwrap();
        let (lazy, written) = run(&cfg, false);
        let (eager, _) = run(&cfg, true);
        assert_eq!(lazy, eager, "{}", path.display());
        some_unwritten |= written < Sim::build(&cfg).unwrap().frames.len() as u64;
    }
    assert!(some_unwritten, "no shipped scenario left a pristine block: the test compares nothing");
}

#[test]
fn a_boot_time_1g_reservation_writes_the_free_lists_and_changes_nothing() {
    let cfg = Config::defaults(&[
        "workload.kind=synthetic".into(),
        "machine.cpus=2".into(),
        "machine.nodes=2".into(),
        "machine.mem_per_node_mib=2560".into(),
        "kernel.hugepages_1g=2".into(),
        "workload.working_set_mib=64".into(),
        "workload.accesses_per_thread=20000".into(),
    ])
    .unwrap();
    let (lazy, written) = run(&cfg, false);
    let (eager, _) = run(&cfg, true);
    assert_eq!(lazy, eager);
    assert_eq!(written, 2 * 2560 * 256, "alloc_contig_pages() wrote every pristine block");
}

#[test]
fn memory_nobody_allocates_is_never_written() {
    // 64 GiB on one node, a 16 MiB working set: boot allocates the vmemmap (the struct pages:
    // 64 bytes per 4 KiB page, 1/64 of memory, as vmemmap_populate() does), and the run
    // writes the blocks it allocates from the top down.
    let cfg = Config::defaults(&[
        "workload.kind=synthetic".into(),
        "machine.cpus=2".into(),
        "machine.mem_per_node_mib=65536".into(),
        "workload.working_set_mib=16".into(),
        "workload.accesses_per_thread=10000".into(),
    ])
    .unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    sim.run(|_| {});
    let total = sim.frames.len() as u64;
    let written = sim.frames_written();
    assert!(written > 16 * 256, "the working set's frames are written: {written}");
    let vmemmap = total / 64;
    assert!(written < vmemmap + 64 * 256, "{written} of {total} frames written for a 16 MiB working set and a {vmemmap}-page vmemmap");
    // The census and the free-page counts see the pristine blocks as free pages.
    let c = sim.hugetlb_check().unwrap();
    assert_eq!(c.free + c.other + c.hugetlb + c.vmemmap, total);
    assert!(c.free >= total - written);
    // Writing them changes no count.
    let free = sim.nr_free_pages();
    sim.materialize_free_lists();
    assert_eq!(sim.frames_written(), total);
    assert_eq!(sim.nr_free_pages(), free);
    assert_eq!(sim.hugetlb_check().unwrap().free, c.free);
}
