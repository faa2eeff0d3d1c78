//! Streaming analysis of LTP segment logs (and bundle event logs) into per-session records and a run summary,
//! plus the statistics the experiment runner needs (means with 95 % confidence intervals).
//!
//! The seed-000 authors turned millions of per-segment records into one row per LTP session, then averaged
//! those rows into the session-duration split of their Fig. 5 and the goodput / efficiency of Figs 10-11. This
//! crate does the same in one pass and in memory proportional to the sessions open at once, never to the log
//! size: each session's record leaves as soon as its sender and receiver have both closed it.
//!
//! ```no_run
//! use analyze::{Analyzer, Options, SessionCsvWriter};
//! # fn main() -> Result<(), analyze::Error> {
//! let mut a = Analyzer::new(Options { rate_bps: Some(500e6), good_fraction: Some(0.95), ..Options::default() });
//! a.add_segment_log_path("node1-segments.csv".as_ref())?;
//! a.add_segment_log_path("node2-segments.csv".as_ref())?;
//! let mut csv = SessionCsvWriter::new(std::fs::File::create("sessions.csv").map_err(analyze::Error::io)?)?;
//! let analysis = a.run(&mut |s| csv.write(s))?;
//! println!("{}", analysis.summary);
//! # Ok(()) }
//! ```
//!
//! Estimators and definitions: `docs/analyze.md`.

#![warn(missing_docs)]

pub mod bundle;
mod csv_lines;
pub mod csv_out;
pub mod experiment;
pub mod network;
pub mod row;
pub mod session;
pub mod stats;
pub mod summary;
pub mod tracker;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

pub use bundle::BundleTotals;
pub use csv_out::{SessionCsvWriter, SESSION_CSV_HEADER};
pub use network::{NetworkAnalyzer, NetworkReport, PlanContact};
pub use row::{RowReader, SegmentRow};
pub use session::{Coverage, SessionRecord};
pub use stats::{mean_ci95, MeanCi};
pub use summary::{Decomposition, RunSummary, Stat};
pub use tracker::Tracker;

/// Analyzer errors. Messages name the file (and line) involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing failed.
    #[error("I/O error: {0}")]
    Io(String),
    /// An input is not a log of the documented format (missing header or columns).
    #[error("{0}")]
    Format(String),
    /// An experiment file or option is invalid.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Wraps an I/O error (for `map_err`).
    pub fn io(e: std::io::Error) -> Error {
        Error::Io(e.to_string())
    }
}

/// Analysis settings. Everything is optional: without a rate and good fraction no efficiency is computed;
/// without an RTO or cycle duration the values measured from the log are used in the Fig. 5 split.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Nominal transmission rate of the data direction, bit/s (efficiency denominator).
    pub rate_bps: Option<f64>,
    /// Fraction of time the channel was good, in (0, 1] (efficiency denominator).
    pub good_fraction: Option<f64>,
    /// RTO used for the checkpoint-loss penalty; default: measured from `RTO_CP` rows.
    pub rto_ms: Option<f64>,
    /// Retransmission-cycle duration for the re-tx penalty; default: measured from the log.
    pub cycle_ms: Option<f64>,
    /// How long (log time) a session whose one side closed waits for the other side's close before it is
    /// emitted as one-sided. Bounds memory when a receiver log is truncated or the clocks of two logs differ.
    pub linger_ms: f64,
    /// Emitted session ids remembered so that late rows (a repeated report after close) are ignored instead of
    /// re-opening the session.
    pub recent_sessions: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rate_bps: None,
            good_fraction: None,
            rto_ms: None,
            cycle_ms: None,
            linger_ms: 5_000.0,
            recent_sessions: 65_536,
        }
    }
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The run summary (JSON via serde, text via `Display`).
    pub summary: RunSummary,
    /// Rows that arrived for already-emitted sessions and were ignored.
    pub late_rows: u64,
    /// The first malformed line, if any (file and line number).
    pub first_bad_line: Option<String>,
}

type Source = RowReader<Box<dyn BufRead>>;

/// Reads one or more segment logs (merged by time, so the sender's and the receiver's per-node logs can be
/// given separately) and optional bundle logs.
pub struct Analyzer {
    opts: Options,
    segments: Vec<Source>,
    bundles: BundleTotals,
}

impl Analyzer {
    /// An analyzer with no inputs yet.
    pub fn new(opts: Options) -> Analyzer {
        Analyzer {
            opts,
            segments: Vec::new(),
            bundles: BundleTotals::default(),
        }
    }

    /// Adds a segment log (any reader; `name` labels it in messages). Nothing is read until [`Analyzer::run`].
    pub fn add_segment_log(&mut self, name: impl Into<String>, input: impl BufRead + 'static) {
        self.segments
            .push(RowReader::new(name, Box::new(input) as Box<dyn BufRead>));
    }

    /// Adds a segment log file.
    pub fn add_segment_log_path(&mut self, path: &Path) -> Result<(), Error> {
        let f = File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        self.add_segment_log(
            path.display().to_string(),
            BufReader::with_capacity(1 << 20, f),
        );
        Ok(())
    }

    /// Reads a bundle event log now (only totals are kept).
    pub fn feed_bundle_log(&mut self, name: &str, input: impl BufRead) -> Result<(), Error> {
        self.bundles.read(name, input)
    }

    /// Reads a bundle event log file now.
    pub fn feed_bundle_log_path(&mut self, path: &Path) -> Result<(), Error> {
        let f = File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        self.bundles.read(
            &path.display().to_string(),
            BufReader::with_capacity(1 << 20, f),
        )
    }

    /// Streams every segment log (k-way merge on `time_ns`), calling `on_session` for each session as it
    /// closes, and returns the summary.
    pub fn run(
        mut self,
        on_session: &mut dyn FnMut(&SessionRecord) -> Result<(), Error>,
    ) -> Result<Analysis, Error> {
        if self.segments.is_empty() {
            return Err(Error::Invalid("no segment log given".into()));
        }
        let mut tracker = Tracker::new(self.opts.clone());
        let mut heads: Vec<Option<SegmentRow>> = Vec::with_capacity(self.segments.len());
        for s in &mut self.segments {
            heads.push(s.next_row()?);
        }
        loop {
            let mut best: Option<(usize, u128)> = None;
            for (i, h) in heads.iter().enumerate() {
                if let Some(r) = h {
                    if best.is_none_or(|(_, t)| r.time_ns < t) {
                        best = Some((i, r.time_ns));
                    }
                }
            }
            let Some((i, _)) = best else { break };
            let (Some(row), Some(src)) =
                (heads.get(i).copied().flatten(), self.segments.get_mut(i))
            else {
                break;
            };
            tracker.push(&row, on_session)?;
            let next = src.next_row()?;
            if let Some(h) = heads.get_mut(i) {
                *h = next;
            }
        }
        let late_rows = tracker.late_rows();
        let mut summary = tracker.finish(on_session)?;
        summary.bad_lines =
            self.segments.iter().map(|s| s.bad_lines).sum::<u64>() + self.bundles.bad_lines;
        summary.bundles_delivered = self.bundles.delivered;
        summary.bundle_goodput_bps = self.bundles.goodput_bps();
        let first_bad_line = self.segments.iter().find_map(|s| s.first_bad.clone());
        Ok(Analysis {
            summary,
            late_rows,
            first_bad_line,
        })
    }

    /// [`Analyzer::run`] without a per-session consumer.
    pub fn finish(self) -> Result<Analysis, Error> {
        self.run(&mut |_| Ok(()))
    }
}

/// Convenience for tools: analyzes segment (and bundle) log files, writing the per-session CSV to
/// `sessions_csv` when given.
pub fn analyze_files(
    segment_logs: &[&Path],
    bundle_logs: &[&Path],
    opts: &Options,
    sessions_csv: Option<&Path>,
) -> Result<Analysis, Error> {
    let mut a = Analyzer::new(opts.clone());
    for p in segment_logs {
        a.add_segment_log_path(p)?;
    }
    for p in bundle_logs {
        a.feed_bundle_log_path(p)?;
    }
    match sessions_csv {
        Some(path) => {
            let f =
                File::create(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
            let mut w = SessionCsvWriter::new(std::io::BufWriter::new(f))?;
            let r = a.run(&mut |s| w.write(s))?;
            w.finish()?;
            Ok(r)
        }
        None => a.finish(),
    }
}
