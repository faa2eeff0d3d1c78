//! The contact graph search as it was before lazy evaluation (every contact of a node evaluated
//! when the node is expanded, over a graph copied from the plan per call), kept as the test
//! oracle: the lazy search in `cgr.rs` must return exactly what this one returns — same route,
//! same hops and timings, same error and explored count — on any plan.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use super::cgr::{finish, transmit_window, BundleSpec, Exclusions, Hop, NoRoute, Route};
use crate::contact_plan::{ContactId, ContactPlan, NodeNum, PlannedContact};

/// The eager search's answer for `local → dest`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn eager_search(
    plan: &ContactPlan,
    local: NodeNum,
    dest: NodeNum,
    bundle: BundleSpec,
    excl: &Exclusions,
    suppressed: &BTreeSet<ContactId>,
    booked: &BTreeMap<ContactId, u64>,
    limit: usize,
) -> Result<Route, NoRoute> {
    let graph = Graph::new(plan);
    Search {
        graph: &graph,
        local,
        dest,
        bundle,
        excl,
        suppressed,
        booked,
        limit,
    }
    .run()
}

/// The contacts of a plan as search vertices: a snapshot borrowing the plan, with each node's
/// outgoing contacts as a contiguous run (the plan iterates in `(from, to, start)` order).
struct Graph<'p> {
    plan: &'p ContactPlan,
    contacts: Vec<&'p PlannedContact>,
    runs: BTreeMap<NodeNum, (usize, usize)>,
}

impl<'p> Graph<'p> {
    fn new(plan: &'p ContactPlan) -> Self {
        let contacts: Vec<&PlannedContact> = plan.contacts().collect();
        let mut runs = BTreeMap::new();
        let mut i = 0;
        while let Some(c) = contacts.get(i) {
            let from = c.from;
            let lo = i;
            while contacts.get(i).is_some_and(|c| c.from == from) {
                i += 1;
            }
            runs.insert(from, (lo, i));
        }
        Graph {
            plan,
            contacts,
            runs,
        }
    }

    fn from(&self, node: NodeNum) -> std::ops::Range<usize> {
        self.runs.get(&node).map_or(0..0, |&(lo, hi)| lo..hi)
    }
}

#[derive(Clone, Copy)]
struct Label {
    arrival: u64,
    hops: u32,
    pred: Option<usize>,
    tx_start: u64,
    tx_end: u64,
    owlt: u64,
    residual: u64,
}

struct Search<'a, 'p> {
    graph: &'a Graph<'p>,
    local: NodeNum,
    dest: NodeNum,
    bundle: BundleSpec,
    excl: &'a Exclusions,
    suppressed: &'a BTreeSet<ContactId>,
    booked: &'a BTreeMap<ContactId, u64>,
    limit: usize,
}

impl Search<'_, '_> {
    fn run(&self) -> Result<Route, NoRoute> {
        if self.dest == self.local {
            return Err(NoRoute::LocalDestination);
        }
        if self.excl.nodes.contains(&self.dest) {
            return Err(NoRoute::Unreachable);
        }
        let n = self.graph.contacts.len();
        let mut labels: Vec<Option<Label>> = vec![None; n];
        let mut settled = vec![false; n];
        let mut heap = BinaryHeap::new();
        for j in self.graph.from(self.local) {
            self.relax(j, self.bundle.now_ms, 1, None, &mut labels, &mut heap);
        }
        let mut explored = 0usize;
        // Nodes whose outgoing contacts have been relaxed. Contacts settle in (arrival, hops)
        // order and a contact's timing is non-decreasing in the ready time, so the first contact
        // settled into a node gives the best possible start from it; relaxing the node's contacts
        // again from a later arrival can never improve a label. This bounds relaxations by the
        // number of contacts instead of contacts × out-degree.
        let mut expanded: BTreeSet<NodeNum> = BTreeSet::new();
        expanded.insert(self.local);
        while let Some(Reverse((_, hops, i))) = heap.pop() {
            if settled.get(i).copied().unwrap_or(true) {
                continue;
            }
            if let Some(s) = settled.get_mut(i) {
                *s = true;
            }
            explored += 1;
            if explored > self.limit {
                return Err(NoRoute::WorkLimit {
                    explored: explored - 1,
                });
            }
            let (Some(c), Some(Some(label))) = (self.graph.contacts.get(i), labels.get(i).copied())
            else {
                continue;
            };
            if c.to == self.dest {
                return Ok(self.build(i, &labels));
            }
            if !expanded.insert(c.to) {
                continue;
            }
            for j in self.graph.from(c.to) {
                if !settled.get(j).copied().unwrap_or(true) {
                    self.relax(j, label.arrival, hops + 1, Some(i), &mut labels, &mut heap);
                }
            }
        }
        Err(NoRoute::Unreachable)
    }

    fn relax(
        &self,
        j: usize,
        ready: u64,
        hops: u32,
        pred: Option<usize>,
        labels: &mut [Option<Label>],
        heap: &mut BinaryHeap<Reverse<(u64, u32, usize)>>,
    ) {
        let Some(c) = self.graph.contacts.get(j) else {
            return;
        };
        if c.to == self.local
            || self.excl.nodes.contains(&c.to)
            || self.excl.contacts.contains(&c.id)
            || self.suppressed.contains(&c.id)
        {
            return;
        }
        let booked = self.booked.get(&c.id).copied().unwrap_or(0);
        let Some((tx_start, tx_end, residual)) =
            transmit_window(c, ready, booked, self.bundle.size_bytes)
        else {
            return;
        };
        let Some(owlt) = self.graph.plan.owlt_ms(c.from, c.to, tx_start) else {
            return;
        };
        let arrival = tx_end.saturating_add(owlt);
        if self.bundle.deadline_ms.is_some_and(|d| arrival > d) {
            return;
        }
        let Some(slot) = labels.get_mut(j) else {
            return;
        };
        if slot.is_some_and(|l| (l.arrival, l.hops) <= (arrival, hops)) {
            return;
        }
        *slot = Some(Label {
            arrival,
            hops,
            pred,
            tx_start,
            tx_end,
            owlt,
            residual,
        });
        heap.push(Reverse((arrival, hops, j)));
    }

    fn build(&self, last: usize, labels: &[Option<Label>]) -> Route {
        let mut chain = Vec::new();
        let mut cur = Some(last);
        while let Some(i) = cur {
            let (Some(c), Some(Some(l))) = (self.graph.contacts.get(i), labels.get(i)) else {
                break;
            };
            chain.push((*c, *l));
            cur = l.pred;
            if chain.len() > self.graph.contacts.len() {
                break; // cannot happen (labels form a tree), but never loop forever
            }
        }
        chain.reverse();
        let hops = chain
            .iter()
            .map(|(c, l)| Hop {
                contact: c.id,
                from: c.from,
                to: c.to,
                contact_start_ms: c.start_ms,
                contact_end_ms: c.end_ms,
                rate_bytes_per_s: c.rate_bytes_per_s,
                tx_start_ms: l.tx_start,
                tx_end_ms: l.tx_end,
                owlt_ms: l.owlt,
                arrival_ms: l.arrival,
            })
            .collect();
        let residual = chain.iter().map(|(_, l)| l.residual).min().unwrap_or(0);
        let confidence = chain.iter().map(|(c, _)| c.confidence).product();
        finish(self.dest, hops, self.bundle.now_ms, residual, confidence)
    }
}
