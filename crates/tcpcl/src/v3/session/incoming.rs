//! Incoming bundles: reassembly, and the ordered stream of answers (ACK_SEGMENT,
//! REFUSE_BUNDLE) that the peer matches to its bundles by order alone.
//!
//! Durability (`SessionConfig::defer_final_ack`): the ACK_SEGMENT of a bundle's last segment,
//! the one that completes it at the sender, is held until the driver confirms the bundle is
//! stored. Because v3 answers carry no bundle identity, everything after a held answer waits
//! behind it, including the acknowledgments of later bundles' segments: answering those first
//! would make the sender apply them to the held bundle. Acknowledgments of the other segments
//! of a bundle leave at once when nothing is held.

use std::collections::VecDeque;
use std::time::Duration;

use super::{Phase, Session};
use crate::direct;
use crate::error::{ConfirmError, RefuseError, SessionError};
use crate::event::{Deviation, Event};
use crate::msg::SessTermReason;
use crate::reassembly::Reassembly;
use crate::v3::msg::{Message, RefuseReason, SegmentHeader};

/// Answers queued behind a held one before the acknowledgments of one bundle are merged (a
/// peer sending very many small segments while a commit is pending). Merging keeps the
/// cumulative lengths valid but gives fewer acknowledgments than segments, which a sender
/// counting one per segment (HDTN) notices; below this bound every segment gets its own.
const MAX_QUEUED_ANSWERS: usize = 65_536;

/// Cap on the buffer reserved up front from a LENGTH announcement (already checked against
/// the hard transfer limit); beyond it the buffer grows segment by segment.
const MAX_INITIAL_RESERVE: u64 = 64 << 20;

/// One incoming bundle being reassembled.
#[derive(Debug)]
struct InBundle {
    /// Its place among the peer's bundles (the implied transfer id).
    seq: u64,
    data: Reassembly,
    /// Data octets of its completed segments.
    received: u64,
    /// The length its LENGTH message announced.
    declared: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Buffer,
    Discard,
}

#[derive(Debug, Clone, Copy)]
struct CurrentSegment {
    end: bool,
    len: u64,
    sink: Sink,
}

/// One answer to the peer, in the order the peer expects them.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// The ACK_SEGMENT of a segment that does not complete its bundle.
    Ack { seq: u64, len: u64 },
    /// The ACK_SEGMENT completing a bundle, held for the driver's decision: `true` sends
    /// it, `false` (not stored) refuses the bundle instead.
    Final {
        seq: u64,
        len: u64,
        decision: Option<bool>,
    },
    /// A REFUSE_BUNDLE.
    Refuse(RefuseReason),
}

/// Receive state: at most one bundle in progress, plus the answers waiting behind a held one.
#[derive(Debug, Default)]
pub(super) struct Incoming {
    cur: Option<InBundle>,
    seg: Option<CurrentSegment>,
    next_seq: u64,
    /// The length announced by the last LENGTH message, for the next bundle.
    announced: Option<u64>,
    /// The segments until the next S flag belong to a refused bundle: skipped.
    skipping: bool,
    /// Answers not yet sent because one before them is held; the front one is held.
    answers: VecDeque<Answer>,
    /// Our graceful close began: bundles starting now are refused.
    ending: bool,
}

impl Incoming {
    /// The reassembly buffer of the transfer whose current segment's data is being
    /// buffered, if any (none: skipped).
    pub(super) fn buffer(&mut self) -> Option<&mut Reassembly> {
        match (&self.seg, &mut self.cur) {
            (Some(seg), Some(cur)) if seg.sink == Sink::Buffer => Some(&mut cur.data),
            _ => None,
        }
    }

    /// Appends a piece of segment data to the reassembly buffer (or skips it).
    pub(super) fn on_data(&mut self, d: &[u8]) {
        if let Some(data) = self.buffer() {
            data.push(d);
        }
    }

    /// A bundle is being received or answers wait for a confirmation: a graceful end waits.
    pub(super) fn in_progress(&self) -> bool {
        self.cur.is_some() || !self.answers.is_empty()
    }

    pub(super) fn begin_ending(&mut self) {
        self.ending = true;
    }

    /// Drops everything, held answers included (the session is closing: the sender forwards
    /// the bundles it has no acknowledgment for again).
    pub(super) fn clear(&mut self) {
        self.cur = None;
        self.seg = None;
        self.answers.clear();
    }

    fn held_count(&self) -> usize {
        self.answers
            .iter()
            .filter(|a| matches!(a, Answer::Final { .. }))
            .count()
    }
}

impl Session {
    /// Refuses the incoming bundle in progress (after `TransferStarted`, before
    /// `BundleReceived`; `transfer_id` is its sequence number). With negotiated refusals a
    /// REFUSE_BUNDLE is queued (v4 reasons without a v3 code map to the nearest one: "No
    /// Resources" for not acceptable or terminating, "Unknown" otherwise) and the rest of
    /// the bundle is skipped. Without them the peer still waits for the bundle's
    /// acknowledgments in order, so the session ends with SHUTDOWN "Busy" (the peer
    /// forwards its unacknowledged bundles again later); without acknowledgments at all the
    /// bundle is just dropped.
    pub fn refuse_transfer(
        &mut self,
        transfer_id: u64,
        reason: crate::msg::RefuseReason,
    ) -> Result<(), RefuseError> {
        if self.inc.cur.as_ref().is_some_and(|c| c.seq == transfer_id) {
            let now = self.latest;
            self.refuse_incoming(now, RefuseReason::from_common(reason));
            Ok(())
        } else {
            Err(RefuseError::UnknownTransfer(transfer_id))
        }
    }

    /// Answers a bundle whose final acknowledgment is held (`defer_final_ack`, after its
    /// `BundleReceived`): `ok = true` sends it; `ok = false` (not stored) sends REFUSE_BUNDLE
    /// "Retransmit" instead if refusals were negotiated, and otherwise ends the session with
    /// SHUTDOWN "Busy" — the only other answer a v3 sender understands — so that it keeps the
    /// bundle and forwards it again. Answers leave in bundle order: a later bundle's
    /// confirmation waits for the earlier ones. Without negotiated acknowledgments nothing is
    /// held (`ConfirmError::UnknownTransfer`).
    pub fn confirm_transfer(
        &mut self,
        now: Duration,
        transfer_id: u64,
        ok: bool,
    ) -> Result<(), ConfirmError> {
        self.latest = self.latest.max(now);
        if self.phase == Phase::Closed {
            return Err(ConfirmError::Closed);
        }
        let held = self.inc.answers.iter_mut().find_map(|a| match a {
            Answer::Final { seq, decision, .. } if *seq == transfer_id && decision.is_none() => {
                Some(decision)
            }
            _ => None,
        });
        let Some(decision) = held else {
            return Err(ConfirmError::UnknownTransfer(transfer_id));
        };
        *decision = Some(ok);
        self.flush_answers(now);
        Ok(())
    }

    /// Bundles whose final acknowledgment is held (confirmed or not, not yet sent).
    pub fn held_acks(&self) -> usize {
        self.inc.held_count()
    }

    /// The incoming transfer being reassembled, if any: its place among the peer's bundles (the transfer id of its `BundleReceived`) and the data received so far,
    /// in order. A driver may copy it out as it grows (e.g. into a store's staging file while
    /// the octets are still in the CPU's cache); once the transfer completes, its
    /// `BundleReceived` carries the same octets, and a transfer that is refused, cancelled or
    /// cut simply stops being reported here.
    pub fn incoming_data(&self) -> Option<(u64, &[u8])> {
        self.inc.cur.as_ref().map(|c| (c.seq, c.data.data()))
    }

    /// Sends an answer, or queues it behind a held one.
    fn answer(&mut self, a: Answer) {
        let held = matches!(a, Answer::Final { decision: None, .. });
        if self.inc.answers.is_empty() && !held {
            self.emit(a);
            return;
        }
        if self.inc.answers.len() >= MAX_QUEUED_ANSWERS {
            if let (
                Answer::Ack { seq, len },
                Some(Answer::Ack {
                    seq: last,
                    len: last_len,
                }),
            ) = (a, self.inc.answers.back_mut())
            {
                if seq == *last {
                    *last_len = len;
                    return;
                }
            }
        }
        self.inc.answers.push_back(a);
    }

    fn emit(&mut self, a: Answer) {
        match a {
            Answer::Ack { len, .. } | Answer::Final { len, .. } => {
                self.stats.acks_sent += 1;
                self.queue(&Message::Ack(len));
            }
            Answer::Refuse(reason) => self.queue(&Message::Refuse(reason)),
        }
    }

    /// Sends the answers at the front that are no longer held.
    fn flush_answers(&mut self, now: Duration) {
        while let Some(&front) = self.inc.answers.front() {
            match front {
                Answer::Final { decision: None, .. } => break,
                Answer::Final {
                    decision: Some(false),
                    ..
                } => {
                    self.inc.answers.pop_front();
                    self.stats.transfers_refused += 1;
                    if self.neg.refusals {
                        self.queue(&Message::Refuse(RefuseReason::Retransmit));
                    } else {
                        self.terminate_now(now, SessTermReason::Busy);
                        return;
                    }
                }
                other => {
                    self.inc.answers.pop_front();
                    self.emit(other);
                }
            }
        }
        self.maybe_finish(now);
    }

    /// Refuses the bundle in progress (see [`Session::refuse_transfer`]).
    fn refuse_incoming(&mut self, now: Duration, reason: RefuseReason) {
        self.inc.cur = None;
        self.inc.skipping = true;
        if let Some(seg) = &mut self.inc.seg {
            seg.sink = Sink::Discard;
        }
        if self.neg.refusals {
            self.stats.transfers_refused += 1;
            self.answer(Answer::Refuse(reason));
        } else if self.neg.acks {
            self.terminate_now(now, SessTermReason::Busy);
        } else {
            self.stats.transfers_refused += 1;
        }
    }

    pub(super) fn on_length(&mut self, len: u64) {
        if !self.neg.receive_length {
            self.deviation(Deviation::UnrequestedLength);
        }
        self.inc.announced = Some(len);
    }

    pub(super) fn on_segment_start(
        &mut self,
        now: Duration,
        h: SegmentHeader,
    ) -> Result<(), SessionError> {
        self.stats.segments_received += 1;
        if h.data_len > self.cfg.hard_segment_limit {
            return Err(SessionError::SegmentTooLarge {
                len: h.data_len,
                limit: self.cfg.hard_segment_limit,
            });
        }
        // Discarded until accepted below.
        self.inc.seg = Some(CurrentSegment {
            end: h.flags.is_end(),
            len: h.data_len,
            sink: Sink::Discard,
        });
        if h.flags.is_start() {
            if self.inc.cur.take().is_some() {
                self.deviation(Deviation::StartBeforeEnd);
            }
            self.inc.skipping = false;
            let declared = self.inc.announced.take();
            let seq = self.inc.next_seq;
            self.inc.next_seq += 1;
            let full = self.cfg.defer_final_ack
                && self.neg.acks
                && self.inc.held_count() >= self.cfg.max_held_acks;
            if self.inc.ending || full || declared.is_some_and(|l| l > self.cfg.hard_transfer_limit)
            {
                self.refuse_incoming(now, RefuseReason::NoResources);
                return Ok(());
            }
            // Reserved once for the whole bundle when its length was announced (checked
            // against the hard limit above, capped further); otherwise per segment.
            let cap = declared.map_or(h.data_len, |l| l.min(MAX_INITIAL_RESERVE));
            self.inc.cur = Some(InBundle {
                seq,
                data: Reassembly::with_capacity(
                    usize::try_from(cap).unwrap_or(0),
                    self.cfg.checksum_received(declared),
                    self.cfg.recycle_buffers.as_ref(),
                ),
                received: 0,
                declared,
            });
            self.events.push_back(Event::TransferStarted {
                transfer_id: seq,
                total_len: declared,
            });
        } else if self.inc.skipping {
            return Ok(());
        } else if self.inc.cur.is_none() {
            return Err(SessionError::ProtocolViolation(
                "DATA_SEGMENT without the S flag outside a bundle",
            ));
        }
        let Some(cur) = &mut self.inc.cur else {
            return Ok(());
        };
        let total = cur.received.saturating_add(h.data_len);
        if total > self.cfg.hard_transfer_limit || cur.declared.is_some_and(|l| total > l) {
            self.refuse_incoming(now, RefuseReason::NoResources);
            return Ok(());
        }
        // Bounded: total <= hard_transfer_limit. A no-op when reserved up front.
        cur.data.reserve_segment(h.data_len);
        if let Some(seg) = &mut self.inc.seg {
            seg.sink = Sink::Buffer;
        }
        Ok(())
    }

    pub(super) fn on_segment_end(&mut self, now: Duration) {
        let Some(seg) = self.inc.seg.take() else {
            return;
        };
        if seg.sink == Sink::Discard {
            return;
        }
        let Some(cur) = &mut self.inc.cur else {
            return;
        };
        cur.received += seg.len;
        let (seq, received, declared) = (cur.seq, cur.received, cur.declared);
        if seg.end && (received == 0 || declared.is_some_and(|l| l != received)) {
            // Empty, or shorter than its LENGTH announced.
            self.refuse_incoming(now, RefuseReason::Retransmit);
            self.maybe_finish(now);
            return;
        }
        // An empty segment adds nothing to acknowledge (the same length twice would read as
        // a broken sequence to the sender).
        if self.neg.acks && seg.len > 0 {
            let a = if seg.end && self.cfg.defer_final_ack {
                Answer::Final {
                    seq,
                    len: received,
                    decision: None,
                }
            } else {
                Answer::Ack { seq, len: received }
            };
            self.answer(a);
        }
        if seg.end {
            if let Some(done) = self.inc.cur.take() {
                self.stats.bundles_received += 1;
                let (bundle, crc32c) = done.data.finish();
                self.events.push_back(Event::BundleReceived {
                    transfer_id: done.seq,
                    bundle,
                    crc32c,
                });
            }
            self.maybe_finish(now);
        }
    }
}

direct::direct_receive!(Session);
