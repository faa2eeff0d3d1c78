//! [`run_emulated`]: one scenario, two real nodes, the real-time relay, a DTNperf flow, then a clean shutdown.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sim::Scenario;
use traffic::{ClientReport, Pacing, ServerStats, Stop};

use crate::config::{self, Addresses, NodeFileOptions};
use crate::emu_report::{self, EmuCounters};
use crate::perf::{self, ClientOptions, ServerOptions};
use crate::procs::Child;
use crate::LabError;

/// File that marks a directory as a lab work directory, so a later run may clear it.
const MARKER: &str = ".dtnkit-lab";
/// Unix socket paths are limited to 108 bytes including the terminator.
pub(crate) const MAX_SOCKET_PATH: usize = 100;

/// How to run an emulated experiment.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// The `dtnkit` binary that provides `node` and `emu` (`std::env::current_exe()` from the CLI,
    /// `env!("CARGO_BIN_EXE_dtnkit")` in tests).
    pub dtnkit: PathBuf,
    /// Directory for configurations, stores, logs and CSV outputs. Created if missing; an earlier lab run's
    /// directory is cleared; any other non-empty directory is refused.
    pub work_dir: PathBuf,
    /// Generate for this long instead of the flow's `duration_s` (or the scenario's `sim.duration_s`). Data and
    /// bundle-count stop rules of the flow are kept.
    pub duration: Option<Duration>,
    /// After generation stops, how long to wait for outstanding ACKs.
    pub drain_timeout: Duration,
    /// How long each child may take to come up.
    pub startup_timeout: Duration,
    /// How long each child may take to exit after SIGINT before it is killed.
    pub shutdown_grace: Duration,
    /// fsync every store commit in the nodes (the real node's default).
    pub durable_store: bool,
    /// Store quota of each node.
    pub store_quota_bytes: u64,
    /// Set by the caller to end the run early (the outcome is still returned, marked cancelled).
    pub cancel: Option<Arc<AtomicBool>>,
}

impl LabOptions {
    /// Defaults: 5 s drain, 20 s startup, 5 s shutdown grace, durable 1 GiB stores.
    pub fn new(dtnkit: impl Into<PathBuf>, work_dir: impl Into<PathBuf>) -> Self {
        LabOptions {
            dtnkit: dtnkit.into(),
            work_dir: work_dir.into(),
            duration: None,
            drain_timeout: Duration::from_secs(5),
            startup_timeout: Duration::from_secs(20),
            shutdown_grace: Duration::from_secs(5),
            durable_store: true,
            store_quota_bytes: 1 << 30,
            cancel: None,
        }
    }
}

/// Where the run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Writing configurations and starting the children.
    Starting,
    /// The client generates bundles.
    Running,
    /// Generation stopped; waiting for the last ACKs.
    Draining,
    /// Stopping the children and collecting their outputs.
    Stopping,
}

/// A progress snapshot (sent about every 100 ms while traffic runs).
#[derive(Debug, Clone, Copy)]
pub struct LabProgress {
    /// Phase.
    pub phase: Phase,
    /// Time since traffic started (zero before).
    pub elapsed: Duration,
    /// The flow's generation time.
    pub duration: Duration,
    /// Client counters so far (goodput = acknowledged bits / (last ACK − first send)).
    pub report: ClientReport,
    /// Bundles sent, not yet acknowledged.
    pub in_flight: usize,
}

/// One node's files after the run.
#[derive(Debug, Clone)]
pub struct NodeRun {
    /// ipn node number.
    pub number: u64,
    /// Its directory (configuration, store, logs, stderr).
    pub dir: PathBuf,
    /// Its configuration file.
    pub config: PathBuf,
    /// LTP segment CSV log (`docs/ltp-segment-log.md`).
    pub segment_log: PathBuf,
    /// Bundle event CSV log (`docs/bundle-event-log.md`).
    pub bundle_log: PathBuf,
    /// The process's standard error.
    pub stderr: PathBuf,
    /// True if it exited by itself after SIGINT (false: killed after the grace time).
    pub clean_exit: bool,
}

/// What an emulated run produced.
#[derive(Debug, Clone)]
pub struct LabOutcome {
    /// The work directory.
    pub work_dir: PathBuf,
    /// The link's `a` node, then its `b` node.
    pub nodes: Vec<NodeRun>,
    /// Node number of the DTNperf client.
    pub client_node: u64,
    /// Node number of the DTNperf server.
    pub server_node: u64,
    /// The emulator configuration used.
    pub emu_config: PathBuf,
    /// Relay counters (forward = the link's a → b).
    pub emu: EmuCounters,
    /// True if the relay exited by itself after SIGINT.
    pub emu_clean_exit: bool,
    /// Erasure-trace files generated from presets.
    pub trace_files: Vec<PathBuf>,
    /// Client counters and application goodput.
    pub client: ClientReport,
    /// True when every bundle sent was acknowledged.
    pub all_acked: bool,
    /// True when the caller cancelled the run.
    pub cancelled: bool,
    /// Server counters.
    pub server: ServerStats,
    /// Per-bundle client CSV (`seq,bytes,sent_ns,delivered_ns,acked_ns,rtt_ns`; one clock for all columns).
    pub bundle_csv: PathBuf,
    /// Per-bundle server CSV.
    pub server_csv: PathBuf,
    /// The client's per-bundle records (the rows of `bundle_csv`).
    pub records: Vec<traffic::BundleRecord>,
    /// Generation time of the flow.
    pub flow_duration: Duration,
    /// Rate of the direction carrying the data, bit/s (None: unlimited).
    pub data_rate_bps: Option<f64>,
    /// Fraction of the flow's duration the data direction's erasure trace is good (None: no trace loss).
    pub data_good_fraction: Option<f64>,
    /// Wall time of the whole run, start-up and shutdown included.
    pub wall: Duration,
    /// Scenario settings without a real-time counterpart.
    pub warnings: Vec<String>,
}

pub(crate) fn io(what: String) -> impl FnOnce(std::io::Error) -> LabError {
    move |source| LabError::Io { what, source }
}

/// Creates the work directory, clearing it when an earlier lab run left it; refuses other non-empty directories.
pub(crate) fn prepare_work_dir(dir: &Path) -> Result<(), LabError> {
    let wd = |reason: String| LabError::WorkDir {
        path: dir.to_path_buf(),
        reason,
    };
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(|e| wd(e.to_string()))?;
        if entries.next().is_some() {
            if !dir.join(MARKER).exists() {
                return Err(wd(format!(
                    "not empty and not an earlier lab run (no {MARKER} file); choose another directory"
                )));
            }
            std::fs::remove_dir_all(dir).map_err(|e| wd(format!("clearing: {e}")))?;
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| wd(format!("creating: {e}")))?;
    std::fs::write(
        dir.join(MARKER),
        "written by the dtnkit lab; the next run clears this directory\n",
    )
    .map_err(|e| wd(e.to_string()))
}

/// Four distinct free UDP ports on loopback (bound together, then released).
pub(crate) fn free_addrs() -> Result<Addresses, LabError> {
    let socks: Vec<UdpSocket> = (0..4)
        .map(|_| UdpSocket::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(io("reserving loopback ports".into()))?;
    let addr = |i: usize| -> Result<SocketAddr, LabError> {
        socks
            .get(i)
            .ok_or_else(|| LabError::Io {
                what: "reserving loopback ports".into(),
                source: std::io::Error::other("socket missing"),
            })?
            .local_addr()
            .map_err(io("reading a reserved port".into()))
    };
    Ok(Addresses {
        node_a: addr(0)?,
        node_b: addr(1)?,
        listen_a: addr(2)?,
        listen_b: addr(3)?,
    })
}

/// Refuses a node application socket path the kernel cannot bind (Unix socket paths are short).
pub(crate) fn check_socket_path(work: &Path, socket: &Path) -> Result<(), LabError> {
    if socket.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(LabError::WorkDir {
            path: work.to_path_buf(),
            reason: format!(
                "the node socket path {} is longer than {MAX_SOCKET_PATH} bytes; use a shorter directory",
                socket.display()
            ),
        });
    }
    Ok(())
}

/// Waits until a node answers on its application socket.
pub(crate) fn wait_node(
    child: &mut Child,
    socket: &Path,
    timeout: Duration,
) -> Result<(), LabError> {
    let what = format!("no answer on {}", socket.display());
    child.wait_for(timeout, Duration::from_millis(20), &what, |_| {
        client::Client::connect(socket)
            .and_then(|mut c| c.status())
            .ok()
            .map(|_| ())
    })
}

/// Waits for a line starting with `prefix` on the child's standard error; returns the rest of the line.
pub(crate) fn wait_stderr_line(
    child: &mut Child,
    prefix: &str,
    timeout: Duration,
) -> Result<String, LabError> {
    child.wait_for(timeout, Duration::from_millis(10), "not ready", |c| {
        let text = std::fs::read_to_string(&c.stderr).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::to_string)
    })
}

/// Waits until the relay printed its start line (`relay: ...` on standard error).
pub(crate) fn wait_relay(child: &mut Child, timeout: Duration) -> Result<(), LabError> {
    wait_stderr_line(child, "relay:", timeout).map(|_| ())
}

/// Sets a flag when dropped, so a helper thread stops on every exit path of its scope.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `scn` as an emulated experiment (see the crate documentation). `progress` is called from this thread.
///
/// Children are stopped on every path: on success with SIGINT and a bounded wait, on error or panic by
/// kill-on-drop. The scenario must have exactly two nodes, one link, one `[[traffic]]` flow and no contacts.
pub fn run_emulated(
    scn: &Scenario,
    opts: &LabOptions,
    progress: &mut dyn FnMut(&LabProgress),
) -> Result<LabOutcome, LabError> {
    let wall = Instant::now();
    let topo = config::topology(scn)?;
    let warnings = config::unmapped_settings(scn, &topo);
    prepare_work_dir(&opts.work_dir)?;
    // Absolute from here on: children run in their own directories and get paths as arguments.
    let work = std::fs::canonicalize(&opts.work_dir).map_err(|e| LabError::WorkDir {
        path: opts.work_dir.clone(),
        reason: e.to_string(),
    })?;
    let flow = topo.traffic;
    let duration = config::flow_duration(scn, flow, opts.duration);
    let idle = ClientReport::default();
    let mut report = |phase: Phase, elapsed: Duration, r: ClientReport, in_flight: usize| {
        progress(&LabProgress {
            phase,
            elapsed,
            duration,
            report: r,
            in_flight,
        })
    };
    report(Phase::Starting, Duration::ZERO, idle, 0);

    // Channel models, with presets turned into trace files exactly as the simulator generates them.
    let link = topo.link;
    let (mut fwd, mut ret) = (link.forward.clone(), link.ret.clone());
    let mut trace_files = Vec::new();
    for (k, (preset, dir, name)) in [
        (&link.forward_trace_preset, &mut fwd, "forward"),
        (&link.return_trace_preset, &mut ret, "return"),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(p) = preset {
            let file = work.join(format!("{name}-trace-{p}.rle"));
            config::apply_trace_preset(dir, p, scn.sim.seed, topo.link_index, k as u64, &file)?;
            trace_files.push(file);
        }
    }
    let base = if scn.base_dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        scn.base_dir.clone()
    };
    let base = std::fs::canonicalize(&base).unwrap_or(base);

    // Configurations.
    let addrs = free_addrs()?;
    let node_opts = NodeFileOptions {
        durable: opts.durable_store,
        quota_bytes: opts.store_quota_bytes,
    };
    let (na, nb) = (topo.node_a.number, topo.node_b.number);
    let plans = [
        (
            na,
            nb,
            addrs.node_a,
            addrs.listen_a,
            config::span_plan(topo.node_a, &fwd, &ret),
        ),
        (
            nb,
            na,
            addrs.node_b,
            addrs.listen_b,
            config::span_plan(topo.node_b, &ret, &fwd),
        ),
    ];
    let mut nodes = Vec::new();
    for (n, peer, bind, relay, span) in &plans {
        let dir = config::node_dir(&work, *n);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let cfg = dir.join("node.toml");
        std::fs::write(
            &cfg,
            config::node_toml(*n, *bind, *peer, *relay, span, &node_opts),
        )
        .map_err(io(format!("writing {}", cfg.display())))?;
        let socket = dir.join("store").join("app.sock");
        check_socket_path(&work, &socket)?;
        nodes.push(NodeRun {
            number: *n,
            segment_log: dir.join("segments.csv"),
            bundle_log: dir.join("bundles.csv"),
            stderr: dir.join("node.err"),
            config: cfg,
            dir,
            clean_exit: false,
        });
    }
    let emu_config = work.join("emu.toml");
    let link_seed = config::mix(scn.sim.seed, topo.link_index as u64, 1) & (i64::MAX as u64);
    std::fs::write(
        &emu_config,
        config::emu_toml(link_seed, &addrs, &fwd, &ret, &base),
    )
    .map_err(io(format!("writing {}", emu_config.display())))?;

    // Children: the nodes first (idle until traffic starts), then the relay, so the relay's clock (and the trace
    // replay) starts just before the first bundle, as the simulator's clock does.
    // Both nodes are spawned before either is waited for: each node's log clock starts at its own start, so
    // starting them together keeps the two segment logs' time bases within the spawn skew of each other.
    let mut children: Vec<Child> = Vec::new();
    for n in &nodes {
        let cfg = n.config.to_string_lossy().into_owned();
        children.push(Child::spawn(
            "node",
            &opts.dtnkit,
            &["node", "--config", &cfg],
            &n.dir,
        )?);
    }
    for (c, n) in children.iter_mut().zip(&nodes) {
        wait_node(
            c,
            &n.dir.join("store").join("app.sock"),
            opts.startup_timeout,
        )?;
    }
    let emu_cfg = emu_config.to_string_lossy().into_owned();
    let mut emu = Child::spawn("emu", &opts.dtnkit, &["emu", "--config", &emu_cfg], &work)?;
    wait_relay(&mut emu, opts.startup_timeout)?;

    // Traffic: server thread on the receiving node, client on this thread.
    let (client_node, server_node) = (flow.from, flow.to);
    let socket_of = |n: u64| config::node_dir(&work, n).join("store").join("app.sock");
    let lifetime_ms = (flow.lifetime_s * 1e3).clamp(1.0, u64::MAX as f64 / 2.0) as u64;
    let pacing = match (flow.window, flow.interval_ms) {
        (Some(w), _) => Pacing::Window(w),
        (None, Some(ms)) => Pacing::Interval(
            Duration::try_from_secs_f64(ms / 1e3).unwrap_or(Duration::from_millis(1)),
        ),
        (None, None) => Pacing::Window(1),
    };
    let stop = match (flow.bytes, flow.bundles) {
        (Some(b), _) if opts.duration.is_none() => Stop::Bytes(b),
        (_, Some(n)) if opts.duration.is_none() => Stop::Bundles(n),
        _ => Stop::Duration(duration),
    };
    let client_opts = ClientOptions {
        socket: socket_of(client_node),
        src_endpoint: format!("ipn:{client_node}.{}", flow.client_service),
        dst: format!("ipn:{server_node}.{}", flow.server_service),
        pacing,
        stop,
        payload_size: flow.bundle_size,
        lifetime_ms,
        priority: 1,
        drain_timeout: opts.drain_timeout,
        connect_timeout: opts.startup_timeout,
        store_full_timeout: Duration::from_secs(10),
        echo: false,
    };
    let server_opts = ServerOptions {
        socket: socket_of(server_node),
        endpoint: client_opts.dst.clone(),
        ack_lifetime_ms: lifetime_ms,
        ack_priority: 1,
        max_bundles: None,
        connect_timeout: opts.startup_timeout,
        store_full_timeout: Duration::from_secs(10),
    };
    let server_csv = work.join("perf-server.csv");
    let bundle_csv = work.join("perf-client.csv");
    let never = AtomicBool::new(false);
    let cancel: &AtomicBool = opts.cancel.as_deref().unwrap_or(&never);
    let server_stop = AtomicBool::new(false);
    // Every wait below is bounded by the flow's own rules except a request to a node that stopped answering;
    // the watchdog bounds those by killing the children, which makes the blocked calls fail.
    let limit = Duration::try_from_secs_f64(flow.start_s).unwrap_or_default()
        + duration
        + opts.drain_timeout
        + Duration::from_secs(30);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let pids = children
        .iter()
        .chain(std::iter::once(&emu))
        .filter_map(Child::id)
        .collect();
    let watchdog = crate::procs::watchdog(pids, limit, done_rx);
    let epoch = Instant::now();
    let (client_run, server_stats) = std::thread::scope(|s| {
        let server = s.spawn(|| {
            let f = std::fs::File::create(&server_csv)
                .map_err(io(format!("creating {}", server_csv.display())))?;
            let mut w = std::io::BufWriter::new(f);
            perf::run_server(&server_opts, epoch, &server_stop, Some(&mut w), &mut |_| {}).map_err(
                |source| LabError::Perf {
                    role: "server",
                    source,
                },
            )
        });
        let client = {
            let _stop_server = SetOnDrop(&server_stop);
            let start = Duration::try_from_secs_f64(flow.start_s).unwrap_or_default();
            let deadline = Instant::now() + start;
            while Instant::now() < deadline && !cancel.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10).min(deadline - Instant::now()));
            }
            perf::run_client(&client_opts, epoch, cancel, &mut |p| {
                let phase = if p.draining {
                    Phase::Draining
                } else {
                    Phase::Running
                };
                report(phase, p.elapsed, p.report, p.in_flight);
            })
            .map_err(|source| LabError::Perf {
                role: "client",
                source,
            })
        };
        let server = server.join().unwrap_or_else(|_| {
            Err(LabError::Io {
                what: "the DTNperf server thread".into(),
                source: std::io::Error::other("panicked"),
            })
        });
        (client, server)
    });
    let _ = done_tx.send(());
    if watchdog.join().unwrap_or(true) {
        return Err(LabError::Timeout(limit));
    }
    let client_run = client_run?;
    let server_stats = server_stats?;
    report(
        Phase::Stopping,
        client_run.elapsed,
        client_run.report,
        (client_run.report.sent - client_run.report.acked) as usize,
    );

    // Shutdown: nodes, then the relay; collect the relay's summary.
    for (c, n) in children.iter_mut().zip(nodes.iter_mut()) {
        n.clean_exit = c.stop(opts.shutdown_grace).is_some_and(|(_, clean)| clean);
    }
    let emu_clean_exit = emu
        .stop(opts.shutdown_grace)
        .is_some_and(|(_, clean)| clean);
    let emu_counters = emu_report::parse(&std::fs::read_to_string(&emu.stdout).unwrap_or_default());
    // Node stderr files are named after the child ("node.err"), already in each node's directory.

    let f = std::fs::File::create(&bundle_csv)
        .map_err(io(format!("creating {}", bundle_csv.display())))?;
    perf::write_client_csv(&mut std::io::BufWriter::new(f), &client_run)
        .map_err(io(format!("writing {}", bundle_csv.display())))?;

    let data_dir = if client_node == na { &fwd } else { &ret };
    Ok(LabOutcome {
        work_dir: work,
        nodes,
        client_node,
        server_node,
        emu_config,
        emu: emu_counters,
        emu_clean_exit,
        trace_files,
        client: client_run.report,
        all_acked: client_run.complete,
        cancelled: client_run.cancelled,
        server: server_stats,
        bundle_csv,
        server_csv,
        records: client_run.records.clone(),
        flow_duration: duration,
        data_rate_bps: data_dir.rate_bps,
        data_good_fraction: config::trace_good_fraction(data_dir, &base, duration),
        wall: wall.elapsed(),
        warnings,
    })
}
