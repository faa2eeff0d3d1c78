//! A simulated node: the real LTP engine, a bundle layer, DTNperf-style applications and a modelled CPU.
//!
//! Bundle layer: either the real `bp` agent (in-memory store; bundles handed to LTP one per block with the store
//! key as token, `cla_result` on completion/cancel, deliveries acknowledged with `delivered`), or — with
//! `bundle_layer = "static"` — a deliberately small layer that is clearly not the agent: it encodes bundles with
//! `bpv7`, forwards them verbatim by a static next hop (no store quota, no status reports, no hop-count or
//! previous-node update), re-queues the bundles of a cancelled LTP session, and delivers bundles addressed to a
//! local application.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use bpv7::{Bundle, BundleBuilder, CreationTimestamp, Eid};
use bytes::{Bytes, BytesMut};
use ltp::{Event, SendError, SessionId};

use crate::log::{BundleCsv, BundleEvent, BundleRecord};
use crate::scenario::Colour;

/// LTP client service id carrying bundles.
pub const BUNDLE_CLIENT_SERVICE: u64 = 1;

/// Partially received green blocks kept at most (the oldest is dropped beyond).
const MAX_GREEN_PARTIAL: usize = 256;

/// The modelled CPU of a node.
#[derive(Debug, Clone, Copy, Default)]
pub struct Processing {
    /// Pipeline delay per received datagram (no CPU occupancy).
    pub rx_latency: Duration,
    /// CPU time per received datagram.
    pub per_segment: Duration,
    /// CPU time per received bundle.
    pub per_bundle: Duration,
}

/// Identity of a bundle for logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Meta {
    pub(crate) source: (u64, u64),
    pub(crate) destination: (u64, u64),
    pub(crate) creation: (u64, u64),
    pub(crate) payload_len: u64,
}

impl Meta {
    fn of(b: &Bundle) -> Meta {
        let ipn = |e: &Eid| match e {
            Eid::Ipn { node, service, .. } => (*node, *service),
            _ => (0, 0),
        };
        let p = b.primary();
        Meta {
            source: ipn(&p.source),
            destination: ipn(&p.destination),
            creation: (p.timestamp.dtn_time_ms, p.timestamp.sequence),
            payload_len: b.payload().len() as u64,
        }
    }
}

pub(crate) struct Outbound {
    /// Agent store key (as CLA token) when the agent handed the bundle over.
    pub(crate) key: Option<u64>,
    pub(crate) wire: Bytes,
    pub(crate) red: bool,
    pub(crate) meta: Meta,
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

/// Work the node hands back to the simulation loop.
pub(crate) enum Deferred {
    /// A decoded bundle becomes ready after its processing cost.
    Bundle(Box<(Bundle, Bytes)>, u64),
}

/// Shared mutable context passed into node handlers (the queue of deferred work, logs, buffers).
pub(crate) struct Ctx<'a> {
    pub(crate) now: Duration,
    pub(crate) epoch_dtn_ms: u64,
    pub(crate) outbox: &'a mut Vec<(u64, Bytes)>,
    pub(crate) deferred: &'a mut Vec<(Duration, Deferred)>,
    pub(crate) bundle_log: &'a mut Option<BundleCsv>,
    pub(crate) pool: &'a mut BytesMut,
    pub(crate) tx_buf: &'a mut Vec<u8>,
    pub(crate) sessions: &'a mut Vec<SessionRecord>,
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
    /// Bundles received from neighbours.
    pub received: u64,
    /// Bundles delivered to local applications.
    pub delivered: u64,
    /// Bundles confirmed forwarded by LTP.
    pub forwarded: u64,
    /// Bundles whose LTP session was cancelled (re-queued).
    pub failed: u64,
    /// Bundles dropped (no route, no application, malformed, LTP refused).
    pub dropped: u64,
}

/// A simulated node.
pub struct Node {
    pub(crate) number: u64,
    pub(crate) epoch_dtn_ms: u64,
    pub(crate) engine: ltp::Engine,
    pub(crate) processing: Processing,
    pub(crate) cpu_free: Duration,
    pub(crate) wake: Option<Duration>,
    pub(crate) routes: Vec<(u64, u64)>,
    pub(crate) neighbours: Vec<u64>,
    pub(crate) clients: Vec<ClientApp>,
    pub(crate) servers: Vec<ServerApp>,
    pub(crate) waiting: VecDeque<(u64, Outbound)>,
    pub(crate) in_flight: HashMap<u64, (u64, Outbound)>,
    pub(crate) next_token: u64,
    pub(crate) creation_seq: u64,
    pub(crate) green: BTreeMap<(u64, u64, u64), Vec<(u64, Bytes)>>,
    pub(crate) starts: std::sync::Arc<std::sync::Mutex<crate::log::SessionStarts>>,
    pub(crate) counters: BundleCounters,
    /// The real BP agent (in-memory store) when the scenario selects `bundle_layer = "agent"`.
    pub(crate) agent: Option<Box<bp::Agent<bp::MemoryStore>>>,
    /// Ids of locally created bundles to be sent green (ACKs), looked up when the agent forwards them.
    pub(crate) green_ids: std::collections::HashSet<bpv7::BundleId>,
}

impl Node {
    fn log(&self, ctx: &mut Ctx<'_>, event: BundleEvent, meta: &Meta, neighbour: u64) {
        if let Some(l) = ctx.bundle_log.as_mut() {
            l.record(&BundleRecord {
                time: ctx.now,
                dtn_ms: ctx.epoch_dtn_ms + ctx.now.as_millis() as u64,
                node: self.number,
                event,
                source: meta.source,
                creation: meta.creation,
                payload_len: meta.payload_len,
                destination: meta.destination,
                neighbour,
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

    /// When the CPU finishes a datagram arriving at `at` (and books the CPU).
    pub(crate) fn book_segment(&mut self, at: Duration) -> Duration {
        let start = (at + self.processing.rx_latency).max(self.cpu_free);
        let done = start + self.processing.per_segment;
        if !self.processing.per_segment.is_zero() {
            self.cpu_free = done;
        }
        done
    }

    /// True when the datagram path has no modelled cost (handled at arrival time).
    pub(crate) fn free_rx(&self) -> bool {
        self.processing.rx_latency.is_zero() && self.processing.per_segment.is_zero()
    }

    /// Creates a bundle from a local application and routes it.
    fn originate(
        &mut self,
        ctx: &mut Ctx<'_>,
        src_service: u64,
        dest: (u64, u64),
        payload: Bytes,
        red: bool,
        lifetime_ms: u64,
    ) {
        if let Some(agent) = self.agent.as_mut() {
            let mut req = bp::SendRequest::new(
                Eid::ipn(self.number, src_service),
                Eid::ipn(dest.0, dest.1),
                payload.clone(),
            );
            req.lifetime_ms = lifetime_ms;
            let meta = Meta {
                source: (self.number, src_service),
                destination: dest,
                creation: (ctx.dtn_ms(), 0),
                payload_len: payload.len() as u64,
            };
            match agent.send(ctx.dtn_ms(), req) {
                Ok(id) => {
                    if !red {
                        self.green_ids.insert(id);
                    }
                    self.counters.created += 1;
                    self.log(ctx, BundleEvent::Created, &meta, 0);
                }
                Err(_) => {
                    self.counters.dropped += 1;
                    self.log(ctx, BundleEvent::Dropped, &meta, 0);
                }
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
        let meta = Meta::of(&bundle);
        self.counters.created += 1;
        self.log(ctx, BundleEvent::Created, &meta, 0);
        let wire = Bytes::from(bundle.encode());
        self.route(
            ctx,
            Outbound {
                key: None,
                wire,
                red,
                meta,
                attempts: 0,
            },
        );
    }

    fn route(&mut self, ctx: &mut Ctx<'_>, ob: Outbound) {
        match self.next_hop(ob.meta.destination.0) {
            Some(via) => self.waiting.push_back((via, ob)),
            None => {
                self.counters.dropped += 1;
                self.log(ctx, BundleEvent::Dropped, &ob.meta, 0);
            }
        }
    }

    /// Hands waiting bundles to LTP while the spans accept them (order kept per node).
    fn flush_waiting(&mut self, ctx: &mut Ctx<'_>) {
        while let Some((via, ob)) = self.waiting.pop_front() {
            let token = ob.key.unwrap_or(self.next_token);
            let red_len = if ob.red { ob.wire.len() } else { 0 };
            match self.engine.send_block(
                ctx.now,
                via,
                BUNDLE_CLIENT_SERVICE,
                ob.wire.clone(),
                red_len,
                token,
            ) {
                Ok(_) => {
                    if ob.key.is_none() {
                        self.next_token += 1;
                    }
                    self.log(ctx, BundleEvent::Queued, &ob.meta, via);
                    self.in_flight.insert(token, (via, ob));
                }
                Err(SendError::SpanFull(_)) => {
                    self.waiting.push_front((via, ob));
                    return;
                }
                Err(_) => {
                    self.counters.dropped += 1;
                    self.log(ctx, BundleEvent::Dropped, &ob.meta, via);
                }
            }
        }
    }

    /// A datagram reached the LTP engine.
    pub(crate) fn on_datagram(&mut self, now: Duration, data: &Bytes) {
        // Malformed datagrams are counted by the engine; nothing else to do.
        let _ = self.engine.handle_datagram(now, data);
    }

    /// Splits a received block into bundles and schedules each after its processing cost.
    fn on_block(&mut self, ctx: &mut Ctx<'_>, from: u64, mut data: Bytes) {
        while !data.is_empty() {
            let (bundle, used) = match Bundle::decode_prefix(&data) {
                Ok(x) => x,
                Err(_) => {
                    self.counters.dropped += 1;
                    return;
                }
            };
            let raw = data.split_to(used.min(data.len()));
            if used == 0 {
                return;
            }
            self.counters.received += 1;
            self.log(ctx, BundleEvent::Received, &Meta::of(&bundle), from);
            let start = ctx.now.max(self.cpu_free);
            let done = start + self.processing.per_bundle;
            if !self.processing.per_bundle.is_zero() {
                self.cpu_free = done;
            }
            ctx.deferred
                .push((done, Deferred::Bundle(Box::new((bundle, raw)), from)));
        }
    }

    /// A received bundle finished processing: deliver locally or forward.
    pub(crate) fn on_bundle(&mut self, ctx: &mut Ctx<'_>, bundle: Bundle, raw: Bytes, from: u64) {
        let meta = Meta::of(&bundle);
        if let Some(agent) = self.agent.as_mut() {
            let now_ms = ctx.dtn_ms();
            if agent.accept_from_cla(now_ms, Some(from), raw).is_err() {
                // Malformed or store full: counted; the red LTP session already completed, so the bundle is lost
                // here exactly as on a real node without deferred reports.
                self.counters.dropped += 1;
                self.log(ctx, BundleEvent::Dropped, &meta, from);
            }
            return;
        }
        if meta.destination.0 != self.number {
            self.route(
                ctx,
                Outbound {
                    key: None,
                    wire: raw,
                    red: true,
                    meta,
                    attempts: 0,
                },
            );
            return;
        }
        self.deliver_local(ctx, meta, bundle.payload(), from);
    }

    /// Hands a bundle addressed to this node to the application registered on its service.
    fn deliver_local(&mut self, ctx: &mut Ctx<'_>, meta: Meta, payload: Bytes, from: u64) {
        let svc = meta.destination.1;
        if let Some(k) = self.servers.iter().position(|s| s.service == svc) {
            self.counters.delivered += 1;
            self.log(ctx, BundleEvent::Delivered, &meta, from);
            let Some(app) = self.servers.get_mut(k) else {
                return;
            };
            if let Ok(ack) = app.server.on_bundle(ctx.now, &payload) {
                let (colour, lifetime) = (app.ack_colour, app.lifetime_ms);
                self.originate(ctx, svc, meta.source, ack, colour == Colour::Red, lifetime);
            }
        } else if let Some(app) = self.clients.iter_mut().find(|c| c.service == svc) {
            let _ = app.client.on_ack(ctx.now, &payload);
            self.counters.delivered += 1;
            self.log(ctx, BundleEvent::Delivered, &meta, from);
        } else {
            self.counters.dropped += 1;
            self.log(ctx, BundleEvent::Dropped, &meta, from);
        }
    }

    fn on_green(
        &mut self,
        ctx: &mut Ctx<'_>,
        remote: u64,
        session: SessionId,
        offset: u64,
        data: Bytes,
        eob: bool,
    ) {
        if offset == 0 && eob {
            self.on_block(ctx, remote, data);
            return;
        }
        let key = (remote, session.originator, session.number);
        let parts = self.green.entry(key).or_default();
        parts.push((offset, data));
        if !eob {
            if self.green.len() > MAX_GREEN_PARTIAL {
                if let Some(k) = self.green.keys().next().copied() {
                    self.green.remove(&k);
                }
            }
            return;
        }
        let Some(mut parts) = self.green.remove(&key) else {
            return;
        };
        parts.sort_by_key(|p| p.0);
        let mut next = 0u64;
        let mut block = BytesMut::new();
        for (off, d) in parts {
            if off != next {
                return; // a green segment was lost: the block is incomplete
            }
            next += d.len() as u64;
            block.extend_from_slice(&d);
        }
        self.on_block(ctx, remote, block.freeze());
    }

    fn on_event(&mut self, ctx: &mut Ctx<'_>, ev: Event) {
        match ev {
            Event::BlockReceived {
                remote,
                client_service_id,
                data,
                ..
            } => {
                if client_service_id == BUNDLE_CLIENT_SERVICE {
                    self.on_block(ctx, remote, data);
                }
            }
            Event::GreenSegment {
                remote,
                session,
                client_service_id,
                offset,
                data,
                end_of_block,
            } => {
                if client_service_id == BUNDLE_CLIENT_SERVICE {
                    self.on_green(ctx, remote, session, offset, data, end_of_block);
                }
            }
            Event::ExportCompleted {
                remote,
                session,
                tokens,
            } => {
                let start = self
                    .starts
                    .lock()
                    .ok()
                    .and_then(|mut s| s.take(session.originator, session.number));
                if let Some(start) = start {
                    let red = tokens
                        .first()
                        .and_then(|t| self.in_flight.get(t))
                        .is_some_and(|(_, ob)| ob.red);
                    ctx.sessions.push(SessionRecord {
                        node: self.number,
                        remote,
                        number: session.number,
                        start,
                        end: ctx.now,
                        red,
                    });
                }
                for t in tokens {
                    if let Some((via, ob)) = self.in_flight.remove(&t) {
                        self.counters.forwarded += 1;
                        self.log(ctx, BundleEvent::Forwarded, &ob.meta, via);
                        if let (Some(agent), Some(key)) = (self.agent.as_mut(), ob.key) {
                            let _ = agent.cla_result(
                                ctx.dtn_ms(),
                                bp::BundleKey::from_token(key),
                                bp::ClaOutcome::Sent,
                            );
                        }
                    }
                }
            }
            Event::ExportCancelled {
                session, tokens, ..
            } => {
                if let Ok(mut s) = self.starts.lock() {
                    s.take(session.originator, session.number);
                }
                for t in tokens {
                    if let Some((via, mut ob)) = self.in_flight.remove(&t) {
                        self.counters.failed += 1;
                        self.log(ctx, BundleEvent::Failed, &ob.meta, via);
                        ob.attempts += 1;
                        if let (Some(agent), Some(key)) = (self.agent.as_mut(), ob.key) {
                            // The agent re-routes and offers it again through poll_transmit.
                            let _ = agent.cla_result(
                                ctx.dtn_ms(),
                                bp::BundleKey::from_token(key),
                                bp::ClaOutcome::Failed,
                            );
                        } else if ob.red && ob.attempts < 16 {
                            self.route(ctx, ob);
                        } else {
                            self.counters.dropped += 1;
                            self.log(ctx, BundleEvent::Dropped, &ob.meta, via);
                        }
                    }
                }
            }
            Event::ImportCancelled { .. } => {}
        }
    }

    /// Runs everything that is due at `ctx.now`: timers, events, applications, hand-over to LTP, transmission.
    pub(crate) fn drive(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        loop {
            if self.engine.poll_timeout().is_some_and(|t| t <= now) {
                self.engine.handle_timeout(now);
            }
            let mut progress = false;
            while let Some(ev) = self.engine.poll_event() {
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
            if !self.waiting.is_empty() {
                self.flush_waiting(ctx);
            }
            ctx.tx_buf.clear();
            while let Some(t) = self.engine.poll_transmit(now, ctx.tx_buf) {
                if ctx.pool.capacity() < t.len {
                    ctx.pool.reserve(256 * 1024);
                }
                ctx.pool.extend_from_slice(ctx.tx_buf);
                ctx.outbox
                    .push((t.remote_engine, ctx.pool.split().freeze()));
                ctx.tx_buf.clear();
                progress = true;
            }
            if !progress {
                break;
            }
        }
    }

    /// Agent work due now: timers, bundles to hand to LTP, local deliveries. Returns true if anything moved.
    fn drive_agent(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let now_ms = ctx.dtn_ms();
        let mut progress = false;
        let Some(agent) = self.agent.as_mut() else {
            return false;
        };
        if agent.poll_timeout().is_some_and(|t| t <= now_ms) {
            let _ = agent.handle_timeout(now_ms);
        }
        // Only take bundles from the agent while LTP has room: the rest stay in the agent's store.
        while self.waiting.is_empty() {
            let Some(agent) = self.agent.as_mut() else {
                break;
            };
            let Some(fwd) = agent.poll_transmit(now_ms) else {
                break;
            };
            progress = true;
            // Decoding (with its CRC pass) is only needed to find green bundles or to log identities.
            let (meta, red) = if self.green_ids.is_empty() && ctx.bundle_log.is_none() {
                (Meta::default(), true)
            } else {
                match Bundle::decode_prefix(&fwd.bundle) {
                    Ok((b, _)) => (Meta::of(&b), !self.green_ids.remove(&b.id())),
                    Err(_) => (Meta::default(), true),
                }
            };
            self.waiting.push_back((
                fwd.neighbour,
                Outbound {
                    key: Some(fwd.key.as_token()),
                    wire: fwd.bundle,
                    red,
                    meta,
                    attempts: 0,
                },
            ));
            self.flush_waiting(ctx);
        }
        while let Some(d) = self.agent.as_mut().and_then(|a| a.poll_delivery()) {
            if let Some(agent) = self.agent.as_mut() {
                let _ = agent.delivered(now_ms, d.key);
            }
            progress = true;
            let ipn = |e: &Eid| match e {
                Eid::Ipn { node, service, .. } => (*node, *service),
                _ => (0, 0),
            };
            let meta = Meta {
                source: ipn(&d.source),
                destination: ipn(&d.endpoint),
                creation: (d.id.timestamp.dtn_time_ms, d.id.timestamp.sequence),
                payload_len: d.payload.len() as u64,
            };
            let from = meta.source.0;
            self.deliver_local(ctx, meta, d.payload, from);
        }
        progress
    }

    /// Earliest time this node needs to run again on its own.
    pub(crate) fn next_wake(&self) -> Option<Duration> {
        let mut t = self.engine.poll_timeout();
        if let Some(a) = self.agent.as_ref().and_then(|a| a.poll_timeout()) {
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
        self.engine.is_idle()
            && self.agent.as_ref().is_none_or(|a| {
                let st = a.status();
                st.stored_bundles == 0
            })
            && self.waiting.is_empty()
            && self.in_flight.is_empty()
            && self.clients.iter().all(|c| c.client.is_finished(now))
    }

    /// The node number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The LTP engine (read-only: statistics, configuration).
    pub fn engine(&self) -> &ltp::Engine {
        &self.engine
    }

    /// Bundle-layer counters.
    pub fn counters(&self) -> &BundleCounters {
        &self.counters
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
