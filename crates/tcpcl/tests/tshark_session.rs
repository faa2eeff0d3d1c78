//! Wireshark oracle: a complete session (contact headers, SESS_INIT, three BPv7 bundles one
//! way and one back, acknowledgments, keepalive, SESS_TERM both ways) is written to a pcap
//! with synthesised Ethernet/IPv4/TCP framing (handshake, consistent sequence and
//! acknowledgment numbers, checksums, FIN), then decoded by tshark's TCPCLv4 and BPv7
//! dissectors, which must report no malformed packet and no error-level expert info.
//! Fails if tshark is missing.

mod harness;

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use harness::pcap::{bpv7_bundle, pcap_of, tshark_fields, tshark_frames, FLAGGED};
use harness::{cfg, Pair};
use tcpcl::{Event, SessTermReason};

#[test]
fn tshark_decodes_a_complete_session_without_errors() {
    let mut a = cfg("ipn:1.0");
    a.keepalive = 15;
    a.max_segment_size = 40_000;
    let mut b = cfg("ipn:2.0");
    b.segment_mru = 64_000;
    let mut p = Pair::new(a, b);
    p.establish();
    let bundles = [
        bpv7_bundle(10, 1),
        bpv7_bundle(100_000, 2),
        bpv7_bundle(250_000, 3),
    ];
    for (i, b) in bundles.iter().enumerate() {
        p.a.send_bundle(b.clone(), i as u64).expect("send");
    }
    p.b.send_bundle(bpv7_bundle(1_000, 4), 9).expect("send");
    p.pump();
    // A keepalive exchange, then a graceful end.
    p.run_until(Duration::from_secs(16));
    p.a.close(p.now, SessTermReason::Unknown);
    p.pump();
    assert!(p.a.is_closed() && p.b.is_closed());
    let got: Vec<&Bytes> = p
        .b_events
        .iter()
        .filter_map(|e| match e {
            Event::BundleReceived { bundle, .. } => Some(bundle),
            _ => None,
        })
        .collect();
    assert_eq!(got, bundles.iter().collect::<Vec<_>>());
    assert!(p.a.stats().keepalives_sent >= 1);

    let dir = std::env::temp_dir().join(format!("tcpcl-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("session.pcap");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&pcap_of(&p.wire)))
        .expect("write pcap");
    let file = path.to_str().expect("utf-8 path");
    // The dissectors must actually see our messages (otherwise an empty result means nothing).
    let all = tshark_fields(file, "tcpcl.v4.mhdr.type");
    for code in ["0x01", "0x02", "0x04", "0x05", "0x07"] {
        assert!(
            all.iter().any(|t| t == code),
            "message type {code} not dissected: {all:?}"
        );
    }
    let bundles_seen = tshark_frames(file, "bpv7");
    assert!(
        bundles_seen.len() >= 4,
        "bundles not dissected: {bundles_seen:?}"
    );
    let bad = tshark_frames(file, FLAGGED);
    assert!(bad.is_empty(), "tshark flagged frames {bad:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
