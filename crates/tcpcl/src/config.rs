//! Session configuration.

use std::time::Duration;

use crate::decode::DecodeLimits;
use crate::msg::ExtensionItem;
use crate::pool::BufferPool;

/// Which side of the TCP connection this session is (RFC 9174, 3.1): the active entity
/// connected and speaks first; the passive entity accepted the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Initiated the TCP connection; sends its contact header and SESS_INIT first, and is
    /// the TLS client.
    Active,
    /// Accepted the TCP connection; answers the active entity, and is the TLS server.
    Passive,
}

/// Parameters of one session, of either version. [`SessionConfig::new`] gives the defaults
/// documented on each field. A TCPCLv3 session ([`crate::v3::Session`]) uses `node_id` (its
/// contact header EID), `expected_peer_node_id`, `keepalive`, `hard_segment_limit` and
/// `hard_transfer_limit` (v3 advertises no MRUs, so these are its only receive limits), the
/// timeouts, the queue and chunk sizes, `defer_final_ack`, `max_held_acks`, and [`V3Options`];
/// the other fields are TCPCLv4 only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Our node ID, sent in SESS_INIT (e.g. `ipn:1.0`); at most 65535 octets, otherwise
    /// the session closes at once with `ContactFailure`.
    pub node_id: String,
    /// The node ID we expect the peer to present, if known (e.g. from the contact plan). A
    /// different one ends the session with `ContactFailure`. Default: none (any accepted).
    pub expected_peer_node_id: Option<String>,
    /// Our keepalive interval in seconds (0 disables); the session uses the minimum of both
    /// sides. Default 30.
    pub keepalive: u16,
    /// Segment MRU we advertise: the largest segment data we accept. Default 1 MiB.
    pub segment_mru: u64,
    /// Transfer MRU we advertise: the largest bundle we accept. Default 64 MiB.
    pub transfer_mru: u64,
    /// Largest segment we accept in practice: segments above `segment_mru` but within this
    /// are accepted and reported as a deviation; above it the session ends
    /// (`ResourceExhaustion`). Default: equal to `segment_mru` (strict).
    pub hard_segment_limit: u64,
    /// Largest transfer we accept in practice: transfers above `transfer_mru` but within
    /// this are accepted and reported as a deviation; above it they are refused
    /// (`NotAcceptable`). Default: equal to `transfer_mru` (strict).
    pub hard_transfer_limit: u64,
    /// Largest segment data we send, whatever the peer's segment MRU allows. Default 1 MiB.
    pub max_segment_size: u64,
    /// Send bundles larger than the peer's transfer MRU anyway (for peers known to
    /// under-advertise it, such as dtn7, which advertises 64000 and accepts megabytes).
    /// Each such transfer is counted in `SessionStats::sent_over_peer_transfer_mru`.
    /// Default false: `send_bundle` refuses with `SendError::TooLarge`, and the agent
    /// fragments at the bundle layer.
    pub exceed_peer_transfer_mru: bool,
    /// Set CAN_TLS in our contact header. Default false.
    pub can_tls: bool,
    /// End the session (`ContactFailure`) unless both sides set CAN_TLS. Default false.
    pub require_tls: bool,
    /// Time allowed from session start to `Established` (contact headers, TLS, SESS_INIT).
    /// Default 30 s.
    pub establish_timeout: Duration,
    /// Time allowed after we send SESS_TERM for the reply and in-progress transfers to
    /// finish. Default 10 s.
    pub termination_timeout: Duration,
    /// Outgoing transfers queued or unacknowledged at once; beyond, `send_bundle` returns
    /// `SendError::QueueFull`. Default 64.
    pub max_queued_transfers: usize,
    /// Octets of data segments one `poll_transmit` call appends (at least one segment is
    /// appended if any is ready). Default 4 MiB.
    pub max_transmit_chunk: usize,
    /// Session extension items we send in SESS_INIT. Default none.
    pub session_extensions: Vec<ExtensionItem>,
    /// Limits on extension item lists while decoding. Default [`DecodeLimits::default`].
    pub limits: DecodeLimits,
    /// Hold back the XFER_ACK of the last segment (END) of every incoming transfer until the
    /// driver calls [`crate::Session::confirm_transfer`] — typically after the bundle was
    /// committed to a persistent store — so that the sender never deletes a bundle this node
    /// could still lose. `BundleReceived` is emitted as usual; acknowledgments of the other
    /// segments are sent at once. Default false: every segment is acknowledged as soon as
    /// it is processed.
    pub defer_final_ack: bool,
    /// With `defer_final_ack`: completed transfers whose final acknowledgment may be held at
    /// once. A transfer starting while this many are held is refused at its first segment
    /// (XFER_REFUSE "No Resources"), which keeps the session's memory bounded when the
    /// driver is slow to confirm. Default 4096.
    pub max_held_acks: usize,
    /// Compute the CRC-32C of a received bundle's octets as they arrive (each piece right
    /// after it was read, while it is still in the CPU's cache) and report it in
    /// `Event::BundleReceived`, for transfers whose announced length (TCPCLv4 Transfer Length
    /// extension, v3 LENGTH) is at least this many octets, or is not announced: a driver that
    /// checks the bundle's CRC-32C fields or checksums what it stores needs no separate pass
    /// over the whole bundle. Default `None`: never.
    pub checksum_received_from: Option<u64>,
    /// Take the reassembly buffers of incoming transfers from this pool, and give a received
    /// bundle's storage back to it once the last reference to its `Bytes` is dropped (on any
    /// thread), so that steady-state transfers reuse memory whose pages are already mapped
    /// instead of faulting in fresh ones (see [`crate::pool`] for the bounds). Default `None`:
    /// every transfer gets a new buffer from the allocator.
    pub recycle_buffers: Option<BufferPool>,
    /// TCPCLv3 options (RFC 7242): what our contact header requests, and the segment size.
    pub v3: V3Options,
}

/// What a TCPCLv3 session requests in its contact header, and how it segments. Each option is
/// in force only if both contact headers set it (LENGTH: if the peer requests it, we send it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct V3Options {
    /// Request ACK_SEGMENTs (flag 0x01). Without them on both sides a bundle counts as sent
    /// once written: there is no delivery confirmation (`SessionStats::transfers_unconfirmed`).
    /// Default true.
    pub request_acks: bool,
    /// Support REFUSE_BUNDLE (flag 0x04; only with acknowledgments). Default true.
    pub refusals: bool,
    /// Request LENGTH messages before each bundle (flag 0x08), so that a bundle larger than
    /// the store's free space can be refused at its first segment. Default false: ION neither
    /// sends nor requests them, and Wireshark's TCPCL dissector (4.0) flags every LENGTH as an
    /// unknown message; without them such a bundle is refused once received.
    pub request_length: bool,
    /// Largest DATA_SEGMENT we send. Default 64 KiB: ION reads and acknowledges in 64 KiB
    /// pieces, so larger segments draw acknowledgments inside a segment, which RFC 7242 does
    /// not allow (tolerated and counted as `AckNotOnSegmentBoundary`).
    pub max_segment_size: u64,
}

impl Default for V3Options {
    fn default() -> Self {
        V3Options {
            request_acks: true,
            refusals: true,
            request_length: false,
            max_segment_size: 64 << 10,
        }
    }
}

impl SessionConfig {
    /// Whether a transfer announcing `declared` octets is checksummed as it arrives
    /// ([`SessionConfig::checksum_received_from`]).
    pub(crate) fn checksum_received(&self, declared: Option<u64>) -> bool {
        self.checksum_received_from
            .is_some_and(|from| declared.is_none_or(|l| l >= from))
    }

    /// Defaults for a node with this node ID.
    pub fn new(node_id: impl Into<String>) -> Self {
        SessionConfig {
            node_id: node_id.into(),
            expected_peer_node_id: None,
            keepalive: 30,
            segment_mru: 1 << 20,
            transfer_mru: 64 << 20,
            hard_segment_limit: 1 << 20,
            hard_transfer_limit: 64 << 20,
            max_segment_size: 1 << 20,
            exceed_peer_transfer_mru: false,
            can_tls: false,
            require_tls: false,
            establish_timeout: Duration::from_secs(30),
            termination_timeout: Duration::from_secs(10),
            max_queued_transfers: 64,
            max_transmit_chunk: 4 << 20,
            session_extensions: Vec::new(),
            limits: DecodeLimits::default(),
            defer_final_ack: false,
            max_held_acks: 4096,
            checksum_received_from: None,
            recycle_buffers: None,
            v3: V3Options::default(),
        }
    }
}
