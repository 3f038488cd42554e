//! The synthetic access generator (modelled on pmbench): processes x threads over one anonymous
//! working set per process, pattern uniform / normal / sequential, a read/write ratio, and an
//! instruction footprint walked for the iTLB.

use crate::engine::prng::Prng;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Uniform,
    Normal,
    Sequential,
}

#[derive(Clone, Debug)]
pub struct SynthState {
    pub region: (u64, u64),
    pub text: (u64, u64),
    pub prng: Prng,
    pub remaining: u64,
    pub pattern: Pattern,
    pub read_pct: u64,
    pub sigma: f64,
    pub fetches_per_access: f64,
    pub fetch_acc: f64,
    pub text_cursor: u64,
    pub seq_cursor: u64,
    /// pmbench `-i`: pages `[init.0, init.1)` of the region are written once, in order, before
    /// the pattern starts (not thinned).
    pub init: (u64, u64),
    /// Thinning (`workload.thin`): each simulated pattern access stands for this many accesses
    /// drawn from the same distribution; the run charges this many times its user time.
    pub thin: u64,
}

impl SynthState {
    /// The next data access: (page index in the region, write?).
    #[inline(always)]
    pub fn next_access(&mut self) -> (u64, bool) {
        let mut prng = self.prng.clone();
        let r = self.next_access_with(&mut prng);
        self.prng = prng;
        r
    }

    /// [`SynthState::next_access`] drawing from `prng`, a copy of `self.prng` that the caller
    /// holds in a local over a run of accesses and writes back after it (the hit loop of
    /// `Sim::step_synth`): the same draws in the same order.
    #[inline(always)]
    pub fn next_access_with(&mut self, prng: &mut Prng) -> (u64, bool) {
        if self.init.0 < self.init.1 {
            self.init.0 += 1;
            return (self.init.0 - 1, true);
        }
        let pages = self.region.1;
        let page = match self.pattern {
            Pattern::Uniform => prng.below(pages),
            Pattern::Sequential => {
                let p = self.seq_cursor;
                self.seq_cursor = (self.seq_cursor + 1) % pages;
                p
            }
            // pmbench's normal_get_number(): mean n/2, stdev the shape in pages; a draw outside
            // [0, n) is replaced by n/2 (pattern.c), not clamped to the edge.
            Pattern::Normal => {
                let x = (pages / 2) as f64 + prng.normal() * self.sigma;
                if x >= 0.0 && x < pages as f64 { x as u64 } else { pages / 2 }
            }
        };
        let write = prng.below(100) >= self.read_pct;
        (page, write)
    }

    /// How many accesses the next data access stands for: 1 while initialising, else `thin`.
    #[inline]
    pub fn weight(&self) -> u64 {
        if self.init.0 < self.init.1 { 1 } else { self.thin }
    }

    /// Whether an instruction-page fetch precedes this access, and which text page.
    #[inline]
    pub fn next_fetch(&mut self) -> Option<u64> {
        if self.text.1 == 0 || self.fetches_per_access <= 0.0 {
            return None;
        }
        self.fetch_acc += self.fetches_per_access;
        if self.fetch_acc < 1.0 {
            return None;
        }
        self.fetch_acc -= 1.0;
        let p = self.text_cursor;
        self.text_cursor = (self.text_cursor + 1) % self.text.1;
        Some(p)
    }
}
