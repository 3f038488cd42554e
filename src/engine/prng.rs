//! The simulator's only source of randomness: xoshiro256** seeded by SplitMix64.
//!
//! Named and in-tree (TigerBeetle `stdx/prng`) so that a seed printed with a result reproduces it on
//! any platform and any version of the dependencies. Nothing in simulation code may use another RNG.

#[derive(Clone, Debug)]
pub struct Prng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Prng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let s = [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)];
        Prng { s }
    }

    /// A child stream, independent of the parent's future output (used per thread so that adding a
    /// thread does not perturb the others' streams).
    pub fn fork(&mut self, salt: u64) -> Prng {
        Prng::new(self.next_u64() ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift (bias < 2^-32 for the sizes used here).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal by Box–Muller (deterministic: uses exactly two draws).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_different_seed_differs() {
        let a: Vec<u64> = (0..8).scan(Prng::new(42), |p, _| Some(p.next_u64())).collect();
        let b: Vec<u64> = (0..8).scan(Prng::new(42), |p, _| Some(p.next_u64())).collect();
        let c: Vec<u64> = (0..8).scan(Prng::new(43), |p, _| Some(p.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range() {
        let mut p = Prng::new(1);
        for n in [1u64, 2, 3, 7, 1000, u32::MAX as u64] {
            for _ in 0..1000 {
                assert!(p.below(n) < n);
            }
        }
    }
}
