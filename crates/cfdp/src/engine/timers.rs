//! The timers of one transaction, frozen together while it is suspended or while the link
//! toward its peer is down (CCSDS 727.0 §4.6: suspension freezes every timer).

use std::time::Duration;

/// Deadlines of one transaction (absolute times; None = not running).
#[derive(Debug, Clone, Default)]
pub(crate) struct Timers {
    /// Positive ACK timer (EOF or Finished awaiting its ACK).
    pub ack: Option<Duration>,
    /// NAK retransmission timer.
    pub nak: Option<Duration>,
    /// Inactivity timer.
    pub inactivity: Option<Duration>,
    /// Receiver: next Keep Alive.
    pub keep_alive: Option<Duration>,
    /// Class 1 receiver: check timer.
    pub check: Option<Duration>,
    /// Since when the timers are frozen.
    frozen_since: Option<Duration>,
}

impl Timers {
    /// Earliest deadline, None while frozen.
    pub fn next(&self) -> Option<Duration> {
        if self.frozen_since.is_some() {
            return None;
        }
        [
            self.ack,
            self.nak,
            self.inactivity,
            self.keep_alive,
            self.check,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen_since.is_some()
    }

    pub fn freeze(&mut self, now: Duration) {
        if self.frozen_since.is_none() {
            self.frozen_since = Some(now);
        }
    }

    /// Unfreeze, pushing every deadline back by the time spent frozen.
    pub fn thaw(&mut self, now: Duration) {
        if let Some(since) = self.frozen_since.take() {
            let by = now.saturating_sub(since);
            for d in [
                &mut self.ack,
                &mut self.nak,
                &mut self.inactivity,
                &mut self.keep_alive,
                &mut self.check,
            ]
            .into_iter()
            .flatten()
            {
                *d += by;
            }
        }
    }

    /// Take a deadline that has expired at `now` (never while frozen).
    pub fn expired(slot: &mut Option<Duration>, frozen: bool, now: Duration) -> bool {
        if !frozen && slot.is_some_and(|d| d <= now) {
            *slot = None;
            true
        } else {
            false
        }
    }
}
