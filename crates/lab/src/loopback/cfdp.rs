//! `transfer.method = "cfdp"`: one CFDP class-2 put over BP through the chain instead of a stream of bundles
//! (seed 002 Figs 4.13-4.18): `dtnkit cfdp serve` at the destination node and `dtnkit cfdp put` at the source,
//! one File Data PDU of `bundle_bytes` per bundle (docs/cfdp.md), both pinned like the nodes in single-core mode.
//! Goodput is the put's own: file bytes × 8 / (put → the receiver's Finished).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::emulated::io;
use crate::procs::Child;
use crate::LabError;

use super::scenario::LoopbackScenario;
use super::stream::{RecvReport, SendReport};

/// What the put reported, as one stream's sender and receiver accounts.
pub(crate) fn run(
    sc: &LoopbackScenario,
    dtnkit: &Path,
    work: &Path,
    (src, dst): (u64, u64),
    (src_socket, dst_socket): (&Path, &Path),
    cpu: Option<usize>,
    deadline: Instant,
) -> Result<(SendReport, RecvReport), LabError> {
    let bytes = sc.transfer.bytes.unwrap_or(0);
    let file = work.join("cfdp-src.bin");
    write_file(&file, bytes)?;
    let rx_root = work.join("cfdp-rx");
    std::fs::create_dir_all(&rx_root).map_err(io(format!("creating {}", rx_root.display())))?;
    let spawn = |name: &str, args: &[&str]| match cpu {
        Some(c) => Child::spawn_pinned(name, dtnkit, args, work, c),
        None => Child::spawn(name, dtnkit, args, work),
    };
    let (dst_id, src_id) = (dst.to_string(), src.to_string());
    let mut serve = spawn(
        "cfdp-serve",
        &[
            "cfdp",
            "serve",
            "--root",
            &rx_root.to_string_lossy(),
            "--id",
            &dst_id,
            "--node",
            &dst_socket.to_string_lossy(),
            "--count",
            "1",
            "--json",
        ],
    )?;
    serve.wait_for(
        Duration::from_secs(20),
        Duration::from_millis(10),
        "no ready line",
        |c| {
            std::fs::read_to_string(&c.stdout)
                .ok()
                .filter(|t| t.contains("\"ready\""))
                .map(drop)
        },
    )?;
    let limit = deadline.saturating_duration_since(Instant::now());
    let segment = sc.transfer.bundle_bytes.to_string();
    let timeout = format!("{:.3}", limit.as_secs_f64());
    let started = Instant::now();
    let mut put = spawn(
        "cfdp-put",
        &[
            "cfdp",
            "put",
            &file.to_string_lossy(),
            &format!("{dst}:dst.bin"),
            "--id",
            &src_id,
            "--node",
            &src_socket.to_string_lossy(),
            "--segment-size",
            &segment,
            "--checksum",
            &sc.cfdp.checksum,
            "--quiet",
            "--json",
            "--timeout-s",
            &timeout,
        ],
    )?;
    // The put ends by itself at its own timeout; the bound here only adds a margin for its shutdown.
    put.wait_exit(limit + Duration::from_secs(10));
    let finished = Instant::now();
    put.stop(Duration::from_secs(1));
    serve.stop(Duration::from_secs(2));
    let text = std::fs::read_to_string(&put.stdout).unwrap_or_default();
    let report: serde_json::Value = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| LabError::Startup {
            name: "cfdp put".into(),
            reason: format!("no JSON summary: {}", put.stderr_tail(2000)),
        })?;
    let complete = report["delivery_complete"].as_bool() == Some(true);
    let received = std::fs::metadata(rx_root.join("dst.bin")).map_or(0, |m| m.len());
    let delivered = if complete && received == bytes {
        bytes
    } else {
        0
    };
    let seconds = report["seconds"].as_f64().unwrap_or(f64::NAN);
    let last = Duration::try_from_secs_f64(seconds).map_or(finished, |d| started + d);
    Ok((
        SendReport {
            first_submit: Some(started),
            bundles: 1,
            bytes,
            cpu_s: f64::NAN,
        },
        RecvReport {
            bundles: u64::from(delivered == bytes),
            bytes: delivered,
            last_delivery: Some(last),
            cpu_s: f64::NAN,
        },
    ))
}

/// Writes `bytes` of a non-constant pattern (so a checksum has work to do).
fn write_file(path: &Path, bytes: u64) -> Result<(), LabError> {
    let f = std::fs::File::create(path).map_err(io(format!("creating {}", path.display())))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let block: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        w.write_all(&block[..n])
            .map_err(io(format!("writing {}", path.display())))?;
        left -= n as u64;
    }
    w.flush().map_err(io(format!("writing {}", path.display())))
}
