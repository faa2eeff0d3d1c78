//! Simulated timing agrees with closed-form expectations within 2 %.
//!
//! One session at a time (DTNperf window 1, one export session) on a 500 Mb/s link with 500 kB bundles in
//! 1024-byte segments. The red session lasts the radiation time of its segments, plus the round trip (both
//! delays), plus the modelled processing (receive latency + per-segment CPU at each end), plus the receiver's
//! bundle processing and store commit, since the final report is held until the block's bundles are committed
//! (as on a real node). With IID losses every retransmission cycle adds one round trip plus the radiation of
//! the retransmitted data, and every checkpoint timeout adds one RTO — counted from the run's own counters.
//! The closed forms assume segments leave one serialization time apart from the first one, so the scenarios
//! set the token-bucket depth to zero (`pacing_burst_ms = 0`; the engine default is 4 ms).

use std::path::Path;

use sim::{Scenario, Simulation};

const RATE: f64 = 500e6;
const DF: f64 = 0.010; // forward delay
const DR: f64 = 0.005; // return delay
const LAT: f64 = 0.001; // receive latency per node
const SEG: f64 = 2e-6; // per-segment CPU
const PER_BUNDLE: f64 = 100e-6;
const COMMIT: f64 = 300e-6; // store commit per received block
const RTO: f64 = 0.040;
const BUNDLE: usize = 500_000;

fn scenario(per: f64, bundles: u64, commit: f64) -> Scenario {
    let text = format!(
        r#"
[sim]
duration_s = 30.0
seed = 5

[[node]]
number = 1
ltp = {{ max_segment_size = 1024, max_export_sessions = 1, rto_ms = {rto}, pacing_burst_ms = 0.0 }}
processing = {{ rx_latency_us = {lat}, per_segment_us = {seg}, per_bundle_us = {pb}, commit_us = {commit} }}

[[node]]
number = 2
ltp = {{ max_segment_size = 1024, max_export_sessions = 1, rto_ms = {rto}, pacing_burst_ms = 0.0 }}
processing = {{ rx_latency_us = {lat}, per_segment_us = {seg}, per_bundle_us = {pb}, commit_us = {commit} }}

[[link]]
a = 1
b = 2
forward = {{ rate_bps = {RATE}, delay_ms = {df}, loss = {{ model = "iid", per = {per} }} }}
return = {{ rate_bps = {RATE}, delay_ms = {dr} }}

[[traffic]]
from = 1
to = 2
window = 1
bundles = {bundles}
bundle_size = {BUNDLE}
"#,
        rto = RTO * 1e3,
        lat = LAT * 1e6,
        seg = SEG * 1e6,
        pb = PER_BUNDLE * 1e6,
        commit = commit * 1e6,
        df = DF * 1e3,
        dr = DR * 1e3,
    );
    Scenario::from_toml_str(&text, "agreement.toml", Path::new(".")).unwrap()
}

/// Round trip including processing at both ends.
fn rtt_p() -> f64 {
    DF + DR + 2.0 * (LAT + SEG)
}

/// Time the receiver holds the final report of a block carrying one bundle: bundle processing, then the commit.
const HOLD: f64 = PER_BUNDLE + COMMIT;

fn within(actual: f64, expected: f64, what: &str) {
    let err = (actual - expected).abs() / expected;
    assert!(
        err < 0.02,
        "{what}: simulated {actual:.6}, expected {expected:.6} ({:.2} % off)",
        err * 100.0
    );
}

#[test]
fn lossless_session_duration_and_goodput() {
    let n = 20;
    let mut s = Simulation::new(&scenario(0.0, n, COMMIT)).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(sum.bundles_acked, n, "{sum:?}");
    let red: Vec<_> = s.sessions().iter().filter(|r| r.red).collect();
    assert_eq!(red.len() as u64, n);
    // Radiation of one block: the forward bytes per session (the report acks add a few bytes, well below 0.1 %).
    let (_, _, fwd, ret) = s.link_counters()[0];
    let radiation = fwd.offered_bytes as f64 * 8.0 / RATE / n as f64;
    assert!(
        (radiation - BUNDLE as f64 * 8.0 / RATE).abs() / radiation < 0.05,
        "radiation {radiation}"
    );
    let expected = radiation + rtt_p() + HOLD;
    for r in &red {
        within(
            (r.end - r.start).as_secs_f64(),
            expected,
            "lossless session duration",
        );
    }
    within(sum.mean_session_s, expected, "mean session duration");
    // Goodput: one bundle per cycle = radiation + forward delay + receive processing + bundle processing and
    // commit, then the green ACK back (its radiation, return delay, processing, commit) and the next bundle starts.
    let ack_radiation = (ret.offered_bytes as f64 * 8.0 / RATE) / n as f64;
    let cycle = radiation + rtt_p() + 2.0 * HOLD + ack_radiation;
    let expected_goodput = BUNDLE as f64 * 8.0 / cycle;
    within(sum.goodput_bps, expected_goodput, "goodput");
    assert_eq!(sum.retransmission_cycles, 0);
    assert_eq!(sum.rto_expirations, 0);
}

#[test]
fn final_report_waits_for_the_commit() {
    // A slow store (5 ms per commit, e.g. an fsync): every red session lasts exactly that much longer, because
    // the receiver releases the report claiming the whole block only once its bundle is committed.
    const SLOW_COMMIT: f64 = 0.005;
    let n = 5;
    let mut s = Simulation::new(&scenario(0.0, n, SLOW_COMMIT)).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(sum.bundles_acked, n, "{sum:?}");
    assert_eq!(sum.rto_expirations, 0, "{sum:?}");
    let (_, _, fwd, _) = s.link_counters()[0];
    let radiation = fwd.offered_bytes as f64 * 8.0 / RATE / n as f64;
    let expected = radiation + rtt_p() + PER_BUNDLE + SLOW_COMMIT;
    let red: Vec<_> = s.sessions().iter().filter(|r| r.red).collect();
    assert_eq!(red.len() as u64, n);
    for r in red {
        within(
            (r.end - r.start).as_secs_f64(),
            expected,
            "session with a held final report",
        );
    }
}

#[test]
fn parallel_sessions_hold_the_report_only_for_their_own_bundle() {
    // Three sessions in flight: while a block's bundle is processed and committed, the next sessions' segments
    // keep arriving. The CPU serves work in queue order, so the held report waits for this bundle's processing
    // and commit only, not for segments still in the receive pipeline.
    let n = 12;
    let mut scn = scenario(0.0, n, COMMIT);
    for node in &mut scn.nodes {
        node.ltp.max_export_sessions = 3;
    }
    scn.traffic[0].window = Some(3);
    let mut s = Simulation::new(&scn).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(sum.bundles_acked, n, "{sum:?}");
    let (_, _, fwd, _) = s.link_counters()[0];
    let radiation = fwd.offered_bytes as f64 * 8.0 / RATE / n as f64;
    // Segments are sent session after session, so each session's own data takes one block's radiation time.
    within(
        sum.mean_session_s,
        radiation + rtt_p() + HOLD,
        "mean of parallel sessions",
    );
}

#[test]
fn iid_loss_adds_one_cycle_per_loss_event() {
    let n = 30;
    let mut s = Simulation::new(&scenario(0.005, n, COMMIT)).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(sum.bundles_acked, n, "{sum:?}");
    assert!(
        sum.lost_channel > 20 && sum.retransmission_cycles >= n / 2,
        "{sum:?}"
    );
    let red: Vec<_> = s.sessions().iter().filter(|r| r.red).collect();
    let actual: f64 = red.iter().map(|r| (r.end - r.start).as_secs_f64()).sum();
    let (_, _, fwd, _) = s.link_counters()[0];
    // Every forward byte is radiated inside some session (first sends, retransmissions, resent checkpoints).
    let radiation = fwd.offered_bytes as f64 * 8.0 / RATE;
    let expected = radiation
        + (red.len() as f64 + sum.retransmission_cycles as f64) * rtt_p()
        + red.len() as f64 * HOLD
        + sum.rto_expirations as f64 * RTO;
    within(actual, expected, "total red session time");
}

#[test]
fn cpu_slower_than_the_link_queues_segments() {
    // 40 µs of CPU per received segment, over twice the 16.4 µs a 1024-byte segment takes at 500 Mb/s: the
    // receiver's CPU becomes the bottleneck and the session lasts N × 40 µs instead of the radiation time.
    const SLOW: f64 = 40e-6;
    let text = format!(
        r#"
[sim]
duration_s = 5.0
seed = 5
[[node]]
number = 1
ltp = {{ max_segment_size = 1024, max_export_sessions = 1, rto_ms = 200.0 }}
processing = {{ rx_latency_us = {lat}, per_segment_us = {slow} }}
[[node]]
number = 2
ltp = {{ max_segment_size = 1024, max_export_sessions = 1, rto_ms = 200.0 }}
processing = {{ rx_latency_us = {lat}, per_segment_us = {slow} }}
[[link]]
a = 1
b = 2
forward = {{ rate_bps = {RATE}, delay_ms = {df} }}
return = {{ rate_bps = {RATE}, delay_ms = {dr} }}
[[traffic]]
from = 1
to = 2
window = 1
bundles = 5
bundle_size = {BUNDLE}
"#,
        lat = LAT * 1e6,
        slow = SLOW * 1e6,
        df = DF * 1e3,
        dr = DR * 1e3,
    );
    let scn = Scenario::from_toml_str(&text, "cpu.toml", Path::new(".")).unwrap();
    let mut s = Simulation::new(&scn).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(sum.bundles_acked, 5, "{sum:?}");
    let sender = &s.nodes()[0];
    let segments = sender.engine().span_stats(2).unwrap().data_segments_sent as f64 / 5.0;
    // First segment serialized, then the CPU works through every segment back to back; the report returns.
    let first = 1024.0 * 8.0 / RATE;
    let expected = first + DF + LAT + segments * SLOW + DR + LAT + SLOW;
    for r in s.sessions().iter().filter(|r| r.red) {
        within(
            (r.end - r.start).as_secs_f64(),
            expected,
            "CPU-bound session duration",
        );
    }
}
