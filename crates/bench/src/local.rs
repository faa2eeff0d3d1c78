//! The local executor: every run of a grid on this machine — simulator runs pulled by worker threads, real-time
//! runs (emulated, IP mode) one at a time so they do not share the cores that pace their links. Results are kept
//! by run index, so the outputs do not depend on scheduling.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use analyze::experiment::Mode;

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
        logs: logs.clone(),
        keep_logs: opts.keep_logs,
        dtnkit: opts.dtnkit.clone(),
    };
    let specs = grid.runs();
    progress.started(specs.len());
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; specs.len()]);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let next = AtomicUsize::new(0);
    let workers = match grid.experiment().mode {
        Mode::Sim => opts.jobs.min(specs.len()).max(1),
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
                match grid.run(spec, &ctx) {
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
    let runs: Vec<RunResult> = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?
        .into_iter()
        .flatten()
        .collect();
    finish(grid.experiment(), runs, out, opts.keep_logs)
}
