//! The sending side of a transaction (CCSDS 727.0 §4.6 "sending entity" procedures).
//!
//! First pass: Metadata, file data in offset order (read from the filestore straight into the
//! output buffer; the checksum is computed from those same bytes, so the file is read once),
//! then EOF. Class 2: NAKs add ranges to a retransmission set that is served before new data;
//! EOF is repeated on the positive-ACK timer until ACKed; Finished is ACKed and ends the
//! transaction. CFDP-repeat (class 1): every PDU leaves `repeat` times back to back.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::checksum::Checksum;
use crate::filestore::{check_name, Filestore};
use crate::pdu::{
    encode_file_data_prefix, finish_pdu, Ack, ConditionCode, Direction, DirectiveCode, EntityId,
    Eof, FaultHandler, FileStatus, Metadata, Pdu, PduBody, PduHeader, Prompt, Tlv, TransactionId,
    TransactionStatus, TransmissionMode,
};
use crate::rangeset::RangeSet;

use super::inflight::{Flight, InFlight};
use super::persist::SenderSnapshot;
use super::timers::Timers;
use super::{
    effective, make_header, Closed, Entity, Event, Hook, PersistError, PutError, PutRequest,
    RemoteConfig, Role, TransactionSummary,
};

/// State of one sending transaction.
#[derive(Debug)]
pub(crate) struct SendTx {
    pub id: TransactionId,
    pub dest: EntityId,
    pub mode: TransmissionMode,
    pub header: PduHeader,
    pub rc: RemoteConfig,
    pub source: Option<String>,
    pub metadata: Metadata,
    pub file_size: u64,
    pub checksum: Option<Checksum>,
    pub repeat: u32,
    /// First-pass progress: bytes [0, next_offset) were sent at least once.
    pub next_offset: u64,
    /// Ranges a NAK asked for, not yet resent.
    pub retransmit: RangeSet,
    /// Metadata requested again by a NAK (0, 0).
    pub resend_metadata: bool,
    /// CFDP-repeat: the last File Data PDU and how many more copies of it to send.
    pub repeat_pdu: Option<(Vec<u8>, u32)>,
    pub eof_queued: bool,
    pub eof_sent: bool,
    pub eof_acked: bool,
    pub eof_condition: ConditionCode,
    /// EOF's checksum, fixed when it is first queued.
    pub eof_checksum: u32,
    pub ack_count: u32,
    pub suspended: bool,
    /// Notice of cancellation in progress.
    pub cancelling: bool,
    pub prompt_after: Option<u64>,
    pub overrides: HashMap<ConditionCode, FaultHandler>,
    pub timers: Timers,
    pub started: Duration,
    pub bytes_retransmitted: u64,
    pub file_data_pdus: u64,
    pub naks: u64,
    pub progress: u64,
    /// Ranges retransmitted, each `until` the time its copy leaves the pacer: a NAK arriving
    /// less than a round trip after that was issued before the copy could reach the receiver
    /// and does not resend them. The round trip is the one known when the NAK arrives (one
    /// fixed at sending time, before any sample, was the configured ACK timer: seconds in
    /// which a range whose copy was lost could not be asked for again). A second such NAK
    /// for a copy that has left the pacer resends it ([`InFlight::cross`]).
    pub resent: InFlight,
    /// Start offsets and send times of the latest first-pass File Data PDUs (at most
    /// [`RECENT_SENDS`]): the immediate NAK of a gap names the PDU that revealed it.
    pub recent_sends: VecDeque<(u64, Duration)>,
    /// When the EOF (NoError or cancellation) last left, and how often it left.
    pub eof_sent_at: Option<Duration>,
    pub eof_sends: u32,
}

/// First-pass PDUs remembered for the PDU → NAK round-trip sample.
const RECENT_SENDS: usize = 4096;

impl SendTx {
    pub(crate) fn start(
        now: Duration,
        id: TransactionId,
        req: PutRequest,
        rc: RemoteConfig,
        cfg: &super::EntityConfig,
        fs: &mut dyn Filestore,
    ) -> Result<Self, PutError> {
        let checksum_type = req.checksum.unwrap_or(cfg.checksum);
        if Checksum::new(checksum_type).is_none() {
            return Err(PutError::UnsupportedChecksum(checksum_type));
        }
        let (source, file_size) = match &req.source_file {
            Some(name) => {
                let name = check_name(name.as_bytes())?.to_owned();
                let size = fs.size(&name)?;
                (Some(name), size)
            }
            None => (None, 0),
        };
        let dest_name = req
            .dest_file
            .clone()
            .or_else(|| req.source_file.clone())
            .unwrap_or_default();
        for name in [req.source_file.as_deref().unwrap_or(""), &dest_name] {
            if name.len() > 255 {
                return Err(PutError::Invalid(format!(
                    "file name longer than 255 octets: {name:?}"
                )));
            }
        }
        let mut options = Vec::new();
        for fr in &req.filestore_requests {
            options.push(Tlv::FilestoreRequest(fr.clone()));
        }
        for m in &req.messages {
            options.push(Tlv::MessageToUser(m.clone()));
        }
        for &(condition, handler) in &req.fault_handler_overrides {
            options.push(Tlv::FaultHandlerOverride { condition, handler });
        }
        if let Some(fl) = &req.flow_label {
            options.push(Tlv::FlowLabel(fl.clone()));
        }
        let large = file_size > u64::from(u32::MAX);
        let header = make_header(&rc, id, req.dest, req.mode, large);
        let metadata = Metadata {
            closure_requested: req.closure_requested
                && req.mode == TransmissionMode::Unacknowledged,
            checksum_type,
            file_size,
            source_file: req.source_file.clone().unwrap_or_default().into_bytes(),
            dest_file: dest_name.into_bytes(),
            options,
        };
        // Check that the Metadata fits the format now rather than failing at transmit time.
        let probe = Pdu {
            header,
            body: PduBody::Metadata(metadata.clone()),
        };
        let mut scratch = Vec::new();
        probe
            .encode(&mut scratch)
            .map_err(|e| PutError::Invalid(e.to_string()))?;
        let repeat = if req.mode == TransmissionMode::Unacknowledged {
            req.repeat.max(1)
        } else {
            1
        };
        // The inactivity timer runs once EOF has left: before, this side is the one sending,
        // and a long transfer to a quiet receiver (no NAK, no Keep Alive) is not inactivity.
        let timers = Timers::default();
        Ok(Self {
            id,
            dest: req.dest,
            mode: req.mode,
            header,
            source,
            metadata,
            file_size,
            checksum: Checksum::new(checksum_type),
            repeat,
            next_offset: 0,
            retransmit: RangeSet::new(),
            resend_metadata: false,
            repeat_pdu: None,
            eof_queued: false,
            eof_sent: false,
            eof_acked: false,
            eof_condition: ConditionCode::NoError,
            eof_checksum: 0,
            ack_count: 0,
            suspended: false,
            cancelling: false,
            prompt_after: rc.prompt_nak_every_bytes,
            overrides: req.fault_handler_overrides.iter().copied().collect(),
            timers,
            started: now,
            bytes_retransmitted: 0,
            file_data_pdus: 0,
            naks: 0,
            progress: 0,
            resent: InFlight::default(),
            recent_sends: VecDeque::new(),
            eof_sent_at: None,
            eof_sends: 0,
            rc,
        })
    }

    /// Metadata (× repeat) queued at `put`.
    pub(crate) fn initial_pdus(&self) -> Vec<Pdu> {
        (0..self.repeat).map(|_| self.metadata_pdu()).collect()
    }

    fn metadata_pdu(&self) -> Pdu {
        Pdu {
            header: self.header,
            body: PduBody::Metadata(self.metadata.clone()),
        }
    }

    pub(crate) fn prompt_pdu(&self, keep_alive: bool) -> Pdu {
        Pdu {
            header: self.header,
            body: PduBody::Prompt(Prompt { keep_alive }),
        }
    }

    pub(crate) fn first_pass_done(&self) -> bool {
        self.next_offset >= self.file_size
    }

    /// Whether a File Data PDU may be produced now.
    pub(crate) fn has_data(&self) -> bool {
        !self.suspended
            && !self.cancelling
            && (self.repeat_pdu.is_some()
                || !self.retransmit.is_empty()
                || self.next_offset < self.file_size)
    }

    pub(crate) fn summary(&self, now: Duration) -> TransactionSummary {
        TransactionSummary {
            peer: self.dest,
            file_size: self.file_size,
            bytes: self.next_offset,
            bytes_retransmitted: self.bytes_retransmitted,
            file_data_pdus: self.file_data_pdus,
            duplicate_file_data_pdus: 0,
            naks: self.naks,
            progress: self.progress,
            started: self.started,
            ended: now,
        }
    }

    pub(crate) fn snapshot(&self) -> Option<super::Snapshot> {
        if self.mode != TransmissionMode::Acknowledged {
            return None;
        }
        Some(super::Snapshot::Sender(Box::new(SenderSnapshot {
            id: self.id,
            dest: self.dest,
            header: self.header,
            source: self.source.clone(),
            metadata: self.metadata.clone(),
            next_offset: self.next_offset,
            retransmit: self.retransmit.ranges().to_vec(),
            eof_sent: self.eof_sent,
            eof_acked: self.eof_acked,
            eof_condition: self.eof_condition,
            suspended: self.suspended,
            overrides: self.overrides.iter().map(|(c, h)| (*c, *h)).collect(),
        })))
    }

    pub(crate) fn restore(
        now: Duration,
        s: SenderSnapshot,
        rc: RemoteConfig,
        fs: &mut dyn Filestore,
    ) -> Result<Self, PersistError> {
        let mut checksum = Checksum::new(s.metadata.checksum_type);
        if let (Some(c), Some(src)) = (checksum.as_mut(), &s.source) {
            super::checksum_tail(fs, src, c, s.next_offset)
                .map_err(|e| PersistError::Filestore(e.to_string()))?;
        }
        let mut timers = Timers::default();
        if s.eof_sent {
            timers.inactivity = Some(now + rc.inactivity_timer);
        }
        if s.eof_sent && !s.eof_acked {
            // Resend EOF at once: the ACK may have been lost while we were down.
            timers.ack = Some(now);
        }
        let eof_checksum = checksum.as_ref().map_or(0, Checksum::value);
        Ok(Self {
            id: s.id,
            dest: s.dest,
            mode: TransmissionMode::Acknowledged,
            header: s.header,
            source: s.source,
            file_size: s.metadata.file_size,
            metadata: s.metadata,
            checksum,
            repeat: 1,
            next_offset: s.next_offset,
            retransmit: RangeSet::from_ranges(s.retransmit),
            resend_metadata: false,
            repeat_pdu: None,
            eof_queued: s.eof_sent,
            eof_sent: s.eof_sent,
            eof_acked: s.eof_acked,
            eof_condition: s.eof_condition,
            eof_checksum,
            ack_count: 0,
            suspended: s.suspended,
            cancelling: s.eof_condition != ConditionCode::NoError,
            prompt_after: None,
            overrides: s.overrides.into_iter().collect(),
            timers,
            started: now,
            bytes_retransmitted: 0,
            file_data_pdus: 0,
            naks: 0,
            progress: 0,
            resent: InFlight::default(),
            recent_sends: VecDeque::new(),
            eof_sent_at: None,
            eof_sends: 0,
            rc,
        })
    }

    fn eof_pdu(&self) -> Pdu {
        Pdu {
            header: self.header,
            body: PduBody::Eof(Eof {
                condition: self.eof_condition,
                checksum: self.eof_checksum,
                file_size: if self.eof_condition == ConditionCode::NoError {
                    self.file_size
                } else {
                    self.next_offset
                },
                fault_location: (self.eof_condition != ConditionCode::NoError)
                    .then_some(self.id.source),
            }),
        }
    }
}

impl Entity {
    /// Queue the EOF (× repeat; the last copy carries the hook).
    pub(super) fn queue_eof(&mut self, id: TransactionId) {
        let Some(tx) = self.senders.get_mut(&id) else {
            return;
        };
        if !tx.eof_sent || tx.eof_condition != ConditionCode::NoError {
            tx.eof_checksum = tx.checksum.as_ref().map_or(0, Checksum::value);
        }
        tx.eof_queued = true;
        let pdu = tx.eof_pdu();
        let (dest, repeat) = (tx.dest, tx.repeat);
        for i in 0..repeat {
            let hook = if i + 1 == repeat {
                Hook::EofSent(id)
            } else {
                Hook::None
            };
            self.queue(dest, pdu.clone(), hook);
        }
    }

    /// Build the next File Data PDU of `id` into `buf`; returns its length.
    pub(super) fn send_file_data(
        &mut self,
        now: Duration,
        id: TransactionId,
        buf: &mut Vec<u8>,
    ) -> Option<usize> {
        let tx = self.senders.get_mut(&id)?;
        // CFDP-repeat copies of the previous PDU.
        if let Some((pdu, left)) = tx.repeat_pdu.as_mut() {
            buf.extend_from_slice(pdu);
            let len = pdu.len();
            *left -= 1;
            if *left == 0 {
                tx.repeat_pdu = None;
            }
            tx.file_data_pdus += 1;
            self.stats.file_data_bytes_sent += len as u64;
            let done = tx.first_pass_done() && tx.repeat_pdu.is_none() && !tx.eof_queued;
            if done {
                self.queue_eof(id);
            }
            return Some(len);
        }
        let seg = tx.rc.max_file_segment.max(1) as u64;
        let (offset, len, first_pass) = if let Some(r) = tx.retransmit.pop_front(seg) {
            (r.start, r.end - r.start, false)
        } else if tx.next_offset < tx.file_size {
            let len = seg.min(tx.file_size - tx.next_offset);
            (tx.next_offset, len, true)
        } else {
            return None;
        };
        let start = buf.len();
        let src = tx.source.clone().unwrap_or_default();
        if encode_file_data_prefix(&tx.header, offset, None, len as usize, buf).is_err() {
            buf.truncate(start);
            return None;
        }
        let data_at = buf.len();
        buf.resize(data_at + len as usize, 0);
        if self.fs.read_at(&src, offset, &mut buf[data_at..]).is_err() {
            buf.truncate(start);
            self.fault(now, Role::Sender, id, ConditionCode::FilestoreRejection);
            return None;
        }
        let tx = self.senders.get_mut(&id)?;
        if first_pass {
            if let Some(c) = tx.checksum.as_mut() {
                c.update(&buf[data_at..]);
            }
            tx.next_offset = offset + len;
            if tx.mode == TransmissionMode::Acknowledged {
                if tx.recent_sends.len() >= RECENT_SENDS {
                    tx.recent_sends.pop_front();
                }
                tx.recent_sends.push_back((offset, now));
            }
        } else {
            tx.bytes_retransmitted += len;
            // A PDU at these offsets left again: a NAK ending at one of them no longer
            // names one transmission (no PDU → NAK sample from it).
            let from = tx.recent_sends.partition_point(|&(o, _)| o < offset);
            let to = tx.recent_sends.partition_point(|&(o, _)| o < offset + len);
            tx.recent_sends.drain(from..to);
        }
        finish_pdu(&tx.header, buf, start);
        let pdu_len = buf.len() - start;
        if !first_pass {
            // A NAK issued before this copy reached the receiver arrives here up to a round trip
            // after the copy has left the link: the copy leaves it once everything paced out
            // before it, and itself, are serialized (seconds on a slow link, for large PDUs).
            if let Some(r) = self.remotes.get_mut(&tx.dest) {
                let drain = r.pacer.drain_after(now, pdu_len);
                tx.resent.insert(
                    offset..offset + len,
                    Flight {
                        end: offset + len,
                        at: now,
                        until: now + drain,
                        batch: 0,
                        clean: false,
                        first: false,
                    },
                );
            }
        }
        tx.file_data_pdus += 1;
        self.stats.file_data_bytes_sent += len;
        if tx.repeat > 1 {
            tx.repeat_pdu = Some((buf[start..].to_vec(), tx.repeat - 1));
        }
        // Prompted NAK mode on the sending side.
        if first_pass && tx.mode == TransmissionMode::Acknowledged {
            if let (Some(every), Some(after)) = (tx.rc.prompt_nak_every_bytes, tx.prompt_after) {
                if tx.next_offset >= after {
                    tx.prompt_after = Some(after + every.max(1));
                    let p = tx.prompt_pdu(false);
                    let dest = tx.dest;
                    self.queue(dest, p, Hook::None);
                }
            }
        }
        let tx = self.senders.get_mut(&id)?;
        if first_pass {
            self.dirty.insert((Role::Sender, id));
        }
        if tx.first_pass_done() && tx.repeat_pdu.is_none() && !tx.eof_queued {
            self.queue_eof(id);
        }
        Some(pdu_len)
    }

    pub(super) fn eof_sent(&mut self, now: Duration, id: TransactionId) {
        let Some(tx) = self.senders.get_mut(&id) else {
            return;
        };
        let first = !tx.eof_sent;
        tx.eof_sent = true;
        tx.eof_sent_at = Some(now);
        tx.eof_sends += 1;
        if first && tx.eof_condition == ConditionCode::NoError {
            self.events.push_back(Event::EofSent { id });
        }
        let tx = self.senders.get_mut(&id).expect("present");
        let timers = effective(&self.remotes, tx.dest, &tx.rc);
        if first {
            tx.timers.inactivity = Some(now + timers.inactivity);
        }
        match tx.mode {
            TransmissionMode::Acknowledged => {
                if !tx.eof_acked {
                    tx.timers.ack = Some(now + timers.ack);
                }
            }
            TransmissionMode::Unacknowledged => {
                if tx.eof_condition != ConditionCode::NoError {
                    let c = tx.eof_condition;
                    self.end_sender(now, id, c, false, FileStatus::Unreported, Vec::new());
                } else if !tx.metadata.closure_requested {
                    self.end_sender(
                        now,
                        id,
                        ConditionCode::NoError,
                        false,
                        FileStatus::Unreported,
                        Vec::new(),
                    );
                }
                // With closure requested, the transaction waits for Finished (inactivity
                // timer bounds the wait).
            }
        }
        self.dirty.insert((Role::Sender, id));
    }

    /// A PDU toward the sender (ACK of EOF, NAK, Finished, Keep Alive).
    pub(super) fn sender_input(&mut self, now: Duration, pdu: Pdu) {
        let id = pdu.header.transaction();
        if !self.senders.contains_key(&id) {
            self.stray_sender_pdu(pdu);
            return;
        }
        let tx = self.senders.get_mut(&id).expect("present");
        if tx.eof_sent {
            tx.timers.inactivity = Some(now + effective(&self.remotes, tx.dest, &tx.rc).inactivity);
        }
        match pdu.body {
            PduBody::Ack(ack) if ack.directive == DirectiveCode::Eof => {
                // EOF → ACK(EOF) measures the round trip when the EOF left once (Karn).
                let sample = match (tx.eof_acked, tx.eof_sends, tx.eof_sent_at) {
                    (false, 1, Some(at)) => Some(now.saturating_sub(at)),
                    _ => None,
                };
                if let Some(rtt) = sample {
                    let dest = tx.dest;
                    self.rtt_sample(dest, rtt);
                }
                let tx = self.senders.get_mut(&id).expect("present");
                tx.eof_acked = true;
                tx.timers.ack = None;
                tx.ack_count = 0;
                self.dirty.insert((Role::Sender, id));
                if tx.eof_condition != ConditionCode::NoError {
                    let c = tx.eof_condition;
                    self.end_sender(now, id, c, false, FileStatus::Unreported, Vec::new());
                }
            }
            PduBody::Nak(nak) => {
                tx.naks += 1;
                self.stats.naks_received += 1;
                if tx.cancelling {
                    return;
                }
                // The immediate NAK of a gap (scope = the gap, ending at the first-pass PDU
                // that revealed it) measures the round trip PDU → NAK.
                if let [(s, e)] = nak.segments[..] {
                    if s > 0 && (s, e) == (nak.start_of_scope, nak.end_of_scope) {
                        let i = tx.recent_sends.partition_point(|&(o, _)| o < e);
                        if let Some(&(o, at)) = tx.recent_sends.get(i) {
                            if o == e {
                                tx.recent_sends.drain(..=i);
                                let dest = tx.dest;
                                self.rtt_sample(dest, now.saturating_sub(at));
                            }
                        }
                    }
                }
                let tx = self.senders.get_mut(&id).expect("present");
                // Copies that left less than a round trip ago (before the first sample, the
                // ACK timer, the configured bound on a round trip, stands in for it).
                let rtt = self
                    .remotes
                    .get(&tx.dest)
                    .and_then(|r| r.rtt.srtt())
                    .unwrap_or_else(|| effective(&self.remotes, tx.dest, &tx.rc).ack);
                let left_before = now.saturating_sub(rtt);
                tx.resent.retain(|_, f| f.until > left_before);
                let had_data = tx.has_data();
                let mut crossed = 0;
                for &(s, e) in &nak.segments {
                    if s == 0 && e == 0 {
                        tx.resend_metadata = true;
                        continue;
                    }
                    // Only bytes already sent once; the first pass covers the rest.
                    let e = e.min(tx.next_offset);
                    if s < e {
                        // Not what was resent less than a round trip ago: this NAK was
                        // issued before that retransmission could have arrived.
                        let mut resend = tx.resent.not_in_flight(left_before, s..e);
                        resend.extend(tx.resent.cross(now, left_before, s..e));
                        crossed += (e - s) - resend.iter().map(|r| r.end - r.start).sum::<u64>();
                        for r in resend {
                            tx.retransmit.insert(r);
                        }
                    }
                }
                self.stats.nak_bytes_crossed += crossed;
                let resend_md = std::mem::take(&mut tx.resend_metadata);
                let md = resend_md.then(|| tx.metadata_pdu());
                let dest = tx.dest;
                if !had_data && tx.has_data() && !self.data_rr.contains(&id) {
                    self.data_rr.push_back(id);
                }
                if let Some(md) = md {
                    self.queue(dest, md, Hook::None);
                }
                self.dirty.insert((Role::Sender, id));
            }
            PduBody::Finished(fin) => {
                if tx.mode == TransmissionMode::Acknowledged {
                    let ack = Pdu {
                        header: tx.header,
                        body: PduBody::Ack(Ack {
                            directive: DirectiveCode::Finished,
                            subtype: 1,
                            condition: fin.condition,
                            status: TransactionStatus::Terminated,
                        }),
                    };
                    let dest = tx.dest;
                    self.queue(dest, ack, Hook::None);
                }
                self.end_sender(
                    now,
                    id,
                    fin.condition,
                    fin.delivery_complete,
                    fin.file_status,
                    fin.filestore_responses,
                );
            }
            PduBody::KeepAlive(ka) => {
                tx.progress = ka.progress;
                if let Some(limit) = tx.rc.keep_alive_limit {
                    if tx.next_offset.saturating_sub(ka.progress) > limit {
                        self.fault(now, Role::Sender, id, ConditionCode::KeepAliveLimitReached);
                    }
                }
            }
            _ => self.stats.stray_pdus += 1,
        }
    }

    /// A PDU toward the sender for a transaction not in progress here.
    fn stray_sender_pdu(&mut self, pdu: Pdu) {
        self.stats.stray_pdus += 1;
        let id = pdu.header.transaction();
        if let PduBody::Finished(fin) = pdu.body {
            // Our ACK of it was lost (or we never knew the transaction): ACK again so the
            // receiver can close.
            if pdu.header.mode == TransmissionMode::Acknowledged {
                let closed: Option<Closed> = self.closed.get(&(Role::Sender, id)).copied();
                let mut header = closed.map_or(pdu.header, |c| c.header);
                header.direction = Direction::TowardReceiver;
                let status = if closed.is_some() {
                    TransactionStatus::Terminated
                } else {
                    TransactionStatus::Unrecognized
                };
                let ack = Pdu {
                    header,
                    body: PduBody::Ack(Ack {
                        directive: DirectiveCode::Finished,
                        subtype: 1,
                        condition: fin.condition,
                        status,
                    }),
                };
                self.queue(pdu.header.dest, ack, Hook::None);
            }
        }
    }

    pub(super) fn sender_timeout(&mut self, now: Duration, id: TransactionId) {
        let Some(tx) = self.senders.get_mut(&id) else {
            return;
        };
        let frozen = tx.timers.is_frozen();
        if Timers::expired(&mut tx.timers.ack, frozen, now) {
            tx.ack_count += 1;
            if tx.ack_count > tx.rc.ack_limit {
                if tx.cancelling {
                    // Cancelling already: give up.
                    let c = tx.eof_condition;
                    self.abandon_tx(now, Role::Sender, id, c);
                } else {
                    self.fault(
                        now,
                        Role::Sender,
                        id,
                        ConditionCode::PositiveAckLimitReached,
                    );
                }
                return;
            }
            let pdu = tx.eof_pdu();
            let dest = tx.dest;
            self.ack_expired(dest);
            self.queue(dest, pdu, Hook::EofSent(id));
        }
        let Some(tx) = self.senders.get_mut(&id) else {
            return;
        };
        if Timers::expired(&mut tx.timers.inactivity, frozen, now) {
            self.fault(now, Role::Sender, id, ConditionCode::InactivityDetected);
        }
    }

    /// Notice of cancellation from the sending side: EOF(condition) instead of more data.
    pub(super) fn cancel_sender(
        &mut self,
        now: Duration,
        id: TransactionId,
        condition: ConditionCode,
    ) {
        let Some(tx) = self.senders.get_mut(&id) else {
            return;
        };
        if tx.cancelling {
            return;
        }
        tx.cancelling = true;
        tx.eof_condition = condition;
        tx.eof_acked = false;
        tx.eof_sends = 0;
        tx.ack_count = 0;
        tx.retransmit = RangeSet::new();
        tx.repeat_pdu = None;
        tx.suspended = false;
        tx.timers.thaw(now);
        tx.timers.ack = None;
        self.signals.retain(|o| {
            o.pdu.header.transaction() != id || o.pdu.header.direction != Direction::TowardReceiver
        });
        self.data_rr.retain(|x| *x != id);
        self.queue_eof(id);
        self.dirty.insert((Role::Sender, id));
    }

    pub(super) fn end_sender(
        &mut self,
        now: Duration,
        id: TransactionId,
        condition: ConditionCode,
        delivery_complete: bool,
        file_status: FileStatus,
        filestore_responses: Vec<crate::pdu::FilestoreResponse>,
    ) {
        let Some(tx) = self.senders.remove(&id) else {
            return;
        };
        self.data_rr.retain(|x| *x != id);
        if let Some(src) = &tx.source {
            self.fs.close(src);
        }
        if condition == ConditionCode::NoError {
            self.stats.transactions_completed += 1;
        } else {
            self.stats.transactions_failed += 1;
        }
        let summary = tx.summary(now);
        self.remember_closed(now, Role::Sender, id, condition, tx.mode, tx.header);
        self.events.push_back(Event::Finished {
            id,
            role: Role::Sender,
            condition,
            delivery_complete,
            file_status,
            file: None,
            filestore_responses,
            summary,
        });
    }
}
