//! The real-time link emulators: the channel models of the `channel` crate applied to real traffic, in real time.
//!
//! - [`relay`]: `dtnkit emu` — a UDP relay between two endpoints that applies a [`channel::Link`]'s forward and
//!   return models to every datagram.
//! - [`ip`]: `dtnkit emu --ip` — network namespaces joined through the same channel models by TUN devices, so any
//!   program's IP traffic crosses an emulated link.
//!
//! Both hold delivered packets until their release time in the same min-heap entry (`release`). The simulator
//! (`sim`) asks the same models in virtual time, so a simulated and an emulated run of one scenario agree.

#![warn(missing_docs)]

pub mod ip;
pub mod relay;
mod release;
