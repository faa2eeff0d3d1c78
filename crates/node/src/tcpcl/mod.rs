//! TCPCL (v4, and v3 for peers that speak it) on real sockets: the listener and one connector per
//! configured peer (reconnection with exponential back-off). The agent thread feeds a session
//! through its `messages::SessionHandle`.
//!
//! Each session runs in its own thread ([`session`]): a thread per session keeps
//! one session's large writes from delaying another's, and the session count is small (one or
//! two per neighbour). Sockets get `TCP_NODELAY` and large kernel buffers (seed 002, 4.2: buffer
//! sizes decide TCP convergence-layer throughput).

mod arriving;
mod session;

pub(crate) use session::{TcpclShared, STAGE_RECEIVED_FROM};

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use crate::config::TcpPeer;
use session::run_session;

pub(crate) use crate::tcp_socket::{connect, listen, tune};

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
                            "TCPCL connection from {ip} refused: {} sessions from that address \
                             already open (tcpcl.max_sessions_per_address)",
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
                run_session(&shared, stream, false, None);
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
                let end = run_session(&shared, stream, true, Some(&peer));
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
