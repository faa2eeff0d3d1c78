//! LTP authentication (RFC 5327) between two `dtnkit node` processes on loopback, keys read
//! from files: bundles move on the authenticated spans, and segments injected from a UDP
//! socket on the peer's IP address (which `[ltp] accept_from = "peer_ip"` lets through) are
//! refused and counted by reason unless they carry the span's key and key id. A correctly
//! signed injected block is accepted, which shows the forged ones reached the check.

mod node_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use ltp::auth::SpanAuth;
use ltp::{CheckpointInfo, Content, DataSegment, Segment, SegmentType, SessionId};
use node_support::*;

const KEY_HEX: &str = "3f9a0c55d1e2b7a8c4f0e9d8a7b6c5d4e3f2a1b0";
const KEY_ID: &str = "pass-7";

fn key_bytes() -> Vec<u8> {
    (0..KEY_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&KEY_HEX[i..i + 2], 16).unwrap())
        .collect()
}

/// A whole block in one red segment from engine 1 (node 1's), session `number`: a bundle
/// from ipn:1.1 to ipn:2.1.
fn forged_block(number: u64) -> Segment {
    let bundle = bpv7::BundleBuilder::new(bpv7::Eid::ipn(1, 1), bpv7::Eid::ipn(2, 1))
        .creation(bpv7::CreationTimestamp::new(1_000, number))
        .lifetime_ms(3_600_000_000)
        .payload(b"forged".to_vec())
        .build()
        .unwrap()
        .encode();
    Segment {
        segment_type: SegmentType::RedCheckpointEorpEob,
        session: SessionId {
            originator: 1,
            number,
        },
        header_extensions: vec![],
        content: Content::Data(DataSegment {
            client_service_id: 1,
            offset: 0,
            data: Bytes::from(bundle),
            checkpoint: Some(CheckpointInfo {
                checkpoint_serial: 1,
                report_serial: 0,
            }),
        }),
        trailer_extensions: vec![],
    }
}

fn signed(auth: &SpanAuth, seg: &Segment) -> Vec<u8> {
    let mut v = Vec::new();
    auth.encode(seg, &mut v).unwrap();
    v
}

/// Polls node status until `done` holds (at most 15 s).
fn wait_status(node: &NodeProc, what: &str, done: impl Fn(&client::NodeStatus) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let st = node.status();
        if done(&st) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {st}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn authenticated_spans_move_bundles_and_refuse_forged_segments() {
    let dir = TempDir::new("ltp-auth");
    let key_file = dir.0.join("span.key");
    std::fs::write(
        &key_file,
        format!("# shared LTP key of nodes 1 and 2\n{KEY_HEX}\n"),
    )
    .unwrap();
    let auth_lines = format!(
        "auth_suite = \"hmac-sha1-80\"\nauth_key_file = \"{}\"\nauth_key_id = \"{KEY_ID}\"\n",
        key_file.display()
    );
    let (p1, p2) = (free_port(), free_port());
    let mut s1 = NodeSpec::new(1, p1);
    s1.spans.push((2, p2));
    // `extra` follows the node's only [[span]] table: these keys belong to it.
    s1.extra = auth_lines.clone();
    let mut s2 = NodeSpec::new(2, p2);
    s2.spans.push((1, p1));
    s2.extra = auth_lines;
    let n1 = NodeProc::start(&dir.0, &s1);
    let n2 = NodeProc::start(&dir.0, &s2);

    // Real traffic on the authenticated spans.
    let recv = spawn_recv(&n2.socket, "ipn:2.1", 10);
    send_ok(&n1.socket, "ipn:2.1", 10_000, 10, &[]);
    let out = recv.wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = n2.status();
    assert_eq!(before.ltp.auth_rejected, 0, "{before}");
    let blocks_before = before.ltp.blocks_received;
    assert!(blocks_before >= 1, "{before}");

    // Forgeries from the peer's IP address (another port: the default policy lets it speak
    // for engine 1), each a whole block holding a bundle for ipn:2.1.
    let right = SpanAuth::hmac_sha1_80(&key_bytes())
        .unwrap()
        .with_key_id(KEY_ID.as_bytes())
        .unwrap();
    let other_key = SpanAuth::hmac_sha1_80(b"a key an attacker guessed")
        .unwrap()
        .with_key_id(KEY_ID.as_bytes())
        .unwrap();
    let other_id = SpanAuth::hmac_sha1_80(&key_bytes())
        .unwrap()
        .with_key_id(b"pass-6")
        .unwrap();
    let mut tampered = signed(&right, &forged_block(0x7a00_0004));
    let mid = tampered.len() / 2;
    tampered[mid] ^= 0x20;
    let forged = [
        forged_block(0x7a00_0001).to_vec().unwrap(), // unauthenticated
        signed(&other_key, &forged_block(0x7a00_0002)), // another key
        signed(&other_id, &forged_block(0x7a00_0003)), // another key id
        tampered,                                    // right key, one bit changed
    ];
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = format!("127.0.0.1:{p2}");
    for dg in &forged {
        sock.send_to(dg, &target).unwrap();
    }
    // (`ltp.spans` is a copy the LTP thread refreshes every 200 ms.)
    wait_status(&n2, "four forged segments refused", |st| {
        st.ltp.auth_rejected >= 4 && st.ltp.spans[&1].auth_rejected.values().sum::<u64>() >= 4
    });
    // Give any (wrongly) accepted block time to be delivered before checking nothing was.
    std::thread::sleep(Duration::from_millis(500));
    let st = n2.status();
    assert_eq!(st.ltp.auth_rejected, 4, "{st}");
    let by_reason = &st.ltp.spans[&1].auth_rejected;
    assert_eq!(by_reason.get("missing"), Some(&1), "{st}");
    assert_eq!(by_reason.get("bad_value"), Some(&2), "{st}");
    assert_eq!(by_reason.get("wrong_key_id"), Some(&1), "{st}");
    assert_eq!(by_reason.get("wrong_suite"), Some(&0), "{st}");
    assert_eq!(st.ltp.blocks_received, blocks_before, "{st}");
    assert_eq!(st.ltp.import_sessions, 0, "no session was opened: {st}");
    assert_eq!(st.bundles.received, before.bundles.received, "{st}");
    // Node 1 refused nothing: everything node 2 sent it was authenticated.
    assert_eq!(n1.status().ltp.auth_rejected, 0);

    // Control: the same kind of block signed with the span's key and key id is taken (the
    // forgeries above reached the engine and were refused for their authentication only).
    sock.send_to(&signed(&right, &forged_block(0x7a00_0005)), &target)
        .unwrap();
    wait_status(&n2, "the correctly signed block delivered", |st| {
        st.ltp.blocks_received == blocks_before + 1
    });
    assert_eq!(n2.status().ltp.auth_rejected, 4);
}

#[test]
fn bad_auth_configuration_names_the_field_and_file() {
    let dir = TempDir::new("ltp-auth-cfg");
    let port = free_port();
    let mut spec = NodeSpec::new(2, port);
    spec.spans.push((1, free_port()));
    let cases = [
        (
            "auth_suite = \"hmac-md5\"\n".to_string(),
            vec!["span[0].auth_suite", "hmac-md5"],
        ),
        (
            "auth_suite = \"hmac-sha1-80\"\n".to_string(),
            vec!["span[0].auth_key_file", "absent"],
        ),
        (
            format!(
                "auth_suite = \"hmac-sha1-80\"\nauth_key_file = \"{}\"\n",
                dir.0.join("missing.key").display()
            ),
            vec!["span[0].auth_key_file", "missing.key"],
        ),
        (
            format!(
                "auth_suite = \"rsa-sha256\"\nauth_private_key_file = \"{0}\"\nauth_peer_public_key_file = \"{0}\"\n",
                dir.0.join("notpem.txt").display()
            ),
            vec!["span[0].auth_private_key_file", "notpem.txt", "PEM"],
        ),
        (
            "auth_key_id = \"x\"\n".to_string(),
            vec!["span[0].auth_suite"],
        ),
    ];
    std::fs::write(dir.0.join("notpem.txt"), "hello\n").unwrap();
    for (i, (extra, want)) in cases.iter().enumerate() {
        let nd = dir.0.join(format!("c{i}"));
        std::fs::create_dir_all(&nd).unwrap();
        let mut cfg = format!(
            "node = 2\nbind = \"127.0.0.1:{port}\"\n[store]\npath = \"store\"\n\n[[span]]\npeer = 1\naddress = \"127.0.0.1:{}\"\n",
            free_port()
        );
        cfg.push_str(extra);
        let file = nd.join("node.toml");
        std::fs::write(&file, cfg).unwrap();
        let out = run(
            &["node", "--config", file.to_str().unwrap()],
            Duration::from_secs(20),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "case {i} started: {err}");
        for w in want {
            assert!(err.contains(w), "case {i}: {w:?} not in {err}");
        }
    }
}
