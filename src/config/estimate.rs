//! Up-front host-memory estimate: refuse a machine that would not fit in this host before
//! `Sim::new` allocates its frame table, swap map and per-CPU TLBs (issue 16).
//!
//! Knob ranges stay generous (`machine.swap_mib` up to 1 TiB of simulated swap); this estimate
//! is what protects the host. It counts what `Sim::new` allocates eagerly and in proportion to
//! the machine: one `Frame` per simulated page (and its `u32` last_cpupid with NUMA balancing
//! on), the swap map (`u16`) and free-slot list (`u32`) per swap slot, and each CPU's TLB
//! arrays. Page tables, VMAs and tasks grow with the workload, not with the machine; the
//! estimate adds a fixed allowance for them.

use crate::config::{Config, ConfigError};

/// Bytes of host memory allocated per simulated item, taken from the real types.
fn frame_bytes() -> u64 {
    std::mem::size_of::<crate::sim::Frame>() as u64
}
const SWAP_SLOT_BYTES: u64 = 2 + 4;
/// One TLB way: the entry plus its LRU stamp (src/hw/tlb.rs `SetAssoc`).
fn tlb_way_bytes() -> u64 {
    (std::mem::size_of::<crate::hw::tlb::TlbEntry>() + 8) as u64
}
/// Page tables, VMAs, tasks, the event queue: grows with the workload; a fixed allowance.
const WORKLOAD_ALLOWANCE: u64 = 64 << 20;

/// Largest frame number the model can name (`Pfn` is a u32; u32::MAX is NO_PFN).
pub const MAX_PAGES: u64 = u32::MAX as u64 - 1;

/// The estimate, in bytes, and the knob that contributes most to it.
pub fn host_bytes(cfg: &Config) -> (u64, &'static str) {
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
    let (need, key) = host_bytes(cfg);
    if let Some(avail) = host_available_bytes() {
        if need > avail {
            return Err(ConfigError::key(&cfg.origin(key), key, format!("needs ≈{} GiB of host memory for {key} = {}; this host has {} GiB available", gib(need), cfg.int(key), gib(avail))));
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
}
