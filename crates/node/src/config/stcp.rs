//! `[stcp]` and `[[stcp_peer]]`: the simple TCP convergence layer of ION and HDTN (a 4-byte
//! length before each bundle, no session, no acknowledgment; see `crate::stcp`).
//!
//! A node listens for STCP connections with `[stcp] listen` and receives bundles on them; it
//! sends to each `[[stcp_peer]]` over a connection it opens to the peer's `address` (as ION's
//! `stcpclo` does towards a remote `stcpcli`). A neighbour named by `[[stcp_peer]]` belongs to
//! STCP alone (the one-layer-per-neighbour rule of `super::cla`).

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::cla::addr;
use super::error::{err, ConfigError};

/// `[stcp]`: the STCP convergence layer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StcpSection {
    /// TCP address to accept connections on (e.g. `"127.0.0.1:4557"`); none = send only.
    #[serde(default)]
    pub listen: Option<String>,
    /// Largest bundle accepted from a peer (default: `[bp] max_bundle_size`); a connection
    /// announcing a larger one is closed. At most 4294967295 (STCP's 32-bit length).
    #[serde(default)]
    pub max_bundle_size: Option<u64>,
    /// Seconds of idleness after which a zero-length keepalive is written on a connection we
    /// opened (ION: 15); 0 = none.
    #[serde(default = "default_keepalive")]
    pub keepalive_s: u64,
    /// SO_SNDBUF / SO_RCVBUF requested for every connection.
    #[serde(default = "default_sockbuf")]
    pub socket_buffer_bytes: usize,
    /// First reconnection delay after a failed connect or a lost connection (ms); doubles per
    /// failure up to `reconnect_max_ms`.
    #[serde(default = "default_reconnect_min")]
    pub reconnect_min_ms: u64,
    /// Longest reconnection delay (ms).
    #[serde(default = "default_reconnect_max")]
    pub reconnect_max_ms: u64,
    /// Connections accepted at once; more are closed at once. Default 64.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
}

fn default_keepalive() -> u64 {
    15
}
fn default_sockbuf() -> usize {
    4 << 20
}
fn default_reconnect_min() -> u64 {
    100
}
fn default_reconnect_max() -> u64 {
    30_000
}
fn default_max_connections() -> usize {
    64
}

/// `[[stcp_peer]]`: a neighbour that bundles are sent to over STCP.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StcpPeerSection {
    /// The neighbour's node number.
    pub peer: u64,
    /// Its STCP listening address (ION `stcpcli`, HDTN STCP induct, or a dtnkit `[stcp]
    /// listen`).
    pub address: String,
}

/// Validated STCP settings.
#[derive(Debug, Clone)]
pub struct Stcp {
    /// Listening address, if any.
    pub listen: Option<SocketAddr>,
    /// Largest bundle accepted.
    pub max_bundle_size: u64,
    /// Keepalive interval on connections we open (None: no keepalives).
    pub keepalive: Option<Duration>,
    /// Socket buffer size requested.
    pub socket_buffer_bytes: usize,
    /// First reconnection delay.
    pub reconnect_min: Duration,
    /// Longest reconnection delay.
    pub reconnect_max: Duration,
    /// Connections accepted at once.
    pub max_connections: usize,
}

/// A validated `[[stcp_peer]]`.
#[derive(Debug, Clone)]
pub struct StcpPeer {
    /// Node number.
    pub peer: u64,
    /// Address to connect to.
    pub address: SocketAddr,
}

/// Checks `[stcp]` and `[[stcp_peer]]`; `max_bundle` is `[bp] max_bundle_size`, `node` this
/// node's number.
pub(crate) fn validate_stcp(
    file: &str,
    node: u64,
    max_bundle: u64,
    section: Option<&StcpSection>,
    peers: &[StcpPeerSection],
) -> Result<(Option<Stcp>, Vec<StcpPeer>), ConfigError> {
    if section.is_none() && !peers.is_empty() {
        return Err(err(
            file,
            "stcp_peer[0]",
            "(entry)",
            "a [stcp] section when [[stcp_peer]] entries are given",
        ));
    }
    let Some(s) = section else {
        return Ok((None, Vec::new()));
    };
    let listen = match &s.listen {
        Some(l) => Some(addr(file, "stcp.listen", l)?),
        None => None,
    };
    let max_bundle_size = s.max_bundle_size.unwrap_or(max_bundle.min(stcp::MAX_FRAME));
    if !(64..=stcp::MAX_FRAME).contains(&max_bundle_size) {
        return Err(err(
            file,
            "stcp.max_bundle_size",
            max_bundle_size,
            "64 to 4294967295 bytes (STCP's length is 32 bits)",
        ));
    }
    if s.keepalive_s > 86_400 {
        return Err(err(
            file,
            "stcp.keepalive_s",
            s.keepalive_s,
            "0 (none) to 86400 seconds",
        ));
    }
    if s.socket_buffer_bytes < 4096 {
        return Err(err(
            file,
            "stcp.socket_buffer_bytes",
            s.socket_buffer_bytes,
            "at least 4096 bytes",
        ));
    }
    if s.reconnect_min_ms == 0 || s.reconnect_max_ms < s.reconnect_min_ms {
        return Err(err(
            file,
            "stcp.reconnect_max_ms",
            s.reconnect_max_ms,
            "reconnect_min_ms >= 1 and reconnect_max_ms >= reconnect_min_ms",
        ));
    }
    if !(1..=100_000).contains(&s.max_connections) {
        return Err(err(
            file,
            "stcp.max_connections",
            s.max_connections,
            "1 to 100000 connections",
        ));
    }
    let mut out = Vec::new();
    for (i, p) in peers.iter().enumerate() {
        if p.peer == 0 || p.peer == node {
            return Err(err(
                file,
                &format!("stcp_peer[{i}].peer"),
                p.peer,
                "a neighbour node number other than 0 and this node",
            ));
        }
        out.push(StcpPeer {
            peer: p.peer,
            address: addr(file, &format!("stcp_peer[{i}].address"), &p.address)?,
        });
    }
    Ok((
        Some(Stcp {
            listen,
            max_bundle_size,
            keepalive: (s.keepalive_s > 0).then(|| Duration::from_secs(s.keepalive_s)),
            socket_buffer_bytes: s.socket_buffer_bytes,
            reconnect_min: Duration::from_millis(s.reconnect_min_ms),
            reconnect_max: Duration::from_millis(s.reconnect_max_ms),
            max_connections: s.max_connections,
        }),
        out,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        stcp: Option<StcpSection>,
        #[serde(default)]
        stcp_peer: Vec<StcpPeerSection>,
    }

    fn stcp(text: &str) -> Result<(Option<Stcp>, Vec<StcpPeer>), ConfigError> {
        let d: Doc = toml::from_str(text).expect("toml");
        validate_stcp("n.toml", 1, 1 << 20, d.stcp.as_ref(), &d.stcp_peer)
    }

    #[test]
    fn defaults_and_peers() {
        let (s, p) = stcp(
            "[stcp]\nlisten = \"127.0.0.1:4557\"\n[[stcp_peer]]\npeer = 2\naddress = \"127.0.0.1:4558\"\n",
        )
        .unwrap();
        let s = s.unwrap();
        assert_eq!(s.max_bundle_size, 1 << 20);
        assert_eq!(s.keepalive, Some(Duration::from_secs(15)));
        assert_eq!(p[0].peer, 2);
        assert_eq!(p[0].address.port(), 4558);
        let (s, _) = stcp("[stcp]\nkeepalive_s = 0\n").unwrap();
        assert_eq!(s.unwrap().keepalive, None);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                "[[stcp_peer]]\npeer = 2\naddress = \"127.0.0.1:1\"\n",
                "stcp_peer[0]",
            ),
            (
                "[stcp]\nmax_bundle_size = 4294967296\n",
                "`stcp.max_bundle_size` = 4294967296",
            ),
            ("[stcp]\nlisten = \"nowhere\"\n", "`stcp.listen`"),
            (
                "[stcp]\n[[stcp_peer]]\npeer = 1\naddress = \"127.0.0.1:1\"\n",
                "`stcp_peer[0].peer` = 1",
            ),
            (
                "[stcp]\n[[stcp_peer]]\npeer = 2\naddress = \"x\"\n",
                "`stcp_peer[0].address`",
            ),
            ("[stcp]\nreconnect_min_ms = 0\n", "`stcp.reconnect_max_ms`"),
        ];
        for (text, needle) in cases {
            let e = stcp(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} should contain {needle:?}");
        }
    }
}
