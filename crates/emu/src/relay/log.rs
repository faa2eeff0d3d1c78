//! The optional per-datagram CSV log, written by its own thread so the relay threads never block on disk.
//!
//! Columns: `time_ns,dir,size,fate,release_ns` — arrival time at the relay and release time (empty when not
//! delivered) in nanoseconds since relay start, direction `fwd`/`ret`, datagram size, and fate (`deliver`,
//! `channel`, `unavailable`, `queue_full`, `overflow`, `truncated`, `no_destination`).

use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

/// What the relay did with a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFate {
    /// Scheduled for delivery.
    Deliver,
    /// A channel model decision.
    Lost(channel::LossCause),
    /// No free slot in the relay (an emulator resource limit, not a model decision).
    Overflow,
    /// Longer than a slot.
    Truncated,
    /// Return traffic before endpoint A is known.
    NoDestination,
}

impl LogFate {
    fn as_str(self) -> &'static str {
        match self {
            LogFate::Deliver => "deliver",
            LogFate::Lost(c) => c.as_str(),
            LogFate::Overflow => "overflow",
            LogFate::Truncated => "truncated",
            LogFate::NoDestination => "no_destination",
        }
    }
}

/// One datagram's record (plain data: sending it allocates nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// Arrival at the relay, ns since start.
    pub time_ns: u64,
    /// `true` = forward.
    pub forward: bool,
    /// Datagram size.
    pub size: u32,
    /// Fate.
    pub fate: LogFate,
    /// Release time, ns since start (deliveries only).
    pub release_ns: Option<u64>,
}

/// Sending side of the log, cloned into each relay thread. A full queue drops the record and counts it.
#[derive(Clone)]
pub struct LogSink {
    tx: SyncSender<LogRecord>,
}

impl LogSink {
    /// Queues a record; returns `false` if the writer is behind and the record was dropped.
    pub fn record(&self, r: LogRecord) -> bool {
        match self.tx.try_send(r) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

/// Starts the writer thread; it ends when every [`LogSink`] is dropped and returns the number of records written.
pub fn start(
    mut out: Box<dyn Write + Send>,
    capacity: usize,
) -> io::Result<(LogSink, JoinHandle<io::Result<u64>>)> {
    let (tx, rx): (SyncSender<LogRecord>, Receiver<LogRecord>) = sync_channel(capacity);
    let handle =
        std::thread::Builder::new()
            .name("emu-log".into())
            .spawn(move || -> io::Result<u64> {
                writeln!(out, "time_ns,dir,size,fate,release_ns")?;
                let mut n = 0;
                for r in rx {
                    let dir = if r.forward { "fwd" } else { "ret" };
                    match r.release_ns {
                        Some(rel) => writeln!(
                            out,
                            "{},{dir},{},{},{rel}",
                            r.time_ns,
                            r.size,
                            r.fate.as_str()
                        )?,
                        None => {
                            writeln!(out, "{},{dir},{},{},", r.time_ns, r.size, r.fate.as_str())?
                        }
                    }
                    n += 1;
                }
                out.flush()?;
                Ok(n)
            })?;
    Ok((LogSink { tx }, handle))
}
