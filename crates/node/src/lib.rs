//! `dtnkit node`: the real-time node — the BP agent with its persistent store, the LTP
//! convergence layer over UDP, TCPCL (v4, and v3 for ION, HDTN and DTNME), UDPCL and STCP,
//! contact-plan-driven links and the application socket.
//!
//! # Threads
//!
//! - **LTP thread** ([`ltp_thread`]): the UDP socket and the LTP adapter (`cla::LtpCla`: the
//!   engine, its FEC layer and the classification of its events, the same code the simulator
//!   drives); batched `recvmmsg`/`sendmmsg` (GSO when available), nanosecond `ppoll` waits,
//!   pacing by the engine's token bucket. Exchanges classified outcomes with the agent thread
//!   and hands whole received blocks to the **LTP block thread** ([`ltp_blocks`]), which splits,
//!   checks and stages them for the agent off the thread that reads the socket.
//! - **Agent thread** ([`agent_thread`]): `bp::Agent` over a `RedbStore`, the contact plan's
//!   link schedule and every application request.
//! - **Accept thread** plus one **reader thread** and one **writer thread per application
//!   connection** ([`app`]).
//! - **TCPCL** ([`tcpcl`]): a listener, one connector per configured
//!   peer (reconnecting with back-off) and one thread per session driving a
//!   `tcpcl::AnySession` (TCPCLv4 or v3).
//! - **UDPCL** ([`udpcl`]): a receive thread and a send thread on one UDP socket.
//! - **STCP** ([`stcp`]): a listener with one receiving thread per accepted connection, and
//!   one connector per `[[stcp_peer]]` whose connection sends (ION's and HDTN's simple TCP).
//!
//! The agent thread routes each bundle to its neighbour's convergence layer ([`cla_dispatch`]); the LTP thread drives the LTP adapter of the `cla` crate.
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
//! a transfer's final XFER_ACK leaves after the commit. UDPCL and STCP have no acknowledgment
//! (what STCP can promise is in [`stcp`]).
//!
//! [`sd_notify`] tells systemd when the node is ready (`Type=notify`).

#![warn(missing_docs)]

mod agent_thread;
mod app;
mod bibe_glue;
mod cla_dispatch;
mod cla_peer_stats;
pub mod clock;
mod commit_group;
pub mod config;
mod contacts;
mod counters;
mod fec_status;
mod hardening_status;
mod ingress;
mod ltp_blocks;
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
mod send_gate;
mod staging;
mod start;
mod startup;
mod stcp;
mod store_timing;
mod tcp_socket;
mod tcpcl;
mod tcpcl_limits;
mod tcpcl_tls;
mod udpcl;

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use ::cla::BP_CLIENT_SERVICE;
pub use config::{ConfigError, NodeConfig, Validated};
pub use ltp_source::AcceptFrom;

use counters::TcpclCounters;
use messages::{AgentInput, ToLtp, ToUdp};

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
    stcp_addr: Option<SocketAddr>,
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

impl Node {
    /// Starts a node from a validated configuration. Errors name what failed.
    ///
    /// The stages (module `start`) run in this order; the first that fails ends the start.
    pub fn start(cfg: Validated) -> Result<Node, NodeError> {
        let start_dtn = clock::dtn_now_ms();
        let plan = start::load_plan(&cfg, start_dtn)?;
        startup::store_dir(&cfg.store_path)?;
        startup::socket_path(&cfg.socket_path, cfg.raw.app.socket.is_some())?;
        let store = start::open_store(&cfg)?;
        let mut agent = start::build_agent(&cfg, store, start_dtn)?;
        let links = start::Links::new(plan.as_ref(), &cfg);
        links.bring_up_unplanned(&mut agent, &cfg, start_dtn);
        agent.set_contact_plan(plan, true);
        let engine = start::build_ltp_engine(&cfg, &links, start_dtn)?;
        let ltp_socket = start::LtpSocket::bind(&cfg)?;
        let app_listener = start::bind_app_socket(&cfg)?;
        // The monitor starts before any other thread, so a listener that cannot bind stops
        // the start cleanly; it reads the status through the socket bound above.
        let monitor = start::start_monitor(&cfg)?;
        let (mut threads, agent_rx) = start::Threads::new(&cfg);
        let stager = bp::Store::stager(agent.store());
        let hot_cache = bp::Store::hot_cache(agent.store());
        let ltp = threads.start_ltp(&cfg, engine, ltp_socket, stager.clone(), hot_cache)?;
        let (ltp_tx, ltp_addr) = (ltp.tx.clone(), ltp.addr);
        let udpcl = threads.start_udpcl(&cfg)?;
        let tcpcl = threads.start_tcpcl(&cfg, stager.clone())?;
        let stcp = threads.start_stcp(&cfg)?;
        let others = start::OtherClas { udpcl, tcpcl, stcp };
        threads.start_agent(&cfg, agent, agent_rx, links, ltp, &others)?;
        threads.start_app_accept(app_listener, stager)?;
        Ok(Node {
            stop: threads.stop,
            agent_tx: threads.agent_tx,
            ltp_tx,
            threads: threads.handles,
            socket_path: cfg.socket_path.clone(),
            ltp_addr,
            udp_tx: others.udpcl.as_ref().map(|u| u.tx.clone()),
            tcpcl_addr: others.tcpcl.as_ref().and_then(|t| t.addr),
            udpcl_addr: others.udpcl.as_ref().map(|u| u.addr),
            stcp_addr: others.stcp.as_ref().and_then(|s| s.addr),
            tcp_counters: others.tcpcl.map(|t| t.counters),
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

    /// The bound STCP listening address, if the node listens for STCP.
    pub fn stcp_addr(&self) -> Option<SocketAddr> {
        self.stcp_addr
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
        for a in [self.tcpcl_addr, self.stcp_addr].into_iter().flatten() {
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
