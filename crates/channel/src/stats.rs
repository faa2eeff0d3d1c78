//! The statistics of seed 000's Table I for an erasure trace, plus the bad-state median and 90th percentile quoted
//! in its text and the data of its Fig. 3 (CDF of bad-state durations).
//!
//! Conventions (the seed does not state them; these are documented so numbers can be compared): every maximal run
//! counts as one state visit, including the possibly truncated first and last runs; standard deviations are
//! population deviations (divide by n); percentiles use the nearest-rank definition on run lengths, which are
//! multiples of the sample period.

use crate::trace::ErasureTrace;

/// Duration statistics of one state's visits, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunStats {
    /// Number of visits (runs).
    pub count: usize,
    /// Mean visit duration.
    pub mean_ms: f64,
    /// Population standard deviation of the visit duration.
    pub std_ms: f64,
    /// Median (nearest rank).
    pub median_ms: f64,
    /// 90th percentile (nearest rank).
    pub p90_ms: f64,
}

/// Table I of seed 000 for one trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStats {
    /// Number of samples.
    pub samples: usize,
    /// Sample period in milliseconds.
    pub period_ms: f64,
    /// Covered time in seconds.
    pub duration_s: f64,
    /// Percentage of erased samples ("Bad state %").
    pub bad_percent: f64,
    /// Good-state (delivering) visits.
    pub good: RunStats,
    /// Bad-state (erasing) visits; `bad.count` is the number of fades.
    pub bad: RunStats,
}

/// Nearest-rank percentile of sorted data (`q` in (0, 1]); 0 for empty data.
fn percentile(sorted: &[usize], q: f64) -> usize {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len()) - 1)
        .copied()
        .unwrap_or(0)
}

fn run_stats(mut lengths: Vec<usize>, period_ms: f64) -> RunStats {
    if lengths.is_empty() {
        return RunStats::default();
    }
    lengths.sort_unstable();
    let n = lengths.len() as f64;
    let mean = lengths.iter().map(|&l| l as f64).sum::<f64>() / n;
    let var = lengths
        .iter()
        .map(|&l| (l as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    RunStats {
        count: lengths.len(),
        mean_ms: mean * period_ms,
        std_ms: var.sqrt() * period_ms,
        median_ms: percentile(&lengths, 0.5) as f64 * period_ms,
        p90_ms: percentile(&lengths, 0.9) as f64 * period_ms,
    }
}

/// Lengths (in samples) of the bad runs, in trace order.
pub fn bad_run_lengths(trace: &ErasureTrace) -> Vec<usize> {
    trace.runs().filter(|&(v, _)| v).map(|(_, n)| n).collect()
}

impl TraceStats {
    /// Computes the statistics of `trace`.
    pub fn of(trace: &ErasureTrace) -> TraceStats {
        let period_ms = trace.period().as_secs_f64() * 1e3;
        let (mut good, mut bad) = (Vec::new(), Vec::new());
        for (v, n) in trace.runs() {
            if v {
                bad.push(n);
            } else {
                good.push(n);
            }
        }
        TraceStats {
            samples: trace.len(),
            period_ms,
            duration_s: trace.len() as f64 * period_ms / 1e3,
            bad_percent: 100.0 * trace.erased_count() as f64 / trace.len().max(1) as f64,
            good: run_stats(good, period_ms),
            bad: run_stats(bad, period_ms),
        }
    }
}

/// Empirical CDF of bad-state durations: points `(duration_ms, P[D <= duration])` at every distinct duration, for
/// plotting Fig. 3 of seed 000.
pub fn bad_duration_cdf(trace: &ErasureTrace) -> Vec<(f64, f64)> {
    let mut lengths = bad_run_lengths(trace);
    lengths.sort_unstable();
    let period_ms = trace.period().as_secs_f64() * 1e3;
    let n = lengths.len() as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (i, &l) in lengths.iter().enumerate() {
        let x = l as f64 * period_ms;
        let y = (i + 1) as f64 / n;
        match out.last_mut() {
            Some(last) if (last.0 - x).abs() < f64::EPSILON => last.1 = y,
            _ => out.push((x, y)),
        }
    }
    out
}
