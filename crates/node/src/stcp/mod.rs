//! STCP, ION's and HDTN's "simple TCP" convergence layer, on real sockets: a listener whose
//! connections receive bundles ([`recv`]) and one connector per `[[stcp_peer]]` whose
//! connection sends them ([`send`]), reconnecting with exponential back-off. The framing is
//! the sans-IO `stcp` crate; each connection runs in its own thread, as TCPCL sessions do.
//!
//! STCP carries bundles one way per connection (ION's `stcpclo` → `stcpcli`) and has no
//! acknowledgment, so what the node can promise is weaker than over TCPCL:
//!
//! - sending, a bundle counts as forwarded (`FromCla::Done` ok, the agent may delete it) once
//!   the kernel accepted its last octet; a connection lost after that may lose it (in the
//!   kernel buffers or in the network) without either node knowing;
//! - receiving, a bundle is handed to the agent when its last octet arrived, and the
//!   connection stops reading while a window of received bundles waits for the store's commit,
//!   while the store has no room for the next announced bundle, and while the ingress gate is
//!   closed: TCP's flow control then holds the sender, whose bundles stay in its store. A
//!   bundle the store refuses anyway is lost (counted in `stcp.bundles_not_stored`): there is
//!   no way to tell the sender.
//!
//! Over TCPCL the final XFER_ACK waits for the commit and the sender keeps its copy until
//! then, so nothing is lost there; prefer TCPCL between dtnkit nodes and use STCP towards
//! peers that speak it (see `docs/stcp.md`).

mod recv;
mod send;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::stcp::{Stcp, StcpPeer};
use crate::counters::StcpCounters;
use crate::messages::AgentInput;
pub(crate) use crate::tcp_socket::listen;

/// First connection id: far above TCPCL's (which count from 1), so that the agent's table of
/// connections per neighbour never sees two with one id.
const FIRST_ID: u64 = 1 << 48;

/// A connection that lived at least this long resets the reconnection back-off.
const STABLE_CONNECTION: Duration = Duration::from_secs(1);

/// What every STCP thread shares.
#[derive(Debug, Clone)]
pub(crate) struct StcpShared {
    pub(crate) cfg: Stcp,
    pub(crate) agent: SyncSender<AgentInput>,
    pub(crate) counters: Arc<StcpCounters>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) next_id: Arc<AtomicU64>,
    /// Free store quota, kept current by the agent thread (a connection does not read a
    /// bundle the store has no room for).
    pub(crate) free_bytes: Arc<AtomicU64>,
    /// The agent thread's ingress gate: connections do not read while it is closed.
    pub(crate) ingress_paused: Arc<AtomicBool>,
}

impl StcpShared {
    pub(crate) fn new(
        cfg: Stcp,
        agent: SyncSender<AgentInput>,
        counters: Arc<StcpCounters>,
        stop: Arc<AtomicBool>,
        free_bytes: Arc<AtomicU64>,
        ingress_paused: Arc<AtomicBool>,
    ) -> Self {
        Self {
            cfg,
            agent,
            counters,
            stop,
            next_id: Arc::new(AtomicU64::new(FIRST_ID)),
            free_bytes,
            ingress_paused,
        }
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }
}

/// Accepts connections until `stop` (checked after every accept; shutdown connects once to
/// unblock it); each receives in its own thread.
pub(crate) fn accept_loop(listener: TcpListener, shared: StcpShared) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut log = crate::ratelog::RateLog::new(Duration::from_secs(10));
    for conn in listener.incoming() {
        if shared.stop.load(Relaxed) {
            return;
        }
        let Ok(stream) = conn else { continue };
        if active.load(Relaxed) >= shared.cfg.max_connections {
            shared.counters.connections_refused.fetch_add(1, Relaxed);
            log.log("stcp-cap", || {
                format!(
                    "STCP connection refused: {} connections already open (stcp.max_connections)",
                    shared.cfg.max_connections
                )
            });
            continue;
        }
        let sock = socket2::Socket::from(stream);
        crate::tcp_socket::tune(&sock, shared.cfg.socket_buffer_bytes);
        let stream = sock.into();
        let (shared, active) = (shared.clone(), active.clone());
        active.fetch_add(1, Relaxed);
        let spawned = std::thread::Builder::new()
            .name("stcp-in".into())
            .spawn(move || {
                recv::run(&shared, stream);
                active.fetch_sub(1, Relaxed);
            });
        if spawned.is_err() {
            eprintln!("dtnkit node: cannot start an STCP connection thread");
        }
    }
}

/// Keeps a connection to `peer`: connect, send over it until it fails, wait (doubling from
/// `reconnect_min` to `reconnect_max`, reset after a connection that lasted) and connect
/// again.
pub(crate) fn connect_loop(shared: StcpShared, peer: StcpPeer) {
    let cfg = &shared.cfg;
    let mut backoff = cfg.reconnect_min;
    let mut logged = false;
    while !shared.stop.load(Relaxed) {
        match crate::tcp_socket::connect(peer.address, cfg.socket_buffer_bytes) {
            Ok(stream) => {
                logged = false;
                let since = Instant::now();
                send::run(&shared, stream, &peer);
                if since.elapsed() >= STABLE_CONNECTION {
                    backoff = cfg.reconnect_min;
                }
            }
            Err(e) => {
                shared.counters.connect_failures.fetch_add(1, Relaxed);
                if !logged {
                    eprintln!(
                        "dtnkit node: STCP connect to node {} at {} failed: {e} (retrying with back-off up to {} ms)",
                        peer.peer,
                        peer.address,
                        cfg.reconnect_max.as_millis()
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
        backoff = (backoff * 2).min(cfg.reconnect_max);
    }
}

/// `poll(2)` on a socket and the connection's eventfd for up to `wait`; returns the socket's
/// `revents`. The eventfd is drained.
fn wait(
    sock: &impl std::os::fd::AsRawFd,
    wake: &impl std::os::fd::AsRawFd,
    events: libc::c_short,
    wait: Duration,
) -> std::io::Result<libc::c_short> {
    let mut fds = [
        libc::pollfd {
            fd: sock.as_raw_fd(),
            events,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = i32::try_from(wait.as_millis()).unwrap_or(100);
    // SAFETY: fds is a valid array of two pollfd for the duration of the call.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    if fds[1].revents & libc::POLLIN != 0 {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a valid u64 from our non-blocking eventfd.
        unsafe {
            libc::read(
                wake.as_raw_fd(),
                (&mut v as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
    Ok(fds[0].revents)
}

/// The peer address of a stream, for log lines.
fn remote(stream: &std::net::TcpStream) -> String {
    stream
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |a: SocketAddr| a.to_string())
}
