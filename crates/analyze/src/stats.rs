//! Mean and 95 % Student-t confidence interval of repeated measurements (seed 002's reporting convention).

use serde::Serialize;

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The t quantile for a 95 % two-sided interval with `df` degrees of freedom (table up to 30, then the usual
/// 40/60/120/∞ anchors, linear in 1/df between them).
pub fn t_quantile_95(df: u64) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T975[(df - 1) as usize],
        _ => {
            let anchors = [
                (30.0, 2.042),
                (40.0, 2.021),
                (60.0, 2.000),
                (120.0, 1.980),
                (f64::INFINITY, 1.960),
            ];
            let x = 1.0 / df as f64;
            for w in anchors.windows(2) {
                let (d0, t0) = w[0];
                let (d1, t1) = w[1];
                if (df as f64) <= d1 {
                    let (x0, x1) = (1.0 / d0, if d1.is_finite() { 1.0 / d1 } else { 0.0 });
                    return t0 + (t1 - t0) * (x0 - x) / (x0 - x1);
                }
            }
            1.960
        }
    }
}

/// Mean of repetitions with its 95 % confidence half-width.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct MeanCi {
    /// Repetitions.
    pub n: u64,
    /// Sample mean.
    pub mean: f64,
    /// Half-width of the 95 % Student-t interval (0 with one sample: no interval can be given).
    pub ci95: f64,
}

/// Mean and 95 % CI of the finite values in `xs` (non-finite values, e.g. a metric undefined in one run, are
/// left out and do not count towards `n`).
pub fn mean_ci95(xs: &[f64]) -> MeanCi {
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len() as u64;
    if n == 0 {
        return MeanCi {
            n: 0,
            mean: f64::NAN,
            ci95: f64::NAN,
        };
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return MeanCi { n, mean, ci95: 0.0 };
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    MeanCi {
        n,
        mean,
        ci95: t_quantile_95(n - 1) * (var / n as f64).sqrt(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_of_known_samples() {
        // 2, 4, 6: mean 4, s = 2, t(2) = 4.303, half-width = 4.303 * 2 / sqrt(3).
        let m = mean_ci95(&[2.0, 4.0, 6.0]);
        assert_eq!(m.n, 3);
        assert!((m.mean - 4.0).abs() < 1e-12);
        assert!((m.ci95 - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(mean_ci95(&[5.0]).ci95, 0.0);
        assert_eq!(mean_ci95(&[f64::NAN, 1.0]).n, 1);
        assert!((t_quantile_95(40) - 2.021).abs() < 1e-9);
        assert!((t_quantile_95(1_000_000) - 1.960).abs() < 1e-3);
    }
}
