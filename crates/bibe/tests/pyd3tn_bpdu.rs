//! BPDUs cross-checked against an independent encoder: `pyd3tn` (µD3TN's Python library, from
//! PyPI), whose `BibeProtocolDataUnit` encodes the BPDU administrative record as µD3TN sends it
//! (record type 64443, or 7 in its compatibility mode) around a bundle its own BPv7 encoder
//! built. For transmission IDs and retransmission times of every CBOR head size and payloads
//! of several sizes:
//!
//! - our decoder reads pyd3tn's record: the same transmission ID, retransmission time and
//!   encapsulated bundle bytes, and our BPv7 decoder takes the encapsulated bundle;
//! - our encoder writes the record content byte for byte as pyd3tn does (only the record type
//!   code differs: we send 3).
//!
//! pyd3tn has no custody signal (µD3TN does not implement custody transfer), so custody
//! signals are checked against hand-written bytes only (`pdu_props.rs`, the crate's unit tests).
//!
//! `scripts/test.sh` installs pyd3tn 0.15.2 into a venv
//! (`${DTNKIT_CACHE:-$HOME/.cache/dtnkit}/pyd3tn-venv`) and exports `DTNKIT_PYD3TN_PY`. Without
//! it the test is skipped, except under `CI=true`, where it fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bibe::pdu::{RECORD_TYPE_BPDU, RECORD_TYPE_BPDU_ION, RECORD_TYPE_BPDU_UD3TN};
use bibe::{BibeRecord, Bpdu};
use bpv7::AdminRecord;
use bytes::Bytes;

fn pyd3tn_python() -> Option<PathBuf> {
    match std::env::var_os("DTNKIT_PYD3TN_PY") {
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "DTNKIT_PYD3TN_PY={} does not exist: run scripts/test.sh (it installs pyd3tn into a venv)",
                p.display()
            );
            Some(p)
        }
        None => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            assert!(
                !ci,
                "DTNKIT_PYD3TN_PY is not set under CI=true: scripts/test.sh installs pyd3tn 0.15.2 and exports it"
            );
            eprintln!("skipping: DTNKIT_PYD3TN_PY is not set (scripts/test.sh installs pyd3tn 0.15.2 into a venv)");
            None
        }
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn bpdus_agree_with_pyd3tn() {
    let Some(py) = pyd3tn_python() else {
        return;
    };
    // Every CBOR head size for both numbers; 0/0 is "no custody".
    let numbers = [
        1u64,
        23,
        24,
        255,
        256,
        65_535,
        65_536,
        u32::MAX as u64,
        1 << 32,
        u64::MAX,
    ];
    let mut cases = Vec::new();
    let mut k = 0u64;
    for (i, &tid) in std::iter::once(&0).chain(numbers.iter()).enumerate() {
        for &rtime in if tid == 0 { &[0u64][..] } else { &numbers[..] } {
            for compat in [false, true] {
                k += 1;
                let payload_len = [0usize, 1, 23, 24, 300, 70_000][(i + k as usize) % 6];
                cases.push(serde_json::json!({
                    "tid": tid, "rtime": rtime, "compat": compat,
                    "payload_len": payload_len, "seq": k,
                }));
            }
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pyd3tn/bpdu.py");
    let mut child = Command::new(&py)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pyd3tn's python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            serde_json::Value::Array(cases.clone())
                .to_string()
                .as_bytes(),
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "pyd3tn script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(results.len(), cases.len());
    for (case, res) in cases.iter().zip(&results) {
        let tid = case["tid"].as_u64().unwrap();
        let rtime = case["rtime"].as_u64().unwrap();
        let compat = case["compat"].as_bool().unwrap();
        let inner = Bytes::from(hex(res["inner"].as_str().unwrap()));
        let record = Bytes::from(hex(res["record"].as_str().unwrap()));
        // pyd3tn -> us.
        let admin = AdminRecord::decode(&record).unwrap_or_else(|e| panic!("{case}: {e}"));
        let AdminRecord::Other {
            record_type,
            content,
        } = &admin
        else {
            panic!("{case}: not a BIBE record: {admin:?}");
        };
        let want_type = if compat {
            RECORD_TYPE_BPDU_ION
        } else {
            RECORD_TYPE_BPDU_UD3TN
        };
        assert_eq!(*record_type, want_type, "{case}");
        let Some(BibeRecord::Bpdu(b)) =
            BibeRecord::from_admin(&admin).unwrap_or_else(|e| panic!("{case}: {e}"))
        else {
            panic!("{case}: not read as a BPDU");
        };
        assert_eq!(b.transmission_id, tid, "{case}");
        assert_eq!(b.retransmission_time, rtime, "{case}");
        assert_eq!(b.bundle, inner, "{case}");
        let bundle = bpv7::Bundle::decode(b.bundle.clone())
            .unwrap_or_else(|e| panic!("{case}: pyd3tn's bundle: {e}"));
        assert_eq!(
            bundle.payload().len() as u64,
            case["payload_len"].as_u64().unwrap()
        );
        // us -> pyd3tn's bytes: the same content, only our record type differs.
        let ours = BibeRecord::Bpdu(Bpdu {
            transmission_id: tid,
            retransmission_time: rtime,
            bundle: inner.clone(),
        })
        .to_admin();
        let AdminRecord::Other {
            record_type: our_type,
            content: our_content,
        } = ours
        else {
            unreachable!()
        };
        assert_eq!(our_type, RECORD_TYPE_BPDU);
        assert_eq!(&our_content, content, "{case}: the encoders differ");
    }
}
