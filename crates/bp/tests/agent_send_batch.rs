//! `Agent::send_batch`: group commit of application bundles (one store transaction per batch),
//! the quota applied cumulatively within a batch, all-or-nothing on a failed commit, unique
//! creation timestamps, and the bundle events of the committed bundles.

use std::sync::{Arc, Mutex};

use bp::{
    Agent, AgentConfig, BundleEvent, BundleEventKind, BundleEventSink, MemoryStore, SendError,
    SendRequest, Store,
};
use bpv7::{BundleId, Eid};
use bytes::Bytes;

const T0: u64 = 800_000_000_000;

fn eid(s: &str) -> Eid {
    s.parse().expect("eid")
}

fn req(dst: &str, payload_len: usize) -> SendRequest {
    SendRequest::new(
        eid("ipn:1.1"),
        eid(dst),
        Bytes::from(vec![b'x'; payload_len]),
    )
}

fn agent(cfg: AgentConfig, store: MemoryStore) -> Agent<MemoryStore> {
    Agent::open(cfg, store, T0).expect("open")
}

/// Records (kind, id) of every event.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<(BundleEventKind, BundleId)>>>);

impl BundleEventSink for Events {
    fn record(&mut self, event: &BundleEvent<'_>) {
        if let Ok(mut v) = self.0.lock() {
            v.push((event.kind, event.id.clone()));
        }
    }
}

#[test]
fn a_batch_is_one_commit_and_every_bundle_is_stored() {
    let mut a = agent(AgentConfig::new(1), MemoryStore::new());
    let before = a.store().commits();
    let reqs: Vec<SendRequest> = (0..50).map(|i| req("ipn:2.1", 100 + i)).collect();
    let rs = a.send_batch(T0, reqs);
    assert_eq!(rs.len(), 50);
    assert!(rs.iter().all(Result::is_ok), "{rs:?}");
    assert_eq!(a.store().commits(), before + 1, "one group commit");
    assert_eq!(a.store().bundle_count(), 50);
    let st = a.status();
    assert_eq!(st.stored_bundles, 50);
    assert_eq!(st.created, 50);
    assert_eq!(
        st.unrouted, 50,
        "every committed bundle is queued for routing"
    );
}

#[test]
fn single_send_is_the_one_element_batch() {
    let mut a = agent(AgentConfig::new(1), MemoryStore::new());
    let before = a.store().commits();
    let id = a.send(T0, req("ipn:2.1", 10)).expect("send");
    assert_eq!(a.store().commits(), before + 1);
    assert_eq!(id.source, eid("ipn:1.1"));
    assert_eq!(a.status().created, 1);
}

#[test]
fn creation_timestamps_are_unique_and_increasing_across_a_batch() {
    let mut a = agent(AgentConfig::new(1), MemoryStore::new());
    let first = a.send(T0, req("ipn:2.1", 1)).expect("send");
    let rs = a.send_batch(T0, (0..20).map(|_| req("ipn:2.1", 1)).collect());
    let later = a.send_batch(T0 + 5, (0..3).map(|_| req("ipn:2.1", 1)).collect());
    let mut ids = vec![first];
    ids.extend(rs.into_iter().chain(later).map(|r| r.expect("sent")));
    for w in ids.windows(2) {
        let (p, n) = (w[0].timestamp, w[1].timestamp);
        assert!(
            (n.dtn_time_ms, n.sequence) > (p.dtn_time_ms, p.sequence),
            "{p:?} then {n:?}"
        );
    }
    assert_eq!(ids[20].timestamp.dtn_time_ms, T0);
    assert_eq!(ids[20].timestamp.sequence, 20);
    assert_eq!(ids[21].timestamp.dtn_time_ms, T0 + 5);
    assert_eq!(ids[21].timestamp.sequence, 0);
}

#[test]
fn the_quota_is_cumulative_within_a_batch_and_smaller_requests_may_still_fit() {
    let mut cfg = AgentConfig::new(1);
    cfg.store_quota_bytes = 10_000;
    let mut a = agent(cfg, MemoryStore::new());
    let before = a.store().commits();
    // 4000 + 4000 fit, a third 4000 does not, a 500 still does, then 4000 again does not.
    let rs = a.send_batch(
        T0,
        vec![
            req("ipn:2.1", 4000),
            req("ipn:2.1", 4000),
            req("ipn:2.1", 4000),
            req("ipn:2.1", 500),
            req("ipn:2.1", 4000),
        ],
    );
    let ok: Vec<bool> = rs.iter().map(Result::is_ok).collect();
    assert_eq!(ok, [true, true, false, true, false], "{rs:?}");
    assert!(matches!(rs[2], Err(SendError::StoreFull { .. })));
    assert!(matches!(rs[4], Err(SendError::StoreFull { .. })));
    assert_eq!(a.store().commits(), before + 1);
    assert_eq!(a.store().bundle_count(), 3);
    let st = a.status();
    assert_eq!(st.stored_bundles, 3);
    assert!(st.stored_bytes <= 10_000);
    assert_eq!(st.refused_store_full, 2);
    assert_eq!(st.created, 3);
}

#[test]
fn invalid_requests_are_refused_alone() {
    let mut cfg = AgentConfig::new(1);
    cfg.max_bundle_size = 2000;
    let mut a = agent(cfg, MemoryStore::new());
    let mut foreign = req("ipn:2.1", 10);
    foreign.source = eid("ipn:9.1");
    let rs = a.send_batch(
        T0,
        vec![
            req("ipn:2.1", 10),
            foreign,
            req("ipn:2.1", 5000),
            SendRequest::new(eid("ipn:1.1"), Eid::DtnNone, Bytes::from_static(b"x")),
            req("ipn:2.1", 10),
        ],
    );
    assert!(rs[0].is_ok());
    assert!(matches!(rs[1], Err(SendError::BadSource(_))));
    assert!(matches!(rs[2], Err(SendError::TooLarge { .. })));
    assert!(matches!(rs[3], Err(SendError::BadDestination(_))));
    assert!(rs[4].is_ok());
    assert_eq!(a.store().bundle_count(), 2);
}

#[test]
fn a_failed_commit_fails_every_staged_request_and_changes_nothing() {
    let mut cfg = AgentConfig::new(1);
    cfg.store_quota_bytes = 10_000;
    let mut store = MemoryStore::new();
    store.fail_next_commits(1);
    let mut a = agent(cfg, store);
    let events = Events::default();
    a.set_event_sink(Some(Box::new(events.clone())));
    let rs = a.send_batch(
        T0,
        vec![
            req("ipn:2.1", 100),
            req("ipn:2.1", 20_000),
            req("ipn:1.5", 100),
        ],
    );
    assert!(matches!(rs[0], Err(SendError::Store(_))), "{rs:?}");
    assert!(
        matches!(rs[1], Err(SendError::StoreFull { .. })),
        "a request refused before the commit keeps its own reason"
    );
    assert!(matches!(rs[2], Err(SendError::Store(_))));
    let st = a.status();
    assert_eq!(st.stored_bundles, 0);
    assert_eq!(st.stored_bytes, 0);
    assert_eq!(st.created, 0);
    assert_eq!(st.unrouted, 0);
    assert_eq!(a.store().bundle_count(), 0);
    assert!(events.0.lock().expect("lock").is_empty(), "no events");
    // The quota the failed batch staged is free again: the retry, once the degraded store has
    // recovered (its recovery timer, docs/store.md), fits entirely.
    a.register(eid("ipn:1.5")).expect("register");
    let retry_at = a.poll_timeout().expect("recovery timer");
    a.handle_timeout(retry_at).expect("recovered");
    let rs = a.send_batch(retry_at, vec![req("ipn:2.1", 4000), req("ipn:1.5", 4000)]);
    assert!(rs.iter().all(Result::is_ok), "{rs:?}");
    assert_eq!(a.status().stored_bundles, 2);
    let d = a.poll_delivery().expect("local bundle ready");
    assert_eq!(d.payload.len(), 4000);
}

#[test]
fn committed_bundles_get_one_created_event_each_in_request_order() {
    let mut cfg = AgentConfig::new(1);
    cfg.store_quota_bytes = 1000;
    let mut a = agent(cfg, MemoryStore::new());
    let events = Events::default();
    a.set_event_sink(Some(Box::new(events.clone())));
    let rs = a.send_batch(
        T0,
        vec![
            req("ipn:2.1", 100),
            req("ipn:2.1", 5000),
            req("ipn:3.1", 100),
        ],
    );
    let ids: Vec<BundleId> = rs.into_iter().filter_map(Result::ok).collect();
    assert_eq!(ids.len(), 2);
    let got = events.0.lock().expect("lock").clone();
    let want: Vec<(BundleEventKind, BundleId)> = ids
        .into_iter()
        .map(|id| (BundleEventKind::Created, id))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn an_empty_batch_commits_nothing() {
    let mut a = agent(AgentConfig::new(1), MemoryStore::new());
    let before = a.store().commits();
    assert!(a.send_batch(T0, Vec::new()).is_empty());
    assert_eq!(a.store().commits(), before);
}

#[test]
fn quota_free_bytes_matches_the_status_after_each_batch() {
    let mut cfg = AgentConfig::new(1);
    cfg.store_quota_bytes = 10_000;
    let mut a = agent(cfg, MemoryStore::new());
    assert_eq!(a.quota_free_bytes(), 10_000);
    for size in [100, 2000, 20_000] {
        let _ = a.send_batch(T0, vec![req("ipn:2.1", size)]);
        let st = a.status();
        assert_eq!(a.quota_free_bytes(), st.quota_bytes - st.stored_bytes);
    }
    assert!(a.quota_free_bytes() < 10_000 - 2100);
}
