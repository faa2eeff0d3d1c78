//! Real nodes on loopback without the emulator: a chain (or seed 002's five-node star) of `dtnkit node` processes
//! on 127.0.0.1 with static routes, one convergence layer on every hop, and one or two streams of bundles sent
//! from this process's application threads, measured the way seed 002 measured ION: goodput from the first
//! submission to the last delivery, with each node's CPU time and peak memory.
//!
//! [`run_loopback`]:
//! 1. writes a configuration per node (docs/node.md: `[[span]]`, `[[tcp_peer]]` or `[[udp_peer]]` per neighbour,
//!    a `[[route]]` per node beyond a neighbour, volatile stores unless `store.durable`);
//! 2. starts the nodes (with `affinity = "single-core"` each restricted to CPU 0 before exec, as `taskset -c 0`),
//!    waits for their application sockets and, over TCPCL, for every session to be established, so the first
//!    bundle does not wait for a handshake;
//! 3. runs each stream's sender and receiver on threads of their own (pinned to CPU 0 in single-core mode);
//! 4. reads each node's CPU seconds (`/proc/PID/stat`) and peak RSS (`VmHWM`) before stopping it, then stops all
//!    nodes at once (SIGINT, bounded grace, then SIGKILL).
//!
//! Every wait is bounded: the streams by `transfer.time_limit_s`, a node that stops answering by a watchdog that
//! kills the nodes (the blocked request then fails), and children that outlive the lab die with it.

mod cfdp;
mod layout;
mod procstat;
mod scenario;
mod stream;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::Client;

use crate::emulated::{check_socket_path, io, prepare_work_dir, wait_node};
use crate::procs::Child;
use crate::LabError;
use layout::{Layout, NodeAddrs};
pub use scenario::{
    Affinity, CfdpSection, ChainSection, Cla, LoopbackScenario, LtpSection, Method, StoreSection,
    TcpclSection, Topology, TransferSection, UdpclSection, MAX_BUNDLE_BYTES,
};

/// The CPU everything runs on with `affinity = "single-core"`.
const SINGLE_CORE: usize = 0;

/// How to run.
#[derive(Debug, Clone)]
pub struct LoopbackOptions {
    /// The `dtnkit` binary that provides `node`.
    pub dtnkit: PathBuf,
    /// Work directory (configurations, stores, node logs); cleared when an earlier lab run left it.
    pub work_dir: PathBuf,
    /// How long each node may take to come up (and its TCPCL sessions to be established).
    pub startup_timeout: Duration,
    /// How long each node may take to exit after SIGINT before it is killed.
    pub shutdown_grace: Duration,
}

impl LoopbackOptions {
    /// Defaults: 20 s start-up, 5 s shutdown grace.
    pub fn new(dtnkit: impl Into<PathBuf>, work_dir: impl Into<PathBuf>) -> Self {
        LoopbackOptions {
            dtnkit: dtnkit.into(),
            work_dir: work_dir.into(),
            startup_timeout: Duration::from_secs(20),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// One node after the run.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeStats {
    /// Node number.
    pub number: u64,
    /// User + system CPU seconds spent between the start of the streams and their end.
    pub cpu_s: f64,
    /// Peak resident memory (`VmHWM`), MB.
    pub peak_rss_mb: f64,
    /// It exited by itself after SIGINT (false: killed after the grace time).
    pub clean_exit: bool,
}

/// One stream after the run.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamOutcome {
    /// Source node.
    pub source: u64,
    /// Destination node.
    pub destination: u64,
    /// Bundles the source node stored.
    pub bundles_sent: u64,
    /// Their payload bytes.
    pub bytes_sent: u64,
    /// Bundles delivered.
    pub bundles_delivered: u64,
    /// Their payload bytes.
    pub bytes_delivered: u64,
    /// First submission → last delivery, s (0 when nothing arrived).
    pub transfer_s: f64,
    /// bytes_delivered × 8 / transfer_s, Mb/s.
    pub goodput_mbps: f64,
    /// Every stored bundle arrived with all its bytes.
    pub completed: bool,
}

/// What a loopback run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopbackOutcome {
    /// Every stream completed.
    pub completed: bool,
    /// Payload bytes delivered, all streams.
    pub delivered_bytes: u64,
    /// Earliest first submission → latest last delivery, s.
    pub transfer_s: f64,
    /// delivered_bytes × 8 / transfer_s, Mb/s.
    pub goodput_mbps: f64,
    /// Per stream.
    pub streams: Vec<StreamOutcome>,
    /// Per node, in node order.
    pub nodes: Vec<NodeStats>,
    /// The middle node (None for a direct pair).
    pub middle: Option<u64>,
    /// CPU seconds of all nodes per GB delivered.
    pub cpu_s_per_gb: f64,
    /// CPU seconds of the sending and receiving application threads.
    pub app_cpu_s: f64,
    /// 1-minute load average when the streams started.
    pub load_start: f64,
    /// Wall time of the whole run, start-up and shutdown included.
    pub wall: Duration,
    /// The work directory.
    pub work_dir: PathBuf,
}

impl LoopbackOutcome {
    /// The middle node's peak RSS, MB (NaN without a middle node).
    pub fn middle_rss_mb(&self) -> f64 {
        self.middle
            .and_then(|m| self.nodes.iter().find(|n| n.number == m))
            .map_or(f64::NAN, |n| n.peak_rss_mb)
    }
}

/// Distinct free loopback addresses for every node (bound together, then released).
fn free_addrs(n: usize) -> Result<Vec<NodeAddrs>, LabError> {
    let what = || "reserving loopback ports".to_string();
    let mut udp = Vec::new();
    let mut tcp = Vec::new();
    for _ in 0..n {
        udp.push(UdpSocket::bind("127.0.0.1:0").map_err(io(what()))?);
        udp.push(UdpSocket::bind("127.0.0.1:0").map_err(io(what()))?);
        tcp.push(TcpListener::bind("127.0.0.1:0").map_err(io(what()))?);
    }
    let u = |i: usize| -> Result<SocketAddr, LabError> { udp[i].local_addr().map_err(io(what())) };
    (0..n)
        .map(|i| {
            Ok(NodeAddrs {
                ltp: u(2 * i)?,
                udpcl: u(2 * i + 1)?,
                tcpcl: tcp[i].local_addr().map_err(io(what()))?,
            })
        })
        .collect()
}

/// Established TCPCL sessions of a node, from its status.
fn tcpcl_sessions(socket: &std::path::Path) -> Option<u64> {
    let status = Client::connect(socket).ok()?.node_status().ok()?;
    Some(status.tcpcl?.sessions_open)
}

/// Stops every child at once: SIGINT to all, then each waited for up to `grace` (then killed).
fn stop_all(children: &mut [Child], grace: Duration) -> Vec<bool> {
    std::thread::scope(|s| {
        let handles: Vec<_> = children
            .iter_mut()
            .map(|c| s.spawn(move || c.stop(grace).is_some_and(|(_, clean)| clean)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .collect()
    })
}

fn startup(name: String, reason: impl ToString) -> LabError {
    LabError::Startup {
        name,
        reason: reason.to_string(),
    }
}

/// Runs `sc` (checked by [`LoopbackScenario::from_value`]) on loopback; see the module documentation.
pub fn run_loopback(
    sc: &LoopbackScenario,
    opts: &LoopbackOptions,
) -> Result<LoopbackOutcome, LabError> {
    let wall = Instant::now();
    prepare_work_dir(&opts.work_dir)?;
    let work = std::fs::canonicalize(&opts.work_dir).map_err(|e| LabError::WorkDir {
        path: opts.work_dir.clone(),
        reason: e.to_string(),
    })?;
    let layout = Layout::of(sc);
    let addrs = free_addrs(layout.nodes.len())?;
    let cpu = (sc.chain.affinity == Affinity::SingleCore).then_some(SINGLE_CORE);
    let mut dirs = Vec::new();
    let mut children = Vec::new();
    for &n in &layout.nodes {
        let dir = work.join(format!("node{n}"));
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let cfg = dir.join("node.toml");
        std::fs::write(&cfg, layout::node_toml(sc, &layout, n, &addrs))
            .map_err(io(format!("writing {}", cfg.display())))?;
        check_socket_path(&work, &dir.join("store").join("app.sock"))?;
        let cfg_s = cfg.to_string_lossy().into_owned();
        let args = ["node", "--config", cfg_s.as_str()];
        let name = format!("node{n}");
        children.push(match cpu {
            Some(c) => Child::spawn_pinned(&name, &opts.dtnkit, &args, &dir, c)?,
            None => Child::spawn(&name, &opts.dtnkit, &args, &dir)?,
        });
        dirs.push(dir);
    }
    let socket_of = |n: u64| dirs[(n - 1) as usize].join("store").join("app.sock");
    for (c, &n) in children.iter_mut().zip(&layout.nodes) {
        wait_node(c, &socket_of(n), opts.startup_timeout)?;
    }
    if sc.chain.cla == Cla::Tcpcl {
        for (c, &n) in children.iter_mut().zip(&layout.nodes) {
            let want = layout.neighbours(n).len() as u64;
            let sock = socket_of(n);
            c.wait_for(
                opts.startup_timeout,
                Duration::from_millis(20),
                &format!("{want} TCPCL sessions not established"),
                |_| (tcpcl_sessions(&sock).unwrap_or(0) >= want).then_some(()),
            )?;
        }
    }

    // Receivers registered before any sender starts (a CFDP put's receiver is `dtnkit cfdp serve`).
    let cfdp = sc.transfer.method == Method::Cfdp;
    let mut receivers = Vec::new();
    for &(_, dst) in layout.streams.iter().filter(|_| !cfdp) {
        let name = format!("receiver at node {dst}");
        let mut rx = Client::connect(socket_of(dst)).map_err(|e| startup(name.clone(), e))?;
        rx.register(&format!("ipn:{dst}.1"))
            .map_err(|e| startup(name.clone(), e))?;
        receivers.push(rx);
    }

    let pids: Vec<u32> = children.iter().filter_map(Child::id).collect();
    let cpu_before: Vec<f64> = pids
        .iter()
        .map(|&p| procstat::cpu_seconds(p).unwrap_or(f64::NAN))
        .collect();
    let load_start = crate::ipnet::load_average();
    let t = &sc.transfer;
    let limit = Duration::try_from_secs_f64(t.time_limit_s).unwrap_or(Duration::from_secs(60));
    let deadline = Instant::now() + limit;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let watchdog = crate::procs::watchdog(pids.clone(), limit + Duration::from_secs(30), done_rx);
    let abort = Arc::new(AtomicBool::new(false));
    let results: Vec<Result<(stream::SendReport, stream::RecvReport), String>> = if cfdp {
        let (src, dst) = layout.streams.first().copied().unwrap_or((1, 2));
        vec![cfdp::run(
            sc,
            &opts.dtnkit,
            &work,
            (src, dst),
            (&socket_of(src), &socket_of(dst)),
            cpu,
            deadline,
        )
        .map_err(|e| e.to_string())]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = layout
                .streams
                .iter()
                .zip(receivers)
                .map(|(&(src, dst), rx)| {
                    let plan = stream::StreamPlan {
                        source: src,
                        destination: dst,
                        source_socket: socket_of(src),
                        bundle_bytes: t.bundle_bytes,
                        bytes: t.bytes,
                        send_for: t
                            .duration_s
                            .and_then(|d| Duration::try_from_secs_f64(d).ok())
                            .unwrap_or_default(),
                        window: t.window,
                        in_flight_bytes: t.in_flight_bytes,
                        deadline,
                        idle: Duration::try_from_secs_f64(t.idle_s)
                            .unwrap_or(Duration::from_secs(3)),
                        cpu,
                    };
                    let abort = abort.clone();
                    // A thread of its own even for one stream: pinning must not stick to the caller's thread.
                    s.spawn(move || stream::run(plan, rx, abort))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a stream thread panicked".into()))
                })
                .collect()
        })
    };
    let _ = done_tx.send(());
    let killed = watchdog.join().unwrap_or(true);

    // Readings before the nodes stop (a stopped process has no /proc entry).
    let readings: Vec<(f64, f64)> = pids
        .iter()
        .zip(&cpu_before)
        .map(|(&p, &before)| {
            (
                procstat::cpu_seconds(p).map_or(f64::NAN, |c| c - before),
                procstat::peak_rss_mb(p).unwrap_or(f64::NAN),
            )
        })
        .collect();
    let clean = stop_all(&mut children, opts.shutdown_grace);
    if killed {
        return Err(LabError::Timeout(limit + Duration::from_secs(30)));
    }
    let mut streams = Vec::new();
    let mut app_cpu_s = 0.0;
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    for (r, &(source, destination)) in results.into_iter().zip(&layout.streams) {
        let (sent, got) = r.map_err(|e| startup(format!("stream {source} -> {destination}"), e))?;
        app_cpu_s += sent.cpu_s + got.cpu_s;
        let transfer_s = match (sent.first_submit, got.last_delivery) {
            (Some(a), Some(b)) => {
                first = Some(first.map_or(a, |f| f.min(a)));
                last = Some(last.map_or(b, |l| l.max(b)));
                b.saturating_duration_since(a).as_secs_f64()
            }
            _ => 0.0,
        };
        streams.push(StreamOutcome {
            source,
            destination,
            bundles_sent: sent.bundles,
            bytes_sent: sent.bytes,
            bundles_delivered: got.bundles,
            bytes_delivered: got.bytes,
            transfer_s,
            goodput_mbps: rate_mbps(got.bytes, transfer_s),
            completed: sent.bundles > 0 && got.bundles == sent.bundles && got.bytes == sent.bytes,
        });
    }
    let delivered_bytes: u64 = streams.iter().map(|s| s.bytes_delivered).sum();
    let transfer_s = match (first, last) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    let nodes: Vec<NodeStats> = layout
        .nodes
        .iter()
        .zip(readings)
        .zip(clean)
        .map(|((&number, (cpu_s, peak_rss_mb)), clean_exit)| NodeStats {
            number,
            cpu_s,
            peak_rss_mb,
            clean_exit,
        })
        .collect();
    let cpu_total: f64 = nodes.iter().map(|n| n.cpu_s).sum();
    Ok(LoopbackOutcome {
        completed: streams.iter().all(|s| s.completed),
        delivered_bytes,
        transfer_s,
        goodput_mbps: rate_mbps(delivered_bytes, transfer_s),
        streams,
        nodes,
        middle: layout.middle,
        cpu_s_per_gb: if delivered_bytes > 0 {
            cpu_total / (delivered_bytes as f64 / 1e9)
        } else {
            f64::NAN
        },
        app_cpu_s,
        load_start,
        wall: wall.elapsed(),
        work_dir: work,
    })
}

fn rate_mbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds / 1e6
    } else {
        f64::NAN
    }
}
