//! `dtnkit bench EXPERIMENT.toml`: argument parsing, the progress bar and exit codes around the `bench` crate,
//! which runs the grid and writes the outputs. File format and outputs: docs/bench.md.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use analyze::experiment::{Experiment, Mode, RunSpec};
use anyhow::Context;
use bench::{Grid, LocalOptions, Progress, RunResult};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::UsageError;

/// Arguments of `dtnkit bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Experiment file (TOML, see docs/bench.md).
    experiment: PathBuf,
    /// Parallel simulator runs (default: the number of cores). Emulation always runs one at a time.
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory (default: results/<experiment name> next to the experiment file).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override the experiment's mode.
    #[arg(long, value_parser = ["sim", "emu", "ip"])]
    mode: Option<String>,
    /// Override the number of repetitions.
    #[arg(long)]
    repetitions: Option<u32>,
    /// Keep each run's segment logs under OUT/logs (they are large: ~150 MB per 20 s at 500 Mb/s).
    #[arg(long)]
    keep_logs: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    UsageError(e.to_string()).into()
}

/// Runs the command.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let mut exp = Experiment::load(&a.experiment).map_err(usage)?;
    if let Some(m) = &a.mode {
        exp.mode = match m.as_str() {
            "emu" => Mode::Emu,
            "ip" => Mode::Ip,
            _ => Mode::Sim,
        };
    }
    if let Some(r) = a.repetitions {
        if r == 0 {
            return Err(usage("--repetitions 0: expected at least 1"));
        }
        exp.repetitions = r;
    }
    let out = a.out.clone().unwrap_or_else(|| {
        a.experiment
            .parent()
            .unwrap_or(Path::new("."))
            .join("results")
            .join(&exp.name)
    });
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Err(usage("--jobs 0: expected at least 1"));
    }
    let opts = LocalOptions {
        jobs,
        keep_logs: a.keep_logs,
        dtnkit: std::env::current_exe().context("locating the dtnkit binary")?,
    };
    let grid = Grid::new(exp)?;
    let bar = Bar::new(a.quiet);
    let o = bench::run_local(&grid, &out, &opts, &bar)?;
    if !a.quiet {
        println!(
            "{} runs ({} grid points) -> {}",
            o.runs.len(),
            o.points.len(),
            o.out.join("report.md").display()
        );
    }
    Ok(())
}

/// The progress bar: runs done, elapsed, estimated time left and the last run finished. Drawn from the moment
/// every run is known to be valid.
struct Bar {
    bar: OnceLock<ProgressBar>,
    quiet: bool,
}

impl Bar {
    fn new(quiet: bool) -> Bar {
        Bar {
            bar: OnceLock::new(),
            quiet,
        }
    }
}

impl Progress for Bar {
    fn started(&self, runs: usize) {
        if self.quiet {
            return;
        }
        let b = ProgressBar::new(runs as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{bar:40} {pos}/{len} runs, {elapsed} elapsed, eta {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let _ = self.bar.set(b);
    }

    fn run_ended(&self, spec: &RunSpec, result: Option<&RunResult>) {
        let Some(b) = self.bar.get() else { return };
        if let Some(r) = result {
            b.set_message(format!(
                "last: {} rep {}",
                r.labels.join("/"),
                spec.repetition
            ));
        }
        b.inc(1);
    }

    fn ended(&self) {
        if let Some(b) = self.bar.get() {
            b.finish_and_clear();
        }
    }
}
