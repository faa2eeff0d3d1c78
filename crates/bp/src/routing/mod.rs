//! Routing: choosing the next hop for a bundle.
//!
//! Two mechanisms, meant to be combined by the agent in this order (ION's order too):
//!
//! 1. [`Cgr`]: contact graph routing over the [`ContactPlan`](crate::ContactPlan), giving the
//!    earliest-delivery route for a bundle of a given size, honouring contact volume
//!    (CCSDS SABR 734.3-B-1 style);
//! 2. [`StaticRoutes`]: fixed `destination (range) → next hop` entries, for destinations the plan
//!    does not reach (e.g. a default gateway, or always-on terrestrial links without a plan).

mod cgr;
#[cfg(test)]
mod cgr_reference;
mod static_routes;

pub use cgr::{BundleSpec, Cgr, CgrLimits, CgrStats, Exclusions, Hop, NoRoute, Route};
pub use static_routes::{NodeRange, NodeRangeError, StaticRoute, StaticRoutes};
