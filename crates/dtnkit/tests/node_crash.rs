//! Crash safety: the receiving node, or the middle node of three, is killed with SIGKILL
//! repeatedly during a 2000-bundle transfer and restarted; at the end every bundle reached the
//! application exactly once (none lost, none duplicated), and the stores upstream are empty.

mod node_support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use node_support::*;

const N: u64 = 2000;

#[test]
fn receiver_killed_repeatedly_loses_and_duplicates_nothing() {
    let dir = TempDir::new("crash");
    let (p1, p2) = (free_port(), free_port());
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    a.rto_ms = 100.0;
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    b.rto_ms = 100.0;
    let n1 = NodeProc::start(&dir.0, &a);
    let mut n2 = NodeProc::start(&dir.0, &b);
    kill_receiver_during_transfer(&n1, &mut n2, N);
}

#[test]
fn middle_node_killed_repeatedly_loses_and_duplicates_nothing() {
    let dir = TempDir::new("crash3");
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    a.routes.push((3, 2));
    a.rto_ms = 100.0;
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    b.spans.push((3, p3));
    b.rto_ms = 100.0;
    let mut c = NodeSpec::new(3, p3);
    c.spans.push((2, p2));
    c.rto_ms = 100.0;
    let n1 = NodeProc::start(&dir.0, &a);
    let mut n2 = NodeProc::start(&dir.0, &b);
    let n3 = NodeProc::start(&dir.0, &c);
    let s1 = n1.socket.to_str().unwrap().to_string();
    let s3 = n3.socket.to_str().unwrap().to_string();
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        &s3,
        "--endpoint",
        "ipn:3.1",
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
        "ipn:3.1",
        "--size",
        "200",
        "--count",
        &N.to_string(),
        "--quiet",
    ]);
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
    assert!(
        out.status.success(),
        "recv: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut ids = HashSet::new();
    for line in text.lines() {
        assert!(
            ids.insert(line.split(" len=").next().unwrap().to_string()),
            "duplicate: {line}"
        );
    }
    assert_eq!(ids.len() as u64, N, "every bundle exactly once");
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in [&n1, &n2] {
        while n.status().store.bundles != 0 {
            assert!(
                Instant::now() < deadline,
                "store never emptied: {}",
                n.status()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
