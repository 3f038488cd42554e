//! Structural checkers (issue 6): invariants of the model's own state, checked between steps
//! when the oracle is on (`Sim::run` calls [`Sim::check_structure`] every
//! `STRUCTURE_CHECK_STEPS` steps and at the end). Steps are atomic, so every reference taken
//! inside a step (reclaim and migration isolation, an mmu_gather batch, wp_page_copy()'s hold on
//! the old folio) has been dropped again: the state checked is one the kernel could rest in.
//! Like the oracle, the checkers never change the model. Each broken invariant is reported as
//! `Class::Structural` with a detail that starts with the checker's name:
//!
//! | checker     | invariant                                                                        |
//! |-------------|----------------------------------------------------------------------------------|
//! | `pgtable`   | every table frame is `PGTABLE`, allocated and in exactly one slot of one live mm; `Dir::used` / `PteTable::used` count the non-empty slots; `Mm::nr_ptes` counts the mm's tables (PGD included) and `Sim::pgtable_pages` their sum; every non-none PTE is present, PROT_NONE or a swap entry, lies inside a VMA and names an existing frame or slot; a PTE mapping the zero page is not writable |
//! | `mapcount`  | a frame's `mapcount` equals the number of mapped PTEs (present or PROT_NONE) of all live mms that point at it (the zero page: always 0) |
//! | `rmap`      | for every mapped frame, `rmap_walk()` returns each of those PTEs exactly once; a mapped frame is `ANON` or `FILE` |
//! | `rss`       | `Mm::rss_anon` / `rss_file` equal the mm's mapped PTEs of `ANON` / other frames (zero page excluded) |
//! | `swap`      | `swap.map[slot]` equals the number of swap PTEs naming the slot; the free-slot list holds exactly the slots whose count is 0, each once |
//! | `pagecache` | every page-cache slot `files[f].pages[i] == Some(pfn)` names a `FILE` frame with `mapping == f`, `index == i`; every `FILE` frame is in its page cache |
//! | `refcount`  | user frames: `refcount == PTEs + page cache + lru_add batches` (see below); kernel frames (page tables, zero page, HugeTLB, vmemmap) are mapped by no PTE and hold `mapcount == 0`; an allocated frame has an owner |
//! | `lru`       | every LRU list is a well-linked list of `LRU` frames of its node and kind (`ANON`, `ACTIVE`), of length `len`, with `tail` its last frame; a frame has `LRU` iff it is on a list; every user frame is on an LRU list or in an lru_add batch, never both |
//! | `buddy`     | per node, `nr_free` (NR_FREE_PAGES) = pages of the buddy free lists (not the pcp lists' pages, which Linux does not count as free either); `free_area.nr_free[o]` counts the blocks of list `o`; each block's head is `BUDDY` with its order, aligned and inside its node, tails not `BUDDY`, no two free buddies left unmerged; every page of a block or pcp list is `FREE` with refcount 0 and mapcount 0 and on exactly one list; every `FREE` frame is on a list; no PTE or table slot points at a free frame |
//! | `cpumask`   | a CPU whose `loaded_mm` is Some(mm) (lazy or not) is in `mm_cpumask(mm)` and the mm is live; a CPU running an mm (not lazy) has the mm's ctx_id in its loaded ASID slot and is current with the mm's `tlb_gen` (every flush is synchronous here, and a CPU running the mm is always a target), unless a reclaim's deferred flush in flight still covers it |
//! | `tlb`       | for every CPU and ASID slot whose `ctx_id` is a live mm's: a TLB entry of that ASID that is stale (its PTE not present, mapping another frame, or read-only under a writable entry; for a 2 MiB hugetlb entry, no hugetlb mapping covering it with that frame) implies `ctxs[slot].tlb_gen < mm.tlb_gen`: a flush is owed to the CPU, which it gets by IPI, batched flush or at switch_mm; a slot is never ahead of its mm |
//!
//! References the model counts in `Frame::refcount` (verified against every get/put):
//! - one per PTE mapping a user frame (`map_new_anon()` hands over the allocation's reference,
//!   `map_file_page()` and `copy_page_range()` take one; the zero page is never counted);
//! - one for the page cache while `files[mapping].pages[index] == Some(pfn)` (the allocation's
//!   reference in `filemap_fault()`);
//! - one per occurrence in a CPU's `lru_add_batch` (`folio_add_lru()`'s `folio_get()`);
//! - one held by kernel work in flight between two steps of a task: a folio waiting in a
//!   reclaim's `ReclaimTail::free_folios` (and `luf_folios`) for the flush before its free, a NUMA hint fault's
//!   isolated folio (`TaskNuma::pending`, the isolation's `folio_get()`);
//! - within a step only, and so never seen here: the mmu_gather's pages (their PTE references, dropped after the flush),
//!   `wp_page_copy()`'s hold on the old folio, migration's hold on the source.
//!
//! No swap cache exists (swapfile.rs), LRU isolation takes no reference of its own, and kernel
//! frames have fixed counts (page tables and vmemmap frames 1, a HugeTLB or PMD-mapped vmemmap
//! block 1 on its head and 0 on its tails, the zero page 1), so for user frames the check is an
//! equality.
//!
//! TLB entries: kernel translations are not modelled as entries (`flush_tlb_kernel_range()` only
//! drops user ones), so no kernel-range exclusion is needed; 2 MiB entries come only from
//! `hugetlb_fault()` and are checked against `hugetlb.mappings` (a 1 GiB page is cached as 2 MiB
//! entries of its parts), 4 KiB entries against the page table of the slot's mm. Entries of a
//! slot whose mm is dead, or of a slot behind its mm's `tlb_gen`, are never used again without a
//! flush (switch_mm flushes a slot that is behind, and ctx_ids are never reused).
//!
//! Reporting: at most [`PER_CHECK`] problems per checker and call; a problem already reported in
//! this run is not reported again (a broken state usually persists from one call to the next),
//! and the checkers leave the last slot of the oracle's cap to the oracle's own classes.
//!
//! Cost: O(frames + PTEs + page-cache slots + swap slots + TLB entries) per call, plus one
//! `rmap_walk()` per mapped frame, with one scratch array per frame and one per swap slot; about
//! 3% of a `mmsim check` run (~0.2 ms a call, ~8 calls a seed).

use crate::arch::x86::mm::tlb::TLB_NR_DYN_ASIDS;
use crate::check::Class;
use crate::hw::tlb::{tag_asid, F_WRITE};
use crate::mm::hugetlb::{HPAGE_ORDERS, HUGETLB_MAPPING};
use crate::mm::hugetlb_vmemmap::VMEMMAP_MAPPING;
use crate::mm::page_alloc::{MAX_PAGE_ORDER, NIL};
use crate::mm::pgtable::Pte;
use crate::sim::{pg, Sim};
use crate::types::*;

/// Problems reported per checker and call (the oracle keeps only its first few anyway).
const PER_CHECK: usize = 3;
/// hw/tlb.rs's tag bit of a 2 MiB translation.
const TAG_HUGE: u64 = 1 << 39;

/// What the scans found per frame.
#[derive(Clone, Copy, Default)]
struct Seen {
    /// Mapped user PTEs (present or PROT_NONE) pointing at the frame, over all live mms.
    ptes: u32,
    /// Page-table slots (PGD of an mm, or a slot of an upper-level table) holding the frame.
    tables: u16,
    /// Occurrences in the per-CPU lru_add batches.
    batch: u16,
    /// Held by kernel work in flight between two steps of a task: a reclaim's frees waiting
    /// for its flush and the folios of a batch that paused (`Task::reclaim_tail`), a NUMA hint
    /// fault's isolated folio
    /// (`TaskNuma::pending`). Each holds one reference and keeps the folio off the LRU.
    inflight: u16,
    /// Page-cache slots naming the frame.
    cache: u16,
    /// Free lists (buddy blocks and pcp lists) holding the frame.
    free: u8,
    /// LRU lists holding the frame.
    lru: u8,
    /// Held back by a LATR lazy munmap until every CPU applied it (mm/latr.rs): one reference,
    /// the folio stays on the LRU.
    latr: u16,
}

/// The problems found in one call, at most [`PER_CHECK`] per checker.
#[derive(Default)]
struct Found {
    items: Vec<(Pfn, String)>,
}

impl Found {
    /// Is there room for another problem of `check`? (Format the detail only if so.)
    fn want(&self, check: &str) -> bool {
        self.items.iter().filter(|(_, d)| d.strip_prefix(check).is_some_and(|r| r.starts_with(':'))).count() < PER_CHECK
    }
    fn add(&mut self, pfn: Pfn, detail: String) {
        // One stale translation sits in an L1 array and the STLB alike: report it once.
        if !self.items.iter().any(|(_, d)| *d == detail) {
            self.items.push((pfn, detail));
        }
    }
}

macro_rules! report {
    ($found:expr, $check:literal, $pfn:expr, $($fmt:tt)+) => {
        if $found.want($check) {
            $found.add($pfn, format!(concat!($check, ": {}"), format_args!($($fmt)+)));
        }
    };
}

/// The LRU list index of a frame's flags (vmscan.rs `lru_of()`: `Lru as usize`).
fn lru_index(flags: u16) -> usize {
    match (flags & pg::ANON != 0, flags & pg::ACTIVE != 0) {
        (true, false) => 0,
        (true, true) => 1,
        (false, false) => 2,
        (false, true) => 3,
    }
}

/// A frame owned by the kernel itself (never a user page).
fn kernel_frame(f: &crate::sim::Frame) -> bool {
    f.flags & (pg::PGTABLE | pg::ZERO) != 0 || f.mapping == HUGETLB_MAPPING || f.mapping == VMEMMAP_MAPPING || f.mapping == crate::mm::filemap::SLAB_MAPPING
}

impl Sim {
    /// Check the structural invariants; each broken one is reported to the oracle as
    /// `Class::Structural`. Called between steps (never inside one) by `Sim::run`. Does nothing
    /// without the oracle.
    pub fn check_structure(&mut self) {
        if !self.oracle.as_ref().is_some_and(|o| o.structural) {
            return;
        }
        // The checkers read every frame, free ones too: write the pristine blocks first (a
        // change of representation only, mm/page_alloc.rs `FreeArea`).
        self.materialize_free_lists();
        let mut found = Found::default();
        let mut seen = vec![Seen::default(); self.frames.len()];
        let mut swap_ptes = vec![0u32; self.swap.map.len()];
        self.scan_page_tables(&mut seen, &mut swap_ptes, &mut found);
        self.check_mapcount_rmap(&seen, &mut found);
        self.check_swap(&swap_ptes, &mut found);
        self.scan_page_cache(&mut seen, &mut found);
        self.count_in_flight(&mut seen);
        self.check_lru(&mut seen, &mut found);
        self.check_buddy(&mut seen, &mut found);
        self.check_refcounts(&seen, &mut found);
        self.check_cpumask(&mut found);
        self.check_tlb(&mut found);
        // A broken state usually persists: report each problem once per run, and leave the
        // oracle at least one slot of its cap for the classes only it can find.
        let o = self.oracle.as_mut().expect("oracle on");
        let cap = o.max_violations.saturating_sub(1).max(1);
        for (pfn, detail) in found.items {
            let ours = o.violations.iter().filter(|v| v.class == Class::Structural);
            if ours.clone().count() >= cap || ours.clone().any(|v| v.detail == detail) {
                continue;
            }
            o.report(Class::Structural, pfn, detail);
        }
    }

    /// One walk over every live mm's page tables (address order): counts table slots and
    /// mapped PTEs per frame and swap PTEs per slot; checks the `pgtable` and `rss` invariants.
    fn scan_page_tables(&self, seen: &mut [Seen], swap_ptes: &mut [u32], found: &mut Found) {
        let nframes = self.frames.len();
        macro_rules! filled {
            ($slots:expr) => {
                $slots.iter().filter(|s| s.is_some()).count() as u32
            };
        }
        for (mi, m) in self.mms.iter().enumerate() {
            let Some(m) = m.as_ref() else { continue };
            let mut tables = 0u64;
            let (mut rss_anon, mut rss_file) = (0u64, 0u64);
            let pgd = &m.pgtable.pgd;
            self.note_table(seen, found, mi, pgd.pfn, "PGD", &mut tables);
            let mut vmas = m.vmas.values().peekable();
            if filled!(pgd.slots) != pgd.used {
                report!(found, "pgtable", pgd.pfn, "mm{mi}'s PGD (pfn {}) has used {} but {} slots filled", pgd.pfn, pgd.used, filled!(pgd.slots));
            }
            for (i3, pud) in pgd.slots.iter().enumerate() {
                let Some(pud) = pud.as_deref() else { continue };
                self.note_table(seen, found, mi, pud.pfn, "PUD", &mut tables);
                if filled!(pud.slots) != pud.used {
                    report!(found, "pgtable", pud.pfn, "mm{mi}'s PUD {i3} (pfn {}) has used {} but {} slots filled", pud.pfn, pud.used, filled!(pud.slots));
                }
                for (i2, pmd) in pud.slots.iter().enumerate() {
                    let Some(pmd) = pmd.as_deref() else { continue };
                    self.note_table(seen, found, mi, pmd.pfn, "PMD", &mut tables);
                    if filled!(pmd.slots) != pmd.used {
                        report!(found, "pgtable", pmd.pfn, "mm{mi}'s PMD (pfn {}) has used {} but {} slots filled", pmd.pfn, pmd.used, filled!(pmd.slots));
                    }
                    for (i1, pt) in pmd.slots.iter().enumerate() {
                        let Some(pt) = pt.as_deref() else { continue };
                        self.note_table(seen, found, mi, pt.pfn, "PTE table", &mut tables);
                        let base = ((i3 as u64 * 512 + i2 as u64) * 512 + i1 as u64) * 512;
                        let mut set = 0u32;
                        for (i0, &pte) in pt.ptes.iter().enumerate() {
                            if pte.none() {
                                continue;
                            }
                            set += 1;
                            let vpn = base + i0 as u64;
                            while vmas.peek().is_some_and(|v| v.end <= vpn) {
                                vmas.next();
                            }
                            if vmas.peek().is_none_or(|v| v.start > vpn) {
                                report!(found, "pgtable", if pte.mapped() { pte.pfn() } else { Pfn(0) }, "mm{mi} vpn {vpn:#x} has PTE {} outside every VMA", describe(pte));
                            }
                            if pte.is_swap() {
                                let slot = pte.swap_slot() as usize;
                                match swap_ptes.get_mut(slot) {
                                    Some(c) => *c += 1,
                                    None => report!(found, "pgtable", Pfn(0), "mm{mi} vpn {vpn:#x}: swap PTE names slot {slot} of a {}-slot device", self.swap.map.len()),
                                }
                                continue;
                            }
                            if !pte.mapped() {
                                report!(found, "pgtable", Pfn(0), "mm{mi} vpn {vpn:#x}: PTE {pte:?} is neither mapped nor a swap entry");
                                continue;
                            }
                            let pfn = pte.pfn();
                            if pfn.0 as usize >= nframes {
                                report!(found, "pgtable", Pfn(0), "mm{mi} vpn {vpn:#x}: PTE {pte:?} maps pfn {pfn}, beyond the last frame");
                                continue;
                            }
                            let f = &self.frames[pfn.0 as usize];
                            if f.flags & pg::ZERO != 0 {
                                if pte.write() {
                                    report!(found, "pgtable", pfn, "mm{mi} vpn {vpn:#x}: the zero page (pfn {pfn}) is mapped writable");
                                }
                                continue;
                            }
                            seen[pfn.0 as usize].ptes += 1;
                            if f.flags & pg::ANON != 0 {
                                rss_anon += 1
                            } else {
                                rss_file += 1
                            }
                        }
                        if set != pt.used {
                            report!(found, "pgtable", pt.pfn, "mm{mi}'s PTE table for vpn {base:#x} (pfn {}) has used {} but {set} PTEs set", pt.pfn, pt.used);
                        }
                    }
                }
            }
            if tables != m.nr_ptes {
                report!(found, "pgtable", pgd.pfn, "mm{mi} has nr_ptes {} but {tables} page-table pages", m.nr_ptes);
            }
            if (rss_anon, rss_file) != (m.rss_anon, m.rss_file) {
                report!(found, "rss", Pfn(0), "mm{mi} has rss_anon {} rss_file {} but its PTEs map {rss_anon} anon and {rss_file} file pages", m.rss_anon, m.rss_file);
            }
        }
        let live: u64 = self.mms.iter().flatten().map(|m| m.nr_ptes).sum();
        if live != self.pgtable_pages {
            report!(found, "pgtable", Pfn(0), "Sim::pgtable_pages is {} but the live mms have {live} page-table pages", self.pgtable_pages);
        }
    }

    /// A page-table page of mm `mi` at `pfn`.
    fn note_table(&self, seen: &mut [Seen], found: &mut Found, mi: usize, pfn: Pfn, what: &str, tables: &mut u64) {
        *tables += 1;
        let Some(f) = self.frames.get(pfn.0 as usize) else {
            report!(found, "pgtable", Pfn(0), "mm{mi} has a {what} at pfn {pfn}, beyond the last frame");
            return;
        };
        let s = &mut seen[pfn.0 as usize];
        s.tables = s.tables.saturating_add(1);
        if f.flags & pg::PGTABLE == 0 || f.flags & pg::FREE != 0 {
            report!(found, "pgtable", pfn, "mm{mi}'s {what} at pfn {pfn} has flags {:#x} (want PGTABLE, not FREE)", f.flags);
        }
    }

    /// Some (mm, vpn) whose mapped PTE points at `pfn`, other than those in `skip` (a slow walk,
    /// for the detail of a report only).
    fn find_mapping(&self, pfn: Pfn, skip: &[(MmId, u64)]) -> Option<(MmId, u64)> {
        for (mi, m) in self.mms.iter().enumerate() {
            let Some(m) = m.as_ref() else { continue };
            let mut hit = None;
            m.pgtable.for_each_mapped(0, 1 << 36, |vpn, pte| {
                if hit.is_none() && pte.mapped() && pte.pfn() == pfn && !skip.contains(&(MmId(mi as u32), vpn)) {
                    hit = Some(vpn);
                }
            });
            if let Some(vpn) = hit {
                return Some((MmId(mi as u32), vpn));
            }
        }
        None
    }

    /// `mapcount` and `rmap`: the PTE census against each frame's mapcount and `rmap_walk()`.
    fn check_mapcount_rmap(&self, seen: &[Seen], found: &mut Found) {
        for (i, f) in self.frames.iter().enumerate() {
            let pfn = Pfn(i as u32);
            let n = seen[i].ptes;
            if f.flags & pg::ZERO != 0 {
                if f.mapcount != 0 {
                    report!(found, "mapcount", pfn, "the zero page (pfn {pfn}) has mapcount {}", f.mapcount);
                }
                continue;
            }
            if f.mapcount != n as i32 && found.want("mapcount") {
                let at = self.find_mapping(pfn, &[]).map_or(String::new(), |(mm, vpn)| format!(" (mm{} vpn {vpn:#x})", mm.0));
                found.add(pfn, format!("mapcount: pfn {pfn} has mapcount {} but {n} PTE{} map{} it{at}; flags {:#x} refcount {}", f.mapcount, if n == 1 { "" } else { "s" }, if n == 1 { "s" } else { "" }, f.flags, f.refcount));
            }
            if n == 0 {
                continue;
            }
            if f.flags & (pg::ANON | pg::FILE) == 0 {
                report!(found, "rmap", pfn, "pfn {pfn} is mapped by {n} PTEs but is neither ANON nor FILE (flags {:#x}, mapping {})", f.flags, f.mapping);
                continue;
            }
            if (f.flags & pg::ANON != 0 && f.mapping as usize >= self.anon_vmas.len()) || (f.flags & pg::FILE != 0 && f.mapping as usize >= self.files.len()) {
                report!(found, "rmap", pfn, "pfn {pfn} (flags {:#x}) names mapping {}, which does not exist", f.flags, f.mapping);
                continue;
            }
            let walk = self.rmap_walk(pfn);
            let dup = walk.iter().enumerate().find(|&(k, x)| walk[..k].contains(x)).map(|(_, x)| *x);
            if let Some((mm, vpn)) = dup {
                report!(found, "rmap", pfn, "rmap_walk(pfn {pfn}) returns mm{} vpn {vpn:#x} twice ({} results for {n} PTEs)", mm.0, walk.len());
            } else if walk.len() != n as usize && found.want("rmap") {
                let missed = self.find_mapping(pfn, &walk).map_or(String::new(), |(mm, vpn)| format!(", e.g. mm{} vpn {vpn:#x}", mm.0));
                let kind = if f.flags & pg::ANON != 0 { "anon" } else { "file" };
                found.add(pfn, format!("rmap: rmap_walk(pfn {pfn}, {kind}, mapping {} index {:#x}) finds {} of the {n} PTEs mapping it{missed}", f.mapping, f.index(), walk.len()));
            }
        }
    }

    /// `swap`: swap_map against the swap PTEs, and the free-slot list.
    fn check_swap(&self, swap_ptes: &[u32], found: &mut Found) {
        let map = &self.swap.map;
        for (slot, (&want, &have)) in swap_ptes.iter().zip(map).enumerate() {
            if want != have as u32 {
                report!(found, "swap", Pfn(0), "slot {slot} has swap count {have} but {want} swap PTEs name it");
            }
        }
        let mut listed = vec![false; map.len()];
        for &slot in &self.swap.free {
            let s = slot as usize;
            if s >= map.len() {
                report!(found, "swap", Pfn(0), "free-slot list holds slot {s} of a {}-slot device", map.len());
                continue;
            }
            if listed[s] {
                report!(found, "swap", Pfn(0), "slot {s} is on the free-slot list twice");
            }
            listed[s] = true;
            if map[s] != 0 {
                report!(found, "swap", Pfn(0), "slot {s} is on the free-slot list but has swap count {}", map[s]);
            }
        }
        for (s, (&l, &c)) in listed.iter().zip(map).enumerate() {
            if !l && c == 0 {
                report!(found, "swap", Pfn(0), "slot {s} has swap count 0 but is not on the free-slot list (leaked)");
            }
        }
    }

    /// `pagecache`: page-cache slots against the frames' FILE/mapping/index.
    fn scan_page_cache(&self, seen: &mut [Seen], found: &mut Found) {
        for (fi, file) in self.files.iter().enumerate() {
            for (idx, p) in file.pages.iter().enumerate() {
                let Some(pfn) = p.page() else { continue };
                let Some(f) = self.frames.get(pfn.0 as usize) else {
                    report!(found, "pagecache", Pfn(0), "file {fi} ({}) pgoff {idx:#x} names pfn {pfn}, beyond the last frame", file.name);
                    continue;
                };
                seen[pfn.0 as usize].cache += 1;
                if f.flags & (pg::FILE | pg::FREE) != pg::FILE || f.mapping as usize != fi || f.index() != idx as u64 {
                    report!(found, "pagecache", pfn, "file {fi} ({}) pgoff {idx:#x} holds pfn {pfn} with flags {:#x} mapping {} index {:#x}", file.name, f.flags, f.mapping, f.index());
                }
            }
        }
        for (i, f) in self.frames.iter().enumerate() {
            if f.flags & pg::FILE != 0 && seen[i].cache != 1 {
                report!(found, "pagecache", Pfn(i as u32), "FILE pfn {i} (file {} pgoff {:#x}) is in {} page-cache slots", f.mapping, f.index(), seen[i].cache);
            }
        }
    }

    /// Frames held by kernel work in flight between a task's steps (see `Seen::inflight`).
    fn count_in_flight(&self, seen: &mut [Seen]) {
        for t in &self.tasks {
            if let Some(tail) = &t.reclaim_tail {
                let paused = tail.paused.iter().flat_map(|b| b.rest());
                for &p in tail.free_folios.iter().chain(&tail.luf_folios).chain(tail.keep.iter().map(|(p, _)| p)).chain(paused) {
                    seen[p.0 as usize].inflight += 1;
                }
            }
            if let Some(w) = &t.numa.pending {
                seen[w.pfn.0 as usize].inflight += 1;
            }
        }
        for p in self.latr_held_pages() {
            seen[p.0 as usize].latr += 1;
        }
    }

    /// Whether a reclaim's deferred flush still owes `cpu` a flush (a task's pending batch
    /// covers it): the CPU may then lag behind the mm's tlb_gen until that flush.
    fn flush_in_flight_for(&self, cpu: CpuId) -> bool {
        self.tasks.iter().any(|t| t.reclaim_tail.as_ref().is_some_and(|r| r.batch.flush_required && r.batch.cpumask.test(cpu)))
    }

    /// `lru`: the LRU lists' links, lengths and flags; every user frame on a list or in an
    /// lru_add batch (exactly one of the two). Counts batch occurrences into `seen`.
    fn check_lru(&self, seen: &mut [Seen], found: &mut Found) {
        let nframes = self.frames.len();
        for batch in &self.lru_add_batch {
            for &pfn in batch {
                match seen.get_mut(pfn.0 as usize) {
                    Some(s) => s.batch += 1,
                    None => report!(found, "lru", Pfn(0), "an lru_add batch holds pfn {pfn}, beyond the last frame"),
                }
            }
        }
        for (ni, node) in self.nodes.iter().enumerate() {
            for (li, l) in node.lru.lists.iter().enumerate() {
                let (mut p, mut prev, mut len) = (l.head, NIL, 0u64);
                while p != NIL {
                    if p as usize >= nframes || len > nframes as u64 {
                        report!(found, "lru", Pfn(0), "node {ni} list {li}: link to {p} after {len} frames (corrupt or cyclic)");
                        break;
                    }
                    let f = &self.frames[p as usize];
                    let pfn = Pfn(p);
                    seen[p as usize].lru += 1;
                    if f.flags & pg::LRU == 0 || f.flags & pg::FREE != 0 || lru_index(f.flags) != li || self.pfn_to_nid(pfn) != ni {
                        report!(found, "lru", pfn, "pfn {p} on node {ni} list {li} has flags {:#x} node {} (list {} by its flags)", f.flags, self.pfn_to_nid(pfn), lru_index(f.flags));
                    }
                    if f.lru_prev != prev {
                        report!(found, "lru", pfn, "pfn {p} on node {ni} list {li} has lru_prev {} but follows {prev}", f.lru_prev);
                    }
                    len += 1;
                    prev = p;
                    p = f.lru_next;
                }
                if len != l.len || l.tail != prev {
                    report!(found, "lru", Pfn(0), "node {ni} list {li} has len {} tail {} but {len} frames ending at {prev}", l.len, l.tail);
                }
            }
        }
        for (i, f) in self.frames.iter().enumerate() {
            let s = seen[i];
            let pfn = Pfn(i as u32);
            if s.lru > 1 || (s.lru == 1) != (f.flags & pg::LRU != 0) {
                report!(found, "lru", pfn, "pfn {i} has flags {:#x} but is on {} LRU lists", f.flags, s.lru);
            }
            let user = f.flags & (pg::ANON | pg::FILE) != 0 && f.flags & pg::FREE == 0;
            if user && s.latr == 0 && s.lru as u32 + s.batch as u32 + s.inflight as u32 != 1 {
                report!(found, "lru", pfn, "user pfn {i} (flags {:#x}, refcount {}, mapcount {}) is on {} LRU lists, in {} lru_add batches and held by {} kernel works in flight (want exactly one of these)", f.flags, f.refcount, f.mapcount, s.lru, s.batch, s.inflight);
            } else if !user && s.batch > 0 {
                report!(found, "lru", pfn, "pfn {i} (flags {:#x}) is in an lru_add batch but is not a user page", f.flags);
            }
        }
    }

    /// `buddy`: the free lists and pcp lists against NR_FREE_PAGES and the frames' flags.
    fn check_buddy(&self, seen: &mut [Seen], found: &mut Found) {
        let nframes = self.frames.len();
        let mut pcp_pages = vec![0u64; self.nodes.len()];
        for (ci, per_node) in self.pcp.iter().enumerate() {
            for (ni, pcp) in per_node.iter().enumerate() {
                for &pfn in &pcp.list {
                    if pfn.0 as usize >= nframes || self.pfn_to_nid(pfn) != ni {
                        report!(found, "buddy", Pfn(0), "cpu{ci}'s pcp list for node {ni} holds pfn {pfn}, not a frame of the node");
                        continue;
                    }
                    self.note_free(seen, found, pfn.0, FreeList::Pcp { cpu: ci, node: ni });
                    pcp_pages[ni] += 1;
                }
            }
        }
        for (ni, node) in self.nodes.iter().enumerate() {
            let (start, end) = (node.start_pfn, node.start_pfn + node.nr_pages);
            let mut buddy_pages = 0u64;
            for o in 0..=MAX_PAGE_ORDER {
                let (mut p, mut prev, mut blocks) = (node.free_area.head[o], NIL, 0u64);
                while p != NIL {
                    if p < start || p >= end || blocks > nframes as u64 {
                        report!(found, "buddy", Pfn(0), "node {ni} order-{o} free list links to {p} after {blocks} blocks (outside the node, or cyclic)");
                        break;
                    }
                    let f = &self.frames[p as usize];
                    let size = 1u32 << o;
                    if (p - start) % size != 0 || p + size > end || f.buddy_order() != o {
                        report!(found, "buddy", Pfn(p), "node {ni} order-{o} block at pfn {p} has order {} (misaligned, oversized or mislabelled)", f.buddy_order());
                    } else {
                        for q in p..p + size {
                            self.note_free(seen, found, q, FreeList::Block { node: ni, order: o, head: p });
                        }
                        buddy_pages += size as u64;
                        // __free_one_page() merges a block with its free buddy of the same order.
                        let b = start + ((p - start) ^ size);
                        if o < MAX_PAGE_ORDER && b + size <= end {
                            let bf = &self.frames[b as usize];
                            if bf.flags & pg::BUDDY != 0 && bf.buddy_order() == o {
                                report!(found, "buddy", Pfn(p), "node {ni}: order-{o} blocks at {p} and {b} are free buddies left unmerged");
                            }
                        }
                    }
                    if f.lru_prev != prev {
                        report!(found, "buddy", Pfn(p), "node {ni} order-{o} block at pfn {p} has lru_prev {} but follows {prev}", f.lru_prev);
                    }
                    blocks += 1;
                    prev = p;
                    p = f.lru_next;
                }
                if blocks != node.free_area.nr_free[o] {
                    report!(found, "buddy", Pfn(0), "node {ni} free_area.nr_free[{o}] is {} but the list holds {blocks} blocks", node.free_area.nr_free[o]);
                }
            }
            if node.nr_free != buddy_pages {
                report!(found, "buddy", Pfn(0), "node {ni} nr_free (NR_FREE_PAGES) is {} but the buddy lists hold {buddy_pages} pages (and the pcp lists {}, which it does not count)", node.nr_free, pcp_pages[ni]);
            }
        }
        for (i, f) in self.frames.iter().enumerate() {
            let s = seen[i];
            if f.flags & pg::FREE != 0 && s.free == 0 {
                report!(found, "buddy", Pfn(i as u32), "pfn {i} is FREE (flags {:#x}) but on no buddy or pcp list", f.flags);
            }
            if s.free > 0 && (s.ptes > 0 || s.tables > 0) {
                let at = self.find_mapping(Pfn(i as u32), &[]).map_or(String::new(), |(mm, vpn)| format!(" (mm{} vpn {vpn:#x})", mm.0));
                report!(found, "buddy", Pfn(i as u32), "free pfn {i} is still mapped by {} PTEs{at} and held in {} page-table slots", s.ptes, s.tables);
            }
        }
    }

    /// Page `p` on a free list.
    fn note_free(&self, seen: &mut [Seen], found: &mut Found, p: u32, on: FreeList) {
        let f = &self.frames[p as usize];
        let s = &mut seen[p as usize];
        s.free = s.free.saturating_add(1);
        if s.free > 1 {
            report!(found, "buddy", Pfn(p), "pfn {p} is on more than one free list (again on {on})");
        }
        let head = matches!(on, FreeList::Block { head, .. } if head == p);
        let bad_flags = f.flags & pg::FREE == 0 || f.flags & !(pg::FREE | pg::BUDDY) != 0 || (f.flags & pg::BUDDY != 0) != head;
        if bad_flags || f.refcount != 0 || f.mapcount != 0 {
            report!(found, "buddy", Pfn(p), "pfn {p} on {on} has flags {:#x} refcount {} mapcount {} (want FREE{}, 0, 0)", f.flags, f.refcount, f.mapcount, if head { "|BUDDY" } else { "" });
        }
    }

    /// `refcount` (and the owners of allocated frames): see the module doc for what is counted.
    fn check_refcounts(&self, seen: &[Seen], found: &mut Found) {
        for (i, f) in self.frames.iter().enumerate() {
            if f.flags & pg::FREE != 0 {
                continue; // the buddy checker's
            }
            let s = seen[i];
            let pfn = Pfn(i as u32);
            if kernel_frame(f) {
                let table = f.flags & pg::PGTABLE != 0;
                let want_tables = (table && s.latr == 0) as u16;
                if s.ptes > 0 || f.mapcount != 0 || s.cache > 0 || s.tables != want_tables || f.refcount > 1 || (table && f.refcount != 1) || s.latr > 1 {
                    report!(found, "refcount", pfn, "kernel pfn {i} (flags {:#x}, mapping {:#x}) has refcount {} mapcount {}, {} user PTEs, {} page-table slots, {} page-cache slots", f.flags, f.mapping, f.refcount, f.mapcount, s.ptes, s.tables, s.cache);
                }
                continue;
            }
            if f.flags & (pg::ANON | pg::FILE) == 0 && s.inflight == 0 && s.latr == 0 {
                report!(found, "refcount", pfn, "pfn {i} is allocated (refcount {}, mapcount {}, flags {:#x}) but owned by nothing: no page table, page cache, anon mapping or kernel user", f.refcount, f.mapcount, f.flags);
                continue;
            }
            if s.tables > 0 {
                report!(found, "refcount", pfn, "user pfn {i} (flags {:#x}) is also held in {} page-table slots", f.flags, s.tables);
            }
            let want = s.ptes + s.cache.min(1) as u32 * (f.flags & pg::FILE != 0) as u32 + s.batch as u32 + s.inflight as u32 + s.latr as u32;
            if f.refcount != want || f.refcount < f.mapcount.max(0) as u32 {
                report!(found, "refcount", pfn, "pfn {i} (flags {:#x}) has refcount {} but the model holds {want} references: {} PTEs, {} page cache, {} lru_add batch, {} in flight (mapcount {})", f.flags, f.refcount, s.ptes, s.cache.min(1), s.batch, s.inflight, f.mapcount);
            }
        }
    }

    /// `cpumask`: loaded mms against mm_cpumask, and running CPUs current with their mm.
    fn check_cpumask(&self, found: &mut Found) {
        for c in &self.cpus {
            let st = &c.tlbstate;
            let Some(mm) = st.loaded_mm else { continue };
            let lazy = if st.is_lazy { " (lazy)" } else { "" };
            let Some(m) = self.mms.get(mm.0 as usize).and_then(|m| m.as_ref()) else {
                report!(found, "cpumask", Pfn(0), "cpu{} has mm{}{lazy} loaded, which is dead", c.id.0, mm.0);
                continue;
            };
            if !m.cpumask.test(c.id) {
                report!(found, "cpumask", Pfn(0), "cpu{} has mm{}{lazy} loaded but is not in its mm_cpumask", c.id.0, mm.0);
            }
            if st.is_lazy {
                continue;
            }
            let a = st.loaded_mm_asid as usize;
            if self.is_mm_global_asid(mm, a as u16) {
                continue; // a global ASID: INVLPGB/RAR keep it current (arch/x86/mm/invlpgb.rs)
            }
            let Some(ctx) = st.ctxs.get(a) else {
                report!(found, "cpumask", Pfn(0), "cpu{} runs mm{} in ASID {a}, beyond the {TLB_NR_DYN_ASIDS} slots", c.id.0, mm.0);
                continue;
            };
            if ctx.ctx_id != m.ctx_id {
                report!(found, "cpumask", Pfn(0), "cpu{} runs mm{} (ctx_id {}) in ASID {a}, whose slot holds ctx_id {}", c.id.0, mm.0, m.ctx_id, ctx.ctx_id);
            } else if ctx.tlb_gen != m.tlb_gen && !self.flush_in_flight_for(c.id) && !self.latr_pending_for(c.id, mm) && !self.p.luf.on() {
                // (LUF, mm/luf.rs, leaves running CPUs behind the mm's tlb_gen by design: their
                // read-only entries are flushed when the pages are allocated again. The oracle
                // judges what they read.)
                report!(found, "cpumask", Pfn(0), "cpu{} runs mm{} (not lazy) at tlb_gen {} but the mm is at {}: a flush it was owed never reached it", c.id.0, mm.0, ctx.tlb_gen, m.tlb_gen);
            }
        }
    }

    /// `tlb`: no stale entry in an ASID slot that claims to be current with its mm.
    fn check_tlb(&self, found: &mut Found) {
        for c in &self.cpus {
            let st = &c.tlbstate;
            // The live mm of each ASID slot (ctx_id is unique forever).
            let mut slot_mm: [Option<MmId>; TLB_NR_DYN_ASIDS] = [None; TLB_NR_DYN_ASIDS];
            for (a, ctx) in st.ctxs.iter().enumerate() {
                if ctx.ctx_id == 0 {
                    continue;
                }
                slot_mm[a] = self.mms.iter().flatten().find(|m| m.ctx_id == ctx.ctx_id).map(|m| m.id);
                if let Some(mm) = slot_mm[a] {
                    let m = self.mm(mm);
                    if ctx.tlb_gen > m.tlb_gen {
                        report!(found, "tlb", Pfn(0), "cpu{} ASID {a} (mm{}) is at tlb_gen {}, ahead of the mm's {}", c.id.0, mm.0, ctx.tlb_gen, m.tlb_gen);
                    }
                }
            }
            for e in c.tlb.entries() {
                let a = tag_asid(e.tag) as usize;
                let Some(&Some(mm)) = slot_mm.get(a) else { continue };
                let m = self.mm(mm);
                let ctx = st.ctxs[a];
                if ctx.tlb_gen < m.tlb_gen {
                    continue; // a flush is owed: the CPU catches up before it uses the ASID again
                }
                let w = if e.flags & F_WRITE != 0 { "W" } else { "-" };
                if e.tag & TAG_HUGE != 0 {
                    let base = (e.tag & ((1 << 30) - 1)) << 9;
                    let covered = [base, base >> 18 << 18].iter().any(|&h| {
                        let Some(&head) = self.hugetlb.mappings.get(&(mm.0, h)) else { return false };
                        let order = self.hugetlb.folios.get(&head.0).map_or(0, |f| HPAGE_ORDERS[f.hstate as usize]);
                        h + (1 << order) > base && e.pfn.0 >= head.0 && e.pfn.0 < head.0 + (1 << order)
                    });
                    if !covered {
                        report!(found, "tlb", e.pfn, "cpu{} ASID {a} (mm{}, tlb_gen {} = the mm's) caches a 2 MiB entry for vpn {base:#x} -> pfn {} ({w}) that no hugetlb mapping covers: a stale entry no flush is owed for", c.id.0, mm.0, ctx.tlb_gen, e.pfn);
                    }
                    continue;
                }
                let vpn = e.tag & ((1 << 39) - 1);
                let pte = m.pgtable.get(vpn);
                let stale = !pte.present() || pte.pfn() != e.pfn || (e.flags & F_WRITE != 0 && !pte.write());
                if stale {
                    let lazy = if st.loaded_mm == Some(mm) { if st.is_lazy { ", loaded lazily" } else { ", running" } } else { ", not loaded" };
                    report!(found, "tlb", e.pfn, "cpu{} ASID {a} (mm{}{lazy}, tlb_gen {} = the mm's) caches vpn {vpn:#x} -> pfn {} ({w}) but the PTE is {}: a stale entry no flush is owed for", c.id.0, mm.0, ctx.tlb_gen, e.pfn, describe(pte));
                }
            }
        }
    }
}

/// Which free list a page was found on (for reports).
#[derive(Clone, Copy)]
enum FreeList {
    Pcp { cpu: usize, node: usize },
    Block { node: usize, order: usize, head: u32 },
}

impl std::fmt::Display for FreeList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            FreeList::Pcp { cpu, node } => write!(f, "cpu{cpu}'s pcp list for node {node}"),
            FreeList::Block { node, order, head } => write!(f, "node {node}'s order-{order} free block at {head}"),
        }
    }
}

fn describe(pte: Pte) -> String {
    if pte.none() {
        "none".to_string()
    } else if pte.is_swap() {
        format!("swap slot {}", pte.swap_slot())
    } else {
        format!("{}pfn {} {}", if pte.present() { "" } else { "PROT_NONE " }, pte.pfn(), if pte.write() { "writable" } else { "read-only" })
    }
}
