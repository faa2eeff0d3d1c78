//! Two nodes in virtual time, each an [`LtpCla`] with a BP agent, joined by a link with a fixed
//! one-way delay and a loss rule: the adapter driven exactly the way the node's threads drive it
//! (agent commands in, classified events out, blocks split and committed by the agent, outcomes
//! applied with [`Outcome::apply`]), without threads, sockets or clocks.
//!
//! The adapter's virtual-time tests, the runnable example (`examples/ltp_pair.rs`) and the
//! simulator's agreement test (the same sequence through `dtnkit sim` and through this pair must
//! give the same outcomes) use it. Processing costs nothing here: a block is committed and
//! confirmed the instant it arrives, so every timing follows from the delay, the rates and the
//! LTP timers.

use std::collections::BTreeMap;
use std::time::Duration;

use bp::{Agent, AgentConfig, MemoryStore};
use bytes::{Bytes, BytesMut};
use ltp::{EngineConfig, SpanConfig};

use crate::{LtpCla, LtpEvent, Outcome};

/// DTN time (ms) of virtual time zero.
pub const EPOCH_MS: u64 = 1_000_000;

/// One node: the adapter and the agent.
pub struct PairNode {
    /// Node number (also its LTP engine id).
    pub number: u64,
    /// The LTP adapter.
    pub cla: LtpCla,
    /// The BP agent with an in-memory store.
    pub agent: Agent<MemoryStore>,
}

/// What happened, in order: (virtual time, node, event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happened {
    /// Node `.1`'s agent handed the bundle with token `.2` to the adapter.
    Handed(Duration, u64, u64),
    /// An outcome reached node `.1`'s agent.
    Outcome(Duration, u64, Outcome),
    /// Node `.1` committed a block from its neighbour: bundles stored, confirmed or refused.
    Block {
        /// When.
        at: Duration,
        /// The receiving node.
        node: u64,
        /// Bundles the block held.
        bundles: usize,
        /// Bytes discarded after the last bundle.
        discarded: usize,
        /// Whether the block was confirmed (`false`: refused, the sender keeps it).
        confirmed: bool,
    },
    /// Node `.1` sent a datagram of `.3` bytes to its neighbour at `.0` (`.2`: lost on the link).
    Sent(Duration, u64, bool, usize),
}

/// A datagram loss rule: (send time, sending node, datagram) → lost.
pub type LossRule = Box<dyn FnMut(Duration, u64, &Bytes) -> bool>;

/// Two nodes, 1 and 2, and the link between them.
pub struct Pair {
    /// Node 1 and node 2.
    pub nodes: [PairNode; 2],
    /// Virtual time.
    pub now: Duration,
    /// One-way delay of the link (both directions).
    pub delay: Duration,
    /// Which datagrams the link loses.
    pub loss: LossRule,
    /// Everything that happened, in order.
    pub log: Vec<Happened>,
    inflight: BTreeMap<(Duration, u64), (usize, Bytes)>,
    seq: u64,
}

impl Pair {
    /// Nodes 1 and 2 with one span each (`span(remote)` builds it; FEC from `fec(remote)`),
    /// agents from `agent(number)`, the link up both ways, nothing lost.
    pub fn new(
        delay: Duration,
        span: impl Fn(u64) -> SpanConfig,
        fec: impl Fn(u64) -> Option<fec::FecConfig>,
        agent: impl Fn(u64) -> AgentConfig,
    ) -> Pair {
        let node = |number: u64, remote: u64| {
            let mut cla = LtpCla::new(EngineConfig::new(number), number);
            let mut s = span(remote);
            s.defer_final_report = true;
            cla.add_peer(remote, s, fec(remote))
                .expect("a valid FEC configuration");
            let mut a = Agent::open(agent(number), MemoryStore::new(), EPOCH_MS)
                .expect("an in-memory agent opens");
            a.link_up(EPOCH_MS, remote, 0);
            PairNode {
                number,
                cla,
                agent: a,
            }
        };
        Pair {
            nodes: [node(1, 2), node(2, 1)],
            now: Duration::ZERO,
            delay,
            loss: Box::new(|_, _, _| false),
            log: Vec::new(),
            inflight: BTreeMap::new(),
            seq: 0,
        }
    }

    /// DTN time (ms) of `now`.
    pub fn dtn_ms(&self) -> u64 {
        EPOCH_MS + self.now.as_millis() as u64
    }

    /// Node `n` (1 or 2).
    pub fn node(&mut self, n: u64) -> &mut PairNode {
        let i = usize::from(n != 1);
        &mut self.nodes[i]
    }

    /// Runs node `i` at `now`: the agent's timers and forwarding, then the adapter's timers,
    /// events, backlog and transmission — the stages of the node's agent and LTP threads.
    fn step(&mut self, i: usize) -> bool {
        let now = self.now;
        let ms = self.dtn_ms();
        let delay = self.delay;
        let Some(n) = self.nodes.get_mut(i) else {
            return false;
        };
        let mut moved = false;
        if n.agent.poll_timeout().is_some_and(|t| t <= ms) {
            let _ = n.agent.handle_timeout(ms);
        }
        while let Some(f) = n.agent.poll_transmit(ms) {
            moved = true;
            let token = f.key.as_token();
            self.log.push(Happened::Handed(now, n.number, token));
            n.cla.send(now, f.neighbour, token, f.bundle, true);
        }
        if n.cla.poll_timeout().is_some_and(|t| t <= now) {
            n.cla.handle_timeout(now);
        }
        while let Some(ev) = n.cla.poll_event(now) {
            moved = true;
            match ev {
                LtpEvent::Block(b) => {
                    let block = n.agent.split_block(ms, Some(b.peer), &b.data);
                    let (bundles, discarded) = (
                        block.bundles.len(),
                        block.discarded.as_ref().map_or(0, |d| d.bytes),
                    );
                    let v = n.agent.accept_blocks(ms, Some(b.peer), &[block]);
                    let confirmed = v.first().is_some_and(|v| v.confirm);
                    if let Some(s) = b.session {
                        n.cla.confirm(now, s, confirmed);
                    }
                    self.log.push(Happened::Block {
                        at: now,
                        node: n.number,
                        bundles,
                        discarded,
                        confirmed,
                    });
                }
                LtpEvent::Outcome(o) => {
                    let _ = o.apply(&mut n.agent, ms);
                    self.log.push(Happened::Outcome(now, n.number, o));
                }
            }
        }
        n.cla.flush_backlog(now);
        let mut head = Vec::new();
        while let Some(t) = n.cla.poll_transmit_vectored(now, &mut head) {
            moved = true;
            let mut dg = BytesMut::with_capacity(head.len() + t.payload.len());
            dg.extend_from_slice(&head);
            dg.extend_from_slice(&t.payload);
            head.clear();
            let dg = dg.freeze();
            let lost = (self.loss)(now, n.number, &dg);
            self.log.push(Happened::Sent(now, n.number, lost, dg.len()));
            if !lost {
                self.seq += 1;
                self.inflight.insert((now + delay, self.seq), (1 - i, dg));
            }
        }
        moved
    }

    /// Runs until nothing is left to do or `limit`.
    pub fn run(&mut self, limit: Duration) {
        // A timer that stays due without effect would spin: give up after this many rounds at
        // one instant.
        let mut rounds_at_now = 0u32;
        loop {
            while self.step(0) | self.step(1) {}
            let mut next = self.inflight.keys().next().map(|k| k.0);
            for n in &self.nodes {
                let agent = n
                    .agent
                    .poll_timeout()
                    .map(|t| Duration::from_millis(t.saturating_sub(EPOCH_MS)).max(self.now));
                for t in [n.cla.poll_timeout(), agent].into_iter().flatten() {
                    next = Some(next.map_or(t, |x: Duration| x.min(t)));
                }
            }
            let Some(t) = next else {
                return;
            };
            if t > limit {
                self.now = limit;
                return;
            }
            // Agent timers have millisecond resolution: never step backwards.
            if t <= self.now {
                rounds_at_now += 1;
                assert!(
                    rounds_at_now < 10_000,
                    "a timer stays due at {:?}",
                    self.now
                );
            } else {
                rounds_at_now = 0;
            }
            self.now = self.now.max(t);
            while let Some((&key, _)) = self.inflight.iter().next() {
                if key.0 > self.now {
                    break;
                }
                let Some((to, dg)) = self.inflight.remove(&key) else {
                    break;
                };
                if let Some(n) = self.nodes.get_mut(to) {
                    let _ = n.cla.handle_datagram(self.now, &dg, |_| true);
                }
            }
        }
    }

    /// The outcomes node `n` saw, with their times.
    pub fn outcomes(&self, n: u64) -> Vec<(Duration, Outcome)> {
        self.log
            .iter()
            .filter_map(|h| match h {
                Happened::Outcome(t, node, o) if *node == n => Some((*t, o.clone())),
                _ => None,
            })
            .collect()
    }

    /// When node `n`'s agent handed bundles to the adapter.
    pub fn handed(&self, n: u64) -> Vec<Duration> {
        self.log
            .iter()
            .filter_map(|h| match h {
                Happened::Handed(t, node, _) if *node == n => Some(*t),
                _ => None,
            })
            .collect()
    }

    /// When node `n` sent datagrams of at least `min_len` bytes (lost ones too).
    pub fn sends(&self, n: u64, min_len: usize) -> Vec<Duration> {
        self.log
            .iter()
            .filter_map(|h| match h {
                Happened::Sent(t, node, _, len) if *node == n && *len >= min_len => Some(*t),
                _ => None,
            })
            .collect()
    }
}
