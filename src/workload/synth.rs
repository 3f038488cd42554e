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
    /// The next access drawn early by [`SynthState::peek_page`]: (page, write, weight). The
    /// next call of [`SynthState::next_access_with`] returns it instead of drawing, so the
    /// accesses and the PRNG's draws are the same, in the same order, as without the peek.
    pub ahead: Option<(u64, bool, u64)>,
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
        if let Some((page, write, _)) = self.ahead.take() {
            return (page, write);
        }
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
        match self.ahead {
            Some((_, _, w)) => w,
            None if self.init.0 < self.init.1 => 1,
            None => self.thin,
        }
    }

    /// The page of the next data access, drawn now and kept in `ahead` for
    /// [`SynthState::next_access_with`] (with its weight, read before the draw as the step
    /// loop reads it): the caller prefetches its PTE while the current access runs.
    #[inline]
    pub fn peek_page(&mut self) -> u64 {
        if self.ahead.is_none() {
            let w = self.weight();
            let (page, write) = self.next_access();
            self.ahead = Some((page, write, w));
        }
        self.ahead.map(|a| a.0).unwrap_or_default()
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
            ahead: None,
        }
    }

    /// The step loop reads the weight, then draws the access.
    fn take(st: &mut SynthState) -> (u64, bool, u64) {
        let w = st.weight();
        let (p, wr) = st.next_access();
        (p, wr, w)
    }

    #[test]
    fn peeking_ahead_changes_no_access_and_no_weight() {
        // Peek before every access (as a miss-heavy stream does), or at random points.
        for (pattern, always) in [Pattern::Uniform, Pattern::Normal, Pattern::Sequential].into_iter().flat_map(|p| [(p, true), (p, false)]) {
            let (mut plain, mut peeked) = (state(pattern, (0, 20), 7), state(pattern, (0, 20), 7));
            let mut prng = Prng::new(99);
            for i in 0..2000 {
                let want = take(&mut plain);
                // A second peek in a row is a no-op.
                if always || prng.below(3) == 0 {
                    let ahead = peeked.peek_page();
                    assert_eq!(peeked.peek_page(), ahead);
                    assert_eq!(ahead, want.0, "{pattern:?} access {i}: the peek is the next access");
                }
                assert_eq!(take(&mut peeked), want, "{pattern:?} access {i}");
            }
        }
    }
}
