//! Bounds on TCPCL sessions, so idle or hostile peers cannot hold the node's sessions (each is
//! a thread, buffers and a socket):
//!
//! - **Idle timeout**: RFC 9174 ends a session only after two keepalive intervals of silence,
//!   so a session that negotiated keepalive 0 (either side may ask for it) never times out.
//!   `[tcpcl] idle_timeout_s` closes such a session (SESS_TERM "Idle timeout") once nothing
//!   was received for that long. Sessions with keepalives keep RFC 9174's rule.
//! - **Caps**: at most `max_sessions` accepted sessions at once, at most
//!   `max_sessions_per_address` of them from one IP address (counted from the TCP accept, before
//!   anything is read), and at most `max_sessions_per_peer` established sessions with one node
//!   id (either direction; an extra one ends with SESS_TERM "Busy").
//!
//! Every refusal is counted in `status` (`tcpcl.sessions_refused`, per reason).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The configured bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Close sessions without keepalives after this long without input (None: never).
    pub idle_timeout: Option<Duration>,
    /// Accepted sessions at once.
    pub max_sessions: usize,
    /// Accepted sessions at once from one IP address.
    pub max_sessions_per_address: usize,
    /// Established sessions at once with one node id.
    pub max_sessions_per_peer: usize,
}

/// Live session counts per IP address and per node id, shared by every session thread.
#[derive(Debug, Default)]
pub(crate) struct SessionCounts {
    by_address: Mutex<HashMap<IpAddr, usize>>,
    by_peer: Mutex<HashMap<String, usize>>,
}

/// A counted session slot, released when dropped (the session ended).
#[derive(Debug)]
pub(crate) struct Slot {
    counts: Arc<SessionCounts>,
    key: SlotKey,
}

#[derive(Debug)]
enum SlotKey {
    Address(IpAddr),
    Peer(String),
}

fn take<K: std::hash::Hash + Eq>(map: &Mutex<HashMap<K, usize>>, key: K, limit: usize) -> bool {
    let Ok(mut m) = map.lock() else {
        return false;
    };
    let n = m.entry(key).or_insert(0);
    if *n >= limit {
        return false;
    }
    *n += 1;
    true
}

fn give_back<K: std::hash::Hash + Eq>(map: &Mutex<HashMap<K, usize>>, key: &K) {
    if let Ok(mut m) = map.lock() {
        if let Some(n) = m.get_mut(key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(key);
            }
        }
    }
}

impl SessionCounts {
    /// A slot for one more session from `ip`, if fewer than `limit` are open.
    pub(crate) fn take_address(self: &Arc<Self>, ip: IpAddr, limit: usize) -> Option<Slot> {
        take(&self.by_address, ip.to_canonical(), limit).then(|| Slot {
            counts: self.clone(),
            key: SlotKey::Address(ip.to_canonical()),
        })
    }

    /// A slot for one more established session with `node_id`, if fewer than `limit` are.
    pub(crate) fn take_peer(self: &Arc<Self>, node_id: &str, limit: usize) -> Option<Slot> {
        take(&self.by_peer, node_id.to_string(), limit).then(|| Slot {
            counts: self.clone(),
            key: SlotKey::Peer(node_id.to_string()),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        match &self.key {
            SlotKey::Address(ip) => give_back(&self.counts.by_address, ip),
            SlotKey::Peer(id) => give_back(&self.counts.by_peer, id),
        }
    }
}

/// The idle clock of one session: time since the last octet received.
#[derive(Debug)]
pub(crate) struct IdleGuard {
    timeout: Option<Duration>,
    last_input: Instant,
}

impl IdleGuard {
    pub(crate) fn new(timeout: Option<Duration>) -> Self {
        Self {
            timeout,
            last_input: Instant::now(),
        }
    }

    /// Input arrived.
    pub(crate) fn touch(&mut self) {
        self.last_input = Instant::now();
    }

    /// When the idle timeout ends, if it applies (`keepalive_s` is the negotiated interval:
    /// with keepalives RFC 9174's own idle rule applies instead).
    pub(crate) fn deadline(&self, keepalive_s: u16) -> Option<Instant> {
        match self.timeout {
            Some(t) if keepalive_s == 0 => Some(self.last_input + t),
            _ => None,
        }
    }

    /// True when the session has been idle for longer than the timeout.
    pub(crate) fn expired(&self, keepalive_s: u16) -> bool {
        self.deadline(keepalive_s)
            .is_some_and(|d| Instant::now() >= d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_per_key_and_released_on_drop() {
        let c = Arc::new(SessionCounts::default());
        let ip: IpAddr = "10.1.1.1".parse().unwrap();
        let a = c.take_address(ip, 2).unwrap();
        let _b = c.take_address(ip, 2).unwrap();
        assert!(c.take_address(ip, 2).is_none());
        assert!(c.take_address("10.1.1.2".parse().unwrap(), 2).is_some());
        // An IPv4-mapped address is the same host.
        assert!(c
            .take_address("::ffff:10.1.1.1".parse().unwrap(), 2)
            .is_none());
        drop(a);
        assert!(c.take_address(ip, 2).is_some());
        let p = c.take_peer("ipn:2.0", 1).unwrap();
        assert!(c.take_peer("ipn:2.0", 1).is_none());
        drop(p);
        assert!(c.take_peer("ipn:2.0", 1).is_some());
    }

    #[test]
    fn idle_timeout_applies_only_without_keepalives() {
        let g = IdleGuard::new(Some(Duration::ZERO));
        assert!(g.expired(0));
        assert!(!g.expired(30));
        assert!(!IdleGuard::new(None).expired(0));
    }
}
