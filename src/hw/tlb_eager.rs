//! The TLB model as it was before lazy whole-context flushes (src/hw/tlb.rs at commit 29c8beb,
//! verbatim but for this header, the `use` lines and the stamp renumbering it shares): every
//! `flush_asid` / `flush_all` walks every entry. Test-only: `tlb.rs`'s proptest runs random operation sequences through both
//! and requires the same results and the same contents of every way.
#![allow(dead_code)]

use crate::types::Pfn;
use super::{tag_2m, tag_4k, tag_asid, L1dProbe, Level, TlbEntry, TlbGeometry, F_DIRTY, F_WRITE};

const EMPTY: TlbEntry = TlbEntry { tag: INVALID, pfn: Pfn(0), flags: 0 };

pub const INVALID: u64 = u64::MAX;

/// One set-associative array with true LRU, kept as a last-use stamp per way (the hit path then
/// finds its way without data-dependent branches and moves no entries).
#[derive(Clone, Debug)]
pub struct SetAssoc {
    /// The tags alone, way by way (a copy of `entries[i].tag`, kept in step by every writer):
    /// a lookup scans one set's tags in 8-byte strides, 4 ways to 32 bytes (docs/performance.md).
    tags: Vec<u64>,
    entries: Vec<TlbEntry>,
    /// Last use of each way; larger = more recent. Invalid ways are refilled first.
    stamp: Vec<u32>,
    tick: u32,
    ways: usize,
    set_mask: u64,
}

impl SetAssoc {
    /// `entries` must be a multiple of `ways` and the set count a power of two
    /// (a non-power-of-two set count is rounded down, as no real TLB has one).
    pub fn new(entries: usize, ways: usize) -> Self {
        let ways = ways.clamp(1, entries.max(1));
        let sets = (entries / ways).max(1);
        let sets = if sets.is_power_of_two() { sets } else { sets.next_power_of_two() / 2 };
        SetAssoc { tags: vec![INVALID; sets * ways], entries: vec![EMPTY; sets * ways], stamp: vec![0; sets * ways], tick: 0, ways, set_mask: sets as u64 - 1 }
    }

    #[inline]
    fn set(&self, tag: u64) -> usize {
        // Index by the low page-number bits, as hardware does.
        ((tag & self.set_mask) as usize) * self.ways
    }

    /// The next use stamp. On wrap-around (after 2^32 uses of this array) the stamps are
    /// renumbered by their order within each set, which keeps every set's LRU order.
    #[inline]
    fn next_tick(&mut self) -> u32 {
        self.tick = self.tick.wrapping_add(1);
        if self.tick == 0 {
            self.tick = crate::hw::tlb::renumber_stamps(&mut self.stamp, self.ways);
        }
        self.tick
    }

    /// Look up and, on a hit, make the entry MRU. Returns the entry.
    #[inline]
    pub fn lookup(&mut self, tag: u64) -> Option<&mut TlbEntry> {
        let i = self.probe(tag)?;
        Some(&mut self.entries[i])
    }

    /// Look up and, on a hit, make the way MRU. Returns the way's index in the array.
    #[inline(always)]
    pub fn probe(&mut self, tag: u64) -> Option<usize> {
        let base = self.set(tag);
        // The last matching way, as before the tags were split out (a tag is in a set at most
        // once, so first and last are the same way).
        let mut hit = usize::MAX;
        for (i, &t) in self.tags[base..base + self.ways].iter().enumerate() {
            if t == tag {
                hit = i;
            }
        }
        if hit == usize::MAX {
            return None;
        }
        let i = base + hit;
        let t = self.next_tick();
        self.stamp[i] = t;
        Some(i)
    }

    /// Insert as MRU: into the way holding the same tag, else an invalid way, else the least
    /// recently used one. Returns the evicted valid entry, if any.
    #[inline]
    pub fn insert(&mut self, e: TlbEntry) -> Option<TlbEntry> {
        let base = self.set(e.tag);
        let ways = &self.tags[base..base + self.ways];
        let i = ways
            .iter()
            .position(|&x| x == e.tag)
            .or_else(|| ways.iter().position(|&x| x == INVALID))
            .unwrap_or_else(|| (0..self.ways).min_by_key(|&w| self.stamp[base + w]).unwrap_or(0));
        let old = self.entries[base + i];
        self.entries[base + i] = e;
        self.tags[base + i] = e.tag;
        let t = self.next_tick();
        self.stamp[base + i] = t;
        (old.tag != INVALID && old.tag != e.tag).then_some(old)
    }

    pub fn invalidate(&mut self, tag: u64) -> bool {
        let base = self.set(tag);
        let mut hit = false;
        for i in base..base + self.ways {
            if self.tags[i] == tag {
                self.tags[i] = INVALID;
                self.entries[i].tag = INVALID;
                hit = true;
            }
        }
        hit
    }

    pub fn invalidate_where(&mut self, mut f: impl FnMut(&TlbEntry) -> bool) -> usize {
        let mut n = 0;
        for (e, t) in self.entries.iter_mut().zip(self.tags.iter_mut()) {
            if e.tag != INVALID && f(e) {
                e.tag = INVALID;
                *t = INVALID;
                n += 1;
            }
        }
        n
    }

    pub fn iter_valid(&self) -> impl Iterator<Item = &TlbEntry> {
        self.entries.iter().filter(|e| e.tag != INVALID)
    }
}

/// All TLBs of one CPU.
#[derive(Clone, Debug)]
pub struct CpuTlb {
    pub l1d_4k: SetAssoc,
    pub l1d_2m: SetAssoc,
    pub l1i_4k: SetAssoc,
    pub l1i_2m: SetAssoc,
    pub stlb: SetAssoc,
}

impl CpuTlb {
    pub fn new(g: &TlbGeometry) -> Self {
        CpuTlb {
            l1d_4k: SetAssoc::new(g.l1d_4k.0, g.l1d_4k.1),
            l1d_2m: SetAssoc::new(g.l1d_2m.0, g.l1d_2m.1),
            l1i_4k: SetAssoc::new(g.l1i_4k.0, g.l1i_4k.1),
            l1i_2m: SetAssoc::new(g.l1i_2m.0, g.l1i_2m.1),
            stlb: SetAssoc::new(g.stlb.0, g.stlb.1),
        }
    }

    /// The fast path of a data access: an L1 4 KiB hit that needs no dirty-bit update.
    /// Updates LRU like [`CpuTlb::lookup`]; on false the caller takes the full path.
    #[inline(always)]
    pub fn hit_l1d(&mut self, asid: u16, vpn: u64, write: bool) -> bool {
        let tag = tag_4k(asid, vpn);
        let need = if write { F_WRITE | F_DIRTY } else { 0 };
        match self.l1d_4k.probe(tag) {
            Some(i) => self.l1d_4k.entries[i].flags & need == need,
            None => false,
        }
    }

    /// [`CpuTlb::hit_l1d`] telling a miss of the L1 4 KiB array (`L1dProbe::Miss`, nothing
    /// changed) from a hit that needs the full path (a write through a clean or read-only entry,
    /// `L1dProbe::Slow`: the way is MRU now, as with `hit_l1d`).
    #[inline(always)]
    pub fn probe_l1d(&mut self, asid: u16, vpn: u64, write: bool) -> L1dProbe {
        let tag = tag_4k(asid, vpn);
        let need = if write { F_WRITE | F_DIRTY } else { 0 };
        match self.l1d_4k.probe(tag) {
            Some(i) if self.l1d_4k.entries[i].flags & need == need => L1dProbe::Hit,
            Some(_) => L1dProbe::Slow,
            None => L1dProbe::Miss,
        }
    }

    /// [`CpuTlb::lookup`] of a data access whose L1 4 KiB probe just missed: the same result
    /// and the same LRU updates, without probing the L1 4 KiB array again (a miss changes nothing).
    #[inline]
    pub fn lookup_data_after_l1_4k_miss(&mut self, asid: u16, vpn: u64) -> Option<(TlbEntry, Level, bool)> {
        let t4 = tag_4k(asid, vpn);
        let t2 = tag_2m(asid, vpn);
        if let Some(e) = self.l1d_2m.lookup(t2) {
            return Some((*e, Level::L1, true));
        }
        if let Some(e) = self.stlb.lookup(t4).map(|e| *e) {
            self.l1d_4k.insert(e);
            return Some((e, Level::Stlb, false));
        }
        if let Some(e) = self.stlb.lookup(t2).map(|e| *e) {
            self.l1d_2m.insert(e);
            return Some((e, Level::Stlb, true));
        }
        None
    }

    /// Look a translation up (data or instruction side). On an STLB hit the L1 is refilled.
    #[inline]
    pub fn lookup(&mut self, asid: u16, vpn: u64, instr: bool) -> Option<(TlbEntry, Level, bool)> {
        let t4 = tag_4k(asid, vpn);
        let t2 = tag_2m(asid, vpn);
        let (l1_4k, l1_2m) = if instr { (&mut self.l1i_4k, &mut self.l1i_2m) } else { (&mut self.l1d_4k, &mut self.l1d_2m) };
        if let Some(e) = l1_4k.lookup(t4) {
            return Some((*e, Level::L1, false));
        }
        if let Some(e) = l1_2m.lookup(t2) {
            return Some((*e, Level::L1, true));
        }
        if let Some(e) = self.stlb.lookup(t4).map(|e| *e) {
            l1_4k.insert(e);
            return Some((e, Level::Stlb, false));
        }
        if let Some(e) = self.stlb.lookup(t2).map(|e| *e) {
            l1_2m.insert(e);
            return Some((e, Level::Stlb, true));
        }
        None
    }

    /// Fill after a page walk: L1 and STLB.
    pub fn fill(&mut self, asid: u16, vpn: u64, huge: bool, pfn: Pfn, flags: u8, instr: bool) {
        let tag = if huge { tag_2m(asid, vpn) } else { tag_4k(asid, vpn) };
        let e = TlbEntry { tag, pfn, flags };
        let l1 = match (instr, huge) {
            (false, false) => &mut self.l1d_4k,
            (false, true) => &mut self.l1d_2m,
            (true, false) => &mut self.l1i_4k,
            (true, true) => &mut self.l1i_2m,
        };
        l1.insert(e);
        self.stlb.insert(e);
    }

    /// Set the cached dirty bit after the hardware re-walk that set the PTE's dirty bit.
    pub fn set_dirty(&mut self, asid: u16, vpn: u64, huge: bool) {
        let tag = if huge { tag_2m(asid, vpn) } else { tag_4k(asid, vpn) };
        for a in self.arrays_mut() {
            if let Some(e) = a.lookup(tag) {
                e.flags |= F_DIRTY | F_WRITE;
            }
        }
    }

    fn arrays_mut(&mut self) -> [&mut SetAssoc; 5] {
        [&mut self.l1d_4k, &mut self.l1d_2m, &mut self.l1i_4k, &mut self.l1i_2m, &mut self.stlb]
    }

    /// INVLPG: drop the translation of one page (4 KiB or the 2 MiB page containing it).
    pub fn flush_one(&mut self, asid: u16, vpn: u64) {
        let (t4, t2) = (tag_4k(asid, vpn), tag_2m(asid, vpn));
        // The L1 arrays hold one page size each (`fill` and the STLB refill in `lookup` put a
        // 4 KiB tag only in a 4 KiB array, a 2 MiB tag only in a 2 MiB one); the STLB holds
        // both. Probing only where a tag can be drops the same entries in 6 probes, not 10.
        self.l1d_4k.invalidate(t4);
        self.l1i_4k.invalidate(t4);
        self.l1d_2m.invalidate(t2);
        self.l1i_2m.invalidate(t2);
        self.stlb.invalidate(t4);
        self.stlb.invalidate(t2);
    }

    /// Drop every translation of one ASID (a CR3 write without NOFLUSH, or INVPCID single-context).
    pub fn flush_asid(&mut self, asid: u16) -> usize {
        self.arrays_mut().into_iter().map(|a| a.invalidate_where(|e| tag_asid(e.tag) == asid)).sum()
    }

    /// Drop everything (no global user entries are modelled).
    pub fn flush_all(&mut self) -> usize {
        self.arrays_mut().into_iter().map(|a| a.invalidate_where(|_| true)).sum()
    }

    /// Every valid entry (for checkers): (tag, entry).
    pub fn entries(&self) -> impl Iterator<Item = &TlbEntry> {
        self.l1d_4k
            .iter_valid()
            .chain(self.l1d_2m.iter_valid())
            .chain(self.l1i_4k.iter_valid())
            .chain(self.l1i_2m.iter_valid())
            .chain(self.stlb.iter_valid())
    }
}

impl SetAssoc {
    /// Every way in order: the entry if valid, and its LRU stamp.
    pub fn dump(&self) -> Vec<(Option<TlbEntry>, u32)> {
        self.entries.iter().zip(&self.stamp).map(|(e, &s)| ((e.tag != INVALID).then_some(*e), s)).collect()
    }
}

impl CpuTlb {
    pub fn dump(&self) -> Vec<(Option<TlbEntry>, u32)> {
        [&self.l1d_4k, &self.l1d_2m, &self.l1i_4k, &self.l1i_2m, &self.stlb].iter().flat_map(|a| a.dump()).collect()
    }
}
