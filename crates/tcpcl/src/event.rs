//! Events the session reports to its driver (the convergence layer adapter or a test).

use std::fmt;

use bytes::Bytes;

use crate::config::Role;
use crate::msg::{RefuseReason, RejectReason, SessTermReason};

/// A peer behaviour RFC 9174 (or, for a v3 session, RFC 7242) does not allow of a sender but
/// that a receiver can tolerate.
/// The session accepts it, counts every occurrence and reports each kind once per session
/// as [`Event::ProtocolDeviation`]; it never behaves this way itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deviation {
    /// An XFER_ACK whose flags do not echo the acknowledged segment's flags (dtn7 always
    /// sends 0). The cumulative length alone decides completion.
    AckFlags,
    /// A segment larger than our segment MRU (within `hard_segment_limit`).
    SegmentOverMru,
    /// A transfer larger than our transfer MRU (within `hard_transfer_limit`).
    TransferOverMru,
    /// A segment with START while the previous incoming transfer had no END; the
    /// unfinished transfer is discarded.
    StartBeforeEnd,
    /// An XFER_ACK acknowledging more than was sent, or less than a previous one; ignored.
    AckOutOfRange,
    /// An XFER_REFUSE or XFER_ACK for a transfer that is unknown or already finished (v3: an
    /// ACK_SEGMENT or REFUSE_BUNDLE while no bundle awaits one); ignored.
    StaleTransferId,
    /// (v3) An ACK_SEGMENT whose length falls inside a segment (ION acknowledges every 64 KiB
    /// it reads); counted as progress.
    AckNotOnSegmentBoundary,
    /// (v3) ACK_SEGMENTs in a session that did not negotiate them; ignored.
    UnrequestedAck,
    /// (v3) A REFUSE_BUNDLE in a session that did not negotiate refusals; honoured.
    UnnegotiatedRefusal,
    /// (v3) A LENGTH message we did not request; used.
    UnrequestedLength,
}

impl fmt::Display for Deviation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Deviation::AckFlags => "XFER_ACK flags do not echo the segment flags",
            Deviation::SegmentOverMru => "segment larger than our segment MRU",
            Deviation::TransferOverMru => "transfer larger than our transfer MRU",
            Deviation::StartBeforeEnd => "new transfer started before the previous one ended",
            Deviation::AckOutOfRange => "XFER_ACK length outside the data sent",
            Deviation::StaleTransferId => "message for an unknown or finished transfer",
            Deviation::AckNotOnSegmentBoundary => "ACK_SEGMENT length inside a segment",
            Deviation::UnrequestedAck => "ACK_SEGMENT without negotiated acknowledgments",
            Deviation::UnnegotiatedRefusal => "REFUSE_BUNDLE without negotiated refusals",
            Deviation::UnrequestedLength => "LENGTH message that was not requested",
        })
    }
}

/// Something the driver must know about. Drain with [`crate::Session::poll_event`] after
/// every input, timeout and transmit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Both sides set CAN_TLS: the driver must now flush `poll_transmit` in plaintext, run
    /// the TLS handshake on the socket (`role` Active = TLS client), then call
    /// [`crate::Session::tls_established`] and from then on pass only decrypted octets to
    /// `handle_input` and encrypt everything `poll_transmit` yields. No SESS_INIT is sent
    /// or parsed before that call.
    StartTls {
        /// Our role (Active is the TLS client).
        role: Role,
    },
    /// The session is established; bundles may be sent.
    Established {
        /// The peer's node ID from its SESS_INIT (v3: the EID of its contact header).
        peer_node_id: String,
        /// Negotiated keepalive interval in seconds (0: disabled).
        keepalive: u16,
        /// The peer's segment MRU (v3 has none: `u64::MAX`).
        peer_segment_mru: u64,
        /// The peer's transfer MRU (v3 has none: `u64::MAX`).
        peer_transfer_mru: u64,
        /// Whether both contact headers set CAN_TLS (TLS is then in use below the session).
        tls_requested_by_both: bool,
    },
    /// The peer started a transfer (first segment header received; v3: a DATA_SEGMENT with
    /// the S flag, `transfer_id` counting the peer's bundles from 0 and `total_len` from a
    /// preceding LENGTH message). The driver may refuse it with
    /// [`crate::Session::refuse_transfer`] (e.g. store full) before it completes.
    TransferStarted {
        /// The peer's transfer id.
        transfer_id: u64,
        /// The Transfer Length the peer announced, if any.
        total_len: Option<u64>,
    },
    /// An incoming transfer completed. Every segment has been acknowledged to the peer,
    /// except, with `SessionConfig::defer_final_ack`, the last one: its XFER_ACK waits for
    /// [`crate::Session::confirm_transfer`] with this `transfer_id`.
    BundleReceived {
        /// The peer's transfer id.
        transfer_id: u64,
        /// The reassembled bundle.
        bundle: Bytes,
        /// The CRC-32C of `bundle`'s octets, computed as they arrived, with
        /// `SessionConfig::checksum_received_from`; `None` without.
        crc32c: Option<u32>,
    },
    /// An outgoing transfer was fully acknowledged (v3 without negotiated ACK_SEGMENTs: its
    /// last octet was handed to the driver, counted in `SessionStats::transfers_unconfirmed`).
    TransferAcked {
        /// The token given to `send_bundle`.
        token: u64,
    },
    /// The peer refused an outgoing transfer (`Completed` means it already has the bundle).
    TransferRefused {
        /// The token given to `send_bundle`.
        token: u64,
        /// The peer's reason.
        reason: RefuseReason,
    },
    /// An outgoing transfer was not fully acknowledged before the session ended; the agent
    /// should forward the bundle again (on this or another session).
    TransferFailed {
        /// The token given to `send_bundle`.
        token: u64,
    },
    /// The peer rejected one of our messages.
    MessageRejected {
        /// The peer's reason.
        reason: RejectReason,
        /// The type code of the rejected message.
        rejected_type: u8,
    },
    /// A tolerated peer deviation (first occurrence of each kind in this session).
    ProtocolDeviation {
        /// What the peer did.
        what: Deviation,
    },
    /// The session ended. Emitted once, after every pending transfer has been reported.
    Terminated {
        /// The SESS_TERM reason (ours or the peer's), or the local reason for an abrupt end
        /// (v3: the SHUTDOWN reason in these terms, `Unknown` when it carried none).
        reason: SessTermReason,
        /// Whether the peer initiated the end (its SESS_TERM, or the connection was lost).
        by_peer: bool,
    },
}
