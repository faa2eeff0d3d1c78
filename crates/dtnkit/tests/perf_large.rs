//! `dtnkit perf` with bundles beyond the 64 MiB frame limit (issue 30): the client streams each
//! bundle (generated as it is written), the nodes store and forward it as fragments over
//! TCPCL, the receiving node delivers it fragment by fragment, and the server counts it once
//! all its bytes arrived and acknowledges it then.

mod node_support;

use std::time::Duration;

use node_support::*;

const SIZE: u64 = 80_000_000;
const BUNDLES: u64 = 3;
const LIMIT: Duration = Duration::from_secs(120);

/// A TCPCL node listening on `listen`, with neighbour `peer` (at `peer_port` if given).
fn tcp_node(node: u64, listen: u16, peer: u64, peer_port: Option<u16>) -> NodeSpec {
    let mut n = NodeSpec::new(node, free_port());
    let address = peer_port.map_or(String::new(), |p| format!("address = \"127.0.0.1:{p}\"\n"));
    n.extra = format!(
        "\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 400\n\n[[tcp_peer]]\npeer = {peer}\n{address}\n[bp]\nmax_fragment_bytes = 8388608\n"
    );
    n.quota = 2 << 30;
    n
}

#[test]
fn bundles_of_80_mb_are_streamed_fragmented_counted_once_and_acknowledged() {
    let dir = TempDir::new("perf-large");
    let (l1, l2) = (free_tcp_port(), free_tcp_port());
    let n2 = NodeProc::start(&dir.0, &tcp_node(2, l2, 1, None));
    let n1 = NodeProc::start(&dir.0, &tcp_node(1, l1, 2, Some(l2)));
    let server_csv = dir.0.join("server.csv");
    let server = Proc::spawn(&[
        "perf",
        "server",
        "--socket",
        n2.socket.to_str().unwrap(),
        "--endpoint",
        "ipn:2.2001",
        "--count",
        &BUNDLES.to_string(),
        "--csv",
        server_csv.to_str().unwrap(),
        "--quiet",
    ]);
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
            "2",
            "--bundles",
            &BUNDLES.to_string(),
            "--size",
            &SIZE.to_string(),
            "--drain-timeout-s",
            "90",
            "--json",
            "--quiet",
        ],
        LIMIT,
    );
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sent"], BUNDLES, "{v}");
    assert_eq!(v["acked"], BUNDLES, "{v}");
    assert_eq!(v["bytes_sent"], BUNDLES * SIZE, "{v}");
    assert_eq!(v["bytes_acked"], BUNDLES * SIZE, "{v}");
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(v["bad_acks"], 0, "{v}");

    let s = server.wait(LIMIT);
    let text = String::from_utf8_lossy(&s.stdout);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    assert!(
        text.contains(&format!(
            "{BUNDLES} bundles, {} bytes received (0 malformed, ",
            BUNDLES * SIZE
        )),
        "{text}"
    );
    // Delivered fragment by fragment (8 MiB fragments: 10 per bundle), none left incomplete.
    assert!(text.contains("0 such ADUs abandoned incomplete"), "{text}");
    let frags: u64 = text
        .split(", ")
        .find_map(|p| p.strip_suffix(" fragments of ADUs delivered piece by piece"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("fragment count in {text}"));
    assert!(frags >= BUNDLES * 10, "{text}");

    // One CSV row per bundle, with the sequence from the header of its first fragment and
    // the whole ADU's length.
    let csv = std::fs::read_to_string(&server_csv).unwrap();
    let mut seqs: Vec<u64> = csv
        .lines()
        .skip(1)
        .map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            assert_eq!(f.len(), 6, "{r}");
            assert_eq!(f[0], "ipn:1.2000", "{r}");
            assert_eq!(f[4], SIZE.to_string(), "{r}");
            f[3].parse().unwrap()
        })
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (0..BUNDLES).collect::<Vec<_>>(), "{csv}");
}

#[test]
fn echo_mode_refuses_streamed_sizes_naming_the_flag() {
    let out = run(
        &[
            "perf",
            "client",
            "--socket",
            "/nonexistent/app.sock",
            "--dst",
            "ipn:2.7",
            "--echo",
            "--src-endpoint",
            "ipn:1.2000",
            "-W",
            "1",
            "--bundles",
            "1",
            "--size",
            "100000000",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--size 100000000 with --echo") && err.contains("67104768"),
        "{err}"
    );
}
