//! One stream: a sender thread submitting bundles to the source node's application socket (a window of
//! unanswered sends, and a bound on bytes submitted but not yet delivered) and a receiver thread taking them at
//! the destination, both in this process.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::bytes::Bytes;
use client::{Client, SendArgs};

use super::procstat;

/// What the sender and the receiver share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Bundles the source node stored (answered `SendOk`).
    pub stored: AtomicU64,
    /// Payload bytes submitted.
    pub submitted_bytes: AtomicU64,
    /// Payload bytes delivered.
    pub delivered_bytes: AtomicU64,
    /// The sender has finished: `stored` is final.
    pub sender_done: AtomicBool,
    /// Stop everything now (time limit or an error elsewhere).
    pub abort: AtomicBool,
}

/// How a stream runs.
#[derive(Debug, Clone)]
pub(crate) struct StreamPlan {
    pub source: u64,
    pub destination: u64,
    pub source_socket: PathBuf,
    pub bundle_bytes: usize,
    /// Bytes to send, or None: send until `send_for` passed.
    pub bytes: Option<u64>,
    pub send_for: Duration,
    pub window: usize,
    pub in_flight_bytes: u64,
    pub deadline: Instant,
    pub idle: Duration,
    /// Pin both threads to this CPU.
    pub cpu: Option<usize>,
}

/// The sender's account.
#[derive(Debug, Clone, Default)]
pub(crate) struct SendReport {
    pub first_submit: Option<Instant>,
    pub bundles: u64,
    pub bytes: u64,
    pub cpu_s: f64,
}

/// The receiver's account.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecvReport {
    pub bundles: u64,
    pub bytes: u64,
    pub last_delivery: Option<Instant>,
    pub cpu_s: f64,
}

fn pin(cpu: Option<usize>) -> Result<(), String> {
    match cpu {
        Some(c) => procstat::pin_current_thread(c).map_err(|e| format!("pinning to CPU {c}: {e}")),
        None => Ok(()),
    }
}

/// Submits the stream's bundles; returns once every submitted bundle is answered.
pub(crate) fn send(p: &StreamPlan, sh: &Shared) -> Result<SendReport, String> {
    pin(p.cpu)?;
    let mut tx = Client::connect(&p.source_socket)
        .map_err(|e| format!("connecting to node {}: {e}", p.source))?;
    let payload = Bytes::from(vec![0x5au8; p.bundle_bytes]);
    let mut r = SendReport::default();
    let start = Instant::now();
    let result = (|| -> Result<(), String> {
        loop {
            if sh.abort.load(Ordering::Relaxed) || Instant::now() >= p.deadline {
                break;
            }
            let len = match p.bytes {
                Some(total) if r.bytes >= total => break,
                Some(total) => (total - r.bytes).min(p.bundle_bytes as u64) as usize,
                None if start.elapsed() >= p.send_for => break,
                None => p.bundle_bytes,
            };
            // Bytes submitted and not delivered: wait (bounded by the deadline) while the path holds enough.
            while p.in_flight_bytes > 0
                && r.bytes
                    .saturating_sub(sh.delivered_bytes.load(Ordering::Relaxed))
                    >= p.in_flight_bytes
                && !sh.abort.load(Ordering::Relaxed)
                && Instant::now() < p.deadline
            {
                if tx.pending_sends() > 0 {
                    tx.next_send_result()
                        .map_err(|e| format!("node {}: {e}", p.source))?;
                    sh.stored.fetch_add(1, Ordering::Relaxed);
                } else {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            r.first_submit.get_or_insert_with(Instant::now);
            tx.submit(SendArgs {
                source: format!("ipn:{}.1", p.source),
                destination: format!("ipn:{}.1", p.destination),
                lifetime_ms: 3_600_000,
                report_flags: 0,
                priority: 1,
                payload: payload.slice(..len),
            })
            .map_err(|e| format!("node {}: {e}", p.source))?;
            r.bundles += 1;
            r.bytes += len as u64;
            sh.submitted_bytes.store(r.bytes, Ordering::Relaxed);
            if tx.pending_sends() >= p.window {
                tx.next_send_result()
                    .map_err(|e| format!("node {}: {e}", p.source))?;
                sh.stored.fetch_add(1, Ordering::Relaxed);
            }
        }
        while tx.pending_sends() > 0 {
            tx.next_send_result()
                .map_err(|e| format!("node {}: {e}", p.source))?;
            sh.stored.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    })();
    r.cpu_s = procstat::thread_cpu_seconds();
    sh.sender_done.store(true, Ordering::Release);
    result.map(|()| r)
}

/// Takes deliveries until every stored bundle arrived, nothing arrived for `idle` after the sender finished,
/// or the deadline.
pub(crate) fn receive(p: &StreamPlan, sh: &Shared, rx: &mut Client) -> Result<RecvReport, String> {
    pin(p.cpu)?;
    let mut r = RecvReport::default();
    let mut last_progress = Instant::now();
    loop {
        let now = Instant::now();
        if now >= p.deadline || sh.abort.load(Ordering::Relaxed) {
            break;
        }
        if sh.sender_done.load(Ordering::Acquire) {
            if r.bundles >= sh.stored.load(Ordering::Relaxed) {
                break;
            }
            if now.duration_since(last_progress) >= p.idle {
                break;
            }
        }
        match rx.recv(Some((p.deadline - now).min(Duration::from_millis(100)))) {
            Ok(Some(d)) => {
                let t = Instant::now();
                r.last_delivery = Some(t);
                last_progress = t;
                r.bundles += 1;
                r.bytes += d.payload.len() as u64;
                sh.delivered_bytes.store(r.bytes, Ordering::Relaxed);
                rx.ack(&d)
                    .map_err(|e| format!("node {}: {e}", p.destination))?;
                // The next large delivery is read into this one's memory (`Client::recycle`),
                // as `dtnkit recv` and the perf server do.
                rx.recycle(d);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("node {}: {e}", p.destination)),
        }
    }
    r.cpu_s = procstat::thread_cpu_seconds();
    Ok(r)
}

/// Runs the sender and the receiver of one stream on two threads; `rx` is registered already.
pub(crate) fn run(
    p: StreamPlan,
    mut rx: Client,
    abort: Arc<AtomicBool>,
) -> Result<(SendReport, RecvReport), String> {
    let sh = Shared::default();
    let result = std::thread::scope(|s| {
        let watch = s.spawn(|| {
            // Relays an outside abort (another stream failed) to both threads; ends with the stream.
            while !sh.abort.load(Ordering::Relaxed) {
                if abort.load(Ordering::Relaxed) {
                    sh.abort.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let sender = s.spawn(|| {
            let r = send(&p, &sh);
            if r.is_err() {
                sh.abort.store(true, Ordering::Relaxed);
            }
            r
        });
        let received = receive(&p, &sh, &mut rx);
        if received.is_err() {
            sh.abort.store(true, Ordering::Relaxed);
        }
        let sent = sender
            .join()
            .unwrap_or_else(|_| Err("the sender thread panicked".into()));
        sh.abort.store(true, Ordering::Relaxed);
        let _ = watch.join();
        (sent, received)
    });
    match result {
        (Ok(s), Ok(r)) => Ok((s, r)),
        (Err(e), _) | (_, Err(e)) => {
            abort.store(true, Ordering::Relaxed);
            Err(e)
        }
    }
}
