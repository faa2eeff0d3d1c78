//! Virtual-time test harness: two LTP engines joined by a scripted lossy link.
//!
//! Each direction is a link with a propagation delay and a serialization rate. Every
//! datagram an engine emits is decoded and shown to the test's script, which decides whether
//! it is delivered, dropped, duplicated or delayed. The loop advances virtual time to the
//! minimum of the engines' `poll_timeout` and the next arrival, so timings are exact.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ltp::{
    Engine, EngineConfig, Event, LogEvent, RecordKind, Segment, SegmentRecord, SegmentSink,
    SegmentType, SpanConfig,
};

/// Engine ids used by the harness: engine 0 is A (id 1), engine 1 is B (id 2).
pub const ID: [u64; 2] = [1, 2];

/// What the script does with a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Deliver,
    Drop,
    /// Deliver twice (the copy right behind the original).
    Duplicate,
    /// Deliver this much later than it would have arrived.
    Delay(Duration),
    /// Deliver normally, plus a late copy this much later.
    DuplicateLate(Duration),
}

/// A datagram as seen by the script and recorded in the transmission log.
#[derive(Debug, Clone)]
pub struct Sent {
    pub time: Duration,
    pub from: usize,
    /// Index among datagrams sent in this direction.
    pub index: usize,
    pub seg: Segment,
    pub len: usize,
    pub action: Action,
    pub bytes: Bytes,
}

/// Shared in-memory log sink.
#[derive(Clone, Default)]
pub struct MemLog(pub Arc<Mutex<Vec<SegmentRecord>>>);

impl SegmentSink for MemLog {
    fn record(&mut self, rec: &SegmentRecord) {
        if let Ok(mut v) = self.0.lock() {
            v.push(*rec);
        }
    }
}

impl MemLog {
    pub fn records(&self) -> Vec<SegmentRecord> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
    /// Times of event rows of the given kind.
    pub fn event_times(&self, ev: LogEvent) -> Vec<Duration> {
        self.records()
            .iter()
            .filter(|r| r.kind == RecordKind::Event(ev))
            .map(|r| r.time)
            .collect()
    }
}

struct Link {
    delay: Duration,
    rate_bps: u64,
    busy_until: Duration,
}

impl Link {
    fn serialization(&self, len: usize) -> Duration {
        if self.rate_bps == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((len as u64 * 8 * 1_000_000_000).div_ceil(self.rate_bps))
    }
}

type Script = Box<dyn FnMut(&Sent) -> Action>;
type Rewrite = Box<dyn FnMut(&Sent) -> Option<Bytes>>;
/// A datagram on its way: (arrival time, sequence, destination engine, already through the
/// destination's receive queue, bytes).
type InFlight = (Duration, u64, usize, bool, Bytes);

/// A receiver slower than its link: datagrams wait in a bounded queue (like a socket receive
/// buffer) and reach the engine one by one at `rate_bps`; a datagram that does not fit in the
/// queue on arrival is dropped (counted in `dropped`).
#[derive(Debug, Clone, Default)]
pub struct RxQueue {
    pub rate_bps: u64,
    pub capacity_bytes: u64,
    pub busy_until: Duration,
    pub dropped: u64,
    pub queued: u64,
    /// A receiver that works in batches (HDTN 1.3.1 reads into a ring and hands it on): after
    /// every `stall_every` bytes it took, it stops taking datagrams for `stall`, and what
    /// arrives meanwhile beyond its buffer is dropped in one run (0 = never).
    pub stall_every: u64,
    pub stall: Duration,
    since_stall: u64,
    /// A receiver whose host takes its CPU away now and then (both nodes and their
    /// applications on two shared cores): from every multiple of `pause_every` it takes no
    /// datagram for `pause`, whatever its queue holds, and what arrives meanwhile beyond its
    /// buffer is dropped (zero = never).
    pub pause_every: Duration,
    pub pause: Duration,
}

impl RxQueue {
    pub fn new(rate_bps: u64, capacity_bytes: u64) -> Self {
        Self {
            rate_bps,
            capacity_bytes,
            ..Self::default()
        }
    }

    /// Admit a datagram of `len` bytes arriving at `t`: the time its processing ends, or
    /// `None` when the queue is full.
    fn admit(&mut self, t: Duration, len: usize) -> Option<Duration> {
        // Time the queue takes to drain from `t` on, less the pauses in it: what it holds.
        let mut backlog = self.busy_until.saturating_sub(self.after_pause(t));
        if !self.pause_every.is_zero() && backlog > Duration::ZERO {
            let e = self.pause_every.as_nanos();
            let first = t.as_nanos() / e + 1;
            let last = self.busy_until.as_nanos().saturating_sub(1) / e;
            let pauses = last.saturating_sub(first - 1) as u32;
            backlog = backlog.saturating_sub(self.pause * pauses);
        }
        let backlog_ns = backlog.as_nanos() as u64;
        let backlog_bytes = backlog_ns.saturating_mul(self.rate_bps) / 8_000_000_000;
        if backlog_bytes + len as u64 > self.capacity_bytes {
            self.dropped += 1;
            return None;
        }
        let service =
            Duration::from_nanos((len as u64 * 8 * 1_000_000_000).div_ceil(self.rate_bps));
        self.busy_until = self.after_pause(self.busy_until.max(t)) + service;
        self.queued += 1;
        let done = self.busy_until;
        if self.stall_every > 0 {
            self.since_stall += len as u64;
            if self.since_stall >= self.stall_every {
                self.since_stall = 0;
                self.busy_until += self.stall;
            }
        }
        Some(done)
    }

    /// `t`, or the end of the pause `t` falls in.
    fn after_pause(&self, t: Duration) -> Duration {
        if self.pause_every.is_zero() {
            return t;
        }
        let e = self.pause_every.as_nanos();
        let into = Duration::from_nanos((t.as_nanos() % e) as u64);
        if into < self.pause {
            t - into + self.pause
        } else {
            t
        }
    }
}

/// The two-engine world.
pub struct Harness {
    pub now: Duration,
    pub engines: [Engine; 2],
    links: [Link; 2],
    in_flight: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    pub script: Script,
    /// Replaces the bytes delivered for a datagram (the engine's output is recorded as sent).
    pub rewrite: Option<Rewrite>,
    /// Slow receivers: engine `i` takes its datagrams through `rx_queues[i]` when set.
    pub rx_queues: [Option<RxQueue>; 2],
    pub sent: Vec<Sent>,
    pub events: Vec<(Duration, usize, Event)>,
    pub logs: [MemLog; 2],
    /// Scheduled link outages [start, end): both engines are told, the link drops traffic.
    pub outages: Vec<(Duration, Duration)>,
    outage_state: bool,
    counters: [usize; 2],
    /// A driver that sleeps: engine `i` transmits only at multiples of `wake_period[i]` (a busy
    /// host's thread waking late), so its pacer has lateness to catch up on.
    pub wake_period: [Option<Duration>; 2],
}

/// Link and span parameters shared by both directions.
#[derive(Debug, Clone)]
pub struct Params {
    pub delay: Duration,
    pub rate_bps: u64,
    pub span: SpanConfig,
}

impl Params {
    /// 10 ms one-way delay, 80 Mb/s (100 ns per byte), 1024-byte segments, RTO 50 ms.
    pub fn standard() -> Self {
        let mut span = SpanConfig::new(0);
        span.max_segment_size = 1024;
        span.rate_bps = 80_000_000;
        span.owlt = Duration::from_millis(10);
        span.rto = Some(Duration::from_millis(50));
        span.max_export_sessions = 8;
        // The closed forms of these tests assume segments leave one serialization time
        // apart from the first one (the engine default depth of 4 ms would let the first
        // 40 kB leave at once).
        span.pacing_burst_time = Duration::ZERO;
        Self {
            delay: Duration::from_millis(10),
            rate_bps: 80_000_000,
            span,
        }
    }

    /// Serialization time of `len` bytes at the link rate.
    pub fn ser(&self, len: usize) -> Duration {
        Duration::from_nanos((len as u64 * 8 * 1_000_000_000).div_ceil(self.rate_bps))
    }
}

impl Harness {
    pub fn new(p: &Params) -> Self {
        Self::with_spans(p, p.span.clone(), p.span.clone())
    }

    /// Engines with different span settings (`span_a` is A's view of B and vice versa).
    pub fn with_spans(p: &Params, span_a: SpanConfig, span_b: SpanConfig) -> Self {
        Self::with_configs(p, span_a, span_b, |_, _| {})
    }

    /// Like [`Harness::with_spans`], with `tune(engine index, config)` applied to each
    /// engine's configuration first.
    pub fn with_configs(
        p: &Params,
        span_a: SpanConfig,
        span_b: SpanConfig,
        tune: impl Fn(usize, &mut EngineConfig),
    ) -> Self {
        let logs = [MemLog::default(), MemLog::default()];
        let mk = |me: usize, mut span: SpanConfig, log: &MemLog| {
            let mut ecfg = EngineConfig::new(ID[me]);
            tune(me, &mut ecfg);
            let mut e = Engine::new(ecfg);
            span.remote_engine_id = ID[1 - me];
            e.add_span(span);
            e.set_segment_sink(Some(Box::new(log.clone())));
            e
        };
        let engines = [mk(0, span_a, &logs[0]), mk(1, span_b, &logs[1])];
        let link = || Link {
            delay: p.delay,
            rate_bps: p.rate_bps,
            busy_until: Duration::ZERO,
        };
        Self {
            now: Duration::ZERO,
            engines,
            links: [link(), link()],
            in_flight: BinaryHeap::new(),
            seq: 0,
            script: Box::new(|_| Action::Deliver),
            rewrite: None,
            rx_queues: [None, None],
            sent: Vec::new(),
            events: Vec::new(),
            logs,
            outages: Vec::new(),
            outage_state: false,
            counters: [0, 0],
            wake_period: [None, None],
        }
    }

    pub fn set_script(&mut self, f: impl FnMut(&Sent) -> Action + 'static) {
        self.script = Box::new(f);
    }

    /// Deliver `f(sent)` instead of the datagram the engine emitted, when it returns `Some`.
    pub fn set_rewrite(&mut self, f: impl FnMut(&Sent) -> Option<Bytes> + 'static) {
        self.rewrite = Some(Box::new(f));
    }

    fn in_outage(&self, t: Duration) -> bool {
        self.outages.iter().any(|&(a, b)| t >= a && t < b)
    }

    fn next_outage_edge(&self) -> Option<Duration> {
        self.outages
            .iter()
            .flat_map(|&(a, b)| [a, b])
            .filter(|&t| t > self.now)
            .min()
    }

    fn transmit_all(&mut self) {
        let mut buf = Vec::with_capacity(2048);
        for from in 0..2 {
            if let Some(p) = self.wake_period[from] {
                if !self.now.as_nanos().is_multiple_of(p.as_nanos().max(1)) {
                    continue;
                }
            }
            loop {
                buf.clear();
                let Some(t) = self.engines[from].poll_transmit(self.now, &mut buf) else {
                    break;
                };
                assert_eq!(t.remote_engine, ID[1 - from]);
                assert_eq!(t.len, buf.len());
                let bytes = Bytes::copy_from_slice(&buf);
                let seg = Segment::decode(&bytes).expect("engine emitted an undecodable segment");
                let mut sent = Sent {
                    time: self.now,
                    from,
                    index: self.counters[from],
                    seg,
                    len: t.len,
                    action: Action::Deliver,
                    bytes: bytes.clone(),
                };
                self.counters[from] += 1;
                let mut action = (self.script)(&sent);
                if self.in_outage(self.now) {
                    action = Action::Drop;
                }
                sent.action = action;
                let bytes = match self.rewrite.as_mut().and_then(|f| f(&sent)) {
                    Some(b) => b,
                    None => bytes,
                };
                self.sent.push(sent);
                let link = &mut self.links[from];
                let start = self.now.max(link.busy_until);
                let ser = link.serialization(t.len);
                link.busy_until = start + ser;
                let arrival = start + ser + link.delay;
                let to = 1 - from;
                let mut push = |at: Duration, b: Bytes, seq: &mut u64| {
                    *seq += 1;
                    self.in_flight.push(Reverse((at, *seq, to, false, b)));
                };
                match action {
                    Action::Deliver => push(arrival, bytes, &mut self.seq),
                    Action::Drop => {}
                    Action::Duplicate => {
                        push(arrival, bytes.clone(), &mut self.seq);
                        push(arrival, bytes, &mut self.seq);
                    }
                    Action::Delay(d) => push(arrival + d, bytes, &mut self.seq),
                    Action::DuplicateLate(d) => {
                        push(arrival, bytes.clone(), &mut self.seq);
                        push(arrival + d, bytes, &mut self.seq);
                    }
                }
            }
        }
    }

    fn drain_events(&mut self) {
        for e in 0..2 {
            while let Some(ev) = self.engines[e].poll_event() {
                self.events.push((self.now, e, ev));
            }
        }
    }

    /// Run until both engines are idle and nothing is in flight, or until `limit`.
    pub fn run_until(&mut self, limit: Duration) {
        for _ in 0..10_000_000u64 {
            // Link state changes scheduled for now.
            let down = self.in_outage(self.now);
            if down != self.outage_state {
                self.outage_state = down;
                for e in 0..2 {
                    let remote = ID[1 - e];
                    if down {
                        self.engines[e].set_link_down(self.now, remote);
                    } else {
                        self.engines[e].set_link_up(self.now, remote);
                    }
                }
            }
            self.transmit_all();
            self.drain_events();
            let mut times: Vec<Duration> = Vec::new();
            for (e, wake) in self.engines.iter().zip(self.wake_period) {
                if let Some(t) = e.poll_timeout() {
                    let t = t.max(self.now);
                    // A sleeping driver looks at the engine at its next tick only.
                    let t = match wake {
                        Some(p) if !p.is_zero() => {
                            let p = p.as_nanos();
                            let ticks = t.as_nanos().div_ceil(p).max(self.now.as_nanos() / p + 1);
                            Duration::from_nanos((ticks * p) as u64)
                        }
                        _ => t,
                    };
                    times.push(t);
                }
            }
            if let Some(Reverse((t, ..))) = self.in_flight.peek() {
                times.push(*t);
            }
            let busy = !times.is_empty() || !self.engines.iter().all(|e| e.is_idle());
            if busy {
                if let Some(t) = self.next_outage_edge() {
                    times.push(t);
                }
            }
            let next = times.into_iter().min();
            let Some(t) = next else { return };
            if t > limit {
                return;
            }
            self.now = t;
            while let Some(Reverse((at, ..))) = self.in_flight.peek() {
                if *at > self.now {
                    break;
                }
                let Some(Reverse((_, _, to, queued, bytes))) = self.in_flight.pop() else {
                    break;
                };
                if !queued {
                    if let Some(q) = self.rx_queues[to].as_mut() {
                        if let Some(done) = q.admit(self.now, bytes.len()) {
                            self.seq += 1;
                            self.in_flight
                                .push(Reverse((done, self.seq, to, true, bytes)));
                        }
                        continue;
                    }
                }
                let _ = self.engines[to].handle_datagram(self.now, &bytes);
            }
            for e in &mut self.engines {
                e.handle_timeout(self.now);
            }
            self.drain_events();
        }
        panic!("harness did not converge");
    }

    /// Run with a generous bound (10 virtual minutes) and require quiescence.
    pub fn run(&mut self) {
        self.run_until(Duration::from_secs(600));
        assert!(self.in_flight.is_empty(), "datagrams still in flight");
    }

    /// Send a block from A to B.
    pub fn send_a(&mut self, data: Bytes, red_len: usize, token: u64) -> ltp::SendOutcome {
        self.engines[0]
            .send_block(self.now, ID[1], 7, data, red_len, token)
            .expect("send_block")
    }

    /// Datagrams sent by engine `from`, optionally filtered by type.
    pub fn sent_by(&self, from: usize) -> Vec<&Sent> {
        self.sent.iter().filter(|s| s.from == from).collect()
    }

    pub fn sent_of(&self, from: usize, ty: SegmentType) -> Vec<&Sent> {
        self.sent
            .iter()
            .filter(|s| s.from == from && s.seg.segment_type == ty)
            .collect()
    }

    /// Events of engine `e` matching `f`, with their times.
    pub fn events_of(&self, e: usize, f: impl Fn(&Event) -> bool) -> Vec<(Duration, Event)> {
        self.events
            .iter()
            .filter(|(_, en, ev)| *en == e && f(ev))
            .map(|(t, _, ev)| (*t, ev.clone()))
            .collect()
    }

    /// Times at which B delivered blocks, and the data.
    pub fn delivered(&self) -> Vec<(Duration, Bytes)> {
        self.events
            .iter()
            .filter_map(|(t, e, ev)| match ev {
                Event::BlockReceived { data, .. } if *e == 1 => Some((*t, data.clone())),
                _ => None,
            })
            .collect()
    }

    /// Times at which A saw export completion.
    pub fn completed(&self) -> Vec<(Duration, Vec<u64>)> {
        self.events
            .iter()
            .filter_map(|(t, e, ev)| match ev {
                Event::ExportCompleted { tokens, .. } if *e == 0 => Some((*t, tokens.clone())),
                _ => None,
            })
            .collect()
    }
}

/// Deterministic pseudo-random block content.
pub fn block(len: usize, seed: u64) -> Bytes {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// Offset, length and checkpoint serial of a data segment.
pub fn data_of(s: &Sent) -> (u64, u64, Option<ltp::CheckpointInfo>) {
    match &s.seg.content {
        ltp::Content::Data(d) => (d.offset, d.data.len() as u64, d.checkpoint),
        _ => panic!("not a data segment"),
    }
}

/// The report content of an RS.
pub fn report_of(s: &Sent) -> ltp::ReportSegment {
    match &s.seg.content {
        ltp::Content::Report(r) => r.clone(),
        _ => panic!("not a report"),
    }
}

/// Arrival time at the peer of a datagram sent on an idle link.
pub fn arrival(p: &Params, s: &Sent) -> Duration {
    s.time + p.ser(s.len) + p.delay
}
