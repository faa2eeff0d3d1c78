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
    /// Depth expressed as time at the current rate: the bucket holds at least
    /// `rate × burst_time` worth of bits, so it scales with contact rates.
    burst_time: Duration,
    /// Balance in bit·ns (bits × 1e9).
    balance: i128,
    last: Duration,
}

impl TokenBucket {
    /// A bucket `burst_bytes` deep that starts full.
    pub fn new(rate_bps: u64, burst_bytes: u64, now: Duration) -> Self {
        Self::with_burst_time(rate_bps, burst_bytes, Duration::ZERO, now)
    }

    /// A bucket that starts full, `max(burst_bytes, rate × burst_time)` deep.
    ///
    /// A time-based depth is what keeps a paced sender at its rate when its wake-ups are
    /// late: a driver that oversleeps by `d` may then send `rate × d` at once, up to the
    /// depth, instead of losing that share of the contact. A zero depth loses every
    /// oversleep (one late wake-up per segment: 1 KiB segments at 500 Mb/s are 16 µs apart,
    /// far below an OS scheduler's latency).
    pub fn with_burst_time(
        rate_bps: u64,
        burst_bytes: u64,
        burst_time: Duration,
        now: Duration,
    ) -> Self {
        let mut b = Self {
            rate_bps,
            burst_bytes,
            burst_time,
            balance: 0,
            last: now,
        };
        b.balance = b.cap();
        b
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

    /// Current depth in bytes (the larger of the byte and the time bound at the current
    /// rate).
    pub fn depth_bytes(&self) -> u64 {
        u64::try_from(self.cap() / (8 * NS_PER_S)).unwrap_or(u64::MAX)
    }

    fn cap(&self) -> i128 {
        let bytes = i128::from(self.burst_bytes) * 8 * NS_PER_S;
        let time = i128::from(self.rate_bps) * self.burst_time.as_nanos() as i128;
        bytes.max(time)
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

    #[test]
    fn time_depth_scales_with_rate_and_credits_late_wakeups() {
        // 8 Mb/s, 2 ms depth = 2000 bytes; a 100-byte byte depth is the smaller bound.
        let ms = Duration::from_millis;
        let mut b = TokenBucket::with_burst_time(8_000_000, 100, ms(2), Duration::ZERO);
        assert_eq!(b.depth_bytes(), 2000);
        // Starts full: two 1000-byte segments leave at once, the third waits.
        b.consume(1000, Duration::ZERO);
        assert_eq!(b.ready_at(Duration::ZERO), None);
        b.consume(1000, Duration::ZERO);
        assert_eq!(b.ready_at(Duration::ZERO), None);
        b.consume(1000, Duration::ZERO);
        assert_eq!(b.ready_at(Duration::ZERO), Some(ms(1)));
        // A driver that wakes 5 ms late is credited up to the depth (2000 bytes), no more.
        assert_eq!(b.ready_at(ms(6)), None);
        b.consume(1000, ms(6));
        b.consume(1000, ms(6));
        assert_eq!(b.ready_at(ms(6)), None);
        b.consume(1000, ms(6));
        assert_eq!(b.ready_at(ms(6)), Some(ms(7)));
        // The depth follows the rate: at 80 Mb/s, 2 ms = 20 000 bytes.
        b.set_rate(80_000_000, ms(7));
        assert_eq!(b.depth_bytes(), 20_000);
        // With only a byte depth of zero the late wake-up is lost: one segment per wake-up.
        let mut z = TokenBucket::new(8_000_000, 0, Duration::ZERO);
        z.consume(1000, Duration::ZERO);
        assert_eq!(z.ready_at(ms(6)), None);
        z.consume(1000, ms(6));
        assert_eq!(z.ready_at(ms(6)), Some(ms(7)));
    }
}
