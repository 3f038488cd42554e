//! Knobs of HugeTLB pools and the vmemmap optimisation (HVO).

use super::knobs::Knob;

pub static HUGETLB_KNOBS: &[Knob] = &[];
