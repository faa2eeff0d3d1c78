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
}
