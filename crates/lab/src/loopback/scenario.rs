//! The loopback scenario file (the base scenario of `dtnkit bench --mode loopback`, docs/bench.md): which nodes,
//! which convergence layer, what to send, and the node settings the experiments sweep. Unknown keys are errors,
//! and every check names the field, the value and what was expected.

use serde::Deserialize;
use toml::Value;

use crate::ipnet::SeedSection;
use crate::LabError;

/// Convergence layer of every hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cla {
    /// TCPCLv4 (RFC 9174).
    Tcpcl,
    /// LTP over UDP.
    Ltp,
    /// UDPCL (one bundle per datagram; no acknowledgement).
    Udpcl,
}

/// Where the node processes and the application threads may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Affinity {
    /// Wherever the kernel's scheduler puts them.
    #[default]
    None,
    /// Every node process (all its threads) and the sending and receiving application threads on CPU 0, as
    /// seed 002 ran ION with `taskset`.
    SingleCore,
}

/// How the nodes are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Node 1 → 2 → … → N; the stream goes from node 1 to node N.
    #[default]
    Chain,
    /// Five nodes around node 3 (seed 002's LP-5): stream 1 goes 1 → 3 → 2, stream 2 goes 4 → 3 → 5.
    Star,
}

/// `[chain]`: the nodes and how they are joined.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainSection {
    /// Number of nodes, 2 to 5.
    #[serde(default = "two")]
    pub nodes: usize,
    /// Convergence layer of every hop.
    #[serde(default = "tcpcl")]
    pub cla: Cla,
    /// Chain or star.
    #[serde(default)]
    pub topology: Topology,
    /// Concurrent sender/receiver pairs: 1, or 2 with `topology = "star"`.
    #[serde(default = "one")]
    pub streams: usize,
    /// CPU placement.
    #[serde(default)]
    pub affinity: Affinity,
}

fn two() -> usize {
    2
}
fn one() -> usize {
    1
}
fn tcpcl() -> Cla {
    Cla::Tcpcl
}

impl Default for ChainSection {
    fn default() -> Self {
        ChainSection {
            nodes: 2,
            cla: Cla::Tcpcl,
            topology: Topology::Chain,
            streams: 1,
            affinity: Affinity::None,
        }
    }
}

/// What moves the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Bundles of `bundle_bytes` submitted by an application thread.
    #[default]
    Bp,
    /// One CFDP class-2 put of `bytes` over BP, one File Data PDU of `bundle_bytes` per bundle.
    Cfdp,
}

/// `[transfer]`: what each stream sends.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferSection {
    /// Bundles from an application, or a CFDP put.
    #[serde(default)]
    pub method: Method,
    /// Payload bytes per bundle.
    pub bundle_bytes: usize,
    /// Bytes per stream (rounded up to whole bundles; the last bundle is shorter). Exactly one of `bytes` and
    /// `duration_s`.
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Submit bundles for this long, then wait for the last of them.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Bundles submitted and not yet answered (stored) by the source node.
    #[serde(default = "d_window")]
    pub window: usize,
    /// Payload bytes submitted and not yet delivered at the destination (0 = no limit): keeps the source's
    /// store from growing without bound when the path is slower than the source's store. At least one bundle
    /// is always in flight.
    #[serde(default = "d_in_flight")]
    pub in_flight_bytes: u64,
    /// Give up after this long: the run ends, not completed, with what arrived.
    #[serde(default = "d_limit")]
    pub time_limit_s: f64,
    /// After its sender finished, a stream ends when nothing arrived for this long (UDPCL loses bundles).
    #[serde(default = "d_idle")]
    pub idle_s: f64,
}

fn d_window() -> usize {
    64
}
fn d_in_flight() -> u64 {
    256 << 20
}
fn d_limit() -> f64 {
    60.0
}
fn d_idle() -> f64 {
    3.0
}

/// `[ltp]`: every span.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LtpSection {
    /// Bytes per LTP segment (`max_segment_size`).
    #[serde(default = "d_segment")]
    pub segment_bytes: usize,
    /// Concurrent export sessions per span.
    #[serde(default = "d_sessions")]
    pub max_sessions: usize,
    /// Bundle bytes per block (default: one bundle, at least 64 KiB).
    #[serde(default)]
    pub aggregation_bytes: Option<u64>,
    /// Retransmission timeout.
    #[serde(default = "d_rto")]
    pub rto_ms: f64,
    /// `[ltp] socket_buffer_bytes` (node default 8 MiB).
    #[serde(default)]
    pub socket_buffer_bytes: Option<u64>,
}

fn d_segment() -> usize {
    1400
}
fn d_sessions() -> usize {
    64
}
fn d_rto() -> f64 {
    500.0
}

impl Default for LtpSection {
    fn default() -> Self {
        LtpSection {
            segment_bytes: d_segment(),
            max_sessions: d_sessions(),
            aggregation_bytes: None,
            rto_ms: d_rto(),
            socket_buffer_bytes: None,
        }
    }
}

/// `[tcpcl]`: every node's TCPCL settings (node defaults when absent).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpclSection {
    /// Largest XFER_SEGMENT sent.
    #[serde(default)]
    pub max_segment_size: Option<u64>,
    /// SO_SNDBUF / SO_RCVBUF of the sessions (the closest analogue of ION's TCPCLA buffer).
    #[serde(default)]
    pub socket_buffer_bytes: Option<u64>,
}

/// `[udpcl]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpclSection {
    /// SO_SNDBUF / SO_RCVBUF of the UDPCL sockets (node default 4 MiB).
    #[serde(default)]
    pub socket_buffer_bytes: Option<u64>,
}

/// `[cfdp]`: the put of `transfer.method = "cfdp"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CfdpSection {
    /// `dtnkit cfdp put --checksum`: modular, proximity1, crc32c, crc32 or null.
    #[serde(default = "d_checksum")]
    pub checksum: String,
}

fn d_checksum() -> String {
    "null".into()
}

impl Default for CfdpSection {
    fn default() -> Self {
        CfdpSection {
            checksum: d_checksum(),
        }
    }
}

/// Checksums `dtnkit cfdp put` offers.
const CHECKSUMS: [&str; 5] = ["modular", "proximity1", "crc32c", "crc32", "null"];

/// `[store]`: every node's bundle store.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSection {
    /// fsync every commit.
    #[serde(default)]
    pub durable: bool,
    /// Quota of each node's store.
    #[serde(default = "d_quota")]
    pub quota_bytes: u64,
    /// `[store] hot_cache_mb`: large bundles kept in memory after storing (node default 32 MiB).
    #[serde(default)]
    pub hot_cache_mb: Option<u64>,
    /// `[ltp] window_bytes`: bundle bytes each node hands to its convergence layers and has not yet seen
    /// delivered (every layer, not only LTP; node default 32 to 64 MiB, which admits one 50 MB bundle at a time).
    #[serde(default)]
    pub window_bytes: Option<u64>,
}

fn d_quota() -> u64 {
    4 << 30
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            durable: false,
            quota_bytes: d_quota(),
            hot_cache_mb: None,
            window_bytes: None,
        }
    }
}

/// A loopback scenario.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopbackScenario {
    /// The bench sets `sim.seed` per repetition; nothing here is random, so it only names the repetition.
    #[serde(default)]
    pub sim: SeedSection,
    /// Nodes and layout.
    #[serde(default)]
    pub chain: ChainSection,
    /// What to send.
    pub transfer: TransferSection,
    /// LTP settings.
    #[serde(default)]
    pub ltp: LtpSection,
    /// TCPCL settings.
    #[serde(default)]
    pub tcpcl: TcpclSection,
    /// UDPCL settings.
    #[serde(default)]
    pub udpcl: UdpclSection,
    /// Store settings.
    #[serde(default)]
    pub store: StoreSection,
    /// CFDP settings.
    #[serde(default)]
    pub cfdp: CfdpSection,
}

/// Largest bundle payload a loopback run sends: what one send request of the application protocol can carry
/// (`client::proto::MAX_FRAME` less room for the request's other fields).
pub const MAX_BUNDLE_BYTES: usize = 64 << 20;

impl LoopbackScenario {
    /// Parses a scenario file's text (`name` names it in errors).
    pub fn from_toml_str(text: &str, name: &str) -> Result<LoopbackScenario, LabError> {
        let doc: Value = toml::from_str(text)
            .map_err(|e: toml::de::Error| LabError::Scenario(format!("{name}: {e}")))?;
        LoopbackScenario::from_value(&doc, name)
    }

    /// Parses and checks a scenario document; errors name the field.
    pub fn from_value(doc: &Value, name: &str) -> Result<LoopbackScenario, LabError> {
        let s: LoopbackScenario = doc
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| LabError::Scenario(format!("{name}: {e}")))?;
        s.check(name)?;
        Ok(s)
    }

    fn check(&self, name: &str) -> Result<(), LabError> {
        let bad = |f: &str, v: String, e: &str| {
            Err(LabError::Scenario(format!(
                "{name}: {f} = {v}: expected {e}"
            )))
        };
        let c = &self.chain;
        if !(2..=5).contains(&c.nodes) {
            return bad("chain.nodes", c.nodes.to_string(), "2 to 5 nodes");
        }
        if !(1..=2).contains(&c.streams) {
            return bad("chain.streams", c.streams.to_string(), "1 or 2");
        }
        if c.topology == Topology::Star && c.nodes != 5 {
            return bad(
                "chain.nodes",
                c.nodes.to_string(),
                "5 with topology = \"star\" (nodes 1 and 4 send through node 3 to nodes 2 and 5)",
            );
        }
        if c.streams == 2 && c.topology != Topology::Star {
            return bad(
                "chain.streams",
                "2".into(),
                "1 with topology = \"chain\" (two streams need topology = \"star\" and 5 nodes)",
            );
        }
        let t = &self.transfer;
        if t.bundle_bytes == 0 || t.bundle_bytes > MAX_BUNDLE_BYTES {
            return bad(
                "transfer.bundle_bytes",
                t.bundle_bytes.to_string(),
                &format!("1 to {MAX_BUNDLE_BYTES} bytes"),
            );
        }
        match (t.bytes, t.duration_s) {
            (Some(0), _) => return bad("transfer.bytes", "0".into(), "bytes > 0"),
            (Some(_), Some(_)) | (None, None) => {
                return bad(
                    "transfer",
                    format!("bytes = {:?}, duration_s = {:?}", t.bytes, t.duration_s),
                    "exactly one of bytes and duration_s",
                )
            }
            (None, Some(d)) if !(d.is_finite() && d > 0.0) => {
                return bad("transfer.duration_s", d.to_string(), "seconds > 0")
            }
            _ => {}
        }
        if t.window == 0 {
            return bad("transfer.window", "0".into(), "at least 1 bundle");
        }
        for (f, v) in [
            ("transfer.time_limit_s", t.time_limit_s),
            ("transfer.idle_s", t.idle_s),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(f, v.to_string(), "seconds > 0");
            }
        }
        let l = &self.ltp;
        if !(100..=65_000).contains(&l.segment_bytes) {
            return bad(
                "ltp.segment_bytes",
                l.segment_bytes.to_string(),
                "100 to 65000 bytes",
            );
        }
        if l.max_sessions == 0 {
            return bad("ltp.max_sessions", "0".into(), "at least 1");
        }
        if !(l.rto_ms.is_finite() && l.rto_ms > 0.0) {
            return bad("ltp.rto_ms", l.rto_ms.to_string(), "milliseconds > 0");
        }
        for (f, v, min) in [
            ("ltp.aggregation_bytes", l.aggregation_bytes, 1),
            ("store.window_bytes", self.store.window_bytes, 1),
            ("ltp.socket_buffer_bytes", l.socket_buffer_bytes, 4096),
            ("tcpcl.max_segment_size", self.tcpcl.max_segment_size, 1),
            (
                "tcpcl.socket_buffer_bytes",
                self.tcpcl.socket_buffer_bytes,
                4096,
            ),
            (
                "udpcl.socket_buffer_bytes",
                self.udpcl.socket_buffer_bytes,
                4096,
            ),
        ] {
            if let Some(v) = v {
                if !(min..=1 << 30).contains(&v) {
                    return bad(f, v.to_string(), &format!("{min} to {} bytes", 1u64 << 30));
                }
            }
        }
        if t.method == Method::Cfdp {
            if t.bytes.is_none() {
                return bad(
                    "transfer.method",
                    "\"cfdp\"".into(),
                    "transfer.bytes (the file size) with a CFDP put, not duration_s",
                );
            }
            if t.bundle_bytes > 65_000 {
                return bad(
                    "transfer.bundle_bytes",
                    t.bundle_bytes.to_string(),
                    "at most 65000 with method = \"cfdp\" (the File Data PDU segment size)",
                );
            }
            if c.streams != 1 {
                return bad(
                    "chain.streams",
                    c.streams.to_string(),
                    "1 with method = \"cfdp\"",
                );
            }
        }
        if !CHECKSUMS.contains(&self.cfdp.checksum.as_str()) {
            return bad(
                "cfdp.checksum",
                format!("{:?}", self.cfdp.checksum),
                &format!("one of {}", CHECKSUMS.join(", ")),
            );
        }
        if let Some(mb) = self.store.hot_cache_mb {
            if mb > 65_536 {
                return bad("store.hot_cache_mb", mb.to_string(), "0 to 65536 MiB");
            }
        }
        if self.store.quota_bytes < 2 * t.bundle_bytes as u64 {
            return bad(
                "store.quota_bytes",
                self.store.quota_bytes.to_string(),
                "at least two bundles (2 × transfer.bundle_bytes)",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LoopbackScenario, String> {
        LoopbackScenario::from_toml_str(text, "s.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_fill_a_minimal_file() {
        let s = parse("[transfer]\nbundle_bytes = 1000\nbytes = 10000\n").unwrap();
        assert_eq!(s.chain.nodes, 2);
        assert_eq!(s.chain.cla, Cla::Tcpcl);
        assert_eq!(s.chain.affinity, Affinity::None);
        assert!(!s.store.durable);
        assert_eq!(s.ltp.segment_bytes, 1400);
    }

    #[test]
    fn errors_name_the_field_and_what_was_expected() {
        let cases = [
            (
                "[chain]\nnodes = 6\n[transfer]\nbundle_bytes = 1\nbytes = 1\n",
                "chain.nodes = 6: expected 2 to 5 nodes",
            ),
            (
                "[chain]\nstreams = 2\n[transfer]\nbundle_bytes = 1\nbytes = 1\n",
                "chain.streams = 2: expected 1 with topology",
            ),
            (
                "[chain]\ntopology = \"star\"\nnodes = 3\n[transfer]\nbundle_bytes = 1\nbytes = 1\n",
                "chain.nodes = 3: expected 5 with topology",
            ),
            (
                "[chain]\ncla = \"quic\"\n[transfer]\nbundle_bytes = 1\nbytes = 1\n",
                "unknown variant `quic`",
            ),
            (
                "[chain]\naffinity = \"all\"\n[transfer]\nbundle_bytes = 1\nbytes = 1\n",
                "unknown variant `all`",
            ),
            (
                "[transfer]\nbundle_bytes = 1\nbytes = 1\nbogus = 3\n",
                "unknown field `bogus`",
            ),
            (
                "[transfer]\nbundle_bytes = 1\n",
                "transfer = bytes = None, duration_s = None: expected exactly one of bytes and duration_s",
            ),
            (
                "[transfer]\nbundle_bytes = 0\nbytes = 1\n",
                "transfer.bundle_bytes = 0: expected 1 to",
            ),
            (
                "[transfer]\nbundle_bytes = 10\nduration_s = -1.0\n",
                "transfer.duration_s = -1: expected seconds > 0",
            ),
            (
                "[transfer]\nbundle_bytes = 10\nbytes = 10\n[ltp]\nsegment_bytes = 70000\n",
                "ltp.segment_bytes = 70000: expected 100 to 65000 bytes",
            ),
            (
                "[transfer]\nbundle_bytes = 10\nbytes = 10\n[tcpcl]\nsocket_buffer_bytes = 10\n",
                "tcpcl.socket_buffer_bytes = 10: expected 4096 to",
            ),
            (
                "[transfer]\nbundle_bytes = 10\nbytes = 10\n[store]\nfsync = true\n",
                "unknown field `fsync`",
            ),
            ("[chain]\nnodes = 2\n", "missing field `transfer`"),
            (
                "[transfer]\nmethod = \"cfdp\"\nbundle_bytes = 1000\nduration_s = 1.0\n",
                "transfer.method = \"cfdp\": expected transfer.bytes",
            ),
            (
                "[transfer]\nmethod = \"cfdp\"\nbundle_bytes = 65001\nbytes = 10\n",
                "transfer.bundle_bytes = 65001: expected at most 65000",
            ),
            (
                "[transfer]\nbundle_bytes = 1000\nbytes = 10\n[cfdp]\nchecksum = \"md5\"\n",
                "cfdp.checksum = \"md5\": expected one of modular, proximity1, crc32c, crc32, null",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: got {e:?}, want {want:?}");
            assert!(e.starts_with("scenario: s.toml: "), "{e}");
        }
    }

    #[test]
    fn star_with_two_streams_is_accepted() {
        let s = parse(
            "[chain]\nnodes = 5\ntopology = \"star\"\nstreams = 2\naffinity = \"single-core\"\ncla = \"ltp\"\n\
             [transfer]\nbundle_bytes = 1000\nduration_s = 1.5\n",
        )
        .unwrap();
        assert_eq!(s.chain.streams, 2);
        assert_eq!(s.chain.affinity, Affinity::SingleCore);
        assert_eq!(s.transfer.duration_s, Some(1.5));
    }
}
