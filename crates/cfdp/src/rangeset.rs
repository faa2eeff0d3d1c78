//! Received (or requested) byte ranges of a file as sorted, disjoint, non-adjacent half-open
//! intervals.
//!
//! The receiver records what arrived and derives NAK segment requests and completion from it;
//! the sender records what a NAK asked it to resend. Appending in order, the common case, is
//! O(1); [`RangeSet::insert_new`] reports exactly the parts that were not there before, so
//! duplicates (CFDP-repeat, retransmissions that crossed a NAK) are neither written twice nor
//! counted twice.

use std::ops::Range;

/// Sorted disjoint intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<Range<u64>>,
}

impl RangeSet {
    /// Empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rebuild from intervals (any order, overlaps allowed).
    pub fn from_ranges(ranges: impl IntoIterator<Item = Range<u64>>) -> Self {
        let mut s = Self::new();
        for r in ranges {
            s.insert(r);
        }
        s
    }

    /// The intervals, ascending.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Total bytes covered.
    pub fn covered(&self) -> u64 {
        self.ranges.iter().map(|r| r.end - r.start).sum()
    }

    /// End of the last interval (0 when empty).
    pub fn upper_bound(&self) -> u64 {
        self.ranges.last().map_or(0, |r| r.end)
    }

    /// Length of the interval starting at 0 (the contiguous prefix).
    pub fn prefix(&self) -> u64 {
        match self.ranges.first() {
            Some(r) if r.start == 0 => r.end,
            _ => 0,
        }
    }

    /// Whether `[0, len)` is entirely covered (true for `len == 0`).
    pub fn covers_prefix(&self, len: u64) -> bool {
        len == 0 || self.prefix() >= len
    }

    /// The parts of `r` not in the set, ascending.
    pub fn missing_within(&self, r: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        if r.start >= r.end {
            return out;
        }
        let mut cursor = r.start;
        let first = self.ranges.partition_point(|x| x.end <= r.start);
        for x in &self.ranges[first..] {
            if x.start >= r.end {
                break;
            }
            if x.start > cursor {
                out.push(cursor..x.start);
            }
            cursor = cursor.max(x.end);
            if cursor >= r.end {
                break;
            }
        }
        if cursor < r.end {
            out.push(cursor..r.end);
        }
        out
    }

    /// Insert `r` and return the parts of it that were new.
    pub fn insert_new(&mut self, r: Range<u64>) -> Vec<Range<u64>> {
        // Fast path: in-order append.
        if r.start < r.end && self.ranges.last().is_none_or(|l| r.start >= l.end) {
            self.insert(r.clone());
            return vec![r];
        }
        let new = self.missing_within(r.clone());
        if !new.is_empty() {
            self.insert(r);
        }
        new
    }

    /// Insert `r`, merging with overlapping or adjacent intervals. Returns the number of bytes
    /// that were not in the set before.
    pub fn insert(&mut self, r: Range<u64>) -> u64 {
        if r.start >= r.end {
            return 0;
        }
        if let Some(last) = self.ranges.last_mut() {
            if r.start > last.end {
                self.ranges.push(r.clone());
                return r.end - r.start;
            }
            if r.start >= last.start {
                let added = r.end.saturating_sub(last.end);
                last.end = last.end.max(r.end);
                return added;
            }
        } else {
            self.ranges.push(r.clone());
            return r.end - r.start;
        }
        // General case: intervals [lo, hi) of the vector touch r.
        let lo = self.ranges.partition_point(|x| x.end < r.start);
        let hi = self.ranges.partition_point(|x| x.start <= r.end);
        let before: u64 = self.ranges[lo..hi].iter().map(|x| x.end - x.start).sum();
        let start = self
            .ranges
            .get(lo)
            .map_or(r.start, |x| x.start.min(r.start));
        let end = if hi > lo {
            self.ranges[hi - 1].end.max(r.end)
        } else {
            r.end
        };
        self.ranges.splice(lo..hi, std::iter::once(start..end));
        (end - start) - before
    }

    /// Remove `r` from the set.
    pub fn remove(&mut self, r: Range<u64>) {
        if r.start >= r.end || self.ranges.is_empty() {
            return;
        }
        let lo = self.ranges.partition_point(|x| x.end <= r.start);
        let hi = self.ranges.partition_point(|x| x.start < r.end);
        if lo >= hi {
            return;
        }
        let mut keep = Vec::with_capacity(2);
        let first = self.ranges[lo].clone();
        let last = self.ranges[hi - 1].clone();
        if first.start < r.start {
            keep.push(first.start..r.start);
        }
        if last.end > r.end {
            keep.push(r.end..last.end);
        }
        self.ranges.splice(lo..hi, keep);
    }

    /// Take up to `max` bytes from the front of the set (removing them).
    pub fn pop_front(&mut self, max: u64) -> Option<Range<u64>> {
        let first = self.ranges.first_mut()?;
        let end = first.end.min(first.start.saturating_add(max.max(1)));
        let taken = first.start..end;
        if end == first.end {
            self.ranges.remove(0);
        } else {
            first.start = end;
        }
        Some(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(bits: &[bool]) -> Vec<Range<u64>> {
        let mut out: Vec<Range<u64>> = Vec::new();
        for (i, &b) in bits.iter().enumerate() {
            let i = i as u64;
            if b {
                match out.last_mut() {
                    Some(l) if l.end == i => l.end = i + 1,
                    _ => out.push(i..i + 1),
                }
            }
        }
        out
    }

    #[test]
    fn random_operations_match_a_bitmap() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut rnd = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..200 {
            let mut set = RangeSet::new();
            let mut bits = vec![false; 64];
            for _ in 0..30 {
                let a = rnd(64);
                let b = (a + rnd(12)).min(64);
                match rnd(3) {
                    0 => {
                        let missing = set.missing_within(a..b);
                        let expect_missing: u64 =
                            (a..b).filter(|&i| !bits[i as usize]).count() as u64;
                        assert_eq!(
                            missing.iter().map(|r| r.end - r.start).sum::<u64>(),
                            expect_missing
                        );
                        let new = set.insert_new(a..b);
                        assert_eq!(new, missing);
                        for i in a..b {
                            bits[i as usize] = true;
                        }
                    }
                    1 => {
                        let added = set.insert(a..b);
                        let expect: u64 = (a..b).filter(|&i| !bits[i as usize]).count() as u64;
                        assert_eq!(added, expect);
                        for i in a..b {
                            bits[i as usize] = true;
                        }
                    }
                    _ => {
                        set.remove(a..b);
                        for i in a..b {
                            bits[i as usize] = false;
                        }
                    }
                }
                assert_eq!(set.ranges(), naive(&bits).as_slice());
                assert_eq!(set.covered(), bits.iter().filter(|&&b| b).count() as u64);
            }
        }
    }

    #[test]
    fn pop_front_splits_large_ranges() {
        let mut s = RangeSet::from_ranges([10..25, 30..31]);
        assert_eq!(s.pop_front(10), Some(10..20));
        assert_eq!(s.pop_front(10), Some(20..25));
        assert_eq!(s.pop_front(10), Some(30..31));
        assert_eq!(s.pop_front(10), None);
    }

    #[test]
    fn prefix_and_bounds() {
        let s = RangeSet::from_ranges([0..5, 7..9]);
        assert_eq!(s.prefix(), 5);
        assert!(s.covers_prefix(5) && !s.covers_prefix(6));
        assert_eq!(s.upper_bound(), 9);
        assert_eq!(s.missing_within(0..12), vec![5..7, 9..12]);
    }
}
