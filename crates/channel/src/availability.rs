//! Whether a direction can carry anything at all at a given time.
//!
//! A direction is either always up, up during scheduled windows (contacts; optionally repeating with a period), or
//! driven by the two-state Markov chain of seed 004 (Fig. 11) that models a GEO return channel which is available
//! only part of the time. A packet whose transmission starts while the direction is down is lost with
//! [`crate::LossCause::Unavailable`].

use std::time::Duration;

use crate::rng::{stream, Component};
use crate::sojourn::SojournChain;

/// Up/down windows. Invariant (checked by [`Schedule::new`]): windows are non-empty, sorted, non-overlapping, and
/// lie within `period` when one is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    windows: Vec<(Duration, Duration)>,
    period: Option<Duration>,
}

impl Schedule {
    /// Builds a schedule from `[start, end)` windows. With `period`, the pattern repeats every `period` (e.g. a
    /// daily pass plan). Errors name the offending window.
    pub fn new(
        mut windows: Vec<(Duration, Duration)>,
        period: Option<Duration>,
    ) -> Result<Self, String> {
        windows.sort();
        for (i, &(s, e)) in windows.iter().enumerate() {
            if e <= s {
                return Err(format!("window {i} [{s:?}, {e:?}) is empty or reversed"));
            }
            if let Some(p) = period {
                if e > p {
                    return Err(format!(
                        "window {i} ends at {e:?}, after the repeat period {p:?}"
                    ));
                }
            }
        }
        for (i, pair) in windows.windows(2).enumerate() {
            if let [a, b] = pair {
                if b.0 < a.1 {
                    return Err(format!("windows {i} and {} overlap", i + 1));
                }
            }
        }
        if period.is_some_and(|p| p.is_zero()) {
            return Err("the repeat period must be positive".into());
        }
        Ok(Schedule { windows, period })
    }

    /// The windows, sorted.
    pub fn windows(&self) -> &[(Duration, Duration)] {
        &self.windows
    }

    /// Whether `t` falls in a window.
    pub fn is_up(&self, t: Duration) -> bool {
        let t = match self.period {
            Some(p) if !p.is_zero() => {
                let ns = t.as_nanos() % p.as_nanos();
                Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
            }
            _ => t,
        };
        // Index of the first window starting after t; the candidate is the one before it.
        let idx = self.windows.partition_point(|&(s, _)| s <= t);
        idx.checked_sub(1)
            .and_then(|i| self.windows.get(i))
            .is_some_and(|&(_, e)| t < e)
    }
}

/// The two-state availability chain of seed 004, Fig. 11: S0 = unavailable, S1 = available.
///
/// Seed 004 names `p` the probability of going from S0 to S1 and also calls it "the probability of return link
/// availability" (a link "available only for 1 % of the time" at p = 0.01). Both readings agree when the S1 → S0
/// probability is `1 - p`, which is the default of `q`: the stationary availability is then exactly `p`.
/// Setting `q` explicitly gives a bursty channel with availability `p / (p + q)`.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkovAvailability {
    /// Probability S0 (down) → S1 (up) per step.
    pub p: f64,
    /// Probability S1 (up) → S0 (down) per step.
    pub q: f64,
    /// The step of the chain.
    pub step: Duration,
    /// State at time zero: `true` = up.
    pub initial_up: bool,
}

impl MarkovAvailability {
    /// Seed 004's model: `q = 1 - p`.
    pub fn seed004(p: f64, step: Duration, initial_up: bool) -> Self {
        MarkovAvailability {
            p,
            q: 1.0 - p,
            step,
            initial_up,
        }
    }

    /// Long-run fraction of time up: `p / (p + q)`.
    pub fn stationary_availability(&self) -> f64 {
        if self.p + self.q == 0.0 {
            return if self.initial_up { 1.0 } else { 0.0 };
        }
        self.p / (self.p + self.q)
    }
}

/// An availability description.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Availability {
    /// Always up.
    #[default]
    Always,
    /// Up during scheduled windows.
    Schedule(Schedule),
    /// Two-state Markov chain.
    Markov(MarkovAvailability),
}

/// The running state of an [`Availability`].
#[derive(Clone, Debug)]
pub struct AvailabilityProcess {
    model: Availability,
    chain: Option<SojournChain>,
}

impl AvailabilityProcess {
    /// Starts the process for direction number `direction` of a link seeded with `seed`.
    pub fn new(model: Availability, seed: u64, direction: u64) -> Self {
        let chain = match &model {
            Availability::Markov(m) => {
                // State `true` = up: leaving "down" happens with p, leaving "up" with q.
                Some(SojournChain::new(
                    m.p,
                    m.q,
                    m.step,
                    m.initial_up,
                    stream(seed, direction, Component::Availability),
                ))
            }
            _ => None,
        };
        AvailabilityProcess { model, chain }
    }

    /// The model.
    pub fn model(&self) -> &Availability {
        &self.model
    }

    /// Whether the direction is up at `t` (times must be non-decreasing for the Markov model).
    pub fn is_up(&mut self, t: Duration) -> bool {
        match (&self.model, &mut self.chain) {
            (Availability::Always, _) => true,
            (Availability::Schedule(s), _) => s.is_up(t),
            (Availability::Markov(_), Some(chain)) => chain.state_at(t),
            (Availability::Markov(m), None) => m.initial_up,
        }
    }
}
