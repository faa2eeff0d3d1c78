//! TCPCLv4 wire types (RFC 9174, sections 4 and 5) and their encoding.
//!
//! All multi-octet fields are big-endian. Every message after the contact header starts with
//! a one-octet message type code. The types here keep unassigned flag bits and reason codes
//! as received, so a decoded message re-encodes to the same octets; the session ignores
//! reserved flag bits as the RFC requires of receivers.

use bytes::{BufMut, Bytes};

use crate::error::EncodeError;

/// The contact header magic, `dtn!`.
pub const MAGIC: [u8; 4] = *b"dtn!";
/// The protocol version this crate implements.
pub const VERSION: u8 = 4;
/// Length of the contact header: magic (4), version (1), flags (1).
pub const CONTACT_HEADER_LEN: usize = 6;
/// Transfer extension item type of the Transfer Length extension (RFC 9174, 5.2.5.1).
pub const TRANSFER_LENGTH_EXTENSION: u16 = 0x0001;

/// Contact header flags (RFC 9174, 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ContactFlags(pub u8);

impl ContactFlags {
    /// The sender is able to use TLS (CAN_TLS).
    pub const CAN_TLS: u8 = 0x01;

    /// Whether the CAN_TLS bit is set.
    pub fn can_tls(self) -> bool {
        self.0 & Self::CAN_TLS != 0
    }
}

/// The six-octet contact header each entity sends first (RFC 9174, 4.2).
///
/// The version is kept as received so the session can answer a version mismatch as the RFC
/// prescribes instead of failing at decode time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContactHeader {
    /// Protocol version (4 for this crate).
    pub version: u8,
    /// Contact flags.
    pub flags: ContactFlags,
}

impl ContactHeader {
    /// A version-4 contact header, with CAN_TLS if `can_tls`.
    pub fn new(can_tls: bool) -> Self {
        ContactHeader {
            version: VERSION,
            flags: ContactFlags(if can_tls { ContactFlags::CAN_TLS } else { 0 }),
        }
    }

    /// Appends the six octets to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC);
        out.push(self.version);
        out.push(self.flags.0);
    }
}

/// Message type codes (RFC 9174, 5.1, IANA "TCPCLv4 Message Types").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageType {
    /// A segment of bundle data.
    XferSegment = 0x01,
    /// Acknowledgment of a segment.
    XferAck = 0x02,
    /// Refusal of a transfer.
    XferRefuse = 0x03,
    /// Keepalive.
    Keepalive = 0x04,
    /// Session termination.
    SessTerm = 0x05,
    /// Message rejection.
    MsgReject = 0x06,
    /// Session initialization.
    SessInit = 0x07,
}

impl MessageType {
    /// The message type for a code, if it is one RFC 9174 defines.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x01 => MessageType::XferSegment,
            0x02 => MessageType::XferAck,
            0x03 => MessageType::XferRefuse,
            0x04 => MessageType::Keepalive,
            0x05 => MessageType::SessTerm,
            0x06 => MessageType::MsgReject,
            0x07 => MessageType::SessInit,
            _ => return None,
        })
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// A session or transfer extension item (RFC 9174, 4.8 and 5.2.5): flags, type, value.
///
/// The value is at most 65535 octets (its length field is 16 bits); encoding a longer one
/// fails with [`EncodeError`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtensionItem {
    /// Item flags; bit 0x01 is CRITICAL, the others are reserved.
    pub flags: u8,
    /// Item type code.
    pub item_type: u16,
    /// Item value.
    pub value: Bytes,
}

impl ExtensionItem {
    /// Flag bit: the receiver must understand this item or refuse/terminate.
    pub const CRITICAL: u8 = 0x01;
    /// Octets before the value: flags (1), type (2), length (2).
    pub const HEADER_LEN: usize = 5;

    /// Whether the CRITICAL flag is set.
    pub fn is_critical(&self) -> bool {
        self.flags & Self::CRITICAL != 0
    }

    /// A Transfer Length extension item (not critical) announcing `len` octets in total.
    pub fn transfer_length(len: u64) -> Self {
        ExtensionItem {
            flags: 0,
            item_type: TRANSFER_LENGTH_EXTENSION,
            value: Bytes::copy_from_slice(&len.to_be_bytes()),
        }
    }

    fn encoded_len(&self) -> usize {
        Self::HEADER_LEN + self.value.len()
    }

    fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let len = u16::try_from(self.value.len()).map_err(|_| EncodeError::TooLong {
            field: "extension item value",
            len: self.value.len() as u64,
            max: u64::from(u16::MAX),
        })?;
        out.push(self.flags);
        out.put_u16(self.item_type);
        out.put_u16(len);
        out.extend_from_slice(&self.value);
        Ok(())
    }
}

fn encode_items(
    items: &[ExtensionItem],
    field: &'static str,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let total: usize = items.iter().map(ExtensionItem::encoded_len).sum();
    let total = u32::try_from(total).map_err(|_| EncodeError::TooLong {
        field,
        len: total as u64,
        max: u64::from(u32::MAX),
    })?;
    out.put_u32(total);
    for item in items {
        item.encode(out)?;
    }
    Ok(())
}

/// SESS_INIT: one entity's session parameters (RFC 9174, 4.6).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessInit {
    /// Desired keepalive interval in seconds (0 disables keepalives).
    pub keepalive: u16,
    /// Largest segment data payload this entity accepts.
    pub segment_mru: u64,
    /// Largest total transfer (bundle) this entity accepts.
    pub transfer_mru: u64,
    /// The sending entity's node ID (a URI such as `ipn:1.0` or `dtn://node/`).
    pub node_id: String,
    /// Session extension items.
    pub extensions: Vec<ExtensionItem>,
}

/// SESS_TERM flags (RFC 9174, 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SessTermFlags(pub u8);

impl SessTermFlags {
    /// This SESS_TERM answers one received from the peer.
    pub const REPLY: u8 = 0x01;

    /// Whether the REPLY bit is set.
    pub fn is_reply(self) -> bool {
        self.0 & Self::REPLY != 0
    }
}

/// SESS_TERM reason codes (RFC 9174, 6.1, IANA "TCPCLv4 Session Termination Reason Codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessTermReason {
    /// 0x00: unknown or unspecified.
    Unknown,
    /// 0x01: no message received within twice the keepalive interval.
    IdleTimeout,
    /// 0x02: the peer's contact header carried another protocol version.
    VersionMismatch,
    /// 0x03: the entity is too busy to handle the session.
    Busy,
    /// 0x04: session parameters or the peer's identity are unacceptable.
    ContactFailure,
    /// 0x05: the entity ran out of resources (memory, transfer ids, ...).
    ResourceExhaustion,
    /// An unassigned or private code, kept as received.
    Other(u8),
}

impl SessTermReason {
    /// The reason for a wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            0x00 => Self::Unknown,
            0x01 => Self::IdleTimeout,
            0x02 => Self::VersionMismatch,
            0x03 => Self::Busy,
            0x04 => Self::ContactFailure,
            0x05 => Self::ResourceExhaustion,
            other => Self::Other(other),
        }
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            Self::Unknown => 0x00,
            Self::IdleTimeout => 0x01,
            Self::VersionMismatch => 0x02,
            Self::Busy => 0x03,
            Self::ContactFailure => 0x04,
            Self::ResourceExhaustion => 0x05,
            Self::Other(code) => code,
        }
    }
}

/// SESS_TERM: one side ends the session (RFC 9174, 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessTerm {
    /// Flags (REPLY).
    pub flags: SessTermFlags,
    /// Why the session ends.
    pub reason: SessTermReason,
}

/// XFER_SEGMENT and XFER_ACK flags (RFC 9174, 5.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SegmentFlags(pub u8);

impl SegmentFlags {
    /// Last segment of a transfer.
    pub const END: u8 = 0x01;
    /// First segment of a transfer (carries the transfer extension items).
    pub const START: u8 = 0x02;

    /// Flags for a segment that is first and/or last of its transfer.
    pub fn new(start: bool, end: bool) -> Self {
        SegmentFlags(if start { Self::START } else { 0 } | if end { Self::END } else { 0 })
    }

    /// Whether START is set.
    pub fn is_start(self) -> bool {
        self.0 & Self::START != 0
    }

    /// Whether END is set.
    pub fn is_end(self) -> bool {
        self.0 & Self::END != 0
    }

    /// The START and END bits only (reserved bits cleared), for comparisons.
    pub fn defined(self) -> Self {
        SegmentFlags(self.0 & (Self::START | Self::END))
    }
}

/// The fixed and extension fields of an XFER_SEGMENT, without its data.
///
/// Kept separate from the data so the stream decoder can hand the payload to its final
/// destination (the reassembly buffer) in the pieces it arrives in, without an extra copy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SegmentHeader {
    /// START/END flags.
    pub flags: SegmentFlags,
    /// Transfer the segment belongs to.
    pub transfer_id: u64,
    /// Transfer extension items (present on the wire only when START is set).
    pub extensions: Vec<ExtensionItem>,
    /// Length of the data that follows.
    pub data_len: u64,
}

impl SegmentHeader {
    /// Appends the header octets (type code through data length) to `out`; the caller
    /// appends exactly `data_len` data octets afterwards.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.push(MessageType::XferSegment.code());
        out.push(self.flags.0);
        out.put_u64(self.transfer_id);
        if self.flags.is_start() {
            encode_items(&self.extensions, "transfer extension items", out)?;
        } else if !self.extensions.is_empty() {
            return Err(EncodeError::ExtensionsWithoutStart);
        }
        out.put_u64(self.data_len);
        Ok(())
    }

    /// Encoded length of the header (without data).
    pub fn encoded_len(&self) -> usize {
        let items = if self.flags.is_start() {
            4 + self
                .extensions
                .iter()
                .map(ExtensionItem::encoded_len)
                .sum::<usize>()
        } else {
            0
        };
        1 + 1 + 8 + items + 8
    }
}

/// XFER_SEGMENT: a piece of a bundle transfer (RFC 9174, 5.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct XferSegment {
    /// START/END flags.
    pub flags: SegmentFlags,
    /// Transfer the segment belongs to.
    pub transfer_id: u64,
    /// Transfer extension items (only with START).
    pub extensions: Vec<ExtensionItem>,
    /// The data.
    pub data: Bytes,
}

/// XFER_ACK: cumulative acknowledgment of a transfer's data (RFC 9174, 5.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct XferAck {
    /// Flags of the acknowledged segment, echoed.
    pub flags: SegmentFlags,
    /// Transfer acknowledged.
    pub transfer_id: u64,
    /// Octets of the transfer received so far.
    pub acknowledged_len: u64,
}

/// XFER_REFUSE reason codes (RFC 9174, 5.2.4, IANA "TCPCLv4 XFER_REFUSE Reason Codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefuseReason {
    /// 0x00: unknown or unspecified.
    Unknown,
    /// 0x01: the receiver already has the complete bundle.
    Completed,
    /// 0x02: the receiver's resources are exhausted.
    NoResources,
    /// 0x03: the receiver has a problem with the data; the sender should retransmit.
    Retransmit,
    /// 0x04: the bundle (or a segment) is not acceptable, e.g. too large.
    NotAcceptable,
    /// 0x05: a critical transfer extension item was not understood or failed.
    ExtensionFailure,
    /// 0x06: the session is terminating and accepts no new transfer.
    SessionTerminating,
    /// An unassigned or private code, kept as received.
    Other(u8),
}

impl RefuseReason {
    /// The reason for a wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            0x00 => Self::Unknown,
            0x01 => Self::Completed,
            0x02 => Self::NoResources,
            0x03 => Self::Retransmit,
            0x04 => Self::NotAcceptable,
            0x05 => Self::ExtensionFailure,
            0x06 => Self::SessionTerminating,
            other => Self::Other(other),
        }
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            Self::Unknown => 0x00,
            Self::Completed => 0x01,
            Self::NoResources => 0x02,
            Self::Retransmit => 0x03,
            Self::NotAcceptable => 0x04,
            Self::ExtensionFailure => 0x05,
            Self::SessionTerminating => 0x06,
            Self::Other(code) => code,
        }
    }
}

/// XFER_REFUSE: the receiver refuses a transfer (RFC 9174, 5.2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct XferRefuse {
    /// Why.
    pub reason: RefuseReason,
    /// Transfer refused.
    pub transfer_id: u64,
}

/// MSG_REJECT reason codes (RFC 9174, 5.1.2, IANA "TCPCLv4 MSG_REJECT Reason Codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// 0x01: the message type code is unknown.
    TypeUnknown,
    /// 0x02: the message type is known but not supported in this session.
    Unsupported,
    /// 0x03: the message is not valid in the current session state.
    Unexpected,
    /// Any other code, kept as received.
    Other(u8),
}

impl RejectReason {
    /// The reason for a wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            0x01 => Self::TypeUnknown,
            0x02 => Self::Unsupported,
            0x03 => Self::Unexpected,
            other => Self::Other(other),
        }
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            Self::TypeUnknown => 0x01,
            Self::Unsupported => 0x02,
            Self::Unexpected => 0x03,
            Self::Other(code) => code,
        }
    }
}

/// MSG_REJECT: the peer could not process a message (RFC 9174, 5.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MsgReject {
    /// Why.
    pub reason: RejectReason,
    /// The message type code of the rejected message.
    pub rejected_type: u8,
}

/// Any message after the contact header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// SESS_INIT.
    SessInit(SessInit),
    /// SESS_TERM.
    SessTerm(SessTerm),
    /// XFER_SEGMENT.
    XferSegment(XferSegment),
    /// XFER_ACK.
    XferAck(XferAck),
    /// XFER_REFUSE.
    XferRefuse(XferRefuse),
    /// KEEPALIVE.
    Keepalive,
    /// MSG_REJECT.
    MsgReject(MsgReject),
}

impl Message {
    /// The message's type code.
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::SessInit(_) => MessageType::SessInit,
            Message::SessTerm(_) => MessageType::SessTerm,
            Message::XferSegment(_) => MessageType::XferSegment,
            Message::XferAck(_) => MessageType::XferAck,
            Message::XferRefuse(_) => MessageType::XferRefuse,
            Message::Keepalive => MessageType::Keepalive,
            Message::MsgReject(_) => MessageType::MsgReject,
        }
    }

    /// Appends the encoded message to `out`. Fails only if a variable-length field is longer
    /// than its length field can express; `out` is left unchanged then.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let result = self.encode_inner(out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn encode_inner(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        out.push(self.message_type().code());
        match self {
            Message::SessInit(init) => {
                out.put_u16(init.keepalive);
                out.put_u64(init.segment_mru);
                out.put_u64(init.transfer_mru);
                let id_len =
                    u16::try_from(init.node_id.len()).map_err(|_| EncodeError::TooLong {
                        field: "node id",
                        len: init.node_id.len() as u64,
                        max: u64::from(u16::MAX),
                    })?;
                out.put_u16(id_len);
                out.extend_from_slice(init.node_id.as_bytes());
                encode_items(&init.extensions, "session extension items", out)?;
            }
            Message::SessTerm(term) => {
                out.push(term.flags.0);
                out.push(term.reason.code());
            }
            Message::XferSegment(seg) => {
                out.pop(); // the header encoder writes the type code itself
                SegmentHeader {
                    flags: seg.flags,
                    transfer_id: seg.transfer_id,
                    extensions: seg.extensions.clone(),
                    data_len: seg.data.len() as u64,
                }
                .encode(out)?;
                out.extend_from_slice(&seg.data);
            }
            Message::XferAck(ack) => {
                out.push(ack.flags.0);
                out.put_u64(ack.transfer_id);
                out.put_u64(ack.acknowledged_len);
            }
            Message::XferRefuse(refuse) => {
                out.push(refuse.reason.code());
                out.put_u64(refuse.transfer_id);
            }
            Message::Keepalive => {}
            Message::MsgReject(reject) => {
                out.push(reject.reason.code());
                out.push(reject.rejected_type);
            }
        }
        Ok(())
    }
}
