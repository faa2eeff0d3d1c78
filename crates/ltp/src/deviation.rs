//! Peer deviations from RFC 5326 that the engine tolerates on receive, each named and counted.
//!
//! Decoding stays strict ([`crate::Segment::decode`]); the engine uses
//! [`crate::Segment::decode_tolerant`], which accepts a datagram that the strict decoder refuses
//! only when it matches one of the exact patterns below, produced by a deployed implementation
//! we must interoperate with. The engine never produces any of them: encoding is strict.
//! Counting them (per engine and per span, shown by `dtnkit status` as `ltp.deviations`) keeps
//! the tolerance visible instead of silent.

/// One kind of tolerated deviation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deviation {
    /// A report segment carries bytes after its last reception claim although the header
    /// announces no trailer extension. ION (checked against 4.1.3, `ltp/library/libltpP.c`)
    /// sizes each claim's offset SDNV as an offset from the start of the block but writes it
    /// relative to the report's lower bound, and sends the difference as padding. Accepted only
    /// when the padding is exactly that difference (so only for lower bounds above 0); the
    /// padding's content is ignored.
    ReportTrailingBytes,
}

impl Deviation {
    /// Every kind, in a fixed order (for status output and counters).
    pub const ALL: [Deviation; 1] = [Deviation::ReportTrailingBytes];

    /// Stable name used in status output and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::ReportTrailingBytes => "ltp_report_trailing_bytes",
        }
    }

    /// One-line description for a log message.
    pub fn description(self) -> &'static str {
        match self {
            Self::ReportTrailingBytes => {
                "report segment with padding after its claims and no trailer extension (ION)"
            }
        }
    }
}

/// Occurrences of each [`Deviation`] (every tolerated segment counts once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviationCounts {
    counts: [u64; Deviation::ALL.len()],
}

impl DeviationCounts {
    /// Count one occurrence.
    pub fn add(&mut self, d: Deviation) {
        if let Some(c) = self.counts.get_mut(d as usize) {
            *c += 1;
        }
    }

    /// Occurrences of `d`.
    pub fn get(&self, d: Deviation) -> u64 {
        self.counts.get(d as usize).copied().unwrap_or(0)
    }

    /// Occurrences of every kind.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(kind, occurrences)` for every kind, zero counts included.
    pub fn iter(&self) -> impl Iterator<Item = (Deviation, u64)> + '_ {
        Deviation::ALL.iter().map(|&d| (d, self.get(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind() {
        let mut c = DeviationCounts::default();
        assert_eq!(c.total(), 0);
        c.add(Deviation::ReportTrailingBytes);
        c.add(Deviation::ReportTrailingBytes);
        assert_eq!(c.get(Deviation::ReportTrailingBytes), 2);
        assert_eq!(
            c.iter().map(|(d, n)| (d.name(), n)).collect::<Vec<_>>(),
            vec![("ltp_report_trailing_bytes", 2)]
        );
    }
}
