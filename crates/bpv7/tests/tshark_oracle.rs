//! Wireshark's BPv7 dissector as a third, independent oracle: random bundles (and status-report bundles) encoded
//! by us are written to a pcap as UDP datagrams to port 4556 and dissected by `tshark`, which must report no
//! malformed packet, no bad CRC and no expert error, and must read the same EIDs, timestamps and reason codes.
//! A deliberately corrupted bundle must be flagged. Fails when `tshark` is not installed: `scripts/test.sh`
//! installs it, and a silently skipped oracle would be a test that cannot fail.

mod common;

use std::path::Path;
use std::process::Command;

use bpv7::{
    AdminRecord, BundleBuilder, BundleFlags, CrcType, CreationTimestamp, Eid, ReasonCode,
    StatusItem, StatusReport,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Writes each payload as an Ethernet/IPv4/UDP (port 4556) frame into a classic pcap file.
fn write_pcap(path: &Path, datagrams: &[Vec<u8>]) {
    let mut f = Vec::new();
    f.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&262_144u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    for (i, d) in datagrams.iter().enumerate() {
        let mut frame = Vec::with_capacity(42 + d.len());
        frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
        let ip_len = (20 + 8 + d.len()) as u16;
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 2,
        ];
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        let sum: u32 = ip
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        let sum = !(((sum & 0xFFFF) + (sum >> 16)) as u16);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&40000u16.to_be_bytes());
        frame.extend_from_slice(&4556u16.to_be_bytes());
        frame.extend_from_slice(&((8 + d.len()) as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(d);
        f.extend_from_slice(&(1_700_000_000u32 + i as u32).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        f.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        f.extend_from_slice(&frame);
    }
    std::fs::write(path, f).unwrap();
}

fn tshark(pcap: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-2")
        .arg("-r")
        .arg(pcap)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const PROBLEMS: &str = "_ws.malformed || bpv7.crc_status == 0 || _ws.expert.severity == error";

#[test]
fn tshark_dissects_our_bundles_without_complaint() {
    assert!(
        tshark_available(),
        "tshark is not installed: run scripts/test.sh, which installs it (Debian package tshark)"
    );
    let dir = std::env::temp_dir().join(format!("bpv7-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0x75_4A6C);
    let mut datagrams = Vec::new();
    let mut expected = Vec::new();
    for _ in 0..300 {
        let mut spec = common::random_spec(&mut rng, 600);
        // Random payloads are not administrative records; real status reports are added below.
        spec.flags &= !BundleFlags::ADMIN_RECORD.bits();
        datagrams.push(common::ours_from_spec(&spec).encode());
        expected.push((
            spec.destination.to_string(),
            spec.source.to_string(),
            spec.seq,
        ));
    }
    // Status-report bundles, every reason code.
    let mut reasons = Vec::new();
    for code in 0..17u64 {
        let report = StatusReport {
            received: StatusItem::yes(Some(rng.random_range(1..1u64 << 40))),
            forwarded: StatusItem::NO,
            delivered: StatusItem::yes(None),
            deleted: StatusItem::NO,
            reason: ReasonCode::from_code(code),
            source: Eid::ipn(9, 1),
            timestamp: CreationTimestamp::new(123_456, code),
            fragment: (code % 3 == 0).then_some((100, 50)),
        };
        let b = BundleBuilder::new(Eid::ipn(2, 0), Eid::ipn(9, 0))
            .creation(CreationTimestamp::new(800_000_000_000, code))
            .flags(BundleFlags::ADMIN_RECORD)
            .crc_type(CrcType::Crc16)
            .payload(AdminRecord::StatusReport(report).encode())
            .build()
            .unwrap();
        datagrams.push(b.encode());
        reasons.push(code);
    }
    let pcap = dir.join("ours.pcap");
    write_pcap(&pcap, &datagrams);
    assert_eq!(
        tshark(&pcap, &["-Y", PROBLEMS]),
        "",
        "tshark found problems"
    );
    let fields = tshark(
        &pcap,
        &[
            "-Y",
            "bpv7",
            "-T",
            "fields",
            "-E",
            "occurrence=f",
            "-e",
            "bpv7.primary.dst_uri",
            "-e",
            "bpv7.primary.src_uri",
            "-e",
            "bpv7.create_ts.seqno",
            "-e",
            "bpv7.status_rep.reason_code",
        ],
    );
    let lines: Vec<&str> = fields.lines().collect();
    assert_eq!(
        lines.len(),
        datagrams.len(),
        "every datagram dissected as BPv7"
    );
    for (line, (dst, src, seq)) in lines.iter().zip(&expected) {
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols[0], dst);
        assert_eq!(cols[1], src);
        assert_eq!(cols[2], seq.to_string());
    }
    for (line, code) in lines[expected.len()..].iter().zip(reasons) {
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols[3], code.to_string(), "reason code");
    }

    // The committed sample bundle.
    let sample = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/bundles/sample.bundle"
    ))
    .unwrap();
    let pcap = dir.join("sample.pcap");
    write_pcap(&pcap, &[sample]);
    assert_eq!(tshark(&pcap, &["-Y", PROBLEMS]), "");
    assert_eq!(
        tshark(
            &pcap,
            &["-Y", "bpv7.hop_count.limit == 32 && bpv7.crc_status == 1"]
        )
        .lines()
        .count(),
        1
    );

    // A corrupted payload under CRC-32C must be flagged by the dissector too.
    let mut bad = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .creation(CreationTimestamp::new(1, 0))
        .payload(&b"corrupt me"[..])
        .build()
        .unwrap()
        .encode();
    let n = bad.len();
    bad[n - 8] ^= 0x01;
    let pcap = dir.join("bad.pcap");
    write_pcap(&pcap, &[bad]);
    assert_ne!(
        tshark(&pcap, &["-Y", PROBLEMS]),
        "",
        "tshark must flag the bad CRC"
    );
    std::fs::remove_dir_all(&dir).ok();
}
