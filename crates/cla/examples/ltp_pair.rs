//! Two nodes, each an LTP adapter with a BP agent, over a 10 ms link that loses every 20th
//! datagram, in virtual time: node 1 sends 20 bundles of 20 kB to node 2; node 2's store holds
//! about ten of them and its application takes one delivery every 100 ms, so blocks are refused
//! while the store is full and node 1 backs off. Prints what the agents hear.
//!
//! Run with `cargo run -p cla --example ltp_pair`.

use std::time::Duration;

use bp::{AgentConfig, SendRequest};
use bpv7::Eid;
use bytes::Bytes;
use cla::pair::{Happened, Pair};
use ltp::SpanConfig;

fn main() {
    let span = |remote| {
        let mut s = SpanConfig::new(remote);
        s.max_segment_size = 1024;
        s.rate_bps = 100_000_000;
        s.rto = Some(Duration::from_millis(30));
        s
    };
    let agent = |n| {
        let mut c = AgentConfig::new(n);
        c.status_reports = false;
        if n == 2 {
            c.store_quota_bytes = 220_000;
        }
        c
    };
    let mut p = Pair::new(Duration::from_millis(10), span, |_| None, agent);
    let mut n = 0u64;
    p.loss = Box::new(move |_, _, _| {
        n += 1;
        n.is_multiple_of(20)
    });
    let ms = p.dtn_ms();
    for _ in 0..20 {
        let req = SendRequest::new(
            Eid::ipn(1, 1),
            Eid::ipn(2, 1),
            Bytes::from(vec![0u8; 20_000]),
        );
        p.node(1).agent.send(ms, req).expect("stored");
    }
    let app = Eid::ipn(2, 1);
    p.node(2).agent.register(app).expect("registered");
    while p.now < Duration::from_secs(10) {
        let until = p.now + Duration::from_millis(100);
        p.run(until);
        p.now = until;
        let ms = p.dtn_ms();
        let node2 = &mut p.node(2).agent;
        if let Some(d) = node2.poll_delivery() {
            node2.delivered(ms, d.key).expect("deleted");
        }
    }
    for h in &p.log {
        match h {
            Happened::Outcome(t, node, o) => println!(
                "{:>9.3} ms  node {node}: {:?} for {} bundle(s) ({:?})",
                t.as_secs_f64() * 1e3,
                o.outcome,
                o.tokens.len(),
                o.cause
            ),
            Happened::Block {
                at,
                node,
                bundles,
                confirmed,
                ..
            } => println!(
                "{:>9.3} ms  node {node}: block of {bundles} bundle(s) {}",
                at.as_secs_f64() * 1e3,
                if *confirmed {
                    "stored"
                } else {
                    "refused (store full)"
                }
            ),
            _ => {}
        }
    }
    let s1 = p.node(1).agent.status();
    let s2 = p.node(2).agent.status();
    println!(
        "node 1: forwarded {} of 20, refused by node 2 {} times; node 2: received {}, delivered {}",
        s1.forwarded, s1.cla_refusals, s2.received, s2.delivered
    );
}
