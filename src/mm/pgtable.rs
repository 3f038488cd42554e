//! x86-64 4-level page tables (PGD → PUD → PMD → PTE) with the kernel's PTE bits.
//!
//! | PTE bit      | x86 name          | meaning                                                    |
//! |--------------|-------------------|------------------------------------------------------------|
//! | 0            | `_PAGE_PRESENT`   | the hardware may walk to the frame                         |
//! | 1            | `_PAGE_RW`        | writable                                                   |
//! | 5            | `_PAGE_ACCESSED`  | set by the walker on fill                                  |
//! | 6            | `_PAGE_DIRTY`     | set by the walker on the first write                       |
//! | 8            | `_PAGE_PROTNONE`  | not present, but mapped (PROT_NONE / NUMA hint), as on x86 |
//! | 12..         | pfn               |                                                            |
//!
//! Every table page is a real frame ([`crate::sim::Frame`] with `PG_PGTABLE`) on the node of the
//! CPU that allocated it, so walks pay that node's latency and meminfo counts PageTables.
//! Invariant: `Dir::used` / `PteTable::used` count the non-empty slots; a table with `used == 0`
//! may be freed by `free_pgtables` (only there, as in Linux).

use crate::types::{Pfn, PTRS_PER_TABLE};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pte(pub u64);

impl Pte {
    pub const PRESENT: u64 = 1 << 0;
    pub const RW: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const ACCESSED: u64 = 1 << 5;
    pub const DIRTY: u64 = 1 << 6;
    pub const PROTNONE: u64 = 1 << 8;
    /// A swap entry: not present, the slot number where the pfn would be (x86 encodes swap
    /// entries in non-present PTEs; the bit is ours).
    pub const SWAP: u64 = 1 << 9;
    pub const NONE: Pte = Pte(0);

    pub fn swap(slot: u32) -> Pte {
        Pte(((slot as u64) << 12) | Self::SWAP)
    }
    pub fn is_swap(self) -> bool {
        self.0 & (Self::PRESENT | Self::PROTNONE | Self::SWAP) == Self::SWAP
    }
    pub fn swap_slot(self) -> u32 {
        (self.0 >> 12) as u32
    }

    pub fn new(pfn: Pfn, flags: u64) -> Pte {
        Pte(((pfn.0 as u64) << 12) | flags)
    }
    #[inline]
    pub fn none(self) -> bool {
        self.0 == 0
    }
    #[inline]
    pub fn present(self) -> bool {
        self.0 & Self::PRESENT != 0
    }
    pub fn protnone(self) -> bool {
        self.0 & (Self::PRESENT | Self::PROTNONE) == Self::PROTNONE
    }
    /// Mapped: present or PROT_NONE (pte_present() in Linux is true for both on x86).
    pub fn mapped(self) -> bool {
        self.0 & (Self::PRESENT | Self::PROTNONE) != 0
    }
    #[inline]
    pub fn write(self) -> bool {
        self.0 & Self::RW != 0
    }
    #[inline]
    pub fn dirty(self) -> bool {
        self.0 & Self::DIRTY != 0
    }
    pub fn young(self) -> bool {
        self.0 & Self::ACCESSED != 0
    }
    #[inline]
    pub fn pfn(self) -> Pfn {
        Pfn((self.0 >> 12) as u32)
    }
    pub fn flags(self) -> u64 {
        self.0 & 0xfff
    }
    pub fn with(self, set: u64, clear: u64) -> Pte {
        Pte((self.0 & !clear) | set)
    }
}

/// x86 `pte_flags_need_flush()` (arch/x86/include/asm/tlbflush.h, 6.x): clearing PRESENT, DIRTY
/// or ACCESSED, or changing RW, needs a flush; setting DIRTY/ACCESSED or making a non-present
/// entry present does not.
pub fn pte_needs_flush(old: Pte, new: Pte) -> bool {
    if !old.present() {
        return false;
    }
    if old.pfn() != new.pfn() {
        return true;
    }
    let diff = old.flags() ^ new.flags();
    let flush_on_clear = Pte::DIRTY | Pte::PRESENT | Pte::ACCESSED;
    (diff & old.flags() & flush_on_clear) != 0 || (diff & Pte::RW) != 0
}

/// The last level: 512 PTEs.
#[derive(Debug)]
#[repr(C)]
pub struct PteTable {
    /// The table page's frame (a walk reads its node) and the count of non-none PTEs, first:
    /// the header's cache line is found from the same pointer as the PTE's, so the two loads
    /// run in parallel (`Sim::prefetch_pte` prefetches both).
    pub pfn: Pfn,
    pub used: u32,
    /// Inline, so that a walk reaches the PTE from the PMD slot in one load, not two (the
    /// table's header and then a separately boxed array): docs/performance.md, item 21.
    pub ptes: [Pte; PTRS_PER_TABLE],
}

/// An upper-level directory (PGD, PUD or PMD).
#[derive(Debug)]
pub struct Dir<T> {
    /// Inline for the same reason as [`PteTable::ptes`].
    pub slots: [Option<Box<T>>; PTRS_PER_TABLE],
    pub used: u32,
    pub pfn: Pfn,
}

impl<T> Dir<T> {
    pub fn new(pfn: Pfn) -> Self {
        Dir { slots: std::array::from_fn(|_| None), used: 0, pfn }
    }
}

pub type Pmd = Dir<PteTable>;
pub type Pud = Dir<Pmd>;
pub type Pgd = Dir<Pud>;

#[inline]
pub fn idx(vpn: u64, level: u32) -> usize {
    ((vpn >> (9 * level)) & 511) as usize
}

/// A process's page tables.
#[derive(Debug)]
pub struct PageTable {
    pub pgd: Box<Pgd>,
}

impl PageTable {
    pub fn new(pgd_pfn: Pfn) -> Self {
        PageTable { pgd: Box::new(Dir::new(pgd_pfn)) }
    }

    /// The PTE table covering `vpn`, if allocated.
    #[inline]
    pub fn pte_table(&self, vpn: u64) -> Option<&PteTable> {
        let pud = self.pgd.slots[idx(vpn, 3)].as_deref()?;
        let pmd = pud.slots[idx(vpn, 2)].as_deref()?;
        pmd.slots[idx(vpn, 1)].as_deref()
    }

    #[inline]
    pub fn pte_table_mut(&mut self, vpn: u64) -> Option<&mut PteTable> {
        let pud = self.pgd.slots[idx(vpn, 3)].as_deref_mut()?;
        let pmd = pud.slots[idx(vpn, 2)].as_deref_mut()?;
        pmd.slots[idx(vpn, 1)].as_deref_mut()
    }

    #[inline]
    pub fn get(&self, vpn: u64) -> Pte {
        self.pte_table(vpn).map(|t| t.ptes[idx(vpn, 0)]).unwrap_or(Pte::NONE)
    }

    /// Set a PTE in an existing table (the caller allocated it with [`PageTable::alloc_path`]).
    /// Returns the old value.
    pub fn set(&mut self, vpn: u64, new: Pte) -> Pte {
        let t = self.pte_table_mut(vpn).expect("simulator bug: set_pte without a PTE table");
        let slot = &mut t.ptes[idx(vpn, 0)];
        let old = *slot;
        *slot = new;
        t.used = t.used + (!new.none()) as u32 - (!old.none()) as u32;
        old
    }

    /// Make sure the tables down to the PTE level exist for `vpn`; `alloc` provides a frame for
    /// each new table page (pud_alloc/pmd_alloc/pte_alloc). Returns how many tables were created.
    pub fn alloc_path(&mut self, vpn: u64, mut alloc: impl FnMut() -> Pfn) -> u32 {
        let mut n = 0;
        let pgd = &mut self.pgd;
        let i3 = idx(vpn, 3);
        if pgd.slots[i3].is_none() {
            pgd.slots[i3] = Some(Box::new(Dir::new(alloc())));
            pgd.used += 1;
            n += 1;
        }
        let pud = pgd.slots[i3].as_deref_mut().unwrap();
        let i2 = idx(vpn, 2);
        if pud.slots[i2].is_none() {
            pud.slots[i2] = Some(Box::new(Dir::new(alloc())));
            pud.used += 1;
            n += 1;
        }
        let pmd = pud.slots[i2].as_deref_mut().unwrap();
        let i1 = idx(vpn, 1);
        if pmd.slots[i1].is_none() {
            pmd.slots[i1] = Some(Box::new(PteTable { ptes: [Pte::NONE; PTRS_PER_TABLE], used: 0, pfn: alloc() }));
            pmd.used += 1;
            n += 1;
        }
        n
    }

    /// Free an empty PTE table covering `vpn` (PT reclaim); None if absent or not empty.
    pub fn free_pte_table(&mut self, vpn: u64) -> Option<Pfn> {
        let pud = self.pgd.slots[idx(vpn, 3)].as_deref_mut()?;
        let pmd = pud.slots[idx(vpn, 2)].as_deref_mut()?;
        let slot = &mut pmd.slots[idx(vpn, 1)];
        if slot.as_ref()?.used != 0 {
            return None;
        }
        pmd.used -= 1;
        slot.take().map(|t| t.pfn)
    }

    /// Visit every non-none PTE in `[start, end)` (vpns), in address order: present, PROT_NONE
    /// and swap entries alike (callers check which).
    pub fn for_each_mapped(&self, start: u64, end: u64, mut f: impl FnMut(u64, Pte)) {
        let mut vpn = start;
        while vpn < end {
            let next_table = (vpn | 511) + 1;
            if let Some(t) = self.pte_table(vpn) {
                let stop = next_table.min(end);
                for v in vpn..stop {
                    let p = t.ptes[idx(v, 0)];
                    if !p.none() {
                        f(v, p);
                    }
                }
            }
            vpn = next_table;
        }
    }

    /// The frames of every table page, for freeing at exit.
    pub fn table_pfns(&self) -> Vec<Pfn> {
        let mut v = vec![self.pgd.pfn];
        for pud in self.pgd.slots.iter().flatten() {
            v.push(pud.pfn);
            for pmd in pud.slots.iter().flatten() {
                v.push(pmd.pfn);
                for pt in pmd.slots.iter().flatten() {
                    v.push(pt.pfn);
                }
            }
        }
        v
    }

    /// `free_pgd_range()` (mm/memory.c): free the PTE tables, PMDs and PUDs wholly inside
    /// `[addr, end)` once rounded inwards by `floor`/`ceiling` (the neighbouring VMAs' bounds), as
    /// Linux does. Returns the freed tables' frames. Bounds are byte addresses; ceiling 0 = top.
    pub fn free_pgd_range(&mut self, addr: u64, end: u64, floor: u64, ceiling: u64) -> Vec<Pfn> {
        let mut freed = Vec::new();
        // PTE tables (free_pte_range via free_pmd_range), at PMD granularity.
        free_level(self, addr, end, floor, ceiling, 21, &mut freed);
        // PMD tables, at PUD granularity.
        free_level(self, addr, end, floor, ceiling, 30, &mut freed);
        // PUD tables, at PGD granularity.
        free_level(self, addr, end, floor, ceiling, 39, &mut freed);
        freed
    }
}

/// Free every empty-of-VMAs table covering a `1 << shift` block fully inside the rounded range.
/// This follows the floor/ceiling arithmetic of free_pgd_range()/free_pmd_range(): the range is
/// widened to `shift` alignment only where the neighbouring VMA bounds allow it.
fn free_level(pt: &mut PageTable, addr: u64, end: u64, floor: u64, ceiling: u64, shift: u32, freed: &mut Vec<Pfn>) {
    let size = 1u64 << shift;
    let mask = !(size - 1);
    let mut a = addr & mask;
    if a < floor {
        a = a.wrapping_add(size);
        if a == 0 {
            return;
        }
    }
    let mut e = end;
    let ceil = if ceiling == 0 { 0 } else { ceiling & mask };
    if ceiling != 0 && ceil == 0 {
        return;
    }
    if e.wrapping_sub(1) > ceil.wrapping_sub(1) {
        e = e.wrapping_sub(size);
    }
    if a > e.wrapping_sub(1) {
        return;
    }
    // Visit only the tables that exist (the address space is sparse), freeing each whose block
    // lies in [a, e).
    let inside = |block: u64| block >= a && block < e;
    let blocks = 1u64 << 9; // entries per table
    match shift {
        21 => {
            for (i3, pud) in pt.pgd.slots.iter_mut().enumerate() {
                let Some(pud) = pud.as_deref_mut() else { continue };
                for (i2, pmd) in pud.slots.iter_mut().enumerate() {
                    let Some(pmd) = pmd.as_deref_mut() else { continue };
                    for i1 in 0..PTRS_PER_TABLE {
                        let block = ((i3 as u64 * blocks + i2 as u64) * blocks + i1 as u64) << 21;
                        if pmd.slots[i1].is_some() && inside(block) {
                            let t = pmd.slots[i1].take().unwrap();
                            debug_assert_eq!(t.used, 0, "simulator bug: freeing a PTE table with live entries");
                            pmd.used -= 1;
                            freed.push(t.pfn);
                        }
                    }
                }
            }
        }
        30 => {
            for (i3, pud) in pt.pgd.slots.iter_mut().enumerate() {
                let Some(pud) = pud.as_deref_mut() else { continue };
                for i2 in 0..PTRS_PER_TABLE {
                    let block = (i3 as u64 * blocks + i2 as u64) << 30;
                    if pud.slots[i2].as_ref().is_some_and(|p| p.used == 0) && inside(block) {
                        let p = pud.slots[i2].take().unwrap();
                        pud.used -= 1;
                        freed.push(p.pfn);
                    }
                }
            }
        }
        _ => {
            for i3 in 0..PTRS_PER_TABLE {
                let block = (i3 as u64) << 39;
                if pt.pgd.slots[i3].as_ref().is_some_and(|p| p.used == 0) && inside(block) {
                    let p = pt.pgd.slots[i3].take().unwrap();
                    pt.pgd.used -= 1;
                    freed.push(p.pfn);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt_with(vpns: &[u64]) -> (PageTable, u32) {
        let mut next = 100u32;
        let mut pt = PageTable::new(Pfn(1));
        for &v in vpns {
            pt.alloc_path(v, || {
                next += 1;
                Pfn(next)
            });
        }
        (pt, next)
    }

    #[test]
    fn floor_ceiling_keep_tables_shared_with_neighbours() {
        // A 16-page region right below a neighbour at an unaligned address: its PTE table is
        // shared with the neighbour, so nothing is freed.
        let base = 0x7f00_0010_0000u64; // 1 MiB into a 2 MiB block
        let (mut pt, _) = pt_with(&[base >> 12]);
        let freed = pt.free_pgd_range(base, base + 16 * 4096, base, base + 16 * 4096);
        assert!(freed.is_empty());
        // With distant neighbours the PTE, PMD and PUD tables go.
        let freed = pt.free_pgd_range(base, base + 16 * 4096, 0, 0);
        assert_eq!(freed.len(), 3);
    }

    #[test]
    fn aligned_2m_block_inside_the_gap_is_freed() {
        let base = 0x7f00_0020_0000u64; // 2 MiB aligned
        let (mut pt, _) = pt_with(&[base >> 12, (base >> 12) + 512]);
        // Region = 1024 pages exactly between neighbours: both PTE tables are inside.
        let freed = pt.free_pgd_range(base, base + 1024 * 4096, base, base + 1024 * 4096);
        assert_eq!(freed.len(), 2);
    }

    #[test]
    fn needs_flush_rules() {
        let p = Pte::new(Pfn(5), Pte::PRESENT | Pte::RW | Pte::ACCESSED | Pte::DIRTY);
        assert!(pte_needs_flush(p, p.with(0, Pte::RW)));
        assert!(pte_needs_flush(p.with(0, Pte::RW), p)); // RW set: a change of RW flushes on x86
        assert!(!pte_needs_flush(p.with(0, Pte::DIRTY), p));
        assert!(pte_needs_flush(p, Pte::NONE));
        assert!(!pte_needs_flush(Pte::NONE, p));
    }
}
