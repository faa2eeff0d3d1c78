//! The sans-IO LTP engine: sessions, timers, pacing and the client interface.
//!
//! The engine never touches a socket or a clock. The driver feeds it datagrams
//! ([`Engine::handle_datagram`]), timer expirations ([`Engine::handle_timeout`]) and blocks
//! ([`Engine::send_block`], [`Engine::enqueue_item`]), and drains segments
//! ([`Engine::poll_transmit`], or [`Engine::poll_transmit_vectored`] without copying block
//! data), the next wake-up time ([`Engine::poll_timeout`]) and client
//! events ([`Engine::poll_event`]). `now` is a [`Duration`] since an arbitrary monotonic
//! epoch chosen by the driver (real or virtual time).
//!
//! Transmission policy: per span, signal segments (RS, RA, CS, CR and their acks) go first,
//! then data, served *session by session* in the order sessions started (as ION does): a
//! block's segments leave back to back, which minimises each session's duration. A session
//! with a retransmission batch or a timed-out checkpoint moves to the front of the queue.
//! Spans are served round-robin. Every segment passes the span's token
//! bucket, so `poll_transmit` returns `None` while the rate does not allow the next segment
//! and `poll_timeout` tells when it will.

mod adaptive;
mod admission;
mod authn;
mod close;
mod closed;
mod export;
mod fasthash;
mod import;
mod input;
mod logging;
mod output;
mod pause;
mod red_data;
mod send;
mod span;
mod timers;

use std::collections::VecDeque;
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
use crate::stats::{EngineStats, SpanState, SpanStats};

use closed::ClosedSessions;
use export::{Batch, Checkpoint, ExportSession, ExportState};
use fasthash::FoldMap;
use import::{Answer, ImportSession, ImportState, IssuedReport};
use span::{Aggregator, PendingBlock, Signal, SignalKind, Span, TimerKey};

/// Smallest usable `max_segment_size`: room for a worst-case data segment header (64-bit
/// ids, offsets and serials) plus payload.
pub const MIN_SEGMENT_SIZE: usize = 64;

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

/// One segment produced by [`Engine::poll_transmit_vectored`]: its encoded header (the last
/// `header_len` bytes appended to the caller's buffer) followed by `payload`, a zero-copy slice
/// of the block (empty for signal segments). A driver sends `header ++ payload` as one datagram
/// (two iovecs), so block data is never copied on the way to the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectoredTransmit {
    /// Destination engine id (the driver maps it to an address).
    pub remote_engine: u64,
    /// Bytes of the segment written to the end of the caller's buffer: the whole segment for
    /// a signal, everything before the block data for a data segment.
    pub header_len: usize,
    /// Block data that follows the header on the wire (empty for signal segments).
    pub payload: Bytes,
}

impl VectoredTransmit {
    /// Datagram length: header plus payload.
    pub fn len(&self) -> usize {
        self.header_len + self.payload.len()
    }

    /// Whether the datagram is empty (never the case for a real segment).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
    span_index: FoldMap<u64, usize>,
    exports: FoldMap<u64, ExportSession>,
    imports: FoldMap<SessionId, ImportSession>,
    closed_imports: ClosedSessions,
    closed_exports: ClosedSessions,
    events: VecDeque<Event>,
    sink: Option<Box<dyn SegmentSink + Send>>,
    stats: EngineStats,
    rng: u64,
    session_counter: u64,
    total_import_bytes: u64,
    next_span_rr: usize,
    /// False while the client has paused its ingress ([`Engine::set_accepting_imports`]).
    accepting_imports: bool,
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
            span_index: FoldMap::default(),
            exports: FoldMap::default(),
            imports: FoldMap::default(),
            events: VecDeque::new(),
            sink: None,
            stats: EngineStats::default(),
            rng,
            session_counter,
            total_import_bytes: 0,
            next_span_rr: 0,
            accepting_imports: true,
        }
    }

    /// This engine's id.
    pub fn local_engine_id(&self) -> u64 {
        self.cfg.local_engine_id
    }

    /// Add (or replace the configuration of) the span to `cfg.remote_engine_id`.
    /// A `max_segment_size` below [`MIN_SEGMENT_SIZE`] is raised to it.
    /// Replacing keeps sessions, queues and counters; only the settings change (pacing starts
    /// afresh, adaptive pacing from its initial rate).
    pub fn add_span(&mut self, mut cfg: SpanConfig) {
        cfg.max_segment_size = cfg.max_segment_size.max(MIN_SEGMENT_SIZE);
        if let Some(&i) = self.span_index.get(&cfg.remote_engine_id) {
            if let Some(span) = self.spans.get_mut(i) {
                (span.bucket, span.rate_ctl) = Span::pacing(&cfg);
                span.pacer_idle = true;
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

    /// Change a span's transmission rate (0 = unlimited), e.g. at a contact boundary. With
    /// adaptive pacing this is the ceiling of the adaptive rate (0 = none) and the span paces
    /// at the adaptive rate, lowered to the new ceiling if above it.
    pub fn set_span_rate(&mut self, now: Duration, remote: u64, rate_bps: u64) -> bool {
        self.span_mut(remote).is_some_and(|s| {
            s.cfg.rate_bps = rate_bps;
            let rate = match s.rate_ctl.as_mut() {
                Some(c) => {
                    c.set_ceiling(rate_bps);
                    c.rate()
                }
                None => rate_bps,
            };
            s.bucket.set_rate(rate, now);
            true
        })
    }

    /// The rate the span to `remote` paces at now in bit/s (0 = unlimited): its configured
    /// rate, or with adaptive pacing the rate learnt so far.
    pub fn span_pacing_rate(&self, remote: u64) -> Option<u64> {
        self.span_index
            .get(&remote)
            .and_then(|&i| self.spans.get(i))
            .map(|s| s.bucket.rate())
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

    /// The live state of the span to `remote` (link, open sessions, queue, pacing rate).
    pub fn span_state(&self, remote: u64) -> Option<SpanState> {
        let s = self
            .span_index
            .get(&remote)
            .and_then(|&i| self.spans.get(i))?;
        Some(SpanState {
            link_up: s.link_up,
            export_sessions: s.export_count,
            import_sessions: s.import_count,
            queued_blocks: s.pending_blocks.len(),
            pacing_rate_bps: self.span_pacing_rate(remote).unwrap_or(0),
            pacing_state: s
                .rate_ctl
                .as_ref()
                .map_or(crate::pacing::PacingState::Fixed, |c| c.state()),
        })
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

    /// Pauses (`false`) or resumes (`true`) the acceptance of new import sessions, for a
    /// client that cannot take more blocks now (its applications fall behind). While paused,
    /// data opening a new session is dropped and counted in `imports_refused`, exactly as when
    /// the import budget is full: the sender's checkpoint timer retries it, so back-pressure
    /// reaches the sender without cancelling anything. Sessions already open go on.
    pub fn set_accepting_imports(&mut self, accept: bool) {
        self.accepting_imports = accept;
    }

    /// Whether new import sessions are accepted ([`Engine::set_accepting_imports`]).
    pub fn accepting_imports(&self) -> bool {
        self.accepting_imports
    }

    /// Bytes currently charged against `EngineConfig::max_total_import_bytes`: red data held
    /// by reassembly buffers plus delivered blocks still awaiting `confirm_block`.
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

    /// Cancels the import session `session` (`CR` with `reason` to its sender, which reports
    /// its export cancelled so the client re-forwards the data), for a layer that knows the
    /// block cannot complete: the FEC layer when an HSLTP matrix fails to decode. A session
    /// that is not open yet (its segments never reached the engine) is recorded as cancelled
    /// so the sender learns of it all the same; one that closed or is already cancelling is
    /// left alone. Returns false for an unknown span or such a session.
    pub fn cancel_import(
        &mut self,
        now: Duration,
        session: SessionId,
        reason: CancelReason,
    ) -> bool {
        let Some(&i) = self.span_index.get(&session.originator) else {
            return false;
        };
        if session.originator == self.cfg.local_engine_id {
            return false;
        }
        if !self.imports.contains_key(&session) {
            if self.closed_imports.get(&session, now).is_some() {
                return false;
            }
            let Some(s) = self.spans.get_mut(i) else {
                return false;
            };
            let clock = s.clock(now);
            s.import_count += 1;
            let timeout = s.cfg.effective_inactivity_timeout();
            s.arm(now, timeout, TimerKey::ImportInactivity { session });
            let remote = s.cfg.remote_engine_id;
            self.imports
                .insert(session, ImportSession::new(0, 1, clock, false));
            self.log_event(
                now,
                remote,
                session,
                LogEvent::ImportStart,
                0,
                Outcome::None,
            );
        }
        if self
            .imports
            .get(&session)
            .is_none_or(|imp| imp.state != ImportState::Active)
        {
            return false;
        }
        self.cancel_import_with(now, i, session, reason);
        true
    }

    /// Like [`Engine::poll_timeout`] but without the pacing of queued output: the next timer
    /// or aggregation deadline only. For a driver that holds the engine's output back (the
    /// FEC layer while its own queue is full) and must not wake up for it.
    pub fn poll_timer(&self) -> Option<Duration> {
        let mut best: Option<Duration> = None;
        for s in &self.spans {
            let t = s
                .next_timer()
                .into_iter()
                .chain(s.aggregators.iter().map(|a| a.deadline))
                .min();
            if let Some(t) = t {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        }
        best
    }

    /// Writes a record from a layer beside the engine (the FEC layer's `FEC_*` rows) to the
    /// segment log, so one file holds both in time order. A no-op without a sink.
    pub fn log_record(&mut self, rec: &SegmentRecord) {
        self.log(*rec);
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
}

fn cancel_reason_of_export(ex: &ExportSession) -> CancelReason {
    match ex.state {
        ExportState::Cancelling { reason, .. } => reason,
        ExportState::Active => CancelReason::UserCancelled,
    }
}
