//! Serde configuration of link directions (the `[forward]` and `[return]` TOML sections) and its validation.
//!
//! Every field is checked when the configuration is turned into a [`DirectionModel`]; an error names the field with
//! its full path, the value found and what is expected, e.g.
//! `forward.loss.per = 1.5: expected a probability in [0, 1]`.
//!
//! ```toml
//! seed = 7
//! [forward]
//! rate_bps = 500e6          # optional; absent = unlimited
//! queue_bytes = 1048576     # optional; default 1 MiB when a rate is set
//! delay_ms = 10.0
//! jitter_ms = 0.0
//! allow_reorder = false
//! loss = { model = "trace", file = "traceA.txt", offset_ms = 0.0, period_us = 100 }
//! availability = { model = "markov", p = 0.01, step_ms = 100.0 }
//! [return]
//! delay_ms = 10.0
//! loss = { model = "iid", per = 0.01 }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::availability::{Availability, MarkovAvailability, Schedule};
use crate::link::{DirectionModel, Link};
use crate::loss::{GilbertElliott, LossModel};
use crate::trace::{self, ErasureTrace, ParseOptions};

/// Default queue capacity when a rate is configured without `queue_bytes`.
pub const DEFAULT_QUEUE_BYTES: u64 = 1 << 20;

/// A configuration value that is not acceptable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A field holds a value outside its domain.
    #[error("{field} = {value}: expected {expected}")]
    Invalid {
        /// Full path of the field, e.g. `forward.loss.per`.
        field: String,
        /// The value as written.
        value: String,
        /// What the field accepts.
        expected: String,
    },
    /// A trace file named by a field could not be loaded.
    #[error("{field}: {source}")]
    Trace {
        /// Full path of the field.
        field: String,
        /// Why loading failed.
        source: trace::LoadError,
    },
}

fn invalid(field: &str, value: impl std::fmt::Display, expected: &str) -> ConfigError {
    ConfigError::Invalid {
        field: field.to_string(),
        value: value.to_string(),
        expected: expected.to_string(),
    }
}

/// A probability in [0, 1].
fn probability(field: &str, v: f64) -> Result<f64, ConfigError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(invalid(field, v, "a probability in [0, 1]"))
    }
}

/// A non-negative finite number of milliseconds.
fn millis(field: &str, v: f64) -> Result<Duration, ConfigError> {
    if v.is_finite() && v >= 0.0 {
        Duration::try_from_secs_f64(v / 1e3)
            .map_err(|_| invalid(field, v, "a duration in milliseconds >= 0"))
    } else {
        Err(invalid(field, v, "a finite duration in milliseconds >= 0"))
    }
}

/// A positive finite number of milliseconds.
fn positive_millis(field: &str, v: f64) -> Result<Duration, ConfigError> {
    let d = millis(field, v)?;
    if d.is_zero() {
        return Err(invalid(field, v, "a duration in milliseconds > 0"));
    }
    Ok(d)
}

/// Loss model section (`loss = { model = "...", ... }`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossConfig {
    /// No channel loss.
    #[default]
    None,
    /// IID packet erasures.
    Iid {
        /// Packet erasure rate.
        per: f64,
    },
    /// Bit errors.
    Ber {
        /// Bit error rate.
        ber: f64,
    },
    /// Gilbert–Elliott.
    GilbertElliott {
        /// Good → bad probability.
        p: f64,
        /// Bad → good probability.
        r: f64,
        /// Loss probability in the good state (default 0).
        #[serde(default)]
        loss_good: Option<f64>,
        /// Loss probability in the bad state (default 1).
        #[serde(default)]
        loss_bad: Option<f64>,
        /// Absent: one transition per packet; present: one per `step_ms`.
        #[serde(default)]
        step_ms: Option<f64>,
    },
    /// Erasure-trace replay.
    Trace {
        /// Trace file (relative paths are relative to the configuration file).
        file: PathBuf,
        /// Trace time at link time zero (default 0).
        #[serde(default)]
        offset_ms: Option<f64>,
        /// Sample period of a plain-format file in microseconds (default 100; run-length files carry their own).
        #[serde(default)]
        period_us: Option<u64>,
    },
}

/// Availability section (`availability = { model = "...", ... }`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum AvailabilityConfig {
    /// Always up.
    #[default]
    Always,
    /// Up during windows `[start_s, end_s]`.
    Schedule {
        /// Windows in seconds since link start.
        windows: Vec<[f64; 2]>,
        /// Repeat the pattern every this many seconds.
        #[serde(default)]
        repeat_s: Option<f64>,
    },
    /// Seed 004's two-state Markov chain.
    Markov {
        /// Down → up probability per step.
        p: f64,
        /// Up → down probability per step (default `1 - p`).
        #[serde(default)]
        q: Option<f64>,
        /// Step of the chain in milliseconds.
        step_ms: f64,
        /// Initial state, `"up"` (default) or `"down"`.
        #[serde(default)]
        initial: Option<String>,
    },
}

/// One direction's settings as written in the file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DirectionConfig {
    /// Serialization rate in bit/s; absent = unlimited.
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// Transmit queue in bytes (default [`DEFAULT_QUEUE_BYTES`] with a rate).
    #[serde(default)]
    pub queue_bytes: Option<u64>,
    /// One-way delay in milliseconds.
    #[serde(default)]
    pub delay_ms: f64,
    /// Jitter amplitude in milliseconds.
    #[serde(default)]
    pub jitter_ms: f64,
    /// Let jitter reorder packets.
    #[serde(default)]
    pub allow_reorder: bool,
    /// Loss process.
    #[serde(default)]
    pub loss: LossConfig,
    /// Availability.
    #[serde(default)]
    pub availability: AvailabilityConfig,
    /// Headers added below the sender: `{ bytes = 40 }` per packet, or `{ bytes = 40, per_bytes = 1460 }` per
    /// 1460 bytes of packet (proportional).
    #[serde(default)]
    pub overhead: Option<OverheadConfig>,
}

/// Header overhead of a direction as written in the file.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OverheadConfig {
    /// Header bytes per packet (or per `per_bytes`).
    pub bytes: u64,
    /// Carry the packet in pieces of this many bytes, each with `bytes` of headers (counted in proportion).
    #[serde(default)]
    pub per_bytes: Option<u64>,
}

/// A whole link as written in a file: seed plus both directions.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// Seed of every random stream of the link.
    #[serde(default)]
    pub seed: u64,
    /// A → B.
    #[serde(default)]
    pub forward: DirectionConfig,
    /// B → A.
    #[serde(default, rename = "return")]
    pub ret: DirectionConfig,
}

impl LinkConfig {
    /// Validates both directions and builds the running link. `base_dir` resolves relative trace paths.
    pub fn build(&self, base_dir: &Path) -> Result<Link, ConfigError> {
        let f = self.forward.to_model("forward", base_dir)?;
        let r = self.ret.to_model("return", base_dir)?;
        Ok(Link::new(f, r, self.seed))
    }
}

impl LossConfig {
    fn to_model(&self, field: &str, base_dir: &Path) -> Result<LossModel, ConfigError> {
        Ok(match self {
            LossConfig::None => LossModel::None,
            LossConfig::Iid { per } => LossModel::Iid {
                per: probability(&format!("{field}.per"), *per)?,
            },
            LossConfig::Ber { ber } => LossModel::Ber {
                ber: probability(&format!("{field}.ber"), *ber)?,
            },
            LossConfig::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
                step_ms,
            } => LossModel::GilbertElliott(GilbertElliott {
                p: probability(&format!("{field}.p"), *p)?,
                r: probability(&format!("{field}.r"), *r)?,
                loss_good: probability(&format!("{field}.loss_good"), loss_good.unwrap_or(0.0))?,
                loss_bad: probability(&format!("{field}.loss_bad"), loss_bad.unwrap_or(1.0))?,
                step: step_ms
                    .map(|s| positive_millis(&format!("{field}.step_ms"), s))
                    .transpose()?,
            }),
            LossConfig::Trace {
                file,
                offset_ms,
                period_us,
            } => {
                let offset = millis(&format!("{field}.offset_ms"), offset_ms.unwrap_or(0.0))?;
                let period_us = period_us.unwrap_or(100);
                if period_us == 0 {
                    return Err(invalid(
                        &format!("{field}.period_us"),
                        0,
                        "a sample period in microseconds > 0",
                    ));
                }
                let path = base_dir.join(file);
                let opts = ParseOptions {
                    period: Duration::from_micros(period_us),
                    ..ParseOptions::default()
                };
                let trace = trace::load(&path, &opts).map_err(|source| ConfigError::Trace {
                    field: format!("{field}.file"),
                    source,
                })?;
                LossModel::Trace {
                    trace: Arc::new(trace),
                    offset,
                }
            }
        })
    }
}

impl AvailabilityConfig {
    fn to_model(&self, field: &str) -> Result<Availability, ConfigError> {
        Ok(match self {
            AvailabilityConfig::Always => Availability::Always,
            AvailabilityConfig::Schedule { windows, repeat_s } => {
                let mut ws = Vec::with_capacity(windows.len());
                for (i, [s, e]) in windows.iter().enumerate() {
                    let f = format!("{field}.windows[{i}]");
                    let s = millis(&f, s * 1e3)?;
                    let e = millis(&f, e * 1e3)?;
                    ws.push((s, e));
                }
                let period = repeat_s
                    .map(|r| positive_millis(&format!("{field}.repeat_s"), r * 1e3))
                    .transpose()?;
                let sched = Schedule::new(ws, period).map_err(|e| {
                    invalid(
                        &format!("{field}.windows"),
                        format!("{windows:?}"),
                        &format!("valid windows ({e})"),
                    )
                })?;
                Availability::Schedule(sched)
            }
            AvailabilityConfig::Markov {
                p,
                q,
                step_ms,
                initial,
            } => {
                let p = probability(&format!("{field}.p"), *p)?;
                let q = probability(&format!("{field}.q"), q.unwrap_or(1.0 - p))?;
                let step = positive_millis(&format!("{field}.step_ms"), *step_ms)?;
                let initial_up = match initial.as_deref() {
                    None | Some("up") => true,
                    Some("down") => false,
                    Some(other) => {
                        return Err(invalid(
                            &format!("{field}.initial"),
                            format!("{other:?}"),
                            "\"up\" or \"down\"",
                        ))
                    }
                };
                Availability::Markov(MarkovAvailability {
                    p,
                    q,
                    step,
                    initial_up,
                })
            }
        })
    }
}

impl DirectionConfig {
    /// Validates this section (named `field`, e.g. `forward`) and builds its model.
    pub fn to_model(&self, field: &str, base_dir: &Path) -> Result<DirectionModel, ConfigError> {
        let rate_bps = match self.rate_bps {
            None => None,
            Some(r) if (1.0..=1e15).contains(&r) => Some(r as u64),
            Some(r) => {
                return Err(invalid(
                    &format!("{field}.rate_bps"),
                    r,
                    "a rate in bit/s between 1 and 1e15",
                ))
            }
        };
        let queue_bytes = self.queue_bytes.unwrap_or(DEFAULT_QUEUE_BYTES);
        if queue_bytes == 0 {
            return Err(invalid(
                &format!("{field}.queue_bytes"),
                0,
                "a queue capacity in bytes > 0",
            ));
        }
        let overhead = match self.overhead {
            None => crate::link::Overhead::default(),
            Some(o) => {
                if o.per_bytes == Some(0) {
                    return Err(invalid(
                        &format!("{field}.overhead.per_bytes"),
                        0,
                        "a piece size in bytes > 0",
                    ));
                }
                crate::link::Overhead {
                    bytes: o.bytes,
                    per_bytes: o.per_bytes,
                }
            }
        };
        Ok(DirectionModel {
            overhead,
            rate_bps,
            queue_bytes,
            delay: millis(&format!("{field}.delay_ms"), self.delay_ms)?,
            jitter: millis(&format!("{field}.jitter_ms"), self.jitter_ms)?,
            allow_reorder: self.allow_reorder,
            loss: self.loss.to_model(&format!("{field}.loss"), base_dir)?,
            availability: self
                .availability
                .to_model(&format!("{field}.availability"))?,
        })
    }
}

/// Shares an already loaded trace as a loss model (for callers that build models in code).
pub fn trace_loss(trace: ErasureTrace, offset: Duration) -> LossModel {
    LossModel::Trace {
        trace: Arc::new(trace),
        offset,
    }
}
