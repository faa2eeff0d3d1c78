//! The limits of the BIBE settings, checked the same way by a real node (`[bibe]`, `[[bibe_peer]]`) and the
//! simulator (`[node.bibe]`, `[[node.bibe_peer]]`): both drivers read the same names and refuse the same values.
//! What depends on the surroundings (which neighbour numbers are free, which endpoints a tunnel may name) each
//! driver checks itself, since only it knows them.

/// A setting out of its range: the field's name (relative to its section), the value, and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The key, e.g. `max_signal_ids`.
    pub field: &'static str,
    /// The value as written.
    pub value: String,
    /// What would have been accepted.
    pub expected: String,
}

fn invalid(field: &'static str, value: impl ToString, expected: impl Into<String>) -> Invalid {
    Invalid {
        field,
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// Longest aggregation delay of custody signals (ms): an hour, and in practice well below the peers' custody timers.
pub const MAX_SIGNAL_DELAY_MS: u64 = 3_600_000;
/// Custody timers accepted (ms): 10 ms to a day.
pub const CUSTODY_TIMER_MS: std::ops::RangeInclusive<u64> = 10..=86_400_000;

/// Checks the settings of a node's BIBE engine (the `[bibe]` section).
pub fn check_engine(
    signal_delay_ms: u64,
    max_signal_ids: usize,
    max_custody_bundles: usize,
    max_custody_bytes: u64,
) -> Result<(), Invalid> {
    if !(1..=crate::pdu::MAX_SIGNAL_RANGES).contains(&(max_signal_ids as u64)) {
        return Err(invalid(
            "max_signal_ids",
            max_signal_ids,
            format!("1 to {}", crate::pdu::MAX_SIGNAL_RANGES),
        ));
    }
    if signal_delay_ms > MAX_SIGNAL_DELAY_MS {
        return Err(invalid(
            "signal_delay_ms",
            signal_delay_ms,
            "at most 3600000 ms (and well below the peers' custody timers)",
        ));
    }
    if max_custody_bundles == 0 || max_custody_bytes == 0 {
        return Err(invalid(
            "max_custody_bundles",
            format!("{max_custody_bundles} ({max_custody_bytes} bytes)"),
            "a non-zero number of bundles and bytes",
        ));
    }
    Ok(())
}

/// Checks one tunnel's timers (a `[[bibe_peer]]`): the custody timer matters only when custody is asked for.
pub fn check_tunnel(custody: bool, custody_timer_ms: u64, lifetime_ms: u64) -> Result<(), Invalid> {
    if custody && !CUSTODY_TIMER_MS.contains(&custody_timer_ms) {
        return Err(invalid(
            "custody_timer_ms",
            custody_timer_ms,
            "10 to 86400000 ms",
        ));
    }
    if lifetime_ms == 0 {
        return Err(invalid("lifetime_ms", 0, "a lifetime above 0 ms"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_names_its_field() {
        assert_eq!(check_engine(100, 1024, 4096, 1 << 28), Ok(()));
        assert_eq!(
            check_engine(100, 0, 1, 1).unwrap_err().field,
            "max_signal_ids"
        );
        assert_eq!(
            check_engine(100, 16_385, 1, 1).unwrap_err().field,
            "max_signal_ids"
        );
        assert_eq!(
            check_engine(3_600_001, 1, 1, 1).unwrap_err().field,
            "signal_delay_ms"
        );
        assert_eq!(
            check_engine(0, 1, 0, 1).unwrap_err().field,
            "max_custody_bundles"
        );
        assert_eq!(check_engine(0, 1, 1, 0).unwrap_err().value, "1 (0 bytes)");
        assert_eq!(check_tunnel(true, 30_000, 1), Ok(()));
        assert_eq!(
            check_tunnel(true, 9, 1).unwrap_err().field,
            "custody_timer_ms"
        );
        assert_eq!(check_tunnel(false, 9, 1), Ok(()));
        assert_eq!(check_tunnel(false, 9, 0).unwrap_err().field, "lifetime_ms");
    }
}
