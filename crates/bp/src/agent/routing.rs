//! Forwarding decisions: for each bundle waiting for a route, in priority/FIFO order:
//! static route, else contact graph routing over the plan (booking the route's volume), else the
//! destination itself when it is a neighbour with an up link, else keep waiting (routing is
//! retried whenever links, routes or the plan change).

use bpv7::Eid;

use super::{Agent, DtnTime, RouteEventKind, RouteMethod, State};
use crate::store::{BundleKey, Store};
use crate::{BundleSpec, CgrStats, Exclusions, LinkEventKind, NodeNum, Route};

impl<S: Store> Agent<S> {
    /// Routes every bundle waiting for a route that can be routed now.
    pub(super) fn route_unrouted(&mut self, now: DtnTime) {
        self.routing_dirty = false;
        let waiting: Vec<(u8, u64, BundleKey)> = self.unrouted.iter().copied().collect();
        for (class, seq, key) in waiting {
            let Some((hop, route)) = self.route_one(now, key) else {
                continue;
            };
            self.unrouted.remove(&(class, seq, key));
            let qseq = self.next_qseq;
            self.next_qseq += 1;
            if let Some(e) = self.entries.get_mut(&key) {
                e.state = State::Queued(hop);
                e.qpos = (class, qseq);
                e.route = route;
                self.queues
                    .entry(hop)
                    .or_default()
                    .insert((class, qseq, key));
            }
        }
    }

    /// The next hop for one bundle, with the CGR route it was booked on (if CGR chose it). With a
    /// route log installed, the decision is logged (`route_log`).
    fn route_one(&mut self, now: DtnTime, key: BundleKey) -> Option<(NodeNum, Option<Route>)> {
        let e = self.entries.get(&key)?;
        let (dest, len, expires) = (e.meta.destination.clone(), e.meta.len, e.meta.expires_at_ms);
        match dest {
            Eid::Ipn { node, .. } => {
                if node == self.cfg.node {
                    return None;
                }
                if let Some(hop) = self.routing.statics.lookup(node) {
                    self.log_choice(now, key, hop, RouteMethod::Static);
                    return Some((hop, None));
                }
                if let Some(plan) = &self.routing.plan {
                    if let Some(now_ms) = plan.from_dtn_ms(now) {
                        let spec = BundleSpec {
                            size_bytes: len,
                            now_ms,
                            deadline_ms: plan.from_dtn_ms(expires),
                        };
                        let before = self.routing.cgr.stats();
                        let res = self
                            .routing
                            .cgr
                            .route(plan, node, spec, &Exclusions::default());
                        if let Ok(r) = &res {
                            self.routing.cgr.book(r, len);
                        }
                        if self.route_logging() {
                            self.log_cgr(now, key, node, before, res.as_ref().ok());
                        }
                        if let Ok(r) = res {
                            return Some((r.next_hop, Some(r)));
                        }
                    }
                }
                let hop = self.links.contains_key(&node).then_some(node)?;
                self.log_choice(now, key, hop, RouteMethod::Neighbour);
                Some((hop, None))
            }
            Eid::Dtn { node, .. } => {
                let hop = *self.routing.dtn_routes.get(&node)?;
                self.log_choice(now, key, hop, RouteMethod::DtnRoute);
                Some((hop, None))
            }
            Eid::DtnNone => None,
        }
    }

    /// Logs a next hop chosen without CGR.
    fn log_choice(&mut self, now: DtnTime, key: BundleKey, hop: NodeNum, method: RouteMethod) {
        self.log_route(
            now,
            key,
            RouteEventKind::Routed,
            Some(hop),
            Some(method),
            None,
            None,
        );
    }

    /// Logs the outcome of one CGR call (`before`: its statistics before the call): the route
    /// booked, or no route when a search ran (answers of the no-route memo repeat an earlier
    /// logged search and are not logged again).
    fn log_cgr(
        &mut self,
        now: DtnTime,
        key: BundleKey,
        dest: NodeNum,
        before: CgrStats,
        route: Option<&Route>,
    ) {
        let after = self.routing.cgr.stats();
        let lists = after.lists_computed - before.lists_computed;
        let method = if lists > 0 {
            RouteMethod::CgrSearched
        } else {
            RouteMethod::CgrCached
        };
        match route {
            Some(r) => {
                let alternatives = self.routing.cgr.cached_route_count(dest);
                self.log_route(
                    now,
                    key,
                    RouteEventKind::Routed,
                    Some(r.next_hop),
                    Some(method),
                    Some((alternatives, lists)),
                    Some(r),
                );
            }
            None if lists > 0 => self.log_route(
                now,
                key,
                RouteEventKind::NoRoute,
                None,
                Some(method),
                Some((0, lists)),
                None,
            ),
            None => {}
        }
    }

    /// With a plan-driven agent: DTN time of the next change of one of our outbound links.
    /// Constant time: the sweep runs in [`Agent::apply_plan_links`], once per change.
    pub(super) fn next_plan_change(&self) -> Option<DtnTime> {
        if !self.routing.drive_links {
            return None;
        }
        if self.plan_dirty {
            return Some(self.plan_cursor);
        }
        self.plan_next
    }

    /// The first change of one of our outbound links strictly after DTN time `now` (one sweep
    /// of the plan).
    fn compute_next_plan_change(&self, now: DtnTime) -> Option<DtnTime> {
        let plan = self.routing.plan.as_ref()?;
        let t = plan.from_dtn_ms(now)?;
        plan.link_events(self.cfg.node, t)
            .find(|ev| ev.at_ms > t)
            .map(|ev| plan.to_dtn_ms(ev.at_ms))
    }

    /// Brings links up and down to match the plan at `now` (plan-driven agents only).
    pub(super) fn apply_plan_links(&mut self, now: DtnTime) {
        if !self.routing.drive_links {
            return;
        }
        // Links change only at plan events: between them there is nothing to apply (and a
        // sweep of a large plan is not free).
        if !self.plan_dirty && self.plan_next.is_none_or(|t| now < t) && now >= self.plan_cursor {
            return;
        }
        self.plan_next = self.compute_next_plan_change(now);
        let Some(plan) = self.routing.plan.as_ref() else {
            return;
        };
        self.plan_cursor = now;
        self.plan_dirty = false;
        let Some(t) = plan.from_dtn_ms(now) else {
            return;
        };
        let mut up: Vec<(NodeNum, u64)> = Vec::new();
        for ev in plan
            .link_events(self.cfg.node, t)
            .take_while(|ev| ev.at_ms <= t)
        {
            if let LinkEventKind::Up {
                rate_bytes_per_s, ..
            } = ev.kind
            {
                up.push((ev.neighbour, rate_bytes_per_s.saturating_mul(8)));
            }
        }
        let planned: Vec<NodeNum> = plan.contacts_from(self.cfg.node).map(|c| c.to).collect();
        for n in planned {
            let want = up.iter().find(|(m, _)| *m == n).map(|(_, r)| *r);
            match (want, self.links.get(&n).copied()) {
                (Some(r), Some(cur)) if r == cur => {}
                (Some(r), _) => self.link_up(now, n, r),
                (None, Some(_)) => self.link_down(now, n),
                (None, None) => {}
            }
        }
    }
}
