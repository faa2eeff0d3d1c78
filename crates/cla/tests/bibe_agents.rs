//! BIBE between two real BP agents in virtual time, through the adapter both drivers use:
//! node 1 tunnels bundles for node 3 to node 2 (tunnel = virtual neighbour 102, endpoint
//! ipn:2.0); encapsulating bundles travel over a plain in-memory link 1 → 2 that can drop
//! them; custody signals travel back over 2 → 1.

use bibe::TunnelConfig;
use bp::{Agent, AgentConfig, ClaOutcome, MemoryStore, NodeRange, SendRequest};
use bpv7::Eid;
use cla::{engine_config, BibeCla, BibeSend};

const T0: u64 = 800_000_000_000;
const TUNNEL: u64 = 102;
const TIMER: u64 = 2_000;

struct Node {
    agent: Agent<MemoryStore>,
    bibe: BibeCla,
}

fn node(n: u64, quota: u64) -> Node {
    let mut cfg = AgentConfig::new(n);
    cfg.store_quota_bytes = quota;
    let agent = Agent::open(cfg, MemoryStore::new(), T0).unwrap();
    Node {
        agent,
        bibe: BibeCla::new(engine_config(n), T0),
    }
}

/// 1 tunnels node 3's traffic to 2; 1 and 2 are neighbours both ways; 2 reaches 3.
fn topology(quota2: u64) -> (Node, Node) {
    let mut a = node(1, 1 << 30);
    let mut b = node(2, quota2);
    let mut t = TunnelConfig::new(Eid::ipn(2, 0));
    t.custody_timer_ms = TIMER;
    a.bibe.add_tunnel(T0, &mut a.agent, TUNNEL, t);
    a.agent
        .static_routes_mut()
        .add(NodeRange::single(3).unwrap(), TUNNEL)
        .unwrap();
    a.agent.link_up(T0, 2, 0);
    b.agent.link_up(T0, 1, 0);
    b.agent.link_up(T0, 3, 0);
    (a, b)
}

/// Outcome of one step of node `n`: bundles sent over real links (`to`, bytes).
fn step(now: u64, n: &mut Node) -> Vec<(u64, bpv7::bytes::Bytes)> {
    let mut wire = Vec::new();
    n.bibe.handle_timeout(now, &mut n.agent);
    while let Some(a) = n.agent.poll_admin() {
        n.bibe.handle_admin(now, &mut n.agent, &a);
    }
    while let Some(f) = n.agent.poll_transmit(now) {
        if n.bibe.is_tunnel(f.neighbour) {
            match n.bibe.send(now, &mut n.agent, &f) {
                BibeSend::Taken => {}
                BibeSend::Full => panic!("custody table full"),
                BibeSend::Rejected(o) => n.agent.cla_result(now, f.key, o).unwrap(),
            }
        } else {
            // A perfect link layer: the bytes leave now; node 3 is a sink.
            n.agent.cla_result(now, f.key, ClaOutcome::Sent).unwrap();
            wire.push((f.neighbour, f.bundle));
        }
    }
    while let Some((token, o)) = n.bibe.poll_outcome() {
        n.agent
            .cla_result(now, bp::BundleKey::from_token(token), o)
            .unwrap();
    }
    wire
}

fn deliver(now: u64, to: &mut Node, from: u64, bundle: bpv7::bytes::Bytes) {
    to.agent.accept_from_cla(now, Some(from), bundle).unwrap();
    step(now, to);
}

fn send(a: &mut Node, now: u64, seq: u8) {
    a.agent
        .send(
            now,
            SendRequest::new(Eid::ipn(1, 1), Eid::ipn(3, 1), vec![seq; 200].into()),
        )
        .unwrap();
}

#[test]
fn a_dropped_bpdu_is_retransmitted_and_custody_released_only_on_the_signal() {
    let (mut a, mut b) = topology(1 << 30);
    send(&mut a, T0, 1);
    let out = step(T0, &mut a);
    assert_eq!(out.len(), 1, "the encapsulating bundle leaves for node 2");
    assert_eq!(out[0].0, 2);
    // Dropped in the network. Node 1 still holds the bundle in custody (and in its store).
    assert_eq!(a.bibe.engine().pending_custody().0, 1);
    assert_eq!(a.agent.status().stored_bundles, 1);
    assert_eq!(a.bibe.poll_timeout(), Some(T0 + TIMER));
    assert!(step(T0 + TIMER - 1, &mut a).is_empty());
    // Custody timer: a new encapsulating bundle leaves.
    let out = step(T0 + TIMER, &mut a);
    assert_eq!(out.len(), 1);
    assert_eq!(a.bibe.engine().counters().timer_expirations, 1);
    assert_eq!(a.agent.status().stored_bundles, 1, "not released yet");
    // It arrives; node 2 stores the inner bundle (queued for node 3) and accepts custody.
    deliver(T0 + TIMER + 5, &mut b, 1, out[0].1.clone());
    assert_eq!(b.bibe.engine().counters().custody_accepted, 1);
    assert_eq!(
        b.agent.status().stored_bundles,
        0,
        "forwarded to node 3 at once"
    );
    // The signal leaves 100 ms after the decision.
    let back = step(T0 + TIMER + 104, &mut b);
    assert!(back.is_empty());
    let back = step(T0 + TIMER + 105, &mut b);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].0, 1);
    assert_eq!(a.agent.status().stored_bundles, 1);
    deliver(T0 + TIMER + 110, &mut a, 2, back[0].1.clone());
    assert_eq!(a.bibe.engine().counters().custody_released, 1);
    assert_eq!(a.agent.status().stored_bundles, 0, "released on the signal");
    assert_eq!(a.bibe.poll_timeout(), None);
}

#[test]
fn a_full_receiver_refuses_custody_and_the_sender_keeps_the_bundle() {
    // Node 2's store cannot take the inner bundle: custody refused, depleted storage.
    let (mut a, mut b) = topology(100);
    send(&mut a, T0, 1);
    let out = step(T0, &mut a);
    // The encapsulating bundle is an administrative record for node 2: consumed on arrival,
    // not stored, so even a tiny store takes it; the inner bundle does not fit.
    deliver(T0 + 1, &mut b, 1, out[0].1.clone());
    assert_eq!(
        b.bibe
            .engine()
            .counters()
            .custody_refused
            .get("depleted_storage"),
        Some(&1)
    );
    let back = step(T0 + 101, &mut b);
    assert_eq!(back.len(), 1);
    deliver(T0 + 102, &mut a, 2, back[0].1.clone());
    assert_eq!(
        a.bibe
            .engine()
            .counters()
            .custody_refused_by_peer
            .get("depleted_storage"),
        Some(&1)
    );
    // Refused for lack of resources: kept, the tunnel backed off.
    assert_eq!(a.agent.status().stored_bundles, 1);
    assert_eq!(a.agent.status().cla_refusals, 1);
    assert_eq!(a.bibe.engine().pending_custody().0, 0);
}

#[test]
fn a_duplicate_is_refused_as_redundant_and_that_releases_the_sender() {
    let (mut a, mut b) = topology(1 << 30);
    send(&mut a, T0, 1);
    let first = step(T0, &mut a);
    deliver(T0 + 1, &mut b, 1, first[0].1.clone());
    // Node 2's signal is lost; node 1 retransmits; node 2 already had the bundle.
    let lost = step(T0 + 101, &mut b);
    assert_eq!(lost.len(), 1);
    let again = step(T0 + TIMER, &mut a);
    deliver(T0 + TIMER + 1, &mut b, 1, again[0].1.clone());
    assert_eq!(
        b.bibe.engine().counters().custody_refused.get("redundant"),
        Some(&1)
    );
    let back = step(T0 + TIMER + 101, &mut b);
    deliver(T0 + TIMER + 102, &mut a, 2, back[0].1.clone());
    assert_eq!(a.agent.status().stored_bundles, 0);
    assert_eq!(a.bibe.engine().counters().custody_released, 1);
}

#[test]
fn many_bundles_one_aggregated_signal() {
    let (mut a, mut b) = topology(1 << 30);
    for i in 0..20 {
        send(&mut a, T0, i);
    }
    let out = step(T0, &mut a);
    assert_eq!(out.len(), 20);
    for (_, o) in out {
        deliver(T0 + 1, &mut b, 1, o);
    }
    let back = step(T0 + 101, &mut b);
    assert_eq!(back.len(), 1, "one signal for twenty custody acceptances");
    deliver(T0 + 102, &mut a, 2, back[0].1.clone());
    assert_eq!(a.bibe.engine().counters().custody_released, 20);
    assert_eq!(a.agent.status().stored_bundles, 0);
    assert_eq!(b.bibe.engine().counters().signals_sent, 1);
}

/// The transmission ID of the BPDU in an encapsulating bundle.
fn transmission_id(outer: &bpv7::bytes::Bytes) -> u64 {
    let b = bpv7::Bundle::decode(outer.clone()).unwrap();
    let rec = bpv7::AdminRecord::decode(&b.payload()).unwrap();
    match bibe::BibeRecord::from_admin(&rec).unwrap().unwrap() {
        bibe::BibeRecord::Bpdu(p) => p.transmission_id,
        other => panic!("not a BPDU: {other:?}"),
    }
}

/// Node 1 after a crash (kill -9): its agent reopened on the store the crash left
/// (`into_store`: nothing uncommitted survives) and a new adapter, started `at`.
fn restart_sender(a: Node, at: u64) -> Node {
    let store = a.agent.into_store();
    let mut agent = Agent::open(AgentConfig::new(1), store, at).unwrap();
    let mut bibe = BibeCla::new(engine_config(1), at);
    let mut t = TunnelConfig::new(Eid::ipn(2, 0));
    t.custody_timer_ms = TIMER;
    bibe.add_tunnel(at, &mut agent, TUNNEL, t);
    agent
        .static_routes_mut()
        .add(NodeRange::single(3).unwrap(), TUNNEL)
        .unwrap();
    agent.link_up(at, 2, 0);
    assert_eq!(bibe.restore(&agent), 1, "one custody record on disk");
    Node { agent, bibe }
}

#[test]
fn a_custodian_killed_after_the_far_end_accepted_is_released_by_the_old_signal() {
    let (mut a, mut b) = topology(1 << 30);
    send(&mut a, T0, 1);
    let out = step(T0, &mut a);
    let id = transmission_id(&out[0].1);
    deliver(T0 + 5, &mut b, 1, out[0].1.clone());
    assert_eq!(b.bibe.engine().counters().custody_accepted, 1);
    // Node 1 dies before the signal arrives, and comes back 1 s later.
    let mut a = restart_sender(a, T0 + 1_000);
    let signal = step(T0 + 105, &mut b);
    assert_eq!(signal.len(), 1);
    // The restarted node forwards its stored bundle again: same transmission ID.
    let again = step(T0 + 1_000, &mut a);
    assert_eq!(again.len(), 1);
    assert_eq!(
        transmission_id(&again[0].1),
        id,
        "retransmitted under its old ID"
    );
    assert_eq!(a.bibe.engine().counters().retransmissions, 1);
    assert_eq!(a.bibe.engine().counters().encapsulated, 0);
    // The signal sent for the transmission before the crash releases it.
    deliver(T0 + 1_010, &mut a, 2, signal[0].1.clone());
    let c = a.bibe.engine().counters();
    assert_eq!(c.custody_released, 1);
    assert_eq!(c.signal_ids_unknown, 0);
    assert_eq!(
        a.agent.status().stored_bundles,
        0,
        "released after the restart"
    );
    // The far end finds the retransmission redundant (it signals that; nothing pends then).
    deliver(T0 + 1_020, &mut b, 1, again[0].1.clone());
    assert_eq!(
        b.bibe.engine().counters().custody_refused.get("redundant"),
        Some(&1)
    );
    // The record is gone from disk too.
    let store = a.agent.close().unwrap();
    let agent = Agent::open(AgentConfig::new(1), store, T0 + 2_000).unwrap();
    assert!(agent.notes(b"bibe/").is_empty());
    assert_eq!(agent.status().stored_bundles, 0);
}

#[test]
fn a_custodian_killed_after_a_lost_bpdu_retransmits_under_the_same_id() {
    let (mut a, mut b) = topology(1 << 30);
    send(&mut a, T0, 1);
    let out = step(T0, &mut a);
    let id = transmission_id(&out[0].1);
    // The BPDU is lost in the network; node 1 dies and restarts.
    let mut a = restart_sender(a, T0 + 500);
    let again = step(T0 + 500, &mut a);
    assert_eq!(transmission_id(&again[0].1), id);
    // Its timer runs from the restart.
    assert_eq!(a.bibe.poll_timeout(), Some(T0 + 500 + TIMER));
    deliver(T0 + 505, &mut b, 1, again[0].1.clone());
    assert_eq!(b.bibe.engine().counters().custody_accepted, 1);
    let signal = step(T0 + 605, &mut b);
    deliver(T0 + 610, &mut a, 2, signal[0].1.clone());
    assert_eq!(a.bibe.engine().counters().custody_released, 1);
    assert_eq!(a.agent.status().stored_bundles, 0);
    // New bundles after the restart get new IDs, never the restored one.
    send(&mut a, T0 + 700, 2);
    let next = step(T0 + 700, &mut a);
    assert!(transmission_id(&next[0].1) > id);
}

/// A convergence layer on the way fragmented the encapsulating bundle: the far end's agent
/// stores the fragments, reassembles the BPDU (an administrative record for it), and the
/// adapter decapsulates it as if it had arrived whole — in any order of the fragments.
#[test]
fn a_fragmented_bpdu_is_reassembled_then_decapsulated() {
    let (mut a, mut b) = topology(1 << 30);
    a.agent
        .send(
            T0,
            SendRequest::new(Eid::ipn(1, 1), Eid::ipn(3, 1), vec![7u8; 5_000].into()),
        )
        .unwrap();
    let out = step(T0, &mut a);
    let id = transmission_id(&out[0].1);
    let outer = bpv7::Bundle::decode(out[0].1.clone()).unwrap();
    let mut pieces = bpv7::fragment(&outer, 1_200).unwrap();
    assert!(pieces.len() >= 4, "{} fragments", pieces.len());
    pieces.reverse();
    let last = pieces.pop().unwrap();
    for (k, p) in pieces.into_iter().enumerate() {
        deliver(T0 + 1 + k as u64, &mut b, 1, p.encode().into());
        assert_eq!(
            b.bibe.engine().counters().decapsulated,
            0,
            "not before the last fragment"
        );
    }
    deliver(T0 + 50, &mut b, 1, last.encode().into());
    let c = b.bibe.engine().counters();
    assert_eq!(c.decapsulated, 1);
    assert_eq!(c.custody_accepted, 1);
    // The fragments are gone from node 2's store (the inner bundle left for node 3).
    assert_eq!(b.agent.status().stored_bundles, 0);
    let signal = step(T0 + 150, &mut b);
    assert_eq!(signal.len(), 1);
    deliver(T0 + 160, &mut a, 2, signal[0].1.clone());
    assert_eq!(a.bibe.engine().counters().custody_released, 1);
    assert_eq!(a.bibe.engine().counters().signal_ids_unknown, 0);
    assert_eq!(a.agent.status().stored_bundles, 0);
    let _ = id;
}

/// The encapsulating bundle is sourced at the node's administrative endpoint, like the
/// bundles an application sends without a source of its own (`dtnkit send`): both kinds take
/// their creation timestamps from one sequence. They used to come from two (the agent's and the
/// BIBE engine's), so a bundle tunnelled in the millisecond it was sent got the same ID as its
/// encapsulating bundle; the agent took the latter for a duplicate and dropped it, and the
/// bundle waited for the custody timer (60 s in the node test that caught it) or, without
/// custody, was reported sent and lost.
#[test]
fn a_bundle_tunnelled_in_the_millisecond_it_was_sent_leaves_at_once() {
    for custody in [true, false] {
        let mut a = node(1, 1 << 30);
        let mut t = TunnelConfig::new(Eid::ipn(2, 0));
        t.custody = custody;
        t.custody_timer_ms = TIMER;
        a.bibe.add_tunnel(T0, &mut a.agent, TUNNEL, t);
        a.agent
            .static_routes_mut()
            .add(NodeRange::single(3).unwrap(), TUNNEL)
            .unwrap();
        a.agent.link_up(T0, 2, 0);
        let id = a
            .agent
            .send(
                T0,
                SendRequest::new(Eid::ipn(1, 0), Eid::ipn(3, 1), vec![7; 200].into()),
            )
            .unwrap();
        let out = step(T0, &mut a);
        assert_eq!(
            out.len(),
            1,
            "custody {custody}: the encapsulating bundle leaves"
        );
        let bpdu = bpv7::Bundle::decode(out[0].1.clone()).unwrap();
        assert_ne!(bpdu.id(), id, "custody {custody}: two bundles, two IDs");
        // A signal or a retransmission built later in the same millisecond does not reuse
        // the application's next ID either.
        let next = a
            .agent
            .send(
                T0,
                SendRequest::new(Eid::ipn(1, 0), Eid::ipn(4, 1), vec![8; 10].into()),
            )
            .unwrap();
        assert_ne!(next, bpdu.id(), "custody {custody}");
    }
}
