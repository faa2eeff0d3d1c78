//! Scenario files (TOML): what to simulate. See `docs/sim.md` for the format with examples.
//!
//! Parsing is strict (`deny_unknown_fields`) and every semantic check names the field, the value found and what
//! is expected, e.g. `link[0].b = 9: expected the number of a [[node]]`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// A scenario that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// TOML syntax or type error (the message names the key).
    #[error("{file}: {message}")]
    Parse {
        /// File.
        file: String,
        /// Parser message.
        message: String,
    },
    /// A field holds an unacceptable value.
    #[error("{field} = {value}: expected {expected}")]
    Invalid {
        /// Full path of the field.
        field: String,
        /// The value found.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// A link direction is invalid (message from the channel crate, prefixed with the link).
    #[error("link[{index}].{source}")]
    Channel {
        /// Link index.
        index: usize,
        /// Cause.
        source: channel::ConfigError,
    },
}

pub(crate) fn invalid(
    field: impl Into<String>,
    value: impl std::fmt::Display,
    expected: &str,
) -> ScenarioError {
    ScenarioError::Invalid {
        field: field.into(),
        value: value.to_string(),
        expected: expected.to_string(),
    }
}

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Run settings.
    pub sim: SimSection,
    /// Nodes.
    #[serde(rename = "node")]
    pub nodes: Vec<NodeSection>,
    /// Links between nodes (one LTP span each way per link).
    #[serde(default, rename = "link")]
    pub links: Vec<LinkSection>,
    /// Contact windows gating LTP transmission (a span without contacts is always up).
    #[serde(default, rename = "contact")]
    pub contacts: Vec<ContactSection>,
    /// Traffic flows.
    #[serde(default, rename = "traffic")]
    pub traffic: Vec<TrafficSection>,
    /// CFDP file transfers (`[[cfdp]]`), run by real `cfdp::Entity` instances (entity id = node number).
    #[serde(default, rename = "cfdp")]
    pub cfdp: Vec<CfdpSection>,
    /// Log outputs.
    #[serde(default)]
    pub log: LogSection,
    /// Directory that relative paths (trace files, logs) are resolved against.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// `[sim]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimSection {
    /// Virtual time to simulate, in seconds.
    pub duration_s: f64,
    /// Seed of every random stream (links, LTP session numbers, generated traces).
    #[serde(default)]
    pub seed: u64,
    /// DTN time (ms since 2000-01-01) at simulation start, used for bundle creation timestamps.
    #[serde(default = "default_epoch")]
    pub epoch_dtn_ms: u64,
    /// Stop before `duration_s` once every client finished and every engine is idle.
    #[serde(default = "yes")]
    pub stop_when_idle: bool,
    /// Which bundle layer the nodes run.
    #[serde(default)]
    pub bundle_layer: BundleLayer,
    /// Contact plan file (ION `a contact` lines, or `*.toml`; see `docs/contact-plan.md`), times relative to the
    /// simulation start. Its contacts gate LTP like `[[contact]]` entries (rates in bytes/s become the pacing rate
    /// during each window) and, with the agent, it is also the agent's plan for contact graph routing.
    #[serde(default)]
    pub contact_plan: Option<PathBuf>,
}

/// The bundle layer hosted by every node.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BundleLayer {
    /// The real `bp` agent with an in-memory store (routing: static routes, then direct neighbours).
    #[default]
    Agent,
    /// The simulator's minimal static-route layer (no store, verbatim forwarding); faster, for LTP-only studies.
    Static,
}

fn default_epoch() -> u64 {
    // 2025-12-31T00:00:00Z in DTN time (9496 days after 2000-01-01). It was meant to be
    // 2026-01-01 (820_540_800_000) but is kept as it is: committed experiment results (bundle
    // creation times, hence the logs) were produced with this value.
    820_454_400_000
}

fn yes() -> bool {
    true
}

/// `[[node]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// ipn node number; also the LTP engine id.
    pub number: u64,
    /// LTP settings applied to every span of this node.
    #[serde(default)]
    pub ltp: LtpSection,
    /// Modelled processing cost.
    #[serde(default)]
    pub processing: ProcessingSection,
    /// Static routes: bundles for `dest` go to neighbour `via` (neighbours are reached directly without a route).
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteSection>,
    /// The agent's in-memory store.
    #[serde(default)]
    pub store: StoreSection,
    /// Packet-layer FEC below LTP on every span of this node (`docs/fec.md`; the node's
    /// neighbours must have it too): `[node.fec]` with `mode = "eclsa"` or `"hsltp"`.
    #[serde(default)]
    pub fec: Option<fec::FecSection>,
    /// BIBE (`docs/bibe.md`): this node decapsulates BPDUs addressed to it.
    #[serde(default)]
    pub bibe: Option<crate::bibe_sim::BibeSection>,
    /// BIBE tunnels from this node (virtual neighbours named by routes).
    #[serde(default, rename = "bibe_peer")]
    pub bibe_peers: Vec<crate::bibe_sim::BibePeerSection>,
}

/// `[node.store]`: the agent's store (agent layer only).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// Store quota in bytes (default: the agent's, 1 GiB). Bundles arriving at a full store are refused and
    /// their red block is refused too (`confirm_block(false)`), so the previous hop forwards them again.
    #[serde(default)]
    pub quota_bytes: Option<u64>,
}

/// `[node.ltp]`: span settings (names follow `ltp::SpanConfig`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LtpSection {
    /// Maximum segment size in bytes.
    #[serde(default = "d_mss")]
    pub max_segment_size: usize,
    /// Parallel export sessions per span.
    #[serde(default = "d_sessions")]
    pub max_export_sessions: usize,
    /// Parallel import sessions per span.
    #[serde(default = "d_imports")]
    pub max_import_sessions: usize,
    /// Explicit RTO in ms (else derived from `owlt_ms` × 2 + `margin_ms`).
    #[serde(default)]
    pub rto_ms: Option<f64>,
    /// One-way light time used to derive the RTO (default: the link's forward/return delays).
    #[serde(default)]
    pub owlt_ms: Option<f64>,
    /// Processing margin added to the derived RTO.
    #[serde(default = "d_margin")]
    pub margin_ms: f64,
    /// Pacing rate in bit/s (default: the link direction's rate; 0 = unpaced).
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// Token-bucket depth in bytes (the depth in effect is the larger of this and
    /// `pacing_burst_ms` at the current rate).
    #[serde(default)]
    pub pacing_burst_bytes: u64,
    /// Token-bucket depth as milliseconds at the current rate (default: the engine's,
    /// `ltp::DEFAULT_PACING_BURST_TIME`, as on a real node).
    #[serde(default)]
    pub pacing_burst_ms: Option<f64>,
    /// Adaptive pacing (`ltp::SpanConfig::adaptive_rate` with its defaults): the span paces at a
    /// rate learnt from the peer's reports, never above `rate_bps` when that is not 0. A node
    /// turns it on for a span without a rate; off by default here, where spans pace at their
    /// link's rate.
    #[serde(default)]
    pub adaptive_rate: bool,
    /// Shortest sending time of an adaptive-pacing round in milliseconds
    /// (`ltp::AdaptiveRate::min_round_time`, a node's `adaptive_round_ms`; default: the engine's
    /// `ltp::pacing::MIN_ROUND_TIME`, which a node also uses towards every peer kind but HDTN).
    /// Only with `adaptive_rate = true`.
    #[serde(default)]
    pub adaptive_round_ms: Option<f64>,
    /// Copies of each signal segment.
    #[serde(default = "d_one")]
    pub signal_replication: u32,
    /// Checkpoint retransmissions before cancelling.
    #[serde(default = "d_retx")]
    pub max_checkpoint_retransmissions: u32,
    /// Report retransmissions before cancelling.
    #[serde(default = "d_retx")]
    pub max_report_retransmissions: u32,
    /// Retransmission cycles per session before cancelling.
    #[serde(default = "d_cycles")]
    pub max_retransmission_cycles: u32,
    /// Maximum claims per report segment.
    #[serde(default = "d_claims")]
    pub max_claims_per_report: usize,
    /// Intermediate checkpoints every this many red bytes of a block's first transmission
    /// (`ltp::SpanConfig::checkpoint_interval_bytes`; a node's `checkpoint_bytes`). 0 (the
    /// default here): one checkpoint at the end of each red part, as the seed papers' ION.
    #[serde(default)]
    pub checkpoint_interval_bytes: u64,
    /// Bundles aggregated into one LTP block at most (the node's `max_bundles_per_block`;
    /// aggregation also ends at 64 KiB or 1 ms). 1: every bundle in a block of its own; 0: no
    /// count limit.
    #[serde(default = "d_bundles_per_block")]
    pub max_bundles_per_block: usize,
}

fn d_mss() -> usize {
    1024
}
fn d_sessions() -> usize {
    16
}
fn d_imports() -> usize {
    64
}
fn d_margin() -> f64 {
    10.0
}
fn d_one() -> u32 {
    1
}
fn d_retx() -> u32 {
    10
}
fn d_cycles() -> u32 {
    100
}
fn d_claims() -> usize {
    20
}
fn d_bundles_per_block() -> usize {
    1
}

impl Default for LtpSection {
    fn default() -> Self {
        LtpSection {
            max_segment_size: d_mss(),
            max_export_sessions: d_sessions(),
            max_import_sessions: d_imports(),
            rto_ms: None,
            owlt_ms: None,
            margin_ms: d_margin(),
            rate_bps: None,
            pacing_burst_bytes: 0,
            pacing_burst_ms: None,
            adaptive_rate: false,
            adaptive_round_ms: None,
            signal_replication: 1,
            max_checkpoint_retransmissions: d_retx(),
            max_report_retransmissions: d_retx(),
            max_retransmission_cycles: d_cycles(),
            max_claims_per_report: d_claims(),
            checkpoint_interval_bytes: 0,
            max_bundles_per_block: d_bundles_per_block(),
        }
    }
}

/// `[node.processing]`: the host's modelled CPU and store.
///
/// Every received datagram waits `rx_latency_us` (a pipeline delay: kernel, UDP stack, thread hand-over; it does
/// not occupy the CPU), then waits in the receive queue for the node's single CPU, which it occupies for
/// `per_segment_us`. The receive queue holds at most `rx_queue_datagrams` datagrams (a socket buffer): a
/// datagram that finds it full is dropped and counted (`rx_queue_drops`), like a kernel socket-buffer drop.
/// Every received bundle occupies the CPU for `per_bundle_us`. With the agent, the bundles of one block are then
/// committed to the store in one transaction that takes `commit_us` (commits of a node run one at a time but do
/// not occupy the CPU: the time is I/O, e.g. an fsync); only then does the agent see them and does LTP release
/// the final report of a red block (`defer_final_report`, as on a real node).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessingSection {
    /// Pipeline delay per received datagram, microseconds.
    #[serde(default)]
    pub rx_latency_us: f64,
    /// CPU time per received datagram, microseconds.
    #[serde(default)]
    pub per_segment_us: f64,
    /// CPU time per received bundle, microseconds.
    #[serde(default)]
    pub per_bundle_us: f64,
    /// Store commit time per received block (agent layer), microseconds.
    #[serde(default)]
    pub commit_us: f64,
    /// Receive queue bound in datagrams (default: an 8 MiB socket buffer divided by the node's
    /// `ltp.max_segment_size`, see [`ProcessingSection::rx_queue_limit`]).
    #[serde(default)]
    pub rx_queue_datagrams: Option<usize>,
}

/// Socket receive buffer the default receive-queue bound models (bytes).
pub const DEFAULT_RX_BUFFER_BYTES: usize = 8 << 20;

/// Largest accepted `rx_queue_datagrams` (the queue keeps one timestamp per datagram).
pub const MAX_RX_QUEUE_DATAGRAMS: usize = 1 << 24;

impl ProcessingSection {
    /// The receive-queue bound in effect for a node whose segments are at most `max_segment_size` bytes:
    /// `rx_queue_datagrams`, or [`DEFAULT_RX_BUFFER_BYTES`] / `max_segment_size` (at least 1).
    pub fn rx_queue_limit(&self, max_segment_size: usize) -> usize {
        self.rx_queue_datagrams
            .unwrap_or(DEFAULT_RX_BUFFER_BYTES / max_segment_size.max(1))
            .clamp(1, MAX_RX_QUEUE_DATAGRAMS)
    }
}

/// `[[node.route]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSection {
    /// Destination node.
    pub dest: u64,
    /// Neighbour to hand the bundle to.
    pub via: u64,
}

/// `[[link]]`: a bidirectional link between nodes `a` and `b`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSection {
    /// Node at the forward direction's sending end.
    pub a: u64,
    /// Node at the forward direction's receiving end.
    pub b: u64,
    /// A → B (the channel crate's direction settings).
    #[serde(default)]
    pub forward: channel::DirectionConfig,
    /// B → A.
    #[serde(default, rename = "return")]
    pub ret: channel::DirectionConfig,
    /// Replace the forward loss model by a trace generated from a seed-000 preset (`"A"`, `"F"`, `"H"`) with the
    /// scenario seed.
    #[serde(default)]
    pub forward_trace_preset: Option<String>,
    /// Same for the return direction.
    #[serde(default)]
    pub return_trace_preset: Option<String>,
}

/// `[[contact]]`: node `from` may transmit to neighbour `to` during `[start_s, end_s)`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContactSection {
    /// Transmitting node.
    pub from: u64,
    /// Receiving neighbour.
    pub to: u64,
    /// Window start, seconds of simulated time.
    pub start_s: f64,
    /// Window end.
    pub end_s: f64,
    /// LTP pacing rate during the window (default: unchanged).
    #[serde(default)]
    pub rate_bps: Option<f64>,
}

/// Colour of the LTP blocks carrying a flow's bundles.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Colour {
    /// Reliable (red) LTP.
    #[default]
    Red,
    /// Unreliable (green) LTP.
    Green,
}

/// `[[traffic]]`: one DTNperf-style client on node `from` and its server on node `to`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrafficSection {
    /// Client node.
    pub from: u64,
    /// Server node.
    pub to: u64,
    /// Client service number (source endpoint `ipn:from.client_service`).
    #[serde(default = "d_client_service")]
    pub client_service: u64,
    /// Server service number (destination `ipn:to.server_service`).
    #[serde(default = "d_server_service")]
    pub server_service: u64,
    /// DTNperf window (bundles unacknowledged at most); exclusive with `interval_ms`.
    #[serde(default)]
    pub window: Option<u32>,
    /// Fixed series: one bundle every `interval_ms`; exclusive with `window`.
    #[serde(default)]
    pub interval_ms: Option<f64>,
    /// Stop generating after this many seconds (time mode).
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Stop after this many payload bytes (data mode).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Stop after this many bundles.
    #[serde(default)]
    pub bundles: Option<u64>,
    /// Payload bytes per bundle.
    pub bundle_size: usize,
    /// Bundle lifetime in seconds.
    #[serde(default = "d_lifetime")]
    pub lifetime_s: f64,
    /// Start time in seconds.
    #[serde(default)]
    pub start_s: f64,
    /// LTP colour of the data bundles.
    #[serde(default)]
    pub data_colour: Colour,
    /// LTP colour of the ACK bundles (seed 000 sends them green).
    #[serde(default = "d_green")]
    pub ack_colour: Colour,
}

fn d_client_service() -> u64 {
    2000
}
fn d_server_service() -> u64 {
    2001
}
fn d_lifetime() -> f64 {
    3600.0
}
fn d_green() -> Colour {
    Colour::Green
}

/// How a `[[cfdp]]` transfer's PDUs travel between the two entities.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum CfdpTransport {
    /// Straight over the scenario's `[[link]]` between the two nodes, one PDU per datagram (the channel models
    /// apply to each PDU by its length, as to LTP datagrams).
    #[default]
    Link,
    /// One PDU per bundle through the nodes' bundle layers (and so LTP), endpoint `ipn:NODE.service`.
    Bp,
}

impl CfdpTransport {
    /// The name used in scenario files and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            CfdpTransport::Link => "link",
            CfdpTransport::Bp => "bp",
        }
    }
}

/// Default CFDP service number of the `bp` transport (`ipn:N.64`, as `dtnkit cfdp --node`).
pub const DEFAULT_CFDP_SERVICE: u64 = 64;

/// Largest `segment_size` (file data bytes per PDU): the PDU data field length is 16 bits.
pub const MAX_CFDP_SEGMENT: usize = 65_000;

/// Largest `file_size` (the entities' `max_file_size`, 1 TiB).
pub const MAX_CFDP_FILE: u64 = 1 << 40;

/// `[[cfdp]]`: one file transfer from the CFDP entity of node `from` to the entity of node `to` (entity id = node
/// number). The source file is synthetic (`cfdp::MemFilestore::insert_synthetic`: content generated from the
/// scenario seed, no memory), named `cfdp-INDEX.bin` at both ends.
///
/// Put settings (`file_size`, `class`, `checksum`, `repeat`, `closure`, `start_s`) belong to this transfer.
/// Entity settings (segment size, NAK mode, timers, limits, rates, CRC, link signals) are the sending entity's
/// settings toward the receiver and the receiving entity's toward the sender: every transfer between the same
/// two nodes shares them, so values given by several transfers must agree (unset ones take the value given by
/// another transfer, else the default). `transport` and `service` are shared by the pair in both directions.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CfdpSection {
    /// Sending node (its entity id).
    pub from: u64,
    /// Receiving node.
    pub to: u64,
    /// `"link"` (default) or `"bp"`.
    #[serde(default)]
    pub transport: CfdpTransport,
    /// `bp` transport: service number of both entities' endpoints (default [`DEFAULT_CFDP_SERVICE`]).
    #[serde(default)]
    pub service: Option<u64>,
    /// `bp` transport: LTP colour of the bundles (default red).
    #[serde(default)]
    pub colour: Option<Colour>,
    /// `bp` transport: bundle lifetime in seconds (default 3600).
    #[serde(default)]
    pub lifetime_s: Option<f64>,
    /// File size in bytes.
    pub file_size: u64,
    /// File data bytes per File Data PDU (default 1024).
    #[serde(default)]
    pub segment_size: Option<usize>,
    /// 1 (unacknowledged) or 2 (acknowledged, default).
    #[serde(default = "d_class")]
    pub class: u8,
    /// Receiver's NAK mode: `"immediate"` (default), `"deferred"`, `"prompted"`, `"async"`.
    #[serde(default)]
    pub nak_mode: Option<String>,
    /// `"crc32c"` (default), `"crc32"`, `"proximity1"`, `"modular"`, `"null"`.
    #[serde(default = "d_checksum")]
    pub checksum: String,
    /// CFDP-repeat (class 1): every PDU sent this many times back to back (default 1).
    #[serde(default = "d_repeat")]
    pub repeat: u32,
    /// Class 1: ask the receiver for a Finished PDU.
    #[serde(default)]
    pub closure: bool,
    /// Put time, seconds of simulated time. With `relay_of`, the earliest put time: the put waits for the file.
    #[serde(default)]
    pub start_s: f64,
    /// CFDP store-and-forward: this transfer sends on the file that transfer `relay_of` (0-based index in the
    /// `[[cfdp]]` list, an earlier entry whose `to` is this entry's `from`) delivered, once it was delivered and
    /// verified. Its `file_size` must equal that transfer's.
    #[serde(default)]
    pub relay_of: Option<usize>,
    /// Positive ACK timer (EOF at the sender, Finished at the receiver), ms (default 2000).
    #[serde(default)]
    pub ack_timer_ms: Option<f64>,
    /// Positive ACK timer expirations before the fault (default 10).
    #[serde(default)]
    pub ack_limit: Option<u32>,
    /// NAK timer, ms (default 2000).
    #[serde(default)]
    pub nak_timer_ms: Option<f64>,
    /// NAK timer expirations without progress before the fault (default 15).
    #[serde(default)]
    pub nak_limit: Option<u32>,
    /// Inactivity timer, seconds (default 60).
    #[serde(default)]
    pub inactivity_s: Option<f64>,
    /// Class 1 receiver: check timer, ms (default 2000).
    #[serde(default)]
    pub check_timer_ms: Option<f64>,
    /// Class 1 receiver: check timer expirations before the fault (default 3).
    #[serde(default)]
    pub check_limit: Option<u32>,
    /// Class 2 receiver: Keep Alive interval, ms (default: none).
    #[serde(default)]
    pub keep_alive_ms: Option<f64>,
    /// Class 2 sender: a Prompt (NAK) after every this many first-pass bytes (prompted NAK mode).
    #[serde(default)]
    pub prompt_every_bytes: Option<u64>,
    /// Sender pacing toward the receiver, bit/s (default: the rate of the link direction toward the receiver,
    /// or toward the first hop with `bp`; 0 = unpaced).
    #[serde(default)]
    pub rate_bps: Option<f64>,
    /// Receiver pacing toward the sender (NAKs, ACKs, Finished), bit/s (default: the return direction's rate).
    #[serde(default)]
    pub return_rate_bps: Option<f64>,
    /// Token-bucket depth of the pacing, bytes (default: 2 ms at the rate, at least one PDU).
    #[serde(default)]
    pub pacing_burst_bytes: Option<usize>,
    /// Protect every PDU with the CRC-16.
    #[serde(default)]
    pub crc: Option<bool>,
    /// Tell the receiving entity (`Entity::set_link`) when the link direction toward the sender becomes
    /// available or unavailable (its availability schedule or Markov model): NAKs and other PDUs then wait for
    /// the return link and the receiver's timers freeze while it is down. Default: true in the async NAK mode.
    #[serde(default)]
    pub async_link_signal: Option<bool>,
}

fn d_class() -> u8 {
    2
}
fn d_checksum() -> String {
    "crc32c".into()
}
fn d_repeat() -> u32 {
    1
}

/// The checksum types a `[[cfdp]]` transfer may name.
pub fn cfdp_checksum(name: &str) -> Option<cfdp::pdu::ChecksumType> {
    use cfdp::pdu::ChecksumType as C;
    Some(match name {
        "modular" => C::Modular,
        "proximity1" => C::Proximity1,
        "crc32c" => C::Crc32c,
        "crc32" => C::Crc32,
        "null" => C::Null,
        _ => return None,
    })
}

impl CfdpSection {
    /// The receiver's NAK mode (validated).
    pub fn nak(&self) -> cfdp::NakMode {
        self.nak_mode
            .as_deref()
            .and_then(|m| m.parse().ok())
            .unwrap_or(cfdp::NakMode::Immediate)
    }

    /// Whether the receiving entity is told about the return direction's availability.
    pub fn link_signal(&self) -> bool {
        self.async_link_signal
            .unwrap_or(self.nak() == cfdp::NakMode::Asynchronous)
    }

    /// The `bp` service number.
    pub fn service_number(&self) -> u64 {
        self.service.unwrap_or(DEFAULT_CFDP_SERVICE)
    }

    /// File data bytes per PDU.
    pub fn segment(&self) -> usize {
        self.segment_size.unwrap_or(1024)
    }

    /// Entity settings this transfer gives explicitly, as (entity node, remote node, key, value, field):
    /// the sender's toward the receiver and the receiver's toward the sender.
    fn entity_settings(&self) -> Vec<(u64, u64, &'static str, String, &'static str)> {
        let (s, r) = ((self.from, self.to), (self.to, self.from));
        let mut v = Vec::new();
        let mut put = |who: (u64, u64), key: &'static str, val: Option<String>, field| {
            if let Some(val) = val {
                v.push((who.0, who.1, key, val, field));
            }
        };
        let f = |x: Option<f64>| x.map(|x| x.to_string());
        let u = |x: Option<u32>| x.map(|x| x.to_string());
        put(
            s,
            "segment",
            self.segment_size.map(|x| x.to_string()),
            "segment_size",
        );
        put(s, "rate", f(self.rate_bps), "rate_bps");
        put(r, "rate", f(self.return_rate_bps), "return_rate_bps");
        put(r, "nak_mode", self.nak_mode.clone(), "nak_mode");
        put(r, "nak_timer", f(self.nak_timer_ms), "nak_timer_ms");
        put(r, "nak_limit", u(self.nak_limit), "nak_limit");
        put(r, "check_timer", f(self.check_timer_ms), "check_timer_ms");
        put(r, "check_limit", u(self.check_limit), "check_limit");
        put(r, "keep_alive", f(self.keep_alive_ms), "keep_alive_ms");
        put(
            s,
            "prompt",
            self.prompt_every_bytes.map(|x| x.to_string()),
            "prompt_every_bytes",
        );
        put(
            r,
            "link_signal",
            self.async_link_signal.map(|x| x.to_string()),
            "async_link_signal",
        );
        for who in [s, r] {
            put(
                who,
                "burst",
                self.pacing_burst_bytes.map(|x| x.to_string()),
                "pacing_burst_bytes",
            );
            put(who, "ack_timer", f(self.ack_timer_ms), "ack_timer_ms");
            put(who, "ack_limit", u(self.ack_limit), "ack_limit");
            put(who, "inactivity", f(self.inactivity_s), "inactivity_s");
            put(who, "crc", self.crc.map(|x| x.to_string()), "crc");
            put(
                who,
                "colour",
                self.colour.map(|x| format!("{x:?}")),
                "colour",
            );
            put(who, "lifetime", f(self.lifetime_s), "lifetime_s");
        }
        v
    }
}

/// `[log]`: per-node output files, as path patterns relative to the scenario file in which `{node}` stands for
/// the node number (absent = not written). Each node writes its own files, exactly as a real node does.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    /// LTP segment log of each node (`docs/ltp-segment-log.md`), e.g. `"logs/segments-{node}.csv"`.
    #[serde(default)]
    pub segment_csv: Option<String>,
    /// Bundle event log of each node (`docs/bundle-event-log.md`), e.g. `"logs/bundles-{node}.csv"`.
    #[serde(default)]
    pub bundle_csv: Option<String>,
    /// Route decision log of each node's agent (`docs/route-log.md`: next hop, CGR route and its contacts,
    /// no-route searches, released bookings), e.g. `"logs/routes-{node}.csv"`. Agent layer only.
    #[serde(default)]
    pub route_csv: Option<String>,
}

/// The placeholder a log path pattern must contain.
pub const NODE_PLACEHOLDER: &str = "{node}";

impl LogSection {
    /// The file a pattern names for `node`, resolved against `base_dir`.
    pub fn path_for(pattern: &str, base_dir: &Path, node: u64) -> PathBuf {
        base_dir.join(pattern.replace(NODE_PLACEHOLDER, &node.to_string()))
    }

    fn validate(&self) -> Result<(), ScenarioError> {
        for (field, p) in [
            ("log.segment_csv", &self.segment_csv),
            ("log.bundle_csv", &self.bundle_csv),
            ("log.route_csv", &self.route_csv),
        ] {
            let Some(p) = p else { continue };
            let rest = p.replace(NODE_PLACEHOLDER, "");
            if !p.contains(NODE_PLACEHOLDER) || rest.contains(['{', '}']) {
                return Err(invalid(
                    field,
                    format!("{p:?}"),
                    "a path pattern containing {node} (replaced by the node number; one file per node, as \
                     real nodes write), e.g. \"logs/segments-{node}.csv\", and no other braces",
                ));
            }
        }
        if let Some(r) = &self.route_csv {
            if Some(r) == self.segment_csv.as_ref() || Some(r) == self.bundle_csv.as_ref() {
                return Err(invalid(
                    "log.route_csv",
                    format!("{r:?}"),
                    "a pattern other than log.segment_csv and log.bundle_csv",
                ));
            }
        }
        if let (Some(s), Some(b)) = (&self.segment_csv, &self.bundle_csv) {
            if s == b {
                return Err(invalid(
                    "log.bundle_csv",
                    format!("{b:?}"),
                    "a pattern other than log.segment_csv",
                ));
            }
        }
        Ok(())
    }
}

impl Scenario {
    /// Reads and validates a scenario file; relative paths in it are resolved against its directory.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Scenario::from_toml_str(&text, &path.display().to_string(), &base)
    }

    /// Parses and validates scenario text; `file` names it in errors.
    pub fn from_toml_str(
        text: &str,
        file: &str,
        base_dir: &Path,
    ) -> Result<Scenario, ScenarioError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        s.base_dir = base_dir.to_path_buf();
        s.validate()?;
        Ok(s)
    }

    /// Checks cross-references and value ranges.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let d = self.sim.duration_s;
        if !(d.is_finite() && d > 0.0 && d <= 1e7) {
            return Err(invalid(
                "sim.duration_s",
                d,
                "a duration in seconds in (0, 1e7]",
            ));
        }
        if self.nodes.is_empty() {
            return Err(invalid("node", "[]", "at least one [[node]]"));
        }
        self.log.validate()?;
        let known = |n: u64| self.nodes.iter().any(|x| x.number == n);
        for (i, n) in self.nodes.iter().enumerate() {
            if n.number == 0 {
                return Err(invalid(
                    format!("node[{i}].number"),
                    0,
                    "an ipn node number > 0",
                ));
            }
            if self.nodes.iter().filter(|x| x.number == n.number).count() > 1 {
                return Err(invalid(
                    format!("node[{i}].number"),
                    n.number,
                    "a number used by one [[node]] only",
                ));
            }
            let p = &n.processing;
            for (name, v) in [
                ("rx_latency_us", p.rx_latency_us),
                ("per_segment_us", p.per_segment_us),
                ("per_bundle_us", p.per_bundle_us),
                ("commit_us", p.commit_us),
            ] {
                if !(v.is_finite() && (0.0..=1e9).contains(&v)) {
                    return Err(invalid(
                        format!("node[{i}].processing.{name}"),
                        v,
                        "microseconds in [0, 1e9]",
                    ));
                }
            }
            if n.store.quota_bytes == Some(0) {
                return Err(invalid(
                    format!("node[{i}].store.quota_bytes"),
                    0,
                    "a store quota of at least 1 byte",
                ));
            }
            if let Some(q) = p.rx_queue_datagrams {
                if !(1..=MAX_RX_QUEUE_DATAGRAMS).contains(&q) {
                    return Err(invalid(
                        format!("node[{i}].processing.rx_queue_datagrams"),
                        q,
                        "a queue bound in datagrams in [1, 16777216]",
                    ));
                }
            }
            if let Some(f) = &n.fec {
                let checked = f
                    .to_config(0, 0)
                    .and_then(|c| c.validate(fec::symbol_bytes(n.ltp.max_segment_size)));
                if let Err(e) = checked {
                    return Err(invalid(
                        format!("node[{i}].fec.{}", e.field),
                        e.value,
                        &e.expected,
                    ));
                }
                if n.ltp.adaptive_rate {
                    // As on a node: the FEC layer paces at the span's configured rate.
                    return Err(invalid(
                        format!("node[{i}].ltp.adaptive_rate"),
                        true,
                        "false on a node with [node.fec] (the FEC layer paces at the span's rate)",
                    ));
                }
            }
            let l = &n.ltp;
            if let (Some(r), false) = (l.adaptive_round_ms, l.adaptive_rate) {
                return Err(invalid(
                    format!("node[{i}].ltp.adaptive_round_ms"),
                    r,
                    "unset unless node.ltp.adaptive_rate = true (it sets the adaptive pacer's round)",
                ));
            }
            if l.max_export_sessions == 0 {
                return Err(invalid(
                    format!("node[{i}].ltp.max_export_sessions"),
                    0,
                    "at least 1",
                ));
            }
            for (name, v) in [
                ("rto_ms", l.rto_ms),
                ("owlt_ms", l.owlt_ms),
                ("margin_ms", Some(l.margin_ms)),
                ("adaptive_round_ms", l.adaptive_round_ms),
            ] {
                if let Some(v) = v {
                    if !(v.is_finite() && (0.0..=1e9).contains(&v)) {
                        return Err(invalid(
                            format!("node[{i}].ltp.{name}"),
                            v,
                            "milliseconds in [0, 1e9]",
                        ));
                    }
                }
            }
            if let Some(r) = l.rate_bps {
                if !(r.is_finite() && (0.0..=1e15).contains(&r)) {
                    return Err(invalid(
                        format!("node[{i}].ltp.rate_bps"),
                        r,
                        "bit/s in [0, 1e15]",
                    ));
                }
            }
            for (k, r) in n.routes.iter().enumerate() {
                if !known(r.dest) {
                    return Err(invalid(
                        format!("node[{i}].route[{k}].dest"),
                        r.dest,
                        "the number of a [[node]]",
                    ));
                }
                let tunnel = n.bibe_peers.iter().any(|p| p.peer == r.via);
                if !tunnel && !self.adjacent(n.number, r.via) {
                    return Err(invalid(
                        format!("node[{i}].route[{k}].via"),
                        r.via,
                        "a neighbour joined to this node by a [[link]], or a [[node.bibe_peer]] tunnel",
                    ));
                }
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            if !known(l.a) {
                return Err(invalid(
                    format!("link[{i}].a"),
                    l.a,
                    "the number of a [[node]]",
                ));
            }
            if !known(l.b) || l.b == l.a {
                return Err(invalid(
                    format!("link[{i}].b"),
                    l.b,
                    "the number of another [[node]]",
                ));
            }
            if self
                .links
                .iter()
                .take(i)
                .any(|o| (o.a, o.b) == (l.a, l.b) || (o.a, o.b) == (l.b, l.a))
            {
                return Err(invalid(
                    format!("link[{i}]"),
                    format!("{}-{}", l.a, l.b),
                    "one link per node pair",
                ));
            }
            for (name, p) in [
                ("forward_trace_preset", &l.forward_trace_preset),
                ("return_trace_preset", &l.return_trace_preset),
            ] {
                if let Some(p) = p {
                    if channel::gen::Preset::from_name(p).is_none() {
                        return Err(invalid(
                            format!("link[{i}].{name}"),
                            format!("{p:?}"),
                            "\"A\", \"F\" or \"H\"",
                        ));
                    }
                }
            }
        }
        for (i, c) in self.contacts.iter().enumerate() {
            if !self.adjacent(c.from, c.to) {
                return Err(invalid(
                    format!("contact[{i}]"),
                    format!("{} -> {}", c.from, c.to),
                    "two nodes joined by a [[link]]",
                ));
            }
            if !(c.start_s.is_finite()
                && c.start_s >= 0.0
                && c.end_s.is_finite()
                && c.end_s > c.start_s)
            {
                return Err(invalid(
                    format!("contact[{i}]"),
                    format!("[{}, {})", c.start_s, c.end_s),
                    "0 <= start_s < end_s",
                ));
            }
            if let Some(r) = c.rate_bps {
                if !(r.is_finite() && (0.0..=1e15).contains(&r)) {
                    return Err(invalid(
                        format!("contact[{i}].rate_bps"),
                        r,
                        "bit/s in [0, 1e15]",
                    ));
                }
            }
        }
        for (i, t) in self.traffic.iter().enumerate() {
            let f = |name: &str| format!("traffic[{i}].{name}");
            if !known(t.from) {
                return Err(invalid(f("from"), t.from, "the number of a [[node]]"));
            }
            if !known(t.to) || t.to == t.from {
                return Err(invalid(f("to"), t.to, "the number of another [[node]]"));
            }
            match (t.window, t.interval_ms) {
                (Some(0), _) => {
                    return Err(invalid(f("window"), 0, "a window of at least 1 bundle"))
                }
                (Some(_), None) => {}
                (None, Some(ms)) if ms.is_finite() && ms > 0.0 => {}
                (None, Some(ms)) => {
                    return Err(invalid(f("interval_ms"), ms, "a positive interval in ms"))
                }
                (w, iv) => {
                    return Err(invalid(
                        f("window"),
                        format!("{w:?} with interval_ms {iv:?}"),
                        "exactly one of `window` and `interval_ms`",
                    ))
                }
            }
            let stops = [
                t.duration_s.is_some(),
                t.bytes.is_some(),
                t.bundles.is_some(),
            ];
            if stops.iter().filter(|&&x| x).count() > 1 {
                return Err(invalid(
                    f("duration_s"),
                    "several stop rules",
                    "at most one of duration_s, bytes, bundles",
                ));
            }
            if let Some(d) = t.duration_s {
                if !(d.is_finite() && d > 0.0) {
                    return Err(invalid(
                        f("duration_s"),
                        d,
                        "a positive duration in seconds",
                    ));
                }
            }
            if t.bundle_size < traffic::payload::DATA_HEADER_LEN || t.bundle_size > 1 << 30 {
                return Err(invalid(
                    f("bundle_size"),
                    t.bundle_size,
                    "a payload size in bytes between 22 (the DTNperf header) and 1 GiB",
                ));
            }
            if !(t.lifetime_s.is_finite() && t.lifetime_s > 0.0) {
                return Err(invalid(
                    f("lifetime_s"),
                    t.lifetime_s,
                    "a positive lifetime in seconds",
                ));
            }
            if !(t.start_s.is_finite() && t.start_s >= 0.0) {
                return Err(invalid(
                    f("start_s"),
                    t.start_s,
                    "a start time in seconds >= 0",
                ));
            }
            if self.traffic.iter().take(i).any(|o| {
                (o.from == t.from && o.client_service == t.client_service)
                    || (o.to == t.to && o.server_service == t.server_service)
            }) {
                return Err(invalid(
                    f("client_service"),
                    t.client_service,
                    "endpoints not used by another [[traffic]]",
                ));
            }
        }
        self.validate_bibe()?;
        self.validate_cfdp()
    }

    /// Checks every node's `[node.bibe]` and `[[node.bibe_peer]]` (module `bibe_sim`).
    fn validate_bibe(&self) -> Result<(), ScenarioError> {
        let all: Vec<u64> = self.nodes.iter().map(|n| n.number).collect();
        let agent_layer = self.sim.bundle_layer == BundleLayer::Agent;
        for (i, n) in self.nodes.iter().enumerate() {
            let linked: Vec<u64> = self
                .links
                .iter()
                .filter_map(|l| match (l.a == n.number, l.b == n.number) {
                    (true, _) => Some(l.b),
                    (_, true) => Some(l.a),
                    _ => None,
                })
                .collect();
            crate::bibe_sim::validate(i, n, &all, &linked, agent_layer)?;
        }
        Ok(())
    }

    /// Checks the `[[cfdp]]` transfers.
    fn validate_cfdp(&self) -> Result<(), ScenarioError> {
        let known = |n: u64| self.nodes.iter().any(|x| x.number == n);
        for (i, c) in self.cfdp.iter().enumerate() {
            let f = |name: &str| format!("cfdp[{i}].{name}");
            if !known(c.from) {
                return Err(invalid(f("from"), c.from, "the number of a [[node]]"));
            }
            if !known(c.to) || c.to == c.from {
                return Err(invalid(f("to"), c.to, "the number of another [[node]]"));
            }
            if let Some(k) = c.relay_of {
                let Some(src) = self.cfdp.get(k).filter(|_| k < i) else {
                    return Err(invalid(
                        f("relay_of"),
                        k,
                        &format!("the index of an earlier [[cfdp]] entry (0..{i})"),
                    ));
                };
                if src.to != c.from {
                    return Err(invalid(
                        f("relay_of"),
                        k,
                        &format!(
                            "a transfer delivering to node {} (cfdp[{k}] delivers to node {})",
                            c.from, src.to
                        ),
                    ));
                }
                if src.file_size != c.file_size {
                    return Err(invalid(
                        f("file_size"),
                        c.file_size,
                        &format!(
                            "{} as cfdp[{k}], whose file this transfer relays",
                            src.file_size
                        ),
                    ));
                }
            }
            let adjacent = self.adjacent(c.from, c.to);
            if c.transport == CfdpTransport::Link && !adjacent {
                return Err(invalid(
                    f("transport"),
                    "\"link\"",
                    &format!(
                        "nodes {} and {} joined by a [[link]] (or transport = \"bp\" to go through the bundle layer)",
                        c.from, c.to
                    ),
                ));
            }
            if c.transport == CfdpTransport::Link {
                for (name, set) in [
                    ("service", c.service.is_some()),
                    ("colour", c.colour.is_some()),
                    ("lifetime_s", c.lifetime_s.is_some()),
                ] {
                    if set {
                        return Err(invalid(
                            f(name),
                            "set",
                            "no value with transport = \"link\" (a bundle-layer setting of transport = \"bp\")",
                        ));
                    }
                }
            }
            if let Some(svc) = c.service {
                if svc == 0 {
                    return Err(invalid(f("service"), 0, "a service number > 0"));
                }
            }
            if c.transport == CfdpTransport::Bp {
                let svc = c.service_number();
                for node in [c.from, c.to] {
                    if let Some(k) = self.traffic.iter().position(|t| {
                        (t.from == node && t.client_service == svc)
                            || (t.to == node && t.server_service == svc)
                    }) {
                        return Err(invalid(
                            f("service"),
                            svc,
                            &format!("a service not used by traffic[{k}] on node {node}"),
                        ));
                    }
                }
            }
            if let Some(l) = c.lifetime_s {
                if !(l.is_finite() && l > 0.0) {
                    return Err(invalid(
                        f("lifetime_s"),
                        l,
                        "a positive lifetime in seconds",
                    ));
                }
            }
            if !(1..=MAX_CFDP_FILE).contains(&c.file_size) {
                return Err(invalid(
                    f("file_size"),
                    c.file_size,
                    "a file size in bytes in [1, 2^40]",
                ));
            }
            if let Some(s) = c.segment_size {
                if !(1..=MAX_CFDP_SEGMENT).contains(&s) {
                    return Err(invalid(
                        f("segment_size"),
                        s,
                        "file data bytes per PDU in [1, 65000] (the PDU length field is 16 bits)",
                    ));
                }
            }
            if !(c.class == 1 || c.class == 2) {
                return Err(invalid(
                    f("class"),
                    c.class,
                    "1 (unacknowledged) or 2 (acknowledged)",
                ));
            }
            if let Some(m) = &c.nak_mode {
                if !["immediate", "deferred", "prompted", "async"].contains(&m.as_str()) {
                    return Err(invalid(
                        f("nak_mode"),
                        format!("{m:?}"),
                        "\"immediate\", \"deferred\", \"prompted\" or \"async\"",
                    ));
                }
            }
            if cfdp_checksum(&c.checksum).is_none() {
                return Err(invalid(
                    f("checksum"),
                    format!("{:?}", c.checksum),
                    "\"crc32c\", \"crc32\", \"proximity1\", \"modular\" or \"null\"",
                ));
            }
            if c.repeat == 0 || (c.repeat > 1 && c.class != 1) {
                return Err(invalid(
                    f("repeat"),
                    c.repeat,
                    "1, or more copies of each PDU with class = 1 (CFDP-repeat)",
                ));
            }
            if c.repeat > 1000 {
                return Err(invalid(f("repeat"), c.repeat, "at most 1000 copies"));
            }
            if c.closure && c.class != 1 {
                return Err(invalid(
                    f("closure"),
                    true,
                    "closure only with class = 1 (class 2 always ends with Finished)",
                ));
            }
            if !(c.start_s.is_finite() && c.start_s >= 0.0) {
                return Err(invalid(
                    f("start_s"),
                    c.start_s,
                    "a start time in seconds >= 0",
                ));
            }
            for (name, v) in [
                ("ack_timer_ms", c.ack_timer_ms),
                ("nak_timer_ms", c.nak_timer_ms),
                ("check_timer_ms", c.check_timer_ms),
                ("keep_alive_ms", c.keep_alive_ms),
                ("inactivity_s", c.inactivity_s.map(|s| s * 1e3)),
            ] {
                if let Some(v) = v {
                    if !(v.is_finite() && v > 0.0 && v <= 1e12) {
                        let shown = if name == "inactivity_s" { v / 1e3 } else { v };
                        return Err(invalid(
                            f(name),
                            shown,
                            "a positive duration (at most 1e9 s)",
                        ));
                    }
                }
            }
            for (name, v) in [
                ("ack_limit", c.ack_limit),
                ("nak_limit", c.nak_limit),
                ("check_limit", c.check_limit),
            ] {
                if v == Some(0) {
                    return Err(invalid(f(name), 0, "at least 1 expiration"));
                }
            }
            if c.prompt_every_bytes == Some(0) {
                return Err(invalid(f("prompt_every_bytes"), 0, "at least 1 byte"));
            }
            for (name, v) in [
                ("rate_bps", c.rate_bps),
                ("return_rate_bps", c.return_rate_bps),
            ] {
                if let Some(r) = v {
                    if !(r.is_finite() && (0.0..=1e15).contains(&r)) {
                        return Err(invalid(f(name), r, "bit/s in [0, 1e15] (0 = unpaced)"));
                    }
                }
            }
            if c.pacing_burst_bytes == Some(0) {
                return Err(invalid(
                    f("pacing_burst_bytes"),
                    0,
                    "a token-bucket depth of at least 1 byte",
                ));
            }
            // The signal follows the direction the receiver's PDUs leave by: toward the sender, or with `bp`
            // toward the first hop of its route to the sender.
            let hop = match c.transport {
                CfdpTransport::Link => Some(c.from),
                CfdpTransport::Bp => self
                    .nodes
                    .iter()
                    .find(|n| n.number == c.to)
                    .and_then(|n| n.routes.iter().find(|r| r.dest == c.from).map(|r| r.via))
                    .or(adjacent.then_some(c.from)),
            };
            if c.async_link_signal == Some(true) && !hop.is_some_and(|h| self.adjacent(c.to, h)) {
                return Err(invalid(
                    f("async_link_signal"),
                    true,
                    &format!(
                        "nodes {} and {} joined by a [[link]], or with transport = \"bp\" a route from {} whose first hop is a neighbour (the signal follows the availability of the direction the receiver sends by)",
                        c.from, c.to, c.to
                    ),
                ));
            }
            // The pair's transport and service, in both directions.
            for (k, o) in self.cfdp.iter().enumerate().take(i) {
                if (o.from, o.to) != (c.from, c.to) && (o.from, o.to) != (c.to, c.from) {
                    continue;
                }
                if o.transport != c.transport {
                    return Err(invalid(
                        f("transport"),
                        format!("{:?}", c.transport.as_str()),
                        &format!(
                            "{:?} as in cfdp[{k}] (the transfers between two entities share one transport)",
                            o.transport.as_str()
                        ),
                    ));
                }
                if o.transport == CfdpTransport::Bp && o.service_number() != c.service_number() {
                    return Err(invalid(
                        f("service"),
                        c.service_number(),
                        &format!(
                            "{} as in cfdp[{k}] (the transfers between two entities share one endpoint)",
                            o.service_number()
                        ),
                    ));
                }
            }
        }
        // Entity settings given by several transfers must agree.
        let mut seen: Vec<(u64, u64, &'static str, String, usize)> = Vec::new();
        for (i, c) in self.cfdp.iter().enumerate() {
            for (node, remote, key, value, field) in c.entity_settings() {
                if let Some((.., v, k)) = seen
                    .iter()
                    .find(|(n, r, kk, ..)| (*n, *r, *kk) == (node, remote, key))
                {
                    if *v != value {
                        return Err(invalid(
                            format!("cfdp[{i}].{field}"),
                            &value,
                            &format!(
                                "{v} as given by cfdp[{k}]: entity {node}'s settings toward entity {remote} are \
                                 shared by every transfer between them"
                            ),
                        ));
                    }
                } else {
                    seen.push((node, remote, key, value, i));
                }
            }
        }
        Ok(())
    }

    /// True if a link joins `a` and `b`.
    pub fn adjacent(&self, a: u64, b: u64) -> bool {
        self.links
            .iter()
            .any(|l| (l.a, l.b) == (a, b) || (l.a, l.b) == (b, a))
    }

    /// Simulated duration.
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.sim.duration_s)
    }
}

/// Seconds (validated finite, non-negative) to a duration.
pub(crate) fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// Milliseconds to a duration.
pub(crate) fn millis(ms: f64) -> Duration {
    secs(ms / 1e3)
}

#[cfg(test)]
mod tests {
    use bp::contact_plan::time::parse_absolute_dtn_ms;

    /// The default epoch is what its comment and docs/sim.md say (and is not 2026-01-01).
    #[test]
    fn default_epoch_is_2025_12_31() {
        assert_eq!(
            Some(super::default_epoch()),
            parse_absolute_dtn_ms("2025/12/31-00:00:00")
        );
        assert_eq!(
            parse_absolute_dtn_ms("2026/01/01-00:00:00"),
            Some(820_540_800_000)
        );
    }
}
