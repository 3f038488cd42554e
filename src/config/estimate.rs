//! Up-front host-memory estimate: refuse a machine that would not fit in this host before
//! `Sim::new` allocates its frame table, swap map and per-CPU TLBs (issue 16).
//!
//! Knob ranges stay generous (`machine.swap_mib` up to 1 TiB of simulated swap); this estimate
//! is what protects the host. It counts what `Sim::new` allocates in proportion to the machine:
//! one `Frame` per simulated page (and its `u32` last_cpupid with NUMA balancing on; the frame
//! table is allocated zeroed and the host backs only the frames the run allocates, but under
//! memory pressure that is every one, so the estimate counts them all), the swap map (`u16`) and free-slot list (`u32`) per swap slot, and each CPU's TLB
//! arrays. Page tables and the page cache's index grow with the workload: for an `ops`
//! workload the estimate counts them for every region a `touch` op walks (a PTE per page in its
//! process's tables, and a page-cache slot per page of a mapped file: a touch reads or writes
//! every page), which at seed 002's full scale is 85% of the run's memory (docs/performance.md,
//! "Session 18"). Mapped regions that nothing touches cost nothing (a sparse 256 TiB mapping
//! is fine). VMAs, tasks and the lock calendars get a fixed allowance.

use std::collections::BTreeMap;

use crate::config::{Config, ConfigError, Origin};
use crate::workload::ops::{self, Op};

/// Bytes of host memory allocated per simulated item, taken from the real types.
fn frame_bytes() -> u64 {
    std::mem::size_of::<crate::sim::Frame>() as u64
}
const SWAP_SLOT_BYTES: u64 = 2 + 4;
/// One TLB way: the entry plus its LRU stamp (src/hw/tlb.rs `SetAssoc`).
fn tlb_way_bytes() -> u64 {
    (std::mem::size_of::<crate::hw::tlb::TlbEntry>() + 8) as u64
}
/// VMAs, tasks, the event queue, the lock calendars: a fixed allowance.
const WORKLOAD_ALLOWANCE: u64 = 64 << 20;

/// One PTE's share of its table (`PteTable`: 512 PTEs and a header).
fn pte_bytes() -> u64 {
    (std::mem::size_of::<crate::mm::pgtable::PteTable>() as u64).div_ceil(512)
}

/// One page-cache slot (`File::pages`).
fn slot_bytes() -> u64 {
    std::mem::size_of::<crate::mm::workingset::Slot>() as u64
}

/// What the regions an `ops` workload touches add: PTEs per touched page, and a page-cache
/// slot per page of each touched file (its largest touched mapping). Returns the bytes and the
/// origin of the op program that touches most. A program that does not parse adds nothing
/// (building the workload reports its error).
fn touched_bytes(cfg: &Config) -> (u64, Option<Origin>) {
    if cfg.str("workload.kind") != "ops" {
        return (0, None);
    }
    let (mut ptes, mut files, mut top) = (0u64, BTreeMap::<String, u64>::new(), (0u64, None));
    for t in &cfg.threads {
        let Ok(prog) = ops::parse(&t.ops, &t.ops_origin) else { continue };
        let mut regions: BTreeMap<&str, (u64, Option<&str>)> = BTreeMap::new();
        let mut touched: BTreeMap<&str, u64> = BTreeMap::new();
        for l in &prog {
            match &l.op {
                Op::Mmap { region, pages, file, .. } => {
                    regions.insert(region, (*pages, file.as_deref()));
                }
                Op::Touch { region, .. } => {
                    let Some(&(pages, file)) = regions.get(region.as_str()) else { continue };
                    let t = touched.entry(region).or_default();
                    *t = (*t).max(pages);
                    if let Some(f) = file {
                        let e = files.entry(f.to_string()).or_default();
                        *e = (*e).max(pages);
                    }
                }
                _ => {}
            }
        }
        let pages: u64 = touched.values().sum();
        ptes += pages;
        if pages > top.0 {
            top = (pages, Some(t.ops_origin.clone()));
        }
    }
    (ptes * pte_bytes() + files.values().sum::<u64>() * slot_bytes(), top.1)
}

/// Largest frame number the model can name (`Pfn` is a u32; u32::MAX is NO_PFN).
pub const MAX_PAGES: u64 = u32::MAX as u64 - 1;

/// The estimate, in bytes, and the knob that contributes most to it (`workload.thread` when
/// the touched regions do).
pub fn host_bytes(cfg: &Config) -> (u64, &'static str) {
    let (b, key, _, _) = host_bytes_origin(cfg);
    (b, key)
}

/// [`host_bytes`] with the origin to name in an error, and the touched regions' share.
fn host_bytes_origin(cfg: &Config) -> (u64, &'static str, Origin, u64) {
    let (machine, key) = machine_bytes(cfg);
    let (touched, origin) = touched_bytes(cfg);
    match origin {
        Some(o) if touched > machine => (machine + touched, "workload.thread", o, touched),
        _ => (machine + touched, key, cfg.origin(key), touched),
    }
}

/// What `Sim::new` allocates for the machine, and the knob that contributes most.
fn machine_bytes(cfg: &Config) -> (u64, &'static str) {
    let cpus = cfg.int("machine.cpus") as u64;
    // `folio_last_cpupid()`'s table (src/sim.rs `CpupidTable`) exists only with NUMA balancing.
    let cpupid = if cfg.int("kernel.numa_balancing") != 0 { std::mem::size_of::<u32>() as u64 } else { 0 };
    let frames = total_pages(cfg) * (frame_bytes() + cpupid);
    let swap = cfg.int("machine.swap_mib") as u64 * 256 * SWAP_SLOT_BYTES;
    let ways: u64 = ["machine.tlb.l1d_4k_entries", "machine.tlb.l1d_2m_entries", "machine.tlb.l1i_4k_entries", "machine.tlb.l1i_2m_entries", "machine.tlb.stlb_entries"]
        .iter()
        .map(|k| cfg.int(k) as u64)
        .sum();
    let tlbs = cpus * ways * tlb_way_bytes();
    let parts = [(frames, if cfg.int("machine.cpuless_mem_mib") as u64 * cfg.int("machine.cpuless_nodes") as u64 > cfg.int("machine.mem_per_node_mib") as u64 * cfg.int("machine.nodes") as u64 { "machine.cpuless_mem_mib" } else { "machine.mem_per_node_mib" }), (swap, "machine.swap_mib"), (tlbs, "machine.tlb.stlb_entries")];
    let key = parts.iter().max_by_key(|p| p.0).map(|p| p.1).unwrap_or("machine.mem_per_node_mib");
    (frames + swap + tlbs + WORKLOAD_ALLOWANCE, key)
}

/// Simulated pages of all nodes.
pub fn total_pages(cfg: &Config) -> u64 {
    let nodes = cfg.int("machine.nodes") as u64;
    let cpuless = cfg.int("machine.cpuless_nodes") as u64;
    (nodes * cfg.int("machine.mem_per_node_mib") as u64 + cpuless * cfg.int("machine.cpuless_mem_mib") as u64) * 256
}

/// `MemAvailable` of /proc/meminfo in bytes; None where it cannot be read (not Linux).
pub fn host_available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn gib(b: u64) -> String {
    let g = b as f64 / (1u64 << 30) as f64;
    if g >= 10.0 { format!("{g:.0}") } else { format!("{g:.1}") }
}

/// Refuse, naming the knob, a machine the model cannot number or this host cannot hold.
pub fn check(cfg: &Config) -> Result<(), ConfigError> {
    let (need, key, origin, touched) = host_bytes_origin(cfg);
    if let Some(avail) = host_available_bytes() {
        if need > avail {
            let what = if key == "workload.thread" {
                format!("the page tables and page cache of the regions its ops touch (≈{} GiB)", gib(touched))
            } else {
                format!("{key} = {}", cfg.int(key))
            };
            return Err(ConfigError::key(&origin, key, format!("needs ≈{} GiB of host memory for {what}; this host has {} GiB available", gib(need), gib(avail))));
        }
    }
    let pages = total_pages(cfg);
    if pages > MAX_PAGES {
        let key = if cfg.int("machine.cpuless_nodes") > 0 && cfg.int("machine.cpuless_mem_mib") > 0 { "machine.cpuless_mem_mib" } else { "machine.mem_per_node_mib" };
        return Err(ConfigError::key(&cfg.origin(key), key, format!("{pages} simulated pages in all; the model numbers frames with 32 bits (at most {MAX_PAGES} pages, 16 TiB)")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_machine_is_small_and_huge_swap_is_large() {
        let c = Config::defaults(&[]).unwrap();
        assert!(host_bytes(&c).0 < 1 << 30, "{}", host_bytes(&c).0);
        let c = Config::defaults(&["machine.swap_mib=1000000000".into()]).unwrap();
        let (b, key) = host_bytes(&c);
        assert!(b > 1000 << 30, "{b}");
        assert_eq!(key, "machine.swap_mib");
    }

    fn ops_scenario(threads: &[&str]) -> Config {
        let mut text = String::from("[machine]\ncpus = 2\n");
        for (i, ops) in threads.iter().enumerate() {
            text += &format!("[[workload.thread]]\nprocess = {i}\ncpu = {}\nops = \"\"\"\n{ops}\n\"\"\"\n", i % 2);
        }
        crate::config::load_str("e.toml", &text, &[]).unwrap()
    }

    /// Touched regions count (a PTE per page, a page-cache slot per file page, a file once
    /// however many threads touch it); a region nothing touches costs nothing; and a workload
    /// that touches more than the host holds is refused, naming its op program.
    #[test]
    fn touched_regions_count_their_page_tables_and_page_cache() {
        let base = host_bytes(&ops_scenario(&["sleep 1us"])).0;
        let n = 1 << 20;
        let untouched = host_bytes(&ops_scenario(&[&format!("mmap f {n} file:a sparse shared prot=r")])).0;
        assert_eq!(untouched, base);
        let one = host_bytes(&ops_scenario(&[&format!("mmap f {n} file:a sparse shared prot=r\ntouch f read")])).0;
        assert_eq!(one - base, n * (pte_bytes() + slot_bytes()));
        let ops = format!("mmap f {n} file:a sparse shared prot=r\ntouch f read");
        let two = host_bytes(&ops_scenario(&[&ops, &ops])).0;
        assert_eq!(two - base, n * (2 * pte_bytes() + slot_bytes()), "the file's slots once, each process's PTEs");
        let anon = host_bytes(&ops_scenario(&[&format!("mmap a {n}\ntouch a write")])).0;
        assert_eq!(anon - base, n * pte_bytes());
        // 2^32 pages touched: ≈64 GiB whatever this host has, more than a 28-byte frame table of
        // the default machine; refused where the host has less, naming the program's line.
        let huge = ops_scenario(&["mmap f 4000000000 file:big sparse shared prot=r\ntouch f read"]);
        let (b, key) = host_bytes(&huge);
        assert_eq!(key, "workload.thread");
        if host_available_bytes().is_some_and(|a| a < b) {
            let e = check(&huge).unwrap_err().to_string();
            assert!(e.starts_with("e.toml:") && e.contains("workload.thread") && e.contains("regions its ops touch"), "{e}");
        }
    }
}
