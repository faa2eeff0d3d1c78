//! Real I/O for dtnkit: the pieces that touch sockets, clocks and threads.
//!
//! - [`udp`]: batched UDP on Linux (`recvmmsg`/`sendmmsg`), large socket buffers, precise readiness waits. Reused
//!   later by the LTP and BP drivers.
//! - [`emu`]: the real-time link emulator — a UDP relay between two endpoints that applies a
//!   [`channel::Link`]'s forward and return models to every datagram.
//! - [`node`]: the real-time DTN node (`dtnkit node`): BP agent + store, LTP over UDP, contact
//!   plan, application socket.

#![warn(missing_docs)]

pub mod cfdp;
pub mod emu;
pub mod node;
pub mod udp;
