//! HugeTLB reports in the kernel's and bpftrace's formats: the /proc/meminfo HugePages lines
//! (hugetlb_report_meminfo()), the boot-log lines (report_hugepages(), kept in
//! `Hugetlb::boot_log`), and log2 latency histograms as bpftrace's `hist()` prints them.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::mm::hugetlb::HSTATE_2M;
use crate::sim::Sim;

/// A power-of-two histogram (bpftrace `hist()`): bucket 0 holds 0, bucket k ≥ 1 holds
/// [2^(k-1), 2^k).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Log2Hist {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum: u64,
}

impl Log2Hist {
    pub fn record(&mut self, v: u64) {
        let k = if v == 0 { 0 } else { 64 - v.leading_zeros() as usize };
        if self.buckets.len() <= k {
            self.buckets.resize(k + 1, 0);
        }
        self.buckets[k] += 1;
        self.count += 1;
        self.sum += v;
    }

    pub fn mean(&self) -> f64 {
        if self.count == 0 { 0.0 } else { self.sum as f64 / self.count as f64 }
    }

    /// Non-empty buckets as ("[lo, hi)", count), from the first to the last non-empty one.
    pub fn rows(&self) -> Vec<(String, u64)> {
        let first = self.buckets.iter().position(|&c| c > 0);
        let last = self.buckets.iter().rposition(|&c| c > 0);
        let (Some(a), Some(b)) = (first, last) else { return Vec::new() };
        (a..=b)
            .map(|k| {
                let label = if k == 0 { "[0]".to_string() } else if k == 1 { "[1]".to_string() } else { format!("[{}, {})", size(1 << (k - 1)), size(1 << k)) };
                (label, self.buckets[k])
            })
            .collect()
    }

    /// The text bpftrace prints for `@name = hist(...)`.
    pub fn bpftrace(&self, name: &str) -> String {
        let mut s = format!("@{name}:\n");
        let rows = self.rows();
        let max = rows.iter().map(|r| r.1).max().unwrap_or(0).max(1);
        for (label, c) in rows {
            let bar = "@".repeat((c * 52 / max) as usize);
            let _ = writeln!(s, "{label:<16}{c:>8} |{bar:<52}|");
        }
        s
    }
}

/// bpftrace's hist() labels: 512, 1K, 2K, ... 1M, ... (powers of 1024 with K/M/G/T suffixes).
fn size(v: u64) -> String {
    const S: [&str; 5] = ["", "K", "M", "G", "T"];
    let mut v = v;
    let mut i = 0;
    while v >= 1024 && v % 1024 == 0 && i < 4 {
        v /= 1024;
        i += 1;
    }
    format!("{v}{}", S[i])
}

/// The /proc/meminfo HugePages values of the default hstate (2 MiB) plus Hugetlb (kB, every
/// hstate), for Report::meminfo.
pub fn meminfo_values(sim: &Sim) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let (total, free, surp) = match sim.hugetlb.hstates.get(HSTATE_2M) {
        Some(h) => (h.nr_huge_pages, h.free_huge_pages, h.surplus_huge_pages),
        None => (0, 0, 0),
    };
    m.insert("HugePages_Total".to_string(), total);
    m.insert("HugePages_Free".to_string(), free);
    m.insert("HugePages_Rsvd".to_string(), 0);
    m.insert("HugePages_Surp".to_string(), surp);
    m.insert("Hugepagesize".to_string(), 2048);
    m.insert("Hugetlb".to_string(), sim.hugetlb_total_kb());
    m
}

/// hugetlb_report_meminfo()'s lines, exactly as the kernel's seq_printf formats them.
pub fn meminfo_lines(m: &BTreeMap<String, u64>) -> String {
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    format!(
        "HugePages_Total:   {:5}\nHugePages_Free:    {:5}\nHugePages_Rsvd:    {:5}\nHugePages_Surp:    {:5}\nHugepagesize:   {:8} kB\nHugetlb:        {:8} kB\n",
        g("HugePages_Total"),
        g("HugePages_Free"),
        g("HugePages_Rsvd"),
        g("HugePages_Surp"),
        g("Hugepagesize"),
        g("Hugetlb")
    )
}

/// The boot-log lines with dmesg-like timestamps at 0.
pub fn boot_log(sim: &Sim) -> String {
    sim.hugetlb.boot_log.iter().map(|l| format!("[    0.000000] {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn bpftrace_form_matches_the_seed() {
        let mut h = Log2Hist::default();
        for _ in 0..10176 {
            h.record(5000);
        }
        for _ in 0..62 {
            h.record(9000);
        }
        for _ in 0..2 {
            h.record(20000);
        }
        let want = "@latency:\n[4K, 8K)           10176 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n[8K, 16K)             62 |                                                    |\n[16K, 32K)             2 |                                                    |\n";
        assert_eq!(h.bpftrace("latency"), want);
    }
}
