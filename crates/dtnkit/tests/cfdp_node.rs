//! CFDP through real processes: a 1 GB class-2 transfer with CRC-32 over BP/LTP between two
//! `dtnkit node`s (one PDU per bundle; `DTNKIT_CFDP_BP_BYTES` changes the size),
//! and a receiving entity killed with SIGKILL three times during a class-2 transfer that still
//! ends with the right file (its state directory carries the transaction over).

mod node_support;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use node_support::*;

/// A `dtnkit cfdp serve` process whose stdout (JSON lines) is read by a thread.
struct Serve {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    /// The "ready" line (it says how many transactions were restored).
    ready: String,
}

impl Serve {
    fn start(args: &[String]) -> Self {
        let mut child = std::process::Command::new(BIN)
            .arg("cfdp")
            .arg("serve")
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("spawn serve");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut s = Self {
            child,
            lines,
            ready: String::new(),
        };
        s.ready = s.wait_for("\"ready\"", Duration::from_secs(20));
        s
    }

    /// The first line containing `needle`, within `limit`.
    fn wait_for(&self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => {}
                Err(_) => panic!("serve printed no line with {needle} within {limit:?}"),
            }
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Checks that `put` exited successfully and returns the receiver's "finished" line.
fn put_succeeded(out: &std::process::Output, serve: &Serve) -> String {
    assert!(
        out.status.success(),
        "put failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serve.wait_for("\"finished\"", Duration::from_secs(30))
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn class2_over_bp_and_ltp_between_two_nodes() {
    let dir = TempDir::new("cfdp-bp");
    let (p1, p2) = (free_port(), free_port());
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);
    let root = dir.0.join("rx");
    let size: usize = std::env::var("DTNKIT_CFDP_BP_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000_000);
    let src = dir.0.join("src.bin");
    let expected = {
        let d = data(size, 7);
        std::fs::write(&src, &d).unwrap();
        sha256_hex(&d)
    };
    let serve = Serve::start(&s(&[
        "--root",
        root.to_str().unwrap(),
        "--id",
        "2",
        "--node",
        n2.socket.to_str().unwrap(),
        "--json",
    ]));
    let started = Instant::now();
    let out = run(
        &[
            "cfdp",
            "put",
            src.to_str().unwrap(),
            "2:in/big.bin",
            "--id",
            "1",
            "--node",
            n1.socket.to_str().unwrap(),
            "--checksum",
            "crc32",
            "--segment-size",
            "60000",
            "--json",
            "--quiet",
        ],
        Duration::from_secs(600),
    );
    let secs = started.elapsed().as_secs_f64();
    let fin = put_succeeded(&out, &serve);
    assert!(
        fin.contains("\"NoError\"") && fin.contains("\"delivery_complete\":true"),
        "{fin}"
    );
    let got = std::fs::read(root.join("in/big.bin")).unwrap();
    assert_eq!(got.len(), size);
    assert_eq!(sha256_hex(&got), expected);
    eprintln!(
        "CFDP over BP/LTP: {size} bytes in {secs:.2} s = {:.0} Mb/s",
        size as f64 * 8.0 / secs / 1e6
    );
}

#[test]
fn receiving_entity_killed_three_times_still_gets_the_file() {
    let dir = TempDir::new("cfdp-kill");
    let port = free_port();
    let root = dir.0.join("rx");
    let state = dir.0.join("state");
    let size = 8 << 20;
    let src = dir.0.join("src.bin");
    std::fs::write(&src, data(size, 11)).unwrap();
    let serve_args = s(&[
        "--root",
        root.to_str().unwrap(),
        "--id",
        "2",
        "--udp",
        &format!("127.0.0.1:{port}"),
        "--state",
        state.to_str().unwrap(),
        "--nak-timer-ms",
        "200",
        "--json",
    ]);
    let mut serve = Serve::start(&serve_args);
    // 8 MiB at 16 Mb/s: about 4.2 s of data, killed three times meanwhile.
    let put = Proc::spawn(&[
        "cfdp",
        "put",
        src.to_str().unwrap(),
        "2:killed.bin",
        "--id",
        "1",
        "--peer",
        &format!("2=127.0.0.1:{port}"),
        "--rate",
        "16e6",
        "--ack-timer-ms",
        "300",
        "--ack-limit",
        "100",
        "--inactivity-s",
        "60",
        "--json",
        "--quiet",
    ]);
    let mut restored = Vec::new();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(900));
        serve.kill();
        std::thread::sleep(Duration::from_millis(300));
        serve = Serve::start(&serve_args);
        restored.push(serve.ready.clone());
    }
    let out = put.wait(Duration::from_secs(120));
    let fin = put_succeeded(&out, &serve);
    assert!(fin.contains("\"NoError\""), "{fin}");
    let got = std::fs::read(root.join("killed.bin")).unwrap();
    assert_eq!(got.len(), size);
    assert_eq!(sha256_hex(&got), sha256_hex(&data(size, 11)));
    // Nothing left behind: no partial file, no stored state.
    let partial: Vec<_> = std::fs::read_dir(root.join(".cfdp-partial"))
        .map(|d| d.filter_map(Result::ok).collect())
        .unwrap_or_default();
    assert!(partial.is_empty(), "{partial:?}");
    let states: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "snap"))
        .collect();
    assert!(states.is_empty(), "{states:?}");
    // Each restart resumed the transaction from its stored state.
    for r in &restored {
        assert!(r.contains("\"restored\":1"), "{restored:?}");
    }
}

/// `serve` running under a node reports its counters to the node, which shows them in its
/// status while `serve` runs (issue: a hostile peer's refused input is seen where the node's
/// own counters are) and forgets them when it ends.
#[test]
fn serve_under_a_node_shows_its_counters_in_the_node_status() {
    let dir = TempDir::new("cfdp-counters");
    let node = NodeProc::start(&dir.0, &NodeSpec::new(2, free_port()));
    let root = dir.0.join("rx");
    let mut serve = Serve::start(&s(&[
        "--root",
        root.to_str().unwrap(),
        "--id",
        "2",
        "--node",
        node.socket.to_str().unwrap(),
        "--json",
    ]));
    // Two bundles to serve's endpoint whose payloads are no CFDP PDU.
    send_ok(&node.socket, "ipn:2.64", 40, 2, &[]);
    serve.wait_for("\"refused\"", Duration::from_secs(20));
    let deadline = Instant::now() + Duration::from_secs(10);
    let app = loop {
        let st = node.status();
        let cfdp = st.apps.iter().find(|a| a.app == "cfdp").cloned();
        if let Some(a) = cfdp.filter(|a| a.counters.get("malformed_pdus") == Some(&2)) {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "node status never showed serve's 2 malformed PDUs: {:?}",
            st.apps
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(app.connection > 0 && app.reported_ms > 0, "{app:?}");
    assert_eq!(app.counters.get("transactions_completed"), Some(&0));
    assert_eq!(app.counters.get("pdus_received"), Some(&2));
    // The human view lists it too.
    let out = run(
        &["status", "--socket", node.socket.to_str().unwrap()],
        Duration::from_secs(10),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("app cfdp (connection") && text.contains("malformed_pdus"),
        "{text}"
    );
    // Gone with the connection.
    serve.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node.status().apps.is_empty() {
        assert!(Instant::now() < deadline, "counters outlived serve");
        std::thread::sleep(Duration::from_millis(100));
    }
}
