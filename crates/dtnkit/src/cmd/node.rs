//! `dtnkit node --config FILE`: run a DTN node until Ctrl-C / SIGTERM.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use node::{Node, NodeConfig, NodeError};

use super::UsageError;

/// Arguments of `dtnkit node`.
#[derive(Args)]
pub struct NodeArgs {
    /// Node configuration (TOML, see docs/node.md).
    #[arg(long)]
    config: PathBuf,
    /// Only validate the configuration and the contact plan, then exit.
    #[arg(long)]
    check: bool,
}

/// Runs the node.
pub fn run(a: NodeArgs) -> anyhow::Result<()> {
    let cfg = NodeConfig::load(&a.config).map_err(|e| UsageError(e.to_string()))?;
    if a.check {
        if let Some(p) = &cfg.contact_plan {
            bp::ContactPlan::load(p, 0).map_err(|e| UsageError(e.to_string()))?;
        }
        println!("{}: ok", a.config.display());
        return Ok(());
    }
    let node_num = cfg.raw.node;
    let node = Node::start(cfg).map_err(|e| match e {
        NodeError::Config(m) => anyhow::Error::new(UsageError(m)),
        NodeError::ConfigValue(m) => {
            anyhow::Error::new(UsageError(format!("{}: {m}", a.config.display())))
        }
        other => anyhow::Error::new(other),
    })?;
    eprintln!(
        "dtnkit node {node_num}: LTP on {}, application socket {}",
        node.ltp_addr(),
        node.socket_path().display()
    );
    if let Some(a) = node.tcpcl_addr() {
        eprintln!("dtnkit node {node_num}: TCPCL listening on {a}");
    }
    if let Some(a) = node.stcp_addr() {
        eprintln!("dtnkit node {node_num}: STCP listening on {a}");
    }
    if let Some(a) = node.udpcl_addr() {
        eprintln!("dtnkit node {node_num}: UDPCL on {a}");
    }
    if let Some(a) = node.metrics_addr() {
        eprintln!("dtnkit node {node_num}: metrics and web view on http://{a}/");
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .context("installing the Ctrl-C handler")?;
    }
    // Under systemd (`Type=notify`): the node serves from now on.
    sd_notify("READY=1");
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    sd_notify("STOPPING=1");
    node.shutdown();
    Ok(())
}

/// Tells systemd about a state change; a failure is logged, never fatal (the unit's start
/// timeout reports a readiness that never arrived).
fn sd_notify(state: &str) {
    if let Err(e) = node::sd_notify::notify(state) {
        eprintln!("dtnkit node: cannot notify the service manager ({state}): {e}");
    }
}
