//! A scenario's `node.ltp.adaptive_round_ms` reaches the adaptive pacer (`ltp::AdaptiveRate::min_round_time`),
//! as a node's `[[span]] adaptive_round_ms` does, and is refused where it would have no effect.

use std::path::Path;

use sim::{Scenario, Simulation};

/// Node 2's CPU takes 40 µs per segment (25 000 segments/s, 205 Mb/s of 1024-byte segments) behind a
/// 256-datagram receive queue; the link carries 500 Mb/s. Node 1 paces adaptively.
fn into_a_slow_receiver(ltp_extra: &str) -> String {
    format!(
        r#"
[sim]
duration_s = 30.0
seed = 11
[[node]]
number = 1
ltp = {{ max_segment_size = 1024, max_export_sessions = 4, rto_ms = 100.0, adaptive_rate = true {ltp_extra} }}
[[node]]
number = 2
ltp = {{ max_segment_size = 1024, max_export_sessions = 4, rto_ms = 100.0 }}
processing = {{ rx_latency_us = 100.0, per_segment_us = 40.0, rx_queue_datagrams = 256 }}
[[link]]
a = 1
b = 2
forward = {{ rate_bps = 500e6, delay_ms = 5.0 }}
return = {{ rate_bps = 500e6, delay_ms = 5.0 }}
[[traffic]]
from = 1
to = 2
window = 4
bundles = 40
bundle_size = 500000
"#
    )
}

fn run(ltp_extra: &str) -> sim::Summary {
    let scn = Scenario::from_toml_str(&into_a_slow_receiver(ltp_extra), "a.toml", Path::new("."))
        .unwrap();
    let mut s = Simulation::new(&scn).unwrap();
    s.run();
    s.summary()
}

#[test]
fn the_round_time_of_a_scenario_reaches_the_pacer() {
    let default = run("");
    let explicit = run(", adaptive_round_ms = 4.0");
    let long = run(", adaptive_round_ms = 40.0");
    for s in [&default, &explicit, &long] {
        assert_eq!(s.bundles_acked, 40, "{s:?}");
    }
    // 4 ms is the engine's default: the same run, datagram for datagram.
    assert_eq!(
        (
            default.segments_sent,
            default.rx_queue_drops,
            default.virtual_s
        ),
        (
            explicit.segments_sent,
            explicit.rx_queue_drops,
            explicit.virtual_s
        )
    );
    // A pacer deciding every 40 ms of sending instead of every 4 ms runs another course.
    assert_ne!(
        (default.segments_sent, default.rx_queue_drops),
        (long.segments_sent, long.rx_queue_drops),
        "{default:?}\n{long:?}"
    );
}

#[test]
fn a_round_time_without_adaptive_pacing_is_refused() {
    let text = into_a_slow_receiver(", adaptive_round_ms = 20.0")
        .replace("adaptive_rate = true", "adaptive_rate = false");
    let e = Scenario::from_toml_str(&text, "a.toml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(e.contains("node[0].ltp.adaptive_round_ms = 20"), "{e}");
    let text = into_a_slow_receiver(", adaptive_round_ms = -1.0");
    let e = Scenario::from_toml_str(&text, "a.toml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(e.contains("node[0].ltp.adaptive_round_ms = -1"), "{e}");
}
