//! Token-bucket pacing per remote entity: a PDU may leave when the bucket is not in debt;
//! its size is then charged, so the long-run rate is exact whatever the PDU sizes.

use std::time::Duration;

/// A token bucket counted in bits.
#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    rate_bps: u64,
    burst_bits: i128,
    tokens: i128,
    last: Duration,
}

impl Pacer {
    pub(crate) fn new(rate_bps: u64, burst_bytes: usize) -> Self {
        let burst_bits = burst_bytes as i128 * 8;
        Self {
            rate_bps,
            burst_bits,
            tokens: burst_bits,
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
            self.tokens =
                (self.tokens + dt * self.rate_bps as i128 / 1_000_000_000).min(self.burst_bits);
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
        let debt = -self.tokens * 1_000_000_000;
        let rate = self.rate_bps as i128;
        let ns = (debt + rate - 1) / rate;
        Some(now + Duration::from_nanos(ns as u64))
    }

    pub(crate) fn charge(&mut self, now: Duration, bytes: usize) {
        if self.rate_bps == 0 {
            return;
        }
        self.refill(now);
        self.tokens -= bytes as i128 * 8;
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
}
