//! Mode `ip`: each run is one file transfer across the emulator's IP mode (`lab::ipnet`): kernel TCP, TCP through
//! a splitting gateway, or BP over LTP or TCPCL between real nodes. Kept apart from `run.rs`, which only
//! dispatches here.

use analyze::experiment::{Experiment, Metrics, RunSpec};
use lab::ipnet::{IpLabOptions, IpScenario};
use std::time::Instant;
use toml::Value;

use crate::run::run_name;
use crate::{usage, RunContext};

/// Columns of the report's table for IP-mode runs.
pub const REPORT_COLUMNS: [&str; 7] = [
    "goodput_mbps",
    "transfer_s",
    "completed",
    "nthr",
    "retransmits",
    "fwd_loss_pct",
    "unmodelled_drops",
];

/// Checks one run's scenario before anything runs.
pub(crate) fn validate(doc: &Value, exp: &Experiment, spec: &RunSpec) -> anyhow::Result<()> {
    IpScenario::from_value(doc, &run_name(exp, spec)).map_err(usage)?;
    Ok(())
}

/// Runs one transfer and turns its outcome into metrics.
pub(crate) fn run_ip(
    exp: &Experiment,
    spec: &RunSpec,
    doc: &Value,
    ctx: &RunContext,
) -> anyhow::Result<Metrics> {
    let wall = Instant::now();
    let scn = IpScenario::from_value(doc, &run_name(exp, spec)).map_err(usage)?;
    let work = ctx.logs.join(format!("run{:05}", spec.index));
    let o = lab::run_ip_transfer(&scn, &IpLabOptions::new(&ctx.dtnkit, &work))
        .map_err(|e| anyhow::anyhow!("IP-mode run: {e}"))?;
    let mut m = Metrics::new();
    let rate = scn.link.forward.rate_bps.filter(|r| *r > 0.0);
    let l = &o.link;
    let loss_pct = if l.fwd_received > 0 {
        100.0 * l.fwd_lost_channel as f64 / l.fwd_received as f64
    } else {
        f64::NAN
    };
    for (k, v) in [
        ("goodput_mbps", o.goodput_mbps),
        ("transfer_s", o.transfer_s),
        ("completed", f64::from(u8::from(o.completed))),
        ("delivered_mb", o.delivered_bytes as f64 / 1e6),
        ("nthr", rate.map_or(f64::NAN, |r| o.goodput_mbps * 1e6 / r)),
        ("retransmits", o.retransmits.map_or(f64::NAN, |v| v as f64)),
        ("handshake_ms", o.handshake_ms.unwrap_or(f64::NAN)),
        ("min_rtt_ms", o.min_rtt_ms.unwrap_or(f64::NAN)),
        ("fwd_lost_channel", l.fwd_lost_channel as f64),
        ("fwd_queue_full", l.fwd_queue_full as f64),
        ("fwd_loss_pct", loss_pct),
        ("ret_lost_channel", l.ret_lost_channel as f64),
        ("ret_queue_full", l.ret_queue_full as f64),
        ("unmodelled_drops", l.unmodelled_drops as f64),
        ("load_start", o.load_start),
        ("wall_s", wall.elapsed().as_secs_f64()),
    ] {
        m.insert(k.to_string(), v);
    }
    if let Some(a) = &o.access {
        for (k, v) in [
            ("acc_fwd_lost_channel", a.fwd_lost_channel),
            ("acc_fwd_queue_full", a.fwd_queue_full),
            ("acc_ret_lost_channel", a.ret_lost_channel),
            ("acc_ret_queue_full", a.ret_queue_full),
        ] {
            m.insert(k.to_string(), v as f64);
        }
    }
    if let Some(g) = &o.gateway {
        for (k, v) in [
            ("gw_connections", g.connections as f64),
            ("gw_retransmits", g.retransmits as f64),
            ("gw_srtt_ms", g.srtt_ms),
            ("gw_min_rtt_ms", g.min_rtt_ms),
        ] {
            m.insert(k.to_string(), v);
        }
    }
    if !ctx.keep_logs {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(m)
}
