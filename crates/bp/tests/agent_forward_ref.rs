//! Forwarding by reference (`Agent::poll_transmit_ref`, `HopBundle`): the agent decides a
//! relayed bundle's head for the next hop without reading its payload, the convergence layer's
//! thread reads the stored bytes and checks them against the store's CRC. A relayed bundle
//! leaves byte for byte as the full decode, update and re-encode gave it; a bundle whose stored
//! bytes went bad is refused on the reading side and kept (not lost, not sent), and leaves
//! intact once the store is readable again.

use std::path::Path;

use bp::store::{StoreOptions, StoredBytes};
use bp::{Agent, AgentConfig, BundleKey, MemoryStore, RedbStore, SendRequest, StoreError};
use bpv7::{Bundle, DecodeLimits, Eid};
use bytes::Bytes;

mod segment_support;
use segment_support::{flip, seg_file};

const T0: u64 = 800_000_000_000;

/// Bundles created at node 1 for node 3 (hop limit 9), as node 1 sends them (to node 2 in
/// these tests: the bytes do not name the next hop).
fn from_node_1(payload_lens: &[usize]) -> Vec<Bytes> {
    from_node_1_with_hop_limit(payload_lens, 9)
}

/// As [`from_node_1`], with hop limit `limit`.
fn from_node_1_with_hop_limit(payload_lens: &[usize], limit: u64) -> Vec<Bytes> {
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    a.link_up(T0, 3, 1_000_000_000);
    let reqs = payload_lens
        .iter()
        .map(|&n| {
            let p = Bytes::from((0..n).map(|i| (i * 13 + n) as u8).collect::<Vec<u8>>());
            let mut r = SendRequest::new(Eid::ipn(1, 1), Eid::ipn(3, 7), p);
            r.lifetime_ms = 3_600_000;
            r.hop_limit = Some(limit);
            r
        })
        .collect();
    for r in a.send_batch(T0, reqs) {
        r.expect("send");
    }
    std::iter::from_fn(|| a.poll_transmit(T0).map(|f| f.bundle)).collect()
}

/// Node 2 on a redb store whose segment log takes bundles from 1000 bytes on, with a hot cache
/// of `hot` bytes (0: every relayed bundle is read back from its segment file).
fn node_2(path: &Path, hot: u64) -> Agent<RedbStore> {
    let opts = StoreOptions {
        segment_threshold: 1000,
        hot_cache_bytes: hot,
        ..StoreOptions::default()
    };
    let store = RedbStore::open_with(path, &opts).expect("open store");
    let mut a = Agent::open(AgentConfig::new(2), store, T0).expect("open agent");
    a.link_up(T0, 3, 1_000_000_000);
    a
}

/// What forwarding `wire` from node 2 `age_ms` after it arrived gave before forwarding by
/// reference: the whole bundle decoded, this hop's blocks updated, everything encoded again.
fn full_re_encode(wire: &Bytes, age_ms: u64) -> Vec<u8> {
    let mut b =
        Bundle::decode_with_limits(wire.clone(), &DecodeLimits::trusted_store()).expect("decode");
    b.set_previous_node(&Eid::ipn(2, 0));
    b.add_bundle_age(age_ms).expect("age");
    b.increment_hop_count().expect("hop count");
    b.encode()
}

#[test]
fn a_relayed_bundle_leaves_as_the_full_re_encode_gave_it_from_memory_and_from_disk() {
    let lens = [0usize, 1, 500, 999, 1000, 4096, 65_536, 300_000];
    let wires = from_node_1(&lens);
    assert_eq!(wires.len(), lens.len());
    for hot in [0u64, 32 << 20] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut a = node_2(&dir.path().join("s.redb"), hot);
        for w in &wires {
            a.accept_from_cla(T0, Some(1), w.clone()).expect("accepted");
        }
        let mut out = Vec::new();
        while let Some(f) = a.poll_transmit_ref(T0 + 5) {
            assert_eq!(f.neighbour, 3);
            let len = f.bundle.len();
            // From disk (no hot cache), a bundle beyond the inline threshold is a reference:
            // nothing of it was read whole by the agent.
            if hot == 0 && len > 1100 {
                assert!(
                    f.bundle.as_ready().is_none(),
                    "{len}-byte bundle read by the agent"
                );
            }
            // The same bundle as two parts (new head, stored bytes from the payload on), as
            // TCPCL sends it, and those parts put back: the same octets.
            let key = f.key;
            let (head, tail) = f.bundle.clone().into_parts().expect("readable");
            let bytes = f.bundle.into_bytes().expect("readable");
            assert_eq!(bytes.len() as u64, len);
            assert_eq!([&head[..], &tail[..]].concat(), &bytes[..]);
            let back = bp::HopBundle::from_parts(key, head, tail);
            assert_eq!(back.len(), len);
            assert_eq!(back.into_bytes().expect("in memory"), bytes);
            out.push(bytes);
        }
        assert_eq!(out.len(), wires.len(), "hot cache {hot}");
        for (i, (w, o)) in wires.iter().zip(&out).enumerate() {
            assert_eq!(
                &o[..],
                &full_re_encode(w, 5)[..],
                "bundle {i} ({} payload bytes), hot cache {hot}",
                lens[i]
            );
            // And it is a valid bundle with its CRCs.
            let d = Bundle::decode(o.clone()).expect("valid");
            assert_eq!(d.previous_node(), Some(Eid::ipn(2, 0)));
            // Node 1 counted the first hop.
            assert_eq!(d.hop_count().map(|h| h.count), Some(2));
        }
    }
}

#[test]
fn stored_bytes_gone_bad_are_refused_by_the_reading_side_and_the_bundle_is_kept() {
    let wires = from_node_1(&[50_000]);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut a = node_2(&db, 0);
    a.accept_from_cla(T0, Some(1), wires[0].clone())
        .expect("accepted");
    // A byte of the payload, far beyond the head the agent reads, goes bad on disk.
    let seg = seg_file(&db);
    flip(&seg, 30_000);

    let f = a
        .poll_transmit_ref(T0 + 5)
        .expect("handed out by reference");
    let key = f.key;
    let err = f
        .bundle
        .into_bytes()
        .expect_err("the CRC no longer matches");
    match &err {
        StoreError::CorruptData { key: k, reason } => {
            assert_eq!(*k, key);
            assert!(reason.contains("CRC-32C"), "{reason}");
        }
        other => panic!("expected CorruptData, got {other:?}"),
    }
    a.cla_unreadable(T0 + 6, key, &err).expect("reported");
    // Kept, not sent, not handed out again while the store is degraded.
    let st = a.status();
    assert_eq!(st.stored_bundles, 1);
    assert_eq!(st.forwarded, 0);
    assert_eq!(st.in_flight, 0);
    let degraded = a.store_health().degraded().expect("store degraded");
    assert!(
        degraded.reason.contains(&format!("bundle {key}")),
        "{}",
        degraded.reason
    );
    assert!(a.poll_transmit_ref(T0 + 7).is_none());

    // The same failure seen through `poll_transmit` (read on the caller's thread): kept too.
    // The disk is repaired; once the store's recovery retry is due, the bundle leaves intact.
    flip(&seg, 30_000);
    let later = T0 + 6 + bp::StoreHealth::RETRY_FIRST_MS + 1;
    a.handle_timeout(later).expect("recovery");
    assert!(a.store_health().is_ok(), "{:?}", a.store_health());
    let f = a.poll_transmit(later).expect("forwarded after recovery");
    assert_eq!(f.key, key);
    assert_eq!(&f.bundle[..], &full_re_encode(&wires[0], later - T0)[..]);
    a.cla_result(later, f.key, bp::ClaOutcome::Sent)
        .expect("sent");
    assert_eq!(a.status().stored_bundles, 0);
}

#[test]
fn a_deletion_decided_on_the_unchecked_head_waits_for_the_whole_record_to_pass_its_crc() {
    // Hop limit 1: node 2's forwarding would exceed it, so the bundle is deleted, a decision the
    // agent takes from the head it read without the store's CRC check.
    let wires = from_node_1_with_hop_limit(&[50_000], 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut a = node_2(&db, 0);
    a.accept_from_cla(T0, Some(1), wires[0].clone())
        .expect("accepted");
    let seg = seg_file(&db);
    flip(&seg, 30_000);
    // Damaged record: nothing is deleted, the store is degraded, the bundle kept.
    assert!(a.poll_transmit_ref(T0 + 5).is_none());
    assert_eq!(a.status().stored_bundles, 1);
    assert!(a.store_health().degraded().is_some());
    // Repaired: after the recovery retry, the hop limit deletes it.
    flip(&seg, 30_000);
    let later = T0 + 5 + bp::StoreHealth::RETRY_FIRST_MS + 1;
    a.handle_timeout(later).expect("recovery");
    assert!(a.store_health().is_ok(), "{:?}", a.store_health());
    assert!(a.poll_transmit_ref(later).is_none());
    assert_eq!(a.status().stored_bundles, 0);
}

#[test]
fn poll_transmit_keeps_a_bundle_it_cannot_read_and_serves_the_others() {
    let wires = from_node_1(&[20_000, 20_000]);
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut a = node_2(&db, 0);
    for w in &wires {
        a.accept_from_cla(T0, Some(1), w.clone()).expect("accepted");
    }
    // The first bundle's payload goes bad (both are in the one segment, first at offset 0).
    flip(&seg_file(&db), 10_000);
    let f = a.poll_transmit(T0 + 5).expect("the second bundle");
    assert_eq!(&f.bundle[..], &full_re_encode(&wires[1], 5)[..]);
    assert!(a.poll_transmit(T0 + 5).is_none());
    assert_eq!(a.status().stored_bundles, 2);
    assert!(a.store_health().degraded().is_some());
}

#[test]
fn a_memory_store_hands_out_ready_bytes() {
    let mut s = MemoryStore::new();
    use bp::store::{Batch, Op, Store};
    let data = Bytes::from_static(b"not a bundle, just bytes");
    let mut b = Batch::new();
    let meta = bp::BundleMeta {
        role: bp::Role::Forward,
        id: bpv7::BundleId {
            source: Eid::ipn(1, 1),
            timestamp: bpv7::CreationTimestamp {
                dtn_time_ms: 1,
                sequence: 0,
            },
            fragment: None,
        },
        destination: Eid::ipn(3, 1),
        report_to: Eid::DtnNone,
        flags: bpv7::BundleFlags::empty(),
        received_at_ms: 0,
        expires_at_ms: u64::MAX,
        priority: 1,
        prev_hop: None,
        len: data.len() as u64,
    };
    b.push(Op::Put {
        key: BundleKey(1),
        meta,
        data: data.clone(),
    });
    s.commit(&b).expect("commit");
    match s.locate(BundleKey(1)).expect("locate") {
        Some(StoredBytes::Ready(d)) => assert_eq!(d, data),
        other => panic!("expected ready bytes, got {other:?}"),
    }
    assert!(s.locate(BundleKey(2)).expect("locate").is_none());
}
