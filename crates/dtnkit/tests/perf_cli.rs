//! `dtnkit perf` between two real nodes on loopback: window mode, every bundle acknowledged, per-bundle CSVs
//! consistent, and bad options rejected with exit code 2.

mod node_support;

use std::time::Duration;

use node_support::*;

#[test]
fn window_mode_client_and_server_between_two_nodes() {
    let dir = TempDir::new("perf");
    let (n1, n2) = ltp_pair(&dir, 100.0);
    let (client_csv, server_csv) = (dir.0.join("client.csv"), dir.0.join("server.csv"));
    let server = perf_server(&n2, "20", &["--csv", server_csv.to_str().unwrap()]);
    let out = run(
        &[
            "perf",
            "client",
            "--socket",
            n1.socket.to_str().unwrap(),
            "--dst",
            "ipn:2.2001",
            "--src-endpoint",
            "ipn:1.2000",
            "-W",
            "4",
            "--bundles",
            "20",
            "--size",
            "20000",
            "--lifetime-ms",
            "60000",
            "--csv",
            client_csv.to_str().unwrap(),
            "--json",
            "--quiet",
        ],
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sent"], 20);
    assert_eq!(v["acked"], 20);
    assert_eq!(v["bytes_acked"], 20 * 20000);
    assert_eq!(v["complete"], true);
    let goodput = v["goodput_bps"].as_f64().unwrap();
    assert!(goodput > 0.0, "{v}");

    // The server stops by itself after --count bundles and reports them.
    let s = server.wait(Duration::from_secs(20));
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let text = String::from_utf8_lossy(&s.stdout);
    assert!(text.contains("20 bundles, 400000 bytes"), "{text}");

    // Client CSV: one row per bundle, sequences 0..20, send < ACK, RTT = ACK - send.
    let csv = std::fs::read_to_string(&client_csv).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "seq,bytes,sent_ns,delivered_ns,acked_ns,rtt_ns");
    assert_eq!(rows.len(), 21);
    let mut max_in_flight = 0;
    let parsed: Vec<(u64, u64, u64)> = rows[1..]
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let f: Vec<&str> = r.split(',').collect();
            assert_eq!(f.len(), 6, "{r}");
            assert_eq!(f[0], i.to_string());
            assert_eq!(f[1], "20000");
            let (sent, acked, rtt): (u64, u64, u64) = (
                f[2].parse().unwrap(),
                f[4].parse().unwrap(),
                f[5].parse().unwrap(),
            );
            assert!(!f[3].is_empty(), "delivery time echoed by the server: {r}");
            assert!(sent < acked && rtt == acked - sent, "{r}");
            (sent, acked, rtt)
        })
        .collect();
    // Window 4: when bundle k is sent, at most 3 earlier ones are still unacknowledged.
    for (k, (sent, _, _)) in parsed.iter().enumerate() {
        let open = parsed[..k].iter().filter(|(_, a, _)| a > sent).count();
        max_in_flight = max_in_flight.max(open + 1);
    }
    assert!(max_in_flight <= 4, "window exceeded: {max_in_flight}");
    assert!(max_in_flight >= 2, "window never used: {max_in_flight}");

    // Server CSV: one row per bundle with the client's sequence numbers.
    let scsv = std::fs::read_to_string(&server_csv).unwrap();
    let mut seqs: Vec<u64> = scsv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f[0], "ipn:1.2000", "{l}");
            assert_eq!(f[4], "20000", "{l}");
            f[3].parse().unwrap()
        })
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..20).collect::<Vec<u64>>());

    // Interval + time mode against a server without --count (killed when the test ends): one bundle every
    // 100 ms for 1 s, then the client waits for the last ACKs.
    let _server2 = Proc::spawn(&[
        "perf",
        "server",
        "--socket",
        n2.socket.to_str().unwrap(),
        "--endpoint",
        "ipn:2.2002",
        "--quiet",
    ]);
    let out = run(
        &[
            "perf",
            "client",
            "--socket",
            n1.socket.to_str().unwrap(),
            "--dst",
            "ipn:2.2002",
            "--src-endpoint",
            "ipn:1.2002",
            "--interval-ms",
            "100",
            "--time-s",
            "1",
            "--size",
            "1000",
            "--drain-timeout-s",
            "15",
            "--json",
            "--quiet",
        ],
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = v["sent"].as_u64().unwrap();
    // Due at 0, 100, ..., 900 ms; a starved client may miss the last ones but never sends more.
    assert!((5..=10).contains(&sent), "{v}");
    assert_eq!(v["acked"].as_u64(), Some(sent), "{v}");
    assert_eq!(v["complete"], true);
}

#[test]
fn bad_options_exit_with_code_2() {
    let sock = "/nonexistent/app.sock";
    let base = [
        "perf",
        "client",
        "--socket",
        sock,
        "--dst",
        "ipn:2.1",
        "--src-endpoint",
        "ipn:1.1",
    ];
    let cases: [(&[&str], &str); 6] = [
        (&["--size", "1000", "--bundles", "3"], "pacing mode"),
        (&["-W", "2", "--size", "1000"], "stop rule"),
        (&["-W", "2", "--size", "10", "--bundles", "3"], "--size 10"),
        (&["-W", "0", "--size", "1000", "--bundles", "3"], "-W 0"),
        (
            &["-W", "2", "--size", "1000", "--time-s", "1", "--data", "5"],
            "exactly one stop rule",
        ),
        (
            &[
                "-W",
                "2",
                "--interval-ms",
                "5",
                "--size",
                "100",
                "--bundles",
                "1",
            ],
            "not both",
        ),
    ];
    for (extra, want) in cases {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let out = run(&args, Duration::from_secs(10));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // A valid command against a missing node is a runtime failure (1), not a usage error.
    let args: Vec<&str> = base
        .iter()
        .chain(["-W", "1", "--size", "100", "--bundles", "1", "--quiet"].iter())
        .copied()
        .collect();
    let out = run(&args, Duration::from_secs(10));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A perf server on `node`'s `ipn:2.2001` that stops after `count` bundles.
fn perf_server(node: &NodeProc, count: &str, extra: &[&str]) -> Proc {
    let mut args = vec![
        "perf",
        "server",
        "--socket",
        node.socket.to_str().unwrap(),
        "--endpoint",
        "ipn:2.2001",
        "--count",
        count,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    Proc::spawn(&args)
}

/// Runs a perf client, checks its exit code, returns its JSON summary and its stderr.
fn client_json(args: &[&str], code: i32) -> (serde_json::Value, String) {
    let out = run(args, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "{err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

fn client_args<'a>(
    socket: &'a str,
    dst: &'a str,
    bundles: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut v = vec![
        "perf",
        "client",
        "--socket",
        socket,
        "--dst",
        dst,
        "--src-endpoint",
        "ipn:1.2000",
        "-W",
        "8",
        "--bundles",
        bundles,
        "--size",
        "5000",
        "--quiet",
    ];
    v.extend_from_slice(extra);
    v
}

/// `--echo`: a BP echo service (here the far node's own, `ipn:2.7`) stands in for the server,
/// each bundle echoed back whole counting as acknowledged.
#[test]
fn echo_mode_counts_echoed_bundles_as_acknowledged() {
    let dir = TempDir::new("perf-echo");
    let (n1, _n2) = ltp_pair(&dir, 100.0);
    let socket = n1.socket.to_str().unwrap();
    let (v, _) = client_json(
        &client_args(socket, "ipn:2.7", "30", &["--echo", "--json"]),
        0,
    );
    assert_eq!(
        (v["sent"].as_u64(), v["acked"].as_u64()),
        (Some(30), Some(30))
    );
    assert_eq!(v["missing"], 0);
    assert_eq!(v["bad_acks"], 0);
    // Without --echo the echoes are no ACKs: nothing is acknowledged, exit 1.
    let out = run(
        &client_args(socket, "ipn:2.7", "3", &["--drain-timeout-s", "2"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no bundle was acknowledged"), "{err}");
}

/// Bundles the far end never acknowledged are listed and make the client fail: the server
/// stops after 5 of 8 bundles, so 3 stay unacknowledged whatever the convergence layer said.
#[test]
fn missing_bundles_are_reported_and_fail_the_run() {
    let dir = TempDir::new("perf-missing");
    let (n1, n2) = ltp_pair(&dir, 100.0);
    let server = perf_server(&n2, "5", &[]);
    let (v, err) = client_json(
        &client_args(
            n1.socket.to_str().unwrap(),
            "ipn:2.2001",
            "8",
            &["--drain-timeout-s", "3", "--json"],
        ),
        1,
    );
    assert_eq!(
        (v["sent"].as_u64(), v["acked"].as_u64()),
        (Some(8), Some(5))
    );
    assert_eq!(v["missing"], 3);
    let listed: u64 = v["missing_seqs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[1].as_u64().unwrap() - r[0].as_u64().unwrap() + 1)
        .sum();
    assert_eq!(listed, 3, "{v}");
    assert!(
        err.contains("3 of 8 bundles were never acknowledged by the far end"),
        "{err}"
    );
    assert!(server.wait(Duration::from_secs(20)).status.success());
    // Read as text, the summary names them too.
    let out = run(
        &client_args(
            n1.socket.to_str().unwrap(),
            "ipn:2.2001",
            "2",
            &["--drain-timeout-s", "1"],
        ),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("MISSING: 2 bundles never acknowledged by the far end: sequence numbers 0-1"),
        "{text}"
    );
}
