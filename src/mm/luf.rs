//! LUF, lazy unmap flush (seed 000; Byungchul Park, SK hynix; v10 posted May 2024, RFC v12
//! February 2025, never merged). mechanisms.md §3, docs/luf.md.
//!
//! If every PTE that mapped a folio was read-only when reclaim or migration unmapped it, a
//! stale TLB entry can only read the folio, and its contents do not change while it sits free.
//! So the shootdown is deferred until the page is allocated again, and many deferred
//! shootdowns merge into one.
//!
//! | piece | v10 (lore 20240510065206.76078) | v12 (RFC, lore 20250220052027.58847) | here |
//! |---|---|---|---|
//! | defer | `set_tlb_ubc_flush_pending()` puts read-only PTEs in `tlb_ubc_ro`; after the rmap walk the folio's part goes to `tlb_ubc_luf` if all its PTEs were read-only (`can_luf`), else to `tlb_ubc` | the same, plus `luf_batch[0]` | mm/rmap.rs `clear_pte_for_unmap`, `try_to_unmap`, [`TlbUnmapBatch::end_folio`] |
//! | fold | `luf_ubc` (one global batch under `luf_lock`), `luf_gen` | `fold_unmap_luf()`: new `luf_ugen`, key into `luf_batch[65536]`, per-mm and per-`address_space` batches | [`Sim::luf_fold`] |
//! | tag | `ugen` (16 bits) in the freed page via `folio_put_ugen()`/`free_unref_folios(…, ugen)` | `luf_key` (16 bits) in the freed page | [`Frame::luf`](crate::sim::Frame::luf), in a free frame's index slot |
//! | flush | `check_luf_flush(ugen)` in `prep_new_page()`: if `luf_gen_done` is before `ugen`, flush the whole global batch | `luf_takeoff_check_and_fold()`: the key's CPUs whose per-CPU `ugen_done` is before the key's ugen, one flush in `luf_takeoff_end()` | [`Sim::luf_takeoff`] from mm/page_alloc.rs |
//! | abandon | `do_wp_page`, `do_mmap(PROT_WRITE)`: flush everything | faults on writable VMAs, file writes, `tlb_end_vma`, `flush_tlb_batched_pending`, … : flush the mm's or the file's batch | [`Sim::luf_abandon`] |
//!
//! Departures: the tag is kept per 4 KiB frame across buddy merges and splits (Linux folds the
//! keys of merged buddies; the flushes an allocation needs are the same); v12's `pend_list`
//! beside `free_list` and its non-LUF reserve are modelled in mm/page_alloc.rs as documented
//! there; the v12 per-mm and per-file batches hold the whole fold's CPU mask (Linux: the CPUs of
//! that mm's or file's PTEs); KASAN, init-on-free and page reporting are not modelled.

use std::collections::BTreeMap;

use crate::kernel::profile::KFn;
use crate::sim::{CpuMask, Sim};
use crate::types::*;

/// `kernel.luf`: which form of the series runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Luf {
    #[default]
    Off,
    V10,
    V12,
}

impl Luf {
    pub fn from_config(c: &crate::config::Config) -> Luf {
        let v = match c.str("kernel.luf").as_str() {
            "auto" => crate::config::presets::luf(&c.str("kernel.preset")).to_string(),
            v => v.to_string(),
        };
        match v.as_str() {
            "v10" => Luf::V10,
            "v12" => Luf::V12,
            _ => Luf::Off,
        }
    }

    pub fn on(self) -> bool {
        self != Luf::Off
    }

    pub fn name(self) -> &'static str {
        match self {
            Luf::Off => "off",
            Luf::V10 => "v10",
            Luf::V12 => "v12",
        }
    }
}

/// Why a pending LUF flush was run before the page's allocation (the abandon triggers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abandon {
    /// v10: `do_wp_page()` (a write-protect fault).
    WpFault,
    /// v10: `do_mmap()` of a writable mapping.
    MmapWrite,
    /// v12: `handle_mm_fault()` on a VMA with VM_WRITE (or a write fault).
    WritableFault,
    /// v12: `mapping_write_begin()` (write(2) to a file).
    FileWrite,
    /// v12: truncation/invalidation of a file's pages.
    Truncate,
    /// v12: `tlb_end_vma()` (munmap, zap).
    TlbEndVma,
    /// v12: `flush_tlb_batched_pending()`.
    BatchedPending,
    /// A folio that was not freed by its last put (another reference): flushed at once.
    NotFreed,
}

impl Abandon {
    pub const ALL: [Abandon; 8] =
        [Abandon::WpFault, Abandon::MmapWrite, Abandon::WritableFault, Abandon::FileWrite, Abandon::Truncate, Abandon::TlbEndVma, Abandon::BatchedPending, Abandon::NotFreed];

    pub fn name(self) -> &'static str {
        match self {
            Abandon::WpFault => "luf_abandon_wp_fault",
            Abandon::MmapWrite => "luf_abandon_mmap_write",
            Abandon::WritableFault => "luf_abandon_writable_fault",
            Abandon::FileWrite => "luf_abandon_file_write",
            Abandon::Truncate => "luf_abandon_truncate",
            Abandon::TlbEndVma => "luf_abandon_tlb_end_vma",
            Abandon::BatchedPending => "luf_abandon_batched_pending",
            Abandon::NotFreed => "luf_abandon_not_freed",
        }
    }
}

/// A `struct luf_batch` (v12): the CPUs that may still cache an entry, and the newest ugen.
#[derive(Clone, Debug, Default)]
pub struct LufEntry {
    pub mask: CpuMask,
    pub ugen: u64,
}

/// LUF's counters (not in any kernel: the series adds none to vmstat; reported as lines of
/// their own, docs/luf.md).
#[derive(Clone, Debug, Default)]
pub struct LufStats {
    /// Folios freed with their flush deferred (tagged).
    pub deferred_folios: u64,
    /// Folds (`fold_unmap_luf()` / a new v10 generation) that deferred at least one CPU.
    pub folds: u64,
    /// Tagged pages that left pcp/buddy.
    pub takeoff_pages: u64,
    /// Of those, the ones whose flush had already been done (nothing to send).
    pub takeoff_clean: u64,
    /// Flushes run by allocations, and the time they cost the allocating tasks.
    pub takeoff_flushes: u64,
    pub takeoff_flush_ns: f64,
    /// Flushes run by abandon triggers, per trigger.
    pub abandon: [u64; 8],
    pub abandon_ns: f64,
}

/// The LUF state of the whole machine (`Sim::luf`).
#[derive(Clone, Debug, Default)]
pub struct LufState {
    pub ver: Luf,
    /// v10: `luf_gen` (the newest generation handed out), `luf_gen_done` (all generations up to
    /// it are flushed) and the global pending batch `luf_ubc`.
    pub luf_gen: u64,
    pub gen_done: u64,
    pub pending: CpuMask,
    /// v12: `luf_ugen` (starts at 2), per-CPU `ugen_done`, `luf_batch[]` (lazily filled).
    pub ugen: u64,
    pub ugen_done: Vec<u64>,
    pub table: BTreeMap<u16, LufEntry>,
    /// v12: the per-mm and per-`address_space` batches.
    pub mm_batch: BTreeMap<u32, LufEntry>,
    pub file_batch: BTreeMap<u32, LufEntry>,
    pub stats: LufStats,
}

/// `ugen_before(a, b)` (v10): wrap-safe order of 16-bit generations.
pub fn ugen_before(a: u16, b: u16) -> bool {
    (a.wrapping_sub(b) as i16) < 0
}

/// The 16-bit tag of generation `g` (0 means "no tag", so it is skipped).
fn tag_of(g: u64) -> u16 {
    (g % 65535) as u16 + 1
}

impl LufState {
    pub fn new(ver: Luf, ncpus: usize) -> LufState {
        LufState { ver, pending: CpuMask::new(ncpus), ugen: 2, ugen_done: vec![0; ncpus], ..Default::default() }
    }

    /// The CPUs a tagged page still needs flushed: v10 the whole global batch (or none), v12 the
    /// key's CPUs whose `ugen_done` is before the key's ugen (the "diet").
    fn owed(&self, tag: u16) -> Option<CpuMask> {
        match self.ver {
            Luf::Off => None,
            Luf::V10 => (ugen_before(self.gen_done as u16, tag) && !self.pending.is_empty()).then(|| self.pending.clone()),
            Luf::V12 => self.entry_owed(self.table.get(&tag)?),
        }
    }

    fn entry_owed(&self, e: &LufEntry) -> Option<CpuMask> {
        let mut m = e.mask.clone();
        for c in e.mask.iter() {
            if self.ugen_done[c.0 as usize] >= e.ugen {
                m.clear(c);
            }
        }
        (!m.is_empty()).then_some(m)
    }
}

fn fold_into(map: &mut BTreeMap<u32, LufEntry>, k: u32, mask: &CpuMask, ugen: u64) {
    let e = map.entry(k).or_insert_with(|| LufEntry { mask: mask.empty_like(), ugen: 0 });
    e.mask.or(mask);
    e.ugen = ugen;
}

impl Sim {
    /// `fold_unmap_luf()` (v12) / the v10 generation step, after the batch's real flush: the CPUs
    /// in `luf` not covered by `flushed` are recorded as owed; returns the tag for the folios
    /// freed now (0: nothing is owed, free them untagged). `mms` and `files` are the mms and
    /// page-cache files whose read-only PTEs went into `luf` (v12's per-mm and per-file batches).
    pub fn luf_fold(&mut self, luf: &CpuMask, flushed: &CpuMask, mms: &[MmId], files: &[u32]) -> u16 {
        let mut mask = luf.clone();
        for c in flushed.iter() {
            mask.clear(c);
        }
        if mask.is_empty() {
            return 0;
        }
        let l = &mut self.luf;
        l.stats.folds += 1;
        match l.ver {
            Luf::Off => 0,
            Luf::V10 => {
                l.pending.or(&mask);
                l.luf_gen += 1;
                if l.luf_gen as u16 == 0 {
                    l.luf_gen += 1; // 0 = invalid ugen
                }
                l.luf_gen as u16
            }
            Luf::V12 => {
                l.ugen += 1;
                let (ugen, key) = (l.ugen, tag_of(l.ugen));
                let e = l.table.entry(key).or_insert_with(|| LufEntry { mask: mask.empty_like(), ugen: 0 });
                e.mask.or(&mask);
                e.ugen = ugen;
                for &m in mms {
                    fold_into(&mut l.mm_batch, m.0, &mask, ugen);
                }
                for &f in files {
                    fold_into(&mut l.file_batch, f, &mask, ugen);
                }
                key
            }
        }
    }

    /// After a flush of every CPU in `mask` (`arch_tlbbatch_mark_ugen()`, v12): they owe nothing
    /// folded before now.
    pub fn luf_mark_done(&mut self, mask: &CpuMask) {
        if self.luf.ver == Luf::V12 {
            let now = self.luf.ugen;
            for c in mask.iter() {
                let d = &mut self.luf.ugen_done[c.0 as usize];
                *d = (*d).max(now);
            }
        }
    }

    /// Flush `mask` for LUF from `cpu` and record it (`luf_takeoff_end()`, `luf_flush()`).
    /// Returns the time it took on `cpu`.
    fn luf_flush(&mut self, cpu: CpuId, mask: &CpuMask) -> f64 {
        let t0 = self.now(cpu);
        let (luf_gen, pending_all) = (self.luf.luf_gen, self.luf.ver == Luf::V10);
        self.kfn_enter(cpu, KFn::LufTakeoff);
        self.arch_tlbbatch_flush(cpu, mask);
        self.kfn_exit(cpu);
        if pending_all {
            // v10 flushed the whole global batch: everything up to `gen` is done.
            self.luf.pending.clear_all();
            self.luf.gen_done = luf_gen;
        }
        self.luf_mark_done(mask);
        (self.now(cpu) - t0) as f64
    }

    /// A page leaving pcp/buddy (`prep_new_page()`): if it carries a tag whose flush is still
    /// owed, run it now on the allocating CPU, charged to the allocating task. Clears the tag.
    pub fn luf_takeoff(&mut self, pfn: Pfn) {
        let tag = self.frames[pfn.0 as usize].take_luf();
        if tag == 0 {
            return;
        }
        self.luf.stats.takeoff_pages += 1;
        if self.inject == crate::check::Inject::LufSkipAllocFlush {
            return;
        }
        let Some(mask) = self.luf.owed(tag) else {
            self.luf.stats.takeoff_clean += 1;
            return;
        };
        // The allocating CPU; an allocation outside any CPU's step (none in today's model)
        // would be charged to CPU 0.
        let cpu = self.running_cpu.unwrap_or(CpuId(0));
        self.mark("luf: flush at allocation");
        let ns = self.luf_flush(cpu, &mask);
        self.luf.stats.takeoff_flushes += 1;
        self.luf.stats.takeoff_flush_ns += ns;
    }

    /// An abandon trigger: flush what LUF still owes now. v10 flushes the global batch; v12 the
    /// batch of `mm` (or of file `file`), or everything (`luf_batch[0]`) when neither is given.
    pub fn luf_abandon(&mut self, cpu: CpuId, why: Abandon, mm: Option<MmId>, file: Option<u32>) {
        let owed = match self.luf.ver {
            Luf::Off => return,
            Luf::V10 => (!self.luf.pending.is_empty()).then(|| self.luf.pending.clone()),
            Luf::V12 => match (mm, file) {
                (Some(m), _) => self.luf.mm_batch.get(&m.0).and_then(|e| self.luf.entry_owed(e)),
                (None, Some(f)) => self.luf.file_batch.get(&f).and_then(|e| self.luf.entry_owed(e)),
                (None, None) => {
                    // Everything pending: the union of the table's owed CPUs.
                    let mut all = CpuMask::new(self.cpus.len());
                    for m in self.luf.table.values().filter_map(|e| self.luf.entry_owed(e)) {
                        all.or(&m);
                    }
                    (!all.is_empty()).then_some(all)
                }
            },
        };
        let Some(mask) = owed else { return };
        self.mark("luf: abandoned, flushed now");
        let ns = self.luf_flush(cpu, &mask);
        self.luf.stats.abandon[why as usize] += 1;
        self.luf.stats.abandon_ns += ns;
    }

    /// Fold what `b` deferred (after its real flush covered `flushed`) and reset it; the tag for
    /// the folios freed now.
    pub fn luf_fold_batch(&mut self, cpu: CpuId, b: &mut crate::mm::rmap::TlbUnmapBatch, flushed: &CpuMask) -> u16 {
        if !b.luf_pending() {
            return 0;
        }
        if self.luf.ver == Luf::V12 {
            // fold_batch() into luf_batch[0] and the per-mm/per-file batches, under their lock.
            self.lock_section(cpu, crate::kernel::locking::LockId::Luf, crate::kernel::locking::Mode::Exclusive, self.p.pte_update_ns);
        }
        let (mms, files) = (std::mem::take(&mut b.luf_mms), std::mem::take(&mut b.luf_files));
        let tag = self.luf_fold(&b.luf, flushed, &mms, &files);
        b.luf.clear_all();
        tag
    }

    /// `folio_put_ugen()`: drop the freeing reference of a deferred folio, handing it its tag. A
    /// folio another reference keeps alive cannot carry the tag: its flush runs now.
    pub fn luf_put_folio(&mut self, cpu: CpuId, pfn: Pfn, tag: u16) {
        if tag == 0 {
            self.put_page(pfn);
            return;
        }
        self.put_page_luf(pfn, tag);
        if self.frame(pfn).flags & crate::sim::pg::FREE == 0 {
            self.luf_abandon(cpu, Abandon::NotFreed, None, None);
        } else {
            self.luf.stats.deferred_folios += 1;
        }
    }
}
