//! CCSDS File Delivery Protocol (CCSDS 727.0-B-5) for dtnkit.
//!
//! - [`pdu`]: the wire codec for every PDU and TLV, strict decoding with typed errors.
//! - [`checksum`]: the SANA checksum algorithms (modular, Proximity-1 CRC-32, CRC-32C, CRC-32,
//!   null) at memory speed.
//! - [`error`]: the codec's typed errors, [`error::DecodeError`] (why a received PDU was
//!   refused, naming field and value) and [`error::EncodeError`] (a value the wire format cannot
//!   carry).
//! - [`Entity`]: a sans-IO CFDP entity (class 1 and 2, every NAK mode, CFDP-repeat, timers,
//!   faults, suspend/resume/cancel/report, filestore requests), driven identically by the
//!   real-time runtime (`dtnkit cfdp`) and the simulator; files through a [`Filestore`].
//! - [`rangeset`]: received and requested byte ranges.
//!
//! # Driving an entity
//!
//! The driver owns the clock and the link. Two entities over a lossless, instant link in
//! virtual time:
//!
//! ```
//! use std::time::Duration;
//! use cfdp::{bytes::Bytes, Entity, EntityConfig, Event, MemFilestore, PutRequest, Role};
//!
//! let mut files = MemFilestore::new();
//! files.insert("obs.dat", vec![42u8; 10_000]);
//! let mut a = Entity::new(EntityConfig::new(1), Box::new(files));
//! let mut b = Entity::new(EntityConfig::new(2), Box::new(MemFilestore::new()));
//! a.put(Duration::ZERO, PutRequest::new(2, "obs.dat")).unwrap();
//!
//! let now = Duration::ZERO;
//! let mut buf = Vec::new();
//! let mut delivered = None;
//! loop {
//!     let mut moved = false;
//!     while let Some(t) = a.poll_transmit(now, &mut buf) {
//!         let pdu = Bytes::copy_from_slice(&buf[buf.len() - t.len..]);
//!         b.handle_pdu(now, &pdu).unwrap();
//!         moved = true;
//!     }
//!     while let Some(t) = b.poll_transmit(now, &mut buf) {
//!         let pdu = Bytes::copy_from_slice(&buf[buf.len() - t.len..]);
//!         a.handle_pdu(now, &pdu).unwrap();
//!         moved = true;
//!     }
//!     while let Some(ev) = b.poll_event() {
//!         if let Event::Finished { role: Role::Receiver, file, .. } = ev {
//!             delivered = file;
//!         }
//!     }
//!     while a.poll_event().is_some() {}
//!     if !moved {
//!         break; // a real driver sleeps until poll_timeout() and calls handle_timeout()
//!     }
//! }
//! assert_eq!(delivered.as_deref(), Some("obs.dat"));
//! assert_eq!(b.filestore().size("obs.dat").unwrap(), 10_000);
//! assert!(a.is_idle() && b.is_idle());
//! ```
//!
//! # Policies worth knowing
//!
//! - **Transmission order**: directives first (in the order they were queued), then File Data
//!   round-robin across sending transactions, a transaction's NAKed ranges before its new data;
//!   everything toward one remote passes that remote's token bucket (`RemoteConfig::rate_bps`).
//!   Nothing is sent toward a remote whose link is down ([`Entity::set_link`]).
//! - **Timers** start when the PDU that arms them leaves `poll_transmit` and are frozen (remaining
//!   time kept) while the transaction is suspended or its peer's link is down. The sender's
//!   inactivity timer runs from its EOF on; the receiver's from its first PDU.
//! - **NAK limit** counts NAK timer expirations without any new file data; **ACK limit** counts
//!   positive-ACK timer expirations (EOF or Finished); both raise their fault.
//! - **Faults** go to the handler of the condition (`EntityConfig::fault_handlers`, overridden per
//!   transaction by the Metadata's fault handler overrides); cancel is the default.
//! - **Memory and hostile input**: file data goes straight to the filestore at its offset; a
//!   range set records what arrived, so duplicates are neither written nor counted twice; offsets
//!   beyond the declared size or `EntityConfig::max_file_size` raise "file size error" before
//!   any write; destination names are checked when the Metadata arrives (an empty one only
//!   for a Metadata without file data) and a bad one ends the transaction with "filestore
//!   rejection" before any of its data is written; a receiver never reports a file complete
//!   before its checksum verified, nor delivered without a file.
//! - **Hostile peers** (see `docs/cfdp.md`, "Against a hostile peer"): file data before the
//!   Metadata is kept up to `EntityConfig::max_bytes_before_metadata`; receptions claim their
//!   declared size against per-peer and total partial-file budgets; partial files are removed
//!   however a transaction ends ([`Entity::sweep_partials`] removes those of a killed process);
//!   at `max_transactions_per_peer` or `max_transactions`, the oldest reception that never
//!   progressed gives way ([`Event::Evicted`]). Refusals of this entity's own limits cancel the
//!   transaction whatever fault handler the peer's Metadata asked for.
//! - **Persistence**: class-2 transactions can be snapshotted ([`Entity::take_dirty`],
//!   [`Entity::snapshot`]) and restored after a restart ([`Entity::restore`]).

#![warn(missing_docs)]

mod beneath;
pub mod checksum;
pub mod engine;
pub mod error;
pub mod filestore;
pub mod pdu;
pub mod rangeset;

pub use bytes;
pub use engine::{
    AdaptiveTimers, EffectiveTimers, Entity, EntityConfig, EntityStats, Event, NakMode, PduError,
    PutError, PutRequest, RemoteConfig, Role, RttEstimator, Snapshot, TransactionSummary, Transmit,
    NAK_HINT_PREFIX,
};
pub use filestore::{Filestore, FilestoreError, MemFilestore, NativeFilestore};
