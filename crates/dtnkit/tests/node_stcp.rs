//! Two `dtnkit node` processes connected by STCP only (ION's and HDTN's simple TCP: a 4-byte
//! length before each bundle): bundles of 10 B, 100 kB and 5 MB arrive intact in both
//! directions, a bundle sent before the peer is up is delivered once the connector's back-off
//! reaches it, and a peer that announces a bundle above `[stcp] max_bundle_size` is cut off
//! with a log line naming the lengths while the node keeps working.

mod node_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// A node with STCP on `listen` sending to `peer` at `peer_port`.
fn stcp_spec(node: u64, listen: u16, peer: u64, peer_port: u16, extra: &str) -> NodeSpec {
    let mut n = NodeSpec::new(node, free_port());
    n.extra = format!(
        "\n[stcp]\nlisten = \"127.0.0.1:{listen}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 400\n{extra}\n\
         [[stcp_peer]]\npeer = {peer}\naddress = \"127.0.0.1:{peer_port}\"\n"
    );
    n
}

/// Writes the files of `sizes` and sends them from `from` to `dst`; returns the lines `recv
/// --hash` prints for them.
fn send_files(
    dir: &TempDir,
    from: &NodeProc,
    dst: &str,
    sizes: &[usize],
    seed: u64,
) -> Vec<String> {
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
    want
}

fn spawn_recv_hash(dir: &TempDir, to: &NodeProc, dst: &str, count: usize, seed: u64) -> Proc {
    let out_dir = dir.0.join(format!("out-{seed}"));
    Proc::spawn(&[
        "recv",
        "--socket",
        s(&to.socket),
        "--endpoint",
        dst,
        "--count",
        &count.to_string(),
        "--timeout",
        "40",
        "--hash",
        "--out-dir",
        s(&out_dir),
    ])
}

fn check_received(recv: Proc, want: &[String]) {
    let out = recv.wait(LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for w in want {
        assert!(text.contains(w), "missing {w} in {text}");
    }
}

fn transfer(dir: &TempDir, from: &NodeProc, to: &NodeProc, dst: &str, sizes: &[usize], seed: u64) {
    let recv = spawn_recv_hash(dir, to, dst, sizes.len(), seed);
    let want = send_files(dir, from, dst, sizes, seed);
    check_received(recv, &want);
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn stcp_carries_10b_100kb_5mb_both_ways_after_reconnecting() {
    let dir = TempDir::new("stcp");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let n1 = NodeProc::start(&dir.0, &stcp_spec(1, t1, 2, t2, ""));
    // Node 2 is not running yet: node 1 keeps the bundle and retries the connection.
    let early = send_files(&dir, &n1, "ipn:2.1", &[2_000], 5);
    std::thread::sleep(Duration::from_millis(300));
    let st = n1.status();
    assert_eq!(st.store.bundles, 1, "{st}");
    assert!(st.stcp.as_ref().unwrap().connect_failures >= 1, "{st}");
    let n2 = NodeProc::start(&dir.0, &stcp_spec(2, t2, 1, t1, ""));
    check_received(spawn_recv_hash(&dir, &n2, "ipn:2.1", 1, 5), &early);

    let sizes = [10usize, 100_000, 5_000_000];
    transfer(&dir, &n1, &n2, "ipn:2.1", &sizes, 10);
    transfer(&dir, &n2, &n1, "ipn:1.1", &sizes, 20);
    wait_until("empty stores", || {
        n1.status().store.bundles == 0 && n2.status().store.bundles == 0
    });
    let st = assert_status_round_trips(&n1);
    let c = st.stcp.as_ref().expect("stcp section");
    assert_eq!(c.bundles_sent, 4, "{st}");
    assert!(c.bytes_sent >= 5_102_000, "{st}");
    assert_eq!(c.bundles_received, 3, "{st}");
    assert_eq!((c.connections_out, c.connections_in), (1, 1), "{st}");
    assert_eq!((c.frames_refused, c.bundles_not_stored), (0, 0), "{st}");
    assert_eq!(
        st.contacts.neighbours.get(&2).and_then(|n| n.cla),
        Some(client::status::Cla::Stcp),
        "{st}"
    );
    assert!(st.tcpcl.is_none() && st.ltp.segments_sent == 0, "{st}");
}

#[test]
fn stcp_refuses_an_oversize_length_and_keeps_working() {
    let dir = TempDir::new("stcp-oversize");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let n2 = NodeProc::start(
        &dir.0,
        &stcp_spec(2, t2, 1, t1, "max_bundle_size = 100000\nkeepalive_s = 1\n"),
    );
    let n1 = NodeProc::start(&dir.0, &stcp_spec(1, t1, 2, t2, "keepalive_s = 1\n"));
    // A peer that sends a keepalive, then announces 4 GiB - 16 bytes.
    let mut raw = TcpStream::connect(("127.0.0.1", t2)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(&[0, 0, 0, 0]).unwrap();
    raw.write_all(&0xffff_fff0u32.to_be_bytes()).unwrap();
    raw.write_all(&[7; 1000]).unwrap();
    // The node closes the connection: EOF (or a reset) within the bound.
    let mut b = [0u8; 16];
    let closed = match raw.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(closed, "the node kept the connection open");
    wait_until("the refusal in status", || {
        n2.status().stcp.unwrap().frames_refused == 1
    });
    let log = std::fs::read_to_string(n2.spec_dir.join("node.err")).unwrap();
    assert!(
        log.contains(
            "peer declared a 4294967280-byte bundle, above the limit of 100000 bytes \
             (max bundle size); the connection is closed (limit: [stcp] max_bundle_size)"
        ),
        "{log}"
    );
    // The node still receives over STCP, and keepalives arrive on the idle connection.
    transfer(&dir, &n1, &n2, "ipn:2.1", &[10_000, 90_000], 30);
    wait_until("a keepalive from node 1", || {
        n2.status().stcp.unwrap().keepalives_received >= 2
    });
    let c = n2.status().stcp.unwrap();
    assert_eq!(c.bundles_received, 2, "{c:?}");
    assert_eq!(c.frames_refused, 1, "{c:?}");
    assert!(n1.status().stcp.unwrap().keepalives_sent >= 1);
}
