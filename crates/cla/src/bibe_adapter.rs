//! [`BibeCla`]: BIBE tunnels between the BP agent and the `bibe` engine.
//!
//! A tunnel is a neighbour of the agent under a node number of its own (a *virtual neighbour*,
//! `[[bibe_peer]] peer` in the node): routes send bundles "via" it, and the agent's
//! [`bp::Forward`]s for it come here instead of to a socket. The adapter encapsulates each one
//! and hands the encapsulating bundle straight back to the agent
//! ([`bp::Agent::accept_from_cla`] with no previous hop), which stores it and forwards it to
//! the tunnel's far end over whatever the routes say: the store commit comes before anything
//! else, so the encapsulating bundle is as durable as any bundle this node originates.
//!
//! Administrative records that arrive for this node ([`bp::Agent::poll_admin`]) are offered to
//! [`BibeCla::handle_admin`] first. A BPDU is decapsulated and its bundle offered to the agent
//! as if a neighbour (the encapsulating bundle's source node) had sent it; the agent's answer
//! is the custody decision:
//!
//! | agent answer                                   | custody signal              |
//! |------------------------------------------------|-----------------------------|
//! | `Stored` (committed), `Consumed`               | accepted                    |
//! | `Duplicate`                                    | refused: redundant          |
//! | `StoreFull`, store failure, too large          | refused: depleted storage   |
//! | malformed, failed security                     | refused: block unintelligible |
//! | `Expired`                                      | refused: no timely contact  |
//! | `HopLimitExceeded`                             | refused: no known route     |
//!
//! On the sending side, the engine's verdicts become convergence-layer outcomes for the driver
//! to apply ([`BibeCla::poll_outcome`]): released → `Sent` (the agent deletes its copy),
//! refused for `DepletedStorage` → `Refused` (kept, tunnel backed off), any other refusal or the
//! bundle's expiry → `Failed` (routed again; an expired bundle is then discarded by the agent).
//! Without custody a bundle is `Sent` as soon as its encapsulating bundle is stored.
//!
//! The node and the simulator both drive this type; it calls only the agent's public API.

use std::collections::{BTreeMap, VecDeque};

use bibe::{Disposition, Encapsulated, Engine, EngineConfig, Event, RefusalReason, TunnelConfig};
use bp::{Accepted, AdminNotice, Agent, ClaOutcome, DtnTime, Forward, RxError, Store};
use bpv7::Eid;

/// What [`BibeCla::send`] did with a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BibeSend {
    /// Encapsulated and stored; its outcome comes later from [`BibeCla::poll_outcome`] (at once
    /// without custody, on a custody signal or expiry with it).
    Taken,
    /// Custody of too many bundles is pending: keep the bundle and offer it again later.
    Full,
    /// It cannot be sent through this tunnel now: report the outcome (`Failed` or, when this
    /// node's store is full, `Refused`) at once.
    Rejected(ClaOutcome),
}

/// Counters of the adapter, beyond the engine's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BibeClaStats {
    /// Encapsulating bundles (first transmissions and retransmissions) and custody signals this
    /// node's store refused (full or failed). A lost BPDU is retransmitted on its timer; a lost
    /// signal is recovered by the peer's retransmission (answered `Redundant`).
    pub outbound_not_stored: u64,
    /// BIBE records that did not decode.
    pub malformed_records: u64,
}

/// BIBE tunnels and the decapsulating side of one node (see the module docs).
#[derive(Debug)]
pub struct BibeCla {
    engine: Engine,
    outcomes: VecDeque<(u64, ClaOutcome)>,
    stats: BibeClaStats,
}

impl BibeCla {
    /// An adapter for the node whose administrative endpoint is `cfg.local`, started at `now`.
    pub fn new(cfg: EngineConfig, now: DtnTime) -> Self {
        BibeCla {
            engine: Engine::new(cfg, now),
            outcomes: VecDeque::new(),
            stats: BibeClaStats::default(),
        }
    }

    /// Adds tunnel `id` (the virtual neighbour's node number) and brings its link up in the
    /// agent, so that bundles routed via `id` are offered to [`BibeCla::send`].
    pub fn add_tunnel<S: Store>(
        &mut self,
        now: DtnTime,
        agent: &mut Agent<S>,
        id: u64,
        tunnel: TunnelConfig,
    ) {
        self.engine.add_tunnel(id, tunnel);
        agent.link_up(now, id, 0);
    }

    /// True when `id` is one of the tunnels.
    pub fn is_tunnel(&self, id: u64) -> bool {
        self.engine.tunnel(id).is_some()
    }

    /// The engine (counters, pending custody, configuration).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The adapter's own counters.
    pub fn stats(&self) -> &BibeClaStats {
        &self.stats
    }

    /// Encapsulates a bundle the agent forwards to a tunnel and stores the encapsulating
    /// bundle. See [`BibeSend`].
    pub fn send<S: Store>(&mut self, now: DtnTime, agent: &mut Agent<S>, f: &Forward) -> BibeSend {
        let token = f.key.as_token();
        let enc: Encapsulated = match self.engine.send(now, f.neighbour, token, f.bundle.clone()) {
            Ok(e) => e,
            Err(bibe::SendError::CustodyFull { .. }) => return BibeSend::Full,
            Err(_) => return BibeSend::Rejected(ClaOutcome::Failed),
        };
        match agent.accept_from_cla(now, None, enc.bundle) {
            Ok(_) => {
                if enc.transmission_id == 0 {
                    self.outcomes.push_back((token, ClaOutcome::Sent));
                }
                BibeSend::Taken
            }
            Err(e) => {
                self.engine.cancel(token);
                self.stats.outbound_not_stored += 1;
                BibeSend::Rejected(if e.is_transient() {
                    ClaOutcome::Refused
                } else {
                    ClaOutcome::Failed
                })
            }
        }
    }

    /// Offers an administrative record that arrived for this node. True when it was a BIBE
    /// record (handled or counted as malformed); false for anything else (a status report),
    /// which the caller handles as before.
    pub fn handle_admin<S: Store>(
        &mut self,
        now: DtnTime,
        agent: &mut Agent<S>,
        notice: &AdminNotice,
    ) -> bool {
        match self.engine.handle_record(now, &notice.from, &notice.record) {
            Ok(bibe::Handled::NotBibe) => return false,
            Ok(_) => {}
            Err(_) => {
                self.stats.malformed_records += 1;
                return true;
            }
        }
        self.drain(now, agent);
        true
    }

    /// Runs the engine's timers due at `now` (retransmissions, signals) and stores what they
    /// produced.
    pub fn handle_timeout<S: Store>(&mut self, now: DtnTime, agent: &mut Agent<S>) {
        if self.engine.poll_timeout().is_some_and(|t| t <= now) {
            self.engine.handle_timeout(now);
        }
        self.drain(now, agent);
    }

    /// The next DTN time at which [`BibeCla::handle_timeout`] has work.
    pub fn poll_timeout(&self) -> Option<DtnTime> {
        self.engine.poll_timeout()
    }

    /// The next outcome to report for a bundle handed to [`BibeCla::send`] (its token and
    /// what to tell [`bp::Agent::cla_result`]).
    pub fn poll_outcome(&mut self) -> Option<(u64, ClaOutcome)> {
        self.outcomes.pop_front()
    }

    /// True when outcomes wait for [`BibeCla::poll_outcome`].
    pub fn has_outcomes(&self) -> bool {
        !self.outcomes.is_empty()
    }

    /// Stores the engine's outbound bundles and turns its events into agent calls and
    /// outcomes.
    fn drain<S: Store>(&mut self, now: DtnTime, agent: &mut Agent<S>) {
        loop {
            let mut progressed = false;
            while let Some(o) = self.engine.poll_transmit() {
                progressed = true;
                if agent.accept_from_cla(now, None, o.bundle).is_err() {
                    self.stats.outbound_not_stored += 1;
                }
            }
            while let Some(ev) = self.engine.poll_event() {
                progressed = true;
                self.on_event(now, agent, ev);
            }
            if !progressed {
                return;
            }
        }
    }

    fn on_event<S: Store>(&mut self, now: DtnTime, agent: &mut Agent<S>, ev: Event) {
        match ev {
            Event::Released { token, .. } => self.outcomes.push_back((token, ClaOutcome::Sent)),
            Event::Refused { token, reason, .. } => {
                let outcome = if reason == RefusalReason::DepletedStorage {
                    ClaOutcome::Refused
                } else {
                    ClaOutcome::Failed
                };
                self.outcomes.push_back((token, outcome));
            }
            Event::Expired { token, .. } => self.outcomes.push_back((token, ClaOutcome::Failed)),
            Event::Decapsulated {
                from,
                bundle,
                custody,
            } => {
                let decision = decide(agent.accept_from_cla(now, node_of(&from), bundle));
                if let Some(req) = custody {
                    self.engine.custody_decision(now, &req, decision);
                }
            }
        }
    }

    /// Pending custody per tunnel (bundles), for status.
    pub fn pending_per_tunnel(&self) -> BTreeMap<u64, u64> {
        self.engine.pending_per_tunnel()
    }
}

/// The custody decision for the agent's answer to a decapsulated bundle (table in the module
/// docs).
pub fn decide(r: Result<Accepted, RxError>) -> Disposition {
    match r {
        Ok(Accepted::Stored { .. } | Accepted::Consumed(_)) => Disposition::Accepted,
        Ok(Accepted::Duplicate(_)) => Disposition::Refused(RefusalReason::Redundant),
        Ok(Accepted::Expired(_)) => Disposition::Refused(RefusalReason::NoTimelyContact),
        Ok(Accepted::HopLimitExceeded(_)) => Disposition::Refused(RefusalReason::NoKnownRoute),
        Ok(Accepted::SecurityFailed { .. }) | Err(RxError::Malformed(_)) => {
            Disposition::Refused(RefusalReason::BlockUnintelligible)
        }
        // Store full or failed, too large, or any refusal added to the agent later: the
        // sender keeps the bundle and routes it again.
        Err(_) => Disposition::Refused(RefusalReason::DepletedStorage),
    }
}

fn node_of(eid: &Eid) -> Option<u64> {
    match eid {
        Eid::Ipn { node, .. } => Some(*node),
        _ => None,
    }
}

/// Encapsulating bundles carry this node's administrative endpoint as source; a convenience
/// for drivers building an [`EngineConfig`].
pub fn engine_config(node: u64) -> EngineConfig {
    EngineConfig::new(Eid::ipn(node, 0))
}
