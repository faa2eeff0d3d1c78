//! The metric families of one node status: the status reply ([`NodeStatus`], what `dtnkit
//! status --json` prints) mapped to named, typed, documented Prometheus metrics. The status
//! reply is the only source: no counter is kept twice. Every number of the reply's flat
//! sections that no rule below names is still exported, as `dtnkit_<section>_<field>` of type
//! untyped, so a counter added to the status later shows up in the metrics without a change
//! here.
//!
//! The rules are tables (one line per status field, read from the typed section; the first rule
//! of a family carries its help text); docs/operations.md lists the resulting metrics.

use std::collections::{BTreeMap, BTreeSet};

use client::status::{
    BibeStatus, BpsecStatus, BundleStatus, CommitLatency, ContactsStatus, IngressStatus,
    LtpSpanStatus, LtpStatus, NodeStatus, ProcessStatus, QueueStatus, StcpStatus, StoreStatus,
    TcpclPeerStatus, TcpclStatus, UdpclPeerStatus, UdpclStatus,
};
use serde::Serialize;
use serde_json::Value;

/// A metric's Prometheus type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Only goes up (the encoder appends `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// A status number no rule names (type unknown).
    Untyped,
}

/// Label pairs of one sample.
pub(crate) type Labels = Vec<(String, String)>;

/// One metric family and its samples.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Family {
    pub(crate) name: String,
    pub(crate) help: String,
    pub(crate) kind: Kind,
    pub(crate) samples: Vec<(Labels, f64)>,
}

/// A histogram: cumulative bucket counts by upper bound, the count and the sum.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Histogram {
    pub(crate) name: String,
    pub(crate) help: String,
    pub(crate) buckets: Vec<(f64, u64)>,
    pub(crate) count: u64,
    pub(crate) sum: f64,
}

/// A status number exported as a metric: the field of a section (its key in the reply) and how
/// to read it, the metric's type, name, fixed labels and help (empty: the family was described
/// by an earlier rule of the same table).
struct Rule<T> {
    field: &'static str,
    get: fn(&T) -> f64,
    kind: Kind,
    name: &'static str,
    labels: &'static [(&'static str, &'static str)],
    help: &'static str,
}

/// A status value as a sample.
trait Number {
    fn number(self) -> f64;
}

impl Number for u64 {
    fn number(self) -> f64 {
        self as f64
    }
}

impl Number for f64 {
    fn number(self) -> f64 {
        self
    }
}

/// A flag as 0 or 1.
impl Number for bool {
    fn number(self) -> f64 {
        f64::from(u8::from(self))
    }
}

/// The rule for field `$field` of the table's section type (its reply key is the field's name).
macro_rules! r {
    ($field:ident, $kind:expr, $name:expr, $labels:expr, $help:expr) => {
        Rule {
            field: stringify!($field),
            get: |s| Number::number(s.$field),
            kind: $kind,
            name: $name,
            labels: $labels,
            help: $help,
        }
    };
}

const C: Kind = Kind::Counter;
const G: Kind = Kind::Gauge;

const SENT: &[(&str, &str)] = &[("direction", "sent")];
const RECEIVED: &[(&str, &str)] = &[("direction", "received")];

// Rules per section of the status reply (its flat, node-wide numbers).

/// Rules of `bundles`.
#[rustfmt::skip]
const BUNDLES_RULES: &[Rule<BundleStatus>] = &[
    r!(created, C, "dtnkit_bundles_created", &[], "Bundles created by local applications."),
    r!(received, C, "dtnkit_bundles_received", &[], "Bundles accepted from convergence layers."),
    r!(forwarded, C, "dtnkit_bundles_forwarded", &[], "Bundles a convergence layer reported sent to the next hop."),
    r!(delivered, C, "dtnkit_bundles_delivered", &[], "Bundles delivered to local applications (acknowledged)."),
    r!(expired, C, "dtnkit_bundles_expired", &[], "Bundles whose lifetime ended while stored here."),
    r!(duplicates, C, "dtnkit_bundles_duplicate", &[], "Duplicate bundles dropped."),
    r!(hop_limit_exceeded, C, "dtnkit_bundles_hop_limit_exceeded", &[], "Bundles dropped for exceeding their hop limit."),
    r!(refused_store_full, C, "dtnkit_bundles_refused", &[("reason", "store_full")], "Bundles refused (from applications and peers), by reason."),
    r!(cla_failures, C, "dtnkit_cla_failures", &[], "Convergence-layer transmissions that failed (the bundle is forwarded again)."),
    r!(echoed, C, "dtnkit_bundles_echoed", &[], "Echo requests answered."),
    r!(fragmented, C, "dtnkit_bundles_fragmented", &[], "Stored bundles replaced by fragments that fit their next hop."),
    r!(created_prepared, C, "dtnkit_bundles_created_prepared", &[], "Bundles created around a payload block their application connection encoded (payload copy and CRC off the agent thread)."),
    r!(created_staged, C, "dtnkit_bundles_created_staged", &[], "Of those, bundles whose payload block their application connection also wrote to the store (only the headers written by the agent thread)."),
];

/// Rules of `bpsec`.
#[rustfmt::skip]
const BPSEC_RULES: &[Rule<BpsecStatus>] = &[
    r!(rules, G, "dtnkit_bpsec_rules", &[], "Rules of the BPSec policy."),
    r!(secured, C, "dtnkit_bpsec_secured", &[], "Bundles created here that the BPSec policy secured."),
    r!(accepted, C, "dtnkit_bpsec_accepted", &[], "Bundles for this node whose BPSec blocks verified or decrypted."),
    r!(failed, C, "dtnkit_bpsec_failed", &[], "Bundles for this node dropped for failing the BPSec policy."),
];

/// Rules of `store`.
#[rustfmt::skip]
const STORE_RULES: &[Rule<StoreStatus>] = &[
    r!(bundles, G, "dtnkit_store_bundles", &[], "Bundles in the store."),
    r!(bytes, G, "dtnkit_store_bytes", &[], "Bytes of encoded bundles in the store."),
    r!(quota_bytes, G, "dtnkit_store_quota_bytes", &[], "The store quota (bytes)."),
    r!(commits, C, "dtnkit_store_commits", &[], "Store transactions committed by the agent."),
    r!(hot_cache_budget_bytes, G, "dtnkit_store_hot_cache_budget_bytes", &[], "The store's hot cache budget (bytes; 0: none)."),
    r!(hot_cache_held_bytes, G, "dtnkit_store_hot_cache_bytes", &[], "Bytes the store's hot cache holds."),
    r!(hot_cache_hits, C, "dtnkit_store_hot_cache_reads", &[("result", "hit")], "Reads of stored bundles' bytes, served by the hot cache (hit) or from the store's files (miss)."),
    r!(hot_cache_misses, C, "dtnkit_store_hot_cache_reads", &[("result", "miss")], ""),
    r!(hot_cache_refused, C, "dtnkit_store_hot_cache_refused", &[], "Bundles the hot cache did not keep: it was full of entries younger than a second."),
    r!(hot_cache_evicted, C, "dtnkit_store_hot_cache_evicted", &[], "Hot cache entries dropped for newer bundles after waiting more than a second."),
    r!(hot_cache_hold_ms, G, "dtnkit_store_hot_cache_hold_ms", &[], "The longest an application's send is held while the hot cache drains (ms; 0: never)."),
    r!(hot_cache_send_holds, C, "dtnkit_store_hot_cache_send_holds", &[], "Applications' sends held until the draining hot cache had room for them."),
    r!(hot_cache_send_hold_timeouts, C, "dtnkit_store_hot_cache_send_hold_timeouts", &[], "Holds that ended at the limit rather than when room appeared."),
    r!(hot_cache_send_held_ms, C, "dtnkit_store_hot_cache_send_held_ms", &[], "Time applications' sends spent held (ms, all sends together)."),
    r!(commit_group_ms, G, "dtnkit_store_commit_group_ms", &[], "The longest applications' sends wait to be committed together while the links are busy (ms; 0: never)."),
    r!(send_commits, C, "dtnkit_store_send_commits", &[], "Store commits of applications' sends."),
    r!(sends_committed, C, "dtnkit_store_sends_committed", &[], "Applications' sends those commits committed (stored or refused)."),
];

/// Rules of `queues`.
#[rustfmt::skip]
const QUEUES_RULES: &[Rule<QueueStatus>] = &[
    r!(unrouted, G, "dtnkit_unrouted_bundles", &[], "Bundles waiting for a route."),
    r!(in_flight, G, "dtnkit_in_flight_bundles", &[], "Bundles handed to a convergence layer and not yet reported."),
    r!(pending_delivery, G, "dtnkit_pending_delivery_bundles", &[], "Bundles waiting for local delivery or its acknowledgment."),
];

/// Rules of `ingress`.
#[rustfmt::skip]
const INGRESS_RULES: &[Rule<IngressStatus>] = &[
    r!(paused, G, "dtnkit_ingress_paused", &[], "1 while ingress from peers is paused because applications fall behind."),
    r!(pauses, C, "dtnkit_ingress_pauses", &[], "Times ingress was paused."),
    r!(delivery_backlog_bytes, G, "dtnkit_delivery_backlog_bytes", &[], "Bytes owed to connected applications."),
    r!(delivery_backlog_bundles, G, "dtnkit_delivery_backlog_bundles", &[], "Bundles owed to connected applications."),
    r!(delivery_backlog_limit, G, "dtnkit_delivery_backlog_limit_bytes", &[], "Backlog above which ingress pauses (0: never)."),
];

/// Rules of `ltp`.
#[rustfmt::skip]
const LTP_RULES: &[Rule<LtpStatus>] = &[
    r!(export_sessions, G, "dtnkit_ltp_export_sessions", &[], "Open LTP export sessions (all spans)."),
    r!(import_sessions, G, "dtnkit_ltp_import_sessions", &[], "Open LTP import sessions (all spans)."),
    r!(segments_sent, C, "dtnkit_ltp_segments", SENT, "LTP segments (all spans), by direction."),
    r!(segments_received, C, "dtnkit_ltp_segments", RECEIVED, ""),
    r!(blocks_received, C, "dtnkit_ltp_blocks_received", &[], "Red blocks delivered to BP (all spans)."),
    r!(bundles_staged, C, "dtnkit_ltp_bundles_staged", &[], "Received bundles the LTP block thread wrote into the store's staging files."),
    r!(socket_drops, C, "dtnkit_ltp_socket_drops", &[], "Datagrams the kernel dropped at the LTP socket because its receive buffer was full."),
    r!(exports_completed, C, "dtnkit_ltp_exports_completed", &[], "Export sessions completed (all spans)."),
    r!(exports_cancelled, C, "dtnkit_ltp_exports_cancelled", &[], "Export sessions cancelled (all spans)."),
    r!(malformed_datagrams, C, "dtnkit_ltp_malformed_datagrams", &[], "LTP datagrams that failed to decode."),
    r!(auth_rejected, C, "dtnkit_ltp_auth_rejected", &[], "LTP segments refused by a span's authentication (RFC 5327)."),
];

/// Rules of `tcpcl`.
#[rustfmt::skip]
const TCPCL_RULES: &[Rule<TcpclStatus>] = &[
    r!(sessions_open, G, "dtnkit_tcpcl_sessions_open", &[], "Open TCPCL sessions (all peers)."),
    r!(sessions_established, C, "dtnkit_tcpcl_sessions_established", &[], "TCPCL sessions established."),
    r!(sessions_tls, C, "dtnkit_tcpcl_sessions_tls", &[], "TCPCL sessions established over TLS."),
    r!(sessions_v3, C, "dtnkit_tcpcl_sessions_v3", &[], "TCPCL sessions established in version 3 (RFC 7242)."),
    r!(connect_failures, C, "dtnkit_tcpcl_connect_failures", &[], "TCPCL connection attempts that failed."),
    r!(transfers_sent, C, "dtnkit_tcpcl_transfers_sent", &[], "Outgoing transfers started (all peers)."),
    r!(transfers_acked, C, "dtnkit_tcpcl_transfers", &[("outcome", "acked")], "Outgoing transfers (all peers), by outcome."),
    r!(transfers_refused, C, "dtnkit_tcpcl_transfers", &[("outcome", "refused")], ""),
    r!(transfers_failed, C, "dtnkit_tcpcl_transfers", &[("outcome", "failed")], ""),
    r!(bundles_received, C, "dtnkit_tcpcl_bundles_received", &[], "Bundles received over TCPCL (all peers)."),
    r!(transfers_refused_by_us, C, "dtnkit_tcpcl_transfers_refused_here", &[], "Incoming transfers this node refused (store full)."),
    r!(bytes_sent, C, "dtnkit_tcpcl_bytes", SENT, "TCPCL octets (all peers), by direction."),
    r!(bytes_received, C, "dtnkit_tcpcl_bytes", RECEIVED, ""),
    r!(bundles_fragmented, C, "dtnkit_tcpcl_bundles_fragmented", &[], "Bundles fragmented to fit a peer's transfer MRU."),
    r!(bundles_staged, C, "dtnkit_tcpcl_bundles_staged", &[], "Received bundles a session wrote into the store's staging files."),
    r!(deviation_events, C, "dtnkit_tcpcl_deviation_events", &[], "Tolerated TCPCL peer deviations (every occurrence)."),
];

/// Rules of `stcp`.
#[rustfmt::skip]
const STCP_RULES: &[Rule<StcpStatus>] = &[
    r!(connections_in, G, "dtnkit_stcp_connections_open", &[("direction", "in")], "Open STCP connections, by direction (in: receiving)."),
    r!(connections_out, G, "dtnkit_stcp_connections_open", &[("direction", "out")], ""),
    r!(connect_failures, C, "dtnkit_stcp_connect_failures", &[], "STCP connection attempts that failed."),
    r!(connections_refused, C, "dtnkit_stcp_connections_refused", &[], "STCP connections refused (max_connections open)."),
    r!(bundles_sent, C, "dtnkit_stcp_bundles", SENT, "Bundles over STCP, by direction (sent: written to the kernel)."),
    r!(bundles_received, C, "dtnkit_stcp_bundles", RECEIVED, ""),
    r!(bytes_sent, C, "dtnkit_stcp_bundle_bytes", SENT, "Bundle octets over STCP, by direction."),
    r!(bytes_received, C, "dtnkit_stcp_bundle_bytes", RECEIVED, ""),
    r!(keepalives_sent, C, "dtnkit_stcp_keepalives", SENT, "STCP keepalives (zero lengths), by direction."),
    r!(keepalives_received, C, "dtnkit_stcp_keepalives", RECEIVED, ""),
    r!(bundles_not_stored, C, "dtnkit_stcp_bundles_not_stored", &[], "Bundles received over STCP that the store did not take (lost)."),
    r!(frames_refused, C, "dtnkit_stcp_frames_refused", &[], "STCP frames refused (length above max_bundle_size; the connection was closed)."),
    r!(oversize_unsendable, C, "dtnkit_stcp_oversize_unsendable", &[], "Bundles too large for STCP's 32-bit length."),
    r!(bundles_failed, C, "dtnkit_stcp_bundles_failed", &[], "Bundles not completely written when their connection ended."),
];

/// Rules of `bibe` (its maps by reason are in [`Families::maps`]).
#[rustfmt::skip]
const BIBE_RULES: &[Rule<BibeStatus>] = &[
    r!(encapsulated, C, "dtnkit_bibe_bundles", &[("action", "encapsulated")], "Bundles through BIBE tunnels, by action."),
    r!(decapsulated, C, "dtnkit_bibe_bundles", &[("action", "decapsulated")], ""),
    r!(custody_accepted, C, "dtnkit_bibe_custody_accepted", &[], "Custody accepted by this node (decapsulated bundle stored)."),
    r!(custody_released, C, "dtnkit_bibe_custody_released", &[], "Bundles released by this node on a custody signal (accepted or redundant)."),
    r!(timer_expirations, C, "dtnkit_bibe_custody_timer_expirations", &[], "BIBE custody timers that expired."),
    r!(retransmissions, C, "dtnkit_bibe_retransmissions", &[], "BPDUs sent again after a custody timer."),
    r!(expired_in_custody, C, "dtnkit_bibe_expired_in_custody", &[], "Bundles whose lifetime ended while custody was pending."),
    r!(signals_sent, C, "dtnkit_bibe_custody_signals", SENT, "BIBE custody signals, by direction."),
    r!(signals_received, C, "dtnkit_bibe_custody_signals", RECEIVED, ""),
    r!(custody_pending, G, "dtnkit_bibe_custody_pending_bundles", &[], "Bundles waiting for a custody signal."),
    r!(custody_pending_bytes, G, "dtnkit_bibe_custody_pending_bytes", &[], "Bytes of bundles waiting for a custody signal."),
    r!(signal_ids_unknown, C, "dtnkit_bibe_signal_ids_unknown", &[], "Transmission IDs in received custody signals that named nothing pending."),
    r!(malformed, C, "dtnkit_bibe_records_malformed", &[], "Received BIBE records that did not decode (dropped)."),
    r!(ion_record_codes, C, "dtnkit_bibe_records_ion_codes", &[], "Received BIBE records in ION's record type codes (7 and 8)."),
    r!(outbound_not_stored, C, "dtnkit_bibe_outbound_not_stored", &[], "BPDUs and custody signals this node's store refused."),
];

/// Rules of `udpcl`.
#[rustfmt::skip]
const UDPCL_RULES: &[Rule<UdpclStatus>] = &[
    r!(datagrams_sent, C, "dtnkit_udpcl_datagrams_sent", &[], "UDPCL datagrams sent (all peers)."),
    r!(datagrams_received, C, "dtnkit_udpcl_datagrams_received", &[], "UDPCL datagrams received (all sources)."),
    r!(bundles_fragmented, C, "dtnkit_udpcl_bundles_fragmented", &[], "Bundles fragmented to fit a datagram."),
    r!(oversize_refused, C, "dtnkit_udpcl_oversize_refused", &[], "Bundles too large for a datagram that may not be fragmented."),
    r!(send_errors, C, "dtnkit_udpcl_send_errors", &[], "UDPCL sends that failed."),
    r!(truncated_datagrams, C, "dtnkit_udpcl_truncated_datagrams", &[], "Datagrams larger than the limit, dropped."),
];

/// Rules of `process`.
#[rustfmt::skip]
const PROCESS_RULES: &[Rule<ProcessStatus>] = &[
    r!(cpu_seconds, C, "process_cpu_seconds", &[], "User and system CPU time of the node process (s)."),
    r!(rss_bytes, G, "process_resident_memory_bytes", &[], "Resident memory of the node process (bytes)."),
    r!(threads, G, "process_threads", &[], "Threads of the node process."),
    r!(uptime_seconds, G, "dtnkit_uptime_seconds", &[], "Seconds since the node process started."),
];

/// Fields of the flat sections taken by the map rules below (exported with a label per key).
const MAPPED: &[(&str, &str)] = &[
    ("bundles", "malformed"),
    ("bundles", "malformed_by_reason"),
    ("store", "commit_latency"),
    ("queues", "per_neighbour"),
    ("ltp", "deviations"),
    ("ltp", "adaptive_rate_bps"),
    ("ltp", "spans"),
    ("tcpcl", "deviations"),
    ("tcpcl", "peers"),
    ("udpcl", "peers"),
    ("bibe", "custody_refused"),
    ("bibe", "custody_refused_by_peer"),
    ("bibe", "pending_per_tunnel"),
];

/// Rules per LTP span (`ltp.spans.<peer>`), labelled with `peer`.
#[rustfmt::skip]
const SPAN_RULES: &[Rule<LtpSpanStatus>] = &[
    r!(link_up, G, "dtnkit_ltp_span_link_up", &[], "1 while the span's link is up."),
    r!(export_sessions, G, "dtnkit_ltp_span_sessions", &[("direction", "export")], "Open LTP sessions of the span, by direction."),
    r!(import_sessions, G, "dtnkit_ltp_span_sessions", &[("direction", "import")], ""),
    r!(queued_blocks, G, "dtnkit_ltp_span_queued_blocks", &[], "Blocks waiting for a free export session."),
    r!(pacing_rate_bps, G, "dtnkit_ltp_span_pacing_rate_bps", &[], "Pacing rate in effect (bit/s; 0 = unpaced)."),
    r!(segments_sent, C, "dtnkit_ltp_span_segments", SENT, "LTP segments of the span, by direction."),
    r!(segments_received, C, "dtnkit_ltp_span_segments", RECEIVED, ""),
    r!(data_bytes_sent, C, "dtnkit_ltp_span_data_bytes_sent", &[], "Payload bytes in data segments sent, retransmissions included."),
    r!(data_segments_retransmitted, C, "dtnkit_ltp_span_data_segments_retransmitted", &[], "Data segments sent again."),
    r!(reports_sent, C, "dtnkit_ltp_span_reports", SENT, "Report segments of the span, by direction."),
    r!(reports_received, C, "dtnkit_ltp_span_reports", RECEIVED, ""),
    r!(retransmission_cycles, C, "dtnkit_ltp_span_retransmission_cycles", &[], "Retransmission cycles started by reports with gaps."),
    r!(checkpoint_timeouts, C, "dtnkit_ltp_span_rto_expirations", &[("timer", "checkpoint")], "Retransmission timer (RTO) expirations, by timer."),
    r!(report_timeouts, C, "dtnkit_ltp_span_rto_expirations", &[("timer", "report")], ""),
    r!(cancel_timeouts, C, "dtnkit_ltp_span_rto_expirations", &[("timer", "cancel")], ""),
    r!(exports_completed, C, "dtnkit_ltp_span_blocks", SENT, "Blocks completed: export sessions acknowledged (sent) and red blocks delivered to BP (received)."),
    r!(blocks_received, C, "dtnkit_ltp_span_blocks", RECEIVED, ""),
    r!(export_bytes_completed, C, "dtnkit_ltp_span_block_bytes", SENT, "Bytes of completed blocks (goodput), by direction."),
    r!(block_bytes_received, C, "dtnkit_ltp_span_block_bytes", RECEIVED, ""),
    r!(exports_cancelled, C, "dtnkit_ltp_span_sessions_cancelled", &[("direction", "export")], "Sessions cancelled, by direction."),
    r!(imports_cancelled, C, "dtnkit_ltp_span_sessions_cancelled", &[("direction", "import")], ""),
    r!(imports_refused, C, "dtnkit_ltp_span_imports_refused", &[], "Segments that would have opened an import session beyond the limits."),
    r!(stale_segments, C, "dtnkit_ltp_span_stale_segments", &[], "Segments for closed or unknown sessions, dropped."),
];

/// Rules per TCPCL neighbour (`tcpcl.peers.<peer>`), labelled with `peer`.
#[rustfmt::skip]
const TCP_PEER_RULES: &[Rule<TcpclPeerStatus>] = &[
    r!(sessions_open, G, "dtnkit_tcpcl_peer_sessions_open", &[], "Open TCPCL sessions with the peer."),
    r!(sessions_established, C, "dtnkit_tcpcl_peer_sessions_established", &[], "TCPCL sessions established with the peer."),
    r!(bytes_sent, C, "dtnkit_tcpcl_peer_bytes", SENT, "TCPCL octets exchanged with the peer, by direction."),
    r!(bytes_received, C, "dtnkit_tcpcl_peer_bytes", RECEIVED, ""),
    r!(segments_sent, C, "dtnkit_tcpcl_peer_segments", SENT, "XFER_SEGMENTs exchanged with the peer, by direction."),
    r!(segments_received, C, "dtnkit_tcpcl_peer_segments", RECEIVED, ""),
    r!(transfers_acked, C, "dtnkit_tcpcl_peer_transfers", &[("outcome", "acked")], "Outgoing transfers to the peer, by outcome."),
    r!(transfers_refused_by_peer, C, "dtnkit_tcpcl_peer_transfers", &[("outcome", "refused")], ""),
    r!(transfers_failed, C, "dtnkit_tcpcl_peer_transfers", &[("outcome", "failed")], ""),
    r!(bundles_received, C, "dtnkit_tcpcl_peer_bundles_received", &[], "Bundles received from the peer."),
    r!(transfers_refused, C, "dtnkit_tcpcl_peer_transfers_refused_here", &[], "Incoming transfers from the peer this node refused."),
    r!(keepalives_received, C, "dtnkit_tcpcl_peer_keepalives_received", &[], "KEEPALIVEs received from the peer."),
];

/// Rules per UDPCL neighbour (`udpcl.peers.<peer>`), labelled with `peer`.
#[rustfmt::skip]
const UDP_PEER_RULES: &[Rule<UdpclPeerStatus>] = &[
    r!(bundles_sent, C, "dtnkit_udpcl_peer_bundles_sent", &[], "Bundles sent to the peer."),
    r!(bytes_sent, C, "dtnkit_udpcl_peer_bytes", SENT, "UDPCL bytes exchanged with the peer, by direction."),
    r!(bytes_received, C, "dtnkit_udpcl_peer_bytes", RECEIVED, ""),
    r!(datagrams_received, C, "dtnkit_udpcl_peer_datagrams_received", &[], "Datagrams received from the peer."),
    r!(send_errors, C, "dtnkit_udpcl_peer_send_errors", &[], "Sends to the peer that failed."),
];

fn label(k: &str, v: impl ToString) -> (String, String) {
    (k.to_string(), v.to_string())
}

/// A JSON number (or boolean, as 0/1) as f64.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// Everything one status reply exports.
#[derive(Debug, Default)]
pub(crate) struct Families {
    pub(crate) families: Vec<Family>,
    pub(crate) histograms: Vec<Histogram>,
}

impl Families {
    /// The families of `status`.
    pub(crate) fn from_status(status: &NodeStatus) -> Families {
        let mut f = Families::default();
        f.push(
            Kind::Gauge,
            "dtnkit_node_info",
            "This node: its ipn node number and the dtnkit version (always 1).",
            vec![
                label("node", status.node),
                label("version", env!("CARGO_PKG_VERSION")),
            ],
            1.0,
        );
        f.apply(&status.bundles, BUNDLES_RULES, &[]);
        if let Some(b) = &status.bpsec {
            f.apply(b, BPSEC_RULES, &[]);
        }
        f.apply(&status.store, STORE_RULES, &[]);
        f.apply(&status.queues, QUEUES_RULES, &[]);
        f.apply(&status.ingress, INGRESS_RULES, &[]);
        f.apply(&status.ltp, LTP_RULES, &[]);
        if let Some(t) = &status.tcpcl {
            f.apply(t, TCPCL_RULES, &[]);
        }
        if let Some(u) = &status.udpcl {
            f.apply(u, UDPCL_RULES, &[]);
        }
        if let Some(u) = &status.stcp {
            f.apply(u, STCP_RULES, &[]);
        }
        if let Some(b) = &status.bibe {
            f.apply(b, BIBE_RULES, &[]);
        }
        if let Some(p) = &status.process {
            f.apply(p, PROCESS_RULES, &[]);
        }
        f.maps(status);
        f.per_peer(&status.ltp.spans, SPAN_RULES);
        if let Some(t) = &status.tcpcl {
            f.per_peer(&t.peers, TCP_PEER_RULES);
        }
        if let Some(u) = &status.udpcl {
            f.per_peer(&u.peers, UDP_PEER_RULES);
        }
        f.apps(&status.apps);
        f.histogram(&status.store.commit_latency);
        f.contacts(&status.contacts);
        f.untyped_rest(status);
        f
    }

    /// Adds a sample to the family `name` (created on first use).
    fn push(&mut self, kind: Kind, name: &str, help: &str, labels: Labels, value: f64) {
        match self.families.iter_mut().find(|f| f.name == name) {
            Some(f) => f.samples.push((labels, value)),
            None => self.families.push(Family {
                name: name.to_string(),
                help: help.to_string(),
                kind,
                samples: vec![(labels, value)],
            }),
        }
    }

    /// Exports the fields of `section` that `rules` name, with `extra` labels first.
    fn apply<T>(&mut self, section: &T, rules: &[Rule<T>], extra: &[(String, String)]) {
        for rule in rules {
            let mut labels = extra.to_vec();
            labels.extend(rule.labels.iter().map(|(k, v)| label(k, v)));
            self.push(rule.kind, rule.name, rule.help, labels, (rule.get)(section));
        }
    }

    /// Exports every count of `counts` (name → number) under `name`, with the name as label
    /// `key` after `extra`.
    fn map<'a>(
        &mut self,
        counts: impl IntoIterator<Item = (&'a str, u64)>,
        name: &str,
        help: &str,
        key: &str,
        extra: &Labels,
    ) {
        for (k, n) in counts {
            let mut labels = extra.clone();
            labels.push(label(key, k));
            self.push(Kind::Counter, name, help, labels, n as f64);
        }
    }

    /// The objects keyed by reason, kind or reporting node.
    fn maps(&mut self, s: &NodeStatus) {
        let none = Vec::new();
        self.map(
            named(&s.bundles.malformed_by_reason),
            "dtnkit_bundles_malformed",
            "Malformed or oversized bundles refused from convergence layers, by class of failure.",
            "reason",
            &none,
        );
        self.map(
            named(&s.ltp.deviations),
            "dtnkit_ltp_deviations",
            "Tolerated peer deviations from RFC 5326 in every decoded datagram, by kind.",
            "kind",
            &none,
        );
        if let Some(t) = &s.tcpcl {
            self.map(
                named(&t.deviations),
                "dtnkit_tcpcl_deviations",
                "Tolerated TCPCL peer deviations, by kind.",
                "kind",
                &none,
            );
        }
        if let Some(b) = &s.bibe {
            self.map(
                named(&b.custody_refused),
                "dtnkit_bibe_custody_refused",
                "Custody refused by this node, by reason (redundant, depleted_storage, ...).",
                "reason",
                &none,
            );
            self.map(
                named(&b.custody_refused_by_peer),
                "dtnkit_bibe_custody_refused_by_peer",
                "Custody of this node's bundles refused by the tunnel's far end, by reason.",
                "reason",
                &none,
            );
        }
        for (peer, n) in &s.queues.per_neighbour {
            let help =
                "Bundles waiting for a neighbour's link (not yet handed to its convergence layer).";
            let labels = vec![label("neighbour", peer)];
            self.push(Kind::Gauge, "dtnkit_queue_bundles", help, labels, *n as f64);
        }
        for (from, c) in &s.status_reports {
            self.map(
                [
                    ("delivered", c.delivered),
                    ("deleted", c.deleted),
                    ("forwarded", c.forwarded),
                    ("other_records", c.other_records),
                    ("received", c.received),
                ],
                "dtnkit_status_reports_received",
                "BP status reports (and other administrative records) received, by reporting node and assertion.",
                "assertion",
                &vec![label("from", from)],
            );
        }
        for (peer, sp) in &s.ltp.spans {
            let cancels =
                "Session cancellations by RFC 5326 reason and by who cancelled (here or peer).";
            for (counts, by) in [
                (&sp.cancelled_here, "here"),
                (&sp.cancelled_by_peer, "peer"),
            ] {
                let labels = vec![label("peer", peer), label("by", by)];
                self.map(
                    named(counts),
                    "dtnkit_ltp_span_cancels",
                    cancels,
                    "reason",
                    &labels,
                );
            }
            self.map(
                named(&sp.deviations),
                "dtnkit_ltp_span_deviations",
                "Tolerated peer deviations from RFC 5326 in the span's sessions, by kind.",
                "kind",
                &vec![label("peer", peer)],
            );
            self.map(
                named(&sp.auth_rejected),
                "dtnkit_ltp_span_auth_rejected",
                "LTP segments refused by the span's authentication (RFC 5327), by reason.",
                "reason",
                &vec![label("peer", peer)],
            );
        }
    }

    /// The counters applications reported (a `dtnkit cfdp serve` on this node), labelled with
    /// the application, its connection and the counter's name.
    fn apps(&mut self, apps: &[client::status::AppStatus]) {
        let help = "Counters reported by applications connected to the node (e.g. a CFDP entity's \
                    refused PDUs), by application, connection and counter.";
        for a in apps {
            let extra = vec![label("app", &a.app), label("connection", a.connection)];
            self.map(
                named(&a.counters),
                "dtnkit_app_counter",
                help,
                "counter",
                &extra,
            );
        }
    }

    /// Applies `rules` to every neighbour of `peers`, labelled `peer`.
    fn per_peer<T>(&mut self, peers: &BTreeMap<u64, T>, rules: &[Rule<T>]) {
        for (peer, section) in peers {
            self.apply(section, rules, &[label("peer", peer)]);
        }
    }

    /// The store commit histogram (`store.commit_latency`).
    fn histogram(&mut self, h: &CommitLatency) {
        if h.le_s.len() != h.cumulative.len() {
            return;
        }
        self.histograms.push(Histogram {
            name: "dtnkit_store_commit_seconds".into(),
            help:
                "Duration of store commits (one transaction; with fsync when the store is durable)."
                    .into(),
            buckets: h
                .le_s
                .iter()
                .copied()
                .zip(h.cumulative.iter().copied())
                .collect(),
            count: h.count,
            sum: h.sum_s,
        });
    }

    /// Link state per neighbour and the contact plan's current and next contacts.
    fn contacts(&mut self, c: &ContactsStatus) {
        for (peer, n) in &c.neighbours {
            let cla = n.cla.map_or("none", |c| c.name());
            let help = "1 while the link to the neighbour is up (contact plan, configuration or TCPCL session).";
            let labels = vec![label("peer", peer), label("cla", cla)];
            self.push(
                Kind::Gauge,
                "dtnkit_neighbour_link_up",
                help,
                labels,
                n.link_up.number(),
            );
            let help = "Rate of the link to the neighbour while it is up (bit/s; 0 = not given).";
            self.push(
                Kind::Gauge,
                "dtnkit_neighbour_rate_bps",
                help,
                vec![label("peer", peer)],
                n.rate_bps as f64,
            );
        }
        let Some(plan) = &c.plan else {
            return;
        };
        let active = plan.contacts.iter().filter(|x| x.active).count();
        let help = "Contacts of this node in the contact plan that are active now.";
        self.push(
            Kind::Gauge,
            "dtnkit_plan_contacts_active",
            help,
            Vec::new(),
            active as f64,
        );
        let help = "Contacts of this node in the contact plan that have not ended.";
        self.push(
            Kind::Gauge,
            "dtnkit_plan_contacts_remaining",
            help,
            Vec::new(),
            plan.remaining as f64,
        );
        let next = plan
            .contacts
            .iter()
            .map(|x| x.start_in_s)
            .filter(|t| *t > 0.0)
            .reduce(f64::min);
        if let Some(t) = next {
            let help = "Seconds until the next planned contact of this node starts.";
            self.push(
                Kind::Gauge,
                "dtnkit_plan_next_contact_start_seconds",
                help,
                Vec::new(),
                t,
            );
        }
    }

    /// Every number of a flat section that no rule took, as `dtnkit_<section>_<field>`.
    fn untyped_rest(&mut self, s: &NodeStatus) {
        self.untyped("store", &s.store, STORE_RULES);
        self.untyped("queues", &s.queues, QUEUES_RULES);
        self.untyped("bundles", &s.bundles, BUNDLES_RULES);
        self.untyped("ingress", &s.ingress, INGRESS_RULES);
        if let Some(b) = &s.bpsec {
            self.untyped("bpsec", b, BPSEC_RULES);
        }
        self.untyped("ltp", &s.ltp, LTP_RULES);
        if let Some(t) = &s.tcpcl {
            self.untyped("tcpcl", t, TCPCL_RULES);
        }
        if let Some(u) = &s.udpcl {
            self.untyped("udpcl", u, UDPCL_RULES);
        }
        if let Some(u) = &s.stcp {
            self.untyped("stcp", u, STCP_RULES);
        }
        if let Some(b) = &s.bibe {
            self.untyped("bibe", b, BIBE_RULES);
        }
    }

    /// The numbers of `section` (the reply's `name` object) that neither `rules` nor the map
    /// rules ([`MAPPED`]) export, as untyped metrics.
    fn untyped<T: Serialize>(&mut self, name: &str, section: &T, rules: &[Rule<T>]) {
        let Ok(Value::Object(m)) = serde_json::to_value(section) else {
            return;
        };
        let mapped = MAPPED.iter().filter(|(sec, _)| *sec == name);
        let taken: BTreeSet<&str> = rules
            .iter()
            .map(|r| r.field)
            .chain(mapped.map(|(_, f)| *f))
            .collect();
        for (k, v) in m {
            let Some(x) = number(&v).filter(|_| !taken.contains(k.as_str())) else {
                continue;
            };
            let metric = format!("dtnkit_{name}_{}", sanitize(&k));
            let help = format!("Status field {name}.{k} (see `dtnkit status`).");
            self.push(Kind::Untyped, &metric, &help, Vec::new(), x);
        }
    }
}

/// The counts of a map keyed by name (reason, kind).
fn named(m: &BTreeMap<String, u64>) -> impl Iterator<Item = (&str, u64)> {
    m.iter().map(|(k, n)| (k.as_str(), *n))
}

/// A status key as a metric-name fragment: `[a-zA-Z0-9_]` kept, anything else `_`.
fn sanitize(k: &str) -> String {
    k.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
