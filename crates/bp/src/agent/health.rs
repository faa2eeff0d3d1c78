//! The store's health as the agent sees it: healthy, or degraded after a failure.
//!
//! A store that failed (a full disk, an I/O error; redb then refuses every operation until the
//! database is reopened) puts the agent in the *degraded* state: new bundles from applications
//! and convergence layers are refused at once with [`StoreError::Unavailable`] (nothing is
//! acknowledged, so senders keep their copies and retry), deletes of bundles already forwarded
//! or delivered wait in memory, and the agent retries on a timer ([`crate::Agent::poll_timeout`]):
//! it asks the store to recover ([`crate::store::Store::recover`]: redb is reopened), commits
//! what waited, and returns to healthy when that works. Retries back off exponentially
//! ([`StoreHealth::RETRY_FIRST_MS`] doubling up to [`StoreHealth::RETRY_MAX_MS`]), so a disk
//! that stays full costs one attempt (and one log line in the node) per back-off period, not a
//! busy loop. Nothing acknowledged depends on this state: what was committed before the failure
//! stays committed, and what failed was never acknowledged.

use super::DtnTime;
use crate::store::StoreError;

/// Why and since when the store is degraded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Degraded {
    /// DTN time of the failure that degraded it.
    pub since_ms: DtnTime,
    /// The store's error message.
    pub reason: String,
    /// DTN time of the next recovery attempt.
    pub retry_at_ms: DtnTime,
    /// Recovery attempts that failed since `since_ms`.
    pub attempts: u32,
}

/// Store health: the state plus counters for `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreHealth {
    degraded: Option<Degraded>,
    /// Store operations that failed (commits, reads), over the agent's life.
    pub failures: u64,
    /// Times the store came back from degraded to healthy.
    pub recoveries: u64,
    /// Next back-off delay (ms).
    delay_ms: u64,
}

impl StoreHealth {
    /// First retry after a failure (ms).
    pub const RETRY_FIRST_MS: u64 = 250;
    /// Longest retry period (ms).
    pub const RETRY_MAX_MS: u64 = 10_000;

    /// The degraded state, if the store is degraded.
    pub fn degraded(&self) -> Option<&Degraded> {
        self.degraded.as_ref()
    }

    /// True when the store is healthy.
    pub fn is_ok(&self) -> bool {
        self.degraded.is_none()
    }

    /// The error refused operations get while degraded.
    pub(crate) fn unavailable(&self, now: DtnTime) -> Option<StoreError> {
        self.degraded.as_ref().map(|d| StoreError::Unavailable {
            reason: d.reason.clone(),
            retry_in_ms: d.retry_at_ms.saturating_sub(now),
        })
    }

    /// Records a failure; degrades the store (or keeps it degraded) until the next retry.
    pub(crate) fn fail(&mut self, now: DtnTime, e: &StoreError) {
        if matches!(e, StoreError::Unavailable { .. }) {
            return;
        }
        self.failures += 1;
        match self.degraded.as_mut() {
            Some(d) => {
                d.reason = e.to_string();
            }
            None => {
                self.delay_ms = Self::RETRY_FIRST_MS;
                self.degraded = Some(Degraded {
                    since_ms: now,
                    reason: e.to_string(),
                    retry_at_ms: now.saturating_add(self.delay_ms),
                    attempts: 0,
                });
            }
        }
    }

    /// A recovery attempt at `now` failed with `e`: the next one waits twice as long (capped).
    pub(crate) fn retry_failed(&mut self, now: DtnTime, e: &StoreError) {
        self.failures += 1;
        self.delay_ms =
            (self.delay_ms.saturating_mul(2)).clamp(Self::RETRY_FIRST_MS, Self::RETRY_MAX_MS);
        if let Some(d) = self.degraded.as_mut() {
            d.reason = e.to_string();
            d.attempts += 1;
            d.retry_at_ms = now.saturating_add(self.delay_ms);
        }
    }

    /// The store works again.
    pub(crate) fn recovered(&mut self) {
        if self.degraded.take().is_some() {
            self.recoveries += 1;
        }
        self.delay_ms = Self::RETRY_FIRST_MS;
    }

    /// When the next recovery attempt is due (None when healthy).
    pub(crate) fn retry_at(&self) -> Option<DtnTime> {
        self.degraded.as_ref().map(|d| d.retry_at_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_the_cap_and_reset_on_recovery() {
        let mut h = StoreHealth::default();
        let e = StoreError::Database("No space left on device".into());
        h.fail(1000, &e);
        assert_eq!(h.retry_at(), Some(1000 + StoreHealth::RETRY_FIRST_MS));
        // A second failure while degraded does not move the retry.
        h.fail(1100, &e);
        assert_eq!(h.retry_at(), Some(1000 + StoreHealth::RETRY_FIRST_MS));
        let mut now = 1250;
        let mut gaps = Vec::new();
        for _ in 0..10 {
            h.retry_failed(now, &e);
            let next = h.retry_at().unwrap();
            gaps.push(next - now);
            now = next;
        }
        assert_eq!(&gaps[..4], &[500, 1000, 2000, 4000]);
        assert!(gaps.iter().all(|g| *g <= StoreHealth::RETRY_MAX_MS));
        assert_eq!(*gaps.last().unwrap(), StoreHealth::RETRY_MAX_MS);
        assert_eq!(h.degraded().unwrap().attempts, 10);
        assert_eq!(h.failures, 12);
        h.recovered();
        assert!(h.is_ok());
        assert_eq!(h.recoveries, 1);
        h.fail(now, &e);
        assert_eq!(h.retry_at(), Some(now + StoreHealth::RETRY_FIRST_MS));
    }
}
