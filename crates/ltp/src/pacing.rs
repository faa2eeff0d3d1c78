//! Token-bucket pacing, inside the engine so the simulator and the real-time runtime release
//! segments at identical instants.
//!
//! The bucket is a "virtual clock": a segment may leave whenever the balance is not negative,
//! and its size is then debited (the balance may go negative). At a constant rate this spaces
//! segments by exactly their serialization time, which is what a link of that rate would do,
//! and it never delays a lone segment. Balances are kept in bit·nanoseconds so all arithmetic
//! is exact integers.

use std::time::Duration;

const NS_PER_S: i128 = 1_000_000_000;

/// Pacing state of one span.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_bps: u64,
    burst_bytes: u64,
    /// Balance in bit·ns (bits × 1e9).
    balance: i128,
    last: Duration,
}

impl TokenBucket {
    /// A bucket that starts full.
    pub fn new(rate_bps: u64, burst_bytes: u64, now: Duration) -> Self {
        Self {
            rate_bps,
            burst_bytes,
            balance: i128::from(burst_bytes) * 8 * NS_PER_S,
            last: now,
        }
    }

    /// Change the rate (contacts change it). 0 = unlimited.
    pub fn set_rate(&mut self, rate_bps: u64, now: Duration) {
        self.refill(now);
        self.rate_bps = rate_bps;
        if rate_bps == 0 {
            self.balance = self.cap();
        }
    }

    /// Current rate.
    pub fn rate(&self) -> u64 {
        self.rate_bps
    }

    fn cap(&self) -> i128 {
        i128::from(self.burst_bytes) * 8 * NS_PER_S
    }

    fn refill(&mut self, now: Duration) {
        if now > self.last {
            let dt = (now - self.last).as_nanos() as i128;
            self.balance = (self.balance + dt * i128::from(self.rate_bps)).min(self.cap());
            self.last = now;
        }
    }

    /// Earliest time at which a segment may leave (`None` = now).
    pub fn ready_at(&self, now: Duration) -> Option<Duration> {
        if self.rate_bps == 0 {
            return None;
        }
        let r = i128::from(self.rate_bps);
        let elapsed = now.saturating_sub(self.last).as_nanos() as i128;
        let balance = (self.balance + elapsed * r).min(self.cap());
        if balance >= 0 {
            return None;
        }
        let wait_ns = (-balance + r - 1) / r;
        Some(now + Duration::from_nanos(wait_ns as u64))
    }

    /// Earliest time at which the balance is non-negative, regardless of `now` (for
    /// `poll_timeout`). A time in the past means "now".
    pub fn earliest(&self) -> Duration {
        if self.rate_bps == 0 || self.balance >= 0 {
            return self.last;
        }
        let r = i128::from(self.rate_bps);
        self.last + Duration::from_nanos(((-self.balance + r - 1) / r) as u64)
    }

    /// Debit `bytes` just sent.
    pub fn consume(&mut self, bytes: usize, now: Duration) {
        if self.rate_bps == 0 {
            return;
        }
        self.refill(now);
        self.balance -= bytes as i128 * 8 * NS_PER_S;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_segments_by_serialization_time() {
        // 8 Mb/s = 1 byte per microsecond.
        let mut b = TokenBucket::new(8_000_000, 0, Duration::ZERO);
        assert_eq!(b.ready_at(Duration::ZERO), None);
        b.consume(1000, Duration::ZERO);
        assert_eq!(
            b.ready_at(Duration::ZERO),
            Some(Duration::from_micros(1000))
        );
        assert_eq!(b.ready_at(Duration::from_micros(1000)), None);
        b.consume(500, Duration::from_micros(1000));
        assert_eq!(
            b.ready_at(Duration::from_micros(1000)),
            Some(Duration::from_micros(1500))
        );
    }
}
