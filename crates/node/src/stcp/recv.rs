//! One accepted STCP connection: reads bundles (`stcp::Deframer`) and hands them to the agent
//! thread, one store commit per read turn.
//!
//! Loop: the agent's commit answers → read the socket (large bundles straight into their
//! buffer, the rest through a 1 MiB read buffer) unless held back → received bundles to the
//! agent → `poll(2)` on the socket and the eventfd (the agent's answers wake it).
//!
//! Held back (the socket is not read, so TCP's flow control stops the sender and its bundles
//! stay in its store): while [`UNCOMMITTED_WINDOW`] bytes of received bundles wait for the
//! agent's commit; while the next announced bundle is larger than the store's free quota; while
//! the ingress gate is closed. A declared length above `[stcp] max_bundle_size` closes the
//! connection (logged, `stcp.frames_refused`): STCP cannot refuse one bundle and go on.

use std::collections::HashMap;
use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use stcp::{Deframer, Item};

use super::StcpShared;
use crate::messages::{eventfd, AgentInput, FromCla, SessionHandle};

/// Read buffer for prefixes and small bundles.
const READ_BUF: usize = 1 << 20;
/// Largest read straight into a bundle's buffer.
const DIRECT_READ: usize = 256 << 10;
/// Reads per turn before received bundles go to the agent.
const READS_PER_TURN: usize = 16;
/// Bytes of received bundles waiting for the agent's commit above which reading pauses.
const UNCOMMITTED_WINDOW: u64 = 32 << 20;
/// Longest sleep in `poll(2)` (the stop flag, the gate and the store's room are polled).
const MAX_WAIT: Duration = Duration::from_millis(100);

struct Conn<'a> {
    shared: &'a StcpShared,
    stream: TcpStream,
    remote: String,
    deframer: Deframer,
    handle: Arc<SessionHandle>,
    /// Received bundles not yet handed to the agent: (id, bundle).
    received: Vec<(u64, Bytes)>,
    /// Bundles handed to the agent and not yet answered: id → length.
    uncommitted: HashMap<u64, u64>,
    uncommitted_bytes: u64,
    next_bundle: u64,
    /// The next bundle waits for store room (logged once per wait).
    waiting_room: bool,
    log: crate::ratelog::RateLog,
    last: stcp::DecodeStats,
}

/// Receives on `stream` until the peer closes it, an error, or node shutdown.
pub(super) fn run(shared: &StcpShared, stream: TcpStream) {
    let Ok(wake_fd) = eventfd() else {
        eprintln!("dtnkit node: STCP: cannot create an eventfd");
        return;
    };
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    // The handle carries the agent's commit answers; nothing is ever sent on this connection.
    let (tx, _rx) = sync_channel(1);
    let handle = Arc::new(SessionHandle::new(shared.id(), tx, wake_fd.clone()));
    shared.counters.connections_in.fetch_add(1, Relaxed);
    let mut c = Conn {
        shared,
        remote: super::remote(&stream),
        stream,
        deframer: Deframer::new(shared.cfg.max_bundle_size),
        handle,
        received: Vec::new(),
        uncommitted: HashMap::new(),
        uncommitted_bytes: 0,
        next_bundle: 0,
        waiting_room: false,
        log: crate::ratelog::RateLog::new(Duration::from_secs(10)),
        last: stcp::DecodeStats::default(),
    };
    let mut buf = vec![0u8; READ_BUF];
    let result = loop {
        if shared.stop.load(Relaxed) {
            break Ok(false);
        }
        c.answers();
        let read = c.may_read();
        let r = if read { c.read(&mut buf) } else { Ok(false) };
        c.count();
        c.hand_over();
        match r {
            Ok(true) => break Ok(true),
            Ok(false) => {}
            Err(e) => break Err(e),
        }
        let events = if c.may_read() { libc::POLLIN } else { 0 };
        if let Err(e) = super::wait(&c.stream, &*wake_fd, events, MAX_WAIT) {
            break Err(e);
        }
    };
    match result {
        Err(e) => eprintln!("dtnkit node: STCP connection from {} closed: {e}", c.remote),
        Ok(true) => {
            if let Some((len, got)) = c.deframer.bundle_in_progress() {
                eprintln!(
                    "dtnkit node: STCP connection from {} ended inside a {len}-byte bundle ({got} bytes \
                     received): that bundle is lost unless its sender sends it again",
                    c.remote
                );
            }
        }
        Ok(false) => {}
    }
    shared.counters.connections_in.fetch_sub(1, Relaxed);
}

impl Conn<'_> {
    /// Applies the agent's commit answers.
    fn answers(&mut self) {
        for (id, stored) in self.handle.take_confirms() {
            if let Some(len) = self.uncommitted.remove(&id) {
                self.uncommitted_bytes = self.uncommitted_bytes.saturating_sub(len);
            }
            if !stored {
                self.shared
                    .counters
                    .bundles_not_stored
                    .fetch_add(1, Relaxed);
                let remote = &self.remote;
                self.log.log("stcp-not-stored", || {
                    format!(
                        "a bundle received over STCP from {remote} was not stored (store full or \
                         failing); STCP cannot ask its sender to keep it (counted in \
                         stcp.bundles_not_stored)"
                    )
                });
            }
        }
    }

    /// Whether the socket may be read now (see the module documentation).
    fn may_read(&mut self) -> bool {
        if self.shared.ingress_paused.load(Relaxed) || self.uncommitted_bytes >= UNCOMMITTED_WINDOW
        {
            return false;
        }
        let Some((len, 0)) = self.deframer.bundle_in_progress() else {
            self.waiting_room = false;
            return true;
        };
        let free = self.shared.free_bytes.load(Relaxed);
        if len <= free {
            self.waiting_room = false;
            return true;
        }
        if !self.waiting_room {
            self.waiting_room = true;
            eprintln!(
                "dtnkit node: STCP connection from {} announces a {len}-byte bundle and the store \
                 has {free} bytes free: not reading it until there is room (the sender is held \
                 back by TCP)",
                self.remote
            );
        }
        false
    }

    /// One turn of reads. Ok(true): the peer closed the connection.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<bool> {
        for _ in 0..READS_PER_TURN {
            if let Some(room) = self.deframer.payload_buf(DIRECT_READ) {
                match self.stream.read(room) {
                    Ok(0) => return Ok(true),
                    Ok(n) => {
                        self.deframer.payload_filled(n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            } else {
                match self.stream.read(buf) {
                    Ok(0) => return Ok(true),
                    Ok(n) => {
                        let data = buf.get(..n).unwrap_or_default();
                        if let Err(e) = self.deframer.handle_input(data) {
                            self.shared.counters.frames_refused.fetch_add(1, Relaxed);
                            // Bundles completed before the refused frame are still delivered.
                            self.take_items();
                            return Err(std::io::Error::new(
                                ErrorKind::InvalidData,
                                format!("{e} (limit: [stcp] max_bundle_size)"),
                            ));
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            self.take_items();
            if !self.may_read() {
                return Ok(false);
            }
        }
        Ok(false)
    }

    /// Moves completed bundles to the hand-over list; keepalives are only counted.
    fn take_items(&mut self) {
        while let Some(item) = self.deframer.poll_item() {
            if let Item::Bundle(b) = item {
                let id = self.next_bundle;
                self.next_bundle += 1;
                self.uncommitted.insert(id, b.len() as u64);
                self.uncommitted_bytes += b.len() as u64;
                self.received.push((id, b));
            }
        }
    }

    /// Hands the bundles of this turn to the agent (one commit); its answers come back
    /// through the handle.
    fn hand_over(&mut self) {
        if self.received.is_empty() {
            return;
        }
        let (ids, bundles): (Vec<u64>, Vec<Bytes>) =
            std::mem::take(&mut self.received).into_iter().unzip();
        let crc_checked = bundles.iter().map(bp::crcs_ok).collect();
        let _ = self.shared.agent.send(AgentInput::Cla(FromCla::Received {
            peer: None,
            bundles,
            staged: Vec::new(),
            crc_checked,
            confirm: Some((self.handle.clone(), ids)),
        }));
    }

    /// Adds the deframer's new counts to the node's.
    fn count(&mut self) {
        let st = self.deframer.stats();
        let c = &self.shared.counters;
        c.bundles_received
            .fetch_add(st.bundles - self.last.bundles, Relaxed);
        c.bytes_received
            .fetch_add(st.bundle_bytes - self.last.bundle_bytes, Relaxed);
        c.keepalives_received
            .fetch_add(st.keepalives - self.last.keepalives, Relaxed);
        self.last = st;
    }
}
