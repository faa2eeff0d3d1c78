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

/// Every bundle log line of node directory `dir` (the current log and the ones set aside at
/// each restart), split into fields.
fn bundle_log_lines(dir: &std::path::Path) -> Vec<Vec<String>> {
    let mut lines = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("bundles.csv") {
            for l in std::fs::read_to_string(&p).unwrap().lines() {
                lines.push(l.split(',').map(str::to_string).collect());
            }
        }
    }
    lines
}

/// A node killed with SIGKILL while idle leaves a complete bundle log (it writes its logs out
/// before it sleeps), and a bundle whose lifetime ended while the node was down is logged as
/// expired when the node comes back.
#[test]
fn the_bundle_log_survives_a_kill_and_logs_what_expired_while_down() {
    let dir = TempDir::new("crashlog");
    let mut n1 = NodeProc::start(&dir.0, &NodeSpec::new(1, free_port()));
    let s1 = n1.socket.to_str().unwrap().to_string();
    // No route to node 2: both bundles wait in the store.
    let short = run(
        &[
            "send",
            "--socket",
            &s1,
            "--dst",
            "ipn:2.1",
            "--size",
            "100",
            "--lifetime-ms",
            "1500",
        ],
        Duration::from_secs(30),
    );
    assert!(short.status.success(), "{short:?}");
    let long = run(
        &["send", "--socket", &s1, "--dst", "ipn:2.1", "--size", "100"],
        Duration::from_secs(30),
    );
    assert!(long.status.success(), "{long:?}");
    let id = |o: &std::process::Output| {
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let id = out
            .lines()
            .find_map(|l| l.strip_prefix("sent "))
            .unwrap_or_else(|| panic!("no id in {out:?}"))
            .to_string();
        // "ipn:1.0 849210759169.0" → (source, creation ms, sequence)
        let (source, ts) = id.split_once(' ').unwrap();
        let (ms, seq) = ts.split_once('.').unwrap();
        (source.to_string(), ms.to_string(), seq.to_string())
    };
    let (short, long) = (id(&short), id(&long));
    let node_dir = n1.spec_dir.clone();
    let logged = |event: &str, b: &(String, String, String)| {
        bundle_log_lines(&node_dir)
            .iter()
            .any(|f| f.len() > 4 && f[1] == event && f[2] == b.0 && f[3] == b.1 && f[4] == b.2)
    };
    // Idle now: the node has written its log out.
    std::thread::sleep(Duration::from_millis(500));
    n1.kill();
    assert!(
        logged("created", &short) && logged("created", &long),
        "the log of the killed node lacks the bundles it created: {:?}",
        bundle_log_lines(&node_dir)
    );
    std::thread::sleep(Duration::from_millis(1600));
    n1.restart();
    assert_eq!(
        n1.status().store.bundles,
        1,
        "the short-lived bundle expired"
    );
    std::thread::sleep(Duration::from_millis(500));
    n1.kill();
    assert!(
        logged("expired", &short) && !logged("expired", &long),
        "the restarted node's log lacks the expiry: {:?}",
        bundle_log_lines(&node_dir)
    );
}
