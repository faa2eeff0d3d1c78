//! The hot cache of [`super::RedbStore`]: the bytes of recently committed bundles, kept so that a
//! bundle forwarded or delivered soon after it was stored is read without touching the database.
//!
//! A relay node reads almost every bundle exactly once, shortly after storing it (forwarding) and
//! then deletes it. Keeping the `Bytes` the agent handed to [`super::Store::commit`] (a reference
//! count, not a copy) for a bounded number of bytes turns that read into a clone. Entries leave
//! oldest-first when over budget and immediately when their bundle is deleted or replaced, so the
//! cache never serves bytes the store no longer holds.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

/// A byte-bounded, insertion-ordered map from bundle key to bundle bytes.
#[derive(Debug, Default)]
pub(crate) struct HotCache {
    budget: u64,
    held: u64,
    /// key -> (generation, bytes). The generation tells a stale `order` entry (the key was
    /// removed, or replaced and queued again) from the live one.
    map: HashMap<u64, (u64, Bytes)>,
    order: VecDeque<(u64, u64)>,
    next_gen: u64,
    hits: u64,
    misses: u64,
}

impl HotCache {
    /// The byte budget.
    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// A cache holding at most `budget` bytes (0 disables it).
    pub(crate) fn new(budget: u64) -> Self {
        HotCache {
            budget,
            ..HotCache::default()
        }
    }

    /// Remembers the bytes of a bundle just committed under `key` (replacing older bytes).
    pub(crate) fn insert(&mut self, key: u64, data: &Bytes) {
        self.remove(key);
        let len = data.len() as u64;
        if len == 0 || len > self.budget {
            return;
        }
        while self.held + len > self.budget {
            if !self.evict_oldest() {
                break;
            }
        }
        let g = self.next_gen;
        self.next_gen += 1;
        self.map.insert(key, (g, data.clone()));
        self.order.push_back((key, g));
        self.held += len;
    }

    /// Forgets `key` (its bundle was deleted or replaced).
    pub(crate) fn remove(&mut self, key: u64) {
        if let Some((_, d)) = self.map.remove(&key) {
            self.held -= d.len() as u64;
        }
        // Stale `order` entries are skipped at eviction; drop them early when they pile up at the
        // front (the common case: bundles are deleted in roughly the order they were stored).
        while let Some(&(k, g)) = self.order.front() {
            if self.map.get(&k).is_some_and(|(gen, _)| *gen == g) {
                break;
            }
            self.order.pop_front();
        }
        // Keys removed out of order leave stale entries behind a live front: compact now and then
        // so the queue stays proportional to the live entries.
        if self.order.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.order
                .retain(|(k, g)| map.get(k).is_some_and(|(gen, _)| gen == g));
        }
    }

    /// The cached bytes of `key`, counting a hit or a miss.
    pub(crate) fn get(&mut self, key: u64) -> Option<Bytes> {
        match self.map.get(&key) {
            Some((_, d)) => {
                self.hits += 1;
                Some(d.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    fn evict_oldest(&mut self) -> bool {
        while let Some((k, g)) = self.order.pop_front() {
            if self.map.get(&k).is_some_and(|(gen, _)| *gen == g) {
                if let Some((_, d)) = self.map.remove(&k) {
                    self.held -= d.len() as u64;
                }
                return true;
            }
        }
        false
    }

    /// (hits, misses, bytes held).
    pub(crate) fn stats(&self) -> (u64, u64, u64) {
        (self.hits, self.misses, self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(n: usize, v: u8) -> Bytes {
        Bytes::from(vec![v; n])
    }

    #[test]
    fn bounded_oldest_first_and_removal() {
        let mut c = HotCache::new(100);
        c.insert(1, &b(40, 1));
        c.insert(2, &b(40, 2));
        c.insert(3, &b(40, 3)); // evicts 1
        assert_eq!(c.get(1), None);
        assert_eq!(c.get(2), Some(b(40, 2)));
        assert_eq!(c.stats().2, 80);
        c.remove(2);
        assert_eq!(c.get(2), None);
        assert_eq!(c.stats().2, 40);
        // Replacing a key keeps one copy and its new bytes.
        c.insert(3, &b(10, 9));
        assert_eq!(c.get(3), Some(b(10, 9)));
        assert_eq!(c.stats().2, 10);
        // Too large for the budget: not cached, and nothing else evicted for it.
        c.insert(4, &b(101, 4));
        assert_eq!(c.get(4), None);
        assert_eq!(c.get(3), Some(b(10, 9)));
        let (hits, misses, _) = c.stats();
        assert_eq!((hits, misses), (3, 3));
    }

    #[test]
    fn zero_budget_disables() {
        let mut c = HotCache::new(0);
        c.insert(1, &b(1, 1));
        assert_eq!(c.get(1), None);
        assert_eq!(c.stats().2, 0);
    }

    #[test]
    fn order_queue_stays_bounded_under_churn() {
        let mut c = HotCache::new(1000);
        for k in 0..10_000u64 {
            c.insert(k, &b(10, 0));
            if k >= 5 {
                c.remove(k - 5);
            }
        }
        assert!(
            c.order.len() <= 100,
            "order queue grew to {}",
            c.order.len()
        );
        assert_eq!(c.stats().2, 50);
    }
}
