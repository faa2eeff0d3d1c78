//! DTN time (RFC 9171 4.2.6): milliseconds since 2000-01-01T00:00:00Z, and the creation timestamp.
//!
//! The codec never reads a clock (sans-IO); callers convert their clock with [`dtn_time_from_unix_ms`].

/// Milliseconds between the Unix epoch and the DTN epoch (2000-01-01T00:00:00Z).
pub const DTN_EPOCH_UNIX_MS: u64 = 946_684_800_000;

/// Converts Unix milliseconds to DTN milliseconds (saturating at 0 before the DTN epoch).
pub fn dtn_time_from_unix_ms(unix_ms: u64) -> u64 {
    unix_ms.saturating_sub(DTN_EPOCH_UNIX_MS)
}

/// Formats a DTN time as an ISO 8601 UTC date (`2026-11-22T06:26:02.123Z`), for inspection tools and logs.
pub fn format_dtn_time(dtn_ms: u64) -> String {
    let unix_ms = u128::from(dtn_ms) + u128::from(DTN_EPOCH_UNIX_MS);
    let ms = (unix_ms % 1000) as u64;
    let secs = unix_ms / 1000;
    let days = (secs / 86_400) as i64;
    let sod = (secs % 86_400) as u64;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// Proleptic Gregorian date from days since 1970-01-01 (Howard Hinnant's public-domain algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Bundle creation timestamp: creation time (DTN ms, 0 = "no accurate clock") and a sequence number that makes
/// (source, timestamp) unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CreationTimestamp {
    /// Creation time in DTN milliseconds; 0 means the source had no accurate clock (a bundle age block is then
    /// mandatory).
    pub dtn_time_ms: u64,
    /// Sequence number distinguishing bundles created in the same millisecond.
    pub sequence: u64,
}

impl CreationTimestamp {
    /// Builds a timestamp.
    pub const fn new(dtn_time_ms: u64, sequence: u64) -> Self {
        CreationTimestamp {
            dtn_time_ms,
            sequence,
        }
    }
}

impl std::fmt::Display for CreationTimestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.dtn_time_ms, self.sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_dates() {
        assert_eq!(format_dtn_time(0), "2000-01-01T00:00:00.000Z");
        // 2024-02-29T12:34:56.789Z is 1709210096789 Unix ms.
        assert_eq!(
            format_dtn_time(1_709_210_096_789 - DTN_EPOCH_UNIX_MS),
            "2024-02-29T12:34:56.789Z"
        );
        assert_eq!(dtn_time_from_unix_ms(1), 0);
    }
}
