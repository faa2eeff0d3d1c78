//! The local executor: every run of a grid on this machine — simulator runs pulled by worker threads, real-time
//! runs (emulated, IP mode) one at a time so they do not share the cores that pace their links. Results are kept
//! by run index, so the outputs do not depend on scheduling.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use analyze::experiment::{Mode, RunSpec};

use crate::grid::Overrides;
use crate::{finish, BenchOutcome, Grid, Progress, RunContext, RunResult};

/// Settings of [`run_local`].
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Parallel simulator runs (real-time modes always run one at a time); at least 1.
    pub jobs: usize,
    /// Keep each run's segment logs under `OUT/logs`.
    pub keep_logs: bool,
    /// The `dtnkit` binary the lab starts (real-time modes).
    pub dtnkit: PathBuf,
}

/// Runs every run of `grid` on this machine, writes all outputs into `out` and returns them. Stops at the first
/// failed run (runs already started finish) and returns its error.
pub fn run_local(
    grid: &Grid,
    out: &Path,
    opts: &LocalOptions,
    progress: &dyn Progress,
) -> anyhow::Result<BenchOutcome> {
    let logs = crate::outputs::prepare(out)?;
    grid.validate()?;
    let ctx = RunContext {
        logs,
        keep_logs: opts.keep_logs,
        dtnkit: opts.dtnkit.clone(),
    };
    let runs = execute(
        grid,
        &grid.runs(),
        &Overrides::new(),
        &ctx,
        opts.jobs,
        progress,
    )?;
    finish(grid.experiment(), runs, out, opts.keep_logs)
}

/// Executes `specs` (runs of `grid`, already validated, with `set` applied after their overrides): simulator runs
/// pulled by up to `jobs` worker threads, real-time runs one at a time. Returns the results in the order of
/// `specs`, or the first failed run's error (runs already started finish).
pub(crate) fn execute(
    grid: &Grid,
    specs: &[RunSpec],
    set: &Overrides,
    ctx: &RunContext,
    jobs: usize,
    progress: &dyn Progress,
) -> anyhow::Result<Vec<RunResult>> {
    progress.started(specs.len());
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; specs.len()]);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let next = AtomicUsize::new(0);
    let workers = match grid.experiment().mode {
        Mode::Sim => jobs.min(specs.len()).max(1),
        Mode::Emu | Mode::Ip | Mode::Loopback => 1,
    };
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(i) else {
                    break;
                };
                if first_error.lock().map(|e| e.is_some()).unwrap_or(true) {
                    break;
                }
                match grid.run_with(spec, set, ctx) {
                    Ok(r) => {
                        progress.run_ended(spec, Some(&r));
                        if let Ok(mut v) = results.lock() {
                            if let Some(slot) = v.get_mut(i) {
                                *slot = Some(r);
                            }
                        }
                    }
                    Err(e) => {
                        progress.run_ended(spec, None);
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    progress.ended();
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?
        .into_iter()
        .flatten()
        .collect())
}
