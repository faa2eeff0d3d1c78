//! `dtnkit send`: send bundles through a running node's application socket.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use client::proto::{report, SendArgs};
use client::Client;

use super::UsageError;

/// Arguments of `dtnkit send`.
#[derive(Args)]
pub struct SendCmdArgs {
    /// The node's application socket.
    #[arg(long)]
    socket: PathBuf,
    /// Destination endpoint (`ipn:2.1`).
    #[arg(long)]
    dst: String,
    /// Source endpoint (default: the node id).
    #[arg(long, default_value = "")]
    src: String,
    /// Payload from a file.
    #[arg(long, conflicts_with_all = ["text", "size"])]
    file: Option<PathBuf>,
    /// Payload text.
    #[arg(long, conflicts_with = "size")]
    text: Option<String>,
    /// Generated payload of this many bytes; each bundle's starts with `dtnkit:<index>:`.
    #[arg(long)]
    size: Option<usize>,
    /// Number of bundles.
    #[arg(long, default_value_t = 1)]
    count: u64,
    /// Lifetime in ms (0: the node's default).
    #[arg(long, default_value_t = 0)]
    lifetime_ms: u64,
    /// Priority: 0 bulk, 1 normal, 2 expedited.
    #[arg(long, default_value_t = 1)]
    priority: u8,
    /// Request a delivery status report.
    #[arg(long)]
    report_delivery: bool,
    /// Request a deletion status report.
    #[arg(long)]
    report_deletion: bool,
    /// Print nothing per bundle.
    #[arg(long)]
    quiet: bool,
}

/// A generated payload: `dtnkit:<index>:` then a deterministic filler, `size` bytes in all.
pub fn generated_payload(index: u64, size: usize) -> Vec<u8> {
    let mut p = format!("dtnkit:{index}:").into_bytes();
    let mut x = index.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while p.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p.push(b'a' + (x % 26) as u8);
    }
    p.truncate(size.max(1));
    p
}

/// Sends the bundles; a refusal (e.g. store full) is an error naming the reason.
pub fn run(a: SendCmdArgs) -> anyhow::Result<()> {
    let fixed: Option<Bytes> = match (&a.file, &a.text) {
        (Some(f), _) => Some(Bytes::from(
            std::fs::read(f).with_context(|| format!("reading {}", f.display()))?,
        )),
        (None, Some(t)) => Some(Bytes::from(t.clone().into_bytes())),
        (None, None) if a.size.is_some() => None,
        (None, None) => {
            return Err(UsageError("one of --file, --text or --size is required".into()).into())
        }
    };
    let mut c = Client::connect(&a.socket)
        .with_context(|| format!("connecting to {}", a.socket.display()))?;
    let mut flags = 0;
    if a.report_delivery {
        flags |= report::DELIVERY;
    }
    if a.report_deletion {
        flags |= report::DELETION;
    }
    let t0 = Instant::now();
    let mut bytes = 0u64;
    for i in 0..a.count {
        let payload = match &fixed {
            Some(p) => p.clone(),
            None => Bytes::from(generated_payload(i, a.size.unwrap_or(1))),
        };
        bytes += payload.len() as u64;
        let id = c
            .send(SendArgs {
                source: a.src.clone(),
                destination: a.dst.clone(),
                lifetime_ms: a.lifetime_ms,
                report_flags: flags,
                priority: a.priority,
                payload,
            })
            .with_context(|| format!("bundle {i} to {}", a.dst))?;
        if !a.quiet {
            println!("sent {id}");
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    eprintln!("sent {} bundles, {bytes} bytes in {secs:.3} s", a.count);
    Ok(())
}
