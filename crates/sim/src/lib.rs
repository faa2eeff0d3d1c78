//! Deterministic discrete-event simulator for dtnkit: the real LTP engine (`ltp`) over links built from the
//! `channel` models, in virtual time.
//!
//! - [`Scenario`]: the TOML scenario (nodes, LTP settings, processing costs, links with forward/return channel
//!   models, contact windows, DTNperf-style traffic, logs), strictly validated.
//! - [`Simulation`]: builds the world from a scenario and runs it: `run()`, or `run_until(t)` in slices for a
//!   progress display; `summary()`, `sessions()`, `nodes()` for results.
//!
//! Determinism: one seeded event order. Events are ordered by (time, insertion sequence); every random stream
//! (link losses, jitter, LTP session numbers, generated traces) is derived from the scenario seed; no wall clock,
//! no threads, and no hash-map iteration influences the order of anything (maps are only used for lookups).
//!
//! Links decide each datagram's fate with `channel::LinkDirection::transit(now, len)` at the instant the engine
//! hands it over — the same call the real-time emulator makes when the datagram reaches its relay — so an
//! emulated and a simulated run of a scenario take the same decisions for the same send times.
//!
//! Processing cost: each node has one modelled CPU (see [`scenario::ProcessingSection`]): received datagrams pass
//! a pipeline delay, wait in a bounded receive queue (full → dropped and counted, like a socket buffer) and
//! occupy the CPU for a per-segment cost, received bundles for a per-bundle cost; work queues up FIFO like on a
//! real host. With the agent, a received block's bundles are then committed (modelled commit time) and only
//! then confirmed to LTP, which holds the final report until that moment (`defer_final_report`, as real nodes do).
//!
//! Logs ([`log`]): one LTP segment CSV and one bundle event CSV per node, written by the same writers real nodes
//! use (`ltp::CsvSegmentLog`, the agent's `bp::CsvBundleLog`), with timestamps from the virtual clock only.
//!
//! CFDP (`[[cfdp]]`, module [`cfdp_app`]): the real `cfdp::Entity` of every node that takes part, with synthetic
//! source files, its PDUs either straight over the scenario's link (one datagram per PDU, through the same
//! channel models as LTP) or one per bundle through the bundle layer; per-transfer results in
//! [`Summary::cfdp`].
//!
//! Bundle layer (`[sim] bundle_layer`): by default every node hosts the real `bp` agent with a `MemoryStore`
//! (DTN time = `epoch_dtn_ms` + elapsed virtual ms; static routes, then direct neighbours; links brought up and
//! down with the contact windows); `"static"` selects a minimal static-route layer for LTP-only studies.
//!
//! BIBE (`[node.bibe]`, `[[node.bibe_peer]]`, module [`bibe_sim`]): tunnels with custody transfer through
//! `cla::BibeCla`, the adapter real nodes use, on the agent layer.

#![warn(missing_docs)]

pub mod bibe_sim;
pub mod bound;
pub mod cfdp_app;
pub mod log;
pub mod node;
pub mod queue;
pub mod scenario;
mod world;

pub use bibe_sim::BibeReport;
pub use cfdp_app::{AvailabilityWatch, CfdpTransferResult};
pub use node::{BundleCounters, Node, SessionRecord};
pub use scenario::{Scenario, ScenarioError};
pub use world::{Simulation, Summary};
