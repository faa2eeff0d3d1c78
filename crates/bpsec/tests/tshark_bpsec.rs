//! Wireshark's BPSec dissector as an independent oracle: the RFC 9173 example bundles and bundles secured by our
//! policy (integrity, confidentiality, both, with and without wrapped keys, with and without CRCs) are sent as UDP
//! datagrams to port 4556 in a pcap (made by `text2pcap`) and dissected by `tshark`, which must report no
//! malformed packet, no bad CRC and no expert error, and must read our context ids, variants, HMACs and tags. A BIB
//! naming a block that is not in its bundle must be flagged. Fails when tshark is not installed: `scripts/test.sh`
//! installs it, and a silently skipped oracle would be a test that cannot fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use bpsec::policy::{Confidentiality, Entropy, Integrity};
use bpsec::{AesVariant, Asb, EidPattern, Key, OnFailure, Policy, Rule, ScopeFlags, ShaVariant};
use bpv7::{BundleBuilder, CrcType, CreationTimestamp, Eid};

const PROBLEMS: &str = "_ws.malformed || bpv7.crc_status == 0 || _ws.expert.severity == error";

fn seed(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../../fuzz/seeds/bpsec_decode/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn tool(name: &str) -> bool {
    Command::new(name)
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Writes the datagrams as UDP packets (port 40000 to 4556) into a pcap with `text2pcap` (shipped with tshark).
fn pcap(dir: &Path, name: &str, datagrams: &[Vec<u8>]) -> PathBuf {
    let mut dump = String::new();
    for d in datagrams {
        for (i, chunk) in d.chunks(16).enumerate() {
            dump.push_str(&format!("{:06x}", i * 16));
            for b in chunk {
                dump.push_str(&format!(" {b:02x}"));
            }
            dump.push('\n');
        }
        dump.push('\n');
    }
    let txt = dir.join(format!("{name}.txt"));
    std::fs::write(&txt, dump).unwrap();
    let out = dir.join(format!("{name}.pcap"));
    let st = Command::new("text2pcap")
        .args(["-q", "-u", "40000,4556"])
        .arg(&txt)
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "text2pcap failed");
    out
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

fn fields(pcap: &Path, names: &[&str]) -> Vec<Vec<String>> {
    let mut args = vec!["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"];
    for n in names {
        args.push("-e");
        args.push(n);
    }
    tshark(pcap, &args)
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

fn counter() -> Entropy {
    let mut n = 0u8;
    Box::new(move |buf: &mut [u8]| {
        for b in buf.iter_mut() {
            n = n.wrapping_add(37);
            *b = n;
        }
        Ok(())
    })
}

fn policy(integrity: bool, confidentiality: bool, wrap: bool) -> Policy {
    let rule = Rule {
        source: EidPattern::parse("*").unwrap(),
        destination: EidPattern::parse("*").unwrap(),
        integrity: integrity.then(|| Integrity {
            key_id: "i".into(),
            key: Key::new(&[0x11; 32]),
            sha: ShaVariant::Sha512,
            scope: ScopeFlags::ALL,
            wrap,
        }),
        confidentiality: confidentiality.then(|| Confidentiality {
            key_id: "c".into(),
            key: Key::new(&[0x22; 16]),
            aes: AesVariant::A128Gcm,
            scope: ScopeFlags::ALL,
            wrap,
        }),
        on_failure: OnFailure::Drop,
    };
    Policy::with_entropy(vec![rule], counter()).unwrap()
}

#[test]
fn tshark_dissects_our_bpsec_blocks_without_complaint() {
    assert!(
        tool("tshark") && tool("text2pcap"),
        "tshark/text2pcap are not installed: run scripts/test.sh, which installs them (Debian package tshark)"
    );
    let dir = std::env::temp_dir().join(format!("bpsec-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // The RFC 9173 examples as this crate produces them (tests/rfc9173_vectors.rs checks they are the RFC's).
    let mut datagrams: Vec<Vec<u8>> = ["a1", "a2", "a3", "a4"]
        .iter()
        .map(|n| seed(&format!("rfc9173_{n}_final.bin")))
        .collect();
    // Bundles secured by the policy, as a node sends them.
    let mut expected = Vec::new();
    let mut i = 0u64;
    for (integrity, confidentiality) in [(true, false), (false, true), (true, true)] {
        for wrap in [false, true] {
            for crc in [CrcType::None, CrcType::Crc16, CrcType::Crc32c] {
                i += 1;
                let mut b = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
                    .creation(CreationTimestamp::new(800_000_000_000, i))
                    .crc_type(crc)
                    .hop_limit(16)
                    .previous_node(Eid::ipn(1, 0))
                    .payload(vec![b'x'; 40 + i as usize])
                    .build()
                    .unwrap();
                policy(integrity, confidentiality, wrap)
                    .secure_outgoing(&mut b, &Eid::ipn(1, 0))
                    .unwrap();
                let visible: Vec<Asb> = b
                    .blocks()
                    .iter()
                    .filter(|x| x.block_type() == 11 || x.block_type() == 12)
                    .filter_map(|x| Asb::decode(x.data()).ok())
                    .collect();
                expected.push((integrity, confidentiality, wrap, visible));
                datagrams.push(b.encode());
            }
        }
    }
    let all = pcap(&dir, "ours", &datagrams);
    assert_eq!(tshark(&all, &["-Y", PROBLEMS]), "", "tshark found problems");

    let rows = fields(
        &all,
        &[
            "bpsec.asb.ctxid",
            "bpsec.defaultsc.shavar",
            "bpsec.defaultsc.aesvar",
            "bpsec.defaultsc.hmac",
            "bpsec.defaultsc.authtag",
            "bpsec.defaultsc.wrappedkey",
        ],
    );
    assert_eq!(rows.len(), datagrams.len(), "every datagram dissected");
    // RFC 9173 A.1: the HMAC the RFC prints.
    assert_eq!(rows[0][0], "1");
    assert_eq!(rows[0][1], "7");
    assert!(rows[0][3].starts_with("3bdc69b3a34a2b5d"), "{:?}", rows[0]);
    // A.4: the BCB's two tags, in target order (the BIB is encrypted, so only the BCB is dissected).
    assert_eq!(rows[3][0], "2");
    assert_eq!(
        rows[3][4],
        "220ffc45c8a901999ecc60991dd78b29,d2c51cb2481792dae8b21d848cede99b"
    );
    for (row, (integrity, confidentiality, wrap, visible)) in rows[4..].iter().zip(&expected) {
        let ctx: Vec<String> = visible.iter().map(|a| a.context_id.to_string()).collect();
        assert_eq!(
            row[0],
            ctx.join(","),
            "context ids of {integrity}/{confidentiality}/{wrap}"
        );
        if *integrity && !*confidentiality {
            assert_eq!(row[1], "7", "HMAC 512/512");
            let mac = visible[0].results_for(1).unwrap()[0]
                .value
                .as_bytes()
                .unwrap();
            assert_eq!(
                row[3],
                mac.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
        }
        if *confidentiality {
            let n = if *integrity { 2 } else { 1 };
            assert_eq!(row[2], vec!["1"; n].join(","), "A128GCM per BCB");
            assert_eq!(row[4].split(',').count(), n, "one tag per BCB");
        }
        assert_eq!(
            !row[5].is_empty(),
            *wrap,
            "wrapped keys shown iff used: {row:?}"
        );
    }

    // A BIB naming a block the bundle does not have is flagged by the dissector.
    let mut bad = seed("rfc9173_a1_final.bin");
    assert_eq!(&bad[36..38], &[0x81, 0x01]);
    bad[37] = 0x05;
    let b = pcap(&dir, "bad", &[bad]);
    assert_eq!(
        tshark(&b, &["-Y", "bpsec.target_invalid"]).lines().count(),
        1
    );
    let _ = std::fs::remove_dir_all(&dir);
}
