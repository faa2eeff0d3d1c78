//! Per-span LTP counters and state for the status reply (`ltp.spans`): the LTP thread copies the
//! engine's [`ltp::SpanStats`] and [`ltp::SpanState`] of every span onto a board every
//! [`PUBLISH_INTERVAL`], so a status request never waits for the LTP thread and the LTP thread
//! never builds the status. The engine's counters stay the only counters; this is a copy.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cla::LtpCla;
use client::status::LtpSpanStatus;
use ltp::{SpanState, SpanStats};

use crate::counters::by_name;

/// How often the LTP thread refreshes the board (its loop wakes at least every 100 ms).
pub(crate) const PUBLISH_INTERVAL: Duration = Duration::from_millis(200);

/// The latest copy of every span's counters: (peer node, engine id, counters, state).
#[derive(Debug, Default)]
pub(crate) struct SpanBoard {
    spans: Mutex<Vec<(u64, u64, SpanStats, SpanState)>>,
}

impl SpanBoard {
    /// Copies every span's counters when [`PUBLISH_INTERVAL`] has passed since `last` (then
    /// moves `last` to now).
    pub(crate) fn publish_due(&self, last: &mut Instant, cla: &LtpCla) {
        if last.elapsed() < PUBLISH_INTERVAL {
            return;
        }
        *last = Instant::now();
        self.publish(cla);
    }

    /// Copies every span's counters now (the node calls it once before the LTP thread starts,
    /// so the first status already lists every span).
    pub(crate) fn publish(&self, cla: &LtpCla) {
        let engine = cla.engine();
        let mut rows: Vec<(u64, u64, SpanStats, SpanState)> = cla
            .peers()
            .filter_map(|(peer, id)| {
                let stats = engine.span_stats(id)?.clone();
                let state = engine.span_state(id)?;
                Some((peer, id, stats, state))
            })
            .collect();
        rows.sort_by_key(|r| r.0);
        if let Ok(mut s) = self.spans.lock() {
            *s = rows;
        }
    }

    /// The `ltp.spans` object: per peer node, its span's state and counters (empty if a panic
    /// poisoned the board).
    pub(crate) fn status(&self) -> BTreeMap<u64, LtpSpanStatus> {
        let Ok(spans) = self.spans.lock() else {
            return BTreeMap::new();
        };
        spans
            .iter()
            .map(|(peer, id, st, state)| (*peer, span_status(*id, st, state)))
            .collect()
    }
}

fn span_status(engine_id: u64, st: &SpanStats, state: &SpanState) -> LtpSpanStatus {
    let by_reason = |c: &ltp::CancelCounts| by_name(c.iter().map(|(r, n)| (r.name(), n)));
    LtpSpanStatus {
        engine_id,
        link_up: state.link_up,
        export_sessions: state.export_sessions as u64,
        import_sessions: state.import_sessions as u64,
        queued_blocks: state.queued_blocks as u64,
        pacing_rate_bps: state.pacing_rate_bps,
        pacing_state: state.pacing_state.name().to_string(),
        segments_sent: st.segments_sent,
        segments_received: st.segments_received,
        data_segments_sent: st.data_segments_sent,
        data_bytes_sent: st.data_bytes_sent,
        data_segments_retransmitted: st.data_segments_retransmitted,
        reports_sent: st.reports_sent,
        reports_received: st.reports_received,
        retransmission_cycles: st.retransmission_cycles,
        checkpoint_timeouts: st.checkpoint_timeouts,
        report_timeouts: st.report_timeouts,
        cancel_timeouts: st.cancel_timeouts,
        exports_completed: st.exports_completed,
        export_bytes_completed: st.export_bytes_completed,
        exports_cancelled: st.exports_cancelled,
        blocks_received: st.blocks_received,
        block_bytes_received: st.block_bytes_received,
        imports_cancelled: st.imports_cancelled,
        imports_refused: st.imports_refused,
        stale_segments: st.stale_segments,
        cancelled_here: by_reason(&st.cancelled_here),
        cancelled_by_peer: by_reason(&st.cancelled_by_peer),
        deviations: by_name(st.deviations.iter().map(|(d, n)| (d.name(), n))),
        auth_rejected: by_name(st.auth_rejected.iter()),
        rate_decreases: st.rate_decreases,
        rate_increases: st.rate_increases,
        receiver_pause_holds: st.receiver_pause_holds,
        receiver_pause_held_ms: st.receiver_pause_held.as_millis() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_each_span_under_its_peer_at_most_once_per_interval() {
        // Peer node 2 is reached through engine 20.
        let mut cla = LtpCla::new(ltp::EngineConfig::new(1), 1);
        cla.add_peer(2, ltp::SpanConfig::new(20), None).unwrap();
        let board = SpanBoard::default();
        let mut last = Instant::now();
        board.publish_due(&mut last, &cla);
        assert!(board.status().is_empty(), "not due yet");
        board.publish(&cla);
        assert_eq!(board.status()[&2].engine_id, 20);
        last -= PUBLISH_INTERVAL;
        board.publish_due(&mut last, &cla);
        let j = board.status();
        assert_eq!(j[&2].engine_id, 20);
        assert!(j[&2].link_up);
        assert_eq!(j[&2].cancelled_here["RLEXC"], 0);
        assert_eq!(j[&2].segments_sent, 0);
        assert_eq!(
            j[&2].pacing_state, "fixed",
            "no adaptive pacing on this span"
        );
    }
}
