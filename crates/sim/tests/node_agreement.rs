//! The simulator and the node take the same decisions between the agent and LTP: one sequence of
//! situations — a refusal from a full receiver (with and without HSLTP), an HSLTP matrix that
//! cannot be decoded, a sender out of checkpoint retransmissions, a block holding three bundles
//! and bytes that are no bundle — goes through `dtnkit sim` and through the LTP adapter driven
//! the way the node's threads drive it (`cla::pair`), and the outcomes (sent, refused with
//! back-off, failed and forwarded again, bundles stored, discards) are the same.
//!
//! Before the adapter, the simulator turned every cancelled export into a failure (so it retried
//! a full receiver at once where the node backed off), split blocks with another function than
//! the node, and did not count discards.

use std::time::Duration;

use bp::{AgentConfig, SendRequest};
use bpv7::{BundleBuilder, CreationTimestamp, Eid};
use bytes::Bytes;
use cla::pair::{Pair, EPOCH_MS};
use ltp::SpanConfig;
use sim::{Scenario, Simulation};

const RUN: Duration = Duration::from_millis(1_200);
const RATE: u64 = 100_000_000;
const QUOTA_FULL: u64 = 100;
/// Node 1's datagrams sent in this interval are lost (HSLTP decode failure); the bounds fall
/// between paced symbol times.
const LOSS_WINDOW: (f64, f64) = (0.010_003_7, 0.019_996_1);
/// Everything node 1 sends before this is lost (retransmission limit).
const DARK_UNTIL_S: f64 = 0.1;

#[derive(Clone, Copy, Debug)]
struct Case {
    name: &'static str,
    quota: u64,
    hsltp: bool,
    payload: usize,
    loss: Loss,
    garbage: bool,
    /// The spans' RTO (ms): above the round trip plus what a block's matrix takes to leave.
    rto_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Loss {
    None,
    Window,
    Dark,
}

/// What the comparison looks at: node 1's adapter and agent, node 2's agent.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    exports_completed: u64,
    exports_cancelled: u64,
    exports_refused: u64,
    forwarded: u64,
    cla_failures: u64,
    cla_refusals: u64,
    received_at_2: u64,
    discarded_at_2: Vec<(&'static str, u64)>,
}

fn seen(
    s1: &cla::LtpClaStats,
    a1: &bp::AgentStatus,
    a2: &bp::AgentStatus,
    data_received_at_2: u64,
) -> Seen {
    Seen {
        exports_completed: s1.exports_completed,
        exports_cancelled: s1.exports_cancelled,
        exports_refused: s1.exports_refused,
        forwarded: a1.forwarded,
        cla_failures: a1.cla_failures,
        cla_refusals: a1.cla_refusals,
        received_at_2: data_received_at_2,
        discarded_at_2: a2.discarded.iter().map(|(k, v)| (*k, *v)).collect(),
    }
}

fn garbage_block() -> Bytes {
    let mut block = Vec::new();
    for seq in 1..=3u64 {
        let b = BundleBuilder::new(Eid::ipn(1, 5), Eid::ipn(2, 5))
            .creation(CreationTimestamp::new(EPOCH_MS, seq))
            .lifetime_ms(3_600_000)
            .payload(Bytes::from(vec![seq as u8; 300]))
            .build()
            .expect("bundle");
        block.extend(b.encode());
    }
    block.extend_from_slice(b"no bundle here");
    Bytes::from(block)
}

fn through_the_simulator(c: Case) -> Seen {
    let fec = if c.hsltp {
        "[node.fec]\nmode = \"hsltp\"\nmatrix_timeout_ms = 20.0\n"
    } else {
        ""
    };
    let availability = match c.loss {
        Loss::None => String::new(),
        Loss::Window => format!(
            ", availability = {{ model = \"schedule\", windows = [[0.0, {}], [{}, 1000.0]] }}",
            LOSS_WINDOW.0, LOSS_WINDOW.1
        ),
        Loss::Dark => format!(
            ", availability = {{ model = \"schedule\", windows = [[{DARK_UNTIL_S}, 1000.0]] }}"
        ),
    };
    let traffic = if c.garbage {
        String::new()
    } else {
        format!(
            "[[traffic]]\nfrom = 1\nto = 2\nwindow = 1\nbundles = 1\nbundle_size = {}\n",
            c.payload
        )
    };
    let ltp = format!(
        "ltp = {{ max_segment_size = 1024, rto_ms = {}, max_checkpoint_retransmissions = 2, rate_bps = {RATE} }}",
        c.rto_ms
    );
    let text = format!(
        r#"
[sim]
duration_s = {run}
seed = 1
epoch_dtn_ms = {EPOCH_MS}

[[node]]
number = 1
{ltp}
{fec}
[[node]]
number = 2
{ltp}
store = {{ quota_bytes = {quota} }}
{fec}
[[link]]
a = 1
b = 2
forward = {{ delay_ms = 10.0{availability} }}
return = {{ delay_ms = 10.0 }}

{traffic}
"#,
        run = RUN.as_secs_f64(),
        quota = c.quota,
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let scn = Scenario::from_toml_str(&text, "agreement.toml", dir.path())
        .unwrap_or_else(|e| panic!("{}: {e}\n{text}", c.name));
    let mut s = Simulation::new(&scn).expect("simulation");
    if c.garbage {
        assert!(s.inject_ltp_item(1, 2, garbage_block(), true));
    }
    s.run();
    let n = s.nodes();
    let (a1, a2) = (
        n[0].agent_status().expect("agent"),
        n[1].agent_status().expect("agent"),
    );
    // Node 2 also originates DTNperf acknowledgments; only node 1's data counts here.
    seen(n[0].ltp_stats(), &a1, &a2, a2.received)
}

fn through_the_node_adapter(c: Case) -> Seen {
    let span = move |remote| {
        let mut s = SpanConfig::new(remote);
        s.max_segment_size = 1024;
        s.rto = Some(Duration::from_millis(c.rto_ms));
        s.max_checkpoint_retransmissions = 2;
        s.aggregation_max_items = 1;
        s.rate_bps = RATE;
        s
    };
    let fec = move |remote| {
        c.hsltp.then(|| {
            let mut f = fec::FecConfig::new(remote, fec::Mode::Hsltp);
            f.rate_bps = RATE;
            f.matrix_timeout = Duration::from_millis(20);
            f
        })
    };
    let agent = move |n| {
        let mut a = AgentConfig::new(n);
        a.status_reports = false;
        if n == 2 {
            a.store_quota_bytes = c.quota;
        }
        a
    };
    let mut p = Pair::new(Duration::from_millis(10), span, fec, agent);
    let window = (
        Duration::from_secs_f64(LOSS_WINDOW.0),
        Duration::from_secs_f64(LOSS_WINDOW.1),
    );
    let loss = c.loss;
    p.loss = Box::new(move |t, from, _| {
        from == 1
            && match loss {
                Loss::None => false,
                Loss::Window => t > window.0 && t < window.1,
                Loss::Dark => t < Duration::from_secs_f64(DARK_UNTIL_S),
            }
    });
    if c.garbage {
        p.node(1)
            .cla
            .send(Duration::ZERO, 2, u64::MAX - 1, garbage_block(), true);
    } else {
        let req = SendRequest::new(
            Eid::ipn(1, 1),
            Eid::ipn(2, 1),
            Bytes::from(vec![0u8; c.payload]),
        );
        p.node(1).agent.send(EPOCH_MS, req).expect("stored");
    }
    p.run(RUN);
    if c.garbage {
        for h in p.log.iter().take(40) {
            if !matches!(h, cla::pair::Happened::Sent(..)) {
                eprintln!("{h:?}");
            }
        }
    }
    let a1 = p.node(1).agent.status();
    let a2 = p.node(2).agent.status();
    let s1 = *p.node(1).cla.stats();
    seen(&s1, &a1, &a2, a2.received)
}

#[test]
fn the_simulator_and_the_node_adapter_take_the_same_decisions() {
    let cases = [
        Case {
            name: "a full receiver refuses: back off",
            quota: QUOTA_FULL,
            hsltp: false,
            payload: 500,
            loss: Loss::None,
            garbage: false,
            rto_ms: 30,
        },
        Case {
            name: "a full HSLTP receiver refuses: back off",
            quota: QUOTA_FULL,
            hsltp: true,
            payload: 500,
            loss: Loss::None,
            garbage: false,
            rto_ms: 30,
        },
        Case {
            name: "an HSLTP matrix cannot be decoded: forward again at once",
            quota: 1 << 30,
            hsltp: true,
            payload: 500_000,
            loss: Loss::Window,
            garbage: false,
            rto_ms: 200,
        },
        Case {
            name: "the sender runs out of checkpoint retransmissions: forward again at once",
            quota: 1 << 30,
            hsltp: false,
            payload: 500,
            loss: Loss::Dark,
            garbage: false,
            rto_ms: 30,
        },
        Case {
            name: "three bundles and garbage in one block: stored, discarded, acknowledged",
            quota: 1 << 30,
            hsltp: false,
            payload: 0,
            loss: Loss::None,
            garbage: true,
            rto_ms: 30,
        },
    ];
    for c in cases {
        let sim = through_the_simulator(c);
        let node = through_the_node_adapter(c);
        assert_eq!(
            sim, node,
            "{}: simulator (left) vs node adapter (right)",
            c.name
        );
        // And each case shows what it is about.
        match c.name.split(':').next().unwrap_or("") {
            n if n.contains("refuses") => {
                assert!(
                    node.cla_refusals >= 2 && node.exports_refused >= 2,
                    "{n}: {node:?}"
                )
            }
            n if n.contains("decoded") || n.contains("retransmissions") => assert!(
                node.cla_failures == 1 && node.cla_refusals == 0 && node.forwarded == 1,
                "{n}: {node:?}"
            ),
            n => assert!(
                node.received_at_2 == 3
                    && node.discarded_at_2 == [("trailing_bytes", 1)]
                    && node.exports_completed == 1,
                "{n}: {node:?}"
            ),
        }
    }
}
