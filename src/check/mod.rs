//! `mmsim check`: the stale-TLB safety oracle ([`oracle`]), fault-injection sites ([`Inject`],
//! switched by the `check.inject` knob) and the seeded stress swarm ([`swarm`]). See docs/check.md.
//!
//! The model calls the hooks below only when `Sim::oracle` is Some (one predictable branch on
//! the hot path otherwise). What is checked, on every access served by a TLB entry and at every
//! frame free and pageout, is the safety argument of mechanisms.md §1: a stale entry may only
//! ever read old, still-valid data of a frame that was neither freed nor written back meanwhile.

pub mod oracle;
pub mod structural;
pub mod swarm;

pub use oracle::{Class, Oracle, Violation};

use crate::hw::tlb::{tag_asid, TlbEntry, F_DIRTY, F_WRITE};
use crate::mm::mmap::find_vma_in;
use crate::sim::{pg, vm, Backing, CpuMask, Sim};
use crate::types::*;

/// A fault-injection site (`check.inject`). Each reproduces a real bug class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Inject {
    #[default]
    None,
    /// try_to_unmap_flush() skipped in shrink_folio_list() before folios are freed.
    SkipFlushBeforeFree,
    /// try_to_unmap_flush_dirty() skipped before pageout().
    SkipDirtyFlushBeforeWriteback,
    /// One CPU (the highest other than the initiator) missing from mm_cpumask when it is ORed
    /// into an unmap batch or used by flush_tlb_mm_range().
    StaleMmCpumask,
    /// switch_mm_irqs_off() does not catch a lazy CPU up to the mm's tlb_gen.
    LazyNoCatchup,
    /// flush_tlb_batched_pending() does nothing.
    SkipBatchedPending,
    /// do_numa_page() makes the PTE accessible before migrating (the pre-5.13 order) while the
    /// migration's unmap still skips the shootdown, as delayed mapping (5.13+) allows.
    NumaMapBeforeMigrate,
    /// LUF (mm/luf.rs) defers the flush of a folio although one of its PTEs was writable.
    LufDeferWritable,
    /// LUF: a tagged page leaves pcp/buddy without its deferred flush.
    LufSkipAllocFlush,
}

impl Inject {
    pub const ALL: &'static [Inject] =
        &[Inject::SkipFlushBeforeFree, Inject::SkipDirtyFlushBeforeWriteback, Inject::StaleMmCpumask, Inject::LazyNoCatchup, Inject::SkipBatchedPending, Inject::NumaMapBeforeMigrate, Inject::LufDeferWritable, Inject::LufSkipAllocFlush];

    pub fn name(self) -> &'static str {
        match self {
            Inject::None => "none",
            Inject::SkipFlushBeforeFree => "skip-flush-before-free",
            Inject::SkipDirtyFlushBeforeWriteback => "skip-dirty-flush-before-writeback",
            Inject::StaleMmCpumask => "stale-mm-cpumask",
            Inject::LazyNoCatchup => "lazy-no-catchup",
            Inject::SkipBatchedPending => "skip-batched-pending",
            Inject::NumaMapBeforeMigrate => "numa-map-before-migrate",
            Inject::LufDeferWritable => "luf-defer-writable",
            Inject::LufSkipAllocFlush => "luf-skip-alloc-flush",
        }
    }

    /// The knob is validated against `INJECT_SITES`, so an unknown name is a simulator bug.
    pub fn from_name(s: &str) -> Inject {
        if s == "none" {
            return Inject::None;
        }
        *Inject::ALL.iter().find(|i| i.name() == s).unwrap_or_else(|| panic!("simulator bug: unknown inject site {s}"))
    }
}

/// The violation `mmsim check` leads with: the oracle's first (its class names the harm), else
/// the structural checkers' first (the broken invariant).
pub fn headline(v: &[Violation]) -> Option<&Violation> {
    v.iter().find(|v| v.class != Class::Structural).or_else(|| v.first())
}

/// `stale-mm-cpumask`: drop the highest CPU other than `initiator` from the mask.
pub fn drop_one_cpu(mask: &mut CpuMask, initiator: CpuId) {
    if let Some(c) = mask.iter().filter(|&c| c != initiator).last() {
        mask.clear(c);
    }
}

/// The oracle's logical key of a shared file page (file, pgoff).
fn file_key(file: FileId, pgoff: u64) -> u64 {
    1 << 63 | (file.0 as u64) << 36 | pgoff
}

fn entry_vpn(e: &TlbEntry) -> u64 {
    e.tag & ((1 << 39) - 1)
}

impl Sim {
    /// Turn the oracle on (before the run).
    pub fn enable_oracle(&mut self) {
        self.oracle = Some(Box::new(Oracle::new(self.frames.len())));
    }

    /// A coverage mark (no-op without the oracle).
    #[inline]
    pub fn mark(&mut self, name: &'static str) {
        if let Some(o) = self.oracle.as_mut() {
            o.mark(name);
        }
    }

    fn oracle_now(&self) -> Ns {
        self.running_cpu.map_or(0, |c| self.now(c))
    }

    /// The logical page whose data `vpn` shows: a shared file page is (file, pgoff), anything
    /// private is (mm, vpn).
    fn logical_key(&self, mm: MmId, vpn: u64) -> u64 {
        self.logical_key_and_vma_flags(mm, vpn).0
    }

    /// [`Sim::logical_key`] and the flags of the VMA at `vpn` (None: unmapped), from one lookup.
    fn logical_key_and_vma_flags(&self, mm: MmId, vpn: u64) -> (u64, Option<u32>) {
        let vma = find_vma_in(self.mm(mm), vpn).filter(|v| v.start <= vpn);
        let key = match vma.map(|v| (v, v.backing)) {
            Some((v, Backing::File { file, pgoff })) if v.shared() => file_key(file, pgoff + vpn - v.start),
            _ => (mm.0 as u64) << 40 | vpn,
        };
        (key, vma.map(|v| v.flags))
    }

    /// After a page walk filled a translation (and, for a write, set the PTE dirty).
    pub fn oracle_fill(&mut self, cpu: CpuId, mm: MmId, vpn: u64, pfn: Pfn, write: bool) {
        let key = self.logical_key(mm, vpn);
        let asid = self.cpus[cpu.0 as usize].tlbstate.loaded_mm_asid;
        let t = self.now(cpu);
        let o = self.oracle.as_mut().expect("oracle on");
        let ver = if write { o.bump_version(key) } else { o.version(key) };
        // The walk found the page's frame: it holds the page's current data.
        o.set_content(pfn, key, ver);
        let frame_gen = o.frame_gen(pfn);
        o.record_fill(cpu, asid, vpn, oracle::Fill { pfn, frame_gen, key, ver, mm });
        o.event(pfn, t, Some(cpu), if write { "tlb fill by a write walk" } else { "tlb fill by a read walk" }, Some(mm), vpn);
    }

    /// An access served by TLB entry `e` without a fault.
    pub fn oracle_hit(&mut self, cpu: CpuId, mm: MmId, vpn: u64, e: TlbEntry, write: bool) {
        let pte = self.mm(mm).pgtable.get(vpn);
        let asid = self.cpus[cpu.0 as usize].tlbstate.loaded_mm_asid;
        let t = self.now(cpu);
        let o = self.oracle.as_mut().expect("oracle on");
        o.checked_hits += 1;
        let kind = if write { "write" } else { "read" };
        if write && (e.flags & F_WRITE == 0 || (e.flags & F_DIRTY == 0 && !(pte.present() && pte.write()))) {
            o.event(e.pfn, t, Some(cpu), "write through a clean entry did not fault", Some(mm), vpn);
            o.report(Class::MissingTrap, e.pfn, format!("cpu{} mm{} vpn {vpn:#x}: a write through a clean entry (flags {:#x}) to pfn {} did not fault; PTE {:?}", cpu.0, mm.0, e.flags, e.pfn.0, pte));
            return;
        }
        let Some(f) = o.fill_of(cpu, asid, vpn).copied() else { return };
        if f.pfn != e.pfn {
            return; // filled by a path the oracle does not see (none today)
        }
        let mapped = pte.present() && pte.pfn() == e.pfn;
        if mapped {
            if write && !pte.write() {
                // Reclaim can unmap a dirty page-cache folio with its flush batched, keep the
                // folio (dirty, not written: MADV_PAGEOUT, or direct reclaim) and unlock it
                // before the batch's flush at the end of shrink_folio_list(); a fault may map it
                // again read-only meanwhile (filemap_map_pages() takes the unlocked folio). A
                // write through the entry that predates the unmap lands in that dirty folio,
                // which will still be written back, as in the unmapped case below: not lost,
                // if the VMA allows the write (a writeback that starts before the flush is
                // caught by `oracle_writeback`).
                let frame = *self.frame(e.pfn);
                let kept_dirty = frame.flags & (pg::FILE | pg::DIRTY) == pg::FILE | pg::DIRTY && file_key(FileId(frame.mapping), frame.index()) == f.key;
                let writable_vma = self.logical_key_and_vma_flags(mm, vpn).1.is_some_and(|fl| fl & vm::WRITE != 0);
                let o = self.oracle.as_mut().expect("oracle on");
                if kept_dirty && writable_vma {
                    let v = o.bump_version(f.key);
                    o.set_content(e.pfn, f.key, v);
                    o.event(e.pfn, t, Some(cpu), "stale writable entry's write to a dirty page-cache folio mapped again read-only", Some(mm), vpn);
                    o.mark("allowed stale write to a dirty page-cache folio mapped again read-only");
                    return;
                }
                o.event(e.pfn, t, Some(cpu), "write through a stale writable entry", Some(mm), vpn);
                o.report(Class::LostWrite, e.pfn, format!("cpu{} mm{} vpn {vpn:#x}: write through a cached writable entry after the PTE was write-protected (pfn {})", cpu.0, mm.0, e.pfn.0));
            } else if write {
                let v = o.bump_version(f.key);
                o.set_content(e.pfn, f.key, v);
                if let Some(r) = o.fill_of(cpu, asid, vpn) {
                    r.ver = v;
                }
            }
            return;
        }
        // The entry is stale: its PTE is gone or maps another frame.
        let (cur_key, vma_flags) = self.logical_key_and_vma_flags(mm, vpn);
        // Still the dirty page-cache folio of the page the entry was filled for (reclaim
        // unmapped it and kept it for the flusher, its unmap flush still pending).
        let frame = *self.frame(e.pfn);
        let kept_dirty = frame.flags & (pg::FILE | pg::DIRTY) == pg::FILE | pg::DIRTY && file_key(FileId(frame.mapping), frame.index()) == f.key;
        // LATR (mm/latr.rs): an entry a lazy munmap has not yet reached on this CPU.
        let latr_lazy = vma_flags.is_none() && self.latr_covers(cpu, mm, vpn);
        let allowed_now = vma_flags.is_some_and(|f| f & if write { vm::WRITE } else { vm::READ } != 0);
        let o = self.oracle.as_mut().expect("oracle on");
        let frame_gen = o.frame_gen(e.pfn);
        // LUF (mm/luf.rs): freed once since the fill, with its flush deferred, not reallocated.
        let luf_freed = o.luf_freed_time(e.pfn).filter(|_| frame_gen == f.frame_gen.wrapping_add(1));
        if frame_gen != f.frame_gen && luf_freed.is_none() {
            o.event(e.pfn, t, Some(cpu), if write { "stale write" } else { "stale read" }, Some(mm), vpn);
            o.report(Class::UseAfterReuse, e.pfn, format!("cpu{} mm{} vpn {vpn:#x}: a {kind} through a stale TLB entry reached pfn {}, freed{} since the fill (generation {} -> {frame_gen}); PTE now {:?}", cpu.0, mm.0, e.pfn.0, if frame_gen.wrapping_sub(f.frame_gen) > 1 { " and reallocated" } else { "" }, f.frame_gen, pte));
        } else if latr_lazy {
            // LATR's contract: until the CPU's next tick or context switch an access to the
            // unmapped range may still reach the old frame, which is not freed before then.
            o.allowed_stale_reads += 1;
            o.event(e.pfn, t, Some(cpu), "access through a lazily invalidated entry (LATR)", Some(mm), vpn);
            o.mark("allowed lazy access (LATR)");
        } else if !allowed_now {
            o.event(e.pfn, t, Some(cpu), if write { "stale write the VMA forbids" } else { "stale read the VMA forbids" }, Some(mm), vpn);
            o.report(Class::MissingTrap, e.pfn, format!("cpu{} mm{} vpn {vpn:#x}: a {kind} through a stale entry to pfn {} did not fault, but the address {} (the unmap or protection change returned without flushing this CPU)", cpu.0, mm.0, e.pfn.0, if vma_flags.is_none() { "is no longer mapped" } else { "no longer allows it" }));
        } else if write && kept_dirty {
            // The write lands in data that will still be written back (the folio is dirty): not
            // lost. A writeback that starts before the flush is (`oracle_writeback`).
            let v = o.bump_version(f.key);
            o.set_content(e.pfn, f.key, v);
            o.event(e.pfn, t, Some(cpu), "stale write to a dirty page-cache folio", Some(mm), vpn);
            o.mark("allowed stale write to a dirty page-cache folio");
        } else if write {
            o.event(e.pfn, t, Some(cpu), "stale write", Some(mm), vpn);
            o.report(Class::LostWrite, e.pfn, format!("cpu{} mm{} vpn {vpn:#x}: a write through a cached dirty writable entry to pfn {} after its unmap, before the flush; PTE now {:?}", cpu.0, mm.0, e.pfn.0, pte));
        } else if o.content(e.pfn).0 != cur_key {
            o.event(e.pfn, t, Some(cpu), "stale read of another mapping's page", Some(mm), vpn);
            o.report(Class::StaleData, e.pfn, format!("cpu{} mm{} vpn {vpn:#x}: a read through a stale entry returned pfn {}, but the address now maps another page (the mapping was replaced since the fill)", cpu.0, mm.0, e.pfn.0));
        } else if o.content(e.pfn).1 != o.version(cur_key) && o.discarded_since(cur_key, o.content(e.pfn).1) {
            o.event(e.pfn, t, Some(cpu), "stale read of discarded data", Some(mm), vpn);
            o.report(Class::StaleData, e.pfn, format!("cpu{} mm{} vpn {vpn:#x}: a read through a stale entry returned pfn {} (data version {}), but that data was discarded (munmap/MADV_DONTNEED) since; the page is now version {}", cpu.0, mm.0, e.pfn.0, o.content(e.pfn).1, o.version(cur_key)));
        } else if let (Some(freed), true) = (luf_freed, o.content(e.pfn).1 != o.version(cur_key)) {
            o.event(e.pfn, t, Some(cpu), "stale read of data changed since LUF freed the frame", Some(mm), vpn);
            o.report(Class::StaleData, e.pfn, format!("cpu{} mm{} vpn {vpn:#x}: a read through a stale entry returned pfn {} (data version {}), freed with its flush deferred by LUF {} ns before; the page has since been written (version {}) and this CPU still sees the old data", cpu.0, mm.0, e.pfn.0, o.content(e.pfn).1, t.saturating_sub(freed), o.version(cur_key)));
        } else if let Some(freed) = luf_freed {
            // LUF's contract: a freed, unchanged, not reallocated frame may still be read.
            o.allowed_stale_reads += 1;
            o.luf_stale_read(t.saturating_sub(freed));
            o.mark("allowed stale read (LUF)");
        } else if o.content(e.pfn).1 != o.version(cur_key) {
            // The page was refaulted into another frame and written there while this entry's
            // deferred flush was still in flight: the frame itself is unchanged and not reused.
            o.allowed_stale_reads += 1;
            o.mark("allowed stale read of superseded data");
        } else {
            o.allowed_stale_reads += 1;
            o.mark("allowed stale read");
        }
    }

    /// write(2) changed page `pgoff` of `file` in frame `pfn`: the shared file page's data is
    /// a new version (what a stale entry to an older frame of it no longer shows).
    pub fn oracle_file_write(&mut self, cpu: CpuId, file: FileId, pgoff: u64, pfn: Pfn) {
        let key = file_key(file, pgoff);
        let t = self.now(cpu);
        let o = self.oracle.as_mut().expect("oracle on");
        let v = o.bump_version(key);
        o.set_content(pfn, key, v);
        o.event(pfn, t, Some(cpu), "written by write(2)", None, pgoff);
    }

    /// The private data at `vpn` of `mm` was discarded (zap of an anon page or a swap entry:
    /// munmap, MADV_DONTNEED, exit): whatever a stale entry still shows is no longer the page's.
    pub fn oracle_discard(&mut self, mm: MmId, vpn: u64) {
        let key = self.logical_key(mm, vpn);
        self.oracle.as_mut().expect("oracle on").discard(key);
    }

    /// CPUs that could use an entry right now (in a real, concurrent machine): running a user
    /// mm, not lazy. Returns (cpu, mm, vpn, flags) of their entries for `pfn` in the loaded ASID.
    fn live_entries_for(&self, pfn: Pfn) -> Vec<(CpuId, MmId, u64, u8)> {
        let mut out = Vec::new();
        for c in &self.cpus {
            let st = &c.tlbstate;
            let Some(mm) = st.loaded_mm else { continue };
            if st.is_lazy {
                continue;
            }
            for e in c.tlb.entries() {
                if e.pfn == pfn && tag_asid(e.tag) == st.loaded_mm_asid {
                    out.push((c.id, mm, entry_vpn(e), e.flags));
                }
            }
        }
        out
    }

    /// A frame (block) is being freed; `luf`: it will carry a LUF tag while free (mm/luf.rs).
    pub fn oracle_free(&mut self, pfn: Pfn, order: usize, luf: bool) {
        let t = self.oracle_now();
        let cpu = self.running_cpu;
        let mut live = if order == 0 { self.live_entries_for(pfn) } else { Vec::new() };
        let luf = order == 0 && luf;
        if luf {
            // LUF frees with read-only entries still cached: allowed until reallocation. A
            // writable one could change the free page (luf-defer-writable).
            live.retain(|e| e.3 & F_WRITE != 0);
        }
        let o = self.oracle.as_mut().expect("oracle on");
        for i in 0..1u32 << order {
            let p = Pfn(pfn.0 + i);
            o.bump_gen(p);
            o.event(p, t, cpu, if luf { "freed, flush deferred (LUF)" } else { "freed" }, None, 0);
        }
        if luf {
            o.luf_freed(pfn, t);
        }
        if let Some(&(c, mm, vpn, flags)) = live.first() {
            o.event(pfn, t, Some(c), "still cached by a running CPU", Some(mm), vpn);
            o.report(Class::UseAfterReuse, pfn, format!("pfn {} freed while cpu{} (running mm{}) still caches it at vpn {vpn:#x} (flags {flags:#x}); {} live entries", pfn.0, c.0, mm.0, live.len()));
        }
    }

    /// A frame is being allocated.
    pub fn oracle_alloc(&mut self, pfn: Pfn, order: usize) {
        let t = self.oracle_now();
        let cpu = self.running_cpu;
        let o = self.oracle.as_mut().expect("oracle on");
        for i in 0..1u32 << order {
            let p = Pfn(pfn.0 + i);
            o.bump_gen(p);
            o.luf_reallocated(p);
            o.event(p, t, cpu, "allocated", None, 0);
        }
    }

    /// pageout() is about to start writing the frame: no running CPU may still be able to write
    /// it through a dirty writable entry (the `writable` rule, mechanisms.md §1 (c)).
    pub fn oracle_writeback(&mut self, cpu: CpuId, pfn: Pfn) {
        let t = self.now(cpu);
        let live: Vec<_> = self.live_entries_for(pfn).into_iter().filter(|e| e.3 & (F_WRITE | F_DIRTY) == F_WRITE | F_DIRTY).collect();
        let o = self.oracle.as_mut().expect("oracle on");
        o.mark("pageout");
        o.event(pfn, t, Some(cpu), "writeback starts", None, 0);
        if let Some(&(c, mm, vpn, _)) = live.first() {
            o.event(pfn, t, Some(c), "dirty writable entry still cached", Some(mm), vpn);
            o.report(Class::LostWrite, pfn, format!("writeback of pfn {} started while cpu{} (running mm{}) still caches a dirty writable entry at vpn {vpn:#x}: a write now is lost", pfn.0, c.0, mm.0));
        }
    }
}
