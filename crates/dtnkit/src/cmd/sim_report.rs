//! `dtnkit sim-report`: the network results of a finished `dtnkit sim` run (per-bundle delay and hops, storage
//! over time, contact use against volume, routing decisions, delivery ratio) from the per-node logs its scenario's
//! `[log]` section names, as CSV, JSON and plots (`docs/sim.md`, "Network results").

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use super::UsageError;
use crate::plot::{line_chart, timeline, LineChart, Series, TimelineRow};

/// Arguments of `dtnkit sim-report`.
#[derive(Args)]
pub struct SimReportArgs {
    /// The scenario that was run (its `[log] bundle_csv` and, for the routing results, `route_csv` name the logs;
    /// its `sim.contact_plan` gives the contacts' volumes).
    scenario: PathBuf,
    /// Directory for bundles.csv, storage.csv, contacts.csv, overbooked.csv, summary.json and the plots.
    #[arg(long)]
    out: PathBuf,
    /// Storage sampling interval, seconds.
    #[arg(long, default_value_t = 60.0)]
    bin_s: f64,
    /// Contact pairs shown in the contact timeline (the ones that sent most).
    #[arg(long, default_value_t = 40)]
    timeline_pairs: usize,
    /// Exit with status 1 when a contact was booked beyond its volume.
    #[arg(long)]
    check_bookings: bool,
}

fn open(path: &Path) -> anyhow::Result<BufReader<File>> {
    Ok(BufReader::new(File::open(path).with_context(|| {
        format!(
            "{}: cannot open (was the scenario run with this [log] section?)",
            path.display()
        )
    })?))
}

/// Runs `dtnkit sim-report`.
pub fn run(a: SimReportArgs) -> anyhow::Result<()> {
    if !(a.bin_s.is_finite() && a.bin_s >= 0.001) {
        return Err(UsageError(format!(
            "--bin-s {}: expected a number of seconds >= 0.001",
            a.bin_s
        ))
        .into());
    }
    let scn = sim::Scenario::load(&a.scenario).map_err(|e| UsageError(e.to_string()))?;
    let Some(bundle_pattern) = scn.log.bundle_csv.clone() else {
        return Err(UsageError(format!(
            "{}: the scenario has no [log] bundle_csv: nothing to report (add it and run the scenario again)",
            a.scenario.display()
        ))
        .into());
    };
    let mut contacts = Vec::new();
    if let Some(p) = &scn.sim.contact_plan {
        let path = scn.base_dir.join(p);
        let plan = bp::ContactPlan::load(&path, scn.sim.epoch_dtn_ms)
            .map_err(|e| UsageError(format!("sim.contact_plan {}: {e}", path.display())))?;
        contacts.extend(plan.contacts().map(|c| analyze::PlanContact {
            from: c.from,
            to: c.to,
            start_ms: plan.to_dtn_ms(c.start_ms),
            end_ms: plan.to_dtn_ms(c.end_ms),
            rate_bytes_per_s: c.rate_bytes_per_s,
        }));
    }
    let mut an = analyze::NetworkAnalyzer::new(contacts, (a.bin_s * 1000.0).round() as u64);
    for n in &scn.nodes {
        if let Some(rp) = &scn.log.route_csv {
            let path = sim::scenario::LogSection::path_for(rp, &scn.base_dir, n.number);
            an.add_route_log(&path.display().to_string(), n.number, open(&path)?)?;
        }
    }
    for n in &scn.nodes {
        let path = sim::scenario::LogSection::path_for(&bundle_pattern, &scn.base_dir, n.number);
        an.add_bundle_log(&path.display().to_string(), n.number, open(&path)?)?;
    }
    let report = an.finish();
    report.write_dir(&a.out)?;
    plots(&a, &report, scn.sim.epoch_dtn_ms)?;
    let s = &report.summary;
    println!("{}", serde_json::to_string_pretty(s)?);
    if a.check_bookings && !report.overbooked.is_empty() {
        anyhow::bail!(
            "{} contact(s) booked beyond their volume (see {}/overbooked.csv)",
            report.overbooked.len(),
            a.out.display()
        );
    }
    Ok(())
}

/// Bytes sent by one (from, to) pair and its contacts as timeline bars.
type PairBars = (u64, Vec<(f64, f64, f64)>);

fn plots(a: &SimReportArgs, r: &analyze::NetworkReport, epoch_dtn_ms: u64) -> anyhow::Result<()> {
    // Delay CDF, minutes.
    let mut d: Vec<f64> = r
        .bundles
        .iter()
        .filter_map(|b| b.delay_ms)
        .map(|x| x as f64 / 60_000.0)
        .collect();
    d.sort_by(f64::total_cmp);
    let n = r.bundles.len().max(1) as f64;
    let pts: Vec<(f64, f64)> = d
        .iter()
        .enumerate()
        .map(|(i, x)| (*x, (i + 1) as f64 / n))
        .collect();
    let xmax = d.last().copied().unwrap_or(1.0).max(1e-3) * 1.02;
    for ext in ["png", "svg"] {
        line_chart(
            &a.out.join(format!("delay_cdf.{ext}")),
            &LineChart {
                title: "End-to-end delay (fraction of all bundles created)",
                x_label: "delay (min)",
                y_label: "fraction delivered within",
                x_range: (0.0, xmax),
                y_range: (0.0, 1.0),
                steps: true,
            },
            &[Series {
                label: format!("{} of {} delivered", d.len(), r.bundles.len()),
                points: pts.clone(),
            }],
        )?;
    }
    // Storage: total over nodes and the largest node, per bin, kB.
    let mut total: std::collections::BTreeMap<u64, (f64, f64)> = Default::default();
    for s in &r.storage {
        let e = total
            .entry((s.time_s * 1000.0) as u64)
            .or_insert((0.0, 0.0));
        e.0 += s.bytes as f64 / 1e3;
        e.1 = e.1.max(s.peak_bytes as f64 / 1e3);
    }
    let tot: Vec<(f64, f64)> = total
        .iter()
        .map(|(t, v)| (*t as f64 / 3.6e6, v.0))
        .collect();
    let mx: Vec<(f64, f64)> = total
        .iter()
        .map(|(t, v)| (*t as f64 / 3.6e6, v.1))
        .collect();
    let ymax = tot.iter().chain(mx.iter()).map(|p| p.1).fold(1.0, f64::max) * 1.05;
    let tmax = tot.last().map_or(1.0, |p| p.0).max(1e-3);
    for ext in ["png", "svg"] {
        line_chart(
            &a.out.join(format!("storage.{ext}")),
            &LineChart {
                title: "Bundles stored in the network",
                x_label: "time (h)",
                y_label: "kB",
                x_range: (0.0, tmax),
                y_range: (0.0, ymax),
                steps: false,
            },
            &[
                Series {
                    label: "all nodes (end of bin)".into(),
                    points: tot.clone(),
                },
                Series {
                    label: "largest node (peak in bin)".into(),
                    points: mx.clone(),
                },
            ],
        )?;
    }
    // Contact timeline: the pairs that sent most, every contact of theirs as a bar coloured by utilisation.
    let mut per_pair: std::collections::BTreeMap<(u64, u64), PairBars> = Default::default();
    for c in &r.contacts {
        let e = per_pair.entry((c.contact.from, c.contact.to)).or_default();
        e.0 += c.sent_bytes;
        let h = |t: u64| t.saturating_sub(epoch_dtn_ms) as f64 / 3.6e6;
        e.1.push((h(c.contact.start_ms), h(c.contact.end_ms), c.utilisation));
    }
    let mut pairs: Vec<_> = per_pair.into_iter().filter(|(_, v)| v.0 > 0).collect();
    pairs.sort_by(|x, y| y.1 .0.cmp(&x.1 .0).then(x.0.cmp(&y.0)));
    pairs.truncate(a.timeline_pairs.max(1));
    pairs.sort_by_key(|p| p.0);
    let rows: Vec<TimelineRow> = pairs
        .into_iter()
        .map(|((f, t), (_, bars))| TimelineRow {
            label: format!("{f}>{t}"),
            bars,
        })
        .collect();
    if !rows.is_empty() {
        for ext in ["png", "svg"] {
            timeline(
                &a.out.join(format!("contacts.{ext}")),
                "Contacts of the busiest pairs (bytes sent / volume: grey 0, yellow → red 1)",
                "time (h)",
                &rows,
            )?;
        }
    }
    Ok(())
}
