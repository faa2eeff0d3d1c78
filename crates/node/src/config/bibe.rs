//! `[bibe]` and `[[bibe_peer]]`: Bundle-in-Bundle Encapsulation with custody transfer
//! (`docs/bibe.md`).
//!
//! A `[[bibe_peer]]` is a tunnel: a *virtual neighbour* under its own node number `peer`, which
//! routes name as `via`, whose bundles are encapsulated and sent to `endpoint` (the
//! decapsulating node's administrative endpoint, `ipn:N.0`). The encapsulating bundles are
//! routed like any bundle for node N, so `peer` must not be N itself (nor any node a route
//! sends the encapsulating bundles through): that would send them into their own tunnel.
//!
//! A node decapsulates BIBE records addressed to it when it has a `[bibe]` section or at least
//! one `[[bibe_peer]]`.

use bpv7::Eid;
use serde::Deserialize;

use super::error::{err, ConfigError};

/// `[bibe]`: settings of both ends of every tunnel.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BibeSection {
    /// Delay between the first custody decision for a custodian and the signal that carries
    /// it and the decisions that follow (ms). Default 100.
    #[serde(default = "default_signal_delay")]
    pub signal_delay_ms: u64,
    /// A signal leaves at once when it names this many transmission IDs. Default 1024.
    #[serde(default = "default_signal_ids")]
    pub max_signal_ids: usize,
    /// Most bundles waiting for a custody signal (held in memory for retransmission);
    /// bundles beyond wait in the store. Default 4096.
    #[serde(default = "default_custody_bundles")]
    pub max_custody_bundles: usize,
    /// Most bytes of bundles waiting for a custody signal. Default 256 MiB.
    #[serde(default = "default_custody_bytes")]
    pub max_custody_bytes: u64,
}

impl Default for BibeSection {
    fn default() -> Self {
        BibeSection {
            signal_delay_ms: default_signal_delay(),
            max_signal_ids: default_signal_ids(),
            max_custody_bundles: default_custody_bundles(),
            max_custody_bytes: default_custody_bytes(),
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

/// `[[bibe_peer]]`: one tunnel.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BibePeerSection {
    /// The tunnel's virtual neighbour number (what `[[route]] via` names).
    pub peer: u64,
    /// The decapsulating node's BIBE endpoint, e.g. `"ipn:2.0"`.
    pub endpoint: String,
    /// Ask the decapsulating node to take custody, and retransmit until it does. Default true.
    #[serde(default = "yes")]
    pub custody: bool,
    /// Custody timer (ms): a BPDU no custody signal named is retransmitted after this long.
    /// Default 30000.
    #[serde(default = "default_timer")]
    pub custody_timer_ms: u64,
    /// Longest lifetime of an encapsulating bundle (ms); shorter when the encapsulated bundle
    /// expires sooner. Default 86400000.
    #[serde(default = "default_tunnel_lifetime")]
    pub lifetime_ms: u64,
}

/// A validated tunnel.
#[derive(Debug, Clone)]
pub struct BibePeer {
    /// Virtual neighbour number.
    pub peer: u64,
    /// The decapsulating endpoint.
    pub endpoint: Eid,
    /// Custody requested.
    pub custody: bool,
    /// Custody timer (ms).
    pub custody_timer_ms: u64,
    /// Lifetime cap of encapsulating bundles (ms).
    pub lifetime_ms: u64,
}

/// Validates `[bibe]` and the `[[bibe_peer]]` entries: `Some(settings)` when the node runs
/// BIBE.
pub(crate) fn validate_bibe(
    file: &str,
    node: u64,
    section: Option<&BibeSection>,
    peers: &[BibePeerSection],
) -> Result<(Option<BibeSection>, Vec<BibePeer>), ConfigError> {
    if section.is_none() && peers.is_empty() {
        return Ok((None, Vec::new()));
    }
    let s = section.cloned().unwrap_or_default();
    ::bibe::settings::check_engine(
        s.signal_delay_ms,
        s.max_signal_ids,
        s.max_custody_bundles,
        s.max_custody_bytes,
    )
    .map_err(|e| err(file, &format!("bibe.{}", e.field), e.value, &e.expected))?;
    let mut out = Vec::new();
    for (i, p) in peers.iter().enumerate() {
        let f = |k: &str| format!("bibe_peer[{i}].{k}");
        if p.peer == 0 || p.peer == node {
            return Err(err(
                file,
                &f("peer"),
                p.peer,
                "a virtual neighbour number other than 0 and this node's",
            ));
        }
        let endpoint: Eid = p.endpoint.parse().map_err(|e| {
            err(
                file,
                &f("endpoint"),
                format!("\"{}\"", p.endpoint),
                &format!("an endpoint ID such as \"ipn:2.0\" ({e})"),
            )
        })?;
        match endpoint {
            Eid::Ipn { node: n, .. } if n == p.peer => {
                return Err(err(
                    file,
                    &f("endpoint"),
                    format!("\"{}\"", p.endpoint),
                    "a node other than the tunnel's own number `peer` (the encapsulating \
                     bundles for that node would be routed into the tunnel itself)",
                ))
            }
            Eid::Ipn { node: n, .. } if n == node => {
                return Err(err(
                    file,
                    &f("endpoint"),
                    format!("\"{}\"", p.endpoint),
                    "another node's endpoint (this node is the encapsulating end)",
                ))
            }
            Eid::DtnNone => {
                return Err(err(
                    file,
                    &f("endpoint"),
                    "\"dtn:none\"",
                    "the decapsulating node's endpoint",
                ))
            }
            _ => {}
        }
        ::bibe::settings::check_tunnel(p.custody, p.custody_timer_ms, p.lifetime_ms)
            .map_err(|e| err(file, &f(e.field), e.value, &e.expected))?;
        out.push(BibePeer {
            peer: p.peer,
            endpoint,
            custody: p.custody,
            custody_timer_ms: p.custody_timer_ms,
            lifetime_ms: p.lifetime_ms,
        });
    }
    Ok((Some(s), out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(peer: u64, endpoint: &str) -> BibePeerSection {
        BibePeerSection {
            peer,
            endpoint: endpoint.into(),
            custody: true,
            custody_timer_ms: 1000,
            lifetime_ms: 1000,
        }
    }

    #[test]
    fn errors_name_the_field() {
        let e = validate_bibe("n.toml", 1, None, &[peer(102, "ipn:102.0")]).unwrap_err();
        assert!(e.0.contains("bibe_peer[0].endpoint"), "{e}");
        let e = validate_bibe("n.toml", 1, None, &[peer(1, "ipn:2.0")]).unwrap_err();
        assert!(e.0.contains("bibe_peer[0].peer"), "{e}");
        let e = validate_bibe("n.toml", 1, None, &[peer(102, "nonsense")]).unwrap_err();
        assert!(e.0.contains("bibe_peer[0].endpoint"), "{e}");
        let mut p = peer(102, "ipn:2.0");
        p.custody_timer_ms = 1;
        let e = validate_bibe("n.toml", 1, None, &[p]).unwrap_err();
        assert!(e.0.contains("custody_timer_ms"), "{e}");
    }

    #[test]
    fn a_section_alone_enables_decapsulation() {
        let (s, p) = validate_bibe("n.toml", 2, Some(&BibeSection::default()), &[]).unwrap();
        assert!(s.is_some() && p.is_empty());
        let (s, _) = validate_bibe("n.toml", 2, None, &[]).unwrap();
        assert!(s.is_none());
        let (_, p) = validate_bibe("n.toml", 1, None, &[peer(102, "ipn:2.0")]).unwrap();
        assert_eq!(p[0].endpoint, Eid::ipn(2, 0));
    }
}
