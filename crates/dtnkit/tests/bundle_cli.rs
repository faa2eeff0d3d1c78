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
