//! Per-neighbour counters of the TCPCL and UDPCL convergence layers (`tcpcl.peers`,
//! `udpcl.peers` in the status reply), next to the node-wide totals those layers already keep.
//!
//! TCPCL: each established session feeds the difference of its own `tcpcl::SessionStats` since
//! its last feed into its peer's counters (the session keeps the only counters; no second
//! count is taken on the data path), and counts itself open while it lives. UDPCL: the peers are
//! configured, so their table is built once at start and needs no lock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use client::status::{TcpclPeerStatus, UdpclPeerStatus};
use tcpcl::SessionStats;

/// One TCPCL neighbour's counters, summed over its sessions.
#[derive(Debug, Default)]
pub(crate) struct TcpPeerStats {
    sessions_open: AtomicU64,
    sessions_established: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    segments_sent: AtomicU64,
    segments_received: AtomicU64,
    transfers_acked: AtomicU64,
    transfers_refused_by_peer: AtomicU64,
    transfers_failed: AtomicU64,
    bundles_received: AtomicU64,
    transfers_refused: AtomicU64,
    keepalives_sent: AtomicU64,
    keepalives_received: AtomicU64,
}

impl TcpPeerStats {
    fn status(&self) -> TcpclPeerStatus {
        TcpclPeerStatus {
            sessions_open: self.sessions_open.load(Relaxed),
            sessions_established: self.sessions_established.load(Relaxed),
            bytes_sent: self.bytes_sent.load(Relaxed),
            bytes_received: self.bytes_received.load(Relaxed),
            segments_sent: self.segments_sent.load(Relaxed),
            segments_received: self.segments_received.load(Relaxed),
            transfers_acked: self.transfers_acked.load(Relaxed),
            transfers_refused_by_peer: self.transfers_refused_by_peer.load(Relaxed),
            transfers_failed: self.transfers_failed.load(Relaxed),
            bundles_received: self.bundles_received.load(Relaxed),
            transfers_refused: self.transfers_refused.load(Relaxed),
            keepalives_sent: self.keepalives_sent.load(Relaxed),
            keepalives_received: self.keepalives_received.load(Relaxed),
        }
    }
}

/// The TCPCL neighbours seen so far (configured or not), by node number.
#[derive(Debug, Default)]
pub(crate) struct TcpPeerTable {
    peers: Mutex<BTreeMap<u64, Arc<TcpPeerStats>>>,
}

impl TcpPeerTable {
    /// A session with `peer` was established: its feed counts it open until dropped.
    pub(crate) fn session(&self, peer: u64) -> TcpSessionFeed {
        let stats = match self.peers.lock() {
            Ok(mut m) => m.entry(peer).or_default().clone(),
            // A poisoned table (a panic elsewhere) only loses this peer's counts.
            Err(_) => Arc::default(),
        };
        stats.sessions_open.fetch_add(1, Relaxed);
        stats.sessions_established.fetch_add(1, Relaxed);
        TcpSessionFeed {
            stats,
            last: SessionStats::default(),
        }
    }

    /// The `tcpcl.peers` object (empty if a panic poisoned the table).
    pub(crate) fn status(&self) -> BTreeMap<u64, TcpclPeerStatus> {
        let Ok(m) = self.peers.lock() else {
            return BTreeMap::new();
        };
        m.iter().map(|(p, s)| (*p, s.status())).collect()
    }
}

/// One established session's link to its peer's counters.
#[derive(Debug)]
pub(crate) struct TcpSessionFeed {
    stats: Arc<TcpPeerStats>,
    /// The session's counters at the previous feed.
    last: SessionStats,
}

impl TcpSessionFeed {
    /// Adds what the session counted since the previous feed.
    pub(crate) fn feed(&mut self, now: &SessionStats) {
        let (s, l) = (&self.stats, &self.last);
        let add = |c: &AtomicU64, now: u64, before: u64| {
            if now > before {
                c.fetch_add(now - before, Relaxed);
            }
        };
        add(&s.bytes_sent, now.bytes_sent, l.bytes_sent);
        add(&s.bytes_received, now.bytes_received, l.bytes_received);
        add(&s.segments_sent, now.segments_sent, l.segments_sent);
        add(
            &s.segments_received,
            now.segments_received,
            l.segments_received,
        );
        add(&s.transfers_acked, now.transfers_acked, l.transfers_acked);
        add(
            &s.transfers_refused_by_peer,
            now.transfers_refused_by_peer,
            l.transfers_refused_by_peer,
        );
        add(
            &s.transfers_failed,
            now.transfers_failed,
            l.transfers_failed,
        );
        add(
            &s.bundles_received,
            now.bundles_received,
            l.bundles_received,
        );
        add(
            &s.transfers_refused,
            now.transfers_refused,
            l.transfers_refused,
        );
        add(&s.keepalives_sent, now.keepalives_sent, l.keepalives_sent);
        add(
            &s.keepalives_received,
            now.keepalives_received,
            l.keepalives_received,
        );
        self.last = now.clone();
    }
}

impl Drop for TcpSessionFeed {
    fn drop(&mut self) {
        self.stats.sessions_open.fetch_sub(1, Relaxed);
    }
}

/// One UDPCL neighbour's counters.
#[derive(Debug, Default)]
struct UdpPeerStats {
    bundles_sent: AtomicU64,
    bytes_sent: AtomicU64,
    send_errors: AtomicU64,
    datagrams_received: AtomicU64,
    bytes_received: AtomicU64,
}

/// The configured UDPCL neighbours' counters (fixed at start: no lock).
#[derive(Debug, Default)]
pub(crate) struct UdpPeerTable {
    peers: BTreeMap<u64, UdpPeerStats>,
}

impl UdpPeerTable {
    pub(crate) fn new(peers: impl IntoIterator<Item = u64>) -> Self {
        Self {
            peers: peers.into_iter().map(|p| (p, Default::default())).collect(),
        }
    }

    /// A bundle of `len` bytes went to `peer` (in one datagram or as fragments).
    pub(crate) fn sent(&self, peer: u64, len: usize) {
        if let Some(s) = self.peers.get(&peer) {
            s.bundles_sent.fetch_add(1, Relaxed);
            s.bytes_sent.fetch_add(len as u64, Relaxed);
        }
    }

    /// Sending a bundle to `peer` failed.
    pub(crate) fn send_error(&self, peer: u64) {
        if let Some(s) = self.peers.get(&peer) {
            s.send_errors.fetch_add(1, Relaxed);
        }
    }

    /// A datagram of `len` bytes came from `peer` (None: an address no peer is configured at,
    /// counted only in the totals).
    pub(crate) fn received(&self, peer: Option<u64>, len: usize) {
        if let Some(s) = peer.and_then(|p| self.peers.get(&p)) {
            s.datagrams_received.fetch_add(1, Relaxed);
            s.bytes_received.fetch_add(len as u64, Relaxed);
        }
    }

    /// The `udpcl.peers` object.
    pub(crate) fn status(&self) -> BTreeMap<u64, UdpclPeerStatus> {
        self.peers
            .iter()
            .map(|(p, s)| {
                let v = UdpclPeerStatus {
                    bundles_sent: s.bundles_sent.load(Relaxed),
                    bytes_sent: s.bytes_sent.load(Relaxed),
                    send_errors: s.send_errors.load(Relaxed),
                    datagrams_received: s.datagrams_received.load(Relaxed),
                    bytes_received: s.bytes_received.load(Relaxed),
                };
                (*p, v)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_add_their_differences_and_count_open_while_alive() {
        let t = TcpPeerTable::default();
        let mut a = t.session(7);
        let mut b = t.session(7);
        let mut st = SessionStats {
            bytes_sent: 100,
            transfers_acked: 1,
            ..SessionStats::default()
        };
        a.feed(&st);
        a.feed(&st); // nothing new: nothing added
        st.bytes_sent = 150;
        a.feed(&st);
        b.feed(&SessionStats {
            bytes_received: 40,
            ..SessionStats::default()
        });
        let j = t.status();
        assert_eq!(j[&7].bytes_sent, 150);
        assert_eq!(j[&7].bytes_received, 40);
        assert_eq!(j[&7].transfers_acked, 1);
        assert_eq!(j[&7].sessions_open, 2);
        drop(a);
        assert_eq!(t.status()[&7].sessions_open, 1);
        assert_eq!(t.status()[&7].sessions_established, 2);
    }

    #[test]
    fn udp_counts_only_configured_peers() {
        let t = UdpPeerTable::new([3]);
        t.sent(3, 500);
        t.sent(4, 500);
        t.received(Some(3), 60);
        t.received(None, 60);
        t.send_error(3);
        let j = t.status();
        assert_eq!(j[&3].bytes_sent, 500);
        assert_eq!(j[&3].bundles_sent, 1);
        assert_eq!(j[&3].datagrams_received, 1);
        assert_eq!(j[&3].send_errors, 1);
        assert!(!j.contains_key(&4));
    }
}
