//! [`LtpCla`]: bundles over LTP (with FEC where a span has it), between the agent and the engine.

mod green;
mod outcome;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use bp::ClaOutcome;
use bytes::Bytes;
use fec::{FecConfig, FecStats, Stack, StackError};
use ltp::{Engine, EngineConfig, Event, SegmentSink, SendError, SessionId, SpanConfig};

pub use green::MAX_GREEN_PARTIAL;
pub use outcome::{classify_cancel, Cause, LtpEvent, Outcome, ReceivedBlock};

use green::{Green, GreenBlocks};

/// LTP client service id of the bundle protocol.
pub const BP_CLIENT_SERVICE: u64 = 1;

/// Counters of the adapter (the engine and the FEC layer keep their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LtpClaStats {
    /// Red blocks delivered by the engine (any client service).
    pub blocks_received: u64,
    /// Red blocks for another client service, refused.
    pub foreign_blocks_refused: u64,
    /// Green blocks handed up complete.
    pub green_blocks: u64,
    /// Green blocks dropped because a segment was lost, or evicted while partial.
    pub green_blocks_dropped: u64,
    /// Export sessions whose red part the receiver acknowledged (or green part sent).
    pub exports_completed: u64,
    /// Export sessions cancelled (by either side).
    pub exports_cancelled: u64,
    /// Cancelled export sessions classified as a receiver's refusal (see [`classify_cancel`]).
    pub exports_refused: u64,
    /// Bundles LTP could not carry at all (reported failed at once).
    pub not_carried: u64,
}

/// A bundle waiting for room in its span's block queue.
#[derive(Debug)]
struct Item {
    engine: u64,
    token: u64,
    bundle: Bytes,
    red: bool,
}

/// The LTP convergence-layer adapter: an LTP engine with its FEC layer, the map from neighbours
/// to spans, the bundles waiting for room, green block assembly, and the classification of
/// every engine event into what the agent must hear. See the crate documentation for the
/// policies.
///
/// Driving it (both drivers do exactly this):
/// - input: [`LtpCla::handle_datagram`] / [`LtpCla::handle_datagram_parts`] for every received
///   datagram, [`LtpCla::handle_timeout`] when [`LtpCla::poll_timeout`] is due, and the agent's
///   commands: [`LtpCla::send`], [`LtpCla::confirm`], [`LtpCla::link_up`],
///   [`LtpCla::link_down`], [`LtpCla::set_accepting_imports`];
/// - output: [`LtpCla::poll_event`] until `None` (blocks and outcomes for the agent),
///   [`LtpCla::flush_backlog`], then [`LtpCla::poll_transmit_vectored`] until `None`.
pub struct LtpCla {
    stack: Stack,
    /// Neighbour node → its engine id.
    engines: BTreeMap<u64, u64>,
    /// Engine id → neighbour node.
    peers: HashMap<u64, u64>,
    backlog: VecDeque<Item>,
    green: GreenBlocks,
    /// Events produced by commands (a bundle LTP cannot carry), before the engine's.
    pending: VecDeque<LtpEvent>,
    stats: LtpClaStats,
}

impl std::fmt::Debug for LtpCla {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LtpCla")
            .field("stack", &self.stack)
            .field("engines", &self.engines)
            .field("backlog", &self.backlog.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl LtpCla {
    /// An adapter with an engine of `cfg` and no neighbour yet; `fec_seed` seeds the FEC layer's
    /// first matrix ids (a node seeds from its start time so a restart does not reuse recent ids).
    pub fn new(cfg: EngineConfig, fec_seed: u64) -> Self {
        Self {
            stack: Stack::new(Engine::new(cfg)).with_seed(fec_seed),
            engines: BTreeMap::new(),
            peers: HashMap::new(),
            backlog: VecDeque::new(),
            green: GreenBlocks::default(),
            pending: VecDeque::new(),
            stats: LtpClaStats::default(),
        }
    }

    /// Adds the neighbour `peer` (a node number) reached over `span`, with packet-layer FEC
    /// when `fec` is given (its `remote_engine_id` must be the span's).
    pub fn add_peer(
        &mut self,
        peer: u64,
        span: SpanConfig,
        fec: Option<FecConfig>,
    ) -> Result<(), fec::ConfigError> {
        let engine = span.remote_engine_id;
        self.stack.add_span(span);
        if let Some(f) = fec {
            self.stack.add_fec_span(f)?;
        }
        self.engines.insert(peer, engine);
        self.peers.insert(engine, peer);
        Ok(())
    }

    /// Installs the segment log (`fec_rows`: the FEC layer writes its `FEC_*` rows too).
    pub fn set_segment_log(&mut self, sink: Option<Box<dyn SegmentSink + Send>>, fec_rows: bool) {
        self.stack.set_segment_sink(sink);
        self.stack.set_fec_logging(fec_rows);
    }

    /// Takes the segment log back (to flush it at the end of a run).
    pub fn take_segment_log(&mut self) -> Option<Box<dyn SegmentSink + Send>> {
        self.stack.take_segment_sink()
    }

    // --- commands from the agent -----------------------------------------------------------

    /// Hands one bundle for `peer` to LTP (aggregated into blocks as the span says; `red`:
    /// reliable). Its outcome comes back as an [`LtpEvent::Outcome`] listing `token`. A bundle
    /// for a neighbour without a span fails at once.
    pub fn send(&mut self, now: Duration, peer: u64, token: u64, bundle: Bytes, red: bool) {
        let Some(&engine) = self.engines.get(&peer) else {
            self.not_carried(peer, token, SendError::UnknownSpan(peer));
            return;
        };
        self.backlog.push_back(Item {
            engine,
            token,
            bundle,
            red,
        });
        self.flush_backlog(now);
    }

    /// The agent stored (`ok`) or refused the red block of `session` ([`ReceivedBlock`]): LTP's
    /// final report leaves now, or the session is cancelled (`SYS_CNCLD`) and the sender keeps
    /// the block. False when the session is unknown or already answered.
    pub fn confirm(&mut self, now: Duration, session: SessionId, ok: bool) -> bool {
        self.stack.confirm_block(now, session, ok)
    }

    /// Accept new import sessions, or refuse them while the node's applications fall behind.
    pub fn set_accepting_imports(&mut self, accept: bool) {
        self.stack.set_accepting_imports(accept);
    }

    /// A contact with `peer` began: its rate (`None`: keep the span's), its one-way light time
    /// (`None`: keep), and the link is up (timers run, data flows).
    pub fn link_up(
        &mut self,
        now: Duration,
        peer: u64,
        rate_bps: Option<u64>,
        owlt: Option<Duration>,
    ) -> bool {
        let Some(&engine) = self.engines.get(&peer) else {
            return false;
        };
        if let Some(r) = rate_bps {
            self.stack.set_span_rate(now, engine, r);
        }
        if let Some(o) = owlt {
            self.stack.set_span_owlt(engine, o);
        }
        self.stack.set_link_up(now, engine)
    }

    /// A contact with `peer` ended: its aggregates become blocks (they leave at the next
    /// contact) and the link is down (timers suspended).
    pub fn link_down(&mut self, now: Duration, peer: u64) -> bool {
        let Some(&engine) = self.engines.get(&peer) else {
            return false;
        };
        self.stack.flush_aggregation(now, engine);
        self.stack.set_link_down(now, engine)
    }

    /// Changes the span's rate without a contact change (e.g. the simulator's scheduled rate).
    pub fn set_rate(&mut self, now: Duration, peer: u64, rate_bps: u64) -> bool {
        self.engines
            .get(&peer)
            .is_some_and(|&e| self.stack.set_span_rate(now, e, rate_bps))
    }

    // --- input -----------------------------------------------------------------------------

    /// One received datagram. `accept` is asked whether the datagram's source address may speak
    /// for the engine it names (the node's `[ltp] accept_from`); a refused one is dropped with
    /// `RecvError::WrongSource`. Malformed datagrams are counted by the engine or the FEC layer.
    pub fn handle_datagram(
        &mut self,
        now: Duration,
        datagram: &Bytes,
        accept: impl FnOnce(u64) -> bool,
    ) -> Result<(), StackError> {
        self.stack.handle_datagram_checked(now, datagram, accept)
    }

    /// One received datagram in two parts (`head ++ tail`, as [`LtpCla::poll_transmit_vectored`]
    /// produced it; the simulator's zero-copy links).
    pub fn handle_datagram_parts(
        &mut self,
        now: Duration,
        head: &Bytes,
        tail: &Bytes,
    ) -> Result<(), StackError> {
        self.stack.handle_datagram_parts(now, head, tail)
    }

    /// Runs the engine's and the FEC layer's timers.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.stack.handle_timeout(now);
    }

    // --- output ----------------------------------------------------------------------------

    /// The next event for the agent, classified (see the crate documentation). `now` is when a
    /// block that is not the bundle layer's is refused.
    pub fn poll_event(&mut self, now: Duration) -> Option<LtpEvent> {
        if let Some(e) = self.pending.pop_front() {
            return Some(e);
        }
        loop {
            let ev = self.stack.poll_event()?;
            if let Some(e) = self.classify(now, ev) {
                return Some(e);
            }
        }
    }

    /// True when [`LtpCla::poll_event`] would return something.
    pub fn has_events(&self) -> bool {
        !self.pending.is_empty() || self.stack.has_events()
    }

    /// Moves waiting bundles into the engine while their spans have room. True when any moved
    /// (the agent may then hand over more).
    pub fn flush_backlog(&mut self, now: Duration) -> bool {
        let mut moved = false;
        while let Some(item) = self.backlog.pop_front() {
            match self.stack.enqueue_item(
                now,
                item.engine,
                BP_CLIENT_SERVICE,
                item.bundle.clone(),
                item.token,
                item.red,
            ) {
                Ok(()) => moved = true,
                Err(SendError::SpanFull(_)) => {
                    self.backlog.push_front(item);
                    break;
                }
                Err(e) => {
                    moved = true;
                    let peer = self.peers.get(&item.engine).copied().unwrap_or(item.engine);
                    self.not_carried(peer, item.token, e);
                }
            }
        }
        moved
    }

    /// The next datagram to send: a header written at the end of `header_buf` and a zero-copy
    /// payload (see `ltp::Engine::poll_transmit_vectored`); through the FEC layer on FEC spans.
    pub fn poll_transmit_vectored(
        &mut self,
        now: Duration,
        header_buf: &mut Vec<u8>,
    ) -> Option<ltp::VectoredTransmit> {
        if !self.backlog.is_empty() {
            self.flush_backlog(now);
        }
        self.stack.poll_transmit_vectored(now, header_buf)
    }

    /// The earliest time to call [`LtpCla::handle_timeout`] or poll for transmission again.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.stack.poll_timeout()
    }

    /// True when nothing waits here, in the engine or in the FEC layer.
    pub fn is_idle(&self) -> bool {
        self.backlog.is_empty() && self.pending.is_empty() && self.stack.is_idle()
    }

    /// Bundles waiting for room in their span.
    pub fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    // --- read-only facts -------------------------------------------------------------------

    /// The engine, read-only (statistics, span configuration and state).
    pub fn engine(&self) -> &Engine {
        self.stack.engine()
    }

    /// The FEC layer, read-only (settings, counters).
    pub fn fec(&self) -> &fec::Fec {
        self.stack.fec()
    }

    /// FEC counters of the span to `peer` (None without FEC).
    pub fn fec_stats(&self, peer: u64) -> Option<&FecStats> {
        self.engines
            .get(&peer)
            .and_then(|&e| self.stack.fec_stats(e))
    }

    /// The engine id of neighbour `peer`.
    pub fn engine_of(&self, peer: u64) -> Option<u64> {
        self.engines.get(&peer).copied()
    }

    /// The neighbour whose engine id is `engine`.
    pub fn peer_of(&self, engine: u64) -> Option<u64> {
        self.peers.get(&engine).copied()
    }

    /// Every neighbour and its engine id, by neighbour.
    pub fn peers(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.engines.iter().map(|(&p, &e)| (p, e))
    }

    /// The adapter's counters.
    pub fn stats(&self) -> &LtpClaStats {
        &self.stats
    }

    /// Partial green blocks held.
    pub fn green_partial(&self) -> usize {
        self.green.len()
    }

    // --- classification --------------------------------------------------------------------

    fn not_carried(&mut self, peer: u64, token: u64, e: SendError) {
        self.stats.not_carried += 1;
        self.pending.push_back(LtpEvent::Outcome(Outcome {
            peer,
            session: None,
            tokens: vec![token],
            outcome: ClaOutcome::Failed,
            cause: Cause::NotCarried(e),
        }));
    }

    fn peer(&self, engine: u64) -> u64 {
        self.peers.get(&engine).copied().unwrap_or(engine)
    }

    /// One engine event → what the agent hears (None: nothing for the agent).
    fn classify(&mut self, now: Duration, ev: Event) -> Option<LtpEvent> {
        match ev {
            Event::BlockReceived {
                remote,
                session,
                client_service_id,
                data,
            } => {
                self.stats.blocks_received += 1;
                match self.peers.get(&remote) {
                    Some(&peer) if client_service_id == BP_CLIENT_SERVICE => {
                        Some(LtpEvent::Block(ReceivedBlock {
                            peer,
                            session: Some(session),
                            data,
                        }))
                    }
                    _ => {
                        // Not for the bundle protocol: refused (a no-op on a span that does not
                        // defer its final report).
                        self.stats.foreign_blocks_refused += 1;
                        self.stack.confirm_block(now, session, false);
                        None
                    }
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
                if client_service_id != BP_CLIENT_SERVICE {
                    return None;
                }
                let peer = *self.peers.get(&remote)?;
                match self.green.push(remote, session, offset, data, end_of_block) {
                    Green::Complete(data) => {
                        self.stats.green_blocks += 1;
                        Some(LtpEvent::Block(ReceivedBlock {
                            peer,
                            session: None,
                            data,
                        }))
                    }
                    Green::Pending => None,
                    Green::Incomplete | Green::Evicted => {
                        self.stats.green_blocks_dropped += 1;
                        None
                    }
                }
            }
            Event::ExportCompleted {
                remote,
                session,
                tokens,
            } => {
                self.stats.exports_completed += 1;
                Some(LtpEvent::Outcome(Outcome {
                    peer: self.peer(remote),
                    session: Some(session),
                    tokens,
                    outcome: ClaOutcome::Sent,
                    cause: Cause::Completed,
                }))
            }
            Event::ExportCancelled {
                remote,
                session,
                reason,
                by_receiver,
                tokens,
            } => {
                self.stats.exports_cancelled += 1;
                let (outcome, cause) = classify_cancel(reason, by_receiver);
                if outcome == ClaOutcome::Refused {
                    self.stats.exports_refused += 1;
                }
                Some(LtpEvent::Outcome(Outcome {
                    peer: self.peer(remote),
                    session: Some(session),
                    tokens,
                    outcome,
                    cause,
                }))
            }
            Event::ImportCancelled { .. } => None,
        }
    }
}
