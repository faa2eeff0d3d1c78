//! The per-segment event log (one record per segment sent or received, plus timer and
//! session events), written through a sink the driver provides.
//!
//! The analyzer computes session durations, retransmission cycles, RTO expirations and
//! checkpoint losses from these records only, so real and simulated runs are comparable.
//! The CSV columns are documented in `docs/ltp-segment-log.md`.

use std::io::{self, Write};
use std::time::Duration;

use crate::segment::{CancelReason, SegmentType};

/// Whether a record describes a transmitted segment, a received one, or an engine event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Segment handed to the driver by `poll_transmit`.
    Tx,
    /// Segment accepted by `handle_datagram` (decoded successfully).
    Rx,
    /// Engine event (timer expiry, session start/end, link change).
    Ev,
}

impl Direction {
    /// Value of the `dir` column.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tx => "tx",
            Self::Rx => "rx",
            Self::Ev => "ev",
        }
    }
}

/// Engine events recorded alongside segments (`dir = ev`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogEvent {
    /// A checkpoint retransmission timer expired (the checkpoint or its report was lost).
    CheckpointTimeout,
    /// A report retransmission timer expired (the report or its RA was lost).
    ReportTimeout,
    /// A cancel retransmission timer expired.
    CancelTimeout,
    /// An export session started (first segment queued).
    ExportStart,
    /// An export session ended; `outcome` says how.
    ExportEnd,
    /// An import session opened (first segment accepted).
    ImportStart,
    /// An import session closed; `outcome` says how.
    ImportEnd,
    /// The red part of an import session was delivered to the client.
    BlockDelivered,
    /// The span's link went down (timers suspended).
    LinkDown,
    /// The span's link came back up (timers resumed).
    LinkUp,
}

impl LogEvent {
    /// Value of the `seg_type` column for event rows.
    pub fn name(self) -> &'static str {
        match self {
            Self::CheckpointTimeout => "RTO_CP",
            Self::ReportTimeout => "RTO_RS",
            Self::CancelTimeout => "RTO_CX",
            Self::ExportStart => "TX_START",
            Self::ExportEnd => "TX_END",
            Self::ImportStart => "RX_START",
            Self::ImportEnd => "RX_END",
            Self::BlockDelivered => "RX_BLOCK",
            Self::LinkDown => "LINK_DOWN",
            Self::LinkUp => "LINK_UP",
        }
    }
}

/// What a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A segment of this type.
    Segment(SegmentType),
    /// An engine event.
    Event(LogEvent),
    /// A row of a layer beside the engine, by its `seg_type` name (the FEC layer's `FEC_*`
    /// rows, `docs/ltp-segment-log.md`), written through [`crate::Engine::log_record`].
    Named(&'static str),
}

impl RecordKind {
    /// Value of the `seg_type` column.
    pub fn name(self) -> &'static str {
        match self {
            Self::Segment(t) => t.log_name(),
            Self::Event(e) => e.name(),
            Self::Named(n) => n,
        }
    }
}

/// How a session ended (the `outcome` column of TX_END / RX_END rows, and the reason of
/// cancel segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not applicable to this row.
    None,
    /// Completed successfully.
    Ok,
    /// Cancelled with this reason.
    Cancelled(CancelReason),
}

/// One log record. Fields that do not apply to a kind are 0 / false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRecord {
    /// Driver time of the event.
    pub time: Duration,
    /// tx, rx or ev.
    pub dir: Direction,
    /// This engine's id.
    pub local_engine: u64,
    /// The span's remote engine id.
    pub remote_engine: u64,
    /// Session originator engine id.
    pub session_originator: u64,
    /// Session number.
    pub session_number: u64,
    /// Segment type or event.
    pub kind: RecordKind,
    /// Data: block offset. RS: lower bound.
    pub offset: u64,
    /// Data: payload length. RS: upper − lower bound. Events: block length where known.
    pub length: u64,
    /// Checkpoint serial (CP data segments and RS).
    pub checkpoint_serial: u64,
    /// Report serial (CP data segments, RS and RA).
    pub report_serial: u64,
    /// Number of reception claims (RS).
    pub claims: u64,
    /// Whether this data segment (or signal copy) is a retransmission.
    pub retransmission: bool,
    /// Encoded segment size in bytes (0 for events).
    pub datagram_len: u64,
    /// Cancel reason or session outcome.
    pub outcome: Outcome,
}

/// Receives log records. Implemented by the driver (CSV file, in-memory vector, channel).
pub trait SegmentSink {
    /// Record one event. Must not fail: a sink that cannot write should count the loss.
    fn record(&mut self, rec: &SegmentRecord);
}

impl SegmentSink for Vec<SegmentRecord> {
    fn record(&mut self, rec: &SegmentRecord) {
        self.push(*rec);
    }
}

/// CSV header line (without newline) matching [`CsvSegmentLog`] rows.
pub const CSV_HEADER: &str = "time_ns,dir,local_engine,remote_engine,session_originator,session_number,seg_type,offset,length,checkpoint_serial,report_serial,claims,retransmission,datagram_len,outcome";

/// Writes records as CSV lines (see `docs/ltp-segment-log.md`). Write errors are counted,
/// not propagated, so logging can never stop the protocol.
#[derive(Debug)]
pub struct CsvSegmentLog<W: Write> {
    out: W,
    write_errors: u64,
}

impl<W: Write> CsvSegmentLog<W> {
    /// Wrap a writer and emit the header line.
    pub fn new(mut out: W) -> Self {
        let write_errors = u64::from(writeln!(out, "{CSV_HEADER}").is_err());
        Self { out, write_errors }
    }

    /// Records that could not be written.
    pub fn write_errors(&self) -> u64 {
        self.write_errors
    }

    /// Flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Give back the writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> SegmentSink for CsvSegmentLog<W> {
    fn record(&mut self, r: &SegmentRecord) {
        let outcome = match r.outcome {
            Outcome::None => "",
            Outcome::Ok => "OK",
            Outcome::Cancelled(reason) => reason.name(),
        };
        let res = writeln!(
            self.out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.time.as_nanos(),
            r.dir.name(),
            r.local_engine,
            r.remote_engine,
            r.session_originator,
            r.session_number,
            r.kind.name(),
            r.offset,
            r.length,
            r.checkpoint_serial,
            r.report_serial,
            r.claims,
            u8::from(r.retransmission),
            r.datagram_len,
            outcome
        );
        if res.is_err() {
            self.write_errors += 1;
        }
    }
}
