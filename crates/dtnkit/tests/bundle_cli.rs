//! `dtnkit bundle make` / `inspect` end to end: make a bundle, inspect it as text and JSON, and check that a
//! corrupted file is rejected with exit code 2 and a message naming the file and the error.

use std::path::PathBuf;
use std::process::Command;

fn dtnkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dtnkit"))
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dtnkit-bundle-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn make_inspect_and_reject_corruption() {
    let dir = temp_dir("main");
    let file = dir.join("b.bundle");
    let out = dtnkit()
        .args([
            "bundle",
            "make",
            "--src",
            "ipn:5.1",
            "--dst",
            "dtn://far/inbox",
            "--crc",
            "32c",
        ])
        .args([
            "--payload",
            "payload text",
            "--hop-limit",
            "9",
            "--previous-node",
            "ipn:5.0",
            "--age-ms",
            "12",
        ])
        .args([
            "--creation-ms",
            "820540800000",
            "--seq",
            "3",
            "--flags",
            "must-not-fragment,report-delivery",
        ])
        .args(["--ext", "200,replicate=cafe"])
        .arg("-o")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = dtnkit()
        .args(["bundle", "inspect"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "destination:  dtn://far/inbox",
        "source:       ipn:5.1",
        "2026-01-01T00:00:00.000Z",
        "must-not-fragment, report-delivery",
        "previous-node (type 6)",
        "content: ipn:5.0",
        "content: 12 ms",
        "content: 0 of limit 9",
        "flags 0x1 (replicate)",
        "data (hex): cafe",
        "\"payload text\"",
        "CRC-32C 0x",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }

    let out = dtnkit()
        .args(["bundle", "inspect", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let b = &v["bundles"][0];
    assert_eq!(b["primary"]["destination"], "dtn://far/inbox");
    assert_eq!(b["primary"]["creation_ms"], 820_540_800_000u64);
    assert_eq!(b["primary"]["sequence"], 3);
    assert_eq!(b["primary"]["crc"]["type"], "CRC-32C");
    assert_eq!(b["blocks"].as_array().unwrap().len(), 5);
    assert_eq!(b["blocks"][4]["type_name"], "payload");
    assert_eq!(b["blocks"][4]["data_preview_text"], "payload text");
    assert_eq!(b["payload_len"], 12);

    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n - 8] ^= 0x01; // inside the payload: CRC-32C must catch it
    let bad = dir.join("bad.bundle");
    std::fs::write(&bad, &bytes).unwrap();
    let out = dtnkit()
        .args(["bundle", "inspect"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("bad.bundle") && err.contains("bad CRC"),
        "{err}"
    );

    let out = dtnkit()
        .args(["bundle", "inspect"])
        .arg(dir.join("missing.bundle"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn committed_sample_decodes() {
    let sample =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/bundles/sample.bundle");
    let out = dtnkit()
        .args(["bundle", "inspect", "--json"])
        .arg(&sample)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bundles"][0]["primary"]["crc"]["type"], "CRC-32C");
    assert!(v["bundles"][0]["blocks"].as_array().unwrap().len() >= 4);
}

#[test]
fn bad_make_arguments_exit_2() {
    let dir = temp_dir("args");
    for args in [
        vec![
            "--src",
            "ipn:1.1",
            "--dst",
            "ipn:2.1",
            "--payload",
            "x",
            "--flags",
            "nonsense",
        ],
        vec![
            "--src",
            "ipn:1.1",
            "--dst",
            "ipn:2.1",
            "--payload",
            "x",
            "--hop-limit",
            "0",
        ],
        vec![
            "--src",
            "ipn:1.1",
            "--dst",
            "ipn:2.1",
            "--payload",
            "x",
            "--ext",
            "200=zz",
        ],
        vec!["--src", "dtn:none", "--dst", "ipn:2.1", "--payload", "x"],
        vec!["--src", "ipn:1.1", "--dst", "nope", "--payload", "x"],
    ] {
        let out = dtnkit()
            .args(["bundle", "make"])
            .args(&args)
            .arg("-o")
            .arg(dir.join("x"))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `make --bib-key --bcb-key` secures a bundle; `inspect` shows the security blocks, decrypts and verifies with
/// `--key` (exit 0), refuses a tampered copy or a wrong key (exit 1), and refuses a bad key file (exit 2).
#[test]
fn bpsec_make_inspect_verify_and_tamper() {
    let dir = temp_dir("bpsec");
    let (sign, seal) = (dir.join("sign.key"), dir.join("seal.key"));
    std::fs::write(&sign, "# HMAC key\n".to_string() + &"5a".repeat(32) + "\n").unwrap();
    std::fs::write(&seal, "a5".repeat(32)).unwrap();
    let file = dir.join("s.bundle");
    let out = dtnkit()
        .args(["bundle", "make", "--src", "ipn:1.1", "--dst", "ipn:2.1"])
        .args(["--payload", "open the pod bay doors", "--sha", "512"])
        .arg("--bib-key")
        .arg(&sign)
        .arg("--bcb-key")
        .arg(&seal)
        .arg("-o")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wire = std::fs::read(&file).unwrap();
    assert!(
        !wire.windows(8).any(|w| w == b"pod bay "),
        "payload encrypted"
    );

    let text = dtnkit()
        .args(["bundle", "inspect"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("security context: 2 (BCB-AES-GCM)"), "{text}");
    assert!(text.contains("encrypted by BCB"), "{text}");
    assert!(text.contains("security source:  ipn:1.0"), "{text}");

    let checked = dtnkit()
        .args(["bundle", "inspect", "--json"])
        .arg(&file)
        .arg("--key")
        .arg(&seal)
        .arg("--key")
        .arg(&sign)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
    let b = &v["bundles"][0];
    let checks = b["security_check"].as_array().unwrap();
    assert_eq!(checks.len(), 3, "two BCBs and the BIB: {checks:?}");
    assert!(checks.iter().all(|c| c["ok"] == true), "{checks:?}");
    assert_eq!(b["checked_payload_preview_text"], "open the pod bay doors");
    let bcb = b["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["type"] == 12)
        .unwrap();
    assert_eq!(bcb["security"]["context"], "BCB-AES-GCM");
    assert_eq!(bcb["security"]["parameters"][1]["name"], "AES variant");

    // One bit of the encrypted payload flipped: exit 1 and the failing block named.
    let mut bad = wire.clone();
    let n = bad.len();
    bad[n - 4] ^= 0x20;
    let tampered = dir.join("t.bundle");
    std::fs::write(&tampered, &bad).unwrap();
    let out = dtnkit()
        .args(["bundle", "inspect"])
        .arg(&tampered)
        .arg("--key")
        .arg(&seal)
        .arg("--key")
        .arg(&sign)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("FAILED") && text.contains("authentication tag mismatch"),
        "{text}"
    );
    // The right BCB key but the wrong HMAC key: the BIB fails.
    let out = dtnkit()
        .args(["bundle", "inspect"])
        .arg(&file)
        .arg("--key")
        .arg(&seal)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("BIB"));
    // A key file that is not hex: exit 2 naming the file and line.
    let junk = dir.join("junk.key");
    std::fs::write(&junk, "00\nnot hex\n").unwrap();
    let out = dtnkit()
        .args(["bundle", "inspect"])
        .arg(&file)
        .arg("--key")
        .arg(&junk)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("junk.key:2"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
