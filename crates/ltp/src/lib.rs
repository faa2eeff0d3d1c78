//! Licklider Transmission Protocol (RFC 5326, CCSDS 734.1-B-1) for dtnkit.
//!
//! Two layers:
//! - [`segment`]: the wire codec for all twelve segment types, with SDNV fields up to 64
//!   bits, preserved header/trailer extensions, strict decoding and typed errors.
//! - [`Engine`]: a sans-IO engine (sessions, red/green data, checkpoints, reports and claims,
//!   retransmission timers suspended while a link is down, cancellation, token-bucket pacing,
//!   block aggregation, signal replication, bounded memory), driven identically by the
//!   real-time runtime and the deterministic simulator.
//!
//! The optional [`log`] sink records every segment sent or received in the CSV format the
//! analyzer reads (`docs/ltp-segment-log.md`).

#![warn(missing_docs)]

pub mod config;
mod engine;
pub mod error;
pub mod event;
pub mod log;
pub mod pacing;
pub mod rangeset;
pub mod sdnv;
pub mod segment;
pub mod stats;

/// Re-export of the `bytes` crate used in the API (payloads are `Bytes` slices).
pub use bytes;
pub use config::{EngineConfig, SpanConfig};
pub use engine::{Engine, SendOutcome, Transmit};
pub use error::{DecodeError, RecvError, SendError};
pub use event::Event;
pub use log::{
    CsvSegmentLog, Direction, LogEvent, Outcome, RecordKind, SegmentRecord, SegmentSink,
};
pub use segment::{
    CancelReason, CheckpointInfo, Content, DataSegment, Extension, ReceptionClaim, ReportSegment,
    Segment, SegmentType, SessionId,
};
pub use stats::{EngineStats, SpanStats};
