//! Counters for monitoring and for the experiment tools (per span and engine-wide).

use crate::auth::AuthCounts;
use crate::deviation::DeviationCounts;
use crate::segment::CancelReason;

/// Per-span counters. All counts are cumulative since the span was added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpanStats {
    /// Segments handed to the driver (all types, replicated copies included).
    pub segments_sent: u64,
    /// Segments received and decoded for this span.
    pub segments_received: u64,
    /// Data segments sent (first transmissions and retransmissions).
    pub data_segments_sent: u64,
    /// Payload bytes in data segments sent.
    pub data_bytes_sent: u64,
    /// Data segments that were retransmissions (report-driven or checkpoint timeouts).
    pub data_segments_retransmitted: u64,
    /// Report segments sent (copies included).
    pub reports_sent: u64,
    /// Report segments received.
    pub reports_received: u64,
    /// Retransmission cycles started by reports with gaps.
    pub retransmission_cycles: u64,
    /// Checkpoint retransmission timer expirations.
    pub checkpoint_timeouts: u64,
    /// Report retransmission timer expirations.
    pub report_timeouts: u64,
    /// Cancel retransmission timer expirations.
    pub cancel_timeouts: u64,
    /// Export sessions completed successfully.
    pub exports_completed: u64,
    /// Export sessions cancelled (either side).
    pub exports_cancelled: u64,
    /// Red blocks delivered to the client.
    pub blocks_received: u64,
    /// Import sessions cancelled (either side).
    pub imports_cancelled: u64,
    /// Segments that would have opened an import session and were dropped (every reason;
    /// the sender's checkpoint timer retries).
    pub imports_refused: u64,
    /// ... of which while the client paused ingress (`Engine::set_accepting_imports`).
    pub imports_refused_paused: u64,
    /// ... of which while the engine-wide import budget was full.
    pub imports_refused_budget: u64,
    /// ... of which at `max_import_sessions` with no session able to give way.
    pub imports_refused_full: u64,
    /// Incomplete import sessions evicted to admit a new one (see the engine's admission
    /// policy: never-progressed sessions first).
    pub imports_evicted: u64,
    /// Import sessions that never progressed beyond one data segment and were dropped after
    /// `SpanConfig::import_stall_timeout`.
    pub imports_stalled: u64,
    /// Segments for recently closed or unknown sessions, dropped.
    pub stale_segments: u64,
    /// Tolerated peer deviations in segments of this span's sessions (see
    /// [`crate::deviation`]).
    pub deviations: DeviationCounts,
    /// Red-part bytes of blocks delivered to the client (the receiving side's goodput).
    pub block_bytes_received: u64,
    /// Bytes of blocks whose export session completed (the sending side's goodput: every
    /// byte counted once, however often it was retransmitted).
    pub export_bytes_completed: u64,
    /// Sessions of this span cancelled by this engine, by reason.
    pub cancelled_here: CancelCounts,
    /// Sessions of this span cancelled by the peer, by reason.
    pub cancelled_by_peer: CancelCounts,
    /// Adaptive pacing: rounds that lowered the rate (overrun seen in a report).
    pub rate_decreases: u64,
    /// Adaptive pacing: rounds that raised the rate (clean reports while pacing held data back).
    pub rate_increases: u64,
    /// Receiver-pause learning ([`crate::SpanConfig::learn_receiver_pause`]): holds of the
    /// span's pacing after a block's first transmission.
    pub receiver_pause_holds: u64,
    /// Receiver-pause learning: the holds' total length.
    pub receiver_pause_held: std::time::Duration,
    /// Segments for this span refused by its authentication ([`crate::SpanConfig::auth`]),
    /// by reason. Not counted in `segments_received`.
    pub auth_rejected: AuthCounts,
}

/// Engine-wide counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Datagrams that failed to decode.
    pub malformed: u64,
    /// Segments from or for an engine without a span.
    pub unknown_engine: u64,
    /// Segments whose source the driver's check refused for their span
    /// ([`crate::Engine::handle_datagram_checked`]).
    pub wrong_source: u64,
    /// Tolerated peer deviations in every decoded datagram, including those whose session
    /// turned out unknown (the per-span counts only include those of known spans).
    pub deviations: DeviationCounts,
    /// Segments refused by a span's authentication, by reason (the sum over all spans).
    pub auth_rejected: AuthCounts,
}

/// Cancelled sessions by [`CancelReason`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CancelCounts {
    counts: [u64; CancelReason::ALL.len()],
}

impl CancelCounts {
    /// Count one cancelled session.
    pub fn add(&mut self, reason: CancelReason) {
        if let Some(c) = self.counts.get_mut(usize::from(reason.code())) {
            *c += 1;
        }
    }

    /// Sessions cancelled for `reason`.
    pub fn get(&self, reason: CancelReason) -> u64 {
        self.counts
            .get(usize::from(reason.code()))
            .copied()
            .unwrap_or(0)
    }

    /// Sessions cancelled for any reason.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(reason, sessions)` for every reason, zero counts included.
    pub fn iter(&self) -> impl Iterator<Item = (CancelReason, u64)> + '_ {
        CancelReason::ALL.iter().map(|&r| (r, self.get(r)))
    }
}

/// A span's live state (not a counter): what a monitoring view shows next to [`SpanStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpanState {
    /// The link is up (timers run, data is sent).
    pub link_up: bool,
    /// Open export sessions.
    pub export_sessions: usize,
    /// Open import sessions.
    pub import_sessions: usize,
    /// Blocks waiting for a free export session.
    pub queued_blocks: usize,
    /// Pacing rate in effect (bit/s; 0 = unpaced).
    pub pacing_rate_bps: u64,
    /// Why an adaptive span paces at that rate ([`crate::pacing::PacingState::Fixed`] without
    /// adaptive pacing).
    pub pacing_state: crate::pacing::PacingState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_counts_by_reason() {
        let mut c = CancelCounts::default();
        c.add(CancelReason::RetransmissionLimitExceeded);
        c.add(CancelReason::RetransmissionLimitExceeded);
        c.add(CancelReason::SystemCancelled);
        assert_eq!(c.get(CancelReason::RetransmissionLimitExceeded), 2);
        assert_eq!(c.get(CancelReason::UserCancelled), 0);
        assert_eq!(c.total(), 3);
        let named: Vec<(&str, u64)> = c.iter().map(|(r, n)| (r.name(), n)).collect();
        assert_eq!(named.len(), 6);
        assert!(named.contains(&("SYS_CNCLD", 1)));
    }
}
