//! [`Stack`]: an LTP engine with its FEC layer, driven exactly like an engine alone. The
//! real-time node and the simulator both drive this type, so FEC behaves identically in both.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ltp::{
    CancelReason, Engine, Event, RecvError, SegmentSink, SendError, SessionId, SpanConfig,
    Transmit, VectoredTransmit,
};
use thiserror::Error;

use crate::config::{ConfigError, FecConfig, Mode};
use crate::header::{is_fec_datagram, SymbolHeader};
use crate::layer::{Fec, FecError, FecEvent};
use crate::stats::FecStats;

/// Why a received datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum StackError {
    /// A bare LTP segment the engine refused.
    #[error(transparent)]
    Ltp(#[from] RecvError),
    /// A FEC datagram the FEC layer refused.
    #[error(transparent)]
    Fec(#[from] FecError),
}

/// An `ltp::Engine` and the FEC layer below it.
///
/// The stack owns its engine and offers only what cannot bypass the FEC layer: the I/O methods
/// (`handle_datagram*`, `handle_timeout`, `poll_transmit*`, `poll_timeout`, `is_idle`), span
/// control that the FEC layer must see (`add_span`, `add_fec_span`, `set_span_rate`,
/// `set_link_down`, `set_link_up`), the client methods that only queue work or answer the engine
/// (`send_block`, `enqueue_item`, `confirm_block`, `poll_event`, …), and the engine itself
/// read-only ([`Stack::engine`]) for statistics and configuration. There is no `Deref` to the
/// engine: an engine input method added later is unreachable here until it is forwarded, so the
/// compiler, not the order of calls, keeps FEC spans' datagrams in the FEC layer.
///
/// Transmission: FEC datagrams first (paced by the FEC layer); then, while the FEC layer
/// [accepts](Fec::accepting) more, the engine's next segment — into the FEC layer for a FEC
/// span, out as it is for another span. While a FEC span's queue is full, other spans of the
/// engine wait too (one engine, one output order).
///
/// Reception: a datagram starting with the FEC magic byte goes to the FEC layer, whose
/// decoded segments reach the engine at once, in order; a failed HSLTP matrix cancels its
/// import session with `RXMTCYCEXC` (see [`Stack::cancel_reason_for_lost_matrix`]). Anything
/// else goes to the engine.
pub struct Stack {
    engine: Engine,
    fec: Fec,
    pool: BytesMut,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("engine", &self.engine)
            .field("fec", &self.fec)
            .finish()
    }
}

impl Stack {
    /// Wraps `engine` with an empty FEC layer (no span uses FEC until
    /// [`Stack::add_fec_span`]).
    pub fn new(engine: Engine) -> Self {
        let id = engine.local_engine_id();
        Self {
            fec: Fec::new(id, id ^ 0xfec0_5eed),
            engine,
            pool: BytesMut::new(),
        }
    }

    /// Seeds the first matrix ids (call before adding FEC spans; a node seeds from its start
    /// time so a restart does not reuse recent ids).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.fec = Fec::new(self.engine.local_engine_id(), seed);
        self
    }

    /// The engine, read-only: statistics, span configuration and state, session counts.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Why a receiver cancels the import session of a block whose HSLTP matrix failed:
    /// `RXMTCYCEXC`. HSLTP allows no retransmission cycle (the block's data is never asked for
    /// again), so a matrix that cannot be decoded has exhausted the session's cycles. The code
    /// tells the sender this is a failed transfer, to re-forward at once, and not a refusal
    /// (`SYS_CNCLD`/`USR_CNCLD`, which a receiver sends when its store or import budget is full
    /// and which the sender backs off from).
    pub fn cancel_reason_for_lost_matrix() -> CancelReason {
        CancelReason::RetransmissionCyclesExceeded
    }

    /// Adds (or replaces) a span of the engine. On a span that already has FEC the FEC layer's
    /// settings stay in force: the engine is not paced (the FEC layer paces), and an HSLTP span
    /// closes its import sessions at their final report. (Adding a span after
    /// [`Stack::add_fec_span`] therefore cannot undo FEC.)
    pub fn add_span(&mut self, mut cfg: SpanConfig) {
        if let Some(f) = self.fec.config(cfg.remote_engine_id) {
            cfg.rate_bps = 0;
            cfg.adaptive_rate = None;
            cfg.immediate_import_close = f.mode == Mode::Hsltp;
        }
        self.engine.add_span(cfg);
    }

    /// Installs (or removes) the engine's segment log sink (see [`Stack::set_fec_logging`]).
    pub fn set_segment_sink(&mut self, sink: Option<Box<dyn SegmentSink + Send>>) {
        self.engine.set_segment_sink(sink);
    }

    /// Takes the segment log sink back (to flush it at the end of a run).
    pub fn take_segment_sink(&mut self) -> Option<Box<dyn SegmentSink + Send>> {
        self.engine.take_segment_sink()
    }

    /// `Engine::send_block`: one block in its own export session.
    pub fn send_block(
        &mut self,
        now: Duration,
        remote: u64,
        client_service_id: u64,
        data: Bytes,
        red_len: usize,
        token: u64,
    ) -> Result<ltp::SendOutcome, SendError> {
        self.engine
            .send_block(now, remote, client_service_id, data, red_len, token)
    }

    /// `Engine::enqueue_item`: one item into the span's aggregate.
    pub fn enqueue_item(
        &mut self,
        now: Duration,
        remote: u64,
        client_service_id: u64,
        item: Bytes,
        token: u64,
        red: bool,
    ) -> Result<(), SendError> {
        self.engine
            .enqueue_item(now, remote, client_service_id, item, token, red)
    }

    /// `Engine::flush_aggregation`: the span's aggregates become blocks now.
    pub fn flush_aggregation(&mut self, now: Duration, remote: u64) {
        self.engine.flush_aggregation(now, remote);
    }

    /// `Engine::confirm_block`: the client stored (or refused) a delivered red block.
    pub fn confirm_block(&mut self, now: Duration, session: SessionId, ok: bool) -> bool {
        self.engine.confirm_block(now, session, ok)
    }

    /// `Engine::cancel_export` (the cancel segment leaves through the FEC layer).
    pub fn cancel_export(&mut self, now: Duration, session: SessionId) -> bool {
        self.engine.cancel_export(now, session)
    }

    /// `Engine::cancel_import` (the cancel segment leaves through the FEC layer).
    pub fn cancel_import(
        &mut self,
        now: Duration,
        session: SessionId,
        reason: CancelReason,
    ) -> bool {
        self.engine.cancel_import(now, session, reason)
    }

    /// `Engine::set_accepting_imports`: the client's ingress gate.
    pub fn set_accepting_imports(&mut self, accept: bool) {
        self.engine.set_accepting_imports(accept);
    }

    /// `Engine::set_span_owlt`.
    pub fn set_span_owlt(&mut self, remote: u64, owlt: Duration) -> bool {
        self.engine.set_span_owlt(remote, owlt)
    }

    /// `Engine::set_span_rto`.
    pub fn set_span_rto(&mut self, remote: u64, rto: Option<Duration>) -> bool {
        self.engine.set_span_rto(remote, rto)
    }

    /// `Engine::poll_event`: the next event for the client.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.engine.poll_event()
    }

    /// `Engine::has_events`.
    pub fn has_events(&self) -> bool {
        self.engine.has_events()
    }

    /// Puts FEC on the engine's span to `cfg.remote_engine_id` (which must exist): the FEC
    /// layer takes over pacing (`cfg.rate_bps`; the span's own rate and adaptive pacing are
    /// switched off) and, in HSLTP mode, the span closes import sessions at their final report
    /// (`ltp::SpanConfig::immediate_import_close`). Rows are the span's `max_segment_size`
    /// plus 2.
    pub fn add_fec_span(&mut self, cfg: FecConfig) -> Result<(), ConfigError> {
        let Some(mut span) = self.engine.span_config(cfg.remote_engine_id).cloned() else {
            return Err(ConfigError {
                field: "remote_engine_id",
                value: cfg.remote_engine_id.to_string(),
                expected: "an engine with an LTP span".into(),
            });
        };
        self.fec.add_span(cfg.clone(), span.max_segment_size)?;
        span.rate_bps = 0;
        span.adaptive_rate = None;
        span.immediate_import_close = cfg.mode == Mode::Hsltp;
        self.engine.add_span(span);
        Ok(())
    }

    /// The FEC layer (settings, counters).
    pub fn fec(&self) -> &Fec {
        &self.fec
    }

    /// FEC counters of the span to `remote` (None without FEC).
    pub fn fec_stats(&self, remote: u64) -> Option<&FecStats> {
        self.fec.stats(remote)
    }

    /// Writes the FEC layer's `FEC_*` rows to the engine's segment log too (call after
    /// installing the engine's sink).
    pub fn set_fec_logging(&mut self, on: bool) {
        self.fec.set_logging(on);
    }

    /// Processes one received datagram (FEC symbol or bare LTP segment).
    pub fn handle_datagram(&mut self, now: Duration, datagram: &Bytes) -> Result<(), StackError> {
        if !is_fec_datagram(datagram) {
            return Ok(self.engine.handle_datagram(now, datagram)?);
        }
        let res = self.fec.handle_datagram(now, datagram);
        self.deliver(now);
        Ok(res?)
    }

    /// Like [`Stack::handle_datagram`], for a driver with a source policy (the engine's
    /// [`Engine::handle_datagram_checked`]): `accept` is asked about the sending engine of a
    /// bare segment, and of a FEC datagram before the FEC layer sees it (its header names the
    /// sender); a refused one is dropped with [`RecvError::WrongSource`]. Shadows the engine's
    /// method of the same name, so a FEC span's datagrams never bypass the FEC layer.
    pub fn handle_datagram_checked(
        &mut self,
        now: Duration,
        datagram: &Bytes,
        accept: impl FnOnce(u64) -> bool,
    ) -> Result<(), StackError> {
        if !is_fec_datagram(datagram) {
            return Ok(self.engine.handle_datagram_checked(now, datagram, accept)?);
        }
        if let Ok((h, _)) = SymbolHeader::decode(datagram) {
            if !accept(h.sender) {
                return Err(RecvError::WrongSource(h.sender).into());
            }
        }
        self.handle_datagram(now, datagram)
    }

    /// Like `Engine::handle_datagram_parts` (a datagram as `head ++ tail`, the way
    /// [`Stack::poll_transmit_vectored`] made it, for the simulator's zero-copy links): a bare
    /// segment goes to the engine in its parts, a FEC datagram is joined and goes through the
    /// FEC layer. Shadows the engine's method, which would take a FEC symbol for a malformed
    /// segment.
    pub fn handle_datagram_parts(
        &mut self,
        now: Duration,
        head: &Bytes,
        tail: &Bytes,
    ) -> Result<(), StackError> {
        if !is_fec_datagram(head) {
            return Ok(self.engine.handle_datagram_parts(now, head, tail)?);
        }
        let mut whole = BytesMut::with_capacity(head.len() + tail.len());
        whole.extend_from_slice(head);
        whole.extend_from_slice(tail);
        self.handle_datagram(now, &whole.freeze())
    }

    /// Runs the engine's and the FEC layer's timers.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.engine.handle_timeout(now);
        self.fec.handle_timeout(now);
        self.deliver(now);
    }

    /// Hands decoded segments to the engine, cancels lost HSLTP sessions, logs FEC rows.
    fn deliver(&mut self, now: Duration) {
        while let Some((_, seg)) = self.fec.poll_segment() {
            // Refusals are counted by the engine (`stats().malformed` and friends).
            let _ = self.engine.handle_datagram(now, &seg);
        }
        while let Some(FecEvent::SessionLost { session, .. }) = self.fec.poll_event() {
            self.engine
                .cancel_import(now, session, Self::cancel_reason_for_lost_matrix());
        }
        self.flush_log();
    }

    fn flush_log(&mut self) {
        while let Some(r) = self.fec.poll_log() {
            self.engine.log_record(&r);
        }
    }

    /// Like `Engine::poll_transmit_vectored`, through the FEC layer (see the type's doc).
    pub fn poll_transmit_vectored(
        &mut self,
        now: Duration,
        header_buf: &mut Vec<u8>,
    ) -> Option<VectoredTransmit> {
        loop {
            if let Some(t) = self.fec.poll_transmit(now, header_buf) {
                return Some(VectoredTransmit {
                    remote_engine: t.remote,
                    header_len: t.header_len,
                    payload: t.payload,
                });
            }
            if !self.fec.accepting() {
                return None;
            }
            let start = header_buf.len();
            let t = self.engine.poll_transmit_vectored(now, header_buf)?;
            if !self.fec.has_span(t.remote_engine) {
                return Some(t);
            }
            // The segment becomes an information symbol: one contiguous copy (the encoder
            // reads it as a row anyway).
            let head = header_buf.get(start..).unwrap_or(&[]);
            self.pool.reserve(head.len() + t.payload.len());
            self.pool.extend_from_slice(head);
            self.pool.extend_from_slice(&t.payload);
            let seg = self.pool.split().freeze();
            header_buf.truncate(start);
            self.fec.push_segment(now, t.remote_engine, seg);
            self.flush_log();
        }
    }

    /// Like `Engine::poll_transmit`, through the FEC layer.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<Transmit> {
        let t = self.poll_transmit_vectored(now, buf)?;
        buf.extend_from_slice(&t.payload);
        Some(Transmit {
            remote_engine: t.remote_engine,
            len: t.len(),
        })
    }

    /// The earliest time to call `handle_timeout` or `poll_transmit` again. While the FEC
    /// layer accepts no segments, the engine's pending output does not count (only its
    /// timers do): the FEC layer's own pacing time says when room appears.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let engine = if self.fec.accepting() {
            self.engine.poll_timeout()
        } else {
            self.engine.poll_timer()
        };
        match (engine, self.fec.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the engine and the FEC layer have nothing left to do.
    pub fn is_idle(&self) -> bool {
        self.engine.is_idle() && self.fec.is_idle()
    }

    /// Changes the span's rate: the FEC layer's pacing on a FEC span (the engine stays
    /// unpaced there), the engine's otherwise.
    pub fn set_span_rate(&mut self, now: Duration, remote: u64, rate_bps: u64) -> bool {
        if self.fec.set_rate(now, remote, rate_bps) {
            return self.engine.set_span_rate(now, remote, 0);
        }
        self.engine.set_span_rate(now, remote, rate_bps)
    }

    /// The span's link went down: the engine suspends its timers, the FEC layer holds its
    /// queue.
    pub fn set_link_down(&mut self, now: Duration, remote: u64) -> bool {
        self.fec.set_link(remote, false);
        self.engine.set_link_down(now, remote)
    }

    /// The span's link is up again.
    pub fn set_link_up(&mut self, now: Duration, remote: u64) -> bool {
        self.fec.set_link(remote, true);
        self.engine.set_link_up(now, remote)
    }
}
