//! Local endpoints: registration, delivery to applications, reassembly of fragments for local
//! delivery, administrative records for the node itself, the echo service and status reports.

use bpv7::{
    AdminRecord, AduKey, Bundle, BundleBuilder, BundleFlags, Eid, ReasonCode, StatusItem,
    StatusReport,
};
use bytes::Bytes;

use super::{
    Agent, AgentError, BundleEventKind, Delivery, DeliveryReadError, DeliveryRef, DtnTime,
    ReportKind, State, Txn, PRIORITY_NORMAL,
};
use crate::store::{BundleKey, BundleMeta, Op, Role, Store};

/// Where a destination EID points from this node's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dest {
    /// This node's node id (administrative endpoint).
    Admin,
    /// The built-in echo service.
    Echo,
    /// Another endpoint of this node.
    Local,
    /// Elsewhere.
    Remote,
}

/// A send's payload block encoded by the thread that received the payload
/// ([`crate::SendRequest::prepared`]), and the staging file that thread wrote it to, if any
/// ([`crate::SendRequest::staged`]).
pub(super) struct PreparedSend {
    pub(super) payload: bpv7::PreparedPayload,
    pub(super) staged: Option<crate::StagedTail>,
}

impl<S: Store> Agent<S> {
    pub(super) fn classify(&self, eid: &Eid) -> Dest {
        match eid {
            Eid::Ipn {
                allocator: 0,
                node,
                service,
            } if *node == self.cfg.node => {
                if *service == 0 {
                    Dest::Admin
                } else if Some(*service) == self.cfg.echo_service {
                    Dest::Echo
                } else {
                    Dest::Local
                }
            }
            Eid::Dtn { node, demux }
                if self.cfg.dtn_node_name.as_deref() == Some(node.as_str()) =>
            {
                if demux.is_empty() {
                    Dest::Admin
                } else {
                    Dest::Local
                }
            }
            _ => Dest::Remote,
        }
    }

    /// Registers a local endpoint: bundles held for it (and arriving later) are offered through
    /// [`Agent::poll_delivery`].
    pub fn register(&mut self, endpoint: Eid) -> Result<(), AgentError> {
        if self.classify(&endpoint) == Dest::Remote {
            return Err(AgentError::ForeignEndpoint(endpoint));
        }
        if !self.registered.insert(endpoint.clone()) {
            return Ok(());
        }
        let waiting: Vec<BundleKey> = self
            .entries
            .iter()
            .filter(|(_, e)| e.state == State::AwaitEndpoint && e.meta.destination == endpoint)
            .map(|(k, _)| *k)
            .collect();
        for k in waiting {
            if let Some(e) = self.entries.get_mut(&k) {
                e.state = State::Ready;
                self.owed.0 += 1;
                self.owed.1 += e.meta.len;
                self.ready.push_back(k);
            }
        }
        Ok(())
    }

    /// Unregisters an endpoint: bundles for it that were offered but not acknowledged wait again
    /// (they are offered again when it registers).
    pub fn unregister(&mut self, endpoint: &Eid) {
        if !self.registered.remove(endpoint) {
            return;
        }
        // Its held bundles wait for the endpoint like the others (`register` finds them again).
        self.held.remove(endpoint);
        let mut released = Vec::new();
        for e in self.entries.values_mut() {
            if matches!(e.state, State::Ready | State::Offered) && e.meta.destination == *endpoint {
                e.state = State::AwaitEndpoint;
                released.push(e.meta.len);
            }
        }
        for len in released {
            self.owe_less(len);
        }
    }

    /// Holds back deliveries to `endpoint`, because its application cannot take more now (a
    /// slow reader): [`Agent::poll_delivery`] skips them, so bundles for other endpoints are
    /// still offered. They stay stored and ready, in order, until
    /// [`Agent::resume_deliveries`] (or `unregister`). Holding an unregistered or already held
    /// endpoint does nothing.
    pub fn hold_deliveries(&mut self, endpoint: &Eid) {
        if self.registered.contains(endpoint) && !self.held.contains_key(endpoint) {
            self.held.insert(endpoint.clone(), Default::default());
        }
    }

    /// Offers `endpoint`'s held deliveries again, before any newer bundle for it and in their
    /// original order.
    pub fn resume_deliveries(&mut self, endpoint: &Eid) {
        if let Some(keys) = self.held.remove(endpoint) {
            for k in keys.into_iter().rev() {
                self.ready.push_front(k);
            }
        }
    }

    /// Whether deliveries to `endpoint` are held back ([`Agent::hold_deliveries`]).
    pub fn deliveries_held(&self, endpoint: &Eid) -> bool {
        self.held.contains_key(endpoint)
    }

    /// The next bundle for a registered endpoint whose deliveries are not held. It stays stored
    /// until [`Agent::delivered`].
    pub fn poll_delivery(&mut self) -> Option<Delivery> {
        // The same lookup as by reference, with the read on the caller's thread.
        while let Some(r) = self.poll_delivery_ref() {
            let key = r.key;
            match r.read() {
                Ok(d) => return Some(d),
                // Unreadable stored bundle: nothing can ever deliver it.
                Err(DeliveryReadError::Undecodable(_)) => {
                    self.finish_entry(key);
                }
                Err(DeliveryReadError::Store(_)) => {
                    // Transient store failure: keep it ready and try again on the next poll.
                    if let Some(e) = self.entries.get_mut(&key) {
                        e.state = State::Ready;
                    }
                    self.ready.push_front(key);
                    return None;
                }
            }
        }
        None
    }

    /// [`Agent::poll_delivery`] without reading the bundle: a [`DeliveryRef`] for the thread that
    /// writes it to the application, which reads it there ([`DeliveryRef::read`]) and reports a
    /// failure with [`Agent::delivery_unreadable`]. The agent only looks up where it is stored.
    pub fn poll_delivery_ref(&mut self) -> Option<DeliveryRef> {
        while let Some((key, meta)) = self.next_ready() {
            let stored = match self.store.locate(key) {
                Ok(Some(s)) => s,
                Ok(None) => {
                    // Not in the store any more: nothing can ever deliver it.
                    self.finish_entry(key);
                    continue;
                }
                Err(_) => {
                    // Transient store failure: keep it ready and try again on the next poll.
                    self.ready.push_front(key);
                    return None;
                }
            };
            if let Some(e) = self.entries.get_mut(&key) {
                e.state = State::Offered;
            }
            return Some(DeliveryRef::new(key, meta.destination, meta.id, stored));
        }
        None
    }

    /// The thread that writes deliveries could not read one handed out by
    /// [`Agent::poll_delivery_ref`]. Nothing was delivered and nothing is lost: for a store
    /// error (I/O, or bytes that no longer match the store's CRC) the bundle stays stored and
    /// ready, the store is marked degraded with the error as its reason (as for
    /// [`Agent::cla_unreadable`]), and the bundle is offered again once a recovery attempt
    /// succeeds. Bytes that pass the store's check but are not a bundle can never be
    /// delivered: the bundle is dropped, as [`Agent::poll_delivery`] drops it. Unknown keys
    /// and bundles no longer offered are ignored.
    pub fn delivery_unreadable(&mut self, now: DtnTime, key: BundleKey, error: &DeliveryReadError) {
        if self.entries.get(&key).map(|e| e.state) != Some(State::Offered) {
            return;
        }
        self.clock = self.clock.max(now);
        match error {
            DeliveryReadError::Store(e) => {
                self.store_failed(e);
                if let Some(e) = self.entries.get_mut(&key) {
                    e.state = State::Ready;
                }
                self.unreadable.push(key);
            }
            DeliveryReadError::Undecodable(_) => {
                self.finish_entry(key);
            }
        }
    }

    /// The next ready bundle whose endpoint's deliveries are not held, with its metadata.
    fn next_ready(&mut self) -> Option<(BundleKey, BundleMeta)> {
        while let Some(key) = self.ready.pop_front() {
            let Some(e) = self.entries.get(&key) else {
                continue;
            };
            if e.state != State::Ready {
                continue;
            }
            if let Some(keys) = self.held.get_mut(&e.meta.destination) {
                // Set aside in order; the ready queue only ever holds older bundles for the
                // endpoint in front of newer ones, so resuming at the front keeps the order.
                keys.push_back(key);
                continue;
            }
            return Some((key, e.meta.clone()));
        }
        None
    }

    /// The application has the bundle: it is deleted from the store (the delete is committed
    /// with the next commit; a crash before that re-offers it, which the application's
    /// de-duplication absorbs) and a delivery report is sent if requested.
    pub fn delivered(&mut self, now: DtnTime, key: BundleKey) -> Result<(), AgentError> {
        match self.entries.get(&key) {
            Some(e) if matches!(e.state, State::Offered | State::Ready) => {}
            _ => return Ok(()),
        }
        let Some(entry) = self.finish_entry(key) else {
            return Ok(());
        };
        self.counters.delivered += 1;
        self.event(
            now,
            BundleEventKind::Delivered,
            &entry.meta,
            None,
            Some(key),
        );
        let mut txn = Txn::default();
        self.stage_report(
            now,
            &mut txn,
            &entry.meta,
            ReportKind::Delivered,
            ReasonCode::NoInformation,
        );
        self.commit_txn(now, txn)?;
        self.maybe_flush()
    }

    /// Feeds a stored fragment to the reassembler; when its ADU completes, stages the whole
    /// bundle (role Deliver) and the deletion of every fragment in `txn`.
    pub(super) fn reassemble(
        &mut self,
        now: DtnTime,
        key: BundleKey,
        fragment: Bundle,
        txn: &mut Txn,
    ) {
        let adu = AduKey {
            source: fragment.primary().source.clone(),
            timestamp: fragment.primary().timestamp,
        };
        self.fragments.entry(adu.clone()).or_default().push(key);
        let whole = match self.reassembler.insert(fragment) {
            Ok(Some(b)) => b,
            // Incomplete, or refused (memory bound, inconsistent overlap): the fragment stays
            // stored until it expires.
            Ok(None) | Err(_) => return,
        };
        let mut whole = whole;
        let keys = self.fragments.remove(&adu).unwrap_or_default();
        if self.security.is_some() {
            let from = keys
                .iter()
                .find_map(|k| self.entries.get(k).and_then(|e| e.meta.prev_hop));
            let len = whole.encoded_len() as u64;
            let meta = super::rx::meta_for(&whole, Role::Deliver, now, PRIORITY_NORMAL, from, len);
            if self
                .accept_security(now, &mut whole, &meta, from, txn)
                .is_err()
            {
                // The fragments go with the bundle they made up.
                for k in keys {
                    if self.remove_entry(k).is_some() {
                        txn.batch.push(Op::Delete(k));
                    }
                }
                return;
            }
        }
        match self.classify(&whole.primary().destination) {
            Dest::Admin | Dest::Echo => {
                // Consumed by the agent itself, like an unfragmented one; if the echo reply does
                // not fit, the fragments stay stored (and expire) and the request goes unanswered.
                let dest = self.classify(&whole.primary().destination);
                if dest == Dest::Admin {
                    self.consume_admin(now, &whole, txn);
                } else if self.stage_echo(now, &whole, txn).is_err() {
                    self.fragments.insert(adu, keys);
                    return;
                }
                for k in keys {
                    if self.remove_entry(k).is_some() {
                        txn.batch.push(Op::Delete(k));
                    }
                }
                return;
            }
            Dest::Local | Dest::Remote => {}
        }
        let data = Bytes::from(whole.encode());
        let mut freed = 0u64;
        let mut expires = u64::MAX;
        let mut received = now;
        let mut prev_hop = None;
        for k in &keys {
            if let Some(e) = self.entries.get(k) {
                freed += e.meta.len;
                expires = expires.min(e.meta.expires_at_ms);
                received = received.min(e.meta.received_at_ms);
                prev_hop = prev_hop.or(e.meta.prev_hop);
            }
        }
        let meta = BundleMeta {
            role: Role::Deliver,
            id: whole.id(),
            destination: whole.primary().destination.clone(),
            report_to: whole.primary().report_to.clone(),
            flags: whole.primary().flags,
            received_at_ms: received,
            expires_at_ms: expires,
            priority: PRIORITY_NORMAL,
            prev_hop,
            len: data.len() as u64,
        };
        // The whole bundle replaces its fragments in the same transaction, so it needs at most
        // the space they free (it carries one primary block instead of one per fragment).
        if meta.len > self.free_bytes(txn).saturating_add(freed) {
            self.fragments.insert(adu, keys);
            return;
        }
        for k in keys {
            if self.remove_entry(k).is_some() {
                txn.batch.push(Op::Delete(k));
            }
        }
        let _ = self.stage_put(txn, meta, prev_hop, data, BundleEventKind::Received);
    }

    /// Handles a bundle for this node's administrative endpoint: decodes the record and queues
    /// it for [`Agent::poll_admin`].
    pub(super) fn consume_admin(&mut self, now: DtnTime, bundle: &Bundle, txn: &mut Txn) {
        if !bundle.is_admin_record() {
            self.counters.admin_dropped += 1;
            return;
        }
        match AdminRecord::decode(&bundle.payload()) {
            Ok(record) => txn.admin.push(super::AdminNotice {
                received_at_ms: now,
                from: bundle.primary().source.clone(),
                record,
            }),
            Err(_) => self.counters.admin_dropped += 1,
        }
    }

    /// Builds the echo reply to `request` (same payload back to its source) and stages it.
    /// `Err(free)` when it does not fit the quota.
    pub(super) fn stage_echo(
        &mut self,
        now: DtnTime,
        request: &Bundle,
        txn: &mut Txn,
    ) -> Result<(), u64> {
        let to = request.primary().source.clone();
        if to.is_none() || request.is_admin_record() {
            return Ok(());
        }
        // A request from an echo endpoint is another node's echo reply (or a forgery made to
        // look like one): answering it would start an exchange between two echo services that
        // only the bundles' lifetimes end, from one bundle.
        if matches!(to, Eid::Ipn { service, .. } if Some(service) == self.cfg.echo_service) {
            self.counters.echo_replies_ignored += 1;
            return Ok(());
        }
        let from = request.primary().destination.clone();
        let ts = self.next_creation(now, txn);
        let mut b = BundleBuilder::new(from, to)
            .creation(ts)
            .lifetime_ms(self.cfg.default_lifetime_ms)
            .report_to(self.node_eid.clone())
            .payload(request.payload());
        if let Some(h) = self.cfg.hop_limit_default {
            b = b.hop_limit(h);
        }
        let Ok(mut reply) = b.build() else {
            return Ok(());
        };
        if self.secure_new(&mut reply).is_err() {
            // Only the random number generator can fail here (keys are checked at start-up):
            // the request goes unanswered rather than answered in the clear.
            return Ok(());
        }
        self.counters.echoed += 1;
        self.stage_new(now, txn, reply, PRIORITY_NORMAL, None)
            .map(|_| ())
    }

    /// Stages a bundle created at this node (by `send`, a report or the echo service), with the
    /// role its destination calls for. `Err(free)` when it does not fit the quota.
    pub(super) fn stage_new(
        &mut self,
        now: DtnTime,
        txn: &mut Txn,
        bundle: Bundle,
        priority: u8,
        prepared: Option<PreparedSend>,
    ) -> Result<Option<BundleKey>, u64> {
        // Around a payload block encoded by the thread that received it when there is one
        // that still matches (the payload's bytes are then neither copied nor checksummed here).
        let (prepared, staged) = prepared.map_or((None, None), |p| (Some(p.payload), p.staged));
        let (data, piece) = match prepared.map(|p| bundle.encode_around(p)) {
            Some(Ok(data)) => {
                self.counters.sends_prepared += 1;
                // And when that thread also wrote it to a staging file, only the head is
                // written here; a file that cannot take it (an I/O error) is deleted and the
                // bundle stored as usual.
                let piece = staged.and_then(|s| s.complete(&data).ok().flatten());
                if piece.is_some() {
                    self.counters.sends_staged += 1;
                }
                (data, piece)
            }
            _ => (Bytes::from(bundle.encode()), None),
        };
        let dest = self.classify(&bundle.primary().destination);
        let role = match dest {
            Dest::Remote => Role::Forward,
            Dest::Admin => {
                // A record to ourselves (e.g. a report about our own bundle): consumed at once.
                self.consume_admin(now, &bundle, txn);
                return Ok(None);
            }
            Dest::Echo | Dest::Local => Role::Deliver,
        };
        let meta = super::rx::meta_for(&bundle, role, now, priority, None, data.len() as u64);
        let id = meta.id.clone();
        let exp = meta.expires_at_ms;
        let key = self.stage_put_from(txn, meta, None, data, piece, BundleEventKind::Created)?;
        self.stage_dedup(txn, &id, exp);
        Ok(Some(key))
    }

    /// Stages the status report `kind` about the bundle described by `meta`, if its flags ask
    /// for it and the configuration allows. Reports are never generated about administrative
    /// records (RFC 9171 5.x), and are dropped (counted) when the store has no room for them.
    pub(super) fn stage_report(
        &mut self,
        now: DtnTime,
        txn: &mut Txn,
        meta: &BundleMeta,
        kind: ReportKind,
        reason: ReasonCode,
    ) {
        self.stage_status_report(now, txn, meta, kind, reason, false);
    }

    /// [`Agent::stage_report`], or with `always` even when the bundle did not ask for this report
    /// (a security policy that reports failures).
    pub(super) fn stage_status_report(
        &mut self,
        now: DtnTime,
        txn: &mut Txn,
        meta: &BundleMeta,
        kind: ReportKind,
        reason: ReasonCode,
        always: bool,
    ) {
        if !self.cfg.status_reports
            || !(always || meta.flags.contains(kind.flag()))
            || meta.flags.contains(BundleFlags::ADMIN_RECORD)
            || meta.report_to.is_none()
        {
            return;
        }
        let time = meta
            .flags
            .contains(BundleFlags::STATUS_TIME_REQUESTED)
            .then_some(now);
        let yes = StatusItem::yes(time);
        let mut sr = StatusReport {
            received: StatusItem::NO,
            forwarded: StatusItem::NO,
            delivered: StatusItem::NO,
            deleted: StatusItem::NO,
            reason,
            source: meta.id.source.clone(),
            timestamp: meta.id.timestamp,
            fragment: meta.id.fragment,
        };
        match kind {
            ReportKind::Received => sr.received = yes,
            ReportKind::Forwarded => sr.forwarded = yes,
            ReportKind::Delivered => sr.delivered = yes,
            ReportKind::Deleted => sr.deleted = yes,
        }
        let record = AdminRecord::StatusReport(sr);
        let ts = self.next_creation(now, txn);
        let mut b = BundleBuilder::new(self.node_eid.clone(), meta.report_to.clone())
            .creation(ts)
            .lifetime_ms(self.cfg.default_lifetime_ms)
            .report_to(Eid::DtnNone)
            .admin_record(&record);
        if let Some(h) = self.cfg.hop_limit_default {
            b = b.hop_limit(h);
        }
        let Ok(mut report) = b.build() else {
            return;
        };
        if self.secure_new(&mut report).is_err() {
            self.counters.reports_dropped += 1;
            return;
        }
        match self.stage_new(now, txn, report, PRIORITY_NORMAL, None) {
            Ok(_) => self.counters.reports_sent += 1,
            Err(_) => self.counters.reports_dropped += 1,
        }
    }
}
