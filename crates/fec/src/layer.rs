//! [`Fec`]: the sans-IO FEC layer of one node, for all its FEC spans.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use ltp::{Direction, Outcome, RecordKind, SegmentRecord, SessionId};
use thiserror::Error;

use crate::codec::Codec;
use crate::config::{symbol_bytes, ConfigError, FecConfig, Mode};
use crate::header::{HeaderError, SymbolHeader, ROW_PREFIX};
use crate::rx::{Decided, Refused, RxSpan, Sinks};
use crate::stats::FecStats;
use crate::tx::{Closed, TxContext, TxSpan};

/// Why a received datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FecError {
    /// Not a valid FEC symbol.
    #[error(transparent)]
    Header(#[from] HeaderError),
    /// From an engine without a FEC span here.
    #[error("FEC symbol from engine {0}, which has no FEC span")]
    UnknownSpan(u64),
    /// Its matrix (K × T) exceeds half the span's `max_rx_bytes`.
    #[error("matrix too large for the receive buffer")]
    TooLarge,
    /// K, N, T or the mode flag contradict earlier symbols of the same matrix.
    #[error("symbol inconsistent with its matrix")]
    Inconsistent,
}

/// Something the driver must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FecEvent {
    /// An HSLTP matrix failed to decode: the import session of the block it carried cannot
    /// complete and must be cancelled (`ltp::Engine::cancel_import`), so the sender's bundle
    /// layer re-forwards its bundles.
    SessionLost {
        /// Remote engine (the block's sender).
        remote: u64,
        /// The import session.
        session: SessionId,
    },
}

/// One FEC datagram for the link: the header (the last `header_len` bytes appended to the
/// caller's buffer) followed by `payload` (an LTP segment or a repair row, zero-copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FecTransmit {
    /// Destination engine.
    pub remote: u64,
    /// Header bytes at the end of the caller's buffer.
    pub header_len: usize,
    /// What follows the header on the wire.
    pub payload: Bytes,
}

#[derive(Debug)]
struct Span {
    cfg: FecConfig,
    t: usize,
    tx: TxSpan,
    rx: RxSpan,
    stats: FecStats,
    /// Redundancy feedback: the failure signals already acted upon (session, report serial;
    /// `u64::MAX` for a cancel), so replicated copies raise the redundancy once.
    feedback_seen: VecDeque<(SessionId, u64)>,
}

/// Failure signals remembered per span to ignore their replicated copies.
const FEEDBACK_SEEN: usize = 64;

impl Span {
    /// Symbols of a full matrix: the queue limit behind [`Fec::accepting`].
    fn full_matrix(&self) -> usize {
        let k = usize::from(self.cfg.max_k);
        k + self.cfg.repair_for(k)
    }
}

/// The FEC layer: matrices being filled and sent per span, matrices being received and
/// decoded per span, pacing, timers, counters and log rows.
#[derive(Debug)]
pub struct Fec {
    local: u64,
    seed: u64,
    spans: Vec<Span>,
    codec: Codec,
    up: VecDeque<(u64, Bytes)>,
    lost: VecDeque<(u64, SessionId)>,
    log: VecDeque<SegmentRecord>,
    logging: bool,
    closed: Vec<Closed>,
    decided: Vec<Decided>,
    next_rr: usize,
    malformed: u64,
}

impl Fec {
    /// A layer for the engine `local_engine_id`; `seed` chooses the first matrix id of each
    /// span (so a restarted sender does not reuse recent ids).
    pub fn new(local_engine_id: u64, seed: u64) -> Self {
        Self {
            local: local_engine_id,
            seed,
            spans: Vec::new(),
            codec: Codec::new(),
            up: VecDeque::new(),
            lost: VecDeque::new(),
            log: VecDeque::new(),
            logging: false,
            closed: Vec::new(),
            decided: Vec::new(),
            next_rr: 0,
            malformed: 0,
        }
    }

    /// Adds (or replaces the settings of) the FEC span to `cfg.remote_engine_id`, whose LTP
    /// segments are at most `max_segment_size` bytes (rows are that plus 2, rounded up to
    /// even).
    pub fn add_span(&mut self, cfg: FecConfig, max_segment_size: usize) -> Result<(), ConfigError> {
        let t = symbol_bytes(max_segment_size);
        cfg.validate(t)?;
        if let Some(s) = self
            .spans
            .iter_mut()
            .find(|s| s.cfg.remote_engine_id == cfg.remote_engine_id)
        {
            s.tx.bucket.set_rate(cfg.rate_bps, Duration::ZERO);
            s.cfg = cfg;
            s.t = t;
            return Ok(());
        }
        let mut z = self.seed ^ cfg.remote_engine_id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let first = (z >> 32) as u32;
        self.spans.push(Span {
            tx: TxSpan::new(&cfg, first),
            rx: RxSpan::default(),
            cfg,
            t,
            stats: FecStats::default(),
            feedback_seen: VecDeque::new(),
        });
        Ok(())
    }

    /// Whether `remote` has a FEC span.
    pub fn has_span(&self, remote: u64) -> bool {
        self.span_index(remote).is_some()
    }

    /// The settings of the FEC span to `remote`.
    pub fn config(&self, remote: u64) -> Option<&FecConfig> {
        self.span_index(remote)
            .and_then(|i| self.spans.get(i))
            .map(|s| &s.cfg)
    }

    fn span_index(&self, remote: u64) -> Option<usize> {
        self.spans
            .iter()
            .position(|s| s.cfg.remote_engine_id == remote)
    }

    /// Turns the `FEC_*` log rows on (drained with [`Fec::poll_log`]).
    pub fn set_logging(&mut self, on: bool) {
        self.logging = on;
        if !on {
            self.log.clear();
        }
    }

    /// Counters of the span to `remote`.
    pub fn stats(&self, remote: u64) -> Option<&FecStats> {
        self.span_index(remote)
            .and_then(|i| self.spans.get(i))
            .map(|s| &s.stats)
    }

    /// Datagrams refused as malformed (bad header, unknown span, oversized or inconsistent
    /// matrix).
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Whether the driver may hand the layer more segments: every span has less than one full
    /// matrix of symbols waiting for the link (the matrix being filled does not count, so a
    /// block the engine has ready fills its matrix at once and the timers only run when the
    /// engine has nothing more). The driver stops pulling segments from the LTP engine while
    /// this is false, which is how the FEC layer's pacing reaches LTP.
    pub fn accepting(&self) -> bool {
        self.spans.iter().all(|s| s.tx.out.len() < s.full_matrix())
    }

    /// Takes one LTP segment bound for `remote` into the open matrix (closing, encoding and
    /// queueing matrices as the mode says). Returns false, counting it in `input_dropped`,
    /// when the segment does not fit a row or the span's queue is at its hard limit (four
    /// full matrices: a driver ignoring [`Fec::accepting`]); false also for an unknown span.
    pub fn push_segment(&mut self, now: Duration, remote: u64, segment: Bytes) -> bool {
        let Some(i) = self.span_index(remote) else {
            return false;
        };
        let local = self.local;
        let Some(s) = self.spans.get_mut(i) else {
            return false;
        };
        let limit = 4 * s.full_matrix();
        if segment.is_empty() || segment.len() > s.t - ROW_PREFIX || s.tx.backlog() >= limit {
            s.stats.input_dropped += 1;
            return false;
        }
        s.tx.push(
            now,
            segment,
            &mut TxContext {
                cfg: &s.cfg,
                t: s.t,
                local,
                codec: &mut self.codec,
                stats: &mut s.stats,
                closed: &mut self.closed,
            },
        );
        self.flush_closed(now, remote);
        true
    }

    /// The next datagram that may leave now (paced per span at `rate_bps`, spans served
    /// round-robin, nothing while a span's link is down).
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<FecTransmit> {
        let n = self.spans.len();
        for j in 0..n {
            let i = (self.next_rr + j) % n;
            let Some(s) = self.spans.get_mut(i) else {
                continue;
            };
            if !s.tx.link_up || s.tx.out.is_empty() {
                s.tx.pacer_idle = true;
                continue;
            }
            if s.tx.pacer_idle {
                s.tx.pacer_idle = false;
                s.tx.bucket.restart(now);
            }
            if s.tx.bucket.ready_at(now).is_some() {
                continue;
            }
            let Some(sym) = s.tx.out.pop_front() else {
                continue;
            };
            let hl = usize::from(sym.header_len);
            buf.extend_from_slice(sym.header.get(..hl).unwrap_or(&[]));
            let len = hl + sym.payload.len();
            if sym.first {
                s.tx.matrix_started = Some(now);
            }
            if sym.last {
                if let Some(start) = s.tx.matrix_started.take() {
                    let rate = u128::from(s.tx.bucket.rate());
                    let ser = if rate == 0 {
                        0
                    } else {
                        (len as u128 * 8 * 1_000_000_000).div_ceil(rate)
                    };
                    let ns = (now.saturating_sub(start).as_nanos() + ser) as u64;
                    s.stats.matrices_transmitted += 1;
                    s.stats.matrix_tx_ns_total += ns;
                    s.stats.matrix_tx_ns_max = s.stats.matrix_tx_ns_max.max(ns);
                }
            }
            s.tx.bucket.consume(len, now);
            s.stats.bytes_sent += len as u64;
            if sym.repair {
                s.stats.repair_symbols_sent += 1;
            } else {
                s.stats.info_symbols_sent += 1;
            }
            self.next_rr = (i + 1) % n;
            return Some(FecTransmit {
                remote: s.cfg.remote_engine_id,
                header_len: hl,
                payload: sym.payload,
            });
        }
        None
    }

    /// Processes one received FEC datagram (its first byte is [`crate::header::MAGIC`]).
    /// Segments it completes wait in [`Fec::poll_segment`], lost HSLTP sessions in
    /// [`Fec::poll_event`]. A malformed datagram is counted and returned as an error.
    pub fn handle_datagram(&mut self, now: Duration, datagram: &Bytes) -> Result<(), FecError> {
        let res = self.receive(now, datagram);
        if res.is_err() {
            self.malformed += 1;
        }
        res
    }

    fn receive(&mut self, now: Duration, datagram: &Bytes) -> Result<(), FecError> {
        let (h, off) = SymbolHeader::decode(datagram)?;
        let i = self
            .span_index(h.sender)
            .ok_or(FecError::UnknownSpan(h.sender))?;
        let Some(s) = self.spans.get_mut(i) else {
            return Err(FecError::UnknownSpan(h.sender));
        };
        let mut sinks = Sinks {
            segments: &mut self.up,
            lost_sessions: &mut self.lost,
            decided: &mut self.decided,
            codec: &mut self.codec,
            stats: &mut s.stats,
            remote: h.sender,
        };
        let res =
            s.rx.on_symbol(now, &s.cfg, &h, datagram.slice(off..), &mut sinks)
                .map_err(|r| match r {
                    Refused::TooLarge => FecError::TooLarge,
                    Refused::Inconsistent => FecError::Inconsistent,
                });
        self.flush_decided(now, h.sender);
        res
    }

    /// The next LTP segment to hand to the engine (in matrix order per span). With redundancy
    /// feedback on, a segment that signals a decoding failure at the peer raises the
    /// redundancy of the span's next matrices before the engine sees it (so a block the
    /// engine re-sends in answer already gets it).
    pub fn poll_segment(&mut self) -> Option<(u64, Bytes)> {
        let (remote, seg) = self.up.pop_front()?;
        self.feedback(remote, &seg);
        Some((remote, seg))
    }

    /// The feedback's current extra redundancy on the span to `remote`, repair symbols per 100
    /// information symbols (0 when off or decayed).
    pub fn feedback_level(&self, remote: u64) -> Option<u16> {
        self.span_index(remote)
            .and_then(|i| self.spans.get(i))
            .map(|s| s.tx.boost_pct())
    }

    /// Redundancy feedback: whether `seg`, received from `remote`, is the peer's signal that a
    /// matrix of ours failed — HSLTP: a cancel from the receiver of one of our blocks with
    /// `RXMTCYCEXC` (the reason a failed matrix cancels with, `Stack::cancel_reason_for_lost_matrix`);
    /// ECLSA: a report on one of our blocks claiming less than its scope (it asks for a
    /// retransmission, which only a failed matrix makes necessary) — and if so, raises it.
    fn feedback(&mut self, remote: u64, seg: &Bytes) {
        let local = self.local;
        let Some(s) = self.span_index(remote).and_then(|i| self.spans.get_mut(i)) else {
            return;
        };
        if !s.cfg.feedback_on() {
            return;
        }
        let Ok((ty, session)) = ltp::segment::peek_header(seg) else {
            return;
        };
        if session.originator != local {
            return;
        }
        let wanted = match s.cfg.mode {
            Mode::Hsltp => ty == ltp::SegmentType::CancelFromReceiver,
            Mode::Eclsa => ty == ltp::SegmentType::Report,
        };
        if !wanted {
            return;
        }
        let Ok(decoded) = ltp::segment::Segment::decode(seg) else {
            return;
        };
        let key = match decoded.content {
            ltp::segment::Content::Cancel(ltp::CancelReason::RetransmissionCyclesExceeded) => {
                u64::MAX
            }
            ltp::segment::Content::Report(r) => {
                let scope = r.upper_bound.saturating_sub(r.lower_bound);
                let claimed = r
                    .claims
                    .iter()
                    .fold(0u64, |a, c| a.saturating_add(c.length));
                if claimed >= scope {
                    return;
                }
                r.report_serial
            }
            _ => return,
        };
        if s.feedback_seen.contains(&(session, key)) {
            return;
        }
        if s.feedback_seen.len() >= FEEDBACK_SEEN {
            s.feedback_seen.pop_front();
        }
        s.feedback_seen.push_back((session, key));
        s.tx.raise(&s.cfg, &mut s.stats);
    }

    /// The next event for the driver.
    pub fn poll_event(&mut self) -> Option<FecEvent> {
        self.lost
            .pop_front()
            .map(|(remote, session)| FecEvent::SessionLost { remote, session })
    }

    /// The next `FEC_*` log row (with logging on).
    pub fn poll_log(&mut self) -> Option<SegmentRecord> {
        self.log.pop_front()
    }

    /// Runs the timers due at `now`: aggregation (sender) and matrix give-up (receiver).
    pub fn handle_timeout(&mut self, now: Duration) {
        let local = self.local;
        for i in 0..self.spans.len() {
            let Some(s) = self.spans.get_mut(i) else {
                continue;
            };
            let remote = s.cfg.remote_engine_id;
            s.tx.on_timeout(
                now,
                &mut TxContext {
                    cfg: &s.cfg,
                    t: s.t,
                    local,
                    codec: &mut self.codec,
                    stats: &mut s.stats,
                    closed: &mut self.closed,
                },
            );
            let mut sinks = Sinks {
                segments: &mut self.up,
                lost_sessions: &mut self.lost,
                decided: &mut self.decided,
                codec: &mut self.codec,
                stats: &mut s.stats,
                remote,
            };
            s.rx.on_timeout(now, &mut sinks);
            self.flush_closed(now, remote);
            self.flush_decided(now, remote);
        }
    }

    /// The earliest time [`Fec::handle_timeout`] or [`Fec::poll_transmit`] has work (a time
    /// in the past means now).
    pub fn poll_timeout(&self) -> Option<Duration> {
        let mut best: Option<Duration> = None;
        for s in &self.spans {
            let pacing = (s.tx.link_up && !s.tx.out.is_empty()).then(|| s.tx.bucket.earliest());
            for t in [s.tx.deadline(&s.cfg), s.rx.deadline(), pacing]
                .into_iter()
                .flatten()
            {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        }
        best
    }

    /// Changes the pacing rate of the span to `remote` (0 = unpaced).
    pub fn set_rate(&mut self, now: Duration, remote: u64, rate_bps: u64) -> bool {
        let Some(s) = self.span_index(remote).and_then(|i| self.spans.get_mut(i)) else {
            return false;
        };
        s.cfg.rate_bps = rate_bps;
        s.tx.bucket.set_rate(rate_bps, now);
        true
    }

    /// Starts or stops transmission on the span to `remote` (queued symbols wait).
    pub fn set_link(&mut self, remote: u64, up: bool) -> bool {
        let Some(s) = self.span_index(remote).and_then(|i| self.spans.get_mut(i)) else {
            return false;
        };
        s.tx.link_up = up;
        true
    }

    /// Whether nothing is queued, being filled, received or waiting to be handed up.
    pub fn is_idle(&self) -> bool {
        self.up.is_empty()
            && self.lost.is_empty()
            && self.spans.iter().all(|s| s.tx.is_idle() && s.rx.is_idle())
    }

    fn flush_closed(&mut self, now: Duration, remote: u64) {
        for c in std::mem::take(&mut self.closed) {
            if self.logging {
                self.log.push_back(self.row(
                    now, remote, self.local, "FEC_TX", c.matrix, c.k, c.n, 0, 0, c.bytes,
                ));
            }
        }
    }

    fn flush_decided(&mut self, now: Duration, remote: u64) {
        for d in std::mem::take(&mut self.decided) {
            if self.logging {
                self.log.push_back(self.row(
                    now,
                    remote,
                    remote,
                    d.verdict.log_name(),
                    d.matrix,
                    d.k,
                    d.n,
                    d.received,
                    d.repaired,
                    0,
                ));
            }
        }
    }

    /// A `FEC_*` row: the matrix is identified like an LTP session, (sender, matrix id).
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        now: Duration,
        remote: u64,
        sender: u64,
        name: &'static str,
        matrix: u32,
        k: usize,
        n: usize,
        received: usize,
        repaired: usize,
        bytes: u64,
    ) -> SegmentRecord {
        SegmentRecord {
            time: now,
            dir: Direction::Ev,
            local_engine: self.local,
            remote_engine: remote,
            session_originator: sender,
            session_number: u64::from(matrix),
            kind: RecordKind::Named(name),
            offset: k as u64,
            length: n as u64,
            checkpoint_serial: 0,
            report_serial: repaired as u64,
            claims: received as u64,
            retransmission: false,
            datagram_len: bytes,
            outcome: Outcome::None,
        }
    }
}
