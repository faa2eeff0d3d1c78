//! The `fec` table of a configuration file — `[span.fec]` in a node's file, `[node.fec]` in a
//! simulator scenario — parsed the same way for both, so a scenario and the real nodes it is
//! emulated with run the same settings.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, FecConfig, Mode};

/// `fec = { mode = "hsltp", ... }`: every key but `mode` is optional (defaults of
/// [`FecConfig::new`]).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FecSection {
    /// `"eclsa"` (segment-oriented) or `"hsltp"` (block-oriented).
    pub mode: String,
    /// Information symbols of a full matrix (K).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_k: Option<u16>,
    /// Code rate K/N as `"8/9"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_rate: Option<String>,
    /// Fewest repair symbols of any matrix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_repair: Option<u16>,
    /// Redundancy feedback: extra repair symbols per 100 information symbols added per failure
    /// signal (0 or absent = off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_step_pct: Option<u16>,
    /// Redundancy feedback: the largest extra redundancy (default: the step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_max_pct: Option<u16>,
    /// Redundancy feedback: data matrices per step of decay (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_decay: Option<u16>,
    /// Aggregation timer in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregation_ms: Option<f64>,
    /// HSLTP signal-only matrix timer in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_ms: Option<f64>,
    /// Receiver give-up time in ms (minimum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix_timeout_ms: Option<f64>,
    /// Receiver wait for reordered symbols once a later matrix arrived, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_wait_ms: Option<f64>,
    /// Receiver buffer for undecided matrices in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rx_bytes: Option<usize>,
}

fn bad(field: &'static str, value: impl ToString, expected: &str) -> ConfigError {
    ConfigError {
        field,
        value: value.to_string(),
        expected: expected.to_string(),
    }
}

fn ms(field: &'static str, v: Option<f64>, default: Duration) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(default),
        Some(x) if x.is_finite() && (0.0..=86_400_000.0).contains(&x) => {
            Ok(Duration::from_secs_f64(x / 1e3))
        }
        Some(x) => Err(bad(field, x, "milliseconds from 0 to 86400000")),
    }
}

impl FecSection {
    /// The FEC settings of the span to `remote` paced at `rate_bps`. Errors name the key
    /// (`mode`, `code_rate`, ...); [`FecConfig::validate`] checks the rest against the row size.
    pub fn to_config(&self, remote: u64, rate_bps: u64) -> Result<FecConfig, ConfigError> {
        let mode = Mode::from_name(&self.mode)
            .ok_or_else(|| bad("mode", format!("{:?}", self.mode), "\"eclsa\" or \"hsltp\""))?;
        let mut c = FecConfig::new(remote, mode);
        c.rate_bps = rate_bps;
        if let Some(k) = self.max_k {
            c.max_k = k;
        }
        if let Some(r) = &self.code_rate {
            let parsed = r.split_once('/').and_then(|(a, b)| {
                Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?))
            });
            match parsed {
                Some((k, n)) if k > 0 && n > k => (c.rate_k, c.rate_n) = (k, n),
                _ => {
                    return Err(bad(
                        "code_rate",
                        format!("{r:?}"),
                        "\"K/N\" with 0 < K < N, e.g. \"8/9\"",
                    ))
                }
            }
        }
        if let Some(m) = self.min_repair {
            c.min_repair = m;
        }
        if let Some(step) = self.feedback_step_pct {
            c.feedback_step_pct = step;
            c.feedback_max_pct = self.feedback_max_pct.unwrap_or(step);
            c.feedback_decay = self.feedback_decay.unwrap_or(1);
        } else if self.feedback_max_pct.is_some() || self.feedback_decay.is_some() {
            return Err(bad(
                "feedback_step_pct",
                "(absent)",
                "a step (extra repair symbols per 100 information symbols) when feedback_max_pct or feedback_decay is set",
            ));
        }
        c.aggregation_time = ms("aggregation_ms", self.aggregation_ms, c.aggregation_time)?;
        c.signal_time = ms("signal_ms", self.signal_ms, c.signal_time)?;
        c.matrix_timeout = ms(
            "matrix_timeout_ms",
            self.matrix_timeout_ms,
            c.matrix_timeout,
        )?;
        c.reorder_wait = ms("reorder_wait_ms", self.reorder_wait_ms, c.reorder_wait)?;
        if let Some(b) = self.max_rx_bytes {
            c.max_rx_bytes = b;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(mode: &str) -> FecSection {
        FecSection {
            mode: mode.into(),
            max_k: Some(128),
            code_rate: Some("8/9".into()),
            min_repair: Some(3),
            feedback_step_pct: None,
            feedback_max_pct: None,
            feedback_decay: None,
            aggregation_ms: Some(2.5),
            signal_ms: None,
            matrix_timeout_ms: None,
            reorder_wait_ms: None,
            max_rx_bytes: None,
        }
    }

    #[test]
    fn a_section_becomes_a_config_and_bad_values_name_their_key() {
        let c = section("hsltp").to_config(5, 10_000_000).unwrap();
        assert_eq!(
            (c.mode, c.max_k, c.rate_k, c.rate_n, c.min_repair),
            (Mode::Hsltp, 128, 8, 9, 3)
        );
        assert_eq!(c.aggregation_time, Duration::from_micros(2500));
        assert_eq!(c.rate_bps, 10_000_000);
        assert_eq!(section("ldpc").to_config(5, 0).unwrap_err().field, "mode");
        let mut s = section("eclsa");
        s.code_rate = Some("9/8".into());
        assert_eq!(s.to_config(5, 0).unwrap_err().field, "code_rate");
        let mut s = section("eclsa");
        s.aggregation_ms = Some(-1.0);
        assert_eq!(s.to_config(5, 0).unwrap_err().field, "aggregation_ms");
    }

    #[test]
    fn feedback_keys_need_a_step_and_default_to_one_step_decaying_after_one_matrix() {
        let c = section("hsltp").to_config(5, 0).unwrap();
        assert!(!c.feedback_on());
        let mut s = section("hsltp");
        s.feedback_step_pct = Some(10);
        let c = s.to_config(5, 0).unwrap();
        assert_eq!(
            (c.feedback_step_pct, c.feedback_max_pct, c.feedback_decay),
            (10, 10, 1)
        );
        s.feedback_max_pct = Some(30);
        s.feedback_decay = Some(4);
        let c = s.to_config(5, 0).unwrap();
        assert_eq!(
            (c.feedback_step_pct, c.feedback_max_pct, c.feedback_decay),
            (10, 30, 4)
        );
        assert!(c.validate(1024).is_ok());
        s.feedback_step_pct = None;
        let e = s.to_config(5, 0).unwrap_err();
        assert_eq!(e.field, "feedback_step_pct");
    }
}
