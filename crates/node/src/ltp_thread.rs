//! The LTP thread: one UDP socket and the LTP convergence-layer adapter (`cla::LtpCla`: the LTP
//! engine, its FEC layer and the glue to the agent, the same code the simulator drives), driven
//! in batches.
//!
//! One turn ([`LtpThread::run`]): apply the agent's commands → receive a batch (`recvmmsg`, GRO
//! on, into shared arenas so datagrams reach the engine as zero-copy slices) → run timers → move
//! waiting bundles into the engine → forward the adapter's events (classified outcomes to the
//! agent thread, whole blocks to the block thread, `ltp_blocks`; never segments) → transmit
//! (`poll_transmit_vectored`: headers into one buffer, block data as zero-copy slices, sent per
//! peer with `sendmmsg`/GSO, two iovecs per datagram) → publish counters → sleep until the socket is readable or the next timer, with
//! `ppoll`'s nanosecond resolution. The agent thread wakes this thread by sending a one-byte
//! datagram from its waker socket, so commands never wait for a timer and no lock is shared per
//! segment. This thread classifies nothing: the adapter says what each event means.

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cla::{LtpCla, LtpEvent};

use udpio::{wait_readable, RecvBatch, RecvMeta, SendBatch};

use crate::counters::LtpCounters;
use crate::messages::{AgentInput, FromLtp, ToLtp};

/// Everything the LTP thread owns.
pub(crate) struct LtpThread {
    /// The adapter: engine and FEC layer (FEC datagrams in and out go through it), peers.
    pub(crate) cla: LtpCla,
    pub(crate) sock: UdpSocket,
    /// Engine id → the peer's address.
    pub(crate) addr_of: HashMap<u64, SocketAddr>,
    pub(crate) batch: usize,
    /// Send with UDP GSO where runs allow (`[ltp] gso`).
    pub(crate) gso: bool,
    pub(crate) rx: Receiver<ToLtp>,
    pub(crate) tx: SyncSender<AgentInput>,
    pub(crate) waker_addr: SocketAddr,
    pub(crate) counters: Arc<LtpCounters>,
    pub(crate) start: Instant,
    /// Which source addresses may speak for which engine (`[ltp] accept_from`).
    pub(crate) source: crate::ltp_source::SourcePolicy,
    /// Bundles whose stored bytes could not be read here, reported with the next events.
    pub(crate) unreadable: Vec<(u64, bp::StoreError)>,
    /// Whole received blocks, to the block thread (`ltp_blocks`), which splits, checks and
    /// stages them for the agent while this thread goes on reading its socket.
    pub(crate) blocks: std::sync::mpsc::Sender<cla::ReceivedBlock>,
}

/// The agent thread is gone, or asked the thread to stop.
struct Stop;

/// Buffers of the batched socket I/O, allocated once.
struct Io {
    recv: RecvBatch,
    arenas: Vec<RxArena>,
    meta: Vec<RecvMeta>,
    send: SendBatch,
    /// Headers and signal segments only: block data is never copied here.
    out: Vec<u8>,
    /// (remote engine, header offset and length in `out`, zero-copy payload) per datagram.
    pending: Vec<(u64, usize, usize, Bytes)>,
}

impl Io {
    fn new(batch: usize, gso: bool) -> Self {
        let mut send = SendBatch::new(batch);
        send.set_gso(gso);
        Io {
            recv: RecvBatch::new(batch),
            arenas: (0..batch).map(|_| RxArena::new()).collect(),
            meta: vec![RecvMeta::default(); batch],
            send,
            out: Vec::with_capacity(batch * 64),
            pending: Vec::with_capacity(batch),
        }
    }
}

/// What the status reply last got from this thread, to publish only changes.
struct Published {
    /// Adaptive spans: (peer, engine id, rate last published).
    rates: Vec<(u64, u64, u64)>,
    spans_at: Instant,
    /// FEC spans: (peer, engine id), and their counters last published.
    fec_peers: Vec<(u64, u64)>,
    fec_last: BTreeMap<u64, fec::FecStats>,
}

impl LtpThread {
    /// Runs until [`ToLtp::Shutdown`] or the agent thread goes away: one turn of named stages.
    pub(crate) fn run(mut self) -> std::io::Result<()> {
        udpio::set_thread_timer_slack(Duration::from_micros(1));
        // GRO: a run of equal-size datagrams from one sender (a GSO batch on loopback) arrives
        // as one buffer: one socket-queue entry and one copy per run instead of per datagram.
        // Kernels without it deliver datagrams one by one, which the loop handles the same way.
        let _ = udpio::enable_gro(&self.sock);
        // The kernel's count of datagrams this socket dropped (its buffer was full), reported
        // with every receive: a receiver that cannot keep up says so (`ltp.socket_drops`).
        let _ = udpio::enable_rx_drop_counter(&self.sock);
        let mut io = Io::new(self.batch, self.gso);
        let mut published = self.published();
        loop {
            let now = self.start.elapsed();
            let Ok(mut busy) = self.apply_commands(now) else {
                return Ok(());
            };
            busy |= self.receive(now, &mut io)?;
            self.cla.handle_timeout(now);
            self.cla.flush_backlog(now);
            if self.forward_events(now).is_err() {
                return Ok(());
            }
            busy |= self.transmit(now, &mut io)?;
            self.publish(&mut published);
            if !busy {
                self.sleep()?;
            }
        }
    }

    /// Applies every command waiting from the agent thread. True when there was one.
    fn apply_commands(&mut self, now: Duration) -> Result<bool, Stop> {
        let mut any = false;
        loop {
            match self.rx.try_recv() {
                Ok(ToLtp::Shutdown) | Err(TryRecvError::Disconnected) => return Err(Stop),
                Ok(cmd) => {
                    any = true;
                    self.apply(now, cmd);
                }
                Err(TryRecvError::Empty) => return Ok(any),
            }
        }
    }

    fn apply(&mut self, now: Duration, cmd: ToLtp) {
        match cmd {
            // Bundles wait in the adapter (in order) while the span's block queue is full; the
            // agent thread's window bounds that backlog.
            // The stored bytes are read and checked against the store's CRC here, on the LTP
            // thread, not on the agent's.
            ToLtp::Item {
                peer,
                token,
                bundle,
            } => match bundle.into_bytes() {
                Ok(bundle) => self.cla.send(now, peer, token, bundle, true),
                Err(error) => self.unreadable.push((token, error)),
            },
            ToLtp::Confirm { session, ok } => {
                self.cla.confirm(now, session, ok);
            }
            ToLtp::AcceptImports(accept) => self.cla.set_accepting_imports(accept),
            ToLtp::Link {
                peer,
                up: true,
                rate_bps,
                owlt,
            } => {
                self.cla.link_up(now, peer, Some(rate_bps), owlt);
            }
            ToLtp::Link {
                peer, up: false, ..
            } => {
                self.cla.link_down(now, peer);
            }
            ToLtp::Shutdown => {}
        }
    }

    /// Receives one batch and feeds it to the adapter. True when anything arrived.
    fn receive(&mut self, now: Duration, io: &mut Io) -> std::io::Result<bool> {
        use std::sync::atomic::Ordering::Relaxed;
        let n = match io
            .recv
            .recv_uninit(&self.sock, &mut io.arenas, &mut io.meta)
        {
            Ok(n) => n,
            // An ICMP error from an earlier send (a peer that is down) surfaces here as
            // ECONNREFUSED and similar: the peer's absence is LTP's business (timers).
            Err(e) if transient(&e) => 0,
            Err(e) => return Err(e),
        };
        if let Some(d) = io.meta.iter().take(n).filter_map(|m| m.drops).max() {
            self.counters.socket_drops.fetch_max(u64::from(d), Relaxed);
        }
        for (a, m) in io.arenas.iter_mut().zip(&io.meta).take(n) {
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
                    .cla
                    .handle_datagram(now, &dg, |e| source.allows(m.src, e))
                {
                    Ok(()) => {}
                    Err(fec::StackError::Ltp(ltp::RecvError::WrongSource(_))) => {
                        self.counters.wrong_source.fetch_add(1, Relaxed);
                    }
                    Err(fec::StackError::Ltp(ltp::RecvError::Unauthenticated(..))) => {
                        self.counters.auth_rejected.fetch_add(1, Relaxed);
                    }
                    Err(_) => {
                        self.counters.malformed.fetch_add(1, Relaxed);
                    }
                }
            }
            self.counters.segments_received.fetch_add(count, Relaxed);
        }
        Ok(n > 0)
    }

    /// Hands the adapter's events (blocks, outcomes) to the agent thread.
    fn forward_events(&mut self, now: Duration) -> Result<(), Stop> {
        for (token, error) in self.unreadable.drain(..) {
            self.tx
                .send(AgentInput::Ltp(FromLtp::Unreadable { token, error }))
                .map_err(|_| Stop)?;
        }
        while let Some(ev) = self.cla.poll_event(now) {
            let msg = match ev {
                LtpEvent::Block(b) => {
                    // The per-block work (split, CRCs, staging) is the block thread's: done
                    // here it kept this thread from its socket for the length of a block.
                    self.blocks.send(b).map_err(|_| Stop)?;
                    continue;
                }
                LtpEvent::Outcome(o) => FromLtp::Outcome(o),
            };
            self.tx.send(AgentInput::Ltp(msg)).map_err(|_| Stop)?;
        }
        Ok(())
    }

    /// Sends everything the adapter has to send now: segment headers are encoded into `out`,
    /// block data stays in the blocks (zero-copy slices) and both leave as two iovecs per
    /// datagram; runs of datagrams to one peer leave in one call. True when anything left.
    fn transmit(&mut self, now: Duration, io: &mut Io) -> std::io::Result<bool> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut any = false;
        loop {
            io.out.clear();
            io.pending.clear();
            while io.pending.len() < self.batch {
                let Some(t) = self.cla.poll_transmit_vectored(now, &mut io.out) else {
                    break;
                };
                io.pending.push((
                    t.remote_engine,
                    io.out.len() - t.header_len,
                    t.header_len,
                    t.payload,
                ));
            }
            if io.pending.is_empty() {
                return Ok(any);
            }
            any = true;
            self.counters
                .segments_sent
                .fetch_add(io.pending.len() as u64, Relaxed);
            let mut i = 0;
            while i < io.pending.len() {
                let remote = io.pending.get(i).map_or(0, |p| p.0);
                // One small vector of (header, payload) slices per run (not per segment).
                let mut parts: Vec<(&[u8], &[u8])> = Vec::with_capacity(io.pending.len() - i);
                while let Some((r, off, len, payload)) = io.pending.get(i) {
                    if *r != remote {
                        break;
                    }
                    parts.push((io.out.get(*off..*off + *len).unwrap_or(&[]), payload));
                    i += 1;
                }
                if let Some(&addr) = self.addr_of.get(&remote) {
                    match io.send.send_vectored(&self.sock, &parts, addr) {
                        Ok(_) => {}
                        Err(e) if transient(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Sleeps until the socket is readable (data, or a wake-up from the agent) or the next
    /// timer.
    fn sleep(&self) -> std::io::Result<()> {
        let now = self.start.elapsed();
        let wait = match self.cla.poll_timeout() {
            Some(t) if t <= now => return Ok(()),
            Some(t) => (t - now).min(Duration::from_millis(100)),
            None => Duration::from_millis(100),
        };
        match wait_readable(&self.sock, wait) {
            Ok(_) => Ok(()),
            Err(e) if transient(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn published(&self) -> Published {
        let engine = self.cla.engine();
        Published {
            rates: self
                .cla
                .peers()
                .filter(|(_, e)| {
                    engine
                        .span_config(*e)
                        .is_some_and(|c| c.adaptive_rate.is_some())
                })
                .map(|(p, e)| (p, e, 0))
                .collect(),
            spans_at: Instant::now(),
            fec_peers: self
                .cla
                .peers()
                .filter(|(_, e)| self.cla.fec().has_span(*e))
                .collect(),
            fec_last: BTreeMap::new(),
        }
    }

    /// Copies what changed into the counters the status reply reads.
    fn publish(&self, p: &mut Published) {
        use std::sync::atomic::Ordering::Relaxed;
        let engine = self.cla.engine();
        let c = &self.counters;
        c.export_sessions
            .store(engine.export_sessions() as u64, Relaxed);
        c.import_sessions
            .store(engine.import_sessions() as u64, Relaxed);
        let st = self.cla.stats();
        c.blocks_received.store(st.blocks_received, Relaxed);
        c.exports_completed.store(st.exports_completed, Relaxed);
        c.exports_cancelled.store(st.exports_cancelled, Relaxed);
        c.exports_refused.store(st.exports_refused, Relaxed);
        self.publish_deviations();
        crate::hardening_status::publish_ltp_admission(
            engine,
            self.cla.peers().map(|(_, e)| e),
            &c.admission,
        );
        self.publish_span_totals();
        self.publish_adaptive_rates(&mut p.rates);
        c.spans.publish_due(&mut p.spans_at, &self.cla);
        c.fec.publish(self.cla.fec(), &p.fec_peers, &mut p.fec_last);
    }

    /// Copies the engine's deviation counts into the status counters; the first occurrence of
    /// each kind is also logged, as TCPCL does for its peers' deviations.
    fn publish_deviations(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.cla.engine().stats().deviations;
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
    fn publish_span_totals(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let (mut retx, mut timeouts) = (0, 0);
        let engine = self.cla.engine();
        for s in self.cla.peers().filter_map(|(_, e)| engine.span_stats(e)) {
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
            let Some(rate) = self.cla.engine().span_pacing_rate(*engine) else {
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
}

/// Bytes of one receive slot: a maximal (GRO-coalesced) UDP payload.
const RX_SLOT: usize = udpio::GRO_BUFFER;
/// Size of one receive arena: datagrams are received into its free tail and split off as
/// shared `Bytes`, so a datagram costs no allocation (one allocation per arena instead). An
/// arena is freed when the last slice of it is dropped: the engine copies red data into its
/// block at once, but a block carried in one segment keeps its slice until delivered, which
/// is why arenas stay small.
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
