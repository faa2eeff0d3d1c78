//! Discards: data from a convergence layer that never became a bundle (an LTP block whose
//! content does not split into bundles, a length field claiming more bytes than arrived). The
//! convergence layer acknowledges such data (refusing it would only make the sender send it
//! again forever), so the agent is where it is counted and logged, per reason, instead of
//! vanishing silently. Malformed *bundles* (a bad CRC, an invalid block) are counted apart, in
//! `malformed`, by [`crate::Agent::accept_from_cla`].

use bpv7::{BundleId, CreationTimestamp, DecodeError, Eid};

use super::{Agent, BundleEvent, BundleEventKind, DtnTime};
use crate::store::Store;
use crate::NodeNum;

/// Why a convergence layer's data could not be split into bundles, as a short reason for
/// counters and the bundle log. `at_start`: nothing before it was a bundle.
pub fn split_failure_reason(e: &DecodeError, at_start: bool) -> &'static str {
    match e {
        // A length (of the payload, a block, an EID...) claims more bytes than the data holds:
        // e.g. a payload of 2^62 bytes in a block of a few hundred.
        DecodeError::Truncated { .. } | DecodeError::TooLarge { .. } => "length_beyond_block",
        DecodeError::NotIndefiniteArray { .. }
        | DecodeError::InvalidCbor { .. }
        | DecodeError::WrongMajorType { .. }
        | DecodeError::UnsupportedVersion { .. }
            if at_start =>
        {
            "not_a_bundle"
        }
        _ if at_start => "malformed_bundle",
        _ => "trailing_bytes",
    }
}

impl<S: Store> Agent<S> {
    /// Records data from a convergence layer that was dropped without becoming a bundle:
    /// counted per `reason` in [`crate::AgentStatus::discarded`] and logged as a `discarded`
    /// event (`len` bytes, from `from` when known).
    pub fn discard(&mut self, now: DtnTime, from: Option<NodeNum>, reason: &'static str, len: u64) {
        *self.counters.discarded.entry(reason).or_insert(0) += 1;
        if let Some(sink) = self.sink.as_mut() {
            let none = BundleId {
                source: Eid::DtnNone,
                timestamp: CreationTimestamp::new(0, 0),
                fragment: None,
            };
            sink.record(&BundleEvent {
                time_ms: now,
                kind: BundleEventKind::Discarded,
                id: &none,
                length: len,
                destination: &Eid::DtnNone,
                neighbour: from,
                key: None,
                reason,
            });
        }
    }
}
