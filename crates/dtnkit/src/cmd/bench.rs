//! `dtnkit bench EXPERIMENT.toml`: argument parsing, the progress bar and exit codes around the `bench` crate,
//! which runs the grid and writes the outputs — here (`--executor local`) or as Slurm jobs (`--executor slurm`,
//! with the `status`, `run-point` and `aggregate` subcommands) — and `dtnkit bench check`, which compares a reduced
//! re-run of a simulator experiment with its committed results. File format and outputs: docs/bench.md.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use analyze::experiment::{Experiment, Mode, RunSpec};
use anyhow::Context;
use bench::guard::CheckOptions;
use bench::provenance::Provenance;
use bench::slurm::{Action, SlurmOptions};
use bench::{BenchOutcome, Grid, LocalOptions, Progress, RunResult};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use super::{positive_seconds, UsageError};

/// Arguments of `dtnkit bench`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: Option<BenchCommand>,
    #[command(flatten)]
    grid: GridArgs,
}

/// Where the runs execute.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Executor {
    /// On this machine, in this process.
    Local,
    /// As a Slurm job array (one task per run) and a job that aggregates; the output directory must be on a
    /// filesystem every node shares.
    Slurm,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Each run's state in an output directory of `--executor slurm`: done, pending or running, failed (with
    /// the end of its log) or missing.
    Status {
        /// Output directory.
        dir: PathBuf,
    },
    /// Execute one run of the grid stored in DIR and store its result (what each Slurm array task runs).
    RunPoint {
        /// Output directory holding grid.toml.
        dir: PathBuf,
        /// Run index (0-based, grid order).
        index: usize,
    },
    /// Aggregate the stored results in DIR and write the outputs (the Slurm executor's last job).
    Aggregate {
        /// Output directory holding grid.toml and results/.
        dir: PathBuf,
    },
    /// Re-run a reduced version of a simulator experiment (its [guard], docs/bench.md "Guard") and compare it with
    /// the experiment's committed results; exits 1 with a table of the values that moved.
    Check(CheckArgs),
}

#[derive(Args)]
struct CheckArgs {
    /// Experiment file (TOML, mode = "sim").
    #[arg(value_name = "EXPERIMENT")]
    experiment: PathBuf,
    /// Directory of the committed results (default: results/<experiment name> next to the experiment file).
    #[arg(long)]
    results: Option<PathBuf>,
    /// Parallel re-runs (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Refuse to start when the re-runs would take longer than this many seconds of run time (estimated from the
    /// committed runs' wall_s).
    #[arg(long, value_name = "SECONDS")]
    budget_s: Option<f64>,
    /// Print the report as JSON (every compared value) instead of the table.
    #[arg(long)]
    json: bool,
    /// Show every compared value in the table, not only those that disagree.
    #[arg(long)]
    all: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct GridArgs {
    /// Experiment file (TOML, see docs/bench.md). Required unless a subcommand is given (clap cannot make a
    /// positional required beside subcommands, so this is checked when the grid runs).
    #[arg(value_name = "EXPERIMENT")]
    experiment: Option<PathBuf>,
    /// Parallel simulator runs (default: the number of cores). Emulation always runs one at a time.
    #[arg(long)]
    jobs: Option<usize>,
    /// Output directory (default: results/<experiment name> next to the experiment file).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override the experiment's mode.
    #[arg(long, value_parser = ["sim", "emu", "ip", "loopback"])]
    mode: Option<String>,
    /// Override the number of repetitions.
    #[arg(long)]
    repetitions: Option<u32>,
    /// Override the seed of the first repetition (repetition r runs with seed SEED + r). With `--repetitions` and
    /// `--out`, adds repetitions to a grid whose existing results used other seeds: `--seed 4 --repetitions 2` runs
    /// exactly the runs repetitions 3 and 4 of a grid with `seed = 1` would run.
    #[arg(long)]
    seed: Option<u64>,
    /// Keep each run's segment logs under OUT/logs (they are large: ~150 MB per 20 s at 500 Mb/s).
    #[arg(long)]
    keep_logs: bool,
    /// No progress bar (local) or summary line.
    #[arg(long)]
    quiet: bool,
    /// Where the runs execute.
    #[arg(long, value_enum, default_value = "local")]
    executor: Executor,
    /// Slurm: partition of every job.
    #[arg(long)]
    partition: Option<String>,
    /// Slurm: time limit of each run (sbatch syntax, e.g. 30:00; overrides the experiment's slurm.time).
    #[arg(long)]
    time: Option<String>,
    /// Slurm: cores per run (overrides the experiment's slurm.cpus_per_task; default 1 in sim mode, 4 in real time).
    #[arg(long)]
    cpus_per_task: Option<u32>,
    /// Slurm: a further sbatch argument for every job (repeatable), e.g. --sbatch-arg=--account=lab.
    #[arg(long, allow_hyphen_values = true)]
    sbatch_arg: Vec<String>,
    /// Slurm: return when the aggregation job has ended (exit 1 when it failed).
    #[arg(long)]
    wait: bool,
}

fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    UsageError(e.to_string()).into()
}

/// Runs the command.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    match a.command {
        Some(BenchCommand::Status { dir }) => {
            print!("{}", bench::slurm::status(&dir)?);
            Ok(())
        }
        Some(BenchCommand::RunPoint { dir, index }) => run_point(&dir, index),
        Some(BenchCommand::Aggregate { dir }) => {
            println!("{}", outputs_line(&bench::store::aggregate(&dir)?));
            Ok(())
        }
        Some(BenchCommand::Check(c)) => run_check(c),
        None => run_grid(a.grid),
    }
}

fn dtnkit_binary() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("locating the dtnkit binary")
}

fn run_point(dir: &Path, index: usize) -> anyhow::Result<()> {
    let t = std::time::Instant::now();
    let r = bench::store::run_point(dir, index, &dtnkit_binary()?)?;
    println!(
        "run {index} ({} rep {}, seed {}) done in {:.1} s -> {}",
        r.labels.join("/"),
        r.spec.repetition,
        r.spec.seed,
        t.elapsed().as_secs_f64(),
        bench::store::GridDir::open(dir)?
            .result_path(index)
            .display()
    );
    Ok(())
}

fn run_grid(a: GridArgs) -> anyhow::Result<()> {
    let Some(path) = a.experiment.clone() else {
        return Err(usage(
            "missing EXPERIMENT: expected an experiment file or a subcommand (dtnkit bench --help)",
        ));
    };
    let mut exp = Experiment::load(&path).map_err(usage)?;
    if let Some(m) = &a.mode {
        exp.mode = match m.as_str() {
            "emu" => Mode::Emu,
            "ip" => Mode::Ip,
            "loopback" => Mode::Loopback,
            _ => Mode::Sim,
        };
    }
    if let Some(r) = a.repetitions {
        if r == 0 {
            return Err(usage("--repetitions 0: expected at least 1"));
        }
        exp.repetitions = r;
    }
    if let Some(s) = a.seed {
        exp.seed = s;
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| default_results(&path, &exp));
    let grid = Grid::new(exp)?;
    // The command line without the binary's path (results are committed; a machine-local path says nothing).
    let command = ["dtnkit".to_string()]
        .into_iter()
        .chain(std::env::args().skip(1))
        .collect();
    let provenance = Provenance::capture(command, path.parent().unwrap_or(Path::new(".")));
    match a.executor {
        Executor::Local => run_local(&a, &grid, &out, &provenance),
        Executor::Slurm => run_slurm(&a, &grid, &out, &provenance),
    }
}

/// `results/<name>` next to the experiment file: where its outputs go and its committed results are.
fn default_results(path: &Path, exp: &Experiment) -> PathBuf {
    path.parent()
        .unwrap_or(Path::new("."))
        .join("results")
        .join(&exp.name)
}

/// `--jobs`, by default the number of cores.
fn jobs(given: Option<usize>) -> anyhow::Result<usize> {
    let jobs = given.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Err(usage("--jobs 0: expected at least 1"));
    }
    Ok(jobs)
}

fn run_check(a: CheckArgs) -> anyhow::Result<()> {
    let exp = Experiment::load(&a.experiment).map_err(usage)?;
    let opts = CheckOptions {
        results: a
            .results
            .clone()
            .unwrap_or_else(|| default_results(&a.experiment, &exp)),
        jobs: jobs(a.jobs)?,
        budget_s: positive_seconds("--budget-s", a.budget_s)?.map(|d| d.as_secs_f64()),
    };
    let grid = Grid::new(exp)?;
    let report = bench::guard::check(&grid, &a.experiment, &opts, &Bar::new(a.quiet || a.json))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table(a.all));
    }
    match report.failure() {
        Some(why) => Err(anyhow::anyhow!(why)),
        None => Ok(()),
    }
}

fn run_local(a: &GridArgs, grid: &Grid, out: &Path, provenance: &Provenance) -> anyhow::Result<()> {
    let slurm_only = [
        ("--partition", a.partition.is_some()),
        ("--time", a.time.is_some()),
        ("--cpus-per-task", a.cpus_per_task.is_some()),
        ("--sbatch-arg", !a.sbatch_arg.is_empty()),
        ("--wait", a.wait),
    ];
    if let Some((flag, _)) = slurm_only.iter().find(|(_, given)| *given) {
        return Err(usage(format!("{flag}: applies to --executor slurm only")));
    }
    let opts = LocalOptions {
        jobs: jobs(a.jobs)?,
        keep_logs: a.keep_logs,
        dtnkit: dtnkit_binary()?,
    };
    let bar = Bar::new(a.quiet);
    let o = bench::run_local(grid, out, &opts, &bar)?;
    provenance.write(out)?;
    if !a.quiet {
        println!("{}", outputs_line(&o));
    }
    Ok(())
}

/// "N runs (M grid points) -> OUT/report.md".
fn outputs_line(o: &BenchOutcome) -> String {
    format!(
        "{} runs ({} grid points) -> {}",
        o.runs.len(),
        o.points.len(),
        o.out.join("report.md").display()
    )
}

/// Submits the grid's missing runs; the first submission into `out` records the provenance (every task runs the
/// same dtnkit).
fn run_slurm(a: &GridArgs, grid: &Grid, out: &Path, provenance: &Provenance) -> anyhow::Result<()> {
    if a.jobs.is_some() {
        return Err(usage(
            "--jobs: applies to --executor local only (Slurm places the runs)",
        ));
    }
    if a.cpus_per_task == Some(0) {
        return Err(usage("--cpus-per-task 0: expected at least 1"));
    }
    let opts = SlurmOptions {
        partition: a.partition.clone(),
        time: a.time.clone(),
        cpus_per_task: a.cpus_per_task,
        sbatch_args: a.sbatch_arg.clone(),
        keep_logs: a.keep_logs,
        wait: a.wait,
    };
    let s = bench::slurm::submit(grid, out, &opts)?;
    let say = |line: String| {
        if !a.quiet {
            println!("{line}");
        }
    };
    let report = out.join("report.md");
    let (arrays, job, log, succeeded) = match s.action {
        Action::Nothing => {
            say(format!(
                "all {} runs done and the report written ({}): nothing to submit",
                s.runs,
                report.display()
            ));
            return Ok(());
        }
        Action::Waiting { aggregate } => {
            say(format!(
                "{} of {} runs pending or running, aggregation job {aggregate} in the queue: nothing to submit \
                 (progress: dtnkit bench status {})",
                s.queued,
                s.runs,
                out.display()
            ));
            return Ok(());
        }
        Action::Submitted {
            arrays,
            aggregate,
            log,
            succeeded,
        } => (arrays, aggregate, log, succeeded),
    };
    if Provenance::read(out)?.is_none() {
        provenance.write(out)?;
    }
    let arrays: Vec<&str> = arrays.iter().map(|x| x.job.as_str()).collect();
    say(format!(
        "{} of {} runs submitted{} ({} done, {} pending or running), aggregation job {job}; progress: dtnkit bench status {}",
        s.submitted,
        s.runs,
        if arrays.is_empty() {
            String::new()
        } else {
            format!(" as job array {}", arrays.join(", "))
        },
        s.done,
        s.queued,
        out.display()
    ));
    match succeeded {
        Some(true) => {
            say(format!(
                "{} runs ({} grid points) -> {}",
                s.runs,
                grid.experiment().grid_size(),
                report.display()
            ));
            Ok(())
        }
        Some(false) => {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            anyhow::bail!(
                "aggregation job {job} failed (log {}): {}",
                log.display(),
                text.trim()
            )
        }
        None => Ok(()),
    }
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
