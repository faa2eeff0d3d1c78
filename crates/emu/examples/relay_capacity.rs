//! Relay capacity probe with efficient endpoints: a paced GSO sender and a `recvmmsg` receiver, either directly
//! connected or through the emulator relay (no model losses), so the relay is measured rather than the endpoints.
//!
//! `cargo run --release -p emu --example relay_capacity -- [relay|direct] [Mb/s] [seconds] [size]`
//!
//! Environment: `NO_GSO=1` sends datagram by datagram (`sendmmsg`), `NO_GRO=1` turns the relay's GRO receive off,
//! `RELAY_SOCKET_BUFFER=bytes` sets the relay's socket buffers. The loss line says how much of the loss happened
//! at the receiving socket; the relay line gives the kernel drops at the relay's input and the relay's CPU use.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use channel::{DirectionModel, Link};
use emu::relay::{Relay, RelaySettings};
use udpio::{RecvBatch, RecvMeta, SendBatch};

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("relay", String::as_str).to_string();
    let mbps: f64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1200.0);
    let secs: f64 = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(5.0);
    let size: usize = args.get(4).and_then(|v| v.parse().ok()).unwrap_or(1024);

    let any = "127.0.0.1:0".parse().map_err(std::io::Error::other)?;
    let (a, _) = udpio::bind(any, 32 << 20)?;
    let (b, _) = udpio::bind(any, 32 << 20)?;
    let relay = if mode == "relay" {
        let mut settings = RelaySettings::new(any, any, Some(a.local_addr()?), b.local_addr()?);
        if let Some(bytes) = std::env::var("RELAY_SOCKET_BUFFER")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            settings.socket_buffer_bytes = bytes;
        }
        settings.gro = std::env::var("NO_GRO").is_err();
        let link = Link::new(DirectionModel::default(), DirectionModel::default(), 0);
        Some(Relay::start(&settings, link, None)?)
    } else {
        None
    };
    let target = relay.as_ref().map_or(b.local_addr()?, |r| r.local_a());

    let received = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let rx = {
        let (b, received, done) = (b.try_clone()?, received.clone(), done.clone());
        std::thread::spawn(move || -> std::io::Result<()> {
            let mut recv = RecvBatch::new(64);
            let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 2048]).collect();
            let mut meta = [RecvMeta::default(); 64];
            while !done.load(Ordering::Relaxed) {
                if udpio::wait_readable(&b, Duration::from_millis(20))? {
                    let n = recv.recv(&b, &mut bufs, &mut meta)?;
                    received.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            Ok(())
        })
    };

    let payload = vec![0x5au8; size];
    let chunk: Vec<&[u8]> = vec![&payload; 32];
    let mut send = SendBatch::new(64);
    send.set_gso(std::env::var("NO_GSO").is_err());
    let pps = mbps * 1e6 / (8.0 * size as f64);
    let start = Instant::now();
    let mut sent: u64 = 0;
    while start.elapsed().as_secs_f64() < secs {
        let due = (start.elapsed().as_secs_f64() * pps) as u64;
        if sent < due {
            let n = ((due - sent) as usize).min(chunk.len());
            let out = send.send(&a, &chunk[..n], target)?;
            sent += out.sent as u64;
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::Relaxed);
    rx.join()
        .map_err(|_| std::io::Error::other("receiver panicked"))??;
    let got = received.load(Ordering::Relaxed);
    let receiver_drops = udpio::socket_drops(&b)?.unwrap_or(0);
    println!(
        "{mode}: offered {:.1} Mb/s ({sent} x {size} B in {elapsed:.2} s), received {got} ({:.1} Mb/s), lost {} ({:.3} %), \
         of which at the receiving socket {receiver_drops}",
        sent as f64 * size as f64 * 8.0 / elapsed / 1e6,
        got as f64 * size as f64 * 8.0 / elapsed / 1e6,
        sent.saturating_sub(got),
        100.0 * sent.saturating_sub(got) as f64 / sent.max(1) as f64
    );
    if let Some(r) = relay {
        let s = r.stop()?;
        println!(
            "relay forward: received {} sent {} kernel drops at the relay's input {} relay drops {} (overflow {}, \
             send errors {}); relay threads CPU {:.1} % of a core, {:.0} ns per datagram",
            s.forward.received,
            s.forward.sent,
            s.forward.kernel_drops,
            s.forward.relay_drops(),
            s.forward.overflow,
            s.forward.send_errors,
            s.forward.cpu_ns as f64 / s.elapsed_ns.max(1) as f64 * 100.0,
            s.forward.cpu_ns as f64 / s.forward.received.max(1) as f64
        );
    }
    Ok(())
}
