//! The structural checkers of `mmsim check` (issue 6, src/check/structural.rs): a model left
//! consistent by the shipped policies passes them, and each deliberate corruption of its state
//! is reported by the checker named in the detail. Run with
//! `cargo test --release --test structural`.

use mmsim::check::swarm::run_seed;
use mmsim::check::{Class, Inject};
use mmsim::config::{Config, Origin, ThreadSpec};
use mmsim::hw::tlb::{tag_asid, F_DIRTY, F_WRITE};
use mmsim::mm::hugetlb::{HSTATE_1G, HSTATE_2M};
use mmsim::mm::pgtable::Pte;
use mmsim::sim::{pg, Sim};
use mmsim::types::*;

/// Build and run op programs (process, cpu, ops) with the oracle on; the finished sim's mms are
/// kept alive by `spin forever` / `sleep forever` at the end of each program.
fn run(cpus: usize, threads: &[(u32, u32, &str)], sets: &[&str]) -> Sim {
    let origin = Origin { file: "<structural test>".into(), line: 1 };
    let threads = threads.iter().map(|&(process, cpu, ops)| ThreadSpec { process, cpu: Some(cpu), ops: ops.into(), ops_origin: origin.clone() }).collect();
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    sets.push(format!("machine.cpus={cpus}"));
    let cfg = Config::with_threads(&sets, threads).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    sim.enable_oracle();
    sim.oracle.as_mut().unwrap().max_violations = 64;
    sim.run(|_| {});
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    sim
}

fn details(sim: &Sim) -> Vec<String> {
    sim.oracle.as_ref().unwrap().violations.iter().filter(|v| v.class == Class::Structural).map(|v| v.detail.clone()).collect()
}

fn assert_clean(sim: &mut Sim) {
    sim.check_structure();
    let d = details(sim);
    assert!(d.is_empty(), "structural violations on a consistent model: {d:#?}");
}

/// Run the checkers on a corrupted model: some violation must come from `checker`.
fn assert_reported(sim: &mut Sim, checker: &str) -> String {
    sim.oracle.as_mut().unwrap().violations.clear();
    sim.check_structure();
    let d = details(sim);
    d.iter().find(|x| x.starts_with(&format!("{checker}: "))).cloned().unwrap_or_else(|| panic!("no '{checker}:' violation; got {d:#?}"))
}

/// Two processes, fork with COW, a private and a shared file mapping, mprotect, dontneed, and
/// two CPUs still running the first process at the end (one not lazy).
fn busy_sim() -> Sim {
    let main = "mmap a 96\nmmap f 40 file:data\nmmap s 24 file:shared shared\nmmap n 8 prot=none\n\
                touch a write\ntouch f read\ntouch s write\nfork\ntouch a write\nreap\n\
                mprotect f rw\ntouch f write\nmadvise a dontneed\ntouch a read\ntouch a write\nspin forever\n";
    let helper = "sleep 20us\ntouch a read\ntouch s read\ntouch f read\nspin forever\n";
    let other = "mmap s 24 file:shared shared\ntouch s read\nmmap b 32\ntouch b write\nsleep forever\n";
    let mut sim = run(3, &[(0, 0, main), (0, 1, helper), (1, 2, other)], &[]);
    assert_clean(&mut sim);
    sim
}

/// Anon memory beyond RAM with a swap device: swap entries, reclaim, the LRU under pressure.
fn swapping_sim() -> Sim {
    let ops = "mmap a 3000\ntouch a write\nmmap f 600 file:big sparse\ntouch f read\ntouch a read\nsleep forever\n";
    let mut sim = run(2, &[(0, 0, ops)], &["machine.mem_per_node_mib=8", "machine.swap_mib=16"]);
    assert!(sim.swap.nr_free() < sim.swap.total(), "the run swapped");
    assert_clean(&mut sim);
    sim
}

/// A user frame mapped by `n` PTEs or more (anon if `anon`).
fn mapped_frame(sim: &Sim, anon: bool, n: i32) -> Pfn {
    let want = if anon { pg::ANON } else { pg::FILE };
    let i = sim.frames.iter().position(|f| f.flags & want != 0 && f.flags & pg::FREE == 0 && f.mapcount >= n).expect("a mapped frame");
    Pfn(i as u32)
}

/// A CPU running an mm (not lazy).
fn running_cpu(sim: &Sim) -> (usize, MmId) {
    sim.cpus.iter().enumerate().find_map(|(i, c)| c.tlbstate.loaded_mm.filter(|_| !c.tlbstate.is_lazy).map(|m| (i, m))).expect("a CPU running an mm")
}

// ---------------------------------------------------------------- clean models

#[test]
fn swarm_seeds_are_structurally_clean() {
    // Seeds 1..=30 of the shipped policies (seed 16 found the migration leak tested below).
    for s in 1..=30 {
        let r = run_seed(s, Inject::None);
        assert!(r.violations.is_empty(), "seed {s}: {:?}", r.violations.iter().map(|v| &v.detail).collect::<Vec<_>>());
    }
}

#[test]
fn busy_and_swapping_models_are_clean() {
    busy_sim();
    swapping_sim();
}

#[test]
fn the_checkers_need_the_oracle_and_change_nothing() {
    let mut sim = busy_sim();
    let before: Vec<_> = sim.frames.iter().map(|f| (f.flags, f.refcount, f.mapcount)).collect();
    let gens: Vec<_> = sim.mms.iter().flatten().map(|m| m.tlb_gen).collect();
    sim.check_structure();
    assert_eq!(before, sim.frames.iter().map(|f| (f.flags, f.refcount, f.mapcount)).collect::<Vec<_>>());
    assert_eq!(gens, sim.mms.iter().flatten().map(|m| m.tlb_gen).collect::<Vec<_>>());
    // Without the oracle there is nowhere to report: nothing happens.
    let pfn = mapped_frame(&sim, true, 1);
    sim.frames[pfn.0 as usize].mapcount += 5;
    sim.oracle = None;
    sim.check_structure();
}

// ---------------------------------------------------------------- rmap, mapcount, refcount

#[test]
fn a_bumped_mapcount_is_reported() {
    let mut sim = busy_sim();
    let pfn = mapped_frame(&sim, true, 1);
    sim.frames[pfn.0 as usize].mapcount += 1;
    let d = assert_reported(&mut sim, "mapcount");
    assert!(d.contains(&format!("pfn {pfn} ")) && d.contains(" vpn "), "{d}");
}

#[test]
fn a_frame_mapped_by_more_ptes_than_its_mapcount_is_reported() {
    let mut sim = busy_sim();
    // A file page mapped by both processes' shared mapping.
    let pfn = mapped_frame(&sim, false, 2);
    sim.frames[pfn.0 as usize].mapcount -= 1;
    assert_reported(&mut sim, "mapcount");
}

#[test]
fn a_mapping_rmap_cannot_find_is_reported() {
    let mut sim = busy_sim();
    let pfn = mapped_frame(&sim, true, 1);
    let f = &mut sim.frames[pfn.0 as usize];
    f.set_index(f.index() ^ 1); // the anon rmap now looks at the wrong vpn
    let d = assert_reported(&mut sim, "rmap");
    assert!(d.contains("finds 0 of the"), "{d}");
}

#[test]
fn a_duplicate_in_the_anon_vma_chain_is_reported() {
    let mut sim = busy_sim();
    let pfn = mapped_frame(&sim, true, 1);
    let av = sim.frames[pfn.0 as usize].mapping as usize;
    let mm = sim.anon_vmas[av].mms[0];
    sim.anon_vmas[av].mms.push(mm);
    let d = assert_reported(&mut sim, "rmap");
    assert!(d.contains("twice"), "{d}");
}

#[test]
fn a_leaked_or_missing_reference_is_reported() {
    let mut sim = busy_sim();
    let pfn = mapped_frame(&sim, false, 1);
    sim.frames[pfn.0 as usize].refcount += 1;
    let d = assert_reported(&mut sim, "refcount");
    assert!(d.contains("page cache"), "{d}");
    let mut sim = busy_sim();
    let pfn = mapped_frame(&sim, true, 1);
    sim.frames[pfn.0 as usize].refcount -= 1;
    assert_reported(&mut sim, "refcount");
}

#[test]
fn an_allocated_frame_nobody_owns_is_reported() {
    let mut sim = busy_sim();
    let p = sim.alloc_page(NodeId(0)).unwrap();
    let d = assert_reported(&mut sim, "refcount");
    assert!(d.contains(&format!("pfn {p} is allocated")) && d.contains("owned by nothing"), "{d}");
}

#[test]
fn page_cache_and_rss_and_page_table_counts_are_checked() {
    let mut sim = busy_sim();
    let pfn = mapped_frame(&sim, false, 1);
    let f = sim.frames[pfn.0 as usize];
    sim.files[f.mapping as usize].pages[f.index() as usize] = mmsim::mm::workingset::Slot::Empty;
    assert_reported(&mut sim, "pagecache");
    let mut sim = busy_sim();
    sim.mms[0].as_mut().unwrap().rss_anon += 1;
    assert_reported(&mut sim, "rss");
    let mut sim = busy_sim();
    sim.mms[0].as_mut().unwrap().nr_ptes += 1;
    assert_reported(&mut sim, "pgtable");
}

#[test]
fn a_pte_outside_every_vma_is_reported() {
    let mut sim = busy_sim();
    let m = sim.mms[0].as_mut().unwrap();
    let (&start, _) = m.vmas.iter().find(|(_, v)| v.anon_vma.is_some()).unwrap();
    // Shrink the VMA under its mapped pages, as a munmap that forgot to zap would.
    let v = m.vmas.get_mut(&start).unwrap();
    v.end = v.start + 1;
    let d = assert_reported(&mut sim, "pgtable");
    assert!(d.contains("outside every VMA"), "{d}");
}

#[test]
fn swap_counts_are_checked_against_swap_ptes() {
    let mut sim = swapping_sim();
    let slot = sim.swap.map.iter().position(|&c| c > 0).expect("a used slot");
    sim.swap.map[slot] += 1;
    let d = assert_reported(&mut sim, "swap");
    assert!(d.contains(&format!("slot {slot} ")), "{d}");
    let mut sim = swapping_sim();
    sim.swap.free.pop();
    let d = assert_reported(&mut sim, "swap");
    assert!(d.contains("leaked"), "{d}");
}

#[test]
fn lru_lists_are_checked() {
    let mut sim = swapping_sim();
    let i = sim.frames.iter().position(|f| f.flags & pg::LRU != 0).expect("a frame on an LRU list");
    sim.frames[i].flags &= !pg::LRU;
    assert_reported(&mut sim, "lru");
    let mut sim = swapping_sim();
    sim.nodes[0].lru.lists[2].len += 1;
    assert_reported(&mut sim, "lru");
}

// ---------------------------------------------------------------- buddy

#[test]
fn a_wrong_nr_free_is_reported() {
    let mut sim = busy_sim();
    sim.nodes[0].nr_free += 1;
    let d = assert_reported(&mut sim, "buddy");
    assert!(d.contains("nr_free"), "{d}");
}

#[test]
fn a_busy_frame_on_a_free_list_is_reported() {
    let mut sim = busy_sim();
    let pfn = mapped_frame(&sim, true, 1);
    sim.pcp[0][0].list.push(pfn);
    sim.nodes[0].nr_free += 1;
    let d = assert_reported(&mut sim, "buddy");
    assert!(d.contains(&format!("pfn {pfn} on cpu0's pcp list")), "{d}");
}

#[test]
fn a_mapped_frame_marked_free_and_a_lost_free_block_are_reported() {
    let mut sim = busy_sim();
    let pfn = mapped_frame(&sim, true, 1);
    sim.frames[pfn.0 as usize].flags |= pg::FREE;
    assert_reported(&mut sim, "buddy");
    // A free block dropped from its list: its pages are FREE but on no list, and the counts
    // disagree.
    let mut sim = busy_sim();
    let o = (0..=10).rev().find(|&o| sim.nodes[0].free_area.head[o] != u32::MAX).unwrap();
    let head = sim.nodes[0].free_area.head[o];
    let next = sim.frames[head as usize].lru_next;
    sim.nodes[0].free_area.head[o] = next;
    if next != u32::MAX {
        sim.frames[next as usize].lru_prev = u32::MAX;
    }
    let d = assert_reported(&mut sim, "buddy");
    assert!(d.contains("nr_free") || d.contains("on no buddy or pcp list"), "{d}");
}

// ---------------------------------------------------------------- mm_cpumask and the TLB

#[test]
fn a_loaded_cpu_missing_from_mm_cpumask_is_reported() {
    let mut sim = busy_sim();
    let (ci, mm) = running_cpu(&sim);
    sim.mms[mm.0 as usize].as_mut().unwrap().cpumask.clear(CpuId(ci as u32));
    let d = assert_reported(&mut sim, "cpumask");
    assert!(d.contains(&format!("cpu{ci} has mm{} loaded but is not in its mm_cpumask", mm.0)), "{d}");
}

#[test]
fn a_running_cpu_behind_its_mm_is_reported() {
    let mut sim = busy_sim();
    let (ci, mm) = running_cpu(&sim);
    // A flush request no CPU saw: tlb_gen moved on, the running CPU did not.
    sim.mms[mm.0 as usize].as_mut().unwrap().tlb_gen += 1;
    let d = assert_reported(&mut sim, "cpumask");
    assert!(d.contains(&format!("cpu{ci} runs mm{} (not lazy)", mm.0)), "{d}");
}

/// A writable 4 KiB entry of the loaded ASID on a running CPU: (cpu, mm, vpn, pfn).
fn writable_entry(sim: &Sim) -> (usize, MmId, u64, Pfn) {
    for (ci, c) in sim.cpus.iter().enumerate() {
        let st = &c.tlbstate;
        let Some(mm) = st.loaded_mm else { continue };
        if st.is_lazy {
            continue;
        }
        for e in c.tlb.entries() {
            if tag_asid(e.tag) == st.loaded_mm_asid && e.tag & (1 << 39) == 0 && e.flags & F_WRITE != 0 {
                return (ci, mm, e.tag & ((1 << 39) - 1), e.pfn);
            }
        }
    }
    panic!("no writable entry cached by a running CPU");
}

#[test]
fn a_stale_writable_entry_with_an_up_to_date_tlb_gen_is_reported() {
    let mut sim = busy_sim();
    let (ci, mm, vpn, pfn) = writable_entry(&sim);
    // Write-protect the PTE without a flush (what a missing flush_tlb_mm after fork would leave).
    let m = sim.mms[mm.0 as usize].as_mut().unwrap();
    let pte = m.pgtable.get(vpn);
    assert!(pte.present() && pte.pfn() == pfn);
    m.pgtable.set(vpn, pte.with(0, Pte::RW));
    let d = assert_reported(&mut sim, "tlb");
    assert!(d.contains(&format!("cpu{ci} ")) && d.contains(&format!("vpn {vpn:#x} -> pfn {pfn} (W)")) && d.contains("read-only"), "{d}");
    // The same change with the flush request recorded (tlb_gen bumped) is a flush owed, not a
    // stale entry: only the running CPU's lag is reported.
    sim.mms[mm.0 as usize].as_mut().unwrap().tlb_gen += 1;
    sim.oracle.as_mut().unwrap().violations.clear();
    sim.check_structure();
    let d = details(&sim);
    assert!(!d.is_empty() && d.iter().all(|x| x.starts_with("cpumask: ")), "{d:#?}");
}

#[test]
fn a_stale_entry_for_another_frame_is_reported() {
    let mut sim = busy_sim();
    let (ci, mm) = running_cpu(&sim);
    let asid = sim.cpus[ci].tlbstate.loaded_mm_asid;
    let pfn = mapped_frame(&sim, true, 1);
    let vpn = sim.frames[pfn.0 as usize].index();
    assert!(sim.mms[mm.0 as usize].as_ref().unwrap().pgtable.get(vpn).present());
    // A translation of a mapped vpn to some other frame.
    let other = Pfn(if pfn.0 > 10 { pfn.0 - 7 } else { pfn.0 + 7 });
    sim.cpus[ci].tlb.fill(asid, vpn, false, other, F_WRITE | F_DIRTY, false);
    let d = assert_reported(&mut sim, "tlb");
    assert!(d.contains(&format!("-> pfn {other} (W)")), "{d}");
}

#[test]
fn hugetlb_entries_are_checked_against_hugetlb_mappings() {
    let cfg = Config::defaults(&["machine.cpus=2".into(), "machine.mem_per_node_mib=64".into(), "vm.nr_hugepages=2".into()]).unwrap();
    let mut sim = Sim::new(&cfg);
    sim.hugetlb_init();
    sim.enable_oracle();
    let cpu = CpuId(0);
    let mm = sim.mm_alloc(cpu);
    sim.switch_mm_irqs_off(cpu, Some(mm));
    let head = sim.hugetlb_fault(cpu, mm, 0x40007, HSTATE_2M).expect("a pool page");
    assert_clean(&mut sim);
    // An unmap flushes the huge entry: still clean.
    sim.hugetlb_unmap(cpu, mm, 0x40007, HSTATE_2M);
    assert_clean(&mut sim);
    // A mapping dropped without its flush leaves a stale 2 MiB entry.
    sim.hugetlb_fault(cpu, mm, 0x40200, HSTATE_2M).expect("a pool page");
    let gone = sim.hugetlb.mappings.remove(&(mm.0, 0x40200)).unwrap();
    let d = assert_reported(&mut sim, "tlb");
    assert!(d.contains("2 MiB entry for vpn 0x40200") && d.contains("no hugetlb mapping covers"), "{d} ({head} {gone})");
}

// ---------------------------------------------------------------- injections

#[test]
fn skip_flush_before_free_leaves_running_cpus_behind() {
    // With try_to_unmap_flush() skipped, reclaim's deferred flushes never reach the CPUs
    // running the mm: the structural check sees them behind their mm's tlb_gen.
    let found = (1..=5).any(|s| run_seed(s, Inject::SkipFlushBeforeFree).violations.iter().any(|v| v.class == Class::Structural && v.detail.starts_with("cpumask: ") && v.detail.contains("(not lazy)")));
    assert!(found, "no structural cpumask violation within 5 seeds");
}

// ---------------------------------------------------------------- model bugs found

/// Model bug (src/mm/migrate.rs, migrate_pages_batch()): a destination page that
/// alloc_pages_node_nocheck() took from another node (the target's buddy being empty) is
/// filtered out and never freed; `mmsim check` finds it from seed 16 on. Un-ignore once fixed.
#[test]
fn migration_to_a_node_without_free_pages_leaks_no_frame() {
    let mut sim = run(2, &[(0, 0, "mmap a 8\ntouch a write\nsleep forever\n")], &["machine.nodes=2", "machine.mem_per_node_mib=8"]);
    assert_clean(&mut sim);
    // Empty node 1's buddy; the pages taken are marked as kernel (vmemmap) frames.
    loop {
        let p = sim.alloc_pages_node_nocheck(NodeId(1), 0).unwrap();
        if sim.pfn_node(p) != NodeId(1) {
            sim.put_page(p);
            break;
        }
        sim.frames[p.0 as usize].mapping = mmsim::mm::hugetlb_vmemmap::VMEMMAP_MAPPING;
    }
    assert_clean(&mut sim);
    let (start, pages) = sim.mm(MmId(0)).regions["a"];
    let (ok, failed) = sim.migrate_range(CpuId(0), MmId(0), start, pages, NodeId(1));
    assert_eq!((ok, failed), (0, 8));
    assert_clean(&mut sim);
}

/// Model bug (src/mm/hugetlb.rs, hugetlb_unmap()): the flush of a 1 GiB mapping covers only its
/// first 2 MiB, while hugetlb_fault() caches a 2 MiB entry for whichever 2 MiB the fault hit;
/// the other entries outlive the unmap with an up-to-date tlb_gen. Un-ignore once fixed.
#[test]
fn unmapping_a_1g_page_leaves_no_stale_entry() {
    let cfg = Config::defaults(&["machine.cpus=2".into(), "machine.mem_per_node_mib=2100".into(), "kernel.hugepages_1g=1".into()]).unwrap();
    let mut sim = Sim::new(&cfg);
    sim.hugetlb_init();
    sim.enable_oracle();
    let cpu = CpuId(0);
    let mm = sim.mm_alloc(cpu);
    sim.switch_mm_irqs_off(cpu, Some(mm));
    let vpn = (1 << 18) + 600; // the second 2 MiB of the 1 GiB page at vpn 0x40000
    sim.hugetlb_fault(cpu, mm, vpn, HSTATE_1G).expect("the boot-time 1 GiB page");
    assert_clean(&mut sim);
    sim.hugetlb_unmap(cpu, mm, vpn, HSTATE_1G);
    assert_clean(&mut sim);
}
