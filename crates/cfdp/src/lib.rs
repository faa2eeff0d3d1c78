//! CCSDS File Delivery Protocol (CCSDS 727.0-B-5) for dtnkit.
//!
//! - [`pdu`]: the wire codec for every PDU and TLV, strict decoding with typed errors.
//! - [`checksum`]: the SANA checksum algorithms (modular, Proximity-1 CRC-32, CRC-32C, CRC-32,
//!   null) at memory speed.
//! - [`error`]: the codec's typed errors, [`error::DecodeError`] (why a received PDU was
//!   refused, naming field and value) and [`error::EncodeError`] (a value the wire format cannot
//!   carry).

#![warn(missing_docs)]

pub mod checksum;
pub mod error;
pub mod pdu;

pub use bytes;
pub mod engine;
pub mod filestore;
pub mod rangeset;

pub use engine::{
    Entity, EntityConfig, EntityStats, Event, NakMode, PduError, PutError, PutRequest,
    RemoteConfig, Role, Snapshot, TransactionSummary, Transmit, NAK_HINT_PREFIX,
};
pub use filestore::{Filestore, FilestoreError, MemFilestore, NativeFilestore};
