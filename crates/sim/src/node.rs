//! A simulated node: the real LTP engine, a minimal static-route bundle layer, DTNperf-style applications and a
//! modelled CPU.
//!
//! The bundle layer here ([`MiniBundleLayer`] behaviour inside [`Node`]) is deliberately small and clearly not the
//! BP agent: it encodes bundles with `bpv7`, forwards them verbatim by a static next hop (no custody, no store
//! quota, no status reports, no hop-count or previous-node update), re-queues the bundles of a cancelled LTP
//! session, and delivers bundles addressed to a local application. It exists so the simulator runs complete
//! BP-over-LTP scenarios before the `bp` agent can be hosted.

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
            let token = self.next_token;
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
                    self.next_token += 1;
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
        if meta.destination.0 != self.number {
            self.route(
                ctx,
                Outbound {
                    wire: raw,
                    red: true,
                    meta,
                    attempts: 0,
                },
            );
            return;
        }
        let payload = bundle.payload();
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
                        if ob.red && ob.attempts < 16 {
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

    /// Earliest time this node needs to run again on its own.
    pub(crate) fn next_wake(&self) -> Option<Duration> {
        let mut t = self.engine.poll_timeout();
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
