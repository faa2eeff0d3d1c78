//! End-to-end relay tests through real UDP sockets on 127.0.0.1 (ephemeral ports, every wait bounded).

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use channel::{DirectionModel, ErasureTrace, Link, LossModel};
use emu::relay::{Relay, RelayHandle, RelaySettings};
use udpio::{RecvBatch, RecvMeta};

const MS: Duration = Duration::from_millis(1);

fn endpoint() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind endpoint");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    // The relay releases in bursts and this machine may be busy: give the endpoints room like a real receiver.
    udpio::set_buffers(&s, 32 << 20).expect("socket buffers");
    // Arrival times come from the kernel, so a test thread waiting for the CPU does not inflate measured delays.
    udpio::enable_rx_timestamps(&s).expect("timestamps");
    s
}

/// Wall-clock nanoseconds since the Unix epoch (the clock of kernel receive timestamps).
fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Receives one datagram (waiting at most 200 ms) with its kernel arrival time in wall-clock nanoseconds.
fn recv_stamped(sock: &UdpSocket, buf: &mut [u8]) -> Option<(usize, u64)> {
    if !udpio::wait_readable(sock, Duration::from_millis(200)).ok()? {
        return None;
    }
    let mut recv = RecvBatch::new(1);
    let mut meta = [RecvMeta::default(); 1];
    let n = recv.recv(sock, &mut [&mut *buf], &mut meta).ok()?;
    if n == 0 {
        return None;
    }
    let ts = meta[0]
        .timestamp
        .map_or_else(wall_ns, |t| t.as_nanos() as u64);
    Some((meta[0].len, ts))
}

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().expect("literal address")
}

fn start(
    a: Option<SocketAddr>,
    b: SocketAddr,
    fwd: DirectionModel,
    ret: DirectionModel,
) -> RelayHandle {
    let mut settings = RelaySettings::new(any(), any(), a, b);
    settings.slots = 4096;
    settings.max_datagram = 2048;
    // Where the test may use real-time scheduling (root, CAP_SYS_NICE), run the relay the way a busy host should;
    // elsewhere it runs with normal priority.
    if realtime_allowed() {
        settings.rt_priority = Some(5);
    }
    Relay::start(&settings, Link::new(fwd, ret, 1), None).expect("relay starts")
}

/// Whether this process may switch a thread to SCHED_FIFO (probed on a throwaway thread).
fn realtime_allowed() -> bool {
    std::thread::spawn(|| udpio::set_thread_realtime(1).is_ok())
        .join()
        .unwrap_or(false)
}

fn packet(seq: u64, sent_ns: u64) -> [u8; 64] {
    let mut p = [0u8; 64];
    p[..8].copy_from_slice(&seq.to_be_bytes());
    p[8..16].copy_from_slice(&sent_ns.to_be_bytes());
    p
}

fn fields(p: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_be_bytes(p.get(..8)?.try_into().ok()?);
    let sent = u64::from_be_bytes(p.get(8..16)?.try_into().ok()?);
    Some((seq, sent))
}

/// Starts receiving on a clone of `sock` in a thread before the test starts sending.
fn spawn_drain(
    sock: &UdpSocket,
    expected: usize,
    deadline: Duration,
) -> std::thread::JoinHandle<Vec<(u64, u64, u64)>> {
    let sock = sock.try_clone().expect("clone");
    std::thread::spawn(move || drain(&sock, expected, deadline))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Receives until `expected` datagrams arrived, the socket stays quiet for a read timeout after the first one, or
/// the deadline passes.
fn drain(sock: &UdpSocket, expected: usize, deadline: Duration) -> Vec<(u64, u64, u64)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    let until = Instant::now() + deadline;
    while got.len() < expected && Instant::now() < until {
        match recv_stamped(sock, &mut buf) {
            Some((n, now)) => {
                if let Some((seq, sent)) = buf.get(..n).and_then(fields) {
                    got.push((seq, sent, now));
                }
            }
            // Quiet for a whole read timeout after traffic started: everything that will come has come.
            None if !got.is_empty() => break,
            None => continue,
        }
    }
    got
}

#[test]
fn delay_is_applied_in_both_directions() {
    let a = endpoint();
    let b = endpoint();
    let delay = DirectionModel {
        delay: 10 * MS,
        ..Default::default()
    };
    // Endpoint A is learned from its traffic (no `a` configured), like an iperf3 client.
    let relay = start(None, b.local_addr().expect("addr"), delay.clone(), delay);
    let n = 200;
    let echo = std::thread::spawn({
        let b = b.try_clone().expect("clone");
        let relay_b = relay.local_b();
        move || {
            let mut one_way = Vec::new();
            let mut buf = [0u8; 2048];
            let until = Instant::now() + Duration::from_secs(10);
            while one_way.len() < n && Instant::now() < until {
                if let Some((len, now)) = recv_stamped(&b, &mut buf) {
                    if let Some((_, sent)) = buf.get(..len).and_then(fields) {
                        one_way.push((now - sent) as f64 / 1e6);
                        // Stamp the echo with its own send time: A measures the return one-way delay.
                        buf[8..16].copy_from_slice(&wall_ns().to_be_bytes());
                        let _ = b.send_to(&buf[..len], relay_b);
                    }
                }
            }
            one_way
        }
    });
    let back = spawn_drain(&a, n, Duration::from_secs(10));
    for i in 0..n as u64 {
        let sent = wall_ns();
        a.send_to(&packet(i, sent), relay.local_a()).expect("send");
        std::thread::sleep(Duration::from_millis(2));
    }
    let back = back.join().expect("drain thread");
    let mut one_way = echo.join().expect("echo thread");
    let summary = relay.stop().expect("clean stop");
    assert_eq!(one_way.len(), n, "forward deliveries; summary {summary:?}");
    assert_eq!(back.len(), n, "return deliveries; summary {summary:?}");
    let fwd = median(&mut one_way);
    let mut ret: Vec<f64> = back
        .iter()
        .map(|&(_, sent, now)| now.saturating_sub(sent) as f64 / 1e6)
        .collect();
    let ret = median(&mut ret);
    assert!(
        (fwd - 10.0).abs() < 0.5,
        "median forward one-way delay {fwd:.3} ms, expected 10 ± 0.5 ms"
    );
    assert!(
        (ret - 10.0).abs() < 0.5,
        "median return one-way delay {ret:.3} ms, expected 10 ± 0.5 ms"
    );
    assert_eq!(
        summary.forward.relay_drops() + summary.ret.relay_drops(),
        0,
        "{summary:?}"
    );
}

#[test]
fn iid_loss_rate_through_the_relay() {
    let a = endpoint();
    let b = endpoint();
    let per = 0.1;
    let fwd = DirectionModel {
        loss: LossModel::Iid { per },
        delay: MS,
        ..Default::default()
    };
    let relay = start(
        Some(a.local_addr().expect("addr")),
        b.local_addr().expect("addr"),
        fwd,
        DirectionModel::default(),
    );
    let n = 4000u64;
    let got = spawn_drain(&b, n as usize, Duration::from_secs(5));
    for i in 0..n {
        a.send_to(&packet(i, 0), relay.local_a()).expect("send");
        if i % 50 == 49 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let got = got.join().expect("drain thread");
    let summary = relay.stop().expect("clean stop");
    let received = got.len() as f64;
    let expected = n as f64 * (1.0 - per);
    let tol = 5.0 * (n as f64 * per * (1.0 - per)).sqrt();
    assert!(
        (received - expected).abs() < tol,
        "received {received}, expected {expected} ± {tol}"
    );
    // Every missing datagram is a model decision: nothing else was dropped.
    assert_eq!(summary.forward.received, n, "{summary:?}");
    assert_eq!(
        summary.forward.lost_channel + got.len() as u64,
        n,
        "{summary:?}"
    );
    assert_eq!(summary.forward.relay_drops(), 0, "{summary:?}");
    // The kernel drop counter is exposed and, at this paced rate, reads zero.
    assert_eq!(summary.forward.kernel_drops, 0, "{summary:?}");
    assert_eq!(summary.forward.unmodelled_drops(), 0, "{summary:?}");
}

/// Relay settings with a deliberately tiny input socket buffer (a few datagrams) and no GRO, so a burst overflows it
/// and every datagram is either received by the relay or counted as a kernel drop.
fn tiny_buffer_relay(b: SocketAddr) -> RelayHandle {
    let mut settings = RelaySettings::new(any(), any(), None, b);
    settings.slots = 4096;
    settings.max_datagram = 2048;
    settings.socket_buffer_bytes = 4096;
    settings.gro = false;
    Relay::start(
        &settings,
        Link::new(DirectionModel::default(), DirectionModel::default(), 1),
        None,
    )
    .expect("relay starts")
}

#[test]
fn kernel_drops_at_the_relay_input_are_counted_exactly() {
    let a = endpoint();
    let b = endpoint();
    let relay = tiny_buffer_relay(b.local_addr().expect("addr"));
    let n = 5000u64;
    // An unpaced burst of 1 KiB datagrams: far more than a few-KiB buffer holds between two relay reads.
    let payload = [0x42u8; 1024];
    for _ in 0..n {
        a.send_to(&payload, relay.local_a()).expect("send");
    }
    std::thread::sleep(Duration::from_millis(200));
    let summary = relay.stop().expect("clean stop");
    let f = summary.forward;
    // On loopback the only place these datagrams can vanish is the relay's input socket.
    assert_eq!(f.received + f.kernel_drops, n, "{summary:?}");
    assert!(
        f.kernel_drops > 0,
        "the burst never overflowed: {summary:?}"
    );
    assert_eq!(f.unmodelled_drops(), f.kernel_drops, "{summary:?}");
}

#[test]
fn gro_runs_are_split_into_datagrams_in_order_and_intact() {
    let a = endpoint();
    let b = endpoint();
    let relay = start(
        Some(a.local_addr().expect("addr")),
        b.local_addr().expect("addr"),
        DirectionModel::default(),
        DirectionModel::default(),
    );
    // GSO runs (one sendmsg each) that the relay's GRO socket receives coalesced; lengths differ per run and the
    // last datagram of a run is shorter, as GSO allows.
    let mut send = udpio::SendBatch::new(64);
    send.set_gso(true);
    let mut expected: Vec<Vec<u8>> = Vec::new();
    for run in 0..40usize {
        let size = 200 + run * 17;
        let count = 1 + run % 33;
        let dgrams: Vec<Vec<u8>> = (0..count)
            .map(|k| {
                let seq = expected.len() + k;
                let len = if k + 1 == count && count > 1 {
                    size / 2
                } else {
                    size
                };
                let mut d: Vec<u8> = (0..len).map(|x| (x * 31 + seq) as u8).collect();
                d[..4].copy_from_slice(&(seq as u32).to_be_bytes());
                d
            })
            .collect();
        let out = send.send(&a, &dgrams, relay.local_a()).expect("send");
        assert_eq!(out.sent, dgrams.len());
        expected.extend(dgrams);
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut buf = vec![0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < expected.len() && Instant::now() < deadline {
        if let Some((len, _)) = recv_stamped(&b, &mut buf) {
            got.push(buf[..len].to_vec());
        }
    }
    let summary = relay.stop().expect("clean stop");
    assert_eq!(got.len(), expected.len(), "{summary:?}");
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "datagram {i} differs");
    }
    assert_eq!(summary.forward.received, expected.len() as u64);
    assert_eq!(summary.forward.unmodelled_drops(), 0, "{summary:?}");
}

#[test]
fn trace_replay_in_step_with_timestamps() {
    let a = endpoint();
    let b = endpoint();
    // A 400 ms trace at 1 ms: erased during [60, 120) and [200, 250) ms; long enough not to loop in this test.
    let samples = (0..400).map(|ms| (60..120).contains(&ms) || (200..250).contains(&ms));
    let trace = Arc::new(ErasureTrace::from_samples(MS, samples).expect("trace"));
    let fwd = DirectionModel {
        loss: LossModel::Trace {
            trace: trace.clone(),
            offset: Duration::ZERO,
        },
        ..Default::default()
    };
    let relay = start(
        Some(a.local_addr().expect("addr")),
        b.local_addr().expect("addr"),
        fwd,
        DirectionModel::default(),
    );
    let epoch = relay.start_instant();
    let mut sent = Vec::new();
    let got = spawn_drain(&b, 300, Duration::from_secs(2));
    for i in 0..300u64 {
        let t = epoch.elapsed();
        if t > 380 * MS {
            break;
        }
        a.send_to(&packet(i, t.as_nanos() as u64), relay.local_a())
            .expect("send");
        sent.push((i, t));
        std::thread::sleep(Duration::from_micros(1200));
    }
    let got = got.join().expect("drain thread");
    let summary = relay.stop().expect("clean stop");
    let delivered: std::collections::HashSet<u64> = got.iter().map(|&(seq, _, _)| seq).collect();
    let mut checked = 0;
    for &(seq, t) in &sent {
        // Skip packets within 1 ms of a window edge: their relay arrival time may fall on either side.
        let near_edge = [60u64, 120, 200, 250]
            .iter()
            .any(|&e| t.abs_diff(MS * e as u32) < MS);
        if near_edge {
            continue;
        }
        checked += 1;
        let erased = trace.erased_at(t);
        assert_eq!(
            !delivered.contains(&seq),
            erased,
            "packet {seq} sent at {t:?}: erased {erased}"
        );
    }
    // ~300 packets at 1.2 ms intervals on an idle machine; far fewer when sleeps overrun on a busy one.
    assert!(checked >= 50, "only {checked} packets checked");
    assert_eq!(
        summary.forward.lost_channel as usize,
        sent.len() - got.len(),
        "{summary:?}"
    );
    // About 27 % of the send times fall in the erased windows.
    assert!(
        summary.forward.lost_channel >= 10 && got.len() >= 10,
        "{summary:?}"
    );
}
