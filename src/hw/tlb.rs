//! Per-CPU hardware TLBs: set-associative, true LRU, tagged by ASID (PCID), caching the PTE's
//! write and dirty bits.
//!
//! | field          | meaning                                   | who changes it                        |
//! |----------------|-------------------------------------------|---------------------------------------|
//! | `tag`          | asid << 40 \| page number (4K or 2M)      | fill on walk; INVALID on invalidation |
//! | `pfn`          | frame the entry translates to             | fill                                  |
//! | `flags` W      | PTE was writable when filled              | fill; a write re-walk may set it      |
//! | `flags` D      | PTE was dirty when filled (or set by us)  | fill; first write through the entry   |
//!
//! What must hold: an entry is only ever created from a present PTE by a walk ([`crate::mm`]'s
//! page tables); it may outlive that PTE until a flush reaches this CPU. That window is exactly
//! what the kernel's flush policy decides, and what `mmsim check` inspects.
//!
//! Departure from hardware: lookups probe the 4 KiB and 2 MiB L1 arrays in turn rather than in
//! parallel, the STLB is one shared array with the page size in the tag (as on Skylake), and
//! replacement is true LRU (real TLBs use pseudo-LRU).
//!
//! Whole-context flushes are lazy (a simulator device, not hardware behaviour): `flush_asid`
//! and `flush_all` record a flush epoch in O(1) ([`FlushEpochs`]) and a set is brought up to
//! date (its stale ways marked INVALID, exactly as the eager flush would have) the next time
//! anything looks at it. Every lookup, fill, replacement and listing therefore sees what an
//! eager flush would have left; the proptest `lazy_flushes_match_eager_ones` checks this
//! against the eager model (`tlb_eager.rs`) on random operation sequences, across the wrap of
//! the epoch counter.

use crate::types::Pfn;

pub const INVALID: u64 = u64::MAX;
pub const F_WRITE: u8 = 1;
pub const F_DIRTY: u8 = 2;
const HUGE_BIT: u64 = 1 << 39;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbEntry {
    pub tag: u64,
    pub pfn: Pfn,
    pub flags: u8,
}

impl TlbEntry {
    const EMPTY: TlbEntry = TlbEntry { tag: INVALID, pfn: Pfn(0), flags: 0 };
}

/// Tag of a 4 KiB translation.
#[inline]
pub fn tag_4k(asid: u16, vpn: u64) -> u64 {
    ((asid as u64) << 40) | (vpn & ((1 << 39) - 1))
}

/// Tag of a 2 MiB translation (vpn of its first 4 KiB page).
#[inline]
pub fn tag_2m(asid: u16, vpn: u64) -> u64 {
    ((asid as u64) << 40) | HUGE_BIT | ((vpn >> 9) & ((1 << 30) - 1))
}

#[inline]
pub fn tag_asid(tag: u64) -> u16 {
    (tag >> 40) as u16
}

/// The whole-context flushes of one CPU's TLBs, by epoch (the number of such flushes so far).
/// A way is stale when a flush of its ASID (or of everything) came after its set was last
/// brought up to date (`SetAssoc::checked`): every way of a set was filled at or before that.
#[derive(Clone, Debug, Default)]
pub struct FlushEpochs {
    now: u32,
    /// Epoch of the last `flush_all`.
    all: u32,
    /// Epoch of the last `flush_asid` of each ASID (absent: never).
    asid: Vec<u32>,
}

impl FlushEpochs {
    /// Epoch of the last flush that dropped the entries of `asid`.
    #[inline]
    fn since(&self, asid: u16) -> u32 {
        self.all.max(self.asid.get(asid as usize).copied().unwrap_or(0))
    }
}

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
    /// Per set: the [`FlushEpochs`] epoch at which its ways were last brought up to date.
    /// Only [`CpuTlb`] flushes lazily; a `SetAssoc` used alone never has pending flushes.
    checked: Vec<u32>,
    /// A tag that is in no way of the array, or INVALID: the last probe that missed. Only
    /// `insert` adds a tag to the array, and it clears this when it adds this one, so the
    /// fill that follows a miss (a page walk's) skips its search for the same tag.
    absent: u64,
    /// Per set, for sets of at most 64 ways: bit `w` set when way `w`'s tag is not INVALID
    /// (kept in step by every writer of `tags`), so a fill finds the first invalid way, or
    /// that there is none, without reading the tags. Empty for wider sets.
    valid: Vec<u64>,
}

/// The way among the first `W` of `tags` that holds `tag` (a tag is in a set at most once).
#[inline(always)]
fn same_way<const W: usize>(tags: &[u64], tag: u64) -> Option<usize> {
    let w: &[u64; W] = tags[..W].try_into().expect("W ways");
    let mut m = 0u64;
    for (i, &t) in w.iter().enumerate() {
        m |= ((t == tag) as u64) << i;
    }
    (m != 0).then(|| m.trailing_zeros() as usize)
}

/// [`SetAssoc::insert`]'s way among `W`: the one holding `tag`, else the first invalid one,
/// else the least recently used one (the first of equal stamps). `absent`: `tag` is known to
/// be in no way; `free`: the invalid ways, bit by bit.
#[inline(always)]
fn fill_way<const W: usize>(tags: &[u64], stamps: &[u32], tag: u64, absent: bool, free: u64) -> usize {
    if !absent && let Some(w) = same_way::<W>(tags, tag) {
        return w;
    }
    if free != 0 {
        return free.trailing_zeros() as usize;
    }
    let st: &[u32; W] = stamps[..W].try_into().expect("W ways");
    let (mut lru, mut min) = (0, st[0]);
    for (k, &s) in st.iter().enumerate().skip(1) {
        let less = s < min;
        lru = if less { k } else { lru };
        min = if less { s } else { min };
    }
    lru
}

/// Use stamps renumbered by their order within each set of `ways` (1 = LRU), which keeps every
/// set's LRU order: a wrapped-around tick's new start. Returns the next tick to hand out.
pub(crate) fn renumber_stamps(stamp: &mut [u32], ways: usize) -> u32 {
    for set in stamp.chunks_mut(ways) {
        let mut order: Vec<usize> = (0..set.len()).collect();
        order.sort_by_key(|&i| set[i]);
        for (rank, i) in order.into_iter().enumerate() {
            set[i] = rank as u32 + 1;
        }
    }
    ways as u32 + 1
}

impl SetAssoc {
    /// `entries` must be a multiple of `ways` and the set count a power of two
    /// (a non-power-of-two set count is rounded down, as no real TLB has one).
    pub fn new(entries: usize, ways: usize) -> Self {
        let ways = ways.clamp(1, entries.max(1));
        let sets = (entries / ways).max(1);
        let sets = if sets.is_power_of_two() { sets } else { sets.next_power_of_two() / 2 };
        SetAssoc { tags: vec![INVALID; sets * ways], entries: vec![TlbEntry::EMPTY; sets * ways], stamp: vec![0; sets * ways], tick: 0, ways, set_mask: sets as u64 - 1, checked: vec![0; sets], absent: INVALID, valid: vec![0; if ways <= 64 { sets } else { 0 }] }
    }

    #[inline]
    fn set(&self, tag: u64) -> usize {
        self.set_index(tag) * self.ways
    }

    /// The number of `tag`'s set: the low page-number bits, as hardware indexes.
    #[inline]
    fn set_index(&self, tag: u64) -> usize {
        (tag & self.set_mask) as usize
    }

    /// Bring the set of `tag` up to date with the flushes in `ep` (see [`FlushEpochs`]).
    #[inline(always)]
    fn sync(&mut self, tag: u64, ep: &FlushEpochs) {
        let s = self.set_index(tag);
        if self.checked[s] != ep.now {
            self.sync_set(s, ep);
        }
    }

    #[cold]
    #[inline(never)]
    fn sync_set(&mut self, s: usize, ep: &FlushEpochs) {
        let since = self.checked[s];
        let base = s * self.ways;
        for i in base..base + self.ways {
            let t = self.tags[i];
            if t != INVALID && ep.since(tag_asid(t)) > since {
                self.tags[i] = INVALID;
                self.entries[i].tag = INVALID;
                self.unmark(s, i - base);
            }
        }
        self.checked[s] = ep.now;
    }

    /// Way `w` of set `s` became INVALID (`valid`'s bookkeeping).
    #[inline(always)]
    fn unmark(&mut self, s: usize, w: usize) {
        if let Some(v) = self.valid.get_mut(s) {
            *v &= !(1u64 << w);
        }
    }

    /// Bring every set up to date (before the epochs are renumbered).
    fn sync_all(&mut self, ep: &FlushEpochs) {
        for s in 0..self.checked.len() {
            if self.checked[s] != ep.now {
                self.sync_set(s, ep);
            }
        }
    }

    /// Is way `i` valid, counting the flushes not yet applied to its set?
    #[inline]
    fn live(&self, i: usize, ep: &FlushEpochs) -> bool {
        let t = self.tags[i];
        t != INVALID && ep.since(tag_asid(t)) <= self.checked[i / self.ways]
    }

    /// The next use stamp. On wrap-around (after 2^32 uses of this array) the stamps are
    /// renumbered by their order within each set, which keeps every set's LRU order.
    #[inline(always)]
    fn next_tick(&mut self) -> u32 {
        self.tick = self.tick.wrapping_add(1);
        if self.tick == 0 {
            self.renumber();
        }
        self.tick
    }

    /// [`SetAssoc::next_tick`]'s wrap-around, once per 2^32 uses: kept out of line so that the
    /// hit path inlines the increment alone.
    #[cold]
    #[inline(never)]
    fn renumber(&mut self) {
        self.tick = renumber_stamps(&mut self.stamp, self.ways);
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
        if self.ways == 4 {
            // The L1 dTLB's and most arrays' associativity, unrolled (the hit path).
            let w: &[u64; 4] = self.tags[base..base + 4].try_into().expect("4 ways");
            for (i, &t) in w.iter().enumerate() {
                if t == tag {
                    hit = i;
                }
            }
        } else {
            for (i, &t) in self.tags[base..base + self.ways].iter().enumerate() {
                if t == tag {
                    hit = i;
                }
            }
        }
        if hit == usize::MAX {
            self.absent = tag;
            return None;
        }
        let i = base + hit;
        let t = self.next_tick();
        self.stamp[i] = t;
        Some(i)
    }

    /// The way holding `tag` in the set starting at `base`, scanned unrolled with the way
    /// count known at compile time: `Some(way or None)` for sets of 4, 8, 12 or 16 ways, `None`
    /// for other associativities (the caller's generic loop).
    #[inline(always)]
    fn same_way_unrolled(&self, base: usize, tag: u64) -> Option<Option<usize>> {
        let tags = &self.tags[base..];
        match self.ways {
            4 => Some(same_way::<4>(tags, tag)),
            8 => Some(same_way::<8>(tags, tag)),
            12 => Some(same_way::<12>(tags, tag)),
            16 => Some(same_way::<16>(tags, tag)),
            _ => None,
        }
    }

    /// [`SetAssoc::lookup`] for the STLB, its set scanned unrolled (kept apart from `probe`,
    /// whose 4-way loop is the L1 hit path).
    #[inline(always)]
    fn lookup_wide(&mut self, tag: u64) -> Option<&mut TlbEntry> {
        let base = self.set(tag);
        let Some(hit) = self.same_way_unrolled(base, tag) else {
            return self.lookup(tag);
        };
        let Some(w) = hit else {
            self.absent = tag;
            return None;
        };
        let t = self.next_tick();
        self.stamp[base + w] = t;
        Some(&mut self.entries[base + w])
    }

    /// Insert as MRU: into the way holding the same tag, else the first invalid way, else the
    /// least recently used one. Returns the tag of the valid entry it evicted, if any.
    ///
    /// The set's tags are read only to find the same tag, and not at all when the last probe
    /// missed this tag (`absent`, the fill after a page walk); the invalid ways come from the
    /// set's `valid` bits, and the stamps are read only when the set is full of other tags.
    /// The evicted entry itself is not read (its tag is in `tags`): on a miss-heavy stream that
    /// read was a host cache miss.
    #[inline(always)]
    pub fn insert(&mut self, e: TlbEntry) -> Option<u64> {
        let s = self.set_index(e.tag);
        let base = s * self.ways;
        // The way to fill: the same tag's, else the first invalid one, else the least recently
        // used (the first of equal stamps, as `min_by_key`). The common associativities are
        // scanned with their way count known at compile time, unrolled and branch-free.
        let absent = e.tag == self.absent;
        if absent {
            self.absent = INVALID;
        }
        // The invalid ways, from the set's `valid` bits (sets of up to 64 ways).
        let free = match self.valid.get(s) {
            Some(&v) => !v & (u64::MAX >> (64 - self.ways)),
            None => 0,
        };
        let i = match self.ways {
            4 => fill_way::<4>(&self.tags[base..], &self.stamp[base..], e.tag, absent, free),
            8 => fill_way::<8>(&self.tags[base..], &self.stamp[base..], e.tag, absent, free),
            12 => fill_way::<12>(&self.tags[base..], &self.stamp[base..], e.tag, absent, free),
            16 => fill_way::<16>(&self.tags[base..], &self.stamp[base..], e.tag, absent, free),
            w => {
                let ways = &self.tags[base..base + w];
                ways.iter().position(|&x| x == e.tag).or_else(|| ways.iter().position(|&x| x == INVALID)).unwrap_or_else(|| {
                    let stamps = &self.stamp[base..base + w];
                    (0..w).min_by_key(|&k| stamps[k]).expect("a set has a way")
                })
            }
        };
        let old = self.tags[base + i];
        self.entries[base + i] = e;
        self.tags[base + i] = e.tag;
        if let Some(v) = self.valid.get_mut(s) {
            *v |= 1u64 << i;
        }
        let t = self.next_tick();
        self.stamp[base + i] = t;
        (old != INVALID && old != e.tag).then_some(old)
    }

    #[inline]
    pub fn invalidate(&mut self, tag: u64) -> bool {
        let s = self.set_index(tag);
        let base = s * self.ways;
        // A tag is in a set at most once: the common associativities find its way unrolled.
        if let Some(way) = self.same_way_unrolled(base, tag) {
            let Some(w) = way else { return false };
            self.tags[base + w] = INVALID;
            self.entries[base + w].tag = INVALID;
            self.unmark(s, w);
            return true;
        }
        let mut hit = false;
        for i in base..base + self.ways {
            if self.tags[i] == tag {
                self.tags[i] = INVALID;
                self.entries[i].tag = INVALID;
                self.unmark(s, i - base);
                hit = true;
            }
        }
        hit
    }

    /// The valid entries, counting the flushes of `ep` not yet applied.
    fn iter_live<'a>(&'a self, ep: &'a FlushEpochs) -> impl Iterator<Item = &'a TlbEntry> {
        self.entries.iter().enumerate().filter(move |&(i, _)| self.live(i, ep)).map(|(_, e)| e)
    }
}

/// Geometry of one CPU's TLBs (from `machine.tlb.*`).
#[derive(Clone, Copy, Debug)]
pub struct TlbGeometry {
    pub l1d_4k: (usize, usize),
    pub l1d_2m: (usize, usize),
    pub l1i_4k: (usize, usize),
    pub l1i_2m: (usize, usize),
    pub stlb: (usize, usize),
}

/// Outcome of [`CpuTlb::probe_l1d`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L1dProbe {
    Hit,
    Slow,
    Miss,
}

/// Where a lookup was served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    L1,
    Stlb,
}

/// All TLBs of one CPU. The arrays are private: every access goes through a method that
/// first applies the pending lazy flushes to the sets it touches.
#[derive(Clone, Debug)]
pub struct CpuTlb {
    l1d_4k: SetAssoc,
    l1d_2m: SetAssoc,
    l1i_4k: SetAssoc,
    l1i_2m: SetAssoc,
    stlb: SetAssoc,
    ep: FlushEpochs,
    /// Has any array been filled with a 2 MiB translation? Until then no 2 MiB tag can be in
    /// any array, and the lookups skip the 2 MiB probes (a probe that misses changes no entry,
    /// stamp or LRU order; only the host-speed hint `SetAssoc::absent`).
    huge_seen: bool,
}

impl CpuTlb {
    pub fn new(g: &TlbGeometry) -> Self {
        CpuTlb {
            l1d_4k: SetAssoc::new(g.l1d_4k.0, g.l1d_4k.1),
            l1d_2m: SetAssoc::new(g.l1d_2m.0, g.l1d_2m.1),
            l1i_4k: SetAssoc::new(g.l1i_4k.0, g.l1i_4k.1),
            l1i_2m: SetAssoc::new(g.l1i_2m.0, g.l1i_2m.1),
            stlb: SetAssoc::new(g.stlb.0, g.stlb.1),
            ep: FlushEpochs::default(),
            huge_seen: false,
        }
    }

    /// The fast path of a data access: an L1 4 KiB hit that needs no dirty-bit update.
    /// Updates LRU like [`CpuTlb::lookup`]; on false the caller takes the full path.
    #[inline(always)]
    pub fn hit_l1d(&mut self, asid: u16, vpn: u64, write: bool) -> bool {
        let tag = tag_4k(asid, vpn);
        let need = (F_WRITE | F_DIRTY) * write as u8;
        self.l1d_4k.sync(tag, &self.ep);
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
        let need = (F_WRITE | F_DIRTY) * write as u8;
        self.l1d_4k.sync(tag, &self.ep);
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
        // Each set is brought up to date just before it is probed or filled (a set that is
        // not reached keeps its pending flushes, which changes nothing it would return).
        let ep = &self.ep;
        if self.huge_seen {
            self.l1d_2m.sync(t2, ep);
            if let Some(e) = self.l1d_2m.lookup(t2) {
                return Some((*e, Level::L1, true));
            }
        }
        self.stlb.sync(t4, ep);
        if let Some(e) = self.stlb.lookup_wide(t4).map(|e| *e) {
            self.l1d_4k.sync(t4, ep);
            self.l1d_4k.insert(e);
            return Some((e, Level::Stlb, false));
        }
        if !self.huge_seen {
            return None;
        }
        self.stlb.sync(t2, ep);
        if let Some(e) = self.stlb.lookup_wide(t2).map(|e| *e) {
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
        let ep = &self.ep;
        l1_4k.sync(t4, ep);
        if let Some(e) = l1_4k.lookup(t4) {
            return Some((*e, Level::L1, false));
        }
        if self.huge_seen {
            l1_2m.sync(t2, ep);
            if let Some(e) = l1_2m.lookup(t2) {
                return Some((*e, Level::L1, true));
            }
        }
        self.stlb.sync(t4, ep);
        if let Some(e) = self.stlb.lookup_wide(t4).map(|e| *e) {
            l1_4k.insert(e);
            return Some((e, Level::Stlb, false));
        }
        if !self.huge_seen {
            return None;
        }
        self.stlb.sync(t2, ep);
        if let Some(e) = self.stlb.lookup_wide(t2).map(|e| *e) {
            l1_2m.insert(e);
            return Some((e, Level::Stlb, true));
        }
        None
    }

    /// Fill after a page walk: L1 and STLB.
    pub fn fill(&mut self, asid: u16, vpn: u64, huge: bool, pfn: Pfn, flags: u8, instr: bool) {
        let tag = if huge { tag_2m(asid, vpn) } else { tag_4k(asid, vpn) };
        self.huge_seen |= huge;
        let e = TlbEntry { tag, pfn, flags };
        let l1 = match (instr, huge) {
            (false, false) => &mut self.l1d_4k,
            (false, true) => &mut self.l1d_2m,
            (true, false) => &mut self.l1i_4k,
            (true, true) => &mut self.l1i_2m,
        };
        l1.sync(tag, &self.ep);
        l1.insert(e);
        self.stlb.sync(tag, &self.ep);
        self.stlb.insert(e);
    }

    /// Set the cached dirty bit after the hardware re-walk that set the PTE's dirty bit.
    pub fn set_dirty(&mut self, asid: u16, vpn: u64, huge: bool) {
        let tag = if huge { tag_2m(asid, vpn) } else { tag_4k(asid, vpn) };
        let ep = &self.ep;
        for a in [&mut self.l1d_4k, &mut self.l1d_2m, &mut self.l1i_4k, &mut self.l1i_2m, &mut self.stlb] {
            a.sync(tag, ep);
            if let Some(e) = a.lookup(tag) {
                e.flags |= F_DIRTY | F_WRITE;
            }
        }
    }

    /// INVLPG: drop the translation of one page (4 KiB or the 2 MiB page containing it).
    pub fn flush_one(&mut self, asid: u16, vpn: u64) {
        let (t4, t2) = (tag_4k(asid, vpn), tag_2m(asid, vpn));
        // The L1 arrays hold one page size each (`fill` and the STLB refill in `lookup` put a
        // 4 KiB tag only in a 4 KiB array, a 2 MiB tag only in a 2 MiB one); the STLB holds
        // both. Probing only where a tag can be drops the same entries in 6 probes, not 10.
        // Without any 2 MiB fill so far, only the 4 KiB tag can be anywhere: 3 probes.
        let ep = &self.ep;
        let drop = |arrays: [&mut SetAssoc; 3], tag: u64| {
            for a in arrays {
                a.sync(tag, ep);
                a.invalidate(tag);
            }
        };
        drop([&mut self.l1d_4k, &mut self.l1i_4k, &mut self.stlb], t4);
        if self.huge_seen {
            drop([&mut self.l1d_2m, &mut self.l1i_2m, &mut self.stlb], t2);
        }
    }

    /// Drop every translation of one ASID (a CR3 write without NOFLUSH, or INVPCID single-context).
    /// O(1): the entries become invalid for every later lookup, fill and listing (module doc).
    /// Unlike the eager walk it replaced, it does not count the entries dropped (no caller used
    /// the count).
    pub fn flush_asid(&mut self, asid: u16) {
        let e = self.next_epoch();
        let a = asid as usize;
        if self.ep.asid.len() <= a {
            self.ep.asid.resize(a + 1, 0);
        }
        self.ep.asid[a] = e;
    }

    /// Drop everything (no global user entries are modelled). O(1), as `flush_asid`.
    pub fn flush_all(&mut self) {
        self.ep.all = self.next_epoch();
    }

    /// The epoch of a new whole-context flush. When the counter would wrap, every set is
    /// first brought up to date and the epochs start again from 0, so no comparison ever sees
    /// a wrapped value.
    fn next_epoch(&mut self) -> u32 {
        if self.ep.now == u32::MAX {
            let ep = &self.ep;
            for a in [&mut self.l1d_4k, &mut self.l1d_2m, &mut self.l1i_4k, &mut self.l1i_2m, &mut self.stlb] {
                a.sync_all(ep);
                a.checked.fill(0);
            }
            self.ep = FlushEpochs { asid: vec![0; self.ep.asid.len()], ..FlushEpochs::default() };
        }
        self.ep.now += 1;
        self.ep.now
    }

    /// Every valid entry (for checkers): (tag, entry).
    pub fn entries(&self) -> impl Iterator<Item = &TlbEntry> {
        let ep = &self.ep;
        self.l1d_4k
            .iter_live(ep)
            .chain(self.l1d_2m.iter_live(ep))
            .chain(self.l1i_4k.iter_live(ep))
            .chain(self.l1i_2m.iter_live(ep))
            .chain(self.stlb.iter_live(ep))
    }
}

#[cfg(test)]
#[path = "tlb_eager.rs"]
mod eager;

#[cfg(test)]
impl CpuTlb {
    /// Every way of every array in order: the entry if live, and its LRU stamp (as
    /// `eager::CpuTlb::dump`).
    fn dump(&self) -> Vec<(Option<TlbEntry>, u32)> {
        let ep = &self.ep;
        [&self.l1d_4k, &self.l1d_2m, &self.l1i_4k, &self.l1i_2m, &self.stlb]
            .iter()
            .flat_map(|a| (0..a.tags.len()).map(move |i| (a.live(i, ep).then_some(a.entries[i]), a.stamp[i])))
            .collect()
    }

    /// Start the flush epochs at `n` (as if `n` flushes had been applied everywhere), to
    /// reach the counter's wrap-around in a test.
    fn start_epochs_at(&mut self, n: u32) {
        self.ep = FlushEpochs { now: n, all: n, asid: Vec::new() };
        for a in [&mut self.l1d_4k, &mut self.l1d_2m, &mut self.l1i_4k, &mut self.l1i_2m, &mut self.stlb] {
            a.checked.fill(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Fill { asid: u16, vpn: u64, huge: bool, pfn: u32, flags: u8, instr: bool },
        Lookup { asid: u16, vpn: u64, instr: bool },
        HitL1d { asid: u16, vpn: u64, write: bool },
        ProbeL1d { asid: u16, vpn: u64, write: bool },
        AfterL1Miss { asid: u16, vpn: u64 },
        SetDirty { asid: u16, vpn: u64, huge: bool },
        FlushOne { asid: u16, vpn: u64 },
        FlushAsid { asid: u16 },
        FlushAll,
        Entries,
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few ASIDs (one of them a global-ASID-sized number) and few pages, so that sets
        // collide, entries are evicted and flushes find something to drop.
        let asid = prop_oneof![0u16..4, Just(2047u16)];
        let vpn = prop_oneof![0u64..48, (0u64..4).prop_map(|h| h * 512 + 7)];
        prop_oneof![
            6 => (asid.clone(), vpn.clone(), any::<bool>(), 0u32..1000, 0u8..4, any::<bool>())
                .prop_map(|(asid, vpn, huge, pfn, flags, instr)| Op::Fill { asid, vpn, huge, pfn, flags, instr }),
            4 => (asid.clone(), vpn.clone(), any::<bool>()).prop_map(|(asid, vpn, instr)| Op::Lookup { asid, vpn, instr }),
            2 => (asid.clone(), vpn.clone(), any::<bool>()).prop_map(|(asid, vpn, write)| Op::HitL1d { asid, vpn, write }),
            2 => (asid.clone(), vpn.clone(), any::<bool>()).prop_map(|(asid, vpn, write)| Op::ProbeL1d { asid, vpn, write }),
            2 => (asid.clone(), vpn.clone()).prop_map(|(asid, vpn)| Op::AfterL1Miss { asid, vpn }),
            1 => (asid.clone(), vpn.clone(), any::<bool>()).prop_map(|(asid, vpn, huge)| Op::SetDirty { asid, vpn, huge }),
            1 => (asid.clone(), vpn.clone()).prop_map(|(asid, vpn)| Op::FlushOne { asid, vpn }),
            2 => asid.prop_map(|asid| Op::FlushAsid { asid }),
            1 => Just(Op::FlushAll),
            1 => Just(Op::Entries),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        /// Lazy whole-context flushes are indistinguishable from the eager ones they replaced:
        /// the same result from every operation and, after each, the same entry (or none) and
        /// LRU stamp in every way of every array. Starting the epochs just below `u32::MAX`
        /// takes half the cases through the counter's wrap-around.
        #[test]
        fn lazy_flushes_match_eager_ones(ops in proptest::collection::vec(op(), 1..300), near_wrap in any::<bool>(), back in 0u32..8, wide in any::<bool>()) {
            // Small arrays of 2 and 4 ways, or arrays of the 8, 12 and 16 ways that `insert`
            // scans unrolled (the STLB's 12 among them), with 1 to 4 sets.
            let g = if wide {
                TlbGeometry { l1d_4k: (16, 4), l1d_2m: (16, 8), l1i_4k: (16, 16), l1i_2m: (3, 3), stlb: (24, 12) }
            } else {
                TlbGeometry { l1d_4k: (8, 4), l1d_2m: (4, 2), l1i_4k: (8, 2), l1i_2m: (2, 2), stlb: (32, 4) }
            };
            let mut lazy = CpuTlb::new(&g);
            let mut eager = eager::CpuTlb::new(&g);
            if near_wrap {
                lazy.start_epochs_at(u32::MAX - back);
            }
            for (k, op) in ops.iter().enumerate() {
                match *op {
                    Op::Fill { asid, vpn, huge, pfn, flags, instr } => {
                        lazy.fill(asid, vpn, huge, Pfn(pfn), flags, instr);
                        eager.fill(asid, vpn, huge, Pfn(pfn), flags, instr);
                    }
                    Op::Lookup { asid, vpn, instr } => prop_assert_eq!(lazy.lookup(asid, vpn, instr), eager.lookup(asid, vpn, instr)),
                    Op::HitL1d { asid, vpn, write } => prop_assert_eq!(lazy.hit_l1d(asid, vpn, write), eager.hit_l1d(asid, vpn, write)),
                    Op::ProbeL1d { asid, vpn, write } => prop_assert_eq!(lazy.probe_l1d(asid, vpn, write), eager.probe_l1d(asid, vpn, write)),
                    Op::AfterL1Miss { asid, vpn } => {
                        // Only called after an L1 4 KiB miss, as `Sim::access_slow_from` does.
                        if lazy.probe_l1d(asid, vpn, false) == L1dProbe::Miss {
                            prop_assert_eq!(eager.probe_l1d(asid, vpn, false), L1dProbe::Miss);
                            prop_assert_eq!(lazy.lookup_data_after_l1_4k_miss(asid, vpn), eager.lookup_data_after_l1_4k_miss(asid, vpn));
                        } else {
                            prop_assert_ne!(eager.probe_l1d(asid, vpn, false), L1dProbe::Miss);
                        }
                    }
                    Op::SetDirty { asid, vpn, huge } => {
                        lazy.set_dirty(asid, vpn, huge);
                        eager.set_dirty(asid, vpn, huge);
                    }
                    Op::FlushOne { asid, vpn } => {
                        lazy.flush_one(asid, vpn);
                        eager.flush_one(asid, vpn);
                    }
                    Op::FlushAsid { asid } => {
                        lazy.flush_asid(asid);
                        eager.flush_asid(asid);
                    }
                    Op::FlushAll => {
                        lazy.flush_all();
                        eager.flush_all();
                    }
                    Op::Entries => {
                        let l: Vec<TlbEntry> = lazy.entries().copied().collect();
                        let e: Vec<TlbEntry> = eager.entries().copied().collect();
                        prop_assert_eq!(l, e);
                    }
                }
                prop_assert_eq!(lazy.dump(), eager.dump(), "after op {} {:?}", k, op);
            }
        }
    }

    #[test]
    fn the_epoch_counter_wraps_without_resurrecting_or_losing_entries() {
        let g = TlbGeometry { l1d_4k: (8, 4), l1d_2m: (4, 2), l1i_4k: (8, 2), l1i_2m: (2, 2), stlb: (32, 4) };
        let mut t = CpuTlb::new(&g);
        t.start_epochs_at(u32::MAX - 1);
        t.fill(1, 5, false, Pfn(50), 0, false);
        t.fill(2, 6, false, Pfn(60), 0, false);
        t.flush_asid(1); // epoch MAX: asid 1's entry is stale, not yet swept
        t.fill(3, 7, false, Pfn(70), 0, false);
        t.flush_asid(3); // wraps: everything brought up to date, then epoch 1
        let left: Vec<_> = t.entries().map(|e| (tag_asid(e.tag), e.pfn)).collect();
        assert_eq!(left, vec![(2, Pfn(60)), (2, Pfn(60))], "L1 and STLB keep only ASID 2");
        assert!(t.lookup(1, 5, false).is_none() && t.lookup(3, 7, false).is_none());
        assert_eq!(t.lookup(2, 6, false).map(|x| x.0.pfn), Some(Pfn(60)));
    }

    #[test]
    fn an_invalidated_way_is_refilled_before_any_valid_one_is_evicted() {
        let mut s = SetAssoc::new(4, 4); // one set of 4 ways
        let e = |t| TlbEntry { tag: t, pfn: Pfn(t as u32), flags: 0 };
        for t in 0..4 {
            s.insert(e(t));
        }
        assert!(s.invalidate(2));
        assert_eq!(s.insert(e(9)), None, "the invalid way takes the new entry");
        for t in [0, 1, 3, 9] {
            assert!(s.lookup(t).is_some());
        }
    }

    #[test]
    fn stamps_survive_wrap_around() {
        let mut s = SetAssoc::new(2, 2);
        let e = |t| TlbEntry { tag: t, pfn: Pfn(t as u32), flags: 0 };
        s.insert(e(0));
        s.insert(e(2));
        s.tick = u32::MAX - 1;
        assert!(s.lookup(0).is_some()); // tick = MAX: 0 is MRU
        assert!(s.lookup(0).is_some()); // wraps: stamps renumbered, 0 still MRU
        assert_eq!(s.insert(e(4)), Some(2));
    }

    #[test]
    fn lru_evicts_least_recent_way() {
        let mut s = SetAssoc::new(4, 2); // 2 sets x 2 ways
        let e = |t| TlbEntry { tag: t, pfn: Pfn(t as u32), flags: 0 };
        s.insert(e(0));
        s.insert(e(2)); // same set (even tags)
        assert!(s.lookup(0).is_some()); // 0 is MRU now
        let ev = s.insert(e(4));
        assert_eq!(ev, Some(2));
        assert!(s.lookup(2).is_none());
        assert!(s.lookup(0).is_some() && s.lookup(4).is_some());
    }

    #[test]
    fn flush_asid_keeps_other_address_spaces() {
        let g = TlbGeometry { l1d_4k: (64, 4), l1d_2m: (32, 4), l1i_4k: (128, 8), l1i_2m: (8, 8), stlb: (1536, 12) };
        let mut t = CpuTlb::new(&g);
        t.fill(1, 100, false, Pfn(7), F_WRITE, false);
        t.fill(2, 100, false, Pfn(8), F_WRITE, false);
        t.flush_asid(1);
        assert!(t.lookup(1, 100, false).is_none());
        assert_eq!(t.lookup(2, 100, false).map(|x| x.0.pfn), Some(Pfn(8)));
    }

    #[test]
    fn flush_one_drops_both_page_sizes_from_every_array() {
        let g = TlbGeometry { l1d_4k: (4, 4), l1d_2m: (4, 4), l1i_4k: (4, 4), l1i_2m: (4, 4), stlb: (64, 4) };
        let mut t = CpuTlb::new(&g);
        for instr in [false, true] {
            t.fill(0, 3, false, Pfn(3), 0, instr);
            t.fill(0, 512, true, Pfn(1000), 0, instr);
        }
        t.fill(1, 3, false, Pfn(9), 0, false);
        t.flush_one(0, 3);
        t.flush_one(0, 600);
        let left: Vec<_> = t.entries().map(|e| (tag_asid(e.tag), e.pfn)).collect();
        assert_eq!(left, vec![(1, Pfn(9)), (1, Pfn(9))], "only the other ASID's entry stays (L1 and STLB)");
    }

    #[test]
    fn stlb_hit_refills_l1_and_huge_entries_cover_their_range() {
        let g = TlbGeometry { l1d_4k: (4, 4), l1d_2m: (4, 4), l1i_4k: (4, 4), l1i_2m: (4, 4), stlb: (64, 4) };
        let mut t = CpuTlb::new(&g);
        for v in 0..8 {
            t.fill(0, v, false, Pfn(v as u32), 0, false);
        }
        // vpn 0 fell out of the 4-entry L1 but is in the STLB.
        assert_eq!(t.lookup(0, 0, false).map(|x| x.1), Some(Level::Stlb));
        assert_eq!(t.lookup(0, 0, false).map(|x| x.1), Some(Level::L1));
        t.fill(0, 512, true, Pfn(1000), 0, false);
        assert_eq!(t.lookup(0, 512 + 77, false).map(|x| (x.0.pfn, x.2)), Some((Pfn(1000), true)));
    }
}
