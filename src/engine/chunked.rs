//! A sequence kept in blocks of at most [`BLOCK`] elements: what a `VecDeque` does (indexing,
//! push at the back, pop at the front, ranges), but an insertion in the middle moves at most
//! one block's elements instead of up to half the sequence.
//!
//! Used by the lock calendars (`kernel/locking.rs`), whose holds are kept in request order: a
//! CPU whose clock lags behind the one that ran before it books its hold thousands of holds
//! before the back, and `VecDeque::insert` made that a memmove of up to 2,048 64-byte holds
//! (docs/performance.md). Positions are [`Cursor`]s (block, offset), so that reaching an
//! element costs no walk over the blocks; `cursor_at` maps an index to one.

use std::collections::VecDeque;

/// Maximum elements per block; a block that grows past it is split in two halves.
pub const BLOCK: usize = 64;

#[derive(Clone, Debug)]
pub struct Chunked<T> {
    /// Never an empty block.
    blocks: VecDeque<VecDeque<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { blocks: VecDeque::new(), len: 0 }
    }
}

impl<T> Chunked<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn front(&self) -> Option<&T> {
        self.blocks.front().and_then(|b| b.front())
    }

    pub fn back(&self) -> Option<&T> {
        self.blocks.back().and_then(|b| b.back())
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let b = self.blocks.front_mut()?;
        let x = b.pop_front();
        if b.is_empty() {
            self.blocks.pop_front();
        }
        self.len -= 1;
        x
    }

    pub fn push_back(&mut self, x: T) {
        match self.blocks.back_mut() {
            Some(b) if b.len() < BLOCK => b.push_back(x),
            _ => {
                // Grown as needed rather than room for 64 up front: most calendars (one per
                // PTE-table lock) hold a few holds at a time (docs/performance.md).
                let mut b = VecDeque::new();
                b.push_back(x);
                self.blocks.push_back(b);
            }
        }
        self.len += 1;
    }

    /// The position of index `i` (the end if `i >= len`), walking the blocks from the back.
    pub fn cursor_at(&self, i: usize) -> Cursor {
        if i >= self.len {
            return self.end();
        }
        let mut end = self.len;
        for (bi, b) in self.blocks.iter().enumerate().rev() {
            let start = end - b.len();
            if i >= start {
                return Cursor { b: bi, o: i - start };
            }
            end = start;
        }
        unreachable!("index {i} out of a sequence of {}", self.len)
    }

    /// The index of a position.
    pub fn index_of(&self, c: Cursor) -> usize {
        self.blocks.range(..c.b).map(|b| b.len()).sum::<usize>() + c.o
    }

    /// The position after the last element.
    #[inline]
    pub fn end(&self) -> Cursor {
        Cursor { b: self.blocks.len(), o: 0 }
    }

    /// The position after `c`.
    #[inline]
    pub fn next(&self, c: Cursor) -> Cursor {
        match self.blocks.get(c.b) {
            Some(b) if c.o + 1 < b.len() => Cursor { b: c.b, o: c.o + 1 },
            Some(_) => Cursor { b: c.b + 1, o: 0 },
            None => c,
        }
    }

    /// The element at `c` (None at the end).
    #[inline]
    pub fn at(&self, c: Cursor) -> Option<&T> {
        self.blocks.get(c.b).and_then(|b| b.get(c.o))
    }

    #[inline]
    pub fn at_mut(&mut self, c: Cursor) -> Option<&mut T> {
        self.blocks.get_mut(c.b).and_then(|b| b.get_mut(c.o))
    }

    /// The element before `c` (None at the front).
    #[inline]
    pub fn before(&self, c: Cursor) -> Option<&T> {
        if c.o > 0 {
            self.blocks.get(c.b).and_then(|b| b.get(c.o - 1))
        } else {
            c.b.checked_sub(1).and_then(|p| self.blocks.get(p)).and_then(|b| b.back())
        }
    }

    /// Insert `x` at `c`, before the element there (at the end: push it). Returns the
    /// position of the new element; every other position taken before is invalid after.
    pub fn insert(&mut self, c: Cursor, x: T) -> Cursor {
        if c.b >= self.blocks.len() {
            self.push_back(x);
            let b = self.blocks.len() - 1;
            return Cursor { b, o: self.blocks[b].len() - 1 };
        }
        let b = &mut self.blocks[c.b];
        b.insert(c.o, x);
        self.len += 1;
        if b.len() > BLOCK {
            let half = b.len() / 2;
            let tail = b.split_off(half);
            self.blocks.insert(c.b + 1, tail);
            if c.o >= half {
                return Cursor { b: c.b + 1, o: c.o - half };
            }
        }
        c
    }

    /// The position of the first element that does not satisfy `pred`, which must hold for a
    /// prefix of the sequence and not after it (as `VecDeque::partition_point`).
    pub fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> Cursor {
        // The first block whose last element fails `pred` holds the point.
        let bi = self.blocks.partition_point(|b| b.back().is_some_and(&mut pred));
        match self.blocks.get(bi) {
            Some(b) => Cursor { b: bi, o: b.partition_point(pred) },
            None => self.end(),
        }
    }

    /// The elements from `c` on.
    pub fn iter_from(&self, c: Cursor) -> impl Iterator<Item = &T> + '_ {
        self.blocks.range(c.b.min(self.blocks.len())..).enumerate().flat_map(move |(j, b)| b.range(if j == 0 { c.o } else { 0 }..))
    }

    /// The elements from `c` on, mutably.
    pub fn iter_mut_from(&mut self, c: Cursor) -> impl Iterator<Item = &mut T> + '_ {
        let from = c.b.min(self.blocks.len());
        self.blocks.range_mut(from..).enumerate().flat_map(move |(j, b)| b.range_mut(if j == 0 { c.o } else { 0 }..))
    }

    /// The elements before `c`, last first, with their positions.
    pub fn iter_rev_before(&self, c: Cursor) -> impl Iterator<Item = (Cursor, &T)> + '_ {
        let head = self.blocks.get(c.b).into_iter().flat_map(move |b| b.range(..c.o).enumerate().rev().map(move |(o, x)| (Cursor { b: c.b, o }, x)));
        let rest = self.blocks.range(..c.b.min(self.blocks.len())).enumerate().rev().flat_map(|(bi, b)| b.iter().enumerate().rev().map(move |(o, x)| (Cursor { b: bi, o }, x)));
        head.chain(rest)
    }
}

/// A position in a [`Chunked`]: element `o` of block `b`; the end is (number of blocks, 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    b: usize,
    o: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// Insert a value at (position % (len + 1)).
        Insert(usize, u32),
        Push(u32),
        Pop,
        /// Add to every element from (position % (len + 1)) on, stopping after `n`.
        Bump(usize, usize),
        Get(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (any::<usize>(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => any::<u32>().prop_map(Op::Push),
            2 => Just(Op::Pop),
            1 => (any::<usize>(), 0usize..200).prop_map(|(k, n)| Op::Bump(k, n)),
            2 => any::<usize>().prop_map(Op::Get),
        ]
    }

    proptest! {
        /// Every operation gives what a `VecDeque` gives, and the contents stay equal (long
        /// enough sequences to split blocks many times and empty them again).
        #[test]
        fn behaves_as_a_vecdeque(ops in proptest::collection::vec(op(), 1..1500)) {
            let mut c: Chunked<u32> = Chunked::default();
            let mut d: VecDeque<u32> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let k = k % (d.len() + 1);
                        let at = c.insert(c.cursor_at(k), v);
                        d.insert(k, v);
                        prop_assert_eq!(c.index_of(at), k);
                        prop_assert_eq!(c.at(at), Some(&v));
                    }
                    Op::Push(v) => {
                        c.push_back(v);
                        d.push_back(v);
                    }
                    Op::Pop => prop_assert_eq!(c.pop_front(), d.pop_front()),
                    Op::Bump(k, n) => {
                        let k = k % (d.len() + 1);
                        for x in c.iter_mut_from(c.cursor_at(k)).take(n) {
                            *x = x.wrapping_add(1);
                        }
                        for x in d.range_mut(k..).take(n) {
                            *x = x.wrapping_add(1);
                        }
                    }
                    Op::Get(i) => {
                        let i = i % (d.len() + 1);
                        let at = c.cursor_at(i);
                        prop_assert_eq!(c.index_of(at), i);
                        prop_assert_eq!(c.at(at), d.get(i));
                        prop_assert_eq!(c.before(at), i.checked_sub(1).and_then(|p| d.get(p)));
                        prop_assert_eq!(c.index_of(c.next(at)), (i + 1).min(d.len()));
                    }
                }
                prop_assert_eq!(c.len(), d.len());
                prop_assert_eq!(c.front(), d.front());
                prop_assert_eq!(c.back(), d.back());
                prop_assert!(c.blocks.iter().all(|b| !b.is_empty() && b.len() <= BLOCK));
            }
            let all: Vec<u32> = c.iter_from(c.cursor_at(0)).copied().collect();
            prop_assert_eq!(&all, &d.iter().copied().collect::<Vec<_>>());
            for k in [0, d.len() / 3, d.len() / 2, d.len().saturating_sub(1), d.len(), d.len() + 1] {
                let at = c.cursor_at(k);
                prop_assert_eq!(c.iter_from(at).copied().collect::<Vec<_>>(), d.range(k.min(d.len())..).copied().collect::<Vec<_>>());
                let rev: Vec<(usize, u32)> = d.range(..k.min(d.len())).copied().enumerate().rev().collect();
                prop_assert_eq!(c.iter_rev_before(at).map(|(p, &x)| (c.index_of(p), x)).collect::<Vec<_>>(), rev);
            }
        }

        /// `partition_point` over sorted contents, for every threshold.
        #[test]
        fn partition_point_as_a_vecdeque(mut xs in proptest::collection::vec(0u32..500, 0..700), ts in proptest::collection::vec(0u32..520, 1..40)) {
            xs.sort();
            let mut c: Chunked<u32> = Chunked::default();
            // Built by insertions in the middle, so blocks are of uneven sizes.
            let mut d: VecDeque<u32> = VecDeque::new();
            for &x in &xs {
                let k = d.partition_point(|&y| y <= x);
                c.insert(c.partition_point(|&y| y <= x), x);
                d.insert(k, x);
            }
            for t in ts {
                prop_assert_eq!(c.index_of(c.partition_point(|&y| y <= t)), d.partition_point(|&y| y <= t));
            }
        }
    }
}
