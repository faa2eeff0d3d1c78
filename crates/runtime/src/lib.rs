//! Real I/O for dtnkit: the pieces that touch sockets, clocks and threads.
//!
//! - [`emu`]: the real-time link emulator — a UDP relay between two endpoints that applies a
//!   [`channel::Link`]'s forward and return models to every datagram.
//! - [`ipemu`]: the emulator's IP mode — network namespaces joined through the same channel models by TUN
//!   devices, so any program's IP traffic crosses an emulated link.
//! - [`tcpxfer`]: a kernel-TCP file transfer (sender, receiver, splitting gateway) with per-socket congestion
//!   control and buffers, the TCP baseline of the seed experiments.
//! - [`node`]: the real-time DTN node (`dtnkit node`): BP agent + store, LTP over UDP, contact
//!   plan, application socket.
//! - [`sd_notify`]: the systemd readiness notification of `dtnkit node` under `Type=notify`.

#![warn(missing_docs)]

pub mod cfdp;
pub mod emu;
pub mod ipemu;
pub mod node;
mod release;
pub mod sd_notify;
pub mod tcpxfer;
