//! Knobs of the VMA-lookup work (find_vma structures and caches, their workloads, trace replay).

use super::knobs::Knob;

pub static VMA_KNOBS: &[Knob] = &[];
