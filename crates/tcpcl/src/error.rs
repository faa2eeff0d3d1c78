//! Typed errors of the codec and the session API.

use thiserror::Error;

use crate::msg::SessTermReason;

/// Why received octets are not a valid TCPCL message (v4, or v3 in [`crate::v3`]). Every
/// variant names the field at fault; all of them are peer-input problems and end the session
/// (TCP framing cannot be recovered after a malformed message).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The contact header does not start with `dtn!`.
    #[error("contact header magic is {0:02x?}, expected \"dtn!\"")]
    BadMagic([u8; 4]),
    /// The message type code is not one the version's RFC defines (RFC 9174; for v3 the
    /// four-bit type of RFC 7242).
    #[error("unknown message type code {0:#04x}")]
    UnknownMessageType(u8),
    /// A length field exceeds the configured (or negotiated) limit; nothing was allocated.
    #[error("{field} length {len} exceeds the limit {limit}")]
    TooLong {
        /// The length field.
        field: &'static str,
        /// Declared length.
        len: u64,
        /// Limit in force.
        limit: u64,
    },
    /// The SESS_INIT node ID is not UTF-8.
    #[error("SESS_INIT node id is not valid UTF-8")]
    NodeIdNotUtf8,
    /// An extension item runs past the end of its item list.
    #[error("{field}: item overruns the declared list length")]
    ItemOverrun {
        /// The list (session or transfer extension items).
        field: &'static str,
    },
    /// A Transfer Length extension item whose value is not 8 octets.
    #[error("transfer length extension value is {0} octets, expected 8")]
    BadTransferLength(usize),
    /// (v3) An SDNV whose value does not fit in 64 bits.
    #[error("{field}: SDNV does not fit in 64 bits")]
    SdnvOverflow {
        /// The SDNV field.
        field: &'static str,
    },
    /// (v3) The contact header's local EID is not UTF-8.
    #[error("contact header EID is not valid UTF-8")]
    EidNotUtf8,
    /// (v3) A message with flag bits set that RFC 7242 leaves unused for its type.
    #[error("{message} with unused flag bits {flags:#03x} set")]
    ReservedFlags {
        /// The message type.
        message: &'static str,
        /// The message's four flag bits.
        flags: u8,
    },
}

/// Why a message could not be encoded (a field longer than its length field allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// A variable-length field is too long.
    #[error("{field} is {len} octets, at most {max} can be encoded")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        len: u64,
        /// The encodable maximum.
        max: u64,
    },
    /// Transfer extension items on a segment without START (they are only encoded there).
    #[error("transfer extension items on a segment without the START flag")]
    ExtensionsWithoutStart,
}

/// A fatal session error returned by [`crate::Session::handle_input`]. The session has
/// already queued whatever the RFC requires (MSG_REJECT, SESS_TERM, a contact header) and
/// is closed: the driver flushes [`crate::Session::poll_transmit`] and closes the socket.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SessionError {
    /// Malformed peer input.
    #[error("malformed input: {0}")]
    Decode(#[from] DecodeError),
    /// The peer speaks another TCPCL version than the session.
    #[error("peer contact header has version {0}, not the version of this session")]
    VersionMismatch(u8),
    /// The peer's SESS_INIT carries a node id other than the configured expected one.
    #[error("peer node id {got:?} is not the expected {expected:?}")]
    NodeIdMismatch {
        /// Expected node id.
        expected: String,
        /// Received node id.
        got: String,
    },
    /// The peer's SESS_INIT carries a session extension item we must understand but do not.
    #[error("unknown critical session extension item type {0:#06x}")]
    CriticalSessionExtension(u16),
    /// The peer's session parameters are unusable (e.g. segment MRU 0) or TLS is required
    /// by policy but not offered by the peer.
    #[error("unacceptable session parameters: {0}")]
    Unacceptable(&'static str),
    /// The peer sent a segment whose data exceeds our hard segment limit.
    #[error("segment of {len} octets exceeds the hard segment limit {limit}")]
    SegmentTooLarge {
        /// Declared segment data length.
        len: u64,
        /// Our hard limit.
        limit: u64,
    },
    /// The driver reported more octets to `Session::payload_filled` than the last
    /// `Session::payload_buf` offered (or other input came in between): a driver bug.
    /// Which octets are segment data is no longer known, so the session ends.
    #[error("payload_filled({filled}) exceeds the {offered} octets offered by payload_buf")]
    PayloadOverrun {
        /// Octets reported.
        filled: usize,
        /// Octets offered (0 if invalidated by other input).
        offered: usize,
    },
    /// The peer broke a rule of the protocol that leaves the two sides out of step (v3: a
    /// DATA_SEGMENT continuing a bundle that never started).
    #[error("protocol violation: {0}")]
    ProtocolViolation(&'static str),
    /// Input after the session closed.
    #[error("session is closed ({0:?})")]
    Closed(SessTermReason),
}

/// Why [`crate::Session::send_bundle`] did not accept a bundle. The bundle stays with the
/// caller (nothing was queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SendError {
    /// The session is not established yet (wait for `Event::Established`).
    #[error("session not established")]
    NotEstablished,
    /// The session is terminating or closed; no new transfer may start (RFC 9174, 6.1).
    #[error("session is terminating")]
    Terminating,
    /// The bundle is empty.
    #[error("empty bundle")]
    Empty,
    /// The bundle exceeds the peer's transfer MRU: fragment it at the bundle layer.
    #[error("bundle of {len} octets exceeds the peer's transfer MRU {mru}")]
    TooLarge {
        /// Bundle length.
        len: u64,
        /// The peer's transfer MRU.
        mru: u64,
    },
    /// `SessionConfig::max_queued_transfers` transfers are already queued or unacknowledged.
    #[error("transfer queue full")]
    QueueFull,
    /// Transfer ids are exhausted (2^64 - 1 transfers); the session is now terminating
    /// with `ResourceExhaustion` (RFC 9174, 5.2.1); open a new one.
    #[error("transfer ids exhausted")]
    IdsExhausted,
}

/// Why [`crate::Session::refuse_transfer`] could not refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RefuseError {
    /// No incoming transfer with this id is in progress (it completed, was refused, or never
    /// started).
    #[error("no incoming transfer {0} in progress")]
    UnknownTransfer(u64),
}

/// Why [`crate::Session::confirm_transfer`] could not confirm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ConfirmError {
    /// No completed transfer with this id awaits confirmation (never received, already
    /// confirmed, or `defer_final_ack` is off).
    #[error("no incoming transfer {0} awaits confirmation")]
    UnknownTransfer(u64),
    /// The session has closed; held acknowledgments were dropped with it and the sender
    /// counts those transfers as failed (it forwards the bundles again).
    #[error("session is closed")]
    Closed,
}
