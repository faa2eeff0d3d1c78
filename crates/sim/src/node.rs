//! A simulated node: the real LTP adapter (`cla::LtpCla`: engine, FEC layer and the glue to the agent, the same code
//! as a real node's), a bundle layer, DTNperf-style applications and a modelled CPU.
//!
//! Bundle layer: either the real `bp` agent (in-memory store; bundles handed to the LTP adapter with the store key
//! as token; the adapter's classified outcomes applied with `cla::Outcome::apply`; received blocks split with
//! `Agent::split_block` and committed with `Agent::accept_blocks` after their modelled processing time, as a node
//! does; deliveries acknowledged with `delivered`), or — with
//! `bundle_layer = "static"` — a deliberately small layer that is clearly not the agent: it encodes bundles with
//! `bpv7`, forwards them verbatim by a static next hop (no store quota, no status reports, no hop-count or
//! previous-node update), re-queues the bundles of a cancelled LTP session, and delivers bundles addressed to a
//! local application.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bp::{BundleEvent, BundleEventKind, BundleEventSink, BundleKey, ClaBlock, ClaOutcome};
use bpv7::{Bundle, BundleBuilder, BundleId, CreationTimestamp, Eid};
use bytes::{Bytes, BytesMut};
use cla::{Cause, LtpCla, LtpEvent, Outcome, ReceivedBlock};
use ltp::SessionId;

use crate::cfdp_app::{CfdpApp, TransferBook};
use crate::log::{SharedBundleLog, SharedRouteLog, SharedSegmentState};
use crate::scenario::Colour;

/// Which protocol a datagram on a link carries (a real node would use two UDP ports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    /// An LTP segment.
    Ltp,
    /// A CFDP PDU (`[[cfdp]]` with `transport = "link"`).
    Cfdp,
}

/// A datagram in flight: as the sender's engine emitted it, a header and the block data that follows it on the
/// wire (a slice of the sender's block: the simulator never copies block data between engines).
#[derive(Debug, Clone)]
pub(crate) struct Datagram {
    /// Everything before the block data (a whole signal segment or CFDP PDU).
    pub(crate) head: Bytes,
    /// Block data after `head` (empty for signals and CFDP PDUs).
    pub(crate) tail: Bytes,
}

impl Datagram {
    /// A datagram in one piece.
    pub(crate) fn whole(data: Bytes) -> Datagram {
        Datagram {
            head: data,
            tail: Bytes::new(),
        }
    }

    /// Length on the wire.
    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }
}

/// LTP client service id carrying bundles.
pub const BUNDLE_CLIENT_SERVICE: u64 = cla::BP_CLIENT_SERVICE;

/// Transmission attempts of a red bundle in the static layer before it is deleted.
const STATIC_MAX_ATTEMPTS: u32 = 16;

/// The modelled CPU, receive queue and store of a node (see `scenario::ProcessingSection`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Processing {
    /// Pipeline delay per received datagram (no CPU occupancy).
    pub rx_latency: Duration,
    /// CPU time per received datagram.
    pub per_segment: Duration,
    /// CPU time per received bundle.
    pub per_bundle: Duration,
    /// Store commit time per received block (agent layer; serialised, no CPU occupancy).
    pub commit: Duration,
    /// Datagrams the receive queue holds at most (waiting for or occupying the CPU).
    pub rx_queue_limit: usize,
}

/// Identity of a bundle held by the static layer, for its log rows (the agent logs its own bundles).
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) id: BundleId,
    pub(crate) destination: Eid,
    /// Encoded length.
    pub(crate) length: u64,
    /// The static layer's key for the bundle at this node (also its LTP token).
    pub(crate) key: u64,
}

impl Meta {
    fn of(b: &Bundle, length: usize, key: u64) -> Meta {
        Meta {
            id: b.id(),
            destination: b.primary().destination.clone(),
            length: length as u64,
            key,
        }
    }

    fn dest_node(&self) -> Option<u64> {
        ipn(&self.destination).map(|(n, _)| n)
    }
}

/// The (node, service) of an ipn EID.
fn ipn(e: &Eid) -> Option<(u64, u64)> {
    match e {
        Eid::Ipn { node, service, .. } => Some((*node, *service)),
        _ => None,
    }
}

pub(crate) struct Outbound {
    /// LTP token: the agent's store key, or the static layer's key.
    pub(crate) key: u64,
    pub(crate) wire: Bytes,
    pub(crate) red: bool,
    /// Static layer only: what its log rows and routing need.
    pub(crate) meta: Option<Meta>,
    pub(crate) attempts: u32,
}

pub(crate) struct ClientApp {
    pub(crate) service: u64,
    pub(crate) dest: (u64, u64),
    pub(crate) colour: Colour,
    pub(crate) lifetime_ms: u64,
    pub(crate) client: traffic::Client,
}

pub(crate) struct ServerApp {
    pub(crate) service: u64,
    pub(crate) ack_colour: Colour,
    pub(crate) lifetime_ms: u64,
    pub(crate) server: traffic::Server,
}

/// Work the node hands back to the simulation loop, due at a later virtual time.
pub(crate) enum Deferred {
    /// Static layer: a decoded bundle becomes ready after its processing cost.
    Bundle(Box<(Bundle, Bytes)>, u64),
    /// Agent: one received block, split into its bundles, processed and committed; the agent accepts it and (red
    /// block) LTP is told to release or refuse the final report.
    Block {
        from: u64,
        session: Option<SessionId>,
        block: ClaBlock,
    },
}

/// Shared mutable context passed into node handlers (the queue of deferred work, buffers).
pub(crate) struct Ctx<'a> {
    pub(crate) now: Duration,
    pub(crate) epoch_dtn_ms: u64,
    pub(crate) outbox: &'a mut Vec<(u64, Datagram, Proto)>,
    pub(crate) deferred: &'a mut Vec<(Duration, Deferred)>,
    pub(crate) pool: &'a mut BytesMut,
    pub(crate) tx_buf: &'a mut Vec<u8>,
    pub(crate) sessions: &'a mut Vec<SessionRecord>,
    pub(crate) cfdp: &'a mut TransferBook,
}

impl Ctx<'_> {
    fn dtn_ms(&self) -> u64 {
        self.epoch_dtn_ms + self.now.as_millis() as u64
    }
}

/// One completed export session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRecord {
    /// Sending node.
    pub node: u64,
    /// Receiving neighbour.
    pub remote: u64,
    /// Session number.
    pub number: u64,
    /// First data segment transmitted.
    pub start: Duration,
    /// Completion (red part acknowledged, or green part radiated).
    pub end: Duration,
    /// True if the block was red (reliable); green sessions complete once radiated.
    pub red: bool,
}

/// Counters of the bundle layer.
#[derive(Debug, Clone, Copy, Default)]
pub struct BundleCounters {
    /// Bundles created by local applications.
    pub created: u64,
    /// Bundles received from neighbours (with the agent: accepted by `accept_from_cla_batch`).
    pub received: u64,
    /// Bundles delivered to local applications.
    pub delivered: u64,
    /// Bundles confirmed forwarded by LTP.
    pub forwarded: u64,
    /// Bundles whose LTP session failed (forwarded again at once).
    pub failed: u64,
    /// Bundles the next hop refused for lack of resources (kept; the agent backs off from it).
    pub refused_by_next_hop: u64,
    /// Bundles dropped (no route, no application, malformed, LTP refused).
    pub dropped: u64,
    /// Received bundles the agent refused for now (store full): their red block was refused
    /// (`confirm_block(false)`), so the previous hop sends them again.
    pub refused: u64,
}

/// The node's BP agent, and whether polling it could yield anything.
///
/// A node runs on every event that reaches it (each datagram, timer, commit), and polling the agent for bundles
/// to forward and deliveries was a large share of that. The agent's answers change only when it is called
/// mutably or when its own timer is due, so after a poll found nothing ([`TrackedAgent::idle`]) the node skips
/// polling until either happens: every mutable access goes through [`TrackedAgent::get_mut`], which clears the
/// mark.
pub(crate) struct TrackedAgent {
    agent: Box<bp::Agent<bp::MemoryStore>>,
    idle: bool,
    /// `agent.poll_timeout()` while nothing changed the agent (it depends on the agent's state only).
    timeout: std::cell::Cell<Option<Option<u64>>>,
}

impl TrackedAgent {
    pub(crate) fn new(agent: bp::Agent<bp::MemoryStore>) -> Self {
        TrackedAgent {
            agent: Box::new(agent),
            idle: false,
            timeout: std::cell::Cell::new(None),
        }
    }

    /// Read access (polling for timeouts and status does not change the agent).
    pub(crate) fn get(&self) -> &bp::Agent<bp::MemoryStore> {
        &self.agent
    }

    /// Write access: the agent may have work again.
    pub(crate) fn get_mut(&mut self) -> &mut bp::Agent<bp::MemoryStore> {
        self.idle = false;
        self.timeout.set(None);
        &mut self.agent
    }

    /// The agent's `poll_timeout` (DTN ms), computed once per change of the agent.
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        if let Some(t) = self.timeout.get() {
            return t;
        }
        let t = self.agent.poll_timeout();
        self.timeout.set(Some(t));
        t
    }

    /// True when the last poll found no bundle to forward and no delivery, nothing changed the agent since, and
    /// its timer is not due at `now_ms`.
    fn idle_at(&self, now_ms: u64) -> bool {
        self.idle && self.poll_timeout().is_none_or(|t| t > now_ms)
    }
}

/// A simulated node.
pub struct Node {
    pub(crate) number: u64,
    pub(crate) epoch_dtn_ms: u64,
    /// The LTP adapter: engine, FEC layer (spans without FEC pass straight through) and the glue to the bundle
    /// layer, the same code as a real node's LTP thread drives.
    pub(crate) ltp: LtpCla,
    pub(crate) processing: Processing,
    /// When the CPU finishes the work booked so far.
    pub(crate) cpu_free: Duration,
    /// When the store finishes the commits booked so far.
    pub(crate) store_free: Duration,
    /// CPU completion times of the datagrams in the receive queue (non-decreasing: FIFO).
    pub(crate) rx_queue: VecDeque<Duration>,
    /// Datagrams dropped at a full receive queue.
    pub(crate) rx_queue_drops: u64,
    /// Deferred work (bundles in processing, blocks in commit) scheduled and not yet run.
    pub(crate) pending_work: u64,
    pub(crate) wake: Option<Duration>,
    pub(crate) routes: Vec<(u64, u64)>,
    pub(crate) neighbours: Vec<u64>,
    pub(crate) clients: Vec<ClientApp>,
    pub(crate) servers: Vec<ServerApp>,
    /// Bundles handed to the LTP adapter and not yet reported, by token.
    pub(crate) in_flight: HashMap<u64, (u64, Outbound)>,
    /// Items injected with `Simulation::inject_ltp_item` (their tokens count down from `u64::MAX`).
    pub(crate) injected: u64,
    /// Static layer: next bundle key (also the LTP token).
    pub(crate) next_token: u64,
    pub(crate) creation_seq: u64,
    /// The engine's segment sink state: session starts and the segment CSV.
    pub(crate) segments: SharedSegmentState,
    /// This node's bundle event log (installed in the agent, or written by the static layer).
    pub(crate) bundle_log: Option<SharedBundleLog>,
    /// This node's route decision log (agent layer only).
    pub(crate) route_log: Option<SharedRouteLog>,
    pub(crate) counters: BundleCounters,
    /// The real BP agent (in-memory store) when the scenario selects `bundle_layer = "agent"`.
    pub(crate) agent: Option<TrackedAgent>,
    /// Ids of locally created bundles to be sent green (ACKs), looked up when the agent forwards them.
    pub(crate) green_ids: std::collections::HashSet<bpv7::BundleId>,
    /// The CFDP entity when the node takes part in a `[[cfdp]]` transfer.
    pub(crate) cfdp: Option<CfdpApp>,
    /// BIBE tunnels and decapsulation (`[node.bibe]`, `[[node.bibe_peer]]`; module `bibe_sim`).
    pub(crate) bibe: Option<crate::bibe_sim::SimBibe>,
}

impl Node {
    /// Writes a static-layer bundle event in the agent's CSV format (the agent logs its own bundles).
    fn log(&mut self, ctx: &Ctx<'_>, kind: BundleEventKind, meta: &Meta, neighbour: Option<u64>) {
        if self.agent.is_some() {
            return;
        }
        if let Some(l) = self.bundle_log.as_mut() {
            l.record(&BundleEvent {
                time_ms: ctx.dtn_ms(),
                kind,
                id: &meta.id,
                length: meta.length,
                destination: &meta.destination,
                neighbour,
                key: Some(BundleKey(meta.key)),
                reason: "",
            });
        }
    }

    /// Next hop towards `dest`, `None` if unreachable.
    fn next_hop(&self, dest: u64) -> Option<u64> {
        if let Some(&(_, via)) = self.routes.iter().find(|(d, _)| *d == dest) {
            return Some(via);
        }
        self.neighbours.contains(&dest).then_some(dest)
    }

    /// A datagram leaves the receive pipeline (arrival + `rx_latency`) at `entry` and joins the receive queue:
    /// books the CPU and returns when the CPU finishes it, or `None` if the queue is full (the datagram is dropped
    /// and counted, like a socket-buffer drop).
    ///
    /// Booking at queue entry (not at arrival) keeps the CPU strictly FIFO across segments and bundles: bundle
    /// work requested at time t waits only for the datagrams already queued at t. The queue holds every earlier
    /// datagram whose CPU work is not finished at `entry` (their completion times are in order).
    pub(crate) fn book_segment(&mut self, entry: Duration) -> Option<Duration> {
        while self.rx_queue.front().is_some_and(|&done| done <= entry) {
            self.rx_queue.pop_front();
        }
        if self.rx_queue.len() >= self.processing.rx_queue_limit {
            self.rx_queue_drops += 1;
            return None;
        }
        let done = entry.max(self.cpu_free) + self.processing.per_segment;
        self.cpu_free = done;
        if done > entry {
            self.rx_queue.push_back(done);
        }
        Some(done)
    }

    /// Creates a bundle from a local application and routes it.
    pub(crate) fn originate(
        &mut self,
        ctx: &mut Ctx<'_>,
        src_service: u64,
        dest: (u64, u64),
        payload: Bytes,
        red: bool,
        lifetime_ms: u64,
    ) {
        if let Some(agent) = self.agent.as_mut().map(TrackedAgent::get_mut) {
            let mut req = bp::SendRequest::new(
                Eid::ipn(self.number, src_service),
                Eid::ipn(dest.0, dest.1),
                payload,
            );
            req.lifetime_ms = lifetime_ms;
            // The agent logs `created` itself; a refused send is only counted (an application would get the error).
            match agent.send(ctx.dtn_ms(), req) {
                Ok(id) => {
                    if !red {
                        self.green_ids.insert(id);
                    }
                    self.counters.created += 1;
                }
                Err(_) => self.counters.dropped += 1,
            }
            return;
        }
        self.creation_seq += 1;
        let built =
            BundleBuilder::new(Eid::ipn(self.number, src_service), Eid::ipn(dest.0, dest.1))
                .creation(CreationTimestamp::new(ctx.dtn_ms(), self.creation_seq))
                .lifetime_ms(lifetime_ms)
                .payload(payload)
                .build();
        let bundle = match built {
            Ok(b) => b,
            Err(_) => {
                self.counters.dropped += 1;
                return;
            }
        };
        let wire = Bytes::from(bundle.encode());
        let key = self.take_key();
        let meta = Meta::of(&bundle, wire.len(), key);
        self.counters.created += 1;
        self.log(ctx, BundleEventKind::Created, &meta, None);
        self.route(
            ctx,
            Outbound {
                key,
                wire,
                red,
                meta: Some(meta),
                attempts: 0,
            },
        );
    }

    /// Static layer: a fresh key for a bundle entering this node.
    fn take_key(&mut self) -> u64 {
        let k = self.next_token;
        self.next_token += 1;
        k
    }

    /// Static layer: hands a bundle to LTP towards its next hop, or deletes it when there is none.
    fn route(&mut self, ctx: &mut Ctx<'_>, ob: Outbound) {
        let dest = ob.meta.as_ref().and_then(Meta::dest_node);
        match dest.and_then(|d| self.next_hop(d)) {
            Some(via) => self.hand_to_ltp(ctx.now, via, ob),
            None => self.delete(ctx, &ob),
        }
    }

    /// Static layer: a bundle is discarded (no route, no application, LTP refused it, attempts exhausted).
    fn delete(&mut self, ctx: &mut Ctx<'_>, ob: &Outbound) {
        self.counters.dropped += 1;
        if let Some(m) = &ob.meta {
            self.log(ctx, BundleEventKind::Deleted, m, None);
        }
    }

    /// Hands a bundle to the LTP adapter (which keeps it, in order, while the span's queue is full); its outcome
    /// comes back as an event.
    fn hand_to_ltp(&mut self, now: Duration, via: u64, ob: Outbound) {
        let (key, wire, red) = (ob.key, ob.wire.clone(), ob.red);
        self.in_flight.insert(key, (via, ob));
        self.ltp.send(now, via, key, wire, red);
    }

    /// A datagram reached its protocol engine (LTP, or the CFDP entity).
    pub(crate) fn on_datagram(
        &mut self,
        now: Duration,
        data: &Datagram,
        proto: Proto,
        book: &mut TransferBook,
    ) {
        match proto {
            // Malformed datagrams are counted by the engine; nothing else to do.
            Proto::Ltp => {
                let _ = self.ltp.handle_datagram_parts(now, &data.head, &data.tail);
            }
            // CFDP PDUs travel whole (`Datagram::whole`).
            Proto::Cfdp => self.cfdp_input(now, book, &data.head),
        }
    }

    /// A complete block arrived (`session`: the red import session awaiting confirmation, `None` for green).
    fn on_block(&mut self, ctx: &mut Ctx<'_>, from: u64, session: Option<SessionId>, data: Bytes) {
        if self.agent.is_some() {
            self.on_block_agent(ctx, from, session, data);
        } else {
            self.on_block_static(ctx, from, data);
        }
    }

    /// Agent: splits the block into bundles like the real node does, books their CPU cost and the store commit,
    /// and defers the batch accept (and the block confirmation) to the commit's end.
    fn on_block_agent(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: u64,
        session: Option<SessionId>,
        data: Bytes,
    ) {
        let dtn_ms = ctx.dtn_ms();
        let Some(agent) = self.agent.as_mut().map(TrackedAgent::get_mut) else {
            return;
        };
        // The agent splits the block as on a real node: garbage after the last bundle is counted and logged as a
        // discard, and the block is acknowledged for what split (refusing it would only make the sender loop).
        let block = agent.split_block(dtn_ms, Some(from), &data);
        if block.discarded.is_some() {
            self.counters.dropped += 1;
        }
        if session.is_none() {
            // The colour is kept along the path: a bundle that came in a green block and goes on to another
            // node leaves green too (between real nodes ION marks such bundles best-effort in their extended
            // class of service).
            for raw in &block.bundles {
                if let Ok((b, _)) = Bundle::decode_prefix(raw) {
                    let here = matches!(b.primary().destination, bpv7::Eid::Ipn { node, .. } if node == self.number);
                    if !here {
                        self.green_ids.insert(b.id());
                    }
                }
            }
        }
        let n = u32::try_from(block.bundles.len()).unwrap_or(u32::MAX);
        let p = self.processing;
        let done = ctx.now.max(self.cpu_free) + p.per_bundle.saturating_mul(n);
        if !p.per_bundle.is_zero() {
            self.cpu_free = done;
        }
        let committed = done.max(self.store_free) + p.commit;
        if !p.commit.is_zero() {
            self.store_free = committed;
        }
        self.pending_work += 1;
        ctx.deferred.push((
            committed,
            Deferred::Block {
                from,
                session,
                block,
            },
        ));
    }

    /// Static layer: decodes the block's bundles and schedules each after its processing cost.
    fn on_block_static(&mut self, ctx: &mut Ctx<'_>, from: u64, mut data: Bytes) {
        while !data.is_empty() {
            let (bundle, used) = match Bundle::decode_prefix(&data) {
                Ok(x) => x,
                Err(_) => {
                    self.counters.dropped += 1;
                    return;
                }
            };
            if used == 0 || used > data.len() {
                return;
            }
            let raw = data.split_to(used);
            let done = ctx.now.max(self.cpu_free) + self.processing.per_bundle;
            if !self.processing.per_bundle.is_zero() {
                self.cpu_free = done;
            }
            self.pending_work += 1;
            ctx.deferred
                .push((done, Deferred::Bundle(Box::new((bundle, raw)), from)));
        }
    }

    /// Deferred work came due.
    pub(crate) fn on_deferred(&mut self, ctx: &mut Ctx<'_>, work: Deferred) {
        self.pending_work = self.pending_work.saturating_sub(1);
        match work {
            Deferred::Bundle(b, from) => {
                let (bundle, raw) = *b;
                self.on_bundle_static(ctx, bundle, raw, from);
            }
            Deferred::Block {
                from,
                session,
                block,
            } => self.commit_block(ctx, from, session, block),
        }
    }

    /// Agent: the block's bundles are committed in one transaction; then the block is confirmed (its final
    /// report leaves) or, if the store refused a bundle for now, refused so that the sender forwards it again.
    fn commit_block(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: u64,
        session: Option<SessionId>,
        block: ClaBlock,
    ) {
        let Some(agent) = self.agent.as_mut().map(TrackedAgent::get_mut) else {
            return;
        };
        let verdicts = agent.accept_blocks(ctx.dtn_ms(), Some(from), std::slice::from_ref(&block));
        let Some(verdict) = verdicts.first() else {
            return;
        };
        for r in &verdict.bundles {
            match r {
                Ok(_) => self.counters.received += 1,
                Err(e) if e.is_transient() => self.counters.refused += 1,
                Err(_) => self.counters.dropped += 1,
            }
        }
        if let Some(s) = session {
            self.ltp.confirm(ctx.now, s, verdict.confirm);
        }
    }

    /// Static layer: a received bundle finished processing: deliver locally or forward.
    fn on_bundle_static(&mut self, ctx: &mut Ctx<'_>, bundle: Bundle, raw: Bytes, from: u64) {
        let key = self.take_key();
        let meta = Meta::of(&bundle, raw.len(), key);
        self.counters.received += 1;
        self.log(ctx, BundleEventKind::Received, &meta, Some(from));
        if meta.dest_node() != Some(self.number) {
            self.route(
                ctx,
                Outbound {
                    key,
                    wire: raw,
                    red: true,
                    meta: Some(meta),
                    attempts: 0,
                },
            );
            return;
        }
        let (Some((_, svc)), Some(source)) = (ipn(&meta.destination), ipn(&meta.id.source)) else {
            return;
        };
        self.deliver_local(ctx, svc, source, bundle.payload(), Some(&meta));
    }

    /// Hands a bundle addressed to this node to the application registered on service `svc`; `meta` (static
    /// layer) is logged, the agent logged the delivery itself.
    fn deliver_local(
        &mut self,
        ctx: &mut Ctx<'_>,
        svc: u64,
        source: (u64, u64),
        payload: Bytes,
        meta: Option<&Meta>,
    ) {
        let delivered = if self
            .cfdp
            .as_ref()
            .is_some_and(|c| c.services.contains(&svc))
        {
            self.cfdp_input(ctx.now, ctx.cfdp, &payload);
            true
        } else if let Some(app) = self.servers.iter_mut().find(|s| s.service == svc) {
            let reply = app
                .server
                .on_bundle(ctx.now, &payload)
                .ok()
                .map(|ack| (ack, app.ack_colour, app.lifetime_ms));
            if let Some((ack, colour, lifetime)) = reply {
                self.originate(ctx, svc, source, ack, colour == Colour::Red, lifetime);
            }
            true
        } else if let Some(app) = self.clients.iter_mut().find(|c| c.service == svc) {
            let _ = app.client.on_ack(ctx.now, &payload);
            true
        } else {
            false
        };
        let kind = if delivered {
            self.counters.delivered += 1;
            BundleEventKind::Delivered
        } else {
            self.counters.dropped += 1;
            BundleEventKind::Deleted
        };
        if let Some(m) = meta {
            self.log(ctx, kind, m, None);
        }
    }

    /// What the LTP adapter tells the bundle layer: a block arrived, or bundles handed over reached an outcome.
    fn on_event(&mut self, ctx: &mut Ctx<'_>, ev: LtpEvent) {
        match ev {
            LtpEvent::Block(ReceivedBlock {
                peer,
                session,
                data,
            }) => self.on_block(ctx, peer, session, data),
            LtpEvent::Outcome(o) => self.on_outcome(ctx, &o),
        }
    }

    /// Bundles handed to LTP reached an outcome (classified by the adapter).
    fn on_outcome(&mut self, ctx: &mut Ctx<'_>, o: &Outcome) {
        if let Some(session) = o.session {
            let start = self
                .segments
                .lock()
                .ok()
                .and_then(|mut s| s.take_start(session.originator, session.number));
            if let (Some(start), Cause::Completed) = (start, o.cause) {
                let red = o
                    .tokens
                    .first()
                    .and_then(|t| self.in_flight.get(t))
                    .is_some_and(|(_, ob)| ob.red);
                ctx.sessions.push(SessionRecord {
                    node: self.number,
                    remote: o.peer,
                    number: session.number,
                    start,
                    end: ctx.now,
                    red,
                });
            }
        }
        for &t in &o.tokens {
            let Some((via, mut ob)) = self.in_flight.remove(&t) else {
                continue;
            };
            match o.outcome {
                ClaOutcome::Sent => self.counters.forwarded += 1,
                ClaOutcome::Failed => self.counters.failed += 1,
                ClaOutcome::Refused => self.counters.refused_by_next_hop += 1,
            }
            let Some(m) = ob.meta.clone() else {
                continue;
            };
            // Static layer: no store and no back-off; it re-sends what did not arrive, a limited number of times.
            if o.outcome == ClaOutcome::Sent {
                self.log(ctx, BundleEventKind::Forwarded, &m, Some(via));
                continue;
            }
            self.log(ctx, BundleEventKind::Failed, &m, Some(via));
            ob.attempts += 1;
            let carried = !matches!(o.cause, Cause::NotCarried(_));
            if carried && ob.red && ob.attempts < STATIC_MAX_ATTEMPTS {
                self.route(ctx, ob);
            } else {
                self.delete(ctx, &ob);
            }
        }
        // The agent logs `forwarded`/`failed`, re-routes and backs off itself.
        if let Some(agent) = self.agent.as_mut().map(TrackedAgent::get_mut) {
            let _ = o.apply(agent, ctx.dtn_ms());
        }
    }

    /// Runs everything that is due at `ctx.now`: timers, events, applications, hand-over to LTP, transmission.
    pub(crate) fn drive(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        loop {
            if self.ltp.poll_timeout().is_some_and(|t| t <= now) {
                self.ltp.handle_timeout(now);
            }
            let mut progress = false;
            while let Some(ev) = self.ltp.poll_event(now) {
                progress = true;
                self.on_event(ctx, ev);
            }
            for k in 0..self.clients.len() {
                while let Some((out, app)) = self
                    .clients
                    .get_mut(k)
                    .and_then(|app| app.client.next_send(now).map(|o| (o, &*app)))
                {
                    let (svc, dest, red, life) = (
                        app.service,
                        app.dest,
                        app.colour == Colour::Red,
                        app.lifetime_ms,
                    );
                    progress = true;
                    self.originate(ctx, svc, dest, out.payload, red, life);
                }
            }
            if self.agent.is_some() {
                progress |= self.drive_agent(ctx);
            }
            if self.cfdp.is_some() {
                progress |= self.drive_cfdp(ctx);
            }
            let flushed = self.ltp.backlog_len() > 0 && self.ltp.flush_backlog(now);
            // Header into `tx_buf` and from there into the shared pool; block data stays a slice of the block
            // (the receiving engine takes it as it is: `handle_datagram_parts`).
            let mut sent = false;
            ctx.tx_buf.clear();
            while let Some(t) = self.ltp.poll_transmit_vectored(now, ctx.tx_buf) {
                if ctx.pool.capacity() < ctx.tx_buf.len() {
                    ctx.pool.reserve(64 * 1024);
                }
                ctx.pool.extend_from_slice(ctx.tx_buf);
                let d = Datagram {
                    head: ctx.pool.split().freeze(),
                    tail: t.payload,
                };
                ctx.outbox.push((t.remote_engine, d, Proto::Ltp));
                ctx.tx_buf.clear();
                sent = true;
            }
            // After a round in which only segments left (and maybe waiting bundles went to LTP), another round
            // can do something only if sending raised engine events (a green block radiated), made a timer due,
            // or LTP took waiting bundles (the agent may then hand over more); otherwise it would be an
            // identical no-op, which was a third of a paced sender's work per segment. A round without
            // progress that sent nothing ends the loop, as it always did.
            let again = progress
                || (sent
                    && (flushed
                        || self.ltp.has_events()
                        || self.ltp.poll_timeout().is_some_and(|t| t <= now)));
            if !again {
                break;
            }
        }
    }

    /// Agent work due now: timers, bundles to hand to LTP, local deliveries. Returns true if anything moved.
    fn drive_agent(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let now_ms = ctx.dtn_ms();
        let mut progress = false;
        let Some(tracked) = self.agent.as_mut() else {
            return false;
        };
        let bibe_due = self
            .bibe
            .as_ref()
            .is_some_and(|b| b.poll_timeout().is_some_and(|t| t <= now_ms));
        if tracked.idle_at(now_ms) && !bibe_due {
            return false; // the polls below would find nothing (see `TrackedAgent`)
        }
        let agent = tracked.get_mut();
        if agent.poll_timeout().is_some_and(|t| t <= now_ms) {
            let _ = agent.handle_timeout(now_ms);
        }
        if let Some(b) = self.bibe.as_mut() {
            progress |= b.service(now_ms, agent);
        }
        // Whether the agent had nothing more to forward (rather than LTP having no room for it).
        let mut drained = false;
        // Only take bundles from the agent while LTP has room: the rest stay in the agent's store.
        while self.ltp.backlog_len() == 0 {
            let Some(agent) = self.agent.as_mut().map(TrackedAgent::get_mut) else {
                break;
            };
            if let Some(b) = self.bibe.as_mut() {
                if !b.retry_held(now_ms, agent) {
                    break;
                }
            }
            let Some(fwd) = agent.poll_transmit(now_ms) else {
                drained = true;
                break;
            };
            progress = true;
            // Bundles for a BIBE tunnel are encapsulated (the encapsulating bundle comes out of the agent next).
            let fwd = match self.bibe.as_mut() {
                None => fwd,
                Some(b) => match b.offer(now_ms, agent, fwd) {
                    crate::bibe_sim::Offer::NotTunnel(f) => f,
                    crate::bibe_sim::Offer::Taken => continue,
                    crate::bibe_sim::Offer::Held => break,
                },
            };
            let bibe_green = self
                .bibe
                .as_ref()
                .is_some_and(|b| b.sends_green(&fwd.bundle));
            // Decoding (with its CRC pass) is only needed to find the green bundles.
            let red = !bibe_green
                && (self.green_ids.is_empty()
                    || match Bundle::decode_prefix(&fwd.bundle) {
                        Ok((b, _)) => !self.green_ids.remove(&b.id()),
                        Err(_) => true,
                    });
            self.hand_to_ltp(
                ctx.now,
                fwd.neighbour,
                Outbound {
                    key: fwd.key.as_token(),
                    wire: fwd.bundle,
                    red,
                    meta: None,
                    attempts: 0,
                },
            );
        }
        // Outcomes the adapter queued while taking bundles (sent at once without custody).
        if let (Some(b), Some(t)) = (self.bibe.as_mut(), self.agent.as_mut()) {
            if b.service(now_ms, t.get_mut()) {
                progress = true;
                drained = false;
            }
        }
        let mut delivered = false;
        while let Some(d) = self
            .agent
            .as_mut()
            .and_then(|a| a.get_mut().poll_delivery())
        {
            if let Some(agent) = self.agent.as_mut().map(TrackedAgent::get_mut) {
                let _ = agent.delivered(now_ms, d.key);
            }
            progress = true;
            delivered = true;
            let (Some((_, svc)), Some(source)) = (ipn(&d.endpoint), ipn(&d.source)) else {
                continue;
            };
            self.deliver_local(ctx, svc, source, d.payload, None);
        }
        if drained && !delivered {
            // Set last: every access above cleared it.
            if let Some(t) = self.agent.as_mut() {
                t.idle = true;
            }
        }
        progress
    }

    /// Earliest time this node needs to run again on its own.
    pub(crate) fn next_wake(&mut self) -> Option<Duration> {
        let mut t = self.ltp.poll_timeout();
        if let Some(c) = self.cfdp.as_mut().and_then(CfdpApp::next_wake) {
            t = Some(t.map_or(c, |x| x.min(c)));
        }
        if let Some(a) = self
            .bibe
            .as_ref()
            .and_then(crate::bibe_sim::SimBibe::poll_timeout)
        {
            let at = Duration::from_millis(a.saturating_sub(self.epoch_dtn_ms));
            t = Some(t.map_or(at, |x| x.min(at)));
        }
        if let Some(a) = self.agent.as_ref().and_then(TrackedAgent::poll_timeout) {
            let at = Duration::from_millis(a.saturating_sub(self.epoch_dtn_ms));
            t = Some(t.map_or(at, |x| x.min(at)));
        }
        for c in &self.clients {
            if let Some(c) = c.client.poll_timeout() {
                t = Some(t.map_or(c, |x| x.min(c)));
            }
        }
        t
    }

    /// True when nothing is queued or in progress here.
    pub(crate) fn is_quiet(&self, now: Duration) -> bool {
        self.ltp.is_idle()
            && self
                .agent
                .as_ref()
                .is_none_or(|a| a.get().stored_bundles() == 0)
            && self.pending_work == 0
            && self.in_flight.is_empty()
            && self.clients.iter().all(|c| c.client.is_finished(now))
            && self.cfdp.as_ref().is_none_or(CfdpApp::is_quiet)
            && self
                .bibe
                .as_ref()
                .is_none_or(crate::bibe_sim::SimBibe::is_quiet)
    }

    /// The node number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The LTP engine (read-only: statistics, configuration).
    pub fn engine(&self) -> &ltp::Engine {
        self.ltp.engine()
    }

    /// The agent's status (None with the static bundle layer).
    pub fn agent_status(&self) -> Option<bp::AgentStatus> {
        self.agent.as_ref().map(|a| a.get().status())
    }

    /// The contact plan the node's agent routes with (None with the static bundle layer or
    /// without `sim.contact_plan`). Every agent of a simulation holds the same `Arc`.
    pub fn contact_plan(&self) -> Option<&std::sync::Arc<bp::ContactPlan>> {
        self.agent
            .as_ref()
            .and_then(|a| a.get().shared_contact_plan())
    }

    /// The LTP adapter's counters (blocks received, exports completed, cancelled and refused).
    pub fn ltp_stats(&self) -> &cla::LtpClaStats {
        self.ltp.stats()
    }

    /// FEC counters of the span to `remote` (None without FEC).
    pub fn fec_stats(&self, remote: u64) -> Option<&fec::FecStats> {
        self.ltp.fec_stats(remote)
    }

    /// BIBE counters and pending custody (None when the node runs no BIBE).
    pub fn bibe(&self) -> Option<crate::bibe_sim::BibeReport> {
        self.bibe.as_ref().map(crate::bibe_sim::SimBibe::report)
    }

    /// Bundle-layer counters.
    pub fn counters(&self) -> &BundleCounters {
        &self.counters
    }

    /// Datagrams dropped because the receive queue was full (`processing.rx_queue_datagrams`).
    pub fn rx_queue_drops(&self) -> u64 {
        self.rx_queue_drops
    }

    /// Reports of the DTNperf clients on this node, with their service numbers.
    pub fn client_reports(&self) -> Vec<(u64, traffic::ClientReport)> {
        self.clients
            .iter()
            .map(|c| (c.service, c.client.report()))
            .collect()
    }

    /// Per-bundle records of the client on `service`.
    pub fn client_records(&self, service: u64) -> Option<&[traffic::BundleRecord]> {
        self.clients
            .iter()
            .find(|c| c.service == service)
            .map(|c| c.client.records())
    }

    /// Server counters on this node, with their service numbers.
    pub fn server_stats(&self) -> Vec<(u64, traffic::ServerStats)> {
        self.servers
            .iter()
            .map(|s| (s.service, *s.server.stats()))
            .collect()
    }
}
