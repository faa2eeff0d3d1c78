//! Store faults and refusals at the agent level (issue 19): a failing store degrades the agent
//! (new bundles refused at once, retries with back-off, recovery by itself), and a neighbour that
//! refuses bundles for lack of resources is backed off from, per neighbour.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bp::store::{Batch, BundleKey, Store, StoreContents, StoreError};
use bp::{Agent, AgentConfig, ClaOutcome, MemoryStore, RxError, SendError, SendRequest};
use bpv7::Eid;
use bytes::Bytes;

const T0: u64 = 800_000_000_000;

/// A memory store whose commits fail with ENOSPC while `full` is set, and that counts
/// recoveries.
struct FlakyStore {
    inner: MemoryStore,
    full: Arc<AtomicBool>,
    commits: Arc<AtomicU64>,
    recovers: Arc<AtomicU64>,
}

impl Store for FlakyStore {
    fn contents(&mut self) -> Result<StoreContents, StoreError> {
        self.inner.contents()
    }
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        self.commits.fetch_add(1, Relaxed);
        if self.full.load(Relaxed) {
            return Err(StoreError::Io(std::io::Error::from_raw_os_error(28)));
        }
        self.inner.commit(batch)
    }
    fn data(&mut self, key: BundleKey) -> Result<Option<Bytes>, StoreError> {
        self.inner.data(key)
    }
    fn locate(&mut self, key: BundleKey) -> Result<Option<bp::store::StoredBytes>, StoreError> {
        self.inner.locate(key)
    }
    fn used_bytes(&self) -> u64 {
        self.inner.used_bytes()
    }
    fn bundle_count(&self) -> u64 {
        self.inner.bundle_count()
    }
    fn recover(&mut self) -> Result<bool, StoreError> {
        self.recovers.fetch_add(1, Relaxed);
        Ok(false)
    }
    fn stager(&self) -> Option<bp::Stager> {
        self.inner.stager()
    }
    fn hot_cache(&self) -> Option<bp::store::HotCacheStats> {
        self.inner.hot_cache()
    }
}

fn req(to: u64, len: usize) -> SendRequest {
    SendRequest::new(Eid::ipn(1, 1), Eid::ipn(to, 1), vec![7u8; len].into())
}

#[test]
fn a_failing_store_degrades_refuses_retries_with_backoff_and_recovers() {
    let full = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let recovers = Arc::new(AtomicU64::new(0));
    let store = FlakyStore {
        inner: MemoryStore::new(),
        full: full.clone(),
        commits: commits.clone(),
        recovers: recovers.clone(),
    };
    let mut a = Agent::open(AgentConfig::new(1), store, T0).unwrap();
    a.link_up(T0, 2, 0);
    let first = a.send(T0, req(2, 100)).unwrap();
    // The disk fills: the failing commit degrades the store.
    full.store(true, Relaxed);
    assert!(matches!(
        a.send(T0 + 1, req(2, 100)),
        Err(SendError::Store(_))
    ));
    let d = a.store_health().degraded().cloned().expect("degraded");
    assert!(d.reason.contains("os error 28"), "{d:?}");
    // While degraded, nothing is attempted: refusals are immediate and say so.
    let before = commits.load(Relaxed);
    for i in 0..100 {
        match a.send(T0 + 2 + i, req(2, 100)) {
            Err(SendError::Store(StoreError::Unavailable { .. })) => {}
            other => panic!("{other:?}"),
        }
    }
    let b = bpv7::BundleBuilder::new(Eid::ipn(3, 1), Eid::ipn(1, 1))
        .creation(bpv7::CreationTimestamp::new(T0, 0))
        .payload(vec![1u8; 10])
        .build()
        .unwrap()
        .encode();
    let r = a.accept_from_cla(T0 + 3, Some(3), b.clone().into());
    assert!(
        matches!(&r, Err(e @ RxError::Store(_)) if e.is_transient()),
        "{r:?}"
    );
    assert_eq!(
        commits.load(Relaxed),
        before,
        "no commit attempted while degraded"
    );
    // Forwarding the stored bundle still works; its delete waits for the recovery.
    let f = a.poll_transmit(T0 + 4).expect("the first bundle");
    a.cla_result(T0 + 4, f.key, ClaOutcome::Sent).unwrap();
    // Retries back off: 250 ms, then 500, 1000 ...
    let mut now = T0 + 1;
    let mut gaps = Vec::new();
    for _ in 0..4 {
        let next = a.poll_timeout().unwrap();
        gaps.push(next - now);
        now = next;
        a.handle_timeout(now).unwrap();
        assert!(!a.store_health().is_ok());
    }
    assert_eq!(gaps[1..], [500, 1000, 2000], "{gaps:?}");
    assert_eq!(recovers.load(Relaxed), 4);
    // Space returns: the next attempt recovers, commits the waiting delete, and sends work.
    full.store(false, Relaxed);
    let next = a.poll_timeout().unwrap();
    a.handle_timeout(next).unwrap();
    assert!(a.store_health().is_ok());
    assert_eq!(a.store_health().recoveries, 1);
    assert_eq!(
        a.status().stored_bundles,
        0,
        "the forwarded bundle was deleted"
    );
    assert!(a.send(next, req(2, 100)).is_ok());
    assert!(a.accept_from_cla(next, Some(3), b.into()).is_ok());
    let _ = first;
}

#[test]
fn a_refusing_neighbour_is_backed_off_alone_and_reset_when_it_takes_a_bundle() {
    let mut cfg = AgentConfig::new(1);
    cfg.refusal_backoff_first_ms = 100;
    cfg.refusal_backoff_max_ms = 400;
    let mut a = Agent::open(cfg, MemoryStore::new(), T0).unwrap();
    a.link_up(T0, 2, 0);
    a.link_up(T0, 3, 0);
    a.send(T0, req(2, 100)).unwrap();
    let f = a.poll_transmit(T0).unwrap();
    assert_eq!(f.neighbour, 2);
    a.cla_result(T0, f.key, ClaOutcome::Refused).unwrap();
    // Kept, but node 2 waits; node 3 is served meanwhile.
    assert!(a.poll_transmit(T0 + 50).is_none());
    a.send(T0 + 50, req(3, 100)).unwrap();
    let g = a.poll_transmit(T0 + 50).expect("node 3 is not backed off");
    assert_eq!(g.neighbour, 3);
    a.cla_result(T0 + 50, g.key, ClaOutcome::Sent).unwrap();
    assert_eq!(a.poll_timeout(), Some(T0 + 100));
    // Each refusal doubles the wait, up to the cap.
    let mut now = T0 + 100;
    let mut waits = Vec::new();
    for _ in 0..4 {
        let f = a.poll_transmit(now).expect("retried after the back-off");
        a.cla_result(now, f.key, ClaOutcome::Refused).unwrap();
        let until = a.poll_timeout().unwrap();
        waits.push(until - now);
        now = until;
    }
    assert_eq!(waits, [200, 400, 400, 400]);
    assert_eq!(a.status().cla_refusals, 5);
    assert_eq!(a.status().stored_bundles, 1);
    // Taken at last: the back-off is over.
    let f = a.poll_transmit(now).unwrap();
    a.cla_result(now, f.key, ClaOutcome::Sent).unwrap();
    assert_eq!(a.neighbour_backoffs().count(), 0);
    assert_eq!(a.status().stored_bundles, 0);
}
