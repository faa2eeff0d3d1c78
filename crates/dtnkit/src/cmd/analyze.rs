//! `dtnkit analyze`: LTP segment logs (and bundle logs) → per-session CSV + run summary (docs/analyze.md).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use super::UsageError;

/// Arguments of `dtnkit analyze`.
#[derive(Args)]
pub struct AnalyzeArgs {
    /// LTP segment logs (docs/ltp-segment-log.md): the sender's and the receiver's, in any order.
    #[arg(required = true)]
    logs: Vec<PathBuf>,
    /// Bundle event logs (docs/bundle-event-log.md) for the application goodput.
    #[arg(long = "bundle-log")]
    bundle_logs: Vec<PathBuf>,
    /// Directory for sessions.csv, summary.json and summary.txt (created if missing).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Nominal rate of the data direction, bit/s (for the channel efficiency).
    #[arg(long)]
    rate_bps: Option<f64>,
    /// Fraction of time the channel was good, in (0, 1] (for the channel efficiency).
    #[arg(long, conflicts_with = "trace")]
    good_fraction: Option<f64>,
    /// Erasure trace of the data direction: a trace file, or a seed-000 preset name A, F or H (Table I's good
    /// fraction); gives the good fraction.
    #[arg(long)]
    trace: Option<String>,
    /// RTO for the checkpoint-loss penalty, ms (default: measured from the log's RTO_CP rows).
    #[arg(long)]
    rto_ms: Option<f64>,
    /// Retransmission-cycle duration for the re-tx penalty, ms (default: measured from the log).
    #[arg(long)]
    cycle_ms: Option<f64>,
    /// Print the summary as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The good fraction of a trace preset (Table I) or trace file.
pub fn good_fraction_of(trace: &str) -> anyhow::Result<f64> {
    if let Some(p) = channel::gen::Preset::from_name(trace) {
        return Ok(1.0 - p.table_i().bad_percent / 100.0);
    }
    let t = channel::trace::load(Path::new(trace), &channel::trace::ParseOptions::default())
        .map_err(|e| {
            UsageError(format!(
                "--trace {trace}: expected A, F, H or a readable erasure trace file ({e})"
            ))
        })?;
    if t.is_empty() {
        return Err(UsageError(format!("--trace {trace}: the trace has no samples")).into());
    }
    Ok(1.0 - t.erased_count() as f64 / t.len() as f64)
}

fn positive(name: &str, v: Option<f64>, max: f64) -> anyhow::Result<Option<f64>> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0 && x <= max) => {
            Err(UsageError(format!("{name} {x}: expected a number in (0, {max}]")).into())
        }
        _ => Ok(v),
    }
}

/// Builds analyzer options from the command-line values (shared with `bench`).
pub fn options(
    rate_bps: Option<f64>,
    good_fraction: Option<f64>,
    trace: Option<&str>,
    rto_ms: Option<f64>,
    cycle_ms: Option<f64>,
) -> anyhow::Result<analyze::Options> {
    let good_fraction = match trace {
        Some(t) => Some(good_fraction_of(t)?),
        None => positive("--good-fraction", good_fraction, 1.0)?,
    };
    Ok(analyze::Options {
        rate_bps: positive("--rate-bps", rate_bps, 1e15)?,
        good_fraction,
        rto_ms: positive("--rto-ms", rto_ms, 1e9)?,
        cycle_ms: positive("--cycle-ms", cycle_ms, 1e9)?,
        ..analyze::Options::default()
    })
}

/// Runs the analysis and prints the summary.
pub fn run(a: AnalyzeArgs) -> anyhow::Result<()> {
    let opts = options(
        a.rate_bps,
        a.good_fraction,
        a.trace.as_deref(),
        a.rto_ms,
        a.cycle_ms,
    )?;
    for p in a.logs.iter().chain(&a.bundle_logs) {
        if !p.is_file() {
            return Err(UsageError(format!("{}: no such log file", p.display())).into());
        }
    }
    if let Some(d) = &a.out {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let logs: Vec<&Path> = a.logs.iter().map(PathBuf::as_path).collect();
    let bundles: Vec<&Path> = a.bundle_logs.iter().map(PathBuf::as_path).collect();
    let sessions_csv = a.out.as_ref().map(|d| d.join("sessions.csv"));
    let analysis = analyze::analyze_files(&logs, &bundles, &opts, sessions_csv.as_deref())
        .map_err(|e| match e {
            analyze::Error::Io(m) => anyhow::anyhow!(m),
            other => UsageError(other.to_string()).into(),
        })?;
    let s = &analysis.summary;
    if let Some(bad) = &analysis.first_bad_line {
        eprintln!(
            "dtnkit analyze: {} malformed lines skipped (first: {bad})",
            s.bad_lines
        );
    }
    let json = serde_json::to_string_pretty(s)?;
    if let Some(d) = &a.out {
        std::fs::write(d.join("summary.json"), &json)
            .with_context(|| format!("writing {}", d.join("summary.json").display()))?;
        std::fs::write(d.join("summary.txt"), format!("{s}\n"))
            .with_context(|| format!("writing {}", d.join("summary.txt").display()))?;
    }
    if a.json {
        println!("{json}");
    } else {
        println!("{s}");
        if let Some(d) = &a.out {
            println!(
                "wrote {}, summary.json, summary.txt",
                d.join("sessions.csv").display()
            );
        }
    }
    Ok(())
}
