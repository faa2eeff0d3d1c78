//! `dtnkit trace`: synthesize erasure traces (`gen`) and print their Table I statistics and CDF plot (`stats`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use channel::gen::{generate, Family, GenParams, Preset, StateShape};
use channel::stats::{bad_duration_cdf, TraceStats};
use channel::trace::{self, Format, LoadError, ParseOptions};
use clap::{Args, Subcommand, ValueEnum};

use super::UsageError;
use crate::plot::{line_chart, LineChart, Series};

/// Subcommands of `dtnkit trace`.
#[derive(Subcommand)]
pub enum TraceCommand {
    /// Generate an erasure trace from a two-state semi-Markov model (presets A, F, H of seed 000's Table I).
    Gen(GenArgs),
    /// Print a trace's statistics (Table I columns, bad-state median and 90th percentile) and plot the CDF of fades.
    Stats(StatsArgs),
}

/// Trace file format.
#[derive(Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// One 0/1 per line.
    Plain,
    /// `# dtnkit-rle period_us=..` header then `value count` lines.
    Rle,
}

/// Sojourn distribution family.
#[derive(Clone, Copy, ValueEnum)]
pub enum FamilyArg {
    /// Lognormal (default; fits the seed's medians and percentiles best).
    Lognormal,
    /// Gamma.
    Gamma,
}

/// Arguments of `dtnkit trace gen`.
#[derive(Args)]
pub struct GenArgs {
    /// Table I preset: A, F or H (the explicit options below override its values).
    #[arg(long)]
    preset: Option<String>,
    /// Mean good-state duration in ms.
    #[arg(long)]
    good_mean_ms: Option<f64>,
    /// Standard deviation of the good-state duration in ms.
    #[arg(long)]
    good_std_ms: Option<f64>,
    /// Mean bad-state (fade) duration in ms.
    #[arg(long)]
    bad_mean_ms: Option<f64>,
    /// Standard deviation of the bad-state duration in ms.
    #[arg(long)]
    bad_std_ms: Option<f64>,
    /// Trace length in seconds.
    #[arg(long, default_value_t = 100.0)]
    duration_s: f64,
    /// Sample period in microseconds.
    #[arg(long, default_value_t = 100)]
    period_us: u64,
    /// RNG seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Plain)]
    format: FormatArg,
    /// Distribution family of the sojourn durations.
    #[arg(long, value_enum, default_value_t = FamilyArg::Lognormal)]
    family: FamilyArg,
    /// Plain i.i.d. draws instead of moment-matched sojourns (sample moments then vary with the seed).
    #[arg(long)]
    no_match: bool,
    /// Output file.
    #[arg(short, long)]
    output: PathBuf,
}

/// Arguments of `dtnkit trace stats`.
#[derive(Args)]
pub struct StatsArgs {
    /// Trace files (plain or run-length); several files are plotted together.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Sample period of plain-format files in microseconds.
    #[arg(long, default_value_t = 100)]
    period_us: u64,
    /// Write the CDF of bad-state durations to this .png or .svg file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Print seed 000's Table I row of this preset (A, F or H) next to the measured values.
    #[arg(long)]
    compare: Option<String>,
}

/// Runs a `dtnkit trace` subcommand.
pub fn run(c: TraceCommand) -> anyhow::Result<()> {
    match c {
        TraceCommand::Gen(a) => gen(a),
        TraceCommand::Stats(a) => stats(a),
    }
}

fn preset(name: &str, flag: &str) -> anyhow::Result<Preset> {
    Preset::from_name(name)
        .ok_or_else(|| UsageError(format!("{flag} {name:?}: expected A, F or H")).into())
}

fn gen(a: GenArgs) -> anyhow::Result<()> {
    let base = match &a.preset {
        Some(p) => Some(preset(p, "--preset")?.params(a.seed)),
        None => None,
    };
    let pick = |v: Option<f64>, from: Option<f64>, flag: &str| -> anyhow::Result<f64> {
        v.or(from)
            .ok_or_else(|| UsageError(format!("{flag} is required without --preset")).into())
    };
    let good = StateShape {
        mean_ms: pick(
            a.good_mean_ms,
            base.as_ref().map(|b| b.good.mean_ms),
            "--good-mean-ms",
        )?,
        std_ms: pick(
            a.good_std_ms,
            base.as_ref().map(|b| b.good.std_ms),
            "--good-std-ms",
        )?,
    };
    let bad = StateShape {
        mean_ms: pick(
            a.bad_mean_ms,
            base.as_ref().map(|b| b.bad.mean_ms),
            "--bad-mean-ms",
        )?,
        std_ms: pick(
            a.bad_std_ms,
            base.as_ref().map(|b| b.bad.std_ms),
            "--bad-std-ms",
        )?,
    };
    let duration = Duration::try_from_secs_f64(a.duration_s)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            UsageError(format!(
                "--duration-s {}: expected a positive number of seconds",
                a.duration_s
            ))
        })?;
    if a.period_us == 0 {
        return Err(
            UsageError("--period-us 0: expected a positive number of microseconds".into()).into(),
        );
    }
    let params = GenParams {
        good,
        bad,
        duration,
        period: Duration::from_micros(a.period_us),
        seed: a.seed,
        family: match a.family {
            FamilyArg::Lognormal => Family::LogNormal,
            FamilyArg::Gamma => Family::Gamma,
        },
        match_moments: !a.no_match,
    };
    let trace = generate(&params).map_err(|e| UsageError(e.to_string()))?;
    let format = match a.format {
        FormatArg::Plain => Format::Plain,
        FormatArg::Rle => Format::RunLength,
    };
    std::fs::write(&a.output, trace.to_text(format))
        .with_context(|| format!("writing {}", a.output.display()))?;
    let s = TraceStats::of(&trace);
    eprintln!(
        "wrote {} ({} samples, {:.2} % bad, {} fades)",
        a.output.display(),
        s.samples,
        s.bad_percent,
        s.bad.count
    );
    Ok(())
}

fn load(path: &Path, period_us: u64) -> anyhow::Result<channel::ErasureTrace> {
    if period_us == 0 {
        return Err(
            UsageError("--period-us 0: expected a positive number of microseconds".into()).into(),
        );
    }
    let opts = ParseOptions {
        period: Duration::from_micros(period_us),
        ..ParseOptions::default()
    };
    trace::load(path, &opts).map_err(|e| match e {
        LoadError::Io { .. } => anyhow::Error::new(e),
        other => UsageError(other.to_string()).into(),
    })
}

fn text_report(name: &str, s: &TraceStats, compare: Option<&channel::gen::TableRow>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "trace {name}");
    let _ = writeln!(
        out,
        "  samples         {} (period {} ms, {:.3} s)",
        s.samples, s.period_ms, s.duration_s
    );
    let _ = writeln!(out, "  fades           {}", s.bad.count);
    let rows: [(&str, f64, Option<f64>, &str); 8] = [
        (
            "bad state",
            s.bad_percent,
            compare.map(|t| t.bad_percent),
            "%",
        ),
        (
            "bad mean",
            s.bad.mean_ms,
            compare.map(|t| t.bad_mean_ms),
            "ms",
        ),
        (
            "good mean",
            s.good.mean_ms,
            compare.map(|t| t.good_mean_ms),
            "ms",
        ),
        ("bad std", s.bad.std_ms, compare.map(|t| t.bad_std_ms), "ms"),
        (
            "good std",
            s.good.std_ms,
            compare.map(|t| t.good_std_ms),
            "ms",
        ),
        (
            "bad median",
            s.bad.median_ms,
            compare.map(|t| t.bad_median_ms),
            "ms",
        ),
        ("bad p90", s.bad.p90_ms, compare.map(|t| t.bad_p90_ms), "ms"),
        ("good median", s.good.median_ms, None, "ms"),
    ];
    if let Some(t) = compare {
        let _ = writeln!(
            out,
            "  {:<15} {:>10} {:>10} {:>8}",
            "",
            "measured",
            format!("Table I {}", t.name),
            "diff"
        );
    }
    for (label, v, reference, unit) in rows {
        match reference {
            Some(r) => {
                let _ = writeln!(
                    out,
                    "  {label:<15} {v:>10.3} {r:>10.3} {:>+7.1}%  {unit}",
                    100.0 * (v - r) / r
                );
            }
            None => {
                let _ = writeln!(out, "  {label:<15} {v:>10.3} {unit}");
            }
        }
    }
    out
}

fn json_report(name: &str, s: &TraceStats) -> String {
    let esc: String = name
        .chars()
        .flat_map(|c| {
            if c == '"' || c == '\\' {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect();
    format!(
        "{{\"file\":\"{esc}\",\"samples\":{},\"period_ms\":{},\"duration_s\":{},\"bad_percent\":{},\"fades\":{},\
         \"good_mean_ms\":{},\"good_std_ms\":{},\"bad_mean_ms\":{},\"bad_std_ms\":{},\"bad_median_ms\":{},\"bad_p90_ms\":{}}}",
        s.samples,
        s.period_ms,
        s.duration_s,
        s.bad_percent,
        s.bad.count,
        s.good.mean_ms,
        s.good.std_ms,
        s.bad.mean_ms,
        s.bad.std_ms,
        s.bad.median_ms,
        s.bad.p90_ms
    )
}

fn stats(a: StatsArgs) -> anyhow::Result<()> {
    let compare = match &a.compare {
        Some(p) => Some(preset(p, "--compare")?.table_i()),
        None => None,
    };
    let mut series = Vec::new();
    let mut x_max: f64 = 1.0;
    let mut json = Vec::new();
    for f in &a.files {
        let t = load(f, a.period_us)?;
        let s = TraceStats::of(&t);
        let name = f.display().to_string();
        if a.json {
            json.push(json_report(&name, &s));
        } else {
            print!("{}", text_report(&name, &s, compare.as_ref()));
        }
        if a.plot.is_some() {
            let cdf = bad_duration_cdf(&t);
            // Show up to the 99th percentile of the longest-fading trace, like Fig. 3 of seed 000.
            if let Some(&(x, _)) = cdf.iter().find(|&&(_, y)| y >= 0.99) {
                x_max = x_max.max(x);
            }
            let label = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or(name);
            series.push(Series { label, points: cdf });
        }
    }
    if a.json {
        println!("[{}]", json.join(","));
    }
    if let Some(p) = &a.plot {
        let chart = LineChart {
            title: "CDF of bad-state duration",
            x_label: "bad-state duration (ms)",
            y_label: "CDF",
            x_range: (0.0, x_max * 1.05),
            y_range: (0.0, 1.0),
            steps: true,
        };
        line_chart(p, &chart, &series)?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}
