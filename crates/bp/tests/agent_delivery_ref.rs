//! Delivery by reference (`Agent::poll_delivery_ref`, `DeliveryRef`): the agent looks up where
//! a bundle for a local application is stored and the thread that writes it to the application
//! reads it. The delivery it reads is the one `poll_delivery` gives; a bundle whose stored bytes
//! went bad is reported back (`Agent::delivery_unreadable`), kept (not lost, not delivered
//! broken) and offered again once the store is readable; one that can never be decoded is
//! dropped as `poll_delivery` drops it.

use std::path::Path;

use bp::store::StoreOptions;
use bp::{Agent, AgentConfig, DeliveryReadError, RedbStore, SendRequest, StoreError};
use bpv7::Eid;
use bytes::Bytes;

mod segment_support;
use segment_support::{flip, seg_file};

const T0: u64 = 800_000_000_000;

/// Bundles created at node 1 for endpoint ipn:2.5, as node 1 sends them to node 2 (ipn:2.7
/// would be the node's echo service).
fn for_node_2(payload_lens: &[usize]) -> Vec<Bytes> {
    let mut a = Agent::open(AgentConfig::new(1), bp::MemoryStore::new(), T0).expect("open");
    a.link_up(T0, 2, 1_000_000_000);
    let reqs = payload_lens
        .iter()
        .map(|&n| {
            let p = Bytes::from((0..n).map(|i| (i * 7 + n) as u8).collect::<Vec<u8>>());
            let mut r = SendRequest::new(Eid::ipn(1, 1), Eid::ipn(2, 5), p);
            r.lifetime_ms = 3_600_000;
            r
        })
        .collect();
    for r in a.send_batch(T0, reqs) {
        r.expect("send");
    }
    std::iter::from_fn(|| a.poll_transmit(T0).map(|f| f.bundle)).collect()
}

/// Node 2 on a redb store whose segment log takes bundles from 1000 bytes on, without a hot
/// cache (every delivery is read back from its segment file), with ipn:2.5 registered.
fn node_2(path: &Path) -> Agent<RedbStore> {
    let opts = StoreOptions {
        segment_threshold: 1000,
        hot_cache_bytes: 0,
        ..StoreOptions::default()
    };
    let store = RedbStore::open_with(path, &opts).expect("open store");
    let mut a = Agent::open(AgentConfig::new(2), store, T0).expect("open agent");
    a.register(Eid::ipn(2, 5)).expect("register");
    a
}

#[test]
fn a_delivery_read_by_reference_is_the_delivery_poll_delivery_gives() {
    let wires = for_node_2(&[500, 40_000, 3]);
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut by_ref, mut direct) = (
        node_2(&dir.path().join("a.redb")),
        node_2(&dir.path().join("b.redb")),
    );
    for w in &wires {
        by_ref
            .accept_from_cla(T0, Some(1), w.clone())
            .expect("accepted");
        direct
            .accept_from_cla(T0, Some(1), w.clone())
            .expect("accepted");
    }
    for _ in &wires {
        let r = by_ref.poll_delivery_ref().expect("offered by reference");
        assert_eq!(r.endpoint, Eid::ipn(2, 5));
        let key = r.key;
        let got = r.read().expect("read on the writer's side");
        let want = direct.poll_delivery().expect("offered");
        assert_eq!(got, want);
        by_ref.delivered(T0 + 1, key).expect("delivered");
    }
    assert!(by_ref.poll_delivery_ref().is_none());
    assert_eq!(by_ref.status().stored_bundles, 0);
}

#[test]
fn a_delivery_whose_stored_bytes_went_bad_is_kept_and_offered_again_after_recovery() {
    let wires = for_node_2(&[50_000]);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut a = node_2(&db);
    a.accept_from_cla(T0, Some(1), wires[0].clone())
        .expect("accepted");
    let seg = seg_file(&db);
    flip(&seg, 30_000);

    let r = a.poll_delivery_ref().expect("offered by reference");
    let key = r.key;
    let err = r.read().expect_err("the CRC no longer matches");
    match &err {
        DeliveryReadError::Store(StoreError::CorruptData { key: k, reason }) => {
            assert_eq!(*k, key);
            assert!(reason.contains("CRC-32C"), "{reason}");
        }
        other => panic!("expected a store CRC error, got {other:?}"),
    }
    a.delivery_unreadable(T0 + 1, key, &err);
    // Kept, not delivered, not offered again while the store is degraded.
    assert_eq!(a.status().stored_bundles, 1);
    assert!(a.store_health().degraded().is_some(), "store degraded");
    assert!(a.poll_delivery_ref().is_none());
    // A second report of the same key (it is no longer offered) changes nothing.
    a.delivery_unreadable(T0 + 2, key, &err);
    assert_eq!(a.status().stored_bundles, 1);

    // The disk is repaired; once the recovery retry is due, the bundle is offered again, intact.
    flip(&seg, 30_000);
    let later = T0 + 1 + bp::StoreHealth::RETRY_FIRST_MS + 1;
    a.handle_timeout(later).expect("recovery");
    assert!(a.store_health().is_ok(), "{:?}", a.store_health());
    let r = a.poll_delivery_ref().expect("offered again after recovery");
    assert_eq!(r.key, key);
    let d = r.read().expect("readable now");
    assert_eq!(d.payload.len(), 50_000);
    a.delivered(later, key).expect("delivered");
    assert_eq!(a.status().stored_bundles, 0);
}

#[test]
fn a_delivery_that_can_never_decode_is_dropped() {
    let wires = for_node_2(&[5_000]);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut a = node_2(&dir.path().join("s.redb"));
    a.accept_from_cla(T0, Some(1), wires[0].clone())
        .expect("accepted");
    let r = a.poll_delivery_ref().expect("offered");
    let key = r.key;
    a.delivery_unreadable(
        T0 + 1,
        key,
        &DeliveryReadError::Undecodable("not a bundle".into()),
    );
    assert_eq!(a.status().stored_bundles, 0);
    assert!(
        a.store_health().is_ok(),
        "a bundle that is not one is no store failure"
    );
    assert!(a.poll_delivery_ref().is_none());
}
