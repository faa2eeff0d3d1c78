//! The LTP thread: one UDP socket and one `ltp::Engine`, driven in batches.
//!
//! Loop: apply commands from the agent thread → receive a batch (`recvmmsg`, GRO on, into
//! shared arenas so datagrams reach the engine as zero-copy slices) → feed the engine →
//! forward its events (whole blocks and session results, never segments) → run timers → drain
//! `poll_transmit_vectored` (headers into one buffer, block data as zero-copy slices) and send
//! it per peer with `sendmmsg`/GSO, two iovecs per datagram → sleep until the
//! socket is readable or the engine's next timer, with `ppoll`'s nanosecond resolution. The agent
//! thread wakes this thread by sending a one-byte datagram from its waker socket, so commands
//! never wait for a timer and no lock is shared per segment.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ltp::Event;

use udpio::{wait_readable, RecvBatch, RecvMeta, SendBatch};

use crate::counters::LtpCounters;
use crate::messages::{AgentInput, FromLtp, ToLtp};

/// LTP client service id of the bundle protocol.
pub const BP_CLIENT_SERVICE: u64 = 1;

/// True when a cancelled export session means "the receiver refused the block for lack of
/// resources": cancelled by the receiver with `SYS_CNCLD` (a full or failed store, a full
/// import budget) or `USR_CNCLD` (its client refused it). The sender keeps the bundles and
/// backs off instead of sending them again at once (which a full receiver would refuse again,
/// forever). Other cancellations (retransmission limits, miscolouring) are failures of the
/// transfer itself and are retried at once.
pub(crate) fn receiver_refused(reason: ltp::CancelReason, by_receiver: bool) -> bool {
    by_receiver
        && matches!(
            reason,
            ltp::CancelReason::SystemCancelled | ltp::CancelReason::UserCancelled
        )
}

/// Everything the LTP thread owns.
pub(crate) struct LtpThread {
    /// The engine with its FEC layer: FEC datagrams in and out go through it.
    pub(crate) engine: fec::Stack,
    pub(crate) sock: UdpSocket,
    /// peer node → (engine id, address).
    pub(crate) peers: HashMap<u64, (u64, SocketAddr)>,
    pub(crate) batch: usize,
    pub(crate) rx: Receiver<ToLtp>,
    pub(crate) tx: SyncSender<AgentInput>,
    pub(crate) waker_addr: SocketAddr,
    pub(crate) counters: Arc<LtpCounters>,
    pub(crate) start: Instant,
    /// Bundles not yet accepted by the engine (span queue full), in arrival order.
    pub(crate) backlog: std::collections::VecDeque<(u64, u64, Bytes)>,
    /// Which source addresses may speak for which engine (`[ltp] accept_from`).
    pub(crate) source: crate::ltp_source::SourcePolicy,
}

impl LtpThread {
    /// Runs until [`ToLtp::Shutdown`] or the agent thread goes away.
    pub(crate) fn run(mut self) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        udpio::set_thread_timer_slack(Duration::from_micros(1));
        let engine_of: HashMap<u64, u64> = self.peers.iter().map(|(p, (e, _))| (*e, *p)).collect();
        let addr_of: HashMap<u64, SocketAddr> =
            self.peers.values().map(|(e, a)| (*e, *a)).collect();
        let mut recv = RecvBatch::new(self.batch);
        // GRO: a run of equal-size datagrams from one sender (a GSO batch on loopback) arrives
        // as one buffer: one socket-queue entry and one copy per run instead of per datagram.
        // Kernels without it deliver datagrams one by one, which the loop handles the same way.
        let _ = udpio::enable_gro(&self.sock);
        let mut arenas: Vec<RxArena> = (0..self.batch).map(|_| RxArena::new()).collect();
        let mut meta = vec![RecvMeta::default(); self.batch];
        let mut send = SendBatch::new(self.batch);
        send.set_gso(true);
        // Headers and signal segments only: block data is never copied here.
        let mut out = Vec::with_capacity(self.batch * 64);
        // (remote engine, header offset and length in `out`, zero-copy payload) per datagram.
        let mut pending: Vec<(u64, usize, usize, Bytes)> = Vec::with_capacity(self.batch);
        let engines: Vec<u64> = engine_of.keys().copied().collect();
        // Adaptive spans: (peer, engine id, rate last published).
        let mut rates: Vec<(u64, u64, u64)> = self
            .peers
            .iter()
            .filter(|(_, (e, _))| {
                self.engine
                    .span_config(*e)
                    .is_some_and(|c| c.adaptive_rate.is_some())
            })
            .map(|(p, (e, _))| (*p, *e, 0))
            .collect();
        let mut spans_published = Instant::now();
        // FEC spans: (peer, engine id), and the counters last published.
        let fec_peers: Vec<(u64, u64)> = self
            .peers
            .iter()
            .filter(|(_, (e, _))| self.engine.fec().has_span(*e))
            .map(|(p, (e, _))| (*p, *e))
            .collect();
        let mut fec_last = std::collections::BTreeMap::new();
        loop {
            let now = self.start.elapsed();
            let mut busy = false;
            // Commands.
            loop {
                match self.rx.try_recv() {
                    Ok(ToLtp::Shutdown) | Err(TryRecvError::Disconnected) => return Ok(()),
                    Ok(cmd) => {
                        busy = true;
                        self.apply(now, cmd);
                    }
                    Err(TryRecvError::Empty) => break,
                }
            }
            // Receive.
            let n = match recv.recv_uninit(&self.sock, &mut arenas, &mut meta) {
                Ok(n) => n,
                // An ICMP error from an earlier send (a peer that is down) surfaces here as
                // ECONNREFUSED and similar: the peer's absence is LTP's business (timers).
                Err(e) if transient(&e) => 0,
                Err(e) => return Err(e),
            };
            for (a, m) in arenas.iter_mut().zip(&meta).take(n) {
                if m.src == Some(self.waker_addr) || m.truncated {
                    continue;
                }
                // Zero-copy: the engine keeps slices of the arena for red data.
                let chunk = a.take(m.len);
                let mut off = 0;
                let mut count = 0u64;
                for len in m.segments() {
                    let dg = chunk.slice(off..(off + len).min(chunk.len()));
                    off += len;
                    count += 1;
                    let source = &self.source;
                    match self
                        .engine
                        .handle_datagram_checked(now, &dg, |e| source.allows(m.src, e))
                    {
                        Ok(()) => {}
                        Err(fec::StackError::Ltp(ltp::RecvError::WrongSource(_))) => {
                            self.counters.wrong_source.fetch_add(1, Relaxed);
                        }
                        Err(_) => {
                            self.counters.malformed.fetch_add(1, Relaxed);
                        }
                    }
                }
                self.counters.segments_received.fetch_add(count, Relaxed);
            }
            busy |= n > 0;
            self.engine.handle_timeout(now);
            if !self.backlog.is_empty() {
                self.drain_backlog(now);
            }
            // Events.
            while let Some(ev) = self.engine.poll_event() {
                let msg = match ev {
                    Event::BlockReceived {
                        remote,
                        session,
                        client_service_id,
                        data,
                    } => {
                        self.counters.blocks_received.fetch_add(1, Relaxed);
                        match engine_of.get(&remote) {
                            Some(&peer) if client_service_id == BP_CLIENT_SERVICE => {
                                FromLtp::Block {
                                    peer,
                                    session,
                                    data,
                                }
                            }
                            _ => {
                                // Not for the bundle protocol: refuse it.
                                self.engine.confirm_block(now, session, false);
                                continue;
                            }
                        }
                    }
                    Event::ExportCompleted { tokens, .. } => {
                        self.counters.exports_completed.fetch_add(1, Relaxed);
                        FromLtp::Done { tokens, ok: true }
                    }
                    Event::ExportCancelled {
                        remote,
                        tokens,
                        reason,
                        by_receiver,
                        ..
                    } => {
                        self.counters.exports_cancelled.fetch_add(1, Relaxed);
                        // An HSLTP receiver cancels a block whose matrix failed to decode with
                        // SYS_CNCLD, and the bundle must go again at once in a new session
                        // (docs/fec.md): not a refusal to back off from.
                        let hsltp_decode_failure = reason == ltp::CancelReason::SystemCancelled
                            && self
                                .engine
                                .fec()
                                .config(remote)
                                .is_some_and(|c| c.mode == fec::Mode::Hsltp);
                        if receiver_refused(reason, by_receiver) && !hsltp_decode_failure {
                            self.counters.exports_refused.fetch_add(1, Relaxed);
                            FromLtp::Refused { tokens }
                        } else {
                            FromLtp::Done { tokens, ok: false }
                        }
                    }
                    Event::GreenSegment { .. } | Event::ImportCancelled { .. } => continue,
                };
                if self.tx.send(AgentInput::Ltp(msg)).is_err() {
                    return Ok(());
                }
            }
            // Transmit: segment headers are encoded into `out`, block data stays in the blocks
            // (zero-copy slices) and both leave as two iovecs per datagram.
            loop {
                out.clear();
                pending.clear();
                while pending.len() < self.batch {
                    let Some(t) = self.engine.poll_transmit_vectored(now, &mut out) else {
                        break;
                    };
                    pending.push((
                        t.remote_engine,
                        out.len() - t.header_len,
                        t.header_len,
                        t.payload,
                    ));
                }
                if pending.is_empty() {
                    break;
                }
                busy = true;
                self.counters
                    .segments_sent
                    .fetch_add(pending.len() as u64, Relaxed);
                // Runs of datagrams to the same peer leave in one call.
                let mut i = 0;
                while i < pending.len() {
                    let remote = pending.get(i).map_or(0, |p| p.0);
                    // One small vector of (header, payload) slices per run (not per segment).
                    let mut parts: Vec<(&[u8], &[u8])> = Vec::with_capacity(pending.len() - i);
                    while let Some((r, off, len, payload)) = pending.get(i) {
                        if *r != remote {
                            break;
                        }
                        parts.push((out.get(*off..*off + *len).unwrap_or(&[]), payload));
                        i += 1;
                    }
                    if let Some(&addr) = addr_of.get(&remote) {
                        match send.send_vectored(&self.sock, &parts, addr) {
                            Ok(_) => {}
                            Err(e) if transient(&e) => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
            self.counters
                .export_sessions
                .store(self.engine.export_sessions() as u64, Relaxed);
            self.counters
                .import_sessions
                .store(self.engine.import_sessions() as u64, Relaxed);
            self.publish_deviations();
            crate::hardening_status::publish_ltp_admission(
                &self.engine,
                self.peers.values().map(|(e, _)| *e),
                &self.counters.admission,
            );
            self.publish_span_totals(&engines);
            self.publish_adaptive_rates(&mut rates);
            self.counters
                .spans
                .publish_due(&mut spans_published, &self.engine, &self.peers);
            self.counters
                .fec
                .publish(&self.engine, &fec_peers, &mut fec_last);
            if busy {
                continue;
            }
            // Sleep until readable (data or a wake-up from the agent) or the next timer.
            let now = self.start.elapsed();
            let wait = match self.engine.poll_timeout() {
                Some(t) if t <= now => continue,
                Some(t) => (t - now).min(Duration::from_millis(100)),
                None => Duration::from_millis(100),
            };
            match wait_readable(&self.sock, wait) {
                Ok(_) => {}
                Err(e) if transient(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Copies the engine's deviation counts into the status counters; the first occurrence of
    /// each kind is also logged, as TCPCL does for its peers' deviations.
    fn publish_deviations(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.engine.stats().deviations;
        for (d, counter) in ltp::Deviation::ALL.iter().zip(&self.counters.deviations) {
            let n = now.get(*d);
            let before = counter.swap(n, Relaxed);
            if before == 0 && n > 0 {
                eprintln!(
                    "dtnkit node: LTP peer deviates from RFC 5326 (tolerated, counted in status \
                     ltp.deviations.{}): {}",
                    d.name(),
                    d.description()
                );
            }
        }
    }

    /// Publishes the per-span counters the status reply sums over all spans.
    fn publish_span_totals(&self, engines: &[u64]) {
        use std::sync::atomic::Ordering::Relaxed;
        let (mut retx, mut timeouts) = (0, 0);
        for s in engines.iter().filter_map(|e| self.engine.span_stats(*e)) {
            retx += s.data_segments_retransmitted;
            timeouts += s.checkpoint_timeouts;
        }
        let c = &self.counters;
        c.data_segments_retransmitted.store(retx, Relaxed);
        c.checkpoint_timeouts.store(timeouts, Relaxed);
    }

    /// Publishes the pacing rate of adaptive spans when it changed.
    fn publish_adaptive_rates(&self, rates: &mut [(u64, u64, u64)]) {
        for (peer, engine, last) in rates.iter_mut() {
            let Some(rate) = self.engine.span_pacing_rate(*engine) else {
                continue;
            };
            if rate != *last {
                *last = rate;
                if let Ok(mut m) = self.counters.adaptive_rates.lock() {
                    m.insert(*peer, rate);
                }
            }
        }
    }

    /// Hands waiting bundles to the engine until its span queue is full.
    fn drain_backlog(&mut self, now: Duration) {
        while let Some((engine, token, bundle)) = self.backlog.pop_front() {
            match self.engine.enqueue_item(
                now,
                engine,
                BP_CLIENT_SERVICE,
                bundle.clone(),
                token,
                true,
            ) {
                Ok(()) => {}
                Err(ltp::SendError::SpanFull(_)) => {
                    self.backlog.push_front((engine, token, bundle));
                    return;
                }
                Err(_) => {
                    let _ = self.tx.send(AgentInput::Ltp(FromLtp::Done {
                        tokens: vec![token],
                        ok: false,
                    }));
                }
            }
        }
    }

    fn apply(&mut self, now: Duration, cmd: ToLtp) {
        match cmd {
            ToLtp::Item {
                peer,
                token,
                bundle,
            } => {
                let Some(&(engine, _)) = self.peers.get(&peer) else {
                    let _ = self.tx.send(AgentInput::Ltp(FromLtp::Done {
                        tokens: vec![token],
                        ok: false,
                    }));
                    return;
                };
                // Bundles wait here (in order) while the span's block queue is full; the agent
                // thread's window bounds this backlog.
                self.backlog.push_back((engine, token, bundle));
                self.drain_backlog(now);
            }
            ToLtp::Confirm { session, ok } => {
                self.engine.confirm_block(now, session, ok);
            }
            ToLtp::AcceptImports(accept) => self.engine.set_accepting_imports(accept),
            ToLtp::Link {
                peer,
                up,
                rate_bps,
                owlt,
            } => {
                let Some(&(engine, _)) = self.peers.get(&peer) else {
                    return;
                };
                if up {
                    self.engine.set_span_rate(now, engine, rate_bps);
                    if let Some(o) = owlt {
                        self.engine.set_span_owlt(engine, o);
                    }
                    self.engine.set_link_up(now, engine);
                } else {
                    self.engine.flush_aggregation(now, engine);
                    self.engine.set_link_down(now, engine);
                }
            }
            ToLtp::Shutdown => {}
        }
    }
}

/// Bytes of one receive slot: a maximal (GRO-coalesced) UDP payload.
const RX_SLOT: usize = udpio::GRO_BUFFER;
/// Size of one receive arena: datagrams are received into its free tail and split off as
/// shared `Bytes`, so a datagram costs no allocation (one allocation per arena instead). An
/// arena is freed when the last slice of it is dropped: an import session that keeps a
/// slice pins at most one arena per piece, which is why arenas stay small.
const RX_ARENA: usize = 4 * RX_SLOT;

/// A receive buffer whose filled prefix is split off as zero-copy [`Bytes`].
///
/// Between receives the buffer is empty (`len() == 0`) and datagrams land in its spare
/// capacity, which is never zero-filled: only the bytes the kernel wrote become part of it.
struct RxArena {
    buf: bytes::BytesMut,
}

impl RxArena {
    fn new() -> Self {
        Self {
            buf: bytes::BytesMut::with_capacity(RX_ARENA),
        }
    }

    /// Splits the `len` bytes just received into the spare capacity off as shared bytes and
    /// makes sure a full slot is free for the next receive.
    ///
    /// Must be called only with the length `RecvBatch::recv_uninit` reported for this arena
    /// in the receive that just returned (which is at most the slot it was offered).
    fn take(&mut self, len: usize) -> Bytes {
        let len = len.min(self.slot_len());
        // SAFETY: the buffer is empty between receives, so its spare capacity starts at
        // offset 0; `recv_uninit` guarantees the kernel wrote (initialised) the first `len`
        // bytes of the slot it was given, which is the start of that spare capacity, and `len`
        // is clamped to the slot, itself within the capacity.
        unsafe { self.buf.set_len(len) };
        let chunk = self.buf.split_to(len).freeze();
        if self.buf.capacity() < RX_SLOT {
            self.buf = bytes::BytesMut::with_capacity(RX_ARENA);
        }
        chunk
    }

    /// Bytes offered to the next receive.
    fn slot_len(&self) -> usize {
        (self.buf.capacity() - self.buf.len()).min(RX_SLOT)
    }
}

impl AsMut<[std::mem::MaybeUninit<u8>]> for RxArena {
    fn as_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        let n = self.slot_len();
        let spare = self.buf.spare_capacity_mut();
        spare.get_mut(..n).unwrap_or(&mut [])
    }
}

/// Socket errors caused by the network or a peer (ICMP unreachable reported on the socket,
/// no buffer space) rather than by this node: counted as losses, never fatal.
fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED)
            | Some(libc::EHOSTUNREACH)
            | Some(libc::ENETUNREACH)
            | Some(libc::ENOBUFS)
            | Some(libc::EINTR)
            | Some(libc::EAGAIN)
            | Some(libc::EMSGSIZE)
    )
}
