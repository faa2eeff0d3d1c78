//! BIBE with custody transfer in virtual time: a three-node chain 1 – 2 – 3 where node 1
//! tunnels node 3's traffic to node 2 (the tunnel's far end) across the link 1 – 2, whose
//! channel drops everything for longer than half the bundles' lifetime without either node
//! being told (an outage, not a contact window). The BPDUs and custody signals travel in green
//! LTP blocks, which nobody acknowledges: only custody transfer can recover what the outage ate.

use std::path::Path;
use std::time::Duration;

use sim::{Scenario, Simulation};

const BUNDLES: u64 = 40;
/// The bundles live 60 s; the link 1 – 2 is dead from 10 s to 45 s (35 s > 30 s).
const LIFETIME_S: f64 = 60.0;
const OUTAGE: (f64, f64) = (10.0, 45.0);

fn scenario(custody: bool) -> Scenario {
    Scenario::from_toml_str(&scenario_text(custody), "bibe-chain", Path::new(".")).unwrap()
}

fn scenario_text(custody: bool) -> String {
    let (down, up) = OUTAGE;
    format!(
        r#"
[sim]
duration_s = 600.0
seed = 11
stop_when_idle = true
bundle_layer = "agent"

[[node]]
number = 1
[node.ltp]
max_segment_size = 1400
[node.bibe]
bpdu_colour = "green"
[[node.bibe_peer]]
peer = 102
endpoint = "ipn:2.0"
custody = {custody}
custody_timer_ms = 4000
[[node.route]]
dest = 3
via = 102

[[node]]
number = 2
[node.ltp]
max_segment_size = 1400
[node.bibe]
bpdu_colour = "green"
signal_delay_ms = 200

[[node]]
number = 3
[node.ltp]
max_segment_size = 1400
[[node.route]]
dest = 1
via = 2

[[link]]
a = 1
b = 2
forward = {{ rate_bps = 2e6, delay_ms = 100.0, availability = {{ model = "schedule", windows = [[0.0, {down}], [{up}, 100000.0]] }} }}
return = {{ rate_bps = 2e6, delay_ms = 100.0, availability = {{ model = "schedule", windows = [[0.0, {down}], [{up}, 100000.0]] }} }}

[[link]]
a = 2
b = 3
forward = {{ rate_bps = 2e6, delay_ms = 100.0 }}
return = {{ rate_bps = 2e6, delay_ms = 100.0 }}

[[traffic]]
from = 1
to = 3
interval_ms = 1000.0
bundles = {BUNDLES}
bundle_size = 2000
lifetime_s = {LIFETIME_S}
data_colour = "red"
ack_colour = "red"
"#
    )
}

fn node(s: &Simulation, n: u64) -> &sim::Node {
    s.nodes().iter().find(|x| x.number() == n).unwrap()
}

fn delivered_at_3(s: &Simulation) -> u64 {
    node(s, 3)
        .server_stats()
        .iter()
        .map(|(_, st)| st.received)
        .sum()
}

/// Runs in slices of 20 ms of virtual time and checks after each that node 1 released no more
/// bundles than node 2 accepted (or found redundant, i.e. already held): custody is never let
/// go before the next custodian took it.
fn run_checked(s: &mut Simulation) -> Vec<(Duration, u64, u64)> {
    let mut trace = Vec::new();
    let mut t = Duration::ZERO;
    loop {
        t += Duration::from_millis(20);
        let done = s.run_until(t);
        let b1 = node(s, 1).bibe().unwrap();
        let b2 = node(s, 2).bibe().unwrap();
        let taken = b2.counters.custody_accepted
            + b2.counters
                .custody_refused
                .get("redundant")
                .copied()
                .unwrap_or(0);
        assert!(
            b1.counters.custody_released <= taken,
            "at {t:?} node 1 released {} bundles but node 2 had taken custody of only {taken}",
            b1.counters.custody_released
        );
        trace.push((t, b1.counters.custody_released, taken));
        if done {
            return trace;
        }
    }
}

#[test]
fn custody_recovers_an_outage_longer_than_half_the_lifetime() {
    let mut s = Simulation::new(&scenario(true)).unwrap();
    let trace = run_checked(&mut s);
    let b1 = node(&s, 1).bibe().unwrap();
    let b2 = node(&s, 2).bibe().unwrap();
    assert_eq!(delivered_at_3(&s), BUNDLES, "every bundle reaches node 3");
    assert_eq!(b1.counters.encapsulated, BUNDLES);
    assert_eq!(b1.counters.custody_released, BUNDLES, "{b1:?}");
    assert_eq!(b1.pending, (0, 0), "nothing left waiting for custody");
    // The outage ate BPDUs (or their signals): timers fired and BPDUs were sent again.
    assert!(b1.counters.timer_expirations > 0, "{b1:?}");
    assert!(b1.counters.retransmissions > 0, "{b1:?}");
    assert_eq!(b1.counters.expired_in_custody, 0);
    assert_eq!(
        b2.counters.custody_accepted, BUNDLES,
        "node 2 took custody of each bundle once: {b2:?}"
    );
    // The bundles sent during the outage were released only after the link came back.
    let released_before_up = trace
        .iter()
        .filter(|(t, _, _)| t.as_secs_f64() < OUTAGE.1)
        .map(|(_, r, _)| *r)
        .max()
        .unwrap_or(0);
    assert!(
        released_before_up <= (OUTAGE.0 as u64) + 1,
        "released {released_before_up} before the link returned"
    );
    // Node 1's store holds nothing: every inner bundle was released, every BPDU sent.
    let st = node(&s, 1).agent_status().unwrap();
    assert_eq!(st.stored_bundles, 0, "{st:?}");
}

/// The same chain without custody: the bundles the outage swallowed are gone, so the test
/// above measures custody transfer and not the LTP links.
#[test]
fn without_custody_the_outage_loses_bundles() {
    let mut s = Simulation::new(&scenario(false)).unwrap();
    s.run();
    let got = delivered_at_3(&s);
    assert!(got < BUNDLES, "delivered {got}");
    // The bundles sent (one a second until 40 s) while the link was dead are lost.
    let sent_in_outage = BUNDLES.min(OUTAGE.1 as u64) - OUTAGE.0 as u64;
    let lost = BUNDLES - got;
    assert!(lost >= sent_in_outage - 1, "lost only {lost}");
    assert_eq!(node(&s, 1).bibe().unwrap().counters.retransmissions, 0);
}

#[test]
fn bibe_sections_are_validated() {
    let base = scenario(true);
    let mut bad = base.clone();
    bad.nodes[0].bibe_peers[0].peer = 2;
    bad.nodes[0].routes[0].via = 2;
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("bibe_peer[0].peer"), "{e}");
    let mut bad = base.clone();
    bad.nodes[0].bibe_peers[0].endpoint = "ipn:1.0".into();
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("bibe_peer[0].endpoint"), "{e}");
    let mut bad = base.clone();
    bad.nodes[0].bibe_peers[0].custody_timer_ms = 1;
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("custody_timer_ms"), "{e}");
    let mut bad = base.clone();
    bad.nodes[0].routes[0].dest = 2;
    let e = bad.validate().unwrap_err().to_string();
    assert!(e.contains("loop"), "{e}");
    // The sections are a real node's (the same type reads both), plus the simulator's colour.
    assert!(base.nodes[0].bibe.as_ref().unwrap().bpdu_colour == sim::scenario::Colour::Green);
    assert_eq!(
        base.nodes[1].bibe.as_ref().unwrap().engine.signal_delay_ms,
        200
    );
    let parse = |from: &str, to: &str| {
        let text = scenario_text(true).replacen(from, to, 1);
        Scenario::from_toml_str(&text, "bibe-chain", Path::new("."))
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    let e = parse("signal_delay_ms = 200", "signal_delay = 200");
    assert!(e.contains("signal_delay"), "{e}");
    let e = parse("bpdu_colour = \"green\"", "bpdu_colour = \"blue\"");
    assert!(e.contains("bpdu_colour") && e.contains("blue"), "{e}");
    let e = parse("custody_timer_ms = 4000", "custody_timer = 4000");
    assert!(e.contains("custody_timer"), "{e}");
}
