//! HugeTLB pools and HVO (issue 5, seed 004): page counts, boot lines, savings, the timing
//! ordering that must emerge from page-table work and IPIs, and frame accounting under memory
//! pressure. Run with `cargo test --release --test hugetlb`.

use mmsim::mm::hugetlb::{HSTATE_1G, HSTATE_2M};
use mmsim::report::hugetlb::meminfo_lines;
use mmsim::reproduce::hvo::{machine_config, measure_freed_per_page, pool_run};
use mmsim::sim::Sim;
use mmsim::types::{CpuId, NodeId, Pfn};

#[test]
fn page_counts_are_exact_for_v6_and_mainline() {
    assert_eq!(measure_freed_per_page("v6", HSTATE_2M).0, 6);
    assert_eq!(measure_freed_per_page("v6", HSTATE_1G).0, 4088);
    assert_eq!(measure_freed_per_page("mainline", HSTATE_2M).0, 7);
    assert_eq!(measure_freed_per_page("mainline", HSTATE_1G).0, 4095);
}

#[test]
fn boot_lines_match_the_real_kernel() {
    // This host's Linux 6.18 dmesg (HVO sysctl at 0, as our default 'off'):
    let want = [
        "HugeTLB: registered 1.00 GiB page size, pre-allocated 0 pages",
        "HugeTLB: 16380 KiB vmemmap can be freed for a 1.00 GiB page",
        "HugeTLB: registered 2.00 MiB page size, pre-allocated 0 pages",
        "HugeTLB: 28 KiB vmemmap can be freed for a 2.00 MiB page",
    ];
    for variant in ["off", "mainline"] {
        let mut sim = Sim::new(&machine_config(2, 1, 1, 256, variant, "auto"));
        sim.hugetlb_init();
        assert_eq!(sim.hugetlb.boot_log, want, "{variant}");
    }
    let mut sim = Sim::new(&machine_config(2, 1, 1, 256, "v6", "auto"));
    sim.hugetlb_init();
    assert_eq!(sim.hugetlb.boot_log[3], "HugeTLB: 24 KiB vmemmap can be freed for a 2.00 MiB page");
    assert_eq!(sim.hugetlb.boot_log[1], "HugeTLB: 16352 KiB vmemmap can be freed for a 1.00 GiB page");
}

#[test]
fn one_terabyte_of_1g_pages_saves_about_16_gb() {
    for variant in ["v6", "mainline"] {
        let per_page = measure_freed_per_page(variant, HSTATE_1G).0;
        let gib = (1024 * per_page * 4096) as f64 / (1u64 << 30) as f64;
        assert!((15.9..=16.0).contains(&gib), "{variant}: {gib} GiB");
    }
    // 2 MiB pages: v6 saves 12 GiB per TiB (the seed: ~11 GB, 10-12).
    let per_page = measure_freed_per_page("v6", HSTATE_2M).0;
    assert_eq!(1024 * 512 * per_page * 4096, 12 << 30);
}

#[test]
fn boot_time_1g_reservation_and_runtime_2m_pool_show_in_meminfo() {
    // hugepagesz=1G hugepages=2 at boot, one per node; the vmemmap (allocated first, from the
    // top of each node) leaves a 1 GiB-aligned run free on each 2.5 GiB node.
    let cfg = mmsim::config::Config::defaults(&[
        "workload.kind=synthetic".into(),
        "machine.cpus=2".into(),
        "machine.nodes=2".into(),
        "machine.mem_per_node_mib=2560".into(),
        "kernel.hugepages_1g=2".into(),
        "kernel.hugetlb_optimize_vmemmap=mainline".into(),
    ])
    .unwrap();
    let mut sim = Sim::new(&cfg);
    sim.hugetlb_init();
    assert_eq!(sim.hugetlb.boot_log[0], "HugeTLB: registered 1.00 GiB page size, pre-allocated 2 pages");
    assert_eq!(sim.hugetlb.hstates[HSTATE_1G].nodes.iter().map(|n| n.nr).collect::<Vec<_>>(), vec![1, 1]);
    assert_eq!(sim.set_max_huge_pages(CpuId(0), HSTATE_2M, 10), 10);
    let per_node: Vec<u64> = sim.hugetlb.hstates[HSTATE_2M].nodes.iter().map(|n| n.nr).collect();
    assert_eq!(per_node, vec![5, 5], "interleaved over nodes");
    sim.hugetlb_check().unwrap();
    let m = mmsim::report::hugetlb::meminfo_values(&sim);
    let text = meminfo_lines(&m);
    assert_eq!(
        text,
        "HugePages_Total:      10\nHugePages_Free:       10\nHugePages_Rsvd:        0\nHugePages_Surp:        0\nHugepagesize:       2048 kB\nHugetlb:         2117632 kB\n"
    );
    // Back to 0: everything returns, the vmemmap is whole again (split PTE tables stay).
    sim.set_max_huge_pages(CpuId(0), HSTATE_2M, 0);
    sim.set_max_huge_pages(CpuId(0), HSTATE_1G, 0);
    let c = sim.hugetlb_check().unwrap();
    assert_eq!(c.hugetlb, 0);
}

#[test]
fn hvo_is_slower_and_batching_is_faster_again() {
    let run = |cpus: u64, variant: &str, batch: &str| pool_run(&machine_config(cpus, 2, 2, 1024, variant, batch), 400);
    let off = run(32, "off", "on");
    let unbatched = run(32, "mainline", "off");
    let batched = run(32, "mainline", "on");
    assert!(off.alloc_s < batched.alloc_s && batched.alloc_s < unbatched.alloc_s, "alloc: off {} batched {} unbatched {}", off.alloc_s, batched.alloc_s, unbatched.alloc_s);
    assert!(off.free_done_s < batched.free_done_s && batched.free_done_s < unbatched.free_done_s);
    // The difference is the flushes: one per page (plus a full one per PMD split) unbatched,
    // two flush_tlb_all for the whole list batched, none with HVO off.
    assert_eq!((off.flush_tlb_all, off.flush_tlb_kernel_range, off.call_ipis), (0, 0, 0));
    assert_eq!(unbatched.flush_tlb_kernel_range, 400);
    assert!(unbatched.flush_tlb_all >= 400 / 64, "{}", unbatched.flush_tlb_all);
    assert_eq!((batched.flush_tlb_all, batched.flush_tlb_kernel_range), (2, 0));
    assert_eq!(batched.free_flush_tlb_all, 1);
    // More CPUs make every flush dearer: the unbatched cost grows with the CPU count.
    let unbatched_big = run(128, "mainline", "off");
    assert!(unbatched_big.alloc_s > 2.0 * unbatched.alloc_s, "{} vs {}", unbatched_big.alloc_s, unbatched.alloc_s);
    let off_big = run(128, "off", "on");
    assert_eq!(off_big.alloc_s, off.alloc_s, "without HVO the CPU count does not matter");
}

#[test]
fn v6_frees_asynchronously_through_the_workqueue() {
    let r = pool_run(&machine_config(8, 1, 1, 1024, "v6", "off"), 100);
    assert!(r.free_s * 20.0 < r.free_done_s, "echo 0 returns at once ({} s), the kworker frees later ({} s)", r.free_s, r.free_done_s);
    assert_eq!(r.free_hist.count, 100);
}

/// Fill every free frame of the machine (as other users would), keeping `leave` free.
fn exhaust(sim: &mut Sim, leave: u64) -> Vec<Pfn> {
    let mut held = Vec::new();
    while sim.nr_free_pages() > leave {
        match sim.alloc_page(NodeId(0)) {
            Some(p) => held.push(p),
            None => break,
        }
    }
    held
}

#[test]
fn a_page_that_cannot_get_its_vmemmap_back_stays_in_the_pool_as_surplus() {
    for batch in ["off", "on"] {
        let mut sim = Sim::new(&machine_config(2, 1, 1, 256, "mainline", batch));
        sim.hugetlb_init();
        assert_eq!(sim.set_max_huge_pages(CpuId(0), HSTATE_2M, 4), 4);
        let held = exhaust(&mut sim, 0);
        let before = sim.hugetlb_check().unwrap();
        assert_eq!(before.free, 0);
        // Shrink to 0: no page can get its 7 vmemmap pages back.
        let nr = sim.set_max_huge_pages(CpuId(0), HSTATE_2M, 0);
        let after = sim.hugetlb_check().unwrap();
        assert_eq!(nr, 0, "nr_hugepages reads 0 ...");
        let h = &sim.hugetlb.hstates[HSTATE_2M];
        assert_eq!((h.nr_huge_pages, h.free_huge_pages, h.surplus_huge_pages), (4, 4, 4), "... but the pages stay as surplus ({batch})");
        assert_eq!(sim.hugetlb.stats.restore_failed_to_surplus, 4, "the run counts them");
        assert_eq!(before, after, "nothing lost or double-counted ({batch})");
        assert_eq!(after.free + after.hugetlb + after.vmemmap + after.other, after.total);
        let text = meminfo_lines(&mmsim::report::hugetlb::meminfo_values(&sim));
        assert!(text.contains("HugePages_Total:       4\n") && text.contains("HugePages_Surp:        4\n"), "{text}");
        // Memory comes back: the surplus pages become persistent again and can be freed.
        for p in held {
            sim.free_page(p);
        }
        assert_eq!(sim.set_max_huge_pages(CpuId(0), HSTATE_2M, 4), 4);
        assert_eq!(sim.hugetlb.hstates[HSTATE_2M].surplus_huge_pages, 0);
        sim.set_max_huge_pages(CpuId(0), HSTATE_2M, 0);
        let end = sim.hugetlb_check().unwrap();
        assert_eq!((end.hugetlb, sim.hugetlb.hstates[HSTATE_2M].nr_huge_pages), (0, 0));
    }
}

#[test]
fn with_a_little_memory_the_first_freed_page_makes_room_for_the_rest() {
    // 10 free frames: one restore (7 pages) fits; the freed 2 MiB then feeds the others. The
    // batched path restores before freeing, so it must free a restored page and retry
    // (bulk_vmemmap_restore_error()).
    for batch in ["off", "on"] {
        let mut sim = Sim::new(&machine_config(2, 1, 1, 256, "mainline", batch));
        sim.hugetlb_init();
        sim.set_max_huge_pages(CpuId(0), HSTATE_2M, 4);
        let _held = exhaust(&mut sim, 10);
        sim.set_max_huge_pages(CpuId(0), HSTATE_2M, 0);
        let h = &sim.hugetlb.hstates[HSTATE_2M];
        assert_eq!((h.nr_huge_pages, h.surplus_huge_pages), (0, 0), "{batch}");
        assert_eq!(sim.hugetlb.stats.restore_failed_to_surplus, 0);
        sim.hugetlb_check().unwrap();
    }
}

#[test]
fn faults_take_pool_pages_then_overcommit_then_sigbus() {
    let cfg = mmsim::config::Config::defaults(&[
        "workload.kind=synthetic".into(),
        "machine.mem_per_node_mib=256".into(),
        "vm.nr_hugepages=1".into(),
        "vm.nr_overcommit_hugepages=1".into(),
        "kernel.hugetlb_optimize_vmemmap=mainline".into(),
    ])
    .unwrap();
    let mut sim = Sim::new(&cfg);
    sim.hugetlb_init();
    assert_eq!(sim.hugetlb.boot_log[2], "HugeTLB: registered 2.00 MiB page size, pre-allocated 1 pages");
    let cpu = CpuId(0);
    let mm = sim.mm_alloc(cpu);
    sim.switch_mm_irqs_off(cpu, Some(mm));
    let a = sim.hugetlb_fault(cpu, mm, 0x40000, HSTATE_2M).expect("pool page");
    let b = sim.hugetlb_fault(cpu, mm, 0x40200, HSTATE_2M).expect("surplus page");
    assert_ne!(a, b);
    assert_eq!(sim.hugetlb.hstates[HSTATE_2M].surplus_huge_pages, 1);
    assert_eq!(sim.hugetlb_fault(cpu, mm, 0x40400, HSTATE_2M), None, "SIGBUS");
    assert_eq!(sim.hugetlb_fault(cpu, mm, 0x40001, HSTATE_2M), Some(a), "same huge page");
    sim.hugetlb_check().unwrap();
    sim.hugetlb_unmap(cpu, mm, 0x40200, HSTATE_2M);
    let h = &sim.hugetlb.hstates[HSTATE_2M];
    assert_eq!((h.nr_huge_pages, h.surplus_huge_pages), (1, 0), "a surplus page goes back to the buddy");
    sim.hugetlb_unmap(cpu, mm, 0x40000, HSTATE_2M);
    assert_eq!(sim.hugetlb.hstates[HSTATE_2M].free_huge_pages, 1);
    sim.hugetlb_check().unwrap();
}

#[test]
fn pool_runs_are_deterministic() {
    let a = pool_run(&machine_config(16, 2, 2, 512, "mainline", "off"), 100);
    let b = pool_run(&machine_config(16, 2, 2, 512, "mainline", "off"), 100);
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

#[test]
fn bad_hugetlb_knobs_are_one_line_errors() {
    let dir = tempfile::Builder::new().prefix("mmsim-hugetlb-").tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(&p, "[kernel]\nhugetlb_optimize_vmemmap = \"v7\"\n[[workload.thread]]\nops = \"spin 1\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mmsim")).arg("run").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("bad.toml:2: kernel.hugetlb_optimize_vmemmap: 'v7' is not one of: off, v6, mainline"), "{err}");
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[[workload.thread]]\nops = \"spin 1\"\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mmsim")).args(["run"]).arg(&good).args(["--set", "vm.nr_hugepages=-1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--set:1: vm.nr_hugepages: -1 is out of range"), "{err}");
}
