//! The node configuration file (TOML) and its validation.
//!
//! Every error names the file, the field (and line when the TOML parser knows it) and what was
//! expected, on one line, so `dtnkit node` can print it and exit with code 2.
//!
//! This module holds the file's layout and the validation of the node, store, LTP and span
//! settings; its parts hold the rest:
//!
//! - [`cla`]: `[tcpcl]`, `[[tcp_peer]]`, `[udpcl]`, `[[udp_peer]]` and the rule that binds each
//!   neighbour to one convergence layer;
//! - [`stcp`]: `[stcp]` and `[[stcp_peer]]` (ION's and HDTN's simple TCP);
//! - [`bibe`]: `[bibe]` and `[[bibe_peer]]` (bundle-in-bundle encapsulation, custody transfer);
//! - [`bpsec`]: `[bpsec]` keys and policy rules;
//! - [`peer_kind`]: the peer profiles (`peer_kind`) and the defaults that follow from them;
//! - [`ion_import`]: `dtnkit import-ion`, an ION node's `.rc` files translated into this file;
//! - `error`: [`ConfigError`], the one error type of every part.
//!
//! Two sections live beside what they configure: `[metrics]` in `crate::metrics` and
//! `[tcpcl.tls]` in `crate::tcpcl_tls`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub mod bibe;
pub mod bpsec;
pub mod cla;
pub(crate) mod error;
pub mod ion_import;
mod ltp_auth;
pub mod peer_kind;
pub mod stcp;

pub use bpsec::{BpsecRuleSection, BpsecSection};
pub use cla::{
    TcpPeer, TcpPeerSection, Tcpcl, TcpclSection, UdpPeer, UdpPeerSection, Udpcl, UdpclSection,
};
pub use error::ConfigError;
pub use peer_kind::PeerKind;

pub use crate::metrics::{MetricsSection, MetricsSettings};
use error::err;

/// `dtnkit node` configuration. Relative paths are relative to the configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// This node's ipn node number (node id `ipn:N.0`), also its default LTP engine id.
    pub node: u64,
    /// UDP address the LTP engine binds to (`127.0.0.1:1113`).
    pub bind: String,
    /// Contact plan file (ION lines, or the TOML form when it ends in `.toml`). Without one,
    /// every span's link is up all the time at the span's rate.
    #[serde(default)]
    pub contact_plan: Option<PathBuf>,
    /// The bundle store.
    pub store: StoreSection,
    /// Application socket.
    #[serde(default)]
    pub app: AppSection,
    /// LTP engine settings.
    #[serde(default)]
    pub ltp: LtpSection,
    /// Bundle protocol agent settings.
    #[serde(default)]
    pub bp: BpSection,
    /// Logs.
    #[serde(default)]
    pub log: LogSection,
    /// LTP spans, one per neighbour.
    #[serde(default)]
    pub span: Vec<SpanSection>,
    /// Static routes (`dest` node range reached via neighbour `via`).
    #[serde(default)]
    pub route: Vec<RouteSection>,
    /// TCPCLv4 convergence layer.
    #[serde(default)]
    pub tcpcl: Option<TcpclSection>,
    /// TCPCL neighbours.
    #[serde(default)]
    pub tcp_peer: Vec<TcpPeerSection>,
    /// UDP convergence layer.
    #[serde(default)]
    pub udpcl: Option<UdpclSection>,
    /// UDPCL neighbours.
    #[serde(default)]
    pub udp_peer: Vec<UdpPeerSection>,
    /// STCP convergence layer (ION's and HDTN's simple TCP).
    #[serde(default)]
    pub stcp: Option<stcp::StcpSection>,
    /// STCP neighbours.
    #[serde(default)]
    pub stcp_peer: Vec<stcp::StcpPeerSection>,
    /// BIBE settings (`docs/bibe.md`).
    #[serde(default)]
    pub bibe: Option<bibe::BibeSection>,
    /// BIBE tunnels (virtual neighbours).
    #[serde(default)]
    pub bibe_peer: Vec<bibe::BibePeerSection>,
    /// Bundle Protocol Security keys and policy (`docs/bpsec.md`).
    #[serde(default)]
    pub bpsec: Option<BpsecSection>,
    /// Prometheus metrics and the live web view (`docs/operations.md`).
    #[serde(default)]
    pub metrics: Option<MetricsSection>,
}

/// `[store]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// Directory of the persistent store (created if missing).
    pub path: PathBuf,
    /// Quota in bytes of encoded bundles (default 1 GiB).
    #[serde(default = "default_quota")]
    pub quota_bytes: u64,
    /// Commit with fsync (default true). Off trades crash safety against power loss for speed;
    /// a process crash (SIGKILL) is still safe.
    #[serde(default = "yes")]
    pub durable: bool,
    /// Page cache of the store database in MiB (default 32). Bounds the node's memory: redb's
    /// own default (1 GiB) would be filled by a large transfer.
    #[serde(default = "default_store_cache_mb")]
    pub cache_mb: u64,
    /// Hot cache in MiB (default 32, 0 = off): bytes of recently stored bundles kept in memory
    /// so that forwarding or delivering them soon after does not read them back from disk.
    #[serde(default = "default_hot_cache_mb")]
    pub hot_cache_mb: u64,
    /// Longest time (ms) an application's send waits while the hot cache has no room for it
    /// and drains (default 20, 0 = never wait): a bulk sender on a fast link then has its
    /// bundles kept in memory until forwarded instead of read back from disk (docs/node.md,
    /// "The send gate").
    #[serde(default = "default_hot_cache_hold_ms")]
    pub hot_cache_hold_ms: u64,
    /// Longest time (ms) applications' sends wait to be committed together while the links
    /// are busy (default 10, 0 = commit every send at once; docs/node.md, "Group commit").
    #[serde(default = "default_commit_group_ms")]
    pub commit_group_ms: u64,
}

/// Largest `[store] commit_group_ms` accepted (1 s).
const MAX_COMMIT_GROUP_MS: u64 = 1_000;

fn default_commit_group_ms() -> u64 {
    10
}

/// Largest `[store] hot_cache_hold_ms` accepted (10 s).
const MAX_HOT_CACHE_HOLD_MS: u64 = 10_000;

fn default_hot_cache_hold_ms() -> u64 {
    20
}

/// Largest `[store] cache_mb` / `hot_cache_mb` accepted (64 GiB).
const MAX_STORE_CACHE_MB: u64 = 65_536;

fn default_store_cache_mb() -> u64 {
    32
}
fn default_hot_cache_mb() -> u64 {
    32
}

/// `[app]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSection {
    /// Unix socket path of the application interface (default `<store.path>/app.sock`).
    #[serde(default)]
    pub socket: Option<PathBuf>,
}

/// `[ltp]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LtpSection {
    /// LTP engine id (default: the node number).
    #[serde(default)]
    pub engine_id: Option<u64>,
    /// Session number width in bits (32 matches ION and HDTN).
    #[serde(default = "default_session_bits")]
    pub session_number_bits: u32,
    /// Datagrams per `recvmmsg`/`sendmmsg` call.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// UDP socket buffer size requested (bytes; [`default_sockbuf`]).
    #[serde(default = "default_sockbuf")]
    pub socket_buffer_bytes: usize,
    /// Send runs of equal-size LTP segments as one UDP GSO (`UDP_SEGMENT`) call (default on;
    /// a kernel that refuses it makes the thread fall back to `sendmmsg` by itself).
    #[serde(default = "default_true")]
    pub gso: bool,
    /// Pin the LTP thread to this CPU.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// Pin the agent thread to this CPU.
    #[serde(default)]
    pub agent_cpu: Option<usize>,
    /// Import budget in bytes: red data held by all LTP import sessions for reassembly plus
    /// delivered blocks whose bundles the store has not committed yet (default
    /// [`DEFAULT_MAX_IMPORT_BYTES`]). While it is full, new import sessions are refused (the
    /// sender's checkpoint timer retries them); a session that would overrun it is cancelled.
    #[serde(default)]
    pub max_import_bytes: Option<u64>,
    /// Forwarding window in bytes: bundles handed by the agent to the convergence-layer
    /// threads (LTP, TCPCL, UDPCL) and not yet reported delivered or failed. Bounds the
    /// memory of blocks in export sessions and queues (default: the sum over spans of
    /// `max_sessions × aggregation_bytes`, clamped to [`MIN_WINDOW_BYTES`]..=
    /// [`MAX_DEFAULT_WINDOW_BYTES`]).
    #[serde(default)]
    pub window_bytes: Option<u64>,
    /// Which source addresses may speak for a span's engine: `"peer_ip"` (default: the
    /// configured IP address, any port), `"peer_address"` (address and port) or `"any"`
    /// (the engine id alone decides). See `docs/node.md`, "Hardening".
    #[serde(default)]
    pub accept_from: crate::ltp_source::AcceptFrom,
}

/// Default `[ltp] max_import_bytes`: 128 MiB, twice the largest default forwarding window
/// of a peer, so default nodes never refuse each other's sessions.
pub const DEFAULT_MAX_IMPORT_BYTES: u64 = 128 << 20;
/// Smallest derived `[ltp] window_bytes` (also what a node without spans uses).
pub const MIN_WINDOW_BYTES: u64 = 32 << 20;
/// Largest derived `[ltp] window_bytes`. Measured on loopback with 5 MB bundles over 5 GB
/// (durable stores): a 512 MiB window gave 782 Mbit/s and peak RSS 618 / 381 MB (sender /
/// receiver), 128 MiB 908 Mbit/s and 399 / 274 MB, 64 MiB 878 Mbit/s and 294 / 194 MB,
/// 32 MiB 928 Mbit/s and 256 / 151 MB: more in flight bought nothing but memory. Set
/// `window_bytes` explicitly for links whose bandwidth × round trip needs more.
pub const MAX_DEFAULT_WINDOW_BYTES: u64 = 64 << 20;

impl Default for LtpSection {
    fn default() -> Self {
        Self {
            engine_id: None,
            session_number_bits: default_session_bits(),
            batch: default_batch(),
            socket_buffer_bytes: default_sockbuf(),
            gso: true,
            cpu: None,
            agent_cpu: None,
            max_import_bytes: None,
            window_bytes: None,
            accept_from: crate::ltp_source::AcceptFrom::default(),
        }
    }
}

/// `[bp]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BpSection {
    /// Largest bundle accepted or created (bytes).
    #[serde(default = "default_max_bundle")]
    pub max_bundle_size: u64,
    /// Lifetime of bundles whose sender gives none (ms).
    #[serde(default = "default_lifetime")]
    pub default_lifetime_ms: u64,
    /// Echo service number (`ipn:N.<echo>`); 0 disables it.
    #[serde(default = "default_echo")]
    pub echo_service: u64,
    /// Generate requested status reports.
    #[serde(default = "yes")]
    pub status_reports: bool,
    /// Delivery backlog limit in bytes: while the bundles stored for registered endpoints and
    /// not yet acknowledged by their applications exceed it, the node takes no bundles from
    /// its peers (TCPCL sessions stop reading, LTP refuses new import sessions) until they are
    /// down to half of it. Default: a quarter of `[store] quota_bytes`; 0 = never pause.
    #[serde(default)]
    pub delivery_backlog_bytes: Option<u64>,
    /// First back-off (ms) towards a neighbour that refused a bundle for lack of resources
    /// (its store full or failed); doubled per refusal up to `refusal_backoff_max_ms`, reset
    /// when it takes a bundle. Default 500.
    #[serde(default = "default_backoff_first")]
    pub refusal_backoff_first_ms: u64,
    /// Longest back-off (ms) towards a refusing neighbour. Default 30000.
    #[serde(default = "default_backoff_max")]
    pub refusal_backoff_max_ms: u64,
    /// Largest bundle an application's streamed send (`SendBegin`) is cut into: a longer
    /// ADU becomes RFC 9171 fragments of at most this many encoded bytes, each an ordinary
    /// bundle downstream. Default 16 MiB (at most `max_bundle_size`).
    #[serde(default)]
    pub max_fragment_bytes: Option<u64>,
    /// Commit a fragmented streamed ADU's bundles a staging file (16 MiB) at a time while the
    /// rest streams in, so they are forwarded before the application has sent it all
    /// (cut-through). A stream that fails then deletes those not forwarded yet, but those
    /// forwarded are not recalled; `false` keeps every stream all or nothing. Default true.
    #[serde(default = "yes")]
    pub stream_cut_through: bool,
}

/// Smallest `[bp] max_fragment_bytes` (a fragment's blocks take a few hundred bytes).
pub const MIN_FRAGMENT_BYTES: u64 = 4096;
/// Default `[bp] max_fragment_bytes`.
pub const DEFAULT_FRAGMENT_BYTES: u64 = 16 << 20;

fn default_backoff_first() -> u64 {
    500
}
fn default_backoff_max() -> u64 {
    30_000
}

impl Default for BpSection {
    fn default() -> Self {
        Self {
            max_bundle_size: default_max_bundle(),
            default_lifetime_ms: default_lifetime(),
            echo_service: default_echo(),
            status_reports: true,
            delivery_backlog_bytes: None,
            refusal_backoff_first_ms: default_backoff_first(),
            refusal_backoff_max_ms: default_backoff_max(),
            max_fragment_bytes: None,
            stream_cut_through: true,
        }
    }
}

/// `[log]`: CSV logs, off unless a path is given.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    /// LTP segment log (`docs/ltp-segment-log.md`).
    #[serde(default)]
    pub ltp_segments: Option<PathBuf>,
    /// Bundle event log (`docs/bundle-event-log.md`).
    #[serde(default)]
    pub bundles: Option<PathBuf>,
    /// Route decision log (`docs/route-log.md`).
    #[serde(default)]
    pub routes: Option<PathBuf>,
}

/// `[[span]]`: one LTP neighbour.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpanSection {
    /// The neighbour's node number.
    pub peer: u64,
    /// Its LTP UDP address.
    pub address: String,
    /// Its LTP engine id (default: `peer`).
    #[serde(default)]
    pub engine_id: Option<u64>,
    /// The implementation it runs: selects the defaults of `aggregation_bytes`,
    /// `aggregation_ms`, `max_bundles_per_block` and `max_burst_bytes` (`peer_kind`).
    #[serde(default)]
    pub peer_kind: PeerKind,
    /// Maximum LTP segment size in bytes.
    #[serde(default = "default_mss")]
    pub max_segment_size: usize,
    /// Concurrent export sessions (ION's "max export sessions").
    #[serde(default = "default_sessions")]
    pub max_sessions: usize,
    /// Aggregation size limit: a block starts once this many bytes of bundles wait
    /// (default: the peer kind's, 64 KiB).
    #[serde(default)]
    pub aggregation_bytes: Option<usize>,
    /// Aggregation time limit in ms (fractions allowed; default: the peer kind's, 1 ms).
    #[serde(default)]
    pub aggregation_ms: Option<f64>,
    /// Most bundles in one LTP block (0 = no limit; default: the peer kind's, 1 for `hdtn`
    /// and `generic`).
    #[serde(default)]
    pub max_bundles_per_block: Option<usize>,
    /// Explicit retransmission timeout in ms (default: 2 × OWLT + 100 ms).
    #[serde(default)]
    pub rto_ms: Option<f64>,
    /// Timer back-off (`ltp::SpanConfig::rto_backoff`): each retransmission of the same
    /// checkpoint or report waits twice as long beyond the round trip as the previous one.
    /// Default: on when `rto_ms` is not set (the derived RTO's 100 ms margin is a guess at the
    /// peer's processing time, which a busy peer exceeds), off when it is.
    #[serde(default)]
    pub rto_backoff: Option<bool>,
    /// Transmission rate in bit/s when no contact plan sets it (0 = unlimited).
    #[serde(default)]
    pub rate_bps: u64,
    /// Adaptive pacing (`ltp::SpanConfig::adaptive_rate`): pace at a rate learnt from the
    /// peer's reports, never above `rate_bps` or the contact's rate when set. Default: on
    /// when the span has no rate at all (`rate_bps = 0` and no contact plan governs it), off
    /// otherwise, so configured rates stay exact.
    #[serde(default)]
    pub adaptive_rate: Option<bool>,
    /// One-way light time in ms when no contact plan sets it.
    #[serde(default)]
    pub owlt_ms: f64,
    /// Pacing burst (token bucket depth) in bytes (0 = the engine default). The depth in
    /// effect is the larger of this and `burst_ms` at the current rate.
    #[serde(default)]
    pub burst_bytes: u64,
    /// Pacing burst as milliseconds at the current rate (default: the engine's,
    /// `ltp::DEFAULT_PACING_BURST_TIME`, 4 ms; the simulator uses the same default).
    #[serde(default)]
    pub burst_ms: Option<f64>,
    /// Largest pacing burst in bytes whatever the rate (0 = no cap; default: the peer
    /// kind's, 64 KiB for receivers with the kernel's default UDP buffer).
    #[serde(default)]
    pub max_burst_bytes: Option<u64>,
    /// Concurrent import sessions from this neighbour (default 64); data opening one more is
    /// dropped and retried by the sender's checkpoint timer.
    #[serde(default = "default_import_sessions")]
    pub max_import_sessions: usize,
    /// Largest red block accepted from this neighbour in bytes (default: `[bp]
    /// max_bundle_size` + `aggregation_bytes`, the largest block a peer aggregating like us
    /// can send); a segment beyond it cancels the session.
    #[serde(default)]
    pub max_block_bytes: Option<u64>,
    /// Largest red block the neighbour accepts from us (default: this span's
    /// `max_block_bytes`, i.e. a neighbour configured like this node). A stored bundle that
    /// would not fit in such a block (beside `aggregation_bytes` of others, unless the span
    /// sends one bundle per block) is fragmented by the agent before it is handed to the span.
    #[serde(default)]
    pub peer_max_block_bytes: Option<u64>,
    /// Copies of every LTP signal segment (reports, acks, cancels) sent back to back: "LTP
    /// enhanced" signal replication (default 1, standard LTP).
    #[serde(default)]
    pub signal_replication: Option<u32>,
    /// Intermediate checkpoints (`ltp::SpanConfig::checkpoint_interval_bytes`): a red segment
    /// of a block's first transmission becomes a checkpoint every this many bytes, so a long
    /// block draws reports while it is sent (0 = only its last red segment; default: the peer
    /// kind's, 1 MiB towards dtnkit, 0 towards ION, HDTN and generic peers and on spans with
    /// `[span.fec]`; otherwise at least 65 536).
    #[serde(default)]
    pub checkpoint_bytes: Option<u64>,
    /// Receiver-pause learning (`ltp::SpanConfig::learn_receiver_pause`, adaptive pacing
    /// only): hold the span's data after each block's completion for the time the receiver
    /// was seen to stop reading after one (default: the peer kind's, on towards ION, off
    /// otherwise).
    #[serde(default)]
    pub learn_receiver_pause: Option<bool>,
    /// Sending time an adaptive-pacing round must cover before the rate changes
    /// (`ltp::AdaptiveRate::min_round_time`, milliseconds; default: the peer kind's, 20
    /// towards HDTN, 4 otherwise).
    #[serde(default)]
    pub adaptive_round_ms: Option<f64>,
    /// Packet-layer FEC below LTP on this span (`[span.fec]`, docs/fec.md); the neighbour must
    /// have it on its span too. The FEC layer paces at `rate_bps` (or the contact's rate) and
    /// adaptive pacing is off.
    #[serde(default)]
    pub fec: Option<fec::FecSection>,
    /// LTP authentication (RFC 5327) on this span: `"hmac-sha1-80"` or `"rsa-sha256"`
    /// (absent: none). With it, everything sent carries the authentication extensions and
    /// only segments that verify are accepted (`config::ltp_auth`, docs/node.md).
    #[serde(default)]
    pub auth_suite: Option<String>,
    /// HMAC-SHA1-80: the shared key file (hex digits), relative to this file.
    #[serde(default)]
    pub auth_key_file: Option<PathBuf>,
    /// RSA-SHA256: this node's private key (PEM), which signs what it sends.
    #[serde(default)]
    pub auth_private_key_file: Option<PathBuf>,
    /// RSA-SHA256: the neighbour's public key (PEM), which verifies what it sends.
    #[serde(default)]
    pub auth_peer_public_key_file: Option<PathBuf>,
    /// Key id sent in, and required of, the authentication extension (absent: none, as ION).
    #[serde(default)]
    pub auth_key_id: Option<String>,
}

/// `[[route]]`: static route.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSection {
    /// First destination node of the range.
    pub dest: u64,
    /// Last destination node of the range (default: `dest`).
    #[serde(default)]
    pub dest_last: Option<u64>,
    /// Neighbour to forward to.
    pub via: u64,
}

fn default_quota() -> u64 {
    1 << 30
}
fn yes() -> bool {
    true
}
fn default_session_bits() -> u32 {
    32
}
fn default_true() -> bool {
    true
}

fn default_batch() -> usize {
    64
}
/// Default `[ltp] socket_buffer_bytes`: 64 MiB. The receive buffer must hold what arrives while
/// the LTP thread is away from its socket (descheduled on a busy machine, or handling a burst
/// of work); a datagram that does not fit is lost and costs the sender a retransmission, or a
/// whole checkpoint timer when it was a block's tail. Measured on loopback with 50 MB bundles
/// (2 GB, 8192-byte segments, 2 cores): 8 MiB lost 10–12 % of the data segments at the
/// receiving socket (3.2–3.7 Gb/s), 32 MiB 1 %, 64 MiB none (4.4–4.7 Gb/s); with 500 kB
/// bundles 8 MiB lost 1–4 %, 64 MiB none. The kernel takes the memory only while datagrams
/// wait in it.
fn default_sockbuf() -> usize {
    64 << 20
}
fn default_max_bundle() -> u64 {
    64 << 20
}
fn default_lifetime() -> u64 {
    3_600_000
}
fn default_echo() -> u64 {
    7
}
fn default_mss() -> usize {
    1024
}
fn default_sessions() -> usize {
    16
}
fn default_import_sessions() -> usize {
    64
}

/// A span after validation, with typed values.
#[derive(Debug, Clone)]
pub struct Span {
    /// Neighbour node number.
    pub peer: u64,
    /// Its LTP engine id.
    pub engine_id: u64,
    /// Its UDP address.
    pub address: SocketAddr,
    /// Raw settings.
    pub cfg: SpanSection,
    /// RTO, if explicit.
    pub rto: Option<Duration>,
    /// OWLT.
    pub owlt: Duration,
    /// Aggregation time limit.
    pub aggregation_time: Duration,
    /// Pacing depth as time (`burst_ms`), if set.
    pub burst_time: Option<Duration>,
    /// Largest red block accepted (`max_block_bytes` or its default).
    pub max_block_bytes: u64,
    /// Largest bundle handed to this span whole (derived from `peer_max_block_bytes`); larger
    /// ones are fragmented by the agent first. `None`: no limit below `[bp] max_bundle_size`.
    pub max_send_bundle: Option<u64>,
    /// Aggregation size limit in effect (`aggregation_bytes` or the peer kind's).
    pub aggregation_bytes: usize,
    /// Most bundles per block in effect (0 = no limit).
    pub max_bundles_per_block: usize,
    /// Pacing burst cap in effect (0 = none).
    pub max_burst_bytes: u64,
    /// Intermediate checkpoint interval in effect (0 = one checkpoint per block).
    pub checkpoint_bytes: u64,
    /// Receiver-pause learning in effect.
    pub learn_receiver_pause: bool,
    /// Start rate of adaptive pacing (the peer kind's).
    pub adaptive_start_bps: u64,
    /// Shortest sending time of an adaptive-pacing round (`adaptive_round_ms`).
    pub adaptive_round: Duration,
    /// FEC settings (`[span.fec]`), paced at `rate_bps` until a contact sets another rate.
    pub fec: Option<fec::FecConfig>,
    /// LTP authentication keys (`auth_*`), loaded from their files.
    pub auth: Option<ltp::SpanAuth>,
}

impl Span {
    /// Whether the span paces adaptively: `adaptive_rate` when set, else exactly when it has
    /// no rate (`rate_bps = 0` and `planned` is false: no contact plan sets its rate).
    pub fn adaptive(&self, planned: bool) -> bool {
        if self.fec.is_some() {
            // The FEC layer paces at the configured rate (validation refuses adaptive_rate = true).
            return false;
        }
        self.cfg
            .adaptive_rate
            .unwrap_or(self.cfg.rate_bps == 0 && !planned)
    }

    /// Whether the span's checkpoint and report timers back off: `rto_backoff` when set, else
    /// exactly when the RTO is derived (no `rto_ms`).
    pub fn rto_backoff(&self) -> bool {
        self.cfg.rto_backoff.unwrap_or(self.rto.is_none())
    }

    /// The start-up warning for a span whose settings make its peer lose bundles: an HDTN
    /// neighbour given more than one bundle per block keeps only the first of each block.
    pub fn profile_warning(&self) -> Option<String> {
        (self.cfg.peer_kind.one_bundle_per_block() && self.max_bundles_per_block != 1).then(|| {
            format!(
                "span to node {}: peer_kind = \"{}\" takes one bundle per LTP block and \
                 silently drops the others, but max_bundles_per_block = {} (0 = no limit); \
                 remove the key or set it to 1",
                self.peer,
                self.cfg.peer_kind.name(),
                self.max_bundles_per_block
            )
        })
    }

    /// The start-up warning for a span that has neither a rate nor adaptive pacing, if it
    /// has neither. `planned_rates` are the rates (bit/s) of the contacts the plan has for it
    /// (empty when no plan governs it); a contact without a rate counts as none.
    pub fn pacing_warning(&self, planned_rates: &[u64]) -> Option<String> {
        let planned = !planned_rates.is_empty();
        if self.adaptive(planned) {
            return None;
        }
        let unpaced = if planned {
            planned_rates.contains(&0)
        } else {
            self.cfg.rate_bps == 0
        };
        unpaced.then(|| {
            format!(
                "span to node {} has no rate ({}) and adaptive_rate = false: LTP sends as fast \
                 as this host can and overruns a slower receiver (an ION node handles ~85 Mb/s \
                 of 1 KiB segments); set rate_bps or leave adaptive_rate on",
                self.peer,
                if planned {
                    "a contact of the plan has rate 0"
                } else {
                    "rate_bps = 0, no contact plan"
                }
            )
        })
    }
}

/// The validated configuration with resolved paths.
#[derive(Debug, Clone)]
pub struct Validated {
    /// Parsed file.
    pub raw: NodeConfig,
    /// Bind address.
    pub bind: SocketAddr,
    /// LTP engine id.
    pub engine_id: u64,
    /// Spans.
    pub spans: Vec<Span>,
    /// Store directory.
    pub store_path: PathBuf,
    /// Application socket path.
    pub socket_path: PathBuf,
    /// Contact plan file.
    pub contact_plan: Option<PathBuf>,
    /// LTP segment log path.
    pub segment_log: Option<PathBuf>,
    /// Bundle event log path.
    pub bundle_log: Option<PathBuf>,
    /// Route decision log path.
    pub route_log: Option<PathBuf>,
    /// TCPCL settings (`[tcpcl]`), if the node runs TCPCL.
    pub tcpcl: Option<Tcpcl>,
    /// TCPCL neighbours.
    pub tcp_peers: Vec<TcpPeer>,
    /// UDPCL settings (`[udpcl]`), if the node runs UDPCL.
    pub udpcl: Option<Udpcl>,
    /// UDPCL neighbours.
    pub udp_peers: Vec<UdpPeer>,
    /// STCP settings (`[stcp]`), if the node runs STCP.
    pub stcp: Option<stcp::Stcp>,
    /// STCP neighbours.
    pub stcp_peers: Vec<stcp::StcpPeer>,
    /// BIBE settings, when the node runs BIBE (`[bibe]` or a `[[bibe_peer]]`).
    pub bibe: Option<bibe::BibeSection>,
    /// BIBE tunnels.
    pub bibe_peers: Vec<bibe::BibePeer>,
    /// BPSec policy rules with their keys loaded (empty: no BPSec processing).
    pub bpsec_rules: Vec<::bpsec::Rule>,
    /// The monitoring listener (`[metrics]`), if configured.
    pub metrics: Option<MetricsSettings>,
}

impl Validated {
    /// The LTP import budget in effect (`[ltp] max_import_bytes` or its default).
    pub fn ltp_max_import_bytes(&self) -> u64 {
        self.raw
            .ltp
            .max_import_bytes
            .unwrap_or(DEFAULT_MAX_IMPORT_BYTES)
    }

    /// The delivery backlog limit in effect (`[bp] delivery_backlog_bytes`, default a
    /// quarter of the store quota; 0 = never pause ingress).
    pub fn delivery_backlog_bytes(&self) -> u64 {
        self.raw
            .bp
            .delivery_backlog_bytes
            .unwrap_or(self.raw.store.quota_bytes / 4)
    }

    /// The fragment size of streamed sends in effect (`[bp] max_fragment_bytes` or its
    /// default, never above `max_bundle_size`).
    pub fn max_fragment_bytes(&self) -> u64 {
        self.raw
            .bp
            .max_fragment_bytes
            .unwrap_or(DEFAULT_FRAGMENT_BYTES)
            .min(self.raw.bp.max_bundle_size)
    }

    /// The forwarding window in effect (`[ltp] window_bytes` or its default, derived from
    /// the spans' `max_sessions × aggregation_bytes`).
    pub fn window_bytes(&self) -> u64 {
        self.raw.ltp.window_bytes.unwrap_or_else(|| {
            let sum = self.spans.iter().fold(0u64, |acc, s| {
                acc.saturating_add(
                    (s.cfg.max_sessions as u64).saturating_mul(s.aggregation_bytes as u64),
                )
            });
            sum.clamp(MIN_WINDOW_BYTES, MAX_DEFAULT_WINDOW_BYTES)
        })
    }

    /// True when `peer` is a configured neighbour of any convergence layer.
    pub fn is_neighbour(&self, peer: u64) -> bool {
        self.spans.iter().any(|s| s.peer == peer)
            || self.tcp_peers.iter().any(|s| s.peer == peer)
            || self.udp_peers.iter().any(|s| s.peer == peer)
            || self.stcp_peers.iter().any(|s| s.peer == peer)
            || self.bibe_peers.iter().any(|s| s.peer == peer)
    }
}

fn ms(file: &str, field: &str, v: f64) -> Result<Duration, ConfigError> {
    if !(v.is_finite() && (0.0..=86_400_000.0).contains(&v)) {
        return Err(err(
            file,
            field,
            v,
            "a number of milliseconds between 0 and 86400000",
        ));
    }
    Ok(Duration::from_secs_f64(v / 1000.0))
}

/// One line for a TOML error: `file:line: field `key`: message` (the key when the error points
/// at a `key = value` line).
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let msg = e.message().replace('\n', " ");
    let Some(span) = e.span() else {
        return ConfigError(format!("{file}: {msg}"));
    };
    let before = text.get(..span.start).unwrap_or("");
    let line_no = before.matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    match line.split_once('=') {
        Some((key, _)) if !line.trim_start().starts_with('[') => {
            ConfigError(format!("{file}:{line_no}: field `{}`: {msg}", key.trim()))
        }
        _ => ConfigError(format!("{file}:{line_no}: {msg}")),
    }
}

impl NodeConfig {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Validated, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{file}: cannot read the configuration: {e}")))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, &file, base)
    }

    /// Parses and validates configuration text; `base` resolves relative paths.
    pub fn parse(text: &str, file: &str, base: &Path) -> Result<Validated, ConfigError> {
        let raw: NodeConfig = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
        raw.validate(file, base)
    }

    fn validate(self, file: &str, base: &Path) -> Result<Validated, ConfigError> {
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        if self.node == 0 {
            return Err(err(file, "node", 0, "a node number >= 1"));
        }
        let bind: SocketAddr = self.bind.parse().map_err(|_| {
            err(
                file,
                "bind",
                format!("{:?}", self.bind),
                "an IP socket address like \"127.0.0.1:1113\"",
            )
        })?;
        let engine_id = self.ltp.engine_id.unwrap_or(self.node);
        if engine_id == 0 {
            return Err(err(file, "ltp.engine_id", 0, "an engine id >= 1"));
        }
        if !(8..=64).contains(&self.ltp.session_number_bits) {
            return Err(err(
                file,
                "ltp.session_number_bits",
                self.ltp.session_number_bits,
                "8 to 64 (32 for ION/HDTN)",
            ));
        }
        if self.ltp.batch == 0 || self.ltp.batch > 1024 {
            return Err(err(file, "ltp.batch", self.ltp.batch, "1 to 1024"));
        }
        if let Some(v) = self.ltp.max_import_bytes {
            if v < 1 << 20 {
                return Err(err(
                    file,
                    "ltp.max_import_bytes",
                    v,
                    "at least 1048576 bytes (1 MiB)",
                ));
            }
        }
        if self.ltp.window_bytes == Some(0) {
            return Err(err(file, "ltp.window_bytes", 0, "a positive byte count"));
        }
        if self.store.quota_bytes == 0 {
            return Err(err(file, "store.quota_bytes", 0, "a positive byte count"));
        }
        if !(1..=MAX_STORE_CACHE_MB).contains(&self.store.cache_mb) {
            return Err(err(
                file,
                "store.cache_mb",
                self.store.cache_mb,
                "1 to 65536 (MiB of database page cache)",
            ));
        }
        if self.store.hot_cache_hold_ms > MAX_HOT_CACHE_HOLD_MS {
            return Err(err(
                file,
                "store.hot_cache_hold_ms",
                self.store.hot_cache_hold_ms,
                "0 (never hold) to 10000 (ms)",
            ));
        }
        if self.store.commit_group_ms > MAX_COMMIT_GROUP_MS {
            return Err(err(
                file,
                "store.commit_group_ms",
                self.store.commit_group_ms,
                "0 (commit every send at once) to 1000 (ms)",
            ));
        }
        if self.store.hot_cache_mb > MAX_STORE_CACHE_MB {
            return Err(err(
                file,
                "store.hot_cache_mb",
                self.store.hot_cache_mb,
                "0 (off) to 65536 (MiB of recently stored bundles)",
            ));
        }
        if self.bp.max_bundle_size < 64 {
            return Err(err(
                file,
                "bp.max_bundle_size",
                self.bp.max_bundle_size,
                "at least 64 bytes",
            ));
        }
        if let Some(v) = self.bp.max_fragment_bytes {
            if v < MIN_FRAGMENT_BYTES || v > self.bp.max_bundle_size {
                return Err(err(
                    file,
                    "bp.max_fragment_bytes",
                    v,
                    &format!(
                        "{MIN_FRAGMENT_BYTES} to bp.max_bundle_size ({}) bytes",
                        self.bp.max_bundle_size
                    ),
                ));
            }
        }
        if self.bp.refusal_backoff_first_ms == 0
            || self.bp.refusal_backoff_max_ms < self.bp.refusal_backoff_first_ms
            || self.bp.refusal_backoff_max_ms > 86_400_000
        {
            return Err(err(
                file,
                "bp.refusal_backoff_max_ms",
                self.bp.refusal_backoff_max_ms,
                "refusal_backoff_first_ms >= 1 and refusal_backoff_first_ms <= \
                 refusal_backoff_max_ms <= 86400000",
            ));
        }
        if self.bp.default_lifetime_ms == 0 {
            return Err(err(
                file,
                "bp.default_lifetime_ms",
                0,
                "a positive number of milliseconds",
            ));
        }
        let mut spans = Vec::new();
        for (i, s) in self.span.iter().enumerate() {
            let f = |name: &str| format!("span[{i}].{name}");
            if s.peer == 0 || s.peer == self.node {
                return Err(err(
                    file,
                    &f("peer"),
                    s.peer,
                    "a neighbour node number other than 0 and this node",
                ));
            }
            if spans.iter().any(|x: &Span| x.peer == s.peer) {
                return Err(err(file, &f("peer"), s.peer, "one span per neighbour"));
            }
            let address: SocketAddr = s.address.parse().map_err(|_| {
                err(
                    file,
                    &f("address"),
                    format!("{:?}", s.address),
                    "an IP socket address like \"127.0.0.1:1113\"",
                )
            })?;
            if s.max_segment_size < ltp::MIN_SEGMENT_SIZE || s.max_segment_size > 65_507 {
                return Err(err(
                    file,
                    &f("max_segment_size"),
                    s.max_segment_size,
                    &format!("{} to 65507 bytes", ltp::MIN_SEGMENT_SIZE),
                ));
            }
            if s.max_sessions == 0 || s.max_sessions > 100_000 {
                return Err(err(file, &f("max_sessions"), s.max_sessions, "1 to 100000"));
            }
            let profile = s.peer_kind.ltp_profile().map_err(|why| {
                err(
                    file,
                    &f("peer_kind"),
                    format!("{:?}", s.peer_kind.name()),
                    &format!("\"dtnkit\", \"ion\", \"hdtn\" or \"generic\" ({why})"),
                )
            })?;
            let aggregation_bytes = s.aggregation_bytes.unwrap_or(profile.aggregation_bytes);
            if aggregation_bytes == 0 {
                return Err(err(
                    file,
                    &f("aggregation_bytes"),
                    0,
                    "a positive byte count",
                ));
            }
            let rto = match s.rto_ms {
                Some(v) if v <= 0.0 => {
                    return Err(err(
                        file,
                        &f("rto_ms"),
                        v,
                        "a positive number of milliseconds",
                    ))
                }
                Some(v) => Some(ms(file, &f("rto_ms"), v)?),
                None => None,
            };
            if s.max_import_sessions == 0 || s.max_import_sessions > 100_000 {
                return Err(err(
                    file,
                    &f("max_import_sessions"),
                    s.max_import_sessions,
                    "1 to 100000",
                ));
            }
            let max_block_bytes = match s.max_block_bytes {
                Some(v) if v < s.max_segment_size as u64 => {
                    return Err(err(
                        file,
                        &f("max_block_bytes"),
                        v,
                        "at least max_segment_size bytes",
                    ))
                }
                Some(v) => v,
                None => self
                    .bp
                    .max_bundle_size
                    .saturating_add(aggregation_bytes as u64),
            };
            let max_bundles_per_block = s
                .max_bundles_per_block
                .unwrap_or(profile.max_bundles_per_block);
            // What fits in one of the neighbour's blocks beside what aggregation may add.
            let peer_block = s.peer_max_block_bytes.unwrap_or(max_block_bytes);
            let send_limit = if max_bundles_per_block == 1 {
                peer_block
            } else {
                peer_block.saturating_sub(aggregation_bytes as u64)
            };
            let max_send_bundle = match s.peer_max_block_bytes {
                Some(v) if send_limit < MIN_FRAGMENT_BYTES => {
                    return Err(err(
                        file,
                        &f("peer_max_block_bytes"),
                        v,
                        &format!(
                            "at least aggregation_bytes ({aggregation_bytes}) + \
                             {MIN_FRAGMENT_BYTES} bytes (room for one fragment beside an \
                             aggregated block)"
                        ),
                    ))
                }
                _ if send_limit < MIN_FRAGMENT_BYTES => None,
                _ => (send_limit < self.bp.max_bundle_size).then_some(send_limit),
            };
            let burst_time = match s.burst_ms {
                Some(v) => Some(ms(file, &f("burst_ms"), v)?),
                None => None,
            };
            if let Some(r) = s.signal_replication {
                if !(1..=16).contains(&r) {
                    return Err(err(file, &f("signal_replication"), r, "1 to 16 copies"));
                }
            }
            if let Some(c) = s.checkpoint_bytes {
                if c != 0 && c < peer_kind::MIN_CHECKPOINT_BYTES {
                    return Err(err(
                        file,
                        &f("checkpoint_bytes"),
                        c,
                        &format!(
                            "0 (one checkpoint per block) or at least {} bytes",
                            peer_kind::MIN_CHECKPOINT_BYTES
                        ),
                    ));
                }
            }
            let fec = match &s.fec {
                None => None,
                Some(sec) => {
                    if s.adaptive_rate == Some(true) {
                        return Err(err(
                            file,
                            &f("adaptive_rate"),
                            true,
                            "false or absent on a span with [span.fec] (the FEC layer paces at rate_bps)",
                        ));
                    }
                    let c = sec
                        .to_config(s.engine_id.unwrap_or(s.peer), s.rate_bps)
                        .and_then(|c| {
                            c.validate(fec::symbol_bytes(s.max_segment_size))?;
                            Ok(c)
                        })
                        .map_err(|e| {
                            err(
                                file,
                                &f(&format!("fec.{}", e.field)),
                                e.value.clone(),
                                &e.expected,
                            )
                        })?;
                    Some(c)
                }
            };
            let auth = ltp_auth::validate_span_auth(file, base, s, &f)?;
            spans.push(Span {
                auth,
                peer: s.peer,
                engine_id: s.engine_id.unwrap_or(s.peer),
                address,
                rto,
                owlt: ms(file, &f("owlt_ms"), s.owlt_ms)?,
                aggregation_time: ms(
                    file,
                    &f("aggregation_ms"),
                    s.aggregation_ms.unwrap_or(profile.aggregation_ms),
                )?,
                burst_time,
                max_block_bytes,
                max_send_bundle,
                aggregation_bytes,
                max_bundles_per_block,
                max_burst_bytes: s.max_burst_bytes.unwrap_or(profile.max_burst_bytes),
                // The FEC layer has its own block model (HSLTP closes on the full report).
                checkpoint_bytes: s.checkpoint_bytes.unwrap_or(if fec.is_some() {
                    0
                } else {
                    profile.checkpoint_bytes
                }),
                learn_receiver_pause: s
                    .learn_receiver_pause
                    .unwrap_or(profile.learn_receiver_pause),
                adaptive_start_bps: profile.start_bps(s.max_segment_size),
                adaptive_round: ms(
                    file,
                    &f("adaptive_round_ms"),
                    s.adaptive_round_ms.unwrap_or(profile.adaptive_round_ms),
                )?,
                fec,
                cfg: s.clone(),
            });
        }
        let (tcpcl, tcp_peers) = cla::validate_tcp(
            file,
            base,
            self.node,
            self.bp.max_bundle_size,
            self.tcpcl.as_ref(),
            &self.tcp_peer,
        )?;
        let (udpcl, udp_peers) =
            cla::validate_udp(file, self.node, self.udpcl.as_ref(), &self.udp_peer)?;
        let (stcp, stcp_peers) = stcp::validate_stcp(
            file,
            self.node,
            self.bp.max_bundle_size,
            self.stcp.as_ref(),
            &self.stcp_peer,
        )?;
        let (bibe, bibe_peers) =
            bibe::validate_bibe(file, self.node, self.bibe.as_ref(), &self.bibe_peer)?;
        let mut neighbours: Vec<(String, u64)> = Vec::new();
        neighbours.extend(
            spans
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("span[{i}].peer"), s.peer)),
        );
        neighbours.extend(
            tcp_peers
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("tcp_peer[{i}].peer"), s.peer)),
        );
        neighbours.extend(
            udp_peers
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("udp_peer[{i}].peer"), s.peer)),
        );
        neighbours.extend(
            stcp_peers
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("stcp_peer[{i}].peer"), s.peer)),
        );
        neighbours.extend(
            bibe_peers
                .iter()
                .enumerate()
                .map(|(i, s)| (format!("bibe_peer[{i}].peer"), s.peer)),
        );
        cla::check_unique_neighbours(file, &neighbours)?;
        for (i, r) in self.route.iter().enumerate() {
            if !neighbours.iter().any(|(_, p)| *p == r.via) {
                return Err(err(
                    file,
                    &format!("route[{i}].via"),
                    r.via,
                    "the peer of one of the [[span]], [[tcp_peer]], [[udp_peer]], [[stcp_peer]] or [[bibe_peer]] entries",
                ));
            }
            if r.dest_last.is_some_and(|l| l < r.dest) {
                return Err(err(
                    file,
                    &format!("route[{i}].dest_last"),
                    r.dest_last.unwrap_or(0),
                    "a node number >= dest",
                ));
            }
        }
        let bpsec_rules = bpsec::validate_bpsec(file, base, self.bpsec.as_ref())?;
        let store_path = resolve(&self.store.path);
        let socket_path = self
            .app
            .socket
            .as_deref()
            .map_or_else(|| store_path.join("app.sock"), resolve);
        let contact_plan = self.contact_plan.as_deref().map(resolve);
        let segment_log = self.log.ltp_segments.as_deref().map(resolve);
        let bundle_log = self.log.bundles.as_deref().map(resolve);
        let route_log = self.log.routes.as_deref().map(resolve);
        let metrics = crate::metrics::validate(file, self.metrics.as_ref())?;
        Ok(Validated {
            bind,
            engine_id,
            spans,
            store_path,
            socket_path,
            contact_plan,
            segment_log,
            bundle_log,
            route_log,
            tcpcl,
            tcp_peers,
            udpcl,
            udp_peers,
            stcp,
            stcp_peers,
            bibe,
            bibe_peers,
            bpsec_rules,
            metrics,
            raw: self,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
node = 1
bind = "127.0.0.1:4556"
[store]
path = "store"
[[span]]
peer = 2
address = "127.0.0.1:4557"
rto_ms = 50
"#;

    fn parse(t: &str) -> Result<Validated, ConfigError> {
        NodeConfig::parse(t, "n.toml", Path::new("/etc/dtn"))
    }

    #[test]
    fn span_fec_and_signal_replication_are_parsed_and_validated() {
        let with = |extra: &str| parse(&format!("{GOOD}signal_replication = 3\n{extra}"));
        let v = with("rate_bps = 10000000\n[span.fec]\nmode = \"hsltp\"\nmax_k = 128\n").unwrap();
        let s = &v.spans[0];
        assert_eq!(s.cfg.signal_replication, Some(3));
        let f = s.fec.as_ref().unwrap();
        assert_eq!(
            (f.mode, f.max_k, f.rate_bps, f.remote_engine_id),
            (fec::Mode::Hsltp, 128, 10_000_000, 2)
        );
        assert!(
            !s.adaptive(false),
            "the FEC layer paces; no adaptive pacing"
        );
        for (extra, field) in [
            ("[span.fec]\nmode = \"raptor\"\n", "span[0].fec.mode"),
            (
                "[span.fec]\nmode = \"eclsa\"\ncode_rate = \"1/1\"\n",
                "span[0].fec.code_rate",
            ),
            (
                "[span.fec]\nmode = \"eclsa\"\nmax_k = 60000\n",
                "span[0].fec.max_k",
            ),
            (
                "[span.fec]\nmode = \"eclsa\"\nsignal_ms = -2\n",
                "span[0].fec.signal_ms",
            ),
            (
                "adaptive_rate = true\n[span.fec]\nmode = \"eclsa\"\n",
                "span[0].adaptive_rate",
            ),
        ] {
            let e = with(extra).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
        let e = parse(&format!("{GOOD}signal_replication = 0\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("span[0].signal_replication"), "{e}");
    }

    #[test]
    fn good_config_resolves_paths_and_defaults() {
        let v = parse(GOOD).unwrap();
        assert_eq!(v.engine_id, 1);
        assert_eq!(v.store_path, PathBuf::from("/etc/dtn/store"));
        assert_eq!(v.socket_path, PathBuf::from("/etc/dtn/store/app.sock"));
        assert_eq!(v.spans[0].engine_id, 2);
        assert_eq!(v.spans[0].rto, Some(Duration::from_millis(50)));
        assert_eq!(v.spans[0].cfg.max_segment_size, 1024);
    }

    const CLAS: &str = r#"
[tcpcl]
listen = "127.0.0.1:4556"
keepalive_s = 10

[[tcp_peer]]
peer = 3
address = "127.0.0.1:4557"

[[tcp_peer]]
peer = 4
node_id = "dtn://four/"
exceed_peer_transfer_mru = true

[udpcl]
bind = "127.0.0.1:4558"

[[udp_peer]]
peer = 5
address = "127.0.0.1:4559"

[[route]]
dest = 10
dest_last = 19
via = 3
"#;

    #[test]
    fn convergence_layers_per_neighbour() {
        let v = parse(&(GOOD.to_string() + CLAS)).unwrap();
        let t = v.tcpcl.as_ref().unwrap();
        assert_eq!(t.listen, Some("127.0.0.1:4556".parse().unwrap()));
        assert_eq!(t.keepalive_s, 10);
        assert_eq!(t.transfer_mru, 64 << 20, "defaults to bp.max_bundle_size");
        assert_eq!(v.tcp_peers[0].node_id, "ipn:3.0");
        assert_eq!(v.tcp_peers[1].address, None);
        assert!(v.tcp_peers[1].exceed_peer_transfer_mru);
        assert_eq!(v.udp_peers[0].peer, 5);
        assert_eq!(v.udpcl.as_ref().unwrap().max_datagram, 65_507);
        assert!(v.is_neighbour(2) && v.is_neighbour(3) && v.is_neighbour(5));
        assert!(!v.is_neighbour(6));
    }

    #[test]
    fn convergence_layer_errors_name_the_field() {
        let full = GOOD.to_string() + CLAS;
        let cases = [
            (full.replace("peer = 3", "peer = 2"), "tcp_peer[0].peer"),
            (full.replace("peer = 5", "peer = 3"), "udp_peer[0].peer"),
            (
                full.replace("listen = \"127.0.0.1:4556\"", "listen = \"x\""),
                "tcpcl.listen",
            ),
            (
                full.replace("\"dtn://four/\"", "\"four\""),
                "tcp_peer[1].node_id",
            ),
            (full.replace("keepalive_s = 10", "colour = 1"), "colour"),
            (
                full.replace("[udpcl]", "[udpcl]\nmax_datagram = 70000"),
                "udpcl.max_datagram",
            ),
            (full.replace("via = 3", "via = 9"), "route[0].via"),
            (GOOD.to_string() + "[[tcp_peer]]\npeer = 3\n", "[tcpcl]"),
            (
                GOOD.to_string() + "[[udp_peer]]\npeer = 3\naddress = \"127.0.0.1:1\"\n",
                "[udpcl]",
            ),
        ];
        for (text, needle) in cases {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} should mention {needle}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }

    #[test]
    fn store_cache_sizes_default_and_are_validated() {
        let v = parse(GOOD).unwrap();
        assert_eq!((v.raw.store.cache_mb, v.raw.store.hot_cache_mb), (32, 32));
        assert_eq!(v.raw.store.hot_cache_hold_ms, 20);
        assert_eq!(v.raw.store.commit_group_ms, 10);
        let set = |extra: &str| {
            GOOD.replacen("path = \"store\"", &format!("path = \"store\"\n{extra}"), 1)
        };
        let v = parse(&set(
            "cache_mb = 8\nhot_cache_mb = 0\nhot_cache_hold_ms = 0\ncommit_group_ms = 0",
        ))
        .unwrap();
        assert_eq!((v.raw.store.cache_mb, v.raw.store.hot_cache_mb), (8, 0));
        assert_eq!(v.raw.store.hot_cache_hold_ms, 0);
        assert_eq!(v.raw.store.commit_group_ms, 0);
        for (extra, needle) in [
            ("cache_mb = 0", "`store.cache_mb` = 0"),
            ("cache_mb = 70000", "`store.cache_mb` = 70000"),
            ("hot_cache_mb = 70000", "`store.hot_cache_mb` = 70000"),
            (
                "hot_cache_hold_ms = 10001",
                "`store.hot_cache_hold_ms` = 10001",
            ),
            ("commit_group_ms = 1001", "`store.commit_group_ms` = 1001"),
        ] {
            let e = parse(&set(extra)).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} should mention {needle}");
        }
    }

    #[test]
    fn errors_name_the_field_on_one_line() {
        let cases = [
            (GOOD.replace("node = 1", "node = 0"), "`node`"),
            (GOOD.replace("127.0.0.1:4556", "nowhere"), "`bind`"),
            (GOOD.replace("rto_ms = 50", "rto_ms = -1"), "span[0].rto_ms"),
            (GOOD.replace("peer = 2", "peer = 1"), "span[0].peer"),
            (GOOD.replace("rto_ms = 50", "colour = 1"), "colour"),
            (GOOD.replace("node = 1", "node = \"one\""), "n.toml:2"),
            (
                GOOD.to_string() + "[[route]]\ndest = 5\nvia = 9\n",
                "route[0].via",
            ),
        ];
        for (text, needle) in cases {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} should mention {needle}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }

    #[test]
    fn timer_backoff_defaults_on_with_a_derived_rto_and_off_with_rto_ms() {
        let explicit = parse(GOOD).unwrap();
        assert_eq!(explicit.spans[0].rto, Some(Duration::from_millis(50)));
        assert!(
            !explicit.spans[0].rto_backoff(),
            "rto_ms chosen: fixed timers"
        );
        let derived = parse(&GOOD.replace("rto_ms = 50", "")).unwrap();
        assert_eq!(derived.spans[0].rto, None);
        assert!(derived.spans[0].rto_backoff(), "derived RTO: back-off");
        let forced = parse(&(GOOD.to_string() + "rto_backoff = true\n")).unwrap();
        assert!(forced.spans[0].rto_backoff());
        let off = parse(&(GOOD.replace("rto_ms = 50", "") + "rto_backoff = false\n")).unwrap();
        assert!(!off.spans[0].rto_backoff());
    }

    #[test]
    fn adaptive_pacing_defaults_on_without_a_rate_and_warns_when_a_span_has_neither() {
        let v = parse(GOOD).unwrap();
        let s = &v.spans[0];
        assert!(s.adaptive(false), "no rate, no plan: adaptive");
        assert!(!s.adaptive(true), "a contact plan sets the rate");
        assert_eq!(s.pacing_warning(&[]), None);
        assert_eq!(s.pacing_warning(&[8_000_000]), None);
        let rated = parse(
            &(GOOD.to_string()
                + "rate_bps = 100000000
"),
        )
        .unwrap();
        assert!(
            !rated.spans[0].adaptive(false),
            "a configured rate stays exact"
        );
        assert_eq!(rated.spans[0].pacing_warning(&[]), None);
        let forced = parse(
            &(GOOD.to_string()
                + "rate_bps = 100000000
adaptive_rate = true
"),
        )
        .unwrap();
        assert!(forced.spans[0].adaptive(false) && forced.spans[0].adaptive(true));
        let off = parse(
            &(GOOD.to_string()
                + "adaptive_rate = false
"),
        )
        .unwrap();
        let w = off.spans[0].pacing_warning(&[]).unwrap();
        assert!(
            w.contains("span to node 2") && w.contains("rate_bps = 0"),
            "{w}"
        );
        assert!(off.spans[0]
            .pacing_warning(&[0, 5])
            .unwrap()
            .contains("rate 0"));
        assert_eq!(off.spans[0].pacing_warning(&[5]), None);
        assert!(parse(
            &(GOOD.to_string()
                + "adaptive_rate = 1
")
        )
        .is_err());
    }

    #[test]
    fn adaptive_rounds_span_host_pauses_towards_hdtn_unless_set() {
        let span = |extra: &str| parse(&format!("{GOOD}{extra}")).map(|v| v.spans[0].clone());
        let round = |extra: &str| span(extra).unwrap().adaptive_round;
        assert_eq!(round("peer_kind = \"hdtn\"\n"), Duration::from_millis(20));
        for k in ["dtnkit", "ion", "generic"] {
            assert_eq!(
                round(&format!("peer_kind = \"{k}\"\n")),
                ltp::pacing::MIN_ROUND_TIME,
                "{k}"
            );
        }
        assert_eq!(
            round("peer_kind = \"hdtn\"\nadaptive_round_ms = 4\n"),
            Duration::from_millis(4)
        );
        let e = span("adaptive_round_ms = -1\n").unwrap_err().to_string();
        assert!(e.contains("adaptive_round_ms") && e.contains("-1"), "{e}");
    }

    #[test]
    fn receiver_pause_learning_is_on_towards_ion_only_unless_set() {
        let span = |extra: &str| parse(&format!("{GOOD}{extra}")).map(|v| v.spans[0].clone());
        assert!(span("peer_kind = \"ion\"\n").unwrap().learn_receiver_pause);
        for k in ["dtnkit", "hdtn", "generic"] {
            let s = span(&format!("peer_kind = \"{k}\"\n")).unwrap();
            assert!(!s.learn_receiver_pause, "{k}");
        }
        let off = span("peer_kind = \"ion\"\nlearn_receiver_pause = false\n").unwrap();
        assert!(!off.learn_receiver_pause);
        assert!(
            span("learn_receiver_pause = true\n")
                .unwrap()
                .learn_receiver_pause
        );
    }

    #[test]
    fn checkpoint_bytes_defaults_by_peer_kind_and_is_validated() {
        let span = |extra: &str| parse(&format!("{GOOD}{extra}")).map(|v| v.spans[0].clone());
        assert_eq!(span("").unwrap().checkpoint_bytes, 1 << 20);
        let hdtn = span("peer_kind = \"hdtn\"\n").unwrap();
        assert_eq!(hdtn.checkpoint_bytes, 1 << 20);
        for k in ["ion", "generic"] {
            let s = span(&format!("peer_kind = \"{k}\"\n")).unwrap();
            assert_eq!(s.checkpoint_bytes, 0, "{k}");
        }
        // FEC spans keep one checkpoint per block unless told otherwise.
        let fec = "rate_bps = 10000000\n[span.fec]\nmode = \"hsltp\"\n";
        assert_eq!(span(fec).unwrap().checkpoint_bytes, 0);
        assert_eq!(span("checkpoint_bytes = 0\n").unwrap().checkpoint_bytes, 0);
        let ion = span("peer_kind = \"ion\"\ncheckpoint_bytes = 65536\n").unwrap();
        assert_eq!(ion.checkpoint_bytes, 65_536);
        let e = span("checkpoint_bytes = 8192\n").unwrap_err().to_string();
        assert!(e.contains("span[0].checkpoint_bytes"), "{e}");
    }

    #[test]
    fn peer_kinds_set_defaults_that_explicit_keys_override() {
        let v = parse(GOOD).unwrap();
        let s = &v.spans[0];
        assert_eq!(s.cfg.peer_kind, PeerKind::Dtnkit, "the default");
        assert_eq!(
            (
                s.aggregation_bytes,
                s.max_bundles_per_block,
                s.max_burst_bytes
            ),
            (64 * 1024, 0, 0)
        );
        assert_eq!(s.aggregation_time, Duration::from_millis(1));
        assert_eq!(s.profile_warning(), None);
        let kind = |k: &str, extra: &str| {
            parse(&format!("{GOOD}peer_kind = \"{k}\"\n{extra}")).map(|v| v.spans[0].clone())
        };
        let h = kind("hdtn", "").unwrap();
        assert_eq!((h.max_bundles_per_block, h.max_burst_bytes), (1, 65_536));
        assert_eq!(h.profile_warning(), None);
        let g = kind("generic", "").unwrap();
        assert_eq!((g.max_bundles_per_block, g.max_burst_bytes), (1, 65_536));
        let i = kind("ion", "").unwrap();
        assert_eq!((i.max_bundles_per_block, i.max_burst_bytes), (0, 65_536));
        // Explicit keys win over the profile; the HDTN profile warns when that loses bundles.
        let h = kind(
            "hdtn",
            "max_bundles_per_block = 4\nmax_burst_bytes = 0\naggregation_bytes = 1000\naggregation_ms = 5\n",
        )
        .unwrap();
        assert_eq!(
            (
                h.max_bundles_per_block,
                h.max_burst_bytes,
                h.aggregation_bytes
            ),
            (4, 0, 1000)
        );
        assert_eq!(h.aggregation_time, Duration::from_millis(5));
        let w = h.profile_warning().unwrap();
        assert!(
            w.contains("span to node 2") && w.contains("one bundle per LTP block"),
            "{w}"
        );
        let d = kind("dtnkit", "max_bundles_per_block = 1\n").unwrap();
        assert_eq!(d.max_bundles_per_block, 1);
        // Errors name the field.
        let e = kind("dtn7", "").unwrap_err().to_string();
        assert!(
            e.contains("span[0].peer_kind") && e.contains("no LTP"),
            "{e}"
        );
        let e = kind("hdtn2", "").unwrap_err().to_string();
        assert!(e.contains("peer_kind") && e.contains("hdtn"), "{e}");
        // TCPCL: dtn7 sends beyond its advertised transfer MRU unless told otherwise.
        let tcp = |extra: &str| {
            parse(&format!(
                "{GOOD}[tcpcl]\n[[tcp_peer]]\npeer = 3\naddress = \"127.0.0.1:9\"\n{extra}"
            ))
            .unwrap()
            .tcp_peers[0]
                .clone()
        };
        assert!(!tcp("").exceed_peer_transfer_mru);
        let t = tcp("peer_kind = \"dtn7\"\n");
        assert!(t.exceed_peer_transfer_mru && t.peer_kind == PeerKind::Dtn7);
        assert!(
            !tcp("peer_kind = \"dtn7\"\nexceed_peer_transfer_mru = false\n")
                .exceed_peer_transfer_mru
        );
        assert!(!tcp("peer_kind = \"hdtn\"\n").exceed_peer_transfer_mru);
        // ION 4.1.3 speaks TCPCLv3 only: its profile opens v3 sessions unless told otherwise.
        assert_eq!(tcp("").version, tcpcl::Version::V4);
        assert_eq!(tcp("peer_kind = \"ion\"\n").version, tcpcl::Version::V3);
        assert_eq!(
            tcp("peer_kind = \"ion\"\nversion = 4\n").version,
            tcpcl::Version::V4
        );
        assert_eq!(tcp("peer_kind = \"hdtn\"\n").version, tcpcl::Version::V4);
    }

    #[test]
    fn delivery_backlog_limit_defaults_to_a_quarter_of_the_quota() {
        let v = parse(GOOD).unwrap();
        assert_eq!(v.delivery_backlog_bytes(), (1 << 30) / 4);
        let set = |extra: &str| GOOD.replace("[store]", &format!("[bp]\n{extra}\n[store]"));
        assert_eq!(
            parse(&set("delivery_backlog_bytes = 0"))
                .unwrap()
                .delivery_backlog_bytes(),
            0
        );
        assert_eq!(
            parse(&set("delivery_backlog_bytes = 5000000"))
                .unwrap()
                .delivery_backlog_bytes(),
            5_000_000
        );
        let quota = GOOD.replace("path = \"store\"", "path = \"store\"\nquota_bytes = 4000");
        assert_eq!(parse(&quota).unwrap().delivery_backlog_bytes(), 1000);
    }

    #[test]
    fn ltp_memory_bounds_default_from_the_spans_and_are_validated() {
        let v = parse(GOOD).unwrap();
        // 16 sessions x 64 KiB = 1 MiB of blocks in flight: raised to the 32 MiB floor.
        assert_eq!(v.window_bytes(), MIN_WINDOW_BYTES);
        assert_eq!(v.ltp_max_import_bytes(), DEFAULT_MAX_IMPORT_BYTES);
        assert_eq!(v.spans[0].cfg.max_import_sessions, 64);
        assert_eq!(v.spans[0].max_block_bytes, (64 << 20) + 64 * 1024);
        assert_eq!(v.spans[0].burst_time, None);
        // 64 sessions x 750 kB = 48 MB: taken as is; 64 x 5 MB is capped at 64 MiB.
        let mid = GOOD.replace(
            "rto_ms = 50",
            "max_sessions = 64\naggregation_bytes = 750000",
        );
        assert_eq!(parse(&mid).unwrap().window_bytes(), 48_000_000);
        let big = GOOD.replace(
            "rto_ms = 50",
            "max_sessions = 64\naggregation_bytes = 5000000",
        );
        assert_eq!(
            parse(&big).unwrap().window_bytes(),
            MAX_DEFAULT_WINDOW_BYTES
        );
        let set = GOOD.replace(
            "[store]",
            "[ltp]\nmax_import_bytes = 33554432\nwindow_bytes = 1000000\n[store]",
        ) + "max_import_sessions = 8\nmax_block_bytes = 6000000\nburst_ms = 2.5\n";
        let v = parse(&set).unwrap();
        assert_eq!(v.window_bytes(), 1_000_000);
        assert_eq!(v.ltp_max_import_bytes(), 32 << 20);
        assert_eq!(v.spans[0].cfg.max_import_sessions, 8);
        assert_eq!(v.spans[0].max_block_bytes, 6_000_000);
        assert_eq!(v.spans[0].burst_time, Some(Duration::from_micros(2500)));
        let bad = [
            (
                GOOD.replace("[store]", "[ltp]\nmax_import_bytes = 1000\n[store]"),
                "ltp.max_import_bytes",
            ),
            (
                GOOD.replace("[store]", "[ltp]\nwindow_bytes = 0\n[store]"),
                "ltp.window_bytes",
            ),
            (
                GOOD.to_string() + "max_import_sessions = 0\n",
                "span[0].max_import_sessions",
            ),
            (
                GOOD.to_string() + "max_block_bytes = 100\n",
                "span[0].max_block_bytes",
            ),
            (GOOD.to_string() + "burst_ms = -1\n", "span[0].burst_ms"),
        ];
        for (text, needle) in bad {
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} should mention {needle}");
        }
    }
}
