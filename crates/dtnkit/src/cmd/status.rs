//! `dtnkit status`: a running node's queues, store use, sessions and counters; with `--watch`
//! a view redrawn every second with per-second rates.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use client::{Client, NodeStatus};
use serde::Serialize;

/// Arguments of `dtnkit status`.
#[derive(Args)]
pub struct StatusArgs {
    /// The node's application socket.
    #[arg(long)]
    socket: PathBuf,
    /// Print the raw JSON object.
    #[arg(long, conflicts_with = "watch")]
    json: bool,
    /// Redraw every interval with per-second rates until Ctrl-C.
    #[arg(long)]
    watch: bool,
    /// Seconds between two frames of `--watch`.
    #[arg(long, default_value_t = 1.0, requires = "watch")]
    interval: f64,
    /// Stop `--watch` after this many frames (default: run until interrupted).
    #[arg(long, requires = "watch")]
    count: Option<u64>,
}

/// Prints the status.
pub fn run(a: StatusArgs) -> anyhow::Result<()> {
    let mut c = Client::connect(&a.socket)
        .with_context(|| format!("connecting to {}", a.socket.display()))?;
    if a.watch {
        return watch(&mut c, &a);
    }
    let json = c.status()?;
    if a.json {
        println!("{json}");
        return Ok(());
    }
    let st = NodeStatus::from_json(&json).context("node status is not a status object")?;
    println!("node {}", st.node);
    print_section("store", Some(&st.store))?;
    print_section("queues", Some(&st.queues))?;
    print_section("bundles", Some(&st.bundles))?;
    print_section("bpsec", st.bpsec.as_ref())?;
    print_section("ltp", Some(&st.ltp))?;
    print_section("tcpcl", st.tcpcl.as_ref())?;
    print_section("udpcl", st.udpcl.as_ref())?;
    print_section("stcp", st.stcp.as_ref())?;
    for app in &st.apps {
        let name = format!("app {} (connection {})", app.app, app.connection);
        print_section(&name, Some(&app.counters))?;
    }
    Ok(())
}

/// Prints one section, a line per field (its reply key and JSON value); nothing for a section
/// the node does not have (a convergence layer it does not run, no BPSec policy).
fn print_section<T: Serialize>(name: &str, section: Option<&T>) -> anyhow::Result<()> {
    let Some(section) = section else {
        return Ok(());
    };
    println!("{name}:");
    if let serde_json::Value::Object(m) = serde_json::to_value(section)? {
        for (k, val) in m {
            println!("  {k:<22} {val}");
        }
    }
    Ok(())
}

/// Redraws the status every `--interval` seconds (at most `--count` frames). On a terminal each
/// frame replaces the previous one; otherwise frames follow each other, separated by a line.
fn watch(c: &mut Client, a: &StatusArgs) -> anyhow::Result<()> {
    let interval =
        super::positive_seconds("--interval", Some(a.interval))?.unwrap_or(Duration::from_secs(1));
    let tty = std::io::stdout().is_terminal();
    let mut prev: Option<(NodeStatus, Instant)> = None;
    let mut frames = 0u64;
    loop {
        let taken = Instant::now();
        let cur = c.node_status()?;
        let frame = super::status_watch::Frame {
            prev: prev.as_ref().map(|(v, _)| v),
            cur: &cur,
            dt_s: prev
                .as_ref()
                .map_or(0.0, |(_, t)| taken.duration_since(*t).as_secs_f64()),
        };
        let text = super::status_watch::render(&frame);
        if tty {
            // Home, clear the screen, then the frame.
            print!("\x1b[H\x1b[2J{text}");
            std::io::Write::flush(&mut std::io::stdout())?;
        } else {
            println!("{text}");
        }
        frames += 1;
        if a.count.is_some_and(|n| frames >= n) {
            return Ok(());
        }
        prev = Some((cur, taken));
        std::thread::sleep(interval.saturating_sub(taken.elapsed()));
    }
}
