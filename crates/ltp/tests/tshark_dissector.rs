//! Interoperability oracle: Wireshark's LTP dissector must decode every segment we emit in
//! lossy sessions without a malformed flag or an error-level expert item, and must see every
//! segment type we sent.
//!
//! `tshark` is required (scripts/test.sh installs it); the test fails, not skips, without it.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::process::Command;
use std::time::Duration;

use common::{block, Action, Harness, Params, Sent};
use ltp::SegmentType;

/// Minimal pcap writer: LINKTYPE_RAW (101) carrying IPv4 + UDP, port 1113 both ways.
struct Pcap(Vec<u8>);

impl Pcap {
    fn new() -> Self {
        let mut v = Vec::new();
        v.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        v.extend_from_slice(&2u16.to_le_bytes());
        v.extend_from_slice(&4u16.to_le_bytes());
        v.extend_from_slice(&0i32.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&65_535u32.to_le_bytes());
        v.extend_from_slice(&101u32.to_le_bytes());
        Pcap(v)
    }

    fn packet(&mut self, t: Duration, src: [u8; 4], dst: [u8; 4], payload: &[u8]) {
        let udp_len = 8 + payload.len();
        let ip_len = 20 + udp_len;
        let mut ip = vec![
            0x45,
            0,
            (ip_len >> 8) as u8,
            ip_len as u8,
            0,
            0,
            0x40,
            0,
            64,
            17,
            0,
            0,
        ];
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let mut sum: u32 = ip
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        let csum = !(sum as u16);
        ip[10..12].copy_from_slice(&csum.to_be_bytes());
        ip.extend_from_slice(&1113u16.to_be_bytes());
        ip.extend_from_slice(&1113u16.to_be_bytes());
        ip.extend_from_slice(&(udp_len as u16).to_be_bytes());
        ip.extend_from_slice(&0u16.to_be_bytes()); // no UDP checksum (allowed over IPv4)
        ip.extend_from_slice(payload);
        self.0
            .extend_from_slice(&(t.as_secs() as u32).to_le_bytes());
        self.0.extend_from_slice(&t.subsec_micros().to_le_bytes());
        self.0.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        self.0.extend_from_slice(&(ip.len() as u32).to_le_bytes());
        self.0.extend_from_slice(&ip);
    }
}

/// Runs several lossy sessions and returns every datagram put on the wire.
fn lossy_traffic() -> Vec<Sent> {
    let mut all = Vec::new();
    let p = Params::standard();

    // Mixed block with red data loss and a lost checkpoint: RD, RD_CP_EORP, GD, GD_EOB,
    // RS, RA, retransmitted RD / RD_CP.
    let mut h = Harness::new(&p);
    h.set_script(|s| {
        if s.from == 0 && matches!(s.index, 2 | 3) {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(12_000, 1), 8_000, 1);
    // Red-only block whose checkpoint is lost once: RD_CP_EORP_EOB twice.
    h.send_a(block(6_000, 2), 6_000, 2);
    h.run();
    all.extend(h.sent);

    // Sender cancel: CS, CAS.
    let mut h = Harness::new(&p);
    let ltp::SendOutcome::Started(id) = h.send_a(block(40_000, 3), 40_000, 3) else {
        panic!("not started")
    };
    h.run_until(Duration::from_millis(2));
    h.engines[0].cancel_export(h.now, id);
    h.run();
    all.extend(h.sent);

    // Receiver cancel after report retransmissions: CR, CAR.
    let mut span_a = p.span.clone();
    span_a.rto = Some(Duration::from_millis(500));
    let mut span_b = p.span.clone();
    span_b.max_report_retransmissions = 1;
    let mut h = Harness::with_spans(&p, span_a, span_b);
    h.set_script(|s| {
        if s.from == 1 && s.seg.segment_type == SegmentType::Report {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(3_000, 4), 3_000, 4);
    h.run();
    all.extend(h.sent);
    all
}

/// Path of tshark and its (major, minor) version.
fn tshark() -> (String, (u32, u32)) {
    let out = Command::new("tshark").arg("--version").output();
    let Ok(out) = out.map_err(|e| e.to_string()).and_then(|o| {
        if o.status.success() {
            Ok(o)
        } else {
            Err("tshark --version failed".into())
        }
    }) else {
        panic!("tshark is not installed: scripts/test.sh installs it (apt-get install tshark)");
    };
    let text = String::from_utf8_lossy(&out.stdout);
    // "TShark (Wireshark) 4.0.17 (...)"
    let version = text
        .split_whitespace()
        .nth(2)
        .and_then(|v| {
            let mut it = v.split('.').map(|x| x.parse::<u32>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((0, 0));
    ("tshark".to_string(), version)
}

#[test]
fn wireshark_decodes_our_segments_without_errors() {
    let (tshark, version) = tshark();
    let traffic = lossy_traffic();
    let mut pcap = Pcap::new();
    let mut t = Duration::ZERO;
    let mut expected_types = BTreeSet::new();
    for s in &traffic {
        // Keep capture times increasing across the concatenated runs.
        t += Duration::from_micros(10);
        let (src, dst) = if s.from == 0 {
            ([10, 0, 0, 1], [10, 0, 0, 2])
        } else {
            ([10, 0, 0, 2], [10, 0, 0, 1])
        };
        pcap.packet(t, src, dst, &s.bytes);
        expected_types.insert(s.seg.segment_type.code());
    }
    for ty in SegmentType::ALL {
        assert!(
            expected_types.contains(&ty.code()),
            "scenario does not produce {ty:?}"
        );
    }
    let dir = std::env::temp_dir().join(format!("ltp-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ltp.pcap");
    std::fs::File::create(&file)
        .unwrap()
        .write_all(&pcap.0)
        .unwrap();

    // Wireshark before 4.2 throws an exception on *every* cancel-acknowledgment segment: its
    // LTP dissector adds a zero-length FT_STRINGZPAD item for the (empty, per RFC 5326
    // section 3.2.4) CAS/CAR content. Those frames are exempted from the malformed check on
    // such versions only; the type check below still requires them to be recognised.
    let filter = if version < (4, 2) {
        "(_ws.malformed || _ws.expert.severity == error) && !(ltp.type == 0xd || ltp.type == 0xf)"
    } else {
        "_ws.malformed || _ws.expert.severity == error"
    };
    let bad = Command::new(&tshark)
        .args(["-2", "-n", "-r"])
        .arg(&file)
        .args(["-d", "udp.port==1113,ltp", "-Y", filter])
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(bad.status.success(), "tshark failed");
    let bad_out = String::from_utf8_lossy(&bad.stdout);
    assert!(
        bad_out.trim().is_empty(),
        "tshark flags problems:\n{bad_out}"
    );

    let fields = Command::new(&tshark)
        .args(["-2", "-n", "-r"])
        .arg(&file)
        .args(["-d", "udp.port==1113,ltp", "-T", "fields", "-e", "ltp.type"])
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&fields.stdout);
    let seen: Vec<u8> = out
        .lines()
        .flat_map(|l| l.split(','))
        .filter_map(|v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(hex) => u8::from_str_radix(hex, 16).ok(),
                None => v.parse::<u8>().ok(),
            }
        })
        .collect();
    assert_eq!(
        seen.len(),
        traffic.len(),
        "every datagram dissected as LTP:\n{out}"
    );
    let seen: BTreeSet<u8> = seen.into_iter().collect();
    assert_eq!(seen, expected_types);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The oracle itself must be able to fail: a report whose claim count exceeds what the
/// datagram holds is flagged by the same filter.
#[test]
fn wireshark_flags_a_corrupted_segment() {
    let (tshark, _) = tshark();
    let mut pcap = Pcap::new();
    // RS: originator 1, session 1, serial 1, checkpoint 1, upper 10, lower 0, 100 claims.
    pcap.packet(
        Duration::ZERO,
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        &[8, 1, 1, 0, 1, 1, 10, 0, 100, 0, 5],
    );
    let dir = std::env::temp_dir().join(format!("ltp-tshark-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.pcap");
    std::fs::File::create(&file)
        .unwrap()
        .write_all(&pcap.0)
        .unwrap();
    let out = Command::new(&tshark)
        .args(["-2", "-n", "-r"])
        .arg(&file)
        .args([
            "-d",
            "udp.port==1113,ltp",
            "-Y",
            "_ws.malformed || _ws.expert.severity == error",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "tshark did not flag it"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
