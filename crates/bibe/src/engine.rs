//! The sans-IO BIBE engine: both ends of every tunnel of one node.
//!
//! Encapsulating side: [`Engine::send`] wraps a bundle in a BPDU addressed to the tunnel's
//! decapsulating endpoint and returns the encapsulating bundle for the caller to store and
//! forward. With custody, the engine keeps the bundle until a custody signal names its
//! transmission ID ([`Event::Released`] / [`Event::Refused`]) and retransmits it, under the same
//! transmission ID, each time its custody timer expires ([`Engine::poll_transmit`]), until the
//! bundle's own lifetime ends ([`Event::Expired`]).
//!
//! Decapsulating side: [`Engine::handle_record`] turns a received BPDU into
//! [`Event::Decapsulated`]; the caller offers the bundle to its store and tells the engine what
//! became of it ([`Engine::custody_decision`]). Decisions are aggregated per custodian and
//! disposition into custody signals sent [`EngineConfig::signal_delay_ms`] after the first one
//! (or at once when [`EngineConfig::max_signal_ids`] are waiting).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use bpv7::{AdminRecord, Bundle, BundleBuilder, CrcType, CreationTimestamp, DecodeLimits, Eid};
use bytes::Bytes;

use crate::error::{PduError, SendError};
use crate::pdu::{
    BibeRecord, Bpdu, CustodySignal, Disposition, IdRange, RecordCodes, RefusalReason,
};

/// DTN time in milliseconds (RFC 9171 4.2.6), as everywhere in dtnkit.
pub type DtnTime = u64;

/// One tunnel: where its BPDUs go and whether custody is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelConfig {
    /// The decapsulating node's BIBE endpoint (its administrative endpoint, `ipn:N.0`).
    pub endpoint: Eid,
    /// Ask the decapsulating node to take custody (and retransmit until it does).
    pub custody: bool,
    /// Custody timer: time from sending a BPDU to retransmitting it when no custody signal
    /// named it (ms).
    pub custody_timer_ms: u64,
    /// Longest lifetime of an encapsulating bundle (ms); it is shorter when the encapsulated
    /// bundle expires sooner.
    pub lifetime_ms: u64,
    /// CRC type of the encapsulating bundle's blocks.
    pub crc: CrcType,
    /// The record type codes of the BPDUs sent into the tunnel (the far end's dialect).
    pub codes: RecordCodes,
}

impl TunnelConfig {
    /// A tunnel to `endpoint` with custody, a 30 s custody timer, a 1 h lifetime cap and the draft's record codes.
    pub fn new(endpoint: Eid) -> Self {
        TunnelConfig {
            endpoint,
            custody: true,
            custody_timer_ms: 30_000,
            lifetime_ms: 3_600_000,
            crc: CrcType::Crc32c,
            codes: RecordCodes::Draft,
        }
    }
}

/// Engine-wide settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// This node's administrative endpoint (`ipn:N.0`): source of BPDUs and custody signals.
    pub local: Eid,
    /// Most bundles whose custody is pending at once (held in memory for retransmission).
    pub max_custody_bundles: usize,
    /// Most bytes of bundles whose custody is pending at once.
    pub max_custody_bytes: u64,
    /// Aggregation delay: a custody signal leaves this long after the first decision it
    /// carries (ms). Keep it well below the peers' custody timers.
    pub signal_delay_ms: u64,
    /// A signal leaves at once when it names this many transmission IDs (at most
    /// [`crate::pdu::MAX_SIGNAL_RANGES`]).
    pub max_signal_ids: usize,
    /// Lifetime of a custody-signal bundle (ms).
    pub signal_lifetime_ms: u64,
    /// Most custodians with a signal being aggregated; a decision for one more flushes the
    /// signal due first.
    pub max_signal_groups: usize,
}

impl EngineConfig {
    /// Defaults for node `local`: 4096 bundles / 256 MiB in custody, signals after 100 ms or
    /// 1024 IDs, signal lifetime 1 h, 256 custodians aggregated at once.
    pub fn new(local: Eid) -> Self {
        EngineConfig {
            local,
            max_custody_bundles: 4096,
            max_custody_bytes: 256 << 20,
            signal_delay_ms: 100,
            max_signal_ids: 1024,
            signal_lifetime_ms: 3_600_000,
            max_signal_groups: 256,
        }
    }
}

/// A BPDU's request for custody, as the decapsulating side must remember it until its
/// decision ([`Engine::custody_decision`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustodyRequest {
    /// Where the custody signal goes: the source of the encapsulating bundle.
    pub custodian: Eid,
    /// The BPDU's transmission ID.
    pub transmission_id: u64,
    /// When the custodian retransmits without a signal (DTN ms).
    pub retransmission_time: DtnTime,
    /// The record codes of the BPDU, which its custody signal answers in.
    pub codes: RecordCodes,
}

/// What the engine tells its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Custody of the bundle handed over as `token` was accepted (or refused as redundant: the
    /// next node already has it): the caller may delete its copy (`cla_result Sent`).
    Released {
        /// The caller's token.
        token: u64,
        /// The BPDU's transmission ID.
        transmission_id: u64,
        /// Accepted, or refused as redundant.
        disposition: Disposition,
    },
    /// Custody was refused for another reason: the bundle is the caller's again (route it
    /// again; after `DepletedStorage`, back off from the tunnel).
    Refused {
        /// The caller's token.
        token: u64,
        /// The BPDU's transmission ID.
        transmission_id: u64,
        /// Why.
        reason: RefusalReason,
    },
    /// The bundle's lifetime ended while custody was pending: the engine stops retransmitting
    /// it; the caller's agent discards it as expired.
    Expired {
        /// The caller's token.
        token: u64,
        /// The BPDU's transmission ID.
        transmission_id: u64,
    },
    /// A BPDU arrived: offer `bundle` to the store as if received from a neighbour, then, if
    /// `custody` is set, report the outcome with [`Engine::custody_decision`].
    Decapsulated {
        /// Source of the encapsulating bundle.
        from: Eid,
        /// The encapsulated bundle.
        bundle: Bytes,
        /// Custody requested by the sender.
        custody: Option<CustodyRequest>,
    },
}

/// What [`Engine::poll_transmit`] hands out: a bundle to store and forward like any bundle
/// this node originates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// The encoded bundle.
    pub bundle: Bytes,
    /// What it is.
    pub kind: OutboundKind,
}

/// The kind of an [`Outbound`] bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboundKind {
    /// A BPDU sent again after its custody timer expired.
    Retransmission {
        /// The tunnel.
        tunnel: u64,
        /// The caller's token of the encapsulated bundle.
        token: u64,
        /// Its transmission ID (unchanged across retransmissions).
        transmission_id: u64,
    },
    /// A custody signal.
    Signal {
        /// Its destination (the custodian).
        to: Eid,
        /// What it says.
        signal: CustodySignal,
    },
}

/// A bundle handed to [`Engine::send`], encapsulated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encapsulated {
    /// The encapsulating bundle: store it, then forward it like any bundle of this node.
    pub bundle: Bytes,
    /// 0 without custody (the caller reports the bundle sent once the encapsulating bundle is
    /// stored); otherwise the custody-pending transmission ID (wait for an [`Event`]).
    pub transmission_id: u64,
    /// The encapsulated bundle's identity (for a caller that records pending custody).
    pub inner_id: bpv7::BundleId,
    /// When the encapsulated bundle expires (DTN ms; `None` without a creation time).
    pub expires_at: Option<DtnTime>,
}

/// What happened to a received record handed to [`Engine::handle_record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Not a BIBE record: the caller handles it (e.g. a status report).
    NotBibe,
    /// A BPDU: an [`Event::Decapsulated`] is queued.
    Bpdu,
    /// A custody signal, applied.
    Signal,
}

/// Counters of one engine (both sides).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BibeCounters {
    /// Bundles encapsulated (first transmissions).
    pub encapsulated: u64,
    /// BPDUs received and decapsulated.
    pub decapsulated: u64,
    /// Custody decisions taken here: accepted.
    pub custody_accepted: u64,
    /// Custody decisions taken here: refused, by reason name.
    pub custody_refused: BTreeMap<&'static str, u64>,
    /// Custody signals sent.
    pub signals_sent: u64,
    /// Custody signals received.
    pub signals_received: u64,
    /// Bundles released on a received signal (accepted or redundant).
    pub custody_released: u64,
    /// Bundles whose custody the next node refused (other than redundant), by reason name.
    pub custody_refused_by_peer: BTreeMap<&'static str, u64>,
    /// Custody timers that expired.
    pub timer_expirations: u64,
    /// BPDUs retransmitted after a timer expired.
    pub retransmissions: u64,
    /// Bundles whose lifetime ended while custody was pending.
    pub expired_in_custody: u64,
    /// Transmission IDs in received signals that named nothing pending (late or duplicate
    /// signals, or signals from a node that is not the tunnel's endpoint).
    pub signal_ids_unknown: u64,
    /// Received BIBE records that did not decode (dropped).
    pub malformed: u64,
    /// Received BIBE records in ION's record type codes (7 and 8) instead of the draft's: accepted, and custody
    /// signals for such BPDUs answer in ION's codes.
    pub ion_record_codes: u64,
}

#[derive(Debug, Clone)]
struct Pending {
    token: u64,
    tunnel: u64,
    inner: Bytes,
    deadline: DtnTime,
    /// DTN time at which the encapsulated bundle expires, when it has a creation time.
    expires_at: Option<DtnTime>,
}

#[derive(Debug, Clone)]
struct SignalGroup {
    ids: Vec<u64>,
    due: DtnTime,
    /// The codes of the BPDUs the signal names (of the latest decision).
    codes: RecordCodes,
}

/// Both ends of every BIBE tunnel of one node. See the module docs.
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    tunnels: BTreeMap<u64, TunnelConfig>,
    next_xmit: u64,
    last_ts: (DtnTime, u64),
    pending: BTreeMap<u64, Pending>,
    by_token: HashMap<u64, u64>,
    pending_bytes: u64,
    timers: BTreeSet<(DtnTime, u64)>,
    groups: BTreeMap<(Eid, Disposition), SignalGroup>,
    out: VecDeque<Outbound>,
    events: VecDeque<Event>,
    counters: BibeCounters,
}

impl Engine {
    /// An engine for `cfg.local`, started at DTN time `now`. Transmission IDs start at
    /// `now × 1024` so that the IDs of a restarted node never repeat those of its previous run
    /// (unless it sent more than 1024 per millisecond of downtime): a late signal for an old ID
    /// cannot release a new bundle.
    pub fn new(cfg: EngineConfig, now: DtnTime) -> Engine {
        Engine {
            cfg,
            tunnels: BTreeMap::new(),
            next_xmit: now.saturating_mul(1024).max(1),
            last_ts: (0, 0),
            pending: BTreeMap::new(),
            by_token: HashMap::new(),
            pending_bytes: 0,
            timers: BTreeSet::new(),
            groups: BTreeMap::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            counters: BibeCounters::default(),
        }
    }

    /// Adds (or replaces) tunnel `id`.
    pub fn add_tunnel(&mut self, id: u64, tunnel: TunnelConfig) {
        self.tunnels.insert(id, tunnel);
    }

    /// The tunnel `id`.
    pub fn tunnel(&self, id: u64) -> Option<&TunnelConfig> {
        self.tunnels.get(&id)
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The last creation timestamp given to a bundle this engine built, `(ms, sequence)`.
    pub fn creation_cursor(&self) -> (DtnTime, u64) {
        self.last_ts
    }

    /// Bundles built from now on get timestamps after `ts`: the node's own bundles sourced at
    /// the same endpoint take theirs from the agent's sequence, and the two must not collide
    /// (`cla::BibeCla` keeps them in step).
    pub fn raise_creation_cursor(&mut self, ts: (DtnTime, u64)) {
        self.last_ts = self.last_ts.max(ts);
    }

    /// The counters.
    pub fn counters(&self) -> &BibeCounters {
        &self.counters
    }

    /// Bundles and bytes whose custody is pending.
    pub fn pending_custody(&self) -> (usize, u64) {
        (self.pending.len(), self.pending_bytes)
    }

    /// Custody-pending bundles per tunnel.
    pub fn pending_per_tunnel(&self) -> BTreeMap<u64, u64> {
        let mut m = BTreeMap::new();
        for p in self.pending.values() {
            *m.entry(p.tunnel).or_insert(0) += 1;
        }
        m
    }

    /// Encapsulates `inner` (the caller's `token`) for tunnel `tunnel`. See [`Encapsulated`]
    /// for what the caller does next; on `Err` the bundle stays the caller's.
    pub fn send(
        &mut self,
        now: DtnTime,
        tunnel: u64,
        token: u64,
        inner: Bytes,
    ) -> Result<Encapsulated, SendError> {
        self.encapsulate(now, tunnel, token, inner, None)
    }

    /// Sends again, under its earlier `transmission_id`, a bundle whose custody was pending
    /// before this engine started (a restarted node's custody record): a late signal for the
    /// earlier transmission releases it, and the far end finds the duplicate. Counted as a
    /// retransmission. `Err(DuplicateId)` when that ID is pending already.
    pub fn resend(
        &mut self,
        now: DtnTime,
        tunnel: u64,
        token: u64,
        inner: Bytes,
        transmission_id: u64,
    ) -> Result<Encapsulated, SendError> {
        if transmission_id == 0 || self.pending.contains_key(&transmission_id) {
            return Err(SendError::DuplicateId(transmission_id));
        }
        self.encapsulate(now, tunnel, token, inner, Some(transmission_id))
    }

    fn encapsulate(
        &mut self,
        now: DtnTime,
        tunnel: u64,
        token: u64,
        inner: Bytes,
        resumed: Option<u64>,
    ) -> Result<Encapsulated, SendError> {
        let t = self
            .tunnels
            .get(&tunnel)
            .cloned()
            .ok_or(SendError::UnknownTunnel(tunnel))?;
        if self.by_token.contains_key(&token) {
            return Err(SendError::DuplicateToken(token));
        }
        let limits = DecodeLimits {
            verify_crc: false,
            require_bundle_age: false,
            ..DecodeLimits::default()
        };
        let decoded =
            Bundle::decode_with_limits(inner.clone(), &limits).map_err(SendError::Malformed)?;
        let inner_id = decoded.id();
        let p = decoded.primary();
        let expires_at = (p.timestamp.dtn_time_ms != 0)
            .then(|| p.timestamp.dtn_time_ms.saturating_add(p.lifetime_ms));
        if !t.custody {
            let bundle = self.build_bpdu(now, &t, 0, 0, &inner, expires_at)?;
            self.counters.encapsulated += 1;
            return Ok(Encapsulated {
                bundle,
                transmission_id: 0,
                inner_id,
                expires_at,
            });
        }
        let len = inner.len() as u64;
        if self.pending.len() >= self.cfg.max_custody_bundles
            || self.pending_bytes.saturating_add(len) > self.cfg.max_custody_bytes
        {
            return Err(SendError::CustodyFull {
                bundles: self.pending.len(),
                bytes: self.pending_bytes,
            });
        }
        let mut id = resumed.unwrap_or(self.next_xmit);
        if resumed.is_none() && t.codes.wire_id(id) == 0 {
            id += 1; // 0 on the wire would mean "no custody"
        }
        let deadline = now.saturating_add(t.custody_timer_ms);
        let bundle = self.build_bpdu(now, &t, id, deadline, &inner, expires_at)?;
        // A resumed ID at or above the next one (a clock that went back) moves the next one
        // past it: no new bundle ever gets a pending ID.
        self.next_xmit = self.next_xmit.max(id.saturating_add(1));
        if resumed.is_some() {
            self.counters.retransmissions += 1;
        } else {
            self.counters.encapsulated += 1;
        }
        self.pending_bytes += len;
        self.by_token.insert(token, id);
        self.timers.insert((deadline, id));
        self.pending.insert(
            id,
            Pending {
                token,
                tunnel,
                inner,
                deadline,
                expires_at,
            },
        );
        Ok(Encapsulated {
            bundle,
            transmission_id: id,
            inner_id,
            expires_at,
        })
    }

    /// Forgets the custody-pending bundle `token` (its encapsulating bundle could not be
    /// stored, say). True when it was pending.
    pub fn cancel(&mut self, token: u64) -> bool {
        let Some(id) = self.by_token.get(&token).copied() else {
            return false;
        };
        self.remove_pending(id).is_some()
    }

    fn remove_pending(&mut self, id: u64) -> Option<Pending> {
        let p = self.pending.remove(&id)?;
        self.by_token.remove(&p.token);
        self.timers.remove(&(p.deadline, id));
        self.pending_bytes = self.pending_bytes.saturating_sub(p.inner.len() as u64);
        Some(p)
    }

    fn next_creation(&mut self, now: DtnTime) -> CreationTimestamp {
        let (t, seq) = self.last_ts;
        let ts = if now > t { (now, 0) } else { (t, seq + 1) };
        self.last_ts = ts;
        CreationTimestamp::new(ts.0, ts.1)
    }

    fn build_bpdu(
        &mut self,
        now: DtnTime,
        t: &TunnelConfig,
        transmission_id: u64,
        retransmission_time: DtnTime,
        inner: &Bytes,
        expires_at: Option<DtnTime>,
    ) -> Result<Bytes, SendError> {
        let remaining = expires_at.map_or(t.lifetime_ms, |e| e.saturating_sub(now));
        let lifetime = t.lifetime_ms.min(remaining).max(1);
        let record = BibeRecord::Bpdu(Bpdu {
            transmission_id: t.codes.wire_id(transmission_id),
            retransmission_time: t.codes.wire_time(retransmission_time),
            bundle: inner.clone(),
        });
        let ts = self.next_creation(now);
        let b = BundleBuilder::new(self.cfg.local.clone(), t.endpoint.clone())
            .creation(ts)
            .lifetime_ms(lifetime)
            .crc_type(t.crc)
            .admin_record(&record.to_admin_in(t.codes))
            .build()
            .map_err(SendError::Build)?;
        Ok(Bytes::from(b.encode()))
    }

    /// Handles an administrative record received from `from` (the source of its bundle).
    /// `Err`: a BIBE record that did not decode (counted, dropped).
    pub fn handle_record(
        &mut self,
        now: DtnTime,
        from: &Eid,
        record: &AdminRecord,
    ) -> Result<Handled, PduError> {
        let rec = match BibeRecord::from_admin(record) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(Handled::NotBibe),
            Err(e) => {
                self.counters.malformed += 1;
                return Err(e);
            }
        };
        let codes = match record {
            AdminRecord::Other { record_type, .. } => RecordCodes::of(*record_type),
            _ => None,
        }
        .unwrap_or_default();
        if codes == RecordCodes::Ion {
            self.counters.ion_record_codes += 1;
        }
        match rec {
            BibeRecord::Bpdu(b) => {
                self.counters.decapsulated += 1;
                let custody = (b.transmission_id != 0).then(|| CustodyRequest {
                    custodian: from.clone(),
                    transmission_id: b.transmission_id,
                    retransmission_time: codes.dtn_time(b.retransmission_time),
                    codes,
                });
                self.events.push_back(Event::Decapsulated {
                    from: from.clone(),
                    bundle: b.bundle,
                    custody,
                });
                Ok(Handled::Bpdu)
            }
            BibeRecord::Signal(s) => {
                self.counters.signals_received += 1;
                self.apply_signal(now, from, &s, codes);
                Ok(Handled::Signal)
            }
        }
    }

    /// The inclusive ranges of pending IDs a signal's range `r` names. In the draft's dialect that is `r` itself;
    /// ION writes the low 32 bits of an ID, so there `r` names every pending ID whose low 32 bits fall in it (`his`:
    /// the high halves of the pending IDs).
    fn id_ranges(r: &IdRange, codes: RecordCodes, his: &[u64]) -> Vec<(u64, u64)> {
        const LOW: u64 = 0xFFFF_FFFF;
        match codes {
            RecordCodes::Draft => vec![(r.first, r.last())],
            RecordCodes::Ion => {
                let (lo, count) = (r.first & LOW, r.count.min(1 << 32));
                let mut out = Vec::new();
                for &hi in his {
                    let start = (hi << 32) | lo;
                    let end = start.saturating_add(count - 1);
                    let top = (hi << 32) | LOW;
                    out.push((start, end.min(top)));
                    if end > top && hi < LOW {
                        out.push(((hi + 1) << 32, ((hi + 1) << 32) | (end - top - 1)));
                    }
                }
                out
            }
        }
    }

    fn apply_signal(&mut self, _now: DtnTime, from: &Eid, s: &CustodySignal, codes: RecordCodes) {
        let from_node = from.node_id();
        let mut his: Vec<u64> = Vec::new();
        if codes == RecordCodes::Ion {
            for id in self.pending.keys() {
                if his.last() != Some(&(id >> 32)) {
                    his.push(id >> 32);
                }
            }
        }
        // Walk the pending IDs inside each range (not every ID of a range: a hostile range can
        // name 2^64 IDs).
        let mut hits = std::collections::BTreeSet::new();
        let mut named = 0u64;
        for r in &s.ranges {
            named = named.saturating_add(r.count);
            for (first, last) in Self::id_ranges(r, codes, &his) {
                for (&id, p) in self.pending.range(first..=last) {
                    let ok = self
                        .tunnels
                        .get(&p.tunnel)
                        .is_some_and(|t| t.endpoint.node_id() == from_node && t.codes == codes);
                    if ok {
                        hits.insert(id);
                    }
                }
            }
        }
        self.counters.signal_ids_unknown = self
            .counters
            .signal_ids_unknown
            .saturating_add(named.saturating_sub(hits.len() as u64));
        for id in hits {
            let Some(p) = self.remove_pending(id) else {
                continue;
            };
            match s.disposition {
                d if d.releases() => {
                    self.counters.custody_released += 1;
                    self.events.push_back(Event::Released {
                        token: p.token,
                        transmission_id: id,
                        disposition: d,
                    });
                }
                Disposition::Refused(reason) => {
                    *self
                        .counters
                        .custody_refused_by_peer
                        .entry(reason.name())
                        .or_insert(0) += 1;
                    self.events.push_back(Event::Refused {
                        token: p.token,
                        transmission_id: id,
                        reason,
                    });
                }
                Disposition::Accepted => {}
            }
        }
    }

    /// Records the decapsulating side's decision on `req`: [`Disposition::Accepted`] only once
    /// the encapsulated bundle is durably stored. The decision joins the signal being
    /// aggregated for the same custodian and disposition.
    pub fn custody_decision(&mut self, now: DtnTime, req: &CustodyRequest, d: Disposition) {
        match d {
            Disposition::Accepted => self.counters.custody_accepted += 1,
            Disposition::Refused(r) => {
                *self.counters.custody_refused.entry(r.name()).or_insert(0) += 1;
            }
        }
        let key = (req.custodian.clone(), d);
        if !self.groups.contains_key(&key) && self.groups.len() >= self.cfg.max_signal_groups {
            if let Some(first) = self
                .groups
                .iter()
                .min_by_key(|(_, g)| g.due)
                .map(|(k, _)| k.clone())
            {
                self.flush_group(&first);
            }
        }
        let delay = self.cfg.signal_delay_ms;
        let g = self
            .groups
            .entry(key.clone())
            .or_insert_with(|| SignalGroup {
                ids: Vec::new(),
                due: now.saturating_add(delay),
                codes: req.codes,
            });
        g.codes = req.codes;
        g.ids.push(req.transmission_id);
        if g.ids.len() >= self.cfg.max_signal_ids.max(1) {
            self.flush_group(&key);
        }
    }

    fn flush_group(&mut self, key: &(Eid, Disposition)) {
        let Some(g) = self.groups.remove(key) else {
            return;
        };
        let signal = CustodySignal::aggregate(key.1, g.ids);
        if signal.ranges.is_empty() {
            return;
        }
        let ts = self.next_creation(g.due);
        let rec = BibeRecord::Signal(signal.clone());
        let Ok(b) = BundleBuilder::new(self.cfg.local.clone(), key.0.clone())
            .creation(ts)
            .lifetime_ms(self.cfg.signal_lifetime_ms)
            .admin_record(&rec.to_admin_in(g.codes))
            .build()
        else {
            // Only an unencodable custodian EID fails; the custodian retransmits on its timer.
            return;
        };
        self.counters.signals_sent += 1;
        self.out.push_back(Outbound {
            bundle: Bytes::from(b.encode()),
            kind: OutboundKind::Signal {
                to: key.0.clone(),
                signal,
            },
        });
    }

    /// Runs the timers due at `now`: custody timers (retransmission, or expiry of the bundle)
    /// and signals whose aggregation delay ended.
    pub fn handle_timeout(&mut self, now: DtnTime) {
        while let Some(&(deadline, id)) = self.timers.first() {
            if deadline > now {
                break;
            }
            self.timers.remove(&(deadline, id));
            self.counters.timer_expirations += 1;
            let Some(p) = self.pending.get(&id).cloned() else {
                continue;
            };
            if p.expires_at.is_some_and(|e| e <= now) {
                self.remove_pending(id);
                self.counters.expired_in_custody += 1;
                self.events.push_back(Event::Expired {
                    token: p.token,
                    transmission_id: id,
                });
                continue;
            }
            let Some(t) = self.tunnels.get(&p.tunnel).cloned() else {
                continue;
            };
            let next = now.saturating_add(t.custody_timer_ms);
            match self.build_bpdu(now, &t, id, next, &p.inner, p.expires_at) {
                Ok(bundle) => {
                    self.counters.retransmissions += 1;
                    self.out.push_back(Outbound {
                        bundle,
                        kind: OutboundKind::Retransmission {
                            tunnel: p.tunnel,
                            token: p.token,
                            transmission_id: id,
                        },
                    });
                }
                Err(_) => {
                    // Cannot happen for a tunnel that built the first BPDU; retry later.
                }
            }
            self.timers.insert((next, id));
            if let Some(e) = self.pending.get_mut(&id) {
                e.deadline = next;
            }
        }
        let due: Vec<(Eid, Disposition)> = self
            .groups
            .iter()
            .filter(|(_, g)| g.due <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            self.flush_group(&k);
        }
    }

    /// The next DTN time at which [`Engine::handle_timeout`] has work.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        let t = self.timers.first().map(|(d, _)| *d);
        let s = self.groups.values().map(|g| g.due).min();
        match (t, s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next bundle to store and forward (a retransmitted BPDU or a custody signal).
    pub fn poll_transmit(&mut self) -> Option<Outbound> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// In ION's dialect a range of 32-bit IDs names exactly the pending IDs whose low 32 bits fall in it, also
        /// where the pending IDs or the range cross a multiple of 2^32.
        #[test]
        fn ion_ranges_name_the_pending_ids_by_their_low_half(
            base in prop_oneof![Just((1u64 << 32) - 20), Just(5u64 << 32), 1u64..(1 << 50)],
            offsets in proptest::collection::btree_set(0u64..60, 1..30),
            first in 0u64..(1 << 32),
            count in 1u64..50,
            near_wrap in any::<bool>(),
        ) {
            let pending: BTreeSet<u64> = offsets.iter().map(|o| base + o).collect();
            let first = if near_wrap { (1u64 << 32) - 1 - (first % 30) } else { first };
            let r = IdRange { first, count };
            let mut his: Vec<u64> = Vec::new();
            for id in &pending {
                if his.last() != Some(&(id >> 32)) {
                    his.push(id >> 32);
                }
            }
            let mut got = BTreeSet::new();
            for (a, b) in Engine::id_ranges(&r, RecordCodes::Ion, &his) {
                got.extend(pending.range(a..=b).copied());
            }
            let low = |x: u64| x & 0xFFFF_FFFF;
            let want: BTreeSet<u64> = pending
                .iter()
                .copied()
                .filter(|&id| low(id).wrapping_sub(first) & 0xFFFF_FFFF < count)
                .collect();
            // A range that runs past 2^32 - 1 continues at 0 of the next high half only.
            let want: BTreeSet<u64> = want
                .into_iter()
                .filter(|&id| low(id) >= first || his.contains(&((id >> 32).wrapping_sub(1))))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
