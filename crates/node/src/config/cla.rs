//! Configuration of the TCP and UDP convergence layers: `[tcpcl]`, `[[tcp_peer]]`, `[udpcl]`,
//! `[[udp_peer]]`, and the rule that ties every neighbour to exactly one convergence layer.
//!
//! A neighbour is named by its node number in exactly one of `[[span]]` (LTP), `[[tcp_peer]]`
//! (TCPCL, v4 or v3) or `[[udp_peer]]` (UDPCL): that entry decides which convergence layer carries the
//! bundles the agent forwards to it. Sessions opened by TCPCL peers that are not configured are
//! accepted too; bundles go back to them over that session while it lasts.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::error::{err, ConfigError};
use super::peer_kind::PeerKind;
pub use crate::tcpcl_tls::{TlsSection, TlsSettings};

/// Largest UDP payload over IPv4: the hard limit of one UDPCL datagram.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// `[tcpcl]`: the TCP convergence layer, TCPCLv4 (RFC 9174) and TCPCLv3 (RFC 7242).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpclSection {
    /// TCP address to accept sessions on (e.g. `"127.0.0.1:4556"`); none = connect only.
    #[serde(default)]
    pub listen: Option<String>,
    /// Keepalive interval offered in SESS_INIT, seconds (0 = no keepalives).
    #[serde(default = "default_keepalive")]
    pub keepalive_s: u16,
    /// Segment MRU offered in SESS_INIT: the largest XFER_SEGMENT payload we accept.
    #[serde(default = "default_segment_mru")]
    pub segment_mru: u64,
    /// Transfer MRU offered in SESS_INIT: the largest bundle we accept (default: `[bp]
    /// max_bundle_size`).
    #[serde(default)]
    pub transfer_mru: Option<u64>,
    /// Largest segment we send (further limited by the peer's segment MRU).
    #[serde(default = "default_segment_mru")]
    pub max_segment_size: u64,
    /// SO_SNDBUF / SO_RCVBUF requested for every session socket.
    #[serde(default = "default_tcp_sockbuf")]
    pub socket_buffer_bytes: usize,
    /// First reconnection delay after a failed connect or a lost session (ms); doubles per
    /// failure up to `reconnect_max_ms`.
    #[serde(default = "default_reconnect_min")]
    pub reconnect_min_ms: u64,
    /// Longest reconnection delay (ms).
    #[serde(default = "default_reconnect_max")]
    pub reconnect_max_ms: u64,
    /// `[tcpcl.tls]`: offer TLS (CAN_TLS) with these certificates; none = plaintext only.
    #[serde(default)]
    pub tls: Option<TlsSection>,
    /// Accept sessions whose contact header says TCPCLv3 (ION 4.1.3, HDTN, DTNME). Default:
    /// true, unless `[tcpcl.tls] require = true` (v3 has no TLS).
    #[serde(default)]
    pub accept_v3: Option<bool>,
    /// Largest DATA_SEGMENT sent in a TCPCLv3 session. Default 65536: ION reads and
    /// acknowledges 64 KiB at a time.
    #[serde(default = "default_v3_segment")]
    pub v3_max_segment_size: u64,
    /// Close a session that negotiated no keepalives (keepalive 0 on either side) after this
    /// many seconds without input (SESS_TERM "Idle timeout"); 0 = never. Default 600.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_s: u64,
    /// Sessions accepted at once; more connections are closed at once. Default 256.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// Sessions accepted at once from one IP address. Default 16.
    #[serde(default = "default_max_per_address")]
    pub max_sessions_per_address: usize,
    /// Established sessions at once with one node id (both directions); an extra one ends
    /// with SESS_TERM "Busy". Default 4.
    #[serde(default = "default_max_per_peer")]
    pub max_sessions_per_peer: usize,
}

fn default_idle_timeout() -> u64 {
    600
}
fn default_max_sessions() -> usize {
    256
}
fn default_max_per_address() -> usize {
    16
}
fn default_max_per_peer() -> usize {
    4
}

impl Default for TcpclSection {
    fn default() -> Self {
        Self {
            listen: None,
            keepalive_s: default_keepalive(),
            segment_mru: default_segment_mru(),
            transfer_mru: None,
            max_segment_size: default_segment_mru(),
            socket_buffer_bytes: default_tcp_sockbuf(),
            reconnect_min_ms: default_reconnect_min(),
            reconnect_max_ms: default_reconnect_max(),
            tls: None,
            accept_v3: None,
            v3_max_segment_size: default_v3_segment(),
            idle_timeout_s: default_idle_timeout(),
            max_sessions: default_max_sessions(),
            max_sessions_per_address: default_max_per_address(),
            max_sessions_per_peer: default_max_per_peer(),
        }
    }
}

/// `[[tcp_peer]]`: a neighbour reached over TCPCL.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpPeerSection {
    /// The neighbour's node number.
    pub peer: u64,
    /// Its TCPCL address; without one the node only accepts sessions from it.
    #[serde(default)]
    pub address: Option<String>,
    /// The node id it announces in SESS_INIT (default `ipn:<peer>.0`); a session we open to
    /// it that presents another id ends with SESS_TERM "Contact Failure".
    #[serde(default)]
    pub node_id: Option<String>,
    /// The implementation it runs: selects the defaults of the keys below
    /// (`super::peer_kind`; `dtn7` sets `exceed_peer_transfer_mru`).
    #[serde(default)]
    pub peer_kind: PeerKind,
    /// Send bundles larger than the peer's advertised transfer MRU anyway, for peers that
    /// under-advertise it (dtn7 advertises 64000 and accepts megabytes). Default: the peer
    /// kind's (true for `dtn7`, else false: such bundles are fragmented, RFC 9171 5.8, to
    /// fit).
    #[serde(default)]
    pub exceed_peer_transfer_mru: Option<bool>,
    /// Name its TLS certificate must carry (DNS name or IP address); default: the host of
    /// `address`.
    #[serde(default)]
    pub tls_name: Option<String>,
    /// TCPCL version of the sessions we open to it: 4 (RFC 9174, default) or 3 (RFC 7242:
    /// ION 4.1.3, HDTN, DTNME). Sessions it opens speak the version of its contact header.
    #[serde(default)]
    pub version: Option<u8>,
}

/// `[udpcl]`: the UDP convergence layer (one bundle per datagram).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpclSection {
    /// UDP address to bind (e.g. `"127.0.0.1:4556"`).
    pub bind: String,
    /// Largest datagram sent or accepted (at most 65507); larger bundles are fragmented
    /// proactively (RFC 9171 5.8) unless they must not be fragmented.
    #[serde(default = "default_udp_max")]
    pub max_datagram: usize,
    /// SO_SNDBUF / SO_RCVBUF requested.
    #[serde(default = "default_udp_sockbuf")]
    pub socket_buffer_bytes: usize,
}

/// `[[udp_peer]]`: a neighbour reached over UDPCL.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpPeerSection {
    /// The neighbour's node number.
    pub peer: u64,
    /// Its UDPCL address.
    pub address: String,
}

fn default_keepalive() -> u16 {
    30
}
fn default_segment_mru() -> u64 {
    4 << 20
}
fn default_tcp_sockbuf() -> usize {
    4 << 20
}
fn default_reconnect_min() -> u64 {
    100
}
fn default_reconnect_max() -> u64 {
    30_000
}
fn default_v3_segment() -> u64 {
    64 << 10
}
fn default_udp_max() -> usize {
    MAX_UDP_PAYLOAD
}
fn default_udp_sockbuf() -> usize {
    4 << 20
}

/// Validated TCPCL settings.
#[derive(Debug, Clone)]
pub struct Tcpcl {
    /// Listening address, if any.
    pub listen: Option<SocketAddr>,
    /// Keepalive interval offered.
    pub keepalive_s: u16,
    /// Segment MRU offered.
    pub segment_mru: u64,
    /// Transfer MRU offered.
    pub transfer_mru: u64,
    /// Largest segment sent.
    pub max_segment_size: u64,
    /// Socket buffer size requested.
    pub socket_buffer_bytes: usize,
    /// Reconnection back-off bounds.
    pub reconnect_min: Duration,
    /// Upper bound of the back-off.
    pub reconnect_max: Duration,
    /// TLS (`[tcpcl.tls]`), if offered.
    pub tls: Option<TlsSettings>,
    /// Whether a TCPCLv3 contact header is answered in v3.
    pub accept_v3: bool,
    /// Largest DATA_SEGMENT sent in a v3 session.
    pub v3_max_segment_size: u64,
    /// Idle timeout and session caps.
    pub limits: crate::tcpcl_limits::SessionLimits,
}

/// A validated `[[tcp_peer]]`.
#[derive(Debug, Clone)]
pub struct TcpPeer {
    /// Node number.
    pub peer: u64,
    /// Address to connect to (none: accept only).
    pub address: Option<SocketAddr>,
    /// Node id expected in its SESS_INIT.
    pub node_id: String,
    /// The implementation it runs.
    pub peer_kind: PeerKind,
    /// Send beyond its advertised transfer MRU.
    pub exceed_peer_transfer_mru: bool,
    /// Server name its TLS certificate is checked against (`tls_name`, else the address's IP;
    /// none for a v3 peer).
    pub tls_name: Option<String>,
    /// Version of the sessions we open to it.
    pub version: tcpcl::Version,
}

/// Validated UDPCL settings.
#[derive(Debug, Clone)]
pub struct Udpcl {
    /// Bound address.
    pub bind: SocketAddr,
    /// Datagram size limit.
    pub max_datagram: usize,
    /// Socket buffer size requested.
    pub socket_buffer_bytes: usize,
}

/// A validated `[[udp_peer]]`.
#[derive(Debug, Clone)]
pub struct UdpPeer {
    /// Node number.
    pub peer: u64,
    /// Its address.
    pub address: SocketAddr,
}

pub(super) fn addr(file: &str, field: &str, v: &str) -> Result<SocketAddr, ConfigError> {
    v.parse().map_err(|_| {
        err(
            file,
            field,
            format!("{v:?}"),
            "an IP socket address like \"127.0.0.1:4556\"",
        )
    })
}

/// Checks `[tcpcl]` and `[[tcp_peer]]`. `max_bundle` is `[bp] max_bundle_size` (the default
/// transfer MRU); `node` is this node's number.
pub(crate) fn validate_tcp(
    file: &str,
    base: &Path,
    node: u64,
    max_bundle: u64,
    section: Option<&TcpclSection>,
    peers: &[TcpPeerSection],
) -> Result<(Option<Tcpcl>, Vec<TcpPeer>), ConfigError> {
    if section.is_none() && !peers.is_empty() {
        return Err(err(
            file,
            "tcp_peer[0]",
            "(entry)",
            "a [tcpcl] section when [[tcp_peer]] entries are given",
        ));
    }
    let Some(s) = section else {
        return Ok((None, Vec::new()));
    };
    let listen = match &s.listen {
        Some(l) => Some(addr(file, "tcpcl.listen", l)?),
        None => None,
    };
    // RFC 9174 has no lower bound; below a few hundred bytes every bundle becomes many segments.
    if !(1024..=(1 << 30)).contains(&s.segment_mru) {
        return Err(err(
            file,
            "tcpcl.segment_mru",
            s.segment_mru,
            "1024 to 1073741824 bytes",
        ));
    }
    if !(1024..=(1 << 30)).contains(&s.max_segment_size) {
        return Err(err(
            file,
            "tcpcl.max_segment_size",
            s.max_segment_size,
            "1024 to 1073741824 bytes",
        ));
    }
    let transfer_mru = s.transfer_mru.unwrap_or(max_bundle);
    if transfer_mru < 64 {
        return Err(err(
            file,
            "tcpcl.transfer_mru",
            transfer_mru,
            "at least 64 bytes",
        ));
    }
    if s.socket_buffer_bytes < 4096 {
        return Err(err(
            file,
            "tcpcl.socket_buffer_bytes",
            s.socket_buffer_bytes,
            "at least 4096 bytes",
        ));
    }
    if s.reconnect_min_ms == 0 || s.reconnect_max_ms < s.reconnect_min_ms {
        return Err(err(
            file,
            "tcpcl.reconnect_max_ms",
            s.reconnect_max_ms,
            "reconnect_min_ms >= 1 and reconnect_max_ms >= reconnect_min_ms",
        ));
    }
    if !(1024..=(1 << 30)).contains(&s.v3_max_segment_size) {
        return Err(err(
            file,
            "tcpcl.v3_max_segment_size",
            s.v3_max_segment_size,
            "1024 to 1073741824 bytes",
        ));
    }
    for (field, v) in [
        ("tcpcl.max_sessions", s.max_sessions),
        ("tcpcl.max_sessions_per_address", s.max_sessions_per_address),
        ("tcpcl.max_sessions_per_peer", s.max_sessions_per_peer),
    ] {
        if !(1..=100_000).contains(&v) {
            return Err(err(file, field, v, "1 to 100000 sessions"));
        }
    }
    if s.idle_timeout_s > 86_400 * 365 {
        return Err(err(
            file,
            "tcpcl.idle_timeout_s",
            s.idle_timeout_s,
            "0 (never) to 31536000 seconds",
        ));
    }
    let limits = crate::tcpcl_limits::SessionLimits {
        idle_timeout: (s.idle_timeout_s > 0).then(|| Duration::from_secs(s.idle_timeout_s)),
        max_sessions: s.max_sessions,
        max_sessions_per_address: s.max_sessions_per_address,
        max_sessions_per_peer: s.max_sessions_per_peer,
    };
    let tls = match &s.tls {
        Some(t) => Some(crate::tcpcl_tls::load(file, base, t)?),
        None => None,
    };
    let tls_required = tls.as_ref().is_some_and(|t| t.require);
    if tls_required && s.accept_v3 == Some(true) {
        return Err(err(
            file,
            "tcpcl.accept_v3",
            true,
            "false (or no key) with `[tcpcl.tls] require = true`: TCPCLv3 has no TLS",
        ));
    }
    let accept_v3 = s.accept_v3.unwrap_or(!tls_required);
    let mut out: Vec<TcpPeer> = Vec::new();
    for (i, p) in peers.iter().enumerate() {
        let f = |name: &str| format!("tcp_peer[{i}].{name}");
        if p.peer == 0 || p.peer == node {
            return Err(err(
                file,
                &f("peer"),
                p.peer,
                "a neighbour node number other than 0 and this node",
            ));
        }
        let address = match &p.address {
            Some(a) => Some(addr(file, &f("address"), a)?),
            None => None,
        };
        let node_id = match &p.node_id {
            Some(id) => {
                if id.parse::<bpv7::Eid>().is_err() {
                    return Err(err(
                        file,
                        &f("node_id"),
                        format!("{id:?}"),
                        "a node id like \"ipn:2.0\" or \"dtn://name/\"",
                    ));
                }
                id.clone()
            }
            None => format!("ipn:{}.0", p.peer),
        };
        // `version` when given, else the peer kind's (3 for ION, which speaks no other).
        let version = match p.version.unwrap_or(p.peer_kind.tcp_profile().version) {
            4 => tcpcl::Version::V4,
            3 => tcpcl::Version::V3,
            v => {
                return Err(err(
                    file,
                    &f("version"),
                    v,
                    "3 (TCPCLv3, RFC 7242) or 4 (TCPCLv4, RFC 9174)",
                ))
            }
        };
        if version == tcpcl::Version::V3 {
            if let Some(n) = &p.tls_name {
                return Err(err(
                    file,
                    &f("tls_name"),
                    format!("{n:?}"),
                    "no TLS name for a `version = 3` peer: TCPCLv3 has no TLS",
                ));
            }
            if tls_required {
                return Err(err(
                    file,
                    &f("version"),
                    3,
                    "4 with `[tcpcl.tls] require = true`: TCPCLv3 has no TLS",
                ));
            }
        }
        if let Some(n) = &p.tls_name {
            if !crate::tcpcl_tls::check_name(n) {
                return Err(err(
                    file,
                    &f("tls_name"),
                    format!("{n:?}"),
                    "a DNS name or IP address",
                ));
            }
        }
        let tls_name = match version {
            tcpcl::Version::V3 => None,
            tcpcl::Version::V4 => p
                .tls_name
                .clone()
                .or_else(|| address.map(|a| a.ip().to_string())),
        };
        out.push(TcpPeer {
            peer: p.peer,
            address,
            node_id,
            peer_kind: p.peer_kind,
            exceed_peer_transfer_mru: p
                .exceed_peer_transfer_mru
                .unwrap_or(p.peer_kind.tcp_profile().exceed_peer_transfer_mru),
            tls_name,
            version,
        });
    }
    Ok((
        Some(Tcpcl {
            listen,
            keepalive_s: s.keepalive_s,
            segment_mru: s.segment_mru,
            transfer_mru,
            max_segment_size: s.max_segment_size,
            socket_buffer_bytes: s.socket_buffer_bytes,
            reconnect_min: Duration::from_millis(s.reconnect_min_ms),
            reconnect_max: Duration::from_millis(s.reconnect_max_ms),
            tls,
            accept_v3,
            v3_max_segment_size: s.v3_max_segment_size,
            limits,
        }),
        out,
    ))
}

/// Checks `[udpcl]` and `[[udp_peer]]`.
pub(crate) fn validate_udp(
    file: &str,
    node: u64,
    section: Option<&UdpclSection>,
    peers: &[UdpPeerSection],
) -> Result<(Option<Udpcl>, Vec<UdpPeer>), ConfigError> {
    if section.is_none() && !peers.is_empty() {
        return Err(err(
            file,
            "udp_peer[0]",
            "(entry)",
            "a [udpcl] section with `bind` when [[udp_peer]] entries are given",
        ));
    }
    let Some(s) = section else {
        return Ok((None, Vec::new()));
    };
    let bind = addr(file, "udpcl.bind", &s.bind)?;
    if !(512..=MAX_UDP_PAYLOAD).contains(&s.max_datagram) {
        return Err(err(
            file,
            "udpcl.max_datagram",
            s.max_datagram,
            "512 to 65507 bytes",
        ));
    }
    let mut out = Vec::new();
    for (i, p) in peers.iter().enumerate() {
        if p.peer == 0 || p.peer == node {
            return Err(err(
                file,
                &format!("udp_peer[{i}].peer"),
                p.peer,
                "a neighbour node number other than 0 and this node",
            ));
        }
        out.push(UdpPeer {
            peer: p.peer,
            address: addr(file, &format!("udp_peer[{i}].address"), &p.address)?,
        });
    }
    Ok((
        Some(Udpcl {
            bind,
            max_datagram: s.max_datagram,
            socket_buffer_bytes: s.socket_buffer_bytes.max(4096),
        }),
        out,
    ))
}

/// Every neighbour in exactly one of `[[span]]`, `[[tcp_peer]]`, `[[udp_peer]]`: `entries` are
/// (field name, node number) in file order; the second mention of a node is the error.
pub(crate) fn check_unique_neighbours(
    file: &str,
    entries: &[(String, u64)],
) -> Result<(), ConfigError> {
    for (i, (field, peer)) in entries.iter().enumerate() {
        if let Some((first, _)) = entries.iter().take(i).find(|(_, p)| p == peer) {
            return Err(err(
                file,
                field,
                peer,
                &format!(
                    "one convergence layer per neighbour (node {peer} is already configured by `{first}`)"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        tcpcl: TcpclSection,
        #[serde(default)]
        tcp_peer: Vec<TcpPeerSection>,
    }

    fn tcp(text: &str) -> Result<(Tcpcl, Vec<TcpPeer>), ConfigError> {
        let d: Doc = toml::from_str(text).expect("toml");
        validate_tcp(
            "n.toml",
            Path::new("/"),
            1,
            1 << 20,
            Some(&d.tcpcl),
            &d.tcp_peer,
        )
        .map(|(t, p)| (t.expect("section"), p))
    }

    #[test]
    fn tcpcl_versions_per_peer_and_v3_accepted_by_default() {
        let (t, peers) = tcp(
            "[tcpcl]\n[[tcp_peer]]\npeer = 2\naddress = \"127.0.0.1:4556\"\n\
             [[tcp_peer]]\npeer = 3\naddress = \"127.0.0.1:4557\"\nversion = 3\n\
             [[tcp_peer]]\npeer = 4\nversion = 4\n",
        )
        .unwrap();
        assert!(t.accept_v3);
        assert_eq!(t.v3_max_segment_size, 65_536);
        let v: Vec<tcpcl::Version> = peers.iter().map(|p| p.version).collect();
        assert_eq!(
            v,
            [tcpcl::Version::V4, tcpcl::Version::V3, tcpcl::Version::V4]
        );
        // No TLS name for a v3 peer (it has no TLS), the address's IP for a v4 one.
        assert_eq!(peers[0].tls_name.as_deref(), Some("127.0.0.1"));
        assert_eq!(peers[1].tls_name, None);
        let (t, _) = tcp("[tcpcl]\naccept_v3 = false\nv3_max_segment_size = 1048576\n").unwrap();
        assert!(!t.accept_v3);
        assert_eq!(t.v3_max_segment_size, 1 << 20);
    }

    #[test]
    fn tcpcl_version_errors_name_the_field() {
        let cases = [
            (
                "[tcpcl]\n[[tcp_peer]]\npeer = 2\nversion = 5\n",
                "tcp_peer[0].version` = 5: expected 3 (TCPCLv3, RFC 7242) or 4",
            ),
            (
                "[tcpcl]\n[[tcp_peer]]\npeer = 2\nversion = 3\ntls_name = \"peer.example\"\n",
                "tcp_peer[0].tls_name` = \"peer.example\": expected no TLS name for a `version = 3` peer",
            ),
            (
                "[tcpcl]\nv3_max_segment_size = 100\n",
                "tcpcl.v3_max_segment_size` = 100",
            ),
        ];
        for (text, needle) in cases {
            let e = tcp(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} should contain {needle:?}");
        }
    }
}
