//! Issue 19: a node that degrades gracefully under full disks, full neighbours, floods and hostile
//! peers. Each test reproduces one fault on real `dtnkit node` processes and checks the node stays
//! usable, bounded (CPU, memory, log lines) and loses nothing it acknowledged. Every wait is bounded.

mod node_support;

use std::time::{Duration, Instant};

use client::status::StoreState;
use node_support::*;

/// Idle CPU used by a node over `window`, measured after it came up.
fn idle_cpu(n: &NodeProc, window: Duration) -> Duration {
    let pid = n.pid().unwrap();
    // Let start-up work (plan load, first sweep) finish before measuring.
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_time(pid);
    std::thread::sleep(window);
    cpu_time(pid) - before
}

/// Item 4: the contact plan drives the node by its next event, not by polling. An idle node with
/// 100,000 contacts (all in the future) costs about what an idle node without a plan costs; before,
/// every turn of the agent loop swept the whole plan (24 % of a core).
#[test]
fn idle_node_with_a_large_contact_plan_uses_no_cpu() {
    let dir = TempDir::new("hard-plan");
    let mut plan = String::new();
    for i in 0..50_000u64 {
        let start = 3600 + i * 20;
        plan.push_str(&format!("a contact +{start} +{} 1 2 125000\n", start + 10));
        plan.push_str(&format!("a contact +{start} +{} 2 1 125000\n", start + 10));
    }
    let mut with_plan = NodeSpec::new(1, free_port());
    with_plan.spans.push((2, free_port()));
    with_plan.plan = Some(plan);
    let big = NodeProc::start(&dir.0, &with_plan);
    let mut without = NodeSpec::new(3, free_port());
    without.spans.push((2, free_port()));
    let small = NodeProc::start(&dir.0, &without);
    let window = Duration::from_secs(5);
    let cpu_big = idle_cpu(&big, window);
    let cpu_small = idle_cpu(&small, window);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "idle CPU over {window:?}: 100,000 contacts {cpu_big:?}, no plan {cpu_small:?} (loadavg {})",
        load.trim()
    );
    // 24 % of a core would be 1.2 s; allow scheduling noise on a loaded machine.
    assert!(
        cpu_big <= cpu_small + Duration::from_millis(250),
        "idle node with a 100,000-contact plan used {cpu_big:?} of CPU in {window:?} (without a plan: {cpu_small:?})"
    );
    // The plan is loaded, and its links are down until the first contact.
    assert_eq!(big.status().node, 1);
}

/// Nodes 1 and 2 joined by an LTP span each way, on free ports (not started).
fn span_pair() -> (NodeSpec, NodeSpec) {
    let (p1, p2) = (free_port(), free_port());
    let mut s1 = NodeSpec::new(1, p1);
    s1.spans.push((2, p2));
    let mut s2 = NodeSpec::new(2, p2);
    s2.spans.push((1, p1));
    (s1, s2)
}

/// Now in DTN milliseconds.
fn dtn_now_ms() -> u64 {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    unix - 946_684_800_000
}

/// Polls `f` every 50 ms until it holds; panics with `what` after `limit`.
fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn node_err(n: &NodeProc) -> String {
    std::fs::read_to_string(n.spec_dir.join("node.err")).unwrap_or_default()
}

/// Stops a node with SIGTERM and waits (bounded) for its exit; returns its exit code.
fn stop(n: &mut NodeProc) -> Option<i32> {
    let mut child = n.take_child()?;
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("node did not stop within 10 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An LTP engine of our own on a UDP socket, playing a neighbour's engine towards one node.
struct RawLtp {
    sock: std::net::UdpSocket,
    engine: ltp::Engine,
    node: std::net::SocketAddr,
    remote: u64,
    t0: Instant,
}

impl RawLtp {
    fn new(local_engine: u64, remote: u64, node_port: u16) -> RawLtp {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let mut engine = ltp::Engine::new(ltp::EngineConfig::new(local_engine));
        let mut span = ltp::SpanConfig::new(remote);
        span.rto = Some(Duration::from_millis(200));
        engine.add_span(span);
        RawLtp {
            sock,
            engine,
            node: format!("127.0.0.1:{node_port}").parse().unwrap(),
            remote,
            t0: Instant::now(),
        }
    }

    fn port(&self) -> u16 {
        self.sock.local_addr().unwrap().port()
    }

    /// Sends `data` as one red block and runs the engine until the node reported it complete
    /// (or cancelled it); true when completed.
    fn send_block(&mut self, data: Vec<u8>, limit: Duration) -> bool {
        let len = data.len();
        self.engine
            .send_block(self.t0.elapsed(), self.remote, 1, data.into(), len, 1)
            .unwrap();
        let deadline = Instant::now() + limit;
        let mut buf = Vec::new();
        let mut rx = vec![0u8; 65536];
        while Instant::now() < deadline {
            let now = self.t0.elapsed();
            self.engine.handle_timeout(now);
            while let Some(t) = self.engine.poll_transmit(now, &mut buf) {
                let _ = self.sock.send_to(&buf[buf.len() - t.len..], self.node);
                buf.clear();
            }
            if let Ok((n, _)) = self.sock.recv_from(&mut rx) {
                let _ = self
                    .engine
                    .handle_datagram(self.t0.elapsed(), &bytes::Bytes::copy_from_slice(&rx[..n]));
            }
            while let Some(ev) = self.engine.poll_event() {
                match ev {
                    ltp::Event::ExportCompleted { .. } => return true,
                    ltp::Event::ExportCancelled { .. } => return false,
                    _ => {}
                }
            }
        }
        false
    }
}

/// A bundle from ipn:1.1 to ipn:2.1 whose payload length field claims 2^62 bytes (its block
/// holds 200).
fn bundle_claiming_2_pow_62() -> Vec<u8> {
    let b = bpv7::BundleBuilder::new(bpv7::Eid::ipn(1, 1), bpv7::Eid::ipn(2, 1))
        .creation(bpv7::CreationTimestamp::new(dtn_now_ms(), 0))
        .lifetime_ms(3_600_000)
        .payload(vec![0xabu8; 200])
        .build()
        .unwrap()
        .encode();
    // The payload's byte-string header (major type 2, one-byte length 200) right before it.
    let at = b
        .windows(3)
        .position(|w| w == [0x58, 200, 0xab])
        .expect("payload header");
    let mut out = b[..at].to_vec();
    out.push(0x5b);
    out.extend_from_slice(&(1u64 << 62).to_be_bytes());
    out.extend_from_slice(&b[at + 2..]);
    out
}

/// Item 5: data that never becomes a bundle is counted and logged, with its reason: an LTP
/// block whose content is not a bundle, and a bundle whose payload length claims 2^62 bytes.
/// Both are acknowledged at the LTP level (refusing them would only make the sender send them
/// again forever); before, they vanished without a counter or a log line.
#[test]
fn discarded_ltp_blocks_are_counted_and_logged_with_their_reason() {
    let dir = TempDir::new("hard-discard");
    let port = free_port();
    let mut peer = RawLtp::new(1, 2, port);
    let mut spec = NodeSpec::new(2, port);
    spec.spans.push((1, peer.port()));
    let mut node = NodeProc::start(&dir.0, &spec);
    assert!(peer.send_block(
        b"this is not a bundle at all".to_vec(),
        Duration::from_secs(10)
    ));
    assert!(peer.send_block(bundle_claiming_2_pow_62(), Duration::from_secs(10)));
    let st = node.status();
    let d = &st.bundles.discarded;
    assert_eq!(d.get("not_a_bundle").copied(), Some(1), "{st}");
    assert_eq!(d.get("length_beyond_block").copied(), Some(1), "{st}");
    assert_eq!(st.store.bundles, 0, "{st}");
    // The bundle log is complete once the node stopped.
    assert_eq!(stop(&mut node), Some(0));
    let log = std::fs::read_to_string(node.spec_dir.join("bundles.csv")).unwrap();
    let discards: Vec<&str> = log.lines().filter(|l| l.contains(",discarded,")).collect();
    assert_eq!(discards.len(), 2, "{log}");
    assert!(discards[0].ends_with(",1,,not_a_bundle"), "{log}");
    assert!(discards[1].ends_with(",1,,length_beyond_block"), "{log}");
    assert!(
        node_err(&node).contains("not a bundle"),
        "{}",
        node_err(&node)
    );
}

/// Item 3 (LTP) and item 7 (LTP): 20,000 half-open import sessions (one spoofed data segment
/// each, with the configured peer's engine id) do not starve a real session: the oldest
/// never-progressed sessions are evicted to admit new ones, so a real block still arrives at
/// once (before, every new import was refused until the 60 s inactivity timer freed the slots).
/// With `accept_from = "peer_address"` the same datagrams from another port are refused and
/// counted without opening anything.
#[test]
fn half_open_import_sessions_do_not_starve_a_real_one() {
    let dir = TempDir::new("hard-halfopen");
    let (s1, mut s2) = span_pair();
    let p2 = s2.port;
    // The spoofer sends from another port of the same host: "any" lets it speak for engine 1.
    s2.extra = "\n[ltp]\naccept_from = \"any\"\n".into();
    let n1 = NodeProc::start(&dir.0, &s1);
    let n2 = NodeProc::start(&dir.0, &s2);
    let spoof = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let target: std::net::SocketAddr = format!("127.0.0.1:{p2}").parse().unwrap();
    let flood = |sock: &std::net::UdpSocket, first: u64, count: u64| {
        for n in first..first + count {
            let seg = spoofed_data_segment(n);
            let _ = sock.send_to(&seg, target);
            if n % 500 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    };
    flood(&spoof, 1 << 20, 20_000);
    let pid2 = n2.pid().unwrap();
    // A real bundle from node 1 arrives promptly, despite the flood.
    let t0 = Instant::now();
    let recv = spawn_recv(&n2.socket, "ipn:2.1", 1);
    send_ok(&n1.socket, "ipn:2.1", 1000, 1, &[]);
    let out = recv.wait(Duration::from_secs(45));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "the real block took {took:?}"
    );
    let st = n2.status();
    eprintln!(
        "real block after the flood: {took:?}; node 2 ltp: {:?}; RSS {} MB",
        st.ltp,
        rss_bytes(pid2) >> 20
    );
    assert!(st.ltp.imports_evicted > 0, "{st}");
    assert!(st.ltp.import_sessions <= 64, "{st}");
    assert!(
        rss_bytes(pid2) < 300 << 20,
        "RSS {} MB",
        rss_bytes(pid2) >> 20
    );
    drop((n1, n2));

    // The default policy family: only the configured address speaks for engine 1.
    let dir = TempDir::new("hard-source");
    let (p1, p2) = (free_port(), free_port());
    let mut s2 = NodeSpec::new(2, p2);
    s2.spans.push((1, p1));
    s2.extra = "\n[ltp]\naccept_from = \"peer_address\"\n".into();
    let n2 = NodeProc::start(&dir.0, &s2);
    let target: std::net::SocketAddr = format!("127.0.0.1:{p2}").parse().unwrap();
    let spoof = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    for n in 0..100u64 {
        spoof.send_to(&spoofed_data_segment(n + 1), target).unwrap();
    }
    wait_for("refused datagrams counted", Duration::from_secs(10), || {
        n2.status().ltp.wrong_source == 100
    });
    assert_eq!(n2.status().ltp.import_sessions, 0);
}

/// A red data segment (not a checkpoint) of 16 bytes at offset 0 of session `n` of engine 1,
/// client service 1: what opens an import session and leaves it half-open.
fn spoofed_data_segment(n: u64) -> Vec<u8> {
    let mut seg = vec![0x00];
    seg.extend(sdnv(1));
    seg.extend(sdnv(n));
    seg.push(0x00); // no extensions
    seg.extend([0x01, 0x00, 0x10]); // client service 1, offset 0, length 16
    seg.extend([0u8; 16]);
    seg
}

/// SDNV encoding (RFC 5326 / RFC 6256) for hand-made segments.
fn sdnv(mut v: u64) -> Vec<u8> {
    let mut out = vec![(v & 0x7f) as u8];
    v >>= 7;
    while v > 0 {
        out.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    out.reverse();
    out
}

/// A TCPCLv4 contact header and SESS_INIT with keepalive 0 from `node_id`.
fn tcpcl_hello(node_id: &str) -> Vec<u8> {
    let mut m = b"dtn!".to_vec();
    m.extend([0x04, 0x00]);
    m.push(0x07); // SESS_INIT
    m.extend(0u16.to_be_bytes()); // keepalive 0
    m.extend((1u64 << 20).to_be_bytes()); // segment MRU
    m.extend((1u64 << 26).to_be_bytes()); // transfer MRU
    m.extend((node_id.len() as u16).to_be_bytes());
    m.extend(node_id.as_bytes());
    m.extend(0u32.to_be_bytes()); // no extensions
    m
}

/// Reads from a raw TCPCL connection until it closes or `limit`; true when a SESS_TERM
/// (message type 0x05) with `reason` came after the peer's contact header and SESS_INIT.
fn saw_sess_term(s: &mut std::net::TcpStream, reason: u8, limit: Duration) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        // Contact header (6) + SESS_INIT (1 + 2 + 8 + 8 + 2 + id + 4).
        if got.len() >= 6 + 25 {
            let id_len = u16::from_be_bytes([got[6 + 19], got[6 + 20]]) as usize;
            let at = 6 + 25 + id_len;
            if got.len() >= at + 3 && got[at] == 0x05 {
                return got[at + 2] == reason;
            }
        }
    }
    false
}

/// Item 3 (TCPCL): sessions that negotiated keepalive 0 still end after `idle_timeout_s`
/// (SESS_TERM "Idle timeout"), and one address cannot hold more than `max_sessions_per_address`
/// sessions; before, 300 idle sessions filled the 256-session cap for good and unconfigured
/// peers were refused.
#[test]
fn idle_tcpcl_sessions_time_out_and_one_address_is_capped() {
    let dir = TempDir::new("hard-tcpidle");
    let listen = free_tcp_port();
    let mut spec = NodeSpec::new(2, free_port());
    spec.extra = format!(
        "\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\nidle_timeout_s = 2\nmax_sessions_per_address = 8\n"
    );
    let node = NodeProc::start(&dir.0, &spec);
    let mut conns = Vec::new();
    for i in 0..12 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", listen)).unwrap();
        use std::io::Write;
        let _ = c.write_all(&tcpcl_hello(&format!("ipn:{}.0", 100 + i)));
        conns.push(c);
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_for("the per-address cap", Duration::from_secs(10), || {
        node.tcpcl()
            .sessions_refused
            .get("per_address")
            .copied()
            .unwrap_or(0)
            == 4
    });
    // Each accepted session gets SESS_TERM "Idle timeout" (0x01) after about 2 s of silence.
    let t0 = Instant::now();
    let mut idle_closed = 0;
    for c in conns.iter_mut().take(8) {
        if saw_sess_term(c, 0x01, Duration::from_secs(10)) {
            idle_closed += 1;
        }
    }
    eprintln!("8 idle sessions ended after {:?}", t0.elapsed());
    assert_eq!(idle_closed, 8);
    wait_for("sessions closed", Duration::from_secs(10), || {
        node.tcpcl().sessions_open == 0
    });
    assert_eq!(
        node.tcpcl()
            .sessions_refused
            .get("idle_timeout")
            .copied()
            .unwrap_or(0),
        8
    );
    // The address may open sessions again.
    let mut c = std::net::TcpStream::connect(("127.0.0.1", listen)).unwrap();
    use std::io::Write;
    c.write_all(&tcpcl_hello("ipn:200.0")).unwrap();
    wait_for("a new session", Duration::from_secs(10), || {
        node.tcpcl().sessions_established >= 9
    });
}

/// Item 6: SIGTERM stops a node cleanly: exit status 0 (not death by the signal), TCPCL
/// sessions end with SESS_TERM, and the store is usable at the next start. Start-up failures
/// caused by configuration values exit 2 naming the field.
#[test]
fn sigterm_stops_cleanly_and_bad_values_at_start_exit_2() {
    let dir = TempDir::new("hard-sigterm");
    let listen = free_tcp_port();
    let mut spec = NodeSpec::new(2, free_port());
    spec.extra = format!("\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\n");
    let mut node = NodeProc::start(&dir.0, &spec);
    send_ok(&node.socket, "ipn:2.1", 100, 3, &[]);
    let mut c = std::net::TcpStream::connect(("127.0.0.1", listen)).unwrap();
    {
        use std::io::Write;
        c.write_all(&tcpcl_hello("ipn:5.0")).unwrap();
    }
    wait_for("the session", Duration::from_secs(10), || {
        node.tcpcl().sessions_established == 1
    });
    let mut child = node.take_child().unwrap();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    // SESS_TERM reason "Unknown" (0x00) reaches the peer.
    assert!(saw_sess_term(&mut c, 0x00, Duration::from_secs(5)));
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "node did not stop after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{status:?}: {}", node_err(&node));
    // Everything committed is there after a restart.
    node.restart();
    assert_eq!(node.status().store.bundles, 3);
    drop(node);

    // The store path is a file.
    let cfg_dir = TempDir::new("hard-badvalues");
    std::fs::write(cfg_dir.0.join("afile"), b"x").unwrap();
    let cfg = cfg_dir.0.join("a.toml");
    std::fs::write(
        &cfg,
        format!(
            "node = 1\nbind = \"127.0.0.1:{}\"\n[store]\npath = \"afile\"\n",
            free_port()
        ),
    )
    .unwrap();
    let out = run(
        &["node", "--config", cfg.to_str().unwrap()],
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("field `store.path`") && err.contains("a.toml"),
        "{err}"
    );
    // The application socket path is longer than a Unix socket path may be.
    let long = cfg_dir.0.join("s".repeat(120));
    std::fs::write(
        &cfg,
        format!(
            "node = 1\nbind = \"127.0.0.1:{}\"\n[store]\npath = \"store\"\n[app]\nsocket = \"{}\"\n",
            free_port(),
            long.display()
        ),
    )
    .unwrap();
    let out = run(
        &["node", "--config", cfg.to_str().unwrap()],
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("field `app.socket`"), "{err}");
}

/// A tmpfs of `size_mb` mounted on a directory for the test, unmounted on drop (lazily, so a
/// process that still holds a file there cannot keep it mounted). Needs root (CI runs as root).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &std::path::Path, size_mb: u64) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(at)
            .status()
            .expect("mount(8)");
        assert!(
            st.success(),
            "mounting a tmpfs needs root (CI runs as root): {st:?}"
        );
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Item 1: a full disk degrades the store instead of wedging it. Node 2's store is on a 32 MB
/// tmpfs, 28 MB of it taken by a filler file; node 1 sends it more bundles than fit. Node 2's
/// commits fail with ENOSPC: its store turns `degraded` (status), refuses new bundles (its
/// applications get StoreUnavailable, node 1 gets refusals and backs off, keeping the bundles),
/// costs little CPU and few log lines while degraded, and once the filler is removed it
/// recovers by itself (redb reopened) and every bundle arrives exactly once. Before, redb
/// answered "Previous I/O error occurred" to everything until a restart, with ~60 % of a core
/// and ~300,000 log lines.
#[test]
fn a_full_disk_degrades_the_store_and_it_recovers_by_itself() {
    let dir = TempDir::new("hard-enospc");
    let (mut s1, mut s2) = span_pair();
    s1.extra = "\n[bp]\nrefusal_backoff_first_ms = 200\nrefusal_backoff_max_ms = 2000\n".into();
    s2.extra = "\n[bp]\ndelivery_backlog_bytes = 0\n".into();
    let store2 = dir.0.join("n2").join("store");
    let _fs = Tmpfs::mount(&store2, 32);
    let filler = store2.join("filler");
    std::fs::write(&filler, vec![0u8; 28 << 20]).unwrap();
    let n1 = NodeProc::start(&dir.0, &s1);
    let n2 = NodeProc::start(&dir.0, &s2);
    let count = 80u64;
    send_ok(&n1.socket, "ipn:2.1", 100_000, count, &[]);
    wait_for("node 2's store to degrade", Duration::from_secs(90), || {
        n2.status().store.state == StoreState::Degraded
    });
    // The reply with `store.degraded` survives the typed structs.
    let st = assert_status_round_trips(&n2);
    eprintln!("degraded: {:?}", st.store);
    assert!(
        !st.store
            .degraded
            .as_ref()
            .map_or("", |d| d.reason.as_str())
            .is_empty(),
        "{st}"
    );
    // Applications are told, clearly.
    let out = run(
        &[
            "send",
            "--socket",
            n2.socket.to_str().unwrap(),
            "--dst",
            "ipn:1.1",
            "--size",
            "10",
            "--count",
            "1",
        ],
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("unavailable"),
        "{err}"
    );
    // Node 1 keeps what node 2 refused and backs off.
    wait_for("node 1 to see refusals", Duration::from_secs(30), || {
        n1.status().bundles.cla_refusals > 0
    });
    // Bounded while degraded: CPU, segments, log lines.
    let (pid1, pid2) = (n1.pid().unwrap(), n2.pid().unwrap());
    let (c1, c2) = (cpu_time(pid1), cpu_time(pid2));
    let seg1 = n1.status().ltp.segments_sent;
    std::thread::sleep(Duration::from_secs(3));
    let (c1, c2) = (cpu_time(pid1) - c1, cpu_time(pid2) - c2);
    let segs = n1.status().ltp.segments_sent - seg1;
    let lines = node_err(&n2).lines().count();
    eprintln!(
        "degraded for 3 s: node 1 CPU {c1:?}, {segs} segments sent; node 2 CPU {c2:?}, {lines} log lines (loadavg {})",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    assert!(
        c2 < Duration::from_millis(900),
        "node 2 used {c2:?} while degraded"
    );
    // The back-off (200 ms, doubled up to 2 s) fits at most five refusal rounds of every bundle
    // into the 3 s (80 bundles of about 101 segments: 40 400 segments), somewhat more when a
    // loaded host loses part of a round and it is sent again: measured 16 000-32 000 on a quiet
    // machine, 41 000-45 000 twice under the whole suite's load. Without it (10 ms back-off)
    // node 1 sent 339 000 segments in the same 3 s.
    let per_round = count * 100_000_u64.div_ceil(1000);
    assert!(
        segs < 7 * per_round,
        "node 1 sent {segs} segments in 3 s (a round is about {per_round})"
    );
    assert!(lines < 100, "{}", node_err(&n2));
    // Space returns: node 2 recovers by itself and everything arrives, once.
    std::fs::remove_file(&filler).unwrap();
    wait_for("node 2's store to recover", Duration::from_secs(30), || {
        n2.status().store.state == StoreState::Ok
    });
    assert!(n2.status().store.recoveries >= 1);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", count);
    let out = recv.wait(Duration::from_secs(150));
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
    assert_eq!(ids.len() as u64, count, "every bundle exactly once");
    wait_for("node 1's store to drain", Duration::from_secs(30), || {
        n1.status().store.bundles == 0
    });
    assert!(
        node_err(&n2).contains("bundle store recovered"),
        "{}",
        node_err(&n2)
    );
}

/// Item 2: a neighbour whose store is full refuses our blocks; we keep the bundles and back off
/// (exponentially, capped) instead of resending at once forever (430,000 segments/s before),
/// while the other neighbour's traffic flows on. Once the full neighbour has room, the bundles
/// go through and the back-off resets.
#[test]
fn a_full_neighbour_makes_the_sender_back_off() {
    let dir = TempDir::new("hard-backoff");
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let mut s1 = NodeSpec::new(1, p1);
    s1.spans.push((2, p2));
    s1.spans.push((3, p3));
    s1.extra = "\n[bp]\nrefusal_backoff_first_ms = 200\nrefusal_backoff_max_ms = 2000\n".into();
    let mut s2 = NodeSpec::new(2, p2);
    s2.spans.push((1, p1));
    s2.quota = 250_000;
    s2.extra = "\n[bp]\ndelivery_backlog_bytes = 0\n".into();
    let mut s3 = NodeSpec::new(3, p3);
    s3.spans.push((1, p1));
    let n1 = NodeProc::start(&dir.0, &s1);
    let n2 = NodeProc::start(&dir.0, &s2);
    let n3 = NodeProc::start(&dir.0, &s3);
    send_ok(&n1.socket, "ipn:2.1", 100_000, 6, &[]);
    wait_for("node 2 to refuse", Duration::from_secs(30), || {
        n1.status().bundles.cla_refusals > 0
    });
    let pid1 = n1.pid().unwrap();
    let c0 = cpu_time(pid1);
    let s0 = n1.status().ltp.segments_sent;
    // Meanwhile node 3 is served as usual.
    let t0 = Instant::now();
    let r3 = spawn_recv(&n3.socket, "ipn:3.1", 5);
    send_ok(&n1.socket, "ipn:3.1", 10_000, 5, &[]);
    let out = r3.wait(Duration::from_secs(45));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other = t0.elapsed();
    std::thread::sleep(Duration::from_secs(3).saturating_sub(other));
    let window = t0.elapsed();
    let cpu = cpu_time(pid1) - c0;
    let segs = n1.status().ltp.segments_sent - s0;
    let st = n1.status();
    eprintln!(
        "backing off for {window:?}: {segs} segments sent, node 1 CPU {cpu:?}, node 3 served in {other:?}; backoff {:?} (loadavg {})",
        st.backoff,
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    assert!(segs < 5_000, "node 1 sent {segs} segments in {window:?}");
    assert!(cpu < window / 3, "node 1 used {cpu:?} in {window:?}");
    assert!(st.backoff[&2].refusals > 0, "{st}");
    assert!(
        st.store.bundles >= 3,
        "node 1 keeps what node 2 refused: {st}"
    );
    // Room at node 2: everything goes through and the back-off ends.
    let r2 = spawn_recv(&n2.socket, "ipn:2.1", 6);
    let out = r2.wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("node 1's store to drain", Duration::from_secs(30), || {
        n1.status().store.bundles == 0
    });
    assert!(!n1.status().backoff.contains_key(&2), "{}", n1.status());
}

/// Runs `dtnkit send` of one bundle: the id the node acknowledged (an id printed by a `send`
/// that then failed still counts), or why there is none. Without an id the outcome is unknown:
/// the node may have stored the bundle and been killed between its commit and its reply; such
/// a bundle is delivered under an id the application never learnt, and the application, not
/// knowing, sends again.
fn send_one(socket: &std::path::Path, dst: &str, size: usize) -> Result<String, String> {
    let out = run(
        &[
            "send",
            "--socket",
            socket.to_str().unwrap(),
            "--dst",
            dst,
            "--size",
            &size.to_string(),
            "--count",
            "1",
        ],
        Duration::from_secs(30),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("sent ").map(str::to_string))
        .ok_or_else(|| {
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
}

/// Ids printed by `dtnkit recv` (`recv ID len=...`).
fn received_ids(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("recv "))
        .map(|l| l.split(" len=").next().unwrap_or("").to_string())
        .collect()
}

/// The chaos run (issue 19): a 3-node chain 1 —LTP— 2 —TCPCL— 3 under a mixed load (600 × 50 kB
/// bundles 1→3, 300 × 200 B bundles 1→3, 300 × 1 kB bundles 3→1 sent one by one) while node 2's store disk
/// (a tmpfs) fills up and drains, nodes 2 and 3 are killed with SIGKILL and restarted (as a
/// supervisor would), and a flood of hostile datagrams (garbage and spoofed LTP data segments)
/// and garbage TCP connections hits node 2 the whole time. At the end every bundle a node
/// acknowledged to its application arrived exactly once, no other arrived, every store is
/// healthy and empty, and no node needed a restart by hand. Long: `scripts/chaos.sh` runs it;
/// the suite runs [`chaos_three_node_chain_bounded`].
#[test]
#[ignore = "long chaos run (about 2 minutes); scripts/chaos.sh"]
fn chaos_three_node_chain() {
    chaos(ChaosScale {
        big: 600,
        small: 300,
        back: 300,
        second: Duration::from_secs(1),
    });
}

/// The chaos run at half the load on a timeline twice as fast (every event of the long run, in
/// about a minute): part of the suite.
#[test]
fn chaos_three_node_chain_bounded() {
    chaos(ChaosScale {
        big: 300,
        small: 150,
        back: 150,
        second: Duration::from_millis(500),
    });
}

/// The load and the pace of a chaos run.
struct ChaosScale {
    /// 50 kB bundles 1→3.
    big: u32,
    /// 200 B bundles 1→3.
    small: u32,
    /// 1 kB bundles 3→1, one at a time.
    back: u32,
    /// What one second of the long run's timeline takes.
    second: Duration,
}

fn chaos(scale: ChaosScale) {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    let dir = TempDir::new("chaos");
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let t2 = free_tcp_port();
    let backoff = "\n[bp]\nrefusal_backoff_first_ms = 200\nrefusal_backoff_max_ms = 3000\n";
    let mut s1 = NodeSpec::new(1, p1);
    s1.spans.push((2, p2));
    s1.routes.push((3, 2));
    s1.extra = backoff.into();
    let mut s2 = NodeSpec::new(2, p2);
    s2.spans.push((1, p1));
    s2.extra = format!(
        "{backoff}\n[tcpcl]\nlisten = \"127.0.0.1:{t2}\"\nreconnect_min_ms = 100\nreconnect_max_ms = 1000\n\n[[tcp_peer]]\npeer = 3\n"
    );
    let mut s3 = NodeSpec::new(3, p3);
    s3.routes.push((1, 2));
    s3.extra = format!(
        "{backoff}\n[tcpcl]\nreconnect_min_ms = 100\nreconnect_max_ms = 1000\n\n[[tcp_peer]]\npeer = 2\naddress = \"127.0.0.1:{t2}\"\n"
    );
    let store2 = dir.0.join("n2").join("store");
    let _fs = Tmpfs::mount(&store2, 48);
    let n1 = NodeProc::start(&dir.0, &s1);
    let n2 = Arc::new(std::sync::Mutex::new(NodeProc::start(&dir.0, &s2)));
    let n3 = Arc::new(std::sync::Mutex::new(NodeProc::start(&dir.0, &s3)));
    let sock3 = n3.lock().unwrap().socket.clone();
    let stop = Arc::new(AtomicBool::new(false));

    // Hostile traffic at node 2 for the whole run.
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let target: std::net::SocketAddr = format!("127.0.0.1:{p2}").parse().unwrap();
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let mut sent = 0u64;
            let mut n = 1u64 << 30;
            while !stop.load(Relaxed) {
                for _ in 0..200 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let dg = if x.is_multiple_of(2) {
                        n += 1;
                        spoofed_data_segment(n)
                    } else {
                        x.to_le_bytes().repeat(1 + (x % 20) as usize)
                    };
                    let _ = sock.send_to(&dg, target);
                    sent += 1;
                }
                if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", t2)) {
                    use std::io::Write;
                    let _ = c.write_all(&x.to_le_bytes().repeat(50));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            sent
        })
    };

    // Receivers (they reconnect across node restarts and de-duplicate re-offers).
    let big_and_small = scale.big + scale.small;
    let r3 = Proc::spawn(&[
        "recv",
        "--socket",
        sock3.to_str().unwrap(),
        "--endpoint",
        "ipn:3.1",
        "--count",
        &big_and_small.to_string(),
        "--timeout",
        "120",
    ]);
    // Load 1→3 (node 1 is never killed: its applications' sends are all acknowledged).
    let big = Proc::spawn(&[
        "send",
        "--socket",
        n1.socket.to_str().unwrap(),
        "--dst",
        "ipn:3.1",
        "--size",
        "50000",
        "--count",
        &scale.big.to_string(),
        "--store-full-wait",
        "120",
    ]);
    let small = Proc::spawn(&[
        "send",
        "--socket",
        n1.socket.to_str().unwrap(),
        "--dst",
        "ipn:3.1",
        "--size",
        "200",
        "--count",
        &scale.small.to_string(),
        "--store-full-wait",
        "120",
    ]);
    // Load 3→1, one bundle at a time, through node 3's restarts: what was acknowledged counts.
    // A send that failed may still have been stored (node 3 killed between its commit and its
    // reply): such bundles may arrive too, under ids nobody was told, at most one per failure.
    let back = {
        let stop = stop.clone();
        let want = scale.back as usize;
        std::thread::spawn(move || {
            let (mut acked, mut unknown) = (Vec::new(), Vec::new());
            while acked.len() < want && !stop.load(Relaxed) {
                match send_one(&sock3, "ipn:1.1", 1000) {
                    Ok(id) => acked.push(id),
                    Err(why) => {
                        unknown.push(why);
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
            (acked, unknown)
        })
    };

    // The chaos itself.
    let filler = store2.join("filler");
    let t0 = Instant::now();
    let at = |s: u32| {
        let until = t0 + scale.second * s;
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
    };
    let fill = |path: &std::path::Path| {
        // Take all but ~1 MB of the tmpfs.
        use std::io::Write;
        let mut f = std::fs::File::create(path).unwrap();
        let chunk = vec![0u8; 1 << 20];
        while f.write_all(&chunk).is_ok() {}
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(1 << 20)).unwrap();
    };
    let kill_restart = |n: &std::sync::Mutex<NodeProc>| {
        let mut n = n.lock().unwrap();
        n.kill();
        std::thread::sleep(Duration::from_millis(300));
        n.restart();
    };
    at(2);
    fill(&filler);
    eprintln!("chaos: node 2's disk full at {:?}", t0.elapsed());
    at(6);
    kill_restart(&n3);
    eprintln!("chaos: node 3 killed and restarted at {:?}", t0.elapsed());
    at(10);
    let degraded = n2.lock().unwrap().status().store;
    eprintln!("chaos: node 2 store before the drain: {degraded:?}");
    std::fs::remove_file(&filler).unwrap();
    eprintln!("chaos: node 2's disk drained at {:?}", t0.elapsed());
    at(12);
    kill_restart(&n2);
    eprintln!("chaos: node 2 killed and restarted at {:?}", t0.elapsed());
    at(16);
    fill(&filler);
    eprintln!("chaos: node 2's disk full again at {:?}", t0.elapsed());
    at(20);
    kill_restart(&n3);
    at(24);
    std::fs::remove_file(&filler).unwrap();
    kill_restart(&n2);
    eprintln!(
        "chaos: drained, node 2 and 3 restarted at {:?}",
        t0.elapsed()
    );

    // Everything acknowledged arrives exactly once.
    let big = big.wait(Duration::from_secs(180));
    let small = small.wait(Duration::from_secs(180));
    assert!(
        big.status.success(),
        "{}",
        String::from_utf8_lossy(&big.stderr)
    );
    assert!(
        small.status.success(),
        "{}",
        String::from_utf8_lossy(&small.stderr)
    );
    let mut sent13: Vec<String> = Vec::new();
    for o in [&big, &small] {
        sent13.extend(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.strip_prefix("sent "))
                .map(str::to_string),
        );
    }
    let (sent31, unknown31) = back.join().unwrap();
    eprintln!(
        "chaos 3→1: {} sends failed (outcome unknown): {unknown31:?}",
        unknown31.len()
    );
    // Node 1 keeps what arrives for ipn:1.1 until it registers: its receiver starts once the
    // number to wait for is known (the acknowledged ones plus every failed send, which ends at
    // the idle timeout when a failed send stored nothing).
    let r1 = Proc::spawn(&[
        "recv",
        "--socket",
        n1.socket.to_str().unwrap(),
        "--endpoint",
        "ipn:1.1",
        "--count",
        &(sent31.len() + unknown31.len()).to_string(),
        "--timeout",
        if unknown31.is_empty() { "120" } else { "20" },
    ]);
    let got3 = r3.wait(Duration::from_secs(200));
    let got1 = r1.wait(Duration::from_secs(200));
    stop.store(true, Relaxed);
    let hostile = flood.join().unwrap();
    for (name, sent, unknown, got) in [
        ("1→3", &sent13, 0, &got3),
        ("3→1", &sent31, unknown31.len(), &got1),
    ] {
        let ids = received_ids(got);
        let unique: std::collections::HashSet<&String> = ids.iter().collect();
        let sent: std::collections::HashSet<&String> = sent.iter().collect();
        eprintln!(
            "chaos {name}: {} acknowledged, {} received ({} unique); recv: {}",
            sent.len(),
            ids.len(),
            unique.len(),
            String::from_utf8_lossy(&got.stderr).trim()
        );
        assert_eq!(
            ids.len(),
            unique.len(),
            "{name}: a bundle was delivered twice"
        );
        let missing: Vec<_> = sent.difference(&unique).collect();
        assert!(missing.is_empty(), "{name}: lost {missing:?}");
        let extra: Vec<_> = unique.difference(&sent).collect();
        assert!(
            extra.len() <= unknown,
            "{name}: unexpected {extra:?} ({unknown} sends with an unknown outcome)"
        );
    }
    // Every node is back to normal by itself: store healthy, nothing left in it.
    let n2 = n2.lock().unwrap();
    let n3 = n3.lock().unwrap();
    wait_for("stores to drain", Duration::from_secs(60), || {
        [&n1, &*n2, &*n3]
            .iter()
            .all(|n| n.status().store.bundles == 0 && n.status().store.state == StoreState::Ok)
    });
    let st2 = n2.status();
    eprintln!(
        "chaos: done in {:?}; {hostile} hostile datagrams; node 2: store {:?}, ltp {:?}, tcpcl refused {:?}, discarded {:?}",
        t0.elapsed(),
        st2.store,
        st2.ltp,
        st2.tcpcl.as_ref().unwrap().sessions_refused,
        st2.bundles.discarded
    );
}
