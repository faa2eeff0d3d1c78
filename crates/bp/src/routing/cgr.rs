//! Contact graph routing (CGR) in the style of CCSDS SABR (734.3-B-1).
//!
//! The contact graph has one vertex per contact; a bundle at node `u` at time `t` can continue on
//! any contact leaving `u` that can still carry it. A Dijkstra search over contacts, keyed on the
//! bundle's projected arrival time, finds the earliest-delivery route from the local node to a
//! destination. Per contact `c` entered when the bundle is ready at `ready`:
//!
//! - bytes already booked on `c` ([`Cgr::book`]) are queued ahead of the bundle and occupy `c`
//!   from its start, so transmission starts at `max(ready, c.start, c.start + booked/rate)`;
//! - the bundle's last byte leaves at `tx_end = tx_start + size/rate`, which must be `<= c.end`
//!   (so `c` is only usable while its residual volume can carry the whole bundle);
//! - the last byte arrives at `tx_end + OWLT`, OWLT taken from the range in effect at `tx_start`
//!   (ION's symmetric rule, [`ContactPlan::owlt_ms`]); a contact with no range is not usable.
//!
//! This arrival function is non-decreasing in `ready`, which is what makes Dijkstra exact: the
//! result equals a brute-force search over all simple paths (checked by a property test).
//!
//! Ties are broken deterministically: earliest arrival, then fewer hops, then plan order of the
//! contacts `(from, to, start)`. Work is bounded by [`CgrLimits`].
//!
//! Alternate routes follow SABR: after a route is found its *limiting contact* (the one ending
//! first) is suppressed and the search repeated ([`Cgr::routes`]). [`Cgr::route`] keeps such a
//! route list per destination, re-projects it for each bundle (size, current bookings, time) and
//! recomputes when no cached route fits or the plan changed ([`ContactPlan::generation`]).

use std::cmp::{max, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use crate::contact_plan::{Contact, ContactId, ContactPlan, NodeNum, PlannedContact};

/// The bundle being routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleSpec {
    /// Size to carry in bytes (what contact volume must accommodate).
    pub size_bytes: u64,
    /// When the bundle is ready to leave the local node, ms relative to the plan epoch.
    pub now_ms: u64,
    /// Latest acceptable arrival (e.g. from the bundle lifetime), plan-relative ms.
    pub deadline_ms: Option<u64>,
}

/// Nodes and contacts a search must avoid, e.g. the node a bundle came from, or contacts that
/// just failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclusions {
    /// Nodes not to route through (nor to, if the destination is excluded).
    pub nodes: BTreeSet<NodeNum>,
    /// Contacts not to use.
    pub contacts: BTreeSet<ContactId>,
}

impl Exclusions {
    /// Whether nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.contacts.is_empty()
    }
}

/// Bounds on the work of one routing call, so a large or adversarial plan cannot stall the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgrLimits {
    /// Contacts settled by one Dijkstra search before giving up with [`NoRoute::WorkLimit`].
    pub max_contacts_explored: usize,
    /// Routes in a SABR route list ([`Cgr::routes`], and the per-destination cache).
    pub max_routes: usize,
    /// Destinations whose route lists are cached; the lowest-numbered is evicted when full.
    pub max_cached_destinations: usize,
}

impl Default for CgrLimits {
    fn default() -> Self {
        CgrLimits {
            max_contacts_explored: 100_000,
            max_routes: 8,
            max_cached_destinations: 1024,
        }
    }
}

/// Why no route was returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoRoute {
    /// The destination is the local node: deliver, don't forward.
    #[error("the destination is the local node")]
    LocalDestination,
    /// No sequence of contacts can deliver the bundle (in time, with the volume left).
    #[error("no contact sequence reaches the destination")]
    Unreachable,
    /// The search hit [`CgrLimits::max_contacts_explored`].
    #[error("route search stopped after exploring {explored} contacts")]
    WorkLimit {
        /// Contacts settled before stopping.
        explored: usize,
    },
}

/// One contact of a route, with the bundle's projected timing on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// The contact used.
    pub contact: ContactId,
    /// Sender of this hop.
    pub from: NodeNum,
    /// Receiver of this hop.
    pub to: NodeNum,
    /// Contact start (plan ms).
    pub contact_start_ms: u64,
    /// Contact end (plan ms).
    pub contact_end_ms: u64,
    /// Contact rate (bytes/s).
    pub rate_bytes_per_s: u64,
    /// When the bundle's first byte is sent on this contact.
    pub tx_start_ms: u64,
    /// When its last byte is sent.
    pub tx_end_ms: u64,
    /// OWLT of this hop.
    pub owlt_ms: u64,
    /// When the last byte reaches `to` (`tx_end_ms + owlt_ms`).
    pub arrival_ms: u64,
}

/// A route: the contacts a bundle would take, first one giving the next hop.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Final destination.
    pub dest: NodeNum,
    /// Neighbour to forward to (the `to` of the first contact).
    pub next_hop: NodeNum,
    /// The contacts in order (never empty).
    pub hops: Vec<Hop>,
    /// Projected arrival of the bundle's last byte at `dest` (bundle size and bookings included).
    pub arrival_ms: u64,
    /// SABR's best-case delivery time: arrival of the first bit on these contacts ignoring bundle
    /// size and other traffic (each hop: `max(ready, contact start) + OWLT`).
    pub best_case_delivery_ms: u64,
    /// Bytes each hop could still send from the projected transmission start to contact end,
    /// minimised over hops: the largest bundle this route could carry at about these times.
    pub volume_limit_bytes: u64,
    /// Product of the contacts' confidences.
    pub confidence: f64,
    /// Earliest contact end on the route: after it the route is unusable.
    pub termination_ms: u64,
}

impl Route {
    /// The contact to the next hop.
    pub fn first_contact(&self) -> Option<ContactId> {
        self.hops.first().map(|h| h.contact)
    }

    /// The contact that ends first (ties: the earlier hop); SABR suppresses it to find the next
    /// alternative route.
    pub fn limiting_contact(&self) -> Option<ContactId> {
        self.hops
            .iter()
            .enumerate()
            .min_by_key(|(i, h)| (h.contact_end_ms, *i))
            .map(|(_, h)| h.contact)
    }

    /// The node sequence `local, hop1, ..., dest`.
    pub fn nodes(&self) -> Vec<NodeNum> {
        let mut v: Vec<NodeNum> = self.hops.first().map(|h| h.from).into_iter().collect();
        v.extend(self.hops.iter().map(|h| h.to));
        v
    }
}

/// When a contact can carry `size` bytes for a bundle ready at `ready`, given `booked` bytes
/// queued ahead: `(tx_start_ms, tx_end_ms, residual_bytes)` or `None` if it cannot.
///
/// Computed exactly in units of `ms × rate` (u128) so that a bundle that exactly fills a contact
/// fits; overflow saturates, which can only make a contact look full (conservative).
fn transmit_window(c: &Contact, ready: u64, booked: u64, size: u64) -> Option<(u64, u64, u64)> {
    let rate = u128::from(c.rate_bytes_per_s);
    if rate == 0 {
        return None;
    }
    let end_u = u128::from(c.end_ms).saturating_mul(rate);
    let avail_u = u128::from(max(ready, c.start_ms)).saturating_mul(rate);
    let backlog_u = u128::from(c.start_ms)
        .saturating_mul(rate)
        .saturating_add(u128::from(booked).saturating_mul(1000));
    let start_u = max(avail_u, backlog_u);
    let tx_end_u = start_u.saturating_add(u128::from(size).saturating_mul(1000));
    if start_u >= end_u || tx_end_u > end_u {
        return None;
    }
    let to_ms = |u: u128| u64::try_from(u.div_ceil(rate)).unwrap_or(u64::MAX);
    let residual = u64::try_from((end_u - start_u) / 1000).unwrap_or(u64::MAX);
    Some((to_ms(start_u), to_ms(tx_end_u), residual))
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

/// Assembles a route from its hops, deriving the summary fields.
fn finish(
    dest: NodeNum,
    hops: Vec<Hop>,
    now: u64,
    volume_limit_bytes: u64,
    confidence: f64,
) -> Route {
    let mut best = now;
    for h in &hops {
        best = max(best, h.contact_start_ms).saturating_add(h.owlt_ms);
    }
    Route {
        dest,
        next_hop: hops.first().map_or(0, |h| h.to),
        arrival_ms: hops.last().map_or(now, |h| h.arrival_ms),
        best_case_delivery_ms: best,
        volume_limit_bytes,
        confidence,
        termination_ms: hops.iter().map(|h| h.contact_end_ms).min().unwrap_or(0),
        hops,
    }
}

/// The CGR state of one local node: volume bookings and the per-destination route cache.
///
/// The cache is keyed on [`ContactPlan::generation`], which differs between plans, so one `Cgr`
/// may be used across plan changes and replacements; after replacing the plan call
/// [`Cgr::prune`] to drop bookings of contacts that no longer exist (ids are never reused, so
/// stale bookings cannot alias new contacts meanwhile).
#[derive(Debug, Clone)]
pub struct Cgr {
    local: NodeNum,
    limits: CgrLimits,
    booked: BTreeMap<ContactId, u64>,
    cache: BTreeMap<NodeNum, Vec<Route>>,
    cache_generation: Option<u64>,
}

impl Cgr {
    /// CGR for `local` with the given work bounds.
    pub fn new(local: NodeNum, limits: CgrLimits) -> Self {
        Cgr {
            local,
            limits,
            booked: BTreeMap::new(),
            cache: BTreeMap::new(),
            cache_generation: None,
        }
    }

    /// The local node.
    pub fn local(&self) -> NodeNum {
        self.local
    }

    /// The work bounds.
    pub fn limits(&self) -> CgrLimits {
        self.limits
    }

    /// The earliest-delivery route for `bundle`, found by a fresh search (no cache).
    pub fn route_exact(
        &self,
        plan: &ContactPlan,
        dest: NodeNum,
        bundle: BundleSpec,
        excl: &Exclusions,
    ) -> Result<Route, NoRoute> {
        let graph = Graph::new(plan);
        self.search(&graph, dest, bundle, excl, &BTreeSet::new())
    }

    fn search(
        &self,
        graph: &Graph<'_>,
        dest: NodeNum,
        bundle: BundleSpec,
        excl: &Exclusions,
        suppressed: &BTreeSet<ContactId>,
    ) -> Result<Route, NoRoute> {
        Search {
            graph,
            local: self.local,
            dest,
            bundle,
            excl,
            suppressed,
            booked: &self.booked,
            limit: self.limits.max_contacts_explored,
        }
        .run()
    }

    /// Up to `k` alternative routes, best first, by SABR's method: each search suppresses the
    /// limiting contact of every route found before. Fails only if not even one route exists.
    pub fn routes(
        &self,
        plan: &ContactPlan,
        dest: NodeNum,
        bundle: BundleSpec,
        excl: &Exclusions,
        k: usize,
    ) -> Result<Vec<Route>, NoRoute> {
        let graph = Graph::new(plan);
        let mut suppressed = BTreeSet::new();
        let mut out: Vec<Route> = Vec::new();
        for _ in 0..k {
            match self.search(&graph, dest, bundle, excl, &suppressed) {
                Ok(r) => {
                    if let Some(l) = r.limiting_contact() {
                        suppressed.insert(l);
                    }
                    out.push(r);
                }
                Err(e) if out.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        if out.is_empty() {
            return Err(NoRoute::Unreachable);
        }
        Ok(out)
    }

    /// The route to use for `bundle` now: the best cached SABR route that still fits (size,
    /// bookings, time, deadline), recomputing the route list when none does or the plan changed.
    /// With exclusions the cache is bypassed ([`Cgr::route_exact`]).
    ///
    /// The cached list holds [`CgrLimits::max_routes`] alternatives, so after heavy booking this
    /// may return a later route than [`Cgr::route_exact`] would (SABR's trade of optimality for
    /// fewer searches); it never returns a route that cannot carry the bundle.
    pub fn route(
        &mut self,
        plan: &ContactPlan,
        dest: NodeNum,
        bundle: BundleSpec,
        excl: &Exclusions,
    ) -> Result<Route, NoRoute> {
        if dest == self.local {
            return Err(NoRoute::LocalDestination);
        }
        if !excl.is_empty() {
            return self.route_exact(plan, dest, bundle, excl);
        }
        if self.cache_generation != Some(plan.generation()) {
            self.cache.clear();
            self.cache_generation = Some(plan.generation());
        }
        if let Some(r) = self.best_cached(plan, dest, bundle) {
            return Ok(r);
        }
        // No usable cached route: rebuild the list, first as a pure contact-graph list (size 0,
        // reusable by bundles of any size), then for this bundle's size if that fails it.
        let k = self.limits.max_routes.max(1);
        let probe = BundleSpec {
            size_bytes: 0,
            deadline_ms: None,
            ..bundle
        };
        let list = self.routes(plan, dest, probe, excl, k)?;
        self.store(dest, list);
        if let Some(r) = self.best_cached(plan, dest, bundle) {
            return Ok(r);
        }
        let list = self.routes(plan, dest, bundle, excl, k)?;
        self.store(dest, list);
        self.best_cached(plan, dest, bundle)
            .ok_or(NoRoute::Unreachable)
    }

    fn store(&mut self, dest: NodeNum, list: Vec<Route>) {
        if !self.cache.contains_key(&dest)
            && self.cache.len() >= self.limits.max_cached_destinations.max(1)
        {
            self.cache.pop_first();
        }
        self.cache.insert(dest, list);
    }

    fn best_cached(&self, plan: &ContactPlan, dest: NodeNum, bundle: BundleSpec) -> Option<Route> {
        self.cache
            .get(&dest)?
            .iter()
            .filter_map(|r| self.project(plan, r, bundle))
            .min_by_key(|r| (r.arrival_ms, r.hops.len()))
    }

    /// Re-times a route's contacts for `bundle` with the current bookings; `None` if a contact
    /// can no longer carry it (ended, full, no range) or it would miss the deadline.
    pub fn project(&self, plan: &ContactPlan, route: &Route, bundle: BundleSpec) -> Option<Route> {
        let mut ready = bundle.now_ms;
        let mut hops = Vec::with_capacity(route.hops.len());
        let mut limit = u64::MAX;
        for h in &route.hops {
            let c = Contact::new(
                h.contact_start_ms,
                h.contact_end_ms,
                h.from,
                h.to,
                h.rate_bytes_per_s,
            );
            let booked = self.booked(h.contact);
            let (tx_start, tx_end, residual) =
                transmit_window(&c, ready, booked, bundle.size_bytes)?;
            let owlt = plan.owlt_ms(h.from, h.to, tx_start)?;
            ready = tx_end.saturating_add(owlt);
            limit = limit.min(residual);
            hops.push(Hop {
                tx_start_ms: tx_start,
                tx_end_ms: tx_end,
                owlt_ms: owlt,
                arrival_ms: ready,
                ..*h
            });
        }
        if bundle.deadline_ms.is_some_and(|d| ready > d) {
            return None;
        }
        Some(finish(
            route.dest,
            hops,
            bundle.now_ms,
            limit,
            route.confidence,
        ))
    }

    /// Reserves `bytes` on every contact of `route` (the bundle was queued on it), so later
    /// bundles see less residual volume and spill onto later contacts when one fills.
    pub fn book(&mut self, route: &Route, bytes: u64) {
        for h in &route.hops {
            let b = self.booked.entry(h.contact).or_insert(0);
            *b = b.saturating_add(bytes);
        }
    }

    /// Releases a booking made with [`Cgr::book`] (the bundle was dropped or re-routed).
    ///
    /// Freed volume can make routes usable that the cached route lists left out, so this drops
    /// the cache (booking more, or time passing, only ever removes routes and needs no such care).
    pub fn unbook(&mut self, route: &Route, bytes: u64) {
        self.cache.clear();
        for h in &route.hops {
            if let Some(b) = self.booked.get_mut(&h.contact) {
                *b = b.saturating_sub(bytes);
                if *b == 0 {
                    self.booked.remove(&h.contact);
                }
            }
        }
    }

    /// Bytes booked on a contact.
    pub fn booked(&self, contact: ContactId) -> u64 {
        self.booked.get(&contact).copied().unwrap_or(0)
    }

    /// Forgets bookings of contacts that ended by `now_ms` or left the plan, keeping the booking
    /// table bounded by the plan size.
    pub fn prune(&mut self, plan: &ContactPlan, now_ms: u64) {
        let live: BTreeSet<ContactId> = plan
            .contacts()
            .filter(|c| c.end_ms > now_ms)
            .map(|c| c.id)
            .collect();
        self.booked.retain(|id, _| live.contains(id));
    }

    /// Drops every cached route list (the cache also notices plan changes by itself).
    pub fn invalidate(&mut self) {
        self.cache.clear();
        self.cache_generation = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmit_window_is_exact() {
        let c = Contact::new(1000, 2000, 1, 2, 3); // 3 bytes in 1 s
        assert_eq!(transmit_window(&c, 0, 0, 3), Some((1000, 2000, 3)));
        assert_eq!(transmit_window(&c, 0, 1, 2), Some((1334, 2000, 2)));
        assert_eq!(transmit_window(&c, 0, 1, 3), None);
        assert_eq!(transmit_window(&c, 1500, 0, 1), Some((1500, 1834, 1)));
        assert_eq!(transmit_window(&c, 1500, 0, 2), None);
        assert_eq!(
            transmit_window(&c, 2000, 0, 0),
            None,
            "a contact that has ended carries nothing"
        );
        assert_eq!(transmit_window(&c, 1999, 0, 0), Some((1999, 1999, 0)));
    }
}
