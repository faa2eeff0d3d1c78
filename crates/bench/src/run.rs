//! One run of a grid: its scenario built from the experiment's overrides, executed in the simulator or the
//! real-time lab, and turned into metrics.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use analyze::experiment::{Experiment, Metrics, Mode, RunSpec};
use anyhow::Context;
use toml::Value;

use crate::delivery;
use crate::metrics::{analysis_metrics, cfdp_metrics, channel_of, ltp_unit_metrics};
use crate::{usage, RunContext};

/// How a run is named in errors: the base scenario, the run's index, its point's labels and its repetition.
pub(crate) fn run_name(exp: &Experiment, spec: &RunSpec) -> String {
    format!(
        "{} run {} ({} rep {})",
        exp.scenario.display(),
        spec.index,
        exp.labels(&spec.point).join("/"),
        spec.repetition
    )
}

/// Builds one run's scenario from its document (`doc`: the base with the run's overrides) without running it, so
/// a bad override is reported before any run starts.
pub(crate) fn check(
    exp: &Experiment,
    spec: &RunSpec,
    doc: &Value,
    scn_dir: &Path,
) -> anyhow::Result<()> {
    match exp.mode {
        Mode::Ip => crate::ip::validate(doc, exp, spec),
        Mode::Loopback => crate::loopback::validate(doc, exp, spec),
        Mode::Sim | Mode::Emu => build_scenario(doc, exp, spec, scn_dir, None).map(drop),
    }
}

/// Runs one run of `exp` in its mode and returns its metrics.
pub(crate) fn execute(
    exp: &Experiment,
    spec: &RunSpec,
    doc: &Value,
    scn_dir: &Path,
    ctx: &RunContext,
) -> anyhow::Result<Metrics> {
    match exp.mode {
        Mode::Sim => run_sim(exp, spec, doc, scn_dir, ctx),
        Mode::Emu => run_emu(exp, spec, doc, scn_dir, ctx),
        Mode::Ip => crate::ip::run_ip(exp, spec, doc, ctx),
        Mode::Loopback => crate::loopback::run_loopback(exp, spec, doc, ctx),
    }
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
    sim::Scenario::from_toml_str(&text, &run_name(exp, spec), scn_dir).map_err(usage)
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

/// The metrics of a run that carried DTNperf traffic over LTP: the analysis of its segment logs (`paths`) with the
/// forward channel's `(rate, good fraction)`, and its goodput, acknowledged bundles and span.
fn ltp_metrics(
    paths: &[&Path],
    (rate, good): (Option<f64>, f64),
    goodput_bps: f64,
    bundles_acked: u64,
    virtual_s: f64,
) -> anyhow::Result<Metrics> {
    let analysis = analyze::analyze_files(
        paths,
        &[],
        &analyze::Options {
            rate_bps: rate,
            good_fraction: Some(good),
            ..analyze::Options::default()
        },
        None,
    )
    .map_err(|e| anyhow::anyhow!("analyzing the run's logs: {e}"))?;
    let mut m = Metrics::new();
    analysis_metrics(&mut m, &analysis.summary);
    m.insert("goodput_mbps".into(), goodput_bps / 1e6);
    m.insert("good_fraction".into(), good);
    m.insert(
        "efficiency_pct".into(),
        rate.map_or(f64::NAN, |r| 100.0 * goodput_bps / (r * good)),
    );
    m.insert("bundles_acked".into(), bundles_acked as f64);
    m.insert("virtual_s".into(), virtual_s);
    Ok(m)
}

fn run_sim(
    exp: &Experiment,
    spec: &RunSpec,
    doc: &Value,
    scn_dir: &Path,
    ctx: &RunContext,
) -> anyhow::Result<Metrics> {
    let (logs, keep_logs) = (ctx.logs.as_path(), ctx.keep_logs);
    let wall = Instant::now();
    let prefix = format!("run{:05}-", spec.index);
    let pattern = logs.join(format!("{prefix}segments-{{node}}.csv"));
    let scn = build_scenario(doc, exp, spec, scn_dir, Some(&pattern))?;
    let mut s = sim::Simulation::new(&scn).map_err(usage)?;
    s.run();
    let summary = s.summary();
    let records: Vec<traffic::BundleRecord> = s
        .nodes()
        .iter()
        .flat_map(|n| n.client_reports().into_iter().map(move |(svc, _)| (n, svc)))
        .flat_map(|(n, svc)| n.client_records(svc).unwrap_or(&[]).to_vec())
        .collect();
    drop(s); // flushes and closes the logs
    let files = log_paths(logs, &prefix)?;
    let span = Duration::from_secs_f64(summary.virtual_s.max(1e-3));
    let (rate, good) = channel_of(&scn, span);
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let m = ltp_metrics(
        &paths,
        (rate, good),
        summary.goodput_bps,
        summary.bundles_acked,
        summary.virtual_s,
    );
    let fec = scn.nodes.iter().any(|n| n.fec.is_some());
    let mut fec_m = Metrics::new();
    if fec {
        delivery::fec_from_logs(&mut fec_m, &paths);
        fec_m.insert("fec_matrix_tx_ms".into(), summary.fec_matrix_tx_s_max * 1e3);
        fec_m.insert(
            "fec_repair_symbols_sent".into(),
            summary.fec_repair_symbols_sent as f64,
        );
        fec_m.insert(
            "fec_feedback_raises".into(),
            summary.fec_feedback_raises as f64,
        );
    }
    if !keep_logs {
        for f in &files {
            let _ = std::fs::remove_file(f);
        }
    }
    let mut m = m?;
    m.extend(fec_m);
    delivery::delivery(&mut m, &records, delivery::rtt_s(&scn));
    cfdp_metrics(&mut m, &summary.cfdp);
    ltp_unit_metrics(&mut m, &summary);
    m.insert("wall_s".into(), wall.elapsed().as_secs_f64());
    Ok(m)
}

fn run_emu(
    exp: &Experiment,
    spec: &RunSpec,
    doc: &Value,
    scn_dir: &Path,
    ctx: &RunContext,
) -> anyhow::Result<Metrics> {
    let (logs, keep_logs) = (ctx.logs.as_path(), ctx.keep_logs);
    let wall = Instant::now();
    let scn = build_scenario(doc, exp, spec, scn_dir, None)?;
    let work = logs.join(format!("run{:05}", spec.index));
    let mut opts = lab::LabOptions::new(&ctx.dtnkit, &work);
    opts.durable_store = false;
    // Outstanding ACKs are awaited for 60 round trips after generation ends (at least the default): a link of
    // seconds of delay (seed 003) needs several retransmission cycles.
    if let Some(rtt) = delivery::rtt_s(&scn) {
        opts.drain_timeout = opts
            .drain_timeout
            .max(Duration::try_from_secs_f64(60.0 * rtt).unwrap_or_default());
    }
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
    let mut m = ltp_metrics(
        &segs,
        (rate, good),
        outcome.client.goodput_bps,
        outcome.client.acked,
        span.as_secs_f64(),
    )?;
    delivery::delivery(&mut m, &outcome.records, delivery::rtt_s(&scn));
    if scn.nodes.iter().any(|n| n.fec.is_some()) {
        delivery::fec_from_logs(&mut m, &segs);
    }
    m.insert("wall_s".into(), wall.elapsed().as_secs_f64());
    if !keep_logs {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(m)
}
