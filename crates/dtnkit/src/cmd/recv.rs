//! `dtnkit recv`: receive bundles for an endpoint, print or store them, acknowledge each.
//!
//! Survives node restarts: on a broken connection it reconnects (until `--timeout`) and
//! registers again; the client's de-duplication makes re-offered bundles invisible, so every
//! bundle is printed (and written) exactly once.
//!
//! ADUs larger than the node reassembles in memory arrive as fragments (their ids carry the
//! offset and the ADU's length); they are put together by [`super::recv_adu`] (written at their
//! offsets into one file per ADU, or hashed in order) and count, are printed and hashed as one
//! bundle once complete.

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
    /// Write each payload to this directory (one file per bundle, named after its id; an ADU
    /// delivered in fragments is written into one file as they arrive, `NAME.part` until
    /// complete).
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

/// File name for a bundle id (for a fragment delivered on its own: its ADU's name).
fn adu_file_name(id: &client::BundleId) -> String {
    file_name(&client::BundleId {
        fragment: None,
        ..id.clone()
    })
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
    let mut fragments = 0u64;
    let mut adus = super::recv_adu::Assembler::new(a.out_dir.clone(), a.hash);
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
        deadline = idle.map(|t| Instant::now() + t);
        // A fragment of an ADU the node delivers piece by piece.
        if let Some((offset, total)) =
            r.id.fragment
                .filter(|&(_, total)| r.payload.len() as u64 != total)
        {
            let adu = (r.id.source.clone(), r.id.creation_ms, r.id.sequence);
            let done = adus
                .add(&adu, &adu_file_name(&r.id), offset, total, &r.payload)
                .with_context(|| format!("fragment {}", r.id))?;
            // Written: the node may delete the fragment.
            let _ = c.ack(&r);
            let id = r.id.clone();
            c.recycle(r);
            fragments += 1;
            let Some(done) = done else {
                continue;
            };
            let whole = client::BundleId {
                fragment: None,
                ..id
            };
            let mut line = format!("recv {whole} len={}", done.len);
            if let Some(h) = done.sha256 {
                line.push_str(" sha256=");
                line.push_str(&h);
            }
            let mut o = out.lock();
            writeln!(o, "{line}")?;
            o.flush()?;
            n += 1;
            bytes += done.len;
            continue;
        }
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
        c.recycle(r);
    }
    let pieces = if fragments > 0 {
        format!(", {fragments} of them in fragments delivered one by one")
    } else {
        String::new()
    };
    eprintln!(
        "received {n} bundles{pieces}, {bytes} bytes in {:.3} s ({} duplicates skipped)",
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
