//! Loss made visible per peer (issue 16): bundles sent with `--report-reception` and
//! `--report-delivery` draw BP status reports from the nodes on their way, and the sending
//! node counts them per reporting node in `dtnkit status` (`status_reports`), whatever the
//! convergence layer acknowledged.

mod node_support;

use std::time::{Duration, Instant};

use node_support::*;

#[test]
fn reception_and_delivery_reports_are_counted_per_reporting_node() {
    const N: u64 = 5;
    let dir = TempDir::new("status-reports");
    let (n1, n2) = ltp_pair(&dir, 200.0);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", N);
    send_ok(
        &n1.socket,
        "ipn:2.1",
        1000,
        N,
        &["--report-reception", "--report-delivery"],
    );
    assert!(recv.wait(Duration::from_secs(60)).status.success());
    // The reports travel back over LTP; wait for all of them.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = n1.status();
        let r = st
            .status_reports
            .get("ipn:2.0")
            .cloned()
            .unwrap_or_default();
        if r.received == N && r.delivered == N {
            assert_eq!(r.forwarded, 0);
            assert_eq!(r.deleted, 0);
            break;
        }
        assert!(Instant::now() < deadline, "reports missing: {st}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Node 2 asked for none.
    assert!(n2.status().status_reports.is_empty());
}
