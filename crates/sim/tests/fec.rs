//! The simulator drives the same FEC layer as a real node (`fec::Stack`): seed 003's set-up in virtual time.
//! HSLTP with 15 export sessions and one receive buffer delivers ten 100 kB bundles in about half a round trip
//! over a lossless link, and through 10 % forward loss every bundle still arrives exactly once (a failed
//! matrix is re-sent as a new session by the agent); ECLSA with one session delivers one bundle per round trip;
//! `[node.fec]` errors name the key.

use std::path::Path;

use sim::{Scenario, Simulation};

fn scenario(mode: &str, sessions: usize, per: f64, seed: u64) -> Scenario {
    let text = format!(
        r#"
[sim]
duration_s = 300.0
seed = {seed}
stop_when_idle = true

[[node]]
number = 1
ltp = {{ max_segment_size = 1022, max_export_sessions = {sessions}, max_import_sessions = 1, signal_replication = 3, margin_ms = 500.0 }}
fec = {{ mode = "{mode}", max_k = 128 }}

[[node]]
number = 2
ltp = {{ max_segment_size = 1022, max_export_sessions = {sessions}, max_import_sessions = 1, signal_replication = 3, margin_ms = 500.0 }}
fec = {{ mode = "{mode}", max_k = 128 }}

[[link]]
a = 1
b = 2
forward = {{ rate_bps = 10e6, delay_ms = 3000.0, loss = {{ model = "iid", per = {per} }} }}
return = {{ rate_bps = 10e6, delay_ms = 3000.0 }}

[[traffic]]
from = 1
to = 2
window = 10
bundles = 10
bundle_size = 100000
ack_colour = "green"
"#
    );
    Scenario::from_toml_str(&text, "fec.toml", Path::new(".")).unwrap()
}

/// Delivery times (s) of the client's bundles, in generation order.
fn deliveries(s: &Simulation) -> Vec<f64> {
    let n = &s.nodes()[0];
    let recs = n.client_records(2000).unwrap_or(&[]);
    recs.iter()
        .filter_map(|r| r.delivered.map(|d| (d - r.sent).as_secs_f64()))
        .collect()
}

#[test]
fn hsltp_delivers_ten_bundles_in_half_a_round_trip_through_one_receive_buffer() {
    let mut s = Simulation::new(&scenario("hsltp", 15, 0.0, 1)).unwrap();
    s.run();
    let d = deliveries(&s);
    assert_eq!(d.len(), 10);
    // 3 s of delay plus at most the ten matrices' transmission (~1 s at 10 Mb/s).
    assert!(d.iter().all(|&t| (3.0..4.1).contains(&t)), "{d:?}");
    let sum = s.summary();
    assert_eq!(sum.bundles_delivered, 10);
    assert_eq!(sum.fec_matrices_failed, 0);
    assert!(sum.fec_matrices_complete >= 10);
    assert_eq!(sum.retransmission_cycles, 0);
}

#[test]
fn hsltp_through_ten_percent_loss_delivers_every_bundle_once() {
    for seed in 1..=4 {
        let mut s = Simulation::new(&scenario("hsltp", 15, 0.10, seed)).unwrap();
        s.run();
        let sum = s.summary();
        assert_eq!(sum.bundles_delivered, 10, "seed {seed}");
        assert_eq!(sum.bundles_acked, 10, "seed {seed}");
        // Every failed data matrix cancelled its session; no segment was retransmitted by LTP.
        assert_eq!(sum.data_segments_retransmitted, 0, "seed {seed}");
        assert!(sum.fec_matrices_decoded > 0, "seed {seed}");
        assert!(
            sum.fec_sessions_cancelled <= sum.fec_matrices_failed,
            "seed {seed}"
        );
        assert_eq!(
            sum.ltp_sessions_cancelled, sum.fec_sessions_cancelled,
            "seed {seed}"
        );
    }
}

#[test]
fn eclsa_with_one_session_delivers_one_bundle_per_round_trip() {
    let mut s = Simulation::new(&scenario("eclsa", 1, 0.0, 1)).unwrap();
    s.run();
    let d = deliveries(&s);
    assert_eq!(d.len(), 10);
    for (k, t) in d.iter().enumerate() {
        // Bundle k waits k sessions of one RTT (6 s) each, then half an RTT.
        let ideal = 3.0 + 6.0 * k as f64;
        assert!(
            *t >= ideal && *t < ideal + 0.1 * (k + 1) as f64 + 0.2,
            "bundle {k}: {t}"
        );
    }
}

#[test]
fn fec_settings_are_validated_with_the_key_named() {
    let good = "[sim]\nduration_s = 1.0\n[[node]]\nnumber = 1\n";
    for (fec, key) in [
        ("fec = { mode = \"ldpc\" }", "node[0].fec.mode"),
        (
            "fec = { mode = \"eclsa\", code_rate = \"9/8\" }",
            "node[0].fec.code_rate",
        ),
        (
            "fec = { mode = \"eclsa\", max_k = 65000 }",
            "node[0].fec.max_k",
        ),
    ] {
        let e = Scenario::from_toml_str(&format!("{good}{fec}\n"), "x.toml", Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{e}");
    }
}
