//! `dtnkit recv`: receive bundles for an endpoint, print or store them, acknowledge each.
//!
//! Survives node restarts: on a broken connection it reconnects (until `--timeout`) and
//! registers again; the client's de-duplication makes re-offered bundles invisible, so every
//! bundle is printed (and written) exactly once.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use client::{Client, ClientError};
use sha2::{Digest, Sha256};

/// Arguments of `dtnkit recv`.
#[derive(Args)]
pub struct RecvArgs {
    /// The node's application socket.
    #[arg(long)]
    socket: PathBuf,
    /// Endpoint to register (`ipn:2.1`).
    #[arg(long)]
    endpoint: String,
    /// Stop after this many bundles.
    #[arg(long)]
    count: Option<u64>,
    /// Write each payload to this directory (one file per bundle, named after its id).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Stop when nothing arrived for this many seconds (default: wait forever).
    #[arg(long)]
    timeout: Option<f64>,
    /// Print the SHA-256 of each payload.
    #[arg(long)]
    hash: bool,
    /// Print payloads as text.
    #[arg(long)]
    print: bool,
}

/// File name for a bundle id.
fn file_name(id: &client::BundleId) -> String {
    let src: String = id
        .source
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    match id.fragment {
        Some((o, _)) => format!("{src}-{}-{}-{o}.bin", id.creation_ms, id.sequence),
        None => format!("{src}-{}-{}.bin", id.creation_ms, id.sequence),
    }
}

fn connect(a: &RecvArgs, deadline: Option<Instant>) -> anyhow::Result<Client> {
    loop {
        match Client::connect(&a.socket).and_then(|mut c| c.register(&a.endpoint).map(|_| c)) {
            Ok(c) => return Ok(c),
            Err(ClientError::Refused { kind, message }) => {
                anyhow::bail!("registering {}: {kind}: {message}", a.endpoint)
            }
            Err(e) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(e).with_context(|| format!("connecting to {}", a.socket.display()));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Receives until the count or the idle timeout.
pub fn run(a: RecvArgs) -> anyhow::Result<()> {
    if let Some(d) = &a.out_dir {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let idle = a.timeout.map(Duration::from_secs_f64);
    let mut deadline = idle.map(|t| Instant::now() + t);
    let mut c = connect(&a, deadline)?;
    let (mut n, mut bytes) = (0u64, 0u64);
    let out = std::io::stdout();
    let t0 = Instant::now();
    while a.count.is_none_or(|k| n < k) {
        let wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if wait == Some(Duration::ZERO) {
            break;
        }
        let r = match c.recv(wait) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(ClientError::Io(_)) => {
                // The node went away (restart): reconnect, keeping the de-duplication memory.
                loop {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        anyhow::bail!("node socket {} unreachable", a.socket.display());
                    }
                    if c.reconnect().is_ok() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(d) = &a.out_dir {
            let p = d.join(file_name(&r.id));
            std::fs::write(&p, &r.payload).with_context(|| format!("writing {}", p.display()))?;
        }
        let mut line = format!("recv {} len={}", r.id, r.payload.len());
        if a.hash {
            let h = Sha256::digest(&r.payload);
            line.push_str(" sha256=");
            for b in h {
                line.push_str(&format!("{b:02x}"));
            }
        }
        if a.print {
            line.push(' ');
            line.push_str(&String::from_utf8_lossy(&r.payload));
        }
        {
            let mut o = out.lock();
            writeln!(o, "{line}")?;
            o.flush()?;
        }
        // Output is written: now the node may delete it.
        if c.ack(&r).is_err() {
            // The node restarts; it re-offers the bundle, which the de-duplication absorbs.
        }
        n += 1;
        bytes += r.payload.len() as u64;
        deadline = idle.map(|t| Instant::now() + t);
    }
    eprintln!(
        "received {n} bundles, {bytes} bytes in {:.3} s ({} duplicates skipped)",
        t0.elapsed().as_secs_f64(),
        c.duplicates_skipped()
    );
    if let Some(k) = a.count {
        if n < k {
            anyhow::bail!("received {n} of {k} bundles before the timeout");
        }
    }
    Ok(())
}
