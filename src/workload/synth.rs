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
        let page = self.pattern_page(prng);
        if self.pattern == Pattern::Sequential {
            self.seq_cursor = (self.seq_cursor + 1) % self.region.1;
        }
        let write = prng.below(100) >= self.read_pct;
        (page, write)
    }

    /// The pattern's next page, drawing from `prng` (the sequential cursor is not moved).
    #[inline(always)]
    fn pattern_page(&self, prng: &mut Prng) -> u64 {
        let pages = self.region.1;
        match self.pattern {
            Pattern::Uniform => prng.below(pages),
            Pattern::Sequential => self.seq_cursor,
            // pmbench's normal_get_number(): mean n/2, stdev the shape in pages; a draw outside
            // [0, n) is replaced by n/2 (pattern.c), not clamped to the edge.
            Pattern::Normal => {
                let x = (pages / 2) as f64 + prng.normal() * self.sigma;
                if x >= 0.0 && x < pages as f64 { x as u64 } else { pages / 2 }
            }
        }
    }

    /// How many accesses the next data access stands for: 1 while initialising, else `thin`.
    #[inline]
    pub fn weight(&self) -> u64 {
        if self.init.0 < self.init.1 { 1 } else { self.thin }
    }

    /// The page of the next data access, drawn from a copy of `prng` (nothing changes; the
    /// access is drawn again when it comes): the caller prefetches its PTE while the current
    /// access runs. A second draw costs a few ns, the host cache miss it hides about a hundred;
    /// keeping the drawn access for later would cost every L1 hit a check instead.
    #[inline]
    pub fn peek_page(&self, prng: &Prng) -> u64 {
        if self.init.0 < self.init.1 { self.init.0 } else { self.pattern_page(&mut prng.clone()) }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn state(pattern: Pattern, init: (u64, u64), thin: u64) -> SynthState {
        SynthState {
            region: (1000, 300),
            text: (0, 0),
            prng: Prng::new(7),
            remaining: u64::MAX,
            pattern,
            read_pct: 60,
            sigma: 40.0,
            fetches_per_access: 0.0,
            fetch_acc: 0.0,
            text_cursor: 0,
            seq_cursor: 0,
            init,
            thin,
        }
    }

    #[test]
    fn peek_page_is_the_next_page_and_changes_nothing() {
        for pattern in [Pattern::Uniform, Pattern::Normal, Pattern::Sequential] {
            let (mut plain, mut peeked) = (state(pattern, (0, 20), 7), state(pattern, (0, 20), 7));
            for i in 0..2000 {
                let ahead = peeked.peek_page(&peeked.prng);
                assert_eq!(peeked.peek_page(&peeked.prng), ahead, "peeking twice gives the same page");
                let want = (plain.weight(), plain.next_access());
                assert_eq!(ahead, want.1.0, "{pattern:?} access {i}: the peek is the next access");
                assert_eq!((peeked.weight(), peeked.next_access()), want, "{pattern:?} access {i}");
            }
        }
    }
}
