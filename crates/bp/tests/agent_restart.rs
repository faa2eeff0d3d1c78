//! Restart on a persistent store (redb in a temporary directory): the agent resumes forwarding,
//! re-offers unacknowledged deliveries (at-least-once), keeps its duplicate records and never
//! reuses a creation timestamp.

#[path = "agent_harness.rs"]
mod harness;

use std::collections::BTreeMap;

use bp::{Accepted, Agent, AgentConfig, MemoryStore, RedbStore, SendRequest, Store};
use bpv7::{BundleBuilder, CreationTimestamp, Eid};
use bytes::Bytes;
use harness::{Net, T0};

fn eid(s: &str) -> Eid {
    s.parse().expect("eid")
}

fn req(dst: &str, payload: &[u8]) -> SendRequest {
    SendRequest::new(eid("ipn:1.1"), eid(dst), Bytes::copy_from_slice(payload))
}

#[test]
fn resumes_forwarding_after_restart_including_in_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("node1.redb");
    {
        let store = RedbStore::open(&path).expect("open store");
        let mut a = Agent::open(AgentConfig::new(1), store, T0).expect("agent");
        for i in 0..3u8 {
            a.send(T0, req("ipn:2.1", &[i; 100])).expect("send");
        }
        a.link_up(T0, 2, 1000);
        let f = a.poll_transmit(T0).expect("in flight");
        assert_eq!(a.status().in_flight, 1);
        let _ = f; // the process dies before the CLA reports
        drop(a.into_store());
    }
    let store = RedbStore::open(&path).expect("reopen store");
    assert_eq!(store.bundle_count(), 3);
    let a = Agent::open(AgentConfig::new(1), store, T0 + 10).expect("agent");
    let s = a.status();
    assert_eq!((s.stored_bundles, s.unrouted, s.in_flight), (3, 3, 0));
    let b = Agent::open(AgentConfig::new(2), MemoryStore::new(), T0)
        .map(|b| b.into_store())
        .expect("b");
    // Put both into one net: node 1 on redb, node 2 on memory, through boxed stores.
    let mut agents: BTreeMap<u64, Agent<Box<dyn Store>>> = BTreeMap::new();
    let a_store: Box<dyn Store> = Box::new(a.close().expect("close"));
    agents.insert(
        1,
        Agent::open(AgentConfig::new(1), a_store, T0 + 10).expect("a"),
    );
    let b_store: Box<dyn Store> = Box::new(b);
    agents.insert(
        2,
        Agent::open(AgentConfig::new(2), b_store, T0 + 10).expect("b"),
    );
    let mut net = Net::from_agents(agents);
    net.now = T0 + 10;
    net.connect(1, 2);
    net.agent(2).register(eid("ipn:2.1")).expect("register");
    net.run_until(T0 + 100, 10);
    let mut got = net.payloads_at(2);
    got.sort();
    assert_eq!(got, (0..3u8).map(|i| vec![i; 100]).collect::<Vec<_>>());
    net.agent(1).flush().expect("flush");
    assert_eq!(net.agent(1).store().bundle_count(), 0);
}

#[test]
fn unacknowledged_delivery_is_offered_again_and_dedup_survives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("node2.redb");
    let b = BundleBuilder::new(eid("ipn:1.1"), eid("ipn:2.1"))
        .creation(CreationTimestamp::new(T0, 1))
        .lifetime_ms(3_600_000)
        .payload(&b"exactly once to the app"[..])
        .build()
        .expect("build");
    let wire = Bytes::from(b.encode());
    let first_id;
    {
        let mut a = Agent::open(AgentConfig::new(2), RedbStore::open(&path).expect("s"), T0)
            .expect("agent");
        let r = a
            .accept_from_cla(T0, Some(1), wire.clone())
            .expect("accepted");
        assert!(matches!(r, Accepted::Stored { .. }));
        a.register(eid("ipn:2.1")).expect("register");
        let d = a.poll_delivery().expect("offered");
        first_id = d.id;
        // Crash before the application acknowledges.
    }
    let mut a = Agent::open(
        AgentConfig::new(2),
        RedbStore::open(&path).expect("s"),
        T0 + 5,
    )
    .expect("agent");
    assert!(a.poll_delivery().is_none(), "not registered yet");
    a.register(eid("ipn:2.1")).expect("register");
    let d = a.poll_delivery().expect("offered again");
    assert_eq!(d.id, first_id);
    a.delivered(T0 + 6, d.key).expect("ack");
    let store = a.close().expect("close");
    assert_eq!(store.bundle_count(), 0);
    drop(store);
    let mut a = Agent::open(
        AgentConfig::new(2),
        RedbStore::open(&path).expect("s"),
        T0 + 7,
    )
    .expect("agent");
    let r = a.accept_from_cla(T0 + 7, Some(1), wire).expect("accepted");
    assert!(matches!(r, Accepted::Duplicate(_)));
    a.register(eid("ipn:2.1")).expect("register");
    assert!(a.poll_delivery().is_none());
}

#[test]
fn expired_while_down_is_expired_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("node1.redb");
    {
        let mut a = Agent::open(AgentConfig::new(1), RedbStore::open(&path).expect("s"), T0)
            .expect("agent");
        let mut r = req("ipn:2.1", b"short");
        r.lifetime_ms = 1000;
        a.send(T0, r).expect("send");
        a.send(T0, req("ipn:2.1", b"long")).expect("send");
    }
    let a = Agent::open(
        AgentConfig::new(1),
        RedbStore::open(&path).expect("s"),
        T0 + 5000,
    )
    .expect("agent");
    let s = a.status();
    assert_eq!((s.stored_bundles, s.expired), (1, 1));
    assert_eq!(a.close().expect("close").bundle_count(), 1);
}

/// The bundle log sees the bundles that expired while the node was down when it is installed
/// with the agent (a sink set after `open` would find them already gone).
#[test]
fn bundles_expired_while_down_are_in_the_log_installed_at_open() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Events(Arc<Mutex<Vec<(bp::BundleEventKind, bpv7::BundleId, u64)>>>);
    impl bp::BundleEventSink for Events {
        fn record(&mut self, e: &bp::BundleEvent<'_>) {
            self.0
                .lock()
                .expect("events")
                .push((e.kind, e.id.clone(), e.time_ms));
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("node1.redb");
    let short = {
        let mut a = Agent::open(AgentConfig::new(1), RedbStore::open(&path).expect("s"), T0)
            .expect("agent");
        let mut r = req("ipn:2.1", b"short");
        r.lifetime_ms = 1000;
        let short = a.send(T0, r).expect("send");
        a.send(T0, req("ipn:2.1", b"long")).expect("send");
        short
    };
    let events = Events::default();
    let a = Agent::open_logged(
        AgentConfig::new(1),
        RedbStore::open(&path).expect("s"),
        T0 + 5000,
        Some(Box::new(events.clone())),
    )
    .expect("agent");
    assert_eq!(a.status().expired, 1);
    let logged = events.0.lock().expect("events").clone();
    assert_eq!(
        logged,
        vec![(bp::BundleEventKind::Expired, short, T0 + 5000)],
        "the expiry at open is logged, nothing else"
    );
}

#[test]
fn creation_timestamps_are_not_reused_after_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("node1.redb");
    let id1 = {
        let mut a = Agent::open(AgentConfig::new(1), RedbStore::open(&path).expect("s"), T0)
            .expect("agent");
        a.send(T0, req("ipn:2.1", b"a")).expect("send")
    };
    let mut a =
        Agent::open(AgentConfig::new(1), RedbStore::open(&path).expect("s"), T0).expect("agent");
    let id2 = a.send(T0, req("ipn:2.1", b"b")).expect("send");
    assert_ne!(id1, id2);
    assert_eq!(id2.timestamp, CreationTimestamp::new(T0, 1));
}
