//! TCPCL (v4, and v3 for peers that speak it) on real sockets: the listener, one connector per configured peer (reconnection with
//! exponential back-off), and the handle through which the agent thread feeds a session.
//!
//! Each session runs in its own thread ([`session`]): a thread per session keeps
//! one session's large writes from delaying another's, and the session count is small (one or
//! two per neighbour). Sockets get `TCP_NODELAY` and large kernel buffers (seed 002, 4.2: buffer
//! sizes decide TCP convergence-layer throughput).

mod session;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use crate::agent_thread::AgentInput;
use crate::config::{TcpPeer, Tcpcl};

/// Commands from the agent thread to one session.
#[derive(Debug)]
pub(crate) enum ToSession {
    /// Transfer one bundle; its result comes back as `FromCla::Done` with `token`.
    Send { token: u64, bundle: Bytes },
    /// End the session (SESS_TERM).
    Close,
}

/// Bundles queued per session in the channel (the agent's window bounds the total).
pub(crate) const SESSION_QUEUE: usize = 1024;
/// Bound on one connection attempt.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The agent thread's handle on a session: its command queue and a wake-up descriptor.
#[derive(Debug)]
pub(crate) struct SessionHandle {
    /// Unique per node run.
    pub(crate) id: u64,
    /// Commands.
    pub(crate) tx: SyncSender<ToSession>,
    /// eventfd polled by the session thread beside its socket.
    wake_fd: Arc<OwnedFd>,
    /// The agent's answers on received transfers (transfer id, stored), waiting for the
    /// session thread. Not in the bounded command channel: an answer must never be dropped
    /// or block the agent; their number is bounded by the session's held acknowledgments.
    confirms: std::sync::Mutex<Vec<(u64, bool)>>,
}

impl SessionHandle {
    /// Wakes the session thread (after queueing a command).
    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own.
        unsafe {
            libc::write(
                self.wake_fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}

/// Creates a non-blocking eventfd.
pub(crate) fn eventfd() -> std::io::Result<Arc<OwnedFd>> {
    // SAFETY: plain syscall; the returned descriptor is checked and then owned.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }))
}

impl SessionHandle {
    pub(crate) fn new(id: u64, tx: SyncSender<ToSession>, wake_fd: Arc<OwnedFd>) -> Self {
        Self {
            id,
            tx,
            wake_fd,
            confirms: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Answers received transfers (called by the agent thread after its commit) and wakes
    /// the session thread.
    pub(crate) fn confirm(&self, answers: impl IntoIterator<Item = (u64, bool)>) {
        if let Ok(mut c) = self.confirms.lock() {
            c.extend(answers);
        }
        self.wake();
    }

    /// Takes the pending answers (session thread).
    pub(crate) fn take_confirms(&self) -> Vec<(u64, bool)> {
        self.confirms
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }
}

/// Counters for `dtnkit status` (`tcpcl` object).
#[derive(Debug, Default)]
pub(crate) struct TcpclCounters {
    pub(crate) sessions_established: AtomicU64,
    /// Established sessions that run over TLS.
    pub(crate) sessions_tls: AtomicU64,
    /// Established sessions that speak TCPCLv3 (RFC 7242).
    pub(crate) sessions_v3: AtomicU64,
    pub(crate) sessions_open: AtomicU64,
    pub(crate) connect_failures: AtomicU64,
    pub(crate) transfers_sent: AtomicU64,
    pub(crate) transfers_acked: AtomicU64,
    pub(crate) transfers_refused: AtomicU64,
    pub(crate) transfers_failed: AtomicU64,
    pub(crate) bundles_received: AtomicU64,
    pub(crate) transfers_refused_by_us: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) bytes_received: AtomicU64,
    pub(crate) bundles_fragmented: AtomicU64,
    /// Every occurrence of a tolerated deviation (all kinds, all sessions).
    pub(crate) deviation_events: AtomicU64,
    /// Peer deviations from RFC 9174 (or RFC 7242) that we tolerated, by kind.
    pub(crate) deviations: Mutex<BTreeMap<String, u64>>,
    /// Sessions refused or ended by the node's limits, per reason (`max_sessions`,
    /// `per_address`, `per_peer`, `node_id_not_in_certificate`, `idle_timeout`).
    pub(crate) sessions_refused: Mutex<BTreeMap<&'static str, u64>>,
    /// Per-neighbour counters.
    pub(crate) peers: crate::cla_peer_stats::TcpPeerTable,
}

impl TcpclCounters {
    /// Counts one tolerated deviation; true when it is the first of its kind (to log it).
    pub(crate) fn deviation(&self, kind: &str) -> bool {
        let Ok(mut m) = self.deviations.lock() else {
            return false;
        };
        let c = m.entry(kind.to_string()).or_insert(0);
        *c += 1;
        *c == 1
    }

    /// Counts a session refused (or ended) by the node's limits.
    pub(crate) fn refused(&self, reason: &'static str) {
        if let Ok(mut m) = self.sessions_refused.lock() {
            *m.entry(reason).or_insert(0) += 1;
        }
    }

    /// The counters as a JSON object.
    pub(crate) fn json(&self) -> serde_json::Value {
        let deviations: serde_json::Map<String, serde_json::Value> = self
            .deviations
            .lock()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::from(*v)))
                    .collect()
            })
            .unwrap_or_default();
        serde_json::json!({
            "sessions_established": self.sessions_established.load(Relaxed),
            "sessions_tls": self.sessions_tls.load(Relaxed),
            "sessions_v3": self.sessions_v3.load(Relaxed),
            "sessions_open": self.sessions_open.load(Relaxed),
            "connect_failures": self.connect_failures.load(Relaxed),
            "transfers_sent": self.transfers_sent.load(Relaxed),
            "transfers_acked": self.transfers_acked.load(Relaxed),
            "transfers_refused": self.transfers_refused.load(Relaxed),
            "transfers_failed": self.transfers_failed.load(Relaxed),
            "bundles_received": self.bundles_received.load(Relaxed),
            "transfers_refused_by_us": self.transfers_refused_by_us.load(Relaxed),
            "bytes_sent": self.bytes_sent.load(Relaxed),
            "bytes_received": self.bytes_received.load(Relaxed),
            "bundles_fragmented": self.bundles_fragmented.load(Relaxed),
            "deviations": deviations,
            "deviation_events": self.deviation_events.load(Relaxed),
            "sessions_refused": self
                .sessions_refused
                .lock()
                .map(|m| serde_json::json!(*m))
                .unwrap_or_default(),
            "peers": self.peers.json(),
        })
    }
}

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

/// Applies the session socket options: no Nagle delay, large buffers.
pub(crate) fn tune(sock: &socket2::Socket, buffer: usize) {
    let _ = sock.set_nodelay(true);
    let _ = sock.set_send_buffer_size(buffer);
    let _ = sock.set_recv_buffer_size(buffer);
}

/// Connects with the buffers set before the SYN (so the window scale can use them).
pub(crate) fn connect(addr: SocketAddr, buffer: usize) -> std::io::Result<TcpStream> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    tune(&sock, buffer);
    sock.connect_timeout(&addr.into(), CONNECT_TIMEOUT)?;
    Ok(sock.into())
}

/// Binds the listener with large buffers (inherited by accepted sockets).
pub(crate) fn listen(addr: SocketAddr, buffer: usize) -> std::io::Result<TcpListener> {
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    let _ = sock.set_reuse_address(true);
    tune(&sock, buffer);
    sock.bind(&addr.into())?;
    sock.listen(128)?;
    Ok(sock.into())
}

/// Accepts sessions until `stop` (checked after every accept; shutdown connects once to
/// unblock it).
pub(crate) fn accept_loop(listener: TcpListener, shared: TcpclShared) {
    let active = Arc::new(AtomicUsize::new(0));
    let limits = shared.cfg.limits;
    let mut log = crate::ratelog::RateLog::new(Duration::from_secs(10));
    for conn in listener.incoming() {
        if shared.stop.load(Relaxed) {
            return;
        }
        let Ok(stream) = conn else { continue };
        if active.load(Relaxed) >= limits.max_sessions {
            shared.counters.refused("max_sessions");
            log.log("tcpcl-cap", || {
                format!(
                    "TCPCL connection refused: {} sessions already open (tcpcl.max_sessions)",
                    limits.max_sessions
                )
            });
            continue;
        }
        let ip = stream.peer_addr().map(|a| a.ip());
        let slot = match ip {
            Ok(ip) => match shared
                .counts
                .take_address(ip, limits.max_sessions_per_address)
            {
                Some(slot) => slot,
                None => {
                    shared.counters.refused("per_address");
                    log.log("tcpcl-cap-address", || {
                        format!(
                            "TCPCL connection from {ip} refused: {} sessions from that address                              already open (tcpcl.max_sessions_per_address)",
                            limits.max_sessions_per_address
                        )
                    });
                    continue;
                }
            },
            Err(_) => continue,
        };
        let sock = socket2::Socket::from(stream);
        tune(&sock, shared.cfg.socket_buffer_bytes);
        let stream: TcpStream = sock.into();
        let shared = shared.clone();
        let active = active.clone();
        active.fetch_add(1, Relaxed);
        let spawned = std::thread::Builder::new()
            .name("tcpcl-passive".into())
            .spawn(move || {
                session::run_session(&shared, stream, false, None);
                drop(slot);
                active.fetch_sub(1, Relaxed);
            });
        if spawned.is_err() {
            eprintln!("dtnkit node: cannot start a TCPCL session thread");
        }
    }
}

/// Keeps a session to a configured peer: connect, run the session, and after a failure or the
/// end of the session wait (doubling from `reconnect_min` to `reconnect_max`; reset once a
/// session was established) and connect again. A v3 peer's SHUTDOWN may ask for a longer
/// wait (its reconnection delay, capped at `reconnect_max`; a delay of 0, "do not reconnect",
/// waits `reconnect_max`: the node keeps its configured neighbour).
pub(crate) fn connect_loop(shared: TcpclShared, peer: TcpPeer) {
    let Some(addr) = peer.address else { return };
    let mut backoff = shared.cfg.reconnect_min;
    let mut logged = false;
    while !shared.stop.load(Relaxed) {
        match connect(addr, shared.cfg.socket_buffer_bytes) {
            Ok(stream) => {
                logged = false;
                let end = session::run_session(&shared, stream, true, Some(&peer));
                if end.established {
                    backoff = shared.cfg.reconnect_min;
                }
                if let Some(delay) = end.reconnect_delay {
                    let asked = if delay.is_zero() {
                        shared.cfg.reconnect_max
                    } else {
                        delay.min(shared.cfg.reconnect_max)
                    };
                    backoff = backoff.max(asked);
                }
            }
            Err(e) => {
                shared.counters.connect_failures.fetch_add(1, Relaxed);
                if !logged {
                    eprintln!(
                        "dtnkit node: TCPCL connect to node {} at {addr} failed: {e} (retrying with back-off up to {} ms)",
                        peer.peer,
                        shared.cfg.reconnect_max.as_millis()
                    );
                    logged = true;
                }
            }
        }
        // Sleep the back-off in short steps so that shutdown is prompt.
        let mut left = backoff;
        while !left.is_zero() && !shared.stop.load(Relaxed) {
            let step = left.min(Duration::from_millis(50));
            std::thread::sleep(step);
            left -= step;
        }
        backoff = (backoff * 2).min(shared.cfg.reconnect_max);
    }
}
