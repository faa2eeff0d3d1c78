//! Incoming transfers: reassembly into one buffer, acknowledgments and refusals.

use std::collections::VecDeque;
use std::time::Duration;

use super::{Phase, Session};
use crate::decode::transfer_length;
use crate::direct;
use crate::error::{ConfirmError, RefuseError, SessionError};
use crate::event::{Deviation, Event};
use crate::msg::{
    Message, MessageType, RefuseReason, RejectReason, SegmentFlags, SegmentHeader, XferAck,
    XferRefuse, TRANSFER_LENGTH_EXTENSION,
};
use crate::reassembly::Reassembly;

/// How many refused transfer ids are remembered, so that their in-flight segments are
/// skipped silently instead of being rejected as unexpected.
const REFUSED_MEMORY: usize = 16;

/// Cap on the buffer reserved up front from a peer's Transfer Length extension (already
/// checked against the hard transfer limit): beyond it the buffer grows segment by segment,
/// so a configured limit of gigabytes does not let one announcement reserve that much.
const MAX_INITIAL_RESERVE: u64 = 64 << 20;

/// One incoming transfer being reassembled.
#[derive(Debug)]
struct InTransfer {
    id: u64,
    data: Reassembly,
    /// Data octets of the completed segments.
    received: u64,
    declared: Option<u64>,
    over_mru_reported: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Buffer,
    Discard,
}

#[derive(Debug, Clone, Copy)]
struct CurrentSegment {
    flags: SegmentFlags,
    len: u64,
    sink: Sink,
}

/// A completed transfer whose final XFER_ACK waits for the driver (`defer_final_ack`).
#[derive(Debug, Clone, Copy)]
struct Held {
    ack: XferAck,
    /// The driver's answer, once given: `true` acknowledges, `false` refuses.
    decision: Option<bool>,
}

/// Receive state: at most one transfer in progress (the peer may not interleave), plus the
/// completed transfers whose final acknowledgment is held, in the order they completed.
#[derive(Debug, Default)]
pub(super) struct Incoming {
    cur: Option<InTransfer>,
    seg: Option<CurrentSegment>,
    refused: VecDeque<u64>,
    held: VecDeque<Held>,
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

    /// A transfer is being received or a final acknowledgment is held: a graceful end
    /// waits for both (bounded by the termination timeout).
    pub(super) fn in_progress(&self) -> bool {
        self.cur.is_some() || !self.held.is_empty()
    }

    /// Drops everything, including held acknowledgments (the session is closing: the sender
    /// counts those transfers as failed and forwards them again).
    pub(super) fn clear(&mut self) {
        self.cur = None;
        self.seg = None;
        self.held.clear();
    }

    /// Transfers whose final acknowledgment is held (confirmed or not, not yet sent).
    pub(super) fn held_count(&self) -> usize {
        self.held.len()
    }

    fn discard_segment(&mut self, h: &SegmentHeader) {
        self.seg = Some(CurrentSegment {
            flags: h.flags,
            len: h.data_len,
            sink: Sink::Discard,
        });
    }
}

impl Session {
    /// Refuses an incoming transfer in progress (after `TransferStarted`, before
    /// `BundleReceived`), e.g. because the store is full: XFER_REFUSE is queued, the partial
    /// data is dropped and the rest of the transfer is skipped.
    pub fn refuse_transfer(
        &mut self,
        transfer_id: u64,
        reason: RefuseReason,
    ) -> Result<(), RefuseError> {
        if self.inc.cur.as_ref().is_some_and(|c| c.id == transfer_id) {
            self.refuse_incoming(transfer_id, reason);
            Ok(())
        } else {
            Err(RefuseError::UnknownTransfer(transfer_id))
        }
    }

    /// Answers a transfer whose final XFER_ACK is held (`SessionConfig::defer_final_ack`),
    /// after its `BundleReceived`: `ok = true` once the bundle is safely stored releases the
    /// final XFER_ACK (the sender may then delete its copy); `ok = false` (it could not be
    /// stored) sends XFER_REFUSE with reason `Retransmit` instead, so the sender keeps the
    /// bundle and forwards it again later.
    ///
    /// `Retransmit` ("the bundle must be retransmitted in its entirety", RFC 9174, 5.2.4)
    /// rather than `NoResources`: every segment but the last was already acknowledged, and
    /// `NoResources` invites a sender to fragment reactively and resend only the
    /// unacknowledged tail, which this node no longer holds.
    ///
    /// Final answers leave in the order the transfers completed: a confirmation of a later
    /// transfer waits until every earlier held one is confirmed too. RFC 9174 associates
    /// acknowledgments by transfer id and sets no order between transfers, but a peer that
    /// pipelines transfers may well expect their completions in order; keeping it costs
    /// nothing when the driver confirms in order, as a store committing in arrival order
    /// does. Acknowledgments of non-final segments are never held.
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
        let Some(h) = self
            .inc
            .held
            .iter_mut()
            .find(|h| h.decision.is_none() && h.ack.transfer_id == transfer_id)
        else {
            return Err(ConfirmError::UnknownTransfer(transfer_id));
        };
        h.decision = Some(ok);
        while let Some(h) = self.inc.held.front().copied() {
            let Some(ok) = h.decision else {
                break;
            };
            self.inc.held.pop_front();
            if ok {
                self.stats.acks_sent += 1;
                self.queue(&Message::XferAck(h.ack));
            } else {
                self.stats.transfers_refused += 1;
                self.queue(&Message::XferRefuse(XferRefuse {
                    reason: RefuseReason::Retransmit,
                    transfer_id: h.ack.transfer_id,
                }));
            }
        }
        self.maybe_finish(now);
        Ok(())
    }

    /// Completed incoming transfers whose final acknowledgment is held: not yet confirmed,
    /// or confirmed and waiting for an earlier one (always 0 without `defer_final_ack`).
    pub fn held_acks(&self) -> usize {
        self.inc.held_count()
    }

    /// The incoming transfer being reassembled, if any: its transfer id and the data received so far,
    /// in order. A driver may copy it out as it grows (e.g. into a store's staging file while
    /// the octets are still in the CPU's cache); once the transfer completes, its
    /// `BundleReceived` carries the same octets, and a transfer that is refused, cancelled or
    /// cut simply stops being reported here.
    pub fn incoming_data(&self) -> Option<(u64, &[u8])> {
        self.inc.cur.as_ref().map(|c| (c.id, c.data.data()))
    }

    fn refuse_incoming(&mut self, id: u64, reason: RefuseReason) {
        self.stats.transfers_refused += 1;
        self.queue(&Message::XferRefuse(XferRefuse {
            reason,
            transfer_id: id,
        }));
        if self.inc.refused.len() >= REFUSED_MEMORY {
            self.inc.refused.pop_front();
        }
        self.inc.refused.push_back(id);
        if self.inc.cur.as_ref().is_some_and(|c| c.id == id) {
            self.inc.cur = None;
        }
        if let Some(seg) = &mut self.inc.seg {
            seg.sink = Sink::Discard;
        }
    }

    pub(super) fn on_segment_start(
        &mut self,
        _now: Duration,
        h: SegmentHeader,
    ) -> Result<(), SessionError> {
        self.stats.segments_received += 1;
        if self.phase != Phase::Established {
            self.reject(RejectReason::Unexpected, MessageType::XferSegment.code());
            self.inc.discard_segment(&h);
            return Ok(());
        }
        if h.data_len > self.cfg.hard_segment_limit {
            return Err(SessionError::SegmentTooLarge {
                len: h.data_len,
                limit: self.cfg.hard_segment_limit,
            });
        }
        if h.data_len > self.cfg.segment_mru {
            self.deviation(Deviation::SegmentOverMru);
        }
        // Start with a discarding segment; switched to buffering once accepted.
        self.inc.discard_segment(&h);
        if h.flags.is_start() {
            if self.inc.cur.take().is_some() {
                self.deviation(Deviation::StartBeforeEnd);
            }
            if self.ending.is_some() {
                self.refuse_incoming(h.transfer_id, RefuseReason::SessionTerminating);
                return Ok(());
            }
            if h.extensions
                .iter()
                .any(|e| e.is_critical() && e.item_type != TRANSFER_LENGTH_EXTENSION)
            {
                self.refuse_incoming(h.transfer_id, RefuseReason::ExtensionFailure);
                return Ok(());
            }
            if self.cfg.defer_final_ack && self.inc.held.len() >= self.cfg.max_held_acks {
                // The driver is not confirming: hold no more.
                self.refuse_incoming(h.transfer_id, RefuseReason::NoResources);
                return Ok(());
            }
            let declared = transfer_length(&h.extensions)?;
            if let Some(l) = declared {
                if l > self.cfg.hard_transfer_limit {
                    self.refuse_incoming(h.transfer_id, RefuseReason::NotAcceptable);
                    return Ok(());
                }
            }
            // Reserved once for the whole transfer when its length is announced: the length
            // was checked against the hard transfer limit above, and is capped further by
            // our transfer MRU and MAX_INITIAL_RESERVE (larger transfers grow per segment).
            // Otherwise per segment, bounded by the hard segment limit.
            let cap = declared.map_or(h.data_len, |l| {
                l.min(self.cfg.transfer_mru).min(MAX_INITIAL_RESERVE)
            });
            self.inc.cur = Some(InTransfer {
                id: h.transfer_id,
                data: Reassembly::with_capacity(
                    usize::try_from(cap).unwrap_or(0),
                    self.cfg.checksum_received(declared),
                    self.cfg.recycle_buffers.as_ref(),
                ),
                received: 0,
                declared,
                over_mru_reported: false,
            });
            self.events.push_back(Event::TransferStarted {
                transfer_id: h.transfer_id,
                total_len: declared,
            });
        } else if self.inc.cur.as_ref().is_none_or(|c| c.id != h.transfer_id) {
            if !self.inc.refused.contains(&h.transfer_id) {
                self.reject(RejectReason::Unexpected, MessageType::XferSegment.code());
            }
            return Ok(());
        }
        let (total, declared, reported) = match &self.inc.cur {
            Some(c) => (
                c.received.saturating_add(h.data_len),
                c.declared,
                c.over_mru_reported,
            ),
            None => return Ok(()),
        };
        if total > self.cfg.hard_transfer_limit || declared.is_some_and(|l| total > l) {
            self.refuse_incoming(h.transfer_id, RefuseReason::NotAcceptable);
            return Ok(());
        }
        if total > self.cfg.transfer_mru && !reported {
            self.deviation(Deviation::TransferOverMru);
        }
        if let Some(c) = &mut self.inc.cur {
            if total > self.cfg.transfer_mru {
                c.over_mru_reported = true;
            }
            // Bounded: total <= hard_transfer_limit. A no-op when reserved up front.
            c.data.reserve_segment(h.data_len);
        }
        self.inc.seg = Some(CurrentSegment {
            flags: h.flags,
            len: h.data_len,
            sink: Sink::Buffer,
        });
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
        let (id, received, declared) = (cur.id, cur.received, cur.declared);
        if seg.flags.is_end() && (declared.is_some_and(|l| l != received) || received == 0) {
            // Shorter than announced, or an empty "bundle".
            self.refuse_incoming(id, RefuseReason::NotAcceptable);
            self.maybe_finish(now);
            return;
        }
        let ack = XferAck {
            flags: seg.flags,
            transfer_id: id,
            acknowledged_len: received,
        };
        if seg.flags.is_end() && self.cfg.defer_final_ack {
            self.inc.held.push_back(Held {
                ack,
                decision: None,
            });
        } else {
            self.stats.acks_sent += 1;
            self.queue(&Message::XferAck(ack));
        }
        if seg.flags.is_end() {
            if let Some(done) = self.inc.cur.take() {
                self.stats.bundles_received += 1;
                let (bundle, crc32c) = done.data.finish();
                self.events.push_back(Event::BundleReceived {
                    transfer_id: done.id,
                    bundle,
                    crc32c,
                });
            }
            self.maybe_finish(now);
        }
    }
}

direct::direct_receive!(Session);
