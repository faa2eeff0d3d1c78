//! Statistical checks of the loss and availability processes with fixed seeds. Tolerances are five standard
//! deviations of the estimator (binomial, or inflated by the Markov chain's autocorrelation), not guesses.

use std::time::Duration;

use channel::availability::{AvailabilityProcess, MarkovAvailability};
use channel::loss::{ber_packet_loss, LossProcess};
use channel::{Availability, GilbertElliott, LossModel};

/// Five standard deviations of a proportion estimated from `n` samples of a two-state chain whose second eigenvalue
/// is `lambda` (0 for independent samples).
fn tolerance(pi: f64, n: usize, lambda: f64) -> f64 {
    5.0 * (pi * (1.0 - pi) * (1.0 + lambda) / (1.0 - lambda) / n as f64).sqrt()
}

fn loss_fraction(model: LossModel, seed: u64, n: usize, len: usize, spacing: Duration) -> f64 {
    let mut p = LossProcess::new(model, seed, 0);
    let lost = (0..n)
        .filter(|&i| p.is_lost(spacing * i as u32, len))
        .count();
    lost as f64 / n as f64
}

#[test]
fn iid_rate_matches_per() {
    for (per, seed) in [(0.01, 1), (0.137, 2), (0.5, 3)] {
        let n = 200_000;
        let measured = loss_fraction(
            LossModel::Iid { per },
            seed,
            n,
            1024,
            Duration::from_micros(10),
        );
        let tol = tolerance(per, n, 0.0);
        assert!(
            (measured - per).abs() < tol,
            "per {per}: measured {measured}, tolerance {tol}"
        );
    }
}

#[test]
fn iid_extremes_are_exact() {
    assert_eq!(
        loss_fraction(LossModel::Iid { per: 0.0 }, 9, 10_000, 100, Duration::ZERO),
        0.0
    );
    assert_eq!(
        loss_fraction(LossModel::Iid { per: 1.0 }, 9, 10_000, 100, Duration::ZERO),
        1.0
    );
}

#[test]
fn ber_to_packet_loss_conversion() {
    // Closed form against a direct product for moderate values.
    for (ber, len) in [
        (1e-5_f64, 1024usize),
        (1e-6, 1500),
        (1e-7, 65_000),
        (1e-3, 10),
    ] {
        let direct = 1.0 - (1.0 - ber).powi(8 * len as i32);
        let p = ber_packet_loss(ber, len);
        assert!(
            (p - direct).abs() < 1e-9,
            "ber {ber} len {len}: {p} vs {direct}"
        );
    }
    // Tiny BERs do not vanish: 1e-12 on 1 kB is ~8.2e-9.
    let tiny = ber_packet_loss(1e-12, 1024);
    assert!((tiny / 8.192e-9 - 1.0).abs() < 1e-3, "{tiny}");
    // Measured loss over many packets, two lengths: longer packets lose more.
    let ber = 1e-5;
    for len in [256usize, 1024] {
        let n = 200_000;
        let expected = ber_packet_loss(ber, len);
        let measured = loss_fraction(
            LossModel::Ber { ber },
            11,
            n,
            len,
            Duration::from_micros(10),
        );
        let tol = tolerance(expected, n, 0.0);
        assert!(
            (measured - expected).abs() < tol,
            "len {len}: measured {measured} expected {expected} ± {tol}"
        );
    }
}

#[test]
fn gilbert_elliott_per_packet_stationary_loss() {
    let ge = GilbertElliott {
        p: 0.01,
        r: 0.1,
        loss_good: 0.001,
        loss_bad: 0.8,
        step: None,
    };
    let pi = ge.stationary_loss();
    let n = 1_000_000;
    let measured = loss_fraction(
        LossModel::GilbertElliott(ge.clone()),
        5,
        n,
        1000,
        Duration::from_micros(1),
    );
    // Losses inherit the chain's correlation, 1 - p - r.
    let tol = tolerance(pi, n, 1.0 - ge.p - ge.r);
    assert!(
        (measured - pi).abs() < tol,
        "measured {measured}, stationary {pi} ± {tol}"
    );
}

#[test]
fn gilbert_elliott_bursts_have_geometric_mean_length() {
    // Pure bad-state loss: a loss burst is a bad sojourn, mean length 1/r packets.
    let ge = GilbertElliott {
        p: 0.02,
        r: 0.25,
        loss_good: 0.0,
        loss_bad: 1.0,
        step: None,
    };
    let mut proc = LossProcess::new(LossModel::GilbertElliott(ge), 6, 0);
    let (mut bursts, mut lost, mut prev) = (0usize, 0usize, false);
    for i in 0..500_000u32 {
        let l = proc.is_lost(Duration::from_micros(u64::from(i)), 100);
        if l && !prev {
            bursts += 1;
        }
        lost += usize::from(l);
        prev = l;
    }
    let mean = lost as f64 / bursts as f64;
    // Geometric with r = 0.25: mean 4, std sqrt(1-r)/r = 3.46; ~3700 bursts.
    let tol = 5.0 * (0.75f64).sqrt() / 0.25 / (bursts as f64).sqrt();
    assert!(
        (mean - 4.0).abs() < tol,
        "mean burst {mean} over {bursts} bursts, tol {tol}"
    );
}

#[test]
fn gilbert_elliott_time_stepped_follows_time_not_packets() {
    let step = Duration::from_millis(1);
    let ge = GilbertElliott {
        p: 0.05,
        r: 0.2,
        loss_good: 0.0,
        loss_bad: 1.0,
        step: Some(step),
    };
    let pi = ge.stationary_loss();
    // One packet per step: the measured fraction is the fraction of bad steps.
    let n = 400_000;
    let measured = loss_fraction(LossModel::GilbertElliott(ge.clone()), 8, n, 1000, step);
    let tol = tolerance(pi, n, 1.0 - ge.p - ge.r);
    assert!(
        (measured - pi).abs() < tol,
        "measured {measured}, stationary {pi} ± {tol}"
    );
    // Ten packets inside one step share its state.
    let mut proc = LossProcess::new(LossModel::GilbertElliott(ge), 8, 0);
    for s in 0..1000u32 {
        let base = step * s;
        let first = proc.is_lost(base, 100);
        for k in 1..10u32 {
            assert_eq!(
                proc.is_lost(base + Duration::from_micros(u64::from(k) * 90), 100),
                first
            );
        }
    }
}

fn availability_fraction(m: MarkovAvailability, seed: u64, steps: usize) -> (f64, f64) {
    let step = m.step;
    let mut proc = AvailabilityProcess::new(Availability::Markov(m), seed, 1);
    let (mut up, mut up_runs, mut prev) = (0usize, 0usize, false);
    for i in 0..steps {
        let s = proc.is_up(step * i as u32 + step / 2);
        up += usize::from(s);
        up_runs += usize::from(s && !prev);
        prev = s;
    }
    (up as f64 / steps as f64, up as f64 / up_runs.max(1) as f64)
}

#[test]
fn markov_availability_seed004_fraction_is_p() {
    // Seed 004: p from 1e-1 to 1e-3, q = 1 - p, so the link is up a fraction p of the steps.
    for (p, seed) in [(0.1, 21), (0.01, 22), (0.001, 23)] {
        let m = MarkovAvailability::seed004(p, Duration::from_millis(10), false);
        let n = 2_000_000;
        let (frac, _) = availability_fraction(m.clone(), seed, n);
        let tol = tolerance(p, n, 1.0 - m.p - m.q);
        assert!((frac - p).abs() < tol, "p {p}: up fraction {frac} ± {tol}");
    }
}

#[test]
fn markov_availability_bursty_chain() {
    let m = MarkovAvailability {
        p: 0.01,
        q: 0.04,
        step: Duration::from_millis(1),
        initial_up: true,
    };
    let pi = m.stationary_availability();
    assert!((pi - 0.2).abs() < 1e-12);
    let n = 2_000_000;
    let (frac, mean_up) = availability_fraction(m.clone(), 31, n);
    let tol = tolerance(pi, n, 1.0 - m.p - m.q);
    assert!(
        (frac - pi).abs() < tol,
        "up fraction {frac}, expected {pi} ± {tol}"
    );
    // Up sojourns are geometric with mean 1/q = 25 steps (std ~24.5); ~8000 sojourns.
    let runs = (frac * n as f64 / mean_up).max(1.0);
    let tol = 5.0 * (0.96f64).sqrt() / 0.04 / runs.sqrt();
    assert!(
        (mean_up - 25.0).abs() < tol,
        "mean up sojourn {mean_up} steps ± {tol}"
    );
}

#[test]
fn markov_state_does_not_depend_on_query_pattern() {
    let m = MarkovAvailability {
        p: 0.02,
        q: 0.05,
        step: Duration::from_millis(1),
        initial_up: true,
    };
    let mut dense = AvailabilityProcess::new(Availability::Markov(m.clone()), 4, 0);
    let mut sparse = AvailabilityProcess::new(Availability::Markov(m), 4, 0);
    let dense_states: Vec<bool> = (0..100_000u32)
        .map(|i| dense.is_up(Duration::from_micros(u64::from(i) * 100)))
        .collect();
    for i in (0..100_000usize).step_by(997) {
        let t = Duration::from_micros(i as u64 * 100);
        assert_eq!(sparse.is_up(t), dense_states[i], "sample {i}");
    }
}
