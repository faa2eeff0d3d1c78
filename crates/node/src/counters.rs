//! Counters shared between the node's threads: each is written by one convergence layer's
//! threads and read by the agent thread for the status reply (`dtnkit status`, the monitor).
//!
//! - [`LtpCounters`]: written by the LTP thread and its block thread (`ltp` object);
//! - [`TcpclCounters`]: written by the TCPCL listener, connectors and sessions (`tcpcl`);
//! - [`UdpclCounters`]: written by the UDPCL threads (`udpcl`);
//! - [`StcpCounters`]: written by the STCP threads (`stcp`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use client::status::{ImportsRefused, LtpStatus, StcpStatus, TcpclStatus, UdpclStatus};

/// Counts by name (a reason, a kind) as the status reply's maps.
pub(crate) fn by_name<'a>(
    counts: impl IntoIterator<Item = (&'a str, u64)>,
) -> BTreeMap<String, u64> {
    counts
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect()
}

/// Counters shared with the status reply (written by the LTP thread, and `bundles_staged` by
/// the LTP block thread).
#[derive(Debug, Default)]
pub(crate) struct LtpCounters {
    pub(crate) export_sessions: std::sync::atomic::AtomicU64,
    pub(crate) import_sessions: std::sync::atomic::AtomicU64,
    pub(crate) segments_sent: std::sync::atomic::AtomicU64,
    pub(crate) segments_received: std::sync::atomic::AtomicU64,
    pub(crate) blocks_received: std::sync::atomic::AtomicU64,
    /// Received bundles the block thread wrote into the store's staging files (`bp::ClaBlock::stage`).
    pub(crate) bundles_staged: std::sync::atomic::AtomicU64,
    pub(crate) exports_completed: std::sync::atomic::AtomicU64,
    pub(crate) exports_cancelled: std::sync::atomic::AtomicU64,
    /// Export sessions the receiver cancelled for lack of resources (see `cla::classify_cancel`).
    pub(crate) exports_refused: std::sync::atomic::AtomicU64,
    pub(crate) malformed: std::sync::atomic::AtomicU64,
    /// Datagrams refused by the source policy (`[ltp] accept_from`).
    pub(crate) wrong_source: std::sync::atomic::AtomicU64,
    /// Segments refused by a span's LTP authentication (`ltp::RecvError::Unauthenticated`).
    pub(crate) auth_rejected: std::sync::atomic::AtomicU64,
    /// Import sessions refused, evicted and stalled (see `ltp::SpanStats`), summed over
    /// spans: [paused, budget, full, evicted, stalled].
    pub(crate) admission: [std::sync::atomic::AtomicU64; 5],
    /// Data segments sent again (report-driven or after a checkpoint timeout), all spans: the
    /// visible cost of a receiver that drops datagrams (HDTN's and ION's 212 992-byte socket).
    pub(crate) data_segments_retransmitted: std::sync::atomic::AtomicU64,
    /// Checkpoint retransmission timer expirations, all spans.
    pub(crate) checkpoint_timeouts: std::sync::atomic::AtomicU64,
    /// Datagrams the kernel dropped at this node's LTP socket because its receive buffer was
    /// full (`SO_RXQ_OVFL`, as of the last receive): this node did not read fast enough.
    pub(crate) socket_drops: std::sync::atomic::AtomicU64,
    /// Tolerated peer deviations (`ltp::Deviation::ALL` order): segments accepted that strict
    /// RFC 5326 would refuse, e.g. ION's padded reports.
    pub(crate) deviations: [std::sync::atomic::AtomicU64; ltp::Deviation::ALL.len()],
    /// Pacing rate in effect per adaptive span (peer node → bit/s).
    pub(crate) adaptive_rates: std::sync::Mutex<std::collections::BTreeMap<u64, u64>>,
    /// Per-span counters and state, copied from the engine (`ltp.spans`).
    pub(crate) spans: crate::ltp_spans::SpanBoard,
    /// FEC counters per span with `[span.fec]`.
    pub(crate) fec: crate::fec_status::FecCounters,
}

impl LtpCounters {
    /// The counters as the status reply's `ltp` object.
    pub(crate) fn status(&self) -> LtpStatus {
        use std::sync::atomic::Ordering::Relaxed;
        let [paused, budget, full, evicted, stalled] =
            self.admission.each_ref().map(|a| a.load(Relaxed));
        LtpStatus {
            export_sessions: self.export_sessions.load(Relaxed),
            import_sessions: self.import_sessions.load(Relaxed),
            segments_sent: self.segments_sent.load(Relaxed),
            segments_received: self.segments_received.load(Relaxed),
            blocks_received: self.blocks_received.load(Relaxed),
            bundles_staged: self.bundles_staged.load(Relaxed),
            exports_completed: self.exports_completed.load(Relaxed),
            exports_cancelled: self.exports_cancelled.load(Relaxed),
            exports_refused: self.exports_refused.load(Relaxed),
            malformed_datagrams: self.malformed.load(Relaxed),
            wrong_source: self.wrong_source.load(Relaxed),
            auth_rejected: self.auth_rejected.load(Relaxed),
            imports_refused: ImportsRefused {
                paused,
                budget,
                full,
            },
            imports_evicted: evicted,
            imports_stalled: stalled,
            data_segments_retransmitted: self.data_segments_retransmitted.load(Relaxed),
            checkpoint_timeouts: self.checkpoint_timeouts.load(Relaxed),
            socket_drops: self.socket_drops.load(Relaxed),
            deviations: by_name(
                ltp::Deviation::ALL
                    .iter()
                    .zip(&self.deviations)
                    .map(|(d, n)| (d.name(), n.load(Relaxed))),
            ),
            adaptive_rate_bps: self
                .adaptive_rates
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            spans: self.spans.status(),
            fec: self.fec.status(),
        }
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
    pub(crate) bundles_staged: AtomicU64,
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

    /// The counters as the status reply's `tcpcl` object.
    pub(crate) fn status(&self) -> TcpclStatus {
        TcpclStatus {
            sessions_established: self.sessions_established.load(Relaxed),
            sessions_tls: self.sessions_tls.load(Relaxed),
            sessions_v3: self.sessions_v3.load(Relaxed),
            sessions_open: self.sessions_open.load(Relaxed),
            connect_failures: self.connect_failures.load(Relaxed),
            transfers_sent: self.transfers_sent.load(Relaxed),
            transfers_acked: self.transfers_acked.load(Relaxed),
            transfers_refused: self.transfers_refused.load(Relaxed),
            transfers_failed: self.transfers_failed.load(Relaxed),
            bundles_received: self.bundles_received.load(Relaxed),
            transfers_refused_by_us: self.transfers_refused_by_us.load(Relaxed),
            bytes_sent: self.bytes_sent.load(Relaxed),
            bytes_received: self.bytes_received.load(Relaxed),
            bundles_fragmented: self.bundles_fragmented.load(Relaxed),
            bundles_staged: self.bundles_staged.load(Relaxed),
            deviations: self
                .deviations
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default(),
            deviation_events: self.deviation_events.load(Relaxed),
            sessions_refused: self
                .sessions_refused
                .lock()
                .map(|m| by_name(m.iter().map(|(k, v)| (*k, *v))))
                .unwrap_or_default(),
            peers: self.peers.status(),
        }
    }
}

/// Counters for `dtnkit status` (written by the UDPCL threads only).
#[derive(Debug, Default)]
pub(crate) struct UdpclCounters {
    pub(crate) datagrams_sent: AtomicU64,
    pub(crate) datagrams_received: AtomicU64,
    pub(crate) bundles_fragmented: AtomicU64,
    pub(crate) oversize_refused: AtomicU64,
    pub(crate) send_errors: AtomicU64,
    pub(crate) truncated: AtomicU64,
    /// Per-neighbour counters.
    pub(crate) peers: crate::cla_peer_stats::UdpPeerTable,
}

impl UdpclCounters {
    /// The counters as the status reply's `udpcl` object.
    pub(crate) fn status(&self) -> UdpclStatus {
        UdpclStatus {
            datagrams_sent: self.datagrams_sent.load(Relaxed),
            datagrams_received: self.datagrams_received.load(Relaxed),
            bundles_fragmented: self.bundles_fragmented.load(Relaxed),
            oversize_refused: self.oversize_refused.load(Relaxed),
            send_errors: self.send_errors.load(Relaxed),
            truncated_datagrams: self.truncated.load(Relaxed),
            peers: self.peers.status(),
        }
    }
}

/// Counters for `dtnkit status` (written by the STCP listener, connectors and connections).
#[derive(Debug, Default)]
pub(crate) struct StcpCounters {
    pub(crate) connections_in: AtomicU64,
    pub(crate) connections_out: AtomicU64,
    pub(crate) connect_failures: AtomicU64,
    pub(crate) connections_refused: AtomicU64,
    pub(crate) bundles_sent: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) bundles_received: AtomicU64,
    pub(crate) bytes_received: AtomicU64,
    pub(crate) bundles_not_stored: AtomicU64,
    pub(crate) keepalives_sent: AtomicU64,
    pub(crate) keepalives_received: AtomicU64,
    pub(crate) frames_refused: AtomicU64,
    pub(crate) oversize_unsendable: AtomicU64,
    pub(crate) bundles_failed: AtomicU64,
}

impl StcpCounters {
    /// The counters as the status reply's `stcp` object.
    pub(crate) fn status(&self) -> StcpStatus {
        StcpStatus {
            connections_in: self.connections_in.load(Relaxed),
            connections_out: self.connections_out.load(Relaxed),
            connect_failures: self.connect_failures.load(Relaxed),
            connections_refused: self.connections_refused.load(Relaxed),
            bundles_sent: self.bundles_sent.load(Relaxed),
            bytes_sent: self.bytes_sent.load(Relaxed),
            bundles_received: self.bundles_received.load(Relaxed),
            bytes_received: self.bytes_received.load(Relaxed),
            bundles_not_stored: self.bundles_not_stored.load(Relaxed),
            keepalives_sent: self.keepalives_sent.load(Relaxed),
            keepalives_received: self.keepalives_received.load(Relaxed),
            frames_refused: self.frames_refused.load(Relaxed),
            oversize_unsendable: self.oversize_unsendable.load(Relaxed),
            bundles_failed: self.bundles_failed.load(Relaxed),
        }
    }
}
