//! The systemd unit in `packaging/systemd` passes `systemd-analyze verify` (with its
//! `ExecStart` pointed at the binary under test, since verify checks that the program exists),
//! with no diagnostic about the unit, and its example configuration passes `dtnkit node
//! --check`. Without `systemd-analyze` (no systemd installed) the verification is skipped with
//! a message; the configuration check always runs.

mod node_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use node_support::*;

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/systemd")
}

#[test]
fn the_unit_file_passes_systemd_analyze_verify() {
    let unit = std::fs::read_to_string(packaging().join("dtnkit-node.service")).unwrap();
    assert!(unit.contains("\nType=notify\n") && unit.contains("\nRestart=on-failure\n"));
    assert!(
        unit.contains("ExecStart=/usr/bin/dtnkit node --config /etc/dtnkit/node.toml"),
        "ExecStart changed: update this test and docs/operations.md"
    );
    let tool = Command::new("systemd-analyze").arg("--version").output();
    if !tool.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "SKIPPED: systemd-analyze not found (Debian package `systemd`); the unit file was not verified"
        );
        return;
    }
    let dir = TempDir::new("unit");
    let path = dir.0.join("dtnkit-node.service");
    std::fs::write(&path, unit.replace("/usr/bin/dtnkit", BIN)).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify failed: {err}");
    // verify exits 0 on unknown keys or bad values ("..., ignoring"): none may mention the unit.
    let about_unit: Vec<&str> = err.lines().filter(|l| l.contains("dtnkit-node")).collect();
    assert!(about_unit.is_empty(), "diagnostics: {about_unit:#?}");

    // The check can fail: a misspelt key is reported.
    let bad = dir.0.join("dtnkit-node-bad.service");
    std::fs::write(
        &bad,
        unit.replace("/usr/bin/dtnkit", BIN)
            .replace("Restart=", "Restartt="),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Restartt"), "a bad key went unnoticed: {err}");
}

#[test]
fn the_example_service_configuration_is_valid() {
    let cfg = packaging().join("node.toml");
    let out = run(
        &["node", "--config", cfg.to_str().unwrap(), "--check"],
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
