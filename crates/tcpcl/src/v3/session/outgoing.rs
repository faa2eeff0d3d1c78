//! Outgoing bundles: queueing, LENGTH, segmentation, and the acknowledgments and refusals
//! that refer to them by order alone.
//!
//! RFC 7242 has no transfer ids: each ACK_SEGMENT or REFUSE_BUNDLE concerns the oldest bundle
//! whose segments went out and that is neither fully acknowledged nor refused (the receiver
//! answers bundle by bundle, in order, 5.4). Bundles are sent back to back and pipelined.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;

use super::{Phase, Session};
use crate::error::SendError;
use crate::event::{Deviation, Event};
use crate::gather::Gather;
use crate::msg::SegmentFlags;
use crate::stats::SessionStats;
use crate::v3::msg::{Message, RefuseReason, SegmentHeader};

/// One bundle being sent or waiting for its acknowledgment.
#[derive(Debug)]
struct OutBundle {
    token: u64,
    data: Bytes,
    /// Octets handed to `poll_transmit` so far.
    sent: usize,
    /// Octets the peer acknowledged.
    acked: u64,
    /// Segment size of this bundle (fixed at its first segment).
    seg_size: u64,
}

impl OutBundle {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }

    /// Whether `len` is where one of this bundle's segments ends.
    fn is_boundary(&self, len: u64) -> bool {
        len == self.len() || len.is_multiple_of(self.seg_size)
    }
}

/// Outgoing bundles in the order they are sent.
#[derive(Debug, Default)]
pub(super) struct Outgoing {
    queue: VecDeque<OutBundle>,
    next_seq: u64,
}

impl Outgoing {
    /// Appends a LENGTH (with `send_length`) before each bundle's first segment and the
    /// segments themselves (headers staged in `gather`, data as zero-copy slices); true if
    /// anything was appended. Stops once `budget` data octets were appended (at least one
    /// segment goes out if any is ready).
    pub(super) fn transmit(
        &mut self,
        out: &mut Vec<Bytes>,
        gather: &mut Gather,
        seg_size: u64,
        send_length: bool,
        budget: usize,
        stats: &mut SessionStats,
    ) -> bool {
        let mut spent = 0usize;
        let mut any = false;
        for b in self.queue.iter_mut() {
            while b.sent < b.data.len() {
                if any && spent >= budget {
                    return any;
                }
                let start = b.sent == 0;
                if start {
                    b.seg_size = seg_size;
                    if send_length {
                        gather.staged(|o| Message::Length(b.len()).encode(o));
                    }
                }
                let remaining = b.data.len() - b.sent;
                let n = usize::try_from(b.seg_size).map_or(remaining, |s| s.min(remaining));
                let header = SegmentHeader {
                    flags: SegmentFlags::new(start, b.sent + n == b.data.len()),
                    data_len: n as u64,
                };
                gather.staged(|o| header.encode(o));
                gather.payload(out, b.data.slice(b.sent..b.sent + n));
                b.sent += n;
                spent += n;
                any = true;
                stats.segments_sent += 1;
            }
        }
        any
    }

    /// True when nothing is queued or awaiting an answer.
    pub(super) fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// The bundle the next acknowledgment or refusal refers to: the oldest one started.
    fn answered_next(&mut self) -> Option<&mut OutBundle> {
        self.queue.front_mut().filter(|b| b.sent > 0)
    }

    /// Removes the fully sent bundles at the front (sessions without acknowledgments).
    fn pop_fully_sent(&mut self) -> Vec<u64> {
        let mut tokens = Vec::new();
        while self.queue.front().is_some_and(|b| b.sent == b.data.len()) {
            if let Some(b) = self.queue.pop_front() {
                tokens.push(b.token);
            }
        }
        tokens
    }

    /// Removes every bundle not yet started; returns their tokens.
    pub(super) fn drain_unstarted(&mut self) -> Vec<u64> {
        let mut tokens = Vec::new();
        self.queue.retain(|b| {
            if b.sent == 0 {
                tokens.push(b.token);
                false
            } else {
                true
            }
        });
        tokens
    }

    /// Removes everything; returns the tokens.
    pub(super) fn drain_all(&mut self) -> Vec<u64> {
        self.queue.drain(..).map(|b| b.token).collect()
    }
}

impl Session {
    /// Queues a bundle; returns its sequence number in this session (v3 has no transfer ids;
    /// this is the implied one, counting from 0). `token` comes back in exactly one of
    /// `TransferAcked`, `TransferRefused` or `TransferFailed`.
    ///
    /// The bundle is sent in segments of at most `SessionConfig::v3.max_segment_size`
    /// octets, zero-copy slices of `bundle`, preceded by a LENGTH message if the peer asked
    /// for them. v3 advertises no receive limits, so no bundle is too large here.
    pub fn send_bundle(&mut self, bundle: Bytes, token: u64) -> Result<u64, SendError> {
        match self.phase {
            Phase::Established if self.ending.is_none() => {}
            Phase::Established | Phase::Closed => return Err(SendError::Terminating),
            Phase::Contact => return Err(SendError::NotEstablished),
        }
        if bundle.is_empty() {
            return Err(SendError::Empty);
        }
        if self.out.queue.len() >= self.cfg.max_queued_transfers {
            return Err(SendError::QueueFull);
        }
        let seq = self.out.next_seq;
        self.out.next_seq += 1;
        self.out.queue.push_back(OutBundle {
            token,
            data: bundle,
            sent: 0,
            acked: 0,
            seg_size: 1,
        });
        Ok(seq)
    }

    /// Outgoing bundles queued or awaiting an answer.
    pub fn pending_transfers(&self) -> usize {
        self.out.queue.len()
    }

    /// Without negotiated acknowledgments a bundle is done once its last octet is handed out.
    pub(super) fn complete_unconfirmed(&mut self) {
        for token in self.out.pop_fully_sent() {
            self.stats.transfers_acked += 1;
            self.stats.transfers_unconfirmed += 1;
            self.events.push_back(Event::TransferAcked { token });
        }
    }

    pub(super) fn on_ack(&mut self, now: Duration, len: u64) {
        if !self.neg.acks {
            // Bundles already counted as sent when written: nothing to apply it to.
            self.deviation(Deviation::UnrequestedAck);
            return;
        }
        let Some(b) = self.out.answered_next() else {
            self.deviation(Deviation::StaleTransferId);
            return;
        };
        if len <= b.acked || len > b.sent as u64 {
            self.deviation(Deviation::AckOutOfRange);
            return;
        }
        let boundary = b.is_boundary(len);
        b.acked = len;
        let complete = len == b.len();
        if !boundary {
            self.deviation(Deviation::AckNotOnSegmentBoundary);
        }
        if complete {
            if let Some(b) = self.out.queue.pop_front() {
                self.stats.transfers_acked += 1;
                self.events
                    .push_back(Event::TransferAcked { token: b.token });
            }
            self.maybe_finish(now);
        }
    }

    /// A REFUSE_BUNDLE: the oldest started bundle is dropped (its remaining segments are not
    /// sent; the peer recognises the next bundle by its S flag) and reported refused.
    pub(super) fn on_refuse(&mut self, now: Duration, reason: RefuseReason) {
        if !self.neg.refusals {
            // Honoured anyway: the peer will not acknowledge the bundle either way.
            self.deviation(Deviation::UnnegotiatedRefusal);
        }
        if self.out.answered_next().is_none() {
            self.deviation(Deviation::StaleTransferId);
            return;
        }
        if let Some(b) = self.out.queue.pop_front() {
            self.stats.transfers_refused_by_peer += 1;
            self.events.push_back(Event::TransferRefused {
                token: b.token,
                reason: reason.to_common(),
            });
        }
        self.maybe_finish(now);
    }
}
