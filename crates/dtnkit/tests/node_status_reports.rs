//! Loss made visible per peer (issue 16): bundles sent with `--report-reception` and
//! `--report-delivery` draw BP status reports from the nodes on their way, and the sending
//! node counts them per reporting node in `dtnkit status` (`status_reports`), whatever the
//! convergence layer acknowledged.

mod node_support;

use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn reception_and_delivery_reports_are_counted_per_reporting_node() {
    const N: u64 = 5;
    let dir = TempDir::new("status-reports");
    let (p1, p2) = (free_port(), free_port());
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&n2.socket),
        "--endpoint",
        "ipn:2.1",
        "--count",
        &N.to_string(),
        "--timeout",
        "40",
    ]);
    let send = run(
        &[
            "send",
            "--socket",
            s(&n1.socket),
            "--dst",
            "ipn:2.1",
            "--size",
            "1000",
            "--count",
            &N.to_string(),
            "--report-reception",
            "--report-delivery",
            "--quiet",
        ],
        LIMIT,
    );
    assert!(
        send.status.success(),
        "{}",
        String::from_utf8_lossy(&send.stderr)
    );
    assert!(recv.wait(LIMIT).status.success());
    // The reports travel back over LTP; wait for all of them.
    let deadline = Instant::now() + LIMIT;
    loop {
        let st = n1.status();
        let r = &st["status_reports"]["ipn:2.0"];
        if r["received"] == N && r["delivered"] == N {
            assert_eq!(r["forwarded"], 0);
            assert_eq!(r["deleted"], 0);
            break;
        }
        assert!(Instant::now() < deadline, "reports missing: {st}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Node 2 asked for none.
    assert_eq!(n2.status()["status_reports"], serde_json::json!({}));
}
