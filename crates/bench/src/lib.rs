//! The experiment runner behind `dtnkit bench`: an experiment file (`analyze::experiment`) expands into a grid of
//! runs — scenario overrides × repetitions — each run executes in the simulator, the real-time lab
//! (`lab::run_emulated`), the emulator's IP mode (`lab::run_ip_transfer`) or real nodes on loopback
//! (`lab::run_loopback`) and yields metrics, and the finished
//! grid is aggregated into means with 95 % Student-t confidence intervals, plotted (PNG + SVG) and summarised in
//! a markdown report. File format and outputs: docs/bench.md.
//!
//! The pieces, so that every executor shares them and differs only in how runs are started:
//! - [`Grid`]: the experiment with its base scenario; validates every run up front and executes one run
//!   ([`Grid::run`]) into a [`RunResult`];
//! - [`finish`]: aggregates the results of a whole grid and writes the outputs;
//! - [`run_local`]: the local executor, runs pulled by worker threads (simulator) or one at a time (real time);
//! - [`slurm::submit`]: the Slurm executor, the grid written once into the output directory ([`store`]), one
//!   job-array task per run ([`store::run_point`]) and a dependent job that aggregates ([`store::aggregate`]);
//! - [`guard::check`]: a reduced re-run of a simulator experiment compared with its committed results;
//!   [`provenance`]: the commit and command line that produced a results directory.

#![warn(missing_docs)]

mod delivery;
mod grid;
pub mod guard;
mod ip;
mod local;
mod loopback;
pub mod metrics;
mod outputs;
pub mod plot;
pub mod provenance;
mod run;
pub mod slurm;
pub mod store;

use std::path::PathBuf;

use analyze::experiment::{Metrics, PointAggregate, RunSpec};

pub use grid::Grid;
pub use local::{run_local, LocalOptions};
pub use metrics::{cfdp_metrics, METRICS};
pub use outputs::finish;

/// An error caused by the user's input (experiment file, scenario, override, option): the CLI exits with 2 for
/// it, 1 for every other error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

pub(crate) fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    BadInput(e.to_string()).into()
}

/// Where and how a run executes.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// Directory of the run's logs and lab work directories (absolute: scenario paths are relative to the
    /// scenario's directory).
    pub logs: PathBuf,
    /// Keep each run's segment logs (and lab work directory) instead of deleting them after the analysis.
    pub keep_logs: bool,
    /// The `dtnkit` binary the lab starts nodes and the relay with (real-time modes).
    pub dtnkit: PathBuf,
}

/// What one finished run produced.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunResult {
    /// The run.
    pub spec: RunSpec,
    /// Axis labels of its grid point.
    pub labels: Vec<String>,
    /// Its metrics.
    pub metrics: Metrics,
}

/// The outcome of a bench: every run and the per-point aggregates (also written to the output directory).
pub struct BenchOutcome {
    /// Runs in grid order.
    pub runs: Vec<RunResult>,
    /// Mean and CI per grid point.
    pub points: Vec<PointAggregate>,
    /// Output directory.
    pub out: PathBuf,
}

/// Progress of an executor, for a display: every method has a do-nothing default.
pub trait Progress: Sync {
    /// Every run of the grid is valid and `runs` of them are about to start.
    fn started(&self, runs: usize) {
        let _ = runs;
    }
    /// A run ended: with its result, or `None` when it failed.
    fn run_ended(&self, spec: &RunSpec, result: Option<&RunResult>) {
        let _ = (spec, result);
    }
    /// Every run has ended (or the executor stopped at a failure).
    fn ended(&self) {}
}

/// A [`Progress`] that shows nothing.
pub struct Silent;

impl Progress for Silent {}
