//! Export (sending) session state and its segmentation plan.
//!
//! The plan is a queue of *batches*: the first transmission is one batch (red ranges, then
//! green), and each report with gaps adds one batch holding exactly the unclaimed ranges of
//! that report. The last red segment of every batch is a checkpoint, so one report produces
//! one retransmission cycle. Segments are cut lazily at transmission time, so a block costs
//! no per-segment allocation.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;

use crate::rangeset::RangeSet;
use crate::sdnv;
use crate::segment::{self, CancelReason, CheckpointInfo, SegmentType, SessionId};

/// Bytes every red segment leaves free for the checkpoint and report serial numbers
/// (two 3-byte SDNVs: serials below 2^21, which covers the 14-bit initial values plus any
/// realistic number of checkpoints).
pub(crate) const CHECKPOINT_RESERVE: usize = 6;

/// A group of ranges sent back to back, closed by a checkpoint if it holds red data.
#[derive(Debug)]
pub(crate) struct Batch {
    pub(crate) ranges: VecDeque<Range<u64>>,
    /// Report serial carried by the batch's checkpoint (0 for the first transmission).
    pub(crate) report_serial: u64,
    pub(crate) retransmission: bool,
}

/// An outstanding checkpoint, kept so a timeout can resend it verbatim.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checkpoint {
    pub(crate) serial: u64,
    pub(crate) report_serial: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) ty: SegmentType,
    pub(crate) retransmissions: u32,
    /// Span-clock deadline of the armed timer.
    pub(crate) deadline: Option<Duration>,
    /// When the burst this checkpoint closes began and when the checkpoint first left
    /// (adaptive pacing).
    pub(crate) burst_start: Duration,
    pub(crate) burst_end: Duration,
}

impl Checkpoint {
    /// End of the checkpoint segment: its reports cover `[0 or a lower bound, end)`.
    pub(crate) fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// The reports answering one checkpoint, followed across their report segments so that a
/// report split in several segments gives adaptive pacing one outcome for the whole burst.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Feedback {
    pub(crate) serial: u64,
    pub(crate) burst_start: Duration,
    pub(crate) burst_end: Duration,
    pub(crate) end: u64,
    /// Red bytes in `[0, end)` unclaimed before the first report segment.
    pub(crate) outstanding: u64,
}

/// Lifecycle of an export session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExportState {
    Active,
    /// CS sent (or queued); waiting for CAS.
    Cancelling {
        reason: CancelReason,
        retransmissions: u32,
        deadline: Option<Duration>,
    },
}

/// One export session.
#[derive(Debug)]
pub(crate) struct ExportSession {
    pub(crate) id: SessionId,
    pub(crate) remote: u64,
    pub(crate) client_service_id: u64,
    pub(crate) block: Bytes,
    pub(crate) red_len: u64,
    pub(crate) tokens: Vec<u64>,
    pub(crate) state: ExportState,
    /// Red bytes claimed by reports so far.
    pub(crate) acked: RangeSet,
    pub(crate) batches: VecDeque<Batch>,
    /// Checkpoints whose timer expired, to resend first.
    pub(crate) cp_resend: VecDeque<u64>,
    pub(crate) checkpoints: Vec<Checkpoint>,
    pub(crate) next_cp_serial: u64,
    /// Report serials already acted upon (duplicates only get an RA).
    pub(crate) handled_reports: Vec<u64>,
    pub(crate) cycles: u32,
    /// Whether the session number is in the span's `data_sessions` queue.
    pub(crate) queued: bool,
    /// Start of the burst in progress (first red segment sent since the last checkpoint).
    pub(crate) burst_start: Option<Duration>,
    /// Adaptive pacing: the report being followed (spans with adaptive pacing only).
    pub(crate) feedback: Option<Feedback>,
}

/// The next data segment chosen by [`ExportSession::next_segment`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlannedSegment {
    pub(crate) ty: SegmentType,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    pub(crate) checkpoint: Option<CheckpointInfo>,
    pub(crate) retransmission: bool,
    /// A timeout-driven resend of an existing checkpoint (its timer is re-armed, no new
    /// checkpoint record).
    pub(crate) checkpoint_resend: bool,
}

impl ExportSession {
    /// New session with its first-transmission batch planned.
    pub(crate) fn new(
        id: SessionId,
        remote: u64,
        client_service_id: u64,
        block: Bytes,
        red_len: u64,
        tokens: Vec<u64>,
        first_cp_serial: u64,
    ) -> Self {
        let len = block.len() as u64;
        let mut ranges = VecDeque::with_capacity(2);
        if red_len > 0 {
            ranges.push_back(0..red_len);
        }
        if len > red_len {
            ranges.push_back(red_len..len);
        }
        let mut batches = VecDeque::with_capacity(1);
        batches.push_back(Batch {
            ranges,
            report_serial: 0,
            retransmission: false,
        });
        Self {
            id,
            remote,
            client_service_id,
            block,
            red_len,
            tokens,
            state: ExportState::Active,
            acked: RangeSet::new(),
            batches,
            cp_resend: VecDeque::new(),
            checkpoints: Vec::new(),
            next_cp_serial: first_cp_serial,
            handled_reports: Vec::new(),
            cycles: 0,
            queued: false,
            burst_start: None,
            feedback: None,
        }
    }

    /// Whether data segments remain to be sent.
    pub(crate) fn has_data_output(&self) -> bool {
        self.state == ExportState::Active
            && (!self.cp_resend.is_empty() || !self.batches.is_empty())
    }

    /// Whether every red byte has been claimed by a report.
    pub(crate) fn red_complete(&self) -> bool {
        self.red_len == 0 || self.acked.contains_range(0..self.red_len)
    }

    /// Whether the session has nothing left to do (red acknowledged, everything sent).
    pub(crate) fn finished(&self) -> bool {
        self.state == ExportState::Active
            && self.red_complete()
            && self.batches.is_empty()
            && self.cp_resend.is_empty()
    }

    /// Whether a planned batch still holds red data (it will end with a checkpoint).
    pub(crate) fn has_red_batch(&self) -> bool {
        let red_len = self.red_len;
        self.batches
            .iter()
            .any(|b| b.ranges.iter().any(|r| r.start < red_len))
    }

    /// Retire checkpoints whose data, `[0, end)`, is entirely claimed: no report for them can
    /// teach anything more. The last one is kept, though, when nothing else (another
    /// checkpoint, a planned batch) would keep a timer running for the red data still
    /// unclaimed: its expiry is what resends it, draws a new report, and, at the checkpoint
    /// retransmission limit, cancels the session instead of letting it sit forever.
    pub(crate) fn retire_answered_checkpoints(&mut self) {
        let acked = &self.acked;
        let done = |c: &Checkpoint| acked.contains_range(0..c.end());
        let live = self.checkpoints.iter().any(|c| !done(c));
        if live || self.has_red_batch() || self.red_complete() {
            self.checkpoints.retain(|c| !done(c));
            return;
        }
        // Keep the one that reaches furthest: a resend of it draws the widest report.
        let keep = self
            .checkpoints
            .iter()
            .max_by_key(|c| c.end())
            .map(|c| c.serial);
        self.checkpoints.retain(|c| Some(c.serial) == keep);
    }

    /// Drop planned red retransmissions (the red part is fully acknowledged).
    pub(crate) fn drop_red_plan(&mut self) {
        let red_len = self.red_len;
        for b in &mut self.batches {
            b.ranges.retain(|r| r.start >= red_len);
        }
        self.batches.retain(|b| !b.ranges.is_empty());
        self.cp_resend.clear();
    }

    /// Cut the next data segment so that the encoded segment fits in `mss` bytes.
    pub(crate) fn next_segment(&mut self, mss: usize) -> Option<PlannedSegment> {
        while let Some(serial) = self.cp_resend.pop_front() {
            if let Some(cp) = self.checkpoints.iter().find(|c| c.serial == serial) {
                return Some(PlannedSegment {
                    ty: cp.ty,
                    offset: cp.offset,
                    len: cp.len,
                    checkpoint: Some(CheckpointInfo {
                        checkpoint_serial: cp.serial,
                        report_serial: cp.report_serial,
                    }),
                    retransmission: true,
                    checkpoint_resend: true,
                });
            }
        }
        let red_len = self.red_len;
        let block_len = self.block.len() as u64;
        let header = segment::plain_header_len(self.id)
            + sdnv::encoded_len(self.client_service_id)
            + sdnv::encoded_len(mss as u64);
        loop {
            let batch = self.batches.front_mut()?;
            let Some(range) = batch.ranges.front().cloned() else {
                self.batches.pop_front();
                continue;
            };
            let start = range.start;
            let red = start < red_len;
            let base = header + sdnv::encoded_len(start);
            // Red segments leave room for the checkpoint fields, so that any red segment
            // (in particular a lost one, resent as the last of a retransmission batch) can
            // carry them without being split.
            let reserve = if red {
                (sdnv::encoded_len(self.next_cp_serial) + sdnv::encoded_len(batch.report_serial))
                    .max(CHECKPOINT_RESERVE)
            } else {
                0
            };
            let cap = mss.saturating_sub(base + reserve).max(1) as u64;
            let len = (range.end - start).min(cap);
            let end = start + len;
            let range_done = end >= range.end;
            if range_done {
                batch.ranges.pop_front();
            } else if let Some(r) = batch.ranges.front_mut() {
                r.start = end;
            }
            let last_red =
                red && range_done && batch.ranges.front().is_none_or(|r| r.start >= red_len);
            let ty = if red {
                if !last_red {
                    SegmentType::RedData
                } else if end < red_len {
                    SegmentType::RedCheckpoint
                } else if red_len == block_len {
                    SegmentType::RedCheckpointEorpEob
                } else {
                    SegmentType::RedCheckpointEorp
                }
            } else if end == block_len {
                SegmentType::GreenEob
            } else {
                SegmentType::GreenData
            };
            let checkpoint = if ty.is_checkpoint() {
                let serial = self.next_cp_serial;
                self.next_cp_serial = self.next_cp_serial.wrapping_add(1).max(1);
                Some(CheckpointInfo {
                    checkpoint_serial: serial,
                    report_serial: batch.report_serial,
                })
            } else {
                None
            };
            let retransmission = batch.retransmission;
            if batch.ranges.is_empty() {
                self.batches.pop_front();
            }
            return Some(PlannedSegment {
                ty,
                offset: start,
                len: end - start,
                checkpoint,
                retransmission,
                checkpoint_resend: false,
            });
        }
    }
}
