//! The node's status reply as typed structs, shared by the node that writes it and every
//! program that reads it (`dtnkit status`, the node's metrics exporter and web view, the lab,
//! tests).
//!
//! On the wire the reply stays what it always was: one JSON object in [`Response::Status`]
//! (`docs/app-protocol.md`), whose keys `docs/node.md` ("Status") documents. [`NodeStatus`] is
//! that object: the node builds one and serialises it once ([`NodeStatus::to_json`]), readers
//! parse it back ([`NodeStatus::from_json`], [`crate::Client::node_status`]) and read fields,
//! so a key cannot change on one side only. Serialising a parsed reply gives the same JSON
//! again.
//!
//! Sections a node does not run are `null` ([`Option`] here): `tcpcl` and `udpcl` without that
//! convergence layer, `bpsec` without a `[bpsec]` policy, `ltp.fec` without a `[span.fec]`,
//! `contacts.plan` without a contact plan, `process` without procfs. `store.degraded` is present
//! only while the store is degraded. Numbers missing from a reply (a node of an older version)
//! read as zero, maps as empty.
//!
//! Maps keyed by a neighbour's node number ([`BTreeMap<u64, _>`]) have decimal strings as
//! JSON keys (`"2"`); maps keyed by a name (a reason, a kind, a reporting node) keep the name.
//!
//! [`Response::Status`]: crate::Response::Status

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The whole status reply of a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    /// The node's ipn node number (node id `ipn:N.0`).
    pub node: u64,
    /// The bundle store: contents, commits and health.
    pub store: StoreStatus,
    /// Neighbours being waited for after refusing bundles for lack of resources, by node.
    pub backoff: BTreeMap<u64, BackoffStatus>,
    /// Bundles waiting, by where they wait.
    pub queues: QueueStatus,
    /// The ingress gate (back-pressure from applications to peers).
    pub ingress: IngressStatus,
    /// BP status reports received, by reporting node id (`ipn:N.0`, or `other` beyond the
    /// tracked reporters).
    pub status_reports: BTreeMap<String, StatusReportCounts>,
    /// Bundle counters.
    pub bundles: BundleStatus,
    /// LTP: totals of all spans, each span, FEC.
    pub ltp: LtpStatus,
    /// TCPCL (`null` when no TCPCL is configured).
    pub tcpcl: Option<TcpclStatus>,
    /// UDPCL (`null` when no UDPCL is configured).
    pub udpcl: Option<UdpclStatus>,
    /// STCP, ION's and HDTN's simple TCP (`null` when no STCP is configured).
    pub stcp: Option<StcpStatus>,
    /// BIBE tunnels and custody transfer (`null` when the node runs no BIBE).
    pub bibe: Option<BibeStatus>,
    /// BPSec policy outcomes (`null` without a `[bpsec]` policy).
    pub bpsec: Option<BpsecStatus>,
    /// Neighbours' links and the contact plan.
    pub contacts: ContactsStatus,
    /// The node process's resource use (`null` where procfs is not available).
    pub process: Option<ProcessStatus>,
    /// Counters reported by connected applications (`Request::Counters`, e.g. a `dtnkit cfdp
    /// serve` on this node), one entry per connection that reported, by connection number.
    pub apps: Vec<AppStatus>,
}

/// One application's counters, as it last reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppStatus {
    /// The application's name (`cfdp`).
    pub app: String,
    /// The application-socket connection it reported on (numbered from 1 since the node
    /// started).
    pub connection: u64,
    /// When the report arrived, DTN milliseconds.
    pub reported_ms: u64,
    /// Counter name → value.
    pub counters: BTreeMap<String, u64>,
}

impl NodeStatus {
    /// Parses the JSON text of a status reply.
    pub fn from_json(json: &str) -> Result<NodeStatus, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The JSON text of the reply, as the node sends it.
    pub fn to_json(&self) -> String {
        // Serialising plain structs, maps with string or integer keys and numbers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The reply's JSON text.
impl fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// `store`: the bundle store.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoreStatus {
    /// Bundles in the store.
    pub bundles: u64,
    /// Bytes of encoded bundles in the store.
    pub bytes: u64,
    /// The quota of encoded bundles (bytes).
    pub quota_bytes: u64,
    /// Store transactions committed by the agent.
    pub commits: u64,
    /// Durations of those commits.
    pub commit_latency: CommitLatency,
    /// Healthy, or degraded after a store failure.
    pub state: StoreState,
    /// Why and since when the store is degraded (absent while it is healthy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<DegradedStatus>,
    /// Store operations that failed (commits, reads) since the node started.
    pub failures: u64,
    /// Times the store came back from degraded to healthy.
    pub recoveries: u64,
    /// Bundles found on disk after a reopen that a failed commit had written after all.
    pub recovered_from_disk: u64,
    /// The hot cache (bytes of recently stored bundles kept in memory for forwarding and
    /// delivery, `[store] hot_cache_mb`): its budget (0 for a store without one).
    pub hot_cache_budget_bytes: u64,
    /// Bytes it holds now.
    pub hot_cache_held_bytes: u64,
    /// Reads of a bundle's bytes it served (no read from the store's files).
    pub hot_cache_hits: u64,
    /// Reads it could not serve: the bytes were read back from the store's files.
    pub hot_cache_misses: u64,
    /// Bundles it did not keep because it was full of entries younger than one second (the
    /// next ones a draining backlog reads).
    pub hot_cache_refused: u64,
    /// Entries it dropped for a newer bundle after they had waited more than a second.
    pub hot_cache_evicted: u64,
    /// The longest an application's send is held while the hot cache has no room for it and
    /// drains (`[store] hot_cache_hold_ms`; 0: never held; docs/node.md, "The send gate").
    pub hot_cache_hold_ms: u64,
    /// Sends held that way.
    pub hot_cache_send_holds: u64,
    /// Holds that ended at the limit rather than when room appeared.
    pub hot_cache_send_hold_timeouts: u64,
    /// Time spent held, all sends together (ms).
    pub hot_cache_send_held_ms: u64,
    /// The longest applications' sends wait to be committed together while the links are
    /// busy (`[store] commit_group_ms`; 0: each turn's sends at once; docs/node.md, "Group
    /// commit").
    pub commit_group_ms: u64,
    /// Store commits of applications' sends.
    pub send_commits: u64,
    /// The sends they committed (stored or refused): over `send_commits`, the mean group.
    pub sends_committed: u64,
}

/// `store.state`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreState {
    /// The store works.
    #[default]
    Ok,
    /// The store failed; new bundles are refused until a recovery attempt succeeds.
    Degraded,
}

/// `store.degraded`: a degraded store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DegradedStatus {
    /// The store's error message.
    pub reason: String,
    /// DTN time (ms) of the failure that degraded it.
    pub since_ms: u64,
    /// How long it has been degraded (ms).
    pub for_ms: u64,
    /// Recovery attempts that failed since then.
    pub attempts: u64,
    /// Time until the next recovery attempt (ms).
    pub retry_in_ms: u64,
}

/// `store.commit_latency`: a histogram of store commit durations (Prometheus `le` semantics).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CommitLatency {
    /// Upper bounds of the buckets (s); slower commits count only in `count`.
    pub le_s: Vec<f64>,
    /// Commits that took at most the bound of the same index.
    pub cumulative: Vec<u64>,
    /// Commits timed.
    pub count: u64,
    /// Sum of their durations (s).
    pub sum_s: f64,
}

/// `backoff.<node>`: a neighbour that refused bundles for lack of resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackoffStatus {
    /// Time until its queue is served again (ms; 0: not waiting now).
    pub waiting_ms: u64,
    /// The wait the next refusal will impose (ms).
    pub next_delay_ms: u64,
    /// Refusals since it last took a bundle.
    pub refusals: u64,
}

/// `queues`: bundles waiting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueStatus {
    /// Bundles waiting for each neighbour's link (not yet handed to its convergence layer).
    pub per_neighbour: BTreeMap<u64, u64>,
    /// Bundles waiting for a route.
    pub unrouted: u64,
    /// Bundles handed to a convergence layer and not yet reported sent or failed.
    pub in_flight: u64,
    /// Bundles waiting for local delivery or its acknowledgment.
    pub pending_delivery: u64,
}

/// `ingress`: the ingress gate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IngressStatus {
    /// True while the node takes no bundles from its peers.
    pub paused: bool,
    /// Times the gate closed since the node started.
    pub pauses: u64,
    /// Bundles stored for registered endpoints and not yet acknowledged by their applications.
    pub delivery_backlog_bundles: u64,
    /// Their bytes.
    pub delivery_backlog_bytes: u64,
    /// Backlog (bytes) above which the gate closes; 0: never.
    pub delivery_backlog_limit: u64,
}

/// `status_reports.<node id>`: status reports from one reporting node, by asserted status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusReportCounts {
    /// Reports asserting reception.
    pub received: u64,
    /// Reports asserting forwarding.
    pub forwarded: u64,
    /// Reports asserting delivery.
    pub delivered: u64,
    /// Reports asserting deletion.
    pub deleted: u64,
    /// Administrative records other than status reports.
    pub other_records: u64,
}

/// `bundles`: bundle counters since the node started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BundleStatus {
    /// Bundles created by local applications.
    pub created: u64,
    /// Bundles accepted from convergence layers.
    pub received: u64,
    /// Bundles a convergence layer reported sent to the next hop.
    pub forwarded: u64,
    /// Bundles delivered to local applications (acknowledged).
    pub delivered: u64,
    /// Bundles whose lifetime ended while stored here.
    pub expired: u64,
    /// Duplicate bundles dropped.
    pub duplicates: u64,
    /// Bundles refused because the store was full (from applications and peers).
    pub refused_store_full: u64,
    /// Convergence-layer transmissions that failed (the bundle is forwarded again).
    pub cla_failures: u64,
    /// Of those, refusals for lack of resources at the next hop.
    pub cla_refusals: u64,
    /// Malformed or oversized bundles refused from convergence layers.
    pub malformed: u64,
    /// `malformed` by class: `too_large` or the decode failure's class (`truncated`, `cbor`,
    /// `version`, `crc`, `eid`, `block_structure`, `field_value`, `trailing_bytes`).
    pub malformed_by_reason: BTreeMap<String, u64>,
    /// Data from convergence layers dropped without becoming a bundle, by reason.
    pub discarded: BTreeMap<String, u64>,
    /// Bundles dropped for exceeding their hop limit.
    pub hop_limit_exceeded: u64,
    /// Echo requests answered.
    pub echoed: u64,
    /// Stored bundles replaced by fragments that fit their next hop (an LTP span's
    /// `peer_max_block_bytes`); not counted: fragments the TCPCL and UDPCL sessions cut as
    /// they send (`tcpcl`/`udpcl` `bundles_fragmented`).
    pub fragmented: u64,
    /// Bundles created from a `Send` whose payload block the application connection's thread
    /// encoded (payload copy and CRC): the agent only wrote the headers in front of it.
    pub created_prepared: u64,
    /// Of those, bundles whose payload block that thread also wrote to the store (a staging
    /// file, volatile stores, from 256 KiB): the agent wrote only the headers to the store.
    #[serde(default)]
    pub created_staged: u64,
}

/// `ltp`: the LTP engine, all spans together, then each span.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LtpStatus {
    /// Open export sessions.
    pub export_sessions: u64,
    /// Open import sessions.
    pub import_sessions: u64,
    /// Segments sent.
    pub segments_sent: u64,
    /// Segments received.
    pub segments_received: u64,
    /// Red blocks delivered to BP.
    pub blocks_received: u64,
    /// Received bundles the LTP block thread wrote into the store's staging files (256 KiB
    /// and more with a volatile store, 16 MiB with a durable one), so the agent did not.
    #[serde(default)]
    pub bundles_staged: u64,
    /// Export sessions completed.
    pub exports_completed: u64,
    /// Export sessions cancelled.
    pub exports_cancelled: u64,
    /// Export sessions the receiver cancelled for lack of resources.
    pub exports_refused: u64,
    /// Datagrams that did not decode (also segments of unknown engines and sessions).
    pub malformed_datagrams: u64,
    /// Datagrams refused by the source policy (`[ltp] accept_from`).
    pub wrong_source: u64,
    /// Segments refused by a span's LTP authentication (RFC 5327), all spans and reasons
    /// (by span and reason: `spans.<peer>.auth_rejected`).
    pub auth_rejected: u64,
    /// Segments that would have opened an import session while none was taken, by reason.
    pub imports_refused: ImportsRefused,
    /// Incomplete import sessions dropped to make room for a new one.
    pub imports_evicted: u64,
    /// Import sessions dropped for never progressing.
    pub imports_stalled: u64,
    /// Data segments sent again.
    pub data_segments_retransmitted: u64,
    /// Checkpoint retransmission timer expirations.
    pub checkpoint_timeouts: u64,
    /// Datagrams the kernel dropped at this node's LTP socket because its receive buffer was
    /// full: losses this node caused by not reading fast enough (not the network's).
    #[serde(default)]
    pub socket_drops: u64,
    /// Segments accepted although strict RFC 5326 refuses them, by kind.
    pub deviations: BTreeMap<String, u64>,
    /// Pacing rate in effect (bit/s) of each adaptive span, by peer node.
    pub adaptive_rate_bps: BTreeMap<u64, u64>,
    /// Each span's state and counters, by peer node (copied from the engine every 200 ms).
    pub spans: BTreeMap<u64, LtpSpanStatus>,
    /// FEC counters of the spans with `[span.fec]`, by peer node (`null`: no FEC span).
    pub fec: Option<BTreeMap<u64, FecSpanStatus>>,
}

/// `ltp.imports_refused`: import sessions refused, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImportsRefused {
    /// The ingress gate was closed.
    pub paused: u64,
    /// `[ltp] max_import_bytes` was reached.
    pub budget: u64,
    /// The span had `max_import_sessions` open.
    pub full: u64,
}

/// `ltp.spans.<peer>`: one LTP span.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LtpSpanStatus {
    /// The peer's LTP engine id.
    pub engine_id: u64,
    /// True while the span's link is up.
    pub link_up: bool,
    /// Open export sessions.
    pub export_sessions: u64,
    /// Open import sessions.
    pub import_sessions: u64,
    /// Blocks waiting for a free export session.
    pub queued_blocks: u64,
    /// Pacing rate in effect (bit/s; 0: unpaced).
    pub pacing_rate_bps: u64,
    /// Why the span paces at that rate: `fixed` (no adaptive pacing), `starting`, `probing`,
    /// `receiver_limited` (the peer drops what it cannot drain — typically its socket buffer
    /// — and the rate follows what its reports confirm), `burst_loss`, `sender_limited`,
    /// `at_ceiling` (docs/throughput.md).
    pub pacing_state: String,
    /// Segments sent.
    pub segments_sent: u64,
    /// Segments received.
    pub segments_received: u64,
    /// Data segments sent, retransmissions included.
    pub data_segments_sent: u64,
    /// Payload bytes of those.
    pub data_bytes_sent: u64,
    /// Data segments sent again.
    pub data_segments_retransmitted: u64,
    /// Report segments sent.
    pub reports_sent: u64,
    /// Report segments received.
    pub reports_received: u64,
    /// Retransmission cycles (reports with gaps).
    pub retransmission_cycles: u64,
    /// Checkpoint timer expirations.
    pub checkpoint_timeouts: u64,
    /// Report timer expirations.
    pub report_timeouts: u64,
    /// Cancel timer expirations.
    pub cancel_timeouts: u64,
    /// Export sessions completed.
    pub exports_completed: u64,
    /// Bytes of those blocks (sending goodput).
    pub export_bytes_completed: u64,
    /// Export sessions cancelled.
    pub exports_cancelled: u64,
    /// Red blocks delivered to BP.
    pub blocks_received: u64,
    /// Bytes of those blocks (receiving goodput).
    pub block_bytes_received: u64,
    /// Import sessions cancelled.
    pub imports_cancelled: u64,
    /// Segments that would have opened an import session beyond the limits.
    pub imports_refused: u64,
    /// Segments of closed or unknown sessions, dropped.
    pub stale_segments: u64,
    /// Sessions this engine cancelled, by RFC 5326 reason (`USR_CNCLD`, `UNREACH`, `RLEXC`,
    /// `MISCOLORED`, `SYS_CNCLD`, `RXMTCYCEXC`).
    pub cancelled_here: BTreeMap<String, u64>,
    /// Sessions the peer cancelled, by reason.
    pub cancelled_by_peer: BTreeMap<String, u64>,
    /// Tolerated deviations in the span's sessions, by kind.
    pub deviations: BTreeMap<String, u64>,
    /// Segments refused by the span's LTP authentication, by reason (`missing`,
    /// `wrong_suite`, `wrong_key_id`, `malformed`, `bad_value`); all zero on a span without keys.
    pub auth_rejected: BTreeMap<String, u64>,
    /// Adaptive pacing: rate decreases.
    pub rate_decreases: u64,
    /// Adaptive pacing: rate increases.
    pub rate_increases: u64,
    /// Receiver-pause learning (`learn_receiver_pause`): holds of the span's pacing after a
    /// block's first transmission, for a receiver that stops reading after each block.
    pub receiver_pause_holds: u64,
    /// Receiver-pause learning: the holds' total length in ms.
    pub receiver_pause_held_ms: u64,
}

/// `ltp.fec.<peer>`: the FEC layer of one span (the `fec` crate's counters, cumulative).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FecSpanStatus {
    /// LTP segments taken from the engine into matrices.
    pub segments_in: u64,
    /// Matrices closed, encoded and queued.
    pub matrices_sent: u64,
    /// Information symbols sent (the LTP segments themselves).
    pub info_symbols_sent: u64,
    /// Repair symbols sent.
    pub repair_symbols_sent: u64,
    /// Bytes of FEC datagrams sent (headers included).
    pub bytes_sent: u64,
    /// Matrices whose last symbol left.
    pub matrices_transmitted: u64,
    /// Sum of their transmission times (ns).
    pub matrix_tx_ns_total: u64,
    /// The longest of those transmission times (ns).
    pub matrix_tx_ns_max: u64,
    /// Segments refused because the sender's queue was full, or too long for a row.
    pub input_dropped: u64,
    /// Symbols received and placed in a matrix.
    pub symbols_received: u64,
    /// Of those, repair symbols.
    pub repair_symbols_received: u64,
    /// Matrices whose information symbols all arrived.
    pub matrices_complete: u64,
    /// Matrices restored by decoding.
    pub matrices_decoded: u64,
    /// Matrices given up with too few symbols.
    pub matrices_failed: u64,
    /// LTP segments restored by decoding.
    pub segments_repaired: u64,
    /// Information symbols of failed matrices that never arrived.
    pub segments_lost: u64,
    /// Segments handed up to LTP (received or restored).
    pub segments_out: u64,
    /// HSLTP: import sessions cancelled because their matrix failed.
    pub sessions_cancelled: u64,
    /// Symbols of matrices already decided, dropped.
    pub late_symbols: u64,
    /// Symbols contradicting earlier symbols of their matrix, dropped.
    pub inconsistent_symbols: u64,
    /// Matrices given up to bound the receive buffer.
    pub matrices_evicted: u64,
    /// Restored rows with an invalid length prefix.
    pub bad_rows: u64,
    /// Redundancy feedback: failure signals from the receiver that raised the redundancy of
    /// the following matrices.
    pub feedback_raises: u64,
    /// Redundancy feedback: repair symbols added beyond the rate and `min_repair`.
    pub feedback_repair_symbols: u64,
}

/// `tcpcl`: TCPCL v4 and v3, all sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TcpclStatus {
    /// Sessions established.
    pub sessions_established: u64,
    /// Of those, over TLS.
    pub sessions_tls: u64,
    /// Of those, in TCPCLv3 (RFC 7242).
    pub sessions_v3: u64,
    /// Sessions open now.
    pub sessions_open: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Outgoing transfers started.
    pub transfers_sent: u64,
    /// Outgoing transfers acknowledged.
    pub transfers_acked: u64,
    /// Outgoing transfers the peer refused.
    pub transfers_refused: u64,
    /// Outgoing transfers that failed.
    pub transfers_failed: u64,
    /// Bundles received.
    pub bundles_received: u64,
    /// Incoming transfers this node refused.
    pub transfers_refused_by_us: u64,
    /// Octets sent.
    pub bytes_sent: u64,
    /// Octets received.
    pub bytes_received: u64,
    /// Bundles fragmented to fit a peer's transfer MRU.
    pub bundles_fragmented: u64,
    /// Received bundles (16 MiB and more) that a session thread wrote into the store's staging
    /// files, so that the agent adopted the file instead of writing the bytes.
    pub bundles_staged: u64,
    /// Tolerated peer deviations from RFC 9174 / 7242: sessions in which each kind occurred.
    pub deviations: BTreeMap<String, u64>,
    /// Every occurrence of a tolerated deviation (all kinds).
    pub deviation_events: u64,
    /// Sessions refused or ended by the node's limits, by reason (`max_sessions`,
    /// `per_address`, `per_peer`, `node_id_not_in_certificate`, `idle_timeout`).
    pub sessions_refused: BTreeMap<String, u64>,
    /// Each neighbour's sessions, by node.
    pub peers: BTreeMap<u64, TcpclPeerStatus>,
}

/// `tcpcl.peers.<node>`: one TCPCL neighbour, summed over its sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TcpclPeerStatus {
    /// Sessions open now.
    pub sessions_open: u64,
    /// Sessions established.
    pub sessions_established: u64,
    /// Octets sent.
    pub bytes_sent: u64,
    /// Octets received.
    pub bytes_received: u64,
    /// XFER_SEGMENTs sent.
    pub segments_sent: u64,
    /// XFER_SEGMENTs received.
    pub segments_received: u64,
    /// Outgoing transfers acknowledged.
    pub transfers_acked: u64,
    /// Outgoing transfers the peer refused.
    pub transfers_refused_by_peer: u64,
    /// Outgoing transfers that failed.
    pub transfers_failed: u64,
    /// Bundles received.
    pub bundles_received: u64,
    /// Incoming transfers this node refused.
    pub transfers_refused: u64,
    /// KEEPALIVEs sent.
    pub keepalives_sent: u64,
    /// KEEPALIVEs received.
    pub keepalives_received: u64,
}

/// `udpcl`: UDPCL, all peers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UdpclStatus {
    /// Datagrams sent.
    pub datagrams_sent: u64,
    /// Datagrams received (all sources).
    pub datagrams_received: u64,
    /// Bundles fragmented to fit a datagram.
    pub bundles_fragmented: u64,
    /// Bundles too large for a datagram that may not be fragmented.
    pub oversize_refused: u64,
    /// Sends that failed.
    pub send_errors: u64,
    /// Datagrams larger than the limit, dropped.
    pub truncated_datagrams: u64,
    /// Each configured neighbour, by node.
    pub peers: BTreeMap<u64, UdpclPeerStatus>,
}

/// `stcp`: the simple TCP convergence layer, all connections. STCP has no acknowledgment:
/// "sent" counts bundles whose last octet the kernel accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StcpStatus {
    /// Connections open now that we accepted (receiving).
    pub connections_in: u64,
    /// Connections open now that we opened (sending), one per connected `[[stcp_peer]]`.
    pub connections_out: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Connections refused because `max_connections` were open.
    pub connections_refused: u64,
    /// Bundles written completely.
    pub bundles_sent: u64,
    /// Octets of those bundles.
    pub bytes_sent: u64,
    /// Bundles received completely.
    pub bundles_received: u64,
    /// Octets of those bundles.
    pub bytes_received: u64,
    /// Bundles received that the store did not take (lost: the sender cannot know).
    pub bundles_not_stored: u64,
    /// Keepalives (zero lengths) written.
    pub keepalives_sent: u64,
    /// Keepalives received.
    pub keepalives_received: u64,
    /// Frames refused (declared length above `max_bundle_size`): each closed its connection.
    pub frames_refused: u64,
    /// Bundles that could not be framed (4 GiB or more).
    pub oversize_unsendable: u64,
    /// Bundles handed to a connection that was lost before they were written completely
    /// (forwarded again).
    pub bundles_failed: u64,
}

/// `bibe`: bundle-in-bundle encapsulation with custody transfer, both ends of every tunnel
/// (`docs/bibe.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BibeStatus {
    /// Bundles encapsulated (first transmissions).
    pub encapsulated: u64,
    /// BPDUs received and decapsulated.
    pub decapsulated: u64,
    /// Custody accepted here (the decapsulated bundle was stored).
    pub custody_accepted: u64,
    /// Custody refused here, by reason (`redundant`, `depleted_storage`, ...).
    pub custody_refused: BTreeMap<String, u64>,
    /// Bundles released here on a custody signal (accepted or redundant).
    pub custody_released: u64,
    /// Bundles whose custody the next node refused (other than redundant), by reason.
    pub custody_refused_by_peer: BTreeMap<String, u64>,
    /// Custody timers that expired.
    pub timer_expirations: u64,
    /// BPDUs retransmitted after a custody timer.
    pub retransmissions: u64,
    /// Bundles whose lifetime ended while custody was pending.
    pub expired_in_custody: u64,
    /// Custody signals sent.
    pub signals_sent: u64,
    /// Custody signals received.
    pub signals_received: u64,
    /// Transmission IDs in received signals that named nothing pending here.
    pub signal_ids_unknown: u64,
    /// BIBE records received that did not decode (dropped).
    pub malformed: u64,
    /// BIBE records received in ION's record type codes (7 and 8): accepted, and answered in them.
    pub ion_record_codes: u64,
    /// BPDUs and signals this node's store refused (recovered by the custody timers).
    pub outbound_not_stored: u64,
    /// Bundles waiting for a custody signal now.
    pub custody_pending: u64,
    /// Their bytes.
    pub custody_pending_bytes: u64,
    /// Bundles waiting for a custody signal, by tunnel (virtual neighbour).
    pub pending_per_tunnel: BTreeMap<u64, u64>,
}

/// `udpcl.peers.<node>`: one configured UDPCL neighbour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UdpclPeerStatus {
    /// Bundles sent.
    pub bundles_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Sends that failed.
    pub send_errors: u64,
    /// Datagrams received.
    pub datagrams_received: u64,
    /// Bytes received.
    pub bytes_received: u64,
}

/// `bpsec`: outcomes of the BPSec policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpsecStatus {
    /// Rules of the policy.
    pub rules: u64,
    /// Bundles created here that the policy secured.
    pub secured: u64,
    /// Bundles for this node whose BPSec blocks verified or decrypted.
    pub accepted: u64,
    /// Bundles for this node dropped for failing the policy.
    pub failed: u64,
    /// Why the last of those failed (`null`: none failed).
    pub last_failure: Option<String>,
}

/// `contacts`: each neighbour's link and this node's planned contacts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContactsStatus {
    /// Configured neighbours and neighbours with a link up, by node.
    pub neighbours: BTreeMap<u64, NeighbourStatus>,
    /// The contact plan's current and next contacts of this node (`null`: no plan).
    pub plan: Option<PlanStatus>,
}

/// `contacts.neighbours.<node>`: one neighbour's link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NeighbourStatus {
    /// Its convergence layer (`null`: a link without a configured layer).
    pub cla: Option<Cla>,
    /// True while the link is up (contact plan, configuration or TCPCL session).
    pub link_up: bool,
    /// The link's rate while up (bit/s; 0: not given).
    pub rate_bps: u64,
}

/// A convergence layer, as named in `contacts.neighbours.<node>.cla`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cla {
    /// LTP over UDP (`[[span]]`).
    Ltp,
    /// TCPCL (`[[tcp_peer]]`).
    Tcpcl,
    /// UDPCL (`[[udp_peer]]`).
    Udpcl,
    /// STCP (`[[stcp_peer]]`).
    Stcp,
    /// A BIBE tunnel (`[[bibe_peer]]`): bundles encapsulated in bundles.
    Bibe,
}

impl Cla {
    /// The name in the reply: `ltp`, `tcpcl`, `udpcl`, `stcp` or `bibe`.
    pub fn name(self) -> &'static str {
        match self {
            Cla::Ltp => "ltp",
            Cla::Tcpcl => "tcpcl",
            Cla::Udpcl => "udpcl",
            Cla::Stcp => "stcp",
            Cla::Bibe => "bibe",
        }
    }
}

/// `contacts.plan`: this node's contacts that have not ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanStatus {
    /// Current contacts first, then the next to start (at most 32).
    pub contacts: Vec<PlanContact>,
    /// All of this node's contacts that have not ended.
    pub remaining: u64,
}

/// `contacts.plan.contacts[]`: one planned contact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanContact {
    /// Transmitting node.
    pub from: u64,
    /// Receiving node.
    pub to: u64,
    /// Seconds until it starts (negative: already started).
    pub start_in_s: f64,
    /// Seconds until it ends.
    pub end_in_s: f64,
    /// Its rate (bit/s).
    pub rate_bps: u64,
    /// True while it is active.
    pub active: bool,
}

/// `process`: the node process's resource use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessStatus {
    /// User plus system CPU time (s).
    pub cpu_seconds: f64,
    /// Resident set size (bytes).
    pub rss_bytes: u64,
    /// Threads.
    pub threads: u64,
    /// Seconds since the process started.
    pub uptime_seconds: f64,
}

#[cfg(test)]
mod tests;
