//! A set of byte ranges kept as sorted, disjoint, non-adjacent half-open intervals.
//!
//! Both sides of a session need it: the receiver records which red bytes arrived (to build
//! reception claims and detect completion) and the sender records which bytes were claimed
//! (to compute exactly the unclaimed ranges to retransmit). In-order insertion, the common
//! case, is O(1).

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

    /// The intervals, ascending.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges
    }

    /// Number of disjoint intervals.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Insert `r`, merging with overlapping or adjacent intervals. Returns the number of bytes
    /// that were not in the set before.
    pub fn insert(&mut self, r: Range<u64>) -> u64 {
        if r.start >= r.end {
            return 0;
        }
        // Fast path: append or extend the last interval.
        if let Some(last) = self.ranges.last_mut() {
            if r.start > last.end {
                self.ranges.push(r.clone());
                return r.end - r.start;
            }
            if r.start >= last.start {
                let added = r.end.saturating_sub(last.end);
                if r.end > last.end {
                    last.end = r.end;
                }
                return added;
            }
        } else {
            self.ranges.push(r.clone());
            return r.end - r.start;
        }
        // General case: find the first interval whose end >= r.start.
        let i = self.ranges.partition_point(|x| x.end < r.start);
        let mut j = i;
        let mut start = r.start;
        let mut end = r.end;
        let mut covered = 0u64;
        while j < self.ranges.len() && self.ranges[j].start <= end {
            let x = &self.ranges[j];
            covered += x.end.min(end).saturating_sub(x.start.max(start));
            start = start.min(x.start);
            end = end.max(x.end);
            j += 1;
        }
        self.ranges.splice(i..j, std::iter::once(start..end));
        (r.end - r.start) - covered
    }

    /// Whether every byte of `r` is in the set.
    pub fn contains_range(&self, r: Range<u64>) -> bool {
        if r.start >= r.end {
            return true;
        }
        let i = self.ranges.partition_point(|x| x.end <= r.start);
        self.ranges
            .get(i)
            .is_some_and(|x| x.start <= r.start && x.end >= r.end)
    }

    /// Call `f` for each maximal sub-range of `within` that is NOT in the set, ascending.
    pub fn for_each_gap(&self, within: Range<u64>, mut f: impl FnMut(Range<u64>)) {
        let mut cursor = within.start;
        let i = self.ranges.partition_point(|x| x.end <= within.start);
        for x in &self.ranges[i..] {
            if x.start >= within.end {
                break;
            }
            if x.start > cursor {
                f(cursor..x.start.min(within.end));
            }
            cursor = cursor.max(x.end);
            if cursor >= within.end {
                return;
            }
        }
        if cursor < within.end {
            f(cursor..within.end);
        }
    }

    /// Number of bytes of `within` that are NOT in the set.
    pub fn missing_len(&self, within: Range<u64>) -> u64 {
        let mut n = 0;
        self.for_each_gap(within, |g| n += g.end - g.start);
        n
    }

    /// Largest end offset in the set (0 when empty).
    pub fn max_end(&self) -> u64 {
        self.ranges.last().map_or(0, |r| r.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_merges_and_counts_new_bytes() {
        let mut s = RangeSet::new();
        assert_eq!(s.insert(10..20), 10);
        assert_eq!(s.insert(30..40), 10);
        assert_eq!(s.insert(0..5), 5);
        assert_eq!(s.insert(15..35), 10);
        assert_eq!(s.ranges(), &[0..5, 10..40]);
        assert_eq!(s.insert(5..10), 5);
        assert_eq!(s.len(), 1);
        assert_eq!(s.ranges()[0], 0..40);
        assert_eq!(s.insert(0..40), 0);
        assert!(s.contains_range(3..39));
        assert!(!s.contains_range(39..41));
    }

    #[test]
    fn gaps() {
        let mut s = RangeSet::new();
        s.insert(10..20);
        s.insert(30..40);
        let mut g = Vec::new();
        s.for_each_gap(0..50, |r| g.push(r));
        assert_eq!(g, vec![0..10, 20..30, 40..50]);
        g.clear();
        s.for_each_gap(15..35, |r| g.push(r));
        assert_eq!(g, vec![20..30]);
        g.clear();
        s.for_each_gap(10..20, |r| g.push(r));
        assert!(g.is_empty());
        assert_eq!(s.missing_len(0..50), 30);
        assert_eq!(s.missing_len(15..35), 10);
        assert_eq!(s.missing_len(12..18), 0);
    }
}
