//! The simulator writes the logs real nodes write: one segment CSV (`ltp::CsvSegmentLog`) and one bundle event
//! CSV (`bp::CsvBundleLog`) per node, timestamps from the virtual clock; bundle identities join across nodes.
//! Also: the receive-queue bound drops and counts datagrams, and a store that refuses bundles refuses their
//! block so that the previous hop forwards them again.

use std::collections::BTreeSet;
use std::path::Path;

use sim::{Scenario, Simulation};

const EPOCH_MS: u64 = 820_454_400_000;
const DURATION_MS: u64 = 2_000;

fn two_nodes(layer: &str, log: &str) -> String {
    format!(
        r#"
[sim]
duration_s = 2.0
seed = 3
bundle_layer = "{layer}"
[[node]]
number = 1
processing = {{ rx_latency_us = 200.0, per_segment_us = 1.0, per_bundle_us = 20.0, commit_us = 100.0 }}
[[node]]
number = 2
processing = {{ rx_latency_us = 200.0, per_segment_us = 1.0, per_bundle_us = 20.0, commit_us = 100.0 }}
[[link]]
a = 1
b = 2
forward = {{ rate_bps = 100e6, delay_ms = 2.0, loss = {{ model = "iid", per = 0.01 }} }}
return = {{ rate_bps = 100e6, delay_ms = 2.0 }}
[[traffic]]
from = 1
to = 2
window = 2
bundles = 20
bundle_size = 30000
{log}
"#
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Rows of a bundle log (checked against the real header), split into columns.
fn bundle_rows(text: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(bp::agent::CSV_HEADER));
    lines
        .map(|l| {
            let cols: Vec<String> = l.split(',').map(str::to_string).collect();
            assert_eq!(cols.len(), 12, "{l}");
            cols
        })
        .collect()
}

fn check_layer(layer: &str) {
    let dir = tempfile::tempdir().unwrap();
    let log = "[log]\nsegment_csv = \"seg-{node}.csv\"\nbundle_csv = \"out/bundles-{node}.csv\"";
    let scn = Scenario::from_toml_str(&two_nodes(layer, log), "logs.toml", dir.path()).unwrap();
    let mut s = Simulation::new(&scn).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(sum.bundles_acked, 20, "{layer}: {sum:?}");
    let real_events: BTreeSet<&str> = [
        "created",
        "received",
        "forwarded",
        "failed",
        "delivered",
        "expired",
        "deleted",
        "duplicate",
        "refused",
    ]
    .into();
    let mut created_at_1 = BTreeSet::new();
    let mut delivered_at_2 = BTreeSet::new();
    for node in [1u64, 2] {
        let rows = bundle_rows(&read(&dir.path().join(format!("out/bundles-{node}.csv"))));
        for r in &rows {
            let t: u64 = r[0].parse().unwrap();
            assert!(
                (EPOCH_MS..=EPOCH_MS + DURATION_MS).contains(&t),
                "{layer}: virtual DTN time: {r:?}"
            );
            assert!(real_events.contains(r[1].as_str()), "{layer}: {r:?}");
            assert!(
                r[2].starts_with("ipn:") && r[8].starts_with("ipn:"),
                "{r:?}"
            );
            let id = (r[2].clone(), r[3].clone(), r[4].clone());
            match (node, r[1].as_str(), r[2].as_str()) {
                (1, "created", "ipn:1.2000") => {
                    assert!(r[10].parse::<u64>().is_ok(), "stored, so keyed: {r:?}");
                    created_at_1.insert(id);
                }
                (2, "delivered", "ipn:1.2000") => {
                    delivered_at_2.insert(id);
                }
                (2, "received", _) => assert_eq!(r[9], "1", "neighbour: {r:?}"),
                (1, "forwarded", _) => assert_eq!(r[9], "2", "neighbour: {r:?}"),
                _ => {}
            }
        }
        let seg = read(&dir.path().join(format!("seg-{node}.csv")));
        let mut lines = seg.lines();
        assert_eq!(lines.next(), Some(ltp::log::CSV_HEADER));
        let mut rows = 0;
        for l in lines {
            let cols: Vec<&str> = l.split(',').collect();
            assert_eq!(cols.len(), 15, "{l}");
            assert_eq!(cols[2], node.to_string(), "local_engine: {l}");
            let t: u128 = cols[0].parse().unwrap();
            assert!(t <= u128::from(DURATION_MS) * 1_000_000, "virtual ns: {l}");
            rows += 1;
        }
        assert!(rows > 500, "{layer}: node {node}: {rows} segment rows");
    }
    // The bundle identity joins the sender's and the receiver's logs.
    assert_eq!(created_at_1.len(), 20, "{layer}");
    assert_eq!(created_at_1, delivered_at_2, "{layer}");
}

#[test]
fn per_node_logs_in_the_real_format_with_the_agent() {
    check_layer("agent");
}

#[test]
fn per_node_logs_in_the_real_format_with_the_static_layer() {
    check_layer("static");
}

#[test]
fn log_patterns_are_validated() {
    let dir = Path::new(".");
    for (log, field) in [
        ("[log]\nsegment_csv = \"segments.csv\"", "log.segment_csv"),
        (
            "[log]\nbundle_csv = \"b-{node}-{seed}.csv\"",
            "log.bundle_csv",
        ),
        (
            "[log]\nsegment_csv = \"x-{node}.csv\"\nbundle_csv = \"x-{node}.csv\"",
            "log.bundle_csv",
        ),
    ] {
        let e = Scenario::from_toml_str(&two_nodes("agent", log), "x.toml", dir)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(field) && e.contains("{node}"), "{e}");
    }
}

fn cpu_bound(rx_queue: &str) -> Scenario {
    // The receiver's CPU needs 40 µs per segment, the link delivers one every 16.4 µs: a queue builds up.
    let text = format!(
        r#"
[sim]
duration_s = 20.0
seed = 5
[[node]]
number = 1
ltp = {{ max_segment_size = 1024, max_export_sessions = 1, rto_ms = 100.0 }}
processing = {{ rx_latency_us = 100.0, per_segment_us = 40.0 {rx_queue} }}
[[node]]
number = 2
ltp = {{ max_segment_size = 1024, max_export_sessions = 1, rto_ms = 100.0 }}
processing = {{ rx_latency_us = 100.0, per_segment_us = 40.0 {rx_queue} }}
[[link]]
a = 1
b = 2
forward = {{ rate_bps = 500e6, delay_ms = 5.0 }}
return = {{ rate_bps = 500e6, delay_ms = 5.0 }}
[[traffic]]
from = 1
to = 2
window = 1
bundles = 3
bundle_size = 500000
"#
    );
    Scenario::from_toml_str(&text, "queue.toml", Path::new(".")).unwrap()
}

#[test]
fn full_receive_queue_drops_and_counts() {
    // Default bound: 8 MiB / 1024 B = 8192 datagrams, far above the ~290 that queue up here: no drop.
    let mut s = Simulation::new(&cpu_bound("")).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!((sum.bundles_acked, sum.rx_queue_drops), (3, 0), "{sum:?}");
    assert_eq!(sum.retransmission_cycles, 0, "{sum:?}");
    // A 64-datagram queue overflows: the drops are counted apart from link losses and LTP recovers them.
    let mut s = Simulation::new(&cpu_bound(", rx_queue_datagrams = 64")).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(sum.bundles_acked, 3, "{sum:?}");
    assert!(sum.rx_queue_drops > 100, "{sum:?}");
    assert_eq!(sum.lost_channel + sum.queue_full, 0, "{sum:?}");
    assert!(sum.retransmission_cycles > 0, "{sum:?}");
    let node2 = s.nodes().iter().find(|n| n.number() == 2).unwrap();
    assert_eq!(node2.rx_queue_drops(), sum.rx_queue_drops);
    let bad =
        "[sim]\nduration_s = 1.0\n[[node]]\nnumber = 1\nprocessing = { rx_queue_datagrams = 0 }\n";
    let e = Scenario::from_toml_str(bad, "x.toml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("node[0].processing.rx_queue_datagrams = 0"),
        "{e}"
    );
}

#[test]
fn refused_bundles_are_forwarded_again() {
    // Node 2 can hold two 20 kB bundles while its contact to node 3 is closed; the others are refused, their
    // blocks refused (`confirm_block(false)` → LTP cancel), and node 1's agent forwards them again until the
    // contact opens and node 2 has room.
    let dir = tempfile::tempdir().unwrap();
    let text = r#"
[sim]
duration_s = 10.0
seed = 9
[[node]]
number = 1
[[node.route]]
dest = 3
via = 2
[[node]]
number = 2
store = { quota_bytes = 45000 }
[[node]]
number = 3
[[node.route]]
dest = 1
via = 2
[[link]]
a = 1
b = 2
forward = { rate_bps = 100e6, delay_ms = 2.0 }
return = { rate_bps = 100e6, delay_ms = 2.0 }
[[link]]
a = 2
b = 3
forward = { rate_bps = 100e6, delay_ms = 2.0 }
return = { rate_bps = 100e6, delay_ms = 2.0 }
[[contact]]
from = 2
to = 3
start_s = 1.0
end_s = 10.0
[[traffic]]
from = 1
to = 3
window = 6
bundles = 6
bundle_size = 20000
[log]
bundle_csv = "b{node}.csv"
"#;
    let scn = Scenario::from_toml_str(text, "refuse.toml", dir.path()).unwrap();
    let mut s = Simulation::new(&scn).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(
        (sum.bundles_delivered, sum.bundles_acked),
        (6, 6),
        "{sum:?}"
    );
    assert!(sum.ltp_sessions_cancelled > 0, "{sum:?}");
    let node2 = s.nodes().iter().find(|n| n.number() == 2).unwrap();
    assert!(node2.counters().refused > 0, "{:?}", node2.counters());
    drop(s);
    let count = |node: u64, event: &str| {
        bundle_rows(&read(&dir.path().join(format!("b{node}.csv"))))
            .iter()
            .filter(|r| r[1] == event)
            .count()
    };
    assert!(count(2, "refused") > 0);
    assert!(count(1, "failed") > 0);
    assert_eq!(count(3, "delivered"), 6);
}
