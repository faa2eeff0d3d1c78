//! The round trip toward each remote entity, measured from the PDUs themselves, and the
//! timers derived from it.
//!
//! Samples (Karn's rule: only exchanges whose request left once):
//! - a sender: EOF → ACK(EOF), and in the immediate NAK mode the first-pass File Data PDU
//!   that revealed a gap → the NAK of that gap;
//! - a receiver: NAK → the first retransmitted byte it asked for, for NAKs issued while no
//!   earlier request was outstanding (otherwise the sample would include the time the
//!   sender spent on the earlier retransmissions).
//!
//! The estimator is RFC 6298's (SRTT, RTTVAR, RTO = SRTT + max(G, 4·RTTVAR), G = 1 ms).

use std::time::Duration;

use super::config::RemoteConfig;

/// Largest backoff exponent of the ACK and NAK timers (×64).
pub(crate) const MAX_BACKOFF: u32 = 6;

/// Clock granularity term of the RTO.
const GRANULARITY: Duration = Duration::from_millis(1);

/// Smoothed round trip and its variation toward one remote entity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    samples: u64,
    last: Option<Duration>,
    /// Smallest sample that may be too long (a receiver's request made while others were
    /// outstanding: it includes the sender's time on those), kept until the first sample.
    loose: Option<Duration>,
}

impl RttEstimator {
    /// Add one measured round trip.
    pub fn sample(&mut self, rtt: Duration) {
        self.samples += 1;
        self.last = Some(rtt);
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + err) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// A round trip that may be too long, never too short: until the first sample, the
    /// timers follow the smallest of these (bounded by the configured values as always).
    pub fn sample_loose(&mut self, rtt: Duration) {
        self.loose = Some(self.loose.map_or(rtt, |l| l.min(rtt)));
    }

    /// The smallest loose sample (see [`RttEstimator::sample_loose`]).
    pub fn loose(&self) -> Option<Duration> {
        self.loose
    }

    /// Smoothed round trip (None before the first sample).
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// Round-trip variation.
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// Samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The latest sample.
    pub fn last(&self) -> Option<Duration> {
        self.last
    }

    /// Retransmission timeout: SRTT + max(1 ms, 4·RTTVAR) (None before the first sample).
    pub fn rto(&self) -> Option<Duration> {
        self.srtt.map(|s| s + (self.rttvar * 4).max(GRANULARITY))
    }

    /// The RTO, or before the first sample the RTO a first sample equal to the smallest
    /// loose one would give (3 × it: SRTT = R, RTTVAR = R / 2).
    pub fn rto_or_loose(&self) -> Option<Duration> {
        self.rto()
            .or_else(|| self.loose.map(|l| l + (l * 2).max(GRANULARITY)))
    }
}

/// The timers a transaction with a remote uses, after [`crate::AdaptiveTimers`] applied the
/// measured round trip to the configured values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectiveTimers {
    /// NAK timer.
    pub nak: Duration,
    /// Positive ACK timer.
    pub ack: Duration,
    /// Inactivity timer.
    pub inactivity: Duration,
}

/// `v` clamped to `[lo, hi]`, `hi` winning when the bounds cross.
fn clamp(v: Duration, lo: Duration, hi: Duration) -> Duration {
    v.max(lo).min(hi)
}

impl EffectiveTimers {
    /// The NAK timer after `unanswered` NAK-timer expiries in a row without progress (no new
    /// file data since): a derived timer doubles from the second one on (RTO, RTO, 2·RTO,
    /// 4·RTO, ... at most ×2^[`MAX_BACKOFF`] and the configured `nak_timer`); a timer set
    /// explicitly stays as set.
    ///
    /// Why: the NAK limit counts expiries, and a timer derived from a round trip of
    /// milliseconds spent the 15 of the default limit in 150 ms (the 10 ms floor): a sender
    /// busy with other requests or judging the repeats as NAKs that crossed its copy, or a
    /// return link down for a moment, failed the transaction (200 MB on loopback at 10 % loss:
    /// "NAK limit reached" with one 1024-byte PDU missing). Backed off, the same limit waits
    /// 6.4 s at that floor; the first re-ask still comes one RTO after the request it repeats,
    /// as a single lost retransmission needs.
    pub fn nak_after(&self, rc: &RemoteConfig, unanswered: u32) -> Duration {
        if !rc.adaptive.nak {
            return self.nak;
        }
        let k = unanswered.saturating_sub(1).min(MAX_BACKOFF);
        self.nak
            .saturating_mul(1 << k)
            .min(rc.nak_timer.max(self.nak))
    }

    /// Timers for `rc` given the round trip measured so far and the ACK timer's backoff
    /// (doubled per positive-ACK expiry since the latest sample, Karn's rule: an EOF or
    /// Finished sent twice gives no sample, so a round trip grown past the timer is only
    /// learnt once the timer has grown past it).
    pub fn derive(rc: &RemoteConfig, rtt: &RttEstimator, ack_backoff: u32) -> Self {
        let a = &rc.adaptive;
        let Some(rto) = rtt.rto_or_loose() else {
            return Self {
                nak: rc.nak_timer,
                ack: rc.ack_timer,
                inactivity: rc.inactivity_timer,
            };
        };
        let nak = if a.nak {
            clamp(rto, a.min_timer, rc.nak_timer)
        } else {
            rc.nak_timer
        };
        let ack = if a.ack {
            let backed_off = rto.saturating_mul(1 << ack_backoff.min(MAX_BACKOFF));
            clamp(backed_off, a.min_timer, rc.ack_timer)
        } else {
            rc.ack_timer
        };
        let inactivity = if a.inactivity {
            // Long enough for every ACK or NAK retransmission the limits allow, twice over.
            let limit = rc.ack_limit.max(rc.nak_limit).saturating_add(1);
            let v = rto.saturating_mul(2).saturating_mul(limit);
            clamp(v, a.min_inactivity, rc.inactivity_timer)
        } else {
            rc.inactivity_timer
        };
        Self {
            nak,
            ack,
            inactivity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn rfc6298_estimator() {
        let mut e = RttEstimator::default();
        assert_eq!(e.rto(), None);
        e.sample(ms(100));
        assert_eq!(
            (e.srtt(), e.rttvar(), e.rto()),
            (Some(ms(100)), ms(50), Some(ms(300)))
        );
        e.sample(ms(100));
        // rttvar = 3/4·50 + 1/4·0 = 37.5; srtt = 100.
        assert_eq!(e.rttvar(), Duration::from_micros(37_500));
        assert_eq!(e.rto(), Some(ms(250)));
    }

    #[test]
    fn loose_samples_stand_in_until_the_first_sample() {
        let rc = RemoteConfig::new(1);
        let mut e = RttEstimator::default();
        e.sample_loose(ms(30));
        e.sample_loose(ms(50));
        assert_eq!(
            (e.rto(), e.loose(), e.rto_or_loose()),
            (None, Some(ms(30)), Some(ms(90)))
        );
        assert_eq!(EffectiveTimers::derive(&rc, &e, 0).nak, ms(90));
        // Never below the floor, never above the configured bound.
        e.sample_loose(ms(1));
        assert_eq!(
            EffectiveTimers::derive(&rc, &e, 0).nak,
            rc.adaptive.min_timer
        );
        let mut big = RttEstimator::default();
        big.sample_loose(Duration::from_secs(5));
        assert_eq!(EffectiveTimers::derive(&rc, &big, 0).nak, rc.nak_timer);
        e.sample(ms(100));
        assert_eq!(e.rto_or_loose(), e.rto());
    }

    #[test]
    fn derived_timers_are_bounded_and_explicit_settings_win() {
        let mut rc = RemoteConfig::new(1);
        let mut e = RttEstimator::default();
        let t = EffectiveTimers::derive(&rc, &e, 0);
        assert_eq!(
            (t.nak, t.ack, t.inactivity),
            (rc.nak_timer, rc.ack_timer, rc.inactivity_timer)
        );
        e.sample(ms(20)); // RTO 60 ms
        let t = EffectiveTimers::derive(&rc, &e, 0);
        assert_eq!((t.nak, t.ack), (ms(60), ms(60)));
        assert_eq!(EffectiveTimers::derive(&rc, &e, 2).ack, ms(240));
        assert_eq!(EffectiveTimers::derive(&rc, &e, 9).ack, rc.ack_timer);
        assert_eq!(t.inactivity, rc.adaptive.min_inactivity);
        let mut big = RttEstimator::default();
        big.sample(Duration::from_secs(10)); // RTO 30 s
        let t = EffectiveTimers::derive(&rc, &big, 0);
        assert_eq!(
            (t.nak, t.ack, t.inactivity),
            (rc.nak_timer, rc.ack_timer, rc.inactivity_timer)
        );
        let mut tiny = RttEstimator::default();
        tiny.sample(Duration::from_micros(100));
        assert_eq!(
            EffectiveTimers::derive(&rc, &tiny, 0).nak,
            rc.adaptive.min_timer
        );
        rc.adaptive.nak = false;
        rc.nak_timer = ms(700);
        assert_eq!(EffectiveTimers::derive(&rc, &e, 0).nak, ms(700));
    }
}
