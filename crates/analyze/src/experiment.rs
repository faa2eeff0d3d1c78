//! Experiment files: a base scenario, overrides, a grid of parameter axes and repetitions; expanded into the
//! list of runs the bench executes, and the aggregation of their metrics (mean ± 95 % CI per grid point).
//!
//! Overrides are applied to the parsed `toml::Value` of the scenario before it is built, so any field of the
//! scenario format can be swept without the simulator knowing about experiments. A path is dotted
//! (`node.ltp.rto_ms`); when a segment names an array of tables (`[[node]]`, `[[link]]`) the rest of the path is
//! applied to every element, unless the next segment is an index (`link.0.forward.loss`). Missing tables on the
//! way are created, so optional keys can be added.
//!
//! ```toml
//! name = "fig05_rto"
//! title = "Fig. 5: Tx session duration split vs RTO (trace A, 7 sessions)"
//! scenario = "../testdata/sim/seed000.toml"   # relative to this file
//! mode = "sim"                                # or "emu", "ip", "loopback"
//! repetitions = 3                             # seeds: seed, seed + 1, ...
//! seed = 1
//! unset = []                                  # paths removed from the base scenario
//! [set]                                       # overrides applied to every run
//! "sim.duration_s" = 10.0
//! "link.forward_trace_preset" = "A"
//! [[axis]]                                    # axes: the grid is their cartesian product
//! name = "rto_ms"
//! path = "node.ltp.rto_ms"                    # one path (or `paths = [...]`) set to each value
//! values = [1000.0, 100.0, 30.0]
//! [[axis]]
//! name = "channel"
//! points = [ { label = "ideal", unset = ["link.forward_trace_preset"] },
//!            { label = "A", set = { "link.forward_trace_preset" = "A" } } ]
//! [[plot]]
//! kind = "line"                               # line (x numeric axis, one curve per `series` value), bars, stacked
//! x = "rto_ms"
//! series = "channel"                          # optional
//! y = ["tx_session_ms"]
//! title = "..."                               # optional
//! [slurm]                                     # only for `dtnkit bench --executor slurm`
//! cpus_per_task = 4                           # cores per run; exclusive = true: one run per node
//! [guard]                                     # only for `dtnkit bench check`: the reduced re-run compared with
//! points = [ { rto_ms = ["30"] } ]            #   the committed results (default: every point)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Value;

use crate::stats::{mean_ci95, MeanCi};
use crate::Error;

/// How runs are executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The deterministic simulator, in parallel worker threads.
    Sim,
    /// Real-time emulation (two nodes and the emulator on loopback), one run at a time.
    Emu,
    /// Real-time transfers across the emulator's IP mode (network namespaces; kernel TCP, a splitting gateway,
    /// BP over LTP or TCPCL), one run at a time; the base scenario is an IP-lab scenario, not a simulator one.
    Ip,
    /// Real nodes on loopback without the emulator (a chain of 2 to 5 nodes, one or two streams), one run at a
    /// time; the base scenario is a loopback scenario (`lab::loopback`).
    Loopback,
}

/// What an experiment file under `experiments/` describes, from its `mode` line alone (the two kinds have
/// different fields, so this is decided before either is parsed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A bench grid (`mode` = sim, emu, ip or loopback): [`Experiment::load`] reads it.
    Grid,
    /// `mode = "constellation"`: a plan from orbits, one simulation and its report, run by
    /// `experiments/constellation/run.sh`; [`Experiment::load`] refuses it with that advice.
    Constellation,
}

/// The kind of an experiment file's text; text that is not TOML, or has no `mode = "constellation"`, is a
/// grid (whose parsing then names what is wrong).
pub fn file_kind(text: &str) -> FileKind {
    let mode = text
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| match t.get("mode") {
            Some(toml::Value::String(m)) => Some(m.clone()),
            _ => None,
        });
    if mode.as_deref() == Some("constellation") {
        FileKind::Constellation
    } else {
        FileKind::Grid
    }
}

/// One point of an axis: a label and the overrides it applies.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AxisPoint {
    /// Label in tables and legends.
    pub label: String,
    /// Numeric position on a plot's x axis (default: the value when `values` was used, else the index).
    #[serde(default)]
    pub x: Option<f64>,
    /// Path → value overrides.
    #[serde(default)]
    pub set: BTreeMap<String, Value>,
    /// Paths removed.
    #[serde(default)]
    pub unset: Vec<String>,
    /// Overrides that depend on another axis' current point: axis name → that axis' point label → path →
    /// value (e.g. an IID loss point whose PER follows the trace axis). Applied after every axis' `set`.
    #[serde(default)]
    pub set_by: BTreeMap<String, BTreeMap<String, BTreeMap<String, Value>>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AxisFile {
    name: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    values: Vec<Value>,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    points: Vec<AxisPoint>,
}

/// A grid axis.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Axis {
    /// Name (column header).
    pub name: String,
    /// Its points, in file order.
    pub points: Vec<AxisPoint>,
}

/// A plot to draw from the aggregated results.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    /// `line`, `bars`, `stacked` or `indexed` (x = the index K of a metric family `y[0]` with `{}`
    /// standing for K, e.g. `bundle{}_delivery_rtt`: mean and CI per K, plus every run as a dot).
    pub kind: String,
    /// Axis on the x axis.
    pub x: String,
    /// Axis giving one curve / bar group member per point (optional).
    #[serde(default)]
    pub series: Option<String>,
    /// Metrics (one for line/bars; the stacked components for `stacked`).
    pub y: Vec<String>,
    /// Title (default: the metric names).
    #[serde(default)]
    pub title: Option<String>,
    /// Y axis label (default: the first metric name).
    #[serde(default)]
    pub y_label: Option<String>,
    /// File stem (default: derived from x and y).
    #[serde(default)]
    pub file: Option<String>,
    /// X axis label (default: the x axis' name).
    #[serde(default)]
    pub x_label: Option<String>,
    /// Line plots: logarithmic x axis (the points' x values must be positive).
    #[serde(default)]
    pub x_log: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    name: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    scenario: PathBuf,
    #[serde(default = "default_mode")]
    mode: Mode,
    #[serde(default = "one")]
    repetitions: u32,
    #[serde(default = "one_u64")]
    seed: u64,
    #[serde(default)]
    set: BTreeMap<String, Value>,
    #[serde(default)]
    unset: Vec<String>,
    #[serde(default)]
    axis: Vec<AxisFile>,
    #[serde(default)]
    plot: Vec<PlotSpec>,
    #[serde(default)]
    slurm: SlurmSettings,
    #[serde(default)]
    guard: Option<GuardSettings>,
}

/// What each run asks a Slurm cluster for (`[slurm]`; used by `dtnkit bench --executor slurm`, ignored by the
/// local executor). Real-time runs need whole cores of their own so the pacing of the link is never squeezed.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SlurmSettings {
    /// Cores per run (`sbatch --cpus-per-task`); default: the executor's per mode.
    #[serde(default)]
    pub cpus_per_task: Option<u32>,
    /// One run per node (`sbatch --exclusive`).
    #[serde(default)]
    pub exclusive: bool,
    /// Time limit of one run, in sbatch's syntax (`MM:SS`, `HH:MM:SS`, `D-HH`, ...); default: the partition's.
    #[serde(default)]
    pub time: Option<String>,
}

/// The reduced re-run of a simulator experiment that `dtnkit bench check` compares with the experiment's committed
/// results (`[guard]`, docs/bench.md "Guard"). Without it the check re-runs the cheapest committed run of every
/// grid point.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GuardSettings {
    /// Grid points re-run: a point is selected when some entry lists, for every axis the entry names, the point's
    /// label on that axis (`{ channel = ["ideal", "H"], sessions = ["1"] }`). Empty: every point.
    #[serde(default)]
    pub points: Vec<BTreeMap<String, Vec<String>>>,
    /// The repetition re-run at each point; default: the committed run of the point that took the least wall
    /// time.
    #[serde(default)]
    pub repetition: Option<u32>,
    /// Overrides applied after the point's (e.g. `"sim.duration_s" = 2.0`): a shortened re-run, compared with the
    /// committed mean ± max(ci95, floor × |mean|) instead of the committed run.
    #[serde(default)]
    pub set: BTreeMap<String, Value>,
    /// Metrics compared; default: every metric of the runs except `wall_s`. Required with `set`.
    #[serde(default)]
    pub metrics: Vec<String>,
    /// Re-runs as committed: largest relative difference accepted (default [`GuardSettings::TOLERANCE`]).
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// Shortened re-runs: smallest half-width of the accepted interval, relative to the committed mean (default
    /// [`GuardSettings::FLOOR`]).
    #[serde(default)]
    pub floor: Option<f64>,
}

impl GuardSettings {
    /// Default relative tolerance of re-runs as committed: the simulator is deterministic, so a re-run equals its
    /// committed run up to the last digits of the stored floats.
    pub const TOLERANCE: f64 = 1e-6;
    /// Default relative floor of the half-width accepted for shortened re-runs.
    pub const FLOOR: f64 = 0.05;

    /// Whether the re-runs are shortened (`set` given) rather than repeated as committed.
    pub fn shortened(&self) -> bool {
        !self.set.is_empty()
    }

    /// Whether `labels` (one per axis of `axes`) is a selected point.
    pub fn selects(&self, axes: &[Axis], labels: &[String]) -> bool {
        self.points.is_empty()
            || self.points.iter().any(|entry| {
                axes.iter()
                    .zip(labels)
                    .all(|(a, l)| entry.get(&a.name).is_none_or(|allowed| allowed.contains(l)))
            })
    }

    fn validate(&self, file: &str, axes: &[Axis], repetitions: u32) -> Result<(), Error> {
        let bad = |what: String| Err(Error::Invalid(format!("{file}: guard.{what}")));
        for entry in &self.points {
            for (name, labels) in entry {
                let Some(a) = axes.iter().find(|a| &a.name == name) else {
                    return bad(format!("points: axis `{name}` is not defined"));
                };
                if labels.is_empty() {
                    return bad(format!(
                        "points: axis `{name}` with no label selects nothing"
                    ));
                }
                if let Some(l) = labels
                    .iter()
                    .find(|l| !a.points.iter().any(|p| &p.label == *l))
                {
                    return bad(format!("points: `{l}` is not a point of axis `{name}`"));
                }
            }
        }
        if let Some(r) = self.repetition.filter(|&r| r >= repetitions) {
            return bad(format!(
                "repetition = {r}: the experiment has repetitions 0..{}",
                repetitions - 1
            ));
        }
        for (key, v) in [("tolerance", self.tolerance), ("floor", self.floor)] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                return bad(format!("{key} = {v}: expected a number >= 0"));
            }
        }
        if self.shortened() && self.metrics.is_empty() {
            return bad(
                "set shortens the re-runs: name the metrics to compare (`metrics = [...]`), those that do not \
                 scale with the run's length"
                    .into(),
            );
        }
        Ok(())
    }
}

fn default_mode() -> Mode {
    Mode::Sim
}
fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}

/// A parsed experiment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Experiment {
    /// Short name (file stems).
    pub name: String,
    /// Title for the report.
    pub title: String,
    /// Free text for the report.
    pub description: String,
    /// Base scenario path (resolved against the experiment file's directory).
    pub scenario: PathBuf,
    /// Execution mode.
    pub mode: Mode,
    /// Repetitions per grid point.
    pub repetitions: u32,
    /// Seed of the first repetition.
    pub seed: u64,
    /// Overrides applied to every run.
    pub set: BTreeMap<String, Value>,
    /// Paths removed from every run.
    pub unset: Vec<String>,
    /// Grid axes.
    pub axes: Vec<Axis>,
    /// Plots.
    pub plots: Vec<PlotSpec>,
    /// Cluster placement of each run.
    #[serde(default)]
    pub slurm: SlurmSettings,
    /// The reduced re-run `dtnkit bench check` compares with the committed results.
    #[serde(default)]
    pub guard: Option<GuardSettings>,
}

/// Most runs one experiment may expand to (a typo in a grid should not start a week of runs).
pub const MAX_RUNS: usize = 100_000;

fn label_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Float(f) => format!("{f}"),
        other => other.to_string(),
    }
}

fn x_of(v: &Value) -> Option<f64> {
    match v {
        Value::Float(f) => Some(*f),
        Value::Integer(i) => Some(*i as f64),
        _ => None,
    }
}

impl Experiment {
    /// Reads an experiment file.
    pub fn load(path: &Path) -> Result<Experiment, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Experiment::from_toml_str(&text, &path.display().to_string(), base)
    }

    /// Parses experiment text; `file` names it in errors, `base` resolves the scenario path.
    pub fn from_toml_str(text: &str, file: &str, base: &Path) -> Result<Experiment, Error> {
        if file_kind(text) == FileKind::Constellation {
            return Err(Error::Invalid(format!(
                "{file}: mode = \"constellation\": a constellation experiment (plan from orbits, one simulation, \
                 a report), not a bench grid; run it with `experiments/constellation/run.sh {file}`"
            )));
        }
        let f: ExperimentFile =
            toml::from_str(text).map_err(|e| Error::Invalid(format!("{file}: {e}")))?;
        if f.repetitions == 0 {
            return Err(Error::Invalid(format!(
                "{file}: repetitions = 0: expected at least 1"
            )));
        }
        let mut axes = Vec::new();
        for a in f.axis {
            let mut paths = a.paths.clone();
            if let Some(p) = &a.path {
                paths.insert(0, p.clone());
            }
            let points = if !a.points.is_empty() {
                if !a.values.is_empty() || !paths.is_empty() {
                    return Err(Error::Invalid(format!(
                        "{file}: axis `{}`: give either `points` or `path`/`paths` + `values`, not both",
                        a.name
                    )));
                }
                a.points
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut p)| {
                        p.x.get_or_insert(i as f64);
                        p
                    })
                    .collect()
            } else {
                if paths.is_empty() || a.values.is_empty() {
                    return Err(Error::Invalid(format!(
                        "{file}: axis `{}`: expected `path` (or `paths`) and a non-empty `values`, or `points`",
                        a.name
                    )));
                }
                if !a.labels.is_empty() && a.labels.len() != a.values.len() {
                    return Err(Error::Invalid(format!(
                        "{file}: axis `{}`: {} labels for {} values",
                        a.name,
                        a.labels.len(),
                        a.values.len()
                    )));
                }
                a.values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| AxisPoint {
                        label: a.labels.get(i).cloned().unwrap_or_else(|| label_of(v)),
                        x: x_of(v).or(Some(i as f64)),
                        set: paths.iter().map(|p| (p.clone(), v.clone())).collect(),
                        unset: Vec::new(),
                        set_by: BTreeMap::new(),
                    })
                    .collect()
            };
            if axes.iter().any(|x: &Axis| x.name == a.name) {
                return Err(Error::Invalid(format!(
                    "{file}: axis `{}` defined twice",
                    a.name
                )));
            }
            axes.push(Axis {
                name: a.name,
                points,
            });
        }
        for a in &axes {
            for p in &a.points {
                for (other, by_label) in &p.set_by {
                    let Some(o) = axes.iter().find(|x| &x.name == other) else {
                        return Err(Error::Invalid(format!(
                            "{file}: axis `{}` point `{}`: set_by refers to axis `{other}`, which is not defined",
                            a.name, p.label
                        )));
                    };
                    if let Some(l) = by_label
                        .keys()
                        .find(|l| !o.points.iter().any(|q| &q.label == *l))
                    {
                        return Err(Error::Invalid(format!(
                            "{file}: axis `{}` point `{}`: set_by.{other} names `{l}`, which is not a point of `{other}`",
                            a.name, p.label
                        )));
                    }
                }
            }
        }
        for p in &f.plot {
            // `indexed` plots put an index on x (metric families like `bundle{}_delivery_rtt`), not an axis.
            let x_axis = (p.kind != "indexed").then_some(&p.x);
            for ax in x_axis.into_iter().chain(p.series.iter()) {
                if !axes.iter().any(|a| &a.name == ax) {
                    return Err(Error::Invalid(format!(
                        "{file}: plot refers to axis `{ax}`, which is not defined"
                    )));
                }
            }
            if !matches!(p.kind.as_str(), "line" | "bars" | "stacked" | "indexed") || p.y.is_empty()
            {
                return Err(Error::Invalid(format!(
                    "{file}: plot kind `{}` with {} metrics: expected line, bars, stacked or indexed and at least one y",
                    p.kind,
                    p.y.len()
                )));
            }
            if p.kind == "indexed" && (p.y.len() != 1 || !p.y[0].contains("{}")) {
                return Err(Error::Invalid(format!(
                    "{file}: indexed plot with y = {:?}: expected one metric family with `{{}}` for the index, e.g. \"bundle{{}}_delivery_rtt\"",
                    p.y
                )));
            }
        }
        let e = Experiment {
            name: f.name.clone(),
            title: f.title.unwrap_or(f.name),
            description: f.description.unwrap_or_default(),
            scenario: base.join(f.scenario),
            mode: f.mode,
            repetitions: f.repetitions,
            seed: f.seed,
            set: f.set,
            unset: f.unset,
            axes,
            plots: f.plot,
            slurm: f.slurm,
            guard: f.guard,
        };
        if let Some(g) = &e.guard {
            g.validate(file, &e.axes, e.repetitions)?;
        }
        if e.slurm.cpus_per_task == Some(0) {
            return Err(Error::Invalid(format!(
                "{file}: slurm.cpus_per_task = 0: expected at least 1"
            )));
        }
        if e.slurm.time.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::Invalid(format!(
                "{file}: slurm.time is empty: expected a time limit such as \"30:00\""
            )));
        }
        let n = e.grid_size().saturating_mul(e.repetitions as usize);
        if n > MAX_RUNS {
            return Err(Error::Invalid(format!(
                "{file}: {n} runs: expected at most {MAX_RUNS}"
            )));
        }
        Ok(e)
    }

    /// Number of grid points.
    pub fn grid_size(&self) -> usize {
        self.axes
            .iter()
            .map(|a| a.points.len())
            .fold(1usize, usize::saturating_mul)
    }

    /// Every run: grid points in row-major order (last axis fastest), repetitions innermost.
    pub fn runs(&self) -> Vec<RunSpec> {
        let mut out = Vec::new();
        for g in 0..self.grid_size() {
            let mut idx = Vec::with_capacity(self.axes.len());
            let mut rest = g;
            for a in self.axes.iter().rev() {
                let n = a.points.len().max(1);
                idx.push(rest % n);
                rest /= n;
            }
            idx.reverse();
            for rep in 0..self.repetitions {
                out.push(RunSpec {
                    index: out.len(),
                    grid_index: g,
                    point: idx.clone(),
                    repetition: rep,
                    seed: self.seed.wrapping_add(rep as u64),
                });
            }
        }
        out
    }

    /// Labels of a grid point, one per axis.
    pub fn labels(&self, point: &[usize]) -> Vec<String> {
        self.axes
            .iter()
            .zip(point)
            .map(|(a, &i)| a.points.get(i).map(|p| p.label.clone()).unwrap_or_default())
            .collect()
    }

    /// The scenario document of one run: the base with the experiment's and the point's overrides applied and
    /// `sim.seed` set to the run's seed.
    pub fn apply(&self, base: &Value, run: &RunSpec) -> Result<Value, Error> {
        let mut doc = base.clone();
        for p in &self.unset {
            unset_path(&mut doc, p)?;
        }
        for (p, v) in &self.set {
            set_path(&mut doc, p, v)?;
        }
        for (a, &i) in self.axes.iter().zip(&run.point) {
            if let Some(pt) = a.points.get(i) {
                for p in &pt.unset {
                    unset_path(&mut doc, p)?;
                }
                for (p, v) in &pt.set {
                    set_path(&mut doc, p, v)?;
                }
            }
        }
        for (a, &i) in self.axes.iter().zip(&run.point) {
            let Some(pt) = a.points.get(i) else { continue };
            for (other, by_label) in &pt.set_by {
                let label = self
                    .axes
                    .iter()
                    .position(|x| &x.name == other)
                    .and_then(|k| {
                        let j = *run.point.get(k)?;
                        self.axes.get(k)?.points.get(j).map(|p| p.label.as_str())
                    });
                if let Some(sets) = label.and_then(|l| by_label.get(l)) {
                    for (p, v) in sets {
                        set_path(&mut doc, p, v)?;
                    }
                }
            }
        }
        set_path(&mut doc, "sim.seed", &Value::Integer(run.seed as i64))?;
        Ok(doc)
    }
}

/// One run of the grid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Position in [`Experiment::runs`].
    pub index: usize,
    /// Grid point number.
    pub grid_index: usize,
    /// Point index on each axis.
    pub point: Vec<usize>,
    /// Repetition number.
    pub repetition: u32,
    /// Scenario seed.
    pub seed: u64,
}

fn bad_path(path: &str, why: &str) -> Error {
    Error::Invalid(format!("override path `{path}`: {why}"))
}

/// Sets `path` (dotted, see the module docs) to `v` in `doc`.
pub fn set_path(doc: &mut Value, path: &str, v: &Value) -> Result<(), Error> {
    let segs: Vec<&str> = path.split('.').collect();
    if segs.iter().any(|s| s.is_empty()) {
        return Err(bad_path(path, "empty segment"));
    }
    set_rec(doc, &segs, v, path)
}

fn set_rec(cur: &mut Value, segs: &[&str], v: &Value, path: &str) -> Result<(), Error> {
    let Some((first, rest)) = segs.split_first() else {
        *cur = v.clone();
        return Ok(());
    };
    match cur {
        Value::Table(t) => {
            if rest.is_empty() {
                t.insert((*first).to_string(), v.clone());
                return Ok(());
            }
            let child = t
                .entry((*first).to_string())
                .or_insert_with(|| Value::Table(Default::default()));
            set_rec(child, rest, v, path)
        }
        Value::Array(items) => {
            if let Ok(i) = first.parse::<usize>() {
                let n = items.len();
                let item = items.get_mut(i).ok_or_else(|| {
                    bad_path(path, &format!("index {i} out of range (array of {n})"))
                })?;
                set_rec(item, rest, v, path)
            } else {
                if items.is_empty() {
                    return Err(bad_path(path, "the array is empty"));
                }
                for item in items.iter_mut() {
                    set_rec(item, segs, v, path)?;
                }
                Ok(())
            }
        }
        _ => Err(bad_path(
            path,
            &format!("`{first}` is below a value that is not a table or array"),
        )),
    }
}

/// Removes `path` from `doc` (no error if it is absent).
pub fn unset_path(doc: &mut Value, path: &str) -> Result<(), Error> {
    let segs: Vec<&str> = path.split('.').collect();
    if segs.iter().any(|s| s.is_empty()) {
        return Err(bad_path(path, "empty segment"));
    }
    unset_rec(doc, &segs);
    Ok(())
}

fn unset_rec(cur: &mut Value, segs: &[&str]) {
    let Some((first, rest)) = segs.split_first() else {
        return;
    };
    match cur {
        Value::Table(t) => {
            if rest.is_empty() {
                t.remove(*first);
            } else if let Some(c) = t.get_mut(*first) {
                unset_rec(c, rest);
            }
        }
        Value::Array(items) => {
            if let Ok(i) = first.parse::<usize>() {
                if let Some(item) = items.get_mut(i) {
                    unset_rec(item, rest);
                }
            } else {
                for item in items.iter_mut() {
                    unset_rec(item, segs);
                }
            }
        }
        _ => {}
    }
}

/// The metrics of one finished run (name → value; NaN = undefined in this run).
pub type Metrics = BTreeMap<String, f64>;

/// Mean ± CI of every metric at one grid point.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PointAggregate {
    /// Grid point number.
    pub grid_index: usize,
    /// Point index per axis.
    pub point: Vec<usize>,
    /// Axis labels.
    pub labels: Vec<String>,
    /// Per metric.
    pub metrics: BTreeMap<String, MeanCi>,
}

/// Aggregates runs (`(spec, metrics)`, any order) per grid point.
pub fn aggregate(exp: &Experiment, runs: &[(RunSpec, Metrics)]) -> Vec<PointAggregate> {
    type Samples = BTreeMap<String, Vec<f64>>;
    let mut by_point: BTreeMap<usize, (Vec<usize>, Samples)> = BTreeMap::new();
    for (spec, m) in runs {
        let e = by_point
            .entry(spec.grid_index)
            .or_insert_with(|| (spec.point.clone(), BTreeMap::new()));
        for (k, v) in m {
            e.1.entry(k.clone()).or_default().push(*v);
        }
    }
    by_point
        .into_iter()
        .map(|(g, (point, ms))| PointAggregate {
            grid_index: g,
            labels: exp.labels(&point),
            point,
            metrics: ms.into_iter().map(|(k, v)| (k, mean_ci95(&v))).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constellation_file_is_refused_with_the_command_that_runs_it() {
        let text = "mode = \"constellation\"\nwalker = \"53:96/8/1\"\naltitude_km = \"550\"\n";
        assert_eq!(file_kind(text), FileKind::Constellation);
        let err = Experiment::from_toml_str(text, "experiments/c.toml", Path::new("experiments"))
            .expect_err("not a grid");
        let msg = err.to_string();
        assert!(
            msg.contains("experiments/c.toml: mode = \"constellation\"")
                && msg.contains("experiments/constellation/run.sh experiments/c.toml"),
            "{msg}"
        );
        // Grids, text that is not TOML and a mode that is not a string stay grids (their parsing names the fault).
        assert_eq!(file_kind(EXP), FileKind::Grid);
        assert_eq!(file_kind("mode = ["), FileKind::Grid);
        assert_eq!(file_kind("mode = 3"), FileKind::Grid);
    }

    const EXP: &str = r#"
name = "t"
scenario = "s.toml"
repetitions = 2
seed = 10
unset = ["link.forward_trace_preset"]
[set]
"sim.duration_s" = 2.0
[[axis]]
name = "rto"
path = "node.ltp.rto_ms"
values = [1000.0, 30.0]
[[axis]]
name = "channel"
points = [ { label = "ideal" }, { label = "A", set = { "link.0.forward_trace_preset" = "A" } } ]
[[axis]]
name = "loss"
points = [ { label = "trace" },
           { label = "iid", unset = ["link.forward_trace_preset"],
             set_by = { channel = { A = { "link.forward.loss" = { model = "iid", per = 0.05 } } } } } ]
"#;

    const SCN: &str = r#"
[sim]
duration_s = 100.0
seed = 1
[[node]]
number = 1
ltp = { rto_ms = 5.0 }
[[node]]
number = 2
[[link]]
a = 1
b = 2
forward_trace_preset = "H"
"#;

    #[test]
    fn grid_and_overrides() {
        let e = Experiment::from_toml_str(EXP, "t.toml", Path::new("/x")).unwrap();
        assert_eq!(e.scenario, Path::new("/x/s.toml"));
        assert_eq!(e.grid_size(), 8);
        let runs = e.runs();
        assert_eq!(runs.len(), 16);
        // Grid point 3 = rto 0, channel 1, loss 1 (last axis fastest); repetition 1 -> seed 11.
        let r = &runs[7];
        assert_eq!(r.point, vec![0, 1, 1]);
        assert_eq!((r.repetition, r.seed), (1, 11));
        let base: Value = toml::from_str(SCN).unwrap();
        let d = e.apply(&base, r).unwrap();
        assert_eq!(d["sim"]["duration_s"].as_float(), Some(2.0));
        assert_eq!(d["sim"]["seed"].as_integer(), Some(11));
        // Applied to every node, created where absent.
        assert_eq!(d["node"][0]["ltp"]["rto_ms"].as_float(), Some(1000.0));
        assert_eq!(d["node"][1]["ltp"]["rto_ms"].as_float(), Some(1000.0));
        // The iid point removed the trace the channel axis set, and set_by chose the PER for channel A.
        assert!(d["link"][0].get("forward_trace_preset").is_none());
        assert_eq!(
            d["link"][0]["forward"]["loss"]["per"].as_float(),
            Some(0.05)
        );
        let trace = e.apply(&base, &runs[5]).unwrap(); // point [0, 1, 0]
        assert_eq!(trace["link"][0]["forward_trace_preset"].as_str(), Some("A"));
        assert!(trace["link"][0].get("forward").is_none());
        let ideal_iid = e.apply(&base, &runs[3]).unwrap(); // point [0, 0, 1]: no set_by entry for "ideal"
        assert!(ideal_iid["link"][0].get("forward").is_none());
        assert_eq!(e.labels(&runs[15].point), vec!["30", "A", "iid"]);
    }

    #[test]
    fn bad_files_name_the_problem() {
        let e =
            Experiment::from_toml_str("name='x'\nscenario='s'\nrepetitions=0", "f", Path::new("."));
        assert!(e.unwrap_err().to_string().contains("repetitions = 0"));
        let e = Experiment::from_toml_str(
            "name='x'\nscenario='s'\n[[plot]]\nkind='line'\nx='nope'\ny=['a']",
            "f",
            Path::new("."),
        );
        assert!(e.unwrap_err().to_string().contains("axis `nope`"));
        let mut v: Value = toml::from_str(SCN).unwrap();
        let err = set_path(&mut v, "link.5.a", &Value::Integer(1)).unwrap_err();
        assert!(err.to_string().contains("index 5 out of range"));
        let err = set_path(&mut v, "sim.duration_s.x", &Value::Integer(1)).unwrap_err();
        assert!(err.to_string().contains("not a table"));
    }

    #[test]
    fn slurm_settings_are_read_and_checked() {
        let e = Experiment::from_toml_str(EXP, "t.toml", Path::new("/x")).unwrap();
        assert_eq!(e.slurm, SlurmSettings::default());
        let text =
            format!("{EXP}\n[slurm]\ncpus_per_task = 3\nexclusive = true\ntime = \"10:00\"\n");
        let e = Experiment::from_toml_str(&text, "t.toml", Path::new("/x")).unwrap();
        assert_eq!(e.slurm.cpus_per_task, Some(3));
        assert!(e.slurm.exclusive);
        assert_eq!(e.slurm.time.as_deref(), Some("10:00"));
        for (bad, says) in [
            ("cpus_per_task = 0", "slurm.cpus_per_task = 0"),
            ("time = \" \"", "slurm.time is empty"),
            ("cores = 2", "unknown field `cores`"),
        ] {
            let text = format!("{EXP}\n[slurm]\n{bad}\n");
            let err = Experiment::from_toml_str(&text, "t.toml", Path::new("/x")).unwrap_err();
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn guard_settings_select_points_and_are_checked() {
        let e = Experiment::from_toml_str(EXP, "t.toml", Path::new("/x")).unwrap();
        assert_eq!(e.guard, None);
        let text = format!(
            "{EXP}\n[guard]\npoints = [{{ rto = [\"30\"], channel = [\"A\"] }}, {{ loss = [\"iid\"] }}]\n\
             repetition = 1\nset = {{ \"sim.duration_s\" = 0.5 }}\nmetrics = [\"m\"]\nfloor = 0.1\n"
        );
        let e = Experiment::from_toml_str(&text, "t.toml", Path::new("/x")).unwrap();
        let g = e.guard.clone().expect("guard");
        assert!(g.shortened());
        assert_eq!(
            (g.repetition, g.floor, g.tolerance),
            (Some(1), Some(0.1), None)
        );
        let selected: Vec<Vec<String>> = e
            .runs()
            .iter()
            .filter(|r| r.repetition == 0)
            .map(|r| e.labels(&r.point))
            .filter(|l| g.selects(&e.axes, l))
            .collect();
        // 30/A/* from the first entry, */*/iid from the second.
        assert_eq!(
            selected,
            [
                ["1000", "ideal", "iid"],
                ["1000", "A", "iid"],
                ["30", "ideal", "iid"],
                ["30", "A", "trace"],
                ["30", "A", "iid"],
            ]
            .map(|l| l.map(String::from).to_vec())
        );
        assert!(GuardSettings::default().selects(&e.axes, &e.labels(&[0, 0, 0])));
        let back: Experiment = toml::from_str(&toml::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        for (bad, says) in [
            (
                "points = [{ speed = [\"1\"] }]",
                "guard.points: axis `speed` is not defined",
            ),
            (
                "points = [{ rto = [\"31\"] }]",
                "guard.points: `31` is not a point of axis `rto`",
            ),
            (
                "points = [{ rto = [] }]",
                "axis `rto` with no label selects nothing",
            ),
            (
                "repetition = 2",
                "guard.repetition = 2: the experiment has repetitions 0..1",
            ),
            (
                "tolerance = -1.0",
                "guard.tolerance = -1: expected a number >= 0",
            ),
            (
                "set = { \"sim.duration_s\" = 1.0 }",
                "name the metrics to compare",
            ),
            ("runs = 3", "unknown field `runs`"),
        ] {
            let text = format!("{EXP}\n[guard]\n{bad}\n");
            let err = Experiment::from_toml_str(&text, "t.toml", Path::new("/x")).unwrap_err();
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn an_experiment_survives_a_toml_round_trip() {
        // The Slurm executor stores the experiment in the output directory and every run reads it back.
        let text = format!("{EXP}\n[slurm]\ncpus_per_task = 2\n[[plot]]\nkind = \"line\"\nx = \"rto\"\ny = [\"m\"]\n");
        let e = Experiment::from_toml_str(&text, "t.toml", Path::new("/x")).unwrap();
        let back: Experiment = toml::from_str(&toml::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.runs(), e.runs());
    }

    #[test]
    fn aggregation_groups_by_point() {
        let e = Experiment::from_toml_str(EXP, "t.toml", Path::new("/x")).unwrap();
        let runs: Vec<(RunSpec, Metrics)> = e
            .runs()
            .into_iter()
            .map(|r| {
                let v = r.grid_index as f64 * 10.0 + r.repetition as f64;
                (r, [("m".to_string(), v)].into_iter().collect())
            })
            .collect();
        let agg = aggregate(&e, &runs);
        assert_eq!(agg.len(), 8);
        let m = agg[2].metrics["m"];
        assert_eq!(m.n, 2);
        assert!((m.mean - 20.5).abs() < 1e-12);
        // s = 0.7071, t(1) = 12.706: half-width = 12.706 * 0.7071 / sqrt(2) = 6.353
        assert!((m.ci95 - 6.353).abs() < 1e-3);
    }
}
