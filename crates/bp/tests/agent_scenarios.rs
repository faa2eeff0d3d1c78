//! Agents wired through a fake in-memory convergence layer, in virtual time.

#[path = "agent_harness.rs"]
mod harness;

use bp::{
    Accepted, AgentConfig, ClaOutcome, ContactPlan, MemoryStore, NodeRange, ReportFlags, RxError,
    SendError, SendRequest, Store,
};
use bpv7::{AdminRecord, Bundle, BundleBuilder, CreationTimestamp, Eid, ReasonCode};
use bytes::Bytes;
use harness::{Net, T0};

fn eid(s: &str) -> Eid {
    s.parse().expect("eid")
}

fn req(src: &str, dst: &str, payload: &[u8]) -> SendRequest {
    SendRequest::new(eid(src), eid(dst), Bytes::copy_from_slice(payload))
}

fn cfg(n: u64) -> AgentConfig {
    AgentConfig::new(n)
}

/// Static routes so that every node reaches every other one along the chain 1-2-3.
fn chain(net: &mut Net<MemoryStore>) {
    net.connect(1, 2);
    net.connect(2, 3);
    let r = |n| NodeRange::single(n).expect("range");
    net.agent(1)
        .static_routes_mut()
        .add(r(3), 2)
        .expect("route");
    net.agent(3)
        .static_routes_mut()
        .add(r(1), 2)
        .expect("route");
}

#[test]
fn send_and_deliver_between_neighbours() {
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    net.register(2, "ipn:2.5");
    let id = net
        .agent(1)
        .send(T0, req("ipn:1.1", "ipn:2.5", b"hello"))
        .expect("send");
    assert_eq!(net.agent(1).status().stored_bundles, 1);
    net.run_until(T0 + 100, 10);
    assert_eq!(net.payloads_at(2), vec![b"hello".to_vec()]);
    let d = &net.got[0].delivery;
    assert_eq!(d.id, id);
    assert_eq!(d.endpoint, eid("ipn:2.5"));
    assert_eq!(d.source, eid("ipn:1.1"));
    for n in [1, 2] {
        let a = net.agent(n);
        a.flush().expect("flush");
        assert_eq!(a.status().stored_bundles, 0, "node {n}");
        assert_eq!(a.store().bundle_count(), 0, "node {n}");
        assert_eq!(a.store().used_bytes(), 0, "node {n}");
    }
    assert_eq!(net.agent(1).status().forwarded, 1);
    assert_eq!(net.agent(2).status().delivered, 1);
}

#[test]
fn delivery_waits_for_registration() {
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    net.agent(1)
        .send(T0, req("ipn:1.1", "ipn:2.9", b"later"))
        .expect("send");
    net.run_until(T0 + 100, 10);
    assert!(net.got.is_empty());
    assert_eq!(net.agent(2).status().pending_delivery, 1);
    net.register(2, "ipn:2.9");
    net.now = T0 + 200;
    net.step();
    assert_eq!(net.payloads_at(2), vec![b"later".to_vec()]);
}

#[test]
fn multi_hop_waits_for_the_second_contact() {
    let plan = ContactPlan::from_ion_str(
        "a contact +0 +60 1 2 125000\n\
         a contact +30 +90 2 3 125000\n\
         a range +0 +90 1 2 1\n\
         a range +0 +90 2 3 1\n",
        "test.rc",
        T0,
    )
    .expect("plan");
    let mut net = Net::memory(&[1, 2, 3], cfg);
    for n in [1, 2, 3] {
        net.agent(n).set_contact_plan(Some(plan.clone()), true);
    }
    net.register(3, "ipn:3.1");
    net.agent(1)
        .send(T0, req("ipn:1.1", "ipn:3.1", &[7u8; 1000]))
        .expect("send");
    net.run_until(T0 + 20_000, 500);
    assert!(net.got.is_empty());
    assert_eq!(net.agent(1).status().stored_bundles, 0);
    let s2 = net.agent(2).status();
    assert_eq!(s2.stored_bundles, 1);
    assert_eq!(s2.queued_per_neighbour, vec![(3, 1)]);
    net.run_until(T0 + 40_000, 500);
    assert_eq!(net.payloads_at(3).len(), 1);
    assert!(
        net.got[0].at >= T0 + 30_000,
        "delivered at {}",
        net.got[0].at
    );
    assert_eq!(net.agent(2).status().stored_bundles, 0);
}

#[test]
fn lifetime_expiry_deletes_and_reports() {
    let mut net = Net::memory(&[1, 2], cfg);
    let mut r = req("ipn:1.1", "ipn:2.1", b"short-lived");
    r.lifetime_ms = 1000;
    r.report_flags.deletion = true;
    let id = net.agent(1).send(T0, r).expect("send");
    assert_eq!(net.agent(1).poll_timeout(), Some(T0 + 1000));
    net.run_until(T0 + 999, 111);
    assert_eq!(net.agent(1).status().stored_bundles, 1);
    net.run_until(T0 + 1000, 1);
    let s = net.agent(1).status();
    assert_eq!((s.stored_bundles, s.expired), (0, 1));
    // The deletion report is addressed to our own node id: it comes back through poll_admin.
    let notice = net.agent(1).poll_admin().expect("admin record");
    let AdminRecord::StatusReport(sr) = notice.record else {
        panic!("not a status report");
    };
    assert!(sr.deleted.asserted);
    assert_eq!(sr.reason, ReasonCode::LifetimeExpired);
    assert_eq!((sr.source, sr.timestamp), (id.source, id.timestamp));
}

#[test]
fn expired_bundle_from_cla_is_dropped() {
    let mut net = Net::memory(&[2], cfg);
    let b = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:2.1"))
        .creation(CreationTimestamp::new(T0 - 10_000, 0))
        .lifetime_ms(5_000)
        .payload(&b"old"[..])
        .build()
        .expect("build");
    let r = net
        .agent(2)
        .accept_from_cla(T0, Some(1), Bytes::from(b.encode()))
        .expect("accepted");
    assert!(matches!(r, Accepted::Expired(_)));
    assert_eq!(net.agent(2).status().stored_bundles, 0);
}

#[test]
fn hop_limit_stops_a_bundle() {
    let mut net = Net::memory(&[1, 2, 3], cfg);
    chain(&mut net);
    net.register(3, "ipn:3.1");
    let mut r = req("ipn:1.1", "ipn:3.1", b"one hop only");
    r.hop_limit = Some(1);
    net.agent(1).send(T0, r).expect("send");
    let mut r = req("ipn:1.1", "ipn:3.1", b"two hops ok");
    r.hop_limit = Some(2);
    net.agent(1).send(T0, r).expect("send");
    net.run_until(T0 + 100, 10);
    assert_eq!(net.payloads_at(3), vec![b"two hops ok".to_vec()]);
    assert_eq!(net.agent(2).status().hop_limit_exceeded, 1);
    assert_eq!(net.agent(2).status().stored_bundles, 0);
}

#[test]
fn hop_limit_exceeded_on_arrival_is_dropped() {
    let mut net = Net::memory(&[2], cfg);
    let mut b = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:3.1"))
        .creation(CreationTimestamp::new(T0, 0))
        .hop_limit(1)
        .payload(&b"x"[..])
        .build()
        .expect("build");
    b.increment_hop_count().expect("hop");
    b.increment_hop_count().expect("hop");
    let r = net
        .agent(2)
        .accept_from_cla(T0, Some(1), Bytes::from(b.encode()))
        .expect("accepted");
    assert!(matches!(r, Accepted::HopLimitExceeded(_)));
}

#[test]
fn duplicates_are_dropped_while_held_and_after_delivery() {
    let mut net = Net::memory(&[2], cfg);
    let b = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:2.1"))
        .creation(CreationTimestamp::new(T0, 3))
        .payload(&b"once"[..])
        .build()
        .expect("build");
    let wire = Bytes::from(b.encode());
    let first = net
        .agent(2)
        .accept_from_cla(T0, Some(1), wire.clone())
        .expect("ok");
    assert!(matches!(first, Accepted::Stored { .. }));
    let again = net
        .agent(2)
        .accept_from_cla(T0, Some(1), wire.clone())
        .expect("ok");
    assert!(matches!(again, Accepted::Duplicate(_)));
    net.register(2, "ipn:2.1");
    net.step();
    assert_eq!(net.payloads_at(2).len(), 1);
    let after = net
        .agent(2)
        .accept_from_cla(T0 + 5, Some(1), wire.clone())
        .expect("ok");
    assert!(matches!(after, Accepted::Duplicate(_)));
    // A batch containing the same bundle twice stores it once.
    let b2 = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:2.1"))
        .creation(CreationTimestamp::new(T0, 4))
        .payload(&b"twice in a batch"[..])
        .build()
        .expect("build");
    let w2 = Bytes::from(b2.encode());
    let rs = net
        .agent(2)
        .accept_from_cla_batch(T0 + 6, Some(1), &[w2.clone(), w2]);
    assert!(matches!(rs[0], Ok(Accepted::Stored { .. })));
    assert!(matches!(rs[1], Ok(Accepted::Duplicate(_))));
    net.step();
    assert_eq!(net.payloads_at(2).len(), 2);
    assert_eq!(net.agent(2).status().duplicates, 3);
}

#[test]
fn malformed_input_is_a_permanent_refusal() {
    let mut net = Net::memory(&[2], cfg);
    let e = net
        .agent(2)
        .accept_from_cla(T0, Some(1), Bytes::from_static(b"\x9f\x00garbage"))
        .expect_err("refused");
    let RxError::Malformed(why) = &e else {
        panic!("not a malformed refusal: {e:?}");
    };
    assert!(!e.is_transient());
    assert_eq!(why.kind(), "cbor", "{why}");
    let st = net.agent(2).status();
    assert_eq!(st.malformed, 1);
    assert_eq!(
        st.malformed_by_reason.into_iter().collect::<Vec<_>>(),
        vec![("cbor", 1)]
    );
}

#[test]
fn status_reports_along_a_path() {
    let mut net = Net::memory(&[1, 2, 3], cfg);
    chain(&mut net);
    net.register(3, "ipn:3.1");
    let mut r = req("ipn:1.1", "ipn:3.1", b"report me");
    r.report_flags = ReportFlags {
        reception: true,
        forwarding: true,
        delivery: true,
        deletion: true,
    };
    let id = net.agent(1).send(T0, r).expect("send");
    net.run_until(T0 + 200, 10);
    assert_eq!(net.payloads_at(3).len(), 1);
    let mut seen = Vec::new();
    while let Some(n) = net.agent(1).poll_admin() {
        let AdminRecord::StatusReport(sr) = n.record else {
            panic!("unexpected record");
        };
        assert_eq!(
            (sr.source.clone(), sr.timestamp),
            (id.source.clone(), id.timestamp)
        );
        let what = if sr.received.asserted {
            "received"
        } else if sr.forwarded.asserted {
            "forwarded"
        } else if sr.delivered.asserted {
            "delivered"
        } else {
            "deleted"
        };
        seen.push((n.from.to_string(), what));
    }
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("ipn:1.0".to_string(), "forwarded"),
            ("ipn:2.0".to_string(), "forwarded"),
            ("ipn:2.0".to_string(), "received"),
            ("ipn:3.0".to_string(), "delivered"),
            ("ipn:3.0".to_string(), "received"),
        ]
    );
    // Reports about reports are never generated; everything drained.
    for n in [1, 2, 3] {
        assert_eq!(net.agent(n).status().stored_bundles, 0, "node {n}");
    }
}

#[test]
fn status_reports_can_be_switched_off() {
    let mut net = Net::memory(&[1, 2], |n| AgentConfig {
        status_reports: false,
        ..AgentConfig::new(n)
    });
    net.connect(1, 2);
    net.register(2, "ipn:2.1");
    let mut r = req("ipn:1.1", "ipn:2.1", b"quiet");
    r.report_flags.delivery = true;
    net.agent(1).send(T0, r).expect("send");
    net.run_until(T0 + 100, 10);
    assert_eq!(net.payloads_at(2).len(), 1);
    assert!(net.agent(1).poll_admin().is_none());
    assert_eq!(net.agent(2).status().reports_sent, 0);
}

#[test]
fn cla_failure_reforwards_immediately() {
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    net.register(2, "ipn:2.1");
    net.fail_next.insert((1, 2), 2);
    net.agent(1)
        .send(T0, req("ipn:1.1", "ipn:2.1", b"retry"))
        .expect("send");
    net.step(); // first attempt fails, harness stops polling node 1 for this round
    assert_eq!(net.agent(1).status().cla_failures, 1);
    assert_eq!(net.agent(1).status().stored_bundles, 1);
    net.now += 1;
    net.step(); // second failure
    net.now += 1;
    net.step(); // succeeds
    assert_eq!(net.payloads_at(2), vec![b"retry".to_vec()]);
    assert_eq!(net.agent(1).status().cla_failures, 2);
    assert_eq!(net.agent(1).status().forwarded, 1);
}

#[test]
fn link_down_requeues_and_in_flight_waits_for_the_cla() {
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    for i in 0..3u8 {
        net.agent(1)
            .send(T0, req("ipn:1.1", "ipn:2.1", &[i]))
            .expect("send");
    }
    let f = net.agent(1).poll_transmit(T0).expect("one in flight");
    net.agent(1).link_down(T0, 2);
    assert!(net.agent(1).poll_transmit(T0).is_none());
    let s = net.agent(1).status();
    assert_eq!((s.in_flight, s.unrouted), (1, 2));
    net.agent(1)
        .cla_result(T0, f.key, bp::ClaOutcome::Failed)
        .expect("result");
    assert_eq!(net.agent(1).status().unrouted, 3);
    net.agent(1).link_up(T0, 2, 1000);
    let mut n = 0;
    while let Some(f) = net.agent(1).poll_transmit(T0) {
        net.agent(1)
            .cla_result(T0, f.key, bp::ClaOutcome::Sent)
            .expect("ok");
        n += 1;
    }
    assert_eq!(n, 3);
}

#[test]
fn priority_classes_then_fifo() {
    let mut net = Net::memory(&[1, 2], cfg);
    for (p, tag) in [
        (0u8, b'a'),
        (1, b'b'),
        (2, b'c'),
        (0, b'd'),
        (2, b'e'),
        (1, b'f'),
    ] {
        let mut r = req("ipn:1.1", "ipn:2.1", &[tag]);
        r.priority = p;
        net.agent(1).send(T0, r).expect("send");
    }
    net.connect(1, 2);
    let mut order = Vec::new();
    while let Some(f) = net.agent(1).poll_transmit(T0) {
        let b = Bundle::decode(f.bundle).expect("decode");
        order.push(b.payload()[0]);
        net.agent(1)
            .cla_result(T0, f.key, bp::ClaOutcome::Sent)
            .expect("ok");
    }
    assert_eq!(order, b"cebfad".to_vec());
}

#[test]
fn forwarded_bundle_carries_previous_node_and_age() {
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    let b = BundleBuilder::new(eid("ipn:5.1"), eid("ipn:2.1"))
        .hop_limit(5)
        .lifetime_ms(60_000)
        .payload(&b"aged"[..])
        .build()
        .expect("build"); // creation time 0: carries a bundle age block
                          // Node 1 relays it to 2 (arrived from 5).
    let r = net
        .agent(1)
        .accept_from_cla(T0, Some(5), Bytes::from(b.encode()));
    assert!(matches!(r, Ok(Accepted::Stored { .. })));
    let f = net.agent(1).poll_transmit(T0 + 250).expect("forward");
    let out = Bundle::decode(f.bundle).expect("decode");
    assert_eq!(out.previous_node(), Some(eid("ipn:1.0")));
    assert_eq!(out.bundle_age_ms(), Some(250));
    assert_eq!(out.hop_count().map(|h| h.count), Some(1));
}

/// A bundle this node created is stored with itself as previous node, so its first hop changes
/// nothing and the stored bytes leave as they are (the same buffer, no re-encode); a relayed
/// bundle still gets this node as its previous node.
#[test]
fn own_bundles_are_forwarded_as_stored_and_relayed_ones_are_updated() {
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    net.agent(1)
        .send(T0, req("ipn:1.1", "ipn:2.1", b"own"))
        .expect("send");
    // Offered twice (the first attempt fails): both times the very buffer the store holds.
    let first = net.agent(1).poll_transmit(T0 + 10).expect("forward");
    net.agent(1)
        .cla_result(T0 + 10, first.key, ClaOutcome::Failed)
        .expect("failed");
    let again = net.agent(1).poll_transmit(T0 + 20).expect("forward again");
    assert_eq!(again.key, first.key);
    assert_eq!(
        again.bundle.as_ptr(),
        first.bundle.as_ptr(),
        "forwarded from the stored bytes, without a copy"
    );
    let out = Bundle::decode(again.bundle).expect("decode");
    assert_eq!(out.previous_node(), Some(eid("ipn:1.0")));
    assert_eq!(out.payload().as_ref(), b"own");
    net.agent(1)
        .cla_result(T0 + 20, again.key, ClaOutcome::Sent)
        .expect("sent");

    let relayed = BundleBuilder::new(eid("ipn:5.1"), eid("ipn:2.1"))
        .creation(CreationTimestamp::new(T0, 0))
        .payload(&b"relayed"[..])
        .build()
        .expect("build");
    let mut with_prev = relayed.clone();
    with_prev.set_previous_node(&eid("ipn:5.0"));
    let r = net
        .agent(1)
        .accept_from_cla(T0, Some(5), Bytes::from(with_prev.encode()));
    assert!(matches!(r, Ok(Accepted::Stored { .. })));
    let f = net.agent(1).poll_transmit(T0 + 30).expect("forward");
    let out = Bundle::decode(f.bundle).expect("decode");
    assert_eq!(out.previous_node(), Some(eid("ipn:1.0")));
    assert_eq!(out.payload().as_ref(), b"relayed");
}

#[test]
fn store_full_refuses_then_recovers() {
    // Node 2 relays with room for about three 1 kB bundles; its link to 3 is down at first.
    let mut net = Net::memory(&[1, 2, 3], |n| AgentConfig {
        store_quota_bytes: if n == 2 { 3_500 } else { 1 << 20 },
        ..AgentConfig::new(n)
    });
    chain(&mut net);
    net.disconnect(2, 3);
    net.register(3, "ipn:3.1");
    for i in 0..8u8 {
        net.agent(1)
            .send(T0, req("ipn:1.1", "ipn:3.1", &[i; 1000]))
            .expect("send");
    }
    net.run_until(T0 + 100, 10);
    let s2 = net.agent(2).status();
    assert_eq!(s2.stored_bundles, 3);
    assert!(s2.stored_bytes <= s2.quota_bytes);
    assert!(s2.refused_store_full >= 1);
    assert!(!net.refusals.is_empty());
    assert!(
        net.refusals[0].2.contains("store full"),
        "{}",
        net.refusals[0].2
    );
    assert_eq!(net.agent(1).status().stored_bundles, 5);
    // Sending at a full node is refused with a clear error and stores nothing.
    let e = net
        .agent(2)
        .send(T0 + 100, req("ipn:2.1", "ipn:3.1", &[9; 1000]))
        .expect_err("full");
    assert!(matches!(e, SendError::StoreFull { needed, free } if needed > free));
    assert_eq!(net.agent(2).status().stored_bundles, 3);
    // The link comes up: node 2 drains, accepts the rest, everything arrives once.
    net.connect(2, 3);
    net.run_until(T0 + 1000, 10);
    let mut got = net.payloads_at(3);
    got.sort();
    assert_eq!(got, (0..8u8).map(|i| vec![i; 1000]).collect::<Vec<_>>());
    for n in [1, 2, 3] {
        assert_eq!(net.agent(n).status().stored_bundles, 0, "node {n}");
    }
}

#[test]
fn echo_service_answers() {
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    net.register(1, "ipn:1.1");
    net.agent(1)
        .send(T0, req("ipn:1.1", "ipn:2.7", b"ping"))
        .expect("send");
    net.run_until(T0 + 100, 10);
    assert_eq!(net.payloads_at(1), vec![b"ping".to_vec()]);
    assert_eq!(net.got[0].delivery.source, eid("ipn:2.7"));
    assert_eq!(net.agent(2).status().echoed, 1);
    assert_eq!(net.agent(2).status().stored_bundles, 0);
}

#[test]
fn an_echo_request_from_an_echo_endpoint_is_not_answered() {
    // One bundle from node 1's echo endpoint to node 2's: before, node 2 answered it, node 1's
    // echo service answered the answer, and the two exchanged echoes until the lifetimes ended.
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    net.agent(1)
        .send(T0, req("ipn:1.7", "ipn:2.7", b"forged"))
        .expect("send");
    net.run_until(T0 + 1_000, 10);
    let (s1, s2) = (net.agent(1).status(), net.agent(2).status());
    assert_eq!((s2.echoed, s2.echo_replies_ignored), (0, 1));
    assert_eq!((s1.echoed, s1.received), (0, 0));
    assert_eq!((s1.stored_bundles, s2.stored_bundles), (0, 0));
}

#[test]
fn dtn_scheme_delivery_and_static_route() {
    let mut net = Net::memory(&[1, 2], |n| AgentConfig {
        dtn_node_name: Some(format!("node{n}")),
        ..AgentConfig::new(n)
    });
    net.connect(1, 2);
    net.agent(1).add_dtn_route("node2", 2);
    net.register(2, "dtn://node2/inbox");
    net.agent(1)
        .send(T0, req("dtn://node1/out", "dtn://node2/inbox", b"named"))
        .expect("send");
    net.run_until(T0 + 100, 10);
    assert_eq!(net.payloads_at(2), vec![b"named".to_vec()]);
    let e = net
        .agent(1)
        .send(T0, req("dtn://other/out", "dtn://node2/inbox", b"x"))
        .expect_err("foreign source");
    assert!(matches!(e, SendError::BadSource(_)));
}

#[test]
fn fragments_are_reassembled_before_delivery_even_across_restart() {
    let whole = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:2.1"))
        .creation(CreationTimestamp::new(T0, 9))
        .payload(Bytes::from(
            (0..3000u32).map(|i| i as u8).collect::<Vec<u8>>(),
        ))
        .build()
        .expect("build");
    let frags = bpv7::fragment(&whole, 1200).expect("fragment");
    assert!(frags.len() >= 3);
    let mut a = bp::Agent::open(AgentConfig::new(2), MemoryStore::new(), T0).expect("open");
    let wire: Vec<Bytes> = frags.iter().map(|f| Bytes::from(f.encode())).collect();
    // Deliver the last fragment first, then crash and restart before the others arrive.
    assert!(matches!(
        a.accept_from_cla(T0, Some(1), wire[wire.len() - 1].clone()),
        Ok(Accepted::Stored { .. })
    ));
    let store = a.into_store();
    let mut a = bp::Agent::open(AgentConfig::new(2), store, T0 + 1).expect("reopen");
    a.register(eid("ipn:2.1")).expect("register");
    for w in &wire[..wire.len() - 1] {
        assert!(a.poll_delivery().is_none());
        a.accept_from_cla(T0 + 2, Some(1), w.clone()).expect("ok");
    }
    let d = a.poll_delivery().expect("reassembled");
    assert_eq!(d.payload, whole.payload());
    assert_eq!(d.id, whole.id());
    assert!(a.poll_delivery().is_none());
    a.delivered(T0 + 3, d.key).expect("ack");
    let store = a.close().expect("close");
    assert_eq!(store.bundle_count(), 0);
}

#[test]
fn bundle_event_log_csv() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut net = Net::memory(&[1, 2], cfg);
    let logs: Vec<Shared> = vec![Shared::default(), Shared::default()];
    for (i, n) in [1u64, 2].iter().enumerate() {
        let sink = bp::CsvBundleLog::new(logs[i].clone());
        net.agent(*n).set_event_sink(Some(Box::new(sink)));
    }
    net.connect(1, 2);
    net.register(2, "ipn:2.1");
    net.agent(1)
        .send(T0, req("ipn:1.1", "ipn:2.1", b"logged"))
        .expect("send");
    net.run_until(T0 + 20, 10);
    let text = |s: &Shared| String::from_utf8(s.0.lock().expect("lock").clone()).expect("utf8");
    let l1 = text(&logs[0]);
    let l2 = text(&logs[1]);
    let lines1: Vec<&str> = l1.lines().collect();
    assert_eq!(lines1[0], bp::agent::CSV_HEADER);
    assert!(
        lines1[1].starts_with(&format!("{T0},created,ipn:1.1,{T0},0,,,")),
        "{}",
        lines1[1]
    );
    assert!(lines1[1].ends_with(",ipn:2.1,,1,"), "{}", lines1[1]);
    assert!(lines1[2].starts_with(&format!("{T0},forwarded,ipn:1.1,")));
    assert!(lines1[2].ends_with(",ipn:2.1,2,1,"), "{}", lines1[2]);
    let kinds2: Vec<&str> = l2
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(kinds2, vec!["received", "delivered"]);
    for l in l1.lines().chain(l2.lines()) {
        // The last column (reason) is empty for these events.
        assert_eq!(l.split(',').count(), 12, "{l}");
    }
}

#[test]
fn a_batch_from_the_cla_is_one_commit() {
    let mut a = bp::Agent::open(AgentConfig::new(2), MemoryStore::new(), T0).expect("open");
    let wires: Vec<Bytes> = (0..16u64)
        .map(|i| {
            let b = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:3.1"))
                .creation(CreationTimestamp::new(T0, i))
                .payload(vec![i as u8; 100])
                .build()
                .expect("build");
            Bytes::from(b.encode())
        })
        .collect();
    let before = a.store().commits();
    let rs = a.accept_from_cla_batch(T0, Some(1), &wires);
    assert!(rs.iter().all(|r| matches!(r, Ok(Accepted::Stored { .. }))));
    assert_eq!(a.store().commits(), before + 1);
    assert_eq!(a.store().bundle_count(), 16);
}

#[test]
fn a_failed_commit_is_a_transient_refusal_and_stores_nothing() {
    let mut store = MemoryStore::new();
    store.fail_next_commits(1);
    let mut a = bp::Agent::open(AgentConfig::new(2), store, T0).expect("open");
    let b = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:3.1"))
        .creation(CreationTimestamp::new(T0, 0))
        .payload(&b"retry me"[..])
        .build()
        .expect("build");
    let wire = Bytes::from(b.encode());
    let e = a
        .accept_from_cla(T0, Some(1), wire.clone())
        .expect_err("commit failed");
    assert!(e.is_transient());
    assert_eq!(a.status().stored_bundles, 0);
    assert_eq!(a.store().bundle_count(), 0);
    // The store is degraded until its recovery attempt (docs/store.md): a retry before it is
    // refused as unavailable, one after it is stored.
    let early = a
        .accept_from_cla(T0 + 1, Some(1), wire.clone())
        .expect_err("degraded");
    assert!(early.is_transient());
    let retry_at = a.poll_timeout().expect("recovery timer");
    a.handle_timeout(retry_at).expect("recovered");
    // The previous hop retries: not a duplicate, stored this time.
    let r = a.accept_from_cla(retry_at, Some(1), wire).expect("stored");
    assert!(matches!(r, Accepted::Stored { .. }));
    let e = {
        let mut s = MemoryStore::new();
        s.fail_next_commits(1);
        let mut a = bp::Agent::open(AgentConfig::new(1), s, T0).expect("open");
        let e = a
            .send(T0, req("ipn:1.1", "ipn:2.1", b"x"))
            .expect_err("commit failed");
        assert_eq!(a.status().stored_bundles, 0);
        e
    };
    assert!(matches!(e, SendError::Store(_)));
}

#[test]
fn agent_on_a_persistent_store_can_move_to_its_own_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<bp::Agent<bp::RedbStore>>();
    assert_send::<bp::Agent<MemoryStore>>();
}

#[test]
fn loopback_send_and_local_echo() {
    let mut net = Net::memory(&[1], cfg);
    net.register(1, "ipn:1.1");
    net.register(1, "ipn:1.2");
    net.agent(1)
        .send(T0, req("ipn:1.1", "ipn:1.2", b"to myself"))
        .expect("send");
    net.agent(1)
        .send(T0, req("ipn:1.1", "ipn:1.7", b"echo myself"))
        .expect("send");
    net.step();
    let mut got: Vec<(String, Vec<u8>)> = net
        .got
        .iter()
        .map(|g| (g.delivery.endpoint.to_string(), g.delivery.payload.to_vec()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("ipn:1.1".to_string(), b"echo myself".to_vec()),
            ("ipn:1.2".to_string(), b"to myself".to_vec()),
        ]
    );
}

#[test]
fn fragmented_echo_request_is_answered_after_reassembly() {
    let mut net = Net::memory(&[1, 2], cfg);
    net.connect(1, 2);
    net.register(1, "ipn:1.1");
    let payload: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
    let whole = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:2.7"))
        .creation(CreationTimestamp::new(T0, 77))
        .payload(payload.clone())
        .build()
        .expect("build");
    for f in bpv7::fragment(&whole, 1000).expect("fragment") {
        let r = net
            .agent(2)
            .accept_from_cla(T0, Some(1), Bytes::from(f.encode()));
        assert!(matches!(r, Ok(Accepted::Stored { .. })), "{r:?}");
    }
    net.run_until(T0 + 50, 10);
    assert_eq!(net.payloads_at(1), vec![payload]);
    assert_eq!(net.agent(2).status().stored_bundles, 0);
}

#[test]
fn plan_driven_links_and_rerouting_onto_the_next_contact() {
    let plan = ContactPlan::from_ion_str(
        "a contact +0 +10 1 2 125000\n\
         a contact +20 +30 1 2 125000\n\
         a range +0 +30 1 2 1\n",
        "test.rc",
        T0,
    )
    .expect("plan");
    let mut a = bp::Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    a.set_contact_plan(Some(plan), true);
    assert_eq!(a.poll_timeout(), Some(T0));
    a.handle_timeout(T0).expect("timeout");
    assert_eq!(a.links().collect::<Vec<_>>(), vec![(2, 1_000_000)]);
    a.send(T0, req("ipn:1.1", "ipn:2.1", b"across two contacts"))
        .expect("send");
    let f = a.poll_transmit(T0).expect("first contact");
    a.cla_result(T0 + 5, f.key, bp::ClaOutcome::Failed)
        .expect("failed");
    // The contact ends before it is retried: the bundle waits for the next contact with 2.
    assert_eq!(a.poll_timeout(), Some(T0 + 10_000));
    a.handle_timeout(T0 + 10_000).expect("timeout");
    assert!(a.links().next().is_none());
    assert!(a.poll_transmit(T0 + 10_000).is_none());
    assert_eq!(a.status().queued_per_neighbour, vec![(2, 1)]);
    assert_eq!(a.poll_timeout(), Some(T0 + 20_000));
    a.handle_timeout(T0 + 20_000).expect("timeout");
    let f = a.poll_transmit(T0 + 20_000).expect("second contact");
    a.cla_result(T0 + 20_001, f.key, bp::ClaOutcome::Sent)
        .expect("sent");
    let s = a.status();
    assert_eq!((s.forwarded, s.cla_failures, s.stored_bundles), (1, 1, 0));
}

/// A plan shared by several agents stays one allocation; editing it through one agent copies it
/// for that agent only, and the edit reaches that agent's routing and no other agent.
#[test]
fn shared_plan_is_one_copy_and_edits_stay_local() {
    let plan = std::sync::Arc::new(
        ContactPlan::from_ion_str(
            "a contact +0 +10 1 2 125000\n\
             a range +0 +30 1 2 1\n",
            "test.rc",
            T0,
        )
        .expect("plan"),
    );
    let open = || bp::Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    let (mut a, mut b) = (open(), open());
    a.set_shared_contact_plan(Some(plan.clone()), true);
    b.set_shared_contact_plan(Some(plan.clone()), true);
    assert!(std::sync::Arc::ptr_eq(
        a.shared_contact_plan().unwrap(),
        &plan
    ));
    assert!(std::sync::Arc::ptr_eq(
        b.shared_contact_plan().unwrap(),
        &plan
    ));
    assert_eq!(std::sync::Arc::strong_count(&plan), 3);

    a.contact_plan_mut()
        .unwrap()
        .insert_contact(bp::Contact::new(20_000, 30_000, 1, 2, 125_000))
        .expect("insert");
    assert!(!std::sync::Arc::ptr_eq(
        a.shared_contact_plan().unwrap(),
        &plan
    ));
    assert!(std::sync::Arc::ptr_eq(
        b.shared_contact_plan().unwrap(),
        &plan
    ));
    assert_eq!(a.contact_plan().unwrap().contact_count(), 2);
    assert_eq!(b.contact_plan().unwrap().contact_count(), 1);
    assert_eq!(plan.contact_count(), 1);

    // The edited agent drives its link from its own copy: up again at +20 s; the other is not.
    for x in [&mut a, &mut b] {
        x.handle_timeout(T0 + 20_000).expect("timeout");
    }
    assert_eq!(a.links().collect::<Vec<_>>(), vec![(2, 1_000_000)]);
    assert!(b.links().next().is_none());
}
