//! Per-span FEC settings.

use std::time::Duration;

use thiserror::Error;

use crate::header::{code_exists, ROW_PREFIX};

/// How the sender fills its matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Segment-oriented (ECLSA): consecutive LTP segments of any kind fill a matrix until it
    /// holds K or the aggregation timer fires; the receiver hands segments up in order as soon
    /// as it can, and LTP retransmits what a failed matrix lost.
    Eclsa,
    /// Block-oriented (HSLTP): the end-of-block segment closes the matrix at once and a matrix
    /// holds the data of one block at most; a matrix that fails to decode cancels its import
    /// session so the bundle layer re-forwards the bundles in a new block.
    Hsltp,
}

impl Mode {
    /// Name used in configuration files.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Eclsa => "eclsa",
            Mode::Hsltp => "hsltp",
        }
    }

    /// Parses a configuration name.
    pub fn from_name(s: &str) -> Option<Mode> {
        match s {
            "eclsa" => Some(Mode::Eclsa),
            "hsltp" => Some(Mode::Hsltp),
            _ => None,
        }
    }
}

/// An invalid setting, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field} = {value}: expected {expected}")]
pub struct ConfigError {
    /// The setting.
    pub field: &'static str,
    /// Its value.
    pub value: String,
    /// What is accepted.
    pub expected: String,
}

fn bad(field: &'static str, value: impl ToString, expected: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// Settings of the FEC layer on the span to one remote engine. Both ends of a span must enable
/// it (a receiver without it sees FEC datagrams as malformed LTP).
#[derive(Debug, Clone, PartialEq)]
pub struct FecConfig {
    /// Remote engine id of the span.
    pub remote_engine_id: u64,
    /// ECLSA or HSLTP.
    pub mode: Mode,
    /// Information symbols of a full matrix (K). A matrix closes when it holds this many.
    pub max_k: u16,
    /// Code rate numerator: Rc = `rate_k` / `rate_n` (8/9 by default). Every matrix, full or
    /// not ("K continuous"), gets `ceil(K × (rate_n − rate_k) / rate_k)` repair symbols, at
    /// least `min_repair`.
    pub rate_k: u16,
    /// Code rate denominator.
    pub rate_n: u16,
    /// Fewest repair symbols of any matrix (at least 1), so that small matrices (a lone
    /// report, a short block) are protected too: seed 003's "threshold on the minimum number
    /// of redundancy symbols in a codeword". Above `ceil(K × (N−K)/K)` it also lowers the rate
    /// of matrices of K information symbols.
    pub min_repair: u16,
    /// Redundancy feedback, sender side (0 = off, the default): each failure signal from the
    /// receiver — HSLTP: a cancel from the block receiver with `RXMTCYCEXC` (its matrix
    /// failed); ECLSA: a report segment that claims less than its whole scope (a
    /// retransmission request, so a matrix failed) — raises the extra redundancy of the
    /// following matrices by this many repair symbols per 100 information symbols (rounded
    /// up, so at least one), up to `feedback_max_pct`.
    pub feedback_step_pct: u16,
    /// Redundancy feedback: the largest extra redundancy, repair symbols per 100 information
    /// symbols (at least `feedback_step_pct` when feedback is on).
    pub feedback_max_pct: u16,
    /// Redundancy feedback: the extra redundancy drops by one step after this many matrices
    /// carrying LTP data have been sent at its level (at least 1 when feedback is on), so it
    /// decays back to none when no failure follows.
    pub feedback_decay: u16,
    /// ECLSA: a matrix closes this long after its first segment even if not full. HSLTP: the
    /// same safety limit for a matrix holding data whose end-of-block never comes.
    pub aggregation_time: Duration,
    /// HSLTP: a matrix holding only signal segments (reports, acks, cancels) closes this long
    /// after its first one, unless data of a block joins it first.
    pub signal_time: Duration,
    /// Link rate in bit/s the FEC layer paces its datagrams at (0 = unpaced). The LTP
    /// engine's own pacing is switched off on FEC spans: the FEC layer pulls segments from it
    /// while its queue has room.
    pub rate_bps: u64,
    /// Token-bucket depth as time at `rate_bps` (see `ltp::pacing::TokenBucket`).
    pub burst_time: Duration,
    /// Receiver: a matrix missing symbols is given up (failed) when nothing arrived for it
    /// for this long, or for twice the time its remaining symbols would take at the pace they
    /// came, whichever is longer.
    pub matrix_timeout: Duration,
    /// Receiver: once a symbol of a later matrix arrives, an undecided earlier one is given up
    /// after this much more time (symbols reordered on the link may still complete it).
    pub reorder_wait: Duration,
    /// Receiver: bytes of symbols held for undecided matrices; beyond it the oldest matrix is
    /// given up. Also bounds one matrix (K × T at most half of it).
    pub max_rx_bytes: usize,
}

impl FecConfig {
    /// Defaults: K 1024, Rc 8/9, at least 2 repair symbols, no redundancy feedback, 5 ms aggregation, 1 ms for
    /// signal-only HSLTP matrices, unpaced, 200 ms matrix timeout, 1 ms reorder wait, 256 MiB.
    ///
    /// The matrix timeout only decides a matrix that no later matrix follows (a later one
    /// decides it after `reorder_wait`); it must outlast the longest pause a busy host or relay
    /// puts between two symbols: 20 ms gave matrices up half received on a loaded machine.
    pub fn new(remote_engine_id: u64, mode: Mode) -> Self {
        Self {
            remote_engine_id,
            mode,
            max_k: 1024,
            rate_k: 8,
            rate_n: 9,
            min_repair: 2,
            feedback_step_pct: 0,
            feedback_max_pct: 0,
            feedback_decay: 0,
            aggregation_time: Duration::from_millis(5),
            signal_time: Duration::from_millis(1),
            rate_bps: 0,
            burst_time: ltp::DEFAULT_PACING_BURST_TIME,
            matrix_timeout: Duration::from_millis(200),
            reorder_wait: Duration::from_millis(1),
            max_rx_bytes: 256 << 20,
        }
    }

    /// Repair symbols of a matrix of `k` information symbols (`k` ≥ 1).
    pub fn repair_for(&self, k: usize) -> usize {
        let (rk, rn) = (usize::from(self.rate_k.max(1)), usize::from(self.rate_n));
        let r = (k * rn.saturating_sub(rk)).div_ceil(rk);
        r.max(usize::from(self.min_repair)).max(1)
    }

    /// Whether redundancy feedback is on.
    pub fn feedback_on(&self) -> bool {
        self.feedback_step_pct > 0
    }

    /// Extra repair symbols of a matrix of `k` information symbols while the feedback's extra
    /// redundancy is `pct` repair symbols per 100 information symbols: `ceil(k × pct / 100)`.
    pub fn feedback_extra(k: usize, pct: u16) -> usize {
        (k * usize::from(pct)).div_ceil(100)
    }

    /// Checks the settings for matrices of rows of `t` bytes.
    pub fn validate(&self, t: usize) -> Result<(), ConfigError> {
        if self.rate_k == 0 || self.rate_n <= self.rate_k {
            return Err(bad(
                "rate",
                format!("{}/{}", self.rate_k, self.rate_n),
                "a code rate K/N with 0 < K < N (e.g. 8/9)",
            ));
        }
        if self.max_k == 0 {
            return Err(bad("max_k", 0, "at least 1 information symbol"));
        }
        if self.min_repair == 0 {
            return Err(bad(
                "min_repair",
                0,
                "at least 1 repair symbol per matrix (a matrix without one is not protected)",
            ));
        }
        if self.feedback_on() {
            if self.feedback_max_pct < self.feedback_step_pct {
                return Err(bad(
                    "feedback_max_pct",
                    self.feedback_max_pct,
                    format!(
                        "at least feedback_step_pct = {} (the first failure raises the redundancy by one step)",
                        self.feedback_step_pct
                    ),
                ));
            }
            if self.feedback_max_pct > 1000 {
                return Err(bad(
                    "feedback_max_pct",
                    self.feedback_max_pct,
                    "at most 1000 extra repair symbols per 100 information symbols",
                ));
            }
            if self.feedback_decay == 0 {
                return Err(bad(
                    "feedback_decay",
                    0,
                    "at least 1 matrix per step when feedback_step_pct > 0 (or feedback_step_pct = 0 for no feedback)",
                ));
            }
        }
        let k = usize::from(self.max_k);
        let extra_max = if self.feedback_on() {
            self.feedback_max_pct
        } else {
            0
        };
        for kk in [1, k] {
            let r = self.repair_for(kk) + Self::feedback_extra(kk, extra_max);
            if !code_exists(kk, r) {
                let field = if self.min_repair > 1 && kk == 1 && self.repair_for(1) > 1 {
                    "min_repair"
                } else {
                    "max_k"
                };
                let value = if field == "min_repair" {
                    self.min_repair.to_string()
                } else {
                    self.max_k.to_string()
                };
                return Err(ConfigError {
                    field,
                    value,
                    expected: format!(
                        "a matrix of K = {kk} with {r} repair symbols (rate, min_repair and the feedback's maximum) to have a Reed-Solomon code over GF(2^16) (K + repair <= 65535)"
                    ),
                });
            }
        }
        if !(4..=usize::from(u16::MAX) - 1).contains(&t) || !t.is_multiple_of(2) {
            return Err(bad(
                "symbol_bytes",
                t,
                "an even row size from 4 to 65534 bytes (LTP max_segment_size + 2)",
            ));
        }
        if k * t > self.max_rx_bytes / 2 {
            return Err(bad(
                "max_k",
                self.max_k,
                format!(
                    "a matrix of at most max_rx_bytes / 2 = {} bytes at {t}-byte rows",
                    self.max_rx_bytes / 2
                ),
            ));
        }
        Ok(())
    }
}

/// Row size for LTP segments of at most `max_segment_size` bytes: the segment plus its
/// 2-byte length prefix, rounded up to an even number (the code works on 16-bit symbols).
pub fn symbol_bytes(max_segment_size: usize) -> usize {
    (max_segment_size + ROW_PREFIX + 1) & !1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_matrices_keep_the_rate_with_a_minimum() {
        let c = FecConfig::new(2, Mode::Eclsa);
        assert_eq!(c.repair_for(1024), 128);
        assert_eq!(c.repair_for(98), 13);
        assert_eq!(c.repair_for(8), 2);
        assert_eq!(c.repair_for(1), 2);
        assert_eq!(symbol_bytes(1022), 1024);
        assert_eq!(symbol_bytes(1023), 1026);
    }

    #[test]
    fn invalid_settings_name_their_field() {
        let mut c = FecConfig::new(2, Mode::Eclsa);
        assert!(c.validate(1024).is_ok());
        c.rate_n = 8;
        assert_eq!(c.validate(1024).unwrap_err().field, "rate");
        let mut c = FecConfig::new(2, Mode::Eclsa);
        c.max_k = 60_000;
        assert_eq!(c.validate(1024).unwrap_err().field, "max_k");
        let c = FecConfig::new(2, Mode::Eclsa);
        assert_eq!(c.validate(1023).unwrap_err().field, "symbol_bytes");
    }

    #[test]
    fn the_minimum_repair_threshold_is_validated_and_raises_short_matrices() {
        let mut c = FecConfig::new(2, Mode::Hsltp);
        c.min_repair = 0;
        let e = c.validate(1024).unwrap_err();
        assert_eq!((e.field, e.value.as_str()), ("min_repair", "0"));
        assert!(e.to_string().contains("at least 1 repair symbol"), "{e}");
        c.min_repair = 21;
        assert!(c.validate(1024).is_ok());
        // Above the rate's 13 for K = 100 it sets the redundancy; K = 1024 keeps the rate's 128.
        assert_eq!(
            (c.repair_for(1), c.repair_for(100), c.repair_for(1024)),
            (21, 21, 128)
        );
        c.min_repair = 65_535;
        assert_eq!(c.validate(1024).unwrap_err().field, "min_repair");
    }

    #[test]
    fn feedback_settings_are_validated_only_when_on() {
        let mut c = FecConfig::new(2, Mode::Eclsa);
        assert!(!c.feedback_on());
        c.feedback_decay = 0;
        c.feedback_max_pct = 0;
        assert!(c.validate(1024).is_ok(), "off: the other two are ignored");
        c.feedback_step_pct = 10;
        let e = c.validate(1024).unwrap_err();
        assert_eq!((e.field, e.value.as_str()), ("feedback_max_pct", "0"));
        c.feedback_max_pct = 30;
        let e = c.validate(1024).unwrap_err();
        assert_eq!(e.field, "feedback_decay");
        c.feedback_decay = 4;
        assert!(c.validate(1024).is_ok());
        c.feedback_max_pct = 1001;
        assert_eq!(c.validate(1024).unwrap_err().field, "feedback_max_pct");
        assert_eq!(FecConfig::feedback_extra(100, 10), 10);
        assert_eq!(FecConfig::feedback_extra(1, 10), 1);
        assert_eq!(FecConfig::feedback_extra(98, 15), 15);
        assert_eq!(FecConfig::feedback_extra(98, 0), 0);
    }
}
