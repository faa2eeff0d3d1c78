//! Two real `dtnkit node`s with packet-layer FEC (HSLTP, Rc 8/9) on their LTP spans, through the `dtnkit emu`
//! relay with 10 % IID loss in both directions, deliver 1000 small bundles intact and exactly once: every bundle is
//! acknowledged, the server counted each once, the FEC layer restored segments (FEC_DECODED rows in the
//! receiver's segment log) and the bundles of the matrices it could not restore were re-forwarded in new sessions.

use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_dtnkit");

const SCENARIO: &str = r#"
[sim]
duration_s = 60.0
seed = 5

[[node]]
number = 1
ltp = { max_segment_size = 1022, max_export_sessions = 32, max_import_sessions = 1, signal_replication = 3, rto_ms = 400.0 }
fec = { mode = "hsltp", max_k = 64, code_rate = "8/9" }

[[node]]
number = 2
ltp = { max_segment_size = 1022, max_export_sessions = 32, max_import_sessions = 1, signal_replication = 3, rto_ms = 400.0 }
fec = { mode = "hsltp", max_k = 64, code_rate = "8/9" }

[[link]]
a = 1
b = 2
forward = { rate_bps = 20e6, delay_ms = 10.0, loss = { model = "iid", per = 0.10 } }
return = { rate_bps = 20e6, delay_ms = 10.0, loss = { model = "iid", per = 0.10 } }

[[traffic]]
from = 1
to = 2
window = 32
bundles = 1000
bundle_size = 1000
lifetime_s = 600.0
data_colour = "red"
ack_colour = "red"
"#;

/// Rows of a segment log whose `seg_type` is `name`.
fn rows(p: &Path, name: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .filter(|f| f.get(6).map(String::as_str) == Some(name))
        .collect()
}

#[test]
fn two_nodes_with_fec_deliver_1000_bundles_through_10_percent_loss() {
    let scn = sim::Scenario::from_toml_str(SCENARIO, "lab-fec.toml", Path::new(".")).unwrap();
    let work = std::env::temp_dir().join(format!("dtnkit-lab-fec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let mut opts = lab::LabOptions::new(BIN, &work);
    opts.durable_store = false;
    opts.drain_timeout = Duration::from_secs(20);
    opts.startup_timeout = Duration::from_secs(15);
    let out = lab::run_emulated(&scn, &opts, &mut |_| {}).unwrap();
    let r = out.client;
    assert_eq!(r.sent, 1000);
    assert!(out.all_acked, "{} sent, {} acked", r.sent, r.acked);
    assert_eq!(r.acked, 1000);
    assert_eq!(
        out.server.received, 1000,
        "each bundle reached the server once"
    );
    // The relay erased about 10 % of the datagrams each way.
    let f = out.emu.forward;
    let lost = f.lost_channel.unwrap() as f64 / f.received.unwrap() as f64;
    assert!((0.07..0.13).contains(&lost), "forward loss {lost}");
    assert_eq!(f.relay_drops(), 0);
    // The FEC layer restored segments at the receiver; the log rows are in the nodes' segment logs.
    let (a, b) = (&out.nodes[0], &out.nodes[1]);
    let decoded = rows(&b.segment_log, "FEC_DECODED");
    assert!(decoded.len() > 50, "{} matrices decoded", decoded.len());
    assert!(!rows(&a.segment_log, "FEC_TX").is_empty());
    // No segment retransmission cycle was needed for data matrices that decoded; those that failed cancelled
    // their session (CR from node 2) and the bundle went again in a new one: as many re-forwarded as failed.
    let failed = rows(&b.segment_log, "FEC_FAILED").len();
    let cancelled_by_rx = rows(&a.segment_log, "TX_END")
        .iter()
        .filter(|f| f.get(14).map(String::as_str) == Some("SYS_CNCLD"))
        .count();
    assert!(
        cancelled_by_rx <= failed,
        "{cancelled_by_rx} cancelled, {failed} failed"
    );
    let _ = std::fs::remove_dir_all(&work);
}
