//! Helpers shared by the store integration tests (`store_crash`, `store_segments`).

use bp::store::{BundleMeta, Role};
use bpv7::{BundleFlags, BundleId, CreationTimestamp, Eid};

/// The metadata record of a forward bundle whose identity is derived from `key`, `len` bytes long.
pub fn meta_for(key: u64, len: u64) -> BundleMeta {
    BundleMeta {
        role: Role::Forward,
        id: BundleId {
            source: Eid::ipn(1, 1),
            timestamp: CreationTimestamp::new(1000, key),
            fragment: None,
        },
        destination: Eid::ipn(2, 1),
        report_to: Eid::ipn(1, 0),
        flags: BundleFlags::empty(),
        received_at_ms: 1000,
        expires_at_ms: u64::MAX,
        priority: 1,
        prev_hop: None,
        len,
    }
}
