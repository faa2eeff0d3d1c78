//! Back-off towards neighbours that refuse bundles for lack of resources.
//!
//! A neighbour whose store is full (or degraded) refuses what we send it: LTP cancels the import
//! session, TCPCL answers XFER_REFUSE "No Resources" or "Retransmit". The convergence layer
//! reports that as [`crate::ClaOutcome::Refused`]; the bundle stays stored here and the
//! neighbour's queue is not served until its back-off ends. The back-off doubles with each
//! refusal from [`AgentConfig::refusal_backoff_first_ms`](crate::AgentConfig) up to
//! [`AgentConfig::refusal_backoff_max_ms`](crate::AgentConfig), and resets when a bundle
//! reaches the neighbour. Refusals of bundles that were already in flight when the back-off
//! began do not double it again, so a window of sessions cancelled together counts once. Only
//! that neighbour waits: other neighbours, and traffic from the neighbour to us, flow on.

use std::collections::BTreeMap;

use super::DtnTime;
use crate::NodeNum;

/// One neighbour's back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighbourBackoff {
    /// DTN time until which the neighbour's queue is not served.
    pub until_ms: DtnTime,
    /// The delay the next refusal (after `until_ms`) will impose.
    pub next_delay_ms: u64,
    /// Refusals since the last bundle the neighbour took.
    pub refusals: u64,
}

/// Back-offs of every neighbour that refused recently.
#[derive(Debug, Clone, Default)]
pub(crate) struct Backoffs {
    by_neighbour: BTreeMap<NodeNum, NeighbourBackoff>,
}

impl Backoffs {
    /// A refusal from `n` at `now`: starts (or lengthens, doubling) its back-off.
    pub(crate) fn refused(&mut self, now: DtnTime, n: NodeNum, first_ms: u64, max_ms: u64) {
        let b = self.by_neighbour.entry(n).or_insert(NeighbourBackoff {
            until_ms: 0,
            next_delay_ms: first_ms.max(1),
            refusals: 0,
        });
        b.refusals += 1;
        if now < b.until_ms {
            // A bundle sent before this back-off began: already accounted for.
            return;
        }
        let delay = b.next_delay_ms.clamp(1, max_ms.max(1));
        b.until_ms = now.saturating_add(delay);
        b.next_delay_ms = delay.saturating_mul(2).min(max_ms.max(1));
    }

    /// `n` took a bundle: its back-off is over.
    pub(crate) fn reset(&mut self, n: NodeNum) {
        self.by_neighbour.remove(&n);
    }

    /// True while `n` must not be served.
    pub(crate) fn blocks(&self, n: NodeNum, now: DtnTime) -> bool {
        self.by_neighbour.get(&n).is_some_and(|b| now < b.until_ms)
    }

    /// The earliest end of a back-off still running at `now` among `neighbours` (those with
    /// queued bundles), when the driver should look again.
    pub(crate) fn next_end(
        &self,
        now: DtnTime,
        mut has_work: impl FnMut(NodeNum) -> bool,
    ) -> Option<DtnTime> {
        self.by_neighbour
            .iter()
            .filter(|(n, b)| now < b.until_ms && has_work(**n))
            .map(|(_, b)| b.until_ms)
            .min()
    }

    /// Every neighbour's back-off state (for status).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (NodeNum, NeighbourBackoff)> + '_ {
        self.by_neighbour.iter().map(|(n, b)| (*n, *b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_refusal_period_caps_and_resets() {
        let mut b = Backoffs::default();
        b.refused(0, 2, 100, 1000);
        assert!(b.blocks(2, 99) && !b.blocks(2, 100) && !b.blocks(3, 0));
        // Refusals of bundles already in flight while backing off do not double it again.
        b.refused(50, 2, 100, 1000);
        assert_eq!(b.next_end(50, |_| true), Some(100));
        let mut now = 100;
        let mut delays = Vec::new();
        for _ in 0..6 {
            b.refused(now, 2, 100, 1000);
            let until = b.next_end(now, |_| true).unwrap();
            delays.push(until - now);
            now = until;
        }
        assert_eq!(delays, vec![200, 400, 800, 1000, 1000, 1000]);
        // Nothing queued for it: no wake-up needed.
        assert_eq!(b.next_end(now - 1, |_| false), None);
        b.reset(2);
        assert!(!b.blocks(2, now));
        b.refused(now, 2, 100, 1000);
        assert_eq!(b.next_end(now, |_| true), Some(now + 100));
    }
}
