//! The Slurm executor: the grid is written once into the output directory (a filesystem every node shares), one
//! job array runs one run per task (`dtnkit bench run-point OUT INDEX`, its result in `OUT/results/`), and a job
//! depending on the array (`afterany`) aggregates the results exactly as the local executor does
//! (`dtnkit bench aggregate OUT`).
//!
//! Slurm schedules, places and (on node failure, `--requeue`) retries; this module only decides which runs to
//! submit: running the same command again on the same directory submits the runs that have no result and are
//! neither pending nor running — the failed ones (their task left a log) and the missing ones (never started) —
//! and a new aggregation job. A grid larger than the cluster's `MaxArraySize` goes out as several arrays of
//! consecutive runs, each task adding its array's offset to its index.
//!
//! Files in `OUT/slurm/`: `run-point.sh` and `aggregate.sh` (the submitted batch scripts), `submissions.toml`
//! (every submission's array jobs, offsets and task ranges, and its aggregation job: how a run maps to its
//! latest task) and `logs/JOB_TASK.log` (each task's output, Slurm's own messages such as a cancellation
//! included), `logs/aggregate-JOB.log`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use analyze::experiment::{Mode, RunSpec};
use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::store::GridDir;
use crate::Grid;

/// Cores a run asks for when neither the experiment (`[slurm] cpus_per_task`) nor the command line says: one
/// for the (single-threaded) simulator; four in real time, where the two nodes, the relay and the traffic
/// client each keep a core, so the pacing of the link is never squeezed.
pub fn default_cpus_per_task(mode: Mode) -> u32 {
    match mode {
        Mode::Sim => 1,
        Mode::Emu | Mode::Ip | Mode::Loopback => 4,
    }
}

/// Settings of [`submit`] beyond the experiment's `[slurm]` table (which they override).
#[derive(Debug, Clone, Default)]
pub struct SlurmOptions {
    /// `sbatch --partition`.
    pub partition: Option<String>,
    /// `sbatch --time` of each run (e.g. `30:00`).
    pub time: Option<String>,
    /// `sbatch --cpus-per-task` of each run.
    pub cpus_per_task: Option<u32>,
    /// Further `sbatch` arguments for every job (`--account=...`, `--qos=...`, `--mem=...`).
    pub sbatch_args: Vec<String>,
    /// Keep each run's segment logs under `OUT/logs`.
    pub keep_logs: bool,
    /// Return only when the aggregation job has ended (`sbatch --wait`).
    pub wait: bool,
}

/// One submitted job array: run `offset + t` for every task `t` in `tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayJob {
    /// Slurm job id of the array.
    pub job: String,
    /// Run index of task 0.
    pub offset: usize,
    /// Task indices, as `sbatch --array` took them (`0-9,12`).
    pub tasks: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Submitted {
    #[serde(default)]
    arrays: Vec<ArrayJob>,
    #[serde(default)]
    aggregate: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    #[serde(default)]
    submission: Vec<Submitted>,
}

/// What [`submit`] found.
#[derive(Debug, Clone)]
pub struct Submission {
    /// Runs of the grid.
    pub runs: usize,
    /// Runs that already had a result.
    pub done: usize,
    /// Runs left alone because an earlier submission's task for them is pending or running.
    pub queued: usize,
    /// Runs submitted now.
    pub submitted: usize,
    /// What was done.
    pub action: Action,
}

/// What [`submit`] did.
#[derive(Debug, Clone)]
pub enum Action {
    /// Nothing: every run is done and the report written.
    Nothing,
    /// Nothing: no run needed submitting and this aggregation job is already in the queue.
    Waiting {
        /// Its job id.
        aggregate: String,
    },
    /// Submitted these arrays (none when only the aggregation was missing) and this aggregation job.
    Submitted {
        /// The arrays.
        arrays: Vec<ArrayJob>,
        /// The aggregation job.
        aggregate: String,
        /// Its log.
        log: PathBuf,
        /// With [`SlurmOptions::wait`]: whether it succeeded.
        succeeded: Option<bool>,
    },
}

/// State of one run, from its result file, the queue and its task's log.
#[derive(Debug, Clone, PartialEq)]
pub enum RunState {
    /// Its result is stored.
    Done,
    /// Its task is in the queue (Slurm's state: PENDING, RUNNING, COMPLETING, ...).
    Queued(String),
    /// Its task ran and ended without a result (failed, was cancelled or killed, hit its time limit).
    Failed,
    /// It never ran: not submitted yet, or cancelled before it started.
    Missing,
}

/// One run's line of [`Status`].
#[derive(Debug, Clone)]
pub struct RunStatus {
    /// The run.
    pub spec: RunSpec,
    /// Its point's axis labels.
    pub labels: Vec<String>,
    /// Its state.
    pub state: RunState,
    /// Its latest task (`JOB_TASK`), if it was ever submitted.
    pub task: Option<String>,
    /// Its latest task's log, when that exists.
    pub log: Option<PathBuf>,
}

/// Every run's state in a grid directory (`dtnkit bench status`).
#[derive(Debug, Clone)]
pub struct Status {
    /// The output directory.
    pub out: PathBuf,
    /// The experiment's name.
    pub name: String,
    /// Grid points.
    pub points: usize,
    /// Repetitions per point.
    pub repetitions: u32,
    /// Per run, in grid order.
    pub runs: Vec<RunStatus>,
    /// The latest aggregation job and its state in the queue (`None` when it has left the queue).
    pub aggregate: Option<(String, Option<String>)>,
    /// Whether `report.md` exists.
    pub report: bool,
    /// Why the queue could not be read (runs in the queue then show as failed or missing).
    pub queue_error: Option<String>,
}

impl Status {
    /// Runs in `state` (by kind: any `Queued` matches `Queued(_)`).
    pub fn count(&self, f: impl Fn(&RunState) -> bool) -> usize {
        self.runs.iter().filter(|r| f(&r.state)).count()
    }
}

/// Lines of a failed run's log shown by [`Status`]'s display.
const LOG_TAIL_LINES: usize = 12;

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: experiment {}, {} runs ({} grid points x {} repetitions)",
            self.out.display(),
            self.name,
            self.runs.len(),
            self.points,
            self.repetitions
        )?;
        let width = self
            .runs
            .iter()
            .map(|r| r.labels.join("/").len())
            .max()
            .unwrap_or(0)
            .max(5);
        writeln!(
            f,
            "{:>5}  {:<width$}  {:>3}  {:<10}  task",
            "run", "point", "rep", "state"
        )?;
        for r in &self.runs {
            let state = match &r.state {
                RunState::Done => "done".to_string(),
                RunState::Queued(s) => s.to_lowercase(),
                RunState::Failed => "failed".to_string(),
                RunState::Missing => "missing".to_string(),
            };
            writeln!(
                f,
                "{:>5}  {:<width$}  {:>3}  {:<10}  {}",
                r.spec.index,
                r.labels.join("/"),
                r.spec.repetition,
                state,
                r.task.as_deref().unwrap_or("-")
            )?;
            if r.state == RunState::Failed {
                if let Some(log) = &r.log {
                    writeln!(f, "         log {}:", log.display())?;
                    for line in tail(log, LOG_TAIL_LINES).lines() {
                        writeln!(f, "         | {line}")?;
                    }
                }
            }
        }
        let done = self.count(|s| *s == RunState::Done);
        let failed = self.count(|s| *s == RunState::Failed);
        let missing = self.count(|s| *s == RunState::Missing);
        let queued = self.count(|s| matches!(s, RunState::Queued(_)));
        writeln!(
            f,
            "{done} done, {failed} failed, {missing} missing, {queued} pending or running"
        )?;
        if let Some(e) = &self.queue_error {
            writeln!(
                f,
                "queue not read ({e}): runs in it show as failed or missing"
            )?;
        }
        match (&self.aggregate, self.report) {
            (Some((job, Some(state))), _) => {
                writeln!(f, "aggregation job {job}: {}", state.to_lowercase())?
            }
            (_, true) => writeln!(f, "report: {}", self.out.join("report.md").display())?,
            (Some((job, None)), false) => writeln!(
                f,
                "no report: aggregation job {job} ended without one (log {})",
                aggregate_log(&self.out, job).display()
            )?,
            (None, false) => writeln!(f, "no report yet")?,
        }
        if failed + missing > 0 {
            writeln!(
                f,
                "running `dtnkit bench EXPERIMENT --executor slurm --out {}` again submits the failed and missing runs",
                self.out.display()
            )?;
        }
        Ok(())
    }
}

/// Compresses sorted indices into Slurm's array syntax: `0-5,7,9-12`.
pub fn index_ranges(indices: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while let Some(&start) = indices.get(i) {
        let mut end = start;
        while indices.get(i + 1) == Some(&(end + 1)) {
            end += 1;
            i += 1;
        }
        parts.push(if end == start {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Expands [`index_ranges`]' syntax.
fn parse_ranges(s: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
            v.extend(a..=b);
        }
    }
    v
}

fn slurm_dir(out: &Path) -> PathBuf {
    out.join("slurm")
}

fn logs_dir(out: &Path) -> PathBuf {
    slurm_dir(out).join("logs")
}

fn task_log(out: &Path, job: &str, task: usize) -> PathBuf {
    logs_dir(out).join(format!("{job}_{task}.log"))
}

fn aggregate_log(out: &Path, job: &str) -> PathBuf {
    logs_dir(out).join(format!("aggregate-{job}.log"))
}

fn record_path(out: &Path) -> PathBuf {
    slurm_dir(out).join("submissions.toml")
}

fn load_record(out: &Path) -> anyhow::Result<Record> {
    let path = record_path(out);
    match std::fs::read_to_string(&path) {
        Ok(text) => toml::from_str(&text).with_context(|| format!("parsing {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn save_record(out: &Path, r: &Record) -> anyhow::Result<()> {
    let path = record_path(out);
    let text = toml::to_string(r).context("encoding the submissions")?;
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// Runs a Slurm client command and returns its standard output; an error carries its standard error.
fn slurm_command(program: &str, args: &[String]) -> anyhow::Result<String> {
    let o = Command::new(program).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!(
                "{program} not found on PATH: the Slurm executor needs Slurm's client commands (sbatch, squeue, scancel)"
            )
        } else {
            anyhow::anyhow!("starting {program}: {e}")
        }
    })?;
    if !o.status.success() {
        anyhow::bail!(
            "{program} {} failed ({}): {}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The queue's state of each of `jobs`' tasks and jobs, keyed `JOB_TASK` (array tasks) or `JOB`.
fn queue(jobs: &BTreeSet<String>) -> anyhow::Result<BTreeMap<String, String>> {
    let mut states = BTreeMap::new();
    if jobs.is_empty() {
        return Ok(states);
    }
    let list = jobs.iter().cloned().collect::<Vec<_>>().join(",");
    let args = [
        "--noheader".to_string(),
        "--array".to_string(),
        format!("--jobs={list}"),
        "--format=%i|%T".to_string(),
    ];
    let text = match slurm_command("squeue", &args) {
        Ok(t) => t,
        // A single job that left the controller's memory is an error for squeue, not an empty list.
        Err(e) if e.to_string().contains("Invalid job id") => String::new(),
        Err(e) => return Err(e),
    };
    for line in text.lines() {
        if let Some((id, state)) = line.trim().split_once('|') {
            states.insert(id.to_string(), state.to_string());
        }
    }
    Ok(states)
}

/// `sbatch --parsable` output → the job id (without a `;cluster` suffix).
fn job_id(stdout: &str) -> anyhow::Result<String> {
    let id = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .and_then(|l| l.split(';').next())
        .unwrap_or("");
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        anyhow::bail!("sbatch printed no job id: {stdout:?}");
    }
    Ok(id.to_string())
}

/// The cluster's `MaxArraySize` (array indices go up to one less); Slurm's default when it cannot be read.
fn max_array_size() -> usize {
    slurm_command("scontrol", &["show".into(), "config".into()])
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "MaxArraySize").then(|| v.trim().parse().ok())?
            })
        })
        .filter(|&n: &usize| n > 1)
        .unwrap_or(1001)
}

/// Single-quotes `s` for sh.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn write_scripts(out: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let q = sh_quote(&out.display().to_string());
    let run_point = slurm_dir(out).join("run-point.sh");
    let aggregate = slurm_dir(out).join("aggregate.sh");
    for (path, text) in [
        (
            &run_point,
            format!(
                "#!/bin/sh\n# Written by `dtnkit bench --executor slurm`: array task T of an array submitted with \
                 argument OFFSET runs run OFFSET + T\n# of the grid in {q}.\n\
                 run=$((SLURM_ARRAY_TASK_ID + $1))\n\
                 echo \"run $run: task ${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}} on $(hostname)\"\n\
                 exec dtnkit bench run-point {q} \"$run\"\n"
            ),
        ),
        (
            &aggregate,
            format!(
                "#!/bin/sh\n# Written by `dtnkit bench --executor slurm`: aggregates the results of the grid in \
                 {q}.\nexec dtnkit bench aggregate {q}\n"
            ),
        ),
    ] {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok((run_point, aggregate))
}

/// Every run's state in the grid directory `out`.
pub fn status(out: &Path) -> anyhow::Result<Status> {
    let dir = GridDir::open(out)?;
    let (grid, _) = dir.load()?;
    let record = load_record(out)?;
    let jobs: BTreeSet<String> = record
        .submission
        .iter()
        .flat_map(|s| {
            s.arrays
                .iter()
                .map(|a| a.job.clone())
                .chain(s.aggregate.clone())
        })
        .collect();
    let (states, queue_error) = match queue(&jobs) {
        Ok(s) => (s, None),
        Err(e) => (BTreeMap::new(), Some(format!("{e:#}"))),
    };
    Ok(assemble(&dir, &grid, &record, &states, queue_error))
}

fn assemble(
    dir: &GridDir,
    grid: &Grid,
    record: &Record,
    states: &BTreeMap<String, String>,
    queue_error: Option<String>,
) -> Status {
    let out = dir.path();
    // Each run's latest task: later submissions override earlier ones.
    let mut latest: BTreeMap<usize, (String, usize)> = BTreeMap::new();
    for s in &record.submission {
        for a in &s.arrays {
            for t in parse_ranges(&a.tasks) {
                latest.insert(a.offset + t, (a.job.clone(), t));
            }
        }
    }
    let exp = grid.experiment();
    let runs = grid
        .runs()
        .into_iter()
        .map(|spec| {
            let task = latest.get(&spec.index);
            let log = task
                .map(|(job, t)| task_log(out, job, *t))
                .filter(|p| p.is_file());
            let queued = task.and_then(|(job, t)| states.get(&format!("{job}_{t}")));
            let state = if dir.has_result(spec.index) {
                RunState::Done
            } else if let Some(s) = queued {
                RunState::Queued(s.clone())
            } else if log.is_some() {
                RunState::Failed
            } else {
                RunState::Missing
            };
            RunStatus {
                labels: exp.labels(&spec.point),
                state,
                task: task.map(|(job, t)| format!("{job}_{t}")),
                log,
                spec,
            }
        })
        .collect();
    let aggregate = record
        .submission
        .iter()
        .rev()
        .find_map(|s| s.aggregate.clone())
        .map(|job| {
            let state = states.get(&job).cloned();
            (job, state)
        });
    Status {
        out: out.to_path_buf(),
        name: exp.name.clone(),
        points: exp.grid_size(),
        repetitions: exp.repetitions,
        runs,
        aggregate,
        report: out.join("report.md").is_file(),
        queue_error,
    }
}

/// Submits the runs of `grid` that have no result and are not in the queue, as job arrays, and a job that
/// aggregates when they have ended; see the module documentation.
pub fn submit(grid: &Grid, out: &Path, opts: &SlurmOptions) -> anyhow::Result<Submission> {
    grid.validate()?;
    let out = std::path::absolute(out).with_context(|| format!("resolving {}", out.display()))?;
    let out = out.as_path();
    GridDir::create(out, grid, opts.keep_logs)?;
    std::fs::create_dir_all(logs_dir(out))
        .with_context(|| format!("creating {}", logs_dir(out).display()))?;
    let mut record = load_record(out)?;
    let before = status(out)?;
    if let Some(e) = &before.queue_error {
        // Without the queue, runs still pending or running would be submitted twice.
        anyhow::bail!("reading the queue: {e}");
    }
    let todo: Vec<usize> = before
        .runs
        .iter()
        .filter(|r| matches!(r.state, RunState::Failed | RunState::Missing))
        .map(|r| r.spec.index)
        .collect();
    let queued: Vec<&RunStatus> = before
        .runs
        .iter()
        .filter(|r| matches!(r.state, RunState::Queued(_)))
        .collect();
    let done = before.count(|s| *s == RunState::Done);
    let mut sub = Submission {
        runs: before.runs.len(),
        done,
        queued: queued.len(),
        submitted: todo.len(),
        action: Action::Nothing,
    };
    // Nothing to run: an aggregation job in the queue will write the report, or it exists.
    if let (true, Some((job, Some(_)))) = (todo.is_empty(), &before.aggregate) {
        sub.action = Action::Waiting {
            aggregate: job.clone(),
        };
        return Ok(sub);
    }
    if todo.is_empty() && queued.is_empty() && before.report {
        return Ok(sub);
    }
    let (run_point, aggregate_script) = write_scripts(out)?;
    // An earlier aggregation job still waiting would write the outputs beside the new one.
    if let Some((job, Some(state))) = &before.aggregate {
        if state == "PENDING" {
            slurm_command("scancel", std::slice::from_ref(job))?;
        }
    }
    let exp = grid.experiment();
    let mut common: Vec<String> = Vec::new();
    if let Some(p) = &opts.partition {
        common.push(format!("--partition={p}"));
    }
    common.extend(opts.sbatch_args.iter().cloned());
    let chdir = format!("--chdir={}", out.display());
    let cpus = opts
        .cpus_per_task
        .or(exp.slurm.cpus_per_task)
        .unwrap_or_else(|| default_cpus_per_task(exp.mode));
    let chunk = max_array_size();
    // Recorded after every sbatch, so a failure half-way leaves no submitted array unknown to the next run.
    record.submission.push(Submitted::default());
    let mut arrays = Vec::new();
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &i in &todo {
        groups
            .entry(i / chunk * chunk)
            .or_default()
            .push(i - i / chunk * chunk);
    }
    for (offset, tasks) in groups {
        let tasks = index_ranges(&tasks);
        let mut args = vec![
            "--parsable".to_string(),
            format!("--job-name={}", exp.name),
            format!("--array={tasks}"),
            format!("--output={}/%A_%a.log", logs_dir(out).display()),
            chdir.clone(),
            format!("--cpus-per-task={cpus}"),
            // Slurm requeues a task whose node failed.
            "--requeue".to_string(),
        ];
        if exp.mode != Mode::Sim {
            // Real time: each requested CPU is a whole core, never a hyperthread beside another job's.
            args.push("--hint=nomultithread".to_string());
        }
        if exp.slurm.exclusive {
            args.push("--exclusive".to_string());
        }
        if let Some(t) = opts.time.as_ref().or(exp.slurm.time.as_ref()) {
            args.push(format!("--time={t}"));
        }
        args.extend(common.iter().cloned());
        args.push(run_point.display().to_string());
        args.push(offset.to_string());
        let job = job_id(&slurm_command("sbatch", &args)?)?;
        arrays.push(ArrayJob { job, offset, tasks });
        if let Some(last) = record.submission.last_mut() {
            last.arrays = arrays.clone();
        }
        save_record(out, &record)?;
    }
    // The aggregation waits for the new arrays and for earlier ones whose tasks are still in the queue.
    let mut after: BTreeSet<String> = arrays.iter().map(|a| a.job.clone()).collect();
    for r in &queued {
        if let Some((job, _)) = r.task.as_deref().and_then(|t| t.split_once('_')) {
            after.insert(job.to_string());
        }
    }
    let mut args = vec![
        "--parsable".to_string(),
        format!("--job-name={}-aggregate", exp.name),
        format!("--output={}/aggregate-%j.log", logs_dir(out).display()),
        chdir,
        "--cpus-per-task=1".to_string(),
    ];
    if !after.is_empty() {
        args.push(format!(
            "--dependency=afterany:{}",
            after.into_iter().collect::<Vec<_>>().join(":")
        ));
    }
    args.extend(common);
    if opts.wait {
        args.push("--wait".to_string());
    }
    args.push(aggregate_script.display().to_string());
    let (job, succeeded) = if opts.wait {
        // sbatch --wait exits with the job's exit code; its output still holds the job id.
        let o = Command::new("sbatch")
            .args(&args)
            .output()
            .context("starting sbatch")?;
        let stdout = String::from_utf8_lossy(&o.stdout);
        let job = job_id(&stdout).with_context(|| {
            format!(
                "sbatch of the aggregation job: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )
        })?;
        (job, Some(o.status.success()))
    } else {
        (job_id(&slurm_command("sbatch", &args)?)?, None)
    };
    if let Some(last) = record.submission.last_mut() {
        last.aggregate = Some(job.clone());
    }
    save_record(out, &record)?;
    sub.action = Action::Submitted {
        arrays,
        log: aggregate_log(out, &job),
        aggregate: job,
        succeeded,
    };
    Ok(sub)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_compress_and_expand() {
        let v = [0, 1, 2, 3, 5, 7, 8, 20];
        assert_eq!(index_ranges(&v), "0-3,5,7-8,20");
        assert_eq!(parse_ranges(&index_ranges(&v)), v);
        assert_eq!(index_ranges(&[]), "");
        assert_eq!(parse_ranges("4"), vec![4]);
    }

    #[test]
    fn job_ids_are_parsed_from_parsable_output() {
        assert_eq!(job_id("1234\n").unwrap(), "1234");
        assert_eq!(job_id("1234;cluster\n").unwrap(), "1234");
        assert!(job_id("").is_err());
        assert!(job_id("sbatch: error\n").is_err());
    }

    #[test]
    fn quoting_survives_quotes_and_spaces() {
        assert_eq!(sh_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
