//! Which datagrams may speak for an LTP engine: the node's trust policy for LTP sources
//! (`[ltp] accept_from`).
//!
//! LTP has no authentication of its own (RFC 5326 leaves it to LTP-auth, which no deployed
//! peer implements): whoever can put a segment on the wire with a span's engine id can open
//! import sessions, and reports and cancels naming our export sessions are acted upon. The
//! source address is the only evidence a node has, so it checks it against the address
//! configured for the segment's engine:
//!
//! - `"peer_address"`: only from the configured address and port of that engine's span;
//! - `"peer_ip"` (default): only from the configured IP address (any port): ION's `udplso`
//!   sends from an ephemeral port, and a peer may bind one port and send from another;
//! - `"any"`: from anywhere (a peer behind NAT, multi-homed peers answering from another
//!   interface): the engine id alone decides, as before this setting existed.
//!
//! Refused datagrams leave the engine untouched and are counted (`status` `ltp.wrong_source`).
//! IP addresses are compared in canonical form (an IPv4-mapped IPv6 source matches its IPv4
//! address).

use std::collections::HashMap;
use std::net::SocketAddr;

use serde::Deserialize;

/// `[ltp] accept_from`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptFrom {
    /// From any source address.
    Any,
    /// From the IP address configured for the engine's span (any port).
    #[default]
    PeerIp,
    /// From exactly the address and port configured for the engine's span.
    PeerAddress,
}

impl AcceptFrom {
    /// The configuration value.
    pub fn name(self) -> &'static str {
        match self {
            AcceptFrom::Any => "any",
            AcceptFrom::PeerIp => "peer_ip",
            AcceptFrom::PeerAddress => "peer_address",
        }
    }
}

/// The policy with the configured address of every engine.
#[derive(Debug, Clone)]
pub(crate) struct SourcePolicy {
    mode: AcceptFrom,
    /// engine id → configured address of its span.
    addr_of: HashMap<u64, SocketAddr>,
}

impl SourcePolicy {
    pub(crate) fn new(mode: AcceptFrom, addr_of: HashMap<u64, SocketAddr>) -> Self {
        Self { mode, addr_of }
    }

    /// Whether a datagram from `src` may speak for engine `engine`.
    pub(crate) fn allows(&self, src: Option<SocketAddr>, engine: u64) -> bool {
        if self.mode == AcceptFrom::Any {
            return true;
        }
        let (Some(src), Some(want)) = (src, self.addr_of.get(&engine)) else {
            return false;
        };
        let same_ip = src.ip().to_canonical() == want.ip().to_canonical();
        match self.mode {
            AcceptFrom::PeerIp => same_ip,
            AcceptFrom::PeerAddress => same_ip && src.port() == want.port(),
            AcceptFrom::Any => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: AcceptFrom) -> SourcePolicy {
        SourcePolicy::new(mode, HashMap::from([(2, "10.0.0.2:1113".parse().unwrap())]))
    }

    #[test]
    fn each_mode_accepts_what_it_says() {
        let exact = Some("10.0.0.2:1113".parse().unwrap());
        let other_port = Some("10.0.0.2:40000".parse().unwrap());
        let mapped = Some("[::ffff:10.0.0.2]:1113".parse().unwrap());
        let other_host = Some("10.0.0.9:1113".parse().unwrap());
        let p = policy(AcceptFrom::PeerAddress);
        assert!(p.allows(exact, 2) && p.allows(mapped, 2));
        assert!(!p.allows(other_port, 2) && !p.allows(other_host, 2));
        assert!(
            !p.allows(exact, 3),
            "an engine without a span has no address"
        );
        let p = policy(AcceptFrom::PeerIp);
        assert!(p.allows(exact, 2) && p.allows(other_port, 2));
        assert!(!p.allows(other_host, 2) && !p.allows(None, 2));
        let p = policy(AcceptFrom::Any);
        assert!(p.allows(other_host, 2) && p.allows(None, 7));
    }
}
