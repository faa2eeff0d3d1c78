//! Export (sending) session state and its segmentation plan.
//!
//! The plan is a queue of *batches*: the first transmission is one batch (red ranges, then
//! green), and each report with gaps adds one batch holding exactly the unclaimed ranges of
//! that report. The last red segment of every batch is a checkpoint, so one report produces
//! one retransmission cycle. With `SpanConfig::checkpoint_interval_bytes` the first
//! transmission also carries *intermediate* checkpoints, one per interval of red bytes, each
//! answered by a report covering its interval. Segments are cut lazily at transmission time,
//! so a block costs no per-segment allocation.

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
    /// Start of the first-transmission interval the batch's data lies in, or the lower bound
    /// of the report segment it answers when higher (see [`Checkpoint::scope_start`]; 0 for
    /// the first transmission, whose scope moves with its intermediate checkpoints).
    pub(crate) scope_start: u64,
    /// Serial of the checkpoint whose answer planned this retransmission batch (0 for the
    /// first transmission).
    pub(crate) answers: u64,
}

/// An outstanding checkpoint, kept so a timeout can resend it verbatim.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checkpoint {
    pub(crate) serial: u64,
    pub(crate) report_serial: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    /// Start of the red data this checkpoint vouches for: the end of the previous checkpoint
    /// of the first transmission (0 for its first one, and for every checkpoint of a block sent
    /// with a single one), or for a retransmission batch the start of the first-transmission
    /// interval its data lies in, or the lower bound of the report segment it answers when that
    /// is higher (where the receiver's answer starts). Its reports cover `[scope_start, end)`:
    /// the checkpoint is done once that is claimed, and adaptive pacing takes the burst's
    /// outcome there.
    pub(crate) scope_start: u64,
    pub(crate) ty: SegmentType,
    pub(crate) retransmissions: u32,
    /// Span-clock deadline of the armed timer.
    pub(crate) deadline: Option<Duration>,
    /// When the burst this checkpoint closes began and when the checkpoint first left
    /// (adaptive pacing).
    pub(crate) burst_start: Duration,
    pub(crate) burst_end: Duration,
    /// Red bytes the burst carried (the checkpoint's scope can hold gaps other batches resend).
    pub(crate) burst_bytes: u64,
    /// Data bytes the span sent, of every session, from the burst's start to the checkpoint.
    pub(crate) burst_link_bytes: u64,
    /// Where in the scope the burst began, when it began at a rate change in the middle of a
    /// first transmission: adaptive pacing judges `[burst_from, end)`, the part sent at the
    /// current rate (see `ExportSession::burst_from`). `None`: the whole scope.
    pub(crate) burst_from: Option<u64>,
}

impl Checkpoint {
    /// End of the checkpoint segment: its reports cover `[scope_start, end)`.
    pub(crate) fn end(&self) -> u64 {
        self.offset + self.len
    }

    /// Whether a checkpoint of the first transmission (not of a retransmission batch).
    pub(crate) fn first_pass(&self) -> bool {
        self.report_serial == 0
    }
}

/// The reports answering one checkpoint, followed across their report segments so that a
/// report split in several segments gives adaptive pacing one outcome for the whole burst.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Feedback {
    pub(crate) serial: u64,
    pub(crate) burst_start: Duration,
    pub(crate) burst_end: Duration,
    pub(crate) burst_bytes: u64,
    pub(crate) burst_link_bytes: u64,
    /// The checkpoint's scope, `[start, end)`.
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Red bytes in `[start, end)` unclaimed before the first report segment.
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
    /// Retransmission cycles counted against `max_retransmission_cycles`: one per checkpoint
    /// whose answer showed gaps, however many report segments that answer took.
    pub(crate) cycles: u32,
    /// The checkpoint last counted in `cycles`.
    pub(crate) cycle_cp: u64,
    /// Whether the session number is in the span's `data_sessions` queue.
    pub(crate) queued: bool,
    /// Start of the burst in progress (first red segment sent since the last checkpoint).
    pub(crate) burst_start: Option<Duration>,
    /// Red bytes sent since `burst_start` (adaptive pacing).
    pub(crate) burst_bytes: u64,
    /// The span's `data_bytes_sent` before the burst's first segment.
    pub(crate) burst_link_from: u64,
    /// Offset of the first segment of the burst in progress when it was restarted at a rate
    /// change in the middle of a first transmission (adaptive pacing). A first transmission
    /// leaves in offset order, so everything from here to the checkpoint was paced at the new
    /// rate and its outcome says something about it; without the restart a block longer
    /// than a round would never count for the rate that was chosen while it was sent.
    pub(crate) burst_from: Option<u64>,
    /// Adaptive pacing: the report being followed (spans with adaptive pacing only).
    pub(crate) feedback: Option<Feedback>,
    /// The unclaimed ranges of the followed checkpoint's scope before its answer, ascending
    /// (what a retransmission batch resent, in the order it left; empty when there were more
    /// than `adaptive::MAX_FOLLOWED_RANGES`).
    pub(crate) feedback_sent: Vec<std::ops::Range<u64>>,
    /// Receiver-pause learning: when this block's first transmission left, sampled, until its
    /// first answer (see `engine::pause`).
    pub(crate) head: Option<super::pause::Head>,
    /// Intermediate checkpoints every this many red bytes of the first transmission (0 =
    /// none: its last red segment is its only checkpoint).
    pub(crate) cp_interval: u64,
    /// Red bytes of the first transmission sent since its last checkpoint.
    pub(crate) since_cp: u64,
    /// Checkpoints of the first transmission so far, `(serial, end)` in offset order: the
    /// interval boundaries.
    pub(crate) first_pass_cps: Vec<(u64, u64)>,
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
    /// The checkpoint's [`Checkpoint::scope_start`] (meaningful for checkpoints only).
    pub(crate) scope_start: u64,
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
            scope_start: 0,
            answers: 0,
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
            cycle_cp: 0,
            queued: false,
            burst_start: None,
            burst_bytes: 0,
            burst_link_from: 0,
            burst_from: None,
            feedback: None,
            feedback_sent: Vec::new(),
            head: None,
            cp_interval: 0,
            since_cp: 0,
            first_pass_cps: Vec::new(),
        }
    }

    /// Start of the first-transmission interval holding `offset`: the end of the last
    /// first-transmission checkpoint at or below it (0 when there is none, in particular
    /// whenever the block is sent with a single checkpoint).
    pub(crate) fn interval_start(&self, offset: u64) -> u64 {
        let k = self
            .first_pass_cps
            .partition_point(|&(_, end)| end <= offset);
        k.checked_sub(1)
            .and_then(|k| self.first_pass_cps.get(k))
            .map_or(0, |&(_, end)| end)
    }

    /// Whether `serial` is an intermediate checkpoint: one of the first transmission that does
    /// not end its red part. The reports answering it are not retransmission cycles.
    pub(crate) fn is_intermediate(&self, serial: u64) -> bool {
        let red_len = self.red_len;
        self.first_pass_cps
            .iter()
            .any(|&(s, end)| s == serial && end < red_len)
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
        let done = |c: &Checkpoint| acked.contains_range(c.scope_start..c.end());
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
                    scope_start: cp.scope_start,
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
            let first_pass = !batch.retransmission;
            // An intermediate checkpoint closes each interval of the first transmission.
            let intermediate = red
                && first_pass
                && !last_red
                && self.cp_interval > 0
                && self.since_cp + len >= self.cp_interval;
            let ty = if red {
                if intermediate {
                    SegmentType::RedCheckpoint
                } else if !last_red {
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
            let scope_start = if first_pass {
                self.first_pass_cps.last().map_or(0, |&(_, e)| e)
            } else {
                batch.scope_start
            };
            if red && first_pass {
                self.since_cp += len;
            }
            let checkpoint = if ty.is_checkpoint() {
                let serial = self.next_cp_serial;
                self.next_cp_serial = self.next_cp_serial.wrapping_add(1).max(1);
                if first_pass {
                    self.first_pass_cps.push((serial, end));
                    self.since_cp = 0;
                }
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
                scope_start,
            });
        }
    }
}
