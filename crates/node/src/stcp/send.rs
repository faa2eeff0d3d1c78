//! One STCP connection we opened to a `[[stcp_peer]]`: takes bundles from the agent thread
//! (through a `SessionHandle`, like a TCPCL session) and writes them framed (`stcp::Framer`).
//!
//! Loop: commands (only while less than [`OUT_WINDOW`] bytes are unwritten: the rest waits in
//! the bounded channel, so the agent keeps them) → keepalive timer → `writev` of the unwritten
//! frames (the bundles' own buffers, no copy) → results to the agent → read (the peer sends
//! nothing; this only notices a closed connection) → `poll(2)`.
//!
//! Results: a bundle is reported sent (`FromCla::Done` ok) when the kernel accepted its last
//! octet; bundles not completely written when the connection ends are reported failed and
//! forwarded again (a partly written one is sent again whole on the next connection). A bundle
//! that cannot be framed (4 GiB or more) is reported failed after [`UNSENDABLE_RETRY`], so
//! the agent keeps it without spinning on it.

use std::collections::VecDeque;
use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stcp::Framer;

use super::StcpShared;
use crate::config::stcp::StcpPeer;
use crate::messages::{eventfd, AgentInput, FromCla, SessionHandle, ToSession, SESSION_QUEUE};

/// Unwritten bytes above which no further bundle is taken from the agent's queue.
const OUT_WINDOW: u64 = 16 << 20;
/// Parts per `writev` (a prefix and a bundle per frame).
const MAX_IOV: usize = 64;
/// Delay before a bundle that cannot be framed is reported failed.
const UNSENDABLE_RETRY: Duration = Duration::from_secs(5);
/// Longest sleep in `poll(2)`.
const MAX_WAIT: Duration = Duration::from_millis(100);

struct Conn<'a> {
    shared: &'a StcpShared,
    peer: &'a StcpPeer,
    stream: TcpStream,
    start: Instant,
    framer: Framer,
    rx: Receiver<ToSession>,
    /// Bundles reported failed later (cannot be framed), by due time.
    delayed: VecDeque<(Instant, u64)>,
    closing: bool,
    last: stcp::EncodeStats,
}

/// Sends over `stream` to `peer` until the connection fails or the node stops.
pub(super) fn run(shared: &StcpShared, stream: TcpStream, peer: &StcpPeer) {
    let Ok(wake_fd) = eventfd() else {
        eprintln!("dtnkit node: STCP: cannot create an eventfd");
        return;
    };
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let (tx, rx) = sync_channel(SESSION_QUEUE);
    let handle = Arc::new(SessionHandle::new(shared.id(), tx, wake_fd.clone()));
    let id = handle.id;
    if shared
        .agent
        .send(AgentInput::Cla(FromCla::SessionUp {
            peer: peer.peer,
            handle,
        }))
        .is_err()
    {
        return;
    }
    shared.counters.connections_out.fetch_add(1, Relaxed);
    let mut c = Conn {
        shared,
        peer,
        stream,
        start: Instant::now(),
        framer: Framer::new(shared.cfg.keepalive, Duration::ZERO),
        rx,
        delayed: VecDeque::new(),
        closing: false,
        last: stcp::EncodeStats::default(),
    };
    let result = c.run(&wake_fd);
    if let Err(e) = result {
        eprintln!(
            "dtnkit node: STCP connection to node {} at {} ended: {e}; unwritten bundles are \
             forwarded again, reconnecting with back-off",
            peer.peer, peer.address
        );
    }
    c.finish(id);
    shared.counters.connections_out.fetch_sub(1, Relaxed);
}

impl Conn<'_> {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn run(&mut self, wake_fd: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
        let mut sink = [0u8; 4096];
        loop {
            if self.shared.stop.load(Relaxed) {
                return Ok(());
            }
            self.commands();
            if self.closing {
                return Ok(());
            }
            let now = self.now();
            self.framer.handle_timeout(now);
            self.write_out()?;
            self.report();
            // The peer sends nothing; a read notices that it closed the connection.
            match self.stream.read(&mut sink) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        ErrorKind::ConnectionAborted,
                        "the peer closed the connection",
                    ))
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => return Err(e),
            }
            let mut wait = MAX_WAIT;
            if let Some(t) = self.framer.poll_timeout() {
                wait = wait.min(t.saturating_sub(self.now()));
            }
            if let Some((t, _)) = self.delayed.front() {
                wait = wait.min(t.saturating_duration_since(Instant::now()));
            }
            let mut events = libc::POLLIN;
            if !self.framer.is_idle() {
                events |= libc::POLLOUT;
            }
            super::wait(&self.stream, wake_fd, events, wait)?;
        }
    }

    /// Takes bundles from the agent while the unwritten bytes are below [`OUT_WINDOW`].
    fn commands(&mut self) {
        while self.framer.queued_bytes() < OUT_WINDOW {
            match self.rx.try_recv() {
                Ok(ToSession::Send { token, bundle }) => {
                    // The stored bytes are read and checked against the store's CRC here, on
                    // this connection's thread, not on the agent's.
                    let bundle = match bundle.into_bytes() {
                        Ok(b) => b,
                        Err(error) => {
                            let _ = self
                                .shared
                                .agent
                                .send(AgentInput::Cla(FromCla::Unreadable { token, error }));
                            continue;
                        }
                    };
                    let len = bundle.len();
                    if let Err(e) = self.framer.send_bundle(token, bundle) {
                        self.shared
                            .counters
                            .oversize_unsendable
                            .fetch_add(1, Relaxed);
                        eprintln!(
                            "dtnkit node: STCP cannot send a {len}-byte bundle to node {}: {e}; it \
                             stays stored and is retried in {} s (route it over another convergence \
                             layer)",
                            self.peer.peer,
                            UNSENDABLE_RETRY.as_secs()
                        );
                        self.delayed
                            .push_back((Instant::now() + UNSENDABLE_RETRY, token));
                    }
                }
                Ok(ToSession::Close) | Err(TryRecvError::Disconnected) => {
                    self.closing = true;
                    return;
                }
                Err(TryRecvError::Empty) => return,
            }
        }
    }

    /// Writes unwritten frames until the kernel's buffer is full or nothing is left.
    fn write_out(&mut self) -> std::io::Result<()> {
        loop {
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            let n = self.framer.io_slices(&mut iov);
            if n == 0 {
                return Ok(());
            }
            match self.stream.write_vectored(iov.get(..n).unwrap_or(&[])) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(k) => {
                    let now = self.now();
                    self.framer.handle_written(now, k);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reports written bundles (sent) and due unsendable ones (failed) to the agent.
    fn report(&mut self) {
        let sent: Vec<u64> = std::iter::from_fn(|| self.framer.poll_sent()).collect();
        if !sent.is_empty() {
            let _ = self.shared.agent.send(AgentInput::Cla(FromCla::Done {
                tokens: sent,
                ok: true,
            }));
        }
        let now = Instant::now();
        let mut failed = Vec::new();
        while self.delayed.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, t)) = self.delayed.pop_front() {
                failed.push(t);
            }
        }
        if !failed.is_empty() {
            let _ = self.shared.agent.send(AgentInput::Cla(FromCla::Done {
                tokens: failed,
                ok: false,
            }));
        }
        let st = self.framer.stats();
        let c = &self.shared.counters;
        c.bundles_sent
            .fetch_add(st.bundles - self.last.bundles, Relaxed);
        c.bytes_sent
            .fetch_add(st.bundle_bytes - self.last.bundle_bytes, Relaxed);
        c.keepalives_sent
            .fetch_add(st.keepalives - self.last.keepalives, Relaxed);
        self.last = st;
    }

    /// Reports what was written, fails everything else and hands the command queue back.
    fn finish(mut self, id: u64) {
        self.report();
        let mut failed = self.framer.abort();
        failed.extend(self.delayed.drain(..).map(|(_, t)| t));
        self.shared
            .counters
            .bundles_failed
            .fetch_add(failed.len() as u64, Relaxed);
        let agent = &self.shared.agent;
        if !failed.is_empty() {
            let _ = agent.send(AgentInput::Cla(FromCla::Done {
                tokens: failed,
                ok: false,
            }));
        }
        let (_, dummy) = sync_channel(0);
        let rest = std::mem::replace(&mut self.rx, dummy);
        let _ = agent.send(AgentInput::Cla(FromCla::SessionDown {
            peer: Some(self.peer.peer),
            id,
            rest,
        }));
    }
}
