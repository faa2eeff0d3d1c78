//! `dtnkit sim`: run a scenario in the deterministic simulator (virtual time) and print a summary.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::UsageError;

/// Arguments of `dtnkit sim`.
#[derive(Args)]
pub struct SimArgs {
    /// Scenario file (TOML, see docs/sim.md).
    scenario: PathBuf,
    /// Override the scenario seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the simulated duration in seconds.
    #[arg(long)]
    duration_s: Option<f64>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Print the summary as one JSON object instead of a text line.
    #[arg(long)]
    json: bool,
}

/// Runs the scenario and prints the summary.
pub fn run(a: SimArgs) -> anyhow::Result<()> {
    let mut scn = sim::Scenario::load(&a.scenario).map_err(|e| UsageError(e.to_string()))?;
    if let Some(s) = a.seed {
        scn.sim.seed = s;
    }
    if let Some(d) = a.duration_s {
        scn.sim.duration_s = d;
    }
    let mut s = sim::Simulation::new(&scn).map_err(|e| UsageError(e.to_string()))?;
    let wall = Instant::now();
    let end = s.end();
    let bar = if a.quiet || a.json {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(end.as_millis() as u64);
        b.set_style(
            ProgressStyle::with_template("{bar:40} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    };
    // Slices of virtual time small enough for a lively bar, large enough to cost nothing.
    let slice = (end / 200).max(Duration::from_millis(1));
    let mut t = Duration::ZERO;
    while !s.is_finished() {
        t += slice;
        s.run_until(t);
        let w = wall.elapsed().as_secs_f64().max(1e-9);
        bar.set_position(s.now().as_millis() as u64);
        bar.set_message(format!(
            "{:.2}/{:.2} s virtual, {:.2}x wall",
            s.now().as_secs_f64(),
            end.as_secs_f64(),
            s.now().as_secs_f64() / w
        ));
    }
    bar.finish_and_clear();
    let wall_s = wall.elapsed().as_secs_f64();
    let sum = s.summary();
    if sum.log_write_errors > 0 {
        eprintln!(
            "dtnkit sim: {} log rows could not be written (disk full?)",
            sum.log_write_errors
        );
    }
    if a.json {
        let mut v = serde_json::to_value(&sum)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("wall_s".into(), serde_json::json!(wall_s));
            o.insert("seed".into(), serde_json::json!(scn.sim.seed));
        }
        println!("{v}");
    } else {
        println!(
            "goodput {:.2} Mb/s, bundles {}/{} sent/delivered ({} acked), LTP sessions {} ({} cancelled, mean {:.2} ms), \
             retransmission cycles {}, RTO expirations {}, segments {} ({} lost on links, {} dropped at full receive \
             queues), virtual {:.3} s in {:.2} s wall",
            sum.goodput_bps / 1e6,
            sum.bundles_sent,
            sum.bundles_delivered,
            sum.bundles_acked,
            sum.ltp_sessions,
            sum.ltp_sessions_cancelled,
            sum.mean_session_s * 1e3,
            sum.retransmission_cycles,
            sum.rto_expirations,
            sum.segments_sent,
            sum.lost_channel + sum.lost_unavailable + sum.queue_full,
            sum.rx_queue_drops,
            sum.virtual_s,
            wall_s
        );
        for c in &sum.cfdp {
            let secs = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3} s"));
            println!(
                "cfdp #{} {}→{} over {} (class {}, {} bytes): {}, sender {}, receiver {}, transfer {}, delivery {}, \
                 normalized throughput {}, file data PDUs {} sent ({} resent, {} repeats), {} NAKs{}{}",
                c.index,
                c.from,
                c.to,
                c.transport,
                c.class,
                c.file_size,
                if c.completed { "completed" } else { "NOT completed" },
                c.condition,
                c.receiver_condition,
                secs(c.transfer_s),
                secs(c.delivery_s),
                c.normalized_throughput.map_or("-".to_string(), |v| format!("{v:.3}")),
                c.file_data_pdus_sent,
                c.file_data_pdus_retransmitted,
                c.file_data_pdus_repeated,
                c.naks,
                c.received_ratio
                    .map_or(String::new(), |r| format!(", received ratio {r:.4}")),
                match (c.relay_of, c.put_s) {
                    (Some(k), Some(put)) => format!(
                        "; relays cfdp #{k}: put at {put:.3} s, end to end {}",
                        secs(c.end_to_end_delivery_s)
                    ),
                    (Some(k), None) => format!("; relays cfdp #{k}: not started"),
                    (None, _) => String::new(),
                },
            );
        }
    }
    Ok(())
}
