//! The convergence-layer side of the agent thread: which convergence layer carries the bundles
//! for each neighbour and the agent's table of live TCPCL sessions (the messages it exchanges
//! with the TCPCL and UDPCL threads are in `messages`).
//!
//! Every neighbour belongs to exactly one convergence layer (configuration rule, see
//! `config::cla`); a TCPCL session opened by an unconfigured node is a neighbour for as long as
//! it lasts.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;

use bytes::Bytes;

use crate::messages::{SessionHandle, ToSession, ToUdp};

/// The convergence layer of a neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaKind {
    /// LTP over UDP (`[[span]]`).
    Ltp,
    /// TCPCL, v4 or v3 (`[[tcp_peer]]` or a session opened by the peer).
    Tcp,
    /// UDPCL (`[[udp_peer]]`).
    Udp,
    /// STCP (`[[stcp_peer]]`): the connection we open is a session in [`TcpRouter`].
    Stcp,
    /// A BIBE tunnel (`[[bibe_peer]]`): encapsulated by the agent thread itself
    /// (`crate::bibe_glue`).
    Bibe,
}

/// What the agent thread must do after routing a bundle to the TCPCL side.
pub(crate) enum TcpDispatch {
    /// Queued in a session (wake it) or waiting for one.
    Queued,
    /// The session's queue is full: retry later with the same bundle.
    Full,
}

/// The agent thread's view of TCPCL: live sessions per neighbour and bundles waiting for one.
/// STCP connections we open to `[[stcp_peer]]`s are sessions here too (same handle, same
/// results; they only send).
#[derive(Debug, Default)]
pub(crate) struct TcpRouter {
    sessions: HashMap<u64, Vec<Arc<SessionHandle>>>,
    /// Bundles for a neighbour whose link is up (contact plan) but that has no session yet.
    pending: HashMap<u64, VecDeque<(u64, bp::HopBundle)>>,
    /// Configured neighbours whose link the contact plan drives.
    planned: HashSet<u64>,
    /// Configured TCPCL neighbours.
    configured: HashSet<u64>,
}

impl TcpRouter {
    /// A router for the configured neighbours, `planned` being those the plan gates.
    pub(crate) fn new(configured: impl IntoIterator<Item = u64>, planned: &[u64]) -> Self {
        let configured: HashSet<u64> = configured.into_iter().collect();
        let planned = configured
            .iter()
            .copied()
            .filter(|p| planned.contains(p))
            .collect();
        Self {
            configured,
            planned,
            ..Self::default()
        }
    }

    /// True when `peer` is a TCPCL neighbour now (configured, or with a live session).
    pub(crate) fn knows(&self, peer: u64) -> bool {
        self.configured.contains(&peer) || self.sessions.contains_key(&peer)
    }

    /// True when the contact plan (not the session state) decides whether `peer`'s link is up.
    pub(crate) fn is_planned(&self, peer: u64) -> bool {
        self.planned.contains(&peer)
    }

    /// Hands a bundle to a session of `peer` (the oldest live one), or keeps it until one comes
    /// up. `Err` carries the tokens to report as failed at once.
    pub(crate) fn dispatch(
        &mut self,
        peer: u64,
        token: u64,
        bundle: bp::HopBundle,
    ) -> Result<TcpDispatch, u64> {
        loop {
            let Some(h) = self.sessions.get(&peer).and_then(|v| v.first()).cloned() else {
                self.pending
                    .entry(peer)
                    .or_default()
                    .push_back((token, bundle));
                return Ok(TcpDispatch::Queued);
            };
            match h.tx.try_send(ToSession::Send {
                token,
                bundle: bundle.clone(),
            }) {
                Ok(()) => {
                    h.wake();
                    return Ok(TcpDispatch::Queued);
                }
                Err(TrySendError::Full(_)) => return Ok(TcpDispatch::Full),
                Err(TrySendError::Disconnected(_)) => {
                    // The session is ending; its SessionDown will follow. Try another.
                    self.remove(peer, h.id);
                }
            }
        }
    }

    /// Registers a live session; returns true when it is the peer's first one. Bundles that
    /// waited for a session are handed to it (those that do not fit stay waiting).
    pub(crate) fn session_up(&mut self, peer: u64, handle: Arc<SessionHandle>) -> bool {
        let list = self.sessions.entry(peer).or_default();
        let first = list.is_empty();
        list.push(handle.clone());
        if let Some(q) = self.pending.get_mut(&peer) {
            while let Some((token, bundle)) = q.pop_front() {
                match handle.tx.try_send(ToSession::Send { token, bundle }) {
                    Ok(()) => {}
                    Err(TrySendError::Full(ToSession::Send { token, bundle }))
                    | Err(TrySendError::Disconnected(ToSession::Send { token, bundle })) => {
                        q.push_front((token, bundle));
                        break;
                    }
                    Err(_) => break,
                }
            }
            handle.wake();
        }
        first
    }

    /// Forgets a session; returns true when `peer` has no live session left.
    pub(crate) fn remove(&mut self, peer: u64, id: u64) -> bool {
        let Some(list) = self.sessions.get_mut(&peer) else {
            return true;
        };
        list.retain(|h| h.id != id);
        if list.is_empty() {
            self.sessions.remove(&peer);
            return true;
        }
        false
    }

    /// Takes the bundles waiting for `peer` (its link went down: they are re-forwarded).
    pub(crate) fn take_pending(&mut self, peer: u64) -> Vec<u64> {
        self.pending
            .remove(&peer)
            .map(|q| q.into_iter().map(|(t, _)| t).collect())
            .unwrap_or_default()
    }

    /// True when bundles wait for room in a live session's queue ([`TcpRouter::retry_pending`]
    /// must run again soon).
    pub(crate) fn has_waiting(&self) -> bool {
        self.pending
            .iter()
            .any(|(p, q)| !q.is_empty() && self.sessions.contains_key(p))
    }

    /// Retries bundles that wait for a live session's queue to have room.
    pub(crate) fn retry_pending(&mut self) {
        let peers: Vec<u64> = self
            .pending
            .iter()
            .filter(|(p, q)| !q.is_empty() && self.sessions.contains_key(p))
            .map(|(p, _)| *p)
            .collect();
        for p in peers {
            if let Some(h) = self.sessions.get(&p).and_then(|v| v.first()).cloned() {
                let Some(q) = self.pending.get_mut(&p) else {
                    continue;
                };
                let mut sent = false;
                while let Some((token, bundle)) = q.pop_front() {
                    match h.tx.try_send(ToSession::Send { token, bundle }) {
                        Ok(()) => sent = true,
                        Err(TrySendError::Full(ToSession::Send { token, bundle }))
                        | Err(TrySendError::Disconnected(ToSession::Send { token, bundle })) => {
                            q.push_front((token, bundle));
                            break;
                        }
                        Err(_) => break,
                    }
                }
                if sent {
                    h.wake();
                }
            }
        }
    }

    /// Wakes every live session thread (e.g. to read again after an ingress pause).
    pub(crate) fn wake_all(&self) {
        for h in self.sessions.values().flatten() {
            h.wake();
        }
    }

    /// Asks every session to end (node shutdown).
    pub(crate) fn close_all(&self) {
        for h in self.sessions.values().flatten() {
            let _ = h.tx.try_send(ToSession::Close);
            h.wake();
        }
    }
}

/// Queues a bundle for the UDPCL thread; `Err` gives it back when the queue is full.
pub(crate) fn dispatch_udp(
    tx: &SyncSender<ToUdp>,
    peer: u64,
    token: u64,
    bundle: Bytes,
) -> Result<(), Option<(u64, Bytes)>> {
    match tx.try_send(ToUdp::Item {
        peer,
        token,
        bundle,
    }) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(ToUdp::Item { token, bundle, .. })) => Err(Some((token, bundle))),
        Err(_) => Err(None),
    }
}
