//! `dtnkit demo`: seed 000's optical LEO downlink, emulated in real time on loopback, with no files needed.
//!
//! Runs the embedded scenario (`lab::DEMO_SCENARIO`) through the lab (two `dtnkit node` processes and the
//! `dtnkit emu` relay, a DTNperf window transfer), shows a live progress line, then prints the analyzer's summary
//! of the nodes' LTP segment logs and draws goodput over time into a PNG.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lab::{LabOptions, LabOutcome, Phase};

use super::UsageError;
use crate::plot::{line_chart, LineChart, Series};

/// Arguments of `dtnkit demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Seconds of traffic (the run takes a few more to start and stop).
    #[arg(long, default_value_t = 30.0)]
    duration_s: f64,
    /// Output directory (configurations, node logs, CSVs, plot). Default: `dtnkit-demo` in the temp directory.
    /// An existing directory must be empty or an earlier demo's.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run the nodes' stores without fsync per commit (faster on slow disks; a crash may lose bundles).
    #[arg(long)]
    no_fsync: bool,
    /// Print the embedded scenario and exit.
    #[arg(long)]
    print_scenario: bool,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

/// Runs the demo.
pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    if a.print_scenario {
        print!("{}", lab::DEMO_SCENARIO);
        return Ok(());
    }
    let duration = Duration::try_from_secs_f64(a.duration_s)
        .ok()
        .filter(|d| *d >= Duration::from_secs(1) && *d <= Duration::from_secs(3600))
        .ok_or_else(|| {
            UsageError(format!(
                "--duration-s {}: expected 1 to 3600 seconds",
                a.duration_s
            ))
        })?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("dtnkit-demo"));
    let scn = lab::demo_scenario().context("the embedded demo scenario")?;
    let exe = std::env::current_exe().context("locating the dtnkit binary")?;
    let mut opts = LabOptions::new(exe, &out);
    opts.duration = Some(duration);
    opts.durable_store = !a.no_fsync;
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let c = cancel.clone();
        ctrlc::set_handler(move || c.store(true, Ordering::Relaxed))
            .context("installing the Ctrl-C handler")?;
    }
    opts.cancel = Some(cancel);

    println!(
        "dtnkit demo: optical LEO downlink, emulated in real time on loopback\n  \
         500 Mb/s, 10 ms forward delay, erasure trace H (seed 000, Table I), LTP red 1024-byte segments,\n  \
         RTO 30 ms, 10 parallel sessions, 500 kB bundles, DTNperf window 10, {} s of traffic\n  \
         (two `dtnkit node` processes and one `dtnkit emu` relay; output in {})",
        duration.as_secs_f64(),
        out.display()
    );
    let pb = if a.quiet {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::new(duration.as_millis() as u64);
        pb.set_style(
            ProgressStyle::with_template("{bar:30} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    };
    let outcome = lab::run_emulated(&scn, &opts, &mut |p| {
        pb.set_position((p.elapsed.min(p.duration)).as_millis() as u64);
        let what = match p.phase {
            Phase::Starting => "starting nodes and relay",
            Phase::Running => "running",
            Phase::Draining => "waiting for the last ACKs",
            Phase::Stopping => "stopping",
        };
        pb.set_message(format!(
            "{:>5.1} s  goodput {:>6.1} Mb/s  acked {:>5} bundles  in flight {:>2}  {what}",
            p.elapsed.as_secs_f64(),
            p.report.goodput_bps / 1e6,
            p.report.acked,
            p.in_flight
        ));
    })
    .context("running the emulated experiment")?;
    pb.finish_and_clear();

    print_outcome(&outcome);
    print_analysis(&outcome, &out)?;
    let plot = out.join("demo-goodput.png");
    draw(&outcome, &plot)?;
    println!("\nplot: {}", plot.display());
    println!(
        "logs: {} (segments.csv, bundles.csv per node), per-bundle times: {}",
        out.display(),
        outcome.bundle_csv.display()
    );
    if outcome.client.acked == 0 {
        anyhow::bail!("no bundle was acknowledged during the demo");
    }
    Ok(())
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "?".to_string(), |v| v.to_string())
}

fn print_outcome(o: &LabOutcome) {
    let r = &o.client;
    println!(
        "\nDTNperf client: {} bundles sent, {} acknowledged ({:.1} MB), goodput {:.1} Mb/s, mean RTT {}",
        r.sent,
        r.acked,
        r.bytes_acked as f64 / 1e6,
        r.goodput_bps / 1e6,
        r.mean_rtt
            .map_or("-".into(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3))
    );
    if o.cancelled {
        println!("(interrupted: the results cover the traffic until Ctrl-C)");
    }
    let f = &o.emu.forward;
    let b = &o.emu.ret;
    println!(
        "emulator: forward {} datagrams in, {} out, {} erased by trace H, {} queue drops; return {} in, {} out; \
         relay drops {}; kernel UDP drops {}",
        opt(f.received),
        opt(f.sent),
        opt(f.lost_channel),
        opt(f.queue_full),
        opt(b.received),
        opt(b.sent),
        f.relay_drops() + b.relay_drops(),
        opt(o.emu.kernel_drops)
    );
}

fn print_analysis(o: &LabOutcome, out: &Path) -> anyhow::Result<()> {
    let segs: Vec<&Path> = o.nodes.iter().map(|n| n.segment_log.as_path()).collect();
    let bundles: Vec<&Path> = o.nodes.iter().map(|n| n.bundle_log.as_path()).collect();
    let aopts = analyze::Options {
        rate_bps: o.data_rate_bps,
        good_fraction: o.data_good_fraction,
        ..analyze::Options::default()
    };
    let sessions = out.join("sessions.csv");
    let a = analyze::analyze_files(&segs, &bundles, &aopts, Some(&sessions))
        .context("analyzing the nodes' LTP segment logs")?;
    println!(
        "\nanalyzer (LTP segment logs of both nodes; per-session rows in {}):",
        sessions.display()
    );
    println!("{}", a.summary);
    Ok(())
}

/// Goodput over time from the per-bundle ACK times: per-second bins and the running average.
fn draw(o: &LabOutcome, path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&o.bundle_csv)
        .with_context(|| format!("reading {}", o.bundle_csv.display()))?;
    let mut acks: Vec<(f64, f64)> = Vec::new(); // (ack time s, bytes)
    let mut first_send: Option<f64> = None;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (Some(bytes), Some(sent), Some(acked)) = (f.get(1), f.get(2), f.get(4)) else {
            continue;
        };
        let sent: f64 = sent.parse::<u64>().map_or(f64::NAN, |v| v as f64 / 1e9);
        if sent.is_finite() {
            first_send = Some(first_send.map_or(sent, |s: f64| s.min(sent)));
        }
        if let (Ok(b), Ok(a)) = (bytes.parse::<u64>(), acked.parse::<u64>()) {
            acks.push((a as f64 / 1e9, b as f64));
        }
    }
    let t0 = first_send.unwrap_or(0.0);
    acks.sort_by(|a, b| a.0.total_cmp(&b.0));
    let end = acks.last().map_or(1.0, |a| (a.0 - t0).max(1.0));
    let bins = end.ceil() as usize;
    let mut per_s = vec![0.0f64; bins.max(1)];
    let mut running = Vec::with_capacity(acks.len());
    let mut total = 0.0;
    for (t, b) in &acks {
        let rel = t - t0;
        if let Some(slot) = per_s.get_mut((rel.max(0.0) as usize).min(bins.saturating_sub(1))) {
            *slot += b * 8.0 / 1e6;
        }
        total += b * 8.0 / 1e6;
        if rel > 0.0 {
            running.push((rel, total / rel));
        }
    }
    // Each bin's volume over its width; the last bin is usually cut short by the end of the run and is drawn
    // only when it covers at least half a second.
    let per_s_pts: Vec<(f64, f64)> = per_s
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let width = (end - i as f64).min(1.0);
            (width >= 0.5).then(|| (i as f64 + width / 2.0, v / width))
        })
        .collect();
    let mut series = vec![
        Series {
            label: "goodput per 1 s bin".into(),
            points: per_s_pts,
        },
        Series {
            label: "running average".into(),
            points: running,
        },
    ];
    if let Some(rate) = o.data_rate_bps {
        let g = o.data_good_fraction.unwrap_or(1.0);
        series.push(Series {
            label: format!("link rate x good fraction ({:.0} Mb/s)", rate * g / 1e6),
            points: vec![(0.0, rate * g / 1e6), (end, rate * g / 1e6)],
        });
    }
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.15;
    line_chart(
        path,
        &LineChart {
            title: "dtnkit demo: LTP over an emulated optical LEO downlink (trace H)",
            x_label: "time since first bundle (s)",
            y_label: "application goodput (Mb/s)",
            x_range: (0.0, end),
            y_range: (0.0, y_max),
            steps: false,
        },
        &series,
    )
}
