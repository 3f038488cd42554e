//! HugeTLB pools (mm/hugetlb.c). (Being written: the HugeTLB/HVO issue.)

/// All hstates and their per-node pools.
#[derive(Clone, Debug, Default)]
pub struct Hugetlb {}
