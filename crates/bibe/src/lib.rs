//! Bundle-in-Bundle Encapsulation (BIBE, draft-ietf-dtn-bibect) with custody transfer: the
//! BIBE protocol data unit and custody signal codecs ([`pdu`]) and a sans-IO engine
//! ([`Engine`]) that both dtnkit drivers (the node and the simulator) run through the same glue.
//!
//! BIBE is a "convergence layer" whose link is the bundle network itself: a bundle for a tunnel
//! is carried as the payload of an administrative-record bundle (a BPDU) addressed to the
//! tunnel's far end, which decapsulates it and forwards it on. With custody transfer, the far
//! end signals that it has stored the bundle, and only then does the sender delete its copy.
//!
//! The engine never reads a clock, opens a socket or touches the store: `now` (DTN ms) is an
//! argument; bundles to send come out of [`Engine::send`] and [`Engine::poll_transmit`] as
//! encoded bundles the driver stores and forwards; what the driver must do comes out of
//! [`Engine::poll_event`]; its timers are [`Engine::poll_timeout`] / [`Engine::handle_timeout`].
//!
//! # Policies
//!
//! - **Custody is taken only for what is durably stored.** The decapsulating driver offers the
//!   encapsulated bundle to its store and reports [`Disposition::Accepted`] only when the store
//!   committed it. A duplicate (the bundle is already there, or was within its lifetime) is
//!   refused as `Redundant`, which releases the sender too (someone holds custody). A full or
//!   failed store refuses with `DepletedStorage`; a bundle that does not decode with
//!   `BlockUnintelligible`.
//! - **Nothing is released before the next custodian's acceptance.** The sender keeps the
//!   bundle (in its store, and in memory for retransmission) until a signal from the tunnel's
//!   own endpoint names its transmission ID. Signals from any other node are ignored (counted
//!   in [`BibeCounters::signal_ids_unknown`]).
//! - **Retransmission.** A BPDU without a signal is retransmitted every
//!   [`TunnelConfig::custody_timer_ms`], under the same transmission ID (a late signal for an
//!   earlier copy still releases it), in a new encapsulating bundle (new creation timestamp, so
//!   the network does not discard it as a duplicate), until the encapsulated bundle's lifetime
//!   ends. There is no retry limit: the lifetime is the limit.
//! - **Refusal.** `Redundant` releases; any other reason hands the bundle back to the driver
//!   ([`Event::Refused`]), which routes it again (after `DepletedStorage`, backing off from the
//!   tunnel first).
//! - **Aggregation.** The decapsulating side collects decisions per custodian and disposition
//!   and sends one signal, its transmission IDs merged into ranges of consecutive IDs,
//!   [`EngineConfig::signal_delay_ms`] after the first decision, or at once when
//!   [`EngineConfig::max_signal_ids`] are waiting.
//! - **Restarts.** The engine keeps no files: its driver persists what it needs. Each
//!   [`Encapsulated`] names the encapsulated bundle ([`Encapsulated::inner_id`]) and its
//!   transmission ID, which the driver records durably with the bundle (`cla::BibeCla` writes a
//!   note in the agent's store). After a restart the driver hands the same bundle back with
//!   [`Engine::resend`] and its recorded ID, so a late signal for the earlier transmission still
//!   releases it; new bundles get IDs from `now × 1024`, never a previous run's. A receiver that
//!   already stored one refuses it as `Redundant`, which releases the sender.
//! - **Bounded memory.** At most [`EngineConfig::max_custody_bundles`] bundles and
//!   [`EngineConfig::max_custody_bytes`] bytes wait for custody ([`SendError::CustodyFull`]
//!   beyond); a received signal may carry at most [`pdu::MAX_SIGNAL_RANGES`] ranges; at most
//!   [`EngineConfig::max_signal_groups`] custodians have a signal being aggregated.
//! - **Peer input never panics.** A malformed BIBE record is counted and dropped
//!   ([`PduError`]); the sender's timer recovers a dropped BPDU.
//!
//! # Wire format
//!
//! See [`pdu`]: record type 3 (BPDU: transmission ID, retransmission time, encapsulated
//! bundle) and 4 (custody signal: disposition, ranges of transmission IDs as first ID and
//! count); ION's codes 7 and 8 are accepted on receipt.
//!
//! ```
//! use bibe::{Disposition, Engine, EngineConfig, Event, TunnelConfig};
//! use bpv7::{AdminRecord, Bundle, BundleBuilder, Eid};
//!
//! let now = 800_000_000_000;
//! let mut a = Engine::new(EngineConfig::new(Eid::ipn(1, 0)), now);
//! let mut b = Engine::new(EngineConfig::new(Eid::ipn(2, 0)), now);
//! a.add_tunnel(102, TunnelConfig::new(Eid::ipn(2, 0)));
//! let inner = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(3, 1))
//!     .creation(bpv7::CreationTimestamp::new(now, 0))
//!     .payload(&b"hello"[..])
//!     .build()?;
//! let enc = a.send(now, 102, 7, inner.encode().into())?;
//! // The network carries the encapsulating bundle to node 2's administrative endpoint.
//! let outer = Bundle::decode(enc.bundle)?;
//! let record = AdminRecord::decode(&outer.payload())?;
//! b.handle_record(now, &outer.primary().source, &record)?;
//! let Some(Event::Decapsulated { custody: Some(req), .. }) = b.poll_event() else { panic!() };
//! // Node 2 stored the bundle: it accepts custody; the signal leaves after the delay.
//! b.custody_decision(now, &req, Disposition::Accepted);
//! b.handle_timeout(now + 100);
//! let signal = Bundle::decode(b.poll_transmit().unwrap().bundle)?;
//! a.handle_record(now + 150, &signal.primary().source, &AdminRecord::decode(&signal.payload())?)?;
//! assert!(matches!(a.poll_event(), Some(Event::Released { token: 7, .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod engine;
pub mod error;
pub mod pdu;
pub mod settings;

pub use engine::{
    BibeCounters, CustodyRequest, DtnTime, Encapsulated, Engine, EngineConfig, Event, Handled,
    Outbound, OutboundKind, TunnelConfig,
};
pub use error::{PduError, SendError};
pub use pdu::{BibeRecord, Bpdu, CustodySignal, Disposition, IdRange, RecordCodes, RefusalReason};
