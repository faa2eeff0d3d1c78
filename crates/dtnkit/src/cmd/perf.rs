//! `dtnkit perf`: DTNperf-style client and server over a running node's application socket.
//!
//! The loops live in `lab::perf` (shared with the emulated lab) and drive the sans-IO `traffic` client/server the
//! simulator uses, so the tool, the lab and the simulator generate traffic by identical rules.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use lab::perf::{self, ClientOptions, ClientRun, ServerOptions};
use traffic::{Pacing, Stop};

use super::UsageError;

/// `dtnkit perf server|client`.
#[derive(Subcommand)]
pub enum PerfCommand {
    /// Acknowledge every bundle received on an endpoint with a small ACK bundle to its source
    /// (an ADU delivered fragment by fragment: once all its bytes arrived).
    Server(ServerArgs),
    /// Send DTNperf bundles (window, time or data mode) and measure goodput from the server's ACKs.
    Client(ClientArgs),
}

/// Arguments of `dtnkit perf server`.
#[derive(Args)]
pub struct ServerArgs {
    /// The node's application socket.
    #[arg(long)]
    socket: PathBuf,
    /// Endpoint to serve (`ipn:2.2001`).
    #[arg(long)]
    endpoint: String,
    /// Write one row per received bundle (source,creation_ms,bundle_seq,perf_seq,bytes,received_ns).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Stop after this many bundles (default: until Ctrl-C).
    #[arg(long)]
    count: Option<u64>,
    /// Lifetime of the ACK bundles in ms (0: the node's default).
    #[arg(long, default_value_t = 0)]
    ack_lifetime_ms: u64,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

/// Arguments of `dtnkit perf client`.
#[derive(Args)]
pub struct ClientArgs {
    /// The node's application socket.
    #[arg(long)]
    socket: PathBuf,
    /// Server endpoint (`ipn:2.2001`), or with --echo an echo service (`ipn:2.7`).
    #[arg(long)]
    dst: String,
    /// The destination is a BP echo service, not `dtnkit perf server`: a bundle echoed back
    /// whole counts as acknowledged (dtnkit's `ipn:N.7`, HDTN bpsink's echo service, ION's
    /// bpecho).
    #[arg(long)]
    echo: bool,
    /// Client endpoint the ACKs return to (`ipn:1.2000`); must belong to the node.
    #[arg(long)]
    src_endpoint: String,
    /// Window mode: at most N bundles unacknowledged.
    #[arg(short = 'W', long = "window", value_name = "N")]
    window: Option<u32>,
    /// Interval mode: one bundle every MS milliseconds regardless of ACKs.
    #[arg(long, value_name = "MS")]
    interval_ms: Option<f64>,
    /// Time mode: generate for T seconds.
    #[arg(long, value_name = "T")]
    time_s: Option<f64>,
    /// Data mode: generate until BYTES payload bytes were sent.
    #[arg(long, value_name = "BYTES")]
    data: Option<u64>,
    /// Generate exactly N bundles.
    #[arg(long, value_name = "N")]
    bundles: Option<u64>,
    /// Payload bytes per bundle (at least 22, the DTNperf header). Above 64 MiB - 4096 each
    /// bundle is streamed to the node (generated as it is written, never whole in memory) and
    /// stored as fragments of its `[bp] max_fragment_bytes`; the server counts it once all its
    /// bytes arrived. Any size the nodes' store quotas hold (e.g. 4294967296).
    #[arg(long)]
    size: usize,
    /// Bundle lifetime in ms (0: the node's default).
    #[arg(long, default_value_t = 0)]
    lifetime_ms: u64,
    /// Bundle priority: 0 bulk, 1 normal, 2 expedited.
    #[arg(long, default_value_t = 1)]
    priority: u8,
    /// After generation stops, wait at most this long for outstanding ACKs.
    #[arg(long, default_value_t = 30.0)]
    drain_timeout_s: f64,
    /// Write per-bundle send / delivery / ACK times (seq,bytes,sent_ns,delivered_ns,acked_ns,rtt_ns).
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

/// Runs `dtnkit perf`.
pub fn run(c: PerfCommand) -> anyhow::Result<()> {
    match c {
        PerfCommand::Server(a) => server(a),
        PerfCommand::Client(a) => client(a),
    }
}

fn ctrl_c_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed))
        .context("installing the Ctrl-C handler")?;
    Ok(stop)
}

fn bar(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

fn positive_secs(v: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            UsageError(format!("{flag} {v}: expected a positive number of seconds")).into()
        })
}

fn client_options(a: &ClientArgs) -> anyhow::Result<ClientOptions> {
    let pacing = match (a.window, a.interval_ms) {
        (Some(0), _) => {
            return Err(UsageError("-W 0: expected a window of at least 1 bundle".into()).into())
        }
        (Some(w), None) => Pacing::Window(w),
        (None, Some(ms)) => Pacing::Interval(positive_secs(ms / 1e3, "--interval-ms (ms)")?),
        (Some(_), Some(_)) => {
            return Err(UsageError(
                "-W and --interval-ms: expected one pacing mode, not both".into(),
            )
            .into())
        }
        (None, None) => {
            return Err(UsageError(
                "expected a pacing mode: -W N (window) or --interval-ms MS".into(),
            )
            .into())
        }
    };
    let stop = match (a.time_s, a.data, a.bundles) {
        (Some(t), None, None) => Stop::Duration(positive_secs(t, "--time-s")?),
        (None, Some(0), None) => {
            return Err(UsageError("--data 0: expected a positive byte count".into()).into())
        }
        (None, Some(b), None) => Stop::Bytes(b),
        (None, None, Some(0)) => {
            return Err(UsageError("--bundles 0: expected at least 1 bundle".into()).into())
        }
        (None, None, Some(n)) => Stop::Bundles(n),
        (None, None, None) => {
            return Err(UsageError(
                "expected a stop rule: --time-s T, --data BYTES or --bundles N".into(),
            )
            .into())
        }
        _ => {
            return Err(UsageError(
                "--time-s, --data and --bundles: expected exactly one stop rule".into(),
            )
            .into())
        }
    };
    if a.size < traffic::payload::DATA_HEADER_LEN {
        return Err(UsageError(format!(
            "--size {}: expected at least {} bytes (the DTNperf header)",
            a.size,
            traffic::payload::DATA_HEADER_LEN
        ))
        .into());
    }
    if a.echo && a.size > perf::STREAM_ABOVE {
        return Err(UsageError(format!(
            "--size {} with --echo: expected at most {} bytes (larger bundles are streamed and \
             fragmented, and an echo service answers fragment by fragment; use `dtnkit perf server`)",
            a.size,
            perf::STREAM_ABOVE
        ))
        .into());
    }
    if a.priority > 2 {
        return Err(UsageError(format!(
            "--priority {}: expected 0 (bulk), 1 (normal) or 2 (expedited)",
            a.priority
        ))
        .into());
    }
    let drain = Duration::try_from_secs_f64(a.drain_timeout_s).map_err(|_| {
        UsageError(format!(
            "--drain-timeout-s {}: expected a number of seconds >= 0",
            a.drain_timeout_s
        ))
    })?;
    Ok(ClientOptions {
        socket: a.socket.clone(),
        src_endpoint: a.src_endpoint.clone(),
        dst: a.dst.clone(),
        pacing,
        stop,
        payload_size: a.size,
        lifetime_ms: a.lifetime_ms,
        priority: a.priority,
        drain_timeout: drain,
        connect_timeout: Duration::from_secs(2),
        store_full_timeout: Duration::from_secs(30),
        echo: a.echo,
    })
}

fn mbps(bps: f64) -> f64 {
    bps / 1e6
}

fn client(a: ClientArgs) -> anyhow::Result<()> {
    let opts = client_options(&a)?;
    let csv = match &a.csv {
        Some(p) => {
            Some(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        None => None,
    };
    let stop = ctrl_c_flag()?;
    let pb = bar(a.quiet);
    let run = perf::run_client(&opts, Instant::now(), &stop, &mut |p| {
        pb.set_message(format!(
            "{}goodput {:.1} Mb/s, sent {}, acked {}, in flight {}",
            if p.draining { "draining: " } else { "" },
            mbps(p.report.goodput_bps),
            p.report.sent,
            p.report.acked,
            p.in_flight
        ));
    })
    .with_context(|| format!("perf client on {}", a.socket.display()))?;
    pb.finish_and_clear();
    if let (Some(f), Some(p)) = (csv, &a.csv) {
        perf::write_client_csv(&mut std::io::BufWriter::new(f), &run)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    print_client_summary(&run, a.json)?;
    if run.report.acked == 0 && run.report.sent > 0 && !run.cancelled {
        anyhow::bail!(
            "no bundle was acknowledged (is {} running on {}?)",
            if a.echo {
                "an echo service"
            } else {
                "`dtnkit perf server`"
            },
            a.dst
        );
    }
    if !run.missing.is_empty() && !run.cancelled {
        anyhow::bail!(
            "{} of {} bundles were never acknowledged by the far end (sequence numbers {})",
            run.report.sent - run.report.acked,
            run.report.sent,
            seq_ranges(&run.missing)
        );
    }
    Ok(())
}

/// `3-5,9`: inclusive ranges of sequence numbers, at most the first 20 then `,...`.
fn seq_ranges(r: &[(u64, u64)]) -> String {
    let mut parts: Vec<String> = r
        .iter()
        .take(20)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    if r.len() > 20 {
        parts.push("...".into());
    }
    parts.join(",")
}

fn print_client_summary(run: &ClientRun, json: bool) -> anyhow::Result<()> {
    let r = &run.report;
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    if json {
        let v = serde_json::json!({
            "sent": r.sent,
            "acked": r.acked,
            "bytes_sent": r.bytes_sent,
            "bytes_acked": r.bytes_acked,
            "goodput_bps": r.goodput_bps,
            "mean_rtt_s": secs(r.mean_rtt),
            "first_send_s": secs(r.first_send),
            "last_ack_s": secs(r.last_ack),
            "elapsed_s": run.elapsed.as_secs_f64(),
            "complete": run.complete,
            "cancelled": run.cancelled,
            "store_full_retries": run.store_full_retries,
            "bad_acks": run.bad_acks,
            "missing": r.sent - r.acked,
            "missing_seqs": run.missing.iter().map(|&(a, b)| [a, b]).collect::<Vec<_>>(),
        });
        let mut out = std::io::stdout().lock();
        writeln!(out, "{v}")?;
        return Ok(());
    }
    println!(
        "perf client: {} bundles sent ({} bytes), {} acknowledged ({} bytes) in {:.3} s{}",
        r.sent,
        r.bytes_sent,
        r.acked,
        r.bytes_acked,
        run.elapsed.as_secs_f64(),
        if run.complete {
            ""
        } else {
            " (some never acknowledged)"
        }
    );
    if !run.missing.is_empty() {
        println!(
            "MISSING: {} bundles never acknowledged by the far end: sequence numbers {}",
            r.sent - r.acked,
            seq_ranges(&run.missing)
        );
    }
    println!(
        "goodput {:.3} Mb/s (acknowledged payload / (last ACK - first send)); mean RTT {}",
        mbps(r.goodput_bps),
        r.mean_rtt.map_or("-".to_string(), |d| format!(
            "{:.3} ms",
            d.as_secs_f64() * 1e3
        ))
    );
    if run.store_full_retries > 0 || run.bad_acks > 0 {
        println!(
            "store-full retries {}, invalid ACK payloads {}",
            run.store_full_retries, run.bad_acks
        );
    }
    Ok(())
}

fn server(a: ServerArgs) -> anyhow::Result<()> {
    if a.count == Some(0) {
        return Err(UsageError("--count 0: expected at least 1 bundle".into()).into());
    }
    let opts = ServerOptions {
        socket: a.socket.clone(),
        endpoint: a.endpoint.clone(),
        ack_lifetime_ms: a.ack_lifetime_ms,
        ack_priority: 1,
        max_bundles: a.count,
        connect_timeout: Duration::from_secs(2),
        store_full_timeout: Duration::from_secs(30),
    };
    let mut csv = match &a.csv {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let stop = ctrl_c_flag()?;
    let pb = bar(a.quiet);
    let t0 = Instant::now();
    if !a.quiet {
        eprintln!("perf server: serving {} (Ctrl-C to stop)", a.endpoint);
    }
    let stats = perf::run_server(
        &opts,
        t0,
        &stop,
        csv.as_mut().map(|w| w as &mut dyn Write),
        &mut |s| {
            pb.set_message(format!(
                "received {} bundles, {} bytes",
                s.received, s.bytes
            ));
        },
    )
    .with_context(|| format!("perf server on {}", a.socket.display()))?;
    pb.finish_and_clear();
    let span = match (stats.first, stats.last) {
        (Some(f), Some(l)) if l > f => (l - f).as_secs_f64(),
        _ => 0.0,
    };
    println!(
        "perf server: {} bundles, {} bytes received ({} malformed{}); {:.3} Mb/s between first and last",
        stats.received,
        stats.bytes,
        stats.malformed,
        if stats.fragments > 0 || stats.abandoned > 0 {
            format!(
                ", {} fragments of ADUs delivered piece by piece, {} such ADUs abandoned incomplete",
                stats.fragments, stats.abandoned
            )
        } else {
            String::new()
        },
        if span > 0.0 {
            stats.bytes as f64 * 8.0 / span / 1e6
        } else {
            0.0
        }
    );
    Ok(())
}
