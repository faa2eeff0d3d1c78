//! `dtnkit node`: the real-time node — the BP agent with its persistent store, the LTP
//! convergence layer over UDP, TCPCL (v4, and v3 for ION, HDTN and DTNME) and UDPCL,
//! contact-plan-driven links and the application socket.
//!
//! # Threads
//!
//! - **LTP thread** ([`ltp_thread`]): the UDP socket and the `ltp::Engine`; batched
//!   `recvmmsg`/`sendmmsg` (GSO when available), nanosecond `ppoll` waits, pacing by the
//!   engine's token bucket. Exchanges whole blocks and session results with the agent thread.
//! - **Agent thread** ([`agent_thread`]): `bp::Agent` over a `RedbStore`, the contact plan's
//!   link schedule and every application request.
//! - **Accept thread** plus one **reader thread** and one **writer thread per application
//!   connection** ([`app`]).
//! - **TCPCL** ([`tcpcl`]): a listener, one connector per configured
//!   peer (reconnecting with back-off) and one thread per session driving a
//!   `tcpcl::AnySession` (TCPCLv4 or v3).
//! - **UDPCL** ([`udpcl`]): a receive thread and a send thread on one UDP socket.
//!
//! The agent thread routes each bundle to its neighbour's convergence layer ([`cla`]).
//!
//! The threads talk only through the messages and handles of [`messages`] and the shared
//! counters of [`counters`]; no thread module imports another. [`Node::start`] wires them.
//! Channels are bounded (`std::sync::mpsc::sync_channel`); nothing is locked per segment.
//!
//! # Durability
//!
//! Spans run with `defer_final_report`: the report that lets the previous hop delete a block's
//! bundles leaves only after the agent committed them. The RTO must exceed a store commit
//! (milliseconds with fsync). TCPCL sessions run with `defer_final_ack` for the same reason:
//! a transfer's final XFER_ACK leaves after the commit. UDPCL has no acknowledgment.
//!
//! [`sd_notify`] tells systemd when the node is ready (`Type=notify`).

#![warn(missing_docs)]

mod agent_thread;
mod app;
mod cla;
mod cla_peer_stats;
pub mod clock;
pub mod config;
mod contacts;
mod counters;
mod fec_status;
mod hardening_status;
mod ingress;
mod ltp_source;
mod ltp_spans;
mod ltp_thread;
mod messages;
pub mod metrics;
mod plan_cla;
mod process_stats;
mod ratelog;
mod reports;
pub mod sd_notify;
mod startup;
mod store_timing;
mod tcpcl;
mod tcpcl_limits;
mod tcpcl_tls;
mod udpcl;

use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bp::{Agent, AgentConfig, ContactPlan, LinkEventKind, NodeRange, RedbStore};

pub use config::{ConfigError, NodeConfig, Validated};
pub use ltp_source::AcceptFrom;
pub use ltp_thread::BP_CLIENT_SERVICE;

use agent_thread::AgentThread;
use cla::{ClaKind, TcpRouter};
use counters::{LtpCounters, TcpclCounters, UdpclCounters};
use ltp_thread::LtpThread;
use messages::{AgentInput, LinkChange, ToLtp, ToUdp};

/// Longest wait at shutdown for TCPCL sessions to end (each has its own 2 s grace).
const SESSION_END_WAIT: Duration = Duration::from_secs(3);

/// Why a node could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// Invalid configuration or contact plan (a user error: exit code 2).
    #[error("{0}")]
    Config(String),
    /// A configuration value that is well-formed but unusable on this host, found at start-up
    /// (a user error: exit code 2): "field `NAME` = VALUE: expected ..." (the caller prefixes
    /// the configuration file).
    #[error("{0}")]
    ConfigValue(String),
    /// The store could not be opened or failed.
    #[error("bundle store {path}: {msg}")]
    Store {
        /// Store directory.
        path: String,
        /// Error.
        msg: String,
    },
    /// Socket or thread setup failed.
    #[error("{0}")]
    Io(String),
}

/// A running node; [`Node::shutdown`] stops it, dropping it stops it too.
pub struct Node {
    stop: Arc<AtomicBool>,
    agent_tx: std::sync::mpsc::SyncSender<AgentInput>,
    ltp_tx: std::sync::mpsc::SyncSender<ToLtp>,
    threads: Vec<std::thread::JoinHandle<()>>,
    socket_path: std::path::PathBuf,
    ltp_addr: SocketAddr,
    udp_tx: Option<std::sync::mpsc::SyncSender<ToUdp>>,
    tcpcl_addr: Option<SocketAddr>,
    udpcl_addr: Option<SocketAddr>,
    /// TCPCL counters: shutdown waits for every session to have ended (SESS_TERM exchanged).
    tcp_counters: Option<Arc<TcpclCounters>>,
    monitor: Option<metrics::Monitor>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("socket", &self.socket_path)
            .field("ltp", &self.ltp_addr)
            .finish()
    }
}

fn pin_to(cpu: Option<usize>) {
    let Some(cpu) = cpu else { return };
    // SAFETY: cpu_set_t is plain old data; CPU_SET writes within it; the call affects only
    // the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!("dtnkit node: cannot pin thread to CPU {cpu}");
        }
    }
}

/// Creates a CSV log file; a log left by an earlier run (e.g. before a crash) is kept, renamed
/// with the DTN time of this start appended (`bundles.csv.848650000000`).
fn create_log(p: &Path, start_dtn: u64) -> std::io::Result<std::fs::File> {
    if p.exists() {
        let mut old = p.as_os_str().to_owned();
        old.push(format!(".{start_dtn}"));
        std::fs::rename(p, old)?;
    }
    std::fs::File::create(p)
}

/// Loads the contact plan and turns its link events for this node into a schedule of LTP
/// link changes (DTN time). Peers that never appear in the plan stay up all the time.
fn plan_schedule(plan: &ContactPlan, cfg: &Validated) -> (Vec<LinkChange>, Vec<u64>) {
    let node = cfg.raw.node;
    let mut changes = Vec::new();
    let mut planned = Vec::new();
    for ev in plan.link_events(node, 0) {
        if !cfg.spans.iter().any(|s| s.peer == ev.neighbour) {
            continue;
        }
        if !planned.contains(&ev.neighbour) {
            planned.push(ev.neighbour);
        }
        let (up, rate_bps, owlt) = match ev.kind {
            LinkEventKind::Up { owlt_ms, .. } => (
                true,
                ev.kind.rate_bits_per_s().unwrap_or(0),
                owlt_ms.map(Duration::from_millis),
            ),
            LinkEventKind::Down => (false, 0, None),
        };
        changes.push(LinkChange {
            at_ms: plan.to_dtn_ms(ev.at_ms),
            peer: ev.neighbour,
            up,
            rate_bps,
            owlt,
        });
    }
    changes.sort_by_key(|c| c.at_ms);
    (changes, planned)
}

impl Node {
    /// Starts a node from a validated configuration. Errors name what failed.
    pub fn start(cfg: Validated) -> Result<Node, NodeError> {
        let start_dtn = clock::dtn_now_ms();
        let plan = match &cfg.contact_plan {
            Some(p) => {
                let plan = ContactPlan::load(p, start_dtn)
                    .map_err(|e| NodeError::Config(e.to_string()))?;
                plan_cla::check(&plan, &p.display().to_string(), &cfg)
                    .map_err(NodeError::Config)?;
                Some(plan)
            }
            None => None,
        };
        startup::store_dir(&cfg.store_path)?;
        startup::socket_path(&cfg.socket_path, cfg.raw.app.socket.is_some())?;
        let store_opts = bp::store::StoreOptions {
            cache_bytes: usize::try_from(cfg.raw.store.cache_mb << 20).unwrap_or(usize::MAX),
            hot_cache_bytes: cfg.raw.store.hot_cache_mb << 20,
            durable: cfg.raw.store.durable,
            ..bp::store::StoreOptions::default()
        };
        let store = RedbStore::open_with(&cfg.store_path.join("bundles.redb"), &store_opts)
            .map_err(|e| NodeError::Store {
                path: cfg.store_path.display().to_string(),
                msg: e.to_string(),
            })?;
        let mut acfg = AgentConfig::new(cfg.raw.node);
        acfg.store_quota_bytes = cfg.raw.store.quota_bytes;
        acfg.max_bundle_size = cfg.raw.bp.max_bundle_size;
        acfg.default_lifetime_ms = cfg.raw.bp.default_lifetime_ms;
        acfg.echo_service = (cfg.raw.bp.echo_service != 0).then_some(cfg.raw.bp.echo_service);
        acfg.status_reports = cfg.raw.bp.status_reports;
        acfg.refusal_backoff_first_ms = cfg.raw.bp.refusal_backoff_first_ms;
        acfg.refusal_backoff_max_ms = cfg.raw.bp.refusal_backoff_max_ms;
        let store = store_timing::TimedStore::new(store);
        let mut agent = Agent::open(acfg, store, start_dtn).map_err(|e| NodeError::Store {
            path: cfg.store_path.display().to_string(),
            msg: e.to_string(),
        })?;
        if !cfg.bpsec_rules.is_empty() {
            let policy = bpsec::Policy::new(cfg.bpsec_rules.clone()).map_err(NodeError::Config)?;
            agent.set_security(Some(policy));
        }
        if let Some(p) = &cfg.bundle_log {
            let f =
                create_log(p, start_dtn).map_err(|e| startup::log_error("log.bundles", p, &e))?;
            agent.set_event_sink(Some(Box::new(bp::CsvBundleLog::new(
                std::io::BufWriter::new(f),
            ))));
        }
        for r in &cfg.raw.route {
            let range = NodeRange::new(r.dest, r.dest_last.unwrap_or(r.dest))
                .map_err(|e| NodeError::Config(format!("route: {e}")))?;
            agent
                .static_routes_mut()
                .add(range, r.via)
                .map_err(|e| NodeError::Config(format!("route: {e}")))?;
        }
        let (links, planned) = match &plan {
            Some(p) => plan_schedule(p, &cfg),
            None => (Vec::new(), Vec::new()),
        };
        // Every neighbour the plan has a contact to, whatever its convergence layer.
        let mut plan_neighbours: Vec<u64> = Vec::new();
        if let Some(p) = &plan {
            for ev in p.link_events(cfg.raw.node, 0) {
                if !plan_neighbours.contains(&ev.neighbour) {
                    plan_neighbours.push(ev.neighbour);
                }
            }
        }
        // Spans and UDPCL peers outside the plan are up from the start (at the span's rate);
        // TCPCL peers outside the plan are up while a session to them is established.
        for s in &cfg.spans {
            if !planned.contains(&s.peer) {
                agent.link_up(start_dtn, s.peer, s.cfg.rate_bps);
            }
        }
        for u in &cfg.udp_peers {
            if !plan_neighbours.contains(&u.peer) {
                agent.link_up(start_dtn, u.peer, 0);
            }
        }
        let mut kinds = std::collections::HashMap::new();
        for s in &cfg.spans {
            kinds.insert(s.peer, ClaKind::Ltp);
        }
        for t in &cfg.tcp_peers {
            kinds.insert(t.peer, ClaKind::Tcp);
        }
        for u in &cfg.udp_peers {
            kinds.insert(u.peer, ClaKind::Udp);
        }
        let tcp_router = TcpRouter::new(cfg.tcp_peers.iter().map(|t| t.peer), &plan_neighbours);
        agent.set_contact_plan(plan, true);

        // LTP engine.
        let mut ecfg = ltp::EngineConfig::new(cfg.engine_id);
        ecfg.seed ^= start_dtn;
        ecfg.max_total_import_bytes = cfg.ltp_max_import_bytes();
        // The LTP engine with its FEC layer (spans without `[span.fec]` pass straight through).
        let mut engine = fec::Stack::new(ltp::Engine::new(ecfg)).with_seed(start_dtn ^ 0xfec);
        let mut peers = std::collections::HashMap::new();
        for s in &cfg.spans {
            // A span with neither a rate nor adaptive pacing overruns a slower receiver.
            let planned_rates: Vec<u64> = links
                .iter()
                .filter(|c| c.peer == s.peer && c.up)
                .map(|c| c.rate_bps)
                .collect();
            if let Some(w) = s.pacing_warning(&planned_rates) {
                eprintln!("dtnkit node: warning: {w}");
            }
            if let Some(w) = s.profile_warning() {
                eprintln!("dtnkit node: warning: {w}");
            }
        }
        for s in &cfg.spans {
            let mut sc = ltp::SpanConfig::new(s.engine_id);
            if s.adaptive(planned.contains(&s.peer)) {
                sc.adaptive_rate = Some(ltp::AdaptiveRate::default());
            }
            sc.max_segment_size = s.cfg.max_segment_size;
            sc.max_export_sessions = s.cfg.max_sessions;
            sc.aggregation_size_limit = s.aggregation_bytes;
            sc.aggregation_time_limit = s.aggregation_time;
            sc.aggregation_max_items = s.max_bundles_per_block;
            sc.pacing_max_burst_bytes = s.max_burst_bytes;
            sc.rto = s.rto;
            sc.rto_backoff = s.rto_backoff();
            sc.owlt = s.owlt;
            sc.rate_bps = s.cfg.rate_bps;
            if s.cfg.burst_bytes > 0 {
                sc.pacing_burst_bytes = s.cfg.burst_bytes;
            }
            if let Some(t) = s.burst_time {
                sc.pacing_burst_time = t;
            }
            sc.max_import_sessions = s.cfg.max_import_sessions;
            sc.max_red_bytes_per_session = s.max_block_bytes;
            sc.session_number_bits = cfg.raw.ltp.session_number_bits;
            sc.defer_final_report = true;
            sc.signal_replication = s.cfg.signal_replication.unwrap_or(1);
            engine.add_span(sc);
            if let Some(f) = &s.fec {
                engine
                    .add_fec_span(f.clone())
                    .map_err(|e| NodeError::Config(format!("span to node {}: fec.{e}", s.peer)))?;
            }
            if planned.contains(&s.peer) {
                engine.set_link_down(Duration::ZERO, s.engine_id);
            }
            peers.insert(s.peer, (s.engine_id, s.address));
        }
        if let Some(p) = &cfg.segment_log {
            let f = create_log(p, start_dtn)
                .map_err(|e| startup::log_error("log.ltp_segments", p, &e))?;
            engine.set_segment_sink(Some(Box::new(ltp::CsvSegmentLog::new(
                std::io::BufWriter::new(f),
            ))));
            engine.set_fec_logging(true);
        }
        let (sock, _) = udpio::bind(cfg.bind, cfg.raw.ltp.socket_buffer_bytes)
            .map_err(|e| startup::bind_error("bind", cfg.bind, &e))?;
        let ltp_addr = sock
            .local_addr()
            .map_err(|e| NodeError::Io(e.to_string()))?;
        let wake_target = if ltp_addr.ip().is_unspecified() {
            SocketAddr::new(
                if ltp_addr.is_ipv4() {
                    std::net::Ipv4Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv6Addr::LOCALHOST.into()
                },
                ltp_addr.port(),
            )
        } else {
            ltp_addr
        };
        let waker = UdpSocket::bind(SocketAddr::new(wake_target.ip(), 0))
            .map_err(|e| NodeError::Io(format!("waker socket: {e}")))?;
        let waker_addr = waker
            .local_addr()
            .map_err(|e| NodeError::Io(e.to_string()))?;

        // Application socket.
        if let Some(dir) = cfg.socket_path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::remove_file(&cfg.socket_path);
        let listener = UnixListener::bind(&cfg.socket_path).map_err(|e| {
            startup::socket_bind_error(&cfg.socket_path, cfg.raw.app.socket.is_some(), &e)
        })?;

        // The monitor starts before any other thread, so a listener that cannot bind stops
        // the start cleanly; it reads the status through the socket bound above.
        let monitor = match &cfg.metrics {
            Some(m) => {
                Some(metrics::Monitor::start(m, cfg.socket_path.clone()).map_err(NodeError::Io)?)
            }
            None => None,
        };

        let (agent_tx, agent_rx) = sync_channel::<AgentInput>(4096);
        let (ltp_tx, ltp_rx) = sync_channel::<ToLtp>(16_384);
        let counters = Arc::new(LtpCounters::default());
        counters.spans.publish(&engine, &peers);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();

        let lt = LtpThread {
            engine,
            sock,
            peers,
            batch: cfg.raw.ltp.batch,
            rx: ltp_rx,
            tx: agent_tx.clone(),
            waker_addr,
            counters: counters.clone(),
            start: Instant::now(),
            backlog: std::collections::VecDeque::new(),
            source: ltp_source::SourcePolicy::new(
                cfg.raw.ltp.accept_from,
                cfg.spans.iter().map(|s| (s.engine_id, s.address)).collect(),
            ),
        };
        let ltp_cpu = cfg.raw.ltp.cpu;
        threads.push(
            std::thread::Builder::new()
                .name("ltp".into())
                .spawn(move || {
                    pin_to(ltp_cpu);
                    if let Err(e) = lt.run() {
                        eprintln!("dtnkit node: LTP thread stopped: {e}");
                    }
                })
                .map_err(|e| NodeError::Io(e.to_string()))?,
        );
        // UDPCL.
        let mut udp_tx = None;
        let mut udpcl_addr = None;
        let mut udp_counters = None;
        if let Some(u) = &cfg.udpcl {
            let (usock, _) = udpio::bind(u.bind, u.socket_buffer_bytes)
                .map_err(|e| startup::bind_error("udpcl.bind", u.bind, &e))?;
            udpcl_addr = Some(
                usock
                    .local_addr()
                    .map_err(|e| NodeError::Io(e.to_string()))?,
            );
            let rsock = usock
                .try_clone()
                .map_err(|e| NodeError::Io(e.to_string()))?;
            let counters = Arc::new(UdpclCounters {
                peers: cla_peer_stats::UdpPeerTable::new(cfg.udp_peers.iter().map(|p| p.peer)),
                ..Default::default()
            });
            let (tx, rx) = sync_channel::<ToUdp>(1024);
            let sender = udpcl::UdpSender {
                sock: usock,
                peers: cfg.udp_peers.iter().map(|p| (p.peer, p.address)).collect(),
                max_datagram: u.max_datagram,
                rx,
                agent: agent_tx.clone(),
                counters: counters.clone(),
            };
            threads.push(
                std::thread::Builder::new()
                    .name("udpcl-tx".into())
                    .spawn(move || sender.run())
                    .map_err(|e| NodeError::Io(e.to_string()))?,
            );
            let peers = cfg.udp_peers.iter().map(|p| (p.address, p.peer)).collect();
            let (max, atx, c, st) = (
                u.max_datagram,
                agent_tx.clone(),
                counters.clone(),
                stop.clone(),
            );
            threads.push(
                std::thread::Builder::new()
                    .name("udpcl-rx".into())
                    .spawn(move || udpcl::receive_loop(rsock, peers, max, atx, c, st))
                    .map_err(|e| NodeError::Io(e.to_string()))?,
            );
            udp_tx = Some(tx);
            udp_counters = Some(counters);
        }

        // TCPCL.
        let free_bytes = Arc::new(std::sync::atomic::AtomicU64::new(cfg.raw.store.quota_bytes));
        let ingress_paused = Arc::new(AtomicBool::new(false));
        let mut tcpcl_addr = None;
        let mut tcp_counters = None;
        if let Some(t) = &cfg.tcpcl {
            let counters = Arc::new(TcpclCounters::default());
            let shared = tcpcl::TcpclShared {
                cfg: t.clone(),
                local_node_id: format!("ipn:{}.0", cfg.raw.node),
                peers: Arc::new(cfg.tcp_peers.clone()),
                agent: agent_tx.clone(),
                counters: counters.clone(),
                stop: stop.clone(),
                next_id: Arc::new(std::sync::atomic::AtomicU64::new(1)),
                free_bytes: free_bytes.clone(),
                ingress_paused: ingress_paused.clone(),
                counts: Arc::new(tcpcl_limits::SessionCounts::default()),
            };
            if let Some(addr) = t.listen {
                let l = tcpcl::listen(addr, t.socket_buffer_bytes)
                    .map_err(|e| startup::bind_error("tcpcl.listen", addr, &e))?;
                tcpcl_addr = Some(l.local_addr().map_err(|e| NodeError::Io(e.to_string()))?);
                let sh = shared.clone();
                threads.push(
                    std::thread::Builder::new()
                        .name("tcpcl-listen".into())
                        .spawn(move || tcpcl::accept_loop(l, sh))
                        .map_err(|e| NodeError::Io(e.to_string()))?,
                );
            }
            for p in cfg.tcp_peers.iter().filter(|p| p.address.is_some()) {
                let (sh, p) = (shared.clone(), p.clone());
                threads.push(
                    std::thread::Builder::new()
                        .name(format!("tcpcl-peer-{}", p.peer))
                        .spawn(move || tcpcl::connect_loop(sh, p))
                        .map_err(|e| NodeError::Io(e.to_string()))?,
                );
            }
            tcp_counters = Some(counters);
        }

        let at = AgentThread {
            agent,
            rx: agent_rx,
            ltp: ltp_tx.clone(),
            waker,
            ltp_addr: wake_target,
            links,
            counters,
            node: cfg.raw.node,
            default_lifetime_ms: cfg.raw.bp.default_lifetime_ms,
            kinds,
            tcp: tcp_router,
            udp: udp_tx.clone(),
            tcp_counters: tcp_counters.clone(),
            udp_counters,
            free_bytes,
            window_bytes: cfg.window_bytes(),
            ingress: ingress::IngressGate::new(cfg.delivery_backlog_bytes(), ingress_paused),
            reports: reports::ReportCounts::default(),
            log: ratelog::RateLog::new(Duration::from_secs(10)),
            store_degraded_since: None,
        };
        let agent_cpu = cfg.raw.ltp.agent_cpu;
        threads.push(
            std::thread::Builder::new()
                .name("agent".into())
                .spawn(move || {
                    pin_to(agent_cpu);
                    at.run();
                })
                .map_err(|e| NodeError::Io(e.to_string()))?,
        );
        let tx = agent_tx.clone();
        let st = stop.clone();
        // The accept thread is not joined: it blocks in accept() until the process ends.
        std::thread::Builder::new()
            .name("app-accept".into())
            .spawn(move || app::accept_loop(listener, tx, st))
            .map_err(|e| NodeError::Io(e.to_string()))?;
        Ok(Node {
            stop,
            agent_tx,
            ltp_tx,
            threads,
            socket_path: cfg.socket_path.clone(),
            ltp_addr,
            udp_tx,
            tcpcl_addr,
            udpcl_addr,
            tcp_counters,
            monitor,
        })
    }

    /// The application socket path.
    pub fn socket_path(&self) -> &Path {
        &self.socket_path
    }

    /// The bound LTP UDP address.
    pub fn ltp_addr(&self) -> SocketAddr {
        self.ltp_addr
    }

    /// The bound TCPCL listening address, if the node listens.
    pub fn tcpcl_addr(&self) -> Option<SocketAddr> {
        self.tcpcl_addr
    }

    /// The bound UDPCL address, if UDPCL runs.
    pub fn udpcl_addr(&self) -> Option<SocketAddr> {
        self.udpcl_addr
    }

    /// The bound address of the metrics and web view listener, if `[metrics]` is configured.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.monitor.as_ref().map(metrics::Monitor::addr)
    }

    /// Blocks until a thread ends (normally never: the process is stopped by a signal).
    pub fn wait(mut self) {
        while let Some(t) = self.threads.pop() {
            let _ = t.join();
        }
    }

    /// Stops the threads and waits for them.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        if let Some(mut m) = self.monitor.take() {
            m.stop();
        }
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.agent_tx.send(AgentInput::Shutdown);
        let _ = self.ltp_tx.send(ToLtp::Shutdown);
        if let Some(tx) = &self.udp_tx {
            let _ = tx.send(ToUdp::Shutdown);
        }
        if let Some(a) = self.tcpcl_addr {
            // Unblocks the listener's accept().
            let _ = std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1));
        }
        let _ = std::os::unix::net::UnixStream::connect(&self.socket_path);
        if let Ok(s) = UdpSocket::bind("127.0.0.1:0") {
            let _ = s.send_to(&[0], self.ltp_addr);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // Sessions we accepted run on threads of their own: give them the time of an orderly
        // end (SESS_TERM both ways), bounded.
        if let Some(c) = &self.tcp_counters {
            let deadline = Instant::now() + SESSION_END_WAIT;
            while c.sessions_open.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = std::fs::remove_file(&self.socket_path);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop_threads();
        }
    }
}
