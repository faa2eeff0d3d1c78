//! Synthetic erasure traces from a two-state semi-Markov model.
//!
//! The channel alternates good (delivering) and bad (erasing) sojourns whose durations are drawn independently from
//! a distribution with a given mean and standard deviation, then quantized to the sample period. The default family
//! is the **lognormal**: with the moments of seed 000's Table I it reproduces the bad-state medians and 90th
//! percentiles quoted in the seed's text (0.8/1.2/4.1 ms and 1.8/4.4/11.6 ms) better than the gamma family, whose
//! shape < 1 for trace F puts the median at 0.90 ms and the 90th percentile at 5.9 ms (lognormal: 1.20 and 4.76 ms).
//!
//! With [`GenParams::match_moments`] (the default), the sojourns of each state are *moment-matched*: standard
//! normal draws `z_i` are mapped to `max(1, round(c * exp(sigma * z_i)))` samples with `sigma` and `c` solved
//! numerically so that the quantized sample mean and standard deviation equal the targets. A 100 s trace holds only
//! ~5000 fades, and for heavy-tailed targets (trace F: coefficient of variation 1.47) the sample standard deviation of
//! unconditioned draws wanders by ~9 % from seed to seed; matching makes every seed reproduce Table I while keeping
//! the shape and the random order. Without matching, the draws are plain i.i.d. samples of the family.
//!
//! The number of good/bad cycles is `round(duration / (good_mean + bad_mean))`, and the last good sojourn is
//! stretched or cut so the trace has exactly `duration / period` samples.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Gamma, StandardNormal};

use crate::trace::{ErasureTrace, TraceError, DEFAULT_MAX_SAMPLES, DEFAULT_PERIOD};

/// Mean and standard deviation of one state's sojourn duration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StateShape {
    /// Mean duration in milliseconds (> 0).
    pub mean_ms: f64,
    /// Standard deviation in milliseconds (>= 0).
    pub std_ms: f64,
}

/// Distribution family of the sojourn durations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Family {
    /// Lognormal (default; see the module documentation for why).
    #[default]
    LogNormal,
    /// Gamma. Moment matching adjusts only the mean (the shape comes from the target coefficient of variation).
    Gamma,
}

/// Everything the generator needs.
#[derive(Clone, Debug, PartialEq)]
pub struct GenParams {
    /// Good-state sojourns.
    pub good: StateShape,
    /// Bad-state sojourns (fades).
    pub bad: StateShape,
    /// Length of the trace.
    pub duration: Duration,
    /// Sample period.
    pub period: Duration,
    /// RNG seed: the same parameters and seed give the same trace.
    pub seed: u64,
    /// Distribution family.
    pub family: Family,
    /// Condition the draws so the quantized sample moments equal the targets (see the module documentation).
    pub match_moments: bool,
}

/// One row of seed 000's Table I.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableRow {
    /// Trace name.
    pub name: &'static str,
    /// Bad state %.
    pub bad_percent: f64,
    /// Bad state mean (ms).
    pub bad_mean_ms: f64,
    /// Good state mean (ms).
    pub good_mean_ms: f64,
    /// Bad state std. dev. (ms).
    pub bad_std_ms: f64,
    /// Good state std. dev. (ms).
    pub good_std_ms: f64,
    /// Bad-state median quoted in the seed's text (ms).
    pub bad_median_ms: f64,
    /// Bad-state 90th percentile quoted in the seed's text (ms).
    pub bad_p90_ms: f64,
}

/// The three erasure traces of seed 000.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Trace A (mildest).
    A,
    /// Trace F.
    F,
    /// Trace H (most severe).
    H,
}

impl Preset {
    /// Table I of seed 000 (the text says 4.9 % for A where the table says 4.98 %; the table is used, and it is
    /// also what the means imply: 0.95 / (0.95 + 18.17) = 4.97 %).
    pub fn table_i(self) -> TableRow {
        match self {
            Preset::A => TableRow {
                name: "A",
                bad_percent: 4.98,
                bad_mean_ms: 0.95,
                good_mean_ms: 18.17,
                bad_std_ms: 0.66,
                good_std_ms: 17.37,
                bad_median_ms: 0.8,
                bad_p90_ms: 1.8,
            },
            Preset::F => TableRow {
                name: "F",
                bad_percent: 13.7,
                bad_mean_ms: 2.14,
                good_mean_ms: 13.46,
                bad_std_ms: 3.15,
                good_std_ms: 18.19,
                bad_median_ms: 1.2,
                bad_p90_ms: 4.4,
            },
            Preset::H => TableRow {
                name: "H",
                bad_percent: 28.8,
                bad_mean_ms: 5.46,
                good_mean_ms: 13.48,
                bad_std_ms: 5.02,
                good_std_ms: 12.84,
                bad_median_ms: 4.1,
                bad_p90_ms: 11.6,
            },
        }
    }

    /// Generator parameters reproducing this preset: 100 s at 0.1 ms (1 000 000 samples), lognormal, matched.
    pub fn params(self, seed: u64) -> GenParams {
        let t = self.table_i();
        GenParams {
            good: StateShape {
                mean_ms: t.good_mean_ms,
                std_ms: t.good_std_ms,
            },
            bad: StateShape {
                mean_ms: t.bad_mean_ms,
                std_ms: t.bad_std_ms,
            },
            duration: Duration::from_secs(100),
            period: DEFAULT_PERIOD,
            seed,
            family: Family::LogNormal,
            match_moments: true,
        }
    }

    /// Parses `A`, `F` or `H` (case-insensitive).
    pub fn from_name(name: &str) -> Option<Preset> {
        match name.to_ascii_uppercase().as_str() {
            "A" => Some(Preset::A),
            "F" => Some(Preset::F),
            "H" => Some(Preset::H),
            _ => None,
        }
    }
}

/// Invalid generator parameters.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GenError {
    /// A parameter is out of range; the message names it.
    #[error("{0}")]
    Invalid(String),
    /// The trace could not be built.
    #[error(transparent)]
    Trace(#[from] TraceError),
}

fn check_shape(name: &str, s: StateShape, period_ms: f64) -> Result<(), GenError> {
    if !(s.mean_ms.is_finite() && s.mean_ms >= period_ms) {
        return Err(GenError::Invalid(format!(
            "{name} mean = {} ms: expected a finite duration of at least one sample period ({period_ms} ms)",
            s.mean_ms
        )));
    }
    if !(s.std_ms.is_finite() && s.std_ms >= 0.0) {
        return Err(GenError::Invalid(format!(
            "{name} std = {} ms: expected a finite value >= 0",
            s.std_ms
        )));
    }
    Ok(())
}

/// `v.round()` (half away from zero) without the library call `f64::round` is on baseline x86-64: the
/// trace generator rounds every sojourn a few thousand times while it matches the moments, and the call was
/// most of its time. Exact: below 2^52 the fraction `v - trunc(v)` is representable; above, `v` is integral.
fn round_half_away(v: f64) -> f64 {
    if v.abs() < 4_503_599_627_370_496.0 {
        let t = (v as i64) as f64;
        let frac = v - t;
        if frac >= 0.5 {
            t + 1.0
        } else if frac <= -0.5 {
            t - 1.0
        } else {
            t.copysign(v) // -0.3 rounds to -0.0
        }
    } else {
        v
    }
}

/// One quantized duration: `max(1, round(c * x))` capped at `cap` samples.
fn quantum(c: f64, x: f64, cap: f64) -> usize {
    round_half_away(c * x).clamp(1.0, cap) as usize
}

/// Quantized durations `max(1, round(c * w_i))`, capped at `cap` samples.
fn quantize(c: f64, w: &[f64], cap: f64, out: &mut Vec<usize>) {
    out.clear();
    out.extend(w.iter().map(|&x| quantum(c, x, cap)));
}

/// The mean of `quantize(c, w, cap)`'s output as `mean_std` computes it, without the buffer: the same value
/// to the bit. The moment matching calls it a few thousand times per sojourn list (10 % of seed 000's 30 s
/// simulation went here), so the common case takes a branch-free path ([`quantized_sum_exact`]); anything
/// it cannot prove exact takes the plain sum in `mean_std`'s order.
fn quantized_mean(c: f64, w: &[f64], cap: f64) -> f64 {
    let n = w.len().max(1) as f64;
    quantized_sum_exact(c, w, cap)
        .unwrap_or_else(|| w.iter().map(|&x| quantum(c, x, cap) as f64).sum::<f64>())
        / n
}

/// 2^52: from here up every f64 is an integer, and `v + 2^52 - 2^52` rounds a smaller `v >= 0` to an integer
/// exactly.
const TWO_52: f64 = 4_503_599_627_370_496.0;

/// `sum(quantum(c, x, cap) as f64)` over `w`, when it can be computed out of order and still be exact: every
/// quantum is an integer in `1..=cap`, so with `len × cap < 2^53` every partial sum is an exact integer in any
/// order, and four lanes can add side by side. Each quantum without branches (a data-dependent `frac >= 0.5`
/// branch mispredicts half the time): for `0 <= v < cap < 2^52`, `t = (v + 2^52) - 2^52` is `v` rounded to an
/// integer, `floor(v)` is `t` or `t - 1`, `v - floor(v)` is exact, and half away from zero adds one from 0.5 up;
/// `v >= cap` gives `cap`, as the clamp does (for a whole `cap`, which the generator's sample count is).
/// `None` (use the plain sum) when `c`, `cap` or an element is outside that domain (negative, NaN, infinite,
/// a fractional cap) or the list is empty.
fn quantized_sum_exact(c: f64, w: &[f64], cap: f64) -> Option<f64> {
    // (An empty list sums to -0.0 in the plain sum: left to it.)
    if w.is_empty()
        || !(c.is_finite() && c >= 0.0 && (1.0..TWO_52).contains(&cap) && cap.fract() == 0.0)
        || (w.len() as f64) * cap >= 2.0 * TWO_52
    {
        return None;
    }
    let q = |x: f64| -> (f64, bool) {
        let v = c * x;
        let t = (v + TWO_52) - TWO_52;
        let fl = if t > v { t - 1.0 } else { t };
        let r = if v - fl >= 0.5 { fl + 1.0 } else { fl };
        let r = if r < 1.0 { 1.0 } else { r };
        // `v >= 0` is false for NaN, so a NaN element is reported, not summed.
        (if v >= cap { cap } else { r }, v >= 0.0)
    };
    let mut acc = [0.0f64; 4];
    let mut ok = [true; 4];
    let mut chunks = w.chunks_exact(4);
    for ch in &mut chunks {
        for i in 0..4 {
            let (v, good) = q(ch[i]);
            acc[i] += v;
            ok[i] &= good;
        }
    }
    let mut tail = 0.0;
    for &x in chunks.remainder() {
        let (v, good) = q(x);
        tail += v;
        ok[0] &= good;
    }
    ok.iter()
        .all(|&g| g)
        .then(|| (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail)
}

fn mean_std(d: &[usize]) -> (f64, f64) {
    let n = d.len().max(1) as f64;
    let mean = d.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = d.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The scale `c` for which the quantized mean of `c * w` is closest to `mean` (bisection; the mean is monotone).
fn match_mean(w: &[f64], mean: f64, cap: f64) -> f64 {
    let avg_w = w.iter().sum::<f64>() / w.len().max(1) as f64;
    let mut hi = (mean / avg_w.max(f64::MIN_POSITIVE)) * 2.0 + 1.0;
    for _ in 0..64 {
        if quantized_mean(hi, w, cap) >= mean {
            break;
        }
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        // Once no double lies between the ends the remaining steps cannot move `hi` (the result): stop there,
        // with the same `hi` the full 60 steps give.
        if mid >= hi {
            break;
        }
        if quantized_mean(mid, w, cap) < mean {
            if mid <= lo {
                break; // lo = mid changes nothing, and every later step would repeat this one
            }
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// `n` sojourn durations in samples with target mean/std in samples.
fn sojourns(
    n: usize,
    mean: f64,
    std: f64,
    cap: f64,
    family: Family,
    matched: bool,
    rng: &mut ChaCha8Rng,
) -> Vec<usize> {
    let cv = std / mean;
    let mut buf = Vec::with_capacity(n);
    match family {
        Family::LogNormal => {
            let z: Vec<f64> = (0..n)
                .map(|_| rng.sample::<f64, _>(StandardNormal))
                .collect();
            let make_w =
                |sigma: f64| -> Vec<f64> { z.iter().map(|&z| (sigma * z).exp()).collect() };
            if !matched {
                let sigma = (1.0 + cv * cv).ln().sqrt();
                let mu = mean.ln() - sigma * sigma / 2.0;
                quantize(mu.exp(), &make_w(sigma), cap, &mut buf);
                return buf;
            }
            // Bisection on sigma: with the mean matched, the quantized CV grows with sigma.
            let (mut lo, mut hi) = (0.0_f64, 4.0_f64);
            for _ in 0..40 {
                let mid = 0.5 * (lo + hi);
                let w = make_w(mid);
                let c = match_mean(&w, mean, cap);
                quantize(c, &w, cap, &mut buf);
                let (m, s) = mean_std(&buf);
                if s / m < cv {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let sigma = 0.5 * (lo + hi);
            let w = make_w(sigma);
            let c = match_mean(&w, mean, cap);
            quantize(c, &w, cap, &mut buf);
            buf
        }
        Family::Gamma => {
            let shape = if cv > 0.0 { 1.0 / (cv * cv) } else { 1e6 };
            let w: Vec<f64> = match Gamma::new(shape, 1.0 / shape) {
                Ok(g) => (0..n).map(|_| g.sample(rng)).collect(),
                Err(_) => vec![1.0; n],
            };
            let c = if matched {
                match_mean(&w, mean, cap)
            } else {
                mean
            };
            quantize(c, &w, cap, &mut buf);
            buf
        }
    }
}

/// Generates a trace (see the module documentation).
pub fn generate(p: &GenParams) -> Result<ErasureTrace, GenError> {
    if p.period.is_zero() {
        return Err(GenError::Invalid(
            "period = 0: expected a positive sample period".into(),
        ));
    }
    let period_ms = p.period.as_secs_f64() * 1e3;
    check_shape("good", p.good, period_ms)?;
    check_shape("bad", p.bad, period_ms)?;
    let samples = p.duration.as_nanos() / p.period.as_nanos();
    let samples = usize::try_from(samples)
        .ok()
        .filter(|s| (1..=DEFAULT_MAX_SAMPLES).contains(s))
        .ok_or_else(|| {
            GenError::Invalid(format!(
            "duration = {:?}: expected between one sample period and {DEFAULT_MAX_SAMPLES} samples",
            p.duration
        ))
        })?;
    let (gm, gs) = (p.good.mean_ms / period_ms, p.good.std_ms / period_ms);
    let (bm, bs) = (p.bad.mean_ms / period_ms, p.bad.std_ms / period_ms);
    let cycles = ((samples as f64 / (gm + bm)).round() as usize).max(1);
    let cap = samples as f64;
    let mut good_rng = ChaCha8Rng::seed_from_u64(p.seed);
    good_rng.set_stream(1);
    let mut bad_rng = ChaCha8Rng::seed_from_u64(p.seed);
    bad_rng.set_stream(2);
    // Draw good/bad cycles until the trace is full. With matched moments the first batch fills it to within the
    // rounding of `cycles`; with plain draws the batch sum varies (by ~14 000 samples for trace F), so keep
    // drawing rather than padding the shortfall with one long good run, which would be a sojourn the model never drew.
    let mut remaining = samples;
    let mut runs: Vec<(bool, usize)> = Vec::with_capacity(2 * cycles + 1);
    let mut batch = cycles;
    while remaining > 0 {
        let good = sojourns(batch, gm, gs, cap, p.family, p.match_moments, &mut good_rng);
        let bad = sojourns(batch, bm, bs, cap, p.family, p.match_moments, &mut bad_rng);
        for (&g, &b) in good.iter().zip(bad.iter()) {
            for (v, n) in [(false, g), (true, b)] {
                if remaining > 0 {
                    let n = n.min(remaining);
                    remaining -= n;
                    runs.push((v, n));
                }
            }
        }
        if p.match_moments {
            break;
        }
        batch = ((remaining as f64 / (gm + bm)).ceil() as usize).max(1);
    }
    if remaining > 0 {
        // Matched moments only: the rounding remainder of `cycles`, shorter than one mean cycle.
        runs.push((false, remaining));
    }
    Ok(ErasureTrace::from_runs(p.period, runs, samples)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop_assert, prop_assert_eq, prop_oneof, proptest, Just, Strategy};

    #[test]
    fn round_half_away_matches_f64_round() {
        let edge = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            0.499_999_999_999_999_94,
            -0.499_999_999_999_999_94,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9.0e18,
            1.0e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for v in edge {
            assert_eq!(round_half_away(v).to_bits(), v.round().to_bits(), "{v}");
        }
        assert!(round_half_away(f64::NAN).is_nan());
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..100_000 {
            let v: f64 = rng.sample::<f64, _>(StandardNormal) * 1e4;
            assert_eq!(round_half_away(v).to_bits(), v.round().to_bits(), "{v}");
            let h = (v * 2.0).round() / 2.0; // exact halves
            assert_eq!(round_half_away(h).to_bits(), h.round().to_bits(), "{h}");
        }
    }

    /// `quantized_mean` and `match_mean` as they were before the branch-free sum and the early stop: the
    /// sequential sum of the quanta, 60 bisection steps.
    fn quantized_mean_reference(c: f64, w: &[f64], cap: f64) -> f64 {
        let n = w.len().max(1) as f64;
        w.iter().map(|&x| quantum(c, x, cap) as f64).sum::<f64>() / n
    }

    fn match_mean_reference(w: &[f64], mean: f64, cap: f64) -> f64 {
        let avg_w = w.iter().sum::<f64>() / w.len().max(1) as f64;
        let mut hi = (mean / avg_w.max(f64::MIN_POSITIVE)) * 2.0 + 1.0;
        for _ in 0..64 {
            if quantized_mean_reference(hi, w, cap) >= mean {
                break;
            }
            hi *= 2.0;
        }
        let mut lo = 0.0;
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if quantized_mean_reference(mid, w, cap) < mean {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// Weights as the generator draws them (log-normal, gamma-like), with exact halves, zeros, values that
    /// land at and beyond the cap, and the odd NaN or negative element (the plain sum must take over).
    fn weights() -> impl Strategy<Value = Vec<f64>> {
        let one = prop_oneof![
            6 => (-4.0f64..4.0).prop_map(f64::exp),
            2 => (0u32..2000).prop_map(|k| f64::from(k) + 0.5),
            1 => Just(0.0),
            1 => 1e3f64..1e15,
            1 => Just(f64::NAN),
            1 => -5.0f64..0.0,
        ];
        proptest::collection::vec(one, 0..300)
    }

    proptest! {
        #[test]
        fn the_branch_free_quantized_mean_is_bit_identical(
            w in weights(),
            c in prop_oneof![0.0f64..10.0, Just(1.0), Just(0.5), 1e-3f64..1e6, Just(f64::INFINITY)],
            cap in prop_oneof![Just(1e6), 1.0f64..5000.0, Just(3.0)],
        ) {
            let got = quantized_mean(c, &w, cap);
            let want = quantized_mean_reference(c, &w, cap);
            prop_assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{got} vs {want}");
        }

        #[test]
        fn match_mean_stops_early_with_the_same_scale(
            z in proptest::collection::vec(-3.0f64..3.0, 1..400),
            sigma in 0.0f64..3.0,
            mean in 0.2f64..500.0,
            cap in prop_oneof![Just(1e6), 20.0f64..5000.0],
        ) {
            let w: Vec<f64> = z.iter().map(|z| (sigma * z).exp()).collect();
            prop_assert_eq!(match_mean(&w, mean, cap).to_bits(), match_mean_reference(&w, mean, cap).to_bits());
        }
    }

    #[test]
    fn quantized_mean_is_the_mean_of_quantize() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let w: Vec<f64> = (0..5000)
            .map(|_| rng.sample::<f64, _>(StandardNormal).exp())
            .collect();
        let mut buf = Vec::new();
        for c in [0.01, 0.7, 3.0, 1234.5] {
            quantize(c, &w, 1e6, &mut buf);
            assert_eq!(
                quantized_mean(c, &w, 1e6).to_bits(),
                mean_std(&buf).0.to_bits()
            );
        }
    }
}
