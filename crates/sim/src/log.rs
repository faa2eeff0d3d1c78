//! Log outputs: the shared LTP segment CSV (all nodes in one file, told apart by `local_engine`), the bundle
//! event CSV, and per-session timing gathered from the same segment records.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ltp::{CsvSegmentLog, Direction, RecordKind, SegmentRecord, SegmentSink};

/// Header of the bundle event CSV.
pub const BUNDLE_CSV_HEADER: &str =
    "time_ns,dtn_time_ms,node,event,source,creation_ms,sequence,payload_len,destination,neighbour";

/// A bundle event kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleEvent {
    /// Created by a local application.
    Created,
    /// Arrived from a neighbour (block received and decoded).
    Received,
    /// Handed to LTP towards a neighbour.
    Queued,
    /// LTP confirmed the block carrying it (red) or radiated it (green).
    Forwarded,
    /// The LTP session carrying it was cancelled; it is re-queued.
    Failed,
    /// Delivered to a local application.
    Delivered,
    /// No route or no application: discarded.
    Dropped,
}

impl BundleEvent {
    /// Name in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            BundleEvent::Created => "created",
            BundleEvent::Received => "received",
            BundleEvent::Queued => "queued",
            BundleEvent::Forwarded => "forwarded",
            BundleEvent::Failed => "failed",
            BundleEvent::Delivered => "delivered",
            BundleEvent::Dropped => "dropped",
        }
    }
}

/// One bundle event record.
#[derive(Debug, Clone, Copy)]
pub struct BundleRecord {
    /// Simulated time.
    pub time: Duration,
    /// DTN time.
    pub dtn_ms: u64,
    /// Node where it happened.
    pub node: u64,
    /// What happened.
    pub event: BundleEvent,
    /// Source node and service.
    pub source: (u64, u64),
    /// Creation time (DTN ms) and sequence.
    pub creation: (u64, u64),
    /// Payload length.
    pub payload_len: u64,
    /// Destination node and service.
    pub destination: (u64, u64),
    /// Neighbour involved (0 if none).
    pub neighbour: u64,
}

/// Buffered CSV writer of bundle events; write errors are counted, never fatal.
pub struct BundleCsv {
    out: Box<dyn Write + Send>,
    /// Records that could not be written.
    pub write_errors: u64,
}

impl BundleCsv {
    /// Wraps a writer and writes the header.
    pub fn new(mut out: Box<dyn Write + Send>) -> Self {
        let write_errors = u64::from(writeln!(out, "{BUNDLE_CSV_HEADER}").is_err());
        BundleCsv { out, write_errors }
    }

    /// Writes one record.
    pub fn record(&mut self, r: &BundleRecord) {
        let res = writeln!(
            self.out,
            "{},{},{},{},ipn:{}.{},{},{},{},ipn:{}.{},{}",
            r.time.as_nanos(),
            r.dtn_ms,
            r.node,
            r.event.name(),
            r.source.0,
            r.source.1,
            r.creation.0,
            r.creation.1,
            r.payload_len,
            r.destination.0,
            r.destination.1,
            r.neighbour
        );
        if res.is_err() {
            self.write_errors += 1;
        }
    }

    /// Flushes the writer.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Start times of export sessions (first data segment transmitted), keyed by (originator, number).
#[derive(Debug, Default)]
pub struct SessionStarts {
    starts: HashMap<(u64, u64), Duration>,
}

impl SessionStarts {
    /// Removes and returns the start of a finished session.
    pub fn take(&mut self, originator: u64, number: u64) -> Option<Duration> {
        self.starts.remove(&(originator, number))
    }
}

/// The shared segment CSV writer (one file for all nodes).
pub type SharedSegmentCsv = Arc<Mutex<CsvSegmentLog<Box<dyn Write + Send>>>>;

/// The segment sink installed in every engine: records export-session starts and forwards to the shared CSV log.
pub struct NodeSink {
    /// Shared CSV writer, if the scenario asked for one.
    pub csv: Option<SharedSegmentCsv>,
    /// This node's session starts.
    pub starts: Arc<Mutex<SessionStarts>>,
}

impl SegmentSink for NodeSink {
    fn record(&mut self, r: &SegmentRecord) {
        if r.dir == Direction::Tx && r.local_engine == r.session_originator {
            if let RecordKind::Segment(t) = r.kind {
                if t.is_data() {
                    if let Ok(mut s) = self.starts.lock() {
                        s.starts
                            .entry((r.session_originator, r.session_number))
                            .or_insert(r.time);
                    }
                }
            }
        }
        if let Some(csv) = &self.csv {
            if let Ok(mut w) = csv.lock() {
                w.record(r);
            }
        }
    }
}
