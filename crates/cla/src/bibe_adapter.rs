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
//! **Pending custody is durable.** With each custody-pending bundle the adapter keeps a *note*
//! in the agent's store ([`bp::Agent::put_note`]: tunnel, transmission ID and the encapsulated
//! bundle's identity, until that bundle expires), written in the same transaction as the
//! encapsulating bundle and deleted with the release, refusal or expiry. A node restarted after
//! a crash reads the notes back ([`BibeCla::restore`]); when its agent forwards the same stored
//! bundle to the same tunnel again, the adapter sends it under its earlier transmission ID
//! ([`bibe::Engine::resend`]), so a custody signal the far end sent for the transmission before
//! the crash still releases it, and the far end sees a duplicate, not a new bundle. The
//! retransmission timers are not written: the restart itself retransmits (the agent forwards
//! every stored bundle again), and the timer runs from there. A note whose bundle is gone
//! (released just before the crash, before the delete was written) is never matched and is
//! forgotten at its expiry.
//!
//! The node and the simulator both drive this type; it calls only the agent's public API.

use std::collections::{BTreeMap, HashMap, VecDeque};

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
    /// The note of each custody-pending bundle, by token.
    notes: HashMap<u64, Vec<u8>>,
    /// Custody records of the previous run: (tunnel, encoded bundle identity) → transmission ID.
    restored: HashMap<(u64, Vec<u8>), u64>,
}

/// Names of this adapter's notes start with this.
const NOTE_PREFIX: &[u8] = b"bibe/";

fn note_name(tunnel: u64, transmission_id: u64, inner: &bpv7::BundleId) -> Vec<u8> {
    let id = bp::store::dedup_key(inner);
    let mut n = Vec::with_capacity(NOTE_PREFIX.len() + 16 + id.len());
    n.extend_from_slice(NOTE_PREFIX);
    n.extend_from_slice(&tunnel.to_be_bytes());
    n.extend_from_slice(&transmission_id.to_be_bytes());
    n.extend_from_slice(&id);
    n
}

/// (tunnel, transmission ID, encoded identity) of a note name; `None` for a name this adapter
/// did not write.
fn parse_note(name: &[u8]) -> Option<(u64, u64, Vec<u8>)> {
    let rest = name.strip_prefix(NOTE_PREFIX)?;
    let tunnel = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let id = u64::from_be_bytes(rest.get(8..16)?.try_into().ok()?);
    let inner = rest.get(16..)?;
    (id != 0 && !inner.is_empty()).then(|| (tunnel, id, inner.to_vec()))
}

impl BibeCla {
    /// An adapter for the node whose administrative endpoint is `cfg.local`, started at `now`.
    pub fn new(cfg: EngineConfig, now: DtnTime) -> Self {
        BibeCla {
            engine: Engine::new(cfg, now),
            outcomes: VecDeque::new(),
            stats: BibeClaStats::default(),
            notes: HashMap::new(),
            restored: HashMap::new(),
        }
    }

    /// Reads the custody records a previous run of this node left in the agent's store (see
    /// the module docs). Call once after opening the agent, before forwarding; returns how
    /// many were found.
    pub fn restore<S: Store>(&mut self, agent: &Agent<S>) -> usize {
        for (name, _) in agent.notes(NOTE_PREFIX) {
            if let Some((tunnel, id, inner)) = parse_note(&name) {
                self.restored.insert((tunnel, inner), id);
            }
        }
        self.restored.len()
    }

    /// Custody records of the previous run not matched yet.
    pub fn restored_pending(&self) -> usize {
        self.restored.len()
    }

    /// The previous run's transmission ID of the bundle `f` forwards to a tunnel, if any.
    fn resumable(&mut self, f: &Forward) -> Option<u64> {
        if self.restored.is_empty() {
            return None;
        }
        let (b, _) = bpv7::Bundle::decode_prefix(&f.bundle).ok()?;
        self.restored
            .remove(&(f.neighbour, bp::store::dedup_key(&b.id())))
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
        self.engine.raise_creation_cursor(agent.creation_cursor());
        let resumed = self.resumable(f);
        let sent = match resumed {
            Some(id) => match self
                .engine
                .resend(now, f.neighbour, token, f.bundle.clone(), id)
            {
                Err(bibe::SendError::DuplicateId(_)) => {
                    self.engine.send(now, f.neighbour, token, f.bundle.clone())
                }
                r => r,
            },
            None => self.engine.send(now, f.neighbour, token, f.bundle.clone()),
        };
        let enc: Encapsulated = match sent {
            Ok(e) => e,
            Err(bibe::SendError::CustodyFull { .. }) => {
                if let Some(id) = resumed {
                    // Offered again later: keep the record for then.
                    if let Ok((b, _)) = bpv7::Bundle::decode_prefix(&f.bundle) {
                        self.restored
                            .insert((f.neighbour, bp::store::dedup_key(&b.id())), id);
                    }
                }
                return BibeSend::Full;
            }
            Err(_) => return BibeSend::Rejected(ClaOutcome::Failed),
        };
        if enc.transmission_id != 0 {
            let name = note_name(f.neighbour, enc.transmission_id, &enc.inner_id);
            // Written with the encapsulating bundle's commit just below; a resumed record is
            // on disk already.
            if resumed != Some(enc.transmission_id) {
                let until = enc
                    .expires_at
                    .unwrap_or_else(|| now.saturating_add(86_400_000));
                agent.put_note(&name, until);
            }
            self.notes.insert(token, name);
        }
        agent.raise_creation_cursor(self.engine.creation_cursor());
        match agent.accept_from_cla(now, None, enc.bundle) {
            Ok(Accepted::Stored { .. }) => {
                if enc.transmission_id == 0 {
                    self.outcomes.push_back((token, ClaOutcome::Sent));
                }
                BibeSend::Taken
            }
            // Taken for a duplicate (or consumed, expired...): not stored, so not sent.
            // Timestamps from one sequence rule out the duplicate.
            r => {
                self.engine.cancel(token);
                if let Some(name) = self.notes.remove(&token) {
                    agent.delete_note(&name);
                }
                self.stats.outbound_not_stored += 1;
                BibeSend::Rejected(match r {
                    Err(e) if e.is_transient() => ClaOutcome::Refused,
                    _ => ClaOutcome::Failed,
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
        self.engine.raise_creation_cursor(agent.creation_cursor());
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
            self.engine.raise_creation_cursor(agent.creation_cursor());
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
            // The engine's bundles (signals, retransmissions) took timestamps after the
            // agent's last one: the agent's own come after them.
            agent.raise_creation_cursor(self.engine.creation_cursor());
            while let Some(o) = self.engine.poll_transmit() {
                progressed = true;
                if !matches!(
                    agent.accept_from_cla(now, None, o.bundle),
                    Ok(Accepted::Stored { .. })
                ) {
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
        if let Event::Released { token, .. }
        | Event::Refused { token, .. }
        | Event::Expired { token, .. } = &ev
        {
            if let Some(name) = self.notes.remove(token) {
                agent.delete_note(&name);
            }
        }
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
