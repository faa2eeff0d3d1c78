//! The bundle event log: one record per thing that happens to a bundle at this node, written as
//! CSV with the same columns by the runtime and the simulator (columns in
//! `docs/bundle-event-log.md`). Logging is off unless the driver installs a sink.

use std::io::Write;

use bpv7::{BundleId, Eid};

use super::csv_log::{CsvLog, CsvRows};
use crate::store::BundleKey;
use crate::NodeNum;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleEventKind {
    /// Created here by `send` (or a status report / echo reply the agent generated).
    Created,
    /// Accepted from a convergence layer and stored.
    Received,
    /// A convergence layer reported successful transmission to `neighbour`.
    Forwarded,
    /// Acknowledged by the local application.
    Delivered,
    /// Its lifetime ended here.
    Expired,
    /// Deleted for another reason (hop limit exceeded, consumed admin record or echo request).
    Deleted,
    /// A duplicate arrived and was dropped.
    Duplicate,
    /// Refused because the store was full.
    Refused,
    /// A convergence layer reported a failed transmission to `neighbour`; it is forwarded again.
    Failed,
    /// Data from a convergence layer was dropped without becoming a bundle (an LTP block whose
    /// content is not a bundle, a length field claiming more bytes than arrived); the `reason`
    /// column says why. The identity columns are those of `dtn:none` (there is no bundle).
    Discarded,
    /// A fragment made here from a stored bundle too large for its next hop's convergence
    /// layer (it replaces that bundle, which is deleted without another event).
    Fragmented,
}

impl BundleEventKind {
    /// The name written in the `event` column.
    pub fn name(self) -> &'static str {
        match self {
            BundleEventKind::Created => "created",
            BundleEventKind::Received => "received",
            BundleEventKind::Forwarded => "forwarded",
            BundleEventKind::Delivered => "delivered",
            BundleEventKind::Expired => "expired",
            BundleEventKind::Deleted => "deleted",
            BundleEventKind::Duplicate => "duplicate",
            BundleEventKind::Refused => "refused",
            BundleEventKind::Failed => "failed",
            BundleEventKind::Discarded => "discarded",
            BundleEventKind::Fragmented => "fragmented",
        }
    }
}

/// One event about one bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEvent<'a> {
    /// DTN time of the event (ms).
    pub time_ms: u64,
    /// What happened.
    pub kind: BundleEventKind,
    /// The bundle.
    pub id: &'a BundleId,
    /// Encoded bundle length (bytes).
    pub length: u64,
    /// Its destination.
    pub destination: &'a Eid,
    /// The neighbour concerned (received from / forwarded to), if any.
    pub neighbour: Option<NodeNum>,
    /// Its store key, if it was stored.
    pub key: Option<BundleKey>,
    /// Why (for `discarded`: a short snake_case reason); empty for the other events.
    pub reason: &'a str,
}

/// Receives bundle events. Implementations must not block for long: the agent calls them inline.
pub trait BundleEventSink {
    /// Records one event.
    fn record(&mut self, event: &BundleEvent<'_>);

    /// Writes out what is buffered (a driver calls it when it goes idle, so a node killed
    /// afterwards leaves a complete log). Nothing to do for unbuffered sinks.
    fn flush(&mut self) {}
}

/// The rows of the bundle event log ([`CsvBundleLog`]).
#[derive(Debug, Clone, Copy)]
pub enum BundleRows {}

impl CsvRows for BundleRows {
    const HEADER: &'static str = CSV_HEADER;
}

/// Writes bundle events as CSV (see `docs/bundle-event-log.md`).
pub type CsvBundleLog<W> = CsvLog<W, BundleRows>;

/// The CSV header line (without newline).
pub const CSV_HEADER: &str =
    "time_ms,event,source,creation_ms,sequence,frag_offset,frag_length,length,destination,neighbour,key,reason";

impl<W: Write> BundleEventSink for CsvBundleLog<W> {
    fn flush(&mut self) {
        self.flush_counted();
    }

    fn record(&mut self, e: &BundleEvent<'_>) {
        let (frag_offset, frag_length) = match e.id.fragment {
            Some((o, l)) => (o.to_string(), l.to_string()),
            None => (String::new(), String::new()),
        };
        let neighbour = e.neighbour.map(|n| n.to_string()).unwrap_or_default();
        let key = e.key.map(|k| k.0.to_string()).unwrap_or_default();
        // EIDs never contain commas: the ipn form is digits and dots; dtn node names and demux
        // strings are written as-is and would only break the CSV if a peer put a comma in one, so
        // commas are replaced.
        let source = e.id.source.to_string().replace(',', "%2C");
        let destination = e.destination.to_string().replace(',', "%2C");
        self.row(format_args!(
            "{},{},{},{},{},{},{},{},{},{},{},{}\n",
            e.time_ms,
            e.kind.name(),
            source,
            e.id.timestamp.dtn_time_ms,
            e.id.timestamp.sequence,
            frag_offset,
            frag_length,
            e.length,
            destination,
            neighbour,
            key,
            e.reason.replace(',', "%2C")
        ));
    }
}
