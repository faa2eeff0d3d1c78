//! A grid ready to run: the experiment, its base scenario document and the directory the scenario's relative paths
//! resolve against.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use analyze::experiment::{Experiment, RunSpec};
use toml::Value;

use crate::{usage, RunContext, RunResult};

/// Path → value overrides applied to a run's scenario after the experiment's and the point's.
pub(crate) type Overrides = BTreeMap<String, Value>;

/// An experiment with its base scenario loaded.
#[derive(Debug, Clone)]
pub struct Grid {
    experiment: Experiment,
    base: Value,
    scenario_dir: PathBuf,
}

impl Grid {
    /// Reads the experiment's base scenario (a missing or malformed file is a [`crate::BadInput`]).
    pub fn new(experiment: Experiment) -> anyhow::Result<Grid> {
        let path = &experiment.scenario;
        let text =
            std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        let base: Value =
            toml::from_str(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        let scenario_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(Grid {
            experiment,
            base,
            scenario_dir,
        })
    }

    /// A grid from its stored parts (see `store`).
    pub(crate) fn from_parts(experiment: Experiment, base: Value, scenario_dir: PathBuf) -> Grid {
        Grid {
            experiment,
            base,
            scenario_dir,
        }
    }

    /// The experiment.
    pub fn experiment(&self) -> &Experiment {
        &self.experiment
    }

    /// The base scenario document.
    pub(crate) fn base(&self) -> &Value {
        &self.base
    }

    /// The directory the scenario's relative paths resolve against.
    pub(crate) fn scenario_dir(&self) -> &Path {
        &self.scenario_dir
    }

    /// Every run, in grid order ([`Experiment::runs`]).
    pub fn runs(&self) -> Vec<RunSpec> {
        self.experiment.runs()
    }

    /// Builds every run's scenario: a bad override fails before hours of runs, naming the run.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.validate_runs(&self.runs(), &Overrides::new())
    }

    /// Builds the scenario of each run of `specs` with `set` applied after its overrides.
    pub(crate) fn validate_runs(&self, specs: &[RunSpec], set: &Overrides) -> anyhow::Result<()> {
        for spec in specs {
            let doc = self.document(spec, set)?;
            crate::run::check(&self.experiment, spec, &doc, &self.scenario_dir)?;
        }
        Ok(())
    }

    /// The scenario document of a run: the base with the experiment's and the point's overrides, then `set`.
    pub(crate) fn document(&self, spec: &RunSpec, set: &Overrides) -> anyhow::Result<Value> {
        let mut doc = self.experiment.apply(&self.base, spec).map_err(usage)?;
        for (path, v) in set {
            analyze::experiment::set_path(&mut doc, path, v).map_err(usage)?;
        }
        Ok(doc)
    }

    /// Executes one run; an error names the run.
    pub fn run(&self, spec: &RunSpec, ctx: &RunContext) -> anyhow::Result<RunResult> {
        self.run_with(spec, &Overrides::new(), ctx)
    }

    /// Executes one run with `set` applied after its overrides; an error names the run.
    pub(crate) fn run_with(
        &self,
        spec: &RunSpec,
        set: &Overrides,
        ctx: &RunContext,
    ) -> anyhow::Result<RunResult> {
        let exp = &self.experiment;
        let labels = exp.labels(&spec.point);
        let metrics = self
            .document(spec, set)
            .and_then(|doc| crate::run::execute(exp, spec, &doc, &self.scenario_dir, ctx))
            .map_err(|e| {
                e.context(format!(
                    "run {} ({} rep {})",
                    spec.index,
                    labels.join("/"),
                    spec.repetition
                ))
            })?;
        Ok(RunResult {
            spec: spec.clone(),
            labels,
            metrics,
        })
    }
}
