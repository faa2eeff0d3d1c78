//! Real I/O for dtnkit: the pieces that touch sockets, clocks and threads.
//!
//! - [`node`]: the real-time DTN node (`dtnkit node`): BP agent + store, LTP over UDP, contact
//!   plan, application socket.
//! - [`sd_notify`]: the systemd readiness notification of `dtnkit node` under `Type=notify`.

#![warn(missing_docs)]

pub mod node;
pub mod sd_notify;
