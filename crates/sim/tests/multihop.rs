//! Three nodes with contact windows: every bundle crosses each hop inside its window.

use std::path::Path;
use std::time::Duration;

use sim::scenario::BundleLayer;
use sim::{Scenario, Simulation};

#[test]
fn every_bundle_delivered_in_its_window_with_the_agent() {
    check(BundleLayer::Agent);
}

#[test]
fn every_bundle_delivered_in_its_window_with_the_static_layer() {
    check(BundleLayer::Static);
}

#[test]
fn contact_plan_file_with_cgr_routing() {
    check_file("three_node_plan.toml", BundleLayer::Agent);
}

/// The agents share one plan: a copy per node made memory and load time grow with
/// nodes × plan size (12 GB for a 96-satellite shell with inter-satellite links).
#[test]
fn every_agent_shares_one_contact_plan() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sim/three_node_plan.toml");
    let scn = Scenario::load(&path).unwrap();
    let s = Simulation::new(&scn).unwrap();
    let plans: Vec<_> = s
        .nodes()
        .iter()
        .map(|n| n.contact_plan().unwrap())
        .collect();
    assert_eq!(plans.len(), 3);
    for p in &plans[1..] {
        assert!(std::sync::Arc::ptr_eq(p, plans[0]));
    }
    // One handle per agent and nothing else keeps the plan.
    assert_eq!(std::sync::Arc::strong_count(plans[0]), 3);
}

fn check(layer: BundleLayer) {
    check_file("three_node_contacts.toml", layer);
}

fn check_file(name: &str, layer: BundleLayer) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/sim")
        .join(name);
    let mut scn = Scenario::load(&path).unwrap();
    scn.sim.bundle_layer = layer;
    let mut s = Simulation::new(&scn).unwrap();
    s.run();
    let sum = s.summary();
    assert_eq!(
        (sum.bundles_sent, sum.bundles_delivered, sum.bundles_acked),
        (10, 10, 10),
        "{sum:?}"
    );
    let node1 = s.nodes().iter().find(|n| n.number() == 1).unwrap();
    let records = node1.client_records(2000).unwrap();
    assert_eq!(records.len(), 10);
    let secs = Duration::from_secs;
    for r in records {
        // Generated while 1-2 is up, delivered at 3 only once 2-3 opens, ACK back in the second 1-2 window.
        assert!(r.sent < secs(2), "{r:?}");
        let d = r.delivered.unwrap();
        assert!(
            d >= secs(3) && d < secs(5),
            "delivered outside [3, 5): {r:?}"
        );
        let a = r.acked.unwrap();
        assert!(a >= secs(6) && a < secs(8), "acked outside [6, 8): {r:?}");
    }
    // Node 2 relayed all of them in both directions.
    let node2 = s.nodes().iter().find(|n| n.number() == 2).unwrap();
    assert_eq!(node2.counters().received, 20);
    assert_eq!(node2.counters().forwarded, 20);
}

#[test]
fn scenario_errors_name_the_field() {
    let bad = r#"
[sim]
duration_s = 1.0
[[node]]
number = 1
[[link]]
a = 1
b = 9
"#;
    let e = Scenario::from_toml_str(bad, "x.toml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("link[0].b = 9") && e.contains("another [[node]]"),
        "{e}"
    );
    let unknown = "[sim]\nduration_s = 1.0\nbogus = 1\n[[node]]\nnumber = 1\n";
    let e = Scenario::from_toml_str(unknown, "x.toml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bogus"), "{e}");
    let window = r#"
[sim]
duration_s = 1.0
[[node]]
number = 1
[[node]]
number = 2
[[link]]
a = 1
b = 2
[[traffic]]
from = 1
to = 2
bundle_size = 1000
"#;
    let e = Scenario::from_toml_str(window, "x.toml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("traffic[0].window") && e.contains("exactly one"),
        "{e}"
    );
}
