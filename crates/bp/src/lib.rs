//! The Bundle Protocol agent of dtnkit.
//!
//! For now this crate holds the parts of the agent that decide *when* and *where* bundles can go:
//!
//! - [`contact_plan`]: the schedule of contacts (transmission opportunities with a rate) and ranges
//!   (one-way light times) between nodes, loaded from ION-compatible `ionadmin`-style lines or an
//!   equivalent TOML form, with the queries a node runtime or simulator needs to bring links up and
//!   down ([`ContactPlan::link_events`]).
//! - [`routing`]: static routes and contact graph routing (CGR, CCSDS SABR 734.3-B-1 style) that
//!   computes the earliest-delivery route for a bundle over the contact graph, honouring contact
//!   volume.
//!
//! Everything here is sans-IO: time is a value passed in (milliseconds relative to the plan epoch),
//! nothing reads a clock or touches a socket. See `docs/contact-plan.md` for the file formats and the
//! routing semantics.
#![warn(missing_docs)]

pub mod contact_plan;
pub mod routing;

pub use contact_plan::{
    Contact, ContactId, ContactPlan, LinkEvent, LinkEventKind, NodeNum, PlanError, PlannedContact,
    PlannedRange, Range, RangeId,
};
pub use routing::{
    BundleSpec, Cgr, CgrLimits, Exclusions, Hop, NoRoute, NodeRange, Route, StaticRoute,
    StaticRoutes,
};
