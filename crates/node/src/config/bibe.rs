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

use ::bibe::settings::{EngineSection, TunnelSection};
use ::bibe::TunnelConfig;
use bpv7::Eid;

use super::error::{err, ConfigError};

/// `[bibe]`: settings of both ends of every tunnel (the simulator's `[node.bibe]` reads the same).
pub type BibeSection = EngineSection;

/// `[[bibe_peer]]`: one tunnel (the simulator's `[[node.bibe_peer]]` reads the same).
pub type BibePeerSection = TunnelSection;

/// A validated tunnel.
#[derive(Debug, Clone)]
pub struct BibePeer {
    /// Virtual neighbour number.
    pub peer: u64,
    /// The engine's settings for it.
    pub tunnel: TunnelConfig,
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
    s.check()
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
        p.check_timers()
            .map_err(|e| err(file, &f(e.field), e.value, &e.expected))?;
        out.push(BibePeer {
            peer: p.peer,
            tunnel: p.tunnel_config(endpoint),
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
            record_codes: Default::default(),
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
        assert_eq!(p[0].tunnel.endpoint, Eid::ipn(2, 0));
    }
}
