//! The BIBE settings as both drivers read them: a real node's `[bibe]` and `[[bibe_peer]]` sections and the
//! simulator's `[node.bibe]` and `[[node.bibe_peer]]` deserialize into the same [`EngineSection`] and
//! [`TunnelSection`], with the same defaults, the same limits and the same mapping to the engine's
//! [`EngineConfig`] and [`TunnelConfig`]. What depends on the surroundings (which neighbour numbers are free,
//! which endpoints a tunnel may name) each driver checks itself, since only it knows them.

use bpv7::{CrcType, Eid};
use serde::Deserialize;

use crate::engine::{EngineConfig, TunnelConfig};
use crate::pdu::RecordCodes;

/// `[bibe]` / `[node.bibe]`: the settings of a node's BIBE engine, for both ends of every tunnel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSection {
    /// Delay between the first custody decision for a custodian and the signal that carries it and the
    /// decisions that follow (ms). Default 100.
    #[serde(default = "default_signal_delay")]
    pub signal_delay_ms: u64,
    /// A signal leaves at once when it names this many transmission IDs (1 to 16384). Default 1024.
    #[serde(default = "default_signal_ids")]
    pub max_signal_ids: usize,
    /// Most bundles waiting for a custody signal (held in memory for retransmission); bundles beyond wait in
    /// the store. Default 4096.
    #[serde(default = "default_custody_bundles")]
    pub max_custody_bundles: usize,
    /// Most bytes of bundles waiting for a custody signal. Default 256 MiB.
    #[serde(default = "default_custody_bytes")]
    pub max_custody_bytes: u64,
}

impl Default for EngineSection {
    fn default() -> Self {
        EngineSection {
            signal_delay_ms: default_signal_delay(),
            max_signal_ids: default_signal_ids(),
            max_custody_bundles: default_custody_bundles(),
            max_custody_bytes: default_custody_bytes(),
        }
    }
}

impl EngineSection {
    /// Checks the limits ([`check_engine`]).
    pub fn check(&self) -> Result<(), Invalid> {
        check_engine(
            self.signal_delay_ms,
            self.max_signal_ids,
            self.max_custody_bundles,
            self.max_custody_bytes,
        )
    }

    /// The engine's configuration for the node whose administrative endpoint is `local` (`ipn:N.0`); what the
    /// section does not name keeps [`EngineConfig::new`]'s value.
    pub fn engine_config(&self, local: Eid) -> EngineConfig {
        EngineConfig {
            signal_delay_ms: self.signal_delay_ms,
            max_signal_ids: self.max_signal_ids,
            max_custody_bundles: self.max_custody_bundles,
            max_custody_bytes: self.max_custody_bytes,
            ..EngineConfig::new(local)
        }
    }
}

/// `[[bibe_peer]]` / `[[node.bibe_peer]]`: one tunnel, a virtual neighbour whose bundles are encapsulated and
/// sent to the decapsulating node's endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunnelSection {
    /// The tunnel's virtual neighbour number (what routes name as `via`).
    pub peer: u64,
    /// The decapsulating node's administrative endpoint, e.g. `"ipn:2.0"`.
    pub endpoint: String,
    /// Ask the decapsulating node to take custody, and retransmit until it does. Default true.
    #[serde(default = "yes")]
    pub custody: bool,
    /// Custody timer (ms): a BPDU no custody signal named is retransmitted after this long. Default 30000.
    #[serde(default = "default_timer")]
    pub custody_timer_ms: u64,
    /// Longest lifetime of an encapsulating bundle (ms); shorter when the encapsulated bundle expires sooner.
    /// Default 86400000 (a day).
    #[serde(default = "default_tunnel_lifetime")]
    pub lifetime_ms: u64,
    /// Record type codes of the BPDUs sent into the tunnel: `"draft"` (3 and 4, the default) or `"ion"` (7 and 8,
    /// the only ones ION 4.1 accepts). Custody signals always answer in the codes of the BPDUs they name.
    #[serde(default)]
    pub record_codes: RecordCodes,
}

impl TunnelSection {
    /// Checks the timers ([`check_tunnel`]).
    pub fn check_timers(&self) -> Result<(), Invalid> {
        check_tunnel(self.custody, self.custody_timer_ms, self.lifetime_ms)
    }

    /// The tunnel's configuration, with `endpoint` the parsed (and by the driver checked) `endpoint` field.
    /// Encapsulating bundles carry CRC-32C.
    pub fn tunnel_config(&self, endpoint: Eid) -> TunnelConfig {
        TunnelConfig {
            endpoint,
            custody: self.custody,
            custody_timer_ms: self.custody_timer_ms,
            lifetime_ms: self.lifetime_ms,
            crc: CrcType::Crc32c,
            codes: self.record_codes,
        }
    }
}

fn default_signal_delay() -> u64 {
    100
}
fn default_signal_ids() -> usize {
    1024
}
fn default_custody_bundles() -> usize {
    4096
}
fn default_custody_bytes() -> u64 {
    256 << 20
}
fn yes() -> bool {
    true
}
fn default_timer() -> u64 {
    30_000
}
fn default_tunnel_lifetime() -> u64 {
    86_400_000
}

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

    #[test]
    fn sections_take_their_defaults_and_map_onto_the_engine() {
        let e: EngineSection = serde_json::from_str("{}").unwrap();
        assert_eq!(e, EngineSection::default());
        let c = e.engine_config(Eid::ipn(5, 0));
        let d = EngineConfig::new(Eid::ipn(5, 0));
        assert_eq!(
            (
                c.signal_delay_ms,
                c.max_signal_ids,
                c.max_custody_bundles,
                c.max_custody_bytes
            ),
            (
                d.signal_delay_ms,
                d.max_signal_ids,
                d.max_custody_bundles,
                d.max_custody_bytes
            )
        );
        let e: EngineSection = serde_json::from_str(r#"{"signal_delay_ms": 7}"#).unwrap();
        assert_eq!(e.engine_config(Eid::ipn(5, 0)).signal_delay_ms, 7);
        assert!(serde_json::from_str::<EngineSection>(r#"{"signal_delay": 7}"#).is_err());
        let t: TunnelSection =
            serde_json::from_str(r#"{"peer": 102, "endpoint": "ipn:2.0"}"#).unwrap();
        assert!(t.custody && t.custody_timer_ms == 30_000 && t.lifetime_ms == 86_400_000);
        assert_eq!(t.check_timers(), Ok(()));
        let c = t.tunnel_config(Eid::ipn(2, 0));
        assert_eq!((c.endpoint, c.crc), (Eid::ipn(2, 0), CrcType::Crc32c));
        assert!(serde_json::from_str::<TunnelSection>(r#"{"peer": 1}"#).is_err());
    }
}
