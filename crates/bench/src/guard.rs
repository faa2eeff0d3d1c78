//! `dtnkit bench check`: re-runs a reduced version of a simulator experiment and compares it with the results
//! committed in its results directory, so that a change which moves a simulated result does not go unnoticed
//! (docs/bench.md "Guard").
//!
//! The simulator is deterministic: a run with a committed run's point, seed and settings reproduces its metrics,
//! and `runs.json` keeps every float exactly. So the check re-runs a subset of the committed runs as they were
//! run and compares them run by run, within a relative tolerance (default 1e-6). Where the committed runs are too
//! long to repeat, the experiment's `[guard] set` shortens the re-runs (`sim.duration_s`, ...), and each is then
//! compared with its point's committed mean ± max(ci95, floor × |mean|) on the metrics `[guard] metrics` names.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use analyze::experiment::{GuardSettings, Mode, RunSpec};
use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;
use crate::{usage, Grid, Progress, RunContext, RunResult};

/// Metrics never compared: the run's wall-clock time depends on the machine.
const UNCOMPARED: [&str; 1] = ["wall_s"];

/// Settings of [`check`].
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The directory of the committed results (`runs.json`, `aggregate.json`, `provenance.json`).
    pub results: PathBuf,
    /// Parallel re-runs; at least 1.
    pub jobs: usize,
    /// Refuse to start when the re-runs are estimated to take longer than this (seconds of run time, from the
    /// committed runs' `wall_s`).
    pub budget_s: Option<f64>,
}

/// How the re-runs are compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Method {
    /// Re-run as committed (same point, seed and settings) and compared run by run.
    AsCommitted {
        /// Largest relative difference accepted.
        tolerance: f64,
    },
    /// Re-run with `set` applied (shorter) and compared with the point's committed interval.
    Shortened {
        /// The overrides that shorten the re-runs.
        set: BTreeMap<String, toml::Value>,
        /// Smallest half-width accepted, relative to the committed mean.
        floor: f64,
    },
}

/// How one value compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within the tolerance or the interval.
    Same,
    /// Undefined (NaN, empty) in the committed results and in the re-run.
    Undefined,
    /// Produced by the re-run, absent from the committed results (a metric added since): not a failure.
    New,
    /// Outside the tolerance or the interval, or defined on one side only.
    Moved,
    /// In the committed results, not produced by the re-run.
    Missing,
}

impl Verdict {
    /// Whether this value fails the check.
    pub fn failed(self) -> bool {
        matches!(self, Verdict::Moved | Verdict::Missing)
    }

    fn name(self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Undefined => "undefined in both",
            Verdict::New => "new metric",
            Verdict::Moved => "MOVED",
            Verdict::Missing => "MISSING",
        }
    }
}

/// One metric of one re-run against the committed results (NaN: undefined or absent).
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Metric.
    pub metric: String,
    /// Axis labels of the grid point.
    pub labels: Vec<String>,
    /// Repetition of the re-run.
    pub repetition: u32,
    /// Seed of the re-run.
    pub seed: u64,
    /// The committed point's mean and 95 % half-width.
    pub committed_mean: f64,
    /// See `committed_mean`.
    pub committed_ci95: f64,
    /// The committed run's value (re-runs as committed; NaN for shortened re-runs).
    pub committed_run: f64,
    /// Half-width accepted around the committed mean (shortened re-runs; NaN otherwise).
    pub accepted: f64,
    /// The re-run's value.
    pub rerun: f64,
    /// The verdict.
    pub verdict: Verdict,
}

impl Comparison {
    /// The value the re-run is compared with: the committed run, or the committed mean.
    fn reference(&self) -> f64 {
        if self.accepted.is_nan() {
            self.committed_run
        } else {
            self.committed_mean
        }
    }
}

/// One re-run.
#[derive(Debug, Clone, Serialize)]
pub struct Rerun {
    /// Axis labels of its grid point.
    pub labels: Vec<String>,
    /// Repetition.
    pub repetition: u32,
    /// Seed.
    pub seed: u64,
    /// Wall-clock seconds of the committed run and of the re-run.
    pub committed_wall_s: f64,
    /// See `committed_wall_s`.
    pub wall_s: f64,
}

/// What [`check`] found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// The experiment's name.
    pub experiment: String,
    /// The experiment file (as given).
    pub file: PathBuf,
    /// The committed results directory.
    pub results: PathBuf,
    /// Where the committed results came from (`None`: not recorded).
    pub committed_by: Option<Provenance>,
    /// How the re-runs were compared.
    pub method: Method,
    /// Whether the re-runs were chosen by the experiment's `[guard]` (else: the default reduction).
    pub guarded: bool,
    /// Seconds of run time the re-runs were estimated to take.
    pub estimate_s: f64,
    /// The re-runs.
    pub reruns: Vec<Rerun>,
    /// Grid points (labels, repetition) selected but absent from the committed results: failures.
    pub not_committed: Vec<String>,
    /// Every value compared.
    pub comparisons: Vec<Comparison>,
}

/// A committed run as `runs.json` holds it (NaN and infinities are stored as null).
#[derive(Deserialize)]
struct CommittedRun {
    spec: RunSpec,
    labels: Vec<String>,
    metrics: BTreeMap<String, Option<f64>>,
}

impl CommittedRun {
    fn value(&self, metric: &str) -> Option<f64> {
        self.metrics.get(metric).map(|v| v.unwrap_or(f64::NAN))
    }
}

#[derive(Deserialize)]
struct CommittedPoint {
    labels: Vec<String>,
    metrics: BTreeMap<String, CommittedMean>,
}

#[derive(Deserialize)]
struct CommittedMean {
    mean: Option<f64>,
    ci95: Option<f64>,
}

fn read_json<T: serde::de::DeserializeOwned>(dir: &Path, name: &str) -> anyhow::Result<T> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        usage(format!(
            "{}: {e} (no committed results to check against: run the experiment with dtnkit bench first, or \
             give --results)",
            path.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| usage(format!("{}: {e}", path.display())))
}

/// A run chosen for the re-run, with the committed run it repeats.
struct Planned<'a> {
    spec: RunSpec,
    labels: Vec<String>,
    committed: &'a CommittedRun,
}

/// The runs to re-run: per selected grid point, the `[guard]`'s repetition or else the committed run that took
/// the least wall time; and the selected points without a committed run.
fn plan<'a>(
    grid: &Grid,
    guard: &GuardSettings,
    committed: &'a [CommittedRun],
) -> (Vec<Planned<'a>>, Vec<String>) {
    let exp = grid.experiment();
    let wall = |r: &CommittedRun| r.value("wall_s").filter(|w| w.is_finite());
    let (mut planned, mut missing) = (Vec::new(), Vec::new());
    let specs = grid.runs();
    for point in specs.chunk_by(|a, b| a.grid_index == b.grid_index) {
        let labels = exp.labels(&point[0].point);
        if !guard.selects(&exp.axes, &labels) {
            continue;
        }
        // The committed runs of this point that the grid still has (same repetition and seed).
        let mut candidates: Vec<(&RunSpec, &CommittedRun)> = point
            .iter()
            .filter(|s| guard.repetition.is_none_or(|r| r == s.repetition))
            .filter_map(|s| {
                committed
                    .iter()
                    .find(|c| {
                        c.labels == labels
                            && c.spec.repetition == s.repetition
                            && c.spec.seed == s.seed
                    })
                    .map(|c| (s, c))
            })
            .collect();
        candidates.sort_by(|a, b| {
            let w = |c: &CommittedRun| wall(c).unwrap_or(f64::INFINITY);
            w(a.1).total_cmp(&w(b.1))
        });
        match candidates.first() {
            Some((s, c)) => planned.push(Planned {
                spec: (*s).clone(),
                labels,
                committed: c,
            }),
            None => missing.push(format!(
                "{} rep {}",
                labels.join("/"),
                guard.repetition.unwrap_or(0)
            )),
        }
    }
    (planned, missing)
}

/// Seconds of run time a re-run is expected to take: its committed run's, scaled by the shortened simulated time
/// (`sim.duration_s` of the re-run's scenario) over the committed run's `virtual_s`.
fn estimate(grid: &Grid, p: &Planned, set: &crate::grid::Overrides) -> anyhow::Result<f64> {
    let wall = p.committed.value("wall_s").unwrap_or(f64::NAN);
    if set.is_empty() {
        return Ok(wall);
    }
    let doc = grid.document(&p.spec, set)?;
    let duration = doc
        .get("sim")
        .and_then(|s| s.get("duration_s"))
        .and_then(|d| d.as_float().or_else(|| d.as_integer().map(|i| i as f64)));
    let committed_s = p.committed.value("virtual_s").filter(|v| *v > 0.0);
    Ok(match (duration, committed_s) {
        (Some(d), Some(v)) => wall * (d / v).min(1.0),
        _ => wall,
    })
}

fn compare_values(
    committed: Option<f64>,
    rerun: Option<f64>,
    accept: impl Fn(f64, f64) -> bool,
) -> Verdict {
    match (committed, rerun) {
        (None, _) => Verdict::New,
        (Some(_), None) => Verdict::Missing,
        (Some(c), Some(r)) => match (c.is_finite(), r.is_finite()) {
            (false, false) => Verdict::Undefined,
            (true, true) if accept(c, r) => Verdict::Same,
            _ => Verdict::Moved,
        },
    }
}

/// Re-runs the reduced version of `grid`'s simulator experiment (its `[guard]`, or the cheapest committed run of
/// every grid point) and compares it with the committed results in `opts.results`. `file` names the experiment
/// in the report. A failed run, missing or unreadable committed results and a bad `[guard]` are errors; moved
/// values are in the report ([`CheckReport::passed`]).
pub fn check(
    grid: &Grid,
    file: &Path,
    opts: &CheckOptions,
    progress: &dyn Progress,
) -> anyhow::Result<CheckReport> {
    let exp = grid.experiment();
    if exp.mode != Mode::Sim {
        return Err(usage(format!(
            "{}: mode = \"{}\": dtnkit bench check re-runs simulator experiments only (real-time runs do not \
             repeat exactly)",
            file.display(),
            serde_json::to_value(exp.mode)?.as_str().unwrap_or("?")
        )));
    }
    let guard = exp.guard.clone().unwrap_or_default();
    let committed: Vec<CommittedRun> = read_json(&opts.results, "runs.json")?;
    let points: Vec<CommittedPoint> = read_json(&opts.results, "aggregate.json")?;
    let committed_by = Provenance::read(&opts.results)?;
    let unknown: Vec<String> = guard
        .metrics
        .iter()
        .filter(|m| !committed.iter().any(|c| c.metrics.contains_key(*m)))
        .map(|m| format!("`{m}`"))
        .collect();
    if !unknown.is_empty() {
        return Err(usage(format!(
            "{}: guard.metrics: {} not in the committed results ({})",
            file.display(),
            unknown.join(", "),
            opts.results.join("runs.json").display()
        )));
    }
    let (planned, mut not_committed) = plan(grid, &guard, &committed);
    let specs: Vec<RunSpec> = planned.iter().map(|p| p.spec.clone()).collect();
    grid.validate_runs(&specs, &guard.set)
        .map_err(|e| e.context(format!("{}: [guard] set", file.display())))?;
    let mut estimate_s = 0.0;
    for p in &planned {
        estimate_s += estimate(grid, p, &guard.set)?;
    }
    if let Some(budget) = opts.budget_s.filter(|b| estimate_s > *b) {
        return Err(usage(format!(
            "{}: the check's {} re-runs would take about {estimate_s:.1} s (their committed runs' wall time), over \
             --budget-s {budget}: choose fewer or shorter runs in the experiment's [guard] (docs/bench.md \"Guard\")",
            file.display(),
            planned.len()
        )));
    }
    let method = if guard.shortened() {
        Method::Shortened {
            set: guard.set.clone(),
            floor: guard.floor.unwrap_or(GuardSettings::FLOOR),
        }
    } else {
        Method::AsCommitted {
            tolerance: guard.tolerance.unwrap_or(GuardSettings::TOLERANCE),
        }
    };
    // The re-runs' logs, in a directory of their own (checks may run side by side in one process).
    static CHECKS: AtomicUsize = AtomicUsize::new(0);
    let work = std::env::temp_dir().join(format!(
        "dtnkit-check-{}-{}-{}",
        exp.name,
        std::process::id(),
        CHECKS.fetch_add(1, Ordering::Relaxed)
    ));
    let ctx = RunContext {
        logs: crate::outputs::prepare(&work)?,
        keep_logs: false,
        dtnkit: PathBuf::from("dtnkit"),
    };
    let results = crate::local::execute(grid, &specs, &guard.set, &ctx, opts.jobs, progress);
    let _ = std::fs::remove_dir_all(&work);
    let results = results?;
    let mut comparisons = Vec::new();
    let mut reruns = Vec::new();
    for (p, r) in planned.iter().zip(&results) {
        let point = points.iter().find(|q| q.labels == p.labels);
        if point.is_none() && guard.shortened() {
            not_committed.push(format!("{} (aggregate.json)", p.labels.join("/")));
            continue;
        }
        comparisons.extend(compare_run(p, r, point, &guard, &method));
        reruns.push(Rerun {
            labels: p.labels.clone(),
            repetition: p.spec.repetition,
            seed: p.spec.seed,
            committed_wall_s: p.committed.value("wall_s").unwrap_or(f64::NAN),
            wall_s: r.metrics.get("wall_s").copied().unwrap_or(f64::NAN),
        });
    }
    Ok(CheckReport {
        experiment: exp.name.clone(),
        file: file.to_path_buf(),
        results: opts.results.clone(),
        committed_by,
        method,
        guarded: exp.guard.is_some(),
        estimate_s,
        reruns,
        not_committed,
        comparisons,
    })
}

/// The comparisons of one re-run: every metric `[guard] metrics` names, or every metric of the committed run and
/// the re-run but `wall_s`.
fn compare_run(
    p: &Planned,
    r: &RunResult,
    point: Option<&CommittedPoint>,
    guard: &GuardSettings,
    method: &Method,
) -> Vec<Comparison> {
    let names: Vec<String> = if guard.metrics.is_empty() {
        let mut names: Vec<String> = p
            .committed
            .metrics
            .keys()
            .chain(r.metrics.keys())
            .filter(|m| !UNCOMPARED.contains(&m.as_str()))
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    } else {
        guard.metrics.clone()
    };
    names
        .into_iter()
        .map(|metric| {
            let mean = point.and_then(|q| q.metrics.get(&metric));
            let committed_mean = mean.map_or(f64::NAN, |m| m.mean.unwrap_or(f64::NAN));
            let committed_ci95 = mean.map_or(f64::NAN, |m| m.ci95.unwrap_or(f64::NAN));
            let rerun = r.metrics.get(&metric).copied();
            let (committed_run, accepted, verdict) = match method {
                Method::AsCommitted { tolerance } => {
                    let c = p.committed.value(&metric);
                    let v = compare_values(c, rerun, |c, r| {
                        (r - c).abs() <= tolerance * c.abs().max(r.abs())
                    });
                    (c.unwrap_or(f64::NAN), f64::NAN, v)
                }
                Method::Shortened { floor, .. } => {
                    let half = committed_ci95.max(floor * committed_mean.abs());
                    let c = mean.map(|_| committed_mean);
                    let v = compare_values(c, rerun, |c, r| (r - c).abs() <= half);
                    (f64::NAN, half, v)
                }
            };
            Comparison {
                metric,
                labels: p.labels.clone(),
                repetition: p.spec.repetition,
                seed: p.spec.seed,
                committed_mean,
                committed_ci95,
                committed_run,
                accepted,
                rerun: rerun.unwrap_or(f64::NAN),
                verdict,
            }
        })
        .collect()
}

/// A value for the table: up to 6 decimals without trailing zeros, small values in scientific notation, `—` when
/// undefined.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    if v != 0.0 && v.abs() < 1e-3 {
        return format!("{v:.3e}");
    }
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl CheckReport {
    /// Values that fail the check.
    pub fn failures(&self) -> usize {
        self.comparisons
            .iter()
            .filter(|c| c.verdict.failed())
            .count()
            + self.not_committed.len()
    }

    /// Whether every compared value agrees and every selected run was committed.
    pub fn passed(&self) -> bool {
        self.failures() == 0
    }

    /// The report as text: where the committed results came from, what was re-run, the table of comparisons
    /// (those that failed, or `all`) and a summary.
    pub fn table(&self, all: bool) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "check of {} against {}",
            self.file.display(),
            self.results.display()
        );
        let _ = writeln!(
            t,
            "committed results: {}",
            self.committed_by.as_ref().map_or_else(
                || "provenance not recorded (no provenance.json)".to_string(),
                Provenance::summary
            )
        );
        let choice = if self.guarded {
            "chosen by the experiment's [guard]"
        } else {
            "no [guard]: the cheapest committed run of every grid point"
        };
        let how = match &self.method {
            Method::AsCommitted { tolerance } => {
                format!("as committed, compared run by run within {tolerance:e} relative")
            }
            Method::Shortened { set, floor } => format!(
                "shortened ({}), compared with the committed mean ± max(ci95, {floor} × |mean|)",
                set.iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let wall: f64 = self.reruns.iter().map(|r| r.wall_s).sum();
        let _ = writeln!(
            t,
            "re-run: {} runs ({choice}), {how}; {wall:.1} s of run time (estimated {:.1} s)",
            self.reruns.len(),
            self.estimate_s
        );
        let shown: Vec<&Comparison> = self
            .comparisons
            .iter()
            .filter(|c| all || c.verdict.failed())
            .collect();
        if !shown.is_empty() {
            let rows: Vec<[String; 7]> = shown
                .iter()
                .map(|c| {
                    let reference = c.reference();
                    let change = if reference.is_finite() && c.rerun.is_finite() && reference != 0.0
                    {
                        format!("{:+.3} %", 100.0 * (c.rerun - reference) / reference.abs())
                    } else {
                        "—".into()
                    };
                    let mut mean = format!("{} ± {}", num(c.committed_mean), num(c.committed_ci95));
                    if c.accepted.is_finite() {
                        let _ = write!(mean, " (accepting ± {})", num(c.accepted));
                    }
                    [
                        c.metric.clone(),
                        format!(
                            "{} rep {} (seed {})",
                            c.labels.join("/"),
                            c.repetition,
                            c.seed
                        ),
                        mean,
                        num(c.committed_run),
                        num(c.rerun),
                        change,
                        c.verdict.name().to_string(),
                    ]
                })
                .collect();
            let header = [
                "metric",
                "point",
                "committed mean ± ci95",
                "committed run",
                "re-run",
                "change",
                "verdict",
            ];
            let widths: Vec<usize> = (0..header.len())
                .map(|i| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([header[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |cells: &[&str]| -> String {
                let padded: Vec<String> = cells
                    .iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
                    .collect();
                padded.join(" | ").trim_end().to_string()
            };
            let _ = writeln!(t, "\n{}", line(&header));
            let _ = writeln!(
                t,
                "{}",
                widths
                    .iter()
                    .map(|w| "-".repeat(*w))
                    .collect::<Vec<_>>()
                    .join("-|-")
            );
            for r in &rows {
                let cells: Vec<&str> = r.iter().map(String::as_str).collect();
                let _ = writeln!(t, "{}", line(&cells));
            }
        }
        if !self.not_committed.is_empty() {
            let _ = writeln!(
                t,
                "\nnot in the committed results (the grid changed since they were written): {}",
                self.not_committed.join(", ")
            );
        }
        let count = |v: Verdict| self.comparisons.iter().filter(|c| c.verdict == v).count();
        let _ = writeln!(
            t,
            "\n{}: {} values compared: {} same, {} undefined in both, {} new, {} moved, {} missing{}",
            self.experiment,
            self.comparisons.len(),
            count(Verdict::Same),
            count(Verdict::Undefined),
            count(Verdict::New),
            count(Verdict::Moved),
            count(Verdict::Missing),
            if self.not_committed.is_empty() {
                String::new()
            } else {
                format!(", {} runs not committed", self.not_committed.len())
            }
        );
        t
    }

    /// Why the check failed and how to fix it (for an error message), or `None` when it passed.
    pub fn failure(&self) -> Option<String> {
        if self.passed() {
            return None;
        }
        Some(format!(
            "{}: {} values disagree with the committed results in {}. If the change that moved them is intended, \
             re-run the experiment (`dtnkit bench {}`, release build) and commit {} with a note of what changed \
             and why; otherwise fix the change",
            self.experiment,
            self.failures(),
            self.results.display(),
            self.file.display(),
            self.results.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run_local, LocalOptions, Silent};
    use analyze::experiment::Experiment;

    fn work(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bench-guard-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// Seed 000 scaled to 25 Mb/s for 0.5 s (trace A, two RTOs, two repetitions), with `guard` appended.
    fn grid(guard: &str) -> Grid {
        let text = format!(
            r#"
name = "guard_test"
scenario = "testdata/sim/seed000.toml"
repetitions = 2
[set]
"sim.duration_s" = 0.5
"traffic.duration_s" = 0.5
"traffic.bundle_size" = 25000
"link.forward.rate_bps" = 25e6
"link.forward_trace_preset" = "A"
[[axis]]
name = "rto_ms"
path = "node.ltp.rto_ms"
values = [30.0, 1000.0]
{guard}
"#
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        Grid::new(Experiment::from_toml_str(&text, "guard_test.toml", &root).expect("experiment"))
            .expect("grid")
    }

    fn committed(grid: &Grid, name: &str) -> PathBuf {
        let out = work(name);
        let opts = LocalOptions {
            jobs: 2,
            keep_logs: false,
            dtnkit: PathBuf::from("dtnkit"),
        };
        run_local(grid, &out, &opts, &Silent).expect("committed runs");
        out
    }

    fn run_check(grid: &Grid, results: &Path) -> CheckReport {
        let opts = CheckOptions {
            results: results.to_path_buf(),
            jobs: 2,
            budget_s: None,
        };
        check(grid, Path::new("guard_test.toml"), &opts, &Silent).expect("check")
    }

    /// Rewrites one file of the committed results through `edit` on its JSON.
    fn perturb(dir: &Path, file: &str, edit: impl FnOnce(&mut serde_json::Value)) {
        let path = dir.join(file);
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    }

    fn verdicts(report: &CheckReport, metric: &str) -> Vec<Verdict> {
        report
            .comparisons
            .iter()
            .filter(|c| c.metric == metric)
            .map(|c| c.verdict)
            .collect()
    }

    #[test]
    fn unchanged_results_pass_and_a_moved_metric_fails() {
        let g = grid("");
        let results = committed(&g, "exact");
        // Unchanged: every metric but wall_s of one run per point is re-run and found the same.
        let report = run_check(&g, &results);
        assert!(report.passed(), "{}", report.table(true));
        assert_eq!(report.reruns.len(), 2);
        assert_eq!(verdicts(&report, "tx_session_ms"), [Verdict::Same; 2]);
        assert!(verdicts(&report, "wall_s").is_empty());
        // Every re-run repeats the cheapest committed run of its point.
        let runs: Vec<CommittedRun> = read_json(&results, "runs.json").unwrap();
        for r in &report.reruns {
            let cheapest = runs
                .iter()
                .filter(|c| c.labels == r.labels)
                .filter_map(|c| c.value("wall_s"))
                .fold(f64::INFINITY, f64::min);
            assert_eq!(r.committed_wall_s, cheapest);
        }
        // The committed Tx session durations moved by 1e-5 (relative), a committed metric became undefined (the
        // re-run defines it), and one the re-run produces is absent (a metric added since: not a failure).
        perturb(&results, "runs.json", |v| {
            for r in v.as_array_mut().unwrap() {
                let m = r["metrics"].as_object_mut().unwrap();
                let tx = m["tx_session_ms"].as_f64().unwrap();
                m.insert("tx_session_ms".into(), (tx * (1.0 + 1e-5)).into());
                m.insert("cycle_ms".into(), serde_json::Value::Null);
                m.remove("rows");
            }
        });
        let report = run_check(&g, &results);
        assert!(!report.passed());
        assert_eq!(verdicts(&report, "tx_session_ms"), [Verdict::Moved; 2]);
        assert_eq!(verdicts(&report, "cycle_ms"), [Verdict::Moved; 2]);
        assert_eq!(verdicts(&report, "rows"), [Verdict::New; 2]);
        assert_eq!(verdicts(&report, "goodput_mbps"), [Verdict::Same; 2]);
        assert_eq!(report.failures(), 4);
        let table = report.table(false);
        assert!(table.contains("tx_session_ms | 30 rep"), "{table}");
        assert!(
            table.contains("+0.001 %") || table.contains("-0.001 %"),
            "{table}"
        );
        assert!(
            table.contains("MOVED") && !table.contains("goodput_mbps"),
            "{table}"
        );
        assert!(table.contains("provenance not recorded"), "{table}");
        let why = report.failure().expect("failed");
        assert!(
            why.contains("4 values disagree")
                && why.contains("re-run the experiment (`dtnkit bench guard_test.toml`"),
            "{why}"
        );
        let _ = std::fs::remove_dir_all(&results);
    }

    #[test]
    fn undefined_values_compare_as_equal_only_to_undefined_ones() {
        let exact = |c: f64, r: f64| (r - c).abs() <= 1e-6 * c.abs().max(r.abs());
        for (committed, rerun, verdict) in [
            (Some(f64::NAN), Some(f64::NAN), Verdict::Undefined),
            (Some(f64::NAN), Some(f64::INFINITY), Verdict::Undefined),
            (Some(f64::NAN), Some(1.0), Verdict::Moved),
            (Some(1.0), Some(f64::NAN), Verdict::Moved),
            (Some(1.0), None, Verdict::Missing),
            (None, Some(1.0), Verdict::New),
            (Some(0.0), Some(0.0), Verdict::Same),
            (Some(22.7), Some(22.7 * (1.0 + 5e-7)), Verdict::Same),
            (Some(22.7), Some(26.7), Verdict::Moved),
        ] {
            assert_eq!(
                compare_values(committed, rerun, exact),
                verdict,
                "{committed:?} vs {rerun:?}"
            );
        }
    }

    #[test]
    fn shortened_reruns_are_compared_with_the_committed_interval() {
        let g = grid(
            "[guard]\nset = { \"sim.duration_s\" = 0.25, \"traffic.duration_s\" = 0.25 }\n\
             metrics = [\"ideal_ms\", \"cycle_ms\"]\nfloor = 0.05\n",
        );
        let results = committed(&g, "shortened");
        let report = run_check(&g, &results);
        assert!(report.passed(), "{}", report.table(true));
        assert_eq!(report.comparisons.len(), 4);
        // Half the committed runs' simulated time: about half their wall time.
        let committed_wall: f64 = report.reruns.iter().map(|r| r.committed_wall_s).sum();
        assert!(
            (report.estimate_s - committed_wall / 2.0).abs() < 1e-9,
            "{} vs {committed_wall}",
            report.estimate_s
        );
        // The committed loss-free session duration 20 % longer than the re-run's, with a narrow interval: moved.
        let rerun_ideal: Vec<(Vec<String>, f64)> = report
            .comparisons
            .iter()
            .filter(|c| c.metric == "ideal_ms")
            .map(|c| (c.labels.clone(), c.rerun))
            .collect();
        perturb(&results, "aggregate.json", |v| {
            for p in v.as_array_mut().unwrap() {
                let labels: Vec<String> = serde_json::from_value(p["labels"].clone()).unwrap();
                let (_, ideal) = rerun_ideal.iter().find(|(l, _)| *l == labels).unwrap();
                let m = &mut p["metrics"]["ideal_ms"];
                m["mean"] = (ideal * 1.2).into();
                m["ci95"] = (ideal * 0.01).into();
            }
        });
        let report = run_check(&g, &results);
        assert_eq!(verdicts(&report, "ideal_ms"), [Verdict::Moved; 2]);
        assert_eq!(verdicts(&report, "cycle_ms"), [Verdict::Same; 2]);
        assert!(report.table(false).contains("(accepting ± "));
        // Over the budget: refused before any run, naming the estimate.
        let opts = CheckOptions {
            results: results.clone(),
            jobs: 1,
            budget_s: Some(1e-6),
        };
        let err = check(&g, Path::new("guard_test.toml"), &opts, &Silent).unwrap_err();
        assert!(
            err.is::<crate::BadInput>() && err.to_string().contains("over --budget-s 0.000001"),
            "{err}"
        );
        // A metric the committed results do not have: refused before any run, naming it.
        let typo = grid(
            "[guard]\nset = { \"sim.duration_s\" = 0.25 }\nmetrics = [\"ideal_ms\", \"idle_ms\"]\n",
        );
        let err = check(&typo, Path::new("guard_test.toml"), &opts, &Silent).unwrap_err();
        assert!(
            err.is::<crate::BadInput>()
                && err
                    .to_string()
                    .contains("guard.metrics: `idle_ms` not in the committed results"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&results);
    }

    #[test]
    fn guard_points_and_repetition_choose_the_reruns() {
        let g = grid("[guard]\npoints = [{ rto_ms = [\"1000\"] }]\nrepetition = 1\n");
        let results = committed(&g, "points");
        let report = run_check(&g, &results);
        assert!(report.passed(), "{}", report.table(true));
        let chosen: Vec<(Vec<String>, u32, u64)> = report
            .reruns
            .iter()
            .map(|r| (r.labels.clone(), r.repetition, r.seed))
            .collect();
        assert_eq!(chosen, [(vec!["1000".to_string()], 1, 2)]);
        // A selected run missing from the committed results (the grid grew since) fails, naming it.
        perturb(&results, "runs.json", |v| {
            v.as_array_mut().unwrap().retain(|r| r["spec"]["seed"] != 2);
        });
        let report = run_check(&g, &results);
        assert!(!report.passed() && report.reruns.is_empty());
        assert_eq!(report.not_committed, ["1000 rep 1"]);
        assert!(report.table(false).contains("not in the committed results"));
        // A simulator experiment without committed results is a usage error naming the file.
        let opts = CheckOptions {
            results: results.join("nothing"),
            jobs: 1,
            budget_s: None,
        };
        let err = check(&g, Path::new("guard_test.toml"), &opts, &Silent).unwrap_err();
        assert!(
            err.is::<crate::BadInput>() && err.to_string().contains("nothing/runs.json"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&results);
    }
}
