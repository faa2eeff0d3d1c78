//! UDPCL: one bundle per UDP datagram, on its own socket.
//!
//! UDP gives no acknowledgement: a bundle counts as sent (`cla_result Sent`) once the kernel
//! took its datagram, and a received bundle the store refuses is lost (the sender cannot know).
//! Use UDPCL for small bundles on links where that is acceptable; LTP or TCPCL otherwise.
//!
//! A bundle larger than `max_datagram` is fragmented proactively (RFC 9171 5.8, zero-copy
//! payload slices), one fragment per datagram. A bundle that must not be fragmented and does not
//! fit is logged and reported as failed after [`OVERSIZE_RETRY`], so the agent keeps it (it may
//! route it over another neighbour) without spinning on it.
//!
//! Threads: a receive thread (`recvmmsg` batches, one store commit per batch) and a send thread
//! fed by the agent thread's bounded channel.

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bpv7::Bundle;
use bytes::Bytes;

use crate::counters::UdpclCounters;
use crate::messages::{AgentInput, FromCla, ToUdp};
use udpio::{wait_readable, RecvBatch, RecvMeta};

/// Delay before an oversized, unfragmentable bundle is reported as failed.
pub(crate) const OVERSIZE_RETRY: Duration = Duration::from_secs(5);
/// Datagrams per `recvmmsg` call (one store commit per batch).
const BATCH: usize = 32;

/// The receive side: datagrams → bundles → the agent (one batch per `recvmmsg`).
pub(crate) fn receive_loop(
    sock: UdpSocket,
    peers: HashMap<SocketAddr, u64>,
    max_datagram: usize,
    agent: SyncSender<AgentInput>,
    counters: Arc<UdpclCounters>,
    stop: Arc<AtomicBool>,
) {
    let mut recv = RecvBatch::new(BATCH);
    // One byte more than the limit detects oversized datagrams.
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; max_datagram + 1]).collect();
    let mut meta = vec![RecvMeta::default(); BATCH];
    while !stop.load(Relaxed) {
        match wait_readable(&sock, Duration::from_millis(200)) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("dtnkit node: UDPCL receive stopped: {e}");
                return;
            }
        }
        let n = match recv.recv(&sock, &mut bufs, &mut meta) {
            Ok(n) => n,
            Err(_) => continue,
        };
        // Datagrams of one batch are grouped by source so that each group is one commit.
        let mut groups: Vec<(Option<u64>, Vec<Bytes>)> = Vec::new();
        for (b, m) in bufs.iter().zip(&meta).take(n) {
            if m.truncated || m.len > max_datagram {
                counters.truncated.fetch_add(1, Relaxed);
                continue;
            }
            counters.datagrams_received.fetch_add(1, Relaxed);
            let peer = m.src.and_then(|s| peers.get(&s).copied());
            counters.peers.received(peer, m.len);
            let data = Bytes::copy_from_slice(b.get(..m.len).unwrap_or(&[]));
            match groups.iter_mut().find(|(p, _)| *p == peer) {
                Some((_, v)) => v.push(data),
                None => groups.push((peer, vec![data])),
            }
        }
        for (peer, bundles) in groups {
            // The block CRCs are checked here, while the bytes are hot: the agent thread
            // handles each bundle without passing over its bytes again.
            let crc_checked = bundles.iter().map(bp::crcs_ok).collect();
            let msg = AgentInput::Cla(FromCla::Received {
                peer,
                bundles,
                staged: Vec::new(),
                crc_checked,
                confirm: None,
            });
            if agent.send(msg).is_err() {
                return;
            }
        }
    }
}

/// The send side: bundles from the agent → datagrams (fragments when too large).
pub(crate) struct UdpSender {
    pub(crate) sock: UdpSocket,
    pub(crate) peers: HashMap<u64, SocketAddr>,
    pub(crate) max_datagram: usize,
    pub(crate) rx: Receiver<ToUdp>,
    pub(crate) agent: SyncSender<AgentInput>,
    pub(crate) counters: Arc<UdpclCounters>,
}

impl UdpSender {
    /// Runs until [`ToUdp::Shutdown`] or the agent thread goes away.
    pub(crate) fn run(self) {
        // Unfragmentable oversized bundles, reported failed when their delay ends.
        let mut deferred: VecDeque<(Instant, u64)> = VecDeque::new();
        loop {
            let wait = deferred.front().map_or(Duration::from_secs(1), |(t, _)| {
                t.saturating_duration_since(Instant::now())
            });
            let cmd = match self.rx.recv_timeout(wait) {
                Ok(c) => Some(c),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            let now = Instant::now();
            while deferred.front().is_some_and(|(t, _)| *t <= now) {
                if let Some((_, token)) = deferred.pop_front() {
                    self.done(token, false);
                }
            }
            match cmd {
                None => {}
                Some(ToUdp::Shutdown) => return,
                Some(ToUdp::Item {
                    peer,
                    token,
                    bundle,
                }) => {
                    let Some(&addr) = self.peers.get(&peer) else {
                        self.done(token, false);
                        continue;
                    };
                    match self.send_bundle(addr, &bundle) {
                        Ok(()) => {
                            self.counters.peers.sent(peer, bundle.len());
                            self.done(token, true);
                        }
                        Err(SendFail::Oversize(why)) => {
                            self.counters.oversize_refused.fetch_add(1, Relaxed);
                            eprintln!(
                                "dtnkit node: UDPCL cannot send a {}-byte bundle to node {peer} (datagram limit {}): {why}; it stays stored and is retried in {} s (route it over another convergence layer)",
                                bundle.len(),
                                self.max_datagram,
                                OVERSIZE_RETRY.as_secs()
                            );
                            deferred.push_back((now + OVERSIZE_RETRY, token));
                        }
                        Err(SendFail::Io(e)) => {
                            self.counters.send_errors.fetch_add(1, Relaxed);
                            self.counters.peers.send_error(peer);
                            eprintln!("dtnkit node: UDPCL send to {addr} failed: {e}");
                            self.done(token, false);
                        }
                    }
                }
            }
        }
    }

    fn done(&self, token: u64, ok: bool) {
        let _ = self.agent.send(AgentInput::Cla(FromCla::Done {
            tokens: vec![token],
            ok,
        }));
    }

    fn send_bundle(&self, addr: SocketAddr, bundle: &Bytes) -> Result<(), SendFail> {
        if bundle.len() <= self.max_datagram {
            return self.send_one(addr, bundle);
        }
        let b = Bundle::decode(bundle.clone()).map_err(|e| SendFail::Oversize(e.to_string()))?;
        let frags = bpv7::fragment::fragment(&b, self.max_datagram)
            .map_err(|e| SendFail::Oversize(e.to_string()))?;
        self.counters.bundles_fragmented.fetch_add(1, Relaxed);
        for f in frags {
            self.send_one(addr, &f.encode())?;
        }
        Ok(())
    }

    fn send_one(&self, addr: SocketAddr, data: &[u8]) -> Result<(), SendFail> {
        // ENOBUFS under a burst: give the kernel a moment, a few times, before failing.
        let mut tries = 0;
        loop {
            match self.sock.send_to(data, addr) {
                Ok(_) => {
                    self.counters.datagrams_sent.fetch_add(1, Relaxed);
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => return Err(SendFail::Io(e)),
            }
        }
    }
}

enum SendFail {
    Oversize(String),
    Io(std::io::Error),
}
