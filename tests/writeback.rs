//! Dirty page-cache writeback (src/mm/page_writeback.rs): the flusher write-protects a mapped
//! dirty page before writing it (one shootdown of the CPU that may cache the writable entry),
//! and the next write faults and dirties it again; reclaim hands dirty file folios to the
//! flusher instead of writing them from direct reclaim. (The per-version reclaim rules have unit
//! tests in src/mm/page_writeback.rs.)

use mmsim::config;
use mmsim::mm::vmstat::VmEvent;
use mmsim::sim::Sim;

fn run(text: &str, sets: &[&str]) -> Sim {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let cfg = config::load_str("wb.toml", &format!("{MACHINE}{text}"), &sets).unwrap();
    let mut sim = Sim::build(&cfg).unwrap();
    sim.run(|_| {});
    assert!(sim.workload_errors.is_empty(), "{:?}", sim.workload_errors);
    sim
}

fn run_on(text: &str, preset: &str) -> Sim {
    run(text, &[&format!("kernel.preset={preset}")])
}

/// The machine of the cases; each adds its [vm] settings and its thread.
const MACHINE: &str = r#"
[machine]
cpus = 4
mem_per_node_mib = 64
[kernel]
preset = "linux-6.18"
"#;

/// A thread writes 8 pages of a shared file mapping, spins (its CPU keeps the mm and the
/// writable TLB entries) past the expiry, and writes them again.
const REWRITE: &str = r#"
[vm]
dirty_expire_centisecs = 1
dirty_writeback_centisecs = 1
[[workload.thread]]
cpu = 0
ops = """
mmap m 8 file:data shared prot=rw
touch m write
spin 50ms
touch m write
"""
"#;

#[test]
fn the_flusher_write_protects_mapped_pages_and_the_next_write_dirties_them_again() {
    for preset in ["linux-4.2", "linux-6.18"] {
        let sim = run_on(REWRITE, preset);
        assert_eq!(sim.vmstat.get(VmEvent::NR_WRITTEN), 8, "{preset}: the expired pages are written");
        // folio_mkclean(): one shootdown of CPU 0 per page; the flusher runs on an idle CPU.
        assert_eq!(sim.cpus[0].stats.irq_tlb_count, 8, "{preset}");
        // 8 first-touch faults, then 8 write-protect faults that dirty the pages again.
        assert_eq!(sim.vmstat.get(VmEvent::PGFAULT), 16, "{preset}");
        assert_eq!(sim.vmstat.get(VmEvent::NR_DIRTIED), 16, "{preset}");
        assert_eq!(sim.wb.nr_dirty, 8, "{preset}");
    }
    // With the periodic writeback an hour away nothing is written, shot down or refaulted.
    let sim = run(REWRITE, &["vm.dirty_expire_centisecs=360000"]);
    assert_eq!(sim.vmstat.get(VmEvent::NR_WRITTEN), 0);
    assert_eq!(sim.cpus[0].stats.irq_tlb_count, 0);
    assert_eq!(sim.vmstat.get(VmEvent::PGFAULT), 8);
}

/// A 96 MiB file written through a shared mapping on a 64 MiB machine, with background
/// writeback out of the way: reclaim meets the dirty pages, wakes the flusher, marks them
/// PG_reclaim for it to rotate once written, and lets kswapd write some once the node is flagged
/// dirty.
const STREAM: &str = r#"
[vm]
dirty_background_ratio = 100
[[workload.thread]]
cpu = 0
ops = """
mmap m 24576 file:data shared prot=rw
touch m write
"""
"#;

#[test]
fn reclaim_leaves_dirty_file_pages_to_the_flusher() {
    for preset in ["linux-4.2", "linux-6.18"] {
        let sim = run_on(STREAM, preset);
        let c = |e| sim.vmstat.get(e);
        assert!(c(VmEvent::NR_VMSCAN_IMMEDIATE) > 0, "{preset}: reclaim met dirty pages");
        assert!(c(VmEvent::NR_WRITTEN) > 0, "{preset}: the flusher, woken by reclaim, wrote");
        assert!(c(VmEvent::PGROTATED) > 0, "{preset}: and rotated what reclaim had marked");
        assert!(c(VmEvent::NR_VMSCAN_WRITE) > 0, "{preset}: kswapd wrote on a node flagged dirty");
        // Every page dirtied was written once, by the flusher or by kswapd, or is still dirty.
        assert_eq!(c(VmEvent::NR_DIRTIED), c(VmEvent::NR_WRITTEN) + c(VmEvent::NR_VMSCAN_WRITE) + sim.wb.nr_dirty, "{preset}");
        assert_eq!(c(VmEvent::NR_DIRTIED), 24576);
        // Every page written went to the device once (pgpgout, counted in pages here).
        assert_eq!(c(VmEvent::PGPGOUT), c(VmEvent::NR_WRITTEN) + c(VmEvent::NR_VMSCAN_WRITE));
        assert_eq!(c(VmEvent::OOM_KILL), 0);
    }
}

/// msync(MS_SYNC) of a written shared mapping cleans each dirty page with one flush
/// (`folio_mkclean()`), which reaches the other CPU running the mm, and the next write faults.
/// On this repository's 6.18 host the same loop (docs/reclaim.md, "Writeback") traces one
/// `tlb_flush` (TLB_LOCAL_MM_SHOOTDOWN) per page written back.
#[test]
fn msync_cleans_each_dirty_page_with_one_shootdown() {
    let text = r#"
[[workload.thread]]
cpu = 0
ops = """
mmap a 16 file:f shared
loop 10
touch a write
msync a
end
"""
[[workload.thread]]
cpu = 1
ops = "spin forever"
"#;
    let sim = run(text, &[]);
    assert_eq!(sim.vmstat.get(VmEvent::NR_WRITTEN), 160);
    assert_eq!(sim.cpus[1].stats.irq_tlb_count, 160);
    // 16 first-touch faults, then 16 write-protect faults in each of the 9 later iterations.
    assert_eq!(sim.vmstat.get(VmEvent::PGFAULT), 160);
    assert_eq!(sim.wb.nr_dirty, 0);
}

/// A writer of a shared file mapping 3x the machine's memory, with the default background
/// ratio (10%), on a slow device: kswapd meets folios under writeback marked PG_reclaim and
/// stalls (4.2: congestion_wait() per batch with a whole batch under writeback; 4.16+: per pass;
/// 5.16+: reclaim_throttle()); docs/reclaim.md, "The writeback window". The stall sleeps kswapd,
/// not its CPU: the writer keeps going and reclaims for itself meanwhile (kswapd, on the
/// otherwise idle CPU 1, does most of it).
///
/// Loosened on 2026-11-27 (session 21): this used to assert that at 150 MB/s 4.2's kswapd
/// stalls and 5.13's and 6.18's never do. The counts are a few stalls per run and move with
/// any change of reclaim's timing: after reclaim kept the folios it unmapped isolated until
/// its flush, 4.2 stalled 0 times at 150 MB/s, 2 times at 50-100 MB/s, and 5.13 and 6.18 once
/// or twice at 50 MB/s. What holds over a sweep of device speeds is that 4.2 stalls in every run
/// at or below 100 MB/s and more often in all than either later kernel.
#[test]
fn a_slow_device_stalls_4_2_kswapd_on_writeback() {
    let stream = STREAM.replace("mmap m 24576", "mmap m 49152").replace("dirty_background_ratio = 100", "dirty_background_ratio = 10");
    let stalls = |preset: &str, bw: &str| {
        let sim = run(&stream, &[&format!("kernel.preset={preset}"), &format!("cost.block_write_bytes_per_ns={bw}")]);
        assert!(sim.vmstat.get(VmEvent::NR_WRITTEN) > 0, "{preset}");
        (sim.vmstat.get(VmEvent::RECLAIM_THROTTLE_WRITEBACK), sim.vmstat.get(VmEvent::PGSTEAL_DIRECT), sim.vmstat.get(VmEvent::PGSTEAL_KSWAPD))
    };
    let speeds = ["0.05", "0.075", "0.1", "0.15"];
    let mut total = [0u64; 3];
    for (i, preset) in ["\"linux-4.2\"", "\"linux-5.13\"", "\"linux-6.18\""].iter().enumerate() {
        for bw in speeds {
            let (s, direct, kswapd) = stalls(preset, bw);
            total[i] += s;
            if i == 0 && bw != "0.15" {
                assert!(s >= 1, "4.2's kswapd stalls at {bw} B/ns");
            }
            assert!(kswapd > direct, "{preset} {bw}: kswapd, on the idle CPU, does most of the reclaim: {kswapd} against {direct}");
        }
    }
    assert!(total[0] > total[1] && total[0] > total[2], "4.2 stalls more often than 5.13 and 6.18 over the sweep: {total:?}");
}
