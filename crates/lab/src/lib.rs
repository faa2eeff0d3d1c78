//! The real-time lab: run a simulator scenario as an emulated experiment on loopback.
//!
//! The simulator (`sim`) answers "what would happen" in virtual time; the lab answers "what does happen" with the
//! real node code, real sockets and the real-time channel emulator, from the *same* scenario file. For a scenario
//! with two nodes joined by one link and one DTNperf flow, [`run_emulated`]:
//!
//! 1. writes a node configuration per node (LTP segment size, sessions, RTO, pacing as the simulator derives them;
//!    segment and bundle CSV logs on) and an emulator configuration with the link's forward and return channel
//!    models (trace presets generated with the simulator's seed derivation);
//! 2. starts two `dtnkit node` processes and one `dtnkit emu` relay between them;
//! 3. runs the DTNperf server and client ([`perf`], the same [`traffic`] logic the simulator uses) in this process
//!    for the flow's duration, reporting progress through a callback;
//! 4. stops everything (SIGINT, bounded waits, kill on timeout; children also die with the lab) and returns a
//!    [`LabOutcome`] with the log paths, the relay's counters and the client's report.
//!
//! `dtnkit perf` uses [`perf`] directly; `dtnkit demo` and `dtnkit bench --mode emu` use [`run_emulated`].
//! A scenario with `[[cfdp]]` transfers instead of a flow runs through [`run_emulated_cfdp`]: two real CFDP
//! entities (`dtnkit cfdp put` / `serve` over UDP) through the same relay. [`run_ip_transfer`] runs a file transfer
//! (kernel TCP, TCP through a splitting gateway, BP over LTP or TCPCL) across the emulator's IP mode ([`ipnet`]).
//! [`run_loopback`] runs a chain of 2 to 5 real nodes on loopback without the emulator, one or two streams of
//! bundles through it, with each node's CPU time and peak memory ([`loopback`]; seed 002's experiments).

#![warn(missing_docs)]

mod cfdp;
pub mod config;
pub mod emu_report;
mod emulated;
pub mod ipnet;
mod ipnet_bp;
pub mod loopback;
pub mod perf;
pub mod procs;

pub use cfdp::{run_emulated_cfdp, CfdpLabOutcome};
pub use emu_report::{DirectionCounters, EmuCounters};
pub use emulated::{run_emulated, LabOptions, LabOutcome, LabProgress, NodeRun, Phase};
pub use ipnet::{run_ip_transfer, GatewayReport, IpLabOptions, IpOutcome, IpScenario};
pub use loopback::{run_loopback, LoopbackOptions, LoopbackOutcome, LoopbackScenario};

/// The scenario `dtnkit demo` runs: seed 000's optical LEO downlink (500 Mb/s, 10 ms forward delay, trace H,
/// RTO 30 ms, 500 kB bundles, DTNperf window), sized for a 30-second real-time run.
pub const DEMO_SCENARIO: &str = include_str!("../scenarios/demo.toml");

/// Parses [`DEMO_SCENARIO`].
pub fn demo_scenario() -> Result<sim::Scenario, sim::ScenarioError> {
    sim::Scenario::from_toml_str(DEMO_SCENARIO, "demo.toml", std::path::Path::new("."))
}

/// Why an emulated run failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The scenario uses something the lab cannot emulate (the message names the field).
    #[error("scenario not supported by the lab: {0}")]
    Unsupported(String),
    /// A scenario value is invalid for the lab (the message names the field and value).
    #[error("scenario: {0}")]
    Scenario(String),
    /// The work directory cannot be used.
    #[error("work directory {path}: {reason}")]
    WorkDir {
        /// Directory.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// A child process did not come up (its standard error tail is included).
    #[error("{name} did not start: {reason}")]
    Startup {
        /// Child name.
        name: String,
        /// What happened.
        reason: String,
    },
    /// The run did not end within its bound (flow start + duration + drain + 30 s); the children were killed.
    #[error("the run did not end within {0:?}; the nodes and the relay were killed")]
    Timeout(std::time::Duration),
    /// File or process I/O failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The DTNperf client or server failed.
    #[error("{role}: {source}")]
    Perf {
        /// `client` or `server`.
        role: &'static str,
        /// Cause.
        source: perf::PerfError,
    },
}
