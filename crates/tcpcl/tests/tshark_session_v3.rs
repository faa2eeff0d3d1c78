//! Wireshark oracle for TCPCLv3: a complete session (contact headers, BPv7 bundles in segments
//! both ways with an ACK_SEGMENT per segment, held final acknowledgments released later,
//! keepalives, SHUTDOWN) is written to a pcap with synthesised TCP framing and decoded by
//! tshark's TCPCL dissector (which speaks v3 too) and its BPv7 dissector: no malformed packet
//! and no error-level expert info.
//!
//! Wireshark's v3 dissector (4.0, and its master branch when this was written) has two gaps:
//! it frames LENGTH but does not dissect it ("Message type is unknown", an error), and it
//! reads a second octet after a REFUSE_BUNDLE, whose reason RFC 7242 puts in the low bits of
//! the message's single octet (an exception: "Malformed Packet"). A second session with
//! LENGTH and a refusal checks that tshark flags nothing but frames carrying those two
//! messages; the octets themselves are checked against RFC 7242's layouts in
//! `tests/v3_codec.rs`. Fails if tshark is missing.

mod harness;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use harness::pcap::{bpv7_bundle, pcap_of, tshark_fields, tshark_frames, FLAGGED};
use harness::{cfg, Dir, Pair3};
use tcpcl::{Event, RefuseReason, SessTermReason};

/// Runs the session: three bundles one way, one back, the receiver confirming with `answers`,
/// keepalives, a graceful end. Returns the wire.
fn session(request_length: bool, answers: [bool; 3]) -> Vec<(Dir, Vec<u8>)> {
    let mut a = cfg("ipn:1.0");
    a.keepalive = 15;
    a.v3.max_segment_size = 40_000;
    let mut b = cfg("ipn:2.0");
    b.defer_final_ack = true;
    b.v3.request_length = request_length;
    let mut p = Pair3::new(a, b);
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
    for (id, ok) in answers.iter().enumerate() {
        p.b.confirm_transfer(p.now, id as u64, *ok).expect("held");
        p.pump();
    }
    // Keepalives both ways, then a graceful end.
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
    for (i, ok) in answers.iter().enumerate() {
        let token = i as u64;
        assert!(p.a_events.contains(&if *ok {
            Event::TransferAcked { token }
        } else {
            Event::TransferRefused {
                token,
                reason: RefuseReason::Retransmit,
            }
        }));
    }
    assert!(p.a.stats().keepalives_sent >= 1);
    p.wire
}

fn write_pcap(name: &str, wire: &[(Dir, Vec<u8>)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tcpcl3-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&pcap_of(wire)))
        .expect("write pcap");
    path
}

#[test]
fn tshark_decodes_a_v3_session_without_errors() {
    let path = write_pcap("clean.pcap", &session(false, [true; 3]));
    let file = path.to_str().expect("utf-8 path");
    // The dissector must see v3 contact headers and every message type we sent.
    assert_eq!(
        tshark_fields(file, "tcpcl.contact_hdr.version"),
        ["3", "3"],
        "contact headers"
    );
    let all = tshark_fields(file, "tcpcl.pkt_type");
    // DATA_SEGMENT, ACK_SEGMENT, KEEPALIVE, SHUTDOWN.
    for code in ["1", "2", "4", "5"] {
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
    let _ = std::fs::remove_file(&path);
}

#[test]
fn tshark_flags_nothing_but_its_length_and_refusal_gaps() {
    let path = write_pcap("gaps.pcap", &session(true, [true, false, true]));
    let file = path.to_str().expect("utf-8 path");
    // LENGTH (6) and REFUSE_BUNDLE (3) are on the wire.
    let gaps = tshark_frames(file, "tcpcl.pkt_type == 6 || tcpcl.pkt_type == 3");
    assert!(gaps.len() >= 2, "no LENGTH or refusal dissected: {gaps:?}");
    for f in tshark_frames(file, FLAGGED) {
        assert!(
            gaps.contains(&f),
            "frame {f} flagged but carries neither LENGTH nor REFUSE_BUNDLE (gaps: {gaps:?})"
        );
    }
    let _ = std::fs::remove_file(&path);
}
