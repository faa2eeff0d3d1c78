//! `dtnkit bench EXPERIMENT.toml`: a grid of scenario overrides × repetitions, run in the simulator (parallel
//! worker threads) or in real-time emulation (serial, through the `lab` crate), analyzed with the `analyze`
//! crate, aggregated into means with 95 % Student-t confidence intervals, plotted (PNG + SVG) and summarised in
//! a markdown report. File format and outputs: docs/bench.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use analyze::experiment::{
    aggregate, Experiment, Metrics, Mode, PlotSpec, PointAggregate, RunSpec,
};
use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use toml::Value;

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

/// What one finished run produced.
#[derive(Debug, Clone, serde::Serialize)]
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

/// Metrics, in the column order of the CSV outputs, with their meaning (also listed in docs/bench.md).
pub const METRICS: [(&str, &str); 34] = [
    (
        "goodput_mbps",
        "application goodput (DTNperf: acknowledged payload / first send..last ACK), Mb/s",
    ),
    (
        "ltp_goodput_mbps",
        "LTP goodput from the segment logs (confirmed red block bytes / session span), Mb/s",
    ),
    (
        "efficiency_pct",
        "goodput / (forward rate x fraction of the run's trace in the good state), %",
    ),
    (
        "good_fraction",
        "fraction of the run's span the forward channel was good",
    ),
    (
        "tx_session_ms",
        "mean Tx session duration (first segment sent -> TX_END), completed red sessions",
    ),
    ("rx_session_ms", "mean Rx session duration"),
    (
        "ideal_ms",
        "Fig. 5 Ideal: mean duration of sessions without losses",
    ),
    (
        "retx_penalty_ms",
        "Fig. 5 EsPenReTx: mean re-tx cycles x measured cycle duration",
    ),
    (
        "cp_penalty_ms",
        "Fig. 5 EsPenCP: mean checkpoint timeouts x RTO",
    ),
    (
        "delta_id_ms",
        "Fig. 5 DeltaId: error of the ideal-part estimate",
    ),
    (
        "delta_pen_ms",
        "Fig. 5 DeltaPen: residual of the penalty estimates",
    ),
    ("cycle_ms", "measured retransmission-cycle duration"),
    (
        "retx_cycles",
        "mean retransmission cycles per session (Fig. 8)",
    ),
    ("rto_cp", "mean checkpoint timeouts per session"),
    (
        "lossy_sessions_pct",
        "sessions with at least one retransmission cycle or timeout (Fig. 7), %",
    ),
    ("retx_ratio", "retransmitted / first-pass data segments"),
    ("sessions", "completed red sessions"),
    ("cancelled", "cancelled red sessions"),
    ("bundles_acked", "bundles acknowledged to the client"),
    ("virtual_s", "simulated (or emulated) time, s"),
    ("wall_s", "wall-clock time of the run, s"),
    ("rows", "segment-log rows analyzed"),
    (
        "cfdp_completed",
        "[[cfdp]]: fraction of the run's transfers delivered complete (class 2: sender finished without fault)",
    ),
    (
        "cfdp_transfer_s",
        "[[cfdp]]: mean transfer time (put -> sender's Finished; class 1: -> last PDU received, at least -> EOF sent), completed class-2 transfers and every class-1 transfer, s",
    ),
    (
        "cfdp_delivery_s",
        "[[cfdp]]: mean put -> file delivered at the receiver, s",
    ),
    (
        "cfdp_nthr",
        "[[cfdp]]: mean normalized throughput file x 8 / (transfer_s x link rate) (seed 004's N_thr), same transfers as cfdp_transfer_s",
    ),
    (
        "cfdp_nthr0",
        "[[cfdp]]: cfdp_nthr with a failed class-2 transfer counted as 0",
    ),
    (
        "cfdp_s_ratio",
        "[[cfdp]]: class 1, unique File Data PDUs received / PDUs of the file (seed 004's S_ratio)",
    ),
    (
        "cfdp_weighted_nthr",
        "[[cfdp]]: class 1, N_thr x S_ratio (seed 004's N_thr of CFDP-repeat, eq. 3)",
    ),
    (
        "cfdp_retransmitted",
        "[[cfdp]]: File Data PDUs sent again after a NAK, per transfer",
    ),
    ("cfdp_naks", "[[cfdp]]: NAK PDUs sent by the receiver, per transfer"),
    (
        "cfdp_e2e_completed",
        "[[cfdp]] with relay_of: fraction of relay chains whose last transfer completed",
    ),
    (
        "cfdp_e2e_s",
        "[[cfdp]] with relay_of: mean put of a chain's first transfer -> file delivered by its last, s (also cfdpK_transfer_s, cfdpK_delivery_s, cfdpK_completed per transfer K)",
    ),
    (
        "cfdp_pdus_sent",
        "[[cfdp]]: File Data PDUs sent (all passes), per transfer",
    ),
];

/// The `cfdp_*` metrics of a run: means over its `[[cfdp]]` transfers (nothing when it has none).
pub fn cfdp_metrics(m: &mut Metrics, transfers: &[sim::CfdpTransferResult]) {
    if transfers.is_empty() {
        return;
    }
    fn mean(v: impl Iterator<Item = f64>) -> f64 {
        let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        if n == 0 {
            f64::NAN
        } else {
            s / n as f64
        }
    }
    // A class-2 transfer that did not complete has no meaningful transfer time or throughput.
    let valid = |t: &&sim::CfdpTransferResult| t.class == 1 || t.completed;
    // Class 1: the simulator's transfer time ends at the last PDU received, which comes early when the last
    // PDUs (EOF included) were all lost; the transaction lasts at least until the sender's EOF left.
    let time = |t: &sim::CfdpTransferResult| match (t.class, t.transfer_s, t.sender_finished_s) {
        (1, Some(a), Some(b)) => Some(a.max(b)),
        (_, a, _) => a,
    };
    let nthr = |t: &sim::CfdpTransferResult| match (time(t), t.link_rate_bps) {
        (Some(s), Some(r)) if s > 0.0 && r > 0.0 => Some(t.file_size as f64 * 8.0 / (s * r)),
        _ => None,
    };
    let n = transfers.len() as f64;
    let completed = transfers.iter().filter(|t| t.completed).count() as f64;
    for (k, v) in [
        ("cfdp_completed", completed / n),
        (
            "cfdp_transfer_s",
            mean(transfers.iter().filter(valid).filter_map(time)),
        ),
        (
            "cfdp_delivery_s",
            mean(transfers.iter().filter_map(|t| t.delivery_s)),
        ),
        (
            "cfdp_nthr",
            mean(transfers.iter().filter(valid).filter_map(nthr)),
        ),
        (
            "cfdp_nthr0",
            mean(transfers.iter().map(|t| {
                if valid(&t) {
                    nthr(t).unwrap_or(0.0)
                } else {
                    0.0
                }
            })),
        ),
        (
            "cfdp_s_ratio",
            mean(transfers.iter().filter_map(|t| t.received_ratio)),
        ),
        (
            "cfdp_weighted_nthr",
            mean(
                transfers
                    .iter()
                    .filter_map(|t| nthr(t).zip(t.received_ratio).map(|(n, r)| n * r)),
            ),
        ),
        (
            "cfdp_retransmitted",
            mean(
                transfers
                    .iter()
                    .map(|t| t.file_data_pdus_retransmitted as f64),
            ),
        ),
        ("cfdp_naks", mean(transfers.iter().map(|t| t.naks as f64))),
        (
            "cfdp_pdus_sent",
            mean(transfers.iter().map(|t| t.file_data_pdus_sent as f64)),
        ),
    ] {
        m.insert(k.to_string(), v);
    }
    // CFDP store-and-forward chains (`relay_of`): end-to-end figures of each chain's last transfer, and each
    // hop's own times.
    if transfers.iter().any(|t| t.relay_of.is_some()) {
        let ends: Vec<_> = transfers
            .iter()
            .filter(|t| !transfers.iter().any(|r| r.relay_of == Some(t.index)))
            .collect();
        let done = ends.iter().filter(|t| t.completed).count() as f64;
        m.insert("cfdp_e2e_completed".into(), done / ends.len().max(1) as f64);
        m.insert(
            "cfdp_e2e_s".into(),
            mean(ends.iter().filter_map(|t| t.end_to_end_delivery_s)),
        );
        for t in transfers {
            let k = t.index;
            m.insert(format!("cfdp{k}_transfer_s"), time(t).unwrap_or(f64::NAN));
            m.insert(
                format!("cfdp{k}_delivery_s"),
                t.delivery_s.unwrap_or(f64::NAN),
            );
            m.insert(
                format!("cfdp{k}_completed"),
                f64::from(u8::from(t.completed)),
            );
        }
    }
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
    let o = run_experiment(exp, &out, jobs, a.keep_logs, a.quiet)?;
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

/// Runs every run of `exp`, writes all outputs into `out` and returns them (used by the CLI and the tests).
pub fn run_experiment(
    exp: Experiment,
    out: &Path,
    jobs: usize,
    keep_logs: bool,
    quiet: bool,
) -> anyhow::Result<BenchOutcome> {
    let text = std::fs::read_to_string(&exp.scenario)
        .map_err(|e| usage(format!("{}: {e}", exp.scenario.display())))?;
    let base: Value =
        toml::from_str(&text).map_err(|e| usage(format!("{}: {e}", exp.scenario.display())))?;
    let scn_dir = exp
        .scenario
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    // Scenario paths are relative to the scenario's directory: give the simulator an absolute one.
    let logs = logs
        .canonicalize()
        .with_context(|| format!("resolving {}", logs.display()))?;
    let specs = exp.runs();
    // Build every scenario first: a bad override fails before hours of runs, naming the run.
    let mut docs = Vec::with_capacity(specs.len());
    for s in &specs {
        let doc = exp.apply(&base, s).map_err(usage)?;
        if exp.mode == Mode::Ip {
            super::bench_ip::validate(&doc, &exp, s)?;
        } else {
            let scn = build_scenario(&doc, &exp, s, &scn_dir, None)?;
            drop(scn);
        }
        docs.push(doc);
    }
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(specs.len() as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{bar:40} {pos}/{len} runs, {elapsed} elapsed, eta {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    };
    let results: Mutex<Vec<Option<RunResult>>> = Mutex::new(vec![None; specs.len()]);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let next = AtomicUsize::new(0);
    let workers = match exp.mode {
        Mode::Sim => jobs.min(specs.len()).max(1),
        Mode::Emu | Mode::Ip => 1,
    };
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let (Some(spec), Some(doc)) = (specs.get(i), docs.get(i)) else {
                    break;
                };
                if first_error.lock().map(|e| e.is_some()).unwrap_or(true) {
                    break;
                }
                let r = match exp.mode {
                    Mode::Sim => run_sim(&exp, spec, doc, &scn_dir, &logs, keep_logs),
                    Mode::Emu => run_emu(&exp, spec, doc, &scn_dir, &logs, keep_logs),
                    Mode::Ip => super::bench_ip::run_ip(&exp, spec, doc, &logs, keep_logs),
                };
                match r {
                    Ok(metrics) => {
                        let labels = exp.labels(&spec.point);
                        bar.set_message(format!(
                            "last: {} rep {}",
                            labels.join("/"),
                            spec.repetition
                        ));
                        if let Ok(mut v) = results.lock() {
                            if let Some(slot) = v.get_mut(i) {
                                *slot = Some(RunResult {
                                    spec: spec.clone(),
                                    labels,
                                    metrics,
                                });
                            }
                        }
                    }
                    Err(e) => {
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert(e.context(format!(
                                "run {} ({} rep {})",
                                spec.index,
                                exp.labels(&spec.point).join("/"),
                                spec.repetition
                            )));
                        }
                    }
                }
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    let runs: Vec<RunResult> = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?
        .into_iter()
        .flatten()
        .collect();
    if !keep_logs {
        let _ = std::fs::remove_dir(&logs);
    }
    let pairs: Vec<(RunSpec, Metrics)> = runs
        .iter()
        .map(|r| (r.spec.clone(), r.metrics.clone()))
        .collect();
    let points = aggregate(&exp, &pairs);
    write_outputs(&exp, &runs, &points, out)?;
    Ok(BenchOutcome {
        runs,
        points,
        out: out.to_path_buf(),
    })
}

fn build_scenario(
    doc: &Value,
    exp: &Experiment,
    spec: &RunSpec,
    scn_dir: &Path,
    log_pattern: Option<&Path>,
) -> anyhow::Result<sim::Scenario> {
    let mut doc = doc.clone();
    // Each run writes its own per-node segment logs; bundle logs are not needed by the analysis.
    analyze::experiment::unset_path(&mut doc, "log").map_err(usage)?;
    if let Some(p) = log_pattern {
        analyze::experiment::set_path(
            &mut doc,
            "log.segment_csv",
            &Value::String(p.display().to_string()),
        )
        .map_err(usage)?;
    }
    let text = toml::to_string(&doc)?;
    let name = format!(
        "{} run {} ({} rep {})",
        exp.scenario.display(),
        spec.index,
        exp.labels(&spec.point).join("/"),
        spec.repetition
    );
    sim::Scenario::from_toml_str(&text, &name, scn_dir).map_err(usage)
}

/// The forward direction's nominal rate and the fraction of the run's span its channel was good (a trace
/// preset: the trace the simulator generates for this seed; an IID loss: 1 − PER; otherwise 1).
fn channel_of(scn: &sim::Scenario, span: Duration) -> (Option<f64>, f64) {
    let Some(link) = scn.links.first() else {
        return (None, 1.0);
    };
    let rate = link.forward.rate_bps.filter(|r| *r > 0.0);
    if let Some(p) = link
        .forward_trace_preset
        .as_deref()
        .and_then(channel::gen::Preset::from_name)
    {
        let params = p.params(lab::config::mix(scn.sim.seed, 0, 100));
        if let Ok(t) = channel::gen::generate(&params) {
            let per = t.period().as_nanos().max(1);
            let n = ((span.as_nanos() / per) as usize).clamp(1, usize::MAX / 2);
            let len = t.len().max(1);
            let erased = (0..n).filter(|&i| t.sample(i % len)).count();
            return (rate, 1.0 - erased as f64 / n as f64);
        }
        return (rate, 1.0 - p.table_i().bad_percent / 100.0);
    }
    if let channel::config::LossConfig::Iid { per } = &link.forward.loss {
        return (rate, 1.0 - per);
    }
    (rate, 1.0)
}

fn log_paths(dir: &Path, prefix: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    v.sort();
    Ok(v)
}

fn analysis_metrics(m: &mut Metrics, s: &analyze::RunSummary) {
    let d = &s.decomposition;
    let lossy = if s.red_completed > 0 {
        100.0 * s.sessions_with_losses as f64 / s.red_completed as f64
    } else {
        f64::NAN
    };
    for (k, v) in [
        ("ltp_goodput_mbps", s.goodput_bps / 1e6),
        ("tx_session_ms", s.tx_duration_ms.mean),
        ("rx_session_ms", s.rx_duration_ms.mean),
        ("ideal_ms", d.ideal_ms),
        ("retx_penalty_ms", d.retx_penalty_ms),
        ("cp_penalty_ms", d.cp_penalty_ms),
        ("delta_id_ms", d.delta_id_ms),
        ("delta_pen_ms", d.delta_pen_ms),
        ("cycle_ms", s.measured_cycle_ms),
        ("retx_cycles", s.mean_retransmission_cycles),
        ("rto_cp", s.mean_rto_cp),
        ("lossy_sessions_pct", lossy),
        ("retx_ratio", s.retransmission_ratio),
        ("sessions", s.red_completed as f64),
        ("cancelled", s.red_cancelled as f64),
        ("rows", s.rows as f64),
    ] {
        m.insert(k.to_string(), v);
    }
}

fn run_sim(
    exp: &Experiment,
    spec: &RunSpec,
    doc: &Value,
    scn_dir: &Path,
    logs: &Path,
    keep_logs: bool,
) -> anyhow::Result<Metrics> {
    let wall = Instant::now();
    let prefix = format!("run{:05}-", spec.index);
    let pattern = logs.join(format!("{prefix}segments-{{node}}.csv"));
    let scn = build_scenario(doc, exp, spec, scn_dir, Some(&pattern))?;
    let mut s = sim::Simulation::new(&scn).map_err(usage)?;
    s.run();
    let summary = s.summary();
    drop(s); // flushes and closes the logs
    let files = log_paths(logs, &prefix)?;
    let span = Duration::from_secs_f64(summary.virtual_s.max(1e-3));
    let (rate, good) = channel_of(&scn, span);
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let analysis = analyze::analyze_files(
        &paths,
        &[],
        &analyze::Options {
            rate_bps: rate,
            good_fraction: Some(good),
            ..analyze::Options::default()
        },
        None,
    );
    if !keep_logs {
        for f in &files {
            let _ = std::fs::remove_file(f);
        }
    }
    let analysis = analysis.map_err(|e| anyhow::anyhow!("analyzing the run's logs: {e}"))?;
    let mut m = Metrics::new();
    analysis_metrics(&mut m, &analysis.summary);
    m.insert("goodput_mbps".into(), summary.goodput_bps / 1e6);
    m.insert("good_fraction".into(), good);
    m.insert(
        "efficiency_pct".into(),
        rate.map_or(f64::NAN, |r| 100.0 * summary.goodput_bps / (r * good)),
    );
    m.insert("bundles_acked".into(), summary.bundles_acked as f64);
    m.insert("virtual_s".into(), summary.virtual_s);
    cfdp_metrics(&mut m, &summary.cfdp);
    m.insert("wall_s".into(), wall.elapsed().as_secs_f64());
    Ok(m)
}

fn run_emu(
    exp: &Experiment,
    spec: &RunSpec,
    doc: &Value,
    scn_dir: &Path,
    logs: &Path,
    keep_logs: bool,
) -> anyhow::Result<Metrics> {
    let wall = Instant::now();
    let scn = build_scenario(doc, exp, spec, scn_dir, None)?;
    let work = logs.join(format!("run{:05}", spec.index));
    let exe = std::env::current_exe().context("locating the dtnkit binary")?;
    let mut opts = lab::LabOptions::new(exe, &work);
    opts.durable_store = false;
    if !scn.cfdp.is_empty() {
        // CFDP transfers between two real entities through the relay: the same cfdp_* metrics as in sim mode.
        let outcome = lab::run_emulated_cfdp(&scn, &opts)
            .map_err(|e| anyhow::anyhow!("emulated CFDP run: {e}"))?;
        let mut m = Metrics::new();
        cfdp_metrics(&mut m, &outcome.transfers);
        m.insert(
            "virtual_s".into(),
            outcome.transfers.iter().filter_map(|t| t.transfer_s).sum(),
        );
        m.insert("wall_s".into(), wall.elapsed().as_secs_f64());
        if !keep_logs {
            let _ = std::fs::remove_dir_all(&work);
        }
        return Ok(m);
    }
    let outcome = lab::run_emulated(&scn, &opts, &mut |_| {})
        .map_err(|e| anyhow::anyhow!("emulated run: {e}"))?;
    let span = Duration::from_secs_f64(scn.sim.duration_s);
    let (rate, good) = channel_of(&scn, span);
    let segs: Vec<&Path> = outcome
        .nodes
        .iter()
        .map(|n| n.segment_log.as_path())
        .collect();
    let analysis = analyze::analyze_files(
        &segs,
        &[],
        &analyze::Options {
            rate_bps: rate,
            good_fraction: Some(good),
            ..analyze::Options::default()
        },
        None,
    )
    .map_err(|e| anyhow::anyhow!("analyzing the run's logs: {e}"))?;
    let goodput = outcome.client.goodput_bps;
    let mut m = Metrics::new();
    analysis_metrics(&mut m, &analysis.summary);
    m.insert("goodput_mbps".into(), goodput / 1e6);
    m.insert("good_fraction".into(), good);
    m.insert(
        "efficiency_pct".into(),
        rate.map_or(f64::NAN, |r| 100.0 * goodput / (r * good)),
    );
    m.insert("bundles_acked".into(), outcome.client.acked as f64);
    m.insert("virtual_s".into(), span.as_secs_f64());
    m.insert("wall_s".into(), wall.elapsed().as_secs_f64());
    if !keep_logs {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(m)
}

fn metric_names(runs: &[RunResult]) -> Vec<String> {
    let mut names: Vec<String> = METRICS.iter().map(|(n, _)| n.to_string()).collect();
    for r in runs {
        for k in r.metrics.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names
}

fn fmt_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.6}")
    } else {
        String::new()
    }
}

fn write_outputs(
    exp: &Experiment,
    runs: &[RunResult],
    points: &[PointAggregate],
    out: &Path,
) -> anyhow::Result<()> {
    let names = metric_names(runs);
    let axes: Vec<&str> = exp.axes.iter().map(|a| a.name.as_str()).collect();
    // runs.csv
    let mut csv = String::new();
    let _ = writeln!(
        csv,
        "{}run,repetition,seed,{}",
        axes.iter().map(|a| format!("{a},")).collect::<String>(),
        names.join(",")
    );
    for r in runs {
        let _ = writeln!(
            csv,
            "{}{},{},{},{}",
            r.labels.iter().map(|l| format!("{l},")).collect::<String>(),
            r.spec.index,
            r.spec.repetition,
            r.spec.seed,
            names
                .iter()
                .map(|n| r.metrics.get(n).map_or(String::new(), |v| fmt_num(*v)))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    write(out, "runs.csv", &csv)?;
    write(out, "runs.json", &serde_json::to_string_pretty(runs)?)?;
    // aggregate.csv
    let mut agg = String::new();
    let _ = writeln!(
        agg,
        "{}n,{}",
        axes.iter().map(|a| format!("{a},")).collect::<String>(),
        names
            .iter()
            .map(|n| format!("{n}_mean,{n}_ci95"))
            .collect::<Vec<_>>()
            .join(",")
    );
    for p in points {
        let n = p.metrics.values().map(|m| m.n).max().unwrap_or(0);
        let _ = writeln!(
            agg,
            "{}{},{}",
            p.labels.iter().map(|l| format!("{l},")).collect::<String>(),
            n,
            names
                .iter()
                .map(|k| match p.metrics.get(k) {
                    Some(m) => format!("{},{}", fmt_num(m.mean), fmt_num(m.ci95)),
                    None => ",".to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    write(out, "aggregate.csv", &agg)?;
    write(
        out,
        "aggregate.json",
        &serde_json::to_string_pretty(points)?,
    )?;
    let mut plots = Vec::new();
    for (i, spec) in exp.plots.iter().enumerate() {
        plots.extend(draw_plot(exp, points, spec, i, out)?);
    }
    write(out, "report.md", &report(exp, runs, points, &plots))?;
    Ok(())
}

fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
}

fn report(
    exp: &Experiment,
    runs: &[RunResult],
    points: &[PointAggregate],
    plots: &[String],
) -> String {
    let mut r = String::new();
    let _ = writeln!(r, "# {}\n", exp.title);
    if !exp.description.is_empty() {
        let _ = writeln!(r, "{}\n", exp.description.trim());
    }
    let wall: f64 = runs.iter().filter_map(|x| x.metrics.get("wall_s")).sum();
    let _ = writeln!(
        r,
        "Mode `{}`, base scenario `{}`, {} grid points x {} repetitions (seeds {}..{}), {:.0} s of run time in total.\n",
        match exp.mode {
            Mode::Sim => "sim",
            Mode::Emu => "emu",
            Mode::Ip => "ip",
        },
        exp.scenario.display(),
        points.len(),
        exp.repetitions,
        exp.seed,
        exp.seed + u64::from(exp.repetitions) - 1,
        wall
    );
    if !exp.set.is_empty() || !exp.unset.is_empty() {
        let _ = writeln!(r, "Overrides of every run:");
        for (k, v) in &exp.set {
            let _ = writeln!(r, "- `{k} = {v}`");
        }
        for k in &exp.unset {
            let _ = writeln!(r, "- `{k}` removed");
        }
        r.push('\n');
    }
    let ltp_cols = [
        "goodput_mbps",
        "efficiency_pct",
        "tx_session_ms",
        "ideal_ms",
        "retx_penalty_ms",
        "cp_penalty_ms",
        "retx_cycles",
        "lossy_sessions_pct",
    ];
    let cfdp_cols = [
        "cfdp_completed",
        "cfdp_transfer_s",
        "cfdp_nthr",
        "cfdp_s_ratio",
        "cfdp_weighted_nthr",
        "cfdp_retransmitted",
        "cfdp_naks",
    ];
    // Scenarios with CFDP transfers get the CFDP columns, IP-mode transfers theirs.
    let cols: &[&str] = if runs
        .iter()
        .any(|r| r.metrics.contains_key("cfdp_completed"))
    {
        &cfdp_cols
    } else if runs.iter().any(|r| r.metrics.contains_key("transfer_s")) {
        &super::bench_ip::REPORT_COLUMNS
    } else {
        &ltp_cols
    };
    let _ = writeln!(r, "Means with 95 % Student-t confidence half-widths:\n");
    let _ = writeln!(
        r,
        "| {} | {} |",
        exp.axes
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
        cols.join(" | ")
    );
    let _ = writeln!(r, "|{}", "---|".repeat(exp.axes.len() + cols.len()));
    for p in points {
        let _ = writeln!(
            r,
            "| {} | {} |",
            p.labels.join(" | "),
            cols.iter()
                .map(|c| match p.metrics.get(*c) {
                    Some(m) if m.mean.is_finite() => format!("{:.2} ± {:.2}", m.mean, m.ci95),
                    _ => "—".to_string(),
                })
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    r.push('\n');
    for p in plots {
        let _ = writeln!(r, "![{p}]({p}.svg)\n");
    }
    let _ = writeln!(
        r,
        "All metrics per run: `runs.csv` / `runs.json`; per grid point (mean, ci95): `aggregate.csv` / `aggregate.json`."
    );
    r
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One chart's data: x categories/values, series, and per (series, x) the mean and CI of each y metric.
struct ChartData {
    title: String,
    x_label: String,
    y_label: String,
    kind: String,
    /// Line plot with log10 x positions (labels show 10^x).
    x_log: bool,
    /// (x position, x label)
    xs: Vec<(f64, String)>,
    series: Vec<String>,
    y_names: Vec<String>,
    /// values[series][x][metric] = (mean, ci)
    values: Vec<Vec<Vec<(f64, f64)>>>,
}

fn draw_plot(
    exp: &Experiment,
    points: &[PointAggregate],
    spec: &PlotSpec,
    index: usize,
    out: &Path,
) -> anyhow::Result<Vec<String>> {
    let ax_pos = |name: &str| exp.axes.iter().position(|a| a.name == name);
    let Some(xi) = ax_pos(&spec.x) else {
        return Ok(Vec::new());
    };
    let si = spec.series.as_deref().and_then(ax_pos);
    // One chart per combination of the other axes' points.
    let others: Vec<usize> = (0..exp.axes.len())
        .filter(|&i| i != xi && Some(i) != si)
        .collect();
    let mut groups: BTreeMap<Vec<usize>, Vec<&PointAggregate>> = BTreeMap::new();
    for p in points {
        let key: Vec<usize> = others
            .iter()
            .filter_map(|&i| p.point.get(i).copied())
            .collect();
        groups.entry(key).or_default().push(p);
    }
    let stem = spec
        .file
        .clone()
        .unwrap_or_else(|| format!("plot{}_{}_vs_{}", index + 1, spec.y.join("+"), spec.x));
    let mut files = Vec::new();
    let many = groups.len() > 1;
    for (key, members) in groups {
        let suffix: String = others
            .iter()
            .zip(&key)
            .filter_map(|(&a, &i)| {
                exp.axes
                    .get(a)
                    .and_then(|ax| ax.points.get(i))
                    .map(|p| p.label.clone())
            })
            .collect::<Vec<_>>()
            .join("_");
        let file = if many {
            format!("{stem}_{}", sanitize(&suffix))
        } else {
            stem.clone()
        };
        let x_axis = &exp.axes[xi];
        let xs: Vec<(f64, String)> = x_axis
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let x = p.x.unwrap_or(i as f64);
                (if spec.x_log { x.log10() } else { x }, p.label.clone())
            })
            .collect();
        let series: Vec<String> = match si {
            Some(s) => exp.axes[s].points.iter().map(|p| p.label.clone()).collect(),
            None => vec![String::new()],
        };
        let mut values = vec![vec![vec![(f64::NAN, 0.0); spec.y.len()]; xs.len()]; series.len()];
        for p in members {
            let s = si.and_then(|s| p.point.get(s).copied()).unwrap_or(0);
            let x = p.point.get(xi).copied().unwrap_or(0);
            for (k, y) in spec.y.iter().enumerate() {
                if let (Some(m), Some(slot)) = (
                    p.metrics.get(y),
                    values
                        .get_mut(s)
                        .and_then(|v| v.get_mut(x))
                        .and_then(|v| v.get_mut(k)),
                ) {
                    *slot = (m.mean, if m.ci95.is_finite() { m.ci95 } else { 0.0 });
                }
            }
        }
        let mut title = spec.title.clone().unwrap_or_else(|| spec.y.join(" + "));
        if many {
            title = format!("{title} ({suffix})");
        }
        let data = ChartData {
            title,
            x_label: spec.x_label.clone().unwrap_or_else(|| spec.x.clone()),
            x_log: spec.x_log && spec.kind == "line",
            y_label: spec.y_label.clone().unwrap_or_else(|| spec.y.join(", ")),
            kind: spec.kind.clone(),
            xs,
            series,
            y_names: spec.y.clone(),
            values,
        };
        for ext in ["png", "svg"] {
            let path = out.join(format!("{file}.{ext}"));
            let r = if ext == "png" {
                chart(
                    BitMapBackend::new(&path, (1000, 650)).into_drawing_area(),
                    &data,
                )
            } else {
                chart(
                    SVGBackend::new(&path, (1000, 650)).into_drawing_area(),
                    &data,
                )
            };
            r.with_context(|| format!("drawing {}", path.display()))?;
        }
        files.push(file);
    }
    Ok(files)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn chart<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    d: &ChartData,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    crate::plot::ensure_font();
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e:?}");
    root.fill(&WHITE).map_err(err)?;
    let stacked = d.kind == "stacked";
    let bars = d.kind == "bars" || stacked;
    let mut y_max: f64 = 0.0;
    let mut y_min: f64 = 0.0;
    for s in &d.values {
        for x in s {
            if stacked {
                let (pos, neg) =
                    x.iter()
                        .filter(|v| v.0.is_finite())
                        .fold((0.0, 0.0), |(p, n), v| {
                            if v.0 >= 0.0 {
                                (p + v.0, n)
                            } else {
                                (p, n + v.0)
                            }
                        });
                y_max = y_max.max(pos);
                y_min = y_min.min(neg);
            } else {
                for v in x.iter().filter(|v| v.0.is_finite()) {
                    y_max = y_max.max(v.0 + v.1);
                    y_min = y_min.min(v.0 - v.1);
                }
            }
        }
    }
    if y_max <= y_min {
        y_max = y_min + 1.0;
    }
    let pad = (y_max - y_min) * 0.08;
    let (x_lo, x_hi) = if bars {
        (-0.5, d.xs.len() as f64 - 0.5)
    } else {
        let lo = d.xs.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
        let hi = d.xs.iter().map(|x| x.0).fold(f64::NEG_INFINITY, f64::max);
        let w = (hi - lo).max(1.0) * 0.04;
        (lo - w, hi + w)
    };
    let xs = d.xs.clone();
    let x_log = d.x_log;
    let mut c = ChartBuilder::on(&root)
        .caption(&d.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(
            x_lo..x_hi,
            (y_min - if y_min < 0.0 { pad } else { 0.0 })..(y_max + pad),
        )
        .map_err(err)?;
    let label_fmt = move |v: &f64| -> String {
        if bars {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                return xs.get(i as usize).map(|x| x.1.clone()).unwrap_or_default();
            }
            String::new()
        } else if x_log {
            let x = 10f64.powf(*v);
            if x >= 100.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.3}")
            }
        } else {
            format!("{v}")
        }
    };
    let mut mesh = c.configure_mesh();
    mesh.x_desc(d.x_label.as_str())
        .y_desc(d.y_label.as_str())
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(RGBColor(235, 235, 235))
        .x_label_formatter(&label_fmt);
    if bars {
        mesh.x_labels(d.xs.len().max(1) * 4 + 1);
    }
    mesh.draw().map_err(err)?;
    let ns = d.series.len().max(1);
    if stacked {
        // One stacked bar per (x, series); components in y order.
        let width = 0.8 / ns as f64;
        for (si, s) in d.values.iter().enumerate() {
            for (xi, comps) in s.iter().enumerate() {
                let left = xi as f64 - 0.4 + si as f64 * width;
                let (mut pos, mut neg) = (0.0, 0.0);
                for (k, v) in comps.iter().enumerate() {
                    if !v.0.is_finite() {
                        continue;
                    }
                    let (b, t) = if v.0 >= 0.0 {
                        let b = pos;
                        pos += v.0;
                        (b, pos)
                    } else {
                        let t = neg;
                        neg += v.0;
                        (neg, t)
                    };
                    let col = PALETTE[k % PALETTE.len()];
                    c.draw_series(std::iter::once(Rectangle::new(
                        [(left + 0.02, b), (left + width - 0.02, t)],
                        col.filled(),
                    )))
                    .map_err(err)?;
                }
            }
        }
        for (k, name) in d.y_names.iter().enumerate() {
            let col = PALETTE[k % PALETTE.len()];
            c.draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], col.filled()));
        }
    } else if bars {
        let width = 0.8 / ns as f64;
        for (si, s) in d.values.iter().enumerate() {
            let col = PALETTE[si % PALETTE.len()];
            for (xi, comps) in s.iter().enumerate() {
                let Some(&(m, ci)) = comps.first() else {
                    continue;
                };
                if !m.is_finite() {
                    continue;
                }
                let left = xi as f64 - 0.4 + si as f64 * width;
                let mid = left + width / 2.0;
                c.draw_series(std::iter::once(Rectangle::new(
                    [(left + 0.02, 0.0), (left + width - 0.02, m)],
                    col.filled(),
                )))
                .map_err(err)?;
                if ci > 0.0 {
                    c.draw_series(std::iter::once(PathElement::new(
                        vec![(mid, m - ci), (mid, m + ci)],
                        BLACK.stroke_width(2),
                    )))
                    .map_err(err)?;
                }
            }
            if !d.series[si].is_empty() {
                c.draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                    .map_err(err)?
                    .label(d.series[si].clone())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 16, y + 6)], col.filled())
                    });
            }
        }
    } else {
        let mut idx = 0;
        for (si, s) in d.values.iter().enumerate() {
            for (k, yname) in d.y_names.iter().enumerate() {
                let col = PALETTE[idx % PALETTE.len()];
                idx += 1;
                let pts: Vec<(f64, f64, f64)> = s
                    .iter()
                    .zip(&d.xs)
                    .filter_map(|(v, x)| {
                        v.get(k)
                            .filter(|v| v.0.is_finite())
                            .map(|v| (x.0, v.0, v.1))
                    })
                    .collect();
                let label = match (d.series[si].is_empty(), d.y_names.len() > 1) {
                    (true, _) => yname.clone(),
                    (false, false) => d.series[si].clone(),
                    (false, true) => format!("{} {yname}", d.series[si]),
                };
                c.draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    col.stroke_width(2),
                ))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], col.stroke_width(3))
                });
                c.draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 4, col.filled())))
                    .map_err(err)?;
                // CI whiskers: a vertical segment with short caps (the errorbar feature of plotters is not
                // compiled in).
                let cap = (x_hi - x_lo) * 0.006;
                c.draw_series(pts.iter().filter(|p| p.2 > 0.0).flat_map(|&(x, y, e)| {
                    [
                        PathElement::new(vec![(x, y - e), (x, y + e)], col.stroke_width(1)),
                        PathElement::new(
                            vec![(x - cap, y - e), (x + cap, y - e)],
                            col.stroke_width(1),
                        ),
                        PathElement::new(
                            vec![(x - cap, y + e), (x + cap, y + e)],
                            col.stroke_width(1),
                        ),
                    ]
                }))
                .map_err(err)?;
            }
        }
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
