//! `dtnkit ping`: round-trip times to a node's echo service (`ipn:N.7`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use client::proto::SendArgs;
use client::Client;

/// Arguments of `dtnkit ping`.
#[derive(Args)]
pub struct PingArgs {
    /// The local node's application socket.
    #[arg(long)]
    socket: PathBuf,
    /// Echo endpoint of the remote node (`ipn:2.7`).
    #[arg(long)]
    dst: String,
    /// Number of echo requests.
    #[arg(long, default_value_t = 4)]
    count: u32,
    /// Interval between requests in ms.
    #[arg(long, default_value_t = 200)]
    interval_ms: u64,
    /// How long to wait for each reply, in seconds.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
    /// Local service number to receive replies on.
    #[arg(long, default_value_t = 4070)]
    service: u64,
}

/// Sends echo requests and prints RTTs.
pub fn run(a: PingArgs) -> anyhow::Result<()> {
    let mut c = Client::connect(&a.socket)
        .with_context(|| format!("connecting to {}", a.socket.display()))?;
    let node = c.node_status()?.node;
    anyhow::ensure!(node != 0, "node status has no node number");
    let me = format!("ipn:{node}.{}", a.service);
    c.register(&me)?;
    let mut rtts = Vec::new();
    for seq in 0..a.count {
        let payload = format!("ping {seq} {}", std::process::id());
        let t0 = Instant::now();
        c.send(SendArgs {
            source: me.clone(),
            destination: a.dst.clone(),
            lifetime_ms: (a.timeout * 1000.0) as u64 + 1000,
            report_flags: 0,
            priority: 2,
            payload: Bytes::from(payload.clone().into_bytes()),
        })?;
        let deadline = t0 + Duration::from_secs_f64(a.timeout);
        let mut got = false;
        while let Some(r) = c.recv(Some(deadline.saturating_duration_since(Instant::now())))? {
            c.ack(&r)?;
            if r.payload == payload.as_bytes() {
                let rtt = t0.elapsed().as_secs_f64() * 1000.0;
                println!("reply from {}: seq={seq} time={rtt:.3} ms", r.id.source);
                rtts.push(rtt);
                got = true;
                break;
            }
        }
        if !got {
            println!("seq={seq}: no reply within {} s", a.timeout);
        }
        if seq + 1 < a.count {
            std::thread::sleep(Duration::from_millis(a.interval_ms));
        }
    }
    let n = rtts.len();
    println!("{} sent, {n} received", a.count);
    if n > 0 {
        let min = rtts.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rtts.iter().copied().fold(0.0, f64::max);
        let avg = rtts.iter().sum::<f64>() / n as f64;
        println!("rtt min/avg/max = {min:.3}/{avg:.3}/{max:.3} ms");
        Ok(())
    } else {
        anyhow::bail!("no echo reply from {}", a.dst)
    }
}
