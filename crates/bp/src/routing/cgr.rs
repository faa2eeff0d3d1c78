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

use crate::contact_plan::{Contact, ContactId, ContactIndex, ContactPlan, NodeNum};

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
pub(super) fn transmit_window(
    c: &Contact,
    ready: u64,
    booked: u64,
    size: u64,
) -> Option<(u64, u64, u64)> {
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

/// Label of a contact reached by the search: the bundle's timing on it and the label it came
/// from (an index into [`Search`]'s label list).
#[derive(Clone, Copy)]
struct Label {
    contact: usize,
    arrival: u64,
    pred: Option<usize>,
    tx_start: u64,
    tx_end: u64,
    owlt: u64,
    residual: u64,
}

/// A node whose outgoing contacts are being relaxed: the bundle is ready there at `ready`, after
/// `hops - 1` hops, having come over label `pred`.
#[derive(Clone, Copy)]
struct Expansion {
    ready: u64,
    hops: u32,
    pred: Option<usize>,
}

/// What a heap entry stands for.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Entry {
    /// The contacts `j..pair_end` of one pair, not evaluated yet, of expansion `e`. Its key is a
    /// lower bound of their arrivals (see [`Search::run`]); ordered before a label with the
    /// same key.
    Pending { e: usize },
    /// Label `l` (contact `j` with its exact arrival).
    Label { l: usize },
}

/// Heap key: `(arrival, hops, contact index j, entry)`, popped smallest first. `(arrival, hops,
/// j)` is SABR's tie-break order (earliest arrival, then fewer hops, then plan order); `j` is
/// unique among the entries in the heap, so the entry never decides between two of them.
type Key = Reverse<(u64, u32, usize, Entry)>;

struct Search<'a> {
    plan: &'a ContactPlan,
    index: &'a ContactIndex,
    local: NodeNum,
    dest: NodeNum,
    bundle: BundleSpec,
    excl: &'a Exclusions,
    suppressed: &'a BTreeSet<ContactId>,
    booked: &'a BTreeMap<ContactId, u64>,
    limit: usize,
    labels: Vec<Label>,
    expansions: Vec<Expansion>,
    heap: BinaryHeap<Key>,
    /// Nodes whose outgoing contacts have been relaxed (see [`Search::run`]).
    expanded: BTreeSet<NodeNum>,
}

impl Search<'_> {
    /// Dijkstra over contacts, keyed on the bundle's arrival at each contact's receiver.
    ///
    /// Every contact leaves exactly one node and every node is expanded once (below), so each
    /// contact gets at most one label. The search pops labels in `(arrival, hops, j)` order and
    /// stops at the first one reaching the destination.
    ///
    /// Contacts are evaluated lazily, pair by pair: expanding a node pushes, per outgoing pair,
    /// one pending entry for the pair's contacts that have not ended, keyed on a lower bound of
    /// their arrivals (`max(ready, start)` of the first: a contact's arrival is never before its
    /// transmission start, and later contacts of a pair start later). Popping it evaluates the
    /// first contact that can carry the bundle, pushes its label, and a pending entry for the rest.
    /// A label thus enters the heap before any entry with a greater key is popped, so labels pop
    /// in exactly the order they would if every contact had been evaluated at its node's
    /// expansion — the search returns the same route — while a 24-hour plan's contacts beyond the
    /// answer are never touched: the work grows with the contacts explored, not with the plan.
    fn run(mut self) -> Result<Route, NoRoute> {
        if self.dest == self.local {
            return Err(NoRoute::LocalDestination);
        }
        if self.excl.nodes.contains(&self.dest) {
            return Err(NoRoute::Unreachable);
        }
        self.expand(self.local, self.bundle.now_ms, 1, None);
        let mut explored = 0usize;
        // Nodes whose outgoing contacts have been relaxed. Contacts settle in (arrival, hops)
        // order and a contact's timing is non-decreasing in the ready time, so the first contact
        // settled into a node gives the best possible start from it; relaxing the node's contacts
        // again from a later arrival can never improve a label. This bounds relaxations by the
        // number of contacts instead of contacts × out-degree.
        self.expanded.insert(self.local);
        while let Some(Reverse((_, hops, j, entry))) = self.heap.pop() {
            let l = match entry {
                Entry::Pending { e } => {
                    self.pending(e, j);
                    continue;
                }
                Entry::Label { l } => l,
            };
            explored += 1;
            if explored > self.limit {
                return Err(NoRoute::WorkLimit {
                    explored: explored - 1,
                });
            }
            let (Some(c), Some(label)) = (self.index.contact(j), self.labels.get(l).copied())
            else {
                continue;
            };
            let to = c.contact.to;
            if to == self.dest {
                return Ok(self.build(l));
            }
            if self.expanded.insert(to) {
                self.expand(to, label.arrival, hops + 1, Some(l));
            }
        }
        Err(NoRoute::Unreachable)
    }

    /// Pushes one pending entry per usable pair leaving `node` (see [`Search::run`]).
    fn expand(&mut self, node: NodeNum, ready: u64, hops: u32, pred: Option<usize>) {
        let e = self.expansions.len();
        self.expansions.push(Expansion { ready, hops, pred });
        for pair in self.index.pairs_from(node) {
            if pair.to == self.local || self.excl.nodes.contains(&pair.to) {
                continue;
            }
            let first = self.index.first_open_at(pair, ready);
            if first < pair.hi {
                self.push_pending(e, first);
            }
        }
    }

    fn push_pending(&mut self, e: usize, j: usize) {
        let (Some(c), Some(x)) = (self.index.contact(j), self.expansions.get(e)) else {
            return;
        };
        let bound = max(x.ready, c.contact.start_ms);
        if self.bundle.deadline_ms.is_some_and(|d| bound > d) {
            return; // every remaining contact of the pair arrives after the deadline
        }
        self.heap
            .push(Reverse((bound, x.hops, j, Entry::Pending { e })));
    }

    /// A pending entry popped: labels the first contact of `j..pair_end` that can carry the
    /// bundle and leaves the rest pending.
    fn pending(&mut self, e: usize, j: usize) {
        let (Some(c), Some(x)) = (self.index.contact(j), self.expansions.get(e).copied()) else {
            return;
        };
        // A pair into a node already reached (not the destination) can only yield labels that
        // are popped, counted and dropped: the rest of its chain is not evaluated.
        if c.contact.to != self.dest && self.expanded.contains(&c.contact.to) {
            return;
        }
        let end = c.pair_end;
        for k in j..end {
            let Some(c) = self.index.contact(k) else {
                return;
            };
            if self
                .bundle
                .deadline_ms
                .is_some_and(|d| max(x.ready, c.contact.start_ms) > d)
            {
                return; // this contact and the later ones arrive after the deadline
            }
            if let Some(arrival) = self.relax(k, x) {
                let l = self.labels.len() - 1;
                self.heap
                    .push(Reverse((arrival, x.hops, k, Entry::Label { l })));
                if k + 1 < end {
                    self.push_pending(e, k + 1);
                }
                return;
            }
        }
    }

    /// Labels contact `j` for a bundle ready at its sender as `x` says; returns the arrival, or
    /// `None` if the contact cannot carry the bundle (excluded, suppressed, full, ended, no
    /// range, or past the deadline).
    fn relax(&mut self, j: usize, x: Expansion) -> Option<u64> {
        let ic = self.index.contact(j)?;
        let c = &ic.contact;
        if self.excl.contacts.contains(&ic.id) || self.suppressed.contains(&ic.id) {
            return None;
        }
        let booked = self.booked.get(&ic.id).copied().unwrap_or(0);
        let (tx_start, tx_end, residual) =
            transmit_window(c, x.ready, booked, self.bundle.size_bytes)?;
        let owlt = self.index.owlt_ms(self.plan, j, tx_start)?;
        let arrival = tx_end.saturating_add(owlt);
        if self.bundle.deadline_ms.is_some_and(|d| arrival > d) {
            return None;
        }
        self.labels.push(Label {
            contact: j,
            arrival,
            pred: x.pred,
            tx_start,
            tx_end,
            owlt,
            residual,
        });
        Some(arrival)
    }

    fn build(&self, last: usize) -> Route {
        let mut chain = Vec::new();
        let mut cur = Some(last);
        while let Some(l) = cur {
            let Some(label) = self.labels.get(l) else {
                break;
            };
            let Some(c) = self.index.contact(label.contact) else {
                break;
            };
            chain.push((c, *label));
            cur = label.pred;
            if chain.len() > self.labels.len() {
                break; // cannot happen (labels form a tree), but never loop forever
            }
        }
        chain.reverse();
        let hops = chain
            .iter()
            .map(|(c, l)| Hop {
                contact: c.id,
                from: c.contact.from,
                to: c.contact.to,
                contact_start_ms: c.contact.start_ms,
                contact_end_ms: c.contact.end_ms,
                rate_bytes_per_s: c.contact.rate_bytes_per_s,
                tx_start_ms: l.tx_start,
                tx_end_ms: l.tx_end,
                owlt_ms: l.owlt,
                arrival_ms: l.arrival,
            })
            .collect();
        let residual = chain.iter().map(|(_, l)| l.residual).min().unwrap_or(0);
        let confidence = chain.iter().map(|(c, _)| c.contact.confidence).product();
        finish(self.dest, hops, self.bundle.now_ms, residual, confidence)
    }
}

/// Assembles a route from its hops, deriving the summary fields.
pub(super) fn finish(
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
    /// Changes whenever a booking does ([`Cgr::book`], [`Cgr::unbook`], [`Cgr::prune`]).
    booking_version: u64,
    /// Per destination, the last route search that found no route (see [`Cgr::route`]).
    no_route: BTreeMap<NodeNum, NoRouteMemo>,
    /// Per destination, the earliest arrival of any bundle from the last pure contact-graph
    /// search (see [`Cgr::route`]).
    arrival_floor: BTreeMap<NodeNum, ArrivalFloor>,
    /// The last pure contact-graph route list computed and not cached (see [`Cgr::route`]).
    last_probe: Option<ProbeList>,
    no_route_memo: bool,
    stats: CgrStats,
}

/// What [`Cgr::route`] did so far: for profiling and for tests that the memo works.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgrStats {
    /// Calls answered from a cached route list.
    pub cached_routes: u64,
    /// Route lists computed ([`Cgr::routes`] calls, each up to [`CgrLimits::max_routes`] searches).
    pub lists_computed: u64,
    /// Calls answered "no route" by the no-route memo or an arrival floor, without a search.
    pub no_route_memo_hits: u64,
    /// Pure contact-graph route lists reused from the previous call instead of searched again.
    pub probe_lists_reused: u64,
}

/// A search of [`Cgr::route`] that found no route: for this plan generation and these
/// bookings, no bundle at least `size_bytes` large, ready at or after `now_ms`, with a deadline
/// no later than `deadline_ms` (`None`: none), has a route either (on a FIFO plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NoRouteMemo {
    generation: u64,
    booking_version: u64,
    now_ms: u64,
    size_bytes: u64,
    deadline_ms: Option<u64>,
}

/// The earliest arrival at a destination found by a pure contact-graph search (size 0, no
/// deadline) for a bundle ready at `now_ms`, with this plan generation and these bookings: on a
/// FIFO plan no bundle ready at or after `now_ms` arrives before `arrival_ms` (a larger bundle
/// or a later start never arrives earlier), so one whose deadline is earlier has no route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ArrivalFloor {
    generation: u64,
    booking_version: u64,
    now_ms: u64,
    arrival_ms: u64,
}

impl ArrivalFloor {
    fn covers(&self, generation: u64, booking_version: u64, b: &BundleSpec) -> bool {
        self.generation == generation
            && self.booking_version == booking_version
            && b.now_ms >= self.now_ms
            && b.deadline_ms.is_some_and(|d| d < self.arrival_ms)
    }
}

/// A pure contact-graph route list that was computed but not cached (it gave the bundle that
/// asked no route): the same search for the same destination, plan generation, bookings and
/// time gives the same list, so the next bundle asking reuses it instead of searching again.
#[derive(Debug, Clone)]
struct ProbeList {
    dest: NodeNum,
    generation: u64,
    booking_version: u64,
    now_ms: u64,
    list: Vec<Route>,
}

impl NoRouteMemo {
    fn covers(&self, generation: u64, booking_version: u64, b: &BundleSpec) -> bool {
        self.generation == generation
            && self.booking_version == booking_version
            && b.now_ms >= self.now_ms
            && b.size_bytes >= self.size_bytes
            && match (self.deadline_ms, b.deadline_ms) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(m), Some(d)) => d <= m,
            }
    }
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
            booking_version: 0,
            no_route: BTreeMap::new(),
            arrival_floor: BTreeMap::new(),
            last_probe: None,
            no_route_memo: true,
            stats: CgrStats::default(),
        }
    }

    /// What [`Cgr::route`] did so far.
    pub fn stats(&self) -> CgrStats {
        self.stats
    }

    /// Turns the no-route memo of [`Cgr::route`] on (the default) or off. Off, every call
    /// searches; the decisions are the same either way (a property test compares them).
    pub fn set_no_route_memo(&mut self, on: bool) {
        self.no_route_memo = on;
        self.forget_memos();
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
        self.search(plan, dest, bundle, excl, &BTreeSet::new())
    }

    fn search(
        &self,
        plan: &ContactPlan,
        dest: NodeNum,
        bundle: BundleSpec,
        excl: &Exclusions,
        suppressed: &BTreeSet<ContactId>,
    ) -> Result<Route, NoRoute> {
        Search {
            plan,
            index: plan.contact_index(),
            local: self.local,
            dest,
            bundle,
            excl,
            suppressed,
            booked: &self.booked,
            limit: self.limits.max_contacts_explored,
            labels: Vec::new(),
            expansions: Vec::new(),
            heap: BinaryHeap::new(),
            expanded: BTreeSet::new(),
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
        let mut suppressed = BTreeSet::new();
        let mut out: Vec<Route> = Vec::new();
        for _ in 0..k {
            match self.search(plan, dest, bundle, excl, &suppressed) {
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
    /// fewer searches); it never returns a route that cannot carry the bundle. A list is cached
    /// only when it gave the bundle its route: a call that finds no route changes nothing.
    ///
    /// **No-route memo.** An agent asks again for every bundle still waiting for a route each
    /// time one of its links changes; on a large plan each failing call costs up to
    /// 2 × [`CgrLimits::max_routes`] searches over everything reachable. So when a search finds
    /// no route ([`NoRoute::Unreachable`]; a work limit is not remembered), the call remembers it
    /// for the destination, and a later call for the same destination fails at once while the
    /// plan generation and the bookings are unchanged (any [`Cgr::book`], [`Cgr::unbook`] or
    /// [`Cgr::prune`] that changes one forgets every memo), the bundle is ready no earlier, is no
    /// smaller and has no later deadline. That is exact only if the plan is FIFO
    /// ([`crate::ContactIndex::is_fifo`]): then any route at the later time would be a route at
    /// the earlier one. On a plan that is not, nothing is remembered. One memo per destination,
    /// at most [`CgrLimits::max_cached_destinations`] (the lowest-numbered is evicted).
    ///
    /// **Arrival floor and kept list** (same conditions, forgotten with the memo). When the pure
    /// contact-graph list (size 0, no deadline) has routes but none carries this bundle, its
    /// first route — found with nothing suppressed, the earliest arrival there is — is kept per
    /// destination as a floor: a later call whose deadline is before it fails at once (on a FIFO
    /// plan a larger bundle or a later start never arrives earlier). The list itself is kept
    /// too, and the next call for the same destination at the same time reuses it instead of
    /// searching again (the same search would return the same list). Bundles whose only route
    /// arrives after their deadline otherwise cost up to `max_routes` + 1 searches each, at
    /// every routing pass.
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
        let generation = plan.generation();
        if self.cache_generation != Some(generation) {
            self.cache.clear();
            self.forget_memos();
            self.cache_generation = Some(generation);
        }
        if let Some(r) = self.best_cached(plan, dest, bundle) {
            self.stats.cached_routes += 1;
            return Ok(r);
        }
        if self
            .no_route
            .get(&dest)
            .is_some_and(|m| m.covers(generation, self.booking_version, &bundle))
        {
            self.stats.no_route_memo_hits += 1;
            return Err(NoRoute::Unreachable);
        }
        if self
            .arrival_floor
            .get(&dest)
            .is_some_and(|f| f.covers(generation, self.booking_version, &bundle))
        {
            self.stats.no_route_memo_hits += 1;
            return Err(NoRoute::Unreachable);
        }
        // No usable cached route: rebuild the list, first as a pure contact-graph list (size 0,
        // reusable by bundles of any size), then for this bundle's size if that fails it.
        let k = self.limits.max_routes.max(1);
        let probe = BundleSpec {
            size_bytes: 0,
            deadline_ms: None,
            ..bundle
        };
        let reused = match self.last_probe.take() {
            Some(p)
                if p.dest == dest
                    && p.generation == generation
                    && p.booking_version == self.booking_version
                    && p.now_ms == probe.now_ms =>
            {
                self.stats.probe_lists_reused += 1;
                Some(p.list)
            }
            _ => None,
        };
        let list = match reused {
            Some(l) => l,
            None => {
                self.stats.lists_computed += 1;
                match self.routes(plan, dest, probe, excl, k) {
                    Ok(l) => l,
                    Err(e) => return Err(self.remember_no_route(plan, dest, probe, e)),
                }
            }
        };
        if let Some(r) = self.best_of(plan, &list, bundle) {
            self.store(dest, list);
            return Ok(r);
        }
        self.remember_probe(plan, dest, probe, list);
        self.stats.lists_computed += 1;
        let list = match self.routes(plan, dest, bundle, excl, k) {
            Ok(l) => l,
            Err(e) => return Err(self.remember_no_route(plan, dest, bundle, e)),
        };
        let r = self
            .best_of(plan, &list, bundle)
            .ok_or(NoRoute::Unreachable)?;
        self.store(dest, list);
        Ok(r)
    }

    /// Records that a search for `bundle` found no route (see [`Cgr::route`]); returns `e`.
    fn remember_no_route(
        &mut self,
        plan: &ContactPlan,
        dest: NodeNum,
        bundle: BundleSpec,
        e: NoRoute,
    ) -> NoRoute {
        if self.no_route_memo && e == NoRoute::Unreachable && plan.contact_index().is_fifo(plan) {
            if !self.no_route.contains_key(&dest)
                && self.no_route.len() >= self.limits.max_cached_destinations.max(1)
            {
                self.no_route.pop_first();
            }
            self.no_route.insert(
                dest,
                NoRouteMemo {
                    generation: plan.generation(),
                    booking_version: self.booking_version,
                    now_ms: bundle.now_ms,
                    size_bytes: bundle.size_bytes,
                    deadline_ms: bundle.deadline_ms,
                },
            );
        }
        e
    }

    /// Keeps a pure contact-graph list that gave the bundle no route: its first route's arrival
    /// as the destination's arrival floor, and the list for the next bundle asking at the same
    /// time (FIFO plans only, like the no-route memo).
    fn remember_probe(
        &mut self,
        plan: &ContactPlan,
        dest: NodeNum,
        probe: BundleSpec,
        list: Vec<Route>,
    ) {
        if !self.no_route_memo || !plan.contact_index().is_fifo(plan) {
            return;
        }
        // The first search suppresses nothing: its route is the earliest arrival there is.
        if let Some(first) = list.first() {
            if !self.arrival_floor.contains_key(&dest)
                && self.arrival_floor.len() >= self.limits.max_cached_destinations.max(1)
            {
                self.arrival_floor.pop_first();
            }
            self.arrival_floor.insert(
                dest,
                ArrivalFloor {
                    generation: plan.generation(),
                    booking_version: self.booking_version,
                    now_ms: probe.now_ms,
                    arrival_ms: first.arrival_ms,
                },
            );
        }
        self.last_probe = Some(ProbeList {
            dest,
            generation: plan.generation(),
            booking_version: self.booking_version,
            now_ms: probe.now_ms,
            list,
        });
    }

    /// Forgets the no-route memos, arrival floors and the kept route list.
    fn forget_memos(&mut self) {
        self.no_route.clear();
        self.arrival_floor.clear();
        self.last_probe = None;
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
        self.best_of(plan, self.cache.get(&dest)?, bundle)
    }

    fn best_of(&self, plan: &ContactPlan, list: &[Route], bundle: BundleSpec) -> Option<Route> {
        list.iter()
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
        self.bookings_changed();
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
        self.bookings_changed();
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
        let before = self.booked.len();
        self.booked.retain(|id, _| live.contains(id));
        if self.booked.len() != before {
            self.bookings_changed();
        }
    }

    /// A booking changed: every no-route memo is stale.
    fn bookings_changed(&mut self) {
        self.booking_version = self.booking_version.wrapping_add(1);
        self.forget_memos();
    }

    /// Drops every cached route list (the cache also notices plan changes by itself).
    pub fn invalidate(&mut self) {
        self.cache.clear();
        self.forget_memos();
        self.cache_generation = None;
    }

    /// Routes in the cached route list for `dest` (0 if none): after a successful
    /// [`Cgr::route`], the alternatives its choice was made from (for the route decision log).
    pub fn cached_route_count(&self, dest: NodeNum) -> usize {
        self.cache.get(&dest).map_or(0, Vec::len)
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

    use std::sync::Arc;

    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    use crate::contact_plan::Range;
    use crate::routing::cgr_reference::eager_search;

    /// (from, to, [(gap before, duration)], rate): a run of contacts between two nodes.
    type Run = (u64, u64, Vec<(u64, u64)>, u64);

    /// A random plan in which pairs have runs of contacts, some back to back, and ranges that
    /// change within contacts (and are sometimes asymmetric or missing), plus a routing question.
    #[derive(Debug, Clone)]
    struct Case {
        nodes: u64,
        runs: Vec<Run>,
        /// (from, to, start, duration, owlt)
        ranges: Vec<(u64, u64, u64, u64, u64)>,
        bookings: Vec<(usize, u64)>,
        excluded_nodes: Vec<u64>,
        excluded_contacts: Vec<usize>,
        suppressed: Vec<usize>,
        local: u64,
        dest: u64,
        size: u64,
        now_ms: u64,
        deadline_ms: Option<u64>,
        limit: usize,
    }

    fn case() -> impl Strategy<Value = Case> {
        (2u64..=7).prop_flat_map(|nodes| {
            let node = 1..=nodes;
            let gap = prop_oneof![Just(0u64), 0u64..20_000];
            let run = (
                node.clone(),
                node.clone(),
                prop::collection::vec((gap, 1u64..15_000), 1..5),
                prop_oneof![1u64..2_000, Just(1_000_000_000)],
            );
            let range = (
                node.clone(),
                node.clone(),
                prop_oneof![Just(0u64), 0u64..60_000],
                prop_oneof![Just(200_000u64), 1u64..80_000],
                0u64..3_000,
            );
            (
                (
                    Just(nodes),
                    prop::collection::vec(run, 0..30),
                    prop::collection::vec(range, 0..40),
                    prop::collection::vec((0usize..40, 0u64..3_000), 0..5),
                ),
                (
                    prop::collection::vec(node.clone(), 0..2),
                    prop::collection::vec(0usize..40, 0..3),
                    prop::collection::vec(0usize..40, 0..3),
                    node,
                    prop_oneof![9 => 1..nodes, 1 => Just(0u64)],
                ),
                (
                    prop_oneof![Just(0u64), 1u64..3_000],
                    0u64..40_000,
                    prop::option::of(0u64..120_000),
                    prop_oneof![4 => Just(100_000usize), 1 => 1usize..12],
                ),
            )
                .prop_map(
                    |(
                        (nodes, runs, ranges, bookings),
                        (excluded_nodes, excluded_contacts, suppressed, local, offset),
                        (size, now_ms, deadline_ms, limit),
                    )| Case {
                        nodes,
                        runs,
                        ranges,
                        bookings,
                        excluded_nodes,
                        excluded_contacts,
                        suppressed,
                        local,
                        // Another node mostly, sometimes the local one.
                        dest: (local - 1 + offset) % nodes + 1,
                        size,
                        now_ms,
                        deadline_ms,
                        limit,
                    },
                )
        })
    }

    fn build(c: &Case) -> ContactPlan {
        let mut p = ContactPlan::new(0);
        for (from, to, pieces, rate) in &c.runs {
            let mut t = 0;
            for &(gap, dur) in pieces {
                t += gap;
                // Invalid or overlapping draws are skipped: the plan rejects them.
                let _ = p.insert_contact(Contact::new(t, t + dur, *from, *to, *rate));
                t += dur;
            }
        }
        // Most pairs get a range over the whole horizon written from the higher node (ION's
        // symmetry rule applies it both ways); the drawn ranges override it where they apply.
        for a in 1..=c.nodes {
            for b in a + 1..=c.nodes {
                if (a * 7 + b * 3) % 5 != 0 {
                    let _ = p.insert_range(Range {
                        start_ms: 0,
                        end_ms: 1_000_000,
                        from: b,
                        to: a,
                        owlt_ms: (a * 13 + b * 29) % 700,
                    });
                }
            }
        }
        for &(from, to, start, dur, owlt_ms) in &c.ranges {
            let _ = p.insert_range(Range {
                start_ms: start,
                end_ms: start + dur,
                from,
                to,
                owlt_ms,
            });
        }
        p
    }

    fn ids(p: &ContactPlan, picks: &[usize]) -> BTreeSet<ContactId> {
        let all: Vec<ContactId> = p.contacts().map(|c| c.id).collect();
        picks
            .iter()
            .filter_map(|&i| all.get(i % all.len().max(1)).copied())
            .collect()
    }

    fn config() -> Config {
        Config {
            cases: 3000,
            rng_seed: RngSeed::Fixed(0x1a27_5ea7),
            failure_persistence: None,
            ..Config::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        /// The lazy search returns exactly what the eager one (every contact of a node evaluated
        /// at its expansion) returns: route, hops, timings, and errors with their explored count.
        #[test]
        fn lazy_search_equals_eager_search(case in case()) {
            let plan = build(&case);
            let mut cgr = Cgr::new(
                case.local,
                CgrLimits { max_contacts_explored: case.limit, ..CgrLimits::default() },
            );
            let all: Vec<ContactId> = plan.contacts().map(|c| c.id).collect();
            for &(i, bytes) in &case.bookings {
                if let Some(id) = all.get(i % all.len().max(1)) {
                    *cgr.booked.entry(*id).or_insert(0) += bytes;
                }
            }
            let excl = Exclusions {
                nodes: case.excluded_nodes.iter().copied().filter(|&n| n != case.local).collect(),
                contacts: ids(&plan, &case.excluded_contacts),
            };
            let suppressed = ids(&plan, &case.suppressed);
            let b = BundleSpec { size_bytes: case.size, now_ms: case.now_ms, deadline_ms: case.deadline_ms };
            for (ex, sup) in [
                (&excl, &suppressed),
                (&Exclusions::default(), &BTreeSet::new()),
            ] {
                let lazy = cgr.search(&plan, case.dest, b, ex, sup);
                let eager = eager_search(&plan, case.local, case.dest, b, ex, sup, &cgr.booked, case.limit);
                if let Err(NoRoute::WorkLimit { .. }) = eager {
                    // The lazy search skips contacts into nodes already reached, so it may finish
                    // within a limit the eager one hits: then with the answer of no limit.
                    if !matches!(lazy, Err(NoRoute::WorkLimit { .. })) {
                        let unlimited = eager_search(&plan, case.local, case.dest, b, ex, sup, &cgr.booked, usize::MAX);
                        prop_assert_eq!(&lazy, &unlimited, "nodes {}", case.nodes);
                    }
                } else {
                    prop_assert_eq!(&lazy, &eager, "nodes {}", case.nodes);
                }
            }
            // SABR alternatives: each search suppresses the limiting contacts found before.
            if case.limit < 100_000 {
                return Ok(()); // compared above, limit included
            }
            let lazy = cgr.routes(&plan, case.dest, b, &excl, 4);
            let mut sup = BTreeSet::new();
            let mut eager: Vec<Route> = Vec::new();
            for _ in 0..4 {
                match eager_search(&plan, case.local, case.dest, b, &excl, &sup, &cgr.booked, case.limit) {
                    Ok(r) => {
                        sup.extend(r.limiting_contact());
                        eager.push(r);
                    }
                    Err(e) if eager.is_empty() => {
                        prop_assert_eq!(lazy.clone(), Err(e));
                        break;
                    }
                    Err(_) => break,
                }
            }
            if !eager.is_empty() {
                prop_assert_eq!(lazy, Ok(eager));
            }
        }
    }

    /// One call of a routing sequence: (dest offset, size, time step, deadline after now, what
    /// to do with the route: 0 keep, 1 book, 2 book then unbook).
    type Call = (u64, u64, u64, Option<u64>, u8);

    proptest! {
        #![proptest_config(Config { cases: 1500, ..config() })]

        /// `Cgr::route` with the no-route memo decides exactly as without it, over a sequence
        /// of calls at non-decreasing times for several destinations, with bookings and
        /// releases in between: same route (all its timings) or both no route. Plans with
        /// the drawn ranges are mostly not FIFO (the memo stays off); without them every pair
        /// keeps one OWLT and the memo is used.
        #[test]
        fn no_route_memo_decides_as_the_search(
            case in case(),
            fifo in any::<bool>(),
            calls in prop::collection::vec(
                (
                    0u64..7,
                    prop_oneof![Just(0u64), 1u64..3_000],
                    prop_oneof![Just(0u64), 0u64..4_000],
                    prop::option::of(0u64..60_000),
                    0u8..3,
                ),
                1..40,
            ),
        ) {
            let mut case = case;
            if fifo {
                case.ranges.clear();
            }
            let plan = build(&case);
            let mut memo = Cgr::new(case.local, CgrLimits::default());
            let mut plain = Cgr::new(case.local, CgrLimits::default());
            plain.set_no_route_memo(false);
            let mut now = case.now_ms;
            let calls: &[Call] = &calls;
            for (i, &(dest, size, step, deadline, then)) in calls.iter().enumerate() {
                now += step;
                let dest = (case.local + dest) % case.nodes + 1;
                let b = BundleSpec {
                    size_bytes: size,
                    now_ms: now,
                    deadline_ms: deadline.map(|d| now + d),
                };
                let a = memo.route(&plan, dest, b, &Exclusions::default());
                let e = plain.route(&plan, dest, b, &Exclusions::default());
                prop_assert_eq!(a.is_ok(), e.is_ok(), "call {}: {:?} vs {:?}", i, a, e);
                if let (Ok(a), Ok(e)) = (&a, &e) {
                    prop_assert_eq!(a, e, "call {}", i);
                    if then >= 1 {
                        memo.book(a, size);
                        plain.book(e, size);
                    }
                    if then == 2 {
                        memo.unbook(a, size);
                        plain.unbook(e, size);
                    }
                }
            }
            prop_assert_eq!(plain.stats().no_route_memo_hits, 0);
            if !plan.contact_index().is_fifo(&plan) {
                prop_assert_eq!(memo.stats().no_route_memo_hits, 0);
            }
        }
    }

    /// Bundles whose deadline falls before the only route's arrival: the first call searches
    /// (the pure contact-graph list, then with the deadline), the next ones at the same time reuse
    /// the list, and those whose deadline is before its earliest arrival are answered by the
    /// arrival floor; a later deadline still gets its route, and a booking forgets the floor.
    #[test]
    fn arrival_floor_and_kept_list_save_searches() -> Result<(), crate::PlanError> {
        let mut p = ContactPlan::new(0);
        p.insert_contact(Contact::new(60_000, 70_000, 1, 2, 1_000))?;
        p.insert_contact(Contact::new(0, 100_000, 1, 3, 1_000))?;
        for (f, t) in [(1, 2), (1, 3)] {
            p.insert_range(Range {
                start_ms: 0,
                end_ms: 100_000,
                from: f,
                to: t,
                owlt_ms: 10,
            })?;
        }
        assert!(p.contact_index().is_fifo(&p));
        let b = |now_ms, deadline_ms| BundleSpec {
            size_bytes: 100,
            now_ms,
            deadline_ms: Some(deadline_ms),
        };
        let mut cgr = Cgr::new(1, CgrLimits::default());
        let mut plain = Cgr::new(1, CgrLimits::default());
        plain.set_no_route_memo(false);
        let calls = [
            b(0, 10_000),
            b(0, 20_000),
            b(1_000, 30_000),
            b(1_000, 60_099),
            b(1_000, 60_110),
        ];
        for (i, x) in calls.into_iter().enumerate() {
            let a = cgr.route(&p, 2, x, &Exclusions::default());
            let e = plain.route(&p, 2, x, &Exclusions::default());
            assert_eq!(a.is_ok(), e.is_ok(), "call {i}: {a:?} vs {e:?}");
            assert_eq!(a.ok(), e.ok(), "call {i}");
        }
        let s = cgr.stats();
        // The route arrives at 60,110 ms: the first call searches, the next two are below that
        // floor; the fourth (deadline 60,099 ms, not below it, a new time) searches again, and
        // the fifth gets its route.
        assert_eq!(s.no_route_memo_hits, 2, "{s:?}");
        assert!(s.lists_computed < plain.stats().lists_computed, "{s:?}");
        // Same time, later deadline still without a route: the kept list is reused.
        let mut cgr = Cgr::new(1, CgrLimits::default());
        assert!(cgr
            .route(&p, 2, b(0, 60_105), &Exclusions::default())
            .is_err());
        assert!(cgr
            .route(&p, 2, b(0, 60_106), &Exclusions::default())
            .is_err());
        assert_eq!(cgr.stats().probe_lists_reused, 1);
        // A booking forgets the floor and the list.
        let r = cgr.route(&p, 3, b(0, 90_000), &Exclusions::default());
        cgr.book(&r.expect("1 -> 3 is open"), 100);
        let before = cgr.stats();
        assert!(cgr
            .route(&p, 2, b(0, 1_000), &Exclusions::default())
            .is_err());
        assert_eq!(cgr.stats().no_route_memo_hits, before.no_route_memo_hits);
        Ok(())
    }

    /// On a FIFO plan, a destination with no route is searched once, not once per call, until
    /// a booking changes; a plan that is not FIFO keeps searching.
    #[test]
    fn no_route_memo_saves_searches_only_on_fifo_plans() -> Result<(), crate::PlanError> {
        // 1 -> 4's OWLT changes at 50 s to `later` ms.
        let plan = |later: u64| -> Result<ContactPlan, crate::PlanError> {
            let mut p = ContactPlan::new(0);
            p.insert_contact(Contact::new(0, 10_000, 1, 2, 1_000))?;
            p.insert_contact(Contact::new(20_000, 30_000, 2, 3, 1_000))?;
            p.insert_contact(Contact::new(0, 100_000, 1, 4, 1_000))?;
            for (f, t, s, e, owlt) in [
                (1, 2, 0, 100_000, 10),
                (2, 3, 0, 100_000, 10),
                (1, 4, 0, 50_000, 10),
                (1, 4, 50_000, 100_000, later),
            ] {
                p.insert_range(Range {
                    start_ms: s,
                    end_ms: e,
                    from: f,
                    to: t,
                    owlt_ms: owlt,
                })?;
            }
            Ok(p)
        };
        let p = plan(9)?; // 1 ms less: still FIFO (whole-ms transmission starts)
        assert!(p.contact_index().is_fifo(&p));
        let mut cgr = Cgr::new(1, CgrLimits::default());
        let b = |now_ms| BundleSpec {
            size_bytes: 100,
            now_ms,
            deadline_ms: None,
        };
        // Node 3 is reachable until 1 → 2 ends, node 5 never.
        assert!(cgr.route(&p, 3, b(0), &Exclusions::default()).is_ok());
        for t in [0, 5_000, 50_000, 90_000] {
            assert_eq!(
                cgr.route(&p, 5, b(t), &Exclusions::default()),
                Err(NoRoute::Unreachable)
            );
        }
        assert_eq!(
            cgr.stats().lists_computed,
            2,
            "one for node 3, one for node 5"
        );
        assert_eq!(cgr.stats().no_route_memo_hits, 3);
        // A booking forgets the memo.
        let r = cgr.route(&p, 4, b(1_000), &Exclusions::default());
        cgr.book(&r.expect("1 -> 4 is open"), 100);
        assert!(cgr.route(&p, 5, b(91_000), &Exclusions::default()).is_err());
        assert_eq!(cgr.stats().lists_computed, 4);
        // A step of the OWLT of 1 -> 4 down by 2 ms makes the plan not FIFO: no memo.
        let p = plan(8)?;
        assert!(!p.contact_index().is_fifo(&p));
        assert_eq!(p.contact_index().non_fifo_contacts(&p), 1);
        let mut cgr = Cgr::new(1, CgrLimits::default());
        for t in [0, 5_000] {
            assert!(cgr.route(&p, 5, b(t), &Exclusions::default()).is_err());
        }
        assert_eq!(cgr.stats().no_route_memo_hits, 0);
        assert_eq!(cgr.stats().lists_computed, 2);
        Ok(())
    }

    /// A route search on a plan shared by several holders (an `Arc`, a clone made after the
    /// index was built) uses one index, built once, and finds exactly the routes a plan with a
    /// fresh index of its own finds; a change to the plan rebuilds it.
    #[test]
    fn shared_index_gives_the_routes_of_a_fresh_one() -> Result<(), crate::PlanError> {
        let mut p = ContactPlan::new(0);
        // Two relays between 1 and 4, contacts back to back, and a slower direct contact.
        for (s, e, f, t, r) in [
            (0, 10_000, 1, 2, 1_000),
            (10_000, 20_000, 1, 2, 500),
            (5_000, 30_000, 2, 4, 1_000),
            (0, 20_000, 1, 3, 2_000),
            (20_000, 40_000, 3, 4, 2_000),
            (35_000, 60_000, 1, 4, 100),
            (0, 60_000, 4, 1, 100),
        ] {
            p.insert_contact(Contact::new(s, e, f, t, r))?;
        }
        for (f, t, owlt) in [(1, 2, 10), (2, 4, 20), (1, 3, 5), (3, 4, 30), (1, 4, 100)] {
            p.insert_range(Range {
                start_ms: 0,
                end_ms: 60_000,
                from: f,
                to: t,
                owlt_ms: owlt,
            })?;
        }
        let fresh = p.clone(); // cloned before any index exists: it builds its own
        let shared = Arc::new(p);
        let other = Arc::clone(&shared);
        let mut a = Cgr::new(1, CgrLimits::default());
        let mut b = Cgr::new(1, CgrLimits::default());
        let mut f = Cgr::new(1, CgrLimits::default());
        for (i, size) in [100u64, 5_000, 9_000, 20_000, 1, 50_000]
            .into_iter()
            .enumerate()
        {
            let bundle = BundleSpec {
                size_bytes: size,
                now_ms: i as u64 * 1_000,
                deadline_ms: None,
            };
            let ra = a.route(&shared, 4, bundle, &Exclusions::default());
            let rb = b.route(&other, 4, bundle, &Exclusions::default());
            let rf = f.route(&fresh, 4, bundle, &Exclusions::default());
            assert_eq!(ra, rf, "bundle {i}");
            assert_eq!(rb, rf, "bundle {i}");
            for (cgr, r) in [(&mut a, &ra), (&mut b, &rb), (&mut f, &rf)] {
                if let Ok(r) = r {
                    cgr.book(r, size);
                }
            }
            assert_eq!(
                a.routes(&shared, 4, bundle, &Exclusions::default(), 8),
                f.routes(&fresh, 4, bundle, &Exclusions::default(), 8)
            );
        }
        assert!(std::ptr::eq(shared.contact_index(), other.contact_index()));
        assert!(!std::ptr::eq(shared.contact_index(), fresh.contact_index()));
        assert_eq!(shared.contact_index().len(), fresh.contact_index().len());
        let copy = (*shared).clone();
        assert!(
            std::ptr::eq(copy.contact_index(), shared.contact_index()),
            "clones share the built index"
        );
        // A change drops the index; the next search sees the new contact.
        let mut changed = copy;
        let g = changed.contact_index().generation();
        changed.insert_contact(Contact::new(0, 1_000, 1, 4, 1_000_000))?;
        assert_ne!(changed.contact_index().generation(), g);
        assert_eq!(changed.contact_index().len(), 8);
        let r = Cgr::new(1, CgrLimits::default()).route_exact(
            &changed,
            4,
            BundleSpec {
                size_bytes: 10,
                now_ms: 0,
                deadline_ms: None,
            },
            &Exclusions::default(),
        );
        assert_eq!(r.map(|r| r.arrival_ms), Ok(101));
        Ok(())
    }
}
