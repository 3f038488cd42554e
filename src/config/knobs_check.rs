//! Knobs of the safety checker (`mmsim check`): fault-injection sites, all off by default.

use super::knobs::{knob, Kind, Knob};

/// Fault-injection sites (`check.inject`); see docs/check.md. Each reproduces a real bug class.
pub const INJECT_SITES: &[&str] =
    &["none", "skip-flush-before-free", "skip-dirty-flush-before-writeback", "stale-mm-cpumask", "lazy-no-catchup", "skip-batched-pending", "numa-map-before-migrate", "luf-defer-writable", "luf-skip-alloc-flush"];

pub static CHECK_KNOBS: &[Knob] = &[knob!(
    "check.inject",
    Kind::Enum(INJECT_SITES),
    "\"none\"",
    "",
    "Fault injection for `mmsim check`: 'skip-flush-before-free' (no try_to_unmap_flush before shrink_folio_list frees folios), 'skip-dirty-flush-before-writeback' (no try_to_unmap_flush_dirty before pageout), 'stale-mm-cpumask' (one CPU missing from mm_cpumask when ORed into a batch or flushed), 'lazy-no-catchup' (switch_mm skips the tlb_gen catch-up), 'skip-batched-pending' (flush_tlb_batched_pending does nothing), 'numa-map-before-migrate' (do_numa_page restores the PTE before migrating, as before 5.13, while the migration still skips the shootdown as delayed mapping allows), 'luf-defer-writable' (LUF defers the flush of a folio although one of its PTEs was writable), 'luf-skip-alloc-flush' (a LUF-tagged page is allocated without its deferred flush).",
    "docs/check.md"
)];
