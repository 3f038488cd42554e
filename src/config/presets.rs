//! Kernel presets named after versions: which behaviour of the modelled paths each version has.
//!
//! A preset only selects behaviour that differs between versions; every cost parameter is
//! independent of the preset.

/// Parse "linux-X.Y" into (X, Y).
/// A patch suffix (`linux-6.9+luf-v10`) is not part of the version.
pub fn version(preset: &str) -> (u32, u32) {
    let v = preset.trim_start_matches("linux-");
    let v = v.split('+').next().unwrap_or(v);
    let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// x86 lazy mm_cpumask (commits "x86/mm/tlb: Update mm_cpumask lazily" and "Only trim the
/// mm_cpumask once a second", Rik van Riel, merged for 6.14): CPUs stay in mm_cpumask after
/// switching away and are trimmed by a flush IPI at most once per second. Before: cleared at
/// switch_mm_irqs_off().
pub fn mm_cpumask_trim_ms(preset: &str) -> u64 {
    if version(preset) >= (6, 14) { 1000 } else { 0 }
}

/// PCID is used for user address spaces since 4.14 (commit 10af6235e0d3 "x86/mm: Implement PCID
/// based optimization: try to preserve old TLB entries using PCID").
pub fn uses_pcid(preset: &str) -> bool {
    version(preset) >= (4, 14)
}

/// PAGEVEC_SIZE, the size of the per-CPU lru_add batch: 14 in the 4.x pagevec (15 slots of 16
/// words with `nr` and `cold`), 15 once `cold` was removed (4.14), 31 for the folio_batch of
/// recent kernels (6.10 onwards, as measured on 6.18: see docs/host-findings.md). The 4.14 and
/// 6.10 change points are approximate.
pub fn pagevec_size(preset: &str) -> usize {
    let v = version(preset);
    if v < (4, 14) {
        14
    } else if v < (6, 10) {
        15
    } else {
        31
    }
}

/// Memory tiering (docs/tiering.md): demotion in reclaim and /sys/kernel/mm/numa/demotion_enabled
/// (commits 26aa2d199d6f, 20b51af15e01) came in 5.15; NUMA_BALANCING_MEMORY_TIERING (c574bbe91703)
/// in 5.18; hot page selection, the promote rate limit, the adaptive threshold and WMARK_PROMO in
/// 6.0, which is the version mmsim models mode 2 as. Config refuses either on an older preset.
pub const DEMOTION_SINCE: (u32, u32) = (5, 15);
pub const NUMA_TIERING_SINCE: (u32, u32) = (5, 18);
pub const NUMA_TIERING_MODELLED_SINCE: (u32, u32) = (6, 0);

/// LUF (seed 000, never merged): the preset of the kernel a LUF series was posted against names
/// it (`linux-6.9+luf-v10`: v10 on akpm's mm-unstable of April 2024, which became 6.10;
/// `linux-6.14+luf-v12`: RFC v12 reposted on v6.14-rc4). `kernel.luf = "auto"` takes it.
pub fn luf(preset: &str) -> &'static str {
    match preset.split_once('+').map(|(_, p)| p) {
        Some("luf-v10") => "v10",
        Some("luf-v12") => "v12",
        _ => "off",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn versions_compare() {
        assert_eq!(version("linux-6.18"), (6, 18));
        assert!(version("linux-4.3") < version("linux-4.14"));
        assert_eq!(mm_cpumask_trim_ms("linux-6.1"), 0);
        assert_eq!(mm_cpumask_trim_ms("linux-6.18"), 1000);
        assert_eq!(version("linux-6.9+luf-v10"), (6, 9));
        assert_eq!(luf("linux-6.9+luf-v10"), "v10");
        assert_eq!(luf("linux-6.14+luf-v12"), "v12");
        assert_eq!(luf("linux-6.14"), "off");
    }
}
