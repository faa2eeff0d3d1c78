//! Sans-IO DTNperf-style traffic: a client that generates bundles (window, interval or both bounded by a time,
//! data or count limit) and a server that acknowledges every bundle it receives.
//!
//! The same logic drives the simulator (`sim`) and the real `dtnkit perf` tool, so a simulated and a real run of
//! one experiment generate traffic by identical rules. Nothing here reads a clock or touches a socket: the driver
//! passes `now` (a [`Duration`] since an epoch of its choice) and moves payloads to and from its bundle layer.
//!
//! - [`Client`]: `next_send(now)` yields the next bundle payload when the window/interval allows it, `on_ack(now,
//!   ack)` consumes a server ACK, `poll_timeout()` says when the client wants to be asked again, `report()` gives
//!   counters and the application goodput.
//! - [`Server`]: `on_bundle(now, payload)` returns the ACK payload to send back to the bundle's source;
//!   `on_fragment` does the same for an ADU a node delivers fragment by fragment, once all its bytes arrived.
//! - [`payload`]: the wire format of data and ACK payloads (documented there; the real tool uses it too).

#![warn(missing_docs)]

mod client;
pub mod payload;
mod server;

pub use client::{
    AckInfo, BundleRecord, Client, ClientConfig, ClientReport, NextBundle, Outgoing, Pacing, Stop,
};
pub use payload::{Ack, DataHeader, PayloadError};
pub use server::{AduKey, Server, ServerStats, MAX_PARTIAL_ADUS, MAX_RANGES_PER_ADU};
