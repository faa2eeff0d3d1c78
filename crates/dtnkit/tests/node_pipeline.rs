//! Pipelined application sends against real `dtnkit node` processes: thousands of bundles with
//! many in flight arrive exactly once with their payload (Rust client on one node, and the CLI
//! across two TCPCL nodes), and `dtnkit send --window` with `--store-full-wait` resubmits bundles
//! refused for a full store until they fit, storing each exactly once.

mod node_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use client::bytes::Bytes;
use client::{Client, SendArgs};
use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// A node with TCPCL on `listen` and one TCPCL neighbour.
fn tcp_spec(node: u64, listen: u16, peer: u64, peer_port: u16) -> NodeSpec {
    let mut n = NodeSpec::new(node, free_port());
    n.extra = format!(
        "\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 400\n\n[[tcp_peer]]\npeer = {peer}\naddress = \"127.0.0.1:{peer_port}\"\n"
    );
    n
}

/// Payload of bundle `i`: its index (8 bytes) then deterministic data, 1..=1500 bytes in all.
fn payload(i: u64) -> Bytes {
    let len = 8 + (i.wrapping_mul(7919) % 1493) as usize;
    let mut p = i.to_be_bytes().to_vec();
    p.extend_from_slice(&data(len - 8, i));
    Bytes::from(p)
}

#[test]
fn pipelined_sends_on_one_node_are_delivered_once_each_with_their_payload() {
    const N: u64 = 2000;
    const WINDOW: usize = 64;
    let dir = TempDir::new("pipeline-local");
    let node = NodeProc::start(&dir.0, &NodeSpec::new(1, free_port()));
    // The receiver runs on its own connection while the sender pipelines: its Acks interleave
    // with the sends on the node's input channel.
    let mut rx = Client::connect(&node.socket).unwrap();
    rx.register("ipn:1.5").unwrap();
    let receiver = std::thread::spawn(move || {
        let deadline = Instant::now() + LIMIT;
        let mut got: BTreeMap<u64, Bytes> = BTreeMap::new();
        let mut extra = 0u64;
        while (got.len() as u64) < N && Instant::now() < deadline {
            let Some(r) = rx.recv(Some(Duration::from_secs(1))).unwrap() else {
                continue;
            };
            let mut idx = [0u8; 8];
            idx.copy_from_slice(&r.payload[..8]);
            if got
                .insert(u64::from_be_bytes(idx), r.payload.clone())
                .is_some()
            {
                extra += 1;
            }
            rx.ack(&r).unwrap();
        }
        (got, extra)
    });
    let mut tx = Client::connect(&node.socket).unwrap();
    let mut ids = Vec::new();
    let mut next = 0u64;
    while next < N || tx.pending_sends() > 0 {
        while next < N && tx.pending_sends() < WINDOW {
            tx.submit(SendArgs {
                source: "ipn:1.1".into(),
                destination: "ipn:1.5".into(),
                lifetime_ms: 0,
                report_flags: 0,
                priority: 1,
                payload: payload(next),
            })
            .unwrap();
            next += 1;
        }
        ids.push(tx.next_send_result().unwrap());
    }
    assert_eq!(ids.len() as u64, N);
    for w in ids.windows(2) {
        assert!(
            (w[1].creation_ms, w[1].sequence) > (w[0].creation_ms, w[0].sequence),
            "answers in submission order with increasing creation timestamps: {:?} {:?}",
            w[0],
            w[1]
        );
    }
    let (got, extra) = receiver.join().unwrap();
    assert_eq!(extra, 0, "no bundle delivered twice");
    assert_eq!(got.len() as u64, N);
    for (i, p) in &got {
        assert!(*p == payload(*i), "payload of bundle {i} differs");
    }
    let st = node.status();
    assert_eq!(st.bundles.created, N);
    // Informational: how much the node grouped (timing dependent, so not asserted).
    eprintln!(
        "{N} sends, window {WINDOW}: {} store commits in all",
        st.store.commits
    );
}

#[test]
fn cli_send_with_a_window_crosses_tcpcl_once_each() {
    const N: u64 = 2000;
    let dir = TempDir::new("pipeline-tcpcl");
    let (l1, l2) = (free_tcp_port(), free_tcp_port());
    let n1 = NodeProc::start(&dir.0, &tcp_spec(1, l1, 2, l2));
    let n2 = NodeProc::start(&dir.0, &tcp_spec(2, l2, 1, l1));
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&n2.socket),
        "--endpoint",
        "ipn:2.1",
        "--count",
        &N.to_string(),
        "--timeout",
        "40",
        "--print",
    ]);
    let send = run(
        &[
            "send",
            "--socket",
            s(&n1.socket),
            "--dst",
            "ipn:2.1",
            "--size",
            "200",
            "--count",
            &N.to_string(),
            "--window",
            "64",
            "--quiet",
        ],
        LIMIT,
    );
    let err = String::from_utf8_lossy(&send.stderr);
    assert!(send.status.success(), "{err}");
    assert!(err.contains(&format!("sent {N} bundles")), "{err}");
    let out = recv.wait(LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `recv ID len=200 dtnkit:<index>:filler`: every index exactly once.
    let mut seen = vec![0u32; N as usize];
    for line in text.lines() {
        assert!(line.contains(" len=200 dtnkit:"), "{line}");
        let idx: usize = line
            .split(" dtnkit:")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no index in {line}"));
        seen[idx] += 1;
    }
    assert!(seen.iter().all(|&k| k == 1), "each bundle once: {seen:?}");
    assert_eq!(n1.status().bundles.created, N);
}

#[test]
fn refused_for_a_full_store_then_resubmitted_until_stored_exactly_once() {
    const N: u64 = 6;
    let dir = TempDir::new("pipeline-full");
    let (l1, l2) = (free_tcp_port(), free_tcp_port());
    // Room for two 100 kB bundles; the neighbour is down at first.
    let mut a = tcp_spec(1, l1, 2, l2);
    a.quota = 250_000;
    let n1 = NodeProc::start(&dir.0, &a);
    // Without waiting, a refusal ends the command (after the bundles in flight are answered).
    let quick = run(
        &[
            "send",
            "--socket",
            s(&n1.socket),
            "--dst",
            "ipn:2.1",
            "--size",
            "100000",
            "--count",
            "4",
            "--window",
            "8",
            "--quiet",
        ],
        LIMIT,
    );
    let err = String::from_utf8_lossy(&quick.stderr);
    assert_eq!(quick.status.code(), Some(1), "{err}");
    assert!(err.contains("store full"), "{err}");
    assert!(err.contains("sent 2 of 4 bundles"), "{err}");
    let st = n1.status();
    assert_eq!(st.store.bundles, 2);
    assert_eq!(st.bundles.created, 2);
    // With --store-full-wait the refused bundles are resubmitted until the store has room.
    let send = Proc::spawn(&[
        "send",
        "--socket",
        s(&n1.socket),
        "--dst",
        "ipn:2.1",
        "--size",
        "100000",
        "--count",
        &N.to_string(),
        "--window",
        "8",
        "--store-full-wait",
        "40",
        "--quiet",
    ]);
    let deadline = Instant::now() + LIMIT;
    while n1.status().bundles.refused_store_full < 4 {
        assert!(Instant::now() < deadline, "never refused");
        std::thread::sleep(Duration::from_millis(50));
    }
    let n2 = NodeProc::start(&dir.0, &tcp_spec(2, l2, 1, l1));
    let out_dir = dir.0.join("out");
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&n2.socket),
        "--endpoint",
        "ipn:2.1",
        "--count",
        &(N + 2).to_string(),
        "--timeout",
        "40",
        "--out-dir",
        s(&out_dir),
    ]);
    let sent = send.wait(LIMIT);
    let err = String::from_utf8_lossy(&sent.stderr);
    assert!(sent.status.success(), "{err}");
    assert!(err.contains(&format!("sent {N} bundles")), "{err}");
    let got = recv.wait(LIMIT);
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    // Two from the first command (indices 0 and 1) and N from the second, each exactly once.
    let mut prefixes: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| {
            let d = std::fs::read(e.unwrap().path()).unwrap();
            assert_eq!(d.len(), 100_000);
            let head = String::from_utf8_lossy(&d[..16]).to_string();
            head.split(':').take(2).collect::<Vec<_>>().join(":")
        })
        .collect();
    prefixes.sort();
    let mut want: Vec<String> = (0..2).chain(0..N).map(|i| format!("dtnkit:{i}")).collect();
    want.sort();
    assert_eq!(prefixes, want);
    assert_eq!(n1.status().bundles.created, 2 + N);
}

/// Bundle `i` of `len` bytes: its index (8 bytes) then deterministic data.
fn indexed(i: u64, len: usize) -> Bytes {
    let mut p = i.to_be_bytes().to_vec();
    p.extend_from_slice(&data(len - 8, i));
    Bytes::from(p)
}

fn local_send(dst: &str, payload: Bytes) -> SendArgs {
    SendArgs {
        source: "ipn:1.1".into(),
        destination: dst.into(),
        lifetime_ms: 0,
        report_flags: 0,
        priority: 1,
        payload,
    }
}

/// An application that registered and then stops reading holds back only its own deliveries:
/// the node keeps answering another application's sends and status requests, and once the slow
/// reader reads it still has its connection and gets every bundle, whole and in order. (The
/// agent thread used to write deliveries itself: it blocked on the full socket and dropped the
/// slow reader after 10 s.)
#[test]
fn a_client_that_stops_reading_stalls_only_its_own_deliveries() {
    const BIG: u64 = 24; // 24 MB for the slow reader: three times its delivery backlog
    const BIG_LEN: usize = 1_000_000;
    let dir = TempDir::new("slow-reader");
    let node = NodeProc::start(&dir.0, &NodeSpec::new(1, free_port()));
    let mut slow = Client::connect(&node.socket).unwrap();
    slow.register("ipn:1.5").unwrap();
    let mut fast = Client::connect(&node.socket).unwrap();
    fast.register("ipn:1.6").unwrap();
    let mut tx = Client::connect(&node.socket).unwrap();
    for i in 0..BIG {
        tx.send(local_send("ipn:1.5", indexed(i, BIG_LEN))).unwrap();
    }
    // The slow reader has read nothing; the node still serves everyone else.
    for i in 0..20 {
        tx.send(local_send("ipn:1.6", indexed(i, 100))).unwrap();
        let r = fast
            .recv(Some(Duration::from_secs(20)))
            .unwrap()
            .expect("a delivery to the reading client while another is stalled");
        assert_eq!(r.payload, indexed(i, 100));
        fast.ack(&r).unwrap();
    }
    assert!(!tx.status().unwrap().is_empty());
    // Now it reads: everything, in order, on the same connection.
    for i in 0..BIG {
        let r = slow
            .recv(Some(Duration::from_secs(20)))
            .unwrap()
            .unwrap_or_else(|| panic!("bundle {i} not delivered to the slow reader"));
        assert!(
            r.payload == indexed(i, BIG_LEN),
            "bundle {i} out of order or damaged"
        );
        slow.ack(&r).unwrap();
    }
    // Asked on the slow reader's connection, so its acknowledgments are processed first.
    let st = slow.node_status().unwrap();
    assert_eq!(st.bundles.delivered, BIG + 20);
}
