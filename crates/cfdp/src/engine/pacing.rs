//! Token-bucket pacing per remote entity: a PDU may leave when the bucket is not in debt;
//! its size is then charged, so the long-run rate is exact whatever the PDU sizes.
//!
//! The balance is kept in bit·nanoseconds, so a refill never rounds: with whole bits, every
//! refill dropped the fraction of a bit it earned, and a driver that refills at every poll
//! lost a share of the rate that grew with how often it polled.

use std::time::Duration;

const NS_PER_S: i128 = 1_000_000_000;

/// A token bucket counted in bit·ns (bits × 1e9).
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    rate_bps: u64,
    /// Depth in bit·ns.
    burst: i128,
    /// Balance in bit·ns.
    tokens: i128,
    last: Duration,
}

impl Pacer {
    pub(crate) fn new(rate_bps: u64, burst_bytes: usize) -> Self {
        let burst = burst_bytes as i128 * 8 * NS_PER_S;
        Self {
            rate_bps,
            burst,
            tokens: burst,
            last: Duration::ZERO,
        }
    }

    /// The latest time the bucket was refilled at.
    pub(crate) fn last(&self) -> Duration {
        self.last
    }

    pub(crate) fn set_rate(&mut self, rate_bps: u64, burst_bytes: usize) {
        *self = Self::new(rate_bps, burst_bytes);
    }

    fn refill(&mut self, now: Duration) {
        if now > self.last {
            let dt = (now - self.last).as_nanos() as i128;
            self.tokens = (self.tokens + dt * self.rate_bps as i128).min(self.burst);
            self.last = now;
        }
    }

    /// None if a PDU may leave now, else when it may.
    pub(crate) fn ready_at(&mut self, now: Duration) -> Option<Duration> {
        if self.rate_bps == 0 {
            return None;
        }
        self.refill(now);
        if self.tokens >= 0 {
            return None;
        }
        let rate = self.rate_bps as i128;
        let ns = (-self.tokens + rate - 1) / rate;
        Some(now + Duration::from_nanos(ns as u64))
    }

    /// How long after `now` everything this bucket let out, `bytes` more included, takes to leave a link
    /// that serializes at the pacing rate: the time for the bucket to fill up again once `bytes` are charged
    /// (zero without a rate).
    pub(crate) fn drain_after(&mut self, now: Duration, bytes: usize) -> Duration {
        if self.rate_bps == 0 {
            return Duration::ZERO;
        }
        self.refill(now);
        let owed = self.burst - self.tokens + bytes as i128 * 8 * NS_PER_S;
        let rate = self.rate_bps as i128;
        Duration::from_nanos(u64::try_from(owed.max(0) / rate).unwrap_or(u64::MAX))
    }

    pub(crate) fn charge(&mut self, now: Duration, bytes: usize) {
        if self.rate_bps == 0 {
            return;
        }
        self.refill(now);
        self.tokens -= bytes as i128 * 8 * NS_PER_S;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_run_rate_is_exact() {
        let mut p = Pacer::new(8_000_000, 64 * 1024); // 1 MB/s
        let mut now = Duration::ZERO;
        let mut sent = 0usize;
        while now < Duration::from_secs(1) {
            match p.ready_at(now) {
                None => {
                    p.charge(now, 1000);
                    sent += 1000;
                }
                Some(t) => now = t,
            }
        }
        // One second plus the initial burst.
        assert!((1_000_000..=1_000_000 + 66_000).contains(&sent), "{sent}");
    }

    #[test]
    fn drain_counts_what_left_ahead() {
        // 1 MB/s, a bucket of 1000 bytes: a PDU of 1000 bytes from a full bucket leaves the link 1 ms
        // later; the next one, sent right behind it, 2 ms later.
        let mut p = Pacer::new(8_000_000, 1000);
        let t = Duration::from_secs(1);
        assert_eq!(p.drain_after(t, 1000), Duration::from_millis(1));
        p.charge(t, 1000);
        assert_eq!(p.drain_after(t, 1000), Duration::from_millis(2));
        assert_eq!(Pacer::new(0, 1000).drain_after(t, 1000), Duration::ZERO);
    }

    /// A driver that polls every microsecond gets the exact rate: no refill rounds anything away.
    #[test]
    fn frequent_polls_lose_nothing() {
        let rate = 99_669_333u64;
        let pdu = 7318usize;
        let mut p = Pacer::new(rate, pdu);
        let mut sent = 0u64;
        for us in 0..1_000_000u64 {
            let now = Duration::from_micros(us);
            if p.ready_at(now).is_none() {
                p.charge(now, pdu);
                sent += 1;
            }
        }
        // One second at the rate plus the initial bucket, in whole PDUs (the last may be in debt).
        let expected = (rate + pdu as u64 * 8) / (pdu as u64 * 8);
        assert!(
            sent == expected || sent == expected + 1,
            "{sent} vs {expected}"
        );
    }
}
