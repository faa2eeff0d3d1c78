//! Back-pressure from the applications to the peers: the ingress gate.
//!
//! A node that takes bundles from its peers faster than its applications read them fills its
//! store with undelivered bundles until it refuses everything (issue 16: HDTN pipelining 1 MB
//! bundles into a node grew its delivery backlog to 3.8 GB of a 4 GB quota). The gate watches
//! the agent's delivery backlog (bundles stored for registered endpoints and not acknowledged
//! by their applications, `bp::Agent::delivery_backlog`) and closes above a limit
//! (`[bp] delivery_backlog_bytes`): the TCPCL sessions stop reading their sockets, so TCP's flow
//! control holds the peer back, and the LTP engine refuses new import sessions, which the
//! peer's checkpoint timer retries. It opens again once the backlog is down to half the limit
//! (hysteresis: one pause per burst rather than one per bundle). UDPCL has no way to hold a
//! peer back; its datagrams keep being taken while the store has room.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use client::status::IngressStatus;

/// A change of the gate the agent thread must pass on to the convergence layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GateChange {
    /// Stop taking bundles from peers.
    Pause,
    /// Take bundles again.
    Resume,
}

/// The ingress gate: a limit, its state and the flag the TCPCL sessions read.
#[derive(Debug)]
pub(crate) struct IngressGate {
    /// Delivery backlog in bytes above which ingress pauses; 0 = never.
    limit: u64,
    /// Shared with every TCPCL session thread: true while paused.
    paused: Arc<AtomicBool>,
    /// Times the gate closed since the node started.
    pauses: u64,
}

impl IngressGate {
    /// A gate closing above `limit` bytes (0: never), publishing its state in `paused`.
    pub(crate) fn new(limit: u64, paused: Arc<AtomicBool>) -> Self {
        paused.store(false, Relaxed);
        Self {
            limit,
            paused,
            pauses: 0,
        }
    }

    /// Looks at the current delivery backlog; returns the change to apply, if any.
    pub(crate) fn observe(&mut self, backlog_bytes: u64) -> Option<GateChange> {
        let paused = self.paused.load(Relaxed);
        if !paused && self.limit > 0 && backlog_bytes > self.limit {
            self.paused.store(true, Relaxed);
            self.pauses += 1;
            return Some(GateChange::Pause);
        }
        if paused && (self.limit == 0 || backlog_bytes <= self.limit / 2) {
            self.paused.store(false, Relaxed);
            return Some(GateChange::Resume);
        }
        None
    }

    /// The state for `dtnkit status` (`ingress` object), with the delivery backlog (bundles,
    /// bytes).
    pub(crate) fn status(&self, backlog: (u64, u64)) -> IngressStatus {
        IngressStatus {
            paused: self.paused.load(Relaxed),
            pauses: self.pauses,
            delivery_backlog_bundles: backlog.0,
            delivery_backlog_bytes: backlog.1,
            delivery_backlog_limit: self.limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closes_above_the_limit_and_opens_at_half_of_it() {
        let flag = Arc::new(AtomicBool::new(true));
        let mut g = IngressGate::new(1000, flag.clone());
        assert!(!flag.load(Relaxed), "a new gate is open");
        assert_eq!(g.observe(1000), None, "at the limit: still open");
        assert_eq!(g.observe(1001), Some(GateChange::Pause));
        assert!(flag.load(Relaxed));
        assert_eq!(g.observe(5000), None, "already paused");
        assert_eq!(g.observe(501), None, "above half: stays paused");
        assert_eq!(g.observe(500), Some(GateChange::Resume));
        assert!(!flag.load(Relaxed));
        assert_eq!(g.observe(900), None);
        assert_eq!(g.observe(2000), Some(GateChange::Pause));
        assert_eq!(g.status((3, 2000)).pauses, 2);
        assert!(g.status((3, 2000)).paused);
    }

    #[test]
    fn a_zero_limit_never_pauses() {
        let mut g = IngressGate::new(0, Arc::new(AtomicBool::new(false)));
        assert_eq!(g.observe(u64::MAX), None);
    }
}
