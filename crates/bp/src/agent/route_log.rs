//! The route decision log: one record per forwarding decision the agent takes for a bundle (the
//! next hop and, when contact graph routing chose it, the contacts booked), per search that found
//! no route, and per booking released. Written as CSV (columns in `docs/route-log.md`) by
//! [`CsvRouteLog`]; off unless the driver installs a sink with [`crate::Agent::set_route_sink`].
//!
//! It is what a researcher needs to see why bundles went where they did, and what an independent
//! check needs to verify that no contact was booked beyond its volume: the bytes booked on every
//! contact are the sum of the `routed` rows' lengths minus the `released` rows', without asking
//! [`crate::Cgr`] for its own tally.

use std::io::Write;

use bpv7::{BundleId, Eid};

use super::csv_log::{CsvLog, CsvRows};
use super::{Agent, DtnTime};
use crate::routing::Route;
use crate::store::{BundleKey, BundleMeta, Store};
use crate::NodeNum;

/// What the record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteEventKind {
    /// The bundle was given a next hop (and, with CGR, its length booked on the route's contacts).
    Routed,
    /// A route search found no route; the bundle waits and is routed again when links or the plan
    /// change. Calls answered by CGR's no-route memo (a repeat of an earlier search's answer for
    /// the same plan and bookings) are not logged again.
    NoRoute,
    /// A CGR booking was released: the bundle's queue went down, its forwarding failed, or it
    /// left the node before it was handed to the convergence layer (expired, deleted).
    Released,
}

impl RouteEventKind {
    /// The name written in the `event` column.
    pub fn name(self) -> &'static str {
        match self {
            RouteEventKind::Routed => "routed",
            RouteEventKind::NoRoute => "no_route",
            RouteEventKind::Released => "released",
        }
    }
}

/// How the decision was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteMethod {
    /// CGR, from a cached route list (re-projected for this bundle).
    CgrCached,
    /// CGR, after computing route lists (`route_lists` of them).
    CgrSearched,
    /// A static route.
    Static,
    /// No CGR route; the destination is an up neighbour.
    Neighbour,
    /// A `dtn:` destination's configured route.
    DtnRoute,
}

impl RouteMethod {
    /// The name written in the `method` column.
    pub fn name(self) -> &'static str {
        match self {
            RouteMethod::CgrCached => "cgr_cached",
            RouteMethod::CgrSearched => "cgr_searched",
            RouteMethod::Static => "static",
            RouteMethod::Neighbour => "neighbour",
            RouteMethod::DtnRoute => "dtn_route",
        }
    }
}

/// One routing record.
#[derive(Debug, Clone)]
pub struct RouteEvent<'a> {
    /// DTN time of the decision (ms).
    pub time_ms: u64,
    /// What happened.
    pub kind: RouteEventKind,
    /// The bundle.
    pub id: &'a BundleId,
    /// Encoded bundle length: the bytes booked or released.
    pub length: u64,
    /// Its destination.
    pub destination: &'a Eid,
    /// The next hop chosen (`Routed`; for `Released`, the one it had).
    pub next_hop: Option<NodeNum>,
    /// How (`Routed`, and `NoRoute` for CGR searches).
    pub method: Option<RouteMethod>,
    /// Routes in the CGR route list the choice was made from (the alternatives considered).
    pub alternatives: Option<usize>,
    /// CGR route lists computed by this call (0: answered from the cache).
    pub route_lists: Option<u64>,
    /// The CGR route (its contacts are the ones booked or released).
    pub route: Option<&'a Route>,
    /// DTN time of the contact plan's epoch: added to the route's plan-relative times.
    pub plan_epoch_dtn_ms: u64,
}

/// Receives routing records. Implementations must not block for long: the agent calls them inline.
pub trait RouteEventSink {
    /// Records one decision.
    fn record(&mut self, event: &RouteEvent<'_>);

    /// Writes out what is buffered (see [`crate::BundleEventSink::flush`]).
    fn flush(&mut self) {}
}

/// The CSV header line of the route log (without newline).
pub const ROUTE_CSV_HEADER: &str = "time_ms,event,source,creation_ms,sequence,frag_offset,frag_length,length,destination,next_hop,method,alternatives,route_lists,arrival_ms,contacts";

/// The rows of the route decision log ([`CsvRouteLog`]).
#[derive(Debug, Clone, Copy)]
pub enum RouteRows {}

impl CsvRows for RouteRows {
    const HEADER: &'static str = ROUTE_CSV_HEADER;
}

/// Writes routing records as CSV (see `docs/route-log.md`).
pub type CsvRouteLog<W> = CsvLog<W, RouteRows>;

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl<W: Write> RouteEventSink for CsvRouteLog<W> {
    fn flush(&mut self) {
        self.flush_counted();
    }

    fn record(&mut self, e: &RouteEvent<'_>) {
        let (frag_offset, frag_length) = match e.id.fragment {
            Some((o, l)) => (o.to_string(), l.to_string()),
            None => (String::new(), String::new()),
        };
        let epoch = e.plan_epoch_dtn_ms;
        let (arrival, contacts) = match e.route {
            Some(r) => {
                let hops: Vec<String> = r
                    .hops
                    .iter()
                    .map(|h| {
                        format!(
                            "{}:{}:{}:{}:{}:{}:{}",
                            h.from,
                            h.to,
                            h.contact_start_ms.saturating_add(epoch),
                            h.contact_end_ms.saturating_add(epoch),
                            h.rate_bytes_per_s,
                            h.tx_start_ms.saturating_add(epoch),
                            h.arrival_ms.saturating_add(epoch),
                        )
                    })
                    .collect();
                (
                    r.arrival_ms.saturating_add(epoch).to_string(),
                    hops.join(";"),
                )
            }
            None => (String::new(), String::new()),
        };
        self.row(format_args!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            e.time_ms,
            e.kind.name(),
            e.id.source.to_string().replace(',', "%2C"),
            e.id.timestamp.dtn_time_ms,
            e.id.timestamp.sequence,
            frag_offset,
            frag_length,
            e.length,
            e.destination.to_string().replace(',', "%2C"),
            opt(e.next_hop),
            e.method.map(RouteMethod::name).unwrap_or_default(),
            opt(e.alternatives),
            opt(e.route_lists),
            arrival,
            contacts,
        ));
    }
}

/// Writes one `released` record for `meta`'s booking on `route` (nothing without a sink).
fn record_release(
    sink: &mut Option<Box<dyn RouteEventSink + Send>>,
    epoch: u64,
    now: DtnTime,
    meta: &BundleMeta,
    route: &Route,
) {
    if let Some(sink) = sink.as_mut() {
        sink.record(&RouteEvent {
            time_ms: now,
            kind: RouteEventKind::Released,
            id: &meta.id,
            length: meta.len,
            destination: &meta.destination,
            next_hop: Some(route.next_hop),
            method: None,
            alternatives: None,
            route_lists: None,
            route: Some(route),
            plan_epoch_dtn_ms: epoch,
        });
    }
}

impl<S: Store> Agent<S> {
    fn plan_epoch(&self) -> u64 {
        self.routing.plan.as_ref().map_or(0, |p| p.epoch_dtn_ms())
    }

    /// Logs the release of the booking of a bundle taken out of the entries (`meta`).
    pub(super) fn log_release(&mut self, now: DtnTime, meta: &BundleMeta, route: &Route) {
        let epoch = self.plan_epoch();
        record_release(&mut self.route_sink, epoch, now, meta, route);
    }

    /// Logs the release of the booking of stored bundle `key`.
    pub(super) fn log_release_key(&mut self, now: DtnTime, key: BundleKey, route: &Route) {
        if self.route_sink.is_none() {
            return;
        }
        let epoch = self.plan_epoch();
        if let Some(e) = self.entries.get(&key) {
            record_release(&mut self.route_sink, epoch, now, &e.meta, route);
        }
    }

    /// Logs a decision (`Routed` or `NoRoute`) about stored bundle `key`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn log_route(
        &mut self,
        now: DtnTime,
        key: BundleKey,
        kind: RouteEventKind,
        next_hop: Option<NodeNum>,
        method: Option<RouteMethod>,
        cgr: Option<(usize, u64)>,
        route: Option<&Route>,
    ) {
        if self.route_sink.is_none() {
            return;
        }
        let epoch = self.plan_epoch();
        let Some(e) = self.entries.get(&key) else {
            return;
        };
        if let Some(sink) = self.route_sink.as_mut() {
            sink.record(&RouteEvent {
                time_ms: now,
                kind,
                id: &e.meta.id,
                length: e.meta.len,
                destination: &e.meta.destination,
                next_hop,
                method,
                alternatives: cgr.map(|c| c.0),
                route_lists: cgr.map(|c| c.1),
                route,
                plan_epoch_dtn_ms: epoch,
            });
        }
    }

    /// Whether a route log is installed (decisions are only gathered then).
    pub(super) fn route_logging(&self) -> bool {
        self.route_sink.is_some()
    }
}
