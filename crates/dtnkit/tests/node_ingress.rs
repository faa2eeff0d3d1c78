//! Deliveries under heavy ingress (issue 16): a peer that pipelines TCPCL transfers into a
//! `dtnkit node` (as HDTN's bpgen does, 50 transfers unacknowledged) must not hold back the
//! deliveries to the application that registered the destination, and when that application
//! reads more slowly than the peer sends, back-pressure must reach the peer (the node stops
//! reading the session) before the store fills with undelivered bundles.
//!
//! The peer is a pipelining TCPCLv4 sender in this process: the `tcpcl` crate's sans-IO session
//! over a plain socket, sending pre-built bundles as fast as the node acknowledges them.

mod node_support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bpv7::{BundleBuilder, CreationTimestamp, Eid};
use bytes::Bytes;
use client::Client;
use node_support::*;
use tcpcl::{Event, Role, Session, SessionConfig};

const LIMIT: Duration = Duration::from_secs(90);
/// Transfers the peer keeps unacknowledged (HDTN bpgen's `maxNumberOfBundlesInPipeline`).
const PIPELINE: usize = 50;

/// DTN time now (ms since 2000-01-01).
fn dtn_now_ms() -> u64 {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    unix.saturating_sub(946_684_800_000)
}

/// Bundle `i` of the run: from `ipn:9.1` to `ipn:2.1`, its index in the first 8 payload bytes.
fn bundle(i: u64, size: usize, created: u64) -> Bytes {
    let mut payload = i.to_be_bytes().to_vec();
    payload.resize(size, (i % 251) as u8);
    let b = BundleBuilder::new(Eid::ipn(9, 1), Eid::ipn(2, 1))
        .creation(CreationTimestamp::new(created, i))
        .lifetime_ms(3_600_000)
        .payload(payload)
        .build()
        .unwrap();
    Bytes::from(b.encode())
}

/// What the pipelining peer saw.
struct PeerRun {
    acked: u64,
    refused: u64,
}

/// A TCPCLv4 peer (node 9) that connects to `port` and sends `count` bundles of `size` bytes
/// with up to [`PIPELINE`] transfers unacknowledged, counting acknowledgments in `acked`.
fn pipelining_peer(port: u16, count: u64, size: usize, acked: Arc<AtomicU64>) -> PeerRun {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(2)))
        .unwrap();
    stream.set_write_timeout(Some(LIMIT)).unwrap();
    let start = Instant::now();
    let mut cfg = SessionConfig::new("ipn:9.0");
    cfg.max_queued_transfers = PIPELINE;
    cfg.max_segment_size = 1 << 20;
    let mut s = Session::new(Role::Active, cfg, start.elapsed());
    let created = dtn_now_ms();
    let mut next = 0u64;
    let mut refused = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    let mut out = Vec::new();
    let deadline = start + LIMIT;
    while acked.load(Relaxed) + refused < count {
        assert!(
            Instant::now() < deadline,
            "peer: transfers not acknowledged in time"
        );
        let now = start.elapsed();
        while s.is_established() && next < count {
            match s.send_bundle(bundle(next, size, created), next) {
                Ok(_) => next += 1,
                Err(tcpcl::SendError::QueueFull) => break,
                Err(e) => panic!("send_bundle: {e:?}"),
            }
        }
        out.clear();
        while s.poll_transmit(now, &mut out) > 0 {
            // Blocks while the node does not read: that is the back-pressure under test.
            stream.write_all(&out).unwrap();
            out.clear();
        }
        match stream.read(&mut buf) {
            Ok(0) => panic!("node closed the session"),
            Ok(n) => s.handle_input(start.elapsed(), &buf[..n]).unwrap(),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("read: {e}"),
        }
        let now = start.elapsed();
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        while let Some(ev) = s.poll_event() {
            match ev {
                Event::TransferAcked { .. } => {
                    acked.fetch_add(1, Relaxed);
                }
                Event::TransferRefused { .. } | Event::TransferFailed { .. } => refused += 1,
                Event::Terminated { .. } => panic!("session terminated"),
                _ => {}
            }
        }
    }
    PeerRun {
        acked: acked.load(Relaxed),
        refused,
    }
}

/// Node 2: TCPCL listener, node 9 a configured accept-only neighbour, a delivery backlog limit.
fn receiver(dir: &TempDir, listen: u16, backlog_bytes: u64) -> NodeProc {
    let mut spec = NodeSpec::new(2, free_port());
    spec.extra = format!(
        "\n[bp]\ndelivery_backlog_bytes = {backlog_bytes}\n\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\n\n[[tcp_peer]]\npeer = 9\n"
    );
    NodeProc::start(&dir.0, &spec)
}

/// An application on node 2 reading `ipn:2.1`: counts deliveries in `delivered`, reads only
/// while `reading` is set, and checks every index arrives exactly once.
fn application(
    socket: std::path::PathBuf,
    count: u64,
    delivered: Arc<AtomicU64>,
    reading: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let mut c = Client::connect(&socket).unwrap();
    c.register("ipn:2.1").unwrap();
    std::thread::spawn(move || {
        let mut seen = vec![false; count as usize];
        let deadline = Instant::now() + LIMIT;
        while delivered.load(Relaxed) < count {
            assert!(Instant::now() < deadline, "deliveries did not complete");
            if !reading.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            let Some(r) = c.recv(Some(Duration::from_millis(100))).unwrap() else {
                continue;
            };
            let mut idx = [0u8; 8];
            idx.copy_from_slice(&r.payload[..8]);
            let i = u64::from_be_bytes(idx) as usize;
            assert!(!seen[i], "bundle {i} delivered twice");
            seen[i] = true;
            c.ack(&r).unwrap();
            delivered.fetch_add(1, Relaxed);
        }
    })
}

/// With an application that keeps up, deliveries go on *during* the pipelined ingress: at every
/// moment the bundles the node has acknowledged to the peer and not yet delivered stay within
/// the delivery backlog limit plus what one turn of reading can add. (Before issue 16 the agent
/// drained its input channel to the end before delivering anything, so while a fast peer kept
/// it non-empty nothing was delivered.)
#[test]
fn deliveries_keep_pace_with_pipelined_tcpcl_ingress() {
    const N: u64 = 800;
    const SIZE: usize = 200_000;
    const BACKLOG: u64 = 8_000_000;
    let dir = TempDir::new("ingress-fair");
    let listen = free_tcp_port();
    let node = receiver(&dir, listen, BACKLOG);
    let delivered = Arc::new(AtomicU64::new(0));
    let app = application(
        node.socket.clone(),
        N,
        delivered.clone(),
        Arc::new(AtomicBool::new(true)),
    );
    let acked = Arc::new(AtomicU64::new(0));
    let peer = {
        let acked = acked.clone();
        std::thread::spawn(move || pipelining_peer(listen, N, SIZE, acked))
    };
    // Lag = acknowledged to the peer (stored) but not delivered yet.
    let mut max_lag = 0u64;
    let mut samples = Vec::new();
    let t0 = Instant::now();
    while !peer.is_finished() {
        let (a, d) = (acked.load(Relaxed), delivered.load(Relaxed));
        max_lag = max_lag.max(a.saturating_sub(d));
        samples.push((t0.elapsed().as_millis(), a, d));
        std::thread::sleep(Duration::from_millis(10));
    }
    let run = peer.join().unwrap();
    let at_end = delivered.load(Relaxed);
    app.join().unwrap();
    eprintln!(
        "{N} x {SIZE} B, pipeline {PIPELINE}: max lag {max_lag} bundles, {at_end} delivered when the \
         peer got its last ack, {:.2} s; samples (ms, acked, delivered) every ~10 ms: {:?}",
        t0.elapsed().as_secs_f64(),
        samples.iter().step_by(10).collect::<Vec<_>>()
    );
    assert_eq!((run.acked, run.refused), (N, 0));
    // The backlog limit (40 bundles) plus one turn of session reads (16 MiB: 84 bundles) plus
    // the peer's pipeline: anything near N means deliveries waited for the ingress to end.
    let bound = BACKLOG / SIZE as u64 + (16 << 20) / SIZE as u64 + PIPELINE as u64;
    assert!(
        max_lag <= bound,
        "delivery lag reached {max_lag} bundles (bound {bound})"
    );
    let st = node.status();
    assert_eq!(st.bundles.delivered, N);
    assert_eq!(st.bundles.refused_store_full, 0);
}

/// An application that stops reading: the node stops reading the peer's session once the
/// undelivered bundles exceed `[bp] delivery_backlog_bytes` (the peer's transfers stay
/// unacknowledged, so it stops sending), the store holds no more than that plus what was in
/// flight, and once the application reads again every bundle arrives exactly once.
#[test]
fn back_pressure_reaches_the_peer_before_the_store_fills() {
    const N: u64 = 500;
    const SIZE: usize = 200_000;
    const BACKLOG: u64 = 8_000_000;
    let dir = TempDir::new("ingress-backpressure");
    let listen = free_tcp_port();
    let node = receiver(&dir, listen, BACKLOG);
    let delivered = Arc::new(AtomicU64::new(0));
    let reading = Arc::new(AtomicBool::new(false));
    let app = application(node.socket.clone(), N, delivered.clone(), reading.clone());
    let acked = Arc::new(AtomicU64::new(0));
    let peer = {
        let acked = acked.clone();
        std::thread::spawn(move || pipelining_peer(listen, N, SIZE, acked))
    };
    // The node pauses its ingress ...
    let deadline = Instant::now() + LIMIT;
    loop {
        let st = node.status();
        if st.ingress.paused {
            break;
        }
        assert!(
            Instant::now() < deadline && !peer.is_finished(),
            "ingress never paused although nobody reads: {st}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // ... and the peer's acknowledgments stop: it is held back, not the store filled.
    let mut last = acked.load(Relaxed);
    let mut still_since = Instant::now();
    while still_since.elapsed() < Duration::from_millis(500) {
        std::thread::sleep(Duration::from_millis(50));
        let now = acked.load(Relaxed);
        if now != last {
            (last, still_since) = (now, Instant::now());
        }
        assert!(
            Instant::now() < deadline,
            "the peer kept being acknowledged"
        );
    }
    let st = node.status();
    let stored = st.store.bytes;
    eprintln!("paused: {last} of {N} acknowledged, {stored} bytes stored: {st}");
    // The limit, plus the bundles of one turn of session reads and of the transfers the
    // session had completed when the pause began.
    let bound = BACKLOG + (16 << 20) + PIPELINE as u64 * SIZE as u64;
    assert!(stored <= bound, "{stored} bytes stored (bound {bound})");
    assert!(
        last * SIZE as u64 <= bound,
        "{last} of {N} bundles taken while nobody read"
    );
    assert!(st.ingress.pauses >= 1);
    // The application reads again: everything arrives, once.
    reading.store(true, Relaxed);
    let run = peer.join().unwrap();
    app.join().unwrap();
    assert_eq!((run.acked, run.refused), (N, 0));
    // The application's last acknowledgments reach the agent a moment after it got the bundles.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut st = node.status();
    while st.bundles.delivered != N && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        st = node.status();
    }
    assert_eq!(st.bundles.delivered, N);
    assert_eq!(st.bundles.refused_store_full, 0);
    assert!(!st.ingress.paused);
}

/// The same gate over LTP: node 1 forwards 200 kB bundles to node 2, whose application has
/// registered but does not read. Once the undelivered bundles exceed the limit, node 2 refuses
/// new import sessions (counted in `ltp.imports_refused.paused`; node 1's checkpoint timers retry
/// them), takes no more bundles, and its store stays within the limit plus its import budget;
/// when an application reads again every bundle arrives exactly once and node 1's store drains.
#[test]
fn ltp_ingress_pauses_by_refusing_imports_and_resumes() {
    const N: u64 = 120;
    const SIZE: usize = 200_000;
    const BACKLOG: u64 = 4_000_000;
    const IMPORT_BUDGET: u64 = 4 << 20;
    let dir = TempDir::new("ingress-ltp");
    let (p1, p2) = (free_port(), free_port());
    let mut s1 = NodeSpec::new(1, p1);
    s1.spans.push((2, p2));
    let mut s2 = NodeSpec::new(2, p2);
    s2.spans.push((1, p1));
    s2.extra = format!(
        "\n[bp]\ndelivery_backlog_bytes = {BACKLOG}\n\n[ltp]\nmax_import_bytes = {IMPORT_BUDGET}\n"
    );
    let n1 = NodeProc::start(&dir.0, &s1);
    let n2 = NodeProc::start(&dir.0, &s2);
    // Registered, never reading: deliveries stay unacknowledged.
    let mut idle_app = Client::connect(&n2.socket).unwrap();
    idle_app.register("ipn:2.1").unwrap();
    send_ok(&n1.socket, "ipn:2.1", SIZE, N, &["--window", "64"]);
    let deadline = Instant::now() + LIMIT;
    loop {
        let st = n2.status();
        if st.ingress.paused {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ingress never paused although nobody reads: {st}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Paused: after the sessions open at the pause complete, node 2 takes nothing more while
    // node 1 keeps retrying (its checkpoint timers), and counts the refusals.
    let mut last = n2.status().bundles.received;
    let mut still_since = Instant::now();
    while still_since.elapsed() < Duration::from_millis(1000) {
        std::thread::sleep(Duration::from_millis(50));
        let now = n2.status().bundles.received;
        if now != last {
            (last, still_since) = (now, Instant::now());
        }
        assert!(Instant::now() < deadline, "node 2 kept taking bundles");
    }
    let st2 = n2.status();
    let stored = st2.store.bytes;
    eprintln!("paused: {last} of {N} received, {stored} bytes stored: {st2}");
    assert!(last < N, "every bundle taken while nobody read");
    assert!(st2.ingress.paused);
    assert!(st2.ltp.imports_refused.paused > 0, "{st2}");
    // The limit, plus what the import budget let in while the gate closed (one bundle over).
    let bound = BACKLOG + IMPORT_BUDGET + 2 * SIZE as u64;
    assert!(stored <= bound, "{stored} bytes stored (bound {bound})");
    assert!(n1.status().bundles.forwarded < N);
    // An application reads: the gate opens, node 1's retries get through, all arrive once.
    drop(idle_app);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", N);
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let ids: std::collections::HashSet<&str> = text
        .lines()
        .map(|l| l.split(" len=").next().unwrap())
        .collect();
    assert_eq!(ids.len() as u64, N, "every bundle exactly once");
    let deadline = Instant::now() + LIMIT;
    while n1.status().store.bundles != 0 {
        assert!(
            Instant::now() < deadline,
            "node 1 kept bundles: {}",
            n1.status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let st2 = n2.status();
    assert_eq!(st2.bundles.delivered, N);
    assert!(!st2.ingress.paused);
    assert!(st2.ingress.pauses >= 1);
}
