//! The Bundle Protocol agent core (RFC 9171 section 5), sans-IO.
//!
//! The agent receives bundles from applications ([`Agent::send`]) and convergence layers
//! ([`Agent::accept_from_cla`]), keeps them in a [`Store`] until they are forwarded, delivered or
//! expired, and tells its driver what to do next through poll methods ([`Agent::poll_transmit`],
//! [`Agent::poll_delivery`], [`Agent::poll_timeout`]). Time is always a parameter (DTN ms); the
//! agent never reads a clock, opens a socket or spawns a thread, so the node runtime and the
//! simulator drive the same code. The driver contract is `AGENT_API.md`; the state machine and
//! durability rules are in `docs/store.md`.
//!
//! Per stored bundle, the agent keeps an in-memory state layered over the persisted [`Role`]:
//!
//! ```text
//! Forward:  unrouted ──route──▶ queued(n) ──link n up, poll_transmit──▶ in flight(n)
//!              ▲                    │ link n down                       │ Sent: deleted
//!              └────────────────────┴───────────────────── Failed ◀────┘
//! Deliver:  awaiting endpoint ──register──▶ ready ──poll_delivery──▶ offered ──delivered: deleted
//! Fragment: waiting for the other fragments ──complete──▶ replaced by one Deliver bundle
//! ```
//!
//! Only the role is persisted: after a restart, in-flight bundles are queued again and offered
//! deliveries are offered again (at-least-once; applications de-duplicate on [`BundleId`]).
//!
//! A driver's loop, here two nodes joined by a perfect in-memory "convergence layer":
//!
//! ```
//! use bp::{Agent, AgentConfig, ClaOutcome, MemoryStore, SendRequest};
//! use bpv7::Eid;
//!
//! let now = 800_000_000_000; // DTN ms
//! let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), now)?;
//! let mut b = Agent::open(AgentConfig::new(2), MemoryStore::new(), now)?;
//! b.register(Eid::ipn(2, 1))?;
//! a.link_up(now, 2, 1_000_000);
//! a.send(now, SendRequest::new(Eid::ipn(1, 1), Eid::ipn(2, 1), "hi".into()))?;
//! while let Some(f) = a.poll_transmit(now) {
//!     let ok = b.accept_from_cla(now, Some(1), f.bundle).is_ok(); // committed: acknowledge
//!     a.cla_result(now, f.key, if ok { ClaOutcome::Sent } else { ClaOutcome::Failed })?;
//! }
//! let d = b.poll_delivery().expect("delivered");
//! assert_eq!(&d.payload[..], b"hi");
//! b.delivered(now, d.key)?; // the application has it: deleted from b's store
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backoff;
mod blocks;
mod csv_log;
mod discards;
mod events;
mod health;
mod local;
mod notes;
mod route_log;
mod routing;
mod rx;
mod security;
mod stream;
mod tx;
mod types;

pub use backoff::NeighbourBackoff;
pub use blocks::{crcs_ok, BlockDiscard, BlockVerdict, ClaBlock};
pub use csv_log::{CsvLog, CsvRows};
pub use discards::split_failure_reason;
pub use events::{
    BundleEvent, BundleEventKind, BundleEventSink, BundleRows, CsvBundleLog, CSV_HEADER,
};
pub use health::{Degraded, StoreHealth};
pub use route_log::{
    CsvRouteLog, RouteEvent, RouteEventKind, RouteEventSink, RouteMethod, RouteRows,
    ROUTE_CSV_HEADER,
};
pub use stream::{StreamPlan, StreamRequest};
pub use types::{
    Accepted, AdminNotice, AgentConfig, AgentError, AgentStatus, ClaOutcome, Delivery,
    DeliveryReadError, DeliveryRef, DtnTime, Forward, ForwardRef, HopBundle, ReportFlags, RxError,
    SendError, SendRequest, PRIORITY_BULK, PRIORITY_EXPEDITED, PRIORITY_NORMAL,
};

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use bpv7::{AduKey, BundleFlags, BundleId, Eid, ReasonCode, Reassembler, ReassemblyLimits};
use bytes::Bytes;

use crate::store::{dedup_key, Batch, BundleKey, BundleMeta, Op, Role, Store, StoreError};
use crate::{Cgr, CgrLimits, ContactPlan, NodeNum, Route, StaticRoutes};

/// Deferred deletes are committed once this many accumulate (or at the next commit, timeout or
/// idle poll, whichever comes first).
const DEFERRED_FLUSH_OPS: usize = 64;

/// Granularity of duplicate-record pruning wake-ups (see [`Agent::poll_timeout`]).
const DEDUP_PRUNE_ROUND_MS: u64 = 60_000;

/// The transient state of a stored bundle (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Unrouted,
    Queued(NodeNum),
    InFlight(NodeNum),
    AwaitEndpoint,
    Ready,
    Offered,
    Fragment,
}

#[derive(Debug, Clone)]
struct Entry {
    meta: BundleMeta,
    state: State,
    /// Position in the unrouted set or a neighbour queue: (class, enqueue sequence).
    qpos: (u8, u64),
    /// The CGR route the bundle is booked on, to release the booking if it is re-routed.
    route: Option<Route>,
}

/// Queue position ordering: expedited first, then FIFO.
fn class_of(priority: u8) -> u8 {
    2u8.saturating_sub(priority.min(PRIORITY_EXPEDITED))
}

/// Routing configuration and state owned by the agent.
#[derive(Debug)]
struct Routing {
    plan: Option<Arc<ContactPlan>>,
    drive_links: bool,
    statics: StaticRoutes,
    dtn_routes: BTreeMap<String, NodeNum>,
    cgr: Cgr,
}

/// A group of changes committed together, with what to do in memory once they are durable.
#[derive(Default)]
struct Txn {
    batch: Batch,
    added: Vec<(
        BundleKey,
        BundleMeta,
        Option<NodeNum>,
        Bytes,
        BundleEventKind,
    )>,
    added_bytes: u64,
    dedup: Vec<(Vec<u8>, u64)>,
    admin: Vec<AdminNotice>,
}

/// The bundle protocol agent of one node. See the module documentation.
pub struct Agent<S: Store> {
    cfg: AgentConfig,
    node_eid: Eid,
    store: S,
    entries: BTreeMap<BundleKey, Entry>,
    expiry: BTreeSet<(u64, BundleKey)>,
    dedup: BTreeMap<Vec<u8>, u64>,
    dedup_expiry: BTreeSet<(u64, Vec<u8>)>,
    unrouted: BTreeSet<(u8, u64, BundleKey)>,
    queues: BTreeMap<NodeNum, BTreeSet<(u8, u64, BundleKey)>>,
    links: BTreeMap<NodeNum, u64>,
    last_served: Option<NodeNum>,
    ready: VecDeque<BundleKey>,
    registered: BTreeSet<Eid>,
    /// Endpoints whose application cannot take deliveries now, with their ready bundles in
    /// order (see [`Agent::hold_deliveries`]).
    held: BTreeMap<Eid, VecDeque<BundleKey>>,
    reassembler: Reassembler,
    fragments: BTreeMap<AduKey, Vec<BundleKey>>,
    admin: VecDeque<AdminNotice>,
    routing: Routing,
    routing_dirty: bool,
    /// Bundles whose stored bytes a convergence layer ([`Agent::cla_unreadable`]) or an
    /// application's writer ([`Agent::delivery_unreadable`]) could not read: kept aside, not
    /// routed or offered, until the store recovers.
    unreadable: Vec<BundleKey>,
    plan_cursor: DtnTime,
    plan_dirty: bool,
    /// The next change of a plan-driven link after `plan_cursor`, computed once per change
    /// (`apply_plan_links`) instead of at every `poll_timeout`: a sweep of a large plan costs
    /// O(n log n), and a driver asks for its next timeout at every turn of its loop.
    plan_next: Option<DtnTime>,
    next_key: u64,
    next_qseq: u64,
    creation_cursor: (u64, u64),
    pending: Batch,
    used: u64,
    /// Bundles (count, bytes) stored for registered endpoints and not acknowledged by their
    /// application yet (states Ready and Offered): see [`Agent::delivery_backlog`].
    owed: (u64, u64),
    counters: AgentStatus,
    sink: Option<Box<dyn BundleEventSink + Send>>,
    /// The route decision log (`docs/route-log.md`), if the driver installed one.
    route_sink: Option<Box<dyn RouteEventSink + Send>>,
    security: Option<bpsec::Policy>,
    /// Healthy, or degraded after a store failure (see [`StoreHealth`]).
    health: StoreHealth,
    /// Neighbours backing off after refusing bundles for lack of resources.
    backoffs: backoff::Backoffs,
    /// The latest `now` a driver passed in: the time of failures found where no `now` is given.
    clock: DtnTime,
    /// Streamed sends opened and not yet committed or aborted ([`Agent::begin_stream`]).
    streams: BTreeMap<u64, stream::OpenStream>,
    next_stream: u64,
    /// Store quota reserved by the open streams.
    reserved: u64,
    /// Largest bundle each neighbour's convergence layer carries (larger ones are fragmented
    /// before forwarding, see [`Agent::set_neighbour_max_bundle`]).
    neighbour_limits: BTreeMap<NodeNum, u64>,
}

impl<S: Store> std::fmt::Debug for Agent<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("node", &self.cfg.node)
            .field("bundles", &self.entries.len())
            .field("used", &self.used)
            .finish()
    }
}

impl<S: Store> Agent<S> {
    /// Opens an agent on `store` and resumes what it holds: bundles to forward are queued for
    /// routing again (including those that were in flight when the node stopped), bundles for
    /// local endpoints wait for their endpoint to register, fragments go back to reassembly, and
    /// anything whose lifetime ended while the node was down is expired now.
    pub fn open(cfg: AgentConfig, store: S, now: DtnTime) -> Result<Agent<S>, AgentError> {
        Agent::open_logged(cfg, store, now, None)
    }

    /// [`Agent::open`] with the bundle event log installed first, so what happens while the
    /// store is resumed (bundles expired while the node was down, fragments reassembled) is
    /// logged too; a sink installed after `open` with [`Agent::set_event_sink`] misses those.
    pub fn open_logged(
        cfg: AgentConfig,
        mut store: S,
        now: DtnTime,
        sink: Option<Box<dyn BundleEventSink + Send>>,
    ) -> Result<Agent<S>, AgentError> {
        let contents = store.contents()?;
        let node_eid = Eid::ipn(cfg.node, 0);
        let reassembler = Reassembler::new(ReassemblyLimits {
            max_pending_bytes: usize::try_from(cfg.max_reassembly_bytes).unwrap_or(usize::MAX),
            max_adu_len: cfg.max_reassembled_adu,
            ..ReassemblyLimits::default()
        });
        let mut agent = Agent {
            routing: Routing {
                plan: None,
                drive_links: false,
                statics: StaticRoutes::new(),
                dtn_routes: BTreeMap::new(),
                cgr: Cgr::new(cfg.node, CgrLimits::default()),
            },
            node_eid,
            store,
            entries: BTreeMap::new(),
            expiry: BTreeSet::new(),
            dedup: BTreeMap::new(),
            dedup_expiry: BTreeSet::new(),
            unrouted: BTreeSet::new(),
            queues: BTreeMap::new(),
            links: BTreeMap::new(),
            last_served: None,
            ready: VecDeque::new(),
            registered: BTreeSet::new(),
            held: BTreeMap::new(),
            reassembler,
            fragments: BTreeMap::new(),
            admin: VecDeque::new(),
            routing_dirty: true,
            unreadable: Vec::new(),
            plan_cursor: now,
            plan_dirty: false,
            plan_next: None,
            next_key: 1,
            next_qseq: 0,
            creation_cursor: contents.creation_cursor.unwrap_or((0, 0)),
            pending: Batch::new(),
            used: 0,
            owed: (0, 0),
            counters: AgentStatus::default(),
            sink,
            route_sink: None,
            security: None,
            health: StoreHealth::default(),
            backoffs: backoff::Backoffs::default(),
            clock: now,
            streams: BTreeMap::new(),
            next_stream: 1,
            reserved: 0,
            neighbour_limits: BTreeMap::new(),
            cfg,
        };
        for (id, exp) in contents.dedup {
            agent.dedup_expiry.insert((exp, id.clone()));
            agent.dedup.insert(id, exp);
        }
        let mut fragments = Vec::new();
        for (key, meta) in contents.bundles {
            agent.next_key = agent.next_key.max(key.0.saturating_add(1));
            if meta.role == Role::Fragment {
                fragments.push(key);
            }
            agent.insert_entry(key, meta);
        }
        let mut txn = Txn::default();
        for key in fragments {
            let data = agent.store.data(key)?;
            if let Some(bundle) = data.and_then(|d| bpv7::Bundle::decode(d).ok()) {
                agent.reassemble(now, key, bundle, &mut txn);
            }
        }
        agent.commit_txn(now, txn)?;
        agent.cancel_interrupted_streams(now);
        agent.handle_timeout(now)?;
        Ok(agent)
    }

    /// The configuration.
    pub fn config(&self) -> &AgentConfig {
        &self.cfg
    }

    /// This node's node id (`ipn:N.0`).
    pub fn node_eid(&self) -> &Eid {
        &self.node_eid
    }

    /// The store (read-only), e.g. to check its accounting.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Gives the store back without committing deferred deletes: what a crash would leave.
    /// (Deferred deletes only concern bundles already forwarded or delivered; losing them means a
    /// duplicate forward or delivery after restart, never a loss.) Use [`Agent::close`] for an
    /// orderly shutdown.
    pub fn into_store(self) -> S {
        self.store
    }

    /// Commits deferred deletes and gives the store back.
    pub fn close(mut self) -> Result<S, AgentError> {
        self.flush()?;
        Ok(self.store)
    }

    /// Installs (or removes) the bundle event log sink.
    pub fn set_event_sink(&mut self, sink: Option<Box<dyn BundleEventSink + Send>>) {
        self.sink = sink;
    }

    /// Writes out what the bundle and route logs buffer (call it when the driver goes idle).
    pub fn flush_logs(&mut self) {
        if let Some(s) = self.sink.as_mut() {
            s.flush();
        }
        if let Some(s) = self.route_sink.as_mut() {
            s.flush();
        }
    }

    /// Installs (or removes) the route decision log sink (`docs/route-log.md`).
    pub fn set_route_sink(&mut self, sink: Option<Box<dyn RouteEventSink + Send>>) {
        self.route_sink = sink;
    }

    /// Sets the contact plan used by CGR. With `drive_links`, the agent also brings its links up
    /// and down from the plan in [`Agent::handle_timeout`] (then the driver should not call
    /// [`Agent::link_up`]/[`Agent::link_down`] for planned neighbours).
    pub fn set_contact_plan(&mut self, plan: Option<ContactPlan>, drive_links: bool) {
        self.set_shared_contact_plan(plan.map(Arc::new), drive_links);
    }

    /// [`Agent::set_contact_plan`] with a plan shared with other agents (a simulator gives every
    /// node the same `Arc`, so memory and load time do not grow with nodes × plan size). The
    /// agent only reads the plan; [`Agent::contact_plan_mut`] gives this agent its own copy
    /// first (copy on write), so a change never reaches the others.
    pub fn set_shared_contact_plan(&mut self, plan: Option<Arc<ContactPlan>>, drive_links: bool) {
        self.routing.plan = plan;
        self.routing.drive_links = drive_links;
        self.plan_dirty = drive_links;
        self.routing.cgr.invalidate();
        self.routing_dirty = true;
    }

    /// The contact plan, if any.
    pub fn contact_plan(&self) -> Option<&ContactPlan> {
        self.routing.plan.as_deref()
    }

    /// The contact plan as the shared handle the agent holds (the same `Arc` that was given to
    /// [`Agent::set_shared_contact_plan`] until [`Agent::contact_plan_mut`] copies it).
    pub fn shared_contact_plan(&self) -> Option<&Arc<ContactPlan>> {
        self.routing.plan.as_ref()
    }

    /// Mutable access to the contact plan (e.g. to add a contact at run time); routing is retried.
    /// A plan shared with other agents is copied first, so the change stays local to this agent.
    pub fn contact_plan_mut(&mut self) -> Option<&mut ContactPlan> {
        self.routing_dirty = true;
        self.plan_dirty = self.routing.drive_links;
        self.routing.plan.as_mut().map(Arc::make_mut)
    }

    /// Mutable access to the static routes (ipn node ranges → next hop); routing is retried.
    pub fn static_routes_mut(&mut self) -> &mut StaticRoutes {
        self.routing_dirty = true;
        &mut self.routing.statics
    }

    /// Adds a static route for `dtn://NAME/...` destinations via neighbour `next_hop`.
    pub fn add_dtn_route(&mut self, node_name: &str, next_hop: NodeNum) {
        self.routing
            .dtn_routes
            .insert(node_name.to_owned(), next_hop);
        self.routing_dirty = true;
    }

    /// Bytes the store quota still admits. Constant time, unlike [`Agent::status`] (which walks
    /// every stored bundle), so a driver can publish it after every commit.
    pub fn quota_free_bytes(&self) -> u64 {
        self.cfg
            .store_quota_bytes
            .saturating_sub(self.used.saturating_add(self.reserved))
    }

    /// What contact graph routing did so far (route lists computed, cached answers, no-route
    /// memo hits): for profiling a large plan.
    pub fn cgr_stats(&self) -> crate::CgrStats {
        self.routing.cgr.stats()
    }

    /// Bundles in the store. Constant time, unlike [`Agent::status`].
    pub fn stored_bundles(&self) -> usize {
        self.entries.len()
    }

    /// Counters and gauges.
    pub fn status(&self) -> AgentStatus {
        let mut s = self.counters.clone();
        s.stored_bundles = self.entries.len() as u64;
        s.stored_bytes = self.used;
        s.quota_bytes = self.cfg.store_quota_bytes;
        s.queued_per_neighbour = self
            .queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(n, q)| (*n, q.len() as u64))
            .collect();
        s.unrouted = self.unrouted.len() as u64;
        s.in_flight = self
            .entries
            .values()
            .filter(|e| matches!(e.state, State::InFlight(_)))
            .count() as u64;
        s.pending_delivery = self
            .entries
            .values()
            .filter(|e| {
                matches!(
                    e.state,
                    State::AwaitEndpoint | State::Ready | State::Offered
                )
            })
            .count() as u64;
        s.dedup_records = self.dedup.len() as u64;
        s
    }

    /// Bundles stored for registered endpoints and not yet acknowledged by their applications:
    /// (count, bytes). This is what the node owes the applications connected now; bundles for
    /// endpoints nobody registered are not counted (they are stored for later, not late). A
    /// driver compares it with a limit to stop taking bundles from its peers while the
    /// applications fall behind. O(1): kept up to date at every state change.
    pub fn delivery_backlog(&self) -> (u64, u64) {
        self.owed
    }

    /// One owed delivery of `len` bytes is no longer owed (acknowledged, removed, or its
    /// endpoint unregistered).
    fn owe_less(&mut self, len: u64) {
        self.owed.0 = self.owed.0.saturating_sub(1);
        self.owed.1 = self.owed.1.saturating_sub(len);
    }

    /// The next administrative record received for this node (status reports about bundles it
    /// sent, ...). Bounded by [`AgentConfig::max_admin_queue`].
    pub fn poll_admin(&mut self) -> Option<AdminNotice> {
        self.admin.pop_front()
    }

    /// Commits deferred deletes now. While the store is degraded they wait (in memory) for its
    /// recovery and this returns `Ok`: losing them would only mean forwarding or delivering
    /// those bundles again after a restart.
    pub fn flush(&mut self) -> Result<(), AgentError> {
        if self.pending.is_empty() || !self.health.is_ok() {
            return Ok(());
        }
        self.pending.set_time(self.clock);
        if let Err(e) = self.store.commit(&self.pending) {
            self.health.fail(self.clock, &e);
            return Err(e.into());
        }
        self.counters.commits += 1;
        self.pending.clear();
        Ok(())
    }

    /// The store's health: degraded after a failure until a recovery attempt works.
    pub fn store_health(&self) -> &StoreHealth {
        &self.health
    }

    /// Records a store failure seen outside a commit (a read), degrading the store.
    fn store_failed(&mut self, e: &StoreError) {
        self.health.fail(self.clock, e);
    }

    /// A recovery attempt, when one is due: the store recovers (redb reopens), the agent
    /// reconciles with what is on disk, and what waited (deferred deletes) is committed with the
    /// creation cursor as a probe that the store writes again.
    fn try_recover(&mut self, now: DtnTime) {
        if self.health.retry_at().is_none_or(|t| now < t) {
            return;
        }
        let attempt = (|| -> Result<(), StoreError> {
            if self.store.recover()? {
                self.reconcile()?;
            }
            let mut probe = self.pending.clone();
            let (time_ms, sequence) = self.creation_cursor;
            probe.push(Op::SetCreationCursor { time_ms, sequence });
            probe.set_time(now);
            self.store.commit(&probe)
        })();
        match attempt {
            Ok(()) => {
                self.counters.commits += 1;
                self.pending.clear();
                self.health.recovered();
                for key in std::mem::take(&mut self.unreadable) {
                    match self.entries.get(&key).map(|e| e.state) {
                        Some(State::Unrouted) => self.enqueue_unrouted(key),
                        // A delivery the application's writer could not read: offered again.
                        Some(State::Ready) => self.ready.push_back(key),
                        _ => {}
                    }
                }
            }
            Err(e) => self.health.retry_failed(now, &e),
        }
    }

    /// After the store was reopened: bundles on disk the agent does not know (a commit reported
    /// failed that reached the disk anyway, e.g. an fsync error after the write) are taken in,
    /// so nothing on disk is forgotten until the next restart.
    fn reconcile(&mut self) -> Result<(), StoreError> {
        let deleting: BTreeSet<BundleKey> = self
            .pending
            .ops()
            .iter()
            .filter_map(|op| match op {
                Op::Delete(k) => Some(*k),
                _ => None,
            })
            .collect();
        for (key, meta) in self.store.contents()?.bundles {
            if self.entries.contains_key(&key) || deleting.contains(&key) {
                continue;
            }
            self.next_key = self.next_key.max(key.0.saturating_add(1));
            self.counters.recovered_from_disk += 1;
            self.insert_entry(key, meta);
        }
        Ok(())
    }

    /// When [`Agent::handle_timeout`] should be called next: the next lifetime expiry,
    /// duplicate-record expiry or (when the agent drives links from its plan) contact change.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        let mut t = self.expiry.first().map(|(t, _)| *t);
        if let Some((d, _)) = self.dedup_expiry.first() {
            // Expired duplicate records are harmless (a copy arriving after its bundle's
            // lifetime is dropped as expired anyway), so they are pruned in coarse rounds: one
            // wake-up and one commit per round instead of one per bundle.
            let d = d
                .div_ceil(DEDUP_PRUNE_ROUND_MS)
                .saturating_mul(DEDUP_PRUNE_ROUND_MS);
            t = Some(t.map_or(d, |t| t.min(d)));
        }
        if let Some(p) = self.next_plan_change() {
            t = Some(t.map_or(p, |t| t.min(p)));
        }
        if let Some(r) = self.health.retry_at() {
            t = Some(t.map_or(r, |t| t.min(r)));
        }
        // A refused bundle waits unrouted until the next poll_transmit routes it, so unrouted
        // bundles count as work for every backing-off neighbour.
        let (queues, unrouted) = (&self.queues, !self.unrouted.is_empty());
        if let Some(b) = self.backoffs.next_end(self.clock, |n| {
            unrouted || queues.get(&n).is_some_and(|q| !q.is_empty())
        }) {
            t = Some(t.map_or(b, |t| t.min(b)));
        }
        t
    }

    /// Neighbours backing off after refusals ([`ClaOutcome::Refused`]), with their state.
    pub fn neighbour_backoffs(&self) -> impl Iterator<Item = (NodeNum, NeighbourBackoff)> + '_ {
        self.backoffs.iter()
    }

    /// Processes everything due at `now`: bundles whose lifetime ended are deleted (deletion
    /// report "lifetime expired" if requested), duplicate records that expired are forgotten,
    /// plan-driven links change, and deferred deletes are committed.
    pub fn handle_timeout(&mut self, now: DtnTime) -> Result<(), AgentError> {
        self.clock = self.clock.max(now);
        self.try_recover(now);
        self.apply_plan_links(now);
        let mut txn = Txn::default();
        while let Some(&(t, key)) = self.expiry.first() {
            if t > now {
                break;
            }
            let reason = ReasonCode::LifetimeExpired;
            if self
                .delete_reported(now, key, BundleEventKind::Expired, None, reason, &mut txn)
                .is_some()
            {
                self.counters.expired += 1;
            } else {
                self.expiry.remove(&(t, key));
            }
        }
        while let Some((t, id)) = self.dedup_expiry.first().cloned() {
            if t > now {
                break;
            }
            self.dedup_expiry.remove(&(t, id.clone()));
            self.dedup.remove(&id);
            self.pending.push(Op::DeleteDedup(id));
        }
        for adu in self.reassembler.expire(now) {
            self.fragments.remove(&adu);
        }
        match self.commit_txn(now, txn) {
            // Degraded: the expired bundles' deletes wait for the recovery.
            Err(StoreError::Unavailable { .. }) => {}
            r => r?,
        }
        self.flush()?;
        Ok(())
    }

    // ----- internal bookkeeping shared by the submodules -----

    fn alloc_key(&mut self) -> BundleKey {
        let k = BundleKey(self.next_key);
        self.next_key += 1;
        k
    }

    /// The last creation timestamp this node gave a bundle it sourced, `(ms, sequence)`.
    /// Adapters that build bundles of their own at the node's endpoints (BIBE) take theirs
    /// from the same sequence ([`Agent::raise_creation_cursor`]), or IDs collide.
    pub fn creation_cursor(&self) -> (DtnTime, u64) {
        self.creation_cursor
    }

    /// Moves the creation cursor to `ts` if it is later (an adapter used timestamps up to
    /// `ts`); stored with the next commit, so a restart does not reuse them.
    pub fn raise_creation_cursor(&mut self, ts: (DtnTime, u64)) {
        if ts > self.creation_cursor {
            self.creation_cursor = ts;
            self.pending.push(Op::SetCreationCursor {
                time_ms: ts.0,
                sequence: ts.1,
            });
        }
    }

    fn next_creation(&mut self, now: DtnTime, txn: &mut Txn) -> bpv7::CreationTimestamp {
        let (t, s) = self.creation_cursor;
        let next = if now > t {
            (now, 0)
        } else {
            (t, s.saturating_add(1))
        };
        self.creation_cursor = next;
        txn.batch.push(Op::SetCreationCursor {
            time_ms: next.0,
            sequence: next.1,
        });
        bpv7::CreationTimestamp::new(next.0, next.1)
    }

    /// Quota left for `txn`: what the stored bundles, the open streams' reservations and the
    /// bundles staged in `txn` leave.
    fn free_bytes(&self, txn: &Txn) -> u64 {
        self.cfg.store_quota_bytes.saturating_sub(
            self.used
                .saturating_add(self.reserved)
                .saturating_add(txn.added_bytes),
        )
    }

    /// Stages a new bundle in `txn` if it fits the quota; `Err(free)` otherwise.
    fn stage_put(
        &mut self,
        txn: &mut Txn,
        meta: BundleMeta,
        from: Option<NodeNum>,
        data: Bytes,
        kind: BundleEventKind,
    ) -> Result<BundleKey, u64> {
        self.stage_put_from(txn, meta, from, data, None, kind)
    }

    /// [`Agent::stage_put`], for a bundle whose bytes may already be in a staging file
    /// (`piece`, the same bytes as `data`): the commit then adopts the file instead of writing
    /// them.
    fn stage_put_from(
        &mut self,
        txn: &mut Txn,
        meta: BundleMeta,
        from: Option<NodeNum>,
        data: Bytes,
        piece: Option<crate::store::StagedPiece>,
        kind: BundleEventKind,
    ) -> Result<BundleKey, u64> {
        let free = self.free_bytes(txn);
        if meta.len > free {
            return Err(free);
        }
        let key = self.alloc_key();
        txn.added_bytes += meta.len;
        let meta_op = meta.clone();
        txn.batch.push(match piece {
            Some(piece) => Op::PutStaged {
                key,
                meta: meta_op,
                cached: (data.len() as u64 == piece.len()).then(|| data.clone()),
                piece,
            },
            None => Op::Put {
                key,
                meta: meta_op,
                data: data.clone(),
            },
        });
        txn.added.push((key, meta, from, data, kind));
        Ok(key)
    }

    fn stage_dedup(&mut self, txn: &mut Txn, id: &BundleId, expires_at_ms: u64) {
        let k = dedup_key(id);
        txn.batch.push(Op::PutDedup {
            id: k.clone(),
            expires_at_ms,
        });
        txn.dedup.push((k, expires_at_ms));
    }

    fn is_duplicate(&self, txn: &Txn, id: &BundleId) -> bool {
        let k = dedup_key(id);
        self.dedup.contains_key(&k) || txn.dedup.iter().any(|(d, _)| *d == k)
    }

    /// Commits `txn` together with the deferred deletes, then applies it in memory.
    ///
    /// While the store is degraded nothing is attempted ([`StoreError::Unavailable`]); a commit
    /// that fails degrades it. Either way the deletes of the failed batch join the deferred ones
    /// (their bundles are already out of memory) and everything else of it is dropped: nothing
    /// of it was acknowledged.
    fn commit_txn(&mut self, now: DtnTime, mut txn: Txn) -> Result<(), StoreError> {
        if txn.batch.is_empty() && txn.admin.is_empty() {
            return Ok(());
        }
        self.clock = self.clock.max(now);
        if !txn.batch.is_empty() {
            if let Some(e) = self.health.unavailable(now) {
                self.keep_deletes(&txn.batch);
                return Err(e);
            }
            let mut batch = self.pending.clone();
            batch.append(&mut txn.batch);
            batch.set_time(now);
            if let Err(e) = self.store.commit(&batch) {
                self.health.fail(now, &e);
                self.pending = Batch::new();
                self.keep_deletes(&batch);
                return Err(e);
            }
            self.counters.commits += 1;
            self.pending.clear();
        }
        for (k, exp) in txn.dedup {
            self.dedup_expiry.insert((exp, k.clone()));
            if let Some(old) = self.dedup.insert(k.clone(), exp) {
                if old != exp {
                    self.dedup_expiry.remove(&(old, k));
                }
            }
        }
        while self.dedup.len() > self.cfg.max_dedup_records {
            let Some((t, id)) = self.dedup_expiry.pop_first() else {
                break;
            };
            self.dedup.remove(&id);
            let _ = t;
            self.pending.push(Op::DeleteDedup(id));
        }
        for n in txn.admin {
            self.push_admin(n);
        }
        let mut fragments = Vec::new();
        for (key, meta, from, data, kind) in txn.added {
            self.event(now, kind, &meta, from, Some(key));
            if meta.role == Role::Fragment {
                fragments.push((key, data));
            }
            self.insert_entry(key, meta);
        }
        if !fragments.is_empty() {
            let mut txn2 = Txn::default();
            for (key, data) in fragments {
                if let Ok(b) = bpv7::Bundle::decode(data) {
                    self.reassemble(now, key, b, &mut txn2);
                }
            }
            self.commit_txn(now, txn2)?;
        }
        Ok(())
    }

    /// Keeps the deletes of a batch that was not committed as deferred ones.
    fn keep_deletes(&mut self, batch: &Batch) {
        for op in batch.ops() {
            if matches!(op, Op::Delete(_) | Op::DeleteDedup(_)) {
                self.pending.push(op.clone());
            }
        }
    }

    /// Adds a committed bundle to the in-memory state and its queues.
    fn insert_entry(&mut self, key: BundleKey, meta: BundleMeta) {
        self.used += meta.len;
        self.expiry.insert((meta.expires_at_ms, key));
        let class = class_of(meta.priority);
        let state = match meta.role {
            Role::Forward => State::Unrouted,
            Role::Deliver => State::AwaitEndpoint,
            Role::Fragment => State::Fragment,
        };
        let deliver_now = meta.role == Role::Deliver && self.registered.contains(&meta.destination);
        self.entries.insert(
            key,
            Entry {
                meta,
                state,
                qpos: (class, 0),
                route: None,
            },
        );
        match state {
            State::Unrouted => self.enqueue_unrouted(key),
            State::AwaitEndpoint if deliver_now => {
                if let Some(e) = self.entries.get_mut(&key) {
                    e.state = State::Ready;
                    self.owed.0 += 1;
                    self.owed.1 += e.meta.len;
                }
                self.ready.push_back(key);
            }
            _ => {}
        }
    }

    fn enqueue_unrouted(&mut self, key: BundleKey) {
        let seq = self.next_qseq;
        self.next_qseq += 1;
        if let Some(e) = self.entries.get_mut(&key) {
            e.state = State::Unrouted;
            e.qpos = (e.qpos.0, seq);
            self.unrouted.insert((e.qpos.0, seq, key));
            self.routing_dirty = true;
        }
    }

    /// Takes a bundle out of every in-memory structure (releasing its CGR booking if queued) and
    /// out of the quota accounting. The caller stages or defers the store delete.
    fn remove_entry(&mut self, key: BundleKey) -> Option<Entry> {
        let e = self.entries.remove(&key)?;
        self.used = self.used.saturating_sub(e.meta.len);
        if matches!(e.state, State::Ready | State::Offered) {
            self.owe_less(e.meta.len);
        }
        self.expiry.remove(&(e.meta.expires_at_ms, key));
        match e.state {
            State::Unrouted => {
                self.unrouted.remove(&(e.qpos.0, e.qpos.1, key));
            }
            State::Queued(n) => {
                if let Some(q) = self.queues.get_mut(&n) {
                    q.remove(&(e.qpos.0, e.qpos.1, key));
                }
                if let Some(r) = &e.route {
                    self.routing.cgr.unbook(r, e.meta.len);
                    self.log_release(self.clock, &e.meta, r);
                }
            }
            State::Fragment => {
                let adu = AduKey {
                    source: e.meta.id.source.clone(),
                    timestamp: e.meta.id.timestamp,
                };
                if let Some(keys) = self.fragments.get_mut(&adu) {
                    keys.retain(|k| *k != key);
                    if keys.is_empty() {
                        self.fragments.remove(&adu);
                        self.reassembler.remove(&adu);
                    }
                }
            }
            _ => {}
        }
        Some(e)
    }

    /// Removes stored bundle `key` from the agent's tables (event `kind`, from neighbour
    /// `from`) and adds its store delete and the deletion report its source asked for
    /// (`reason`) to `txn`; the entry, `None` when the bundle is not stored.
    fn delete_reported(
        &mut self,
        now: DtnTime,
        key: BundleKey,
        kind: BundleEventKind,
        from: Option<NodeNum>,
        reason: ReasonCode,
        txn: &mut Txn,
    ) -> Option<Entry> {
        let entry = self.remove_entry(key)?;
        self.event(now, kind, &entry.meta, from, Some(key));
        txn.batch.push(Op::Delete(key));
        self.stage_report(now, txn, &entry.meta, ReportKind::Deleted, reason);
        Some(entry)
    }

    /// Removes a bundle whose job is done and defers its store delete.
    fn finish_entry(&mut self, key: BundleKey) -> Option<Entry> {
        let e = self.remove_entry(key)?;
        self.pending.push(Op::Delete(key));
        Some(e)
    }

    fn maybe_flush(&mut self) -> Result<(), AgentError> {
        if self.pending.len() >= DEFERRED_FLUSH_OPS {
            self.flush()?;
        }
        Ok(())
    }

    fn push_admin(&mut self, n: AdminNotice) {
        self.counters.admin_received += 1;
        if self.admin.len() >= self.cfg.max_admin_queue.max(1) {
            self.admin.pop_front();
            self.counters.admin_dropped += 1;
        }
        self.admin.push_back(n);
    }

    fn event(
        &mut self,
        now: DtnTime,
        kind: BundleEventKind,
        meta: &BundleMeta,
        neighbour: Option<NodeNum>,
        key: Option<BundleKey>,
    ) {
        if let Some(sink) = self.sink.as_mut() {
            sink.record(&BundleEvent {
                time_ms: now,
                kind,
                id: &meta.id,
                length: meta.len,
                destination: &meta.destination,
                neighbour,
                key,
                reason: "",
            });
        }
    }
}

/// Which status report to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReportKind {
    Received,
    Forwarded,
    Delivered,
    Deleted,
}

impl ReportKind {
    fn flag(self) -> BundleFlags {
        match self {
            ReportKind::Received => BundleFlags::REPORT_RECEPTION,
            ReportKind::Forwarded => BundleFlags::REPORT_FORWARDING,
            ReportKind::Delivered => BundleFlags::REPORT_DELIVERY,
            ReportKind::Deleted => BundleFlags::REPORT_DELETION,
        }
    }
}
