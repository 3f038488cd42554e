//! Knobs of HugeTLB pools and the vmemmap optimisation (HVO): mm/hugetlb.rs, mm/hugetlb_vmemmap.rs.
//!
//! Pool sizes are applied at boot by `Sim::hugetlb_init()` (the `hugepages=` command line and the
//! vm.* sysctls written before the workload starts); `mmsim reproduce hvo` then changes them at
//! run time as `echo N > /proc/sys/vm/nr_hugepages` does.

use super::knobs::{float, int, knob, Kind, Knob};

pub const HVO_VARIANTS: &[&str] = &["off", "v6", "mainline"];

pub static HUGETLB_KNOBS: &[Knob] = &[
    knob!("vm.nr_hugepages", int(0, 1 << 32), "0", "pages", "2 MiB HugeTLB pages put in the pool at boot (hugepages=N, or /proc/sys/vm/nr_hugepages written before the workload), interleaved over the nodes with memory.", "Documentation/admin-guide/mm/hugetlbpage.rst"),
    knob!("vm.nr_overcommit_hugepages", int(0, 1 << 32), "0", "pages", "2 MiB surplus pages the pool may grow by on demand beyond nr_hugepages (/proc/sys/vm/nr_overcommit_hugepages).", "Documentation/admin-guide/mm/hugetlbpage.rst"),
    knob!("kernel.hugepages_1g", int(0, 1 << 20), "0", "pages", "1 GiB pages reserved at boot (hugepagesz=1G hugepages=N), from memblock before the buddy allocator runs, interleaved over nodes.", "Documentation/admin-guide/kernel-parameters.txt (hugepagesz=, hugepages=)"),
    knob!("kernel.hugetlb_optimize_vmemmap", Kind::Enum(HVO_VARIANTS), "\"off\"", "", "HugeTLB Vmemmap Optimisation: 'off' (/proc/sys/vm/hugetlb_optimize_vmemmap = 0, the Kconfig default and this host's setting); 'v6' as in Muchun Song's v6/v7 series (vmemmap PTE-mapped from boot, 2 struct-page pages kept: frees 6 per 2 MiB and, counting page tables as the series did, 4088 per 1 GiB; optimised pages freed asynchronously by a kworker); 'mainline' (5.18+: PMD-mapped vmemmap split on demand, 1 page kept: frees 7 / 4095).", "mm/hugetlb_vmemmap.c; lore 20201124095259.58755-1-songmuchun@bytedance.com (v6)"),
    knob!("kernel.hugetlb_vmemmap_batch", Kind::Enum(&["auto", "on", "off"]), "\"auto\"", "", "Batch the vmemmap remaps of a list of folios (split all PMDs, one flush_tlb_all; remap all, one flush_tlb_all; restore all, one flush) and free the pool in bulk (update_and_free_pages_bulk); off = one flush_tlb_kernel_range() per folio remap, as 5.14-6.6 did; auto = the preset's (6.7+).", "Mike Kravetz, Joao Martins: 'Batch hugetlb vmemmap modification operations', lore 20231019023113.345257-1-mike.kravetz@oracle.com (6.7)"),
    knob!("cost.struct_page_init_ns", float(0.0, 1e6), "8", "ns", "Writing one 64-byte struct page in prep_compound_page() / destroying a compound page (one cold cache-line store and the loop around it).", "64 B at ~10 GB/s streaming store = 6.4 ns, plus loop overhead"),
];
