//! A sequence kept in blocks of at most [`BLOCK`] elements: what a `VecDeque` does (indexing,
//! push at the back, pop at the front, ranges), but an insertion in the middle moves at most
//! one block's elements instead of up to half the sequence.
//!
//! Used by the lock calendars (`kernel/locking.rs`), whose holds are kept in request order: a
//! CPU whose clock lags behind the one that ran before it books its hold thousands of holds
//! before the back, and `VecDeque::insert` made that a memmove of up to 2,048 64-byte holds
//! (docs/performance.md). Positions are [`Cursor`]s (block, offset), so that reaching an
//! element costs no walk over the blocks; `cursor_at` maps an index to one.
//!
//! Each element has a [`Keyed::key`]; the key of every block's last element is kept in one
//! contiguous array (`lasts`) and the key of the first element beside the length, so that
//! [`Chunked::partition_point_key`] (over keys sorted ascending) bisects the blocks without
//! reading them, and [`Chunked::front_key`] reads no block at all (docs/performance.md, item
//! 11). Mutable access must not change an element's key.

use std::collections::VecDeque;

/// Maximum elements per block; a block that grows past it is split in two halves.
pub const BLOCK: usize = 64;

/// Emptied blocks kept for reuse.
const SPARES: usize = 4;

/// An element's ordering key (a lock hold's request time).
pub trait Keyed {
    fn key(&self) -> u64;
}

#[derive(Clone, Debug)]
pub struct Chunked<T> {
    /// Never an empty block.
    blocks: VecDeque<VecDeque<T>>,
    /// The key of each block's last element, in block order.
    lasts: VecDeque<u64>,
    /// The key of the first element (meaningless when empty).
    first: u64,
    len: usize,
    /// Blocks emptied by `pop_front`, kept for the next new blocks (at most [`SPARES`], the
    /// larger ones): a calendar pruned at its front while it splits blocks at its back, or
    /// pruned empty and booked again, allocates nothing (docs/performance.md, items 11, 22
    /// and 27).
    spares: Vec<VecDeque<T>>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { blocks: VecDeque::new(), lasts: VecDeque::new(), first: 0, len: 0, spares: Vec::new() }
    }
}

impl<T: Keyed> Chunked<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn front(&self) -> Option<&T> {
        self.blocks.front().and_then(|b| b.front())
    }

    /// The key of the first element, without reading any block.
    #[inline]
    pub fn front_key(&self) -> Option<u64> {
        (self.len > 0).then_some(self.first)
    }

    pub fn back(&self) -> Option<&T> {
        self.blocks.back().and_then(|b| b.back())
    }

    /// A new block: a spare if there is one, else room for `cap` elements.
    fn new_block(&mut self, cap: usize) -> VecDeque<T> {
        self.spares.pop().unwrap_or_else(|| VecDeque::with_capacity(cap))
    }

    /// Keep an emptied block as a spare, in place of the smallest one when [`SPARES`] are
    /// kept and it is larger.
    fn keep_spare(&mut self, b: VecDeque<T>) {
        if self.spares.len() < SPARES {
            self.spares.push(b);
        } else if let Some(s) = self.spares.iter_mut().min_by_key(|s| s.capacity()).filter(|s| s.capacity() < b.capacity()) {
            *s = b;
        }
    }

    /// Empty the sequence, keeping its storage (the largest blocks as spares, the key array's
    /// capacity) for reuse: what `*self = Chunked::default()` does to the contents.
    pub fn clear(&mut self) {
        while let Some(mut b) = self.blocks.pop_front() {
            b.clear();
            self.keep_spare(b);
        }
        self.lasts.clear();
        self.first = 0;
        self.len = 0;
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let b = self.blocks.front_mut()?;
        let x = b.pop_front();
        self.len -= 1;
        // The new first key: from the same block unless it is now empty (read once).
        if let Some(f) = b.front() {
            self.first = f.key();
        } else {
            let b = self.blocks.pop_front().expect("front block");
            self.lasts.pop_front();
            self.keep_spare(b);
            if let Some(f) = self.front() {
                self.first = f.key();
            }
        }
        x
    }

    /// The first block's length and last key (None when empty): what
    /// [`Chunked::pop_front_block`] would drop, read without touching the block's elements.
    #[inline]
    pub fn front_block(&self) -> Option<(usize, u64)> {
        Some((self.blocks.front()?.len(), *self.lasts.front()?))
    }

    /// Pop the whole first block at once, returning its last element: what popping its
    /// elements one by one returns last, reading one element instead of each.
    pub fn pop_front_block(&mut self) -> Option<T> {
        let mut b = self.blocks.pop_front()?;
        self.lasts.pop_front();
        self.len -= b.len();
        let x = b.pop_back();
        b.clear();
        self.keep_spare(b);
        if let Some(f) = self.front() {
            self.first = f.key();
        }
        x
    }

    pub fn push_back(&mut self, x: T) {
        self.push_back_at(x);
    }

    /// [`Chunked::push_back`], returning the new element's position.
    #[inline]
    fn push_back_at(&mut self, x: T) -> Cursor {
        let k = x.key();
        if self.len == 0 {
            self.first = k;
        }
        self.len += 1;
        let nb = self.blocks.len();
        match self.blocks.back_mut() {
            Some(b) if b.len() < BLOCK => {
                b.push_back(x);
                *self.lasts.back_mut().expect("a key per block") = k;
                Cursor { b: nb - 1, o: b.len() - 1 }
            }
            _ => {
                // The first block grows as needed (most calendars, one per PTE-table lock,
                // hold a few holds at a time); a second one means a busy calendar, and gets
                // room for a whole block at once, unless a spare is kept, which is reused
                // whatever its size (docs/performance.md, items 11 and 22).
                let mut b = if self.blocks.is_empty() { self.spares.pop().unwrap_or_default() } else { self.new_block(BLOCK) };
                b.push_back(x);
                self.blocks.push_back(b);
                self.lasts.push_back(k);
                Cursor { b: nb, o: 0 }
            }
        }
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
    pub fn insert(&mut self, mut c: Cursor, x: T) -> Cursor {
        if c.b >= self.blocks.len() {
            return self.push_back_at(x);
        }
        if c.b == 0 && c.o == 0 {
            self.first = x.key();
        }
        if self.blocks[c.b].len() >= BLOCK {
            // Split a full block in two halves first: growing it past BLOCK would double its
            // storage (a reallocation and a copy) just before the split (item 27).
            let half = self.blocks[c.b].len() / 2;
            let mut tail = self.new_block(BLOCK);
            let b = &mut self.blocks[c.b];
            tail.extend(b.drain(half..));
            let last = b.back().expect("half a block").key();
            self.lasts[c.b] = last;
            let tail_last = tail.back().expect("half a block").key();
            self.blocks.insert(c.b + 1, tail);
            self.lasts.insert(c.b + 1, tail_last);
            if c.o >= half {
                c = Cursor { b: c.b + 1, o: c.o - half };
            }
        }
        // A cursor inside a block is before one of its elements (the end is block count, 0),
        // so the block's last key is unchanged.
        self.blocks[c.b].insert(c.o, x);
        self.len += 1;
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

    /// [`Chunked::partition_point`] for a predicate on the key, with the keys sorted
    /// ascending: the blocks are bisected over their last keys (one contiguous array), the last
    /// block tried first (most lock requests land there), then one block is bisected.
    pub fn partition_point_key(&self, mut pred: impl FnMut(u64) -> bool) -> Cursor {
        let n = self.lasts.len();
        let bi = if n == 0 || pred(self.lasts[n - 1]) {
            return self.end();
        } else if n == 1 || pred(self.lasts[n - 2]) {
            n - 1
        } else {
            // The point is before block n - 2's end: bisecting all the keys finds it.
            self.lasts.partition_point(|&k| pred(k))
        };
        Cursor { b: bi, o: self.blocks[bi].partition_point(|x| pred(x.key())) }
    }

    /// Whether an element from `c` on satisfies `pred`, looking only at those whose key is
    /// below `key_end` (keys sorted ascending: the first at or above it ends the search). What
    /// `iter_from(c).take_while(|x| x.key() < key_end).any(pred)` returns, over the blocks'
    /// slices.
    pub fn any_below_key(&self, c: Cursor, key_end: u64, mut pred: impl FnMut(&T) -> bool) -> bool {
        let mut skip = c.o;
        for b in self.blocks.range(c.b.min(self.blocks.len())..) {
            let (front, back) = b.as_slices();
            let (front, back) = if skip <= front.len() { (&front[skip..], back) } else { (&front[..0], &back[skip - front.len()..]) };
            for x in front.iter().chain(back) {
                if x.key() >= key_end {
                    return false;
                }
                if pred(x) {
                    return true;
                }
            }
            skip = 0;
        }
        false
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

    /// A key and a payload that `Bump` changes (mutable access must keep keys).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct E(u32, u32);

    impl Keyed for E {
        fn key(&self) -> u64 {
            self.0 as u64
        }
    }

    /// The kept keys equal the blocks' (first element, each block's last).
    fn keys_consistent(c: &Chunked<E>) -> bool {
        c.front_key() == c.front().map(|e| e.key())
            && c.lasts.len() == c.blocks.len()
            && c.blocks.iter().zip(&c.lasts).all(|(b, &k)| b.back().map(|e| e.key()) == Some(k))
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Insert a value at (position % (len + 1)).
        Insert(usize, u32),
        Push(u32),
        Pop,
        /// Pop the whole first block.
        PopBlock,
        /// Add to every element from (position % (len + 1)) on, stopping after `n`.
        Bump(usize, usize),
        Get(usize),
        /// Empty it, keeping the storage (`Chunked::clear`).
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            50 => (any::<usize>(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            30 => any::<u32>().prop_map(Op::Push),
            20 => Just(Op::Pop),
            10 => Just(Op::PopBlock),
            10 => (any::<usize>(), 0usize..200).prop_map(|(k, n)| Op::Bump(k, n)),
            20 => any::<usize>().prop_map(Op::Get),
            // Rare, so that sequences still grow long enough to split blocks.
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Every operation gives what a `VecDeque` gives, and the contents stay equal (long
        /// enough sequences to split blocks many times and empty them again).
        #[test]
        fn behaves_as_a_vecdeque(ops in proptest::collection::vec(op(), 1..1500)) {
            let mut c: Chunked<E> = Chunked::default();
            let mut d: VecDeque<E> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let v = E(v, 0);
                        let k = k % (d.len() + 1);
                        let at = c.insert(c.cursor_at(k), v);
                        d.insert(k, v);
                        prop_assert_eq!(c.index_of(at), k);
                        prop_assert_eq!(c.at(at), Some(&v));
                    }
                    Op::Push(v) => {
                        let v = E(v, 0);
                        c.push_back(v);
                        d.push_back(v);
                    }
                    Op::Pop => prop_assert_eq!(c.pop_front(), d.pop_front()),
                    Op::PopBlock => {
                        let n = c.front_block().map_or(0, |(n, _)| n);
                        prop_assert_eq!(c.front_block().map(|(_, k)| k), d.get(n.wrapping_sub(1)).map(|e| e.key()));
                        let last = d.drain(..n).last();
                        prop_assert_eq!(c.pop_front_block(), last);
                    }
                    Op::Bump(k, n) => {
                        let k = k % (d.len() + 1);
                        for x in c.iter_mut_from(c.cursor_at(k)).take(n) {
                            x.1 = x.1.wrapping_add(1);
                        }
                        for x in d.range_mut(k..).take(n) {
                            x.1 = x.1.wrapping_add(1);
                        }
                    }
                    Op::Clear => {
                        c.clear();
                        d.clear();
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
                prop_assert!(keys_consistent(&c));
            }
            let all: Vec<E> = c.iter_from(c.cursor_at(0)).copied().collect();
            prop_assert_eq!(&all, &d.iter().copied().collect::<Vec<_>>());
            for k in [0, d.len() / 3, d.len() / 2, d.len().saturating_sub(1), d.len(), d.len() + 1] {
                let at = c.cursor_at(k);
                prop_assert_eq!(c.iter_from(at).copied().collect::<Vec<_>>(), d.range(k.min(d.len())..).copied().collect::<Vec<_>>());
                // any_below_key against the plain iterator, for bounds that include keys of
                // the sequence (the boundary case). The keys need not be sorted here: both
                // stop at the first key at or above the bound.
                let own = [k, k + 1, k + 5, d.len() / 2].into_iter().filter_map(|i| d.get(i).map(|e| e.key()));
                for bound in [0u64, 1 << 31, u64::MAX].into_iter().chain(own) {
                    let pred = |e: &E| e.1 % 2 == 1 || e.0 % 7 == 3;
                    let want = d.range(k.min(d.len())..).take_while(|e| e.key() < bound).any(|e| pred(e));
                    prop_assert_eq!(c.any_below_key(at, bound, pred), want);
                }
                let rev: Vec<(usize, E)> = d.range(..k.min(d.len())).copied().enumerate().rev().collect();
                prop_assert_eq!(c.iter_rev_before(at).map(|(p, &x)| (c.index_of(p), x)).collect::<Vec<_>>(), rev);
            }
        }

        /// `partition_point` and `partition_point_key` over sorted contents, for every
        /// threshold, with holds popped from the front in between (as pruning does).
        #[test]
        fn partition_point_as_a_vecdeque(xs in proptest::collection::vec(0u32..500, 0..700), ts in proptest::collection::vec((0u32..520, 0usize..40), 1..40)) {
            let mut c: Chunked<E> = Chunked::default();
            // Built by insertions in the middle (in sorted position), so blocks are of uneven
            // sizes.
            let mut d: VecDeque<u32> = VecDeque::new();
            for &x in &xs {
                let k = d.partition_point(|&y| y <= x);
                c.insert(c.partition_point_key(|y| y <= x as u64), E(x, 0));
                d.insert(k, x);
                prop_assert!(keys_consistent(&c));
            }
            for (t, pops) in ts {
                let want = d.partition_point(|&y| y <= t);
                prop_assert_eq!(c.index_of(c.partition_point(|y| y.0 <= t)), want);
                prop_assert_eq!(c.index_of(c.partition_point_key(|y| y <= t as u64)), want);
                for _ in 0..pops {
                    prop_assert_eq!(c.pop_front().map(|e| e.0), d.pop_front());
                }
                prop_assert!(keys_consistent(&c));
            }
        }
    }
}
