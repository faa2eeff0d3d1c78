//! Session counters (both versions), for monitoring and the experiment tools. Message names
//! are TCPCLv4's; a v3 session counts DATA_SEGMENT, ACK_SEGMENT, REFUSE_BUNDLE in their place.

/// Cumulative counters of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Octets handed to the driver by `poll_transmit`.
    pub bytes_sent: u64,
    /// Octets passed to `handle_input` or reported to `payload_filled`.
    pub bytes_received: u64,
    /// XFER_SEGMENTs sent.
    pub segments_sent: u64,
    /// XFER_SEGMENTs received.
    pub segments_received: u64,
    /// XFER_ACKs sent.
    pub acks_sent: u64,
    /// XFER_ACKs received.
    pub acks_received: u64,
    /// Outgoing transfers fully acknowledged.
    pub transfers_acked: u64,
    /// Outgoing transfers refused by the peer.
    pub transfers_refused_by_peer: u64,
    /// Outgoing transfers that failed (session ended first).
    pub transfers_failed: u64,
    /// Incoming transfers delivered.
    pub bundles_received: u64,
    /// Incoming transfers we refused.
    pub transfers_refused: u64,
    /// KEEPALIVEs sent.
    pub keepalives_sent: u64,
    /// KEEPALIVEs received.
    pub keepalives_received: u64,
    /// MSG_REJECTs sent.
    pub rejects_sent: u64,
    /// MSG_REJECTs received.
    pub rejects_received: u64,
    /// Tolerated peer deviations (every occurrence; the event is emitted once per kind).
    pub deviations: u64,
    /// Bundles sent beyond the peer's advertised transfer MRU
    /// (`SessionConfig::exceed_peer_transfer_mru`).
    pub sent_over_peer_transfer_mru: u64,
    /// (v3) Bundles counted as sent without an acknowledgment, because the session did not
    /// negotiate ACK_SEGMENTs.
    pub transfers_unconfirmed: u64,
}
