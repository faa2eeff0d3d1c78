//! Store commit latency: a wrapper around the node's store that times every commit into a
//! fixed-bucket histogram, published in the status reply (`store.commit_latency`) and as the
//! `dtnkit_store_commit_seconds` histogram.
//!
//! The agent is sans-IO and never reads a clock; the store is where the time goes (the fsync of
//! a durable commit), so the node measures it here, around [`Store::commit`], on the agent
//! thread that owns both. A failed commit is not timed (it changes nothing and is logged).

use std::time::{Duration, Instant};

use bp::store::{Batch, BundleKey, StoreContents, StoreError};
use bp::Store;
use bytes::Bytes;
use client::status::CommitLatency;

/// Upper bounds of the histogram buckets in seconds (100 µs to 5 s; slower commits fall into
/// the implicit `+Inf` bucket).
pub(crate) const BUCKETS_S: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Commit durations: per-bucket counts (not cumulative), the `+Inf` overflow and the sum.
#[derive(Debug, Default, Clone)]
pub(crate) struct LatencyHistogram {
    buckets: [u64; BUCKETS_S.len()],
    overflow: u64,
    sum: Duration,
}

impl LatencyHistogram {
    /// Counts one commit that took `d`.
    pub(crate) fn record(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        match BUCKETS_S.iter().position(|le| s <= *le) {
            Some(i) => {
                if let Some(b) = self.buckets.get_mut(i) {
                    *b += 1;
                }
            }
            None => self.overflow += 1,
        }
        self.sum += d;
    }

    /// Commits counted.
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().sum::<u64>() + self.overflow
    }

    /// The histogram as the status reply's `store.commit_latency` object: bucket bounds and
    /// cumulative counts (Prometheus `le` semantics: commits that took at most that long),
    /// the total count and the sum of durations.
    pub(crate) fn status(&self) -> CommitLatency {
        let mut acc = 0u64;
        let cumulative: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| {
                acc += b;
                acc
            })
            .collect();
        CommitLatency {
            le_s: BUCKETS_S.to_vec(),
            cumulative,
            count: self.count(),
            sum_s: self.sum.as_secs_f64(),
        }
    }
}

/// A [`Store`] whose commits are timed; everything else passes straight through.
pub(crate) struct TimedStore<S> {
    inner: S,
    latency: LatencyHistogram,
}

impl<S> TimedStore<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            latency: LatencyHistogram::default(),
        }
    }

    /// Durations of the commits so far.
    pub(crate) fn latency(&self) -> &LatencyHistogram {
        &self.latency
    }
}

impl<S: Store> Store for TimedStore<S> {
    fn contents(&mut self) -> Result<StoreContents, StoreError> {
        self.inner.contents()
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return self.inner.commit(batch);
        }
        let started = Instant::now();
        let r = self.inner.commit(batch);
        if r.is_ok() {
            self.latency.record(started.elapsed());
        }
        r
    }

    fn data(&mut self, key: BundleKey) -> Result<Option<Bytes>, StoreError> {
        self.inner.data(key)
    }

    fn locate(&mut self, key: BundleKey) -> Result<Option<bp::store::StoredBytes>, StoreError> {
        self.inner.locate(key)
    }

    fn used_bytes(&self) -> u64 {
        self.inner.used_bytes()
    }

    fn bundle_count(&self) -> u64 {
        self.inner.bundle_count()
    }

    fn recover(&mut self) -> Result<bool, StoreError> {
        self.inner.recover()
    }

    fn stager(&self) -> Option<bp::Stager> {
        self.inner.stager()
    }

    fn hot_cache(&self) -> Option<bp::store::HotCacheStats> {
        self.inner.hot_cache()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_overflow_counts_only_in_the_total() {
        let mut h = LatencyHistogram::default();
        h.record(Duration::from_micros(50)); // <= 100 µs
        h.record(Duration::from_micros(100)); // the bound itself is inside
        h.record(Duration::from_millis(3)); // <= 5 ms
        h.record(Duration::from_secs(9)); // beyond 5 s: +Inf only
        let j = h.status();
        let cum = &j.cumulative;
        assert_eq!(
            (cum.len(), j.le_s.len()),
            (BUCKETS_S.len(), BUCKETS_S.len())
        );
        assert_eq!(cum[0], 2);
        assert_eq!(cum[4], 2, "2.5 ms bucket");
        assert_eq!(cum[5], 3, "5 ms bucket");
        assert_eq!(*cum.last().unwrap(), 3);
        assert_eq!(j.count, 4);
        let sum = j.sum_s;
        assert!((sum - 9.00315).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn only_successful_non_empty_commits_are_timed() {
        let mut s = TimedStore::new(bp::MemoryStore::new());
        s.commit(&Batch::default()).unwrap();
        assert_eq!(s.latency().count(), 0, "an empty batch is no commit");
        let mut b = Batch::default();
        b.push(bp::store::Op::Delete(BundleKey::from_token(1)));
        s.commit(&b).unwrap();
        assert_eq!(s.latency().count(), 1);
    }
}
