//! One TCPCL session on a real socket: a thread that drives a `tcpcl::AnySession` (sans-IO,
//! TCPCLv4 or TCPCLv3) with the OS clock, a non-blocking `TcpStream` and an eventfd for the
//! agent's wake-ups. A session we open speaks the peer's configured version (`[[tcp_peer]]
//! version`); a session we accept speaks the version of the peer's contact header (v3 only
//! with `[tcpcl] accept_v3`).
//!
//! Loop: commands from the agent (bundles to send) → read the socket in large chunks → timers →
//! events (to the agent) → refill the output from the session (up to its 4 MiB chunk) only once
//! the previous output is fully written, and write it with as few calls as the kernel allows →
//! `poll(2)` on the socket and the eventfd until something happens or the next timer.
//!
//! Copies: on plain TCP, bundle data crosses user space without being copied. Output is taken
//! as a list of `Bytes` (`poll_transmit_vectored`: segment data are slices of the bundles) and
//! written with `writev`, at most [`MAX_IOV`] parts per call. While a segment's data is
//! arriving, the session offers its reassembly buffer (`payload_buf`) and the socket is read
//! straight into it (`payload_filled`); headers and control messages go through a 1 MiB read
//! buffer and `handle_input` (16 KiB right after a direct read, so that little of the next
//! segment's data is read, and copied, along with its header). Under TLS rustls copies anyway (it encrypts from and decrypts
//! into its own buffers), so the session's flat forms are used there.
//!
//! Back-pressure: while the output buffer still holds unwritten octets the session is not
//! asked for more; bundles the session cannot queue yet (`QueueFull`) wait here in order. The
//! socket is still read while output is backed up (a peer sending to us while we send to it
//! would otherwise deadlock both sides, each waiting for the other to read), but at most
//! [`BACKED_UP_READ_LIMIT`] octets per backed-up period: the acknowledgments those octets
//! cause wait inside the session, and a peer that sends without ever reading must not make
//! them grow without bound.
//!
//! Results: every bundle handed to the session gets exactly one result: acknowledged
//! (`FromCla::Done` ok; also a refusal with reason "Completed": the peer already has it),
//! refused for lack of resources ("No Resources", "Retransmit": `FromCla::Refused`, the agent
//! keeps it and backs off from that neighbour), or failed (session ended) so the agent forwards
//! it again. Other refusals and bundles that cannot be sent at all are reported failed after a
//! delay, so a peer that keeps refusing does not make the agent spin.
//!
//! Limits (`crate::tcpcl_limits`): a session without keepalives ends after `[tcpcl]
//! idle_timeout_s` of silence; an established session beyond `max_sessions_per_peer`, or whose
//! TLS certificate does not carry the peer's node id (`[tcpcl.tls] check_node_id`), ends at
//! once and nothing it sends is stored.
//!
//! Durability: sessions run with `defer_final_ack`: the XFER_ACK of a transfer's last segment
//! (v3: the ACK_SEGMENT acknowledging a bundle's last octet, and every answer after it) is held
//! until the agent has committed the bundle (the agent answers through
//! `SessionHandle::confirm` after `accept_from_cla_batch`); if the store refuses it, the session
//! sends XFER_REFUSE "Retransmit" instead (v3: REFUSE_BUNDLE "Retransmit" or, without negotiated
//! refusals, SHUTDOWN "Busy") and the sender keeps its copy. A node killed between
//! reception and commit therefore loses nothing the sender deleted. A transfer whose announced
//! length exceeds the store's free quota is refused at its first segment ("No Resources").

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use tcpcl::{AnySession, Event, RefuseReason, Role, SendError, SessTermReason, SessionConfig};

use crate::config::{TcpPeer, Tcpcl};
use crate::counters::TcpclCounters;
use crate::messages::{eventfd, AgentInput, FromCla, SessionHandle, ToSession, SESSION_QUEUE};
use crate::tcpcl_tls::Tls;
use bp::StagedPiece;

/// What every session thread shares.
#[derive(Debug, Clone)]
pub(crate) struct TcpclShared {
    pub(crate) cfg: Tcpcl,
    /// This node's id (`ipn:N.0`), sent in SESS_INIT.
    pub(crate) local_node_id: String,
    pub(crate) peers: Arc<Vec<TcpPeer>>,
    pub(crate) agent: SyncSender<AgentInput>,
    pub(crate) counters: Arc<TcpclCounters>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) next_id: Arc<AtomicU64>,
    /// Free store quota in bytes, kept current by the agent thread: transfers announcing
    /// more are refused at their first segment.
    pub(crate) free_bytes: Arc<AtomicU64>,
    /// Set by the agent thread's ingress gate while the applications fall behind: sessions
    /// do not read their sockets, so TCP's flow control holds the peers back.
    pub(crate) ingress_paused: Arc<AtomicBool>,
    /// Live sessions per IP address and node id (`[tcpcl]` caps, `crate::tcpcl_limits`).
    pub(crate) counts: Arc<crate::tcpcl_limits::SessionCounts>,
    /// The store's staging files (a store on disk): received bundles of
    /// [`crate::staging::stage_from`] bytes and more are written there by the session thread,
    /// so the agent only validates and commits them.
    pub(crate) stager: Option<bp::Stager>,
}

impl TcpclShared {
    /// The neighbour a node id belongs to: a configured peer announcing it, else the ipn node
    /// number itself; None for a `dtn:` node that is not configured.
    pub(crate) fn peer_of(&self, node_id: &str) -> Option<u64> {
        if let Some(p) = self.peers.iter().find(|p| p.node_id == node_id) {
            return Some(p.peer);
        }
        match node_id.parse::<bpv7::Eid>() {
            Ok(bpv7::Eid::Ipn { node, .. }) if node != 0 => Some(node),
            _ => None,
        }
    }
}

/// Read buffer: one `read` takes up to this much, handed whole to the session.
const READ_BUF: usize = 1 << 20;
/// Largest read straight into a reassembly buffer. The session zero-fills what it offers the
/// first time; a quarter MiB stays in the cache between that and the kernel's write into it.
const DIRECT_READ: usize = 256 << 10;
/// Read size at a message boundary right after a direct read: the stream is carrying large
/// segments, so read little more than the next header and let the direct path take the data
/// (octets past the header that land in the read buffer are copied by `handle_input`).
const BOUNDARY_READ: usize = 16 << 10;
/// Parts per `writev` (Linux allows 1024; 64 covers 32 segments, whole chunks at 1 MB).
const MAX_IOV: usize = 64;
/// Reads per loop iteration before the other work gets a turn.
const READS_PER_TURN: usize = 16;
/// Octets read while our output is backed up, before reading pauses until it drains.
const BACKED_UP_READ_LIMIT: usize = 64 << 20;
/// Delay before a refused or unsendable bundle is reported failed.
const REFUSED_RETRY: Duration = Duration::from_secs(1);
/// Time allowed for an orderly end at node shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Bound on the TLS handshake after the contact headers.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A bundle handed to the session (possibly as several fragments sharing its token).
#[derive(Default)]
struct Outgoing {
    parts_left: u32,
    failed: bool,
}

struct Driver<'a> {
    shared: &'a TcpclShared,
    stream: TcpStream,
    session: AnySession,
    start: Instant,
    rx: Receiver<ToSession>,
    wake_fd: Arc<OwnedFd>,
    handle: Arc<SessionHandle>,
    /// The neighbour once established (None: unknown `dtn:` node).
    peer: Option<u64>,
    established: bool,
    /// Bundles the session could not queue yet.
    waiting: VecDeque<(u64, bp::HopBundle)>,
    outgoing: HashMap<u64, Outgoing>,
    /// Results to report later (refusals), by due time.
    delayed: VecDeque<(Instant, u64)>,
    done_ok: Vec<u64>,
    done_failed: Vec<u64>,
    /// Bundles the peer refused for lack of resources (the agent backs off).
    done_refused: Vec<u64>,
    /// Bundles whose stored bytes could not be read here (the agent keeps them).
    done_unreadable: Vec<(u64, bp::StoreError)>,
    /// Bundles received in this turn with their transfer ids: handed to the agent together
    /// (one store commit), whose answers release the held final acknowledgments.
    received: Vec<(u64, Bytes, Option<StagedPiece>)>,
    /// The incoming transfer being written to a staging file as it arrives (a store on disk).
    arriving: Option<super::arriving::Arriving>,
    /// Output not yet written, under TLS (plaintext for rustls): `out[out_pos..]`.
    out: Vec<u8>,
    out_pos: usize,
    /// Output not yet written, on plain TCP: `outv[outv_pos..]`, the first possibly
    /// advanced past a partial write.
    outv: Vec<Bytes>,
    outv_pos: usize,
    closing_since: Option<Instant>,
    last_stats: (u64, u64, u64),
    /// The peer's own counters (`tcpcl.peers`), fed once the session is established.
    peer_stats: Option<crate::cla_peer_stats::TcpSessionFeed>,
    /// Octets read since the output buffer last drained completely.
    backed_read: usize,
    /// The last read went straight into a reassembly buffer (see [`BOUNDARY_READ`]).
    after_direct: bool,
    /// The TLS server name of an active session's peer (we are then the TLS client).
    tls_name: Option<String>,
    /// Set by `Event::StartTls`: the handshake runs before the next read.
    tls_pending: bool,
    /// TLS below the session once started: every octet in and out goes through it.
    tls: Option<Tls>,
    /// Peer address, for log lines before the peer's node id is known.
    remote: String,
    /// poll(2) reported the socket hung up or failed (read it even while ingress is paused).
    hung_up: bool,
    /// Idle clock for sessions without keepalives (`[tcpcl] idle_timeout_s`).
    idle: crate::tcpcl_limits::IdleGuard,
    /// This session's count against `max_sessions_per_peer`, once established.
    peer_slot: Option<crate::tcpcl_limits::Slot>,
    /// The session was refused after SESS_INIT (a node id its certificate does not carry,
    /// too many sessions with that node): it ends, and nothing it sends is accepted.
    refused: bool,
}

/// How a session ended, for the connector's next attempt.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SessionEnd {
    /// The session was established.
    pub(crate) established: bool,
    /// The reconnection delay the peer asked for in its SHUTDOWN (v3), if any.
    pub(crate) reconnect_delay: Option<Duration>,
}

/// Runs one session on `stream` until it ends; `peer` is the configured peer an active session
/// was opened to.
pub(crate) fn run_session(
    shared: &TcpclShared,
    stream: TcpStream,
    active: bool,
    peer: Option<&TcpPeer>,
) -> SessionEnd {
    let Ok(wake_fd) = eventfd() else {
        eprintln!("dtnkit node: TCPCL: cannot create an eventfd");
        return SessionEnd::default();
    };
    if stream.set_nonblocking(true).is_err() {
        return SessionEnd::default();
    }
    let c = &shared.cfg;
    let mut cfg = SessionConfig::new(shared.local_node_id.clone());
    cfg.expected_peer_node_id = peer.map(|p| p.node_id.clone());
    cfg.keepalive = c.keepalive_s;
    cfg.segment_mru = c.segment_mru;
    cfg.hard_segment_limit = c.segment_mru;
    cfg.transfer_mru = c.transfer_mru;
    cfg.hard_transfer_limit = c.transfer_mru;
    cfg.max_segment_size = c.max_segment_size;
    cfg.exceed_peer_transfer_mru = peer.is_some_and(|p| p.exceed_peer_transfer_mru);
    // Nothing acknowledged is lost: each transfer's final XFER_ACK waits for the commit.
    cfg.defer_final_ack = true;
    // Bundles the session thread stages get their CRC-32C as they arrive (`stage`).
    cfg.checksum_received_from = shared
        .stager
        .as_ref()
        .filter(|s| s.on_disk())
        .map(|s| crate::staging::stage_from(s) as u64);
    // Reassembly buffers come from a small pool of this session's thread and go back to it
    // when the bundle is dropped (by the agent or the application writer): steady-state
    // transfers reuse mapped pages instead of faulting in and zeroing fresh ones
    // (`tcpcl::pool`; at most 4 buffers, 64 MiB).
    cfg.recycle_buffers = Some(tcpcl::BufferPool::default());
    cfg.can_tls = c.tls.is_some();
    cfg.require_tls = c.tls.as_ref().is_some_and(|t| t.require);
    cfg.v3.max_segment_size = c.v3_max_segment_size;
    let remote = stream
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    let start = Instant::now();
    let session = match peer {
        Some(p) if active => AnySession::active(p.version, cfg, Duration::ZERO),
        _ => AnySession::passive(cfg, c.accept_v3, Duration::ZERO),
    };
    let (tx, rx) = sync_channel(SESSION_QUEUE);
    let id = shared.next_id.fetch_add(1, Relaxed);
    let handle = Arc::new(SessionHandle::new(id, tx, wake_fd.clone()));
    shared.counters.sessions_open.fetch_add(1, Relaxed);
    let mut d = Driver {
        shared,
        stream,
        session,
        start,
        rx,
        wake_fd,
        handle,
        peer: None,
        established: false,
        waiting: VecDeque::new(),
        outgoing: HashMap::new(),
        delayed: VecDeque::new(),
        done_ok: Vec::new(),
        done_failed: Vec::new(),
        done_unreadable: Vec::new(),
        done_refused: Vec::new(),
        received: Vec::new(),
        arriving: shared
            .stager
            .as_ref()
            .filter(|s| s.on_disk())
            .map(|s| super::arriving::Arriving::new(crate::staging::stage_from(s))),
        out: Vec::new(),
        out_pos: 0,
        outv: Vec::new(),
        outv_pos: 0,
        closing_since: None,
        last_stats: (0, 0, 0),
        peer_stats: None,
        backed_read: 0,
        after_direct: false,
        tls_name: peer.and_then(|p| p.tls_name.clone()),
        tls_pending: false,
        tls: None,
        remote,
        hung_up: false,
        idle: crate::tcpcl_limits::IdleGuard::new(c.limits.idle_timeout),
        peer_slot: None,
        refused: false,
    };
    if let Err(e) = d.run() {
        let version = d
            .session
            .version()
            .map_or(String::new(), |v| format!(" ({v})"));
        if d.established {
            eprintln!(
                "dtnkit node: TCPCL session with {}{version} ended: {e}",
                d.session.peer_node_id().unwrap_or("?")
            );
        } else if e.kind() != ErrorKind::UnexpectedEof {
            eprintln!(
                "dtnkit node: TCPCL session with {}{version} failed before it was established: {e}",
                d.remote
            );
        }
    }
    let end = SessionEnd {
        established: d.established,
        reconnect_delay: d.session.peer_reconnect_delay().map(Duration::from_secs),
    };
    d.finish();
    shared.counters.sessions_open.fetch_sub(1, Relaxed);
    end
}

impl Driver<'_> {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn run(&mut self) -> std::io::Result<()> {
        let mut buf = vec![0u8; READ_BUF];
        loop {
            let now = self.now();
            if self.shared.stop.load(Relaxed) && self.closing_since.is_none() {
                self.begin_close(now);
            }
            if let Some(t) = self.closing_since {
                if t.elapsed() > SHUTDOWN_GRACE {
                    return Ok(());
                }
            }
            self.commands(now);
            // Read (bounded while our own output is backed up).
            let mut eof = false;
            if self.may_read() {
                for _ in 0..READS_PER_TURN {
                    // Segment data straight into the reassembly buffer when the session offers
                    // it (plain TCP only: TLS decrypts into its own buffer anyway).
                    let room = if self.tls.is_none() && !self.tls_pending {
                        self.session.payload_buf_uninit(DIRECT_READ)
                    } else {
                        None
                    };
                    let (read, direct) = match room {
                        Some(room) => (read_uninit(&self.stream, room), true),
                        None => {
                            let len = if self.after_direct {
                                BOUNDARY_READ
                            } else {
                                READ_BUF
                            };
                            let buf = buf.get_mut(..len).unwrap_or_default();
                            (self.read_some(buf), false)
                        }
                    };
                    if read.is_ok() {
                        self.after_direct = direct;
                    }
                    match read {
                        Ok(0) => {
                            eof = true;
                            break;
                        }
                        Ok(n) => {
                            self.idle.touch();
                            if self.backed_up() {
                                self.backed_read += n;
                            }
                            let now = self.now();
                            let result = if direct {
                                // SAFETY: `read_uninit` initialised the first n octets of the
                                // room `payload_buf_uninit` just gave, and the session was not
                                // called in between.
                                unsafe { self.session.payload_filled_uninit(now, n) }
                            } else {
                                self.session.handle_input(now, buf.get(..n).unwrap_or(&[]))
                            };
                            if let Err(e) = result {
                                self.events();
                                self.flush_transmit_blocking();
                                return Err(std::io::Error::other(e.to_string()));
                            }
                            self.events();
                            self.follow_arriving();
                            if self.tls_pending {
                                self.tls_pending = false;
                                if let Err(e) = self.start_tls() {
                                    self.session.connection_lost(self.now());
                                    self.events();
                                    return Err(e);
                                }
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => {
                            self.session.connection_lost(self.now());
                            self.events();
                            return Err(e);
                        }
                    }
                }
            }
            if eof {
                self.session.connection_lost(self.now());
                self.events();
                return Ok(());
            }
            let now = self.now();
            if self.session.poll_timeout().is_some_and(|t| t <= now) {
                self.session.handle_timeout(now);
            }
            if self.established
                && self.closing_since.is_none()
                && self.idle.expired(self.session.keepalive())
            {
                self.shared.counters.refused("idle_timeout");
                self.end_session(now, SessTermReason::IdleTimeout);
            }
            self.feed_session();
            self.events();
            // Write.
            if let Err(e) = self.write_out() {
                self.session.connection_lost(self.now());
                self.events();
                return Err(e);
            }
            self.events();
            self.report();
            if self.session.is_closed() {
                self.flush_transmit_blocking();
                if let Some(tls) = self.tls.as_mut() {
                    tls.close();
                    let _ = tls.flush(&mut self.stream);
                }
                return Ok(());
            }
            self.wait()?;
        }
    }

    fn may_read(&self) -> bool {
        // While the node's ingress is paused an established session reads nothing, so the
        // peer is held back by TCP's flow control; a socket that hung up meanwhile is read to
        // notice the end, and a session still being set up is read to its end.
        (!self.backed_up() || self.backed_read < BACKED_UP_READ_LIMIT)
            && (!self.shared.ingress_paused.load(Relaxed) || self.hung_up || !self.established)
    }

    /// Output taken from the session is not fully written yet (so no more is taken).
    fn backed_up(&self) -> bool {
        self.out_pos < self.out.len() || self.outv_pos < self.outv.len()
    }

    /// Takes the session's next output once everything before it is written; returns its
    /// length (0: nothing to send). Flat under TLS, vectored on plain TCP.
    fn refill(&mut self) -> usize {
        self.backed_read = 0;
        let now = self.now();
        if self.tls.is_some() {
            self.out.clear();
            self.out_pos = 0;
            self.session.poll_transmit(now, &mut self.out)
        } else {
            self.outv.clear();
            self.outv_pos = 0;
            self.session.poll_transmit_vectored(now, &mut self.outv)
        }
    }

    /// Drops the first `n` octets of the vectored output (written by `writev`).
    fn advance_outv(&mut self, mut n: usize) {
        while n > 0 {
            let Some(part) = self.outv.get_mut(self.outv_pos) else {
                return;
            };
            if n < part.len() {
                part.advance(n);
                return;
            }
            n -= part.len();
            // Written: release the bundle's memory now rather than at the next refill.
            *part = Bytes::new();
            self.outv_pos += 1;
        }
    }

    /// Applies the agent's commands.
    fn commands(&mut self, now: Duration) {
        for (transfer, ok) in self.handle.take_confirms() {
            if !ok {
                self.shared
                    .counters
                    .transfers_refused_by_us
                    .fetch_add(1, Relaxed);
            }
            // Unknown: the session closed meanwhile (the sender will forward it again).
            let _ = self.session.confirm_transfer(now, transfer, ok);
        }
        loop {
            match self.rx.try_recv() {
                Ok(ToSession::Send { token, bundle }) => self.waiting.push_back((token, bundle)),
                Ok(ToSession::Close) => self.begin_close(now),
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => break,
            }
        }
    }

    fn begin_close(&mut self, now: Duration) {
        self.end_session(now, SessTermReason::Unknown);
    }

    /// Starts the orderly end of the session (SESS_TERM with `reason`), bounded by
    /// [`SHUTDOWN_GRACE`].
    fn end_session(&mut self, now: Duration, reason: SessTermReason) {
        if self.closing_since.is_none() {
            self.closing_since = Some(Instant::now());
            self.session.close(now, reason);
        }
    }

    /// Checks an established session against the node's policy: the peer's certificate must
    /// carry its node id (RFC 9174 4.4.1, `[tcpcl.tls] check_node_id`), and the peer may not
    /// exceed `max_sessions_per_peer`. A refused session ends (SESS_TERM "Contact Failure" or
    /// "Busy"), is counted, and never carries bundles.
    fn admit_established(&mut self, now: Duration, peer_node_id: &str) -> bool {
        let check_cert = self
            .shared
            .cfg
            .tls
            .as_ref()
            .is_some_and(|t| t.check_node_id);
        if let (true, Some(tls)) = (check_cert, self.tls.as_ref()) {
            let sans = tls.peer_uri_sans();
            if !sans.iter().any(|u| u == peer_node_id) {
                self.shared.counters.refused("node_id_not_in_certificate");
                eprintln!(
                    "dtnkit node: TCPCL session from {} refused: node id {peer_node_id} is not a URI subject alternative name of its certificate ({}; RFC 9174 4.4.1, [tcpcl.tls] check_node_id)",
                    self.remote,
                    if sans.is_empty() {
                        "it has none".to_string()
                    } else {
                        format!("it has {}", sans.join(", "))
                    }
                );
                self.end_session(now, SessTermReason::ContactFailure);
                return false;
            }
        }
        let limit = self.shared.cfg.limits.max_sessions_per_peer;
        match self.shared.counts.take_peer(peer_node_id, limit) {
            Some(slot) => {
                self.peer_slot = Some(slot);
                true
            }
            None => {
                self.shared.counters.refused("per_peer");
                eprintln!(
                    "dtnkit node: TCPCL session with {peer_node_id} refused: {limit} sessions with \
                     it already open (tcpcl.max_sessions_per_peer)"
                );
                self.end_session(now, SessTermReason::Busy);
                false
            }
        }
    }

    /// Moves waiting bundles into the session while it has room.
    fn feed_session(&mut self) {
        if !self.established {
            return;
        }
        while let Some((token, hop)) = self.waiting.pop_front() {
            // The stored bytes are read and checked against the store's CRC here, on the
            // session's thread, not on the agent's. A relayed bundle's new head and the stored
            // bytes behind it stay two parts, written with one `writev` (no copy to join them).
            let (head, tail) = match hop.into_parts() {
                Ok(parts) => parts,
                Err(e) => {
                    self.done_unreadable.push((token, e));
                    continue;
                }
            };
            match self
                .session
                .send_bundle_parts(head.clone(), tail.clone(), token)
            {
                Ok(_) => {
                    self.outgoing.entry(token).or_default().parts_left += 1;
                    self.shared.counters.transfers_sent.fetch_add(1, Relaxed);
                }
                Err(SendError::QueueFull) => {
                    let key = bp::BundleKey::from_token(token);
                    self.waiting
                        .push_front((token, bp::HopBundle::from_parts(key, head, tail)));
                    return;
                }
                Err(SendError::TooLarge { mru, .. }) => {
                    let bundle = if head.is_empty() {
                        tail
                    } else {
                        Bytes::from([&head[..], &tail[..]].concat())
                    };
                    self.send_fragmented(token, bundle, mru)
                }
                Err(SendError::NotEstablished)
                | Err(SendError::Terminating)
                | Err(SendError::IdsExhausted) => {
                    // The session is ending: these go back to the agent.
                    self.done_failed.push(token);
                }
                Err(SendError::Empty) => self.delay_failure(token),
            }
        }
    }

    /// A bundle larger than the peer's transfer MRU: fragmented (RFC 9171 5.8) into
    /// transfers that fit, all under the bundle's token; `Sent` once every one is acknowledged.
    fn send_fragmented(&mut self, token: u64, bundle: Bytes, mru: u64) {
        let limit = usize::try_from(mru).unwrap_or(usize::MAX);
        let frags = bpv7::bundle::Bundle::decode(bundle)
            .map_err(|e| e.to_string())
            .and_then(|b| bpv7::fragment::fragment(&b, limit).map_err(|e| e.to_string()));
        let frags = match frags {
            Ok(f) => f,
            Err(why) => {
                eprintln!(
                    "dtnkit node: TCPCL: bundle exceeds the transfer MRU {mru} of {} and cannot be fragmented ({why}); retried later (set exceed_peer_transfer_mru for peers that under-advertise)",
                    self.session.peer_node_id().unwrap_or("?")
                );
                self.delay_failure(token);
                return;
            }
        };
        self.shared
            .counters
            .bundles_fragmented
            .fetch_add(1, Relaxed);
        for f in frags {
            match self.session.send_bundle(Bytes::from(f.encode()), token) {
                Ok(_) => {
                    self.outgoing.entry(token).or_default().parts_left += 1;
                    self.shared.counters.transfers_sent.fetch_add(1, Relaxed);
                }
                Err(_) => {
                    // Part of the bundle could not be queued: the whole bundle fails once the
                    // parts already queued are reported.
                    let o = self.outgoing.entry(token).or_default();
                    o.failed = true;
                    if o.parts_left == 0 {
                        self.outgoing.remove(&token);
                        self.done_failed.push(token);
                    }
                    return;
                }
            }
        }
    }

    fn delay_failure(&mut self, token: u64) {
        self.delayed
            .push_back((Instant::now() + REFUSED_RETRY, token));
    }

    /// One part of a bundle failed for a reason a retry may not cure at once: reported after
    /// [`REFUSED_RETRY`], so a peer that keeps refusing does not make the agent spin.
    fn part_done_delayed(&mut self, token: u64) {
        let Some(o) = self.outgoing.get_mut(&token) else {
            return;
        };
        o.parts_left = o.parts_left.saturating_sub(1);
        o.failed = true;
        if o.parts_left == 0 {
            self.outgoing.remove(&token);
            self.delay_failure(token);
        }
    }

    /// One part of a bundle finished (`ok`: acknowledged; `refused`: the peer refused it for
    /// lack of resources, reported as such so that the agent backs off).
    fn part_done(&mut self, token: u64, ok: bool, refused: bool) {
        let Some(o) = self.outgoing.get_mut(&token) else {
            return;
        };
        o.parts_left = o.parts_left.saturating_sub(1);
        o.failed |= !ok;
        if o.parts_left > 0 {
            return;
        }
        let failed = o.failed;
        self.outgoing.remove(&token);
        if !failed {
            self.done_ok.push(token);
        } else if refused {
            self.done_refused.push(token);
        } else {
            self.done_failed.push(token);
        }
    }

    fn events(&mut self) {
        let c = &self.shared.counters;
        while let Some(ev) = self.session.poll_event() {
            match ev {
                Event::StartTls { .. } => {
                    if self.shared.cfg.tls.is_some() {
                        // Run by the read loop right after this input (see `start_tls`).
                        self.tls_pending = true;
                    } else {
                        // Only sent when we set CAN_TLS, which needs `[tcpcl.tls]`.
                        self.begin_close(self.start.elapsed());
                    }
                }
                Event::Established {
                    peer_node_id,
                    tls_requested_by_both,
                    ..
                } => {
                    self.established = true;
                    c.sessions_established.fetch_add(1, Relaxed);
                    if self.session.version() == Some(tcpcl::Version::V3) {
                        c.sessions_v3.fetch_add(1, Relaxed);
                    }
                    if tls_requested_by_both && self.tls.is_some() {
                        c.sessions_tls.fetch_add(1, Relaxed);
                    }
                    if !self.admit_established(self.start.elapsed(), &peer_node_id) {
                        self.refused = true;
                        continue;
                    }
                    self.peer = self.shared.peer_of(&peer_node_id);
                    self.peer_stats = self.peer.map(|p| c.peers.session(p));
                    if let Some(peer) = self.peer {
                        let _ = self.shared.agent.send(AgentInput::Cla(FromCla::SessionUp {
                            peer,
                            handle: self.handle.clone(),
                        }));
                    } else {
                        eprintln!(
                            "dtnkit node: TCPCL session with {peer_node_id}: not an ipn node and not configured; bundles from it are accepted, none are routed to it"
                        );
                    }
                }
                Event::TransferStarted {
                    transfer_id,
                    total_len,
                } => {
                    if let Some(a) = self.arriving.as_mut() {
                        a.announced(transfer_id, total_len);
                    }
                    let free = self.shared.free_bytes.load(Relaxed);
                    if total_len.is_some_and(|l| l > free)
                        && self
                            .session
                            .refuse_transfer(transfer_id, RefuseReason::NoResources)
                            .is_ok()
                    {
                        c.transfers_refused_by_us.fetch_add(1, Relaxed);
                    }
                }
                Event::BundleReceived {
                    transfer_id,
                    bundle,
                    crc32c,
                } => {
                    c.bundles_received.fetch_add(1, Relaxed);
                    let staged = self.stage(transfer_id, &bundle, crc32c);
                    if staged.is_some() {
                        c.bundles_staged.fetch_add(1, Relaxed);
                    }
                    self.received.push((transfer_id, bundle, staged));
                }
                Event::TransferAcked { token } => {
                    c.transfers_acked.fetch_add(1, Relaxed);
                    self.part_done(token, true, false);
                }
                Event::TransferRefused { token, reason } => {
                    c.transfers_refused.fetch_add(1, Relaxed);
                    // "Completed": the peer already has the bundle. "No Resources" and
                    // "Retransmit": its store is full or failed; the agent backs off.
                    let ok = reason == RefuseReason::Completed;
                    let refused =
                        matches!(reason, RefuseReason::NoResources | RefuseReason::Retransmit);
                    if !ok && !refused {
                        // Another refusal (not acceptable...): retried after a delay.
                        self.part_done_delayed(token);
                    } else {
                        self.part_done(token, ok, refused);
                    }
                }
                Event::TransferFailed { token } => {
                    c.transfers_failed.fetch_add(1, Relaxed);
                    self.part_done(token, false, false);
                }
                Event::MessageRejected {
                    reason,
                    rejected_type,
                } => {
                    eprintln!(
                        "dtnkit node: TCPCL peer {} rejected our message type {rejected_type:#04x}: {reason:?}",
                        self.session.peer_node_id().unwrap_or("?")
                    );
                }
                Event::ProtocolDeviation { what } => {
                    if c.deviation(&format!("{what:?}")) {
                        eprintln!(
                            "dtnkit node: TCPCL peer {} deviates from {} (tolerated, counted in status tcpcl.deviations): {what}",
                            self.session.peer_node_id().unwrap_or("?"),
                            self.session.version().map_or("its RFC", |v| v.rfc())
                        );
                    }
                }
                Event::Terminated { .. } => {}
            }
        }
        // Session byte and deviation counters into the node's totals.
        let st = self.session.stats();
        let (sent, recv, dev) = self.last_stats;
        c.bytes_sent
            .fetch_add(st.bytes_sent.saturating_sub(sent), Relaxed);
        c.bytes_received
            .fetch_add(st.bytes_received.saturating_sub(recv), Relaxed);
        c.deviation_events
            .fetch_add(st.deviations.saturating_sub(dev), Relaxed);
        self.last_stats = (st.bytes_sent, st.bytes_received, st.deviations);
        if let Some(f) = &mut self.peer_stats {
            f.feed(st);
        }
    }

    /// Writes what the incoming transfer added since the last input into its staging file
    /// ([`super::arriving`]), while those octets are still in the cache.
    fn follow_arriving(&mut self) {
        if let (Some(a), Some(stager)) = (self.arriving.as_mut(), self.shared.stager.as_ref()) {
            a.follow(stager, self.session.incoming_data());
        }
    }

    /// Checks a large received bundle's block CRCs and makes it a staged bundle of the store
    /// (synced when the store is durable), so that the agent adopts the file instead of
    /// writing the bytes itself and does not compute the CRCs again; `None` for a small bundle,
    /// a store without staging files, a bundle that does not decode or whose CRCs fail (the
    /// agent refuses and counts it as for any other; a file written as it arrived is deleted)
    /// or a failure (the agent then writes the bytes as for any bundle, and reports a store
    /// that fails).
    ///
    /// A transfer followed as it arrived ([`super::arriving`]) has all but its last octets
    /// in its file already; otherwise (a bundle that arrived in one read, a copied path) the
    /// whole bundle is written here.
    ///
    /// `crc32c`: the CRC-32C of the bundle's octets, computed by the session as they arrived
    /// (`SessionConfig::checksum_received_from`). The block CRCs are then checked from it
    /// (`bpv7::crc::bundle_crcs_hold`: the payload block's without a pass over it) and it is
    /// the staged piece's checksum: no pass over the payload at all here, where the decode's
    /// verification and the staging checksum made two over memory the reads left the cache.
    fn stage(
        &mut self,
        transfer_id: u64,
        bundle: &Bytes,
        crc32c: Option<u32>,
    ) -> Option<StagedPiece> {
        let checked = self.stage_check(bundle, crc32c);
        let arriving = match (self.arriving.as_mut(), checked, crc32c) {
            (Some(a), true, Some(crc)) => {
                if a.gave_up(transfer_id) {
                    return None;
                }
                a.complete(transfer_id, bundle, crc)
            }
            (Some(a), _, _) => {
                a.discard(transfer_id);
                None
            }
            (None, _, _) => None,
        };
        if !checked {
            return None;
        }
        let f = match arriving {
            Some(f) => f,
            None => {
                let mut f = self.shared.stager.as_ref()?.create().ok()?;
                f.write_bundle(bundle, crc32c).ok()?;
                f
            }
        };
        f.finish().ok()?.piece(0)
    }

    /// Whether `bundle` is to be staged: a store with staging files, at least the staging
    /// size, a bundle that decodes with valid block CRCs.
    fn stage_check(&self, bundle: &Bytes, crc32c: Option<u32>) -> bool {
        let Some(stager) = self.shared.stager.as_ref() else {
            return false;
        };
        if bundle.len() < crate::staging::stage_from(stager) {
            return false;
        }
        match crc32c {
            Some(crc) => {
                let structure_only = bpv7::DecodeLimits {
                    verify_crc: false,
                    ..bpv7::DecodeLimits::default()
                };
                bpv7::Bundle::decode_with_limits(bundle.clone(), &structure_only).is_ok()
                    && bpv7::crc::bundle_crcs_hold(bundle, crc)
            }
            None => bpv7::Bundle::decode(bundle.clone()).is_ok(),
        }
    }

    /// Sends received bundles and due results to the agent, one message of each kind.
    fn report(&mut self) {
        if self.refused {
            // Nothing from a refused session is stored (its final acknowledgments stay held
            // until the session ends, so its sender keeps the bundles).
            self.received.clear();
        }
        if !self.received.is_empty() {
            let n = self.received.len();
            let (mut ids, mut bundles, mut staged, mut crc_checked) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            for (id, bundle, piece) in std::mem::take(&mut self.received) {
                ids.push(id);
                // A staged bundle's CRCs were checked as it was written; the others' here.
                crc_checked.push(piece.is_some() || bp::crcs_ok(&bundle));
                bundles.push(bundle);
                staged.push(piece);
            }
            let _ = self.shared.agent.send(AgentInput::Cla(FromCla::Received {
                peer: self.peer,
                bundles,
                staged,
                crc_checked,
                confirm: Some((self.handle.clone(), ids)),
            }));
        }
        let now = Instant::now();
        while self.delayed.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, token)) = self.delayed.pop_front() {
                self.done_failed.push(token);
            }
        }
        if !self.done_ok.is_empty() {
            let tokens = std::mem::take(&mut self.done_ok);
            let _ = self
                .shared
                .agent
                .send(AgentInput::Cla(FromCla::Done { tokens, ok: true }));
        }
        if !self.done_failed.is_empty() {
            let tokens = std::mem::take(&mut self.done_failed);
            let _ = self
                .shared
                .agent
                .send(AgentInput::Cla(FromCla::Done { tokens, ok: false }));
        }
        if !self.done_refused.is_empty() {
            let tokens = std::mem::take(&mut self.done_refused);
            let _ = self
                .shared
                .agent
                .send(AgentInput::Cla(FromCla::Refused { tokens }));
        }
        for (token, error) in self.done_unreadable.drain(..) {
            let _ = self
                .shared
                .agent
                .send(AgentInput::Cla(FromCla::Unreadable { token, error }));
        }
    }

    /// Reads session input: from the socket, or decrypted from TLS once it is up.
    fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(tls) = self.tls.as_mut() else {
            return self.stream.read(buf);
        };
        loop {
            match tls.read_plain(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                r => return r,
            }
            // Nothing decrypted yet: more TLS records from the socket (WouldBlock ends the turn).
            let n = tls.read_socket(&mut self.stream);
            if matches!(&n, Err(e) if e.kind() == ErrorKind::InvalidData) {
                let _ = tls.flush(&mut self.stream);
            }
            if n? == 0 {
                return Ok(0);
            }
        }
    }

    /// `Event::StartTls`: flushes our plaintext (contact header), starts rustls (client when
    /// we opened the connection), feeds it the octets read past the peer's contact header and
    /// runs the handshake on the non-blocking socket, bounded in time. SESS_INIT then goes over
    /// TLS.
    fn start_tls(&mut self) -> std::io::Result<()> {
        self.flush_transmit_blocking();
        if self.backed_up() {
            // Plaintext output left over would otherwise never be written (TLS output is
            // taken flat from the session from now on).
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                "our contact header could not be written before the TLS handshake",
            ));
        }
        let Some(settings) = self.shared.cfg.tls.as_ref() else {
            return Err(std::io::Error::other("TLS requested without [tcpcl.tls]"));
        };
        let name = match self.session.role() {
            Role::Active => Some(self.tls_name.as_deref().unwrap_or("")),
            Role::Passive => None,
        };
        let mut tls = Tls::new(settings, name)?;
        let deadline = Instant::now() + TLS_HANDSHAKE_TIMEOUT;
        let result = (|| {
            tls.feed(&self.session.take_tls_leftover())?;
            while tls.is_handshaking() {
                let all_out = tls.flush(&mut self.stream)?;
                if Instant::now() > deadline || self.shared.stop.load(Relaxed) {
                    return Err(std::io::Error::new(
                        ErrorKind::TimedOut,
                        "TLS handshake did not complete",
                    ));
                }
                let mut events = libc::POLLIN;
                if !all_out {
                    events |= libc::POLLOUT;
                }
                let mut fd = libc::pollfd {
                    fd: self.stream.as_raw_fd(),
                    events,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe { libc::poll(&mut fd, 1, 50) };
                match tls.read_socket(&mut self.stream) {
                    Ok(0) => {
                        return Err(std::io::Error::new(
                            ErrorKind::ConnectionAborted,
                            "the peer closed the connection during the TLS handshake",
                        ))
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        // Send rustls' alert so the peer learns why.
                        let _ = tls.flush(&mut self.stream);
                        return Err(e);
                    }
                }
            }
            tls.flush(&mut self.stream).map(|_| ())
        })();
        if let Err(e) = result {
            return Err(std::io::Error::new(
                e.kind(),
                format!("TLS handshake with {} failed: {e}", self.remote),
            ));
        }
        self.tls = Some(tls);
        self.session.tls_established(self.now());
        Ok(())
    }

    /// Writes the pending output; refills it from the session once it is fully written.
    fn write_out(&mut self) -> std::io::Result<()> {
        if self.tls.is_some() {
            // Plaintext goes into rustls (bounded by its buffer limit), records to the socket.
            loop {
                let Some(tls) = self.tls.as_mut() else {
                    return Ok(());
                };
                if !tls.flush(&mut self.stream)? {
                    return Ok(());
                }
                if self.out_pos >= self.out.len() && self.refill() == 0 {
                    return Ok(());
                }
                let Some(tls) = self.tls.as_mut() else {
                    return Ok(());
                };
                let n = tls.write_plain(self.out.get(self.out_pos..).unwrap_or(&[]))?;
                if n == 0 && !tls.wants_write() {
                    return Ok(());
                }
                self.out_pos += n;
            }
        }
        loop {
            if self.outv_pos >= self.outv.len() && self.refill() == 0 {
                return Ok(());
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let mut count = 0;
            for (slot, part) in iov
                .iter_mut()
                .zip(self.outv.get(self.outv_pos..).unwrap_or(&[]))
            {
                *slot = IoSlice::new(part);
                count += 1;
            }
            match self.stream.write_vectored(iov.get(..count).unwrap_or(&[])) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.advance_outv(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Last output of a closing session (SESS_TERM, MSG_REJECT), written with a short bound.
    fn flush_transmit_blocking(&mut self) {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if self.write_out().is_err() {
                return;
            }
            if !self.backed_up()
                && !self.tls.as_ref().is_some_and(|t| t.wants_write())
                && self.refill() == 0
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sleeps in `poll(2)` until the socket or the eventfd is ready, or the next timer.
    fn wait(&mut self) -> std::io::Result<()> {
        let now = self.now();
        let mut wait = Duration::from_millis(100);
        if let Some(t) = self.session.poll_timeout() {
            wait = wait.min(t.saturating_sub(now));
        }
        if let Some((t, _)) = self.delayed.front() {
            wait = wait.min(t.saturating_duration_since(Instant::now()));
        }
        if let Some(t) = self.idle.deadline(self.session.keepalive()) {
            wait = wait.min(t.saturating_duration_since(Instant::now()));
        }
        let backed_up = self.backed_up() || self.tls.as_ref().is_some_and(|t| t.wants_write());
        let mut events = 0;
        if backed_up {
            events |= libc::POLLOUT;
        }
        if self.may_read() {
            events |= libc::POLLIN;
        }
        let mut fds = [
            libc::pollfd {
                fd: self.stream.as_raw_fd(),
                events,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake_fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = i32::try_from(wait.as_millis()).unwrap_or(100);
        // SAFETY: fds is a valid array of two pollfd for the duration of the call.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                return Err(e);
            }
        }
        if fds[0].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            self.hung_up = true;
        }
        if fds[1].revents & libc::POLLIN != 0 {
            let mut v = 0u64;
            // SAFETY: reads 8 bytes into a valid u64 from our non-blocking eventfd.
            unsafe {
                libc::read(
                    self.wake_fd.as_raw_fd(),
                    (&mut v as *mut u64).cast(),
                    std::mem::size_of::<u64>(),
                );
            }
        }
        Ok(())
    }

    /// Reports everything unfinished as failed and hands the command queue back to the agent.
    fn finish(mut self) {
        self.report();
        let mut failed: Vec<u64> = self.outgoing.drain().map(|(t, _)| t).collect();
        failed.extend(self.waiting.drain(..).map(|(t, _)| t));
        failed.extend(self.delayed.drain(..).map(|(_, t)| t));
        failed.append(&mut self.done_failed);
        let ok = std::mem::take(&mut self.done_ok);
        let agent = &self.shared.agent;
        if !ok.is_empty() {
            let _ = agent.send(AgentInput::Cla(FromCla::Done {
                tokens: ok,
                ok: true,
            }));
        }
        if !failed.is_empty() {
            let _ = agent.send(AgentInput::Cla(FromCla::Done {
                tokens: failed,
                ok: false,
            }));
        }
        let (_, dummy_rx) = sync_channel(0);
        let rest = std::mem::replace(&mut self.rx, dummy_rx);
        let _ = agent.send(AgentInput::Cla(FromCla::SessionDown {
            peer: if self.established { self.peer } else { None },
            id: self.handle.id,
            rest,
        }));
    }
}

/// One `read(2)` from the socket into uninitialised room (the reassembly buffer's spare
/// capacity, `Session::payload_buf_uninit`): the kernel writes the octets it returns, so the
/// room need not be zero-filled first. `Ok(n)`: the first `n` octets of `room` are initialised.
fn read_uninit(
    stream: &TcpStream,
    room: &mut [std::mem::MaybeUninit<u8>],
) -> std::io::Result<usize> {
    // SAFETY: `room` is valid for writes of `room.len()` octets for the duration of the call;
    // `read` writes at most that many and returns how many it wrote.
    let n = unsafe { libc::read(stream.as_raw_fd(), room.as_mut_ptr().cast(), room.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(usize::try_from(n).unwrap_or(0).min(room.len()))
}
