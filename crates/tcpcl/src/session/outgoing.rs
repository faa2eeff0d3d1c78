//! Outgoing transfers: queueing, segmentation, acknowledgments and refusals.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;

use super::{Phase, Session};
use crate::error::SendError;
use crate::event::{Deviation, Event};
use crate::gather::Gather;
use crate::msg::{
    ExtensionItem, MessageType, RejectReason, SegmentFlags, SegmentHeader, SessTermReason, XferAck,
    XferRefuse,
};
use crate::stats::SessionStats;

/// A bundle's octets as two parts sent one after the other (a new head in front of stored
/// bytes, see [`Session::send_bundle_parts`]); `head` is empty for a bundle given whole.
#[derive(Debug)]
struct BundleData {
    head: Bytes,
    tail: Bytes,
}

impl BundleData {
    fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Appends octets `from..to` as slices of the parts (two where the range spans both).
    fn gather(&self, gather: &mut Gather, out: &mut Vec<Bytes>, from: usize, to: usize) {
        let h = self.head.len();
        if from < h {
            gather.payload(out, self.head.slice(from..to.min(h)));
        }
        if to > h {
            gather.payload(out, self.tail.slice(from.max(h) - h..to - h));
        }
    }
}

/// One bundle being sent or waiting for its acknowledgment.
#[derive(Debug)]
struct OutTransfer {
    id: u64,
    token: u64,
    data: BundleData,
    /// Octets handed to `poll_transmit` so far.
    sent: usize,
    /// Octets the peer acknowledged.
    acked: u64,
    /// Segment size used for this transfer (fixed at its first segment).
    seg_size: u64,
}

impl OutTransfer {
    /// The START/END flags of the segment ending at cumulative length `len`.
    fn flags_at(&self, len: u64) -> SegmentFlags {
        let first_end = self.seg_size.min(self.data.len() as u64);
        SegmentFlags::new(len == first_end, len == self.data.len() as u64)
    }
}

/// Outgoing transfers in transfer-id order. Transfers are sent one after the other, never
/// interleaved (RFC 9174, 5.2.2); later ones wait while earlier ones await acknowledgment.
#[derive(Debug, Default)]
pub(super) struct Outgoing {
    queue: VecDeque<OutTransfer>,
    next_id: u64,
}

impl Outgoing {
    /// Appends segments to `out` (headers staged in `gather`, data as zero-copy slices of
    /// the bundles); true if any was appended. Stops once `budget` data octets were appended
    /// (at least one segment goes out if any is ready).
    pub(super) fn transmit(
        &mut self,
        out: &mut Vec<Bytes>,
        gather: &mut Gather,
        seg_size: u64,
        budget: usize,
        stats: &mut SessionStats,
    ) -> bool {
        let mut spent = 0usize;
        let mut any = false;
        for t in self.queue.iter_mut() {
            while t.sent < t.data.len() {
                if any && spent >= budget {
                    return any;
                }
                if t.sent == 0 {
                    t.seg_size = seg_size;
                }
                let remaining = t.data.len() - t.sent;
                let n = usize::try_from(t.seg_size).map_or(remaining, |s| s.min(remaining));
                let start = t.sent == 0;
                let end = t.sent + n == t.data.len();
                let header = SegmentHeader {
                    flags: SegmentFlags::new(start, end),
                    transfer_id: t.id,
                    extensions: if start {
                        vec![ExtensionItem::transfer_length(t.data.len() as u64)]
                    } else {
                        Vec::new()
                    },
                    data_len: n as u64,
                };
                // Only fails for oversized extension lists, which we never build.
                if gather.header(&header).is_err() {
                    return any;
                }
                t.data.gather(gather, out, t.sent, t.sent + n);
                t.sent += n;
                spent += n;
                any = true;
                stats.segments_sent += 1;
            }
        }
        any
    }

    /// True when nothing is queued or awaiting acknowledgment.
    pub(super) fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// Removes every transfer not yet started; returns their tokens.
    pub(super) fn drain_unstarted(&mut self) -> Vec<u64> {
        let mut tokens = Vec::new();
        self.queue.retain(|t| {
            if t.sent == 0 {
                tokens.push(t.token);
                false
            } else {
                true
            }
        });
        tokens
    }

    /// Removes everything; returns the tokens.
    pub(super) fn drain_all(&mut self) -> Vec<u64> {
        self.queue.drain(..).map(|t| t.token).collect()
    }
}

impl Session {
    /// Queues a bundle for transfer; returns its transfer id. `token` comes back in
    /// `TransferAcked`, `TransferRefused` or `TransferFailed`, exactly one of which is
    /// eventually reported for every accepted bundle.
    ///
    /// The bundle is segmented to the smaller of the peer's segment MRU and
    /// `max_segment_size`; the first segment carries a Transfer Length extension. Segments
    /// are zero-copy slices of `bundle`: [`Session::poll_transmit_vectored`] hands them out
    /// as such, [`Session::poll_transmit`] copies them into its buffer.
    pub fn send_bundle(&mut self, bundle: Bytes, token: u64) -> Result<u64, SendError> {
        self.queue_transfer(
            BundleData {
                head: Bytes::new(),
                tail: bundle,
            },
            token,
        )
    }

    /// [`Session::send_bundle`] of the bundle `head ‖ tail`, given in two parts that are never
    /// joined: a relay's new head (previous node, bundle age, hop count) in front of the
    /// stored bytes from the payload block on. Segments are slices of the parts (a segment
    /// spanning both is two slices in [`Session::poll_transmit_vectored`]), so the payload is
    /// not copied to put the head in front of it.
    pub fn send_bundle_parts(
        &mut self,
        head: Bytes,
        tail: Bytes,
        token: u64,
    ) -> Result<u64, SendError> {
        self.queue_transfer(BundleData { head, tail }, token)
    }

    fn queue_transfer(&mut self, bundle: BundleData, token: u64) -> Result<u64, SendError> {
        match self.phase {
            Phase::Established if self.ending.is_none() => {}
            Phase::Established | Phase::Closed => return Err(SendError::Terminating),
            _ => return Err(SendError::NotEstablished),
        }
        if bundle.len() == 0 {
            return Err(SendError::Empty);
        }
        let len = bundle.len() as u64;
        if len > self.neg.peer_transfer_mru {
            if !self.cfg.exceed_peer_transfer_mru {
                return Err(SendError::TooLarge {
                    len,
                    mru: self.neg.peer_transfer_mru,
                });
            }
            self.stats.sent_over_peer_transfer_mru += 1;
        }
        if self.out.queue.len() >= self.cfg.max_queued_transfers {
            return Err(SendError::QueueFull);
        }
        let id = self.out.next_id;
        if id == u64::MAX {
            // RFC 9174, 5.2.1: the sender terminates on exhausting the id space.
            self.close(self.latest, SessTermReason::ResourceExhaustion);
            return Err(SendError::IdsExhausted);
        }
        self.out.next_id += 1;
        self.out.queue.push_back(OutTransfer {
            id,
            token,
            data: bundle,
            sent: 0,
            acked: 0,
            seg_size: 1,
        });
        Ok(id)
    }

    /// Outgoing transfers queued or awaiting acknowledgment.
    pub fn pending_transfers(&self) -> usize {
        self.out.queue.len()
    }

    pub(super) fn on_ack(&mut self, now: Duration, ack: XferAck) {
        let Some(pos) = self.out.queue.iter().position(|t| t.id == ack.transfer_id) else {
            // RFC 9174, 5.1.2: an XFER_ACK for an unknown transfer is unexpected.
            self.reject(RejectReason::Unexpected, MessageType::XferAck.code());
            return;
        };
        let (flags_ok, in_range, complete, token) = {
            let t = &self.out.queue[pos];
            let in_range = ack.acknowledged_len <= t.sent as u64 && ack.acknowledged_len >= t.acked;
            let flags_ok = ack.flags.defined() == t.flags_at(ack.acknowledged_len);
            (
                flags_ok,
                in_range,
                ack.acknowledged_len == t.data.len() as u64,
                t.token,
            )
        };
        if !in_range {
            self.deviation(Deviation::AckOutOfRange);
            return;
        }
        if !flags_ok {
            self.deviation(Deviation::AckFlags);
        }
        if complete {
            self.out.queue.remove(pos);
            self.stats.transfers_acked += 1;
            self.events.push_back(Event::TransferAcked { token });
            self.maybe_finish(now);
        } else if let Some(t) = self.out.queue.get_mut(pos) {
            t.acked = ack.acknowledged_len;
        }
    }

    pub(super) fn on_refuse(&mut self, now: Duration, r: XferRefuse) {
        let Some(pos) = self.out.queue.iter().position(|t| t.id == r.transfer_id) else {
            self.deviation(Deviation::StaleTransferId);
            return;
        };
        if let Some(t) = self.out.queue.remove(pos) {
            self.stats.transfers_refused_by_peer += 1;
            self.events.push_back(Event::TransferRefused {
                token: t.token,
                reason: r.reason,
            });
        }
        self.maybe_finish(now);
    }
}
