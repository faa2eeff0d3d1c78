//! Mode `loopback`: each run is one transfer through real nodes on loopback without the emulator
//! (`lab::loopback`: a chain of 2 to 5 nodes or seed 002's five-node star, TCPCL, LTP or UDPCL on every hop,
//! one or two streams, optional single-core affinity). Kept apart from `run.rs`, which only dispatches here.

use analyze::experiment::{Experiment, Metrics, RunSpec};
use lab::loopback::{LoopbackOptions, LoopbackScenario};
use std::time::Instant;
use toml::Value;

use crate::run::run_name;
use crate::{usage, RunContext};

/// Columns of the report's table for loopback runs.
pub const REPORT_COLUMNS: [&str; 7] = [
    "goodput_mbps",
    "stream_goodput_mbps",
    "completed",
    "delivered_mb",
    "cpu_s_per_gb",
    "middle_rss_mb",
    "load_start",
];

/// Checks one run's scenario before anything runs.
pub(crate) fn validate(doc: &Value, exp: &Experiment, spec: &RunSpec) -> anyhow::Result<()> {
    LoopbackScenario::from_value(doc, &run_name(exp, spec)).map_err(usage)?;
    Ok(())
}

/// Runs one transfer and turns its outcome into metrics.
pub(crate) fn run_loopback(
    exp: &Experiment,
    spec: &RunSpec,
    doc: &Value,
    ctx: &RunContext,
) -> anyhow::Result<Metrics> {
    let wall = Instant::now();
    let scn = LoopbackScenario::from_value(doc, &run_name(exp, spec)).map_err(usage)?;
    let work = ctx.logs.join(format!("run{:05}", spec.index));
    let o = lab::run_loopback(&scn, &LoopbackOptions::new(&ctx.dtnkit, &work))
        .map_err(|e| anyhow::anyhow!("loopback run: {e}"))?;
    let mut m = Metrics::new();
    let n = o.streams.len().max(1) as f64;
    let max_rss = o
        .nodes
        .iter()
        .map(|x| x.peak_rss_mb)
        .fold(f64::NAN, f64::max);
    let node_cpu: f64 = o.nodes.iter().map(|x| x.cpu_s).sum();
    for (k, v) in [
        ("goodput_mbps", o.goodput_mbps),
        (
            "stream_goodput_mbps",
            o.streams.iter().map(|s| s.goodput_mbps).sum::<f64>() / n,
        ),
        ("transfer_s", o.transfer_s),
        ("completed", f64::from(u8::from(o.completed))),
        ("delivered_mb", o.delivered_bytes as f64 / 1e6),
        (
            "bundles_delivered",
            o.streams.iter().map(|s| s.bundles_delivered as f64).sum(),
        ),
        ("cpu_s_per_gb", o.cpu_s_per_gb),
        ("node_cpu_s", node_cpu),
        ("app_cpu_s", o.app_cpu_s),
        ("middle_rss_mb", o.middle_rss_mb()),
        ("max_rss_mb", max_rss),
        (
            "clean_exits",
            o.nodes.iter().filter(|x| x.clean_exit).count() as f64,
        ),
        ("load_start", o.load_start),
        ("wall_s", wall.elapsed().as_secs_f64()),
    ] {
        m.insert(k.to_string(), v);
    }
    for node in &o.nodes {
        m.insert(format!("node{}_cpu_s", node.number), node.cpu_s);
        m.insert(format!("node{}_rss_mb", node.number), node.peak_rss_mb);
    }
    for (i, s) in o.streams.iter().enumerate() {
        m.insert(format!("stream{}_goodput_mbps", i + 1), s.goodput_mbps);
    }
    if !ctx.keep_logs {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(m)
}
