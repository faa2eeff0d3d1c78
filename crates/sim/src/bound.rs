//! The selective-repeat lower bound on a transfer's time, against which every CFDP run is measured
//! (docs/bench.md "The selective-repeat bound").
//!
//! A protocol that resends exactly the data units the channel erased, back to back, with no idle time, finishes
//! no sooner than the time the link takes to serialize every unit once plus every erased copy, plus the one-way
//! delay of the last one:
//!
//! ```text
//! bound = (first-pass wire bytes + erased wire bytes) × 8 / rate + one-way delay
//! ```
//!
//! "Wire bytes" are the bytes the units occupy on the link (PDU plus the headers the layers below add). The erased
//! bytes are the run's realised erasures, so the same formula holds for IID losses, traces, BER and availability
//! windows alike: whatever the channel destroyed had to be sent again. For an IID unit-loss probability `P` the
//! expected value of the serialization part is T_ser / (1 − P), which [`iid`] gives for comparison.
//!
//! [`windowed`] adds what the return direction imposes: every erased copy must be asked for again by a NAK that
//! can only leave once the copy was due and the return direction is up, and the transfer ends with a Finished
//! that also waits for the return direction. On a return direction that is always up this is one round trip
//! more for the last erased unit; on an intermittent one (seed 004's GEO hop) it is the wait for the next
//! window, which no protocol can avoid.

use std::time::Duration;

/// The bound from realised erasures, seconds: `(first_pass_bytes + erased_bytes) × 8 / rate_bps + one_way_s`.
/// NaN when the rate is not a positive finite number (an infinitely fast link has no serialization bound).
pub fn realised(first_pass_bytes: u64, erased_bytes: u64, rate_bps: f64, one_way_s: f64) -> f64 {
    if !(rate_bps.is_finite() && rate_bps > 0.0) {
        return f64::NAN;
    }
    (first_pass_bytes as f64 + erased_bytes as f64) * 8.0 / rate_bps + one_way_s
}

/// The expected bound under IID unit losses with probability `p_unit`, seconds: `serialization_s / (1 − p_unit)
/// + one_way_s`. NaN when `p_unit` is not in [0, 1).
pub fn iid(serialization_s: f64, p_unit: f64, one_way_s: f64) -> f64 {
    if !(0.0..1.0).contains(&p_unit) {
        return f64::NAN;
    }
    serialization_s / (1.0 - p_unit) + one_way_s
}

/// One data unit the channel erased at least once, for [`windowed`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErasedUnit {
    /// The earliest its first copy can be due at the receiver, seconds since the put: the first pass sent back to
    /// back in file order from the put, serialized up to and including this unit, plus the one-way delay.
    pub first_due_s: f64,
    /// Serialization time of one copy, seconds.
    pub serialization_s: f64,
    /// Copies of it the channel erased.
    pub erasures: u32,
}

/// Up windows of a link direction, seconds since the put: `[start, end)` intervals, ascending and disjoint (an
/// `end` of infinity: up for good). What [`windowed`] asks when a NAK or Finished can leave.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UpWindows {
    windows: Vec<(f64, f64)>,
    always: bool,
}

impl UpWindows {
    /// A direction that is always up.
    pub fn always() -> Self {
        Self {
            windows: Vec::new(),
            always: true,
        }
    }

    /// A direction up exactly during `windows` (`[start, end)`, ascending, disjoint; seconds).
    pub fn new(windows: Vec<(f64, f64)>) -> Self {
        Self {
            windows,
            always: false,
        }
    }

    /// The state changes of a direction (`(time, up)`, ascending) from its state at `origin` on, as seconds
    /// since `origin`; a window still open after the last change stays open for good.
    pub fn from_changes(
        up_at_origin: bool,
        changes: &[(Duration, bool)],
        origin: Duration,
    ) -> Self {
        let mut windows = Vec::new();
        let mut open = up_at_origin.then_some(0.0);
        for &(t, up) in changes {
            let t = t.saturating_sub(origin).as_secs_f64();
            match (open, up) {
                (None, true) => open = Some(t),
                (Some(s), false) => {
                    if t > s {
                        windows.push((s, t));
                    }
                    open = None;
                }
                _ => {}
            }
        }
        if let Some(s) = open {
            windows.push((s, f64::INFINITY));
        }
        Self::new(windows)
    }

    /// The first instant at or after `t` the direction is up (None: never again).
    pub fn next_up(&self, t: f64) -> Option<f64> {
        if self.always {
            return Some(t);
        }
        let i = self.windows.partition_point(|&(_, end)| end <= t);
        self.windows.get(i).map(|&(start, _)| start.max(t))
    }
}

/// The bound with the return direction's windows, seconds (NaN when the return direction never comes up when
/// needed): the larger of `realised_s` ([`realised`]) and, for each erased unit, the time its last copy can
/// arrive when each of its erased copies is asked for again by a NAK that leaves at the first instant the copy
/// was due and the return direction is up (`return_up`), crosses in `return_one_way_s`, and brings a copy that
/// is serialized and crosses in `one_way_s`; then the wait for the return direction to be up for the Finished
/// (its trip is left out, as in [`realised`]). Link contention is not counted in the per-unit chains (only in
/// `realised_s`), so this stays a lower bound for any protocol that sends the first pass in file order and
/// resends a unit only after a NAK that followed its erased copy.
pub fn windowed(
    realised_s: f64,
    units: &[ErasedUnit],
    one_way_s: f64,
    return_one_way_s: f64,
    return_up: &UpWindows,
) -> f64 {
    let mut end = realised_s;
    for u in units {
        let mut t = u.first_due_s;
        for _ in 0..u.erasures {
            let Some(nak) = return_up.next_up(t) else {
                return f64::NAN;
            };
            t = nak + return_one_way_s + u.serialization_s + one_way_s;
        }
        end = end.max(t);
    }
    return_up.next_up(end).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realised_bound_counts_every_erased_byte_once_more() {
        // 1000 units of 1500 wire bytes at 12 Mb/s: 1 ms each, 1 s in all; 10 ms one way.
        assert!((realised(1_500_000, 0, 12e6, 0.010) - 1.010).abs() < 1e-12);
        // 50 of them erased (once each): 50 ms more.
        assert!((realised(1_500_000, 75_000, 12e6, 0.010) - 1.060).abs() < 1e-12);
        assert!(realised(1, 0, 0.0, 0.0).is_nan());
        assert!(realised(1, 0, f64::INFINITY, 0.0).is_nan());
    }

    #[test]
    fn iid_bound_is_serialization_over_success_probability() {
        // Seed 004, Table IV: 24.6 s of serialization, 45 % of 730 kB blocks lost: 44.7 s.
        assert!((iid(24.6, 0.45, 0.0) - 24.6 / 0.55).abs() < 1e-12);
        assert!((iid(1.0, 0.0, 0.005) - 1.005).abs() < 1e-12);
        assert!(iid(1.0, 1.0, 0.0).is_nan());
        assert!(iid(1.0, -0.1, 0.0).is_nan());
    }

    #[test]
    fn windowed_bound_waits_for_the_return_direction() {
        // 10 units of 1 s, 0.25 s each way; unit 3 (due at 4.25 s) erased once.
        let u = ErasedUnit {
            first_due_s: 4.25,
            serialization_s: 1.0,
            erasures: 1,
        };
        let ser = realised(11 * 1500, 0, 1500.0 * 8.0, 0.25); // 11 s on the wire + 0.25
        assert!((ser - 11.25).abs() < 1e-12);
        // Always up: NAK at 4.25, copy back at 4.25 + 0.25 + 1 + 0.25 = 5.75 < 11.25.
        let always = UpWindows::always();
        assert!((windowed(ser, &[u], 0.25, 0.25, &always) - 11.25).abs() < 1e-12);
        // The return direction is up only from 20 to 20.1 s and from 30 s on: the NAK waits until 20 s, the
        // copy arrives at 21.5 s, and the Finished waits until 30 s.
        let w = UpWindows::new(vec![(20.0, 20.1), (30.0, f64::INFINITY)]);
        assert!((windowed(ser, &[u], 0.25, 0.25, &w) - 30.0).abs() < 1e-12);
        // Erased twice: the second NAK waits until 30 s, the copy arrives at 31.5 s.
        let twice = ErasedUnit { erasures: 2, ..u };
        assert!((windowed(ser, &[twice], 0.25, 0.25, &w) - 31.5).abs() < 1e-12);
        // Nothing erased: only the Finished's wait.
        assert!((windowed(ser, &[], 0.25, 0.25, &w) - 20.0).abs() < 1e-12);
        // Never up again when needed.
        let gone = UpWindows::new(vec![(1.0, 2.0)]);
        assert!(windowed(ser, &[u], 0.25, 0.25, &gone).is_nan());
    }

    #[test]
    fn up_windows_from_state_changes() {
        let s = |v: f64| Duration::from_secs_f64(v);
        let w = UpWindows::from_changes(
            false,
            &[(s(5.0), true), (s(6.0), false), (s(12.0), true)],
            s(2.0),
        );
        assert_eq!(w, UpWindows::new(vec![(3.0, 4.0), (10.0, f64::INFINITY)]));
        assert_eq!(w.next_up(0.0), Some(3.0));
        assert_eq!(w.next_up(3.5), Some(3.5));
        assert_eq!(w.next_up(4.0), Some(10.0));
        assert_eq!(w.next_up(99.0), Some(99.0));
        let down = UpWindows::from_changes(true, &[(s(1.0), false)], s(0.0));
        assert_eq!(down.next_up(0.5), Some(0.5));
        assert_eq!(down.next_up(1.0), None);
    }
}
