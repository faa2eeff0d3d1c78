//! From a simulator scenario to the files a real run needs: two node configurations and an emulator configuration.
//!
//! The mapping keeps every setting both drivers understand identical (LTP segment size, parallel sessions, RTO or
//! its derivation `2 × owlt + margin`, pacing rate and burst, the link's forward and return channel models, trace
//! presets generated with the same seed derivation as the simulator) and reports the settings that have no
//! real-time counterpart as warnings rather than silently dropping them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use channel::config::{AvailabilityConfig, DirectionConfig, LossConfig};
use sim::scenario::{Colour, LinkSection, NodeSection, TrafficSection};
use sim::Scenario;
use toml::{Table, Value};

use crate::LabError;

/// The largest bundle payload the lab lets a scenario ask for: the node's default `max_bundle_size` (64 MiB)
/// minus room for the bundle's blocks, the largest payload one Send request carries. Larger payloads are
/// streamed and stored as fragments (`lab::perf` does it for `dtnkit perf client --size` between real nodes);
/// the lab's emulated runs are not set up or tested for them, so a scenario may not ask for them.
pub const MAX_PAYLOAD: usize = (64 << 20) - 4096;

/// The two-node, one-link, one-flow shape the lab emulates, resolved from a scenario.
#[derive(Debug, Clone)]
pub struct Topology<'a> {
    /// The link.
    pub link: &'a LinkSection,
    /// Index of the link in the scenario (for the seed derivation).
    pub link_index: usize,
    /// The node at the link's `a` end (forward sender).
    pub node_a: &'a NodeSection,
    /// The node at the link's `b` end.
    pub node_b: &'a NodeSection,
    /// The traffic flow.
    pub traffic: &'a TrafficSection,
}

fn unsupported(what: impl Into<String>) -> LabError {
    LabError::Unsupported(what.into())
}

/// Checks that the scenario has the shape the lab can emulate and returns its parts.
pub fn topology(scn: &Scenario) -> Result<Topology<'_>, LabError> {
    if scn.nodes.len() != 2 {
        return Err(unsupported(format!(
            "node: {} [[node]] entries; the lab emulates exactly 2 nodes joined by one [[link]]",
            scn.nodes.len()
        )));
    }
    let [link] = scn.links.as_slice() else {
        return Err(unsupported(format!(
            "link: {} [[link]] entries; the lab emulates exactly one",
            scn.links.len()
        )));
    };
    let [traffic] = scn.traffic.as_slice() else {
        return Err(unsupported(format!(
            "traffic: {} [[traffic]] entries; the lab runs exactly one flow",
            scn.traffic.len()
        )));
    };
    if !scn.contacts.is_empty() || scn.sim.contact_plan.is_some() {
        return Err(unsupported(
            "contact / sim.contact_plan: contact windows are not emulated yet (the link is always up)",
        ));
    }
    if traffic.bundle_size > MAX_PAYLOAD {
        return Err(unsupported(format!(
            "traffic[0].bundle_size = {}: the lab runs bundles of at most {MAX_PAYLOAD} bytes (64 MiB - 4096, \
             one Send request each); larger bundles are streamed and fragmented, which `dtnkit perf client \
             --size` does between real nodes but the lab's emulated runs do not support",
            traffic.bundle_size
        )));
    }
    let find = |n: u64| scn.nodes.iter().find(|x| x.number == n);
    match (find(link.a), find(link.b)) {
        (Some(node_a), Some(node_b)) => Ok(Topology {
            link,
            link_index: 0,
            node_a,
            node_b,
            traffic,
        }),
        _ => Err(unsupported("link[0]: a and b must name the two [[node]]s")),
    }
}

/// The simulator's seed derivation (`sim::world`), reproduced so that generated traces and link streams are the
/// same in both drivers: SplitMix64-style mixing of the scenario seed with two small integers.
pub fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut z =
        seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Loopback addresses of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    /// LTP socket of the link's `a` node.
    pub node_a: SocketAddr,
    /// LTP socket of the link's `b` node.
    pub node_b: SocketAddr,
    /// Relay port the `a` node sends to (forward direction).
    pub listen_a: SocketAddr,
    /// Relay port the `b` node sends to (return direction).
    pub listen_b: SocketAddr,
}

/// Settings of one generated node configuration that are not taken from the scenario.
#[derive(Debug, Clone)]
pub struct NodeFileOptions {
    /// fsync every store commit.
    pub durable: bool,
    /// Store quota in bytes.
    pub quota_bytes: u64,
}

/// The LTP span settings of `node` towards its peer, derived exactly as the simulator derives them.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanPlan {
    /// Bytes per segment.
    pub max_segment_size: usize,
    /// Parallel export sessions.
    pub max_sessions: usize,
    /// Retransmission timeout in ms.
    pub rto_ms: f64,
    /// One-way light time in ms.
    pub owlt_ms: f64,
    /// Pacing rate in bit/s (0 = unpaced).
    pub rate_bps: u64,
    /// Token-bucket depth (0 = engine default).
    pub burst_bytes: u64,
    /// Token-bucket depth as time at the current rate (None = engine default, as in the simulator).
    pub burst_ms: Option<f64>,
    /// Parallel import sessions (receive buffers).
    pub max_import_sessions: usize,
    /// Copies of each signal segment.
    pub signal_replication: u32,
    /// Intermediate checkpoint interval (the node's `checkpoint_bytes`; 0 = one per block). The
    /// node accepts 0 or at least `ltp::MIN_CHECKPOINT_INTERVAL`: a smaller scenario value is
    /// raised to that (with a warning, [`unmapped_settings`]).
    pub checkpoint_bytes: u64,
    /// Adaptive pacing (the scenario's `ltp.adaptive_rate`).
    pub adaptive_rate: bool,
    /// FEC below LTP (`[node.fec]` becomes the span's `[span.fec]`).
    pub fec: Option<fec::FecSection>,
}

/// Derives a node's span settings: explicit `rto_ms`, else `2 × owlt + margin` with `owlt` defaulting to the mean
/// of the link's two delays; the pacing rate defaults to the rate of the direction the node transmits on.
pub fn span_plan(node: &NodeSection, out: &DirectionConfig, back: &DirectionConfig) -> SpanPlan {
    let l = &node.ltp;
    let owlt_ms = l.owlt_ms.unwrap_or((out.delay_ms + back.delay_ms) / 2.0);
    SpanPlan {
        max_segment_size: l.max_segment_size,
        max_sessions: l.max_export_sessions,
        rto_ms: l.rto_ms.unwrap_or(2.0 * owlt_ms + l.margin_ms),
        owlt_ms,
        rate_bps: l.rate_bps.or(out.rate_bps).unwrap_or(0.0).max(0.0) as u64,
        burst_bytes: l.pacing_burst_bytes,
        burst_ms: l.pacing_burst_ms,
        max_import_sessions: l.max_import_sessions,
        signal_replication: l.signal_replication,
        checkpoint_bytes: match l.checkpoint_interval_bytes {
            0 => 0,
            c => c.max(ltp::MIN_CHECKPOINT_INTERVAL),
        },
        adaptive_rate: l.adaptive_rate,
        fec: node.fec.clone(),
    }
}

/// Scenario settings that the real node cannot apply, as human-readable warnings.
pub fn unmapped_settings(scn: &Scenario, t: &Topology<'_>) -> Vec<String> {
    let mut w = Vec::new();
    let defaults = sim::scenario::LtpSection::default();
    for (i, n) in scn.nodes.iter().enumerate() {
        let l = &n.ltp;
        for (name, differs) in [
            (
                "max_checkpoint_retransmissions",
                l.max_checkpoint_retransmissions != defaults.max_checkpoint_retransmissions,
            ),
            (
                "max_report_retransmissions",
                l.max_report_retransmissions != defaults.max_report_retransmissions,
            ),
            (
                "max_retransmission_cycles",
                l.max_retransmission_cycles != defaults.max_retransmission_cycles,
            ),
            (
                "max_claims_per_report",
                l.max_claims_per_report != defaults.max_claims_per_report,
            ),
        ] {
            if differs {
                w.push(format!(
                    "node[{i}].ltp.{name}: not configurable on the real node; its default is used"
                ));
            }
        }
        let c = l.checkpoint_interval_bytes;
        if c != 0 && c < ltp::MIN_CHECKPOINT_INTERVAL {
            w.push(format!(
                "node[{i}].ltp.checkpoint_interval_bytes: {c} is below the node's smallest \
                 checkpoint_bytes; {} is used",
                ltp::MIN_CHECKPOINT_INTERVAL
            ));
        }
        if !n.routes.is_empty() {
            w.push(format!(
                "node[{i}].route: ignored (two nodes, the peer is a direct neighbour)"
            ));
        }
    }
    if t.traffic.data_colour != Colour::Red || t.traffic.ack_colour != Colour::Red {
        w.push(
            "traffic[0].data_colour/ack_colour: the real node sends every bundle as red LTP data; \
             green blocks are simulation-only"
                .to_string(),
        );
    }
    if scn.sim.bundle_layer != sim::scenario::BundleLayer::Agent {
        w.push("sim.bundle_layer: the real node always runs the bp agent".to_string());
    }
    if scn.nodes.iter().any(|n| {
        let p = &n.processing;
        p.rx_latency_us > 0.0 || p.per_segment_us > 0.0 || p.per_bundle_us > 0.0
    }) {
        w.push(
            "node.processing: not applied; the emulated run has the host's real processing costs"
                .to_string(),
        );
    }
    w
}

fn str_value(s: impl Into<String>) -> Value {
    Value::String(s.into())
}

fn path_value(p: &Path) -> Value {
    str_value(p.to_string_lossy().into_owned())
}

/// Renders a node configuration (`docs/node.md`) for `node` talking to `peer` through `relay_port`. Logs and the
/// store live in the node's directory; their file names are fixed (`segments.csv`, `bundles.csv`, `store/`).
pub fn node_toml(
    node: u64,
    bind: SocketAddr,
    peer: u64,
    relay_port: SocketAddr,
    span: &SpanPlan,
    opts: &NodeFileOptions,
) -> String {
    let mut t = Table::new();
    t.insert("node".into(), Value::Integer(node as i64));
    t.insert("bind".into(), str_value(bind.to_string()));
    let mut store = Table::new();
    store.insert("path".into(), str_value("store"));
    store.insert(
        "quota_bytes".into(),
        Value::Integer(opts.quota_bytes.min(i64::MAX as u64) as i64),
    );
    store.insert("durable".into(), Value::Boolean(opts.durable));
    t.insert("store".into(), Value::Table(store));
    let mut log = Table::new();
    log.insert("ltp_segments".into(), str_value("segments.csv"));
    log.insert("bundles".into(), str_value("bundles.csv"));
    t.insert("log".into(), Value::Table(log));
    let mut s = Table::new();
    s.insert("peer".into(), Value::Integer(peer as i64));
    s.insert("address".into(), str_value(relay_port.to_string()));
    s.insert(
        "max_segment_size".into(),
        Value::Integer(span.max_segment_size as i64),
    );
    s.insert(
        "max_sessions".into(),
        Value::Integer(span.max_sessions as i64),
    );
    // One bundle per LTP block, as in the simulator: a block closes as soon as any bundle bytes wait.
    s.insert("aggregation_bytes".into(), Value::Integer(1));
    s.insert("aggregation_ms".into(), Value::Float(0.0));
    s.insert("rto_ms".into(), Value::Float(span.rto_ms));
    s.insert(
        "rate_bps".into(),
        Value::Integer(span.rate_bps.min(i64::MAX as u64) as i64),
    );
    s.insert("owlt_ms".into(), Value::Float(span.owlt_ms));
    // The simulator's engines adapt their rate only when the scenario says so; the real nodes
    // of a lab run must do the same, or an emulated run of a scenario would not take the
    // simulated run's decisions.
    s.insert("adaptive_rate".into(), Value::Boolean(span.adaptive_rate));
    // Likewise the checkpoints: the node's peer-kind default (1 MiB) is not the scenario's.
    s.insert(
        "checkpoint_bytes".into(),
        Value::Integer(span.checkpoint_bytes.min(i64::MAX as u64) as i64),
    );
    if span.burst_bytes > 0 {
        s.insert(
            "burst_bytes".into(),
            Value::Integer(span.burst_bytes.min(i64::MAX as u64) as i64),
        );
    }
    if let Some(ms) = span.burst_ms {
        s.insert("burst_ms".into(), Value::Float(ms));
    }
    s.insert(
        "max_import_sessions".into(),
        Value::Integer(span.max_import_sessions.min(i64::MAX as usize) as i64),
    );
    s.insert(
        "signal_replication".into(),
        Value::Integer(i64::from(span.signal_replication)),
    );
    if let Some(f) = span.fec.as_ref().and_then(|f| Value::try_from(f).ok()) {
        s.insert("fec".into(), f);
    }
    t.insert("span".into(), Value::Array(vec![Value::Table(s)]));
    toml::to_string(&t).unwrap_or_default()
}

/// A direction's settings as an emulator TOML table. A `trace` file path is made absolute against `base`.
pub fn direction_table(d: &DirectionConfig, base: &Path) -> Table {
    let mut t = Table::new();
    if let Some(r) = d.rate_bps {
        t.insert("rate_bps".into(), Value::Float(r));
    }
    if let Some(q) = d.queue_bytes {
        t.insert(
            "queue_bytes".into(),
            Value::Integer(q.min(i64::MAX as u64) as i64),
        );
    }
    t.insert("delay_ms".into(), Value::Float(d.delay_ms));
    t.insert("jitter_ms".into(), Value::Float(d.jitter_ms));
    if let Some(o) = &d.overhead {
        let mut ov = Table::new();
        ov.insert(
            "bytes".into(),
            Value::Integer(o.bytes.min(i64::MAX as u64) as i64),
        );
        if let Some(p) = o.per_bytes {
            ov.insert(
                "per_bytes".into(),
                Value::Integer(p.min(i64::MAX as u64) as i64),
            );
        }
        t.insert("overhead".into(), Value::Table(ov));
    }
    t.insert("allow_reorder".into(), Value::Boolean(d.allow_reorder));
    let mut loss = Table::new();
    let mut put = |k: &str, v: Value| {
        loss.insert(k.into(), v);
    };
    match &d.loss {
        LossConfig::None => put("model", str_value("none")),
        LossConfig::Iid { per } => {
            put("model", str_value("iid"));
            put("per", Value::Float(*per));
        }
        LossConfig::Ber { ber } => {
            put("model", str_value("ber"));
            put("ber", Value::Float(*ber));
        }
        LossConfig::GilbertElliott {
            p,
            r,
            loss_good,
            loss_bad,
            step_ms,
        } => {
            put("model", str_value("gilbert_elliott"));
            put("p", Value::Float(*p));
            put("r", Value::Float(*r));
            for (k, v) in [
                ("loss_good", loss_good),
                ("loss_bad", loss_bad),
                ("step_ms", step_ms),
            ] {
                if let Some(v) = v {
                    put(k, Value::Float(*v));
                }
            }
        }
        LossConfig::Trace {
            file,
            offset_ms,
            period_us,
        } => {
            put("model", str_value("trace"));
            let abs = if file.is_absolute() {
                file.clone()
            } else {
                base.join(file)
            };
            put("file", path_value(&abs));
            if let Some(o) = offset_ms {
                put("offset_ms", Value::Float(*o));
            }
            if let Some(p) = period_us {
                put(
                    "period_us",
                    Value::Integer((*p).min(i64::MAX as u64) as i64),
                );
            }
        }
    }
    t.insert("loss".into(), Value::Table(loss));
    let mut av = Table::new();
    match &d.availability {
        AvailabilityConfig::Always => {
            av.insert("model".into(), str_value("always"));
        }
        AvailabilityConfig::Schedule { windows, repeat_s } => {
            av.insert("model".into(), str_value("schedule"));
            av.insert(
                "windows".into(),
                Value::Array(
                    windows
                        .iter()
                        .map(|[a, b]| Value::Array(vec![Value::Float(*a), Value::Float(*b)]))
                        .collect(),
                ),
            );
            if let Some(r) = repeat_s {
                av.insert("repeat_s".into(), Value::Float(*r));
            }
        }
        AvailabilityConfig::Markov {
            p,
            q,
            step_ms,
            initial,
        } => {
            av.insert("model".into(), str_value("markov"));
            av.insert("p".into(), Value::Float(*p));
            if let Some(q) = q {
                av.insert("q".into(), Value::Float(*q));
            }
            av.insert("step_ms".into(), Value::Float(*step_ms));
            if let Some(i) = initial {
                av.insert("initial".into(), str_value(i.clone()));
            }
        }
    }
    t.insert("availability".into(), Value::Table(av));
    t
}

/// Replaces a direction's loss by a trace preset generated exactly as the simulator generates it (scenario seed,
/// link index, direction), written in run-length format to `file`.
pub fn apply_trace_preset(
    d: &mut DirectionConfig,
    preset: &str,
    seed: u64,
    link_index: usize,
    direction: u64,
    file: &Path,
) -> Result<(), LabError> {
    let p = channel::gen::Preset::from_name(preset).ok_or_else(|| {
        LabError::Scenario(format!(
            "link[{link_index}] trace preset = {preset:?}: expected \"A\", \"F\" or \"H\""
        ))
    })?;
    let trace = channel::gen::generate(&p.params(mix(seed, link_index as u64, 100 + direction)))
        .map_err(|e| LabError::Scenario(format!("link[{link_index}] trace preset: {e}")))?;
    std::fs::write(file, trace.to_text(channel::trace::Format::RunLength)).map_err(|source| {
        LabError::Io {
            what: format!("writing {}", file.display()),
            source,
        }
    })?;
    d.loss = LossConfig::Trace {
        file: file.to_path_buf(),
        offset_ms: None,
        period_us: None,
    };
    Ok(())
}

/// Renders the emulator configuration (`docs/channel.md`): relay addresses, the link seed the simulator gives the
/// link, and both directions.
pub fn emu_toml(
    seed: u64,
    addrs: &Addresses,
    forward: &DirectionConfig,
    ret: &DirectionConfig,
    base: &Path,
) -> String {
    let mut t = Table::new();
    t.insert(
        "seed".into(),
        // TOML integers are signed 64-bit; the relay reads the same bits back as u64.
        Value::Integer(seed as i64),
    );
    let mut relay = Table::new();
    relay.insert("listen_a".into(), str_value(addrs.listen_a.to_string()));
    relay.insert("listen_b".into(), str_value(addrs.listen_b.to_string()));
    relay.insert("a".into(), str_value(addrs.node_a.to_string()));
    relay.insert("b".into(), str_value(addrs.node_b.to_string()));
    t.insert("relay".into(), Value::Table(relay));
    t.insert(
        "forward".into(),
        Value::Table(direction_table(forward, base)),
    );
    t.insert("return".into(), Value::Table(direction_table(ret, base)));
    toml::to_string(&t).unwrap_or_default()
}

/// How long the flow generates: the lab's override, else the flow's `duration_s`, else the scenario duration.
pub fn flow_duration(scn: &Scenario, t: &TrafficSection, over: Option<Duration>) -> Duration {
    over.unwrap_or_else(|| {
        Duration::try_from_secs_f64(t.duration_s.unwrap_or(scn.sim.duration_s))
            .unwrap_or(Duration::MAX)
    })
}

/// The directory names of the run, relative to the work directory.
pub fn node_dir(work: &Path, node: u64) -> PathBuf {
    work.join(format!("node{node}"))
}

/// Fraction of the first `span` of a direction's loss trace that is in the good state (the trace loops), or
/// `None` when the direction has no trace loss. This is the denominator's "fraction of time the channel is good"
/// in seed 000's channel efficiency, taken over the part of the trace a run actually used.
pub fn trace_good_fraction(d: &DirectionConfig, base: &Path, span: Duration) -> Option<f64> {
    let LossConfig::Trace {
        file,
        offset_ms,
        period_us,
    } = &d.loss
    else {
        return None;
    };
    let mut po = channel::trace::ParseOptions::default();
    if let Some(p) = period_us {
        po.period = Duration::from_micros(*p);
    }
    let path = if file.is_absolute() {
        file.clone()
    } else {
        base.join(file)
    };
    let t = channel::trace::load(&path, &po).ok()?;
    if t.is_empty() || t.period().is_zero() {
        return None;
    }
    let first =
        t.index_at(Duration::try_from_secs_f64(offset_ms.unwrap_or(0.0) / 1e3).unwrap_or_default());
    let n = (span.as_nanos() / t.period().as_nanos()).clamp(1, 1 << 28) as usize;
    let bad = (0..n).filter(|i| t.sample((first + i) % t.len())).count();
    Some(1.0 - bad as f64 / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCN: &str = r#"
[sim]
duration_s = 3.0
seed = 7
[[node]]
number = 1
ltp = { max_segment_size = 1024, max_export_sessions = 5, margin_ms = 4.0 }
[[node]]
number = 2
ltp = { max_segment_size = 1200, max_export_sessions = 3, rto_ms = 25.0 }
[[link]]
a = 1
b = 2
forward = { rate_bps = 100e6, delay_ms = 10.0, queue_bytes = 1048576 }
return = { rate_bps = 10e6, delay_ms = 2.0, loss = { model = "iid", per = 0.01 } }
forward_trace_preset = "A"
[[traffic]]
from = 1
to = 2
window = 4
bundle_size = 100000
"#;

    fn scenario() -> Scenario {
        Scenario::from_toml_str(SCN, "t.toml", Path::new(".")).unwrap()
    }

    fn addrs() -> Addresses {
        let a = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
        Addresses {
            node_a: a(4001),
            node_b: a(4002),
            listen_a: a(4003),
            listen_b: a(4004),
        }
    }

    #[test]
    fn span_settings_follow_the_simulator_derivation() {
        let s = scenario();
        let t = topology(&s).unwrap();
        let a = span_plan(t.node_a, &t.link.forward, &t.link.ret);
        // owlt = mean of the two delays; rto = 2 owlt + margin; rate = the direction the node sends on.
        assert_eq!(a.owlt_ms, 6.0);
        assert_eq!(a.rto_ms, 16.0);
        assert_eq!(a.rate_bps, 100_000_000);
        assert_eq!(a.max_sessions, 5);
        let b = span_plan(t.node_b, &t.link.ret, &t.link.forward);
        assert_eq!(b.rto_ms, 25.0);
        assert_eq!(b.rate_bps, 10_000_000);
        assert_eq!(b.max_segment_size, 1200);
        // Green colours are reported as simulation-only.
        assert!(unmapped_settings(&s, &t)
            .iter()
            .any(|w| w.contains("ack_colour")));
    }

    #[test]
    fn generated_files_are_accepted_by_the_node_and_the_relay() {
        let s = scenario();
        let t = topology(&s).unwrap();
        let dir = std::env::temp_dir().join(format!("lab-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut fwd, ret) = (t.link.forward.clone(), t.link.ret.clone());
        let trace = dir.join("fwd.rle");
        apply_trace_preset(&mut fwd, "A", s.sim.seed, 0, 0, &trace).unwrap();
        let ad = addrs();
        let mut span = span_plan(t.node_a, &fwd, &ret);
        assert_eq!(
            span.burst_ms, None,
            "the scenario leaves the engine's default depth"
        );
        span.burst_ms = Some(2.5);
        assert_eq!(
            (span.checkpoint_bytes, span.adaptive_rate),
            (0, false),
            "the scenario's defaults, not the node's peer-kind ones"
        );
        span.checkpoint_bytes = 1 << 20;
        span.signal_replication = 3;
        span.fec = Some(fec::FecSection {
            mode: "hsltp".into(),
            max_k: Some(128),
            code_rate: Some("8/9".into()),
            min_repair: None,
            feedback_step_pct: None,
            feedback_max_pct: None,
            feedback_decay: None,
            aggregation_ms: None,
            signal_ms: Some(0.5),
            matrix_timeout_ms: None,
            reorder_wait_ms: None,
            max_rx_bytes: None,
        });
        let node = node_toml(
            1,
            ad.node_a,
            2,
            ad.listen_a,
            &span,
            &NodeFileOptions {
                durable: false,
                quota_bytes: 1 << 20,
            },
        );
        let v = node::NodeConfig::parse(&node, "node.toml", &dir).unwrap();
        assert_eq!(v.spans.len(), 1);
        assert_eq!(v.spans[0].address, ad.listen_a);
        assert_eq!(v.spans[0].rto, Some(Duration::from_millis(16)));
        assert_eq!(v.spans[0].burst_time, Some(Duration::from_micros(2500)));
        assert_eq!(v.spans[0].cfg.signal_replication, Some(3));
        assert_eq!(v.spans[0].checkpoint_bytes, 1 << 20);
        let f = v.spans[0].fec.as_ref().unwrap();
        assert_eq!(
            (f.mode, f.max_k, f.signal_time),
            (fec::Mode::Hsltp, 128, Duration::from_micros(500))
        );
        assert!(v.segment_log.is_some() && v.bundle_log.is_some());
        let emu = emu_toml(mix(7, 0, 1) & (i64::MAX as u64), &ad, &fwd, &ret, &dir);
        let cfg = emu::relay::EmuConfig::from_toml(&emu).unwrap();
        assert_eq!(cfg.relay.b, ad.node_b);
        assert_eq!(cfg.relay.a, Some(ad.node_a));
        assert_eq!(cfg.ret.loss, LossConfig::Iid { per: 0.01 });
        cfg.build(&dir).unwrap();
        // The trace is preset A generated with the simulator's seed for link 0, forward direction.
        let g = trace_good_fraction(&fwd, &dir, Duration::from_secs(100)).unwrap();
        assert!((g - (1.0 - 0.0498)).abs() < 0.005, "good fraction {g}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unsupported_shapes_name_the_field() {
        let three = SCN.replace("[[link]]", "[[node]]\nnumber = 3\n[[link]]");
        let s = Scenario::from_toml_str(&three, "t.toml", Path::new(".")).unwrap();
        let e = topology(&s).unwrap_err().to_string();
        assert!(e.contains("node: 3"), "{e}");
        let big = SCN.replace("bundle_size = 100000", "bundle_size = 100000000");
        let s = Scenario::from_toml_str(&big, "t.toml", Path::new(".")).unwrap();
        let e = topology(&s).unwrap_err().to_string();
        assert!(e.contains("traffic[0].bundle_size"), "{e}");
    }

    #[test]
    fn the_demo_scenario_is_emulatable() {
        let s = crate::demo_scenario().unwrap();
        let t = topology(&s).unwrap();
        assert_eq!(t.traffic.bundle_size, 500_000);
        assert_eq!(t.link.forward_trace_preset.as_deref(), Some("H"));
    }
}
