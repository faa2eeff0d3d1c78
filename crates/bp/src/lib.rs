//! The Bundle Protocol agent of dtnkit.
//!
//! - [`agent`]: the sans-IO BPv7 agent core ([`Agent`]): reception and validation (via `bpv7`),
//!   duplicate suppression, lifetime expiry, hop limits, status reports, delivery to registered
//!   endpoints (with reassembly), the echo service, forwarding decisions (static routes, CGR,
//!   direct neighbours), per-neighbour priority queues, retention until the convergence layer
//!   reports success and immediate re-forwarding when it reports failure, and a CSV bundle event
//!   log. The driver contract is `AGENT_API.md`; durability rules in `docs/store.md`.
//! - [`store`]: where the agent keeps bundles: the [`Store`] trait (atomic group commits),
//!   [`MemoryStore`] for the simulator and tests, [`RedbStore`] (embedded ACID database) for the
//!   runtime.
//! - [`contact_plan`]: the schedule of contacts (transmission opportunities with a rate) and ranges
//!   (one-way light times) between nodes, loaded from ION-compatible `ionadmin`-style lines or an
//!   equivalent TOML form, with the queries a node runtime or simulator needs to bring links up and
//!   down ([`ContactPlan::link_events`]).
//! - [`routing`]: static routes and contact graph routing (CGR, CCSDS SABR 734.3-B-1 style) that
//!   computes the earliest-delivery route for a bundle over the contact graph, honouring contact
//!   volume.
//!
//! ```
//! use bp::{BundleSpec, Cgr, CgrLimits, ContactPlan, Exclusions, LinkEventKind};
//!
//! let plan = ContactPlan::from_ion_str(
//!     "a contact +0 +60 1 2 125000\n\
//!      a contact +30 +90 2 3 125000\n\
//!      a range +0 +90 1 2 0.01\n\
//!      a range +0 +90 2 3 1.25\n",
//!     "demo.rc",
//!     0, // plan epoch, DTN time in ms
//! )?;
//! // The runtime drives node 1's link to 2 from the plan.
//! let first = plan.link_events(1, 0).next();
//! assert!(matches!(first.map(|e| e.kind), Some(LinkEventKind::Up { rate_bytes_per_s: 125_000, .. })));
//! // Node 1 routes a 125 kB bundle to 3 through 2: 1 s on each hop, waiting for 2→3 at 30 s.
//! let mut cgr = Cgr::new(1, CgrLimits::default());
//! let bundle = BundleSpec { size_bytes: 125_000, now_ms: 0, deadline_ms: None };
//! let route = cgr.route(&plan, 3, bundle, &Exclusions::default())?;
//! assert_eq!((route.next_hop, route.arrival_ms), (2, 30_000 + 1_000 + 1_250));
//! cgr.book(&route, bundle.size_bytes);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Everything here is sans-IO: time is a value passed in (milliseconds relative to the plan epoch),
//! nothing reads a clock or touches a socket. See `docs/contact-plan.md` for the file formats and the
//! routing semantics.
#![warn(missing_docs)]

pub mod agent;
pub mod contact_plan;
pub mod routing;
pub mod store;

pub use agent::{
    crcs_ok, split_failure_reason, Accepted, AdminNotice, Agent, AgentConfig, AgentError,
    AgentStatus, BlockDiscard, BlockVerdict, BundleEvent, BundleEventKind, BundleEventSink,
    BundleRows, ClaBlock, ClaOutcome, CsvBundleLog, CsvLog, CsvRouteLog, CsvRows, Degraded,
    Delivery, DeliveryReadError, DeliveryRef, DtnTime, Forward, ForwardRef, HopBundle,
    NeighbourBackoff, ReportFlags, RouteEvent, RouteEventKind, RouteEventSink, RouteMethod,
    RouteRows, RxError, SendError, SendRequest, StoreHealth, StreamPlan, StreamRequest,
    ROUTE_CSV_HEADER,
};
pub use contact_plan::{
    Contact, ContactId, ContactIndex, ContactPlan, IndexedContact, LinkEvent, LinkEventKind,
    NodeNum, PairRun, PlanError, PlannedContact, PlannedRange, Range, RangeId,
};
pub use routing::{
    BundleSpec, Cgr, CgrLimits, CgrStats, Exclusions, Hop, NoRoute, NodeRange, Route, StaticRoute,
    StaticRoutes,
};
pub use store::{
    Batch, BundleKey, BundleMeta, MemoryStore, RedbStore, Role, StageFile, StagedPiece, StagedRun,
    StagedTail, Stager, Store, StoreError, StoredBytes, StoredRead,
};
