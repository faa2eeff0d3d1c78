//! Crash safety over TCPCLv4: the receiving node is killed with SIGKILL repeatedly during a
//! 2000-bundle transfer and restarted; at the end every bundle reached the application exactly
//! once and the sender's store is empty. The receiving session holds each transfer's final
//! XFER_ACK until the agent has committed the bundle (`defer_final_ack`), so a kill between
//! reception and commit leaves the bundle with the sender, which forwards it again.

mod node_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use node_support::*;

const N: u64 = 2000;

fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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

#[test]
fn tcpcl_receiver_killed_repeatedly_loses_and_duplicates_nothing() {
    let dir = TempDir::new("tcpcl-crash");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let n1 = NodeProc::start(&dir.0, &tcp_spec(1, t1, 2, Some(t2)));
    let mut n2 = NodeProc::start(&dir.0, &tcp_spec(2, t2, 1, None));
    let s1 = n1.socket.to_str().unwrap().to_string();
    let s2 = n2.socket.to_str().unwrap().to_string();
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        &s2,
        "--endpoint",
        "ipn:2.1",
        "--count",
        &N.to_string(),
        "--timeout",
        "60",
    ]);
    let send = Proc::spawn(&[
        "send",
        "--socket",
        &s1,
        "--dst",
        "ipn:2.1",
        "--size",
        "200",
        "--count",
        &N.to_string(),
        "--quiet",
    ]);
    let t0 = Instant::now();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(700));
        n2.kill();
        std::thread::sleep(Duration::from_millis(100));
        n2.restart();
    }
    let sent = send.wait(Duration::from_secs(120));
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let out = recv.wait(Duration::from_secs(150));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "recv: {err}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut ids = HashSet::new();
    for line in text.lines() {
        assert!(line.starts_with("recv "), "{line}");
        assert!(
            ids.insert(line.split(" len=").next().unwrap().to_string()),
            "duplicate: {line}"
        );
    }
    assert_eq!(ids.len() as u64, N, "every bundle exactly once");
    // The sender's store drains: everything was acknowledged after the receiver's commit.
    let deadline = Instant::now() + Duration::from_secs(30);
    while n1.status()["store"]["bundles"] != 0 {
        assert!(
            Instant::now() < deadline,
            "sender store never emptied: {}",
            n1.status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("TCPCL crash test took {:?}", t0.elapsed());
}
