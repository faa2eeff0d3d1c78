//! `dtnkit demo --duration-s 3`: the built-in scenario runs through the lab, the analyzer summarises the nodes'
//! logs and a PNG plot is written where the output says.

mod node_support;

use std::time::Duration;

use node_support::{run, TempDir};

#[test]
fn short_demo_runs_and_writes_its_plot() {
    let dir = TempDir::new("demo");
    let out_dir = dir.0.join("out");
    let out = run(
        &[
            "demo",
            "--duration-s",
            "3",
            "--out",
            out_dir.to_str().unwrap(),
            "--quiet",
        ],
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plot = out_dir.join("demo-goodput.png");
    assert!(
        stdout.contains(&format!("plot: {}", plot.display())),
        "{stdout}"
    );
    let png = std::fs::read(&plot).unwrap();
    assert!(
        png.len() > 10_000 && png.starts_with(b"\x89PNG"),
        "not a PNG"
    );
    // Client counters, the relay's counters and the analyzer's summary are all printed.
    assert!(stdout.contains("DTNperf client:"), "{stdout}");
    assert!(stdout.contains("erased by trace H"), "{stdout}");
    assert!(stdout.contains("analyzer (LTP segment logs"), "{stdout}");
    // The analyzer wrote one row per LTP session (a header plus at least the data and ACK sessions).
    let sessions = std::fs::read_to_string(out_dir.join("sessions.csv")).unwrap();
    assert!(sessions.lines().count() > 10, "{sessions}");
    // A second run may reuse the directory (it is marked as the lab's).
    let again = run(
        &[
            "demo",
            "--duration-s",
            "1",
            "--out",
            out_dir.to_str().unwrap(),
            "--quiet",
        ],
        Duration::from_secs(60),
    );
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    // Bad input is a usage error.
    let bad = run(&["demo", "--duration-s", "0"], Duration::from_secs(10));
    assert_eq!(bad.status.code(), Some(2));
}
