//! Two `dtnkit node` processes whose only convergence layer between them is UDPCL: a small
//! bundle travels in one datagram, a 200 kB bundle is fragmented proactively into datagrams
//! and reassembled at the destination, and both arrive intact in both directions.

mod node_support;

use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn udp_spec(node: u64, ltp_port: u16, udp_port: u16, peer: u64, peer_port: u16) -> NodeSpec {
    let mut n = NodeSpec::new(node, ltp_port);
    n.extra = format!(
        "\n[udpcl]\nbind = \"127.0.0.1:{udp_port}\"\nmax_datagram = 16000\n\n[[udp_peer]]\npeer = {peer}\naddress = \"127.0.0.1:{peer_port}\"\n"
    );
    n
}

fn transfer(dir: &TempDir, from: &NodeProc, to: &NodeProc, dst: &str, tag: &str) {
    let sizes = [10usize, 200_000];
    let out_dir = dir.0.join(format!("out-{tag}"));
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&to.socket),
        "--endpoint",
        dst,
        "--count",
        "2",
        "--timeout",
        "30",
        "--hash",
        "--out-dir",
        s(&out_dir),
    ]);
    let mut want = Vec::new();
    for (i, len) in sizes.iter().enumerate() {
        let f = dir.0.join(format!("{tag}-{i}.bin"));
        let d = data(*len, i as u64 + 7);
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

#[test]
fn udpcl_carries_small_and_fragmented_bundles_both_ways() {
    let dir = TempDir::new("udpcl");
    let (l1, l2, u1, u2) = (free_port(), free_port(), free_port(), free_port());
    let n1 = NodeProc::start(&dir.0, &udp_spec(1, l1, u1, 2, u2));
    let n2 = NodeProc::start(&dir.0, &udp_spec(2, l2, u2, 1, u1));
    transfer(&dir, &n1, &n2, "ipn:2.1", "fwd");
    transfer(&dir, &n2, &n1, "ipn:1.1", "back");
    let st = assert_status_round_trips(&n1);
    let udp = st.udpcl.as_ref().expect("udpcl section");
    assert!(udp.datagrams_sent >= 14, "{st}");
    assert!(udp.bundles_fragmented >= 1, "{st}");
    assert!(udp.datagrams_received >= 14, "{st}");
    // Nothing went over LTP.
    assert_eq!(st.ltp.segments_sent, 0, "{st}");
    // UDPCL has no acknowledgement: the sender's copies go once the kernel took them.
    let deadline = Instant::now() + Duration::from_secs(20);
    while n1.status().store.bundles != 0 {
        assert!(Instant::now() < deadline, "{}", n1.status());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The UDPCL receive thread checks each bundle's block CRCs (so the agent thread need not pass
/// over its bytes again); a bundle whose CRC fails there is still decoded by the agent, refused
/// and counted as malformed, and the good one beside it is delivered.
#[test]
fn a_udpcl_bundle_with_a_bad_crc_is_refused_and_counted() {
    let dir = TempDir::new("udpcl-crc");
    let (l2, u1, u2) = (free_port(), free_port(), free_port());
    let n2 = NodeProc::start(&dir.0, &udp_spec(2, l2, u2, 1, u1));
    let make =
        |name: &str, payload: &str| make_bundle(&dir.0.join(name), payload, &["--crc", "32c"]);
    let good = make("good.bundle", "a payload that arrives intact");
    let mut bad = make("bad.bundle", "a payload that is damaged on the way");
    let at = bad.len() - 10;
    bad[at] ^= 0x40;
    let sock = std::net::UdpSocket::bind(format!("127.0.0.1:{u1}")).unwrap();
    sock.send_to(&bad, format!("127.0.0.1:{u2}")).unwrap();
    sock.send_to(&good, format!("127.0.0.1:{u2}")).unwrap();
    let out = spawn_recv(&n2.socket, "ipn:2.1", 1).wait(Duration::from_secs(40));
    assert!(out.status.success(), "{out:?}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while n2.status().bundles.malformed != 1 {
        assert!(Instant::now() < deadline, "{}", n2.status());
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = n2.status();
    assert_eq!(st.bundles.delivered, 1, "{st}");
    assert_eq!(
        st.udpcl.as_ref().expect("udpcl").datagrams_received,
        2,
        "{st}"
    );
}
