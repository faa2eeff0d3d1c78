//! Bundles leaving the agent towards convergence layers: per-neighbour queues served by priority
//! class then FIFO, round-robin between neighbours, per-hop block updates, and retention until
//! the convergence layer reports the outcome.

use bpv7::{Bundle, BundleFlags, DecodeLimits, ReasonCode};
use bytes::Bytes;

use super::{
    Agent, AgentError, BundleEventKind, ClaOutcome, DtnTime, Forward, ForwardRef, HopBundle,
    ReportKind, State, Txn,
};

/// Bytes of a stored bundle read for its head when the store does not hold it in memory: the
/// primary block, a previous-node, bundle-age and hop-count block and the payload block's first
/// fields fit many times over; a longer head (large security blocks) is read whole.
const HEAD_READ_BYTES: usize = 4096;
use crate::store::{BundleKey, BundleMeta, Op, Store};
use crate::NodeNum;

impl<S: Store> Agent<S> {
    /// Tells the agent the link to `neighbour` is up (from the contact plan or configuration);
    /// its queue starts draining through [`Agent::poll_transmit`] and bundles waiting for a
    /// route are routed again.
    pub fn link_up(&mut self, _now: DtnTime, neighbour: NodeNum, rate_bps: u64) {
        self.links.insert(neighbour, rate_bps);
        self.routing_dirty = true;
    }

    /// Tells the agent the link to `neighbour` is down. Bundles queued for it (not in flight) are
    /// routed again; in-flight ones stay in flight until the convergence layer reports.
    pub fn link_down(&mut self, now: DtnTime, neighbour: NodeNum) {
        self.links.remove(&neighbour);
        let Some(q) = self.queues.remove(&neighbour) else {
            return;
        };
        for (_, _, key) in q {
            let route = self.entries.get_mut(&key).and_then(|e| e.route.take());
            if let (Some(r), Some(e)) = (route, self.entries.get(&key)) {
                let len = e.meta.len;
                self.routing.cgr.unbook(&r, len);
                self.log_release_key(now, key, &r);
            }
            self.enqueue_unrouted(key);
        }
    }

    /// Sets the largest bundle (encoded bytes) the convergence layer towards `neighbour` can
    /// carry, e.g. the largest LTP block its peer accepts (`None`: no limit). A stored bundle
    /// larger than that is fragmented (RFC 9171 5.8) when it is next handed to that neighbour:
    /// its fragments replace it in the store (one transaction) and are forwarded instead. A
    /// bundle that must not be fragmented is handed over whole (the convergence layer decides).
    pub fn set_neighbour_max_bundle(&mut self, neighbour: NodeNum, max: Option<u64>) {
        match max {
            Some(m) => self.neighbour_limits.insert(neighbour, m),
            None => self.neighbour_limits.remove(&neighbour),
        };
    }

    /// Replaces the stored bundle `key` by fragments that fit `limit` once this hop's blocks
    /// are updated, in one commit. True when done (the fragments are queued); false when it
    /// could not be (no fit, the store full or failing): the bundle is then left as it was.
    fn refragment(&mut self, now: DtnTime, key: BundleKey, bundle: &Bundle, limit: u64) -> bool {
        let Some(meta) = self.entries.get(&key).map(|e| e.meta.clone()) else {
            return false;
        };
        // Room for what `prepare` changes on each fragment: the previous node (this node), a
        // grown bundle age and hop count.
        let margin = 64 + self.node_eid.encoded_len() as u64;
        let max = usize::try_from(limit.saturating_sub(margin)).unwrap_or(usize::MAX);
        let Ok(frags) = bpv7::fragment::fragment(bundle, max) else {
            return false;
        };
        if frags.len() < 2 {
            return false;
        }
        let mut txn = Txn::default();
        let encoded: Vec<Bytes> = frags.iter().map(|f| Bytes::from(f.encode())).collect();
        let total: u64 = encoded.iter().map(|d| d.len() as u64).sum();
        if total > self.free_bytes(&txn).saturating_add(meta.len) {
            return false;
        }
        for (f, data) in frags.iter().zip(encoded) {
            let m = BundleMeta {
                id: f.id(),
                flags: f.primary().wire_flags(),
                len: data.len() as u64,
                ..meta.clone()
            };
            let k = self.alloc_key();
            txn.added_bytes += m.len;
            txn.batch.push(Op::Put {
                key: k,
                meta: m.clone(),
                data: data.clone(),
            });
            txn.added
                .push((k, m, meta.prev_hop, data, BundleEventKind::Fragmented));
        }
        txn.batch.push(Op::Delete(key));
        if self.commit_txn(now, txn).is_err() {
            // The original stays: its delete must not outlive the failed commit as a deferred one.
            self.pending.remove_delete(key);
            return false;
        }
        self.remove_entry(key);
        self.counters.refragmented += 1;
        self.route_unrouted(now);
        true
    }

    /// Neighbours whose link is up, with their rate as given to [`Agent::link_up`].
    pub fn links(&self) -> impl Iterator<Item = (NodeNum, u64)> + '_ {
        self.links.iter().map(|(n, r)| (*n, *r))
    }

    /// The next bundle to hand to a convergence layer, for a neighbour whose link is up.
    /// Neighbours are served round-robin; within a neighbour, expedited before normal before bulk,
    /// FIFO within a class. The returned bundle has this hop's previous-node block, updated
    /// bundle age and incremented hop count; the stored copy stays until [`Agent::cla_result`].
    ///
    /// The bytes are read and assembled here, on the caller's thread; a driver that hands
    /// bundles to other threads uses [`Agent::poll_transmit_ref`] instead. A bundle whose stored
    /// bytes cannot be read is kept and handled as [`Agent::cla_unreadable`] says.
    pub fn poll_transmit(&mut self, now: DtnTime) -> Option<Forward> {
        loop {
            let f = self.poll_transmit_ref(now)?;
            match f.bundle.into_bytes() {
                Ok(bundle) => {
                    return Some(Forward {
                        neighbour: f.neighbour,
                        key: f.key,
                        bundle,
                    })
                }
                Err(e) => {
                    // Kept and queued again; the store is degraded until it recovers, so this
                    // loop ends (a degraded store hands nothing out until its next retry).
                    let _ = self.cla_unreadable(now, f.key, &e);
                }
            }
        }
    }

    /// [`Agent::poll_transmit`] without reading the bundle: the agent decides everything for
    /// this hop from the bundle's metadata and head (read alone from the store when the store
    /// does not hold the bundle in memory) and describes the bytes to send ([`HopBundle`]); the
    /// convergence layer's thread reads them, checks them against the store's CRC and writes the
    /// new head in front ([`HopBundle::into_bytes`]). No payload byte is read, checked or copied
    /// here (a bundle that must be refragmented for its neighbour is the exception: it is read
    /// whole).
    pub fn poll_transmit_ref(&mut self, now: DtnTime) -> Option<ForwardRef> {
        if self.expiry.first().is_some_and(|(t, _)| *t <= now) {
            // Never hand out a bundle whose lifetime ended; a store failure here is retried at
            // the next timeout.
            let _ = self.handle_timeout(now);
        }
        self.clock = self.clock.max(now);
        if self.routing_dirty {
            self.route_unrouted(now);
        }
        loop {
            let Some((neighbour, key)) = self.next_queued(now) else {
                // Idle: a good moment to commit deferred deletes.
                let _ = self.flush();
                return None;
            };
            if let Some(f) = self.prepare(now, neighbour, key) {
                return Some(f);
            }
        }
    }

    /// A convergence layer's thread could not read the stored bytes of a bundle handed out by
    /// [`Agent::poll_transmit_ref`] ([`HopBundle::into_bytes`] failed: an I/O error, or bytes
    /// that no longer match the store's CRC). Nothing was sent and nothing is lost: the bundle
    /// stays stored, the store is marked degraded with `error` as its reason (`status` shows
    /// it; new bundles are refused meanwhile), and the bundle is set aside until a recovery
    /// attempt succeeds (retried with the store's back-off, not in a loop), then routed and
    /// queued again. Unknown keys are ignored.
    pub fn cla_unreadable(
        &mut self,
        now: DtnTime,
        key: BundleKey,
        error: &crate::store::StoreError,
    ) -> Result<(), AgentError> {
        let neighbour = match self.entries.get(&key).map(|e| e.state) {
            Some(State::InFlight(n)) => n,
            _ => return Ok(()),
        };
        self.clock = self.clock.max(now);
        self.store_failed(error);
        self.release_failed(now, key, neighbour);
        if let Some(e) = self.entries.get_mut(&key) {
            e.state = State::Unrouted;
            self.unreadable.push(key);
        }
        Ok(())
    }

    /// A forwarding to `neighbour` that did not happen: its booking on the route is released and
    /// the `Failed` event logged (the caller decides where the bundle goes next).
    fn release_failed(&mut self, now: DtnTime, key: BundleKey, neighbour: NodeNum) {
        let route = self.entries.get_mut(&key).and_then(|e| e.route.take());
        if let Some(e) = self.entries.get(&key) {
            let meta = e.meta.clone();
            if let Some(r) = route {
                self.routing.cgr.unbook(&r, meta.len);
                self.log_release(now, &meta, &r);
            }
            self.event(
                now,
                BundleEventKind::Failed,
                &meta,
                Some(neighbour),
                Some(key),
            );
        }
    }

    /// Pops the next (neighbour, bundle) to serve, round-robin over up links that are not
    /// backing off (no allocation).
    fn next_queued(&mut self, now: DtnTime) -> Option<(NodeNum, BundleKey)> {
        let backoffs = &self.backoffs;
        let has_work = |n: &NodeNum| {
            self.queues.get(n).is_some_and(|q| !q.is_empty()) && !backoffs.blocks(*n, now)
        };
        let pick = match self.last_served {
            Some(s) => self
                .links
                .range(s.saturating_add(1)..)
                .chain(self.links.range(..=s))
                .map(|(n, _)| *n)
                .find(has_work),
            None => self.links.keys().copied().find(has_work),
        }?;
        let (_, _, key) = self.queues.get_mut(&pick)?.pop_first()?;
        self.last_served = Some(pick);
        Some((pick, key))
    }

    /// Decides a bundle's bytes for this hop from its head (previous node, bundle age, hop
    /// count updated; the payload is not read); `None` if it had to be dropped, was
    /// refragmented, or could not be read (then it is queued again).
    fn prepare(&mut self, now: DtnTime, neighbour: NodeNum, key: BundleKey) -> Option<ForwardRef> {
        let received_at = self.entries.get(&key)?.meta.received_at_ms;
        let stored = match self.store.locate(key) {
            Ok(Some(s)) => s,
            Ok(None) => {
                self.finish_entry(key);
                return None;
            }
            Err(e) => {
                // Store read failure: put it back for a later attempt; the store is degraded
                // until a recovery attempt works.
                self.store_failed(&e);
                self.enqueue_unrouted(key);
                return None;
            }
        };
        // The bytes were CRC-checked when they arrived (or built here) and the store checks its own
        // integrity, so the block CRCs are not recomputed on the way out.
        let trusted = DecodeLimits::trusted_store();
        let (mut head, payload_at) = self.read_head(key, &stored, &trusted)?;
        if let Some(&limit) = self.neighbour_limits.get(&neighbour) {
            let too_large = stored.len() > limit;
            let may = !head
                .primary()
                .flags
                .contains(BundleFlags::MUST_NOT_FRAGMENT);
            if too_large && may {
                // Rare (a neighbour with a smaller limit than the bundle): read whole here.
                let whole = stored
                    .read()
                    .ok()
                    .and_then(|d| Bundle::decode_with_limits(d, &trusted).ok());
                if let Some(bundle) = whole {
                    if self.refragment(now, key, &bundle, limit) {
                        return None;
                    }
                }
            }
        }
        let renamed = head.set_previous_node(&self.node_eid);
        let aged = head.add_bundle_age(now.saturating_sub(received_at));
        let hops = head.increment_hop_count();
        // A bundle this node created (stored with itself as previous node, without hop count or
        // age block) leaves exactly as stored: no new head.
        let unchanged = !renamed && matches!(aged, Ok(None)) && matches!(hops, Ok(None));
        let over = matches!(hops, Ok(Some(h)) if h.exceeded()) || hops.is_err() || aged.is_err();
        // The head came from an unchecked prefix: a deletion decided on it waits for the whole
        // record to pass the store's CRC, so damaged bytes degrade the store, never delete a bundle.
        if over && !self.stored_intact(key, &stored) {
            return None;
        }
        if over {
            let mut txn = Txn::default();
            let (kind, reason) = (BundleEventKind::Deleted, ReasonCode::HopLimitExceeded);
            if self
                .delete_reported(now, key, kind, Some(neighbour), reason, &mut txn)
                .is_some()
            {
                self.counters.hop_limit_exceeded += 1;
                let _ = self.commit_txn(now, txn);
            }
            return None;
        }
        let new_head = if unchanged {
            None
        } else {
            let Some(h) = head.encode_head() else {
                if self.stored_intact(key, &stored) {
                    self.finish_entry(key);
                }
                return None;
            };
            Some((Bytes::from(h), payload_at))
        };
        if let Some(e) = self.entries.get_mut(&key) {
            e.state = State::InFlight(neighbour);
        }
        Some(ForwardRef {
            neighbour,
            key,
            bundle: HopBundle::stored(key, stored, new_head),
        })
    }

    /// The head of a stored bundle (its blocks in front of the payload, see
    /// [`Bundle::decode_head`]) and the offset of its payload block: decoded from the first
    /// [`HEAD_READ_BYTES`] (all of it only when the head is longer). `None` when the bundle was
    /// dropped as undecodable, or could not be read (then it is queued again and the store is
    /// degraded): a head that does not decode is confirmed by a full, CRC-checked read before
    /// the bundle is given up, so a damaged store never deletes a bundle.
    fn read_head(
        &mut self,
        key: BundleKey,
        stored: &crate::store::StoredBytes,
        trusted: &DecodeLimits,
    ) -> Option<(Bundle, usize)> {
        let prefix = match stored.prefix(HEAD_READ_BYTES) {
            Ok(p) => p,
            Err(e) => {
                self.store_failed(&e);
                self.enqueue_unrouted(key);
                return None;
            }
        };
        if let Ok(h) = Bundle::decode_head(&prefix, trusted) {
            return Some(h);
        }
        let whole = match stored.read() {
            Ok(w) => w,
            Err(e) => {
                self.store_failed(&e);
                self.enqueue_unrouted(key);
                return None;
            }
        };
        match Bundle::decode_head(&whole, trusted) {
            Ok(h) => Some(h),
            Err(_) => {
                self.finish_entry(key);
                None
            }
        }
    }

    /// Whether a stored bundle's whole record passes the store's CRC; when it does not (or cannot be
    /// read), the store is marked degraded and the bundle queued again, as for any failed read.
    fn stored_intact(&mut self, key: BundleKey, stored: &crate::store::StoredBytes) -> bool {
        match stored.read() {
            Ok(_) => true,
            Err(e) => {
                self.store_failed(&e);
                self.enqueue_unrouted(key);
                false
            }
        }
    }

    /// The convergence layer's verdict on a bundle from [`Agent::poll_transmit`]. `Sent`: the
    /// bundle is deleted (forwarding report if requested). `Failed`: it is routed and queued
    /// again at once (e.g. an LTP session cancelled under HSLTP). Unknown keys are ignored (the
    /// bundle expired meanwhile, or this is a stale token from before a restart).
    pub fn cla_result(
        &mut self,
        now: DtnTime,
        key: BundleKey,
        outcome: ClaOutcome,
    ) -> Result<(), AgentError> {
        let neighbour = match self.entries.get(&key).map(|e| e.state) {
            Some(State::InFlight(n)) => n,
            _ => return Ok(()),
        };
        self.clock = self.clock.max(now);
        match outcome {
            ClaOutcome::Sent => {
                self.backoffs.reset(neighbour);
                let Some(entry) = self.finish_entry(key) else {
                    return Ok(());
                };
                self.counters.forwarded += 1;
                self.event(
                    now,
                    BundleEventKind::Forwarded,
                    &entry.meta,
                    Some(neighbour),
                    Some(key),
                );
                let mut txn = Txn::default();
                self.stage_report(
                    now,
                    &mut txn,
                    &entry.meta,
                    ReportKind::Forwarded,
                    ReasonCode::NoInformation,
                );
                self.commit_txn(now, txn)?;
                self.maybe_flush()
            }
            ClaOutcome::Failed | ClaOutcome::Refused => {
                self.counters.cla_failures += 1;
                if outcome == ClaOutcome::Refused {
                    self.counters.cla_refusals += 1;
                    let (first, max) = (
                        self.cfg.refusal_backoff_first_ms,
                        self.cfg.refusal_backoff_max_ms,
                    );
                    self.backoffs.refused(now, neighbour, first, max);
                }
                self.release_failed(now, key, neighbour);
                self.enqueue_unrouted(key);
                Ok(())
            }
        }
    }
}
