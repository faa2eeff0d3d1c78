//! Import (receiving) session state.
//!
//! Red data is copied into its block as it arrives (`red_data`), bounded per session and
//! globally, and the block is handed to the client (and released) as soon as the red part is
//! complete. The
//! received-range set is kept until the session closes so retransmitted checkpoints can be
//! answered with a full report.

use std::time::Duration;

use super::red_data::RedData;
use crate::rangeset::RangeSet;
use crate::segment::{CancelReason, CheckpointInfo, ReportSegment};

/// Report serials whose answer an import session remembers ([`ImportSession::answer_of`]).
pub(crate) const MAX_ANSWERS: usize = 256;

/// A report segment's part in the answer to one checkpoint (all its report segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    /// Lower bound of the segment's scope: a checkpoint citing it draws a secondary report
    /// from there.
    pub(crate) lower: u64,
    /// Whether it answered an intermediate checkpoint: the retransmission it causes is part
    /// of the first transmission's repair, not a retransmission cycle.
    pub(crate) intermediate: bool,
    /// Serial of the checkpoint it answered: the checkpoints citing its report segments are
    /// one retransmission cycle between them.
    pub(crate) checkpoint: u64,
}

/// A report issued by this session, kept until acknowledged.
#[derive(Debug, Clone)]
pub(crate) struct IssuedReport {
    pub(crate) rs: ReportSegment,
    pub(crate) retransmissions: u32,
    pub(crate) deadline: Option<Duration>,
    /// Claims the whole red part (issued after delivery).
    pub(crate) full: bool,
}

/// Lifecycle of an import session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImportState {
    Active,
    /// CR sent (or queued); waiting for CAR.
    Cancelling {
        reason: CancelReason,
        retransmissions: u32,
        deadline: Option<Duration>,
    },
}

/// One import session.
#[derive(Debug)]
pub(crate) struct ImportSession {
    pub(crate) client_service_id: u64,
    /// Received red data not yet delivered, assembled as it arrives.
    pub(crate) red: RedData,
    /// Red bytes held (up to the highest offset received), charged against the engine-wide
    /// import limit.
    pub(crate) charged: u64,
    pub(crate) received: RangeSet,
    pub(crate) red_len: Option<u64>,
    /// Lowest green offset seen.
    pub(crate) green_low: Option<u64>,
    pub(crate) eob: bool,
    pub(crate) delivered: bool,
    pub(crate) full_report_acked: bool,
    pub(crate) reports: Vec<IssuedReport>,
    pub(crate) next_report_serial: u64,
    pub(crate) answered_checkpoints: Vec<u64>,
    /// Of those, the ones that are not retransmission cycles: intermediate checkpoints
    /// (primary ones that moved `primary_upper` forward without ending the red part),
    /// checkpoints of retransmissions planned from their reports, and checkpoints citing
    /// another report segment of the answer `cycle_answer` names.
    pub(crate) free_answered: usize,
    /// The checkpoint whose answer the last counted retransmission cycle cited. An answer
    /// split over several report segments draws one retransmission, and one checkpoint,
    /// per segment; the sender counts them as one cycle, and so does the receiver.
    pub(crate) cycle_answer: Option<u64>,
    /// Upper bound of the primary reports issued so far (RFC 5326 section 6.11): the next
    /// primary report's scope starts there.
    pub(crate) primary_upper: u64,
    /// Each recent report segment's part in its answer, by report serial (at most
    /// [`MAX_ANSWERS`], oldest forgotten first).
    answers: Vec<(u64, Answer)>,
    pub(crate) state: ImportState,
    /// Span-clock time of the last segment received.
    pub(crate) last_rx: Duration,
    /// Data segments received (saturating): a session with one has not progressed.
    pub(crate) data_segments: u32,
    /// A report of ours claimed data of this session. The sender counts claimed bytes as
    /// received for good and completes the block once the claims cover it, so such a session
    /// may end only with a cancel the sender hears, never silently (eviction, stall drop).
    pub(crate) claimed: bool,
    /// Whether the client confirmed the delivered block (always true when the span does not
    /// defer final reports). A complete-red checkpoint is answered only once this is true.
    pub(crate) confirmed: bool,
    /// The latest checkpoint (and its end offset) received after the red part was delivered
    /// but before the client confirmed it: answered by `confirm_block`.
    pub(crate) held_checkpoint: Option<(CheckpointInfo, u64)>,
    /// The session no longer counts against `max_import_sessions` (cancelled on a span with
    /// `immediate_import_close`).
    pub(crate) slot_released: bool,
}

impl ImportSession {
    pub(crate) fn new(
        client_service_id: u64,
        first_report_serial: u64,
        clock: Duration,
        defer_final_report: bool,
    ) -> Self {
        Self {
            client_service_id,
            red: RedData::Empty,
            charged: 0,
            received: RangeSet::new(),
            red_len: None,
            green_low: None,
            eob: false,
            delivered: false,
            full_report_acked: false,
            reports: Vec::new(),
            next_report_serial: first_report_serial,
            answered_checkpoints: Vec::new(),
            free_answered: 0,
            cycle_answer: None,
            primary_upper: 0,
            answers: Vec::new(),
            state: ImportState::Active,
            last_rx: clock,
            data_segments: 0,
            claimed: false,
            confirmed: !defer_final_report,
            held_checkpoint: None,
            slot_released: false,
        }
    }

    /// Whether the session got anywhere: more than one data segment, its block delivered, or a
    /// report of ours sent. A session opened by one (possibly spoofed) segment and then silent
    /// has not. The report counts because a session refused while the span was full reopens
    /// with its sender's retransmitted checkpoint alone, and because a session whose data we
    /// claimed must never be dropped silently (see `claimed`).
    pub(crate) fn progressed(&self) -> bool {
        self.delivered || self.data_segments > 1 || self.claimed
    }

    /// Remembers that report `serial` belongs to `answer`.
    pub(crate) fn note_answer(&mut self, serial: u64, answer: Answer) {
        if self.answers.len() >= MAX_ANSWERS {
            self.answers.remove(0);
        }
        self.answers.push((serial, answer));
    }

    /// The answer report `serial` belonged to (`None` when unknown: forgotten, or never
    /// issued by this session).
    pub(crate) fn answer_of(&self, serial: u64) -> Option<Answer> {
        self.answers
            .iter()
            .rev()
            .find(|&&(s, _)| s == serial)
            .map(|&(_, a)| a)
    }

    /// Whether the red part is complete (and not yet delivered).
    pub(crate) fn red_ready(&self) -> bool {
        !self.delivered
            && self
                .red_len
                .is_some_and(|r| self.received.contains_range(0..r))
    }

    /// Whether the session has finished and can be closed.
    pub(crate) fn closable(&self) -> bool {
        if self.state != ImportState::Active || !self.eob {
            return false;
        }
        let red_present = self.red_len.is_some() || !self.received.is_empty();
        if red_present {
            self.delivered && self.full_report_acked
        } else {
            self.green_low == Some(0)
        }
    }
}
