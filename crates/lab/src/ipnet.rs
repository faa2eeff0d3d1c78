//! Transfers across the emulator's IP mode: one run = fresh namespaces (`dtnkit emu --ip`), then the chosen
//! protocol moves a file between the first and the last node, then everything is stopped and the emulator's
//! counters are read back.
//!
//! Protocols (`[transfer] protocol`):
//! - `tcp`: `dtnkit tcp send` → `dtnkit tcp recv` (kernel TCP; congestion control, buffers and the initial window
//!   per run; the file in `blocks` connections, seed 004's FTP-like application);
//! - `tcp-gateway`: the same through `dtnkit tcp gateway` in a middle namespace (seed 004's splitting
//!   architecture): sender → (the `[access]` link, ideal by default) → gateway → (`[link]`) → receiver, the gateway's
//!   upstream connection with its own settings (`[gateway]`);
//! - `bp-ltp`, `bp-tcpcl`: two real `dtnkit node`s, the file as bundles of `bundle_bytes` sent from the first node's
//!   application socket and received at the second's (LTP: `bundles_per_block` bundles per red block,
//!   `segment_bytes` segments, paced at the link rate; TCPCL over the namespaces' default congestion control).
//!
//! Every run is bounded: `time_limit_s` ends a transfer that has not finished (its goodput is then what arrived
//! within the limit), and the children are killed if they outlive their bound.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use channel::config::DirectionConfig;
use serde::Deserialize;
use toml::{Table, Value};

use crate::config::direction_table;
use crate::emulated::{io, prepare_work_dir, wait_stderr_line as wait_line};
use crate::procs::Child;
use crate::LabError;

/// Port of the TCP receiver.
pub const TCP_PORT: u16 = 5001;
/// Port of the splitting gateway.
pub const GATEWAY_PORT: u16 = 5002;
/// LTP port of the nodes.
pub const LTP_PORT: u16 = 1113;
/// TCPCL port of the receiving node.
pub const TCPCL_PORT: u16 = 4556;

/// The transferred protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Direct kernel TCP.
    Tcp,
    /// Kernel TCP through a splitting gateway.
    TcpGateway,
    /// BP over LTP.
    BpLtp,
    /// BP over TCPCLv4.
    BpTcpcl,
}

/// Kernel TCP settings of one end (sockets and the route's initial window).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpSection {
    /// Congestion control of the sockets (and of the namespace's routes, for connections that do not choose).
    #[serde(default)]
    pub congestion: Option<String>,
    /// SO_SNDBUF.
    #[serde(default)]
    pub sndbuf: Option<usize>,
    /// SO_RCVBUF.
    #[serde(default)]
    pub rcvbuf: Option<usize>,
    /// TCP_WINDOW_CLAMP of the receiving sockets, bytes: the most the sender may have in flight.
    #[serde(default)]
    pub window_clamp: Option<usize>,
    /// Initial congestion window (route `initcwnd`).
    #[serde(default)]
    pub initcwnd: Option<u32>,
    /// Initial receive window (route `initrwnd`).
    #[serde(default)]
    pub initrwnd: Option<u32>,
    /// Congestion window clamp (route `cwnd lock N`).
    #[serde(default)]
    pub cwnd_lock: Option<u32>,
}

/// `[bp]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BpSection {
    /// Bundle payload bytes.
    #[serde(default = "d_bundle")]
    pub bundle_bytes: usize,
    /// Bundles per LTP block.
    #[serde(default = "d_per_block")]
    pub bundles_per_block: usize,
    /// LTP segment size.
    #[serde(default = "d_segment")]
    pub segment_bytes: usize,
    /// Parallel LTP export sessions.
    #[serde(default = "d_sessions")]
    pub max_sessions: usize,
    /// LTP retransmission timeout (default 2 × one-way delay + 100 ms).
    #[serde(default)]
    pub rto_ms: Option<f64>,
    /// A partial block is closed this long after its first bundle.
    #[serde(default = "d_aggregation_ms")]
    pub aggregation_ms: f64,
}

fn d_bundle() -> usize {
    40_000
}
fn d_per_block() -> usize {
    6
}
fn d_segment() -> usize {
    1400
}
fn d_sessions() -> usize {
    32
}
fn d_aggregation_ms() -> f64 {
    100.0
}

impl Default for BpSection {
    fn default() -> Self {
        BpSection {
            bundle_bytes: d_bundle(),
            bundles_per_block: d_per_block(),
            segment_bytes: d_segment(),
            max_sessions: d_sessions(),
            rto_ms: None,
            aggregation_ms: d_aggregation_ms(),
        }
    }
}

/// `[transfer]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferSection {
    /// What moves the file.
    pub protocol: Protocol,
    /// File size in bytes.
    pub file_bytes: u64,
    /// TCP: connections (blocks) the file is split into.
    #[serde(default = "one")]
    pub blocks: u64,
    /// Give up after this long; goodput is then what arrived within it.
    #[serde(default = "d_limit")]
    pub time_limit_s: f64,
}

fn one() -> u64 {
    1
}
fn d_limit() -> f64 {
    300.0
}

/// A link as written: forward (towards the receiver) and return.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkPair {
    /// Towards the receiver.
    #[serde(default)]
    pub forward: DirectionConfig,
    /// Towards the sender.
    #[serde(default, rename = "return")]
    pub ret: DirectionConfig,
}

/// `[sim]` (only the seed: the bench sets `sim.seed` per repetition).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedSection {
    /// Link seed.
    #[serde(default)]
    pub seed: u64,
}

/// An IP-mode transfer scenario (the base scenario of `dtnkit bench --mode ip`, docs/bench.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpScenario {
    /// Seed.
    #[serde(default)]
    pub sim: SeedSection,
    /// What to transfer.
    pub transfer: TransferSection,
    /// The emulated link between the sender (or gateway) and the receiver.
    #[serde(default)]
    pub link: LinkPair,
    /// Sender → gateway link of `tcp-gateway` (default: no delay, no loss, no rate).
    #[serde(default)]
    pub access: LinkPair,
    /// TCP settings of the sender and the receiver (and of the gateway's accepting side).
    #[serde(default)]
    pub tcp: TcpSection,
    /// TCP settings of the gateway's connection towards the receiver.
    #[serde(default)]
    pub gateway: TcpSection,
    /// BP settings.
    #[serde(default)]
    pub bp: BpSection,
    /// MTU of the emulated interfaces.
    #[serde(default = "d_mtu")]
    pub mtu: u32,
}

fn d_mtu() -> u32 {
    1500
}

impl IpScenario {
    /// Parses and checks a scenario document; errors name the field.
    pub fn from_value(doc: &Value, name: &str) -> Result<IpScenario, LabError> {
        let s: IpScenario = doc
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| LabError::Scenario(format!("{name}: {e}")))?;
        let t = &s.transfer;
        let bad = |f: &str, v: String, e: &str| {
            Err(LabError::Scenario(format!(
                "{name}: {f} = {v}: expected {e}"
            )))
        };
        if t.file_bytes == 0 {
            return bad("transfer.file_bytes", "0".into(), "bytes > 0");
        }
        if t.blocks == 0 || t.blocks > t.file_bytes {
            return bad(
                "transfer.blocks",
                t.blocks.to_string(),
                "1 <= blocks <= file_bytes",
            );
        }
        if !(t.time_limit_s.is_finite() && t.time_limit_s > 0.0) {
            return bad(
                "transfer.time_limit_s",
                t.time_limit_s.to_string(),
                "seconds > 0",
            );
        }
        let b = &s.bp;
        if b.bundle_bytes == 0
            || b.bundles_per_block == 0
            || !(100..=65_000).contains(&b.segment_bytes)
        {
            return bad(
                "bp",
                format!("{b:?}"),
                "bundle_bytes > 0, bundles_per_block > 0, segment_bytes in [100, 65000]",
            );
        }
        for (k, sec) in [("tcp", &s.tcp), ("gateway", &s.gateway)] {
            // hybla and stp are loaded by the emulator when the kernel lacks them (emu::ip::congctl).
            if let Some(cc) = sec
                .congestion
                .as_ref()
                .filter(|cc| !emu::ip::congctl::known(cc))
            {
                return bad(
                    &format!("{k}.congestion"),
                    format!("{cc:?}"),
                    &format!(
                        "one of this kernel's ({}) or one dtnkit loads (hybla, stp)",
                        emu::ip::congctl::available().join(" ")
                    ),
                );
            }
            if let Some(c) = sec.window_clamp.filter(|c| !(1024..=1 << 30).contains(c)) {
                return bad(
                    &format!("{k}.window_clamp"),
                    c.to_string(),
                    "bytes in [1024, 1073741824]",
                );
            }
        }
        // The link models are validated by the emulator's own parser when the file is written; check them here
        // too so a bad grid fails before the first run.
        for (k, l) in [("link", &s.link), ("access", &s.access)] {
            l.forward
                .to_model(&format!("{k}.forward"), Path::new("."))
                .and_then(|_| l.ret.to_model(&format!("{k}.return"), Path::new(".")))
                .map_err(|e| LabError::Scenario(format!("{name}: {e}")))?;
        }
        Ok(s)
    }

    fn gateway(&self) -> bool {
        self.transfer.protocol == Protocol::TcpGateway
    }
}

/// How to run.
#[derive(Debug, Clone)]
pub struct IpLabOptions {
    /// The `dtnkit` binary.
    pub dtnkit: PathBuf,
    /// Work directory (cleared when an earlier lab run left it).
    pub work_dir: PathBuf,
    /// How long children may take to come up.
    pub startup_timeout: Duration,
}

impl IpLabOptions {
    /// Defaults: 20 s start-up.
    pub fn new(dtnkit: impl Into<PathBuf>, work_dir: impl Into<PathBuf>) -> Self {
        IpLabOptions {
            dtnkit: dtnkit.into(),
            work_dir: work_dir.into(),
            startup_timeout: Duration::from_secs(20),
        }
    }
}

/// The emulator's counters of the link that carries the data (`[link]`), as read from its JSON summary.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkCounters {
    /// Forward wire packets offered.
    pub fwd_received: u64,
    /// Forward packets delivered.
    pub fwd_sent: u64,
    /// Forward: lost by the loss process.
    pub fwd_lost_channel: u64,
    /// Forward: tail-dropped by the modelled queue.
    pub fwd_queue_full: u64,
    /// Return wire packets offered.
    pub ret_received: u64,
    /// Return: lost by the loss process.
    pub ret_lost_channel: u64,
    /// Return: tail-dropped.
    pub ret_queue_full: u64,
    /// Every link and direction: drops that are not model decisions.
    pub unmodelled_drops: u64,
}

/// The gateway's upstream connections (towards the receiver, over `[link]`), from the `TCP_INFO` each reported
/// when it ended (`dtnkit tcp gateway`'s JSON lines).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GatewayReport {
    /// Connections reported.
    pub connections: u64,
    /// Segments retransmitted, all connections.
    pub retransmits: u64,
    /// Smoothed RTT at the end, ms, mean over the connections (NaN without any).
    pub srtt_ms: f64,
    /// Smallest RTT measured, ms, over the connections (NaN without any).
    pub min_rtt_ms: f64,
}

impl GatewayReport {
    /// Sums the gateway's JSON lines (one [`tcp_baseline::Relayed`] per relayed connection); other lines are
    /// skipped.
    fn from_stdout(stdout: &str) -> GatewayReport {
        let relayed: Vec<tcp_baseline::Relayed> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let n = relayed.len();
        let ms = |us: u32| f64::from(us) / 1e3;
        GatewayReport {
            connections: n as u64,
            retransmits: relayed
                .iter()
                .map(|r| u64::from(r.upstream.total_retrans))
                .sum(),
            srtt_ms: if n == 0 {
                f64::NAN
            } else {
                relayed.iter().map(|r| ms(r.upstream.rtt_us)).sum::<f64>() / n as f64
            },
            min_rtt_ms: relayed
                .iter()
                .map(|r| ms(r.upstream.min_rtt_us))
                .reduce(f64::min)
                .unwrap_or(f64::NAN),
        }
    }
}

/// What one run produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IpOutcome {
    /// The whole file arrived (and, for TCP, its CRCs matched).
    pub completed: bool,
    /// Bytes delivered to the receiving application.
    pub delivered_bytes: u64,
    /// Start → last byte delivered (or → the time limit), s.
    pub transfer_s: f64,
    /// delivered × 8 / transfer_s, Mb/s.
    pub goodput_mbps: f64,
    /// TCP: segments retransmitted.
    pub retransmits: Option<u64>,
    /// TCP: the first connection's handshake, ms.
    pub handshake_ms: Option<f64>,
    /// TCP: the smallest RTT the kernel measured, ms.
    pub min_rtt_ms: Option<f64>,
    /// The data link's counters.
    pub link: LinkCounters,
    /// `tcp-gateway`: the `[access]` link's counters (sender → gateway and back).
    pub access: Option<LinkCounters>,
    /// `tcp-gateway`: what the gateway's upstream connections reported (`retransmits` is then the access leg's).
    pub gateway: Option<GatewayReport>,
    /// 1-minute load average when the run started.
    pub load_start: f64,
    /// Wall time of the run.
    pub wall: Duration,
    /// The work directory.
    pub work_dir: PathBuf,
}

/// A node as the emulator announces it (`ipemu: ready [...]`).
#[derive(Debug, Clone, Deserialize)]
struct ReadyNode {
    netns: String,
    addrs: Vec<Ipv4Addr>,
}

impl ReadyNode {
    fn path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.netns)
    }
}

pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn route_metrics(t: &TcpSection) -> Table {
    let mut n = Table::new();
    for (k, v) in [
        ("initcwnd", t.initcwnd),
        ("initrwnd", t.initrwnd),
        ("cwnd_lock", t.cwnd_lock),
    ] {
        if let Some(v) = v {
            n.insert(k.into(), Value::Integer(i64::from(v)));
        }
    }
    // The route's congestion control: connections that do not set TCP_CONGESTION themselves (TCPCL sessions of
    // the nodes) use it too.
    if let Some(cc) = &t.congestion {
        n.insert("congctl".into(), Value::String(cc.clone()));
    }
    n
}

/// The emulator configuration of a scenario: nodes `a`, (`g`,) `b`; the `[tcp]` settings on the end nodes, the
/// `[gateway]` ones on `g`; TCP metrics are not cached between connections (each block starts afresh, as in the
/// seed's simulator).
pub fn emu_toml(s: &IpScenario) -> String {
    let mut t = Table::new();
    t.insert(
        "seed".into(),
        Value::Integer((s.sim.seed & (i64::MAX as u64)) as i64),
    );
    let mut ip = Table::new();
    let nodes: &[&str] = if s.gateway() {
        &["a", "g", "b"]
    } else {
        &["a", "b"]
    };
    ip.insert(
        "nodes".into(),
        Value::Array(nodes.iter().map(|n| Value::String((*n).into())).collect()),
    );
    ip.insert("mtu".into(), Value::Integer(i64::from(s.mtu)));
    let mut sys = Table::new();
    sys.insert(
        "net.ipv4.tcp_no_metrics_save".into(),
        Value::String("1".into()),
    );
    ip.insert("sysctl".into(), Value::Table(sys));
    let mut per = Table::new();
    per.insert("a".into(), Value::Table(route_metrics(&s.tcp)));
    per.insert("b".into(), Value::Table(route_metrics(&s.tcp)));
    if s.gateway() {
        per.insert("g".into(), Value::Table(route_metrics(&s.gateway)));
    }
    ip.insert("node".into(), Value::Table(per));
    t.insert("ip".into(), Value::Table(ip));
    let base = Path::new(".");
    let pair = |l: &LinkPair| {
        let mut x = Table::new();
        x.insert(
            "forward".into(),
            Value::Table(direction_table(&l.forward, base)),
        );
        x.insert("return".into(), Value::Table(direction_table(&l.ret, base)));
        Value::Table(x)
    };
    let links = if s.gateway() {
        vec![pair(&s.access), pair(&s.link)]
    } else {
        vec![pair(&s.link)]
    };
    t.insert("link".into(), Value::Array(links));
    toml::to_string(&t).unwrap_or_default()
}

fn tcp_args(t: &TcpSection) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(c) = &t.congestion {
        v.extend(["--cc".to_string(), c.clone()]);
    }
    if let Some(b) = t.sndbuf {
        v.extend(["--sndbuf".to_string(), b.to_string()]);
    }
    if let Some(b) = t.rcvbuf {
        v.extend(["--rcvbuf".to_string(), b.to_string()]);
    }
    if let Some(b) = t.window_clamp {
        v.extend(["--window-clamp".to_string(), b.to_string()]);
    }
    v
}

fn spawn(
    opts: &IpLabOptions,
    name: &str,
    args: &[String],
    dir: &Path,
    node: &ReadyNode,
) -> Result<Child, LabError> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    Child::spawn_in(name, &opts.dtnkit, &a, dir, Some(&node.path()))
}

/// Waits for a child to end by itself within `limit`, stopping it otherwise; whether it ended in time and
/// successfully.
fn wait_exit(child: &mut Child, limit: Duration) -> bool {
    match child.wait_exit(limit) {
        Some(st) => st.success(),
        None => {
            child.stop(Duration::from_secs(1));
            false
        }
    }
}

fn link_counters(summary: &serde_json::Value, data_link: usize) -> LinkCounters {
    let get = |dir: &str, k: &str| {
        summary
            .get("links")
            .and_then(|l| l.get(data_link))
            .and_then(|l| l.get(dir))
            .and_then(|d| d.get(k))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    LinkCounters {
        fwd_received: get("forward", "received"),
        fwd_sent: get("forward", "sent"),
        fwd_lost_channel: get("forward", "lost_channel"),
        fwd_queue_full: get("forward", "queue_full"),
        ret_received: get("return", "received"),
        ret_lost_channel: get("return", "lost_channel"),
        ret_queue_full: get("return", "queue_full"),
        unmodelled_drops: summary
            .get("unmodelled_drops")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0),
    }
}

/// Runs one transfer (see the module documentation).
pub fn run_ip_transfer(s: &IpScenario, opts: &IpLabOptions) -> Result<IpOutcome, LabError> {
    let wall = Instant::now();
    let load_start = load_average();
    prepare_work_dir(&opts.work_dir)?;
    let work = std::fs::canonicalize(&opts.work_dir).map_err(|e| LabError::WorkDir {
        path: opts.work_dir.clone(),
        reason: e.to_string(),
    })?;
    let cfg = work.join("ipemu.toml");
    std::fs::write(&cfg, emu_toml(s)).map_err(io(format!("writing {}", cfg.display())))?;
    let summary_path = work.join("ipemu-summary.json");
    let cfg_s = cfg.to_string_lossy().into_owned();
    let sum_s = summary_path.to_string_lossy().into_owned();
    let mut emu = Child::spawn(
        "ipemu",
        &opts.dtnkit,
        &["emu", "--ip", "--config", &cfg_s, "--summary-json", &sum_s],
        &work,
    )?;
    let ready = wait_line(&mut emu, "ipemu: ready ", opts.startup_timeout)?;
    let nodes: Vec<ReadyNode> = serde_json::from_str(&ready).map_err(|e| LabError::Startup {
        name: "ipemu".into(),
        reason: format!("unreadable ready line {ready:?}: {e}"),
    })?;
    let (Some(a), Some(b)) = (nodes.first(), nodes.last()) else {
        return Err(LabError::Startup {
            name: "ipemu".into(),
            reason: "no nodes announced".into(),
        });
    };
    let limit = Duration::try_from_secs_f64(s.transfer.time_limit_s).unwrap_or(Duration::MAX);
    let result = match s.transfer.protocol {
        Protocol::Tcp | Protocol::TcpGateway => run_tcp(s, opts, &work, &nodes, limit),
        Protocol::BpLtp | Protocol::BpTcpcl => crate::ipnet_bp::run_bp(
            s,
            &opts.dtnkit,
            &work,
            (&a.path(), a.addrs.first().copied()),
            (&b.path(), b.addrs.first().copied()),
            limit,
            opts.startup_timeout,
        ),
    };
    emu.stop(Duration::from_secs(10));
    let mut out = result?;
    let summary: serde_json::Value = std::fs::read_to_string(&summary_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    out.link = link_counters(&summary, if s.gateway() { 1 } else { 0 });
    if s.gateway() {
        out.access = Some(link_counters(&summary, 0));
    }
    out.load_start = load_start;
    out.wall = wall.elapsed();
    out.work_dir = work;
    Ok(out)
}

fn run_tcp(
    s: &IpScenario,
    opts: &IpLabOptions,
    work: &Path,
    nodes: &[ReadyNode],
    limit: Duration,
) -> Result<IpOutcome, LabError> {
    let (Some(a), Some(b)) = (nodes.first(), nodes.last()) else {
        return Err(LabError::Scenario("no nodes".into()));
    };
    let b_addr = b.addrs.first().copied().unwrap_or(Ipv4Addr::LOCALHOST);
    let mut recv_args = vec![
        "tcp".to_string(),
        "recv".into(),
        "--listen".into(),
        format!("{b_addr}:{TCP_PORT}"),
        "--count".into(),
        s.transfer.blocks.to_string(),
        "--json".into(),
    ];
    recv_args.extend(tcp_args(&s.tcp));
    let mut recv = spawn(opts, "tcp-recv", &recv_args, work, b)?;
    wait_line(&mut recv, "listening on ", opts.startup_timeout)?;
    let mut gw = None;
    let to = if s.gateway() {
        let g = nodes
            .get(1)
            .ok_or_else(|| LabError::Scenario("no gateway node".into()))?;
        let g_left = g.addrs.first().copied().unwrap_or(Ipv4Addr::LOCALHOST);
        let mut args = vec![
            "tcp".to_string(),
            "gateway".into(),
            "--listen".into(),
            format!("{g_left}:{GATEWAY_PORT}"),
            "--to".into(),
            format!("{b_addr}:{TCP_PORT}"),
        ];
        if let Some(r) = s.tcp.rcvbuf {
            args.extend(["--listen-rcvbuf".into(), r.to_string()]);
        }
        args.extend(tcp_args(&s.gateway));
        let mut c = spawn(opts, "tcp-gateway", &args, work, g)?;
        wait_line(&mut c, "gateway: ", opts.startup_timeout)?;
        gw = Some(c);
        format!("{g_left}:{GATEWAY_PORT}")
    } else {
        format!("{b_addr}:{TCP_PORT}")
    };
    let mut send_args = vec![
        "tcp".to_string(),
        "send".into(),
        "--to".into(),
        to,
        "--size".into(),
        s.transfer.file_bytes.to_string(),
        "--blocks".into(),
        s.transfer.blocks.to_string(),
        "--time-limit".into(),
        s.transfer.time_limit_s.to_string(),
        "--json".into(),
    ];
    send_args.extend(tcp_args(&s.tcp));
    let mut send = spawn(opts, "tcp-send", &send_args, work, a)?;
    let ok = wait_exit(&mut send, limit + Duration::from_secs(30));
    recv.stop(Duration::from_secs(2));
    let gateway = gw.map(|mut g| {
        g.stop(Duration::from_secs(2));
        GatewayReport::from_stdout(&std::fs::read_to_string(&g.stdout).unwrap_or_default())
    });
    let text = std::fs::read_to_string(&send.stdout).unwrap_or_default();
    let r: serde_json::Value = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| LabError::Startup {
            name: "tcp-send".into(),
            reason: format!("no report (exit ok: {ok}): {}", send.stderr_tail(2000)),
        })?;
    let f = |k: &str| r.get(k).and_then(serde_json::Value::as_f64);
    Ok(IpOutcome {
        completed: r.get("completed").and_then(serde_json::Value::as_bool) == Some(true),
        delivered_bytes: r
            .get("delivered_bytes")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0),
        transfer_s: f("transfer_s").unwrap_or(f64::NAN),
        goodput_mbps: f("goodput_mbps").unwrap_or(f64::NAN),
        retransmits: r.get("retransmits").and_then(serde_json::Value::as_u64),
        handshake_ms: f("handshake_ms"),
        min_rtt_ms: f("min_rtt_ms"),
        gateway,
        ..IpOutcome::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_report_sums_its_connections_and_skips_other_lines() {
        let line = |retrans: u32, rtt_us: u32, min_rtt_us: u32| {
            serde_json::to_string(&tcp_baseline::Relayed {
                bytes: 1000,
                upstream: tcp_baseline::TcpInfo {
                    total_retrans: retrans,
                    rtt_us,
                    min_rtt_us,
                    ..Default::default()
                },
            })
            .unwrap()
        };
        let out = format!(
            "{}\nnot a report\n{}\n{{\"bytes\": 5}}\n",
            line(3, 12_000, 10_100),
            line(4, 11_000, 10_050)
        );
        let r = GatewayReport::from_stdout(&out);
        assert_eq!((r.connections, r.retransmits), (2, 7));
        assert!((r.srtt_ms - 11.5).abs() < 1e-9, "{r:?}");
        assert!((r.min_rtt_ms - 10.05).abs() < 1e-9, "{r:?}");
        let none = GatewayReport::from_stdout("");
        assert_eq!((none.connections, none.retransmits), (0, 0));
        assert!(none.srtt_ms.is_nan() && none.min_rtt_ms.is_nan());
    }
}
