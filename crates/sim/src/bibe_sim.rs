//! BIBE tunnels in the simulator (`[node.bibe]`, `[[node.bibe_peer]]`, `docs/bibe.md`): the
//! simulated node's side of `cla::BibeCla`, the adapter a real node's agent thread drives too.
//!
//! As on a real node, a tunnel is a virtual neighbour of the agent: bundles the routes send
//! "via" it are encapsulated by the adapter, which stores the encapsulating bundle through the
//! agent; the agent then forwards that bundle over the scenario's LTP links like any other.
//! Administrative records that arrive for the node go to the adapter; its custody timers and
//! signal aggregation run on the virtual clock; its verdicts (released, refused, expired) are
//! reported to the agent with `cla_result`.
//!
//! The one simulator-only setting is `bpdu_colour`: encapsulating bundles and custody signals
//! leave in red LTP blocks by default; `"green"` sends them unacknowledged, the case custody
//! transfer exists for (a link that loses what it carries without telling anyone).

use std::collections::BTreeMap;

use bibe::settings::{EngineSection, TunnelSection};
use bp::{Agent, ClaOutcome, Forward, MemoryStore};
use bpv7::{Bundle, Eid};
use cla::{BibeCla, BibeSend};
use serde::Deserialize;

use crate::scenario::{invalid, Colour, NodeSection, ScenarioError};

/// `[node.bibe]`: the node decapsulates BPDUs addressed to it (and, with `[[node.bibe_peer]]`,
/// encapsulates). The keys are a real node's `[bibe]` ([`bibe::settings::EngineSection`], read by the
/// same code) plus `bpdu_colour`.
#[derive(Debug, Clone, Default)]
pub struct BibeSection {
    /// The engine's settings, as a real node reads them.
    pub engine: EngineSection,
    /// LTP colour of encapsulating bundles and custody signals this node sends (default red).
    pub bpdu_colour: Colour,
}

impl<'de> Deserialize<'de> for BibeSection {
    /// `bpdu_colour` is taken out, and the other keys go to the node's section type, which refuses
    /// unknown ones.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut t = toml::Table::deserialize(d)?;
        let bpdu_colour = match t.remove("bpdu_colour") {
            Some(v) => v
                .try_into::<Colour>()
                .map_err(|e| D::Error::custom(format!("bpdu_colour: {}", e.message())))?,
            None => Colour::Red,
        };
        let engine = toml::Value::Table(t)
            .try_into::<EngineSection>()
            .map_err(|e| D::Error::custom(e.message()))?;
        Ok(BibeSection {
            engine,
            bpdu_colour,
        })
    }
}

/// `[[node.bibe_peer]]`: a tunnel, named by routes as neighbour `peer`; the keys of a real node's
/// `[[bibe_peer]]`.
pub type BibePeerSection = TunnelSection;

/// Checks node `i`'s BIBE sections (`all`: every node number of the scenario; `linked`: the
/// node's neighbours over `[[link]]`s).
pub(crate) fn validate(
    i: usize,
    n: &NodeSection,
    all: &[u64],
    linked: &[u64],
    agent_layer: bool,
) -> Result<(), ScenarioError> {
    if (n.bibe.is_some() || !n.bibe_peers.is_empty()) && !agent_layer {
        return Err(invalid(
            format!("node[{i}].bibe"),
            "bundle_layer = \"static\"",
            "sim.bundle_layer = \"agent\" (BIBE runs on the BP agent)",
        ));
    }
    if let Some(b) = &n.bibe {
        b.engine
            .check()
            .map_err(|e| invalid(format!("node[{i}].bibe.{}", e.field), e.value, &e.expected))?;
    }
    for (k, p) in n.bibe_peers.iter().enumerate() {
        let f = |name: &str| format!("node[{i}].bibe_peer[{k}].{name}");
        if p.peer == 0
            || p.peer == n.number
            || all.contains(&p.peer)
            || linked.contains(&p.peer)
            || n.bibe_peers[..k].iter().any(|q| q.peer == p.peer)
        {
            return Err(invalid(
                f("peer"),
                p.peer,
                "a virtual neighbour number used by no [[node]] and no other bibe_peer of this node",
            ));
        }
        let far = match p.endpoint.parse::<Eid>() {
            Ok(Eid::Ipn { node, .. }) if node != n.number && node != p.peer => node,
            _ => {
                return Err(invalid(
                    f("endpoint"),
                    format!("{:?}", p.endpoint),
                    "the ipn administrative endpoint of another node, \"ipn:N.0\"",
                ))
            }
        };
        if n.routes.iter().any(|r| r.dest == far && r.via == p.peer) {
            return Err(invalid(
                f("endpoint"),
                format!("{:?}", p.endpoint),
                "a far end whose own node is not routed through the tunnel (its BPDUs would loop)",
            ));
        }
        p.check_timers()
            .map_err(|e| invalid(f(e.field), e.value, &e.expected))?;
    }
    Ok(())
}

/// One simulated node's BIBE: the adapter, and a bundle the adapter could not take yet.
#[derive(Debug)]
pub(crate) struct SimBibe {
    cla: BibeCla,
    /// A bundle for a tunnel whose custody table was full: offered again before any other.
    held: Option<Forward>,
    green: bool,
    local: Eid,
}

/// What [`SimBibe::offer`] did with a bundle the agent forwards.
pub(crate) enum Offer {
    /// Not for a tunnel: the caller hands it to LTP.
    NotTunnel(Forward),
    /// Taken (encapsulated, or reported failed to the agent).
    Taken,
    /// Kept for later: the custody table is full; stop taking bundles from the agent for now.
    Held,
}

impl SimBibe {
    /// The node's BIBE, or `None` when its scenario section has none; brings every tunnel's
    /// link up in the agent.
    pub(crate) fn build(n: &NodeSection, agent: &mut Agent<MemoryStore>, now: u64) -> Option<Self> {
        if n.bibe.is_none() && n.bibe_peers.is_empty() {
            return None;
        }
        let s = n.bibe.clone().unwrap_or_default();
        let local = Eid::ipn(n.number, 0);
        let mut cla = BibeCla::new(s.engine.engine_config(local.clone()), now);
        for p in &n.bibe_peers {
            let Ok(endpoint) = p.endpoint.parse::<Eid>() else {
                continue; // refused by `validate`
            };
            cla.add_tunnel(now, agent, p.peer, p.tunnel_config(endpoint));
        }
        cla.restore(agent);
        Some(SimBibe {
            cla,
            held: None,
            green: s.bpdu_colour == Colour::Green,
            local,
        })
    }

    /// Offers a bundle the agent forwards.
    pub(crate) fn offer(&mut self, now: u64, agent: &mut Agent<MemoryStore>, f: Forward) -> Offer {
        if !self.cla.is_tunnel(f.neighbour) {
            return Offer::NotTunnel(f);
        }
        match self.cla.send(now, agent, &f) {
            BibeSend::Taken => Offer::Taken,
            BibeSend::Full | BibeSend::Rejected(ClaOutcome::Refused) => {
                self.held = Some(f);
                Offer::Held
            }
            BibeSend::Rejected(o) => {
                let _ = agent.cla_result(now, f.key, o);
                Offer::Taken
            }
        }
    }

    /// Offers the held bundle again. False while it is still held (take nothing new then).
    pub(crate) fn retry_held(&mut self, now: u64, agent: &mut Agent<MemoryStore>) -> bool {
        let Some(f) = self.held.take() else {
            return true;
        };
        !matches!(self.offer(now, agent, f), Offer::Held)
    }

    /// Administrative records for this node, due timers and verdicts. True when anything
    /// happened (the agent may have bundles to forward).
    pub(crate) fn service(&mut self, now: u64, agent: &mut Agent<MemoryStore>) -> bool {
        let mut progress = false;
        while let Some(n) = agent.poll_admin() {
            // Anything else (status reports) has no reader in the simulator.
            progress |= self.cla.handle_admin(now, agent, &n);
        }
        if self.cla.poll_timeout().is_some_and(|t| t <= now) {
            self.cla.handle_timeout(now, agent);
            progress = true;
        }
        while let Some((token, outcome)) = self.cla.poll_outcome() {
            progress = true;
            let _ = agent.cla_result(now, bp::BundleKey::from_token(token), outcome);
        }
        progress
    }

    /// The next DTN time the adapter has work.
    pub(crate) fn poll_timeout(&self) -> Option<u64> {
        self.cla.poll_timeout()
    }

    /// True when no custody is pending and nothing is held.
    pub(crate) fn is_quiet(&self) -> bool {
        self.held.is_none() && self.cla.engine().pending_custody().0 == 0
    }

    /// True when `bundle` is one of this node's BIBE records and they leave green.
    pub(crate) fn sends_green(&self, bundle: &bytes::Bytes) -> bool {
        self.green
            && Bundle::decode_prefix(bundle).is_ok_and(|(b, _)| {
                b.primary().source == self.local
                    && b.primary().flags.contains(bpv7::BundleFlags::ADMIN_RECORD)
            })
    }
}

/// What a test or a report reads of a node's BIBE.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BibeReport {
    /// The engine's counters.
    pub counters: bibe::BibeCounters,
    /// Bundles and bytes whose custody is pending now.
    pub pending: (usize, u64),
    /// Pending custody per tunnel.
    pub pending_per_tunnel: BTreeMap<u64, u64>,
    /// Outbound BIBE bundles this node's store refused.
    pub outbound_not_stored: u64,
}

impl SimBibe {
    pub(crate) fn report(&self) -> BibeReport {
        BibeReport {
            counters: self.cla.engine().counters().clone(),
            pending: self.cla.engine().pending_custody(),
            pending_per_tunnel: self.cla.pending_per_tunnel(),
            outbound_not_stored: self.cla.stats().outbound_not_stored,
        }
    }
}
