//! Deterministic, sans-IO models of a space link, shared by the real-time emulator and the simulator.
//!
//! A [`Link`] is a forward and a return [`LinkDirection`]. Each direction decides, at the moment a packet is handed
//! to it, what happens to that packet ([`Fate`]): it is delivered at a given time, or lost for a given
//! [`LossCause`]. The decision depends only on the configuration, the seed and the sequence of `(now, len)` calls, so
//! the discrete-event simulator and the real-time relay reach the same decisions for the same arrival times.
//!
//! The crate never reads a clock, opens a socket or spawns a thread. Time is a [`std::time::Duration`] since an
//! arbitrary epoch chosen by the caller (the same convention as the LTP engine), and calls for one direction must use
//! non-decreasing times.
//!
//! Building blocks, each usable on its own:
//! - [`loss`]: per-packet loss processes (none, IID, BER, Gilbert–Elliott, erasure-trace replay);
//! - [`availability`]: on/off schedules and the two-state Markov availability of seed 004;
//! - [`trace`]: the erasure-trace formats (plain 0/1 and run-length) and their parser;
//! - [`stats`]: Table I statistics of an erasure trace; [`gen`]: a semi-Markov trace generator with presets A/F/H;
//! - [`link`]: serialization (rate + finite tail-drop queue) and delay/jitter combined into a direction;
//! - [`config`]: the serde configuration (TOML `[forward]` / `[return]` sections) with field-by-field validation.

#![warn(missing_docs)]

pub mod availability;
pub mod config;
pub mod gen;
pub mod link;
pub mod loss;
mod rng;
mod sojourn;
pub mod stats;
pub mod trace;

pub use availability::{Availability, MarkovAvailability, Schedule};
pub use config::{ConfigError, DirectionConfig, LinkConfig};
pub use link::{
    Direction, DirectionCounters, DirectionModel, Fate, Link, LinkDirection, LossCause, Overhead,
};
pub use loss::{GilbertElliott, LossModel};
pub use stats::TraceStats;
pub use trace::{ErasureTrace, TraceError};
