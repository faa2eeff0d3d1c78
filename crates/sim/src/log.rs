//! Log outputs, one set of files per node exactly as real nodes write them: the LTP segment CSV
//! (`ltp::CsvSegmentLog`, `docs/ltp-segment-log.md`) and the bundle event CSV (`bp::CsvBundleLog`,
//! `docs/bundle-event-log.md`), plus the per-session timing the summary needs, gathered from the same segment
//! records.
//!
//! Every timestamp comes from the virtual clock: segment rows carry the simulated time since the start, bundle
//! rows the DTN time the simulator passes to the agent (`epoch_dtn_ms` + elapsed virtual ms).
//!
//! The sinks are shared handles (`Arc<Mutex<..>>`) so that the simulation can flush them and read their error
//! counts at the end of a run while the engine or the agent owns the boxed sink. Each handle belongs to one node
//! and is only ever locked from the simulation's single thread, so the lock is never contended.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bp::{
    BundleEvent, BundleEventSink, BundleRows, CsvLog, CsvRows, RouteEvent, RouteEventSink,
    RouteRows,
};
use ltp::{CsvSegmentLog, Direction, RecordKind, SegmentRecord, SegmentSink};

/// Buffer size of every log writer. A node can have three logs (segments, bundles, routes), so
/// this is paid up to three times per node: at 1 MiB the per-node bundle and route logs of the
/// 106-node 24-hour constellation took 212 MB of its 749 MB peak. 64 KiB writes are already
/// large enough that the system calls cost little next to formatting the rows.
const LOG_BUFFER_BYTES: usize = 64 << 10;

/// The writer behind every log file: a concrete buffered file (no dynamic dispatch per field written).
pub type LogWriter = BufWriter<File>;

/// Creates (truncating) a log file and its parent directories, buffered.
pub fn create(path: &Path) -> std::io::Result<LogWriter> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    Ok(BufWriter::with_capacity(
        LOG_BUFFER_BYTES,
        File::create(path)?,
    ))
}

/// What one node's segment sink keeps: export-session start times and, when asked for, the CSV file.
#[derive(Debug, Default)]
pub struct SegmentState {
    /// Keyed by (originator, session number); a B-tree because it is looked up on every data segment sent and
    /// holds only the open export sessions (a SipHash per segment cost more than the lookup).
    starts: BTreeMap<(u64, u64), Duration>,
    csv: Option<CsvSegmentLog<LogWriter>>,
}

impl SegmentState {
    /// State writing rows to `csv` (or only tracking session starts with `None`).
    pub fn new(csv: Option<CsvSegmentLog<LogWriter>>) -> Self {
        SegmentState {
            starts: BTreeMap::new(),
            csv,
        }
    }

    /// Removes and returns the start (first data segment transmitted) of a finished export session.
    pub fn take_start(&mut self, originator: u64, number: u64) -> Option<Duration> {
        self.starts.remove(&(originator, number))
    }

    /// Flushes the CSV file; returns the rows lost to write errors so far (0 without a file).
    pub fn flush(&mut self) -> u64 {
        match self.csv.as_mut() {
            Some(c) => c.write_errors() + u64::from(c.flush().is_err()),
            None => 0,
        }
    }
}

/// A node's shared segment-sink state.
pub type SharedSegmentState = Arc<Mutex<SegmentState>>;

/// The segment sink installed in every engine: records export-session starts and writes the node's CSV rows.
pub struct NodeSink(pub SharedSegmentState);

impl SegmentSink for NodeSink {
    fn record(&mut self, r: &SegmentRecord) {
        let Ok(mut s) = self.0.lock() else {
            return;
        };
        if r.dir == Direction::Tx && r.local_engine == r.session_originator {
            if let RecordKind::Segment(t) = r.kind {
                if t.is_data() {
                    s.starts
                        .entry((r.session_originator, r.session_number))
                        .or_insert(r.time);
                }
            }
        }
        if let Some(csv) = s.csv.as_mut() {
            csv.record(r);
        }
    }
}

/// A node's bundle event or route decision log: the agent's own CSV writer, shared between the
/// event source (the agent, or the static layer) and the simulation, which flushes it at the end.
pub struct SharedLog<R>(pub Arc<Mutex<CsvLog<LogWriter, R>>>);

/// A node's bundle event log ([`SharedLog`]).
pub type SharedBundleLog = SharedLog<BundleRows>;

/// A node's route decision log (`docs/route-log.md`, [`SharedLog`]).
pub type SharedRouteLog = SharedLog<RouteRows>;

impl<R> Clone for SharedLog<R> {
    fn clone(&self) -> Self {
        SharedLog(self.0.clone())
    }
}

impl<R: CsvRows> SharedLog<R> {
    /// A log writing to `out` (the header is written immediately).
    pub fn new(out: LogWriter) -> Self {
        SharedLog(Arc::new(Mutex::new(CsvLog::new(out))))
    }
}

impl<R> SharedLog<R> {
    /// Flushes the file; returns the rows lost to write errors so far.
    pub fn flush(&self) -> u64 {
        match self.0.lock() {
            Ok(mut l) => l.errors() + u64::from(l.flush().is_err()),
            Err(_) => 1,
        }
    }
}

impl BundleEventSink for SharedBundleLog {
    fn record(&mut self, event: &BundleEvent<'_>) {
        if let Ok(mut l) = self.0.lock() {
            l.record(event);
        }
    }
}

impl RouteEventSink for SharedRouteLog {
    fn record(&mut self, event: &RouteEvent<'_>) {
        if let Ok(mut l) = self.0.lock() {
            l.record(event);
        }
    }
}
