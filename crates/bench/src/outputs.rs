//! The outputs of a finished grid: per-run and per-point CSV and JSON tables and the markdown report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use analyze::experiment::{aggregate, Experiment, Metrics, Mode, PointAggregate, RunSpec};
use anyhow::Context;

use crate::metrics::METRICS;
use crate::{BenchOutcome, RunResult};

/// Creates the output directory and its `logs` subdirectory; returns the latter as an absolute path (scenario
/// paths are relative to the scenario's directory, so the simulator needs an absolute one).
pub(crate) fn prepare(out: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    logs.canonicalize()
        .with_context(|| format!("resolving {}", logs.display()))
}

/// Aggregates the results of every run of `exp` (in grid order) per grid point and writes all outputs into `out`;
/// removes `out/logs` when it is empty and the logs were not kept.
pub fn finish(
    exp: &Experiment,
    runs: Vec<RunResult>,
    out: &Path,
    keep_logs: bool,
) -> anyhow::Result<BenchOutcome> {
    if !keep_logs {
        let _ = std::fs::remove_dir(out.join("logs"));
    }
    let pairs: Vec<(RunSpec, Metrics)> = runs
        .iter()
        .map(|r| (r.spec.clone(), r.metrics.clone()))
        .collect();
    let points = aggregate(exp, &pairs);
    write_outputs(exp, &runs, &points, out)?;
    Ok(BenchOutcome {
        runs,
        points,
        out: out.to_path_buf(),
    })
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

/// Writes every output of a finished grid into `out`: `runs.csv`/`.json`, `aggregate.csv`/`.json`, the plots and
/// `report.md`.
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
        if spec.kind == "indexed" {
            plots.extend(crate::delivery::draw_indexed(
                exp, runs, points, spec, i, out,
            )?);
        } else {
            plots.extend(crate::plot::draw_plot(exp, points, spec, i, out)?);
        }
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
            Mode::Loopback => "loopback",
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
        "resent_per_erased",
        "time_over_bound",
    ];
    // Scenarios with CFDP transfers get the CFDP columns, IP-mode transfers theirs.
    let cols: &[&str] = if runs
        .iter()
        .any(|r| r.metrics.contains_key("cfdp_completed"))
    {
        &cfdp_cols
    } else if exp.mode == Mode::Loopback {
        &crate::loopback::REPORT_COLUMNS
    } else if runs.iter().any(|r| r.metrics.contains_key("transfer_s")) {
        &crate::ip::REPORT_COLUMNS
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
