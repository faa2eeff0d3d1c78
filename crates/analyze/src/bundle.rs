//! Bundle event logs: the node format of docs/bundle-event-log.md (`time_ms,event,...,length,...`) and the
//! simulator's (`time_ns,...,event,...,payload_len,...`), told apart by their header. Only aggregate counts are
//! kept (constant memory): delivered bundles and bytes, and the window from the first `created` to the last
//! `delivered`, which give the application goodput.

use std::io::BufRead;

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
    pub fn read(&mut self, name: &str, mut input: impl BufRead) -> Result<(), Error> {
        let mut line = String::with_capacity(256);
        let n = input
            .read_line(&mut line)
            .map_err(|e| Error::Io(format!("{name}: {e}")))?;
        if n == 0 {
            return Err(Error::Format(format!(
                "{name}: empty file (no header line)"
            )));
        }
        let cols: Vec<String> = line
            .trim_end()
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        let find = |c: &str| cols.iter().position(|x| x == c);
        let (time_col, scale) = match (find("time_ns"), find("time_ms")) {
            (Some(i), _) => (i, 1u128),
            (None, Some(i)) => (i, 1_000_000u128),
            _ => {
                return Err(Error::Format(format!(
                    "{name} line 1: bundle log header has neither `time_ns` nor `time_ms`"
                )))
            }
        };
        let event_col = find("event").ok_or_else(|| {
            Error::Format(format!(
                "{name} line 1: bundle log header has no `event` column"
            ))
        })?;
        let len_col = find("payload_len").or(find("length")).ok_or_else(|| {
            Error::Format(format!(
                "{name} line 1: bundle log header has neither `payload_len` nor `length`"
            ))
        })?;
        loop {
            line.clear();
            let n = input
                .read_line(&mut line)
                .map_err(|e| Error::Io(format!("{name}: {e}")))?;
            if n == 0 {
                return Ok(());
            }
            let mut time = None;
            let mut event = "";
            let mut len = None;
            for (i, f) in line.trim_end().split(',').enumerate() {
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
    }
}
