//! The sans-IO LTP engine: sessions, timers, pacing and the client interface.
//!
//! The engine never touches a socket or a clock. The driver feeds it datagrams
//! ([`Engine::handle_datagram`]), timer expirations ([`Engine::handle_timeout`]) and blocks
//! ([`Engine::send_block`], [`Engine::enqueue_item`]), and drains segments
//! ([`Engine::poll_transmit`]), the next wake-up time ([`Engine::poll_timeout`]) and client
//! events ([`Engine::poll_event`]). `now` is a [`Duration`] since an arbitrary monotonic
//! epoch chosen by the driver (real or virtual time).
//!
//! Transmission policy: per span, signal segments (RS, RA, CS, CR and their acks) go first,
//! then timed-out checkpoints, then data, served *session by session* in the order sessions
//! started (as ION does): a block's segments leave back to back, which minimises each
//! session's duration; spans are served round-robin. Every segment passes the span's token
//! bucket, so `poll_transmit` returns `None` while the rate does not allow the next segment
//! and `poll_timeout` tells when it will.

mod closed;
mod export;
mod import;
mod span;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::config::{EngineConfig, SpanConfig};
use crate::error::{RecvError, SendError};
use crate::event::Event;
use crate::log::{Direction, LogEvent, Outcome, RecordKind, SegmentRecord, SegmentSink};
use crate::sdnv;
use crate::segment::{
    self, CancelReason, CheckpointInfo, Content, DataSegment, ReceptionClaim, ReportSegment,
    Segment, SegmentType, SessionId,
};
use crate::stats::{EngineStats, SpanStats};

use closed::ClosedSessions;
use export::{Batch, Checkpoint, ExportSession, ExportState};
use import::{ImportSession, ImportState, IssuedReport};
use span::{Aggregator, PendingBlock, Signal, SignalKind, Span, TimerKey};

/// Report serials remembered per export session to recognise duplicates.
const MAX_HANDLED_REPORTS: usize = 256;

/// One segment written by [`Engine::poll_transmit`]: the last `len` bytes of the caller's
/// buffer, to be sent as one datagram to `remote_engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Destination engine id (the driver maps it to an address).
    pub remote_engine: u64,
    /// Segment length in bytes.
    pub len: usize,
}

/// Result of [`Engine::send_block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// An export session started for the block.
    Started(SessionId),
    /// All export sessions of the span are busy; the block waits in the span's queue and
    /// starts when a session closes.
    Queued,
}

/// The LTP engine. See the module documentation for the driving protocol.
pub struct Engine {
    cfg: EngineConfig,
    spans: Vec<Span>,
    span_index: HashMap<u64, usize>,
    exports: HashMap<u64, ExportSession>,
    imports: HashMap<SessionId, ImportSession>,
    closed_imports: ClosedSessions,
    closed_exports: ClosedSessions,
    events: VecDeque<Event>,
    sink: Option<Box<dyn SegmentSink + Send>>,
    stats: EngineStats,
    rng: u64,
    session_counter: u64,
    total_import_bytes: u64,
    next_span_rr: usize,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("local_engine_id", &self.cfg.local_engine_id)
            .field("spans", &self.spans.len())
            .field("exports", &self.exports.len())
            .field("imports", &self.imports.len())
            .finish_non_exhaustive()
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Engine {
    /// Create an engine with no spans.
    pub fn new(cfg: EngineConfig) -> Self {
        let mut rng = cfg.seed;
        let session_counter = splitmix(&mut rng);
        Self {
            closed_imports: ClosedSessions::new(
                cfg.closed_session_memory,
                cfg.closed_session_horizon,
            ),
            closed_exports: ClosedSessions::new(
                cfg.closed_session_memory,
                cfg.closed_session_horizon,
            ),
            cfg,
            spans: Vec::new(),
            span_index: HashMap::new(),
            exports: HashMap::new(),
            imports: HashMap::new(),
            events: VecDeque::new(),
            sink: None,
            stats: EngineStats::default(),
            rng,
            session_counter,
            total_import_bytes: 0,
            next_span_rr: 0,
        }
    }

    /// This engine's id.
    pub fn local_engine_id(&self) -> u64 {
        self.cfg.local_engine_id
    }

    /// Add (or replace the configuration of) the span to `cfg.remote_engine_id`.
    /// Replacing keeps sessions, queues and counters; only the settings change.
    pub fn add_span(&mut self, cfg: SpanConfig) {
        if let Some(&i) = self.span_index.get(&cfg.remote_engine_id) {
            if let Some(span) = self.spans.get_mut(i) {
                span.bucket = crate::pacing::TokenBucket::new(
                    cfg.rate_bps,
                    cfg.pacing_burst_bytes,
                    Duration::ZERO,
                );
                span.cfg = cfg;
            }
            return;
        }
        self.span_index
            .insert(cfg.remote_engine_id, self.spans.len());
        self.spans.push(Span::new(cfg));
    }

    /// Install (or remove, with `None`) the segment log sink. With no sink the logging code
    /// is a single branch per segment.
    pub fn set_segment_sink(&mut self, sink: Option<Box<dyn SegmentSink + Send>>) {
        self.sink = sink;
    }

    /// Take the sink back (e.g. to flush a CSV file at the end of a run).
    pub fn take_segment_sink(&mut self) -> Option<Box<dyn SegmentSink + Send>> {
        self.sink.take()
    }

    /// Change a span's transmission rate (0 = unlimited), e.g. at a contact boundary.
    pub fn set_span_rate(&mut self, now: Duration, remote: u64, rate_bps: u64) -> bool {
        self.span_mut(remote).is_some_and(|s| {
            s.cfg.rate_bps = rate_bps;
            s.bucket.set_rate(rate_bps, now);
            true
        })
    }

    /// Change a span's one-way light time (affects timers armed from now on).
    pub fn set_span_owlt(&mut self, remote: u64, owlt: Duration) -> bool {
        self.span_mut(remote).is_some_and(|s| {
            s.cfg.owlt = owlt;
            true
        })
    }

    /// Change or clear a span's explicit RTO (affects timers armed from now on).
    pub fn set_span_rto(&mut self, remote: u64, rto: Option<Duration>) -> bool {
        self.span_mut(remote).is_some_and(|s| {
            s.cfg.rto = rto;
            true
        })
    }

    /// The link to `remote` went down: suspend its timers (remaining time frozen) and stop
    /// transmitting to it. Returns false for an unknown span.
    pub fn set_link_down(&mut self, now: Duration, remote: u64) -> bool {
        let Some(i) = self.span_index.get(&remote).copied() else {
            return false;
        };
        if let Some(s) = self.spans.get_mut(i) {
            if s.link_up {
                s.link_down(now);
                self.log_event(
                    now,
                    remote,
                    SessionId {
                        originator: 0,
                        number: 0,
                    },
                    LogEvent::LinkDown,
                    0,
                    Outcome::None,
                );
            }
        }
        true
    }

    /// The link to `remote` is up again: resume timers and transmission.
    pub fn set_link_up(&mut self, now: Duration, remote: u64) -> bool {
        let Some(i) = self.span_index.get(&remote).copied() else {
            return false;
        };
        if let Some(s) = self.spans.get_mut(i) {
            if !s.link_up {
                s.link_up(now);
                self.log_event(
                    now,
                    remote,
                    SessionId {
                        originator: 0,
                        number: 0,
                    },
                    LogEvent::LinkUp,
                    0,
                    Outcome::None,
                );
            }
        }
        true
    }

    /// Current settings of the span to `remote`.
    pub fn span_config(&self, remote: u64) -> Option<&SpanConfig> {
        self.span_index
            .get(&remote)
            .and_then(|&i| self.spans.get(i))
            .map(|s| &s.cfg)
    }

    /// Engine-wide counters.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Counters of the span to `remote`.
    pub fn span_stats(&self, remote: u64) -> Option<&SpanStats> {
        self.span_index
            .get(&remote)
            .and_then(|&i| self.spans.get(i))
            .map(|s| &s.stats)
    }

    /// Number of open export sessions (all spans).
    pub fn export_sessions(&self) -> usize {
        self.exports.len()
    }

    /// Number of open import sessions (all spans).
    pub fn import_sessions(&self) -> usize {
        self.imports.len()
    }

    /// Number of recently closed import sessions remembered (see
    /// `EngineConfig::closed_session_memory`).
    pub fn closed_sessions_remembered(&self) -> usize {
        self.closed_imports.len()
    }

    /// Bytes currently reserved by import reassembly buffers.
    pub fn import_buffer_bytes(&self) -> u64 {
        self.total_import_bytes
    }

    /// Blocks waiting for a free export session on the span to `remote`.
    pub fn pending_blocks(&self, remote: u64) -> usize {
        self.span_index
            .get(&remote)
            .and_then(|&i| self.spans.get(i))
            .map_or(0, |s| s.pending_blocks.len())
    }

    /// Whether the engine has no sessions, queued blocks, aggregates or output left.
    pub fn is_idle(&self) -> bool {
        self.exports.is_empty()
            && self.imports.is_empty()
            && self
                .spans
                .iter()
                .all(|s| !s.has_output() && s.pending_blocks.is_empty() && s.aggregators.is_empty())
    }

    fn span_mut(&mut self, remote: u64) -> Option<&mut Span> {
        let i = *self.span_index.get(&remote)?;
        self.spans.get_mut(i)
    }

    fn rto(&self, span: usize) -> Duration {
        self.spans
            .get(span)
            .map_or(Duration::from_secs(1), |s| s.cfg.effective_rto())
    }

    // ----------------------------------------------------------------------------------
    // Sending blocks
    // ----------------------------------------------------------------------------------

    /// Send `data` to `remote` as one block whose first `red_len` bytes are red (reliable)
    /// and the rest green. `token` is returned in the completion/cancel event.
    pub fn send_block(
        &mut self,
        now: Duration,
        remote: u64,
        client_service_id: u64,
        data: Bytes,
        red_len: usize,
        token: u64,
    ) -> Result<SendOutcome, SendError> {
        let i = *self
            .span_index
            .get(&remote)
            .ok_or(SendError::UnknownSpan(remote))?;
        if data.is_empty() {
            return Err(SendError::EmptyBlock);
        }
        if red_len > data.len() {
            return Err(SendError::RedTooLong {
                red_len,
                block_len: data.len(),
            });
        }
        if !self.span_can_accept(i) {
            return Err(SendError::SpanFull(remote));
        }
        Ok(self.start_or_queue(
            now,
            i,
            PendingBlock {
                client_service_id,
                data,
                red_len,
                tokens: vec![token],
            },
        ))
    }

    /// Add one client item (e.g. a bundle) to the span's aggregate for
    /// (`client_service_id`, colour). The aggregate becomes one block when it reaches the
    /// span's `aggregation_size_limit` or `aggregation_time_limit` after its first item;
    /// completion/cancel events list the tokens of every item it held.
    pub fn enqueue_item(
        &mut self,
        now: Duration,
        remote: u64,
        client_service_id: u64,
        item: Bytes,
        token: u64,
        red: bool,
    ) -> Result<(), SendError> {
        let i = *self
            .span_index
            .get(&remote)
            .ok_or(SendError::UnknownSpan(remote))?;
        if item.is_empty() {
            return Err(SendError::EmptyBlock);
        }
        if !self.span_can_accept(i) {
            return Err(SendError::SpanFull(remote));
        }
        let Some(span) = self.spans.get_mut(i) else {
            return Err(SendError::UnknownSpan(remote));
        };
        let time_limit = span.cfg.aggregation_time_limit;
        let size_limit = span.cfg.aggregation_size_limit;
        let k = match span
            .aggregators
            .iter()
            .position(|a| a.client_service_id == client_service_id && a.red == red)
        {
            Some(k) => k,
            None => {
                span.aggregators.push(Aggregator {
                    client_service_id,
                    red,
                    buf: BytesMut::new(),
                    single: None,
                    tokens: Vec::new(),
                    deadline: now + time_limit,
                });
                span.aggregators.len() - 1
            }
        };
        let Some(agg) = span.aggregators.get_mut(k) else {
            return Err(SendError::UnknownSpan(remote));
        };
        if agg.single.is_none() && agg.buf.is_empty() {
            agg.single = Some(item);
        } else {
            if let Some(first) = agg.single.take() {
                agg.buf.reserve(size_limit.max(first.len() + item.len()));
                agg.buf.extend_from_slice(&first);
            }
            agg.buf.extend_from_slice(&item);
        }
        agg.tokens.push(token);
        if agg.len() >= size_limit {
            self.flush_aggregator(now, i, k);
        }
        Ok(())
    }

    /// Start every non-empty aggregate of the span to `remote` now (e.g. at the end of a
    /// contact or when the client has nothing more to send).
    pub fn flush_aggregation(&mut self, now: Duration, remote: u64) {
        if let Some(&i) = self.span_index.get(&remote) {
            while self.spans.get(i).is_some_and(|s| !s.aggregators.is_empty()) {
                self.flush_aggregator(now, i, 0);
            }
        }
    }

    fn flush_aggregator(&mut self, now: Duration, span: usize, k: usize) {
        let Some(s) = self.spans.get_mut(span) else {
            return;
        };
        if k >= s.aggregators.len() {
            return;
        }
        let mut agg = s.aggregators.swap_remove(k);
        let data = match agg.single.take() {
            Some(b) => b,
            None => agg.buf.split().freeze(),
        };
        let red_len = if agg.red { data.len() } else { 0 };
        // Capacity was checked when the items were accepted; an aggregate always starts or
        // queues (the queue may exceed its limit by the number of aggregates).
        self.start_or_queue(
            now,
            span,
            PendingBlock {
                client_service_id: agg.client_service_id,
                data,
                red_len,
                tokens: agg.tokens,
            },
        );
    }

    fn span_can_accept(&self, span: usize) -> bool {
        self.spans.get(span).is_some_and(|s| {
            s.export_count < s.cfg.max_export_sessions
                || s.pending_blocks.len() < s.cfg.max_pending_blocks
        })
    }

    fn start_or_queue(&mut self, now: Duration, span: usize, block: PendingBlock) -> SendOutcome {
        let Some(s) = self.spans.get_mut(span) else {
            return SendOutcome::Queued;
        };
        if s.export_count >= s.cfg.max_export_sessions || !s.pending_blocks.is_empty() {
            s.pending_blocks.push_back(block);
            self.start_pending(now, span);
            return SendOutcome::Queued;
        }
        SendOutcome::Started(self.start_export(now, span, block))
    }

    fn start_pending(&mut self, now: Duration, span: usize) {
        loop {
            let Some(s) = self.spans.get_mut(span) else {
                return;
            };
            if s.export_count >= s.cfg.max_export_sessions {
                return;
            }
            let Some(block) = s.pending_blocks.pop_front() else {
                return;
            };
            self.start_export(now, span, block);
        }
    }

    fn alloc_session_number(&mut self, bits: u32) -> u64 {
        let mask = if bits >= 64 || bits == 0 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let local = self.cfg.local_engine_id;
        for attempt in 0..4096u32 {
            self.session_counter = self.session_counter.wrapping_add(1);
            let n = self.session_counter & mask;
            if n == 0 || self.exports.contains_key(&n) {
                continue;
            }
            let id = SessionId {
                originator: local,
                number: n,
            };
            // Prefer numbers the peer cannot confuse with a recently closed session.
            if attempt < 2048 && self.closed_exports.get(&id, Duration::MAX).is_some() {
                continue;
            }
            return n;
        }
        // Pathological configuration (tiny number space): take any free number.
        loop {
            self.session_counter = self.session_counter.wrapping_add(1);
            let n = self.session_counter & mask;
            if n != 0 && !self.exports.contains_key(&n) {
                return n;
            }
        }
    }

    fn start_export(&mut self, now: Duration, span: usize, block: PendingBlock) -> SessionId {
        let (bits, remote) = match self.spans.get(span) {
            Some(s) => (s.cfg.session_number_bits, s.cfg.remote_engine_id),
            None => (32, 0),
        };
        let number = self.alloc_session_number(bits);
        let id = SessionId {
            originator: self.cfg.local_engine_id,
            number,
        };
        let first_cp = (splitmix(&mut self.rng) % (1 << 14)) + 1;
        let len = block.data.len() as u64;
        let mut session = ExportSession::new(
            id,
            remote,
            block.client_service_id,
            block.data,
            block.red_len as u64,
            block.tokens,
            first_cp,
        );
        session.queued = true;
        self.exports.insert(number, session);
        if let Some(s) = self.spans.get_mut(span) {
            s.export_count += 1;
            s.data_sessions.push_back(number);
        }
        self.log_event(now, remote, id, LogEvent::ExportStart, len, Outcome::None);
        id
    }

    /// Cancel an export session on behalf of the client (reason USR_CNCLD).
    pub fn cancel_export(&mut self, now: Duration, session: SessionId) -> bool {
        if session.originator != self.cfg.local_engine_id
            || !self.exports.contains_key(&session.number)
        {
            return false;
        }
        self.cancel_export_with(now, session.number, CancelReason::UserCancelled);
        true
    }

    // ----------------------------------------------------------------------------------
    // Output
    // ----------------------------------------------------------------------------------

    /// Write the next segment that may leave now into `buf` (appended) and say where it
    /// goes. Returns `None` when nothing is ready: no output, link down, or pacing.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<Transmit> {
        let n = self.spans.len();
        for k in 0..n {
            let i = (self.next_span_rr + k) % n;
            let Some(s) = self.spans.get(i) else { continue };
            if !s.link_up || !s.has_output() || s.bucket.ready_at(now).is_some() {
                continue;
            }
            let start = buf.len();
            if self.produce(now, i, buf) {
                let len = buf.len() - start;
                let remote = match self.spans.get_mut(i) {
                    Some(s) => {
                        s.bucket.consume(len, now);
                        s.stats.segments_sent += 1;
                        s.cfg.remote_engine_id
                    }
                    None => 0,
                };
                self.next_span_rr = (i + 1) % n;
                return Some(Transmit {
                    remote_engine: remote,
                    len,
                });
            }
        }
        None
    }

    /// Earliest time the driver must call [`Engine::handle_timeout`] or
    /// [`Engine::poll_transmit`] again (timers, aggregation limits, pacing). A time in the
    /// past means "now".
    pub fn poll_timeout(&self) -> Option<Duration> {
        let mut best: Option<Duration> = None;
        let mut consider = |t: Duration| {
            best = Some(best.map_or(t, |b| b.min(t)));
        };
        for s in &self.spans {
            if let Some(t) = s.next_timer() {
                consider(t);
            }
            if s.link_up && s.has_output() {
                consider(s.bucket.earliest());
            }
            for a in &s.aggregators {
                consider(a.deadline);
            }
        }
        best
    }

    /// Next client event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Encode one segment of span `i` into `buf`. Returns false if the span had nothing.
    fn produce(&mut self, now: Duration, i: usize, buf: &mut Vec<u8>) -> bool {
        loop {
            let Some(s) = self.spans.get_mut(i) else {
                return false;
            };
            let Some(mut sig) = s.signals.pop_front() else {
                break;
            };
            let last_copy = sig.copies_left <= 1;
            if !last_copy {
                sig.copies_left -= 1;
                s.signals.push_front(sig);
            }
            if self.encode_signal(now, i, &sig, last_copy, buf) {
                return true;
            }
            // Signal no longer relevant (e.g. report acknowledged meanwhile): drop all copies.
            if !last_copy {
                if let Some(s) = self.spans.get_mut(i) {
                    s.signals.pop_front();
                }
            }
        }
        loop {
            let Some(s) = self.spans.get_mut(i) else {
                return false;
            };
            let mss = s.cfg.max_segment_size;
            let Some(&number) = s.data_sessions.front() else {
                return false;
            };
            let Some(ex) = self.exports.get_mut(&number) else {
                s.data_sessions.pop_front();
                continue;
            };
            let Some(plan) = ex.next_segment(mss) else {
                ex.queued = false;
                s.data_sessions.pop_front();
                continue;
            };
            if !ex.has_data_output() {
                ex.queued = false;
                s.data_sessions.pop_front();
            }
            self.emit_data(now, i, number, plan, buf);
            return true;
        }
    }

    fn emit_data(
        &mut self,
        now: Duration,
        i: usize,
        number: u64,
        plan: export::PlannedSegment,
        buf: &mut Vec<u8>,
    ) {
        let rto = self.rto(i);
        let (Some(s), Some(ex)) = (self.spans.get_mut(i), self.exports.get_mut(&number)) else {
            return;
        };
        let start = buf.len();
        segment::encode_plain_header(plan.ty, ex.id, buf);
        segment::encode_data_fields(
            ex.client_service_id,
            plan.offset,
            plan.len,
            plan.checkpoint,
            buf,
        );
        let lo = plan.offset as usize;
        let hi = lo + plan.len as usize;
        if let Some(payload) = ex.block.get(lo..hi) {
            buf.extend_from_slice(payload);
        }
        let dlen = (buf.len() - start) as u64;
        s.stats.data_segments_sent += 1;
        s.stats.data_bytes_sent += plan.len;
        if plan.retransmission {
            s.stats.data_segments_retransmitted += 1;
        }
        if let Some(cp) = plan.checkpoint {
            let key = TimerKey::Checkpoint {
                number,
                serial: cp.checkpoint_serial,
            };
            let deadline = s.arm(now, rto, key);
            if plan.checkpoint_resend {
                if let Some(c) = ex
                    .checkpoints
                    .iter_mut()
                    .find(|c| c.serial == cp.checkpoint_serial)
                {
                    c.deadline = Some(deadline);
                }
            } else {
                ex.checkpoints.push(Checkpoint {
                    serial: cp.checkpoint_serial,
                    report_serial: cp.report_serial,
                    offset: plan.offset,
                    len: plan.len,
                    ty: plan.ty,
                    retransmissions: 0,
                    deadline: Some(deadline),
                });
            }
        }
        let id = ex.id;
        let remote = ex.remote;
        let finished = ex.finished();
        if self.sink.is_some() {
            let (cps, rps) = plan
                .checkpoint
                .map_or((0, 0), |c| (c.checkpoint_serial, c.report_serial));
            self.log(SegmentRecord {
                time: now,
                dir: Direction::Tx,
                local_engine: self.cfg.local_engine_id,
                remote_engine: remote,
                session_originator: id.originator,
                session_number: id.number,
                kind: RecordKind::Segment(plan.ty),
                offset: plan.offset,
                length: plan.len,
                checkpoint_serial: cps,
                report_serial: rps,
                claims: 0,
                retransmission: plan.retransmission,
                datagram_len: dlen,
                outcome: Outcome::None,
            });
        }
        if finished {
            // Green-only block fully radiated, or the green tail of a block whose red part
            // was already acknowledged.
            self.complete_export(now, number);
        }
    }

    fn encode_signal(
        &mut self,
        now: Duration,
        i: usize,
        sig: &Signal,
        last_copy: bool,
        buf: &mut Vec<u8>,
    ) -> bool {
        let rto = self.rto(i);
        let Some(s) = self.spans.get_mut(i) else {
            return false;
        };
        let start = buf.len();
        let mut rec_fields = (0u64, 0u64, 0u64, 0u64, 0u64, Outcome::None);
        let ty = match sig.kind {
            SignalKind::Report { serial } => {
                let Some(imp) = self.imports.get_mut(&sig.session) else {
                    return false;
                };
                if imp.state != ImportState::Active {
                    return false;
                }
                let Some(rep) = imp
                    .reports
                    .iter_mut()
                    .find(|r| r.rs.report_serial == serial)
                else {
                    return false;
                };
                segment::encode_plain_header(SegmentType::Report, sig.session, buf);
                segment::encode_report_fields(&rep.rs, buf);
                if last_copy {
                    let key = TimerKey::Report {
                        session: sig.session,
                        serial,
                    };
                    rep.deadline = Some(s.arm(now, rto, key));
                }
                s.stats.reports_sent += 1;
                rec_fields = (
                    rep.rs.lower_bound,
                    rep.rs.upper_bound - rep.rs.lower_bound,
                    rep.rs.checkpoint_serial,
                    serial,
                    rep.rs.claims.len() as u64,
                    Outcome::None,
                );
                SegmentType::Report
            }
            SignalKind::ReportAck { serial } => {
                segment::encode_plain_header(SegmentType::ReportAck, sig.session, buf);
                sdnv::encode(serial, buf);
                rec_fields.3 = serial;
                SegmentType::ReportAck
            }
            SignalKind::CancelFromSender(reason) => {
                let Some(ex) = self.exports.get_mut(&sig.session.number) else {
                    return false;
                };
                let ExportState::Cancelling { deadline, .. } = &mut ex.state else {
                    return false;
                };
                segment::encode_plain_header(SegmentType::CancelFromSender, sig.session, buf);
                buf.push(reason.code());
                if last_copy {
                    *deadline = Some(s.arm(
                        now,
                        rto,
                        TimerKey::ExportCancel {
                            number: sig.session.number,
                        },
                    ));
                }
                rec_fields.5 = Outcome::Cancelled(reason);
                SegmentType::CancelFromSender
            }
            SignalKind::CancelFromReceiver(reason) => {
                let Some(imp) = self.imports.get_mut(&sig.session) else {
                    return false;
                };
                let ImportState::Cancelling { deadline, .. } = &mut imp.state else {
                    return false;
                };
                segment::encode_plain_header(SegmentType::CancelFromReceiver, sig.session, buf);
                buf.push(reason.code());
                if last_copy {
                    *deadline = Some(s.arm(
                        now,
                        rto,
                        TimerKey::ImportCancel {
                            session: sig.session,
                        },
                    ));
                }
                rec_fields.5 = Outcome::Cancelled(reason);
                SegmentType::CancelFromReceiver
            }
            SignalKind::CancelAckToSender => {
                segment::encode_plain_header(SegmentType::CancelAckToSender, sig.session, buf);
                SegmentType::CancelAckToSender
            }
            SignalKind::CancelAckToReceiver => {
                segment::encode_plain_header(SegmentType::CancelAckToReceiver, sig.session, buf);
                SegmentType::CancelAckToReceiver
            }
        };
        if self.sink.is_some() {
            let remote = s.cfg.remote_engine_id;
            let (offset, length, cps, rps, claims, outcome) = rec_fields;
            self.log(SegmentRecord {
                time: now,
                dir: Direction::Tx,
                local_engine: self.cfg.local_engine_id,
                remote_engine: remote,
                session_originator: sig.session.originator,
                session_number: sig.session.number,
                kind: RecordKind::Segment(ty),
                offset,
                length,
                checkpoint_serial: cps,
                report_serial: rps,
                claims,
                retransmission: sig.retransmission,
                datagram_len: (buf.len() - start) as u64,
                outcome,
            });
        }
        true
    }

    fn queue_signal(&mut self, span: usize, session: SessionId, kind: SignalKind, retx: bool) {
        let copies = self
            .spans
            .get(span)
            .map_or(1, |s| s.cfg.signal_replication.max(1));
        self.queue_signal_n(span, session, kind, retx, copies);
    }

    fn queue_signal_n(
        &mut self,
        span: usize,
        session: SessionId,
        kind: SignalKind,
        retx: bool,
        copies: u32,
    ) {
        if let Some(s) = self.spans.get_mut(span) {
            s.signals.push_back(Signal {
                session,
                kind,
                copies_left: copies,
                retransmission: retx,
            });
        }
    }

    fn queue_data_session(&mut self, span: usize, number: u64, front: bool) {
        if let (Some(s), Some(ex)) = (self.spans.get_mut(span), self.exports.get_mut(&number)) {
            if !ex.queued {
                ex.queued = true;
                if front {
                    s.data_sessions.push_front(number);
                } else {
                    s.data_sessions.push_back(number);
                }
            }
        }
    }

    // ----------------------------------------------------------------------------------
    // Input
    // ----------------------------------------------------------------------------------

    /// Process one received datagram. Malformed datagrams and segments from unknown
    /// engines are counted and returned as errors; the engine state is unaffected.
    pub fn handle_datagram(&mut self, now: Duration, datagram: &Bytes) -> Result<(), RecvError> {
        let seg = match Segment::decode(datagram) {
            Ok(seg) => seg,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        let local = self.cfg.local_engine_id;
        let ty = seg.segment_type;
        let to_sender = matches!(
            ty,
            SegmentType::Report | SegmentType::CancelAckToSender | SegmentType::CancelFromReceiver
        );
        // Which span does this belong to?
        let remote = if to_sender {
            if seg.session.originator != local {
                self.stats.unknown_engine += 1;
                return Err(RecvError::UnknownSpan(seg.session.originator));
            }
            match self.exports.get(&seg.session.number) {
                Some(ex) => ex.remote,
                None => match self.closed_exports.get(&seg.session, now) {
                    Some(r) => r,
                    None => {
                        self.stats.unknown_engine += 1;
                        return Err(RecvError::UnknownSpan(seg.session.originator));
                    }
                },
            }
        } else {
            seg.session.originator
        };
        let Some(&i) = self.span_index.get(&remote) else {
            self.stats.unknown_engine += 1;
            return Err(RecvError::UnknownSpan(remote));
        };
        if !to_sender && remote == local {
            self.stats.unknown_engine += 1;
            return Err(RecvError::UnknownSpan(remote));
        }
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.segments_received += 1;
        }
        if self.sink.is_some() {
            self.log_rx(now, remote, &seg, datagram.len());
        }
        let session = seg.session;
        match seg.content {
            Content::Data(d) => self.on_data(now, i, session, ty, d),
            Content::Report(rs) => self.on_report(now, i, session, rs),
            Content::ReportAck { report_serial } => self.on_report_ack(now, session, report_serial),
            Content::Cancel(reason) => {
                if ty == SegmentType::CancelFromSender {
                    self.on_cancel_from_sender(now, i, session, reason);
                } else {
                    self.on_cancel_from_receiver(now, i, session, reason);
                }
            }
            Content::CancelAck => {
                if ty == SegmentType::CancelAckToSender {
                    if let Some(ex) = self.exports.get(&session.number) {
                        if matches!(ex.state, ExportState::Cancelling { .. }) {
                            self.close_export(
                                now,
                                session.number,
                                Outcome::Cancelled(cancel_reason_of_export(ex)),
                            );
                        }
                    }
                } else if let Some(imp) = self.imports.get(&session) {
                    if let ImportState::Cancelling { reason, .. } = imp.state {
                        self.close_import(now, session, Outcome::Cancelled(reason));
                    }
                }
            }
        }
        Ok(())
    }

    fn log_rx(&mut self, now: Duration, remote: u64, seg: &Segment, dlen: usize) {
        let (offset, length, cps, rps, claims, outcome) = match &seg.content {
            Content::Data(d) => {
                let (c, r) = d
                    .checkpoint
                    .map_or((0, 0), |c| (c.checkpoint_serial, c.report_serial));
                (d.offset, d.data.len() as u64, c, r, 0, Outcome::None)
            }
            Content::Report(rs) => (
                rs.lower_bound,
                rs.upper_bound - rs.lower_bound,
                rs.checkpoint_serial,
                rs.report_serial,
                rs.claims.len() as u64,
                Outcome::None,
            ),
            Content::ReportAck { report_serial } => (0, 0, 0, *report_serial, 0, Outcome::None),
            Content::Cancel(r) => (0, 0, 0, 0, 0, Outcome::Cancelled(*r)),
            Content::CancelAck => (0, 0, 0, 0, 0, Outcome::None),
        };
        self.log(SegmentRecord {
            time: now,
            dir: Direction::Rx,
            local_engine: self.cfg.local_engine_id,
            remote_engine: remote,
            session_originator: seg.session.originator,
            session_number: seg.session.number,
            kind: RecordKind::Segment(seg.segment_type),
            offset,
            length,
            checkpoint_serial: cps,
            report_serial: rps,
            claims,
            retransmission: false,
            datagram_len: dlen as u64,
            outcome,
        });
    }

    fn on_data(&mut self, now: Duration, i: usize, id: SessionId, ty: SegmentType, d: DataSegment) {
        let Some(s) = self.spans.get_mut(i) else {
            return;
        };
        let clock = s.clock(now);
        if !self.imports.contains_key(&id) {
            if self.closed_imports.get(&id, now).is_some() {
                s.stats.stale_segments += 1;
                return;
            }
            if s.import_count >= s.cfg.max_import_sessions {
                s.stats.imports_refused += 1;
                return;
            }
            s.import_count += 1;
            let first_rs = (splitmix(&mut self.rng) % (1 << 14)) + 1;
            self.imports
                .insert(id, ImportSession::new(d.client_service_id, first_rs, clock));
            let timeout = s.cfg.import_inactivity_timeout;
            s.arm(now, timeout, TimerKey::ImportInactivity { session: id });
            let remote = s.cfg.remote_engine_id;
            self.log_event(now, remote, id, LogEvent::ImportStart, 0, Outcome::None);
        }
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        imp.last_rx = clock;
        if imp.state != ImportState::Active {
            return;
        }
        if ty.is_red() {
            self.on_red_data(now, i, id, ty, d);
        } else {
            self.on_green_data(now, i, id, ty, d);
        }
        self.maybe_close_import(now, id);
    }

    fn on_red_data(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        ty: SegmentType,
        d: DataSegment,
    ) {
        let (max_per_session, remote) = match self.spans.get(i) {
            Some(s) => (s.cfg.max_red_bytes_per_session, s.cfg.remote_engine_id),
            None => return,
        };
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        let start = d.offset;
        let end = d.offset + d.data.len() as u64; // checked by the decoder
        let miscolored = imp.green_low.is_some_and(|g| end > g)
            || imp
                .red_len
                .is_some_and(|r| end > r || (ty.is_eorp() && end != r))
            || (ty.is_eorp() && imp.received.max_end() > end);
        if miscolored {
            self.cancel_import_with(now, i, id, CancelReason::Miscolored);
            return;
        }
        if end > max_per_session {
            self.cancel_import_with(now, i, id, CancelReason::SystemCancelled);
            return;
        }
        if ty.is_eorp() {
            imp.red_len = Some(end);
        }
        if ty.is_eob() {
            imp.eob = true;
        }
        if !imp.delivered {
            let need = end as usize;
            if need > imp.buf.capacity() {
                let target = match imp.red_len {
                    Some(r) => r as usize,
                    None => need
                        .max(imp.buf.capacity().saturating_mul(2))
                        .min(max_per_session as usize),
                }
                .max(need);
                let new_total = self.total_import_bytes - imp.charged + target as u64;
                if new_total > self.cfg.max_total_import_bytes {
                    self.cancel_import_with(now, i, id, CancelReason::SystemCancelled);
                    return;
                }
                imp.buf.reserve_exact(target - imp.buf.len());
                self.total_import_bytes =
                    self.total_import_bytes - imp.charged + imp.buf.capacity() as u64;
                imp.charged = imp.buf.capacity() as u64;
            }
            if start as usize == imp.buf.len() {
                // In-order arrival (the common case): append, no zero-fill.
                imp.buf.extend_from_slice(&d.data);
            } else {
                if need > imp.buf.len() {
                    imp.buf.resize(need, 0);
                }
                if let Some(dst) = imp.buf.get_mut(start as usize..need) {
                    dst.copy_from_slice(&d.data);
                }
            }
            imp.received.insert(start..end);
            if imp.red_ready() {
                let red_len = imp.red_len.unwrap_or(end) as usize;
                let mut data = std::mem::take(&mut imp.buf);
                data.truncate(red_len);
                imp.delivered = true;
                self.total_import_bytes -= imp.charged;
                imp.charged = 0;
                let csid = imp.client_service_id;
                self.events.push_back(Event::BlockReceived {
                    remote,
                    session: id,
                    client_service_id: csid,
                    data: Bytes::from(data),
                });
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.blocks_received += 1;
                }
                self.log_event(
                    now,
                    remote,
                    id,
                    LogEvent::BlockDelivered,
                    red_len as u64,
                    Outcome::None,
                );
            }
        }
        if let Some(cp) = d.checkpoint {
            self.on_checkpoint(now, i, id, cp, end);
        }
    }

    fn on_green_data(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        ty: SegmentType,
        d: DataSegment,
    ) {
        let remote = self.spans.get(i).map_or(0, |s| s.cfg.remote_engine_id);
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        let miscolored =
            imp.red_len.is_some_and(|r| d.offset < r) || imp.received.max_end() > d.offset;
        if miscolored {
            self.cancel_import_with(now, i, id, CancelReason::Miscolored);
            return;
        }
        imp.green_low = Some(imp.green_low.map_or(d.offset, |g| g.min(d.offset)));
        let eob = ty.is_eob();
        if eob {
            imp.eob = true;
        }
        self.events.push_back(Event::GreenSegment {
            remote,
            session: id,
            client_service_id: d.client_service_id,
            offset: d.offset,
            data: d.data,
            end_of_block: eob,
        });
    }

    fn on_checkpoint(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        cp: CheckpointInfo,
        cp_end: u64,
    ) {
        let (max_claims, max_cycles) = match self.spans.get(i) {
            Some(s) => (
                s.cfg.max_claims_per_report.max(1),
                s.cfg.max_retransmission_cycles,
            ),
            None => return,
        };
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        if imp.answered_checkpoints.contains(&cp.checkpoint_serial) {
            // A retransmitted checkpoint: our report was lost (or is late). Resend the
            // still-unacknowledged reports for it; a duplicate of an acknowledged one is
            // ignored.
            // Only reports already sent (timer armed) are re-queued; a report without a
            // timer is still in the signal queue. Clearing the timer makes the resend
            // re-arm it, so a report timer expiring at the same instant does not send a
            // second copy.
            let mut serials = Vec::new();
            for r in imp.reports.iter_mut() {
                if r.rs.checkpoint_serial == cp.checkpoint_serial && r.deadline.is_some() {
                    r.deadline = None;
                    serials.push(r.rs.report_serial);
                }
            }
            for serial in serials {
                self.queue_signal(i, id, SignalKind::Report { serial }, true);
            }
            return;
        }
        if imp.answered_checkpoints.len() as u64 > u64::from(max_cycles) {
            self.cancel_import_with(now, i, id, CancelReason::RetransmissionCyclesExceeded);
            return;
        }
        imp.answered_checkpoints.push(cp.checkpoint_serial);
        let upper = match (imp.delivered, imp.red_len) {
            (true, Some(r)) => r,
            _ => cp_end,
        };
        let full = imp.delivered;
        // Split the claims in [0, upper) into reports of at most `max_claims` claims with
        // contiguous scopes.
        let mut new_serials = Vec::new();
        let ranges = imp.received.ranges();
        let in_scope: Vec<std::ops::Range<u64>> = ranges
            .iter()
            .filter(|r| r.start < upper)
            .map(|r| r.start..r.end.min(upper))
            .collect();
        let chunks = in_scope.chunks(max_claims);
        let n_chunks = chunks.len();
        let mut lower = 0u64;
        for (k, chunk) in in_scope.chunks(max_claims).enumerate() {
            let last = k + 1 == n_chunks;
            let chunk_end = chunk.last().map_or(lower, |r| r.end);
            let ub = if last { upper } else { chunk_end };
            let claims = chunk
                .iter()
                .map(|r| ReceptionClaim {
                    offset: r.start - lower,
                    length: r.end - r.start,
                })
                .collect();
            let serial = imp.next_report_serial;
            imp.next_report_serial = imp.next_report_serial.wrapping_add(1).max(1);
            imp.reports.push(IssuedReport {
                rs: ReportSegment {
                    report_serial: serial,
                    checkpoint_serial: cp.checkpoint_serial,
                    upper_bound: ub,
                    lower_bound: lower,
                    claims,
                },
                retransmissions: 0,
                deadline: None,
                full: full && last && k == 0,
            });
            new_serials.push(serial);
            lower = ub;
        }
        for serial in new_serials {
            self.queue_signal(i, id, SignalKind::Report { serial }, false);
        }
    }

    fn on_report_ack(&mut self, now: Duration, id: SessionId, serial: u64) {
        let Some(imp) = self.imports.get_mut(&id) else {
            if let Some(&i) = self.span_index.get(&id.originator) {
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.stale_segments += 1;
                }
            }
            return;
        };
        if let Some(pos) = imp
            .reports
            .iter()
            .position(|r| r.rs.report_serial == serial)
        {
            let rep = imp.reports.swap_remove(pos);
            if rep.full {
                imp.full_report_acked = true;
            }
        }
        self.maybe_close_import(now, id);
    }

    fn on_report(&mut self, now: Duration, i: usize, id: SessionId, rs: ReportSegment) {
        let max_cycles = self
            .spans
            .get(i)
            .map_or(0, |s| s.cfg.max_retransmission_cycles);
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.reports_received += 1;
        }
        let Some(ex) = self.exports.get_mut(&id.number) else {
            // Closed session: the receiver missed our RA (or this is a replicated copy).
            // Acknowledge again, with a single copy.
            self.queue_signal_n(
                i,
                id,
                SignalKind::ReportAck {
                    serial: rs.report_serial,
                },
                false,
                1,
            );
            return;
        };
        if ex.state != ExportState::Active {
            return;
        }
        if ex.handled_reports.contains(&rs.report_serial) {
            self.queue_signal_n(
                i,
                id,
                SignalKind::ReportAck {
                    serial: rs.report_serial,
                },
                false,
                1,
            );
            return;
        }
        self.queue_signal(
            i,
            id,
            SignalKind::ReportAck {
                serial: rs.report_serial,
            },
            false,
        );
        let Some(ex) = self.exports.get_mut(&id.number) else {
            return;
        };
        // Bounded: a peer sending endless distinct serials cannot grow it.
        if ex.handled_reports.len() >= MAX_HANDLED_REPORTS {
            ex.handled_reports.remove(0);
        }
        ex.handled_reports.push(rs.report_serial);
        if rs.checkpoint_serial != 0 {
            ex.checkpoints.retain(|c| c.serial != rs.checkpoint_serial);
        }
        let red_len = ex.red_len;
        for c in &rs.claims {
            let s = rs.lower_bound.saturating_add(c.offset).min(red_len);
            let e = s.saturating_add(c.length).min(red_len);
            ex.acked.insert(s..e);
        }
        if ex.red_complete() {
            ex.checkpoints.clear();
            ex.drop_red_plan();
            if ex.finished() {
                self.complete_export(now, id.number);
            }
            return;
        }
        let mut ranges = VecDeque::new();
        let upper = rs.upper_bound.min(red_len);
        let lower = rs.lower_bound.min(upper);
        ex.acked.for_each_gap(lower..upper, |r| ranges.push_back(r));
        if ranges.is_empty() {
            return;
        }
        ex.cycles += 1;
        if ex.cycles > max_cycles {
            self.cancel_export_with(now, id.number, CancelReason::RetransmissionCyclesExceeded);
            return;
        }
        ex.batches.push_back(Batch {
            ranges,
            report_serial: rs.report_serial,
            retransmission: true,
        });
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.retransmission_cycles += 1;
        }
        self.queue_data_session(i, id.number, false);
    }

    fn on_cancel_from_sender(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        reason: CancelReason,
    ) {
        self.queue_signal(i, id, SignalKind::CancelAckToSender, false);
        let Some(imp) = self.imports.get(&id) else {
            return;
        };
        let remote = self.spans.get(i).map_or(0, |s| s.cfg.remote_engine_id);
        if imp.state == ImportState::Active {
            self.events.push_back(Event::ImportCancelled {
                remote,
                session: id,
                reason,
                by_sender: true,
            });
            if let Some(s) = self.spans.get_mut(i) {
                s.stats.imports_cancelled += 1;
            }
        }
        self.close_import(now, id, Outcome::Cancelled(reason));
    }

    fn on_cancel_from_receiver(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        reason: CancelReason,
    ) {
        self.queue_signal(i, id, SignalKind::CancelAckToReceiver, false);
        let Some(ex) = self.exports.get_mut(&id.number) else {
            return;
        };
        if ex.state == ExportState::Active {
            let tokens = std::mem::take(&mut ex.tokens);
            let remote = ex.remote;
            self.events.push_back(Event::ExportCancelled {
                remote,
                session: id,
                reason,
                by_receiver: true,
                tokens,
            });
            if let Some(s) = self.spans.get_mut(i) {
                s.stats.exports_cancelled += 1;
            }
        }
        self.close_export(now, id.number, Outcome::Cancelled(reason));
    }

    // ----------------------------------------------------------------------------------
    // Timers
    // ----------------------------------------------------------------------------------

    /// Process every timer due at `now` (checkpoint, report and cancel retransmission,
    /// import inactivity, aggregation time limits).
    pub fn handle_timeout(&mut self, now: Duration) {
        for i in 0..self.spans.len() {
            while let Some((deadline, key)) = self.spans.get_mut(i).and_then(|s| s.pop_due(now)) {
                self.fire(now, i, deadline, key);
            }
            while let Some(k) = self
                .spans
                .get(i)
                .and_then(|s| s.aggregators.iter().position(|a| a.deadline <= now))
            {
                self.flush_aggregator(now, i, k);
            }
        }
    }

    fn fire(&mut self, now: Duration, i: usize, deadline: Duration, key: TimerKey) {
        let Some(s) = self.spans.get(i) else {
            return;
        };
        let cfg = s.cfg.clone();
        let remote = cfg.remote_engine_id;
        match key {
            TimerKey::Checkpoint { number, serial } => {
                let Some(ex) = self.exports.get_mut(&number) else {
                    return;
                };
                if ex.state != ExportState::Active {
                    return;
                }
                let Some(cp) = ex
                    .checkpoints
                    .iter_mut()
                    .find(|c| c.serial == serial && c.deadline == Some(deadline))
                else {
                    return;
                };
                cp.deadline = None;
                let id = ex.id;
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.checkpoint_timeouts += 1;
                }
                self.log_event(
                    now,
                    remote,
                    id,
                    LogEvent::CheckpointTimeout,
                    serial,
                    Outcome::None,
                );
                let Some(ex) = self.exports.get_mut(&number) else {
                    return;
                };
                let Some(cp) = ex.checkpoints.iter_mut().find(|c| c.serial == serial) else {
                    return;
                };
                if cp.retransmissions >= cfg.max_checkpoint_retransmissions {
                    self.cancel_export_with(now, number, CancelReason::RetransmissionLimitExceeded);
                } else {
                    cp.retransmissions += 1;
                    ex.cp_resend.push_back(serial);
                    self.queue_data_session(i, number, true);
                }
            }
            TimerKey::Report { session, serial } => {
                let Some(imp) = self.imports.get_mut(&session) else {
                    return;
                };
                if imp.state != ImportState::Active {
                    return;
                }
                let Some(rep) = imp
                    .reports
                    .iter_mut()
                    .find(|r| r.rs.report_serial == serial && r.deadline == Some(deadline))
                else {
                    return;
                };
                rep.deadline = None;
                let exceeded = rep.retransmissions >= cfg.max_report_retransmissions;
                if !exceeded {
                    rep.retransmissions += 1;
                }
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.report_timeouts += 1;
                }
                self.log_event(
                    now,
                    remote,
                    session,
                    LogEvent::ReportTimeout,
                    serial,
                    Outcome::None,
                );
                if exceeded {
                    self.cancel_import_with(
                        now,
                        i,
                        session,
                        CancelReason::RetransmissionLimitExceeded,
                    );
                } else {
                    self.queue_signal(i, session, SignalKind::Report { serial }, true);
                }
            }
            TimerKey::ExportCancel { number } => {
                let Some(ex) = self.exports.get_mut(&number) else {
                    return;
                };
                let id = ex.id;
                let ExportState::Cancelling {
                    reason,
                    retransmissions,
                    deadline: d,
                } = &mut ex.state
                else {
                    return;
                };
                if *d != Some(deadline) {
                    return;
                }
                *d = None;
                let reason = *reason;
                let exceeded = *retransmissions >= cfg.max_cancel_retransmissions;
                *retransmissions += 1;
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.cancel_timeouts += 1;
                }
                self.log_event(
                    now,
                    remote,
                    id,
                    LogEvent::CancelTimeout,
                    0,
                    Outcome::Cancelled(reason),
                );
                if exceeded {
                    self.close_export(now, number, Outcome::Cancelled(reason));
                } else {
                    self.queue_signal(i, id, SignalKind::CancelFromSender(reason), true);
                }
            }
            TimerKey::ImportCancel { session } => {
                let Some(imp) = self.imports.get_mut(&session) else {
                    return;
                };
                let ImportState::Cancelling {
                    reason,
                    retransmissions,
                    deadline: d,
                } = &mut imp.state
                else {
                    return;
                };
                if *d != Some(deadline) {
                    return;
                }
                *d = None;
                let reason = *reason;
                let exceeded = *retransmissions >= cfg.max_cancel_retransmissions;
                *retransmissions += 1;
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.cancel_timeouts += 1;
                }
                self.log_event(
                    now,
                    remote,
                    session,
                    LogEvent::CancelTimeout,
                    0,
                    Outcome::Cancelled(reason),
                );
                if exceeded {
                    self.close_import(now, session, Outcome::Cancelled(reason));
                } else {
                    self.queue_signal(i, session, SignalKind::CancelFromReceiver(reason), true);
                }
            }
            TimerKey::ImportInactivity { session } => {
                let Some(imp) = self.imports.get(&session) else {
                    return;
                };
                let Some(s) = self.spans.get_mut(i) else {
                    return;
                };
                let due = imp.last_rx + cfg.import_inactivity_timeout;
                if due > deadline {
                    // Activity since the timer was armed: re-arm for the remainder.
                    let clock = s.clock(now);
                    s.arm(
                        now,
                        due.saturating_sub(clock),
                        TimerKey::ImportInactivity { session },
                    );
                    return;
                }
                let red_pending = imp.state == ImportState::Active
                    && !imp.delivered
                    && (imp.red_len.is_some() || !imp.received.is_empty());
                if red_pending {
                    self.cancel_import_with(now, i, session, CancelReason::SystemCancelled);
                    // Keep a guard so the cancelling session cannot linger either.
                    if let Some(s) = self.spans.get_mut(i) {
                        s.arm(
                            now,
                            cfg.import_inactivity_timeout,
                            TimerKey::ImportInactivity { session },
                        );
                    }
                    if let Some(imp) = self.imports.get_mut(&session) {
                        imp.last_rx = self.spans.get(i).map_or(imp.last_rx, |s| s.clock(now));
                    }
                } else {
                    let outcome = match imp.state {
                        ImportState::Cancelling { reason, .. } => Outcome::Cancelled(reason),
                        ImportState::Active => Outcome::Ok,
                    };
                    self.close_import(now, session, outcome);
                }
            }
        }
    }

    // ----------------------------------------------------------------------------------
    // Session endings
    // ----------------------------------------------------------------------------------

    fn complete_export(&mut self, now: Duration, number: u64) {
        let Some(ex) = self.exports.get_mut(&number) else {
            return;
        };
        let tokens = std::mem::take(&mut ex.tokens);
        let (remote, id) = (ex.remote, ex.id);
        self.events.push_back(Event::ExportCompleted {
            remote,
            session: id,
            tokens,
        });
        if let Some(s) = self.span_mut(remote) {
            s.stats.exports_completed += 1;
        }
        self.close_export(now, number, Outcome::Ok);
    }

    fn cancel_export_with(&mut self, _now: Duration, number: u64, reason: CancelReason) {
        let Some(ex) = self.exports.get_mut(&number) else {
            return;
        };
        if ex.state != ExportState::Active {
            return;
        }
        ex.state = ExportState::Cancelling {
            reason,
            retransmissions: 0,
            deadline: None,
        };
        ex.batches.clear();
        ex.cp_resend.clear();
        ex.checkpoints.clear();
        let tokens = std::mem::take(&mut ex.tokens);
        let (remote, id) = (ex.remote, ex.id);
        self.events.push_back(Event::ExportCancelled {
            remote,
            session: id,
            reason,
            by_receiver: false,
            tokens,
        });
        let Some(&i) = self.span_index.get(&remote) else {
            return;
        };
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.exports_cancelled += 1;
        }
        self.queue_signal(i, id, SignalKind::CancelFromSender(reason), false);
    }

    fn cancel_import_with(
        &mut self,
        _now: Duration,
        i: usize,
        id: SessionId,
        reason: CancelReason,
    ) {
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        if imp.state != ImportState::Active {
            return;
        }
        imp.state = ImportState::Cancelling {
            reason,
            retransmissions: 0,
            deadline: None,
        };
        imp.buf = Vec::new();
        self.total_import_bytes -= imp.charged;
        imp.charged = 0;
        imp.reports.clear();
        let remote = self.spans.get(i).map_or(0, |s| s.cfg.remote_engine_id);
        self.events.push_back(Event::ImportCancelled {
            remote,
            session: id,
            reason,
            by_sender: false,
        });
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.imports_cancelled += 1;
        }
        self.queue_signal(i, id, SignalKind::CancelFromReceiver(reason), false);
    }

    fn close_export(&mut self, now: Duration, number: u64, outcome: Outcome) {
        let Some(ex) = self.exports.remove(&number) else {
            return;
        };
        self.closed_exports.insert(ex.id, ex.remote, now);
        let len = ex.block.len() as u64;
        self.log_event(now, ex.remote, ex.id, LogEvent::ExportEnd, len, outcome);
        if let Some(&i) = self.span_index.get(&ex.remote) {
            if let Some(s) = self.spans.get_mut(i) {
                s.export_count = s.export_count.saturating_sub(1);
            }
            self.start_pending(now, i);
        }
    }

    fn maybe_close_import(&mut self, now: Duration, id: SessionId) {
        if self.imports.get(&id).is_some_and(|imp| imp.closable()) {
            self.close_import(now, id, Outcome::Ok);
        }
    }

    fn close_import(&mut self, now: Duration, id: SessionId, outcome: Outcome) {
        let Some(imp) = self.imports.remove(&id) else {
            return;
        };
        self.total_import_bytes -= imp.charged;
        self.closed_imports.insert(id, id.originator, now);
        if let Some(s) = self.span_mut(id.originator) {
            s.import_count = s.import_count.saturating_sub(1);
        }
        let len = imp.red_len.unwrap_or(0);
        self.log_event(now, id.originator, id, LogEvent::ImportEnd, len, outcome);
    }

    // ----------------------------------------------------------------------------------
    // Logging
    // ----------------------------------------------------------------------------------

    fn log(&mut self, rec: SegmentRecord) {
        if let Some(sink) = self.sink.as_mut() {
            sink.record(&rec);
        }
    }

    fn log_event(
        &mut self,
        now: Duration,
        remote: u64,
        id: SessionId,
        ev: LogEvent,
        value: u64,
        outcome: Outcome,
    ) {
        if self.sink.is_none() {
            return;
        }
        let (length, cps) = match ev {
            LogEvent::CheckpointTimeout => (0, value),
            LogEvent::ReportTimeout => (0, 0),
            _ => (value, 0),
        };
        let rps = if ev == LogEvent::ReportTimeout {
            value
        } else {
            0
        };
        self.log(SegmentRecord {
            time: now,
            dir: Direction::Ev,
            local_engine: self.cfg.local_engine_id,
            remote_engine: remote,
            session_originator: id.originator,
            session_number: id.number,
            kind: RecordKind::Event(ev),
            offset: 0,
            length,
            checkpoint_serial: cps,
            report_serial: rps,
            claims: 0,
            retransmission: false,
            datagram_len: 0,
            outcome,
        });
    }
}

fn cancel_reason_of_export(ex: &ExportSession) -> CancelReason {
    match ex.state {
        ExportState::Cancelling { reason, .. } => reason,
        ExportState::Active => CancelReason::UserCancelled,
    }
}
