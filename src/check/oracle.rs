//! The stale-TLB oracle: a ledger of its own, beside the model, that sees every TLB fill, every
//! access served by a TLB entry, every frame allocation and free and every pageout, and decides
//! whether a stale translation could have done harm (mechanisms.md §1, "Safety argument").
//!
//! | state        | meaning                                                    | changed by          |
//! |--------------|------------------------------------------------------------|---------------------|
//! | `frame_gen[pfn]`   | frame generation: bumped when the frame is freed and when it is allocated again | `free`, `alloc` |
//! | `ver[key]`   | data version of a logical page (shared file page: file+pgoff; private: mm+vpn) | every write through a mapping |
//! | `discards[key]` | the version a discard (zap of private data) produced | munmap, MADV_DONTNEED |
//! | `content[pfn]` | the (key, version) of the data the frame holds: what a stale entry to it reads | fills, writes |
//! | `fills`      | per (cpu, asid, vpn): the (pfn, frame_gen, key, ver) the last fill saw | `fill`, writes  |
//! | `ring[pfn]`  | the last [`RING`] events of the frame                       | every hook          |
//!
//! The oracle never changes the model; the model calls it only when `Sim::oracle` is Some.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::types::*;

/// Events kept per frame for the history of a violation.
pub const RING: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// A read or write reached a frame that was freed (and maybe reallocated) since the fill.
    UseAfterReuse,
    /// A write through a cached dirty, writable entry after the unmap and before the flush
    /// (or an entry still able to write when the frame's writeback starts).
    LostWrite,
    /// A write through a clean or read-only entry completed without faulting.
    MissingTrap,
    /// A read through a stale entry returned data the mapping no longer holds.
    StaleData,
    /// A structural invariant of the model's state is broken (src/check/structural.rs); the
    /// detail names the checker.
    Structural,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::UseAfterReuse => "use-after-reuse",
            Class::LostWrite => "lost-write",
            Class::MissingTrap => "missing-trap",
            Class::StaleData => "stale-data",
            Class::Structural => "structural",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Violation {
    pub class: Class,
    pub detail: String,
    /// The frame's recent events, oldest first.
    pub history: Vec<String>,
}

#[derive(Clone, Copy, Debug)]
pub struct Fill {
    pub pfn: Pfn,
    pub frame_gen: u32,
    pub key: u64,
    pub ver: u32,
    pub mm: MmId,
}

#[derive(Clone, Copy, Debug)]
struct Ev {
    t: Ns,
    cpu: u32,
    what: &'static str,
    mm: u32,
    vpn: u64,
}

#[derive(Debug, Default)]
pub struct Oracle {
    frame_gen: Vec<u32>,
    ring: Vec<VecDeque<Ev>>,
    ver: HashMap<u64, u32>,
    content: Vec<(u64, u32)>,
    /// Per logical page, the version its last discard (zap of private data) produced.
    discards: HashMap<u64, u32>,
    fills: HashMap<(u32, u16, u64), Fill>,
    pub violations: Vec<Violation>,
    /// Stale reads of an unchanged, not-reused frame: what batched flushing relies on.
    pub allowed_stale_reads: u64,
    /// Accesses checked (served by a TLB entry).
    pub checked_hits: u64,
    /// Coverage marks: path name → times reached.
    pub marks: BTreeMap<&'static str, u64>,
    /// Stop recording after this many violations (the first one is what matters).
    pub max_violations: usize,
    /// Whether the structural checkers run (src/check/structural.rs).
    pub structural: bool,
    /// LUF (mm/luf.rs): frames freed with their flush deferred, and when (until reallocated).
    luf_freed_at: HashMap<u32, Ns>,
    /// LUF: allowed stale reads of a freed, not yet reallocated frame, and a log2 histogram of
    /// how long after the free they came (bucket i: [2^i, 2^(i+1)) µs; bucket 0 also < 1 µs).
    pub luf_stale_reads: u64,
    pub luf_window_hist: [u64; 32],
}

impl Oracle {
    pub fn new(nframes: usize) -> Oracle {
        Oracle { frame_gen: vec![0; nframes], ring: vec![VecDeque::new(); nframes], content: vec![(u64::MAX, 0); nframes], max_violations: 4, structural: true, ..Default::default() }
    }

    pub fn mark(&mut self, name: &'static str) {
        *self.marks.entry(name).or_insert(0) += 1;
    }

    pub fn frame_gen(&self, pfn: Pfn) -> u32 {
        self.frame_gen[pfn.0 as usize]
    }

    pub fn event(&mut self, pfn: Pfn, t: Ns, cpu: Option<CpuId>, what: &'static str, mm: Option<MmId>, vpn: u64) {
        let r = &mut self.ring[pfn.0 as usize];
        if r.len() == RING {
            r.pop_front();
        }
        r.push_back(Ev { t, cpu: cpu.map_or(u32::MAX, |c| c.0), what, mm: mm.map_or(u32::MAX, |m| m.0), vpn });
    }

    pub fn history(&self, pfn: Pfn) -> Vec<String> {
        self.ring[pfn.0 as usize]
            .iter()
            .map(|e| {
                let cpu = if e.cpu == u32::MAX { "-".to_string() } else { format!("cpu{}", e.cpu) };
                let at = if e.mm == u32::MAX { String::new() } else { format!(" mm{} vpn {:#x}", e.mm, e.vpn) };
                format!("{:>12} ns {cpu:>5} pfn {}: {}{at}", e.t, pfn.0, e.what)
            })
            .collect()
    }

    pub fn bump_gen(&mut self, pfn: Pfn) {
        let g = &mut self.frame_gen[pfn.0 as usize];
        *g = g.wrapping_add(1);
    }

    pub fn version(&self, key: u64) -> u32 {
        self.ver.get(&key).copied().unwrap_or(0)
    }

    /// A write to a logical page: returns the new version.
    pub fn bump_version(&mut self, key: u64) -> u32 {
        let v = self.ver.entry(key).or_insert(0);
        *v = v.wrapping_add(1);
        *v
    }

    /// The private data of a logical page was thrown away (munmap, MADV_DONTNEED, exit).
    pub fn discard(&mut self, key: u64) {
        let v = self.bump_version(key);
        self.discards.insert(key, v);
    }

    /// Whether the page was discarded after it held version `ver`.
    pub fn discarded_since(&self, key: u64, ver: u32) -> bool {
        self.discards.get(&key).is_some_and(|&d| d > ver)
    }

    /// What the frame holds: (logical page key, data version); key u64::MAX = nothing known.
    pub fn content(&self, pfn: Pfn) -> (u64, u32) {
        self.content[pfn.0 as usize]
    }

    pub fn set_content(&mut self, pfn: Pfn, key: u64, ver: u32) {
        self.content[pfn.0 as usize] = (key, ver);
    }

    /// A frame freed with a deferred LUF flush at time `t`.
    pub fn luf_freed(&mut self, pfn: Pfn, t: Ns) {
        self.luf_freed_at.insert(pfn.0, t);
    }

    /// The frame is allocated again: its LUF window (if any) is over.
    pub fn luf_reallocated(&mut self, pfn: Pfn) {
        self.luf_freed_at.remove(&pfn.0);
    }

    /// When the frame was freed with a deferred LUF flush, if it is still free.
    pub fn luf_freed_time(&self, pfn: Pfn) -> Option<Ns> {
        self.luf_freed_at.get(&pfn.0).copied()
    }

    /// Count an allowed LUF stale read `window` ns after the frame's free.
    pub fn luf_stale_read(&mut self, window: Ns) {
        self.luf_stale_reads += 1;
        let us = window / 1000;
        let b = if us == 0 { 0 } else { (63 - us.leading_zeros()) as usize };
        self.luf_window_hist[b.min(31)] += 1;
    }

    pub fn record_fill(&mut self, cpu: CpuId, asid: u16, vpn: u64, f: Fill) {
        self.fills.insert((cpu.0, asid, vpn), f);
    }

    pub fn fill_of(&mut self, cpu: CpuId, asid: u16, vpn: u64) -> Option<&mut Fill> {
        self.fills.get_mut(&(cpu.0, asid, vpn))
    }

    pub fn report(&mut self, class: Class, pfn: Pfn, detail: String) {
        if self.violations.len() < self.max_violations {
            let history = self.history(pfn);
            self.violations.push(Violation { class, detail, history });
        }
    }
}
