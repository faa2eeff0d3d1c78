//! A two-node virtual-time world for exact-timing tests: engine 1 ("A") and engine 2 ("B"),
//! each an `ltp::Engine` with its FEC layer (`fec::Stack`), joined by a link of fixed one-way
//! delay (the FEC layers pace at the span rate; with a zero burst they release one datagram
//! per serialization time, like the link). A loss rule chooses which datagrams vanish; A
//! re-sends the bundle of a cancelled session the way a BP agent re-forwards.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use fec::{FecConfig, Mode, Stack, SymbolHeader};
use ltp::{Engine, EngineConfig, Event, SpanConfig};

/// One datagram that left a node.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Sender engine (1 or 2).
    pub from: u64,
    /// Departure time.
    pub at: Duration,
    /// Arrival time (departure + delay), whether or not it was lost.
    pub arrives: Duration,
    /// The FEC header if it is a FEC datagram.
    pub fec: Option<SymbolHeader>,
    /// Wire length.
    pub len: usize,
    /// Dropped by the loss rule.
    pub lost: bool,
}

/// Something the nodes' clients saw, with its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// B received a block (its content).
    Block(Bytes),
    /// A's export session completed (its token).
    Done(u64),
    /// A's export session was cancelled (token); the block is re-sent.
    Cancelled(u64),
}

/// Loss rule: (datagram index on its direction, the datagram's FEC header) → lose it?
pub type LossRule = Box<dyn FnMut(u64, usize, Option<&SymbolHeader>) -> bool>;

/// The world.
pub struct World {
    pub a: Stack,
    pub b: Stack,
    pub now: Duration,
    pub delay: Duration,
    /// (arrival, sequence, to, datagram)
    inflight: BTreeMap<(Duration, u64), (u64, Bytes)>,
    seq: u64,
    pub sent: Vec<Sent>,
    pub seen: Vec<(Duration, Seen)>,
    pub loss: LossRule,
    counts: [usize; 2],
    /// Token → block, for re-sending cancelled blocks.
    blocks: BTreeMap<u64, Bytes>,
    pub log_a: std::sync::Arc<std::sync::Mutex<Vec<ltp::SegmentRecord>>>,
    pub log_b: std::sync::Arc<std::sync::Mutex<Vec<ltp::SegmentRecord>>>,
}

struct Shared(std::sync::Arc<std::sync::Mutex<Vec<ltp::SegmentRecord>>>);
impl ltp::SegmentSink for Shared {
    fn record(&mut self, rec: &ltp::SegmentRecord) {
        if let Ok(mut v) = self.0.lock() {
            v.push(*rec);
        }
    }
}

/// Span settings used by both ends: 1024-byte segments (T = 1026), RTO `rto`, `sessions`
/// export sessions, one import session (one receive buffer), report replication 3.
pub fn span(remote: u64, rto: Duration, sessions: usize) -> SpanConfig {
    let mut s = SpanConfig::new(remote);
    s.max_segment_size = 1024;
    s.rto = Some(rto);
    s.max_export_sessions = sessions;
    s.max_import_sessions = 1;
    s.signal_replication = 3;
    s
}

/// FEC settings: `mode`, K up to `max_k`, 8 Mb/s pacing with no burst (one byte per µs), a
/// 20 ms matrix timeout.
pub fn fec(remote: u64, mode: Mode, max_k: u16) -> FecConfig {
    let mut f = FecConfig::new(remote, mode);
    f.max_k = max_k;
    f.rate_bps = 8_000_000;
    f.burst_time = Duration::ZERO;
    f.matrix_timeout = Duration::from_millis(20);
    f
}

impl World {
    /// Two nodes with FEC `mode` both ways, `delay` each way.
    pub fn new(mode: Mode, max_k: u16, delay: Duration, rto: Duration, sessions: usize) -> World {
        Self::with_fec(mode, max_k, delay, rto, sessions, |_| {})
    }

    /// Like [`World::new`], with `tweak` applied to both ends' FEC settings.
    pub fn with_fec(
        mode: Mode,
        max_k: u16,
        delay: Duration,
        rto: Duration,
        sessions: usize,
        tweak: impl Fn(&mut FecConfig),
    ) -> World {
        let mk = |local: u64, remote: u64| {
            let mut e = Engine::new(EngineConfig::new(local));
            e.add_span(span(remote, rto, sessions));
            let mut s = Stack::new(e);
            let mut f = fec(remote, mode, max_k);
            tweak(&mut f);
            s.add_fec_span(f).unwrap();
            s
        };
        let mut w = World {
            a: mk(1, 2),
            b: mk(2, 1),
            now: Duration::ZERO,
            delay,
            inflight: BTreeMap::new(),
            seq: 0,
            sent: Vec::new(),
            seen: Vec::new(),
            loss: Box::new(|_, _, _| false),
            counts: [0, 0],
            blocks: BTreeMap::new(),
            log_a: Default::default(),
            log_b: Default::default(),
        };
        w.a.set_segment_sink(Some(Box::new(Shared(w.log_a.clone()))));
        w.b.set_segment_sink(Some(Box::new(Shared(w.log_b.clone()))));
        w.a.set_fec_logging(true);
        w.b.set_fec_logging(true);
        w
    }

    /// A sends `block` (red) to B with client token `token`.
    pub fn send(&mut self, block: Bytes, token: u64) {
        self.blocks.insert(token, block.clone());
        self.a
            .send_block(self.now, 2, 1, block.clone(), block.len(), token)
            .unwrap();
    }

    fn pump(&mut self) -> bool {
        let mut moved = false;
        for from in [1u64, 2] {
            let mut buf = Vec::new();
            loop {
                buf.clear();
                let now = self.now;
                let node = if from == 1 { &mut self.a } else { &mut self.b };
                let Some(t) = node.poll_transmit(now, &mut buf) else {
                    break;
                };
                moved = true;
                let dg = Bytes::copy_from_slice(&buf[buf.len() - t.len..]);
                let hdr = SymbolHeader::decode(&dg).ok().map(|(h, _)| h);
                let idx = &mut self.counts[(from - 1) as usize];
                let lost = (self.loss)(from, *idx, hdr.as_ref());
                *idx += 1;
                let arrives = now + self.delay;
                self.sent.push(Sent {
                    from,
                    at: now,
                    arrives,
                    fec: hdr,
                    len: dg.len(),
                    lost,
                });
                if !lost {
                    self.seq += 1;
                    self.inflight.insert((arrives, self.seq), (3 - from, dg));
                }
            }
        }
        moved
    }

    fn events(&mut self) {
        while let Some(ev) = self.b.poll_event() {
            if let Event::BlockReceived { data, .. } = ev {
                self.seen.push((self.now, Seen::Block(data)));
            }
        }
        let now = self.now;
        while let Some(ev) = self.a.poll_event() {
            match ev {
                Event::ExportCompleted { tokens, .. } => {
                    for t in tokens {
                        self.seen.push((now, Seen::Done(t)));
                    }
                }
                Event::ExportCancelled { tokens, .. } => {
                    for t in tokens {
                        self.seen.push((now, Seen::Cancelled(t)));
                        // The bundle layer re-forwards the bundle in a new session.
                        if let Some(b) = self.blocks.get(&t).cloned() {
                            let _ = self.a.send_block(now, 2, 1, b.clone(), b.len(), t);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Runs until both nodes are idle and nothing is in flight (or `limit`).
    pub fn run(&mut self, limit: Duration) {
        loop {
            self.events();
            if self.pump() {
                continue;
            }
            let next_arrival = self.inflight.keys().next().map(|k| k.0);
            let next = [next_arrival, self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next else { break };
            if t > limit {
                break;
            }
            self.now = self.now.max(t);
            while let Some((&key, _)) = self.inflight.iter().next() {
                if key.0 > self.now {
                    break;
                }
                let Some((to, dg)) = self.inflight.remove(&key) else {
                    break;
                };
                let node = if to == 1 { &mut self.a } else { &mut self.b };
                let _ = node.handle_datagram(self.now, &dg);
                self.events();
            }
            self.a.handle_timeout(self.now);
            self.b.handle_timeout(self.now);
        }
    }

    /// FEC datagrams A sent, in order.
    pub fn fec_sent(&self, from: u64) -> Vec<&Sent> {
        self.sent
            .iter()
            .filter(|s| s.from == from && s.fec.is_some())
            .collect()
    }

    /// Times at which B received a block, with the blocks.
    pub fn blocks(&self) -> Vec<(Duration, Bytes)> {
        self.seen
            .iter()
            .filter_map(|(t, s)| match s {
                Seen::Block(b) => Some((*t, b.clone())),
                _ => None,
            })
            .collect()
    }

    /// Log rows named `name` of node `n` (1 or 2).
    pub fn rows(&self, n: u64, name: &str) -> Vec<ltp::SegmentRecord> {
        let log = if n == 1 { &self.log_a } else { &self.log_b };
        log.lock()
            .map(|v| {
                v.iter()
                    .filter(|r| r.kind.name() == name)
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A block of `len` bytes whose content depends on `salt`.
pub fn block(len: usize, salt: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u8).wrapping_mul(13) ^ salt)
            .collect::<Vec<_>>(),
    )
}
