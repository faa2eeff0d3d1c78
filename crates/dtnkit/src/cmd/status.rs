//! `dtnkit status`: a running node's queues, store use, sessions and counters.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use client::Client;

/// Arguments of `dtnkit status`.
#[derive(Args)]
pub struct StatusArgs {
    /// The node's application socket.
    #[arg(long)]
    socket: PathBuf,
    /// Print the raw JSON object.
    #[arg(long)]
    json: bool,
}

/// Prints the status.
pub fn run(a: StatusArgs) -> anyhow::Result<()> {
    let mut c = Client::connect(&a.socket)
        .with_context(|| format!("connecting to {}", a.socket.display()))?;
    let json = c.status()?;
    if a.json {
        println!("{json}");
        return Ok(());
    }
    let v: serde_json::Value = serde_json::from_str(&json).context("node status is not JSON")?;
    println!("node {}", v["node"]);
    for section in [
        "store", "queues", "bundles", "bpsec", "ltp", "tcpcl", "udpcl",
    ] {
        if v[section].is_null() {
            // A convergence layer the node does not run, or no BPSec policy.
            continue;
        }
        println!("{section}:");
        if let Some(m) = v[section].as_object() {
            for (k, val) in m {
                println!("  {k:<22} {val}");
            }
        }
    }
    Ok(())
}
