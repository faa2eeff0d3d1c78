//! DTN time from the system clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds between the Unix epoch and the DTN epoch (2000-01-01T00:00:00Z).
const DTN_EPOCH_UNIX_S: u64 = 946_684_800;

/// Milliseconds since 2000-01-01T00:00:00Z (RFC 9171 DTN time) now; 0 if the clock is before
/// the DTN epoch.
pub fn dtn_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| (d.as_millis() as u64).saturating_sub(DTN_EPOCH_UNIX_S * 1000))
        .unwrap_or(0)
}
