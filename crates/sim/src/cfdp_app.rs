//! CFDP file transfers in the simulator (`[[cfdp]]`): one real `cfdp::Entity` per node that takes part (entity
//! id = node number, a `cfdp::MemFilestore` holding synthetic source files), driven in virtual time like the LTP
//! engine.
//!
//! - **link** transport: each PDU is one datagram on the scenario's link between the two nodes: it crosses the
//!   link direction with `channel::LinkDirection::transit(now, len)` exactly as an LTP datagram does (same rate
//!   queue, availability, loss by length, delay) and goes through the receiving node's modelled receive pipeline
//!   and CPU (`[node.processing]`).
//! - **bp** transport: the entity is an application of its node's bundle layer, as `dtnkit cfdp --node` is of a
//!   real node: endpoint `ipn:NODE.SERVICE`, one PDU per bundle to `ipn:PEER.SERVICE`, PDUs of delivered bundles
//!   handed to the entity.
//!
//! The receiving entity can be told when the link direction toward the sender becomes available or
//! unavailable (`async_link_signal`): an [`AvailabilityWatch`] replays that direction's availability process with
//! the link's own seed, so the signal times are exactly the instants the channel model switches.
//!
//! Results per transfer ([`CfdpTransferResult`]) come from the entities' events and from the PDUs the simulator
//! sees leave and reach the entities.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use cfdp::filestore::{synthetic_byte, Filestore};
use cfdp::pdu::{ConditionCode, Direction, Pdu, PduBody, TransactionId, TransmissionMode};
use cfdp::rangeset::RangeSet;
use cfdp::{
    Entity, EntityConfig, Event, MemFilestore, NakMode, PutError, PutRequest, RemoteConfig,
};
use channel::availability::{Availability, AvailabilityProcess};
use channel::config::AvailabilityConfig;
use channel::DirectionModel;
use serde::Serialize;

use crate::node::{Ctx, Datagram, Node, Proto};
use crate::scenario::{
    cfdp_checksum, millis, secs, CfdpSection, CfdpTransport, Colour, ContactSection, Scenario,
};

/// How the PDUs for one remote entity travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// One datagram per PDU on the link to the remote node.
    Link,
    /// One bundle per PDU from `ipn:LOCAL.service` to `ipn:REMOTE.service`.
    Bp {
        service: u64,
        red: bool,
        lifetime_ms: u64,
    },
}

/// The state changes of one link direction's availability, replayed from its model and seed.
///
/// The process is a second instance of the one inside the link direction (same model, same seed and direction
/// index, hence the same random stream); its changes are found by probing the instants at which the state can
/// change: window edges of a schedule, step boundaries of the Markov chain.
pub struct AvailabilityWatch {
    process: AvailabilityProcess,
    kind: WatchKind,
    /// Markov chain leave probabilities (up → down, down → up): a state that cannot be left ends the search.
    leave: (f64, f64),
    up: bool,
    next: Option<Duration>,
    horizon: Duration,
}

enum WatchKind {
    Never,
    Steps(Duration),
    Edges {
        edges: Vec<Duration>,
        period: Option<Duration>,
    },
}

impl AvailabilityWatch {
    /// Watches `model` as seeded in a link with `seed` for direction number `direction`
    /// (`channel::Direction as u64`); `period` is the repeat period of a schedule (its `repeat_s`); changes after
    /// `horizon` are not looked for.
    pub fn new(
        model: Availability,
        period: Option<Duration>,
        seed: u64,
        direction: u64,
        horizon: Duration,
    ) -> Self {
        let (kind, leave) = match &model {
            Availability::Always => (WatchKind::Never, (0.0, 0.0)),
            Availability::Markov(m) => (WatchKind::Steps(m.step), (m.q, m.p)),
            Availability::Schedule(s) => {
                let mut edges: Vec<Duration> =
                    s.windows().iter().flat_map(|&(a, b)| [a, b]).collect();
                edges.sort_unstable();
                edges.dedup();
                (WatchKind::Edges { edges, period }, (1.0, 1.0))
            }
        };
        let mut process = AvailabilityProcess::new(model, seed, direction);
        let up = process.is_up(Duration::ZERO);
        let mut w = AvailabilityWatch {
            process,
            kind,
            leave,
            up,
            next: None,
            horizon,
        };
        w.next = w.find_next(Duration::ZERO);
        w
    }

    /// The state at time zero, or after the last [`AvailabilityWatch::advance`].
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// When the state changes next (None: never before the horizon).
    pub fn next_change(&self) -> Option<Duration> {
        self.next
    }

    /// Moves to the next change: returns its time and the new state.
    pub fn advance(&mut self) -> Option<(Duration, bool)> {
        let t = self.next?;
        self.up = !self.up;
        self.next = self.find_next(t);
        Some((t, self.up))
    }

    /// First instant after `after` at which the state may change.
    fn candidate(&self, after: Duration) -> Option<Duration> {
        let ns = after.as_nanos();
        let t = match &self.kind {
            WatchKind::Never => return None,
            WatchKind::Steps(step) => {
                let s = step.as_nanos().max(1);
                (ns / s + 1) * s
            }
            WatchKind::Edges {
                edges,
                period: None,
            } => edges.iter().map(Duration::as_nanos).find(|&e| e > ns)?,
            WatchKind::Edges {
                edges,
                period: Some(p),
            } => {
                let p = p.as_nanos().max(1);
                let base = ns / p * p;
                [base, base + p]
                    .into_iter()
                    .find_map(|b| edges.iter().map(|e| b + e.as_nanos()).find(|&t| t > ns))?
            }
        };
        u64::try_from(t).ok().map(Duration::from_nanos)
    }

    fn find_next(&mut self, mut after: Duration) -> Option<Duration> {
        let leave = if self.up { self.leave.0 } else { self.leave.1 };
        if leave <= 0.0 {
            return None;
        }
        loop {
            let t = self.candidate(after)?;
            if t > self.horizon {
                return None;
            }
            if self.process.is_up(t) != self.up {
                return Some(t);
            }
            after = t;
        }
    }
}

/// Signals the availability of the link direction toward `remote` to the entity.
pub(crate) struct LinkSignal {
    pub(crate) remote: u64,
    pub(crate) watch: AvailabilityWatch,
}

/// The CFDP application of a node.
pub(crate) struct CfdpApp {
    pub(crate) entity: Entity,
    pub(crate) routes: BTreeMap<u64, Route>,
    /// Services registered for the `bp` transport.
    pub(crate) services: Vec<u64>,
    pub(crate) signals: Vec<LinkSignal>,
    /// Per remote with signals or contacts: (contact window open, direction available); the entity's link
    /// toward it is up when both are.
    pub(crate) link: BTreeMap<u64, (bool, bool)>,
    /// Puts scheduled and not yet issued.
    pub(crate) pending_puts: u32,
    /// Transfers this node receives whose file has not been delivered yet.
    pub(crate) receiving: Vec<usize>,
}

impl CfdpApp {
    /// Updates one of the two conditions of the link toward `remote` and tells the entity if its state changed.
    pub(crate) fn set_condition(
        &mut self,
        now: Duration,
        remote: u64,
        contact: Option<bool>,
        avail: Option<bool>,
    ) {
        let e = self.link.entry(remote).or_insert((true, true));
        let before = e.0 && e.1;
        if let Some(c) = contact {
            e.0 = c;
        }
        if let Some(a) = avail {
            e.1 = a;
        }
        let after = e.0 && e.1;
        if before != after {
            self.entity.set_link(now, remote, after);
        }
    }

    /// Earliest time the application needs to run on its own.
    pub(crate) fn next_wake(&mut self) -> Option<Duration> {
        let sig = self
            .signals
            .iter()
            .filter_map(|s| s.watch.next_change())
            .min();
        [self.entity.poll_timeout(), sig]
            .into_iter()
            .flatten()
            .min()
    }

    /// Nothing in progress and nothing scheduled.
    pub(crate) fn is_quiet(&self) -> bool {
        self.pending_puts == 0 && self.entity.is_idle()
    }
}

/// A link direction's availability: its state at time zero and its changes (time, up), ascending.
pub(crate) type StateChanges = std::sync::Arc<(bool, Vec<(Duration, bool)>)>;

/// What a transfer is (from the scenario).
#[derive(Debug, Clone)]
pub(crate) struct TransferSpec {
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) transport: CfdpTransport,
    pub(crate) class: u8,
    pub(crate) file_size: u64,
    pub(crate) segment: usize,
    /// Source and destination file name.
    pub(crate) name: String,
    /// Seed of the synthetic source content.
    pub(crate) seed: u64,
    /// Rate of the first link direction (the throughput reference), bit/s.
    pub(crate) link_rate_bps: Option<f64>,
    /// One-way delay of the first link direction, seconds.
    pub(crate) link_delay_s: f64,
    /// Headers the layers below add on the first link direction (wire bytes of a PDU).
    pub(crate) overhead: channel::link::Overhead,
    /// One-way delay of the link direction back from the receiver (link transport), seconds.
    pub(crate) return_delay_s: f64,
    /// Availability of that direction when it is not always up: its state at time zero and its changes.
    pub(crate) return_changes: Option<StateChanges>,
    /// Class 1 with closure: the sender waits for Finished.
    pub(crate) closure: bool,
    /// CFDP store-and-forward: the transfer whose delivered file this one sends on.
    pub(crate) relay_of: Option<usize>,
    /// Earliest put time.
    pub(crate) start: Duration,
}

#[derive(Debug, Clone, Copy)]
struct End {
    at: Duration,
    condition: Option<ConditionCode>,
}

/// Everything recorded about one transfer.
#[derive(Debug)]
pub(crate) struct TransferState {
    pub(crate) spec: TransferSpec,
    id: Option<TransactionId>,
    put_at: Option<Duration>,
    put_error: Option<String>,
    sender_end: Option<End>,
    receiver_end: Option<End>,
    delivered_at: Option<Duration>,
    content_ok: bool,
    last_rx_at: Option<Duration>,
    fd_sent: u64,
    /// Wire bytes of the first-pass File Data PDUs, of all sent, and of all received.
    wire_first: u64,
    wire_sent: u64,
    wire_received: u64,
    fd_retx: u64,
    fd_copies: u64,
    bytes_retx: u64,
    hwm: u64,
    fd_received: u64,
    /// Per File Data offset (link transport): wire bytes of one copy, copies sent, copies received.
    units: BTreeMap<u64, (u64, u32, u32)>,
    received: RangeSet,
    unique_received: u64,
    nak_times: Vec<Duration>,
    signals: Vec<(Duration, bool)>,
    faults: u64,
}

/// The transfers of a run, indexed by transaction id once put.
#[derive(Debug, Default)]
pub(crate) struct TransferBook {
    pub(crate) transfers: Vec<TransferState>,
    by_id: BTreeMap<TransactionId, usize>,
    /// A transfer ended since the flag was last cleared (the run checks whether everything is quiet).
    pub(crate) ended: bool,
    /// Puts of relaying transfers whose file has just been delivered at their sender: (put time, transfer).
    /// The world schedules them.
    pub(crate) relay_puts: Vec<(Duration, usize)>,
}

fn condition_name(c: Option<ConditionCode>) -> String {
    match c {
        Some(c) => format!("{c:?}"),
        None => "Abandoned".into(),
    }
}

impl TransferBook {
    /// Adds a transfer (in scenario order).
    pub(crate) fn add(&mut self, spec: TransferSpec) {
        self.transfers.push(TransferState {
            spec,
            id: None,
            put_at: None,
            put_error: None,
            sender_end: None,
            receiver_end: None,
            delivered_at: None,
            content_ok: false,
            last_rx_at: None,
            fd_sent: 0,
            wire_first: 0,
            wire_sent: 0,
            wire_received: 0,
            fd_retx: 0,
            fd_copies: 0,
            bytes_retx: 0,
            hwm: 0,
            fd_received: 0,
            units: BTreeMap::new(),
            received: RangeSet::new(),
            unique_received: 0,
            nak_times: Vec::new(),
            signals: Vec::new(),
            faults: 0,
        });
    }

    fn index(&self, id: TransactionId) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    /// The put of transfer `k` was issued.
    pub(crate) fn put(&mut self, k: usize, now: Duration, r: Result<TransactionId, PutError>) {
        let Some(t) = self.transfers.get_mut(k) else {
            return;
        };
        t.put_at = Some(now);
        match r {
            Ok(id) => {
                t.id = Some(id);
                self.by_id.insert(id, k);
            }
            Err(e) => {
                t.put_error = Some(format!("put refused: {e}"));
                self.ended = true;
            }
        }
    }

    /// An indication of the entity of `node`.
    pub(crate) fn on_event(&mut self, now: Duration, node: u64, ev: &Event) {
        let (id, end, role_sender) = match ev {
            Event::Finished {
                id,
                role,
                condition,
                ..
            } => (
                *id,
                Some(End {
                    at: now,
                    condition: Some(*condition),
                }),
                *role == cfdp::Role::Sender,
            ),
            Event::Abandoned { id, .. } => (
                *id,
                Some(End {
                    at: now,
                    condition: None,
                }),
                id.source == node,
            ),
            Event::Fault { id, .. } => {
                if let Some(t) = self.index(*id).and_then(|k| self.transfers.get_mut(k)) {
                    t.faults += 1;
                }
                return;
            }
            _ => return,
        };
        let Some(t) = self.index(id).and_then(|k| self.transfers.get_mut(k)) else {
            return;
        };
        let slot = if role_sender {
            &mut t.sender_end
        } else {
            &mut t.receiver_end
        };
        if slot.is_none() {
            *slot = end;
            self.ended = true;
        }
    }

    /// A PDU left the entity of `node`.
    pub(crate) fn on_sent(&mut self, now: Duration, node: u64, data: &Bytes) {
        let Ok(pdu) = Pdu::decode(data) else {
            return;
        };
        let Some(t) = self
            .index(pdu.header.transaction())
            .and_then(|k| self.transfers.get_mut(k))
        else {
            return;
        };
        match (&pdu.body, pdu.header.direction) {
            (PduBody::FileData(fd), Direction::TowardReceiver) if t.spec.from == node => {
                t.fd_sent += 1;
                let wire = t.spec.overhead.wire_len(data.len()) as u64;
                t.wire_sent += wire;
                if t.spec.transport == CfdpTransport::Link {
                    let u = t.units.entry(fd.offset).or_insert((wire, 0, 0));
                    u.1 += 1;
                }
                let len = fd.data.len() as u64;
                if fd.offset >= t.hwm {
                    t.hwm = fd.offset + len;
                    t.wire_first += wire;
                } else if t.spec.class == 1 {
                    t.fd_copies += 1;
                } else {
                    t.fd_retx += 1;
                    t.bytes_retx += len;
                }
            }
            (PduBody::Nak(_), Direction::TowardSender) if t.spec.to == node => {
                t.nak_times.push(now);
            }
            _ => {}
        }
    }

    /// A PDU is handed to the entity of `node`.
    pub(crate) fn on_received(&mut self, now: Duration, node: u64, data: &Bytes) {
        let Ok(pdu) = Pdu::decode(data) else {
            return;
        };
        if pdu.header.direction != Direction::TowardReceiver || pdu.header.dest != node {
            return;
        }
        let Some(t) = self
            .index(pdu.header.transaction())
            .and_then(|k| self.transfers.get_mut(k))
        else {
            return;
        };
        t.last_rx_at = Some(now);
        if let PduBody::FileData(fd) = &pdu.body {
            t.fd_received += 1;
            t.wire_received += t.spec.overhead.wire_len(data.len()) as u64;
            if let Some(u) = t.units.get_mut(&fd.offset) {
                u.2 += 1;
            }
            let end = fd.offset.saturating_add(fd.data.len() as u64);
            if t.received.insert(fd.offset..end) > 0 {
                t.unique_received += 1;
            }
        }
    }

    /// The entity of `node` was told that its link toward `remote` changed.
    pub(crate) fn on_signal(&mut self, at: Duration, node: u64, remote: u64, up: bool) {
        for t in &mut self.transfers {
            if t.spec.to == node && t.spec.from == remote {
                t.signals.push((at, up));
            }
        }
    }

    /// Checks whether transfer `k`'s file has been delivered in `fs` (the receiver's filestore); if so, compares
    /// it with the source byte for byte, then deletes it to free the memory. Returns true once delivered.
    ///
    /// A transfer that relays `k` (`relay_of`) takes the delivered file over as its source once it is verified
    /// (so a chain holds its file in memory at each relay until the run ends), and its put is queued in
    /// `relay_puts`. A file that arrived corrupted is not relayed.
    pub(crate) fn check_delivery(
        &mut self,
        now: Duration,
        k: usize,
        fs: &mut dyn Filestore,
    ) -> bool {
        let Some(t) = self.transfers.get_mut(k) else {
            return true;
        };
        if t.delivered_at.is_some() {
            return true;
        }
        if t.id.is_none() || !fs.exists(&t.spec.name) {
            return false;
        }
        t.delivered_at = Some(now);
        t.content_ok = verify(fs, &t.spec.name, t.spec.file_size, t.spec.seed);
        let (name, ok) = (t.spec.name.clone(), t.content_ok);
        self.ended = true;
        // The relays send on the very bytes delivered here (true store-and-forward): the first takes the file
        // over under its own name, the others get copies.
        let relays: Vec<usize> = (0..self.transfers.len())
            .filter(|&j| {
                ok && self
                    .transfers
                    .get(j)
                    .is_some_and(|r| r.spec.relay_of == Some(k))
            })
            .collect();
        let mut kept: Option<String> = None;
        for j in relays {
            let Some(r) = self.transfers.get(j) else {
                continue;
            };
            let placed = match &kept {
                None => fs.rename(&name, &r.spec.name),
                Some(first) => fs
                    .create(&r.spec.name)
                    .and_then(|()| fs.append(&r.spec.name, first)),
            };
            if placed.is_ok() {
                kept.get_or_insert_with(|| r.spec.name.clone());
                self.relay_puts.push((now.max(r.spec.start), j));
            }
        }
        if kept.is_none() {
            let _ = fs.remove_file(&name);
        }
        true
    }

    /// Put time of the first transfer of `k`'s relay chain (`k` itself when it relays nothing).
    fn chain_start(&self, k: usize) -> Option<Duration> {
        let mut k = k;
        // relay_of always names an earlier transfer (validated), so the walk ends.
        while let Some(j) = self.transfers.get(k).and_then(|t| t.spec.relay_of) {
            k = j;
        }
        self.transfers.get(k).and_then(|t| t.put_at)
    }

    /// NAK send times of transfer `k`.
    pub(crate) fn nak_times(&self, k: usize) -> &[Duration] {
        self.transfers.get(k).map_or(&[], |t| &t.nak_times)
    }

    /// Link signals given to the receiver of transfer `k`: (time, up).
    pub(crate) fn signals(&self, k: usize) -> &[(Duration, bool)] {
        self.transfers.get(k).map_or(&[], |t| &t.signals)
    }

    /// The results so far.
    pub(crate) fn results(&self) -> Vec<CfdpTransferResult> {
        self.transfers
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let mut r = t.result(k);
                r.end_to_end_delivery_s = t
                    .delivered_at
                    .zip(self.chain_start(k))
                    .map(|(d, s)| d.saturating_sub(s).as_secs_f64());
                r
            })
            .collect()
    }
}

/// Compares a delivered file with the synthetic source (`seed`), in 1 MiB chunks.
fn verify(fs: &mut dyn Filestore, name: &str, size: u64, seed: u64) -> bool {
    if fs.size(name).ok() != Some(size) {
        return false;
    }
    let mut buf = vec![0u8; (1 << 20).min(size as usize)];
    let mut off = 0u64;
    while off < size {
        let n = ((size - off) as usize).min(buf.len());
        let Some(chunk) = buf.get_mut(..n) else {
            return false;
        };
        if fs.read_at(name, off, chunk).is_err() {
            return false;
        }
        if chunk
            .iter()
            .enumerate()
            .any(|(i, &b)| b != synthetic_byte(seed, off + i as u64))
        {
            return false;
        }
        off += n as u64;
    }
    true
}

impl TransferState {
    /// The selective-repeat bound of a class-2 transfer over a link ([`crate::bound::windowed`]): the
    /// serialization of the first pass and of every erased copy, each erased unit's NAK chain through the return
    /// direction's windows, and the Finished's wait for that direction.
    fn bound(&self, rate: f64, erased_wire_bytes: u64) -> f64 {
        use crate::bound::{realised, windowed, ErasedUnit, UpWindows};
        let s = &self.spec;
        let serial = realised(self.wire_first, erased_wire_bytes, rate, s.link_delay_s);
        let mut sent_through = 0u64;
        let mut units = Vec::new();
        for &(wire, sent, received) in self.units.values() {
            sent_through += wire;
            let erasures = sent.saturating_sub(received);
            if erasures > 0 {
                units.push(ErasedUnit {
                    first_due_s: sent_through as f64 * 8.0 / rate + s.link_delay_s,
                    serialization_s: wire as f64 * 8.0 / rate,
                    erasures,
                });
            }
        }
        let up = match (&s.return_changes, self.put_at) {
            (Some(c), Some(put)) => UpWindows::from_changes(c.0, &c.1, put),
            _ => UpWindows::always(),
        };
        windowed(serial, &units, s.link_delay_s, s.return_delay_s, &up)
    }

    fn result(&self, index: usize) -> CfdpTransferResult {
        let s = &self.spec;
        let since = |t: Option<Duration>| {
            t.zip(self.put_at)
                .map(|(t, p)| t.saturating_sub(p).as_secs_f64())
        };
        let file_pdus = s.file_size.div_ceil(s.segment.max(1) as u64);
        let sender_ok = self
            .sender_end
            .is_some_and(|e| e.condition == Some(ConditionCode::NoError));
        let delivered = self.delivered_at.is_some() && self.content_ok;
        let completed = delivered && (s.class == 1 || sender_ok);
        let sender_finished_s = since(self.sender_end.map(|e| e.at));
        let transfer_s = if s.class == 2 || s.closure {
            sender_finished_s.filter(|_| self.sender_end.is_some())
        } else {
            since(self.last_rx_at)
        };
        let condition = match (&self.put_error, self.sender_end) {
            (Some(e), _) => e.clone(),
            (None, Some(e)) => condition_name(e.condition),
            (None, None) if self.put_at.is_none() => "not started".into(),
            (None, None) => "in progress".into(),
        };
        let receiver_condition = match self.receiver_end {
            Some(e) => condition_name(e.condition),
            None if self.delivered_at.is_some() => "delivered".into(),
            None if self.last_rx_at.is_some() => "in progress".into(),
            None => "not started".into(),
        };
        let received_ratio =
            (s.class == 1 && file_pdus > 0).then(|| self.unique_received as f64 / file_pdus as f64);
        let normalized_throughput = match (transfer_s, s.link_rate_bps) {
            (Some(t), Some(r)) if t > 0.0 && r > 0.0 => Some(s.file_size as f64 * 8.0 / (t * r)),
            _ => None,
        };
        // Erased by the channel: sent and never handed to the receiving entity (link transport: one PDU per
        // datagram; through the bundle layer the layers below recover losses and the bound does not apply).
        let file_data_pdus_erased = self.fd_sent.saturating_sub(self.fd_received);
        let erased_wire_bytes = self.wire_sent.saturating_sub(self.wire_received);
        let bound_s = match (s.transport, s.class, s.link_rate_bps) {
            (CfdpTransport::Link, 2, Some(rate)) => {
                Some(self.bound(rate, erased_wire_bytes)).filter(|b| b.is_finite())
            }
            _ => None,
        };
        CfdpTransferResult {
            index,
            file_data_pdus_erased,
            first_pass_wire_bytes: self.wire_first,
            erased_wire_bytes,
            bound_s,
            relay_of: s.relay_of,
            from: s.from,
            to: s.to,
            transport: s.transport.as_str(),
            class: s.class,
            file_size: s.file_size,
            segment_size: s.segment,
            file_pdus,
            completed,
            condition,
            receiver_condition,
            content_verified: delivered,
            put_s: self.put_at.map(|t| t.as_secs_f64()),
            transfer_s,
            sender_finished_s,
            delivery_s: since(self.delivered_at),
            receiver_finished_s: since(self.receiver_end.map(|e| e.at)),
            end_to_end_delivery_s: None,
            file_data_pdus_sent: self.fd_sent,
            file_data_pdus_retransmitted: self.fd_retx,
            file_data_pdus_repeated: self.fd_copies,
            bytes_retransmitted: self.bytes_retx,
            file_data_pdus_received: self.fd_received,
            unique_pdus_received: self.unique_received,
            duplicate_pdus_received: self.fd_received - self.unique_received,
            naks: self.nak_times.len() as u64,
            faults: self.faults,
            link_signals: self.signals.len() as u64,
            link_rate_bps: s.link_rate_bps,
            normalized_throughput,
            received_ratio,
            weighted_throughput: normalized_throughput
                .zip(received_ratio)
                .map(|(n, r)| n * r),
        }
    }
}

/// Outcome of one `[[cfdp]]` transfer (in [`crate::Summary::cfdp`], scenario order). Times are seconds since
/// the put; `None` (JSON `null`) when the moment did not come.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CfdpTransferResult {
    /// Index in the scenario's `[[cfdp]]` list.
    pub index: usize,
    /// CFDP store-and-forward: the transfer whose delivered file this one sent on.
    pub relay_of: Option<usize>,
    /// Sending node (entity).
    pub from: u64,
    /// Receiving node (entity).
    pub to: u64,
    /// `"link"` or `"bp"`.
    pub transport: &'static str,
    /// CFDP class (1 or 2).
    pub class: u8,
    /// File size, bytes.
    pub file_size: u64,
    /// File data bytes per PDU.
    pub segment_size: usize,
    /// File Data PDUs of one pass over the file.
    pub file_pdus: u64,
    /// The file was delivered complete (byte-identical to the source, checked here after the entity verified its
    /// checksum) and, in class 2, the sender's transaction finished without fault.
    pub completed: bool,
    /// The sender's final condition (`NoError`, a fault such as `NakLimitReached`, `Abandoned`), or
    /// `in progress`, `not started`, `put refused: …`.
    pub condition: String,
    /// The receiver's final condition (or `delivered` while its Finished awaits its ACK, `in progress`,
    /// `not started`).
    pub receiver_condition: String,
    /// The delivered file equals the source byte for byte.
    pub content_verified: bool,
    /// Put time, seconds of simulated time.
    pub put_s: Option<f64>,
    /// Transfer time used for the throughput: class 2 (or class 1 with closure) put → the sender's Finished;
    /// class 1 put → the last PDU of the transfer reaching the receiver.
    pub transfer_s: Option<f64>,
    /// Put → the sender's Finished event (class 1 without closure: right after its EOF left).
    pub sender_finished_s: Option<f64>,
    /// Put → the file delivered at the receiver (checksum verified, file under its name).
    pub delivery_s: Option<f64>,
    /// Put → the receiver's Finished event (class 2: once its Finished PDU was acknowledged).
    pub receiver_finished_s: Option<f64>,
    /// The put of the first transfer of the relay chain (this one when it relays nothing) → this transfer's file
    /// delivered: the end-to-end delivery time of CFDP store-and-forward.
    pub end_to_end_delivery_s: Option<f64>,
    /// File Data PDUs sent (first pass, CFDP-repeat copies and retransmissions).
    pub file_data_pdus_sent: u64,
    /// File Data PDUs sent again after a NAK.
    pub file_data_pdus_retransmitted: u64,
    /// File Data PDUs the channel erased: sent, never handed to the receiving entity (every pass).
    pub file_data_pdus_erased: u64,
    /// Bytes the first pass over the file occupied on the first link direction (PDUs plus lower-layer headers).
    pub first_pass_wire_bytes: u64,
    /// Bytes of the erased File Data PDUs on the link.
    pub erased_wire_bytes: u64,
    /// Class 2 over a link: the selective-repeat lower bound on `transfer_s` for the realised erasures,
    /// [`crate::bound::realised`], seconds.
    pub bound_s: Option<f64>,
    /// CFDP-repeat copies (class 1).
    pub file_data_pdus_repeated: u64,
    /// File data bytes sent again after a NAK.
    pub bytes_retransmitted: u64,
    /// File Data PDUs handed to the receiving entity.
    pub file_data_pdus_received: u64,
    /// Those that brought new bytes.
    pub unique_pdus_received: u64,
    /// Those that brought nothing new.
    pub duplicate_pdus_received: u64,
    /// NAK PDUs sent by the receiver.
    pub naks: u64,
    /// Faults raised by either entity for this transaction.
    pub faults: u64,
    /// Link availability changes signalled to the receiver (`async_link_signal`).
    pub link_signals: u64,
    /// Rate of the sender's first link direction, bit/s (the throughput reference).
    pub link_rate_bps: Option<f64>,
    /// file_size × 8 / (transfer_s × link_rate_bps) (seed 004's N_thr).
    pub normalized_throughput: Option<f64>,
    /// Class 1: unique File Data PDUs received / file_pdus (seed 004's S_ratio for CFDP-repeat).
    pub received_ratio: Option<f64>,
    /// Class 1: normalized_throughput × received_ratio (seed 004's N_thr of CFDP-repeat).
    pub weighted_throughput: Option<f64>,
}

impl Node {
    /// CFDP work due now: link signals, timers, indications, PDUs out, deliveries. Returns true if anything moved.
    pub(crate) fn drive_cfdp(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let now = ctx.now;
        let number = self.number;
        let Some(app) = self.cfdp.as_mut() else {
            return false;
        };
        let mut progress = false;
        let mut changes = Vec::new();
        for s in &mut app.signals {
            while s.watch.next_change().is_some_and(|t| t <= now) {
                if let Some((at, up)) = s.watch.advance() {
                    changes.push((at, s.remote, up));
                }
            }
        }
        for (at, remote, up) in changes {
            ctx.cfdp.on_signal(at, number, remote, up);
            app.set_condition(now, remote, None, Some(up));
            progress = true;
        }
        if app.entity.poll_timeout().is_some_and(|t| t <= now) {
            app.entity.handle_timeout(now);
        }
        while let Some(ev) = app.entity.poll_event() {
            progress = true;
            ctx.cfdp.on_event(now, number, &ev);
        }
        let mut bundles = Vec::new();
        loop {
            ctx.tx_buf.clear();
            let Some(t) = app.entity.poll_transmit(now, ctx.tx_buf) else {
                break;
            };
            progress = true;
            let start = ctx.tx_buf.len().saturating_sub(t.len);
            let pdu = ctx.tx_buf.get(start..).unwrap_or_default();
            if ctx.pool.capacity() < pdu.len() {
                ctx.pool.reserve(256 * 1024);
            }
            ctx.pool.extend_from_slice(pdu);
            let data = ctx.pool.split().freeze();
            ctx.cfdp.on_sent(now, number, &data);
            match app.routes.get(&t.dest) {
                Some(Route::Bp {
                    service,
                    red,
                    lifetime_ms,
                }) => bundles.push((*service, t.dest, data, *red, *lifetime_ms)),
                _ => ctx
                    .outbox
                    .push((t.dest, Datagram::whole(data), Proto::Cfdp)),
            }
        }
        ctx.tx_buf.clear();
        let fs = app.entity.filestore();
        let relays_before = ctx.cfdp.relay_puts.len();
        app.receiving
            .retain(|&k| !ctx.cfdp.check_delivery(now, k, &mut *fs));
        // Puts queued by the world: the entity is not idle until they are issued.
        app.pending_puts += (ctx.cfdp.relay_puts.len() - relays_before) as u32;
        for (service, dest, data, red, lifetime) in bundles {
            self.originate(ctx, service, (dest, service), data, red, lifetime);
        }
        progress
    }

    /// Hands a PDU that arrived (datagram or bundle payload) to the entity.
    pub(crate) fn cfdp_input(&mut self, now: Duration, book: &mut TransferBook, data: &Bytes) {
        let number = self.number;
        if let Some(app) = self.cfdp.as_mut() {
            book.on_received(now, number, data);
            // Malformed or misrouted PDUs are counted by the entity.
            let _ = app.entity.handle_pdu(now, data);
        }
    }
}

/// A link direction of the scenario: (link index, its model, which direction of the link).
fn direction<'a>(
    scn: &Scenario,
    models: &'a [(DirectionModel, DirectionModel)],
    from: u64,
    to: u64,
) -> Option<(usize, &'a DirectionModel, channel::Direction)> {
    scn.links.iter().enumerate().find_map(|(i, l)| {
        let (f, r) = models.get(i)?;
        if (l.a, l.b) == (from, to) {
            Some((i, f, channel::Direction::Forward))
        } else if (l.b, l.a) == (from, to) {
            Some((i, r, channel::Direction::Return))
        } else {
            None
        }
    })
}

/// The neighbour `from` hands bundles for `to` to: its static route, else `to` itself when adjacent.
fn first_hop(scn: &Scenario, from: u64, to: u64) -> Option<u64> {
    let via = scn
        .nodes
        .iter()
        .find(|n| n.number == from)
        .and_then(|n| n.routes.iter().find(|r| r.dest == to).map(|r| r.via));
    via.or_else(|| scn.adjacent(from, to).then_some(to))
}

/// Rate of the first link direction from `from` toward `to` (direct link, or first hop of a route).
fn first_rate(
    scn: &Scenario,
    models: &[(DirectionModel, DirectionModel)],
    from: u64,
    to: u64,
) -> Option<u64> {
    first_direction(scn, models, from, to).and_then(|m| m.rate_bps)
}

/// The link direction `from` sends a transfer to `to` on first.
fn first_direction<'a>(
    scn: &Scenario,
    models: &'a [(DirectionModel, DirectionModel)],
    from: u64,
    to: u64,
) -> Option<&'a DirectionModel> {
    let hop = first_hop(scn, from, to)?;
    direction(scn, models, from, hop).map(|(_, m, _)| m)
}

fn pick<'a, T>(
    list: impl IntoIterator<Item = &'a CfdpSection>,
    f: impl Fn(&CfdpSection) -> Option<T>,
) -> Option<T> {
    list.into_iter().find_map(f)
}

/// Everything the world needs to build the CFDP part of a run.
pub(crate) struct CfdpSetup<'a> {
    pub(crate) scn: &'a Scenario,
    pub(crate) models: &'a [(DirectionModel, DirectionModel)],
    /// Contact windows (scenario and contact plan).
    pub(crate) contacts: &'a [ContactSection],
    /// Seed of link `i` (as given to `channel::Link::new`).
    pub(crate) link_seed: &'a dyn Fn(usize) -> u64,
    /// Seed of the synthetic source file of transfer `k`.
    pub(crate) file_seed: &'a dyn Fn(usize) -> u64,
}

impl CfdpSetup<'_> {
    /// The transfer book of the scenario.
    pub(crate) fn book(&self) -> TransferBook {
        let mut book = TransferBook::default();
        for (k, c) in self.scn.cfdp.iter().enumerate() {
            // A relayed file is the file its chain started with.
            let seed = match c.relay_of {
                Some(j) => book.transfers.get(j).map_or(0, |t| t.spec.seed),
                None => (self.file_seed)(k),
            };
            book.add(TransferSpec {
                from: c.from,
                to: c.to,
                transport: c.transport,
                class: c.class,
                file_size: c.file_size,
                segment: self.merged_segment(c.from, c.to),
                name: file_name(k),
                seed,
                link_rate_bps: first_rate(self.scn, self.models, c.from, c.to).map(|r| r as f64),
                link_delay_s: first_direction(self.scn, self.models, c.from, c.to)
                    .map_or(0.0, |m| m.delay.as_secs_f64()),
                overhead: first_direction(self.scn, self.models, c.from, c.to)
                    .map(|m| m.overhead)
                    .unwrap_or_default(),
                return_delay_s: direction(self.scn, self.models, c.to, c.from)
                    .map_or(0.0, |(_, m, _)| m.delay.as_secs_f64()),
                return_changes: (c.transport == CfdpTransport::Link && c.class == 2)
                    .then(|| self.changes(c.to, c.from))
                    .flatten(),
                closure: c.closure,
                relay_of: c.relay_of,
                start: Duration::try_from_secs_f64(c.start_s).unwrap_or_default(),
            });
        }
        book
    }

    /// The availability of the link direction `from` → `to` (a direct link) when it is not always up: its state at
    /// time zero and every change before the run's end, replayed from the link's seed.
    fn changes(&self, from: u64, to: u64) -> Option<StateChanges> {
        let (i, m, dir) = direction(self.scn, self.models, from, to)?;
        if matches!(m.availability, channel::availability::Availability::Always) {
            return None;
        }
        let period = self.scn.links.get(i).and_then(|l| {
            let conf = match dir {
                channel::Direction::Forward => &l.forward.availability,
                channel::Direction::Return => &l.ret.availability,
            };
            match conf {
                AvailabilityConfig::Schedule {
                    repeat_s: Some(p), ..
                } => Duration::try_from_secs_f64(*p).ok(),
                _ => None,
            }
        });
        let mut w = AvailabilityWatch::new(
            m.availability.clone(),
            period,
            (self.link_seed)(i),
            dir as u64,
            self.scn.duration(),
        );
        let up = w.is_up();
        let mut changes = Vec::new();
        while let Some(c) = w.advance() {
            changes.push(c);
        }
        Some(std::sync::Arc::new((up, changes)))
    }

    fn merged_segment(&self, from: u64, to: u64) -> usize {
        pick(
            self.scn
                .cfdp
                .iter()
                .filter(|c| (c.from, c.to) == (from, to)),
            |c| c.segment_size,
        )
        .unwrap_or(1024)
    }

    /// The CFDP application of node `node`, if it takes part in a transfer; the entity is told at time zero
    /// about links that start down (contact windows, unavailable return direction), and `book` records those
    /// signals.
    pub(crate) fn app(&self, node: u64, book: &mut TransferBook) -> Option<CfdpApp> {
        let scn = self.scn;
        if !scn.cfdp.iter().any(|c| c.from == node || c.to == node) {
            return None;
        }
        let mut remotes: Vec<u64> = scn
            .cfdp
            .iter()
            .filter_map(|c| {
                if c.from == node {
                    Some(c.to)
                } else if c.to == node {
                    Some(c.from)
                } else {
                    None
                }
            })
            .collect();
        remotes.sort_unstable();
        remotes.dedup();
        let mut cfg = EntityConfig::new(node);
        let mut routes = BTreeMap::new();
        let mut services = Vec::new();
        let mut watches = Vec::new();
        for &remote in &remotes {
            let snd: Vec<&CfdpSection> = scn
                .cfdp
                .iter()
                .filter(|c| (c.from, c.to) == (node, remote))
                .collect();
            let rcv: Vec<&CfdpSection> = scn
                .cfdp
                .iter()
                .filter(|c| (c.from, c.to) == (remote, node))
                .collect();
            let both = || snd.iter().chain(rcv.iter()).copied();
            let mut r = RemoteConfig::new(remote);
            r.nak_mode = pick(rcv.iter().copied(), |c| {
                c.nak_mode.as_deref().and_then(|m| m.parse().ok())
            })
            .unwrap_or(NakMode::Immediate);
            // A timer set explicitly is used as set; one left out follows the measured round
            // trip with the default as its bound (cfdp::AdaptiveTimers).
            if let Some(v) = pick(both(), |c| c.ack_timer_ms) {
                r.ack_timer = millis(v);
                r.adaptive.ack = false;
            }
            if let Some(v) = pick(both(), |c| c.ack_limit) {
                r.ack_limit = v;
            }
            if let Some(v) = pick(both(), |c| c.inactivity_s) {
                r.inactivity_timer = secs(v);
                r.adaptive.inactivity = false;
            }
            if let Some(v) = pick(rcv.iter().copied(), |c| c.nak_timer_ms) {
                r.nak_timer = millis(v);
                r.adaptive.nak = false;
            }
            if let Some(v) = pick(rcv.iter().copied(), |c| c.nak_limit) {
                r.nak_limit = v;
            }
            if let Some(v) = pick(rcv.iter().copied(), |c| c.check_timer_ms) {
                r.check_timer = millis(v);
            }
            if let Some(v) = pick(rcv.iter().copied(), |c| c.check_limit) {
                r.check_limit = v;
            }
            r.keep_alive_interval = pick(rcv.iter().copied(), |c| c.keep_alive_ms).map(millis);
            r.prompt_nak_every_bytes = pick(snd.iter().copied(), |c| c.prompt_every_bytes);
            r.max_file_segment = self.merged_segment(node, remote);
            r.max_pdu_size = (r.max_file_segment + 64).max(512);
            r.rate_bps = pick(snd.iter().copied(), |c| c.rate_bps)
                .or_else(|| pick(rcv.iter().copied(), |c| c.return_rate_bps))
                .map(|v| v.max(0.0) as u64)
                .or_else(|| first_rate(scn, self.models, node, remote))
                .unwrap_or(0);
            r.pacing_burst_bytes =
                pick(both(), |c| c.pacing_burst_bytes).unwrap_or(if r.rate_bps > 0 {
                    // 2 ms at the rate, at least one PDU (as `dtnkit cfdp --rate`).
                    usize::try_from(r.rate_bps / 8 / 500)
                        .unwrap_or(usize::MAX)
                        .max(r.max_pdu_size)
                } else {
                    64 * 1024
                });
            r.crc = pick(both(), |c| c.crc).unwrap_or(false);
            let transport = pick(both(), |c| Some(c.transport)).unwrap_or_default();
            let route = match transport {
                CfdpTransport::Link => Route::Link,
                CfdpTransport::Bp => {
                    let service = pick(both(), |c| Some(c.service_number()))
                        .unwrap_or(crate::scenario::DEFAULT_CFDP_SERVICE);
                    if !services.contains(&service) {
                        services.push(service);
                    }
                    Route::Bp {
                        service,
                        red: pick(both(), |c| c.colour) != Some(Colour::Green),
                        lifetime_ms: (pick(both(), |c| c.lifetime_s).unwrap_or(3600.0) * 1e3)
                            as u64,
                    }
                }
            };
            routes.insert(remote, route);
            let signal = pick(rcv.iter().copied(), |c| c.async_link_signal)
                .unwrap_or(!rcv.is_empty() && r.nak_mode == NakMode::Asynchronous);
            if signal {
                // The direction its PDUs leave by: toward the sender itself (`link`), or toward the first hop of
                // the bundles' route to it (`bp`).
                let hop = first_hop(scn, node, remote).unwrap_or(remote);
                if let Some((i, m, dir)) = direction(scn, self.models, node, hop) {
                    let conf = scn.links.get(i).map(|l| match dir {
                        channel::Direction::Forward => &l.forward.availability,
                        channel::Direction::Return => &l.ret.availability,
                    });
                    let period = match conf {
                        Some(AvailabilityConfig::Schedule {
                            repeat_s: Some(p), ..
                        }) => Duration::try_from_secs_f64(p * 1e3 / 1e3).ok(),
                        _ => None,
                    };
                    watches.push(LinkSignal {
                        remote,
                        watch: AvailabilityWatch::new(
                            m.availability.clone(),
                            period,
                            (self.link_seed)(i),
                            dir as u64,
                            scn.duration(),
                        ),
                    });
                }
            }
            cfg.add_remote(r);
        }
        let mut fs = MemFilestore::new();
        let mut pending_puts = 0;
        let mut receiving = Vec::new();
        for (k, c) in scn.cfdp.iter().enumerate() {
            // A relaying transfer's file appears when the transfer it relays delivers it.
            if c.from == node && c.relay_of.is_none() {
                fs.insert_synthetic(&file_name(k), c.file_size, (self.file_seed)(k));
                pending_puts += 1;
            }
            if c.to == node {
                receiving.push(k);
            }
        }
        let mut app = CfdpApp {
            entity: Entity::new(cfg, Box::new(fs)),
            routes,
            services,
            signals: watches,
            link: BTreeMap::new(),
            pending_puts,
            receiving,
        };
        for k in 0..app.signals.len() {
            let Some(s) = app.signals.get(k) else {
                continue;
            };
            let (remote, up) = (s.remote, s.watch.is_up());
            if !up {
                book.on_signal(Duration::ZERO, node, remote, false);
            }
            app.set_condition(Duration::ZERO, remote, None, Some(up));
        }
        for &remote in &remotes {
            let gated = self
                .contacts
                .iter()
                .any(|c| c.from == node && c.to == remote);
            if gated && app.routes.get(&remote) == Some(&Route::Link) {
                app.set_condition(Duration::ZERO, remote, Some(false), None);
            }
        }
        Some(app)
    }
}

/// Source and destination file name of transfer `k`.
pub fn file_name(k: usize) -> String {
    format!("cfdp-{k}.bin")
}

/// The put request of a transfer.
pub(crate) fn put_request(c: &CfdpSection, k: usize) -> PutRequest {
    let mut req = PutRequest::new(c.to, &file_name(k));
    req.mode = if c.class == 1 {
        TransmissionMode::Unacknowledged
    } else {
        TransmissionMode::Acknowledged
    };
    req.closure_requested = c.closure;
    req.checksum = cfdp_checksum(&c.checksum);
    req.repeat = c.repeat;
    req
}

#[cfg(test)]
mod tests {
    use super::*;
    use channel::{MarkovAvailability, Schedule};

    /// The watch's changes are exactly those of the availability process inside a link direction built with the
    /// same seed and direction: sampled every millisecond, the two agree.
    fn agrees(model: Availability, period: Option<Duration>, direction: u64) -> usize {
        let horizon = Duration::from_secs(20);
        let mut watch = AvailabilityWatch::new(model.clone(), period, 42, direction, horizon);
        let mut truth = AvailabilityProcess::new(model, 42, direction);
        let mut changes = 0;
        let mut t = Duration::ZERO;
        while t < horizon {
            while watch.next_change().is_some_and(|c| c <= t) {
                watch.advance();
                changes += 1;
            }
            assert_eq!(watch.is_up(), truth.is_up(t), "at {t:?}");
            t += Duration::from_micros(500);
        }
        changes
    }

    #[test]
    fn watch_follows_the_markov_chain_of_the_link() {
        let m = MarkovAvailability::seed004(0.1, Duration::from_millis(20), false);
        assert!(agrees(Availability::Markov(m.clone()), None, 1) > 50);
        assert!(agrees(Availability::Markov(m), None, 0) > 50);
        // A state that cannot be left ends the search at once.
        let stuck = MarkovAvailability::seed004(0.0, Duration::from_millis(1), false);
        let w = AvailabilityWatch::new(Availability::Markov(stuck), None, 1, 1, Duration::MAX);
        assert_eq!((w.is_up(), w.next_change()), (false, None));
    }

    #[test]
    fn watch_follows_schedules_with_and_without_period() {
        let ms = Duration::from_millis;
        let windows = vec![(ms(100), ms(300)), (ms(300), ms(450)), (ms(900), ms(1000))];
        let s = Schedule::new(windows.clone(), None).expect("valid");
        assert_eq!(agrees(Availability::Schedule(s), None, 1), 4);
        let s = Schedule::new(windows, Some(ms(1000))).expect("valid");
        // Adjacent windows make one up period: four changes per round, the last (down at 20 s) at the horizon.
        assert_eq!(
            agrees(Availability::Schedule(s), Some(ms(1000)), 1),
            20 * 4 - 1
        );
        assert_eq!(agrees(Availability::Always, None, 1), 0);
    }
}
