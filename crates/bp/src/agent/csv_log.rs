//! The CSV writer behind the agent's logs ([`crate::CsvBundleLog`], [`crate::CsvRouteLog`]):
//! the header written first, one row per record, write errors counted instead of stopping the
//! node (a full disk must not stop it), and the buffer written out when the driver asks.

use std::io::Write;
use std::marker::PhantomData;

/// One kind of CSV log: its header line (without newline).
pub trait CsvRows {
    /// The header line.
    const HEADER: &'static str;
}

/// A CSV log of rows of kind `R` written to `W`.
#[derive(Debug)]
pub struct CsvLog<W: Write, R> {
    out: W,
    errors: u64,
    rows: PhantomData<R>,
}

impl<W: Write, R: CsvRows> CsvLog<W, R> {
    /// A log writing to `out`; writes the header line immediately.
    pub fn new(mut out: W) -> Self {
        let errors = u64::from(writeln!(out, "{}", R::HEADER).is_err());
        CsvLog {
            out,
            errors,
            rows: PhantomData,
        }
    }
}

impl<W: Write, R> CsvLog<W, R> {
    /// Write errors so far (counted, never fatal).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Flushes the writer.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Flushes the writer, counting a failure as a write error (the sinks' `flush`).
    pub(crate) fn flush_counted(&mut self) {
        if self.out.flush().is_err() {
            self.errors += 1;
        }
    }

    /// Writes one row (`args` ends with the newline).
    pub(crate) fn row(&mut self, args: std::fmt::Arguments<'_>) {
        if self.out.write_fmt(args).is_err() {
            self.errors += 1;
        }
    }
}
