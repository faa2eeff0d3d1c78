//! Bundle event logs: the node format of docs/bundle-event-log.md (`time_ms,event,...,length,...`) and the
//! simulator's (`time_ns,...,event,...,payload_len,...`), told apart by their header. Only aggregate counts are
//! kept (constant memory): delivered bundles and bytes, and the window from the first `created` to the last
//! `delivered`, which give the application goodput.

use std::io::BufRead;

use crate::csv_lines::CsvLines;
use crate::Error;

/// Aggregates of one or more bundle logs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BundleTotals {
    /// `created` events.
    pub created: u64,
    /// `delivered` events.
    pub delivered: u64,
    /// Sum of the length column over `delivered` events (bundle length in the node format, payload length in
    /// the simulator's).
    pub delivered_bytes: u64,
    /// Earliest `created` time, ns.
    pub first_created_ns: Option<u128>,
    /// Latest `delivered` time, ns.
    pub last_delivered_ns: Option<u128>,
    /// Malformed lines skipped.
    pub bad_lines: u64,
}

impl BundleTotals {
    /// delivered bytes × 8 / (last delivered − first created), if both are known.
    pub fn goodput_bps(&self) -> Option<f64> {
        match (self.first_created_ns, self.last_delivered_ns) {
            (Some(a), Some(b)) if b > a => {
                Some(self.delivered_bytes as f64 * 8.0 / ((b - a) as f64 / 1e9))
            }
            _ => None,
        }
    }

    /// Reads one bundle log into the totals.
    pub fn read(&mut self, name: &str, input: impl BufRead) -> Result<(), Error> {
        let mut lines = CsvLines::open(name, input)?;
        let (time_col, scale) = match (lines.find("time_ns"), lines.find("time_ms")) {
            (Some(i), _) => (i, 1u128),
            (None, Some(i)) => (i, 1_000_000u128),
            _ => {
                return Err(
                    lines.header_error("bundle log header has neither `time_ns` nor `time_ms`")
                )
            }
        };
        let event_col = lines
            .find("event")
            .ok_or_else(|| lines.header_error("bundle log header has no `event` column"))?;
        let len_col = lines
            .find("payload_len")
            .or(lines.find("length"))
            .ok_or_else(|| {
                lines.header_error("bundle log header has neither `payload_len` nor `length`")
            })?;
        while let Some(line) = lines.next_line()? {
            let mut time = None;
            let mut event = "";
            let mut len = None;
            for (i, f) in line.split(',').enumerate() {
                if i == time_col {
                    time = f.parse::<u128>().ok();
                } else if i == event_col {
                    event = f;
                } else if i == len_col {
                    len = f.parse::<u64>().ok();
                }
            }
            let (Some(t), Some(len)) = (time, len) else {
                if !line.trim().is_empty() {
                    self.bad_lines += 1;
                }
                continue;
            };
            let t = t.saturating_mul(scale);
            match event {
                "created" => {
                    self.created += 1;
                    self.first_created_ns = Some(self.first_created_ns.map_or(t, |f| f.min(t)));
                }
                "delivered" => {
                    self.delivered += 1;
                    self.delivered_bytes += len;
                    self.last_delivered_ns = Some(self.last_delivered_ns.map_or(t, |l| l.max(t)));
                }
                _ => {}
            }
        }
        Ok(())
    }
}
