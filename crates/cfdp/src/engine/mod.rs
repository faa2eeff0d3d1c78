//! The sans-IO CFDP entity: transactions, timers, NAK policies, fault handling.
//!
//! An [`Entity`] never touches a socket or a clock, and reaches files only through its
//! [`Filestore`]. The driver (UDP runtime, BP application, simulator, test) feeds it PDUs
//! ([`Entity::handle_pdu`]), timer expirations ([`Entity::handle_timeout`]), link
//! availability ([`Entity::set_link`]) and user requests ([`Entity::put`],
//! [`Entity::cancel`], [`Entity::suspend`], [`Entity::resume`], [`Entity::report`],
//! [`Entity::prompt`], [`Entity::trigger_nak`]); it drains PDUs ([`Entity::poll_transmit`]),
//! the next wake-up ([`Entity::poll_timeout`]) and indications ([`Entity::poll_event`]).
//! `now` is a [`Duration`] since an epoch of the driver's choosing.

mod config;
mod event;
mod inflight;
mod pacing;
mod persist;
mod receiver;
mod rtt;
mod sender;
mod timers;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use bytes::Bytes;
use thiserror::Error;

pub use config::{AdaptiveTimers, EntityConfig, NakMode, RemoteConfig, NAK_HINT_PREFIX};
pub use event::{Event, Role, TransactionSummary};
pub use persist::{PersistError, Snapshot};
pub use rtt::{EffectiveTimers, RttEstimator};

use crate::filestore::{Filestore, FilestoreError};
use crate::pdu::{
    ChecksumType, ConditionCode, DecodeError, Direction, EntityId, FaultHandler, FilestoreRequest,
    Pdu, PduBody, PduHeader, TransactionId, TransmissionMode,
};
use pacing::Pacer;
use receiver::RecvTx;
use sender::SendTx;

/// One PDU written by [`Entity::poll_transmit`]: the last `len` bytes of the caller's buffer,
/// to be delivered to entity `dest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Entity the PDU is for (the driver maps it to an address or an endpoint).
    pub dest: EntityId,
    /// PDU length in bytes.
    pub len: usize,
}

/// A file transfer request (CFDP Put.request).
#[derive(Debug, Clone, PartialEq)]
pub struct PutRequest {
    /// Destination entity.
    pub dest: EntityId,
    /// Source file name in the filestore (None: Metadata only, e.g. to carry messages).
    pub source_file: Option<String>,
    /// Destination file name at the receiver (defaults to the source name).
    pub dest_file: Option<String>,
    /// Class 2 (acknowledged) or class 1 (unacknowledged).
    pub mode: TransmissionMode,
    /// Class 1: ask the receiver for a Finished PDU.
    pub closure_requested: bool,
    /// Checksum (default: the entity's).
    pub checksum: Option<ChecksumType>,
    /// CFDP-repeat: send every PDU of a class-1 transfer this many times back to back (1 =
    /// normal). Ignored in class 2.
    pub repeat: u32,
    /// Messages to user (Metadata options).
    pub messages: Vec<Vec<u8>>,
    /// Filestore requests to execute at the receiver after the file arrived.
    pub filestore_requests: Vec<FilestoreRequest>,
    /// Fault handler overrides for this transaction (both ends honour them).
    pub fault_handler_overrides: Vec<(ConditionCode, FaultHandler)>,
    /// Flow label (opaque to CFDP).
    pub flow_label: Option<Vec<u8>>,
}

impl PutRequest {
    /// A class-2 transfer of `source` to `dest` under the same name.
    pub fn new(dest: EntityId, source: &str) -> Self {
        Self {
            dest,
            source_file: Some(source.to_owned()),
            dest_file: None,
            mode: TransmissionMode::Acknowledged,
            closure_requested: false,
            checksum: None,
            repeat: 1,
            messages: Vec::new(),
            filestore_requests: Vec::new(),
            fault_handler_overrides: Vec::new(),
            flow_label: None,
        }
    }
}

/// Why [`Entity::put`] refused a request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PutError {
    /// The source file cannot be read or the destination name is not acceptable.
    #[error("filestore: {0}")]
    Filestore(#[from] FilestoreError),
    /// The checksum type is not one this entity computes.
    #[error("checksum type {0:?} is not supported")]
    UnsupportedChecksum(ChecksumType),
    /// `max_transactions` are in progress.
    #[error("too many transactions in progress ({0})")]
    TooManyTransactions(usize),
    /// A request value does not fit the PDU format (name over 255 octets, ...).
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// Why [`Entity::handle_pdu`] dropped a PDU. Malformed PDUs are also counted in
/// [`EntityStats`]; none of these ever changes a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PduError {
    /// Not a valid PDU.
    #[error("malformed PDU: {0}")]
    Malformed(#[from] DecodeError),
    /// Valid, but for another entity.
    #[error("PDU for entity {dest} (this is {local}): dropped")]
    NotForUs {
        /// Entity the PDU is addressed to.
        dest: EntityId,
        /// This entity.
        local: EntityId,
    },
}

/// Entity-wide counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntityStats {
    /// PDUs handed to `handle_pdu`.
    pub pdus_received: u64,
    /// PDUs that failed to decode.
    pub malformed_pdus: u64,
    /// PDUs addressed to another entity.
    pub misrouted_pdus: u64,
    /// PDUs of no known transaction that could not start one (ACK, NAK, Keep Alive for an
    /// unknown sender transaction, PDUs of a recently finished transaction, ...).
    pub stray_pdus: u64,
    /// New incoming transactions refused because `max_transactions` (or
    /// `max_transactions_per_peer` of their source) were in progress and none could give way.
    pub refused_transactions: u64,
    /// Receptions that never progressed, dropped to admit a new one ([`Event::Evicted`]).
    pub transactions_evicted: u64,
    /// File Data PDUs dropped because they reached beyond `max_bytes_before_metadata` while
    /// their transaction's Metadata was still missing.
    pub file_data_dropped_before_metadata: u64,
    /// Receptions refused because they would exceed a partial-file budget
    /// (`partial_budget_per_peer`, `partial_budget`).
    pub partial_budget_refusals: u64,
    /// Receptions refused because of their destination name (empty with file data, `.`,
    /// `..`, control characters, ...).
    pub names_refused: u64,
    /// Partial files of no transaction in progress removed by [`Entity::sweep_partials`].
    pub partials_swept: u64,
    /// PDUs sent.
    pub pdus_sent: u64,
    /// Bytes of PDUs sent.
    pub bytes_sent: u64,
    /// File data bytes sent (including repeats and retransmissions).
    pub file_data_bytes_sent: u64,
    /// File data bytes received (including duplicates).
    pub file_data_bytes_received: u64,
    /// NAK PDUs sent.
    pub naks_sent: u64,
    /// NAK PDUs received.
    pub naks_received: u64,
    /// File data bytes a received NAK asked for that were not resent because they had been
    /// resent less than a round trip before (the NAK crossed their retransmission).
    pub nak_bytes_crossed: u64,
    /// Missing file data bytes a NAK did not ask for again because their retransmission,
    /// asked for earlier, could still be on its way.
    pub nak_bytes_in_flight: u64,
    /// Bytes asked for again before their deadline because a retransmission of a higher
    /// offset, asked for no earlier, arrived first (their copy or their NAK was lost).
    pub nak_bytes_overtaken: u64,
    /// Faults raised.
    pub faults: u64,
    /// Transactions finished with NoError.
    pub transactions_completed: u64,
    /// Transactions finished with a fault or cancelled, or abandoned.
    pub transactions_failed: u64,
}

/// What to do when a queued directive actually leaves the entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hook {
    None,
    /// EOF of a sender transaction (the last copy with CFDP-repeat).
    EofSent(TransactionId),
    /// Finished of a receiver transaction.
    FinishedSent(TransactionId),
    /// NAK of a receiver transaction.
    NakSent(TransactionId),
}

/// A directive waiting for `poll_transmit`.
#[derive(Debug, Clone)]
struct Outgoing {
    dest: EntityId,
    pdu: Pdu,
    hook: Hook,
}

/// Per-remote runtime state.
#[derive(Debug)]
struct RemoteState {
    cfg: RemoteConfig,
    pacer: Pacer,
    link_up: bool,
    /// Round trip measured toward this remote.
    rtt: RttEstimator,
    /// Positive-ACK expiries since the latest round-trip sample (the ACK timer's backoff).
    ack_backoff: u32,
}

/// The timers of a transaction with `peer` configured by `rc`, after the round trip.
fn effective(
    remotes: &HashMap<EntityId, RemoteState>,
    peer: EntityId,
    rc: &RemoteConfig,
) -> EffectiveTimers {
    let (rtt, backoff) = remotes
        .get(&peer)
        .map(|r| (r.rtt, r.ack_backoff))
        .unwrap_or_default();
    EffectiveTimers::derive(rc, &rtt, backoff)
}

/// Remembered outcome of a finished transaction.
#[derive(Debug, Clone, Copy)]
struct Closed {
    at: Duration,
    mode: TransmissionMode,
    header: PduHeader,
}

/// A CFDP entity. See the module documentation for the driving protocol.
pub struct Entity {
    cfg: EntityConfig,
    fs: Box<dyn Filestore>,
    remotes: HashMap<EntityId, RemoteState>,
    senders: HashMap<TransactionId, SendTx>,
    receivers: HashMap<TransactionId, RecvTx>,
    /// Sender transactions in the round-robin of file data.
    data_rr: VecDeque<TransactionId>,
    signals: VecDeque<Outgoing>,
    closed: HashMap<(Role, TransactionId), Closed>,
    closed_order: VecDeque<(Role, TransactionId)>,
    events: VecDeque<Event>,
    dirty: BTreeSet<(Role, TransactionId)>,
    next_seq: u64,
    stats: EntityStats,
    /// Partial-file bytes claimed by receptions in progress, in all and per source.
    partial_claimed: u64,
    partial_claimed_by_peer: HashMap<EntityId, u64>,
}

impl std::fmt::Debug for Entity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entity")
            .field("local_id", &self.cfg.local_id)
            .field("senders", &self.senders.len())
            .field("receivers", &self.receivers.len())
            .finish_non_exhaustive()
    }
}

/// Closed transactions remembered at most (oldest forgotten first).
const MAX_CLOSED: usize = 65_536;

/// Chunk used to read a received file back for its checksum.
const CHECKSUM_CHUNK: usize = 1 << 20;

impl Entity {
    /// An entity with its configuration and filestore.
    pub fn new(cfg: EntityConfig, fs: Box<dyn Filestore>) -> Self {
        Self {
            cfg,
            fs,
            remotes: HashMap::new(),
            senders: HashMap::new(),
            receivers: HashMap::new(),
            data_rr: VecDeque::new(),
            signals: VecDeque::new(),
            closed: HashMap::new(),
            closed_order: VecDeque::new(),
            events: VecDeque::new(),
            dirty: BTreeSet::new(),
            next_seq: 1,
            stats: EntityStats::default(),
            partial_claimed: 0,
            partial_claimed_by_peer: HashMap::new(),
        }
    }

    /// This entity's id.
    pub fn local_id(&self) -> EntityId {
        self.cfg.local_id
    }

    /// The configuration.
    pub fn config(&self) -> &EntityConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &EntityStats {
        &self.stats
    }

    /// The filestore (e.g. to inspect received files in a test or the simulator).
    pub fn filestore(&mut self) -> &mut dyn Filestore {
        self.fs.as_mut()
    }

    /// Sequence number the next `put` will use.
    pub fn next_sequence(&self) -> u64 {
        self.next_seq
    }

    /// Set the next sequence number (a restarted entity continues after the last one used).
    pub fn set_next_sequence(&mut self, seq: u64) {
        self.next_seq = seq;
    }

    /// Transactions in progress.
    pub fn transactions(&self) -> Vec<(Role, TransactionId)> {
        let mut v: Vec<_> = self
            .senders
            .keys()
            .map(|id| (Role::Sender, *id))
            .chain(self.receivers.keys().map(|id| (Role::Receiver, *id)))
            .collect();
        v.sort();
        v
    }

    /// Whether nothing is in progress and nothing waits to be sent.
    pub fn is_idle(&self) -> bool {
        self.senders.is_empty() && self.receivers.is_empty() && self.signals.is_empty()
    }

    /// Add or replace a remote entity's settings (existing transactions keep theirs, except
    /// the pacing rate).
    pub fn add_remote(&mut self, remote: RemoteConfig) {
        if let Some(r) = self.remotes.get_mut(&remote.entity_id) {
            r.pacer.set_rate(remote.rate_bps, remote.pacing_burst_bytes);
            r.cfg = remote.clone();
        }
        self.cfg.add_remote(remote);
    }

    fn remote(&mut self, id: EntityId) -> &mut RemoteState {
        let cfg = &self.cfg;
        self.remotes.entry(id).or_insert_with(|| {
            let rc = cfg.remote(id);
            RemoteState {
                pacer: Pacer::new(rc.rate_bps, rc.pacing_burst_bytes),
                cfg: rc,
                link_up: true,
                rtt: RttEstimator::default(),
                ack_backoff: 0,
            }
        })
    }

    /// The round trip measured toward `remote` (None before the first exchange with it).
    pub fn round_trip(&self, remote: EntityId) -> Option<RttEstimator> {
        self.remotes.get(&remote).map(|r| r.rtt)
    }

    /// The NAK, ACK and inactivity timers a new transaction with `remote` would use now
    /// (see [`AdaptiveTimers`]).
    pub fn effective_timers(&self, remote: EntityId) -> EffectiveTimers {
        let rc = self
            .remotes
            .get(&remote)
            .map_or_else(|| self.cfg.remote(remote), |r| r.cfg.clone());
        effective(&self.remotes, remote, &rc)
    }

    /// Add a round-trip sample for `remote`.
    fn rtt_sample(&mut self, remote: EntityId, rtt: Duration) {
        let r = self.remote(remote);
        r.rtt.sample(rtt);
        r.ack_backoff = 0;
    }

    /// A round trip that may be too long (see [`RttEstimator::sample_loose`]).
    fn rtt_sample_loose(&mut self, remote: EntityId, rtt: Duration) {
        self.remote(remote).rtt.sample_loose(rtt);
    }

    /// A positive ACK timer toward `remote` expired: back the derived ACK timer off.
    fn ack_expired(&mut self, remote: EntityId) {
        let r = self.remote(remote);
        r.ack_backoff = (r.ack_backoff + 1).min(rtt::MAX_BACKOFF);
    }

    fn link_up(&self, id: EntityId) -> bool {
        self.remotes.get(&id).is_none_or(|r| r.link_up)
    }

    /// Next indication, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ------------------------------------------------------------------------------------
    // Link availability
    // ------------------------------------------------------------------------------------

    /// The link toward `remote` became available (`up`) or unavailable. While it is down
    /// nothing is sent to `remote` and the timers of its transactions are frozen. Coming up
    /// triggers the NAKs of asynchronous-mode receptions from it.
    pub fn set_link(&mut self, now: Duration, remote: EntityId, up: bool) {
        let was = self.remote(remote).link_up;
        if was == up {
            return;
        }
        self.remote(remote).link_up = up;
        for tx in self.senders.values_mut().filter(|t| t.dest == remote) {
            if up && !tx.suspended {
                tx.timers.thaw(now);
            } else if !up {
                tx.timers.freeze(now);
            }
        }
        let mut trigger = Vec::new();
        for tx in self
            .receivers
            .values_mut()
            .filter(|t| t.id.source == remote)
        {
            if up && !tx.suspended {
                tx.timers.thaw(now);
                if tx.rc.nak_mode == NakMode::Asynchronous {
                    trigger.push(tx.id);
                }
            } else if !up {
                tx.timers.freeze(now);
            }
        }
        trigger.sort_unstable();
        for id in trigger {
            self.issue_full_nak(now, id, false);
        }
    }

    // ------------------------------------------------------------------------------------
    // User requests
    // ------------------------------------------------------------------------------------

    /// Start a transaction (CFDP Put.request). Returns its id; the PDUs leave through
    /// `poll_transmit`.
    pub fn put(&mut self, now: Duration, req: PutRequest) -> Result<TransactionId, PutError> {
        if self.senders.len() + self.receivers.len() >= self.cfg.max_transactions {
            return Err(PutError::TooManyTransactions(self.cfg.max_transactions));
        }
        let id = TransactionId {
            source: self.cfg.local_id,
            seq: self.next_seq,
        };
        let rc = self.remote(req.dest).cfg.clone();
        let tx = SendTx::start(now, id, req, rc, &self.cfg, self.fs.as_mut())?;
        self.next_seq = self.next_seq.wrapping_add(1).max(1);
        self.events.push_back(Event::TransactionStarted {
            id,
            role: Role::Sender,
        });
        self.install_sender(now, tx, true);
        Ok(id)
    }

    /// Cancel a transaction (Cancel.request): a notice of cancellation is sent to the peer.
    /// Returns false for an unknown transaction.
    pub fn cancel(&mut self, now: Duration, id: TransactionId) -> bool {
        self.user_fault(
            now,
            id,
            ConditionCode::CancelRequestReceived,
            FaultHandler::Cancel,
        )
    }

    /// Suspend a transaction (Suspend.request): timers frozen, no file data sent.
    pub fn suspend(&mut self, now: Duration, id: TransactionId) -> bool {
        self.user_fault(
            now,
            id,
            ConditionCode::SuspendRequestReceived,
            FaultHandler::Suspend,
        )
    }

    /// Abandon a transaction: it ends at once, without any further PDU.
    pub fn abandon(&mut self, now: Duration, id: TransactionId) -> bool {
        self.user_fault(
            now,
            id,
            ConditionCode::CancelRequestReceived,
            FaultHandler::Abandon,
        )
    }

    fn user_fault(
        &mut self,
        now: Duration,
        id: TransactionId,
        condition: ConditionCode,
        handler: FaultHandler,
    ) -> bool {
        let mut found = false;
        if self.senders.contains_key(&id) {
            self.apply_handler(now, Role::Sender, id, condition, handler);
            found = true;
        }
        if self.receivers.contains_key(&id) {
            self.apply_handler(now, Role::Receiver, id, condition, handler);
            found = true;
        }
        found
    }

    /// Resume a suspended transaction (Resume.request).
    pub fn resume(&mut self, now: Duration, id: TransactionId) -> bool {
        let mut found = false;
        let link = |s: &Self, peer| s.link_up(peer);
        if let Some(tx) = self.senders.get(&id) {
            let up = link(self, tx.dest);
            let tx = self.senders.get_mut(&id).expect("present");
            if tx.suspended {
                tx.suspended = false;
                if up {
                    tx.timers.thaw(now);
                }
                let progress = tx.next_offset;
                self.events.push_back(Event::Resumed { id, progress });
                if !self.data_rr.contains(&id) {
                    self.data_rr.push_back(id);
                }
                self.dirty.insert((Role::Sender, id));
            }
            found = true;
        }
        if let Some(tx) = self.receivers.get(&id) {
            let up = link(self, tx.id.source);
            let tx = self.receivers.get_mut(&id).expect("present");
            if tx.suspended {
                tx.suspended = false;
                if up {
                    tx.timers.thaw(now);
                }
                let progress = tx.received.prefix();
                self.events.push_back(Event::Resumed { id, progress });
                self.dirty.insert((Role::Receiver, id));
            }
            found = true;
        }
        found
    }

    /// Emit an [`Event::Report`] for a transaction (Report.request).
    pub fn report(&mut self, now: Duration, id: TransactionId) -> bool {
        let summary = if let Some(tx) = self.senders.get(&id) {
            tx.summary(now)
        } else if let Some(tx) = self.receivers.get(&id) {
            tx.summary(now)
        } else {
            return false;
        };
        self.events.push_back(Event::Report { id, summary });
        true
    }

    /// Figures of a transaction in progress (no event; for progress displays).
    pub fn summary(
        &self,
        now: Duration,
        role: Role,
        id: TransactionId,
    ) -> Option<TransactionSummary> {
        match role {
            Role::Sender => self.senders.get(&id).map(|t| t.summary(now)),
            Role::Receiver => self.receivers.get(&id).map(|t| t.summary(now)),
        }
    }

    /// Send a Prompt (NAK if `keep_alive` is false, else Keep Alive) for a class-2 sending
    /// transaction.
    pub fn prompt(&mut self, id: TransactionId, keep_alive: bool) -> bool {
        let Some(tx) = self.senders.get(&id) else {
            return false;
        };
        if tx.mode != TransmissionMode::Acknowledged {
            return false;
        }
        let pdu = tx.prompt_pdu(keep_alive);
        let dest = tx.dest;
        self.signals.push_back(Outgoing {
            dest,
            pdu,
            hook: Hook::None,
        });
        true
    }

    /// Issue the NAKs of a receiving transaction now (the asynchronous NAK mode's manual
    /// trigger; works in every mode).
    pub fn trigger_nak(&mut self, now: Duration, id: TransactionId) -> bool {
        if !self.receivers.contains_key(&id) {
            return false;
        }
        self.issue_full_nak(now, id, true);
        true
    }

    // ------------------------------------------------------------------------------------
    // Input
    // ------------------------------------------------------------------------------------

    /// Handle one received PDU.
    pub fn handle_pdu(&mut self, now: Duration, bytes: &Bytes) -> Result<(), PduError> {
        self.stats.pdus_received += 1;
        let pdu = match Pdu::decode(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.stats.malformed_pdus += 1;
                return Err(e.into());
            }
        };
        let h = pdu.header;
        let local = self.cfg.local_id;
        let (expected, role) = match h.direction {
            Direction::TowardReceiver => (h.dest, Role::Receiver),
            Direction::TowardSender => (h.source, Role::Sender),
        };
        if expected != local {
            self.stats.misrouted_pdus += 1;
            return Err(PduError::NotForUs {
                dest: expected,
                local,
            });
        }
        match role {
            Role::Receiver => self.receiver_input(now, pdu),
            Role::Sender => self.sender_input(now, pdu),
        }
        Ok(())
    }

    /// Earliest time at which `handle_timeout` (or `poll_transmit`, for pacing) has work.
    pub fn poll_timeout(&mut self) -> Option<Duration> {
        let timers = self
            .senders
            .values()
            .filter_map(|t| t.timers.next())
            .chain(self.receivers.values().filter_map(|t| t.timers.next()))
            .min();
        let closed = self
            .closed_order
            .front()
            .and_then(|k| self.closed.get(k))
            .map(|c| c.at + self.cfg.closed_memory);
        let pacing = self.pacing_wakeup();
        [timers, closed, pacing].into_iter().flatten().min()
    }

    fn pacing_wakeup(&mut self) -> Option<Duration> {
        // Only remotes with something to send and a rate limit matter; their `last` time is
        // the latest `now` seen, which is good enough for a wake-up estimate.
        let mut wake: Option<Duration> = None;
        let mut dests: Vec<EntityId> = self.signals.iter().map(|o| o.dest).collect();
        dests.extend(
            self.data_rr
                .iter()
                .filter_map(|id| self.senders.get(id))
                .filter(|t| t.has_data())
                .map(|t| t.dest),
        );
        dests.sort_unstable();
        dests.dedup();
        for d in dests {
            if let Some(r) = self.remotes.get_mut(&d) {
                if r.link_up {
                    let last = r.pacer_last();
                    if let Some(t) = r.pacer.ready_at(last) {
                        wake = Some(wake.map_or(t, |w: Duration| w.min(t)));
                    }
                }
            }
        }
        wake
    }

    /// Handle every timer that has expired at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        // Sorted: the order transactions are served in must not depend on hashing, or two
        // simulations with one seed would differ when several deadlines fall together.
        let mut sender_ids: Vec<TransactionId> = self
            .senders
            .iter()
            .filter(|(_, t)| t.timers.next().is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        sender_ids.sort_unstable();
        for id in sender_ids {
            self.sender_timeout(now, id);
        }
        let mut receiver_ids: Vec<TransactionId> = self
            .receivers
            .iter()
            .filter(|(_, t)| t.timers.next().is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        receiver_ids.sort_unstable();
        for id in receiver_ids {
            self.receiver_timeout(now, id);
        }
        while let Some(k) = self.closed_order.front().copied() {
            match self.closed.get(&k) {
                Some(c) if c.at + self.cfg.closed_memory <= now => {
                    self.closed.remove(&k);
                    self.closed_order.pop_front();
                }
                Some(_) => break,
                None => {
                    self.closed_order.pop_front();
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------
    // Output
    // ------------------------------------------------------------------------------------

    /// Append the next PDU to `buf` (directives first, then file data round-robin across
    /// sending transactions, all paced per remote). None when nothing may leave now.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<Transmit> {
        // Directives.
        let mut i = 0;
        while i < self.signals.len() {
            let dest = self.signals[i].dest;
            let ready = {
                let r = self.remote(dest);
                r.link_up && r.pacer.ready_at(now).is_none()
            };
            if !ready {
                i += 1;
                continue;
            }
            let out = self.signals.remove(i).expect("index checked");
            let start = buf.len();
            match out.pdu.encode(buf) {
                Ok(len) => {
                    self.sent(now, dest, len);
                    match (&out.pdu.body, out.hook) {
                        (PduBody::Nak(nak), Hook::NakSent(id)) => {
                            self.stats.naks_sent += 1;
                            self.nak_sent(now, id, &nak.segments);
                        }
                        (PduBody::Nak(_), hook) => {
                            self.stats.naks_sent += 1;
                            self.run_hook(now, hook);
                        }
                        (_, hook) => self.run_hook(now, hook),
                    }
                    return Some(Transmit { dest, len });
                }
                Err(_) => {
                    // A value that does not fit was caught at `put`; never send garbage.
                    buf.truncate(start);
                    continue;
                }
            }
        }
        // File data.
        let n = self.data_rr.len();
        for _ in 0..n {
            let id = self.data_rr.pop_front()?;
            let Some(tx) = self.senders.get(&id) else {
                continue;
            };
            if !tx.has_data() {
                // Re-enters the rotation when a NAK or resume gives it data again.
                continue;
            }
            let dest = tx.dest;
            let ready = {
                let r = self.remote(dest);
                r.link_up && r.pacer.ready_at(now).is_none()
            };
            self.data_rr.push_back(id);
            if !ready {
                continue;
            }
            if let Some(len) = self.send_file_data(now, id, buf) {
                self.sent(now, dest, len);
                return Some(Transmit { dest, len });
            }
        }
        None
    }

    fn sent(&mut self, now: Duration, dest: EntityId, len: usize) {
        self.stats.pdus_sent += 1;
        self.stats.bytes_sent += len as u64;
        let r = self.remote(dest);
        r.pacer.charge(now, len);
    }

    fn run_hook(&mut self, now: Duration, hook: Hook) {
        match hook {
            Hook::None => {}
            Hook::EofSent(id) => self.eof_sent(now, id),
            Hook::FinishedSent(id) => self.finished_sent(now, id),
            Hook::NakSent(id) => self.nak_sent(now, id, &[]),
        }
    }

    // ------------------------------------------------------------------------------------
    // Faults (§4.8)
    // ------------------------------------------------------------------------------------

    fn handler_for(&self, role: Role, id: TransactionId, condition: ConditionCode) -> FaultHandler {
        let overrides = match role {
            Role::Sender => self.senders.get(&id).map(|t| &t.overrides),
            Role::Receiver => self.receivers.get(&id).map(|t| &t.overrides),
        };
        overrides
            .and_then(|o| o.get(&condition).copied())
            .unwrap_or_else(|| self.cfg.handler(condition))
    }

    /// Raise a fault on a transaction and apply its handler.
    fn fault(&mut self, now: Duration, role: Role, id: TransactionId, condition: ConditionCode) {
        let handler = self.handler_for(role, id, condition);
        self.stats.faults += 1;
        self.events.push_back(Event::Fault {
            id,
            condition,
            handler,
        });
        self.apply_handler(now, role, id, condition, handler);
    }

    fn apply_handler(
        &mut self,
        now: Duration,
        role: Role,
        id: TransactionId,
        condition: ConditionCode,
        handler: FaultHandler,
    ) {
        match handler {
            FaultHandler::Ignore => {}
            FaultHandler::Abandon => self.abandon_tx(now, role, id, condition),
            FaultHandler::Suspend => self.suspend_tx(now, role, id, condition),
            FaultHandler::Cancel => match role {
                Role::Sender => self.cancel_sender(now, id, condition),
                Role::Receiver => self.cancel_receiver(now, id, condition),
            },
        }
    }

    fn suspend_tx(
        &mut self,
        now: Duration,
        role: Role,
        id: TransactionId,
        condition: ConditionCode,
    ) {
        let done = match role {
            Role::Sender => self.senders.get_mut(&id).map(|t| {
                let was = t.suspended;
                t.suspended = true;
                t.timers.freeze(now);
                was
            }),
            Role::Receiver => self.receivers.get_mut(&id).map(|t| {
                let was = t.suspended;
                t.suspended = true;
                t.timers.freeze(now);
                was
            }),
        };
        if done == Some(false) {
            self.events.push_back(Event::Suspended { id, condition });
            self.dirty.insert((role, id));
        }
    }

    fn abandon_tx(
        &mut self,
        now: Duration,
        role: Role,
        id: TransactionId,
        condition: ConditionCode,
    ) {
        let (header, mode, summary) = match role {
            Role::Sender => match self.senders.remove(&id) {
                Some(t) => {
                    self.data_rr.retain(|x| *x != id);
                    if let Some(src) = &t.source {
                        self.fs.close(src);
                    }
                    (t.header, t.mode, t.summary(now))
                }
                None => return,
            },
            Role::Receiver => match self.receivers.remove(&id) {
                Some(t) => {
                    self.release_claim(&t);
                    self.fs.close(&t.partial);
                    let keep =
                        self.cfg.keep_incomplete && t.mode == TransmissionMode::Unacknowledged;
                    if t.partial_created && !keep {
                        let _ = self.fs.remove_file(&t.partial);
                    }
                    (t.header, t.mode, t.summary(now))
                }
                None => return,
            },
        };
        self.signals.retain(|o| !pdu_of(&o.pdu, id));
        self.stats.transactions_failed += 1;
        self.remember_closed(now, role, id, condition, mode, header);
        self.events.push_back(Event::Abandoned {
            id,
            condition,
            summary,
        });
    }

    fn remember_closed(
        &mut self,
        now: Duration,
        role: Role,
        id: TransactionId,
        _condition: ConditionCode,
        mode: TransmissionMode,
        header: PduHeader,
    ) {
        self.dirty.insert((role, id));
        if self.closed.len() >= MAX_CLOSED {
            if let Some(k) = self.closed_order.pop_front() {
                self.closed.remove(&k);
            }
        }
        self.closed.insert(
            (role, id),
            Closed {
                at: now,
                mode,
                header,
            },
        );
        self.closed_order.push_back((role, id));
    }

    fn queue(&mut self, dest: EntityId, pdu: Pdu, hook: Hook) {
        self.signals.push_back(Outgoing { dest, pdu, hook });
    }

    // ------------------------------------------------------------------------------------
    // Persistence
    // ------------------------------------------------------------------------------------

    /// Transactions whose persistent state changed since the last call. For each, the
    /// driver stores [`Entity::snapshot`] (or deletes its stored state when that is None: the
    /// transaction ended).
    pub fn take_dirty(&mut self) -> Vec<(Role, TransactionId)> {
        std::mem::take(&mut self.dirty).into_iter().collect()
    }

    /// The persistent state of a transaction in progress (class 2 only: class-1 transfers
    /// are not resumed after a restart).
    pub fn snapshot(&self, role: Role, id: TransactionId) -> Option<Snapshot> {
        match role {
            Role::Sender => self.senders.get(&id).and_then(SendTx::snapshot),
            Role::Receiver => self.receivers.get(&id).and_then(RecvTx::snapshot),
        }
    }

    /// Re-install a transaction from a snapshot taken before a restart. Timers restart
    /// from `now`; a receiver NAKs what it misses at once, a sender continues where it was
    /// (its checksum is recomputed from the source file).
    pub fn restore(
        &mut self,
        now: Duration,
        snap: Snapshot,
    ) -> Result<TransactionId, PersistError> {
        match snap {
            Snapshot::Sender(s) => {
                let id = s.id;
                let rc = self.remote(s.dest).cfg.clone();
                let tx = SendTx::restore(now, *s, rc, self.fs.as_mut())?;
                if id.source == self.cfg.local_id && id.seq >= self.next_seq {
                    self.next_seq = id.seq.wrapping_add(1).max(1);
                }
                self.install_sender(now, tx, false);
                Ok(id)
            }
            Snapshot::Receiver(r) => {
                let id = r.id;
                let rc = self.remote(r.id.source).cfg.clone();
                let mut tx = RecvTx::restore(now, *r, rc);
                if self.cfg.honour_nak_hint {
                    if let Some(mode) = tx.metadata.as_ref().and_then(receiver::nak_hint) {
                        tx.rc.nak_mode = mode;
                    }
                }
                self.receivers.insert(id, tx);
                // Restored receptions are charged whatever the budgets say (they were
                // admitted before the restart).
                let saved = (self.cfg.partial_budget, self.cfg.partial_budget_per_peer);
                (self.cfg.partial_budget, self.cfg.partial_budget_per_peer) = (u64::MAX, u64::MAX);
                self.charge(id, 0);
                (self.cfg.partial_budget, self.cfg.partial_budget_per_peer) = saved;
                if !self.link_up(id.source) {
                    if let Some(t) = self.receivers.get_mut(&id) {
                        t.timers.freeze(now);
                    }
                }
                self.after_restore_receiver(now, id);
                Ok(id)
            }
        }
    }

    fn install_sender(&mut self, now: Duration, mut tx: SendTx, fresh: bool) {
        let id = tx.id;
        let dest = tx.dest;
        if fresh {
            for pdu in tx.initial_pdus() {
                self.queue(dest, pdu, Hook::None);
            }
        }
        if !self.link_up(dest) || tx.suspended {
            tx.timers.freeze(now);
        }
        let eof_now = tx.first_pass_done() && !tx.eof_queued;
        self.senders.insert(id, tx);
        self.data_rr.push_back(id);
        if eof_now {
            self.queue_eof(id);
        }
        self.dirty.insert((Role::Sender, id));
    }
}

/// Whether a queued PDU belongs to transaction `id`.
fn pdu_of(pdu: &Pdu, id: TransactionId) -> bool {
    pdu.header.transaction() == id
}

impl RemoteState {
    fn pacer_last(&self) -> Duration {
        self.pacer.last()
    }
}

/// Build a header for a transaction's PDUs, with widths wide enough for its values.
pub(crate) fn make_header(
    rc: &RemoteConfig,
    id: TransactionId,
    dest: EntityId,
    mode: TransmissionMode,
    large_file: bool,
) -> PduHeader {
    // Widths are kept to 1, 2, 4 or 8 octets: CCSDS allows any from 1 to 8, but deployed
    // entities (cfdp-py, spacepackets) only decode power-of-two widths.
    let pow2 = |w: u8| match w {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => 8,
    };
    let width = |v: u64| pow2(((64 - v.leading_zeros()).div_ceil(8)) as u8);
    PduHeader {
        direction: Direction::TowardReceiver,
        mode,
        crc: rc.crc,
        large_file,
        segmentation_control: false,
        entity_id_len: pow2(rc.entity_id_len)
            .max(width(id.source))
            .max(width(dest)),
        seq_len: pow2(rc.seq_len).max(width(id.seq)),
        source: id.source,
        seq: id.seq,
        dest,
    }
}

/// Read `[from, to)` of `path` through the filestore into `cks`, in chunks.
pub(crate) fn checksum_tail(
    fs: &mut dyn Filestore,
    path: &str,
    cks: &mut crate::checksum::Checksum,
    to: u64,
) -> Result<(), FilestoreError> {
    let mut buf = vec![0u8; CHECKSUM_CHUNK];
    while cks.offset() < to {
        let n = ((to - cks.offset()) as usize).min(CHECKSUM_CHUNK);
        fs.read_at(path, cks.offset(), &mut buf[..n])?;
        cks.update(&buf[..n]);
    }
    Ok(())
}
