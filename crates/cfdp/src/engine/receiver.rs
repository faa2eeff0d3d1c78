//! The receiving side of a transaction (CCSDS 727.0 §4.6 "receiving entity" procedures).
//!
//! File data is written at its offset into a partial file (`partial_dir/SOURCE-SEQ.part`)
//! and recorded in a range set, so out-of-order and duplicate segments are handled exactly
//! and hostile offsets never write beyond the declared (or the configured maximum) size. The
//! checksum runs over data as it arrives in order; what arrived out of order is read back
//! once at the end. Only a verified file is renamed to its destination name, so a partial
//! file is never reported complete.

use std::collections::HashMap;
use std::time::Duration;

use crate::checksum::Checksum;
use crate::filestore::{check_name, FilestoreError};
use crate::pdu::{
    Ack, ConditionCode, Direction, DirectiveCode, Eof, FaultHandler, FileData, FileStatus,
    FilestoreAction, FilestoreRequest, FilestoreResponse, Finished, KeepAlive, Metadata, Nak, Pdu,
    PduBody, PduHeader, Tlv, TransactionId, TransactionStatus, TransmissionMode,
};
use crate::rangeset::RangeSet;

use super::inflight::{Flight, InFlight};
use super::persist::ReceiverSnapshot;
use super::timers::Timers;
use super::{effective, Entity, Event, Hook, NakMode, RemoteConfig, Role, TransactionSummary};
use crate::pdu::EntityId;

/// Where a receiving transaction stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RecvState {
    /// Data, Metadata and EOF still expected.
    Receiving,
    /// Finished sent (class 2: awaiting its ACK).
    Finishing {
        condition: ConditionCode,
        delivery_complete: bool,
        file_status: FileStatus,
        responses: Vec<FilestoreResponse>,
        file: Option<String>,
    },
}

/// State of one receiving transaction.
#[derive(Debug)]
pub(crate) struct RecvTx {
    pub id: TransactionId,
    pub mode: TransmissionMode,
    /// Header for PDUs toward the sender (widths mirror the sender's).
    pub header: PduHeader,
    pub rc: RemoteConfig,
    pub metadata: Option<Metadata>,
    pub partial: String,
    pub partial_created: bool,
    pub received: RangeSet,
    pub checksum: Option<Checksum>,
    pub eof: Option<Eof>,
    pub state: RecvState,
    /// NAK-timer expiries that found something to ask again since the last new file data
    /// (the NAK limit counts them; the derived NAK timer backs off with them).
    pub nak_count: u32,
    pub ack_count: u32,
    pub check_count: u32,
    pub suspended: bool,
    pub overrides: HashMap<ConditionCode, FaultHandler>,
    pub timers: Timers,
    pub started: Duration,
    pub file_data_pdus: u64,
    pub duplicate_pdus: u64,
    pub naks_sent: u64,
    /// Immediate mode asked for the Metadata once already.
    pub metadata_nak_sent: bool,
    /// Ranges asked for by a NAK, until their retransmission should have arrived (never
    /// asked for again before: NAKs ask once).
    pub asked: InFlight,
    /// NAK PDUs that asked for ranges (the `batch` of [`Flight`]).
    pub nak_batch: u64,
    /// Latest batch a round-trip sample was taken from.
    pub sampled_batch: u64,
    /// Retransmissions that overtook earlier requests: (batch, offset) of retransmitted
    /// bytes that arrived, kept until the next NAK decision (see [`RecvTx::expire_overtaken`]).
    pub overtaken: Vec<(u64, u64)>,
    /// Metadata asked for by a NAK, until its copy should have arrived.
    pub metadata_asked_until: Option<Duration>,
    /// The rate at which the sender sends, measured over the first pass (until EOF, when
    /// the sender sends continuously; after it the sender idles between retransmissions):
    /// first and latest File Data PDU's arrival, the file data bytes after the first
    /// (duplicates included), and of the first pass, the bytes up to the highest offset
    /// seen and those of them never seen then (lost on the way: gaps when they opened).
    pub rx_first: Option<Duration>,
    pub rx_last: Duration,
    pub rx_bytes: u64,
    pub rx_gap_bytes: u64,
    /// End offset and arrival time of the latest File Data PDU, and the smoothed rate of
    /// back-to-back pairs (a PDU that starts where the previous one ended: nothing was lost
    /// or sent between them, so they arrived as fast as the sender sends), in bytes/s.
    pub rx_prev: Option<(u64, Duration)>,
    pub pair_rate: Option<f64>,
    /// Largest file data payload of one PDU seen (the sender cannot interrupt a PDU it is
    /// sending to serve a NAK).
    pub max_fd: u64,
    /// PDUs received for this transaction (one: it never progressed beyond the PDU that
    /// opened it, and may give way to a new transaction).
    pub pdus: u64,
    /// Partial-file bytes claimed against the budgets ([`RecvTx::claim`] when last charged).
    pub claimed: u64,
}

impl RecvTx {
    fn new(now: Duration, pdu_header: &PduHeader, rc: RemoteConfig, partial_dir: &str) -> Self {
        let id = pdu_header.transaction();
        let mut header = *pdu_header;
        header.direction = Direction::TowardSender;
        let mut timers = Timers::default();
        timers.inactivity = Some(now + rc.inactivity_timer);
        if pdu_header.mode == TransmissionMode::Acknowledged {
            timers.keep_alive = rc.keep_alive_interval.map(|i| now + i);
        }
        Self {
            id,
            mode: pdu_header.mode,
            header,
            metadata: None,
            partial: format!("{partial_dir}/{}-{}.part", id.source, id.seq),
            partial_created: false,
            received: RangeSet::new(),
            checksum: None,
            eof: None,
            state: RecvState::Receiving,
            nak_count: 0,
            ack_count: 0,
            check_count: 0,
            suspended: false,
            overrides: HashMap::new(),
            timers,
            started: now,
            file_data_pdus: 0,
            duplicate_pdus: 0,
            naks_sent: 0,
            metadata_nak_sent: false,
            asked: InFlight::default(),
            nak_batch: 0,
            sampled_batch: 0,
            overtaken: Vec::new(),
            metadata_asked_until: None,
            rx_first: None,
            rx_last: Duration::ZERO,
            rx_bytes: 0,
            rx_gap_bytes: 0,
            rx_prev: None,
            pair_rate: None,
            max_fd: 0,
            pdus: 0,
            claimed: 0,
            rc,
        }
    }

    /// Partial-file bytes this reception claims: its declared size (EOF, else Metadata), or
    /// the highest offset received while none is known, whichever is larger.
    fn claim(&self, end: u64) -> u64 {
        self.known_size()
            .unwrap_or(0)
            .max(self.received.upper_bound())
            .max(end)
    }

    /// File size from EOF, else Metadata.
    fn known_size(&self) -> Option<u64> {
        self.eof.as_ref().map(|e| e.file_size).or_else(|| {
            self.metadata
                .as_ref()
                .map(|m| m.file_size)
                .filter(|&s| s > 0)
        })
    }

    /// Time for the sender to send `bytes` at the rate it sent the first pass (zero while
    /// that rate is unknown): the rate data arrived at, divided by the share of the first
    /// pass that arrived (the channel erases retransmissions as it erased the first pass).
    ///
    /// The rate is that of back-to-back pairs when there were some, else the arrival rate
    /// over the first pass divided by the share of it that arrived. The result is capped at
    /// `cap`.
    fn arrival_time(&self, bytes: u64, cap: Duration) -> Duration {
        let rate = self.pair_rate.or(match self.rx_first {
            Some(first) if self.rx_last > first && self.rx_bytes > 0 => {
                let elapsed = (self.rx_last - first).as_secs_f64();
                let upper = self.received.upper_bound().max(1);
                let delivered = (1.0 - self.rx_gap_bytes as f64 / upper as f64).max(0.001);
                Some(self.rx_bytes as f64 / elapsed / delivered)
            }
            _ => None,
        });
        match rate {
            Some(r) if r > 0.0 => {
                Duration::from_secs_f64((bytes as f64 / r).min(cap.as_secs_f64()))
            }
            _ => Duration::ZERO,
        }
    }

    /// End of the data a NAK may cover now: the file size after EOF, else the highest
    /// offset received.
    fn nak_end(&self) -> u64 {
        let end = self
            .known_size()
            .unwrap_or_else(|| self.received.upper_bound());
        if self.eof.is_some() {
            end
        } else {
            self.received
                .upper_bound()
                .min(end.max(self.received.upper_bound()))
        }
    }

    /// What a NAK issued now asks for: (0, 0) for the Metadata, then every missing range
    /// whose retransmission, asked for earlier, cannot be on its way any more. Also returns
    /// the missing bytes left out because they can.
    fn nak_segments(&self, now: Duration) -> (Vec<(u64, u64)>, u64) {
        let mut segments = Vec::new();
        if self.metadata.is_none() && self.metadata_asked_until.is_none_or(|u| u <= now) {
            segments.push((0, 0));
        }
        let mut skipped = 0;
        for r in self.received.missing_within(0..self.nak_end()) {
            let len = r.end - r.start;
            let ask = self.asked.not_in_flight(now, r);
            skipped += len - ask.iter().map(|a| a.end - a.start).sum::<u64>();
            segments.extend(ask.into_iter().map(|a| (a.start, a.end)));
        }
        (segments, skipped)
    }

    /// A retransmitted byte at `offset`, asked for by NAK number `batch`, arrived. The sender
    /// serves the ranges a NAK asks for lowest offset first, and those of earlier NAKs before
    /// later ones' new ranges, so every range asked for by NAK `batch` or earlier below
    /// `offset` has either arrived or is not coming (its copy or its NAK was lost): it no
    /// longer waits for its deadline, which is an estimate (from a round trip that may not
    /// have been measured yet, and an arrival rate). Records the fact; returns whether it
    /// may overtake a range still waiting.
    fn note_overtaking(&mut self, now: Duration, batch: u64, offset: u64) -> bool {
        if self
            .overtaken
            .iter()
            .any(|&(b, o)| b >= batch && o >= offset)
        {
            return false;
        }
        self.overtaken
            .retain(|&(b, o)| !(b <= batch && o <= offset));
        self.overtaken.push((batch, offset));
        self.asked.any_below(now, offset, batch)
    }

    /// Apply what [`RecvTx::note_overtaking`] recorded: the overtaken ranges may be asked
    /// for again. Returns the bytes concerned.
    fn expire_overtaken(&mut self, now: Duration) -> u64 {
        let mut bytes = 0;
        for (batch, offset) in std::mem::take(&mut self.overtaken) {
            bytes += self.asked.expire_below(now, offset, batch);
        }
        bytes
    }

    /// Whether anything is missing (Metadata, or data below what a NAK may cover).
    fn anything_missing(&self) -> bool {
        self.metadata.is_none()
            || self.eof.as_ref().map_or(
                !self
                    .received
                    .missing_within(0..self.received.upper_bound())
                    .is_empty(),
                |e| !self.received.covers_prefix(e.file_size),
            )
    }

    fn dest_name(&self) -> Option<String> {
        self.metadata
            .as_ref()
            .map(|m| String::from_utf8_lossy(&m.dest_file).into_owned())
    }

    pub(crate) fn summary(&self, now: Duration) -> TransactionSummary {
        TransactionSummary {
            peer: self.id.source,
            file_size: self.known_size().unwrap_or(0),
            bytes: self.received.covered(),
            bytes_retransmitted: 0,
            file_data_pdus: self.file_data_pdus,
            duplicate_file_data_pdus: self.duplicate_pdus,
            naks: self.naks_sent,
            progress: self.received.prefix(),
            started: self.started,
            ended: now,
        }
    }

    pub(crate) fn snapshot(&self) -> Option<super::Snapshot> {
        if self.mode != TransmissionMode::Acknowledged {
            return None;
        }
        Some(super::Snapshot::Receiver(Box::new(ReceiverSnapshot {
            id: self.id,
            header: self.header,
            metadata: self.metadata.clone(),
            partial: self.partial.clone(),
            partial_created: self.partial_created,
            received: self.received.ranges().to_vec(),
            eof: self.eof.clone(),
            finishing: match &self.state {
                RecvState::Receiving => None,
                RecvState::Finishing {
                    condition,
                    delivery_complete,
                    file_status,
                    file,
                    ..
                } => Some((*condition, *delivery_complete, *file_status, file.clone())),
            },
            suspended: self.suspended,
        })))
    }

    pub(crate) fn restore(now: Duration, s: ReceiverSnapshot, rc: RemoteConfig) -> Self {
        let mut header = s.header;
        header.direction = Direction::TowardSender;
        let mut tx = RecvTx::new(now, &header, rc, "");
        tx.header = header;
        tx.partial = s.partial;
        tx.partial_created = s.partial_created;
        tx.received = RangeSet::from_ranges(s.received);
        tx.checksum = s
            .metadata
            .as_ref()
            .and_then(|m| Checksum::new(m.checksum_type));
        tx.overrides = override_map(s.metadata.as_ref());
        tx.metadata = s.metadata;
        tx.eof = s.eof;
        tx.suspended = s.suspended;
        // It progressed before the restart: never one to give way to a new transaction.
        tx.pdus = 2;
        if let Some((condition, delivery_complete, file_status, file)) = s.finishing {
            tx.state = RecvState::Finishing {
                condition,
                delivery_complete,
                file_status,
                responses: Vec::new(),
                file,
            };
        }
        if tx.suspended {
            tx.timers.freeze(now);
        }
        tx
    }
}

/// The NAK mode a dtnkit sender asked for (see [`super::NAK_HINT_PREFIX`]).
pub(super) fn nak_hint(md: &Metadata) -> Option<NakMode> {
    md.options.iter().find_map(|t| match t {
        Tlv::MessageToUser(m) => m
            .strip_prefix(super::NAK_HINT_PREFIX)
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse().ok()),
        _ => None,
    })
}

fn override_map(md: Option<&Metadata>) -> HashMap<ConditionCode, FaultHandler> {
    md.map(|m| {
        m.options
            .iter()
            .filter_map(|t| match t {
                Tlv::FaultHandlerOverride { condition, handler } => Some((*condition, *handler)),
                _ => None,
            })
            .collect()
    })
    .unwrap_or_default()
}

impl Entity {
    /// A PDU toward the receiver (Metadata, File Data, EOF, Prompt, ACK of Finished).
    pub(super) fn receiver_input(&mut self, now: Duration, pdu: Pdu) {
        let id = pdu.header.transaction();
        if !self.receivers.contains_key(&id) {
            if let Some(closed) = self.closed.get(&(Role::Receiver, id)).copied() {
                self.stats.stray_pdus += 1;
                // A retransmitted EOF of a transaction we closed: ACK it again.
                if let PduBody::Eof(eof) = &pdu.body {
                    if closed.mode == TransmissionMode::Acknowledged {
                        let ack =
                            ack_eof(&closed.header, eof.condition, TransactionStatus::Terminated);
                        self.queue(id.source, ack, Hook::None);
                    }
                }
                return;
            }
            let starts = matches!(
                pdu.body,
                PduBody::Metadata(_) | PduBody::FileData(_) | PduBody::Eof(_)
            );
            if !starts {
                self.stats.stray_pdus += 1;
                return;
            }
            if !self.admit(now, id.source) {
                self.stats.refused_transactions += 1;
                return;
            }
            let rc = self.remote(id.source).cfg.clone();
            let mut tx = RecvTx::new(now, &pdu.header, rc, &self.cfg.partial_dir);
            if !self.link_up(id.source) {
                tx.timers.freeze(now);
            }
            self.receivers.insert(id, tx);
            self.events.push_back(Event::TransactionStarted {
                id,
                role: Role::Receiver,
            });
        }
        let tx = self.receivers.get_mut(&id).expect("present");
        tx.pdus += 1;
        tx.timers.inactivity = Some(now + effective(&self.remotes, id.source, &tx.rc).inactivity);
        match pdu.body {
            PduBody::Metadata(md) => self.on_metadata(now, id, md),
            PduBody::FileData(fd) => self.on_file_data(now, id, fd),
            PduBody::Eof(eof) => self.on_eof(now, id, eof),
            PduBody::Prompt(p) => {
                if p.keep_alive {
                    self.queue_keep_alive(id);
                } else {
                    self.issue_full_nak(now, id, true);
                }
            }
            PduBody::Ack(ack) if ack.directive == DirectiveCode::Finished => {
                if matches!(tx.state, RecvState::Finishing { .. }) {
                    self.end_receiver(now, id);
                }
            }
            _ => self.stats.stray_pdus += 1,
        }
    }

    fn on_metadata(&mut self, now: Duration, id: TransactionId, md: Metadata) {
        let max = self.cfg.max_file_size;
        let tx = self.receivers.get_mut(&id).expect("present");
        if tx.metadata.is_some() {
            return; // duplicate (CFDP-repeat, or a NAK-requested copy crossed the first)
        }
        // An empty destination name means "no file" (a Metadata carrying only messages or
        // filestore requests): acceptable only with no file data at all. Anything else must
        // be a name that stays beneath the root.
        let name_ok = if md.dest_file.is_empty() {
            md.source_file.is_empty() && md.file_size == 0 && tx.received.is_empty()
        } else {
            // Nor may a peer name a file among the partial files of other transactions.
            check_name(&md.dest_file).is_ok_and(|n| {
                n.split('/').find(|c| !c.is_empty() && *c != ".")
                    != Some(self.cfg.partial_dir.as_str())
            })
        };
        let size = md.file_size;
        let messages = md
            .options
            .iter()
            .filter_map(|t| match t {
                Tlv::MessageToUser(m) => Some(m.clone()),
                _ => None,
            })
            .collect();
        self.events.push_back(Event::MetadataReceived {
            id,
            source_file: String::from_utf8_lossy(&md.source_file).into_owned(),
            dest_file: String::from_utf8_lossy(&md.dest_file).into_owned(),
            file_size: md.file_size,
            messages,
        });
        tx.overrides = override_map(Some(&md));
        if self.cfg.honour_nak_hint {
            if let Some(mode) = nak_hint(&md) {
                tx.rc.nak_mode = mode;
            }
        }
        tx.checksum = Checksum::new(md.checksum_type);
        tx.metadata = Some(md);
        self.dirty.insert((Role::Receiver, id));
        if !name_ok {
            self.stats.names_refused += 1;
            self.refuse(now, id, ConditionCode::FilestoreRejection);
            return;
        }
        let tx = self.receivers.get_mut(&id).expect("present");
        if size > max || (size > 0 && tx.received.upper_bound() > size) {
            self.fault(now, Role::Receiver, id, ConditionCode::FileSizeError);
            return;
        }
        if !self.charge(id, 0) {
            self.refuse(now, id, ConditionCode::FilestoreRejection);
            return;
        }
        self.check_complete(now, id);
    }

    fn on_file_data(&mut self, now: Duration, id: TransactionId, fd: FileData) {
        let max = self.cfg.max_file_size;
        let tx = self.receivers.get_mut(&id).expect("present");
        tx.file_data_pdus += 1;
        self.stats.file_data_bytes_received += fd.data.len() as u64;
        if tx.rx_first.is_none() {
            tx.rx_first = Some(now);
            tx.rx_gap_bytes = fd.offset;
        } else if tx.eof.is_none() {
            tx.rx_bytes += fd.data.len() as u64;
            tx.rx_last = now;
            tx.rx_gap_bytes += fd.offset.saturating_sub(tx.received.upper_bound());
        }
        let end = fd.offset.saturating_add(fd.data.len() as u64);
        if let Some((prev_end, at)) = tx.rx_prev {
            if prev_end == fd.offset && now > at {
                let sample = fd.data.len() as f64 / (now - at).as_secs_f64();
                tx.pair_rate = Some(tx.pair_rate.map_or(sample, |r| (7.0 * r + sample) / 8.0));
            }
        }
        tx.rx_prev = Some((end, now));
        tx.max_fd = tx.max_fd.max(fd.data.len() as u64);
        if tx.state != RecvState::Receiving || fd.data.is_empty() {
            return;
        }
        if tx.metadata.as_ref().is_some_and(|m| m.dest_file.is_empty()) {
            // File data for a transaction whose Metadata named no file: nowhere to put it.
            self.stats.names_refused += 1;
            self.refuse(now, id, ConditionCode::FilestoreRejection);
            return;
        }
        let end = fd.offset.saturating_add(fd.data.len() as u64);
        let limit = tx.known_size().unwrap_or(max).min(max);
        if end > limit || fd.offset.checked_add(fd.data.len() as u64).is_none() {
            self.fault(now, Role::Receiver, id, ConditionCode::FileSizeError);
            return;
        }
        if tx.metadata.is_none() && end > self.cfg.max_bytes_before_metadata {
            // Before the Metadata, neither the name nor the size is known: keep only a small
            // prefix (class 2 asks for the rest again once the Metadata is in).
            self.stats.file_data_dropped_before_metadata += 1;
            if tx.mode == TransmissionMode::Acknowledged
                && tx.rc.nak_mode == NakMode::Immediate
                && !tx.metadata_nak_sent
            {
                tx.metadata_nak_sent = true;
                let nak = Pdu {
                    header: tx.header,
                    body: PduBody::Nak(Nak {
                        start_of_scope: 0,
                        end_of_scope: 0,
                        segments: vec![(0, 0)],
                    }),
                };
                self.queue(id.source, nak, Hook::NakSent(id));
            }
            return;
        }
        if end > tx.claimed && !self.charge(id, end) {
            self.refuse(now, id, ConditionCode::FilestoreRejection);
            return;
        }
        let tx = self.receivers.get_mut(&id).expect("present");
        let upper_before = tx.received.upper_bound();
        let new = tx.received.insert_new(fd.offset..end);
        if new.is_empty() {
            tx.duplicate_pdus += 1;
            return;
        }
        if !tx.partial_created {
            if let Err(e) = self.fs.create(&tx.partial) {
                let c = filestore_condition(&e);
                self.fault(now, Role::Receiver, id, c);
                return;
            }
            tx.partial_created = true;
        }
        for piece in &new {
            let from = (piece.start - fd.offset) as usize;
            let to = (piece.end - fd.offset) as usize;
            let data = &fd.data[from..to];
            if let Err(e) = self.fs.write_at(&tx.partial, piece.start, data) {
                // Not written: forget it so it is asked for again if the fault is ignored.
                tx.received.remove(piece.start..piece.end);
                let c = filestore_condition(&e);
                self.fault(now, Role::Receiver, id, c);
                return;
            }
            if let Some(c) = tx.checksum.as_mut() {
                if c.offset() == piece.start {
                    c.update(data);
                }
            }
        }
        tx.nak_count = 0; // progress
                          // The first byte that arrives of a NAK's request, if it was asked for once and with
                          // nothing else outstanding, measures the round trip NAK → retransmitted data.
        let mut sample = None;
        let mut overtook = false;
        // Before the first clean sample, a request asked for the first time gives a loose one:
        // it may include the sender's time on other requests, so it only stands in for the
        // round trip while none was measured, and only below the configured bound (the
        // timers are clamped to it) — which every deadline and timer would otherwise wait
        // for when no request was ever alone (a sender that overruns the path keeps the
        // receiver asking all the time).
        let unmeasured = self
            .remotes
            .get(&id.source)
            .is_none_or(|r| r.rtt.samples() == 0);
        for piece in &new {
            if let Some((_, f)) = tx.asked.find(piece.start) {
                if (f.clean || (unmeasured && f.first)) && f.batch > tx.sampled_batch {
                    tx.sampled_batch = f.batch;
                    sample = Some((now.saturating_sub(f.at), f.clean));
                }
                overtook |= tx.note_overtaking(now, f.batch, piece.start);
            }
        }
        match sample {
            Some((rtt, true)) => self.rtt_sample(id.source, rtt),
            Some((rtt, false)) => self.rtt_sample_loose(id.source, rtt),
            None => {}
        }
        let tx = self.receivers.get_mut(&id).expect("present");
        if overtook {
            // Look again soon (a NAK timer's minimum, so that the overtaken ranges of one
            // burst of retransmissions go out in one NAK), not a round-trip estimate later.
            let soon = now + tx.rc.adaptive.min_timer;
            if let Some(t) = tx.timers.nak.as_mut() {
                *t = (*t).min(soon);
            }
        }
        self.dirty.insert((Role::Receiver, id));
        // Immediate NAK of a new gap (and of a missing Metadata, once).
        if tx.mode == TransmissionMode::Acknowledged && tx.rc.nak_mode == NakMode::Immediate {
            let mut segments = Vec::new();
            if tx.metadata.is_none() && !tx.metadata_nak_sent {
                tx.metadata_nak_sent = true;
                segments.push((0, 0));
            }
            if fd.offset > upper_before {
                // A new gap, or after EOF a retransmission beyond everything received: only
                // what no NAK asked for yet.
                let ask = tx.asked.not_in_flight(now, upper_before..fd.offset);
                segments.extend(ask.into_iter().map(|r| (r.start, r.end)));
            }
            if !segments.is_empty() {
                let nak = Pdu {
                    header: tx.header,
                    body: PduBody::Nak(Nak {
                        start_of_scope: upper_before.min(segments[0].0),
                        end_of_scope: fd.offset.max(upper_before),
                        segments,
                    }),
                };
                self.queue(id.source, nak, Hook::NakSent(id));
            }
        }
        self.check_complete(now, id);
    }

    fn on_eof(&mut self, now: Duration, id: TransactionId, eof: Eof) {
        let tx = self.receivers.get_mut(&id).expect("present");
        if tx.mode == TransmissionMode::Acknowledged {
            let status = if tx.state == RecvState::Receiving {
                TransactionStatus::Active
            } else {
                TransactionStatus::Terminated
            };
            let ack = ack_eof(&tx.header, eof.condition, status);
            self.queue(id.source, ack, Hook::None);
        }
        let tx = self.receivers.get_mut(&id).expect("present");
        if eof.condition != ConditionCode::NoError {
            // The sender cancelled: notice of cancellation, nothing more to send.
            let c = eof.condition;
            tx.state = RecvState::Finishing {
                condition: c,
                delivery_complete: false,
                file_status: FileStatus::DiscardedDeliberately,
                responses: Vec::new(),
                file: None,
            };
            self.end_receiver(now, id);
            return;
        }
        if tx.eof.is_some() || tx.state != RecvState::Receiving {
            return; // retransmitted EOF: ACKed above
        }
        let first_eof = tx.eof.is_none();
        tx.eof = Some(eof.clone());
        if first_eof {
            self.events.push_back(Event::EofReceived { id });
        }
        self.dirty.insert((Role::Receiver, id));
        let tx = self.receivers.get_mut(&id).expect("present");
        if tx.received.upper_bound() > eof.file_size
            || eof.file_size > self.cfg.max_file_size
            || tx
                .metadata
                .as_ref()
                .is_some_and(|m| m.file_size > 0 && m.file_size != eof.file_size)
        {
            self.fault(now, Role::Receiver, id, ConditionCode::FileSizeError);
            return;
        }
        let tx = self.receivers.get_mut(&id).expect("present");
        if eof.file_size > 0 && tx.metadata.as_ref().is_some_and(|m| m.dest_file.is_empty()) {
            self.stats.names_refused += 1;
            self.refuse(now, id, ConditionCode::FilestoreRejection);
            return;
        }
        if !self.charge(id, 0) {
            self.refuse(now, id, ConditionCode::FilestoreRejection);
            return;
        }
        if self.check_complete(now, id) {
            return;
        }
        let tx = self.receivers.get_mut(&id).expect("present");
        match tx.mode {
            TransmissionMode::Acknowledged => {
                let async_down =
                    tx.rc.nak_mode == NakMode::Asynchronous && !self.link_up(id.source);
                if !async_down && !self.issue_full_nak(now, id, false) {
                    // Everything missing is on its way already: the NAK timer (started by
                    // the NAKs that asked for it) looks again later.
                    let tx = self.receivers.get_mut(&id).expect("present");
                    if tx.timers.nak.is_none() {
                        let t = effective(&self.remotes, id.source, &tx.rc);
                        tx.timers.nak = Some(now + t.nak_after(&tx.rc, tx.nak_count));
                    }
                }
            }
            TransmissionMode::Unacknowledged => {
                tx.timers.check = Some(now + tx.rc.check_timer);
            }
        }
    }

    /// Queue NAKs for everything missing (split to fit `max_pdu_size`). `forced`: also
    /// when nothing is missing (answer to a Prompt: an empty NAK reports progress).
    ///
    /// NAKs ask once: a range asked for earlier is left out while its retransmission can
    /// still be on its way (see [`Entity::nak_sent`]). A NAK that would ask for nothing is
    /// not sent unless `forced`. Returns whether a NAK was queued.
    pub(super) fn issue_full_nak(
        &mut self,
        now: Duration,
        id: TransactionId,
        forced: bool,
    ) -> bool {
        let Some(tx) = self.receivers.get_mut(&id) else {
            return false;
        };
        if tx.mode != TransmissionMode::Acknowledged || tx.state != RecvState::Receiving {
            return false;
        }
        self.stats.nak_bytes_overtaken += tx.expire_overtaken(now);
        let end = tx.nak_end();
        let (segments, skipped) = tx.nak_segments(now);
        if segments.is_empty() && !forced {
            return false;
        }
        self.stats.nak_bytes_in_flight += skipped;
        let fss = if tx.header.large_file { 8 } else { 4 };
        let overhead = tx.header_len_estimate() + 1 + 2 * fss + 2;
        let per_pdu = (tx.rc.max_pdu_size.saturating_sub(overhead) / (2 * fss)).max(1);
        let mut pdus = Vec::new();
        let mut scope_start = 0u64;
        let chunks: Vec<&[(u64, u64)]> = if segments.is_empty() {
            vec![&[][..]]
        } else {
            segments.chunks(per_pdu).collect()
        };
        let n = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let scope_end = if i + 1 == n {
                end
            } else {
                chunk.last().map_or(end, |s| s.1)
            };
            pdus.push(Pdu {
                header: tx.header,
                body: PduBody::Nak(Nak {
                    start_of_scope: scope_start,
                    end_of_scope: scope_end,
                    segments: chunk.to_vec(),
                }),
            });
            scope_start = scope_end;
        }
        // A fresh full NAK supersedes queued ones of this transaction.
        self.signals.retain(|o| {
            !(o.pdu.header.transaction() == id
                && matches!(o.pdu.body, PduBody::Nak(_))
                && o.pdu.header.direction == Direction::TowardSender)
        });
        for p in pdus {
            self.queue(id.source, p, Hook::NakSent(id));
        }
        true
    }

    /// A NAK of receiving transaction `id` left asking for `segments`: record each missing
    /// range with the time by which its retransmission should have arrived — now + RTO (the
    /// NAK timer before the first sample) + the time the bytes asked for before it, in this
    /// NAK and still outstanding from earlier ones, take to arrive at the rate data has been
    /// arriving — and start the NAK timer.
    pub(super) fn nak_sent(&mut self, now: Duration, id: TransactionId, segments: &[(u64, u64)]) {
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        tx.naks_sent += 1;
        let timers = effective(&self.remotes, id.source, &tx.rc);
        tx.timers.nak = Some(now + timers.nak_after(&tx.rc, tx.nak_count));
        if segments.is_empty() {
            return;
        }
        let rto = self
            .remotes
            .get(&id.source)
            .and_then(|r| r.rtt.rto())
            .unwrap_or(timers.nak);
        // The wait for the sender's queue is at most 16 RTOs (or NAK timers) and half the
        // inactivity timer: asking again for a range the sender still has queued costs it
        // nothing (its retransmission set holds each byte once), while a rate estimated too
        // low (under extreme loss little of what the sender sends arrives to measure it)
        // would otherwise leave both ends silent.
        let cap = (rto.max(timers.nak) * 16).min(timers.inactivity / 2);
        let received = &tx.received;
        tx.asked
            .retain(|k, f| !received.missing_within(k..f.end).is_empty());
        // Clean: nothing else outstanding (a sample would include the time the sender spends
        // on it) and nothing asked for again (Karn).
        let clean = tx.asked.is_empty();
        // The PDU the sender is sending when the NAK arrives goes first: it is not interrupted.
        let mut outstanding: u64 = tx.max_fd
            + tx.asked
                .iter()
                .filter(|(_, f)| f.until > now)
                .map(|(k, f)| {
                    received
                        .missing_within(k..f.end)
                        .iter()
                        .map(|r| r.end - r.start)
                        .sum::<u64>()
                })
                .sum::<u64>();
        tx.nak_batch += 1;
        let batch = tx.nak_batch;
        for &(s, e) in segments {
            if s == 0 && e == 0 {
                tx.metadata_asked_until = Some(now + rto);
                continue;
            }
            for r in tx.received.missing_within(s..e.max(s)) {
                outstanding += r.end - r.start;
                let until = now + rto + tx.arrival_time(outstanding, cap);
                // Asked for the first time: no entry overlaps it, whatever its deadline.
                let first = !tx.asked.overlaps(&r);
                tx.asked.insert(
                    r.clone(),
                    Flight {
                        end: r.end,
                        at: now,
                        until,
                        batch,
                        clean,
                        first,
                    },
                );
            }
        }
    }

    fn queue_keep_alive(&mut self, id: TransactionId) {
        let Some(tx) = self.receivers.get(&id) else {
            return;
        };
        let pdu = Pdu {
            header: tx.header,
            body: PduBody::KeepAlive(KeepAlive {
                progress: tx.received.prefix(),
            }),
        };
        self.queue(id.source, pdu, Hook::None);
    }

    /// If Metadata, EOF and every byte are in, verify and deliver. Returns true if the
    /// transaction moved on to Finished (or a fault).
    fn check_complete(&mut self, now: Duration, id: TransactionId) -> bool {
        let Some(tx) = self.receivers.get_mut(&id) else {
            return true;
        };
        if tx.state != RecvState::Receiving {
            return true;
        }
        let (Some(md), Some(eof)) = (tx.metadata.clone(), tx.eof.clone()) else {
            return false;
        };
        if !tx.received.covers_prefix(eof.file_size) {
            return false;
        }
        tx.timers.nak = None;
        tx.timers.check = None;
        // Checksum.
        let Some(mut cks) = tx.checksum.take() else {
            self.fault(
                now,
                Role::Receiver,
                id,
                ConditionCode::UnsupportedChecksumType,
            );
            // Ignored: deliver without verification.
            return self.deliver_if_still_receiving(now, id, md);
        };
        if !tx.partial_created {
            if let Err(e) = self.fs.create(&tx.partial) {
                let c = filestore_condition(&e);
                self.fault(now, Role::Receiver, id, c);
                return true;
            }
            tx.partial_created = true;
        }
        if let Err(e) = super::checksum_tail(self.fs.as_mut(), &tx.partial, &mut cks, eof.file_size)
        {
            let c = filestore_condition(&e);
            self.fault(now, Role::Receiver, id, c);
            return true;
        }
        let value = cks.value();
        if let Some(tx) = self.receivers.get_mut(&id) {
            tx.checksum = Some(cks);
        }
        if value != eof.checksum {
            self.fault(now, Role::Receiver, id, ConditionCode::FileChecksumFailure);
            return self.deliver_if_still_receiving(now, id, md);
        }
        self.deliver(now, id, md);
        true
    }

    fn deliver_if_still_receiving(
        &mut self,
        now: Duration,
        id: TransactionId,
        md: Metadata,
    ) -> bool {
        match self.receivers.get(&id) {
            Some(tx) if tx.state == RecvState::Receiving && !tx.suspended => {
                self.deliver(now, id, md);
                true
            }
            _ => true,
        }
    }

    /// Move the verified file to its name, run the filestore requests, send Finished.
    fn deliver(&mut self, now: Duration, id: TransactionId, md: Metadata) {
        let tx = self.receivers.get_mut(&id).expect("present");
        let mut file = None;
        let mut status = FileStatus::Retained;
        let mut condition = ConditionCode::NoError;
        let file_size = tx.eof.as_ref().map_or(0, |e| e.file_size);
        if md.dest_file.is_empty() && (file_size > 0 || tx.received.covered() > 0) {
            // Never reported delivered with no file (caught earlier; kept as the last guard).
            if tx.partial_created {
                self.fs.close(&tx.partial);
                let _ = self.fs.remove_file(&tx.partial);
                tx.partial_created = false;
            }
            self.stats.names_refused += 1;
            condition = ConditionCode::FilestoreRejection;
            status = FileStatus::DiscardedFilestoreRejection;
        } else if !md.dest_file.is_empty() {
            let dest = tx.dest_name().unwrap_or_default();
            let moved = if tx.partial_created {
                self.fs
                    .sync(&tx.partial)
                    .and_then(|_| self.fs.rename(&tx.partial, &dest))
            } else {
                self.fs.create(&dest)
            };
            match moved {
                Ok(()) => {
                    tx.partial_created = false;
                    file = Some(dest);
                }
                Err(e) => {
                    condition = filestore_condition(&e);
                    status = FileStatus::DiscardedFilestoreRejection;
                }
            }
        } else {
            status = FileStatus::Unreported;
        }
        let responses = if condition == ConditionCode::NoError {
            md.options
                .iter()
                .filter_map(|t| match t {
                    Tlv::FilestoreRequest(r) => Some(self.filestore_request(r)),
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        if condition != ConditionCode::NoError {
            let handler = self.handler_for(Role::Receiver, id, condition);
            self.stats.faults += 1;
            self.events.push_back(Event::Fault {
                id,
                condition,
                handler,
            });
        }
        self.finish(
            now,
            id,
            condition,
            condition == ConditionCode::NoError,
            status,
            responses,
            file,
        );
    }

    fn filestore_request(&mut self, r: &FilestoreRequest) -> FilestoreResponse {
        let first = check_name(&r.first).map(str::to_owned);
        let second = r
            .second
            .as_deref()
            .map(|s| check_name(s).map(str::to_owned));
        let result: Result<(), FilestoreError> = (|| {
            let a = first.clone()?;
            let b = || -> Result<String, FilestoreError> {
                second.clone().unwrap_or_else(|| {
                    Err(FilestoreError::InvalidName {
                        name: String::new(),
                        why: "second file name missing",
                    })
                })
            };
            match r.action {
                FilestoreAction::CreateFile => self.fs.create(&a),
                FilestoreAction::DeleteFile => self.fs.remove_file(&a),
                FilestoreAction::RenameFile => {
                    let b = b()?;
                    if self.fs.exists(&b) {
                        return Err(FilestoreError::AlreadyExists(b));
                    }
                    self.fs.rename(&a, &b)
                }
                FilestoreAction::AppendFile => self.fs.append(&a, &b()?),
                FilestoreAction::ReplaceFile => {
                    let b = b()?;
                    let mut data = Vec::new();
                    let n = self.fs.size(&b)?;
                    data.resize(n as usize, 0);
                    self.fs.read_at(&b, 0, &mut data)?;
                    self.fs.create(&a)?;
                    self.fs.write_at(&a, 0, &data)
                }
                FilestoreAction::CreateDirectory => self.fs.create_dir(&a),
                FilestoreAction::RemoveDirectory => self.fs.remove_dir(&a),
                FilestoreAction::DenyFile => match self.fs.remove_file(&a) {
                    Err(FilestoreError::NotFound(_)) => Ok(()),
                    other => other,
                },
                FilestoreAction::DenyDirectory => match self.fs.remove_dir(&a) {
                    Err(FilestoreError::NotFound(_)) => Ok(()),
                    other => other,
                },
            }
        })();
        let (status, message) = match &result {
            Ok(()) => (0, Vec::new()),
            Err(e) => (filestore_status(r.action, e), e.to_string().into_bytes()),
        };
        FilestoreResponse {
            action: r.action,
            status,
            first: r.first.clone(),
            second: r.second.clone(),
            message: message.into_iter().take(255).collect(),
        }
    }

    /// Enter the Finishing state: send Finished when the class asks for it, else end now.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        now: Duration,
        id: TransactionId,
        condition: ConditionCode,
        delivery_complete: bool,
        file_status: FileStatus,
        responses: Vec<FilestoreResponse>,
        file: Option<String>,
    ) {
        let tx = self.receivers.get_mut(&id).expect("present");
        let send_finished = tx.mode == TransmissionMode::Acknowledged
            || tx.metadata.as_ref().is_some_and(|m| m.closure_requested);
        tx.state = RecvState::Finishing {
            condition,
            delivery_complete,
            file_status,
            responses: responses.clone(),
            file,
        };
        tx.timers.nak = None;
        tx.timers.check = None;
        tx.timers.keep_alive = None;
        tx.ack_count = 0;
        self.signals.retain(|o| {
            !(o.pdu.header.transaction() == id
                && o.pdu.header.direction == Direction::TowardSender
                && matches!(o.pdu.body, PduBody::Nak(_) | PduBody::KeepAlive(_)))
        });
        self.dirty.insert((Role::Receiver, id));
        if send_finished {
            let pdu = Pdu {
                header: tx.header,
                body: PduBody::Finished(Finished {
                    condition,
                    delivery_complete,
                    file_status,
                    filestore_responses: responses,
                    fault_location: (condition != ConditionCode::NoError)
                        .then_some(self.cfg.local_id),
                }),
            };
            self.queue(id.source, pdu, Hook::FinishedSent(id));
        } else {
            self.end_receiver(now, id);
        }
    }

    pub(super) fn finished_sent(&mut self, now: Duration, id: TransactionId) {
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        match tx.mode {
            TransmissionMode::Acknowledged => {
                tx.timers.ack = Some(now + effective(&self.remotes, id.source, &tx.rc).ack)
            }
            TransmissionMode::Unacknowledged => self.end_receiver(now, id),
        }
    }

    /// Notice of cancellation from the receiving side.
    pub(super) fn cancel_receiver(
        &mut self,
        now: Duration,
        id: TransactionId,
        condition: ConditionCode,
    ) {
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        if tx.state != RecvState::Receiving {
            // Already finishing: a fault now (e.g. ACK limit on Finished) abandons.
            self.abandon_tx(now, Role::Receiver, id, condition);
            return;
        }
        tx.suspended = false;
        tx.timers.thaw(now);
        let keep = self.cfg.keep_incomplete && tx.mode == TransmissionMode::Unacknowledged;
        let (status, file) = if keep && tx.partial_created {
            (FileStatus::Retained, Some(tx.partial.clone()))
        } else {
            if tx.partial_created {
                self.fs.close(&tx.partial);
                let _ = self.fs.remove_file(&tx.partial);
                tx.partial_created = false;
            }
            (FileStatus::DiscardedDeliberately, None)
        };
        let complete = tx
            .eof
            .as_ref()
            .is_some_and(|e| tx.received.covers_prefix(e.file_size));
        self.finish(now, id, condition, complete, status, Vec::new(), file);
    }

    pub(super) fn receiver_timeout(&mut self, now: Duration, id: TransactionId) {
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        let frozen = tx.timers.is_frozen();
        if Timers::expired(&mut tx.timers.ack, frozen, now) {
            tx.ack_count += 1;
            if tx.ack_count > tx.rc.ack_limit {
                self.fault(
                    now,
                    Role::Receiver,
                    id,
                    ConditionCode::PositiveAckLimitReached,
                );
                return;
            }
            if let RecvState::Finishing {
                condition,
                delivery_complete,
                file_status,
                responses,
                ..
            } = &tx.state
            {
                let pdu = Pdu {
                    header: tx.header,
                    body: PduBody::Finished(Finished {
                        condition: *condition,
                        delivery_complete: *delivery_complete,
                        file_status: *file_status,
                        filestore_responses: responses.clone(),
                        fault_location: (*condition != ConditionCode::NoError)
                            .then_some(self.cfg.local_id),
                    }),
                };
                self.ack_expired(id.source);
                self.queue(id.source, pdu, Hook::FinishedSent(id));
            }
        }
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        if Timers::expired(&mut tx.timers.nak, frozen, now) {
            // Before EOF, only the immediate and asynchronous modes re-request.
            let before_eof_ok =
                matches!(tx.rc.nak_mode, NakMode::Immediate | NakMode::Asynchronous);
            if tx.anything_missing()
                && tx.state == RecvState::Receiving
                && (tx.eof.is_some() || before_eof_ok)
            {
                self.stats.nak_bytes_overtaken += tx.expire_overtaken(now);
                if tx.nak_segments(now).0.is_empty() {
                    // Everything missing was asked for and can still be on its way: not an
                    // expiry without progress; look again a NAK timer later.
                    let t = effective(&self.remotes, id.source, &tx.rc);
                    tx.timers.nak = Some(now + t.nak_after(&tx.rc, tx.nak_count));
                } else {
                    tx.nak_count += 1;
                    if tx.nak_count > tx.rc.nak_limit {
                        self.fault(now, Role::Receiver, id, ConditionCode::NakLimitReached);
                        return;
                    }
                    self.issue_full_nak(now, id, false);
                }
            }
        }
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        if Timers::expired(&mut tx.timers.keep_alive, frozen, now) {
            if let Some(i) = tx.rc.keep_alive_interval {
                tx.timers.keep_alive = Some(now + i);
            }
            if tx.state == RecvState::Receiving {
                self.queue_keep_alive(id);
            }
        }
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        if Timers::expired(&mut tx.timers.check, frozen, now) && tx.state == RecvState::Receiving {
            tx.check_count += 1;
            if tx.check_count >= tx.rc.check_limit {
                self.fault(now, Role::Receiver, id, ConditionCode::CheckLimitReached);
                return;
            }
            tx.timers.check = Some(now + tx.rc.check_timer);
        }
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        if Timers::expired(&mut tx.timers.inactivity, frozen, now) {
            self.fault(now, Role::Receiver, id, ConditionCode::InactivityDetected);
        }
    }

    /// After a restore: NAK what is missing, or resend Finished.
    pub(super) fn after_restore_receiver(&mut self, now: Duration, id: TransactionId) {
        let Some(tx) = self.receivers.get_mut(&id) else {
            return;
        };
        match tx.state {
            RecvState::Receiving => {
                if !self.check_complete(now, id) {
                    self.issue_full_nak(now, id, false);
                }
            }
            RecvState::Finishing { .. } => {
                tx.timers.ack = Some(now);
            }
        }
    }

    pub(super) fn end_receiver(&mut self, now: Duration, id: TransactionId) {
        let Some(tx) = self.receivers.remove(&id) else {
            return;
        };
        self.release_claim(&tx);
        self.fs.close(&tx.partial);
        let summary = tx.summary(now);
        let (condition, delivery_complete, file_status, responses, file) = match tx.state {
            RecvState::Finishing {
                condition,
                delivery_complete,
                file_status,
                responses,
                file,
            } => (condition, delivery_complete, file_status, responses, file),
            RecvState::Receiving => (
                ConditionCode::NoError,
                false,
                FileStatus::Unreported,
                Vec::new(),
                None,
            ),
        };
        if tx.partial_created && file.as_deref() != Some(tx.partial.as_str()) {
            // However the transaction ended, a partial file nobody will use goes.
            let _ = self.fs.remove_file(&tx.partial);
        }
        if condition == ConditionCode::NoError && delivery_complete {
            self.stats.transactions_completed += 1;
        } else {
            self.stats.transactions_failed += 1;
        }
        self.remember_closed(now, Role::Receiver, id, condition, tx.mode, tx.header);
        self.events.push_back(Event::Finished {
            id,
            role: Role::Receiver,
            condition,
            delivery_complete,
            file_status,
            file,
            filestore_responses: responses,
            summary,
        });
    }
}

impl Entity {
    /// Refuse a reception for a reason of this entity (a name, a budget): the fault is
    /// raised and the transaction cancelled whatever handler the sender asked for in its
    /// Metadata (a peer cannot make this entity ignore its own limits). The Finished says why.
    fn refuse(&mut self, now: Duration, id: TransactionId, condition: ConditionCode) {
        self.stats.faults += 1;
        self.events.push_back(Event::Fault {
            id,
            condition,
            handler: FaultHandler::Cancel,
        });
        self.cancel_receiver(now, id, condition);
    }

    /// Charge reception `id` for its claim (at least `end`) against the per-peer and total
    /// partial-file budgets. False (and counted) if that would exceed one; nothing changes
    /// then.
    pub(super) fn charge(&mut self, id: TransactionId, end: u64) -> bool {
        let Some(tx) = self.receivers.get_mut(&id) else {
            return false;
        };
        let claim = tx.claim(end);
        if claim <= tx.claimed {
            return true;
        }
        let delta = claim - tx.claimed;
        let peer = self.partial_claimed_by_peer.entry(id.source).or_insert(0);
        if peer.saturating_add(delta) > self.cfg.partial_budget_per_peer
            || self.partial_claimed.saturating_add(delta) > self.cfg.partial_budget
        {
            self.stats.partial_budget_refusals += 1;
            return false;
        }
        *peer += delta;
        self.partial_claimed += delta;
        tx.claimed = claim;
        true
    }

    /// Give back what a reception that ends claimed.
    pub(super) fn release_claim(&mut self, tx: &RecvTx) {
        self.partial_claimed = self.partial_claimed.saturating_sub(tx.claimed);
        if let Some(p) = self.partial_claimed_by_peer.get_mut(&tx.id.source) {
            *p = p.saturating_sub(tx.claimed);
            if *p == 0 {
                self.partial_claimed_by_peer.remove(&tx.id.source);
            }
        }
    }

    /// Whether a new reception from `source` may start, making room if needed: at
    /// `max_transactions_per_peer` receptions from `source`, its oldest one that never
    /// progressed gives way; at `max_transactions` in all, the oldest one that never
    /// progressed of any source (the source with most receptions first). False when nothing
    /// could give way.
    fn admit(&mut self, now: Duration, source: EntityId) -> bool {
        let from_peer = self.receivers.keys().filter(|t| t.source == source).count();
        if from_peer >= self.cfg.max_transactions_per_peer && !self.evict_one(now, Some(source)) {
            return false;
        }
        if self.senders.len() + self.receivers.len() >= self.cfg.max_transactions
            && !self.evict_one(now, None)
        {
            return false;
        }
        true
    }

    /// Drop the oldest reception that never progressed (of `source`, or of the source with
    /// most receptions). See [`Event::Evicted`].
    fn evict_one(&mut self, now: Duration, source: Option<EntityId>) -> bool {
        let source = source.or_else(|| {
            let mut counts: HashMap<EntityId, usize> = HashMap::new();
            for (t, tx) in &self.receivers {
                if tx.evictable() {
                    *counts.entry(t.source).or_insert(0) += 1;
                }
            }
            counts
                .into_iter()
                .max_by_key(|&(s, n)| (n, std::cmp::Reverse(s)))
                .map(|(s, _)| s)
        });
        let Some(source) = source else {
            return false;
        };
        let victim = self
            .receivers
            .values()
            .filter(|tx| tx.id.source == source && tx.evictable())
            .min_by_key(|tx| (tx.started, tx.id.seq))
            .map(|tx| tx.id);
        let Some(id) = victim else {
            return false;
        };
        let Some(tx) = self.receivers.remove(&id) else {
            return false;
        };
        self.release_claim(&tx);
        self.fs.close(&tx.partial);
        if tx.partial_created {
            let _ = self.fs.remove_file(&tx.partial);
        }
        self.signals.retain(|o| o.pdu.header.transaction() != id);
        // Its stored state (if any) goes too: the snapshot of a transaction not in progress
        // is None.
        self.dirty.insert((Role::Receiver, id));
        self.stats.transactions_evicted += 1;
        let _ = now;
        let peer_open = self.receivers.keys().filter(|t| t.source == source).count();
        self.events.push_back(Event::Evicted { id, peer_open });
        true
    }

    /// Remove the partial files (under `partial_dir`) of no transaction in progress: those
    /// a killed process left behind. Call after restoring stored transactions. Returns the
    /// names removed.
    pub fn sweep_partials(&mut self) -> Vec<String> {
        let dir = self.cfg.partial_dir.clone();
        let Ok(names) = self.fs.list_dir(&dir) else {
            return Vec::new();
        };
        let in_use: std::collections::HashSet<&str> = self
            .receivers
            .values()
            .map(|t| t.partial.as_str())
            .collect();
        let stale: Vec<String> = names
            .into_iter()
            .filter(|n| n.ends_with(".part"))
            .map(|n| format!("{dir}/{n}"))
            .filter(|p| !in_use.contains(p.as_str()))
            .collect();
        let mut removed = Vec::new();
        for p in stale {
            if self.fs.remove_file(&p).is_ok() {
                removed.push(p);
            }
        }
        self.stats.partials_swept += removed.len() as u64;
        removed
    }
}

impl RecvTx {
    /// Whether this reception may give way to a new one: it never progressed beyond the PDU
    /// that opened it and this entity has not answered it with a Finished.
    fn evictable(&self) -> bool {
        self.pdus <= 1 && self.state == RecvState::Receiving
    }

    fn header_len_estimate(&self) -> usize {
        4 + 2 * self.header.entity_id_len as usize + self.header.seq_len as usize
    }
}

fn ack_eof(header: &PduHeader, condition: ConditionCode, status: TransactionStatus) -> Pdu {
    let mut h = *header;
    h.direction = Direction::TowardSender;
    Pdu {
        header: h,
        body: PduBody::Ack(Ack {
            directive: DirectiveCode::Eof,
            subtype: 0,
            condition,
            status,
        }),
    }
}

/// The condition a filestore failure raises.
fn filestore_condition(_e: &FilestoreError) -> ConditionCode {
    ConditionCode::FilestoreRejection
}

/// Filestore response status (Table 5-18) for a failed action.
fn filestore_status(action: FilestoreAction, e: &FilestoreError) -> u8 {
    use FilestoreAction as A;
    match (action, e) {
        (A::CreateFile, _) => 1, // create not allowed
        (A::DeleteFile, FilestoreError::NotFound(_)) => 1,
        (A::DeleteFile, _) => 2,
        (A::RenameFile, FilestoreError::NotFound(_)) => 1,
        (A::RenameFile, FilestoreError::AlreadyExists(_)) => 2,
        (A::RenameFile, _) => 3,
        (A::AppendFile | A::ReplaceFile, FilestoreError::NotFound(_)) => 1,
        (A::AppendFile | A::ReplaceFile, _) => 3,
        (A::CreateDirectory, _) => 1,
        (A::RemoveDirectory, FilestoreError::NotFound(_)) => 1,
        (A::RemoveDirectory, _) => 2,
        (A::DenyFile | A::DenyDirectory, _) => 2,
    }
}
