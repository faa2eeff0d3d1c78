//! The dtnkit application interface: how a local application talks to a running `dtnkit node`.
//!
//! - [`proto`]: the versioned, length-prefixed binary protocol spoken over the node's Unix socket
//!   (documented in `docs/app-protocol.md`). The node uses the same codec, so both ends agree by
//!   construction, and the decoder is strict and never panics on malformed frames.
//! - [`Client`]: a blocking Rust client: register an endpoint, send bundles (acknowledged only
//!   after the node's durable commit), receive bundles and acknowledge them, query status.
//!   Sends can be pipelined ([`Client::submit`], [`Client::next_send_result`]) so that many
//!   bundles are in flight and the node can commit them together.
//!   It de-duplicates deliveries by bundle id, so an application sees each bundle once even when
//!   a restarted node offers again a bundle that was delivered but not yet acknowledged.
//! - [`status`]: the node's status reply as typed structs ([`NodeStatus`]), written by the node
//!   and read by everyone who reads a status.

#![warn(missing_docs)]

mod client;
pub mod fdpass;
pub mod proto;
pub mod status;

/// Re-export of the `bytes` crate used in the API (payloads are `Bytes`).
pub use bytes;
pub use client::{Client, ClientError, Received};
pub use proto::{BundleId, ErrorKind, Request, Response, SendArgs, StreamArgs};
pub use status::NodeStatus;
