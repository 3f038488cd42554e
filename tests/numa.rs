//! NUMA balancing (mechanisms.md §2): the scanner, hint faults, migration towards the faulting
//! node, and seed 001's delayed mapping. Runs scenarios/numa-hint-faults.toml: thread 0 on
//! node 0 fills a buffer that a thread on node 1 then uses, while two more threads of the
//! process run on node 1.

mod common;

use mmsim::kernel::locking::LockClass;
use mmsim::mm::vmstat::VmEvent;
use mmsim::sim::Sim;

fn run(sets: &[&str], oracle: bool) -> Sim {
    common::run_scenario("scenarios/numa-hint-faults.toml", sets, oracle)
}

fn irqs(sim: &Sim) -> u64 {
    sim.cpus.iter().map(|c| c.stats.irq_tlb_count).sum()
}

/// Pages of thread 0's buffer on each node.
fn buf_nodes(sim: &Sim) -> [u64; 2] {
    let mm = sim.tasks.iter().find_map(|t| t.mm).expect("a user task");
    let (start, pages) = sim.mm(mm).regions["buf"];
    let mut n = [0; 2];
    sim.mm(mm).pgtable.for_each_mapped(start, start + pages, |_, p| {
        if p.mapped() {
            n[sim.pfn_node(p.pfn()).0 as usize] += 1;
        }
    });
    n
}

#[test]
fn off_means_no_scan_and_no_hint_fault() {
    let sim = run(&["kernel.numa_balancing=0"], false);
    for e in [VmEvent::NUMA_PTE_UPDATES, VmEvent::NUMA_HINT_FAULTS, VmEvent::NUMA_PAGES_MIGRATED] {
        assert_eq!(sim.vmstat.get(e), 0, "{e:?}");
    }
    assert_eq!(buf_nodes(&sim), [2048, 0]);
}

#[test]
fn hint_faults_move_the_buffer_to_the_node_that_uses_it() {
    let sim = run(&[], false);
    let v = |e| sim.vmstat.get(e);
    assert!(v(VmEvent::NUMA_PTE_UPDATES) >= 2048, "the scanner hinted every page: {}", v(VmEvent::NUMA_PTE_UPDATES));
    assert!(v(VmEvent::NUMA_HINT_FAULTS) >= v(VmEvent::NUMA_PAGES_MIGRATED));
    assert!(v(VmEvent::NUMA_HINT_FAULTS_LOCAL) < v(VmEvent::NUMA_HINT_FAULTS));
    assert_eq!(v(VmEvent::NUMA_PAGES_MIGRATED), v(VmEvent::PGMIGRATE_SUCCESS));
    let [n0, n1] = buf_nodes(&sim);
    assert!(n1 > 3 * n0, "most of the buffer moved to node 1: {n0} / {n1}");
}

#[test]
fn delayed_mapping_migrates_without_shootdowns() {
    // Seed 001: the same migrations, but the unmap of a PROT_NONE PTE needs no shootdown.
    let on = run(&["kernel.numa_delayed_map=on"], false);
    let off = run(&["kernel.numa_delayed_map=off"], false);
    let migrated = |s: &Sim| s.vmstat.get(VmEvent::NUMA_PAGES_MIGRATED);
    assert!(migrated(&on) > 1000 && migrated(&off) > 1000);
    assert!(irqs(&on) + migrated(&on) / 2 < irqs(&off), "delayed {} vs restore-first {} IRQs", irqs(&on), irqs(&off));
    // Nearly all of the restore-first order's IRQs are the migrations' shootdowns.
    assert!(irqs(&on) * 100 < irqs(&off), "delayed {} vs restore-first {} IRQs", irqs(&on), irqs(&off));
}

#[test]
fn batched_migration_adds_inaccessible_ptes_to_the_batch_before_6_4() {
    // 6.3 batched migration's unmap without commit 4d4b6d66db adds every PROT_NONE PTE's CPUs to
    // the flush batch; 6.4 skips them.
    let v63 = run(&["kernel.preset=\"linux-6.3\""], false);
    let v64 = run(&["kernel.preset=\"linux-6.4\""], false);
    assert!(irqs(&v64) < irqs(&v63), "6.4 {} vs 6.3 {}", irqs(&v64), irqs(&v63));
}

#[test]
fn the_oracle_finds_numa_balancing_safe_in_both_orders() {
    for m in ["on", "off"] {
        let mut sim = run(&[&format!("kernel.numa_delayed_map={m}")], true);
        let o = sim.oracle.take().unwrap();
        assert!(o.violations.is_empty(), "numa_delayed_map={m}: {:?}", o.violations);
        assert!(o.marks.get("numa hint fault").copied().unwrap_or(0) > 1000);
    }
}


/// Issue 10 item 6: scenarios/numa-hint-faults.toml without its two spinning threads — thread 0
/// fills the buffer on CPU 0 and sleeps for ever, a thread on CPU 4 uses it.
fn run_lazy(sets: &[&str]) -> Sim {
    let text = std::fs::read_to_string("scenarios/numa-hint-faults.toml").expect("the shipped scenario");
    let cut = text.find("[[workload.thread]]\ncpu = 5").expect("the first spinning thread");
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let cfg = mmsim::config::load_str("numa-lazy.toml", &text[..cut], &sets).expect("loads");
    let mut sim = Sim::build(&cfg).expect("builds");
    sim.enable_oracle();
    sim.run(|_| {});
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    let o = sim.oracle.as_ref().unwrap();
    assert!(o.violations.is_empty(), "{:?}", o.violations);
    sim
}

#[test]
fn lazy_cpu_case_follows_6_18_should_flush_tlb() {
    // docs/numa.md "The lazy CPU (issue 10 item 6)": with the pre-5.13 order (PTE mapped before
    // the migration), the batched migration flushes are arch_tlbbatch_flush()es with mm = NULL.
    // CPU 0 goes lazy when its thread sleeps, is switched to init_mm by the first flush_tlb_mm()
    // (freed_tables: sent to lazy CPUs too) that flush_tlb_batched_pending() issues from the
    // scanner, and is then neither lazy nor removed from mm_cpumask (6.14+, commit
    // 209954cbc7d0), so should_flush_tlb() returns true for it (`if (!info->mm) return true;`)
    // until a flush carrying the mm reaches it. Before 6.14 the switch to init_mm cleared it.
    let cpu0 = |s: &Sim| s.cpus[0].stats.irq_tlb_count;
    let migrated = |s: &Sim| s.vmstat.get(VmEvent::NUMA_PAGES_MIGRATED);
    let v618 = run_lazy(&["kernel.numa_delayed_map=off"]);
    let v612 = run_lazy(&["kernel.numa_delayed_map=off", "kernel.preset=\"linux-6.12\""]);
    let delayed = run_lazy(&[]);
    assert!(migrated(&v618) > 2000 && migrated(&v612) > 2000 && migrated(&delayed) > 2000);
    // 6.18: a large share of the migration batches reach CPU 0 (1023 of 2046 today).
    assert!(cpu0(&v618) * 4 > migrated(&v618), "6.18: CPU 0 got {} IRQs for {} migrations", cpu0(&v618), migrated(&v618));
    // 6.12: the lazy CPU got one flush (the freed-tables one) and left mm_cpumask.
    assert!(cpu0(&v612) <= 2, "6.12: CPU 0 got {} IRQs", cpu0(&v612));
    // With delayed mapping (6.18's default) the PROT_NONE unmaps add nothing to the batch.
    assert!(cpu0(&delayed) <= 2, "delayed mapping: CPU 0 got {} IRQs", cpu0(&delayed));
    // Only CPU 0 (the sleeping thread's) and no CPU outside the mm receives them.
    assert!((1..8).filter(|&c| c != 4).all(|c| v618.cpus[c].stats.irq_tlb_count == 0));
}

/// Migration's unmap and remap walk the rmap as try_to_unmap() does: the anon_vma's rwsem for
/// read around each walk (try_to_migrate() and remove_migration_ptes(): two per migrated page),
/// and each PTE under its table's lock, which before 5.13 is held while ptep_clear_flush() waits
/// for its shootdown IPIs.
#[test]
fn migration_walks_the_rmap_under_the_anon_vma_and_pte_locks() {
    let v512 = run(&["kernel.preset=\"linux-5.12\""], false);
    let migrated = v512.vmstat.get(VmEvent::PGMIGRATE_SUCCESS);
    assert!(migrated > 1000, "{migrated} migrations");
    let class = |s: &Sim, c: LockClass| s.locks.stats[c as usize];
    let av = class(&v512, LockClass::AnonVmaRwsem);
    // Nothing else in this scenario walks an anon rmap (no reclaim).
    assert_eq!(av.read.acquisitions, 2 * migrated, "anon_vma rwsem read {} times for {migrated} migrations", av.read.acquisitions);
    let ptl = class(&v512, LockClass::Ptl);
    let deliver = v512.p.ipi_deliver_ns as u64;
    assert!(ptl.write.holdtime_max >= deliver, "the PTE lock's longest hold {} ns is shorter than an IPI's delivery {deliver} ns", ptl.write.holdtime_max);
}
