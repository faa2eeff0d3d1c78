//! A virtual-time test network of agents joined by a fake in-memory convergence layer: each
//! `step` moves every bundle an agent offers for transmission into its neighbour's
//! `accept_from_cla` and reports the outcome back with `cla_result`. Included by the `agent_*`
//! test files with `#[path]`.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use bp::{Agent, AgentConfig, ClaOutcome, Delivery, MemoryStore, RxError, Store};
use bpv7::Eid;

/// A DTN time well after the epoch (2025), so creation timestamps are non-zero.
pub const T0: u64 = 800_000_000_000;

/// A delivered bundle as seen by the application of `node`.
#[derive(Debug, Clone)]
pub struct Got {
    pub node: u64,
    pub at: u64,
    pub delivery: Delivery,
}

pub struct Net<S: Store> {
    pub agents: BTreeMap<u64, Agent<S>>,
    pub now: u64,
    pub got: Vec<Got>,
    /// (from, to) pairs whose next transmissions fail at the CLA.
    pub fail_next: BTreeMap<(u64, u64), usize>,
    /// Nodes whose applications do not acknowledge deliveries.
    pub no_ack: BTreeSet<u64>,
    pub refusals: Vec<(u64, u64, String)>,
}

impl Net<MemoryStore> {
    /// Nodes with MemoryStores and `cfg(node)` configurations.
    pub fn memory(nodes: &[u64], cfg: impl Fn(u64) -> AgentConfig) -> Self {
        let mut agents = BTreeMap::new();
        for &n in nodes {
            let a = Agent::open(cfg(n), MemoryStore::new(), T0).expect("open");
            agents.insert(n, a);
        }
        Net::from_agents(agents)
    }
}

impl<S: Store> Net<S> {
    pub fn from_agents(agents: BTreeMap<u64, Agent<S>>) -> Self {
        Net {
            agents,
            now: T0,
            got: Vec::new(),
            fail_next: BTreeMap::new(),
            no_ack: BTreeSet::new(),
            refusals: Vec::new(),
        }
    }

    pub fn agent(&mut self, n: u64) -> &mut Agent<S> {
        self.agents.get_mut(&n).expect("node")
    }

    /// Brings the links between `a` and `b` up in both directions.
    pub fn connect(&mut self, a: u64, b: u64) {
        let now = self.now;
        self.agent(a).link_up(now, b, 1_000_000);
        self.agent(b).link_up(now, a, 1_000_000);
    }

    pub fn disconnect(&mut self, a: u64, b: u64) {
        let now = self.now;
        self.agent(a).link_down(now, b);
        self.agent(b).link_down(now, a);
    }

    /// Registers `eid` at node `n`.
    pub fn register(&mut self, n: u64, eid: &str) {
        let e: Eid = eid.parse().expect("eid");
        self.agent(n).register(e).expect("register");
    }

    /// One round: timeouts, then every node transmits what it can (at most 1000 bundles, and it
    /// stops at the first refusal so a full neighbour does not make it spin), then deliveries.
    /// Returns the number of bundles moved.
    pub fn step(&mut self) -> usize {
        let now = self.now;
        let nodes: Vec<u64> = self.agents.keys().copied().collect();
        for n in &nodes {
            let a = self.agent(*n);
            if a.poll_timeout().is_some_and(|t| t <= now) {
                a.handle_timeout(now).expect("timeout");
            }
        }
        let mut moved = 0;
        for &n in &nodes {
            for _ in 0..1000 {
                let Some(f) = self.agent(n).poll_transmit(now) else {
                    break;
                };
                let fail = self
                    .fail_next
                    .get_mut(&(n, f.neighbour))
                    .filter(|c| **c > 0)
                    .map(|c| *c -= 1)
                    .is_some();
                let outcome = if fail {
                    ClaOutcome::Failed
                } else {
                    match self.agents.get_mut(&f.neighbour) {
                        Some(peer) => match peer.accept_from_cla(now, Some(n), f.bundle.clone()) {
                            Ok(_) => ClaOutcome::Sent,
                            Err(e) => {
                                assert!(
                                    matches!(e, RxError::StoreFull { .. }),
                                    "unexpected refusal {e}"
                                );
                                self.refusals.push((n, f.neighbour, e.to_string()));
                                ClaOutcome::Failed
                            }
                        },
                        None => ClaOutcome::Failed,
                    }
                };
                self.agent(n)
                    .cla_result(now, f.key, outcome)
                    .expect("cla_result");
                if outcome == ClaOutcome::Failed {
                    break;
                }
                moved += 1;
            }
        }
        for &n in &nodes {
            while let Some(d) = self.agent(n).poll_delivery() {
                if !self.no_ack.contains(&n) {
                    self.agent(n).delivered(now, d.key).expect("delivered");
                }
                self.got.push(Got {
                    node: n,
                    at: now,
                    delivery: d,
                });
            }
        }
        moved
    }

    /// Steps every `dt` ms until `until` (inclusive).
    pub fn run_until(&mut self, until: u64, dt: u64) {
        while self.now <= until {
            self.step();
            self.now += dt;
        }
        self.now = until;
    }

    /// Payloads delivered at node `n`, in order.
    pub fn payloads_at(&self, n: u64) -> Vec<Vec<u8>> {
        self.got
            .iter()
            .filter(|g| g.node == n)
            .map(|g| g.delivery.payload.to_vec())
            .collect()
    }
}
