//! A grid on disk, for executors that start every run as its own process (possibly on another machine sharing the
//! output directory): the grid is written once into `OUT/grid.toml`, each run reads it and writes its result into
//! `OUT/results/runNNNNN.toml`, and the aggregation reads them all back and writes the same outputs as the local
//! executor.
//!
//! Files are TOML: floats are written in Rust's shortest round-trip form (NaN and infinities included) and read
//! back exactly, so the aggregates of stored results equal those of results kept in memory.

use std::path::{Path, PathBuf};

use analyze::experiment::Experiment;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use toml::Value;

use crate::{usage, BenchOutcome, Grid, RunContext, RunResult};

/// Version of the `grid.toml` layout.
const FORMAT: u32 = 1;
const GRID_FILE: &str = "grid.toml";
const RESULTS_DIR: &str = "results";

#[derive(Serialize, Deserialize)]
struct GridFile {
    /// [`FORMAT`].
    format: u32,
    /// Keep each run's segment logs under `OUT/logs`.
    keep_logs: bool,
    /// Absolute directory the scenario's relative paths resolve against.
    scenario_dir: PathBuf,
    /// The experiment, with the command line's overrides applied.
    experiment: Experiment,
    /// The base scenario document.
    scenario: Value,
}

/// The output directory of a grid whose runs execute as separate processes.
#[derive(Debug, Clone)]
pub struct GridDir {
    out: PathBuf,
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename, so a reader (another
/// process, another machine) never sees a partial file.
fn write_atomic(path: &Path, text: &str) -> anyhow::Result<()> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

impl GridDir {
    /// Writes `grid` into `out` (created if needed). When `out` already holds a grid, it must be the same
    /// experiment and base scenario — its results are then reused — or this fails naming the directory.
    pub fn create(out: &Path, grid: &Grid, keep_logs: bool) -> anyhow::Result<GridDir> {
        crate::outputs::prepare(out)?;
        let dir = GridDir {
            out: out.to_path_buf(),
        };
        let path = dir.grid_file();
        if path.exists() {
            let old = dir.load()?.0;
            if old.experiment() != grid.experiment() || old.base() != grid.base() {
                return Err(usage(format!(
                    "{}: holds a different grid (the experiment, its command-line overrides or the base scenario \
                     changed since it was written): choose another --out or remove the directory",
                    path.display()
                )));
            }
        }
        let scenario_dir = std::path::absolute(grid.scenario_dir())
            .with_context(|| format!("resolving {}", grid.scenario_dir().display()))?;
        let file = GridFile {
            format: FORMAT,
            keep_logs,
            scenario_dir,
            experiment: grid.experiment().clone(),
            scenario: grid.base().clone(),
        };
        write_atomic(&path, &toml::to_string(&file).context("encoding the grid")?)?;
        std::fs::create_dir_all(dir.results_dir())
            .with_context(|| format!("creating {}", dir.results_dir().display()))?;
        Ok(dir)
    }

    /// Opens a directory written by [`GridDir::create`].
    pub fn open(out: &Path) -> anyhow::Result<GridDir> {
        let dir = GridDir {
            out: out.to_path_buf(),
        };
        if !dir.grid_file().is_file() {
            return Err(usage(format!(
                "{}: no {GRID_FILE}: expected an output directory of `dtnkit bench --executor slurm`",
                out.display()
            )));
        }
        Ok(dir)
    }

    /// The output directory.
    pub fn path(&self) -> &Path {
        &self.out
    }

    fn grid_file(&self) -> PathBuf {
        self.out.join(GRID_FILE)
    }

    fn results_dir(&self) -> PathBuf {
        self.out.join(RESULTS_DIR)
    }

    /// The grid and whether run logs are kept.
    pub fn load(&self) -> anyhow::Result<(Grid, bool)> {
        let path = self.grid_file();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let f: GridFile =
            toml::from_str(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        if f.format != FORMAT {
            return Err(usage(format!(
                "{}: format {}: expected {FORMAT} (written by another version of dtnkit)",
                path.display(),
                f.format
            )));
        }
        Ok((
            Grid::from_parts(f.experiment, f.scenario, f.scenario_dir),
            f.keep_logs,
        ))
    }

    /// Where run `index` stores its result.
    pub fn result_path(&self, index: usize) -> PathBuf {
        self.results_dir().join(format!("run{index:05}.toml"))
    }

    /// Whether run `index` has a result.
    pub fn has_result(&self, index: usize) -> bool {
        self.result_path(index).is_file()
    }

    fn read_result(&self, index: usize) -> anyhow::Result<RunResult> {
        let path = self.result_path(index);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    fn write_result(&self, r: &RunResult) -> anyhow::Result<()> {
        let text = toml::to_string(r).context("encoding a run result")?;
        write_atomic(&self.result_path(r.spec.index), &text)
    }
}

/// Executes run `index` of the grid in `out` and stores its result (`dtnkit bench run-point`); `dtnkit` is the
/// binary the lab starts in real-time modes.
pub fn run_point(out: &Path, index: usize, dtnkit: &Path) -> anyhow::Result<RunResult> {
    let dir = GridDir::open(out)?;
    let (grid, keep_logs) = dir.load()?;
    let runs = grid.runs();
    let Some(spec) = runs.get(index) else {
        return Err(usage(format!(
            "run {index}: the grid in {} has {} runs (0..{})",
            out.display(),
            runs.len(),
            runs.len().saturating_sub(1)
        )));
    };
    let ctx = RunContext {
        logs: crate::outputs::prepare(out)?,
        keep_logs,
        dtnkit: dtnkit.to_path_buf(),
    };
    let r = grid.run(spec, &ctx)?;
    dir.write_result(&r)?;
    Ok(r)
}

/// Reads every run's result from `out` and writes the outputs exactly as the local executor does
/// (`dtnkit bench aggregate`). Fails, listing them, when runs have no result.
pub fn aggregate(out: &Path) -> anyhow::Result<BenchOutcome> {
    let dir = GridDir::open(out)?;
    let (grid, keep_logs) = dir.load()?;
    let specs = grid.runs();
    let missing: Vec<usize> = specs
        .iter()
        .map(|s| s.index)
        .filter(|&i| !dir.has_result(i))
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "{} of {} runs have no result ({} {}): `dtnkit bench status {}` shows why; running the same \
             `dtnkit bench ... --executor slurm` again submits them",
            missing.len(),
            specs.len(),
            if missing.len() == 1 { "run" } else { "runs" },
            crate::slurm::index_ranges(&missing),
            out.display()
        );
    }
    let mut runs = Vec::with_capacity(specs.len());
    for spec in &specs {
        let r = dir.read_result(spec.index)?;
        if r.spec != *spec {
            anyhow::bail!(
                "{}: the result of another run ({:?}; the grid expects {:?})",
                dir.result_path(spec.index).display(),
                r.spec,
                spec
            );
        }
        runs.push(r);
    }
    crate::finish(grid.experiment(), runs, out, keep_logs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run_local, LocalOptions, Silent};

    fn work(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bench-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A 2-point x 2-repetition sim grid of seed 000, scaled to 25 Mb/s for 0.5 s.
    fn experiment(repetitions: u32) -> Experiment {
        let text = format!(
            r#"
name = "store_test"
scenario = "testdata/sim/seed000.toml"
repetitions = {repetitions}
[set]
"sim.duration_s" = 0.5
"traffic.duration_s" = 0.5
"traffic.bundle_size" = 25000
"link.forward.rate_bps" = 25e6
[[axis]]
name = "rto_ms"
path = "node.ltp.rto_ms"
values = [30.0, 1000.0]
"#
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        Experiment::from_toml_str(&text, "store_test.toml", &root).expect("experiment")
    }

    #[test]
    fn results_survive_the_file_bit_for_bit() {
        let r = RunResult {
            spec: experiment(1).runs()[1].clone(),
            labels: vec!["1000".into()],
            metrics: [
                ("a", f64::NAN),
                ("b", f64::INFINITY),
                ("c", -0.0),
                ("d", 1e-300),
                ("e", 0.1 + 0.2),
                ("f", 1.234_567_891_234_567_9e208),
                ("g", f64::MIN_POSITIVE),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        };
        let back: RunResult = toml::from_str(&toml::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.spec, r.spec);
        for (k, v) in &r.metrics {
            assert_eq!(back.metrics[k].to_bits(), v.to_bits(), "{k}");
        }
    }

    #[test]
    fn runs_one_by_one_aggregate_like_the_local_executor() {
        let grid = Grid::new(experiment(2)).expect("grid");
        let local = work("local");
        let opts = LocalOptions {
            jobs: 2,
            keep_logs: false,
            dtnkit: PathBuf::from("dtnkit"),
        };
        let expected = run_local(&grid, &local, &opts, &Silent).expect("local run");
        let out = work("points");
        GridDir::create(&out, &grid, false).expect("grid dir");
        // Aggregating before every run has its result fails, naming the missing runs.
        run_point(&out, 0, Path::new("dtnkit")).expect("run 0");
        let err = aggregate(&out).err().expect("runs missing").to_string();
        assert!(
            err.contains("3 of 4 runs have no result (runs 1-3)"),
            "{err}"
        );
        for i in 1..4 {
            run_point(&out, i, Path::new("dtnkit")).expect("run");
        }
        let err = run_point(&out, 4, Path::new("dtnkit")).expect_err("no run 4");
        assert!(
            err.is::<crate::BadInput>() && err.to_string().contains("has 4 runs"),
            "{err}"
        );
        let got = aggregate(&out).expect("aggregate");
        let strip = |runs: &[RunResult]| -> Vec<RunResult> {
            runs.iter()
                .cloned()
                .map(|mut r| {
                    r.metrics.remove("wall_s");
                    r
                })
                .collect()
        };
        // Compared through Debug: runs that delivered no bundle K carry NaN metrics, and NaN is
        // never == itself (Debug prints every f64 exactly, NaN as "NaN").
        assert_eq!(
            format!("{:?}", strip(&got.runs)),
            format!("{:?}", strip(&expected.runs))
        );
        let csv = |d: &Path| std::fs::read_to_string(d.join("aggregate.csv")).unwrap();
        let without_wall = |t: String| -> Vec<String> {
            // The wall_s mean and its CI (found by the header); compare everything else.
            t.lines()
                .map(|l| {
                    let f: Vec<&str> = l.split(',').collect();
                    let w = csv(&local)
                        .lines()
                        .next()
                        .unwrap()
                        .split(',')
                        .position(|h| h == "wall_s_mean")
                        .unwrap();
                    [&f[..w], &f[w + 2..]].concat().join(",")
                })
                .collect()
        };
        assert_eq!(without_wall(csv(&out)), without_wall(csv(&local)));
        // The same directory accepts the same grid again, and refuses another one.
        GridDir::create(&out, &grid, false).expect("same grid");
        let other = Grid::new(experiment(3)).expect("grid");
        let err = GridDir::create(&out, &other, false).expect_err("other grid");
        assert!(
            err.is::<crate::BadInput>() && err.to_string().contains("holds a different grid"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&local);
        let _ = std::fs::remove_dir_all(&out);
    }
}
