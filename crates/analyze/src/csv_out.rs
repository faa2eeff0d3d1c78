//! The per-session CSV (one row per [`SessionRecord`]): written as sessions close, so it streams too.

use std::io::Write;

use crate::session::SessionRecord;
use crate::Error;

/// Header of the per-session CSV; the columns are the fields of [`SessionRecord`] in order.
pub const SESSION_CSV_HEADER: &str = "originator,number,receiver,coverage,red,block_len,tx_start_s,queue_ms,tx_duration_ms,rx_duration_ms,delivery_ms,radiation_ms,segments,bytes,retransmitted_segments,retransmitted_bytes,retransmission_cycles,rto_cp,rto_rs,checkpoints_sent,checkpoints_lost,reports_received,segments_received,datagram_bytes,outcome,cancelled";

/// Writes session records as CSV rows (no quoting needed: no field can contain a comma).
pub struct SessionCsvWriter<W: Write> {
    out: W,
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.6}")).unwrap_or_default()
}

impl<W: Write> SessionCsvWriter<W> {
    /// Wraps a writer and writes the header line.
    pub fn new(mut out: W) -> Result<Self, Error> {
        writeln!(out, "{SESSION_CSV_HEADER}").map_err(|e| Error::Io(e.to_string()))?;
        Ok(SessionCsvWriter { out })
    }

    /// Writes one record.
    pub fn write(&mut self, r: &SessionRecord) -> Result<(), Error> {
        writeln!(
            self.out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.originator,
            r.number,
            r.receiver,
            r.coverage.name(),
            u8::from(r.red),
            r.block_len,
            opt(r.tx_start_s),
            opt(r.queue_ms),
            opt(r.tx_duration_ms),
            opt(r.rx_duration_ms),
            opt(r.delivery_ms),
            opt(r.radiation_ms),
            r.segments,
            r.bytes,
            r.retransmitted_segments,
            r.retransmitted_bytes,
            r.retransmission_cycles,
            r.rto_cp,
            r.rto_rs,
            r.checkpoints_sent,
            r.checkpoints_lost,
            r.reports_received,
            r.segments_received,
            r.datagram_bytes,
            r.outcome,
            u8::from(r.cancelled)
        )
        .map_err(|e| Error::Io(e.to_string()))
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> Result<W, Error> {
        self.out.flush().map_err(|e| Error::Io(e.to_string()))?;
        Ok(self.out)
    }
}
