//! HugeTLB Vmemmap Optimisation (mm/hugetlb_vmemmap.c). (Being written: the HugeTLB/HVO issue.)
