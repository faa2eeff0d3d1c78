//! Bundles leaving the agent towards convergence layers: per-neighbour queues served by priority
//! class then FIFO, round-robin between neighbours, per-hop block updates, and retention until
//! the convergence layer reports the outcome.

use bpv7::{Bundle, DecodeLimits, ReasonCode};
use bytes::Bytes;

use super::{
    Agent, AgentError, BundleEventKind, ClaOutcome, DtnTime, Forward, ReportKind, State, Txn,
};
use crate::store::{BundleKey, Store};
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
    pub fn link_down(&mut self, _now: DtnTime, neighbour: NodeNum) {
        self.links.remove(&neighbour);
        let Some(q) = self.queues.remove(&neighbour) else {
            return;
        };
        for (_, _, key) in q {
            let route = self.entries.get_mut(&key).and_then(|e| e.route.take());
            if let (Some(r), Some(e)) = (route, self.entries.get(&key)) {
                let len = e.meta.len;
                self.routing.cgr.unbook(&r, len);
            }
            self.enqueue_unrouted(key);
        }
    }

    /// Neighbours whose link is up, with their rate as given to [`Agent::link_up`].
    pub fn links(&self) -> impl Iterator<Item = (NodeNum, u64)> + '_ {
        self.links.iter().map(|(n, r)| (*n, *r))
    }

    /// The next bundle to hand to a convergence layer, for a neighbour whose link is up.
    /// Neighbours are served round-robin; within a neighbour, expedited before normal before bulk,
    /// FIFO within a class. The returned bundle has this hop's previous-node block, updated
    /// bundle age and incremented hop count; the stored copy stays until [`Agent::cla_result`].
    pub fn poll_transmit(&mut self, now: DtnTime) -> Option<Forward> {
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

    /// Reads, updates and encodes a bundle for this hop; `None` if it had to be dropped.
    fn prepare(&mut self, now: DtnTime, neighbour: NodeNum, key: BundleKey) -> Option<Forward> {
        let received_at = self.entries.get(&key)?.meta.received_at_ms;
        let data = match self.store.data(key) {
            Ok(d) => d,
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
        let stored = data.clone();
        let Some(mut bundle) = data.and_then(|d| Bundle::decode_with_limits(d, &trusted).ok())
        else {
            self.finish_entry(key);
            return None;
        };
        let renamed = bundle.set_previous_node(&self.node_eid);
        let aged = bundle.add_bundle_age(now.saturating_sub(received_at));
        let hops = bundle.increment_hop_count();
        // A bundle this node created (stored with itself as previous node, without hop count or
        // age block) leaves exactly as stored: no re-encode, no copy.
        let unchanged = !renamed && matches!(aged, Ok(None)) && matches!(hops, Ok(None));
        let over = matches!(hops, Ok(Some(h)) if h.exceeded()) || hops.is_err() || aged.is_err();
        if over {
            if let Some(entry) = self.remove_entry(key) {
                self.counters.hop_limit_exceeded += 1;
                self.event(
                    now,
                    BundleEventKind::Deleted,
                    &entry.meta,
                    Some(neighbour),
                    Some(key),
                );
                let mut txn = Txn::default();
                txn.batch.push(crate::store::Op::Delete(key));
                self.stage_report(
                    now,
                    &mut txn,
                    &entry.meta,
                    ReportKind::Deleted,
                    ReasonCode::HopLimitExceeded,
                );
                let _ = self.commit_txn(now, txn);
            }
            return None;
        }
        if let Some(e) = self.entries.get_mut(&key) {
            e.state = State::InFlight(neighbour);
        }
        let bundle = match stored {
            Some(bytes) if unchanged => bytes,
            _ => Bytes::from(bundle.encode()),
        };
        Some(Forward {
            neighbour,
            key,
            bundle,
        })
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
                let route = self.entries.get_mut(&key).and_then(|e| e.route.take());
                if let Some(e) = self.entries.get(&key) {
                    let meta = e.meta.clone();
                    if let Some(r) = route {
                        self.routing.cgr.unbook(&r, meta.len);
                    }
                    self.event(
                        now,
                        BundleEventKind::Failed,
                        &meta,
                        Some(neighbour),
                        Some(key),
                    );
                }
                self.enqueue_unrouted(key);
                Ok(())
            }
        }
    }
}
