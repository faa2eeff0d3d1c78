//! Two `dtnkit node` processes connected by TCPCLv4 only: bundles of 10 B, 100 kB and 5 MB
//! arrive intact in both directions over one session (also over TCPCLv3, `version = 3`, the
//! accepting node answering in the version of the contact header); bundles sent while the peer is down wait
//! and are delivered after its restart (reconnection with back-off); a peer that only accepts
//! (no address configured) routes back over the session the other side opened.

mod node_support;

use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// A node with TCPCL on `listen` and one TCPCL neighbour (`peer_port` None: accept only).
fn tcp_spec(node: u64, listen: u16, peer: u64, peer_port: Option<u16>) -> NodeSpec {
    let mut n = NodeSpec::new(node, free_port());
    let address = peer_port.map_or(String::new(), |p| format!("address = \"127.0.0.1:{p}\"\n"));
    n.extra = format!(
        "\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 400\n\n[[tcp_peer]]\npeer = {peer}\n{address}"
    );
    n
}

/// Sends `sizes` from `from` to `dst` and checks they arrive intact at `to`.
fn transfer(dir: &TempDir, from: &NodeProc, to: &NodeProc, dst: &str, sizes: &[usize], seed: u64) {
    let out_dir = dir.0.join(format!("out-{seed}"));
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&to.socket),
        "--endpoint",
        dst,
        "--count",
        &sizes.len().to_string(),
        "--timeout",
        "40",
        "--hash",
        "--out-dir",
        s(&out_dir),
    ]);
    let mut want = Vec::new();
    for (i, len) in sizes.iter().enumerate() {
        let f = dir.0.join(format!("in-{seed}-{i}.bin"));
        let d = data(*len, seed + i as u64);
        want.push(format!("len={len} sha256={}", sha256_hex(&d)));
        std::fs::write(&f, &d).unwrap();
        let out = run(
            &[
                "send",
                "--socket",
                s(&from.socket),
                "--dst",
                dst,
                "--file",
                s(&f),
            ],
            LIMIT,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = recv.wait(LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for w in &want {
        assert!(text.contains(w), "missing {w} in {text}");
    }
}

fn wait_store_empty(n: &NodeProc) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while n.status().store.bundles != 0 {
        assert!(Instant::now() < deadline, "{}", n.status());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn tcpcl_carries_10b_100kb_5mb_both_ways() {
    let dir = TempDir::new("tcpcl");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let n1 = NodeProc::start(&dir.0, &tcp_spec(1, t1, 2, Some(t2)));
    let n2 = NodeProc::start(&dir.0, &tcp_spec(2, t2, 1, Some(t1)));
    let sizes = [10usize, 100_000, 5_000_000];
    transfer(&dir, &n1, &n2, "ipn:2.1", &sizes, 10);
    transfer(&dir, &n2, &n1, "ipn:1.1", &sizes, 20);
    wait_store_empty(&n1);
    wait_store_empty(&n2);
    // The reply's tcpcl section, per-peer counters included, survives the typed structs.
    let st = assert_status_round_trips(&n1);
    let t = st.tcpcl.as_ref().expect("tcpcl section");
    assert!(t.sessions_established >= 1, "{st}");
    assert!(t.transfers_acked >= 3, "{st}");
    assert!(t.bundles_received >= 3, "{st}");
    assert!(t.bytes_sent >= 5_100_000, "{st}");
    // dtnkit commits no deviation.
    assert!(t.deviations.is_empty(), "{st}");
    assert_eq!(st.ltp.segments_sent, 0, "{st}");
}

#[test]
fn tcpcl3_carries_10b_100kb_5mb_both_ways() {
    let dir = TempDir::new("tcpcl3");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    // Node 1 opens a v3 session; node 2 only accepts (its contact header picks v3).
    let mut a = tcp_spec(1, t1, 2, Some(t2));
    a.extra.push_str("version = 3\n");
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &tcp_spec(2, t2, 1, None));
    let sizes = [10usize, 100_000, 5_000_000];
    transfer(&dir, &n1, &n2, "ipn:2.1", &sizes, 110);
    transfer(&dir, &n2, &n1, "ipn:1.1", &sizes, 120);
    wait_store_empty(&n1);
    wait_store_empty(&n2);
    for n in [&n1, &n2] {
        let st = n.status();
        let t = st.tcpcl.as_ref().expect("tcpcl section");
        assert_eq!(t.sessions_v3, t.sessions_established, "{st}");
        assert!(t.sessions_v3 >= 1, "{st}");
        assert!(t.transfers_acked >= 3, "{st}");
        assert!(t.bundles_received >= 3, "{st}");
        assert!(t.deviations.is_empty(), "{st}");
    }
}

#[test]
fn tcpcl_bulk_in_both_directions_at_once() {
    // Both sides write large transfers at the same time: neither may stop reading while its
    // own output is backed up, or both would wait for the other forever.
    let dir = TempDir::new("tcpcl-bidi");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let mut a = tcp_spec(1, t1, 2, Some(t2));
    let mut b = tcp_spec(2, t2, 1, None);
    // Small socket buffers make the cross-blocking happen quickly.
    a.extra = a
        .extra
        .replace("[tcpcl]\n", "[tcpcl]\nsocket_buffer_bytes = 65536\n");
    b.extra = b
        .extra
        .replace("[tcpcl]\n", "[tcpcl]\nsocket_buffer_bytes = 65536\n");
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);
    let recv = |n: &NodeProc, ep: &str| {
        Proc::spawn(&[
            "recv",
            "--socket",
            s(&n.socket),
            "--endpoint",
            ep,
            "--count",
            "6",
            "--timeout",
            "40",
        ])
    };
    let r2 = recv(&n2, "ipn:2.1");
    let r1 = recv(&n1, "ipn:1.1");
    let send = |n: &NodeProc, dst: &str| {
        Proc::spawn(&[
            "send",
            "--socket",
            s(&n.socket),
            "--dst",
            dst,
            "--size",
            "3000000",
            "--count",
            "6",
            "--quiet",
        ])
    };
    let s1 = send(&n1, "ipn:2.1");
    let s2 = send(&n2, "ipn:1.1");
    for p in [s1, s2, r1, r2] {
        let out = p.wait(LIMIT);
        assert!(
            out.status.success(),
            "{} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    wait_store_empty(&n1);
    wait_store_empty(&n2);
}

#[test]
fn tcpcl_reconnects_and_delivers_what_waited() {
    let dir = TempDir::new("tcpcl-re");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let n1 = NodeProc::start(&dir.0, &tcp_spec(1, t1, 2, Some(t2)));
    let mut n2 = NodeProc::start(&dir.0, &tcp_spec(2, t2, 1, Some(t1)));
    transfer(&dir, &n1, &n2, "ipn:2.1", &[1000], 30);
    // Let the first bundle settle before the kill: its final XFER_ACK leaves node 2 only after
    // the commit (node 1's copy is deleted then), and the delivery record goes with the
    // application's acknowledgment. A kill inside either window is the crash test's business
    // (node_tcpcl_crash.rs); here it would re-offer the 1000-octet bundle to the next `recv`.
    wait_store_empty(&n1);
    wait_store_empty(&n2);
    n2.kill();
    // Sent while node 2 is down: stored at node 1.
    let f = dir.0.join("late.bin");
    let d = data(300_000, 77);
    std::fs::write(&f, &d).unwrap();
    let out = run(
        &[
            "send",
            "--socket",
            s(&n1.socket),
            "--dst",
            "ipn:2.1",
            "--file",
            s(&f),
            "--count",
            "2",
        ],
        LIMIT,
    );
    assert!(out.status.success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(n1.status().store.bundles, 2, "{}", n1.status());
    n2.restart();
    let out = run(
        &[
            "recv",
            "--socket",
            s(&n2.socket),
            "--endpoint",
            "ipn:2.1",
            "--count",
            "2",
            "--timeout",
            "30",
            "--hash",
        ],
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    let needle = format!("len=300000 sha256={}", sha256_hex(&d));
    assert_eq!(text.matches(&needle).count(), 2, "{text}");
    wait_store_empty(&n1);
    assert!(n1.tcpcl().sessions_established >= 2);
}

#[test]
fn accept_only_peer_is_reached_over_the_session_it_opened() {
    let dir = TempDir::new("tcpcl-passive");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    // Node 1 knows no address for 2; node 2 connects to node 1.
    let n1 = NodeProc::start(&dir.0, &tcp_spec(1, t1, 2, None));
    let n2 = NodeProc::start(&dir.0, &tcp_spec(2, t2, 1, Some(t1)));
    transfer(&dir, &n1, &n2, "ipn:2.1", &[50_000], 40);
    transfer(&dir, &n2, &n1, "ipn:1.1", &[50_000], 50);
}

#[test]
fn unconfigured_node_is_routed_back_by_its_sess_init_node_id() {
    let dir = TempDir::new("tcpcl-unknown");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    // Node 1 has no [[tcp_peer]] at all: node 2 is known only from its SESS_INIT.
    let mut a = NodeSpec::new(1, free_port());
    a.extra = format!("\n[tcpcl]\nlisten = \"127.0.0.1:{t1}\"\n");
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &tcp_spec(2, t2, 1, Some(t1)));
    transfer(&dir, &n2, &n1, "ipn:1.1", &[20_000], 60);
    transfer(&dir, &n1, &n2, "ipn:2.1", &[20_000], 70);
    // Once node 2 is gone, node 1 holds bundles for it (the link followed the session).
    drop(n2);
    let deadline = Instant::now() + Duration::from_secs(10);
    while n1.tcpcl().sessions_open != 0 {
        assert!(Instant::now() < deadline, "{}", n1.status());
        std::thread::sleep(Duration::from_millis(20));
    }
    let f = dir.0.join("held.bin");
    std::fs::write(&f, data(1000, 1)).unwrap();
    let out = run(
        &[
            "send",
            "--socket",
            s(&n1.socket),
            "--dst",
            "ipn:2.1",
            "--file",
            s(&f),
        ],
        LIMIT,
    );
    assert!(out.status.success());
    std::thread::sleep(Duration::from_millis(300));
    let st = n1.status();
    assert_eq!(st.store.bundles, 1, "{st}");
    assert_eq!(st.bundles.cla_failures, 0, "{st}");
}

#[test]
fn contact_plan_gates_forwarding_to_a_tcpcl_peer() {
    let dir = TempDir::new("tcpcl-plan");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    // Node 1's contact with node 2 opens 5 s after start; the session is up before that.
    let mut a = tcp_spec(1, t1, 2, Some(t2));
    a.plan = Some(
        "a contact +5 +3600 1 2 100000000\na contact +5 +3600 2 1 100000000\na range +0 +3600 1 2 0\n"
            .into(),
    );
    // Plan time 0 is node 1's start, which is after t0: the contact opens at t0 + 5 s or later.
    let t0 = Instant::now();
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &tcp_spec(2, t2, 1, None));
    let deadline = Instant::now() + Duration::from_secs(10);
    while n1.tcpcl().sessions_established == 0 {
        assert!(Instant::now() < deadline, "{}", n1.status());
        std::thread::sleep(Duration::from_millis(20));
    }
    let f = dir.0.join("gated.bin");
    let d = data(10_000, 5);
    std::fs::write(&f, &d).unwrap();
    let out = run(
        &[
            "send",
            "--socket",
            s(&n1.socket),
            "--dst",
            "ipn:2.1",
            "--file",
            s(&f),
        ],
        LIMIT,
    );
    assert!(out.status.success());
    if t0.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(200));
        let st = n1.status();
        assert_eq!(st.store.bundles, 1, "held until the contact: {st}");
        assert_eq!(st.tcpcl.as_ref().unwrap().transfers_sent, 0, "{st}");
    }
    let out = run(
        &[
            "recv",
            "--socket",
            s(&n2.socket),
            "--endpoint",
            "ipn:2.1",
            "--count",
            "1",
            "--timeout",
            "30",
            "--hash",
        ],
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("len=10000 sha256={}", sha256_hex(&d))),
        "{text}"
    );
    assert!(
        t0.elapsed() >= Duration::from_secs(5),
        "delivered before the contact opened"
    );
}
