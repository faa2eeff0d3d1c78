//! Per-bundle delivery metrics (seed 003's Figs 8-9), FEC metrics read from the segment logs (the same `FEC_*`
//! rows in simulated and emulated runs), and `indexed` plots (a metric family `bundle{}_...` against its index,
//! mean ± CI with every run as a dot).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use analyze::experiment::{Experiment, Metrics, PlotSpec, PointAggregate};

use crate::plot::{render, sanitize, ChartData};
use crate::RunResult;

/// Most bundles per run that get per-bundle metrics.
const MAX_INDEXED_BUNDLES: usize = 100;

/// The round-trip time of the scenario's first link (forward + return delay), seconds.
pub(crate) fn rtt_s(scn: &sim::Scenario) -> Option<f64> {
    let l = scn.links.first()?;
    let rtt = (l.forward.delay_ms + l.ret.delay_ms) / 1e3;
    (rtt > 0.0).then_some(rtt)
}

/// `bundleK_delivery_s` / `bundleK_delivery_rtt` per bundle (K = 1.. in generation order) of a
/// run with at most 100 bundles, and `delivery_rtt_mean` / `delivery_rtt_max` over those
/// delivered (NaN for undelivered bundles).
pub(crate) fn delivery(m: &mut Metrics, records: &[traffic::BundleRecord], rtt: Option<f64>) {
    if records.is_empty() || records.len() > MAX_INDEXED_BUNDLES {
        return;
    }
    let mut recs: Vec<&traffic::BundleRecord> = records.iter().collect();
    recs.sort_by_key(|r| (r.sent, r.seq));
    let mut rtts = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let k = i + 1;
        let s = r
            .delivered
            .map_or(f64::NAN, |d| d.saturating_sub(r.sent).as_secs_f64());
        m.insert(format!("bundle{k}_delivery_s"), s);
        if let Some(rtt) = rtt {
            m.insert(format!("bundle{k}_delivery_rtt"), s / rtt);
            if s.is_finite() {
                rtts.push(s / rtt);
            }
        }
    }
    if !rtts.is_empty() {
        let n = rtts.len() as f64;
        m.insert("delivery_rtt_mean".into(), rtts.iter().sum::<f64>() / n);
        m.insert(
            "delivery_rtt_max".into(),
            rtts.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        );
    }
}

/// Counts the receivers' `FEC_DECODED` / `FEC_FAILED` rows (and the segments the decoded ones
/// repaired, the `report_serial` column) in the run's segment logs.
pub(crate) fn fec_from_logs(m: &mut Metrics, logs: &[&Path]) {
    let (mut decoded, mut failed, mut repaired) = (0u64, 0u64, 0u64);
    for p in logs {
        let Ok(f) = std::fs::File::open(p) else {
            continue;
        };
        for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
            let cols: Vec<&str> = line.split(',').collect();
            match cols.get(6).copied() {
                Some("FEC_DECODED") => {
                    decoded += 1;
                    repaired += cols
                        .get(10)
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                }
                Some("FEC_FAILED") => failed += 1,
                _ => {}
            }
        }
    }
    m.insert("fec_matrices_decoded".into(), decoded as f64);
    m.insert("fec_matrices_failed".into(), failed as f64);
    m.insert("fec_segments_repaired".into(), repaired as f64);
}

/// An `indexed` plot: for each combination of the axes other than `series`, the family
/// `spec.y[0]` (with `{}` = 1, 2, ...) against its index, mean and 95 % CI per series, and each
/// run's value as a dot (the spread over repetitions).
pub(crate) fn draw_indexed(
    exp: &Experiment,
    runs: &[RunResult],
    points: &[PointAggregate],
    spec: &PlotSpec,
    index: usize,
    out: &Path,
) -> anyhow::Result<Vec<String>> {
    let Some(pattern) = spec.y.first() else {
        return Ok(Vec::new());
    };
    let name = |k: usize| pattern.replace("{}", &k.to_string());
    let n = (1..=MAX_INDEXED_BUNDLES)
        .take_while(|&k| points.iter().any(|p| p.metrics.contains_key(&name(k))))
        .count();
    if n == 0 {
        return Ok(Vec::new());
    }
    let si = spec
        .series
        .as_deref()
        .and_then(|s| exp.axes.iter().position(|a| a.name == s));
    let others: Vec<usize> = (0..exp.axes.len()).filter(|&i| Some(i) != si).collect();
    let key_of = |point: &[usize]| -> Vec<usize> {
        others
            .iter()
            .filter_map(|&i| point.get(i).copied())
            .collect()
    };
    let mut groups: BTreeMap<Vec<usize>, Vec<&PointAggregate>> = BTreeMap::new();
    for p in points {
        groups.entry(key_of(&p.point)).or_default().push(p);
    }
    let series: Vec<String> = match si {
        Some(s) => exp.axes[s].points.iter().map(|p| p.label.clone()).collect(),
        None => vec![String::new()],
    };
    let stem = spec
        .file
        .clone()
        .unwrap_or_else(|| format!("plot{}_{}", index + 1, pattern.replace("{}", "K")));
    let many = groups.len() > 1;
    let mut files = Vec::new();
    for (key, members) in groups {
        let suffix: String = others
            .iter()
            .zip(&key)
            .filter_map(|(&a, &i)| exp.axes.get(a)?.points.get(i).map(|p| p.label.clone()))
            .collect::<Vec<_>>()
            .join("_");
        let mut values = vec![vec![vec![(f64::NAN, 0.0)]; n]; series.len()];
        for p in members {
            let s = si.and_then(|s| p.point.get(s).copied()).unwrap_or(0);
            for k in 1..=n {
                if let (Some(mc), Some(slot)) = (
                    p.metrics.get(&name(k)),
                    values.get_mut(s).and_then(|v| v.get_mut(k - 1)),
                ) {
                    slot[0] = (mc.mean, if mc.ci95.is_finite() { mc.ci95 } else { 0.0 });
                }
            }
        }
        let mut dots = vec![Vec::new(); series.len()];
        for r in runs.iter().filter(|r| key_of(&r.spec.point) == key) {
            let s = si.and_then(|s| r.spec.point.get(s).copied()).unwrap_or(0);
            // Series side by side around each index so their dots do not hide each other.
            let shift = (s as f64 - (series.len() as f64 - 1.0) / 2.0) * 0.12;
            for k in 1..=n {
                if let (Some(v), Some(d)) = (r.metrics.get(&name(k)), dots.get_mut(s)) {
                    if v.is_finite() {
                        d.push((k as f64 + shift, *v));
                    }
                }
            }
        }
        let file = if many {
            format!("{stem}_{}", sanitize(&suffix))
        } else {
            stem.clone()
        };
        let mut title = spec.title.clone().unwrap_or_else(|| pattern.clone());
        if many {
            title = format!("{title} ({suffix})");
        }
        let data = ChartData {
            title,
            x_label: spec.x_label.clone().unwrap_or_else(|| "index".into()),
            y_label: spec.y_label.clone().unwrap_or_else(|| pattern.clone()),
            kind: "line".into(),
            x_log: false,
            xs: (1..=n).map(|k| (k as f64, k.to_string())).collect(),
            series: series.clone(),
            y_names: vec![pattern.clone()],
            values,
            dots,
        };
        render(out, &file, &data)?;
        files.push(file);
    }
    Ok(files)
}
